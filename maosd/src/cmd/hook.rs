//! `maos hook`: an agent CLI's hook event, answered for the CLI (see `crate::ops::hook`).

use maos_proto::{ErrorBody, Reply};

use super::{Handle, Outcome};
use crate::base::hookcall::Hook;
use crate::ops::hook::Hooked;
use crate::txn::state::Txn;

impl Handle for Hook {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        Ok(match crate::ops::hook::hook(tx, *self)? {
            Hooked::Answer(answer) => Reply::Hook(answer).into(),
            // A git command waiting for its turn at the index: the connection turns the grant
            // into the hook's answer (conn.rs).
            Hooked::Wait(wait) => Outcome::Park { wait, caller: None },
        })
    }

    /// An agent CLI's first call starts maos's work in a project.
    fn creates_project(&self) -> bool {
        true
    }
}
