//! `maos mcp` under many lock waits at once (issue 30 §1.5), spoken to as a client does:
//! JSON-RPC lines on its stdin, answers on its stdout. With 512 waits or more its other calls
//! got no answer (every thread of its pool waited for a lock), its stdin's end was not seen,
//! and a wait granted after its client had left stayed held, nobody's, for the lease's
//! 10 minutes. Waits are bounded (past the bound a call is refused at once, saying so), other
//! calls are answered whatever waits, and a client that is gone takes no lock.

use std::collections::HashMap;
use std::io::Write;
use std::process::ChildStdin;
use std::sync::mpsc::Receiver;
use std::time::Instant;

use maos_tests::{DEADLINE, Env, Value, json, wait_until};

/// Waits sent at once: past the old pool's 512 threads.
const WAITS: u64 = 600;

fn call(stdin: &mut ChildStdin, id: u64, tool: &str, args: Value) {
    let msg = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": tool, "arguments": args}});
    writeln!(stdin, "{msg}").expect("write to maos mcp");
}

/// Read answers into `got` until `done` says enough, failing the test after `what` took
/// longer than the deadline.
fn collect(
    rx: &Receiver<String>,
    got: &mut HashMap<u64, Value>,
    what: &str,
    done: impl Fn(&HashMap<u64, Value>) -> bool,
) {
    let deadline = Instant::now() + DEADLINE;
    while !done(got) {
        let left = deadline.saturating_duration_since(Instant::now());
        let Ok(line) = rx.recv_timeout(left) else {
            let mut ids: Vec<_> = got.keys().filter(|i| **i < 1000).collect();
            ids.sort();
            panic!(
                "{what}: not within {DEADLINE:?} ({} answers, of the calls below 1000: {ids:?})",
                got.len()
            );
        };
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if let Some(id) = v["id"].as_u64() {
            got.insert(id, v);
        }
    }
}

/// A tool answer's text, and whether it is a tool error.
fn text_of(v: &Value) -> (String, bool) {
    let r = &v["result"];
    (
        r["content"][0]["text"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        r["isError"] == true,
    )
}

fn waiters(env: &Env) -> usize {
    env.maos_json(&["lock", "list"])["waiters"]
        .as_array()
        .map_or(0, Vec::len)
}

#[test]
fn many_lock_waits_never_starve_other_calls_and_a_gone_client_takes_no_lock() {
    let env = Env::new();
    env.session("ship the parser", &[]);
    env.maos(&["session", "start"]);
    let a = env.agent(None, "writer", "write the parser");
    let b = env.agent(None, "tester", "test the parser");
    for id in [&a, &b] {
        let out = env.maos(&["agent", "start", id]);
        assert!(out.status.success(), "{out:?}");
    }
    std::fs::create_dir_all(env.project.join("src")).expect("src");
    env.maos_json(&[
        "lock",
        "acquire",
        "src",
        "--mode",
        "directory",
        "--agent",
        &a,
    ]);

    let (mut child, mut stdin, rx) = maos_tests::mcp::raw_server(&env, &[("MAOS_AGENT_ID", &b)]);
    // b waits for WAITS files of src/ at once (ids 1000..), then asks who holds one, renews
    // its leases and takes ten free files without waiting.
    for i in 0..WAITS {
        call(
            &mut stdin,
            1000 + i,
            "lock_acquire",
            json!({"path": format!("src/f{i}.rs"), "mode": "write", "wait_ms": 60000}),
        );
    }
    call(&mut stdin, 10, "who", json!({"path": "src/f0.rs"}));
    call(&mut stdin, 11, "lock_renew", json!({}));
    for j in 0..10 {
        call(
            &mut stdin,
            20 + j,
            "lock_acquire",
            json!({"path": format!("free/g{j}.rs"), "mode": "write"}),
        );
    }
    stdin.flush().expect("flush");
    let mut got = HashMap::new();
    let others: Vec<u64> = [10, 11].into_iter().chain(20..30).collect();
    collect(&rx, &mut got, "the calls that do not wait answered", |g| {
        others.iter().all(|i| g.contains_key(i))
    });
    let (who, failed) = text_of(&got[&10]);
    assert!(!failed && who.contains(a.as_str()), "who names a: {who}");
    assert!(got[&11]["result"].is_object(), "renew: {}", got[&11]);
    for j in 20..30 {
        let (lock, failed) = text_of(&got[&j]);
        assert!(
            !failed && lock.contains(b.as_str()),
            "free file {j}: {lock}"
        );
    }

    // The waits past the bound are refused at once, saying so.
    let refusal = |v: &Value| {
        let (text, failed) = text_of(v);
        (failed && text.starts_with("too many lock waits at once (")).then_some(text)
    };
    collect(&rx, &mut got, "a wait past the bound refused", |g| {
        g.iter().any(|(id, v)| *id >= 1000 && refusal(v).is_some())
    });
    let n = got
        .iter()
        .filter(|(id, _)| **id >= 1000)
        .find_map(|(_, v)| refusal(v))
        .and_then(|t| t.split_once('(')?.1.split_once(')')?.0.parse::<u64>().ok())
        .expect("the bound in the refusal");
    assert!(n > 0 && n < WAITS, "bound {n}");
    collect(&rx, &mut got, "every wait past the bound refused", |g| {
        g.iter()
            .filter(|(id, v)| **id >= 1000 && refusal(v).is_some())
            .count() as u64
            == WAITS - n
    });
    let answered_waits = got.keys().filter(|id| **id >= 1000).count() as u64;
    assert_eq!(answered_waits, WAITS - n, "only refusals answered so far");
    wait_until(DEADLINE, "the bound's waits queued in maosd", || {
        waiters(&env) == n as usize
    });

    // The client goes away while they wait, right after ten more calls that would take free
    // files: its waits leave maosd's queue, and once a lets go of src/ nothing of it is
    // granted to b; a late call takes its file only if its answer says so.
    for j in 0..10 {
        call(
            &mut stdin,
            40 + j,
            "lock_acquire",
            json!({"path": format!("late/h{j}.rs"), "mode": "write"}),
        );
    }
    drop(stdin);
    wait_until(
        DEADLINE,
        "b's waits leave the queue once its client is gone",
        || waiters(&env) == 0,
    );
    env.maos_json(&["lock", "release", "src", "--agent", &a]);
    wait_until(DEADLINE, "b's server ends", || {
        matches!(child.try_wait(), Ok(Some(_)))
    });
    // Everything it said before it ended.
    while let Ok(line) = rx.recv_timeout(DEADLINE) {
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if let Some(id) = v["id"].as_u64() {
            got.insert(id, v);
        }
    }
    let mut expected: Vec<String> = (0..10).map(|j| format!("free/g{j}.rs")).collect();
    for j in 0..10 {
        let Some(answer) = got.get(&(40 + j)) else {
            continue;
        };
        let (text, failed) = text_of(answer);
        if failed {
            assert!(text.contains("no lock was taken"), "late call {j}: {text}");
        } else {
            expected.push(format!("late/h{j}.rs"));
        }
    }
    expected.sort();
    let listed = env.maos_json(&["lock", "list"]);
    let locks = listed["locks"].as_array().expect("locks");
    let mut held: Vec<&str> = locks.iter().filter_map(|l| l["path"].as_str()).collect();
    held.sort();
    assert_eq!(
        held, expected,
        "only what b was answered it holds: {listed}"
    );
    assert!(locks.iter().all(|l| l["holder"] == b.as_str()), "{listed}");
}
