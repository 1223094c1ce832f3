//! `maosd supervise`, the process that runs one managed agent: it prints `started <pid>
//! <start time>` at once, runs the agent leading its own process group, outlives whoever started
//! it, records how the agent ended in `exit.json`, and reports it to the daemon when one
//! listens (deleting `exit.json` once acknowledged).
//!
//! Agents are small shell scripts. A script that must wait polls for a gate file the test
//! creates (bounded, so that a failed test leaves nothing running); every wait of the test has a
//! deadline.

use std::io::{BufRead, BufReader, Read};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::mpsc;

use maos_tests::{DEADLINE, Env, Value, alive, maosd_bin, wait_until};

/// Shell that waits (at most 30 s) until the file `$1` exists.
const WAIT_FOR_GATE: &str =
    r#"i=0; while [ ! -e "$1" ] && [ $i -lt 3000 ]; do sleep 0.01; i=$((i+1)); done"#;

const CLAUDE_SESSION: &str = "3f2b6a1c-8d4e-4f5a-9b0c-1d2e3f4a5b6c";

/// `maosd supervise ... -- ARGV` for agent `agent` with its files in `dir`.
fn supervise(agent: &str, socket: &Path, project: &Path, dir: &Path, argv: &[&str]) -> Command {
    let mut cmd = Command::new(maosd_bin());
    cmd.arg("supervise")
        .args(["--agent", agent])
        .arg("--socket")
        .arg(socket)
        .arg("--project")
        .arg(project)
        .arg("--dir")
        .arg(dir)
        .arg("--cwd")
        .arg(project)
        .arg("--")
        .args(argv)
        .env("MAOS_SUPERVISE_REPORT_SECS", "1")
        .stdin(Stdio::null());
    cmd
}

/// The world of a daemon-less test: a temp dir, an agent dir inside it, a socket nobody
/// listens on, and a gate file.
struct World {
    _tmp: tempfile::TempDir,
    root: PathBuf,
    dir: PathBuf,
    socket: PathBuf,
    gate: PathBuf,
}

impl World {
    fn new() -> World {
        let tmp = tempfile::Builder::new()
            .prefix("maos-sup-")
            .tempdir()
            .expect("tempdir");
        let root = std::fs::canonicalize(tmp.path()).expect("canonical tempdir");
        World {
            dir: root.join("projects/h/agents/a1"),
            socket: root.join("nobody.sock"),
            gate: root.join("go"),
            root,
            _tmp: tmp,
        }
    }

    fn cmd(&self, argv: &[&str]) -> Command {
        supervise("a1", &self.socket, &self.root, &self.dir, argv)
    }

    fn log(&self) -> String {
        std::fs::read_to_string(self.dir.join("output.log")).unwrap_or_default()
    }

    fn exit_path(&self) -> PathBuf {
        self.dir.join("exit.json")
    }

    /// Wait for `exit.json` and parse it.
    fn exit_json(&self) -> Value {
        wait_for_exit_json(&self.exit_path())
    }
}

fn wait_for_exit_json(path: &Path) -> Value {
    let mut v = None;
    wait_until(DEADLINE, &format!("{} is written", path.display()), || {
        v = std::fs::read(path)
            .ok()
            .and_then(|b| serde_json::from_slice::<Value>(&b).ok());
        v.is_some()
    });
    let v = v.expect("exit.json");
    // It is the protocol's record, whole.
    serde_json::from_value::<maos_proto::AgentExit>(v.clone())
        .unwrap_or_else(|e| panic!("exit.json is not an AgentExit ({e}): {v}"));
    v
}

/// What the supervisor's stdout said.
enum Out {
    Line(String),
    Eof,
}

/// A supervisor started by the test; killed when dropped.
struct Supervisor {
    child: Child,
    out: mpsc::Receiver<Out>,
}

impl Supervisor {
    fn start(mut cmd: Command) -> Supervisor {
        cmd.stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn maosd supervise");
        let stdout = child.stdout.take().expect("stdout");
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let mut r = BufReader::new(stdout);
            let mut line = String::new();
            if r.read_line(&mut line).is_ok_and(|n| n > 0) {
                let _ = tx.send(Out::Line(line));
            }
            let mut rest = Vec::new();
            let _ = r.read_to_end(&mut rest);
            let _ = tx.send(Out::Eof);
        });
        Supervisor { child, out: rx }
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// The one line printed on stdout.
    fn line(&self) -> String {
        match self.out.recv_timeout(DEADLINE) {
            Ok(Out::Line(l)) => l,
            Ok(Out::Eof) => panic!("the supervisor closed stdout without a line"),
            Err(e) => panic!("no line from the supervisor within {DEADLINE:?}: {e}"),
        }
    }

    /// `started <pid> <start time>` → (pid, start time).
    fn started(&self) -> (u32, u64) {
        let line = self.line();
        let f: Vec<&str> = line.split_whitespace().collect();
        assert!(
            f.len() == 3 && f[0] == "started" && line.ends_with('\n'),
            "unexpected first line {line:?}"
        );
        (
            f[1].parse().expect("pid"),
            f[2].parse().expect("start time"),
        )
    }

    /// Stdout reaches end of file (the daemon reading it is never kept waiting).
    fn stdout_closed(&self) {
        match self.out.recv_timeout(DEADLINE) {
            Ok(Out::Eof) => {}
            Ok(Out::Line(l)) => panic!("a second line on stdout: {l:?}"),
            Err(e) => panic!("stdout not closed within {DEADLINE:?}: {e}"),
        }
    }

    fn running(&mut self) -> bool {
        self.child.try_wait().expect("try_wait").is_none()
    }

    fn finish(&mut self) -> ExitStatus {
        wait_until(DEADLINE, "the supervisor exits", || !self.running());
        self.child.wait().expect("wait")
    }
}

impl Drop for Supervisor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An agent's process group, killed when dropped (also when the test failed).
struct Group(u32);

impl Drop for Group {
    fn drop(&mut self) {
        if self.0 > 1 {
            // SAFETY: kill(2) of one process group (> 1) that the test started.
            unsafe {
                libc::kill(-(self.0 as libc::pid_t), libc::SIGKILL);
            }
        }
    }
}

fn signal_group(pgid: u32, sig: i32) {
    assert!(pgid > 1);
    // SAFETY: kill(2) of one process group (> 1) that the test started.
    let r = unsafe { libc::kill(-(pgid as libc::pid_t), sig) };
    assert_eq!(
        r,
        0,
        "kill(-{pgid}, {sig}): {}",
        std::io::Error::last_os_error()
    );
}

/// `/proc/<pid>/stat` fields after the command name: `[0]` is field 3 (state), `[1]` ppid,
/// `[2]` pgrp, `[3]` session, `[19]` start time.
#[cfg(target_os = "linux")]
fn stat(pid: u32) -> Option<Vec<String>> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let rest = text.rsplit_once(')')?.1;
    Some(rest.split_whitespace().map(str::to_string).collect())
}

#[cfg(target_os = "linux")]
fn stat_field(pid: u32, i: usize) -> String {
    stat(pid)
        .and_then(|f| f.get(i).cloned())
        .unwrap_or_else(|| panic!("no /proc/{pid}/stat"))
}

fn mode(p: &Path) -> u32 {
    std::fs::metadata(p)
        .unwrap_or_else(|e| panic!("{}: {e}", p.display()))
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn an_agent_leads_its_own_group_and_its_exit_is_recorded() {
    let w = World::new();
    let gate = w.gate.to_str().unwrap();
    let script = format!(
        r#"echo hello; {WAIT_FOR_GATE}; echo '{{"type":"result","subtype":"success","session_id":"{CLAUDE_SESSION}"}}'; exit 3"#
    );
    let mut sup = Supervisor::start(w.cmd(&["sh", "-c", &script, "sh", gate]));
    let (pid, start) = sup.started();
    let _group = Group(pid);
    // The daemon reads one line and is never kept waiting for the agent.
    sup.stdout_closed();
    assert!(alive(pid), "the agent waits for the gate");

    #[cfg(target_os = "linux")]
    {
        assert_eq!(
            stat_field(pid, 2),
            pid.to_string(),
            "the agent leads its group"
        );
        assert_eq!(stat_field(pid, 19), start.to_string(), "its start time");
        assert_eq!(stat_field(pid, 1), sup.pid().to_string(), "its supervisor");
        let me = stat_field(std::process::id(), 3);
        assert_eq!(
            stat_field(sup.pid(), 3),
            sup.pid().to_string(),
            "the supervisor leads a session of its own"
        );
        assert_ne!(stat_field(sup.pid(), 3), me);
    }
    #[cfg(not(target_os = "linux"))]
    let _ = start;

    wait_until(DEADLINE, "the agent's output reaches output.log", || {
        w.log().contains("hello\n")
    });
    assert!(!w.exit_path().exists(), "no exit before the agent ends");
    std::fs::write(&w.gate, "").unwrap();

    let exit = w.exit_json();
    assert_eq!(exit["agent"], "a1", "{exit}");
    assert_eq!(exit["pid"], pid, "{exit}");
    assert_eq!(exit["code"], 3, "{exit}");
    assert_eq!(exit["signal"], Value::Null, "{exit}");
    assert_eq!(exit["claude_session_id"], CLAUDE_SESSION, "{exit}");
    #[cfg(target_os = "linux")]
    assert_eq!(exit["start_time"], start, "{exit}");

    // Nobody listens on the socket: it gives up after MAOS_SUPERVISE_REPORT_SECS and leaves
    // exit.json for the daemon's next start.
    let status = sup.finish();
    assert!(status.success(), "{status}");
    assert!(w.exit_path().is_file(), "exit.json stays");
    assert!(!w.dir.join("exit.json.tmp").exists());
    let log = w.log();
    assert!(log.starts_with("--- maos: start "), "{log}");
    assert!(log.contains(r#"argv: ["sh", "-c", "#), "{log}");
    assert!(log.contains("exit code 3"), "{log}");
    assert!(log.contains("maosd unreachable"), "{log}");
    assert_eq!(mode(&w.dir), 0o700);
    assert_eq!(mode(&w.dir.join("output.log")), 0o600);
    assert_eq!(mode(&w.exit_path()), 0o600);
}

#[cfg(target_os = "linux")]
#[test]
fn the_supervisor_outlives_whoever_started_it() {
    let w = World::new();
    let pidfile = w.root.join("agent.pid");
    let script = format!(r#"echo $$ > "$2.tmp"; mv "$2.tmp" "$2"; {WAIT_FOR_GATE}; exit 0"#);
    let sup = w.cmd(&[
        "sh",
        "-c",
        &script,
        "sh",
        w.gate.to_str().unwrap(),
        pidfile.to_str().unwrap(),
    ]);
    // A short-lived "daemon": a shell in its own process group that runs the supervisor, and
    // whose stdout nobody reads (the supervisor's `started` line meets a closed pipe).
    let mut parent = Command::new("sh");
    parent
        .arg("-c")
        .arg(r#""$@"; echo after"#)
        .arg("sh")
        .arg(sup.get_program())
        .args(sup.get_args())
        .env("MAOS_SUPERVISE_REPORT_SECS", "1")
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .process_group(0);
    let mut parent = parent.spawn().expect("spawn the intermediate shell");
    drop(parent.stdout.take());
    let parent_pid = parent.id();
    let _parent_group = Group(parent_pid);

    let mut agent = 0u32;
    wait_until(DEADLINE, "the agent wrote its pid", || {
        agent = std::fs::read_to_string(&pidfile)
            .ok()
            .and_then(|s| s.trim().parse().ok())
            .unwrap_or(0);
        agent != 0
    });
    let _group = Group(agent);
    let supervisor: u32 = stat_field(agent, 1).parse().unwrap();
    assert_ne!(supervisor, parent_pid);
    assert_eq!(stat_field(supervisor, 1), parent_pid.to_string());
    assert_ne!(stat_field(supervisor, 2), parent_pid.to_string());

    // kill -9 the whole process group of the "daemon".
    signal_group(parent_pid, libc::SIGKILL);
    parent.wait().expect("reap the intermediate shell");
    assert!(
        alive(supervisor),
        "the supervisor survived its parent's group"
    );
    assert!(alive(agent), "and so did the agent");
    assert_ne!(
        stat_field(supervisor, 1),
        parent_pid.to_string(),
        "re-parented"
    );

    std::fs::write(&w.gate, "").unwrap();
    let exit = w.exit_json();
    assert_eq!(exit["pid"], agent, "{exit}");
    assert_eq!(exit["code"], 0, "{exit}");
    wait_until(DEADLINE, "the orphaned supervisor exits", || {
        !alive(supervisor)
    });
}

#[cfg(target_os = "linux")]
#[test]
fn a_signal_to_the_group_is_recorded_and_a_stop_is_a_pause() {
    let w = World::new();
    let mut sup = Supervisor::start(w.cmd(&["sleep", "30"]));
    let (pid, _) = sup.started();
    let _group = Group(pid);

    signal_group(pid, libc::SIGSTOP);
    wait_until(DEADLINE, "the agent is stopped", || {
        stat(pid).is_some_and(|f| f[0] == "T")
    });
    assert!(sup.running(), "a stopped agent is paused, not ended");
    assert!(!w.exit_path().exists());
    signal_group(pid, libc::SIGCONT);
    wait_until(DEADLINE, "the agent runs again", || {
        stat(pid).is_some_and(|f| f[0] != "T")
    });

    signal_group(pid, libc::SIGTERM);
    let exit = w.exit_json();
    assert_eq!(exit["signal"], libc::SIGTERM, "{exit}");
    assert_eq!(exit["code"], Value::Null, "{exit}");
    assert_eq!(exit["claude_session_id"], Value::Null, "{exit}");
    assert!(sup.finish().success());
    assert!(w.log().contains("killed by signal 15"), "{}", w.log());
}

#[test]
fn an_agent_that_cannot_start_is_recorded_as_exit_127() {
    let w = World::new();
    let mut sup = Supervisor::start(w.cmd(&["/nonexistent/maos-agent-binary", "--flag"]));
    let line = sup.line();
    assert!(
        line.starts_with("failed ") && line.contains("maos-agent-binary"),
        "{line:?}"
    );
    sup.stdout_closed();
    let exit = w.exit_json();
    assert_eq!(exit["code"], 127, "{exit}");
    assert_eq!(exit["signal"], Value::Null, "{exit}");
    assert!(sup.finish().success());
    assert!(w.log().contains("cannot start the agent"), "{}", w.log());

    // A working directory that does not exist: the same, naming it.
    let mut cmd = supervise(
        "a2",
        &w.socket,
        &w.root.join("gone"),
        &w.root.join("a2"),
        &["true"],
    );
    cmd.env("MAOS_SUPERVISE_REPORT_SECS", "0");
    let mut sup = Supervisor::start(cmd);
    let line = sup.line();
    assert!(line.starts_with("failed working directory"), "{line:?}");
    assert_eq!(
        wait_for_exit_json(&w.root.join("a2/exit.json"))["code"],
        127
    );
    assert!(sup.finish().success());

    // A bad command line: exit 2, and still one `failed` line for whoever reads stdout.
    let out = Command::new(maosd_bin())
        .args(["supervise", "--agent", "a3", "--", "true"])
        .stdin(Stdio::null())
        .output()
        .expect("run maosd supervise");
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(stdout.starts_with("failed bad arguments"), "{stdout}");
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("usage: maosd supervise"),
        "{out:?}"
    );
}

/// A session with running agents in the default project of `env`.
fn running_agents(env: &Env, n: usize) -> Vec<String> {
    env.session("managed", &[]);
    env.maos_json(&["session", "start"]);
    (0..n)
        .map(|i| {
            let a = env.agent(None, "dev", &format!("task {i}"));
            env.maos_json(&["agent", "start", &a]);
            a
        })
        .collect()
}

fn agent_record(env: &Env, id: &str) -> Value {
    let list = env.maos_json(&["agent", "list"]);
    list.as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no agent {id} in {list}"))
        .clone()
}

/// The agent here is registered and started by hand (no plan), so the daemon did not start
/// this supervisor itself; what is tested is the report, not the daemon's scheduling.
#[test]
fn the_exit_is_reported_to_the_daemon_and_exit_json_deleted() {
    let env = Env::new();
    let agents = running_agents(&env, 1);
    let agent = &agents[0];
    let root = PathBuf::from(Env::project_root(&env.project));
    let dir = env.root().join("agents").join(agent);
    let script = format!(r#"echo '{{"type":"result","session_id":"{CLAUDE_SESSION}"}}'; exit 0"#);
    let mut sup = Supervisor::start(supervise(
        agent,
        &env.socket,
        &root,
        &dir,
        &["sh", "-c", &script],
    ));
    let (pid, _) = sup.started();
    let _group = Group(pid);
    assert!(sup.finish().success());
    let log = std::fs::read_to_string(dir.join("output.log")).unwrap_or_default();
    assert!(
        !dir.join("exit.json").exists(),
        "exit.json is deleted once the daemon acknowledged it: {log}"
    );
    let a = agent_record(&env, agent);
    assert_eq!(a["state"], "completed", "{a}");
    assert_eq!(a["exit_code"], 0, "{a}");
    assert_eq!(a["external_session_id"], CLAUDE_SESSION, "{a}");
}

#[test]
fn an_unreachable_daemon_is_retried_and_a_refusal_is_not() {
    let env = Env::new();
    let agents = running_agents(&env, 1);
    let root = PathBuf::from(Env::project_root(&env.project));
    env.kill9();

    // The daemon is down when the agent ends: exit.json is written, the report retried.
    let dir = env.root().join("agents").join(&agents[0]);
    let mut cmd = supervise(&agents[0], &env.socket, &root, &dir, &["true"]);
    cmd.env("MAOS_SUPERVISE_REPORT_SECS", "60");
    let mut sup = Supervisor::start(cmd);
    let (pid, _) = sup.started();
    let _group = Group(pid);
    wait_for_exit_json(&dir.join("exit.json"));
    assert!(sup.running(), "still trying to report");
    // Any command starts the daemon again; the next attempt reaches it.
    assert_eq!(agent_record(&env, &agents[0])["id"], agents[0].as_str());
    assert!(sup.finish().success());
    assert!(!dir.join("exit.json").exists());
    assert_eq!(agent_record(&env, &agents[0])["state"], "completed");

    // An agent the daemon does not know: refused at once (no retry for the 600 s default),
    // exit.json kept, the refusal written to the log.
    let dir = env.root().join("agents/unknown");
    let mut cmd = supervise("no-such-agent", &env.socket, &root, &dir, &["true"]);
    cmd.env_remove("MAOS_SUPERVISE_REPORT_SECS");
    let mut sup = Supervisor::start(cmd);
    let (pid, _) = sup.started();
    let _group = Group(pid);
    assert!(sup.finish().success());
    assert!(dir.join("exit.json").is_file());
    let log = std::fs::read_to_string(dir.join("output.log")).unwrap();
    assert!(
        log.contains("maosd refused the exit report: not_found"),
        "{log}"
    );
}
