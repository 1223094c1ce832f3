//! `maos events --follow --json`: history first, then live changes, as they happen.

use std::io::{BufRead, BufReader};
use std::process::Stdio;
use std::sync::mpsc::{self, Receiver};

use maos_tests::{ChildGuard, DEADLINE, Env, Value};

/// Start `maos --json events --follow ARGS` and hand its stdout lines over a channel.
fn follow(env: &Env, args: &[&str]) -> (ChildGuard, Receiver<Value>) {
    let mut all = vec!["--json", "events", "--follow"];
    all.extend_from_slice(args);
    let mut cmd = env.maos_cmd_in(&env.project, &all);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::null());
    let mut child = ChildGuard(cmd.spawn().expect("spawn maos events --follow"));
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
    (child, rx)
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
