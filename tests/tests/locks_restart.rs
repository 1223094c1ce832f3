//! Locks survive `kill -9` of the daemon exactly as they were granted, fencing tokens never go
//! back, and leases run out (and are reaped) also across a restart.

mod locks_support;

use std::time::Instant;

use locks_support::{acquire, acquire_bg, held, list, setup, token, wait_queued};
use maos_tests::{DEADLINE, Env, Value, alive, json_of, ts_micros, wait_until};

/// What must survive a restart of each held lock (the lease may have been renewed since it was
/// last written, so `expires_at` is compared separately).
fn identity(l: &Value) -> Value {
    serde_json::json!({
        "path": l["path"], "mode": l["mode"], "holder": l["holder"], "token": l["token"],
        "holder_role": l["holder_role"], "session_id": l["session_id"],
        "acquired_at": l["acquired_at"],
    })
}

fn identities(env: &Env) -> Vec<Value> {
    list(env)["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(identity)
        .collect()
}

/// The `lock_expired` events, oldest first.
fn expired(env: &Env) -> Vec<Value> {
    env.events(&["--type", "lock_expired"])
}

#[test]
fn held_locks_survive_kill_9_with_their_holders_modes_and_tokens() {
    let (env, ag) = setup(&["one", "two", "three"]);
    acquire(&env, &ag[0], "src/a.rs", &[]);
    acquire(&env, &ag[0], "docs", &["--mode", "directory"]);
    acquire(&env, &ag[1], "README.md", &["--mode", "read"]);
    acquire(&env, &ag[2], "README.md", &["--mode", "read"]);
    acquire(&env, &ag[2], "lib/b.rs", &[]);
    // One released and one upgraded before the kill: neither may come back as it was.
    acquire(&env, &ag[1], "gone.rs", &[]);
    env.maos_json(&["lock", "release", "gone.rs", "--agent", &ag[1]]);
    acquire(&env, &ag[1], "up.rs", &["--mode", "read"]);
    let up = acquire(&env, &ag[1], "up.rs", &["--mode", "write"]);
    // A wait parked at the moment of the kill.
    let waiting = acquire_bg(&env, &ag[1], "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, &ag[1], "src/a.rs");
    let before = list(&env);
    let ids = identities(&env);
    assert_eq!(ids.len(), 6, "{before}");
    let max_before = ids.iter().map(token).max().unwrap();
    assert_eq!(token(&up), max_before);

    let old = env.kill9();
    // The next command starts a new daemon, which restores the locks from the database.
    let after_ids = identities(&env);
    let new = env.daemon_pid();
    assert_ne!(new, old);
    assert!(!alive(old));
    assert_eq!(after_ids, ids, "same holders, paths, modes and tokens");
    // The parked wait ended with the daemon (its client was told), and is not restored.
    let out = waiting.finish(DEADLINE);
    assert!(!out.status.success(), "{out:?}");
    assert_eq!(list(&env)["waiters"], serde_json::json!([]));
    for (b, a) in before["locks"]
        .as_array()
        .unwrap()
        .iter()
        .zip(list(&env)["locks"].as_array().unwrap())
    {
        // A lease comes back no longer than it was, and not expired (10 minutes).
        let (eb, ea) = (
            ts_micros(b["expires_at"].as_str().unwrap()),
            ts_micros(a["expires_at"].as_str().unwrap()),
        );
        assert!(
            ea <= eb && ea > ts_micros(b["acquired_at"].as_str().unwrap()),
            "{b} → {a}"
        );
    }

    // They still exclude, and the next grant's token is above every earlier one.
    let f = env.maos_fail(&["lock", "acquire", "docs/x.md", "--agent", &ag[1]]);
    assert_eq!(f.code, "lock_conflict", "{f:?}");
    let next = token(&acquire(&env, &ag[1], "new.rs", &[]));
    assert!(next > max_before, "token {next} after {max_before}");
    // The holders release as before the restart.
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", &ag[0]]);
    assert_eq!(held(&env).len(), 6);
    assert_eq!(env.integrity_check(), "ok");
}

#[test]
fn fencing_tokens_keep_rising_across_kill_9_even_with_nothing_held() {
    let (env, ag) = setup(&["a", "b"]);
    let mut last = 0;
    for round in 0..3 {
        let t1 = token(&acquire(&env, &ag[0], "f.rs", &[]));
        let t2 = token(&acquire(&env, &ag[1], "g.rs", &["--mode", "directory"]));
        assert!(t1 > last && t2 > t1, "round {round}: {last} → {t1} → {t2}");
        last = t2;
        env.maos_json(&["lock", "release-all", "--agent", &ag[0]]);
        env.maos_json(&["lock", "release-all", "--agent", &ag[1]]);
        assert!(held(&env).is_empty());
        env.kill9();
    }
    // Every grant ever made got a distinct token, increasing with the timeline.
    let tokens: Vec<u64> = env
        .events(&["--type", "lock_acquired"])
        .iter()
        .map(|e| e["data"]["token"].as_u64().unwrap())
        .collect();
    assert_eq!(tokens.len(), 6);
    assert!(tokens.windows(2).all(|w| w[1] > w[0]), "{tokens:?}");
}

#[test]
fn an_expired_lease_is_reaped_and_its_waiter_served() {
    let (env, ag) = setup(&["sleepy", "waiter", "late"]);
    let (a, b, c) = (&ag[0], &ag[1], &ag[2]);
    let lock = acquire(&env, a, "src/a.rs", &["--ttl", "300ms"]);
    let (acquired, expires) = (
        ts_micros(lock["acquired_at"].as_str().unwrap()),
        ts_micros(lock["expires_at"].as_str().unwrap()),
    );
    assert_eq!(expires - acquired, 300_000, "{lock}");
    // B waits for it; nothing else happens: the daemon's own timer must reap the lease.
    let waiting = acquire_bg(&env, b, "src/a.rs", &["--wait-forever"]);
    // How soon is the daemon's own clock's to say (`granted_at` below): the client's time
    // also counts a process ending on a loaded machine.
    let got = json_of("waiter", &waiting.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
    assert!(token(&got) > token(&lock));
    let granted_at = ts_micros(got["acquired_at"].as_str().unwrap());
    assert!(
        granted_at >= expires,
        "granted before the lease ran out: {got} vs {lock}"
    );
    assert!(
        granted_at < expires + 2_000_000,
        "reaped late: {got} vs {lock}"
    );

    let ev = expired(&env);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["agent_id"], a.as_str());
    assert_eq!(ev[0]["data"]["token"], lock["token"]);
    assert_eq!(ev[0]["data"]["path"], "src/a.rs");
    assert_eq!(ev[0]["data"]["mode"], "write");
    assert!(ts_micros(ev[0]["ts"].as_str().unwrap()) >= expires);
    assert_eq!(
        held(&env),
        vec![(b.clone(), "src/a.rs".into(), "write".into(), token(&got))]
    );

    // Without a waiter: the lease runs out and the next request simply gets it.
    let short_lease = acquire(
        &env,
        c,
        "lib/c.rs",
        &["--ttl", "300ms", "--mode", "directory"],
    );
    wait_until(DEADLINE, "the lease of lib/c.rs is reaped", || {
        !held(&env).iter().any(|h| h.1 == "lib/c.rs")
    });
    let ev = expired(&env);
    assert_eq!(ev.len(), 2);
    assert_eq!(ev[1]["data"]["token"], short_lease["token"]);
    assert_eq!(ev[1]["data"]["mode"], "directory");
    let again = acquire(&env, a, "lib/c.rs/x.rs", &["--no-wait"]);
    assert!(token(&again) > token(&got));
}

#[test]
fn a_heartbeat_keeps_a_lease_alive_and_silence_lets_it_expire() {
    let (env, ag) = setup(&["alive", "other"]);
    let (a, b) = (&ag[0], &ag[1]);
    // A lease long enough that a heartbeat (a `maos` process) is sure to come within it even
    // on a loaded machine, where starting a process can take a good part of a second.
    let lock = acquire(&env, a, "hb.rs", &["--ttl", "2s"]);
    let expires = ts_micros(lock["expires_at"].as_str().unwrap());
    // Heartbeats, back to back, for over two lease lengths.
    let until = Instant::now() + std::time::Duration::from_millis(4200);
    while Instant::now() < until {
        let r = env.maos_json(&["agent", "heartbeat", a]);
        assert_eq!(r["leases"], 1, "{r}");
    }
    let l = list(&env);
    assert_eq!(l["locks"][0]["token"], lock["token"], "still held: {l}");
    assert!(ts_micros(l["locks"][0]["expires_at"].as_str().unwrap()) > expires + 2_100_000);
    assert!(expired(&env).is_empty());
    // Silence: the lease runs out.
    let waiting = acquire_bg(&env, b, "hb.rs", &["--wait", "20s"]);
    let got = json_of("waiter", &waiting.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
    assert_eq!(expired(&env).len(), 1);
}

#[test]
fn a_lease_that_runs_out_while_the_daemon_is_down_is_reaped_after_the_restart() {
    let (env, ag) = setup(&["crashy", "next"]);
    let (a, b) = (&ag[0], &ag[1]);
    let short_lease = acquire(&env, a, "src/a.rs", &["--ttl", "1s"]);
    let long_lease = acquire(&env, a, "src/keep.rs", &[]);
    let expires = ts_micros(short_lease["expires_at"].as_str().unwrap());
    env.kill9();

    // Restarted (by this command): the short lease is reaped at once or by the timer, with
    // its event; the long one stays.
    let first = list(&env);
    let waiting = acquire_bg(&env, b, "src/a.rs", &["--wait", "20s"]);
    let got = json_of("waiter after the restart", &waiting.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
    assert!(token(&got) > token(&long_lease), "{got}");
    let ev = expired(&env);
    assert_eq!(ev.len(), 1, "{ev:?} (first list after restart: {first})");
    assert_eq!(ev[0]["data"]["token"], short_lease["token"]);
    assert_eq!(ev[0]["agent_id"], a.as_str());
    assert!(
        ts_micros(ev[0]["ts"].as_str().unwrap()) >= expires,
        "{}",
        ev[0]
    );
    let mut now = held(&env);
    now.sort();
    let mut want = vec![
        (
            b.clone(),
            "src/a.rs".to_string(),
            "write".to_string(),
            token(&got),
        ),
        (
            a.clone(),
            "src/keep.rs".into(),
            "write".into(),
            token(&long_lease),
        ),
    ];
    want.sort();
    assert_eq!(now, want);

    // What was reaped stays reaped: another crash brings back exactly these two.
    env.kill9();
    let mut again = held(&env);
    again.sort();
    assert_eq!(again, want);
    assert_eq!(expired(&env).len(), 1);
}
