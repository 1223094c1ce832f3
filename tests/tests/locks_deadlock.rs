//! Deadlocks between agents waiting for each other's locks: the cycle is found when it forms,
//! the youngest agent in it loses (its wait ends with `deadlock`), the others go on.

mod locks_support;

use locks_support::{
    acquire, acquire_bg, held, refused, setup, short, token, wait_queued, waiters,
};
use maos_tests::{DEADLINE, Env, Value, failure_of, json_of};

/// The `deadlock_detected` events, oldest first.
fn deadlocks(env: &Env) -> Vec<Value> {
    env.events(&["--type", "deadlock_detected"])
}

/// (waiter, holder, path) edges of a `deadlock_detected` event's cycle, sorted.
fn cycle(e: &Value) -> Vec<(String, String, String)> {
    let mut edges: Vec<_> = e["data"]["cycle"]
        .as_array()
        .unwrap_or_else(|| panic!("no cycle in {e}"))
        .iter()
        .map(|c| {
            (
                c["waiter"].as_str().unwrap().to_string(),
                c["holder"].as_str().unwrap().to_string(),
                c["path"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    edges.sort();
    edges
}

/// The expected cycle, as [`cycle`] reports it: (waiter, holder, path) edges, sorted.
fn edges(list: &[(&str, &str, &str)]) -> Vec<(String, String, String)> {
    let mut v: Vec<_> = list
        .iter()
        .map(|(w, h, p)| (w.to_string(), h.to_string(), p.to_string()))
        .collect();
    v.sort();
    v
}

#[test]
fn two_agents_waiting_for_each_other_the_younger_requester_gives_way() {
    // A is registered first: B is the younger.
    let (env, ag) = setup(&["alpha", "beta"]);
    let (a, b) = (&ag[0], &ag[1]);
    acquire(&env, a, "f1", &[]);
    let tb = token(&acquire(&env, b, "f2", &[]));
    let mut a_waits = acquire_bg(&env, a, "f2", &["--wait-forever"]);
    wait_queued(&env, a, "f2");

    // B asking for f1 closes the cycle; B is the youngest, so its own request fails at once
    // (a --wait-forever that would otherwise never end).
    let f = refused(&env, b, "f1", &["--wait-forever"]);
    assert_eq!((f.exit, f.code.as_str()), (1, "deadlock"), "{f:?}");
    for part in [short(a), short(b), "alpha", "beta", "f1", "f2"] {
        assert!(f.message.contains(part), "message lacks {part:?}: {f:?}");
    }
    let d = deadlocks(&env);
    assert_eq!(d.len(), 1, "{d:?}");
    assert_eq!(d[0]["data"]["victim"], b.as_str());
    assert_eq!(d[0]["agent_id"], b.as_str());
    assert_eq!(cycle(&d[0]), edges(&[(a, b, "f2"), (b, a, "f1")]));

    // Exactly one proceeds: A still waits (only A is queued), and gets f2 once B lets go.
    assert_eq!(waiters(&env), vec![(a.clone(), "f2".to_string())]);
    assert!(a_waits.running());
    env.maos_json(&["lock", "release", "f2", "--agent", b]);
    let got = json_of("A's wait", &a_waits.finish(DEADLINE));
    assert_eq!(got["holder"], a.as_str());
    assert_eq!(got["path"], "f2");
    assert!(token(&got) > tb);
    let mut now: Vec<_> = held(&env).into_iter().map(|h| (h.0, h.1)).collect();
    now.sort();
    assert_eq!(now.len(), 2);
    assert!(now.iter().all(|h| &h.0 == a), "A holds f1 and f2: {now:?}");
}

#[test]
fn two_agents_waiting_for_each_other_the_younger_waiter_gives_way() {
    // C is registered first: D is the younger, and this time D is the one already waiting.
    let (env, ag) = setup(&["gamma", "delta"]);
    let (c, d) = (&ag[0], &ag[1]);
    acquire(&env, d, "g1", &[]);
    acquire(&env, c, "g2", &[]);
    let d_waits = acquire_bg(&env, d, "g2", &["--wait-forever"]);
    wait_queued(&env, d, "g2");
    let mut c_waits = acquire_bg(&env, c, "g1", &["--wait-forever"]);

    // D's parked wait ends with the deadlock; C's request is queued instead.
    let f = failure_of("D's wait", &d_waits.finish(DEADLINE));
    assert_eq!((f.exit, f.code.as_str()), (1, "deadlock"), "{f:?}");
    for part in [short(c), short(d), "g1", "g2"] {
        assert!(f.message.contains(part), "message lacks {part:?}: {f:?}");
    }
    assert!(
        f.message
            .contains(&format!("delta ({}) is the youngest", short(d))),
        "{f:?}"
    );
    let ev = deadlocks(&env);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["data"]["victim"], d.as_str());
    assert_eq!(cycle(&ev[0]), edges(&[(c, d, "g1"), (d, c, "g2")]));
    wait_queued(&env, c, "g1");
    assert_eq!(waiters(&env), vec![(c.clone(), "g1".to_string())]);
    assert!(c_waits.running(), "the older agent keeps waiting");

    // The loser gives way by releasing: C proceeds.
    env.maos_json(&["lock", "release-all", "--agent", d]);
    let got = json_of("C's wait", &c_waits.finish(DEADLINE));
    assert_eq!(
        (got["holder"].as_str(), got["path"].as_str()),
        (Some(c.as_str()), Some("g1"))
    );
}

#[test]
fn a_three_agent_cycle_ends_the_youngest_agents_wait_not_the_last_request() {
    // X, Y, Z registered in this order: Z is the youngest.
    let (env, ag) = setup(&["x", "y", "z"]);
    let (x, y, z) = (&ag[0], &ag[1], &ag[2]);
    acquire(&env, x, "h1", &[]);
    acquire(&env, y, "h2", &[]);
    let tz = token(&acquire(&env, z, "h3", &[]));

    // Z → X, then X → Y: no cycle yet.
    let z_waits = acquire_bg(&env, z, "h1", &["--wait-forever"]);
    wait_queued(&env, z, "h1");
    let mut x_waits = acquire_bg(&env, x, "h2", &["--wait-forever"]);
    wait_queued(&env, x, "h2");
    assert!(deadlocks(&env).is_empty());

    // Y → Z closes X → Y → Z → X. Y made the last request, but Z is the youngest.
    let mut y_waits = acquire_bg(&env, y, "h3", &["--wait-forever"]);
    let f = failure_of("Z's wait", &z_waits.finish(DEADLINE));
    assert_eq!(f.code, "deadlock", "{f:?}");
    for part in [short(x), short(y), short(z), "h1", "h2", "h3"] {
        assert!(f.message.contains(part), "message lacks {part:?}: {f:?}");
    }
    let ev = deadlocks(&env);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["data"]["victim"], z.as_str());
    assert_eq!(ev[0]["agent_id"], z.as_str());
    assert_eq!(
        cycle(&ev[0]),
        edges(&[(x, y, "h2"), (y, z, "h3"), (z, x, "h1")])
    );
    wait_queued(&env, y, "h3");
    assert_eq!(
        waiters(&env),
        vec![(x.clone(), "h2".to_string()), (y.clone(), "h3".to_string())]
    );
    assert!(x_waits.running() && y_waits.running());

    // Z lets go of h3: Y gets it; Y lets go of h2: X gets it.
    env.maos_json(&["lock", "release", "h3", "--agent", z]);
    let gy = json_of("Y's wait", &y_waits.finish(DEADLINE));
    assert_eq!(gy["holder"], y.as_str());
    assert!(token(&gy) > tz);
    assert!(x_waits.running(), "X still waits for h2");
    env.maos_json(&["lock", "release", "h2", "--agent", y]);
    let gx = json_of("X's wait", &x_waits.finish(DEADLINE));
    assert_eq!(
        (gx["holder"].as_str(), gx["path"].as_str()),
        (Some(x.as_str()), Some("h2"))
    );
    assert!(token(&gx) > token(&gy));
    assert!(waiters(&env).is_empty());
    assert_eq!(deadlocks(&env).len(), 1, "no further deadlock");
}

#[test]
fn two_readers_upgrading_at_once_deadlock_and_the_younger_gives_way() {
    let (env, ag) = setup(&["first", "second"]);
    let (a, b) = (&ag[0], &ag[1]);
    acquire(&env, a, "p.rs", &["--mode", "read"]);
    let tb = token(&acquire(&env, b, "p.rs", &["--mode", "read"]));
    // A's upgrade waits for B's read lock; B's upgrade would wait for A's: a cycle on one path.
    let mut a_up = acquire_bg(&env, a, "p.rs", &["--wait-forever"]);
    wait_queued(&env, a, "p.rs");
    let f = refused(&env, b, "p.rs", &["--wait-forever"]);
    assert_eq!(f.code, "deadlock", "{f:?}");
    assert!(
        f.message.contains(short(a)) && f.message.contains(short(b)),
        "{f:?}"
    );
    let ev = deadlocks(&env);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["data"]["victim"], b.as_str());
    assert_eq!(cycle(&ev[0]), edges(&[(a, b, "p.rs"), (b, a, "p.rs")]));
    // B still reads; A's upgrade goes through once B stops reading.
    assert!(a_up.running());
    assert_eq!(held(&env).len(), 2);
    env.maos_json(&["lock", "release", "p.rs", "--agent", b]);
    let up = json_of("A's upgrade", &a_up.finish(DEADLINE));
    assert_eq!(
        (up["holder"].as_str(), up["mode"].as_str()),
        (Some(a.as_str()), Some("write"))
    );
    assert!(token(&up) > tb);
    assert_eq!(
        held(&env),
        vec![(a.clone(), "p.rs".into(), "write".into(), token(&up))],
        "the upgrade replaced A's read lock"
    );
}
