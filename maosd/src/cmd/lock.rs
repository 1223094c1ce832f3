//! Lock requests. Names are resolved once: the agent to its id (at the handler's edge, or the
//! MCP call's caller), the path to its key (by the connection, on arrival: [`Keyed`]).

use maos_core::{AgentId, LockMode, LockPath};
use maos_proto::{ErrorBody, ErrorCode, LockCheck, LockList, Reply, req};

use super::{Handle, Keyed, Outcome, agent_id, live_id};
use crate::ops::lock::{self as ops, Taken};
use crate::txn::locks::{view, waiter_view};
use crate::txn::state::{State, Txn};

impl Handle for Keyed<req::LockAcquire> {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let Keyed { req, key } = *self;
        let holder = live_id(tx, &req.agent)?;
        acquire(tx, &holder, &req.lock, key)
    }

    fn acquire(&self) -> Option<&req::Acquire> {
        Some(&self.req.lock)
    }

    fn path_turn(&self) -> Option<&LockPath> {
        Some(&self.key)
    }
}

impl Handle for Keyed<req::LockRelease> {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let Keyed { req, key } = *self;
        let holder = req.agent.map(|a| agent_id(tx, &a)).transpose()?;
        release(tx, holder.as_ref(), &key, req.force, req.by)
    }

    fn path_turn(&self) -> Option<&LockPath> {
        Some(&self.key)
    }
}

impl Handle for req::LockReleaseAll {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let holder = agent_id(tx, &self.agent)?;
        release_all(tx, &holder)
    }
}

impl Handle for req::LockList {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        list(tx.state(), self.session.as_deref())
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Locks(LockList {
            locks: Vec::new(),
            waiters: Vec::new(),
        }))
    }
}

impl Handle for Keyed<req::LockCheck> {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let Keyed { req, key } = *self;
        let holder = req.agent.map(|a| agent_id(tx, &a)).transpose()?;
        check(tx.state(), holder.as_ref(), key, req.mode)
    }
}

/// A sign of life: renews every lease of a live agent.
impl Handle for req::Heartbeat {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let holder = live_id(tx, &self.agent)?;
        heartbeat(tx, &holder)
    }
}

/// `holder`: a live agent ([`ops::live`]).
pub fn acquire(
    tx: &mut Txn<'_>,
    holder: &AgentId,
    lock: &req::Acquire,
    key: LockPath,
) -> Result<Outcome, ErrorBody> {
    let ttl_us = ops::lease(tx.state(), lock.ttl_ms)?;
    let policy = ops::wait_policy(lock.wait, tx.now);
    // Any request is a sign of life.
    tx.renew(holder);
    match ops::acquire(tx, holder, key, lock.mode, policy, ttl_us)? {
        Taken::Granted(lock) => {
            let v = view(tx.state(), &lock)
                .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "lock holder vanished"))?;
            Ok(Reply::Lock(v).into())
        }
        Taken::Queued(wait) => Ok(Outcome::Park { wait, caller: None }),
    }
}

/// Workspace locks live at the root; `maos lock release . --agent X` finds them there too.
pub fn release(
    tx: &mut Txn<'_>,
    holder: Option<&AgentId>,
    key: &LockPath,
    force: bool,
    by: Option<String>,
) -> Result<Outcome, ErrorBody> {
    // Each lock it ended, named with its session and agent (a release removes no agent).
    let released = ops::release(tx, holder, key, force, by)?;
    let views = released
        .iter()
        .filter_map(|l| view(tx.state(), l))
        .collect();
    Ok(Reply::Released(views).into())
}

fn release_all(tx: &mut Txn<'_>, holder: &AgentId) -> Result<Outcome, ErrorBody> {
    let views: Vec<_> = tx
        .state()
        .locks
        .held_by(holder)
        .into_iter()
        .filter_map(|l| view(tx.state(), l))
        .collect();
    tx.release_agent(holder, "released all its locks");
    Ok(Reply::Released(views).into())
}

/// `holder`: a live agent ([`ops::live`]).
pub fn heartbeat(tx: &mut Txn<'_>, holder: &AgentId) -> Result<Outcome, ErrorBody> {
    let leases = tx.renew_all(holder);
    Ok(Reply::Renewed { leases }.into())
}

fn list(st: &State, session: Option<&str>) -> Result<Outcome, ErrorBody> {
    let sid = session
        .map(|s| st.resolve_session(Some(s)).map(|s| s.id.clone()))
        .transpose()?;
    let in_session = |holder: &AgentId| {
        sid.as_ref()
            .is_none_or(|s| st.agent(holder).is_some_and(|a| &a.session_id == s))
    };
    let locks = crate::txn::locks::held_views(st, sid.as_ref());
    let waiters = st
        .locks
        .waiters()
        .iter()
        .filter(|w| in_session(&w.holder))
        .map(|w| waiter_view(st, w))
        .collect();
    Ok(Reply::Locks(LockList { locks, waiters }).into())
}

/// As `holder`, or as nobody: then every lock that would conflict with anyone shows up.
pub fn check(
    st: &State,
    holder: Option<&AgentId>,
    key: LockPath,
    mode: LockMode,
) -> Result<Outcome, ErrorBody> {
    let nobody = AgentId::from_uuid(uuid::Uuid::nil());
    let c = st.locks.check(holder.unwrap_or(&nobody), &key, mode);
    Ok(Reply::LockCheck(LockCheck {
        path: key.to_string(),
        mode,
        blocked: !c.is_empty(),
        holders: c.holders.iter().filter_map(|l| view(st, l)).collect(),
        queued: c.queued.iter().map(|w| waiter_view(st, w)).collect(),
    })
    .into())
}
