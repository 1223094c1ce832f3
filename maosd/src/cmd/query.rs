//! Reads. Live state comes from memory only; history becomes an [`Outcome::History`] query that
//! the connection runs on the read pool.

use maos_core::{Ts, progress};
use maos_proto::{ErrorBody, EventFilter, Reply, SessionRecord, StatusView};
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

pub fn ps(st: &State, all: bool) -> Result<Outcome, ErrorBody> {
    let mut sessions = live_or_all(st, all);
    for a in sessions.iter_mut().flat_map(|s| s.agents.iter_mut()) {
        a.locks = st
            .locks
            .held_by(&a.id)
            .into_iter()
            .filter_map(|l| crate::locks::view(st, l))
            .collect();
    }
    Ok(Reply::Sessions(sessions).into())
}

pub fn session_show(st: &State, name: Option<&str>) -> Result<Outcome, ErrorBody> {
    Ok(Reply::Session(Box::new(st.resolve_session(name)?.clone())).into())
}

pub fn agent_list(st: &State, name: Option<&str>) -> Result<Outcome, ErrorBody> {
    Ok(Reply::Agents(st.resolve_session(name)?.agents.clone()).into())
}

pub fn status(st: &State, name: Option<&str>, now: Ts) -> Result<Outcome, ErrorBody> {
    let s = st.resolve_session(name)?;
    let states: Vec<_> = s.agents.iter().map(|a| a.state).collect();
    let progress = progress(&s.workflow, &states, now);
    Ok(Reply::Status(Box::new(StatusView {
        session: s.clone(),
        progress,
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
    Ok(EventQuery {
        session_id,
        agent_id,
        types: f.types.clone(),
        since_us: f.since.as_ref().map(maos_store::to_us),
        after_seq: f.after_seq,
        limit,
    })
}

pub fn events(st: &State, f: &EventFilter, limit: Option<u32>) -> Result<Outcome, ErrorBody> {
    Ok(Outcome::History(resolve_filter(st, f, limit)?))
}
