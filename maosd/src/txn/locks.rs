//! Lock operations inside a transaction: each change to the lock table records its event and
//! marks its holder for the commit-time reconciliation, and every parked wait that ends gets its
//! answer queued for after the commit.

use maos_core::{
    Acquired, AgentId, DeadlockVictim, HeldLock, LockError, LockPath, LockRequest, WaitId,
    WaitOutcome, WaiterInfo,
};
use maos_proto::{ErrorBody, ErrorCode, LockView, Reply, WaiterView};
use serde_json::json;

use crate::txn::state::{State, Txn};

fn path_str(p: &LockPath) -> String {
    p.to_string()
}

/// A held lock as users see it.
/// The locks held by agents of one session (`None`: every lock), by path then token.
pub fn held_views(st: &State, session: Option<&maos_core::SessionId>) -> Vec<LockView> {
    let mut locks: Vec<_> = st
        .locks
        .held()
        .filter_map(|l| view(st, l))
        .filter(|v| session.is_none_or(|s| &v.session_id == s))
        .collect();
    locks.sort_by(|a, b| a.path.cmp(&b.path).then(a.token.cmp(&b.token)));
    locks
}

pub fn view(st: &State, l: &HeldLock) -> Option<LockView> {
    let a = st.agent(&l.holder)?;
    Some(LockView {
        path: path_str(&l.path),
        mode: l.mode,
        holder: l.holder.clone(),
        holder_role: a.role.clone(),
        session_id: a.session_id.clone(),
        token: l.token,
        acquired_at: l.acquired_at,
        expires_at: l.expires_at,
    })
}

pub fn waiter_view(st: &State, w: &WaiterInfo) -> WaiterView {
    WaiterView {
        path: path_str(&w.path),
        mode: w.mode,
        agent: w.holder.clone(),
        role: st
            .agent(&w.holder)
            .map(|a| a.role.clone())
            .unwrap_or_default(),
        since: w.since,
        deadline: w.deadline,
    }
}

/// "backend (agt_1a2b3c4d)": how an agent is named in messages.
pub fn who(st: &State, id: &AgentId) -> String {
    let short = id.short();
    match st.agent(id) {
        Some(a) => format!("{} ({short})", a.role),
        None => short.to_string(),
    }
}

pub fn deadlock_error(st: &State, v: &DeadlockVictim) -> ErrorBody {
    let cycle: Vec<String> = v
        .cycle
        .iter()
        .map(|e| {
            format!(
                "{} waits for {} on {}",
                who(st, &e.waiter),
                who(st, &e.holder),
                e.path
            )
        })
        .collect();
    ErrorBody::new(
        ErrorCode::Deadlock,
        format!(
            "deadlock: {}; {} is the youngest and gives way: release its locks or retry later",
            cycle.join(", "),
            who(st, &v.holder)
        ),
    )
}

fn cycle_json(v: &DeadlockVictim) -> serde_json::Value {
    json!(
        v.cycle
            .iter()
            .map(|e| json!({
                "waiter": e.waiter, "holder": e.holder, "path": e.path.to_string()
            }))
            .collect::<Vec<_>>()
    )
}

impl Txn<'_> {
    fn holder_session(&self, id: &AgentId) -> Option<maos_core::SessionId> {
        self.state().agent(id).map(|a| a.session_id.clone())
    }

    /// Record a lock event for the holder's session and agent.
    pub fn lock_event(&mut self, holder: &AgentId, kind: &str, data: serde_json::Value) {
        let sid = self.holder_session(holder);
        self.event(sid.as_ref(), Some(holder), kind, data);
    }

    /// Record why the holder's lock request was refused (kept when the request fails).
    pub fn lock_refusal(&mut self, holder: &AgentId, kind: &str, data: serde_json::Value) {
        let sid = self.holder_session(holder);
        self.refusal_event(sid.as_ref(), Some(holder), kind, data);
    }

    /// Ask the lock table for one lock ([`maos_core::LockTable::acquire`]) at this
    /// transaction's `now`; a lock got at once is recorded ([`Txn::taken`]). Queued and
    /// refused requests are the caller's to record.
    pub fn take(&mut self, req: LockRequest) -> Result<Acquired, LockError> {
        let (now, token_before) = (self.now, self.state().locks.next_token());
        let got = self.locks_mut().acquire(req, now);
        if let Ok(Acquired::Granted(lock)) = &got {
            self.taken(lock, token_before);
        }
        got
    }

    /// Take every lock now or none ([`maos_core::LockTable::acquire_all`]) at this
    /// transaction's `now`; each lock got is recorded ([`Txn::taken`]).
    pub fn take_all(&mut self, reqs: Vec<LockRequest>) -> Result<Vec<HeldLock>, LockError> {
        let (now, token_before) = (self.now, self.state().locks.next_token());
        let got = self.locks_mut().acquire_all(reqs, now);
        if let Ok(locks) = &got {
            for lock in locks {
                self.taken(lock, token_before);
            }
        }
        got
    }

    /// A lock the requester got at once: a new grant (its token is at least `token_before`,
    /// the table's next token before the request) is recorded; a renewal of a lock it held
    /// only marks its lease for writing.
    fn taken(&mut self, lock: &HeldLock, token_before: u64) {
        if lock.token >= token_before {
            self.granted(lock, false);
        } else {
            self.touch_holder(&lock.holder);
        }
    }

    /// A grant: written at commit, recorded with its fencing token.
    pub fn granted(&mut self, lock: &HeldLock, waited: bool) {
        self.touch_holder(&lock.holder);
        // An upgrade ended the holder's Read lock: on the timeline before the Write replacing it.
        if let Some(read) = self.locks_mut().take_replaced(lock.token) {
            self.gone(
                &[read],
                "lock_released",
                json!({ "reason": "upgraded to write" }),
            );
        }
        self.lock_event(
            &lock.holder,
            "lock_acquired",
            json!({ "path": lock.path.to_string(), "mode": lock.mode, "token": lock.token,
                    "expires_at": lock.expires_at, "waited": waited }),
        );
    }

    /// Locks gone (released, force-released or expired).
    pub fn gone(&mut self, locks: &[HeldLock], kind: &str, extra: serde_json::Value) {
        for l in locks {
            self.touch_holder(&l.holder);
            self.gone_leases
                .push((l.token, l.holder.clone(), l.expires_at));
            let mut data = json!({ "path": l.path.to_string(), "mode": l.mode, "token": l.token });
            if let (Some(d), Some(e)) = (data.as_object_mut(), extra.as_object()) {
                d.extend(e.clone());
            }
            self.lock_event(&l.holder, kind, data);
        }
    }

    /// Answer every parked wait that ended, and record what happened.
    pub fn outcomes(&mut self, outcomes: Vec<WaitOutcome>) {
        for o in outcomes {
            match o {
                WaitOutcome::Granted { wait, lock } => {
                    self.granted(&lock, true);
                    let reply = view(self.state(), &lock)
                        .map(Reply::Lock)
                        .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "lock holder vanished"));
                    self.wakeups.push((wait, reply));
                }
                WaitOutcome::TimedOut { wait, holder, path } => {
                    self.lock_event(&holder, "lock_timeout", json!({ "path": path.to_string() }));
                    let msg = format!(
                        "timed out waiting for {path}; it is still held: see `maos lock list`, or retry with a longer --wait"
                    );
                    self.wakeups
                        .push((wait, Err(ErrorBody::new(ErrorCode::LockTimeout, msg))));
                }
                WaitOutcome::Deadlock(v) => self.deadlock_victim(v),
            }
        }
    }

    /// A deadlock's victim, recorded here; answered here, or (a wait parked through another
    /// daemon of a fleet) by its own daemon, which finds it ended in PostgreSQL.
    pub fn deadlock_victim(&mut self, v: DeadlockVictim) {
        let err = deadlock_error(self.state(), &v);
        self.lock_event(
            &v.holder,
            "deadlock_detected",
            json!({ "cycle": cycle_json(&v), "victim": v.holder }),
        );
        match &v.foreign {
            Some(key) => self
                .ended_waits
                .extend(maos_store::EndedWait::of(key, err.message)),
            None => self.wakeups.push((v.wait, Err(err))),
        }
    }

    /// An agent finished or died: release its locks, end its waits, grant what follows.
    pub fn release_agent(&mut self, agent: &AgentId, why: &str) {
        let now = self.now;
        let (released, ended, outcomes) = self.locks_mut().release_all(agent, now);
        if released.is_empty() && ended.is_empty() && outcomes.is_empty() {
            return;
        }
        self.touch_holder(agent);
        self.gone(&released, "lock_released", json!({ "reason": why }));
        for wait in ended {
            let msg = format!("the wait ended: the agent {why}");
            self.wakeups
                .push((wait, Err(ErrorBody::new(ErrorCode::InvalidTransition, msg))));
        }
        self.outcomes(outcomes);
    }

    /// A sign of life (any request naming the agent): renew those of the agent's leases that
    /// ran for more than a twentieth of their length ([`maos_core::LockTable::renew_due`]), so
    /// a hook call costs nothing per lock its agent holds. Returns how many it renewed.
    pub fn renew(&mut self, agent: &AgentId) -> usize {
        let now = self.now;
        let n = self.locks_mut().renew_due(agent, now);
        if n > 0 {
            self.touch_holder(agent);
        }
        n
    }

    /// An explicit heartbeat: renew every lease of the agent to now + its length. Returns how
    /// many locks the agent holds.
    pub fn renew_all(&mut self, agent: &AgentId) -> usize {
        let now = self.now;
        let n = self.locks_mut().renew(agent, now);
        if n > 0 {
            self.touch_holder(agent);
        }
        n
    }

    /// Reap expired leases and timed-out waits. An agent blocked in a lock wait is alive (its
    /// client is connected, or the wait would have been cancelled): its leases are renewed
    /// first, so waiting never costs it the locks it already holds.
    pub fn tick_locks(&mut self) {
        let now = self.now;
        let waiting: std::collections::BTreeSet<AgentId> = self
            .state()
            .locks
            .waiters()
            .into_iter()
            .filter(|w| !w.foreign)
            .map(|w| w.holder)
            .collect();
        for agent in &waiting {
            self.renew(agent);
        }
        let (expired, outcomes) = self.locks_mut().tick(now);
        self.gone(&expired, "lock_expired", json!({}));
        self.outcomes(outcomes);
    }

    /// The lock table becomes what a fleet's PostgreSQL holds (other daemons changed it); the
    /// waits that frees are served in this transaction.
    pub fn sync_locks(&mut self, held: Vec<(maos_core::HeldLock, i64)>) {
        let now = self.now;
        let outcomes = self.locks_mut().sync_held(held, now);
        self.outcomes(outcomes);
    }

    /// The lock waits become what a fleet's PostgreSQL holds: the other daemons' waits queue
    /// here, and this daemon's waits that another daemon ended as a deadlock's victim are
    /// answered with the message it wrote (it recorded the deadlock). Then the waits that frees
    /// are served.
    pub fn sync_waits(&mut self, waits: maos_store::FleetWaits) {
        let now = self.now;
        let mut outcomes = self.locks_mut().sync_foreign(waits.foreign, now);
        for (wait, message) in waits.ended {
            if self.state().locks.waiter(wait).is_none_or(|w| w.foreign) {
                continue;
            }
            outcomes.extend(self.locks_mut().cancel_wait(wait, now));
            self.wakeups
                .push((wait, Err(ErrorBody::new(ErrorCode::Deadlock, message))));
        }
        self.outcomes(outcomes);
    }

    /// Cancel parked waits whose clients went away: on the timeline too, so a wait drawn
    /// since its `lock_wait` ends where it ended.
    pub fn cancel_waits(&mut self, waits: &[WaitId]) {
        let now = self.now;
        for w in waits {
            let gone = self.state().locks.waiter(*w);
            let outcomes = self.locks_mut().cancel_wait(*w, now);
            if let Some(i) = gone {
                self.lock_event(
                    &i.holder,
                    "lock_wait_cancelled",
                    json!({ "path": i.path.to_string(), "mode": i.mode, "wait": i.wait }),
                );
            }
            self.outcomes(outcomes);
        }
    }
}
