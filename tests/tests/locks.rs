//! File locks through the CLI: conflicts and scopes, bounded and unbounded waits, who may
//! release, what finishing an agent lets go of, and `maos ps`.

use std::time::{Duration, Instant};

mod locks_support;

use locks_support::{
    acquire, acquire_bg, check_blocked, held, list, refused, setup, short, token, wait_queued,
};
use maos_tests::{DEADLINE, Value, json_of, ts_micros, wait_until};

#[test]
fn a_second_writer_is_refused_with_the_holder_named_and_the_conflict_recorded() {
    let (env, ag) = setup(&["backend", "frontend"]);
    let (a, b) = (&ag[0], &ag[1]);
    let lock = acquire(&env, a, "src/a.rs", &[]);
    assert_eq!(lock["path"], "src/a.rs");
    assert_eq!(lock["mode"], "write", "write is the default mode");
    assert_eq!(lock["holder"], a.as_str());
    assert_eq!(lock["holder_role"], "backend");
    for key in ["session_id", "acquired_at", "expires_at"] {
        assert!(lock[key].is_string(), "{key} missing: {lock}");
    }
    let t1 = token(&lock);

    let f = refused(&env, b, "src/a.rs", &[]);
    assert_eq!(f.exit, 1, "{f:?}");
    assert_eq!(f.code, "lock_conflict", "{f:?}");
    for part in ["backend", short(a), "src/a.rs"] {
        assert!(f.message.contains(part), "message lacks {part:?}: {f:?}");
    }
    // Without --json: the same refusal, exit 1, one line on stderr.
    let out = env.maos(&["lock", "acquire", "src/a.rs", "--agent", b]);
    assert_eq!(out.status.code(), Some(1));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("src/a.rs") && stderr.contains("backend"),
        "{stderr}"
    );

    let conflicts = env.events(&["--type", "conflict_detected"]);
    assert_eq!(conflicts.len(), 2, "one per refusal: {conflicts:?}");
    let c = &conflicts[0];
    assert_eq!(c["agent_id"], b.as_str());
    assert_eq!(c["data"]["path"], "src/a.rs");
    assert_eq!(c["data"]["mode"], "write");
    assert_eq!(c["data"]["holders"], serde_json::json!([a]));

    // Nothing changed: A still holds it with the same token, and `lock check` says so.
    assert_eq!(
        held(&env),
        vec![(a.clone(), "src/a.rs".into(), "write".into(), t1)]
    );
    let check = check_blocked(&env, "src/a.rs", &["--agent", b]);
    assert_eq!(check["path"], "src/a.rs");
    assert_eq!(check["mode"], "write");
    assert_eq!(check["blocked"], true);
    assert_eq!(check["holders"][0]["holder"], a.as_str());
    assert_eq!(check["holders"][0]["token"], t1);
    assert_eq!(check["queued"], serde_json::json!([]));
    let own = env.maos_json(&["lock", "check", "src/a.rs", "--agent", a]);
    assert_eq!(own["blocked"], false, "a holder is never blocked by itself");

    // Re-acquiring is idempotent: same token.
    assert_eq!(token(&acquire(&env, a, "src/a.rs", &[])), t1);
}

#[test]
fn readers_share_a_lone_reader_upgrades_and_writers_wait_for_readers() {
    let (env, ag) = setup(&["reader", "other"]);
    let (a, b) = (&ag[0], &ag[1]);
    let ra = token(&acquire(&env, a, "docs/r.md", &["--mode", "read"]));
    let rb = token(&acquire(&env, b, "docs/r.md", &["--mode", "read"]));
    assert!(rb > ra);
    let mut readers: Vec<_> = held(&env).into_iter().map(|h| h.0).collect();
    readers.sort();
    let mut want = vec![a.clone(), b.clone()];
    want.sort();
    assert_eq!(readers, want, "two readers share docs/r.md");

    // An upgrade while another reader holds it is a conflict naming that reader.
    let f = refused(&env, a, "docs/r.md", &["--mode", "write"]);
    assert_eq!(f.code, "lock_conflict");
    assert!(
        f.message.contains(short(b)) && f.message.contains("other"),
        "{f:?}"
    );

    // Alone, the reader upgrades: a new, higher token replaces its read lock.
    env.maos_json(&["lock", "release", "docs/r.md", "--agent", b]);
    let up = acquire(&env, a, "docs/r.md", &["--mode", "write"]);
    assert_eq!(up["mode"], "write");
    assert!(token(&up) > rb, "{up}");
    assert_eq!(
        held(&env),
        vec![(a.clone(), "docs/r.md".into(), "write".into(), token(&up))]
    );
    // On the timeline the read lock ends just before the write lock begins.
    let ev = env.events(&[
        "--agent",
        a,
        "--type",
        "lock_released",
        "--type",
        "lock_acquired",
    ]);
    let tail: Vec<_> = ev[ev.len() - 2..]
        .iter()
        .map(|e| {
            (
                e["type"].as_str().unwrap(),
                e["data"]["mode"].as_str().unwrap(),
                token(&e["data"]),
            )
        })
        .collect();
    assert_eq!(
        tail,
        [
            ("lock_released", "read", ra),
            ("lock_acquired", "write", token(&up))
        ]
    );
    assert_eq!(ev[ev.len() - 2]["data"]["reason"], "upgraded to write");
    // Now nobody else may read it; its holder asking for read keeps the write lock.
    assert_eq!(
        refused(&env, b, "docs/r.md", &["--mode", "read"]).code,
        "lock_conflict"
    );
    let again = acquire(&env, a, "docs/r.md", &["--mode", "read"]);
    assert_eq!(
        (again["mode"].as_str(), token(&again)),
        (Some("write"), token(&up))
    );
}

#[test]
fn a_directory_lock_covers_its_subtree_and_a_workspace_lock_everything() {
    let (env, ag) = setup(&["dir", "files", "ws"]);
    let (d, f, w) = (&ag[0], &ag[1], &ag[2]);
    let dir = acquire(&env, d, "src", &["--mode", "directory"]);
    assert_eq!(
        (dir["path"].as_str(), dir["mode"].as_str()),
        (Some("src"), Some("directory"))
    );

    for (path, mode) in [
        ("src/a.rs", "write"),
        ("src/deep/er/b.rs", "write"),
        ("src/deep", "directory"),
        ("src", "read"),
        (".", "directory"),
    ] {
        let e = refused(&env, f, path, &["--mode", mode]);
        assert_eq!(e.code, "lock_conflict", "{path} ({mode}): {e:?}");
        assert!(
            e.message.contains("src") && e.message.contains(short(d)),
            "{e:?}"
        );
    }
    // A sibling whose name merely starts with "src" is outside the subtree.
    acquire(&env, f, "srcx/c.rs", &[]);
    acquire(&env, f, "README.md", &["--mode", "read"]);

    // The workspace lock conflicts with every holder...
    let e = refused(&env, w, ".", &["--mode", "workspace"]);
    assert_eq!(e.code, "lock_conflict");
    assert!(
        e.message.contains(short(d)) && e.message.contains(short(f)),
        "{e:?}"
    );
    let check = check_blocked(&env, "anything", &["--mode", "workspace"]);
    assert_eq!(check["path"], ".", "a workspace lock lives at the root");
    assert_eq!(check["blocked"], true);
    assert_eq!(check["holders"].as_array().unwrap().len(), 3, "{check}");

    // ...and once it is granted, blocks everything for everyone else.
    env.maos_json(&["lock", "release-all", "--agent", d]);
    env.maos_json(&["lock", "release-all", "--agent", f]);
    let ws = acquire(&env, w, "whatever/path", &["--mode", "workspace"]);
    assert_eq!(ws["path"], ".");
    assert_eq!(ws["mode"], "workspace");
    for (path, mode) in [
        ("src/a.rs", "write"),
        ("README.md", "read"),
        ("docs", "directory"),
        ("x", "workspace"),
    ] {
        let e = refused(&env, f, path, &["--mode", mode]);
        assert_eq!(e.code, "lock_conflict", "{path} ({mode}): {e:?}");
        assert!(e.message.contains("ws"), "{e:?}");
    }
    // Its holder still takes anything it likes.
    acquire(&env, w, "src/a.rs", &[]);
    assert_eq!(
        env.events(&["--type", "conflict_detected"]).len(),
        5 + 1 + 4
    );
}

#[test]
fn a_bounded_wait_times_out_no_sooner_than_its_bound() {
    let (env, ag) = setup(&["holder", "waiter"]);
    let (a, b) = (&ag[0], &ag[1]);
    acquire(&env, a, "src/a.rs", &[]);
    let started = Instant::now();
    let f = refused(&env, b, "src/a.rs", &["--wait", "300ms"]);
    let took = started.elapsed();
    assert_eq!(f.exit, 1);
    assert_eq!(f.code, "lock_timeout", "{f:?}");
    assert!(f.message.contains("src/a.rs"), "{f:?}");
    assert!(took >= Duration::from_millis(300), "gave up after {took:?}");
    // It comes back (the bound on how long the wait lasted is the daemon's own clock below:
    // this one also counts starting a process on a loaded machine).
    assert!(
        took < Duration::from_millis(300) + maos_tests::DEADLINE,
        "waited {took:?} for 300ms"
    );

    let wait = env.events(&["--type", "lock_wait"]);
    let timeout = env.events(&["--type", "lock_timeout"]);
    assert_eq!((wait.len(), timeout.len()), (1, 1), "{wait:?} {timeout:?}");
    assert_eq!(wait[0]["agent_id"], b.as_str());
    assert_eq!(wait[0]["data"]["path"], "src/a.rs");
    assert_eq!(wait[0]["data"]["mode"], "write");
    assert_eq!(wait[0]["data"]["holders"], serde_json::json!([a]));
    assert_eq!(timeout[0]["agent_id"], b.as_str());
    assert_eq!(timeout[0]["data"]["path"], "src/a.rs");
    // The daemon's own clock agrees: the wait lasted at least its bound.
    let waited =
        ts_micros(timeout[0]["ts"].as_str().unwrap()) - ts_micros(wait[0]["ts"].as_str().unwrap());
    assert!(
        (300_000..2_300_000).contains(&waited),
        "lock_wait → lock_timeout took {waited} µs"
    );
    // The timed-out waiter left the queue and got nothing.
    let l = list(&env);
    assert_eq!(l["waiters"], serde_json::json!([]));
    assert_eq!(l["locks"].as_array().unwrap().len(), 1);

    // A bounded wait that the holder ends in time is granted.
    let mut child = acquire_bg(&env, b, "src/a.rs", &["--wait", "20s"]);
    wait_queued(&env, b, "src/a.rs");
    let w = list(&env)["waiters"][0].clone();
    assert!(
        w["deadline"].is_string(),
        "a bounded wait has a deadline: {w}"
    );
    assert_eq!(
        ts_micros(w["deadline"].as_str().unwrap()) - ts_micros(w["since"].as_str().unwrap()),
        20_000_000
    );
    assert!(child.running());
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", a]);
    let got = json_of("bounded wait", &child.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
}

#[test]
fn a_wait_forever_is_granted_with_a_new_token_when_the_holder_releases() {
    let (env, ag) = setup(&["holder", "waiter"]);
    let (a, b) = (&ag[0], &ag[1]);
    let t1 = token(&acquire(&env, a, "src/a.rs", &[]));
    let mut child = acquire_bg(&env, b, "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, b, "src/a.rs");
    let l = list(&env);
    let w = &l["waiters"][0];
    assert_eq!(w["mode"], "write");
    assert_eq!(w["role"], "waiter");
    assert!(w["since"].is_string());
    assert_eq!(w["deadline"], Value::Null, "waits forever: {w}");
    assert!(child.running(), "still waiting while A holds it");

    let released = env.maos_json(&["lock", "release", "src/a.rs", "--agent", a]);
    assert_eq!(released.as_array().unwrap().len(), 1, "{released}");
    assert_eq!(released[0]["token"], t1);
    let out = child.finish(DEADLINE);
    assert_eq!(out.status.code(), Some(0));
    let got = json_of("wait-forever", &out);
    assert_eq!(got["path"], "src/a.rs");
    assert_eq!(got["holder"], b.as_str());
    let t2 = token(&got);
    assert!(t2 > t1, "fencing token {t2} after {t1}");
    assert_eq!(
        held(&env),
        vec![(b.clone(), "src/a.rs".into(), "write".into(), t2)]
    );
    assert_eq!(list(&env)["waiters"], serde_json::json!([]));

    // The timeline: A's grant, B's wait, A's release, B's grant (waited), in this order.
    let events = env.events(&[
        "--type",
        "lock_acquired",
        "--type",
        "lock_wait",
        "--type",
        "lock_released",
    ]);
    let kinds: Vec<_> = events.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(
        kinds,
        [
            "lock_acquired",
            "lock_wait",
            "lock_released",
            "lock_acquired"
        ]
    );
    assert_eq!(events[0]["data"]["token"], t1);
    assert_eq!(events[0]["data"]["waited"], false);
    assert_eq!(events[1]["agent_id"], b.as_str());
    assert_eq!(events[1]["data"]["path"], "src/a.rs");
    assert_eq!(events[3]["agent_id"], b.as_str());
    assert_eq!(events[3]["data"]["token"], t2);
    assert_eq!(events[3]["data"]["waited"], true);
    assert_eq!(events[3]["data"]["expires_at"], got["expires_at"]);
}

#[test]
fn only_the_holder_releases_unless_forced_and_forcing_is_logged() {
    let (env, ag) = setup(&["holder", "intruder"]);
    let (a, b) = (&ag[0], &ag[1]);
    let t = token(&acquire(&env, a, "src/a.rs", &[]));

    let f = env.maos_fail(&["lock", "release", "src/a.rs", "--agent", b]);
    assert_eq!((f.exit, f.code.as_str()), (1, "not_lock_holder"), "{f:?}");
    assert!(f.message.contains(a.as_str()), "names the holder: {f:?}");
    assert_eq!(held(&env).len(), 1, "a refused release changes nothing");
    assert!(env.events(&["--type", "lock_released"]).is_empty());
    // Nothing held there at all.
    let f = env.maos_fail(&["lock", "release", "src/b.rs", "--agent", b]);
    assert_eq!(f.code, "not_found", "{f:?}");

    let released = env.maos_json(&["lock", "release", "src/a.rs", "--force"]);
    assert_eq!(released[0]["token"], t);
    assert_eq!(released[0]["holder"], a.as_str());
    assert!(held(&env).is_empty());
    let ev = env.events(&["--type", "lock_released"]);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["agent_id"], a.as_str(), "recorded against the holder");
    assert_eq!(ev[0]["data"]["token"], t);
    assert_eq!(ev[0]["data"]["forced"], true);
    assert_eq!(ev[0]["data"]["by"], "e2e-tester", "who forced it: $USER");

    // An ordinary release is not marked forced.
    acquire(&env, b, "src/a.rs", &[]);
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", b]);
    let ev = env.events(&["--type", "lock_released"]);
    assert_eq!(ev[1]["data"]["forced"], false, "{}", ev[1]);
}

#[test]
fn release_all_lets_go_of_every_lock_and_wait_of_an_agent() {
    let (env, ag) = setup(&["many", "other"]);
    let (a, b) = (&ag[0], &ag[1]);
    let mut tokens = vec![
        token(&acquire(&env, a, "src/a.rs", &[])),
        token(&acquire(&env, a, "docs", &["--mode", "directory"])),
        token(&acquire(&env, a, "README.md", &["--mode", "read"])),
    ];
    let kept = token(&acquire(&env, b, "other.rs", &[]));
    // A also waits for B's lock: release-all ends that wait too.
    let mut child = acquire_bg(&env, a, "other.rs", &["--wait-forever"]);
    wait_queued(&env, a, "other.rs");
    assert!(child.running());

    let released = env.maos_json(&["lock", "release-all", "--agent", a]);
    let mut got: Vec<u64> = released.as_array().unwrap().iter().map(token).collect();
    got.sort_unstable();
    tokens.sort_unstable();
    assert_eq!(got, tokens);
    assert_eq!(
        held(&env),
        vec![(b.clone(), "other.rs".into(), "write".into(), kept)]
    );
    let out = child.finish(DEADLINE);
    assert_eq!(out.status.code(), Some(1), "the ended wait fails");
    assert!(list(&env)["waiters"].as_array().unwrap().is_empty());
    let ev = env.events(&["--type", "lock_released", "--agent", a]);
    assert_eq!(ev.len(), 3);
    assert!(ev.iter().all(|e| e["data"]["reason"].is_string()), "{ev:?}");
    // Nothing left: an empty array, not an error.
    assert_eq!(
        env.maos_json(&["lock", "release-all", "--agent", a]),
        serde_json::json!([])
    );
}

#[test]
fn a_finished_agent_lets_go_of_its_locks_in_the_same_commit_and_a_waiter_gets_them() {
    let (env, ag) = setup(&["done", "failing", "waiter"]);
    let (a, f, w) = (&ag[0], &ag[1], &ag[2]);
    env.maos_json(&["session", "start"]);
    for id in &ag {
        env.maos_json(&["agent", "start", id]);
    }
    let ta = token(&acquire(&env, a, "src/a.rs", &[]));
    acquire(&env, a, "src", &["--mode", "read"]);
    let tf = token(&acquire(&env, f, "lib/f.rs", &[]));
    let mut child = acquire_bg(&env, w, "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, w, "src/a.rs");
    assert!(child.running(), "waits while the agent runs");

    let done = env.maos_json(&["agent", "complete", a]);
    assert_eq!(done["state"], "completed");
    // The answer came after the commit: the locks are already gone, the waiter served.
    let out = child.finish(DEADLINE);
    let got = json_of("waiter", &out);
    assert_eq!(got["holder"], w.as_str());
    assert!(token(&got) > tf);
    let holders: Vec<_> = held(&env).into_iter().map(|h| (h.0, h.1)).collect();
    assert!(
        !holders.iter().any(|h| &h.0 == a),
        "a completed agent holds nothing: {holders:?}"
    );
    assert!(holders.contains(&(w.clone(), "src/a.rs".into())));

    // Released in the very transaction that completed the agent: same timestamp, the events
    // right after agent_completed, each with the reason.
    let events = env.events(&[]);
    let done_ev = events
        .iter()
        .find(|e| e["type"] == "agent_completed")
        .expect("agent_completed");
    let rel: Vec<_> = events
        .iter()
        .filter(|e| e["type"] == "lock_released" && e["agent_id"] == a.as_str())
        .collect();
    assert_eq!(rel.len(), 2, "{rel:?}");
    for r in &rel {
        assert_eq!(r["ts"], done_ev["ts"], "same commit: {r} vs {done_ev}");
        assert!(r["seq"].as_u64() > done_ev["seq"].as_u64());
        assert!(
            r["data"]["reason"].as_str().unwrap().contains("completed"),
            "{r}"
        );
    }
    assert!(rel.iter().any(|r| r["data"]["token"] == ta));

    // Failing releases too, and a finished agent cannot take new locks.
    env.maos_json(&["agent", "fail", f, "--reason", "boom"]);
    assert!(held(&env).iter().all(|h| &h.0 == w), "{:?}", held(&env));
    let ev = env.events(&["--type", "lock_released", "--agent", f]);
    assert_eq!(ev.len(), 1);
    assert_eq!(ev[0]["data"]["token"], tf);
    assert!(
        ev[0]["data"]["reason"].as_str().unwrap().contains("failed"),
        "{}",
        ev[0]
    );
    let e = refused(&env, a, "new.rs", &[]);
    assert_eq!(e.exit, 1, "{e:?}");
    assert!(e.message.contains("completed"), "{e:?}");
}

#[test]
fn ps_shows_the_locks_each_agent_holds() {
    let (env, ag) = setup(&["one", "two", "idle"]);
    let t1 = token(&acquire(&env, &ag[0], "src/a.rs", &[]));
    let t2 = token(&acquire(&env, &ag[0], "docs", &["--mode", "directory"]));
    let t3 = token(&acquire(&env, &ag[1], "README.md", &["--mode", "read"]));
    let ps = env.maos_json(&["ps"]);
    let agents = ps[0]["agents"].as_array().expect("agents");
    let locks_of = |id: &str| -> Vec<(String, String, u64)> {
        let a = agents
            .iter()
            .find(|a| a["id"] == id)
            .unwrap_or_else(|| panic!("{id} not in ps: {ps}"));
        let mut l: Vec<_> = a["locks"]
            .as_array()
            .unwrap_or_else(|| panic!("no locks array: {a}"))
            .iter()
            .map(|l| {
                (
                    l["path"].as_str().unwrap().to_string(),
                    l["mode"].as_str().unwrap().to_string(),
                    l["token"].as_u64().unwrap(),
                )
            })
            .collect();
        l.sort();
        l
    };
    assert_eq!(
        locks_of(&ag[0]),
        vec![
            ("docs".into(), "directory".into(), t2),
            ("src/a.rs".into(), "write".into(), t1)
        ]
    );
    assert_eq!(
        locks_of(&ag[1]),
        vec![("README.md".into(), "read".into(), t3)]
    );
    assert!(locks_of(&ag[2]).is_empty());

    env.maos_json(&["lock", "release", "src/a.rs", "--agent", &ag[0]]);
    let ps = env.maos_json(&["ps"]);
    let first = ps[0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == ag[0].as_str())
        .unwrap()
        .clone();
    assert_eq!(first["locks"].as_array().unwrap().len(), 1, "{first}");
    assert_eq!(first["locks"][0]["path"], "docs");

    // `lock list --session` shows one session's locks only.
    let other = env.session("other", &[]);
    let stranger = env.agent(Some(&other), "stranger", "elsewhere");
    acquire(&env, &stranger, "elsewhere.rs", &[]);
    let sid = ps[0]["id"].as_str().unwrap();
    let paths = |session: &str| -> Vec<String> {
        let l = env.maos_json(&["lock", "list", "--session", session]);
        l["locks"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| l["path"].as_str().unwrap().to_string())
            .collect()
    };
    assert_eq!(paths(sid), ["README.md", "docs"]);
    assert_eq!(paths(&other), ["elsewhere.rs"]);
    assert_eq!(list(&env)["locks"].as_array().unwrap().len(), 3);
}

#[test]
fn waiters_are_served_in_arrival_order_and_readers_do_not_starve_a_waiting_writer() {
    let (env, ag) = setup(&["reader", "writer1", "writer2", "late-reader"]);
    let (r, w1, w2, late) = (&ag[0], &ag[1], &ag[2], &ag[3]);
    let tr = token(&acquire(&env, r, "q.rs", &["--mode", "read"]));
    let first = acquire_bg(&env, w1, "q.rs", &["--wait-forever"]);
    wait_queued(&env, w1, "q.rs");
    let mut second = acquire_bg(&env, w2, "q.rs", &["--wait-forever"]);
    wait_queued(&env, w2, "q.rs");

    // A reader arriving now would share the current read lock, but a writer waits first.
    let f = refused(&env, late, "q.rs", &["--mode", "read"]);
    assert_eq!(f.code, "lock_conflict", "{f:?}");
    assert!(
        f.message.contains(short(w1)),
        "names the queued writer: {f:?}"
    );
    let check = check_blocked(&env, "q.rs", &["--agent", late, "--mode", "read"]);
    assert_eq!(check["blocked"], true);
    assert_eq!(check["holders"], serde_json::json!([]), "{check}");
    assert_eq!(check["queued"][0]["agent"], w1.as_str(), "{check}");
    let l = list(&env);
    let order: Vec<_> = l["waiters"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["agent"].as_str().unwrap().to_string())
        .collect();
    assert_eq!(order, [w1.clone(), w2.clone()], "queue order: {l}");

    // First come, first served.
    env.maos_json(&["lock", "release", "q.rs", "--agent", r]);
    let g1 = json_of("first writer", &first.finish(DEADLINE));
    assert_eq!(g1["holder"], w1.as_str());
    assert!(token(&g1) > tr);
    assert!(second.running(), "the second writer still waits");
    env.maos_json(&["lock", "release", "q.rs", "--agent", w1]);
    let g2 = json_of("second writer", &second.finish(DEADLINE));
    assert_eq!(g2["holder"], w2.as_str());
    assert!(token(&g2) > token(&g1));
}

#[test]
fn a_waiter_whose_client_died_leaves_the_queue_and_is_never_granted() {
    let (env, ag) = setup(&["holder", "vanishing"]);
    let (a, b) = (&ag[0], &ag[1]);
    acquire(&env, a, "src/a.rs", &[]);
    let child = acquire_bg(&env, b, "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, b, "src/a.rs");
    maos_tests::kill9(child.pid());
    let out = child.finish(DEADLINE);
    assert!(!out.status.success());
    wait_until(DEADLINE, "the dead client's wait is cancelled", || {
        list(&env)["waiters"].as_array().unwrap().is_empty()
    });
    // The timeline says the wait ended (the dashboard's Gantt ends its bar there).
    let cancelled = env.events(&["--type", "lock_wait_cancelled", "--agent", b]);
    assert_eq!(cancelled.len(), 1, "{cancelled:?}");
    assert_eq!(cancelled[0]["data"]["path"], "src/a.rs");
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", a]);
    assert!(held(&env).is_empty(), "nobody got it: {:?}", held(&env));
    let grants = env.events(&["--type", "lock_acquired", "--agent", b]);
    assert!(grants.is_empty(), "{grants:?}");
    // B itself can still take it.
    assert_eq!(acquire(&env, b, "src/a.rs", &[])["holder"], b.as_str());
}

#[test]
fn a_wait_or_lease_beyond_the_calendar_is_forever_not_an_error() {
    let (env, ag) = setup(&["holder", "patient"]);
    let (a, b) = (&ag[0], &ag[1]);
    // 100 million days: past the last instant the daemon's clock can name.
    let lock = acquire(&env, a, "src/a.rs", &["--ttl", "100000000d"]);
    assert!(lock["expires_at"].is_string(), "{lock}");
    let mut child = acquire_bg(&env, b, "src/a.rs", &["--wait", "100000000d"]);
    wait_queued(&env, b, "src/a.rs");
    let w = list(&env)["waiters"][0].clone();
    assert_eq!(w["deadline"], Value::Null, "waits forever: {w}");
    assert!(child.running());
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", a]);
    let got = json_of("the long wait", &child.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
    assert!(token(&got) > token(&lock));
}

#[test]
fn ending_a_session_releases_every_lock_its_agents_hold_and_ends_their_waits() {
    let (env, ag) = setup(&["one", "two"]);
    let (a, b) = (&ag[0], &ag[1]);
    let other = env.session("other", &[]);
    let outsider = env.agent(Some(&other), "outsider", "elsewhere");
    acquire(&env, a, "src/a.rs", &[]);
    acquire(&env, b, "src", &["--mode", "read"]);
    let kept = token(&acquire(&env, &outsider, "lib.rs", &[]));
    // B waits for the outsider's lock; the outsider waits for A's.
    let b_waits = acquire_bg(&env, b, "lib.rs", &["--wait-forever"]);
    wait_queued(&env, b, "lib.rs");
    let outsider_waits = acquire_bg(&env, &outsider, "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, &outsider, "src/a.rs");

    env.maos_json(&["session", "cancel", "--reason", "abandoned"]);
    let got = json_of("the outsider's wait", &outsider_waits.finish(DEADLINE));
    assert_eq!(got["holder"], outsider.as_str());
    let out = b_waits.finish(DEADLINE);
    assert_eq!(out.status.code(), Some(1), "a cancelled agent's wait ends");
    let mut now: Vec<_> = held(&env).into_iter().map(|h| (h.1, h.3)).collect();
    now.sort();
    assert_eq!(
        now,
        [
            ("lib.rs".to_string(), kept),
            ("src/a.rs".to_string(), token(&got))
        ]
    );
    assert!(list(&env)["waiters"].as_array().unwrap().is_empty());
    for id in [a, b] {
        let ev = env.events(&["--type", "lock_released", "--agent", id]);
        assert_eq!(ev.len(), 1, "{id}: {ev:?}");
        assert!(
            ev[0]["data"]["reason"]
                .as_str()
                .unwrap()
                .contains("cancelled"),
            "{}",
            ev[0]
        );
    }
}

#[test]
fn an_interrupted_agent_lets_go_of_its_locks() {
    let (env, ag) = setup(&["crashed", "next"]);
    let (a, b) = (&ag[0], &ag[1]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["agent", "start", a]);
    let t = token(&acquire(&env, a, "src/a.rs", &[]));
    let waiting = acquire_bg(&env, b, "src/a.rs", &["--wait-forever"]);
    wait_queued(&env, b, "src/a.rs");
    // What a supervisor sends when the agent's process died (no CLI command does this).
    let mut conn = env.raw();
    conn.hello();
    let root = maos_tests::Env::project_root(&env.project);
    let r = conn.request(
        Some(&root),
        serde_json::json!({"request": "agent_transition", "agent": a, "op": "interrupt"}),
    );
    assert!(r["Ok"].is_object(), "{r}");
    let got = json_of("the waiter", &waiting.finish(DEADLINE));
    assert_eq!(got["holder"], b.as_str());
    assert!(token(&got) > t);
    let ev = env.events(&["--type", "lock_released", "--agent", a]);
    assert_eq!(ev.len(), 1, "{ev:?}");
    assert_eq!(ev[0]["data"]["token"], t);
}
