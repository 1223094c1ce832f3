//! The requests of `maos mcp` that no other command sends: whose tool call it is (its action is
//! applied by the handlers of the request it stands for, `cmd::Mcp`), and an agent's task
//! list.

use maos_core::AgentId;
use maos_core::record::Todo;
use maos_proto::{ErrorBody, McpCaller, McpEvidence, Reply, req};

use super::{Handle, Outcome, agent_id};
use crate::ops::hook;
use crate::txn::state::Txn;

/// Whose MCP call this is (`maos_core::mcp`'s rules). The hook's record of the call is taken
/// whatever the action then does: it answers this call once, and a refused call left
/// unanswered would name the wrong agent for the next call with the same claim. An action that
/// needs no caller (`needed` false) goes on without one when maos cannot tell.
pub fn caller(
    tx: &mut Txn<'_>,
    ev: McpEvidence,
    needed: bool,
) -> Result<Option<McpCaller>, ErrorBody> {
    let found = hook::mcp_caller(
        tx,
        ev.tool_use_id.as_deref(),
        ev.claim.as_ref(),
        ev.maos_agent.as_deref(),
        ev.window,
    )
    .and_then(|(agent, rule)| {
        let session = tx
            .state()
            .agent(&agent)
            .map(|a| a.session_id.clone())
            .ok_or_else(|| ErrorBody::new(maos_proto::ErrorCode::Internal, "agent vanished"))?;
        Ok(McpCaller {
            agent,
            session,
            rule,
        })
    });
    match found {
        Ok(c) => Ok(Some(c)),
        Err(e) if needed => Err(e),
        Err(_) => Ok(None),
    }
}

impl Handle for req::Todos {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        let agent = agent_id(tx, &r.agent)?;
        todos(tx, &agent, r.items)
    }
}

/// An agent's whole task list (`todos`, and MCP's progress tool for its caller): a live agent's.
pub fn todos(tx: &mut Txn<'_>, agent: &AgentId, items: Vec<Todo>) -> Result<Outcome, ErrorBody> {
    let items = maos_core::mcp::check_todos(items).map_err(crate::ops::bad)?;
    let a = crate::ops::lock::live(tx.state(), agent)?;
    let (id, sid) = (a.id.clone(), a.session_id.clone());
    hook::set_todos(tx, &sid, &id, items);
    Ok(Reply::Done.into())
}
