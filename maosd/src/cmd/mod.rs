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

/// Apply one project request: each handler takes its request's struct whole.
pub fn handle(tx: &mut Txn<'_>, body: Request) -> Result<Outcome, ErrorBody> {
    match body {
        Request::SessionCreate(r) => session::create(tx, r),
        Request::SessionList(r) => query::session_list(tx.state(), r.all),
        Request::SessionShow(r) => query::session_show(tx.state(), r.session.as_deref()),
        Request::SessionActivate(r) => session::activate(tx, &r.session),
        Request::SessionTransition(r) => session::transition(tx, r),
        Request::AgentRegister(r) => agent::register(tx, r),
        Request::AgentTransition(r) => managed::agent_op(tx, r),
        Request::AgentList(r) => query::agent_list(tx.state(), r.session.as_deref()),
        Request::PhaseAdd(r) => phase::add(tx, r),
        Request::PhaseTransition(r) => phase::transition(tx, r),
        Request::Pause(r) => {
            session::set_paused(tx, r.session.as_deref(), r.target, true, r.reason, r.by)
        }
        Request::Resume(r) => {
            session::set_paused(tx, r.session.as_deref(), r.target, false, None, r.by)
        }
        Request::Ps(r) => query::ps(tx.state(), r.all, tx.now),
        Request::Events(r) => query::events(tx.state(), &r.filter, r.limit),
        Request::Status(r) => query::status(tx.state(), r.session.as_deref(), tx.now),
        Request::LockAcquire(r) => lock::acquire(tx, &r.agent, &r.path, r.mode, r.wait, r.ttl_ms),
        Request::LockRelease(r) => lock::release(tx, r.agent.as_deref(), &r.path, r.force, r.by),
        Request::LockReleaseAll(r) => lock::release_all(tx, &r.agent),
        Request::LockList(r) => lock::list(tx.state(), r.session.as_deref()),
        Request::LockCheck(r) => lock::check(tx.state(), r.agent.as_deref(), &r.path, r.mode),
        Request::Heartbeat(r) => lock::heartbeat(tx, &r.agent),
        Request::Hook(call) => hook::hook(tx, *call),
        Request::Brief(r) => brief::brief(tx.state(), r.session.as_deref(), tx.now)
            .map(|b| Reply::Brief(Box::new(b)).into()),
        Request::Note(r) => brief::note(tx, r),
        Request::AgentExited(exit) => managed::exited(tx, *exit),
        Request::SessionFromPlan(r) => managed::from_plan(tx, &r.path, &r.text, r.start),
        Request::AgentLog(r) => managed::log(tx, &r.agent),
        Request::Recover(r) => managed::recover(tx, r.session.as_deref()),
        Request::Retry(r) => managed::retry(tx, r.target.as_deref(), r.by),
        Request::Validate(r) => managed::validate(tx, r.session.as_deref()),
        Request::SessionArchive(r) => session::archive(tx, &r.session),
        Request::Import(r) => session::import(tx, &r.path, &r.text),
        Request::Purge(r) => session::purge(tx, &r.session),
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
        Request::Todos(r) => mcp::todos(tx, &r.agent, r.items),
        Request::FileRestored(report) => {
            crate::ops::violation::restored(tx, &report);
            Ok(Reply::FileRestored(*report).into())
        }
    }
}
