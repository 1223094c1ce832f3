//! `GET /api/gantt?project=&session=[&from=MS&to=MS][&width=PX]`: a session's Gantt chart
//! (`maos_core::gantt`), as the daemon keeps it folded (maosd's `charts`): the page gets it
//! without the session's events crossing the socket.

use axum::Json;
use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maos_proto::req;
use maos_proto::{Reply, Request};
use serde::Deserialize;

use crate::api::{ApiError, ask, open_project};
use crate::session::session_param;

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
            v.parse::<i64>().map_err(|_| {
                ApiError::bad(format!(
                    "{name}: {v:?} is not a time in milliseconds since 1970 (up to the year 9999)"
                ))
            })
        })
        .transpose()
}

pub async fn gantt(Query(q): Query<ChartQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let session = session_param(q.session)?;
    let from_ms = millis("from", q.from)?;
    let to_ms = millis("to", q.to)?;
    let width_px = match q.width.filter(|w| !w.is_empty()) {
        None => 1_000,
        Some(w) => w.parse::<u32>().map_err(|_| {
            ApiError::bad(format!(
                "width: {w:?} is not a number of pixels from 1 to {}",
                maos_core::gantt::MAX_WIDTH
            ))
        })?,
    };
    // The daemon checks the window (and answers 400 with one line) and names the session.
    match ask(
        Some(project),
        Request::Gantt(req::Gantt {
            session,
            from_ms,
            to_ms,
            width_px,
        }),
    )
    .await?
    {
        Reply::Gantt(chart) => Ok(Json(chart).into_response()),
        _ => Err(ApiError::unexpected()),
    }
}
