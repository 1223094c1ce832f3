//! `maos agent register`: names resolved to ids within the session, then the operation.

use maos_core::AgentId;
use maos_proto::{ErrorBody, req};

use super::{Handle, Outcome, agent_reply};
use crate::txn::state::Txn;

impl Handle for req::AgentRegister {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        register(tx, *self)
    }
}

fn register(tx: &mut Txn<'_>, r: req::AgentRegister) -> Result<Outcome, ErrorBody> {
    let req::AgentRegister {
        session,
        role,
        task,
        depends_on,
        parent,
    } = r;
    crate::ops::agent::check_text("role", &role)?;
    crate::ops::agent::check_text("task", &task)?;
    let st = tx.state();
    let sid = st.resolve_session(session.as_deref())?.id.clone();
    let mut deps: Vec<AgentId> = Vec::new();
    for d in &depends_on {
        let a = st.resolve_agent(d, Some(&sid)).map_err(|e| {
            ErrorBody::new(
                e.code,
                format!("dependency {d}: {} (in session {sid})", e.message),
            )
        })?;
        if !deps.contains(&a.id) {
            deps.push(a.id.clone());
        }
    }
    let parent = parent
        .map(|p| {
            st.resolve_agent(&p, Some(&sid))
                .map(|a| a.id.clone())
                .map_err(|e| ErrorBody::new(e.code, format!("parent {p}: {}", e.message)))
        })
        .transpose()?;
    let id = crate::ops::agent::register(tx, &sid, role, task, deps, parent)?;
    agent_reply(tx, &id)
}
