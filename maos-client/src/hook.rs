//! `maos hook`: the agent CLI calls this on every hook event with one JSON object on stdin.
//! It forwards what maos needs (ids, event, tool, the path written; never file contents) and
//! answers in the CLI's own terms (HOOKS.md): nothing to allow, a `permissionDecision: deny`
//! object to refuse, `additionalContext` to inform. It never blocks the agent by accident:
//! exit 1 is a non-blocking "hook error", and an unreachable daemon fails open (tool runs,
//! the user is told) unless `MAOS_HOOK_FAIL=closed`.

use std::fmt::Write as _;
use std::io::{Read, Write};
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use maos_proto::{HookCall, HookDecision, Reply, Request, SubagentResult, Written};
use serde::Deserialize;
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

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

fn first_line(text: &str) -> Option<String> {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty())?;
    Some(line.chars().take(200).collect())
}

/// The patch envelope of a Codex `apply_patch` call (`command`, or `input`/`patch`).
fn patch_of(input: &Value) -> Option<&str> {
    ["command", "input", "patch"]
        .iter()
        .find_map(|k| input.get(*k).and_then(Value::as_str))
        .filter(|t| maos_core::patch::is_patch(t))
}

/// Size and SHA-256 of the text a write sends: Write's content, Edit's new string,
/// MultiEdit's new strings, NotebookEdit's new source, a patch. Only these two numbers leave
/// this process; the text itself never does.
fn written(tool: &str, input: &Value) -> Option<Written> {
    let parts: Vec<&str> = match tool {
        "Write" => vec![input.get("content")?.as_str()?],
        "Edit" => vec![input.get("new_string")?.as_str()?],
        "NotebookEdit" => vec![input.get("new_source")?.as_str()?],
        "MultiEdit" => input
            .get("edits")?
            .as_array()?
            .iter()
            .filter_map(|e| e.get("new_string").and_then(Value::as_str))
            .collect(),
        "apply_patch" => vec![patch_of(input)?],
        _ => return None,
    };
    let mut hash = Sha256::new();
    let mut bytes = 0u64;
    for p in parts {
        hash.update(p.as_bytes());
        bytes += p.len() as u64;
    }
    let sha256 = hash
        .finalize()
        .iter()
        .fold(String::with_capacity(64), |mut s, b| {
            let _ = write!(s, "{b:02x}");
            s
        });
    Some(Written { bytes, sha256 })
}

/// PostToolUse of the subagent tool: `tool_response.agentId` and the usage figures.
fn subagent_of(response: &Value) -> Option<SubagentResult> {
    let num = |k: &str| response.get(k).and_then(Value::as_u64);
    Some(SubagentResult {
        agent_id: text(response, "agentId")?,
        status: text(response, "status"),
        total_tokens: num("totalTokens"),
        total_duration_ms: num("totalDurationMs"),
        total_tool_use_count: num("totalToolUseCount"),
    })
}

/// The call from one hook input object (lenient: unknown fields ignored, most optional).
fn call_of(v: &Value) -> Result<HookCall, String> {
    let event = text(v, "hook_event_name").ok_or("hook input has no hook_event_name")?;
    let session_id = text(v, "session_id").ok_or("hook input has no session_id")?;
    let tool_name = text(v, "tool_name");
    let tool = tool_name.as_deref().unwrap_or("");
    let input = v.get("tool_input").unwrap_or(&Value::Null);
    let post = event == "PostToolUse";
    let spawn = matches!(tool, "Agent" | "Task");
    let summary = match event.as_str() {
        "UserPromptSubmit" => text(v, "prompt").and_then(|p| first_line(&p)),
        _ => text(input, "description"),
    };
    let paths = match (tool, patch_of(input)) {
        ("apply_patch", Some(patch)) => maos_core::patch::patch_paths(patch),
        _ => text(input, "file_path")
            .or_else(|| text(input, "notebook_path"))
            .into_iter()
            .collect(),
    };
    Ok(HookCall {
        agent_id: text(v, "agent_id"),
        agent_type: text(v, "agent_type").or_else(|| text(input, "subagent_type")),
        tool_use_id: text(v, "tool_use_id"),
        paths,
        cwd: text(v, "cwd"),
        source: text(v, "source")
            .or_else(|| text(v, "reason"))
            .or_else(|| text(v, "trigger")),
        summary,
        prompt_line: spawn
            .then(|| text(input, "prompt").and_then(|p| first_line(&p)))
            .flatten(),
        written: post.then(|| written(tool, input)).flatten(),
        subagent: (post && spawn)
            .then(|| v.get("tool_response").and_then(subagent_of))
            .flatten(),
        maos_session: env("MAOS_SESSION_ID"),
        maos_agent: env("MAOS_AGENT_ID"),
        path_error: None,
        event,
        session_id,
        tool_name,
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
