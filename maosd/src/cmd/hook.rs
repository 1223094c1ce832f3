//! `maos hook`: an agent CLI's hook event, answered for the CLI (see `crate::ops::cli`).

use maos_proto::{ErrorBody, HookCall, Reply};

use super::Outcome;
use crate::state::Txn;

pub fn hook(tx: &mut Txn<'_>, call: HookCall) -> Result<Outcome, ErrorBody> {
    let answer = crate::ops::cli::hook(tx, call)?;
    Ok(Reply::Hook(answer).into())
}
