//! Cursor through the real `maos` and `maosd`: its documented hook input (the fixtures in
//! `tests/fixtures/cursor/`, built from Cursor's documented shapes: no Cursor binary runs
//! here) fed to `maos hook --cli cursor`; `install-hooks --cursor`, `doctor` and
//! `uninstall-hooks --cursor` on its `.cursor/hooks.json`; input maos cannot read refused in
//! one line with nothing recorded.

use std::path::{Path, PathBuf};
use std::process::Output;

use maos_tests::conformance::ps_agents;
use maos_tests::doctor::check;
use maos_tests::{Env, Value, describe, json};

const WINDOW_A: &str = "4f1c2a9e-7b3d-4e8a-b6c5-0d9e8f7a6b5c";

fn fixture(name: &str, project: &Path) -> Vec<(String, Value)> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/cursor")
        .join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let project = project.to_string_lossy();
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l.replace("{{PROJECT}}", &project)).expect("fixture line");
            (
                v["expect"].as_str().expect("expect").to_string(),
                v["input"].clone(),
            )
        })
        .collect()
}

/// `maos hook --cli cursor` with `input`, run from `/` as Cursor may: the project comes
/// from the input (its `workspace_roots`), not from the hook's directory.
fn hook(env: &Env, input: &Value) -> Output {
    env.hook_at(
        Path::new("/"),
        &["hook", "--cli", "cursor"],
        input.to_string().into_bytes(),
        &[],
        false,
    )
}

/// The hook's answer as JSON (`None`: it printed nothing).
fn answer(out: &Output) -> Option<Value> {
    let text = String::from_utf8_lossy(&out.stdout);
    let text = text.trim();
    (!text.is_empty()).then(|| {
        assert_eq!(text.lines().count(), 1, "one object: {text}");
        serde_json::from_str(text).unwrap_or_else(|e| panic!("{e}: {text}"))
    })
}

/// The reason of a Cursor denial, checked to be in both of its messages.
fn denied(out: &Output) -> Option<String> {
    let v = answer(out)?;
    (v["permission"] == "deny").then(|| {
        let reason = v["user_message"]
            .as_str()
            .expect("user_message")
            .to_string();
        assert_eq!(v["agent_message"], reason, "the reason in both: {v}");
        assert!(!reason.is_empty());
        reason
    })
}

/// The fixture's two windows: A's write held against B's edit, shell write and deletion
/// (each denied once, naming A), the subagent A starts hangs under A with its task, each
/// window's task is its first prompt, and both windows end.
#[test]
fn two_cursor_windows_are_locked_apart_and_end() {
    let env = Env::new();
    let mut reasons = Vec::new();
    for (i, (expect, input)) in fixture("two-windows.jsonl", &env.project)
        .iter()
        .enumerate()
    {
        let out = hook(&env, input);
        let what = format!("line {} ({})", i + 1, input["hook_event_name"]);
        assert!(out.status.success(), "{what}: {}", describe(&out));
        let got = answer(&out);
        match expect.as_str() {
            "deny" => reasons.push(
                denied(&out).unwrap_or_else(|| panic!("{what}: not denied: {}", describe(&out))),
            ),
            "allow" | "none" => assert_eq!(got, None, "{what}: {}", describe(&out)),
            "context-or-none" => {
                if let Some(v) = got {
                    let keys: Vec<&String> = v.as_object().expect("object").keys().collect();
                    assert_eq!(keys, ["additional_context"], "{what}: {v}");
                }
            }
            other => panic!("{what}: unknown expectation {other}"),
        }
        if input["hook_event_name"] == "preToolUse"
            && input["tool_input"]["file_path"]
                .as_str()
                .is_some_and(|p| p.ends_with("limit.rs"))
            && expect == "allow"
        {
            // The writer holds the file now.
            let locks = env.maos_json(&["lock", "list"]);
            assert!(
                locks["locks"]
                    .as_array()
                    .expect("locks")
                    .iter()
                    .any(|l| l["path"] == "src/auth/limit.rs"),
                "{what}: {locks}"
            );
        }
    }
    let all = ps_agents(&env);
    // The windows (no parent), in the order they started: A, then B.
    let mut windows: Vec<&Value> = all.iter().filter(|x| x["parent"].is_null()).collect();
    windows.sort_by_key(|w| w["started_at"].as_str().unwrap_or_default().to_string());
    assert_eq!(
        windows.len(),
        2,
        "two chats, two windows (the subagent is none): {all:?}"
    );
    let (a, b) = (windows[0].clone(), windows[1].clone());
    // Each window is its own agent, of Cursor, named by its person's first prompt.
    assert_ne!(a["id"], b["id"]);
    assert_eq!(a["cli"], "cursor", "{a}");
    assert_eq!(a["task"], "Add rate limiting to the login endpoint", "{a}");
    assert_eq!(b["task"], "Tidy the auth module", "{b}");
    // The three denials (edit, shell write, deletion) name the holder, window A.
    assert_eq!(reasons.len(), 3, "{reasons:?}");
    let short: String = a["id"].as_str().expect("id").chars().take(12).collect();
    for r in &reasons {
        assert!(r.contains("src/auth/limit.rs"), "{r}");
        assert!(
            r.contains(&format!("cursor ({short}), a Cursor window"))
                && r.contains("Add rate limiting to the login endpoint"),
            "the holder is named ({short}): {r}"
        );
    }
    // Each denied once on the timeline: Cursor's beforeShellExecution for the same shell
    // command neither denied nor counted again.
    let tool_denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(tool_denied.len(), 3, "{tool_denied:?}");
    assert!(
        tool_denied.iter().all(|e| e["agent_id"] == b["id"]),
        "{tool_denied:?}"
    );
    // The subagent A started: under A, with the task its Task call gave, completed.
    let sub = all
        .iter()
        .find(|x| x["parent"] == a["id"])
        .unwrap_or_else(|| panic!("no subagent under A: {all:?}"));
    assert_eq!(sub["role"], "generalPurpose", "{sub}");
    assert!(
        sub["task"]
            .as_str()
            .is_some_and(|t| t.contains("limiter tests")),
        "{sub}"
    );
    assert_eq!(sub["state"], "completed", "{sub}");
    // Both windows ended with their sessionEnd; nothing is held.
    assert_eq!(a["state"], "ended", "{a}");
    assert_eq!(b["state"], "ended", "{b}");
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// Input maos cannot read: exit 1 (Cursor lets the call through, as for any hook failure),
/// one line on stderr saying what is wrong, nothing on stdout, and nothing recorded.
#[test]
fn input_maos_cannot_read_is_refused_in_one_line_and_changes_nothing() {
    let env = Env::new();
    let good = json!({"conversation_id": WINDOW_A, "generation_id": "g", "hook_event_name": "preToolUse",
        "workspace_roots": [env.project], "cwd": "", "tool_name": "Write", "tool_use_id": "call_1",
        "tool_input": {"file_path": env.project.join("a.rs"), "content": "x"}});
    let mut cases: Vec<(Value, &str)> = Vec::new();
    let mut no_id = good.clone();
    no_id
        .as_object_mut()
        .expect("object")
        .remove("conversation_id");
    cases.push((no_id, "no conversation_id"));
    let mut number = good.clone();
    number["conversation_id"] = json!(12);
    cases.push((number, "conversation_id is not a string"));
    let mut roots = good.clone();
    roots["workspace_roots"] = json!({"0": "/"});
    cases.push((roots, "workspace_roots is not a list"));
    let mut unknown = good.clone();
    unknown["tool_name"] = json!("Teleport");
    cases.push((unknown, "unknown tool \"Teleport\""));
    let mut input = good.clone();
    input["tool_input"] = json!("a.rs");
    cases.push((input, "tool_input of Write is not an object"));
    for (input, says) in cases {
        let out = hook(&env, &input);
        assert_eq!(out.status.code(), Some(1), "{says}: {}", describe(&out));
        assert!(out.stdout.is_empty(), "{says}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{says}: {err}");
        assert!(
            err.starts_with("maos hook: hook input from Cursor: ") && err.contains(says),
            "{says}: {err}"
        );
        assert!(err.trim_end().ends_with("nothing was done"), "{err}");
    }
    // Nothing reached the daemon: no session, no lock.
    assert_eq!(env.maos_json(&["ps", "--all"]), json!([]));
    // The good input does get through (the cases above failed for what they changed).
    let out = hook(&env, &good);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        describe(&out)
    );
    assert_eq!(ps_agents(&env).len(), 1);
}

/// No daemon to ask: the call goes through with nothing printed (Cursor shows no message for
/// an allowed call), or with `MAOS_HOOK_FAIL=closed` the hook itself refuses a tool call in
/// Cursor's form. maos installs no `failClosed` (see `crate::cursor`): this is how a team
/// asks for fail-closed.
#[test]
fn an_unreachable_daemon_fails_open_or_closed_as_asked() {
    let env = Env::new();
    let input = json!({"conversation_id": WINDOW_A, "generation_id": "g", "hook_event_name": "preToolUse",
        "workspace_roots": [env.project], "cwd": "", "tool_name": "Write", "tool_use_id": "call_1",
        "tool_input": {"file_path": env.project.join("a.rs"), "content": "x"}});
    for (fail, want) in [("open", false), ("closed", true)] {
        let out = env.hook_at(
            Path::new("/"),
            &["hook", "--cli", "cursor"],
            input.to_string().into_bytes(),
            &[("MAOS_NO_AUTOSTART", "1"), ("MAOS_HOOK_FAIL", fail)],
            false,
        );
        assert!(out.status.success(), "{fail}: {}", describe(&out));
        match denied(&out) {
            Some(reason) => {
                assert!(want, "{fail}: denied: {reason}");
                assert!(reason.contains("MAOS_HOOK_FAIL=closed"), "{reason}");
            }
            None => {
                assert!(!want, "{fail}: not denied: {}", describe(&out));
                assert!(out.stdout.is_empty(), "{fail}: {}", describe(&out));
            }
        }
    }
}

fn hooks_file(env: &Env) -> PathBuf {
    env.project.join(".cursor/hooks.json")
}

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file")).expect("JSON")
}

/// `maos --json doctor` with this build's `maos` on PATH: the Cursor checks.
fn doctor(env: &Env) -> Vec<Value> {
    let bin = maos_tests::maos_bin();
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    cmd.env("PATH", bin.parent().expect("bin dir"));
    let out = cmd.output().expect("maos doctor");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"].as_str().is_some_and(|n| n.starts_with("Cursor")))
        .cloned()
        .collect()
}

/// Install merges into the user's own hooks file (only documented events, the user's entries
/// kept, twice is once), registers maos's MCP server in `.cursor/mcp.json`; doctor says so;
/// uninstall takes back exactly that, and a file install made goes.
#[test]
fn install_doctor_and_uninstall_of_cursor_hooks() {
    let env = Env::new();
    std::fs::create_dir_all(env.project.join(".cursor")).expect("mkdir");
    let mine = json!({"version": 1, "hooks": {
        "afterFileEdit": [{"command": "./hooks/format.sh"}],
        "preToolUse": [{"command": "./hooks/guard.sh", "matcher": "Shell"}]}});
    let mine_text = serde_json::to_string_pretty(&mine).expect("json");
    std::fs::write(hooks_file(&env), &mine_text).expect("write");
    assert_eq!(
        check(&doctor(&env), "Cursor hooks")["level"],
        "info",
        "not installed yet"
    );

    let out = env.maos_json(&["install-hooks", "--cursor"]);
    let message = out["message"].as_str().expect("message");
    assert!(message.contains("installed in"), "{message}");
    let v = read(&hooks_file(&env));
    assert_eq!(v["version"], 1);
    let hooks = v["hooks"].as_object().expect("hooks");
    let mut events: Vec<&str> = hooks.keys().map(String::as_str).collect();
    events.sort_unstable();
    assert_eq!(
        events,
        [
            "afterFileEdit",
            "beforeSubmitPrompt",
            "postToolUse",
            "preCompact",
            "preToolUse",
            "sessionEnd",
            "sessionStart",
            "stop",
            "subagentStart",
            "subagentStop",
        ]
    );
    assert_eq!(hooks["afterFileEdit"], mine["hooks"]["afterFileEdit"]);
    let pre = hooks["preToolUse"].as_array().expect("list");
    assert_eq!(
        pre[0], mine["hooks"]["preToolUse"][0],
        "the user's entry first, kept"
    );
    assert_eq!(
        pre[1],
        json!({"command": "maos hook --cli cursor", "timeout": 10,
               "matcher": "Shell|Write|StrReplace|Edit|Delete|Task"})
    );
    assert_eq!(
        hooks["sessionStart"],
        json!([{"command": "maos hook --cli cursor", "timeout": 10}])
    );
    let mcp = read(&env.project.join(".cursor/mcp.json"));
    assert_eq!(
        mcp["mcpServers"]["maos"],
        json!({"command": "maos", "args": ["mcp"]})
    );

    let before = std::fs::read_to_string(hooks_file(&env)).expect("read");
    let again = env.maos_json(&["install-hooks", "--cursor"]);
    assert!(
        again["message"]
            .as_str()
            .is_some_and(|m| m.contains("already installed")),
        "{again}"
    );
    assert_eq!(
        std::fs::read_to_string(hooks_file(&env)).expect("read"),
        before
    );

    let checks = doctor(&env);
    let hooks_check = check(&checks, "Cursor hooks");
    assert_eq!(hooks_check["level"], "ok", "{checks:?}");
    assert!(
        hooks_check["detail"]
            .as_str()
            .is_some_and(|d| d.contains(".cursor/hooks.json")),
        "{hooks_check}"
    );
    assert_eq!(
        check(&checks, "Cursor MCP server")["level"],
        "ok",
        "{checks:?}"
    );

    let out = env.maos_json(&["uninstall-hooks", "--cursor"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("removed from")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(hooks_file(&env)).expect("read"),
        mine_text,
        "the user's file back to the byte"
    );
    assert!(
        !env.project.join(".cursor/mcp.json").exists(),
        "install made it: gone"
    );
    assert_eq!(check(&doctor(&env), "Cursor hooks")["level"], "info");
}

/// A file install made goes with uninstall; a file Cursor would skip whole (an unknown event
/// name) fails doctor naming the event; a broken file is refused and left as it was.
#[test]
fn a_new_file_goes_and_a_bad_one_is_named() {
    let env = Env::new();
    env.maos_json(&["install-hooks", "--cursor"]);
    assert!(hooks_file(&env).exists());
    env.maos_json(&["uninstall-hooks", "--cursor"]);
    assert!(!hooks_file(&env).exists(), "install made it: gone");

    // Someone else's hook under a name Cursor does not know: cursor-agent ignores the file.
    std::fs::create_dir_all(env.project.join(".cursor")).expect("mkdir");
    std::fs::write(
        hooks_file(&env),
        r#"{"version": 1, "hooks": {"beforeShellExec": [{"command": "./guard.sh"}]}}"#,
    )
    .expect("write");
    let out = env.maos_json(&["install-hooks", "--cursor"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("beforeShellExec")),
        "install warns: {out}"
    );
    let checks = doctor(&env);
    let c = check(&checks, "Cursor hooks");
    assert_eq!(c["level"], "fail", "{checks:?}");
    assert!(
        c["detail"]
            .as_str()
            .is_some_and(|d| d.contains("beforeShellExec")),
        "{c}"
    );

    let broken = "{\"version\": 1, \"hooks\": ";
    std::fs::write(hooks_file(&env), broken).expect("write");
    let e = env.maos_fail(&["install-hooks", "--cursor"]);
    assert!(e.message.contains("left unchanged"), "{}", e.message);
    assert_eq!(
        std::fs::read_to_string(hooks_file(&env)).expect("read"),
        broken
    );
}
