//! The conflict radar's reports in a fleet (issue 35; `migrations/postgres/0004_radar.sql`):
//! each daemon writes what the other machines' radars need of its agents' worktrees (a base
//! commit and the changed files' contents) and reads theirs. A daemon writes only its own rows;
//! what it reads of another daemon's is returned as it is stored, for the caller to check
//! (`maos_core::radar::check_report`) before it uses any of it: sizes are read as
//! `octet_length`, so a huge content is never fetched before the check refuses it.

use maos_core::radar::{FleetFile, FleetTree, check_text};
use maos_core::text::clip;
use sqlx::Row;

use crate::StoreError;
use crate::pg::{Fleet, unreachable};

/// How long since its last heartbeat a daemon's reports still count (three of its 30 s
/// heartbeats, as `daemon status` counts it running).
const LIVE_US: i64 = 90_000_000;
/// The most characters of another daemon's texts read (a daemon id, a machine, a worktree, a
/// path, a reason): one more than `check_report` takes, so that a longer one is refused, not
/// fetched whole.
const TEXT_READ: i32 = maos_core::radar::FLEET_TEXT_MAX as i32 + 1;
/// The most agents of a report read: one more than `check_report` takes.
const AGENTS_READ: i64 = maos_core::radar::FLEET_AGENTS_MAX as i64 + 1;

/// Another daemon's report of one worktree, as its row holds it: who and which version.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RadarVersion {
    pub daemon: String,
    pub worktree: String,
    pub version: i64,
}

impl Fleet {
    /// Writes this daemon's report of `t.worktree` in project `key` (its `daemon` and `version`
    /// fields are ignored: the row gets this daemon's id and a new version). Files absent from
    /// `t.files` leave the report; a listed file is written when it has content, is deleted
    /// (mode 0) or the report is too large (named only); one with `content: None` otherwise
    /// is unchanged since this daemon last wrote it, and kept as stored.
    pub async fn radar_publish(&self, key: &str, t: &FleetTree) -> Result<(), StoreError> {
        self.join().await.map_err(|e| unreachable(self.url(), e))?;
        let agents = serde_json::to_string(&t.agents).unwrap_or_else(|_| "[]".into());
        let paths: Vec<&str> = t.files.iter().map(|f| f.path.as_str()).collect();
        let written: Vec<&FleetFile> = t
            .files
            .iter()
            .filter(|f| f.content.is_some() || f.mode == 0 || t.too_large.is_some())
            .collect();
        let mut tx = self.pool().begin().await?;
        sqlx::query(
            "INSERT INTO radar_worktrees (project, daemon, worktree, machine, agents, base,
                 too_large, version, updated_at)
             VALUES ($1, $2, $3, $4, $5::jsonb, $6, $7, nextval('maos_radar_version'),
                 maos_now_us())
             ON CONFLICT (project, daemon, worktree) DO UPDATE SET machine = excluded.machine,
                 agents = excluded.agents, base = excluded.base, too_large = excluded.too_large,
                 version = excluded.version, updated_at = excluded.updated_at",
        )
        .bind(key)
        .bind(self.daemon())
        .bind(&t.worktree)
        .bind(self.machine())
        .bind(&agents)
        .bind(&t.base)
        .bind(&t.too_large)
        .execute(&mut *tx)
        .await?;
        sqlx::query(
            "DELETE FROM radar_files WHERE project = $1 AND daemon = $2 AND worktree = $3
                 AND NOT (path = ANY ($4))",
        )
        .bind(key)
        .bind(self.daemon())
        .bind(&t.worktree)
        .bind(&paths)
        .execute(&mut *tx)
        .await?;
        if !written.is_empty() {
            let path: Vec<&str> = written.iter().map(|f| f.path.as_str()).collect();
            let mode: Vec<i32> = written.iter().map(|f| f.mode as i32).collect();
            let blob: Vec<&str> = written.iter().map(|f| f.blob.as_str()).collect();
            let size: Vec<i64> = written
                .iter()
                .map(|f| i64::try_from(f.size).unwrap_or(i64::MAX))
                .collect();
            let content: Vec<Option<&[u8]>> =
                written.iter().map(|f| f.content.as_deref()).collect();
            sqlx::query(
                "INSERT INTO radar_files (project, daemon, worktree, path, mode, blob, size, content)
                 SELECT $1, $2, $3, f.path, f.mode, f.blob, f.size, f.content
                 FROM UNNEST($4::text[], $5::int[], $6::text[], $7::bigint[], $8::bytea[])
                     AS f (path, mode, blob, size, content)
                 ON CONFLICT (project, daemon, worktree, path) DO UPDATE SET mode = excluded.mode,
                     blob = excluded.blob, size = excluded.size, content = excluded.content",
            )
            .bind(key)
            .bind(self.daemon())
            .bind(&t.worktree)
            .bind(&path)
            .bind(&mode)
            .bind(&blob)
            .bind(&size)
            .bind(&content)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// Takes this daemon's report of `worktree` (`None`: of every worktree) in project `key`
    /// out of the fleet.
    pub async fn radar_withdraw(
        &self,
        key: &str,
        worktree: Option<&str>,
    ) -> Result<(), StoreError> {
        self.join().await.map_err(|e| unreachable(self.url(), e))?;
        let mut tx = self.pool().begin().await?;
        for table in ["radar_files", "radar_worktrees"] {
            sqlx::query(&format!(
                "DELETE FROM {table} WHERE project = $1 AND daemon = $2
                     AND ($3::text IS NULL OR worktree = $3)"
            ))
            .bind(key)
            .bind(self.daemon())
            .bind(worktree)
            .execute(&mut *tx)
            .await?;
        }
        tx.commit().await?;
        Ok(())
    }

    /// The other live daemons' reports in project `key` (a daemon silent for 90 s is not
    /// counted), by version. Their daemon ids and worktrees come from those daemons' rows:
    /// read cut just past [`maos_core::radar::FLEET_TEXT_MAX`] and checked as a report's
    /// texts are (`check_text`); a report named by one too long, empty or holding a control
    /// character is skipped (a debug line shows it cut, escaped), so that no text of any
    /// length is fetched whole or names a row or a file here.
    pub async fn radar_versions(&self, key: &str) -> Result<Vec<RadarVersion>, StoreError> {
        self.join().await.map_err(|e| unreachable(self.url(), e))?;
        let rows = sqlx::query(
            "SELECT left(r.daemon, $4) AS daemon, left(r.worktree, $4) AS worktree, r.version
             FROM radar_worktrees r
                 JOIN daemons d ON d.id = r.daemon
             WHERE r.project = $1 AND r.daemon <> $2 AND d.last_seen > maos_now_us() - $3
             ORDER BY r.daemon, r.worktree LIMIT 1000",
        )
        .bind(key)
        .bind(self.daemon())
        .bind(LIVE_US)
        .bind(TEXT_READ)
        .fetch_all(self.pool())
        .await?;
        let mut out = Vec::with_capacity(rows.len());
        for r in &rows {
            let v = RadarVersion {
                daemon: r.try_get("daemon")?,
                worktree: r.try_get("worktree")?,
                version: r.try_get("version")?,
            };
            let checked = check_text("daemon id", &v.daemon)
                .and_then(|()| check_text("worktree", &v.worktree));
            match checked {
                Ok(()) => out.push(v),
                Err(why) => tracing::debug!(
                    daemon = ?clip(&v.daemon, 100),
                    worktree = ?clip(&v.worktree, 100),
                    reason = %why,
                    "another daemon's radar report is skipped"
                ),
            }
        }
        Ok(out)
    }

    /// Another daemon's report of one worktree without its files' contents (each file's
    /// `stored` is what PostgreSQL holds of it); `None` when gone. Read in one statement, so
    /// one snapshot: a report rewritten meanwhile is read as it was or as it is, never half of
    /// each. At most one file more than the cap is read, so that a report listing too many is
    /// seen as such, and its texts are cut just past what `check_report` takes, so that one of
    /// any length is refused without being fetched whole.
    pub async fn radar_report(
        &self,
        key: &str,
        daemon: &str,
        worktree: &str,
    ) -> Result<Option<FleetTree>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT left(w.machine, $5) AS machine, left(w.base, 65) AS base,
                 left(w.too_large, $5) AS too_large, w.version,
                 CASE WHEN jsonb_typeof(w.agents) = 'array'
                     THEN ARRAY(SELECT left(a, 100) FROM jsonb_array_elements_text(w.agents) a
                         LIMIT $6)
                     ELSE ARRAY[left(w.agents::text, 100)] END AS agents,
                 f.paths, f.modes, f.blobs, f.sizes, f.stored
             FROM radar_worktrees w
             LEFT JOIN LATERAL (
                 SELECT array_agg(path ORDER BY path) AS paths,
                     array_agg(mode ORDER BY path) AS modes,
                     array_agg(blob ORDER BY path) AS blobs,
                     array_agg(size ORDER BY path) AS sizes,
                     array_agg(stored ORDER BY path) AS stored
                 FROM (SELECT left(path, $5) AS path, mode, left(blob, 65) AS blob, size,
                         coalesce(octet_length(content), 0)::bigint AS stored
                     FROM radar_files f
                     WHERE f.project = w.project AND f.daemon = w.daemon
                         AND f.worktree = w.worktree
                     ORDER BY f.path LIMIT $4) l
             ) f ON true
             WHERE w.project = $1 AND w.daemon = $2 AND w.worktree = $3",
        )
        .bind(key)
        .bind(daemon)
        .bind(worktree)
        .bind(maos_core::radar::FLEET_FILES_MAX as i64 + 1)
        .bind(TEXT_READ)
        .bind(AGENTS_READ)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(None);
        };
        let paths: Vec<String> = row.try_get::<Option<_>, _>("paths")?.unwrap_or_default();
        let modes: Vec<i32> = row.try_get::<Option<_>, _>("modes")?.unwrap_or_default();
        let blobs: Vec<String> = row.try_get::<Option<_>, _>("blobs")?.unwrap_or_default();
        let sizes: Vec<i64> = row.try_get::<Option<_>, _>("sizes")?.unwrap_or_default();
        let stored: Vec<i64> = row.try_get::<Option<_>, _>("stored")?.unwrap_or_default();
        let files = paths
            .into_iter()
            .zip(modes)
            .zip(blobs)
            .zip(sizes.into_iter().zip(stored))
            .map(|(((path, mode), blob), (size, stored))| FleetFile {
                path,
                mode: u32::try_from(mode).unwrap_or(u32::MAX),
                blob,
                size: u64::try_from(size).unwrap_or(u64::MAX),
                stored: u64::try_from(stored).unwrap_or(u64::MAX),
                content: None,
            })
            .collect();
        Ok(Some(FleetTree {
            daemon: daemon.to_string(),
            machine: row.try_get("machine")?,
            worktree: worktree.to_string(),
            agents: row.try_get("agents")?,
            base: row.try_get("base")?,
            too_large: row.try_get("too_large")?,
            files,
            version: row.try_get("version")?,
        }))
    }

    /// The contents of `files` (a checked report's, as [`Fleet::radar_report`] read them) in
    /// another daemon's report, in one statement: a row gives its content only while it still
    /// holds the blob and the size the report said, and its content is that many bytes (a file
    /// rewritten since is absent, never another version's bytes). So what is fetched is at
    /// most the sizes asked for, whatever the rows hold, and those are bounded here: at most
    /// [`maos_core::radar::FLEET_TREE_CAP`] together (`check_report` keeps a report within
    /// it), more is refused before any query.
    pub async fn radar_contents(
        &self,
        key: &str,
        daemon: &str,
        worktree: &str,
        files: &[&FleetFile],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let cap = maos_core::radar::FLEET_TREE_CAP;
        let asked = files.iter().fold(0u64, |n, f| n.saturating_add(f.size));
        if asked > cap {
            return Err(StoreError::Unsupported(format!(
                "too large to compare: the contents asked for hold {asked} bytes (at most {cap})"
            )));
        }
        let path: Vec<&str> = files.iter().map(|f| f.path.as_str()).collect();
        let blob: Vec<&str> = files.iter().map(|f| f.blob.as_str()).collect();
        let size: Vec<i64> = files
            .iter()
            .map(|f| i64::try_from(f.size).unwrap_or(i64::MAX))
            .collect();
        let rows = sqlx::query(
            "SELECT f.path, coalesce(f.content, ''::bytea) AS content
             FROM radar_files f
                 JOIN UNNEST($4::text[], $5::text[], $6::bigint[]) AS w (path, blob, size)
                     ON f.path = w.path AND f.blob = w.blob AND f.size = w.size
             WHERE f.project = $1 AND f.daemon = $2 AND f.worktree = $3
                 AND octet_length(coalesce(f.content, ''::bytea)) = w.size",
        )
        .bind(key)
        .bind(daemon)
        .bind(worktree)
        .bind(&path)
        .bind(&blob)
        .bind(&size)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("path")?, r.try_get("content")?)))
            .collect()
    }
}
