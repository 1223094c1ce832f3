//! Phase requests.

use maos_core::PhaseOp;
use maos_proto::ErrorBody;
use serde_json::Value;

use super::{Outcome, session_reply};
use crate::state::Txn;

pub fn transition(
    tx: &mut Txn<'_>,
    session: Option<&str>,
    phase: Option<&str>,
    op: PhaseOp,
    artifacts: Value,
) -> Result<Outcome, ErrorBody> {
    let sid = tx.state().resolve_session(session)?.id.clone();
    crate::ops::phase::transition(tx, &sid, phase, op, artifacts)?;
    session_reply(tx, &sid)
}

/// `maos phase add NAME`.
pub fn add(tx: &mut Txn<'_>, session: Option<&str>, name: &str) -> Result<Outcome, ErrorBody> {
    let sid = tx.state().resolve_session(session)?.id.clone();
    crate::ops::phase::add(tx, &sid, name)?;
    session_reply(tx, &sid)
}
