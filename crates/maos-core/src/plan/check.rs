//! The semantic checks, shared by [`parse`](super::parse) (with positions) and
//! [`Plan::validate`](super::Plan::validate) (without).

use std::collections::HashMap;

use super::model::{MAX_NAME, MAX_RETRIES, MAX_TEXT, Plan};
use super::placeholders::check_placeholders;
use crate::Strategy;
use crate::pathglob::{MAX_FILES, MAX_PLAN_FILES, parse as parse_pattern};
use crate::spec::AgentSpec;
use crate::spec::LAND_SUFFIX;
use crate::words::closest;

/// Where an issue is, in terms of the plan; `parse` maps it to a position in the file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(super) enum Loc {
    /// The start of the file.
    Top,
    /// A top-level key's value.
    Key(&'static str),
    /// The n-th element of `phases`.
    Phase(usize),
    /// A key of `[failure]`.
    Failure(&'static str),
    /// A key of `[landing]`.
    Landing(&'static str),
    /// The n-th `[[agent]]` table (its header).
    Agent(usize),
    /// A key's value in the n-th `[[agent]]`.
    AgentKey(usize, &'static str),
    /// The j-th element of an array (or the j-th `env` key, in name order) in the n-th agent.
    AgentItem(usize, &'static str, usize),
}

impl Loc {
    /// The enclosing place, used when the file does not have this one (a missing key).
    pub(super) fn parent(self) -> Option<Loc> {
        match self {
            Loc::Top => None,
            Loc::Key(_) => Some(Loc::Top),
            Loc::Phase(_) => Some(Loc::Key("phases")),
            Loc::Failure(_) => Some(Loc::Key("failure")),
            Loc::Landing(_) => Some(Loc::Key("landing")),
            Loc::Agent(_) => Some(Loc::Key("agent")),
            Loc::AgentKey(i, _) => Some(Loc::Agent(i)),
            Loc::AgentItem(i, k, _) => Some(Loc::AgentKey(i, k)),
        }
    }
}

/// A semantic problem: where, and the message.
pub(super) struct Issue {
    pub(super) at: Loc,
    pub(super) message: String,
}

pub(super) fn issue(at: Loc, message: impl Into<String>) -> Issue {
    Issue {
        at,
        message: message.into(),
    }
}

pub(super) fn too_long(text: &str, what: &str, at: Loc) -> Result<(), Issue> {
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

pub(super) fn no_phases(who: &str) -> String {
    format!(
        "{who}: phase is given but the plan has no phases; add phases = [\"...\"] at the top, \
         or remove phase"
    )
}

/// Every check that needs no file positions. `first_at(j)` describes where agent `j` is (for
/// "used twice" messages).
pub(super) fn check(plan: &Plan, first_at: &dyn Fn(usize) -> String) -> Result<(), Issue> {
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
    let mut declared = 0;
    for (i, a) in plan.agents.iter().enumerate() {
        check_agent(plan, i, a, &index)?;
        declared += a.files.len();
        if declared > MAX_PLAN_FILES {
            return Err(issue(
                Loc::AgentKey(i, "files"),
                format!(
                    "the plan declares more than {MAX_PLAN_FILES} files in all (agent {:?} \
                     brings it to {declared}); name directories or globs instead",
                    a.name
                ),
            ));
        }
        if a.land.is_some() {
            let landing = format!("{}{LAND_SUFFIX}", a.name);
            if let Some(&j) = index.get(landing.as_str()) {
                return Err(issue(
                    Loc::AgentKey(i, "land"),
                    format!(
                        "agent {:?} has land, so maos adds an agent named {landing:?} to run \
                         it, but {} already has that name; rename it",
                        a.name,
                        first_at(j)
                    ),
                ));
            }
        }
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

pub(super) fn check_name(i: usize, name: &str) -> Result<(), Issue> {
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

pub(super) fn check_agent(
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
    if let Some(land) = &a.land {
        check_argv(i, &who, "land", land)?;
    }

    if a.files.len() > MAX_FILES {
        return Err(issue(
            Loc::AgentKey(i, "files"),
            format!(
                "{who}: files lists {} paths; the limit is {MAX_FILES} (name directories or \
                 globs instead)",
                a.files.len()
            ),
        ));
    }
    for (j, file) in a.files.iter().enumerate() {
        if let Err(m) = parse_pattern(file) {
            return Err(issue(
                Loc::AgentItem(i, "files", j),
                format!("{who}: files[{j}] {:?} {m}", crate::text::clip(file, 80)),
            ));
        }
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
                    "{who}: phase index {p} is out of range; the plan has {} (numbered \
                     0..={} in a plan sent to the daemon, 1..={n_phases} in a file)",
                    crate::words::count(n_phases, "phase"),
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

pub(super) fn check_argv(
    i: usize,
    who: &str,
    key: &'static str,
    argv: &[String],
) -> Result<(), Issue> {
    let Some(program) = argv.first() else {
        let message = if key == "command" {
            format!(
                "{who}: command is empty; give the program and its arguments, e.g. command = \
                 [\"claude\", \"-p\", \"{{task}}\"]"
            )
        } else if key == "land" {
            format!("{who}: land is empty; leave it out if the agent's work needs no landing")
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
