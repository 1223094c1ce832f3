//! Unit tests of the lock rules and the table. The randomized model check is in
//! `tests/lock_props.rs`.

use chrono::TimeZone;

use super::*;
use crate::{AgentId, Ts};

fn agent(n: u128) -> AgentId {
    AgentId::from_uuid(uuid::Uuid::from_u128(n))
}

fn t(secs: i64) -> Ts {
    chrono::Utc
        .timestamp_opt(1_700_000_000 + secs, 0)
        .single()
        .unwrap_or_default()
}

fn p(s: &str) -> LockPath {
    LockPath::new(s).unwrap()
}

const TTL: i64 = 10_000_000; // 10 s

/// A request by `agent(who)`, born `who` seconds after t(0) (a larger number is younger).
fn req(who: u128, path: &str, mode: LockMode, wait: WaitPolicy) -> LockRequest {
    LockRequest {
        holder: agent(who),
        born: t(who as i64),
        path: p(path),
        mode,
        wait,
        ttl_us: TTL,
    }
}

fn granted(r: Result<Acquired, LockError>) -> HeldLock {
    match r {
        Ok(Acquired::Granted(l)) => l,
        other => panic!("expected a grant, got {other:?}"),
    }
}

fn queued(r: Result<Acquired, LockError>) -> (WaitId, Vec<DeadlockVictim>, Vec<WaitOutcome>) {
    match r {
        Ok(Acquired::Queued {
            wait,
            victims,
            granted,
        }) => (wait, victims, granted),
        other => panic!("expected a queued wait, got {other:?}"),
    }
}

use LockMode::{Directory as D, Read as R, Workspace as S, Write as W};
use WaitPolicy::{Forever, NoWait};

#[derive(Clone, Copy, Debug)]
enum Rel {
    /// Both on "x/y".
    Same,
    /// a = "x", b = "x/y".
    Ancestor,
    /// a = "x/y", b = "x".
    Descendant,
    /// a = "x", b = "z".
    Unrelated,
}

#[test]
fn conflict_matrix() {
    use Rel::{Ancestor as Anc, Descendant as Desc, Same, Unrelated as Unrel};
    // (a mode, b mode, relation of a to b, conflict if same holder, conflict if other holder)
    #[rustfmt::skip]
    let table: &[(LockMode, LockMode, Rel, bool, bool)] = &[
        (R, R, Same, false, false), (R, R, Anc, false, false), (R, R, Desc, false, false), (R, R, Unrel, false, false),
        (R, W, Same, false, true),  (R, W, Anc, false, false), (R, W, Desc, false, false), (R, W, Unrel, false, false),
        (R, D, Same, false, true),  (R, D, Anc, false, false), (R, D, Desc, false, true),  (R, D, Unrel, false, false),
        (R, S, Same, false, true),  (R, S, Anc, false, true),  (R, S, Desc, false, true),  (R, S, Unrel, false, true),
        (W, R, Same, false, true),  (W, R, Anc, false, false), (W, R, Desc, false, false), (W, R, Unrel, false, false),
        (W, W, Same, false, true),  (W, W, Anc, false, false), (W, W, Desc, false, false), (W, W, Unrel, false, false),
        (W, D, Same, false, true),  (W, D, Anc, false, false), (W, D, Desc, false, true),  (W, D, Unrel, false, false),
        (W, S, Same, false, true),  (W, S, Anc, false, true),  (W, S, Desc, false, true),  (W, S, Unrel, false, true),
        (D, R, Same, false, true),  (D, R, Anc, false, true),  (D, R, Desc, false, false), (D, R, Unrel, false, false),
        (D, W, Same, false, true),  (D, W, Anc, false, true),  (D, W, Desc, false, false), (D, W, Unrel, false, false),
        (D, D, Same, false, true),  (D, D, Anc, false, true),  (D, D, Desc, false, true),  (D, D, Unrel, false, false),
        (D, S, Same, false, true),  (D, S, Anc, false, true),  (D, S, Desc, false, true),  (D, S, Unrel, false, true),
        (S, R, Same, false, true),  (S, R, Anc, false, true),  (S, R, Desc, false, true),  (S, R, Unrel, false, true),
        (S, W, Same, false, true),  (S, W, Anc, false, true),  (S, W, Desc, false, true),  (S, W, Unrel, false, true),
        (S, D, Same, false, true),  (S, D, Anc, false, true),  (S, D, Desc, false, true),  (S, D, Unrel, false, true),
        (S, S, Same, false, true),  (S, S, Anc, false, true),  (S, S, Desc, false, true),  (S, S, Unrel, false, true),
    ];
    assert_eq!(table.len(), 4 * 4 * 4);
    let (x, xy, z) = (p("x"), p("x/y"), p("z"));
    let (a1, a2) = (agent(1), agent(2));
    for &(am, bm, rel, same, other) in table {
        let (a, b) = match rel {
            Rel::Same => (&xy, &xy),
            Rel::Ancestor => (&x, &xy),
            Rel::Descendant => (&xy, &x),
            Rel::Unrelated => (&x, &z),
        };
        let row = format!("{am} {bm} {rel:?}");
        assert_eq!(
            conflicts(&a1, am, a, &a1, bm, b),
            same,
            "same holder: {row}"
        );
        assert_eq!(
            conflicts(&a1, am, a, &a2, bm, b),
            other,
            "other holder: {row}"
        );
        assert_eq!(conflicts(&a2, bm, b, &a1, am, a), other, "symmetric: {row}");
        // Without the holder and exclusivity rules, overlap is what remains.
        let overlap = overlaps(am, a, bm, b);
        assert_eq!(
            other,
            overlap && (am.is_exclusive() || bm.is_exclusive()),
            "{row}"
        );
    }
}

#[test]
fn lock_mode_names() {
    for &m in LockMode::ALL {
        assert_eq!(m.as_str().parse::<LockMode>().unwrap(), m);
        assert_eq!(serde_json::to_string(&m).unwrap(), format!("\"{m}\""));
    }
    assert_eq!(
        LockMode::ALL
            .iter()
            .map(|m| m.is_exclusive())
            .collect::<Vec<_>>(),
        [false, true, true, true]
    );
    let err = "exclusive".parse::<LockMode>().unwrap_err();
    assert_eq!(
        err.to_string(),
        "unknown lock mode \"exclusive\" (expected read|write|directory|workspace)"
    );
}

#[test]
fn idempotent_reacquire_keeps_token_and_renews() {
    let mut lt = LockTable::new(100);
    let first = granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    assert_eq!(first.token, 100);
    let again = granted(lt.acquire(req(1, "./f", W, NoWait), t(5)));
    assert_eq!(again.token, 100);
    assert_eq!(again.acquired_at, t(0));
    assert_eq!(again.expires_at, t(15));
    assert_eq!(lt.next_token(), 101);
    assert_eq!(lt.held().count(), 1);
    // Holding Write, asking Read: answered by the Write lock, renewed.
    let read = granted(lt.acquire(req(1, "f", R, NoWait), t(7)));
    assert_eq!((read.token, read.mode, read.expires_at), (100, W, t(17)));
    assert_eq!(lt.next_token(), 101);
}

#[test]
fn upgrade_alone_gets_a_new_token_and_replaces_the_read() {
    let mut lt = LockTable::new(1);
    let r = granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let w = granted(lt.acquire(req(1, "f", W, NoWait), t(1)));
    assert!(w.token > r.token);
    assert_eq!(w.mode, W);
    let held: Vec<_> = lt.held().cloned().collect();
    assert_eq!(held, std::slice::from_ref(&w));
    // The replaced Read lock is handed over once, under the token of the Write lock.
    assert_eq!(lt.take_replaced(r.token), None);
    assert_eq!(lt.take_replaced(w.token), Some(r));
    assert_eq!(lt.take_replaced(w.token), None);
}

#[test]
fn upgrade_with_another_reader_waits_like_any_write() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let other = granted(lt.acquire(req(2, "f", R, NoWait), t(0)));
    let err = lt.acquire(req(1, "f", W, NoWait), t(1)).unwrap_err();
    let LockError::Conflict { holders, .. } = &err else {
        panic!("{err:?}");
    };
    assert_eq!(holders, &[other]);
    let (wait, victims, now_granted) = queued(lt.acquire(req(1, "f", W, Forever), t(1)));
    assert!(victims.is_empty() && now_granted.is_empty());
    let (released, grants) = lt.release(&agent(2), &p("f"), false, t(2)).unwrap();
    assert_eq!(released.len(), 1);
    let [WaitOutcome::Granted { wait: w, lock }] = grants.as_slice() else {
        panic!("{grants:?}");
    };
    assert_eq!((*w, lock.mode, lock.token), (wait, W, 3));
    assert_eq!(lt.held().collect::<Vec<_>>(), [lock]);
    let read = lt
        .take_replaced(3)
        .expect("the upgrade replaced a read lock");
    assert_eq!((read.holder, read.mode, read.token), (agent(1), R, 1));
}

#[test]
fn upgrade_jumps_writers_that_wait_for_its_read() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let (w2, ..) = queued(lt.acquire(req(2, "f", W, Forever), t(1)));
    // Agent 2 waits for agent 1's Read anyway: the upgrade is granted, not deadlocked.
    let up = granted(lt.acquire(req(1, "f", W, NoWait), t(2)));
    assert_eq!(up.mode, W);
    let (_, grants) = lt.release(&agent(1), &p("f"), false, t(3)).unwrap();
    assert!(matches!(grants.as_slice(), [WaitOutcome::Granted { wait, .. }] if *wait == w2));
}

#[test]
fn writer_is_not_starved_by_later_readers() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let (ww, ..) = queued(lt.acquire(req(2, "f", W, Forever), t(1)));
    // A later reader does not conflict with the holder but must queue behind the writer.
    let err = lt.acquire(req(3, "f", R, NoWait), t(2)).unwrap_err();
    let LockError::Conflict {
        holders, queued: q, ..
    } = &err
    else {
        panic!("{err:?}");
    };
    assert!(holders.is_empty());
    assert_eq!(q.len(), 1);
    assert_eq!((q[0].wait, &q[0].holder), (ww, &agent(2)));
    assert!(err.to_string().contains("queued first"), "{err}");
    let check = lt.check(&agent(3), &p("f"), R);
    assert_eq!(check.queued.len(), 1);
    assert!(check.holders.is_empty());
    let (wr, ..) = queued(lt.acquire(req(3, "f", R, Forever), t(2)));
    let (_, grants) = lt.release(&agent(1), &p("f"), false, t(3)).unwrap();
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [ww]
    );
    let (_, grants) = lt.release(&agent(2), &p("f"), false, t(4)).unwrap();
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [wr]
    );
}

#[test]
fn readers_share_and_queued_readers_are_granted_together() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    let (a, ..) = queued(lt.acquire(req(2, "f", R, Forever), t(1)));
    let (b, ..) = queued(lt.acquire(req(3, "f", R, Forever), t(1)));
    let (_, grants) = lt.release(&agent(1), &p("f"), false, t(2)).unwrap();
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [a, b]
    );
}

#[test]
fn two_agent_deadlock_youngest_requester_loses() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f1", W, NoWait), t(0)));
    granted(lt.acquire(req(2, "f2", W, NoWait), t(0)));
    queued(lt.acquire(req(1, "f2", W, Forever), t(1)));
    let before = lt.clone().waiters();
    let err = lt.acquire(req(2, "f1", W, Forever), t(2)).unwrap_err();
    let LockError::Deadlock { cycle } = &err else {
        panic!("{err:?}");
    };
    let want = [
        CycleEdge {
            waiter: agent(2),
            path: p("f1"),
            holder: agent(1),
        },
        CycleEdge {
            waiter: agent(1),
            path: p("f2"),
            holder: agent(2),
        },
    ];
    assert_eq!(cycle.as_slice(), want);
    let msg = err.to_string();
    assert!(
        msg.contains(&format!("{} waits for {} on f1", agent(2), agent(1)))
            && msg.contains(&format!("{} waits for {} on f2", agent(1), agent(2)))
            && msg.contains("youngest"),
        "{msg}"
    );
    assert_eq!(lt.waiters(), before, "a refused request changes nothing");
}

#[test]
fn two_agent_deadlock_older_requester_wins() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f1", W, NoWait), t(0)));
    granted(lt.acquire(req(2, "f2", W, NoWait), t(0)));
    let (young, ..) = queued(lt.acquire(req(2, "f1", W, Forever), t(1)));
    let (wait, victims, grants) = queued(lt.acquire(req(1, "f2", W, Forever), t(2)));
    assert_eq!(victims.len(), 1);
    assert_eq!((victims[0].wait, &victims[0].holder), (young, &agent(2)));
    assert_eq!(victims[0].cycle.len(), 2);
    let msg = victims[0].to_string();
    assert!(
        msg.starts_with(&format!(
            "deadlock: {} waits for {} on f2",
            agent(1),
            agent(2)
        )) && msg.contains(&format!("{} is the youngest and loses", agent(2))),
        "{msg}"
    );
    assert!(grants.is_empty());
    let waits: Vec<WaitId> = lt.waiters().iter().map(|w| w.wait).collect();
    assert_eq!(waits, [wait]);
}

#[test]
fn three_agent_cycle_victim_is_not_the_requester() {
    let mut lt = LockTable::new(1);
    for (who, f) in [(1, "f1"), (2, "f2"), (3, "f3")] {
        granted(lt.acquire(req(who, f, W, NoWait), t(0)));
    }
    queued(lt.acquire(req(2, "f3", W, Forever), t(1))); // 2 waits for 3
    let (w3, ..) = queued(lt.acquire(req(3, "f1", W, Forever), t(1))); // 3 waits for 1
    // 1 (the oldest) asks f2: 1 → 2 → 3 → 1; agent 3 is the youngest.
    let (wait, victims, grants) = queued(lt.acquire(req(1, "f2", W, Forever), t(2)));
    let [victim] = victims.as_slice() else {
        panic!("{victims:?}");
    };
    assert_eq!((victim.wait, &victim.holder), (w3, &agent(3)));
    let names: Vec<(AgentId, &str, AgentId)> = victim
        .cycle
        .iter()
        .map(|e| (e.waiter.clone(), e.path.as_str(), e.holder.clone()))
        .collect();
    assert_eq!(
        names,
        [
            (agent(1), "f2", agent(2)),
            (agent(2), "f3", agent(3)),
            (agent(3), "f1", agent(1)),
        ]
    );
    assert!(grants.is_empty());
    assert!(lt.waiters().iter().any(|w| w.wait == wait));
    assert!(!lt.waiters().iter().any(|w| w.wait == w3));
}

#[test]
fn victim_removal_grants_what_waited_behind_it() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "d/y", W, NoWait), t(0)));
    granted(lt.acquire(req(2, "f2", W, NoWait), t(0)));
    // Agent 2 (young) wants the whole of d: waits for agent 1.
    let (v, ..) = queued(lt.acquire(req(2, "d", D, Forever), t(1)));
    // Agent 3 wants d/z: free, but queued behind agent 2's directory request.
    let (behind, ..) = queued(lt.acquire(req(3, "d/z", W, Forever), t(1)));
    // Agent 1 asks f2 held by agent 2: 1 → 2 → 1, agent 2 loses its directory wait.
    let (_, victims, grants) = queued(lt.acquire(req(1, "f2", W, Forever), t(2)));
    assert_eq!(victims.iter().map(|v| v.wait).collect::<Vec<_>>(), [v]);
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [behind]
    );
}

#[test]
fn holder_may_extend_inside_what_its_waiters_wait_for() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "src/a.rs", W, NoWait), t(0)));
    queued(lt.acquire(req(2, "src", D, Forever), t(1)));
    // Agent 2 already waits for agent 1: agent 1 taking src/b.rs delays nobody.
    let l = granted(lt.acquire(req(1, "src/b.rs", W, NoWait), t(2)));
    assert_eq!(l.path, p("src/b.rs"));
    // A third agent must queue behind the directory request.
    assert!(matches!(
        lt.acquire(req(3, "src/c.rs", W, NoWait), t(2)),
        Err(LockError::Conflict { .. })
    ));
}

#[test]
fn lease_expiry_via_tick_and_the_grants_that_follow() {
    let mut lt = LockTable::new(1);
    let a = granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    assert_eq!(a.expires_at, t(10));
    let (wb, ..) = queued(lt.acquire(req(2, "f", W, Forever), t(1)));
    assert_eq!(lt.tick(t(9)), (vec![], vec![]));
    let (expired, outcomes) = lt.tick(t(10));
    assert_eq!(expired, [a]);
    let [WaitOutcome::Granted { wait, lock }] = outcomes.as_slice() else {
        panic!("{outcomes:?}");
    };
    assert_eq!(*wait, wb);
    assert_eq!(
        (&lock.holder, lock.token, lock.acquired_at, lock.expires_at),
        (&agent(2), 2, t(10), t(20))
    );
}

#[test]
fn renew_extends_leases() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    granted(lt.acquire(req(1, "g", R, NoWait), t(2)));
    assert_eq!(lt.renew(&agent(1), t(5)), 2);
    assert_eq!(lt.renew(&agent(2), t(5)), 0);
    assert!(lt.held().all(|l| l.expires_at == t(15)));
    // A late renewal never shortens a lease.
    assert_eq!(lt.renew(&agent(1), t(1)), 2);
    assert!(lt.held().all(|l| l.expires_at == t(15)));
    assert_eq!(lt.tick(t(14)).0, vec![]);
    assert_eq!(lt.tick(t(15)).0.len(), 2);
}

#[test]
fn a_sign_of_life_renews_only_leases_past_a_twentieth() {
    let mut lt = LockTable::new(1);
    // Leases of 10 s (RENEW_SLACK = 20: renewed once less than 9.5 s are left).
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    granted(lt.acquire(req(1, "g", W, NoWait), t(1)));
    let ms = |m: i64| t(0) + chrono::TimeDelta::milliseconds(m);
    // At 0.4 s neither is due: nothing moves.
    assert_eq!(lt.renew_due(&agent(1), ms(400)), 0);
    assert_eq!(lt.get(1).map(|l| l.expires_at), Some(t(10)));
    // At 0.6 s the first is (9.4 s left), the second is not (10.4 s).
    assert_eq!(lt.renew_due(&agent(1), ms(600)), 1);
    assert_eq!(lt.get(1).map(|l| l.expires_at), Some(ms(10_600)));
    assert_eq!(lt.get(2).map(|l| l.expires_at), Some(t(11)));
    assert_eq!(lt.renew_due(&agent(2), ms(600)), 0);
    // At 5 s both are due, and go to now + 10 s.
    assert_eq!(lt.renew_due(&agent(1), t(5)), 2);
    assert!(lt.held().all(|l| l.expires_at == t(15)));
    // Undone by a savepoint's rollback, index included: the same sign of life renews again.
    let sp = lt.savepoint();
    assert_eq!(lt.renew_due(&agent(1), t(9)), 2);
    lt.rollback_to(sp);
    assert!(lt.held().all(|l| l.expires_at == t(15)));
    assert_eq!(lt.renew_due(&agent(1), t(9)), 2);
    // Released locks leave the index.
    lt.release_all(&agent(1), t(9));
    assert_eq!(lt.renew_due(&agent(1), t(30)), 0);
}

#[test]
fn wait_timeout_via_tick() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    let (w, ..) = queued(lt.acquire(req(2, "f", W, WaitPolicy::Wait { until: t(5) }), t(1)));
    assert_eq!(lt.waiters()[0].deadline, Some(t(5)));
    assert_eq!(lt.tick(t(4)), (vec![], vec![]));
    let (expired, outcomes) = lt.tick(t(5));
    assert!(expired.is_empty());
    assert_eq!(
        outcomes,
        [WaitOutcome::TimedOut {
            wait: w,
            holder: agent(2),
            path: p("f")
        }]
    );
    assert!(lt.waiters().is_empty());
}

#[test]
fn wait_until_not_after_now_is_no_wait() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    for until in [t(0), t(1)] {
        let r = lt.acquire(req(2, "f", W, WaitPolicy::Wait { until }), t(1));
        assert!(matches!(r, Err(LockError::Conflict { .. })), "{r:?}");
    }
    assert!(lt.waiters().is_empty());
}

#[test]
fn next_deadline_is_the_earliest_expiry_or_wait_deadline() {
    let mut lt = LockTable::new(1);
    assert_eq!(lt.next_deadline(), None);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0))); // expires t(10)
    assert_eq!(lt.next_deadline(), Some(t(10)));
    queued(lt.acquire(req(2, "f", W, WaitPolicy::Wait { until: t(4) }), t(1)));
    assert_eq!(lt.next_deadline(), Some(t(4)));
    lt.tick(t(4));
    assert_eq!(lt.next_deadline(), Some(t(10)));
    lt.renew(&agent(1), t(6));
    assert_eq!(lt.next_deadline(), Some(t(16)));
    lt.release_all(&agent(1), t(7));
    assert_eq!(lt.next_deadline(), None);
}

#[test]
fn release_by_non_holder_is_refused_unless_forced() {
    let mut lt = LockTable::new(1);
    let a = granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let b = granted(lt.acquire(req(2, "f", R, NoWait), t(0)));
    let (wc, ..) = queued(lt.acquire(req(3, "f", W, Forever), t(1)));
    let err = lt.release(&agent(3), &p("f"), false, t(2)).unwrap_err();
    assert_eq!(
        err,
        LockError::NotHolder {
            path: p("f"),
            holder: agent(3),
            held_by: vec![agent(1), agent(2)],
        }
    );
    let msg = err.to_string();
    assert!(
        msg.contains("only the holder") && msg.contains("force"),
        "{msg}"
    );
    assert_eq!(lt.held().count(), 2, "a refused release changes nothing");
    let (released, grants) = lt.release(&agent(3), &p("f"), true, t(2)).unwrap();
    assert_eq!(released, [a, b]);
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [wc]
    );
    assert_eq!(
        lt.release(&agent(1), &p("g"), false, t(3)),
        Err(LockError::NotHeld {
            path: p("g"),
            holder: agent(1)
        })
    );
    assert!(matches!(
        lt.release(&agent(1), &p("g"), true, t(3)),
        Err(LockError::NotHeld { .. })
    ));
}

#[test]
fn release_frees_every_mode_the_holder_has_on_that_path() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "d", R, NoWait), t(0)));
    granted(lt.acquire(req(1, "d", D, NoWait), t(0)));
    granted(lt.acquire(req(1, "d/x", W, NoWait), t(0)));
    let (released, _) = lt.release(&agent(1), &p("d"), false, t(1)).unwrap();
    assert_eq!(released.iter().map(|l| l.mode).collect::<Vec<_>>(), [R, D]);
    assert_eq!(lt.held().count(), 1);
}

#[test]
fn release_all_ends_locks_and_waits() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    granted(lt.acquire(req(2, "g", W, NoWait), t(0)));
    let (w1, ..) = queued(lt.acquire(req(1, "g", W, Forever), t(1)));
    let (w3, ..) = queued(lt.acquire(req(3, "f", R, Forever), t(1)));
    let (released, waits, grants) = lt.release_all(&agent(1), t(2));
    assert_eq!(released.len(), 1);
    assert_eq!(waits, [w1]);
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [w3]
    );
    assert_eq!(lt.release_all(&agent(9), t(2)), (vec![], vec![], vec![]));
}

#[test]
fn cancel_wait_grants_what_waited_behind_it() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", R, NoWait), t(0)));
    let (ww, ..) = queued(lt.acquire(req(2, "f", W, Forever), t(1)));
    let (wr, ..) = queued(lt.acquire(req(3, "f", R, Forever), t(1)));
    let grants = lt.cancel_wait(ww, t(2));
    assert_eq!(
        grants.iter().map(WaitOutcome::wait).collect::<Vec<_>>(),
        [wr]
    );
    assert!(
        lt.cancel_wait(ww, t(2)).is_empty(),
        "unknown ids are ignored"
    );
}

#[test]
fn directory_and_workspace_scopes() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "src", D, NoWait), t(0)));
    let cases: &[(&str, LockMode, bool)] = &[
        ("src/a.rs", W, true),
        ("src/deep/b.rs", R, true),
        ("src", R, true),
        ("srcx/a.rs", W, false),
        ("", D, true),
        ("docs", D, false),
        ("anything", S, true),
    ];
    for (path, mode, blocked) in cases {
        let c = lt.check(&agent(2), &p(path), *mode);
        assert_eq!(!c.holders.is_empty(), *blocked, "{path} {mode}");
        assert!(lt.check(&agent(1), &p(path), *mode).is_empty(), "own locks");
    }
    // A Workspace lock is recorded on the root whatever path was given.
    lt.release_all(&agent(1), t(1));
    let ws = granted(lt.acquire(req(1, "ignored", S, NoWait), t(1)));
    assert!(ws.path.is_root());
    assert!(
        lt.release(&agent(1), &LockPath::root(), false, t(2))
            .is_ok()
    );
}

#[test]
fn conflict_error_names_holders_and_suggests_waiting() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "src", D, NoWait), t(0)));
    let err = lt.acquire(req(2, "src/a.rs", W, NoWait), t(1)).unwrap_err();
    let msg = err.to_string();
    assert_eq!(
        msg,
        format!(
            "cannot lock src/a.rs for write: {} holds directory on src since \
             2023-11-14T22:13:20.000000Z; retry with --wait to queue for it",
            agent(1)
        )
    );
}

#[test]
fn bad_ttl_is_refused() {
    let mut lt = LockTable::new(1);
    for ttl in [0, -1] {
        let mut r = req(1, "f", W, NoWait);
        r.ttl_us = ttl;
        let err = lt.acquire(r, t(0)).unwrap_err();
        assert_eq!(err, LockError::BadTtl(ttl));
        assert!(err.to_string().contains("longer than zero"));
    }
    assert_eq!(lt.held().count(), 0);
    assert_eq!(lt.next_token(), 1);
}

#[test]
fn a_fresh_token_block_numbers_the_next_grant_and_never_lowers_the_counter() {
    let mut lt = LockTable::new(1);
    lt.raise_next_token(65_537);
    assert_eq!(
        granted(lt.acquire(req(1, "f", W, NoWait), t(0))).token,
        65_537
    );
    lt.raise_next_token(3);
    assert_eq!(lt.next_token(), 65_538, "a lower start is ignored");
}

#[test]
fn syncing_with_the_authority_adds_moves_and_drops_locks_and_serves_the_waits_it_frees() {
    let mut lt = LockTable::new(1);
    let a = granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    let b = granted(lt.acquire(req(2, "g", W, NoWait), t(0)));
    // Agent 3 waits for f.
    let _ = queued(lt.acquire(req(3, "f", W, WaitPolicy::Forever), t(1)));
    // Elsewhere: f was released, g's lease moved, and agent 4 took h with a larger token.
    let mut moved = b.clone();
    moved.expires_at = t(500);
    let other = HeldLock {
        path: p("h"),
        mode: W,
        holder: agent(4),
        token: 70_000,
        acquired_at: t(2),
        expires_at: t(40),
    };
    let out = lt.sync_held(vec![(moved.clone(), TTL), (other.clone(), TTL)], t(3));
    assert!(
        matches!(out.as_slice(), [WaitOutcome::Granted { lock, .. }] if lock.holder == agent(3) && lock.path == p("f")),
        "{out:?}"
    );
    assert!(lt.get(a.token).is_none(), "f's old lock is gone");
    assert_eq!(lt.get(b.token).map(|l| l.expires_at), Some(t(500)));
    assert_eq!(lt.get(70_000), Some(&other));
    assert!(
        lt.next_token() > 70_000,
        "tokens never go back below one seen"
    );
    assert!(lt.waiters().is_empty());
}

#[test]
fn restore_keeps_tokens_and_raises_the_counter() {
    let mut lt = LockTable::new(5);
    let lock = HeldLock {
        path: p("f"),
        mode: W,
        holder: agent(1),
        token: 41,
        acquired_at: t(0),
        expires_at: t(30),
    };
    lt.restore(lock.clone());
    assert_eq!(lt.next_token(), 42);
    assert_eq!(lt.held_by(&agent(1)), [&lock]);
    // The lease length for renewals is expires_at - acquired_at unless given.
    lt.renew(&agent(1), t(40));
    assert_eq!(lt.held_by(&agent(1))[0].expires_at, t(70));
    lt.restore_with_ttl(lock.clone(), 5_000_000);
    assert_eq!(lt.held().count(), 1);
    lt.renew(&agent(1), t(40));
    assert_eq!(lt.held_by(&agent(1))[0].expires_at, t(45));
    let next = granted(lt.acquire(req(2, "g", W, NoWait), t(40)));
    assert_eq!(next.token, 42);
}

#[test]
fn wait_outcomes_and_errors_serialize() {
    let o = WaitOutcome::TimedOut {
        wait: 3,
        holder: agent(1),
        path: p("a/b"),
    };
    let json = serde_json::to_value(&o).unwrap();
    assert_eq!(json["timed_out"]["path"], "a/b");
    let policy = serde_json::to_value(WaitPolicy::Wait { until: t(0) }).unwrap();
    assert!(policy.get("wait").is_some(), "{policy}");
    assert_eq!(serde_json::to_value(WaitPolicy::NoWait).unwrap(), "no_wait");
}

#[test]
fn acquire_all_takes_every_lock_or_none() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(2, "b", W, NoWait), t(0)));
    let token = lt.next_token();
    // "b" is held by agent 2: agent 1 gets neither file, and nothing moved.
    let refused = lt.acquire_all(vec![req(1, "a", W, Forever), req(1, "b", W, Forever)], t(1));
    match refused {
        Err(LockError::Conflict { path, holders, .. }) => {
            assert_eq!(path, p("b"));
            assert_eq!(holders.len(), 1);
            assert_eq!(holders[0].holder, agent(2));
        }
        other => panic!("expected a conflict, got {other:?}"),
    }
    assert!(lt.held_by(&agent(1)).is_empty(), "no lock kept");
    assert!(
        lt.waiters().is_empty(),
        "nothing queued, whatever the wait policy"
    );
    assert_eq!(lt.next_token(), token, "no token spent");
    // A bad lease refuses the whole call too.
    let bad = LockRequest {
        ttl_us: 0,
        ..req(1, "c", W, NoWait)
    };
    assert!(matches!(
        lt.acquire_all(vec![req(1, "a", W, NoWait), bad], t(1)),
        Err(LockError::BadTtl(0))
    ));
    assert!(lt.held_by(&agent(1)).is_empty());
    // Free files: all granted, in request order, each renewing an own lock it already holds.
    let all = lt
        .acquire_all(vec![req(1, "a", W, NoWait), req(1, "c", W, NoWait)], t(2))
        .unwrap_or_default();
    let paths: Vec<_> = all.iter().map(|l| l.path.clone()).collect();
    assert_eq!(paths, [p("a"), p("c")]);
    let again = lt
        .acquire_all(vec![req(1, "a", W, NoWait)], t(3))
        .unwrap_or_default();
    assert_eq!(again[0].token, all[0].token, "a renewal keeps its token");
    assert_eq!(
        again[0].expires_at,
        t(3) + chrono::TimeDelta::microseconds(TTL)
    );
}

/// A wait parked through another daemon by `agent(who)` (born `who` s after t(0)).
fn foreign(key: &str, who: u128, path: &str, mode: LockMode, lapse: Ts) -> ForeignWait {
    ForeignWait {
        key: key.into(),
        holder: agent(who),
        born: t(who as i64),
        path: p(path),
        mode,
        since: t(0),
        deadline: None,
        lapse,
    }
}

/// A lock held through another daemon (as `sync_held` takes it from the authority).
fn held_elsewhere(who: u128, path: &str, token: u64) -> (HeldLock, i64) {
    let lock = HeldLock {
        path: p(path),
        mode: W,
        holder: agent(who),
        token,
        acquired_at: t(0),
        expires_at: t(1_000),
    };
    (lock, TTL)
}

#[test]
fn a_foreign_wait_queues_ahead_of_later_requests_and_is_never_granted_here() {
    let mut lt = LockTable::new(1);
    let a = granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    lt.sync_foreign(vec![foreign("d2#0", 2, "f", W, t(100))], t(1));
    let listed = lt.waiters();
    assert_eq!(listed.len(), 1);
    assert!(listed[0].foreign, "{listed:?}");
    // A later request queues behind it: with no wait it is refused, naming the queued agent.
    match lt.acquire(req(3, "f", R, NoWait), t(2)) {
        Err(LockError::Conflict { queued, .. }) => assert_eq!(queued[0].holder, agent(2)),
        other => panic!("expected a conflict behind the foreign wait, got {other:?}"),
    }
    let (mine, _, _) = queued(lt.acquire(req(3, "f", R, Forever), t(2)));
    // Released here: the foreign wait is first in line, but only its own daemon grants it,
    // and agent 3 still waits behind it.
    let (_, out) = lt.release(&agent(1), &a.path, false, t(3)).unwrap();
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(lt.waiters().len(), 2);
    // Its daemon granted it (the lock and the end of the wait arrive together): agent 3
    // now waits for that lock.
    let out = lt.sync_held(vec![held_elsewhere(2, "f", 70_000)], t(4));
    assert!(out.is_empty(), "{out:?}");
    let out = lt.sync_foreign(vec![], t(4));
    assert!(out.is_empty(), "{out:?}");
    assert_eq!(lt.waiters().len(), 1);
    // Released there: agent 3 is granted here.
    let out = lt.sync_held(vec![], t(5));
    assert!(
        matches!(out.as_slice(), [WaitOutcome::Granted { wait, lock }] if *wait == mine && lock.holder == agent(3)),
        "{out:?}"
    );
}

#[test]
fn a_foreign_wait_that_lapses_leaves_the_queue_without_an_answer_here() {
    let mut lt = LockTable::new(1);
    let a = granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    lt.sync_foreign(vec![foreign("d2#0", 2, "f", W, t(10))], t(1));
    let (mine, _, _) = queued(lt.acquire(req(3, "f", W, Forever), t(1)));
    lt.release(&agent(1), &a.path, false, t(2)).unwrap();
    assert_eq!(
        lt.next_deadline(),
        Some(t(10)),
        "the lapse wakes the daemon"
    );
    // Renewed by its daemon before it lapsed: it stays, in its place.
    lt.sync_foreign(vec![foreign("d2#0", 2, "f", W, t(20))], t(9));
    let (_, out) = lt.tick(t(10));
    assert!(out.is_empty(), "{out:?}");
    // Not renewed again: gone at its lapse, and agent 3 behind it is granted.
    let (_, out) = lt.tick(t(20));
    assert!(
        matches!(out.as_slice(), [WaitOutcome::Granted { wait, .. }] if *wait == mine),
        "no TimedOut for a foreign wait: {out:?}"
    );
    assert!(lt.waiters().is_empty());
}

#[test]
fn a_cycle_through_a_foreign_wait_is_a_deadlock_and_the_youngest_gives_way() {
    // Agent 1 (here) holds f; agent 2 (elsewhere) holds g and waits there for f.
    let setup = |born_here: u128, born_there: u128| {
        let mut lt = LockTable::new(1);
        let f = granted(lt.acquire(req(born_here, "f", W, NoWait), t(0)));
        lt.sync_held(
            vec![(f, TTL), held_elsewhere(born_there, "g", 70_000)],
            t(0),
        );
        lt.sync_foreign(vec![foreign("d2#7", born_there, "f", W, t(100))], t(1));
        lt
    };
    // The foreign agent is the younger: its wait is the victim, named by its key, and
    // agent 1's request queues.
    let mut lt = setup(1, 2);
    let (_, victims, _) = queued(lt.acquire(req(1, "g", W, Forever), t(2)));
    assert_eq!(victims.len(), 1, "{victims:?}");
    assert_eq!(victims[0].holder, agent(2));
    assert_eq!(victims[0].foreign.as_deref(), Some("d2#7"));
    assert_eq!(victims[0].cycle.len(), 2);
    assert!(lt.waiters().iter().all(|w| !w.foreign), "the victim left");
    // The local agent is the younger: its own request is refused.
    let mut lt = setup(3, 2);
    match lt.acquire(req(3, "g", W, Forever), t(2)) {
        Err(LockError::Deadlock { cycle }) => assert_eq!(cycle.len(), 2),
        other => panic!("expected a deadlock, got {other:?}"),
    }
    assert_eq!(lt.waiters().len(), 1, "the foreign wait stays");
}

#[test]
fn a_foreign_wait_is_only_its_own_daemons_to_end() {
    let mut lt = LockTable::new(1);
    granted(lt.acquire(req(1, "f", W, NoWait), t(0)));
    lt.sync_foreign(vec![foreign("d2#0", 2, "f", W, t(100))], t(1));
    // Agent 2 ended as seen here: its foreign wait stays until its daemon drops it.
    let (_, ended, _) = lt.release_all(&agent(2), t(2));
    assert!(ended.is_empty());
    assert_eq!(lt.waiters().len(), 1);
    // A rolled-back step puts a dropped foreign wait back, key and all.
    let sp = lt.savepoint();
    lt.sync_foreign(vec![], t(3));
    assert!(lt.waiters().is_empty());
    lt.rollback_to(sp);
    assert_eq!(lt.waiters().len(), 1);
    lt.sync_foreign(vec![foreign("d2#0", 2, "f", W, t(100))], t(4));
    assert_eq!(lt.waiters().len(), 1, "known by its key: not added twice");
}
