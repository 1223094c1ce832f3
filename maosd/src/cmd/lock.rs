//! Lock requests. Paths arrive already resolved to project-relative keys by the connection.

use maos_core::{Acquired, LockError, LockMode, LockPath, LockRequest, WaitPolicy};
use maos_proto::{ErrorBody, ErrorCode, LockCheck, LockList, LockWait, Reply};
use serde_json::json;

use super::{Outcome, bad, invalid};
use crate::locks::{view, waiter_view, who};
use crate::state::{State, Txn};

fn key(path: &str, mode: LockMode) -> Result<LockPath, ErrorBody> {
    if mode == LockMode::Workspace {
        return Ok(LockPath::root());
    }
    LockPath::new(path).map_err(|e| ErrorBody::new(ErrorCode::PathOutsideWorkspace, e.to_string()))
}

/// A live agent (its session too): only those take locks.
fn live_agent<'a>(st: &'a State, name: &str) -> Result<&'a maos_proto::AgentRecord, ErrorBody> {
    let a = st.resolve_agent(name, None)?;
    if a.state.is_terminal() {
        return Err(invalid(format!(
            "agent {} is {}: a finished agent holds no locks",
            a.id, a.state
        )));
    }
    Ok(a)
}

fn conflict_error(st: &State, e: &LockError) -> ErrorBody {
    let LockError::Conflict {
        path,
        mode,
        holders,
        queued,
    } = e
    else {
        return lock_error(st, e);
    };
    let mut who_holds: Vec<String> = holders
        .iter()
        .map(|h| {
            format!(
                "{} holds {} ({}) since {}",
                who(st, &h.holder),
                h.path,
                h.mode,
                h.acquired_at.format("%H:%M:%S")
            )
        })
        .collect();
    who_holds.extend(queued.iter().map(|w| {
        format!(
            "{} is queued for {} ({})",
            who(st, &w.holder),
            w.path,
            w.mode
        )
    }));
    ErrorBody::new(
        ErrorCode::LockConflict,
        format!(
            "{path} ({mode}) is taken: {}; wait for it with --wait DURATION, or work on something else",
            who_holds.join("; ")
        ),
    )
}

fn lock_error(st: &State, e: &LockError) -> ErrorBody {
    let code = match e {
        LockError::Conflict { .. } => return conflict_error(st, e),
        LockError::Deadlock { cycle } => {
            // The requester itself is the youngest of the cycle.
            let holder = cycle.first().map(|c| c.waiter.clone());
            if let Some(holder) = holder {
                let v = maos_core::DeadlockVictim {
                    wait: 0,
                    holder,
                    cycle: cycle.clone(),
                };
                return crate::locks::deadlock_error(st, &v);
            }
            ErrorCode::Deadlock
        }
        LockError::NotHolder { .. } => ErrorCode::NotLockHolder,
        LockError::NotHeld { .. } => ErrorCode::NotFound,
        LockError::BadTtl(_) => ErrorCode::BadRequest,
    };
    ErrorBody::new(code, e.to_string())
}

#[allow(clippy::too_many_arguments)]
pub fn acquire(
    tx: &mut Txn<'_>,
    agent: &str,
    path: &str,
    mode: LockMode,
    wait: LockWait,
    ttl_ms: Option<u64>,
) -> Result<Outcome, ErrorBody> {
    let now = tx.now;
    let st = tx.state();
    let a = live_agent(st, agent)?;
    let holder = a.id.clone();
    let born = a.created_at;
    let path = key(path, mode)?;
    let ttl_us = match ttl_ms {
        Some(0) => return Err(bad("--ttl must be more than zero")),
        Some(ms) => i64::try_from(ms.saturating_mul(1000)).unwrap_or(i64::MAX),
        None => st.lock_ttl_us,
    };
    let policy = match wait {
        LockWait::NoWait => WaitPolicy::NoWait,
        LockWait::Forever => WaitPolicy::Forever,
        // A deadline past the last instant the clock can name is no deadline at all (and
        // `now + delta` would panic).
        LockWait::Wait { ms } => i64::try_from(ms)
            .ok()
            .and_then(chrono::TimeDelta::try_milliseconds)
            .and_then(|d| now.checked_add_signed(d))
            .map_or(WaitPolicy::Forever, |until| WaitPolicy::Wait { until }),
    };
    // Expired leases were already reaped: every batch ticks the lock table first, at this
    // transaction's `now`.
    tx.renew(&holder);
    let token_before = tx.state().locks.next_token();
    let req = LockRequest {
        holder: holder.clone(),
        born,
        path: path.clone(),
        mode,
        wait: policy,
        ttl_us,
    };
    match tx.locks_mut().acquire(req, now) {
        Ok(Acquired::Granted(lock)) => {
            if lock.token >= token_before {
                tx.granted(&lock, false);
            } else {
                tx.touch_holder(&holder); // idempotent: a renewal
            }
            let v = view(tx.state(), &lock)
                .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "lock holder vanished"))?;
            Ok(Reply::Lock(v).into())
        }
        Ok(Acquired::Queued {
            wait,
            victims,
            granted,
        }) => {
            let blockers = tx.state().locks.check(&holder, &path, mode);
            let holders: Vec<_> = blockers.holders.iter().map(|h| h.holder.clone()).collect();
            tx.lock_event(
                &holder,
                "lock_wait",
                json!({ "path": path.to_string(), "mode": mode, "wait": wait, "holders": holders }),
            );
            for v in victims {
                tx.deadlock_victim(v);
            }
            tx.outcomes(granted);
            Ok(Outcome::Park(wait))
        }
        Err(e) => {
            let err = lock_error(tx.state(), &e);
            // Every refusal is on the timeline too.
            match &e {
                LockError::Conflict { holders, .. } => {
                    let holders: Vec<_> = holders.iter().map(|h| h.holder.clone()).collect();
                    tx.lock_refusal(
                        &holder,
                        "conflict_detected",
                        json!({ "path": path.to_string(), "mode": mode, "holders": holders }),
                    );
                }
                LockError::Deadlock { cycle } => {
                    let cycle: Vec<_> = cycle
                        .iter()
                        .map(|c| json!({"waiter": c.waiter, "holder": c.holder, "path": c.path.to_string()}))
                        .collect();
                    tx.lock_refusal(
                        &holder,
                        "deadlock_detected",
                        json!({ "cycle": cycle, "victim": holder }),
                    );
                }
                _ => {}
            }
            Err(err)
        }
    }
}

pub fn release(
    tx: &mut Txn<'_>,
    agent: Option<&str>,
    path: &str,
    force: bool,
    by: Option<String>,
) -> Result<Outcome, ErrorBody> {
    let now = tx.now;
    let holder = match agent {
        Some(a) => tx.state().resolve_agent(a, None)?.id.clone(),
        None if force => maos_core::AgentId::from_uuid(uuid::Uuid::nil()),
        None => {
            return Err(bad(
                "name the holder with --agent, or break the lock with --force",
            ));
        }
    };
    // Workspace locks live at the root; `maos lock release . --agent X` finds them there too.
    let path = LockPath::new(path)
        .map_err(|e| ErrorBody::new(ErrorCode::PathOutsideWorkspace, e.to_string()))?;
    let (released, outcomes) = tx
        .locks_mut()
        .release(&holder, &path, force, now)
        .map_err(|e| lock_error(tx.state(), &e))?;
    let views: Vec<_> = released
        .iter()
        .filter_map(|l| view(tx.state(), l))
        .collect();
    tx.gone(
        &released,
        "lock_released",
        json!({ "forced": force, "by": by }),
    );
    tx.outcomes(outcomes);
    if agent.is_some() {
        tx.renew(&holder);
    }
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

pub fn list(st: &State, session: Option<&str>) -> Result<Outcome, ErrorBody> {
    let sid = session
        .map(|s| st.resolve_session(Some(s)).map(|s| s.id.clone()))
        .transpose()?;
    let in_session = |holder: &maos_core::AgentId| {
        sid.as_ref()
            .is_none_or(|s| st.agent(holder).is_some_and(|a| &a.session_id == s))
    };
    let mut locks: Vec<_> = st
        .locks
        .held()
        .filter(|l| in_session(&l.holder))
        .filter_map(|l| view(st, l))
        .collect();
    locks.sort_by(|a, b| a.path.cmp(&b.path).then(a.token.cmp(&b.token)));
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
        None => maos_core::AgentId::from_uuid(uuid::Uuid::nil()),
    };
    let key = key(path, mode)?;
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

pub fn heartbeat(tx: &mut Txn<'_>, agent: &str) -> Result<Outcome, ErrorBody> {
    let holder = live_agent(tx.state(), agent)?.id.clone();
    let leases = tx.renew(&holder);
    Ok(Reply::Renewed { leases }.into())
}
