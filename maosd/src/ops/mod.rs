//! The operations floor: every change to a project's sessions, agents, phases, locks and
//! managed processes, made on a [`Txn`](crate::txn::state::Txn). Operations take ids and domain
//! values, return ids and domain values (never a wire reply), validate before they change
//! anything, and may build on each other; the request handlers above them (`crate::cmd`) only
//! resolve names, call operations and shape replies.
//!
//! An operation that fails part-way needs no care of its own to change nothing: the actor runs
//! every request in [`Txn::atomic`](crate::txn::state::Txn::atomic).

pub mod agent;
pub mod brief;
pub mod effects;
pub mod hook;
pub mod lock;
pub mod pause;
pub mod phase;
pub mod process;
pub mod recovery;
mod require;
pub mod session;
pub mod violation;

pub use crate::base::error::bad_request as bad;
