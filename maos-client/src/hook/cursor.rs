//! Cursor's hook contract, both ways: its input made the daemon's (Claude Code's event and
//! field names), and maos's answer in its terms. Pure (serde_json only): the fuzz target
//! includes it through `input.rs`. (Scaffolding: filled in by issue 32's work on Cursor.)

use serde_json::{Value, json};

/// `v`, one hook input of Cursor, made the daemon's in place.
pub fn input(v: &mut Value) {
    let _ = v;
}

/// The refusal of a tool call.
pub fn denial(reason: &str) -> Value {
    json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }})
}

/// Context for the model after `event` (the daemon's name), if Cursor takes any there.
pub fn context(event: &str, context: &str) -> Option<Value> {
    let _ = (event, context);
    None
}

/// A message for the person (maos could not check a call, a project was made), if
/// Cursor shows one.
pub fn notice(message: &str) -> Option<Value> {
    Some(json!({ "systemMessage": message }))
}
