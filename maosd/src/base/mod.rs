//! The floor every other stands on: leaves with no floor of their own below them. Errors
//! turned into the wire's, the protocol version, the capped log, lock paths, connection lanes,
//! the configuration (which reads lanes, lock paths and the log's limits), a hook call as the
//! daemon holds it, and a shell command's writes. They import nothing of the daemon but each
//! other.

pub mod config;
pub mod error;
pub mod hookcall;
pub mod lanes;
pub mod lockpath;
pub mod logfile;
pub mod shellcmd;
pub mod version;
