//! Socket activation: what the first command pays when the socket starts the daemon.

use std::fs;
use std::io::BufReader;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

use maos_proto::{Reply, Request};
use maos_tests::client::Res;
use maos_tests::daemon::{Daemon, reap_within};

use crate::harness::{self, log_line_us, unix_us};
use crate::opts::Opts;
use crate::report::{Metric, label, median, pct, print_human};
use crate::workload::populate;

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
            .arg(&d.env.socket)
            // It passes the daemon only PATH, HOME, USER, TERM and what --setenv names.
            .arg(format!("--setenv=MAOS_HOME={}", d.env.home.display()))
            .arg("--setenv=MAOS_LOG=maosd=debug")
            .arg(harness::bin_dir()?.join("maosd"))
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
        match reap_within(&mut child, within) {
            Some(s) if s.success() => Ok(()),
            Some(s) => {
                let (pid, said) = (self.pid, self.said());
                Err(format!(
                    "the socket-activated maosd (pid {pid}) exited with {s}{said}"
                ))
            }
            None => Err(format!(
                "the socket-activated maosd (pid {}) still ran {within:?} after `maos daemon \
                 stop`; killed it",
                self.pid
            )),
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
pub fn scen_activation(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 20;
    let tool = find_activate()?;
    let rounds = o.requests.unwrap_or(30);
    let per = o.per_session.unwrap_or(5);
    let mut d = harness::start(sync)?;
    populate(&d, SESSIONS, per)?;
    d.stop()?;
    let maos = harness::client_bin()?;
    if !maos.is_file() {
        return Err(format!(
            "{} not found: build the workspace's binaries",
            maos.display()
        ));
    }
    // The clients' stderr (empty unless one fails: then it says why).
    let errs = d.env.root().join("client.stderr");
    let err_file = fs::File::create(&errs).map_err(|e| format!("{}: {e}", errs.display()))?;
    let run = |args: &[&str]| -> Res<(i64, u64)> {
        // MAOS_NO_AUTOSTART (set by `command`): only the socket may start a daemon.
        let mut cmd = d.client_command(&maos);
        cmd.args(args)
            .env("MAOS_PROJECT", &d.env.project)
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
    let log = harness::daemon_log(&d);
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
