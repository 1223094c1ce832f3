//! Session lifecycle: create, activate, import, transitions, archive and purge (pause and
//! resume are `super::pause`, above the scheduler; an import's recovery is `super::recovery`).

use maos_core::{
    AgentId, AgentOp, AgentState, SessionId, SessionOp, SessionState, Strategy, Workflow,
};
use maos_proto::{ErrorBody, ErrorCode, PauseInfo, SessionRecord};
use serde_json::json;

use crate::base::error::{bad_request as bad, invalid};
use crate::txn::state::Txn;

/// Longest objective accepted (it is shown in tables and briefings, not a document store).
const MAX_OBJECTIVE: usize = 4096;

/// A new session (it becomes the active one unless a live session is active).
pub fn create(
    tx: &mut Txn<'_>,
    objective: String,
    strategy: Strategy,
    phases: Vec<String>,
) -> Result<SessionId, ErrorBody> {
    let objective = objective.trim().to_string();
    if objective.is_empty() {
        return Err(bad("the objective is empty: say what the session is for"));
    }
    if objective.len() > MAX_OBJECTIVE {
        return Err(bad(format!(
            "the objective is {} bytes; the limit is {MAX_OBJECTIVE}",
            objective.len()
        )));
    }
    let workflow = Workflow::new(phases).map_err(|e| bad(e.to_string()))?;
    // A terminal active session does not count: the new session takes over.
    let takes_active = tx.state().active().is_none_or(|a| a.state.is_terminal());
    let previous = tx
        .state()
        .active()
        .filter(|_| takes_active)
        .map(|a| a.id.clone());
    if let Some(prev) = &previous {
        tx.session_mut(prev).active = false;
    }
    let id = SessionId::from_uuid(uuid::Uuid::new_v4());
    let rec = SessionRecord {
        id: id.clone(),
        objective,
        state: SessionState::Created,
        strategy,
        active: takes_active,
        created_at: tx.now,
        updated_at: tx.now,
        started_at: None,
        ended_at: None,
        workflow,
        paused_phases: Vec::new(),
        pause: None,
        resume_count: 0,
        errors: Vec::new(),
        notes: Vec::new(),
        policy: None,
        agents: Vec::new(),
        context: Default::default(),
        todos: Vec::new(),
        by_hooks: false,
    };
    let data = json!({
        "objective": rec.objective,
        "strategy": strategy,
        "phases": rec.workflow.phases.iter().map(|p| &p.name).collect::<Vec<_>>(),
        "active": takes_active,
    });
    tx.insert_session(rec);
    tx.event(Some(&id), None, "session_created", data);
    if takes_active {
        tx.event(
            Some(&id),
            None,
            "session_activated",
            json!({ "previous": previous }),
        );
    }
    Ok(id)
}

/// Make a session the project's active one.
pub fn activate(tx: &mut Txn<'_>, id: &SessionId) {
    let id = id.clone();
    let previous = tx.state().active().map(|a| a.id.clone());
    if previous.as_ref() != Some(&id) {
        if let Some(prev) = &previous {
            tx.session_mut(prev).active = false;
        }
        tx.session_mut(&id).active = true;
        tx.event(
            Some(&id),
            None,
            "session_activated",
            json!({ "previous": previous }),
        );
    }
}

/// `maos import`: a session file (maos's own export, or an orchestrator's session JSON)
/// becomes a session of this project. Its events join this timeline after the project's own,
/// in their order and with their times. Nothing runs by itself: a live session comes in
/// paused, and a managed agent that was running is reconciled like after a crash (resumable
/// or failed); it becomes the active session when no live one is. The connection has checked
/// that the database has none of its ids.
pub fn import(tx: &mut Txn<'_>, path: &str, text: &str) -> Result<SessionId, ErrorBody> {
    let file = maos_proto::export::parse(
        text,
        tx.now,
        SessionId::from_uuid(uuid::Uuid::new_v4()),
        || AgentId::from_uuid(uuid::Uuid::new_v4()),
    )
    .map_err(|e| bad(format!("{path}: {e}")))?;
    let mut rec = file.session;
    if tx.state().session(&rec.id).is_some()
        || rec.agents.iter().any(|a| tx.state().agent(&a.id).is_some())
    {
        return Err(bad(format!(
            "{path}: session {} (or one of its agents) is already in this project",
            rec.id
        )));
    }
    // The same bounds as the commands that make these by hand.
    let too_long = |what: &str, len: usize, max: usize| {
        bad(format!("{path}: {what} is {len} bytes; the limit is {max}"))
    };
    if rec.objective.len() > MAX_OBJECTIVE {
        return Err(too_long(
            "the objective",
            rec.objective.len(),
            MAX_OBJECTIVE,
        ));
    }
    if let Some(n) = rec
        .notes
        .iter()
        .find(|n| n.text.len() > super::brief::MAX_NOTE)
    {
        return Err(too_long("a note", n.text.len(), super::brief::MAX_NOTE));
    }
    // Declared files drive the scheduler's overlap checks: a plan file's bounds and its budget
    // of comparisons, also here (the scheduler compares them again, at the same cost). A
    // completed or cancelled session never runs an agent again: its specs are only kept; a
    // failed one runs again on `maos retry`, so it is checked as a live one is.
    let specs: Vec<Option<&maos_core::plan::AgentSpec>> =
        rec.agents.iter().map(|a| a.spec.as_deref()).collect();
    if !rec.state.is_terminal() || rec.state.retry().is_ok() {
        maos_core::plan::check_declared(&specs).map_err(|e| bad(format!("{path}: {e}")))?;
    }
    super::brief::cap_notes(&mut rec.notes);
    let sid = rec.id.clone();
    let agents = std::mem::take(&mut rec.agents);
    // A live session comes in as a created one would: the active one unless a live session
    // is active already (Some(the active session it takes over from, if any)).
    let takes_active = (!rec.state.is_terminal()
        && tx.state().active().is_none_or(|a| a.state.is_terminal()))
    .then(|| tx.state().active().map(|a| a.id.clone()));
    if let Some(Some(prev)) = &takes_active {
        tx.session_mut(prev).active = false;
    }
    rec.active = takes_active.is_some();
    if matches!(rec.state, SessionState::Running) {
        rec.state = SessionState::Paused;
        rec.pause = Some(PauseInfo {
            at: tx.now,
            by: Some("maos import".into()),
            reason: Some(format!("imported from {path}: run `maos resume` to go on")),
            in_progress: Vec::new(),
        });
    }
    // A finished session's phase that an older maos left running ends where the session
    // ended (it is not timed on, nor called stalled).
    let mut phase_ended = None;
    if rec.state.is_terminal() {
        let at = rec.ended_at.unwrap_or(tx.now);
        phase_ended = rec
            .workflow
            .end_with_session(rec.state == SessionState::Failed, at)
            .and_then(|(i, _)| rec.workflow.phases.get(i))
            .map(|p| (p.name.clone(), p.state));
    }
    tx.insert_session(rec);
    for mut a in agents {
        // A process of another machine or boot is not this daemon's to watch.
        a.process = None;
        tx.insert_agent(a);
    }
    // Old sequence numbers map to new ones; a checkpoint keeps the last event it included.
    let mut seqs = std::collections::BTreeMap::new();
    let imported = file.events.len();
    for e in file.events {
        let old = e.seq;
        let new = tx.import_event(maos_proto::EventRecord {
            session_id: Some(sid.clone()),
            ..e
        });
        seqs.insert(old, new);
    }
    for c in file.checkpoints {
        let seq = seqs.range(..=c.seq).next_back().map_or(0, |(_, new)| *new);
        tx.import_checkpoint(maos_store::CheckpointRow {
            session_id: sid.clone(),
            seq,
            ts: c.ts,
            reason: c.reason,
            state: c.state.to_string(),
        });
    }
    let mut data = json!({ "path": path, "events": imported, "format_version": file.version });
    if let Some(ended) = phase_ended {
        data["phase_ended"] = json!(ended);
    }
    tx.event(Some(&sid), None, "session_imported", data);
    if let Some(previous) = takes_active {
        tx.event(
            Some(&sid),
            None,
            "session_activated",
            json!({ "previous": previous }),
        );
    }
    Ok(sid)
}

/// Delete a finished session with everything it recorded (`maos gc`, after the export).
pub fn purge(tx: &mut Txn<'_>, id: &SessionId) -> Result<(), ErrorBody> {
    let id = id.clone();
    if let Some(s) = tx.state().session(&id) {
        if !s.state.is_terminal() {
            return Err(ErrorBody::new(
                ErrorCode::InvalidTransition,
                format!(
                    "session {id} is {}: only a finished session can be deleted",
                    s.state
                ),
            ));
        }
        if s.agents
            .iter()
            .any(|a| !tx.state().locks.held_by(&a.id).is_empty())
        {
            return Err(ErrorBody::new(
                ErrorCode::InvalidTransition,
                format!("session {id}'s agents still hold locks; release them first"),
            ));
        }
    }
    // Not about the session (its events go with it): the project's record of the deletion.
    tx.event(None, None, "session_deleted", json!({ "session": id }));
    tx.purge_session(&id);
    Ok(())
}

/// `maos session archive`: a finished session leaves memory (and `ps`, `session list`); the
/// database keeps it, its events and checkpoints, and `maos history` lists it.
/// Returns the session as it was archived.
pub fn archive(tx: &mut Txn<'_>, id: &SessionId) -> Result<SessionRecord, ErrorBody> {
    let s = tx
        .state()
        .session(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {id}")))?;
    if !s.state.is_terminal() {
        return Err(ErrorBody::new(
            ErrorCode::InvalidTransition,
            format!(
                "session {} is {}: only a finished session can be archived (complete, fail or \
                 cancel it first)",
                s.id, s.state
            ),
        ));
    }
    let held: usize = s
        .agents
        .iter()
        .map(|a| tx.state().locks.held_by(&a.id).len())
        .sum();
    if held > 0 {
        return Err(ErrorBody::new(
            ErrorCode::InvalidTransition,
            format!(
                "session {}'s agents still hold {}; release them first (`maos lock \
                 release-all --agent ID`)",
                s.id,
                maos_core::words::count(held, "lock")
            ),
        ));
    }
    let record = s.clone();
    tx.event(Some(&record.id), None, "session_archived", json!({}));
    tx.archive_session(&record.id);
    Ok(record)
}

fn event_name(op: SessionOp) -> &'static str {
    match op {
        SessionOp::Start => "session_started",
        SessionOp::Pause => "session_paused",
        SessionOp::Resume => "session_resumed",
        SessionOp::Complete => "session_completed",
        SessionOp::Fail => "session_failed",
        SessionOp::Cancel => "session_cancelled",
    }
}

/// Move a session through its lifecycle.
pub fn transition(
    tx: &mut Txn<'_>,
    id: &SessionId,
    op: SessionOp,
    reason: Option<String>,
    by: Option<String>,
) -> Result<(), ErrorBody> {
    let s = tx
        .state()
        .session(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {id}")))?;
    let next = s
        .state
        .apply(op)
        .map_err(|e| invalid(format!("session {}: {e}", id.short())))?;
    apply_session(tx, id, op, next, reason, by);
    Ok(())
}

/// Apply an already-validated session transition with its side effects and events.
pub fn apply_session(
    tx: &mut Txn<'_>,
    id: &SessionId,
    op: SessionOp,
    next: SessionState,
    reason: Option<String>,
    by: Option<String>,
) {
    let now = tx.now;
    let running: Vec<_> = tx
        .state()
        .session(id)
        .map(|s| {
            s.agents
                .iter()
                .filter(|a| a.state == AgentState::Running)
                .map(|a| a.id.clone())
                .collect()
        })
        .unwrap_or_default();
    let s = tx.session_mut(id);
    s.state = next;
    match op {
        SessionOp::Start => s.started_at = Some(now),
        SessionOp::Pause => {
            s.pause = Some(PauseInfo {
                at: now,
                by: by.clone(),
                reason: reason.clone(),
                in_progress: running.clone(),
            });
        }
        SessionOp::Resume => {
            s.pause = None;
            s.resume_count += 1;
        }
        SessionOp::Fail => {
            if let Some(r) = &reason {
                s.errors.push(maos_proto::ErrorRecord {
                    at: now,
                    message: r.clone(),
                    agent_id: None,
                });
            }
        }
        SessionOp::Complete | SessionOp::Cancel => {}
    }
    if next.is_terminal() {
        s.ended_at = Some(now);
        s.pause = None;
    }
    let resume_count = s.resume_count;
    let data = match op {
        SessionOp::Pause => json!({ "by": by, "reason": reason, "in_progress": running }),
        SessionOp::Resume => json!({ "by": by, "resume_count": resume_count }),
        _ => json!({ "reason": reason }),
    };
    tx.event(Some(id), None, event_name(op), data);
    if next.is_terminal() {
        end_running_phase(tx, id, next);
        end_live_agents(tx, id);
    }
}

/// A session that ends takes its running phase with it: failed when the session failed, else
/// skipped, with the phase's own event, so no phase is left "running" (and timed, and
/// called stalled) in a finished session.
pub fn end_running_phase(tx: &mut Txn<'_>, id: &SessionId, ended: SessionState) {
    let now = tx.now;
    let failed = ended == SessionState::Failed;
    let mut wf = match tx.state().session(id) {
        Some(s) if s.workflow.running().is_some() => s.workflow.clone(),
        _ => return,
    };
    let Some((idx, state)) = wf.end_with_session(failed, now) else {
        return;
    };
    let (name, attempt) = wf
        .phases
        .get(idx)
        .map(|p| (p.name.clone(), p.attempts))
        .unwrap_or_default();
    *tx.workflow_mut(id) = wf;
    let kind = if state == maos_core::PhaseState::Failed {
        "phase_failed"
    } else {
        "phase_skipped"
    };
    tx.event(
        Some(id),
        None,
        kind,
        json!({ "phase": name, "index": idx, "attempt": attempt,
                "reason": format!("session {ended}") }),
    );
}

/// A session that ends takes its unfinished agents with it: they are cancelled, each with its
/// own event, so no agent is left "running" in a finished session.
fn end_live_agents(tx: &mut Txn<'_>, id: &SessionId) {
    let live: Vec<_> = tx
        .state()
        .session(id)
        .map(|s| {
            s.agents
                .iter()
                .filter(|a| !a.state.is_terminal())
                .map(|a| a.id.clone())
                .collect()
        })
        .unwrap_or_default();
    for aid in live {
        super::effects::stop_process(tx, &aid);
        let now = tx.now;
        let a = tx.agent_mut(&aid);
        a.process = None;
        if let Ok(next) = a.state.apply(AgentOp::Cancel) {
            a.state = next;
            a.paused = false;
            a.pause = None;
            a.ended_at = Some(now);
            tx.event(
                Some(id),
                Some(&aid),
                "agent_cancelled",
                json!({ "reason": "session ended" }),
            );
            tx.release_agent(&aid, "was cancelled with its session");
        }
    }
}
