//! The wait-for graph as people look at it: who waits for whom, on which path, and whether the
//! waits close a cycle. Built from the lock table's listing (held locks and queued requests),
//! with the table's own rules: a queued request waits for every holder of a conflicting lock,
//! and for every request queued before it that conflicts with it (waiting is fair, first come
//! first served).

use serde::Serialize;

use crate::graph::find_cycle;
use crate::ids::AgentId;
use crate::lock::{LockMode, LockPath, conflicts};

/// A lock held, or a request queued, as the listing shows it.
#[derive(Clone, Debug, PartialEq)]
pub struct Claim {
    pub agent: AgentId,
    pub mode: LockMode,
    pub path: LockPath,
}

/// `waiter` waits for `holder` on `path` (the waiter's request).
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct WaitEdge {
    pub waiter: AgentId,
    pub holder: AgentId,
    pub path: String,
    pub mode: LockMode,
    /// The holder does not hold the path yet: it asked first and waits too.
    pub queued: bool,
}

/// The graph: its edges, and a cycle among them if there is one (agents along it, the first
/// not repeated at the end).
#[derive(Clone, Debug, Default, PartialEq, Serialize)]
pub struct WaitFor {
    pub edges: Vec<WaitEdge>,
    pub cycle: Option<Vec<AgentId>>,
}

/// The graph of `waiting` (in queue order: oldest first) against `held`.
pub fn wait_for(held: &[Claim], waiting: &[Claim]) -> WaitFor {
    let mut edges = Vec::new();
    for (i, w) in waiting.iter().enumerate() {
        let blockers = held
            .iter()
            .map(|h| (h, false))
            .chain(waiting[..i].iter().map(|q| (q, true)));
        for (b, queued) in blockers {
            if conflicts(&w.agent, w.mode, &w.path, &b.agent, b.mode, &b.path)
                && !edges.iter().any(|e: &WaitEdge| {
                    e.waiter == w.agent && e.holder == b.agent && e.path == w.path.as_str()
                })
            {
                edges.push(WaitEdge {
                    waiter: w.agent.clone(),
                    holder: b.agent.clone(),
                    path: w.path.as_str().to_string(),
                    mode: w.mode,
                    queued,
                });
            }
        }
    }
    let mut nodes: Vec<(AgentId, Vec<AgentId>)> = Vec::new();
    for e in &edges {
        match nodes.iter_mut().find(|(k, _)| k == &e.waiter) {
            Some((_, out)) => out.push(e.holder.clone()),
            None => nodes.push((e.waiter.clone(), vec![e.holder.clone()])),
        }
    }
    let cycle = find_cycle(&nodes);
    WaitFor { edges, cycle }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn agent(n: u128) -> AgentId {
        AgentId::from_uuid(uuid::Uuid::from_u128(n))
    }

    fn claim(n: u128, mode: LockMode, path: &str) -> Claim {
        Claim {
            agent: agent(n),
            mode,
            path: if path == "." {
                LockPath::root()
            } else {
                LockPath::new(path).expect("a path")
            },
        }
    }

    #[test]
    fn waiters_wait_for_conflicting_holders_and_earlier_requests() {
        use LockMode::*;
        let held = [
            claim(1, Write, "src/a.rs"),
            claim(2, Read, "src/b.rs"),
            claim(3, Directory, "docs"),
        ];
        let waiting = [
            // 4 waits for 1 (write on the same file).
            claim(4, Write, "src/a.rs"),
            // 5 reads b: readers share, nothing to wait for... but 6 below is queued after.
            claim(5, Write, "docs/x.md"),
            // 6 wants a too: behind holder 1 and behind the queued 4.
            claim(6, Read, "src/a.rs"),
        ];
        let g = wait_for(&held, &waiting);
        let pairs: Vec<(AgentId, AgentId, bool)> = g
            .edges
            .iter()
            .map(|e| (e.waiter.clone(), e.holder.clone(), e.queued))
            .collect();
        assert_eq!(
            pairs,
            vec![
                (agent(4), agent(1), false),
                (agent(5), agent(3), false),
                (agent(6), agent(1), false),
                (agent(6), agent(4), true),
            ]
        );
        assert_eq!(g.cycle, None);
    }

    #[test]
    fn a_cycle_is_found_and_an_agent_never_waits_for_itself() {
        use LockMode::*;
        // 1 holds a and waits for b; 2 holds b and waits for a.
        let held = [claim(1, Write, "a"), claim(2, Write, "b")];
        let waiting = [claim(1, Write, "b"), claim(2, Write, "a")];
        let g = wait_for(&held, &waiting);
        assert_eq!(g.edges.len(), 2);
        let cycle = g.cycle.expect("a cycle");
        assert_eq!(cycle.len(), 2);
        assert!(cycle.contains(&agent(1)) && cycle.contains(&agent(2)));
        // Its own lock blocks nobody: an upgrade request of the holder has no edge.
        let g = wait_for(&[claim(1, Read, "a")], &[claim(1, Write, "a")]);
        assert!(g.edges.is_empty() && g.cycle.is_none());
        // A workspace lock blocks every other request.
        let g = wait_for(&[claim(1, Workspace, ".")], &[claim(2, Read, "deep/x")]);
        assert_eq!(g.edges.len(), 1);
    }

    proptest! {
        /// Every edge joins two different agents whose claims conflict, and no pair is repeated.
        #[test]
        fn edges_are_real_conflicts(
            held in proptest::collection::vec((1u128..5, 0usize..4, 0usize..4), 0..6),
            waiting in proptest::collection::vec((1u128..5, 0usize..4, 0usize..4), 0..6),
        ) {
            let modes = [LockMode::Read, LockMode::Write, LockMode::Directory, LockMode::Workspace];
            let paths = ["a", "a/b", "c", "."];
            let mk = |v: &Vec<(u128, usize, usize)>| -> Vec<Claim> {
                v.iter().map(|&(a, m, p)| {
                    let mode = modes[m];
                    claim(a, mode, if mode == LockMode::Workspace { "." } else { paths[p] })
                }).collect()
            };
            let (held, waiting) = (mk(&held), mk(&waiting));
            let g = wait_for(&held, &waiting);
            for (i, e) in g.edges.iter().enumerate() {
                prop_assert_ne!(&e.waiter, &e.holder);
                let w = waiting.iter().find(|w| w.agent == e.waiter && w.path.as_str() == e.path);
                prop_assert!(w.is_some());
                prop_assert!(!g.edges[..i].iter().any(|x| x.waiter == e.waiter
                    && x.holder == e.holder && x.path == e.path));
            }
            if let Some(c) = &g.cycle {
                prop_assert!(c.len() >= 2);
            }
        }
    }
}
