//! The wait-for graph, computed on demand from the table: an agent waits for every agent holding
//! a lock that conflicts with one of its queued requests, and for every agent with an earlier
//! queued request that conflicts with it. The graph is kept acyclic: a new wait is checked with
//! a depth-first search from that wait only, when it forms.

use std::collections::{BTreeSet, HashSet};

use super::table::LockTable;
use super::{CycleEdge, DeadlockVictim, LockError, LockPath, WaitId};
use crate::{AgentId, Ts};

/// One wait-for edge: `waiter` waits for `target` because of its wait `wait` (`None`: the
/// request being decided, not queued yet).
#[derive(Clone, Copy, Debug)]
struct Edge<'a> {
    waiter: &'a AgentId,
    wait: Option<WaitId>,
    target: &'a AgentId,
}

impl LockTable {
    /// The out-edges of an agent (one per target agent, first reason wins), ignoring `removed`
    /// waits.
    fn agent_edges<'a>(&'a self, agent: &'a AgentId, removed: &BTreeSet<WaitId>) -> Vec<Edge<'a>> {
        let mut out: Vec<Edge<'a>> = Vec::new();
        let Some(waits) = self.waits_by_holder.get(agent) else {
            return out;
        };
        for &id in waits {
            let Some(w) = self.waits.get(&id) else {
                continue;
            };
            if removed.contains(&id) {
                continue;
            }
            let holders = self.conflicting_holders(agent, w.mode, &w.path);
            let queued = self.conflicting_waiters(agent, w.mode, &w.path, id, removed);
            let targets = holders
                .iter()
                .filter_map(|t| self.locks.get(t).map(|e| &e.lock.holder))
                .chain(
                    queued
                        .iter()
                        .filter_map(|q| self.waits.get(q).map(|o| &o.holder)),
                );
            for target in targets {
                // An agent waits for few others: a linear scan beats hashing.
                if !out.iter().any(|e| e.target == target) {
                    out.push(Edge {
                        waiter: agent,
                        wait: Some(id),
                        target,
                    });
                }
            }
        }
        out
    }

    /// Depth-first search from `start` along `first`, then along every agent's edges: the first
    /// path of edges reaching an agent for which `goal` holds.
    fn find_path<'a>(
        &'a self,
        start: &'a AgentId,
        first: Vec<Edge<'a>>,
        goal: impl Fn(&AgentId) -> bool,
        removed: &BTreeSet<WaitId>,
    ) -> Option<Vec<Edge<'a>>> {
        let mut visited: HashSet<&AgentId> = HashSet::from([start]);
        let mut stack: Vec<(Vec<Edge<'a>>, usize)> = vec![(first, 0)];
        while let Some((edges, next)) = stack.last_mut() {
            let Some(&edge) = edges.get(*next) else {
                stack.pop();
                continue;
            };
            *next += 1;
            if goal(edge.target) {
                let path = stack
                    .iter()
                    .filter_map(|(edges, next)| edges.get(next.wrapping_sub(1)).copied())
                    .collect();
                return Some(path);
            }
            if visited.insert(edge.target) {
                let out = self.agent_edges(edge.target, removed);
                stack.push((out, 0));
            }
        }
        None
    }

    /// Whether `agent`, through its current waits, transitively waits for any of `goals`.
    pub(super) fn reaches(&self, agent: &AgentId, goals: &BTreeSet<&AgentId>) -> bool {
        if !self.waits_by_holder.contains_key(agent) {
            return false;
        }
        let removed = BTreeSet::new();
        let first = self.agent_edges(agent, &removed);
        self.find_path(agent, first, |a| goals.contains(a), &removed)
            .is_some()
    }

    /// Deadlock resolution for a request about to be queued, blocked by `holders` (tokens) and
    /// `queued` (earlier waits). While its edges close a cycle, the youngest agent of the cycle
    /// loses: the requester → `Err(Deadlock)` (nothing changes); another agent → its wait on
    /// the cycle becomes a victim (returned; the caller removes it) and the search repeats.
    pub(super) fn deadlock_victims(
        &self,
        requester: &AgentId,
        born: Ts,
        path: &LockPath,
        holders: &[u64],
        queued: &[WaitId],
    ) -> Result<Vec<DeadlockVictim>, LockError> {
        let mut removed: BTreeSet<WaitId> = BTreeSet::new();
        let mut victims = Vec::new();
        loop {
            let mut seen: HashSet<&AgentId> = HashSet::new();
            let first: Vec<Edge> = holders
                .iter()
                .filter_map(|t| self.locks.get(t).map(|e| &e.lock.holder))
                .chain(
                    queued
                        .iter()
                        .filter(|q| !removed.contains(q))
                        .filter_map(|q| self.waits.get(q).map(|w| &w.holder)),
                )
                .filter(|a| seen.insert(a))
                .map(|target| Edge {
                    waiter: requester,
                    wait: None,
                    target,
                })
                .collect();
            let Some(edges) = self.find_path(requester, first, |a| a == requester, &removed) else {
                return Ok(victims);
            };
            let cycle: Vec<CycleEdge> = edges
                .iter()
                .map(|e| CycleEdge {
                    waiter: e.waiter.clone(),
                    path: e
                        .wait
                        .and_then(|w| self.waits.get(&w))
                        .map_or_else(|| path.clone(), |w| w.path.clone()),
                    holder: e.target.clone(),
                })
                .collect();
            let born_of = |e: &Edge| {
                e.wait
                    .and_then(|w| self.waits.get(&w))
                    .map_or(born, |w| w.born)
            };
            let youngest = edges.iter().max_by_key(|e| (born_of(e), e.waiter));
            match youngest.and_then(|e| e.wait.map(|w| (w, e))) {
                Some((wait, e)) => {
                    removed.insert(wait);
                    victims.push(DeadlockVictim {
                        wait,
                        holder: e.waiter.clone(),
                        cycle,
                        foreign: self
                            .waits
                            .get(&wait)
                            .and_then(|w| w.foreign.as_ref())
                            .map(|f| f.key.clone()),
                    });
                }
                None => return Err(LockError::Deadlock { cycle }),
            }
        }
    }
}
