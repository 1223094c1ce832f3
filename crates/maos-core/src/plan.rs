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
//! workdir = "services/auth"           # relative to the project root, or absolute
//! retries = 2                         # overrides [failure] retries for this agent
//! env = { RUST_LOG = "info" }
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
//!
//! Parsing is pure: [`parse`] takes the file's text, the caller reads the file.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::ops::Range;

use serde::de::{self, Deserializer, MapAccess, SeqAccess, Visitor};
use serde::{Deserialize, Serialize};

use crate::Strategy;
pub use crate::spec::{AgentSpec, DEFAULT_GRACE_MS, OnFailure, RunPolicy};

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

/// Read and check a plan file's text. The first mistake found is returned, at the line and
/// column of the offending key or value (line 1, column 1 for something missing at the top).
pub fn parse(text: &str) -> Result<Plan, PlanError> {
    let mut spans = Spans::default();
    let plan = read(text, &mut spans).map_err(|bad| error_at(text, bad.span.start, bad.message))?;
    let first_at = |j: usize| {
        let (line, _) = line_column(text, spans.at(Loc::Agent(j)).start);
        format!("the [[agent]] at line {line}")
    };
    check(&plan, &first_at)
        .map_err(|issue| error_at(text, spans.at(issue.at).start, issue.message))?;
    Ok(plan)
}

impl Plan {
    /// The semantic checks of [`parse`] again, without positions (for a plan received over the
    /// wire): the first problem, as the message `parse` would give.
    pub fn validate(&self) -> Result<(), String> {
        check(self, &|j| format!("agent #{}", j + 1)).map_err(|issue| issue.message)
    }

    /// The plan as a plan file: [`parse`] of the result gives the plan back (for a valid plan).
    /// Phases are written by name, defaults are written out.
    pub fn to_toml(&self) -> String {
        use fmt::Write as _;
        let mut out = String::new();
        // Writing to a String cannot fail.
        let _ = writeln!(out, "objective = {}", quote(&self.objective));
        let _ = writeln!(out, "strategy = {}", quote(self.strategy.as_str()));
        if !self.phases.is_empty() {
            let _ = writeln!(out, "phases = {}", array(&self.phases));
        }
        let p = &self.policy;
        let _ = writeln!(out, "\n[failure]");
        let _ = writeln!(out, "policy = {}", quote(p.on_failure.plan_word()));
        let _ = writeln!(out, "retries = {}", p.retries);
        if let Some(m) = p.max_parallel {
            let _ = writeln!(out, "max_parallel = {m}");
        }
        let _ = writeln!(out, "grace_ms = {}", p.grace_ms);
        for a in &self.agents {
            let _ = writeln!(out, "\n[[agent]]");
            let _ = writeln!(out, "name = {}", quote(&a.name));
            let _ = writeln!(out, "role = {}", quote(&a.role));
            let _ = writeln!(out, "task = {}", quote(&a.task));
            let _ = writeln!(out, "command = {}", array(&a.command));
            if let Some(r) = &a.resume_command {
                let _ = writeln!(out, "resume_command = {}", array(r));
            }
            if !a.depends_on.is_empty() {
                let _ = writeln!(out, "depends_on = {}", array(&a.depends_on));
            }
            if let Some(ph) = a.phase {
                let by_name = usize::try_from(ph).ok().and_then(|i| {
                    self.phases
                        .get(i)
                        .filter(|n| self.phase_index(n) == Some(i))
                });
                match by_name {
                    Some(name) => {
                        let _ = writeln!(out, "phase = {}", quote(name));
                    }
                    None => {
                        let _ = writeln!(out, "phase = {}", u64::from(ph) + 1);
                    }
                }
            }
            if let Some(s) = a.stage {
                let _ = writeln!(out, "stage = {s}");
            }
            if let Some(w) = &a.workdir {
                let _ = writeln!(out, "workdir = {}", quote(w));
            }
            if let Some(r) = a.retries {
                let _ = writeln!(out, "retries = {r}");
            }
            if !a.env.is_empty() {
                let pairs: Vec<String> = a
                    .env
                    .iter()
                    .map(|(k, v)| format!("{} = {}", key(k), quote(v)))
                    .collect();
                let _ = writeln!(out, "env = {{ {} }}", pairs.join(", "));
            }
        }
        out
    }

    /// The index of the first phase with this (trimmed) name.
    fn phase_index(&self, name: &str) -> Option<usize> {
        self.phases.iter().position(|p| p.trim() == name.trim())
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

// ---------------------------------------------------------------------------------------------
// Placeholders

/// A piece of an argv element: literal text, or a placeholder's name.
enum Piece<'a> {
    Text(&'a str),
    Hole(&'a str),
}

/// Split `s` into pieces, in order; `{{`/`}}` become the text `{`/`}`.
fn scan<'a>(s: &'a str, mut on: impl FnMut(Piece<'a>) -> Result<(), String>) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (mut i, mut text_from) = (0, 0);
    // Braces are ASCII, so every index sliced at below is a char boundary.
    while let Some(&b) = bytes.get(i) {
        let doubled = bytes.get(i + 1) == Some(&b);
        match b {
            b'{' | b'}' if doubled => {
                on(Piece::Text(&s[text_from..=i]))?;
                i += 2;
                text_from = i;
            }
            b'{' => {
                on(Piece::Text(&s[text_from..i]))?;
                let rest = &s[i + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(format!(
                        "unclosed placeholder `{{{rest}` in {s:?}; a placeholder is written \
                         {{name}}, a literal brace {{{{"
                    ));
                };
                on(Piece::Hole(&rest[..end]))?;
                i += end + 2;
                text_from = i;
            }
            b'}' => {
                return Err(format!(
                    "unmatched `}}` in {s:?}; write `}}}}` for a literal brace"
                ));
            }
            _ => i += 1,
        }
    }
    on(Piece::Text(&s[text_from..]))
}

fn expand_one(arg: &str, lookup: &impl Fn(&str) -> Option<String>) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    scan(arg, |piece| {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Hole(name) => match lookup(name) {
                Some(v) => out.push_str(&v),
                None if PLACEHOLDERS.contains(&name) => {
                    return Err(format!("placeholder {{{name}}} has no value here"));
                }
                None => return Err(unknown_placeholder(name)),
            },
        }
        Ok(())
    })?;
    Ok(out)
}

fn unknown_placeholder(name: &str) -> String {
    let known: Vec<String> = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect();
    let hint = match closest(name, PLACEHOLDERS.iter().copied()) {
        Some(c) => format!(" (did you mean {{{c}}}?)"),
        None => String::new(),
    };
    format!(
        "unknown placeholder {{{name}}}{hint}; known: {}; write {{{{ and }}}} for literal braces",
        known.join(", ")
    )
}

/// Check an argv element's placeholders against [`PLACEHOLDERS`].
fn check_placeholders(arg: &str) -> Result<(), String> {
    expand_one(arg, &|name: &str| {
        PLACEHOLDERS.contains(&name).then(String::new)
    })
    .map(|_| ())
}

// ---------------------------------------------------------------------------------------------
// Semantic checks, shared by `parse` (with positions) and `Plan::validate` (without).

/// Where an issue is, in terms of the plan; `parse` maps it to a position in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Loc {
    /// The start of the file.
    Top,
    /// A top-level key's value.
    Key(&'static str),
    /// The n-th element of `phases`.
    Phase(usize),
    /// A key of `[failure]`.
    Failure(&'static str),
    /// The n-th `[[agent]]` table (its header).
    Agent(usize),
    /// A key's value in the n-th `[[agent]]`.
    AgentKey(usize, &'static str),
    /// The j-th element of an array (or the j-th `env` key, in name order) in the n-th agent.
    AgentItem(usize, &'static str, usize),
}

impl Loc {
    /// The enclosing place, used when the file does not have this one (a missing key).
    fn parent(self) -> Option<Loc> {
        match self {
            Loc::Top => None,
            Loc::Key(_) => Some(Loc::Top),
            Loc::Phase(_) => Some(Loc::Key("phases")),
            Loc::Failure(_) => Some(Loc::Key("failure")),
            Loc::Agent(_) => Some(Loc::Key("agent")),
            Loc::AgentKey(i, _) => Some(Loc::Agent(i)),
            Loc::AgentItem(i, k, _) => Some(Loc::AgentKey(i, k)),
        }
    }
}

/// A semantic problem: where, and the message.
struct Issue {
    at: Loc,
    message: String,
}

fn issue(at: Loc, message: impl Into<String>) -> Issue {
    Issue {
        at,
        message: message.into(),
    }
}

fn too_long(text: &str, what: &str, at: Loc) -> Result<(), Issue> {
    if text.len() > MAX_TEXT {
        return Err(issue(
            at,
            format!(
                "{what} is {} bytes long; the limit is {MAX_TEXT}",
                text.len()
            ),
        ));
    }
    Ok(())
}

fn no_phases(who: &str) -> String {
    format!(
        "{who}: phase is given but the plan has no phases; add phases = [\"...\"] at the top, \
         or remove phase"
    )
}

/// Every check that needs no file positions. `first_at(j)` describes where agent `j` is (for
/// "used twice" messages).
fn check(plan: &Plan, first_at: &dyn Fn(usize) -> String) -> Result<(), Issue> {
    if plan.objective.trim().is_empty() {
        return Err(issue(
            Loc::Key("objective"),
            "objective is empty; say what this session is for",
        ));
    }
    too_long(&plan.objective, "objective", Loc::Key("objective"))?;

    let mut phase_seen: HashMap<&str, usize> = HashMap::new();
    for (p, name) in plan.phases.iter().enumerate() {
        let name = name.trim();
        if name.is_empty() {
            return Err(issue(
                Loc::Phase(p),
                format!("phase {} in phases has an empty name", p + 1),
            ));
        }
        if let Some(&q) = phase_seen.get(name) {
            return Err(issue(
                Loc::Phase(p),
                format!(
                    "phase name {name:?} appears twice in phases (phases {} and {}); phase \
                     names must be unique",
                    q + 1,
                    p + 1
                ),
            ));
        }
        phase_seen.insert(name, p);
    }

    if plan.policy.retries > MAX_RETRIES {
        return Err(issue(
            Loc::Failure("retries"),
            format!(
                "[failure] retries is {}; at most {MAX_RETRIES} are allowed",
                plan.policy.retries
            ),
        ));
    }
    if plan.policy.max_parallel == Some(0) {
        return Err(issue(
            Loc::Failure("max_parallel"),
            "[failure] max_parallel must be at least 1; leave it out for no limit",
        ));
    }

    if plan.agents.is_empty() {
        return Err(issue(
            Loc::Key("agent"),
            "the plan has no agents; add at least one [[agent]] section",
        ));
    }

    let mut index: HashMap<&str, usize> = HashMap::with_capacity(plan.agents.len());
    for (i, a) in plan.agents.iter().enumerate() {
        check_name(i, &a.name)?;
        if let Some(&j) = index.get(a.name.as_str()) {
            return Err(issue(
                Loc::AgentKey(i, "name"),
                format!(
                    "agent name {:?} is used twice; the first is {}",
                    a.name,
                    first_at(j)
                ),
            ));
        }
        index.insert(&a.name, i);
    }
    for (i, a) in plan.agents.iter().enumerate() {
        check_agent(plan, i, a, &index)?;
    }

    let graph: Vec<(&str, Vec<&str>)> = plan
        .agents
        .iter()
        .map(|a| {
            let deps = a.depends_on.iter().map(String::as_str).collect();
            (a.name.as_str(), deps)
        })
        .collect();
    if let Some(cycle) = crate::graph::find_cycle(&graph)
        && let Some(&first) = cycle.first()
    {
        let next = cycle.get(1).copied().unwrap_or(first);
        let i = index.get(first).copied().unwrap_or(0);
        let j = plan
            .agents
            .get(i)
            .and_then(|a| a.depends_on.iter().position(|d| d == next))
            .unwrap_or(0);
        let path: Vec<&str> = cycle.iter().copied().chain([first]).collect();
        return Err(issue(
            Loc::AgentItem(i, "depends_on", j),
            format!(
                "dependency cycle: {}; an agent starts only after the agents it depends on \
                 completed, so none of these could ever start",
                path.join(" → ")
            ),
        ));
    }

    for (i, a) in plan.agents.iter().enumerate() {
        for (j, dep) in a.depends_on.iter().enumerate() {
            let Some(&k) = index.get(dep.as_str()) else {
                continue;
            };
            let Some(b) = plan.agents.get(k) else {
                continue;
            };
            let at = Loc::AgentItem(i, "depends_on", j);
            if plan.strategy == Strategy::Sequential && k > i {
                return Err(issue(
                    at,
                    format!(
                        "agent {:?} depends on {dep:?}, which comes later in the file; under \
                         strategy sequential agents run one at a time in file order, so move \
                         {dep:?} above {:?}",
                        a.name, a.name
                    ),
                ));
            }
            if plan.strategy == Strategy::Pipeline
                && let (Some(sa), Some(sb)) = (a.stage, b.stage)
                && sb >= sa
            {
                let which = if sb == sa { "the same" } else { "a later" };
                return Err(issue(
                    at,
                    format!(
                        "agent {:?} (stage {sa}) depends on {dep:?} (stage {sb}), {which} \
                         stage; under strategy pipeline an agent may only depend on agents of \
                         lower stages",
                        a.name
                    ),
                ));
            }
            if let (Some(pa), Some(pb)) = (a.phase, b.phase)
                && pb > pa
            {
                let name = |p: u32| {
                    usize::try_from(p)
                        .ok()
                        .and_then(|p| plan.phases.get(p))
                        .map_or_else(|| format!("#{}", u64::from(p) + 1), |n| format!("{n:?}"))
                };
                return Err(issue(
                    at,
                    format!(
                        "agent {:?} (phase {}) depends on {dep:?} of the later phase {}; phases \
                         run in order, so {dep:?} cannot have completed when {:?} starts",
                        a.name,
                        name(pa),
                        name(pb),
                        a.name
                    ),
                ));
            }
        }
    }
    Ok(())
}

fn check_name(i: usize, name: &str) -> Result<(), Issue> {
    let at = Loc::AgentKey(i, "name");
    if name.is_empty() {
        return Err(issue(at, format!("[[agent]] #{}: name is empty", i + 1)));
    }
    if name.len() > MAX_NAME {
        return Err(issue(
            at,
            format!(
                "agent name {name:?} is {} bytes long; the limit is {MAX_NAME}",
                name.len()
            ),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-')))
    {
        return Err(issue(
            at,
            format!(
                "agent name {name:?} contains {c:?}; names may only use letters, digits, '_', \
                 '.' and '-'"
            ),
        ));
    }
    Ok(())
}

fn check_agent(
    plan: &Plan,
    i: usize,
    a: &AgentSpec,
    index: &HashMap<&str, usize>,
) -> Result<(), Issue> {
    let who = format!("agent {:?}", a.name);
    if a.role.trim().is_empty() {
        return Err(issue(
            Loc::AgentKey(i, "role"),
            format!("{who}: role is empty; leave it out to use the name"),
        ));
    }
    too_long(&a.role, &format!("{who}: role"), Loc::AgentKey(i, "role"))?;
    if a.task.trim().is_empty() {
        return Err(issue(
            Loc::AgentKey(i, "task"),
            format!("{who}: task is empty; say what this agent should do"),
        ));
    }
    too_long(&a.task, &format!("{who}: task"), Loc::AgentKey(i, "task"))?;

    check_argv(i, &who, "command", &a.command)?;
    if let Some(resume) = &a.resume_command {
        check_argv(i, &who, "resume_command", resume)?;
    }

    for (k, (var, value)) in a.env.iter().enumerate() {
        let at = Loc::AgentItem(i, "env", k);
        let valid = var
            .chars()
            .next()
            .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
            && var.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
        if !valid {
            return Err(issue(
                at,
                format!(
                    "{who}: env {var:?} is not a valid variable name (letters, digits and '_', \
                     not starting with a digit)"
                ),
            ));
        }
        if value.contains('\0') {
            return Err(issue(at, format!("{who}: env {var} contains a NUL byte")));
        }
    }

    if let Some(w) = &a.workdir {
        let at = Loc::AgentKey(i, "workdir");
        if w.trim().is_empty() {
            return Err(issue(
                at,
                format!("{who}: workdir is empty; leave it out to run in the project root"),
            ));
        }
        if w.contains('\0') {
            return Err(issue(at, format!("{who}: workdir contains a NUL byte")));
        }
    }

    if let Some(r) = a.retries
        && r > MAX_RETRIES
    {
        return Err(issue(
            Loc::AgentKey(i, "retries"),
            format!("{who}: retries is {r}; at most {MAX_RETRIES} are allowed"),
        ));
    }

    let n_phases = plan.phases.len();
    match a.phase {
        Some(_) if n_phases == 0 => {
            return Err(issue(Loc::AgentKey(i, "phase"), no_phases(&who)));
        }
        Some(p) if usize::try_from(p).map_or(true, |p| p >= n_phases) => {
            return Err(issue(
                Loc::AgentKey(i, "phase"),
                format!(
                    "{who}: phase index {p} is out of range; the plan has {n_phases} phases \
                     (numbered 0..={} in a plan sent to the daemon, 1..={n_phases} in a file)",
                    n_phases - 1
                ),
            ));
        }
        None if n_phases > 0 => {
            return Err(issue(
                Loc::Agent(i),
                format!(
                    "{who} has no phase; the plan has phases ({}), so every agent needs \
                     phase = \"<name>\" (or the phase's number, from 1)",
                    plan.phases.join(", ")
                ),
            ));
        }
        _ => {}
    }

    match (plan.strategy, a.stage) {
        (Strategy::Pipeline, None) => {
            return Err(issue(
                Loc::Agent(i),
                format!(
                    "{who} has no stage; under strategy pipeline every agent needs stage = 1, \
                     2, ..."
                ),
            ));
        }
        (Strategy::Pipeline, Some(0)) => {
            return Err(issue(
                Loc::AgentKey(i, "stage"),
                format!("{who}: stage 0 does not exist; stages are numbered from 1"),
            ));
        }
        (Strategy::Pipeline, Some(_)) | (_, None) => {}
        (other, Some(_)) => {
            return Err(issue(
                Loc::AgentKey(i, "stage"),
                format!(
                    "{who}: stage only applies to strategy pipeline (this plan's strategy is \
                     {other})"
                ),
            ));
        }
    }

    if plan.strategy == Strategy::Parallel && !a.depends_on.is_empty() {
        return Err(issue(
            Loc::AgentKey(i, "depends_on"),
            format!(
                "{who}: depends_on has no effect under strategy parallel (every agent starts \
                 at once); use adaptive"
            ),
        ));
    }
    for (j, dep) in a.depends_on.iter().enumerate() {
        let at = Loc::AgentItem(i, "depends_on", j);
        if *dep == a.name {
            return Err(issue(at, format!("{who} depends on itself")));
        }
        if !index.contains_key(dep.as_str()) {
            let hint = closest(dep, index.keys().copied())
                .map(|c| format!(" (did you mean {c:?}?)"))
                .unwrap_or_default();
            return Err(issue(
                at,
                format!(
                    "{who}: depends_on names {dep:?}, which is not an agent of this plan{hint}"
                ),
            ));
        }
        if a.depends_on[..j].contains(dep) {
            return Err(issue(at, format!("{who}: depends_on lists {dep:?} twice")));
        }
    }
    Ok(())
}

fn check_argv(i: usize, who: &str, key: &'static str, argv: &[String]) -> Result<(), Issue> {
    let Some(program) = argv.first() else {
        let message = if key == "command" {
            format!(
                "{who}: command is empty; give the program and its arguments, e.g. command = \
                 [\"claude\", \"-p\", \"{{task}}\"]"
            )
        } else {
            format!("{who}: {key} is empty; leave it out if the agent cannot be resumed")
        };
        return Err(issue(Loc::AgentKey(i, key), message));
    };
    if program.trim().is_empty() {
        return Err(issue(
            Loc::AgentItem(i, key, 0),
            format!("{who}: {key}[0], the program to run, is empty"),
        ));
    }
    for (j, arg) in argv.iter().enumerate() {
        let at = Loc::AgentItem(i, key, j);
        if arg.contains('\0') {
            return Err(issue(at, format!("{who}: {key}[{j}] contains a NUL byte")));
        }
        check_placeholders(arg).map_err(|m| issue(at, format!("{who}: {key}[{j}]: {m}")))?;
    }
    Ok(())
}

/// The candidate closest to `word` by edit distance, if close enough to be a typo.
fn closest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<&'a str> {
    let n = word.chars().count();
    let limit = if n <= 2 { 1 } else { (n / 3).clamp(2, 3) };
    // Sharing all but the last character ("retry", "retries") counts as one edit.
    let prefix = |c: &str| {
        let common = word
            .chars()
            .zip(c.chars())
            .take_while(|(a, b)| a == b)
            .count();
        n >= 3 && common >= n - 1
    };
    candidates
        .into_iter()
        .map(|c| (if prefix(c) { 1 } else { edit_distance(word, c) }, c))
        .filter(|&(d, _)| d <= limit)
        .min()
        .map(|(_, c)| c)
}

/// Levenshtein distance, in characters.
fn edit_distance(a: &str, b: &str) -> usize {
    let b: Vec<char> = b.chars().collect();
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    let mut cur = vec![0; b.len() + 1];
    for (i, ca) in a.chars().enumerate() {
        cur[0] = i + 1;
        for (j, cb) in b.iter().enumerate() {
            let substitute = prev[j] + usize::from(ca != *cb);
            cur[j + 1] = substitute.min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        std::mem::swap(&mut prev, &mut cur);
    }
    prev[b.len()]
}

// ---------------------------------------------------------------------------------------------
// Positions

/// Byte ranges of the places `check` can name, recorded while reading the file.
#[derive(Default)]
struct Spans(HashMap<Loc, Range<usize>>);

impl Spans {
    fn put(&mut self, at: Loc, span: Range<usize>) {
        self.0.insert(at, span);
    }

    /// The place's range, else its nearest enclosing place's, else the start of the file.
    fn at(&self, at: Loc) -> Range<usize> {
        let mut cur = Some(at);
        while let Some(loc) = cur {
            if let Some(span) = self.0.get(&loc) {
                return span.clone();
            }
            cur = loc.parent();
        }
        0..0
    }
}

/// 1-based line and column (in characters) of a byte offset.
fn line_column(text: &str, offset: usize) -> (usize, usize) {
    let mut offset = offset.min(text.len());
    while !text.is_char_boundary(offset) {
        offset -= 1;
    }
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |p| p + 1);
    let line = before.matches('\n').count() + 1;
    let column = before[line_start..].chars().count() + 1;
    (line, column)
}

fn error_at(text: &str, offset: usize, message: String) -> PlanError {
    let (line, column) = line_column(text, offset);
    PlanError {
        line,
        column,
        message: one_line(message),
    }
}

/// A message stays on one line: it quotes keys and values as the file wrote them, and a
/// quoted TOML key or string can hold a newline or other control characters.
fn one_line(message: String) -> String {
    if !message.chars().any(char::is_control) {
        return message;
    }
    message
        .chars()
        .flat_map(|c| {
            let escaped: Vec<char> = if c.is_control() {
                c.escape_default().collect()
            } else {
                vec![c]
            };
            escaped
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// TOML with positions
//
// `toml::Spanned` fails on values toml has no position for (implicit tables such as `a` in
// `a.b = 1`), so the tree below speaks serde_spanned's protocol itself: a deserializer that
// knows positions answers `deserialize_struct(SPANNED_NAME, SPANNED_FIELDS)` with a map of
// start, end and value; one that does not, answers as for any value. The names are
// serde_spanned 0.6's (the version toml 0.8 uses); `errors_table` and
// `implicit_tables_have_positions` fail if they change.

const SPANNED_NAME: &str = "$__serde_spanned_private_Spanned";
const SPANNED_START: &str = "$__serde_spanned_private_start";
const SPANNED_END: &str = "$__serde_spanned_private_end";
const SPANNED_VALUE: &str = "$__serde_spanned_private_value";
const SPANNED_FIELDS: &[&str] = &[SPANNED_START, SPANNED_END, SPANNED_VALUE];
/// The one key of the map toml presents a datetime as.
const DATETIME_FIELD: &str = "$__toml_private_datetime";

/// A TOML value.
enum Raw {
    Str(String),
    Int(i64),
    Float,
    Bool,
    Datetime,
    Array(Vec<Item>),
    Table(Vec<Entry>),
}

impl Raw {
    /// "a string", "an integer", ... for type errors.
    fn kind(&self) -> &'static str {
        match self {
            Raw::Str(_) => "a string",
            Raw::Int(_) => "an integer",
            Raw::Float => "a float",
            Raw::Bool => "a boolean",
            Raw::Datetime => "a datetime",
            Raw::Array(_) => "an array",
            Raw::Table(_) => "a table",
        }
    }
}

/// A value and its byte range.
struct Item {
    span: Range<usize>,
    raw: Raw,
}

/// A table entry: the key, its byte range, the value.
struct Entry {
    key: String,
    key_span: Range<usize>,
    value: Item,
}

/// A key, with its range when the deserializer knows it.
struct Key {
    span: Option<Range<usize>>,
    text: String,
}

/// A value, with its range when the deserializer knows it.
struct MaybeSpanned {
    span: Option<Range<usize>>,
    raw: Raw,
}

/// Read the rest of a spanned map (the start key was read): start, end, value.
fn spanned_rest<'de, A: MapAccess<'de>, T: Deserialize<'de>>(
    map: &mut A,
) -> Result<(Range<usize>, T), A::Error> {
    let start: usize = map.next_value()?;
    let mut end = start;
    let mut value = None;
    while let Some(k) = map.next_key::<String>()? {
        match k.as_str() {
            SPANNED_END => end = map.next_value()?,
            SPANNED_VALUE => value = Some(map.next_value()?),
            _ => {
                return Err(de::Error::custom(format!(
                    "unexpected key {k} in a spanned value"
                )));
            }
        }
    }
    let value = value.ok_or_else(|| de::Error::custom("a spanned value without its value"))?;
    Ok((start..end, value))
}

impl<'de> Deserialize<'de> for Key {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl<'de> Visitor<'de> for V {
            type Value = Key;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a key")
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<Key, E> {
                Ok(Key {
                    span: None,
                    text: v.to_owned(),
                })
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Key, A::Error> {
                match map.next_key::<String>()?.as_deref() {
                    Some(SPANNED_START) => {
                        let (span, text) = spanned_rest(&mut map)?;
                        Ok(Key {
                            span: Some(span),
                            text,
                        })
                    }
                    _ => Err(de::Error::custom("a key must be a string")),
                }
            }
        }
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, V)
    }
}

/// Visits any TOML value.
struct RawVisitor;

impl<'de> Visitor<'de> for RawVisitor {
    type Value = Raw;
    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("a TOML value")
    }
    fn visit_bool<E: de::Error>(self, _: bool) -> Result<Raw, E> {
        Ok(Raw::Bool)
    }
    fn visit_i64<E: de::Error>(self, v: i64) -> Result<Raw, E> {
        Ok(Raw::Int(v))
    }
    fn visit_u64<E: de::Error>(self, v: u64) -> Result<Raw, E> {
        Ok(Raw::Int(i64::try_from(v).unwrap_or(i64::MAX)))
    }
    fn visit_f64<E: de::Error>(self, _: f64) -> Result<Raw, E> {
        Ok(Raw::Float)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<Raw, E> {
        Ok(Raw::Str(v.to_owned()))
    }
    fn visit_string<E: de::Error>(self, v: String) -> Result<Raw, E> {
        Ok(Raw::Str(v))
    }
    fn visit_seq<A: SeqAccess<'de>>(self, mut seq: A) -> Result<Raw, A::Error> {
        let mut items = Vec::new();
        while let Some(v) = seq.next_element::<MaybeSpanned>()? {
            items.push(Item {
                span: v.span.unwrap_or_default(),
                raw: v.raw,
            });
        }
        Ok(Raw::Array(items))
    }
    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Raw, A::Error> {
        match map.next_key::<Key>()? {
            None => Ok(Raw::Table(Vec::new())),
            Some(first) => table_rest(first, map),
        }
    }
}

/// Read a table whose first key was read (or a datetime, which toml presents as a map).
fn table_rest<'de, A: MapAccess<'de>>(first: Key, mut map: A) -> Result<Raw, A::Error> {
    if first.span.is_none() && first.text == DATETIME_FIELD {
        map.next_value::<de::IgnoredAny>()?;
        return Ok(Raw::Datetime);
    }
    let mut entries = Vec::new();
    let mut key = Some(first);
    while let Some(k) = key {
        let v: MaybeSpanned = map.next_value()?;
        let key_span = k.span.unwrap_or_default();
        entries.push(Entry {
            key: k.text,
            // An implicit table (`a` of `a.b = 1`) has no range of its own: use its key's.
            value: Item {
                span: v.span.unwrap_or_else(|| key_span.clone()),
                raw: v.raw,
            },
            key_span,
        });
        key = map.next_key()?;
    }
    Ok(Raw::Table(entries))
}

impl<'de> Deserialize<'de> for Raw {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_any(RawVisitor)
    }
}

impl<'de> Deserialize<'de> for MaybeSpanned {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        fn plain<E>(raw: Result<Raw, E>) -> Result<MaybeSpanned, E> {
            raw.map(|raw| MaybeSpanned { span: None, raw })
        }
        impl<'de> Visitor<'de> for V {
            type Value = MaybeSpanned;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("a TOML value")
            }
            fn visit_bool<E: de::Error>(self, v: bool) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_bool(v))
            }
            fn visit_i64<E: de::Error>(self, v: i64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_i64(v))
            }
            fn visit_u64<E: de::Error>(self, v: u64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_u64(v))
            }
            fn visit_f64<E: de::Error>(self, v: f64) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_f64(v))
            }
            fn visit_str<E: de::Error>(self, v: &str) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_str(v))
            }
            fn visit_string<E: de::Error>(self, v: String) -> Result<MaybeSpanned, E> {
                plain(RawVisitor.visit_string(v))
            }
            fn visit_seq<A: SeqAccess<'de>>(self, seq: A) -> Result<MaybeSpanned, A::Error> {
                plain(RawVisitor.visit_seq(seq))
            }
            fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<MaybeSpanned, A::Error> {
                match map.next_key::<Key>()? {
                    None => plain(Ok(Raw::Table(Vec::new()))),
                    Some(k) if k.span.is_none() && k.text == SPANNED_START => {
                        let (span, raw) = spanned_rest(&mut map)?;
                        Ok(MaybeSpanned {
                            span: Some(span),
                            raw,
                        })
                    }
                    Some(first) => plain(table_rest(first, map)),
                }
            }
        }
        d.deserialize_struct(SPANNED_NAME, SPANNED_FIELDS, V)
    }
}

// ---------------------------------------------------------------------------------------------
// Reading the file into a Plan (types, keys, names); `check` does the rest.

/// A mistake at a byte range.
struct Bad {
    span: Range<usize>,
    message: String,
}

fn bad(span: &Range<usize>, message: impl Into<String>) -> Bad {
    Bad {
        span: span.clone(),
        message: message.into(),
    }
}

const TOP_KEYS: &[&str] = &["objective", "strategy", "phases", "failure", "agent"];
const FAILURE_KEYS: &[&str] = &["policy", "retries", "max_parallel", "grace_ms"];
const AGENT_KEYS: &[&str] = &[
    "name",
    "role",
    "task",
    "command",
    "resume_command",
    "depends_on",
    "phase",
    "stage",
    "workdir",
    "retries",
    "env",
];

fn get<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.key == key)
}

/// The static name of an allowed key.
fn known(keys: &'static [&'static str], key: &str) -> Option<&'static str> {
    keys.iter().copied().find(|k| *k == key)
}

/// Refuse keys outside `allowed`. `in_what` is "" for the top level, else " in [failure]"...
fn check_keys(entries: &[Entry], allowed: &[&str], in_what: &str) -> Result<(), Bad> {
    let Some(e) = entries.iter().find(|e| !allowed.contains(&e.key.as_str())) else {
        return Ok(());
    };
    let key = &e.key;
    let top = in_what.is_empty();
    let mut message = if top {
        format!("unknown top-level key `{key}`")
    } else {
        format!("unknown key `{key}`{in_what}")
    };
    message.push_str(&format!("; expected one of: {}", allowed.join(", ")));
    if let Some(c) = closest(key, allowed.iter().copied()) {
        message.push_str(&format!("; did you mean `{c}`?"));
    } else if top && FAILURE_KEYS.contains(&key.as_str()) {
        message.push_str("; it belongs in the [failure] section");
        if AGENT_KEYS.contains(&key.as_str()) {
            message.push_str(" (or in an [[agent]] section)");
        }
    } else if top && AGENT_KEYS.contains(&key.as_str()) {
        message.push_str("; it belongs in an [[agent]] section");
    } else if !top && TOP_KEYS.contains(&key.as_str()) {
        message.push_str(
            "; top-level keys must come before the first [section] (everything below a \
             section header belongs to that section)",
        );
    }
    Err(bad(&e.key_span, message))
}

fn string(item: &Item, what: &str) -> Result<String, Bad> {
    match &item.raw {
        Raw::Str(s) => Ok(s.clone()),
        other => Err(bad(
            &item.span,
            format!("{what} must be a string, not {}", other.kind()),
        )),
    }
}

/// An array of strings, each with its range.
fn strings(item: &Item, what: &str, hint: &str) -> Result<Vec<(String, Range<usize>)>, Bad> {
    let Raw::Array(items) = &item.raw else {
        return Err(bad(
            &item.span,
            format!(
                "{what} must be an array of strings, not {}{hint}",
                item.raw.kind()
            ),
        ));
    };
    items
        .iter()
        .enumerate()
        .map(|(j, it)| {
            let s = string(it, &format!("{what}[{j}]"))?;
            Ok((s, it.span.clone()))
        })
        .collect()
}

/// A non-negative integer.
fn uint(item: &Item, what: &str) -> Result<u64, Bad> {
    match item.raw {
        Raw::Int(v) => u64::try_from(v)
            .map_err(|_| bad(&item.span, format!("{what} cannot be negative (got {v})"))),
        ref other => Err(bad(
            &item.span,
            format!("{what} must be a whole number, not {}", other.kind()),
        )),
    }
}

fn uint32(item: &Item, what: &str) -> Result<u32, Bad> {
    let v = uint(item, what)?;
    u32::try_from(v).map_err(|_| bad(&item.span, format!("{what} is too large (got {v})")))
}

fn read(text: &str, spans: &mut Spans) -> Result<Plan, Bad> {
    let root: Raw = toml::from_str(text).map_err(|e| {
        let lines: Vec<&str> = e
            .message()
            .lines()
            .map(str::trim)
            .filter(|l| !l.is_empty())
            .collect();
        let message = if lines.is_empty() {
            "invalid TOML: a value is missing or malformed".to_owned()
        } else {
            format!("invalid TOML: {}", lines.join("; "))
        };
        bad(&e.span().unwrap_or_default(), message)
    })?;
    let Raw::Table(top) = root else {
        return Err(bad(&(0..0), "a plan file must be a TOML table"));
    };
    check_keys(&top, TOP_KEYS, "")?;
    for e in &top {
        if let Some(k) = known(TOP_KEYS, &e.key) {
            spans.put(Loc::Key(k), e.value.span.clone());
        }
    }

    let objective = match get(&top, "objective") {
        None => None,
        Some(e) => Some(string(&e.value, "objective")?),
    };

    let strategy = match get(&top, "strategy") {
        None => Strategy::default(),
        Some(e) => {
            let s = string(&e.value, "strategy")?;
            s.parse::<Strategy>().map_err(|_| {
                bad(
                    &e.value.span,
                    format!(
                        "unknown strategy {s:?}; expected one of: {}",
                        Strategy::ALL
                            .iter()
                            .map(|s| s.as_str())
                            .collect::<Vec<_>>()
                            .join(", ")
                    ),
                )
            })?
        }
    };

    let mut phases = Vec::new();
    if let Some(e) = get(&top, "phases") {
        for (p, (name, span)) in strings(&e.value, "phases", "")?.into_iter().enumerate() {
            spans.put(Loc::Phase(p), span);
            phases.push(name.trim().to_owned());
        }
    }

    let policy = match get(&top, "failure") {
        None => RunPolicy::default(),
        Some(e) => read_failure(&e.value, spans)?,
    };

    let mut agents = Vec::new();
    if let Some(e) = get(&top, "agent") {
        let not_tables = || {
            "agent must be an array of tables: write each agent as an [[agent]] section (double \
             brackets)"
        };
        let Raw::Array(items) = &e.value.raw else {
            return Err(bad(&e.value.span, not_tables()));
        };
        for (i, item) in items.iter().enumerate() {
            let Raw::Table(t) = &item.raw else {
                return Err(bad(&item.span, not_tables()));
            };
            agents.push(read_agent(i, &item.span, t, &phases, spans)?);
        }
    }

    // Missing only now: a misplaced objective (under a [section]) is reported as such first.
    let Some(objective) = objective else {
        return Err(bad(
            &(0..0),
            "objective is missing; start the file with objective = \"what this session is for\"",
        ));
    };
    Ok(Plan {
        objective,
        strategy,
        phases,
        policy,
        agents,
    })
}

fn read_failure(item: &Item, spans: &mut Spans) -> Result<RunPolicy, Bad> {
    let Raw::Table(t) = &item.raw else {
        return Err(bad(
            &item.span,
            format!(
                "failure must be a table, not {}: write it as a [failure] section",
                item.raw.kind()
            ),
        ));
    };
    check_keys(t, FAILURE_KEYS, " in [failure]")?;
    let mut policy = RunPolicy::default();
    for e in t {
        let Some(k) = known(FAILURE_KEYS, &e.key) else {
            continue;
        };
        spans.put(Loc::Failure(k), e.value.span.clone());
        let what = format!("[failure] {k}");
        match k {
            "policy" => {
                let word = string(&e.value, &what)?;
                policy.on_failure = match word.as_str() {
                    "fail" => OnFailure::FailSession,
                    "continue" => OnFailure::Continue,
                    _ => {
                        return Err(bad(
                            &e.value.span,
                            format!("unknown failure policy {word:?}; expected fail or continue"),
                        ));
                    }
                };
            }
            "retries" => policy.retries = uint32(&e.value, &what)?,
            "max_parallel" => policy.max_parallel = Some(uint32(&e.value, &what)?),
            _ => policy.grace_ms = uint(&e.value, &what)?,
        }
    }
    Ok(policy)
}

fn read_agent(
    i: usize,
    span: &Range<usize>,
    t: &[Entry],
    phases: &[String],
    spans: &mut Spans,
) -> Result<AgentSpec, Bad> {
    spans.put(Loc::Agent(i), span.clone());
    let (who, section) = match get(t, "name").map(|e| &e.value.raw) {
        Some(Raw::Str(name)) => (format!("agent {name:?}"), format!("[[agent]] {name:?}")),
        _ => (
            format!("[[agent]] #{}", i + 1),
            format!("[[agent]] #{}", i + 1),
        ),
    };
    check_keys(t, AGENT_KEYS, &format!(" in {section}"))?;
    for e in t {
        if let Some(k) = known(AGENT_KEYS, &e.key) {
            spans.put(Loc::AgentKey(i, k), e.value.span.clone());
        }
    }
    let required = |key: &str, example: &str| {
        get(t, key).ok_or_else(|| bad(span, format!("{who} has no {key}; add {key} = {example}")))
    };

    let name = string(&required("name", "\"...\"")?.value, &format!("{who}: name"))?;
    let role = match get(t, "role") {
        Some(e) => string(&e.value, &format!("{who}: role"))?,
        None => name.clone(),
    };
    let task = string(
        &required("task", "\"what this agent should do\"")?.value,
        &format!("{who}: task"),
    )?;

    let argv = |key: &'static str, item: &Item, spans: &mut Spans| {
        let hint = if matches!(item.raw, Raw::Str(_)) {
            format!(
                "; split the command line into its arguments: {key} = [\"claude\", \"-p\", \"{{task}}\"]"
            )
        } else {
            String::new()
        };
        let items = strings(item, &format!("{who}: {key}"), &hint)?;
        let mut out = Vec::with_capacity(items.len());
        for (j, (arg, span)) in items.into_iter().enumerate() {
            spans.put(Loc::AgentItem(i, key, j), span);
            out.push(arg);
        }
        Ok::<_, Bad>(out)
    };
    let command = argv(
        "command",
        &required("command", "[\"program\", \"argument\", ...]")?.value,
        spans,
    )?;
    let resume_command = match get(t, "resume_command") {
        Some(e) => Some(argv("resume_command", &e.value, spans)?),
        None => None,
    };

    let mut depends_on = Vec::new();
    if let Some(e) = get(t, "depends_on") {
        let items = strings(&e.value, &format!("{who}: depends_on"), "")?;
        for (j, (dep, span)) in items.into_iter().enumerate() {
            spans.put(Loc::AgentItem(i, "depends_on", j), span);
            depends_on.push(dep);
        }
    }

    let phase = match get(t, "phase") {
        Some(e) => Some(read_phase(&e.value, &who, phases)?),
        None => None,
    };
    let stage = match get(t, "stage") {
        Some(e) => Some(uint32(&e.value, &format!("{who}: stage"))?),
        None => None,
    };
    let workdir = match get(t, "workdir") {
        Some(e) => Some(string(&e.value, &format!("{who}: workdir"))?),
        None => None,
    };
    let retries = match get(t, "retries") {
        Some(e) => Some(uint32(&e.value, &format!("{who}: retries"))?),
        None => None,
    };

    let mut env = BTreeMap::new();
    if let Some(e) = get(t, "env") {
        let Raw::Table(vars) = &e.value.raw else {
            return Err(bad(
                &e.value.span,
                format!(
                    "{who}: env must be a table of strings, not {}: env = {{ NAME = \"value\" }}",
                    e.value.raw.kind()
                ),
            ));
        };
        let mut key_spans = HashMap::new();
        for v in vars {
            let value = string(&v.value, &format!("{who}: env {}", v.key))?;
            key_spans.insert(v.key.clone(), v.key_span.clone());
            env.insert(v.key.clone(), value);
        }
        // `check` numbers env entries in name order.
        for (k, var) in env.keys().enumerate() {
            if let Some(s) = key_spans.remove(var) {
                spans.put(Loc::AgentItem(i, "env", k), s);
            }
        }
    }

    Ok(AgentSpec {
        name,
        role,
        task,
        command,
        resume_command,
        depends_on,
        phase,
        stage,
        env,
        workdir,
        retries,
    })
}

/// A phase reference: a name (string), or a number counted from 1 (integer); the 0-based index.
fn read_phase(item: &Item, who: &str, phases: &[String]) -> Result<u32, Bad> {
    if phases.is_empty() {
        return Err(bad(&item.span, no_phases(who)));
    }
    let listed = phases.join(", ");
    let index = match &item.raw {
        Raw::Int(n) => usize::try_from(*n)
            .ok()
            .filter(|n| (1..=phases.len()).contains(n))
            .map(|n| n - 1)
            .ok_or_else(|| {
                bad(
                    &item.span,
                    format!(
                        "{who}: phase {n} does not exist; phases are numbered from 1 to {} \
                         ({listed})",
                        phases.len()
                    ),
                )
            })?,
        Raw::Str(s) => {
            let s = s.trim();
            phases.iter().position(|p| p == s).ok_or_else(|| {
                let hint = if s.parse::<u64>().is_ok() {
                    format!("; a phase number is written without quotes (phase = {s})")
                } else {
                    closest(s, phases.iter().map(String::as_str))
                        .map(|c| format!("; did you mean {c:?}?"))
                        .unwrap_or_default()
                };
                bad(
                    &item.span,
                    format!("{who}: no phase named {s:?}; the phases are: {listed}{hint}"),
                )
            })?
        }
        other => {
            return Err(bad(
                &item.span,
                format!(
                    "{who}: phase must be a phase name or its number (from 1), not {}",
                    other.kind()
                ),
            ));
        }
    };
    u32::try_from(index).map_err(|_| bad(&item.span, format!("{who}: too many phases")))
}

// ---------------------------------------------------------------------------------------------
// Writing TOML

/// A TOML basic string.
fn quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_control() => out.push_str(&format!("\\u{:04X}", u32::from(c))),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// A TOML key: bare when it can be.
fn key(k: &str) -> String {
    let bare = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if bare { k.to_owned() } else { quote(k) }
}

fn array(items: &[String]) -> String {
    let quoted: Vec<String> = items.iter().map(|s| quote(s)).collect();
    format!("[{}]", quoted.join(", "))
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop, prop_assert_eq, proptest};

    /// The example of the module documentation, taken from this file's `//!` lines.
    fn doc_example() -> String {
        let src = include_str!("plan.rs");
        let mut out = String::new();
        let mut inside = false;
        for line in src.lines().take_while(|l| l.starts_with("//!")) {
            let line = line
                .trim_start_matches("//!")
                .strip_prefix(' ')
                .unwrap_or("");
            match (inside, line) {
                (false, "```toml") => inside = true,
                (true, "```") => break,
                (true, l) => {
                    out.push_str(l);
                    out.push('\n');
                }
                _ => {}
            }
        }
        out
    }

    #[test]
    fn doc_example_parses() {
        let text = doc_example();
        assert!(text.starts_with("objective = "), "{text}");
        let plan = parse(&text).unwrap();
        assert_eq!(plan.objective, "Add rate limiting to the login endpoint");
        assert_eq!(plan.strategy, Strategy::Adaptive);
        assert_eq!(plan.phases, ["design", "implement"]);
        assert_eq!(
            plan.policy,
            RunPolicy {
                on_failure: OnFailure::FailSession,
                retries: 1,
                max_parallel: Some(4),
                grace_ms: 5000,
            }
        );
        let names: Vec<&str> = plan.agents.iter().map(|a| a.name.as_str()).collect();
        assert_eq!(names, ["architect", "builder", "qa"]);
        let [architect, builder, qa] = &plan.agents[..] else {
            panic!("three agents");
        };
        assert_eq!(architect.role, "architect");
        assert_eq!(architect.command[2], "{task}");
        assert_eq!(architect.resume_command.as_ref().unwrap()[3], "--resume");
        assert_eq!(architect.phase, Some(0));
        assert_eq!(architect.retries(&plan.policy), 1);
        assert_eq!(builder.role, "implementer");
        assert_eq!(builder.depends_on, ["architect"]);
        assert_eq!(builder.phase, Some(1), "phase = 2 is the second phase");
        assert_eq!(builder.workdir.as_deref(), Some("services/auth"));
        assert_eq!(builder.retries(&plan.policy), 2);
        assert_eq!(
            builder.env.get("RUST_LOG").map(String::as_str),
            Some("info")
        );
        assert_eq!(qa.phase, Some(1));
        assert_eq!(qa.resume_command, None);
        assert_eq!(qa.stage, None);
        assert_eq!(plan.validate(), Ok(()));
    }

    #[test]
    fn round_trips() {
        let plan = parse(&doc_example()).unwrap();
        // Through the file format.
        let text = plan.to_toml();
        assert_eq!(parse(&text).as_ref(), Ok(&plan), "{text}");
        // Through JSON (how the daemon receives plans).
        let json = serde_json::to_string(&plan).unwrap();
        let back: Plan = serde_json::from_str(&json).unwrap();
        assert_eq!(back, plan);
        assert_eq!(back.validate(), Ok(()));
    }

    #[test]
    fn defaults() {
        let plan = parse(
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\n",
        )
        .unwrap();
        assert_eq!(plan.strategy, Strategy::Parallel);
        assert!(plan.phases.is_empty());
        assert_eq!(plan.policy, RunPolicy::default());
        assert_eq!(plan.policy.grace_ms, 5000);
        let a = &plan.agents[0];
        assert_eq!(a.role, "a");
        assert_eq!(
            (a.phase, a.stage, a.retries, &a.workdir),
            (None, None, None, &None)
        );
        assert!(a.env.is_empty() && a.depends_on.is_empty());
        assert_eq!(a.retries(&plan.policy), 0);
        // Minimal JSON: the serde defaults fill in.
        let json = r#"{"objective":"o","strategy":"adaptive","agents":[
            {"name":"a","role":"r","task":"t","command":["x"]}]}"#;
        let p: Plan = serde_json::from_str(json).unwrap();
        assert_eq!(p.policy, RunPolicy::default());
        assert_eq!(p.validate(), Ok(()));
    }

    #[test]
    fn a_key_with_a_newline_is_named_on_one_line() {
        // Found by the `plan` fuzz target: the key is quoted as written.
        let e = parse("\"a\\nb\" = 1\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 1));
        assert!(e.message.contains("`a\\nb`"), "{e}");
        assert!(!e.to_string().contains('\n'), "{e:?}");
    }

    #[test]
    fn every_key_and_form() {
        let text = r#"
objective = "o"
strategy = "pipeline"
phases = [" one ", "two"]
failure.policy = "continue"
failure.grace_ms = 0

[[agent]]
name = "a.b-c_9"
task = "t"
command = ["x", "{{literal}}"]
phase = 1
stage = 1
env.B = "2"
env.A = "1"

[[agent]]
name = "z"
task = "t"
command = ["y"]
phase = "two"
stage = 2
depends_on = ["a.b-c_9"]
[agent.env]
"QUOTED_KEY" = "v"
"#;
        let plan = parse(text).unwrap();
        assert_eq!(plan.phases, ["one", "two"]);
        assert_eq!(plan.policy.on_failure, OnFailure::Continue);
        assert_eq!(plan.policy.grace_ms, 0);
        assert_eq!(plan.agents[0].env.len(), 2);
        assert_eq!(plan.agents[1].env["QUOTED_KEY"], "v");
        assert_eq!(plan.agents[1].phase, Some(1));
        assert_eq!(parse(&plan.to_toml()), Ok(plan));
    }

    /// (file, line, column, message): one row per mistake.
    const ERRORS: &[(&str, usize, usize, &str)] = &[
        // TOML syntax.
        (
            "objective = \"o\"\nstrategy = \n",
            2,
            12,
            "invalid TOML: invalid string; expected `\"`, `'`",
        ),
        (
            "objective = \"o\"\nobjective = \"p\"\n",
            2,
            1,
            "invalid TOML: duplicate key `objective` in document root",
        ),
        (
            "objective = \"o\"\nphases = [\"a\",\n",
            3,
            1,
            "invalid TOML: invalid array; expected `]`",
        ),
        // Unknown keys.
        (
            "objective = \"o\"\nobjectiv = \"p\"\n",
            2,
            1,
            "unknown top-level key `objectiv`; expected one of: objective, strategy, phases, \
             failure, agent; did you mean `objective`?",
        ),
        (
            "objective = \"o\"\nretries = 2\n",
            2,
            1,
            "unknown top-level key `retries`; expected one of: objective, strategy, phases, \
             failure, agent; it belongs in the [failure] section (or in an [[agent]] section)",
        ),
        (
            "objective = \"o\"\ndepends_on = []\n",
            2,
            1,
            "unknown top-level key `depends_on`; expected one of: objective, strategy, phases, \
             failure, agent; it belongs in an [[agent]] section",
        ),
        (
            "objective = \"o\"\n[failure]\npolicy = \"fail\"\nretry = 1\n",
            4,
            1,
            "unknown key `retry` in [failure]; expected one of: policy, retries, max_parallel, \
             grace_ms; did you mean `retries`?",
        ),
        (
            "[failure]\nobjective = \"o\"\n",
            2,
            1,
            "unknown key `objective` in [failure]; expected one of: policy, retries, \
             max_parallel, grace_ms; top-level keys must come before the first [section] \
             (everything below a section header belongs to that section)",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncomand = [\"x\"]\n",
            5,
            1,
            "unknown key `comand` in [[agent]] \"qa\"; expected one of: name, role, task, \
             command, resume_command, depends_on, phase, stage, workdir, retries, env; did you \
             mean `command`?",
        ),
        // Wrong types.
        (
            "objective = 3\n",
            1,
            13,
            "objective must be a string, not an integer",
        ),
        (
            "objective = 1979-05-27\n",
            1,
            13,
            "objective must be a string, not a datetime",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncommand = \"claude -p\"\n",
            5,
            11,
            "agent \"qa\": command must be an array of strings, not a string; split the command \
             line into its arguments: command = [\"claude\", \"-p\", \"{task}\"]",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"qa\"\ntask = \"t\"\ncommand = [\"x\", 1]\n",
            5,
            17,
            "agent \"qa\": command[1] must be a string, not an integer",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = 5\n",
            3,
            8,
            "[[agent]] #1: name must be a string, not an integer",
        ),
        (
            "objective = \"o\"\nphases = \"a\"\n",
            2,
            10,
            "phases must be an array of strings, not a string",
        ),
        (
            "objective = \"o\"\nfailure = 1\n",
            2,
            11,
            "failure must be a table, not an integer: write it as a [failure] section",
        ),
        (
            "objective = \"o\"\n[failure]\nretries = \"2\"\n",
            3,
            11,
            "[failure] retries must be a whole number, not a string",
        ),
        (
            "objective = \"o\"\n[failure]\ngrace_ms = -1\n",
            3,
            12,
            "[failure] grace_ms cannot be negative (got -1)",
        ),
        (
            "objective = \"o\"\n[agent]\nname = \"a\"\n",
            2,
            1,
            "agent must be an array of tables: write each agent as an [[agent]] section (double \
             brackets)",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nenv = \
             { A = 1 }\n",
            6,
            13,
            "agent \"a\": env A must be a string, not an integer",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nstage = \
             4294967296\n",
            6,
            9,
            "agent \"a\": stage is too large (got 4294967296)",
        ),
        // Objective, agents, lengths.
        (
            "strategy = \"adaptive\"\n",
            1,
            1,
            "objective is missing; start the file with objective = \"what this session is for\"",
        ),
        (
            "objective = \"  \"\n",
            1,
            13,
            "objective is empty; say what this session is for",
        ),
        (
            "objective = \"o\"\n",
            1,
            1,
            "the plan has no agents; add at least one [[agent]] section",
        ),
        (
            "objective = \"o\"\nagent = []\n",
            2,
            9,
            "the plan has no agents; add at least one [[agent]] section",
        ),
        // Agent names.
        (
            "objective = \"o\"\n\n[[agent]]\ntask = \"t\"\n",
            3,
            1,
            "[[agent]] #1 has no name; add name = \"...\"",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"\"\ntask = \"t\"\ncommand = [\"x\"]\n",
            3,
            8,
            "[[agent]] #1: name is empty",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"q a\"\ntask = \"t\"\ncommand = [\"x\"]\n",
            3,
            8,
            "agent name \"q a\" contains ' '; names may only use letters, digits, '_', '.' and \
             '-'",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
             [[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n",
            7,
            8,
            "agent name \"a\" is used twice; the first is the [[agent]] at line 2",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ncommand = [\"x\"]\n",
            2,
            1,
            "agent \"a\" has no task; add task = \"what this agent should do\"",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\n",
            2,
            1,
            "agent \"a\" has no command; add command = [\"program\", \"argument\", ...]",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\nrole = \"\"\ntask = \"t\"\ncommand = \
             [\"x\"]\n",
            4,
            8,
            "agent \"a\": role is empty; leave it out to use the name",
        ),
        // Commands.
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = []\n",
            5,
            11,
            "agent \"a\": command is empty; give the program and its arguments, e.g. command = \
             [\"claude\", \"-p\", \"{task}\"]",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"\", \"x\"]\n",
            5,
            12,
            "agent \"a\": command[0], the program to run, is empty",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
             resume_command = []\n",
            6,
            18,
            "agent \"a\": resume_command is empty; leave it out if the agent cannot be resumed",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\", \
             \"{tsak}\"]\n",
            5,
            17,
            "agent \"a\": command[1]: unknown placeholder {tsak} (did you mean {task}?); known: \
             {task}, {agent_id}, {session_id}, {claude_session_id}, {workdir}, {name}, {role}, \
             {attempt}; write {{ and }} for literal braces",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
             resume_command = [\"x\", \"--id={claude_session_id\"]\n",
            6,
            24,
            "agent \"a\": resume_command[1]: unclosed placeholder `{claude_session_id` in \
             \"--id={claude_session_id\"; a placeholder is written {name}, a literal brace {{",
        ),
        // Dependencies.
        (
            "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"bulder\"]\n[[agent]]\nname = \
             \"builder\"\ntask = \"t\"\ncommand = [\"x\"]\n",
            7,
            15,
            "agent \"a\": depends_on names \"bulder\", which is not an agent of this plan (did \
             you mean \"builder\"?)",
        ),
        (
            "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n",
            7,
            15,
            "agent \"a\" depends on itself",
        ),
        (
            "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"c\"]\n[[agent]]\nname = \"b\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n[[agent]]\nname = \"c\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"b\"]\n",
            7,
            15,
            "dependency cycle: a → c → b → a; an agent starts only after the agents it depends \
             on completed, so none of these could ever start",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
             [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"x\"]\ndepends_on = [\"a\"]\n",
            10,
            14,
            "agent \"b\": depends_on has no effect under strategy parallel (every agent starts \
             at once); use adaptive",
        ),
        (
            "objective = \"o\"\nstrategy = \"sequential\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\ndepends_on = [\"b\"]\n[[agent]]\nname = \"b\"\ntask = \
             \"t\"\ncommand = [\"x\"]\n",
            7,
            15,
            "agent \"a\" depends on \"b\", which comes later in the file; under strategy \
             sequential agents run one at a time in file order, so move \"b\" above \"a\"",
        ),
        (
            "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nstage = 1\n[[agent]]\nname = \"b\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nstage = 1\ndepends_on = [\"a\"]\n",
            13,
            15,
            "agent \"b\" (stage 1) depends on \"a\" (stage 1), the same stage; under strategy \
             pipeline an agent may only depend on agents of lower stages",
        ),
        (
            "objective = \"o\"\nstrategy = \"adaptive\"\nphases = [\"x\", \"y\"]\n[[agent]]\n\
             name = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = 1\ndepends_on = [\"b\"]\n\
             [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = 2\n",
            9,
            15,
            "agent \"a\" (phase \"x\") depends on \"b\" of the later phase \"y\"; phases run in \
             order, so \"b\" cannot have completed when \"a\" starts",
        ),
        (
            "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nstage = 1\ndepends_on = [\"b\"]\n[[agent]]\nname = \
             \"b\"\ntask = \"t\"\ncommand = [\"x\"]\nstage = 2\n",
            8,
            15,
            "agent \"a\" (stage 1) depends on \"b\" (stage 2), a later stage; under strategy \
             pipeline an agent may only depend on agents of lower stages",
        ),
        // Strategy and policy.
        (
            "objective = \"o\"\nstrategy = \"random\"\n",
            2,
            12,
            "unknown strategy \"random\"; expected one of: parallel, sequential, adaptive, \
             pipeline",
        ),
        (
            "objective = \"o\"\n[failure]\npolicy = \"ignore\"\n",
            3,
            10,
            "unknown failure policy \"ignore\"; expected fail or continue",
        ),
        (
            "objective = \"o\"\n[failure]\nretries = 11\n",
            3,
            11,
            "[failure] retries is 11; at most 10 are allowed",
        ),
        (
            "objective = \"o\"\n[failure]\nmax_parallel = 0\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\n",
            3,
            16,
            "[failure] max_parallel must be at least 1; leave it out for no limit",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\n\
             retries = 12\n",
            6,
            11,
            "agent \"a\": retries is 12; at most 10 are allowed",
        ),
        // Phases.
        (
            "objective = \"o\"\nphases = [\"a\", \" \"]\n",
            2,
            16,
            "phase 2 in phases has an empty name",
        ),
        (
            "objective = \"o\"\nphases = [\"a\", \"b\", \"a\"]\n",
            2,
            21,
            "phase name \"a\" appears twice in phases (phases 1 and 3); phase names must be \
             unique",
        ),
        (
            "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nphase = \"desing\"\n",
            7,
            9,
            "agent \"a\": no phase named \"desing\"; the phases are: design, build; did you mean \
             \"design\"?",
        ),
        (
            "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nphase = \"2\"\n",
            7,
            9,
            "agent \"a\": no phase named \"2\"; the phases are: design, build; a phase number is \
             written without quotes (phase = 2)",
        ),
        (
            "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nphase = 0\n",
            7,
            9,
            "agent \"a\": phase 0 does not exist; phases are numbered from 1 to 2 (design, build)",
        ),
        (
            "objective = \"o\"\nphases = [\"design\", \"build\"]\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nphase = 3\n",
            7,
            9,
            "agent \"a\": phase 3 does not exist; phases are numbered from 1 to 2 (design, build)",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nphase = \
             1\n",
            6,
            9,
            "agent \"a\": phase is given but the plan has no phases; add phases = [\"...\"] at \
             the top, or remove phase",
        ),
        (
            "objective = \"o\"\nphases = [\"design\"]\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\n",
            3,
            1,
            "agent \"a\" has no phase; the plan has phases (design), so every agent needs phase \
             = \"<name>\" (or the phase's number, from 1)",
        ),
        // Stages.
        (
            "objective = \"o\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nstage = 1\n",
            7,
            9,
            "agent \"a\": stage only applies to strategy pipeline (this plan's strategy is \
             adaptive)",
        ),
        (
            "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\n",
            3,
            1,
            "agent \"a\" has no stage; under strategy pipeline every agent needs stage = 1, 2, ...",
        ),
        (
            "objective = \"o\"\nstrategy = \"pipeline\"\n[[agent]]\nname = \"a\"\ntask = \
             \"t\"\ncommand = [\"x\"]\nstage = 0\n",
            7,
            9,
            "agent \"a\": stage 0 does not exist; stages are numbered from 1",
        ),
        // Environment and workdir.
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nenv = \
             { OK = \"1\", \"A-B\" = \"2\" }\n",
            6,
            19,
            "agent \"a\": env \"A-B\" is not a valid variable name (letters, digits and '_', not \
             starting with a digit)",
        ),
        (
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"x\"]\nworkdir \
             = \"\"\n",
            6,
            11,
            "agent \"a\": workdir is empty; leave it out to run in the project root",
        ),
    ];

    #[test]
    fn errors_table() {
        let mut failures = Vec::new();
        for &(text, line, column, message) in ERRORS {
            let want = PlanError {
                line,
                column,
                message: message.to_owned(),
            };
            match parse(text) {
                Ok(_) => failures.push(format!("{text:?}: parsed, expected {want}")),
                Err(got) if got != want => {
                    failures.push(format!("{text:?}:\n  got  {got}\n  want {want}"))
                }
                Err(_) => {}
            }
        }
        assert!(failures.is_empty(), "{}", failures.join("\n"));
    }

    #[test]
    fn error_display_and_long_texts() {
        let e = parse("objective = 3\n").unwrap_err();
        assert_eq!(
            e.to_string(),
            "line 1, column 13: objective must be a string, not an integer"
        );
        let long = "x".repeat(MAX_TEXT + 1);
        let text = format!("objective = \"{long}\"\n");
        assert_eq!(
            parse(&text).unwrap_err().message,
            format!(
                "objective is {} bytes long; the limit is 4096",
                MAX_TEXT + 1
            )
        );
        let text = format!(
            "objective = \"o\"\n[[agent]]\nname = \"a\"\nrole = \"{long}\"\ntask = \"t\"\n\
             command = [\"x\"]\n"
        );
        let e = parse(&text).unwrap_err();
        assert_eq!((e.line, e.column), (4, 8));
        assert_eq!(
            e.message,
            "agent \"a\": role is 4097 bytes long; the limit is 4096"
        );
        let text = format!(
            "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"{long}\"\ncommand = [\"x\"]\n"
        );
        assert_eq!(parse(&text).unwrap_err().line, 4);
        let name = "n".repeat(MAX_NAME + 1);
        let text = format!(
            "objective = \"o\"\n[[agent]]\nname = \"{name}\"\ntask = \"t\"\ncommand = [\"x\"]\n"
        );
        assert_eq!(
            parse(&text).unwrap_err().message,
            format!("agent name \"{name}\" is 65 bytes long; the limit is 64")
        );
    }

    #[test]
    fn columns_count_characters() {
        // "é" is two bytes, one column.
        let e = parse("objective = \"é\"\nstrategy = \"ü\"\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 12));
        let e = parse("phases = [\"é\", 1]\n").unwrap_err();
        assert_eq!((e.line, e.column), (1, 16));
        assert_eq!(e.message, "phases[1] must be a string, not an integer");
        assert_eq!(line_column("ab\ncd", 99), (2, 3));
        assert_eq!(line_column("", 0), (1, 1));
    }

    #[test]
    fn implicit_tables_have_positions() {
        // `failure` is an implicit table here (dotted keys): its key's position stands in.
        let e = parse("objective = \"o\"\nfailure.retries = 20\n").unwrap_err();
        assert_eq!(
            (e.line, e.column, e.message.as_str()),
            (2, 19, "[failure] retries is 20; at most 10 are allowed")
        );
        let e = parse("objective = \"o\"\nfailure.x = 1\n").unwrap_err();
        assert_eq!((e.line, e.column), (2, 9));
    }

    #[test]
    fn validate_without_positions() {
        let mut plan = parse(&doc_example()).unwrap();
        assert_eq!(plan.validate(), Ok(()));
        plan.agents[2].name = "architect".into();
        assert_eq!(
            plan.validate(),
            Err("agent name \"architect\" is used twice; the first is agent #1".into())
        );
        let mut plan = parse(&doc_example()).unwrap();
        plan.agents[0].phase = Some(2);
        assert_eq!(
            plan.validate(),
            Err(
                "agent \"architect\": phase index 2 is out of range; the plan has 2 phases \
                 (numbered 0..=1 in a plan sent to the daemon, 1..=2 in a file)"
                    .into()
            )
        );
        let mut plan = parse(&doc_example()).unwrap();
        plan.agents[0].depends_on = vec!["qa".into()];
        assert_eq!(
            plan.validate(),
            Err(
                "dependency cycle: architect → qa → builder → architect; an agent starts only \
                 after the agents it depends on completed, so none of these could ever start"
                    .into()
            )
        );
        let mut plan = parse(&doc_example()).unwrap();
        plan.agents.clear();
        assert_eq!(
            plan.validate(),
            Err("the plan has no agents; add at least one [[agent]] section".into())
        );
        let mut plan = parse(&doc_example()).unwrap();
        plan.agents[1].depends_on.push("architect".into());
        assert_eq!(
            plan.validate(),
            Err("agent \"builder\": depends_on lists \"architect\" twice".into())
        );
        let mut plan = parse(&doc_example()).unwrap();
        plan.agents[1].command[1] = "a\0b".into();
        assert_eq!(
            plan.validate(),
            Err("agent \"builder\": command[1] contains a NUL byte".into())
        );
    }

    #[test]
    fn expand_cases() {
        let lookup = |name: &str| match name {
            "task" => Some("do it".to_owned()),
            "attempt" => Some("2".to_owned()),
            "claude_session_id" => Some("c-1".to_owned()),
            _ => None,
        };
        let argv = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        type Case = (
            &'static [&'static str],
            Result<&'static [&'static str], &'static str>,
        );
        let cases: &[Case] = &[
            (&[], Ok(&[])),
            (&["claude", "-p", "{task}"], Ok(&["claude", "-p", "do it"])),
            (&["try {attempt}/{attempt}"], Ok(&["try 2/2"])),
            (&["--id={claude_session_id}x"], Ok(&["--id=c-1x"])),
            (
                &["{{task}}", "}}{{", "{{{task}}}"],
                Ok(&["{task}", "}{", "{do it}"]),
            ),
            (&["é{task}ü"], Ok(&["édo itü"])),
            (
                &["{}"],
                Err(
                    "unknown placeholder {}; known: {task}, {agent_id}, {session_id}, \
                 {claude_session_id}, {workdir}, {name}, {role}, {attempt}; write {{ and }} for \
                 literal braces",
                ),
            ),
            (
                &["ok", "{session_id}"],
                Err("placeholder {session_id} has no value here"),
            ),
            (
                &["{tsak}"],
                Err(
                    "unknown placeholder {tsak} (did you mean {task}?); known: {task}, \
                 {agent_id}, {session_id}, {claude_session_id}, {workdir}, {name}, {role}, \
                 {attempt}; write {{ and }} for literal braces",
                ),
            ),
            (
                &["a{task"],
                Err(
                    "unclosed placeholder `{task` in \"a{task\"; a placeholder is \
                 written {name}, a literal brace {{",
                ),
            ),
            (
                &["a}b"],
                Err("unmatched `}` in \"a}b\"; write `}}` for a literal brace"),
            ),
            (
                &["{a{b}"],
                Err("unknown placeholder {a{b}; known: {task}, {agent_id}, \
                 {session_id}, {claude_session_id}, {workdir}, {name}, {role}, {attempt}; write \
                 {{ and }} for literal braces"),
            ),
        ];
        for (input, want) in cases {
            let got = expand(&argv(input), lookup);
            let want = want.map(argv).map_err(str::to_owned);
            assert_eq!(got, want, "{input:?}");
        }
    }

    #[test]
    fn uses_cases() {
        let argv = |items: &[&str]| items.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert!(uses(
            &argv(&["x", "--resume", "{claude_session_id}"]),
            "claude_session_id"
        ));
        assert!(uses(&argv(&["a={task}b"]), "task"));
        assert!(!uses(&argv(&["{{task}}"]), "task"));
        assert!(!uses(&argv(&["{task}"]), "name"));
        assert!(!uses(&[], "task"));
        // Before a mistake in the same element still counts.
        assert!(uses(&argv(&["{task} }"]), "task"));
    }

    #[test]
    fn placeholders_are_all_accepted() {
        let argv: Vec<String> = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect();
        let got = expand(&argv, |n| Some(n.to_uppercase())).unwrap();
        let want: Vec<String> = PLACEHOLDERS.iter().map(|p| p.to_uppercase()).collect();
        assert_eq!(got, want);
        for p in PLACEHOLDERS {
            assert!(uses(&argv, p));
        }
    }

    #[test]
    fn closest_and_distance() {
        assert_eq!(edit_distance("", "abc"), 3);
        assert_eq!(edit_distance("kitten", "sitting"), 3);
        assert_eq!(
            closest("comand", AGENT_KEYS.iter().copied()),
            Some("command")
        );
        assert_eq!(closest("zzz", AGENT_KEYS.iter().copied()), None);
        assert_eq!(closest("x", ["y"]), Some("y"));
    }

    proptest! {
        /// Any text survives the file format: quoting and escapes round trip.
        #[test]
        fn strings_round_trip(objective in "\\PC{1,40}", task in ".{1,40}", arg in "[^{}]{0,20}",
                              value in ".{0,20}") {
            let objective = if objective.trim().is_empty() { format!("x{objective}") } else { objective };
            let task = if task.trim().is_empty() { format!("t{task}") } else { task };
            let plan = Plan {
                objective,
                strategy: Strategy::Adaptive,
                phases: vec![],
                policy: RunPolicy::default(),
                agents: vec![AgentSpec {
                    name: "a".into(),
                    role: "r".into(),
                    task,
                    command: vec!["x".into(), arg.replace('\0', "")],
                    resume_command: None,
                    depends_on: vec![],
                    phase: None,
                    stage: None,
                    env: BTreeMap::from([("V".to_owned(), value.replace('\0', ""))]),
                    workdir: None,
                    retries: None,
                }],
            };
            prop_assert_eq!(plan.validate(), Ok(()));
            prop_assert_eq!(parse(&plan.to_toml()), Ok(plan));
        }

        /// Arbitrary text never panics the parser, and errors point inside the text.
        #[test]
        fn parse_never_panics(text in prop::string::string_regex("(objective|agent|\\[\\[agent\\]\\]|name|=|\"|\\{|\\}|\\[|\\]|,|\\n| |a|1|é|phase|stage|depends_on|command|task)*").unwrap()) {
            if let Err(e) = parse(&text) {
                let lines = text.split('\n').count();
                proptest::prop_assert!(e.line >= 1 && e.line <= lines, "{e} in {text:?}");
                proptest::prop_assert!(e.column >= 1);
            }
        }
    }
}
