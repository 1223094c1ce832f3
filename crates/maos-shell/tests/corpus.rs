//! The corpora: ordinary commands write nothing (no false denials), writing commands name
//! what they write.

use maos_shell::{GitKind, analyze};

const ORDINARY: &str = include_str!("corpus/ordinary.txt");
const WRITING: &str = include_str!("corpus/writing.txt");

#[test]
fn ordinary_commands_write_nothing() {
    let mut count = 0;
    let mut failures = Vec::new();
    for cmd in ORDINARY
        .lines()
        .filter(|l| !l.trim().is_empty() && !l.starts_with('#'))
    {
        count += 1;
        let a = analyze(cmd);
        let git_harmful = a
            .git
            .iter()
            .any(|g| !matches!(g.kind, GitKind::ReadOnly | GitKind::Other));
        if a.error.is_some() || !a.writes.is_empty() || !a.patches.is_empty() || git_harmful {
            failures.push(format!("{cmd}\n    {a:?}"));
        }
    }
    assert!(
        count >= 150,
        "the corpus holds {count} commands, fewer than 150"
    );
    assert!(
        failures.is_empty(),
        "false denials:\n{}",
        failures.join("\n")
    );
}

/// One entry of writing.txt.
struct Entry {
    command: String,
    paths: Vec<String>,
    patches: Vec<String>,
}

fn entries() -> Vec<Entry> {
    let mut out: Vec<Entry> = Vec::new();
    for line in WRITING.lines() {
        if let Some(cmd) = line.strip_prefix("$ ") {
            out.push(Entry {
                command: cmd.to_owned(),
                paths: vec![],
                patches: vec![],
            });
        } else if let Some(e) = out.last_mut() {
            if let Some(more) = line.strip_prefix("| ") {
                e.command.push('\n');
                e.command.push_str(more);
            } else if let Some(p) = line.strip_prefix("> ") {
                e.paths.push(p.to_owned());
            } else if let Some(p) = line.strip_prefix("! ") {
                e.patches.push(p.to_owned());
            }
        }
    }
    out
}

#[test]
fn writing_commands_name_their_targets() {
    let entries = entries();
    assert!(entries.len() >= 40, "{} entries", entries.len());
    let mut failures = Vec::new();
    for e in &entries {
        let a = analyze(&e.command);
        let mut got: Vec<&str> = a.writes.iter().map(|w| w.path.as_str()).collect();
        got.sort_unstable();
        got.dedup();
        let mut want: Vec<&str> = e.paths.iter().map(String::as_str).collect();
        want.sort_unstable();
        let patches_ok = e
            .patches
            .iter()
            .all(|p| a.patches.iter().any(|b| b.starts_with(p.as_str())))
            && a.patches.len() == e.patches.len();
        if a.error.is_some() || got != want || !patches_ok {
            failures.push(format!("{}\n    want {want:?}\n    got  {a:?}", e.command));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
