//! The requests of `maos mcp` that no other command sends: whose tool call it is, and an
//! agent's task list.

use maos_core::mcp::ClaimKey;
use maos_core::record::{ProcessRef, Todo};
use maos_proto::{ErrorBody, Reply};

use super::Outcome;
use crate::ops::cli;
use crate::state::Txn;

pub fn caller(
    tx: &mut Txn<'_>,
    tool_use_id: Option<String>,
    claim: Option<ClaimKey>,
    maos_agent: Option<String>,
    window: Option<ProcessRef>,
) -> Result<Outcome, ErrorBody> {
    let (agent, rule) = cli::mcp_caller(
        tx,
        tool_use_id.as_deref(),
        claim.as_ref(),
        maos_agent.as_deref(),
        window,
    )?;
    let session = tx
        .state()
        .agent(&agent)
        .map(|a| a.session_id.clone())
        .ok_or_else(|| ErrorBody::new(maos_proto::ErrorCode::Internal, "agent vanished"))?;
    Ok(Reply::Caller {
        agent,
        session,
        rule,
    }
    .into())
}

pub fn todos(tx: &mut Txn<'_>, agent: &str, items: Vec<Todo>) -> Result<Outcome, ErrorBody> {
    let items = maos_core::mcp::check_todos(items).map_err(crate::ops::bad)?;
    let a = crate::ops::lock::live_agent(tx.state(), agent)?;
    let (id, sid) = (a.id.clone(), a.session_id.clone());
    cli::set_todos(tx, &sid, &id, items);
    Ok(Reply::Done.into())
}
