//! The background WAL checkpointer: on its own connection it copies committed WAL frames back
//! into the database file every second, so that commits rarely pay for it, and once every
//! frame is back it restarts the WAL with a small write of its own, so that no commit pays for
//! the restart's header fsync either (and the file shrinks to that write). Stopped (and its
//! connection closed) before the store closes, so the store's last close deletes the WAL.

use maos_proto::ErrorBody;
use maos_store::Store;
use tracing::{debug, warn};

use crate::base::error::storage_error;

/// How often committed WAL frames are copied back into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The background checkpoint task, and how to stop it.
pub(super) struct Checkpoints {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Checkpoints {
    /// Stop the task and wait until its connection is closed: the store's connections close
    /// last, and the last of them deletes the WAL before the project counts as closed (a
    /// restore then moves one file aside, not a WAL a late close would have deleted).
    pub(super) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Checkpoint the project's WAL in the background, on its own connection, so that commits
/// rarely pay for it (the write connection's own checkpoint is only a bound on the WAL's size).
/// None when the engine has no WAL of its own to copy back (PostgreSQL).
pub(super) async fn spawn(store: &Store, root: String) -> Result<Option<Checkpoints>, ErrorBody> {
    let Some(mut cp) = store.checkpointer().await.map_err(|e| storage_error(&e))? else {
        return Ok(None);
    };
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval(CHECKPOINT_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // `data_version` when this connection last restarted the WAL: while it stays the same,
        // nothing was committed since, and the WAL is left alone (its one frame must not be
        // copied back: a commit after a complete checkpoint restarts the log itself, writing
        // and fsyncing its header inside the commit).
        let mut restarted_at = None;
        // Whether that restart also cut the file (done once the project stayed idle a tick).
        let mut trimmed = false;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = stopped.cancelled() => break,
            }
            let version = match cp.data_version().await {
                Ok(v) => v,
                Err(e) => {
                    warn!(project = %root, error = %e, "cannot read the WAL's data version");
                    continue;
                }
            };
            // Nothing committed for a whole tick since the restart: once, copy its frame back
            // too and restart again with the file cut to one page (the project is idle).
            let trim = restarted_at == Some(version);
            if trim && trimmed {
                continue;
            }
            match cp.run().await {
                // Every frame copied back (or none yet): the log starts again from here.
                Ok((frames, copied)) if frames >= 0 && frames == copied => {
                    match cp.restart(trim).await {
                        Ok(()) => {
                            debug!(project = %root, frames, trim, "WAL copied back and restarted");
                            restarted_at = Some(version);
                            trimmed = trim;
                        }
                        Err(e) => {
                            warn!(project = %root, error = %e, "cannot restart the WAL");
                            restarted_at = None;
                        }
                    }
                }
                Ok(_) => restarted_at = None,
                Err(e) => warn!(project = %root, error = %e, "background WAL checkpoint failed"),
            }
        }
        cp.close().await;
    });
    Ok(Some(Checkpoints { stop, task }))
}
