//! GitHub Copilot CLI's hook contract, both ways: its input made the daemon's (Claude Code's event and
//! field names), and maos's answer in its terms. Pure (serde_json only): the fuzz target
//! includes it through `input.rs`.
//!
//! Observed with the real 1.0.102 (npm `@github/copilot`), hooks in `.github/hooks/*.json`:
//! - events are camelCase and give `{sessionId, timestamp, cwd, …}`: `sessionStart {source,
//!   initialPrompt}`, `userPromptSubmitted {prompt}`, `preToolUse {toolName, toolArgs}` (an
//!   object), `postToolUse` (and `toolResult {resultType, textResultForLlm}`), `agentStop
//!   {stopReason}`, `subagentStart` / `subagentStop {agentId, agentType, agentName,
//!   parentAgentId}`, `sessionEnd {reason}`;
//! - inside a subagent every event carries `agentId`, `agentType` and `parentAgentId`, and its
//!   `sessionId` is the subagent's own id (the window's session is `parentAgentId`); the
//!   subagent sends its own `userPromptSubmitted` (its task) and `agentStop` before the
//!   parent's `subagentStop`;
//! - tools: `create {path, file_text}`, `edit {path, old_str, new_str}`, `bash {command,
//!   description, shellId?, mode?}`, `task {description, prompt, agent_type, name}`;
//! - the answer is one flat JSON object on stdout: `{"permissionDecision":"deny",
//!   "permissionDecisionReason":…}` denies (the model reads `Denied by preToolUse hook:
//!   <reason>`), even under `--allow-all-tools`; Claude Code's nested `hookSpecificOutput` is
//!   ignored (the tool runs); `{"additionalContext":…}` after `sessionStart` (a user message
//!   before the prompt), `userPromptSubmitted` (a `<system_reminder>` after the prompt) and
//!   `postToolUse` (appended to the tool's result) reaches the model; `systemMessage` is shown
//!   nowhere;
//! - any non-zero exit of a `preToolUse` hook denies the call (`hook errored`); a timeout
//!   lets it run.

use serde_json::{Map, Value, json};

/// Copilot's events maos installs, and the daemon's name of each.
pub const EVENTS: &[(&str, &str)] = &[
    ("sessionStart", "SessionStart"),
    ("userPromptSubmitted", "UserPromptSubmit"),
    ("preToolUse", "PreToolUse"),
    ("postToolUse", "PostToolUse"),
    ("subagentStart", "SubagentStart"),
    ("subagentStop", "SubagentStop"),
    ("agentStop", "Stop"),
    ("preCompact", "PreCompact"),
    ("sessionEnd", "SessionEnd"),
];

/// Copilot's tools maos reads, and the daemon's (Claude Code's) name of each: the shell is
/// `Bash` (the daemon reads what the command writes), `create` a `Write`, `edit` an `Edit`,
/// `task` the subagent tool `Agent`.
pub const TOOLS: &[(&str, &str)] = &[
    ("create", "Write"),
    ("edit", "Edit"),
    ("bash", "Bash"),
    ("task", "Agent"),
];

/// The tool matcher of maos's `preToolUse` and `postToolUse` entries (Copilot anchors it).
pub const MATCHER: &str = "create|edit|bash|task";

/// Copilot's argument names of each tool maos reads, and Claude Code's.
fn renamed_args(tool: &str) -> &'static [(&'static str, &'static str)] {
    match tool {
        "create" => &[("path", "file_path"), ("file_text", "content")],
        "edit" => &[
            ("path", "file_path"),
            ("old_str", "old_string"),
            ("new_str", "new_string"),
        ],
        "task" => &[("agent_type", "subagent_type")],
        _ => &[],
    }
}

fn string(o: &Map<String, Value>, key: &str) -> Option<String> {
    o.get(key).and_then(Value::as_str).map(str::to_string)
}

/// The variable maos's entries set to the event they are installed on (Copilot's input does
/// not say which event it is; every entry of maos's runs the same command).
pub const EVENT_VAR: &str = "MAOS_COPILOT_EVENT";

/// `v`, one hook input of GitHub Copilot CLI, made the daemon's in place: [`input_as`] with
/// the event maos's entry named in [`EVENT_VAR`].
pub fn input(v: &mut Value) {
    let event = std::env::var(EVENT_VAR).ok().filter(|e| !e.is_empty());
    input_as(v, event.as_deref());
}

/// `v`, one hook input of GitHub Copilot CLI for `event` (Copilot's name; read from the input's
/// fields when `None`), made the daemon's in place. Fields it does not know are left as they
/// are (the daemon ignores them); a field of the wrong type is dropped.
pub fn input_as(v: &mut Value, event: Option<&str>) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    // A subagent's own events name the subagent as their session: the window's session is
    // its parent's.
    let agent = string(o, "agentId");
    let session = match (string(o, "sessionId"), string(o, "parentAgentId")) {
        (Some(s), Some(parent)) if agent.as_deref() == Some(s.as_str()) => Some(parent),
        (s, _) => s,
    };
    let sub = agent.is_some() && session != agent;
    if let Some(s) = session {
        o.insert("session_id".into(), s.into());
    }
    if let Some(a) = agent {
        o.insert("agent_id".into(), a.into());
    }
    if let Some(t) = string(o, "agentType") {
        o.insert("agent_type".into(), t.into());
    }
    // Copilot's input names no event (`hookName` only on some): else its fields tell.
    let event = event
        .map(str::to_string)
        .or_else(|| string(o, "hookName"))
        .unwrap_or_else(|| event_of(o).to_string());
    // A subagent's own prompt (its task, known from the `task` call) and its turn's end (its
    // `subagentStop` follows) mean nothing more: Copilot's names stay, which the daemon does
    // not act on.
    let ours = match event.as_str() {
        "userPromptSubmitted" | "agentStop" if sub => event.clone(),
        e => EVENTS
            .iter()
            .find(|(theirs, _)| *theirs == e)
            .map_or(e, |(_, ours)| ours)
            .to_string(),
    };
    o.insert("hook_event_name".into(), ours.into());
    if let Some(tool) = string(o, "toolName") {
        let mut args = match o.remove("toolArgs") {
            // Older versions sent the arguments as a JSON text.
            Some(Value::String(t)) => serde_json::from_str(&t).unwrap_or(Value::Null),
            Some(a) => a,
            None => Value::Null,
        };
        if let Some(a) = args.as_object_mut() {
            for (theirs, ours) in renamed_args(&tool) {
                if let Some(x) = a.remove(*theirs) {
                    a.insert((*ours).into(), x);
                }
            }
        }
        let name = TOOLS
            .iter()
            .find(|(theirs, _)| *theirs == tool)
            .map_or(tool.as_str(), |(_, ours)| ours);
        o.insert("tool_name".into(), name.into());
        o.insert("tool_input".into(), args);
        if let Some(r) = o.remove("toolResult") {
            o.insert("tool_response".into(), r);
        }
    }
}

/// Which of Copilot's events an input is, from its fields (an entry that does not set
/// [`EVENT_VAR`], e.g. one a person wrote).
fn event_of(o: &Map<String, Value>) -> &'static str {
    let has = |k: &str| o.contains_key(k);
    if has("toolName") {
        match has("toolResult") {
            true => "postToolUse",
            false => "preToolUse",
        }
    } else if has("prompt") {
        "userPromptSubmitted"
    } else if has("initialPrompt") || (has("source") && !has("reason")) {
        "sessionStart"
    } else if has("stopReason") && has("agentName") {
        "subagentStop"
    } else if has("stopReason") {
        "agentStop"
    } else if has("agentName") {
        "subagentStart"
    } else if has("reason") {
        "sessionEnd"
    } else if has("trigger") {
        "preCompact"
    } else {
        "unknown"
    }
}

/// The refusal of a tool call: Copilot's flat form (it ignores Claude Code's nested one).
pub fn denial(reason: &str) -> Value {
    json!({
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    })
}

/// Context for the model after `event` (the daemon's name): Copilot takes it after
/// `sessionStart`, `userPromptSubmitted` and `postToolUse`.
pub fn context(event: &str, context: &str) -> Option<Value> {
    matches!(event, "SessionStart" | "UserPromptSubmit" | "PostToolUse")
        .then(|| json!({ "additionalContext": context }))
}

/// A message for the person: Copilot (1.0.102) shows none from a hook (`systemMessage` is
/// read nowhere), so there is none to send.
pub fn notice(message: &str) -> Option<Value> {
    let _ = message;
    None
}
