//! Notes for the briefing, and the briefing of a session from the live state (the briefing
//! itself, what goes where and its text, is [`maos_core::brief`]).

use maos_core::{AgentId, SessionId, Ts};
use maos_proto::{Briefing, ErrorBody, ErrorCode, Note, NoteKind};
use serde_json::json;

use crate::base::error::bad_request as bad;
use crate::txn::state::{State, Txn};

/// Longest note accepted, in bytes.
pub const MAX_NOTE: usize = 4096;
/// Most notes a session keeps in its record: the newest. Every note stays on the timeline
/// (`note_recorded`), and the record is rewritten whole at each change of its session, so an
/// unbounded list would make every later change slower.
pub const MAX_NOTES: usize = 1000;

/// Keep the newest [`MAX_NOTES`] of `notes`; how many older ones were dropped.
pub fn cap_notes(notes: &mut Vec<Note>) -> usize {
    let excess = notes.len().saturating_sub(MAX_NOTES);
    notes.drain(..excess);
    excess
}

/// Record a note on a session, with a `note_recorded` event. `agent`: who wrote it, and
/// whether it is live (a live agent's request is a sign of life).
pub fn note(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    agent: Option<(AgentId, bool)>,
    kind: NoteKind,
    text: &str,
) -> Result<(), ErrorBody> {
    let text = text.trim();
    if text.is_empty() {
        return Err(bad(
            "the note is empty: say what was decided, done, went wrong or is left to do",
        ));
    }
    if text.len() > MAX_NOTE {
        return Err(bad(format!(
            "the note is {} bytes; the limit is {MAX_NOTE}",
            text.len()
        )));
    }
    let now = tx.now;
    let aid = agent.as_ref().map(|(id, _)| id.clone());
    let notes = &mut tx.session_mut(sid).notes;
    notes.push(Note {
        kind,
        text: text.to_string(),
        agent: aid.clone(),
        at: now,
    });
    cap_notes(notes);
    tx.event(
        Some(sid),
        aid.as_ref(),
        "note_recorded",
        json!({ "kind": kind, "text": text }),
    );
    if let Some((id, true)) = &agent {
        tx.renew(id);
    }
    Ok(())
}

/// The briefing of a session at `now`, from live state only.
pub fn briefing(st: &State, sid: &SessionId, now: Ts) -> Result<Briefing, ErrorBody> {
    let s = st
        .session(sid)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {sid}")))?;
    let locks = crate::txn::locks::held_views(st, Some(sid));
    Ok(maos_core::brief::build(s, locks, now))
}
