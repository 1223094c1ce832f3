//! What a handler produces: an [`Outcome`], and the replies several handlers share (a leaf of
//! the handlers' floor: handlers never call each other, they share these).

use maos_core::{AgentId, SessionId};
use maos_proto::{ErrorBody, ErrorCode, Reply};
use maos_store::EventQuery;

use crate::txn::state::Txn;

/// What handling a request produced.
pub enum Outcome {
    /// Boxed: a reply is large (a whole session), the other outcomes are small, and outcomes
    /// are moved through the batch's list of answers.
    Reply(Box<Reply>),
    /// A lock request queued behind conflicting holders: the actor keeps the reply until the
    /// wait ends (granted, timed out, deadlock victim, or the agent finished). `caller`: an MCP
    /// call's caller, which the grant's answer names (`Reply::Mcp`).
    Park {
        wait: maos_core::WaitId,
        caller: Option<Box<maos_proto::McpCaller>>,
    },
    /// A history read, run by the connection on the read pool (never by the actor). Boxed, as
    /// a reply is: a query is large (its filters).
    History(Box<EventQuery>),
}

impl From<Reply> for Outcome {
    fn from(r: Reply) -> Self {
        Outcome::Reply(Box::new(r))
    }
}

/// The session, as the reply to a request that changed it.
pub(crate) fn session_reply(tx: &Txn<'_>, id: &SessionId) -> Result<Outcome, ErrorBody> {
    let s = tx.state().session(id).cloned().ok_or_else(|| {
        ErrorBody::new(ErrorCode::Internal, "session vanished while being changed")
    })?;
    Ok(Reply::Session(Box::new(s)).into())
}

/// The agent, as the reply to a request that changed it.
pub(crate) fn agent_reply(tx: &Txn<'_>, id: &AgentId) -> Result<Outcome, ErrorBody> {
    let a = tx
        .state()
        .agent(id)
        .cloned()
        .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "agent vanished"))?;
    Ok(Reply::Agent(Box::new(a)).into())
}
