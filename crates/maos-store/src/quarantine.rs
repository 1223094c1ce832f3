//! `maos repair --quarantine`: rows a project's database holds that maos cannot read (an id
//! that is not one, a JSON column that does not parse, ...) keep the whole project from
//! loading. This finds them with the same decoders the daemon loads with, saves every row of
//! each session they belong to in a file, and deletes those rows in one transaction, so the
//! project loads again with everything else as it was. SQLite only; the daemon runs it while
//! the project is closed.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_core::{AgentId, SessionId};
use serde_json::{Value, json};
use sqlx::sqlite::{SqliteConnectOptions, SqliteConnection, SqliteRow};
use sqlx::{ConnectOptions, Connection, Row};

use crate::StoreError;
use crate::rows::{self, Cols};

/// The tables a project's rows live in, each with the column that names its session (NULL
/// allowed in `session_events` only) and the column that names a row in a message.
const TABLES: [(&str, &str, &str); 6] = [
    ("sessions", "id", "id"),
    ("phases", "session_id", "session_id"),
    ("session_agents", "session_id", "id"),
    ("locks", "session_id", "token"),
    ("checkpoints", "session_id", "id"),
    ("session_events", "session_id", "seq"),
];

/// One row that does not decode.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct BadRow {
    pub table: String,
    pub row: String,
    pub why: String,
}

/// What a quarantine moved aside.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Quarantined {
    /// Each row that did not decode.
    pub bad: Vec<BadRow>,
    /// The sessions (as their rows name them) whose rows were all moved.
    pub sessions: Vec<String>,
    /// How many rows were moved, in every table.
    pub rows: u64,
    /// The file that holds them.
    pub file: PathBuf,
}

/// Whether a row of `table` decodes as the daemon reads it.
fn check(table: &str, row: &SqliteRow) -> Result<(), StoreError> {
    match table {
        "sessions" => rows::session_from_row(row).map(drop),
        "phases" => {
            rows::id_of(row, "session_id", SessionId::parse)?;
            rows::phase_from_row(row).map(drop)
        }
        "session_agents" => {
            let sid = rows::id_of(row, "session_id", SessionId::parse)?;
            rows::agent_from_row(row, sid).map(drop)
        }
        "locks" => {
            rows::id_of(row, "session_id", SessionId::parse)?;
            rows::id_of(row, "holder_id", AgentId::parse)?;
            rows::lock_from_row(row).map(drop)
        }
        "checkpoints" => rows::checkpoint_from_row(row).map(drop),
        _ => rows::event_from_row(row).map(drop),
    }
}

/// The reason of a failed decode, without the table and row (the report names them).
fn why(e: StoreError) -> String {
    match e {
        StoreError::BadRow { why, .. } | StoreError::Corrupt(why) => why,
        other => other.to_string(),
    }
}

async fn connect(db: &Path) -> Result<SqliteConnection, StoreError> {
    SqliteConnectOptions::new()
        .filename(db)
        .busy_timeout(Duration::from_secs(5))
        .foreign_keys(false)
        .connect()
        .await
        .map_err(|source| StoreError::Open {
            path: db.display().to_string(),
            source,
        })
}

/// Find the rows of the database at `db` that do not decode; with `dir`, move every row of
/// their sessions (and each bad row that names no session) into a new file in `dir`
/// (`quarantine-<time>.json`, mode 0600, written and synced before anything is deleted) and
/// delete them. None when every row decodes.
pub async fn quarantine(
    db: &Path,
    dir: Option<&Path>,
    now: maos_core::Ts,
) -> Result<Option<Quarantined>, StoreError> {
    let mut conn = connect(db).await?;
    let mut bad = Vec::new();
    let mut sessions = BTreeSet::new();
    // Bad rows that name no session: (table, rowid).
    let mut loose: Vec<(&str, i64)> = Vec::new();
    for (table, session_col, key) in TABLES {
        let sql = format!("SELECT *, rowid AS maos_rowid FROM {table}");
        for row in sqlx::query(&sql).fetch_all(&mut conn).await? {
            let Err(e) = check(table, &row) else { continue };
            bad.push(BadRow {
                table: table.to_string(),
                row: rows::row_key(&row, key),
                why: why(e),
            });
            match row.text_opt(session_col).ok().flatten() {
                Some(s) => {
                    sessions.insert(s);
                }
                None => loose.push((table, row.try_get("maos_rowid")?)),
            }
        }
    }
    if bad.is_empty() {
        return Ok(None);
    }
    let sessions: Vec<String> = sessions.into_iter().collect();
    let Some(dir) = dir else {
        return Ok(Some(Quarantined {
            bad,
            sessions,
            rows: 0,
            file: PathBuf::new(),
        }));
    };
    let session_list = crate::rows::json(&sessions)?;
    let mut saved = serde_json::Map::new();
    let mut moved = 0u64;
    let mut tx = conn.begin().await?;
    for (table, session_col, _) in TABLES {
        let rowids: Vec<i64> = loose
            .iter()
            .filter(|(t, _)| *t == table)
            .map(|(_, r)| *r)
            .collect();
        let cols: Vec<String> =
            sqlx::query_scalar("SELECT name FROM pragma_table_info($1) ORDER BY cid")
                .bind(table)
                .fetch_all(&mut *tx)
                .await?;
        let object = cols
            .iter()
            .map(|c| format!("'{c}', \"{c}\""))
            .collect::<Vec<_>>()
            .join(", ");
        let which = format!(
            "{session_col} IN (SELECT value FROM json_each($1)) \
             OR rowid IN (SELECT value FROM json_each($2))"
        );
        let found: Vec<String> = sqlx::query_scalar(&format!(
            "SELECT json_object({object}) FROM {table} WHERE {which}"
        ))
        .bind(&session_list)
        .bind(crate::rows::json(&rowids)?)
        .fetch_all(&mut *tx)
        .await?;
        let found: Vec<Value> = found
            .iter()
            .map(|t| serde_json::from_str(t).unwrap_or(Value::String(t.clone())))
            .collect();
        moved += found.len() as u64;
        saved.insert(table.to_string(), Value::Array(found));
        sqlx::query(&format!("DELETE FROM {table} WHERE {which}"))
            .bind(&session_list)
            .bind(crate::rows::json(&rowids)?)
            .execute(&mut *tx)
            .await?;
    }
    let file = dir.join(format!(
        "quarantine-{}.json",
        now.format("%Y%m%dT%H%M%S%.6fZ")
    ));
    let doc = json!({
        "format": "maos-quarantine",
        "at": now,
        "database": db.display().to_string(),
        "bad_rows": bad.iter().map(|b| json!({"table": b.table, "row": b.row, "why": b.why})).collect::<Vec<_>>(),
        "sessions": sessions,
        "rows": saved,
    });
    write_synced(&file, &doc).map_err(|e| StoreError::Open {
        path: file.display().to_string(),
        source: sqlx::Error::Io(e),
    })?;
    tx.commit().await?;
    conn.close().await?;
    Ok(Some(Quarantined {
        bad,
        sessions,
        rows: moved,
        file,
    }))
}

/// Write `doc` to a new file readable by its owner only, synced, with its directory.
fn write_synced(path: &Path, doc: &Value) -> std::io::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let dir = path.parent().unwrap_or(Path::new("."));
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)?;
    f.write_all(serde_json::to_string_pretty(doc)?.as_bytes())?;
    f.sync_all()?;
    std::fs::File::open(dir)?.sync_all()
}
