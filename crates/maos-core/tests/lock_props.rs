//! Model check of `LockTable` against a brute-force oracle: random operation sequences over a
//! few agents and nested paths; after every step the invariants are re-derived from scratch
//! (pairwise conflicts, wait-for graph, queue liveness, tokens, the fate of every wait).

use std::collections::{BTreeMap, BTreeSet};

use chrono::TimeZone;
use maos_core::{
    Acquired, AgentId, CycleEdge, HeldLock, LockError, LockMode, LockPath, LockRequest, LockTable,
    RENEW_SLACK, Ts, WaitId, WaitOutcome, WaitPolicy, WaiterInfo,
};
use proptest::prelude::{
    Just, ProptestConfig, Strategy, TestCaseError, prop_assert, prop_assert_eq, prop_oneof,
    proptest,
};

const AGENTS: usize = 6;
const PATHS: [&str; 6] = ["", "a", "a/b", "a/b/c", "d", "d/e"];
const MODES: [LockMode; 4] = [
    LockMode::Read,
    LockMode::Write,
    LockMode::Directory,
    LockMode::Workspace,
];

fn t(secs: i64) -> Ts {
    chrono::Utc
        .timestamp_opt(1_700_000_000 + secs, 0)
        .single()
        .unwrap_or_default()
}

fn agent(i: usize) -> AgentId {
    AgentId::from_uuid(uuid::Uuid::from_u128(i as u128 + 1))
}

/// Agents 0 and 3 are born together, and so on: ties are broken by the id.
fn born(a: &AgentId) -> Ts {
    let i = (0..AGENTS).find(|i| agent(*i) == *a).unwrap_or(0);
    t((i % 3) as i64)
}

/// Youth order: later `born`, then larger id.
fn age_key(a: &AgentId) -> (Ts, AgentId) {
    (born(a), a.clone())
}

#[derive(Clone, Debug)]
enum Op {
    Acquire {
        who: usize,
        path: usize,
        mode: usize,
        /// 0: NoWait, 1: Wait for `wait_s` seconds (0 = already expired), 2: Forever.
        policy: u8,
        wait_s: i64,
        ttl_s: i64,
    },
    Release {
        who: usize,
        path: usize,
        force: bool,
    },
    ReleaseAll {
        who: usize,
    },
    Cancel {
        pick: usize,
    },
    Tick {
        advance: i64,
    },
    Renew {
        who: usize,
    },
    /// A sign of life: [`LockTable::renew_due`].
    RenewDue {
        who: usize,
    },
}

fn op() -> impl Strategy<Value = Op> {
    let acquire = (
        0..AGENTS,
        0..PATHS.len(),
        prop_oneof![3 => Just(0usize), 3 => Just(1), 2 => Just(2), 1 => Just(3)],
        0u8..3,
        0i64..8,
        1i64..30,
    )
        .prop_map(|(who, path, mode, policy, wait_s, ttl_s)| Op::Acquire {
            who,
            path,
            mode,
            policy,
            wait_s,
            ttl_s,
        });
    prop_oneof![
        8 => acquire,
        2 => (0..AGENTS, 0..PATHS.len(), proptest::bool::weighted(0.2))
            .prop_map(|(who, path, force)| Op::Release { who, path, force }),
        1 => (0..AGENTS).prop_map(|who| Op::ReleaseAll { who }),
        1 => (0usize..16).prop_map(|pick| Op::Cancel { pick }),
        2 => (0i64..12).prop_map(|advance| Op::Tick { advance }),
        1 => (0..AGENTS).prop_map(|who| Op::Renew { who }),
        1 => (0..AGENTS).prop_map(|who| Op::RenewDue { who }),
    ]
}

// ---- the brute-force oracle ----

fn comps(p: &LockPath) -> Vec<&str> {
    if p.as_str().is_empty() {
        Vec::new()
    } else {
        p.as_str().split('/').collect()
    }
}

/// Whether the scope of `(mode, path)` contains the single path `q`.
fn covers(mode: LockMode, path: &LockPath, q: &LockPath) -> bool {
    match mode {
        LockMode::Workspace => true,
        LockMode::Directory => comps(q).starts_with(&comps(path)),
        LockMode::Read | LockMode::Write => path == q,
    }
}

/// Scopes intersect: enumerate the candidate witnesses (both paths suffice for these scopes).
fn brute_overlap(am: LockMode, a: &LockPath, bm: LockMode, b: &LockPath) -> bool {
    if am == LockMode::Workspace || bm == LockMode::Workspace {
        return true;
    }
    [a, b].iter().any(|q| covers(am, a, q) && covers(bm, b, q))
}

fn brute_conflict(
    ah: &AgentId,
    am: LockMode,
    ap: &LockPath,
    bh: &AgentId,
    bm: LockMode,
    bp: &LockPath,
) -> bool {
    ah != bh && (am != LockMode::Read || bm != LockMode::Read) && brute_overlap(am, ap, bm, bp)
}

fn lock_vs(h: &AgentId, m: LockMode, p: &LockPath, l: &HeldLock) -> bool {
    brute_conflict(h, m, p, &l.holder, l.mode, &l.path)
}

fn wait_vs(h: &AgentId, m: LockMode, p: &LockPath, w: &WaiterInfo) -> bool {
    brute_conflict(h, m, p, &w.holder, w.mode, &w.path)
}

/// Wait-for edges (agent → agent) over holders and the queue, by the documented rule.
fn graph(held: &[HeldLock], waits: &[WaiterInfo]) -> BTreeSet<(AgentId, AgentId)> {
    let mut edges = BTreeSet::new();
    for (i, w) in waits.iter().enumerate() {
        for l in held {
            if lock_vs(&w.holder, w.mode, &w.path, l) {
                edges.insert((w.holder.clone(), l.holder.clone()));
            }
        }
        for e in &waits[..i] {
            if wait_vs(&w.holder, w.mode, &w.path, e) {
                edges.insert((w.holder.clone(), e.holder.clone()));
            }
        }
    }
    edges
}

fn has_cycle(edges: &BTreeSet<(AgentId, AgentId)>) -> bool {
    // Transitive closure over at most AGENTS nodes.
    let mut reach = edges.clone();
    loop {
        let mut more = Vec::new();
        for (a, b) in &reach {
            for (c, d) in &reach {
                if b == c && !reach.contains(&(a.clone(), d.clone())) {
                    more.push((a.clone(), d.clone()));
                }
            }
        }
        if more.is_empty() {
            break;
        }
        reach.extend(more);
    }
    reach.iter().any(|(a, b)| a == b)
}

fn check_cycle(cycle: &[CycleEdge], first: &AgentId) -> Result<(), TestCaseError> {
    prop_assert!(!cycle.is_empty());
    prop_assert_eq!(&cycle[0].waiter, first);
    for (i, e) in cycle.iter().enumerate() {
        let next = &cycle[(i + 1) % cycle.len()];
        prop_assert_eq!(&e.holder, &next.waiter, "cycle is closed: {:?}", cycle);
    }
    Ok(())
}

fn youngest(cycle: &[CycleEdge]) -> Option<&AgentId> {
    cycle.iter().map(|e| &e.waiter).max_by_key(|a| age_key(a))
}

struct Model {
    lt: LockTable,
    now: i64,
    /// Waits reported as queued and not yet ended.
    outstanding: BTreeSet<WaitId>,
    /// Highest token ever granted.
    max_token: Option<u64>,
    /// Every token granted, with the lock it names.
    tokens: BTreeMap<u64, (AgentId, LockPath, LockMode)>,
}

impl Model {
    /// Account for outcomes: every wait ends exactly once; new tokens strictly increase.
    fn outcomes(
        &mut self,
        outs: &[WaitOutcome],
        held_before: &[HeldLock],
    ) -> Result<(), TestCaseError> {
        for o in outs {
            prop_assert!(
                self.outstanding.remove(&o.wait()),
                "wait {} ended twice or never queued: {:?}",
                o.wait(),
                o
            );
            if let WaitOutcome::Granted { lock, .. } = o {
                self.token(lock, held_before)?;
                // Held, unless a later grant of the same batch upgraded this Read to a Write.
                let upgraded = lock.mode == LockMode::Read
                    && self.lt.held().any(|l| {
                        l.holder == lock.holder && l.path == lock.path && l.mode == LockMode::Write
                    });
                prop_assert!(
                    upgraded || self.lt.held().any(|l| l.token == lock.token),
                    "granted lock is held"
                );
            }
        }
        Ok(())
    }

    /// A grant either renews a lock granted before (same token, same lock) or takes a new token
    /// above every earlier one.
    fn token(&mut self, lock: &HeldLock, _held_before: &[HeldLock]) -> Result<(), TestCaseError> {
        let id = (lock.holder.clone(), lock.path.clone(), lock.mode);
        if let Some(old) = self.tokens.get(&lock.token) {
            prop_assert_eq!(old, &id, "token {} reused for another lock", lock.token);
            return Ok(());
        }
        if let Some(max) = self.max_token {
            prop_assert!(lock.token > max, "token {} after {}", lock.token, max);
        }
        self.max_token = Some(lock.token);
        self.tokens.insert(lock.token, id);
        Ok(())
    }

    fn step(&mut self, op: &Op) -> Result<(), TestCaseError> {
        let held_before: Vec<HeldLock> = self.lt.held().cloned().collect();
        let waits_before = self.lt.waiters();
        let now = t(self.now);
        match *op {
            Op::Acquire { .. } => {
                let req = lock_request(op, self.now);
                let (holder, mode, path, wait) =
                    (req.holder.clone(), req.mode, req.path.clone(), req.wait);
                let may_wait = match wait {
                    WaitPolicy::NoWait => false,
                    WaitPolicy::Wait { until } => until > now,
                    WaitPolicy::Forever => true,
                };
                let owns = |m: LockMode| {
                    held_before
                        .iter()
                        .any(|l| l.holder == holder && l.path == path && l.mode == m)
                };
                let covered = owns(mode) || (mode == LockMode::Read && owns(LockMode::Write));
                let upgrade = mode == LockMode::Write && owns(LockMode::Read);
                let by_holder = held_before.iter().any(|l| lock_vs(&holder, mode, &path, l));
                let by_queue: Vec<&WaiterInfo> = waits_before
                    .iter()
                    .filter(|w| wait_vs(&holder, mode, &path, w))
                    .collect();
                // Queued requests that already wait for a lock of the requester.
                let already = |w: &WaiterInfo| {
                    held_before
                        .iter()
                        .any(|l| l.holder == holder && wait_vs(&l.holder, l.mode, &l.path, w))
                };
                let fair_bypass = !by_holder && by_queue.iter().all(|w| already(w));
                let mut with_req = waits_before.clone();
                with_req.push(WaiterInfo {
                    wait: WaitId::MAX,
                    holder: holder.clone(),
                    path: path.clone(),
                    mode,
                    since: now,
                    deadline: None,
                    foreign: false,
                });
                let cycle_if_queued = has_cycle(&graph(&held_before, &with_req));

                match self.lt.acquire(req, now) {
                    Ok(Acquired::Granted(lock)) => {
                        prop_assert_eq!(&lock.holder, &holder);
                        prop_assert!(!by_holder || covered, "granted over a conflicting holder");
                        if covered {
                            prop_assert!(held_before.iter().any(|l| l.token == lock.token));
                        } else {
                            prop_assert!(!held_before.iter().any(|l| l.token == lock.token));
                            prop_assert_eq!((&lock.path, lock.mode), (&path, mode));
                            prop_assert!(
                                fair_bypass || upgrade,
                                "jumped the queue: {:?}",
                                by_queue
                            );
                        }
                        if upgrade {
                            prop_assert!(!self.lt.held().any(|l| l.holder == holder
                                && l.path == path
                                && l.mode == LockMode::Read));
                        }
                        self.token(&lock, &held_before)?;
                    }
                    Ok(Acquired::Queued {
                        wait,
                        victims,
                        granted,
                    }) => {
                        prop_assert!(may_wait && !covered && !fair_bypass);
                        prop_assert!(by_holder || !by_queue.is_empty(), "queued though free");
                        prop_assert_eq!(!victims.is_empty(), cycle_if_queued, "deadlock iff cycle");
                        for v in &victims {
                            prop_assert!(
                                self.outstanding.remove(&v.wait),
                                "victim {} unknown",
                                v.wait
                            );
                            prop_assert!(v.holder != holder);
                            check_cycle(&v.cycle, &holder)?;
                            prop_assert_eq!(youngest(&v.cycle), Some(&v.holder));
                        }
                        prop_assert!(self.outstanding.insert(wait), "wait id {} reused", wait);
                        self.outcomes(&granted, &held_before)?;
                    }
                    Err(LockError::Conflict {
                        holders, queued, ..
                    }) => {
                        prop_assert!(!may_wait && !covered);
                        prop_assert!(!holders.is_empty() || !queued.is_empty());
                        prop_assert_eq!(!holders.is_empty(), by_holder);
                        prop_assert!(!fair_bypass);
                    }
                    Err(LockError::Deadlock { cycle }) => {
                        prop_assert!(may_wait && cycle_if_queued, "deadlock without a cycle");
                        check_cycle(&cycle, &holder)?;
                        prop_assert_eq!(youngest(&cycle), Some(&holder));
                        prop_assert_eq!(self.lt.waiters(), waits_before, "refusal changes nothing");
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("unexpected {e}"))),
                }
            }
            Op::Release { who, path, force } => {
                let holder = agent(who);
                let path =
                    LockPath::new(PATHS[path]).map_err(|e| TestCaseError::fail(e.to_string()))?;
                let at: Vec<&HeldLock> = held_before.iter().filter(|l| l.path == path).collect();
                let want: Vec<HeldLock> = at
                    .iter()
                    .filter(|l| force || l.holder == holder)
                    .map(|l| (*l).clone())
                    .collect();
                match self.lt.release(&holder, &path, force, now) {
                    Ok((released, grants)) => {
                        prop_assert_eq!(released, want);
                        self.outcomes(&grants, &held_before)?;
                    }
                    Err(LockError::NotHeld { .. }) => prop_assert!(at.is_empty()),
                    Err(LockError::NotHolder { held_by, .. }) => {
                        prop_assert!(!force && want.is_empty() && !at.is_empty());
                        prop_assert!(!held_by.contains(&holder));
                    }
                    Err(e) => return Err(TestCaseError::fail(format!("unexpected {e}"))),
                }
            }
            Op::ReleaseAll { who } => {
                let holder = agent(who);
                let (released, waits, grants) = self.lt.release_all(&holder, now);
                let want: Vec<HeldLock> = held_before
                    .iter()
                    .filter(|l| l.holder == holder)
                    .cloned()
                    .collect();
                prop_assert_eq!(released, want);
                let want: Vec<WaitId> = waits_before
                    .iter()
                    .filter(|w| w.holder == holder)
                    .map(|w| w.wait)
                    .collect();
                prop_assert_eq!(&waits, &want);
                for w in waits {
                    prop_assert!(self.outstanding.remove(&w));
                }
                self.outcomes(&grants, &held_before)?;
            }
            Op::Cancel { pick } => {
                let ids: Vec<WaitId> = self.outstanding.iter().copied().collect();
                let id = if ids.is_empty() {
                    1_000_000
                } else {
                    ids[pick % ids.len()]
                };
                self.outstanding.remove(&id);
                let grants = self.lt.cancel_wait(id, now);
                self.outcomes(&grants, &held_before)?;
            }
            Op::Tick { advance } => {
                self.now += advance;
                let now = t(self.now);
                let (expired, outcomes) = self.lt.tick(now);
                let got: BTreeSet<u64> = expired.iter().map(|l| l.token).collect();
                let want: BTreeSet<u64> = held_before
                    .iter()
                    .filter(|l| l.expires_at <= now)
                    .map(|l| l.token)
                    .collect();
                prop_assert_eq!(got, want);
                let timed_out: Vec<WaitId> = outcomes
                    .iter()
                    .filter(|o| matches!(o, WaitOutcome::TimedOut { .. }))
                    .map(WaitOutcome::wait)
                    .collect();
                let want: Vec<WaitId> = waits_before
                    .iter()
                    .filter(|w| w.deadline.is_some_and(|d| d <= now))
                    .map(|w| w.wait)
                    .collect();
                prop_assert_eq!(timed_out, want);
                self.outcomes(&outcomes, &held_before)?;
            }
            Op::Renew { who } => {
                let holder = agent(who);
                let n = self.lt.renew(&holder, now);
                prop_assert_eq!(n, held_before.iter().filter(|l| l.holder == holder).count());
                for l in self.lt.held_by(&holder) {
                    prop_assert!(l.expires_at > now);
                }
            }
            Op::RenewDue { who } => {
                let holder = agent(who);
                let n = self.lt.renew_due(&holder, now);
                let mine: Vec<&HeldLock> =
                    held_before.iter().filter(|l| l.holder == holder).collect();
                prop_assert!(n <= mine.len());
                for l in self.lt.held_by(&holder) {
                    let before = mine.iter().find(|b| b.token == l.token);
                    prop_assert!(before.is_some_and(|b| l.expires_at >= b.expires_at));
                    let ttl = self.lt.ttl_of(l.token).unwrap_or(0);
                    let least = now + chrono::TimeDelta::microseconds(ttl - ttl / RENEW_SLACK);
                    prop_assert!(l.expires_at >= least);
                }
            }
        }
        self.invariants()
    }

    fn invariants(&self) -> Result<(), TestCaseError> {
        let held: Vec<HeldLock> = self.lt.held().cloned().collect();
        let waits = self.lt.waiters();
        // (a) no two held locks conflict.
        for (i, a) in held.iter().enumerate() {
            for b in &held[i + 1..] {
                prop_assert!(
                    !lock_vs(&a.holder, a.mode, &a.path, b),
                    "{:?} vs {:?}",
                    a,
                    b
                );
            }
        }
        // (b) every queued wait is either still listed or was reported ended.
        let listed: BTreeSet<WaitId> = waits.iter().map(|w| w.wait).collect();
        prop_assert_eq!(&listed, &self.outstanding, "waits lost or invented");
        // (c) the wait-for graph stays acyclic.
        prop_assert!(!has_cycle(&graph(&held, &waits)), "cycle left: {:?}", waits);
        // Liveness: a waiter still waits only while it conflicts with a holder or an earlier waiter.
        for (i, w) in waits.iter().enumerate() {
            let blocked = held.iter().any(|l| lock_vs(&w.holder, w.mode, &w.path, l))
                || waits[..i]
                    .iter()
                    .any(|e| wait_vs(&w.holder, w.mode, &w.path, e));
            prop_assert!(blocked, "waiter {:?} could be granted", w);
        }
        // (d) the counter stays above every token.
        prop_assert!(held.iter().all(|l| l.token < self.lt.next_token()));
        // Index consistency: held_by agrees with held.
        let mut by: BTreeMap<AgentId, usize> = BTreeMap::new();
        for l in &held {
            *by.entry(l.holder.clone()).or_default() += 1;
        }
        for i in 0..AGENTS {
            let a = agent(i);
            prop_assert_eq!(self.lt.held_by(&a).len(), by.get(&a).copied().unwrap_or(0));
        }
        // next_deadline is the earliest expiry or wait deadline.
        let want = held
            .iter()
            .map(|l| l.expires_at)
            .chain(waits.iter().filter_map(|w| w.deadline))
            .min();
        prop_assert_eq!(self.lt.next_deadline(), want);
        // check() agrees with the brute force on conflicting holders.
        for i in 0..AGENTS {
            for p in PATHS {
                let path = LockPath::new(p).map_err(|e| TestCaseError::fail(e.to_string()))?;
                for m in MODES {
                    let c = self.lt.check(&agent(i), &path, m);
                    let path = if m == LockMode::Workspace {
                        LockPath::root()
                    } else {
                        path.clone()
                    };
                    let owns = |mm: LockMode| {
                        held.iter()
                            .any(|l| l.holder == agent(i) && l.path == path && l.mode == mm)
                    };
                    if owns(m) || (m == LockMode::Read && owns(LockMode::Write)) {
                        prop_assert!(c.is_empty());
                        continue;
                    }
                    let want: Vec<u64> = held
                        .iter()
                        .filter(|l| lock_vs(&agent(i), m, &path, l))
                        .map(|l| l.token)
                        .collect();
                    let got: Vec<u64> = c.holders.iter().map(|l| l.token).collect();
                    prop_assert_eq!(got, want);
                }
            }
        }
        Ok(())
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    #[test]
    fn lock_table_matches_the_oracle(ops in proptest::collection::vec(op(), 1..80)) {
        let mut m = Model { lt: LockTable::new(1), now: 0, outstanding: BTreeSet::new(), max_token: None, tokens: BTreeMap::new() };
        for op in &ops {
            m.step(op)?;
        }
        // Releasing everyone empties the table and ends every wait.
        for i in 0..AGENTS {
            let held_before: Vec<HeldLock> = m.lt.held().cloned().collect();
            let (_, waits, grants) = m.lt.release_all(&agent(i), t(m.now));
            for w in waits {
                prop_assert!(m.outstanding.remove(&w));
            }
            m.outcomes(&grants, &held_before)?;
        }
        prop_assert_eq!(m.lt.held().count(), 0);
        prop_assert!(m.outstanding.is_empty() && m.lt.waiters().is_empty());
    }
}

// ---- savepoints ----

/// The lock request an `Op::Acquire` makes at `now` (seconds); any other op is a no-wait
/// request of agent 0 on the root.
fn lock_request(op: &Op, now: i64) -> LockRequest {
    let Op::Acquire {
        who,
        path,
        mode,
        policy,
        wait_s,
        ttl_s,
    } = *op
    else {
        return LockRequest {
            holder: agent(0),
            born: born(&agent(0)),
            path: LockPath::root(),
            mode: LockMode::Write,
            wait: WaitPolicy::NoWait,
            ttl_us: 1,
        };
    };
    let holder = agent(who);
    let mode = MODES[mode];
    let path = if mode == LockMode::Workspace {
        LockPath::root()
    } else {
        LockPath::new(PATHS[path]).unwrap_or_else(|_| LockPath::root())
    };
    let wait = match policy {
        0 => WaitPolicy::NoWait,
        1 => WaitPolicy::Wait {
            until: t(now + wait_s),
        },
        _ => WaitPolicy::Forever,
    };
    LockRequest {
        born: born(&holder),
        holder,
        path,
        mode,
        wait,
        ttl_us: ttl_s * 1_000_000,
    }
}

/// Apply one operation to a table directly, returning everything it answered (for comparing
/// two tables operation by operation).
fn apply(lt: &mut LockTable, op: &Op, now: &mut i64) -> String {
    match *op {
        Op::Acquire { .. } => format!("{:?}", lt.acquire(lock_request(op, *now), t(*now))),
        Op::Release { who, path, force } => {
            let path = LockPath::new(PATHS[path]).unwrap_or_else(|_| LockPath::root());
            format!("{:?}", lt.release(&agent(who), &path, force, t(*now)))
        }
        Op::ReleaseAll { who } => format!("{:?}", lt.release_all(&agent(who), t(*now))),
        Op::Cancel { pick } => {
            let waits = lt.waiters();
            match waits.get(pick % waits.len().max(1)) {
                Some(w) => format!("{:?}", lt.cancel_wait(w.wait, t(*now))),
                None => String::new(),
            }
        }
        Op::Tick { advance } => {
            *now += advance;
            format!("{:?}", lt.tick(t(*now)))
        }
        Op::Renew { who } => format!("{:?}", lt.renew(&agent(who), t(*now))),
        Op::RenewDue { who } => format!("{:?}", lt.renew_due(&agent(who), t(*now))),
    }
}

/// Everything a caller can observe of a table.
fn observe(lt: &LockTable) -> String {
    let held: Vec<(HeldLock, Option<i64>)> =
        lt.held().map(|l| (l.clone(), lt.ttl_of(l.token))).collect();
    format!(
        "{held:?} {:?} {} {:?}",
        lt.waiters(),
        lt.next_token(),
        lt.next_deadline()
    )
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 300, ..ProptestConfig::default() })]

    /// Rolling back to a savepoint puts the table back exactly: the same view, and the same
    /// answers to any operations that follow (grants, tokens, wait ids, deadlocks, expiries).
    /// Savepoints nest: an inner one released keeps its changes for the outer rollback to undo.
    #[test]
    fn rollback_to_a_savepoint_restores_the_table(
        before in proptest::collection::vec(op(), 0..40),
        inner in proptest::collection::vec(op(), 0..20),
        undone in proptest::collection::vec(op(), 0..30),
        after in proptest::collection::vec(op(), 0..40),
    ) {
        let mut lt = LockTable::new(1);
        let mut now = 0;
        for op in &before {
            apply(&mut lt, op, &mut now);
        }
        let mut twin = lt.clone();
        let (mut twin_now, seen) = (now, observe(&lt));
        let sp = lt.savepoint();
        for op in &undone {
            apply(&mut lt, op, &mut now);
        }
        let nested = lt.savepoint();
        for op in &inner {
            apply(&mut lt, op, &mut now);
        }
        lt.release_savepoint(nested);
        lt.rollback_to(sp);
        prop_assert_eq!(observe(&lt), seen);
        now = twin_now;
        for op in &after {
            let a = apply(&mut lt, op, &mut now);
            let b = apply(&mut twin, op, &mut twin_now);
            prop_assert_eq!(a, b, "after {:?}", op);
            prop_assert_eq!(observe(&lt), observe(&twin));
        }
    }

    /// A released savepoint keeps every change.
    #[test]
    fn a_released_savepoint_keeps_the_changes(
        ops in proptest::collection::vec(op(), 0..60),
    ) {
        let (mut lt, mut twin) = (LockTable::new(1), LockTable::new(1));
        let (mut now, mut twin_now) = (0, 0);
        let sp = lt.savepoint();
        for op in &ops {
            let a = apply(&mut lt, op, &mut now);
            let b = apply(&mut twin, op, &mut twin_now);
            prop_assert_eq!(a, b);
        }
        lt.release_savepoint(sp);
        prop_assert_eq!(observe(&lt), observe(&twin));
    }
}

// ---- signs of life: `renew_due` against the exact `renew` ----

/// One step of the lease comparison: time in milliseconds, so that a sign of life often comes
/// within a twentieth of a lease of the last one.
#[derive(Clone, Debug)]
enum LeaseOp {
    Acquire {
        who: usize,
        path: usize,
        ttl_ms: i64,
    },
    Release {
        who: usize,
        path: usize,
    },
    Life {
        who: usize,
    },
    Advance {
        ms: i64,
    },
    Tick,
}

fn lease_op() -> impl Strategy<Value = LeaseOp> {
    prop_oneof![
        3 => (0..AGENTS, 1..PATHS.len(), 1i64..4_000)
            .prop_map(|(who, path, ttl_ms)| LeaseOp::Acquire { who, path, ttl_ms }),
        1 => (0..AGENTS, 1..PATHS.len()).prop_map(|(who, path)| LeaseOp::Release { who, path }),
        6 => (0..AGENTS).prop_map(|who| LeaseOp::Life { who }),
        4 => (0i64..400).prop_map(|ms| LeaseOp::Advance { ms }),
        2 => Just(LeaseOp::Tick),
    ]
}

fn ms(at: i64) -> Ts {
    t(0) + chrono::TimeDelta::milliseconds(at)
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 400, ..ProptestConfig::default() })]

    /// A sign of life through `renew_due` against the same history with every sign of life
    /// renewing every lease exactly (`renew`, what a sign of life did before): the same locks,
    /// tokens and answers, each lease ending at most `ttl / RENEW_SLACK` earlier and never
    /// later, until a tick reaps a lease early, and that only within its bound.
    #[test]
    fn a_sign_of_life_renews_within_a_twentieth_of_the_exact_lease(
        ops in proptest::collection::vec(lease_op(), 1..120),
    ) {
        let (mut lazy, mut exact) = (LockTable::new(1), LockTable::new(1));
        let mut now = 0;
        for op in &ops {
            match *op {
                LeaseOp::Acquire { who, path, ttl_ms } => {
                    let req = LockRequest {
                        holder: agent(who),
                        born: born(&agent(who)),
                        path: LockPath::new(PATHS[path]).unwrap_or_else(|_| LockPath::root()),
                        mode: LockMode::Write,
                        wait: WaitPolicy::NoWait,
                        ttl_us: ttl_ms * 1_000,
                    };
                    // A grant (or a renewal through acquire) answers the new lease: the same in
                    // both; a refusal names the same holders (whose leases may differ).
                    let answer = |r: Result<Acquired, LockError>| match r {
                        Ok(a) => format!("{a:?}"),
                        Err(LockError::Conflict { holders, .. }) => {
                            format!("{:?}", holders.iter().map(|l| l.token).collect::<Vec<_>>())
                        }
                        Err(e) => format!("{e:?}"),
                    };
                    let a = answer(lazy.acquire(req.clone(), ms(now)));
                    let b = answer(exact.acquire(req, ms(now)));
                    prop_assert_eq!(a, b);
                }
                LeaseOp::Release { who, path } => {
                    let path = LockPath::new(PATHS[path]).unwrap_or_else(|_| LockPath::root());
                    let a = lazy.release(&agent(who), &path, false, ms(now)).map(|r| r.0.len());
                    let b = exact.release(&agent(who), &path, false, ms(now)).map(|r| r.0.len());
                    prop_assert_eq!(a.is_ok(), b.is_ok());
                    prop_assert_eq!(a.ok(), b.ok());
                }
                LeaseOp::Life { who } => {
                    let n = lazy.renew_due(&agent(who), ms(now));
                    let held = exact.renew(&agent(who), ms(now));
                    prop_assert!(n <= held);
                }
                LeaseOp::Advance { ms } => now += ms,
                LeaseOp::Tick => {
                    let (a, _) = lazy.tick(ms(now));
                    let (b, _) = exact.tick(ms(now));
                    let b: BTreeSet<u64> = b.iter().map(|l| l.token).collect();
                    // Every lease the exact table reaps, the lazy one reaps too; one it reaps
                    // alone had at most its slack left in the exact table.
                    for token in &b {
                        prop_assert!(a.iter().any(|l| l.token == *token));
                    }
                    let early: Vec<&HeldLock> = a.iter().filter(|l| !b.contains(&l.token)).collect();
                    for l in &early {
                        let ttl = exact.ttl_of(l.token).unwrap_or(0);
                        let left = exact.get(l.token).map(|e| e.expires_at - ms(now));
                        prop_assert!(left.is_some_and(|d| d <= chrono::TimeDelta::microseconds(ttl / RENEW_SLACK)));
                    }
                    if !early.is_empty() {
                        // The histories part here (the exact table still holds those locks).
                        return Ok(());
                    }
                }
            }
            // The same locks and tokens; each lease within the bound.
            let a: Vec<&HeldLock> = lazy.held().collect();
            let b: Vec<&HeldLock> = exact.held().collect();
            prop_assert_eq!(a.len(), b.len());
            for (x, y) in a.iter().zip(&b) {
                prop_assert_eq!((&x.holder, &x.path, x.token), (&y.holder, &y.path, y.token));
                let ttl = exact.ttl_of(y.token).unwrap_or(0);
                prop_assert_eq!(lazy.ttl_of(x.token), Some(ttl));
                prop_assert!(x.expires_at <= y.expires_at, "{:?} after {:?}", x, y);
                prop_assert!(
                    y.expires_at - x.expires_at <= chrono::TimeDelta::microseconds(ttl / RENEW_SLACK),
                    "{:?} more than a twentieth before {:?}", x, y
                );
            }
            prop_assert_eq!(lazy.next_deadline().is_some(), exact.next_deadline().is_some());
        }
    }
}
