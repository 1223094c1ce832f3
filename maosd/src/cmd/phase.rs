//! Phase requests.

use maos_proto::{ErrorBody, req};

use super::{Handle, Outcome, session_reply};
use crate::txn::state::Txn;

impl Handle for req::PhaseTransition {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let r = *self;
        let sid = tx.state().resolve_session(r.session.as_deref())?.id.clone();
        crate::ops::phase::transition(tx, &sid, r.phase.as_deref(), r.op, r.artifacts)?;
        session_reply(tx, &sid)
    }
}

/// `maos phase add NAME`.
impl Handle for req::PhaseAdd {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let sid = tx
            .state()
            .resolve_session(self.session.as_deref())?
            .id
            .clone();
        crate::ops::phase::add(tx, &sid, &self.name)?;
        session_reply(tx, &sid)
    }
}
