//! Phase requests.

use maos_proto::{ErrorBody, req};

use super::{Outcome, session_reply};
use crate::state::Txn;

pub fn transition(tx: &mut Txn<'_>, r: req::PhaseTransition) -> Result<Outcome, ErrorBody> {
    let sid = tx.state().resolve_session(r.session.as_deref())?.id.clone();
    crate::ops::phase::transition(tx, &sid, r.phase.as_deref(), r.op, r.artifacts)?;
    session_reply(tx, &sid)
}

/// `maos phase add NAME`.
pub fn add(tx: &mut Txn<'_>, r: req::PhaseAdd) -> Result<Outcome, ErrorBody> {
    let sid = tx.state().resolve_session(r.session.as_deref())?.id.clone();
    crate::ops::phase::add(tx, &sid, &r.name)?;
    session_reply(tx, &sid)
}
