//! The pages and the JSON API. Each answer comes from the daemon through the client's
//! connection (blocking, on tokio's blocking pool); a bad request is a 4xx with one line.

use axum::Json;
use axum::extract::Query;
use axum::http::{StatusCode, header};
use axum::response::{IntoResponse, Response};
use maos_client::client::{Client, ClientError};
use maos_proto::req;
use maos_proto::{ErrorCode, Reply, Request};
use serde::Deserialize;
use serde_json::json;

/// The page: markup, style and script in one file, embedded (no CDN; it works offline).
const PAGE: &str = include_str!("page.html");

/// A refusal or a failure, as `{"error": "..."}` with its status.
pub struct ApiError(pub StatusCode, pub String);

impl ApiError {
    /// A bad parameter: 400 and one line.
    pub fn bad(message: impl Into<String>) -> ApiError {
        ApiError(StatusCode::BAD_REQUEST, message.into())
    }

    /// The daemon answered a reply of another kind (a bug, or another version).
    pub fn unexpected() -> ApiError {
        ApiError(
            StatusCode::BAD_GATEWAY,
            "the daemon answered something else".into(),
        )
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        (self.0, Json(json!({ "error": self.1 }))).into_response()
    }
}

/// One request to the daemon, which must be running (the dashboard never starts one). Its
/// refusals keep their one line, with the status that says whose fault it is.
pub async fn ask(project: Option<String>, body: Request) -> Result<Reply, ApiError> {
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
        e => {
            let body = e.body();
            let status = match body.code {
                ErrorCode::NotFound => StatusCode::NOT_FOUND,
                ErrorCode::InvalidTransition => StatusCode::CONFLICT,
                ErrorCode::Internal | ErrorCode::Storage | ErrorCode::StorageFull => {
                    StatusCode::INTERNAL_SERVER_ERROR
                }
                ErrorCode::Unavailable | ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
                _ => StatusCode::BAD_REQUEST,
            };
            ApiError(status, body.message)
        }
    })
}

/// The page with the event types of the timeline's filter filled in (once).
static PAGE_FILLED: std::sync::LazyLock<String> = std::sync::LazyLock::new(|| {
    PAGE.replace(
        "/*EVENT_TYPES*/[]",
        &json!(maos_core::events::EVENT_TYPES).to_string(),
    )
});

pub async fn page() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/html; charset=utf-8"),
            (header::CACHE_CONTROL, "no-store"),
        ],
        PAGE_FILLED.as_str(),
    )
        .into_response()
}

/// The daemon's open projects (root, sessions, live sessions), then the projects it keeps on
/// disk that it has not opened since it started (`"open": false`): they open when looked at.
pub async fn projects() -> Result<Response, ApiError> {
    let open = match ask(None, Request::DaemonStatus).await? {
        Reply::Daemon(d) => d.projects,
        _ => return Err(ApiError::unexpected()),
    };
    let mut list: Vec<serde_json::Value> = open
        .iter()
        .map(|p| {
            let mut v = json!(p);
            v["open"] = json!(true);
            v
        })
        .collect();
    for root in on_disk() {
        if !open.iter().any(|p| p.root == root) {
            list.push(json!({ "root": root, "open": false }));
        }
    }
    Ok(Json(json!({ "projects": list })).into_response())
}

/// The roots of the projects under `$MAOS_HOME/projects/` (each directory's `project.json`).
fn on_disk() -> Vec<String> {
    #[derive(Deserialize)]
    struct Meta {
        root: String,
    }
    let Ok(home) = maos_proto::paths::home_dir() else {
        return Vec::new();
    };
    let Ok(dirs) = std::fs::read_dir(home.join("projects")) else {
        return Vec::new();
    };
    let mut roots: Vec<String> = dirs
        .flatten()
        .filter_map(|d| std::fs::read_to_string(d.path().join("project.json")).ok())
        .filter_map(|t| serde_json::from_str::<Meta>(&t).ok())
        .map(|m| m.root)
        .collect();
    roots.sort();
    roots
}

#[derive(Deserialize)]
pub struct SessionsQuery {
    project: Option<String>,
}

/// A project's sessions with their agents, finished ones too (`maos ps --all`); a live
/// session also has its ETA (`maos status`), when there is one.
pub async fn sessions(Query(q): Query<SessionsQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    let sessions = match ask(Some(project.clone()), Request::Ps(req::Ps { all: true })).await? {
        Reply::Ps(sessions) => sessions,
        _ => return Err(ApiError::unexpected()),
    };
    let mut out = Vec::with_capacity(sessions.len());
    for s in sessions {
        let mut eta = None;
        if !s.state.is_terminal() {
            let status = Request::Status(req::Status {
                session: Some(s.id.to_string()),
            });
            if let Ok(Reply::Status(st)) = ask(Some(project.clone()), status).await {
                eta = st.progress.eta;
            }
        }
        let mut v = json!(s);
        v["eta"] = json!(eta);
        out.push(v);
    }
    Ok(Json(json!({ "sessions": out })).into_response())
}

/// The `project` parameter, which must name a project the daemon has open or keeps on disk
/// (the dashboard makes none).
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
    if !open && !on_disk().contains(&project) {
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
