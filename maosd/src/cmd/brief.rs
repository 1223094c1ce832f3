//! `maos brief` and `maos note`: the daemon's side of the briefing. The briefing itself (what
//! goes where, the next step, the text) is [`maos_core::brief`]; here the session is found in
//! the project's live state with its locks, and notes are recorded with their caps.

use maos_core::Ts;
use maos_proto::{Briefing, ErrorBody, ErrorCode, Note, NoteKind, Reply};
use serde_json::json;

use super::{Outcome, bad};
use crate::state::{State, Txn};

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

/// `maos note KIND TEXT [--agent ID]`: record a fact for the briefing, with a `note_recorded`
/// event. The agent must belong to the session.
pub fn note(
    tx: &mut Txn<'_>,
    session: Option<&str>,
    agent: Option<&str>,
    kind: NoteKind,
    text: String,
) -> Result<Outcome, ErrorBody> {
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
    let st = tx.state();
    let s = st.resolve_session(session)?;
    let sid = s.id.clone();
    let agent = agent
        .map(|a| {
            st.resolve_agent(a, Some(&sid))
                .map(|a| (a.id.clone(), !a.state.is_terminal()))
                .map_err(|e| {
                    ErrorBody::new(
                        e.code,
                        format!("--agent {a}: {} (in session {sid})", e.message),
                    )
                })
        })
        .transpose()?;
    let now = tx.now;
    let aid = agent.as_ref().map(|(id, _)| id.clone());
    let notes = &mut tx.session_mut(&sid).notes;
    notes.push(Note {
        kind,
        text: text.to_string(),
        agent: aid.clone(),
        at: now,
    });
    cap_notes(notes);
    tx.event(
        Some(&sid),
        aid.as_ref(),
        "note_recorded",
        json!({ "kind": kind, "text": text }),
    );
    // A request naming a live agent is a sign of life.
    if let Some((id, true)) = &agent {
        tx.renew(id);
    }
    Ok(Reply::Done.into())
}

/// The briefing of a session (`None`: the active one) at `now`, from live state only.
pub fn brief(st: &State, session: Option<&str>, now: Ts) -> Result<Briefing, ErrorBody> {
    let s = st.resolve_session(session)?;
    let locks = match super::lock::list(st, Some(s.id.as_str()))? {
        Outcome::Reply(Reply::Locks(l)) => l.locks,
        _ => {
            return Err(ErrorBody::new(
                ErrorCode::Internal,
                "the lock list gave an unexpected answer",
            ));
        }
    };
    Ok(maos_core::brief::build(s, locks, now))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_session_keeps_its_newest_notes() {
        let t = "2026-11-22T10:00:00Z";
        let notes: Vec<_> = (0..MAX_NOTES - 1)
            .map(|i| json!({"kind": "done", "text": format!("{i} n"), "at": t}))
            .collect();
        let session = serde_json::from_value(json!({
            "id": "sess_00000000000000000000000000000001", "objective": "notes",
            "state": "running", "strategy": "adaptive", "active": true, "created_at": t,
            "updated_at": t, "workflow": {"phases": [], "completed_at": null}, "notes": notes,
        }))
        .expect("a session record");
        let mut st = State::new(vec![session], 0);
        let sid = st.sessions()[0].id.clone();
        for i in 0..3 {
            let mut tx = Txn::new(&mut st);
            note(&mut tx, None, None, NoteKind::Done, format!("new {i}")).expect("a note");
            let _ = tx.finish();
        }
        let notes = &st.session(&sid).expect("the session").notes;
        assert_eq!(notes.len(), MAX_NOTES);
        assert_eq!(notes[0].text, "2 n", "the two oldest went");
        assert_eq!(notes[MAX_NOTES - 1].text, "new 2");
    }
}
