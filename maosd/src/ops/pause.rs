//! Pause and resume at every level: a session, one of its phases, one agent. Above the
//! scheduler: resuming an interrupted managed agent runs its process again
//! (`super::process::resume_agent`).

use maos_core::{
    AgentId, AgentOp, AgentState, SessionId, SessionOp, SessionState, agent_set_paused,
};
use maos_proto::{ErrorBody, ErrorCode, PauseInfo, Target};
use serde_json::json;

use crate::base::error::invalid;
use crate::txn::state::Txn;

/// What a pause or resume changed: the whole session (or a phase of it), or one agent.
pub enum Paused {
    Session,
    Agent(AgentId),
}

/// Pause or resume a session, one of its agents, or one of its phases (`pause`: which).
pub fn set_paused(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    target: Target,
    pause: bool,
    reason: Option<String>,
    by: Option<String>,
) -> Result<Paused, ErrorBody> {
    let s = tx
        .state()
        .session(sid)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {sid}")))?;
    let sid = s.id.clone();
    match target {
        Target::Session => {
            let op = if pause {
                SessionOp::Pause
            } else {
                SessionOp::Resume
            };
            // Managed agents interrupted by a crash are resumed with the session (their resume
            // command runs), also when the session itself kept running.
            let interrupted: Vec<AgentId> = s
                .agents
                .iter()
                .filter(|a| a.spec.is_some() && a.state == AgentState::Resumable)
                .map(|a| a.id.clone())
                .collect();
            let running: Vec<AgentId> = s
                .agents
                .iter()
                .filter(|a| a.state == AgentState::Running && !a.paused)
                .map(|a| a.id.clone())
                .collect();
            if pause && s.state.is_terminal() {
                return Err(invalid(format!(
                    "session {} is {}: nothing of it runs any more; `maos pause` without a session holds the project's next agent CLI window",
                    sid.short(),
                    s.state
                )));
            }
            if !pause && s.state == SessionState::Running && !interrupted.is_empty() {
                for id in &interrupted {
                    super::process::resume_agent(tx, id)?;
                }
                return Ok(Paused::Session);
            }
            let next = s
                .state
                .apply(op)
                .map_err(|e| invalid(format!("session {}: {e}", sid.short())))?;
            super::session::apply_session(tx, &sid, op, next, reason, by);
            // Their processes really stop (SIGSTOP to the group) and continue.
            super::effects::signal_agents(tx, &running, pause);
            if !pause {
                for id in &interrupted {
                    super::process::resume_agent(tx, id)?;
                }
            }
        }
        Target::Agent(agent) => {
            let a = tx.state().resolve_agent(&agent, Some(&sid))?;
            let aid = a.id.clone();
            if !pause && a.state == AgentState::Resumable {
                if a.spec.is_some() {
                    // A managed agent resumes by running its resume command.
                    super::process::resume_agent(tx, &aid)?;
                    return Ok(Paused::Agent(aid));
                }
                // Resuming an interrupted agent is the same as restarting it.
                super::agent::transition(tx, &aid, AgentOp::Resume, None, None)?;
                return Ok(Paused::Agent(aid));
            }
            agent_set_paused(a.state, a.paused, pause)
                .map_err(|e| invalid(format!("agent {}: {e}", aid.short())))?;
            let now = tx.now;
            let a = tx.agent_mut(&aid);
            a.paused = pause;
            a.pause = pause.then(|| {
                Box::new(PauseInfo {
                    at: now,
                    by: by.clone(),
                    reason: reason.clone(),
                    in_progress: Vec::new(),
                })
            });
            super::effects::signal_agents(tx, std::slice::from_ref(&aid), pause);
            tx.renew(&aid);
            let kind = if pause {
                "agent_paused"
            } else {
                "agent_resumed"
            };
            tx.event(
                Some(&sid),
                Some(&aid),
                kind,
                json!({ "by": by, "reason": reason }),
            );
            // The change is the agent's: answer with the agent, not its whole session.
            return Ok(Paused::Agent(aid));
        }
        Target::Phase(phase) => {
            let idx = s
                .workflow
                .resolve_cli(&phase)
                .map_err(|e| ErrorBody::new(ErrorCode::NotFound, e.to_string()))?;
            let p = &s.workflow.phases[idx];
            let pname = p.name.clone();
            if p.state.is_terminal() {
                return Err(invalid(format!(
                    "phase {pname} is {}: only an unfinished phase can be paused or resumed",
                    p.state
                )));
            }
            let paused = s.paused_phases.contains(&pname);
            if paused == pause {
                let now = if pause {
                    "already paused"
                } else {
                    "not paused"
                };
                return Err(invalid(format!("phase {pname} is {now}")));
            }
            let in_phase: Vec<AgentId> = s
                .agents
                .iter()
                .filter(|a| {
                    a.state == AgentState::Running
                        && !a.paused
                        && a.spec.as_ref().and_then(|x| x.phase) == Some(idx as u32)
                })
                .map(|a| a.id.clone())
                .collect();
            let sm = tx.session_mut(&sid);
            if pause {
                sm.paused_phases.push(pname.clone());
            } else {
                sm.paused_phases.retain(|p| p != &pname);
            }
            super::effects::signal_agents(tx, &in_phase, pause);
            let kind = if pause {
                "phase_paused"
            } else {
                "phase_resumed"
            };
            tx.event(
                Some(&sid),
                None,
                kind,
                json!({ "phase": pname, "by": by, "reason": reason }),
            );
        }
    }
    Ok(Paused::Session)
}
