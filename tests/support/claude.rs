//! Plumbing of the conformance tests that run the real Claude Code: the pinned release,
//! installed on first use; a scripted fake Anthropic Messages API on 127.0.0.1 that records
//! every request and may hold an answer until a condition (a [`Gate`] the test opens, or
//! another conversation's progress); a `claude -p` run with a deadline that cleans up what the
//! client leaves in `/tmp/claude-<uid>/`.

use std::collections::BTreeSet;
use std::ffi::OsString;
use std::io::Write;
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex, MutexGuard, OnceLock, mpsc};
use std::time::{Duration, Instant};

use crate::conformance::npm_package;
use crate::{Env, Value, bin_dir, json};

const PACKAGE: &str = "@anthropic-ai/claude-code";
pub const VERSION: &str = "2.1.332";
/// How long one `claude -p` run may take before it is killed and the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(45);
/// The prefix Claude Code puts before a `PreToolUse` denial of `Write` in the tool result.
pub const WRITE_DENIED: &str = "PreToolUse:Write hook error: ";

/// The `claude` executable of the pinned release, installed on first use; `Err` says why not.
pub fn claude() -> Result<PathBuf, String> {
    static CLAUDE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CLAUDE.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let dir = npm_package(PACKAGE, VERSION)?;
    let bin = dir.join("node_modules/.bin/claude");
    let version = Command::new(&bin)
        .arg("--version")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&version.stdout);
    if !version.status.success() || !text.starts_with(VERSION) {
        return Err(format!(
            "{} --version answered {:?} ({})",
            bin.display(),
            text.trim(),
            version.status
        ));
    }
    Ok(bin)
}

/// One content block of the fake model's answer.
pub enum Block {
    Text(String),
    /// A tool call; its `id` is the script's own, so that its result can be found again.
    Tool {
        id: String,
        name: String,
        input: Value,
    },
}

/// An answer of text only (`stop_reason: end_turn`).
pub fn say(text: &str) -> Vec<Block> {
    vec![Block::Text(text.into())]
}

/// A tool call block with the script's id `id`.
pub fn call(id: &str, name: &str, input: Value) -> Block {
    Block::Tool {
        id: id.into(),
        name: name.into(),
        input,
    }
}

/// A `Write` of `content` to `path` as the tool call `id`.
pub fn write(id: &str, path: &Path, content: &str) -> Block {
    call(id, "Write", json!({"file_path": path, "content": content}))
}

/// A subagent call (`Agent`) as the tool call `id`: `prompt` is the subagent's first user
/// message, which is how its requests are told apart.
pub fn agent(id: &str, description: &str, prompt: &str, background: bool) -> Block {
    let mut input = json!({"description": description, "prompt": prompt,
        "subagent_type": "general-purpose"});
    if !background {
        input["run_in_background"] = json!(false);
    }
    call(id, "Agent", input)
}

/// Every request the fake model received (target and body), in order of arrival; a waiter is
/// woken at each new one.
#[derive(Default)]
struct Log {
    requests: Mutex<Vec<(String, Value)>>,
    grew: Condvar,
}

impl Log {
    fn push(&self, target: String, body: Value) {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push((target, body));
        self.grew.notify_all();
    }

    /// Whether `cond` held for the recorded requests before `timeout`.
    pub fn wait(&self, timeout: Duration, cond: impl Fn(&[(String, Value)]) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut all = self.requests.lock().unwrap_or_else(|p| p.into_inner());
        loop {
            if cond(&all) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            all = self
                .grew
                .wait_timeout(all, left)
                .unwrap_or_else(|p| p.into_inner())
                .0;
        }
    }

    /// Whether some request carried the result of the tool call `id` before `timeout`.
    pub fn wait_result(&self, id: &str, timeout: Duration) -> bool {
        self.wait(timeout, |all| {
            all.iter().any(|(_, b)| tool_result_in(b, id).is_some())
        })
    }
}

/// One request as the script sees it: its body, and everything recorded so far.
pub struct Req<'a> {
    pub body: &'a Value,
    log: &'a Log,
}

impl Req<'_> {
    /// The request belongs to the conversation whose first user message holds `marker`: the
    /// main thread (the `-p` prompt) or one subagent (its `Agent` call's prompt).
    pub fn of(&self, marker: &str) -> bool {
        first_user_text(self.body).contains(marker)
    }

    /// The request carries the result of the script's tool call `id`.
    pub fn has(&self, id: &str) -> bool {
        tool_result_in(self.body, id).is_some()
    }

    /// Hold this answer until some request carried the result of the tool call `id` (a
    /// condition on what the model saw, not a sleep), at most [`RUN_DEADLINE`].
    pub fn after_result(&self, id: &str) {
        if !self.log.wait_result(id, RUN_DEADLINE) {
            eprintln!("fake model API: no result of {id} within {RUN_DEADLINE:?}");
        }
    }
}

/// A scripted fake Anthropic Messages API: it answers `POST /v1/messages` with the SSE stream
/// of the blocks `script` picks for the request, and records every request before the script
/// sees it. Each connection has its own thread, so a script may wait (for a [`Gate`], or for
/// another conversation's progress) while other requests are answered.
pub struct FakeModel {
    port: u16,
    log: Arc<Log>,
}

impl FakeModel {
    pub fn start(script: impl Fn(&Req<'_>) -> Vec<Block> + Send + Sync + 'static) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model API");
        let port = listener.local_addr().expect("local addr").port();
        let log = Arc::new(Log::default());
        let script = Arc::new(script);
        let recorded = Arc::clone(&log);
        // The thread ends with the test process; every connection is served by its own thread.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (script, recorded) = (Arc::clone(&script), Arc::clone(&recorded));
                std::thread::spawn(move || {
                    if let Err(e) = serve(stream, &*script, &recorded) {
                        eprintln!("fake model API: {e}");
                    }
                });
            }
        });
        FakeModel { port, log }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The target of every recorded request.
    pub fn targets(&self) -> Vec<String> {
        let all = self.log.requests.lock().expect("requests");
        all.iter().map(|(target, _)| target.clone()).collect()
    }

    /// The recorded `/v1/messages` request bodies.
    pub fn messages_requests(&self) -> Vec<Value> {
        let all = self.log.requests.lock().expect("requests");
        all.iter()
            .filter(|(target, _)| target.starts_with("/v1/messages"))
            .map(|(_, body)| body.clone())
            .collect()
    }

    /// The recorded requests of the conversation whose first user message holds `marker`.
    pub fn conversation(&self, marker: &str) -> Vec<Value> {
        self.messages_requests()
            .into_iter()
            .filter(|b| first_user_text(b).contains(marker))
            .collect()
    }

    /// Wait (or fail the test naming `what`) until a request of the conversation `marker`
    /// arrived.
    pub fn wait_request(&self, marker: &str, what: &str) {
        let arrived = self.log.wait(RUN_DEADLINE, |all| {
            all.iter().any(|(_, b)| first_user_text(b).contains(marker))
        });
        assert!(
            arrived,
            "timed out after {RUN_DEADLINE:?} waiting until {what}"
        );
    }

    /// Wait (or fail the test naming `what`) until a request carried the result of `id`.
    pub fn wait_result(&self, id: &str, what: &str) {
        assert!(
            self.log.wait_result(id, RUN_DEADLINE),
            "timed out after {RUN_DEADLINE:?} waiting until {what}"
        );
    }
}

/// One HTTP/1.1 request on `stream`, answered and closed.
fn serve(
    stream: TcpStream,
    script: &dyn Fn(&Req<'_>) -> Vec<Block>,
    log: &Log,
) -> std::io::Result<()> {
    let (method, target, body) = crate::conformance::read_request(&stream, RUN_DEADLINE)?;
    let mut stream = stream;
    let messages =
        method == "POST" && target.starts_with("/v1/messages") && !target.contains("count_tokens");
    log.push(target, body.clone());
    if !messages {
        return stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let blocks = script(&Req { body: &body, log });
    let sse = sse_of(&blocks, body["model"].as_str().unwrap_or("claude"));
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        sse.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(sse.as_bytes())?;
    stream.flush()
}

/// The Messages API's streaming events for one answer of `blocks` (several tool calls in one
/// answer are parallel calls).
pub fn sse_of(blocks: &[Block], model: &str) -> String {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "msg_maos_conformance", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})];
    let mut stop = "end_turn";
    for (index, block) in blocks.iter().enumerate() {
        let (start, delta) = match block {
            Block::Tool { id, name, input } => {
                stop = "tool_use";
                (
                    json!({"type": "tool_use", "id": id, "name": name, "input": {}}),
                    json!({"type": "input_json_delta", "partial_json": input.to_string()}),
                )
            }
            Block::Text(text) => (
                json!({"type": "text", "text": ""}),
                json!({"type": "text_delta", "text": text}),
            ),
        };
        events.push(json!({"type": "content_block_start", "index": index,
            "content_block": start}));
        events.push(json!({"type": "content_block_delta", "index": index, "delta": delta}));
        events.push(json!({"type": "content_block_stop", "index": index}));
    }
    events.push(
        json!({"type": "message_delta", "delta": {"stop_reason": stop,
        "stop_sequence": null}, "usage": {"output_tokens": 5}}),
    );
    events.push(json!({"type": "message_stop"}));
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// The text of a message's content (a string, or its text blocks joined by newlines).
pub fn content_text(content: &Value) -> String {
    match content {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of a request's first user message: Claude Code's context reminders, then the
/// prompt (the `-p` prompt for the main thread, the `Agent` call's prompt for a subagent).
pub fn first_user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .and_then(|m| m.iter().find(|m| m["role"] == "user"))
        .map(|m| content_text(&m["content"]))
        .unwrap_or_default()
}

/// The result of the tool call `id`, if this request carries it.
pub fn tool_result_in(body: &Value, id: &str) -> Option<Value> {
    body["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|c| c["type"] == "tool_result" && c["tool_use_id"] == id)
        .cloned()
}

/// The result of the tool call `id` as the model received it.
pub fn tool_result(requests: &[Value], id: &str) -> Value {
    requests
        .iter()
        .find_map(|r| tool_result_in(r, id))
        .unwrap_or_else(|| panic!("no result of {id} reached the model: {requests:#?}"))
}

/// The text of a tool result's content (a string or text blocks).
pub fn result_text(result: &Value) -> String {
    content_text(&result["content"])
}

/// `/tmp/claude-<uid>/`, where Claude Code keeps background-agent output whatever `HOME` is.
fn claude_tmp() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    PathBuf::from(format!("/tmp/claude-{}", unsafe { libc::getuid() }))
}

/// The names in `/tmp/claude-<uid>/` (none if it is missing).
fn claude_tmp_entries() -> BTreeSet<OsString> {
    std::fs::read_dir(claude_tmp())
        .map(|dir| dir.flatten().map(|e| e.file_name()).collect())
        .unwrap_or_default()
}

/// Remove what a run in `project` left in `/tmp/claude-<uid>/` (which held `before` when it
/// started): the directory named after the project's path (every character but letters and
/// digits made a `-`) and the `fswatch-probe-*` directories made since; then
/// `/tmp/claude-<uid>/` itself if nothing else is in it.
fn remove_claude_tmp(project: &Path, before: &BTreeSet<OsString>) {
    let canonical = project
        .canonicalize()
        .unwrap_or_else(|_| project.to_path_buf());
    let name: String = canonical
        .to_string_lossy()
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '-' })
        .collect();
    let _ = std::fs::remove_dir_all(claude_tmp().join(name));
    for entry in claude_tmp_entries() {
        let probe = entry.to_string_lossy().starts_with("fswatch-probe-");
        if probe && !before.contains(&entry) {
            let _ = std::fs::remove_dir_all(claude_tmp().join(entry));
        }
    }
    let _ = std::fs::remove_dir(claude_tmp());
}

/// Runs of the real client one at a time: on a CI machine's two cores, clients started by
/// parallel test threads would push each other towards their deadlines.
static RUNS: Mutex<()> = Mutex::new(());

/// A `claude -p` run in progress. It holds [`RUNS`] until it is over: finished
/// ([`Run::finish`]) or killed ([`Run::kill`], or when dropped, e.g. by a failing test); its
/// whole process group dies with it, and what it left in `/tmp/claude-<uid>/` is removed.
pub struct Run {
    _one: MutexGuard<'static, ()>,
    pid: u32,
    out: mpsc::Receiver<std::io::Result<Output>>,
    started: Instant,
    project: PathBuf,
    /// What `/tmp/claude-<uid>/` held before the run.
    tmp_before: BTreeSet<OsString>,
    over: bool,
}

impl Run {
    /// Start `claude -p PROMPT` in the project with maos's hooks installed and the fake model
    /// behind it, in its own process group.
    pub fn start(env: &Env, claude: &Path, model: &FakeModel, prompt: &str) -> Run {
        let one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
        let tmp_before = claude_tmp_entries();
        let home = env.root().join("user");
        std::fs::create_dir_all(&home).expect("create HOME");
        let path = format!(
            "{}:{}",
            bin_dir().display(),
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
        );
        let mut cmd = Command::new(claude);
        cmd.env_clear()
            .env("PATH", path)
            .env("HOME", &home)
            .env("USER", "e2e-tester")
            .env("MAOS_HOME", &env.home)
            .env("MAOS_SOCKET", &env.socket)
            .env("ANTHROPIC_BASE_URL", model.base_url())
            .env("ANTHROPIC_API_KEY", "dummy")
            .env("DISABLE_TELEMETRY", "1")
            .env("DISABLE_AUTOUPDATER", "1")
            .env("DISABLE_ERROR_REPORTING", "1")
            .env("CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC", "1")
            .current_dir(&env.project)
            .args(["-p", prompt, "--permission-mode", "acceptEdits"])
            // `mcp__maos`: every tool of maos's MCP server, which `install-hooks` registers.
            .args(["--allowedTools", "Bash,Read,Write,Edit,Agent,mcp__maos"])
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let child = cmd.spawn().expect("spawn claude");
        let pid = child.id();
        let (tx, out) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        Run {
            _one: one,
            pid,
            out,
            started: Instant::now(),
            project: env.project.clone(),
            tmp_before,
            over: false,
        }
    }

    /// The client's pid (its process group's too).
    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// Wait for the client to exit by itself (within [`RUN_DEADLINE`] of its start, else it is
    /// killed and the test fails); what it did.
    pub fn finish(self) -> Output {
        self.finish_within(RUN_DEADLINE)
    }

    /// [`Run::finish`] for a run of many turns, bounded by `deadline` instead.
    pub fn finish_within(mut self, deadline: Duration) -> Output {
        let left = deadline.saturating_sub(self.started.elapsed());
        let out = self.out.recv_timeout(left);
        self.end(out.is_err());
        let out = out
            .unwrap_or_else(|_| panic!("claude did not finish within {deadline:?}"))
            .expect("claude's output");
        eprintln!(
            "claude -p took {:?}: {}\nstdout: {}\nstderr: {}",
            self.started.elapsed(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    /// `kill -9` the client's whole process group, as a crash or a closed terminal would end
    /// it (no SessionEnd), and wait until it is gone.
    pub fn kill(mut self) {
        self.end(true);
        eprintln!("claude -p killed after {:?}", self.started.elapsed());
    }

    /// The run is over: kill its process group if `kill` (the client may still run), wait
    /// until the client was reaped, and remove what it left in /tmp.
    fn end(&mut self, kill: bool) {
        if self.over {
            return;
        }
        self.over = true;
        if kill {
            // SAFETY: kill(2) of the process group we made for the client, not yet reaped.
            unsafe {
                libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
            }
            // Its waiting thread sends the output, or hangs up if it was taken already.
            let _ = self.out.recv_timeout(RUN_DEADLINE);
        }
        remove_claude_tmp(&self.project, &self.tmp_before);
        // A killed client leaves its socket behind (one that exits removes it).
        let socks = Path::new("/tmp/cc-socks");
        let _ = std::fs::remove_file(socks.join(format!("{}.sock", self.pid)));
        let _ = std::fs::remove_dir(socks);
    }
}

impl Drop for Run {
    fn drop(&mut self) {
        self.end(true);
    }
}

/// `claude -p PROMPT` run to its end.
pub fn run_claude(env: &Env, claude: &Path, model: &FakeModel, prompt: &str) -> Output {
    Run::start(env, claude, model, prompt).finish()
}

/// Every string in `v` (a request body or part of it) holding `needle`: how a hook's context
/// is found in what the model received, wherever the client put it.
pub fn texts_with(v: &Value, needle: &str) -> Vec<String> {
    match v {
        Value::String(s) if s.contains(needle) => vec![s.clone()],
        Value::Array(a) => a.iter().flat_map(|v| texts_with(v, needle)).collect(),
        Value::Object(o) => o.values().flat_map(|v| texts_with(v, needle)).collect(),
        _ => vec![],
    }
}
