//! [`LockTable`]: held locks, the FIFO wait queue, leases and fencing tokens.

use std::collections::{BTreeMap, BTreeSet};

use super::index::PathIndex;
use super::{
    Acquired, Conflicts, ForeignWait, HeldLock, LockError, LockMode, LockPath, LockRequest, WaitId,
    WaitOutcome, WaitPolicy, WaiterInfo, conflicts,
};
use crate::{AgentId, Ts};

/// A held lock and its lease length.
#[derive(Clone, Debug)]
pub(super) struct Entry {
    pub(super) lock: HeldLock,
    /// Lease length in microseconds, re-applied on every renewal.
    pub(super) ttl_us: i64,
}

/// A parked request.
#[derive(Clone, Debug)]
pub(super) struct Waiter {
    pub(super) holder: AgentId,
    pub(super) born: Ts,
    pub(super) path: LockPath,
    pub(super) mode: LockMode,
    pub(super) ttl_us: i64,
    pub(super) since: Ts,
    pub(super) deadline: Option<Ts>,
    /// Parked through another daemon of a fleet: its key there, and until when it counts.
    pub(super) foreign: Option<Box<Foreign>>,
}

#[derive(Clone, Debug)]
pub(super) struct Foreign {
    pub(super) key: String,
    lapse: Ts,
}

impl Waiter {
    /// When [`LockTable::tick`] ends it: its deadline, or for a foreign wait its lapse (its own
    /// daemon times it out).
    fn ends_at(&self) -> Option<Ts> {
        match &self.foreign {
            Some(f) => Some(f.lapse),
            None => self.deadline,
        }
    }
}

/// One change to the table, as needed to undo it (the journal kept while a savepoint is open).
#[derive(Clone, Debug)]
enum Undo {
    /// A lock was inserted: remove it.
    Inserted(u64),
    /// A lock was removed: put it back.
    Removed(Entry),
    /// A lease changed: set it back.
    Lease {
        token: u64,
        expires_at: Ts,
        ttl_us: i64,
    },
    /// A request was parked: remove it.
    Parked(WaitId),
    /// A parked request was removed: park it again.
    Unparked(WaitId, Waiter),
    /// An upgrade's replaced Read lock was recorded: forget it.
    Replaced(u64),
    /// An upgrade's replaced Read lock was taken: record it again.
    ReplacedTaken(u64, HeldLock),
}

/// A point the table can go back to ([`LockTable::savepoint`]).
#[derive(Debug)]
#[must_use = "a savepoint must be released or rolled back"]
pub struct LockSavepoint {
    journal_len: usize,
    next_token: u64,
    next_wait: WaitId,
}

/// A request tried now: granted, or blocked by these holders (tokens) and earlier waiters.
enum Now {
    Granted(HeldLock),
    Blocked {
        path: LockPath,
        holders: Vec<u64>,
        queued: Vec<WaitId>,
    },
}

/// What [`LockTable::acquire`] would do with a request right now.
enum Decision {
    /// Already held (same path and mode, or Write held and Read asked): renew that lock.
    Renew,
    /// Grant a new lock (replacing the holder's Read lock on an upgrade).
    Grant,
    /// Must wait for these holders (tokens) and earlier waiters.
    Blocked {
        holders: Vec<u64>,
        queued: Vec<WaitId>,
    },
}

/// The lock table of one project: the authority on who holds what, who waits for what, and the
/// next fencing token.
///
/// Requests are granted in arrival order: a request is granted at once only when it conflicts
/// with no lock of another agent and with no earlier queued request of another agent, with two
/// exceptions that never make anyone wait longer than they already do: a request whose
/// conflicting waiters all already wait for a lock of the requester, and a Read→Write upgrade
/// whose grant closes no wait-for cycle. Waiters are served in arrival order whenever something
/// is released, expires, times out or is cancelled. A wait that would close a cycle in the
/// wait-for graph ends the wait of the youngest agent in the cycle at once.
///
/// Expired leases keep conflicting until [`LockTable::tick`] reaps them: call `tick(now)` before
/// [`LockTable::acquire`] when the timer may be late.
#[derive(Clone, Debug, Default)]
pub struct LockTable {
    next_token: u64,
    next_wait: WaitId,
    /// Held locks by token.
    pub(super) locks: BTreeMap<u64, Entry>,
    held_index: PathIndex,
    by_holder: BTreeMap<AgentId, BTreeSet<u64>>,
    expiries: BTreeSet<(Ts, u64)>,
    /// Each holder's locks by when a sign of life next renews them (`due_at`): what
    /// [`LockTable::renew_due`] walks, so that a sign of life costs nothing per lock held.
    due: BTreeMap<AgentId, BTreeSet<(Ts, u64)>>,
    /// Parked requests by wait id (= queue order).
    pub(super) waits: BTreeMap<WaitId, Waiter>,
    wait_index: PathIndex,
    pub(super) waits_by_holder: BTreeMap<AgentId, BTreeSet<WaitId>>,
    deadlines: BTreeSet<(Ts, WaitId)>,
    /// The foreign waits' ids here, by their key.
    foreign: BTreeMap<String, WaitId>,
    /// Read locks ended by a Read→Write upgrade, by the token of the Write lock that replaced
    /// them, until the caller takes them ([`LockTable::take_replaced`]) to record their end.
    replaced: BTreeMap<u64, HeldLock>,
    /// How many savepoints are open; while any is, every change is journaled.
    open_savepoints: usize,
    /// The changes made since the oldest open savepoint, oldest first.
    journal: Vec<Undo>,
    /// Each lock inserted, removed or whose lease changed since its holder's owner last
    /// settled it ([`LockTable::changed`], [`LockTable::settle_changed`]), with its holder: what
    /// the daemon compares with the database, instead of every lock an agent holds. It grows
    /// with every change until settled: a long-lived table's owner settles it (the daemon at
    /// every batch).
    changed: BTreeSet<(u64, AgentId)>,
}

/// `t + us` microseconds, saturating at the largest representable instant.
fn add_us(t: Ts, us: i64) -> Ts {
    t.checked_add_signed(chrono::TimeDelta::microseconds(us))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MAX_UTC)
}

/// A sign of life ([`LockTable::renew_due`]) leaves a lease alone while it still has at least
/// `1 - 1/RENEW_SLACK` of its length to run: a lease then ends at most a twentieth of its length
/// earlier than if every sign of life renewed it (30 s of the default 10 minutes).
pub const RENEW_SLACK: i64 = 20;

/// When a sign of life next renews this lock: once less than `ttl - ttl / RENEW_SLACK` of its
/// lease is left (the earliest instant if that cannot be represented: renewed every time).
fn due_at(e: &Entry) -> Ts {
    let keep = e.ttl_us - e.ttl_us / RENEW_SLACK;
    e.lock
        .expires_at
        .checked_sub_signed(chrono::TimeDelta::microseconds(keep))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC)
}

/// Above this many locks, "does this agent hold a conflicting lock" uses the path index instead
/// of walking the agent's locks.
const SMALL_HOLDING: usize = 32;

impl LockTable {
    /// An empty table whose next grant gets token `next_token` (continue from the persisted
    /// counter: fencing tokens are per project and strictly increasing across restarts).
    pub fn new(next_token: u64) -> Self {
        Self {
            next_token,
            ..Self::default()
        }
    }

    /// Restore a held lock at daemon start (before any request). Its lease length, re-applied by
    /// [`LockTable::renew`], is taken as `expires_at - acquired_at` (at least 1 µs); use
    /// [`LockTable::restore_with_ttl`] when the real lease length is known. Tokens are kept;
    /// `next_token` is raised above every restored token. Restoring a token or a (holder, path,
    /// mode) that is already held replaces that lock.
    pub fn restore(&mut self, lock: HeldLock) {
        let ttl = (lock.expires_at - lock.acquired_at)
            .num_microseconds()
            .unwrap_or(i64::MAX)
            .max(1);
        self.restore_with_ttl(lock, ttl);
    }

    /// [`LockTable::restore`] with an explicit lease length for renewals (clamped to ≥ 1 µs).
    pub fn restore_with_ttl(&mut self, lock: HeldLock, ttl_us: i64) {
        self.remove_lock(lock.token);
        if let Some(t) = self.own_lock(&lock.holder, lock.mode, &lock.path) {
            self.remove_lock(t);
        }
        self.next_token = self.next_token.max(lock.token.saturating_add(1));
        self.insert_lock(lock, ttl_us.max(1));
    }

    /// Make the held locks exactly `held` (the authority's: in a fleet, what PostgreSQL holds
    /// after other daemons changed it). Locks not in it are gone (their end was recorded
    /// where it happened) and the waits they blocked are served; locks new in it are added;
    /// a lease moved elsewhere is moved here. Waits stay. Returns the grants that followed.
    pub fn sync_held(&mut self, held: Vec<(HeldLock, i64)>, now: Ts) -> Vec<WaitOutcome> {
        let held: BTreeMap<u64, (HeldLock, i64)> =
            held.into_iter().map(|(l, t)| (l.token, (l, t))).collect();
        let gone: Vec<u64> = self
            .locks
            .keys()
            .filter(|t| !held.contains_key(t))
            .copied()
            .collect();
        let removed: Vec<HeldLock> = gone
            .into_iter()
            .filter_map(|t| self.remove_lock(t))
            .collect();
        for (token, (lock, ttl_us)) in held {
            match self.locks.get(&token) {
                Some(e)
                    if e.lock.holder == lock.holder
                        && e.lock.path == lock.path
                        && e.lock.mode == lock.mode =>
                {
                    if e.lock.expires_at != lock.expires_at {
                        self.set_expiry(token, lock.expires_at);
                    }
                }
                _ => self.restore_with_ttl(lock, ttl_us),
            }
        }
        self.grant_after(&removed, &[], now)
    }

    /// Make the foreign waits exactly `waits` (what other daemons of a fleet have parked, in
    /// their fleet-wide arrival order). Waits new here queue after every wait already here,
    /// which is their arrival order too when every change reaches this table before the next
    /// local request; a wait whose lapse moved is kept in its place. The waits it drops free
    /// what they blocked: returns the grants that followed.
    pub fn sync_foreign(&mut self, waits: Vec<ForeignWait>, now: Ts) -> Vec<WaitOutcome> {
        let keep: BTreeSet<&str> = waits.iter().map(|w| w.key.as_str()).collect();
        let gone: Vec<WaitId> = self
            .foreign
            .iter()
            .filter(|(k, _)| !keep.contains(k.as_str()))
            .map(|(_, id)| *id)
            .collect();
        let ended: Vec<Waiter> = gone
            .into_iter()
            .filter_map(|id| self.remove_waiter(id))
            .collect();
        for f in waits {
            match self.foreign.get(&f.key).copied() {
                Some(id) => {
                    let renewed = self
                        .waits
                        .get(&id)
                        .and_then(|w| w.foreign.as_ref())
                        .is_some_and(|o| o.lapse != f.lapse);
                    if renewed && let Some(mut w) = self.remove_waiter(id) {
                        if let Some(o) = &mut w.foreign {
                            o.lapse = f.lapse;
                        }
                        self.insert_waiter(id, w);
                    }
                }
                None => {
                    let id = self.next_wait;
                    self.next_wait = id.saturating_add(1);
                    self.insert_waiter(
                        id,
                        Waiter {
                            holder: f.holder,
                            born: f.born,
                            path: f.path,
                            mode: f.mode,
                            ttl_us: 1,
                            since: f.since,
                            deadline: f.deadline,
                            foreign: Some(Box::new(Foreign {
                                key: f.key,
                                lapse: f.lapse,
                            })),
                        },
                    );
                }
            }
        }
        self.grant_after(&[], &ended, now)
    }

    /// Ask for a lock. Granted now, queued (with any deadlock victims it caused and the grants
    /// that followed), or refused: [`LockError::BadTtl`] for `ttl_us <= 0`,
    /// [`LockError::Conflict`] when it cannot be granted and may not wait (`NoWait`, or a
    /// `Wait` deadline not after `now`), [`LockError::Deadlock`] when waiting would close a
    /// wait-for cycle in which the requester is the youngest agent. An error changes nothing.
    pub fn acquire(&mut self, req: LockRequest, now: Ts) -> Result<Acquired, LockError> {
        let (path, holders, queued) = match self.grant_now(&req, now)? {
            Now::Granted(lock) => return Ok(Acquired::Granted(lock)),
            Now::Blocked {
                path,
                holders,
                queued,
            } => (path, holders, queued),
        };
        let deadline = match req.wait {
            WaitPolicy::Forever => None,
            WaitPolicy::Wait { until } if until > now => Some(until),
            WaitPolicy::NoWait | WaitPolicy::Wait { .. } => {
                return Err(self.conflict(path, req.mode, &holders, &queued));
            }
        };
        let victims = self.deadlock_victims(&req.holder, req.born, &path, &holders, &queued)?;

        let wait = self.next_wait;
        self.next_wait = wait.saturating_add(1);
        let mut scopes = Vec::with_capacity(victims.len());
        for v in &victims {
            if let Some(w) = self.remove_waiter(v.wait) {
                scopes.push((w.mode, w.path));
            }
        }
        self.insert_waiter(
            wait,
            Waiter {
                holder: req.holder,
                born: req.born,
                path,
                mode: req.mode,
                ttl_us: req.ttl_us,
                since: now,
                deadline,
                foreign: None,
            },
        );
        let candidates = self.waiters_overlapping(&scopes);
        let granted = self.grant_waiting(candidates, now);
        Ok(Acquired::Queued {
            wait,
            victims,
            granted,
        })
    }

    /// Take every requested lock now, or none: each is granted at once under the rules of
    /// [`LockTable::acquire`] (its wait policy is ignored: nothing is queued), and the first
    /// that cannot be ([`LockError::Conflict`], [`LockError::BadTtl`]) undoes the grants
    /// before it. Returns the grants in request order.
    pub fn acquire_all(
        &mut self,
        reqs: Vec<LockRequest>,
        now: Ts,
    ) -> Result<Vec<HeldLock>, LockError> {
        let sp = self.savepoint();
        let mut granted = Vec::with_capacity(reqs.len());
        for req in &reqs {
            match self.grant_now(req, now) {
                Ok(Now::Granted(lock)) => granted.push(lock),
                Ok(Now::Blocked {
                    path,
                    holders,
                    queued,
                }) => {
                    let e = self.conflict(path, req.mode, &holders, &queued);
                    self.rollback_to(sp);
                    return Err(e);
                }
                Err(e) => {
                    self.rollback_to(sp);
                    return Err(e);
                }
            }
        }
        self.release_savepoint(sp);
        Ok(granted)
    }

    /// Release the locks of `holder` on exactly `path` (every mode it holds there). With
    /// `force`, release every agent's locks on exactly `path` instead (`holder` is then only the
    /// requester). Returns the released locks (by token) and the waiters granted as a result (in
    /// queue order). [`LockError::NotHolder`] when only others hold locks there,
    /// [`LockError::NotHeld`] when nobody does; an error changes nothing.
    pub fn release(
        &mut self,
        holder: &AgentId,
        path: &LockPath,
        force: bool,
        now: Ts,
    ) -> Result<(Vec<HeldLock>, Vec<WaitOutcome>), LockError> {
        let mut at: Vec<u64> = self
            .held_index
            .at(LockMode::Write, path)
            .chain(self.held_index.at(LockMode::Directory, path))
            .collect();
        if path.is_root() {
            at.extend(self.held_index.at(LockMode::Workspace, path));
        }
        at.sort_unstable();
        let mine: Vec<u64> = at
            .iter()
            .copied()
            .filter(|t| force || self.holder_of(*t) == Some(holder))
            .collect();
        if mine.is_empty() {
            let held_by: BTreeSet<&AgentId> =
                at.iter().filter_map(|t| self.holder_of(*t)).collect();
            if held_by.is_empty() {
                return Err(LockError::NotHeld {
                    path: path.clone(),
                    holder: holder.clone(),
                });
            }
            return Err(LockError::NotHolder {
                path: path.clone(),
                holder: holder.clone(),
                held_by: held_by.into_iter().cloned().collect(),
            });
        }
        let released: Vec<HeldLock> = mine.iter().filter_map(|t| self.remove_lock(*t)).collect();
        let grants = self.grant_after(&released, &[], now);
        Ok((released, grants))
    }

    /// Release every lock of an agent and cancel its waits (the agent finished or died).
    /// Returns the released locks (by token), the cancelled waits, and the grants that followed
    /// (in queue order).
    pub fn release_all(
        &mut self,
        holder: &AgentId,
        now: Ts,
    ) -> (Vec<HeldLock>, Vec<WaitId>, Vec<WaitOutcome>) {
        let tokens: Vec<u64> = self
            .by_holder
            .get(holder)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        // A foreign wait is its own daemon's to end.
        let waits: Vec<WaitId> = self
            .waits_by_holder
            .get(holder)
            .into_iter()
            .flatten()
            .filter(|w| self.waits.get(w).is_some_and(|w| w.foreign.is_none()))
            .copied()
            .collect();
        let released: Vec<HeldLock> = tokens.iter().filter_map(|t| self.remove_lock(*t)).collect();
        let ended: Vec<Waiter> = waits
            .iter()
            .filter_map(|w| self.remove_waiter(*w))
            .collect();
        let grants = self.grant_after(&released, &ended, now);
        (released, waits, grants)
    }

    /// Cancel one parked wait (its client went away). Unknown ids are ignored. Returns the grants
    /// that became possible (in queue order).
    pub fn cancel_wait(&mut self, wait: WaitId, now: Ts) -> Vec<WaitOutcome> {
        match self.remove_waiter(wait) {
            Some(w) => self.grant_after(&[], &[w], now),
            None => Vec::new(),
        }
    }

    /// Extend every lease of `holder` to `now` + its lease length (any sign of life); a lease
    /// never gets shorter. Returns how many locks the agent holds (all renewed).
    pub fn renew(&mut self, holder: &AgentId, now: Ts) -> usize {
        let tokens: Vec<u64> = self
            .by_holder
            .get(holder)
            .map(|s| s.iter().copied().collect())
            .unwrap_or_default();
        for &t in &tokens {
            if let Some(e) = self.locks.get(&t) {
                let expires = add_us(now, e.ttl_us).max(e.lock.expires_at);
                self.set_expiry(t, expires);
            }
        }
        tokens.len()
    }

    /// A sign of life of `holder` at `now` (any request naming it): renew to `now` + its lease
    /// length each of its leases that has less than `ttl - ttl / RENEW_SLACK` left, the others
    /// stay. Afterwards every lease of `holder` runs until at least `now + ttl - ttl /
    /// RENEW_SLACK`, never later than [`LockTable::renew`] would have set it, and never gets
    /// shorter. Costs nothing per lock that is not due, so an agent holding many locks pays
    /// for their renewal once per twentieth of a lease, not on every call. Returns how many
    /// leases it renewed.
    pub fn renew_due(&mut self, holder: &AgentId, now: Ts) -> usize {
        let due: Vec<u64> = match self.due.get(holder) {
            Some(set) => set.range(..(now, 0)).map(|&(_, t)| t).collect(),
            None => return 0,
        };
        for &t in &due {
            if let Some(e) = self.locks.get(&t) {
                let expires = add_us(now, e.ttl_us).max(e.lock.expires_at);
                self.set_expiry(t, expires);
            }
        }
        due.len()
    }

    /// Reap expired leases (`expires_at <= now`) and time out waits whose deadline is `<= now`,
    /// then grant what became possible. Returns the expired locks (by expiry) and the outcomes:
    /// `TimedOut` for ended waits (queue order), then `Granted` for new grants (queue order).
    pub fn tick(&mut self, now: Ts) -> (Vec<HeldLock>, Vec<WaitOutcome>) {
        let expired: Vec<u64> = self
            .expiries
            .range(..=(now, u64::MAX))
            .map(|&(_, t)| t)
            .collect();
        let mut timed_out: Vec<WaitId> = self
            .deadlines
            .range(..=(now, WaitId::MAX))
            .map(|&(_, w)| w)
            .collect();
        timed_out.sort_unstable();
        let released: Vec<HeldLock> = expired
            .iter()
            .filter_map(|t| self.remove_lock(*t))
            .collect();
        let mut outcomes = Vec::new();
        let mut ended = Vec::new();
        for id in timed_out {
            if let Some(w) = self.remove_waiter(id) {
                // A foreign wait that lapsed just leaves the queue.
                if w.foreign.is_some() {
                    ended.push(w);
                    continue;
                }
                outcomes.push(WaitOutcome::TimedOut {
                    wait: id,
                    holder: w.holder.clone(),
                    path: w.path.clone(),
                });
                ended.push(w);
            }
        }
        outcomes.extend(self.grant_after(&released, &ended, now));
        (released, outcomes)
    }

    /// The earliest instant at which [`LockTable::tick`] would do something (a lease expiry or a
    /// wait deadline; possibly already past), for the daemon's timer. `None`: nothing pending.
    pub fn next_deadline(&self) -> Option<Ts> {
        let lease = self.expiries.first().map(|&(t, _)| t);
        let wait = self.deadlines.first().map(|&(t, _)| t);
        match (lease, wait) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Who a request would have to wait for right now: conflicting locks of other agents and
    /// earlier queued requests it would wait behind. Empty when [`LockTable::acquire`] would
    /// grant it at once. Pure query.
    pub fn check(&self, holder: &AgentId, path: &LockPath, mode: LockMode) -> Conflicts {
        let root;
        let path = if mode == LockMode::Workspace {
            root = LockPath::root();
            &root
        } else {
            path
        };
        match self.decide(holder, mode, path) {
            Decision::Renew | Decision::Grant => Conflicts::default(),
            Decision::Blocked { holders, queued } => self.describe(&holders, &queued),
        }
    }

    /// All held locks, by token.
    pub fn held(&self) -> impl Iterator<Item = &HeldLock> {
        self.locks.values().map(|e| &e.lock)
    }

    /// The locks of one agent, by token.
    pub fn held_by(&self, holder: &AgentId) -> Vec<&HeldLock> {
        self.by_holder
            .get(holder)
            .into_iter()
            .flatten()
            .filter_map(|t| self.locks.get(t).map(|e| &e.lock))
            .collect()
    }

    /// The parked waits, foreign ones too, in queue order.
    pub fn waiters(&self) -> Vec<WaiterInfo> {
        self.waits.iter().map(|(id, w)| info(*id, w)).collect()
    }

    /// The parked wait with this id.
    pub fn waiter(&self, id: WaitId) -> Option<WaiterInfo> {
        self.waits.get(&id).map(|w| info(id, w))
    }

    /// The token the next grant will get (persist it with the grant).
    /// The held lock with this token.
    pub fn get(&self, token: u64) -> Option<&HeldLock> {
        self.locks.get(&token).map(|e| &e.lock)
    }

    /// The lease length (µs) of the held lock with this token.
    pub fn ttl_of(&self, token: u64) -> Option<i64> {
        self.locks.get(&token).map(|e| e.ttl_us)
    }

    pub fn next_token(&self) -> u64 {
        self.next_token
    }

    /// Number the next grants from `start` when that is higher (a fleet's daemon moving to a
    /// fresh block of tokens); tokens never go back.
    pub fn raise_next_token(&mut self, start: u64) {
        self.next_token = self.next_token.max(start);
    }

    /// The id the next parked wait will get.
    pub fn next_wait(&self) -> WaitId {
        self.next_wait
    }

    /// Number the next waits from `start` when that is higher (a table rebuilt after a failed
    /// commit goes on where the old one stopped, so a wait id is never given twice).
    pub fn raise_next_wait(&mut self, start: WaitId) {
        self.next_wait = self.next_wait.max(start);
    }

    /// The Read lock that the grant with this token replaced (a Read→Write upgrade), once: the
    /// caller records that it ended. `None` for any other grant.
    pub fn take_replaced(&mut self, token: u64) -> Option<HeldLock> {
        let lock = self.replaced.remove(&token)?;
        self.log(Undo::ReplacedTaken(token, lock.clone()));
        Some(lock)
    }

    /// The locks inserted, removed or whose lease changed since they were last settled
    /// ([`LockTable::settle_changed`]), by token, each with its holder (a token that changed
    /// holder is listed with each). A rolled-back change stays listed: the list may say more
    /// than what differs, never less.
    pub fn changed(&self) -> impl Iterator<Item = (u64, &AgentId)> {
        self.changed.iter().map(|(t, h)| (*t, h))
    }

    /// Keep listed only the changes for which `pending` says so (the caller has recorded the
    /// others where it keeps them).
    pub fn settle_changed(&mut self, mut pending: impl FnMut(&LockTable, u64, &AgentId) -> bool) {
        let changed = std::mem::take(&mut self.changed);
        self.changed = changed
            .into_iter()
            .filter(|(t, h)| pending(self, *t, h))
            .collect();
    }

    // ---- savepoints ----

    /// Open a savepoint: every change from now on is journaled, so that
    /// [`LockTable::rollback_to`] can put the table back exactly as it is now (held locks,
    /// leases, the wait queue, the token and wait counters). Savepoints nest; each must be
    /// ended by [`LockTable::release_savepoint`] or [`LockTable::rollback_to`], innermost first.
    pub fn savepoint(&mut self) -> LockSavepoint {
        self.open_savepoints += 1;
        LockSavepoint {
            journal_len: self.journal.len(),
            next_token: self.next_token,
            next_wait: self.next_wait,
        }
    }

    /// Keep the changes made since `sp` (an outer savepoint can still undo them).
    pub fn release_savepoint(&mut self, sp: LockSavepoint) {
        debug_assert!(self.journal.len() >= sp.journal_len);
        self.open_savepoints = self.open_savepoints.saturating_sub(1);
        if self.open_savepoints == 0 {
            self.journal.clear();
        }
    }

    /// Undo every change made since `sp`, newest first.
    pub fn rollback_to(&mut self, sp: LockSavepoint) {
        let depth = std::mem::take(&mut self.open_savepoints);
        while self.journal.len() > sp.journal_len {
            let Some(undo) = self.journal.pop() else {
                break;
            };
            match undo {
                Undo::Inserted(token) => {
                    self.remove_lock(token);
                }
                Undo::Removed(e) => self.insert_lock(e.lock, e.ttl_us),
                Undo::Lease {
                    token,
                    expires_at,
                    ttl_us,
                } => {
                    self.set_expiry(token, expires_at);
                    self.due_out(token);
                    if let Some(e) = self.locks.get_mut(&token) {
                        e.ttl_us = ttl_us;
                    }
                    self.due_in(token);
                }
                Undo::Parked(id) => {
                    self.remove_waiter(id);
                }
                Undo::Unparked(id, w) => self.insert_waiter(id, w),
                Undo::Replaced(token) => {
                    self.replaced.remove(&token);
                }
                Undo::ReplacedTaken(token, lock) => {
                    self.replaced.insert(token, lock);
                }
            }
        }
        self.next_token = sp.next_token;
        self.next_wait = sp.next_wait;
        self.open_savepoints = depth.saturating_sub(1);
        if self.open_savepoints == 0 {
            self.journal.clear();
        }
    }

    fn log(&mut self, undo: Undo) {
        if self.open_savepoints > 0 {
            self.journal.push(undo);
        }
    }

    // ---- decisions ----

    /// Grant the request now if nothing stands in the way, else say who does.
    fn grant_now(&mut self, req: &LockRequest, now: Ts) -> Result<Now, LockError> {
        if req.ttl_us <= 0 {
            return Err(LockError::BadTtl(req.ttl_us));
        }
        let path = if req.mode == LockMode::Workspace {
            LockPath::root()
        } else {
            req.path.clone()
        };
        Ok(match self.decide(&req.holder, req.mode, &path) {
            Decision::Renew | Decision::Grant => {
                Now::Granted(self.grant(&req.holder, req.mode, &path, req.ttl_us, now))
            }
            Decision::Blocked { holders, queued } => Now::Blocked {
                path,
                holders,
                queued,
            },
        })
    }

    /// The refusal of a request that may not wait for these holders and waiters.
    fn conflict(
        &self,
        path: LockPath,
        mode: LockMode,
        holders: &[u64],
        queued: &[WaitId],
    ) -> LockError {
        let conflicts = self.describe(holders, queued);
        LockError::Conflict {
            path,
            mode,
            holders: conflicts.holders,
            queued: conflicts.queued,
        }
    }

    fn decide(&self, holder: &AgentId, mode: LockMode, path: &LockPath) -> Decision {
        if self.own_lock(holder, mode, path).is_some()
            || (mode == LockMode::Read && self.own_lock(holder, LockMode::Write, path).is_some())
        {
            return Decision::Renew;
        }
        let holders = self.conflicting_holders(holder, mode, path);
        let queued = self.conflicting_waiters(holder, mode, path, WaitId::MAX, &BTreeSet::new());
        if !holders.is_empty() || queued.is_empty() {
            return if holders.is_empty() {
                Decision::Grant
            } else {
                Decision::Blocked { holders, queued }
            };
        }
        // Only queued requests stand in the way. Jumping ahead of those that already wait for a
        // lock of this holder delays nobody; anyone else would get a new wait-for edge.
        let newly: BTreeSet<&AgentId> = queued
            .iter()
            .filter_map(|w| self.waits.get(w))
            .filter(|w| !self.agent_blocks(holder, &w.holder, w.mode, &w.path))
            .map(|w| &w.holder)
            .collect();
        if newly.is_empty() {
            return Decision::Grant;
        }
        // A Read→Write upgrade may still jump the queue (queueing it behind requests that wait
        // for its own Read lock would deadlock for sure) unless that closes a cycle.
        let upgrade =
            mode == LockMode::Write && self.own_lock(holder, LockMode::Read, path).is_some();
        if upgrade && !self.reaches(holder, &newly) {
            return Decision::Grant;
        }
        Decision::Blocked { holders, queued }
    }

    /// Whether a lock of `agent` conflicts with a request of `waiter` for `(mode, path)`.
    fn agent_blocks(
        &self,
        agent: &AgentId,
        waiter: &AgentId,
        mode: LockMode,
        path: &LockPath,
    ) -> bool {
        let Some(tokens) = self.by_holder.get(agent) else {
            return false;
        };
        let blocks = |t: &u64| {
            self.locks
                .get(t)
                .is_some_and(|e| conflicts(waiter, mode, path, agent, e.lock.mode, &e.lock.path))
        };
        if tokens.len() <= SMALL_HOLDING {
            return tokens.iter().any(blocks);
        }
        let mut ids = Vec::new();
        self.held_index.overlapping(mode, path, &mut ids);
        ids.iter().any(|t| tokens.contains(t) && blocks(t))
    }

    /// Tokens of the locks of other agents conflicting with `(holder, mode, path)`, sorted.
    pub(super) fn conflicting_holders(
        &self,
        holder: &AgentId,
        mode: LockMode,
        path: &LockPath,
    ) -> Vec<u64> {
        let mut ids = Vec::new();
        self.held_index.overlapping(mode, path, &mut ids);
        ids.retain(|t| {
            self.locks.get(t).is_some_and(|e| {
                conflicts(
                    holder,
                    mode,
                    path,
                    &e.lock.holder,
                    e.lock.mode,
                    &e.lock.path,
                )
            })
        });
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// Waits queued before `before` (and not in `removed`) of other agents conflicting with
    /// `(holder, mode, path)`, in queue order.
    pub(super) fn conflicting_waiters(
        &self,
        holder: &AgentId,
        mode: LockMode,
        path: &LockPath,
        before: WaitId,
        removed: &BTreeSet<WaitId>,
    ) -> Vec<WaitId> {
        let mut ids = Vec::new();
        self.wait_index.overlapping(mode, path, &mut ids);
        ids.retain(|id| {
            *id < before
                && !removed.contains(id)
                && self
                    .waits
                    .get(id)
                    .is_some_and(|w| conflicts(holder, mode, path, &w.holder, w.mode, &w.path))
        });
        ids.sort_unstable();
        ids.dedup();
        ids
    }

    /// A waiter that conflicts with no holder and no earlier waiter may be granted.
    fn grantable(&self, id: WaitId, w: &Waiter) -> bool {
        let mut ids = Vec::new();
        self.held_index.overlapping(w.mode, &w.path, &mut ids);
        let held = ids.iter().any(|t| {
            self.locks.get(t).is_some_and(|e| {
                conflicts(
                    &w.holder,
                    w.mode,
                    &w.path,
                    &e.lock.holder,
                    e.lock.mode,
                    &e.lock.path,
                )
            })
        });
        if held {
            return false;
        }
        ids.clear();
        self.wait_index.overlapping(w.mode, &w.path, &mut ids);
        !ids.iter().any(|e| {
            *e < id
                && self.waits.get(e).is_some_and(|o| {
                    conflicts(&w.holder, w.mode, &w.path, &o.holder, o.mode, &o.path)
                })
        })
    }

    fn describe(&self, holders: &[u64], queued: &[WaitId]) -> Conflicts {
        Conflicts {
            holders: holders
                .iter()
                .filter_map(|t| self.locks.get(t).map(|e| e.lock.clone()))
                .collect(),
            queued: queued
                .iter()
                .filter_map(|id| self.waits.get(id).map(|w| info(*id, w)))
                .collect(),
        }
    }

    fn holder_of(&self, token: u64) -> Option<&AgentId> {
        self.locks.get(&token).map(|e| &e.lock.holder)
    }

    /// The lock `holder` holds with exactly this mode and path.
    fn own_lock(&self, holder: &AgentId, mode: LockMode, path: &LockPath) -> Option<u64> {
        self.held_index.at(mode, path).find(|t| {
            self.locks
                .get(t)
                .is_some_and(|e| e.lock.holder == *holder && e.lock.mode == mode)
        })
    }

    // ---- grants ----

    /// Grant `(holder, mode, path)` now: renew what already covers it, replace a Read lock on a
    /// Write upgrade, else a new lock with the next token.
    fn grant(
        &mut self,
        holder: &AgentId,
        mode: LockMode,
        path: &LockPath,
        ttl_us: i64,
        now: Ts,
    ) -> HeldLock {
        let covering = self.own_lock(holder, mode, path).or_else(|| {
            (mode == LockMode::Read)
                .then(|| self.own_lock(holder, LockMode::Write, path))
                .flatten()
        });
        if let Some(lock) = covering.and_then(|t| self.renew_lock(t, now, ttl_us)) {
            return lock;
        }
        let replaced = if mode == LockMode::Write {
            self.own_lock(holder, LockMode::Read, path)
                .and_then(|t| self.remove_lock(t))
        } else {
            None
        };
        let token = self.next_token;
        self.next_token = token.saturating_add(1);
        if let Some(read) = replaced {
            self.replaced.insert(token, read);
            self.log(Undo::Replaced(token));
        }
        let lock = HeldLock {
            path: path.clone(),
            mode,
            holder: holder.clone(),
            token,
            acquired_at: now,
            expires_at: add_us(now, ttl_us),
        };
        self.insert_lock(lock.clone(), ttl_us);
        lock
    }

    /// Set a lock's lease to `now + ttl_us` (and remember that lease length).
    fn renew_lock(&mut self, token: u64, now: Ts, ttl_us: i64) -> Option<HeldLock> {
        self.due_out(token);
        let e = self.locks.get_mut(&token)?;
        let undo = Undo::Lease {
            token,
            expires_at: e.lock.expires_at,
            ttl_us: e.ttl_us,
        };
        self.expiries.remove(&(e.lock.expires_at, token));
        e.ttl_us = ttl_us;
        e.lock.expires_at = add_us(now, ttl_us);
        self.expiries.insert((e.lock.expires_at, token));
        self.changed.insert((token, e.lock.holder.clone()));
        let lock = e.lock.clone();
        self.due_in(token);
        self.log(undo);
        Some(lock)
    }

    /// Grants that follow the removal of these locks and waits.
    fn grant_after(&mut self, locks: &[HeldLock], waits: &[Waiter], now: Ts) -> Vec<WaitOutcome> {
        let scopes: Vec<(LockMode, LockPath)> = locks
            .iter()
            .map(|l| (l.mode, l.path.clone()))
            .chain(waits.iter().map(|w| (w.mode, w.path.clone())))
            .collect();
        let candidates = self.waiters_overlapping(&scopes);
        self.grant_waiting(candidates, now)
    }

    /// Waits overlapping any of these scopes: the only ones a removal there can unblock.
    fn waiters_overlapping(&self, scopes: &[(LockMode, LockPath)]) -> BTreeSet<WaitId> {
        let mut ids = Vec::new();
        for (mode, path) in scopes {
            self.wait_index.overlapping(*mode, path, &mut ids);
        }
        ids.into_iter().collect()
    }

    /// Walk the candidates in queue order, granting each that conflicts with no holder and no
    /// earlier still-waiting waiter. A grant never unblocks anyone, so one pass is enough.
    /// Foreign waits are left to their daemons (which see the same queue).
    fn grant_waiting(&mut self, candidates: BTreeSet<WaitId>, now: Ts) -> Vec<WaitOutcome> {
        let mut out = Vec::new();
        for id in candidates {
            let ok = self
                .waits
                .get(&id)
                .is_some_and(|w| w.foreign.is_none() && self.grantable(id, w));
            if !ok {
                continue;
            }
            if let Some(w) = self.remove_waiter(id) {
                let lock = self.grant(&w.holder, w.mode, &w.path, w.ttl_us, now);
                out.push(WaitOutcome::Granted { wait: id, lock });
            }
        }
        out
    }

    // ---- bookkeeping ----

    fn insert_lock(&mut self, lock: HeldLock, ttl_us: i64) {
        let t = lock.token;
        self.held_index.insert(lock.mode, &lock.path, t);
        self.by_holder
            .entry(lock.holder.clone())
            .or_default()
            .insert(t);
        self.expiries.insert((lock.expires_at, t));
        self.changed.insert((t, lock.holder.clone()));
        self.locks.insert(t, Entry { lock, ttl_us });
        self.due_in(t);
        self.log(Undo::Inserted(t));
    }

    fn remove_lock(&mut self, token: u64) -> Option<HeldLock> {
        self.due_out(token);
        let e = self.locks.remove(&token)?;
        if self.open_savepoints > 0 {
            self.journal.push(Undo::Removed(e.clone()));
        }
        let lock = e.lock;
        self.held_index.remove(lock.mode, &lock.path, token);
        if let Some(set) = self.by_holder.get_mut(&lock.holder) {
            set.remove(&token);
            if set.is_empty() {
                self.by_holder.remove(&lock.holder);
            }
        }
        self.expiries.remove(&(lock.expires_at, token));
        self.changed.insert((token, lock.holder.clone()));
        Some(lock)
    }

    fn set_expiry(&mut self, token: u64, expires_at: Ts) {
        self.due_out(token);
        if let Some(e) = self.locks.get_mut(&token) {
            let undo = Undo::Lease {
                token,
                expires_at: e.lock.expires_at,
                ttl_us: e.ttl_us,
            };
            self.expiries.remove(&(e.lock.expires_at, token));
            e.lock.expires_at = expires_at;
            self.expiries.insert((expires_at, token));
            self.changed.insert((token, e.lock.holder.clone()));
            self.due_in(token);
            self.log(undo);
        }
    }

    /// Index a held lock by when a sign of life renews it (after its lease or length changed).
    fn due_in(&mut self, token: u64) {
        if let Some(e) = self.locks.get(&token) {
            let key = (due_at(e), token);
            match self.due.get_mut(&e.lock.holder) {
                Some(set) => {
                    set.insert(key);
                }
                None => {
                    self.due
                        .insert(e.lock.holder.clone(), BTreeSet::from([key]));
                }
            }
        }
    }

    /// Take a held lock out of the `due` index (before its lease or length changes).
    fn due_out(&mut self, token: u64) {
        if let Some(e) = self.locks.get(&token)
            && let Some(set) = self.due.get_mut(&e.lock.holder)
        {
            set.remove(&(due_at(e), token));
            if set.is_empty() {
                self.due.remove(&e.lock.holder);
            }
        }
    }

    fn insert_waiter(&mut self, id: WaitId, w: Waiter) {
        self.wait_index.insert(w.mode, &w.path, id);
        self.waits_by_holder
            .entry(w.holder.clone())
            .or_default()
            .insert(id);
        if let Some(d) = w.ends_at() {
            self.deadlines.insert((d, id));
        }
        if let Some(f) = &w.foreign {
            self.foreign.insert(f.key.clone(), id);
        }
        self.waits.insert(id, w);
        self.log(Undo::Parked(id));
    }

    fn remove_waiter(&mut self, id: WaitId) -> Option<Waiter> {
        let w = self.waits.remove(&id)?;
        self.wait_index.remove(w.mode, &w.path, id);
        if let Some(set) = self.waits_by_holder.get_mut(&w.holder) {
            set.remove(&id);
            if set.is_empty() {
                self.waits_by_holder.remove(&w.holder);
            }
        }
        if let Some(d) = w.ends_at() {
            self.deadlines.remove(&(d, id));
        }
        if let Some(f) = &w.foreign {
            self.foreign.remove(&f.key);
        }
        if self.open_savepoints > 0 {
            self.journal.push(Undo::Unparked(id, w.clone()));
        }
        Some(w)
    }
}

fn info(id: WaitId, w: &Waiter) -> WaiterInfo {
    WaiterInfo {
        wait: id,
        holder: w.holder.clone(),
        path: w.path.clone(),
        mode: w.mode,
        since: w.since,
        deadline: w.deadline,
        foreign: w.foreign.is_some(),
    }
}
