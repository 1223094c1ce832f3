//! Cursor: where maos's hooks live, and `install-hooks --cursor` / `uninstall-hooks --cursor`.
//!
//! Cursor's hooks file (`.cursor/hooks.json` in the project, `~/.cursor/hooks.json` for the
//! user) is `{"version": 1, "hooks": {"<event>": [{"command": …, "timeout": …,
//! "matcher": …}]}}`: entries sit directly in each event's list. One event name
//! `cursor-agent` does not know makes it ignore the whole file, so maos writes only the
//! documented events it uses, and `doctor` names any unknown one it finds. Install merges
//! (every other entry and key is kept); uninstall removes maos's entries only, and the file
//! when nothing else is left in it. Built to Cursor's documented contract: no Cursor binary
//! runs in maos's tests.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value, json};

use crate::install::{self, Consent, Installed};

/// Seconds Cursor gives the hook (longer than the hook's own 5 s deadline, so the hook
/// always answers first).
const TIMEOUT_S: u64 = 10;

/// Cursor's events maos listens to, and the tools each entry matches (`None`: every call).
/// The shell is heard once, in `preToolUse` (tool `Shell`): `beforeShellExecution`, which
/// Cursor also fires for the same command, is not installed, so one call is never answered
/// or counted twice. Only `preToolUse`'s `Task` starts a subagent; reads are not matched.
const EVENTS: &[(&str, Option<&str>)] = &[
    ("sessionStart", None),
    ("beforeSubmitPrompt", None),
    (
        "preToolUse",
        Some("Shell|Write|StrReplace|Edit|Delete|Task"),
    ),
    ("postToolUse", Some("Shell|Write|StrReplace|Edit|Delete")),
    ("subagentStart", None),
    ("subagentStop", None),
    ("stop", None),
    ("preCompact", None),
    ("sessionEnd", None),
];

/// Every event name Cursor documents (agent, Tab and application hooks). Any other name in
/// the file makes `cursor-agent` skip the whole file.
const KNOWN: &[&str] = &[
    "sessionStart",
    "sessionEnd",
    "preToolUse",
    "postToolUse",
    "postToolUseFailure",
    "subagentStart",
    "subagentStop",
    "beforeShellExecution",
    "afterShellExecution",
    "beforeMCPExecution",
    "afterMCPExecution",
    "beforeReadFile",
    "afterFileEdit",
    "beforeSubmitPrompt",
    "preCompact",
    "stop",
    "afterAgentResponse",
    "afterAgentThought",
    "beforeTabFileRead",
    "afterTabFileEdit",
    "workspaceOpen",
];

/// The file maos's hooks for Cursor are in: the project's (`.cursor/hooks.json`) or the user's
/// (`~/.cursor/hooks.json`).
pub fn settings_path(root: &Path, user: bool) -> Result<PathBuf, String> {
    let base = if user {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or("HOME is not set: cannot find the user's settings")?
    } else {
        root.to_path_buf()
    };
    Ok(base.join(".cursor/hooks.json"))
}

/// maos's entry for `event` (its matcher, if any).
fn entry(matcher: Option<&str>) -> Value {
    let mut e =
        json!({ "command": install::command(maos_proto::Cli::Cursor), "timeout": TIMEOUT_S });
    if let Some(m) = matcher {
        e["matcher"] = json!(m);
    }
    e
}

/// An entry of maos's (any version's).
fn is_ours(entry: &Value) -> bool {
    entry["command"]
        .as_str()
        .is_some_and(|c| c.trim_start().starts_with("maos hook"))
}

/// The file's `hooks` object (absent: none), or why Cursor cannot read it.
fn hooks_of<'a>(
    path: &Path,
    m: &'a Map<String, Value>,
) -> Result<Option<&'a Map<String, Value>>, String> {
    match m.get("hooks") {
        None => Ok(None),
        Some(Value::Object(h)) => Ok(Some(h)),
        Some(_) => Err(format!(
            "{}: \"hooks\" is not an object; left unchanged",
            path.display()
        )),
    }
}

/// The event names in the file that Cursor does not know (each disables the whole file).
fn unknown_events(hooks: &Map<String, Value>) -> Vec<String> {
    hooks
        .keys()
        .filter(|k| !KNOWN.contains(&k.as_str()))
        .cloned()
        .collect()
}

fn unknown_text(path: &Path, unknown: &[String]) -> String {
    format!(
        "{}: Cursor does not know the event{} {}, and cursor-agent then ignores the whole file (maos's hooks with it): remove or rename {}",
        path.display(),
        if unknown.len() == 1 { "" } else { "s" },
        unknown.join(", "),
        if unknown.len() == 1 { "it" } else { "them" },
    )
}

/// How far maos's hooks are installed in `path` (a file Cursor cannot read, or would skip
/// for an unknown event name, is an error).
pub fn installed(path: &Path) -> Result<Installed, String> {
    let m = install::read(path)?;
    let Some(hooks) = hooks_of(path, &m)? else {
        return Ok(Installed::No);
    };
    let missing: Vec<&'static str> = EVENTS
        .iter()
        .filter(|(event, matcher)| {
            !hooks
                .get(*event)
                .and_then(Value::as_array)
                .is_some_and(|list| {
                    list.iter().any(|e| {
                        is_ours(e) && matcher.is_none_or(|m| e["matcher"].as_str() == Some(m))
                    })
                })
        })
        .map(|(event, _)| *event)
        .collect();
    if missing.len() < EVENTS.len() {
        let unknown = unknown_events(hooks);
        if !unknown.is_empty() {
            return Err(unknown_text(path, &unknown));
        }
        if let Some(v) = m.get("version").filter(|v| **v != json!(1)) {
            return Err(format!(
                "{}: version {v}, and maos's hooks are Cursor's version 1",
                path.display()
            ));
        }
    }
    Ok(match missing.len() {
        0 => Installed::Yes,
        n if n == EVENTS.len() => Installed::No,
        _ => Installed::Partly(missing),
    })
}

/// Remove maos's entries; drop the event lists this leaves empty, and `hooks` if it empties.
/// True when something was removed.
fn strip(m: &mut Map<String, Value>) -> bool {
    install::strip_entries(m, is_ours)
}

/// The file `path` with maos's entries in place of any older ones.
fn with_hooks(path: &Path) -> Result<Map<String, Value>, String> {
    let mut m = install::read(path)?;
    hooks_of(path, &m)?;
    match m.get("version") {
        None => {
            m.insert("version".into(), json!(1));
        }
        Some(v) if *v == json!(1) => {}
        Some(v) => {
            return Err(format!(
                "{}: version {v}; maos writes Cursor's version 1 hooks; left unchanged",
                path.display()
            ));
        }
    }
    strip(&mut m);
    let hooks = m
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        unreachable!("checked above");
    };
    for (event, matcher) in EVENTS {
        match hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(list) => list.push(entry(*matcher)),
            _ => {
                return Err(format!(
                    "{}: hooks.{event} is not a list; left unchanged",
                    path.display()
                ));
            }
        }
    }
    Ok(m)
}

/// `install-hooks --cursor`: the line to print.
pub fn install(root: &Path, path: &Path, user: bool, consent: Consent) -> Result<String, String> {
    let _ = (root, consent);
    let m = with_hooks(path)?;
    let mut lines = vec![if m == install::read(path)? {
        format!(
            "maos hooks already installed in {} (nothing changed)",
            path.display()
        )
    } else {
        install::write(path, &m)?;
        format!("maos hooks installed in {}", path.display())
    }];
    if !user {
        lines.push("Cursor runs a project's hooks only in a trusted workspace".into());
    }
    if let Some(Value::Object(hooks)) = m.get("hooks") {
        let unknown = unknown_events(hooks);
        if !unknown.is_empty() {
            lines.push(format!("warning: {}", unknown_text(path, &unknown)));
        }
    }
    Ok(lines.join("\n"))
}

/// `uninstall-hooks --cursor`: the line to print. The file goes when nothing but its version
/// is left (back to what it was, if install made or changed it).
pub fn uninstall(root: &Path, path: &Path) -> Result<String, String> {
    let _ = root;
    let mut m = install::read(path)?;
    hooks_of(path, &m)?;
    if !strip(&mut m) {
        return Ok(format!("no maos hooks in {}", path.display()));
    }
    let done = format!("maos hooks removed from {}", path.display());
    if !m.keys().all(|k| k == "version") {
        install::write_back_one(path, &m)?;
        return Ok(done);
    }
    match crate::undo::Notes::load().before(path) {
        // Install made the file: it goes, with the directories made for it.
        Some(before) if before.text.is_none() => {
            install::write_back(&[(path, "{}\n".to_string())])?;
        }
        // Install changed it: back to its text before, when that meant the same.
        Some(_) => install::write_back_one(path, &m)?,
        None => std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?,
    }
    Ok(done)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("maos-cursor-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        dir.join("hooks.json")
    }

    #[test]
    fn install_writes_only_documented_events_and_keeps_every_other_entry() {
        let f = temp("merge");
        let theirs = json!({"version": 1, "hooks": {
            "afterFileEdit": [{"command": "./format.sh"}],
            "preToolUse": [{"command": "./guard.sh", "matcher": "Shell"}]
        }});
        std::fs::write(&f, theirs.to_string()).unwrap();
        let m = with_hooks(&f).unwrap();
        let hooks = m["hooks"].as_object().unwrap();
        for k in hooks.keys() {
            assert!(KNOWN.contains(&k.as_str()), "{k} is not a documented event");
        }
        assert!(
            !hooks.contains_key("beforeShellExecution"),
            "the shell is heard once"
        );
        assert_eq!(hooks["afterFileEdit"], theirs["hooks"]["afterFileEdit"]);
        assert_eq!(hooks["preToolUse"][0], theirs["hooks"]["preToolUse"][0]);
        assert_eq!(hooks["preToolUse"][1]["command"], "maos hook --cli cursor");
        assert!(hooks["preToolUse"][1].get("failClosed").is_none());
        // Twice is once.
        std::fs::write(&f, install::json_text(&m).unwrap()).unwrap();
        assert_eq!(with_hooks(&f).unwrap(), m);
        assert_eq!(installed(&f).unwrap(), Installed::Yes);
        let mut stripped = m.clone();
        assert!(strip(&mut stripped));
        assert_eq!(Value::Object(stripped), theirs);
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn a_file_cursor_would_skip_or_cannot_read_is_named() {
        let f = temp("bad");
        std::fs::write(
            &f,
            r#"{"version": 1, "hooks": {"beforeShellExec": [{"command": "x"}]}}"#,
        )
        .unwrap();
        std::fs::write(&f, install::json_text(&with_hooks(&f).unwrap()).unwrap()).unwrap();
        let e = installed(&f).unwrap_err();
        assert!(
            e.contains("beforeShellExec") && e.contains("ignores the whole file"),
            "{e}"
        );
        std::fs::write(&f, r#"{"version": 2, "hooks": {}}"#).unwrap();
        assert!(with_hooks(&f).unwrap_err().contains("version 2"));
        std::fs::write(&f, r#"{"version": 1, "hooks": []}"#).unwrap();
        assert!(with_hooks(&f).unwrap_err().contains("not an object"));
        assert!(installed(&f).is_err());
        std::fs::write(&f, r#"{"version": 1, "hooks": {"stop": {}}}"#).unwrap();
        assert!(
            with_hooks(&f)
                .unwrap_err()
                .contains("hooks.stop is not a list")
        );
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }

    #[test]
    fn an_older_maos_entry_counts_as_partly_installed() {
        let f = temp("partly");
        let mut m = with_hooks(&f).unwrap();
        m["hooks"]["preToolUse"][0]["matcher"] = json!("Write");
        std::fs::write(&f, Value::Object(m).to_string()).unwrap();
        assert_eq!(
            installed(&f).unwrap(),
            Installed::Partly(vec!["preToolUse"])
        );
        let _ = std::fs::remove_dir_all(f.parent().unwrap());
    }
}
