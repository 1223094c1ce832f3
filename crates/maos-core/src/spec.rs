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
    /// The files it declares it will change: project-relative paths and globs
    /// ([`crate::pathglob`]). Agents whose files overlap do not run at once (see [`Overlap`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub files: Vec<String>,
    /// Whether it may run at the same time as agents whose declared files overlap its own.
    #[serde(default, skip_serializing_if = "Overlap::is_wait")]
    pub overlap: Overlap,
    /// The argv that lands its work once it completed (merges its branch, say): maos runs it
    /// as an agent of its own, `NAME.land`, in the same workdir, with the same placeholders.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub land: Option<Vec<String>>,
    /// Set on the landing agent maos adds for an agent with `land`: that agent's name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lands: Option<String>,
}

/// An agent's `overlap`: what it does when its declared files overlap another agent's.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Overlap {
    /// It does not run at the same time as an agent whose files overlap its own (the default).
    #[default]
    Wait,
    /// It runs regardless, and no agent waits for it.
    Allow,
}

impl Overlap {
    /// The default (left out of JSON).
    pub fn is_wait(&self) -> bool {
        *self == Overlap::Wait
    }

    /// The word plan files use.
    pub fn plan_word(self) -> &'static str {
        match self {
            Overlap::Wait => "wait",
            Overlap::Allow => "allow",
        }
    }
}

/// The suffix of the name of the landing agent maos adds for an agent with `land`.
pub const LAND_SUFFIX: &str = ".land";

/// The `[landing]` section's `serialise`: which landing agents never run at the same time.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Serialise {
    /// Landings follow the other rules only (the default).
    #[default]
    None,
    /// Two landings never run at once when their agents' declared files overlap.
    Overlapping,
    /// Two landings never run at once.
    All,
}

impl Serialise {
    /// The default (left out of JSON).
    pub fn is_none(&self) -> bool {
        *self == Serialise::None
    }

    /// The word plan files use.
    pub fn plan_word(self) -> &'static str {
        match self {
            Serialise::None => "none",
            Serialise::Overlapping => "overlapping",
            Serialise::All => "all",
        }
    }
}

impl AgentSpec {
    /// The landing agent maos adds after this one when it has `land`: `NAME.land`, which
    /// depends on it and runs its `land` command in the same workdir, phase and stage, with
    /// the same environment and retries; it carries the agent's `files` (for `[landing]
    /// serialise = "overlapping"`) and is never held by the agents' own overlap rule.
    pub fn landing(&self) -> Option<AgentSpec> {
        let land = self.land.clone()?;
        Some(AgentSpec {
            name: format!("{}{LAND_SUFFIX}", self.name),
            role: "landing".into(),
            task: format!("Land the work of {}", self.name),
            command: land,
            resume_command: None,
            depends_on: vec![self.name.clone()],
            phase: self.phase,
            stage: self.stage,
            env: self.env.clone(),
            workdir: self.workdir.clone(),
            retries: self.retries,
            files: self.files.clone(),
            overlap: Overlap::Allow,
            land: None,
            lands: Some(self.name.clone()),
        })
    }

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
    /// Which landing agents never run at once (the plan's `[landing] serialise`).
    #[serde(skip_serializing_if = "Serialise::is_none")]
    pub landing: Serialise,
}

impl Default for RunPolicy {
    fn default() -> Self {
        Self {
            on_failure: OnFailure::FailSession,
            retries: 0,
            max_parallel: None,
            grace_ms: DEFAULT_GRACE_MS,
            landing: Serialise::None,
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
