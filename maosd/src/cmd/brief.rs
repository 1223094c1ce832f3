//! `maos brief` and `maos note`: the daemon's side of the briefing. The briefing itself (what
//! goes where, the next step, the text) is [`maos_core::brief`]; here the session is found in
//! the project's live state with its locks, and notes are recorded with their caps.

use maos_core::{AgentId, SessionId, Ts};
use maos_proto::{Briefing, ErrorBody, NoteKind, Reply, req};

use super::{Handle, Outcome};
use crate::txn::state::{State, Txn};

/// `maos note KIND TEXT [--agent ID]`: the agent must belong to the session. Answers the
/// session.
impl Handle for req::Note {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        note(tx, *self)
    }
}

fn note(tx: &mut Txn<'_>, r: req::Note) -> Result<Outcome, ErrorBody> {
    let st = tx.state();
    let sid = st.resolve_session(r.session.as_deref())?.id.clone();
    let agent = r
        .agent
        .as_deref()
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
    crate::ops::brief::note(tx, &sid, agent, r.kind, &r.text)?;
    // An action answers with the record it changed: the session, its new note last.
    super::session_reply(tx, &sid)
}

/// A note of an agent named already (an MCP call's caller), in its session.
pub fn note_as(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    agent: Option<&AgentId>,
    kind: NoteKind,
    text: &str,
) -> Result<Outcome, ErrorBody> {
    let agent = agent.map(|id| {
        let live = tx.state().agent(id).is_some_and(|a| !a.state.is_terminal());
        (id.clone(), live)
    });
    crate::ops::brief::note(tx, sid, agent, kind, text)?;
    super::session_reply(tx, sid)
}

/// `maos brief`: the briefing of a session (`None`: the active one).
impl Handle for req::Brief {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let b = brief(tx.state(), self.session.as_deref(), tx.now)?;
        Ok(Reply::Brief(Box::new(b)).into())
    }
}

fn brief(st: &State, session: Option<&str>, now: Ts) -> Result<Briefing, ErrorBody> {
    let sid = st.resolve_session(session)?.id.clone();
    crate::ops::brief::briefing(st, &sid, now)
}

/// The briefing of a session named already (`None`: the active one).
pub fn brief_of(st: &State, session: Option<&SessionId>, now: Ts) -> Result<Briefing, ErrorBody> {
    match session {
        Some(sid) => crate::ops::brief::briefing(st, sid, now),
        None => brief(st, None, now),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ops::brief::MAX_NOTES;
    use serde_json::json;

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
            let r = req::Note {
                session: None,
                agent: None,
                kind: maos_proto::NoteKind::Done,
                text: format!("new {i}"),
            };
            note(&mut tx, r).expect("a note");
            let _ = tx.finish();
        }
        let notes = &st.session(&sid).expect("the session").notes;
        assert_eq!(notes.len(), MAX_NOTES);
        assert_eq!(notes[0].text, "2 n", "the two oldest went");
        assert_eq!(notes[MAX_NOTES - 1].text, "new 2");
    }
}
