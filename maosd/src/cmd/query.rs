//! Reads. Live state comes from memory only; history becomes an [`Outcome::History`] query that
//! the connection runs on the read pool.

use maos_core::{Progress, Ts, progress};
use maos_proto::{
    ErrorBody, EventFilter, PsAgent, PsLock, PsSession, PsWait, Reply, SessionRecord, StatusView,
};
use maos_store::EventQuery;

use super::Outcome;
use crate::state::State;

fn live_or_all(st: &State, all: bool) -> Vec<SessionRecord> {
    st.sessions()
        .iter()
        .filter(|s| all || !s.state.is_terminal() || s.active)
        .cloned()
        .collect()
}

pub fn session_list(st: &State, all: bool) -> Result<Outcome, ErrorBody> {
    Ok(Reply::Sessions(live_or_all(st, all)).into())
}

pub fn ps(st: &State, all: bool, now: Ts) -> Result<Outcome, ErrorBody> {
    let waiters = st.locks.waiters();
    let sessions = st
        .sessions()
        .iter()
        .filter(|s| all || !s.state.is_terminal() || s.active)
        .map(|s| PsSession {
            id: s.id.clone(),
            objective: s.objective.clone(),
            state: s.state,
            strategy: s.strategy,
            active: s.active,
            created_at: s.created_at,
            phase: s.workflow.position(),
            progress: Some((&progress_of(s, now)).into()),
            agents: s
                .agents
                .iter()
                .map(|a| PsAgent {
                    id: a.id.clone(),
                    role: a.role.clone(),
                    instance: a.instance,
                    task: a.task.clone(),
                    state: a.state,
                    paused: a.paused,
                    parent: a.parent.clone(),
                    started_at: a.started_at,
                    ended_at: a.ended_at,
                    cli: a.cli,
                    activity: st.activity(&a.id).cloned(),
                    todo: s
                        .todos
                        .iter()
                        .find(|t| t.agent == a.id)
                        .and_then(|t| t.items.iter().find(|i| i.status == "in_progress"))
                        .map(|i| i.content.clone()),
                    waits: waiters
                        .iter()
                        .filter(|w| w.holder == a.id)
                        .map(|w| PsWait {
                            path: w.path.to_string(),
                            mode: w.mode,
                            since: w.since,
                        })
                        .collect(),
                    locks: st
                        .locks
                        .held_by(&a.id)
                        .into_iter()
                        .map(|l| PsLock {
                            path: l.path.to_string(),
                            mode: l.mode,
                            token: l.token,
                        })
                        .collect(),
                })
                .collect(),
        })
        .collect();
    Ok(Reply::Ps(sessions).into())
}

pub fn session_show(st: &State, name: Option<&str>) -> Result<Outcome, ErrorBody> {
    Ok(Reply::Session(Box::new(st.resolve_session(name)?.clone())).into())
}

pub fn agent_list(st: &State, name: Option<&str>) -> Result<Outcome, ErrorBody> {
    Ok(Reply::Agents(st.resolve_session(name)?.agents.clone()).into())
}

/// A session's progress figures at `now` (`maos status`, and the briefing's progress).
pub(super) fn progress_of(s: &SessionRecord, now: Ts) -> Progress {
    let states: Vec<_> = s.agents.iter().map(|a| a.state).collect();
    progress(&s.workflow, &states, now)
}

pub fn status(st: &State, name: Option<&str>, now: Ts) -> Result<Outcome, ErrorBody> {
    let s = st.resolve_session(name)?;
    Ok(Reply::Status(Box::new(StatusView {
        session: s.clone(),
        progress: progress_of(s, now),
    }))
    .into())
}

/// Resolve the names in a filter against live state (prefixes become full ids).
pub fn resolve_filter(
    st: &State,
    f: &EventFilter,
    limit: Option<u32>,
) -> Result<EventQuery, ErrorBody> {
    let session_id = f
        .session
        .as_deref()
        .map(|s| st.resolve_session(Some(s)).map(|s| s.id.to_string()))
        .transpose()?;
    let agent_id = f
        .agent
        .as_deref()
        .map(|a| st.resolve_agent(a, None).map(|a| a.id.to_string()))
        .transpose()?;
    Ok(event_query(f, session_id, agent_id, limit))
}

/// The query of `f` once its session and agent are resolved to full ids.
pub fn event_query(
    f: &EventFilter,
    session_id: Option<String>,
    agent_id: Option<String>,
    limit: Option<u32>,
) -> EventQuery {
    EventQuery {
        session_id,
        agent_id,
        types: f.types.clone(),
        since_us: f.since.as_ref().map(maos_store::to_us),
        after_seq: f.after_seq,
        limit,
    }
}

pub fn events(st: &State, f: &EventFilter, limit: Option<u32>) -> Result<Outcome, ErrorBody> {
    Ok(Outcome::History(resolve_filter(st, f, limit)?))
}
