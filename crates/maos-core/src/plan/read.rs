//! Reading the file into a [`Plan`](super::Plan): types, keys, names; the semantic checks
//! ([`check`](super::check)) do the rest.

use std::collections::{BTreeMap, HashMap};
use std::ops::Range;

use super::check::{Loc, no_phases};
use super::model::Plan;
use super::position::Spans;
use super::spanned::{Entry, Item, Raw};
use crate::Strategy;
use crate::spec::{AgentSpec, OnFailure, Overlap, RunPolicy, Serialise};
use crate::words::closest;

/// A mistake at a byte range.
pub(super) struct Bad {
    pub(super) span: Range<usize>,
    pub(super) message: String,
}

pub(super) fn bad(span: &Range<usize>, message: impl Into<String>) -> Bad {
    Bad {
        span: span.clone(),
        message: message.into(),
    }
}

pub(super) const TOP_KEYS: &[&str] = &[
    "objective",
    "strategy",
    "phases",
    "failure",
    "landing",
    "agent",
];
pub(super) const FAILURE_KEYS: &[&str] = &["policy", "retries", "max_parallel", "grace_ms"];
pub(super) const LANDING_KEYS: &[&str] = &["serialise"];
pub(super) const AGENT_KEYS: &[&str] = &[
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
    "files",
    "overlap",
    "land",
];

pub(super) fn get<'a>(entries: &'a [Entry], key: &str) -> Option<&'a Entry> {
    entries.iter().find(|e| e.key == key)
}

/// The static name of an allowed key.
pub(super) fn known(keys: &'static [&'static str], key: &str) -> Option<&'static str> {
    keys.iter().copied().find(|k| *k == key)
}

/// Refuse keys outside `allowed`. `in_what` is "" for the top level, else " in [failure]"...
pub(super) fn check_keys(entries: &[Entry], allowed: &[&str], in_what: &str) -> Result<(), Bad> {
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

pub(super) fn string(item: &Item, what: &str) -> Result<String, Bad> {
    match &item.raw {
        Raw::Str(s) => Ok(s.clone()),
        other => Err(bad(
            &item.span,
            format!("{what} must be a string, not {}", other.kind()),
        )),
    }
}

/// An array of strings, each with its range.
pub(super) fn strings(
    item: &Item,
    what: &str,
    hint: &str,
) -> Result<Vec<(String, Range<usize>)>, Bad> {
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
pub(super) fn uint(item: &Item, what: &str) -> Result<u64, Bad> {
    match item.raw {
        Raw::Int(v) => u64::try_from(v)
            .map_err(|_| bad(&item.span, format!("{what} cannot be negative (got {v})"))),
        ref other => Err(bad(
            &item.span,
            format!("{what} must be a whole number, not {}", other.kind()),
        )),
    }
}

pub(super) fn uint32(item: &Item, what: &str) -> Result<u32, Bad> {
    let v = uint(item, what)?;
    u32::try_from(v).map_err(|_| bad(&item.span, format!("{what} is too large (got {v})")))
}

pub(super) fn read(text: &str, spans: &mut Spans) -> Result<Plan, Bad> {
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

    let mut policy = match get(&top, "failure") {
        None => RunPolicy::default(),
        Some(e) => read_failure(&e.value, spans)?,
    };
    if let Some(e) = get(&top, "landing") {
        policy.landing = read_landing(&e.value, spans)?;
    }

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

pub(super) fn read_failure(item: &Item, spans: &mut Spans) -> Result<RunPolicy, Bad> {
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

pub(super) fn read_landing(item: &Item, spans: &mut Spans) -> Result<Serialise, Bad> {
    let Raw::Table(t) = &item.raw else {
        return Err(bad(
            &item.span,
            format!(
                "landing must be a table, not {}: write it as a [landing] section",
                item.raw.kind()
            ),
        ));
    };
    check_keys(t, LANDING_KEYS, " in [landing]")?;
    let mut serialise = Serialise::None;
    if let Some(e) = get(t, "serialise") {
        spans.put(Loc::Landing("serialise"), e.value.span.clone());
        let word = string(&e.value, "[landing] serialise")?;
        serialise = match word.as_str() {
            "none" => Serialise::None,
            "overlapping" => Serialise::Overlapping,
            "all" => Serialise::All,
            _ => {
                return Err(bad(
                    &e.value.span,
                    format!(
                        "unknown [landing] serialise {word:?}; expected none, overlapping (two \
                         landings whose agents' files overlap never run at once) or all (no \
                         two landings at once)"
                    ),
                ));
            }
        };
    }
    Ok(serialise)
}

pub(super) fn read_agent(
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

    let mut files = Vec::new();
    if let Some(e) = get(t, "files") {
        let hint = if matches!(e.value.raw, Raw::Str(_)) {
            "; write files = [\"src/api.rs\", \"src/net/**\"]"
        } else {
            ""
        };
        let items = strings(&e.value, &format!("{who}: files"), hint)?;
        for (j, (file, span)) in items.into_iter().enumerate() {
            spans.put(Loc::AgentItem(i, "files", j), span);
            files.push(file);
        }
    }
    let overlap = match get(t, "overlap") {
        None => Overlap::Wait,
        Some(e) => {
            let word = string(&e.value, &format!("{who}: overlap"))?;
            match word.as_str() {
                "wait" => Overlap::Wait,
                "allow" => Overlap::Allow,
                _ => {
                    return Err(bad(
                        &e.value.span,
                        format!(
                            "{who}: unknown overlap {word:?}; expected wait (the default: it \
                             does not run at the same time as an agent whose files overlap its \
                             own) or allow"
                        ),
                    ));
                }
            }
        }
    };
    let land = match get(t, "land") {
        Some(e) => Some(argv("land", &e.value, spans)?),
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
        files,
        overlap,
        land,
        lands: None,
    })
}

/// A phase reference: a name (string), or a number counted from 1 (integer); the 0-based index.
pub(super) fn read_phase(item: &Item, who: &str, phases: &[String]) -> Result<u32, Bad> {
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
