//! The conflict radar's notes (`crate::radar`): each a `radar_conflict` or `radar_cleared`
//! event on the session of the agent it is told to, while that session is live here.

use maos_proto::{ErrorBody, Reply};

use super::{Handle, Outcome};
use crate::radar::Note;
use crate::txn::state::Txn;

/// Not on the wire: the project's radar hands its notes to the actor.
impl Handle for Vec<Note> {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        for n in *self {
            if tx.state().session(&n.session).is_some() {
                tx.event(Some(&n.session), Some(&n.agent), n.kind, n.data);
            }
        }
        Ok(Reply::Done.into())
    }
}
