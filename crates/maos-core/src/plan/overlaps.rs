//! Agents whose declared files overlap: the plan's report ([`Plan::overlaps`]) and the pairs
//! the scheduler keeps apart ([`apart`]).

use serde::{Deserialize, Serialize};

use super::model::Plan;
use crate::pathglob::{Pattern, overlap, parse};
use crate::spec::{AgentSpec, Overlap, Serialise};

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

impl Plan {
    /// Every pair of agents whose declared files overlap, in file order.
    pub fn overlaps(&self) -> Vec<FileOverlap> {
        let parsed: Vec<Declared<'_>> = self.agents.iter().map(patterns).collect();
        let mut out = Vec::new();
        for (i, a) in self.agents.iter().enumerate() {
            for (j, b) in self.agents.iter().enumerate().skip(i + 1) {
                let files = common(&parsed[i], &parsed[j]);
                if files.is_empty() {
                    continue;
                }
                out.push(FileOverlap {
                    a: a.name.clone(),
                    b: b.name.clone(),
                    files,
                    allowed: a.overlap == Overlap::Allow || b.overlap == Overlap::Allow,
                });
            }
        }
        out
    }
}

/// An agent's declared patterns, each with its text as written.
type Declared<'a> = Vec<(&'a str, Pattern)>;

/// An agent's declared patterns that parse (a plan was checked before), with their text.
fn patterns(a: &AgentSpec) -> Declared<'_> {
    a.files
        .iter()
        .filter_map(|f| parse(f).ok().map(|p| (f.as_str(), p)))
        .collect()
}

/// The pairs of patterns that overlap.
fn common(a: &[(&str, Pattern)], b: &[(&str, Pattern)]) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for (s, p) in a {
        for (t, q) in b {
            if overlap(p, q) {
                out.push(((*s).to_owned(), (*t).to_owned()));
            }
        }
    }
    out
}

/// For each agent of a session (`None`: one the rule does not apply to: unmanaged, or ended),
/// the indices of the agents it must not run at the same time as:
/// - two agents of the plan whose declared files overlap, unless one says `overlap = "allow"`;
/// - two landing agents (`lands`), under `[landing] serialise = "all"`, or `"overlapping"`
///   when the files of the agents they land overlap (a landing agent carries them).
///
/// An agent and a landing agent are never kept apart. Symmetric; O(agents² × files²) for the
/// agents given (the daemon leaves ended ones out).
pub fn apart(agents: &[Option<&AgentSpec>], landing: Serialise) -> Vec<Vec<usize>> {
    let mut out = vec![Vec::new(); agents.len()];
    let wants = |a: &AgentSpec| match a.lands {
        Some(_) => landing != Serialise::None,
        None => !a.files.is_empty() && a.overlap == Overlap::Wait,
    };
    if !agents.iter().flatten().any(|a| wants(a)) {
        return out;
    }
    let parsed: Vec<Option<(&AgentSpec, Declared<'_>)>> = agents
        .iter()
        .map(|a| a.filter(|a| wants(a)).map(|a| (a, patterns(a))))
        .collect();
    for (i, x) in parsed.iter().enumerate() {
        let Some((a, pa)) = x else { continue };
        for (j, y) in parsed.iter().enumerate().skip(i + 1) {
            let Some((b, pb)) = y else { continue };
            let files_meet = || {
                pa.iter()
                    .any(|(_, p)| pb.iter().any(|(_, q)| overlap(p, q)))
            };
            let keep = match (a.lands.is_some(), b.lands.is_some()) {
                (false, false) => files_meet(),
                (true, true) => landing == Serialise::All || files_meet(),
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
