//! Row mapping: records ⇄ SQL rows. Writes pass most tables' rows as one JSON array; SQLite
//! binds the events and lock rows one by one.

use chrono::DateTime;
use maos_core::record::{AgentRecord, EventRecord, SessionRecord};
use maos_core::{
    AgentId, AgentState, CheckpointResult, HeldLock, Phase, PhaseState, SessionId, SessionState,
    Strategy, Ts, Workflow,
};
use serde::Serialize;
use sqlx::sqlite::{SqliteConnection, SqlitePool, SqliteRow};
use sqlx::{QueryBuilder, Row, Sqlite};
use std::collections::HashMap;

use rusqlite::types::Value;

use crate::{Batch, EventQuery, Loaded, StoreError};

/// Microseconds since the Unix epoch.
pub fn to_us(ts: &Ts) -> i64 {
    ts.timestamp_micros()
}

/// The inverse of [`to_us`]; out-of-range values clamp to the epoch.
pub fn from_us(us: i64) -> Ts {
    DateTime::from_timestamp_micros(us).unwrap_or_default()
}

#[derive(Serialize)]
struct SessionRow<'a> {
    id: &'a str,
    objective: &'a str,
    state: SessionState,
    strategy: Strategy,
    active: bool,
    created_at: i64,
    updated_at: i64,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    workflow_completed_at: Option<i64>,
    resume_count: u32,
    pause: Option<String>,
    paused_phases: String,
    errors: String,
    data: String,
}

/// The session's facts kept in its `data` column.
#[derive(Serialize, serde::Deserialize, Default)]
struct SessionData {
    #[serde(default)]
    notes: Vec<maos_core::record::Note>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    policy: Option<maos_core::plan::RunPolicy>,
    #[serde(
        default,
        skip_serializing_if = "maos_core::record::ContextUsage::is_empty"
    )]
    context: maos_core::record::ContextUsage,
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    todos: Vec<maos_core::record::AgentTodos>,
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    by_hooks: bool,
}

#[derive(Serialize)]
struct AgentRow<'a> {
    id: &'a str,
    session_id: &'a str,
    role: &'a str,
    instance: u32,
    task: &'a str,
    state: AgentState,
    paused: bool,
    parent_id: Option<&'a str>,
    depends_on: String,
    created_at: i64,
    updated_at: i64,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    exit_code: Option<i32>,
    external_session_id: Option<&'a str>,
    external_agent_id: Option<&'a str>,
    pid: Option<u32>,
    data: String,
}

/// A managed agent's facts kept in its `data` column.
#[derive(serde::Deserialize, Default)]
struct AgentData {
    #[serde(default)]
    spec: Option<Box<maos_core::plan::AgentSpec>>,
    #[serde(default)]
    process: Option<maos_core::record::ProcessInfo>,
    #[serde(default)]
    attempts: u32,
    #[serde(default)]
    pause: Option<Box<maos_core::record::PauseInfo>>,
    #[serde(default)]
    cli: Option<maos_core::record::Cli>,
    #[serde(default)]
    window: Option<maos_core::record::ProcessRef>,
    #[serde(default)]
    machine: Option<String>,
    #[serde(default)]
    tool_use_id: Option<String>,
    #[serde(default)]
    held: Option<Box<maos_core::record::Held>>,
}

/// [`AgentData`] as written, borrowed from the record.
#[derive(Serialize)]
struct AgentDataOut<'a> {
    #[serde(skip_serializing_if = "Option::is_none")]
    spec: Option<&'a maos_core::plan::AgentSpec>,
    #[serde(skip_serializing_if = "Option::is_none")]
    process: Option<&'a maos_core::record::ProcessInfo>,
    attempts: u32,
    #[serde(skip_serializing_if = "Option::is_none")]
    pause: Option<&'a maos_core::record::PauseInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    cli: Option<maos_core::record::Cli>,
    #[serde(skip_serializing_if = "Option::is_none")]
    window: Option<&'a maos_core::record::ProcessRef>,
    #[serde(skip_serializing_if = "Option::is_none")]
    machine: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    tool_use_id: Option<&'a str>,
    #[serde(skip_serializing_if = "Option::is_none")]
    held: Option<&'a maos_core::record::Held>,
}

#[derive(Serialize)]
struct PhaseRow<'a> {
    session_id: &'a str,
    idx: usize,
    name: &'a str,
    state: PhaseState,
    attempts: u32,
    started_at: Option<i64>,
    ended_at: Option<i64>,
    result: Option<CheckpointResult>,
    artifacts: String,
    handoff: String,
}

#[derive(Serialize)]
struct EventRow<'a> {
    seq: u64,
    ts: i64,
    session_id: Option<&'a str>,
    agent_id: Option<&'a str>,
    r#type: &'a str,
    data: String,
}

pub(crate) fn json<T: Serialize + ?Sized>(v: &T) -> Result<String, StoreError> {
    serde_json::to_string(v).map_err(|e| StoreError::Corrupt(format!("cannot encode row: {e}")))
}

const UPSERT_SESSIONS: &str = "\
INSERT INTO sessions (id, objective, state, strategy, active, created_at, updated_at, started_at,
    ended_at, workflow_completed_at, resume_count, pause, paused_phases, errors, data)
SELECT j.value->>'id', j.value->>'objective', j.value->>'state', j.value->>'strategy',
    j.value->>'active', j.value->>'created_at', j.value->>'updated_at', j.value->>'started_at',
    j.value->>'ended_at', j.value->>'workflow_completed_at', j.value->>'resume_count',
    j.value->>'pause', j.value->>'paused_phases', j.value->>'errors', j.value->>'data'
FROM json_each($1) AS j WHERE true
ON CONFLICT (id) DO UPDATE SET objective = excluded.objective, state = excluded.state,
    strategy = excluded.strategy, active = excluded.active, updated_at = excluded.updated_at,
    started_at = excluded.started_at, ended_at = excluded.ended_at,
    workflow_completed_at = excluded.workflow_completed_at, resume_count = excluded.resume_count,
    pause = excluded.pause, paused_phases = excluded.paused_phases, errors = excluded.errors,
    data = excluded.data";

const UPSERT_AGENTS: &str = "\
INSERT INTO session_agents (id, session_id, role, instance, task, state, paused, parent_id,
    depends_on, created_at, updated_at, started_at, ended_at, exit_code, external_session_id,
    external_agent_id, pid, data)
SELECT j.value->>'id', j.value->>'session_id', j.value->>'role', j.value->>'instance',
    j.value->>'task', j.value->>'state', j.value->>'paused', j.value->>'parent_id',
    j.value->>'depends_on', j.value->>'created_at', j.value->>'updated_at',
    j.value->>'started_at', j.value->>'ended_at', j.value->>'exit_code',
    j.value->>'external_session_id', j.value->>'external_agent_id', j.value->>'pid',
    j.value->>'data'
FROM json_each($3) AS j WHERE true
ON CONFLICT (id) DO UPDATE SET task = excluded.task, state = excluded.state,
    paused = excluded.paused, depends_on = excluded.depends_on, updated_at = excluded.updated_at,
    started_at = excluded.started_at, ended_at = excluded.ended_at, exit_code = excluded.exit_code,
    external_session_id = excluded.external_session_id,
    external_agent_id = excluded.external_agent_id, pid = excluded.pid, data = excluded.data";

const UPSERT_PHASES: &str = "\
INSERT INTO phases (session_id, idx, name, state, attempts, started_at, ended_at, result,
    artifacts, handoff)
SELECT j.value->>'session_id', j.value->>'idx', j.value->>'name', j.value->>'state',
    j.value->>'attempts', j.value->>'started_at', j.value->>'ended_at', j.value->>'result',
    j.value->>'artifacts', j.value->>'handoff'
FROM json_each($2) AS j WHERE true
ON CONFLICT (session_id, idx) DO UPDATE SET name = excluded.name, state = excluded.state,
    attempts = excluded.attempts, started_at = excluded.started_at,
    ended_at = excluded.ended_at, result = excluded.result, artifacts = excluded.artifacts,
    handoff = excluded.handoff";

/// A fresh grant's event row, bound in place (see [`BatchRow`]).
const INSERT_EVENT: &str = "INSERT INTO session_events (seq, ts, session_id, agent_id, type, data) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6)";

/// A lock that is gone (released, expired, taken back), by its token.
const DELETE_LOCK: &str = "DELETE FROM locks WHERE token = ?1";

/// A lock granted, or its lease renewed.
const UPSERT_LOCK: &str = "INSERT INTO locks (token, path, holder_id, session_id, mode, \
     acquired_at, expires_at, ttl_us) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8) \
     ON CONFLICT (token) DO UPDATE SET expires_at = excluded.expires_at, ttl_us = excluded.ttl_us";

/// One row bound in place, its values owned (a pooled commit takes them to another thread):
/// the tables a fresh grant writes (its event, its lock row; a release deletes one). A row's
/// values bound directly cost less than encoding the rows as JSON for SQLite to parse back
/// with `json_each` (issue 34: that was most of a fresh grant's commit besides the pages
/// written). Each kind's statement is kept prepared; the rows run at [`Part::Rows`], in the
/// order of [`BatchArgs::rows`] (events, then unlocks, then locks).
pub(crate) enum BatchRow {
    Event([Value; 6]),
    Unlock([Value; 1]),
    Lock([Value; 8]),
}

impl BatchRow {
    /// The row's statement, its values bound as `?1`, `?2`, ….
    pub(crate) fn statement(&self) -> &'static str {
        match self {
            BatchRow::Event(_) => INSERT_EVENT,
            BatchRow::Unlock(_) => DELETE_LOCK,
            BatchRow::Lock(_) => UPSERT_LOCK,
        }
    }

    pub(crate) fn values(&self) -> &[Value] {
        match self {
            BatchRow::Event(v) => v,
            BatchRow::Unlock(v) => v,
            BatchRow::Lock(v) => v,
        }
    }
}

/// The fencing-token bound: no token at or above it was ever given (written a block ahead of
/// the grants, see `SqliteStore::commit`; never lowered).
const SET_TOKEN_BOUND: &str = "\
INSERT INTO meta (key, value) VALUES ('next_lock_token', $4)
ON CONFLICT (key) DO UPDATE SET value = max(value, excluded.value)";

/// The snapshots are not in `$5`'s JSON: they are large (a session with its agents), and
/// escaping them into a JSON string, then having SQLite parse and unescape it, cost more than
/// the rest of a recovery's commit. `$6` is their UTF-8 bytes back to back, and each row of
/// `$5` says where its own is (`off`, 1-based, and `len`, in bytes: `substr` of a blob counts
/// bytes).
const INSERT_CHECKPOINTS: &str = "\
INSERT INTO checkpoints (session_id, seq, ts, reason, state)
SELECT j.value->>'session_id', j.value->>'seq', j.value->>'ts', j.value->>'reason',
    CAST(substr($6, j.value->>'off', j.value->>'len') AS TEXT)
FROM json_each($5) AS j";

const ARCHIVE_SESSIONS: &str = "\
UPDATE sessions SET archived = 1 WHERE id IN (SELECT j.value FROM json_each($7) AS j)";

/// Everything a deleted session recorded goes with it: events, checkpoints, phases, agents,
/// locks. After the inserts, so that an event about the deletion (with no session) stays.
const PURGE_SESSIONS: [&str; 6] = [
    "DELETE FROM session_events WHERE session_id IN (SELECT j.value FROM json_each($8) AS j)",
    "DELETE FROM checkpoints WHERE session_id IN (SELECT j.value FROM json_each($8) AS j)",
    "DELETE FROM phases WHERE session_id IN (SELECT j.value FROM json_each($8) AS j)",
    "DELETE FROM session_agents WHERE session_id IN (SELECT j.value FROM json_each($8) AS j)",
    "DELETE FROM locks WHERE session_id IN (SELECT j.value FROM json_each($8) AS j)",
    "DELETE FROM sessions WHERE id IN (SELECT j.value FROM json_each($8) AS j)",
];

/// The parts of a SQLite batch, in the order they run between `BEGIN IMMEDIATE` and `COMMIT`
/// on the store's own write connection (`sqlite_write.rs`); a batch runs only the parts it
/// has rows for (a fresh grant: [`Part::Rows`], its event and its lock row). Every statement
/// is kept prepared. The statements of a part take their arguments as `$N`, bound by name to
/// [`BatchArgs::values`]`[N - 1]`; `$N`, not `?N`: SQLite gives a statement using only `?6`
/// five unnamed parameters before it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Part {
    /// `$1`: the sessions' rows as JSON.
    Sessions,
    /// `$2`: the phases' rows as JSON.
    Phases,
    /// `$3`: the agents' rows as JSON.
    Agents,
    /// The events, unlocks and locks, bound one row at a time ([`BatchRow`]), never as JSON.
    Rows,
    /// `$4`: the fencing-token bound.
    TokenBound,
    /// `$5` and `$6`: the snapshots.
    Checkpoints,
    /// `$7`: the ids of the sessions archived.
    Archive,
    /// `$8`: the ids of the sessions deleted.
    Purge,
}

impl Part {
    /// Every part, in the order they run.
    pub(crate) const ALL: [Part; 8] = [
        Part::Sessions,
        Part::Phases,
        Part::Agents,
        Part::Rows,
        Part::TokenBound,
        Part::Checkpoints,
        Part::Archive,
        Part::Purge,
    ];

    /// The part's bit in [`BatchArgs::shape`].
    pub(crate) const fn bit(self) -> u16 {
        1 << self as u16
    }

    /// The part's statements (none for [`Part::Rows`]: each row names its own,
    /// [`BatchRow::statement`]).
    pub(crate) const fn statements(self) -> &'static [&'static str] {
        match self {
            Part::Sessions => &[UPSERT_SESSIONS],
            Part::Phases => &[UPSERT_PHASES],
            Part::Agents => &[UPSERT_AGENTS],
            Part::Rows => &[],
            Part::TokenBound => &[SET_TOKEN_BOUND],
            Part::Checkpoints => &[INSERT_CHECKPOINTS],
            Part::Archive => &[ARCHIVE_SESSIONS],
            Part::Purge => &PURGE_SESSIONS,
        }
    }

    /// Whether a batch with this part may be long (snapshots, archiving, deleting whole
    /// sessions): such a batch is never run on the caller's thread.
    pub(crate) const fn long(self) -> bool {
        matches!(self, Part::Checkpoints | Part::Archive | Part::Purge)
    }
}

#[derive(Serialize)]
struct CheckpointRowOut<'a> {
    session_id: &'a str,
    seq: u64,
    ts: i64,
    reason: &'a str,
    /// Where the snapshot is in the batch's `$6`: 1-based byte offset and length.
    off: usize,
    len: usize,
}

#[derive(Serialize)]
struct LockRowOut<'a> {
    path: &'a str,
    holder_id: &'a str,
    session_id: &'a str,
    mode: maos_core::LockMode,
    token: u64,
    acquired_at: i64,
    expires_at: i64,
    ttl_us: i64,
}

/// A batch's rows, each table's as one JSON array (`[]` when it has none), as PostgreSQL
/// takes them.
pub(crate) struct BatchRows {
    pub sessions: String,
    pub phases: String,
    pub agents: String,
    pub events: String,
    /// Tokens of the locks that are gone.
    pub unlocks: String,
    pub locks: String,
}

impl BatchRows {
    /// The batch's rows, with `sessions` as the session rows to write (a fleet adds those
    /// whose phases changed to the batch's own).
    pub(crate) fn of(b: &Batch<'_>, sessions: &[&SessionRecord]) -> Result<BatchRows, StoreError> {
        let RecordRows {
            sessions,
            phases,
            agents,
        } = RecordRows::of(b, sessions)?;
        let empty = || "[]".to_string();
        let (mut events, mut unlocks, mut locks) = (empty(), empty(), empty());
        if !b.events.is_empty() {
            let rows = b
                .events
                .iter()
                .map(|e| {
                    Ok(EventRow {
                        seq: e.seq,
                        ts: to_us(&e.ts),
                        session_id: e.session_id.as_ref().map(SessionId::as_str),
                        agent_id: e.agent_id.as_ref().map(AgentId::as_str),
                        r#type: &e.kind,
                        data: json(&e.data)?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            events = json(&rows)?;
        }
        // Deletes first (tokens are never reused, so order only matters for clarity).
        if !b.unlocks.is_empty() {
            unlocks = json(&b.unlocks)?;
        }
        if !b.locks.is_empty() {
            let rows: Vec<_> = b
                .locks
                .iter()
                .map(|r| LockRowOut {
                    path: r.lock.path.as_str(),
                    holder_id: r.lock.holder.as_str(),
                    session_id: r.session_id.as_str(),
                    mode: r.lock.mode,
                    token: r.lock.token,
                    acquired_at: to_us(&r.lock.acquired_at),
                    expires_at: to_us(&r.lock.expires_at),
                    ttl_us: r.ttl_us,
                })
                .collect();
            locks = json(&rows)?;
        }
        Ok(BatchRows {
            sessions,
            phases,
            agents,
            events,
            unlocks,
            locks,
        })
    }
}

/// The sessions', phases' and agents' rows of a batch as JSON arrays (`[]` when there are
/// none): what both engines take as JSON.
struct RecordRows {
    sessions: String,
    phases: String,
    agents: String,
}

impl RecordRows {
    fn of(b: &Batch<'_>, sessions: &[&SessionRecord]) -> Result<RecordRows, StoreError> {
        let empty = || "[]".to_string();
        let (mut phases, mut agents) = (empty(), empty());
        let sessions = if sessions.is_empty() {
            empty()
        } else {
            let rows = sessions
                .iter()
                .map(|s| session_row(s))
                .collect::<Result<Vec<_>, _>>()?;
            json(&rows)?
        };
        if !b.phases_of.is_empty() {
            let mut rows = Vec::new();
            for s in &b.phases_of {
                for (idx, p) in s.workflow.phases.iter().enumerate() {
                    rows.push(PhaseRow {
                        session_id: s.id.as_str(),
                        idx,
                        name: &p.name,
                        state: p.state,
                        attempts: p.attempts,
                        started_at: p.started_at.as_ref().map(to_us),
                        ended_at: p.ended_at.as_ref().map(to_us),
                        result: p.result,
                        artifacts: json(&p.artifacts)?,
                        handoff: json(&p.handoff)?,
                    });
                }
            }
            phases = json(&rows)?;
        }
        if !b.agents.is_empty() {
            let rows = b
                .agents
                .iter()
                .map(|a| {
                    Ok(AgentRow {
                        id: a.id.as_str(),
                        session_id: a.session_id.as_str(),
                        role: &a.role,
                        instance: a.instance,
                        task: &a.task,
                        state: a.state,
                        paused: a.paused,
                        parent_id: a.parent.as_ref().map(AgentId::as_str),
                        depends_on: json(&a.depends_on)?,
                        created_at: to_us(&a.created_at),
                        updated_at: to_us(&a.updated_at),
                        started_at: a.started_at.as_ref().map(to_us),
                        ended_at: a.ended_at.as_ref().map(to_us),
                        exit_code: a.exit_code,
                        external_session_id: a.external_session_id.as_deref(),
                        external_agent_id: a.external_agent_id.as_deref(),
                        pid: a.process.as_ref().map(|p| p.pid),
                        data: json(&AgentDataOut {
                            spec: a.spec.as_deref(),
                            process: a.process.as_ref(),
                            attempts: a.attempts,
                            pause: a.pause.as_deref(),
                            cli: a.cli,
                            window: a.window.as_ref(),
                            machine: a.machine.as_deref(),
                            tool_use_id: a.tool_use_id.as_deref(),
                            held: a.held.as_deref(),
                        })?,
                    })
                })
                .collect::<Result<Vec<_>, StoreError>>()?;
            agents = json(&rows)?;
        }
        Ok(RecordRows {
            sessions,
            phases,
            agents,
        })
    }
}

/// The arguments of `b`'s [`Part`]s and which of them run; `None` when nothing is written.
/// `token_bound`, when given, is the fencing-token bound to store with it (the batch's own
/// `next_token` is not written: see `SqliteStore::commit`).
pub(crate) fn batch_args(
    b: &Batch<'_>,
    token_bound: Option<u64>,
) -> Result<Option<BatchArgs>, StoreError> {
    let RecordRows {
        sessions,
        phases,
        agents,
    } = RecordRows::of(b, &b.sessions)?;
    let empty = || "[]".to_string();
    let mut checkpoints = empty();
    let mut states = Vec::new();
    if !b.checkpoints.is_empty() {
        states.reserve(b.checkpoints.iter().map(|c| c.state.len()).sum());
        let rows: Vec<_> = b
            .checkpoints
            .iter()
            .map(|c| {
                let off = states.len() + 1;
                states.extend_from_slice(c.state.as_bytes());
                CheckpointRowOut {
                    session_id: c.session_id.as_str(),
                    seq: c.seq,
                    ts: to_us(&c.ts),
                    reason: &c.reason,
                    off,
                    len: c.state.len(),
                }
            })
            .collect();
        checkpoints = json(&rows)?;
    }
    let (archived, purged) = (json(&b.archived)?, json(&b.purged)?);
    let rows = batch_rows(b)?;
    let has = |j: &str| j != "[]";
    let shape = [
        (Part::Sessions, has(&sessions)),
        (Part::Phases, has(&phases)),
        (Part::Agents, has(&agents)),
        (Part::Rows, !rows.is_empty()),
        (Part::TokenBound, token_bound.is_some()),
        (Part::Checkpoints, has(&checkpoints)),
        (Part::Archive, has(&archived)),
        (Part::Purge, has(&purged)),
    ]
    .iter()
    .filter(|(_, on)| *on)
    .fold(0u16, |m, (part, _)| m | part.bit());
    if shape == 0 {
        return Ok(None);
    }
    let bound = token_bound.map_or(Value::Null, |t| {
        Value::Integer(i64::try_from(t).unwrap_or(i64::MAX))
    });
    Ok(Some(BatchArgs {
        shape,
        values: [
            Value::Text(sessions),
            Value::Text(phases),
            Value::Text(agents),
            bound,
            Value::Text(checkpoints),
            Value::Blob(states),
            Value::Text(archived),
            Value::Text(purged),
        ],
        rows,
    }))
}

/// The batch's events, unlocks and locks as [`BatchRow`]s, in that order.
fn batch_rows(b: &Batch<'_>) -> Result<Vec<BatchRow>, StoreError> {
    let int = |n: u64| {
        i64::try_from(n)
            .map(Value::Integer)
            .map_err(|_| StoreError::Corrupt(format!("cannot encode row: {n} is out of range")))
    };
    let text = |t: &str| Value::Text(t.to_string());
    let opt = |t: Option<&str>| t.map_or(Value::Null, text);
    let mut rows = Vec::with_capacity(b.events.len() + b.unlocks.len() + b.locks.len());
    for e in b.events {
        rows.push(BatchRow::Event([
            int(e.seq)?,
            Value::Integer(to_us(&e.ts)),
            opt(e.session_id.as_ref().map(SessionId::as_str)),
            opt(e.agent_id.as_ref().map(AgentId::as_str)),
            text(&e.kind),
            Value::Text(json(&e.data)?),
        ]));
    }
    for &t in &b.unlocks {
        rows.push(BatchRow::Unlock([int(t)?]));
    }
    for r in &b.locks {
        rows.push(BatchRow::Lock([
            int(r.lock.token)?,
            text(r.lock.path.as_str()),
            text(r.lock.holder.as_str()),
            text(r.session_id.as_str()),
            text(r.lock.mode.as_str()),
            Value::Integer(to_us(&r.lock.acquired_at)),
            Value::Integer(to_us(&r.lock.expires_at)),
            Value::Integer(r.ttl_us),
        ]));
    }
    Ok(rows)
}

/// Held locks, the next fencing token, and the token bound as stored (`meta`'s
/// `next_lock_token`: no token at or above it was ever given; 0 when there is none).
pub(crate) async fn load_locks(
    conn: &mut SqliteConnection,
) -> Result<(Vec<(HeldLock, i64)>, u64, u64), StoreError> {
    let mut locks = Vec::new();
    let mut max_token = 0u64;
    for row in sqlx::query("SELECT * FROM locks ORDER BY token")
        .fetch_all(&mut *conn)
        .await?
    {
        let held = lock_from_row(&row)?;
        max_token = max_token.max(held.0.token);
        locks.push(held);
    }
    let stored: Option<i64> =
        sqlx::query_scalar("SELECT value FROM meta WHERE key = 'next_lock_token'")
            .fetch_optional(&mut *conn)
            .await?;
    let bound = stored.unwrap_or(0).max(0) as u64;
    // Never below a restored token, even if the counter row were missing.
    let next = bound.max(1).max(max_token + 1);
    Ok((locks, next, bound))
}

fn session_row(s: &SessionRecord) -> Result<SessionRow<'_>, StoreError> {
    Ok(SessionRow {
        id: s.id.as_str(),
        objective: &s.objective,
        state: s.state,
        strategy: s.strategy,
        active: s.active,
        created_at: to_us(&s.created_at),
        updated_at: to_us(&s.updated_at),
        started_at: s.started_at.as_ref().map(to_us),
        ended_at: s.ended_at.as_ref().map(to_us),
        workflow_completed_at: s.workflow.completed_at.as_ref().map(to_us),
        resume_count: s.resume_count,
        pause: s.pause.as_ref().map(json).transpose()?,
        paused_phases: json(&s.paused_phases)?,
        errors: json(&s.errors)?,
        data: json(&SessionData {
            notes: s.notes.clone(),
            policy: s.policy.clone(),
            context: s.context.clone(),
            todos: s.todos.clone(),
            by_hooks: s.by_hooks,
        })?,
    })
}

/// What the row decoders need of a row, on either engine: each reads a column as text, an
/// integer (any width) or a flag, and says which column failed.
pub(crate) trait Cols {
    fn text(&self, col: &str) -> Result<String, StoreError>;
    fn text_opt(&self, col: &str) -> Result<Option<String>, StoreError>;
    fn int_opt(&self, col: &str) -> Result<Option<i64>, StoreError>;
    fn flag(&self, col: &str) -> Result<bool, StoreError>;

    fn int(&self, col: &str) -> Result<i64, StoreError> {
        self.int_opt(col)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {col} is NULL")))
    }
}

impl Cols for SqliteRow {
    fn text(&self, col: &str) -> Result<String, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn text_opt(&self, col: &str) -> Result<Option<String>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn int_opt(&self, col: &str) -> Result<Option<i64>, StoreError> {
        Ok(self.try_get(col)?)
    }
    fn flag(&self, col: &str) -> Result<bool, StoreError> {
        Ok(self.try_get(col)?)
    }
}

fn parse<T: std::str::FromStr>(row: &impl Cols, col: &str) -> Result<T, StoreError>
where
    T::Err: std::fmt::Display,
{
    row.text(col)?
        .parse()
        .map_err(|e| StoreError::Corrupt(format!("column {col}: {e}")))
}

fn parse_json<T: serde::de::DeserializeOwned>(row: &impl Cols, col: &str) -> Result<T, StoreError> {
    serde_json::from_str(&row.text(col)?)
        .map_err(|e| StoreError::Corrupt(format!("column {col}: {e}")))
}

fn ts_opt(row: &impl Cols, col: &str) -> Result<Option<Ts>, StoreError> {
    Ok(row.int_opt(col)?.map(from_us))
}

fn ts(row: &impl Cols, col: &str) -> Result<Ts, StoreError> {
    Ok(from_us(row.int(col)?))
}

fn count(row: &impl Cols, col: &str) -> Result<u32, StoreError> {
    let n = row.int(col)?;
    u32::try_from(n).map_err(|_| StoreError::Corrupt(format!("column {col}: {n} is out of range")))
}

/// A decoder's failure as [`StoreError::BadRow`]: the table and the row (its `key` column,
/// text or integer) named, so that a person can find it and `maos repair` can move it aside.
pub(crate) fn in_row<T>(
    table: &'static str,
    key: &str,
    row: &impl Cols,
    decode: impl FnOnce() -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    decode().map_err(|e| match e {
        StoreError::Corrupt(why) => StoreError::BadRow {
            table,
            row: row_key(row, key),
            why,
        },
        other => other,
    })
}

/// A row's key as text for a message: at most 100 characters of it.
pub(crate) fn row_key(row: &impl Cols, key: &str) -> String {
    let text = match row.text_opt(key) {
        Ok(Some(t)) => t,
        _ => match row.int_opt(key) {
            Ok(Some(n)) => n.to_string(),
            _ => "?".into(),
        },
    };
    text.chars().take(100).collect()
}

pub(crate) fn id_of<T>(
    row: &impl Cols,
    col: &str,
    f: fn(&str) -> Result<T, maos_core::IdError>,
) -> Result<T, StoreError> {
    f(&row.text(col)?).map_err(|e| StoreError::Corrupt(e.to_string()))
}

pub(crate) fn id_opt<T>(
    row: &impl Cols,
    col: &str,
    f: fn(&str) -> Result<T, maos_core::IdError>,
) -> Result<Option<T>, StoreError> {
    row.text_opt(col)?
        .map(|s| f(&s))
        .transpose()
        .map_err(|e| StoreError::Corrupt(e.to_string()))
}

/// Which sessions to read whole (row, phases, agents).
#[derive(Clone, Copy)]
enum Which<'a> {
    /// Every session not archived: what the daemon keeps in memory.
    Live,
    /// One session by full id, archived or not.
    One(&'a str),
}

async fn read_sessions(
    conn: &mut SqliteConnection,
    which: Which<'_>,
) -> Result<Vec<SessionRecord>, StoreError> {
    let (sessions_sql, phases_sql, agents_sql, id) = match which {
        Which::Live => (
            "SELECT * FROM sessions WHERE archived = 0 ORDER BY created_at, id",
            "SELECT * FROM phases ORDER BY session_id, idx",
            "SELECT * FROM session_agents ORDER BY created_at, rowid",
            "",
        ),
        Which::One(id) => (
            "SELECT * FROM sessions WHERE id = $1",
            "SELECT * FROM phases WHERE session_id = $1 ORDER BY idx",
            "SELECT * FROM session_agents WHERE session_id = $1 ORDER BY created_at, rowid",
            id,
        ),
    };
    let sessions = sqlx::query(sessions_sql)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    let phases = sqlx::query(phases_sql)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    let agents = sqlx::query(agents_sql)
        .bind(id)
        .fetch_all(&mut *conn)
        .await?;
    assemble(&sessions, &phases, &agents)
}

/// Sessions with their phases (in `idx` order) and agents (in creation order) from their rows,
/// on either engine. Phases and agents of sessions not among `sessions` are left out.
pub(crate) fn assemble<R: Cols>(
    sessions: &[R],
    phases: &[R],
    agents: &[R],
) -> Result<Vec<SessionRecord>, StoreError> {
    let mut out = Vec::with_capacity(sessions.len());
    let mut index = HashMap::new();
    for row in sessions {
        let rec = in_row("sessions", "id", row, || session_from_row(row))?;
        index.insert(rec.id.clone(), out.len());
        out.push(rec);
    }
    for row in phases {
        let sid = in_row("phases", "session_id", row, || {
            id_of(row, "session_id", SessionId::parse)
        })?;
        let Some(&i) = index.get(&sid) else { continue };
        let phase = in_row("phases", "session_id", row, || phase_from_row(row))?;
        out[i].workflow.phases.push(phase);
    }
    for row in agents {
        let agent = in_row("session_agents", "id", row, || {
            let sid = id_of(row, "session_id", SessionId::parse)?;
            Ok(index.get(&sid).map(|&i| (i, sid)))
        })?;
        let Some((i, sid)) = agent else { continue };
        let agent = in_row("session_agents", "id", row, || agent_from_row(row, sid))?;
        out[i].agents.push(agent);
    }
    Ok(out)
}

pub(crate) fn session_from_row(row: &impl Cols) -> Result<SessionRecord, StoreError> {
    let data: SessionData = parse_json(row, "data")?;
    Ok(SessionRecord {
        id: id_of(row, "id", SessionId::parse)?,
        objective: row.text("objective")?,
        state: parse(row, "state")?,
        strategy: parse(row, "strategy")?,
        active: row.flag("active")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        started_at: ts_opt(row, "started_at")?,
        ended_at: ts_opt(row, "ended_at")?,
        workflow: Workflow {
            phases: Vec::new(),
            completed_at: ts_opt(row, "workflow_completed_at")?,
        },
        paused_phases: parse_json(row, "paused_phases")?,
        pause: row
            .text_opt("pause")?
            .map(|p| serde_json::from_str(&p))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("column pause: {e}")))?,
        resume_count: count(row, "resume_count")?,
        errors: parse_json(row, "errors")?,
        notes: data.notes,
        policy: data.policy,
        agents: Vec::new(),
        context: data.context,
        todos: data.todos,
        by_hooks: data.by_hooks,
    })
}

pub(crate) fn phase_from_row(row: &impl Cols) -> Result<Phase, StoreError> {
    Ok(Phase {
        name: row.text("name")?,
        state: parse(row, "state")?,
        attempts: count(row, "attempts")?,
        started_at: ts_opt(row, "started_at")?,
        ended_at: ts_opt(row, "ended_at")?,
        result: row
            .text_opt("result")?
            .map(|r| serde_json::from_value(serde_json::Value::String(r)))
            .transpose()
            .map_err(|e| StoreError::Corrupt(format!("column result: {e}")))?,
        artifacts: parse_json(row, "artifacts")?,
        handoff: parse_json(row, "handoff")?,
    })
}

pub(crate) fn agent_from_row(
    row: &impl Cols,
    session_id: SessionId,
) -> Result<AgentRecord, StoreError> {
    let data: AgentData = parse_json(row, "data")?;
    Ok(AgentRecord {
        id: id_of(row, "id", AgentId::parse)?,
        session_id,
        role: row.text("role")?,
        instance: count(row, "instance")?,
        task: row.text("task")?,
        state: parse(row, "state")?,
        paused: row.flag("paused")?,
        parent: id_opt(row, "parent_id", AgentId::parse)?,
        depends_on: parse_json(row, "depends_on")?,
        created_at: ts(row, "created_at")?,
        updated_at: ts(row, "updated_at")?,
        started_at: ts_opt(row, "started_at")?,
        ended_at: ts_opt(row, "ended_at")?,
        exit_code: row
            .int_opt("exit_code")?
            .map(|c| {
                i32::try_from(c).map_err(|_| StoreError::Corrupt(format!("column exit_code: {c}")))
            })
            .transpose()?,
        external_session_id: row.text_opt("external_session_id")?,
        external_agent_id: row.text_opt("external_agent_id")?,
        spec: data.spec,
        process: data.process,
        attempts: data.attempts,
        pause: data.pause,
        cli: data.cli,
        tool_use_id: data.tool_use_id,
        window: data.window,
        machine: data.machine,
        held: data.held,
    })
}

/// A held lock and its lease length (µs) from its row, on either engine.
pub(crate) fn lock_from_row(row: &impl Cols) -> Result<(HeldLock, i64), StoreError> {
    in_row("locks", "token", row, || {
        let token = u64::try_from(row.int("token")?)
            .map_err(|_| StoreError::Corrupt("column token is negative".into()))?;
        let lock = HeldLock {
            path: maos_core::LockPath::new(&row.text("path")?)
                .map_err(|e| StoreError::Corrupt(format!("lock path: {e}")))?,
            mode: parse(row, "mode")?,
            holder: id_of(row, "holder_id", AgentId::parse)?,
            token,
            acquired_at: ts(row, "acquired_at")?,
            expires_at: ts(row, "expires_at")?,
        };
        Ok((lock, row.int("ttl_us")?))
    })
}

/// Another daemon's lock wait from its `lock_waits` row, under its fleet-wide `key`.
pub(crate) fn foreign_wait_from_row(
    row: &impl Cols,
    key: String,
) -> Result<maos_core::ForeignWait, StoreError> {
    in_row("lock_waits", "agent_id", row, || {
        Ok(maos_core::ForeignWait {
            key,
            holder: id_of(row, "agent_id", AgentId::parse)?,
            born: ts(row, "born")?,
            path: maos_core::LockPath::new(&row.text("path")?)
                .map_err(|e| StoreError::Corrupt(format!("wait path: {e}")))?,
            mode: parse(row, "mode")?,
            since: ts(row, "since")?,
            deadline: row.int_opt("deadline")?.map(from_us),
            lapse: ts(row, "lease_until")?,
        })
    })
}

/// A checkpoint from its row (`session_id, seq, ts, reason, state`), on either engine.
pub(crate) fn checkpoint_from_row(row: &impl Cols) -> Result<crate::CheckpointRow, StoreError> {
    in_row("checkpoints", "session_id", row, || {
        Ok(crate::CheckpointRow {
            session_id: id_of(row, "session_id", SessionId::parse)?,
            seq: row.int("seq")?.max(0) as u64,
            ts: ts(row, "ts")?,
            reason: row.text("reason")?,
            state: row.text("state")?,
        })
    })
}

/// The latest checkpoint time of a session from its row (`session_id, ts`).
pub(crate) fn checkpointed_from_row(row: &impl Cols) -> Result<(SessionId, Ts), StoreError> {
    in_row("checkpoints", "session_id", row, || {
        Ok((id_of(row, "session_id", SessionId::parse)?, ts(row, "ts")?))
    })
}

/// A finished session's line of `maos history` from its row, on either engine.
pub(crate) fn history_from_row(
    row: &impl Cols,
) -> Result<maos_core::record::HistoryEntry, StoreError> {
    in_row("sessions", "id", row, || {
        Ok(maos_core::record::HistoryEntry {
            id: id_of(row, "id", SessionId::parse)?,
            objective: row.text("objective")?,
            state: parse(row, "state")?,
            strategy: parse(row, "strategy")?,
            created_at: ts(row, "created_at")?,
            started_at: ts_opt(row, "started_at")?,
            ended_at: ts_opt(row, "ended_at")?,
            agents: u32::try_from(row.int("agents")?).unwrap_or(u32::MAX),
            archived: row.flag("archived")?,
        })
    })
}

/// An event from its row (`seq, ts, session_id, agent_id, type, data`), on either engine.
pub(crate) fn event_from_row(row: &impl Cols) -> Result<EventRecord, StoreError> {
    in_row("session_events", "seq", row, || {
        Ok(EventRecord {
            seq: row.int("seq")?.max(0) as u64,
            ts: ts(row, "ts")?,
            session_id: id_opt(row, "session_id", SessionId::parse)?,
            agent_id: id_opt(row, "agent_id", AgentId::parse)?,
            kind: row.text("type")?,
            data: parse_json(row, "data")?,
        })
    })
}

/// The project as committed, and the fencing-token bound as stored (see [`load_locks`]).
pub(crate) async fn load(conn: &mut SqliteConnection) -> Result<(Loaded, u64), StoreError> {
    let sessions = read_sessions(conn, Which::Live).await?;
    let last: Option<i64> = sqlx::query_scalar("SELECT max(seq) FROM session_events")
        .fetch_one(&mut *conn)
        .await?;
    let (locks, next_token, bound) = load_locks(conn).await?;
    let mut checkpointed = Vec::new();
    for row in sqlx::query("SELECT session_id, max(ts) AS ts FROM checkpoints GROUP BY session_id")
        .fetch_all(&mut *conn)
        .await?
    {
        checkpointed.push(checkpointed_from_row(&row)?);
    }
    let loaded = Loaded {
        sessions,
        last_seq: last.unwrap_or(0).max(0) as u64,
        locks,
        next_token,
        checkpointed,
    };
    Ok((loaded, bound))
}

pub(crate) async fn checkpoints(
    conn: &mut SqliteConnection,
    session: &str,
) -> Result<Vec<crate::CheckpointRow>, StoreError> {
    let rows = sqlx::query(
        "SELECT session_id, seq, ts, reason, state FROM checkpoints WHERE session_id = $1 ORDER BY id",
    )
    .bind(session)
    .fetch_all(&mut *conn)
    .await?;
    rows.iter().map(checkpoint_from_row).collect()
}

/// Every session id in the database, archived ones included (to resolve a prefix).
pub(crate) async fn session_ids(pool: &SqlitePool) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar("SELECT id FROM sessions")
        .fetch_all(pool)
        .await?)
}

/// Which of these ids the database already has (sessions and agents, archived included).
pub(crate) async fn existing(
    pool: &SqlitePool,
    session: &str,
    agents: &[String],
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM sessions WHERE id = $1
         UNION ALL SELECT id FROM session_agents WHERE id IN (SELECT value FROM json_each($2))",
    )
    .bind(session)
    .bind(json(agents)?)
    .fetch_all(pool)
    .await?)
}

/// One session with its timeline and checkpoints, archived or not; None if there is none.
pub(crate) async fn export(
    pool: &SqlitePool,
    session: &str,
) -> Result<Option<maos_core::export::SessionExport>, StoreError> {
    let mut conn = pool.acquire().await?;
    let Some(rec) = read_sessions(&mut conn, Which::One(session)).await?.pop() else {
        return Ok(None);
    };
    let events = events(
        pool,
        &crate::EventQuery {
            session_id: Some(session.to_string()),
            ..Default::default()
        },
    )
    .await?;
    let checkpoints = checkpoints(&mut conn, session).await?;
    export_of(rec, events, checkpoints).map(Some)
}

/// `maos export`'s file of a session, its timeline and its checkpoints.
pub(crate) fn export_of(
    session: SessionRecord,
    events: Vec<EventRecord>,
    checkpoints: Vec<crate::CheckpointRow>,
) -> Result<maos_core::export::SessionExport, StoreError> {
    let checkpoints = checkpoints
        .into_iter()
        .map(|c| {
            Ok(maos_core::export::ExportedCheckpoint {
                seq: c.seq,
                ts: c.ts,
                reason: c.reason,
                state: serde_json::from_str(&c.state)
                    .map_err(|e| StoreError::Corrupt(format!("checkpoint state: {e}")))?,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
    Ok(maos_core::export::SessionExport {
        format: maos_core::export::FORMAT.into(),
        version: maos_core::export::VERSION,
        exported_at: chrono::Utc::now(),
        session,
        events,
        checkpoints,
    })
}

/// Finished sessions (archived or not) that ended before `before_us`, oldest first.
pub(crate) async fn gc_candidates(
    pool: &SqlitePool,
    before_us: i64,
) -> Result<Vec<String>, StoreError> {
    Ok(sqlx::query_scalar(
        "SELECT id FROM sessions WHERE state IN ('completed', 'failed', 'cancelled')
         AND coalesce(ended_at, updated_at) < $1 ORDER BY coalesce(ended_at, updated_at), id",
    )
    .bind(before_us)
    .fetch_all(pool)
    .await?)
}

pub(crate) async fn history(
    pool: &SqlitePool,
    limit: Option<u32>,
) -> Result<Vec<maos_core::record::HistoryEntry>, StoreError> {
    let rows = sqlx::query(
        "SELECT s.id, s.objective, s.state, s.strategy, s.created_at, s.started_at, s.ended_at,
            s.archived, (SELECT count(*) FROM session_agents a WHERE a.session_id = s.id) AS agents
         FROM sessions s WHERE s.state IN ('completed', 'failed', 'cancelled')
         ORDER BY coalesce(s.ended_at, s.updated_at) DESC, s.created_at DESC, s.id
         LIMIT $1",
    )
    .bind(limit.map_or(-1, i64::from))
    .fetch_all(pool)
    .await?;
    rows.iter().map(history_from_row).collect()
}

/// How an engine spells what the event filters need.
pub(crate) struct Dialect {
    /// `data`'s field, as text (a JSON string unquoted, an array as its JSON text).
    pub field: fn(&str) -> String,
    /// The 1-based position of the second text in the first, 0 when absent.
    pub position: &'static str,
    /// `data` as text.
    pub data_text: &'static str,
}

pub(crate) const SQLITE: Dialect = Dialect {
    field: |f| format!("json_extract(data, '$.{f}')"),
    position: "instr",
    data_text: "data",
};

/// The filters of `q` after a `WHERE` clause, then its order and limit, on either engine.
pub(crate) fn push_event_filters<'a, DB: sqlx::Database>(
    b: &mut QueryBuilder<'a, DB>,
    q: &EventQuery,
    d: &Dialect,
) where
    String: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
    i64: sqlx::Encode<'a, DB> + sqlx::Type<DB>,
{
    if let Some(s) = &q.session_id {
        b.push(" AND session_id = ").push_bind(s.clone());
    }
    if let Some(a) = &q.agent_id {
        b.push(" AND agent_id = ").push_bind(a.clone());
    }
    if !q.types.is_empty() {
        b.push(" AND type IN (");
        let mut sep = b.separated(", ");
        for t in &q.types {
            sep.push_bind(t.clone());
        }
        b.push(")");
    }
    if let Some(since) = q.since_us {
        b.push(" AND ts >= ").push_bind(since);
    }
    if let Some(after) = q.after_seq {
        b.push(" AND seq > ")
            .push_bind(i64::try_from(after).unwrap_or(i64::MAX));
    }
    if let Some(before) = q.before_seq {
        b.push(" AND seq < ")
            .push_bind(i64::try_from(before).unwrap_or(i64::MAX));
    }
    if let Some(until) = q.until_us {
        b.push(" AND ts < ").push_bind(until);
    }
    // An event about one of `paths`: as `maos_core::events::path_matches` decides it for live
    // events, for each.
    let mut about = |paths: &[String]| {
        let mut sep = " AND (";
        for path in paths {
            for field in ["path", "paths", "cycle"] {
                b.push(format!(
                    "{sep}{}(COALESCE({}, ''), ",
                    d.position,
                    (d.field)(field)
                ))
                .push_bind(path.clone())
                .push(") > 0");
                sep = " OR ";
            }
        }
        b.push(")");
    };
    if let Some(path) = &q.path {
        about(std::slice::from_ref(path));
    }
    if !q.paths.is_empty() {
        about(&q.paths);
    }
    if let Some(text) = &q.text {
        b.push(format!(
            " AND {}(lower(type || ' ' || {}), ",
            d.position, d.data_text
        ))
        .push_bind(text.to_ascii_lowercase())
        .push(") > 0");
    }
    match (q.limit, q.oldest_first) {
        (Some(n), false) => b.push(" ORDER BY seq DESC LIMIT ").push_bind(i64::from(n)),
        (Some(n), true) => b.push(" ORDER BY seq ASC LIMIT ").push_bind(i64::from(n)),
        (None, _) => b.push(" ORDER BY seq ASC"),
    };
}

pub(crate) async fn events(
    pool: &SqlitePool,
    q: &EventQuery,
) -> Result<Vec<EventRecord>, StoreError> {
    let mut b: QueryBuilder<Sqlite> = QueryBuilder::new(
        "SELECT seq, ts, session_id, agent_id, type, data FROM session_events WHERE 1=1",
    );
    push_event_filters(&mut b, q, &SQLITE);
    let rows = b.build().fetch_all(pool).await?;
    let mut out = rows
        .iter()
        .map(event_from_row)
        .collect::<Result<Vec<_>, _>>()?;
    if q.limit.is_some() && !q.oldest_first {
        out.reverse();
    }
    Ok(out)
}

/// How many arguments ([`BatchArgs::values`]) the statements of a SQLite batch's parts take.
pub(crate) const ARGUMENTS: usize = 8;

/// A batch's arguments, owned (a pooled commit takes them to another thread): `$N` of a
/// [`Part`]'s statements is `values[N - 1]`, and `shape` has the bit of every part that runs;
/// `rows` are bound one by one at [`Part::Rows`].
pub(crate) struct BatchArgs {
    pub shape: u16,
    pub values: [Value; ARGUMENTS],
    pub rows: Vec<BatchRow>,
}

impl BatchArgs {
    /// Whether `part` runs.
    pub(crate) fn runs(&self, part: Part) -> bool {
        self.shape & part.bit() != 0
    }

    /// Whether a part that may be long runs ([`Part::long`]).
    pub(crate) fn long(&self) -> bool {
        Part::ALL.iter().any(|&p| p.long() && self.runs(p))
    }

    pub(crate) fn bytes(&self) -> usize {
        let size = |v: &Value| match v {
            Value::Text(t) => t.len(),
            Value::Blob(b) => b.len(),
            _ => 8,
        };
        let rows = self.rows.iter().flat_map(BatchRow::values);
        self.values.iter().chain(rows).map(size).sum()
    }
}

#[cfg(test)]
mod tests {
    use super::Part;

    /// [`Part::ALL`] lists every part once, in the order of their declaration (a part's bit in
    /// a batch's shape is its place), ending with the last.
    #[test]
    fn every_part_is_listed_once_in_the_order_it_runs() {
        for (i, part) in Part::ALL.into_iter().enumerate() {
            assert_eq!(part as usize, i, "{part:?}");
        }
        assert_eq!(Part::ALL.last(), Some(&Part::Purge));
    }
}
