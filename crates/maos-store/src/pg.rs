//! PostgreSQL persistence for fleet mode (DESIGN.md §10): one database holds every project of
//! a fleet, each row keyed by its project's key. [`Fleet`] is a daemon's pool and identity in
//! that database (migrated once, by whichever daemon comes first); [`PgStore`] is one project's
//! writer, [`PgReader`] its history reads. The rows are the same records as SQLite's
//! (`rows.rs` decodes both). Each batch is one transaction: [`PgStore::begin`] locks the
//! project's key and reads what other daemons changed, then the batch's rows are written in
//! one statement (each table's rows one JSON array, `jsonb_to_recordset`, every table's change
//! a data-modifying `WITH` clause) and committed.

use std::sync::Arc;
use std::time::Duration;

use maos_core::HeldLock;
use maos_core::record::EventRecord;
use maos_core::text::collapse_whitespace;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions, PgRow};
use sqlx::{ConnectOptions, Executor, QueryBuilder, Row};

use crate::rows::{self, Cols};
use crate::{Batch, EventQuery, Health, Loaded, StoreError};

mod lit;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations/postgres");

/// How many fencing tokens one draw of the `maos_fence` sequence reserves (its increment).
const TOKEN_BLOCK: u64 = 65_536;

/// How long a daemon waits for a connection to PostgreSQL before the request fails as
/// unavailable.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);

/// How long one background attempt to reach a PostgreSQL known not to answer may take, and
/// the pause between two attempts ([`Fleet::check`]).
const PROBE_TIMEOUT: Duration = Duration::from_secs(2);
const PROBE_PAUSE: Duration = Duration::from_millis(250);

/// What the daemon last learnt of its PostgreSQL: why it does not answer, while a background
/// attempt to connect has failed and none succeeded since.
#[derive(Debug, Default)]
struct Reach {
    down: std::sync::Mutex<Option<String>>,
    probing: std::sync::atomic::AtomicBool,
}

impl Cols for PgRow {
    fn text(&self, col: &str) -> Result<String, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn text_opt(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn int_opt(&self, col: &str) -> Result<Option<i64>, StoreError> {
        // `integer` columns are int4, timestamps and counters int8: either reads as i64.
        match self.try_get::<Option<i64>, _>(col) {
            Ok(v) => Ok(v),
            Err(sqlx::Error::ColumnDecode { .. }) => {
                Ok(self.try_get::<Option<i32>, _>(col)?.map(i64::from))
            }
            Err(e) => Err(e.into()),
        }
    }
    fn flag(&self, col: &str) -> Result<bool, StoreError> {
        Ok(self.try_get(col)?)
    }
}

/// A daemon's membership of a fleet: the pool to its PostgreSQL and who the daemon is there.
/// Connections are made on first use, so a daemon starts (and says why it cannot serve) while
/// PostgreSQL is unreachable.
pub struct Fleet {
    pool: PgPool,
    /// For the notifications: their own connections, whose commits do not wait for the disk
    /// (a notification is a hint; the batch it tells of is committed durably already).
    notify_pool: PgPool,
    /// For the migration's own connection.
    opts: PgConnectOptions,
    shown: String,
    daemon: String,
    machine: String,
    /// Migrated, and this daemon's row written: done once, by the first project that opens.
    joined: tokio::sync::OnceCell<()>,
    /// Whether PostgreSQL is known not to answer ([`Fleet::down`]).
    health: Arc<Reach>,
}

impl std::fmt::Debug for Fleet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Fleet")
            .field("url", &self.shown)
            .field("daemon", &self.daemon)
            .finish()
    }
}

/// What `maos daemon status` and `maos doctor` say about the fleet's database.
#[derive(Clone, Debug)]
pub struct FleetStatus {
    /// Reachable: PostgreSQL's version (`server_version`). Else why not.
    pub result: Result<String, String>,
    /// The fleet's daemons, the most recently seen first (none when PostgreSQL did not
    /// answer, or no daemon joined yet).
    pub members: Vec<Member>,
}

/// A daemon of the fleet, as its row says.
#[derive(Clone, Debug)]
pub struct Member {
    pub id: String,
    pub machine: String,
    pub started_at: maos_core::Ts,
    /// How long ago it last wrote that it is alive, by PostgreSQL's clock (µs).
    pub seen_us_ago: i64,
}

impl Fleet {
    /// The fleet at `url` (`postgres://…`), as daemon `daemon` on `machine`. Nothing connects
    /// yet; a URL that does not parse is refused, in one line without its password.
    pub fn new(url: &str, daemon: String, machine: String) -> Result<Fleet, StoreError> {
        let shown = redact(url);
        let opts: PgConnectOptions = url.parse().map_err(|e: sqlx::Error| {
            StoreError::BadUrl(format!("{shown}: {}", collapse_whitespace(&e.to_string())))
        })?;
        // Statements are logged by the daemon's own spans, not per query.
        let opts = opts
            .application_name(&format!("maosd {daemon}"))
            .disable_statement_logging();
        // One connection per project while its batch runs, one for the notifications'
        // listener, a few for history reads. No ping before each use (a round trip per
        // batch): a connection that broke fails its batch as `unavailable` and is dropped,
        // and the next batch takes a new one.
        let pool = PgPoolOptions::new()
            .test_before_acquire(false)
            .max_connections(16)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(opts.clone());
        // Not checked before each use either (a round trip per notification).
        let notify_pool = PgPoolOptions::new()
            .test_before_acquire(false)
            .max_connections(2)
            .min_connections(0)
            .acquire_timeout(CONNECT_TIMEOUT)
            .connect_lazy_with(opts.clone().options([("synchronous_commit", "off")]));
        Ok(Fleet {
            pool,
            notify_pool,
            opts,
            shown,
            daemon,
            machine,
            joined: tokio::sync::OnceCell::new(),
            health: Arc::default(),
        })
    }

    /// Why PostgreSQL is known not to answer: a background attempt to connect
    /// ([`Fleet::check`]) failed, and none has succeeded since. `None` while it answers, as
    /// far as this daemon knows.
    pub fn down(&self) -> Option<String> {
        self.health.down.lock().ok().and_then(|d| d.clone())
    }

    /// PostgreSQL may not be answering (a request failed as unreachable, or did not get its
    /// answer in time): try to connect in the background, again every 250 ms, until it
    /// answers; meanwhile [`Fleet::down`] says why not. At most one such task runs. Call it
    /// within a tokio runtime.
    pub fn check(&self) {
        use sqlx::Connection;
        use std::sync::atomic::Ordering::SeqCst;
        if self.health.probing.swap(true, SeqCst) {
            return;
        }
        let health = self.health.clone();
        let opts = self.opts.clone();
        let shown = self.shown.clone();
        let pool = self.pool.clone();
        tokio::spawn(async move {
            while !pool.is_closed() {
                let attempt = sqlx::postgres::PgConnection::connect_with(&opts);
                let why = match tokio::time::timeout(PROBE_TIMEOUT, attempt).await {
                    Ok(Ok(c)) => {
                        let _ = c.close().await;
                        break;
                    }
                    Ok(Err(e)) => collapse_whitespace(&e.to_string()),
                    Err(_) => format!("no answer within {}s", PROBE_TIMEOUT.as_secs()),
                };
                tracing::debug!(error = %why, "the fleet's PostgreSQL does not answer");
                if let Ok(mut d) = health.down.lock() {
                    *d = Some(format!(
                        "the fleet's PostgreSQL at {shown} does not answer ({why}); nothing \
                         was changed, retry once it is back"
                    ));
                }
                tokio::time::sleep(PROBE_PAUSE).await;
            }
            if let Ok(mut d) = health.down.lock() {
                *d = None;
            }
            health.probing.store(false, SeqCst);
        });
    }

    /// The URL without its password.
    pub fn url(&self) -> &str {
        &self.shown
    }

    /// This daemon's id in the fleet.
    pub fn daemon(&self) -> &str {
        &self.daemon
    }

    /// This daemon's machine (its host name).
    pub fn machine(&self) -> &str {
        &self.machine
    }

    /// The pool (for the fleet's other tables, `pg_radar.rs`).
    pub(crate) fn pool(&self) -> &PgPool {
        &self.pool
    }

    /// Migrate the database (once, whichever daemon comes first: sqlx holds an advisory lock
    /// while it migrates) and record this daemon as a member. A database migrated by a newer
    /// maos is refused.
    pub(crate) async fn join(&self) -> Result<(), StoreError> {
        self.joined
            .get_or_try_init(|| async {
                // On a connection of its own, closed whatever happened: the migrator holds a
                // session-level advisory lock while it works, and a failed run would otherwise
                // hand that connection, still locked, back to the pool (every later migration
                // waiting for it for ever).
                let own = PgPoolOptions::new()
                    .max_connections(1)
                    .acquire_timeout(CONNECT_TIMEOUT)
                    .connect_lazy_with(self.opts.clone());
                let ran = MIGRATOR.run(&own).await;
                own.close().await;
                ran.map_err(|e| match e {
                    sqlx::migrate::MigrateError::VersionMissing(v) => StoreError::Newer(format!(
                        "the fleet database {} has schema version {v}, which this maos does \
                         not know: upgrade maos on this machine",
                        self.shown
                    )),
                    other => StoreError::Migrate(other),
                })?;
                sqlx::query(
                    "INSERT INTO daemons (id, machine, started_at, last_seen)
                     VALUES ($1, $2, maos_now_us(), maos_now_us())
                     ON CONFLICT (id) DO UPDATE SET machine = excluded.machine,
                         started_at = excluded.started_at, last_seen = excluded.last_seen",
                )
                .bind(&self.daemon)
                .bind(&self.machine)
                .execute(&self.pool)
                .await?;
                // Waits of this daemon's last run: their clients went with it.
                sqlx::query("DELETE FROM lock_waits WHERE daemon = $1")
                    .bind(&self.daemon)
                    .execute(&self.pool)
                    .await?;
                Ok(())
            })
            .await
            .map(|_| ())
    }

    /// Whether the fleet has recorded anything for the project `key` (joining the fleet
    /// first: a database no daemon migrated yet has no table to ask).
    pub async fn has_project(&self, key: &str) -> Result<bool, StoreError> {
        self.join().await.map_err(|e| unreachable(&self.shown, e))?;
        sqlx::query_scalar("SELECT EXISTS (SELECT 1 FROM projects WHERE key = $1)")
            .bind(key)
            .fetch_one(&self.pool)
            .await
            .map_err(|e| unreachable(&self.shown, e.into()))
    }

    /// Whether PostgreSQL answers, its version, and the fleet's daemons.
    pub async fn status(&self) -> FleetStatus {
        let result = sqlx::query_scalar::<_, String>("SHOW server_version")
            .fetch_one(&self.pool)
            .await
            .map_err(|e| collapse_whitespace(&StoreError::from(e).to_string()));
        // A database no daemon migrated yet has no table of them: none to show.
        let members = match &result {
            Ok(_) => self.members().await.unwrap_or_default(),
            Err(_) => Vec::new(),
        };
        FleetStatus { result, members }
    }

    /// The fleet's daemons, the most recently seen first (at most 100).
    async fn members(&self) -> Result<Vec<Member>, StoreError> {
        sqlx::query(
            "SELECT id, machine, started_at, maos_now_us() - last_seen AS ago FROM daemons
             ORDER BY last_seen DESC, id LIMIT 100",
        )
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(|r| {
            Ok(Member {
                id: r.text("id")?,
                machine: r.text("machine")?,
                started_at: rows::from_us(r.int("started_at")?),
                seen_us_ago: r.int("ago")?,
            })
        })
        .collect()
    }

    /// Write that this daemon is alive (`daemons.last_seen`, by PostgreSQL's clock), joining
    /// the fleet first if it has not yet.
    pub async fn heartbeat(&self) -> Result<(), StoreError> {
        self.join().await.map_err(|e| unreachable(&self.shown, e))?;
        sqlx::query("UPDATE daemons SET last_seen = maos_now_us() WHERE id = $1")
            .bind(&self.daemon)
            .execute(&self.pool)
            .await
            .map_err(|e| unreachable(&self.shown, e.into()))?;
        Ok(())
    }

    /// A connection of its own that receives the fleet's notifications (`LISTEN`); sqlx's
    /// listener reconnects by itself, saying so by a `None` from `try_recv`.
    pub async fn listener(&self) -> Result<sqlx::postgres::PgListener, StoreError> {
        self.join().await.map_err(|e| unreachable(&self.shown, e))?;
        sqlx::postgres::PgListener::connect_with(&self.pool)
            .await
            .map_err(|e| unreachable(&self.shown, e.into()))
    }

    /// Close the pool (the daemon is stopping).
    pub async fn close(&self) {
        self.pool.close().await;
        self.notify_pool.close().await;
    }
}

/// The notification channel of a project: `maos_p_` and 16 hex digits of its key (a
/// PostgreSQL identifier is at most 63 bytes; a key may be longer).
pub fn channel(key: &str) -> String {
    format!("maos_p_{:016x}", maos_core::fnv::fnv1a64(key.as_bytes()))
}

/// Tells the fleet that a daemon committed a batch of one project (`NOTIFY`, with the daemon's
/// id as payload so that it can ignore its own). A hint: a lost one is caught up by the next
/// batch, which always starts from what PostgreSQL holds.
#[derive(Clone)]
pub struct Notifier {
    pool: PgPool,
    channel: Arc<str>,
    from: Arc<str>,
    /// 0: none in flight; 1: one in flight; 2: one in flight and another asked for since.
    state: Arc<std::sync::atomic::AtomicU8>,
}

impl Notifier {
    /// Send it from a task of its own, after the commit: never in the batch's transaction
    /// (a NOTIFY holds a database-wide lock through its commit). Commits that follow each
    /// other faster than notifications go out share them: while one is in flight, the next
    /// ones make a single one more, sent once it is done (so the last commit is always told).
    pub fn send(&self) {
        use std::sync::atomic::Ordering::SeqCst;
        let before = self
            .state
            .fetch_update(SeqCst, SeqCst, |s| Some(if s == 0 { 1 } else { 2 }))
            .unwrap_or(2);
        if before != 0 {
            return;
        }
        let me = self.clone();
        tokio::spawn(async move {
            loop {
                if let Err(e) = sqlx::query("SELECT pg_notify($1, $2)")
                    .bind(&*me.channel)
                    .bind(&*me.from)
                    .execute(&me.pool)
                    .await
                {
                    tracing::debug!(error = %e, "a fleet notification was not sent");
                }
                if me.state.compare_exchange(1, 0, SeqCst, SeqCst).is_ok() {
                    return;
                }
                me.state.store(1, SeqCst);
            }
        });
    }
}

/// One project's writer in a fleet's database. Every batch is a transaction that starts with
/// [`PgStore::begin`] (the project's key locked, what other daemons changed read back) and
/// ends with [`PgStore::commit`] or [`PgStore::end`].
pub struct PgStore {
    pool: PgPool,
    notify_pool: PgPool,
    key: Arc<str>,
    shown: Arc<str>,
    /// The batch's connection, its transaction open between `begin` and `commit`/`end`,
    /// and kept (clean) for the next batch until [`PgStore::rest`] gives it back.
    conn: Option<BatchConn>,
    /// The project's `lock_seq` as of the lock rows this daemon has.
    lock_seq: i64,
    /// Whether the lock table holds the other daemons' waits as of `lock_seq` (not after a
    /// load, which rebuilds the table from the held locks only).
    waits_known: bool,
    /// This daemon's id in the fleet (its waits' rows are its own).
    daemon: Arc<str>,
    /// The end (exclusive) of the fencing-token block this batch numbers grants from.
    tokens_end: u64,
    /// The batch under way took per-path turns ([`PgStore::begin_paths`]): other batches of
    /// the project may commit beside it, so its events are numbered at its commit.
    shared: bool,
    /// The last commit's events were numbered past others' committed beside it (their
    /// events come before this batch's, and this daemon has not read them yet).
    renumbered: bool,
}

/// A pooled connection a project's batches use. `clean`: no transaction open on it and no
/// statement half read. Dropped while not clean (a batch's future dropped mid-way, a statement
/// that failed), it is closed rather than given back to the pool: PostgreSQL rolls back what
/// was open, and no later batch runs inside it.
struct BatchConn {
    c: sqlx::pool::PoolConnection<sqlx::Postgres>,
    clean: bool,
}

impl BatchConn {
    fn new(c: sqlx::pool::PoolConnection<sqlx::Postgres>) -> BatchConn {
        BatchConn { c, clean: true }
    }
}

impl Drop for BatchConn {
    fn drop(&mut self) {
        if !self.clean {
            self.c.close_on_drop();
        }
    }
}

/// What a batch starts from in a fleet: PostgreSQL's clock, a fresh block of tokens, and what
/// other daemons changed since this one last knew the project.
#[derive(Debug)]
pub struct Fresh {
    /// PostgreSQL's clock once the project's key is locked: the batch's `now`.
    pub now: maos_core::Ts,
    /// The first token of the batch's block.
    pub token_start: u64,
    /// The project's last event number.
    pub last_seq: u64,
    /// Live sessions that changed (whole, with phases and agents).
    pub sessions: Vec<maos_core::record::SessionRecord>,
    /// Sessions archived elsewhere: out of memory.
    pub gone: Vec<maos_core::SessionId>,
    /// The events committed elsewhere, oldest first.
    pub events: Vec<EventRecord>,
    /// Every held lock of the project, when any lock row changed.
    pub locks: Option<Vec<(HeldLock, i64)>>,
    /// The lock waits, when any lock or wait row changed.
    pub waits: Option<FleetWaits>,
}

/// The lock waits of a fleet's project, as one daemon needs them.
#[derive(Debug, Default)]
pub struct FleetWaits {
    /// The other daemons' live waits, in arrival order.
    pub foreign: Vec<maos_core::ForeignWait>,
    /// This daemon's waits that another daemon ended (id, the message for its agent).
    pub ended: Vec<(u64, String)>,
}

/// The key of a fleet's wait in every daemon's lock table: its daemon and its id there.
pub(crate) fn wait_key(daemon: &str, wait: u64) -> String {
    format!("{daemon}#{wait}")
}

impl crate::EndedWait {
    /// The end of the foreign wait [`wait_key`] named `key`, for its daemon to answer with
    /// `message`. `None` for a key no daemon made.
    pub fn of(key: &str, message: String) -> Option<crate::EndedWait> {
        let (daemon, wait) = key.rsplit_once('#')?;
        Some(crate::EndedWait {
            daemon: daemon.to_string(),
            wait: wait.parse().ok()?,
            message,
        })
    }
}

impl PgStore {
    /// Join the fleet (migrating it first if needed) and record the project `key`, checked
    /// out at `root` on this daemon's machine.
    pub async fn open(fleet: &Fleet, key: &str, root: &str) -> Result<PgStore, StoreError> {
        fleet.join().await?;
        sqlx::query("INSERT INTO projects (key) VALUES ($1) ON CONFLICT (key) DO NOTHING")
            .bind(key)
            .execute(&fleet.pool)
            .await?;
        sqlx::query(
            "INSERT INTO project_roots (project, daemon, root) VALUES ($1, $2, $3)
             ON CONFLICT (project, daemon) DO UPDATE SET root = excluded.root",
        )
        .bind(key)
        .bind(fleet.daemon())
        .bind(root)
        .execute(&fleet.pool)
        .await?;
        Ok(PgStore {
            pool: fleet.pool.clone(),
            notify_pool: fleet.notify_pool.clone(),
            key: key.into(),
            shown: fleet.shown.as_str().into(),
            conn: None,
            lock_seq: 0,
            waits_known: false,
            daemon: fleet.daemon().into(),
            tokens_end: 0,
            shared: false,
            renumbered: false,
        })
    }

    /// The fleet's URL, without its password.
    pub fn url(&self) -> Arc<str> {
        self.shown.clone()
    }

    /// What tells the other daemons that this one committed a batch of the project.
    pub fn notifier(&self, daemon: &str) -> Notifier {
        Notifier {
            pool: self.notify_pool.clone(),
            channel: channel(&self.key).into(),
            from: daemon.into(),
            state: Default::default(),
        }
    }

    pub fn reader(&self) -> PgReader {
        PgReader {
            pool: self.pool.clone(),
            key: self.key.clone(),
            shown: self.shown.clone(),
        }
    }

    /// The project's live sessions, held locks and counters; the next token is the start of
    /// a fresh block.
    pub async fn load(&mut self) -> Result<Loaded, StoreError> {
        let sessions = {
            let mut c = self.pool.acquire().await?;
            read_sessions(&mut c, &self.key, Which::Live).await?
        };
        let (last_seq, lock_seq): (i64, i64) =
            sqlx::query_as("SELECT last_seq, lock_seq FROM projects WHERE key = $1")
                .bind(&*self.key)
                .fetch_one(&self.pool)
                .await?;
        self.lock_seq = lock_seq;
        let (locks, next_token) = self.load_locks().await?;
        let checkpointed = sqlx::query(
            "SELECT session_id, max(ts) AS ts FROM checkpoints WHERE project = $1
             GROUP BY session_id",
        )
        .bind(&*self.key)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::checkpointed_from_row)
        .collect::<Result<_, _>>()?;
        Ok(Loaded {
            sessions,
            last_seq: last_seq.max(0) as u64,
            locks,
            next_token,
            checkpointed,
        })
    }

    /// Held locks as committed, and the start of a fresh token block (above every token ever
    /// drawn, fleet-wide).
    pub async fn load_locks(&mut self) -> Result<(Vec<(HeldLock, i64)>, u64), StoreError> {
        let mut c = self.pool.acquire().await?;
        let locks = read_locks(&mut c, &self.key).await?;
        drop(c);
        self.waits_known = false;
        let next = self.draw_tokens().await?;
        Ok((locks, next))
    }

    async fn draw_tokens(&mut self) -> Result<u64, StoreError> {
        let start: i64 = sqlx::query_scalar("SELECT nextval('maos_fence')")
            .fetch_one(&self.pool)
            .await?;
        let start = start.max(1) as u64;
        self.tokens_end = start.saturating_add(TOKEN_BLOCK);
        Ok(start)
    }

    /// Start a batch: its transaction, the project's key locked until it ends, and what
    /// changed since the daemon last knew the project at event `known`.
    pub async fn begin(&mut self, known: u64) -> Result<Fresh, StoreError> {
        self.begin_turn(known, None).await
    }

    /// Start a batch of lock requests alone (per-path turns, DESIGN.md §10): the project's
    /// key shared, then `keys` ([`path_keys`]: merged, sorted, each exclusive or shared), so
    /// that batches on other paths of the project run beside this one. What it reads is as
    /// [`PgStore::begin`]'s; its events are numbered when it commits.
    pub async fn begin_paths(
        &mut self,
        known: u64,
        keys: &[(i64, bool)],
    ) -> Result<Fresh, StoreError> {
        self.begin_turn(known, Some(keys)).await
    }

    async fn begin_turn(
        &mut self,
        known: u64,
        keys: Option<&[(i64, bool)]>,
    ) -> Result<Fresh, StoreError> {
        // A batch that never ended (its future dropped) left its transaction open: its
        // connection is closed (PostgreSQL rolls back) and another one taken.
        if self.conn.as_ref().is_some_and(|c| !c.clean) {
            self.conn = None;
        }
        self.shared = false;
        // What this daemon has not seen comes with the keys' locks, in the same round trip,
        // and with the transaction's start: one simple query (BEGIN, its setting, the call).
        let known_lock_seq = if self.waits_known { self.lock_seq } else { -1 };
        let (path_keys, path_excl): (Vec<i64>, Vec<bool>) = keys
            .unwrap_or_default()
            .iter()
            .map(|(k, x)| (*k, *x))
            .unzip();
        let sql = lit::bind(
            BEGIN_PATHS,
            &[
                lit::Lit::Text(&self.key),
                lit::Lit::Int(i64::try_from(known).unwrap_or(i64::MAX)),
                lit::Lit::Int(known_lock_seq),
                lit::Lit::Text(&self.daemon),
                match keys {
                    Some(_) => lit::Lit::Ints(&path_keys),
                    None => lit::Lit::Null("bigint[]"),
                },
                match keys {
                    Some(_) => lit::Lit::Bools(&path_excl),
                    None => lit::Lit::Null("boolean[]"),
                },
            ],
        )?;
        let mut conn = match self.conn.take() {
            Some(c) => c,
            None => BatchConn::new(self.pool.acquire().await?),
        };
        let row = match start(&mut conn, &sql).await {
            // The connection died while it waited (kept since the last batch, or idle in the
            // pool: PostgreSQL restarted, the link dropped). Only this batch's start can have
            // reached PostgreSQL, and a transaction whose connection is gone is rolled back:
            // nothing of it is committed, so it starts again, once, on a new connection. The
            // pool's other idle connections waited beside it and share its fate: closed.
            Err(e) if connection_lost(&e) => {
                tracing::debug!(error = %e, "a fleet batch's connection was lost; starting again on a new one");
                drop(conn);
                while let Some(mut idle) = self.pool.try_acquire() {
                    idle.close_on_drop();
                }
                conn = BatchConn::new(self.pool.acquire().await?);
                start(&mut conn, &sql).await?
            }
            other => other?,
        };
        self.shared = keys.is_some();
        let last_seq = row.int_opt("last_seq")?.unwrap_or(0).max(0) as u64;
        let lock_seq = row.int_opt("lock_seq")?.unwrap_or(0);
        let token_start = row.int("token")?.max(1) as u64;
        self.tokens_end = token_start.saturating_add(TOKEN_BLOCK);
        let mut fresh = Fresh {
            now: rows::from_us(row.int("now_us")?),
            token_start,
            last_seq,
            sessions: Vec::new(),
            gone: Vec::new(),
            events: Vec::new(),
            locks: None,
            waits: None,
        };
        let mut live = Vec::new();
        for c in tuples(row.text_opt("changed")?.as_deref(), &CHANGED)? {
            let id = c.text("id")?;
            if c.flag("archived")? {
                fresh.gone.push(rows::in_row("sessions", "id", &c, || {
                    maos_core::SessionId::parse(&id).map_err(|e| StoreError::Corrupt(e.to_string()))
                })?);
            } else {
                live.push(id);
            }
        }
        if !live.is_empty() {
            fresh.sessions = read_sessions(&mut conn.c, &self.key, Which::Ids(&live)).await?;
        }
        fresh.events = tuples(row.text_opt("events")?.as_deref(), &EVENTS)?
            .iter()
            .map(rows::event_from_row)
            .collect::<Result<_, _>>()?;
        // A session `maos gc` deleted elsewhere left no row to say so: its record of the
        // deletion takes it out of memory.
        for e in &fresh.events {
            if e.kind == "session_deleted"
                && let Some(id) = e.data.get("session").and_then(|v| v.as_str())
                && let Ok(id) = maos_core::SessionId::parse(id)
            {
                fresh.gone.push(id);
            }
        }
        if let Some(locks) = row.text_opt("locks")? {
            fresh.locks = Some(
                tuples(Some(&locks), &LOCKS)?
                    .iter()
                    .map(rows::lock_from_row)
                    .collect::<Result<_, _>>()?,
            );
            let mut waits = FleetWaits::default();
            for w in tuples(row.text_opt("waits")?.as_deref(), &WAITS)? {
                let daemon = w.text("daemon")?;
                let wait = u64::try_from(w.int("wait")?)
                    .map_err(|_| StoreError::Corrupt("column wait is negative".into()))?;
                if daemon == *self.daemon {
                    waits
                        .ended
                        .push((wait, w.text_opt("message")?.unwrap_or_default()));
                } else {
                    waits
                        .foreign
                        .push(rows::foreign_wait_from_row(&w, wait_key(&daemon, wait))?);
                }
            }
            fresh.waits = Some(waits);
            self.lock_seq = lock_seq;
            self.waits_known = true;
        }
        self.conn = Some(conn);
        Ok(fresh)
    }

    /// End a batch that wrote nothing (its transaction, and the key's lock, let go). A
    /// connection kept between batches, with nothing open on it, stays kept.
    pub async fn end(&mut self) {
        let Some(mut conn) = self.conn.take() else {
            return;
        };
        if conn.clean {
            self.conn = Some(conn);
        } else if (&mut *conn.c).execute("ROLLBACK").await.is_ok() {
            conn.clean = true;
            self.keep(conn);
        }
        // Else dropped unclean, so closed: PostgreSQL rolls back.
    }

    /// After a batch: its connection kept for the next one (no round trip to give it back
    /// and take it again), unless the pool is short of connections for the other projects
    /// and the history reads.
    fn keep(&mut self, conn: BatchConn) {
        let max = self.pool.options().get_max_connections();
        if self.pool.size() + 4 <= max || self.pool.num_idle() > 0 {
            self.conn = Some(conn);
        }
    }

    /// Give the connection kept between batches back to the fleet's pool (the project is
    /// idle; other projects and history reads share the pool). A batch under way keeps it.
    pub fn rest(&mut self) {
        if self.conn.as_ref().is_some_and(|c| c.clean) {
            self.conn = None;
        }
    }

    /// Whether a connection is kept between batches ([`PgStore::rest`] gives it back).
    pub fn keeps_connection(&self) -> bool {
        self.conn.as_ref().is_some_and(|c| c.clean)
    }

    /// End a batch whose changes the daemon undid in memory: as [`PgStore::end`], and the
    /// next batch reads every lock row again (memory no longer matches the rows it read).
    pub async fn abandon(&mut self) {
        self.end().await;
        self.lock_seq = -1;
    }

    /// The advisory keys of a batch of lock requests on `paths` (normalized project-relative
    /// lock paths, `""` the root), for [`PgStore::begin_paths`]: each path exclusive, each of
    /// its ancestor directories (the root included) shared, a key wanted both ways taken
    /// exclusive, sorted so that every batch takes its keys in the same order. Two locks can
    /// conflict only on one path, or when one's path contains the other's (a directory or
    /// workspace lock and what is under it): the batches then want that path exclusive and
    /// shared, so they follow each other.
    pub fn path_keys<'p>(&self, paths: impl IntoIterator<Item = &'p str>) -> Vec<(i64, bool)> {
        let mut keys = std::collections::BTreeMap::new();
        let mut put = |path: &str, exclusive: bool| {
            let text = format!("maos path\n{}\n{path}", self.key);
            let key = maos_core::fnv::fnv1a64(text.as_bytes()) as i64;
            *keys.entry(key).or_insert(false) |= exclusive;
        };
        for path in paths {
            put(path, true);
            if !path.is_empty() {
                put("", false);
                for (i, _) in path.match_indices('/') {
                    put(&path[..i], false);
                }
            }
        }
        keys.into_iter().collect()
    }

    /// Whether the last commit's events were numbered past events that other daemons
    /// committed beside it, which this daemon has not read: its own events are then read back
    /// with those by the next batch, in order, rather than published at once.
    pub fn renumbered(&self) -> bool {
        self.renumbered
    }

    /// Write the batch begun by [`PgStore::begin`] and commit its transaction; returns only
    /// after PostgreSQL committed it.
    pub async fn commit(&mut self, b: &Batch<'_>) -> Result<(), StoreError> {
        let Some(mut conn) = self.conn.take().filter(|c| !c.clean) else {
            return Err(StoreError::Corrupt(
                "a fleet batch was committed without being begun".into(),
            ));
        };
        if let Some(lock) = b.locks.iter().find(|l| l.lock.token >= self.tokens_end) {
            return Err(StoreError::Corrupt(format!(
                "token {} is past this batch's block (ending {}): the batch granted more \
                 locks than a block holds",
                lock.lock.token, self.tokens_end
            )));
        }
        // A session whose phases changed is written whole too, so that its `changed_seq`
        // tells the other daemons to read it again.
        let mut sessions = b.sessions.clone();
        for s in &b.phases_of {
            if !sessions.iter().any(|x| x.id == s.id) {
                sessions.push(s);
            }
        }
        let rows = rows::BatchRows::of(b, &sessions)?;
        let last_seq = b.events.last().map_or(b.base_seq, |e| e.seq) as i64;
        let (mut ck_session, mut ck_seq, mut ck_ts, mut ck_reason, mut ck_state) =
            (Vec::new(), Vec::new(), Vec::new(), Vec::new(), Vec::new());
        for c in b.checkpoints {
            ck_session.push(c.session_id.as_str());
            ck_seq.push(c.seq as i64);
            ck_ts.push(rows::to_us(&c.ts));
            ck_reason.push(c.reason.as_str());
            ck_state.push(c.state.as_str());
        }
        let locks_moved = !b.locks.is_empty()
            || !b.unlocks.is_empty()
            || !b.waits.is_empty()
            || !b.unwaits.is_empty()
            || !b.ended_waits.is_empty();
        let waits = rows::json(&b.waits)?;
        let unwaits = rows::json(&b.unwaits)?;
        let ended_waits = rows::json(&b.ended_waits)?;
        self.renumbered = false;
        let shared = std::mem::take(&mut self.shared);
        let sql = write_batch_sql(&[
            (shared, CTE_PROJECT_NUMBERED),
            (!sessions.is_empty(), CTE_SESSIONS),
            (!b.phases_of.is_empty(), CTE_PHASES),
            (!b.agents.is_empty(), CTE_AGENTS),
            (!b.events.is_empty() && !shared, CTE_EVENTS),
            (!b.events.is_empty() && shared, CTE_EVENTS_NUMBERED),
            (!b.unlocks.is_empty(), CTE_UNLOCKS),
            (!b.locks.is_empty(), CTE_LOCKS),
            (!b.unwaits.is_empty(), CTE_UNWAITS),
            (!b.waits.is_empty(), CTE_WAITS),
            (!b.ended_waits.is_empty(), CTE_ENDED_WAITS),
            (!b.checkpoints.is_empty(), CTE_CHECKPOINTS),
        ]);
        // The write is a prepared statement (its plan cached by PostgreSQL), then COMMIT. One
        // simple query with both (the values as literals) saved that round trip but was
        // parsed and planned for every batch: more of PostgreSQL's CPU, the scarce thing on
        // a loaded machine (notes of issue 34).
        let (base, lock_seq): (i64, i64) = sqlx::query_as(&sql)
            .bind(&*self.key)
            .bind(rows.sessions)
            .bind(rows.phases)
            .bind(rows.agents)
            .bind(rows.events)
            .bind(rows.unlocks)
            .bind(rows.locks)
            .bind(ck_session)
            .bind(ck_seq)
            .bind(ck_ts)
            .bind(ck_reason)
            .bind(ck_state)
            .bind(last_seq)
            .bind(b.base_seq as i64)
            .bind(locks_moved)
            .bind(&*self.daemon)
            .bind(unwaits)
            .bind(waits)
            .bind(ended_waits)
            .fetch_one(&mut *conn.c)
            .await
            .map_err(|e| stale(&self.key, e))?;
        if !b.archived.is_empty() {
            let archived: Vec<&str> = b.archived.iter().map(|s| s.as_str()).collect();
            // `changed_seq` too: the other daemons take it out of their memory.
            sqlx::query(
                "UPDATE sessions SET archived = true, changed_seq = $3
                 WHERE project = $1 AND id = ANY($2)",
            )
            .bind(&*self.key)
            .bind(&archived)
            .bind(last_seq)
            .execute(&mut *conn.c)
            .await?;
        }
        if !b.purged.is_empty() {
            let purged: Vec<&str> = b.purged.iter().map(|s| s.as_str()).collect();
            for sql in PURGE {
                sqlx::query(sql)
                    .bind(&*self.key)
                    .bind(&purged)
                    .execute(&mut *conn.c)
                    .await?;
            }
        }
        (&mut *conn.c).execute("COMMIT").await?;
        conn.clean = true;
        self.keep(conn);
        if shared {
            // Batches beside this one may have moved the counters first: this daemon knows
            // the lock rows at the new `lock_seq` only if it knew them just before this
            // batch's move, and its events' numbers only if none came before them.
            let before = lock_seq - i64::from(locks_moved);
            self.lock_seq = if before == self.lock_seq {
                lock_seq
            } else {
                -1
            };
            self.renumbered = base != b.base_seq as i64;
        } else {
            self.lock_seq = lock_seq;
        }
        Ok(())
    }

    /// Close the store (a batch still open is rolled back). The pool is the fleet's, shared
    /// by every project: it closes with the daemon.
    pub async fn close(mut self) {
        self.end().await;
    }
}

/// The columns of the rows a batch's start reads, in the order `maos_begin_turn` (migration
/// 0005) sends them: each row a JSON array, cheaper for PostgreSQL to build than an object.
const CHANGED: [&str; 2] = ["id", "archived"];
const EVENTS: [&str; 6] = ["seq", "ts", "session_id", "agent_id", "type", "data"];
const LOCKS: [&str; 7] = [
    "token",
    "path",
    "holder_id",
    "mode",
    "acquired_at",
    "expires_at",
    "ttl_us",
];
const WAITS: [&str; 10] = [
    "daemon",
    "wait",
    "agent_id",
    "path",
    "mode",
    "born",
    "since",
    "deadline",
    "lease_until",
    "message",
];

/// A row sent as a JSON array, read by its columns' names.
struct Tuple {
    names: &'static [&'static str],
    values: Vec<serde_json::Value>,
}

/// The rows of one JSON array of arrays, each with exactly the columns `names` (`None`: none).
fn tuples(text: Option<&str>, names: &'static [&'static str]) -> Result<Vec<Tuple>, StoreError> {
    let Some(text) = text else {
        return Ok(Vec::new());
    };
    let rows: Vec<Vec<serde_json::Value>> = serde_json::from_str(text)
        .map_err(|e| StoreError::Corrupt(format!("rows sent as JSON: {e}")))?;
    rows.into_iter()
        .map(|values| {
            if values.len() == names.len() {
                Ok(Tuple { names, values })
            } else {
                Err(StoreError::Corrupt(format!(
                    "a row of {} columns where {} ({}) were expected",
                    values.len(),
                    names.len(),
                    names.join(", ")
                )))
            }
        })
        .collect()
}

impl Tuple {
    fn get(&self, col: &str) -> Option<&serde_json::Value> {
        let i = self.names.iter().position(|n| *n == col)?;
        self.values.get(i)
    }
}

impl Cols for Tuple {
    fn text(&self, col: &str) -> Result<String, StoreError> {
        self.text_opt(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {col} is NULL")))
    }
    fn text_opt(&self, col: &str) -> Result<Option<String>, StoreError> {
        match self.get(col) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(serde_json::Value::String(s)) => Ok(Some(s.clone())),
            Some(other) => Err(StoreError::Corrupt(format!(
                "column {col} is {other}, not text"
            ))),
        }
    }
    fn int_opt(&self, col: &str) -> Result<Option<i64>, StoreError> {
        match self.get(col) {
            None | Some(serde_json::Value::Null) => Ok(None),
            Some(v) => v
                .as_i64()
                .map(Some)
                .ok_or_else(|| StoreError::Corrupt(format!("column {col} is {v}, not an integer"))),
        }
    }
    fn flag(&self, col: &str) -> Result<bool, StoreError> {
        self.get(col)
            .and_then(serde_json::Value::as_bool)
            .ok_or_else(|| StoreError::Corrupt(format!("column {col} is not a boolean")))
    }
}

/// Send a batch's start (`BEGIN` and its turn, [`BEGIN_PATHS`]) on `conn`; its one row.
async fn start(conn: &mut BatchConn, sql: &str) -> Result<PgRow, StoreError> {
    conn.clean = false;
    (&mut *conn.c)
        .fetch_all(sql)
        .await?
        .pop()
        .ok_or_else(|| StoreError::Corrupt("maos_begin_turn returned no row".into()))
}

/// Whether `e` says that the connection is gone (its socket closed or broken, or PostgreSQL
/// ending the session: SQLSTATE class 08, connection exception, or 57P0x, a shutdown, a
/// restart, a dropped database, an idle session's timeout), rather than that a statement
/// failed on a live one.
fn connection_lost(e: &StoreError) -> bool {
    match e {
        StoreError::Sql(sqlx::Error::Io(_) | sqlx::Error::Tls(_)) => true,
        StoreError::Sql(sqlx::Error::Database(db)) => db
            .code()
            .is_some_and(|c| c.starts_with("08") || c.starts_with("57P")),
        _ => false,
    }
}

/// The project's held locks with their lease lengths.
async fn read_locks(
    c: &mut sqlx::PgConnection,
    key: &str,
) -> Result<Vec<(HeldLock, i64)>, StoreError> {
    sqlx::query(
        "SELECT token, path, holder_id, mode, acquired_at, expires_at, ttl_us FROM locks
         WHERE project = $1 ORDER BY token",
    )
    .bind(key)
    .fetch_all(&mut *c)
    .await?
    .iter()
    .map(rows::lock_from_row)
    .collect()
}

/// The whole batch as one statement: each `WITH` clause changes one table, the final `UPDATE`
/// moves the project's last event number. One round trip, one transaction. Only the clauses
/// with rows to write are in it: each clause costs its table's opening (with its indexes) even
/// when it has nothing to do, which made an empty clause list cost more than a lock's whole
/// batch. Every statement binds all the parameters; a clause left out just ignores its own.
///
/// A batch that took per-path turns ([`PgStore::begin_paths`]) has `CTE_PROJECT_NUMBERED`
/// first instead: its events are numbered from the project's `last_seq` as it stands when the
/// batch's `UPDATE projects` gets the row (batches beside it may have moved it since its
/// start), still under that row, which the transaction holds to its commit, so a project's
/// events still commit in `seq` order without gaps.
fn write_batch_sql(with: &[(bool, &str)]) -> String {
    let ctes: Vec<&str> = with.iter().filter(|(on, _)| *on).map(|(_, c)| *c).collect();
    if ctes.first() == Some(&CTE_PROJECT_NUMBERED) {
        return format!("WITH\n{}\nSELECT base, lock_seq FROM u", ctes.join(",\n"));
    }
    if ctes.is_empty() {
        return UPDATE_PROJECT.to_string();
    }
    format!("WITH\n{}\n{UPDATE_PROJECT}", ctes.join(",\n"))
}

const CTE_SESSIONS: &str = "\
s AS (
  INSERT INTO sessions (project, id, objective, state, strategy, active, created_at, updated_at,
      started_at, ended_at, workflow_completed_at, resume_count, pause, paused_phases, errors,
      data, changed_seq)
  SELECT $1, r.id, r.objective, r.state, r.strategy, r.active, r.created_at, r.updated_at,
      r.started_at, r.ended_at, r.workflow_completed_at, r.resume_count, r.pause::jsonb,
      r.paused_phases::jsonb, r.errors::jsonb, r.data::jsonb, $13
  FROM jsonb_to_recordset($2::jsonb) AS r(id text, objective text, state text, strategy text,
      active boolean, created_at bigint, updated_at bigint, started_at bigint, ended_at bigint,
      workflow_completed_at bigint, resume_count integer, pause text, paused_phases text,
      errors text, data text)
  ON CONFLICT (project, id) DO UPDATE SET objective = excluded.objective,
      state = excluded.state, strategy = excluded.strategy, active = excluded.active,
      updated_at = excluded.updated_at, started_at = excluded.started_at,
      ended_at = excluded.ended_at, workflow_completed_at = excluded.workflow_completed_at,
      resume_count = excluded.resume_count, pause = excluded.pause,
      paused_phases = excluded.paused_phases, errors = excluded.errors, data = excluded.data,
      changed_seq = excluded.changed_seq)";
const CTE_PHASES: &str = "\
p AS (
  INSERT INTO phases (project, session_id, idx, name, state, attempts, started_at, ended_at,
      result, artifacts, handoff)
  SELECT $1, r.session_id, r.idx, r.name, r.state, r.attempts, r.started_at, r.ended_at,
      r.result, r.artifacts::jsonb, r.handoff::jsonb
  FROM jsonb_to_recordset($3::jsonb) AS r(session_id text, idx integer, name text, state text,
      attempts integer, started_at bigint, ended_at bigint, result text, artifacts text,
      handoff text)
  ON CONFLICT (project, session_id, idx) DO UPDATE SET name = excluded.name,
      state = excluded.state, attempts = excluded.attempts, started_at = excluded.started_at,
      ended_at = excluded.ended_at, result = excluded.result, artifacts = excluded.artifacts,
      handoff = excluded.handoff)";
const CTE_AGENTS: &str = "\
a AS (
  INSERT INTO session_agents (project, id, session_id, role, instance, task, state, paused,
      parent_id, depends_on, created_at, updated_at, started_at, ended_at, exit_code,
      external_session_id, external_agent_id, pid, data, changed_seq)
  SELECT $1, r.id, r.session_id, r.role, r.instance, r.task, r.state, r.paused, r.parent_id,
      r.depends_on::jsonb, r.created_at, r.updated_at, r.started_at, r.ended_at, r.exit_code,
      r.external_session_id, r.external_agent_id, r.pid, r.data::jsonb, $13
  FROM jsonb_to_recordset($4::jsonb) AS r(id text, session_id text, role text,
      instance integer, task text, state text, paused boolean, parent_id text,
      depends_on text, created_at bigint, updated_at bigint, started_at bigint,
      ended_at bigint, exit_code integer, external_session_id text, external_agent_id text,
      pid integer, data text)
  ON CONFLICT (project, id) DO UPDATE SET task = excluded.task, state = excluded.state,
      paused = excluded.paused, depends_on = excluded.depends_on,
      updated_at = excluded.updated_at, started_at = excluded.started_at,
      ended_at = excluded.ended_at, exit_code = excluded.exit_code,
      external_session_id = excluded.external_session_id,
      external_agent_id = excluded.external_agent_id, pid = excluded.pid, data = excluded.data,
      changed_seq = excluded.changed_seq)";
const CTE_EVENTS: &str = "\
e AS (
  INSERT INTO session_events (project, seq, ts, session_id, agent_id, type, data)
  SELECT $1, r.seq, r.ts, r.session_id, r.agent_id, r.type, r.data::jsonb
  FROM jsonb_to_recordset($5::jsonb) AS r(seq bigint, ts bigint, session_id text,
      agent_id text, type text, data text))";
/// The project's counters moved by a batch that took per-path turns: `$13 - $14` events (the
/// daemon numbered them from `$14`, the last one it knew), numbered from `base` instead.
const CTE_PROJECT_NUMBERED: &str = "\
u AS (
  UPDATE projects SET last_seq = last_seq + ($13 - $14),
      lock_seq = lock_seq + CASE WHEN $15 THEN 1 ELSE 0 END
  WHERE key = $1
  RETURNING last_seq - ($13 - $14) AS base, lock_seq)";
const CTE_EVENTS_NUMBERED: &str = "\
e AS (
  INSERT INTO session_events (project, seq, ts, session_id, agent_id, type, data)
  SELECT $1, u.base + (r.seq - $14), r.ts, r.session_id, r.agent_id, r.type, r.data::jsonb
  FROM u, jsonb_to_recordset($5::jsonb) AS r(seq bigint, ts bigint, session_id text,
      agent_id text, type text, data text))";
/// A batch's transaction plans no bitmap scans. Locks and lock waits are inserted and deleted
/// at the rate of grants, so between two autovacuum runs (a minute apart at the least) their
/// indexes hold thousands of entries of rows already gone. A bitmap scan fetches each of them
/// from the heap and never marks them gone; a plain index scan skips them once any scan found
/// them dead. Measured: the batch's read of its project's locks went through 11,411 index
/// entries for 10 live rows (1.4 ms of the project's turn), and deleting 10 locks by token went
/// through them all too; 3 daemons × 20 agents went from 1,123–1,185 to 1,423–1,567 grants/s
/// with the read alone.
///
/// The batch's start is one simple query: its transaction, that setting, and its turn
/// (`maos_begin_turn`; `$5`/`$6` NULL for the project's own turn), the values bound as
/// literals ([`lit::bind`]).
const BEGIN_PATHS: &str = "BEGIN; SET LOCAL enable_bitmapscan = off;
SELECT now_us, last_seq, lock_seq, token, changed::text AS changed, events::text AS events,
    locks::text AS locks, waits::text AS waits
FROM maos_begin_turn($1, $2, $3, $4, $5, $6)";

// Deletions name their rows' keys as an array (`= ANY (ARRAY(…))`), so that they are planned
// as index scans on the key (a semi-join went through every lock of the project).
const CTE_UNLOCKS: &str = "\
d AS (
  DELETE FROM locks WHERE project = $1
      AND token = ANY (ARRAY(SELECT t::bigint FROM jsonb_array_elements_text($6::jsonb) AS t)))";
const CTE_LOCKS: &str = "\
l AS (
  INSERT INTO locks (token, project, path, holder_id, session_id, mode, acquired_at,
      expires_at, ttl_us)
  SELECT r.token, $1, r.path, r.holder_id, r.session_id, r.mode, r.acquired_at, r.expires_at,
      r.ttl_us
  FROM jsonb_to_recordset($7::jsonb) AS r(token bigint, path text, holder_id text,
      session_id text, mode text, acquired_at bigint, expires_at bigint, ttl_us bigint)
  ON CONFLICT (token) DO UPDATE SET expires_at = excluded.expires_at, ttl_us = excluded.ttl_us)";
const CTE_UNWAITS: &str = "\
wd AS (
  DELETE FROM lock_waits WHERE project = $1 AND daemon = $16
      AND wait = ANY (ARRAY(SELECT w::bigint FROM jsonb_array_elements_text($17::jsonb) AS w)))";
const CTE_WAITS: &str = "\
wi AS (
  INSERT INTO lock_waits (project, daemon, wait, agent_id, session_id, path, mode, born, since,
      deadline, lease_until)
  SELECT $1, $16, r.wait, r.agent_id, r.session_id, r.path, r.mode, r.born, r.since,
      r.deadline, r.lease_until
  FROM jsonb_to_recordset($18::jsonb) AS r(wait bigint, agent_id text, session_id text,
      path text, mode text, born bigint, since bigint, deadline bigint, lease_until bigint)
  ON CONFLICT (project, daemon, wait) DO UPDATE SET lease_until = excluded.lease_until)";
const CTE_ENDED_WAITS: &str = "\
we AS (
  UPDATE lock_waits w SET outcome = 'deadlock', message = r.message
  FROM jsonb_to_recordset($19::jsonb) AS r(daemon text, wait bigint, message text)
  WHERE w.project = $1 AND w.daemon = r.daemon AND w.wait = r.wait AND w.outcome IS NULL)";
const CTE_CHECKPOINTS: &str = "\
c AS (
  INSERT INTO checkpoints (project, session_id, seq, ts, reason, state)
  SELECT $1, c.* FROM unnest($8::text[], $9::bigint[], $10::bigint[], $11::text[],
      $12::text[]) AS c)";
const UPDATE_PROJECT: &str = "\
UPDATE projects SET last_seq = CASE WHEN last_seq = $14 THEN greatest(last_seq, $13)
    ELSE maos_stale($1, last_seq, $14) END,
    lock_seq = lock_seq + CASE WHEN $15 THEN 1 ELSE 0 END
WHERE key = $1
RETURNING $14::bigint AS base, lock_seq";

/// Everything a deleted session recorded goes with it (`maos gc`), after the batch's inserts.
const PURGE: [&str; 7] = [
    "DELETE FROM session_events WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM checkpoints WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM phases WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM session_agents WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM locks WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM lock_waits WHERE project = $1 AND session_id = ANY($2)",
    "DELETE FROM sessions WHERE project = $1 AND id = ANY($2)",
];

const SESSION_COLUMNS: &str = "id, objective, state, strategy, active, created_at, updated_at, \
    started_at, ended_at, workflow_completed_at, resume_count, pause::text AS pause, \
    paused_phases::text AS paused_phases, errors::text AS errors, data::text AS data";
const PHASE_COLUMNS: &str = "session_id, idx, name, state, attempts, started_at, ended_at, \
    result, artifacts::text AS artifacts, handoff::text AS handoff";
const AGENT_COLUMNS: &str = "id, session_id, role, instance, task, state, paused, parent_id, \
    depends_on::text AS depends_on, created_at, updated_at, started_at, ended_at, exit_code, \
    external_session_id, external_agent_id, data::text AS data";

/// Which sessions to read whole.
#[derive(Clone, Copy)]
enum Which<'a> {
    /// Every session not archived: what a daemon keeps in memory.
    Live,
    /// These sessions by id, archived or not.
    Ids(&'a [String]),
}

/// Sessions of a project with their phases and agents.
async fn read_sessions(
    c: &mut sqlx::PgConnection,
    key: &str,
    which: Which<'_>,
) -> Result<Vec<maos_core::record::SessionRecord>, StoreError> {
    // `$2` (the ids) is in every statement: PostgreSQL refuses a parameter a statement
    // does not use.
    let (cond, narrow, ids): (&str, &str, &[String]) = match which {
        Which::Live => (
            "NOT archived AND $2::text[] IS NOT NULL",
            "AND $2::text[] IS NOT NULL",
            &[],
        ),
        Which::Ids(ids) => ("id = ANY($2)", "AND session_id = ANY($2)", ids),
    };
    let sessions = sqlx::query(&format!(
        "SELECT {SESSION_COLUMNS} FROM sessions WHERE project = $1 AND {cond}
         ORDER BY created_at, id"
    ))
    .bind(key)
    .bind(ids)
    .fetch_all(&mut *c)
    .await?;
    let phases = sqlx::query(&format!(
        "SELECT {PHASE_COLUMNS} FROM phases WHERE project = $1 {narrow} ORDER BY session_id, idx"
    ))
    .bind(key)
    .bind(ids)
    .fetch_all(&mut *c)
    .await?;
    let agents = sqlx::query(&format!(
        "SELECT {AGENT_COLUMNS} FROM session_agents WHERE project = $1 {narrow}
         ORDER BY created_at, ord"
    ))
    .bind(key)
    .bind(ids)
    .fetch_all(&mut *c)
    .await?;
    rows::assemble(&sessions, &phases, &agents)
}

const POSTGRES: rows::Dialect = rows::Dialect {
    field: |f| format!("data->>'{f}'"),
    position: "strpos",
    data_text: "data::text",
};

/// A project's history reads in a fleet's database. Cheap to clone.
#[derive(Clone)]
pub struct PgReader {
    pool: PgPool,
    key: Arc<str>,
    shown: Arc<str>,
}

impl PgReader {
    /// `read`, with a lost connection told as [`StoreError::Unreachable`].
    pub async fn reach<T>(
        &self,
        read: impl Future<Output = Result<T, StoreError>>,
    ) -> Result<T, StoreError> {
        read.await.map_err(|e| unreachable(&self.shown, e))
    }

    /// PostgreSQL answers; the size of the fleet's database.
    pub async fn health(&self) -> Result<Health, StoreError> {
        let bytes: i64 = sqlx::query_scalar("SELECT pg_database_size(current_database())")
            .fetch_one(&self.pool)
            .await?;
        Ok(Health {
            path: format!("{} (project {})", self.shown, self.key).into(),
            bytes: bytes.max(0) as u64,
            wal_bytes: 0,
            quick_check: "ok".into(),
        })
    }

    pub async fn gc_candidates(&self, before_us: i64) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM sessions WHERE project = $1
             AND state IN ('completed', 'failed', 'cancelled')
             AND coalesce(ended_at, updated_at) < $2 ORDER BY coalesce(ended_at, updated_at), id",
        )
        .bind(&*self.key)
        .bind(before_us)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn session_ids(&self) -> Result<Vec<String>, StoreError> {
        Ok(
            sqlx::query_scalar("SELECT id FROM sessions WHERE project = $1")
                .bind(&*self.key)
                .fetch_all(&self.pool)
                .await?,
        )
    }

    pub async fn existing(
        &self,
        session: &str,
        agents: &[String],
    ) -> Result<Vec<String>, StoreError> {
        Ok(sqlx::query_scalar(
            "SELECT id FROM sessions WHERE project = $1 AND id = $2
             UNION ALL SELECT id FROM session_agents WHERE project = $1 AND id = ANY($3)",
        )
        .bind(&*self.key)
        .bind(session)
        .bind(agents)
        .fetch_all(&self.pool)
        .await?)
    }

    pub async fn export(
        &self,
        session: &str,
    ) -> Result<Option<maos_core::export::SessionExport>, StoreError> {
        let one = [session.to_string()];
        let mut c = self.pool.acquire().await?;
        let Some(rec) = read_sessions(&mut c, &self.key, Which::Ids(&one))
            .await?
            .pop()
        else {
            return Ok(None);
        };
        drop(c);
        let events = self
            .events(&EventQuery {
                session_id: Some(session.to_string()),
                ..Default::default()
            })
            .await?;
        let checkpoints = sqlx::query(
            "SELECT session_id, seq, ts, reason, state FROM checkpoints
             WHERE project = $1 AND session_id = $2 ORDER BY id",
        )
        .bind(&*self.key)
        .bind(session)
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::checkpoint_from_row)
        .collect::<Result<Vec<_>, _>>()?;
        rows::export_of(rec, events, checkpoints).map(Some)
    }

    pub async fn history(
        &self,
        limit: Option<u32>,
    ) -> Result<Vec<maos_core::record::HistoryEntry>, StoreError> {
        sqlx::query(
            "SELECT s.id, s.objective, s.state, s.strategy, s.created_at, s.started_at,
                s.ended_at, s.archived,
                (SELECT count(*) FROM session_agents a
                 WHERE a.project = s.project AND a.session_id = s.id) AS agents
             FROM sessions s WHERE s.project = $1
                AND s.state IN ('completed', 'failed', 'cancelled')
             ORDER BY coalesce(s.ended_at, s.updated_at) DESC, s.created_at DESC, s.id
             LIMIT $2",
        )
        .bind(&*self.key)
        .bind(limit.map(i64::from))
        .fetch_all(&self.pool)
        .await?
        .iter()
        .map(rows::history_from_row)
        .collect()
    }

    pub async fn events(&self, q: &EventQuery) -> Result<Vec<EventRecord>, StoreError> {
        let mut b: QueryBuilder<sqlx::Postgres> = QueryBuilder::new(
            "SELECT seq, ts, session_id, agent_id, type, data::text AS data FROM session_events \
             WHERE project = ",
        );
        b.push_bind(self.key.to_string());
        rows::push_event_filters(&mut b, q, &POSTGRES);
        let mut out = b
            .build()
            .fetch_all(&self.pool)
            .await?
            .iter()
            .map(rows::event_from_row)
            .collect::<Result<Vec<_>, _>>()?;
        if q.limit.is_some() && !q.oldest_first {
            out.reverse();
        }
        Ok(out)
    }
}

/// A commit refused because the project moved on in PostgreSQL without this daemon: told as
/// [`StoreError::Busy`] with what to do.
fn stale(key: &str, e: sqlx::Error) -> StoreError {
    match &e {
        sqlx::Error::Database(db) if db.code().as_deref() == Some("MA001") => {
            StoreError::Busy(format!(
                "project {key} was changed in PostgreSQL by another daemon since this one \
                 loaded it ({}); nothing was changed: restart this daemon (`maos daemon stop`) \
                 to serve the project as it is now",
                db.message()
            ))
        }
        _ => e.into(),
    }
}

/// An error that means PostgreSQL could not be reached (no connection within the timeout, a
/// refused or broken connection), told as such; others as they are.
pub(crate) fn unreachable(url: &str, e: StoreError) -> StoreError {
    let cause = match &e {
        StoreError::Sql(s) | StoreError::Migrate(sqlx::migrate::MigrateError::Execute(s)) => s,
        _ => return e,
    };
    match cause {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::WorkerCrashed => StoreError::Unreachable(format!(
            "the fleet's PostgreSQL at {url} does not answer ({}); nothing was changed, retry \
             once it is back",
            collapse_whitespace(&cause.to_string())
        )),
        _ => e,
    }
}

/// `url` with its password (if any) replaced by `***`.
pub fn redact(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_string();
    };
    let (auth, host) = match rest.rfind('@') {
        Some(at) => (&rest[..at], &rest[at..]),
        None => return url.to_string(),
    };
    match auth.split_once(':') {
        Some((user, _)) => format!("{scheme}://{user}:***{host}"),
        None => url.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::redact;

    #[test]
    fn a_waits_key_names_its_daemon_and_id_even_with_a_hash_in_the_machine() {
        let key = super::wait_key("lab#2/3e69ff444d9a5092", 17);
        let ended = crate::EndedWait::of(&key, "why".into()).expect("a key");
        assert_eq!(
            (ended.daemon.as_str(), ended.wait),
            ("lab#2/3e69ff444d9a5092", 17)
        );
        assert!(crate::EndedWait::of("no-id-here", String::new()).is_none());
        assert!(crate::EndedWait::of("d#x", String::new()).is_none());
    }

    #[test]
    fn rows_sent_as_arrays_are_read_by_column_and_a_short_row_is_refused() {
        use crate::rows::Cols;
        let locks = super::tuples(
            Some(r#"[[7, "src/a.rs", "agent-1", "write", 10, 20, 30]]"#),
            &super::LOCKS,
        )
        .expect("one row");
        let lock = &locks[0];
        assert_eq!(lock.int("token").expect("token"), 7);
        assert_eq!(lock.text("path").expect("path"), "src/a.rs");
        assert_eq!(lock.int("ttl_us").expect("ttl"), 30);
        assert!(lock.text("token").is_err(), "a number is not text");
        assert!(lock.int_opt("nothing").expect("absent").is_none());
        let events = super::tuples(
            Some(r#"[[3, 5, null, null, "note_recorded", "{\"text\":\"hi\"}"]]"#),
            &super::EVENTS,
        )
        .expect("one event");
        let e = crate::rows::event_from_row(&events[0]).expect("an event");
        assert_eq!((e.seq, e.kind.as_str()), (3, "note_recorded"));
        assert_eq!(e.data["text"], "hi");
        assert!(super::tuples(Some("[[1, true, 3]]"), &super::CHANGED).is_err());
        assert!(super::tuples(Some("{}"), &super::CHANGED).is_err());
        assert!(
            super::tuples(None, &super::CHANGED)
                .expect("none")
                .is_empty()
        );
    }

    #[test]
    fn a_password_never_shows() {
        assert_eq!(
            redact("postgres://maos:s3cr:et@db.example:5432/fleet"),
            "postgres://maos:***@db.example:5432/fleet"
        );
        assert_eq!(
            redact("postgres://maos@db/fleet"),
            "postgres://maos@db/fleet"
        );
        assert_eq!(redact("postgres://db/fleet"), "postgres://db/fleet");
        assert_eq!(redact("not a url"), "not a url");
    }
}
