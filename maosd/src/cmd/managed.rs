//! Requests about managed sessions and agents (plans, exits, recovery, validation, logs).

use maos_core::{AgentId, AgentOp, AgentState, SessionId};
use maos_proto::{AgentExit, ErrorBody, Problem, Reply};

use super::{Outcome, agent_reply, session_reply};
use crate::ops::process;
use crate::state::Txn;

/// `maos run PLAN` / `maos session create --plan PLAN`.
pub fn from_plan(
    tx: &mut Txn<'_>,
    path: &str,
    text: &str,
    start: bool,
) -> Result<Outcome, ErrorBody> {
    let sid = process::from_plan(tx, path, text, start)?;
    session_reply(tx, &sid)
}

/// `maos agent start|complete|...`.
pub fn agent_op(
    tx: &mut Txn<'_>,
    name: &str,
    op: AgentOp,
    exit_code: Option<i32>,
    reason: Option<String>,
) -> Result<Outcome, ErrorBody> {
    let id = tx.state().resolve_agent(name, None)?.id.clone();
    process::agent_op(tx, &id, op, exit_code, reason)?;
    agent_reply(tx, &id)
}

/// A supervisor reports a managed agent's exit.
pub fn exited(tx: &mut Txn<'_>, exit: AgentExit) -> Result<Outcome, ErrorBody> {
    process::exited(tx, exit)?;
    Ok(Reply::Done.into())
}

/// `maos recover [SESSION]`.
pub fn recover(tx: &mut Txn<'_>, session: Option<&str>) -> Result<Outcome, ErrorBody> {
    let report = process::recover(tx, session)?;
    Ok(Reply::Recovery(report).into())
}

/// `maos validate [SESSION]`: what does not add up.
pub fn validate(tx: &Txn<'_>, session: Option<&str>) -> Result<Outcome, ErrorBody> {
    let st = tx.state();
    let sessions: Vec<&maos_proto::SessionRecord> = match session {
        Some(name) => vec![st.resolve_session(Some(name))?],
        None => st
            .sessions()
            .iter()
            .filter(|s| !s.state.is_terminal())
            .collect(),
    };
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
                && !st.is_launching(&a.id)
            {
                match &a.process {
                    None => problems.push(problem(
                        &s.id,
                        Some(&a.id),
                        "running_without_process",
                        format!("agent {} ({}) is running but has no process", a.id, a.role),
                    )),
                    Some(p) if !process::live_process(Some(p)) => {
                        problems.push(problem(
                            &s.id,
                            Some(&a.id),
                            "process_gone",
                            format!(
                                "agent {} ({}) is running but its process {} is gone; run `maos recover`",
                                a.id, a.role, p.pid
                            ),
                        ))
                    }
                    _ => {}
                }
            }
            if a.state.is_terminal() {
                for l in st.locks.held_by(&a.id) {
                    problems.push(problem(
                        &s.id,
                        Some(&a.id),
                        "lock_of_finished_agent",
                        format!("{} holds {} but is {}", a.id, l.path, a.state),
                    ));
                }
            }
        }
        if let Some(at) = st.last_checkpoint(&s.id) {
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
    Ok(Reply::Validation(problems).into())
}

/// Where a managed agent's output goes.
pub fn log(tx: &Txn<'_>, agent: &str) -> Result<Outcome, ErrorBody> {
    let runner = process::runner(tx)?;
    let a = tx.state().resolve_agent(agent, None)?;
    let files = crate::procs::agent_files(&runner.project_dir, a.id.as_str());
    Ok(Reply::Log {
        agent: a.id.clone(),
        path: files.log.display().to_string(),
        state: a.state,
    }
    .into())
}
