//! Fleet mode's PostgreSQL schema (`migrations/postgres/`), on a real throwaway PostgreSQL:
//! daemons starting together migrate it once; it keeps every table and column of SQLite's
//! schema (`migrations/`, as maos-store applies it), each table keyed by project, so a
//! migration added to one engine and not the other fails here; tokens come in blocks and
//! PostgreSQL's clock is the one leases use.

use std::collections::{BTreeMap, BTreeSet};
use std::path::PathBuf;

use maos_tests::block_on;
use maos_tests::postgres::postgres_or_skip;
use sqlx::migrate::Migrator;
use sqlx::postgres::PgPoolOptions;
use sqlx::{Connection, SqliteConnection};

/// Columns only the fleet has: the project's key on every row, what a cache refreshes from
/// (`changed_seq`), the daemon that runs an agent, and an agent's creation order (SQLite's
/// `rowid`).
const FLEET_ONLY: [&str; 4] = ["project", "changed_seq", "daemon", "ord"];
/// SQLite tables with no counterpart: the next token (a sequence in PostgreSQL) and the
/// engines' own bookkeeping.
const SQLITE_ONLY: [&str; 3] = ["meta", "sqlite_sequence", "_sqlx_migrations"];

fn pg_migrations() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../migrations/postgres")
}

type Schema = BTreeMap<String, BTreeSet<String>>;

/// SQLite's schema as the daemon makes it: a project database opened by maos-store.
async fn sqlite_schema() -> Schema {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("maos.db");
    let store = maos_store::Store::open(path.clone(), Default::default())
        .await
        .expect("open a SQLite project database");
    store.close().await;
    let mut c = SqliteConnection::connect(&format!("sqlite://{}", path.display()))
        .await
        .expect("connect to SQLite");
    let rows: Vec<(String, String)> = sqlx::query_as(
        "SELECT m.name, p.name FROM sqlite_master m, pragma_table_info(m.name) p \
         WHERE m.type = 'table'",
    )
    .fetch_all(&mut c)
    .await
    .expect("SQLite's columns");
    let mut schema = Schema::new();
    for (table, column) in rows {
        schema.entry(table).or_default().insert(column);
    }
    schema
}

#[test]
fn daemons_migrate_once_and_the_schema_matches_sqlites() {
    let Some(pg) = postgres_or_skip() else {
        return;
    };
    let url = pg.url();
    block_on(async {
        let migrator = Migrator::new(pg_migrations())
            .await
            .expect("read migrations/postgres");
        assert!(migrator.iter().count() >= 1, "no PostgreSQL migration");
        // Three daemons start at once: each migrates, one does the work.
        let mut runs = Vec::new();
        for _ in 0..3 {
            let url = url.clone();
            let migrator = Migrator::new(pg_migrations()).await.expect("migrations");
            runs.push(tokio::spawn(async move {
                let pool = PgPoolOptions::new()
                    .max_connections(1)
                    .connect(&url)
                    .await
                    .expect("connect");
                migrator.run(&pool).await
            }));
        }
        for r in runs {
            r.await.expect("join").expect("migrate");
        }
        let pool = PgPoolOptions::new()
            .max_connections(2)
            .connect(&url)
            .await
            .expect("connect");
        let (applied,): (i64,) =
            sqlx::query_as("SELECT count(*) FROM _sqlx_migrations WHERE success")
                .fetch_one(&pool)
                .await
                .expect("applied migrations");
        assert_eq!(applied as usize, migrator.iter().count());
        // Again: nothing to do.
        migrator.run(&pool).await.expect("migrate again");

        let rows: Vec<(String, String)> = sqlx::query_as(
            "SELECT table_name::text, column_name::text FROM information_schema.columns \
             WHERE table_schema = 'public'",
        )
        .fetch_all(&pool)
        .await
        .expect("PostgreSQL's columns");
        let mut pg_schema = Schema::new();
        for (table, column) in rows {
            pg_schema.entry(table).or_default().insert(column);
        }
        let sqlite = sqlite_schema().await;
        assert!(
            sqlite.contains_key("locks"),
            "SQLite schema read: {sqlite:?}"
        );
        for (table, columns) in &sqlite {
            if SQLITE_ONLY.contains(&table.as_str()) {
                continue;
            }
            let Some(pg_columns) = pg_schema.get(table) else {
                panic!("SQLite's table {table} is missing from migrations/postgres");
            };
            let missing: Vec<_> = columns.difference(pg_columns).collect();
            assert!(
                missing.is_empty(),
                "{table}: columns of SQLite's schema missing from PostgreSQL's: {missing:?}"
            );
            let extra: Vec<_> = pg_columns
                .difference(columns)
                .filter(|c| !FLEET_ONLY.contains(&c.as_str()))
                .collect();
            assert!(
                extra.is_empty(),
                "{table}: columns only PostgreSQL has (add them to SQLite's schema or to \
                 FLEET_ONLY): {extra:?}"
            );
            assert!(
                pg_columns.contains("project"),
                "{table} is not keyed by project"
            );
        }

        // Fencing tokens in blocks: one value per batch, the block between two draws its own.
        let (a,): (i64,) = sqlx::query_as("SELECT nextval('maos_fence')")
            .fetch_one(&pool)
            .await
            .expect("token");
        let (b,): (i64,) = sqlx::query_as("SELECT nextval('maos_fence')")
            .fetch_one(&pool)
            .await
            .expect("token");
        assert_eq!(b - a, 65536);
        // Leases are measured by PostgreSQL's clock, in µs like every timestamp.
        let (now,): (i64,) = sqlx::query_as("SELECT maos_now_us()")
            .fetch_one(&pool)
            .await
            .expect("clock");
        let mine = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("after 1970")
            .as_micros() as i64;
        assert!(
            (now - mine).abs() < 60_000_000,
            "PostgreSQL {now} µs, here {mine} µs"
        );
        // A wait ended by another daemon says why: the schema refuses an outcome without it.
        sqlx::query("INSERT INTO daemons VALUES ('d1', 'm', 0, 0)")
            .execute(&pool)
            .await
            .expect("a daemon");
        sqlx::query("INSERT INTO projects (key) VALUES ('p')")
            .execute(&pool)
            .await
            .expect("a project");
        let bad = sqlx::query(
            "INSERT INTO lock_waits (project, daemon, wait, agent_id, session_id, path, mode, \
             born, since, lease_until, outcome) VALUES ('p', 'd1', 1, 'a', 's', 'x', 'write', \
             0, 0, 1, 'deadlock')",
        )
        .execute(&pool)
        .await
        .expect_err("a wait ended without its message was accepted");
        let code = bad.as_database_error().and_then(|e| e.code());
        assert_eq!(code.as_deref(), Some("23514"), "{bad}");
        pool.close().await;
    });
}
