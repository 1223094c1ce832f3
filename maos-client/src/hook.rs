//! `maos hook`: the agent CLI calls this on every hook event with one JSON object on stdin.
//! It forwards what maos needs (ids, event, tool, the path written; never file contents) and
//! answers in the CLI's own terms (HOOKS.md): nothing to allow, a `permissionDecision: deny`
//! object to refuse, `additionalContext` to inform. It never blocks the agent by accident:
//! exit 1 is a non-blocking "hook error", and an unreachable daemon fails open (tool runs,
//! the user is told) unless `MAOS_HOOK_FAIL=closed`.

use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use maos_proto::{HookCall, HookDecision, Reply, Request};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::client::Client;

/// Largest hook input read (a Write's content can be large; we read past it, never keep it).
const MAX_INPUT: u64 = 32 * 1024 * 1024;
/// Default deadline for the whole call.
const DEFAULT_TIMEOUT_MS: u64 = 5000;

fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The call from one hook input object (lenient: unknown fields ignored, most optional).
fn call_of(v: &Value) -> Result<HookCall, String> {
    let event = text(v, "hook_event_name").ok_or("hook input has no hook_event_name")?;
    let session_id = text(v, "session_id").ok_or("hook input has no session_id")?;
    let input = v.get("tool_input").unwrap_or(&Value::Null);
    let summary = match event.as_str() {
        "UserPromptSubmit" => text(v, "prompt").and_then(|p| p.lines().next().map(str::to_string)),
        _ => text(input, "description"),
    };
    Ok(HookCall {
        event,
        session_id,
        agent_id: text(v, "agent_id"),
        agent_type: text(v, "agent_type").or_else(|| text(input, "subagent_type")),
        tool_name: text(v, "tool_name"),
        tool_use_id: text(v, "tool_use_id"),
        file_path: text(input, "file_path").or_else(|| text(input, "notebook_path")),
        cwd: text(v, "cwd"),
        source: text(v, "source")
            .or_else(|| text(v, "reason"))
            .or_else(|| text(v, "trigger")),
        summary,
        maos_session: env("MAOS_SESSION_ID"),
        maos_agent: env("MAOS_AGENT_ID"),
        path_error: None,
    })
}

fn print(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
}

fn deny(reason: &str) {
    print(&json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }}));
}

/// The daemon could not answer: the tool runs (fail open) and the user hears about it, or,
/// with `MAOS_HOOK_FAIL=closed`, a write is refused.
fn unreachable(event: &str, why: &str) -> ExitCode {
    let closed = env("MAOS_HOOK_FAIL").is_some_and(|v| v.eq_ignore_ascii_case("closed"));
    if closed && event == "PreToolUse" {
        deny(&format!(
            "maos could not check this tool call ({why}) and MAOS_HOOK_FAIL=closed refuses it; retry once `maos daemon status` works"
        ));
    } else {
        print(
            &json!({ "systemMessage": format!("maos: {why}; file locks are not enforced for this call") }),
        );
    }
    ExitCode::SUCCESS
}

pub fn run(project: Option<PathBuf>) -> ExitCode {
    // One object, never waiting for EOF: some CLI versions keep stdin open.
    let stdin = std::io::stdin().lock().take(MAX_INPUT);
    let mut de = serde_json::Deserializer::from_reader(stdin);
    let v = match Value::deserialize(&mut de) {
        Ok(v) => v,
        Err(e) => {
            eprintln!("maos hook: the input is not one JSON object ({e}); nothing was done");
            return ExitCode::from(1);
        }
    };
    let call = match call_of(&v) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("maos hook: {e}; nothing was done");
            return ExitCode::from(1);
        }
    };
    let event = call.event.clone();
    let start = project
        .or_else(|| call.cwd.as_deref().map(PathBuf::from))
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let root = maos_proto::paths::project_root(&start)
        .to_string_lossy()
        .into_owned();
    let timeout = env("MAOS_HOOK_TIMEOUT_MS")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    // One deadline for the whole call: starting the daemon, then each read and write.
    let timeout = Duration::from_millis(timeout.max(1));
    let mut client = match Client::connect_within(true, timeout) {
        Ok(c) => c,
        Err(e) => return unreachable(&event, &e.body().message),
    };
    client.set_timeout(timeout);
    let answer = match client.request(Some(&root), Request::Hook(Box::new(call))) {
        Ok(Reply::Hook(a)) => a,
        Ok(_) => return unreachable(&event, "the daemon gave an unexpected answer"),
        Err(e) => return unreachable(&event, &e.body().message),
    };
    match (answer.decision, event.as_str()) {
        (HookDecision::Deny, _) => deny(answer.reason.as_deref().unwrap_or("refused by maos")),
        (_, "SessionStart" | "UserPromptSubmit") => {
            if let Some(ctx) = answer.context {
                print(&json!({"hookSpecificOutput": {
                    "hookEventName": event,
                    "additionalContext": ctx,
                }}));
            }
        }
        _ => {}
    }
    ExitCode::SUCCESS
}
