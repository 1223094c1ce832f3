//! Agents whose declared files overlap: every two agents' files compared once, within a budget
//! ([`compare`] → [`FilePairs`]), and what derives from it: the plan's report
//! ([`FilePairs::report`], [`Plan::overlaps`]) and the pairs the scheduler keeps apart
//! ([`FilePairs::apart`]).

use std::cmp::Ordering;
use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::model::Plan;
use crate::pathglob::{MAX_WORK, Pattern, Work, parse};
use crate::spec::{AgentSpec, Overlap, Serialise};

#[cfg(test)]
mod tests;

/// Two agents of a plan whose declared `files` overlap.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileOverlap {
    /// The first agent's name (in file order).
    pub a: String,
    /// The second agent's name.
    pub b: String,
    /// The overlapping patterns, as written: `a`'s and `b`'s.
    pub files: Vec<(String, String)>,
    /// One of them says `overlap = "allow"`: they may run at the same time.
    pub allowed: bool,
}

/// Comparing every two agents' declared files would take more than [`MAX_WORK`] steps.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error(
    "comparing every two agents' declared files would take more than {MAX_WORK} steps (the \
     limit; agent {name:?}'s files bring it over): declare fewer patterns, or patterns with \
     fewer wildcards ('*', '?', '**')"
)]
pub struct TooMuchWork {
    /// The index of the agent whose comparisons ran over.
    pub agent: usize,
    /// Its name.
    pub name: String,
}

/// Two indices: of agents, or of two agents' patterns.
type Pair = (usize, usize);

/// The declared files of a plan's or a session's agents, every two agents compared once: which
/// overlap, and through which patterns. Built by [`compare`]; indices are the agents' as given.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct FilePairs {
    /// Per agent, the agent whose files it is compared as: itself, or for a landing agent that
    /// carries the very files of the agent it lands, that agent (so a plan with `land` costs
    /// no more than without). `None`: it declares no file.
    owner: Vec<Option<usize>>,
    /// The pairs of owners (i < j) whose files overlap, with the overlapping patterns' indices
    /// in their `files` (i's, j's), sorted.
    meets: Vec<((usize, usize), Vec<Pair>)>,
    /// Not compared (over the budget): every two agents with files are taken to overlap.
    assumed: bool,
}

/// Compare every two agents' declared files (`None`: an agent the rule does not know, such as
/// an unmanaged one), within [`MAX_WORK`] steps. The same agents always cost the same steps, and
/// a plan costs what the session made from it costs (its landing agents are compared as the
/// agents they land), so a plan accepted once stays within the budget wherever it is compared
/// again. Patterns that do not parse are left out (plans and imports are checked before).
pub fn compare(agents: &[Option<&AgentSpec>]) -> Result<FilePairs, TooMuchWork> {
    compare_within(agents, MAX_WORK).map(|(pairs, _)| pairs)
}

/// [`compare`] with another budget, and the steps it took.
pub(crate) fn compare_within(
    agents: &[Option<&AgentSpec>],
    limit: u64,
) -> Result<(FilePairs, u64), TooMuchWork> {
    let parsed: Vec<Vec<(usize, Pattern)>> = agents
        .iter()
        .map(|a| a.map_or_else(Vec::new, patterns))
        .collect();
    let owner = owners(agents, &parsed);
    let own: Vec<usize> = (0..agents.len()).filter(|&i| owner[i] == Some(i)).collect();
    let mut work = Work::new(limit);
    let mut meets = Vec::new();
    for (x, &i) in own.iter().enumerate() {
        for &j in &own[x + 1..] {
            let over = || TooMuchWork {
                agent: j,
                name: agents[j].map(|a| a.name.clone()).unwrap_or_default(),
            };
            let mut both = Vec::new();
            for (k, p) in &parsed[i] {
                for (l, q) in &parsed[j] {
                    if work.overlap(p, q).map_err(|_| over())? {
                        both.push((*k, *l));
                    }
                }
            }
            if !both.is_empty() {
                meets.push(((i, j), both));
            }
        }
    }
    let steps = work.steps();
    let pairs = FilePairs {
        owner,
        meets,
        assumed: false,
    };
    Ok((pairs, steps))
}

/// Each agent's owner (see [`FilePairs::owner`]).
fn owners(agents: &[Option<&AgentSpec>], parsed: &[Vec<(usize, Pattern)>]) -> Vec<Option<usize>> {
    let mut by_name: HashMap<&str, usize> = HashMap::new();
    for (i, a) in agents.iter().enumerate() {
        if let Some(a) = a
            && a.lands.is_none()
        {
            by_name.entry(a.name.as_str()).or_insert(i);
        }
    }
    agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let a = (*a)?;
            if parsed[i].is_empty() {
                return None;
            }
            let landed = a.lands.as_deref().and_then(|n| by_name.get(n)).copied();
            match landed {
                Some(k) if agents[k].is_some_and(|b| b.files == a.files) => Some(k),
                _ => Some(i),
            }
        })
        .collect()
}

/// An agent's declared patterns that parse, with their indices in `files`.
fn patterns(a: &AgentSpec) -> Vec<(usize, Pattern)> {
    a.files
        .iter()
        .enumerate()
        .filter_map(|(k, f)| parse(f).ok().map(|p| (k, p)))
        .collect()
}

impl FilePairs {
    /// What to assume of agents whose files were not compared (over the budget, in a session
    /// older than the budget): every two agents that declare files overlap. Kept apart, they
    /// still all run, one after another.
    pub fn assume_overlap(agents: &[Option<&AgentSpec>]) -> FilePairs {
        let parsed: Vec<Vec<(usize, Pattern)>> = agents
            .iter()
            .map(|a| a.map_or_else(Vec::new, patterns))
            .collect();
        FilePairs {
            owner: owners(agents, &parsed),
            meets: Vec::new(),
            assumed: true,
        }
    }

    /// The number of agents compared.
    pub fn len(&self) -> usize {
        self.owner.len()
    }

    /// Whether no agent was compared.
    pub fn is_empty(&self) -> bool {
        self.owner.is_empty()
    }

    /// The overlapping patterns' indices of two owners, `i < j`.
    fn of(&self, i: usize, j: usize) -> Option<&[(usize, usize)]> {
        self.meets
            .binary_search_by(|(k, _)| k.cmp(&(i, j)))
            .ok()
            .map(|at| self.meets[at].1.as_slice())
    }

    /// Whether the files of agents `i` and `j` overlap.
    pub fn meet(&self, i: usize, j: usize) -> bool {
        let (Some(Some(oi)), Some(Some(oj))) = (self.owner.get(i), self.owner.get(j)) else {
            return false;
        };
        oi == oj || self.assumed || self.of(*oi.min(oj), *oi.max(oj)).is_some()
    }

    /// The overlapping patterns of agents `i` and `j`, as written (`i`'s, `j`'s), in order;
    /// empty when they do not overlap, or were not compared. `agents` are those compared.
    pub fn files<'a>(
        &self,
        agents: &[Option<&'a AgentSpec>],
        i: usize,
        j: usize,
    ) -> Vec<(&'a str, &'a str)> {
        let (Some(Some(oi)), Some(Some(oj))) = (self.owner.get(i), self.owner.get(j)) else {
            return Vec::new();
        };
        let (Some(Some(a)), Some(Some(b))) = (agents.get(*oi), agents.get(*oj)) else {
            return Vec::new();
        };
        let text = |x: &'a AgentSpec, k: usize| x.files.get(k).map(String::as_str);
        let pairs: Vec<(usize, usize)> = match oi.cmp(oj) {
            // One owner (an agent with itself, or with its own landing agent, which carries
            // its very files: never compared, `meet` says they overlap): each pattern that
            // parses overlaps itself.
            Ordering::Equal => patterns(a).into_iter().map(|(k, _)| (k, k)).collect(),
            Ordering::Less => self.of(*oi, *oj).map(<[_]>::to_vec).unwrap_or_default(),
            Ordering::Greater => {
                let mut turned: Vec<(usize, usize)> = (self.of(*oj, *oi).unwrap_or_default())
                    .iter()
                    .map(|&(k, l)| (l, k))
                    .collect();
                turned.sort_unstable();
                turned
            }
        };
        pairs
            .into_iter()
            .filter_map(|(k, l)| Some((text(a, k)?, text(b, l)?)))
            .collect()
    }

    /// Every pair of agents (not landing agents) whose declared files overlap, in order: what
    /// a plan reports. `agents` are those compared.
    pub fn report(&self, agents: &[Option<&AgentSpec>]) -> Vec<FileOverlap> {
        let mut out = Vec::new();
        for ((i, j), _) in &self.meets {
            let (Some(Some(a)), Some(Some(b))) = (agents.get(*i), agents.get(*j)) else {
                continue;
            };
            if a.lands.is_some() || b.lands.is_some() {
                continue;
            }
            out.push(FileOverlap {
                a: a.name.clone(),
                b: b.name.clone(),
                files: self
                    .files(agents, *i, *j)
                    .into_iter()
                    .map(|(s, t)| (s.to_owned(), t.to_owned()))
                    .collect(),
                allowed: a.overlap == Overlap::Allow || b.overlap == Overlap::Allow,
            });
        }
        out
    }

    /// For each agent (`None`: one the rule does not apply to: unmanaged, or ended), the indices
    /// of the agents it must not run at the same time as:
    /// - two agents whose declared files overlap, unless one says `overlap = "allow"`;
    /// - two landing agents (`lands`), under `[landing] serialise = "all"`, or `"overlapping"`
    ///   when the files of the agents they land overlap (a landing agent carries them).
    ///
    /// An agent and a landing agent are never kept apart. Symmetric; O(agents²), no pattern
    /// compared (that was [`compare`]'s work). `agents` are those compared, or some of them
    /// left out (`None`).
    pub fn apart(&self, agents: &[Option<&AgentSpec>], landing: Serialise) -> Vec<Vec<usize>> {
        let mut out = vec![Vec::new(); agents.len()];
        let wants = |a: &AgentSpec| match a.lands {
            Some(_) => landing != Serialise::None,
            None => !a.files.is_empty() && a.overlap == Overlap::Wait,
        };
        let live: Vec<(usize, &AgentSpec)> = agents
            .iter()
            .enumerate()
            .filter_map(|(i, a)| (*a).filter(|a| wants(a)).map(|a| (i, a)))
            .collect();
        for (x, &(i, a)) in live.iter().enumerate() {
            for &(j, b) in &live[x + 1..] {
                let keep = match (a.lands.is_some(), b.lands.is_some()) {
                    (false, false) => self.meet(i, j),
                    (true, true) => landing == Serialise::All || self.meet(i, j),
                    _ => false,
                };
                if keep {
                    out[i].push(j);
                    out[j].push(i);
                }
            }
        }
        out
    }
}

impl Plan {
    /// Every pair of agents whose declared files overlap, in file order; `Err` when comparing
    /// them would take more than [`MAX_WORK`] steps (see [`compare`]).
    pub fn overlaps(&self) -> Result<Vec<FileOverlap>, TooMuchWork> {
        let agents: Vec<Option<&AgentSpec>> = self.agents.iter().map(Some).collect();
        Ok(compare(&agents)?.report(&agents))
    }
}

/// The declared files of a session's agents that did not come through a plan file's checks
/// (an imported session's specs): a plan's bounds ([`crate::pathglob::check_declared`]) and
/// its budget ([`compare`]), or what is wrong, in one line. `Ok`: the comparison.
/// A landing agent that carries the very files of the agent it lands is that agent's copy: its
/// files count once, as in the plan file they came from.
pub fn check_declared(agents: &[Option<&AgentSpec>]) -> Result<FilePairs, String> {
    let copy = |a: &AgentSpec| {
        a.lands.as_deref().is_some_and(|n| {
            agents
                .iter()
                .flatten()
                .any(|b| b.lands.is_none() && b.name == n && b.files == a.files)
        })
    };
    let declared = agents.iter().flatten().filter(|a| !copy(a));
    crate::pathglob::check_declared(declared.map(|a| a.files.as_slice()))?;
    compare(agents).map_err(|e| e.to_string())
}
