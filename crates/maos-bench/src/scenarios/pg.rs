//! Fleet mode's open question, measured: how a PostgreSQL shared by several daemons should
//! serialise conflicting lock acquires. A minimal fleet lock table (`locks` keyed by fencing
//! token, rows per (project, path) with mode read or write, tokens from one global sequence,
//! leases by PostgreSQL's `now()`) and one acquire function per way of serialising:
//!
//! - `row`: `SELECT … FOR UPDATE` of the path's row in `lock_paths` (READ COMMITTED);
//! - `advisory`: `pg_advisory_xact_lock(hashtextextended(project ‖ path))` (READ COMMITTED);
//! - `serializable`: no lock, SERIALIZABLE transactions retried on 40001/40P01;
//! - advisory with a NOTIFY in every release (what a release with waiters adds);
//! - advisory, batched: each daemon commits whatever its agents asked while its previous
//!   transaction committed, in one transaction (the group commit maosd does on SQLite), the
//!   batch's paths locked in one order for every daemon;
//! - batched, each request also recording an event numbered per project in commit order (the
//!   project row taken last in the transaction): what the timeline adds;
//! - batched, with a NOTIFY after each commit in a transaction of its own with
//!   `synchronous_commit = off`: what telling the other daemons costs when it is a hint;
//! - batched with multi-granularity keys: each path exclusive, every directory above it shared
//!   (what directory and workspace locks need).
//!
//! Each acquire and each release (each batch) is one round trip (a PL/pgSQL function in its
//! own implicit transaction, committed with PostgreSQL's default durability:
//! `synchronous_commit = on`). Three writers stand in for three daemons, each with one
//! connection per agent (batched: one connection and a queue); the ways run in turns, three
//! rounds, so that a noisy neighbour hurts them alike. Every agent
//! acquires a random path (one in five a read) without waiting and releases what it got at
//! once. Before the timed runs each way is checked: every agent of every writer at once asks
//! for a write lock on the same few paths and keeps it; more than one holder of a path fails
//! the run. Then LISTEN/NOTIFY: a release that notifies on one connection, the waiter's
//! `recv` on another.

use std::str::FromStr;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use maos_tests::client::Res;
use maos_tests::postgres::Postgres;
use sqlx::postgres::{PgConnectOptions, PgListener, PgPool, PgPoolOptions};
use tokio::sync::{mpsc, oneshot};

use crate::opts::Opts;
use crate::report::{Metric, pct, print_human};
use crate::workload::Rng;

const SCHEMA: &str = r#"
CREATE SEQUENCE fence;
CREATE TABLE lock_paths (
    project text NOT NULL,
    path    text NOT NULL,
    PRIMARY KEY (project, path)
);
CREATE TABLE locks (
    token      bigint PRIMARY KEY,
    project    text NOT NULL,
    path       text NOT NULL,
    holder     text NOT NULL,
    mode       text NOT NULL CHECK (mode IN ('read', 'write')),
    expires_at timestamptz NOT NULL
);
CREATE INDEX locks_path ON locks (project, path);
-- The timeline: one event per request, numbered per project in commit order (the project row,
-- taken last in a batch, hands out the numbers).
CREATE TABLE projects (key text PRIMARY KEY, last_seq bigint NOT NULL);
INSERT INTO projects VALUES ('proj', 0);
CREATE TABLE events (
    project text NOT NULL,
    seq     bigint NOT NULL,
    ts      timestamptz NOT NULL,
    type    text NOT NULL,
    data    jsonb NOT NULL,
    PRIMARY KEY (project, seq)
);

-- The decision, under whatever serialises it: expired leases of the path go (by PostgreSQL's
-- clock), a conflicting holder refuses, else a grant with the next token.
CREATE FUNCTION acquire_core(p text, k text, h text, m text, ttl_ms int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE t bigint;
BEGIN
    DELETE FROM locks WHERE project = p AND path = k AND expires_at < now();
    IF EXISTS (SELECT 1 FROM locks WHERE project = p AND path = k AND holder <> h
               AND (mode = 'write' OR m = 'write')) THEN
        RETURN NULL;
    END IF;
    INSERT INTO locks VALUES (nextval('fence'), p, k, h, m, now() + ttl_ms * interval '1 ms')
        RETURNING token INTO t;
    RETURN t;
END $$;

CREATE FUNCTION acquire_row(p text, k text, h text, m text, ttl_ms int) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM 1 FROM lock_paths WHERE project = p AND path = k FOR UPDATE;
    IF NOT FOUND THEN
        INSERT INTO lock_paths VALUES (p, k) ON CONFLICT DO NOTHING;
        PERFORM 1 FROM lock_paths WHERE project = p AND path = k FOR UPDATE;
    END IF;
    RETURN acquire_core(p, k, h, m, ttl_ms);
END $$;

CREATE FUNCTION acquire_advisory(p text, k text, h text, m text, ttl_ms int) RETURNS bigint
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(hashtextextended(p || E'\n' || k, 0));
    RETURN acquire_core(p, k, h, m, ttl_ms);
END $$;

CREATE FUNCTION acquire_serializable(p text, k text, h text, m text, ttl_ms int) RETURNS bigint
LANGUAGE sql AS $$ SELECT acquire_core(p, k, h, m, ttl_ms) $$;

CREATE FUNCTION release(t bigint, notify boolean) RETURNS boolean
LANGUAGE plpgsql AS $$
DECLARE p text; k text;
BEGIN
    DELETE FROM locks WHERE token = t RETURNING project, path INTO p, k;
    IF NOT FOUND THEN
        RETURN false;
    END IF;
    IF notify THEN
        PERFORM pg_notify('maos_released', p || E'\n' || k);
    END IF;
    RETURN true;
END $$;

-- A daemon's group commit: the releases and acquires its agents asked for while its last
-- batch committed, in one transaction. Every path of the batch is locked first, in one order
-- for every daemon, so two daemons' batches never deadlock. A refusal is token 0.
-- With `timeline`, the batch also records an event per request, numbered last (the project
-- row is held only for the end of the transaction).
-- With `tree`, the keys are multi-granularity: each path exclusive and every directory above it
-- (up to the root, '') shared, so two files of one directory never wait for each other and a
-- directory lock would wait for every batch under it.
CREATE FUNCTION batch(rel bigint[], ps text[], ks text[], hs text[], ms text[], ttl_ms int,
                      timeline boolean, tree boolean, OUT released int, OUT tokens bigint[])
LANGUAGE plpgsql AS $$
DECLARE lk bigint; ex boolean; i int; n int; last bigint;
BEGIN
    DELETE FROM locks WHERE token = ANY (rel);
    GET DIAGNOSTICS released = ROW_COUNT;
    FOR lk, ex IN
        SELECT h, bool_or(x) FROM (
            SELECT hashtextextended(p || E'\n' || k, 0) AS h, true AS x
            FROM unnest(ps, ks) AS u (p, k)
            UNION ALL
            SELECT hashtextextended(p || E'\n' || array_to_string(parts[1:j], '/'), 0), false
            FROM unnest(ps, ks) AS u (p, k),
                 LATERAL (SELECT string_to_array(k, '/') AS parts) AS s,
                 LATERAL generate_series(0, cardinality(parts) - 1) AS j
            WHERE tree
        ) AS keys GROUP BY h ORDER BY h
    LOOP
        IF ex THEN
            PERFORM pg_advisory_xact_lock(lk);
        ELSE
            PERFORM pg_advisory_xact_lock_shared(lk);
        END IF;
    END LOOP;
    tokens := '{}';
    FOR i IN 1 .. coalesce(array_length(ps, 1), 0) LOOP
        tokens := array_append(tokens, coalesce(acquire_core(ps[i], ks[i], hs[i], ms[i], ttl_ms), 0));
    END LOOP;
    IF timeline THEN
        n := coalesce(array_length(rel, 1), 0) + coalesce(array_length(ps, 1), 0);
        UPDATE projects SET last_seq = last_seq + n WHERE key = 'proj' RETURNING last_seq INTO last;
        INSERT INTO events
            SELECT 'proj', last - n + o, now(), 'lock_released', jsonb_build_object('token', t)
            FROM unnest(rel) WITH ORDINALITY AS r (t, o);
        INSERT INTO events
            SELECT 'proj', last - n + coalesce(array_length(rel, 1), 0) + o, now(),
                   CASE WHEN t = 0 THEN 'conflict_detected' ELSE 'lock_acquired' END,
                   jsonb_build_object('path', k, 'token', t)
            FROM unnest(ks, tokens) WITH ORDINALITY AS a (k, t, o);
    END IF;
END $$;
"#;

#[derive(Clone, Copy, PartialEq, Eq)]
enum Way {
    Row,
    Advisory,
    Serializable,
    /// Advisory, and every release notifies (what a release with waiters costs).
    AdvisoryNotify,
    /// Advisory, one transaction per daemon for whatever its agents asked meanwhile.
    Batched,
    /// Batched, and each request's event numbered in commit order by the project row.
    BatchedTimeline,
    /// Batched, and a NOTIFY after each commit, sent in its own transaction with
    /// `synchronous_commit = off` (a hint: the commit is durable already).
    BatchedNotify,
    /// Batched, with multi-granularity keys (every ancestor directory shared).
    BatchedTree,
}

const WAYS: [Way; 8] = [
    Way::Row,
    Way::Advisory,
    Way::Serializable,
    Way::AdvisoryNotify,
    Way::Batched,
    Way::BatchedTimeline,
    Way::BatchedNotify,
    Way::BatchedTree,
];

impl Way {
    fn name(self) -> &'static str {
        match self {
            Way::Row => "row (FOR UPDATE)",
            Way::Advisory => "advisory xact lock",
            Way::Serializable => "serializable + retry",
            Way::AdvisoryNotify => "advisory, NOTIFY on release",
            Way::Batched => "advisory, batched per daemon",
            Way::BatchedTimeline => "batched, with ordered events",
            Way::BatchedNotify => "batched, NOTIFY after commit",
            Way::BatchedTree => "batched, directory keys shared",
        }
    }
    fn acquire_sql(self) -> &'static str {
        match self {
            Way::Row => "SELECT acquire_row($1, $2, $3, $4, $5)",
            Way::Serializable => "SELECT acquire_serializable($1, $2, $3, $4, $5)",
            Way::Advisory
            | Way::AdvisoryNotify
            | Way::Batched
            | Way::BatchedTimeline
            | Way::BatchedNotify
            | Way::BatchedTree => "SELECT acquire_advisory($1, $2, $3, $4, $5)",
        }
    }
    /// Whether each daemon commits its agents' requests in batches.
    fn batched(self) -> bool {
        matches!(
            self,
            Way::Batched | Way::BatchedTimeline | Way::BatchedNotify | Way::BatchedTree
        )
    }
}

/// What the timed runs of one way counted.
#[derive(Default)]
struct Counts {
    grants: u64,
    refused: u64,
    retries: u64,
    batches: u64,
    /// Seconds timed.
    secs: f64,
    samples: Vec<u64>,
}

impl Counts {
    fn add(&mut self, c: Counts) {
        self.grants += c.grants;
        self.refused += c.refused;
        self.retries += c.retries;
        self.batches += c.batches;
        self.secs += c.secs;
        self.samples.extend(c.samples);
    }
}

fn sql_err(what: &str) -> impl Fn(sqlx::Error) -> String + '_ {
    move |e| format!("{what}: {e}")
}

/// Whether PostgreSQL refused the transaction for a serialization failure or a deadlock
/// (the two a SERIALIZABLE transaction is retried on).
fn retryable(e: &sqlx::Error) -> bool {
    matches!(e, sqlx::Error::Database(db)
        if matches!(db.code().as_deref(), Some("40001") | Some("40P01")))
}

/// One agent's request to its daemon's batcher.
enum Op {
    Acquire {
        path: String,
        holder: String,
        mode: &'static str,
        reply: oneshot::Sender<Res<Option<i64>>>,
    },
    Release {
        token: i64,
        reply: oneshot::Sender<Res<()>>,
    },
}

/// A daemon as its agents see it: a pool with one connection per agent, or (batched) one
/// connection fed by a queue.
#[derive(Clone)]
enum Writer {
    Pool(PgPool, Way),
    Batch(mpsc::Sender<Op>, Arc<AtomicU64>),
}

impl Writer {
    async fn acquire(
        &self,
        path: &str,
        holder: &str,
        mode: &'static str,
        retries: &mut u64,
    ) -> Res<Option<i64>> {
        let (pool, way) = match self {
            Writer::Pool(pool, way) => (pool, *way),
            Writer::Batch(tx, _) => {
                let (reply, rx) = oneshot::channel();
                let op = Op::Acquire {
                    path: path.to_string(),
                    holder: holder.to_string(),
                    mode,
                    reply,
                };
                tx.send(op).await.map_err(|_| "the batcher is gone")?;
                return rx.await.map_err(|_| "the batcher dropped an acquire")?;
            }
        };
        loop {
            let r: Result<(Option<i64>,), _> = sqlx::query_as(way.acquire_sql())
                .bind(PROJECT)
                .bind(path)
                .bind(holder)
                .bind(mode)
                .bind(TTL_MS)
                .fetch_one(pool)
                .await;
            match r {
                Ok((t,)) => return Ok(t),
                Err(e) if way == Way::Serializable && retryable(&e) => *retries += 1,
                Err(e) => return Err(format!("acquire ({}): {e}", way.name())),
            }
        }
    }

    async fn release(&self, token: i64, retries: &mut u64) -> Res<()> {
        let (pool, way) = match self {
            Writer::Pool(pool, way) => (pool, *way),
            Writer::Batch(tx, _) => {
                let (reply, rx) = oneshot::channel();
                tx.send(Op::Release { token, reply })
                    .await
                    .map_err(|_| "the batcher is gone")?;
                return rx.await.map_err(|_| "the batcher dropped a release")?;
            }
        };
        loop {
            let r: Result<(bool,), _> = sqlx::query_as("SELECT release($1, $2)")
                .bind(token)
                .bind(way == Way::AdvisoryNotify)
                .fetch_one(pool)
                .await;
            match r {
                Ok((true,)) => return Ok(()),
                Ok((false,)) => return Err(format!("release of token {token}: it was not held")),
                Err(e) if way == Way::Serializable && retryable(&e) => *retries += 1,
                Err(e) => return Err(format!("release ({}): {e}", way.name())),
            }
        }
    }
}

const PROJECT: &str = "proj";
const TTL_MS: i32 = 600_000;
/// Most requests one batch carries.
const MAX_BATCH: usize = 512;

/// The batcher of one daemon: takes everything queued, commits it in one `batch` call, answers.
async fn batcher(
    pool: PgPool,
    timeline: bool,
    tree: bool,
    notify: Option<PgPool>,
    mut rx: mpsc::Receiver<Op>,
    batches: Arc<AtomicU64>,
) {
    while let Some(first) = rx.recv().await {
        let mut ops = vec![first];
        while ops.len() < MAX_BATCH {
            match rx.try_recv() {
                Ok(op) => ops.push(op),
                Err(_) => break,
            }
        }
        let (mut rel, mut ps, mut ks, mut hs, mut ms) = (vec![], vec![], vec![], vec![], vec![]);
        for op in &ops {
            match op {
                Op::Release { token, .. } => rel.push(*token),
                Op::Acquire {
                    path, holder, mode, ..
                } => {
                    ps.push(PROJECT);
                    ks.push(path.as_str());
                    hs.push(holder.as_str());
                    ms.push(*mode);
                }
            }
        }
        let r: Result<(i32, Vec<i64>), _> =
            sqlx::query_as("SELECT released, tokens FROM batch($1, $2, $3, $4, $5, $6, $7, $8)")
                .bind(&rel)
                .bind(&ps)
                .bind(&ks)
                .bind(&hs)
                .bind(&ms)
                .bind(TTL_MS)
                .bind(timeline)
                .bind(tree)
                .fetch_one(&pool)
                .await;
        batches.fetch_add(1, Ordering::Relaxed);
        let r = r
            .map_err(|e| format!("batch: {e}"))
            .and_then(|(n, tokens)| {
                if n as usize != rel.len() || tokens.len() != ps.len() {
                    Err(format!(
                        "batch: {n} of {} releases, {} tokens for {} acquires",
                        rel.len(),
                        tokens.len(),
                        ps.len()
                    ))
                } else {
                    Ok(tokens)
                }
            });
        let mut tokens = r.as_ref().map(|t| t.iter()).ok();
        for op in ops {
            match op {
                Op::Acquire { reply, .. } => {
                    let t = match (&r, tokens.as_mut().and_then(Iterator::next)) {
                        (Ok(_), Some(&t)) => Ok((t != 0).then_some(t)),
                        (Err(e), _) => Err(e.clone()),
                        (Ok(_), None) => Err("batch: a token short".into()),
                    };
                    let _ = reply.send(t);
                }
                Op::Release { reply, .. } => {
                    let _ = reply.send(r.as_ref().map(|_| ()).map_err(Clone::clone));
                }
            }
        }
        // After the answers: the other daemons' hint that this project moved.
        if let Some(n) = &notify {
            let _ = sqlx::query("SELECT pg_notify('maos_project', $1)")
                .bind(PROJECT)
                .execute(n)
                .await;
        }
    }
}

/// `n` daemons for `way`: a pool with one connection per agent each (SERIALIZABLE for that
/// way), or one connection and a batcher each.
async fn writers(pg: &Postgres, way: Way, n: usize, agents: usize) -> Res<Vec<Writer>> {
    let mut opts = PgConnectOptions::from_str(&pg.url()).map_err(sql_err("url"))?;
    if way == Way::Serializable {
        opts = opts.options([("default_transaction_isolation", "serializable")]);
    }
    let batched = way.batched();
    let conns = if batched { 1 } else { agents as u32 };
    let mut out = Vec::new();
    for _ in 0..n {
        let pool = PgPoolOptions::new()
            .max_connections(conns)
            .min_connections(conns)
            .acquire_timeout(Duration::from_secs(30))
            .connect_with(opts.clone())
            .await
            .map_err(sql_err("connect"))?;
        out.push(if batched {
            let (tx, rx) = mpsc::channel(4096);
            let batches = Arc::new(AtomicU64::new(0));
            let timeline = way == Way::BatchedTimeline;
            let notify = if way == Way::BatchedNotify {
                let hint = opts.clone().options([("synchronous_commit", "off")]);
                Some(
                    PgPoolOptions::new()
                        .max_connections(1)
                        .connect_with(hint)
                        .await
                        .map_err(sql_err("connect"))?,
                )
            } else {
                None
            };
            let tree = way == Way::BatchedTree;
            tokio::spawn(batcher(pool, timeline, tree, notify, rx, batches.clone()));
            Writer::Batch(tx, batches)
        } else {
            Writer::Pool(pool, way)
        });
    }
    Ok(out)
}

async fn close(writers: Vec<Writer>) {
    for w in writers {
        if let Writer::Pool(p, _) = w {
            p.close().await;
        }
    }
}

async fn reset(admin: &PgPool) -> Res<()> {
    sqlx::query("TRUNCATE locks, lock_paths, events")
        .execute(admin)
        .await
        .map_err(sql_err("truncate"))?;
    Ok(())
}

/// Every agent of every writer at once asks for a write lock on each of a few paths and keeps
/// what it gets: each path must end with exactly one holder and one token.
async fn check_exclusion(admin: &PgPool, writers: &[Writer], way: Way, agents: usize) -> Res<()> {
    reset(admin).await?;
    const PATHS: usize = 5;
    let start = Arc::new(tokio::sync::Barrier::new(writers.len() * agents));
    let mut tasks = Vec::new();
    for (w, writer) in writers.iter().enumerate() {
        for a in 0..agents {
            let writer = writer.clone();
            let start = start.clone();
            tasks.push(tokio::spawn(async move {
                let holder = format!("w{w}a{a}");
                start.wait().await;
                let mut retries = 0;
                for i in 0..PATHS {
                    let path = format!("src/shared{i}.rs");
                    writer
                        .acquire(&path, &holder, "write", &mut retries)
                        .await?;
                }
                Res::Ok(())
            }));
        }
    }
    for t in tasks {
        t.await.map_err(|e| format!("agent task: {e}"))??;
    }
    let rows: Vec<(String, i64, i64)> = sqlx::query_as(
        "SELECT path, count(*), count(DISTINCT token) FROM locks GROUP BY path ORDER BY path",
    )
    .fetch_all(admin)
    .await
    .map_err(sql_err("count holders"))?;
    if rows.len() != PATHS || rows.iter().any(|(_, n, t)| *n != 1 || *t != 1) {
        return Err(format!(
            "{}: conflicting holders at once (path, holders, tokens): {rows:?}",
            way.name()
        ));
    }
    reset(admin).await
}

/// Every agent acquires random paths (one in five a read) without waiting, releasing each grant
/// at once: a second of warm-up, then `secs` timed.
async fn timed(writers: &[Writer], agents: usize, paths: usize, secs: f64) -> Res<Counts> {
    let stop = Arc::new(AtomicBool::new(false));
    let warm = Arc::new(AtomicBool::new(false));
    let mut tasks = Vec::new();
    for (w, writer) in writers.iter().enumerate() {
        for a in 0..agents {
            let writer = writer.clone();
            let stop = stop.clone();
            let warm = warm.clone();
            tasks.push(tokio::spawn(async move {
                let holder = format!("w{w}a{a}");
                let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ ((w * 1000 + a + 1) as u64));
                let mut c = Counts::default();
                while !stop.load(Ordering::Relaxed) {
                    let path = format!("src/file{:05}.rs", rng.below(paths));
                    let mode = if rng.below(5) == 0 { "read" } else { "write" };
                    let timing = warm.load(Ordering::Relaxed);
                    let t0 = Instant::now();
                    let token = writer.acquire(&path, &holder, mode, &mut c.retries).await?;
                    let ns = t0.elapsed().as_nanos() as u64;
                    if timing {
                        c.samples.push(ns);
                        if token.is_some() {
                            c.grants += 1;
                        } else {
                            c.refused += 1;
                        }
                    }
                    if let Some(t) = token {
                        writer.release(t, &mut c.retries).await?;
                    }
                }
                Res::Ok(c)
            }));
        }
    }
    tokio::time::sleep(Duration::from_secs(1)).await;
    let before: u64 = batches(writers);
    warm.store(true, Ordering::Relaxed);
    let t0 = Instant::now();
    tokio::time::sleep(Duration::from_secs_f64(secs)).await;
    stop.store(true, Ordering::Relaxed);
    let mut all = Counts::default();
    for t in tasks {
        let c = t.await.map_err(|e| format!("agent task: {e}"))??;
        all.add(c);
    }
    // The agents' last round trips (at most one each) ran past the stop: timed to the last.
    all.secs = t0.elapsed().as_secs_f64();
    all.batches = batches(writers) - before;
    Ok(all)
}

/// The timeline the batches wrote has no gap: every number handed out was committed.
async fn check_timeline(admin: &PgPool) -> Res<()> {
    let (n, span): (i64, i64) =
        sqlx::query_as("SELECT count(*), coalesce(max(seq) - min(seq) + 1, 0) FROM events")
            .fetch_one(admin)
            .await
            .map_err(sql_err("count events"))?;
    if n == 0 || n != span {
        return Err(format!("the timeline has {n} events over {span} numbers"));
    }
    Ok(())
}

fn batches(writers: &[Writer]) -> u64 {
    writers
        .iter()
        .map(|w| match w {
            Writer::Batch(_, n) => n.load(Ordering::Relaxed),
            Writer::Pool(..) => 0,
        })
        .sum()
}

/// Releases (with NOTIFY) committed on one connection, each to the listener on another
/// receiving it: (release → received, the release's own round trip).
async fn notify_latency(pg: &Postgres, n: usize) -> Res<(Vec<u64>, Vec<u64>)> {
    let mut listener = PgListener::connect(&pg.url())
        .await
        .map_err(sql_err("listener"))?;
    listener
        .listen("maos_released")
        .await
        .map_err(sql_err("LISTEN"))?;
    let pool = PgPoolOptions::new()
        .max_connections(1)
        .connect(&pg.url())
        .await
        .map_err(sql_err("connect"))?;
    let holder = Writer::Pool(pool, Way::AdvisoryNotify);
    let mut woken = Vec::with_capacity(n);
    let mut committed = Vec::with_capacity(n);
    let mut retries = 0;
    for i in 0..n + 100 {
        let path = format!("src/n{i}.rs");
        let token = holder
            .acquire(&path, "holder", "write", &mut retries)
            .await?
            .ok_or("a free path was refused")?;
        let t0 = Instant::now();
        holder.release(token, &mut retries).await?;
        let rtt = t0.elapsed().as_nanos() as u64;
        let note = tokio::time::timeout(Duration::from_secs(10), listener.recv())
            .await
            .map_err(|_| "no notification within 10 s of a release".to_string())?
            .map_err(sql_err("recv"))?;
        let ns = t0.elapsed().as_nanos() as u64;
        if note.payload() != format!("{PROJECT}\n{path}") {
            return Err(format!("notified {:?}, released {path}", note.payload()));
        }
        if i >= 100 {
            woken.push(ns);
            committed.push(rtt);
        }
    }
    Ok((woken, committed))
}

/// Acquire p50 and p99 of sorted samples.
fn acquire_rows(scenario: &str, tag: &str, sorted: &[u64]) -> [Metric; 2] {
    [
        Metric::new(
            scenario,
            &format!("{tag}: acquire p50"),
            pct(sorted, 50.0),
            "µs",
        ),
        Metric::new(
            scenario,
            &format!("{tag}: acquire p99"),
            pct(sorted, 99.0),
            "µs",
        ),
    ]
}

pub fn scen_pg_serialise(o: &Opts, _sync: &str) -> Res<Vec<Metric>> {
    const WRITERS: usize = 3;
    const ROUNDS: usize = 3;
    let agents = o.clients.unwrap_or(20);
    let secs = o.duration.unwrap_or(3.0);
    let path_sets: Vec<usize> = match o.paths {
        Some(p) => vec![p],
        None => vec![1000, 20],
    };
    let pg = Postgres::start()?;
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .map_err(|e| format!("tokio runtime: {e}"))?;
    let scenario = "pg-serialise";
    let metrics = rt.block_on(async {
        let admin = PgPoolOptions::new()
            .max_connections(2)
            .connect(&pg.url())
            .await
            .map_err(sql_err("connect"))?;
        sqlx::raw_sql(SCHEMA)
            .execute(&admin)
            .await
            .map_err(sql_err("schema"))?;
        let (version,): (String,) = sqlx::query_as("SHOW server_version")
            .fetch_one(&admin)
            .await
            .map_err(sql_err("version"))?;
        println!(
            "PostgreSQL {version}, synchronous_commit on, {WRITERS} writers x {agents} agents"
        );
        for way in WAYS {
            let w = writers(&pg, way, WRITERS, agents).await?;
            check_exclusion(&admin, &w, way, agents).await?;
            close(w).await;
        }
        let mut metrics = Vec::new();
        for &paths in &path_sets {
            // Rounds of every way in turn, so that a noisy neighbour hurts them alike.
            let mut counts: Vec<Counts> = WAYS.iter().map(|_| Counts::default()).collect();
            for _ in 0..ROUNDS {
                for (i, way) in WAYS.iter().enumerate() {
                    reset(&admin).await?;
                    let w = writers(&pg, *way, WRITERS, agents).await?;
                    counts[i].add(timed(&w, agents, paths, secs).await?);
                    close(w).await;
                    if *way == Way::BatchedTimeline {
                        check_timeline(&admin).await?;
                    }
                }
            }
            for (way, mut c) in WAYS.iter().zip(counts) {
                c.samples.sort_unstable();
                let tag = format!("{} / {paths} paths", way.name());
                let attempts = c.grants + c.refused;
                let mut rows = vec![
                    Metric::new(
                        scenario,
                        &format!("{tag}: grants/s"),
                        c.grants as f64 / c.secs,
                        "",
                    ),
                    Metric::new(
                        scenario,
                        &format!("{tag}: refused (held)"),
                        c.refused as f64 * 100.0 / attempts.max(1) as f64,
                        "%",
                    ),
                ];
                rows.extend(acquire_rows(scenario, &tag, &c.samples));
                if *way == Way::Serializable {
                    rows.push(Metric::new(
                        scenario,
                        &format!("{tag}: retries per grant"),
                        c.retries as f64 / c.grants.max(1) as f64,
                        "",
                    ));
                }
                if way.batched() {
                    rows.push(Metric::new(
                        scenario,
                        &format!("{tag}: requests per commit"),
                        // A grant is an acquire and a release; a refusal one acquire.
                        (2 * c.grants + c.refused) as f64 / c.batches.max(1) as f64,
                        "",
                    ));
                }
                print_human(&format!("{scenario}: {tag}"), &rows);
                metrics.extend(rows);
            }
        }
        // The round trip alone: one agent of one daemon, nothing else running.
        for way in [Way::Advisory, Way::Batched] {
            reset(&admin).await?;
            let w = writers(&pg, way, 1, 1).await?;
            let mut c = timed(&w, 1, 1000, secs).await?;
            close(w).await;
            c.samples.sort_unstable();
            let tag = format!("{}, 1 agent alone", way.name());
            let rows = acquire_rows(scenario, &tag, &c.samples);
            print_human(&format!("{scenario}: {tag}"), &rows);
            metrics.extend(rows);
        }
        let (mut n, mut r) = notify_latency(&pg, o.requests.unwrap_or(2000)).await?;
        n.sort_unstable();
        r.sort_unstable();
        let rows = vec![
            Metric::new(
                scenario,
                "release (NOTIFY) round trip p50",
                pct(&r, 50.0),
                "µs",
            ),
            Metric::new(
                scenario,
                "release → NOTIFY received p50",
                pct(&n, 50.0),
                "µs",
            ),
            Metric::new(
                scenario,
                "release → NOTIFY received p99",
                pct(&n, 99.0),
                "µs",
            ),
        ];
        print_human(&format!("{scenario}: LISTEN/NOTIFY wake-up"), &rows);
        metrics.extend(rows);
        admin.close().await;
        Res::Ok(metrics)
    })?;
    drop(pg);
    Ok(metrics)
}
