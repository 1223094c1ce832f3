//! maos's MCP server with the real Codex (the pinned release of `conformance_codex.rs`,
//! offline against a scripted fake Responses API): `install-hooks --codex --yes` registers the
//! server in the project's `.codex/config.toml` beside the hooks, the model calls one of its
//! tools, and maos names the caller by the hook's claim (Codex sends no tool use id). Checked
//! from what the model received and maos's own record of the note.
//!
//! What Codex 0.171.0 (and 0.169.0 before it) does (observed here):
//! - MCP tools are not offered to the model up front: it has a client-run `tool_search`
//!   (a `tool_search_call` item), whose `tool_search_output` lists each server as a namespace
//!   (`mcp__maos`) with its tools (`note`, ...); the model then sends a `function_call` with
//!   `namespace: "mcp__maos"` and `name: "note"`.
//! - The `PreToolUse` hook of that call has `tool_name: "mcp__maos__note"` and the call's
//!   arguments as `tool_input` (so `install-hooks`'s matcher `mcp__maos__.*` takes it).
//! - It starts a stdio MCP server with a few variables of its environment only: without
//!   `env_vars` (which `install-hooks` writes) the server did not see `MAOS_SOCKET` and
//!   `MAOS_HOME`, and started and asked a daemon of its own.
//! - The tool's result reaches the model as `input_text` blocks: "Wall time: …", then the
//!   server's text.

use maos_tests::codex::{configure, install, run_codex, stream};
use maos_tests::conformance::{Answer, FakeApi, runnable};
use maos_tests::{Env, Value, json};

/// The fake model: a tool search, then the call of maos's `note` with `args`, then "Done.".
fn model(args: Value) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.starts_with("/v1/responses") {
            return Answer::not_found();
        }
        let input: Vec<Value> = body["input"].as_array().cloned().unwrap_or_default();
        let searched = input.iter().any(|i| i["type"] == "tool_search_output");
        let called = input.iter().any(|i| i["type"] == "function_call_output");
        let item = if !searched {
            json!({"type": "tool_search_call", "id": "ts_0", "call_id": "call_maos_search",
                   "status": "completed", "execution": "client",
                   "arguments": {"query": "maos note decision"}})
        } else if !called {
            json!({"type": "function_call", "id": "fc_1", "call_id": "call_maos_note",
                   "namespace": "mcp__maos", "name": "note",
                   "arguments": args.to_string(), "status": "completed"})
        } else {
            json!({"type": "message", "role": "assistant", "id": "msg_maos_done",
                   "content": [{"type": "output_text", "text": "Done."}]})
        };
        Answer::sse(stream(input.len(), item))
    })
}

/// maos's answer to the note, as the model received it (the output's JSON text block).
fn answer(api: &FakeApi) -> Value {
    let requests = api.requests();
    let output = requests
        .iter()
        .filter_map(|(_, b)| b["input"].as_array())
        .flatten()
        .find(|i| i["type"] == "function_call_output" && i["call_id"] == "call_maos_note")
        .map(|i| i["output"].clone())
        .unwrap_or_else(|| panic!("no output of the note reached the model: {requests:#?}"));
    eprintln!("the model received: {output}");
    let texts: Vec<String> = match &output {
        Value::String(s) => vec![s.clone()],
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str().map(str::to_string))
            .collect(),
        other => vec![other.to_string()],
    };
    texts
        .iter()
        .find_map(|t| {
            serde_json::from_str::<Value>(t)
                .ok()
                .filter(|v| v.is_object())
        })
        .unwrap_or_else(|| panic!("no JSON answer of maos in {output}"))
}

/// `keep_env_vars`: leave the registration's `env_vars` as `install-hooks` wrote it; else the
/// server gets none of maos's variables from Codex and must take them from Codex's own
/// environment.
fn note_through_codex(keep_env_vars: bool) {
    let Some(codex) = runnable("Codex", maos_tests::codex::codex()) else {
        return;
    };
    let env = Env::new();
    let api = model(json!({"kind": "decision", "text": "keep the parser hand-written"}));
    configure(&env, &api);
    install(&env);
    let config = env.project.join(".codex/config.toml");
    let text = std::fs::read_to_string(&config).expect(".codex/config.toml");
    assert!(text.contains("[mcp_servers.maos]"), "{text}");
    if !keep_env_vars {
        let without: String = text
            .lines()
            .filter(|l| !l.starts_with("env_vars"))
            .map(|l| format!("{l}\n"))
            .collect();
        assert_ne!(without, text);
        std::fs::write(&config, without).expect("write .codex/config.toml");
    }
    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: note a decision");
    assert!(out.status.success(), "codex failed: {out:?}");
    // The model's side: maos recorded it, for the agent its hook's claim named.
    let got = answer(&api);
    assert_eq!(got["recorded"], true, "{got}");
    assert_eq!(got["caller"]["rule"], "claim", "{got}");
    // maos's view: the note is the Codex window's (the agent of its prompt).
    let prompts = env.events(&["--type", "prompt_submitted"]);
    let [prompt] = &prompts[..] else {
        panic!("not one prompt: {prompts:?}")
    };
    let window = prompt["agent_id"].as_str().expect("agent");
    assert_eq!(got["caller"]["agent"], window, "{got}");
    let notes = env.events(&["--type", "note_recorded"]);
    let [note] = &notes[..] else {
        panic!("not one note: {notes:?}")
    };
    assert_eq!(note["data"]["text"], "keep the parser hand-written");
    assert_eq!(note["agent_id"], window, "{note}");
}

#[test]
fn a_codex_windows_mcp_call_is_named_by_its_hooks_claim() {
    note_through_codex(true);
}

/// Codex starts MCP servers with few variables: without `env_vars`, `maos mcp` takes
/// `MAOS_SOCKET` and `MAOS_HOME` from Codex's own environment and reaches the hooks' daemon
/// (before, it started a daemon of its own at the default socket and knew no project).
#[test]
fn without_env_vars_the_server_still_reaches_the_hooks_daemon() {
    note_through_codex(false);
}
