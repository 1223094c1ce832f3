//! The protocol handshake across versions. `MAOS_TEST_PROTOCOL` makes a real `maosd` speak
//! another protocol number, standing in for a daemon of an older (or newer) release. A client
//! replaces an older daemon that a client started; it never touches one started by hand or
//! by a service manager, and says what to run instead.

use std::process::{Child, Stdio};

use maos_proto::{ServerMsg, StartedBy};
use maos_tests::{DEADLINE, Env, Raw, alive, describe, maosd_bin, wait_until};

/// A `maosd` speaking `protocol`, started as the test says (`--autostarted` = as a client
/// starts it). Returns once it answers the hello.
fn start_daemon(env: &Env, protocol: u32, autostarted: bool) -> Child {
    let dir = env.socket.parent().expect("socket dir");
    std::fs::create_dir_all(dir).expect("socket dir");
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let mut cmd = env.command(&maosd_bin());
    cmd.env("MAOS_TEST_PROTOCOL", protocol.to_string())
        // Lost agent exits are looked for every 100 ms (10 s by default).
        .env("MAOS_TEST_SWEEP_MS", "100")
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    if autostarted {
        cmd.arg("--autostarted");
    }
    let child = cmd.spawn().expect("spawn maosd");
    wait_until(DEADLINE, "the daemon answers", || {
        std::os::unix::net::UnixStream::connect(&env.socket).is_ok()
    });
    let mut raw = Raw::connect(&env.socket);
    match raw.hello_with(maos_proto::PROTOCOL_VERSION) {
        Ok(ServerMsg::Welcome {
            protocol: p,
            pid,
            started_by,
            ..
        }) => {
            assert_eq!(p, protocol);
            assert_eq!(pid, child.id());
            let expected = if autostarted {
                StartedBy::Client
            } else {
                StartedBy::Manual
            };
            assert_eq!(started_by, expected);
        }
        other => panic!("expected a welcome, got {other:?}"),
    }
    child
}

/// Reap `child` once it exits; panic if it does not within the deadline.
fn reaped(child: &mut Child) -> std::process::ExitStatus {
    let pid = child.id();
    wait_until(DEADLINE, "the old daemon exits", || {
        matches!(child.try_wait(), Ok(Some(_))) || !alive(pid)
    });
    child.wait().expect("reap")
}

fn one_line(err: &[u8]) -> String {
    let text = String::from_utf8_lossy(err).trim().to_string();
    assert_eq!(text.lines().count(), 1, "one line: {text}");
    text
}

#[test]
fn an_older_daemon_that_a_client_started_is_replaced_and_keeps_its_data() {
    let env = Env::new();
    let session = env.create(&["session", "create", "--objective", "survives the upgrade"]);
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));

    let mut old = start_daemon(&env, 0, true);
    let old_pid = old.id();
    let out = env.maos(&["session", "show", &session]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stdout).contains("survives the upgrade"));

    let status = reaped(&mut old);
    assert!(
        status.success(),
        "the old daemon stopped gracefully: {status}"
    );
    let now = env.maos_json(&["daemon", "status"]);
    assert_eq!(now["protocol"], maos_proto::PROTOCOL_VERSION, "{now}");
    assert_eq!(now["started_by"], "client");
    assert_ne!(now["pid"].as_u64(), Some(u64::from(old_pid)));
    assert_eq!(env.daemons().len(), 1, "exactly one daemon");
}

#[test]
fn concurrent_clients_replace_an_older_daemon_exactly_once() {
    let env = Env::new();
    let mut old = start_daemon(&env, 0, true);
    let clients: Vec<Child> = (0..4)
        .map(|_| {
            env.maos_cmd_in(&env.project, &["ps"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("spawn maos ps")
        })
        .collect();
    for c in clients {
        let out = c.wait_with_output().expect("maos ps");
        assert!(out.status.success(), "{}", describe(&out));
    }
    assert!(reaped(&mut old).success());
    let daemons = env.daemons();
    assert_eq!(daemons.len(), 1, "one new daemon: {daemons:?}");
    assert_eq!(env.daemon_pid(), daemons[0]);
}

/// What a client meets while a daemon stops (seen while an older one was replaced: "Connection
/// reset by peer"): the stopping daemon still accepts a few connections and drops each without
/// an answer, then stops listening. Here a fake does that to three connections in a row; the
/// client must keep trying until the socket is free, start the daemon and get its answer (it
/// used to retry once, and failed).
#[test]
fn connections_dropped_unanswered_by_a_stopping_daemon_are_retried_until_it_is_gone() {
    use std::io::Read;
    use std::os::unix::net::UnixListener;
    const DROPPED: usize = 3;
    let env = Env::new();
    let dir = env.socket.parent().expect("socket dir");
    std::fs::create_dir_all(dir).expect("socket dir");
    std::fs::set_permissions(dir, std::os::unix::fs::PermissionsExt::from_mode(0o700))
        .expect("chmod");
    let listener = UnixListener::bind(&env.socket).expect("bind the fake");
    let socket = env.socket.clone();
    let fake = std::thread::spawn(move || {
        for _ in 0..DROPPED {
            let (mut conn, _) = listener.accept().expect("accept");
            // Wait for the client's hello to arrive, then close with it unread: a reset.
            let mut first = [0u8; 1];
            conn.read_exact(&mut first).expect("the client's hello");
        }
        drop(listener);
        std::fs::remove_file(&socket).expect("remove the fake's socket");
    });
    let out = env.maos(&["--json", "ps"]);
    // (A client that gave up early leaves the fake waiting for it: no join then.)
    assert!(out.status.success(), "{}", describe(&out));
    fake.join().expect("the fake daemon");
    assert_eq!(
        serde_json::from_slice::<serde_json::Value>(&out.stdout).ok(),
        Some(serde_json::json!([])),
        "{}",
        describe(&out)
    );
    assert_eq!(env.daemons().len(), 1, "the client started the daemon");
}

#[test]
fn a_daemon_started_by_hand_is_refused_politely_and_left_running() {
    let env = Env::new();
    let mut manual = start_daemon(&env, 0, false);
    let f = env.maos_fail(&["ps"]);
    assert_eq!(f.code, "protocol_mismatch", "{f:?}");
    let line = one_line(f.stderr.as_bytes());
    assert!(line.contains("protocol 0"), "{line}");
    assert!(line.contains(&format!("kill {}", manual.id())), "{line}");
    assert!(alive(manual.id()), "a daemon started by hand was stopped");

    // `maos daemon stop` still stops it (with a signal: it cannot take the request).
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(reaped(&mut manual).success());
}

#[test]
fn a_newer_daemon_is_never_replaced_by_an_older_client() {
    let env = Env::new();
    let mut newer = start_daemon(&env, maos_proto::PROTOCOL_VERSION + 1, true);
    let f = env.maos_fail(&["ps"]);
    assert_eq!(f.code, "protocol_mismatch", "{f:?}");
    let line = one_line(f.stderr.as_bytes());
    assert!(line.contains("older than the running maosd"), "{line}");
    assert!(alive(newer.id()));
    assert_eq!(env.daemons(), vec![newer.id()]);
    let _ = newer.kill();
    let _ = newer.wait();
}

#[test]
fn a_service_managed_daemon_is_refused_with_the_command_to_restart_it() {
    if !maos_tests::have_tool("systemd-socket-activate", "systemd") {
        return;
    }
    let env = Env::new();
    let dir = env.socket.parent().expect("socket dir");
    std::fs::create_dir_all(dir).expect("socket dir");
    let log = env.root().join("activate.log");
    let mut cmd = env.command(std::path::Path::new("systemd-socket-activate"));
    cmd.arg("-l")
        .arg(&env.socket)
        .arg(format!("--setenv=MAOS_HOME={}", env.home.display()))
        .arg("--setenv=MAOS_TEST_PROTOCOL=0")
        .arg(maosd_bin())
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).expect("log"));
    let mut activator = cmd.spawn().expect("systemd-socket-activate");
    wait_until(DEADLINE, "systemd-socket-activate listens", || {
        std::fs::read_to_string(&log).is_ok_and(|t| t.contains("Listening on"))
    });
    let f = env.maos_fail(&["ps"]);
    assert_eq!(f.code, "protocol_mismatch", "{f:?}");
    let line = one_line(f.stderr.as_bytes());
    assert!(
        line.contains("systemctl --user restart maosd.service"),
        "{line}"
    );
    assert!(alive(activator.id()), "the service's daemon was stopped");
    assert_eq!(env.daemons(), vec![activator.id()]);
    let _ = activator.kill();
    let _ = activator.wait();
}

/// After an upgrade, the supervisors started by the old daemon still speak the old protocol:
/// the new daemon refuses their exit reports. Their agents' exits are not lost: the supervisor
/// records each in `exit.json`, and the new daemon finds it between starts and applies it.
#[test]
fn exits_reported_by_an_older_supervisor_are_applied_by_the_newer_daemon() {
    let env = Env::new();
    let go = env.root().join("go");
    let plan = env.project.join("plan.toml");
    std::fs::write(
        &plan,
        format!(
            "objective = \"outlive an upgrade\"\n[[agent]]\nname = \"worker\"\ntask = \"wait for go\"\n\
             command = [\"sh\", \"-c\", \"while [ ! -e '{}' ]; do sleep 0.02; done\"]\n",
            go.display()
        ),
    )
    .expect("plan");
    let run = env.maos_json(&["run", plan.to_str().expect("utf-8")]);
    let sid = run["id"].as_str().expect("session id").to_string();
    wait_until(DEADLINE, "the worker runs", || {
        env.maos_json(&["session", "show", &sid])["agents"][0]["process"]["pid"].is_u64()
    });
    // The old daemon goes; its supervisor (protocol 1) stays with the agent.
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));

    // The "new release": a daemon that speaks protocol 2, started by hand.
    let mut newer = start_daemon(&env, maos_proto::PROTOCOL_VERSION + 1, false);
    let root = Env::project_root(&env.project);
    let mut raw = Raw::connect(&env.socket);
    assert!(matches!(
        raw.hello_with(maos_proto::PROTOCOL_VERSION + 1),
        Ok(ServerMsg::Welcome { .. })
    ));
    let worker = |raw: &mut Raw| {
        let r = raw.request(
            Some(&root),
            serde_json::json!({"request": "session_show", "session": sid}),
        );
        r["Ok"]["data"]["agents"][0].clone()
    };
    assert_eq!(worker(&mut raw)["state"], "running", "re-adopted");

    // The agent ends well; its supervisor's report is refused (protocol 1 ≠ 2).
    std::fs::write(&go, "").expect("go");
    wait_until(
        DEADLINE,
        "the newer daemon applies the recorded exit",
        || worker(&mut raw)["state"] == "completed",
    );
    assert_eq!(worker(&mut raw)["exit_code"], 0);
    drop(raw);
    let _ = newer.kill();
    let _ = newer.wait();
}
