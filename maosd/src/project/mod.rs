//! A project: its actor (the only owner of its live state and the only writer of its
//! database, with group commit), the registry of open projects, the files of its directory,
//! and the background WAL checkpointer.

mod actor;
mod checkpointer;
mod registry;

pub use actor::{Listen, Poker, ProjectHandle, Subscription};
pub use registry::Projects;
