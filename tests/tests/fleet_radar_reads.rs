//! How a daemon reads another daemon's radar report from the fleet's PostgreSQL
//! (`maos_store::Fleet::radar_report` / `radar_contents`), on a real throwaway PostgreSQL:
//! a report rewritten while it is read is read whole, as it was or as it is, never its base of
//! one version with the files of another (the rewrite is made to land exactly between the reads:
//! the writer holds `radar_files` locked until the reader waits on it); contents are only those
//! of the blobs the report read names (a file rewritten since gives nothing, not the new
//! version's bytes, nor a content longer than its row says); contents asked for over the report
//! cap together are refused in one line, "too large to compare", before any query; and a
//! report named by a text too long is skipped.

use std::sync::Arc;
use std::time::Duration;

use maos_core::radar::{FLEET_FILE_CAP, FLEET_TEXT_MAX, FLEET_TREE_CAP, FleetFile, FleetTree};
use maos_store::Fleet;
use maos_tests::postgres::{Postgres, postgres_or_skip};
use sqlx::{Connection, PgConnection};

const KEY: &str = "e2e.invalid/fleet-radar-reads";
const WORKTREE: &str = "/srv/repo";

fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("tokio runtime")
}

/// The reporting daemon (machine m1) and the reading one (m2), both members.
async fn fleets(pg: &Postgres) -> (Fleet, Arc<Fleet>) {
    let writer = Fleet::new(&pg.url(), "m1/a".into(), "m1".into()).expect("fleet m1");
    let reader = Fleet::new(&pg.url(), "m2/b".into(), "m2".into()).expect("fleet m2");
    // Joining migrates the database and records each daemon.
    writer.radar_versions(KEY).await.expect("m1 joins");
    reader.radar_versions(KEY).await.expect("m2 joins");
    (writer, Arc::new(reader))
}

fn file(path: &str, blob: char, content: &[u8]) -> FleetFile {
    FleetFile {
        path: path.into(),
        mode: 0o100644,
        blob: blob.to_string().repeat(40),
        size: content.len() as u64,
        stored: 0,
        content: Some(content.to_vec()),
    }
}

fn report(base: char, files: Vec<FleetFile>) -> FleetTree {
    FleetTree {
        daemon: String::new(),
        machine: "m1".into(),
        worktree: WORKTREE.into(),
        agents: Vec::new(),
        base: base.to_string().repeat(40),
        too_large: None,
        files,
        version: 0,
    }
}

/// The report's base and file names, as read.
fn shape(t: &FleetTree) -> (String, Vec<String>) {
    (
        t.base.clone(),
        t.files.iter().map(|f| f.path.clone()).collect(),
    )
}

#[test]
fn a_report_rewritten_between_the_reads_is_read_whole() {
    let Some(pg) = postgres_or_skip() else { return };
    runtime().block_on(async {
        let (writer, reader) = fleets(&pg).await;
        writer
            .radar_publish(KEY, &report('1', vec![file("old.txt", 'a', b"old\n")]))
            .await
            .expect("version 1");
        let v1 = ("1".repeat(40), vec!["old.txt".to_string()]);
        let v2 = ("2".repeat(40), vec!["new.txt".to_string()]);

        // Another daemon rewrites the report (as `radar_publish` does, in one transaction),
        // holding `radar_files` until the reader is waiting on it.
        let mut w = PgConnection::connect(&pg.url()).await.expect("connect");
        sqlx::query("BEGIN").execute(&mut w).await.expect("begin");
        sqlx::query("LOCK TABLE radar_files IN ACCESS EXCLUSIVE MODE")
            .execute(&mut w)
            .await
            .expect("lock");
        let read = tokio::spawn({
            let reader = reader.clone();
            async move { reader.radar_report(KEY, "m1/a", WORKTREE).await }
        });
        let mut probe = PgConnection::connect(&pg.url()).await.expect("connect");
        let deadline = tokio::time::Instant::now() + Duration::from_secs(20);
        loop {
            let waiting: i64 = sqlx::query_scalar(
                "SELECT count(*) FROM pg_stat_activity
                 WHERE application_name = 'maosd m2/b' AND wait_event_type = 'Lock'",
            )
            .fetch_one(&mut probe)
            .await
            .expect("pg_stat_activity");
            if waiting > 0 {
                break;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "the reader never waited on radar_files"
            );
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        for statement in [
            "UPDATE radar_worktrees SET base = repeat('2', 40),
                 version = nextval('maos_radar_version')
             WHERE project = $1 AND daemon = 'm1/a'",
            "DELETE FROM radar_files WHERE project = $1 AND daemon = 'm1/a'",
            "INSERT INTO radar_files (project, daemon, worktree, path, mode, blob, size, content)
             VALUES ($1, 'm1/a', '/srv/repo', 'new.txt', 33188, repeat('b', 40), 4, 'new\n')",
        ] {
            sqlx::query(statement)
                .bind(KEY)
                .execute(&mut w)
                .await
                .expect("rewrite");
        }
        sqlx::query("COMMIT").execute(&mut w).await.expect("commit");
        let got = read
            .await
            .expect("reader task")
            .expect("read")
            .expect("a report");
        let got = shape(&got);
        assert!(got == v1 || got == v2, "read half of each version: {got:?}");
    });
}

#[test]
fn contents_are_those_of_the_blobs_read_and_bounded_in_all() {
    let Some(pg) = postgres_or_skip() else { return };
    runtime().block_on(async {
        let (writer, reader) = fleets(&pg).await;
        writer
            .radar_publish(KEY, &report('1', vec![file("x.txt", 'a', b"one\n")]))
            .await
            .expect("version 1");
        let read = reader
            .radar_report(KEY, "m1/a", WORKTREE)
            .await
            .expect("read")
            .expect("a report");
        // Rewritten after the report was read: x.txt is another blob now.
        writer
            .radar_publish(
                KEY,
                &report('1', vec![file("x.txt", 'b', b"two, longer\n")]),
            )
            .await
            .expect("version 2");
        let wanted: Vec<&FleetFile> = read.files.iter().collect();
        let contents = reader
            .radar_contents(KEY, "m1/a", WORKTREE, &wanted)
            .await
            .expect("contents");
        assert!(
            contents.is_empty(),
            "the report read says blob a…, not the bytes of version 2: {contents:?}"
        );

        // A row holding more than its size says (written by hand: 1 MiB where 4 bytes are
        // said) gives nothing: a content is fetched only when it is the size asked for.
        let mut c = PgConnection::connect(&pg.url()).await.expect("connect");
        sqlx::query(
            "UPDATE radar_files SET blob = repeat('d', 40), size = 4,
                 content = decode(repeat('78', 1048576), 'hex')
             WHERE project = $1 AND daemon = 'm1/a' AND path = 'x.txt'",
        )
        .bind(KEY)
        .execute(&mut c)
        .await
        .expect("an oversized content");
        let said = file("x.txt", 'd', b"four");
        let contents = reader
            .radar_contents(KEY, "m1/a", WORKTREE, &[&said])
            .await
            .expect("contents");
        assert!(
            contents.is_empty(),
            "1 MiB fetched where 4 bytes were asked"
        );

        // Contents asked for over the report's cap together (each file within its own cap, a
        // report `check_report` refuses): refused in one line, before any query.
        let big = vec![b'x'; FLEET_FILE_CAP as usize];
        let count = FLEET_TREE_CAP / FLEET_FILE_CAP + 1;
        let files = (0..count)
            .map(|i| file(&format!("big{i}.bin"), 'c', &big))
            .collect();
        writer
            .radar_publish(KEY, &report('1', files))
            .await
            .expect("a large report");
        let read = reader
            .radar_report(KEY, "m1/a", WORKTREE)
            .await
            .expect("read")
            .expect("a report");
        let wanted: Vec<&FleetFile> = read.files.iter().collect();
        let why = reader
            .radar_contents(KEY, "m1/a", WORKTREE, &wanted)
            .await
            .expect_err("over the cap");
        assert_eq!(
            why.to_string(),
            format!(
                "too large to compare: the contents asked for hold {} bytes (at most \
                 {FLEET_TREE_CAP})",
                count * FLEET_FILE_CAP
            )
        );
        // One file fewer is within the cap, and read.
        let within: Vec<&FleetFile> = read.files.iter().skip(1).collect();
        let contents = reader
            .radar_contents(KEY, "m1/a", WORKTREE, &within)
            .await
            .expect("contents");
        assert_eq!(contents.len(), within.len());
        assert!(contents.iter().all(|(_, c)| *c == big));
    });
}

/// The reports another daemon lists (`radar_versions`) are named by its rows' daemon and
/// worktree: one named by a text too long (a row written by hand, or by a broken daemon) or
/// holding a control character is skipped, never fetched whole nor used to name a file or a
/// row; the sound report beside them is listed.
#[test]
fn a_report_named_by_a_text_too_long_is_skipped() {
    let Some(pg) = postgres_or_skip() else { return };
    runtime().block_on(async {
        let (writer, reader) = fleets(&pg).await;
        writer
            .radar_publish(KEY, &report('1', vec![file("x.txt", 'a', b"x\n")]))
            .await
            .expect("a sound report");
        let mut c = PgConnection::connect(&pg.url()).await.expect("connect");
        // Long, yet small enough compressed to stand in the tables' keys.
        let long = 25 * FLEET_TEXT_MAX;
        let daemon = format!("m3/{}", "d".repeat(long));
        sqlx::query(
            "INSERT INTO daemons (id, machine, started_at, last_seen)
             VALUES ($1, 'm3', maos_now_us(), maos_now_us())",
        )
        .bind(&daemon)
        .execute(&mut c)
        .await
        .expect("a live daemon of a long id");
        let rows = [
            ("m1/a".to_string(), format!("/{}", "w".repeat(long))),
            (
                "m1/a".to_string(),
                format!("/{}", "w".repeat(FLEET_TEXT_MAX)),
            ),
            ("m1/a".to_string(), "/srv/a\nb".to_string()),
            (daemon.clone(), WORKTREE.to_string()),
        ];
        for (daemon, worktree) in &rows {
            put_worktree(&mut c, daemon, worktree).await;
        }
        let versions = reader.radar_versions(KEY).await.expect("versions");
        let named: Vec<(&str, &str)> = versions
            .iter()
            .map(|v| (v.daemon.as_str(), v.worktree.as_str()))
            .collect();
        assert_eq!(named, [("m1/a", WORKTREE)], "only the sound report");
        // A worktree of exactly the longest text is sound.
        let longest = format!("/{}", "w".repeat(FLEET_TEXT_MAX - 1));
        put_worktree(&mut c, "m1/a", &longest).await;
        let versions = reader.radar_versions(KEY).await.expect("versions");
        assert_eq!(versions.len(), 2);
        assert!(versions.iter().any(|v| v.worktree == longest));
    });
}

/// A report row of `daemon`'s `worktree`, written by hand (no files).
async fn put_worktree(c: &mut PgConnection, daemon: &str, worktree: &str) {
    sqlx::query(
        "INSERT INTO radar_worktrees (project, daemon, worktree, machine, base, version,
             updated_at)
         VALUES ($1, $2, $3, 'm1', repeat('1', 40), nextval('maos_radar_version'), maos_now_us())",
    )
    .bind(KEY)
    .bind(daemon)
    .bind(worktree)
    .execute(c)
    .await
    .expect("a report row written by hand");
}
