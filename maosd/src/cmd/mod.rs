//! The request handlers: each turns one request into calls of the operations floor
//! (`crate::ops`) and shapes the reply. Handlers never call each other; what two of them share
//! is an operation, or one of the reply helpers below. A request is all or nothing whatever a
//! handler does: the actor runs it in [`Txn::atomic`].

mod agent;
pub(crate) mod brief;
pub mod hook;
mod lock;
mod managed;
mod mcp;
mod phase;
mod query;
mod reply;
mod session;

pub use query::{event_query, resolve_filter};
pub use reply::Outcome;
pub(crate) use reply::{agent_reply, session_reply};

use maos_proto::{ErrorBody, Reply};

use crate::router::ProjectRequest as Request;
use crate::state::Txn;

/// Apply one project request.
pub fn handle(tx: &mut Txn<'_>, body: Request) -> Result<Outcome, ErrorBody> {
    match body {
        Request::SessionCreate {
            objective,
            strategy,
            phases,
        } => session::create(tx, objective, strategy, phases),
        Request::SessionList { all } => query::session_list(tx.state(), all),
        Request::SessionShow { session } => query::session_show(tx.state(), session.as_deref()),
        Request::SessionActivate { session } => session::activate(tx, &session),
        Request::SessionTransition {
            session,
            op,
            reason,
        } => session::transition(tx, session.as_deref(), op, reason),
        Request::AgentRegister {
            session,
            role,
            task,
            depends_on,
            parent,
        } => agent::register(tx, session.as_deref(), role, task, depends_on, parent),
        Request::AgentTransition {
            agent,
            op,
            exit_code,
            reason,
        } => managed::agent_op(tx, &agent, op, exit_code, reason),
        Request::AgentList { session } => query::agent_list(tx.state(), session.as_deref()),
        Request::PhaseAdd { session, name } => phase::add(tx, session.as_deref(), &name),
        Request::PhaseTransition {
            session,
            phase,
            op,
            artifacts,
        } => phase::transition(tx, session.as_deref(), phase.as_deref(), op, artifacts),
        Request::Pause {
            session,
            target,
            reason,
            by,
        } => session::set_paused(tx, session.as_deref(), target, true, reason, by),
        Request::Resume {
            session,
            target,
            by,
        } => session::set_paused(tx, session.as_deref(), target, false, None, by),
        Request::Ps { all } => query::ps(tx.state(), all, tx.now),
        Request::Events { filter, limit } => query::events(tx.state(), &filter, limit),
        Request::Status { session } => query::status(tx.state(), session.as_deref(), tx.now),
        Request::LockAcquire {
            agent,
            path,
            mode,
            wait,
            ttl_ms,
            ..
        } => lock::acquire(tx, &agent, &path, mode, wait, ttl_ms),
        Request::LockRelease {
            agent,
            path,
            force,
            by,
            ..
        } => lock::release(tx, agent.as_deref(), &path, force, by),
        Request::LockReleaseAll { agent } => lock::release_all(tx, &agent),
        Request::LockList { session } => lock::list(tx.state(), session.as_deref()),
        Request::LockCheck {
            agent, path, mode, ..
        } => lock::check(tx.state(), agent.as_deref(), &path, mode),
        Request::Heartbeat { agent } => lock::heartbeat(tx, &agent),
        Request::Hook(call) => hook::hook(tx, *call),
        Request::Brief { session } => brief::brief(tx.state(), session.as_deref(), tx.now)
            .map(|b| Reply::Brief(Box::new(b)).into()),
        Request::Note {
            session,
            agent,
            kind,
            text,
        } => brief::note(tx, session.as_deref(), agent.as_deref(), kind, text),
        Request::AgentExited(exit) => managed::exited(tx, *exit),
        Request::SessionFromPlan { path, text, start } => {
            managed::from_plan(tx, &path, &text, start)
        }
        Request::AgentLog { agent } => managed::log(tx, &agent),
        Request::Recover { session } => managed::recover(tx, session.as_deref()),
        Request::Retry { target, by } => managed::retry(tx, target.as_deref(), by),
        Request::Validate { session } => managed::validate(tx, session.as_deref()),
        Request::SessionArchive { session } => session::archive(tx, &session),
        Request::Import { path, text } => session::import(tx, &path, &text),
        Request::Purge { session } => session::purge(tx, &session),
        Request::Mcp { call, refused } => {
            // The caller named and the action applied in one transaction: the action is the
            // request it stands for, made for that agent.
            let (caller, request) = mcp::call(tx, *call, refused)?;
            Ok(match handle(tx, request)? {
                Outcome::Reply(reply) => Reply::Mcp { caller, reply }.into(),
                Outcome::Park { wait, .. } => Outcome::Park {
                    wait,
                    caller: caller.map(Box::new),
                },
                other => other,
            })
        }
        Request::Todos { agent, items } => mcp::todos(tx, &agent, items),
        Request::FileRestored(report) => {
            crate::ops::violation::restored(tx, &report);
            Ok(Reply::FileRestored(*report).into())
        }
    }
}
