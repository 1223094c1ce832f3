//! The throwaway PostgreSQL of the fleet tests (`maos_tests::postgres`): it starts, takes
//! connections over TCP and its socket with PostgreSQL's default durability, keeps a committed
//! write across a crash-like restart, and leaves no process and no directory behind, also
//! when the test that owns it panics.

use maos_tests::block_on;
use maos_tests::postgres::{Postgres, Shutdown, group_alive, postgres_or_skip};
use sqlx::{Connection, PgConnection};

async fn connect(url: &str) -> PgConnection {
    PgConnection::connect(url)
        .await
        .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"))
}

#[test]
fn starts_keeps_a_commit_across_a_crash_restart_and_leaves_nothing_behind() {
    let Some(mut pg) = postgres_or_skip() else {
        return;
    };
    let pid = pg.pid().expect("the server runs") as libc::pid_t;
    let dir = pg.dir().to_path_buf();
    block_on(async {
        let mut c = connect(&pg.url()).await;
        // The durability every figure is reported with: PostgreSQL's defaults.
        let (sync,): (String,) = sqlx::query_as("SHOW synchronous_commit")
            .fetch_one(&mut c)
            .await
            .expect("show");
        assert_eq!(sync, "on");
        let (fsync,): (String,) = sqlx::query_as("SHOW fsync")
            .fetch_one(&mut c)
            .await
            .expect("show");
        assert_eq!(fsync, "on");
        sqlx::query("CREATE TABLE kept (id bigint PRIMARY KEY, what text NOT NULL)")
            .execute(&mut c)
            .await
            .expect("create");
        sqlx::query("INSERT INTO kept VALUES (1, 'acknowledged')")
            .execute(&mut c)
            .await
            .expect("insert");
        // The socket answers too.
        let mut s = connect(&pg.socket_url()).await;
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM kept")
            .fetch_one(&mut s)
            .await
            .expect("count over the socket");
        assert_eq!(n, 1);
    });

    // A crash (immediate shutdown: no checkpoint, the WAL replayed at the next start).
    pg.restart(Shutdown::Immediate).expect("restart");
    let after = pg.pid().expect("the server runs again") as libc::pid_t;
    assert_ne!(after, pid, "a new postmaster");
    assert!(!group_alive(pid), "the old server's processes are gone");
    block_on(async {
        let mut c = connect(&pg.url()).await;
        let rows: Vec<(i64, String)> = sqlx::query_as("SELECT id, what FROM kept")
            .fetch_all(&mut c)
            .await
            .expect("select after the restart");
        assert_eq!(rows, vec![(1, "acknowledged".to_string())]);
    });
    // A clean stop and start keep it too.
    pg.restart(Shutdown::Fast).expect("fast restart");
    let last = pg.pid().expect("runs") as libc::pid_t;
    block_on(async {
        let mut c = connect(&pg.url()).await;
        let (n,): (i64,) = sqlx::query_as("SELECT count(*) FROM kept")
            .fetch_one(&mut c)
            .await
            .expect("count");
        assert_eq!(n, 1);
    });

    drop(pg);
    assert!(!group_alive(last), "a process of the server outlived it");
    assert!(!dir.exists(), "{} was left behind", dir.display());
}

#[test]
fn a_panicking_test_leaves_no_server_behind() {
    // Started where it can start; the panic is the owner's.
    let (tx, rx) = std::sync::mpsc::channel();
    let owner = std::thread::spawn(move || {
        let pg = match Postgres::start() {
            Ok(pg) => pg,
            Err(e) => {
                tx.send(Err(e)).expect("send");
                return;
            }
        };
        tx.send(Ok((pg.pid().expect("runs"), pg.dir().to_path_buf())))
            .expect("send");
        panic!("the test failed while its server ran");
    });
    let started = rx.recv().expect("the owner thread answers");
    let joined = owner.join();
    let (pid, dir) = match started {
        Ok(x) => x,
        Err(e) => {
            maos_tests::skip_unless_ci(&format!("PostgreSQL cannot start here: {e}"));
            return;
        }
    };
    assert!(joined.is_err(), "the owner thread panicked");
    assert!(
        !group_alive(pid as libc::pid_t),
        "the server outlived the panic"
    );
    assert!(!dir.exists(), "{} was left behind", dir.display());
}
