//! Persistence for one maos project: SQLite (the default, a file per project) or a fleet's
//! PostgreSQL (`pg`, DESIGN.md §10).
//!
//! The daemon's project actor owns a [`Store`]. On SQLite: one write connection (the only
//! writer of the file) and a small read-only pool for history. Writes arrive as a [`Batch`] (everything one
//! group commit changed) and are applied in one transaction with one statement per table
//! that has rows: each statement takes its rows as a single JSON array and expands it with
//! `json_each`, and a batch's SQL is one of a handful of fixed texts (one per shape: which
//! tables have rows), each kept prepared.

mod engine;
mod options;
mod pg;
mod pg_radar;
mod quarantine;
mod rows;
mod sqlite;
mod sqlite_write;
mod types;

pub use engine::{Reader, Store};
pub use options::{StoreOptions, Synchronous, WAL_MAX_FRAMES};
pub use pg::{
    Fleet, FleetStatus, FleetWaits, Fresh, Member, Notifier, PgReader, PgStore, channel, redact,
};
pub use pg_radar::RadarVersion;
pub use quarantine::{BadRow, Quarantined, quarantine};
pub use rows::{from_us, to_us};
pub use sqlite::{
    Checkpointer, SqliteReader, SqliteStore, check_backup, checkpoints, integrity_check,
};
pub use types::*;
