//! What a plan is: its types and bounds (the parent module reads, checks and writes them).

use serde::{Deserialize, Serialize};

use crate::Strategy;
use crate::spec::{AgentSpec, RunPolicy};

/// The longest `objective`, `role` or `task`, in bytes.
pub const MAX_TEXT: usize = 4096;
/// The longest agent name, in bytes.
pub const MAX_NAME: usize = 64;
/// The most `retries` a plan may ask for (per agent or in `[failure]`).
pub const MAX_RETRIES: u32 = 10;

/// The placeholders a command may use.
pub const PLACEHOLDERS: &[&str] = &[
    "task",
    "agent_id",
    "session_id",
    "claude_session_id",
    "workdir",
    "name",
    "role",
    "attempt",
];

/// A session plan: what a plan file describes, checked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Plan {
    /// What the session is for.
    pub objective: String,
    /// How pending agents are started.
    pub strategy: Strategy,
    /// The phase names, in order (trimmed); may be empty.
    #[serde(default)]
    pub phases: Vec<String>,
    /// What happens when an agent fails, retries, parallelism, cancel grace.
    #[serde(default)]
    pub policy: RunPolicy,
    /// The agents, in file order; at least one.
    pub agents: Vec<AgentSpec>,
}

/// A plan file that cannot be used: where (1-based line and column, in characters) and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("line {line}, column {column}: {message}")]
pub struct PlanError {
    /// 1-based line.
    pub line: usize,
    /// 1-based column, in characters.
    pub column: usize,
    /// What is wrong, and usually how to fix it.
    pub message: String,
}

/// What is wrong with one of a plan's agents on the machine that runs it (a command not
/// found, a workdir outside the project): the key (`command`, `resume_command`, `workdir`)
/// and the message. The facts come from the caller; this crate does no I/O.
pub type MachineIssue = (&'static str, String);

impl Plan {
    /// The index of the first phase with this (trimmed) name.
    pub(super) fn phase_index(&self, name: &str) -> Option<usize> {
        self.phases.iter().position(|p| p.trim() == name.trim())
    }
}
