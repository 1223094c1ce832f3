//! Reads. Live state comes from memory only; history becomes an [`Outcome::History`] query that
//! the connection runs on the read pool.

use maos_core::Ts;
use maos_proto::{
    ErrorBody, EventFilter, PsAgent, PsLock, PsPlanAgent, PsSession, PsWait, Reply, SessionRecord,
    StatusView, req,
};
use maos_store::EventQuery;

use super::{Handle, Outcome};
use crate::txn::state::{State, Txn};

fn live_or_all(st: &State, all: bool) -> Vec<SessionRecord> {
    st.sessions()
        .iter()
        .filter(|s| all || !s.state.is_terminal() || s.active)
        .cloned()
        .collect()
}

impl Handle for req::SessionList {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        Ok(Reply::Sessions(live_or_all(tx.state(), self.all)).into())
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Sessions(Vec::new()))
    }
}

impl Handle for req::Ps {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        ps(tx.state(), self.all, tx.now)
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Ps(Vec::new()))
    }
}

fn ps(st: &State, all: bool, now: Ts) -> Result<Outcome, ErrorBody> {
    let waiters = st.locks.waiters();
    // Violations of files still held by their holder (issue 31 §2).
    let kept = crate::txn::keep::lock(&st.kept);
    let violations = |id: &maos_core::AgentId| {
        let mut v = kept.marks_of(id);
        v.retain(|m| {
            st.locks.held().any(|l| {
                l.holder == m.holder
                    && l.mode == maos_core::LockMode::Write
                    && l.path.as_str() == m.path
            })
        });
        v
    };
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
            // A finished session's figures stop at its end (no ETA, never stalled).
            progress: Some((&s.progress(now)).into()),
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
                    machine: a.machine.clone(),
                    activity: st.activity(&a.id).cloned(),
                    todo: s.current_todo(&a.id).map(|i| i.content.clone()),
                    violations: violations(&a.id),
                    radar: st
                        .radar
                        .as_ref()
                        .map(|r| r.at_risk(&a.id))
                        .unwrap_or_default(),
                    waits: waiters
                        .iter()
                        .filter(|w| w.holder == a.id)
                        .map(|w| PsWait {
                            path: w.path.to_string(),
                            mode: w.mode,
                            since: w.since,
                        })
                        .collect(),
                    plan: a.spec.as_ref().map(|spec| PsPlanAgent {
                        name: spec.name.clone(),
                        attempts: a.attempts,
                        max_attempts: s
                            .policy
                            .as_ref()
                            .map_or(1, |p| spec.retries(p).saturating_add(1)),
                        stage: spec.stage,
                        held: a.held.as_deref().cloned(),
                    }),
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

impl Handle for req::SessionShow {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let s = tx.state().resolve_session(self.session.as_deref())?;
        Ok(Reply::Session(Box::new(s.clone())).into())
    }
}

impl Handle for req::AgentList {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let s = tx.state().resolve_session(self.session.as_deref())?;
        Ok(Reply::Agents(s.agents.clone()).into())
    }
}

impl Handle for req::Status {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        let s = tx.state().resolve_session(self.session.as_deref())?;
        Ok(Reply::Status(Box::new(StatusView {
            session: s.clone(),
            // A finished session's figures stop where it ended (no ETA, never stalled).
            progress: s.progress(tx.now),
        }))
        .into())
    }
}

/// Resolve the names in a filter against live state (prefixes become full ids).
pub fn resolve_filter(
    st: &State,
    f: &EventFilter,
    limit: Option<u32>,
) -> Result<EventQuery, ErrorBody> {
    f.check().map_err(crate::base::error::bad_request)?;
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
        before_seq: f.before_seq,
        until_us: f.until.as_ref().map(maos_store::to_us),
        path: f.path.clone(),
        paths: f.paths.clone(),
        text: f.text.clone(),
        limit,
        oldest_first: f.oldest_first,
    }
}

impl Handle for req::Events {
    fn handle(self: Box<Self>, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        Ok(Outcome::History(Box::new(resolve_filter(
            tx.state(),
            &self.filter,
            self.limit,
        )?)))
    }

    fn empty_answer(&self) -> Option<Reply> {
        Some(Reply::Events(Vec::new()))
    }
}
