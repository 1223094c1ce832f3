//! One module per request kind: each validates against the live state first and only then
//! changes it through the transaction, so a refused request changes nothing.

mod agent;
mod brief;
pub mod hook;
mod lock;
pub mod managed;
mod phase;
mod query;
mod session;

pub use query::{event_query, resolve_filter};

use maos_proto::{ErrorBody, ErrorCode, Reply};
use maos_store::EventQuery;

// The router's typed project request: every arm below is one the actor applies.
use crate::router::ProjectRequest as Request;
use crate::state::Txn;

/// What handling a request produced.
pub enum Outcome {
    Reply(Reply),
    /// A lock request queued behind conflicting holders: the actor keeps the reply until the
    /// wait ends (granted, timed out, deadlock victim, or the agent finished).
    Park(maos_core::WaitId),
    /// A history read, run by the connection on the read pool (never by the actor).
    History(EventQuery),
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Reply(r)
    }
}

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
        } => session::transition(tx, session.as_deref(), op, reason, None),
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
        } => session::pause(tx, session.as_deref(), target, reason, by),
        Request::Resume {
            session,
            target,
            by,
        } => session::resume(tx, session.as_deref(), target, by),
        Request::Ps { all } => query::ps(tx.state(), all),
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
        Request::Recover { session } => managed::recover_request(tx, session.as_deref()),
        Request::Validate { session } => managed::validate(tx, session.as_deref()),
        Request::SessionArchive { session } => session::archive(tx, &session),
        Request::Import { path, text } => session::import(tx, &path, &text),
        Request::Purge { session } => session::purge(tx, &session),
    }
}

/// Work (starting agents, moving phases) happens only in a running session; the error says how
/// to get there.
pub(crate) fn require_running(s: &maos_proto::SessionRecord, what: &str) -> Result<(), ErrorBody> {
    let hint = match s.state {
        maos_core::SessionState::Running => return Ok(()),
        maos_core::SessionState::Created => "; start it with `maos session start`",
        maos_core::SessionState::Paused => "; resume it with `maos resume`",
        _ => "",
    };
    Err(invalid(format!(
        "cannot {what}: session {} is {}{hint}",
        s.id, s.state
    )))
}

pub(crate) fn invalid(e: impl std::fmt::Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::InvalidTransition, e.to_string())
}

/// The id of the session a handler answered with (for handlers that build on others).
pub(crate) fn session_of(o: Result<Outcome, ErrorBody>) -> Result<maos_core::SessionId, ErrorBody> {
    match o? {
        Outcome::Reply(Reply::Session(s)) => Ok(s.id),
        _ => Err(ErrorBody::new(ErrorCode::Internal, "expected a session")),
    }
}

/// The id of the agent a handler answered with.
pub(crate) fn agent_of(o: Result<Outcome, ErrorBody>) -> Result<maos_core::AgentId, ErrorBody> {
    match o? {
        Outcome::Reply(Reply::Agent(a)) => Ok(a.id),
        _ => Err(ErrorBody::new(ErrorCode::Internal, "expected an agent")),
    }
}

pub(crate) fn bad(msg: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::BadRequest, msg)
}
