//! Events: which of a project's events `maos events` and subscriptions want. (The event itself,
//! [`EventRecord`], is a record of the core.)

use maos_core::Ts;
use serde::{Deserialize, Serialize};

/// Filter for `events` and subscriptions. Empty = everything in the project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub since: Option<Ts>,
    /// Only events with a larger sequence number.
    #[serde(default)]
    pub after_seq: Option<u64>,
}
