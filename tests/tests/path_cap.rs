//! One cap on a path's length on every way in (issue 30, defect 8): a path longer than 4,096
//! bytes, as the caller names it, is refused in one line by `maos lock` and by the daemon
//! (lock acquire, release and check on the wire, a hook's writes, Codex `apply_patch` files,
//! the events' `--path` filter), and nothing is recorded: no lock, no event. A path of 4,096
//! bytes is taken. (MCP's tools refuse the same, through the same constant.)

use std::process::Output;

use maos_tests::{Env, Raw, Value, describe, json};

/// The cap, as the refusals name it.
const CAP: usize = 4096;

/// A relative path of exactly `len` bytes whose components each fit a file name (≤ 200).
fn long_path(len: usize) -> String {
    let mut s = String::with_capacity(len);
    while len - s.len() > 200 {
        s.push_str(&"d".repeat(199));
        s.push('/');
    }
    s.push_str(&"f".repeat(len - s.len()));
    assert_eq!(s.len(), len);
    s
}

/// What a client can see of the project: its locks and the whole timeline.
fn snapshot(env: &Env) -> (Value, Vec<Value>) {
    (env.maos_json(&["lock", "list"]), env.events(&[]))
}

/// A refusal on one line that names the size and the limit.
fn assert_refusal(what: &str, msg: &str, len: usize) {
    assert!(
        !msg.contains('\n') && !msg.contains('\r'),
        "{what}: {msg:?}"
    );
    assert!(
        msg.len() < 400,
        "{what}: a long refusal ({} bytes)",
        msg.len()
    );
    assert!(
        msg.contains(&len.to_string()) && msg.contains(&format!("{CAP}-byte limit")),
        "{what}: {msg}"
    );
}

fn stderr_line(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).trim_end().to_string()
}

#[test]
fn maos_lock_refuses_a_path_over_the_cap_and_takes_one_at_it() {
    let env = Env::new();
    env.session("caps", &[]);
    let agent = env.agent(None, "coder", "long paths");
    let before = snapshot(&env);
    // 128 KiB is the most one argument may take on Linux.
    for len in [CAP + 1, 100_000] {
        let path = long_path(len);
        for verb in [
            &["lock", "acquire", "--agent", &agent][..],
            &["lock", "release", "--agent", &agent],
            &["lock", "check", "--agent", &agent],
        ] {
            let mut args = verb.to_vec();
            args.push(&path);
            let out = env.maos(&args);
            assert!(!out.status.success(), "{verb:?} {len}: {}", describe(&out));
            assert_refusal(&format!("{verb:?} {len}"), &stderr_line(&out), len);
        }
    }
    assert_eq!(snapshot(&env), before, "a refused path changed something");
    // At the cap: taken, under that key.
    let path = long_path(CAP);
    let lock = env.maos_json(&["lock", "acquire", "--agent", &agent, &path]);
    assert_eq!(lock["path"], path.as_str(), "{lock}");
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(locks["locks"][0]["path"], path.as_str());
}

#[test]
fn the_daemon_refuses_a_megabyte_path_on_the_wire_and_records_nothing() {
    let env = Env::new();
    env.session("caps", &[]);
    let agent = env.agent(None, "coder", "long paths");
    let before = snapshot(&env);
    let root = Env::project_root(&env.project);
    let mut raw = Raw::connect(&env.socket);
    raw.hello();
    for len in [CAP + 1, 1 << 20] {
        let path = long_path(len);
        for body in [
            json!({"request": "lock_acquire", "agent": agent, "path": path, "mode": "write"}),
            json!({"request": "lock_release", "agent": agent, "path": path}),
            json!({"request": "lock_check", "agent": agent, "path": path, "mode": "write"}),
            json!({"request": "events", "filter": {"path": path}}),
        ] {
            let what = format!("{} of {len} bytes", body["request"]);
            let r = raw.request(Some(&root), body);
            assert_eq!(r["Err"]["code"], "bad_request", "{what}: {r}");
            assert_refusal(&what, r["Err"]["message"].as_str().unwrap_or(""), len);
        }
    }
    assert_eq!(snapshot(&env), before, "a refused path changed something");
    // The events' filter takes a path as long as the cap.
    let r = raw.request(
        Some(&root),
        json!({"request": "events", "filter": {"path": long_path(CAP)}}),
    );
    assert_eq!(r["Ok"]["type"], "events", "{r}");
}

fn denial(out: &Output) -> Option<String> {
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).ok()?;
    let o = &v["hookSpecificOutput"];
    (o["permissionDecision"] == "deny").then(|| {
        o["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default()
            .to_string()
    })
}

#[test]
fn a_hook_write_over_the_cap_is_denied_and_nothing_is_recorded() {
    let env = Env::new();
    let cli = "claude-long";
    let start = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    env.hook("claude", &start);
    let before = snapshot(&env);
    // The absolute path the tool names: the project's own path, then enough to make `len`.
    let prefix = format!("{}/", env.project.display());
    let absolute = |len: usize| format!("{prefix}{}", long_path(len - prefix.len()));
    for len in [CAP + 1, 1 << 20] {
        let write = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "PreToolUse",
                           "tool_name": "Write", "tool_use_id": format!("toolu_w{len}"),
                           "tool_input": {"file_path": absolute(len), "content": "x"}});
        let out = env.hook("claude", &write);
        let why = denial(&out).unwrap_or_else(|| panic!("Write {len}: {}", describe(&out)));
        assert_refusal(&format!("Write {len}"), &why, len);
        // A Codex patch that adds such a file.
        let patch = format!(
            "*** Begin Patch\n*** Add File: {}\n+x\n*** End Patch\n",
            long_path(len)
        );
        let codex = json!({"session_id": "codex-long", "turn_id": "t1", "hook_event_name": "PreToolUse",
                           "cwd": env.project, "model": "gpt-5.5", "permission_mode": "bypassPermissions",
                           "tool_name": "apply_patch", "tool_input": {"command": patch},
                           "tool_use_id": format!("call_{len}")});
        let out = env.hook("codex", &codex);
        let why = denial(&out).unwrap_or_else(|| panic!("apply_patch {len}: {}", describe(&out)));
        assert_refusal(&format!("apply_patch {len}"), &why, len);
    }
    assert_eq!(snapshot(&env), before, "a refused write changed something");
    // At the cap (the absolute path, as the tool names it): allowed, and its lock taken.
    let write = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "PreToolUse",
                       "tool_name": "Write", "tool_use_id": "toolu_cap",
                       "tool_input": {"file_path": absolute(CAP), "content": "x"}});
    let out = env.hook("claude", &write);
    assert_eq!(denial(&out), None, "{}", describe(&out));
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(
        locks["locks"][0]["path"],
        long_path(CAP - prefix.len()).as_str(),
        "{locks}"
    );
}
