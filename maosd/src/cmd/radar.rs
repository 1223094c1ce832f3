//! The conflict radar's notes (`crate::radar`): each a `radar_conflict` or `radar_cleared`
//! event on the session of the agent it is told to, while that session is live here.

use maos_proto::{ErrorBody, Reply};

use super::reply::Outcome;
use crate::radar::Note;
use crate::state::Txn;

pub fn record(tx: &mut Txn<'_>, notes: Vec<Note>) -> Result<Outcome, ErrorBody> {
    for n in notes {
        if tx.state().session(&n.session).is_some() {
            tx.event(Some(&n.session), Some(&n.agent), n.kind, n.data);
        }
    }
    Ok(Reply::Done.into())
}
