//! Plan files: the TOML that describes a managed session — its objective, strategy, phases,
//! failure policy and agents — read into a [`Plan`], with every mistake reported at its line and
//! column ([`PlanError`]).
//!
//! # The format
//!
//! ```toml
//! objective = "Add rate limiting to the login endpoint"
//! strategy = "adaptive"               # parallel (default) | sequential | adaptive | pipeline
//! phases = ["design", "implement"]    # optional; when given, every agent names its phase
//!
//! [failure]                           # optional
//! policy = "fail"                     # fail (default): a failed agent fails the session
//!                                     # continue: cancel what depends on it, the rest goes on
//! retries = 1                         # extra attempts after a failed run (default 0, at most 10)
//! max_parallel = 4                    # at most this many agents run at once (default: no limit)
//! grace_ms = 5000                     # cancel: SIGTERM, then SIGKILL this much later (default 5000)
//!
//! [landing]                           # optional
//! serialise = "overlapping"           # none (default) | overlapping | all: see Rules
//!
//! [[agent]]
//! name = "architect"                  # unique; letters, digits, '_', '.', '-'; at most 64 bytes
//! role = "architect"                  # default: the name
//! task = "Design the token bucket; write the design to docs/rate-limit.md"
//! command = ["claude", "-p", "{task}", "--session-id", "{claude_session_id}", "--output-format", "json"]
//! resume_command = ["claude", "-p", "Continue where you left off", "--resume", "{claude_session_id}", "--output-format", "json"]
//! phase = "design"                    # a phase name, or its number counted from 1
//!
//! [[agent]]
//! name = "builder"
//! role = "implementer"
//! task = "Implement the token bucket described in docs/rate-limit.md"
//! command = ["claude", "-p", "{task}", "--session-id", "{claude_session_id}", "--output-format", "json"]
//! depends_on = ["architect"]          # starts once these agents completed (not under parallel)
//! phase = 2                           # the second phase, "implement"
//! workdir = "services/auth"           # relative to the project root, or absolute; inside it
//! retries = 2                         # overrides [failure] retries for this agent
//! env = { RUST_LOG = "info" }
//! files = ["services/auth/src/limit.rs", "services/auth/tests/**"]   # what it will change
//! land = ["git", "-C", "{workdir}", "push", "origin", "HEAD:main"]   # run once it completed
//!
//! [[agent]]
//! name = "qa"
//! role = "tester"
//! task = "Run the auth test suite"
//! command = ["cargo", "test", "-p", "auth"]
//! depends_on = ["builder"]
//! phase = "implement"
//! # stage = 1                         # strategy pipeline only: the agent's stage, from 1
//! ```
//!
//! Required: `objective`, at least one `[[agent]]`, and each agent's `name`, `task` and
//! `command`. Unknown keys are errors, so a typo never goes unnoticed.
//!
//! # Rules
//!
//! - `command` and `resume_command` are argv arrays, run without a shell. Their elements may use
//!   the [`PLACEHOLDERS`] as `{task}`, `{claude_session_id}`, ...; `{{` and `}}` stand for
//!   literal braces. An unknown placeholder is an error.
//! - `depends_on` names other agents of the plan; cycles are refused, naming the cycle. Under
//!   `parallel` every agent starts at once, so `depends_on` is refused there.
//! - `sequential` runs the agents one at a time in file order: an agent may only depend on
//!   agents above it.
//! - `pipeline` groups agents in stages (`stage = 1, 2, ...`, required for every agent); stage
//!   *k* starts when every agent of a lower stage ended. An agent may only depend on agents of
//!   lower stages. `stage` is refused under any other strategy.
//! - With `phases`, the phases run in order and every agent names its phase (by name, or by
//!   number from 1: `phase = 1` is the first phase); an agent may not depend on an agent of a
//!   later phase. Without `phases`, `phase` is refused.
//! - `objective`, `role` and `task` are at most [`MAX_TEXT`] bytes; `retries` at most
//!   [`MAX_RETRIES`]; `max_parallel` at least 1.
//! - `files` declares what an agent will change: paths and globs relative to the project root
//!   (`*`, `?`, and `**` as a whole segment; a path covers everything under it; no `..`, no
//!   absolute path, at most [`MAX_FILES`](crate::pathglob::MAX_FILES) of at most
//!   [`MAX_PATTERN`](crate::pathglob::MAX_PATTERN) bytes, a name of at most 255 bytes with at
//!   most 8 `*`, at most 8 `**`; see [`crate::pathglob`]). Two agents
//!   whose files overlap never run at the same time, whatever the strategy: the later one in
//!   file order waits until the other ended, unless one of them says `overlap = "allow"`
//!   (default `"wait"`). [`Plan::overlaps`] lists the pairs; comparing every two agents' files
//!   may take at most [`MAX_WORK`](crate::pathglob::MAX_WORK) steps, or `maos run` refuses
//!   the plan ([`compare`]).
//! - `land` is an argv like `command` (same placeholders): once the agent completed, maos runs
//!   it as an agent of its own, `NAME.land` (so no other agent may be named so), in the same
//!   workdir. `[landing] serialise = "all"` never runs two landings at once;
//!   `"overlapping"` never runs two at once whose agents' files overlap; landings start in file
//!   order among those ready.
//!
//! Parsing is pure: [`parse`] takes the file's text, the caller reads the file.

pub use crate::spec::{
    AgentSpec, DEFAULT_GRACE_MS, LAND_SUFFIX, OnFailure, Overlap, RunPolicy, Serialise,
};

mod check;
mod model;
mod overlaps;
mod placeholders;
mod position;
mod read;
mod spanned;
#[cfg(test)]
mod tests;
mod write;

use check::{Loc, check};
use placeholders::{Piece, expand_one, scan};
use position::{Spans, error_at, line_column};
use read::read;

pub use model::*;
pub use overlaps::{FileOverlap, FilePairs, TooMuchWork, check_declared, compare};

/// Read and check a plan file's text. The first mistake found is returned, at the line and
/// column of the offending key or value (line 1, column 1 for something missing at the top).
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    parse_with(text, |_, _| Ok(()))
}

/// [`parse`], then `machine` for each agent (with its index), after every check of the file
/// itself passed: its first issue is returned at the line and column of the key it names.
pub fn parse_with(
    text: &str,
    machine: impl Fn(usize, &AgentSpec) -> Result<(), MachineIssue>,
) -> Result<Plan, PlanError> {
    let mut spans = Spans::default();
    let plan = read(text, &mut spans).map_err(|bad| error_at(text, bad.span.start, bad.message))?;
    let first_at = |j: usize| {
        let (line, _) = line_column(text, spans.at(Loc::Agent(j)).start);
        format!("the [[agent]] at line {line}")
    };
    check(&plan, &first_at)
        .map_err(|issue| error_at(text, spans.at(issue.at).start, issue.message))?;
    for (i, a) in plan.agents.iter().enumerate() {
        if let Err((key, message)) = machine(i, a) {
            return Err(error_at(
                text,
                spans.at(Loc::AgentKey(i, key)).start,
                message,
            ));
        }
    }
    Ok(plan)
}

impl Plan {
    /// The semantic checks of [`parse`] again, without positions (for a plan received over the
    /// wire): the first problem, as the message `parse` would give.
    pub fn validate(&self) -> Result<(), String> {
        check(self, &|j| format!("agent #{}", j + 1)).map_err(|issue| issue.message)
    }
}

/// Substitute `{name}` placeholders in every argv element; `{{` and `}}` are literal braces; an
/// unknown or unclosed placeholder is an error naming it. `lookup` returns the value (`None`: no
/// value, an error).
pub fn expand(
    argv: &[String],
    lookup: impl Fn(&str) -> Option<String>,
) -> Result<Vec<String>, String> {
    argv.iter().map(|arg| expand_one(arg, &lookup)).collect()
}

/// Whether any argv element uses `{placeholder}`.
pub fn uses(argv: &[String], placeholder: &str) -> bool {
    argv.iter().any(|arg| {
        let mut found = false;
        // A malformed element still counts the placeholders before the mistake.
        let _ = scan(arg, |piece| {
            found |= matches!(piece, Piece::Hole(name) if name == placeholder);
            Ok(())
        });
        found
    })
}
