//! Session requests: create, activate, transitions, pause and resume, archive, import, purge.

use maos_core::SessionId;
use maos_proto::{ErrorBody, Reply, Target, req};

use super::{Handle, Outcome, agent_reply, session_reply};
use crate::ops::bad;
use crate::ops::pause::{self, Paused};
use crate::ops::session as ops;
use crate::txn::state::{Named, Txn};

impl Handle for req::SessionCreate {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let req::SessionCreate {
            objective,
            strategy,
            phases,
        } = *self;
        let id = ops::create(tx, objective, strategy, phases)?;
        session_reply(tx, &id)
    }

    fn creates_project(&self) -> bool {
        true
    }
}

impl Handle for req::SessionActivate {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let id = tx.state().resolve_session(Some(&self.session))?.id.clone();
        ops::activate(tx, &id);
        session_reply(tx, &id)
    }
}

impl Handle for req::SessionTransition {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        let id = tx.state().resolve_session(r.session.as_deref())?.id.clone();
        ops::transition(tx, &id, r.op, r.reason, None)?;
        session_reply(tx, &id)
    }
}

impl Handle for req::Pause {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        set_paused(tx, r.session.as_deref(), r.target, true, r.reason, r.by)
    }
}

impl Handle for req::Resume {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        set_paused(tx, r.session.as_deref(), r.target, false, None, r.by)
    }
}

/// `maos pause` (`pause`) and `maos resume` of a session, an agent or a phase.
fn set_paused(
    tx: &mut Txn<'_>,
    name: Option<&str>,
    target: Target,
    pause: bool,
    reason: Option<String>,
    by: Option<String>,
) -> Result<Outcome, ErrorBody> {
    // `maos pause` once every window has ended: the session they worked in is over, and the
    // next window would start a new one; that one is made now, paused, to hold it.
    if pause
        && name.is_none()
        && matches!(target, Target::Session)
        && tx.state().active().is_none_or(|a| a.state.is_terminal())
    {
        let id = crate::ops::hook::hold_next_window(tx, reason, by)?;
        return session_reply(tx, &id);
    }
    let st = tx.state();
    let (sid, target) = match (name, target) {
        // `--agent` without a session: the agent's own session (the active one first, for a
        // plan name), not only the active one.
        (None, Target::Agent(agent)) => {
            let a = st.resolve_agent(&agent, None)?;
            (a.session_id.clone(), Target::Agent(a.id.to_string()))
        }
        // `maos pause NAME`: a session, or one agent.
        (name, Target::Session) => match st.resolve_target(name)? {
            Named::Session(s) => (s.id.clone(), Target::Session),
            Named::Agent(a) => (a.session_id.clone(), Target::Agent(a.id.to_string())),
        },
        (name, target) => (st.resolve_session(name)?.id.clone(), target),
    };
    match pause::set_paused(tx, &sid, target, pause, reason, by)? {
        Paused::Session => session_reply(tx, &sid),
        // The change is the agent's: answer with the agent, not its whole session.
        Paused::Agent(id) => agent_reply(tx, &id),
    }
}

impl Handle for req::SessionArchive {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let id = tx.state().resolve_session(Some(&self.session))?.id.clone();
        let record = ops::archive(tx, &id)?;
        Ok(Reply::Session(Box::new(record)).into())
    }
}

/// The connection checked first that the database has none of its ids.
impl Handle for req::Import {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let id = ops::import(tx, &self.path, &self.text)?;
        crate::ops::recovery::after_import(tx, &id)?;
        session_reply(tx, &id)
    }
}

/// `maos gc` deletes a finished session after exporting it (the full id only).
impl Handle for req::Purge {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let id = SessionId::parse(&self.session).map_err(|e| bad(e.to_string()))?;
        ops::purge(tx, &id)?;
        Ok(Reply::Done.into())
    }
}
