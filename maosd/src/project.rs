//! One actor per project: the only owner of its live state and the only writer of its database.
//!
//! Group commit: the actor takes every request waiting in its queue (up to [`MAX_BATCH`]),
//! applies them in order to memory through one [`Txn`], writes the batch in one SQLite
//! transaction, and only then answers all of them. While it waits on the disk, new requests
//! queue up and form the next batch, so a busy project pays one commit for many changes.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maos_proto::{ErrorBody, ErrorCode, EventFilter, EventRecord, ProjectInfo, Request};
use maos_store::{EventQuery, Reader, Store, StoreError, StoreOptions};
use tokio::sync::{Mutex, broadcast, mpsc, oneshot};
use tracing::{debug, error, info, warn};

use crate::cmd::{self, Outcome};
use crate::state::{State, Txn};

/// Most requests applied in one transaction.
const MAX_BATCH: usize = 512;
/// Queue depth per project before senders wait (back-pressure).
const QUEUE: usize = 4096;
/// Live events kept for slow subscribers before they fall back to reading history.
const EVENT_BUFFER: usize = 4096;

pub type Reply = Result<Outcome, ErrorBody>;

/// A live subscription: every event committed before it was made is in the database; later ones
/// arrive on `rx`.
pub struct Subscription {
    pub query: EventQuery,
    pub rx: broadcast::Receiver<Arc<EventRecord>>,
    pub reader: Reader,
}

enum Cmd {
    Request {
        body: Request,
        reply: oneshot::Sender<Reply>,
    },
    Subscribe {
        filter: EventFilter,
        reply: oneshot::Sender<Result<Subscription, ErrorBody>>,
    },
    Info {
        reply: oneshot::Sender<ProjectInfo>,
    },
    /// Commit what is queued before it, close the database, then answer (`maos restore`).
    Stop {
        done: oneshot::Sender<()>,
    },
    /// The supervisor of a managed agent answered (the actor asked it to start the agent).
    Started {
        agent: maos_core::AgentId,
        attempt: u32,
        result: crate::run::Started,
    },
}

/// Handle to a project actor.
#[derive(Clone)]
pub struct ProjectHandle {
    tx: mpsc::Sender<Cmd>,
    reader: Reader,
}

fn actor_gone() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::ShuttingDown,
        "the project is closing (the daemon is stopping, or a backup is being restored); retry",
    )
}

impl ProjectHandle {
    pub async fn request(&self, body: Request) -> Reply {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Request { body, reply })
            .await
            .map_err(|_| actor_gone())?;
        rx.await.map_err(|_| actor_gone())?
    }

    pub async fn subscribe(&self, filter: EventFilter) -> Result<Subscription, ErrorBody> {
        let (reply, rx) = oneshot::channel();
        self.tx
            .send(Cmd::Subscribe { filter, reply })
            .await
            .map_err(|_| actor_gone())?;
        rx.await.map_err(|_| actor_gone())?
    }

    pub async fn info(&self) -> Option<ProjectInfo> {
        let (reply, rx) = oneshot::channel();
        self.tx.send(Cmd::Info { reply }).await.ok()?;
        rx.await.ok()
    }

    pub fn reader(&self) -> &Reader {
        &self.reader
    }

    /// The actor stopped (its project was closed for a restore): open it again.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }
}

struct Actor {
    root: String,
    hash: String,
    state: State,
    store: Store,
    events: broadcast::Sender<Arc<EventRecord>>,
    /// Replies of lock requests waiting in the queue, by wait id.
    parked: HashMap<maos_core::WaitId, oneshot::Sender<Reply>>,
    /// The background WAL checkpoint task (stopped with the actor).
    checkpoints: Option<Checkpoints>,
    /// How agents are started; also where `checkpoint.json` files go.
    runner: crate::run::Runner,
    /// This actor's own queue, for the answers of the tasks it starts (weak: the actor stops
    /// once every handle is gone).
    me: mpsc::WeakSender<Cmd>,
    /// Asked to stop: answered once the database is closed.
    stopping: Option<oneshot::Sender<()>>,
}

pub fn storage_error(e: &StoreError) -> ErrorBody {
    match e {
        StoreError::Full(_) => ErrorBody::new(ErrorCode::StorageFull, e.to_string()),
        _ => ErrorBody::new(ErrorCode::Storage, e.to_string()),
    }
}

impl Actor {
    async fn run(mut self, mut rx: mpsc::Receiver<Cmd>) {
        let mut cmds = Vec::with_capacity(64);
        let mut sweep =
            tokio::time::interval_at(tokio::time::Instant::now() + sweep_every(), sweep_every());
        sweep.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        loop {
            // Sleep until the next lease expiry or wait deadline, or until requests arrive.
            let timer = self.state.locks.next_deadline().map(|at| {
                // At least a millisecond: an overdue deadline must not spin the loop.
                let left = (at - crate::state::now()).to_std().unwrap_or_default();
                tokio::time::Instant::now() + left.max(std::time::Duration::from_millis(1))
            });
            tokio::select! {
                n = rx.recv_many(&mut cmds, MAX_BATCH) => {
                    if n == 0 {
                        break;
                    }
                    self.batch(cmds.drain(..)).await;
                    if self.stopping.is_some() {
                        break;
                    }
                }
                () = sleep_until(timer) => self.batch(std::iter::empty()).await,
                _ = sweep.tick() => self.reconcile(false).await,
            }
        }
        debug!(project = %self.root, "project actor stopping");
        if let Some(c) = self.checkpoints.take() {
            c.stop().await;
        }
        // Parked lock waits end with the daemon: their clients see the connection close.
        self.parked.clear();
        self.store.close().await;
        if let Some(done) = self.stopping.take() {
            let _ = done.send(());
        }
    }

    async fn batch(&mut self, cmds: impl Iterator<Item = Cmd>) {
        let mut txn = Txn::new(&mut self.state);
        // Waits whose clients went away are cancelled first, then leases and deadlines due.
        let gone: Vec<_> = self
            .parked
            .iter()
            .filter(|(_, tx)| tx.is_closed())
            .map(|(w, _)| *w)
            .collect();
        for w in &gone {
            self.parked.remove(w);
        }
        txn.cancel_waits(&gone);
        txn.tick_locks();
        // (reply channel, result, whether it ran after the first change of this batch)
        let mut replies = Vec::new();
        let mut subs = Vec::new();
        for cmd in cmds {
            match cmd {
                Cmd::Request { body, reply } => {
                    // All or nothing: a request that fails or panics leaves the transaction
                    // as the requests before it left it.
                    let result = txn.atomic(|tx| cmd::handle(tx, body)).unwrap_or_else(|_| {
                        error!(
                            "a request handler panicked; the request failed, the daemon goes on"
                        );
                        Err(ErrorBody::new(
                            ErrorCode::Internal,
                            "internal error while handling the request (see the daemon log)",
                        ))
                    });
                    replies.push((reply, result, txn.is_dirty()));
                }
                Cmd::Subscribe { filter, reply } => subs.push((filter, reply)),
                Cmd::Stop { done } => self.stopping = Some(done),
                Cmd::Info { reply } => {
                    let _ = reply.send(project_info(&self.root, &self.hash, txn.state()));
                }
                Cmd::Started {
                    agent,
                    attempt,
                    result,
                } => {
                    let applied =
                        txn.atomic(|tx| crate::ops::process::started(tx, &agent, attempt, result));
                    match applied {
                        Ok(Ok(())) => {}
                        Ok(Err(e)) => {
                            warn!(agent = %agent, error = %e.message, "recording an agent start failed")
                        }
                        Err(_) => error!(agent = %agent, "recording an agent start panicked"),
                    }
                }
            }
        }
        // Managed sessions this batch changed take their next steps in the same commit.
        if std::panic::catch_unwind(AssertUnwindSafe(|| {
            crate::ops::process::schedule_touched(&mut txn)
        }))
        .is_err()
        {
            error!(project = %self.root, "the scheduler panicked; the daemon goes on");
        }
        let mut wakeups = Vec::new();
        if txn.is_dirty() {
            txn.prepare();
            let result = self.store.commit(&txn.batch()).await;
            match result {
                Ok(()) => {
                    let done = txn.finish();
                    wakeups = done.wakeups;
                    for e in done.events {
                        // No subscribers is fine.
                        let _ = self.events.send(Arc::new(e));
                    }
                    self.execute(done.effects);
                    self.write_checkpoints(done.checkpoints);
                }
                Err(e) => {
                    warn!(project = %self.root, error = %e, "commit failed; batch rolled back");
                    let locks_changed = txn.touched_locks();
                    txn.rollback();
                    let err = storage_error(&e);
                    for (_, result, after_change) in &mut replies {
                        if *after_change {
                            *result = Err(err.clone());
                        }
                    }
                    if locks_changed {
                        self.reload_locks(&err).await;
                    }
                }
            }
        }
        for (reply, result, _) in replies {
            match result {
                Ok(Outcome::Park(wait)) => {
                    self.parked.insert(wait, reply);
                }
                other => {
                    let _ = reply.send(other);
                }
            }
        }
        for (wait, result) in wakeups {
            if let Some(reply) = self.parked.remove(&wait) {
                let _ = reply.send(result.map(Outcome::Reply));
            }
        }
        // Subscriptions are answered after the commit, so their snapshot covers it.
        for (filter, reply) in subs {
            let sub = cmd::resolve_filter(&self.state, &filter, None).map(|query| Subscription {
                query,
                rx: self.events.subscribe(),
                reader: self.store.reader(),
            });
            let _ = reply.send(sub);
        }
    }

    /// Carry out the process work of a committed batch.
    fn execute(&self, effects: Vec<crate::run::Effect>) {
        use crate::run::Effect;
        for e in effects {
            match e {
                Effect::Launch(l) => {
                    let runner = self.runner.clone();
                    let me = self.me.clone();
                    tokio::spawn(async move {
                        let result = runner.launch(&l).await;
                        if let Some(tx) = me.upgrade() {
                            let _ = tx
                                .send(Cmd::Started {
                                    agent: l.agent,
                                    attempt: l.attempt,
                                    result,
                                })
                                .await;
                        }
                    });
                }
                Effect::Signal { pgid, sig } => crate::run::signal(pgid, sig),
                Effect::KillAfter {
                    pgid,
                    start_time,
                    after,
                } => crate::run::kill_after(pgid, start_time, after),
                Effect::RemoveFile(path) => {
                    tokio::task::spawn_blocking(move || {
                        if let Err(e) = std::fs::remove_file(&path)
                            && e.kind() != std::io::ErrorKind::NotFound
                        {
                            warn!(file = %path.display(), error = %e, "cannot delete an applied exit file");
                        }
                    });
                }
            }
        }
    }

    /// The readable copy of each session's latest committed checkpoint:
    /// `sessions/<id>/checkpoint.json` in the project's directory, replaced atomically.
    fn write_checkpoints(&self, rows: Vec<maos_store::CheckpointRow>) {
        let mut latest: HashMap<String, maos_store::CheckpointRow> = HashMap::new();
        for r in rows {
            latest.insert(r.session_id.to_string(), r);
        }
        if latest.is_empty() {
            return;
        }
        let dir = self.runner.project_dir.join("sessions");
        tokio::task::spawn_blocking(move || {
            for (sid, row) in latest {
                if let Err(e) = write_checkpoint_file(&dir.join(&sid), &row) {
                    warn!(session = %sid, error = %e, "cannot write checkpoint.json");
                }
            }
        });
    }

    /// At start (`all`): reconcile every managed session with its processes, then let each
    /// take its next steps. Between starts, the same for the sessions whose agent's exit was
    /// lost (`cmd::managed::sweep`).
    async fn reconcile(&mut self, all: bool) {
        let t0 = std::time::Instant::now();
        let mut txn = Txn::new(&mut self.state);
        // All or nothing: a recovery that fails changes nothing and runs again later.
        let report = txn.atomic(|tx| {
            if all {
                crate::ops::process::recover(tx, None)
            } else {
                crate::ops::process::sweep(tx)
            }
        });
        if std::panic::catch_unwind(AssertUnwindSafe(|| {
            crate::ops::process::schedule_all(&mut txn)
        }))
        .is_err()
        {
            error!(project = %self.root, "the scheduler panicked; the daemon goes on");
        }
        match report {
            Ok(Ok(r)) if !r.sessions.is_empty() => {
                info!(project = %self.root, sessions = r.sessions.len(), ms = t0.elapsed().as_secs_f64() * 1e3, "recovered managed sessions");
            }
            Ok(Ok(_)) => {}
            Ok(Err(e)) => warn!(project = %self.root, error = %e.message, "recovery failed"),
            Err(_) => error!(project = %self.root, "recovery panicked"),
        }
        if !txn.is_dirty() {
            return;
        }
        txn.prepare();
        let t1 = std::time::Instant::now();
        match self.store.commit(&txn.batch()).await {
            Ok(()) => {
                debug!(project = %self.root, ms = t1.elapsed().as_secs_f64() * 1e3, "recovery committed");
                let done = txn.finish();
                for e in done.events {
                    let _ = self.events.send(Arc::new(e));
                }
                self.execute(done.effects);
                self.write_checkpoints(done.checkpoints);
            }
            Err(e) => {
                warn!(project = %self.root, error = %e, "cannot commit the recovery; it runs again (at the next sweep or start)");
                txn.rollback();
            }
        }
    }

    /// After a failed commit the lock table may hold grants the database never saw: rebuild it
    /// from what is committed, and end every parked wait (its place in the queue is gone).
    async fn reload_locks(&mut self, err: &ErrorBody) {
        for (_, reply) in self.parked.drain() {
            let _ = reply.send(Err(err.clone()));
        }
        match self.store.load_locks().await {
            Ok((locks, next)) => self.state.reset_locks(locks, next),
            Err(e) => {
                error!(project = %self.root, error = %e, "cannot reload locks after a failed commit")
            }
        }
    }
}

fn write_checkpoint_file(dir: &Path, row: &maos_store::CheckpointRow) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let state: serde_json::Value = serde_json::from_str(&row.state).unwrap_or_default();
    let doc = serde_json::json!({
        "session_id": row.session_id, "seq": row.seq, "at": row.ts, "reason": row.reason,
        "checkpoint": state,
    });
    let tmp = dir.join("checkpoint.json.tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)?;
    f.write_all(
        serde_json::to_string_pretty(&doc)
            .unwrap_or_default()
            .as_bytes(),
    )?;
    // No fsync: the durable checkpoint is the database row; this file is its readable copy,
    // and the rename alone keeps it whole.
    std::fs::rename(&tmp, dir.join("checkpoint.json"))
}

fn project_info(root: &str, hash: &str, st: &State) -> ProjectInfo {
    ProjectInfo {
        root: root.to_string(),
        hash: hash.to_string(),
        sessions: st.sessions().len(),
        live_sessions: st
            .sessions()
            .iter()
            .filter(|s| !s.state.is_terminal())
            .count(),
        last_seq: st.last_seq(),
        running_agents: st
            .sessions()
            .iter()
            .flat_map(|s| &s.agents)
            .filter(|a| a.process.is_some() || st.is_launching(&a.id))
            .count(),
    }
}

/// Sleep until `at`, or forever when there is nothing to wait for.
async fn sleep_until(at: Option<tokio::time::Instant>) {
    match at {
        Some(at) => tokio::time::sleep_until(at).await,
        None => std::future::pending().await,
    }
}

/// Every open project, opened on first use.
pub struct Projects {
    dir: PathBuf,
    socket: PathBuf,
    opts: StoreOptions,
    open: Mutex<HashMap<String, ProjectHandle>>,
    actors: std::sync::Mutex<Vec<tokio::task::JoinHandle<()>>>,
}

impl Projects {
    pub fn new(home: &Path, socket: &Path, opts: StoreOptions) -> Projects {
        Projects {
            dir: home.join("projects"),
            socket: socket.to_path_buf(),
            opts,
            open: Mutex::new(HashMap::new()),
            actors: std::sync::Mutex::new(Vec::new()),
        }
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
        let opening = open_project(
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
        Ok(h.0)
    }

    /// Open every project that has run managed agents (it has an `agents/` directory), so
    /// that opening recovers its sessions.
    pub async fn open_managed(&self) {
        let roots: Vec<String> = match std::fs::read_dir(&self.dir) {
            Ok(dir) => dir
                .filter_map(Result::ok)
                .map(|e| e.path())
                .filter(|p| p.join("agents").is_dir())
                .filter_map(|p| {
                    let text = std::fs::read_to_string(p.join("project.json")).ok()?;
                    let v: serde_json::Value = serde_json::from_str(&text).ok()?;
                    v["root"].as_str().map(str::to_string)
                })
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
        let mut open = self.open.lock().await;
        if let Some(h) = open.get(root) {
            let live = h.info().await.map_or(0, |i| i.live_sessions);
            if live > 0 && !force {
                return Err(ErrorBody::new(
                    ErrorCode::InvalidTransition,
                    format!(
                        "the project has {live} live session(s) that the restore would replace; \
                         finish or cancel them, or pass --force"
                    ),
                ));
            }
            let (done, stopped) = oneshot::channel();
            if h.tx.send(Cmd::Stop { done }).await.is_ok() {
                let _ = stopped.await;
            }
            open.remove(root);
        }
        let hash = maos_proto::paths::workspace_hash(Path::new(root));
        let dir = self.dir.join(&hash);
        let io = |what: &str, e: std::io::Error| {
            ErrorBody::new(
                ErrorCode::Storage,
                format!("{what}: {e}; the database is unchanged"),
            )
        };
        maos_proto::paths::private_dir_all(&dir).map_err(|e| io("project directory", e))?;
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
        if let Ok(d) = std::fs::File::open(&dir) {
            let _ = d.sync_all();
        }
        drop(open);
        self.get(root).await?;
        info!(project = %root, from = %from.display(), previous = %previous.display(), "database restored");
        Ok(previous)
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
    pub async fn close_all(&self) {
        self.open.lock().await.clear();
        let tasks = match self.actors.lock() {
            Ok(mut a) => std::mem::take(&mut *a),
            Err(_) => return,
        };
        for t in tasks {
            let _ = t.await;
        }
    }
}

/// Open a project's database and start its actor. Takes everything by value: sqlx's futures
/// trip rustc's higher-ranked `Send` inference when they hold borrowed arguments.
async fn open_project(
    root: String,
    hash: String,
    dir: PathBuf,
    socket: PathBuf,
    opts: StoreOptions,
) -> Result<(ProjectHandle, tokio::task::JoinHandle<()>), ErrorBody> {
    let io =
        |e: std::io::Error| ErrorBody::new(ErrorCode::Storage, format!("{}: {e}", dir.display()));
    maos_proto::paths::private_dir_all(&dir).map_err(io)?;
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
    let t0 = std::time::Instant::now();
    let mut store = Store::open(dir.join("maos.db"), opts)
        .await
        .map_err(|e| storage_error(&e))?;
    debug!(project = %root, ms = t0.elapsed().as_secs_f64() * 1e3, "database opened");
    // Until the background checkpoints run (below): a crash can leave a WAL that recovery's
    // commit would otherwise copy back before the daemon serves. Only speed depends on it.
    if let Err(e) = store.set_autocheckpoint(false).await {
        warn!(project = %root, error = %e, "cannot hold the WAL checkpoint during recovery");
    }
    let loaded = store.load().await.map_err(|e| storage_error(&e))?;
    info!(project = %root, sessions = loaded.sessions.len(), last_seq = loaded.last_seq, ms = t0.elapsed().as_secs_f64() * 1e3, "project opened");
    let (tx, rx) = mpsc::channel(QUEUE);
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let reader = store.reader();
    let runner = crate::run::Runner {
        exe: std::env::current_exe().map_err(|e| {
            ErrorBody::new(
                ErrorCode::Internal,
                format!("cannot find the maosd binary: {e}"),
            )
        })?,
        socket,
        root: root.clone(),
        project_dir: dir.clone(),
    };
    let mut actor = Actor {
        root,
        hash,
        state: {
            let mut st = State::new(loaded.sessions, loaded.last_seq);
            st.reset_locks(loaded.locks, loaded.next_token);
            st.set_checkpointed(loaded.checkpointed);
            st.runner = Some(runner.clone());
            st
        },
        store,
        events,
        parked: HashMap::new(),
        // Started after recovery (below): copying a large WAL back must not slow it down.
        checkpoints: None,
        runner,
        me: tx.downgrade(),
        stopping: None,
    };
    actor.reconcile(true).await;
    actor.checkpoints = Some(spawn_checkpoints(&actor.store, actor.root.clone()).await?);
    if let Err(e) = actor.store.set_autocheckpoint(true).await {
        warn!(project = %actor.root, error = %e, "cannot restore the bound on the WAL");
    }
    let task = tokio::spawn(actor.run(rx));
    Ok((ProjectHandle { tx, reader }, task))
}

/// How often the actor looks for managed agents whose exit was lost (`cmd::managed::sweep`):
/// 10 s, or `MAOS_TEST_SWEEP_MS` (the end-to-end tests' override).
fn sweep_every() -> std::time::Duration {
    let ms = std::env::var("MAOS_TEST_SWEEP_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .unwrap_or(10_000);
    std::time::Duration::from_millis(ms)
}

/// How often committed WAL frames are copied back into the database file.
const CHECKPOINT_EVERY: std::time::Duration = std::time::Duration::from_secs(1);

/// The background checkpoint task, and how to stop it.
struct Checkpoints {
    stop: tokio_util::sync::CancellationToken,
    task: tokio::task::JoinHandle<()>,
}

impl Checkpoints {
    /// Stop the task and wait until its connection is closed: the store's connections close
    /// last, and the last of them deletes the WAL before the project counts as closed (a
    /// restore then moves one file aside, not a WAL a late close would have deleted).
    async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
    }
}

/// Checkpoint the project's WAL in the background, on its own connection, so that commits
/// rarely pay for it (the write connection's own checkpoint is only a bound on the WAL's size).
async fn spawn_checkpoints(store: &Store, root: String) -> Result<Checkpoints, ErrorBody> {
    let mut cp = store.checkpointer().await.map_err(|e| storage_error(&e))?;
    let stop = tokio_util::sync::CancellationToken::new();
    let stopped = stop.clone();
    let task = tokio::spawn(async move {
        let mut every = tokio::time::interval(CHECKPOINT_EVERY);
        every.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        // The WAL's frame count at the last tick: unchanged and fully copied back means no
        // commit for a whole tick, and the WAL is emptied.
        let mut last = 0;
        loop {
            tokio::select! {
                _ = every.tick() => {}
                () = stopped.cancelled() => break,
            }
            match cp.run().await {
                Ok((frames, copied)) if frames > 0 && frames == copied && frames == last => {
                    match cp.truncate().await {
                        Ok(()) => debug!(project = %root, frames, "idle: WAL emptied"),
                        Err(e) => warn!(project = %root, error = %e, "cannot empty the WAL"),
                    }
                    last = 0;
                }
                Ok((frames, _)) => last = frames,
                Err(e) => warn!(project = %root, error = %e, "background WAL checkpoint failed"),
            }
        }
        cp.close().await;
    });
    Ok(Checkpoints { stop, task })
}
