//! A project: where a request goes (`router`, the request types), its actor (the only owner
//! of its live state and the only writer of its database, with group commit), the registry of
//! open projects, the files of its directory (`files`), the background WAL checkpointer, and
//! what runs beside the actor: the dashboard's charts (`charts`), the read pool's requests
//! (`reads`) and retention (`gc`). Imports the floors below (`cmd`, `ops`, `txn`, `radar`,
//! `proc`, `base`).

mod actor;
pub mod charts;
mod checkpointer;
mod files;
pub mod gc;
pub mod reads;
mod registry;
pub mod router;

pub use actor::{Listen, Poker, ProjectHandle, Subscription};
pub use registry::Projects;
