//! Processes: the facts of a managed agent's process (`procs`), the effects a committed change
//! has on processes (`run`), the check of what a plan asks of this machine (`plancheck`), and
//! `maosd supervise`, the supervisor process itself (`supervise`). Below the transaction, which
//! carries `run`'s effects; imports only `base`.

pub mod plancheck;
pub mod procs;
pub mod run;
pub mod supervise;
