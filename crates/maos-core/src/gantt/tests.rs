use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};
use serde_json::{Value, json};

use super::*;

/// Milliseconds of the first event of every test.
const T0: i64 = 1_700_000_000_000;

/// An agent id whose short form shows `n` ("agt_a0000000").
fn aid(n: u8) -> AgentId {
    AgentId::parse(&format!("agt_{n:x}{}", "0".repeat(31))).expect("valid id")
}

fn ts(ms: i64) -> Ts {
    chrono::DateTime::from_timestamp_millis(T0 + ms).expect("in range")
}

fn ev(seq: u64, ms: i64, agent: Option<&AgentId>, kind: &str, data: Value) -> EventRecord {
    EventRecord {
        seq,
        ts: ts(ms),
        session_id: None,
        agent_id: agent.cloned(),
        kind: kind.to_owned(),
        data,
    }
}

/// Events numbered in order.
struct Log(Vec<EventRecord>);

impl Log {
    fn new() -> Self {
        Log(Vec::new())
    }

    fn add(&mut self, ms: i64, agent: Option<&AgentId>, kind: &str, data: Value) -> &mut Self {
        let seq = self.0.len() as u64 + 1;
        self.0.push(ev(seq, ms, agent, kind, data));
        self
    }

    fn build(&self) -> GanttBuilder {
        let mut b = GanttBuilder::new();
        for e in &self.0 {
            b.fold(e);
        }
        b
    }
}

fn all(b: &GanttBuilder, now: i64) -> Gantt {
    b.snapshot(ts(now), Window::all(1000))
}

fn span(kind: SpanKind, from: i64, to: Option<i64>) -> Span {
    Span {
        kind,
        from_ms: T0 + from,
        to_ms: to.map(|t| T0 + t),
        path: None,
    }
}

fn waiting(path: &str, from: i64, to: Option<i64>) -> Span {
    Span {
        path: Some(path.to_owned()),
        ..span(SpanKind::Waiting, from, to)
    }
}

fn row<'a>(g: &'a Gantt, a: &AgentId) -> &'a Row {
    g.rows.iter().find(|r| &r.agent == a).expect("row")
}

fn acquired(path: &str, mode: &str, token: u64, waited: bool) -> Value {
    json!({"path": path, "mode": mode, "token": token, "expires_at": "2026-11-26T00:00:00Z", "waited": waited})
}

fn released(path: &str, token: u64) -> Value {
    json!({"path": path, "mode": "write", "token": token})
}

#[test]
fn two_agents_a_write_lock_a_conflict_a_denial_and_a_wait_that_ends_in_the_grant() {
    let (a, b) = (aid(0xa), aid(0xb));
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_registered", json!({}))
        .add(0, Some(&b), "agent_registered", json!({}))
        .add(10, Some(&a), "agent_started", json!({}))
        .add(20, Some(&b), "agent_started", json!({}))
        .add(
            30,
            Some(&a),
            "lock_acquired",
            acquired("src/a.rs", "write", 1, false),
        )
        .add(
            40,
            Some(&b),
            "conflict_detected",
            json!({"path": "src/a.rs", "mode": "write", "holders": [a.as_str()]}),
        )
        .add(
            50,
            Some(&b),
            "tool_denied",
            json!({"tool": "Edit", "paths": ["src/a.rs", "src/b.rs"], "why": "locked",
                   "reason": "src/a.rs is locked by agt_a0000000"}),
        )
        .add(
            60,
            Some(&b),
            "lock_wait",
            json!({"path": "src/a.rs", "mode": "write", "wait": 5000, "holders": [a.as_str()]}),
        )
        .add(70, Some(&a), "file_modified", json!({"path": "src/a.rs"}))
        .add(80, Some(&a), "lock_released", released("src/a.rs", 1))
        .add(
            80,
            Some(&b),
            "lock_acquired",
            acquired("src/a.rs", "write", 2, true),
        )
        .add(100, Some(&b), "lock_released", released("src/a.rs", 2))
        .add(110, Some(&b), "agent_completed", json!({}))
        .add(120, Some(&a), "agent_ended", json!({}));
    let g = all(&log.build(), 200);

    assert_eq!((g.from_ms, g.to_ms, g.now_ms), (T0, T0 + 200, T0 + 200));
    assert_eq!(g.folded, 14);
    let agents: Vec<_> = g.rows.iter().map(|r| r.agent.clone()).collect();
    assert_eq!(
        agents,
        [a.clone(), b.clone()],
        "rows in order of first appearance"
    );

    let ra = row(&g, &a);
    assert_eq!(ra.spans, [span(SpanKind::Run, 10, Some(120))]);
    assert_eq!(
        ra.locks,
        [LockBar {
            path: "src/a.rs".into(),
            mode: "write".into(),
            token: 1,
            from_ms: T0 + 30,
            to_ms: Some(T0 + 80),
            end: Some("released".into()),
            count: 1,
        }]
    );
    assert!(ra.marks.is_empty());

    let rb = row(&g, &b);
    assert_eq!(
        rb.spans,
        [
            span(SpanKind::Run, 20, Some(60)),
            waiting("src/a.rs", 60, Some(80)),
            span(SpanKind::Run, 80, Some(110)),
        ]
    );
    assert_eq!(rb.locks.len(), 1);
    assert_eq!(
        (rb.locks[0].token, rb.locks[0].from_ms, rb.locks[0].to_ms),
        (2, T0 + 80, Some(T0 + 100))
    );
    let marks: Vec<_> = rb
        .marks
        .iter()
        .map(|m| {
            (
                m.kind,
                m.at_ms - T0,
                m.seq,
                m.path.as_deref(),
                m.text.as_str(),
                m.count,
            )
        })
        .collect();
    assert_eq!(
        marks,
        [
            (
                MarkKind::Conflict,
                40,
                6,
                Some("src/a.rs"),
                "write on src/a.rs: held by agt_a0000000",
                1
            ),
            (
                MarkKind::Denied,
                50,
                7,
                Some("src/a.rs"),
                "src/a.rs is locked by agt_a0000000",
                1
            ),
        ]
    );
    assert_eq!((rb.merged_locks, rb.merged_marks), (0, 0));
}

#[test]
fn the_json_is_snake_case_with_integer_milliseconds_leaves_out_what_is_open_and_parses_back() {
    let a = aid(0xa);
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}))
        .add(
            5,
            Some(&a),
            "lock_acquired",
            acquired("x", "read", 7, false),
        )
        .add(
            6,
            Some(&a),
            "lock_wait",
            json!({"path": "y", "mode": "write"}),
        );
    let g = all(&log.build(), 10);
    let v = serde_json::to_value(&g).expect("serializes");
    // What crosses the wire (maosd to maos-dash) comes back the same.
    let back: Gantt = serde_json::from_value(v.clone()).expect("parses");
    assert_eq!(back, g);
    let r = &v["rows"][0];
    assert_eq!(r["agent"], json!(a.as_str()));
    assert_eq!(
        r["spans"],
        json!([{"kind": "run", "from_ms": T0, "to_ms": T0 + 6},
               {"kind": "waiting", "from_ms": T0 + 6, "path": "y"}])
    );
    assert_eq!(
        r["locks"],
        json!([{"path": "x", "mode": "read", "token": 7, "from_ms": T0 + 5, "count": 1}])
    );
    assert_eq!(v["now_ms"], json!(T0 + 10));
    assert_eq!(v["folded"], json!(3));
}

#[test]
fn a_window_is_checked_field_by_field() {
    let w = Window::checked(Some(1), Some(2), 10).expect("a good window");
    assert_eq!((w.from_ms, w.to_ms, w.width_px), (Some(1), Some(2), 10));
    assert_eq!(Window::checked(None, None, 1), Ok(Window::all(1)));
    for (from, to, width, says) in [
        (Some(-1), None, 10, "from: -1 is not a time"),
        (
            None,
            Some(253_402_300_799_001),
            10,
            "to: 253402300799001 is not a time",
        ),
        (Some(5), Some(5), 10, "to (5) is not after from (5)"),
        (Some(6), Some(5), 10, "to (5) is not after from (6)"),
        (
            None,
            None,
            0,
            "width: 0 is not a number of pixels from 1 to 10000",
        ),
        (None, None, MAX_WIDTH + 1, "width: 10001 is not"),
    ] {
        let e = Window::checked(from, to, width).expect_err("a bad window");
        assert!(e.starts_with(says), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn a_deadlock_marks_the_victims_row_ends_its_wait_and_keeps_the_cycle() {
    let (a, b) = (aid(0xa), aid(0xb));
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}))
        .add(0, Some(&b), "agent_started", json!({}))
        .add(
            1,
            Some(&a),
            "lock_acquired",
            acquired("y", "write", 1, false),
        )
        .add(
            2,
            Some(&b),
            "lock_acquired",
            acquired("x", "write", 2, false),
        )
        .add(
            3,
            Some(&a),
            "lock_wait",
            json!({"path": "x", "mode": "write", "wait": 100, "holders": [b.as_str()]}),
        )
        .add(
            4,
            Some(&b),
            "lock_wait",
            json!({"path": "y", "mode": "write", "wait": 100, "holders": [a.as_str()]}),
        )
        .add(
            4,
            None,
            "deadlock_detected",
            json!({"cycle": [{"waiter": b.as_str(), "holder": a.as_str(), "path": "y"},
                             {"waiter": a.as_str(), "holder": b.as_str(), "path": "x"}],
                   "victim": b.as_str()}),
        )
        .add(9, Some(&b), "lock_released", released("x", 2))
        .add(
            9,
            Some(&a),
            "lock_acquired",
            acquired("x", "write", 3, true),
        );
    let g = all(&log.build(), 20);

    assert_eq!(
        g.deadlocks,
        [Deadlock {
            seq: 7,
            at_ms: T0 + 4,
            victim: b.clone(),
            cycle: vec![
                Edge {
                    waiter: b.clone(),
                    holder: a.clone(),
                    path: "y".into()
                },
                Edge {
                    waiter: a.clone(),
                    holder: b.clone(),
                    path: "x".into()
                },
            ],
        }]
    );
    let rb = row(&g, &b);
    // B waited and lost at once (same ms): its wait is replaced, its run goes on.
    assert_eq!(
        rb.spans,
        [
            span(SpanKind::Run, 0, Some(4)),
            span(SpanKind::Run, 4, None)
        ]
    );
    assert_eq!(rb.marks.len(), 1);
    let m = &rb.marks[0];
    assert_eq!(
        (m.kind, m.seq, m.path.as_deref()),
        (MarkKind::Deadlock, 7, Some("y"))
    );
    assert_eq!(
        m.text,
        "deadlock: agt_b0000000 waits for agt_a0000000 on y, agt_a0000000 waits for agt_b0000000 on x; agt_b0000000 loses"
    );
    let ra = row(&g, &a);
    assert_eq!(
        ra.spans,
        [
            span(SpanKind::Run, 0, Some(3)),
            waiting("x", 3, Some(9)),
            span(SpanKind::Run, 9, None),
        ]
    );
    assert!(ra.marks.is_empty());
    assert_eq!(ra.locks.iter().map(|l| l.token).collect::<Vec<_>>(), [1, 3]);
}

#[test]
fn a_session_pause_pauses_the_listed_runs_and_its_resume_only_those() {
    let (a, b, c) = (aid(0xa), aid(0xb), aid(0xc));
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}))
        .add(0, Some(&b), "agent_started", json!({}))
        .add(0, Some(&c), "agent_started", json!({}))
        .add(5, Some(&c), "agent_paused", json!({}))
        .add(
            10,
            None,
            "session_paused",
            json!({"by": "me", "reason": "lunch",
                   "in_progress": [a.as_str(), c.as_str(), "nope", 5, aid(0xd).as_str()]}),
        )
        .add(20, None, "session_resumed", json!({}))
        .add(30, Some(&c), "agent_resumed", json!({}))
        .add(40, Some(&b), "agent_paused", json!({}))
        .add(50, Some(&b), "agent_resumed", json!({}));
    let g = all(&log.build(), 60);
    assert_eq!(g.rows.len(), 3, "an unknown listed agent makes no row");
    assert_eq!(
        row(&g, &a).spans,
        [
            span(SpanKind::Run, 0, Some(10)),
            span(SpanKind::Paused, 10, Some(20)),
            span(SpanKind::Run, 20, None),
        ]
    );
    assert_eq!(
        row(&g, &b).spans,
        [
            span(SpanKind::Run, 0, Some(40)),
            span(SpanKind::Paused, 40, Some(50)),
            span(SpanKind::Run, 50, None),
        ]
    );
    // C paused itself before the session pause: the session's resume does not resume it.
    assert_eq!(
        row(&g, &c).spans,
        [
            span(SpanKind::Run, 0, Some(5)),
            span(SpanKind::Paused, 5, Some(30)),
            span(SpanKind::Run, 30, None),
        ]
    );
}

#[test]
fn phases_are_bands_closed_with_their_outcome_and_a_skipped_one_is_zero_long() {
    let mut log = Log::new();
    log.add(
        0,
        None,
        "phase_started",
        json!({"phase": "design", "index": 0, "attempt": 1}),
    )
    .add(
        10,
        None,
        "phase_completed",
        json!({"phase": "design", "index": 0}),
    )
    .add(
        10,
        None,
        "phase_started",
        json!({"phase": "build", "index": 1, "attempt": 1}),
    )
    .add(
        20,
        None,
        "phase_failed",
        json!({"phase": "build", "index": 1}),
    )
    .add(
        25,
        None,
        "phase_skipped",
        json!({"phase": "test", "index": 2}),
    )
    .add(
        30,
        None,
        "phase_started",
        json!({"phase": "build", "index": 1, "attempt": 2}),
    )
    .add(31, None, "phase_completed", json!({"phase": 3}))
    .add(32, None, "phase_completed", json!({}));
    let g = all(&log.build(), 40);
    let band = |name: &str, from: i64, to: Option<i64>, outcome: Option<&str>| Band {
        name: name.into(),
        from_ms: T0 + from,
        to_ms: to.map(|t| T0 + t),
        outcome: outcome.map(Into::into),
    };
    assert_eq!(
        g.phases,
        [
            band("design", 0, Some(10), Some("completed")),
            band("build", 10, Some(20), Some("failed")),
            band("test", 25, Some(25), Some("skipped")),
            band("build", 30, None, None),
        ]
    );
    assert!(g.rows.is_empty());
}

#[test]
fn an_agent_seen_working_without_a_start_runs_from_its_first_event_and_stops_at_its_end() {
    let (a, r) = (aid(0xa), aid(0xe));
    let mut log = Log::new();
    log.add(0, Some(&r), "agent_registered", json!({}))
        .add(5, Some(&a), "prompt_submitted", json!({}))
        .add(
            6,
            Some(&a),
            "lock_acquired",
            acquired("f", "write", 4, false),
        )
        .add(7, Some(&a), "file_modified", json!({"path": "f"}))
        .add(9, Some(&a), "agent_ended", json!({}))
        // The daemon releases the ended agent's locks; that is no new run.
        .add(9, Some(&a), "lock_released", released("f", 4))
        .add(
            11,
            Some(&a),
            "lock_acquired",
            acquired("g", "write", 5, false),
        )
        .add(
            12,
            None,
            "lock_expired",
            json!({"path": "g", "mode": "write", "token": 5}),
        )
        .add(
            13,
            Some(&a),
            "lock_released",
            json!({"path": "g", "mode": "read", "token": 5}),
        );
    let g = all(&log.build(), 20);
    assert_eq!(g.rows.len(), 2);
    assert!(row(&g, &r).spans.is_empty(), "registered only: no span");
    let ra = row(&g, &a);
    assert_eq!(ra.spans, [span(SpanKind::Run, 5, Some(9))]);
    let ends: Vec<_> = ra
        .locks
        .iter()
        .map(|l| (l.token, l.to_ms.map(|t| t - T0), l.end.as_deref()))
        .collect();
    assert_eq!(
        ends,
        [
            (4, Some(9), Some("released")),
            (5, Some(12), Some("expired"))
        ]
    );
}

#[test]
fn an_upgrade_ends_the_read_bar_as_upgraded_and_a_timeout_ends_the_wait_with_a_mark() {
    let a = aid(0xa);
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}))
        .add(
            1,
            Some(&a),
            "lock_acquired",
            acquired("f", "read", 1, false),
        )
        .add(
            2,
            Some(&a),
            "lock_released",
            json!({"path": "f", "mode": "read", "token": 1, "reason": "upgraded to write"}),
        )
        .add(
            2,
            Some(&a),
            "lock_acquired",
            acquired("f", "write", 2, false),
        )
        .add(
            3,
            Some(&a),
            "lock_wait",
            json!({"path": "g", "mode": "write", "wait": 5}),
        )
        .add(
            8,
            Some(&a),
            "lock_timeout",
            json!({"path": "g", "mode": "write"}),
        );
    let g = all(&log.build(), 10);
    let ra = row(&g, &a);
    assert_eq!(ra.locks[0].end.as_deref(), Some("upgraded"));
    assert_eq!(ra.locks[1].end, None);
    assert_eq!(
        ra.spans,
        [
            span(SpanKind::Run, 0, Some(3)),
            waiting("g", 3, Some(8)),
            span(SpanKind::Run, 8, None),
        ]
    );
    assert_eq!(ra.marks.len(), 1);
    assert_eq!(
        (
            ra.marks[0].kind,
            ra.marks[0].path.as_deref(),
            ra.marks[0].text.as_str()
        ),
        (
            MarkKind::Timeout,
            Some("g"),
            "timed out waiting for write on g"
        )
    );
}

#[test]
fn bad_data_unknown_types_and_replayed_seqs_change_nothing_but_the_count() {
    let a = aid(0xa);
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}));
    let base = log.build();
    let before = all(&base, 50);
    let bad = [
        ("lock_acquired", json!({"path": "f", "mode": "write"})),
        (
            "lock_acquired",
            json!({"path": 1, "mode": "write", "token": 1}),
        ),
        (
            "lock_acquired",
            json!({"path": "f", "mode": "write", "token": -3}),
        ),
        ("lock_released", json!({"token": "1"})),
        ("lock_released", json!({"token": 99})),
        ("lock_expired", json!(null)),
        ("lock_wait", json!({"mode": "write"})),
        ("lock_timeout", json!([])),
        ("conflict_detected", json!({"holders": "x"})),
        (
            "deadlock_detected",
            json!({"cycle": [], "victim": "agt_zz"}),
        ),
        (
            "deadlock_detected",
            json!({"cycle": [{"waiter": a.as_str()}], "victim": a.as_str()}),
        ),
        (
            "deadlock_detected",
            json!({"cycle": 3, "victim": a.as_str()}),
        ),
        ("session_paused", json!({"in_progress": "all"})),
        ("phase_started", json!({"phase": ""})),
        ("phase_skipped", json!({"phase": null})),
        ("tool_called", json!({"what": "ever"})),
        ("no_such_type", json!(1)),
    ];
    let mut b = base.clone();
    for (i, (kind, data)) in bad.iter().enumerate() {
        b.fold(&ev(2 + i as u64, 10, Some(&a), kind, data.clone()));
    }
    // Replays (seq at or below the last) are ignored, even a valid event.
    let last = b.last_seq();
    b.fold(&ev(last, 20, Some(&a), "agent_ended", json!({})));
    b.fold(&ev(1, 20, Some(&a), "agent_paused", json!({})));
    let after = all(&b, 50);
    assert_eq!(after.folded, before.folded + bad.len() as u64);
    assert_eq!(b.last_seq(), 1 + bad.len() as u64);
    assert_eq!(
        Gantt {
            folded: before.folded,
            ..after
        },
        before
    );
}

/// A builder with `n` write locks by one agent, the i-th held from `at(i)` for `len` ms.
fn bars(n: u64, at: impl Fn(u64) -> i64, len: i64) -> (AgentId, GanttBuilder) {
    let a = aid(0xa);
    let mut b = GanttBuilder::new();
    let mut seq = 0;
    for i in 0..n {
        seq += 1;
        b.fold(&ev(
            seq,
            at(i),
            Some(&a),
            "lock_acquired",
            acquired("f", "write", i + 1, false),
        ));
        seq += 1;
        b.fold(&ev(
            seq,
            at(i) + len,
            Some(&a),
            "lock_released",
            released("f", i + 1),
        ));
    }
    (a, b)
}

#[test]
fn ten_thousand_bars_drawn_a_thousand_pixels_wide_become_at_most_a_thousand() {
    // A thousand clusters of ten 1 ms bars, 10 s apart, over 10,000 s: drawn 2000 px wide (a
    // pixel is 5 s) each cluster is one bar of ten; 1000 px wide (10 s) they touch and merge.
    let (a, b) = bars(
        10_000,
        |i| (i / 10) as i64 * 10_000 + (i % 10) as i64 * 2,
        1,
    );
    let g = b.snapshot(ts(10_000_000), Window::all(2000));
    let r = row(&g, &a);
    assert_eq!(r.locks.len(), 1000);
    assert!(
        r.locks
            .iter()
            .all(|l| l.count == 10 && l.to_ms.is_some_and(|t| t - l.from_ms == 19))
    );
    assert_eq!(r.merged_locks, 9000);
    assert!(r.locks.windows(2).all(|w| w[0].from_ms < w[1].from_ms));
    for width in [1000, 333, 1] {
        let g = b.snapshot(ts(10_000_000), Window::all(width));
        let r = row(&g, &a);
        assert!(
            r.locks.len() <= width as usize + 1,
            "{} bars in {width} px",
            r.locks.len()
        );
        assert_eq!(r.locks.iter().map(|l| l.count).sum::<u32>(), 10_000);
        assert_eq!(r.merged_locks as usize, 10_000 - r.locks.len());
    }

    // Ten bursts of a thousand bars 1 ms apart, 10 s between bursts: one bar per burst, from
    // its first start to its last end, the first's token.
    let (a, b) = bars(
        10_000,
        |i| (i / 1000) as i64 * 10_000 + (i % 1000) as i64,
        1,
    );
    let g = b.snapshot(ts(100_000), Window::all(1000));
    let r = row(&g, &a);
    let got: Vec<_> = r
        .locks
        .iter()
        .map(|l| (l.from_ms - T0, l.to_ms.map(|t| t - T0), l.token, l.count))
        .collect();
    let want: Vec<_> = (0..10)
        .map(|k| {
            (
                k * 10_000,
                Some(k * 10_000 + 1000),
                k as u64 * 1000 + 1,
                1000,
            )
        })
        .collect();
    assert_eq!(got, want);
    assert_eq!(r.merged_locks, 9990);

    // The same bars zoomed into one burst, 1 px per ms: nothing merges there.
    let g = b.snapshot(
        ts(100_000),
        Window {
            from_ms: Some(T0 + 20_000),
            to_ms: Some(T0 + 21_000),
            width_px: 1000,
        },
    );
    let r = row(&g, &a);
    assert_eq!(r.locks.len(), 1000);
    assert_eq!(r.merged_locks, 0);
}

#[test]
fn marks_coalesce_per_kind_so_a_deadlock_among_denials_stays_visible() {
    let (a, b) = (aid(0xa), aid(0xb));
    let mut g = GanttBuilder::new();
    let mut seq = 0;
    for i in 0..5000 {
        seq += 1;
        g.fold(&ev(
            seq,
            i,
            Some(&a),
            "tool_denied",
            json!({"tool": "Edit", "paths": ["f"], "why": "locked"}),
        ));
    }
    seq += 1;
    g.fold(&ev(
        seq,
        2500,
        None,
        "deadlock_detected",
        json!({"cycle": [{"waiter": a.as_str(), "holder": b.as_str(), "path": "f"},
                         {"waiter": b.as_str(), "holder": a.as_str(), "path": "g"}],
               "victim": a.as_str()}),
    ));
    let s = g.snapshot(ts(5000), Window::all(100));
    let r = row(&s, &a);
    let kinds: Vec<_> = r.marks.iter().map(|m| (m.kind, m.count)).collect();
    assert_eq!(kinds, [(MarkKind::Denied, 5000), (MarkKind::Deadlock, 1)]);
    assert_eq!(r.merged_marks, 4999);
    assert_eq!((r.marks[0].seq, r.marks[0].at_ms), (1, T0));
}

#[test]
fn a_window_keeps_only_what_overlaps_it() {
    let a = aid(0xa);
    let mut log = Log::new();
    log.add(0, None, "phase_started", json!({"phase": "one"}))
        .add(0, Some(&a), "agent_started", json!({}))
        .add(
            10,
            Some(&a),
            "lock_acquired",
            acquired("early", "write", 1, false),
        )
        .add(20, Some(&a), "lock_released", released("early", 1))
        .add(
            25,
            Some(&a),
            "tool_denied",
            json!({"paths": ["early"], "reason": "no"}),
        )
        .add(30, None, "phase_completed", json!({"phase": "one"}))
        .add(30, None, "phase_started", json!({"phase": "two"}))
        .add(40, Some(&a), "agent_paused", json!({}))
        .add(50, Some(&a), "agent_resumed", json!({}))
        .add(
            55,
            Some(&a),
            "lock_acquired",
            acquired("held", "write", 2, false),
        )
        .add(
            60,
            Some(&a),
            "lock_acquired",
            acquired("late", "write", 3, false),
        )
        .add(70, Some(&a), "lock_released", released("late", 3))
        .add(
            75,
            Some(&a),
            "tool_denied",
            json!({"paths": ["late"], "reason": "no"}),
        )
        .add(
            80,
            None,
            "deadlock_detected",
            json!({"cycle": [{"waiter": a.as_str(), "holder": aid(0xb).as_str(), "path": "z"}],
                   "victim": a.as_str()}),
        );
    let b = log.build();
    let g = b.snapshot(
        ts(100),
        Window {
            from_ms: Some(T0 + 35),
            to_ms: Some(T0 + 58),
            width_px: 1000,
        },
    );
    assert_eq!((g.from_ms, g.to_ms, g.now_ms), (T0 + 35, T0 + 58, T0 + 100));
    let r = row(&g, &a);
    assert_eq!(
        r.spans,
        [
            span(SpanKind::Run, 0, Some(40)),
            span(SpanKind::Paused, 40, Some(50)),
            span(SpanKind::Run, 50, None),
        ]
    );
    assert_eq!(
        r.locks.iter().map(|l| l.path.as_str()).collect::<Vec<_>>(),
        ["held"]
    );
    assert!(r.marks.is_empty());
    assert_eq!(g.phases.len(), 1);
    assert_eq!(g.phases[0].name, "two");
    assert!(g.deadlocks.is_empty());

    // Reversed bounds are read the right way round; an empty builder draws now .. now.
    let swapped = b.snapshot(
        ts(100),
        Window {
            from_ms: Some(T0 + 58),
            to_ms: Some(T0 + 35),
            width_px: 0,
        },
    );
    assert_eq!(
        (swapped.from_ms, swapped.to_ms, swapped.rows[0].locks.len()),
        (T0 + 35, T0 + 58, 1)
    );
    let empty = GanttBuilder::new().snapshot(ts(7), Window::all(10));
    assert_eq!(
        (empty.from_ms, empty.to_ms, empty.folded),
        (T0 + 7, T0 + 7, 0)
    );
}

/// Every event type the daemon records, and one it does not.
fn kind(i: usize) -> &'static str {
    crate::events::EVENT_TYPES
        .get(i)
        .copied()
        .unwrap_or("no_such_type")
}

/// One random event: its type, agent (3: none), path, token, clock step (may go back), and
/// whether its data is garbage.
type Raw = (usize, u8, u8, u64, i64, bool);

fn raw() -> impl proptest::strategy::Strategy<Value = Raw> {
    (
        0..=crate::events::EVENT_TYPES.len(),
        0u8..4,
        0u8..3,
        1u64..6,
        -3i64..40,
        proptest::bool::weighted(0.05),
    )
}

fn events(raws: &[Raw]) -> Vec<EventRecord> {
    let agents = [aid(0xa), aid(0xb), aid(0xc)];
    let mut now = 0i64;
    raws.iter()
        .enumerate()
        .map(|(i, &(k, who, path, token, step, garbage))| {
            now += step;
            let kind = kind(k);
            let agent = agents.get(usize::from(who));
            let other = &agents[(usize::from(who) + 1) % 3];
            let me = agent.unwrap_or(&agents[0]);
            let path = ["a", "b", "c"][usize::from(path)];
            let data = if garbage {
                json!({"path": 3, "token": "x", "cycle": [1], "in_progress": [null]})
            } else {
                match kind {
                    "session_paused" => json!({"in_progress": [me.as_str(), other.as_str()]}),
                    "lock_acquired" => acquired(path, "write", token, token % 2 == 0),
                    "lock_released" if token == 3 => {
                        json!({"path": path, "mode": "read", "token": token, "reason": "upgraded to write"})
                    }
                    "lock_released" | "lock_expired" => released(path, token),
                    "lock_wait" => json!({"path": path, "mode": "write", "wait": 10, "holders": [other.as_str()]}),
                    "lock_timeout" => json!({"path": path}),
                    "tool_denied" => json!({"tool": "Edit", "paths": [path], "why": "locked"}),
                    "conflict_detected" => json!({"path": path, "mode": "write", "holders": [other.as_str()]}),
                    "deadlock_detected" => json!({
                        "cycle": [{"waiter": me.as_str(), "holder": other.as_str(), "path": path},
                                  {"waiter": other.as_str(), "holder": me.as_str(), "path": "z"}],
                        "victim": me.as_str()}),
                    k if k.starts_with("phase_") => json!({"phase": path}),
                    _ => json!({}),
                }
            };
            ev(i as u64 + 1, now, agent, kind, data)
        })
        .collect()
}

fn fold_all(b: &mut GanttBuilder, es: &[EventRecord]) {
    for e in es {
        b.fold(e);
    }
}

proptest! {
    #[test]
    fn any_sequence_folds_into_sorted_disjoint_spans_and_chunks_change_nothing(
        raws in prop::collection::vec(raw(), 0..200),
        cut in 0usize..200,
        width in 1u32..50,
    ) {
        let es = events(&raws);
        let now = ts(10_000);
        let mut one = GanttBuilder::new();
        fold_all(&mut one, &es);
        let whole = one.snapshot(now, Window::all(width));

        let cut = cut.min(es.len());
        let mut two = GanttBuilder::new();
        fold_all(&mut two, &es[..cut]);
        let _ = two.snapshot(now, Window::all(width));
        fold_all(&mut two, &es[cut..]);
        prop_assert_eq!(&two.snapshot(now, Window::all(width)), &whole);
        // A replay of everything is ignored.
        fold_all(&mut two, &es);
        prop_assert_eq!(&two.snapshot(now, Window::all(width)), &whole);
        prop_assert_eq!(whole.folded, es.len() as u64);

        // Saved at the cut (a daemon stopping) and read back, the fold goes on the same.
        let mut saved = GanttBuilder::new();
        fold_all(&mut saved, &es[..cut]);
        let expected_last = es[..cut].last().map(|e| (e.seq, e.ts.timestamp_micros()));
        prop_assert_eq!(saved.last_event(), expected_last);
        let json = serde_json::to_vec(&saved).unwrap();
        let mut back: GanttBuilder = serde_json::from_slice(&json).unwrap();
        prop_assert_eq!(back.last_event(), expected_last);
        fold_all(&mut back, &es[cut..]);
        prop_assert_eq!(&back.snapshot(now, Window::all(width)), &whole);

        for r in &whole.rows {
            for s in &r.spans {
                prop_assert!(s.to_ms.is_none_or(|t| t >= s.from_ms), "{:?}", s);
                prop_assert_eq!(s.path.is_some(), s.kind == SpanKind::Waiting);
            }
            for w in r.spans.windows(2) {
                let end = w[0].to_ms;
                prop_assert!(end.is_some_and(|e| e <= w[1].from_ms), "overlap {:?}", w);
            }
            for l in &r.locks {
                prop_assert!(l.to_ms.is_none_or(|t| t >= l.from_ms), "{:?}", l);
                prop_assert!(l.count >= 1);
            }
        }
        for b in &whole.phases {
            prop_assert!(b.to_ms.is_none_or(|t| t >= b.from_ms), "{:?}", b);
        }

        // Coalescing loses no item: counts add up to the unmerged ones.
        let fine = one.snapshot(now, Window::all(u32::MAX));
        for (r, f) in whole.rows.iter().zip(&fine.rows) {
            let bars: u32 = r.locks.iter().map(|l| l.count).sum();
            let fine_bars: u32 = f.locks.iter().map(|l| l.count).sum();
            prop_assert_eq!(bars, fine_bars);
            prop_assert_eq!(r.merged_locks as usize, bars as usize - r.locks.len());
            let marks: u32 = r.marks.iter().map(|m| m.count).sum();
            let fine_marks: u32 = f.marks.iter().map(|m| m.count).sum();
            prop_assert_eq!(marks, fine_marks);
            prop_assert_eq!(r.merged_marks as usize, marks as usize - r.marks.len());
            prop_assert!(r.locks.len() <= width as usize + 1, "{} bars in {} px", r.locks.len(), width);
        }
    }
}

/// `TYPES` names exactly the types the fold reacts to: each is a known event type, and a
/// type left out of it draws nothing (so asking the timeline for `TYPES` alone loses nothing).
#[test]
fn types_are_known_and_the_others_draw_nothing() {
    for t in super::TYPES {
        assert!(crate::events::EVENT_TYPES.contains(t), "{t}");
    }
    let a = aid(0xa);
    // Data that every drawn type would read something from.
    let data = json!({"path": "x", "paths": ["x"], "mode": "write", "token": 1, "phase": "p",
                      "victim": a.as_str(), "in_progress": [a.as_str()],
                      "cycle": [{"waiter": a.as_str(), "holder": a.as_str(), "path": "x"}]});
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}));
    let before = all(&log.build(), 10);
    for t in crate::events::EVENT_TYPES {
        if super::TYPES.contains(t) {
            continue;
        }
        let mut more = Log(log.0.clone());
        more.add(5, Some(&a), t, data.clone());
        let after = all(&more.build(), 10);
        assert_eq!(after.folded, before.folded + 1, "{t}");
        assert_eq!(
            Gantt {
                folded: before.folded,
                ..after
            },
            before,
            "{t} drew something"
        );
    }
}

/// A wait whose client went away (`lock_wait_cancelled`) ends there: the agent runs again.
#[test]
fn a_cancelled_wait_ends_its_span() {
    let a = aid(0xa);
    let mut log = Log::new();
    log.add(0, Some(&a), "agent_started", json!({}))
        .add(
            1,
            Some(&a),
            "lock_wait",
            json!({"path": "x", "mode": "write"}),
        )
        .add(
            4,
            Some(&a),
            "lock_wait_cancelled",
            json!({"path": "x", "mode": "write"}),
        );
    let g = all(&log.build(), 10);
    assert_eq!(
        row(&g, &a).spans,
        vec![
            span(SpanKind::Run, 0, Some(1)),
            waiting("x", 1, Some(4)),
            span(SpanKind::Run, 4, None),
        ]
    );
}
