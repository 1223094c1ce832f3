//! Agents: registration (dependencies, spawn tree) and their lifecycle.

use maos_core::{AgentId, AgentOp, AgentState, SessionId, find_cycle};
use maos_proto::{AgentRecord, ErrorBody, ErrorCode, ErrorRecord};
use serde_json::json;

use crate::base::error::{bad_request as bad, invalid};
use crate::txn::state::Txn;

const MAX_TEXT: usize = 4096;

pub fn check_text(what: &str, v: &str) -> Result<(), ErrorBody> {
    if v.trim().is_empty() {
        return Err(bad(format!("the {what} is empty")));
    }
    if v.len() > MAX_TEXT {
        return Err(bad(format!(
            "the {what} is {} bytes; the limit is {MAX_TEXT}",
            v.len()
        )));
    }
    Ok(())
}

/// Register an agent in a live session, pending. `depends_on` and `parent` name agents of
/// that session.
pub fn register(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    role: String,
    task: String,
    deps: Vec<AgentId>,
    parent: Option<AgentId>,
) -> Result<AgentId, ErrorBody> {
    check_text("role", &role)?;
    check_text("task", &task)?;
    let s = tx
        .state()
        .session(sid)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {sid}")))?;
    if s.state.is_terminal() {
        return Err(invalid(format!(
            "session {} is {}: a finished session takes no new agents",
            s.id, s.state
        )));
    }
    let sid = s.id.clone();
    let id = AgentId::from_uuid(uuid::Uuid::new_v4());
    // Dependencies name existing agents, so only a new edge could close a cycle; the check runs
    // over the whole session graph so that it stays true when plans register many at once.
    let mut graph: Vec<(AgentId, Vec<AgentId>)> = s
        .agents
        .iter()
        .map(|a| (a.id.clone(), a.depends_on.clone()))
        .collect();
    graph.push((id.clone(), deps.clone()));
    if let Some(cycle) = find_cycle(&graph) {
        let names: Vec<_> = cycle.iter().map(AgentId::as_str).collect();
        return Err(bad(format!("dependency cycle: {}", names.join(" -> "))));
    }
    let role = role.trim().to_string();
    let instance = s.agents.iter().filter(|a| a.role == role).count() as u32 + 1;
    let rec = AgentRecord {
        instance,
        parent,
        depends_on: deps,
        ..AgentRecord::pending(
            id.clone(),
            sid.clone(),
            role,
            task.trim().to_string(),
            tx.now,
        )
    };
    let data = json!({
        "role": rec.role, "instance": rec.instance, "task": rec.task,
        "depends_on": rec.depends_on, "parent": rec.parent,
    });
    tx.insert_agent(rec);
    tx.event(Some(&sid), Some(&id), "agent_registered", data);
    Ok(id)
}

fn event_name(op: AgentOp) -> &'static str {
    match op {
        AgentOp::Start => "agent_started",
        AgentOp::Interrupt => "agent_interrupted",
        AgentOp::Resume => "agent_resumed",
        AgentOp::Complete => "agent_completed",
        AgentOp::Fail => "agent_failed",
        AgentOp::Cancel => "agent_cancelled",
        AgentOp::End => "agent_ended",
    }
}

/// Move an agent through its lifecycle (`agent start` on an interrupted agent resumes it).
pub fn transition(
    tx: &mut Txn<'_>,
    id: &AgentId,
    op: AgentOp,
    exit_code: Option<i32>,
    reason: Option<String>,
) -> Result<(), ErrorBody> {
    let st = tx.state();
    let a = st
        .agent(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no agent {id}")))?;
    let id = a.id.clone();
    let sid = a.session_id.clone();
    // `agent start` on an interrupted agent means resuming it.
    let op = if op == AgentOp::Start && a.state == AgentState::Resumable {
        AgentOp::Resume
    } else {
        op
    };
    let next = a
        .state
        .apply(op)
        .map_err(|e| invalid(format!("agent {}: {e}", id.short())))?;
    if matches!(op, AgentOp::Start | AgentOp::Resume) {
        let s = st
            .session(&sid)
            .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "agent without session"))?;
        super::require::require_running(s, &format!("{op} agent {}", id.short()))?;
    }
    // Ended (or interrupted) by decision while its process runs: the process goes too. An
    // exit report clears `process` first, so a process that ended by itself is not signalled.
    if matches!(
        op,
        AgentOp::Complete | AgentOp::Fail | AgentOp::Cancel | AgentOp::Interrupt | AgentOp::End
    ) && tx.state().agent(&id).is_some_and(|a| a.process.is_some())
    {
        super::effects::stop_process(tx, &id);
        tx.agent_mut(&id).process = None;
    }
    let now = tx.now;
    let a = tx.agent_mut(&id);
    a.state = next;
    match op {
        AgentOp::Start => a.started_at = Some(now),
        AgentOp::Resume | AgentOp::Interrupt => {}
        AgentOp::Complete | AgentOp::Fail | AgentOp::Cancel | AgentOp::End => {
            a.ended_at = Some(now);
            a.paused = false;
            a.pause = None;
            if exit_code.is_some() {
                a.exit_code = exit_code;
            }
        }
    }
    let role = a.role.clone();
    if op == AgentOp::Fail {
        let message = match (&reason, exit_code) {
            (Some(r), _) => format!("agent {role} ({id}) failed: {r}"),
            (None, Some(c)) => format!("agent {role} ({id}) failed with exit code {c}"),
            (None, None) => format!("agent {role} ({id}) failed"),
        };
        tx.session_mut(&sid).errors.push(ErrorRecord {
            at: now,
            message,
            agent_id: Some(id.clone()),
        });
    }
    tx.event(
        Some(&sid),
        Some(&id),
        event_name(op),
        json!({ "exit_code": exit_code, "reason": reason }),
    );
    // Locks belong to live agents: one that ended or was interrupted lets go of them in the
    // same commit; any other change is a sign of life that renews its leases.
    match op {
        AgentOp::Complete | AgentOp::Fail | AgentOp::Cancel | AgentOp::Interrupt | AgentOp::End => {
            // "agent completed", "agent interrupted", ...: the event that let go of them.
            let why = event_name(op).replace('_', " ");
            tx.release_agent(&id, &why);
        }
        AgentOp::Start | AgentOp::Resume => {
            tx.renew(&id);
        }
    }
    Ok(())
}
