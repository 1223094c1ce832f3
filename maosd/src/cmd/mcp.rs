//! The requests of `maos mcp` that no other command sends: a tool call made for the agent
//! whose call it is, and an agent's task list.

use maos_core::record::Todo;
use maos_proto::{ErrorBody, McpAction, McpCall, McpCaller, Reply, req};

use super::Outcome;
use crate::ops::hook;
use crate::router::ProjectRequest;
use crate::state::Txn;

/// Whose MCP call this is (`maos_core::mcp`'s rules), and the request its action stands for,
/// made for that agent. The hook's record of the call is taken whatever the action then does:
/// it answers this call once, and a refused call left unanswered would name the wrong agent
/// for the next call with the same claim. A path that did not resolve (`refused`) is refused
/// once the caller is named; an action that needs no caller goes on without one when maos
/// cannot tell.
pub fn call(
    tx: &mut Txn<'_>,
    call: McpCall,
    refused: Option<ErrorBody>,
) -> Result<(Option<McpCaller>, ProjectRequest), ErrorBody> {
    let McpCall { caller: ev, action } = call;
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
    let caller = match found {
        Ok(c) => Some(c),
        Err(e) if action.needs_caller() => return Err(e),
        Err(_) => None,
    };
    if let Some(e) = refused {
        return Err(e);
    }
    let agent = caller.as_ref().map(|c| c.agent.to_string());
    let session = caller.as_ref().map(|c| c.session.to_string());
    // `needs_caller` said which actions come here without one.
    let named = || {
        agent.clone().ok_or_else(|| {
            ErrorBody::new(
                maos_proto::ErrorCode::Internal,
                "an MCP action that needs its caller came without one",
            )
        })
    };
    let request = match action {
        McpAction::LockAcquire {
            path,
            cwd,
            mode,
            wait,
            ttl_ms,
        } => ProjectRequest::LockAcquire(req::LockAcquire {
            agent: named()?,
            path,
            cwd,
            mode,
            wait,
            ttl_ms,
        }),
        McpAction::LockRelease { path, cwd } => ProjectRequest::LockRelease(req::LockRelease {
            agent: Some(named()?),
            path,
            cwd,
            force: false,
            by: None,
        }),
        McpAction::LockRenew => ProjectRequest::Heartbeat(req::Heartbeat { agent: named()? }),
        McpAction::LockCheck { path, cwd, mode } => ProjectRequest::LockCheck(req::LockCheck {
            agent: agent.clone(),
            path,
            cwd,
            mode,
        }),
        McpAction::Progress { items } => ProjectRequest::Todos(req::Todos {
            agent: named()?,
            items,
        }),
        // The caller's session, whichever is active.
        McpAction::Note { kind, text } => ProjectRequest::Note(req::Note {
            session: session.clone(),
            agent: Some(named()?),
            kind,
            text,
        }),
        McpAction::Brief => ProjectRequest::Brief(req::Brief { session }),
    };
    Ok((caller, request))
}

pub fn todos(tx: &mut Txn<'_>, agent: &str, items: Vec<Todo>) -> Result<Outcome, ErrorBody> {
    let items = maos_core::mcp::check_todos(items).map_err(crate::ops::bad)?;
    let a = crate::ops::lock::live_agent(tx.state(), agent)?;
    let (id, sid) = (a.id.clone(), a.session_id.clone());
    hook::set_todos(tx, &sid, &id, items);
    Ok(Reply::Done.into())
}
