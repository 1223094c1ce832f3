//! `maos hook`: an agent CLI's hook event, answered for the CLI (see `crate::ops::hook`).

use maos_proto::{ErrorBody, Reply};

use super::Outcome;
use crate::hookcall::Hook;
use crate::ops::hook::Hooked;
use crate::state::Txn;

pub fn hook(tx: &mut Txn<'_>, call: Hook) -> Result<Outcome, ErrorBody> {
    Ok(match crate::ops::hook::hook(tx, call)? {
        Hooked::Answer(answer) => Reply::Hook(answer).into(),
        // A git command waiting for its turn at the index: the connection turns the grant
        // into the hook's answer (conn.rs).
        Hooked::Wait(wait) => Outcome::Park { wait, caller: None },
    })
}
