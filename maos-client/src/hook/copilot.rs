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
/// are (the daemon ignores them); an id or a name that is not a string is not taken.
pub fn input_as(v: &mut Value, event: Option<&str>) {
    let Some(o) = v.as_object_mut() else {
        return;
    };
    // A subagent's own events name the subagent as their session: the window's session is
    // its parent's. (A subagent's subagent names its parent subagent there, and its
    // `subagentStart` a `sessionId` seen nowhere else: its parent's id is the one they share.)
    let agent = string(o, "agentId");
    let session = match (string(o, "sessionId"), string(o, "parentAgentId")) {
        (_, Some(parent)) if agent.is_some() => Some(parent),
        (s, _) => s,
    };
    let sub = agent.is_some();
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

#[cfg(test)]
mod tests {
    use super::super::call_of;
    use super::*;

    const SID: &str = "aaeebc7a-4c35-40e9-854c-8bf4800e3fe5";
    const SUB: &str = "e08c94a7-63f1-4987-851d-0782e02ff17d";

    /// One input as Copilot 1.0.102 sent it (copied from a real run), read as the daemon's.
    fn read(event: Option<&str>, v: Value) -> maos_proto::HookCall {
        let mut v = v;
        input_as(&mut v, event);
        call_of(&v).unwrap_or_else(|e| panic!("{e}: {v}"))
    }

    #[test]
    fn its_write_tools_are_the_daemons_write_and_edit_with_the_path_to_lock() {
        let edit = read(
            Some("preToolUse"),
            json!({"sessionId": SID, "timestamp": 1795890039019u64, "cwd": "/p",
                   "toolName": "edit",
                   "toolArgs": {"path": "/p/a.txt", "old_str": "hi", "new_str": "HACKED"}}),
        );
        assert_eq!(edit.event, "PreToolUse");
        assert_eq!(edit.session_id, SID);
        assert_eq!(edit.agent_id, None);
        assert_eq!(edit.tool_name.as_deref(), Some("Edit"));
        assert_eq!(edit.paths, ["/p/a.txt"]);
        assert!(edit.writes_files());
        // After it ran: the size and hash of what it sent, as for Claude Code's Write.
        let create = read(
            Some("postToolUse"),
            json!({"sessionId": SID, "cwd": "/p", "toolName": "create",
                   "toolArgs": {"path": "/p/new.txt", "file_text": "hello\n"},
                   "toolResult": {"resultType": "success",
                                  "textResultForLlm": "Created file /p/new.txt with 6 characters"}}),
        );
        assert_eq!(create.event, "PostToolUse");
        assert_eq!(create.tool_name.as_deref(), Some("Write"));
        assert_eq!(create.paths, ["/p/new.txt"]);
        assert_eq!(create.written.as_ref().map(|w| w.bytes), Some(6));
    }

    #[test]
    fn its_shell_is_the_daemons_bash_with_the_command_to_read() {
        let call = read(
            Some("preToolUse"),
            json!({"sessionId": SID, "cwd": "/p", "toolName": "bash",
                   "toolArgs": {"command": "sed -i s/a/b/ a.txt", "description": "edit"}}),
        );
        assert_eq!(call.tool_name.as_deref(), Some("Bash"));
        assert_eq!(call.command.as_deref(), Some("sed -i s/a/b/ a.txt"));
        // Arguments sent as a JSON text (documented for older versions) are read the same.
        let text = read(
            Some("preToolUse"),
            json!({"sessionId": SID, "toolName": "bash",
                   "toolArgs": "{\"command\": \"echo x > b.txt\"}"}),
        );
        assert_eq!(text.command.as_deref(), Some("echo x > b.txt"));
    }

    #[test]
    fn a_subagent_is_the_windows_with_its_own_id_and_its_task_from_the_task_call() {
        // The window's `task` call: the daemon's subagent tool, with the prompt and type.
        let task = read(
            Some("preToolUse"),
            json!({"sessionId": SID, "toolName": "task",
                   "toolArgs": {"description": "sub edit", "prompt": "SUBTASK edit a.txt",
                                "agent_type": "general-purpose", "name": "helper"}}),
        );
        assert_eq!(task.tool_name.as_deref(), Some("Agent"));
        assert_eq!(task.prompt_line.as_deref(), Some("SUBTASK edit a.txt"));
        assert_eq!(task.agent_type.as_deref(), Some("general-purpose"));
        assert_eq!(task.agent_id, None);
        let start = read(
            Some("subagentStart"),
            json!({"sessionId": SID, "agentName": "general-purpose", "agentId": SUB,
                   "agentType": "general-purpose", "parentAgentId": SID}),
        );
        assert_eq!(start.event, "SubagentStart");
        assert_eq!(
            (start.session_id.as_str(), start.agent_id.as_deref()),
            (SID, Some(SUB))
        );
        assert_eq!(start.agent_type.as_deref(), Some("general-purpose"));
        // Inside the subagent Copilot names the subagent as the session: the window's it is.
        let write = read(
            Some("preToolUse"),
            json!({"sessionId": SUB, "toolName": "edit",
                   "toolArgs": {"path": "/p/a.txt", "old_str": "hi", "new_str": "x"},
                   "agentId": SUB, "agentType": "general-purpose", "parentAgentId": SID}),
        );
        assert_eq!(
            (write.session_id.as_str(), write.agent_id.as_deref()),
            (SID, Some(SUB))
        );
        // Its own prompt and turn's end are not the window's prompt and Stop.
        for event in ["userPromptSubmitted", "agentStop"] {
            let own = read(
                Some(event),
                json!({"sessionId": SUB, "prompt": "SUBTASK edit a.txt", "stopReason": "end_turn",
                       "agentId": SUB, "agentType": "general-purpose", "parentAgentId": SID}),
            );
            assert_eq!(own.event, event);
            assert_eq!(own.session_id, SID);
        }
        let stop = read(
            Some("subagentStop"),
            json!({"sessionId": SID, "agentId": SUB, "agentType": "general-purpose",
                   "agentName": "general-purpose", "response": "Done.",
                   "stopReason": "end_turn", "parentAgentId": SID}),
        );
        assert_eq!(stop.event, "SubagentStop");
        assert_eq!(stop.agent_id.as_deref(), Some(SUB));
        // A subagent's subagent: its start (with a `sessionId` seen nowhere else) and its
        // calls name the same session, its parent subagent's id.
        const NESTED: &str = "e690f300-be01-41ac-beb6-30cd100f0661";
        let start = read(
            Some("subagentStart"),
            json!({"sessionId": "77b1f414-b338-4a8f-9f55-284359e102ed", "agentName": "g",
                   "agentId": NESTED, "agentType": "general-purpose", "parentAgentId": SUB}),
        );
        let call = read(
            Some("preToolUse"),
            json!({"sessionId": NESTED, "toolName": "view", "toolArgs": {},
                   "agentId": NESTED, "parentAgentId": SUB}),
        );
        for c in [start, call] {
            assert_eq!(
                (c.session_id.as_str(), c.agent_id.as_deref()),
                (SUB, Some(NESTED))
            );
        }
    }

    #[test]
    fn each_event_is_known_by_its_entrys_variable_or_else_by_its_fields() {
        let inputs = [
            (
                "sessionStart",
                json!({"sessionId": SID, "source": "new", "initialPrompt": "x"}),
            ),
            (
                "userPromptSubmitted",
                json!({"sessionId": SID, "prompt": "fix the bug"}),
            ),
            (
                "preToolUse",
                json!({"sessionId": SID, "toolName": "view", "toolArgs": {}}),
            ),
            (
                "postToolUse",
                json!({"sessionId": SID, "toolName": "view", "toolArgs": {},
                                   "toolResult": {"resultType": "success"}}),
            ),
            (
                "agentStop",
                json!({"sessionId": SID, "stopReason": "end_turn"}),
            ),
            (
                "subagentStart",
                json!({"sessionId": SID, "agentName": "g", "agentId": SUB,
                                     "parentAgentId": SID}),
            ),
            (
                "subagentStop",
                json!({"sessionId": SID, "agentName": "g", "agentId": SUB,
                                    "stopReason": "end_turn", "parentAgentId": SID}),
            ),
            (
                "sessionEnd",
                json!({"sessionId": SID, "reason": "complete"}),
            ),
        ];
        for (event, v) in inputs {
            let ours = EVENTS.iter().find(|(e, _)| *e == event).map(|(_, o)| *o);
            assert_eq!(read(Some(event), v.clone()).event, ours.unwrap_or(event));
            assert_eq!(read(None, v).event, ours.unwrap_or(event), "{event}");
        }
        let prompt = read(Some("userPromptSubmitted"), inputs_prompt());
        assert_eq!(prompt.summary.as_deref(), Some("fix the bug"));
        let end = read(
            Some("sessionEnd"),
            json!({"sessionId": SID, "reason": "complete"}),
        );
        assert_eq!(end.source.as_deref(), Some("complete"));
    }

    fn inputs_prompt() -> Value {
        json!({"sessionId": SID, "timestamp": 1, "cwd": "/p", "prompt": "fix the bug\nmore"})
    }

    #[test]
    fn hostile_input_is_refused_or_read_without_a_panic() {
        // No session: refused as any other CLI's input.
        let mut v = json!({"toolName": "edit", "toolArgs": {"path": "/p/a"}});
        input_as(&mut v, Some("preToolUse"));
        assert!(call_of(&v).is_err());
        // A write that names no file cannot be locked: refused.
        let mut v = json!({"sessionId": SID, "toolName": "create", "toolArgs": "not json"});
        input_as(&mut v, Some("preToolUse"));
        assert!(call_of(&v).is_err());
        // Wrong types are not taken for ids.
        let mut v = json!({"sessionId": 7, "agentId": ["x"], "toolName": 3});
        input_as(&mut v, None);
        assert!(call_of(&v).is_err());
        for mut v in [json!(null), json!([1]), json!("x")] {
            input_as(&mut v, Some("preToolUse"));
        }
    }

    #[test]
    fn answers_are_copilots_flat_objects() {
        assert_eq!(
            denial("maos: a.txt is held"),
            json!({"permissionDecision": "deny", "permissionDecisionReason": "maos: a.txt is held"})
        );
        for event in ["SessionStart", "UserPromptSubmit", "PostToolUse"] {
            assert_eq!(context(event, "c"), Some(json!({"additionalContext": "c"})));
        }
        assert_eq!(context("PreToolUse", "c"), None);
        assert_eq!(notice("m"), None);
    }
}
