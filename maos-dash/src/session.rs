//! One session's views: `/api/session` (the session, its agents as `ps` shows them, its locks
//! and the wait-for graph), `/api/timeline` (its events, filtered and paged) and `/api/brief`.
//! Every parameter is checked here first; a bad one is a 400 naming it, and asks nothing of
//! the daemon.

use axum::Json;
use axum::extract::Query;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use maos_client::output::{doing_now, is_held};
use maos_core::lock::LockPath;
use maos_core::waitfor::{Claim, wait_for};
use maos_proto::req;
use maos_proto::{EventFilter, FilterNames, LockList, Reply, Request};
use serde::Deserialize;
use serde_json::json;

use crate::api::{ApiError, ask, open_project};

/// A page of the timeline holds at most this many events.
pub const MAX_PAGE: u32 = 500;
/// Without `limit`, a page holds this many.
const DEFAULT_PAGE: u32 = 100;
/// The longest `session` taken: an id is `sess_` and 32 hex digits.
const MAX_SESSION_NAME: usize = 64;

/// The timeline's parameters, as its refusals name them.
const TIMELINE_NAMES: FilterNames = FilterNames {
    path: "path",
    text: "q",
    since: "since",
    until: "until",
};

#[derive(Deserialize)]
pub struct SessionQuery {
    project: Option<String>,
    session: Option<String>,
}

/// The `session` parameter, which must be there (an id or a unique prefix; the daemon
/// resolves it).
pub fn session_param(s: Option<String>) -> Result<String, ApiError> {
    match s {
        Some(s) if !s.is_empty() && s.len() <= MAX_SESSION_NAME => Ok(s),
        Some(s) if s.len() > MAX_SESSION_NAME => Err(ApiError::bad(format!(
            "session: {} characters is no session id (see /api/sessions)",
            s.len()
        ))),
        _ => Err(ApiError::bad(
            "name a session: &session=ID (see /api/sessions)",
        )),
    }
}

/// The session as `maos status` sees it (progress with the ETA), its agents as `maos ps`
/// shows them (spawn tree, NOW), its locks and queued requests, and who waits for whom.
pub async fn session(Query(q): Query<SessionQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let wanted = session_param(q.session)?;
    let status = match ask(
        Some(project.clone()),
        Request::Status(req::Status {
            session: Some(wanted),
        }),
    )
    .await?
    {
        Reply::Status(s) => s,
        _ => return Err(ApiError::unexpected()),
    };
    let id = status.session.id.to_string();
    let ps = match ask(Some(project.clone()), Request::Ps(req::Ps { all: true })).await? {
        Reply::Ps(sessions) => sessions.into_iter().find(|s| s.id.as_str() == id),
        _ => return Err(ApiError::unexpected()),
    };
    let locks = match ask(
        Some(project),
        Request::LockList(req::LockList {
            session: Some(id.clone()),
        }),
    )
    .await
    {
        Ok(Reply::Locks(l)) => l,
        Ok(_) => return Err(ApiError::unexpected()),
        // A finished session holds nothing, and the lock table may not know it any more.
        Err(ApiError(StatusCode::NOT_FOUND, _)) => LockList {
            locks: Vec::new(),
            waiters: Vec::new(),
        },
        Err(e) => return Err(e),
    };
    let graph = graph_of(&locks);
    Ok(Json(json!({
        "session": status.session,
        "progress": status.progress,
        "agents": ps.map(|p| agents_of(&p)).unwrap_or_default(),
        "locks": locks,
        "waitfor": graph,
    }))
    .into_response())
}

/// A session's agents as `ps --json` gives them, each with what `maos ps` says of it: `now`
/// (its NOW: a refused call as a refusal, the lock it waits for, ...) and `held` (paused,
/// itself or with its session).
fn agents_of(s: &maos_proto::PsSession) -> Vec<serde_json::Value> {
    let now = chrono::Utc::now();
    s.agents
        .iter()
        .map(|a| {
            let mut v = serde_json::to_value(a).unwrap_or_default();
            if let Some(o) = v.as_object_mut() {
                o.insert("now".into(), doing_now(a, now).into());
                o.insert("held".into(), is_held(a, s.state).into());
            }
            v
        })
        .collect()
}

fn lock_path(p: &str) -> Option<LockPath> {
    if p == "." {
        Some(LockPath::root())
    } else {
        LockPath::new(p).ok()
    }
}

/// The wait-for graph of a lock listing (its waiters in the order they queued).
fn graph_of(l: &LockList) -> maos_core::waitfor::WaitFor {
    let held: Vec<Claim> = l
        .locks
        .iter()
        .filter_map(|h| {
            Some(Claim {
                agent: h.holder.clone(),
                mode: h.mode,
                path: lock_path(&h.path)?,
            })
        })
        .collect();
    let mut queued: Vec<_> = l.waiters.iter().collect();
    queued.sort_by_key(|w| w.since);
    let waiting: Vec<Claim> = queued
        .into_iter()
        .filter_map(|w| {
            Some(Claim {
                agent: w.agent.clone(),
                mode: w.mode,
                path: lock_path(&w.path)?,
            })
        })
        .collect();
    wait_for(&held, &waiting)
}

#[derive(Deserialize)]
pub struct TimelineQuery {
    project: Option<String>,
    session: Option<String>,
    /// Event types, comma-separated.
    #[serde(rename = "type")]
    types: Option<String>,
    agent: Option<String>,
    path: Option<String>,
    /// A text in the type or data.
    q: Option<String>,
    /// RFC 3339.
    since: Option<String>,
    until: Option<String>,
    /// Only events older than this sequence number (the next page back).
    before: Option<String>,
    /// Only events newer than this sequence number (the next page forward).
    after: Option<String>,
    limit: Option<String>,
}

pub fn number(name: &str, v: Option<String>, max: u64) -> Result<Option<u64>, ApiError> {
    v.filter(|v| !v.is_empty())
        .map(|v| match v.parse::<u64>() {
            Ok(n) if n <= max => Ok(n),
            _ => Err(ApiError::bad(format!(
                "{name}: {v:?} is not a whole number from 0 to {max}"
            ))),
        })
        .transpose()
}

fn time(name: &str, v: Option<String>) -> Result<Option<maos_core::Ts>, ApiError> {
    v.filter(|v| !v.is_empty())
        .map(|v| {
            chrono::DateTime::parse_from_rfc3339(&v)
                .map(|t| t.with_timezone(&chrono::Utc))
                .map_err(|_| {
                    ApiError::bad(format!(
                        "{name}: {v:?} is not an RFC 3339 time (2026-11-22T10:00:00Z)"
                    ))
                })
        })
        .transpose()
}

/// A page of a session's events, newest last: the newest `limit` matching ones (before
/// `before` when paging back), or the oldest after `after` (paging forward). `more` says
/// whether there are others past the page's far end.
pub async fn timeline(Query(q): Query<TimelineQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let session = session_param(q.session)?;
    let limit = match number("limit", q.limit, u64::from(MAX_PAGE))? {
        None => DEFAULT_PAGE,
        Some(0) => return Err(ApiError::bad("limit: a page holds at least 1 event")),
        Some(n) => n as u32,
    };
    let types: Vec<String> = q
        .types
        .iter()
        .flat_map(|t| t.split(','))
        .filter(|t| !t.is_empty())
        .map(str::to_string)
        .collect();
    for t in &types {
        maos_core::events::check_event_type(t)
            .map_err(|e| ApiError::bad(e.replacen("--type", "type", 1)))?;
    }
    let before = number("before", q.before, u64::MAX)?;
    let after = number("after", q.after, u64::MAX)?;
    if before.is_some() && after.is_some() {
        return Err(ApiError::bad(
            "before and after: give one of them (a page goes one way)",
        ));
    }
    let filter = EventFilter {
        session: Some(session),
        types,
        agent: q.agent.filter(|a| !a.is_empty()),
        since: time("since", q.since)?,
        until: time("until", q.until)?,
        path: q.path.filter(|p| !p.is_empty()),
        paths: Vec::new(),
        text: q.q.filter(|t| !t.is_empty()),
        before_seq: before,
        after_seq: after,
        oldest_first: after.is_some(),
        until_session_ends: false,
    };
    filter.check_named(&TIMELINE_NAMES).map_err(ApiError::bad)?;
    match ask(
        Some(project),
        Request::Events(req::Events {
            filter,
            limit: Some(limit + 1),
        }),
    )
    .await?
    {
        Reply::Events(mut events) => {
            let more = events.len() > limit as usize;
            if more {
                // One past the page: on the far side of where it goes.
                if after.is_some() {
                    events.pop();
                } else {
                    events.remove(0);
                }
            }
            Ok(Json(json!({ "events": events, "more": more })).into_response())
        }
        _ => Err(ApiError::unexpected()),
    }
}

/// What the next AI session would be told (`maos brief`), as data and as its text.
pub async fn brief(Query(q): Query<SessionQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let session = session_param(q.session)?;
    match ask(
        Some(project),
        Request::Brief(req::Brief {
            session: Some(session),
        }),
    )
    .await?
    {
        Reply::Brief(b) => {
            let text = maos_core::brief::text(&b);
            Ok(Json(json!({ "briefing": b, "text": text })).into_response())
        }
        _ => Err(ApiError::unexpected()),
    }
}
