//! A project's live state, authoritative in memory, and the transaction that changes it.
//!
//! Handlers change state only through a [`Txn`]: the first touch of a session saves a copy of
//! it (the undo log) and marks what must be written; every change records its event in the same
//! transaction. The actor commits the whole batch to SQLite and only then answers; if the commit
//! fails, [`Txn::rollback`] puts memory back exactly as it was, so memory and disk never differ.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use chrono::SubsecRound;
use maos_core::{AgentId, HeldLock, LockTable, SessionId, Ts, resolve_prefix};
use maos_proto::{AgentRecord, ErrorBody, ErrorCode, EventRecord, SessionRecord};
use maos_store::Batch;

use crate::base::error::prefix_error;
use serde_json::Value;

/// Now, UTC, truncated to microseconds (what the database stores).
pub fn now() -> Ts {
    chrono::Utc::now().trunc_subsecs(6)
}

/// A subagent the CLI asked for (PreToolUse of `Agent`/`Task`) whose result has not come
/// back yet. A subagent whose call names it (Claude Code's meta file, read by the hook) takes
/// it for certain; else the subagent's first event claims the oldest open matching request (a
/// guess); PostToolUse of the request (its `agentId`) settles which agent it really was.
#[derive(Clone, Debug)]
pub struct SpawnIntent {
    pub(crate) cli_session: String,
    pub(crate) tool_use_id: Option<String>,
    pub(crate) subagent_type: Option<String>,
    pub(crate) task: String,
    pub(crate) claimed_by: Option<AgentId>,
    /// `claimed_by` is known, not guessed: no guess takes the request away.
    pub(crate) certain: bool,
}

/// A managed session's agents' declared files, compared once ([`maos_core::plan::compare`]),
/// and the agents kept apart that derive from them: a pure function of the agents' specs,
/// which never change once made (agents are only added, and those added after the plan's have
/// no spec), so the scheduler compares them once per session instead of on every round.
#[derive(Debug)]
pub struct SessionFiles {
    /// The session's first `agents` agents were compared.
    pub agents: usize,
    /// Which of them overlap, through which patterns.
    pub pairs: maos_core::plan::FilePairs,
    /// [`maos_core::plan::FilePairs::apart`] of all of them, ended ones included.
    pub apart: Vec<Vec<usize>>,
}

/// Default lease: ten minutes without any sign of life from the holder.
pub const DEFAULT_TTL_US: i64 = 10 * 60 * 1_000_000;

/// In a fleet, how long a daemon vouches for a lock wait it wrote to PostgreSQL: it renews the
/// row while the wait lasts (a batch, at the latest the next sweep, rewrites it once half of
/// this is gone), so the waits of a daemon that died leave every queue within this time.
pub const WAIT_LEASE_US: i64 = 30 * 1_000_000;

/// The live state of one project.
#[derive(Debug, Default)]
#[cfg_attr(test, derive(Clone))]
pub struct State {
    /// In creation order.
    sessions: Vec<SessionRecord>,
    by_id: HashMap<SessionId, usize>,
    agent_session: HashMap<AgentId, SessionId>,
    /// The sequence number the next event gets.
    next_seq: u64,
    /// The project's locks: the authority on who holds what and who waits.
    pub(crate) locks: LockTable,
    /// Per holder, the expiry last written for each of its locks (by token): the database's
    /// view, diffed against the table at commit time.
    pub(crate) persisted: HashMap<AgentId, HashMap<u64, Ts>>,
    /// Lease length for locks that do not name one (µs).
    pub(crate) lock_ttl_us: i64,
    /// In a fleet: this daemon's waits as PostgreSQL holds them (id, lease written).
    persisted_waits: HashMap<maos_core::WaitId, Ts>,
    /// Leases (token, holder, expiry in memory) of the locks a rolled-back transaction took
    /// away: the lock table's reload after that failed commit keeps their renewals.
    rolled_back_leases: Vec<(u64, AgentId, Ts)>,
    /// Subagents an agent CLI asked for and has not tied to an agent id yet (hooks).
    pub(crate) spawn_intents: Vec<SpawnIntent>,
    /// When each session's latest committed checkpoint was taken.
    checkpointed: HashMap<SessionId, Ts>,
    /// Each live managed session's declared files, compared once (see [`SessionFiles`]):
    /// derived, so not undone by a rollback; an entry leaves with its session (out of memory,
    /// or ended: [`Txn::forget_files`], and at every reindex).
    files: HashMap<SessionId, Arc<SessionFiles>>,
    /// How this project starts managed agents (`None` in unit tests).
    pub(crate) runner: Option<crate::proc::run::Runner>,
    /// In fleet mode, this daemon's machine: agents registered here are stamped with it.
    pub(crate) machine: Option<String>,
    /// Agents whose launch this daemon committed and whose supervisor has not answered yet.
    launching: HashSet<AgentId>,
    /// Each agent's last tool call, as its CLI's hook reported it: advisory, in memory only
    /// (not undone by a rollback, not written), so that a hook call that changes nothing else
    /// commits nothing.
    activity: HashMap<AgentId, maos_core::record::Activity>,
    /// MCP tool calls the hooks allowed and `maos mcp` has not asked about yet: advisory, in
    /// memory only, like `activity` (a record lives seconds).
    mcp_calls: maos_core::mcp::McpCalls,
    /// The held files' last versions, violations and notices (issue 31 §2): advisory, in
    /// memory only, shared with the connections, which hash the files (`keep.rs`).
    pub(crate) kept: crate::txn::keep::Shared,
    /// The project's conflict radar (`crate::radar`), read by a write's hook answer.
    pub(crate) radar: Option<std::sync::Arc<crate::radar::Radar>>,
}

impl State {
    pub fn new(sessions: Vec<SessionRecord>, last_seq: u64) -> State {
        let mut st = State {
            sessions,
            next_seq: last_seq + 1,
            lock_ttl_us: DEFAULT_TTL_US,
            ..State::default()
        };
        st.reindex();
        st
    }

    /// The agent's last tool call, if a hook reported one since the daemon started.
    pub fn activity(&self, id: &AgentId) -> Option<&maos_core::record::Activity> {
        self.activity.get(id)
    }

    /// Whether this daemon is starting the agent's process right now.
    pub fn is_launching(&self, id: &AgentId) -> bool {
        self.launching.contains(id)
    }

    /// When the session's latest checkpoint was taken.
    pub fn last_checkpoint(&self, id: &SessionId) -> Option<Ts> {
        self.checkpointed.get(id).copied()
    }

    /// The latest checkpoints as committed (start-up).
    pub fn set_checkpointed(&mut self, latest: impl IntoIterator<Item = (SessionId, Ts)>) {
        self.checkpointed = latest.into_iter().collect();
    }

    /// Keep listed only the lock changes that still need a write: a holder's lock that moved
    /// by other means than a transaction touching it (a table reloaded after a failed commit
    /// keeps a lease renewed in memory) is written when the holder is next touched, as it always
    /// was; every other change already is what the database holds.
    fn settle_lock_changes(&mut self) {
        let persisted = &self.persisted;
        self.locks.settle_changed(|locks, token, holder| {
            write_needed_in(locks, persisted, token, holder).is_some()
        });
    }

    /// Replace the lock table with the committed locks (start-up, or after a failed commit).
    /// A lease renewed in memory but not written yet (a lease is written once it moved by half
    /// its length) keeps its later expiry: the renewal did happen, whatever failed since.
    pub fn reset_locks(&mut self, locks: Vec<(HeldLock, i64)>, next_token: u64) {
        let mut renewed: HashMap<u64, (AgentId, Ts)> = std::mem::take(&mut self.rolled_back_leases)
            .into_iter()
            .map(|(token, holder, at)| (token, (holder, at)))
            .collect();
        renewed.extend(
            self.locks
                .held()
                .map(|l| (l.token, (l.holder.clone(), l.expires_at))),
        );
        let next_wait = self.locks.next_wait();
        self.locks = LockTable::new(next_token);
        // A wait id is never given twice: the rows of the old waits are still to delete.
        self.locks.raise_next_wait(next_wait);
        self.persisted.clear();
        for (mut lock, ttl) in locks {
            self.persisted
                .entry(lock.holder.clone())
                .or_default()
                .insert(lock.token, lock.expires_at);
            if let Some((holder, at)) = renewed.get(&lock.token)
                && *holder == lock.holder
                && *at > lock.expires_at
            {
                lock.expires_at = *at;
            }
            self.locks.restore_with_ttl(lock, ttl);
        }
    }

    /// Take in what other daemons of a fleet committed: changed sessions replace (or join)
    /// ours, archived ones leave memory, events are numbered on from `last_seq`, and what the
    /// database holds of each holder's locks is PostgreSQL's (`locks`, when they moved).
    pub fn refresh(
        &mut self,
        sessions: Vec<SessionRecord>,
        gone: &[SessionId],
        last_seq: u64,
        locks: Option<&[(HeldLock, i64)]>,
    ) {
        if !sessions.is_empty() || !gone.is_empty() {
            let upserts = sessions.into_iter().map(|rec| (rec.id.clone(), Some(rec)));
            let removals = gone.iter().map(|id| (id.clone(), None));
            self.put_back(upserts.chain(removals));
        }
        self.next_seq = self.next_seq.max(last_seq + 1);
        if let Some(locks) = locks {
            self.persisted.clear();
            for (lock, _) in locks {
                self.persisted
                    .entry(lock.holder.clone())
                    .or_default()
                    .insert(lock.token, lock.expires_at);
            }
        }
    }

    /// Make these sessions what they were saved as, or what another daemon wrote (`None`: not
    /// there), each in its place in creation order, and rebuild the indexes.
    fn put_back(&mut self, saved: impl IntoIterator<Item = (SessionId, Option<SessionRecord>)>) {
        let mut reorder = false;
        for (id, prev) in saved {
            match (prev, self.by_id.get(&id)) {
                (Some(prev), Some(&i)) => self.sessions[i] = prev,
                // Taken out of memory (archived, purged) since: back in its place.
                (Some(prev), None) => {
                    self.sessions.push(prev);
                    reorder = true;
                }
                (None, Some(_)) => self.sessions.retain(|s| s.id != id),
                (None, None) => {}
            }
        }
        if reorder {
            self.sessions
                .sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
        }
        self.reindex();
    }

    fn reindex(&mut self) {
        self.by_id.clear();
        self.agent_session.clear();
        for (i, s) in self.sessions.iter().enumerate() {
            self.by_id.insert(s.id.clone(), i);
            for a in &s.agents {
                self.agent_session.insert(a.id.clone(), s.id.clone());
            }
        }
        let (by_id, sessions) = (&self.by_id, &self.sessions);
        self.files.retain(|id, _| {
            by_id
                .get(id)
                .and_then(|&i| sessions.get(i))
                .is_some_and(|s| !s.state.is_terminal())
        });
    }

    /// The session's declared files as compared (if they were since it came into memory).
    pub fn files(&self, id: &SessionId) -> Option<&Arc<SessionFiles>> {
        self.files.get(id)
    }

    pub fn sessions(&self) -> &[SessionRecord] {
        &self.sessions
    }

    pub fn session(&self, id: &SessionId) -> Option<&SessionRecord> {
        self.by_id.get(id).map(|&i| &self.sessions[i])
    }

    /// The sequence number of the last committed event.
    pub fn last_seq(&self) -> u64 {
        self.next_seq - 1
    }

    /// The events from `first` on were committed under other numbers (a fleet's per-path
    /// turns numbered them after other daemons' events): this daemon knows the timeline up to
    /// `first - 1` only, and the next batch reads the rest back from PostgreSQL.
    pub fn forget_events_from(&mut self, first: u64) {
        self.next_seq = self.next_seq.min(first.max(1));
    }

    /// The active session, if any.
    pub fn active(&self) -> Option<&SessionRecord> {
        self.sessions.iter().find(|s| s.active)
    }

    /// A session named by id or unique prefix; `None` = the active session.
    pub fn resolve_session(&self, name: Option<&str>) -> Result<&SessionRecord, ErrorBody> {
        match name {
            None => self.active().ok_or_else(|| {
                ErrorBody::new(
                    ErrorCode::NotFound,
                    "this project has no active session: create one with `maos session create --objective TEXT` or name a session",
                )
            }),
            Some(name) => {
                // A full id is a map lookup; only a prefix needs the scan.
                if let Some(s) = SessionId::parse(name).ok().and_then(|id| self.session(&id)) {
                    return Ok(s);
                }
                let id = resolve_prefix(name, self.sessions.iter().map(|s| s.id.as_str()))
                    .map_err(|e| prefix_error("session", e))?;
                let id = SessionId::parse(id)
                    .map_err(|e| ErrorBody::new(ErrorCode::Internal, e.to_string()))?;
                self.session(&id)
                    .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {name}")))
            }
        }
    }

    /// An agent named by id or unique prefix, optionally restricted to one session.
    pub fn resolve_agent(
        &self,
        name: &str,
        within: Option<&SessionId>,
    ) -> Result<&AgentRecord, ErrorBody> {
        // A full id is a map lookup; only a prefix needs the scan.
        if let Some(a) = AgentId::parse(name)
            .ok()
            .and_then(|id| self.agent(&id))
            .filter(|a| within.is_none_or(|w| *w == a.session_id))
        {
            return Ok(a);
        }
        if let Some(a) = self.agent_by_plan_name(name, within)? {
            return Ok(a);
        }
        let candidates = self
            .agent_session
            .iter()
            .filter(|(_, s)| within.is_none_or(|w| w == *s))
            .map(|(a, _)| a.as_str());
        let id = resolve_prefix(name, candidates).map_err(|e| match e {
            maos_core::PrefixError::NotFound { .. } => ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "agent: no agent id, id prefix or plan name matches {:?}",
                    name.trim()
                ),
            ),
            e => prefix_error("agent", e),
        })?;
        let id =
            AgentId::parse(id).map_err(|e| ErrorBody::new(ErrorCode::Internal, e.to_string()))?;
        self.agent(&id)
            .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no agent {name}")))
    }

    /// What a command's positional `NAME` means where a session or one agent is taken
    /// (`maos pause|resume|retry NAME`): a session's full id, an agent's plan name, a session
    /// prefix, then an agent's id or prefix; `None` is the active session.
    pub fn resolve_target(&self, name: Option<&str>) -> Result<Named<'_>, ErrorBody> {
        let Some(name) = name else {
            return self.resolve_session(None).map(Named::Session);
        };
        match self.resolve_session(Some(name)) {
            Ok(s) if SessionId::parse(name.trim()).is_ok() => Ok(Named::Session(s)),
            _ if let Some(a) = self.agent_by_plan_name(name, None)? => Ok(Named::Agent(a)),
            Ok(s) => Ok(Named::Session(s)),
            Err(e) if e.code == ErrorCode::NotFound => match self.resolve_agent(name, None) {
                Ok(a) => Ok(Named::Agent(a)),
                Err(e) if e.code == ErrorCode::NotFound => Err(ErrorBody::new(
                    ErrorCode::NotFound,
                    format!(
                        "no session or agent matches {:?} (a session id or prefix; an agent id, prefix or plan name)",
                        name.trim()
                    ),
                )),
                Err(e) => Err(e),
            },
            Err(e) => Err(e),
        }
    }

    /// The managed agent a plan calls `name` (its `[[agent]] name`), after an exact id and
    /// before an id prefix. Within `within` when given; else the active session's, then the
    /// live sessions', then any session's: the first of these that has one. Several there:
    /// ambiguous, naming each with its id, session and state.
    pub fn agent_by_plan_name(
        &self,
        name: &str,
        within: Option<&SessionId>,
    ) -> Result<Option<&AgentRecord>, ErrorBody> {
        let name = name.trim();
        let tiers: [&dyn Fn(&SessionRecord) -> bool; 4] = [
            &|s| within.is_some_and(|w| *w == s.id),
            &|s| within.is_none() && s.active,
            &|s| within.is_none() && !s.state.is_terminal(),
            &|_| within.is_none(),
        ];
        for tier in tiers {
            let found: Vec<&AgentRecord> = self
                .sessions
                .iter()
                .filter(|s| tier(s))
                .flat_map(|s| s.agents.iter())
                .filter(|a| a.spec.as_ref().is_some_and(|x| x.name == name))
                .collect();
            match found.as_slice() {
                [] => continue,
                [one] => return Ok(Some(one)),
                many => {
                    let list: Vec<String> = many
                        .iter()
                        .map(|a| {
                            format!("{} (session {}, {})", a.id, a.session_id.short(), a.state)
                        })
                        .collect();
                    return Err(ErrorBody::new(
                        ErrorCode::Ambiguous,
                        format!(
                            "agent name {name:?} is ambiguous: {} agents have it: {}; give the id (or a prefix of it)",
                            many.len(),
                            list.join(", ")
                        ),
                    ));
                }
            }
        }
        Ok(None)
    }

    pub fn agent(&self, id: &AgentId) -> Option<&AgentRecord> {
        let sid = self.agent_session.get(id)?;
        self.session(sid)?.agents.iter().find(|a| &a.id == id)
    }
}

/// A session or one of its agents, as a command named it ([`State::resolve_target`]).
pub enum Named<'a> {
    Session(&'a SessionRecord),
    Agent(&'a AgentRecord),
}

/// The answer for a parked lock wait, delivered after the commit.
pub type Wakeup = (maos_core::WaitId, Result<maos_proto::Reply, ErrorBody>);

/// What a committed transaction leaves to do.
pub struct Finished {
    /// To publish to subscribers.
    pub events: Vec<EventRecord>,
    /// Answers for parked lock waits.
    pub wakeups: Vec<Wakeup>,
    /// Process work.
    pub effects: Vec<crate::proc::run::Effect>,
    /// Checkpoints committed (their readable `checkpoint.json` is written after).
    pub checkpoints: Vec<maos_store::CheckpointRow>,
}

/// One group commit's worth of changes, with what is needed to undo them.
pub struct Txn<'a> {
    st: &'a mut State,
    /// Session as it was before this transaction touched it (`None`: created in it).
    undo: HashMap<SessionId, Option<SessionRecord>>,
    dirty_sessions: HashSet<SessionId>,
    dirty_phases: HashSet<SessionId>,
    dirty_agents: HashSet<AgentId>,
    events: Vec<EventRecord>,
    first_seq: u64,
    pub now: Ts,
    /// Holders whose locks changed (reconciled with the database at commit).
    pub(crate) lock_holders: HashSet<AgentId>,
    /// Locks this transaction took away (released, expired), with their leases as they were.
    pub(crate) gone_leases: Vec<(u64, AgentId, Ts)>,
    pub(crate) lock_rows: Vec<u64>,
    pub(crate) lock_deletes: Vec<u64>,
    /// In a fleet: this daemon's waits to write (new, or their lease to renew) and to delete.
    wait_rows: Vec<maos_store::WaitRow>,
    wait_deletes: Vec<maos_core::WaitId>,
    /// In a fleet: other daemons' waits this transaction ended (deadlock victims).
    pub(crate) ended_waits: Vec<maos_store::EndedWait>,
    pub(crate) token_before: u64,
    /// Answers for parked lock waits, delivered after the commit.
    pub(crate) wakeups: Vec<Wakeup>,
    checkpoints: Vec<maos_store::CheckpointRow>,
    /// Process work to do once the commit succeeded.
    effects: Vec<crate::proc::run::Effect>,
    /// Sessions taken out of memory in this transaction (`archived = 1` in the database).
    archived: Vec<SessionId>,
    /// Sessions deleted in this transaction.
    purged: Vec<SessionId>,
    /// What the request being applied, and each step open inside it, changed so far: the
    /// innermost last ([`Txn::atomic`]).
    steps: Vec<StepUndo>,
    /// Tests: panic at this change point (counted from 1 by [`Txn::change_point`]).
    #[cfg(test)]
    fail_at: Option<usize>,
    #[cfg(test)]
    changes: usize,
    /// Tests: the injected failure happened.
    #[cfg(test)]
    fired: bool,
    /// Tests: how a nested step's observer sees the transaction ([`Txn::atomic`]).
    #[cfg(test)]
    probe: Option<fn(&Txn<'_>) -> Value>,
    /// Tests: every nested step that failed, as the probe saw the transaction when it began
    /// and once it was undone.
    #[cfg(test)]
    nested_failures: Vec<(Value, Value)>,
}

/// A set of the transaction's bookkeeping that a request added a key to or took one from.
enum Mark {
    Session(SessionId),
    Phases(SessionId),
    Agent(AgentId),
    Holder(AgentId),
    Launching(AgentId),
}

/// What one step (a request, or a step inside one) changed inside a transaction, to put back
/// if it fails: the transaction is a group commit of many requests, and one that fails (an
/// error or a panic) must leave memory, the lock table and the rows to write exactly as the
/// requests before it left them; a step inside a request, as the request left them before it.
struct StepUndo {
    /// Sessions the transaction already changed before this step, as they were when the step
    /// first changed them (a session first touched by this step is restored from the
    /// transaction's own undo log instead, so it is copied only once).
    sessions: HashMap<SessionId, Option<SessionRecord>>,
    /// Sessions this step touched first in the transaction.
    first: HashSet<SessionId>,
    /// Agents of sessions changed before this step, as they were before this step changed
    /// them (when it changed nothing else of their session first), oldest first.
    agents: Vec<(SessionId, AgentRecord)>,
    agents_saved: HashSet<AgentId>,
    /// Keys added to (`true`) or taken from (`false`) the bookkeeping sets, in order.
    marks: Vec<(bool, Mark)>,
    events: usize,
    next_seq: u64,
    checkpoints: usize,
    effects: usize,
    wakeups: usize,
    ended_waits: usize,
    gone_leases: usize,
    archived: usize,
    purged: usize,
    /// Checkpoint times of sessions this request took out of memory.
    checkpointed: Vec<(SessionId, Ts)>,
    /// The subagent requests as they were, once this request touched them.
    spawn_intents: Option<Vec<SpawnIntent>>,
    locks: maos_core::LockSavepoint,
    /// Events that record why the request was refused: kept when it fails.
    refusals: Vec<EventRecord>,
}

impl<'a> Txn<'a> {
    pub fn new(st: &'a mut State) -> Txn<'a> {
        // The last batch's lock changes, compared with what the database now holds (whether it
        // committed them, or wrote nothing: a fleet batch that only took in other daemons'
        // locks): settled here, once a batch, so the list never outgrows what differs.
        st.settle_lock_changes();
        let first_seq = st.next_seq;
        let token_before = st.locks.next_token();
        Txn {
            lock_holders: HashSet::new(),
            gone_leases: Vec::new(),
            lock_rows: Vec::new(),
            lock_deletes: Vec::new(),
            wait_rows: Vec::new(),
            wait_deletes: Vec::new(),
            ended_waits: Vec::new(),
            token_before,
            wakeups: Vec::new(),
            checkpoints: Vec::new(),
            effects: Vec::new(),
            archived: Vec::new(),
            purged: Vec::new(),
            steps: Vec::new(),
            #[cfg(test)]
            fail_at: None,
            #[cfg(test)]
            changes: 0,
            #[cfg(test)]
            fired: false,
            #[cfg(test)]
            probe: None,
            #[cfg(test)]
            nested_failures: Vec::new(),
            st,
            undo: HashMap::new(),
            dirty_sessions: HashSet::new(),
            dirty_phases: HashSet::new(),
            dirty_agents: HashSet::new(),
            events: Vec::new(),
            first_seq,
            now: now(),
        }
    }

    /// Read access to the state as changed so far.
    pub fn state(&self) -> &State {
        self.st
    }

    pub fn is_dirty(&self) -> bool {
        !self.events.is_empty()
            || !self.undo.is_empty()
            || !self.lock_holders.is_empty()
            || !self.purged.is_empty()
            || !self.ended_waits.is_empty()
            || !self.wait_rows.is_empty()
            || !self.wait_deletes.is_empty()
    }

    /// In a fleet, the rows of this daemon's own waits to write: new waits, waits whose lease
    /// is half gone, and waits that ended. Call once every request of the batch is applied,
    /// before [`Txn::is_dirty`] decides whether to commit.
    pub fn prepare_waits(&mut self) {
        if self.st.machine.is_none() {
            return;
        }
        let now = self.now;
        let mut live = HashSet::new();
        for w in self.st.locks.waiters() {
            if w.foreign {
                continue;
            }
            live.insert(w.wait);
            let due = self.st.persisted_waits.get(&w.wait).is_none_or(|lease| {
                (*lease - now).num_microseconds().unwrap_or(0) * 2 < WAIT_LEASE_US
            });
            let Some(a) = self.st.agent(&w.holder) else {
                continue;
            };
            if due {
                self.wait_rows.push(maos_store::WaitRow {
                    wait: w.wait,
                    agent_id: w.holder.to_string(),
                    session_id: a.session_id.to_string(),
                    path: w.path.to_string(),
                    mode: w.mode,
                    born: maos_store::to_us(&a.created_at),
                    since: maos_store::to_us(&w.since),
                    deadline: w.deadline.as_ref().map(maos_store::to_us),
                    lease_until: maos_store::to_us(&now) + WAIT_LEASE_US,
                });
            }
        }
        self.wait_deletes = self
            .st
            .persisted_waits
            .keys()
            .filter(|w| !live.contains(w))
            .copied()
            .collect();
    }

    /// The MCP calls hooks recorded (advisory: see [`State::activity`]).
    pub fn mcp_calls(&mut self) -> &mut maos_core::mcp::McpCalls {
        &mut self.st.mcp_calls
    }

    /// An agent's last tool call (advisory: see [`State::activity`]).
    pub fn note_activity(&mut self, id: &AgentId, activity: maos_core::record::Activity) {
        self.st.activity.insert(id.clone(), activity);
    }

    /// Keep a session's compared files (derived: not undone by a rollback, which forgets
    /// those of the sessions it takes out of memory).
    pub fn keep_files(&mut self, id: &SessionId, files: Arc<SessionFiles>) {
        self.st.files.insert(id.clone(), files);
    }

    /// Forget a session's compared files (it ended).
    pub fn forget_files(&mut self, id: &SessionId) {
        self.st.files.remove(id);
    }

    /// A launch is under way (advisory, not undone by a rollback: the answer clears it).
    pub fn launching(&mut self, id: &AgentId) {
        self.change_point();
        if self.st.launching.insert(id.clone()) {
            self.mark(true, Mark::Launching(id.clone()));
        }
    }

    /// The supervisor answered a launch.
    pub fn launched(&mut self, id: &AgentId) {
        self.change_point();
        if self.st.launching.remove(id) {
            self.mark(false, Mark::Launching(id.clone()));
        }
    }

    /// Process work for after the commit (nothing happens if the transaction rolls back).
    pub fn effect(&mut self, e: crate::proc::run::Effect) {
        self.change_point();
        self.effects.push(e);
    }

    /// Sessions this transaction changed (their own row, phases, or agents).
    pub fn touched_sessions(&self) -> Vec<SessionId> {
        let mut out: Vec<SessionId> = self.dirty_sessions.iter().cloned().collect();
        for a in &self.dirty_agents {
            if let Some(sid) = self.st.agent_session.get(a)
                && !out.contains(sid)
            {
                out.push(sid.clone());
            }
        }
        out
    }

    /// Pending subagent requests of agent CLIs. Advisory (they only name subagents), so a
    /// rollback leaves them as they are.
    pub(crate) fn spawn_intents_mut(&mut self) -> &mut Vec<SpawnIntent> {
        self.change_point();
        if let Some(step) = self.steps.last_mut()
            && step.spawn_intents.is_none()
        {
            step.spawn_intents = Some(self.st.spawn_intents.clone());
        }
        &mut self.st.spawn_intents
    }

    /// The holder's locks changed: its rows are reconciled with the database at commit.
    pub(crate) fn touch_holder(&mut self, holder: &AgentId) {
        self.change_point();
        if self.lock_holders.insert(holder.clone()) {
            self.mark(true, Mark::Holder(holder.clone()));
        }
    }

    /// Mutable access to the lock table.
    pub(crate) fn locks_mut(&mut self) -> &mut LockTable {
        self.change_point();
        &mut self.st.locks
    }

    /// Work out which lock rows must be written or deleted: for every lock of a holder touched
    /// in this transaction that changed since it was last compared ([`LockTable::changed`]), the
    /// table's lock against what the database holds. A renewed lease is written once it moved
    /// by half its length, so a restart never loses more than that. Only changed locks are
    /// looked at: an agent holding hundreds of locks costs nothing per lock on each request.
    pub fn prepare(&mut self) {
        for (token, holder) in self.st.locks.changed() {
            if !self.lock_holders.contains(holder) {
                continue;
            }
            match write_needed(self.st, token, holder) {
                Some(Write::Row) => self.lock_rows.push(token),
                Some(Write::Delete) => self.lock_deletes.push(token),
                None => {}
            }
        }
    }

    fn save(&mut self, id: &SessionId) {
        self.change_point();
        if !self.undo.contains_key(id) {
            let prev = self.st.session(id).cloned();
            self.first_touch(id.clone(), prev);
        } else if let Some(step) = self.steps.last_mut()
            && !step.sessions.contains_key(id)
            && !step.first.contains(id)
        {
            step.sessions
                .insert(id.clone(), self.st.session(id).cloned());
        }
    }

    /// Save one agent before it changes: the whole session only the first time the batch
    /// touches it, else (inside a step) just the agent, so a request that changes one agent of a
    /// large session copies that agent, not the session.
    fn save_agent(&mut self, sid: &SessionId, id: &AgentId) {
        if self.steps.is_empty() || !self.undo.contains_key(sid) {
            return self.save(sid);
        }
        self.change_point();
        let Some(step) = self.steps.last_mut() else {
            return;
        };
        if step.first.contains(sid)
            || step.sessions.contains_key(sid)
            || step.agents_saved.contains(id)
        {
            return;
        }
        if let Some(a) = self
            .st
            .by_id
            .get(sid)
            .and_then(|&i| self.st.sessions[i].agents.iter().find(|a| &a.id == id))
        {
            step.agents_saved.insert(id.clone());
            step.agents.push((sid.clone(), a.clone()));
        }
    }

    /// A point where a change begins: where a failure is injected in tests.
    #[inline]
    fn change_point(&mut self) {
        #[cfg(test)]
        {
            self.changes += 1;
            if self.fail_at == Some(self.changes) {
                self.fired = true;
                // Not `panic!`: no panic hook, so the injected failures print nothing.
                std::panic::resume_unwind(Box::new("injected failure"));
            }
        }
    }

    /// The batch touches a session for the first time: how it was (`None`: it did not exist)
    /// goes into the batch's undo log, which also serves the request doing it.
    fn first_touch(&mut self, id: SessionId, prev: Option<SessionRecord>) {
        if let Some(step) = self.steps.last_mut() {
            step.first.insert(id.clone());
        }
        self.undo.insert(id, prev);
    }

    fn mark(&mut self, added: bool, m: Mark) {
        if let Some(step) = self.steps.last_mut() {
            step.marks.push((added, m));
        }
    }

    fn dirty_session(&mut self, id: &SessionId) {
        if self.dirty_sessions.insert(id.clone()) {
            self.mark(true, Mark::Session(id.clone()));
        }
    }

    fn dirty_phases(&mut self, id: &SessionId) {
        if self.dirty_phases.insert(id.clone()) {
            self.mark(true, Mark::Phases(id.clone()));
        }
    }

    fn dirty_agent(&mut self, id: &AgentId) {
        if self.dirty_agents.insert(id.clone()) {
            self.mark(true, Mark::Agent(id.clone()));
        }
    }

    /// Mutable access to a session's own row (marks it for writing).
    pub fn session_mut(&mut self, id: &SessionId) -> &mut SessionRecord {
        self.save(id);
        self.dirty_session(id);
        let i = self.st.by_id[id];
        let s = &mut self.st.sessions[i];
        s.updated_at = self.now;
        s
    }

    /// Mutable access to a session's workflow (marks its phases and its row for writing).
    pub fn workflow_mut(&mut self, id: &SessionId) -> &mut maos_core::Workflow {
        self.dirty_phases(id);
        &mut self.session_mut(id).workflow
    }

    /// Mutable access to one agent (marks it for writing).
    pub fn agent_mut(&mut self, id: &AgentId) -> &mut AgentRecord {
        let sid = self.st.agent_session[id].clone();
        self.save_agent(&sid, id);
        self.dirty_agent(id);
        let i = self.st.by_id[&sid];
        let now = self.now;
        let a = self.st.sessions[i]
            .agents
            .iter_mut()
            .find(|a| &a.id == id)
            .expect("agent index and sessions agree");
        a.updated_at = now;
        a
    }

    pub fn insert_session(&mut self, s: SessionRecord) {
        self.change_point();
        if !self.undo.contains_key(&s.id) {
            self.first_touch(s.id.clone(), None);
        }
        self.dirty_session(&s.id);
        self.dirty_phases(&s.id);
        self.st.by_id.insert(s.id.clone(), self.st.sessions.len());
        self.st.sessions.push(s);
    }

    /// Take a session (and its agents) out of memory; the database keeps it, marked archived.
    /// A rollback puts it back.
    pub fn archive_session(&mut self, id: &SessionId) {
        self.change_point();
        self.forget_session(id);
        self.archived.push(id.clone());
    }

    /// Delete a session with everything it recorded (events, checkpoints, phases, agents), in
    /// memory (if it is there) and in the database. A rollback puts it back in memory.
    pub fn purge_session(&mut self, id: &SessionId) {
        self.change_point();
        if self.st.session(id).is_some() {
            self.forget_session(id);
        }
        self.purged.push(id.clone());
    }

    /// Out of memory, with nothing of it left to write; undone by a rollback.
    fn forget_session(&mut self, id: &SessionId) {
        self.save(id);
        if self.dirty_sessions.remove(id) {
            self.mark(false, Mark::Session(id.clone()));
        }
        if self.dirty_phases.remove(id) {
            self.mark(false, Mark::Phases(id.clone()));
        }
        let agents: Vec<AgentId> = self
            .st
            .session(id)
            .map(|s| s.agents.iter().map(|a| a.id.clone()).collect())
            .unwrap_or_default();
        for a in agents {
            if self.dirty_agents.remove(&a) {
                self.mark(false, Mark::Agent(a));
            }
        }
        self.st.sessions.retain(|s| &s.id != id);
        if let Some(at) = self.st.checkpointed.remove(id)
            && let Some(step) = self.steps.last_mut()
        {
            step.checkpointed.push((id.clone(), at));
        }
        self.st.reindex();
    }

    pub fn insert_agent(&mut self, mut a: AgentRecord) {
        self.change_point();
        if a.machine.is_none() {
            a.machine = self.st.machine.clone();
        }
        let sid = a.session_id.clone();
        self.save(&sid);
        self.dirty_agent(&a.id);
        self.st.agent_session.insert(a.id.clone(), sid.clone());
        let i = self.st.by_id[&sid];
        self.st.sessions[i].agents.push(a);
    }

    /// Append an event to the timeline (committed with the change it records).
    pub fn event(
        &mut self,
        session: Option<&SessionId>,
        agent: Option<&AgentId>,
        kind: &str,
        data: Value,
    ) {
        // `maos events --type` accepts the listed types only: a new one must be listed.
        debug_assert!(
            maos_core::events::EVENT_TYPES.contains(&kind),
            "event type {kind:?} is not in maos_core::events::EVENT_TYPES"
        );
        self.change_point();
        self.push_event(session.cloned(), agent.cloned(), kind.to_string(), data);
    }

    fn push_event(
        &mut self,
        session_id: Option<SessionId>,
        agent_id: Option<AgentId>,
        kind: String,
        data: Value,
    ) {
        let seq = self.st.next_seq;
        self.st.next_seq += 1;
        self.events.push(EventRecord {
            seq,
            ts: self.now,
            session_id,
            agent_id,
            kind,
            data,
        });
    }

    /// An event that records why a request is refused (a lock conflict, a deadlock): the one
    /// trace a failed request leaves, so it stays on the timeline when the request's changes
    /// are undone ([`Txn::atomic`]).
    pub fn refusal_event(
        &mut self,
        session: Option<&SessionId>,
        agent: Option<&AgentId>,
        kind: &str,
        data: Value,
    ) {
        self.event(session, agent, kind, data);
        if let (Some(step), Some(e)) = (self.steps.last_mut(), self.events.last()) {
            step.refusals.push(e.clone());
        }
    }

    /// An event from another timeline (`maos import`): it keeps its time, type and data and
    /// gets this project's next sequence number, which it returns.
    pub fn import_event(&mut self, mut e: EventRecord) -> u64 {
        self.change_point();
        e.seq = self.st.next_seq;
        self.st.next_seq += 1;
        let seq = e.seq;
        self.events.push(e);
        seq
    }

    /// A checkpoint from another project (`maos import`), its `seq` already in this timeline.
    pub fn import_checkpoint(&mut self, row: maos_store::CheckpointRow) {
        self.change_point();
        self.checkpoints.push(row);
    }

    /// A checkpoint of the session as it stands now: the session with its phases and agents
    /// and the locks its agents hold, committed with a `checkpoint_saved` event.
    pub fn checkpoint(&mut self, sid: &SessionId, reason: &str) {
        self.change_point();
        let Some(s) = self.st.session(sid) else {
            return;
        };
        let locks: Vec<&HeldLock> = s
            .agents
            .iter()
            .flat_map(|a| self.st.locks.held_by(&a.id))
            .collect();
        // Serialized straight from the records: no intermediate JSON tree (recovery takes a
        // checkpoint of every session it changes, before the daemon serves).
        #[derive(serde::Serialize)]
        struct Snapshot<'a> {
            version: u32,
            session: &'a SessionRecord,
            locks: Vec<&'a HeldLock>,
        }
        let state = serde_json::to_string(&Snapshot {
            version: 1,
            session: s,
            locks,
        })
        .unwrap_or_default();
        self.event(
            Some(sid),
            None,
            "checkpoint_saved",
            serde_json::json!({ "reason": reason }),
        );
        self.checkpoints.push(maos_store::CheckpointRow {
            session_id: sid.clone(),
            seq: self.st.next_seq - 1,
            ts: self.now,
            reason: reason.to_string(),
            state,
        });
    }

    /// The changed agents in the order of their sessions and of the agents in each: new rows
    /// are inserted in that order, and a load (`ORDER BY created_at, rowid`) then gives back
    /// the same order for agents created in one commit.
    fn dirty_agents_in_order(&self) -> Vec<&AgentRecord> {
        let st = &*self.st;
        let mut agents: Vec<(usize, usize, &AgentRecord)> = self
            .dirty_agents
            .iter()
            .filter_map(|id| {
                let si = *st.by_id.get(st.agent_session.get(id)?)?;
                let ai = st.sessions[si].agents.iter().position(|a| &a.id == id)?;
                Some((si, ai, &st.sessions[si].agents[ai]))
            })
            .collect();
        agents.sort_unstable_by_key(|&(si, ai, _)| (si, ai));
        agents.into_iter().map(|(_, _, a)| a).collect()
    }

    /// The rows to write, borrowed from the state.
    pub fn batch(&self) -> Batch<'_> {
        let st = &*self.st;
        Batch {
            sessions: self
                .dirty_sessions
                .iter()
                .filter_map(|id| st.session(id))
                .collect(),
            phases_of: self
                .dirty_phases
                .iter()
                .filter_map(|id| st.session(id))
                .collect(),
            agents: self.dirty_agents_in_order(),
            events: &self.events,
            locks: self
                .lock_rows
                .iter()
                .filter_map(|t| {
                    let lock = st.locks.get(*t)?;
                    Some(maos_store::LockRow {
                        lock,
                        session_id: &st.agent(&lock.holder)?.session_id,
                        ttl_us: st.locks.ttl_of(*t)?,
                    })
                })
                .collect(),
            unlocks: self.lock_deletes.clone(),
            waits: self.wait_rows.clone(),
            unwaits: self.wait_deletes.clone(),
            ended_waits: self.ended_waits.clone(),
            next_token: (st.locks.next_token() != self.token_before).then(|| st.locks.next_token()),
            checkpoints: &self.checkpoints,
            archived: self.archived.iter().collect(),
            purged: self.purged.iter().collect(),
            base_seq: st.last_seq().saturating_sub(self.events.len() as u64),
        }
    }

    /// Whether this prepared transaction ([`Txn::prepare`]) writes nothing but lock rows and
    /// lock events, each lock row (written or deleted) one that `allowed` accepts by its
    /// token: no session, agent, phase, wait, checkpoint or process work, and no waiter to
    /// answer. A fleet's per-path turns may commit only such a transaction.
    pub fn only_locks(&self, allowed: impl Fn(&State, u64) -> bool) -> bool {
        const LOCK_EVENTS: [&str; 4] = [
            "lock_acquired",
            "lock_released",
            "lock_expired",
            "conflict_detected",
        ];
        self.undo.is_empty()
            && self.dirty_sessions.is_empty()
            && self.dirty_phases.is_empty()
            && self.dirty_agents.is_empty()
            && self.checkpoints.is_empty()
            && self.effects.is_empty()
            && self.wakeups.is_empty()
            && self.ended_waits.is_empty()
            && self.wait_rows.is_empty()
            && self.wait_deletes.is_empty()
            && self.archived.is_empty()
            && self.purged.is_empty()
            && self
                .events
                .iter()
                .all(|e| LOCK_EVENTS.contains(&e.kind.as_str()))
            && self
                .lock_rows
                .iter()
                .chain(&self.lock_deletes)
                .all(|t| allowed(self.st, *t))
    }

    /// Whether the lock table changed (a failed commit then reloads it from the database).
    pub fn touched_locks(&self) -> bool {
        !self.lock_holders.is_empty() || self.st.locks.next_token() != self.token_before
    }

    /// Apply one request (or any other unit of change) all or nothing. If `f` returns an error
    /// or panics, memory, the lock table and everything this transaction would write are put
    /// back as the changes before it left them; the earlier changes of the transaction stay.
    /// Returns `f`'s result, or `Err` with the panic's payload.
    ///
    /// Steps nest, as savepoints: a step inside another (the scheduler's, inside a recovery)
    /// that fails undoes exactly its own changes and the outer one goes on from there; one
    /// that succeeds hands its changes to the outer step, which undoes them if it fails.
    pub fn atomic<T, E>(
        &mut self,
        f: impl FnOnce(&mut Txn<'a>) -> Result<T, E>,
    ) -> std::thread::Result<Result<T, E>> {
        #[cfg(test)]
        let probed = match self.probe {
            Some(p) if !self.steps.is_empty() => Some((p, p(self))),
            _ => None,
        };
        let step = self.open_step();
        self.steps.push(step);
        let depth = self.steps.len();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(self)));
        // Each step is closed by its own `atomic`, innermost first, even when it unwinds.
        debug_assert_eq!(self.steps.len(), depth, "a step was left open");
        let Some(step) = self.steps.pop() else {
            return result;
        };
        match &result {
            Ok(Ok(_)) => self.keep_step(step),
            Ok(Err(_)) | Err(_) => {
                self.undo_step(step);
                #[cfg(test)]
                if let Some((p, before)) = probed {
                    let after = p(self);
                    self.nested_failures.push((before, after));
                }
            }
        }
        result
    }

    /// A step begins: where everything it may change stands now.
    fn open_step(&mut self) -> StepUndo {
        StepUndo {
            sessions: HashMap::new(),
            first: HashSet::new(),
            agents: Vec::new(),
            agents_saved: HashSet::new(),
            marks: Vec::new(),
            events: self.events.len(),
            next_seq: self.st.next_seq,
            checkpoints: self.checkpoints.len(),
            effects: self.effects.len(),
            wakeups: self.wakeups.len(),
            ended_waits: self.ended_waits.len(),
            gone_leases: self.gone_leases.len(),
            archived: self.archived.len(),
            purged: self.purged.len(),
            checkpointed: Vec::new(),
            spawn_intents: None,
            locks: self.st.locks.savepoint(),
            refusals: Vec::new(),
        }
    }

    /// A step succeeded: its changes stay, and the step around it (if any) becomes able to
    /// undo them, keeping its own copies where it has older ones.
    fn keep_step(&mut self, inner: StepUndo) {
        let StepUndo {
            sessions,
            first,
            agents,
            marks,
            checkpointed,
            spawn_intents,
            locks,
            refusals,
            ..
        } = inner;
        self.st.locks.release_savepoint(locks);
        let Some(outer) = self.steps.last_mut() else {
            return;
        };
        // Agents first, against the outer step's copies as they were before this step: an
        // agent copied by the inner step before it copied its whole session is older than
        // that copy, and goes back over it (as in one step).
        for (sid, a) in agents {
            if !outer.first.contains(&sid)
                && !outer.sessions.contains_key(&sid)
                && outer.agents_saved.insert(a.id.clone())
            {
                outer.agents.push((sid, a));
            }
        }
        for (id, prev) in sessions {
            if !outer.first.contains(&id) {
                outer.sessions.entry(id).or_insert(prev);
            }
        }
        outer.first.extend(first);
        outer.marks.extend(marks);
        outer.checkpointed.extend(checkpointed);
        if outer.spawn_intents.is_none() {
            outer.spawn_intents = spawn_intents;
        }
        outer.refusals.extend(refusals);
    }

    /// Put back what one failed step changed.
    fn undo_step(&mut self, step: StepUndo) {
        let StepUndo {
            sessions: changed_earlier,
            agents,
            first,
            marks,
            ..
        } = step;
        // First touched by this step: the transaction's undo entry is its state before it.
        let sessions: Vec<_> = first
            .into_iter()
            .filter_map(|id| self.undo.remove(&id).map(|prev| (id, prev)))
            .collect();
        for (added, m) in marks.into_iter().rev() {
            match (added, m) {
                (true, Mark::Session(id)) => {
                    self.dirty_sessions.remove(&id);
                }
                (false, Mark::Session(id)) => {
                    self.dirty_sessions.insert(id);
                }
                (true, Mark::Phases(id)) => {
                    self.dirty_phases.remove(&id);
                }
                (false, Mark::Phases(id)) => {
                    self.dirty_phases.insert(id);
                }
                (true, Mark::Agent(id)) => {
                    self.dirty_agents.remove(&id);
                }
                (false, Mark::Agent(id)) => {
                    self.dirty_agents.insert(id);
                }
                (true, Mark::Holder(id)) => {
                    self.lock_holders.remove(&id);
                }
                (false, Mark::Holder(id)) => {
                    self.lock_holders.insert(id);
                }
                (true, Mark::Launching(id)) => {
                    self.st.launching.remove(&id);
                }
                (false, Mark::Launching(id)) => {
                    self.st.launching.insert(id);
                }
            }
        }
        let st = &mut *self.st;
        // Whole copies first: an agent copied before its session was copied whole is older
        // than that copy, so it goes back over it.
        st.put_back(changed_earlier);
        for (sid, prev) in agents {
            if let Some(a) = st
                .by_id
                .get(&sid)
                .and_then(|&i| st.sessions[i].agents.iter_mut().find(|a| a.id == prev.id))
            {
                *a = prev;
            }
        }
        st.put_back(sessions);
        st.checkpointed.extend(step.checkpointed);
        if let Some(intents) = step.spawn_intents {
            st.spawn_intents = intents;
        }
        st.next_seq = step.next_seq;
        st.locks.rollback_to(step.locks);
        self.events.truncate(step.events);
        self.checkpoints.truncate(step.checkpoints);
        self.effects.truncate(step.effects);
        self.wakeups.truncate(step.wakeups);
        self.ended_waits.truncate(step.ended_waits);
        self.gone_leases.truncate(step.gone_leases);
        self.archived.truncate(step.archived);
        self.purged.truncate(step.purged);
        // Recorded again (not a change point: undoing cannot fail), and kept by the step
        // around this one if that one fails too.
        for e in step.refusals {
            self.push_event(e.session_id, e.agent_id, e.kind, e.data);
            if let (Some(outer), Some(e)) = (self.steps.last_mut(), self.events.last()) {
                outer.refusals.push(e.clone());
            }
        }
    }

    /// The commit succeeded: record what the database now holds, and hand back the events to
    /// publish and the answers for parked waits.
    pub fn finish(self) -> Finished {
        for &token in &self.lock_rows {
            if let Some(lock) = self.st.locks.get(token) {
                self.st
                    .persisted
                    .entry(lock.holder.clone())
                    .or_default()
                    .insert(token, lock.expires_at);
            }
        }
        if !self.lock_deletes.is_empty() {
            for holder in &self.lock_holders {
                if let Some(stored) = self.st.persisted.get_mut(holder) {
                    for t in &self.lock_deletes {
                        stored.remove(t);
                    }
                    if stored.is_empty() {
                        self.st.persisted.remove(holder);
                    }
                }
            }
        }
        for c in &self.checkpoints {
            self.st.checkpointed.insert(c.session_id.clone(), c.ts);
        }
        for w in &self.wait_deletes {
            self.st.persisted_waits.remove(w);
        }
        for r in &self.wait_rows {
            self.st
                .persisted_waits
                .insert(r.wait, maos_store::from_us(r.lease_until));
        }
        Finished {
            events: self.events,
            wakeups: self.wakeups,
            effects: self.effects,
            checkpoints: self.checkpoints,
        }
    }

    /// The commit failed: restore memory to what it was before this transaction.
    pub fn rollback(self) {
        let st = self.st;
        st.put_back(self.undo);
        st.next_seq = self.first_seq;
        // Read by the lock table's reload that follows a failed commit touching locks.
        st.rolled_back_leases = self.gone_leases;
    }
}

/// What a changed lock needs in the database ([`Txn::prepare`]).
enum Write {
    /// Written: new, or its lease moved by half its length since it was written.
    Row,
    /// Deleted: written for this holder, and no longer held by it.
    Delete,
}

/// Whether the lock `token`, changed for `holder`, must be written or deleted now.
fn write_needed(st: &State, token: u64, holder: &AgentId) -> Option<Write> {
    write_needed_in(&st.locks, &st.persisted, token, holder)
}

fn write_needed_in(
    locks: &LockTable,
    persisted: &HashMap<AgentId, HashMap<u64, Ts>>,
    token: u64,
    holder: &AgentId,
) -> Option<Write> {
    let stored = persisted.get(holder).and_then(|s| s.get(&token));
    match locks.get(token).filter(|l| l.holder == *holder) {
        Some(lock) => {
            let moved = stored.is_none_or(|at| {
                let ttl = locks.ttl_of(token).unwrap_or(0);
                (lock.expires_at - *at)
                    .num_microseconds()
                    .unwrap_or(i64::MAX)
                    .saturating_mul(2)
                    >= ttl
            });
            moved.then_some(Write::Row)
        }
        None => stored.map(|_| Write::Delete),
    }
}

#[cfg(test)]
#[path = "atomic_tests.rs"]
pub(crate) mod atomic_tests;

#[cfg(test)]
mod tests {
    use super::*;
    use maos_core::{SessionState, Strategy, Workflow};

    fn session(id: u128) -> SessionRecord {
        let t = now();
        SessionRecord {
            id: SessionId::from_uuid(uuid::Uuid::from_u128(id)),
            objective: "o".into(),
            state: SessionState::Created,
            strategy: Strategy::Parallel,
            active: false,
            created_at: t,
            updated_at: t,
            started_at: None,
            ended_at: None,
            workflow: Workflow::default(),
            paused_phases: vec![],
            pause: None,
            resume_count: 0,
            errors: vec![],
            notes: vec![],
            policy: None,
            agents: vec![],
            context: Default::default(),
            todos: vec![],
            by_hooks: false,
        }
    }

    #[test]
    fn rollback_restores_sessions_and_sequence() {
        let mut st = State::new(vec![session(1)], 41);
        let id1 = st.sessions()[0].id.clone();
        let mut tx = Txn::new(&mut st);
        tx.session_mut(&id1).objective = "changed".into();
        tx.insert_session(session(2));
        tx.event(Some(&id1), None, "note_recorded", Value::Null);
        assert_eq!(tx.batch().sessions.len(), 2);
        tx.rollback();
        assert_eq!(st.sessions().len(), 1);
        assert_eq!(st.sessions()[0].objective, "o");
        assert_eq!(st.last_seq(), 41);
    }

    /// A pending agent `r<n>` of session `sid`, made at `t`.
    fn agent(n: u128, sid: &SessionId, t: Ts) -> AgentRecord {
        let id = AgentId::from_uuid(uuid::Uuid::from_u128(n));
        AgentRecord::pending(id, sid.clone(), format!("r{n}"), String::new(), t)
    }

    /// A lock request of `holder` for `path`, without waiting, with a lease of `ttl_us`.
    fn lock_req(holder: &AgentId, path: &str, ttl_us: i64) -> maos_core::LockRequest {
        maos_core::LockRequest {
            holder: holder.clone(),
            born: now(),
            path: maos_core::LockPath::new(path).unwrap_or_else(|e| panic!("{path}: {e}")),
            mode: maos_core::LockMode::Write,
            wait: maos_core::WaitPolicy::NoWait,
            ttl_us,
        }
    }

    /// Prepare, "commit" and finish one transaction: the lock rows it writes and deletes.
    fn lock_writes(st: &mut State, at: Ts, f: impl FnOnce(&mut Txn<'_>)) -> (Vec<u64>, Vec<u64>) {
        let mut tx = Txn::new(st);
        tx.now = at;
        f(&mut tx);
        tx.prepare();
        let mut w = (tx.lock_rows.clone(), tx.lock_deletes.clone());
        w.0.sort_unstable();
        w.1.sort_unstable();
        tx.finish();
        w
    }

    #[test]
    fn a_batch_compares_only_the_locks_that_changed_and_leases_add_up_to_a_write() {
        const TTL: i64 = 600_000_000;
        let mut st = State::new(vec![session(1)], 0);
        let a = AgentId::from_uuid(uuid::Uuid::from_u128(7));
        let t0 = now();
        let (rows, _) = lock_writes(&mut st, t0, |tx| {
            for i in 0..300 {
                assert!(tx.take(lock_req(&a, &format!("src/f{i}.rs"), TTL)).is_ok());
            }
        });
        assert_eq!(rows.len(), 300, "every new lock is written");
        // One more grant: only it is written, none of the 300 held before.
        let (rows, deletes) = lock_writes(&mut st, t0, |tx| {
            assert!(tx.take(lock_req(&a, "src/new.rs", TTL)).is_ok());
        });
        assert_eq!((rows.len(), deletes.len()), (1, 0), "{rows:?}");
        let all: Vec<u64> = st.locks.held_by(&a).iter().map(|l| l.token).collect();
        assert_eq!(all.len(), 301);
        // Renewed after 30 % of the lease: moved by less than half, nothing written...
        let at = |pct: i64| t0 + chrono::Duration::microseconds(TTL / 100 * pct);
        let (rows, _) = lock_writes(&mut st, at(30), |tx| {
            assert_eq!(tx.renew_all(&a), 301);
        });
        assert!(rows.is_empty(), "{rows:?}");
        // ...renewed again at 60 %: each lease moved by 60 % since it was written.
        let (rows, _) = lock_writes(&mut st, at(60), |tx| {
            assert_eq!(tx.renew_all(&a), 301);
        });
        assert_eq!(rows, all);
        // A release deletes that lock's row, and only it.
        let (rows, deletes) = lock_writes(&mut st, at(60), |tx| {
            tx.release_agent(&a, "finished");
        });
        assert_eq!((rows.len(), deletes), (0, all.clone()));
        assert!(st.persisted.is_empty(), "{:?}", st.persisted.len());
        Txn::new(&mut st);
        assert_eq!(st.locks.changed().count(), 0, "every change is settled");
    }

    #[test]
    fn locks_taken_in_from_elsewhere_are_not_kept_listed_by_batches_that_write_nothing() {
        const TTL: i64 = 600_000_000;
        let mut st = State::new(vec![session(1)], 0);
        let other = AgentId::from_uuid(uuid::Uuid::from_u128(9));
        // Another daemon's grants and releases, as a fleet batch takes them in: what
        // PostgreSQL holds (`refresh` records it as written, `sync_locks` makes it the table).
        for round in 0..50u64 {
            let held: Vec<(HeldLock, i64)> = (0..20u64)
                .map(|i| {
                    let t = now();
                    let lock = HeldLock {
                        token: round * 100 + i,
                        path: maos_core::LockPath::new(&format!("src/r{round}/f{i}.rs"))
                            .unwrap_or_else(|e| panic!("{e}")),
                        mode: maos_core::LockMode::Write,
                        holder: other.clone(),
                        acquired_at: t,
                        expires_at: t + chrono::Duration::microseconds(TTL),
                    };
                    (lock, TTL)
                })
                .collect();
            st.refresh(Vec::new(), &[], 0, Some(&held));
            let mut tx = Txn::new(&mut st);
            tx.sync_locks(held);
            tx.prepare();
            assert!(tx.lock_rows.is_empty() && tx.lock_deletes.is_empty());
            // Nothing to write: the transaction is dropped, as the actor drops it.
        }
        Txn::new(&mut st);
        assert_eq!(
            st.locks.changed().count(),
            0,
            "what PostgreSQL holds needs no write and is not kept listed"
        );
    }

    #[test]
    fn a_lease_raised_in_memory_before_a_reload_is_written_when_its_holder_is_next_touched() {
        const TTL: i64 = 600_000_000;
        let mut st = State::new(vec![session(1)], 0);
        let a = AgentId::from_uuid(uuid::Uuid::from_u128(7));
        let t0 = now();
        lock_writes(&mut st, t0, |tx| {
            assert!(tx.take(lock_req(&a, "src/a.rs", TTL)).is_ok());
        });
        let stored: Vec<(HeldLock, i64)> = st.locks.held().map(|l| (l.clone(), TTL)).collect();
        // Renewed in memory past half its lease, then a failed commit reloads the table, which
        // keeps the later lease ([`State::reset_locks`]).
        let later = t0 + chrono::Duration::microseconds(TTL * 3 / 4);
        let token = stored[0].0.token;
        assert_eq!(st.locks.renew(&a, later), 1);
        st.reset_locks(stored, token + 1);
        // A batch of another holder settles nothing of `a`'s...
        let b = AgentId::from_uuid(uuid::Uuid::from_u128(8));
        let (rows, _) = lock_writes(&mut st, later, |tx| {
            assert!(tx.take(lock_req(&b, "src/b.rs", TTL)).is_ok());
        });
        assert_eq!(rows.len(), 1);
        assert!(!rows.contains(&token));
        // ...and `a`'s next batch writes the raised lease.
        let (rows, _) = lock_writes(&mut st, later, |tx| tx.touch_holder(&a));
        assert_eq!(rows, [token]);
    }

    #[test]
    fn a_batch_writes_new_agents_in_their_session_order() {
        let mut st = State::new(vec![session(1), session(2)], 0);
        let sids: Vec<SessionId> = st.sessions().iter().map(|s| s.id.clone()).collect();
        let mut tx = Txn::new(&mut st);
        let mut want = Vec::new();
        // Interleaved between two sessions: the batch groups them by session, each in order.
        for n in 0..60u128 {
            let sid = &sids[(n % 2) as usize];
            let a = agent(1000 + n, sid, tx.now);
            want.push((n % 2, a.id.clone()));
            tx.insert_agent(a);
        }
        want.sort_by_key(|(s, _)| *s);
        let got: Vec<AgentId> = tx.batch().agents.iter().map(|a| a.id.clone()).collect();
        assert_eq!(got, want.into_iter().map(|(_, id)| id).collect::<Vec<_>>());
    }

    #[test]
    fn a_fleet_daemon_signals_only_the_processes_of_its_own_machine() {
        let mut st = State::new(vec![session(1)], 0);
        st.machine = Some("laptop".into());
        let sid = st.sessions()[0].id.clone();
        let mut tx = Txn::new(&mut st);
        let t = tx.now;
        let mut ids = Vec::new();
        for (n, machine, pid) in [(1u128, "laptop", 4242u32), (2, "build-server", 4343)] {
            let a = AgentRecord {
                state: maos_core::AgentState::Running,
                started_at: Some(t),
                process: Some(maos_core::record::ProcessInfo {
                    pid,
                    start_time: None,
                    started_at: t,
                    supervisor: None,
                }),
                attempts: 1,
                machine: Some(machine.into()),
                ..agent(2000 + n, &sid, t)
            };
            ids.push(a.id.clone());
            tx.insert_agent(a);
        }
        crate::ops::effects::signal_agents(&mut tx, &ids, true);
        let pgids: Vec<u32> = tx
            .effects
            .iter()
            .filter_map(|e| match e {
                crate::proc::run::Effect::Signal { pgid, .. } => Some(*pgid),
                _ => None,
            })
            .collect();
        assert_eq!(pgids, [4242], "another machine's pid is not signalled here");
    }

    #[test]
    fn an_archived_session_leaves_memory_and_a_rollback_puts_it_back_in_place() {
        let mut st = State::new(vec![session(1), session(2), session(3)], 0);
        let ids: Vec<SessionId> = st.sessions().iter().map(|s| s.id.clone()).collect();
        let mut tx = Txn::new(&mut st);
        tx.session_mut(&ids[1]).objective = "changed, then archived".into();
        tx.archive_session(&ids[1]);
        assert!(tx.state().session(&ids[1]).is_none());
        let b = tx.batch();
        assert_eq!(b.archived, vec![&ids[1]]);
        assert!(
            b.sessions.is_empty(),
            "an archived session's row is not rewritten"
        );
        tx.rollback();
        let after: Vec<&SessionId> = st.sessions().iter().map(|s| &s.id).collect();
        assert_eq!(
            after,
            ids.iter().collect::<Vec<_>>(),
            "back, in creation order"
        );
        assert_eq!(st.session(&ids[1]).map(|s| s.objective.as_str()), Some("o"));
    }
}
