//! `maos events --follow --json`: history first, then live changes, as they happen; a daemon
//! that goes away is said, waited for and resumed from, or the follower fails with one line.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver};

use maos_tests::{ChildGuard, DEADLINE, Env, Value};

/// Start `maos --json events --follow ARGS` and hand its stdout lines over a channel.
fn follow(env: &Env, args: &[&str]) -> (ChildGuard, Receiver<Value>) {
    let (child, rx, _stderr) = follow_with_stderr(env, args);
    (child, rx)
}

/// [`follow`], with its stderr lines over a second channel.
fn follow_with_stderr(env: &Env, args: &[&str]) -> (ChildGuard, Receiver<Value>, Receiver<String>) {
    let mut all = vec!["--json", "events", "--follow"];
    all.extend_from_slice(args);
    let mut cmd = env.maos_cmd_in(&env.project, &all);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = ChildGuard(cmd.spawn().expect("spawn maos events --follow"));
    let stderr = child.0.stderr.take().unwrap();
    let (err_tx, err_rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines() {
            let Ok(line) = line else { return };
            if err_tx.send(line).is_err() {
                return;
            }
        }
    });
    let stdout = child.0.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { return };
            let v: Value =
                serde_json::from_str(&line).unwrap_or_else(|e| panic!("bad line {line:?}: {e}"));
            if tx.send(v).is_err() {
                return;
            }
        }
    });
    (child, rx, err_rx)
}

fn next(rx: &Receiver<Value>, what: &str) -> Value {
    rx.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("no event line within {DEADLINE:?}: expected {what}"))
}

#[test]
fn follow_prints_history_then_live_events() {
    let env = Env::new();
    let sid = env.session("followed", &[]);
    let history = env.events(&[]);
    assert_eq!(
        history.len(),
        2,
        "session_created + session_activated: {history:?}"
    );

    let (mut child, rx) = follow(&env, &[]);
    for h in &history {
        assert_eq!(&next(&rx, "history"), h, "history comes first, unchanged");
    }

    // A change made now shows up live, with the next sequence number.
    let agent = env.agent(None, "dev", "live");
    let e = next(&rx, "agent_registered");
    assert_eq!(e["type"], "agent_registered");
    assert_eq!(e["agent_id"], agent.as_str());
    assert_eq!(e["session_id"], sid.as_str());
    assert_eq!(
        e["seq"],
        history.last().unwrap()["seq"].as_u64().unwrap() + 1
    );
    for key in ["seq", "ts", "session_id", "agent_id", "type", "data"] {
        assert!(e.get(key).is_some(), "event lacks {key}: {e}");
    }
    env.maos_json(&["session", "start"]);
    assert_eq!(next(&rx, "session_started")["type"], "session_started");

    assert!(
        child.0.try_wait().unwrap().is_none(),
        "follow keeps running"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();
}

#[test]
fn follow_of_one_session_shows_only_that_session() {
    let env = Env::new();
    let a = env.session("A", &[]);
    let b = env.session("B", &[]);
    let (_child, rx) = follow(&env, &[&b]);
    assert_eq!(next(&rx, "B's creation")["type"], "session_created");

    // A's change comes first; if it leaked through, it would be the next line.
    env.agent(Some(&a), "dev", "in A");
    let in_b = env.agent(Some(&b), "dev", "in B");
    let e = next(&rx, "B's agent");
    assert_eq!(e["session_id"], b.as_str(), "{e}");
    assert_eq!(e["agent_id"], in_b.as_str(), "{e}");
}

/// The follower's next stderr line.
fn next_said(err: &Receiver<String>, what: &str) -> String {
    err.recv_timeout(DEADLINE)
        .unwrap_or_else(|_| panic!("nothing said on stderr within {DEADLINE:?}: expected {what}"))
}

/// kill -9 of the daemon under a follower: it says it lost the daemon, waits, and once any
/// maos command has started a daemon again it says it reconnected and resumes where it
/// stopped: what it printed over both daemons is the project's whole history, each event once
/// and in order (no repeat, no gap), including the event made after the restart.
#[test]
fn follow_survives_a_killed_daemon_and_resumes_without_a_repeat_or_a_gap() {
    let env = Env::new();
    env.session("followed", &[]);
    let (mut child, rx, err) = follow_with_stderr(&env, &[]);
    let mut printed = vec![next(&rx, "session_created"), next(&rx, "session_activated")];
    env.agent(None, "dev", "before the kill");
    printed.push(next(&rx, "agent_registered before the kill"));

    let killed = env.kill9();
    let lost = next_said(&err, "that it lost the daemon");
    assert!(
        lost.contains("lost the daemon") && lost.contains("reconnecting"),
        "the follower should say it lost the daemon and is reconnecting: {lost:?}"
    );

    // Any maos command starts a daemon again; the follower finds it.
    let after = env.agent(None, "dev", "after the restart");
    assert_ne!(env.daemon_pid(), killed, "a new daemon serves the project");
    let back = next_said(&err, "that it reconnected");
    assert!(
        back.contains("reconnected"),
        "the follower should say it reconnected: {back:?}"
    );
    loop {
        let e = next(&rx, "agent_registered after the restart");
        let done = e["agent_id"] == after.as_str();
        printed.push(e);
        if done {
            break;
        }
    }
    let history = env.events(&[]);
    let upto: Vec<&Value> = history
        .iter()
        .take_while(|e| e["seq"].as_u64() <= printed.last().unwrap()["seq"].as_u64())
        .collect();
    assert_eq!(
        printed.iter().collect::<Vec<_>>(),
        upto,
        "the follower printed the history, each event once and in order"
    );
    assert!(
        child.0.try_wait().unwrap().is_none(),
        "the follower keeps running after it reconnected"
    );
}

/// A follower whose daemon does not come back within `--reconnect-for` exits with code 3 and
/// says why in one line (after the line that said it lost the daemon), never silently with 0;
/// with no daemon to start from (`MAOS_NO_AUTOSTART=1`), it fails the same way at once.
#[test]
fn follow_that_cannot_reconnect_fails_with_one_line() {
    let env = Env::new();
    let mut cmd = env.maos_cmd_in(&env.project, &["events", "--follow"]);
    cmd.env("MAOS_NO_AUTOSTART", "1");
    let out = maos_tests::run_with_timeout(cmd, DEADLINE);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{}", maos_tests::describe(&out));
    assert_eq!(stderr.lines().count(), 1, "one line: {stderr:?}");

    env.session("followed", &[]);
    let (mut child, rx, err) = follow_with_stderr(&env, &["--reconnect-for", "1s"]);
    next(&rx, "session_created");
    env.kill9();
    let lost = next_said(&err, "that it lost the daemon");
    assert!(lost.contains("lost the daemon"), "{lost:?}");
    let gave_up = next_said(&err, "that it could not reconnect");
    assert!(
        gave_up.contains("could not reconnect within 1s") && gave_up.contains("not running"),
        "one line saying it gave up, and why: {gave_up:?}"
    );
    maos_tests::wait_until(DEADLINE, "the follower exits", || {
        child.0.try_wait().unwrap().is_some()
    });
    let status = child.0.wait().unwrap();
    assert_eq!(status.code(), Some(3), "no daemon to talk to: exit code 3");
    assert!(
        err.recv_timeout(DEADLINE).is_err(),
        "nothing more on stderr after the line that says it gave up"
    );
}

/// A `--reconnect-for` that is not a duration, or without `--follow`, is a usage error: one
/// line naming the option, exit code 2, and no daemon started.
#[test]
fn a_bad_reconnect_for_is_refused_in_one_line() {
    let env = Env::new();
    for args in [
        &["events", "--follow", "--reconnect-for", "soon"][..],
        &["events", "--reconnect-for", "1s"][..],
    ] {
        let out = env.maos(args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(
            out.status.code(),
            Some(2),
            "{args:?}: {}",
            maos_tests::describe(&out)
        );
        assert!(
            stderr.lines().count() == 1 && stderr.contains("--reconnect-for"),
            "{args:?}: one line naming --reconnect-for: {stderr:?}"
        );
    }
    assert!(env.daemons().is_empty(), "no daemon was started");
}

/// Following an archived session (issue 15: "no id matches"): its timeline, then one line
/// saying it is archived and how it ended, exit 0; a session that does not exist is still
/// "no id matches", exit 1.
#[test]
fn follow_of_an_archived_session_prints_its_timeline_and_says_it_is_archived() {
    let env = Env::new();
    let sid = env.session("archived", &[]);
    env.maos_json(&["session", "cancel"]);
    env.maos_json(&["session", "archive", &sid]);

    let out = env.maos(&["--json", "events", "--follow", &sid[..13]]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let types: Vec<String> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let v: Value = serde_json::from_str(l).expect("one event per line");
            v["type"].as_str().unwrap_or_default().to_string()
        })
        .collect();
    assert_eq!(types.first().map(String::as_str), Some("session_created"));
    assert!(types.contains(&"session_archived".to_string()), "{types:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!(
            "session {} is archived (it ended cancelled)",
            &sid[..13]
        )) && err.contains("no more events will come"),
        "{err}"
    );
    // With --limit: the newest events once, then the same line.
    let out = env.maos(&["--json", "events", "--follow", &sid, "--limit", "1"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).lines().count(), 1);

    let f = env.maos_fail(&["events", "--follow", "sess_ffffffff"]);
    assert_eq!(f.exit, 1);
    assert!(f.message.contains("no id matches"), "{}", f.message);
}

/// Following a project where nothing has been recorded yet waits for its first events
/// without creating the project (watching is not recording).
#[test]
fn follow_of_a_project_with_nothing_recorded_waits_for_its_first_session() {
    let env = Env::new();
    env.maos_json(&["daemon", "start"]);
    let (mut child, rx) = follow(&env, &[]);
    maos_tests::wait_until(DEADLINE, "the follower is connected", || {
        env.maos_json(&["daemon", "status"])["projects"]
            .as_array()
            .is_some_and(Vec::is_empty)
            && child.0.try_wait().ok().flatten().is_none()
    });
    assert!(
        !env.home.join("projects").exists()
            || std::fs::read_dir(env.home.join("projects"))
                .map(|d| d.count())
                .unwrap_or(0)
                == 0,
        "watching created the project"
    );
    let sid = env.session("first", &[]);
    let e = next(&rx, "session_created");
    assert_eq!(e["type"], "session_created");
    assert_eq!(e["session_id"], sid.as_str());
    let _ = child.0.kill();
}

/// The timeline's new filters, stored and live alike: `--path` (a text in the file named),
/// `--grep` (a text in type or data, any case), `--until`; each bad value is refused with one
/// line and changes nothing.
#[test]
fn path_grep_and_until_filter_history_and_the_live_stream_alike() {
    let env = Env::new();
    env.session("filters", &[]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "dev", "writes");
    env.maos_json(&["agent", "start", &a]);
    env.maos_json(&["lock", "acquire", "src/alpha.rs", "--agent", &a]);
    env.maos_json(&["lock", "acquire", "docs/beta.md", "--agent", &a]);
    env.maos_json(&["note", "decision", "Keep ALPHA small"]);

    let types = |v: &[Value]| {
        v.iter()
            .map(|e| e["type"].as_str().unwrap_or_default().to_string())
            .collect::<Vec<_>>()
    };
    let alpha = env.events(&["--path", "alpha"]);
    assert_eq!(types(&alpha), ["lock_acquired"], "{alpha:?}");
    assert_eq!(alpha[0]["data"]["path"], "src/alpha.rs");
    // Any case, in the type or the data.
    let grep = env.events(&["--grep", "alpha"]);
    assert_eq!(types(&grep), ["lock_acquired", "note_recorded"], "{grep:?}");
    assert_eq!(
        types(&env.events(&["--grep", "NOTE_REC"])),
        ["note_recorded"]
    );
    // --until: nothing is before a time an hour ago; everything is before the year 2999.
    assert!(env.events(&["--until", "1h"]).is_empty());
    let all = env.events(&[]);
    assert_eq!(env.events(&["--until", "2999-01-01T00:00:00Z"]), all);

    // Live: only the matching event of the two made after the follower started.
    let (mut child, rx) = follow(&env, &["--path", "gamma"]);
    env.maos_json(&["lock", "acquire", "src/delta.rs", "--agent", &a]);
    env.maos_json(&["lock", "acquire", "src/gamma.rs", "--agent", &a]);
    let e = next(&rx, "the gamma lock");
    assert_eq!(
        (e["type"].as_str(), e["data"]["path"].as_str()),
        (Some("lock_acquired"), Some("src/gamma.rs")),
        "{e}"
    );
    child.0.kill().unwrap();
    child.0.wait().unwrap();

    // Refusals: one line each, nothing recorded.
    let before = env.events(&[]);
    let long = "x".repeat(2000);
    for (args, says) in [
        (vec!["events", "--path", ""], "--path"),
        (vec!["events", "--grep", long.as_str()], "too long"),
        (
            vec!["events", "--since", "1h", "--until", "2h"],
            "not after",
        ),
        (vec!["events", "--follow", "--grep", ""], "--grep"),
    ] {
        let f = env.maos_fail(&args);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (1, "bad_request"),
            "{args:?}: {f:?}"
        );
        assert!(f.message.contains(says), "{args:?}: {f:?}");
        assert_eq!(f.stderr.trim_end().lines().count(), 1, "{args:?}: {f:?}");
    }
    assert_eq!(
        env.events(&[]),
        before,
        "a refused filter changed the timeline"
    );
}

/// `maos events --follow SESSION`, with `extra` arguments, run with a deadline: a follower that
/// does not end fails the test.
fn follow_to_its_end(env: &Env, sid: &str, extra: &[&str]) -> std::process::Output {
    let mut args = vec!["--json", "events", "--follow", sid];
    args.extend_from_slice(extra);
    maos_tests::run_with_timeout(env.maos_cmd_in(&env.project, &args), DEADLINE)
}

/// Following a session that has ended (completed, failed or cancelled) prints its history and
/// exits 0 (issue 29: it never ended), with the same line as for an archived one; a filter
/// that hides the session's end does not keep it waiting.
#[test]
fn follow_of_a_finished_session_prints_its_history_and_exits() {
    let env = Env::new();
    for (end, state) in [
        ("complete", "completed"),
        ("fail", "failed"),
        ("cancel", "cancelled"),
    ] {
        let sid = env.session(&format!("to be {state}"), &[]);
        env.maos_json(&["session", "start", &sid]);
        env.agent(Some(&sid), "dev", "works");
        env.maos_json(&["session", end, &sid]);
        let history = env.events(&[&sid]);
        let out = follow_to_its_end(&env, &sid, &[]);
        assert!(out.status.success(), "{}", maos_tests::describe(&out));
        assert_eq!(
            maos_tests::parse_lines(&out.stdout),
            history,
            "its history, once"
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(&format!("session {} has ended ({state})", &sid[..13]))
                && err.contains("no more events will come"),
            "{err}"
        );
        let out = follow_to_its_end(&env, &sid, &["--type", "agent_registered"]);
        assert!(out.status.success(), "{}", maos_tests::describe(&out));
        assert_eq!(maos_tests::parse_lines(&out.stdout).len(), 1);
    }
}

/// A followed session that ends while followed ends the follower: everything up to its end,
/// then exit 0; also when the filter hides the end itself (issue 29).
#[test]
fn follow_ends_when_the_followed_session_ends() {
    let env = Env::new();
    for (extra, last) in [
        (&[][..], "session_completed"),
        (&["--type", "agent_registered"][..], "agent_registered"),
    ] {
        let sid = env.session("ends while followed", &[]);
        env.maos_json(&["session", "start", &sid]);
        let mut args = vec![sid.as_str()];
        args.extend_from_slice(extra);
        let (mut child, rx) = follow(&env, &args);
        let agent = env.agent(Some(&sid), "dev", "works");
        let mut e = next(&rx, "agent_registered");
        while e["type"] != "agent_registered" {
            e = next(&rx, "agent_registered");
        }
        assert_eq!(e["agent_id"], agent.as_str());
        assert!(
            child.0.try_wait().expect("try_wait").is_none(),
            "still following a running session"
        );
        env.maos_json(&["session", "complete", &sid]);
        maos_tests::wait_until(DEADLINE, "the follower ends with the session", || {
            child.0.try_wait().ok().flatten().is_some()
        });
        let status = child.0.wait().expect("wait");
        assert!(status.success(), "{status}");
        // What it printed after that event, to the end of its output.
        let mut rest = Vec::new();
        while let Ok(e) = rx.recv_timeout(DEADLINE) {
            rest.push(e);
        }
        let end = rest.last().unwrap_or(&e);
        assert_eq!(end["type"], last, "{extra:?}: the last line: {rest:?}");
    }
}
