//! `GET /api/gantt?project=&session=[&from=MS&to=MS][&width=PX]`: a session's Gantt chart
//! (`maos_core::gantt`). The dashboard keeps one fold per session it was asked for and reads
//! only the events committed since, in pages, of the types the chart draws: a live page asking
//! again after each burst of events costs what is new, not the whole timeline.

use std::collections::HashMap;
use std::sync::Arc;

use axum::Json;
use axum::extract::{Query, State};
use axum::response::{IntoResponse, Response};
use maos_core::gantt::{GanttBuilder, TYPES, Window};
use maos_proto::{EventFilter, Reply, Request};
use serde::Deserialize;
use tokio::sync::Mutex;

use crate::Dash;
use crate::api::{ApiError, ask, open_project};
use crate::session::session_param;

/// Events read per request while catching up (well under the protocol's frame limit).
const PAGE: u32 = 5_000;
/// Sessions whose fold is kept; past this the cache starts again.
const KEPT: usize = 32;
/// The widest chart drawn.
const MAX_WIDTH: u32 = 10_000;

/// One session's fold, shared by the requests that read it (one at a time).
type Fold = Arc<Mutex<GanttBuilder>>;

/// The folds, per (project, full session id).
#[derive(Default)]
pub struct Charts {
    folds: std::sync::Mutex<HashMap<(String, String), Fold>>,
}

impl Charts {
    fn fold_of(&self, project: &str, session: &str) -> Fold {
        let mut folds = match self.folds.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        };
        if folds.len() >= KEPT && !folds.contains_key(&(project.into(), session.into())) {
            folds.clear();
        }
        folds
            .entry((project.to_string(), session.to_string()))
            .or_default()
            .clone()
    }
}

#[derive(Deserialize)]
pub struct ChartQuery {
    project: Option<String>,
    session: Option<String>,
    from: Option<String>,
    to: Option<String>,
    width: Option<String>,
}

fn millis(name: &str, v: Option<String>) -> Result<Option<i64>, ApiError> {
    v.filter(|v| !v.is_empty())
        .map(|v| {
            v.parse::<i64>()
                .ok()
                .filter(|n| (0..=253_402_300_799_000).contains(n))
                .ok_or_else(|| {
                    ApiError::bad(format!(
                        "{name}: {v:?} is not a time in milliseconds since 1970 (up to the year 9999)"
                    ))
                })
        })
        .transpose()
}

pub async fn gantt(
    State(dash): State<Arc<Dash>>,
    Query(q): Query<ChartQuery>,
) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let wanted = session_param(q.session)?;
    let from_ms = millis("from", q.from)?;
    let to_ms = millis("to", q.to)?;
    if let (Some(f), Some(t)) = (from_ms, to_ms)
        && t <= f
    {
        return Err(ApiError::bad(format!(
            "to ({t}) is not after from ({f}): the window holds nothing"
        )));
    }
    let width_px = match q.width.filter(|w| !w.is_empty()) {
        None => 1_000,
        Some(w) => w
            .parse::<u32>()
            .ok()
            .filter(|w| (1..=MAX_WIDTH).contains(w))
            .ok_or_else(|| {
                ApiError::bad(format!(
                    "width: {w:?} is not a number of pixels from 1 to {MAX_WIDTH}"
                ))
            })?,
    };
    // The session's full id (a prefix may name it), and that it exists.
    let (id, ended) = match ask(
        Some(project.clone()),
        Request::SessionShow {
            session: Some(wanted),
        },
    )
    .await?
    {
        Reply::Session(s) => (s.id.to_string(), s.ended_at),
        _ => return Err(ApiError::unexpected()),
    };
    // A finished session's chart ends where it ended, not now.
    let to_ms = to_ms.or(ended.map(|t| t.timestamp_millis() + 1));
    let fold = dash.charts.fold_of(&project, &id);
    let mut fold = fold.lock().await;
    loop {
        let filter = EventFilter {
            session: Some(id.clone()),
            types: TYPES.iter().map(|t| t.to_string()).collect(),
            after_seq: Some(fold.last_seq()),
            oldest_first: true,
            ..EventFilter::default()
        };
        let events = match ask(
            Some(project.clone()),
            Request::Events {
                filter,
                limit: Some(PAGE),
            },
        )
        .await?
        {
            Reply::Events(e) => e,
            _ => return Err(ApiError::unexpected()),
        };
        for e in &events {
            fold.fold(e);
        }
        if events.len() < PAGE as usize {
            break;
        }
    }
    let chart = fold.snapshot(
        chrono::Utc::now(),
        Window {
            from_ms,
            to_ms,
            width_px,
        },
    );
    Ok(Json(chart).into_response())
}
