//! The client starts the daemon on demand, and racing clients start exactly one.

use std::sync::{Arc, Barrier};

use maos_tests::{Env, alive, describe, ids};

#[test]
fn a_cold_client_starts_the_daemon_and_gets_an_answer() {
    let env = Env::new();
    assert!(!env.socket.exists(), "no daemon before the first command");
    assert!(env.daemons().is_empty());

    let ps = env.maos_json(&["ps"]);
    assert_eq!(ps, serde_json::json!([]), "a new project has no sessions");

    assert!(env.socket.exists(), "the daemon listens on MAOS_SOCKET");
    let pid = env.daemon_pid();
    assert!(alive(pid));
    assert_eq!(env.pidfile_pid(), Some(pid), "the pidfile names the daemon");
    assert_eq!(env.daemons(), vec![pid]);

    // The daemon is reused, not restarted, by the next command.
    let id = env.create(&["session", "create", "--objective", "cold start"]);
    assert_eq!(ids(&env.maos_json(&["ps"])), vec![id]);
    assert_eq!(env.daemon_pid(), pid);
}

#[test]
fn clients_racing_from_cold_start_exactly_one_daemon() {
    const CLIENTS: usize = 6;
    let env = Arc::new(Env::new());
    let start = Arc::new(Barrier::new(CLIENTS));
    let commands: [&[&str]; 3] = [
        &["--json", "ps"],
        &["--json", "daemon", "start"],
        &["--json", "session", "list"],
    ];
    let threads: Vec<_> = (0..CLIENTS)
        .map(|i| {
            let (env, start) = (env.clone(), start.clone());
            let args = commands[i % commands.len()];
            std::thread::spawn(move || {
                start.wait();
                let out = env.maos(args);
                assert!(
                    out.status.success(),
                    "client {i} {args:?}: {}",
                    describe(&out)
                );
            })
        })
        .collect();
    for t in threads {
        t.join().expect("a racing client failed");
    }

    let pids: Vec<u32> = (0..CLIENTS).map(|_| env.daemon_pid()).collect();
    assert!(
        pids.iter().all(|&p| p == pids[0]),
        "clients saw different daemons: {pids:?}"
    );
    assert_eq!(env.pidfile_pid(), Some(pids[0]));
    assert!(alive(pids[0]));
    assert_eq!(
        env.daemons(),
        vec![pids[0]],
        "exactly one maosd serves this home"
    );
}
