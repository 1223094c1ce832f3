//! The requests a connection answers from the project's read pool: the actor never waits for
//! them (database health, history, export, backup), and the check an import makes there
//! before the actor sees it (the database must not have its ids, archived ones included).

use maos_proto::{ErrorBody, ErrorCode, Reply, Request};

use crate::project::{ProjectHandle, storage_error};

/// The answer to `body` if it is one of these reads; an import whose ids the database has is
/// refused here. None: the actor handles it.
pub async fn answer(handle: &ProjectHandle, body: &Request) -> Option<Result<Reply, ErrorBody>> {
    match body {
        Request::DbCheck => Some(health(handle, None).await.map(Reply::DbCheck)),
        Request::Backup { path } => Some(
            health(handle, Some(std::path::Path::new(path)))
                .await
                .map(Reply::Backup),
        ),
        Request::History { limit } => Some(
            handle
                .reader()
                .history(*limit)
                .await
                .map(Reply::History)
                .map_err(|e| storage_error(&e)),
        ),
        Request::Export { session } => Some(export(handle, session).await),
        Request::Import { path, text } => import_check(handle, path, text).await.err().map(Err),
        _ => None,
    }
}

/// The database's health, or (with `backup`) a checked copy's.
async fn health(
    handle: &ProjectHandle,
    backup: Option<&std::path::Path>,
) -> Result<maos_proto::DbCheckView, ErrorBody> {
    let h = match backup {
        None => handle.reader().health().await,
        Some(to) => handle.reader().backup(to).await,
    }
    .map_err(|e| storage_error(&e))?;
    Ok(maos_proto::DbCheckView {
        path: h.path.display().to_string(),
        bytes: h.bytes,
        wal_bytes: h.wal_bytes,
        quick_check: h.quick_check,
    })
}

/// `session show` and `events` of a session the actor does not have in memory (archived):
/// answered from the database when `name` is one there. None: the actor's answer stands.
pub async fn archived(handle: &ProjectHandle, body: &Request) -> Option<Result<Reply, ErrorBody>> {
    match body {
        Request::SessionShow {
            session: Some(name),
        } => Some(match export(handle, name).await {
            Ok(Reply::Export(e)) => Ok(Reply::Session(Box::new(e.session))),
            other => other,
        }),
        Request::Events { filter, limit } if filter.agent.is_none() => {
            let name = filter.session.as_deref()?;
            let id = match session_id(handle, name).await {
                Ok(id) => id,
                Err(e) => return Some(Err(e)),
            };
            let query = crate::cmd::event_query(filter, Some(id), None, *limit);
            Some(
                handle
                    .reader()
                    .events(&query)
                    .await
                    .map(Reply::Events)
                    .map_err(|e| storage_error(&e)),
            )
        }
        _ => None,
    }
}

/// The full id of a session in the database (archived ones included) by id or unique prefix.
async fn session_id(handle: &ProjectHandle, name: &str) -> Result<String, ErrorBody> {
    let ids = handle
        .reader()
        .session_ids()
        .await
        .map_err(|e| storage_error(&e))?;
    Ok(
        maos_core::resolve_prefix(name, ids.iter().map(String::as_str))
            .map_err(|e| crate::state::prefix_error("session", e))?
            .to_string(),
    )
}

/// A session by id or unique prefix, archived or not.
async fn export(handle: &ProjectHandle, session: &str) -> Result<Reply, ErrorBody> {
    let id = session_id(handle, session).await?;
    match handle.reader().export(&id).await {
        Ok(Some(e)) => Ok(Reply::Export(Box::new(e))),
        Ok(None) => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!("no session {id}"),
        )),
        Err(e) => Err(storage_error(&e)),
    }
}

/// A maos-session file whose session or agents the database already has is refused.
async fn import_check(handle: &ProjectHandle, path: &str, text: &str) -> Result<(), ErrorBody> {
    let Some((sid, agents)) = maos_proto::export::ids_of(text) else {
        return Ok(());
    };
    let agents: Vec<String> = agents.iter().map(|a| a.to_string()).collect();
    let found = handle
        .reader()
        .existing(sid.as_str(), &agents)
        .await
        .map_err(|e| storage_error(&e))?;
    match found.first() {
        Some(id) => Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!(
                "{path}: {id} is already in this project (archived or imported before); nothing imported"
            ),
        )),
        None => Ok(()),
    }
}
