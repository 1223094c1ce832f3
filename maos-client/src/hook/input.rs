//! The pure half of `maos hook`: one hook input (JSON from the agent CLI) read and reduced to a
//! [`HookCall`]. No socket, no output: the unit and property tests and the fuzz target
//! (`fuzz/fuzz_targets/hook_input.rs`, which includes this file by path) drive it directly, so
//! it may only use `maos_core`, `maos_proto`, `serde`, `serde_json` and `sha2`.

use std::fmt::Write as _;
use std::io::Read;

use maos_proto::{HookCall, SpawnedBy, SubagentResult, Todo, Written};
use serde::Deserialize;
use serde_json::Value;
use sha2::{Digest, Sha256};

// The contracts of the CLIs whose hooks are not Claude Code's shape (files next to this one;
// `#[path]` so that the fuzz target, which includes this file by path, finds them too).
#[path = "copilot.rs"]
pub mod copilot;
#[path = "cursor.rs"]
pub mod cursor;
#[path = "opencode.rs"]
pub mod opencode;

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
            maos_core::text::escape_controls(&e.to_string())
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
/// ([`gemini_input`]), then [`call_of`], with the CLI on the call; the value too (for
/// `shell_patch_files`).
pub fn parse_for<R: Read>(
    r: R,
    limit: u64,
    cli: maos_proto::Cli,
) -> Result<(HookCall, Value), String> {
    let mut v = read_value(r, limit)?;
    match cli {
        maos_proto::Cli::Gemini => gemini_input(&mut v),
        maos_proto::Cli::Copilot => copilot::input(&mut v),
        maos_proto::Cli::Cursor => cursor::input(&mut v)?,
        maos_proto::Cli::OpenCode => opencode::input(&mut v),
        maos_proto::Cli::Claude | maos_proto::Cli::Codex => {}
    }
    let mut call = call_of(&v)?;
    call.cli = cli;
    Ok((call, v))
}

/// Gemini CLI's hook input read as the daemon's: its `hook_event_name` renamed in place
/// ([`gemini_event`]), so the daemon stays CLI-agnostic. Its write tools (`write_file`,
/// `replace`) keep their names: `HookCall::writes_files` knows them.
pub fn gemini_input(v: &mut Value) {
    // The person's prompt, without the context maos gave the window at SessionStart.
    if v.get("hook_event_name").and_then(Value::as_str) == Some("BeforeAgent")
        && let Some(prompt) = v.get("prompt").and_then(Value::as_str)
    {
        let theirs = gemini_prompt(prompt);
        if theirs.len() != prompt.len() {
            let theirs = Value::from(theirs);
            if let Some(o) = v.as_object_mut() {
                o.insert("prompt".into(), theirs);
            }
        }
    }
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

/// The prompt of a Gemini CLI `BeforeAgent` as the person wrote it. In `-p` mode Gemini CLI
/// (0.61.0) puts the SessionStart hooks' context in front of the prompt, in its model request
/// and in this event's `prompt` alike: `<hook_context>` + every hook's `additionalContext`
/// joined by newlines, each `<` and `>` in it escaped (`&lt;`, `&gt;`) + `</hook_context>`,
/// then a blank line, then the prompt. Such a block is cut off when it is one maos gave (a
/// line of it starts with `maos: `, as every context of maos's does); the block, escaped as
/// Gemini CLI escapes, ends at the first `</hook_context>`. Anything else is the person's and
/// kept whole: a prompt without the block, a block with a raw `<` or `>` in it (not escaped,
/// so not Gemini CLI's), one with no line of maos's, or one not followed by a blank line.
pub fn gemini_prompt(prompt: &str) -> &str {
    const OPEN: &str = "<hook_context>";
    const CLOSE: &str = "</hook_context>";
    let Some(rest) = prompt.strip_prefix(OPEN) else {
        return prompt;
    };
    let Some(end) = rest.find(CLOSE) else {
        return prompt;
    };
    let (context, after) = (&rest[..end], &rest[end + CLOSE.len()..]);
    let ours =
        !context.contains(['<', '>']) && context.split('\n').any(|line| line.starts_with("maos: "));
    let theirs = match after {
        "" => Some(after),
        _ => after.strip_prefix("\n\n"),
    };
    match theirs {
        Some(theirs) if ours => theirs,
        _ => prompt,
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

/// A patch that a shell command gives to `apply_patch`, as Codex's shell tool runs it
/// (Codex applies such a patch itself and fires only a `Bash` hook).
#[derive(Debug, PartialEq, Eq)]
pub struct ShellPatch {
    /// The directory of a leading `cd DIR &&`, which relative paths of the patch are under.
    pub dir: Option<String>,
    /// The patch envelope, from a here-document (empty when it comes from a file).
    pub patch: String,
    /// The file the patch is read from (`apply_patch < FILE`), as written.
    pub file: Option<String>,
}

/// The command text of a shell tool's input: a string, or an argv whose last element is
/// the script of `bash -lc SCRIPT` (older Codex versions).
fn shell_script(input: &Value) -> Option<&str> {
    match input.get("command")? {
        Value::String(s) => Some(s),
        Value::Array(argv) => {
            let words: Vec<&str> = argv.iter().filter_map(Value::as_str).collect();
            match &words[..] {
                [shell, flag, script]
                    if ["bash", "sh", "zsh", "/bin/bash", "/bin/sh", "/bin/zsh"]
                        .contains(shell)
                        && (flag.starts_with('-') && flag.ends_with('c')) =>
                {
                    Some(script)
                }
                [.., last] => Some(last),
                [] => None,
            }
        }
        _ => None,
    }
}

/// One shell word at the start of `s` (bare, `'single'` or `"double"`-quoted, without
/// expansions), and the rest after it.
fn shell_word(s: &str) -> Option<(String, &str)> {
    let s = s.trim_start_matches([' ', '\t']);
    let mut chars = s.char_indices();
    match chars.next()? {
        (_, q @ ('\'' | '"')) => {
            let end = s[1..].find(q)? + 1;
            let word = &s[1..end];
            (q == '\'' || !word.contains(['$', '`', '\\']))
                .then(|| (word.to_string(), &s[end + 1..]))
        }
        _ => {
            let end = s
                .find(|c: char| c.is_whitespace() || ";&|<>()".contains(c))
                .unwrap_or(s.len());
            let word = &s[..end];
            (!word.is_empty() && !word.contains(['$', '`', '\\', '\'', '"', '*', '?', '~']))
                .then(|| (word.to_string(), &s[end..]))
        }
    }
}

/// Every patch that `script` pipes into `apply_patch` (or `applypatch`) through a
/// here-document: `apply_patch <<'EOF'`, `<<"EOF"`, `<<EOF` or `<<-EOF` (tabs stripped), each
/// optionally after `cd DIR &&`. `None` when the script runs no `apply_patch` at all; a
/// script that runs it in a form not read here gives `Some` with no patch for that call.
pub fn shell_patches(script: &str) -> Option<Vec<ShellPatch>> {
    let mut found: Option<Vec<ShellPatch>> = None;
    let mut from = 0;
    while let Some(at) = find_command(script, from) {
        let patches = found.get_or_insert_with(Vec::new);
        let dir = leading_cd(&script[..at.start]);
        from = at.end;
        if let Some((patch, used)) = heredoc(&script[at.end..]) {
            patches.push(ShellPatch {
                dir,
                patch,
                file: None,
            });
            from += used;
        } else if let Some(file) = redirect(&script[at.end..]) {
            patches.push(ShellPatch {
                dir,
                patch: String::new(),
                file: Some(file),
            });
        }
    }
    found
}

/// Where the next `apply_patch` (or `applypatch`) command word is in `script`, from byte
/// `from` on: at the start, or after `;`, `&`, `|`, `(`, a newline, `then` or `do`, and
/// followed by a blank, `<` or the end.
fn find_command(script: &str, from: usize) -> Option<std::ops::Range<usize>> {
    let mut from = from;
    loop {
        let (i, len) = ["apply_patch", "applypatch"]
            .iter()
            .filter_map(|name| {
                script
                    .get(from..)?
                    .find(name)
                    .map(|i| (from + i, name.len()))
            })
            .min()?;
        let before = script[..i].trim_end_matches([' ', '\t']);
        let starts = before.chars().last().is_none_or(|c| ";&|(\n".contains(c))
            || before.ends_with("then")
            || before.ends_with("do");
        let ends = script[i + len..]
            .chars()
            .next()
            .is_none_or(|c| c.is_whitespace() || c == '<');
        if starts && ends {
            return Some(i..i + len);
        }
        from = i + len;
    }
}

/// The directory of `cd DIR &&` just before the command (`before` is the script up to it).
fn leading_cd(before: &str) -> Option<String> {
    let before = before.trim_end();
    let before = before.strip_suffix("&&")?;
    // The last command before `&&`, from its own start.
    let line = before.rsplit(['\n', ';', '(']).next()?;
    let line = line.rsplit("&&").next()?.trim();
    let rest = line.strip_prefix("cd")?;
    if !rest.starts_with([' ', '\t']) {
        return None;
    }
    let (dir, tail) = shell_word(rest)?;
    tail.trim().is_empty().then_some(dir)
}

/// The file of `< FILE` right after the command (Codex's `apply_patch` helper reads the
/// patch from its standard input).
fn redirect(after: &str) -> Option<String> {
    let rest = after.trim_start_matches([' ', '\t']).strip_prefix('<')?;
    if rest.starts_with(['<', '(', '&']) {
        return None;
    }
    Some(shell_word(rest)?.0)
}

/// The here-document that starts `after` (the text after `apply_patch`): its body and how
/// many bytes of `after` it took, up to and including the closing delimiter's line.
fn heredoc(after: &str) -> Option<(String, usize)> {
    let line_end = after.find('\n')?;
    let first = after[..line_end].trim();
    let op = first.strip_prefix("<<")?;
    let (strip_tabs, op) = match op.strip_prefix('-') {
        Some(rest) => (true, rest),
        None => (false, op),
    };
    let (delim, tail) = shell_word(op.trim_start())?;
    if delim.is_empty() || !tail.trim().is_empty() {
        return None;
    }
    let mut body = String::new();
    let mut used = line_end + 1;
    for line in after[line_end + 1..].split_inclusive('\n') {
        used += line.len();
        let text = line.trim_end_matches('\n').trim_end_matches('\r');
        let text = if strip_tabs {
            text.trim_start_matches('\t')
        } else {
            text
        };
        if text == delim {
            return Some((body, used));
        }
        body.push_str(text);
        body.push('\n');
    }
    // No closing delimiter: the shell takes the body up to the end of the script.
    Some((body, used))
}

/// The files a shell command writes through `apply_patch` here-documents: each patch's
/// paths, under its `cd` directory and the tool's `workdir` when relative. `None` when the
/// command runs no `apply_patch`.
fn shell_patch_paths(input: &Value) -> Option<(Vec<String>, Vec<String>)> {
    let script = shell_script(input)?;
    let patches = shell_patches(script)?;
    let workdir = text(input, "workdir");
    let mut paths: Vec<String> = Vec::new();
    let mut bodies = Vec::new();
    for p in patches.into_iter().filter(|p| p.file.is_none()) {
        let base = base_of(workdir.as_deref(), p.dir.as_deref());
        add_patch_paths(&mut paths, base.as_deref(), &p.patch);
        bodies.push(p.patch);
    }
    Some((paths, bodies))
}

/// Where a shell patch is applied: its `cd` directory under the tool's `workdir`.
fn base_of(workdir: Option<&str>, dir: Option<&str>) -> Option<String> {
    match (workdir, dir) {
        (_, Some(d)) if d.starts_with('/') => Some(d.to_string()),
        (Some(w), Some(d)) => Some(format!("{}/{d}", w.trim_end_matches('/'))),
        (None, Some(d)) => Some(d.to_string()),
        (w, None) => w.map(str::to_string),
    }
}

/// `patch`'s files, under `base` when relative, added to `paths` (each once).
pub fn add_patch_paths(paths: &mut Vec<String>, base: Option<&str>, patch: &str) {
    for path in maos_core::patch::patch_paths(patch) {
        let path = match base {
            Some(b) if !path.starts_with('/') => format!("{}/{path}", b.trim_end_matches('/')),
            _ => path,
        };
        if !paths.contains(&path) {
            paths.push(path);
        }
    }
}

/// The patch files a `Bash` call's command gives `apply_patch` (`apply_patch < FILE`), each
/// with where its patch is applied: (base, file as written). Reading them is the caller's.
pub fn shell_patch_files(v: &Value) -> Vec<(Option<String>, String)> {
    if text(v, "tool_name").as_deref() != Some("Bash") {
        return Vec::new();
    }
    let input = v.get("tool_input").unwrap_or(&Value::Null);
    let workdir = text(input, "workdir");
    shell_script(input)
        .and_then(shell_patches)
        .into_iter()
        .flatten()
        .filter_map(|p| Some((base_of(workdir.as_deref(), p.dir.as_deref()), p.file?)))
        .collect()
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
    Some(digest(&parts))
}

/// Size and SHA-256 of `parts` taken together.
fn digest(parts: &[&str]) -> Written {
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
    Written { bytes, sha256 }
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

/// Longest subagent id read from Codex's `spawn_agent` result.
const MAX_SPAWNED_ID: usize = 256;

/// PostToolUse of the subagent tool: Claude Code's `tool_response` object ([`subagent_of`]),
/// or Codex's, a JSON text: `{"agent_id": "…", "nickname": "…"}` from its default
/// `spawn_agent` (0.171.0), the id of the subagent whose events will carry it as their
/// `agent_id` (at most [`MAX_SPAWNED_ID`] bytes, no control characters); `multi_agent_v2`'s
/// result (`{"task_name": "/root/…"}`) names no agent and ties nothing.
fn spawned_of(response: &Value) -> Option<SubagentResult> {
    let Some(codex) = response.as_str() else {
        return subagent_of(response);
    };
    let codex: Value = serde_json::from_str(codex).ok()?;
    let id = text(&codex, "agent_id")
        .filter(|id| (1..=MAX_SPAWNED_ID).contains(&id.len()))
        .filter(|id| !id.chars().any(char::is_control))?;
    Some(SubagentResult {
        agent_id: id,
        ..SubagentResult::default()
    })
}

/// The task a subagent tool call gives: Claude Code's `prompt`, Codex's `message`, or the
/// first text of Codex's `items`.
fn spawn_prompt(input: &Value) -> Option<String> {
    text(input, "prompt")
        .or_else(|| text(input, "message"))
        .or_else(|| {
            input
                .get("items")?
                .as_array()?
                .iter()
                .find_map(|i| text(i, "text"))
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

/// Longest `agent_id` that may name a file.
const MAX_AGENT_ID: usize = 128;

/// Longest `transcript_path` looked at.
const MAX_TRANSCRIPT_PATH: usize = 4096;

/// Where Claude Code (2.1.328 and newer) writes down which call started the subagent
/// `agent_id` of the window whose transcript is `transcript_path`:
/// `<transcript without .jsonl>/subagents/agent-<agent_id>.meta.json`, written before the
/// subagent's first model request. `None` unless both are plausible: the id a short run of
/// letters, digits, `-` and `_` (so never `/` or `..`), the transcript an absolute `.jsonl`
/// path without `.` or `..` parts.
pub fn meta_path(transcript_path: &str, agent_id: &str) -> Option<std::path::PathBuf> {
    let id_ok = (1..=MAX_AGENT_ID).contains(&agent_id.len())
        && agent_id
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    let dir = transcript_path.strip_suffix(".jsonl")?;
    let path_ok = transcript_path.len() <= MAX_TRANSCRIPT_PATH
        && dir.starts_with('/')
        && !dir.ends_with('/')
        && !dir.contains('\0')
        && dir.split('/').all(|part| part != "." && part != "..");
    (id_ok && path_ok).then(|| format!("{dir}/subagents/agent-{agent_id}.meta.json").into())
}

/// The call that started a subagent, from the text of its meta file ([`meta_path`]): its
/// `toolUseId` (at most [`maos_proto::MAX_SPAWN_ID`] bytes, no control characters) and the
/// first line of its `description`. `None` for anything else: no tie.
pub fn spawned_by_of(meta: &str) -> Option<SpawnedBy> {
    let v: Value = serde_json::from_str(meta).ok()?;
    let id = text(&v, "toolUseId")?;
    let id_ok =
        (1..=maos_proto::MAX_SPAWN_ID).contains(&id.len()) && !id.chars().any(char::is_control);
    id_ok.then(|| SpawnedBy {
        tool_use_id: id,
        description: text(&v, "description").as_deref().and_then(first_line),
    })
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
    let spawn = maos_proto::is_spawn_tool(tool);
    let prompt = (event == "UserPromptSubmit")
        .then(|| text(v, "prompt"))
        .flatten();
    let notification = prompt.as_deref().and_then(notification_of);
    let summary = match (event.as_str(), &notification) {
        (_, Some(_)) => None,
        ("UserPromptSubmit", None) => prompt.as_deref().and_then(first_line),
        // Codex's `spawn_agent` of `multi_agent_v2` names its agent's task (`task_name`).
        _ => text(input, "description").or_else(|| spawn.then(|| text(input, "task_name"))?),
    };
    // A shell command that runs `apply_patch`: the patch's files, like the tool's.
    let shell = (tool == "Bash").then(|| shell_patch_paths(input)).flatten();
    let paths = match (tool, patch_of(input), &shell) {
        ("apply_patch", Some(patch), _) => maos_core::patch::patch_paths(patch),
        ("Bash", _, Some((paths, _))) => paths.clone(),
        _ => text(input, "file_path")
            .or_else(|| text(input, "notebook_path"))
            .into_iter()
            .collect(),
    };
    // A write tool's call that names no file cannot be locked, and would still register its
    // window: refused like any other malformed input.
    let writer = matches!(
        tool,
        "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "apply_patch" | "write_file" | "replace"
    );
    if writer && paths.is_empty() && matches!(event.as_str(), "PreToolUse" | "PostToolUse") {
        return Err(match tool {
            "apply_patch" => {
                "hook input: an apply_patch call without a patch maos can read (tool_input has no patch envelope)".to_string()
            }
            _ if v.get("tool_input").is_none() => {
                format!("hook input: a {tool} call without tool_input, so no file to lock")
            }
            _ => format!("hook input: a {tool} call whose tool_input names no file_path"),
        });
    }
    let written_shell = shell
        .as_ref()
        .filter(|(paths, _)| !paths.is_empty())
        .map(|(_, bodies)| digest(&bodies.iter().map(String::as_str).collect::<Vec<_>>()));
    Ok(HookCall {
        agent_id: text(v, "agent_id"),
        agent_type: text(v, "agent_type")
            .or_else(|| text(input, "subagent_type"))
            .or_else(|| spawn.then(|| text(input, "agent_type"))?),
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
            .then(|| spawn_prompt(input).and_then(|p| first_line(&p)))
            .flatten(),
        written: post
            .then(|| written(tool, input).or(written_shell))
            .flatten(),
        subagent: match notification {
            Some((_, result)) => result,
            None => (post && spawn)
                .then(|| v.get("tool_response").and_then(spawned_of))
                .flatten(),
        },
        // A shell tool's command: the daemon reads which files it writes (maos-shell).
        command: maos_proto::is_shell_tool(tool)
            .then(|| shell_script(input))
            .flatten()
            .filter(|c| c.len() <= maos_proto::MAX_COMMAND)
            .map(|c| match text(input, "dir_path") {
                // Gemini CLI runs the command in `dir_path` (relative to its working
                // directory): read as the shell would see it.
                Some(dir) => format!("cd '{}' && {c}", dir.replace('\'', r"'\''")),
                None => c.to_string(),
            }),
        maos_session: env("MAOS_SESSION_ID"),
        maos_agent: env("MAOS_AGENT_ID"),
        todos: (post && tool == "TodoWrite")
            .then(|| todos_of(input))
            .flatten(),
        // A call of maos's own MCP server: its arguments' digest keys the record that tells
        // `maos mcp` whose call it is.
        mcp_args: (!post && maos_core::mcp::tool_of(tool).is_some())
            .then(|| maos_core::mcp::args_digest(input)),
        event,
        session_id,
        tool_name,
        ..HookCall::default()
    })
}

/// The whole parse of one hook input: [`read_value`], then [`call_of`] (the tests' entry;
/// `maos hook` and the fuzz target read through [`parse_for`], which keeps the value too).
#[allow(dead_code)]
pub fn parse<R: Read>(r: R, limit: u64) -> Result<HookCall, String> {
    call_of(&read_value(r, limit)?)
}

#[cfg(test)]
mod meta_tests {
    use super::{meta_path, spawned_by_of};
    use maos_proto::SpawnedBy;

    const T: &str = "/home/u/.claude/projects/-repo/0b6e.jsonl";

    #[test]
    fn the_meta_file_is_beside_the_transcript() {
        assert_eq!(
            meta_path(T, "a93809f18c546a571").as_deref(),
            Some(std::path::Path::new(
                "/home/u/.claude/projects/-repo/0b6e/subagents/agent-a93809f18c546a571.meta.json"
            ))
        );
        assert!(meta_path(T, "sub_1-x").is_some());
    }

    #[test]
    fn an_id_or_transcript_that_could_name_another_file_names_none() {
        let long = "a".repeat(129);
        for id in [
            "",
            "../x",
            "a/b",
            "..",
            "a.b",
            "a\0b",
            "a b",
            "é",
            long.as_str(),
        ] {
            assert_eq!(meta_path(T, id), None, "{id:?}");
        }
        assert!(meta_path(T, &"a".repeat(128)).is_some());
        let far = format!("/{}.jsonl", "d/".repeat(2100));
        for t in [
            "",
            "rel/t.jsonl",
            "/t.json",
            "/a/../t.jsonl",
            "/a/./t.jsonl",
            "/a/.jsonl",
            "/.jsonl",
            "/a/\0/t.jsonl",
            far.as_str(),
        ] {
            assert_eq!(meta_path(t, "abc"), None, "{t:?}");
        }
    }

    #[test]
    fn the_meta_file_names_the_spawning_call() {
        let meta = r#"{"agentType":"general-purpose","isBuiltIn":true,"description":"writer B",
            "toolUseId":"toolu_01B","spawnDepth":1,"requestShape":"foreground",
            "model":"claude-opus-5-5","modelNotNamed":true}"#;
        assert_eq!(
            spawned_by_of(meta),
            Some(SpawnedBy {
                tool_use_id: "toolu_01B".into(),
                description: Some("writer B".into()),
            })
        );
        let bare = r#"{"toolUseId":"t1","description":"  \n first line \nsecond"}"#;
        assert_eq!(
            spawned_by_of(bare).and_then(|s| s.description),
            Some("first line".into())
        );
        assert_eq!(
            spawned_by_of(r#"{"toolUseId":"t1"}"#),
            Some(SpawnedBy {
                tool_use_id: "t1".into(),
                description: None,
            })
        );
    }

    #[test]
    fn a_garbled_meta_file_ties_nothing() {
        let long = format!(r#"{{"toolUseId":"{}"}}"#, "t".repeat(257));
        for meta in [
            "",
            "{",
            "[]",
            "null",
            r#"{"toolUseId":7}"#,
            r#"{"toolUseId":""}"#,
            r#"{"toolUseId":"a\nb"}"#,
            r#"{"description":"x"}"#,
            long.as_str(),
        ] {
            assert_eq!(spawned_by_of(meta), None, "{meta:?}");
        }
    }
}
