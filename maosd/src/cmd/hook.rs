//! `maos hook`: an agent CLI's hook event, answered for the CLI (see `crate::ops::hook`).

use maos_proto::{ErrorBody, Reply};

use super::Outcome;
use crate::base::hookcall::Hook;
use crate::ops::hook::Hooked;
use crate::txn::state::Txn;

/// Apply a hook call (`ProjectRequest::Hook`; it creates its project's state: an agent CLI's
/// first call starts maos's work there). A hook is deliberately not a [`super::Handle`]: the
/// connection works on it before the actor does (its paths placed, its budget and fail policy,
/// its fleet routing), which it finds only as the router's hook variant; a hook boxed as any
/// other request would skip all of that, and without an `impl Handle` it cannot be.
pub fn apply_hook(tx: &mut Txn<'_>, hook: Hook) -> Result<Outcome, ErrorBody> {
    Ok(match crate::ops::hook::hook(tx, hook)? {
        Hooked::Answer(answer) => Reply::Hook(answer).into(),
        // A git command waiting for its turn at the index: the connection turns the grant
        // into the hook's answer (conn.rs).
        Hooked::Wait(wait) => Outcome::Park { wait, caller: None },
    })
}
