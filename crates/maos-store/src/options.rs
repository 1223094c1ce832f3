//! How a project database is opened: durability, a size cap, and the fleet's PostgreSQL.

use std::str::FromStr;

use crate::pg::Fleet;

/// Frames (pages) the WAL may hold (~16 MiB) before the write connection checkpoints it
/// itself, off the daemon's runtime thread (the bound on the WAL; the background checkpointer
/// normally keeps it far shorter): past it, the next commit runs on tokio's blocking pool and
/// checkpoints there (`sqlite_write.rs`). SQLite's own autocheckpoint, which ran inside the
/// commit that passed it, is off.
pub const WAL_MAX_FRAMES: u32 = 4000;

/// How hard a commit tries to reach the disk (SQLite's `synchronous` pragma, in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Survives any crash or `kill -9` of the daemon; a power loss may lose the last commits.
    #[default]
    Normal,
    /// Also survives power loss, at one fsync per commit.
    Full,
}

impl Synchronous {
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Normal => "normal",
            Synchronous::Full => "full",
        }
    }
}

impl FromStr for Synchronous {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Ok(Synchronous::Normal),
            "full" => Ok(Synchronous::Full),
            other => Err(format!(
                "unknown synchronous level {other:?} (expected normal or full)"
            )),
        }
    }
}

/// Options for opening a project database.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    pub synchronous: Synchronous,
    /// Cap the database size in pages (SQLite `max_page_count`); `None` = no cap.
    pub max_page_count: Option<u64>,
    /// Fleet mode: every project lives in this PostgreSQL instead of its own SQLite file.
    pub fleet: Option<std::sync::Arc<Fleet>>,
}
