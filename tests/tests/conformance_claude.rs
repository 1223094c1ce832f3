//! Conformance with the real Claude Code: the pinned npm release (installed once into a cache
//! outside the repository by `tests/conformance/install.sh`) runs offline against a scripted
//! fake Anthropic Messages API on 127.0.0.1, with maos's hooks installed by `maos install-hooks`
//! and the real maosd behind them. Each scenario checks three sides: what the model received
//! back (the recorded requests), the files on disk, and maos's own view (`events`, `lock list`).
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set).

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use maos_tests::{Env, Value, bin_dir, json, skip_unless_ci};

const PACKAGE: &str = "@anthropic-ai/claude-code";
const VERSION: &str = "2.1.328";
/// How long one `claude -p` run may take before it is killed and the test fails.
const RUN_DEADLINE: Duration = Duration::from_secs(45);
/// The id of the one tool call the script plays.
const TOOL_USE_ID: &str = "toolu_maos_conformance_1";

/// The `claude` executable of the pinned release, installed on first use; `Err` says why not.
fn claude() -> Result<PathBuf, String> {
    static CLAUDE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CLAUDE.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/install.sh");
    let out = Command::new("sh")
        .arg(&script)
        .args([PACKAGE, VERSION])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", script.display()))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        let first = err
            .lines()
            .find(|l| !l.trim().is_empty())
            .unwrap_or_default();
        return Err(format!(
            "npm could not install {PACKAGE}@{VERSION} ({}): {first}",
            out.status
        ));
    }
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let bin = Path::new(&dir).join("node_modules/.bin/claude");
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

/// What the fake model answers to one request.
enum Reply {
    /// One tool call, `stop_reason: tool_use`.
    ToolUse { name: String, input: Value },
    /// Text, `stop_reason: end_turn`.
    Text(String),
}

/// A scripted fake Anthropic Messages API: it answers `POST /v1/messages` with the SSE stream
/// of the reply `script` picks for the request body, and records every request.
struct FakeModel {
    port: u16,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeModel {
    fn start(script: impl Fn(&Value) -> Reply + Send + Sync + 'static) -> FakeModel {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model API");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script = Arc::new(script);
        let recorded = Arc::clone(&requests);
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
        FakeModel { port, requests }
    }

    fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// The target of every recorded request.
    fn targets(&self) -> Vec<String> {
        let all = self.requests.lock().expect("requests");
        all.iter().map(|(target, _)| target.clone()).collect()
    }

    /// The recorded `/v1/messages` request bodies.
    fn messages_requests(&self) -> Vec<Value> {
        let all = self.requests.lock().expect("requests");
        all.iter()
            .filter(|(target, _)| target.starts_with("/v1/messages"))
            .map(|(_, body)| body.clone())
            .collect()
    }
}

/// One HTTP/1.1 request on `stream`, answered and closed.
fn serve(
    stream: TcpStream,
    script: &dyn Fn(&Value) -> Reply,
    recorded: &Mutex<Vec<(String, Value)>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(RUN_DEADLINE))?;
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let mut parts = line.split_whitespace();
    let (method, target) = (
        parts.next().unwrap_or_default().to_string(),
        parts.next().unwrap_or_default().to_string(),
    );
    let (mut length, mut chunked) = (0usize, false);
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header.trim().is_empty() {
            break;
        }
        let (name, value) = header.split_once(':').unwrap_or((&header, ""));
        match name.trim().to_ascii_lowercase().as_str() {
            "content-length" => length = value.trim().parse().unwrap_or(0),
            "transfer-encoding" => chunked = value.to_ascii_lowercase().contains("chunked"),
            _ => {}
        }
    }
    let body = if chunked {
        read_chunked(&mut reader)?
    } else {
        let mut body = vec![0; length];
        reader.read_exact(&mut body)?;
        body
    };
    let body: Value = serde_json::from_slice(&body).unwrap_or(Value::Null);
    let mut stream = stream;
    if method != "POST" || !target.starts_with("/v1/messages") || target.contains("count_tokens") {
        recorded.lock().expect("requests").push((target, body));
        return stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        );
    }
    let sse = sse_of(&script(&body), body["model"].as_str().unwrap_or("claude"));
    recorded.lock().expect("requests").push((target, body));
    let head = format!(
        "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        sse.len()
    );
    stream.write_all(head.as_bytes())?;
    stream.write_all(sse.as_bytes())?;
    stream.flush()
}

fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        reader.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or("0"), 16)
            .map_err(|e| std::io::Error::new(std::io::ErrorKind::InvalidData, e))?;
        let mut chunk = vec![0; size + 2];
        reader.read_exact(&mut chunk)?;
        if size == 0 {
            return Ok(body);
        }
        body.extend_from_slice(&chunk[..size]);
    }
}

/// The Messages API's streaming events for `reply`.
fn sse_of(reply: &Reply, model: &str) -> String {
    let mut events = vec![json!({"type": "message_start", "message": {
        "id": "msg_maos_conformance", "type": "message", "role": "assistant", "model": model,
        "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": 10, "output_tokens": 1}}})];
    let stop = match reply {
        Reply::ToolUse { name, input } => {
            events.push(
                json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "tool_use", "id": TOOL_USE_ID, "name": name, "input": {}}}),
            );
            events.push(json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "input_json_delta", "partial_json": input.to_string()}}));
            "tool_use"
        }
        Reply::Text(text) => {
            events.push(
                json!({"type": "content_block_start", "index": 0, "content_block":
                {"type": "text", "text": ""}}),
            );
            events.push(json!({"type": "content_block_delta", "index": 0, "delta":
                {"type": "text_delta", "text": text}}));
            "end_turn"
        }
    };
    events.push(json!({"type": "content_block_stop", "index": 0}));
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

/// The result the model got back for our tool call, if this request carries it.
fn tool_result_in(body: &Value) -> Option<Value> {
    body["messages"]
        .as_array()?
        .iter()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .find(|c| c["type"] == "tool_result" && c["tool_use_id"] == TOOL_USE_ID)
        .cloned()
}

/// The result of our tool call as the model received it.
fn tool_result(requests: &[Value]) -> Value {
    requests
        .iter()
        .find_map(tool_result_in)
        .unwrap_or_else(|| panic!("no tool result reached the model: {requests:#?}"))
}

/// The agent maos made for the Claude Code window's main thread (`maos ps`).
fn window_agent(env: &Env) -> String {
    let ps = env.maos_json(&["ps"]);
    let mains: Vec<&Value> = ps
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .filter(|a| a["task"] == "Claude Code main thread")
        .collect();
    let [main] = &mains[..] else {
        panic!("not one main-thread agent: {ps:#}")
    };
    main["id"].as_str().expect("agent id").to_string()
}

/// The text of a tool result's content (a string or text blocks).
fn result_text(result: &Value) -> String {
    match &result["content"] {
        Value::String(s) => s.clone(),
        Value::Array(blocks) => blocks
            .iter()
            .filter_map(|b| b["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The script of both scenarios: the first request gets a `Write` of `path`, the request that
/// carries its result gets text and the turn ends. Any other request (none is expected) gets
/// text too, so that nothing loops.
fn write_once(path: &Path, content: &str) -> FakeModel {
    let input = json!({"file_path": path, "content": content});
    FakeModel::start(move |body| {
        if tool_result_in(body).is_some() {
            Reply::Text("Done.".into())
        } else if body.to_string().contains("MAOS-CONFORMANCE") {
            Reply::ToolUse {
                name: "Write".into(),
                input: input.clone(),
            }
        } else {
            Reply::Text("ok".into())
        }
    })
}

/// `/tmp/claude-<uid>/`, where Claude Code keeps background-agent output whatever `HOME` is.
fn claude_tmp() -> PathBuf {
    // SAFETY: getuid has no preconditions.
    PathBuf::from(format!("/tmp/claude-{}", unsafe { libc::getuid() }))
}

/// Runs of the real client one at a time, so that `/tmp/claude-<uid>/` is cleaned up only
/// when this test made it.
static RUNS: Mutex<()> = Mutex::new(());

/// `claude -p PROMPT` in the project with maos's hooks installed and the fake model behind
/// it; killed (its whole process group) if it outlives [`RUN_DEADLINE`].
fn run_claude(env: &Env, claude: &Path, model: &FakeModel, prompt: &str) -> Output {
    let _one = RUNS.lock().unwrap_or_else(|p| p.into_inner());
    let tmp_existed = claude_tmp().exists();
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
        .args(["--allowedTools", "Bash,Read,Write,Edit,Agent"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("spawn claude");
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let started = Instant::now();
    let out = rx.recv_timeout(RUN_DEADLINE);
    if out.is_err() {
        // SAFETY: kill(2) of the process group we made for the client.
        unsafe {
            libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        }
    }
    if !tmp_existed {
        let _ = std::fs::remove_dir_all(claude_tmp());
    }
    let out = out
        .unwrap_or_else(|_| panic!("claude did not finish within {RUN_DEADLINE:?}"))
        .expect("claude's output");
    eprintln!(
        "claude -p took {:?}: {}\nstdout: {}\nstderr: {}",
        started.elapsed(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// An environment with maos's Claude Code hooks installed in its project, and the client;
/// `None` (after saying why) where the client cannot run here.
fn setup() -> Option<(Env, PathBuf)> {
    let claude = match claude() {
        Ok(c) => c,
        Err(why) => {
            skip_unless_ci(&format!("the real Claude Code cannot run: {why}"));
            return None;
        }
    };
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    let settings = std::fs::read_to_string(env.project.join(".claude/settings.json"))
        .expect("install-hooks wrote .claude/settings.json");
    assert!(settings.contains("maos hook"), "{settings}");
    Some((env, claude))
}

/// The model's one `Write` is allowed: the file is on disk, the model got the tool's success,
/// and maos recorded the write for the window's agent, which took the file's lock for it.
#[test]
fn an_allowed_write_is_recorded_and_locked_for_the_window() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("hello.txt");
    let model = write_once(&file, "hello from the model\n");
    let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: write hello.txt");
    assert!(out.status.success(), "claude failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Done.");

    // The model's side: two streamed requests to the one endpoint, the second carrying the
    // tool's success.
    let requests = model.messages_requests();
    assert_eq!(
        model.targets(),
        ["/v1/messages?beta=true"; 2],
        "{requests:#?}"
    );
    assert!(
        requests.iter().all(|r| r["stream"] == true),
        "{requests:#?}"
    );
    let result = tool_result(&requests);
    assert_ne!(result["is_error"], true, "{result}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(&file).expect("the model's file is on disk"),
        "hello from the model\n"
    );
    // maos's view: the window is one agent, the write is its own, it took the lock before
    // writing, and let go of it when its turn stopped.
    let window = window_agent(&env);
    let modified = env.events(&["--type", "file_modified"]);
    let [write] = &modified[..] else {
        panic!("not one file_modified: {modified:?}")
    };
    assert_eq!(write["data"]["path"], "hello.txt", "{write}");
    assert_eq!(write["data"]["tool"], "Write", "{write}");
    assert_eq!(write["agent_id"], window.as_str(), "{write}");
    let acquired = env.events(&["--type", "lock_acquired"]);
    let [lock] = &acquired[..] else {
        panic!("not one lock_acquired: {acquired:?}")
    };
    assert_eq!(lock["agent_id"], window.as_str(), "{lock}");
    assert_eq!(lock["data"]["path"], "hello.txt", "{lock}");
    assert_eq!(lock["data"]["mode"], "write", "{lock}");
    assert!(
        lock["seq"].as_u64() < write["seq"].as_u64(),
        "{lock} {write}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// The file is locked by another agent: maos's hook denies the `Write`, the model receives the
/// denial naming the holder, and the file is not written.
#[test]
fn a_write_to_a_file_another_agent_holds_is_denied_to_the_model() {
    let Some((env, claude)) = setup() else { return };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let file = env.project.join("held.txt");
    let model = write_once(&file, "clobbered\n");
    let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: write held.txt");
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: an error result carrying maos's reason, which names the holder.
    let requests = model.messages_requests();
    assert_eq!(
        model.targets(),
        ["/v1/messages?beta=true"; 2],
        "{requests:#?}"
    );
    let result = tool_result(&requests);
    let text = result_text(&result);
    eprintln!("the model received: {result}");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        text.starts_with("PreToolUse:Write hook error: maos: held.txt"),
        "{text}"
    );
    // The holder by role and short id (`agt_` and eight digits), as `maos ps` shows it.
    let named = format!("holder ({})", holder.get(..12).unwrap_or(&holder));
    assert!(
        text.contains(&named),
        "the holder {named} is not named: {text}"
    );
    // The disk.
    assert!(!file.exists(), "the denied write reached the disk");
    // maos's view: the lock is still the holder's alone, and the window's denial is recorded.
    let locks = env.maos_json(&["lock", "list"]);
    let locks = locks["locks"].as_array().expect("locks");
    assert!(
        matches!(&locks[..], [l] if l["path"] == "held.txt" && l["holder"] == holder.as_str()),
        "{locks:?}"
    );
    let window = window_agent(&env);
    let denied = env.events(&["--type", "tool_denied"]);
    assert!(
        matches!(&denied[..], [d] if d["agent_id"] == window.as_str()),
        "{denied:?}"
    );
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
}
