//! The store against a real SQLite file: what a batch writes is exactly what a load reads back,
//! history filters work, and a full disk is reported as `Full` without corrupting anything.

use chrono::{SubsecRound, Utc};
use maos_core::record::{AgentRecord, ErrorRecord, EventRecord, PauseInfo, SessionRecord};
use maos_core::{
    AgentId, AgentState, CheckpointResult, SessionId, SessionState, Strategy, Workflow,
};
use maos_store::{
    Batch, EventQuery, Reader, SqliteStore as Store, StoreError, StoreOptions, Synchronous,
};
use serde_json::json;

fn session(n: u128) -> SessionRecord {
    let t = Utc::now().trunc_subsecs(6);
    let mut workflow = Workflow::new(vec!["design".into(), "build".into()]).unwrap();
    workflow.start(0, t).unwrap();
    workflow
        .finish(0, CheckpointResult::Passed, json!({"files": ["a.rs"]}), t)
        .unwrap();
    SessionRecord {
        id: SessionId::from_uuid(uuid::Uuid::from_u128(n)),
        objective: format!("objective {n}"),
        state: SessionState::Paused,
        strategy: Strategy::Pipeline,
        active: n == 1,
        created_at: t,
        updated_at: t,
        started_at: Some(t),
        ended_at: None,
        workflow,
        paused_phases: vec!["build".into()],
        pause: Some(PauseInfo {
            at: t,
            by: Some("me".into()),
            reason: Some("lunch".into()),
            in_progress: vec![],
        }),
        resume_count: 2,
        errors: vec![ErrorRecord {
            at: t,
            message: "boom".into(),
            agent_id: None,
        }],
        notes: Vec::new(),
        policy: Some(maos_core::plan::RunPolicy::default()),
        agents: vec![],
        // Not the default: it must round-trip through the session's data column.
        context: maos_core::record::ContextUsage {
            compactions: 2,
            last_compaction: Some(t),
            last_trigger: Some("auto".into()),
            subagent_tokens: 123_456,
            subagents_reported: 3,
        },
        todos: vec![maos_core::record::AgentTodos {
            agent: maos_core::AgentId::from_uuid(uuid::Uuid::from_u128(n)),
            role: None,
            at: t,
            items: vec![maos_core::record::Todo {
                content: "write the store tests".into(),
                status: "in_progress".into(),
            }],
        }],
        by_hooks: false,
    }
}

fn agent(s: &SessionRecord, n: u128, parent: Option<&AgentId>) -> AgentRecord {
    let t = Utc::now().trunc_subsecs(6);
    AgentRecord {
        id: AgentId::from_uuid(uuid::Uuid::from_u128(n)),
        session_id: s.id.clone(),
        role: "backend".into(),
        instance: 1,
        task: "do it".into(),
        state: AgentState::Running,
        paused: true,
        pause: Some(Box::new(maos_core::record::PauseInfo {
            at: t,
            by: Some("ana".into()),
            reason: Some("review first".into()),
            in_progress: Vec::new(),
        })),
        parent: parent.cloned(),
        depends_on: parent.into_iter().cloned().collect(),
        created_at: t,
        updated_at: t,
        started_at: Some(t),
        ended_at: None,
        exit_code: Some(3),
        external_session_id: Some("7d3c1f0e-5b2a-4c8e-9f61-2a9b8c7d6e5f".into()),
        external_agent_id: parent.map(|_| "a7f3c2e1".into()),
        // A managed agent's plan entry and process survive the round trip.
        spec: Some(Box::new(maos_core::plan::AgentSpec {
            name: format!("agent-{n}"),
            role: "backend".into(),
            task: "do it".into(),
            command: vec!["sh".into(), "-c".into(), "exit 0".into()],
            resume_command: Some(vec!["true".into()]),
            depends_on: vec![],
            phase: Some(0),
            stage: None,
            env: [("K".to_string(), "V".to_string())].into(),
            workdir: Some("sub".into()),
            retries: Some(2),
            files: vec!["src/**".into()],
            overlap: maos_core::plan::Overlap::Allow,
            land: Some(vec!["git".into(), "merge".into()]),
            lands: None,
        })),
        process: Some(maos_core::record::ProcessInfo {
            pid: 4242,
            start_time: Some(99),
            started_at: t,
            supervisor: Some(4240),
        }),
        attempts: 2,
        cli: None,
        tool_use_id: None,
        window: None,
        machine: None,
        held: None,
    }
}

fn event(seq: u64, s: &SessionRecord, kind: &str) -> EventRecord {
    EventRecord {
        seq,
        ts: Utc::now().trunc_subsecs(6),
        session_id: Some(s.id.clone()),
        agent_id: None,
        kind: kind.into(),
        data: json!({"n": seq, "text": "quote \" and unicode é"}),
    }
}

#[tokio::test]
async fn a_batch_round_trips_exactly() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let mut s1 = session(1);
    let a1 = agent(&s1, 10, None);
    let a2 = agent(&s1, 11, Some(&a1.id));
    s1.agents = vec![a1.clone(), a2.clone()];
    let s2 = session(2);
    let events: Vec<_> = (1..=5).map(|i| event(i, &s1, "x")).collect();
    {
        let mut store = Store::open(path.clone(), StoreOptions::default())
            .await
            .unwrap();
        let batch = Batch {
            sessions: vec![&s1, &s2],
            phases_of: vec![&s1, &s2],
            agents: vec![&a1, &a2],
            events: &events,
            ..Batch::default()
        };
        store.commit(&batch).await.unwrap();
        // Upsert: writing the same rows again changes nothing.
        store
            .commit(&Batch {
                sessions: vec![&s1],
                ..Batch::default()
            })
            .await
            .unwrap();
        store.close().await;
    }
    let mut store = Store::open(path.clone(), StoreOptions::default())
        .await
        .unwrap();
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.last_seq, 5);
    assert_eq!(loaded.sessions, vec![s1.clone(), s2]);
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    // Small commits leave their frames in the WAL; the background checkpointer copies them all.
    let more: Vec<_> = (6..=400).map(|i| event(i, &s1, "x")).collect();
    store
        .commit(&Batch {
            events: &more,
            ..Batch::default()
        })
        .await
        .unwrap();
    let mut cp = store.checkpointer().await.unwrap();
    let (frames, copied) = cp.run().await.unwrap();
    assert!(frames > 0, "the commit left its frames in the WAL");
    assert_eq!(copied, frames, "every WAL frame copied back");
    let mode = std::fs::metadata(&path).unwrap();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode.permissions()) & 0o777,
        0o600
    );
}

#[tokio::test]
async fn history_filters() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("maos.db"), StoreOptions::default())
        .await
        .unwrap();
    let (s1, s2) = (session(1), session(2));
    let mut events = Vec::new();
    for seq in 1..=20u64 {
        let s = if seq % 2 == 0 { &s1 } else { &s2 };
        events.push(event(seq, s, if seq % 5 == 0 { "five" } else { "other" }));
    }
    store
        .commit(&Batch {
            sessions: vec![&s1, &s2],
            events: &events,
            ..Batch::default()
        })
        .await
        .unwrap();
    let r = Reader::Sqlite(store.reader());
    let seqs = |v: Vec<EventRecord>| v.iter().map(|e| e.seq).collect::<Vec<_>>();
    let q = EventQuery {
        session_id: Some(s1.id.to_string()),
        ..EventQuery::default()
    };
    assert_eq!(
        seqs(r.events(&q).await.unwrap()),
        (1..=10).map(|i| i * 2).collect::<Vec<_>>()
    );
    let q = EventQuery {
        types: vec!["five".into()],
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![5, 10, 15, 20]);
    let q = EventQuery {
        limit: Some(3),
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![18, 19, 20]);
    let q = EventQuery {
        after_seq: Some(17),
        session_id: Some(s2.id.to_string()),
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![19]);
    let all = r.events(&EventQuery::default()).await.unwrap();
    assert_eq!(all[3].data, events[3].data);
    let since = EventQuery {
        since_us: Some(maos_store::to_us(&all[0].ts) + 1_000_000_000),
        ..EventQuery::default()
    };
    assert!(r.events(&since).await.unwrap().is_empty());
}

/// A new store in a directory of its own (gone with the `TempDir`), and its database's path.
async fn new_store(opts: StoreOptions) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let store = Store::open(path.clone(), opts).await.unwrap();
    (dir, path, store)
}

/// A new store whose database is capped at 40 pages (a full disk on demand).
async fn capped(synchronous: Synchronous) -> (tempfile::TempDir, std::path::PathBuf, Store) {
    new_store(StoreOptions {
        synchronous,
        max_page_count: Some(40),
        fleet: None,
    })
    .await
}

#[tokio::test]
async fn a_full_database_refuses_writes_cleanly_and_recovers() {
    let (_dir, path, mut store) = capped(Synchronous::Full).await;
    let s = session(1);
    store
        .commit(&Batch {
            sessions: vec![&s],
            ..Batch::default()
        })
        .await
        .unwrap();
    let big: Vec<_> = (1..=2000u64)
        .map(|i| EventRecord {
            data: json!({"pad": "x".repeat(200)}),
            ..event(i, &s, "big")
        })
        .collect();
    let err = store
        .commit(&Batch {
            events: &big,
            ..Batch::default()
        })
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Full(_)), "{err}");
    assert!(err.to_string().contains("full"), "{err}");
    // Nothing of the failed batch is visible, reads work, the file is sound.
    let events = Reader::Sqlite(store.reader())
        .events(&EventQuery::default())
        .await
        .unwrap();
    assert!(events.is_empty());
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    // A write that fits still works.
    store
        .commit(&Batch {
            events: &big[..1],
            ..Batch::default()
        })
        .await
        .unwrap();
    store.close().await;
    assert_eq!(maos_store::integrity_check(&path).await.unwrap(), "ok");
}

#[tokio::test]
async fn locks_next_token_and_unlocks_round_trip_with_everything_else() {
    use maos_core::{HeldLock, LockMode, LockPath};
    use maos_store::LockRow;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let mut s = session(1);
    let a = agent(&s, 10, None);
    s.agents = vec![a.clone()];
    let t = Utc::now().trunc_subsecs(6);
    let lock = |token: u64, p: &str, mode: LockMode| HeldLock {
        path: LockPath::new(p).unwrap(),
        mode,
        holder: a.id.clone(),
        token,
        acquired_at: t,
        expires_at: t + chrono::TimeDelta::seconds(600),
    };
    let (l1, l2) = (
        lock(1, "src/a.rs", LockMode::Write),
        lock(2, "docs", LockMode::Directory),
    );
    let events: Vec<_> = (1..=2).map(|i| event(i, &s, "lock_acquired")).collect();
    let mut store = Store::open(path.clone(), StoreOptions::default())
        .await
        .unwrap();
    // One batch with rows of every kind, as a busy group commit writes them.
    let row = |l| LockRow {
        lock: l,
        session_id: &s.id,
        ttl_us: 600_000_000,
    };
    store
        .commit(&Batch {
            sessions: vec![&s],
            phases_of: vec![&s],
            agents: vec![&a],
            events: &events,
            locks: vec![row(&l1), row(&l2)],
            next_token: Some(3),
            ..Batch::default()
        })
        .await
        .unwrap();
    let (locks, next) = store.load_locks().await.unwrap();
    assert_eq!(
        locks,
        vec![(l1.clone(), 600_000_000), (l2.clone(), 600_000_000)]
    );
    // The stored bound runs a block ahead of the grants (see the test below).
    assert!((3..=1003).contains(&next), "next token {next}");
    // A release in a batch with an event.
    let released = [event(3, &s, "lock_released")];
    store
        .commit(&Batch {
            events: &released,
            unlocks: vec![1],
            ..Batch::default()
        })
        .await
        .unwrap();
    store.close().await;
    let mut store = Store::open(path, StoreOptions::default()).await.unwrap();
    assert_eq!(store.load().await.unwrap().last_seq, 3);
    let (locks, again) = store.load_locks().await.unwrap();
    assert_eq!(locks, vec![(l2, 600_000_000)]);
    assert_eq!(again, next, "the counter survives with nothing moving it");
}

/// The fencing-token bound (`meta`'s `next_lock_token`) is written a block of 1,000 ahead of
/// the grants, not with each: over 2,500 grants, one per batch as an agent's hook calls make
/// them, it is stored 3 times, never lowered, and always above every token given; and a copy
/// of the files taken right after a commit (what a `kill -9` at that moment leaves) opens with
/// a next token above every token given, at the block boundaries too.
#[tokio::test]
async fn the_token_bound_is_stored_in_blocks_and_a_crash_continues_above_every_token() {
    use maos_core::{HeldLock, LockMode, LockPath};
    use maos_store::LockRow;
    use sqlx::{ConnectOptions, sqlite::SqliteConnectOptions};
    const GRANTS: u64 = 2500;
    // Right after these grants the files are copied: the first grant, and each side of the
    // two block boundaries (the bound moves at grants 1, 1002 and 2003).
    const CRASH_AT: [u64; 9] = [1, 2, 1001, 1002, 1003, 2002, 2003, 2004, GRANTS];
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let s = session(1);
    let holder = AgentId::from_uuid(uuid::Uuid::from_u128(10));
    let t = Utc::now().trunc_subsecs(6);
    let mut store = Store::open(path.clone(), StoreOptions::default())
        .await
        .unwrap();
    assert_eq!(store.load().await.unwrap().next_token, 1);
    let mut meta = SqliteConnectOptions::new()
        .filename(&path)
        .read_only(true)
        .connect()
        .await
        .unwrap();
    let (mut stored, mut writes) = (0i64, 0);
    for token in 1..=GRANTS {
        // A grant of `token` with its event; the previous grant's lock is given back.
        let lock = HeldLock {
            path: LockPath::new(&format!("src/f{token}.rs")).unwrap(),
            mode: LockMode::Write,
            holder: holder.clone(),
            token,
            acquired_at: t,
            expires_at: t + chrono::TimeDelta::seconds(600),
        };
        let events = [event(token, &s, "lock_acquired")];
        store
            .commit(&Batch {
                sessions: if token == 1 { vec![&s] } else { vec![] },
                events: &events,
                locks: vec![LockRow {
                    lock: &lock,
                    session_id: &s.id,
                    ttl_us: 600_000_000,
                }],
                unlocks: if token > 1 { vec![token - 1] } else { vec![] },
                next_token: Some(token + 1),
                ..Batch::default()
            })
            .await
            .unwrap();
        let now: i64 = sqlx::query_scalar("SELECT value FROM meta WHERE key = 'next_lock_token'")
            .fetch_one(&mut meta)
            .await
            .unwrap();
        assert!(
            now > token as i64,
            "grant {token}: the stored bound is {now}"
        );
        assert!(
            now >= stored,
            "grant {token}: the bound went down, {stored} → {now}"
        );
        writes += usize::from(now != stored);
        stored = now;
        if CRASH_AT.contains(&token) {
            let image = dir.path().join(format!("crash{token}"));
            std::fs::create_dir_all(&image).unwrap();
            for f in ["maos.db", "maos.db-wal"] {
                std::fs::copy(dir.path().join(f), image.join(f)).unwrap();
            }
            let mut crashed = Store::open(image.join("maos.db"), StoreOptions::default())
                .await
                .unwrap();
            let loaded = crashed.load().await.unwrap();
            assert_eq!(
                loaded.last_seq, token,
                "crash after grant {token}: every grant kept"
            );
            assert_eq!(loaded.locks.len(), 1, "crash after grant {token}");
            assert!(
                loaded.next_token > token,
                "crash after grant {token}: the restart continues at {}",
                loaded.next_token
            );
            crashed.close().await;
            std::fs::remove_dir_all(&image).unwrap();
        }
    }
    assert_eq!(
        writes, 3,
        "the bound was stored {writes} times for {GRANTS} grants"
    );
    store.close().await;
    let mut store = Store::open(path, StoreOptions::default()).await.unwrap();
    let next = store.load().await.unwrap().next_token;
    assert_eq!(
        next, stored as u64,
        "a restart continues at the stored bound"
    );
}

#[tokio::test]
async fn checkpoint_snapshots_round_trip_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let s1 = session(1);
    let s2 = session(2);
    let t = Utc::now().trunc_subsecs(6);
    // Multi-byte UTF-8, quotes, backslashes and an empty snapshot: each is cut out of the
    // batch's concatenated bytes by its own offset and length.
    let states = [
        r#"{"text":"quote \" backslash \\ é ✓ 🙂"}"#,
        "",
        r#"{"agents":[1,2,3],"note":"日本語"}"#,
    ];
    let rows: Vec<maos_store::CheckpointRow> = states
        .iter()
        .enumerate()
        .map(|(i, state)| maos_store::CheckpointRow {
            session_id: if i == 1 { s2.id.clone() } else { s1.id.clone() },
            seq: i as u64 + 1,
            ts: t,
            reason: format!("reason {i} é"),
            state: state.to_string(),
        })
        .collect();
    {
        let mut store = Store::open(path.clone(), StoreOptions::default())
            .await
            .unwrap();
        store
            .commit(&Batch {
                checkpoints: &rows,
                ..Batch::default()
            })
            .await
            .unwrap();
        store.close().await;
    }
    let of = |sid: &SessionId| {
        let path = path.clone();
        let sid = sid.to_string();
        async move { maos_store::checkpoints(&path, &sid).await.unwrap() }
    };
    let got1 = of(&s1.id).await;
    let got2 = of(&s2.id).await;
    let pick = |got: &[maos_store::CheckpointRow]| {
        got.iter()
            .map(|c| (c.seq, c.reason.clone(), c.state.clone()))
            .collect::<Vec<_>>()
    };
    assert_eq!(
        pick(&got1),
        vec![
            (1, "reason 0 é".to_string(), states[0].to_string()),
            (3, "reason 2 é".to_string(), states[2].to_string()),
        ]
    );
    assert_eq!(
        pick(&got2),
        vec![(2, "reason 1 é".to_string(), String::new())]
    );
    // The latest checkpoint time per session is loaded with the rest.
    let mut store = Store::open(path.clone(), StoreOptions::default())
        .await
        .unwrap();
    let mut checkpointed = store.load().await.unwrap().checkpointed;
    checkpointed.sort_by(|a, b| a.0.as_str().cmp(b.0.as_str()));
    assert_eq!(checkpointed, vec![(s1.id.clone(), t), (s2.id.clone(), t)]);
}

/// After a crash the WAL holds committed transactions that the database file does not have
/// yet. Opening the store must read them without copying the whole WAL back first (that is
/// the background checkpointer's job, after the daemon serves): a copy of a live database
/// and its WAL is such a crash image.
#[tokio::test]
async fn opening_after_a_crash_keeps_the_wal_for_the_background_checkpoint() {
    let dir = tempfile::tempdir().unwrap();
    let live = dir.path().join("live");
    let crashed = dir.path().join("crashed");
    std::fs::create_dir_all(&live).unwrap();
    std::fs::create_dir_all(&crashed).unwrap();
    let s1 = session(1);
    let events: Vec<_> = (1..=300).map(|i| event(i, &s1, "x")).collect();
    let mut store = Store::open(live.join("maos.db"), StoreOptions::default())
        .await
        .unwrap();
    store
        .commit(&Batch {
            sessions: vec![&s1],
            phases_of: vec![&s1],
            events: &events,
            ..Batch::default()
        })
        .await
        .unwrap();
    for f in ["maos.db", "maos.db-wal"] {
        std::fs::copy(live.join(f), crashed.join(f)).unwrap();
    }
    store.close().await;
    let wal = crashed.join("maos.db-wal");
    let wal_bytes = std::fs::metadata(&wal).unwrap().len();
    assert!(wal_bytes > 0, "the crash image has a WAL");

    let mut store = Store::open(crashed.join("maos.db"), StoreOptions::default())
        .await
        .unwrap();
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.last_seq, 300, "every committed event is read");
    assert_eq!(loaded.sessions, vec![s1.clone()]);
    assert_eq!(
        std::fs::metadata(&wal).unwrap().len(),
        wal_bytes,
        "opening did not copy the WAL back and truncate it"
    );
    let mut cp = store.checkpointer().await.unwrap();
    let (frames, copied) = cp.run().await.unwrap();
    assert!(
        frames > 0 && copied == frames,
        "the checkpointer copies it: {frames} {copied}"
    );
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

/// Paging both ways, and `path` / `text` / `until` decided in SQL exactly as
/// `maos_core::events::{path_matches, text_matches}` decide them for live events (the daemon
/// filters a subscription's live events in Rust, its history in SQL).
#[tokio::test]
async fn paging_and_text_filters_agree_with_the_live_matchers() {
    let dir = tempfile::tempdir().unwrap();
    let mut store = Store::open(dir.path().join("maos.db"), StoreOptions::default())
        .await
        .unwrap();
    let s = session(1);
    let datas = [
        json!({"path": "src/a.rs", "mode": "write"}),
        json!({"paths": ["src/b.rs", "docs/É.md"], "why": "Held"}),
        json!({"cycle": [{"waiter": "w", "holder": "h", "path": "src/a.rs"}]}),
        json!({"text": "Decision about SRC"}),
        json!({"path": "tests/x \"quoted\".rs"}),
        json!({}),
    ];
    let t0 = Utc::now().trunc_subsecs(6);
    let events: Vec<EventRecord> = (0..30u64)
        .map(|seq| EventRecord {
            seq: seq + 1,
            ts: t0 + chrono::Duration::seconds(seq as i64),
            session_id: Some(s.id.clone()),
            agent_id: None,
            kind: if seq % 2 == 0 {
                "lock_acquired"
            } else {
                "tool_denied"
            }
            .into(),
            data: datas[seq as usize % datas.len()].clone(),
        })
        .collect();
    store
        .commit(&Batch {
            sessions: vec![&s],
            events: &events,
            ..Batch::default()
        })
        .await
        .unwrap();
    let r = Reader::Sqlite(store.reader());
    let seqs = |v: Vec<EventRecord>| v.iter().map(|e| e.seq).collect::<Vec<_>>();
    // Forward: the oldest 4 after 10; back: the newest 4 before 10; both oldest first.
    let q = EventQuery {
        after_seq: Some(10),
        limit: Some(4),
        oldest_first: true,
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![11, 12, 13, 14]);
    let q = EventQuery {
        before_seq: Some(10),
        limit: Some(4),
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![6, 7, 8, 9]);
    let q = EventQuery {
        until_us: Some(maos_store::to_us(&events[5].ts)),
        ..EventQuery::default()
    };
    assert_eq!(seqs(r.events(&q).await.unwrap()), vec![1, 2, 3, 4, 5]);
    for needle in [
        "src",
        "a.rs",
        "b.rs",
        "É",
        "docs/",
        "\"quoted\"",
        "held",
        "HELD",
        "decision",
        "lock_",
        "denied",
        "mode",
        "zzz",
        "w",
    ] {
        let by_path = EventQuery {
            path: Some(needle.into()),
            ..EventQuery::default()
        };
        let want: Vec<u64> = events
            .iter()
            .filter(|e| maos_core::events::path_matches(&e.data, needle))
            .map(|e| e.seq)
            .collect();
        assert_eq!(
            seqs(r.events(&by_path).await.unwrap()),
            want,
            "path {needle:?}"
        );
        let by_text = EventQuery {
            text: Some(needle.into()),
            ..EventQuery::default()
        };
        let want: Vec<u64> = events
            .iter()
            .filter(|e| maos_core::events::text_matches(&e.kind, &e.data, needle))
            .map(|e| e.seq)
            .collect();
        assert_eq!(
            seqs(r.events(&by_text).await.unwrap()),
            want,
            "text {needle:?}"
        );
    }
    // Several paths in one query: the events about any of them, each as `path` decides it;
    // with `path` as well, both hold.
    for (needles, path) in [
        (&["a.rs", "docs/"][..], None),
        (&["zzz", "b.rs", "É"], None),
        (&["zzz"], None),
        (&["src", "src", "\"quoted\""], None),
        (&["a.rs", "b.rs"], Some("src")),
        (&["a.rs", "docs/"], Some("zzz")),
    ] {
        let q = EventQuery {
            paths: needles.iter().map(|n| n.to_string()).collect(),
            path: path.map(str::to_string),
            ..EventQuery::default()
        };
        let want: Vec<u64> = events
            .iter()
            .filter(|e| {
                needles
                    .iter()
                    .any(|n| maos_core::events::path_matches(&e.data, n))
                    && path.is_none_or(|p| maos_core::events::path_matches(&e.data, p))
            })
            .map(|e| e.seq)
            .collect();
        assert_eq!(
            seqs(r.events(&q).await.unwrap()),
            want,
            "paths {needles:?}, path {path:?}"
        );
    }
}

/// The WAL header's checkpoint sequence and salts (bytes 12..24): a log restart changes them.
fn wal_epoch(db: &std::path::Path) -> Vec<u8> {
    let wal = std::fs::read(db.with_extension("db-wal")).unwrap();
    wal[12..24].to_vec()
}

/// Once the background checkpoint copied every frame back, a commit restarts the WAL itself
/// (a new header, fsynced inside that commit). The checkpointer's `restart` does it on its own
/// connection instead: the next commit then appends to the log (same header), the file is cut
/// to the restart's write, and the writer's commits are what `data_version` sees, not the
/// checkpointer's own write. The project still loads as it was.
#[tokio::test]
async fn the_checkpointer_restarts_the_wal_so_that_a_commit_appends() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("maos.db");
    let mut store = Store::open(path.clone(), StoreOptions::default())
        .await
        .unwrap();
    let s1 = session(1);
    let mut seq = 0;
    let mut commit_one = async |store: &mut Store| {
        seq += 1;
        let events = [event(seq, &s1, "x")];
        let sessions = if seq == 1 { vec![&s1] } else { vec![] };
        store
            .commit(&Batch {
                phases_of: sessions.clone(),
                sessions,
                events: &events,
                ..Batch::default()
            })
            .await
            .unwrap();
    };
    let mut cp = store.checkpointer().await.unwrap();
    // Without the restart: everything copied back, and the next commit restarts the log.
    for _ in 0..200 {
        commit_one(&mut store).await;
    }
    let (frames, copied) = cp.run().await.unwrap();
    assert!(frames > 0 && frames == copied, "{frames} {copied}");
    let before = wal_epoch(&path);
    let big = std::fs::metadata(path.with_extension("db-wal"))
        .unwrap()
        .len();
    commit_one(&mut store).await;
    assert_ne!(
        wal_epoch(&path),
        before,
        "a commit restarts a copied-back WAL"
    );

    // With it: the restart is the checkpointer's, the commit after it appends.
    let (frames, copied) = cp.run().await.unwrap();
    assert!(frames > 0 && frames == copied, "{frames} {copied}");
    let version = cp.data_version().await.unwrap();
    cp.restart(false).await.unwrap();
    let restarted = wal_epoch(&path);
    assert_ne!(
        restarted, before,
        "the checkpointer's write restarted the log"
    );
    let kept = std::fs::metadata(path.with_extension("db-wal"))
        .unwrap()
        .len();
    assert!(
        kept >= big,
        "untrimmed, the file keeps its length: {kept} after {big}"
    );
    assert_eq!(
        cp.data_version().await.unwrap(),
        version,
        "its own write is not a commit"
    );
    commit_one(&mut store).await;
    assert_eq!(
        wal_epoch(&path),
        restarted,
        "the commit appended to the restarted log"
    );
    assert_ne!(
        cp.data_version().await.unwrap(),
        version,
        "the writer's commit is seen"
    );
    // A second restart with nothing copied back yet only appends (the log is in use).
    cp.restart(true).await.unwrap();
    assert_eq!(wal_epoch(&path), restarted);
    // Idle: everything copied back, and a trimming restart cuts the file to its one write.
    let (frames, copied) = cp.run().await.unwrap();
    assert!(frames > 0 && frames == copied, "{frames} {copied}");
    cp.restart(true).await.unwrap();
    assert_ne!(wal_epoch(&path), restarted);
    let small = std::fs::metadata(path.with_extension("db-wal"))
        .unwrap()
        .len();
    assert!(
        small < big && small <= 32 + 4 * (24 + 4096),
        "{small} bytes after {big}"
    );
    cp.close().await;
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.last_seq, seq);
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
}

/// Another connection to `path` holding the write lock (`BEGIN IMMEDIATE`, no waiting for it).
async fn take_write_lock(path: &std::path::Path) -> Result<sqlx::SqliteConnection, sqlx::Error> {
    use sqlx::ConnectOptions;
    let mut conn = sqlx::sqlite::SqliteConnectOptions::new()
        .filename(path)
        .busy_timeout(std::time::Duration::ZERO)
        .connect()
        .await?;
    sqlx::query("BEGIN IMMEDIATE").execute(&mut conn).await?;
    Ok(conn)
}

/// Where a batch commits: a small one (`synchronous=NORMAL`) on the caller's thread, a large
/// one on the blocking pool; and a small one that finds the write lock taken by another
/// connection (the checkpointer's WAL restart) does not fail: it waits on the pool until the
/// lock is free, as the connection always waited.
#[tokio::test]
async fn a_small_batch_commits_in_place_and_a_taken_write_lock_is_waited_for() {
    let (_dir, path, mut store) = new_store(StoreOptions::default()).await;
    let s = session(1);
    let small = [event(1, &s, "x")];
    let commit = |events| Batch {
        events,
        ..Batch::default()
    };
    store.commit(&commit(&small)).await.unwrap();
    assert_eq!(store.pooled_commits(), 0, "a small batch commits in place");
    let large: Vec<_> = (2..=100)
        .map(|i| EventRecord {
            data: json!({"pad": "x".repeat(200)}),
            ..event(i, &s, "big")
        })
        .collect();
    store.commit(&commit(&large)).await.unwrap();
    assert_eq!(
        store.pooled_commits(),
        1,
        "a large batch commits on the pool"
    );

    let mut other = take_write_lock(&path).await.unwrap();
    let late = [event(101, &s, "late")];
    let batch = commit(&late);
    {
        let mut waiting = std::pin::pin!(store.commit(&batch));
        let first =
            std::future::poll_fn(|cx| std::task::Poll::Ready(waiting.as_mut().poll(cx))).await;
        assert!(first.is_pending(), "the commit waits for the write lock");
        sqlx::query("COMMIT").execute(&mut other).await.unwrap();
        waiting.await.unwrap();
    }
    assert_eq!(
        store.pooled_commits(),
        2,
        "the waiting commit ran on the pool"
    );
    let last = [event(102, &s, "x")];
    store.commit(&commit(&last)).await.unwrap();
    assert_eq!(
        store.pooled_commits(),
        2,
        "then small batches commit in place again"
    );
    let seqs: Vec<_> = Reader::Sqlite(store.reader())
        .events(&EventQuery::default())
        .await
        .unwrap()
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(seqs, (1..=102).collect::<Vec<_>>());
    store.close().await;
    assert_eq!(maos_store::integrity_check(&path).await.unwrap(), "ok");
}

/// A full database refuses a small batch committed in place as it refuses a pooled one:
/// `Full`, nothing of the batch kept, the file sound, the connection still writing.
#[tokio::test]
async fn a_full_database_refuses_a_batch_committed_in_place() {
    let (_dir, path, mut store) = capped(Synchronous::Normal).await;
    let s = session(1);
    let mut written = 0u64;
    let err = loop {
        assert!(written < 1000, "the database never filled");
        let e = [EventRecord {
            data: json!({"pad": "x".repeat(3000)}),
            ..event(written + 1, &s, "big")
        }];
        match store
            .commit(&Batch {
                events: &e,
                ..Batch::default()
            })
            .await
        {
            Ok(()) => written += 1,
            Err(err) => break err,
        }
    };
    assert!(written > 0);
    assert!(matches!(err, StoreError::Full(_)), "{err}");
    assert_eq!(
        store.pooled_commits(),
        0,
        "every batch was committed in place"
    );
    let events = Reader::Sqlite(store.reader())
        .events(&EventQuery::default())
        .await
        .unwrap();
    assert_eq!(events.len() as u64, written, "nothing of the refused batch");
    assert_eq!(store.integrity_check().await.unwrap(), "ok");
    // The write connection is not left inside the failed transaction: another connection
    // takes the write lock at once, and after it a delete still commits.
    let mut other = take_write_lock(&path)
        .await
        .expect("the write lock is free after the refused batch");
    sqlx::query("ROLLBACK").execute(&mut other).await.unwrap();
    sqlx::Connection::close(other).await.unwrap();
    store
        .commit(&Batch {
            purged: vec![&s.id],
            ..Batch::default()
        })
        .await
        .unwrap();
    let events = Reader::Sqlite(store.reader())
        .events(&EventQuery::default())
        .await
        .unwrap();
    assert!(events.is_empty());
    store.close().await;
    assert_eq!(maos_store::integrity_check(&path).await.unwrap(), "ok");
}

/// Frames in the WAL of the database at `db`, from its length (while the log was never
/// restarted, its length is the frames written: a 32-byte header, then 24 + 4,096 bytes each).
fn wal_frames(db: &std::path::Path) -> u64 {
    let len = std::fs::metadata(db.with_extension("db-wal")).map_or(0, |m| m.len());
    len.saturating_sub(32) / (24 + 4096)
}

/// A commit on the caller's thread never checkpoints: SQLite's autocheckpoint did, inside the
/// commit that passed its threshold (pages copied into the database file and an fsync, on the
/// daemon's runtime thread). Without a background checkpointer, small batches take the WAL
/// past the bound (`WAL_MAX_FRAMES`, the old threshold), every one of them in place and the
/// database file untouched. The next commit runs on the blocking pool and checkpoints there;
/// the one after starts the WAL again (its header written on the pool too), and then commits
/// are in place again, the WAL no longer than the bound and a few frames.
#[tokio::test]
async fn a_commit_in_place_never_checkpoints_and_past_the_bound_the_pool_does() {
    let (_dir, path, mut store) = new_store(StoreOptions::default()).await;
    let s = session(1);
    let mut seq = 0;
    let mut commit_one = async |store: &mut Store| {
        seq += 1;
        let events = [EventRecord {
            data: json!({"pad": "x".repeat(3000)}),
            ..event(seq, &s, "x")
        }];
        store
            .commit(&Batch {
                events: &events,
                ..Batch::default()
            })
            .await
            .unwrap();
    };
    let bound = u64::from(maos_store::WAL_MAX_FRAMES);
    let file = std::fs::read(&path).unwrap();
    let mut commits = 0;
    while wal_frames(&path) < bound {
        assert!(commits < 20_000, "the WAL never reached the bound");
        commit_one(&mut store).await;
        commits += 1;
    }
    assert_eq!(store.pooled_commits(), 0, "{commits} commits, all in place");
    assert_eq!(store.writer_checkpoints(), 0);
    assert!(
        std::fs::read(&path).unwrap() == file,
        "no commit in place copied the WAL into the database file ({commits} commits)"
    );
    let epoch = wal_epoch(&path);

    commit_one(&mut store).await;
    assert_eq!(store.pooled_commits(), 1, "past the bound: on the pool");
    assert_eq!(store.writer_checkpoints(), 1, "and checkpointed there");
    assert!(
        std::fs::read(&path).unwrap() != file,
        "the checkpoint copied the WAL into the database file"
    );
    assert_eq!(
        wal_epoch(&path),
        epoch,
        "the log starts again at the next commit"
    );
    commit_one(&mut store).await;
    assert_eq!(
        store.pooled_commits(),
        2,
        "the log's restart is on the pool too"
    );
    assert_eq!(store.writer_checkpoints(), 1);
    assert_ne!(
        wal_epoch(&path),
        epoch,
        "the WAL started again from its beginning"
    );
    let longest = wal_frames(&path);
    assert!(
        longest < bound + 32,
        "the WAL stopped near the bound: {longest} frames"
    );
    for _ in 0..100 {
        commit_one(&mut store).await;
    }
    assert_eq!(store.pooled_commits(), 2, "then in place again");
    assert_eq!(store.writer_checkpoints(), 1);
    assert_eq!(
        wal_frames(&path),
        longest,
        "the commits after the restart wrote over the log's first frames"
    );
    let loaded = store.load().await.unwrap();
    assert_eq!(loaded.last_seq, seq);
    store.close().await;
    assert_eq!(maos_store::integrity_check(&path).await.unwrap(), "ok");
}
