//! `POST /api/action`: pause, resume or cancel a session or one of its agents, as `maos pause`,
//! `maos resume` and `maos session cancel` / `maos agent cancel` do, recorded as "from the
//! dashboard by USER". The token must come in the `X-Maos-Token` header (the guard refuses it
//! in the URL for anything but a read), the body is JSON; a bad body is a 400 naming what is
//! wrong, and a refused action changes nothing (the daemon's own rule).

use axum::Json;
use axum::body::Bytes;
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{IntoResponse, Response};
use maos_client::client::whoami;
use maos_core::ids::{PrefixError, short};
use maos_core::{AgentOp, SessionOp};
use maos_proto::req;
use maos_proto::{Reply, Request, Target};
use serde::Deserialize;
use serde_json::json;

use crate::api::{ApiError, ask, open_project};
use crate::session::session_param;

/// The largest body an action takes: a few names and a reason.
const MAX_BODY: usize = 16 * 1024;

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct Action {
    project: String,
    session: String,
    /// One agent of the session instead of the whole session.
    #[serde(default)]
    agent: Option<String>,
    action: Verb,
    /// Why, recorded with the pause or the cancel.
    #[serde(default)]
    reason: Option<String>,
}

#[derive(Deserialize, Clone, Copy, PartialEq, Eq)]
#[serde(rename_all = "snake_case")]
enum Verb {
    Pause,
    Resume,
    Cancel,
}

impl Verb {
    fn done(self) -> &'static str {
        match self {
            Verb::Pause => "paused",
            Verb::Resume => "resumed",
            Verb::Cancel => "cancelled",
        }
    }
}

fn parse(headers: &HeaderMap, body: &[u8]) -> Result<Action, ApiError> {
    let json = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.starts_with("application/json"));
    if !json {
        return Err(ApiError(
            StatusCode::UNSUPPORTED_MEDIA_TYPE,
            "send the action as JSON (Content-Type: application/json)".into(),
        ));
    }
    if body.len() > MAX_BODY {
        return Err(ApiError(
            StatusCode::PAYLOAD_TOO_LARGE,
            format!(
                "an action of {} bytes is too large (at most {MAX_BODY})",
                body.len()
            ),
        ));
    }
    let a: Action = serde_json::from_slice(body).map_err(|e| {
        ApiError::bad(format!(
            "the action is not {{\"project\", \"session\", [\"agent\"], \"action\": \"pause\"|\"resume\"|\"cancel\", [\"reason\"]}}: {e}"
        ))
    })?;
    if a.agent.as_deref() == Some("") {
        return Err(ApiError::bad("agent: give an agent id, or leave it out"));
    }
    if a.reason.as_ref().is_some_and(|r| r.len() > 1024) {
        return Err(ApiError::bad("reason: at most 1024 bytes"));
    }
    Ok(a)
}

pub async fn act(headers: HeaderMap, body: Bytes) -> Result<Response, ApiError> {
    let a = parse(&headers, &body)?;
    let project = open_project(Some(a.project)).await?;
    let session = session_param(Some(a.session))?;
    let by = whoami();
    let from = format!(
        "from the dashboard by {}",
        by.as_deref().unwrap_or("someone")
    );
    let reason = Some(match a.reason.filter(|r| !r.trim().is_empty()) {
        Some(r) => format!("{r} ({from})"),
        None => from,
    });
    // An agent is named within its session: one of another session is not found.
    let agent = match &a.agent {
        Some(name) => Some(agent_of(&project, &session, name).await?),
        None => None,
    };
    let target = match &agent {
        Some(id) => Target::Agent(id.clone()),
        None => Target::Session,
    };
    let body = match (a.action, agent.clone()) {
        (Verb::Pause, _) => Request::Pause(req::Pause {
            session: Some(session.clone()),
            target,
            reason,
            by,
        }),
        (Verb::Resume, _) => Request::Resume(req::Resume {
            session: Some(session.clone()),
            target,
            by,
        }),
        (Verb::Cancel, None) => Request::SessionTransition(req::SessionTransition {
            session: Some(session.clone()),
            op: SessionOp::Cancel,
            reason,
        }),
        (Verb::Cancel, Some(agent)) => Request::AgentTransition(req::AgentTransition {
            agent,
            op: AgentOp::Cancel,
            exit_code: None,
            reason,
        }),
    };
    ask(Some(project), body).await?;
    let what = match &agent {
        Some(id) => format!("agent {}", short(id)),
        None => format!("session {}", short(&session)),
    };
    Ok(Json(json!({ "done": format!("{} {what}", a.action.done()) })).into_response())
}

/// The full id of the session's agent named `name` (an id or a unique prefix of one, as every
/// command takes it).
async fn agent_of(project: &str, session: &str, name: &str) -> Result<String, ApiError> {
    let agents = match ask(
        Some(project.to_string()),
        Request::AgentList(req::AgentList {
            session: Some(session.to_string()),
        }),
    )
    .await?
    {
        Reply::Agents(a) => a,
        _ => return Err(ApiError::unexpected()),
    };
    match maos_core::resolve_prefix(name, agents.iter().map(|a| a.id.as_str())) {
        Ok(id) => Ok(id.to_string()),
        Err(PrefixError::NotFound { .. }) => Err(ApiError(
            StatusCode::NOT_FOUND,
            format!("no agent {name:?} in session {}", short(session)),
        )),
        Err(e) => Err(ApiError::bad(format!("agent: {e}"))),
    }
}
