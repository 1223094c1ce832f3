//! `maos hook` through real processes: the Claude Code fixture replayed line by line against a
//! real daemon, denials on paused sessions, malformed input, stdin left open, and the daemon
//! being unreachable (fail open, or closed on request).

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, maos_bin};
use serde_json::{Value, json};

const DEADLINE: Duration = Duration::from_secs(20);

/// Run `maos hook` with `input` on stdin; with `keep_open`, stdin is not closed afterwards.
fn hook_with(env: &Env, input: &Value, vars: &[(&str, &str)], keep_open: bool) -> Output {
    let mut cmd = env.command(&maos_bin());
    cmd.arg("hook")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for (k, v) in vars {
        cmd.env(k, v);
    }
    let mut child = cmd.spawn().expect("spawn maos hook");
    let mut stdin = child.stdin.take().expect("stdin");
    stdin
        .write_all(input.to_string().as_bytes())
        .expect("write hook input");
    let _open = if keep_open { Some(stdin) } else { None };
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(DEADLINE) {
        Ok(out) => out.expect("maos hook output"),
        Err(_) => {
            maos_tests::kill9(pid);
            panic!("maos hook did not answer within {DEADLINE:?}");
        }
    }
}

fn hook(env: &Env, input: &Value) -> Output {
    hook_with(env, input, &[], false)
}

/// The decision printed on stdout: "deny", or "" for no decision.
fn decision(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return String::new();
    }
    let v: Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("stdout {text:?}: {e}"));
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

fn fixture(name: &str, project: &str) -> Vec<(String, Value)> {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/claude-code")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l.replace("{{PROJECT}}", project)).expect("fixture line");
            (
                v["expect"].as_str().unwrap_or_default().to_string(),
                v["input"].clone(),
            )
        })
        .collect()
}

#[test]
fn the_two_subagent_fixture_gets_the_expected_answers() {
    let env = Env::new();
    let project = env.project.to_string_lossy().into_owned();
    for (i, (expect, input)) in fixture("session-two-subagents.jsonl", &project)
        .into_iter()
        .enumerate()
    {
        let out = hook(&env, &input);
        let what = format!(
            "line {} ({} {})",
            i + 1,
            input["hook_event_name"],
            input["tool_name"]
        );
        assert!(
            out.status.success(),
            "{what}: exit {:?}, stderr {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        let d = decision(&out);
        match expect.as_str() {
            "deny" => {
                assert_eq!(d, "deny", "{what} must be denied");
                let v: Value = serde_json::from_slice(&out.stdout).expect("deny JSON");
                let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
                    .as_str()
                    .unwrap_or("");
                assert!(reason.starts_with("maos: "), "{what}: reason {reason:?}");
            }
            "allow" | "none" => assert_ne!(
                d,
                "deny",
                "{what} must not be denied: {}",
                String::from_utf8_lossy(&out.stdout)
            ),
            "context-or-none" => assert_ne!(d, "deny", "{what}"),
            other => panic!("unknown expectation {other}"),
        }
    }
    // What the daemon now knows: one session named by the first prompt, the orchestrator
    // resumable after SessionEnd, both subagents completed under it, no lock left behind.
    let ps = env.maos_json(&["ps"]);
    let s = &ps[0];
    assert_eq!(
        s["objective"],
        "Add rate limiting to the login endpoint; backend and tests in parallel"
    );
    let agents = s["agents"].as_array().expect("agents");
    let orch = agents
        .iter()
        .find(|a| a["role"] == "orchestrator")
        .expect("orchestrator");
    assert_eq!(orch["state"], "resumable");
    for role in ["backend-engineer", "qa-engineer"] {
        let a = agents
            .iter()
            .find(|a| a["role"] == role)
            .unwrap_or_else(|| panic!("{role}"));
        assert_eq!(a["state"], "completed", "{role}");
        assert_eq!(
            a["parent"], orch["id"],
            "{role} hangs under the orchestrator"
        );
    }
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    let denied: Vec<Value> = env.events(&["--type", "tool_denied"]);
    assert_eq!(
        denied.len(),
        2,
        "both denials are on the timeline: {denied:?}"
    );
    assert_eq!(denied[0]["data"]["why"], "lock_conflict");
    assert_eq!(denied[1]["data"]["why"], "path_outside_workspace");
    // No file content reaches the database: not in the file, not in its WAL. The path that
    // is stored must be found in the same bytes, so the search really sees the data.
    let mut bytes = std::fs::read(env.db_path()).expect("db");
    let wal = env.db_path().with_extension("db-wal");
    bytes.extend(std::fs::read(&wal).unwrap_or_default());
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"tests/limit_test.rs"), "the written path is stored");
    assert!(!has(b"pub struct Limiter;"), "the written content is not");
}

fn write_input(env: &Env, session: &str, agent: Option<&str>, file: &str) -> Value {
    let mut v = json!({
        "session_id": session, "cwd": env.project, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_x",
        "tool_input": {"file_path": env.project.join(file), "content": "x"},
        "an_unknown_field": {"nested": [1, 2]},
    });
    if let Some(a) = agent {
        v["agent_id"] = json!(a);
        v["agent_type"] = json!("coder");
    }
    v
}

#[test]
fn a_paused_session_denies_writes_until_resumed() {
    let env = Env::new();
    let start = json!({"session_id": "s-1", "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    assert!(hook(&env, &start).status.success());
    env.maos_json(&["pause", "--reason", "review"]);
    let out = hook(&env, &write_input(&env, "s-1", None, "a.rs"));
    assert_eq!(decision(&out), "deny");
    assert!(String::from_utf8_lossy(&out.stdout).contains("maos resume"));
    env.maos_json(&["resume"]);
    assert_eq!(
        decision(&hook(&env, &write_input(&env, "s-1", None, "a.rs"))),
        ""
    );
}

#[test]
fn two_claude_sessions_in_one_project_conflict_on_one_file() {
    let env = Env::new();
    assert_eq!(
        decision(&hook(
            &env,
            &write_input(&env, "claude-A", None, "src/x.rs")
        )),
        ""
    );
    let out = hook(&env, &write_input(&env, "claude-B", None, "src/x.rs"));
    assert_eq!(decision(&out), "deny");
    assert!(String::from_utf8_lossy(&out.stdout).contains("src/x.rs"));
    // A stray subagent id never announced by SubagentStart is registered on the spot.
    assert_eq!(
        decision(&hook(
            &env,
            &write_input(&env, "claude-A", Some("stray-1"), "src/y.rs")
        )),
        ""
    );
    let ps = env.maos_json(&["ps"]);
    assert!(
        ps[0]["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .any(|a| a["role"] == "coder")
    );
}

#[test]
fn bad_input_is_a_non_blocking_error_and_stdin_left_open_still_answers() {
    let env = Env::new();
    for garbage in [
        &b"not json"[..],
        b"",
        b"[1,2]",
        b"{\"hook_event_name\":\"PreToolUse\"}",
    ] {
        let mut cmd = env.command(&maos_bin());
        cmd.arg("hook")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(garbage)
            .expect("write");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{:?}: exit 1 never blocks",
            String::from_utf8_lossy(garbage)
        );
        assert!(out.stdout.is_empty());
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
    // `hook_with` fails the test if the hook does not answer within DEADLINE.
    let out = hook_with(&env, &write_input(&env, "s-open", None, "a.rs"), &[], true);
    assert!(out.status.success());
    assert_eq!(decision(&out), "", "the write is allowed");
}

#[test]
fn an_unreachable_daemon_fails_open_or_closed_on_request() {
    let env = Env::new();
    let input = write_input(&env, "s-1", None, "a.rs");
    let out = hook_with(&env, &input, &[("MAOS_NO_AUTOSTART", "1")], false);
    assert!(out.status.success());
    assert_eq!(decision(&out), "", "fail open: the tool runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("systemMessage JSON");
    assert!(
        v["systemMessage"]
            .as_str()
            .unwrap_or("")
            .contains("not enforced")
    );
    let out = hook_with(
        &env,
        &input,
        &[("MAOS_NO_AUTOSTART", "1"), ("MAOS_HOOK_FAIL", "closed")],
        false,
    );
    assert!(out.status.success());
    assert_eq!(decision(&out), "deny");
    assert!(
        !env.socket.exists(),
        "with MAOS_NO_AUTOSTART=1 nothing starts a daemon"
    );
}
