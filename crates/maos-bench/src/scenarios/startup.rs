//! Managed agents, part 1: daemon start-up with recovery. Many managed sessions with live
//! agents, the daemon and some agents killed -9, then timed restarts.

use maos_proto::req;
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maos_core::AgentState;
use maos_proto::{ErrorCode, Reply, Request};
use maos_tests::client::remote;
use maos_tests::client::{Client, Res};
use maos_tests::daemon::Daemon;
use maos_tests::procfs;

use crate::harness::{self, log_marks, unix_us};
use crate::opts::Opts;
use crate::report::{Goal, Metric, group_thousands, label, median, ms, print_human};
use crate::workload::{Toggler, fill_even, show_session};

/// A process the bench keeps track of; the start time tells a reused pid apart.
#[derive(Clone, Copy, Debug)]
struct Proc {
    pid: u32,
    start: u64,
}

impl Proc {
    fn of(pid: u32) -> Option<Proc> {
        procfs::stat(pid).map(|s| Proc {
            pid,
            start: s.start,
        })
    }

    /// Still running: the same process, and not a zombie (what the daemon's check says too).
    fn alive(&self) -> bool {
        procfs::stat(self.pid)
            .is_some_and(|s| s.start == self.start && !matches!(s.state, 'Z' | 'X' | 'x'))
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
fn restart_timed(d: &mut Daemon) -> Res<Restart> {
    let spawned_us = unix_us();
    let t0 = Instant::now();
    d.spawn()?;
    let deadline = t0 + Duration::from_secs(60);
    let mut c = loop {
        match d.client() {
            Ok(c) => break c,
            Err(e) => {
                if let Some(status) = d.exited() {
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
        let (_, result) = c.timed_try(Request::Ps(req::Ps { all: false }))?;
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
    let Reply::Ps(list) = c.call(Request::Ps(req::Ps { all: false }))? else {
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

pub fn scen_startup(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
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
    let mut d = harness::start(sync)?;
    // Declared after the daemon, so dropped before it: the agents are released first.
    let mut fleet = Fleet::new(d.env.root().join("go"))?;
    let mut c = d.client()?;

    // Set-up, not timed. One session at a time: 2,000 supervisors spawned at once would not
    // all answer within the daemon's start timeout on a small machine.
    let t = Instant::now();
    let mut pairs = Vec::with_capacity(SESSIONS * AGENTS);
    let mut doomed = Vec::new();
    for s in 0..SESSIONS {
        let reply = c.call(Request::SessionFromPlan(req::SessionFromPlan {
            path: format!("bench-startup-{s:03}.toml"),
            text: startup_plan(s, AGENTS, RESUMABLE, &fleet.go)?,
            start: true,
        }))?;
        let Reply::Session(rec) = reply else {
            return Err("session_from_plan answered something else than a session".into());
        };
        let sid = rec.id.to_string();
        let rec = wait_processes(&mut c, &sid, AGENTS, Duration::from_secs(60))?;
        for (k, a) in rec.agents.iter().enumerate() {
            let pid = a.process.as_ref().map_or(0, |p| p.pid);
            // The supervisor is the agent's parent.
            let (agent, sup) = procfs::stat(pid)
                .and_then(|s| {
                    Some((
                        Proc {
                            pid,
                            start: s.start,
                        },
                        Proc::of(s.ppid)?,
                    ))
                })
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
    let db = harness::db_bytes(&d);
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
        let r = restart_timed(&mut d)?;
        if run == 0 {
            let mut c = d.client()?;
            counts = agent_counts(&mut c)?;
            // What the request itself costs once the project is open (not decoded).
            let mut warm = (0..5)
                .map(|_| {
                    c.timed(Request::Ps(req::Ps { all: false }))
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
