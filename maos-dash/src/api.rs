//! The pages and the JSON API. Each answer comes from the daemon through the client's
//! connection (blocking, on tokio's blocking pool); a bad request is a 4xx with one line.

use axum::Json;
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maos_client::client::{Client, ClientError};
use maos_proto::{Reply, Request};
use serde::Deserialize;
use serde_json::json;

/// The page: markup, style and script in one file, embedded (no CDN; it works offline).
const PAGE: &str = include_str!("page.html");

/// A refusal or a failure, as `{"error": "..."}` with its status.
pub struct ApiError(StatusCode, String);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

/// One request to the daemon, which must be running (the dashboard never starts one).
async fn ask(project: Option<String>, body: Request) -> Result<Reply, ApiError> {
    let answer = tokio::task::spawn_blocking(move || {
        let mut c = Client::connect(false)?;
        c.request(project.as_deref(), body)
    })
    .await
    .map_err(|e| ApiError(StatusCode::INTERNAL_SERVER_ERROR, e.to_string()))?;
    answer.map_err(|e| match e {
        ClientError::Unavailable(m) => ApiError(
            StatusCode::SERVICE_UNAVAILABLE,
            format!("the daemon is not reachable: {m}"),
        ),
        e => ApiError(StatusCode::BAD_REQUEST, e.body().message),
    })
}

pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE,
    )
        .into_response()
}

/// The daemon's open projects: root, sessions, live sessions.
pub async fn projects() -> Result<Response, ApiError> {
    match ask(None, Request::DaemonStatus).await? {
        Reply::Daemon(d) => Ok(Json(json!({ "projects": d.projects })).into_response()),
        _ => Err(ApiError(
            StatusCode::BAD_GATEWAY,
            "the daemon answered something else".into(),
        )),
    }
}

#[derive(Deserialize)]
pub struct SessionsQuery {
    project: Option<String>,
}

/// A project's sessions with their agents, finished ones too (`maos ps --all`).
pub async fn sessions(Query(q): Query<SessionsQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    match ask(Some(project), Request::Ps { all: true }).await? {
        Reply::Ps(sessions) => Ok(Json(json!({ "sessions": sessions })).into_response()),
        _ => Err(ApiError(
            StatusCode::BAD_GATEWAY,
            "the daemon answered something else".into(),
        )),
    }
}

/// The `project` parameter, which must name a project the daemon has open (the dashboard
/// makes none).
pub async fn open_project(project: Option<String>) -> Result<String, ApiError> {
    let Some(project) = project.filter(|p| !p.is_empty()) else {
        return Err(ApiError(
            StatusCode::BAD_REQUEST,
            "name a project: ?project=ROOT (see /api/projects)".into(),
        ));
    };
    let open = match ask(None, Request::DaemonStatus).await? {
        Reply::Daemon(d) => d.projects.iter().any(|p| p.root == project),
        _ => false,
    };
    if !open {
        return Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no open project {project:?} (see /api/projects)"),
        ));
    }
    Ok(project)
}

pub async fn not_found() -> ApiError {
    ApiError(StatusCode::NOT_FOUND, "no such page".into())
}
