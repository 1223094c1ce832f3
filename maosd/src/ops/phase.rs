//! Phase transitions. The workflow enforces order and the completion rule; completing the last
//! phase is recorded as `workflow_completed` and completes a running session.

use maos_core::{CheckpointResult, PhaseOp, SessionId, SessionOp};
use maos_proto::{ErrorBody, ErrorCode, ErrorRecord};
use serde_json::{Value, json};

use crate::base::error::{bad_request as bad, invalid};
use crate::txn::state::Txn;

fn session<'a>(
    tx: &'a Txn<'_>,
    sid: &SessionId,
) -> Result<&'a maos_proto::SessionRecord, ErrorBody> {
    tx.state()
        .session(sid)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {sid}")))
}

fn event_name(op: PhaseOp) -> &'static str {
    match op {
        PhaseOp::Start => "phase_started",
        PhaseOp::Complete => "phase_completed",
        PhaseOp::Fail => "phase_failed",
        PhaseOp::Skip => "phase_skipped",
    }
}

/// Start, complete, fail or skip a phase (`None`: the current or running one).
pub fn transition(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    phase: Option<&str>,
    op: PhaseOp,
    artifacts: Value,
) -> Result<(), ErrorBody> {
    let s = session(tx, sid)?;
    let sid = s.id.clone();
    super::require::require_running(s, &format!("{op} a phase"))?;
    let wf = &s.workflow;
    let not_found =
        |e: maos_core::WorkflowError| ErrorBody::new(ErrorCode::NotFound, e.to_string());
    let idx = match phase {
        Some(p) => wf.resolve_cli(p).map_err(not_found)?,
        // Start and skip act on the current phase; complete and fail on the running one.
        None => match op {
            PhaseOp::Start | PhaseOp::Skip => wf.current(),
            PhaseOp::Complete | PhaseOp::Fail => wf.running(),
        }
        .ok_or_else(|| {
            invalid(if wf.phases.is_empty() {
                "this session has no phases".to_string()
            } else if wf.is_complete() {
                "the workflow is already complete".to_string()
            } else {
                "no phase is running; start one with `maos phase start`".to_string()
            })
        })?,
    };
    // Validate on a copy, so a refused change leaves the session untouched.
    let mut next = wf.clone();
    let now = tx.now;
    let completed = match op {
        PhaseOp::Start => next.start(idx, now).map(|()| false),
        PhaseOp::Complete => next.finish(idx, CheckpointResult::Passed, artifacts.clone(), now),
        PhaseOp::Fail => next.finish(idx, CheckpointResult::Failed, artifacts.clone(), now),
        PhaseOp::Skip => next.skip(idx, now),
    }
    .map_err(invalid)?;
    let name = next.phases[idx].name.clone();
    let attempts = next.phases[idx].attempts;
    let position = next.position();
    *tx.workflow_mut(&sid) = next;
    if op == PhaseOp::Fail {
        tx.session_mut(&sid).errors.push(ErrorRecord {
            at: now,
            message: format!("phase {name} failed its checkpoint (attempt {attempts})"),
            agent_id: None,
        });
    }
    tx.event(
        Some(&sid),
        None,
        event_name(op),
        json!({ "phase": name, "index": idx, "attempt": attempts, "artifacts": artifacts,
                "position": [position.0, position.1] }),
    );
    if completed {
        tx.event(
            Some(&sid),
            None,
            "workflow_completed",
            json!({ "phases": position.1 }),
        );
        let s = tx.state().session(&sid);
        if let Some(next) = s.and_then(|s| s.state.apply(SessionOp::Complete).ok()) {
            super::session::apply_session(
                tx,
                &sid,
                SessionOp::Complete,
                next,
                Some("last phase completed".into()),
                None,
            );
        }
    }
    Ok(())
}

/// Longest phase name, in bytes (an objective or a note may be longer; a phase is a title).
const MAX_PHASE_NAME: usize = 200;

/// `maos phase add NAME`: explicit plan growth. The phase is appended, planned, to a live
/// session's workflow (`phase_added`, and a checkpoint of the updated plan). A finished
/// workflow and a session that runs a plan (whose phases name its agents) do not grow.
pub fn add(tx: &mut Txn<'_>, sid: &SessionId, name: &str) -> Result<(), ErrorBody> {
    let name = name.trim();
    if name.len() > MAX_PHASE_NAME {
        return Err(bad(format!(
            "the phase name is {} bytes; the limit is {MAX_PHASE_NAME}",
            name.len()
        )));
    }
    let s = session(tx, sid)?;
    let sid = s.id.clone();
    if s.state.is_terminal() {
        return Err(invalid(format!(
            "cannot add a phase: session {sid} is {}; a finished session's plan does not change",
            s.state
        )));
    }
    if s.policy.is_some() {
        return Err(invalid(format!(
            "cannot add a phase: session {sid} runs a plan, whose phases are fixed once loaded"
        )));
    }
    let mut next = s.workflow.clone();
    let idx = next.add_phase(name.to_string()).map_err(|e| match e {
        maos_core::WorkflowError::Complete => invalid(format!(
            "cannot add a phase: the workflow of session {sid} is already complete"
        )),
        other => bad(other.to_string()),
    })?;
    let position = next.position();
    *tx.workflow_mut(&sid) = next;
    tx.event(
        Some(&sid),
        None,
        "phase_added",
        json!({ "phase": name, "index": idx, "position": [position.0, position.1] }),
    );
    tx.checkpoint(&sid, "plan updated (phase added)");
    Ok(())
}
