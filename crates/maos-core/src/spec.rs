//! How maos runs a managed session's agents: each agent's spec and the session's run policy.
//! A plan file ([`crate::plan`]) is read into these; the session and agent records carry them
//! (so the records need nothing of the plan-file parser).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

/// The default `grace_ms`: how long a cancelled agent gets between SIGTERM and SIGKILL.
pub const DEFAULT_GRACE_MS: u64 = 5000;

/// One agent of a plan.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    /// Unique in the plan; `[A-Za-z0-9_.-]{1,64}`.
    pub name: String,
    /// The agent's role (the file's default is the name).
    pub role: String,
    /// What the agent should do (`{task}` in its command).
    pub task: String,
    /// The argv that starts it: non-empty, `command[0]` non-empty. May use the
    /// [`PLACEHOLDERS`](crate::plan::PLACEHOLDERS).
    pub command: Vec<String>,
    /// The argv that resumes an interrupted run, if it can be resumed.
    #[serde(default)]
    pub resume_command: Option<Vec<String>>,
    /// Names of other agents of the plan that must complete before this one starts.
    #[serde(default)]
    pub depends_on: Vec<String>,
    /// 0-based index into [`Plan::phases`](crate::plan::Plan::phases) (the file writes a name,
    /// or a number from 1).
    #[serde(default)]
    pub phase: Option<u32>,
    /// Pipeline stage, from 1 (strategy pipeline only).
    #[serde(default)]
    pub stage: Option<u32>,
    /// Extra environment variables.
    #[serde(default)]
    pub env: BTreeMap<String, String>,
    /// The working directory as written: relative to the project root, or absolute.
    #[serde(default)]
    pub workdir: Option<String>,
    /// Overrides [`RunPolicy::retries`] for this agent.
    #[serde(default)]
    pub retries: Option<u32>,
}

impl AgentSpec {
    /// Extra attempts after a failed run: the agent's own `retries`, else the policy's.
    pub fn retries(&self, policy: &RunPolicy) -> u32 {
        self.retries.unwrap_or(policy.retries)
    }
}

/// The `[failure]` section: failure handling, retries, parallelism, cancel grace.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default)]
pub struct RunPolicy {
    /// What a failed agent does to the session (default [`OnFailure::FailSession`]).
    pub on_failure: OnFailure,
    /// Extra attempts after a failed run (default 0).
    pub retries: u32,
    /// At most this many managed agents running at once (default: no limit).
    pub max_parallel: Option<u32>,
    /// Cancel: SIGTERM, then SIGKILL after this many milliseconds (default 5000).
    pub grace_ms: u64,
}

impl Default for RunPolicy {
    fn default() -> Self {
        Self {
            on_failure: OnFailure::FailSession,
            retries: 0,
            max_parallel: None,
            grace_ms: DEFAULT_GRACE_MS,
        }
    }
}

/// What a failed agent (retries exhausted) does to its session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// The session fails (plan files: `policy = "fail"`).
    FailSession,
    /// The agents that depend on it are cancelled, the rest goes on; the session fails when it
    /// ends (or at the end of the phase) (plan files: `policy = "continue"`).
    Continue,
}

impl OnFailure {
    /// The word plan files use: `fail` or `continue`.
    pub fn plan_word(self) -> &'static str {
        match self {
            Self::FailSession => "fail",
            Self::Continue => "continue",
        }
    }
}
