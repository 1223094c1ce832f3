//! File locks between agents of one project: lock modes and paths, the conflict rule, and the
//! [`LockTable`] (holders, FIFO wait queue, leases, fencing tokens, deadlock detection).
//!
//! Pure: no I/O and no clock reads; every operation that depends on time takes `now`.
//!
//! - [`LockPath`]: a lexically normalized project-relative path.
//! - [`overlaps`] / [`conflicts`]: the scope and conflict rules.
//! - [`LockTable`]: the authority the project actor keeps in memory.

mod graph;
mod index;
mod model;
mod path;
mod table;
#[cfg(test)]
mod tests;

pub use model::*;
pub use path::{LockPath, LockPathError, MAX_PATH, check_path_len};
pub use table::{LockSavepoint, LockTable, RENEW_SLACK};
