//! The lock table's histories, as real clients saw them over the real socket under faults,
//! checked by a linearizability checker nobody here wrote: stateright's
//! `LinearizabilityTester`, against a sequential specification of the lock table written
//! here ([`spec`]).
//!
//! Each run starts real daemons (SQLite, or a fleet of two on a throwaway PostgreSQL), has a
//! few agents take, release and renew Write locks on three files concurrently (each
//! operation's invocation and response time on the wall clock, and the token, lease and
//! holder it was told), injects one kind of fault again and again (`kill -9` of a daemon and
//! its restart, an agent's `maos` process stopped with SIGSTOP past its lease, a fleet daemon
//! cut off from PostgreSQL, PostgreSQL restarted), then checks the whole history. Each run
//! prints one line: operations checked, by outcome, faults, and how long it took; it asserts
//! floors on those counts so that it cannot pass having checked nothing. The unit tests show
//! that the checker and the specification reject broken histories (a double grant, a token
//! going backwards, a release by someone else, a grant before a lease ran out).
//!
//! The search is stateright's (depth first, one thread after another), with a memory the
//! specification gives it ([`spec::Spec`]'s `is_valid_step`): a point of the search (which
//! operations are linearized, which lock tables they could have left) reached a second time
//! is refused, since everything after its first visit was already tried. Without it the
//! search walked every order again for each place of an operation left pending long: a
//! SIGSTOPped `maos` process's request is pending 0.5-0.8 s across up to 170 other
//! operations, and a clean-clone CI run's `sqlite-sigstop` history (kept in
//! `tests/fixtures/linearizable/`) was still undecided after 120 s; with it that history is
//! decided in under a second, and so is a wrong one (a search that fails visits every point
//! once instead of every order). The verdicts are the same with or without the memory; the
//! 120 s bound stays as a safety net that fails the run.

use maos_proto::req;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use maos_core::LockMode;
use maos_proto::{LockWait, Reply, Request};
use maos_tests::client::Client;
use maos_tests::postgres::{Postgres, Shutdown, postgres_or_skip};
use maos_tests::{Env, Value};
use stateright::semantics::{ConsistencyTester, LinearizabilityTester};

use spec::{Op, Ret, Spec};

/// The sequential specification of the lock table (Write locks on single files), with time.
///
/// Time: leases make the table time-dependent, so every operation carries its invocation and
/// response times (µs on the wall clock, the clock the daemon and PostgreSQL read too) and
/// the specification keeps a clock: the time of the last operation in the linearization.
/// Along the linearization time never goes back (a daemon's batches, and a fleet's turns,
/// read the clock in order). An operation whose server time the client was told (a grant:
/// `expires_at - ttl` is the batch's `now`) happens exactly then; any other happens at the
/// earliest instant it may (the clock, or its invocation less `slack`), which is the most
/// permissive choice for everything after it.
///
/// A lease's expiry is an interval `[lo, hi]` (µs): surely alive before `lo`, surely gone
/// from `hi` on. A grant sets it exactly; a renewal whose instant is unknown (a heartbeat, a
/// release's renewal of the agent's other leases) widens it. With `half` (a daemon that may
/// restart, or other daemons reading PostgreSQL), a renewal is only sure to last half its
/// lease: the daemon writes a renewed lease once it moved by half (DESIGN.md, Locks), so
/// that is all a restarted daemon, or another daemon of a fleet, knows of it. A sign of life
/// (any request of the agent but a heartbeat) is only sure to leave a lease all but a twentieth
/// of its length (`maos_core::RENEW_SLACK`); a heartbeat renews it in full.
///
/// An operation whose answer was lost (the daemon killed, PostgreSQL gone) may or may not
/// have happened: the specification's state is the set of the lock tables that could be, and
/// such an operation adds both.
pub mod spec {
    use std::collections::{BTreeMap, BTreeSet, HashSet};
    use std::sync::{Arc, Mutex};

    use stateright::semantics::SequentialSpec;

    /// One operation: who, on what, and when the client sent it (`inv`) and heard back
    /// (`resp`), µs since the epoch.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Op {
        /// `lock acquire PATH --mode write --no-wait --ttl TTL`.
        Acquire {
            agent: u8,
            path: u8,
            ttl: i64,
            inv: i64,
            resp: i64,
        },
        /// `lock release PATH --agent AGENT`.
        Release {
            agent: u8,
            path: u8,
            inv: i64,
            resp: i64,
        },
        /// A heartbeat: every lease of the agent renewed.
        Renew { agent: u8, inv: i64, resp: i64 },
    }

    impl Op {
        pub fn agent(&self) -> u8 {
            match *self {
                Op::Acquire { agent, .. } | Op::Release { agent, .. } | Op::Renew { agent, .. } => {
                    agent
                }
            }
        }

        fn times(&self) -> (i64, i64) {
            match *self {
                Op::Acquire { inv, resp, .. }
                | Op::Release { inv, resp, .. }
                | Op::Renew { inv, resp, .. } => (inv, resp),
            }
        }
    }

    /// What the client was told.
    #[derive(Clone, Copy, Debug, PartialEq, Eq)]
    pub enum Ret {
        Granted {
            token: u64,
            acquired_at: i64,
            expires_at: i64,
        },
        /// `lock_conflict`.
        Conflict,
        Released {
            token: u64,
        },
        /// `not_found`: nobody holds the path.
        NotFound,
        /// `not_lock_holder`: someone else does.
        NotHolder,
        Renewed {
            leases: usize,
        },
        /// No answer (the connection broke) or a failure of the daemon (`unavailable`,
        /// `storage`): it may or may not have happened.
        Unknown,
        /// A failure of the daemon taken at its word, "changes nothing" (only with
        /// `MAOS_LIN_STRICT=1`: see `refusal`).
        Failed,
    }

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct Lock {
        holder: u8,
        /// `None`: granted by an operation whose answer was lost.
        token: Option<u64>,
        ttl: i64,
        /// With `half`, the longest lease length the lock had since it was granted: a daemon
        /// restarted, or another daemon, renews it by the length last written, which may be
        /// an earlier, longer one than the holder last asked for.
        ttl_hi: i64,
        /// The lease ends somewhere in `[lo, hi]`.
        lo: i64,
        hi: i64,
    }

    #[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
    struct State {
        clock: i64,
        last_token: u64,
        locks: BTreeMap<u8, Lock>,
    }

    /// A point of the search: how many operations of each agent are linearized, and every lock
    /// table they could have left.
    type Configuration = (Vec<u32>, BTreeSet<State>);

    /// Every lock table the history so far could have left.
    #[derive(Clone, Debug)]
    pub struct Spec {
        states: BTreeSet<State>,
        /// Renewals are sure for half their lease only (see the module's text).
        half: bool,
        /// How much earlier than its invocation a request may be judged: a fleet daemon's
        /// batch reads PostgreSQL's clock once it has the project's turn and then takes in
        /// the requests that came meanwhile.
        slack: i64,
        /// How many operations of each agent (index) this linearization holds: with the
        /// states, the point the search is at (one client per agent, whose operations never
        /// overlap, so these counts name the set of operations linearized).
        placed: Vec<u32>,
        /// Every point the search reached, shared by all the clones of one search: the
        /// memory stateright's search lacks (see [`Spec::is_valid_step`]).
        seen: Arc<Mutex<HashSet<Configuration>>>,
    }

    /// Bound on the states kept (a safety net: lost answers resolve quickly).
    const MAX_STATES: usize = 4096;

    impl Spec {
        pub fn new(half: bool, slack_us: i64) -> Spec {
            Spec {
                states: BTreeSet::from([State {
                    clock: i64::MIN,
                    last_token: 0,
                    locks: BTreeMap::new(),
                }]),
                half,
                slack: slack_us,
                placed: Vec::new(),
                seen: Arc::default(),
            }
        }

        /// How many points the search reached (each one explored once).
        pub fn explored(&self) -> usize {
            self.seen.lock().map_or(0, |s| s.len())
        }

        fn step(&self, s: &State, op: &Op, ret: &Ret) -> Vec<State> {
            let (inv, resp) = op.times();
            // The earliest instant this operation may be linearized at.
            let t_lo = s.clock.max(inv - self.slack);
            if t_lo > resp {
                return Vec::new();
            }
            let mut out = Vec::new();
            match (*op, *ret) {
                (
                    Op::Acquire {
                        agent, path, ttl, ..
                    },
                    Ret::Granted {
                        token,
                        acquired_at,
                        expires_at,
                    },
                ) => {
                    // The batch's `now`: a grant's lease is `now + ttl`.
                    let t = expires_at - ttl;
                    if t < t_lo || t > resp {
                        return out;
                    }
                    let held = s.locks.get(&path);
                    // Its own lock, still alive: renewed, same token.
                    if let Some(l) = held
                        && l.holder == agent
                        && l.hi > t
                        && l.token.is_none_or(|k| k == token)
                    {
                        let mut n = s.clone();
                        n.clock = t;
                        self.renew_known(&mut n, agent, t, path);
                        let lo = if self.half {
                            expires_at.min(l.lo.max(t + ttl / 2))
                        } else {
                            expires_at
                        };
                        let hi = if self.half {
                            expires_at.max(l.hi)
                        } else {
                            expires_at
                        };
                        let ttl_hi = if self.half { l.ttl_hi.max(ttl) } else { ttl };
                        n.locks.insert(
                            path,
                            Lock {
                                holder: agent,
                                token: Some(token),
                                ttl,
                                ttl_hi,
                                lo,
                                hi,
                            },
                        );
                        n.last_token = n.last_token.max(token);
                        out.push(n);
                    }
                    // A new grant: the path is free, or its lease may have run out; the token
                    // is larger than every token before it.
                    let free = held.is_none_or(|l| l.lo <= t);
                    if free && token > s.last_token && acquired_at == t {
                        let mut n = s.clone();
                        n.clock = t;
                        n.locks.remove(&path);
                        self.renew_known(&mut n, agent, t, path);
                        n.locks.insert(
                            path,
                            Lock {
                                holder: agent,
                                token: Some(token),
                                ttl,
                                ttl_hi: ttl,
                                lo: expires_at,
                                hi: expires_at,
                            },
                        );
                        n.last_token = token;
                        out.push(n);
                    }
                }
                (Op::Acquire { agent, path, .. }, Ret::Conflict) => {
                    // Someone else's lease is alive at that instant.
                    if let Some(l) = s.locks.get(&path)
                        && l.holder != agent
                        && l.hi > t_lo
                    {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        let l = n.locks.get_mut(&path).expect("just read");
                        l.lo = l.lo.max(t_lo + 1);
                        out.push(n);
                    }
                }
                (
                    Op::Acquire {
                        agent, path, ttl, ..
                    },
                    Ret::Unknown,
                ) => {
                    out.push(s.clone());
                    // Or it was granted, at the earliest instant it could be.
                    let held = s.locks.get(&path);
                    let at = match held {
                        None => Some(t_lo),
                        Some(l) if l.holder == agent && l.hi > t_lo => Some(t_lo),
                        Some(l) => Some(t_lo.max(l.lo)).filter(|t| *t <= resp),
                    };
                    if let Some(t) = at {
                        let mut n = s.clone();
                        n.clock = t;
                        let token = held
                            .filter(|l| l.holder == agent && l.hi > t)
                            .and_then(|l| l.token);
                        self.renew_unknown(&mut n, agent, t, resp, true, false);
                        let sure = if self.half { ttl / 2 } else { ttl };
                        n.locks.insert(
                            path,
                            Lock {
                                holder: agent,
                                token,
                                ttl,
                                ttl_hi: held
                                    .filter(|l| self.half && l.holder == agent)
                                    .map_or(ttl, |l| l.ttl_hi.max(ttl)),
                                lo: t + sure,
                                hi: (resp + ttl)
                                    .max(held.filter(|l| l.holder == agent).map_or(0, |l| l.hi)),
                            },
                        );
                        out.push(n);
                    }
                }
                (Op::Release { agent, path, .. }, Ret::Released { token }) => {
                    if let Some(l) = s.locks.get(&path)
                        && l.holder == agent
                        && l.hi > t_lo
                        && l.token.is_none_or(|k| k == token)
                    {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        n.locks.remove(&path);
                        // A release is a sign of life: the agent's other leases are renewed.
                        self.renew_unknown(&mut n, agent, t_lo, resp, true, false);
                        n.last_token = n.last_token.max(token);
                        out.push(n);
                    }
                }
                (Op::Release { path, .. }, Ret::NotFound) => match s.locks.get(&path) {
                    None => {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        out.push(n);
                    }
                    // Its lease may have run out by then.
                    Some(l) if t_lo.max(l.lo) <= resp => {
                        let mut n = s.clone();
                        n.clock = t_lo.max(l.lo);
                        n.locks.remove(&path);
                        out.push(n);
                    }
                    Some(_) => {}
                },
                (Op::Release { agent, path, .. }, Ret::NotHolder) => {
                    if let Some(l) = s.locks.get(&path)
                        && l.holder != agent
                        && l.hi > t_lo
                    {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        let l = n.locks.get_mut(&path).expect("just read");
                        l.lo = l.lo.max(t_lo + 1);
                        out.push(n);
                    }
                }
                (Op::Release { agent, path, .. }, Ret::Unknown) => {
                    out.push(s.clone());
                    if let Some(l) = s.locks.get(&path)
                        && l.holder == agent
                        && l.hi > t_lo
                    {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        n.locks.remove(&path);
                        self.renew_unknown(&mut n, agent, t_lo, resp, true, false);
                        out.push(n);
                    }
                }
                (Op::Renew { agent, .. }, Ret::Renewed { leases }) => {
                    let mine = s.locks.values().filter(|l| l.holder == agent);
                    let sure = mine.clone().filter(|l| l.lo > resp).count();
                    let maybe = mine.filter(|l| l.hi > t_lo).count();
                    if (sure..=maybe).contains(&leases) {
                        let mut n = s.clone();
                        n.clock = t_lo;
                        self.renew_unknown(&mut n, agent, t_lo, resp, true, true);
                        out.push(n);
                    }
                }
                (Op::Renew { agent, .. }, Ret::Unknown) => {
                    // Renewed or not: the lease ends where it did or later.
                    let mut n = s.clone();
                    self.renew_unknown(&mut n, agent, t_lo, resp, false, true);
                    out.push(n);
                }
                (_, Ret::Failed) => out.push(s.clone()),
                // Any other answer to an operation is wrong.
                _ => {}
            }
            for n in &mut out {
                // Leases surely over by now are gone for every later operation too.
                let clock = n.clock;
                n.locks.retain(|_, l| l.hi > clock);
            }
            out
        }

        /// What a renewal at `t` is sure to leave of a lease of length `ttl`: all of it for a
        /// heartbeat (`full`), else (a sign of life: any request of the agent) all but a
        /// twentieth (`maos_core::RENEW_SLACK`: a lease with more left is not moved), and with
        /// `half` only half (what a restarted daemon or another daemon reads back).
        fn sure(&self, ttl: i64, full: bool) -> i64 {
            if self.half {
                ttl / 2
            } else if full {
                ttl
            } else {
                // One microsecond less: the daemon divides its own duration type.
                ttl - ttl / maos_core::RENEW_SLACK - 1
            }
        }

        /// `agent`'s other leases renewed at the known instant `t` (any request of the agent
        /// that succeeds is a sign of life).
        fn renew_known(&self, s: &mut State, agent: u8, t: i64, except: u8) {
            for (p, l) in s.locks.iter_mut() {
                if *p == except || l.holder != agent || l.hi <= t {
                    continue;
                }
                if l.lo > t {
                    let sure = t + self.sure(l.ttl, false);
                    l.lo = l.lo.max(sure);
                }
                l.hi = l.hi.max(t + l.ttl_hi);
            }
        }

        /// `agent`'s leases renewed at an instant in `[t_lo, t_hi]`; with `sure`, the renewal
        /// did happen (else it may not have).
        fn renew_unknown(
            &self,
            s: &mut State,
            agent: u8,
            t_lo: i64,
            t_hi: i64,
            sure: bool,
            full: bool,
        ) {
            for l in s.locks.values_mut() {
                if l.holder != agent || l.hi <= t_lo {
                    continue;
                }
                if sure && l.lo > t_hi {
                    let part = self.sure(l.ttl, full);
                    l.lo = l.lo.max(t_lo + part);
                }
                l.hi = l.hi.max(t_hi + l.ttl_hi);
            }
        }
    }

    impl SequentialSpec for Spec {
        type Op = Op;
        type Ret = Ret;

        /// An operation still in flight at the end (none in these histories: a lost answer
        /// is recorded as [`Ret::Unknown`]).
        fn invoke(&mut self, op: &Op) -> Ret {
            self.is_valid_step(op, &Ret::Unknown);
            Ret::Unknown
        }

        /// The step, and the search's memory: a point (the operations linearized, the states
        /// they could have left) reached a second time is refused. stateright's search is
        /// depth-first and stops at the first linearization it completes; it goes on past a
        /// point only after everything below its first visit was tried and none completed
        /// (the counts only grow along one path, so a point is never its own ancestor). What
        /// follows a point depends on nothing but the point (the operations left, the states),
        /// so the second visit would fail too: refusing it changes no verdict, and bounds the
        /// search by the number of distinct points instead of the number of orders (the
        /// memory of Wing & Gong's and Lowe's checkers, porcupine's cache). It holds for any
        /// search that explores every point it is given in full, as stateright 0.31's does;
        /// one `Spec` serves one search (`check` makes a new one each time).
        fn is_valid_step(&mut self, op: &Op, ret: &Ret) -> bool {
            let mut next = BTreeSet::new();
            for s in &self.states {
                next.extend(self.step(s, op, ret));
                if next.len() > MAX_STATES {
                    break;
                }
            }
            if next.is_empty() {
                return false;
            }
            let agent = usize::from(op.agent());
            if self.placed.len() <= agent {
                self.placed.resize(agent + 1, 0);
            }
            self.placed[agent] += 1;
            let point = (self.placed.clone(), next);
            let fresh = match self.seen.lock() {
                Ok(mut seen) => seen.insert(point.clone()),
                // A panic elsewhere in the search: it is failing anyway.
                Err(_) => return false,
            };
            if !fresh {
                return false;
            }
            self.states = point.1;
            true
        }
    }
}

/// Microseconds since the epoch, on the wall clock the daemon and PostgreSQL read too.
fn now_us() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map(|d| d.as_micros() as i64)
        .unwrap_or(0)
}

/// One completed operation of a history.
#[derive(Clone, Debug)]
struct Rec {
    /// The client (one per agent; an agent's operations never overlap).
    thread: usize,
    op: Op,
    ret: Ret,
}

impl Rec {
    fn times(&self) -> (i64, i64) {
        match self.op {
            Op::Acquire { inv, resp, .. }
            | Op::Release { inv, resp, .. }
            | Op::Renew { inv, resp, .. } => (inv, resp),
        }
    }
}

/// How long the checker may search one history.
fn check_bound() -> Duration {
    Duration::from_secs(
        std::env::var("MAOS_LIN_BOUND")
            .ok()
            .and_then(|v| v.parse().ok())
            .unwrap_or(120),
    )
}

/// Check a history with stateright's tester: invocations and returns fed in wall-clock order
/// (an invocation before a return at the same microsecond: they count as overlapping; a
/// client's own return before its next invocation there).
/// Returns the serialized history's length, or why it is not linearizable.
fn check(history: &[Rec], half: bool, slack_us: i64) -> Result<usize, String> {
    check_counted(history, half, slack_us).0
}

/// [`check`], and how many points (operations linearized, states) its search reached.
fn check_counted(history: &[Rec], half: bool, slack_us: i64) -> (Result<usize, String>, usize) {
    let spec = Spec::new(half, slack_us);
    let probe = spec.clone();
    let verdict = search(history, spec);
    (verdict, probe.explored())
}

fn search(history: &[Rec], spec: Spec) -> Result<usize, String> {
    // The specification's memory names the operations linearized by counts per agent: one
    // client (thread) per agent.
    let mut agent_of = std::collections::BTreeMap::new();
    for r in history {
        let agent = r.op.agent();
        if *agent_of.entry(r.thread).or_insert(agent) != agent
            || history
                .iter()
                .any(|o| o.op.agent() == agent && o.thread != r.thread)
        {
            return Err(format!("a malformed history: agent {agent} on two clients"));
        }
    }
    // At one microsecond: invocations before returns (they count as overlapping), except that
    // a client's return comes before its own next invocation at that microsecond (its
    // operations never overlap). Order there: other invocations (0), the returns a client's
    // next invocation follows (1), those invocations (2), other returns (3).
    let returns: std::collections::BTreeSet<(usize, i64)> =
        history.iter().map(|r| (r.thread, r.times().1)).collect();
    let invokes: std::collections::BTreeSet<(usize, i64)> =
        history.iter().map(|r| (r.thread, r.times().0)).collect();
    let mut events: Vec<(i64, u8, usize)> = Vec::with_capacity(history.len() * 2);
    for (i, r) in history.iter().enumerate() {
        let (inv, resp) = r.times();
        let follows = inv < resp && returns.contains(&(r.thread, inv));
        events.push((inv, if follows { 2 } else { 0 }, i));
        let followed = inv < resp && invokes.contains(&(r.thread, resp));
        events.push((resp, if followed { 1 } else { 3 }, i));
    }
    events.sort();
    let mut tester = LinearizabilityTester::new(spec);
    for (_, kind, i) in events {
        let r = &history[i];
        let fed = if kind % 2 == 0 {
            tester.on_invoke(r.thread, r.op).map(|_| ())
        } else {
            tester.on_return(r.thread, r.ret).map(|_| ())
        };
        fed.map_err(|e| format!("a malformed history: {e}"))?;
    }
    // The search recurses once per operation: give it a deep stack. With the
    // specification's memory it reaches each point once (a run's 600 operations: under a
    // second here); the bound stays as a safety net: past it the run fails saying so
    // instead of hanging CI (a failure, never a pass).
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .stack_size(1 << 30)
        .spawn(move || {
            let _ = tx.send(tester.serialized_history().map(|h| h.len()));
        })
        .map_err(|e| e.to_string())?;
    match rx.recv_timeout(check_bound()) {
        Ok(Some(n)) => Ok(n),
        Ok(None) => Err("the history is not linearizable".to_string()),
        Err(_) => Err(format!(
            "the checker did not finish within {:?}",
            check_bound()
        )),
    }
}

// ---- the checker catches broken histories ----

const MS: i64 = 1000;

fn acq(agent: u8, path: u8, ttl: i64, inv: i64, resp: i64) -> Op {
    Op::Acquire {
        agent,
        path,
        ttl,
        inv,
        resp,
    }
}

fn granted(token: u64, now: i64, ttl: i64) -> Ret {
    Ret::Granted {
        token,
        acquired_at: now,
        expires_at: now + ttl,
    }
}

fn rec(thread: usize, op: Op, ret: Ret) -> Rec {
    Rec { thread, op, ret }
}

/// A client's next operation may start in the very microsecond its last one returned: its
/// return is fed first, so the history stays well formed (a run failed once as "a malformed
/// history" when the invocation at that microsecond was fed before the return).
#[test]
fn an_operation_started_in_the_microsecond_the_last_returned_is_well_formed() {
    let ttl = 1000 * MS;
    let release = |agent: u8, inv: i64, resp: i64| Op::Release {
        agent,
        path: 0,
        inv,
        resp,
    };
    let h = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), granted(1, MS, ttl)),
        // Agent 1 tries while agent 0 holds it; its call returns at 3 ms.
        rec(1, acq(1, 0, ttl, 2 * MS + 500, 3 * MS), Ret::Conflict),
        // Agent 0 releases in an operation that returns at 3 ms too, and agent 1's next call
        // starts at that same microsecond.
        rec(
            0,
            release(0, 2 * MS + 600, 3 * MS),
            Ret::Released { token: 1 },
        ),
        rec(
            1,
            acq(1, 0, ttl, 3 * MS, 4 * MS),
            granted(2, 3 * MS + 500, ttl),
        ),
    ];
    assert_eq!(check(&h, false, MS), Ok(4));
}

/// A well-formed history is accepted: a grant, a refusal while held, the holder's renewal
/// (same token), a release, the other agent's grant with a larger token, and a grant after a
/// lease ran out.
#[test]
fn the_checker_accepts_a_correct_history() {
    let ttl = 1000 * MS;
    let h = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), granted(1, MS, ttl)),
        rec(1, acq(1, 0, ttl, 3 * MS, 4 * MS), Ret::Conflict),
        rec(
            0,
            acq(0, 0, ttl, 5 * MS, 7 * MS),
            Ret::Granted {
                token: 1,
                acquired_at: MS,
                expires_at: 6 * MS + ttl,
            },
        ),
        rec(
            0,
            Op::Release {
                agent: 0,
                path: 0,
                inv: 8 * MS,
                resp: 9 * MS,
            },
            Ret::Released { token: 1 },
        ),
        rec(
            1,
            acq(1, 0, ttl, 10 * MS, 11 * MS),
            granted(2, 10 * MS, ttl),
        ),
        // Agent 1's lease (until 1010 ms) ran out: agent 0 gets the file.
        rec(
            0,
            acq(0, 0, ttl, 1500 * MS, 1501 * MS),
            granted(5, 1500 * MS, ttl),
        ),
        rec(
            1,
            Op::Release {
                agent: 1,
                path: 0,
                inv: 1502 * MS,
                resp: 1503 * MS,
            },
            Ret::NotHolder,
        ),
    ];
    assert_eq!(check(&h, false, 0), Ok(h.len()));
    assert_eq!(check(&h, true, 0), Ok(h.len()));
}

/// Two agents told they hold one file at once (overlapping requests, both granted while the
/// first lease runs): rejected.
#[test]
fn the_checker_rejects_a_double_grant() {
    let ttl = 1000 * MS;
    let h = vec![
        rec(0, acq(0, 0, ttl, 0, 3 * MS), granted(1, MS, ttl)),
        rec(1, acq(1, 0, ttl, MS, 4 * MS), granted(2, 2 * MS, ttl)),
    ];
    assert!(check(&h, false, 0).is_err());
    assert!(check(&h, true, 250 * MS).is_err());
    // The same two grants a lease apart are fine.
    let ok = vec![
        rec(0, acq(0, 0, ttl, 0, 3 * MS), granted(1, MS, ttl)),
        rec(
            1,
            acq(1, 0, ttl, ttl + MS, ttl + 4 * MS),
            granted(2, ttl + 2 * MS, ttl),
        ),
    ];
    assert_eq!(check(&ok, false, 0), Ok(2));
}

/// A token going backwards (a later grant of another file with a smaller token): rejected.
#[test]
fn the_checker_rejects_a_token_going_backwards() {
    let ttl = 1000 * MS;
    let h = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), granted(7, MS, ttl)),
        rec(1, acq(1, 1, ttl, 3 * MS, 5 * MS), granted(6, 4 * MS, ttl)),
    ];
    assert!(check(&h, false, 0).is_err());
    assert!(check(&h, true, 250 * MS).is_err());
}

/// A release by an agent that does not hold the file, a refusal on a free file, and a grant
/// whose answer was lost followed by a grant to another agent before that lease could end:
/// each rejected. The lost grant alone (never followed by a conflicting answer) is accepted
/// whether or not it happened.
#[test]
fn the_checker_rejects_a_release_by_another_a_refusal_of_a_free_file_and_a_lost_grant_overtaken() {
    let ttl = 1000 * MS;
    let release_by_other = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), granted(1, MS, ttl)),
        rec(
            1,
            Op::Release {
                agent: 1,
                path: 0,
                inv: 3 * MS,
                resp: 4 * MS,
            },
            Ret::Released { token: 1 },
        ),
    ];
    assert!(check(&release_by_other, false, 0).is_err());
    let refused_free = vec![rec(1, acq(1, 0, ttl, 0, MS), Ret::Conflict)];
    assert!(check(&refused_free, true, 0).is_err());

    // Agent 0's grant was lost; agent 1 is then refused (agent 0 holds it) and agent 2 is
    // granted at once: agent 0's lease cannot have ended yet.
    let lost = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), Ret::Unknown),
        rec(1, acq(1, 0, ttl, 3 * MS, 4 * MS), Ret::Conflict),
        rec(2, acq(2, 0, ttl, 5 * MS, 6 * MS), granted(3, 5 * MS, ttl)),
    ];
    assert!(check(&lost, true, 0).is_err());
    assert_eq!(check(&lost[..2], true, 0), Ok(2));
    assert_eq!(check(&[lost[0].clone(), lost[2].clone()], true, 0), Ok(2));
}

/// A renewed lease is sure for half its length only where renewals may be lost (`half`):
/// another agent's grant three quarters into a renewed lease is rejected on one daemon that
/// never restarted, accepted where the daemon may have restarted.
#[test]
fn a_renewal_is_sure_for_half_a_lease_where_a_daemon_may_restart() {
    let ttl = 1000 * MS;
    let h = vec![
        rec(0, acq(0, 0, ttl, 0, 2 * MS), granted(1, MS, ttl)),
        rec(
            0,
            Op::Renew {
                agent: 0,
                inv: 500 * MS,
                resp: 501 * MS,
            },
            Ret::Renewed { leases: 1 },
        ),
        rec(
            1,
            acq(1, 0, ttl, 1260 * MS, 1262 * MS),
            granted(2, 1261 * MS, ttl),
        ),
    ];
    assert!(check(&h, false, 0).is_err());
    assert_eq!(check(&h, true, 0), Ok(3));
}

/// A lease shortened by a re-acquire with a shorter `--ttl` is not written (it did not move
/// forward), so a restarted daemon holds the longer lease it last wrote: where a daemon may
/// restart, a refusal after the shortened lease ended is accepted; on one daemon that never
/// restarts it is not.
#[test]
fn a_shortened_lease_may_run_its_written_length_where_a_daemon_may_restart() {
    let h = vec![
        rec(0, acq(0, 0, 600 * MS, 0, 2 * MS), granted(1, MS, 600 * MS)),
        rec(
            0,
            acq(0, 0, 150 * MS, 100 * MS, 102 * MS),
            Ret::Granted {
                token: 1,
                acquired_at: MS,
                expires_at: 251 * MS,
            },
        ),
        rec(1, acq(1, 0, 150 * MS, 500 * MS, 502 * MS), Ret::Conflict),
    ];
    assert!(check(&h, false, 0).is_err());
    assert_eq!(check(&h, true, 0), Ok(3));
}

/// The history of `sqlite-sigstop` a clean-clone CI run gave up on after searching it for
/// 120 s (`tests/fixtures/linearizable/`, 601 operations): the SIGSTOPped agent's requests stay pending for
/// 0.5-0.8 s across up to 173 other operations. With the specification's memory it is
/// decided: linearizable as recorded.
#[test]
fn the_history_ci_gave_up_on_is_decided() {
    let h = ci_history();
    assert_eq!(h.len(), 601);
    let (verdict, points) = check_counted(&h, false, MS);
    assert_eq!(verdict, Ok(601));
    eprintln!("the CI history: linearizable, {points} points searched");
    // Its first 37 operations hold a stopped request (a refusal) without the operations
    // answered before it that let it be placed: no linearization. Cut where nothing is
    // pending instead, the prefix passes (as the runs' non-vacuity check cuts it).
    let mut sorted = h.clone();
    sorted.sort_by_key(|r| r.times().0);
    assert_eq!(
        check(&sorted[..37], false, MS),
        Err("the history is not linearizable".to_string())
    );
    let k = quiet_cut(&sorted, 37);
    assert!(k > 37, "{k}");
    assert_eq!(check(&sorted[..k], false, MS), Ok(k));
}

/// The same history with one grant in its middle told a token of 0 (not above the tokens
/// before it): rejected, which walks every point the wrong grant can be reached from (without
/// the memory, every order of the operations before it).
#[test]
fn the_history_ci_gave_up_on_with_a_token_gone_backwards_is_rejected() {
    let mut h = ci_history();
    h.sort_by_key(|r| r.times().0);
    let mid = (300..h.len())
        .find(|&i| matches!(h[i].ret, Ret::Granted { .. }))
        .expect("a grant after the 300th operation");
    if let Ret::Granted { token, .. } = &mut h[mid].ret {
        *token = 0;
    }
    let (verdict, points) = check_counted(&h, false, MS);
    assert_eq!(verdict, Err("the history is not linearizable".to_string()));
    eprintln!("the CI history, its grant {mid} told token 0: rejected, {points} points searched");
}

fn ci_history() -> Vec<Rec> {
    let file = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fixtures/linearizable/sqlite-sigstop-ci.txt");
    parse_history(&std::fs::read_to_string(&file).expect("the fixture"))
}

// ---- the runs ----

/// The files the agents lock.
const PATHS: [&str; 3] = ["src/a.rs", "src/b.rs", "src/c.rs"];
/// How long a run's clients work.
const RUN: Duration = Duration::from_secs(6);
/// Most operations one run records (the checker's search grows with the history).
fn max_ops() -> usize {
    std::env::var("MAOS_LIN_OPS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(600)
}

/// A tiny deterministic PRNG (xorshift64*).
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1)
    }

    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// A lease: mostly short, so that leases run out during a run.
fn pick_ttl(rng: &mut Rng) -> i64 {
    [150, 300, 600][rng.below(3) as usize] * MS
}

/// What the next operation of an agent is.
fn pick_op(rng: &mut Rng) -> (u8, u8) {
    let kind = match rng.below(100) {
        0..55 => 0,  // acquire
        55..88 => 1, // release
        _ => 2,      // heartbeat
    };
    (kind, rng.below(PATHS.len() as u64) as u8)
}

/// A pause between operations now and then, long enough for a lease to run out.
fn think(rng: &mut Rng) {
    let ms = match rng.below(100) {
        0..4 => 200 + rng.below(400),
        _ => rng.below(4),
    };
    if ms > 0 {
        std::thread::sleep(Duration::from_millis(ms));
    }
}

/// Shared by a run's clients and its fault injector.
struct Run {
    start: Instant,
    ops: AtomicUsize,
    grants: AtomicUsize,
    conflicts: AtomicUsize,
    releases: AtomicUsize,
    faults: AtomicUsize,
    stop: AtomicBool,
    /// What the run must have recorded before it may end (asserted after it).
    floors: Floors,
}

/// The least a run records: operations, grants, conflicts, releases (and two faults).
#[derive(Clone, Copy)]
struct Floors {
    ops: usize,
    grants: usize,
    conflicts: usize,
    releases: usize,
}

impl Floors {
    fn of(kind: Fault) -> Floors {
        // A PostgreSQL restart holds every client up for a while, so fewer operations.
        if kind == Fault::PgRestart {
            Floors {
                ops: 60,
                grants: 10,
                conflicts: 5,
                releases: 3,
            }
        } else {
            Floors {
                ops: 150,
                grants: 20,
                conflicts: 5,
                releases: 10,
            }
        }
    }
}

impl Run {
    fn new(kind: Fault) -> Run {
        Run {
            start: Instant::now(),
            ops: AtomicUsize::new(0),
            grants: AtomicUsize::new(0),
            conflicts: AtomicUsize::new(0),
            releases: AtomicUsize::new(0),
            faults: AtomicUsize::new(0),
            stop: AtomicBool::new(false),
            floors: Floors::of(kind),
        }
    }

    /// One operation recorded, with what it was told.
    fn record(&self, ret: &Ret) {
        self.ops.fetch_add(1, Ordering::SeqCst);
        let count = match ret {
            Ret::Granted { .. } => &self.grants,
            Ret::Conflict => &self.conflicts,
            Ret::Released { .. } => &self.releases,
            _ => return,
        };
        count.fetch_add(1, Ordering::SeqCst);
    }

    /// Over after `RUN` or `max_ops()` operations, once at least two faults were injected
    /// (a PostgreSQL restart can take seconds) and the floors were reached (a slow, loaded
    /// machine runs longer rather than fail them), and in any case after three times `RUN`.
    fn over(&self) -> bool {
        let load = |n: &AtomicUsize| n.load(Ordering::SeqCst);
        let f = self.floors;
        let enough = self.start.elapsed() >= RUN || load(&self.ops) >= max_ops();
        let floors = load(&self.ops) >= f.ops
            && load(&self.grants) >= f.grants
            && load(&self.conflicts) >= f.conflicts
            && load(&self.releases) >= f.releases;
        self.stop.load(Ordering::SeqCst)
            || self.start.elapsed() >= 3 * RUN
            || (enough && floors && load(&self.faults) >= 2)
    }
}

/// An agent driving a daemon over the wire with maos-tests' typed client, reconnecting after
/// a lost connection (the daemon killed): its operation's answer is then unknown.
fn wire_agent(
    run: &Run,
    thread: usize,
    agent: u8,
    id: &str,
    socket: &std::path::Path,
    root: &str,
) -> Vec<Rec> {
    let mut rng = Rng::new(thread as u64 + 11);
    let mut out = Vec::new();
    let mut client: Option<Client> = None;
    while !run.over() {
        let c = match client.as_mut() {
            Some(c) => c,
            None => match Client::connect(socket, root) {
                Ok(c) => client.insert(c),
                // The daemon is being restarted: try again (bounded by the run's end).
                Err(_) => {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                }
            },
        };
        let (kind, path) = pick_op(&mut rng);
        let ttl = pick_ttl(&mut rng);
        let body = match kind {
            0 => Request::LockAcquire(req::LockAcquire {
                agent: id.to_string(),
                lock: req::Acquire {
                    at: req::LockAt {
                        path: PATHS[path as usize].to_string(),
                        cwd: None,
                    },
                    mode: LockMode::Write,
                    wait: LockWait::NoWait,
                    ttl_ms: Some((ttl / MS) as u64),
                },
            }),
            1 => Request::LockRelease(req::LockRelease {
                agent: Some(id.to_string()),
                at: req::LockAt {
                    path: PATHS[path as usize].to_string(),
                    cwd: None,
                },
                force: false,
                by: None,
            }),
            _ => Request::Heartbeat(req::Heartbeat {
                agent: id.to_string(),
            }),
        };
        let inv = now_us();
        let answer = c.call_try(body);
        let resp = now_us();
        let ret = match answer {
            Err(_) => {
                client = None;
                Ret::Unknown
            }
            Ok(Ok(Reply::Lock(v))) => Ret::Granted {
                token: v.token,
                acquired_at: v.acquired_at.timestamp_micros(),
                expires_at: v.expires_at.timestamp_micros(),
            },
            Ok(Ok(Reply::Released(v))) if v.len() == 1 => Ret::Released { token: v[0].token },
            Ok(Ok(Reply::Renewed { leases })) => Ret::Renewed { leases },
            Ok(Ok(other)) => panic!("agent {agent}: unexpected answer {other:?}"),
            Ok(Err(e)) => refusal(e.code.as_str()),
        };
        out.push(rec(thread, make_op(kind, agent, path, ttl, inv, resp), ret));
        run.record(&ret);
        if ret == Ret::Unknown {
            // As an agent would: a moment before trying again.
            std::thread::sleep(Duration::from_millis(20 + rng.below(30)));
        }
        think(&mut rng);
    }
    out
}

fn make_op(kind: u8, agent: u8, path: u8, ttl: i64, inv: i64, resp: i64) -> Op {
    match kind {
        0 => acq(agent, path, ttl, inv, resp),
        1 => Op::Release {
            agent,
            path,
            inv,
            resp,
        },
        _ => Op::Renew { agent, inv, resp },
    }
}

/// A refusal's code as the specification's answer; a failure of the daemon is unknown.
fn refusal(code: &str) -> Ret {
    match code {
        "lock_conflict" => Ret::Conflict,
        "not_found" => Ret::NotFound,
        "not_lock_holder" => Ret::NotHolder,
        // What docs/fleet.md says of a daemon cut off from PostgreSQL, checked on request: a
        // lost COMMIT acknowledgement is `unavailable` too, and may have committed.
        "unavailable" if std::env::var_os("MAOS_LIN_STRICT").is_some() => Ret::Failed,
        _ => Ret::Unknown,
    }
}

/// An agent working through the `maos` binary, one process per operation; with `stop`, every
/// fourth operation's process is stopped (SIGSTOP) a moment after it starts, for longer than
/// the lease it asks for, then continued. Returns its operations and how many times it was
/// stopped.
fn cli_agent(
    run: &Run,
    env: &Env,
    thread: usize,
    agent: u8,
    id: &str,
    stop: bool,
) -> (Vec<Rec>, usize) {
    let mut rng = Rng::new(thread as u64 + 101);
    let mut out = Vec::new();
    let mut stops = 0;
    let mut n = 0u64;
    while !run.over() {
        n += 1;
        let (kind, path) = pick_op(&mut rng);
        let kind = kind.min(1);
        let ttl = pick_ttl(&mut rng);
        let p = PATHS[path as usize];
        let ttl_arg = format!("{}ms", ttl / MS);
        let args: Vec<&str> = if kind == 0 {
            vec![
                "--json",
                "lock",
                "acquire",
                p,
                "--agent",
                id,
                "--no-wait",
                "--ttl",
                &ttl_arg,
            ]
        } else {
            vec!["--json", "lock", "release", p, "--agent", id]
        };
        let mut cmd = env.maos_cmd_in(&env.project, &args);
        cmd.stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null());
        let inv = now_us();
        let child = cmd.spawn().expect("spawn maos");
        if stop && n.is_multiple_of(4) {
            // A moment in: before, during or after its request.
            std::thread::sleep(Duration::from_micros(rng.below(4000)));
            let pid = child.id() as libc::pid_t;
            // SAFETY: plain kill(2) on this test's own child, not yet reaped.
            unsafe { libc::kill(pid, libc::SIGSTOP) };
            std::thread::sleep(Duration::from_micros((ttl + 200 * MS) as u64));
            // SAFETY: as above.
            unsafe { libc::kill(pid, libc::SIGCONT) };
            stops += 1;
            run.faults.fetch_add(1, Ordering::SeqCst);
        }
        let output = child.wait_with_output().expect("maos ran");
        let resp = now_us();
        let v: Option<Value> = serde_json::from_slice(&output.stdout).ok();
        let ret = match v {
            None => Ret::Unknown,
            Some(v) if output.status.success() => {
                if kind == 0 {
                    Ret::Granted {
                        token: v["token"].as_u64().expect("token"),
                        acquired_at: maos_tests::ts_micros(
                            v["acquired_at"].as_str().expect("acquired_at"),
                        ),
                        expires_at: maos_tests::ts_micros(
                            v["expires_at"].as_str().expect("expires_at"),
                        ),
                    }
                } else {
                    let released = v.as_array().expect("released locks");
                    assert_eq!(released.len(), 1, "{v}");
                    Ret::Released {
                        token: released[0]["token"].as_u64().expect("token"),
                    }
                }
            }
            Some(v) => refusal(v["error"]["code"].as_str().unwrap_or("?")),
        };
        out.push(rec(thread, make_op(kind, agent, path, ttl, inv, resp), ret));
        run.record(&ret);
        think(&mut rng);
    }
    (out, stops)
}

/// Where an agent's client goes: a daemon's socket and project.
struct Seat<'a> {
    env: &'a Env,
    id: String,
}

#[derive(Clone, Copy, PartialEq, Eq, Debug)]
enum Fault {
    /// `kill -9` of a daemon, restarted by the next `maos` command.
    Kill9,
    /// An agent's `maos` process stopped past its lease.
    Sigstop,
    /// A fleet daemon cut off from PostgreSQL, then mended.
    NetCut,
    /// PostgreSQL restarted (immediate shutdown: a crash).
    PgRestart,
}

/// What a fault injector can reach.
struct Faults<'a> {
    kind: Fault,
    /// The daemon killed or cut off.
    victim: &'a Env,
    net: Option<&'a maos_tests::netcut::NetCut>,
    pg: Option<&'a mut Postgres>,
}

/// Inject `f.kind` until the run ends; returns how many times.
fn inject(run: &Run, f: &mut Faults<'_>) -> usize {
    if f.kind == Fault::Sigstop {
        return 0; // the CLI agent stops itself
    }
    let mut n = 0;
    let mut rng = Rng::new(7);
    // Let the clients get going between faults.
    let gap = || Duration::from_millis(700);
    while !run.over() {
        std::thread::sleep(gap() + Duration::from_millis(rng.below(300)));
        if run.over() {
            break;
        }
        match f.kind {
            Fault::Sigstop => {}
            Fault::Kill9 => {
                let Some(pid) = f.victim.pidfile_pid() else {
                    continue;
                };
                maos_tests::kill9(pid);
                maos_tests::wait_until(maos_tests::DEADLINE, "the killed daemon is gone", || {
                    !maos_tests::alive(pid)
                });
                // Restarted by a client that starts it (the wire clients do not).
                let out = f.victim.maos(&["--json", "lock", "list"]);
                assert!(
                    out.status.success(),
                    "restart: {}",
                    maos_tests::describe(&out)
                );
            }
            Fault::NetCut => {
                let net = f.net.expect("a link to cut");
                net.cut();
                // Past the longest lease: the others' daemon sees its agents' leases run out.
                std::thread::sleep(Duration::from_millis(800));
                net.restore();
            }
            Fault::PgRestart => {
                let pg = f.pg.as_mut().expect("a server");
                pg.restart(Shutdown::Immediate)
                    .expect("PostgreSQL restarts");
            }
        }
        n += 1;
        run.faults.fetch_add(1, Ordering::SeqCst);
    }
    n
}

/// One run: `seats` are the agents (the last one works through the `maos` binary when the
/// fault is SIGSTOP), each on its daemon; the history is checked, its counts printed and
/// held to floors.
fn run(name: &str, seats: &[Seat<'_>], mut faults: Faults<'_>, half: bool, slack_us: i64) {
    let kind = faults.kind;
    let run = Arc::new(Run::new(kind));
    let (histories, stops, injected) = std::thread::scope(|s| {
        let mut wire = Vec::new();
        let mut cli = None;
        for (i, seat) in seats.iter().enumerate() {
            let run = &run;
            if kind == Fault::Sigstop && i == seats.len() - 1 {
                cli = Some(s.spawn(move || cli_agent(run, seat.env, i, i as u8, &seat.id, true)));
            } else {
                let root = Env::project_root(&seat.env.project);
                wire.push(
                    s.spawn(move || wire_agent(run, i, i as u8, &seat.id, &seat.env.socket, &root)),
                );
            }
        }
        let injected = inject(&run, &mut faults);
        let mut all: Vec<Rec> = Vec::new();
        for w in wire {
            all.extend(w.join().expect("an agent's thread panicked"));
        }
        let mut stops = 0;
        if let Some(c) = cli {
            let (h, n) = c.join().expect("the CLI agent's thread panicked");
            all.extend(h);
            stops = n;
        }
        (all, stops, injected)
    });
    run.stop.store(true, Ordering::SeqCst);
    let ran = run.start.elapsed();
    let t0 = Instant::now();
    if std::env::var_os("MAOS_LIN_DUMP").is_some() {
        let mut h = histories.clone();
        h.sort_by_key(|r| r.times());
        let dump: Vec<String> = h.iter().map(|r| format!("{r:?}")).collect();
        let _ = std::fs::write(format!("/tmp/lin-{name}.txt"), dump.join("\n"));
        eprintln!("{name}: {} ops recorded in {ran:?}", h.len());
    }
    let (checked, points) = check_counted(&histories, half, slack_us);
    let took = t0.elapsed();
    let count = |f: &dyn Fn(&Ret) -> bool| histories.iter().filter(|r| f(&r.ret)).count();
    let grants = count(&|r| matches!(r, Ret::Granted { .. }));
    let conflicts = count(&|r| matches!(r, Ret::Conflict));
    let releases = count(&|r| matches!(r, Ret::Released { .. }));
    let not_found = count(&|r| matches!(r, Ret::NotFound));
    let not_holder = count(&|r| matches!(r, Ret::NotHolder));
    let renewals = count(&|r| matches!(r, Ret::Renewed { .. }));
    let unknown = count(&|r| matches!(r, Ret::Unknown));
    let failed = count(&|r| matches!(r, Ret::Failed));
    let faults_n = injected + stops;
    eprintln!(
        "{name}: {} operations checked ({grants} grants, {conflicts} conflicts, {releases} \
         releases, {not_found} not_found, {not_holder} not_lock_holder, {renewals} renewals, \
         {unknown} unknown, {failed} failed) under {faults_n} faults ({kind:?}); clients ran {ran:.1?}, the \
         checker took {took:.1?} ({points} points searched)",
        histories.len(),
    );
    if let Err(e) = checked {
        let mut h = histories.clone();
        h.sort_by_key(|r| r.times());
        let dump: Vec<String> = h.iter().map(|r| format!("{r:?}")).collect();
        let file = std::env::temp_dir().join(format!("maos-linearizable-{name}.txt"));
        let _ = std::fs::write(&file, dump.join("\n"));
        panic!("{name}: {e} (the history is in {})", file.display());
    }
    // Not vacuous on what was recorded either: the same history's first 60 operations (or a
    // few more: up to where nothing is pending) pass, and with its first grant told a token
    // of 0 (not above the tokens before) they fail.
    let mut head = histories.clone();
    head.sort_by_key(|r| r.times().0);
    head.truncate(quiet_cut(&head, 60));
    let t1 = Instant::now();
    assert_eq!(
        check(&head, half, slack_us),
        Ok(head.len()),
        "{name}: its first {}",
        head.len()
    );
    let last = head
        .iter()
        .position(|r| matches!(r.ret, Ret::Granted { .. }))
        .expect("a grant among the first operations");
    if let Ret::Granted { token, .. } = &mut head[last].ret {
        *token = 0;
    }
    assert!(
        check(&head, half, slack_us).is_err(),
        "{name}: a token of 0 passed"
    );
    eprintln!(
        "{name}: its first {} operations with a grant's token set to 0: rejected ({:.1?})",
        head.len(),
        t1.elapsed()
    );
    // Floors (the run went on until it reached them, for up to three times `RUN`).
    let f = run.floors;
    assert!(
        histories.len() >= f.ops,
        "{name}: only {} operations",
        histories.len()
    );
    assert!(
        grants >= f.grants && conflicts >= f.conflicts && releases >= f.releases,
        "{name}: too little contention"
    );
    assert!(faults_n >= 2, "{name}: only {faults_n} faults");
}

/// A session and one agent per seat on `env`; the agents' ids.
fn agents(env: &Env, n: usize) -> Vec<String> {
    env.session("linearizable", &[]);
    (0..n)
        .map(|i| env.agent(None, &format!("agent{i}"), "lock work"))
        .collect()
}

#[test]
fn sqlite_histories_under_kill9_and_sigstop_are_linearizable() {
    if maos_tests::sqlite_only("the SQLite runs (the fleet runs are below)") {
        return;
    }
    for fault in [Fault::Kill9, Fault::Sigstop] {
        let env = Env::new();
        let ids = agents(&env, 4);
        let seats: Vec<Seat> = ids.into_iter().map(|id| Seat { env: &env, id }).collect();
        let faults = Faults {
            kind: fault,
            victim: &env,
            net: None,
            pg: None,
        };
        // One daemon that never restarts keeps every renewal it told; one that is killed
        // may lose up to half of one.
        let half = fault == Fault::Kill9;
        run(
            &format!("sqlite-{fault:?}").to_lowercase(),
            &seats,
            faults,
            half,
            MS,
        );
    }
}

/// A fleet daemon (its own home and clone) in project `key`, its database reached at `url`.
fn fleet_daemon(url: &str, machine: &str, key: &str) -> Env {
    let env = Env::new();
    env.write_config(&format!(
        "database_url = \"{url}\"\nmachine = \"{machine}\"\n"
    ));
    std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
    std::fs::write(
        env.project.join(".maos/config.toml"),
        format!("project = \"{key}\"\n"),
    )
    .expect("write");
    env
}

#[test]
fn fleet_histories_under_kill9_sigstop_netcut_and_postgres_restart_are_linearizable() {
    let Some(mut pg) = postgres_or_skip() else {
        return;
    };
    for fault in [
        Fault::Kill9,
        Fault::Sigstop,
        Fault::NetCut,
        Fault::PgRestart,
    ] {
        let key = format!("acme/linearizable-{fault:?}").to_lowercase();
        let net = maos_tests::netcut::NetCut::start(([127, 0, 0, 1], pg.port()).into())
            .expect("the link");
        let through = pg
            .url()
            .replace(&format!("127.0.0.1:{}", pg.port()), &net.addr().to_string());
        let a = fleet_daemon(&through, "machine-1", &key);
        let b = fleet_daemon(&pg.url(), "machine-2", &key);
        let session = a.session("linearizable", &[]);
        let ids: Vec<String> = (0..4)
            .map(|i| a.agent(Some(&session), &format!("agent{i}"), "lock work"))
            .collect();
        // b's daemon is started and has the project open.
        let _ = b.maos_json(&["lock", "list"]);
        // Agents 0 and 2 on daemon a, 1 and 3 on daemon b.
        let seats: Vec<Seat> = ids
            .into_iter()
            .enumerate()
            .map(|(i, id)| Seat {
                env: if i % 2 == 0 { &a } else { &b },
                id,
            })
            .collect();
        let faults = Faults {
            kind: fault,
            victim: &a,
            net: Some(&net),
            pg: (fault == Fault::PgRestart).then_some(&mut pg),
        };
        run(
            &format!("fleet-{fault:?}").to_lowercase(),
            &seats,
            faults,
            true,
            250 * MS,
        );
    }
}

/// The first cut at or after `k` operations of `h` (sorted by invocation) where nothing is
/// pending: every operation before it answered before the next one was sent. A prefix cut
/// there is linearizable if the whole history is (whatever comes after follows all of it in
/// real time); a prefix cut elsewhere may hold a request sent before the cut and answered
/// after operations it no longer has (a SIGSTOPped one: 0.5-0.8 s), and fail for that alone.
fn quiet_cut(h: &[Rec], k: usize) -> usize {
    let mut answered = h[..k.min(h.len())]
        .iter()
        .map(|r| r.times().1)
        .max()
        .unwrap_or(i64::MIN);
    let mut k = k;
    while k < h.len() && answered >= h[k].times().0 {
        answered = answered.max(h[k].times().1);
        k += 1;
    }
    k.min(h.len())
}

/// A history as a run writes it (one `Rec` a line, `{:?}`).
fn parse_history(text: &str) -> Vec<Rec> {
    let num = |line: &str, key: &str| -> i64 {
        let at = line
            .find(key)
            .unwrap_or_else(|| panic!("no {key} in {line}"))
            + key.len();
        let digits: String = line[at..]
            .chars()
            .take_while(|c| c.is_ascii_digit() || *c == '-')
            .collect();
        digits.parse().unwrap_or_else(|_| panic!("{key} in {line}"))
    };
    let mut h: Vec<Rec> = Vec::new();
    for line in text.lines() {
        let (agent, inv, resp) = (
            num(line, "agent: ") as u8,
            num(line, "inv: "),
            num(line, "resp: "),
        );
        let op = if line.contains("Acquire") {
            acq(
                agent,
                num(line, "path: ") as u8,
                num(line, "ttl: "),
                inv,
                resp,
            )
        } else if line.contains("op: Release") {
            Op::Release {
                agent,
                path: num(line, "path: ") as u8,
                inv,
                resp,
            }
        } else {
            Op::Renew { agent, inv, resp }
        };
        let ret = if line.contains("Granted") {
            Ret::Granted {
                token: num(line, "token: ") as u64,
                acquired_at: num(line, "acquired_at: "),
                expires_at: num(line, "expires_at: "),
            }
        } else if line.contains("ret: Released") {
            Ret::Released {
                token: num(line, "token: ") as u64,
            }
        } else if line.contains("Renewed") {
            Ret::Renewed {
                leases: num(line, "leases: ") as usize,
            }
        } else if line.contains("ret: Conflict") {
            Ret::Conflict
        } else if line.contains("NotFound") {
            Ret::NotFound
        } else if line.contains("NotHolder") {
            Ret::NotHolder
        } else if line.contains("ret: Failed") {
            Ret::Failed
        } else {
            Ret::Unknown
        };
        h.push(rec(num(line, "thread: ") as usize, op, ret));
    }
    h
}

/// Re-check a history a run wrote (`MAOS_LIN_REPLAY=FILE`, with `MAOS_LIN_HALF=1` and
/// `MAOS_LIN_SLACK_US`), prefix by prefix: where a failing run went wrong.
#[test]
#[ignore = "a tool: re-checks a history file a failed run wrote"]
fn replay() {
    let Some(file) = std::env::var_os("MAOS_LIN_REPLAY") else {
        return;
    };
    let half = std::env::var_os("MAOS_LIN_HALF").is_some();
    let slack: i64 = std::env::var("MAOS_LIN_SLACK_US")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(MS);
    let text = std::fs::read_to_string(file).expect("the history file");
    let mut h = parse_history(&text);
    h.sort_by_key(|r| r.times().0);
    let step: usize = std::env::var("MAOS_LIN_STEP")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(25);
    let mut k: usize = std::env::var("MAOS_LIN_FROM")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(step);
    while k <= h.len() {
        k = quiet_cut(&h, k);
        let t = Instant::now();
        let r = check(&h[..k], half, slack);
        eprintln!("prefix {k}: {r:?} in {:?}", t.elapsed());
        if r.is_err() {
            for r in &h[k.saturating_sub(step + 10)..k] {
                eprintln!("  {r:?}");
            }
            break;
        }
        k += step;
    }
}
