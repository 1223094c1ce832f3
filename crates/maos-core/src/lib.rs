//! The maos domain model: ids, state machines, the workflow (phase list), the spawn tree,
//! progress and the lock table. Pure: no I/O, no clock reads, no randomness — time and uuids
//! are passed in.

pub mod brief;
pub mod duration;
pub mod events;
pub mod export;
pub mod fnv;
pub mod gantt;
pub mod graph;
pub mod ids;
pub mod lock;
pub mod mcp;
pub mod patch;
pub mod pathglob;
pub mod plan;
pub mod progress;
pub mod project_key;
pub mod radar;
pub mod record;
pub mod recovery;
pub mod schedule;
pub mod spec;
pub mod state;
pub mod term;
pub mod text;
pub mod time;
pub mod validate;
pub mod waitfor;
pub mod words;
pub mod workflow;

pub use graph::*;
pub use ids::*;
pub use lock::*;
pub use progress::*;
pub use state::*;
pub use time::*;
pub use workflow::*;
