//! `maos-bench`: end-to-end load tool for `maosd`.
//!
//! Starts its own daemon (the `maosd` next to this executable) in a fresh temp dir, drives it
//! over the real wire protocol from plain std threads, and reports latency percentiles,
//! throughput, memory and whole-process `maos ps` cost. Each scenario gets a fresh daemon.
//!
//! Method: latency is one `Instant` around write+read of one request on a connected client;
//! percentiles are nearest-rank over the sorted samples; warm-up requests are excluded.
//! Whole-process timings interleave A B A B and take the median of the per-pair ratios (the
//! method of `tools/ratio.py`).

use std::fmt::Write as _;
use std::fs;
use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitCode, Output, Stdio};
use std::sync::{Arc, Barrier, mpsc};
use std::time::{Duration, Instant};

use maos_core::{AgentOp, AgentState, LockMode, SessionOp};
use maos_proto::{
    ClientMsg, ErrorBody, ErrorCode, LockWait, PROTOCOL_VERSION, Reply, Request, ServerMsg, Target,
    frame, read_frame,
};
use serde::Deserialize;
use serde::de::IgnoredAny;

type Res<T = ()> = Result<T, String>;

const USAGE: &str = "\
usage: maos-bench <scenario> [options]

scenarios:
  update      state-update round trip (pause/resume of one agent), 1 client
  create      session create round trip, 1 client
  register    agent register round trip, 1 client
  throughput  N clients, each toggling its own agent for D seconds: events/s, p50/p99
  rss         fill 10 sessions x 20 agents x 10,000 events per session, then VmRSS/VmHWM
  ps          whole-process `maos ps` vs the empty binary, interleaved, median of pair ratios
  lock        lock acquire (--no-wait, free file) and release round trips, 1 client
  contention  N agents (own client each) on P paths for D seconds: acquire with a short
              wait, release after each grant; durable grants/s, timeouts, deadlocks
  hook        whole-process `maos hook` (PreToolUse Write) vs the empty binary, interleaved
  hook-concurrent
              N subagents of one Claude session, each its own thread spawning `maos hook`
              (PreToolUse Write on its own files, every 4th call a PostToolUse): paced (one
              call per agent every --pace-ms) and saturated (back-to-back); spawn-to-exit
              p50/p99, calls/s; then checks every agent holds its locks
  agent-start a plan of --agents agents (default 200), each `true`, strategy sequential, run by
              the daemon: start decided -> pid committed (spawn of `maosd supervise`, its
              fork/exec of the agent, the answer recorded) p50/p99/max from the timeline; agents/s
  startup     100 managed sessions x 20 live agents (each waits on a FIFO) and up to 10,000
              events per session on disk (pause/resume; the fill stops after 90 s, see --events);
              maosd killed -9 and a quarter of the agents killed with their supervisors; spawn of
              maosd to the first answer of a project request (recovery committed), 5 restarts
              (killed -9 each); then the agents are released
  transfer    `maos export -o FILE` of a session with 10,000 events and `maos import FILE`
              into a fresh project, whole processes, median of --requests runs (default 5)
  gc          `gc` of 1,000 finished sessions while another client updates a live agent back
              to back: the collection's time, and p50/p99 of the updates meanwhile
  all         every scenario above (latency, throughput, locks for normal and full), one table
  activation  needs systemd-socket-activate (systemd's tool), so not in `all`: whole-process
              `maos ps` as the first command, the daemon started by the socket (20 sessions x 5
              agents to open), then again against the running daemon; --requests rounds
              (default 30), each ending with `maos daemon stop`: first p50/p90, warm p50, ratio
  serve       start a populated daemon, print its environment, stop on Enter (for ratio.py)

options:
  --clients N           concurrent clients (throughput: 32, rss: 20, contention: 20,
                        startup's fill: 20)
  --requests N          timed requests (update 5000, create 2000, register 2000), process
                        pairs (ps 200, hook 200), acquire+release pairs (lock 5000), hook
                        calls per agent (hook-concurrent: 50 paced; the saturated run makes
                        at most 20) or socket activations (activation 30)
  --duration SECS       throughput and contention run time (default 5)
  --paths N             files to lock (lock: 1000, contention: 50)
  --wait-ms N           contention: how long an acquire may wait (default 50; 0 = no wait)
  --synchronous MODE    normal|full (default: normal; `all` runs both where relevant)
  --agents-per-session N  agents per session (register: 20, throughput: 32, ps: 5,
                        activation: 5)
  --agents N            hook-concurrent: subagents, one process at a time each (default 20);
                        agent-start: agents in the plan (default 200)
  --pace-ms N           hook-concurrent: one call per agent every N ms in the paced run
                        (default 50, i.e. 400 calls/s for 20 agents)
  --events N            startup: pause/resume events per session (rounded up to an even
                        number per agent), filled in full (default: 10,000, but the fill
                        stops after 90 s and the total reached is reported)
  --markdown            also print a markdown table (one row per metric, target, PASS/MISS)
";

// ---------------------------------------------------------------------------------------------
// Options

#[derive(Clone, Debug, Default)]
struct Opts {
    scenario: String,
    clients: Option<usize>,
    requests: Option<usize>,
    duration: Option<f64>,
    synchronous: Option<String>,
    per_session: Option<usize>,
    paths: Option<usize>,
    wait_ms: Option<u64>,
    agents: Option<usize>,
    pace_ms: Option<u64>,
    events: Option<usize>,
    markdown: bool,
}

fn parse_args() -> Res<Opts> {
    let mut args = std::env::args().skip(1);
    let mut o = Opts::default();
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Res<T> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse()
            .map_err(|_| format!("{flag}: {v:?} is not a valid number"))
    }
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--clients" => o.clients = Some(num(&a, args.next())?),
            "--requests" => o.requests = Some(num(&a, args.next())?),
            "--duration" => o.duration = Some(num(&a, args.next())?),
            "--agents-per-session" => o.per_session = Some(num(&a, args.next())?),
            "--paths" => o.paths = Some(num(&a, args.next())?),
            "--wait-ms" => o.wait_ms = Some(num(&a, args.next())?),
            "--agents" => o.agents = Some(num(&a, args.next())?),
            "--pace-ms" => o.pace_ms = Some(num(&a, args.next())?),
            "--events" => o.events = Some(num(&a, args.next())?),
            "--synchronous" => {
                let v = args.next().ok_or("--synchronous needs normal|full")?;
                if v != "normal" && v != "full" {
                    return Err(format!("--synchronous: {v:?} is not normal or full"));
                }
                o.synchronous = Some(v);
            }
            "--markdown" => o.markdown = true,
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if o.scenario.is_empty() => o.scenario = s.to_string(),
            s => return Err(format!("unexpected argument {s:?}")),
        }
    }
    if o.scenario.is_empty() {
        return Err("name a scenario".into());
    }
    if o.clients == Some(0)
        || o.requests == Some(0)
        || o.per_session == Some(0)
        || o.paths == Some(0)
        || o.agents == Some(0)
        || o.pace_ms == Some(0)
        || o.events == Some(0)
    {
        return Err(
            "--clients, --requests, --agents-per-session, --paths, --agents, --pace-ms and \
             --events must be at least 1"
                .into(),
        );
    }
    if o.duration.is_some_and(|d| !d.is_finite() || d <= 0.0) {
        return Err("--duration must be positive".into());
    }
    Ok(o)
}

// ---------------------------------------------------------------------------------------------
// Results

#[derive(Clone, Copy, Debug)]
enum Goal {
    AtMost(f64),
    AtLeast(f64),
}

#[derive(Clone, Debug)]
struct Metric {
    scenario: String,
    metric: String,
    value: f64,
    unit: &'static str,
    goal: Option<Goal>,
}

impl Metric {
    fn new(scenario: &str, metric: &str, value: f64, unit: &'static str) -> Metric {
        Metric {
            scenario: scenario.to_string(),
            metric: metric.to_string(),
            value,
            unit,
            goal: None,
        }
    }
    fn goal(mut self, g: Goal) -> Metric {
        self.goal = Some(g);
        self
    }
    fn verdict(&self) -> &'static str {
        match self.goal {
            None => "",
            Some(Goal::AtMost(t)) if self.value <= t => "PASS",
            Some(Goal::AtLeast(t)) if self.value >= t => "PASS",
            Some(_) => "MISS",
        }
    }
}

fn fmt_num(v: f64, unit: &str) -> String {
    let s = if unit == "×" || unit == "%" {
        format!("{v:.2}")
    } else if v.abs() >= 100.0 || v.fract() == 0.0 {
        group_thousands(v.round() as i64)
    } else {
        format!("{v:.1}")
    };
    if unit.is_empty() {
        s
    } else if unit == "×" {
        format!("{s}×")
    } else {
        format!("{s} {unit}")
    }
}

fn group_thousands(n: i64) -> String {
    let digits = n.unsigned_abs().to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    if n < 0 { format!("-{out}") } else { out }
}

fn fmt_goal(m: &Metric) -> String {
    match m.goal {
        None => String::new(),
        Some(Goal::AtMost(t)) => format!("≤ {}", fmt_num(t, m.unit)),
        Some(Goal::AtLeast(t)) => format!("≥ {}", fmt_num(t, m.unit)),
    }
}

fn print_human(title: &str, metrics: &[Metric]) {
    println!("\n{title}");
    let w = metrics.iter().map(|m| m.metric.len()).max().unwrap_or(0);
    for m in metrics {
        let goal = fmt_goal(m);
        let tail = if goal.is_empty() {
            String::new()
        } else {
            format!("   (target {goal}: {})", m.verdict())
        };
        println!("  {:<w$}  {:>14}{tail}", m.metric, fmt_num(m.value, m.unit));
    }
}

fn markdown(metrics: &[Metric]) -> String {
    let mut s = String::new();
    let _ = writeln!(s, "| Scenario | Metric | Result | Target | |");
    let _ = writeln!(s, "|---|---|---:|---|---|");
    for m in metrics {
        let _ = writeln!(
            s,
            "| {} | {} | {} | {} | {} |",
            m.scenario,
            m.metric,
            fmt_num(m.value, m.unit),
            fmt_goal(m),
            m.verdict()
        );
    }
    s
}

/// Nearest-rank percentile of sorted samples (ns), in µs.
fn pct(sorted: &[u64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1] as f64 / 1000.0
}

fn mean_us(samples: &[u64]) -> f64 {
    samples.iter().sum::<u64>() as f64 / samples.len().max(1) as f64 / 1000.0
}

fn median(v: &mut [f64]) -> f64 {
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n == 0 {
        f64::NAN
    } else if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// p50 / p99 / mean / max rows for a latency series.
fn latency_rows(
    scenario: &str,
    samples: &mut [u64],
    p50_goal: Option<Goal>,
    with_mean: bool,
) -> Vec<Metric> {
    samples.sort_unstable();
    let mut p50 = Metric::new(scenario, "p50 latency", pct(samples, 50.0), "µs");
    if let Some(g) = p50_goal {
        p50 = p50.goal(g);
    }
    let mut rows = vec![
        p50,
        Metric::new(scenario, "p99 latency", pct(samples, 99.0), "µs"),
    ];
    if with_mean {
        rows.push(Metric::new(
            scenario,
            "mean latency",
            mean_us(samples),
            "µs",
        ));
    }
    rows.push(Metric::new(
        scenario,
        "max latency",
        pct(samples, 100.0),
        "µs",
    ));
    rows
}

// ---------------------------------------------------------------------------------------------
// The daemon under test

/// A `maosd` started for one scenario, in its own temp dir; stopped and cleaned up on drop.
struct Daemon {
    child: Option<Child>,
    dir: PathBuf,
    home: PathBuf,
    socket: PathBuf,
    project_dir: PathBuf,
    /// The project root as the client computes it (what requests carry).
    root: String,
    pid: u32,
    bin_dir: PathBuf,
}

/// User + system CPU time of a process (`self` or a pid) so far, in seconds, from
/// `/proc/<pid>/stat` (USER_HZ = 100 on Linux).
fn cpu_secs_of(pid: &str) -> f64 {
    let Ok(text) = fs::read_to_string(format!("/proc/{pid}/stat")) else {
        return f64::NAN;
    };
    // Fields after the command name (which may hold spaces) start at field 3.
    let Some(rest) = text.rfind(')').map(|i| &text[i + 2..]) else {
        return f64::NAN;
    };
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks = |i: usize| {
        f.get(i)
            .and_then(|v| v.parse::<f64>().ok())
            .unwrap_or(f64::NAN)
    };
    (ticks(11) + ticks(12)) / 100.0
}

fn bin_dir() -> Res<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my executable: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "my executable has no parent directory".into())
}

/// Remove temp dirs left by runs that were killed (their pid no longer exists).
fn remove_stale_dirs() {
    let Ok(entries) = fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("maos-bench-"))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = fs::remove_dir_all(e.path());
        }
    }
}

impl Daemon {
    /// `bin` (a client, or the empty binary) pointed at this daemon, never starting one of its
    /// own, with no project of the caller's environment and no output.
    fn command(&self, bin: &Path) -> Command {
        let mut c = Command::new(bin);
        c.env("MAOS_HOME", &self.home)
            .env("MAOS_SOCKET", &self.socket)
            .env("MAOS_NO_AUTOSTART", "1")
            .env_remove("MAOS_PROJECT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    fn start(synchronous: &str) -> Res<Daemon> {
        remove_stale_dirs();
        let bin_dir = bin_dir()?;
        let bin = bin_dir.join("maosd");
        if !bin.is_file() {
            return Err(format!(
                "{} not found: build it (cargo build --release --workspace --bins)",
                bin.display()
            ));
        }
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!(
            "maos-bench-{}-{}",
            std::process::id(),
            nanos % 1_000_000_000_000
        ));
        fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        // The daemon creates these two 0700 itself.
        let home = dir.join("home");
        let socket = dir.join("run").join("maosd.sock");
        if socket.as_os_str().len() > 100 {
            return Err(format!(
                "socket path {} is too long for a Unix socket; set TMPDIR to a shorter directory",
                socket.display()
            ));
        }
        let project_dir = dir.join("project");
        fs::create_dir_all(&project_dir).map_err(|e| format!("{}: {e}", project_dir.display()))?;
        let root = maos_proto::paths::project_root(&project_dir)
            .to_string_lossy()
            .into_owned();
        let mut d = Daemon {
            child: None,
            dir,
            home,
            socket,
            project_dir,
            root,
            pid: 0,
            bin_dir,
        };
        d.spawn(synchronous)?;
        d.wait_ready()?;
        Ok(d)
    }

    /// Start `maosd` on this daemon's home and socket (again, after [`Daemon::kill9`]), without
    /// waiting for it to answer. Its stderr is appended to `maosd.stderr`.
    fn spawn(&mut self, synchronous: &str) -> Res {
        let bin = self.bin_dir.join("maosd");
        let stderr = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(self.dir.join("maosd.stderr"))
            .map_err(|e| format!("{}: {e}", self.dir.display()))?;
        let mut cmd = Command::new(&bin);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe. The daemon under test gets SIGTERM when this
            // process dies (Ctrl-C included), so an interrupted run leaves no daemon behind.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let child = cmd
            .arg("--synchronous")
            .arg(synchronous)
            .env("MAOS_HOME", &self.home)
            .env("MAOS_SOCKET", &self.socket)
            .env_remove("MAOS_SYNCHRONOUS")
            .env_remove("MAOS_PROJECT")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        self.pid = child.id();
        self.child = Some(child);
        Ok(())
    }

    /// SIGKILL the daemon (a crash: nothing is flushed or closed) and reap it.
    fn kill9(&mut self) -> Res {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        child
            .kill()
            .map_err(|e| format!("cannot kill maosd {}: {e}", self.pid))?;
        child
            .wait()
            .map_err(|e| format!("cannot reap maosd {}: {e}", self.pid))?;
        Ok(())
    }

    fn wait_ready(&mut self) -> Res {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Ok(c) = Client::connect(&self.socket, &self.root) {
                drop(c);
                return Ok(());
            }
            if let Some(child) = self.child.as_mut()
                && let Ok(Some(status)) = child.try_wait()
            {
                let err = fs::read_to_string(self.dir.join("maosd.stderr")).unwrap_or_default();
                self.child = None;
                return Err(format!("maosd exited at start ({status}): {}", err.trim()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "maosd did not answer on {} within 10 s",
                    self.socket.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn client(&self) -> Res<Client> {
        Client::connect(&self.socket, &self.root)
    }

    /// `Request::DaemonStop`, then wait for the process to exit.
    fn stop(&mut self) -> Res {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let asked = self
            .client()
            .and_then(|mut c| c.call_daemon(Request::DaemonStop).map(drop));
        let deadline = Instant::now() + Duration::from_secs(20);
        loop {
            match child.try_wait() {
                Ok(Some(status)) if status.success() => return Ok(()),
                Ok(Some(status)) => return Err(format!("maosd exited with {status}")),
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(5))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "maosd did not stop within 20 s after daemon_stop ({asked:?}); killed it"
                    ));
                }
            }
        }
    }

    /// (VmRSS, VmHWM) in KiB.
    fn memory_kib(&self) -> Res<(u64, u64)> {
        let path = format!("/proc/{}/status", self.pid);
        let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
        let field = |name: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(name))
                .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
                .ok_or_else(|| format!("{path}: no {name}"))
        };
        Ok((field("VmRSS:")?, field("VmHWM:")?))
    }

    /// User + system CPU time of the daemon so far, in seconds.
    fn cpu_secs(&self) -> f64 {
        cpu_secs_of(&self.pid.to_string())
    }

    fn db_bytes(&self) -> u64 {
        ["maos.db", "maos.db-wal"]
            .iter()
            .map(|f| self.project_file_bytes(f))
            .sum()
    }

    /// Size of a file in the project's directory under the daemon's home (0 if absent).
    fn project_file_bytes(&self, name: &str) -> u64 {
        let dir = self
            .home
            .join("projects")
            .join(maos_proto::paths::workspace_hash(Path::new(&self.root)));
        fs::metadata(dir.join(name)).map_or(0, |m| m.len())
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
        let _ = fs::remove_dir_all(&self.dir);
    }
}

// ---------------------------------------------------------------------------------------------
// The client

/// Just enough of a response to know it was acknowledged, without building the records.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Ack {
    Response { id: u64, result: AckResult },
    Error { error: ErrorBody },
}

#[derive(Deserialize)]
enum AckResult {
    Ok(IgnoredAny),
    Err(ErrorBody),
}

fn remote(e: &ErrorBody) -> String {
    format!("maosd refused: {} ({})", e.message, e.code)
}

/// A connected, handshaken blocking client (the same shape as `maos`'s, without auto-start).
struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next_id: u64,
    root: String,
}

impl Client {
    fn connect(socket: &Path, root: &str) -> Res<Client> {
        let s = UnixStream::connect(socket)
            .map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        let mut c = Client {
            w: s,
            r,
            next_id: 1,
            root: root.to_string(),
        };
        c.send(&ClientMsg::Hello {
            protocol: PROTOCOL_VERSION,
            client_version: env!("CARGO_PKG_VERSION").to_string(),
        })?;
        match read_frame(&mut c.r).map_err(|e| format!("handshake: {e}"))? {
            ServerMsg::Welcome { .. } => Ok(c),
            ServerMsg::Error { error } => Err(remote(&error)),
            other => Err(format!("unexpected handshake answer: {other:?}")),
        }
    }

    fn send(&mut self, msg: &ClientMsg) -> Res {
        let buf = frame::encode(msg).map_err(|e| e.to_string())?;
        self.w
            .write_all(&buf)
            .map_err(|e| format!("write to maosd: {e}"))
    }

    fn send_request(&mut self, project: bool, body: Request) -> Res<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let project = project.then(|| self.root.clone());
        self.send(&ClientMsg::Request { id, project, body })?;
        Ok(id)
    }

    /// A project request, fully decoded (setup path).
    fn call(&mut self, body: Request) -> Res<Reply> {
        self.call_inner(true, body)
    }

    fn call_daemon(&mut self, body: Request) -> Res<Reply> {
        self.call_inner(false, body)
    }

    fn call_inner(&mut self, project: bool, body: Request) -> Res<Reply> {
        let id = self.send_request(project, body)?;
        match read_frame(&mut self.r).map_err(|e| format!("read from maosd: {e}"))? {
            ServerMsg::Response { id: rid, result } if rid == id => result.map_err(|e| remote(&e)),
            ServerMsg::Error { error } => Err(remote(&error)),
            other => Err(format!("unexpected answer: {other:?}")),
        }
    }

    /// A project request whose answer is only checked for success (hot path): returns the
    /// round-trip time in ns, measured around write + read.
    fn timed(&mut self, body: Request) -> Res<u64> {
        let (ns, result) = self.timed_try(body)?;
        result.map(|()| ns).map_err(|e| remote(&e))
    }

    /// Like [`Client::timed`], but a refusal of this request (a lock conflict, a timeout) is an
    /// answer, not a failure: (round trip in ns, success or the daemon's error).
    fn timed_try(&mut self, body: Request) -> Res<(u64, Result<(), ErrorBody>)> {
        let t = Instant::now();
        let id = self.send_request(true, body)?;
        let bytes =
            frame::read_frame_bytes(&mut self.r).map_err(|e| format!("read from maosd: {e}"))?;
        let ns = t.elapsed().as_nanos() as u64;
        let ack: Ack = serde_json::from_slice(&bytes).map_err(|e| format!("bad answer: {e}"))?;
        match ack {
            Ack::Response {
                id: rid,
                result: AckResult::Ok(_),
            } if rid == id => Ok((ns, Ok(()))),
            Ack::Response {
                id: rid,
                result: AckResult::Err(e),
            } if rid == id => Ok((ns, Err(e))),
            Ack::Error { error: e } => Err(remote(&e)),
            Ack::Response { id: rid, .. } => {
                Err(format!("answer to request {rid} while waiting for {id}"))
            }
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Workload helpers

fn create_session(c: &mut Client, objective: &str, start: bool) -> Res<String> {
    let reply = c.call(Request::SessionCreate {
        objective: objective.to_string(),
        strategy: Default::default(),
        phases: vec!["plan".into(), "build".into(), "review".into()],
    })?;
    let Reply::Session(s) = reply else {
        return Err(format!("session_create answered {reply:?}"));
    };
    let id = s.id.to_string();
    if start {
        c.call(Request::SessionTransition {
            session: Some(id.clone()),
            op: SessionOp::Start,
            reason: None,
        })?;
    }
    Ok(id)
}

fn register(session: &str, role: &str) -> Request {
    Request::AgentRegister {
        session: Some(session.to_string()),
        role: role.to_string(),
        task: format!("benchmark task for {role}"),
        depends_on: Vec::new(),
        parent: None,
    }
}

/// Register an agent in `session` and start it (Running).
fn running_agent(c: &mut Client, session: &str, role: &str) -> Res<String> {
    let req = register(session, role);
    let Reply::Agent(a) = c.call(req)? else {
        return Err("agent_register answered something else than an agent".into());
    };
    let id = a.id.to_string();
    c.call(Request::AgentTransition {
        agent: id.clone(),
        op: AgentOp::Start,
        exit_code: None,
        reason: None,
    })?;
    Ok(id)
}

/// The pause or resume request that flips `agent`'s paused flag (`paused` = its current flag).
fn toggle(session: &str, agent: &str, paused: bool) -> Request {
    let target = Target::Agent(agent.to_string());
    let session = Some(session.to_string());
    if paused {
        Request::Resume {
            session,
            target,
            by: None,
        }
    } else {
        Request::Pause {
            session,
            target,
            reason: None,
            by: None,
        }
    }
}

/// A client that owns some agents and toggles them round-robin.
struct Toggler {
    client: Client,
    agents: Vec<(String, String, bool)>,
    next: usize,
}

impl Toggler {
    fn step(&mut self) -> Res<u64> {
        let i = self.next;
        self.next = (i + 1) % self.agents.len();
        let (s, a, paused) = &mut self.agents[i];
        let ns = self.client.timed(toggle(s, a, *paused))?;
        *paused = !*paused;
        Ok(ns)
    }
}

// ---------------------------------------------------------------------------------------------
// Scenarios

const WARMUP: usize = 200;

fn label(scenario: &str, sync: &str) -> String {
    format!("{scenario} ({sync})")
}

fn scen_update(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(5000);
    let mut d = Daemon::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: update", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;
    let mut t = Toggler {
        client: c,
        agents: vec![(sid, aid, false)],
        next: 0,
    };
    for _ in 0..WARMUP {
        t.step()?;
    }
    let cpu0 = d.cpu_secs();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(t.step()?);
    }
    let cpu = d.cpu_secs() - cpu0;
    drop(t);
    d.stop()?;
    let name = label("update", sync);
    let mut rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(1000.0)), true);
    rows.push(Metric::new(
        &name,
        "daemon CPU per request",
        cpu / n as f64 * 1e6,
        "µs",
    ));
    print_human(
        &format!("update: pause/resume of an agent, 1 client, {n} requests, synchronous={sync}"),
        &rows,
    );
    Ok(rows)
}

fn scen_create(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(2000);
    let warm = 50;
    let mut d = Daemon::start(sync)?;
    let mut c = d.client()?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..warm + n {
        let ns = c.timed(Request::SessionCreate {
            objective: format!("bench: session {i}"),
            strategy: Default::default(),
            phases: vec!["plan".into(), "build".into(), "review".into()],
        })?;
        if i >= warm {
            samples.push(ns);
        }
    }
    drop(c);
    d.stop()?;
    let name = label("create", sync);
    let rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(5000.0)), true);
    print_human(
        &format!("create: session create (3 phases), 1 client, {n} requests, synchronous={sync}"),
        &rows,
    );
    Ok(rows)
}

fn scen_register(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(2000);
    let per = o.per_session.unwrap_or(20);
    let warm = 50;
    let mut d = Daemon::start(sync)?;
    let mut c = d.client()?;
    let mut samples = Vec::with_capacity(n);
    let mut session = String::new();
    for i in 0..warm + n {
        if i % per == 0 {
            session = create_session(&mut c, &format!("bench: register {i}"), true)?;
        }
        let req = register(&session, &format!("role{}", i % 4));
        let ns = c.timed(req)?;
        if i >= warm {
            samples.push(ns);
        }
    }
    drop(c);
    d.stop()?;
    let name = label("register", sync);
    let rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(2000.0)), true);
    print_human(
        &format!(
            "register: agent register, 1 client, {n} requests, {per} agents per session, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

/// (toggle events, commits that wrote them) for these agents, read back from the timeline.
/// Every event of one group commit carries the commit's timestamp, so distinct timestamps
/// count commits.
fn commit_stats(d: &Daemon, agents: &[String]) -> Res<(usize, usize)> {
    event_stats(d, agents, &["agent_paused", "agent_resumed"])
}

/// (events of these types by these agents, distinct commit timestamps among them), read back
/// from the database.
fn event_stats(d: &Daemon, agents: &[String], types: &[&str]) -> Res<(usize, usize)> {
    let mut c = d.client()?;
    let mut stamps = std::collections::HashSet::new();
    let mut events = 0;
    for a in agents {
        let reply = c.call(Request::Events {
            filter: maos_proto::EventFilter {
                agent: Some(a.clone()),
                types: types.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
            limit: None,
        })?;
        let Reply::Events(list) = reply else {
            return Err("events answered something else".into());
        };
        events += list.len();
        stamps.extend(list.into_iter().map(|e| e.ts));
    }
    Ok((events, stamps.len()))
}

/// What a parallel run measured (CPU times cover the timed part only, warm-up excluded).
struct RunResult {
    samples: Vec<u64>,
    acks: u64,
    secs: f64,
    daemon_cpu: f64,
    bench_cpu: f64,
}

/// Run `clients` togglers in parallel: `warm` untimed steps each, then a common start, then
/// either `per_client` steps each or until `dur` has passed.
fn run_togglers(
    d: &Daemon,
    togglers: Vec<Toggler>,
    warm: usize,
    dur: Option<Duration>,
    per_client: usize,
) -> Res<RunResult> {
    // The clients and this thread: the CPU clocks are read once every client is warm.
    let barrier = Arc::new(Barrier::new(togglers.len() + 1));
    let handles: Vec<_> = togglers
        .into_iter()
        .map(|mut t| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Res<(Vec<u64>, f64)> {
                let mut first = Ok(0);
                for _ in 0..warm {
                    if let Err(e) = t.step() {
                        first = Err(e);
                        break;
                    }
                }
                barrier.wait();
                first?;
                let t0 = Instant::now();
                let mut samples = Vec::with_capacity(per_client.min(1 << 20));
                match dur {
                    Some(dur) => {
                        while t0.elapsed() < dur {
                            samples.push(t.step()?);
                        }
                    }
                    None => {
                        for _ in 0..per_client {
                            samples.push(t.step()?);
                        }
                    }
                }
                Ok((samples, t0.elapsed().as_secs_f64()))
            })
        })
        .collect();
    barrier.wait();
    let (cpu0, me0) = (d.cpu_secs(), cpu_secs_of("self"));
    let mut all = Vec::new();
    let mut secs: f64 = 0.0;
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((s, e))) => {
                all.extend(s);
                secs = secs.max(e);
            }
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a client thread panicked".into())),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let (daemon_cpu, bench_cpu) = (d.cpu_secs() - cpu0, cpu_secs_of("self") - me0);
    Ok(RunResult {
        acks: all.len() as u64,
        samples: all,
        secs,
        daemon_cpu,
        bench_cpu,
    })
}

fn scen_throughput(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let clients = o.clients.unwrap_or(32);
    let per = o.per_session.unwrap_or(32);
    let secs = o.duration.unwrap_or(5.0);
    let mut d = Daemon::start(sync)?;
    let mut setup = d.client()?;
    let mut togglers = Vec::new();
    let mut session = String::new();
    for i in 0..clients {
        if i % per == 0 {
            session = create_session(&mut setup, &format!("bench: throughput {i}"), true)?;
        }
        let aid = running_agent(&mut setup, &session, &format!("worker{i}"))?;
        togglers.push(Toggler {
            client: d.client()?,
            agents: vec![(session.clone(), aid, false)],
            next: 0,
        });
    }
    drop(setup);
    let agents: Vec<String> = togglers.iter().map(|t| t.agents[0].1.clone()).collect();
    let RunResult {
        mut samples,
        acks,
        secs: elapsed,
        daemon_cpu: cpu,
        bench_cpu: me,
    } = run_togglers(&d, togglers, 100, Some(Duration::from_secs_f64(secs)), 0)?;
    let (events, commits) = commit_stats(&d, &agents)?;
    d.stop()?;
    let name = label(&format!("throughput, {clients} clients"), sync);
    let rate = acks as f64 / elapsed;
    let mut rows = vec![Metric::new(&name, "events/s", rate, "").goal(Goal::AtLeast(10_000.0))];
    rows.extend(latency_rows(&name, &mut samples, None, false));
    rows.push(Metric::new(
        &name,
        "daemon CPU per event",
        cpu / acks.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "events per commit (mean)",
        events as f64 / commits.max(1) as f64,
        "",
    ));
    rows.push(Metric::new(
        &name,
        "bench clients' CPU per event",
        me / acks.max(1) as f64 * 1e6,
        "µs",
    ));
    print_human(
        &format!(
            "throughput: {clients} clients × own agent ({per} agents per session), {secs} s, \
             {acks} acknowledged events, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

fn scen_rss(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 10;
    const AGENTS: usize = 20;
    const EVENTS_PER_SESSION: usize = 10_000;
    let clients = o.clients.unwrap_or(20).min(SESSIONS * AGENTS);
    let mut d = Daemon::start(sync)?;
    let (idle_rss, _) = d.memory_kib()?;
    let mut setup = d.client()?;
    let mut pairs = Vec::new();
    for s in 0..SESSIONS {
        let sid = create_session(&mut setup, &format!("bench: rss session {s}"), true)?;
        for a in 0..AGENTS {
            let aid = running_agent(&mut setup, &sid, &format!("agent{a}"))?;
            pairs.push((sid.clone(), aid, false));
        }
    }
    drop(setup);
    // Agent k goes to client k % clients; every agent gets the same number of toggles, so each
    // session gets EVENTS_PER_SESSION toggle events.
    let mut owned: Vec<Vec<_>> = (0..clients).map(|_| Vec::new()).collect();
    for (k, p) in pairs.into_iter().enumerate() {
        owned[k % clients].push(p);
    }
    let agent_ids: Vec<String> = owned.iter().flatten().map(|p| p.1.clone()).collect();
    let per_agent = EVENTS_PER_SESSION / AGENTS;
    let mut togglers = Vec::new();
    for agents in owned {
        let n = agents.len() * per_agent;
        togglers.push((
            Toggler {
                client: d.client()?,
                agents,
                next: 0,
            },
            n,
        ));
    }
    // Clients own 10 agents each (200 / 20), so every client does the same number of steps.
    let per_client = togglers.iter().map(|t| t.1).max().unwrap_or(0);
    if togglers.iter().any(|t| t.1 != per_client) {
        return Err(format!(
            "--clients {clients} does not divide {} agents evenly",
            SESSIONS * AGENTS
        ));
    }
    let togglers: Vec<_> = togglers.into_iter().map(|t| t.0).collect();
    let RunResult {
        acks,
        secs: elapsed,
        ..
    } = run_togglers(&d, togglers, 0, None, per_client)?;
    // Let the allocator settle after the storm, then read.
    std::thread::sleep(Duration::from_millis(200));
    let (rss, hwm) = d.memory_kib()?;
    let db = d.db_bytes();
    // A read of everything live, to make sure the state is all there and counts nothing extra.
    let mut c = d.client()?;
    let Reply::Ps(list) = c.call(Request::Ps { all: true })? else {
        return Err("ps answered something else".into());
    };
    let agents: usize = list.iter().map(|s| s.agents.len()).sum();
    let (rss_after_ps, _) = d.memory_kib()?;
    drop(c);
    let (events, commits) = commit_stats(&d, &agent_ids)?;
    d.stop()?;
    if list.len() != SESSIONS || agents != SESSIONS * AGENTS {
        return Err(format!(
            "after the fill the daemon holds {} sessions / {agents} agents",
            list.len()
        ));
    }
    let name = label("rss, 10 sessions × 20 agents × 10k events", sync);
    let mib = |k: u64| k as f64 / 1024.0;
    let rows = vec![
        Metric::new(&name, "VmRSS after fill", mib(rss), "MiB").goal(Goal::AtMost(30.0)),
        Metric::new(&name, "VmHWM (peak RSS)", mib(hwm), "MiB"),
        Metric::new(&name, "VmRSS idle (before fill)", mib(idle_rss), "MiB"),
        Metric::new(&name, "VmRSS after `ps --all`", mib(rss_after_ps), "MiB"),
        Metric::new(&name, "database + WAL", db as f64 / 1048576.0, "MiB"),
        Metric::new(&name, "fill rate", acks as f64 / elapsed, "events/s"),
        Metric::new(
            &name,
            "events per commit (mean)",
            events as f64 / commits.max(1) as f64,
            "",
        ),
    ];
    print_human(
        &format!(
            "rss: {acks} toggle events over {SESSIONS} sessions × {AGENTS} agents by {clients} \
             clients in {elapsed:.1} s, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

/// `maos export` of a session with 10,000 events to a file, and `maos import` of that file
/// into a fresh project, each as a whole process (what a person runs), median of --requests
/// runs (default 5). Checks that every import has every event.
fn scen_transfer(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const AGENTS: usize = 20;
    const EVENTS: usize = 10_000;
    let runs = o.requests.unwrap_or(5);
    let d = Daemon::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: export and import", true)?;
    let mut agents = Vec::new();
    for a in 0..AGENTS {
        agents.push((
            sid.clone(),
            running_agent(&mut c, &sid, &format!("agent{a}"))?,
            false,
        ));
    }
    let mut t = Toggler {
        client: d.client()?,
        agents,
        next: 0,
    };
    let fill = EVENTS.saturating_sub(1 + 2 * AGENTS);
    for _ in 0..fill.next_multiple_of(2) {
        t.step()?;
    }
    let session_events = |c: &mut Client| -> Res<usize> {
        match c.call(Request::Events {
            filter: maos_proto::EventFilter {
                session: Some(sid.clone()),
                ..maos_proto::EventFilter::default()
            },
            limit: None,
        })? {
            Reply::Events(e) => Ok(e.len()),
            _ => Err("events answered something else".into()),
        }
    };
    let events = session_events(&mut c)?;
    let maos = client_bin(&d);
    let cmd = |project: &Path, args: &[&str]| {
        let mut c = d.command(&maos);
        c.arg("--project").arg(project).args(args);
        c
    };
    let file = d.dir.join("export.json");
    let file_s = file.to_string_lossy().to_string();
    let (mut export_ms, mut import_ms) = (Vec::new(), Vec::new());
    for i in 0..runs {
        export_ms
            .push(1e3 * spawn_timed(&mut cmd(&d.project_dir, &["export", &sid, "-o", &file_s]))?);
        let target = d.dir.join(format!("import-{i}"));
        fs::create_dir_all(target.join(".git"))
            .map_err(|e| format!("{}: {e}", target.display()))?;
        import_ms.push(1e3 * spawn_timed(&mut cmd(&target, &["import", &file_s]))?);
        let root = fs::canonicalize(&target)
            .map_err(|e| format!("{}: {e}", target.display()))?
            .to_string_lossy()
            .to_string();
        // Every event, then the import's own.
        let got = session_events(&mut Client::connect(&d.socket, &root)?)?;
        if got != events + 1 {
            return Err(format!("import {i}: {got} events, expected {}", events + 1));
        }
    }
    let bytes = fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    drop(c);
    drop(t);
    let mut d = d;
    d.stop()?;
    let name = label(&format!("transfer, 1 session × {events} events"), sync);
    let rows = vec![
        Metric::new(
            &name,
            "maos export -o FILE, whole process, median",
            median(&mut export_ms),
            "ms",
        )
        .goal(Goal::AtMost(500.0)),
        Metric::new(
            &name,
            "maos import FILE (fresh project), whole process, median",
            median(&mut import_ms),
            "ms",
        )
        .goal(Goal::AtMost(500.0)),
        Metric::new(
            &name,
            "export: max",
            export_ms.iter().copied().fold(0.0, f64::max),
            "ms",
        ),
        Metric::new(
            &name,
            "import: max",
            import_ms.iter().copied().fold(0.0, f64::max),
            "ms",
        ),
        Metric::new(&name, "file size", bytes as f64 / 1048576.0, "MiB"),
    ];
    print_human(
        &format!(
            "transfer: a session with {AGENTS} agents and {events} events, exported to a file and \
             imported into a fresh project, {runs} times each as whole `maos` processes; every \
             import checked to hold every event, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

/// `maos gc` of 1,000 finished sessions (each with an agent and a handful of events), while
/// another client pauses and resumes a live agent back to back: how long the collection
/// takes, and the latency of those state updates while it runs.
fn scen_gc(_o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 1000;
    let mut d = Daemon::start(sync)?;
    let mut c = d.client()?;
    for s in 0..SESSIONS {
        let sid = create_session(&mut c, &format!("bench: gc session {s}"), true)?;
        running_agent(&mut c, &sid, "dev")?;
        c.call(Request::SessionTransition {
            session: Some(sid),
            op: SessionOp::Complete,
            reason: None,
        })?;
    }
    let live = create_session(&mut c, "bench: gc, the live session", true)?;
    let agent = running_agent(&mut c, &live, "dev")?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut t = Toggler {
        client: d.client()?,
        agents: vec![(live.clone(), agent, false)],
        next: 0,
    };
    let updates = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Res<Vec<u64>> {
            let mut lat = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                lat.push(t.step()?);
            }
            Ok(lat)
        })
    };
    let t0 = Instant::now();
    let reply = c.call(Request::Gc {
        older_than_secs: 0,
        dry_run: false,
    });
    let gc_secs = t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut lat = updates
        .join()
        .map_err(|_| "the update thread panicked".to_string())??;
    let Reply::Gc(report) = reply? else {
        return Err("gc answered something else".into());
    };
    if report.sessions.len() != SESSIONS {
        return Err(format!(
            "gc deleted {} sessions, expected {SESSIONS}",
            report.sessions.len()
        ));
    }
    let Reply::Sessions(left) = c.call(Request::SessionList { all: true })? else {
        return Err("session_list answered something else".into());
    };
    if left.len() != 1 {
        return Err(format!(
            "{} sessions left after gc, expected the live one",
            left.len()
        ));
    }
    drop(c);
    d.stop()?;
    lat.sort_unstable();
    let name = label(&format!("gc, {SESSIONS} finished sessions"), sync);
    let mut rows = vec![
        Metric::new(&name, "gc: export + delete, all sessions", gc_secs, "s")
            .goal(Goal::AtMost(2.0)),
        Metric::new(&name, "state updates during the gc", lat.len() as f64, ""),
    ];
    let mut latency = latency_rows(&name, &mut lat, None, false);
    if let Some(p99) = latency.get_mut(1) {
        p99.goal = Some(Goal::AtMost(5000.0));
    }
    rows.extend(latency);
    print_human(
        &format!(
            "gc: {SESSIONS} finished sessions (1 agent, ~6 events each) exported and deleted \
             in one `gc` request, while another client pauses and resumes a live agent back \
             to back; synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

/// `sessions` sessions with `per` running agents each: the warm daemon `ps` and `serve` talk
/// to, and the project `activation`'s daemons open.
fn populate(d: &Daemon, sessions: usize, per: usize) -> Res {
    let mut c = d.client()?;
    for s in 0..sessions {
        let sid = create_session(&mut c, &format!("bench: ps session {s}"), true)?;
        for a in 0..per {
            running_agent(&mut c, &sid, &format!("agent{a}"))?;
        }
    }
    Ok(())
}

fn spawn_timed(cmd: &mut Command) -> Res<f64> {
    let t = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("{cmd:?} exited with {status}"));
    }
    Ok(secs)
}

/// The `maos` binary whole-process scenarios run: `MAOS_BENCH_CLIENT` if set (e.g. a statically
/// linked build), else the one next to this tool. The baseline `empty` is always the default
/// build next to this tool.
fn client_bin(d: &Daemon) -> PathBuf {
    std::env::var_os("MAOS_BENCH_CLIENT")
        .filter(|p| !p.is_empty())
        .map_or_else(|| d.bin_dir.join("maos"), PathBuf::from)
}

/// `maos hook` for a `PreToolUse` `Write` (2 KB of content) that takes its lock through the
/// warm daemon, as a whole process, interleaved with the empty binary; and `python3 -c pass`
/// for scale.
fn scen_hook(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(200);
    let d = Daemon::start(sync)?;
    let maos = client_bin(&d);
    let empty = d.bin_dir.join("empty");
    let input = d.dir.join("pre-tool-use.json");
    let body = serde_json::json!({
        "session_id": "bench-session", "cwd": d.project_dir, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_bench",
        "tool_input": {"file_path": d.project_dir.join("src/a.rs"), "content": "x".repeat(2000)},
    });
    fs::write(&input, body.to_string()).map_err(|e| format!("{}: {e}", input.display()))?;
    let cmd = |bin: &Path, args: &[&str]| -> Res<Command> {
        let mut c = d.command(bin);
        let stdin = fs::File::open(&input).map_err(|e| format!("{}: {e}", input.display()))?;
        c.args(args).stdin(stdin);
        Ok(c)
    };
    for _ in 0..3 {
        spawn_timed(&mut cmd(&maos, &["hook"])?)?;
        spawn_timed(&mut cmd(&empty, &[])?)?;
    }
    let (mut ta, mut tb, mut r) = (Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let x = spawn_timed(&mut cmd(&maos, &["hook"])?)?;
        let y = spawn_timed(&mut cmd(&empty, &[])?)?;
        ta.push(x);
        tb.push(y);
        r.push(x / y);
    }
    // The interpreter itself, not a version manager's shim in front of it (pyenv's is a shell
    // script that costs more than Python).
    let python = Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .ok()
        .and_then(|o| String::from_utf8(o.stdout).ok())
        .map(|s| PathBuf::from(s.trim()))
        .filter(|p| p.is_file());
    let mut py = Vec::new();
    if let Some(python) = &python {
        for _ in 0..(n / 10).max(5) {
            py.push(spawn_timed(&mut cmd(python, &["-c", "pass"])?)?);
        }
    }
    let mut d = d;
    d.stop()?;
    let hook = median(&mut ta);
    let name = label("`maos hook` PreToolUse Write", sync);
    let mut rows = vec![
        Metric::new(&name, "median ratio to empty binary", median(&mut r), "×")
            .goal(Goal::AtMost(1.3)),
        Metric::new(&name, "`maos hook` median", hook * 1e6, "µs"),
        Metric::new(&name, "empty binary median", median(&mut tb) * 1e6, "µs"),
    ];
    if !py.is_empty() {
        rows.push(
            Metric::new(
                &name,
                "`python3 -c pass` / `maos hook`",
                median(&mut py) / hook,
                "×",
            )
            .goal(Goal::AtLeast(20.0)),
        );
    }
    print_human(
        &format!(
            "hook: whole-process `maos hook` ({}) vs `empty`, {n} interleaved runs, synchronous={sync}",
            maos.display()
        ),
        &rows,
    );
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Concurrent hooks

/// The Claude Code session every simulated subagent belongs to.
const HOOK_SESSION: &str = "bench-concurrent-session";
/// Files each subagent writes, in turn.
const HOOK_FILES: usize = 5;
/// Subagent types, in turn (the daemon makes them the agents' roles).
const HOOK_TYPES: [&str; 4] = [
    "general-purpose",
    "code-writer",
    "test-writer",
    "refactorer",
];

/// One simulated subagent of the shared Claude session: its ids and its prepared hook inputs.
struct HookAgent {
    /// Claude Code's `agent_id`.
    ext_id: String,
    agent_type: String,
    /// `SubagentStart` input.
    start: PathBuf,
    /// Project-relative paths of its own files.
    files: Vec<String>,
    /// Per file: the `PreToolUse` and the `PostToolUse` `Write` input.
    pre: Vec<PathBuf>,
    post: Vec<PathBuf>,
}

/// `n` subagents, each with existing files `src/agentKK/file{0..5}.rs` and its hook inputs
/// written to files (2 KB of content per Write, as in `hook`).
fn hook_agents(d: &Daemon, n: usize) -> Res<Vec<HookAgent>> {
    let inputs = d.dir.join("hook-inputs");
    fs::create_dir_all(&inputs).map_err(|e| format!("{}: {e}", inputs.display()))?;
    let save = |name: String, v: serde_json::Value| -> Res<PathBuf> {
        let p = inputs.join(name);
        fs::write(&p, v.to_string()).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    let content = "x".repeat(2000);
    (0..n)
        .map(|k| {
            let ext_id = format!("bench-agent-{k:02}");
            let agent_type = HOOK_TYPES[k % HOOK_TYPES.len()].to_string();
            let base = |event: &str| {
                serde_json::json!({
                    "session_id": HOOK_SESSION, "cwd": d.project_dir, "hook_event_name": event,
                    "agent_id": ext_id, "agent_type": agent_type,
                })
            };
            let dir = d.project_dir.join(format!("src/agent{k:02}"));
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut a = HookAgent {
                start: save(format!("{ext_id}-start.json"), base("SubagentStart"))?,
                ext_id: ext_id.clone(),
                agent_type: agent_type.clone(),
                files: Vec::new(),
                pre: Vec::new(),
                post: Vec::new(),
            };
            for j in 0..HOOK_FILES {
                let rel = format!("src/agent{k:02}/file{j}.rs");
                let abs = d.project_dir.join(&rel);
                fs::write(&abs, b"// written by maos-bench\n")
                    .map_err(|e| format!("{}: {e}", abs.display()))?;
                let tool = |event: &str| {
                    let mut v = base(event);
                    v["tool_name"] = "Write".into();
                    v["tool_use_id"] = format!("toolu_{ext_id}_{j}").into();
                    v["tool_input"] = serde_json::json!({"file_path": abs, "content": content});
                    if event == "PostToolUse" {
                        v["tool_response"] = serde_json::json!({"filePath": abs, "success": true});
                    }
                    v
                };
                a.pre
                    .push(save(format!("{ext_id}-pre-{j}.json"), tool("PreToolUse"))?);
                a.post.push(save(
                    format!("{ext_id}-post-{j}.json"),
                    tool("PostToolUse"),
                )?);
                a.files.push(rel);
            }
            Ok(a)
        })
        .collect()
}

/// One `maos hook` process fed `input`: (spawn-to-exit in ns, its output).
fn hook_process(maos: &Path, d: &Daemon, input: &Path) -> Res<(u64, Output)> {
    let stdin = fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let mut c = Command::new(maos);
    c.arg("hook")
        .env("MAOS_HOME", &d.home)
        .env("MAOS_SOCKET", &d.socket)
        .env("MAOS_NO_AUTOSTART", "1")
        // Nothing of a maos-managed shell the bench may run in: the ids come from the input.
        .env_remove("MAOS_PROJECT")
        .env_remove("MAOS_SESSION_ID")
        .env_remove("MAOS_AGENT_ID")
        .env_remove("MAOS_HOOK_FAIL")
        .env_remove("MAOS_HOOK_TIMEOUT_MS")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = c
        .output()
        .map_err(|e| format!("cannot run {}: {e}", maos.display()))?;
    Ok((t.elapsed().as_nanos() as u64, out))
}

/// What is wrong with a hook's answer, if anything. `maos hook` allows a write (and takes
/// note of a PostToolUse) by printing nothing; it prints a `deny` object to refuse, and a
/// `systemMessage` when the daemon did not answer in time (it then fails open).
fn hook_fault(out: &Output) -> Option<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stdout = stdout.trim();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Some(format!("exited with {}: {}", out.status, stderr.trim()))
    } else if stdout.contains("deny") {
        Some(format!("denied: {stdout}"))
    } else if !stdout.is_empty() {
        Some(format!("unexpected answer: {stdout}"))
    } else {
        None
    }
}

/// What one simulated subagent saw in one run.
#[derive(Default)]
struct HookAgentRun {
    samples: Vec<u64>,
    /// Files it took the write lock of (a PreToolUse that was allowed).
    touched: [bool; HOOK_FILES],
    posts: usize,
    faults: usize,
    first_fault: Option<String>,
    end: Option<Instant>,
}

/// One run over all agents.
struct HookRun {
    samples: Vec<u64>,
    agents: Vec<HookAgentRun>,
    secs: f64,
    daemon_cpu: f64,
}

/// Every agent in its own thread, one `maos hook` process at a time (an agent waits for its
/// hook before the tool runs), `calls` each. Call i is a PostToolUse of the file written by
/// call i-1 when i % 4 == 3, else a PreToolUse of file i % 5.
///
/// Paced (`pace`), open loop: agent k's calls are due every `pace` from
/// start + k·pace/agents (starts spread evenly over the first period). A call that ends after
/// its successor was due is followed at once, and the schedule goes on from there: no burst
/// to catch up. Saturated (`None`): back-to-back from a common start.
fn drive_hooks(
    d: &Daemon,
    maos: &Path,
    agents: &[HookAgent],
    calls: usize,
    pace: Option<Duration>,
) -> Res<HookRun> {
    let n = agents.len() as u32;
    // Room to start the threads before the first call is due.
    let start = Instant::now() + Duration::from_millis(20);
    let cpu0 = d.cpu_secs();
    let results: Vec<Res<HookAgentRun>> = std::thread::scope(|s| {
        let handles: Vec<_> = agents
            .iter()
            .enumerate()
            .map(|(k, a)| {
                s.spawn(move || -> Res<HookAgentRun> {
                    let mut r = HookAgentRun {
                        samples: Vec::with_capacity(calls),
                        ..Default::default()
                    };
                    let mut next = start + pace.map_or(Duration::ZERO, |p| p * k as u32 / n);
                    for i in 0..calls {
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        let post = i % 4 == 3;
                        let (event, file) = if post {
                            ("PostToolUse", (i - 1) % HOOK_FILES)
                        } else {
                            ("PreToolUse", i % HOOK_FILES)
                        };
                        let input = if post { &a.post[file] } else { &a.pre[file] };
                        let (ns, out) = hook_process(maos, d, input)?;
                        r.samples.push(ns);
                        match hook_fault(&out) {
                            Some(f) => {
                                r.faults += 1;
                                r.first_fault.get_or_insert_with(|| {
                                    format!("{} {event} {}: {f}", a.ext_id, a.files[file])
                                });
                            }
                            None if post => r.posts += 1,
                            None => r.touched[file] = true,
                        }
                        if let Some(p) = pace {
                            next = (next + p).max(Instant::now());
                        }
                    }
                    r.end = Some(Instant::now());
                    Ok(r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("an agent thread panicked".into()))
            })
            .collect()
    });
    let daemon_cpu = d.cpu_secs() - cpu0;
    let agents = results.into_iter().collect::<Res<Vec<_>>>()?;
    let faults: usize = agents.iter().map(|r| r.faults).sum();
    if faults > 0 {
        let first = agents
            .iter()
            .find_map(|r| r.first_fault.as_deref())
            .unwrap_or_default();
        return Err(format!(
            "{faults} of {} hook calls got a wrong answer; the first: {first}",
            calls * agents.len()
        ));
    }
    let end = agents.iter().filter_map(|r| r.end).max().unwrap_or(start);
    Ok(HookRun {
        samples: agents
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect(),
        secs: end.saturating_duration_since(start).as_secs_f64(),
        agents,
        daemon_cpu,
    })
}

/// After the runs: every subagent is one running agent of the one session, holds the write
/// lock of every file it was allowed to write, and has exactly its PostToolUse calls on the
/// timeline as `file_modified`, with no `tool_denied`. Nothing is queued.
fn check_hook_state(d: &Daemon, agents: &[HookAgent], runs: &[&HookRun]) -> Res {
    let mut c = d.client()?;
    let listed = c.call(Request::AgentList { session: None });
    let Reply::Agents(records) =
        listed.map_err(|e| format!("after the runs, the session's agents: {e}"))?
    else {
        return Err("agent_list answered something else".into());
    };
    let Reply::Locks(locks) = c.call(Request::LockList { session: None })? else {
        return Err("lock_list answered something else".into());
    };
    if !locks.waiters.is_empty() {
        return Err(format!(
            "after the runs {} lock requests are still queued",
            locks.waiters.len()
        ));
    }
    for (k, a) in agents.iter().enumerate() {
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.external_agent_id.as_deref() == Some(a.ext_id.as_str()))
            .collect();
        let [rec] = mine.as_slice() else {
            return Err(format!(
                "the active session holds {} agents for subagent {} (expected 1)",
                mine.len(),
                a.ext_id
            ));
        };
        if rec.role != a.agent_type || rec.state != maos_core::AgentState::Running {
            return Err(format!(
                "subagent {} is a {} {} agent (expected a running {})",
                a.ext_id, rec.state, rec.role, a.agent_type
            ));
        }
        for (j, f) in a.files.iter().enumerate() {
            if !runs.iter().any(|r| r.agents[k].touched[j]) {
                continue;
            }
            let held = locks
                .locks
                .iter()
                .any(|l| &l.path == f && l.holder == rec.id && l.mode == LockMode::Write);
            if !held {
                return Err(format!(
                    "{} was allowed to write {f} but does not hold its write lock",
                    a.ext_id
                ));
            }
        }
        let Reply::Events(events) = c.call(Request::Events {
            filter: maos_proto::EventFilter {
                agent: Some(rec.id.to_string()),
                types: vec!["file_modified".into(), "tool_denied".into()],
                ..Default::default()
            },
            limit: None,
        })?
        else {
            return Err("events answered something else".into());
        };
        let modified = events.iter().filter(|e| e.kind == "file_modified").count();
        let posts: usize = runs.iter().map(|r| r.agents[k].posts).sum();
        if modified != posts || events.len() != modified {
            return Err(format!(
                "{}: {posts} PostToolUse calls were answered but the timeline holds {modified} \
                 file_modified and {} tool_denied events",
                a.ext_id,
                events.len() - modified
            ));
        }
    }
    Ok(())
}

/// Rows of one run: latency (p99 against `p99_goal`), calls/s, calls, daemon CPU.
fn hook_run_rows(name: &str, run: &mut HookRun, p99_goal: Option<Goal>) -> Vec<Metric> {
    let calls = run.samples.len();
    let mut rows = latency_rows(name, &mut run.samples, None, false);
    rows[1].goal = p99_goal;
    rows.push(Metric::new(name, "calls/s", calls as f64 / run.secs, ""));
    rows.push(Metric::new(name, "hook calls", calls as f64, ""));
    rows.push(Metric::new(
        name,
        "daemon CPU per call",
        run.daemon_cpu / calls.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        name,
        "daemon CPU time",
        run.daemon_cpu * 1e3,
        "ms",
    ));
    rows
}

/// `--agents` subagents of one Claude session calling `maos hook` concurrently, each its own
/// process per call (spawn → answer → exit), on their own files so that nothing is denied.
/// Paced is the issue's target (p99 ≤ 5 ms with 20 agents); saturated shows queueing when
/// more processes start at once than there are CPUs.
fn scen_hook_concurrent(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.agents.unwrap_or(20);
    let calls = o.requests.unwrap_or(50);
    let saturated_calls = calls.min(20);
    let pace_ms = o.pace_ms.unwrap_or(50);
    let pace = Duration::from_millis(pace_ms);
    let mut d = Daemon::start(sync)?;
    let maos = client_bin(&d);
    if !maos.is_file() {
        return Err(format!(
            "{} not found: build the workspace's binaries",
            maos.display()
        ));
    }
    let agents = hook_agents(&d, n)?;
    // Announced one by one, as the main thread spawns them (not timed).
    for a in &agents {
        let (_, out) = hook_process(&maos, &d, &a.start)?;
        if let Some(f) = hook_fault(&out) {
            return Err(format!("{} SubagentStart: {f}", a.ext_id));
        }
    }
    let mut paced = drive_hooks(&d, &maos, &agents, calls, Some(pace))?;
    let mut saturated = drive_hooks(&d, &maos, &agents, saturated_calls, None)?;
    check_hook_state(&d, &agents, &[&paced, &saturated])?;
    d.stop()?;
    let offered = n as f64 * 1000.0 / pace_ms as f64;
    let cpus = std::thread::available_parallelism().map_or(0, |c| c.get());
    let name = label(
        &format!("`maos hook` × {n} agents, one call each every {pace_ms} ms"),
        sync,
    );
    let mut rows = hook_run_rows(&name, &mut paced, Some(Goal::AtMost(5000.0)));
    print_human(
        &format!(
            "hook-concurrent: {n} subagents of one Claude session, each its own thread spawning \
             `maos hook` ({}) for a PreToolUse Write of its own files (every 4th call a \
             PostToolUse), one call every {pace_ms} ms per agent from staggered starts \
             (offered {offered:.0} calls/s), {calls} calls per agent, spawn to exit, \
             synchronous={sync}",
            maos.display()
        ),
        &rows,
    );
    let name = label(&format!("`maos hook` × {n} agents, back-to-back"), sync);
    let sat = hook_run_rows(&name, &mut saturated, None);
    print_human(
        &format!(
            "hook-concurrent, saturated: the same {n} agents back-to-back from a common start, \
             {saturated_calls} calls per agent, on {cpus} CPUs (queueing; no target), \
             synchronous={sync}"
        ),
        &sat,
    );
    println!(
        "\n  checked: no call denied, every agent holds the write locks of its files, every \
         PostToolUse is on the timeline"
    );
    rows.extend(sat);
    Ok(rows)
}

fn scen_ps(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(200);
    let per = o.per_session.unwrap_or(5);
    let d = Daemon::start(sync)?;
    populate(&d, 10, per)?;
    let maos = client_bin(&d);
    let empty = d.bin_dir.join("empty");
    for b in [&maos, &empty] {
        if !b.is_file() {
            return Err(format!(
                "{} not found: build the workspace's binaries",
                b.display()
            ));
        }
    }
    let setup = |bin: &Path, arg: Option<&str>| {
        let mut c = d.command(bin);
        c.args(arg).env("MAOS_PROJECT", &d.project_dir);
        c
    };
    let mut a = setup(&maos, Some("ps"));
    let mut b = setup(&empty, None);
    // The client's own start-up (exec, loader) without talking to the daemon: `--version` asks
    // the daemon at MAOS_SOCKET for its version, so it gets a socket nothing listens on.
    let mut v = setup(&maos, Some("--version"));
    v.env("MAOS_SOCKET", d.home.join("no-daemon.sock"));
    for _ in 0..3 {
        spawn_timed(&mut a)?;
        spawn_timed(&mut b)?;
        spawn_timed(&mut v)?;
    }
    let (mut ta, mut tb, mut tv, mut r, mut rv) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for _ in 0..n {
        let x = spawn_timed(&mut a)?;
        let y = spawn_timed(&mut b)?;
        let z = spawn_timed(&mut v)?;
        ta.push(x);
        tb.push(y);
        tv.push(z);
        r.push(x / y);
        rv.push(z / y);
    }
    // The daemon's share, in process: a fresh connection with its handshake, and the `ps`
    // request decoded into records as the client does.
    let mut hello = Vec::with_capacity(n);
    let mut ps = Vec::with_capacity(n);
    let mut ps_raw = Vec::with_capacity(n);
    let mut reply_bytes = 0;
    for _ in 0..n {
        let t = Instant::now();
        let mut c = d.client()?;
        hello.push(t.elapsed().as_nanos() as u64);
        let t = Instant::now();
        let reply = c.call(Request::Ps { all: false })?;
        ps.push(t.elapsed().as_nanos() as u64);
        ps_raw.push(c.timed(Request::Ps { all: false })?);
        if reply_bytes == 0 {
            reply_bytes = serde_json::to_vec(&reply).map_or(0, |v| v.len());
        }
    }
    hello.sort_unstable();
    ps.sort_unstable();
    ps_raw.sort_unstable();
    let mut d = d;
    d.stop()?;
    let name = label(&format!("`maos ps` (10 sessions × {per} agents)"), sync);
    let rows = vec![
        Metric::new(&name, "median ratio to empty binary", median(&mut r), "×")
            .goal(Goal::AtMost(1.5)),
        Metric::new(&name, "`maos ps` median", median(&mut ta) * 1e6, "µs"),
        Metric::new(&name, "empty binary median", median(&mut tb) * 1e6, "µs"),
        Metric::new(
            &name,
            "`maos --version` ratio to empty (no daemon)",
            median(&mut rv),
            "×",
        ),
        Metric::new(
            &name,
            "`maos --version` median",
            median(&mut tv) * 1e6,
            "µs",
        ),
        Metric::new(
            &name,
            "in-process connect + hello p50",
            pct(&hello, 50.0),
            "µs",
        ),
        Metric::new(
            &name,
            "in-process ps request p50 (decoded)",
            pct(&ps, 50.0),
            "µs",
        ),
        Metric::new(
            &name,
            "in-process ps request p50 (not decoded)",
            pct(&ps_raw, 50.0),
            "µs",
        ),
        Metric::new(&name, "ps reply size", reply_bytes as f64 / 1024.0, "KiB"),
    ];
    print_human(
        &format!(
            "ps: whole-process `maos ps` vs `empty`, {n} interleaved runs, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Locks

/// `n` existing files under `src/` of the project (agents lock files that exist, so the
/// daemon's path resolution takes its usual route); their project-relative paths.
fn lock_files(d: &Daemon, n: usize) -> Res<Vec<String>> {
    let dir = d.project_dir.join("src");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    (0..n)
        .map(|i| {
            let rel = format!("src/file{i:05}.rs");
            let f = d.project_dir.join(&rel);
            fs::write(&f, b"// locked by maos-bench\n")
                .map_err(|e| format!("{}: {e}", f.display()))?;
            Ok(rel)
        })
        .collect()
}

/// A write lock on `path` (relative to the project root, sent as the agent's cwd).
fn acquire_req(agent: &str, path: &str, cwd: &str, wait: LockWait) -> Request {
    Request::LockAcquire {
        agent: agent.to_string(),
        path: path.to_string(),
        cwd: Some(cwd.to_string()),
        mode: LockMode::Write,
        wait,
        ttl_ms: None,
    }
}

fn release_req(agent: &str, path: &str, cwd: &str) -> Request {
    Request::LockRelease {
        agent: Some(agent.to_string()),
        path: path.to_string(),
        cwd: Some(cwd.to_string()),
        force: false,
        by: None,
    }
}

/// Latency rows with a p50 and a p99 target.
fn latency_rows_2(scenario: &str, samples: &mut [u64], goals: Option<(Goal, Goal)>) -> Vec<Metric> {
    let mut rows = latency_rows(scenario, samples, goals.map(|g| g.0), true);
    if let Some((_, p99)) = goals {
        rows[1].goal = Some(p99);
    }
    // Where p99 sits on a cliff (a rare slow commit), how many requests are past it says more.
    let slow = samples.iter().filter(|&&ns| ns > 1_000_000).count();
    rows.push(Metric::new(
        scenario,
        "requests over 1 ms",
        slow as f64 * 100.0 / samples.len().max(1) as f64,
        "%",
    ));
    rows
}

/// The acknowledged grants must all be on the timeline: (grants per commit, mean).
fn check_grants(d: &Daemon, agents: &[String], acknowledged: u64) -> Res<f64> {
    let (grants, commits) = event_stats(d, agents, &["lock_acquired"])?;
    if grants as u64 != acknowledged {
        return Err(format!(
            "{acknowledged} grants were acknowledged but the timeline holds {grants} lock_acquired events"
        ));
    }
    Ok(grants as f64 / commits.max(1) as f64)
}

fn scen_lock(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(5000);
    let files = o.paths.unwrap_or(1000);
    let mut d = Daemon::start(sync)?;
    let paths = lock_files(&d, files)?;
    let cwd = d.root.clone();
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: lock", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;
    let mut acquire = Vec::with_capacity(n);
    let mut release = Vec::with_capacity(n);
    let mut cpu0 = d.cpu_secs();
    for i in 0..WARMUP + n {
        if i == WARMUP {
            cpu0 = d.cpu_secs();
        }
        let p = &paths[i % files];
        let a = c
            .timed(acquire_req(&aid, p, &cwd, LockWait::NoWait))
            .map_err(|e| format!("acquire {p}: {e}"))?;
        let r = c
            .timed(release_req(&aid, p, &cwd))
            .map_err(|e| format!("release {p}: {e}"))?;
        if i >= WARMUP {
            acquire.push(a);
            release.push(r);
        }
    }
    let cpu = d.cpu_secs() - cpu0;
    drop(c);
    let per_commit = check_grants(&d, std::slice::from_ref(&aid), (WARMUP + n) as u64)?;
    d.stop()?;
    // The issue's targets are for synchronous=normal; full is reported beside it.
    let goals = (sync == "normal").then_some((Goal::AtMost(300.0), Goal::AtMost(1000.0)));
    let acq = label("lock acquire, free file", sync);
    let rel = label("lock release", sync);
    let mut rows = latency_rows_2(&acq, &mut acquire, goals);
    rows.push(Metric::new(
        &acq,
        "daemon CPU per request (acquire or release)",
        cpu / (2 * n) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &acq,
        "grants per commit (mean)",
        per_commit,
        "",
    ));
    print_human(
        &format!(
            "lock acquire: --no-wait of a free file (released after each), 1 client, {n} pairs \
             over {files} files, synchronous={sync}"
        ),
        &rows,
    );
    let release = latency_rows_2(&rel, &mut release, goals);
    print_human(
        &format!("lock release: of the lock just granted, synchronous={sync}"),
        &release,
    );
    rows.extend(release);
    Ok(rows)
}

/// What one contending agent saw.
#[derive(Default)]
struct Contended {
    acquire: Vec<u64>,
    granted: Vec<u64>,
    release: Vec<u64>,
    grants: u64,
    conflicts: u64,
    timeouts: u64,
    deadlocks: u64,
    warm_grants: u64,
}

/// xorshift64*: a fast, good-enough generator for picking paths (no dependency).
struct Rng(u64);

impl Rng {
    fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % n
    }
}

fn scen_contention(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let clients = o.clients.unwrap_or(20);
    let files = o.paths.unwrap_or(50);
    let secs = o.duration.unwrap_or(5.0);
    let wait_ms = o.wait_ms.unwrap_or(50);
    let wait = if wait_ms == 0 {
        LockWait::NoWait
    } else {
        LockWait::Wait { ms: wait_ms }
    };
    let mut d = Daemon::start(sync)?;
    let paths = Arc::new(lock_files(&d, files)?);
    let mut setup = d.client()?;
    let sid = create_session(&mut setup, "bench: contention", true)?;
    let mut agents = Vec::new();
    for i in 0..clients {
        agents.push(running_agent(&mut setup, &sid, &format!("agent{i}"))?);
    }
    drop(setup);
    let dur = Duration::from_secs_f64(secs);
    let barrier = Arc::new(Barrier::new(clients + 1));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut handles = Vec::new();
    for (k, aid) in agents.iter().enumerate() {
        let mut c = d.client()?;
        let (aid, cwd) = (aid.clone(), d.root.clone());
        let (barrier, paths) = (barrier.clone(), paths.clone());
        let mut rng = Rng((seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
        handles.push(std::thread::spawn(move || -> Res<(Contended, f64)> {
            let mut s = Contended::default();
            // One loop: a random path, acquired with a short wait, released at once if granted.
            let mut step = |s: &mut Contended, timed: bool| -> Res {
                let p = &paths[rng.below(paths.len())];
                let (ns, result) = c.timed_try(acquire_req(&aid, p, &cwd, wait))?;
                match result {
                    Ok(()) => {
                        let r = c
                            .timed(release_req(&aid, p, &cwd))
                            .map_err(|e| format!("release {p}: {e}"))?;
                        if timed {
                            s.grants += 1;
                            s.granted.push(ns);
                            s.release.push(r);
                        } else {
                            s.warm_grants += 1;
                        }
                    }
                    Err(e) if !timed => match e.code {
                        ErrorCode::LockConflict | ErrorCode::LockTimeout => {}
                        _ => return Err(format!("acquire {p}: {}", remote(&e))),
                    },
                    Err(e) => match e.code {
                        ErrorCode::LockConflict => s.conflicts += 1,
                        ErrorCode::LockTimeout => s.timeouts += 1,
                        ErrorCode::Deadlock => s.deadlocks += 1,
                        _ => return Err(format!("acquire {p}: {}", remote(&e))),
                    },
                }
                if timed {
                    s.acquire.push(ns);
                }
                Ok(())
            };
            let mut first = Ok(());
            for _ in 0..50 {
                if let Err(e) = step(&mut s, false) {
                    first = Err(e);
                    break;
                }
            }
            barrier.wait();
            first?;
            let t0 = Instant::now();
            while t0.elapsed() < dur {
                step(&mut s, true)?;
            }
            Ok((s, t0.elapsed().as_secs_f64()))
        }));
    }
    barrier.wait();
    let (cpu0, me0) = (d.cpu_secs(), cpu_secs_of("self"));
    let mut all = Contended::default();
    let mut elapsed: f64 = 0.0;
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok((s, e))) => {
                all.acquire.extend(s.acquire);
                all.granted.extend(s.granted);
                all.release.extend(s.release);
                all.grants += s.grants;
                all.conflicts += s.conflicts;
                all.timeouts += s.timeouts;
                all.deadlocks += s.deadlocks;
                all.warm_grants += s.warm_grants;
                elapsed = elapsed.max(e);
            }
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a client thread panicked".into())),
        }
    }
    if let Some(e) = err {
        return Err(e);
    }
    let (cpu, me) = (d.cpu_secs() - cpu0, cpu_secs_of("self") - me0);
    let per_commit = check_grants(&d, &agents, all.grants + all.warm_grants)?;
    d.stop()?;
    let name = label(
        &format!("contention, {clients} agents × {files} paths"),
        sync,
    );
    let attempts = all.acquire.len() as u64;
    let mut rows = vec![
        Metric::new(&name, "durable grants/s", all.grants as f64 / elapsed, "")
            .goal(Goal::AtLeast(5000.0)),
        Metric::new(&name, "acquire attempts/s", attempts as f64 / elapsed, ""),
        Metric::new(
            &name,
            "conflicts (no-wait refusals)",
            all.conflicts as f64,
            "",
        ),
        Metric::new(&name, "timeouts", all.timeouts as f64, ""),
        Metric::new(&name, "deadlocks", all.deadlocks as f64, "").goal(Goal::AtMost(0.0)),
    ];
    all.acquire.sort_unstable();
    all.granted.sort_unstable();
    all.release.sort_unstable();
    for (what, v) in [
        ("acquire", &all.acquire),
        ("acquire, granted only", &all.granted),
        ("release", &all.release),
    ] {
        rows.push(Metric::new(
            &name,
            &format!("{what} p50"),
            pct(v, 50.0),
            "µs",
        ));
        rows.push(Metric::new(
            &name,
            &format!("{what} p99"),
            pct(v, 99.0),
            "µs",
        ));
    }
    rows.push(Metric::new(
        &name,
        "daemon CPU per grant (acquire + release)",
        cpu / all.grants.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "bench clients' CPU per grant",
        me / all.grants.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "grants per commit (mean)",
        per_commit,
        "",
    ));
    let how = match wait {
        LockWait::Wait { ms } => format!("wait ≤ {ms} ms"),
        _ => "no wait".to_string(),
    };
    print_human(
        &format!(
            "contention: {clients} agents (own client each) on {files} paths, {secs} s, acquire \
             ({how}) then release, {} grants of {attempts} attempts, synchronous={sync}",
            all.grants
        ),
        &rows,
    );
    Ok(rows)
}

fn scen_serve(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let mut d = Daemon::start(sync)?;
    populate(&d, 10, o.per_session.unwrap_or(5))?;
    println!("export MAOS_HOME={}", d.home.display());
    println!("export MAOS_SOCKET={}", d.socket.display());
    println!("export MAOS_PROJECT={}", d.project_dir.display());
    println!("export MAOS_NO_AUTOSTART=1");
    println!(
        "# maosd pid {}; press Enter (or close stdin) to stop it",
        d.pid
    );
    let _ = std::io::stdout().flush();
    let mut line = String::new();
    let _ = std::io::stdin().read_line(&mut line);
    d.stop()?;
    Ok(Vec::new())
}

// ---------------------------------------------------------------------------------------------
// Managed agents: daemon start-up with recovery, and one agent's start

/// (state, parent pid, start time in clock ticks since boot) of a process, from
/// `/proc/<pid>/stat`.
fn proc_stat(pid: u32) -> Option<(char, u32, u64)> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = text.get(text.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let state = f.first()?.chars().next()?;
    Some((state, f.get(1)?.parse().ok()?, f.get(19)?.parse().ok()?))
}

/// A process the bench keeps track of; the start time tells a reused pid apart.
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: u32,
    start: u64,
}

impl Proc {
    fn of(pid: u32) -> Option<Proc> {
        proc_stat(pid).map(|(_, _, start)| Proc { pid, start })
    }

    /// Still running: the same process, and not a zombie (what the daemon's check says too).
    fn alive(&self) -> bool {
        proc_stat(self.pid)
            .is_some_and(|(st, _, start)| start == self.start && !matches!(st, 'Z' | 'X' | 'x'))
    }

    /// SIGKILL to the process (`group`: to the process group it leads), if it still runs.
    fn kill(&self, group: bool) {
        if self.pid > 1 && self.alive() {
            let pid = self.pid as libc::pid_t;
            // SAFETY: kill has no memory preconditions; the target was checked to be ours.
            unsafe { libc::kill(if group { -pid } else { pid }, libc::SIGKILL) };
        }
    }
}

/// Wait until none of `procs` runs any more.
fn wait_gone<'a>(procs: impl Iterator<Item = &'a Proc> + Clone, within: Duration) -> Res {
    let deadline = Instant::now() + within;
    loop {
        let left = procs.clone().filter(|p| p.alive()).count();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{left} processes still run {within:?} after SIGKILL"
            ));
        }
        std::thread::sleep(Duration::from_millis(2));
    }
}

/// The agents of the `startup` scenario: the FIFO they wait on (opening it for reading blocks
/// until someone opens it for writing: no polling, no CPU while they wait) and their processes.
/// Dropped, also on an error path: they are released, and whatever still runs is killed.
struct Fleet {
    go: PathBuf,
    /// Held open read + write once released: every agent's open of the FIFO returns at once.
    released: Option<fs::File>,
    /// (agent, its supervisor)
    procs: Vec<(Proc, Proc)>,
}

impl Fleet {
    fn new(go: PathBuf) -> Res<Fleet> {
        use std::os::unix::ffi::OsStrExt;
        let c = std::ffi::CString::new(go.as_os_str().as_bytes())
            .map_err(|_| format!("{}: a NUL byte in the path", go.display()))?;
        // SAFETY: a valid NUL-terminated path.
        if unsafe { libc::mkfifo(c.as_ptr(), 0o600) } != 0 {
            let e = std::io::Error::last_os_error();
            return Err(format!("mkfifo {}: {e}", go.display()));
        }
        Ok(Fleet {
            go,
            released: None,
            procs: Vec::new(),
        })
    }

    /// Let every agent go: each ends with exit code 0.
    fn release(&mut self) -> Res {
        if self.released.is_none() {
            use std::os::unix::fs::OpenOptionsExt;
            let f = fs::OpenOptions::new()
                .read(true)
                .write(true)
                .custom_flags(libc::O_NONBLOCK)
                .open(&self.go)
                .map_err(|e| format!("{}: {e}", self.go.display()))?;
            self.released = Some(f);
        }
        Ok(())
    }

    /// Agents and supervisors that still run.
    fn alive(&self) -> usize {
        self.procs
            .iter()
            .map(|(a, s)| usize::from(a.alive()) + usize::from(s.alive()))
            .sum()
    }

    /// SIGKILL what still runs (agents' groups, then supervisors); how many there were.
    fn sweep(&self) -> usize {
        let mut left = 0;
        for (a, s) in &self.procs {
            for (p, group) in [(a, true), (s, false)] {
                if p.alive() {
                    left += 1;
                    p.kill(group);
                }
            }
        }
        left
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        let _ = self.release();
        let deadline = Instant::now() + Duration::from_secs(3);
        while self.alive() > 0 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(20));
        }
        self.sweep();
    }
}

fn show_session(c: &mut Client, session: &str) -> Res<maos_proto::SessionRecord> {
    match c.call(Request::SessionShow {
        session: Some(session.to_string()),
    })? {
        Reply::Session(s) => Ok(*s),
        _ => Err("session_show answered something else than a session".into()),
    }
}

/// Wait until every agent of `session` has its process recorded (its supervisor answered);
/// the session's record then.
fn wait_processes(
    c: &mut Client,
    session: &str,
    n: usize,
    within: Duration,
) -> Res<maos_proto::SessionRecord> {
    let deadline = Instant::now() + within;
    loop {
        let rec = show_session(c, session)?;
        if let Some(a) = rec.agents.iter().find(|a| a.state.is_terminal()) {
            return Err(format!(
                "agent {} of session {session} is {} before the bench released it",
                a.id, a.state
            ));
        }
        let started = rec.agents.iter().filter(|a| a.process.is_some()).count();
        if started == n && rec.agents.len() == n {
            return Ok(rec);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "session {session}: {started} of {n} agents have a process after {within:?}"
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// A TOML basic string (JSON's escapes are TOML's).
fn toml_str(s: &str) -> Res<String> {
    serde_json::to_string(s).map_err(|e| e.to_string())
}

/// Session `s` of the `startup` scenario: `agents` agents started at once, each waiting on the
/// FIFO `go`; the first `resumable` have a resume command (and, like all, a Claude session id),
/// so that recovery makes them resumable rather than failed when their process is gone. A
/// failed agent does not end the session (`continue`): the others stay for the next restarts.
fn startup_plan(s: usize, agents: usize, resumable: usize, go: &Path) -> Res<String> {
    let mut t = String::new();
    let _ = writeln!(
        t,
        "objective = {}\nstrategy = \"parallel\"\n\n[failure]\npolicy = \"continue\"",
        toml_str(&format!("bench: startup session {s}"))?
    );
    // Supervisors whose daemon is gone give up reporting after 30 s, not 10 minutes.
    let env = format!(
        "env = {{ GO = {}, MAOS_SUPERVISE_REPORT_SECS = \"30\" }}",
        toml_str(&go.to_string_lossy())?
    );
    for a in 0..agents {
        let name = format!("a{a:02}");
        // `timeout`: should the bench die without releasing them, they end within the hour.
        let argv = serde_json::to_string(&[
            "timeout",
            "3600",
            "sh",
            "-c",
            ": < \"$GO\"",
            name.as_str(),
            "{claude_session_id}",
        ])
        .map_err(|e| e.to_string())?;
        let _ = writeln!(
            t,
            "\n[[agent]]\nname = \"{name}\"\ntask = \"wait until the bench releases it\"\n\
             command = {argv}\n{env}"
        );
        if a < resumable {
            let _ = writeln!(t, "resume_command = {argv}");
        }
    }
    Ok(t)
}

/// Unix time in µs of a log line's leading RFC 3339 UTC timestamp
/// (`2025-01-02T03:04:05.678901Z ...`).
fn log_line_us(line: &str) -> Option<i64> {
    let ts = line.split_whitespace().next()?.strip_suffix('Z')?;
    let (date, time) = ts.split_once('T')?;
    let mut d = date.splitn(3, '-').map(|v| v.parse::<i64>().ok());
    let (y, m, day) = (d.next()??, d.next()??, d.next()??);
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let mut t = hms.splitn(3, ':').map(|v| v.parse::<i64>().ok());
    let (hh, mm, ss) = (t.next()??, t.next()??, t.next()??);
    let frac_us = format!("{frac:0<6}").get(..6)?.parse::<i64>().ok()?;
    // Days from 1970-01-01 to the civil date (Howard Hinnant's algorithm).
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    Some(((days * 86_400 + hh * 3600 + mm * 60 + ss) * 1_000_000) + frac_us)
}

/// From the daemon's log: ms from `since` (Unix µs) to the first line at or after it that
/// contains each of `marks` (None where there is no such line).
fn log_marks(d: &Daemon, since_us: i64, marks: &[&str]) -> Vec<Option<f64>> {
    let text = fs::read_to_string(d.home.join("logs").join("maosd.log")).unwrap_or_default();
    marks
        .iter()
        .map(|m| {
            text.lines()
                .filter(|l| l.contains(m))
                .filter_map(log_line_us)
                .find(|&us| us >= since_us)
                .map(|us| (us - since_us) as f64 / 1000.0)
        })
        .collect()
}

fn unix_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// One timed restart.
struct Restart {
    /// Spawn to the socket accepting a connection.
    accept: Duration,
    /// Spawn to the first answer of a project request.
    answer: Duration,
    /// When it was spawned (Unix µs), for the daemon's log.
    spawned_us: i64,
}

/// Spawn `maosd` (its predecessor was killed) and time it: connect until the socket accepts,
/// then a `ps` of the project, which the daemon answers once the project is open and its
/// recovery committed.
fn restart_timed(d: &mut Daemon, sync: &str) -> Res<Restart> {
    let spawned_us = unix_us();
    let t0 = Instant::now();
    d.spawn(sync)?;
    let deadline = t0 + Duration::from_secs(60);
    let mut c = loop {
        match d.client() {
            Ok(c) => break c,
            Err(e) => {
                if let Some(child) = d.child.as_mut()
                    && let Ok(Some(status)) = child.try_wait()
                {
                    d.child = None;
                    return Err(format!("maosd exited at start ({status})"));
                }
                if Instant::now() > deadline {
                    return Err(format!("maosd accepted no connection within 60 s: {e}"));
                }
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    };
    let accept = t0.elapsed();
    loop {
        let (_, result) = c.timed_try(Request::Ps { all: false })?;
        match result {
            Ok(()) => break,
            Err(e)
                if matches!(e.code, ErrorCode::ShuttingDown | ErrorCode::Unavailable)
                    && Instant::now() < deadline =>
            {
                std::thread::sleep(Duration::from_millis(1));
            }
            Err(e) => return Err(format!("the first ps after the restart: {}", remote(&e))),
        }
    }
    Ok(Restart {
        accept,
        answer: t0.elapsed(),
        spawned_us,
    })
}

/// (running, resumable, failed, other) agents of the project's live sessions.
fn agent_counts(c: &mut Client) -> Res<[usize; 4]> {
    let Reply::Ps(list) = c.call(Request::Ps { all: false })? else {
        return Err("ps answered something else".into());
    };
    let mut n = [0; 4];
    for a in list.iter().flat_map(|s| &s.agents) {
        n[match a.state {
            AgentState::Running => 0,
            AgentState::Resumable => 1,
            AgentState::Failed => 2,
            _ => 3,
        }] += 1;
    }
    Ok(n)
}

/// How long the `startup` scenario's default fill may take.
const FILL_BUDGET: Duration = Duration::from_secs(90);

/// Toggle every agent of every toggler twice per round, `rounds` rounds, all togglers at once;
/// with a `budget`, a toggler starts no new round once it is spent, so every agent is still
/// toggled an even number of times. (toggle events acknowledged, seconds.)
fn fill_even(togglers: Vec<Toggler>, rounds: usize, budget: Option<Duration>) -> Res<(u64, f64)> {
    let barrier = Arc::new(Barrier::new(togglers.len() + 1));
    let handles: Vec<_> = togglers
        .into_iter()
        .map(|mut t| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Res<u64> {
                barrier.wait();
                let t0 = Instant::now();
                let per_round = 2 * t.agents.len();
                let mut n = 0;
                for _ in 0..rounds {
                    if budget.is_some_and(|b| t0.elapsed() >= b) {
                        break;
                    }
                    for _ in 0..per_round {
                        t.step()?;
                    }
                    n += per_round as u64;
                }
                Ok(n)
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let mut total = 0;
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(n)) => total += n,
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a client thread panicked".into())),
        }
    }
    match err {
        Some(e) => Err(e),
        None => Ok((total, t0.elapsed().as_secs_f64())),
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn scen_startup(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 100;
    const AGENTS: usize = 20;
    let events_per_session = o.events.unwrap_or(10_000);
    // Killed with their supervisors while the daemon is down: a quarter of each session's
    // agents, the first RESUMABLE of which can be resumed.
    const KILLED: usize = AGENTS / 4;
    const RESUMABLE: usize = 2;
    const RUNS: usize = 5;
    let clients = o.clients.unwrap_or(20);
    if !(SESSIONS * AGENTS).is_multiple_of(clients) {
        return Err(format!(
            "--clients {clients} does not divide {} agents evenly",
            SESSIONS * AGENTS
        ));
    }
    let mut d = Daemon::start(sync)?;
    // Declared after the daemon, so dropped before it: the agents are released first.
    let mut fleet = Fleet::new(d.dir.join("go"))?;
    let mut c = d.client()?;

    // Set-up, not timed. One session at a time: 2,000 supervisors spawned at once would not
    // all answer within the daemon's start timeout on a small machine.
    let t = Instant::now();
    let mut pairs = Vec::with_capacity(SESSIONS * AGENTS);
    let mut doomed = Vec::new();
    for s in 0..SESSIONS {
        let reply = c.call(Request::SessionFromPlan {
            path: format!("bench-startup-{s:03}.toml"),
            text: startup_plan(s, AGENTS, RESUMABLE, &fleet.go)?,
            start: true,
        })?;
        let Reply::Session(rec) = reply else {
            return Err("session_from_plan answered something else than a session".into());
        };
        let sid = rec.id.to_string();
        let rec = wait_processes(&mut c, &sid, AGENTS, Duration::from_secs(60))?;
        for (k, a) in rec.agents.iter().enumerate() {
            let pid = a.process.as_ref().map_or(0, |p| p.pid);
            // The supervisor is the agent's parent.
            let (agent, sup) = proc_stat(pid)
                .and_then(|(_, ppid, start)| Some((Proc { pid, start }, Proc::of(ppid)?)))
                .ok_or_else(|| format!("agent {} (pid {pid}) is not running", a.id))?;
            fleet.procs.push((agent, sup));
            if k < KILLED {
                doomed.push((agent, sup));
            }
            pairs.push((sid.clone(), a.id.to_string(), false));
        }
    }
    let launch_secs = t.elapsed().as_secs_f64();

    // The events: every agent paused and resumed, the same number of times each (an even
    // number: they all end running), by `clients` clients at once. By default the fill stops
    // after FILL_BUDGET (between two rounds, so the count stays even) and the total reached is
    // reported; an explicit --events is filled in full.
    let per_agent = (events_per_session / AGENTS).next_multiple_of(2);
    let budget = o.events.is_none().then_some(FILL_BUDGET);
    let mut owned: Vec<Vec<_>> = (0..clients).map(|_| Vec::new()).collect();
    for (k, p) in pairs.into_iter().enumerate() {
        owned[k % clients].push(p);
    }
    let togglers = owned
        .into_iter()
        .map(|agents| {
            Ok(Toggler {
                client: d.client()?,
                agents,
                next: 0,
            })
        })
        .collect::<Res<Vec<_>>>()?;
    let (toggles, fill_secs) = fill_even(togglers, per_agent / 2, budget)?;
    let cut = toggles < (SESSIONS * AGENTS * per_agent) as u64;
    let Reply::Daemon(status) = c.call_daemon(Request::DaemonStatus)? else {
        return Err("daemon_status answered something else".into());
    };
    let events = status
        .projects
        .iter()
        .find(|p| p.root == d.root)
        .map_or(0, |p| p.last_seq);
    drop(c);
    // Let the background WAL checkpoint run once, as it would on a daemon up for a while.
    std::thread::sleep(Duration::from_millis(1500));
    let db = d.db_bytes();
    let wal = d.project_file_bytes("maos.db-wal");

    // The crash: the daemon, then a quarter of the agents with their supervisors (first, so
    // that no exit is recorded or reported).
    d.kill9()?;
    for (_, sup) in &doomed {
        sup.kill(false);
    }
    wait_gone(doomed.iter().map(|p| &p.1), Duration::from_secs(10))?;
    for (agent, _) in &doomed {
        agent.kill(true);
    }
    wait_gone(doomed.iter().map(|p| &p.0), Duration::from_secs(10))?;

    let mut runs = Vec::with_capacity(RUNS);
    let mut counts = [0; 4];
    let mut marks = Vec::new();
    let mut warm_ps = f64::NAN;
    for run in 0..RUNS {
        if run > 0 {
            // The previous daemon settles (its background checkpoint, checkpoint.json files),
            // then crashes again: it recovers the same sessions, with nothing more to apply.
            std::thread::sleep(Duration::from_millis(1500));
            d.kill9()?;
        }
        let r = restart_timed(&mut d, sync)?;
        if run == 0 {
            let mut c = d.client()?;
            counts = agent_counts(&mut c)?;
            // What the request itself costs once the project is open (not decoded).
            let mut warm = (0..5)
                .map(|_| {
                    c.timed(Request::Ps { all: false })
                        .map(|ns| ns as f64 / 1e6)
                })
                .collect::<Res<Vec<f64>>>()?;
            warm_ps = median(&mut warm);
            marks = log_marks(
                &d,
                r.spawned_us,
                &[
                    "maosd ready",
                    "project opened",
                    "recovered managed sessions",
                ],
            );
        }
        runs.push(r);
    }

    // Release the agents; each ends with 0, its supervisor reports it, the daemon completes it.
    fleet.release()?;
    let mut c = d.client()?;
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let [running, ..] = agent_counts(&mut c)?;
        if running == 0 {
            break;
        }
        if Instant::now() > deadline {
            return Err(format!(
                "{running} agents still run 60 s after they were released"
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    drop(c);
    // Supervisors end once the daemon acknowledged their report.
    let deadline = Instant::now() + Duration::from_secs(20);
    while fleet.alive() > 0 && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    let left = fleet.sweep();
    d.stop()?;

    let expected = [
        SESSIONS * (AGENTS - KILLED),
        SESSIONS * RESUMABLE,
        SESSIONS * (KILLED - RESUMABLE),
        0,
    ];
    let cut_note = if cut {
        format!(
            " (fill cut at {} s; {} aimed)",
            FILL_BUDGET.as_secs(),
            group_thousands((SESSIONS * events_per_session) as i64)
        )
    } else {
        String::new()
    };
    let name = label(
        &format!(
            "startup, {SESSIONS} sessions × {AGENTS} agents, {} events{cut_note}",
            group_thousands(events as i64)
        ),
        sync,
    );
    let mut answers: Vec<f64> = runs.iter().map(|r| ms(r.answer)).collect();
    let first = &runs[0];
    let mut rows = vec![
        Metric::new(
            &name,
            "restart 1 (full recovery): spawn to first answer",
            ms(first.answer),
            "ms",
        )
        .goal(Goal::AtMost(200.0)),
        Metric::new(
            &name,
            "restart 1: spawn to socket accepting",
            ms(first.accept),
            "ms",
        ),
    ];
    for (what, v) in [
        "restart 1: spawn to `maosd ready` (log)",
        "restart 1: spawn to project loaded (log)",
        "restart 1: spawn to recovery computed (log)",
    ]
    .into_iter()
    .zip(&marks)
    {
        if let Some(v) = v {
            rows.push(Metric::new(&name, what, *v, "ms"));
        }
    }
    let max = answers.iter().copied().fold(0.0, f64::max);
    rows.extend([
        Metric::new(
            &name,
            &format!("all {RUNS} restarts: spawn to first answer, median"),
            median(&mut answers),
            "ms",
        ),
        Metric::new(&name, &format!("all {RUNS} restarts: max"), max, "ms"),
        Metric::new(
            &name,
            "`ps` of the open project, warm (in the first answer)",
            warm_ps,
            "ms",
        ),
        Metric::new(
            &name,
            "restart 1: agents re-adopted (running)",
            counts[0] as f64,
            "",
        ),
        Metric::new(
            &name,
            "restart 1: agents made resumable",
            counts[1] as f64,
            "",
        ),
        Metric::new(&name, "restart 1: agents failed", counts[2] as f64, ""),
        Metric::new(&name, "events on disk at the crash", events as f64, ""),
        Metric::new(
            &name,
            "database + WAL at the crash",
            db as f64 / 1048576.0,
            "MiB",
        ),
        Metric::new(&name, "… of which WAL", wal as f64 / 1048576.0, "MiB"),
        Metric::new(
            &name,
            "set-up: fill rate (pause/resume of managed agents)",
            toggles as f64 / fill_secs,
            "events/s",
        ),
    ]);
    print_human(
        &format!(
            "startup: {SESSIONS} managed sessions × {AGENTS} live agents and {} events on \
             disk (agents started in {launch_secs:.1} s, {} toggle events in {:.1} s); maosd \
             killed -9 and {} agents killed with their supervisors; spawn of maosd to the first \
             answer of a project `ps` (the project's recovery committed), {RUNS} restarts \
             (killed -9 each), synchronous={sync}",
            group_thousands(events as i64),
            group_thousands(toggles as i64),
            fill_secs,
            doomed.len()
        ),
        &rows,
    );
    let spans: Vec<String> = runs
        .iter()
        .map(|r| format!("{:.1}/{:.1}", ms(r.accept), ms(r.answer)))
        .collect();
    println!(
        "\n  each restart, socket accepting / first answer (ms): {}",
        spans.join(", ")
    );
    if counts == expected {
        println!(
            "  checked: restart 1 re-adopted every live agent, and made each killed one \
             resumable or failed as its plan allows"
        );
    } else {
        println!(
            "  WARNING: after restart 1 the daemon shows {counts:?} agents (running, resumable, \
             failed, other); expected {expected:?}"
        );
    }
    if left > 0 {
        println!("  WARNING: {left} agents or supervisors still ran after the release; killed");
    } else {
        println!("  checked: every agent and supervisor ended after the release");
    }
    Ok(rows)
}

/// `--agents` agents (default 200), each `true`, run one after the other by the daemon: from
/// the decision to start one (`agent_started`) to its pid committed (`agent_process_started`),
/// which spans the commit, spawning `maosd supervise`, its fork/exec of the agent and its
/// answer, read from the timeline.
fn scen_agent_start(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.agents.unwrap_or(200);
    let mut d = Daemon::start(sync)?;
    let mut c = d.client()?;
    let mut text = String::from("objective = \"bench: agent start\"\nstrategy = \"sequential\"\n");
    for a in 0..n {
        let _ = writeln!(
            text,
            "\n[[agent]]\nname = \"a{a:04}\"\ntask = \"start and exit at once\"\n\
             command = [\"true\"]"
        );
    }
    let cpu0 = d.cpu_secs();
    let t = Instant::now();
    let reply = c.call(Request::SessionFromPlan {
        path: "bench-agent-start.toml".into(),
        text,
        start: true,
    })?;
    let Reply::Session(rec) = reply else {
        return Err("session_from_plan answered something else than a session".into());
    };
    let sid = rec.id.to_string();
    let within = Duration::from_secs(30) + Duration::from_millis(100) * n as u32;
    // Polled with a small read of the timeline: the session's record (every agent with its
    // plan) is too big to ask for every few milliseconds without loading the daemon.
    let ended = ["session_completed", "session_failed", "session_cancelled"];
    loop {
        let Reply::Events(end) = c.call(Request::Events {
            filter: maos_proto::EventFilter {
                session: Some(sid.clone()),
                types: ended.iter().map(|k| k.to_string()).collect(),
                ..Default::default()
            },
            limit: Some(1),
        })?
        else {
            return Err("events answered something else".into());
        };
        if !end.is_empty() {
            break;
        }
        if t.elapsed() > within {
            let rec = show_session(&mut c, &sid)?;
            let done = rec
                .agents
                .iter()
                .filter(|a| a.state == AgentState::Completed)
                .count();
            return Err(format!(
                "{done} of {n} agents completed in {within:?}; the session is {}",
                rec.state
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu = d.cpu_secs() - cpu0;
    let rec = show_session(&mut c, &sid)?;
    if rec.state != maos_core::SessionState::Completed {
        let why: Vec<String> = rec.errors.iter().map(|e| format!("{e:?}")).collect();
        return Err(format!(
            "the session ended {}: {}",
            rec.state,
            why.join("; ")
        ));
    }
    let kinds = [
        "agent_started",
        "agent_process_started",
        "agent_process_exited",
    ];
    let Reply::Events(events) = c.call(Request::Events {
        filter: maos_proto::EventFilter {
            session: Some(sid.clone()),
            types: kinds.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        },
        limit: None,
    })?
    else {
        return Err("events answered something else".into());
    };
    drop(c);
    d.stop()?;
    // Per agent, the first of each kind (µs since the epoch).
    let mut at: std::collections::HashMap<String, [Option<i64>; 3]> =
        std::collections::HashMap::new();
    for e in &events {
        let (Some(a), Some(k)) = (&e.agent_id, kinds.iter().position(|k| *k == e.kind)) else {
            continue;
        };
        at.entry(a.to_string()).or_default()[k].get_or_insert(e.ts.timestamp_micros());
    }
    let ns = |from: Option<i64>, to: Option<i64>| -> Option<u64> {
        Some((to? - from?).max(0) as u64 * 1000)
    };
    // The supervisor's own line in the agent's output log, written just before it spawns the
    // agent, splits the span: daemon commit + supervisor exec | spawn + answer + commit.
    let agents_dir = d
        .home
        .join("projects")
        .join(maos_proto::paths::workspace_hash(Path::new(&d.root)))
        .join("agents");
    let spawning = |agent: &str| -> Option<i64> {
        let log = fs::read_to_string(agents_dir.join(agent).join("output.log")).ok()?;
        log.lines()
            .find_map(|l| l.strip_prefix("--- maos: start "))
            .and_then(log_line_us)
    };
    let mut sup_up = Vec::new();
    let mut sup_answer = Vec::new();
    for (a, v) in &at {
        let s = spawning(a);
        sup_up.extend(ns(v[0], s));
        sup_answer.extend(ns(s, v[1]));
    }
    sup_up.sort_unstable();
    sup_answer.sort_unstable();
    let mut start: Vec<u64> = at.values().filter_map(|v| ns(v[0], v[1])).collect();
    let mut life: Vec<u64> = at.values().filter_map(|v| ns(v[1], v[2])).collect();
    if start.len() != n || life.len() != n {
        return Err(format!(
            "the timeline has start and pid of {} and pid and exit of {} of {n} agents",
            start.len(),
            life.len()
        ));
    }
    start.sort_unstable();
    life.sort_unstable();
    let span = match (rec.started_at, rec.ended_at) {
        (Some(a), Some(b)) => (b.timestamp_micros() - a.timestamp_micros()) as f64 / 1e6,
        _ => wall,
    };
    let name = label(&format!("agent start, {n} agents `true` in sequence"), sync);
    let p = |v: &[u64], q: f64| pct(v, q) / 1000.0;
    let rows = vec![
        Metric::new(
            &name,
            "start decided → pid committed, p50",
            p(&start, 50.0),
            "ms",
        )
        .goal(Goal::AtMost(10.0)),
        Metric::new(
            &name,
            "start decided → pid committed, p99",
            p(&start, 99.0),
            "ms",
        ),
        Metric::new(
            &name,
            "start decided → pid committed, max",
            p(&start, 100.0),
            "ms",
        ),
        Metric::new(
            &name,
            "… decided → supervisor about to fork the agent (its log), p50",
            p(&sup_up, 50.0),
            "ms",
        ),
        Metric::new(
            &name,
            "… supervisor about to fork → pid committed, p50",
            p(&sup_answer, 50.0),
            "ms",
        ),
        Metric::new(
            &name,
            "pid committed → exit applied, p50 (exit.json + report)",
            p(&life, 50.0),
            "ms",
        ),
        Metric::new(&name, "agents/s, whole session", n as f64 / span, ""),
        Metric::new(&name, "daemon CPU per agent", cpu / n as f64 * 1e3, "ms"),
    ];
    print_human(
        &format!(
            "agent-start: a plan of {n} agents (`true`), strategy sequential, run by the daemon \
             through `maosd supervise`; session done in {span:.2} s ({wall:.2} s seen by the \
             bench); spans from the timeline, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

// ---------------------------------------------------------------------------------------------
// Socket activation: what the first command pays when the socket starts the daemon

const ACTIVATE: &str = "systemd-socket-activate";

/// `systemd-socket-activate` on PATH, or one line saying it is missing.
fn find_activate() -> Res<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    std::env::var_os("PATH")
        .iter()
        .flat_map(|p| std::env::split_paths(p).collect::<Vec<_>>())
        .map(|dir| dir.join(ACTIVATE))
        .find(|p| fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0))
        .ok_or_else(|| {
            format!(
                "activation needs {ACTIVATE} (systemd's tool, in the systemd package), which is \
                 not on PATH"
            )
        })
}

/// One `systemd-socket-activate` holding the bench's socket: on the first connection it execs
/// `maosd` in place (same pid), which serves that connection from the socket's backlog. Killed
/// (SIGKILL, whether still the activator or already maosd) and reaped when dropped, so an
/// error path leaves nothing running.
struct Activator {
    child: Option<Child>,
    pid: u32,
    /// Its stderr line by line, each with the Unix µs at which it was read.
    lines: mpsc::Receiver<(i64, String)>,
    /// The lines read so far, for error messages.
    seen: Vec<String>,
}

impl Activator {
    /// Start it on the daemon's socket and home, and wait until it listens (it says so on
    /// stderr once the socket is bound).
    fn start(tool: &Path, d: &Daemon, sync: &str) -> Res<Activator> {
        let mut cmd = Command::new(tool);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe. The setting survives the exec into maosd:
            // an interrupted run leaves neither the activator nor its daemon behind.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let mut child = cmd
            .arg("-l")
            .arg(&d.socket)
            // It passes the daemon only PATH, HOME, USER, TERM and what --setenv names.
            .arg(format!("--setenv=MAOS_HOME={}", d.home.display()))
            .arg("--setenv=MAOS_LOG=maosd=debug")
            .arg(d.bin_dir.join("maosd"))
            .args(["--synchronous", sync])
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", tool.display()))?;
        let stderr = child.stderr.take();
        let (tx, lines) = mpsc::channel();
        let mut a = Activator {
            pid: child.id(),
            child: Some(child),
            lines,
            seen: Vec::new(),
        };
        let stderr = stderr.ok_or("no pipe for the activator's stderr")?;
        // Ends at EOF, once the activator (or the maosd it became) has exited.
        std::thread::spawn(move || {
            use std::io::BufRead;
            for line in BufReader::new(stderr).lines() {
                let Ok(line) = line else { break };
                if tx.send((unix_us(), line)).is_err() {
                    break;
                }
            }
        });
        a.wait_for("Listening on", Duration::from_secs(10))?;
        Ok(a)
    }

    /// The Unix µs at which a line of its stderr holding `needle` was read.
    fn wait_for(&mut self, needle: &str, within: Duration) -> Res<i64> {
        let deadline = Instant::now() + within;
        loop {
            match self
                .lines
                .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            {
                Ok((us, line)) => {
                    let hit = line.contains(needle);
                    self.seen.push(line);
                    if hit {
                        return Ok(us);
                    }
                }
                Err(mpsc::RecvTimeoutError::Timeout) => {
                    return Err(format!(
                        "{ACTIVATE} printed no {needle:?} within {within:?}{}",
                        self.said()
                    ));
                }
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    let status = self
                        .child
                        .as_mut()
                        .and_then(|c| c.try_wait().ok().flatten());
                    let how =
                        status.map_or("closed its stderr".into(), |s| format!("exited ({s})"));
                    return Err(format!(
                        "{ACTIVATE} {how} before printing {needle:?}{}",
                        self.said()
                    ));
                }
            }
        }
    }

    /// What it printed so far, for an error message.
    fn said(&mut self) -> String {
        while let Ok((_, line)) = self.lines.try_recv() {
            self.seen.push(line);
        }
        if self.seen.is_empty() {
            String::new()
        } else {
            format!(": {}", self.seen.join(" | "))
        }
    }

    /// Reap the maosd it became, which was asked to stop; killed if it has not exited within
    /// `within`.
    fn reap(&mut self, within: Duration) -> Res {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let deadline = Instant::now() + within;
        loop {
            match child.try_wait() {
                Ok(Some(s)) if s.success() => return Ok(()),
                Ok(Some(s)) => {
                    let (pid, said) = (self.pid, self.said());
                    return Err(format!(
                        "the socket-activated maosd (pid {pid}) exited with {s}{said}"
                    ));
                }
                Ok(None) if Instant::now() < deadline => {
                    std::thread::sleep(Duration::from_millis(1))
                }
                _ => {
                    let _ = child.kill();
                    let _ = child.wait();
                    return Err(format!(
                        "the socket-activated maosd (pid {}) still ran {within:?} after `maos \
                         daemon stop`; killed it",
                        self.pid
                    ));
                }
            }
        }
    }
}

impl Drop for Activator {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

/// SIGKILLs `pid` unless disarmed within `within`, so that a stuck round (a daemon that never
/// answers, and with it a client that waits for ever) ends in an error instead of a hang.
/// `pid` must be an unreaped child for as long as the watchdog is armed, so it cannot be reused.
struct Watchdog {
    cancel: Option<mpsc::Sender<()>>,
    thread: Option<std::thread::JoinHandle<bool>>,
}

impl Watchdog {
    fn arm(pid: u32, within: Duration) -> Watchdog {
        let (cancel, rx) = mpsc::channel::<()>();
        let thread = std::thread::spawn(move || {
            let fire = rx.recv_timeout(within) == Err(mpsc::RecvTimeoutError::Timeout);
            if fire {
                // SAFETY: kill has no memory preconditions; `pid` is an unreaped child of ours.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
            fire
        });
        Watchdog {
            cancel: Some(cancel),
            thread: Some(thread),
        }
    }

    /// Stop it; whether it had fired.
    fn disarm(&mut self) -> bool {
        self.cancel.take();
        self.thread
            .take()
            .is_some_and(|t| t.join().unwrap_or(false))
    }
}

impl Drop for Watchdog {
    fn drop(&mut self) {
        self.disarm();
    }
}

/// How long one round (activation, two commands, stop) may take before it is killed.
const ROUND_LIMIT: Duration = Duration::from_secs(60);

/// One round's measurements.
struct ActivationRound {
    /// Unix µs just before the first `maos ps` was spawned.
    spawned_us: i64,
    /// Whole-process times (ns): the first command (daemon started by the socket), the second.
    cold: u64,
    warm: u64,
    /// When the activator's "Execing" line was read (Unix µs), if it printed one.
    exec_us: Option<i64>,
}

/// Runs one `maos` command to its end: (Unix µs at its spawn, ns to its exit).
type RunMaos<'a> = dyn Fn(&[&str]) -> Res<(i64, u64)> + 'a;

/// `maos ps` as the first command after the activator took the socket, `maos ps` again, a
/// check that the daemon that answered is the one the activator exec'ed, then `maos daemon
/// stop`.
fn activation_round(
    a: &mut Activator,
    d: &Daemon,
    run: &RunMaos,
    look_for_exec: bool,
) -> Res<ActivationRound> {
    let (spawned_us, cold) = run(&["ps"])?;
    let (_, warm) = run(&["ps"])?;
    let mut c = d.client()?;
    let Reply::Daemon(status) = c.call_daemon(Request::DaemonStatus)? else {
        return Err("daemon_status answered something else".into());
    };
    drop(c);
    if status.pid != a.pid || status.started_by != maos_proto::StartedBy::Systemd {
        return Err(format!(
            "the daemon that answered is pid {} started by {:?}, not the maosd {ACTIVATE} \
             exec'ed (pid {})",
            status.pid, status.started_by, a.pid
        ));
    }
    // Printed before the exec, so it is in the pipe already unless this version says nothing.
    let exec_us = if look_for_exec {
        a.wait_for("Execing", Duration::from_secs(1)).ok()
    } else {
        None
    };
    run(&["daemon", "stop"])?;
    Ok(ActivationRound {
        spawned_us,
        cold,
        warm,
        exec_us,
    })
}

/// The value of `key=` in a log line (`ms=5.99`).
fn log_field(line: &str, key: &str) -> Option<f64> {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(key)?.strip_prefix('='))
        .and_then(|v| v.parse().ok())
}

/// What a user pays for socket activation: whole-process `maos ps` as the first command after
/// `systemd-socket-activate` took the socket (it execs maosd on the connection; maosd opens the
/// project's database and answers), against the same command once that daemon runs. The
/// project (20 sessions) is made through a normally started daemon first. Every round starts
/// a fresh activator and ends with `maos daemon stop`; files stay in the page cache, so "cold"
/// is a cold process, not a cold disk.
fn scen_activation(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 20;
    let tool = find_activate()?;
    let rounds = o.requests.unwrap_or(30);
    let per = o.per_session.unwrap_or(5);
    let mut d = Daemon::start(sync)?;
    populate(&d, SESSIONS, per)?;
    d.stop()?;
    let maos = client_bin(&d);
    if !maos.is_file() {
        return Err(format!(
            "{} not found: build the workspace's binaries",
            maos.display()
        ));
    }
    // The clients' stderr (empty unless one fails: then it says why).
    let errs = d.dir.join("client.stderr");
    let err_file = fs::File::create(&errs).map_err(|e| format!("{}: {e}", errs.display()))?;
    let run = |args: &[&str]| -> Res<(i64, u64)> {
        // MAOS_NO_AUTOSTART (set by `command`): only the socket may start a daemon.
        let mut cmd = d.command(&maos);
        cmd.args(args)
            .env("MAOS_PROJECT", &d.project_dir)
            .stderr(err_file.try_clone().map_err(|e| e.to_string())?);
        let at = unix_us();
        let t = Instant::now();
        let status = cmd
            .status()
            .map_err(|e| format!("cannot run {}: {e}", maos.display()))?;
        let ns = t.elapsed().as_nanos() as u64;
        if !status.success() {
            let said = fs::read_to_string(&errs).unwrap_or_default();
            let said = match said.trim() {
                "" => String::new(),
                s => format!(": {s}"),
            };
            return Err(format!(
                "`maos {}` exited with {status}{said}",
                args.join(" ")
            ));
        }
        Ok((at, ns))
    };

    // Round 0 warms the page cache and is not counted.
    let mut done = Vec::with_capacity(rounds);
    let mut look_for_exec = true;
    for round in 0..=rounds {
        let mut a = Activator::start(&tool, &d, sync)?;
        let mut dog = Watchdog::arm(a.pid, ROUND_LIMIT);
        let r = activation_round(&mut a, &d, &run, look_for_exec);
        let fired = dog.disarm();
        let r = r.map_err(|e| {
            if fired {
                format!("round {round} took more than {ROUND_LIMIT:?}, maosd was killed: {e}")
            } else {
                format!("round {round}: {e}")
            }
        })?;
        a.reap(Duration::from_secs(10))?;
        look_for_exec = r.exec_us.is_some();
        if round > 0 {
            done.push(r);
        }
    }

    // The daemon's side of each first command, from its log (and the activator's stderr):
    // the first mark at or after the round's spawn is that round's.
    let log = fs::read_to_string(d.home.join("logs").join("maosd.log")).unwrap_or_default();
    let log: Vec<(i64, &str)> = log
        .lines()
        .filter_map(|l| Some((log_line_us(l)?, l)))
        .collect();
    let mark = |since: i64, what: &str| {
        log.iter()
            .find(|(us, l)| *us >= since && l.contains(what))
            .copied()
    };
    let span = |from: i64, to: i64| (to - from).max(0) as u64 * 1000;
    let (mut to_exec, mut exec_ready, mut ready_opened, mut open_own, mut opened_exit) =
        (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
    for r in &done {
        let ready = mark(r.spawned_us, "maosd ready").map(|m| m.0);
        let opened = mark(r.spawned_us, "project opened");
        if let Some(exec) = r.exec_us {
            to_exec.push(span(r.spawned_us, exec));
            exec_ready.extend(ready.map(|ready| span(exec, ready)));
        }
        if let (Some(ready), Some((at, line))) = (ready, opened) {
            ready_opened.push(span(ready, at));
            open_own.extend(log_field(line, "ms").map(|ms| (ms * 1e6) as u64));
            opened_exit.push((r.cold as i64 - span(r.spawned_us, at) as i64).max(0) as u64);
        }
    }
    let mut cold: Vec<u64> = done.iter().map(|r| r.cold).collect();
    let mut warm: Vec<u64> = done.iter().map(|r| r.warm).collect();
    let mut ratios: Vec<f64> = done.iter().map(|r| r.cold as f64 / r.warm as f64).collect();
    let per_round: Vec<String> = done
        .iter()
        .map(|r| format!("{:.1}/{:.1}", r.cold as f64 / 1e6, r.warm as f64 / 1e6))
        .collect();
    for v in [
        &mut cold,
        &mut warm,
        &mut to_exec,
        &mut exec_ready,
        &mut ready_opened,
        &mut open_own,
        &mut opened_exit,
    ] {
        v.sort_unstable();
    }
    let name = label(
        &format!("activation, `maos ps` ({SESSIONS} sessions × {per} agents)"),
        sync,
    );
    let mut rows = vec![
        Metric::new(
            &name,
            "first command, daemon started by the socket, p50",
            pct(&cold, 50.0),
            "µs",
        ),
        Metric::new(
            &name,
            "first command, daemon started by the socket, p90",
            pct(&cold, 90.0),
            "µs",
        ),
        Metric::new(
            &name,
            "second command, daemon running (warm), p50",
            pct(&warm, 50.0),
            "µs",
        ),
        Metric::new(
            &name,
            "first / warm (p50 / p50)",
            pct(&cold, 50.0) / pct(&warm, 50.0),
            "×",
        ),
        Metric::new(
            &name,
            "first / warm, median of the rounds' ratios",
            median(&mut ratios),
            "×",
        ),
    ];
    for (what, v) in [
        (
            "… spawn → the activator execs maosd (its stderr), p50",
            &to_exec,
        ),
        (
            "… maosd exec → `maosd ready` (log): daemon start to ready, p50",
            &exec_ready,
        ),
        ("… `maosd ready` → project opened (log), p50", &ready_opened),
        (
            "… of which the project's own open time (log ms=), p50",
            &open_own,
        ),
        ("… project opened → `maos ps` exits, p50", &opened_exit),
    ] {
        if !v.is_empty() {
            rows.push(Metric::new(&name, what, pct(v, 50.0), "µs"));
        }
    }
    print_human(
        &format!(
            "activation: whole-process `maos ps` as the first command after {ACTIVATE} took the \
             socket (it execs maosd on the connection, which opens the project: {SESSIONS} \
             sessions × {per} agents), then again against the running daemon; {rounds} rounds \
             after 1 warm-up, each a fresh activator ended by `maos daemon stop`; files in the \
             page cache, synchronous={sync}"
        ),
        &rows,
    );
    println!(
        "\n  each round, first / warm command (ms): {}",
        per_round.join(", ")
    );
    println!(
        "  checked: every round's commands were answered by the maosd the activator exec'ed \
         (its pid, started_by systemd), and it stopped cleanly"
    );
    if to_exec.is_empty() {
        println!("  note: {ACTIVATE} printed no \"Execing\" line; the spans from exec are missing");
    }
    Ok(rows)
}

fn machine() -> String {
    let cpu = fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|t| {
            t.lines()
                .find_map(|l| l.strip_prefix("model name"))
                .map(|v| v.trim_start_matches([' ', '\t', ':']).trim().to_string())
        })
        .unwrap_or_else(|| "unknown CPU".into());
    let n = std::thread::available_parallelism().map_or(0, |n| n.get());
    let kernel = fs::read_to_string("/proc/sys/kernel/osrelease").unwrap_or_default();
    format!("{n} CPUs ({cpu}), Linux {}", kernel.trim())
}

type Scenario = fn(&Opts, &str) -> Res<Vec<Metric>>;

fn run(o: &Opts) -> Res {
    let one =
        |f: Scenario| -> Res<Vec<Metric>> { f(o, o.synchronous.as_deref().unwrap_or("normal")) };
    let metrics = match o.scenario.as_str() {
        "update" => one(scen_update)?,
        "create" => one(scen_create)?,
        "register" => one(scen_register)?,
        "throughput" => one(scen_throughput)?,
        "rss" => one(scen_rss)?,
        "ps" => one(scen_ps)?,
        "hook" => one(scen_hook)?,
        "hook-concurrent" => one(scen_hook_concurrent)?,
        "lock" => one(scen_lock)?,
        "contention" => one(scen_contention)?,
        "startup" => one(scen_startup)?,
        "transfer" => one(scen_transfer)?,
        "gc" => one(scen_gc)?,
        "agent-start" => one(scen_agent_start)?,
        "activation" => one(scen_activation)?,
        "serve" => one(scen_serve)?,
        "all" => {
            let syncs: Vec<&str> = match o.synchronous.as_deref() {
                Some(s) => vec![s],
                None => vec!["normal", "full"],
            };
            let mut m = Vec::new();
            for s in &syncs {
                m.extend(scen_update(o, s)?);
                m.extend(scen_create(o, s)?);
                m.extend(scen_register(o, s)?);
                m.extend(scen_throughput(o, s)?);
                m.extend(scen_lock(o, s)?);
                m.extend(scen_contention(o, s)?);
            }
            // One durability mode is enough for memory and the client's start-up cost.
            m.extend(scen_rss(o, syncs[0])?);
            m.extend(scen_ps(o, syncs[0])?);
            m.extend(scen_hook(o, syncs[0])?);
            m.extend(scen_hook_concurrent(o, syncs[0])?);
            m.extend(scen_agent_start(o, syncs[0])?);
            m.extend(scen_transfer(o, syncs[0])?);
            m.extend(scen_gc(o, syncs[0])?);
            m.extend(scen_startup(o, syncs[0])?);
            m
        }
        other => return Err(format!("unknown scenario {other:?}")),
    };
    if o.markdown && !metrics.is_empty() {
        println!("\nMachine: {}\n", machine());
        print!("{}", markdown(&metrics));
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("maos-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maos-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
