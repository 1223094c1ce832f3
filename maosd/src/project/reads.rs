//! The requests a connection answers from the project's read pool: the actor never waits for
//! them (database health, history, export, backup), the check an import makes there before
//! the actor sees it (the database must not have its ids, archived ones included), and
//! `session show` / `events` of an archived session.

use maos_proto::{ErrorBody, ErrorCode, Reply, req};

use crate::base::error::{prefix_error, storage_error};
use crate::project::ProjectHandle;
use crate::project::router::{ArchivedRead, ReadRequest};

/// The answer to a read of the database.
pub async fn answer(handle: &ProjectHandle, read: ReadRequest) -> Result<Reply, ErrorBody> {
    match read {
        ReadRequest::DbCheck => health(handle, None).await.map(Reply::DbCheck),
        ReadRequest::Backup(req::Backup { path }) => {
            health(handle, Some(std::path::Path::new(&path)))
                .await
                .map(Reply::Backup)
        }
        ReadRequest::History(req::History { limit }) => handle
            .reader()
            .history(limit)
            .await
            .map(Reply::History)
            .map_err(|e| storage_error(&e)),
        ReadRequest::Export(req::Export { session }) => export(handle, &session).await,
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

/// `session show` and `events` of a session the actor does not have in memory (archived),
/// answered from the database.
pub async fn archived(handle: &ProjectHandle, read: &ArchivedRead) -> Result<Reply, ErrorBody> {
    match read {
        ArchivedRead::Session(name) => match export(handle, name).await {
            Ok(Reply::Export(e)) => Ok(Reply::Session(Box::new(e.session))),
            other => other,
        },
        ArchivedRead::Events(req::Events { filter, limit }) => {
            let session = filter.session.as_deref().unwrap_or_default();
            let id = session_id(handle, session).await?;
            let query = crate::cmd::event_query(filter, Some(id), None, *limit);
            handle
                .reader()
                .events(&query)
                .await
                .map(Reply::Events)
                .map_err(|e| storage_error(&e))
        }
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
            .map_err(|e| prefix_error("session", e))?
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
pub async fn import_check(handle: &ProjectHandle, path: &str, text: &str) -> Result<(), ErrorBody> {
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
