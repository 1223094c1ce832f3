//! `maos restore-file`, once the connection wrote the kept version back (`keep.rs`): recorded
//! (`file_restored`). Not on the wire as such: the connection hands its report to the actor.

use maos_proto::{ErrorBody, FileRestoreReport, Reply};

use super::{Handle, Outcome};
use crate::txn::state::Txn;

impl Handle for FileRestoreReport {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        crate::ops::violation::restored(tx, &self);
        Ok(Reply::FileRestored(*self).into())
    }
}
