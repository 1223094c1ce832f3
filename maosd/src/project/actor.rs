//! One actor per project: the only owner of its live state and the only writer of its database.
//!
//! Group commit: the actor takes every request waiting in its queue (up to [`MAX_BATCH`]),
//! applies them in order to memory through one [`Txn`], writes the batch in one SQLite
//! transaction, and only then answers all of them. While it waits on the disk, new requests
//! queue up and form the next batch, so a busy project pays one commit for many changes.

use std::collections::HashMap;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::Arc;

use maos_core::LockPath;
use maos_proto::{ErrorBody, EventFilter, EventRecord, ProjectInfo};
use maos_store::{EventQuery, Reader, Store, StoreOptions};
use tokio::sync::{broadcast, mpsc, oneshot};
use tracing::{debug, error, info, warn};

use super::checkpointer::{self, Checkpoints};
use crate::base::error::{actor_gone, handler_panicked, internal, storage_error};
use crate::cmd::{self, Outcome};
use crate::project::charts::Charts;
use crate::project::files;
use crate::project::router::ProjectRequest;
use crate::txn::state::{Finished, State, Txn, Wakeup};

/// Most requests applied in one transaction.
const MAX_BATCH: usize = 512;
/// Queue depth per project before senders wait (back-pressure).
const QUEUE: usize = 4096;
/// Live events kept for slow subscribers before they fall back to reading history.
const EVENT_BUFFER: usize = 4096;

pub type Reply = Result<Outcome, ErrorBody>;

/// A parked lock wait: where its answer goes, and an MCP call's caller, which it names.
type Parked = (oneshot::Sender<Reply>, Option<Box<maos_proto::McpCaller>>);

/// A live subscription: every event committed before it was made is in the database; later ones
/// arrive on `rx`.
pub struct Subscription {
    pub query: EventQuery,
    pub rx: broadcast::Receiver<Arc<EventRecord>>,
    pub reader: Reader,
    /// It asked to end with its session (`until_session_ends`), which has ended already.
    pub ended: bool,
}

enum Cmd {
    Request {
        body: ProjectRequest,
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
    /// Another daemon of the fleet committed a batch of this project: run a batch, which
    /// starts from what PostgreSQL holds (and serves the waits its changes freed).
    Poke,
    /// The supervisor of a managed agent answered (the actor asked it to start the agent).
    Started {
        agent: maos_core::AgentId,
        attempt: u32,
        result: crate::proc::run::Started,
    },
}

/// What a fleet batch applies in its transaction before its requests.
struct Begun {
    now: maos_core::Ts,
    locks: Option<Vec<(maos_core::HeldLock, i64)>>,
    waits: Option<maos_store::FleetWaits>,
}

impl Begun {
    /// PostgreSQL's clock is the batch's, and the lock table becomes what PostgreSQL holds
    /// (serving the waits that frees).
    fn apply(self, txn: &mut Txn<'_>) {
        txn.now = self.now;
        // Locks first: a wait that ended elsewhere because it was granted must not free the
        // waits behind it before its grant is here.
        if let Some(locks) = self.locks {
            txn.sync_locks(locks);
        }
        if let Some(waits) = self.waits {
            txn.sync_waits(waits);
        }
    }
}

/// Wakes a project actor (see [`ProjectHandle::poker`]); does nothing once it stopped.
#[derive(Clone)]
pub struct Poker(mpsc::WeakSender<Cmd>);

impl Poker {
    /// Ask for a batch; a full queue already means one is coming.
    pub fn poke(&self) {
        if let Some(tx) = self.0.upgrade() {
            let _ = tx.try_send(Cmd::Poke);
        }
    }
}

/// A project this daemon opened, to be woken when another daemon commits in it: its
/// notification channel and its actor.
pub type Listen = (String, Poker);

/// Handle to a project actor.
#[derive(Clone)]
pub struct ProjectHandle {
    tx: mpsc::Sender<Cmd>,
    reader: Reader,
    charts: Arc<Charts>,
    /// The project's conflict radar (`crate::radar`).
    radar: Arc<crate::radar::Radar>,
    /// What the actor knows of held files' content, read by the connections (`keep.rs`).
    kept: crate::txn::keep::Shared,
}

impl ProjectHandle {
    pub async fn request(&self, body: ProjectRequest) -> Reply {
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

    /// The held files' versions, as the actor keeps them (`keep.rs`).
    pub fn kept(&self) -> &crate::txn::keep::Shared {
        &self.kept
    }

    /// What wakes the actor when another daemon changed its project, without keeping it
    /// running.
    pub fn poker(&self) -> Poker {
        Poker(self.tx.downgrade())
    }

    /// The session's Gantt chart (its full id), as the daemon keeps it.
    pub async fn chart(
        &self,
        session: &str,
        ended: Option<i64>,
        window: maos_core::gantt::Window,
    ) -> Result<maos_core::gantt::Gantt, ErrorBody> {
        self.charts
            .chart(&self.reader, session, ended, window)
            .await
    }

    /// The project's conflict radar.
    pub fn radar(&self) -> &crate::radar::Radar {
        &self.radar
    }

    /// The project's Gantt charts, without the handle (which keeps the actor running).
    pub fn charts(&self) -> Arc<Charts> {
        self.charts.clone()
    }

    /// The actor stopped (its project was closed for a restore): open it again.
    pub fn is_closed(&self) -> bool {
        self.tx.is_closed()
    }

    /// Have the actor commit what is queued before this, close its database, and stop;
    /// returns once it has (at once if it was stopped already).
    pub(super) async fn stop(&self) {
        let (done, stopped) = oneshot::channel();
        if self.tx.send(Cmd::Stop { done }).await.is_ok() {
            let _ = stopped.await;
        }
    }
}

struct Actor {
    root: String,
    hash: String,
    state: State,
    store: Store,
    events: broadcast::Sender<Arc<EventRecord>>,
    /// Replies of lock requests waiting in the queue, by wait id (and an MCP call's caller,
    /// which the answer names).
    parked: HashMap<maos_core::WaitId, Parked>,
    /// The background WAL checkpoint task (stopped with the actor).
    checkpoints: Option<Checkpoints>,
    /// How agents are started; also where `checkpoint.json` files go.
    runner: crate::proc::run::Runner,
    /// This actor's own queue, for the answers of the tasks it starts (weak: the actor stops
    /// once every handle is gone).
    me: mpsc::WeakSender<Cmd>,
    /// Asked to stop: answered once the database is closed.
    stopping: Option<oneshot::Sender<()>>,
    /// In a fleet: tells the other daemons after each commit.
    notifier: Option<maos_store::Notifier>,
    /// Other daemons' commits this actor ran no batch for, since its last batch.
    pokes_skipped: u32,
    /// In a fleet: PostgreSQL's clock as the last batch read it, and when (by this machine's
    /// monotonic clock). Leases and wait deadlines are in PostgreSQL's time, so the timer
    /// that serves them counts from this, never from this machine's time of day, which may
    /// be off (hours fast: a batch every millisecond; hours slow: an expiry served hours late).
    pg_clock: Option<(maos_core::Ts, tokio::time::Instant)>,
    /// In a fleet: how long a batch waits for more requests before it starts, while the
    /// project is busy ([`gather_window`]).
    gather: Option<std::time::Duration>,
    /// How many commands the last batch took.
    last_batch: usize,
}

/// An actor left idle while other daemons commit still catches up every this many of their
/// commits, so that what it has to read in its next batch (inside the project's turn) stays
/// small.
const MAX_SKIPPED_POKES: u32 = 64;

/// In a fleet, how long a project's actor keeps its PostgreSQL connection with nothing to do
/// before it gives it back to the daemon's pool: under load a batch follows another at once,
/// and keeping it saves the round trip sqlx makes to check a connection given back.
const REST_AFTER: std::time::Duration = std::time::Duration::from_millis(100);

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
                let left = (at - self.clock()).to_std().unwrap_or_default();
                tokio::time::Instant::now() + left.max(std::time::Duration::from_millis(1))
            });
            // In a fleet, the connection kept between batches goes back to the pool once
            // the project is idle.
            let rest = self
                .store
                .keeps_connection()
                .then(|| tokio::time::Instant::now() + REST_AFTER);
            enum Woken {
                Cmds(usize),
                Timer,
                Sweep,
                Rest,
            }
            let woken = tokio::select! {
                n = rx.recv_many(&mut cmds, MAX_BATCH) => Woken::Cmds(n),
                () = sleep_until(timer) => Woken::Timer,
                _ = sweep.tick() => Woken::Sweep,
                () = sleep_until(rest) => Woken::Rest,
            };
            match woken {
                Woken::Cmds(0) => break,
                Woken::Cmds(_) => {
                    if cmds.iter().all(|c| matches!(c, Cmd::Poke))
                        && self.pokes_skipped < MAX_SKIPPED_POKES
                        && !self.wants_pokes()
                    {
                        self.pokes_skipped += 1;
                        cmds.clear();
                        continue;
                    }
                    self.pokes_skipped = 0;
                    self.batch(std::mem::take(&mut cmds), &mut rx).await;
                    if self.stopping.is_some() {
                        break;
                    }
                }
                Woken::Timer => self.batch(Vec::new(), &mut rx).await,
                Woken::Sweep => self.reconcile(false).await,
                Woken::Rest => self.store.rest(),
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

    /// The time that leases and wait deadlines are judged by: PostgreSQL's in a fleet
    /// (as of the last batch, plus the time passed since by the monotonic clock), else this
    /// machine's.
    fn clock(&self) -> maos_core::Ts {
        match self.pg_clock {
            Some((at, read)) => {
                at + chrono::Duration::from_std(read.elapsed()).unwrap_or(chrono::Duration::zero())
            }
            None => crate::txn::state::now(),
        }
    }

    /// Whether another daemon's commit (a poke) needs a batch now: a parked wait may have been
    /// freed or ended there, a follower waits for the events, or a process of this machine may
    /// have to follow a change made there. Otherwise nothing is lost by waiting: the next
    /// request's batch starts from what PostgreSQL holds anyway, and skipping keeps these
    /// empty batches from taking the project's turn under load.
    fn wants_pokes(&self) -> bool {
        // The charts' follower is always subscribed; it can wait for the next batch.
        const CHARTS: usize = 1;
        !self.parked.is_empty()
            || self.events.receiver_count() > CHARTS
            || self.state.sessions().iter().any(|s| {
                s.agents.iter().any(|a| {
                    a.process.is_some() && !a.state.is_terminal() && a.machine == self.state.machine
                })
            })
    }

    async fn batch(&mut self, mut cmds: Vec<Cmd>, rx: &mut mpsc::Receiver<Cmd>) {
        self.gather(&mut cmds, rx).await;
        self.last_batch = cmds.len();
        // In a fleet, lock requests alone take per-path turns (DESIGN.md §10): beside the
        // other daemons' batches on other paths. What turns out to need more goes on below,
        // in the project's own turn.
        if let Some(paths) = self.path_turn(&cmds) {
            match self.path_batch(cmds, paths).await {
                Some(back) => cmds = back,
                None => return,
            }
        }
        // In a fleet the batch starts in PostgreSQL: what other daemons changed comes into
        // memory first. Without it no request may be applied.
        let fresh = match self.begin().await {
            Ok(f) => f,
            Err(e) => {
                warn!(project = %self.root, error = %e.message, "cannot begin the batch; it fails");
                self.refuse(cmds.into_iter(), &e);
                return;
            }
        };
        // In a fleet, what came while the batch waited for the project's turn goes in it too:
        // under several daemons that wait is most of a request's time, and requests that
        // share a turn share its round trips and its fsync.
        if fresh.is_some() {
            while cmds.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(c) => cmds.push(c),
                    Err(_) => break,
                }
            }
        }
        let mut txn = Txn::new(&mut self.state);
        if let Some(f) = fresh {
            f.apply(&mut txn);
        }
        // Waits whose clients went away are cancelled first, then leases and deadlines due.
        let gone: Vec<_> = self
            .parked
            .iter()
            .filter(|(_, (tx, _))| tx.is_closed())
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
                    // Its asker gave up (a hook past its budget while PostgreSQL did not
                    // answer, a client gone): it changes nothing.
                    if reply.is_closed() {
                        continue;
                    }
                    // All or nothing: a request that fails or panics leaves the transaction
                    // as the requests before it left it.
                    let result = txn.atomic(|tx| body.apply(tx)).unwrap_or_else(|_| {
                        error!(
                            "a request handler panicked; the request failed, the daemon goes on"
                        );
                        Err(handler_panicked())
                    });
                    replies.push((reply, result, txn.is_dirty()));
                }
                Cmd::Subscribe { filter, reply } => subs.push((filter, reply)),
                Cmd::Poke => {}
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
        let done = commit(&mut self.store, txn).await;
        let wakeups = match self.settle(done, "commit failed; batch rolled back").await {
            Ok(wakeups) => wakeups,
            Err(err) => {
                for (_, result, after_change) in &mut replies {
                    if *after_change {
                        *result = Err(err.clone());
                    }
                }
                Vec::new()
            }
        };
        for (reply, result, _) in replies {
            match result {
                Ok(Outcome::Park { wait, caller }) => {
                    self.parked.insert(wait, (reply, caller));
                }
                other => {
                    let _ = reply.send(other);
                }
            }
        }
        // After the replies: a wait parked and granted in the same batch is answered too.
        self.wake(wakeups);
        // Subscriptions are answered after the commit, so their snapshot covers it.
        for (filter, reply) in subs {
            let sub = cmd::resolve_filter(&self.state, &filter, None).map(|query| {
                let ended = filter.until_session_ends
                    && query
                        .session_id
                        .as_deref()
                        .and_then(|s| maos_core::SessionId::parse(s).ok())
                        .and_then(|s| self.state.session(&s).map(|s| s.state.is_terminal()))
                        .unwrap_or(false);
                Subscription {
                    query,
                    rx: self.events.subscribe(),
                    reader: self.store.reader(),
                    ended,
                }
            });
            let _ = reply.send(sub);
        }
    }

    /// In a fleet, while the project is busy: the requests that arrive within the gathering
    /// window join the batch (up to [`MAX_BATCH`]).
    async fn gather(&mut self, cmds: &mut Vec<Cmd>, rx: &mut mpsc::Receiver<Cmd>) {
        let Some(window) = self.gather else {
            return;
        };
        if self.last_batch < 2 || cmds.is_empty() {
            return;
        }
        let until = tokio::time::Instant::now() + window;
        while cmds.len() < MAX_BATCH {
            let room = MAX_BATCH - cmds.len();
            match tokio::time::timeout_at(until, rx.recv_many(cmds, room)).await {
                Ok(n) if n > 0 => {}
                _ => break,
            }
        }
    }

    /// The paths of a fleet batch that may take per-path turns, `None` for one that takes the
    /// project's turn. Only lock acquires and releases (and pokes) qualify, while this daemon
    /// has no lock wait of its own: a wait is recorded, granted and checked for deadlocks in
    /// the project's turn. The paths are the requests' lock keys (resolved on arrival).
    fn path_turn(&self, cmds: &[Cmd]) -> Option<Vec<LockPath>> {
        if !matches!(self.store, Store::Postgres(_))
            || self.stopping.is_some()
            || !self.parked.is_empty()
            || cmds.is_empty()
            || self.state.locks.waiters().iter().any(|w| !w.foreign)
        {
            return None;
        }
        let mut paths = Vec::new();
        for c in cmds {
            match c {
                Cmd::Poke => {}
                Cmd::Request { body, .. } => paths.push(body.path_turn()?.clone()),
                _ => return None,
            }
        }
        paths.sort();
        paths.dedup();
        Some(paths)
    }

    /// A batch of lock requests on `paths` in per-path turns: PostgreSQL's transaction holds
    /// the project's key shared and the paths' keys ([`maos_store::PgStore::path_keys`]), so
    /// it may change only locks on those paths (and under them). Applied as any batch; if it
    /// changed anything else (a lease of another path ran out, a request would wait, a
    /// renewal of another path is due), it is undone in memory and in PostgreSQL and the
    /// requests are handed back, to run in the project's turn. `None`: done and answered.
    async fn path_batch(&mut self, cmds: Vec<Cmd>, paths: Vec<LockPath>) -> Option<Vec<Cmd>> {
        let keys: Vec<&str> = paths.iter().map(|p| p.as_str()).collect();
        let begun = self.store.begin_paths(self.state.last_seq(), &keys).await?;
        let fresh = match begun.map_err(|e| storage_error(&e)) {
            Ok(f) => self.took(f),
            Err(e) => {
                warn!(project = %self.root, error = %e.message, "cannot begin the batch; it fails");
                self.refuse(cmds.into_iter(), &e);
                return None;
            }
        };
        let token_start = self.state.locks.next_token();
        let mut txn = Txn::new(&mut self.state);
        fresh.apply(&mut txn);
        let covers = |p: &LockPath| paths.iter().any(|k| k.contains(p));
        // The locks this batch may delete: those on its paths as PostgreSQL holds them now.
        let mine: std::collections::HashSet<u64> = txn
            .state()
            .locks
            .held()
            .filter(|l| covers(&l.path))
            .map(|l| l.token)
            .collect();
        txn.tick_locks();
        let mut asked = Vec::new();
        let mut replies = Vec::new();
        for cmd in cmds {
            let Cmd::Request { body, reply } = cmd else {
                continue;
            };
            if reply.is_closed() {
                continue;
            }
            let result = txn.atomic(|tx| body.clone().apply(tx)).unwrap_or_else(|_| {
                error!("a request handler panicked; the request failed, the daemon goes on");
                Err(handler_panicked())
            });
            replies.push((result, txn.is_dirty()));
            asked.push((body, reply));
        }
        txn.prepare_waits();
        let dirty = txn.is_dirty();
        if dirty {
            txn.prepare();
        }
        let only_paths = txn.only_locks(|st, token| {
            mine.contains(&token)
                || (token >= token_start && st.locks.get(token).is_some_and(|l| covers(&l.path)))
        });
        if !only_paths
            || replies
                .iter()
                .any(|(r, _)| matches!(r, Ok(Outcome::Park { .. })))
        {
            debug!(project = %self.root, "a batch of lock requests needs the project's turn");
            txn.rollback();
            self.store.abandon().await;
            self.reload_locks(&internal("the batch moved to the project's turn"))
                .await;
            return Some(
                asked
                    .into_iter()
                    .map(|(body, reply)| Cmd::Request { body, reply })
                    .collect(),
            );
        }
        let done = if dirty {
            write(&mut self.store, txn).await
        } else {
            self.store.end().await;
            Commit::Nothing
        };
        let wakeups = match self.settle(done, "commit failed; batch rolled back").await {
            Ok(wakeups) => wakeups,
            Err(err) => {
                for (result, after_change) in &mut replies {
                    if *after_change {
                        *result = Err(err.clone());
                    }
                }
                Vec::new()
            }
        };
        for ((_, reply), (result, _)) in asked.into_iter().zip(replies) {
            let _ = reply.send(result);
        }
        self.wake(wakeups);
        None
    }

    /// Start a batch in the store. In a fleet: what other daemons changed is taken into memory
    /// (sessions, the event counter; their events go to this daemon's subscribers), and the
    /// rest (PostgreSQL's clock, the token block, the lock rows) is returned for the batch's
    /// transaction. On SQLite: nothing.
    async fn begin(&mut self) -> Result<Option<Begun>, ErrorBody> {
        let Some(fresh) =
            (self.store.begin(self.state.last_seq()).await).map_err(|e| storage_error(&e))?
        else {
            return Ok(None);
        };
        Ok(Some(self.took(fresh)))
    }

    /// What a fleet batch's start read: other daemons' changes into memory, their events to
    /// this daemon's subscribers; the rest for the batch's transaction.
    fn took(&mut self, fresh: maos_store::Fresh) -> Begun {
        // This machine's processes follow what other daemons changed of their agents.
        let effects = crate::ops::effects::catch_up(&self.state, &fresh.sessions);
        self.state.refresh(
            fresh.sessions,
            &fresh.gone,
            fresh.last_seq,
            fresh.locks.as_deref(),
        );
        for e in fresh.events {
            let _ = self.events.send(Arc::new(e));
        }
        self.execute(effects);
        // Before the batch's transaction: a fresh block is not a change to write.
        self.state.locks.raise_next_token(fresh.token_start);
        self.pg_clock = Some((fresh.now, tokio::time::Instant::now()));
        Begun {
            now: fresh.now,
            locks: fresh.locks,
            waits: fresh.waits,
        }
    }

    /// Answer a batch that cannot be applied: every request fails with `err`, subscriptions
    /// and the rest are served as usual.
    fn refuse(&mut self, cmds: impl Iterator<Item = Cmd>, err: &ErrorBody) {
        for cmd in cmds {
            match cmd {
                Cmd::Request { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Cmd::Subscribe { reply, .. } => {
                    let _ = reply.send(Err(err.clone()));
                }
                Cmd::Info { reply } => {
                    let _ = reply.send(project_info(&self.root, &self.hash, &self.state));
                }
                Cmd::Stop { done } => self.stopping = Some(done),
                Cmd::Poke => {}
                Cmd::Started { agent, .. } => {
                    warn!(agent = %agent, "an agent's start could not be recorded: {}", err.message);
                }
            }
        }
    }

    /// Carry out the process work of a committed batch.
    fn execute(&self, effects: Vec<crate::proc::run::Effect>) {
        use crate::proc::run::Effect;
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
                Effect::Signal { pgid, sig } => crate::proc::run::signal(pgid, sig),
                Effect::KillAfter {
                    pgid,
                    start_time,
                    after,
                } => crate::proc::run::kill_after(pgid, start_time, after),
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

    /// Answer the parked lock waits that a commit ended. A grant whose client went away
    /// between the batch's check and this answer (its connection closed) is released again
    /// by the next batch: nobody would ever release it otherwise.
    fn wake(&mut self, wakeups: Vec<Wakeup>) {
        let mut lost = Vec::new();
        for (wait, result) in wakeups {
            if let Some((reply, caller)) = self.parked.remove(&wait) {
                let granted = match &result {
                    Ok(maos_proto::Reply::Lock(view)) => Some(view.clone()),
                    _ => None,
                };
                let result = result.map(|r| match caller {
                    Some(caller) => maos_proto::Reply::Mcp {
                        caller: Some(*caller),
                        reply: Box::new(r),
                    },
                    None => r,
                });
                if reply.send(result.map(Outcome::from)).is_err()
                    && let Some(view) = granted
                {
                    lost.push(view);
                }
            }
        }
        if lost.is_empty() {
            return;
        }
        let Some(me) = self.me.upgrade() else { return };
        tokio::spawn(async move {
            for view in lost {
                info!(agent = %view.holder, path = %view.path, "a lock was granted to a waiter that went away; releasing it");
                let (reply, _) = oneshot::channel();
                let Ok(key) = LockPath::new(&view.path) else {
                    continue;
                };
                let req = maos_proto::req::LockRelease {
                    agent: Some(view.holder.to_string()),
                    at: maos_proto::req::LockAt::default(),
                    force: false,
                    by: Some("maosd: its waiter went away before the grant reached it".into()),
                };
                let body = ProjectRequest::new(crate::cmd::Keyed { req, key });
                if me.send(Cmd::Request { body, reply }).await.is_err() {
                    return;
                }
            }
        });
    }

    /// What follows every commit: its events go to subscribers, its process work is carried
    /// out, and its checkpoints' readable files are written. Returns the answers for parked
    /// lock waits, which the caller delivers.
    fn committed(&self, done: Finished) -> Vec<Wakeup> {
        for e in done.events {
            // No subscribers is fine.
            let _ = self.events.send(Arc::new(e));
        }
        self.execute(done.effects);
        files::write_checkpoints(&self.runner.project_dir, done.checkpoints);
        done.wakeups
    }

    /// At start (`all`): reconcile every managed session with its processes, then let each
    /// take its next steps. Between starts, the same for the sessions whose agent's exit was
    /// lost (`cmd::managed::sweep`).
    async fn reconcile(&mut self, all: bool) {
        let t0 = std::time::Instant::now();
        let fresh = match self.begin().await {
            Ok(f) => f,
            Err(e) => {
                warn!(project = %self.root, error = %e.message, "cannot begin the recovery; it runs again later");
                return;
            }
        };
        // This machine's processes are stopped or running as their records say.
        let held = crate::ops::effects::hold_as_recorded(&self.state, crate::proc::procs::stopped);
        self.execute(held);
        let mut txn = Txn::new(&mut self.state);
        if let Some(f) = fresh {
            f.apply(&mut txn);
        }
        // All or nothing: a recovery that fails changes nothing and runs again later.
        let root = &self.root;
        let report = txn.atomic(|tx| {
            let report = if all {
                crate::ops::recovery::recover(tx, None)
            } else {
                crate::ops::recovery::sweep(tx)
            }?;
            // Windows whose CLI is gone without a word: ended, their locks freed.
            let ended = crate::ops::hook::end_lost_windows(tx)?;
            if ended > 0 {
                info!(project = %root, windows = ended, "ended agent CLI windows whose process is gone");
            }
            Ok::<_, ErrorBody>(report)
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
        let t1 = std::time::Instant::now();
        let done = commit(&mut self.store, txn).await;
        if let Commit::Done(_) = done {
            debug!(project = %self.root, ms = t1.elapsed().as_secs_f64() * 1e3, "recovery committed");
        }
        let failed = "cannot commit the recovery; it runs again (at the next sweep or start)";
        // A lost agent's exit frees its locks: waits granted by that are answered.
        if let Ok(wakeups) = self.settle(done, failed).await {
            self.wake(wakeups);
        }
    }

    /// What follows a transaction's [`commit`]: after a commit, its events go out, its
    /// process work is carried out and the other daemons are told (returns the answers for
    /// parked waits, which the caller delivers); after a rollback, the lock table is reloaded
    /// if the transaction touched it, and the error (logged as `failed`) is returned for the
    /// requests that changed something.
    async fn settle(&mut self, done: Commit, failed: &str) -> Result<Vec<Wakeup>, ErrorBody> {
        match done {
            Commit::Nothing => Ok(Vec::new()),
            Commit::Done(mut done) => {
                // Per-path turns: other daemons' events took the numbers before this batch's
                // ones. They are read back with those, in order, by the next batch (which a
                // follower here does not wait for), not published now.
                if self.store.renumbered() {
                    if let Some(first) = done.events.first() {
                        self.state.forget_events_from(first.seq);
                    }
                    done.events.clear();
                    if self.events.receiver_count() > 1
                        && let Some(me) = self.me.upgrade()
                    {
                        let _ = me.try_send(Cmd::Poke);
                    }
                }
                let wakeups = self.committed(done);
                if let Some(n) = &self.notifier {
                    n.send();
                }
                Ok(wakeups)
            }
            Commit::RolledBack {
                error,
                locks_changed,
            } => {
                warn!(project = %self.root, error = %error, "{failed}");
                let err = storage_error(&error);
                if locks_changed {
                    self.reload_locks(&err).await;
                }
                Err(err)
            }
        }
    }

    /// After a failed commit the lock table may hold grants the database never saw: rebuild it
    /// from what is committed, and end every parked wait (its place in the queue is gone).
    async fn reload_locks(&mut self, err: &ErrorBody) {
        for (_, (reply, _)) in self.parked.drain() {
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

/// How a transaction ended ([`commit`]).
enum Commit {
    /// It changed nothing: there was nothing to write.
    Nothing,
    /// Written: what is left to do.
    Done(Finished),
    /// The write failed: memory is back as it was before the transaction.
    RolledBack {
        error: maos_store::StoreError,
        /// The lock table may hold grants the database never saw.
        locks_changed: bool,
    },
}

/// The one way a transaction ends (a batch of requests, a recovery): written to the store
/// all at once, or, if that fails, rolled back in memory. The store's own transaction (begun
/// by the batch) is ended either way.
async fn commit(store: &mut Store, mut txn: Txn<'_>) -> Commit {
    txn.prepare_waits();
    if !txn.is_dirty() {
        store.end().await;
        return Commit::Nothing;
    }
    txn.prepare();
    write(store, txn).await
}

/// Write a prepared transaction ([`Txn::prepare`]); roll it back in memory if that fails.
async fn write(store: &mut Store, txn: Txn<'_>) -> Commit {
    match store.commit(&txn.batch()).await {
        Ok(()) => Commit::Done(txn.finish()),
        Err(error) => {
            let locks_changed = txn.touched_locks();
            txn.rollback();
            Commit::RolledBack {
                error,
                locks_changed,
            }
        }
    }
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

/// Open a project's database and start its actor. Takes everything by value: sqlx's futures
/// trip rustc's higher-ranked `Send` inference when they hold borrowed arguments.
pub(super) async fn open(
    root: String,
    hash: String,
    dir: PathBuf,
    socket: PathBuf,
    opts: StoreOptions,
) -> Result<(ProjectHandle, tokio::task::JoinHandle<()>), ErrorBody> {
    // In a fleet a project without a key is refused before anything is written for it.
    let key = opts.fleet.as_ref().map(|_| fleet_key(&root)).transpose()?;
    files::claim(&dir, &root, &hash)?;
    let t0 = std::time::Instant::now();
    let radar_key = key.as_ref().map(|k| k.as_str().to_string());
    let mut store = match (&opts.fleet, key) {
        (Some(fleet), Some(key)) => Store::open_fleet(fleet, key.as_str(), &root).await,
        _ => Store::open(dir.join("maos.db"), opts.clone()).await,
    }
    .map_err(|e| storage_error(&e))?;
    debug!(project = %root, ms = t0.elapsed().as_secs_f64() * 1e3, "database opened");
    // Until the background checkpoints run (below): a crash can leave a WAL that recovery's
    // commit would otherwise copy back before the daemon serves. Only speed depends on it.
    store.set_autocheckpoint(false);
    let loaded = store.load().await.map_err(|e| storage_error(&e))?;
    info!(project = %root, sessions = loaded.sessions.len(), last_seq = loaded.last_seq, ms = t0.elapsed().as_secs_f64() * 1e3, "project opened");
    let (tx, rx) = mpsc::channel(QUEUE);
    let (events, _) = broadcast::channel(EVENT_BUFFER);
    let reader = store.reader();
    // Subscribed before the actor commits anything: the charts miss no event.
    let charts = Arc::new(Charts::new(&dir));
    tokio::spawn(crate::project::charts::follow(
        charts.clone(),
        reader.clone(),
        events.subscribe(),
    ));
    // The conflict radar follows the committed events too, off the actor; what it finds comes
    // back as a request. In a fleet, with what the other daemons report of their machines'.
    let radar = {
        let actor = tx.downgrade();
        let fleet = crate::radar::fleet::FleetLink::new(opts.fleet.clone(), radar_key);
        let (dir, root) = (dir.join("radar"), PathBuf::from(&root));
        crate::radar::Radar::start(&dir, root, fleet, move |notes| {
            if let Some(actor) = actor.upgrade() {
                let (reply, answer) = oneshot::channel();
                let body = ProjectRequest::new(notes);
                if actor.blocking_send(Cmd::Request { body, reply }).is_ok()
                    && let Ok(Err(e)) = answer.blocking_recv()
                {
                    warn!(error = %e.message, "the radar's events were not recorded");
                }
            }
        })
    };
    tokio::spawn(crate::radar::follow(radar.clone(), events.subscribe()));
    let runner = crate::proc::run::Runner {
        exe: std::env::current_exe()
            .map_err(|e| internal(format_args!("cannot find the maosd binary: {e}")))?,
        socket,
        root: root.clone(),
        project_dir: dir.clone(),
    };
    let notifier = opts.fleet.as_ref().and_then(|f| store.notifier(f.daemon()));
    let kept = crate::txn::keep::Shared::default();
    let mut actor = Actor {
        root,
        hash,
        state: {
            let mut st = State::new(loaded.sessions, loaded.last_seq);
            st.reset_locks(loaded.locks, loaded.next_token);
            st.set_checkpointed(loaded.checkpointed);
            st.runner = Some(runner.clone());
            st.machine = opts.fleet.as_ref().map(|f| f.machine().to_string());
            st.kept = kept.clone();
            st.radar = Some(radar.clone());
            crate::ops::violation::settle_state(&st);
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
        notifier,
        pokes_skipped: 0,
        pg_clock: None,
        gather: opts.fleet.as_ref().and_then(|_| gather_window()),
        last_batch: 0,
    };
    actor.reconcile(true).await;
    actor.checkpoints = checkpointer::spawn(&actor.store, actor.root.clone()).await?;
    actor.store.set_autocheckpoint(true);
    let task = tokio::spawn(actor.run(rx));
    Ok((
        ProjectHandle {
            tx,
            reader,
            charts,
            radar,
            kept,
        },
        task,
    ))
}

/// The project's key in a fleet (`maos_core::project_key`), or the line that says how to give
/// it one.
fn fleet_key(root: &str) -> Result<maos_core::project_key::ProjectKey, ErrorBody> {
    maos_proto::paths::repository_key(std::path::Path::new(root)).map_err(|e| {
        ErrorBody::new(
            maos_proto::ErrorCode::BadRequest,
            format!("fleet mode cannot take the project at {root}: {e}"),
        )
    })
}

/// In a fleet, how long a busy project's batch waits for more requests before it starts:
/// PostgreSQL's work is mostly per batch (its start, its write, its commit and fsync, the
/// notification), so requests that share a batch share it. Only while the project is busy (the
/// last batch took more than one request): a lone client never waits. `MAOS_FLEET_GATHER_US`
/// (microseconds; 0: never), else [`GATHER`].
fn gather_window() -> Option<std::time::Duration> {
    let us = std::env::var("MAOS_FLEET_GATHER_US")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(GATHER.as_micros() as u64);
    (us > 0).then(|| std::time::Duration::from_micros(us))
}

/// The fleet's gathering window by default ([`gather_window`]). Measured with 3 daemons x 20
/// agents (`maos-bench fleet-contention`, a busy 2-core machine, interleaved): grants/s
/// without a window 757-1,014, with 0.3 ms 1,021-1,181, with 1 ms 1,082-1,537 (PostgreSQL's
/// CPU a grant 0.48-0.62 ms instead of 0.67-0.95), with 2 ms 1,593-1,622; 1 ms keeps what a
/// request of a busy project may wait for others small.
const GATHER: std::time::Duration = std::time::Duration::from_millis(1);

/// How often the actor looks for managed agents whose exit was lost (`cmd::managed::sweep`):
/// 10 s, or `MAOS_TEST_SWEEP_MS` (the end-to-end tests' override).
fn sweep_every() -> std::time::Duration {
    crate::base::config::interval("MAOS_TEST_SWEEP_MS", std::time::Duration::from_secs(10))
}
