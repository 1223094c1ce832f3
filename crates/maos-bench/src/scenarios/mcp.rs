//! `maos mcp`: a tool call's round trip from an MCP client (this tool, speaking JSON-RPC over
//! the server's stdin and stdout as any client does) through the server to the daemon and
//! back, once the server is started; and the server's start: spawn of `maos mcp` to its answer
//! to `initialize`.

use std::io::{BufRead, BufReader, Write};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::Instant;

use maos_tests::client::Res;
use maos_tests::daemon::Daemon;
use serde_json::{Value, json};

use crate::harness;
use crate::opts::Opts;
use crate::report::{Goal, Metric, latency_rows_2, pct, print_human};
use crate::workload::{WARMUP, create_session, running_agent};

/// A `maos mcp` and its pipes.
struct Server {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    next: u64,
}

impl Server {
    fn spawn(d: &Daemon, agent: &str) -> Res<(Server, Instant)> {
        let mut cmd: Command = d.env.command(&harness::client_bin()?);
        cmd.arg("mcp")
            .env("MAOS_AGENT_ID", agent)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let t = Instant::now();
        let mut child = cmd
            .spawn()
            .map_err(|e| format!("cannot run maos mcp: {e}"))?;
        let stdin = child.stdin.take().ok_or("no stdin")?;
        let stdout = BufReader::new(child.stdout.take().ok_or("no stdout")?);
        Ok((
            Server {
                child,
                stdin,
                stdout,
                next: 1,
            },
            t,
        ))
    }

    /// Send a request and read lines until its answer.
    fn ask(&mut self, method: &str, params: Value) -> Res<Value> {
        let id = self.next;
        self.next += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        writeln!(self.stdin, "{msg}").map_err(|e| format!("write to maos mcp: {e}"))?;
        self.stdin.flush().map_err(|e| e.to_string())?;
        let mut line = String::new();
        loop {
            line.clear();
            let n = self
                .stdout
                .read_line(&mut line)
                .map_err(|e| format!("read from maos mcp: {e}"))?;
            if n == 0 {
                return Err(format!(
                    "maos mcp closed its output before answering {method}"
                ));
            }
            let v: Value = serde_json::from_str(&line).map_err(|e| format!("{line:?}: {e}"))?;
            if v["id"] == id {
                if v.get("error").is_some() {
                    return Err(format!("{method}: {}", v["error"]));
                }
                return Ok(v["result"].clone());
            }
        }
    }

    fn initialize(&mut self) -> Res<Value> {
        let r = self.ask(
            "initialize",
            json!({"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "maos-bench", "version": "0"}}),
        )?;
        let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        writeln!(self.stdin, "{note}").map_err(|e| e.to_string())?;
        Ok(r)
    }

    /// A tool call that must succeed; its time in ns.
    fn call(&mut self, tool: &str, args: Value) -> Res<u64> {
        let t = Instant::now();
        let r = self.ask("tools/call", json!({"name": tool, "arguments": args}))?;
        let ns = t.elapsed().as_nanos() as u64;
        if r["isError"] == true {
            return Err(format!("{tool} failed: {r}"));
        }
        Ok(ns)
    }

    /// Close stdin: the server ends.
    fn close(self) -> Res {
        let Server {
            mut child, stdin, ..
        } = self;
        drop(stdin);
        let status = child.wait().map_err(|e| e.to_string())?;
        if !status.success() {
            return Err(format!("maos mcp exited with {status}"));
        }
        Ok(())
    }
}

pub fn scen_mcp(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(2000);
    let mut d = harness::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: mcp", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;
    drop(c);
    let goals = Some((Goal::AtMost(1000.0), Goal::AtMost(5000.0)));

    // Round trips through one running server.
    let (mut s, _) = Server::spawn(&d, &aid)?;
    s.initialize()?;
    let (mut who, mut acquire, mut release) = (Vec::new(), Vec::new(), Vec::new());
    for i in 0..WARMUP + n {
        let path = format!("src/f{}.rs", i % 100);
        let w = s.call("who", json!({"path": path}))?;
        let a = s.call("lock_acquire", json!({"path": path, "mode": "write"}))?;
        let r = s.call("lock_release", json!({"path": path}))?;
        if i >= WARMUP {
            who.push(w);
            acquire.push(a);
            release.push(r);
        }
    }
    s.close()?;
    let mut rows = Vec::new();
    for (name, what, samples) in [
        (
            "mcp tool call: who",
            "one daemon read (lock check)",
            &mut who,
        ),
        (
            "mcp tool call: lock_acquire",
            "one request: whose call it is and the lock (a commit)",
            &mut acquire,
        ),
        (
            "mcp tool call: lock_release",
            "one request: whose call it is and the release (a commit)",
            &mut release,
        ),
    ] {
        let r = latency_rows_2(name, samples, goals);
        print_human(
            &format!(
                "{name}: {what}, client -> maos mcp -> maosd -> back, {n} calls after {WARMUP}, synchronous={sync}"
            ),
            &r,
        );
        rows.extend(r);
    }

    // Spawn to the answer to `initialize`, a fresh server each time.
    let rounds = (n / 50).clamp(20, 100);
    let mut ready = Vec::with_capacity(rounds);
    for _ in 0..rounds {
        let (mut s, t) = Server::spawn(&d, &aid)?;
        s.initialize()?;
        ready.push(t.elapsed().as_nanos() as u64);
        s.close()?;
    }
    ready.sort_unstable();
    let start = "maos mcp start";
    let r = vec![
        Metric::new(
            start,
            "spawn to initialize answered, p50",
            pct(&ready, 50.0) / 1000.0,
            "ms",
        )
        .goal(Goal::AtMost(20.0)),
        Metric::new(start, "p99", pct(&ready, 99.0) / 1000.0, "ms"),
        Metric::new(start, "max", pct(&ready, 100.0) / 1000.0, "ms"),
    ];
    print_human(
        &format!(
            "maos mcp start: spawn of `maos mcp` (exec of maos-mcp) to its answer to initialize, {rounds} starts"
        ),
        &r,
    );
    rows.extend(r);
    d.stop()?;
    Ok(rows)
}
