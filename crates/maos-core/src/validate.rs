//! `maos validate`: what does not add up in live sessions. Pure: the daemon supplies the facts
//! that need the system (is a process alive, which locks an agent holds, the last checkpoint).

use serde::{Deserialize, Serialize};

use crate::record::{ProcessInfo, SessionRecord};
use crate::{AgentId, AgentState, LockPath, SessionId, Ts};

/// An inconsistency found by `maos validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub session: SessionId,
    #[serde(default)]
    pub agent: Option<AgentId>,
    /// `running_without_process`, `process_gone`, `lock_of_finished_agent`, `stale_checkpoint`.
    pub kind: String,
    pub message: String,
}

/// What validation needs to know beyond the records.
pub trait Facts {
    /// This daemon is starting the agent's process (its supervisor has not answered yet).
    fn launching(&self, agent: &AgentId) -> bool;
    /// The process, or its supervisor, still runs.
    fn alive(&self, process: &ProcessInfo) -> bool;
    /// The paths the agent holds locks on.
    fn held(&self, agent: &AgentId) -> Vec<LockPath>;
    /// When the session's latest checkpoint was taken.
    fn last_checkpoint(&self, session: &SessionId) -> Option<Ts>;
}

/// Every problem of these sessions, session by session, agents in order.
pub fn check<'a>(
    sessions: impl IntoIterator<Item = &'a SessionRecord>,
    facts: &impl Facts,
) -> Vec<Problem> {
    let mut problems = Vec::new();
    let problem = |s: &SessionId, a: Option<&AgentId>, kind: &str, message: String| Problem {
        session: s.clone(),
        agent: a.cloned(),
        kind: kind.to_string(),
        message,
    };
    for s in sessions {
        for a in &s.agents {
            if a.spec.is_some()
                && a.state == AgentState::Running
                && !a.paused
                && !facts.launching(&a.id)
            {
                match &a.process {
                    None => problems.push(problem(
                        &s.id,
                        Some(&a.id),
                        "running_without_process",
                        format!("agent {} ({}) is running but has no process", a.id, a.role),
                    )),
                    Some(p) if !facts.alive(p) => problems.push(problem(
                        &s.id,
                        Some(&a.id),
                        "process_gone",
                        format!(
                            "agent {} ({}) is running but its process {} is gone; run `maos recover`",
                            a.id, a.role, p.pid
                        ),
                    )),
                    _ => {}
                }
            }
            if a.state.is_terminal() {
                for path in facts.held(&a.id) {
                    problems.push(problem(
                        &s.id,
                        Some(&a.id),
                        "lock_of_finished_agent",
                        format!("{} holds {} but is {}", a.id, path, a.state),
                    ));
                }
            }
        }
        if let Some(at) = facts.last_checkpoint(&s.id) {
            let later = s
                .agents
                .iter()
                .filter_map(|a| a.ended_at)
                .chain(s.workflow.phases.iter().filter_map(|p| p.ended_at))
                .any(|t| t > at);
            if later && s.policy.is_some() {
                problems.push(problem(
                    &s.id,
                    None,
                    "stale_checkpoint",
                    format!("the last checkpoint ({at}) is older than the session's state"),
                ));
            }
        }
    }
    problems
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    struct World {
        alive: bool,
        launching: bool,
        held: Vec<LockPath>,
        checkpoint: Option<Ts>,
    }

    impl Facts for World {
        fn launching(&self, _: &AgentId) -> bool {
            self.launching
        }
        fn alive(&self, _: &ProcessInfo) -> bool {
            self.alive
        }
        fn held(&self, _: &AgentId) -> Vec<LockPath> {
            self.held.clone()
        }
        fn last_checkpoint(&self, _: &SessionId) -> Option<Ts> {
            self.checkpoint
        }
    }

    fn session(agent_state: &str, process: bool, ended: Option<&str>) -> SessionRecord {
        let t = "2026-11-22T10:00:00Z";
        let spec = json!({ "name": "a", "role": "a", "task": "t", "command": ["true"] });
        let mut agent = json!({
            "id": "agt_00000000000000000000000000000001",
            "session_id": "sess_00000000000000000000000000000001", "role": "a", "instance": 1,
            "task": "t", "state": agent_state, "paused": false, "depends_on": [],
            "created_at": t, "updated_at": t, "ended_at": ended, "spec": spec,
        });
        if process {
            agent["process"] = json!({ "pid": 4242, "started_at": t });
        }
        let s = json!({
            "id": "sess_00000000000000000000000000000001", "objective": "v",
            "state": "running", "strategy": "parallel", "active": true, "created_at": t,
            "updated_at": t, "workflow": {"phases": [], "completed_at": null},
            "policy": { "on_failure": "fail_session", "retries": 0, "grace_ms": 5000 },
            "agents": [agent],
        });
        match serde_json::from_value(s) {
            Ok(s) => s,
            Err(e) => panic!("session record: {e}"),
        }
    }

    fn kinds(s: &SessionRecord, w: &World) -> Vec<String> {
        check([s], w).into_iter().map(|p| p.kind).collect()
    }

    fn world() -> World {
        World {
            alive: true,
            launching: false,
            held: vec![],
            checkpoint: None,
        }
    }

    #[test]
    fn a_sound_session_has_no_problem() {
        assert!(kinds(&session("running", true, None), &world()).is_empty());
    }

    #[test]
    fn each_kind_of_problem() {
        assert_eq!(
            kinds(&session("running", false, None), &world()),
            ["running_without_process"]
        );
        // Not while this daemon is starting it.
        let launching = World {
            launching: true,
            ..world()
        };
        assert!(kinds(&session("running", false, None), &launching).is_empty());
        let dead = World {
            alive: false,
            ..world()
        };
        let p = check([&session("running", true, None)], &dead);
        assert_eq!(p[0].kind, "process_gone");
        assert!(p[0].message.contains("4242") && p[0].message.contains("maos recover"));
        let held = World {
            held: vec![LockPath::root()],
            ..world()
        };
        assert_eq!(
            kinds(&session("completed", false, None), &held),
            ["lock_of_finished_agent"]
        );
        let ckpt = |at: &str| World {
            checkpoint: serde_json::from_value(json!(at)).ok(),
            ..world()
        };
        let ended = session("completed", false, Some("2026-11-22T11:00:00Z"));
        assert_eq!(
            kinds(&ended, &ckpt("2026-11-22T10:30:00Z")),
            ["stale_checkpoint"]
        );
        assert!(kinds(&ended, &ckpt("2026-11-22T11:30:00Z")).is_empty());
    }
}
