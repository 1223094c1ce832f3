//! What the store speaks, on either engine: options, errors, the rows a commit writes and
//! what a load returns.

use std::path::PathBuf;

use maos_core::HeldLock;
use maos_core::record::{EventRecord, SessionRecord};

/// A boxed `Send` future (sqlx's query futures carry higher-ranked lifetimes that otherwise
/// make every caller's future fail the `Send` check of `tokio::spawn`).
pub(crate) type Boxed<'a, T> =
    std::pin::Pin<Box<dyn Future<Output = Result<T, StoreError>> + Send + 'a>>;

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
    /// A batch's commit failed on the write connection (`sqlite_write.rs`).
    #[error("database error: {0}")]
    Write(String),
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
    /// Texts one of which must occur there, each as `path` (empty: no such filter).
    pub paths: Vec<String>,
    /// A text that must occur in the event's type or data (ASCII case folded).
    pub text: Option<String>,
    /// The newest `limit` matching events (still returned oldest first); with `oldest_first`,
    /// the oldest `limit`.
    pub limit: Option<u32>,
    pub oldest_first: bool,
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

/// What a database file to restore holds, once checked.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BackupCheck {
    pub sessions: u64,
    pub events: u64,
}
