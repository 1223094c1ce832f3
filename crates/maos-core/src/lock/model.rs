//! What the lock table speaks: modes, the conflict rule, requests, answers and errors.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::path::LockPath;
use crate::state::named_enum;
use crate::{AgentId, Ts};

named_enum! {
    /// What a lock covers and whether it is shared.
    pub enum LockMode("lock mode") {
        /// Shared lock on exactly one path.
        Read => "read",
        /// Exclusive lock on exactly one path.
        Write => "write",
        /// Exclusive lock on a path and everything under it.
        Directory => "directory",
        /// Exclusive lock on the whole project (its path is always the root).
        Workspace => "workspace",
    }
}

impl LockMode {
    /// True for every mode but [`LockMode::Read`]: such a lock excludes other holders.
    pub fn is_exclusive(self) -> bool {
        self != LockMode::Read
    }
}

/// Whether the scopes of two locks intersect. Read/Write cover exactly their path, Directory its
/// path and everything under it, Workspace everything (its path is ignored).
pub fn overlaps(a_mode: LockMode, a: &LockPath, b_mode: LockMode, b: &LockPath) -> bool {
    use LockMode::{Directory, Workspace};
    match (a_mode, b_mode) {
        (Workspace, _) | (_, Workspace) => true,
        (Directory, Directory) => a.contains(b) || b.contains(a),
        (Directory, _) => a.contains(b),
        (_, Directory) => b.contains(a),
        _ => a == b,
    }
}

/// Whether two locks cannot be held at once: their scopes overlap, at least one is exclusive and
/// their holders differ (an agent never conflicts with itself).
pub fn conflicts(
    a_holder: &AgentId,
    a_mode: LockMode,
    a: &LockPath,
    b_holder: &AgentId,
    b_mode: LockMode,
    b: &LockPath,
) -> bool {
    a_holder != b_holder
        && (a_mode.is_exclusive() || b_mode.is_exclusive())
        && overlaps(a_mode, a, b_mode, b)
}

/// A granted lock.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HeldLock {
    /// The locked path (the root for a Workspace lock).
    pub path: LockPath,
    /// The lock's mode.
    pub mode: LockMode,
    /// The agent holding it.
    pub holder: AgentId,
    /// Fencing token: per project, strictly increasing across grants (and restarts).
    pub token: u64,
    /// When it was granted.
    pub acquired_at: Ts,
    /// When the lease runs out unless the holder shows life.
    pub expires_at: Ts,
}

impl fmt::Display for HeldLock {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} holds {} on {} since {}",
            self.holder,
            self.mode,
            self.path,
            ts(self.acquired_at)
        )
    }
}

/// How long a request that cannot be granted now may wait.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitPolicy {
    /// Fail at once with [`LockError::Conflict`].
    NoWait,
    /// Queue until `until`; [`LockTable::tick`] times the wait out then. An `until` that is not
    /// after `now` behaves like `NoWait`.
    Wait {
        /// The wait's deadline.
        until: Ts,
    },
    /// Queue until granted, cancelled or chosen as a deadlock victim.
    Forever,
}

/// A request for a lock.
#[derive(Clone, Debug, PartialEq)]
pub struct LockRequest {
    /// The requesting agent.
    pub holder: AgentId,
    /// When the holder agent was registered: the youngest agent (latest `born`, ties broken by
    /// the larger id) loses a deadlock.
    pub born: Ts,
    /// The path to lock (ignored, and recorded as the root, for Workspace).
    pub path: LockPath,
    /// The mode.
    pub mode: LockMode,
    /// Whether and how long to wait when it cannot be granted now.
    pub wait: WaitPolicy,
    /// Lease length in microseconds (> 0).
    pub ttl_us: i64,
}

/// Id of a parked wait: assigned by the table, increasing (so also the queue order).
pub type WaitId = u64;

/// The result of [`LockTable::acquire`].
#[derive(Clone, Debug, PartialEq)]
pub enum Acquired {
    /// Granted now: a new lock, an idempotent re-acquire (same token, lease renewed), a Write
    /// request answered by the Write lock already held on that path, or a Read→Write upgrade
    /// (new token, the Read lock replaced).
    Granted(HeldLock),
    /// Queued behind conflicting holders/waiters; the caller parks its reply under `wait`.
    Queued {
        /// The new wait.
        wait: WaitId,
        /// Other waiters whose wait ended because this request closed a wait-for cycle and they
        /// were the youngest in it.
        victims: Vec<DeadlockVictim>,
        /// Waiters granted because the victims' waits ended (queue order). May include `wait`
        /// itself: park the reply first, then answer these like any other grant.
        granted: Vec<WaitOutcome>,
    },
}

/// A waiter chosen as the loser of a deadlock.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DeadlockVictim {
    /// The ended wait.
    pub wait: WaitId,
    /// Its agent.
    pub holder: AgentId,
    /// The cycle it was part of, starting at the request that closed it.
    pub cycle: Vec<CycleEdge>,
    /// The wait's key when another daemon of a fleet parked it ([`ForeignWait::key`]): that
    /// daemon answers its agent.
    pub foreign: Option<String>,
}

impl fmt::Display for DeadlockVictim {
    /// "deadlock: a waits for b on x, b waits for a on y; a is the youngest and loses; ..."
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&deadlock_message(&self.cycle, &self.holder))
    }
}

/// One edge of a wait-for cycle: `waiter` waits for `holder` on `path`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CycleEdge {
    /// The waiting agent.
    pub waiter: AgentId,
    /// The path the waiter asked for.
    pub path: LockPath,
    /// The agent it waits for: it holds a conflicting lock, or it is queued earlier for one.
    pub holder: AgentId,
}

impl fmt::Display for CycleEdge {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} waits for {} on {}",
            self.waiter, self.holder, self.path
        )
    }
}

/// A parked wait, as listed by [`LockTable::waiters`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WaiterInfo {
    /// The wait's id.
    pub wait: WaitId,
    /// The waiting agent.
    pub holder: AgentId,
    /// The requested path.
    pub path: LockPath,
    /// The requested mode.
    pub mode: LockMode,
    /// When it was queued.
    pub since: Ts,
    /// When it times out (`None`: waits forever).
    pub deadline: Option<Ts>,
    /// Parked through another daemon of a fleet ([`LockTable::sync_foreign`]).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub foreign: bool,
}

/// A wait parked through another daemon of a fleet, as that daemon wrote it: it queues and
/// closes wait-for cycles here as it does there, but only its own daemon grants it, times it
/// out or cancels it ([`LockTable::sync_foreign`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForeignWait {
    /// Unique in the fleet, stable while the wait lasts (its daemon and its id there).
    pub key: String,
    pub holder: AgentId,
    /// When the waiting agent was registered (the youngest of a cycle gives way).
    pub born: Ts,
    pub path: LockPath,
    pub mode: LockMode,
    pub since: Ts,
    pub deadline: Option<Ts>,
    /// Until when its daemon vouches for it: past this the wait is dropped here, as a lease
    /// that lapsed (its daemon died, or was cut off).
    pub lapse: Ts,
}

impl fmt::Display for WaiterInfo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "{} waits for {} on {} since {}",
            self.holder,
            self.mode,
            self.path,
            ts(self.since)
        )
    }
}

/// Who a request would have to wait for right now ([`LockTable::check`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Conflicts {
    /// Conflicting locks of other agents, by token.
    pub holders: Vec<HeldLock>,
    /// Earlier queued requests of other agents it would have to wait behind, in queue order.
    pub queued: Vec<WaiterInfo>,
}

impl Conflicts {
    /// True when the request would be granted now.
    pub fn is_empty(&self) -> bool {
        self.holders.is_empty() && self.queued.is_empty()
    }
}

/// Something that happened to a parked waiter (the daemon answers its parked reply).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum WaitOutcome {
    /// The wait was granted.
    Granted {
        /// The wait.
        wait: WaitId,
        /// The lock it got.
        lock: HeldLock,
    },
    /// The wait's deadline passed.
    TimedOut {
        /// The wait.
        wait: WaitId,
        /// Its agent.
        holder: AgentId,
        /// The path it waited for.
        path: LockPath,
    },
    /// The wait was chosen as a deadlock victim.
    Deadlock(DeadlockVictim),
}

impl WaitOutcome {
    /// The wait this outcome ends.
    pub fn wait(&self) -> WaitId {
        match self {
            WaitOutcome::Granted { wait, .. } | WaitOutcome::TimedOut { wait, .. } => *wait,
            WaitOutcome::Deadlock(v) => v.wait,
        }
    }
}

/// A refused lock operation. Nothing changed in the table.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum LockError {
    /// The request conflicts and was not allowed to wait.
    #[error("{}", conflict_message(path, *mode, holders, queued))]
    Conflict {
        /// The requested path.
        path: LockPath,
        /// The requested mode.
        mode: LockMode,
        /// Every conflicting lock of another agent.
        holders: Vec<HeldLock>,
        /// Earlier queued requests it would have to wait behind (first come, first served).
        queued: Vec<WaiterInfo>,
    },
    /// Waiting would close a wait-for cycle in which the requester is the youngest agent.
    #[error("{}", deadlock_message(cycle, cycle.first().map(|e| &e.waiter)))]
    Deadlock {
        /// The cycle, starting with the refused request.
        cycle: Vec<CycleEdge>,
    },
    /// Only the holder releases a lock (unless forced).
    #[error(
        "{holder} holds no lock on {path}; it is held by {}: only the holder can release it (use --force to release it anyway)",
        list(held_by)
    )]
    NotHolder {
        /// The path named.
        path: LockPath,
        /// The agent that asked to release it.
        holder: AgentId,
        /// The agents that do hold a lock on exactly that path.
        held_by: Vec<AgentId>,
    },
    /// Nobody holds a lock on exactly that path.
    #[error(
        "no lock is held on {path} (asked by {holder}); list held locks to see the exact paths"
    )]
    NotHeld {
        /// The path named.
        path: LockPath,
        /// The agent that asked to release it.
        holder: AgentId,
    },
    /// The lease length is not positive.
    #[error("invalid lock lease of {0} µs: a lease must be longer than zero")]
    BadTtl(i64),
}

/// How many items an error message lists before "and N more".
const MAX_LISTED: usize = 5;

fn ts(t: Ts) -> String {
    t.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn list<T: fmt::Display>(items: &[T]) -> String {
    let mut out = items
        .iter()
        .take(MAX_LISTED)
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    if items.len() > MAX_LISTED {
        out.push_str(&format!(" and {} more", items.len() - MAX_LISTED));
    }
    out
}

fn conflict_message(
    path: &LockPath,
    mode: LockMode,
    holders: &[HeldLock],
    queued: &[WaiterInfo],
) -> String {
    let mut out = format!("cannot lock {path} for {mode}: ");
    if !holders.is_empty() {
        out.push_str(&list(holders));
    }
    if !queued.is_empty() {
        if !holders.is_empty() {
            out.push_str("; ");
        }
        out.push_str(&format!(
            "queued first (served in arrival order): {}",
            list(queued)
        ));
    }
    out.push_str("; retry with --wait to queue for it");
    out
}

fn deadlock_message<'a>(cycle: &[CycleEdge], loser: impl Into<Option<&'a AgentId>>) -> String {
    let edges = cycle
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(", ");
    let loser = loser
        .into()
        .map_or_else(String::new, |a| format!("; {a} is the youngest and loses"));
    format!("deadlock: {edges}{loser}; release a lock or retry later")
}
