//! maos's MCP server with the real Claude Code (the pinned release of
//! `maos_tests::claude::VERSION`, offline against a scripted fake model on 127.0.0.1, maos's
//! hooks and MCP server registered by `maos install-hooks`). Subagent A takes a file's lock
//! through `mcp__maos__lock_acquire`; subagent B's `Write` of that file is denied by the hook,
//! naming A; A releases through `mcp__maos__lock_release`; B's retry is written. Checked from
//! the three sides: what the model received (the tool results, the caller maos named), the
//! file on disk, and `maos lock list` / events.

use std::path::PathBuf;

use maos_tests::claude::{
    FakeModel, Run, WRITE_DENIED, agent, call, claude, result_text, say, tool_result, write,
};
use maos_tests::conformance::{Gate, ps_agent, runnable, short, window_agent};
use maos_tests::{Env, Value, json};

const A: &str = "MAOS-MCP-A";
const B: &str = "MAOS-MCP-B";

fn setup() -> Option<(Env, PathBuf)> {
    let claude = runnable("Claude Code", claude())?;
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    let mcp = std::fs::read_to_string(env.project.join(".mcp.json"))
        .expect("install-hooks wrote .mcp.json");
    assert!(mcp.contains("\"mcp\""), "{mcp}");
    Some((env, claude))
}

/// The JSON a maos tool answered, as the model received it.
fn answer(requests: &[Value], id: &str) -> Value {
    let result = tool_result(requests, id);
    assert_ne!(result["is_error"], true, "{id} failed: {result}");
    let text = result_text(&result);
    serde_json::from_str(&text).unwrap_or_else(|e| panic!("{id} answered {text:?}: {e}"))
}

#[test]
fn a_subagents_mcp_lock_denies_another_subagents_write_until_it_releases() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("shared.txt");
    let checked = Gate::default();
    let (gate, target) = (checked.clone(), file.clone());
    let model = FakeModel::start(move |req| {
        if req.of(A) {
            if !req.has("toolu_lock_a") {
                return vec![call(
                    "toolu_lock_a",
                    "mcp__maos__lock_acquire",
                    json!({"path": "shared.txt", "mode": "write"}),
                )];
            }
            if !req.has("toolu_release_a") {
                // Hold the lock until B was denied and the test looked at maos's lock table.
                req.after_result("toolu_write_b1");
                gate.wait();
                return vec![call(
                    "toolu_release_a",
                    "mcp__maos__lock_release",
                    json!({"path": "shared.txt"}),
                )];
            }
            say("A done.")
        } else if req.of(B) {
            if !req.has("toolu_write_b1") {
                req.after_result("toolu_lock_a");
                return vec![write("toolu_write_b1", &target, "from B, too early\n")];
            }
            if !req.has("toolu_write_b2") {
                req.after_result("toolu_release_a");
                return vec![write("toolu_write_b2", &target, "from B\n")];
            }
            say("B done.")
        } else if req.of("MAOS-CONFORMANCE") && !req.has("toolu_agent_a") {
            vec![
                agent(
                    "toolu_agent_a",
                    "locker A",
                    &format!("{A}: lock shared.txt"),
                    false,
                ),
                agent(
                    "toolu_agent_b",
                    "writer B",
                    &format!("{B}: write shared.txt"),
                    false,
                ),
            ]
        } else {
            say("Done.")
        }
    });
    let run = Run::start(
        &env,
        &claude,
        &model,
        "MAOS-CONFORMANCE: A locks shared.txt, B writes it",
    );
    model.wait_result("toolu_write_b1", "B's first write was answered");
    // maos's view while A holds the lock: A's, taken through MCP.
    let listed = env.maos_json(&["lock", "list"]);
    let locks = listed["locks"].as_array().expect("locks").clone();
    checked.open();
    let [lock] = &locks[..] else {
        panic!("not one lock while A holds it: {listed}")
    };
    assert_eq!(lock["path"], "shared.txt", "{lock}");
    assert_eq!(lock["mode"], "write", "{lock}");
    let a = lock["holder"].as_str().expect("holder").to_string();
    let out = run.finish();
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: A's lock (the caller maos named: A, by its tool use id), B's denial
    // naming A, A's release, B's retry written.
    let requests = model.messages_requests();
    let took = answer(&requests, "toolu_lock_a");
    assert_eq!(took["caller"]["agent"], a.as_str(), "{took}");
    assert_eq!(took["caller"]["rule"], "tool_use_id", "{took}");
    assert_eq!(took["lock"]["token"], lock["token"], "{took}");
    assert_eq!(took["lock"]["expires_at"], lock["expires_at"], "{took}");
    let denied = tool_result(&requests, "toolu_write_b1");
    assert_eq!(denied["is_error"], true, "{denied}");
    let text = result_text(&denied);
    assert!(
        text.starts_with(&format!("{WRITE_DENIED}maos: shared.txt")),
        "{text}"
    );
    assert!(
        text.contains(short(&a)),
        "the holder A is not named: {text}"
    );
    let released = answer(&requests, "toolu_release_a");
    assert_eq!(released["released"][0]["path"], "shared.txt", "{released}");
    assert_eq!(released["caller"]["agent"], a.as_str());
    let retried = tool_result(&requests, "toolu_write_b2");
    assert_ne!(retried["is_error"], true, "{retried}");
    // The disk: B's retry.
    assert_eq!(
        std::fs::read_to_string(&file).expect("shared.txt"),
        "from B\n"
    );
    // maos's view: A is the locker subagent of the window; B, the other one, was denied, then
    // took the lock through its write; nothing is held once both finished.
    let window = window_agent(&env);
    let a_agent = ps_agent(&env, &a);
    assert_eq!(a_agent["parent"], window.as_str(), "{a_agent}");
    assert!(
        a_agent["task"].as_str().unwrap_or("").contains("locker A"),
        "{a_agent}"
    );
    let acquired = env.events(&["--type", "lock_acquired"]);
    let holders: Vec<&str> = acquired
        .iter()
        .filter(|e| e["data"]["path"] == "shared.txt")
        .filter_map(|e| e["agent_id"].as_str())
        .collect();
    let [first, second] = holders[..] else {
        panic!("not two lock_acquired of shared.txt: {acquired:#?}")
    };
    assert_eq!(first, a.as_str());
    assert_ne!(second, a.as_str());
    assert!(
        ps_agent(&env, second)["task"]
            .as_str()
            .unwrap_or("")
            .contains("writer B")
    );
    let denials = env.events(&["--type", "tool_denied"]);
    assert!(
        denials
            .iter()
            .any(|d| d["agent_id"] == second && d["data"]["why"] == "lock_conflict"),
        "{denials:#?}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}
