//! `maos mcp` driven by a client no one here wrote: the official MCP Python SDK (`mcp` from
//! PyPI, pinned), installed once into a virtual environment in a cache outside the repository
//! (`tests/conformance/install_py.sh`), running `tests/conformance/mcp_client.py`, which takes
//! one JSON command a line and answers one JSON line, so that a test checks maos's own view
//! between calls.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::time::Duration;

use serde_json::{Value, json};

use crate::{Env, maos_bin, skip_unless_ci, wait_until};

/// The pinned SDK.
pub const SDK: (&str, &str) = ("mcp", "2.3.0");

/// How long one command of the driver may take (a hang is a bug).
pub const ANSWER_TIMEOUT: Duration = Duration::from_secs(30);

/// The SDK's python (installed on first use), or `None` after saying why the test skips (on
/// CI it fails instead).
pub fn python() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/install_py.sh");
    let out = Command::new("sh")
        .arg(&script)
        .args([SDK.0, SDK.1])
        .stdin(Stdio::null())
        .output();
    let why = match out {
        Ok(o) if o.status.success() => {
            let dir = PathBuf::from(String::from_utf8_lossy(&o.stdout).trim());
            return Some(dir.join("bin/python"));
        }
        Ok(o) => {
            let err = String::from_utf8_lossy(&o.stderr);
            let first = err.lines().rev().find(|l| !l.trim().is_empty());
            format!(
                "pip could not install {}=={} ({}): {}",
                SDK.0,
                SDK.1,
                o.status,
                first.unwrap_or_default()
            )
        }
        Err(e) => format!("cannot run {}: {e}", script.display()),
    };
    skip_unless_ci(&format!("the MCP Python SDK is not available: {why}"));
    None
}

/// The SDK as a client of `maos mcp` (started by the SDK's stdio client from the driver).
pub struct Driver {
    /// `None` when someone else started the driver ([`Driver::attach`]).
    child: Option<Child>,
    stdin: Option<Box<dyn Write + Send>>,
    lines: Receiver<String>,
}

/// The path of `tests/conformance/mcp_client.py`, the driver's script.
pub fn driver_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("conformance/mcp_client.py")
}

impl Driver {
    /// Start the driver for `maos mcp` in `env`'s project, with `vars` set for the server.
    pub fn start(env: &Env, python: &Path, vars: &[(&str, &str)]) -> Driver {
        Driver::start_in(env, &env.project, python, vars)
    }

    /// [`Driver::start`] with the server's working directory `dir` (and its project).
    pub fn start_in(env: &Env, dir: &Path, python: &Path, vars: &[(&str, &str)]) -> Driver {
        let mut cmd = env.command(python);
        cmd.arg(driver_script())
            .arg(maos_bin())
            .arg("mcp")
            .current_dir(dir)
            .env_remove("MAOS_AGENT_ID")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit());
        for (k, v) in vars {
            cmd.env(k, v);
        }
        let mut child = cmd.spawn().expect("start the MCP SDK driver");
        let stdin = child.stdin.take().expect("driver stdin");
        let stdout = child.stdout.take().expect("driver stdout");
        Driver::with(Some(child), Box::new(stdin), stdout)
    }

    /// A driver someone else started (a managed agent `maos run` started, whose stdin and
    /// stdout are the named pipes `input` and `output`): opened, then its first answer awaited.
    /// A driver that never opens them fails the test after [`ANSWER_TIMEOUT`].
    pub fn attach(input: &Path, output: &Path) -> Driver {
        let (input, output) = (input.to_path_buf(), output.to_path_buf());
        let (tx, rx) = channel();
        // Opening a named pipe waits for its other end, in the order the driver opens them.
        std::thread::spawn(move || {
            let w = std::fs::OpenOptions::new().write(true).open(&input);
            let r = w.and_then(|w| std::fs::File::open(&output).map(|r| (w, r)));
            let _ = tx.send(r);
        });
        let (w, r) = rx
            .recv_timeout(ANSWER_TIMEOUT)
            .expect("the managed agent did not open its named pipes in time")
            .expect("open the managed agent's named pipes");
        Driver::with(None, Box::new(w), r)
    }

    fn with(
        child: Option<Child>,
        stdin: Box<dyn Write + Send>,
        stdout: impl std::io::Read + Send + 'static,
    ) -> Driver {
        let (tx, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if tx.send(line).is_err() {
                    break;
                }
            }
        });
        let mut d = Driver {
            child,
            stdin: Some(stdin),
            lines,
        };
        let ready = d.answer();
        assert_eq!(ready["ready"], true, "the driver did not start: {ready}");
        d
    }

    /// Send one command without waiting for its answer (a lock wait).
    pub fn send(&mut self, cmd: &Value) {
        let stdin = self.stdin.as_mut().expect("driver stdin is open");
        writeln!(stdin, "{cmd}").expect("write to the driver");
        stdin.flush().expect("flush the driver's stdin");
    }

    /// The next answer.
    pub fn answer(&mut self) -> Value {
        let line = self
            .lines
            .recv_timeout(ANSWER_TIMEOUT)
            .expect("the MCP driver did not answer in time");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("driver said {line:?}: {e}"))
    }

    /// One command and its answer.
    pub fn ask(&mut self, cmd: &Value) -> Value {
        self.send(cmd);
        self.answer()
    }

    /// `tools/call`: `{is_error, text}` or `{rpc_error}`.
    pub fn call(&mut self, tool: &str, args: Value) -> Value {
        self.ask(&json!({"op": "call", "tool": tool, "args": args}))
    }

    /// `maos hook [--cli CLI]` run by the driver, as the agent CLI that runs the server would:
    /// its exit code and stdout (the CLI's answer).
    pub fn hook(&mut self, cli: Option<&str>, input: Value) -> (i64, String) {
        let a = self.ask(&json!({"op": "hook", "cli": cli, "input": input}));
        (
            a["code"].as_i64().expect("exit code"),
            a["stdout"].as_str().unwrap_or_default().to_string(),
        )
    }

    /// `tools/call` with `_meta`.
    pub fn call_meta(&mut self, tool: &str, args: Value, meta: Value) -> Value {
        self.ask(&json!({"op": "call", "tool": tool, "args": args, "meta": meta}))
    }

    /// A call that must succeed: its text parsed as JSON (or as a string when it is not).
    pub fn ok(&mut self, tool: &str, args: Value) -> Value {
        let a = self.call(tool, args.clone());
        assert_eq!(a["is_error"], false, "{tool} {args} failed: {a}");
        let text = a["text"].as_str().expect("text").to_string();
        serde_json::from_str(&text).unwrap_or(Value::String(text))
    }

    /// A call that must fail as a tool error: its one sentence.
    pub fn err(&mut self, tool: &str, args: Value) -> String {
        let a = self.call(tool, args.clone());
        if let Some(e) = a["rpc_error"].as_str() {
            return e.to_string();
        }
        assert_eq!(a["is_error"], true, "{tool} {args} should fail: {a}");
        a["text"].as_str().expect("text").to_string()
    }

    /// The driver's pid (it runs `maos mcp` as its child).
    pub fn pid(&self) -> u32 {
        self.child
            .as_ref()
            .expect("a driver this test started")
            .id()
    }

    /// Close the driver's stdin and wait for it (and so the server) to end (an attached
    /// driver's end is its starter's to see).
    pub fn close(mut self) {
        drop(self.stdin.take());
        if let Some(child) = &mut self.child {
            wait_until(
                ANSWER_TIMEOUT,
                "the MCP driver ends after its stdin closed",
                || matches!(child.try_wait(), Ok(Some(_))),
            );
        }
    }
}

impl Drop for Driver {
    fn drop(&mut self) {
        if let Some(child) = &mut self.child
            && let Ok(None) = child.try_wait()
        {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// A `maos mcp` spoken to raw, line by line (no SDK), with `vars` in its environment, after
/// `initialize` (answered by maos) and `notifications/initialized`: the process, its stdin,
/// and its output's lines.
pub fn raw_server(env: &Env, vars: &[(&str, &str)]) -> (Child, ChildStdin, Receiver<String>) {
    let mut cmd = env.command(&maos_bin());
    cmd.arg("mcp")
        .envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = cmd.spawn().expect("start maos mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "raw", "version": "0"}}});
    writeln!(stdin, "{init}").expect("send initialize");
    let first: Value = serde_json::from_str(
        &rx.recv_timeout(crate::COMMAND_TIMEOUT)
            .expect("maos mcp answers initialize"),
    )
    .expect("JSON");
    assert_eq!(first["id"], 1, "{first}");
    assert_eq!(first["result"]["serverInfo"]["name"], "maos", "{first}");
    writeln!(
        stdin,
        "{}",
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"})
    )
    .expect("send initialized");
    (child, stdin, rx)
}
