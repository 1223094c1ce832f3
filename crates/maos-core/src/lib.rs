//! The maos domain model: ids, state machines, the workflow (phase list), the spawn tree,
//! progress and the lock table. Pure: no I/O, no clock reads, no randomness — time and uuids
//! are passed in.

pub mod brief;
pub mod duration;
pub mod events;
pub mod export;
pub mod gantt;
pub mod graph;
pub mod ids;
pub mod lock;
pub mod mcp;
pub mod patch;
pub mod plan;
pub mod progress;
pub mod project_key;
pub mod record;
pub mod recovery;
pub mod schedule;
pub mod spec;
pub mod state;
pub mod term;
pub mod validate;
pub mod waitfor;
pub mod words;
pub mod workflow;

pub use graph::*;
pub use ids::*;
pub use lock::*;
pub use progress::*;
pub use state::*;
pub use workflow::*;

/// FNV-1a, 64 bits, of `bytes`: the stable short hash maos names things by (a project root's
/// state directory, a project's notification channel, the Gantt fold's code). Never changes
/// between versions.
pub const fn fnv1a64(bytes: &[u8]) -> u64 {
    let mut h: u64 = 0xcbf2_9ce4_8422_2325;
    let mut i = 0;
    while i < bytes.len() {
        h ^= bytes[i] as u64;
        h = h.wrapping_mul(0x0000_0100_0000_01b3);
        i += 1;
    }
    h
}

/// A UTC timestamp.
pub type Ts = chrono::DateTime<chrono::Utc>;

/// A moment as people read it everywhere maos prints one: date, time and its zone, always UTC
/// (`2026-11-22 10:01:02 UTC`), never a bare clock time. An age or a remaining time, when
/// shown too, follows in parentheses (`(4m ago)`, `(in 3m)`).
pub fn utc(t: Ts) -> String {
    t.format("%F %T UTC").to_string()
}

/// [`utc`] to the millisecond, for the timeline (`2026-11-22 10:01:02.345 UTC`).
pub fn utc_ms(t: Ts) -> String {
    t.format("%F %T%.3f UTC").to_string()
}
