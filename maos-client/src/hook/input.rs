//! The pure half of `maos hook`: one hook input (JSON from the agent CLI) read and reduced to a
//! [`HookCall`]. No socket, no output: the unit and property tests and the fuzz target
//! (`fuzz/fuzz_targets/hook_input.rs`, which includes this file by path) drive it directly, so
//! it may only use `maos_core`, `maos_proto`, `serde`, `serde_json` and `sha2`.

use std::fmt::Write as _;
use std::io::Read;

use maos_proto::{HookCall, SubagentResult, Todo, Written};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

/// Largest hook input read (a Write's content can be large; we read past it, never keep it).
pub const MAX_INPUT: u64 = 32 * 1024 * 1024;

/// Deepest nesting of arrays and objects serde_json accepts (its default recursion limit).
const MAX_DEPTH: usize = 128;

/// A reader that remembers how many bytes went through it.
struct Counted<R> {
    inner: R,
    read: u64,
}

impl<R: Read> Read for Counted<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.read += n as u64;
        Ok(n)
    }
}

/// Read one JSON value from `r`, at most `limit` bytes of it, without waiting for EOF after it
/// (some CLI versions keep stdin open). The error is one line saying what is wrong with the
/// input: too large, nested too deeply, or not JSON (with serde_json's line and column).
pub fn read_value<R: Read>(r: R, limit: u64) -> Result<Value, String> {
    let mut counted = Counted {
        inner: r.take(limit),
        read: 0,
    };
    let mut de = serde_json::Deserializer::from_reader(&mut counted);
    let result = Value::deserialize(&mut de);
    drop(de);
    match result {
        Ok(v) => Ok(v),
        // The value was cut off by the cap, not by the writer.
        Err(e) if e.is_eof() && counted.read >= limit => Err(format!(
            "the input is over the {limit}-byte cap for one hook call"
        )),
        Err(e) if e.to_string().starts_with("recursion limit exceeded") => Err(format!(
            "the input nests arrays or objects more than {MAX_DEPTH} levels deep ({e})"
        )),
        Err(e) => Err(format!(
            "the input is not one JSON object ({})",
            maos_proto::frame::one_line(&e.to_string())
        )),
    }
}

pub fn text(v: &Value, key: &str) -> Option<String> {
    v.get(key).and_then(Value::as_str).map(str::to_string)
}

pub fn env(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// The whole parse of one hook input of `cli`: [`read_value`], Gemini CLI's events renamed
/// ([`gemini_input`]), then [`call_of`], with the CLI on the call.
pub fn parse_for<R: Read>(r: R, limit: u64, cli: maos_proto::Cli) -> Result<HookCall, String> {
    let mut v = read_value(r, limit)?;
    if cli == maos_proto::Cli::Gemini {
        gemini_input(&mut v);
    }
    let mut call = call_of(&v)?;
    call.cli = cli;
    Ok(call)
}

/// Gemini CLI's hook input read as the daemon's: its `hook_event_name` renamed in place
/// ([`gemini_event`]), so the daemon stays CLI-agnostic. Its write tools (`write_file`,
/// `replace`) keep their names: `HookCall::writes_files` knows them.
pub fn gemini_input(v: &mut Value) {
    let trigger = v.get("trigger").and_then(Value::as_str);
    let Some(event) = v.get("hook_event_name").and_then(Value::as_str) else {
        return;
    };
    let ours = gemini_event(event, trigger);
    if ours != event {
        let ours = Value::from(ours);
        if let Some(o) = v.as_object_mut() {
            o.insert("hook_event_name".into(), ours);
        }
    }
}

/// The event the daemon knows for Gemini CLI's `event`: its tool, agent-turn and compression
/// events under Claude Code's names; the others as they are (`SessionStart` and `SessionEnd`
/// are the same; the model and notification events are not installed and mean nothing to the
/// daemon). Gemini CLI 0.61.0 fires `PreCompress` with `trigger: auto` before every model
/// turn, before it even checks whether to compress: only a `manual` one (`/compress`) is
/// known to compress, so only that one is a `PreCompact`.
pub fn gemini_event<'a>(event: &'a str, trigger: Option<&str>) -> &'a str {
    match event {
        "BeforeTool" => "PreToolUse",
        "AfterTool" => "PostToolUse",
        // Its input has the user's `prompt`.
        "BeforeAgent" => "UserPromptSubmit",
        // The agent's turn is over, as Claude Code's Stop.
        "AfterAgent" => "Stop",
        "PreCompress" if trigger == Some("manual") => "PreCompact",
        other => other,
    }
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
        "Write" | "write_file" => vec![input.get("content")?.as_str()?],
        "Edit" | "replace" => vec![input.get("new_string")?.as_str()?],
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

/// Most items of a task list kept (`TodoWrite`).
const MAX_TODOS: usize = 100;

/// `TodoWrite`'s list: each item's first line and its status (`pending` when it has none);
/// items without text are left out, and at most [`MAX_TODOS`] are kept.
fn todos_of(input: &Value) -> Option<Vec<Todo>> {
    let items = input.get("todos")?.as_array()?;
    Some(
        items
            .iter()
            .filter_map(|t| {
                Some(Todo {
                    content: first_line(&text(t, "content")?)?,
                    status: text(t, "status").unwrap_or_else(|| "pending".into()),
                })
            })
            .take(MAX_TODOS)
            .collect(),
    )
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

/// The text inside the first `<name>…</name>` of `text`, trimmed.
fn tag<'a>(text: &'a str, name: &str) -> Option<&'a str> {
    let open = format!("<{name}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{name}>"))?;
    Some(text[start..start + len].trim()).filter(|t| !t.is_empty())
}

/// Claude Code's word that a background subagent finished, which arrives as a
/// `UserPromptSubmit` whose prompt is a `<task-notification>` block: the subagent (its task
/// id and the tool call that started it), its status and usage. `None` for a person's prompt.
fn notification_of(prompt: &str) -> Option<(Option<String>, Option<SubagentResult>)> {
    let body = prompt.trim_start().strip_prefix("<task-notification>")?;
    let tool_use = tag(body, "tool-use-id").map(str::to_string);
    let num = |k: &str| tag(body, k).and_then(|v| v.parse::<u64>().ok());
    // Without an id it names no subagent: still no prompt of the person's.
    let result = tag(body, "task-id")
        .or(tool_use.as_deref())
        .map(|id| SubagentResult {
            agent_id: id.to_string(),
            status: tag(body, "status").map(str::to_string),
            total_tokens: num("subagent_tokens").or_else(|| num("total_tokens")),
            total_duration_ms: num("duration_ms"),
            total_tool_use_count: num("tool_uses"),
        });
    Some((tool_use, result))
}

/// The call from one hook input object (lenient: unknown fields ignored, most optional).
pub fn call_of(v: &Value) -> Result<HookCall, String> {
    if !v.is_object() {
        return Err("the input is JSON but not an object".into());
    }
    let event = text(v, "hook_event_name").ok_or("hook input has no hook_event_name")?;
    let session_id = text(v, "session_id").ok_or("hook input has no session_id")?;
    let tool_name = text(v, "tool_name");
    let tool = tool_name.as_deref().unwrap_or("");
    let input = v.get("tool_input").unwrap_or(&Value::Null);
    let post = event == "PostToolUse";
    let spawn = matches!(tool, "Agent" | "Task");
    let prompt = (event == "UserPromptSubmit")
        .then(|| text(v, "prompt"))
        .flatten();
    let notification = prompt.as_deref().and_then(notification_of);
    let summary = match (event.as_str(), &notification) {
        (_, Some(_)) => None,
        ("UserPromptSubmit", None) => prompt.as_deref().and_then(first_line),
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
        tool_use_id: match &notification {
            Some((tool_use, _)) => tool_use.clone(),
            None => text(v, "tool_use_id"),
        },
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
        subagent: match notification {
            Some((_, result)) => result,
            None => (post && spawn)
                .then(|| v.get("tool_response").and_then(subagent_of))
                .flatten(),
        },
        maos_session: env("MAOS_SESSION_ID"),
        maos_agent: env("MAOS_AGENT_ID"),
        path_error: None,
        todos: (post && tool == "TodoWrite")
            .then(|| todos_of(input))
            .flatten(),
        event,
        session_id,
        tool_name,
        ..HookCall::default()
    })
}

/// The whole parse of one hook input: [`read_value`], then [`call_of`] (the tests' entry;
/// `maos hook` and the fuzz target use [`parse_for`]).
#[allow(dead_code)]
pub fn parse<R: Read>(r: R, limit: u64) -> Result<HookCall, String> {
    call_of(&read_value(r, limit)?)
}
