//! Socket activation for real: `systemd-socket-activate` (from the systemd package) holds the
//! socket and starts `maosd` on the first connection, as systemd does with `maosd.socket`.
//! The client never starts a daemon of its own here (`MAOS_NO_AUTOSTART=1`).

use std::fs;
use std::os::unix::fs::FileTypeExt;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::Duration;

use maos_tests::{DEADLINE, Env, Raw, alive, describe, maosd_bin, wait_until};

const ACTIVATE: &str = "systemd-socket-activate";

fn have_activate() -> bool {
    maos_tests::have_tool(ACTIVATE, "systemd")
}

/// One `systemd-socket-activate` listening on the test's socket, which execs `maosd` (same
/// pid) on the first connection. Its stderr goes to `log` ("Listening on ..." once bound).
struct Activator {
    child: Child,
    log: std::path::PathBuf,
}

impl Activator {
    fn start(env: &Env, extra_env: &[&str], daemon_args: &[&str]) -> Activator {
        let dir = env.socket.parent().expect("socket dir");
        fs::create_dir_all(dir).expect("socket dir");
        fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
            .expect("chmod socket dir");
        let n = fs::read_dir(env.root()).map_or(0, Iterator::count);
        let log = env.root().join(format!("activate-{n}.log"));
        let mut cmd = env.command(Path::new(ACTIVATE));
        cmd.arg("-l").arg(&env.socket);
        // systemd-socket-activate passes only PATH, HOME, USER, TERM and what -E names.
        cmd.arg(format!("--setenv=MAOS_HOME={}", env.home.display()));
        for e in extra_env {
            cmd.arg(format!("--setenv={e}"));
        }
        cmd.arg(maosd_bin()).args(daemon_args);
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(fs::File::create(&log).expect("activator log"));
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {ACTIVATE}: {e}"));
        let a = Activator { child, log };
        wait_until(DEADLINE, "systemd-socket-activate listens", || {
            fs::read_to_string(&a.log).is_ok_and(|t| t.contains("Listening on"))
        });
        a
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Wait for maosd (the exec'ed activator) to exit on its own; its exit status.
    fn wait_exit(&mut self, within: Duration) -> std::process::ExitStatus {
        let pid = self.pid();
        wait_until(within, "the socket-activated maosd exits", || {
            matches!(self.child.try_wait(), Ok(Some(_))) || !alive(pid)
        });
        self.child.wait().expect("reap the activator")
    }
}

impl Drop for Activator {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn is_socket(p: &Path) -> bool {
    fs::symlink_metadata(p).is_ok_and(|m| m.file_type().is_socket())
}

/// `maos ARGS` that must not start a daemon of its own.
fn maos_no_autostart(env: &Env, args: &[&str]) -> std::process::Output {
    let mut cmd = env.maos_cmd_in(&env.project, args);
    cmd.env("MAOS_NO_AUTOSTART", "1");
    maos_tests::run_with_timeout(cmd, DEADLINE)
}

fn json_of(env: &Env, args: &[&str]) -> serde_json::Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = maos_no_autostart(env, &all);
    assert!(out.status.success(), "maos {args:?}: {}", describe(&out));
    serde_json::from_slice(&out.stdout).expect("json")
}

#[test]
fn first_connection_starts_maosd_idle_exit_keeps_the_socket_and_the_next_connection_restarts_it() {
    if !have_activate() {
        return;
    }
    let env = Env::new();
    let mut first = Activator::start(&env, &[], &["--idle-exit", "300ms"]);
    // Nothing runs until someone connects.
    assert!(
        env.daemons().is_empty(),
        "maosd started before a connection"
    );

    // A connection held open keeps the daemon from idling out while the test looks at it,
    // however slowly the commands below run.
    let mut hold = Raw::connect(&env.socket);
    assert_eq!(
        hold.hello(),
        first.pid(),
        "the activator exec'ed maosd in place"
    );
    let out = maos_no_autostart(&env, &["session", "create", "--objective", "activated"]);
    assert!(out.status.success(), "{}", describe(&out));
    let status = json_of(&env, &["daemon", "status"]);
    assert_eq!(status["started_by"], "systemd", "{status}");
    assert_eq!(
        status["pid"].as_u64(),
        Some(u64::from(first.pid())),
        "the activator exec'ed maosd in place: {status}"
    );
    assert_eq!(status["socket"], env.socket.display().to_string());
    assert_eq!(status["idle_exit_secs"], 0.3);
    let text = maos_no_autostart(&env, &["daemon", "status"]);
    let text = String::from_utf8_lossy(&text.stdout);
    assert!(text.contains("started by   systemd"), "{text}");
    assert!(text.contains("idle exit    after 0.3s idle"), "{text}");

    // Idle: no connection, no agent. It exits by itself, cleanly, and leaves the socket.
    drop(hold);
    let code = first.wait_exit(DEADLINE);
    assert!(code.success(), "idle exit status {code}");
    assert!(
        is_socket(&env.socket),
        "maosd removed the socket that the service manager owns"
    );
    let log = fs::read_to_string(env.home.join("logs/maosd.log")).expect("daemon log");
    assert!(log.contains("idle: exiting"), "{log}");
    assert!(env.daemons().is_empty());

    // The service manager listens again (systemd keeps the socket; this tool rebinds it), and
    // the next connection starts a new daemon that has the data of the first.
    let second = Activator::start(&env, &[], &["--idle-exit", "1h"]);
    let sessions = json_of(&env, &["session", "list"]);
    assert!(
        sessions.to_string().contains("activated"),
        "the session made through the first activation: {sessions}"
    );
    let status = json_of(&env, &["daemon", "status"]);
    assert_eq!(status["pid"].as_u64(), Some(u64::from(second.pid())));
    assert_ne!(second.pid(), first.pid());

    // `maos daemon stop` stops it, says the service manager starts it again, and the socket
    // stays.
    let out = maos_no_autostart(&env, &["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("systemd starts it again"), "{text}");
    assert!(is_socket(&env.socket));
}

#[test]
fn idle_exit_is_ignored_when_maosd_binds_its_own_socket() {
    let env = Env::new();
    env.write_config("idle_exit = \"100ms\"\n");
    let out = env.maos(&["daemon", "start"]);
    assert!(out.status.success(), "{}", describe(&out));
    let pid = env.daemon_pid();
    let status = env.maos_json(&["daemon", "status"]);
    assert_eq!(status["started_by"], "client", "{status}");
    assert!(status["idle_exit_secs"].is_null(), "{status}");
    let log = fs::read_to_string(env.home.join("logs/maosd.log")).expect("daemon log");
    assert!(log.contains("idle_exit is ignored"), "{log}");
    assert!(alive(pid));
}

#[test]
fn a_bad_idle_exit_is_refused_in_one_line() {
    let env = Env::new();
    let out = maos_tests::run_with_timeout(
        {
            let mut c = env.command(&maosd_bin());
            c.args(["--foreground", "--idle-exit", "soon"]);
            c
        },
        DEADLINE,
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("--idle-exit \"soon\""), "{err}");
    assert!(!env.socket.exists(), "a refused start left a socket");
}

#[test]
fn a_socket_activated_daemon_stays_while_managed_agents_run() {
    if !have_activate() {
        return;
    }
    let env = Env::new();
    let mut daemon = Activator::start(&env, &["MAOS_LOG=maosd=debug"], &["--idle-exit", "200ms"]);
    let mut hold = Raw::connect(&env.socket);
    hold.hello();
    let plan = env.project.join("plan.toml");
    fs::write(
        &plan,
        "objective = \"outlive the idle timer\"\n[[agent]]\nname = \"long\"\ntask = \"wait\"\ncommand = [\"sleep\", \"600\"]\n",
    )
    .expect("plan");
    let run = json_of(&env, &["run", plan.to_str().expect("utf-8")]);
    let sid = run["id"].as_str().expect("session id").to_string();
    let mut agent_pid = 0;
    wait_until(DEADLINE, "the agent runs", || {
        let s = json_of(&env, &["session", "show", &sid]);
        agent_pid = s["agents"][0]["process"]["pid"].as_u64().unwrap_or(0) as u32;
        agent_pid != 0
    });
    // Idle (no connection) for longer than idle_exit, but an agent runs: the daemon stays.
    drop(hold);
    let log = env.home.join("logs/maosd.log");
    wait_until(DEADLINE, "the daemon notes it stays for the agent", || {
        fs::read_to_string(&log).is_ok_and(|t| t.contains("managed agents run: staying"))
    });
    assert!(alive(daemon.pid()), "exited while an agent ran");

    // The agent ends: its supervisor reports it, and then the daemon is idle and exits.
    maos_tests::kill9(agent_pid);
    let code = daemon.wait_exit(DEADLINE);
    assert!(code.success(), "{code}");
    assert!(is_socket(&env.socket));
}
