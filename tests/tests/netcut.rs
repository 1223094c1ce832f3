//! The fleet tests' broken network (`maos_tests::netcut`), between a client and a real
//! PostgreSQL: through it queries work; stalled, no answer comes while connections stay open;
//! cut, the open connection fails at once and new ones are refused; restored, all works again.

use std::net::SocketAddr;
use std::time::Duration;

use maos_tests::block_on;
use maos_tests::netcut::NetCut;
use maos_tests::postgres::postgres_or_skip;
use sqlx::{Connection, PgConnection};

async fn connect(addr: SocketAddr) -> Result<PgConnection, sqlx::Error> {
    PgConnection::connect(&format!("postgres://postgres@{addr}/postgres")).await
}

async fn one(c: &mut PgConnection) -> Result<i32, sqlx::Error> {
    sqlx::query_as::<_, (i32,)>("SELECT 1")
        .fetch_one(c)
        .await
        .map(|r| r.0)
}

#[test]
fn a_link_that_stalls_is_cut_and_comes_back() {
    let Some(pg) = postgres_or_skip() else {
        return;
    };
    let target: SocketAddr = ([127, 0, 0, 1], pg.port()).into();
    let net = NetCut::start(target).expect("proxy");
    block_on(async {
        let mut c = connect(net.addr())
            .await
            .expect("connect through the proxy");
        assert_eq!(one(&mut c).await.expect("query"), 1);

        // Stalled: the connection stays open, and no answer comes.
        net.stall();
        let stalled = tokio::time::timeout(Duration::from_millis(300), one(&mut c)).await;
        assert!(
            stalled.is_err(),
            "an answer crossed a stalled link: {stalled:?}"
        );
        let new = tokio::time::timeout(Duration::from_millis(300), connect(net.addr())).await;
        assert!(new.is_err(), "a connection was made across a stalled link");
        net.restore();
        // (The interrupted query left that connection mid-protocol: a new one.)
        drop(c);
        let mut c = connect(net.addr()).await.expect("connect after the stall");
        assert_eq!(one(&mut c).await.expect("query after the stall"), 1);

        // Cut: the open connection fails at once (no hang), new ones are refused.
        net.cut();
        let failed = tokio::time::timeout(Duration::from_secs(10), one(&mut c))
            .await
            .expect("a query on a cut link hung instead of failing");
        assert!(failed.is_err(), "a query crossed a cut link");
        let refused = tokio::time::timeout(Duration::from_secs(10), connect(net.addr()))
            .await
            .expect("a connection attempt on a cut link hung");
        assert!(refused.is_err(), "a connection was made across a cut link");

        net.restore();
        let mut c = connect(net.addr()).await.expect("connect after the cut");
        assert_eq!(one(&mut c).await.expect("query after the cut"), 1);
    });
}
