//! A fleet project's writer (`maos_store::PgStore`) against a real, throwaway PostgreSQL: the
//! connection it keeps between a busy project's batches may die while it waits (PostgreSQL
//! restarted, the link cut); the next batch then starts again on a new connection instead of
//! failing, and what it commits is in PostgreSQL.

use maos_core::record::EventRecord;
use maos_store::{Batch, Fleet, PgStore};
use maos_tests::netcut::NetCut;
use maos_tests::postgres::{Postgres, Shutdown, postgres_or_skip};
use sqlx::{Connection, PgConnection};

/// A way to break the connections between two batches.
type Break<'a> = dyn FnMut(&mut Postgres) + 'a;

const KEY: &str = "test.invalid/kept-connection";

/// One batch: begun, one note recorded, committed. Returns the event's number.
async fn note(store: &mut PgStore, text: &str) -> Result<u64, String> {
    let fresh = store.begin(0).await.map_err(|e| format!("begin: {e}"))?;
    let seq = fresh.last_seq + 1;
    let events = [EventRecord {
        seq,
        ts: fresh.now,
        session_id: None,
        agent_id: None,
        kind: "note_recorded".into(),
        data: serde_json::json!({ "text": text }),
    }];
    let batch = Batch {
        events: &events,
        base_seq: fresh.last_seq,
        ..Default::default()
    };
    store
        .commit(&batch)
        .await
        .map_err(|e| format!("commit: {e}"))?;
    Ok(seq)
}

/// The texts of the project's notes, in PostgreSQL.
async fn notes(url: &str) -> Vec<String> {
    let mut c = PgConnection::connect(url).await.expect("connect");
    sqlx::query_scalar("SELECT data->>'text' FROM session_events WHERE project = $1 ORDER BY seq")
        .bind(KEY)
        .fetch_all(&mut c)
        .await
        .expect("read the notes")
}

/// A plain connection of the same server, kept idle across `break_it`, fails its next
/// statement: what a kept connection would do without the store's second start.
async fn dies_across(url: &str, break_it: impl FnOnce()) -> bool {
    let mut c = PgConnection::connect(url).await.expect("connect");
    sqlx::query("SELECT 1")
        .execute(&mut c)
        .await
        .expect("a live connection");
    break_it();
    sqlx::query("SELECT 1").execute(&mut c).await.is_err()
}

#[test]
fn a_batch_after_postgres_restarted_or_the_link_dropped_succeeds_on_a_new_connection() {
    let Some(mut pg) = postgres_or_skip() else {
        return;
    };
    let cut = NetCut::start(format!("127.0.0.1:{}", pg.port()).parse().expect("address"))
        .expect("a proxy");
    let url = format!("postgres://postgres@{}/postgres", cut.addr());
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    rt.block_on(async {
        let fleet = Fleet::new(&url, "lab/1".into(), "lab".into()).expect("fleet");
        let mut store = PgStore::open(&fleet, KEY, "/src/kept")
            .await
            .expect("open the project");
        let mut acked = vec!["first".to_string()];
        note(&mut store, "first").await.expect("the first batch");

        // A batch that wrote nothing keeps its connection too, and ending again keeps it.
        store.begin(0).await.expect("an empty batch");
        store.end().await;
        store.end().await;
        assert!(
            store.keeps_connection(),
            "the connection is kept between batches"
        );

        let breaks: [(&str, &mut Break); 3] = [
            ("fast restart", &mut |pg: &mut Postgres| {
                pg.restart(Shutdown::Fast).expect("restart PostgreSQL")
            }),
            ("crash restart", &mut |pg: &mut Postgres| {
                pg.restart(Shutdown::Immediate).expect("restart PostgreSQL")
            }),
            ("link cut", &mut |_: &mut Postgres| {
                cut.cut();
                cut.restore();
            }),
        ];
        for (what, break_it) in breaks {
            assert!(
                store.keeps_connection(),
                "{what}: the last batch's connection is kept"
            );
            assert!(
                dies_across(&url, || break_it(&mut pg)).await,
                "{what}: an idle connection outlived it"
            );
            let text = format!("after the {what}");
            note(&mut store, &text)
                .await
                .unwrap_or_else(|e| panic!("{what}: the next batch failed: {e}"));
            acked.push(text);
        }
        assert_eq!(
            notes(&pg.url()).await,
            acked,
            "every committed note is there"
        );
        store.close().await;
        fleet.close().await;
    });
}
