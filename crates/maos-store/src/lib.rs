//! Persistence for one maos project: SQLite (the default, a file per project) or a fleet's
//! PostgreSQL (`pg`, DESIGN.md §10).
//!
//! The daemon's project actor owns a [`Store`]. On SQLite: one write connection (the only
//! writer of the file) and a small read-only pool for history. Writes arrive as a [`Batch`] (everything one
//! group commit changed) and are applied in one transaction with at most one statement per
//! table: each statement takes its rows as a single JSON array and expands it with
//! `json_each`, so its SQL text never changes and stays prepared.

mod pg;
mod quarantine;
mod rows;

use std::path::{Path, PathBuf};
use std::str::FromStr;
use std::time::Duration;

use maos_core::HeldLock;
use maos_core::record::{EventRecord, SessionRecord};
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};

pub use pg::{
    Fleet, FleetStatus, FleetWaits, Fresh, Member, Notifier, PgReader, PgStore, channel, redact,
};
pub use quarantine::{BadRow, Quarantined, quarantine};
pub use rows::{from_us, to_us};

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// WAL pages after which a commit checkpoints by itself (the bound on the WAL's size).
pub const WAL_AUTOCHECKPOINT_PAGES: u32 = 4000;

/// Dirty pages a write transaction may hold in memory before SQLite spills them into the WAL
/// mid-transaction (by default as soon as its 2,000 KiB page cache is full). A recovery commit
/// after a crash touches more than that. The cache itself keeps SQLite's size: it shrinks back
/// once the transaction ends. (A 16 MiB cache instead held the daemon's memory at 29 MiB after
/// the `rss` benchmark's fill, against 12 MiB.)
const WRITE_SPILL_PAGES: u32 = 4096;

/// How hard a commit tries to reach the disk (SQLite's `synchronous` pragma, in WAL mode).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Synchronous {
    /// Survives any crash or `kill -9` of the daemon; a power loss may lose the last commits.
    #[default]
    Normal,
    /// Also survives power loss, at one fsync per commit.
    Full,
}

impl Synchronous {
    pub fn as_str(self) -> &'static str {
        match self {
            Synchronous::Normal => "normal",
            Synchronous::Full => "full",
        }
    }
}

impl FromStr for Synchronous {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s.to_ascii_lowercase().as_str() {
            "normal" => Ok(Synchronous::Normal),
            "full" => Ok(Synchronous::Full),
            other => Err(format!(
                "unknown synchronous level {other:?} (expected normal or full)"
            )),
        }
    }
}

/// Rows a history read's worker thread may run ahead of its reader.
const READ_ROW_BUFFER: usize = 1024;

/// Options for opening a project database.
#[derive(Clone, Debug, Default)]
pub struct StoreOptions {
    pub synchronous: Synchronous,
    /// Cap the database size in pages (SQLite `max_page_count`); `None` = no cap.
    pub max_page_count: Option<u64>,
    /// Fleet mode: every project lives in this PostgreSQL instead of its own SQLite file.
    pub fleet: Option<std::sync::Arc<Fleet>>,
}

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the disk holding the database is full; free some space and retry ({0})")]
    Full(String),
    #[error("database {path}: {source}")]
    Open {
        path: String,
        #[source]
        source: sqlx::Error,
    },
    #[error("database migration failed: {0}")]
    Migrate(#[from] sqlx::migrate::MigrateError),
    #[error("database error: {0}")]
    Sql(sqlx::Error),
    #[error("database holds a row maos cannot read: {0}")]
    Corrupt(String),
    /// A row that does not decode, named: its table and its key (`maos doctor` shows it,
    /// `maos repair --quarantine` moves it aside).
    #[error("table {table}, row {row:?}: {why}")]
    BadRow {
        table: &'static str,
        row: String,
        why: String,
    },
    /// A file given as a backup that is not one: `FILE: why`.
    #[error("{0}")]
    NotABackup(String),
    /// A `database_url` that does not parse (shown without its password).
    #[error("database_url {0}")]
    BadUrl(String),
    /// A database made by a newer maos.
    #[error("{0}")]
    Newer(String),
    /// What this engine does not do, and what to do instead.
    #[error("{0}")]
    Unsupported(String),
    /// The project is open on another daemon.
    #[error("{0}")]
    Busy(String),
    /// A fleet's PostgreSQL cannot be reached (no connection within the timeout, or the
    /// connection broke): nothing was changed by this request.
    #[error("{0}")]
    Unreachable(String),
}

impl From<sqlx::Error> for StoreError {
    fn from(e: sqlx::Error) -> Self {
        if let sqlx::Error::Database(db) = &e {
            // SQLITE_FULL is 13; extended codes keep the primary code in the low byte.
            let full = db
                .code()
                .and_then(|c| c.parse::<i64>().ok())
                .is_some_and(|c| c & 0xff == 13);
            if full {
                return StoreError::Full(db.message().to_string());
            }
        }
        StoreError::Sql(e)
    }
}

/// Everything a project database holds that the daemon keeps in memory.
#[derive(Debug, Default)]
pub struct Loaded {
    pub sessions: Vec<SessionRecord>,
    pub last_seq: u64,
    /// Held locks with their lease lengths (µs).
    pub locks: Vec<(HeldLock, i64)>,
    /// The next fencing token.
    pub next_token: u64,
    /// When each session's latest checkpoint was taken.
    pub checkpointed: Vec<(maos_core::SessionId, maos_core::Ts)>,
}

/// A held lock as stored: the lock, its holder's session and its lease length.
#[derive(Debug, Clone, Copy)]
pub struct LockRow<'a> {
    pub lock: &'a HeldLock,
    pub session_id: &'a maos_core::SessionId,
    pub ttl_us: i64,
}

/// A lock wait of this daemon as a fleet's PostgreSQL holds it (`lock_waits`), so that the
/// other daemons queue behind it and see the wait-for cycles it closes. Times in µs.
#[derive(Debug, Clone, serde::Serialize)]
pub struct WaitRow {
    /// The wait's id in this daemon.
    pub wait: u64,
    pub agent_id: String,
    pub session_id: String,
    pub path: String,
    pub mode: maos_core::LockMode,
    /// When its agent was registered.
    pub born: i64,
    pub since: i64,
    pub deadline: Option<i64>,
    /// Until when this daemon vouches for it (renewed while it waits).
    pub lease_until: i64,
}

/// A wait of another daemon that this batch ended as a deadlock's victim: that daemon answers
/// its agent with `message`.
#[derive(Debug, Clone, serde::Serialize)]
pub struct EndedWait {
    pub daemon: String,
    pub wait: u64,
    pub message: String,
}

/// The rows one group commit writes. Sessions, agents and phases are upserted whole.
#[derive(Debug, Default)]
pub struct Batch<'a> {
    /// Sessions whose own row changed.
    pub sessions: Vec<&'a SessionRecord>,
    /// Sessions whose phase rows changed (all their phases are written).
    pub phases_of: Vec<&'a SessionRecord>,
    pub agents: Vec<&'a maos_core::record::AgentRecord>,
    pub events: &'a [EventRecord],
    /// Locks granted, or whose lease moved (upserted by token).
    pub locks: Vec<LockRow<'a>>,
    /// Tokens of locks that are gone.
    pub unlocks: Vec<u64>,
    /// The next fencing token, when it moved.
    pub next_token: Option<u64>,
    pub checkpoints: &'a [CheckpointRow],
    /// Sessions archived: out of memory, kept in the database.
    pub archived: Vec<&'a maos_core::SessionId>,
    /// Sessions deleted with everything they recorded (`maos gc`).
    pub purged: Vec<&'a maos_core::SessionId>,
    /// The project's last event number before this batch, as the daemon knows it: a fleet's
    /// commit applies only on top of exactly that (else the daemon's memory is stale).
    pub base_seq: u64,
    /// Fleet only: this daemon's lock waits, new or renewed.
    pub waits: Vec<WaitRow>,
    /// Fleet only: ids of this daemon's lock waits that ended.
    pub unwaits: Vec<u64>,
    /// Fleet only: other daemons' waits this batch ended.
    pub ended_waits: Vec<EndedWait>,
}

/// A checkpoint: a readable snapshot of one session as of the event `seq`.
#[derive(Clone, Debug)]
pub struct CheckpointRow {
    pub session_id: maos_core::SessionId,
    pub seq: u64,
    pub ts: maos_core::Ts,
    pub reason: String,
    /// The snapshot, as JSON text.
    pub state: String,
}

impl Batch<'_> {
    pub fn is_empty(&self) -> bool {
        self.sessions.is_empty()
            && self.phases_of.is_empty()
            && self.agents.is_empty()
            && self.events.is_empty()
            && self.locks.is_empty()
            && self.unlocks.is_empty()
            && self.next_token.is_none()
            && self.checkpoints.is_empty()
            && self.archived.is_empty()
            && self.purged.is_empty()
            && self.waits.is_empty()
            && self.unwaits.is_empty()
            && self.ended_waits.is_empty()
    }
}

/// A history query over the event timeline.
#[derive(Clone, Debug, Default)]
pub struct EventQuery {
    pub session_id: Option<String>,
    pub agent_id: Option<String>,
    pub types: Vec<String>,
    pub since_us: Option<i64>,
    pub after_seq: Option<u64>,
    pub before_seq: Option<u64>,
    /// Only events before this time (µs).
    pub until_us: Option<i64>,
    /// A text that must occur in the event's `path`, `paths` or `cycle`.
    pub path: Option<String>,
    /// A text that must occur in the event's type or data (ASCII case folded).
    pub text: Option<String>,
    /// The newest `limit` matching events (still returned oldest first); with `oldest_first`,
    /// the oldest `limit`.
    pub limit: Option<u32>,
    pub oldest_first: bool,
}

/// A project's database, on either engine.
pub enum Store {
    /// Boxed: the write connection and its options are most of a kilobyte inline.
    Sqlite(Box<SqliteStore>),
    Postgres(PgStore),
}

impl Store {
    /// Open (creating if needed) the SQLite database at `path` (see [`SqliteStore::open`]).
    pub async fn open(path: PathBuf, opts: StoreOptions) -> Result<Store, StoreError> {
        SqliteStore::open(path, opts)
            .await
            .map(|s| Store::Sqlite(Box::new(s)))
    }

    /// The project `key` in a fleet's PostgreSQL, checked out at `root` here.
    pub async fn open_fleet(fleet: &Fleet, key: &str, root: &str) -> Result<Store, StoreError> {
        PgStore::open(fleet, key, root)
            .await
            .map(Store::Postgres)
            .map_err(|e| pg::unreachable(fleet.url(), e))
    }

    /// SQLite's own WAL checkpoint on or off (see [`SqliteStore::set_autocheckpoint`]).
    pub async fn set_autocheckpoint(&mut self, on: bool) -> Result<(), StoreError> {
        match self {
            Store::Sqlite(s) => s.set_autocheckpoint(on).await,
            Store::Postgres(_) => Ok(()),
        }
    }

    /// A connection for background WAL checkpoints (SQLite only).
    pub async fn checkpointer(&self) -> Result<Option<Checkpointer>, StoreError> {
        match self {
            Store::Sqlite(s) => s.checkpointer().await.map(Some),
            Store::Postgres(_) => Ok(None),
        }
    }

    pub fn reader(&self) -> Reader {
        match self {
            Store::Sqlite(s) => s.reader(),
            Store::Postgres(s) => Reader::Postgres(s.reader()),
        }
    }

    /// Every live session (with phases and agents), held locks, and the counters.
    pub async fn load(&mut self) -> Result<Loaded, StoreError> {
        match self {
            Store::Sqlite(s) => s.load().await,
            Store::Postgres(s) => {
                let url = s.url();
                s.load().await.map_err(|e| pg::unreachable(&url, e))
            }
        }
    }

    /// Held locks and the next fencing token, as committed (the reload after a failed commit).
    pub async fn load_locks(&mut self) -> Result<(Vec<(HeldLock, i64)>, u64), StoreError> {
        match self {
            Store::Sqlite(s) => s.load_locks().await,
            Store::Postgres(s) => {
                let url = s.url();
                s.load_locks().await.map_err(|e| pg::unreachable(&url, e))
            }
        }
    }

    /// Start a batch. On SQLite nothing (the actor is the only writer). In a fleet the
    /// batch's transaction: the project's key locked, PostgreSQL's clock, a block of tokens,
    /// and what other daemons changed since event `known`; end it with [`Store::commit`] or
    /// [`Store::end`].
    pub async fn begin(&mut self, known: u64) -> Result<Option<Fresh>, StoreError> {
        match self {
            Store::Sqlite(_) => Ok(None),
            Store::Postgres(s) => {
                let url = s.url();
                (s.begin(known).await)
                    .map(Some)
                    .map_err(|e| pg::unreachable(&url, e))
            }
        }
    }

    /// In a fleet, what tells the other daemons this one committed (see [`Notifier`]).
    pub fn notifier(&self, daemon: &str) -> Option<Notifier> {
        match self {
            Store::Sqlite(_) => None,
            Store::Postgres(s) => Some(s.notifier(daemon)),
        }
    }

    /// End a begun batch that commits nothing.
    pub async fn end(&mut self) {
        if let Store::Postgres(s) = self {
            s.end().await;
        }
    }

    /// Apply a batch in one transaction. Returns only after the commit.
    pub async fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        if batch.is_empty() {
            self.end().await;
            return Ok(());
        }
        match self {
            Store::Sqlite(s) => s.commit(batch).await,
            Store::Postgres(s) => {
                let url = s.url();
                s.commit(batch).await.map_err(|e| pg::unreachable(&url, e))
            }
        }
    }

    pub async fn close(self) {
        match self {
            Store::Sqlite(s) => s.close().await,
            Store::Postgres(s) => s.close().await,
        }
    }
}

/// A project's SQLite database: the single write connection and a read-only pool.
pub struct SqliteStore {
    write: SqliteConnection,
    reader: SqliteReader,
    checkpoint: SqliteConnectOptions,
}

/// Moves committed WAL frames into the database file from its own connection, so that no
/// commit pays for it. A passive checkpoint never blocks the writer.
pub struct Checkpointer {
    conn: SqliteConnection,
}

impl Checkpointer {
    /// Checkpoint what readers allow; returns (frames in the WAL, frames copied back).
    pub async fn run(&mut self) -> Result<(i64, i64), StoreError> {
        let row = sqlx::query("PRAGMA wal_checkpoint(PASSIVE)")
            .fetch_one(&mut self.conn)
            .await?;
        Ok((row.try_get(1)?, row.try_get(2)?))
    }

    /// Close the connection now (before the store's own, so that the last connection to
    /// close, which deletes the WAL, is the store's and closes before `Store::close` returns).
    pub async fn close(self) {
        let _ = sqlx::Connection::close(self.conn).await;
    }

    /// Empty the WAL file once every frame is in the database (the project is idle): a
    /// restart after a crash then has no log to read, and the disk gets the space back. It
    /// holds off a writer only for as long as the truncation takes.
    pub async fn truncate(&mut self) -> Result<(), StoreError> {
        sqlx::query("PRAGMA wal_checkpoint(TRUNCATE)")
            .fetch_one(&mut self.conn)
            .await?;
        Ok(())
    }
}

/// Cheap to clone; reads history without touching the writer.
#[derive(Clone)]
pub enum Reader {
    Sqlite(SqliteReader),
    Postgres(PgReader),
}

/// History reads of a SQLite database, on their own read-only pool.
#[derive(Clone)]
pub struct SqliteReader {
    pool: SqlitePool,
    path: PathBuf,
}

/// What `maos doctor` learns about a project's database.
#[derive(Clone, Debug)]
pub struct Health {
    pub path: PathBuf,
    /// Sizes of the database file and of its write-ahead log.
    pub bytes: u64,
    pub wal_bytes: u64,
    /// `PRAGMA quick_check`: "ok", or the problems found.
    pub quick_check: String,
}

fn sqlite_sync(s: Synchronous) -> SqliteSynchronous {
    match s {
        Synchronous::Normal => SqliteSynchronous::Normal,
        Synchronous::Full => SqliteSynchronous::Full,
    }
}

impl SqliteStore {
    /// Open (creating if needed) the database at `path`, in WAL mode, migrated to the latest
    /// schema. The file is created with mode 0600.
    pub async fn open(path: PathBuf, opts: StoreOptions) -> Result<SqliteStore, StoreError> {
        let path = path.as_path();
        let open_err = |source| StoreError::Open {
            path: path.display().to_string(),
            source,
        };
        create_private(path).map_err(|e| open_err(sqlx::Error::Io(e)))?;
        let mut base = SqliteConnectOptions::new()
            .filename(path)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(sqlite_sync(opts.synchronous))
            .busy_timeout(Duration::from_secs(5))
            .foreign_keys(false)
            .pragma("temp_store", "memory")
            .statement_cache_capacity(64);
        if let Some(pages) = opts.max_page_count {
            base = base.pragma("max_page_count", pages.to_string());
        }
        // Checkpoints happen mostly off the commit path: the daemon runs `Checkpointer` every
        // second. Under sustained writes a passive checkpoint never catches up completely, and
        // only a complete one lets the WAL wrap, so the writer keeps its own checkpoint as a
        // bound on the WAL (~16 MiB). With most frames already copied in the background it is
        // rare and cheap; at SQLite's default (1,000 pages) it fsynced inside ~1% of commits.
        //
        // Opened before the migration's connection, and kept: when the last connection to a
        // database closes, SQLite copies the whole WAL back and deletes it. Closing the
        // migration's connection first would do that on every start, and after a crash the
        // WAL can hold megabytes (tens of milliseconds before the daemon could serve).
        let write = base
            .clone()
            .create_if_missing(true)
            .pragma("wal_autocheckpoint", WAL_AUTOCHECKPOINT_PAGES.to_string())
            .pragma("cache_spill", WRITE_SPILL_PAGES.to_string())
            .connect()
            .await
            .map_err(open_err)?;
        // Migrate through a one-connection pool: `Migrator::run` on a bare connection makes
        // every future awaiting it fail rustc's higher-ranked `Send` check.
        let migrate = SqlitePoolOptions::new()
            .max_connections(1)
            .connect_with(base.clone())
            .await
            .map_err(open_err)?;
        MIGRATOR.run(&migrate).await?;
        migrate.close().await;
        let checkpoint = base.clone();
        // History reads can be long (a chart's 100,000 events): sqlx hands rows from its
        // worker thread to the reader through a channel, and at its default of 50 rows the
        // two threads take turns every 50 rows. The query alone of a 200,000-event session's
        // chart events took 0.96 s that way and 0.47 s with 1,024 (a busy machine); the whole
        // chart read hardly moved (decoding each row is most of it).
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .min_connections(0)
            .connect_lazy_with(base.read_only(true).row_buffer_size(READ_ROW_BUFFER));
        Ok(SqliteStore {
            write,
            reader: SqliteReader {
                pool,
                path: path.to_path_buf(),
            },
            checkpoint,
        })
    }

    /// Turn the write connection's own WAL checkpoint (the bound on the WAL) off or back on.
    /// After a crash the WAL can be near that bound, and the first commit would then copy it
    /// all back, inside the commit: a daemon turns it off until its recovery is committed and
    /// its background [`Checkpointer`] runs.
    pub async fn set_autocheckpoint(&mut self, on: bool) -> Result<(), StoreError> {
        let pages = if on { WAL_AUTOCHECKPOINT_PAGES } else { 0 };
        sqlx::query(&format!("PRAGMA wal_autocheckpoint = {pages}"))
            .execute(&mut self.write)
            .await?;
        Ok(())
    }

    /// A connection of its own for background checkpoints.
    pub async fn checkpointer(&self) -> Result<Checkpointer, StoreError> {
        let conn = self.checkpoint.clone().connect().await?;
        Ok(Checkpointer { conn })
    }

    /// A handle for history reads.
    pub fn reader(&self) -> Reader {
        Reader::Sqlite(self.reader.clone())
    }

    /// Load every session (with phases and agents), held locks, and the counters.
    pub async fn load(&mut self) -> Result<Loaded, StoreError> {
        rows::load(&mut self.write).await
    }

    /// Held locks and the next fencing token, as committed (to rebuild the lock table after a
    /// failed commit).
    pub async fn load_locks(&mut self) -> Result<(Vec<(HeldLock, i64)>, u64), StoreError> {
        rows::load_locks(&mut self.write).await
    }

    /// Apply a batch in one transaction. Returns only after the commit.
    pub async fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        rows::write_batch(&mut self.write, batch).await
    }

    /// `PRAGMA integrity_check` on the write connection: "ok" when the file is sound.
    pub async fn integrity_check(&mut self) -> Result<String, StoreError> {
        let row = sqlx::query("PRAGMA integrity_check")
            .fetch_one(&mut self.write)
            .await?;
        Ok(row.try_get::<String, _>(0)?)
    }

    /// Close the write connection and the pool cleanly (checkpointing the WAL).
    pub async fn close(self) {
        self.reader.pool.close().await;
        let _ = self.write.close().await;
    }
}

/// A boxed `Send` future (sqlx's query futures carry higher-ranked lifetimes that otherwise
/// make every caller's future fail the `Send` check of `tokio::spawn`).
type Boxed<'a, T> = std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

impl Reader {
    /// The database's health: on SQLite `PRAGMA quick_check` and the file sizes.
    pub fn health(&self) -> Boxed<'_, Health> {
        match self {
            Reader::Sqlite(r) => r.health(),
            Reader::Postgres(r) => Box::pin(r.reach(r.health())),
        }
    }

    /// A checked copy of a SQLite database at `to` (see [`SqliteReader::backup`]); a fleet's
    /// PostgreSQL is backed up with its own tools.
    pub fn backup<'a>(&'a self, to: &'a Path) -> Boxed<'a, Health> {
        match self {
            Reader::Sqlite(r) => r.backup(to),
            Reader::Postgres(_) => Box::pin(async {
                Err(StoreError::Unsupported(
                    "this daemon keeps its state in a fleet's PostgreSQL, not in a file maos \
                     can copy: back that database up with pg_dump"
                        .into(),
                ))
            }),
        }
    }

    /// Finished sessions (archived or not) that ended before `before_us` (µs), oldest first.
    pub fn gc_candidates(&self, before_us: i64) -> Boxed<'_, Vec<String>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::gc_candidates(&r.pool, before_us)),
            Reader::Postgres(r) => Box::pin(r.reach(r.gc_candidates(before_us))),
        }
    }

    /// Every session id in the database, archived ones included.
    pub fn session_ids(&self) -> Boxed<'_, Vec<String>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::session_ids(&r.pool)),
            Reader::Postgres(r) => Box::pin(r.reach(r.session_ids())),
        }
    }

    /// Which of a session id and agent ids the database already has (archived included).
    pub fn existing<'a>(
        &'a self,
        session: &'a str,
        agents: &'a [String],
    ) -> Boxed<'a, Vec<String>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::existing(&r.pool, session, agents)),
            Reader::Postgres(r) => Box::pin(r.reach(r.existing(session, agents))),
        }
    }

    /// One session (by full id) with its timeline and checkpoints, for `maos export`.
    pub fn export<'a>(
        &'a self,
        session: &'a str,
    ) -> Boxed<'a, Option<maos_core::export::SessionExport>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::export(&r.pool, session)),
            Reader::Postgres(r) => Box::pin(r.reach(r.export(session))),
        }
    }

    /// Finished sessions, newest first (by end, then creation), archived ones included.
    pub fn history(&self, limit: Option<u32>) -> Boxed<'_, Vec<maos_core::record::HistoryEntry>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::history(&r.pool, limit)),
            Reader::Postgres(r) => Box::pin(r.reach(r.history(limit))),
        }
    }

    /// Events matching `q`, oldest first.
    pub fn events<'a>(&'a self, q: &'a EventQuery) -> Boxed<'a, Vec<EventRecord>> {
        match self {
            Reader::Sqlite(r) => Box::pin(rows::events(&r.pool, q)),
            Reader::Postgres(r) => Box::pin(r.reach(r.events(q))),
        }
    }
}

impl SqliteReader {
    /// `PRAGMA quick_check` on a read connection, with the file sizes.
    pub fn health(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Health, StoreError>> + Send + '_>> {
        Box::pin(async move {
            let rows = sqlx::query("PRAGMA quick_check")
                .fetch_all(&self.pool)
                .await?;
            let problems = rows
                .iter()
                .map(|r| r.try_get::<String, _>(0))
                .collect::<Result<Vec<_>, _>>()?;
            let size = |p: &Path| std::fs::metadata(p).map(|m| m.len()).unwrap_or(0);
            let mut wal = self.path.clone().into_os_string();
            wal.push("-wal");
            Ok(Health {
                bytes: size(&self.path),
                wal_bytes: size(Path::new(&wal)),
                path: self.path.clone(),
                quick_check: problems.join("; "),
            })
        })
    }

    /// A consistent copy of the database at `to` (`VACUUM INTO`: one read transaction, so the
    /// writer is never blocked), mode 0600, then checked with `PRAGMA integrity_check`.
    /// `to` must not exist.
    pub fn backup<'a>(
        &'a self,
        to: &'a Path,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Health, StoreError>> + Send + 'a>> {
        Box::pin(async move {
            let text = to.to_str().ok_or_else(|| StoreError::Open {
                path: to.display().to_string(),
                source: sqlx::Error::Protocol("the path is not UTF-8".into()),
            })?;
            use std::os::unix::fs::OpenOptionsExt;
            // Created empty first with mode 0600: VACUUM INTO writes into an empty file, and
            // so never makes the copy readable by others.
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(to)
                .map_err(|e| StoreError::Open {
                    path: to.display().to_string(),
                    source: sqlx::Error::Io(e),
                })?;
            if let Err(e) = sqlx::query("VACUUM INTO $1")
                .bind(text)
                .execute(&self.pool)
                .await
            {
                let _ = std::fs::remove_file(to);
                return Err(e.into());
            }
            let quick_check = integrity_check(to).await?;
            Ok(Health {
                path: to.to_path_buf(),
                bytes: std::fs::metadata(to).map(|m| m.len()).unwrap_or(0),
                wal_bytes: 0,
                quick_check,
            })
        })
    }
}

/// Create an empty file with mode 0600 if none exists, so SQLite never creates it world-readable.
fn create_private(path: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
    {
        Ok(_) => Ok(()),
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok(()),
        Err(e) => Err(e),
    }
}

async fn open_read_only(path: &Path) -> Result<sqlx::SqliteConnection, StoreError> {
    SqliteConnectOptions::new()
        .filename(path)
        .read_only(true)
        .connect()
        .await
        .map_err(|source| StoreError::Open {
            path: path.display().to_string(),
            source,
        })
}

/// The checkpoints of a session in the database at `path`, oldest first (read-only).
pub async fn checkpoints(path: &Path, session: &str) -> Result<Vec<CheckpointRow>, StoreError> {
    let mut conn = open_read_only(path).await?;
    rows::checkpoints(&mut conn, session).await
}

/// What a database file to restore holds, once checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupCheck {
    pub sessions: u64,
    pub events: u64,
}

/// Check a file before `maos restore` puts it in place: a SQLite database that passes
/// `PRAGMA integrity_check`, with maos's tables, made by this version of maos or an older one
/// (it is migrated when it opens). Read-only; the error says what is wrong.
pub async fn check_backup(path: &Path) -> Result<BackupCheck, StoreError> {
    let bad = |why: String| StoreError::NotABackup(format!("{}: {why}", path.display()));
    if !path.is_file() {
        return Err(bad("no such file".into()));
    }
    let mut conn = open_read_only(path).await?;
    let check: String = match sqlx::query_scalar("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await
    {
        Ok(c) => c,
        Err(e) => return Err(bad(format!("not a SQLite database ({e})"))),
    };
    if check != "ok" {
        return Err(bad(format!(
            "integrity_check: {}",
            check.replace('\n', "; ")
        )));
    }
    let tables: Vec<String> =
        sqlx::query_scalar("SELECT name FROM sqlite_master WHERE type = 'table'")
            .fetch_all(&mut conn)
            .await?;
    for t in [
        "sessions",
        "session_agents",
        "phases",
        "session_events",
        "locks",
        "checkpoints",
        "_sqlx_migrations",
    ] {
        if !tables.iter().any(|n| n == t) {
            return Err(bad(format!("not a maos database (no table {t})")));
        }
    }
    let newest: Option<i64> = sqlx::query_scalar("SELECT max(version) FROM _sqlx_migrations")
        .fetch_one(&mut conn)
        .await?;
    let ours = MIGRATOR.iter().map(|m| m.version).max().unwrap_or(0);
    if newest.unwrap_or(0) > ours {
        return Err(bad(format!(
            "made by a newer maos (schema {}, this one knows {ours}); upgrade maos",
            newest.unwrap_or(0)
        )));
    }
    let count = |sql: &'static str| sqlx::query_scalar::<_, i64>(sql);
    let sessions = count("SELECT count(*) FROM sessions")
        .fetch_one(&mut conn)
        .await?;
    let events = count("SELECT count(*) FROM session_events")
        .fetch_one(&mut conn)
        .await?;
    Ok(BackupCheck {
        sessions: sessions.max(0) as u64,
        events: events.max(0) as u64,
    })
}

/// Open `path` read-only and run `PRAGMA integrity_check` (for tests and `maos doctor`).
pub async fn integrity_check(path: &Path) -> Result<String, StoreError> {
    let mut conn = open_read_only(path).await?;
    let row = sqlx::query("PRAGMA integrity_check")
        .fetch_one(&mut conn)
        .await?;
    Ok(row.try_get::<String, _>(0)?)
}
