//! SQLite, the default: one file per project, one write connection (maos's own, see
//! `sqlite_write.rs`), one sqlx connection for loads and a small read-only pool.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_core::HeldLock;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteConnection, SqliteJournalMode, SqlitePool, SqlitePoolOptions,
    SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection, Row};

use crate::options::{StoreOptions, Synchronous};
use crate::rows;
use crate::sqlite_write::Writer;
use crate::types::*;

static MIGRATOR: sqlx::migrate::Migrator = sqlx::migrate!("../../migrations");

/// Dirty pages a write transaction may hold in memory before SQLite spills them into the WAL
/// mid-transaction (by default as soon as its 2,000 KiB page cache is full). A recovery commit
/// after a crash touches more than that. The cache itself keeps SQLite's size: it shrinks back
/// once the transaction ends. (A 16 MiB cache instead held the daemon's memory at 29 MiB after
/// the `rss` benchmark's fill, against 12 MiB.)
const WRITE_SPILL_PAGES: u32 = 4096;

/// Rows a history read's worker thread may run ahead of its reader.
const READ_ROW_BUFFER: usize = 1024;

/// Fencing tokens the stored bound runs ahead of the grants: `meta`'s `next_lock_token` is
/// written once per this many grants, not with each (it was one page of every grant's
/// commit). After a crash the next token is the bound, so up to this many tokens go unused
/// per restart; tokens still only grow (a fleet's come in blocks of 65,536 the same way).
pub(crate) const TOKEN_BLOCK: u64 = 1000;

/// A project's SQLite database: the single write connection, the connection that loads, and
/// a read-only pool.
pub struct SqliteStore {
    /// Every batch's commit.
    writer: Writer,
    /// Loads and checks (opened first and kept: see [`SqliteStore::open`]).
    loads: SqliteConnection,
    reader: SqliteReader,
    checkpoint: SqliteConnectOptions,
    /// The fencing-token bound as committed in `meta` (no token at or above it was ever
    /// given), once read by a load; `None` before, when the next batch that gives tokens
    /// writes one.
    token_bound: Option<u64>,
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

    /// What SQLite's `data_version` says on this connection: it changes when another
    /// connection (the daemon's writer) commits, and only then.
    pub async fn data_version(&mut self) -> Result<i64, StoreError> {
        let v: i64 = sqlx::query_scalar("PRAGMA data_version")
            .fetch_one(&mut self.conn)
            .await?;
        Ok(v)
    }

    /// Once every frame is in the database: restart the WAL from its start with one small
    /// write of this connection's own (a `meta` row that means nothing else), so that the WAL
    /// header SQLite writes and fsyncs when a log restarts is written here, off the commit
    /// path, and the next commit appends to a log whose header is already synced. With `trim`
    /// the file is also cut to that write (`journal_size_limit` 0): for an idle project, whose
    /// WAL is then one page, the disk getting the rest back. Without it the file keeps its
    /// length, so the commits after it overwrite blocks the file has rather than extending it
    /// (a WAL cut at every restart made each commit of a busy project ~50 µs slower). When a reader
    /// still uses the old log SQLite cannot restart it; the write then only appends, and the
    /// restart is left to a later commit, as it was before.
    pub async fn restart(&mut self, trim: bool) -> Result<(), StoreError> {
        let limit = if trim { 0 } else { -1 };
        sqlx::query(&format!("PRAGMA journal_size_limit = {limit}"))
            .execute(&mut self.conn)
            .await?;
        sqlx::query("BEGIN IMMEDIATE")
            .execute(&mut self.conn)
            .await?;
        let wrote = sqlx::query(
            "INSERT INTO meta (key, value) VALUES ('wal_restart', 1) \
             ON CONFLICT (key) DO UPDATE SET value = 1 - value",
        )
        .execute(&mut self.conn)
        .await;
        let end = if wrote.is_ok() { "COMMIT" } else { "ROLLBACK" };
        let ended = sqlx::query(end).execute(&mut self.conn).await;
        wrote?;
        ended?;
        Ok(())
    }
}

/// History reads of a SQLite database, on their own read-only pool.
#[derive(Clone)]
pub struct SqliteReader {
    pub(crate) pool: SqlitePool,
    pub(crate) path: PathBuf,
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
        // The loads' connection opens before the migration's, and is kept: when the last
        // connection to a database closes, SQLite copies the whole WAL back and deletes it.
        // Closing the migration's connection first would do that on every start, and after a
        // crash the WAL can hold megabytes (tens of milliseconds before the daemon could serve).
        let loads = base
            .clone()
            .create_if_missing(true)
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
        // Checkpoints happen off the commit path: the daemon runs `Checkpointer` every second.
        // Under sustained writes a passive checkpoint never catches up completely, and only a
        // complete one lets the WAL wrap, so the writer keeps a bound on the WAL
        // (`WAL_MAX_FRAMES`, ~16 MiB): past it, its next commit runs on the blocking pool and
        // checkpoints there, never on the caller's thread (`sqlite_write.rs`). With most frames
        // already copied in the background that is rare and cheap; SQLite's own autocheckpoint
        // (off) ran inside the commit, and at its default (1,000 pages) fsynced inside ~1% of
        // commits.
        let writer = Writer::open(path, &opts, WRITE_SPILL_PAGES).await?;
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
            writer,
            loads,
            reader: SqliteReader {
                pool,
                path: path.to_path_buf(),
            },
            checkpoint,
            token_bound: None,
        })
    }

    /// Turn the write connection's own WAL checkpoint (the bound on the WAL: past
    /// [`crate::WAL_MAX_FRAMES`], a commit runs on the blocking pool and checkpoints there)
    /// off or back on. After a crash the WAL can be near that bound, and the first commits
    /// would then copy it all back before recovery's answer: a daemon turns it off until its
    /// recovery is committed and its background [`Checkpointer`] runs.
    pub fn set_autocheckpoint(&mut self, on: bool) {
        self.writer.set_autocheckpoint(on);
    }

    /// A connection of its own for background checkpoints (and the WAL's restarts: see
    /// [`Checkpointer::restart`]).
    pub async fn checkpointer(&self) -> Result<Checkpointer, StoreError> {
        let conn = self.checkpoint.clone().connect().await?;
        Ok(Checkpointer { conn })
    }

    /// A handle for history reads.
    pub fn reader(&self) -> SqliteReader {
        self.reader.clone()
    }

    /// Load every session (with phases and agents), held locks, and the counters.
    pub async fn load(&mut self) -> Result<Loaded, StoreError> {
        let (loaded, bound) = rows::load(&mut self.loads).await?;
        self.token_bound = Some(bound);
        Ok(loaded)
    }

    /// Held locks and the next fencing token, as committed (to rebuild the lock table after a
    /// failed commit). The next token is the stored bound (or above a held lock's), which may
    /// be up to [`TOKEN_BLOCK`] above the last token given.
    pub async fn load_locks(&mut self) -> Result<(Vec<(HeldLock, i64)>, u64), StoreError> {
        let (locks, next, bound) = rows::load_locks(&mut self.loads).await?;
        self.token_bound = Some(bound);
        Ok((locks, next))
    }

    /// Apply a batch in one transaction. Returns only after the commit.
    ///
    /// The fencing-token bound is written only when the batch's tokens reach it, and then a
    /// [`TOKEN_BLOCK`] ahead: every token given stays below the bound committed with (or
    /// before) its grant, so a restart, which continues from the bound, never gives a token
    /// twice or one lower than a token given before.
    pub async fn commit(&mut self, batch: &Batch<'_>) -> Result<(), StoreError> {
        if batch.is_empty() {
            return Ok(());
        }
        let bound = batch
            .next_token
            .filter(|&next| self.token_bound.is_none_or(|b| next > b))
            .map(|next| next.saturating_add(TOKEN_BLOCK));
        if let Some(args) = rows::batch_args(batch, bound)? {
            self.writer.commit(args).await?;
        }
        if bound.is_some() {
            self.token_bound = bound;
        }
        Ok(())
    }

    /// `PRAGMA integrity_check` (on the loads' connection): "ok" when the file is sound.
    pub async fn integrity_check(&mut self) -> Result<String, StoreError> {
        let row = sqlx::query("PRAGMA integrity_check")
            .fetch_one(&mut self.loads)
            .await?;
        Ok(row.try_get::<String, _>(0)?)
    }

    /// Batches committed on the blocking pool rather than on the caller's thread (see
    /// `sqlite_write.rs`): a large batch, `synchronous=FULL`, or the write lock taken.
    pub fn pooled_commits(&self) -> u64 {
        self.writer.pooled_commits()
    }

    /// WAL checkpoints the write connection ran itself: each on the blocking pool, after a
    /// commit that left the WAL past [`crate::WAL_MAX_FRAMES`] (the background checkpointer
    /// fell behind). Never on the caller's thread.
    pub fn writer_checkpoints(&self) -> u64 {
        self.writer.checkpoints()
    }

    /// Close the connections cleanly, the write connection last (the last to close copies
    /// the WAL back and deletes it).
    pub async fn close(self) {
        self.reader.pool.close().await;
        let _ = self.loads.close().await;
        self.writer.close().await;
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
