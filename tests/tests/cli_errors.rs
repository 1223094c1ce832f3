//! Refused requests and bad command lines: the right exit code and error code, one line for a
//! person, and no change at all (no event, no state change, not even a daemon start).

use maos_tests::{Env, Value, argv, describe};

/// The whole observable state of the default project: every session (finished ones too) and
/// the timeline.
fn snapshot(env: &Env) -> (Value, Vec<Value>) {
    (env.maos_json(&["ps", "--all"]), env.events(&[]))
}

#[test]
fn illegal_transitions_are_refused_and_write_nothing() {
    let env = Env::new();
    let fresh = env.session("never started", &["p1"]);
    let pending = env.agent(Some(&fresh), "dev", "t");
    let done = env.session("finished", &["only"]);
    env.maos_json(&["session", "start", &done]);
    let finished = env.agent(Some(&done), "qa", "t");
    env.maos_json(&["agent", "start", &finished]);
    env.maos_json(&["agent", "complete", &finished]);
    env.maos_json(&["session", "cancel", &done]);

    // (command, what the message must name)
    let cases: Vec<(Vec<&str>, &str)> = vec![
        (vec!["session", "complete", &fresh], "created"),
        (vec!["resume", &fresh], "created"),
        (vec!["pause", &fresh], "created"),
        (vec!["session", "start", &done], "cancelled"),
        (vec!["session", "complete", &done], "cancelled"),
        (vec!["agent", "complete", &pending], "pending"),
        (vec!["agent", "start", &pending], "created"), // its session is not running
        (vec!["agent", "start", &finished], "completed"),
        (vec!["agent", "fail", &finished], "completed"),
        (vec!["phase", "start", "--session", &fresh], "created"),
        (
            vec![
                "agent",
                "register",
                "--session",
                &done,
                "--role",
                "r",
                "--task",
                "t",
            ],
            "cancelled",
        ),
    ];
    for (args, names) in cases {
        let before = snapshot(&env);
        let f = env.maos_fail(&args);
        assert_eq!(f.exit, 1, "{args:?}: {f:?}");
        assert_eq!(f.code, "invalid_transition", "{args:?}: {f:?}");
        assert!(
            f.message.contains(names),
            "{args:?}: the message should name the state {names:?}: {f:?}"
        );
        assert_eq!(f.stderr.trim_end().lines().count(), 1, "{args:?}: {f:?}");
        let after = snapshot(&env);
        assert_eq!(before.1.len(), after.1.len(), "{args:?} wrote an event");
        assert_eq!(before, after, "{args:?} changed state");
    }
}

/// Bad command lines, each with what the one-line error must mention.
fn bad_command_lines() -> Vec<(Vec<&'static str>, &'static str)> {
    let mut cases: Vec<_> = [
        (
            "session create --objective x --strategy sideways",
            "strategy",
        ),
        ("events --since yesterday", "--since"),
        ("events --since 10y", "--since"),
        ("events --until soon", "--until"),
        ("frobnicate", "frobnicate"),
        ("session create", "--objective"),
        ("agent complete x --exit-code three", "--exit-code"),
        ("pause --agent a --phase b", "--phase"),
    ]
    .into_iter()
    .map(|(line, mentions)| (argv(line), mentions))
    .collect();
    cases.push((
        vec!["phase", "complete", "--artifacts", "{not json"],
        "--artifacts",
    ));
    cases
}

fn assert_usage_error(env: &Env, args: &[&str], mentions: &str) {
    // Human form: exit 2, exactly one line on stderr, nothing on stdout.
    let out = env.maos(args);
    assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(
        stderr.trim_end().lines().count(),
        1,
        "{args:?}: {}",
        describe(&out)
    );
    assert!(
        stderr.contains(mentions),
        "{args:?} should mention {mentions:?}: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{args:?}: {}", describe(&out));
    // JSON form: the error object on stdout, code bad_request.
    let f = env.maos_fail(args);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (2, "bad_request"),
        "{args:?}: {f:?}"
    );
    assert!(!f.message.is_empty() && !f.message.contains('\n'), "{f:?}");
}

#[test]
fn bad_command_lines_exit_2_from_cold_without_starting_a_daemon() {
    let env = Env::new();
    for (args, mentions) in bad_command_lines() {
        assert_usage_error(&env, &args, mentions);
        assert!(!env.socket.exists(), "{args:?} started a daemon");
        assert!(
            !env.home.exists(),
            "{args:?} created {}",
            env.home.display()
        );
    }
}

#[test]
fn bad_command_lines_change_nothing_on_a_running_daemon() {
    let env = Env::new();
    env.session("o", &["build"]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["phase", "start"]);
    let pid = env.daemon_pid();
    let before = snapshot(&env);
    for (args, mentions) in bad_command_lines() {
        assert_usage_error(&env, &args, mentions);
    }
    assert_eq!(snapshot(&env), before);
    assert_eq!(env.daemon_pid(), pid);
    // The running phase still completes normally afterwards (the bad --artifacts did not).
    let s = env.maos_json(&["phase", "complete", "--artifacts", r#"{"ok": true}"#]);
    assert_eq!(s["workflow"]["phases"][0]["artifacts"]["ok"], true);
}

/// `maos ... | head`: a reader that goes away ends the client quietly (no panic, no backtrace),
/// and a failure keeps its exit code.
#[test]
fn a_closed_stdout_ends_the_client_quietly() {
    let env = Env::new();
    env.session("listed", &[]);
    let closed = |args: &[&str]| {
        let (reader, writer) = std::io::pipe().expect("pipe");
        drop(reader); // every write to stdout now fails with EPIPE
        let mut cmd = env.maos_cmd_in(&env.project, args);
        cmd.stdout(writer);
        maos_tests::run_with_timeout_keeping_stdout(cmd, maos_tests::COMMAND_TIMEOUT)
    };
    for args in [
        &["ps", "--all"][..],
        &["--json", "session", "list"],
        &["completions", "bash"],
        &["man"],
        &["events"],
    ] {
        let out = closed(args);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(!err.contains("panicked"), "maos {args:?}: {err}");
        assert_eq!(out.status.code(), Some(0), "maos {args:?}: {err}");
    }
    let out = closed(&["--json", "session", "show", "sess_nope"]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("panicked"), "{err}");
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(err.starts_with("maos: "), "{err}");
}
