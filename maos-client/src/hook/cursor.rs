//! Cursor's hook contract, both ways: its input made the daemon's (Claude Code's event and
//! field names), and maos's answer in its terms. Pure (serde_json only): the fuzz target
//! includes it through `input.rs`.
//!
//! Built to Cursor's documented contract (cursor.com/docs/agent/hooks and payloads others
//! captured from `cursor-agent`); no Cursor binary runs in maos's tests. What it relies on:
//! - every event carries `conversation_id` (the CLI session), `generation_id`,
//!   `hook_event_name` (camelCase), `workspace_roots[]`; `cwd` can be empty, so the first
//!   workspace root stands in;
//! - `preToolUse` / `postToolUse` carry `tool_name`, `tool_input`, `tool_use_id` (seen as
//!   `call_…\nctc_…`: its first line is kept); tools `Shell {command, working_directory?}`,
//!   `Write {file_path|path, content|contents}`, `StrReplace` / `Edit {file_path|path,
//!   old_string, new_string}`, `Delete {file_path|path}`, `Task`, `Read`, `Grep`, `Glob`,
//!   `MCP:<name>`;
//! - `beforeSubmitPrompt` has the person's `prompt`; `subagentStart` / `subagentStop` have
//!   `subagent_id`, `subagent_type`, `parent_conversation_id`, `tool_call_id`;
//! - a denial is `{"permission":"deny","user_message":…,"agent_message":…}` on stdout with
//!   exit 0, and the model reads `user_message`: the reason goes in both;
//! - `sessionStart` and `postToolUse` take `additional_context`; `beforeSubmitPrompt` takes
//!   none.

use serde_json::{Map, Value, json};

/// Cursor's events maos installs, and the daemon's name of each. Only these: one event name
/// `cursor-agent` does not know disables the whole hooks file.
pub const EVENTS: &[(&str, &str)] = &[
    ("sessionStart", "SessionStart"),
    ("beforeSubmitPrompt", "UserPromptSubmit"),
    ("preToolUse", "PreToolUse"),
    ("postToolUse", "PostToolUse"),
    ("subagentStart", "SubagentStart"),
    ("subagentStop", "SubagentStop"),
    ("stop", "Stop"),
    ("preCompact", "PreCompact"),
    ("sessionEnd", "SessionEnd"),
];

/// Cursor's tools maos knows, and the daemon's (Claude Code's) name of each: its shell is
/// `Bash` (so the daemon reads what the command writes), its file writes `Write` or `Edit`
/// (a deletion writes the file away: a `Write` that sends no text), its subagent tool `Task`.
/// Reads pass through as they are. Every other tool is refused as input maos cannot read
/// (`MCP:<name>` tools excepted: maos writes nothing for them).
const TOOLS: &[(&str, &str)] = &[
    ("Shell", "Bash"),
    ("Write", "Write"),
    ("StrReplace", "Edit"),
    ("Edit", "Edit"),
    ("Delete", "Write"),
    ("Task", "Task"),
    ("Read", "Read"),
    ("Grep", "Grep"),
    ("Glob", "Glob"),
];

/// Longest id accepted from Cursor (`conversation_id`, `subagent_id`, …).
const MAX_ID: usize = 256;

fn bad(what: impl std::fmt::Display) -> String {
    format!("hook input from Cursor: {what}")
}

/// `key` of `v` as an id: absent, or a non-empty string of at most [`MAX_ID`] characters
/// without control characters (a hostile one would name a file or a row).
fn id(v: &Value, key: &str) -> Result<Option<String>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) if s.is_empty() => Ok(None),
        Some(Value::String(s)) => {
            // Cursor's tool use ids are `call_…\nctc_…`: the call's own id is the first line.
            let s = s.lines().next().unwrap_or_default();
            if s.chars().count() > MAX_ID || s.chars().any(char::is_control) || s.is_empty() {
                return Err(bad(format!(
                    "{key} is not an id (empty, over {MAX_ID} characters, or with control characters)"
                )));
            }
            Ok(Some(s.to_string()))
        }
        Some(_) => Err(bad(format!("{key} is not a string"))),
    }
}

/// `key` of `v` as text: absent, or a string.
fn string<'a>(v: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(bad(format!("{key} is not a string"))),
    }
}

/// `v`, one hook input of Cursor, made the daemon's in place: the event and tool under
/// Claude Code's names, `session_id` from `conversation_id`, `cwd` from the workspace when
/// Cursor leaves it empty, a subagent's events under its `agent_id`. Input maos cannot read
/// (no `conversation_id`, fields of the wrong type, a tool maos does not know) is a one-line
/// error, and nothing is sent.
pub fn input(v: &mut Value) -> Result<(), String> {
    let Some(obj) = v.as_object() else {
        return Err(bad("not a JSON object"));
    };
    let event = string(v, "hook_event_name")?
        .ok_or_else(|| bad("no hook_event_name"))?
        .to_string();
    let conversation = id(v, "conversation_id")?.ok_or_else(|| bad("no conversation_id"))?;
    let parent = id(v, "parent_conversation_id")?.filter(|p| *p != conversation);
    let subagent = id(v, "subagent_id")?;
    let roots = match obj.get("workspace_roots") {
        None | Some(Value::Null) => Vec::new(),
        Some(Value::Array(a)) if a.iter().all(Value::is_string) => {
            a.iter().filter_map(Value::as_str).collect()
        }
        Some(_) => return Err(bad("workspace_roots is not a list of paths")),
    };
    let cwd = match string(v, "cwd")? {
        Some(c) if !c.trim().is_empty() => Some(c.to_string()),
        // Seen empty: the workspace's first root is where the window works.
        _ => roots.first().map(|r| r.to_string()),
    };
    let ours = EVENTS
        .iter()
        .find(|(theirs, _)| *theirs == event)
        .map(|(_, ours)| *ours);
    let subagent_event = matches!(event.as_str(), "subagentStart" | "subagentStop");
    let mut out = Map::new();
    // A subagent's events, and any call that names a parent conversation of its own, belong
    // to the parent's window: the session is the parent's, the agent the subagent.
    let (session, agent) = match (subagent_event, parent) {
        (true, Some(p)) => (p, subagent.clone().or(Some(conversation))),
        (true, None) => (conversation, subagent.clone()),
        (false, Some(p)) => (p, subagent.clone().or(Some(conversation))),
        (false, None) => (conversation, subagent.clone()),
    };
    out.insert("session_id".into(), json!(session));
    if let Some(a) = agent {
        out.insert("agent_id".into(), json!(a));
    }
    if let Some(t) = string(v, "subagent_type")? {
        out.insert("agent_type".into(), json!(t));
    }
    out.insert(
        "hook_event_name".into(),
        json!(ours.unwrap_or(event.as_str())),
    );
    if let Some(c) = cwd {
        out.insert("cwd".into(), json!(c));
    }
    if let Some(t) = id(v, "tool_use_id")?.or(id(v, "tool_call_id")?) {
        out.insert("tool_use_id".into(), json!(t));
    }
    if let Some(p) = string(v, "prompt")?.filter(|_| event == "beforeSubmitPrompt") {
        out.insert("prompt".into(), json!(p));
    }
    if let Some(r) = string(v, "reason")?.or(string(v, "trigger")?) {
        out.insert("source".into(), json!(r));
    }
    if matches!(
        event.as_str(),
        "preToolUse" | "postToolUse" | "postToolUseFailure"
    ) {
        let tool =
            string(v, "tool_name")?.ok_or_else(|| bad(format!("a {event} without tool_name")))?;
        let (name, input) = tool_input(tool, v.get("tool_input"))?;
        out.insert("tool_name".into(), json!(name));
        out.insert("tool_input".into(), input);
    }
    *v = Value::Object(out);
    Ok(())
}

/// One tool call's name and input in the daemon's terms.
fn tool_input(tool: &str, input: Option<&Value>) -> Result<(String, Value), String> {
    if tool.starts_with("MCP:") {
        return Ok((tool.to_string(), input.cloned().unwrap_or(Value::Null)));
    }
    let Some((_, ours)) = TOOLS.iter().find(|(theirs, _)| *theirs == tool) else {
        let known: Vec<&str> = TOOLS.iter().map(|(t, _)| *t).collect();
        return Err(bad(format!(
            "unknown tool {:?} (maos reads {} and MCP:<name>)",
            tool.chars().take(64).collect::<String>(),
            known.join(", ")
        )));
    };
    let input = match input {
        None | Some(Value::Null) => Value::Object(Map::new()),
        Some(Value::Object(o)) => Value::Object(o.clone()),
        Some(_) => return Err(bad(format!("the tool_input of {tool} is not an object"))),
    };
    let mut out = Map::new();
    match tool {
        "Shell" => {
            let command =
                string(&input, "command")?.ok_or_else(|| bad("a Shell call without a command"))?;
            out.insert("command".into(), json!(command));
            // Run there: the daemon reads the command as the shell sees it (`cd DIR && …`).
            if let Some(dir) = string(&input, "working_directory")?.filter(|d| !d.is_empty()) {
                out.insert("dir_path".into(), json!(dir));
            }
        }
        "Write" | "StrReplace" | "Edit" | "Delete" => {
            let path = match string(&input, "file_path")? {
                Some(p) => Some(p),
                None => string(&input, "path")?,
            };
            let path =
                path.ok_or_else(|| bad(format!("a {tool} call whose tool_input names no file")))?;
            out.insert("file_path".into(), json!(path));
            if tool == "Write"
                && let Some(text) = match string(&input, "content")? {
                    Some(t) => Some(t),
                    None => string(&input, "contents")?,
                }
            {
                out.insert("content".into(), json!(text));
            }
            if matches!(tool, "StrReplace" | "Edit")
                && let Some(text) = string(&input, "new_string")?
            {
                out.insert("new_string".into(), json!(text));
            }
        }
        "Task" => {
            for key in ["description", "prompt", "subagent_type"] {
                if let Some(t) = string(&input, key)? {
                    out.insert(key.into(), json!(t));
                }
            }
        }
        // Reads: nothing maos uses.
        _ => {}
    }
    Ok((ours.to_string(), Value::Object(out)))
}

/// The refusal of a tool call: flat, and the reason in both messages (the model is shown
/// `user_message`, measured by others; `agent_message` is the documented field for it).
pub fn denial(reason: &str) -> Value {
    json!({"permission": "deny", "user_message": reason, "agent_message": reason})
}

/// Context for the model after `event` (the daemon's name), if Cursor takes any there:
/// `sessionStart` and `postToolUse` take `additional_context`; `beforeSubmitPrompt` cannot
/// add context.
pub fn context(event: &str, context: &str) -> Option<Value> {
    match event {
        "SessionStart" | "PostToolUse" => Some(json!({ "additional_context": context })),
        _ => None,
    }
}

/// A message for the person (maos could not check a call, a project was made): Cursor
/// documents no message for an allowed call or a session's start, so none.
pub fn notice(message: &str) -> Option<Value> {
    let _ = message;
    None
}

#[cfg(test)]
mod tests {
    use super::*;
    use maos_proto::{Cli, HookCall};

    const FIXTURE: &str = include_str!("../../../tests/fixtures/cursor/two-windows.jsonl");
    const A: &str = "4f1c2a9e-7b3d-4e8a-b6c5-0d9e8f7a6b5c";
    const S: &str = "b3e1f0a2-6c5d-4b8e-9a7f-2c1d0e9f8a7b";

    /// Each fixture input, as the daemon gets it.
    fn calls() -> Vec<(String, HookCall)> {
        FIXTURE
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| {
                let v: Value = serde_json::from_str(&l.replace("{{PROJECT}}", "/p")).unwrap();
                let input = v["input"].to_string();
                let (call, _) =
                    super::super::parse_for(input.as_bytes(), 1 << 20, Cli::Cursor).unwrap();
                (
                    v["input"]["hook_event_name"].as_str().unwrap().to_string(),
                    call,
                )
            })
            .collect()
    }

    fn one(input: Value) -> Result<HookCall, String> {
        let text = input.to_string();
        super::super::parse_for(text.as_bytes(), 1 << 20, Cli::Cursor).map(|(c, _)| c)
    }

    #[test]
    fn the_documented_shapes_read_as_the_daemon_s() {
        let calls = calls();
        let find = |event: &str, tool: Option<&str>| -> &HookCall {
            &calls
                .iter()
                .find(|(e, c)| e == event && (tool.is_none() || c.tool_name.as_deref() == tool))
                .unwrap_or_else(|| panic!("{event} {tool:?}"))
                .1
        };
        for (event, call) in &calls {
            assert_eq!(call.cli, Cli::Cursor);
            // The empty cwd is the workspace's first root.
            assert_eq!(call.cwd.as_deref(), Some("/p"), "{event}");
        }
        let start = find("sessionStart", None);
        assert_eq!(
            (start.event.as_str(), start.session_id.as_str()),
            ("SessionStart", A)
        );
        let prompt = find("beforeSubmitPrompt", None);
        assert_eq!(prompt.event, "UserPromptSubmit");
        assert_eq!(
            prompt.summary.as_deref(),
            Some("Add rate limiting to the login endpoint")
        );
        let write = find("preToolUse", Some("Write"));
        assert_eq!(write.event, "PreToolUse");
        assert_eq!(write.paths, ["/p/src/auth/limit.rs"]);
        assert!(write.writes_files());
        // Cursor's `call_…\nctc_…`: the call's own id.
        assert_eq!(write.tool_use_id.as_deref(), Some("call_a1"));
        let post = find("postToolUse", Some("Write"));
        assert_eq!(post.written.as_ref().map(|w| w.bytes), Some(20));
        let edit = find("preToolUse", Some("Edit"));
        assert_eq!(edit.paths, ["/p/src/auth/limit.rs"]);
        let shell = find("preToolUse", Some("Bash"));
        assert_eq!(
            shell.command.as_deref(),
            Some("cd '/p' && printf 'x' > src/auth/limit.rs")
        );
        // A deletion writes the file away: a write with its path and no text.
        let delete = calls
            .iter()
            .find(|(_, c)| c.tool_use_id.as_deref() == Some("call_b3"))
            .map(|(_, c)| c)
            .unwrap();
        assert_eq!(
            (delete.tool_name.as_deref(), &delete.paths[..]),
            (Some("Write"), &["/p/src/auth/limit.rs".to_string()][..])
        );
        // beforeShellExecution is not installed: if it comes, it is nothing the daemon acts on.
        let before = find("beforeShellExecution", None);
        assert_eq!(before.event, "beforeShellExecution");
        assert!(before.tool_name.is_none() && !before.writes_files());
        let task = find("preToolUse", Some("Task"));
        assert_eq!(task.summary.as_deref(), Some("limiter tests"));
        assert_eq!(
            task.prompt_line.as_deref(),
            Some("Write tests for the rate limiter in src/auth/limit.rs")
        );
        for event in ["subagentStart", "subagentStop"] {
            let sub = find(event, None);
            assert_eq!(sub.session_id, A, "{event}: the parent's session");
            assert_eq!(sub.agent_id.as_deref(), Some(S), "{event}");
            assert_eq!(sub.agent_type.as_deref(), Some("generalPurpose"), "{event}");
        }
        assert_eq!(find("subagentStart", None).event, "SubagentStart");
        assert_eq!(find("subagentStop", None).event, "SubagentStop");
        assert_eq!(find("stop", None).event, "Stop");
        let end = find("sessionEnd", None);
        assert_eq!(
            (end.event.as_str(), end.source.as_deref()),
            ("SessionEnd", Some("completed"))
        );
    }

    #[test]
    fn a_call_naming_a_parent_conversation_is_its_subagent_s() {
        let call = one(
            json!({"hook_event_name": "preToolUse", "conversation_id": S,
            "parent_conversation_id": A, "workspace_roots": ["/p"], "tool_name": "Write",
            "tool_input": {"file_path": "/p/x", "content": "x"}}),
        )
        .unwrap();
        assert_eq!(
            (call.session_id.as_str(), call.agent_id.as_deref()),
            (A, Some(S))
        );
        // Its own conversation as parent: the window itself.
        let call = one(
            json!({"hook_event_name": "preToolUse", "conversation_id": A,
            "parent_conversation_id": A, "workspace_roots": ["/p"], "tool_name": "Read",
            "tool_input": {"path": "/p/x"}}),
        )
        .unwrap();
        assert_eq!(
            (call.session_id.as_str(), call.agent_id.as_deref()),
            (A, None)
        );
    }

    #[test]
    fn input_maos_cannot_read_is_one_line_naming_what() {
        let base = json!({"hook_event_name": "preToolUse", "conversation_id": A,
            "workspace_roots": ["/p"], "tool_name": "Write",
            "tool_input": {"file_path": "/p/x", "content": "x"}});
        let with = |key: &str, v: Value| {
            let mut i = base.clone();
            match v {
                Value::Null => i.as_object_mut().unwrap().remove(key),
                v => i.as_object_mut().unwrap().insert(key.into(), v),
            };
            one(i).unwrap_err()
        };
        for (key, v, says) in [
            ("conversation_id", Value::Null, "no conversation_id"),
            (
                "conversation_id",
                json!(42),
                "conversation_id is not a string",
            ),
            (
                "conversation_id",
                json!("x".repeat(300)),
                "conversation_id is not an id",
            ),
            (
                "conversation_id",
                json!("a\u{1b}[2Jb"),
                "conversation_id is not an id",
            ),
            ("hook_event_name", Value::Null, "no hook_event_name"),
            (
                "workspace_roots",
                json!("/p"),
                "workspace_roots is not a list",
            ),
            ("tool_name", json!("Teleport"), "unknown tool \"Teleport\""),
            ("tool_name", json!(["Write"]), "tool_name is not a string"),
            (
                "tool_input",
                json!("file_path=/p/x"),
                "tool_input of Write is not an object",
            ),
            (
                "tool_input",
                json!({"content": "x"}),
                "a Write call whose tool_input names no file",
            ),
            (
                "tool_input",
                json!({"file_path": 7}),
                "file_path is not a string",
            ),
        ] {
            let e = with(key, v);
            assert!(e.contains(says), "{key}: {e}");
            assert!(e.starts_with("hook input from Cursor: "), "{e}");
            assert!(!e.contains('\n'), "{e:?}");
        }
        let shell = json!({"hook_event_name": "preToolUse", "conversation_id": A,
            "tool_name": "Shell", "tool_input": {"working_directory": "/p"}});
        assert!(
            one(shell)
                .unwrap_err()
                .contains("a Shell call without a command")
        );
        assert!(one(json!([1])).unwrap_err().contains("not a JSON object"));
        // MCP tools pass as they are.
        let mcp = json!({"hook_event_name": "preToolUse", "conversation_id": A,
            "tool_name": "MCP:query", "tool_input": {"q": 1}});
        assert_eq!(one(mcp).unwrap().tool_name.as_deref(), Some("MCP:query"));
    }

    #[test]
    fn the_answers_are_cursor_s() {
        let d = denial("maos: held");
        assert_eq!(
            d,
            json!({"permission": "deny", "user_message": "maos: held", "agent_message": "maos: held"})
        );
        assert_eq!(
            context("SessionStart", "brief"),
            Some(json!({"additional_context": "brief"}))
        );
        assert_eq!(
            context("PostToolUse", "told"),
            Some(json!({"additional_context": "told"}))
        );
        assert_eq!(context("UserPromptSubmit", "x"), None);
        assert_eq!(notice("x"), None);
        // Every installed event has the daemon's name.
        assert!(EVENTS.iter().all(|(c, d)| c != d && !d.is_empty()));
    }
}
