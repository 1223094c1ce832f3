//! The scenarios, one module per group; each runs its own daemon and returns its rows.

pub mod activation;
pub mod agent_start;
pub mod connections;
pub mod dash;
pub mod data;
#[cfg(feature = "etcd")]
pub mod etcd;
pub mod fleet;
pub mod hook_concurrent;
pub mod hook_shell;
pub mod locks;
pub mod mcp;
pub mod pg;
pub mod process;
pub mod radar;
pub mod radar_corpus;
pub mod requests;
pub mod startup;
pub mod top;

use maos_tests::client::Res;

use crate::opts::Opts;
use crate::report::Metric;

/// One scenario: the options and the `synchronous` mode to run the daemon with.
pub type Scenario = fn(&Opts, &str) -> Res<Vec<Metric>>;
