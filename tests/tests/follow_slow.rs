//! A subscriber that falls behind (the daemon side of `maos events --follow`, the dashboard's
//! stream and `maos top`): the daemon keeps the last 4,096 live events for it, and a subscriber
//! further behind than that catches up from the database. It never silently skips events.

use std::time::Instant;

use maos_proto::{ClientMsg, EventFilter, ServerMsg};
use maos_tests::{DEADLINE, Env, Raw, json};

/// Writers at once (each its own connection, one request at a time).
const WRITERS: usize = 16;
/// Locks each writer takes and releases.
const ROUNDS: usize = 160;
/// More events than the daemon's live buffer (4,096) holds for a subscriber, with room for
/// what the socket itself buffers (about 100 of these events) while the subscriber does not
/// read.
const EVENTS: usize = WRITERS * ROUNDS * 2;

/// The project's newest event number.
fn last_seq(raw: &mut Raw, root: &str) -> u64 {
    let r = raw.request(
        Some(root),
        json!({"request": "events", "filter": {}, "limit": 1}),
    );
    r["Ok"]["data"]
        .as_array()
        .and_then(|e| e.last())
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no newest event in {r}"))
}

/// The next event of the subscription (its seq), failing on anything else.
fn next_seq(sub: &mut Raw) -> u64 {
    match sub.recv() {
        Ok(ServerMsg::Event { event, .. }) => event.seq,
        other => panic!("the subscription said {other:?} instead of the next event"),
    }
}

/// A subscriber that stops reading while 5,120 events (locks taken and released) commit, then reads on: it
/// gets every one of them, in order, with no gap and no repeat.
#[test]
fn a_subscriber_thousands_of_events_behind_gets_every_event_in_order() {
    let env = Env::new();
    let session = env.session("a slow follower", &[]);
    let agents: Vec<String> = (0..WRITERS)
        .map(|w| env.agent(Some(&session), &format!("writer{w}"), "lock and release"))
        .collect();
    let root = Env::project_root(&env.project);
    let mut probe = env.raw();
    probe.hello();
    let before = last_seq(&mut probe, &root);

    let mut sub = env.raw();
    sub.hello();
    sub.send(&ClientMsg::Subscribe {
        id: 1,
        project: root.clone(),
        filter: EventFilter::default(),
    });
    match sub.recv() {
        Ok(ServerMsg::Response { result: Ok(_), .. }) => {}
        other => panic!("subscribe: {other:?}"),
    }
    // The history up to now, then the subscriber stops reading.
    let mut seen = Vec::new();
    while seen.last().is_none_or(|s| *s < before) {
        seen.push(next_seq(&mut sub));
    }

    // Each writer an agent taking and releasing a lock on a long path (about 2 KB events, so
    // the socket's buffer holds few of them): two events a round.
    let long = format!("src/{}/f.rs", "slow-follower".repeat(150));
    std::thread::scope(|s| {
        for (w, agent) in agents.iter().enumerate() {
            let (env, root, long) = (&env, &root, &long);
            s.spawn(move || {
                let mut raw = env.raw();
                raw.hello();
                let path = format!("{long}{w}");
                for i in 0..ROUNDS {
                    let r = raw.request(
                        Some(root),
                        json!({"request": "lock_acquire", "agent": agent, "path": path,
                               "mode": "write", "wait": {"policy": "no_wait"}}),
                    );
                    assert!(r["Ok"].is_object(), "acquire {i}: {r}");
                    let r = raw.request(
                        Some(root),
                        json!({"request": "lock_release", "agent": agent, "path": path}),
                    );
                    assert!(r["Ok"].is_object(), "release {i}: {r}");
                }
            });
        }
    });
    let last = last_seq(&mut probe, &root);
    assert!(
        last >= before + EVENTS as u64,
        "{EVENTS} events committed after event {before}, yet the newest is {last}"
    );

    // It reads on: every event after `before`, each once, in order (a read times out after
    // the harness's deadline rather than hang).
    let started = Instant::now();
    while seen.last().is_some_and(|s| *s < last) {
        seen.push(next_seq(&mut sub));
        assert!(
            started.elapsed() < DEADLINE * 4,
            "the subscriber did not catch up in time: at event {:?} of {last}",
            seen.last()
        );
    }
    let after: Vec<u64> = seen.iter().copied().filter(|s| *s > before).collect();
    let want: Vec<u64> = (before + 1..=last).collect();
    if after != want {
        let gap = after
            .windows(2)
            .find(|w| w[1] != w[0] + 1)
            .map(|w| format!("{} then {}", w[0], w[1]));
        panic!(
            "the subscriber got {} of events {}..={last} (first break: {gap:?})",
            after.len(),
            before + 1
        );
    }
}
