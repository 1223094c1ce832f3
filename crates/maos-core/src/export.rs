//! The session file of `maos export` / `maos import` (our own versioned JSON): one session with
//! everything the database holds about it. The store writes it, the wire carries it, the client
//! saves it; reading other tools' files is the wire crate's (`maos_proto::export`).

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::Ts;
use crate::record::{EventRecord, SessionRecord};

/// `format` of our own files.
pub const FORMAT: &str = "maos-session";
/// The newest `version` this build writes and reads.
pub const VERSION: u32 = 1;

/// One session with everything the database holds about it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionExport {
    pub format: String,
    pub version: u32,
    pub exported_at: Ts,
    pub session: SessionRecord,
    /// Its timeline, oldest first (`seq` as in the project it comes from).
    pub events: Vec<EventRecord>,
    pub checkpoints: Vec<ExportedCheckpoint>,
}

/// A checkpoint row; `state` is the snapshot itself (JSON), not a string of it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ExportedCheckpoint {
    /// The last event it includes (in the exported timeline).
    pub seq: u64,
    pub ts: Ts,
    pub reason: String,
    pub state: Value,
}
