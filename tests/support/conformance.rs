//! Plumbing of the conformance tests that run a real agent CLI: the pinned npm package,
//! installed once into a cache outside the repository (`tests/conformance/install.sh`); a
//! scripted fake model API on 127.0.0.1 that records every request; a run of the client with
//! a deadline, killed with its whole process group when it outlives it.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Condvar, Mutex};
use std::time::{Duration, Instant};

use crate::{Env, skip_unless_ci};
use serde_json::Value;

/// The directory the pinned npm `package@version` is installed in (installed on first use);
/// `Err` says why it cannot be.
pub fn npm_package(package: &str, version: &str) -> Result<PathBuf, String> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/install.sh");
    let out = Command::new("sh")
        .arg(&script)
        .args([package, version])
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
            "npm could not install {package}@{version} ({}): {first}",
            out.status
        ));
    }
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// One answer of the fake API.
pub struct Answer {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Answer {
    /// `200` with a server-sent event stream.
    pub fn sse(body: String) -> Answer {
        Answer {
            status: 200,
            content_type: "text/event-stream",
            body,
        }
    }

    pub fn not_found() -> Answer {
        Answer {
            status: 404,
            content_type: "text/plain",
            body: String::new(),
        }
    }
}

/// Server-sent events: each value's `type` is its event name.
pub fn sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|e| format!("event: {}\ndata: {e}\n\n", e["type"].as_str().unwrap_or("")))
        .collect()
}

/// A scripted fake model API: every request is answered by `answer(method, target, body)`
/// and recorded (target and JSON body), one connection per request.
pub struct FakeApi {
    port: u16,
    requests: Arc<Mutex<Vec<(String, Value)>>>,
}

impl FakeApi {
    pub fn start(answer: impl Fn(&str, &str, &Value) -> Answer + Send + Sync + 'static) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake model API");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let answer = Arc::new(answer);
        let recorded = Arc::clone(&requests);
        // The thread ends with the test process; every connection is served by its own thread.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (answer, recorded) = (Arc::clone(&answer), Arc::clone(&recorded));
                std::thread::spawn(move || {
                    if let Err(e) = serve(stream, &*answer, &recorded) {
                        eprintln!("fake model API: {e}");
                    }
                });
            }
        });
        FakeApi { port, requests }
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// Every recorded request: (target, JSON body or null).
    pub fn requests(&self) -> Vec<(String, Value)> {
        self.requests.lock().expect("requests").clone()
    }
}

/// One HTTP/1.1 request on `stream`, answered and closed.
fn serve(
    stream: TcpStream,
    answer: &dyn Fn(&str, &str, &Value) -> Answer,
    recorded: &Mutex<Vec<(String, Value)>>,
) -> std::io::Result<()> {
    let (method, target, body) = read_request(&stream, Duration::from_secs(60))?;
    let reply = answer(&method, &target, &body);
    recorded.lock().expect("requests").push((target, body));
    let reason = if reply.status == 200 {
        "OK"
    } else {
        "Not Found"
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        reply.status,
        reply.content_type,
        reply.body.len()
    );
    let mut stream = stream;
    stream.write_all(head.as_bytes())?;
    stream.write_all(reply.body.as_bytes())?;
    stream.flush()
}

/// One HTTP/1.1 request from `stream` (no reply): its method, target and JSON body (`Null`
/// when the body is not JSON), with a length or chunked body.
pub fn read_request(
    stream: &TcpStream,
    timeout: Duration,
) -> std::io::Result<(String, String, Value)> {
    stream.set_read_timeout(Some(timeout))?;
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
    Ok((
        method,
        target,
        serde_json::from_slice(&body).unwrap_or(Value::Null),
    ))
}

pub fn read_chunked(reader: &mut impl BufRead) -> std::io::Result<Vec<u8>> {
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

/// Run `cmd` (stdin closed, output captured) in its own process group; kill the group and
/// panic naming `what` if it outlives `deadline`. Prints how it went, for the test's log.
pub fn run_within(cmd: Command, deadline: Duration, what: &str) -> Output {
    Client::start(cmd, deadline, what).finish()
}

/// A client started in its own process group (stdin closed, output captured), which must be
/// over within its deadline; its whole group is killed when it outlives it, or when the
/// `Client` is dropped before it finished (e.g. by a failing test).
pub struct Client {
    pid: u32,
    out: std::sync::mpsc::Receiver<std::io::Result<Output>>,
    started: Instant,
    deadline: Duration,
    what: String,
    over: bool,
}

impl Client {
    pub fn start(mut cmd: Command, deadline: Duration, what: &str) -> Client {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0);
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {what}: {e}"));
        let pid = child.id();
        let (tx, out) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        Client {
            pid,
            out,
            started: Instant::now(),
            deadline,
            what: what.to_string(),
            over: false,
        }
    }

    /// Wait until the client exits by itself (within its deadline, else the test fails);
    /// what it did.
    pub fn finish(mut self) -> Output {
        let left = self.deadline.saturating_sub(self.started.elapsed());
        let out = self.out.recv_timeout(left);
        self.over = true;
        let (what, deadline) = (&self.what, self.deadline);
        if out.is_err() {
            self.kill_group();
        }
        let out = out
            .unwrap_or_else(|_| panic!("{what} did not finish within {deadline:?}"))
            .unwrap_or_else(|e| panic!("{what}'s output: {e}"));
        eprintln!(
            "{what} took {:?}: {}\nstdout: {}\nstderr: {}",
            self.started.elapsed(),
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        out
    }

    fn kill_group(&self) {
        // SAFETY: kill(2) of the process group made for the client.
        unsafe {
            libc::kill(-(self.pid as libc::pid_t), libc::SIGKILL);
        }
    }
}

impl Drop for Client {
    fn drop(&mut self) {
        if !self.over {
            self.kill_group();
            // Reaped by its waiting thread, which sends its output then.
            let _ = self.out.recv_timeout(self.deadline);
        }
    }
}

/// How long a [`Gate`] keeps a fake model's answer at most.
pub const GATE_LIMIT: Duration = Duration::from_secs(45);

/// A condition the test opens for a fake model (e.g. "the daemon was killed"); a script
/// waiting on it answers once it is open, or after [`GATE_LIMIT`] whatever happened.
#[derive(Clone, Default)]
pub struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    pub fn open(&self) {
        *self.0.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0.1.notify_all();
    }

    pub fn is_open(&self) -> bool {
        *self.0.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub fn wait(&self) {
        let open = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        let (open, _) = self
            .0
            .1
            .wait_timeout_while(open, GATE_LIMIT, |open| !*open)
            .unwrap_or_else(|p| p.into_inner());
        if !*open {
            eprintln!("fake model API: a gate stayed shut for {GATE_LIMIT:?}");
        }
    }
}

/// A session with an agent that holds `path`'s lock: the agent's id.
pub fn hold(env: &Env, path: &str) -> String {
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", &format!("owns {path}"));
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", path, "--agent", &holder]);
    holder
}

/// The one agent id on the events of `kind` (the window's agent).
pub fn agent_of(env: &Env, kind: &str) -> String {
    let events = env.events(&["--type", kind]);
    let ids: std::collections::BTreeSet<&str> = events
        .iter()
        .filter_map(|e| e["agent_id"].as_str())
        .collect();
    let [id] = ids.into_iter().collect::<Vec<_>>()[..] else {
        panic!("not one agent on {kind}: {events:?}")
    };
    id.to_string()
}

/// Every agent of `maos ps --all --json`, across its sessions (finished ones too).
pub fn ps_agents(env: &Env) -> Vec<Value> {
    crate::agents_in(&env.maos_json(&["ps", "--all"]))
}

/// One agent of `maos ps --all --json`.
pub fn ps_agent(env: &Env, id: &str) -> Value {
    let agents = ps_agents(env);
    agents
        .iter()
        .find(|a| a["id"] == id)
        .cloned()
        .unwrap_or_else(|| panic!("{id} is not in maos ps: {agents:#?}"))
}

/// The `prompt_submitted` event of the window whose prompt's first line is `prompt`: its
/// agent is the window's agent, its session the window's session. Found by the window's own
/// event, not by the agent's role or task, which maos may label as it sees fit.
pub fn prompt_event(env: &Env, prompt: &str) -> Value {
    let line = prompt.lines().next().unwrap_or_default();
    let prompts = env.events(&["--type", "prompt_submitted"]);
    prompts
        .iter()
        .find(|e| e["data"]["first_line"] == line)
        .cloned()
        .unwrap_or_else(|| panic!("no prompt_submitted for {line:?}: {prompts:#?}"))
}

/// The agent maos made for the Claude Code window that was sent `prompt`: the agent of that
/// prompt's event; a window's agent has no parent.
pub fn window_of(env: &Env, prompt: &str) -> String {
    let event = prompt_event(env, prompt);
    let id = event["agent_id"].as_str().expect("agent id").to_string();
    let agent = ps_agent(env, &id);
    assert_eq!(agent["parent"], Value::Null, "{agent}");
    id
}

/// The one agent maos made for the Claude Code window of a test with one window: every prompt
/// the window submitted is that agent's.
pub fn window_agent(env: &Env) -> String {
    let prompts = env.events(&["--type", "prompt_submitted"]);
    let mut ids: Vec<&str> = prompts
        .iter()
        .filter_map(|e| e["agent_id"].as_str())
        .collect();
    ids.dedup();
    let [id] = ids[..] else {
        panic!("not one window agent: {prompts:#?}")
    };
    let agent = ps_agent(env, id);
    assert_eq!(agent["parent"], Value::Null, "{agent}");
    id.to_string()
}

/// An agent as maos's texts name it: `agt_` and eight hex digits.
pub fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The one event of `kind` about `path` (`data.path`, or `data.paths` holding it).
pub fn one_event(env: &Env, kind: &str, path: &str) -> Value {
    let all = env.events(&["--type", kind]);
    let about: Vec<&Value> = all
        .iter()
        .filter(|e| {
            e["data"]["path"] == path
                || e["data"]["paths"]
                    .as_array()
                    .is_some_and(|p| p.iter().any(|p| p == path))
        })
        .collect();
    let [one] = about[..] else {
        panic!("not one {kind} of {path}: {all:#?}")
    };
    one.clone()
}

/// The real client `what` where `found` has it; else `None`, after saying why it cannot run
/// (under `CI`, a failure).
pub fn runnable(what: &str, found: Result<PathBuf, String>) -> Option<PathBuf> {
    match found {
        Ok(bin) => Some(bin),
        Err(why) => {
            skip_unless_ci(&format!("the real {what} cannot run: {why}"));
            None
        }
    }
}
