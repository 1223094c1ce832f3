//! `maos demo`, run as a user runs it: the Claude Code session replayed through real
//! `maos hook` processes (`maos demo hooks`), and the whole demo. The demo makes its own
//! throw-away project and daemon under `TMPDIR`, which here is inside the test's temporary
//! directory; the checks look for facts (the denial names the file and its holder, the spawn
//! tree, the event types), not for the narration's wording.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::{DEADLINE, Env, describe, maos_bin, run_with_timeout, wait_until};

/// The whole demo runs dozens of processes; a hang is a bug, a slow machine is not.
const DEMO_TIMEOUT: Duration = Duration::from_secs(180);

/// Live `maosd` processes whose `MAOS_HOME` lies under `tmp` (the demo's own daemons).
#[cfg(target_os = "linux")]
fn demo_daemons(tmp: &Path) -> Vec<u32> {
    let mut needle = b"MAOS_HOME=".to_vec();
    needle.extend_from_slice(tmp.as_os_str().as_encoded_bytes());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| {
            std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "maosd")
        })
        .filter(|&pid| maos_tests::alive(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v.starts_with(&needle[..])))
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn demo_daemons(_tmp: &Path) -> Vec<u32> {
    Vec::new()
}

/// Kills any daemon the demo left behind, also when the test failed half-way.
struct Leftovers(PathBuf);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in demo_daemons(&self.0) {
            maos_tests::kill9(pid);
        }
    }
}

/// The demo's throw-away directories (`maos-demo-*`) under `tmp`.
fn demo_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .expect("read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("maos-demo-"))
        })
        .collect()
}

/// Run `maos demo ARGS` with `TMPDIR` in the test's directory; it must succeed and stop its
/// daemon. Its stdout, and the `TMPDIR` used.
fn demo(env: &Env, args: &[&str]) -> (String, PathBuf) {
    let tmp = env.root().join("tmp");
    std::fs::create_dir_all(&tmp).expect("TMPDIR");
    let _leftovers = Leftovers(tmp.clone());
    let mut cmd = env.command(&maos_bin());
    cmd.arg("demo").args(args).env("TMPDIR", &tmp);
    let out = run_with_timeout(cmd, DEMO_TIMEOUT);
    assert!(
        out.status.success(),
        "maos demo {args:?} failed: {}",
        describe(&out)
    );
    wait_until(DEADLINE, "the demo's daemons have exited", || {
        demo_daemons(&tmp).is_empty()
    });
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    (stdout, tmp)
}

/// The lines of the first `$ maos CMD` block (up to the blank line that ends it).
fn block<'a>(out: &'a str, cmd: &str) -> Vec<&'a str> {
    let mut lines = out.lines().skip_while(|l| l.trim_end() != cmd);
    assert!(lines.next().is_some(), "no `{cmd}` in the output:\n{out}");
    lines.take_while(|l| !l.trim().is_empty()).collect()
}

/// Column of the tree mark `└` on a `maos ps` agent line.
fn depth(line: &str) -> usize {
    line.find('└')
        .unwrap_or_else(|| panic!("not an agent line: {line}"))
}

/// The replay's checks: the conflicting edit denied naming file and holder, the spawn tree
/// with locks, the timeline's event types, and the orchestrator resumable at the end.
fn check_replay(out: &str) {
    let lines: Vec<&str> = out.lines().collect();
    let denied = lines
        .iter()
        .position(|l| l.contains("denied") && l.contains("src/auth/limit.rs"))
        .unwrap_or_else(|| panic!("no denied write of src/auth/limit.rs:\n{out}"));
    let reason = lines.get(denied + 1).copied().unwrap_or_default();
    assert!(
        reason.contains("src/auth/limit.rs") && reason.contains("backend"),
        "the denial's reason should name the file and its holder (backend): {reason:?}\n{out}"
    );
    assert!(
        lines[denied + 1..]
            .iter()
            .any(|l| l.contains("src/auth/limit.rs") && l.contains("allowed")),
        "the retried edit should be allowed after backend stops:\n{out}"
    );

    let ps = block(out, "$ maos ps");
    let orch = ps
        .iter()
        .position(|l| l.contains("orchestrator"))
        .unwrap_or_else(|| panic!("no orchestrator in `maos ps`:\n{}", ps.join("\n")));
    for (role, file) in [
        ("backend-engineer", "src/auth/limit.rs"),
        ("qa-engineer", "tests/limit_test.rs"),
    ] {
        let at = ps
            .iter()
            .position(|l| l.contains(role))
            .unwrap_or_else(|| panic!("no {role} in `maos ps`:\n{}", ps.join("\n")));
        assert!(
            at > orch && depth(ps[at]) > depth(ps[orch]),
            "{role} should be under the orchestrator:\n{}",
            ps.join("\n")
        );
        assert!(
            ps[at + 1..]
                .iter()
                .take_while(|l| !l.contains('└'))
                .any(|l| l.contains("lock") && l.contains(file)),
            "{role} should hold {file}:\n{}",
            ps.join("\n")
        );
    }

    let events = block(out, "$ maos events").join("\n");
    for kind in [
        "lock_acquired",
        "tool_denied",
        "lock_released",
        "agent_completed",
    ] {
        assert!(
            events.contains(kind),
            "no {kind} in the timeline:\n{events}"
        );
    }

    let end = out
        .rfind("SessionEnd")
        .unwrap_or_else(|| panic!("no SessionEnd:\n{out}"));
    assert!(
        out[end..]
            .lines()
            .any(|l| l.contains("orchestrator") && l.contains("resumable")),
        "after SessionEnd the orchestrator should be resumable:\n{}",
        &out[end..]
    );
}

#[test]
fn the_hook_replay_denies_the_conflicting_write_and_shows_the_spawn_tree() {
    let env = Env::new();
    let (out, tmp) = demo(&env, &["hooks", "--keep"]);
    check_replay(&out);
    assert!(
        !out.contains("$ maos session create"),
        "`demo hooks` should not run the CLI tour:\n{out}"
    );

    // The allowed writes really happened on disk, qa's edit after backend's write.
    let dirs = demo_dirs(&tmp);
    assert_eq!(dirs.len(), 1, "one kept demo directory: {dirs:?}");
    let project = dirs[0].join("project");
    let limiter = std::fs::read_to_string(project.join("src/auth/limit.rs")).expect("limit.rs");
    assert!(
        limiter.contains("pub struct Limiter") && limiter.contains("#[derive(Debug)]"),
        "limit.rs should hold backend's write and qa's later edit:\n{limiter}"
    );
    assert!(
        project.join("tests/limit_test.rs").is_file(),
        "qa's test file should be on disk"
    );
}

#[test]
fn the_full_demo_replays_hooks_first_then_tours_the_cli_and_cleans_up() {
    let env = Env::new();
    let (out, tmp) = demo(&env, &[]);
    check_replay(&out);
    let replay = out.find("PreToolUse").expect("the hook replay ran");
    let tour = out
        .find("$ maos session create")
        .unwrap_or_else(|| panic!("the CLI tour should run:\n{out}"));
    assert!(replay < tour, "the hook replay comes first:\n{out}");
    assert!(
        demo_dirs(&tmp).is_empty(),
        "without --keep the demo removes its directories: {:?}",
        demo_dirs(&tmp)
    );
}

#[test]
fn an_unknown_demo_part_is_refused() {
    let env = Env::new();
    let mut cmd = env.command(&maos_bin());
    cmd.args(["demo", "everything"])
        .env("TMPDIR", env.root().join("user"));
    let out = run_with_timeout(cmd, DEMO_TIMEOUT);
    assert!(!out.status.success(), "{}", describe(&out));
}
