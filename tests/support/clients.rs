//! Plumbing for the conformance tests with real agent CLIs: a pinned npm release installed
//! once into a cache (`tests/conformance/install.sh`), a run of the client bounded by a
//! deadline, and a scripted fake model API on 127.0.0.1 that records every request and
//! answers each with what the test's script says. The API's wire format (Anthropic's,
//! Gemini's, ...) is the test's: this module only speaks HTTP/1.1, one request per
//! connection.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Installs `package@version` into the conformance cache (once; later calls reuse it) and
/// returns `node_modules/.bin/BIN` after checking that `BIN --version` starts with `version`;
/// `Err` says why it cannot run here.
pub fn npm_client(package: &str, version: &str, bin: &str) -> Result<PathBuf, String> {
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
    let dir = String::from_utf8_lossy(&out.stdout).trim().to_string();
    let bin = Path::new(&dir).join("node_modules/.bin").join(bin);
    // A HOME of its own: even `--version` writes there (Gemini CLI leaves
    // `~/.gemini/projects.json.*.tmp` files behind).
    let home = tempfile::tempdir().map_err(|e| format!("a temporary HOME: {e}"))?;
    let answer = Command::new(&bin)
        .arg("--version")
        .env("HOME", home.path())
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&answer.stdout);
    if !answer.status.success() || !text.trim_start().starts_with(version) {
        return Err(format!(
            "{} --version answered {:?} ({})",
            bin.display(),
            text.trim(),
            answer.status
        ));
    }
    Ok(bin)
}

/// Runs the client `cmd` to its end (stdin closed, stdout and stderr captured, in a process
/// group of its own) and prints how it went; `Err` when it outlived `deadline`, after its
/// whole group was killed.
pub fn run_client(mut cmd: Command, deadline: Duration) -> Result<Output, String> {
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let what = format!("{:?}", cmd.get_program());
    let child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {what}: {e}"))?;
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    let started = Instant::now();
    let Ok(out) = rx.recv_timeout(deadline) else {
        // SAFETY: kill(2) of the process group made for the client.
        unsafe {
            libc::kill(-(pid as libc::pid_t), libc::SIGKILL);
        }
        return Err(format!("{what} did not finish within {deadline:?}"));
    };
    let out = out.map_err(|e| format!("{what}'s output: {e}"))?;
    eprintln!(
        "{what} took {:?}: {}\nstdout: {}\nstderr: {}",
        started.elapsed(),
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(out)
}

/// One answer of the fake API.
pub struct Response {
    pub status: u16,
    pub content_type: &'static str,
    pub body: String,
}

impl Response {
    pub fn not_found() -> Response {
        Response {
            status: 404,
            content_type: "application/json",
            body: "{}".into(),
        }
    }
}

/// One recorded request: method, target (path and query) and the body as JSON (`Null` when
/// it is not JSON).
#[derive(Clone, Debug)]
pub struct Recorded {
    pub method: String,
    pub target: String,
    pub body: Value,
}

type Script = dyn Fn(&Recorded) -> Response + Send + Sync;

/// A fake HTTP API on 127.0.0.1: every request is recorded, then answered by the script.
pub struct FakeApi {
    pub port: u16,
    requests: Arc<Mutex<Vec<Recorded>>>,
}

impl FakeApi {
    /// Listens on a free port; `read_timeout` bounds how long a connection may stay silent.
    pub fn start(
        read_timeout: Duration,
        script: impl Fn(&Recorded) -> Response + Send + Sync + 'static,
    ) -> FakeApi {
        let listener = TcpListener::bind("127.0.0.1:0").expect("bind the fake API");
        let port = listener.local_addr().expect("local addr").port();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let script: Arc<Script> = Arc::new(script);
        let recorded = Arc::clone(&requests);
        // The thread ends with the test process; every connection is served by its own thread.
        std::thread::spawn(move || {
            for stream in listener.incoming().flatten() {
                let (script, recorded) = (Arc::clone(&script), Arc::clone(&recorded));
                std::thread::spawn(move || {
                    if let Err(e) = serve(stream, read_timeout, &*script, &recorded) {
                        eprintln!("fake API: {e}");
                    }
                });
            }
        });
        FakeApi { port, requests }
    }

    pub fn base_url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    /// Every request so far, in the order they arrived.
    pub fn requests(&self) -> Vec<Recorded> {
        self.requests
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

/// One HTTP/1.1 request on `stream`, answered and closed.
fn serve(
    stream: TcpStream,
    read_timeout: Duration,
    script: &Script,
    recorded: &Mutex<Vec<Recorded>>,
) -> std::io::Result<()> {
    stream.set_read_timeout(Some(read_timeout))?;
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
    let request = Recorded {
        method,
        target,
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
    };
    let response = script(&request);
    recorded
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .push(request);
    let reason = if response.status == 200 {
        "OK"
    } else {
        "Error"
    };
    let head = format!(
        "HTTP/1.1 {} {reason}\r\nContent-Type: {}\r\nCache-Control: no-cache\r\n\
         Content-Length: {}\r\nConnection: close\r\n\r\n",
        response.status,
        response.content_type,
        response.body.len()
    );
    let mut stream = stream;
    stream.write_all(head.as_bytes())?;
    stream.write_all(response.body.as_bytes())?;
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
