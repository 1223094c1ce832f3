//! Messages and the views they carry, one concern per module: the handshake and envelopes
//! (`hello`), requests, replies, views and event filters. The records (sessions, agents, events)
//! are [`maos_core::record`]'s and the briefing [`maos_core::brief`]'s, re-exported here; like
//! them, every field here is part of the public contract (the `--json` shapes): add fields with
//! `#[serde(default)]`, never rename.

mod event;
mod hello;
mod hook;
mod kept;
mod reply;
pub mod req;
mod view;

pub use event::*;
pub use hello::*;
pub use hook::*;
pub use kept::*;
pub use maos_core::brief::{
    Blocker, BlockerKind, BriefAgent, BriefDep, BriefFact, BriefPhase, BriefWork, Briefing,
    FactSource,
};
pub use maos_core::record::{
    AgentRecord, AgentTodos, Cli, ContextUsage, ErrorRecord, EventRecord, HistoryEntry, LockView,
    Note, NoteKind, PauseInfo, ProcessInfo, ProcessRef, PsLock, SessionRecord, Todo,
};
pub use reply::*;
pub use req::{AgentExit, LockWait, McpAction, McpCall, McpEvidence, Request, Target};
pub use view::*;
