//! What every request's handler is, and what handlers share at their edge: the [`Handle`]
//! trait, implemented for each request's struct next to its handler (`cmd/<kind>.rs`), a lock
//! request with its path's key ([`Keyed`]), and names resolved to ids once. A leaf of the
//! handlers' floor.

use maos_core::{AgentId, LockPath};
use maos_proto::{ErrorBody, Reply, req};

use super::reply::Outcome;
use crate::txn::state::Txn;

/// A request the project's actor applies: the wire's struct (or what the router made of it, a
/// [`Keyed`] lock request), taken whole by its handler. The router boxes it into the actor's
/// request; the defaults fit most requests.
pub trait Handle: dyn_clone::DynClone + Send + 'static {
    /// Apply it, in the request's own step of the batch's transaction (`Txn::atomic`).
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody>;

    /// Whether it may create its project's state when the daemon has none: only what starts
    /// work there (a session, a plan, an agent CLI's hook call). Every other request on a
    /// project with nothing recorded is answered "no maos project" and creates nothing, so
    /// that reading never leaves an empty project behind.
    fn creates_project(&self) -> bool {
        false
    }

    /// What it answers for a project with nothing recorded (a list: empty), without creating
    /// it; None when it needs something there.
    fn empty_answer(&self) -> Option<Reply> {
        None
    }

    /// The lock it asks for, when it asks for one (a lock acquire, MCP's `lock_acquire`).
    /// Whether it may wait for it is decided once, from its `wait`, for every request
    /// (`ops::lock::may_wait`, asked by `ProjectRequest::waits`): a request only says what it
    /// asks.
    fn acquire(&self) -> Option<&req::Acquire> {
        None
    }

    /// The one lock path it changes, when a fleet batch of such requests may take that path's
    /// turn instead of the project's (lock acquires and releases).
    fn path_turn(&self) -> Option<&LockPath> {
        None
    }

    /// What it asks of this machine (a plan's programs and directories), checked by the
    /// connection before the actor sees it: it may read files, so the actor never runs it.
    fn check_here(&self, _root: &str) -> Result<(), ErrorBody> {
        Ok(())
    }
}

dyn_clone::clone_trait_object!(Handle);

/// A lock request with the key its path resolved to on arrival: the actor works on keys, and
/// the path is never parsed again.
#[derive(Clone, Debug)]
pub struct Keyed<T> {
    pub req: T,
    pub key: LockPath,
}

/// The agent a request names, by id or prefix: resolved at the handler's edge, once, and
/// passed down as its id.
pub fn agent_id(tx: &Txn<'_>, name: &str) -> Result<AgentId, ErrorBody> {
    Ok(tx.state().resolve_agent(name, None)?.id.clone())
}

/// A live agent a request names (one that may hold locks), as its id.
pub fn live_id(tx: &Txn<'_>, name: &str) -> Result<AgentId, ErrorBody> {
    Ok(crate::ops::lock::live_agent(tx.state(), name)?.id.clone())
}
