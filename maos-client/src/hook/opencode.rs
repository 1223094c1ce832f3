//! OpenCode's hook contract, both ways: its input made the daemon's (Claude Code's event and
//! field names), and maos's answer in its terms. Pure (serde_json only): the fuzz target
//! includes it through `input.rs`.
//!
//! OpenCode has no hook commands: maos's plugin (`maos-client/src/opencode_plugin.js`, written
//! by `install-hooks --opencode`) runs `maos hook --cli opencode` on OpenCode's plugin hooks
//! with one JSON object on stdin: Claude Code's event names and `session_id` (a subagent's
//! child session as `agent_id` of its root session), with OpenCode's own tool names and
//! arguments (1.18.33: `write {filePath, content}`, `edit {filePath, oldString, newString,
//! replaceAll?}`, `bash {command, workdir?, timeout?}`, `task {description, prompt,
//! subagent_type}`, and `apply_patch {patchText}` for the models that get it), which are made
//! Claude Code's here. The answer on stdout is the plugin's: `{"decision":"deny","reason"}`
//! (the plugin throws, and OpenCode gives the model the reason as the tool's error),
//! `{"context"}` (for the model), `{"message"}` (for the person).

use serde_json::{Map, Value, json};

/// `v`, one hook input of OpenCode, made the daemon's in place.
pub fn input(v: &mut Value) {
    let cwd = v.get("cwd").and_then(Value::as_str).map(str::to_string);
    let Some(o) = v.as_object_mut() else { return };
    let Some(tool) = o.get("tool_name").and_then(Value::as_str) else {
        return;
    };
    let ours = match tool {
        "write" => "Write",
        "edit" => "Edit",
        "multiedit" => "MultiEdit",
        "bash" => "Bash",
        "task" => "Task",
        "apply_patch" | "patch" => "apply_patch",
        _ => return,
    };
    o.insert("tool_name".into(), Value::from(ours));
    let Some(Value::Object(args)) = o.get_mut("tool_input") else {
        return;
    };
    let args = std::mem::take(args);
    o.insert(
        "tool_input".into(),
        Value::Object(tool_input(ours, args, cwd.as_deref())),
    );
}

/// OpenCode's arguments of the tool the daemon calls `tool`, in Claude Code's names.
fn tool_input(tool: &str, mut args: Map<String, Value>, cwd: Option<&str>) -> Map<String, Value> {
    let mut rename = |from: &str, to: &str| {
        if let Some(x) = args.remove(from) {
            args.insert(to.into(), x);
        }
    };
    match tool {
        "Write" | "Edit" | "MultiEdit" => {
            rename("filePath", "file_path");
            rename("oldString", "old_string");
            rename("newString", "new_string");
            rename("replaceAll", "replace_all");
            if let Some(Value::Array(edits)) = args.get_mut("edits") {
                for e in edits.iter_mut().filter_map(Value::as_object_mut) {
                    if let Some(x) = e.remove("newString") {
                        e.insert("new_string".into(), x);
                    }
                }
            }
            // OpenCode resolves a relative path against its working directory; the daemon
            // takes Claude Code's absolute one (and Gemini CLI's relative one against `cwd`).
            if let (Some(path), Some(cwd)) = (args.get("file_path").and_then(Value::as_str), cwd)
                && !path.starts_with('/')
                && cwd.starts_with('/')
            {
                let abs = format!("{}/{path}", cwd.trim_end_matches('/'));
                args.insert("file_path".into(), Value::from(abs));
            }
        }
        // The command runs in `workdir` (relative to OpenCode's directory): read as Gemini
        // CLI's `dir_path` is.
        "Bash" => rename("workdir", "dir_path"),
        "apply_patch" => rename("patchText", "command"),
        _ => {}
    }
    args
}

/// The refusal of a tool call: the plugin throws it, and OpenCode gives the model the reason
/// as the tool's error.
pub fn denial(reason: &str) -> Value {
    json!({"decision": "deny", "reason": reason})
}

/// Context for the model after `event` (the daemon's name): the plugin adds it to the system
/// prompt of the session's next model requests (SessionStart's for the whole session,
/// UserPromptSubmit's for the turn), or to the tool's output (PostToolUse).
pub fn context(event: &str, context: &str) -> Option<Value> {
    matches!(event, "SessionStart" | "UserPromptSubmit" | "PostToolUse")
        .then(|| json!({ "context": context }))
}

/// A message for the person (maos could not check a call, a project was made): the plugin
/// prints it (on stderr in `opencode run`, as a toast in the TUI).
pub fn notice(message: &str) -> Option<Value> {
    Some(json!({ "message": message }))
}

#[cfg(test)]
mod tests {
    use super::super::call_of;
    use super::*;

    fn call(v: Value) -> maos_proto::HookCall {
        let mut v = v;
        input(&mut v);
        call_of(&v).expect("a call")
    }

    /// OpenCode 1.18.33's `write` with a relative `filePath` (as its model gave it): the
    /// daemon's `Write` of the absolute path under `cwd`.
    #[test]
    fn a_write_is_claude_codes_write_of_the_absolute_path() {
        let c = call(
            json!({"hook_event_name": "PreToolUse", "session_id": "ses_1",
            "cwd": "/repo", "tool_name": "write",
            "tool_input": {"filePath": "notes/a.txt", "content": "x"}}),
        );
        assert_eq!(c.tool_name.as_deref(), Some("Write"));
        assert_eq!(c.paths, ["/repo/notes/a.txt"]);
        let c = call(
            json!({"hook_event_name": "PostToolUse", "session_id": "ses_1",
            "cwd": "/repo", "tool_name": "edit", "tool_input": {"filePath": "/repo/b.rs",
            "oldString": "a", "newString": "bc", "replaceAll": true}}),
        );
        assert_eq!(c.tool_name.as_deref(), Some("Edit"));
        assert_eq!(c.paths, ["/repo/b.rs"]);
        assert_eq!(c.written.map(|w| w.bytes), Some(2));
    }

    /// `bash` with a `workdir`: the daemon reads the command as run there; `task` is the
    /// subagent tool, its child session named in the result.
    #[test]
    fn bash_and_task_are_claude_codes() {
        let c = call(
            json!({"hook_event_name": "PreToolUse", "session_id": "ses_1",
            "tool_name": "bash", "tool_input": {"command": "echo > a", "workdir": "sub"}}),
        );
        assert_eq!(c.tool_name.as_deref(), Some("Bash"));
        assert_eq!(c.command.as_deref(), Some("cd 'sub' && echo > a"));
        let c = call(
            json!({"hook_event_name": "PostToolUse", "session_id": "ses_1",
            "tool_name": "task", "tool_use_id": "call_1",
            "tool_input": {"description": "d", "prompt": "do it", "subagent_type": "general"},
            "tool_response": {"agentId": "ses_2"}}),
        );
        assert_eq!(c.tool_name.as_deref(), Some("Task"));
        assert_eq!(c.subagent.map(|s| s.agent_id).as_deref(), Some("ses_2"));
        assert_eq!(c.agent_type.as_deref(), Some("general"));
    }

    /// Hostile shapes change nothing they should not: a tool input that is not an object, an
    /// unknown tool, no tool; a write naming no file is refused like Claude Code's.
    #[test]
    fn odd_inputs_are_left_alone_or_refused() {
        for v in [
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "read",
                   "tool_input": {"filePath": "x"}}),
            json!({"hook_event_name": "PreToolUse", "session_id": "s", "tool_name": "bash",
                   "tool_input": "rm -rf /"}),
            json!({"hook_event_name": "Stop", "session_id": "s", "tool_name": 7}),
            json!([1, 2]),
        ] {
            let mut w = v.clone();
            input(&mut w);
            if v["tool_name"] != "bash" {
                assert_eq!(w, v);
            }
        }
        let mut v = json!({"hook_event_name": "PreToolUse", "session_id": "s",
            "tool_name": "write", "tool_input": {"content": "x"}});
        input(&mut v);
        assert!(call_of(&v).is_err());
    }

    #[test]
    fn answers_are_the_plugins() {
        assert_eq!(denial("r"), json!({"decision": "deny", "reason": "r"}));
        assert_eq!(context("Stop", "c"), None);
        assert_eq!(context("SessionStart", "c"), Some(json!({"context": "c"})));
        assert_eq!(notice("m"), Some(json!({"message": "m"})));
    }
}
