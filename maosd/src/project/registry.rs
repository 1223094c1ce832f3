//! The registry of open projects: each opens on first use (or at start, when it has run
//! managed agents, to recover them), closes for a restore and opens again on the restored
//! file, and closes with the daemon.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use maos_proto::{ErrorBody, ErrorCode, ProjectInfo};
use maos_store::StoreOptions;
use tokio::sync::Mutex;
use tracing::{error, info, warn};

use super::actor::{self, ProjectHandle};
use crate::project::files;

/// Every open project, opened on first use.
pub struct Projects {
    dir: PathBuf,
    socket: PathBuf,
    opts: StoreOptions,
    open: Mutex<HashMap<String, ProjectHandle>>,
    actors: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
    /// Woken whenever a project opens: subscriptions to a project with nothing recorded yet
    /// wait for it here.
    opened: tokio::sync::Notify,
    /// In a fleet: where each opened project goes to be woken by other daemons' commits.
    listen: std::sync::OnceLock<tokio::sync::mpsc::UnboundedSender<super::actor::Listen>>,
}

impl Projects {
    pub fn new(home: &Path, socket: &Path, opts: StoreOptions) -> Projects {
        Projects {
            dir: home.join("projects"),
            socket: socket.to_path_buf(),
            opts,
            open: Mutex::new(HashMap::new()),
            actors: std::sync::Mutex::new(Vec::new()),
            opened: tokio::sync::Notify::new(),
            listen: std::sync::OnceLock::new(),
        }
    }

    /// In a fleet: send every project opened from now on to the notification listener.
    pub fn set_listener(&self, tx: tokio::sync::mpsc::UnboundedSender<super::actor::Listen>) {
        let _ = self.listen.set(tx);
    }

    /// The actor of the project rooted at `root` (an absolute path), opening it if needed.
    pub async fn get(&self, root: &str) -> Result<ProjectHandle, ErrorBody> {
        let mut open = self.open.lock().await;
        if let Some(h) = open.get(root) {
            return Ok(h.clone());
        }
        let path = Path::new(root);
        if !path.is_absolute() {
            return Err(ErrorBody::new(
                ErrorCode::BadRequest,
                format!("project root {root:?} is not an absolute path"),
            ));
        }
        let hash = maos_proto::paths::workspace_hash(path);
        let dir = self.dir.join(&hash);
        // Boxed as `Send` explicitly: sqlx's futures otherwise trip rustc's higher-ranked `Send`
        // inference for every future that awaits this one.
        let opening = actor::open(
            root.to_string(),
            hash,
            dir,
            self.socket.clone(),
            self.opts.clone(),
        );
        let h = opening.await.map_err(|e| {
            error!(project = root, error = %e, "cannot open project");
            e
        })?;
        if let Ok(mut actors) = self.actors.lock() {
            actors.push(h.1);
        }
        open.insert(root.to_string(), h.0.clone());
        if let (Some(tx), Ok(key)) = (
            self.listen.get(),
            maos_proto::paths::repository_key(Path::new(root)),
        ) {
            let _ = tx.send((maos_store::channel(key.as_str()), h.0.poker()));
        }
        self.opened.notify_waiters();
        Ok(h.0)
    }

    /// The fleet's PostgreSQL, in fleet mode.
    pub fn fleet(&self) -> Option<&std::sync::Arc<maos_store::Fleet>> {
        self.opts.fleet.as_ref()
    }

    /// What wakes when any project opens (see [`Projects::existing`]).
    pub fn opened(&self) -> &tokio::sync::Notify {
        &self.opened
    }

    /// The actor of the project rooted at `root` when the project has state (it is open, or
    /// its database exists); else `not_found`, and nothing is created.
    pub async fn existing(&self, root: &str) -> Result<ProjectHandle, ErrorBody> {
        let known = self.open.lock().await.contains_key(root)
            || match &self.opts.fleet {
                None => self
                    .dir
                    .join(maos_proto::paths::workspace_hash(Path::new(root)))
                    .join("maos.db")
                    .exists(),
                // In a fleet the project may have been recorded by another daemon, from
                // another clone: PostgreSQL says. A directory with no key has nothing there.
                Some(fleet) => match maos_proto::paths::repository_key(Path::new(root)) {
                    Ok(key) => fleet
                        .has_project(key.as_str())
                        .await
                        .map_err(|e| crate::base::error::storage_error(&e))?,
                    Err(_) => false,
                },
            };
        if !known {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!(
                    "no maos project at {root}: nothing has been recorded there yet (a session, `maos run` or an agent's hook call starts it)"
                ),
            ));
        }
        self.get(root).await
    }

    /// The roots of every project this daemon knows: open, or with a directory of its own
    /// under `projects/` (read from its `project.json`).
    pub async fn known_roots(&self) -> Vec<String> {
        let mut roots: Vec<String> = self.open.lock().await.keys().cloned().collect();
        if let Ok(dir) = std::fs::read_dir(&self.dir) {
            for e in dir.filter_map(Result::ok) {
                if let Some(root) = files::recorded_root(&e.path())
                    && !roots.contains(&root)
                {
                    roots.push(root);
                }
            }
        }
        roots
    }

    /// Open every project that has run managed agents (it has an `agents/` directory), so
    /// that opening recovers its sessions.
    pub async fn open_managed(&self) {
        let roots: Vec<String> = match std::fs::read_dir(&self.dir) {
            Ok(dir) => dir
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("agents").is_dir())
                .filter_map(|p| files::recorded_root(&p))
                .collect(),
            Err(_) => return,
        };
        for root in roots {
            if let Err(e) = self.get(&root).await {
                warn!(project = %root, error = %e.message, "cannot open the project to recover it");
            }
        }
    }

    /// Replace the project's database with the (already checked) file `from`: its actor, if
    /// open, commits what it has and closes; the database moves aside to
    /// `maos.db.before-restore-<time>` (with its WAL, if any); a copy of `from` takes its place;
    /// the project opens again, which recovers its managed sessions. Refused while the
    /// project has live sessions, unless `force`. Returns where the old database went.
    pub async fn restore(
        &self,
        root: &str,
        from: &Path,
        force: bool,
    ) -> Result<PathBuf, ErrorBody> {
        if self.opts.fleet.is_some() {
            return Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "this daemon keeps its state in a fleet's PostgreSQL, not in a file: restore that \
                 database with PostgreSQL's tools (pg_restore)",
            ));
        }
        let mut open = self.open.lock().await;
        if let Some(h) = open.get(root) {
            let live = h.info().await.map_or(0, |i| i.live_sessions);
            if live > 0 && !force {
                return Err(ErrorBody::new(
                    ErrorCode::InvalidTransition,
                    format!(
                        "the project has {} that the restore would replace; finish or cancel \
                         them, or pass --force",
                        maos_core::words::count(live, "live session")
                    ),
                ));
            }
            h.stop().await;
            open.remove(root);
        }
        let hash = maos_proto::paths::workspace_hash(Path::new(root));
        let previous = files::replace_database(&self.dir.join(&hash), from)?;
        drop(open);
        self.get(root).await?;
        info!(project = %root, from = %from.display(), previous = %previous.display(), "database restored");
        Ok(previous)
    }

    /// `maos repair`: the rows of the project's database that maos cannot read; with
    /// `quarantine`, the project closes (if open), every row of their sessions moves to a file
    /// in `quarantine/` of its directory, and it opens again (which proves it loads). SQLite
    /// only: in a fleet the rows are named, and moved with PostgreSQL's tools.
    pub async fn repair(
        &self,
        root: &str,
        quarantine: bool,
    ) -> Result<maos_proto::RepairReport, ErrorBody> {
        if self.opts.fleet.is_some() {
            return Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "this daemon keeps its state in a fleet's PostgreSQL: the error of any command \
                 names the row maos cannot read; delete it there (psql) and retry",
            ));
        }
        let dir = self
            .dir
            .join(maos_proto::paths::workspace_hash(Path::new(root)));
        let db = dir.join("maos.db");
        if !db.is_file() {
            return Err(ErrorBody::new(
                ErrorCode::NotFound,
                format!("no maos project at {root}: nothing has been recorded there yet"),
            ));
        }
        let mut open = self.open.lock().await;
        if quarantine && let Some(h) = open.remove(root) {
            h.stop().await;
        }
        let aside = dir.join("quarantine");
        let found = maos_store::quarantine(
            &db,
            quarantine.then_some(aside.as_path()),
            chrono::Utc::now(),
        )
        .await
        .map_err(|e| match e {
            // A row that does not decode is what this reports, not an error of its own.
            maos_store::StoreError::BadRow { .. } => crate::base::error::internal(e),
            e => crate::base::error::storage_error(&e),
        })?;
        drop(open);
        let Some(q) = found else {
            return Ok(maos_proto::RepairReport {
                bad: Vec::new(),
                sessions: Vec::new(),
                moved: 0,
                file: None,
            });
        };
        if quarantine {
            warn!(project = root, file = %q.file.display(), rows = q.rows, "rows maos cannot read moved aside");
            self.get(root).await?;
        }
        Ok(maos_proto::RepairReport {
            bad: q
                .bad
                .into_iter()
                .map(|b| maos_proto::BadRowView {
                    table: b.table,
                    row: b.row,
                    why: b.why,
                })
                .collect(),
            sessions: q.sessions,
            moved: q.rows,
            file: quarantine.then(|| q.file.display().to_string()),
        })
    }

    /// Every open project's root and handle.
    pub async fn handles(&self) -> Vec<(String, ProjectHandle)> {
        let open = self.open.lock().await;
        open.iter().map(|(r, h)| (r.clone(), h.clone())).collect()
    }

    /// Facts about every open project.
    pub async fn infos(&self) -> Vec<ProjectInfo> {
        let handles: Vec<_> = self.open.lock().await.values().cloned().collect();
        let mut out = Vec::new();
        for h in handles {
            if let Some(i) = h.info().await {
                out.push(i);
            }
        }
        out.sort_by(|a, b| a.root.cmp(&b.root));
        out
    }

    /// Close every project: once no connection holds a handle any more, each actor finishes
    /// its queue, commits, and closes its database; this waits for all of them.
    /// Then each project's big Gantt charts are saved (`crate::project::charts`).
    pub async fn close_all(&self) {
        let charts: Vec<_> = (self.open.lock().await.drain())
            .map(|(_, h)| h.charts())
            .collect();
        let tasks = match self.actors.lock() {
            Ok(mut a) => std::mem::take(&mut *a),
            Err(_) => Vec::new(),
        };
        for t in tasks {
            let _ = t.await;
        }
        for c in charts {
            c.save().await;
        }
    }
}
