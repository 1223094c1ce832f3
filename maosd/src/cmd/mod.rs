//! The request handlers: each turns one request into calls of the operations floor
//! (`crate::ops`) and shapes the reply. Each request's struct implements [`Handle`] next to its
//! handler, in the module of its kind; the router boxes it for the actor, so a new request is
//! its struct, its `impl Handle` here, and its line in `Route::of`. Handlers never call each
//! other; what two of them share is an operation, or one of the reply helpers. A request is all
//! or nothing whatever a handler does: the actor runs it in `Txn::atomic`.

mod agent;
pub(crate) mod brief;
mod handler;
mod hook;
mod lock;
mod managed;
mod mcp;
mod phase;
mod query;
mod radar;
mod reply;
mod restore;
mod session;

pub use handler::{Handle, Keyed};
pub(crate) use handler::{agent_id, live_id};
pub use hook::apply_hook;
pub use query::{event_query, resolve_filter};
pub use reply::Outcome;
pub(crate) use reply::{agent_reply, session_reply};

use maos_core::LockPath;
use maos_proto::{ErrorBody, McpAction, McpCall, McpCaller, Reply};

use crate::txn::state::Txn;

/// An MCP tool call (`Request::Mcp`) with its action's path resolved to a key, or why it does
/// not resolve: the caller is still named then, so that the hook's record of the call answers
/// it (see `cmd::mcp`).
#[derive(Clone)]
pub struct Mcp {
    pub call: Box<McpCall>,
    pub key: Result<Option<LockPath>, ErrorBody>,
}

impl Handle for Mcp {
    /// The caller named and the action applied in one transaction, by the handlers of the
    /// request it stands for, for that agent. A path that did not resolve is refused once the
    /// caller is named.
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let Mcp { call, key } = *self;
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

    fn acquire(&self) -> Option<&maos_proto::req::Acquire> {
        match &self.call.action {
            McpAction::LockAcquire(a) => Some(a),
            _ => None,
        }
    }
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
