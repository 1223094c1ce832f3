//! Lock requests. Paths arrive already resolved to project-relative keys by the connection.

use maos_core::{AgentId, LockMode, LockPath};
use maos_proto::{ErrorBody, ErrorCode, LockCheck, LockList, LockWait, Reply};

use super::Outcome;
use crate::locks::{view, waiter_view};
use crate::ops::lock::{self as ops, Taken};
use crate::state::{State, Txn};

pub fn acquire(
    tx: &mut Txn<'_>,
    agent: &str,
    path: &str,
    mode: LockMode,
    wait: LockWait,
    ttl_ms: Option<u64>,
) -> Result<Outcome, ErrorBody> {
    let st = tx.state();
    let holder = ops::live_agent(st, agent)?.id.clone();
    let path = ops::key(path, mode)?;
    let ttl_us = ops::lease(st, ttl_ms)?;
    let policy = ops::wait_policy(wait, tx.now);
    // Any request is a sign of life.
    tx.renew(&holder);
    match ops::acquire(tx, &holder, path, mode, policy, ttl_us)? {
        Taken::Granted(lock) => {
            let v = view(tx.state(), &lock)
                .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "lock holder vanished"))?;
            Ok(Reply::Lock(v).into())
        }
        Taken::Queued(wait) => Ok(Outcome::Park { wait, caller: None }),
    }
}

pub fn release(
    tx: &mut Txn<'_>,
    agent: Option<&str>,
    path: &str,
    force: bool,
    by: Option<String>,
) -> Result<Outcome, ErrorBody> {
    let holder = agent
        .map(|a| tx.state().resolve_agent(a, None).map(|a| a.id.clone()))
        .transpose()?;
    // Workspace locks live at the root; `maos lock release . --agent X` finds them there too.
    let path = LockPath::new(path)
        .map_err(|e| ErrorBody::new(ErrorCode::PathOutsideWorkspace, e.to_string()))?;
    // Views before the release: they name each lock's session and agent.
    let before: Vec<_> = tx
        .state()
        .locks
        .held()
        .filter_map(|l| view(tx.state(), l).map(|v| (l.token, v)))
        .collect();
    let released = ops::release(tx, holder.as_ref(), &path, force, by)?;
    let views = before
        .into_iter()
        .filter(|(t, _)| released.iter().any(|l| l.token == *t))
        .map(|(_, v)| v)
        .collect();
    Ok(Reply::Released(views).into())
}

pub fn release_all(tx: &mut Txn<'_>, agent: &str) -> Result<Outcome, ErrorBody> {
    let holder = tx.state().resolve_agent(agent, None)?.id.clone();
    let views: Vec<_> = tx
        .state()
        .locks
        .held_by(&holder)
        .into_iter()
        .filter_map(|l| view(tx.state(), l))
        .collect();
    tx.release_agent(&holder, "released all its locks");
    Ok(Reply::Released(views).into())
}

pub fn heartbeat(tx: &mut Txn<'_>, agent: &str) -> Result<Outcome, ErrorBody> {
    let holder = ops::live_agent(tx.state(), agent)?.id.clone();
    let leases = tx.renew_all(&holder);
    Ok(Reply::Renewed { leases }.into())
}

pub fn list(st: &State, session: Option<&str>) -> Result<Outcome, ErrorBody> {
    let sid = session
        .map(|s| st.resolve_session(Some(s)).map(|s| s.id.clone()))
        .transpose()?;
    let in_session = |holder: &AgentId| {
        sid.as_ref()
            .is_none_or(|s| st.agent(holder).is_some_and(|a| &a.session_id == s))
    };
    let locks = crate::locks::held_views(st, sid.as_ref());
    let waiters = st
        .locks
        .waiters()
        .iter()
        .filter(|w| in_session(&w.holder))
        .map(|w| waiter_view(st, w))
        .collect();
    Ok(Reply::Locks(LockList { locks, waiters }).into())
}

pub fn check(
    st: &State,
    agent: Option<&str>,
    path: &str,
    mode: LockMode,
) -> Result<Outcome, ErrorBody> {
    let holder = match agent {
        Some(a) => st.resolve_agent(a, None)?.id.clone(),
        // Nobody: every lock that would conflict with anyone shows up.
        None => AgentId::from_uuid(uuid::Uuid::nil()),
    };
    let key = ops::key(path, mode)?;
    let c = st.locks.check(&holder, &key, mode);
    Ok(Reply::LockCheck(LockCheck {
        path: key.to_string(),
        mode,
        blocked: !c.is_empty(),
        holders: c.holders.iter().filter_map(|l| view(st, l)).collect(),
        queued: c.queued.iter().map(|w| waiter_view(st, w)).collect(),
    })
    .into())
}
