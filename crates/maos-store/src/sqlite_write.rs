//! The SQLite batch writer: the one connection that writes a project's batches, held by maos
//! itself (rusqlite, on the libsqlite3-sys that sqlx links) and called directly.
//!
//! Through sqlx a batch went to its connection's worker thread and the answers came back as
//! messages: three thread hand-offs per commit (the batch to the worker; `BEGIN IMMEDIATE`'s
//! result back; `COMMIT`'s), each the wake-up of a sleeping thread, which on a loaded 2-core
//! machine was most of a fresh grant's extra time. Here a small batch with
//! `synchronous=NORMAL` (written into the WAL, no fsync) runs on the caller's thread, the
//! project actor's: no hand-off at all. A batch that may take long runs on tokio's blocking
//! pool instead, one hand-off there and one back, so that the daemon's runtime thread serves
//! every other connection and project meanwhile: a batch with more than [`INLINE_MAX_BYTES`]
//! of rows or with snapshots, archiving or deletions ([`Part::long`]), every batch with
//! `synchronous=FULL` (an fsync each), and a batch that finds the write lock taken (the
//! background checkpointer's WAL restart holds it for one small write): the attempt on the
//! caller's thread never waits for the lock (busy timeout 0); the pooled one waits as long as
//! the connection always did ([`BUSY_TIMEOUT`]).
//!
//! The connection never checkpoints by itself: SQLite's autocheckpoint runs inside the commit
//! that passes its threshold (it copies the WAL's pages into the database file and fsyncs it),
//! which on the caller's thread stalled every request the daemon serves. Its WAL hook is
//! maos's instead ([`count_frames`]), which only notes how many frames the WAL holds. The
//! daemon's background checkpointer keeps the WAL short; should it fall behind (the WAL past
//! [`WAL_MAX_FRAMES`]), the next commit runs on the blocking pool, and a pooled commit that
//! leaves the WAL past the bound checkpoints it there, after its `COMMIT` (a passive
//! checkpoint, as SQLite's own was), so the WAL stays bounded without the runtime thread ever
//! copying it back.

use std::ffi::{c_char, c_int, c_void};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError, TryLockError};
use std::time::Duration;

use rusqlite::{Connection, ErrorCode, OpenFlags, ffi};

use crate::options::{StoreOptions, Synchronous, WAL_MAX_FRAMES};
use crate::rows::{ARGUMENTS, BatchArgs, BatchRow, Part};
use crate::types::StoreError;

/// How long a pooled commit waits for the write lock (what the sqlx connection waited).
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// The most bytes of rows a batch run on the caller's thread carries: a fresh grant's batch
/// is under 1 KiB; a group commit of 60 agents' grants about 20 KiB.
pub(crate) const INLINE_MAX_BYTES: usize = 8 * 1024;

/// Prepared statements kept: `BEGIN IMMEDIATE`, `COMMIT`, `ROLLBACK`, the 12 of the
/// [`Part`]s and the 3 of [`BatchRow`]s.
const STATEMENT_CACHE: usize = 32;

/// The write connection, and what it read once of its statements.
struct Conn {
    db: Connection,
    /// For each [`Part`] (by its place in [`Part::ALL`]) and each of its statements, the
    /// argument each of its parameters takes (`$N`: [`BatchArgs::values`]`[N - 1]`), read
    /// when the connection opened rather than by name at every commit.
    params: Vec<Vec<Box<[usize]>>>,
    /// Frames in the WAL after this connection's last commit, as its WAL hook was told
    /// ([`count_frames`]). Boxed, and after `db`: the hook holds its address for as long as
    /// the connection is open, and `db` is dropped (closed) first.
    frames: Box<AtomicU32>,
}

impl Conn {
    /// Whether the WAL was past [`WAL_MAX_FRAMES`] after this connection's last commit.
    fn wal_past_bound(&self) -> bool {
        self.frames.load(Ordering::Relaxed) >= WAL_MAX_FRAMES
    }
}

/// The write connection, and where its commits run.
pub(crate) struct Writer {
    /// Locked by one commit at a time: the caller's, or a pooled one's thread.
    conn: Arc<Mutex<Conn>>,
    /// `synchronous=NORMAL`: a commit writes into the WAL without an fsync, so a small one may
    /// run on the caller's thread.
    inline: bool,
    /// Commits run on the blocking pool.
    pooled: u64,
    /// Whether the WAL's bound holds: past it, commits run on the pool and checkpoint there.
    /// Off while a daemon recovers (see [`Writer::set_autocheckpoint`]).
    bounded: bool,
    /// Checkpoints this connection ran (each on the pool, after a commit past the bound).
    checkpoints: u64,
}

impl Writer {
    /// Open the write connection of the (existing, migrated) database at `path`.
    pub(crate) async fn open(
        path: &Path,
        opts: &StoreOptions,
        spill_pages: u32,
    ) -> Result<Writer, StoreError> {
        let (path, sync, max_pages) = (path.to_path_buf(), opts.synchronous, opts.max_page_count);
        let conn =
            tokio::task::spawn_blocking(move || connect(&path, sync, max_pages, spill_pages))
                .await
                .map_err(|e| StoreError::Write(format!("the write connection did not open: {e}")))?
                .map_err(store_error)?;
        Ok(Writer {
            conn: Arc::new(Mutex::new(conn)),
            inline: sync == Synchronous::Normal,
            pooled: 0,
            bounded: true,
            checkpoints: 0,
        })
    }

    /// Run the batch in one transaction (see the module's doc for on which thread). Returns
    /// only after the commit; on an error nothing of it is written.
    pub(crate) async fn commit(&mut self, args: BatchArgs) -> Result<(), StoreError> {
        if let Some(done) = self.try_inline(&args) {
            return done;
        }
        self.pooled += 1;
        let bounded = self.bounded;
        let checkpointed = self
            .on_pool(move |c| {
                c.db.busy_timeout(BUSY_TIMEOUT)?;
                let ran = run(c, &args);
                let checkpointed = ran.is_ok() && bounded && c.wal_past_bound() && checkpoint(c);
                c.db.busy_timeout(Duration::ZERO)?;
                ran.map_err(Failed::into_sqlite).map(|()| checkpointed)
            })
            .await?;
        self.checkpoints += u64::from(checkpointed);
        Ok(())
    }

    /// The commit on the caller's thread, when the batch is small, the connection free and its
    /// write lock not taken; `None` otherwise (the batch then goes to the pool).
    fn try_inline(&self, args: &BatchArgs) -> Option<Result<(), StoreError>> {
        if !self.inline || args.long() || args.bytes() > INLINE_MAX_BYTES {
            return None;
        }
        let conn = match self.conn.try_lock() {
            Ok(c) => c,
            Err(TryLockError::Poisoned(p)) => p.into_inner(),
            // A pooled commit the caller stopped awaiting still runs: queue behind it.
            Err(TryLockError::WouldBlock) => return None,
        };
        // The background checkpointer fell behind: this commit, and the checkpoint after it,
        // run on the pool.
        if self.bounded && conn.wal_past_bound() {
            return None;
        }
        match run(&conn, args) {
            Ok(()) => Some(Ok(())),
            Err(Failed::Busy) => None,
            Err(Failed::Sql(e)) => Some(Err(store_error(e))),
        }
    }

    /// Commits that ran on the blocking pool so far.
    pub(crate) fn pooled_commits(&self) -> u64 {
        self.pooled
    }

    /// Checkpoints this connection ran (on the pool, the WAL past its bound) so far.
    pub(crate) fn checkpoints(&self) -> u64 {
        self.checkpoints
    }

    /// The bound on the WAL on or off: with it off, a WAL past [`WAL_MAX_FRAMES`] neither
    /// sends commits to the pool nor has them checkpoint (SQLite's own checkpoint never runs
    /// on this connection either way).
    pub(crate) fn set_autocheckpoint(&mut self, on: bool) {
        self.bounded = on;
    }

    /// Run `f` on the connection on the blocking pool. A panic there (none is known) leaves
    /// the connection's lock poisoned and maybe a transaction open: the next `run` rolls that
    /// back before it begins.
    async fn on_pool<T: Send + 'static>(
        &self,
        f: impl FnOnce(&Conn) -> rusqlite::Result<T> + Send + 'static,
    ) -> Result<T, StoreError> {
        let conn = Arc::clone(&self.conn);
        match tokio::task::spawn_blocking(move || f(&lock(&conn))).await {
            Ok(done) => done.map_err(store_error),
            Err(e) => Err(StoreError::Write(format!(
                "the commit's thread stopped: {e}"
            ))),
        }
    }

    /// Close the connection (off the caller's thread: the last connection to a database copies
    /// the WAL back and deletes it). A pooled commit still running keeps it open until it ends.
    pub(crate) async fn close(self) {
        let Ok(conn) = Arc::try_unwrap(self.conn) else {
            return;
        };
        let Conn { db, frames, .. } = conn.into_inner().unwrap_or_else(PoisonError::into_inner);
        let closed = tokio::task::spawn_blocking(move || {
            let closed = db.close().map_err(|(_, e)| e);
            // Only now: the connection's WAL hook held its address.
            drop(frames);
            closed
        })
        .await;
        if let Ok(Err(e)) = closed {
            tracing::warn!(error = %e, "closing the database's write connection failed");
        }
    }
}

fn lock(conn: &Mutex<Conn>) -> MutexGuard<'_, Conn> {
    conn.lock().unwrap_or_else(PoisonError::into_inner)
}

/// Open and set up the write connection: the settings sqlx's connection had.
fn connect(
    path: &PathBuf,
    sync: Synchronous,
    max_pages: Option<u64>,
    spill_pages: u32,
) -> rusqlite::Result<Conn> {
    let conn = Connection::open_with_flags(
        path,
        OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    conn.busy_timeout(BUSY_TIMEOUT)?;
    let mut pragmas = format!(
        "PRAGMA journal_mode = WAL; PRAGMA synchronous = {}; PRAGMA foreign_keys = OFF; \
         PRAGMA temp_store = MEMORY; PRAGMA wal_autocheckpoint = 0; \
         PRAGMA cache_spill = {spill_pages};",
        sync.as_str().to_ascii_uppercase(),
    );
    if let Some(pages) = max_pages {
        pragmas.push_str(&format!(" PRAGMA max_page_count = {pages};"));
    }
    conn.execute_batch(&pragmas)?;
    conn.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    conn.busy_timeout(Duration::ZERO)?;
    let params = parameters(&conn)?;
    let frames = Box::new(AtomicU32::new(0));
    // SAFETY: `conn` is a live connection. The hook's argument is the address of `frames`,
    // which the returned `Conn` keeps (boxed: it does not move) until after `conn` is closed
    // (`Conn`'s fields drop in order, `db` first; `Writer::close` drops it after the close).
    // The hook (replacing SQLite's autocheckpoint) only stores into it.
    unsafe {
        ffi::sqlite3_wal_hook(
            conn.handle(),
            Some(count_frames),
            std::ptr::from_ref::<AtomicU32>(&frames).cast_mut().cast(),
        );
    }
    Ok(Conn {
        db: conn,
        params,
        frames,
    })
}

/// The write connection's WAL hook, which SQLite calls after each of its commits with the
/// frames the WAL then holds: it notes them in the connection's `frames` and checkpoints
/// nothing (registering it replaces SQLite's autocheckpoint, which is such a hook).
unsafe extern "C" fn count_frames(
    frames: *mut c_void,
    _db: *mut ffi::sqlite3,
    _name: *const c_char,
    n: c_int,
) -> c_int {
    // SAFETY: `frames` is the `AtomicU32` that `connect` registered, alive while the
    // connection is open (see there); an atomic store needs no exclusive access.
    let frames = unsafe { &*frames.cast::<AtomicU32>().cast_const() };
    frames.store(u32::try_from(n).unwrap_or(0), Ordering::Relaxed);
    ffi::SQLITE_OK
}

/// A passive checkpoint on the write connection (after a commit on the pool, the WAL past its
/// bound): whatever no reader still needs is copied into the database file, and once every
/// frame is, the next commit starts the WAL again from its beginning. True when it ran; a
/// failure is logged (the commit before it stands).
fn checkpoint(c: &Conn) -> bool {
    let ran = c.db.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |r| {
        Ok((
            r.get::<_, i64>(0)?,
            r.get::<_, i64>(1)?,
            r.get::<_, i64>(2)?,
        ))
    });
    match ran {
        Ok((busy, frames, copied)) => {
            tracing::debug!(
                busy,
                frames,
                copied,
                "the writer checkpointed its WAL past the bound"
            );
            true
        }
        Err(e) => {
            tracing::warn!(error = %e, "the writer's checkpoint of its WAL past the bound failed");
            false
        }
    }
}

/// Which argument each parameter of each part's statements takes (see [`Conn::params`]);
/// every statement is prepared (and kept) on the way.
fn parameters(conn: &Connection) -> rusqlite::Result<Vec<Vec<Box<[usize]>>>> {
    let of = |text: &str| {
        let st = conn.prepare_cached(text)?;
        (1..=st.parameter_count())
            .map(|p| {
                let name = st.parameter_name(p).unwrap_or("?");
                (name.strip_prefix('$'))
                    .and_then(|n| n.parse::<usize>().ok())
                    .filter(|n| (1..=ARGUMENTS).contains(n))
                    .map(|n| n - 1)
                    .ok_or_else(|| rusqlite::Error::InvalidParameterName(name.to_string()))
            })
            .collect()
    };
    (Part::ALL.iter())
        .map(|part| part.statements().iter().map(|t| of(t)).collect())
        .collect()
}

/// Why a batch did not commit.
enum Failed {
    /// `BEGIN IMMEDIATE` found the write lock taken: nothing ran.
    Busy,
    Sql(rusqlite::Error),
}

impl Failed {
    fn into_sqlite(self) -> rusqlite::Error {
        match self {
            Failed::Busy => rusqlite::Error::SqliteFailure(
                rusqlite::ffi::Error::new(rusqlite::ffi::SQLITE_BUSY),
                Some("the database stayed locked by another connection".into()),
            ),
            Failed::Sql(e) => e,
        }
    }
}

/// `BEGIN IMMEDIATE`, the batch's statements, `COMMIT`; on any failure after the `BEGIN`, a
/// `ROLLBACK` (unless SQLite already rolled back, as on a full disk).
fn run(c: &Conn, args: &BatchArgs) -> Result<(), Failed> {
    let conn = &c.db;
    if !conn.is_autocommit() {
        // Left open by a call that panicked: what it did was never acknowledged.
        let _ = conn.execute_batch("ROLLBACK");
    }
    if let Err(e) = exec(conn, "BEGIN IMMEDIATE") {
        return Err(match e.sqlite_error_code() {
            Some(ErrorCode::DatabaseBusy) => Failed::Busy,
            _ => Failed::Sql(e),
        });
    }
    let done = statements(c, args).and_then(|()| exec(conn, "COMMIT"));
    if let Err(e) = done {
        if !conn.is_autocommit() {
            let _ = exec(conn, "ROLLBACK");
        }
        return Err(Failed::Sql(e));
    }
    Ok(())
}

fn exec(conn: &Connection, sql: &str) -> rusqlite::Result<()> {
    conn.prepare_cached(sql)?.raw_execute().map(drop)
}

/// The statements of the batch's parts, in order, each bound to its `$N` arguments, and its
/// rows at [`Part::Rows`].
fn statements(c: &Conn, args: &BatchArgs) -> rusqlite::Result<()> {
    for (part, params) in Part::ALL.into_iter().zip(&c.params) {
        if !args.runs(part) {
            continue;
        }
        if part == Part::Rows {
            for row in &args.rows {
                row_statement(&c.db, row)?;
            }
        }
        for (text, params) in part.statements().iter().zip(params) {
            let mut st = c.db.prepare_cached(text)?;
            for (p, &arg) in params.iter().enumerate() {
                st.raw_bind_parameter(p + 1, &args.values[arg])?;
            }
            st.raw_execute()?;
        }
    }
    Ok(())
}

/// One row of the batch, its values bound in place (`?1`, `?2`, …).
fn row_statement(conn: &Connection, row: &BatchRow) -> rusqlite::Result<()> {
    let mut st = conn.prepare_cached(row.statement())?;
    for (p, value) in row.values().iter().enumerate() {
        st.raw_bind_parameter(p + 1, value)?;
    }
    st.raw_execute().map(drop)
}

/// SQLITE_FULL (a full disk, or the size cap) is [`StoreError::Full`]; the rest a write error.
fn store_error(e: rusqlite::Error) -> StoreError {
    match &e {
        rusqlite::Error::SqliteFailure(f, msg) if f.code == ErrorCode::DiskFull => {
            StoreError::Full(msg.clone().unwrap_or_else(|| f.to_string()))
        }
        _ => StoreError::Write(e.to_string()),
    }
}
