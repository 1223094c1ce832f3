//! Retention (`maos gc`, and the daemon's schedule from `gc_older_than` in `config.toml`):
//! finished sessions that ended long enough ago are exported to the project's `exports/`
//! directory, then deleted with everything they recorded. One session per commit, so the
//! project keeps serving while a large collection runs.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_core::SessionId;
use maos_proto::{ErrorBody, ErrorCode, GcEntry, GcReport, req};

use crate::base::error::{file_error, internal, storage_error};
use crate::project::ProjectHandle;
use crate::project::router::ProjectRequest;

/// Where `maos gc` writes the exports of the sessions it deletes.
pub fn exports_dir(home: &Path, root: &str) -> PathBuf {
    home.join("projects")
        .join(maos_proto::paths::workspace_hash(Path::new(root)))
        .join("exports")
}

/// `sync`: fsync each export before its session is deleted. The daemon passes it for
/// `synchronous = full`, whose commits survive power loss; in `normal` mode a commit survives
/// a crash of the daemon, and so does a written file without fsync.
pub async fn run(
    home: &Path,
    root: &str,
    handle: &ProjectHandle,
    older_than: Duration,
    dry_run: bool,
    sync: bool,
) -> Result<GcReport, ErrorBody> {
    let now = crate::txn::state::now();
    let cutoff = chrono::Duration::from_std(older_than)
        .ok()
        .and_then(|d| now.checked_sub_signed(d))
        .unwrap_or(chrono::DateTime::<chrono::Utc>::MIN_UTC);
    let ids = handle
        .reader()
        .gc_candidates(maos_store::to_us(&cutoff))
        .await
        .map_err(|e| storage_error(&e))?;
    let dir = exports_dir(home, root);
    let mut report = GcReport {
        cutoff,
        dry_run,
        sessions: Vec::new(),
    };
    for id in ids {
        let sid = SessionId::parse(&id)
            .map_err(|e| ErrorBody::new(ErrorCode::Storage, format!("session id {id:?}: {e}")))?;
        if dry_run {
            report.sessions.push(GcEntry {
                id: sid,
                exported_to: None,
            });
            continue;
        }
        let Some(export) = handle
            .reader()
            .export(&id)
            .await
            .map_err(|e| storage_error(&e))?
        else {
            continue;
        };
        let path = maos_core::id_path(&dir, &id, ".json")
            .map_err(|e| crate::base::error::internal(format_args!("maos gc: {e}")))?;
        let written = {
            let (dir, path) = (dir.clone(), path.clone());
            tokio::task::spawn_blocking(move || write_export(&dir, &path, &export, sync)).await
        };
        match written {
            Ok(Ok(())) => {}
            Ok(Err(e)) => {
                return Err(file_error(
                    format_args!("cannot write {}", path.display()),
                    e,
                    "; nothing more deleted",
                ));
            }
            Err(e) => return Err(internal(e)),
        }
        handle
            .request(ProjectRequest::new(req::Purge { session: id }))
            .await?;
        report.sessions.push(GcEntry {
            id: sid,
            exported_to: Some(path.display().to_string()),
        });
    }
    if !report.sessions.is_empty() {
        sweep_kept(home, root, handle).await;
    }
    Ok(report)
}

/// The kept versions of files (`keep.rs`) that no remaining session can name: those last kept
/// before the oldest session left began go with the sessions deleted.
async fn sweep_kept(home: &Path, root: &str, handle: &ProjectHandle) {
    let oldest = match handle
        .request(ProjectRequest::new(req::SessionList { all: true }))
        .await
    {
        Ok(crate::cmd::Outcome::Reply(r)) => match *r {
            maos_proto::Reply::Sessions(s) => s.iter().map(|s| s.created_at).min(),
            _ => return,
        },
        _ => return,
    };
    let before = oldest.map_or_else(std::time::SystemTime::now, std::time::SystemTime::from);
    let store = crate::txn::keep::store_dir(home, root);
    let _ = tokio::task::spawn_blocking(move || crate::txn::keep::sweep(&store, before)).await;
}

/// The export, replaced whole, mode 0600 (synced with `sync`): the session is deleted right
/// after.
fn write_export(
    dir: &Path,
    path: &Path,
    export: &maos_proto::export::SessionExport,
    sync: bool,
) -> std::io::Result<()> {
    use std::io::Write;
    maos_proto::paths::private_dir_all(dir)?;
    let tmp = path.with_extension("json.tmp");
    let f = maos_proto::paths::private_file(&tmp)?;
    let mut w = std::io::BufWriter::new(f);
    serde_json::to_writer(&mut w, export)?;
    w.flush()?;
    if sync {
        w.get_ref().sync_all()?;
    }
    std::fs::rename(&tmp, path)
}
