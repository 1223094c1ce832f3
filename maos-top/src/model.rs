//! What `maos top` shows, apart from how it is drawn: the projects it watches with their
//! sessions and recent events, the rows of the table (sessions, and their agents as a spawn
//! tree), the filter and the selection. No terminal and no socket here.

use std::collections::{HashMap, VecDeque};

use maos_core::{SpawnTree, Ts};
use maos_proto::{EventRecord, PsAgent, PsSession};

/// How many recent events each project keeps for the events pane.
pub const RECENT: usize = 200;

/// A project as `maos top` knows it.
#[derive(Debug, Default)]
pub struct Project {
    pub root: String,
    pub sessions: Vec<PsSession>,
    /// Newest last.
    pub recent: VecDeque<EventRecord>,
    /// Its live feed is lost: since when, and why.
    pub lost: Option<(Ts, String)>,
}

impl Project {
    pub fn new(root: String) -> Project {
        Project {
            root,
            ..Project::default()
        }
    }

    /// Keep `e` among the recent events (once, in order).
    pub fn record(&mut self, e: EventRecord) {
        if self.recent.back().is_some_and(|last| last.seq >= e.seq) {
            return;
        }
        self.recent.push_back(e);
        while self.recent.len() > RECENT {
            self.recent.pop_front();
        }
    }
}

/// One line of the table.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Row {
    /// A project's header (when several are watched).
    Project {
        project: usize,
    },
    Session {
        project: usize,
        session: usize,
    },
    Agent {
        project: usize,
        session: usize,
        agent: usize,
        depth: usize,
    },
    /// The line under an agent whose work would conflict with another worktree's (the
    /// conflict radar): it stands for the agent.
    Radar {
        project: usize,
        session: usize,
        agent: usize,
    },
}

/// What a selection or an action is about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Subject {
    Session {
        project: usize,
        id: String,
    },
    Agent {
        project: usize,
        session: String,
        id: String,
    },
}

/// Whether `text` matches the filter: every word of it appears (case-insensitively).
pub fn matches(filter: &str, text: &str) -> bool {
    let text = text.to_lowercase();
    filter
        .split_whitespace()
        .all(|w| text.contains(&w.to_lowercase()))
}

/// The words an agent is found by: id, role, CLI, state, task, and what it does now.
fn agent_words(a: &PsAgent, s: &PsSession) -> String {
    format!(
        "{} {} {} {} {} {}",
        a.id,
        a.role,
        a.cli.map_or("", |c| c.as_str()),
        maos_client::output::agent_state_word(a, s.state),
        a.task,
        a.todo.as_deref().unwrap_or("")
    )
}

fn session_words(s: &PsSession) -> String {
    format!("{} {} {}", s.id, s.state, s.objective)
}

/// The table's rows: per project (with a header when there are several), each session and its
/// agents in spawn-tree order. With a filter, a session is shown when it or one of its agents
/// matches, with the agents that match (and their ancestors, so the tree reads right).
pub fn rows(projects: &[Project], filter: &str) -> Vec<Row> {
    let mut rows = Vec::new();
    for (p, project) in projects.iter().enumerate() {
        if projects.len() > 1 {
            rows.push(Row::Project { project: p });
        }
        for (si, s) in project.sessions.iter().enumerate() {
            let tree = SpawnTree::new(s.agents.iter().map(|a| (a.id.clone(), a.parent.clone())));
            let index: HashMap<_, _> = s
                .agents
                .iter()
                .enumerate()
                .map(|(i, a)| (&a.id, i))
                .collect();
            let session_hit = filter.is_empty() || matches(filter, &session_words(s));
            // Agents that match, with their ancestors.
            let mut keep = vec![session_hit; s.agents.len()];
            if !session_hit {
                for (i, a) in s.agents.iter().enumerate() {
                    if matches(filter, &agent_words(a, s)) {
                        let mut at = Some(i);
                        while let Some(j) = at {
                            keep[j] = true;
                            at = s.agents[j]
                                .parent
                                .as_ref()
                                .and_then(|p| index.get(p).copied());
                        }
                    }
                }
            }
            if !session_hit && !keep.iter().any(|k| *k) {
                continue;
            }
            rows.push(Row::Session {
                project: p,
                session: si,
            });
            for id in tree.preorder() {
                let Some(&i) = index.get(&id) else { continue };
                if keep[i] {
                    rows.push(Row::Agent {
                        project: p,
                        session: si,
                        agent: i,
                        depth: tree.depth(&id),
                    });
                    if !s.agents[i].radar.is_empty() {
                        rows.push(Row::Radar {
                            project: p,
                            session: si,
                            agent: i,
                        });
                    }
                }
            }
        }
    }
    rows
}

/// The session or agent a row stands for (none for a project's header).
pub fn subject(projects: &[Project], row: &Row) -> Option<Subject> {
    match *row {
        Row::Project { .. } => None,
        Row::Session { project, session } => Some(Subject::Session {
            project,
            id: projects[project].sessions[session].id.to_string(),
        }),
        Row::Agent {
            project,
            session,
            agent,
            ..
        }
        | Row::Radar {
            project,
            session,
            agent,
        } => {
            let s = &projects[project].sessions[session];
            Some(Subject::Agent {
                project,
                session: s.id.to_string(),
                id: s.agents[agent].id.to_string(),
            })
        }
    }
}

/// Where `selected` is among `rows` now (it may have moved), else the nearest row to `at`.
pub fn reselect(
    projects: &[Project],
    rows: &[Row],
    selected: Option<&Subject>,
    at: usize,
) -> Option<usize> {
    if rows.is_empty() {
        return None;
    }
    selected
        .and_then(|want| {
            rows.iter()
                .position(|r| subject(projects, r).as_ref() == Some(want))
        })
        .or(Some(at.min(rows.len() - 1)))
}

/// Events that a person watching wants to notice: denials, deadlocks, conflicts, failures.
pub fn alarming(kind: &str) -> bool {
    matches!(
        kind,
        "tool_denied"
            | "lock_violated"
            | "deadlock_detected"
            | "conflict_detected"
            | "lock_timeout"
            | "agent_failed"
            | "session_failed"
            | "agent_start_failed"
            | "phase_failed"
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn session(id: &str, objective: &str, agents: serde_json::Value) -> PsSession {
        serde_json::from_value(json!({
            "id": id, "objective": objective, "state": "running", "strategy": "parallel",
            "active": true, "created_at": "2026-11-26T01:00:00Z", "phase": [0, 0],
            "agents": agents,
        }))
        .expect("a ps session")
    }

    fn agent(id: &str, role: &str, parent: Option<&str>) -> serde_json::Value {
        json!({"id": id, "role": role, "instance": 1, "task": format!("{role} work"),
               "state": "running", "paused": false, "parent": parent})
    }

    fn project(sessions: Vec<PsSession>) -> Project {
        Project {
            root: "/p".into(),
            sessions,
            ..Project::default()
        }
    }

    const S: &str = "sess_00000000000000000000000000000001";
    const A: &str = "agt_00000000000000000000000000000001";
    const B: &str = "agt_00000000000000000000000000000002";
    const C: &str = "agt_00000000000000000000000000000003";

    #[test]
    fn agents_follow_their_session_in_tree_order_and_a_filter_keeps_ancestors() {
        let p = vec![project(vec![session(
            S,
            "parse",
            json!([
                agent(A, "lead", None),
                agent(B, "other", None),
                agent(C, "lexer", Some(A))
            ]),
        )])];
        let all = rows(&p, "");
        let order: Vec<usize> = all
            .iter()
            .filter_map(|r| match r {
                Row::Agent { agent, .. } => Some(*agent),
                _ => None,
            })
            .collect();
        assert_eq!(order, [0, 2, 1], "the child under its parent");
        let hit = rows(&p, "LEXER");
        assert_eq!(hit.len(), 3, "session, lead (its parent), lexer: {hit:?}");
        assert!(rows(&p, "nothing like it").is_empty());
        assert_eq!(rows(&p, "parse").len(), 4, "the session matches: all of it");
    }

    #[test]
    fn the_selection_follows_its_subject_when_rows_move() {
        let mut p = vec![project(vec![session(S, "x", json!([agent(B, "b", None)]))])];
        let before = rows(&p, "");
        let picked = subject(&p, &before[1]);
        p[0].sessions[0].agents.insert(
            0,
            serde_json::from_value(agent(A, "a", None)).expect("agent"),
        );
        let after = rows(&p, "");
        assert_eq!(reselect(&p, &after, picked.as_ref(), 1), Some(2));
        assert_eq!(reselect(&p, &after, None, 99), Some(2), "clamped");
        assert_eq!(reselect(&p, &[], picked.as_ref(), 0), None);
    }

    #[test]
    fn an_agent_at_risk_has_its_radar_line_right_after_it_and_it_stands_for_the_agent() {
        let mut risky = agent(A, "a", None);
        risky["radar"] = json!([{"path": "src/api.rs", "other_worktree": "/r/wt-b",
                                 "other_agents": [B]}]);
        let p = vec![project(vec![session(
            S,
            "x",
            json!([risky, agent(B, "b", None)]),
        )])];
        let all = rows(&p, "");
        assert_eq!(
            all[1..],
            [
                Row::Agent {
                    project: 0,
                    session: 0,
                    agent: 0,
                    depth: 0
                },
                Row::Radar {
                    project: 0,
                    session: 0,
                    agent: 0
                },
                Row::Agent {
                    project: 0,
                    session: 0,
                    agent: 1,
                    depth: 0
                },
            ]
        );
        assert_eq!(subject(&p, &all[2]), subject(&p, &all[1]));
        assert_eq!(rows(&p, "b").len(), 2, "filtered out with its agent");
    }

    #[test]
    fn recent_events_keep_order_and_a_bound() {
        let mut p = Project::new("/p".into());
        let ev = |seq: u64| -> EventRecord {
            serde_json::from_value(json!({"seq": seq, "ts": "2026-11-26T01:00:00Z",
                "type": "lock_acquired", "session_id": null, "agent_id": null, "data": {}}))
            .expect("event")
        };
        for seq in 1..=(RECENT as u64 + 10) {
            p.record(ev(seq));
        }
        p.record(ev(3));
        assert_eq!(p.recent.len(), RECENT);
        assert_eq!(p.recent.back().map(|e| e.seq), Some(RECENT as u64 + 10));
    }
}
