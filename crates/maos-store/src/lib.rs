//! SQLite persistence for one maos project.
//!
//! The daemon's project actor owns a [`Store`]: one write connection (the only writer of the
//! file) and a small read-only pool for history. Writes arrive as a [`Batch`] (everything one
//! group commit changed) and are applied in one transaction with at most one statement per
//! table: each statement takes its rows as a single JSON array and expands it with
//! `json_each`, so its SQL text never changes and stays prepared.

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
    /// A file given as a backup that is not one: `FILE: why`.
    #[error("{0}")]
    NotABackup(String),
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

/// A project's database: the single write connection and a read-only pool.
pub struct Store {
    write: SqliteConnection,
    reader: Reader,
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
pub struct Reader {
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

impl Store {
    /// Open (creating if needed) the database at `path`, in WAL mode, migrated to the latest
    /// schema. The file is created with mode 0600.
    pub async fn open(path: PathBuf, opts: StoreOptions) -> Result<Store, StoreError> {
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
        // History reads are long (a chart's 100,000 events): sqlx hands rows from its worker
        // thread to the reader through a channel, and at its default of 50 rows the two
        // threads take turns every 50 rows. Reading a 200,000-event session's chart events
        // took 1.5x as long that way (measured with the read pool's query alone).
        let pool = SqlitePoolOptions::new()
            .max_connections(2)
            .min_connections(0)
            .connect_lazy_with(base.read_only(true).row_buffer_size(READ_ROW_BUFFER));
        Ok(Store {
            write,
            reader: Reader {
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
        self.reader.clone()
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

impl Reader {
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

    /// Finished sessions (archived or not) that ended before `before_us` (µs), oldest first.
    pub fn gc_candidates(
        &self,
        before_us: i64,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, StoreError>> + Send + '_>> {
        Box::pin(rows::gc_candidates(&self.pool, before_us))
    }

    /// Every session id in the database, archived ones included.
    pub fn session_ids(
        &self,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, StoreError>> + Send + '_>> {
        Box::pin(rows::session_ids(&self.pool))
    }

    /// Which of a session id and agent ids the database already has (archived included).
    pub fn existing<'a>(
        &'a self,
        session: &'a str,
        agents: &'a [String],
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<String>, StoreError>> + Send + 'a>> {
        Box::pin(rows::existing(&self.pool, session, agents))
    }

    /// One session (by full id) with its timeline and checkpoints, for `maos export`.
    pub fn export<'a>(
        &'a self,
        session: &'a str,
    ) -> std::pin::Pin<
        Box<
            dyn Future<Output = Result<Option<maos_core::export::SessionExport>, StoreError>>
                + Send
                + 'a,
        >,
    > {
        Box::pin(rows::export(&self.pool, session))
    }

    /// Finished sessions, newest first (by end, then creation), archived ones included.
    pub fn history(
        &self,
        limit: Option<u32>,
    ) -> std::pin::Pin<
        Box<
            dyn Future<Output = Result<Vec<maos_core::record::HistoryEntry>, StoreError>>
                + Send
                + '_,
        >,
    > {
        Box::pin(rows::history(&self.pool, limit))
    }

    /// Events matching `q`, oldest first.
    ///
    /// Boxed: sqlx's query futures carry higher-ranked lifetimes that otherwise make every
    /// caller's future fail the `Send` check of `tokio::spawn`.
    pub fn events<'a>(
        &'a self,
        q: &'a EventQuery,
    ) -> std::pin::Pin<Box<dyn Future<Output = Result<Vec<EventRecord>, StoreError>> + Send + 'a>>
    {
        Box::pin(rows::events(&self.pool, q))
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
