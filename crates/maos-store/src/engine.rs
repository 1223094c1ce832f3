//! [`Store`] and [`Reader`]: a project's database on either engine, one enum each (two
//! engines, known at compile time: no trait object between the actor and its database).

use std::path::{Path, PathBuf};

use maos_core::HeldLock;
use maos_core::record::EventRecord;

use crate::options::StoreOptions;
use crate::pg::{self, Fleet, Fresh, Notifier, PgReader, PgStore};
use crate::rows;
use crate::sqlite::{Checkpointer, SqliteReader, SqliteStore};
use crate::types::*;

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

    /// The SQLite writer's own WAL checkpoint (on the blocking pool, once the WAL is past its
    /// bound) on or off (see [`SqliteStore::set_autocheckpoint`]).
    pub fn set_autocheckpoint(&mut self, on: bool) {
        if let Store::Sqlite(s) = self {
            s.set_autocheckpoint(on);
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
            Store::Sqlite(s) => Reader::Sqlite(s.reader()),
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

    /// In a fleet, start a batch of lock requests on `paths` alone with per-path turns
    /// ([`PgStore::begin_paths`]); `None` on SQLite, where [`Store::begin`] serves.
    pub async fn begin_paths(
        &mut self,
        known: u64,
        paths: &[&str],
    ) -> Option<Result<Fresh, StoreError>> {
        match self {
            Store::Sqlite(_) => None,
            Store::Postgres(s) => {
                let url = s.url();
                let keys = s.path_keys(paths.iter().copied());
                Some((s.begin_paths(known, &keys).await).map_err(|e| pg::unreachable(&url, e)))
            }
        }
    }

    /// End a begun batch whose changes were undone in memory: the next batch reads every
    /// lock row again.
    pub async fn abandon(&mut self) {
        if let Store::Postgres(s) = self {
            s.abandon().await;
        }
    }

    /// Whether the last commit's events were numbered past others' this daemon has not read
    /// (per-path turns): the next batch reads them back, in order, with those.
    pub fn renumbered(&self) -> bool {
        match self {
            Store::Sqlite(_) => false,
            Store::Postgres(s) => s.renumbered(),
        }
    }

    /// In a fleet, give back to the pool the connection kept between the project's batches
    /// (the project went idle; see [`PgStore::rest`]).
    pub fn rest(&mut self) {
        if let Store::Postgres(s) = self {
            s.rest();
        }
    }

    /// Whether a connection is kept between batches, for [`Store::rest`] to give back.
    pub fn keeps_connection(&self) -> bool {
        match self {
            Store::Sqlite(_) => false,
            Store::Postgres(s) => s.keeps_connection(),
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

/// Cheap to clone; reads history without touching the writer.
#[derive(Clone)]
pub enum Reader {
    Sqlite(SqliteReader),
    Postgres(PgReader),
}

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
