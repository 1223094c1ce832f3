//! The files in a project's directory (`$MAOS_HOME/projects/<hash>/`) besides its database's
//! own: `project.json` (which root the directory belongs to), the restore's shuffle of
//! `maos.db` and its WAL, and each session's readable `sessions/<id>/checkpoint.json`.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use maos_proto::{ErrorBody, ErrorCode};
use tracing::warn;

use crate::base::error::file_error;

/// Make `dir` the directory of the project at `root`: create it and its `project.json`, or
/// check that the one there names `root` (two roots whose hashes collide).
pub(super) fn claim(dir: &Path, root: &str, hash: &str) -> Result<(), ErrorBody> {
    let io = |e: std::io::Error| file_error(dir.display(), e, "");
    maos_proto::paths::private_dir_all(dir).map_err(io)?;
    let meta = dir.join("project.json");
    match std::fs::read_to_string(&meta) {
        Ok(text) => {
            let known: serde_json::Value = serde_json::from_str(&text).unwrap_or_default();
            if known["root"].as_str().is_some_and(|r| r != root) {
                return Err(ErrorBody::new(
                    ErrorCode::Storage,
                    format!(
                        "{} belongs to project {} (hash collision with {root})",
                        dir.display(),
                        known["root"]
                    ),
                ));
            }
        }
        Err(_) => {
            let text = serde_json::json!({ "root": root, "hash": hash }).to_string();
            std::io::Write::write_all(
                &mut maos_proto::paths::private_file(&meta).map_err(io)?,
                text.as_bytes(),
            )
            .map_err(io)?;
        }
    }
    Ok(())
}

/// The root that the project directory `dir` belongs to, from its `project.json`.
pub(super) fn recorded_root(dir: &Path) -> Option<String> {
    let text = std::fs::read_to_string(dir.join("project.json")).ok()?;
    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
    v["root"].as_str().map(str::to_string)
}

/// Put a copy of `from` in place of the closed project's database in `dir`: the database
/// moves aside to `maos.db.before-restore-<time>` (with its WAL, if any), undone if any step
/// fails. Returns where the old database went.
pub(super) fn replace_database(dir: &Path, from: &Path) -> Result<PathBuf, ErrorBody> {
    let io = |what: &str, e: std::io::Error| file_error(what, e, "; the database is unchanged");
    maos_proto::paths::private_dir_all(dir).map_err(|e| io("project directory", e))?;
    let db = dir.join("maos.db");
    let tmp = dir.join("maos.db.restore.tmp");
    let stamp = chrono::Utc::now().format("%Y%m%dT%H%M%S%.6fZ");
    let previous = dir.join(format!("maos.db.before-restore-{stamp}"));
    {
        use std::io::Write;
        let mut out = maos_proto::paths::private_file(&tmp).map_err(|e| io("copy", e))?;
        let mut src = std::fs::File::open(from).map_err(|e| io("copy", e))?;
        std::io::copy(&mut src, &mut out).map_err(|e| io("copy", e))?;
        out.flush().map_err(|e| io("copy", e))?;
        out.sync_all().map_err(|e| io("copy", e))?;
    }
    let mut moved = Vec::new();
    for suffix in ["", "-wal", "-shm"] {
        let (a, b) = (
            PathBuf::from(format!("{}{suffix}", db.display())),
            PathBuf::from(format!("{}{suffix}", previous.display())),
        );
        if a.exists() {
            if let Err(e) = std::fs::rename(&a, &b) {
                for (a, b) in moved.iter().rev() {
                    let _ = std::fs::rename(b, a);
                }
                let _ = std::fs::remove_file(&tmp);
                return Err(io("moving the database aside", e));
            }
            moved.push((a, b));
        }
    }
    if let Err(e) = std::fs::rename(&tmp, &db) {
        for (a, b) in moved.iter().rev() {
            let _ = std::fs::rename(b, a);
        }
        return Err(io("putting the copy in place", e));
    }
    if let Ok(d) = std::fs::File::open(dir) {
        let _ = d.sync_all();
    }
    Ok(previous)
}

/// The readable copy of each session's latest committed checkpoint:
/// `sessions/<id>/checkpoint.json` in the project's directory, replaced atomically (off the
/// actor's thread).
pub(super) fn write_checkpoints(project_dir: &Path, rows: Vec<maos_store::CheckpointRow>) {
    let mut latest: HashMap<String, maos_store::CheckpointRow> = HashMap::new();
    for r in rows {
        latest.insert(r.session_id.to_string(), r);
    }
    if latest.is_empty() {
        return;
    }
    let dir = project_dir.join("sessions");
    tokio::task::spawn_blocking(move || {
        for (sid, row) in latest {
            let at = match maos_core::id_path(&dir, &sid, "") {
                Ok(at) => at,
                Err(e) => {
                    warn!(error = %e, "checkpoint.json not written");
                    continue;
                }
            };
            if let Err(e) = write_checkpoint_file(&at, &row) {
                warn!(session = %sid, error = %e, "cannot write checkpoint.json");
            }
        }
    });
}

fn write_checkpoint_file(dir: &Path, row: &maos_store::CheckpointRow) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let state: serde_json::Value = serde_json::from_str(&row.state).unwrap_or_default();
    let doc = serde_json::json!({
        "session_id": row.session_id, "seq": row.seq, "at": row.ts, "reason": row.reason,
        "checkpoint": state,
    });
    let body = serde_json::to_string_pretty(&doc).unwrap_or_default();
    // No fsync: the durable checkpoint is the database row; this file is its readable copy.
    write_whole(&dir.join("checkpoint.json"), body.as_bytes())
}

/// Write a file readable by its owner only, whole or not at all: a temporary file beside it,
/// then a rename (no fsync: for copies whose source of truth is the database).
pub fn write_whole(path: &Path, body: &[u8]) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(body)?;
    std::fs::rename(&tmp, path)
}
