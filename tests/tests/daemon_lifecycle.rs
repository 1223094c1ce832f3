//! One daemon per home, stale sockets, graceful stop, and restarts that reload everything.

use std::process::Stdio;

use maos_tests::{ChildGuard, DEADLINE, Env, alive, argv, maosd_bin, wait_until};

/// Run `maosd` directly and wait (with a deadline) for it to give up.
fn refused_maosd(mut cmd: std::process::Command) -> (i32, String) {
    cmd.arg("--foreground")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped());
    let mut child = ChildGuard(cmd.spawn().expect("run maosd"));
    let mut status = None;
    wait_until(DEADLINE, "the second maosd exits", || {
        status = child.0.try_wait().expect("try_wait");
        status.is_some()
    });
    let mut stderr = String::new();
    std::io::Read::read_to_string(child.0.stderr.as_mut().unwrap(), &mut stderr).unwrap();
    (status.unwrap().code().unwrap_or(-1), stderr)
}

#[test]
fn a_second_daemon_for_the_same_home_refuses_to_start() {
    let env = Env::new();
    let session = env.session("first daemon", &[]);
    let pid = env.daemon_pid();

    let (code, stderr) = refused_maosd(env.command(&maosd_bin()));
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("another maosd"), "{stderr}");
    assert!(
        stderr.contains(&pid.to_string()),
        "names the running daemon: {stderr}"
    );

    // Another home but the same socket: the socket is in use, so it refuses too.
    let mut other = env.command(&maosd_bin());
    other.env("MAOS_HOME", env.root().join("home2"));
    let (code, stderr) = refused_maosd(other);
    assert_ne!(code, 0, "{stderr}");
    assert!(stderr.contains("socket"), "{stderr}");

    // The first daemon is untouched and still the only one.
    assert!(alive(pid));
    assert_eq!(env.daemon_pid(), pid);
    assert_eq!(env.pidfile_pid(), Some(pid));
    assert_eq!(env.daemons(), vec![pid]);
    assert_eq!(env.maos_json(&["ps"])[0]["id"], session.as_str());
}

#[test]
fn a_stale_socket_left_by_kill_9_is_reclaimed() {
    let env = Env::new();
    let session = env.session("stale socket", &[]);
    let old = env.kill9();
    assert!(env.socket.exists(), "kill -9 leaves the socket file behind");
    // Nobody answers on it now.
    assert!(std::os::unix::net::UnixStream::connect(&env.socket).is_err());

    let ps = env.maos_json(&["ps"]);
    assert_eq!(ps[0]["id"], session.as_str(), "data survived");
    let new = env.daemon_pid();
    assert_ne!(new, old);
    assert!(alive(new) && !alive(old));
    assert_eq!(env.pidfile_pid(), Some(new));
    assert_eq!(env.daemons(), vec![new]);
}

#[test]
fn daemon_stop_is_graceful_and_the_data_stays() {
    let env = Env::new();
    let session = env.session("stop me", &["one"]);
    env.maos_json(&["session", "start"]);
    let pid = env.daemon_pid();

    let out = env.maos_json(&["daemon", "stop"]);
    assert_eq!(out["stopped"], true, "{out}");
    assert_eq!(out["pid"], pid);
    // `daemon stop` returns once the process is gone.
    wait_until(DEADLINE, "the daemon process is gone", || !alive(pid));
    assert!(!env.socket.exists(), "the socket file is removed");
    assert!(env.pidfile_pid().is_none(), "the pidfile is removed");
    assert!(env.daemons().is_empty());

    // Status does not start a daemon: it reports that none runs (exit 3).
    let f = env.maos_fail(&["daemon", "status"]);
    assert_eq!((f.exit, f.code.as_str()), (3, "unavailable"), "{f:?}");
    // Stopping a stopped daemon is not an error.
    assert_eq!(env.maos_json(&["daemon", "stop"])["stopped"], false);

    let ps = env.maos_json(&["ps"]);
    assert_eq!(ps[0]["id"], session.as_str());
    assert_eq!(ps[0]["state"], "running");
    assert_ne!(env.daemon_pid(), pid);
    assert_eq!(env.integrity_check(), "ok");
}

#[test]
fn a_restarted_daemon_reloads_every_session_and_agent_as_it_was() {
    let env = Env::new();
    let main = env.create(&argv(
        "session create --objective main --strategy sequential --phase design --phase build",
    ));
    let side = env.session("side", &[]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["phase", "start"]);
    env.maos_json(&["phase", "complete", "--artifacts", r#"{"files": ["a.rs"]}"#]);
    let done = env.agent(None, "dev", "done");
    let failed = env.agent(None, "dev", "fails");
    let paused = env.create(&argv(&format!(
        "agent register --role qa --task paused --depends-on {done}"
    )));
    let pending = env.create(&argv(&format!(
        "agent register --role qa --task waits --parent {done}"
    )));
    for a in [&done, &failed, &paused] {
        env.maos_json(&["agent", "start", a]);
    }
    env.maos_json(&["agent", "complete", &done, "--exit-code", "0"]);
    env.maos_json(&["agent", "fail", &failed, "--reason", "tests red"]);
    env.maos_json(&["pause", "--agent", &paused, "--reason", "look"]);
    env.maos_json(&["pause", "--phase", "build", "--reason", "wait"]);
    env.agent(Some(&side), "x", "y");

    // Full records come from `session list`; `ps` is the compact view of the same state.
    let before = env.maos_json(&["session", "list", "--all"]);
    let ps_before = env.maos_json(&["ps", "--all"]);
    let status_before = env.maos_json(&["status"]);
    let events_before = env.events(&[]);
    let pid = env.daemon_pid();
    env.maos_json(&["daemon", "stop"]);
    assert!(!alive(pid));

    let after = env.maos_json(&["session", "list", "--all"]);
    assert_ne!(env.daemon_pid(), pid, "a new daemon answered");
    assert_eq!(after, before, "sessions and agents reload exactly");
    assert_eq!(env.maos_json(&["ps", "--all"]), ps_before);
    let status_after = env.maos_json(&["status"]);
    assert_eq!(status_after["session"], status_before["session"]);
    assert_eq!(
        status_after["progress"]["phase"],
        status_before["progress"]["phase"]
    );
    assert_eq!(
        env.events(&[]),
        events_before,
        "the timeline reloads exactly"
    );

    // Spot checks on what was reloaded, by id.
    let s = after
        .as_array()
        .unwrap()
        .iter()
        .find(|s| s["id"] == main.as_str())
        .unwrap();
    assert_eq!(s["active"], true);
    assert_eq!(s["paused_phases"], serde_json::json!(["build"]));
    assert_eq!(s["workflow"]["phases"][0]["artifacts"]["files"][0], "a.rs");
    let agent = |id: &str| {
        s["agents"]
            .as_array()
            .unwrap()
            .iter()
            .find(|a| a["id"] == id)
            .unwrap()
            .clone()
    };
    assert_eq!(agent(&done)["state"], "completed");
    assert_eq!(agent(&failed)["state"], "failed");
    assert_eq!(
        (
            agent(&paused)["state"].clone(),
            agent(&paused)["paused"].clone()
        ),
        ("running".into(), true.into())
    );
    assert_eq!(agent(&paused)["depends_on"], serde_json::json!([done]));
    assert_eq!(agent(&pending)["parent"], done.as_str());

    // The sequence continues after the reloaded timeline, and the reloaded state is live.
    let last = events_before.last().unwrap()["seq"].as_u64().unwrap();
    env.maos_json(&["resume", "--agent", &paused]);
    let next = env.events(&["--limit", "1"]);
    assert_eq!(next[0]["type"], "agent_resumed");
    assert_eq!(next[0]["seq"].as_u64().unwrap(), last + 1);
}
