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
mod radar;
mod reply;
mod session;

pub use query::{event_query, resolve_filter};
pub use reply::Outcome;
pub(crate) use reply::{agent_reply, session_reply};

use maos_core::{AgentId, LockPath};
use maos_proto::{ErrorBody, McpAction, McpCall, McpCaller, Reply};

use crate::router::{Keyed, ProjectRequest as Request};
use crate::state::Txn;

/// The agent a request names, by id or prefix: resolved here, once, and passed down as its id.
fn agent(tx: &Txn<'_>, name: &str) -> Result<AgentId, ErrorBody> {
    Ok(tx.state().resolve_agent(name, None)?.id.clone())
}

/// A live agent a request names (one that may hold locks), as its id.
fn live(tx: &Txn<'_>, name: &str) -> Result<AgentId, ErrorBody> {
    Ok(crate::ops::lock::live_agent(tx.state(), name)?.id.clone())
}

/// An MCP tool's action for its caller (`None`: maos cannot tell who calls, and the action
/// needs no one), by the handlers of the request it stands for. `key`: its path's key.
fn act(
    tx: &mut Txn<'_>,
    caller: Option<&McpCaller>,
    action: McpAction,
    key: Option<LockPath>,
) -> Result<Outcome, ErrorBody> {
    let internal = |what| ErrorBody::new(maos_proto::ErrorCode::Internal, what);
    // `needs_caller` said which actions come here without one.
    let who =
        || caller.ok_or_else(|| internal("an MCP action that needs its caller came without one"));
    let key = || key.ok_or_else(|| internal("an MCP lock action came without its path's key"));
    let alive =
        |tx: &Txn<'_>, c: &McpCaller| crate::ops::lock::live(tx.state(), &c.agent).map(|_| ());
    match action {
        McpAction::LockAcquire(lock) => {
            let c = who()?;
            alive(tx, c)?;
            lock::acquire(tx, &c.agent, &lock, key()?)
        }
        McpAction::LockRelease(_) => lock::release(tx, Some(&who()?.agent), &key()?, false, None),
        McpAction::LockRenew => {
            let c = who()?;
            alive(tx, c)?;
            lock::heartbeat(tx, &c.agent)
        }
        McpAction::LockCheck { mode, .. } => {
            lock::check(tx.state(), caller.map(|c| &c.agent), key()?, mode)
        }
        McpAction::Progress { items } => mcp::todos(tx, &who()?.agent, items),
        // The caller's session, whichever is active.
        McpAction::Note { kind, text } => {
            let c = who()?;
            brief::note_as(tx, &c.session, Some(&c.agent), kind, &text)
        }
        McpAction::Brief => brief::brief_of(tx.state(), caller.map(|c| &c.session), tx.now)
            .map(|b| Reply::Brief(Box::new(b)).into()),
    }
}

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
        Request::LockAcquire(Keyed { req, key }) => {
            let holder = live(tx, &req.agent)?;
            lock::acquire(tx, &holder, &req.lock, key)
        }
        Request::LockRelease(Keyed { req, key }) => {
            let holder = req.agent.map(|a| agent(tx, &a)).transpose()?;
            lock::release(tx, holder.as_ref(), &key, req.force, req.by)
        }
        Request::LockReleaseAll(r) => lock::release_all(tx, &agent(tx, &r.agent)?),
        Request::LockList(r) => lock::list(tx.state(), r.session.as_deref()),
        Request::LockCheck(Keyed { req, key }) => {
            let holder = req.agent.map(|a| agent(tx, &a)).transpose()?;
            lock::check(tx.state(), holder.as_ref(), key, req.mode)
        }
        Request::Heartbeat(r) => lock::heartbeat(tx, &live(tx, &r.agent)?),
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
        Request::Mcp { call, key } => {
            // The caller named and the action applied in one transaction, by the handlers of
            // the request it stands for, for that agent. A path that did not resolve is
            // refused once the caller is named.
            let McpCall { caller, action } = *call;
            let caller = mcp::caller(tx, caller, action.needs_caller())?;
            let key = key?;
            Ok(match act(tx, caller.as_ref(), action, key)? {
                Outcome::Reply(reply) => Reply::Mcp { caller, reply }.into(),
                Outcome::Park { wait, .. } => Outcome::Park {
                    wait,
                    caller: caller.map(Box::new),
                },
                other => other,
            })
        }
        Request::Todos(r) => mcp::todos(tx, &agent(tx, &r.agent)?, r.items),
        Request::RadarNotes(notes) => radar::record(tx, notes),
        Request::FileRestored(report) => {
            crate::ops::violation::restored(tx, &report);
            Ok(Reply::FileRestored(*report).into())
        }
    }
}
