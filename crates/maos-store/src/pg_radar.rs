//! The conflict radar's reports in a fleet (issue 35; `migrations/postgres/0004_radar.sql`):
//! each daemon writes what the other machines' radars need of its agents' worktrees (a base
//! commit and the changed files' contents) and reads theirs. A daemon writes only its own rows;
//! what it reads of another daemon's is returned as it is stored, for the caller to check
//! (`maos_core::radar::check_report`) before it uses any of it: sizes are read as
//! `octet_length`, so a huge content is never fetched before the check refuses it.

use maos_core::radar::{FleetFile, FleetTree};
use sqlx::Row;

use crate::StoreError;
use crate::pg::{Fleet, unreachable};

/// How long since its last heartbeat a daemon's reports still count (three of its 30 s
/// heartbeats, as `daemon status` counts it running).
const LIVE_US: i64 = 90_000_000;

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
    /// counted), by version.
    pub async fn radar_versions(&self, key: &str) -> Result<Vec<RadarVersion>, StoreError> {
        self.join().await.map_err(|e| unreachable(self.url(), e))?;
        let rows = sqlx::query(
            "SELECT r.daemon, r.worktree, r.version FROM radar_worktrees r
                 JOIN daemons d ON d.id = r.daemon
             WHERE r.project = $1 AND r.daemon <> $2 AND d.last_seen > maos_now_us() - $3
             ORDER BY r.daemon, r.worktree LIMIT 1000",
        )
        .bind(key)
        .bind(self.daemon())
        .bind(LIVE_US)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| {
                Ok(RadarVersion {
                    daemon: r.try_get("daemon")?,
                    worktree: r.try_get("worktree")?,
                    version: r.try_get("version")?,
                })
            })
            .collect()
    }

    /// Another daemon's report of one worktree without its files' contents (each file's
    /// `stored` is what PostgreSQL holds of it); `None` when gone. At most one file more than
    /// the cap is read, so that a report listing too many is seen as such.
    pub async fn radar_report(
        &self,
        key: &str,
        daemon: &str,
        worktree: &str,
    ) -> Result<Option<FleetTree>, StoreError> {
        let Some(row) = sqlx::query(
            "SELECT machine, base, too_large, version,
                 CASE WHEN jsonb_typeof(agents) = 'array'
                     THEN ARRAY(SELECT jsonb_array_elements_text(agents))
                     ELSE ARRAY[agents::text] END AS agents
             FROM radar_worktrees WHERE project = $1 AND daemon = $2 AND worktree = $3",
        )
        .bind(key)
        .bind(daemon)
        .bind(worktree)
        .fetch_optional(self.pool())
        .await?
        else {
            return Ok(None);
        };
        let files = sqlx::query(
            "SELECT path, mode, blob, size, coalesce(octet_length(content), 0)::bigint AS stored
             FROM radar_files WHERE project = $1 AND daemon = $2 AND worktree = $3
             ORDER BY path LIMIT $4",
        )
        .bind(key)
        .bind(daemon)
        .bind(worktree)
        .bind(maos_core::radar::FLEET_FILES_MAX as i64 + 1)
        .fetch_all(self.pool())
        .await?
        .iter()
        .map(|r| {
            Ok(FleetFile {
                path: r.try_get("path")?,
                mode: u32::try_from(r.try_get::<i32, _>("mode")?).unwrap_or(u32::MAX),
                blob: r.try_get("blob")?,
                size: u64::try_from(r.try_get::<i64, _>("size")?).unwrap_or(u64::MAX),
                stored: u64::try_from(r.try_get::<i64, _>("stored")?).unwrap_or(u64::MAX),
                content: None,
            })
        })
        .collect::<Result<Vec<_>, StoreError>>()?;
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

    /// The contents of `paths` in another daemon's report (call it once the report's sizes
    /// were checked); a file whose content is gone meanwhile is absent.
    pub async fn radar_contents(
        &self,
        key: &str,
        daemon: &str,
        worktree: &str,
        paths: &[&str],
    ) -> Result<Vec<(String, Vec<u8>)>, StoreError> {
        let rows = sqlx::query(
            "SELECT path, content FROM radar_files
             WHERE project = $1 AND daemon = $2 AND worktree = $3 AND path = ANY ($4)
                 AND content IS NOT NULL AND octet_length(content) <= $5",
        )
        .bind(key)
        .bind(daemon)
        .bind(worktree)
        .bind(paths)
        .bind(maos_core::radar::FLEET_FILE_CAP as i64)
        .fetch_all(self.pool())
        .await?;
        rows.iter()
            .map(|r| Ok((r.try_get("path")?, r.try_get("content")?)))
            .collect()
    }
}
