//! Locks an agent takes and lets go of, with their events (the lock table's own bookkeeping on a
//! [`Txn`] is in `crate::txn::locks`).

use maos_core::{
    Acquired, AgentId, HeldLock, LockError, LockMode, LockPath, LockRequest, WaitId, WaitPolicy,
};
use maos_proto::{ErrorBody, ErrorCode, LockWait};
use serde_json::json;

use crate::base::error::{bad_request as bad, invalid};
use crate::txn::locks::who;
use crate::txn::state::{State, Txn};

/// A live agent (its session too), by name: only those take locks.
pub fn live_agent<'a>(st: &'a State, name: &str) -> Result<&'a maos_proto::AgentRecord, ErrorBody> {
    live(st, &st.resolve_agent(name, None)?.id)
}

/// A live agent, by id (named once already).
pub fn live<'a>(st: &'a State, id: &AgentId) -> Result<&'a maos_proto::AgentRecord, ErrorBody> {
    let a = st
        .agent(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("agent {id} not found")))?;
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
                maos_core::utc(h.acquired_at)
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

pub fn lock_error(st: &State, e: &LockError) -> ErrorBody {
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
                    foreign: None,
                };
                return crate::txn::locks::deadlock_error(st, &v);
            }
            ErrorCode::Deadlock
        }
        LockError::NotHolder { .. } => ErrorCode::NotLockHolder,
        LockError::NotHeld { .. } => ErrorCode::NotFound,
        LockError::BadTtl(_) => ErrorCode::BadRequest,
    };
    ErrorBody::new(code, e.to_string())
}

/// Whether an acquire asking `wait` may park a lock wait instead of being answered at once: the
/// one place this is decided (the connection's lane for a request that may wait,
/// `ProjectRequest::waits`), and what [`wait_policy`] makes of it (its tests hold them to
/// each other).
pub fn may_wait(wait: LockWait) -> bool {
    wait != LockWait::NoWait
}

/// How long a request may wait, as the lock table takes it.
pub fn wait_policy(wait: LockWait, now: maos_core::Ts) -> WaitPolicy {
    match wait {
        LockWait::NoWait => WaitPolicy::NoWait,
        LockWait::Forever => WaitPolicy::Forever,
        // A deadline past the last instant the clock can name is no deadline at all (and
        // `now + delta` would panic).
        LockWait::Wait { ms } => i64::try_from(ms)
            .ok()
            .and_then(chrono::TimeDelta::try_milliseconds)
            .and_then(|d| now.checked_add_signed(d))
            .map_or(WaitPolicy::Forever, |until| WaitPolicy::Wait { until }),
    }
}

/// A lease length in µs from a request's `ttl_ms` (`None`: the project's default).
pub fn lease(st: &State, ttl_ms: Option<u64>) -> Result<i64, ErrorBody> {
    match ttl_ms {
        Some(0) => Err(bad("--ttl must be more than zero")),
        Some(ms) => Ok(i64::try_from(ms.saturating_mul(1000)).unwrap_or(i64::MAX)),
        None => Ok(st.lock_ttl_us),
    }
}

/// What a lock request came to.
pub enum Taken {
    Granted(HeldLock),
    /// Queued behind conflicting holders: answered when the wait ends.
    Queued(WaitId),
}

/// Take a lock for a live agent (the caller renewed its leases: any request is a sign of
/// life). A refusal is recorded on the timeline (`conflict_detected`, `deadlock_detected`).
pub fn acquire(
    tx: &mut Txn<'_>,
    holder: &AgentId,
    path: LockPath,
    mode: LockMode,
    policy: WaitPolicy,
    ttl_us: i64,
) -> Result<Taken, ErrorBody> {
    let born = live_agent(tx.state(), holder.as_str())?.created_at;
    let holder = holder.clone();
    // Expired leases were already reaped: every batch ticks the lock table first, at this
    // transaction's `now`.
    let req = LockRequest {
        holder: holder.clone(),
        born,
        path: path.clone(),
        mode,
        wait: policy,
        ttl_us,
    };
    match tx.take(req) {
        Ok(Acquired::Granted(lock)) => Ok(Taken::Granted(lock)),
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
            Ok(Taken::Queued(wait))
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

/// Let go of `holder`'s locks on exactly `path` (with `force`, everyone's: `holder` is then
/// only who asks, `None` for a person). Returns the released locks.
pub fn release(
    tx: &mut Txn<'_>,
    holder: Option<&AgentId>,
    path: &LockPath,
    force: bool,
    by: Option<String>,
) -> Result<Vec<HeldLock>, ErrorBody> {
    let now = tx.now;
    let nobody = AgentId::from_uuid(uuid::Uuid::nil());
    let asker = match holder {
        Some(a) => a.clone(),
        None if force => nobody,
        None => {
            return Err(bad(
                "name the holder with --agent, or break the lock with --force",
            ));
        }
    };
    let (released, outcomes) = tx
        .locks_mut()
        .release(&asker, path, force, now)
        .map_err(|e| lock_error(tx.state(), &e))?;
    tx.gone(
        &released,
        "lock_released",
        json!({ "forced": force, "by": by }),
    );
    tx.outcomes(outcomes);
    if holder.is_some() {
        tx.renew(&asker);
    }
    Ok(released)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An acquire may wait exactly when the lock table is told it may.
    #[test]
    fn may_wait_is_what_the_policy_says() {
        let now = maos_core::Ts::default();
        for wait in [
            LockWait::NoWait,
            LockWait::Forever,
            LockWait::Wait { ms: 0 },
            LockWait::Wait { ms: 1 },
            LockWait::Wait { ms: u64::MAX },
        ] {
            assert_eq!(
                may_wait(wait),
                wait_policy(wait, now) != WaitPolicy::NoWait,
                "{wait:?}"
            );
        }
    }
}
