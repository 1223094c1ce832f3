//! Benchmarks for the hot domain paths: transition lookup, progress, cycle detection, the lock
//! table (conflict check among 10,000 held locks, deadlock check among 1,000 waiting agents),
//! the scheduler (agents ready to start in a 1,000-agent adaptive DAG).

use std::hint::black_box;

use chrono::{TimeZone, Utc};
use criterion::{BatchSize, Criterion, criterion_group, criterion_main};
use maos_core::plan::RunPolicy;
use maos_core::schedule::{Node, Snapshot, ready};
use maos_core::{
    Acquired, AgentId, AgentOp, AgentState, CheckpointResult, LockError, LockMode, LockPath,
    LockRequest, LockTable, PhaseOp, PhaseState, SessionOp, SessionState, Strategy, Ts, WaitPolicy,
    Workflow, find_cycle, progress,
};

fn transitions(c: &mut Criterion) {
    c.bench_function("transition lookup (all states x ops)", |b| {
        b.iter(|| {
            let mut ok = 0usize;
            for &s in SessionState::ALL {
                for &op in SessionOp::ALL {
                    ok += usize::from(black_box(s).apply(black_box(op)).is_ok());
                }
            }
            for &s in AgentState::ALL {
                for &op in AgentOp::ALL {
                    ok += usize::from(black_box(s).apply(black_box(op)).is_ok());
                }
            }
            for &s in PhaseState::ALL {
                for &op in PhaseOp::ALL {
                    ok += usize::from(black_box(s).apply(black_box(op)).is_ok());
                }
            }
            ok
        })
    });
}

fn progress_100(c: &mut Criterion) {
    let t = |s: i64| {
        Utc.timestamp_opt(1_700_000_000 + s, 0)
            .single()
            .unwrap_or_default()
    };
    let mut wf =
        Workflow::new((0..100).map(|i| format!("phase-{i}")).collect()).expect("distinct names");
    for i in 0..60 {
        let start = i as i64 * 60;
        wf.start(i, t(start)).expect("current phase");
        wf.finish(
            i,
            CheckpointResult::Passed,
            serde_json::Value::Null,
            t(start + 45),
        )
        .expect("running phase");
    }
    wf.start(60, t(3_600)).expect("current phase");
    let agents: Vec<AgentState> = (0..100)
        .map(|i| AgentState::ALL[i % AgentState::ALL.len()])
        .collect();
    let now = t(3_700);
    c.bench_function("progress over 100 phases", |b| {
        b.iter(|| progress(black_box(&wf), black_box(&agents), now))
    });
}

fn cycle_dag(c: &mut Criterion) {
    // 1,000-node DAG: each node depends on up to 3 earlier nodes.
    let nodes: Vec<(u32, Vec<u32>)> = (0..1_000u32)
        .map(|i| {
            let deps = [1, 7, 31]
                .iter()
                .filter_map(|d| i.checked_sub(*d))
                .collect();
            (i, deps)
        })
        .collect();
    c.bench_function("find_cycle 1000-node DAG", |b| {
        b.iter(|| find_cycle(black_box(&nodes)))
    });
}

fn ts(s: i64) -> Ts {
    Utc.timestamp_opt(1_700_000_000 + s, 0)
        .single()
        .unwrap_or_default()
}

/// Agent ids scattered like real (random) uuids, deterministically.
fn agent(n: u128) -> AgentId {
    AgentId::from_uuid(uuid::Uuid::from_u128(
        (n + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15_F39C_C060_5CED_C835),
    ))
}

fn path(s: &str) -> LockPath {
    LockPath::new(s).expect("valid bench path")
}

fn lock_req(who: u128, p: &str, mode: LockMode, wait: WaitPolicy) -> LockRequest {
    LockRequest {
        holder: agent(who),
        born: ts(who as i64),
        path: path(p),
        mode,
        wait,
        ttl_us: 3_600_000_000,
    }
}

fn lock_check_10k(c: &mut Criterion) {
    // 10,000 Write locks of 100 agents spread over 100 x 10 directories, plus 100 Directory
    // locks elsewhere.
    let mut lt = LockTable::new(1);
    let now = ts(0);
    for i in 0..10_000u128 {
        let p = format!("dir{}/sub{}/file{i}.rs", i % 100, (i / 100) % 10);
        let r = lt.acquire(
            lock_req(i % 100, &p, LockMode::Write, WaitPolicy::NoWait),
            now,
        );
        assert!(matches!(r, Ok(Acquired::Granted(_))), "{r:?}");
    }
    for i in 0..100u128 {
        let p = format!("other{i}");
        let r = lt.acquire(
            lock_req(i, &p, LockMode::Directory, WaitPolicy::NoWait),
            now,
        );
        assert!(matches!(r, Ok(Acquired::Granted(_))), "{r:?}");
    }
    assert_eq!(lt.held().count(), 10_100);
    let me = agent(500);
    let held = path("dir42/sub4/file442.rs");
    let free = path("dir42/sub4/new.rs");
    let under_dir = path("other7/deep/x.rs");
    assert_eq!(lt.check(&me, &held, LockMode::Write).holders.len(), 1);
    c.bench_function("lock check: held file among 10k locks", |b| {
        b.iter(|| lt.check(black_box(&me), black_box(&held), LockMode::Write))
    });
    c.bench_function("lock check: free file among 10k locks", |b| {
        b.iter(|| lt.check(black_box(&me), black_box(&free), LockMode::Write))
    });
    c.bench_function("lock check: file under a directory lock among 10k", |b| {
        b.iter(|| lt.check(black_box(&me), black_box(&under_dir), LockMode::Read))
    });
    c.bench_function("lock acquire+release: free file among 10k locks", |b| {
        b.iter(|| {
            let r = lt.acquire(
                lock_req(
                    500,
                    "dir42/sub4/new.rs",
                    LockMode::Write,
                    WaitPolicy::NoWait,
                ),
                now,
            );
            let released = lt.release(&me, &free, false, now);
            // The daemon settles the table's list of changes every batch; so does this loop.
            lt.settle_changed(|_, _, _| false);
            (r.is_ok(), released.is_ok())
        })
    });
}

fn lock_deadlock_1000(c: &mut Criterion) {
    // A chain of 1,000 agents: agent i holds f{i} and waits for f{i+1}; the last one holds f999.
    const N: u128 = 1_000;
    let mut lt = LockTable::new(1);
    let now = ts(0);
    for i in 0..N {
        let r = lt.acquire(
            lock_req(i, &format!("f{i}"), LockMode::Write, WaitPolicy::NoWait),
            now,
        );
        assert!(matches!(r, Ok(Acquired::Granted(_))), "{r:?}");
    }
    for i in 0..N - 1 {
        let p = format!("f{}", i + 1);
        let r = lt.acquire(lock_req(i, &p, LockMode::Write, WaitPolicy::Forever), now);
        assert!(matches!(r, Ok(Acquired::Queued { .. })), "{r:?}");
    }
    assert_eq!(lt.waiters().len(), (N - 1) as usize);
    // The youngest agent closes the 1,000-agent cycle: refused, the table is unchanged.
    let closing = lock_req(N - 1, "f0", LockMode::Write, WaitPolicy::Forever);
    let r = lt.acquire(closing.clone(), now);
    assert!(
        matches!(&r, Err(LockError::Deadlock { cycle }) if cycle.len() == N as usize),
        "{r:?}"
    );
    c.bench_function("deadlock check: request closing a 1000-agent cycle", |b| {
        b.iter(|| lt.acquire(black_box(closing.clone()), now))
    });
    // A newcomer waiting at the head of the chain: the search walks all 1,000 agents, no cycle.
    let newcomer = lock_req(N, "f0", LockMode::Write, WaitPolicy::Forever);
    c.bench_function("deadlock check: wait behind a 1000-agent chain", |b| {
        b.iter_batched_ref(
            || lt.clone(),
            |t| t.acquire(newcomer.clone(), now).is_ok(),
            BatchSize::LargeInput,
        )
    });
}

fn schedule_ready_1000(c: &mut Criterion) {
    // 1,000 agents of an adaptive plan: each depends on up to 3 pseudo-random earlier agents;
    // the first half Completed, the rest Pending.
    let mut seed = 0x2545_F491_4F6C_DD1D_u64;
    let mut next = move || {
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        seed
    };
    let nodes: Vec<Node> = (0..1_000u64)
        .map(|i| {
            let k = if i == 0 { 0 } else { next() % 4 };
            let deps = (0..k)
                .map(|_| usize::try_from(next() % i).unwrap_or(0))
                .collect();
            Node {
                state: if i < 500 {
                    AgentState::Completed
                } else {
                    AgentState::Pending
                },
                paused: false,
                managed: true,
                deps,
                phase: None,
                stage: None,
                apart: Vec::new(),
            }
        })
        .collect();
    let policy = RunPolicy::default();
    let snapshot = Snapshot {
        strategy: Strategy::Adaptive,
        policy: &policy,
        session: SessionState::Running,
        phases: &[],
        nodes: &nodes,
    };
    let n = ready(&snapshot).len();
    assert!(n > 0 && n < 500, "{n} ready");
    c.bench_function(
        "schedule ready: 1000-agent adaptive DAG, half completed",
        |b| b.iter(|| ready(black_box(&snapshot))),
    );
}

/// The plan rule's worst case: the kept-apart relation of a plan that declares the most files a
/// plan may (512: 8 agents of 64, every pattern under one `src/` so no pair is cut short by its
/// first segment), once per session in the daemon.
fn plan_apart_512_files(c: &mut Criterion) {
    use maos_core::plan::{AgentSpec, Serialise, compare, parse};
    let mut text = "objective = \"bench\"\n".to_string();
    for i in 0..8 {
        let files: Vec<String> = (0..64)
            .map(|k| format!("\"src/m{i}/**/f{k}*.rs\""))
            .collect();
        text += &format!(
            "[[agent]]\nname = \"a{i}\"\ntask = \"t\"\ncommand = [\"true\"]\nfiles = [{}]\n",
            files.join(", ")
        );
    }
    let plan = parse(&text).expect("the bench's plan");
    let refs: Vec<Option<&AgentSpec>> = plan.agents.iter().map(Some).collect();
    let apart = |refs: &[Option<&AgentSpec>]| {
        compare(refs)
            .expect("within the budget")
            .apart(refs, Serialise::None)
    };
    assert!(apart(&refs).iter().all(Vec::is_empty));
    c.bench_function("plan apart: 8 agents x 64 globs, none overlapping", |b| {
        b.iter(|| apart(black_box(&refs)))
    });
}

/// A plan of 64 agents of 8 patterns each (paths, directories, globs; agents `i` and `i + 8k`
/// share one file), and the session's scheduler snapshot with agents 0-7 running: the other 56
/// wait for them.
fn plan_64x8() -> (Vec<maos_core::plan::AgentSpec>, Vec<Node>) {
    use maos_core::plan::{Serialise, compare, parse};
    let mut text = "objective = \"bench\"\nstrategy = \"parallel\"\n".to_string();
    for i in 0..64 {
        let files = [
            format!("crates/c{i}/src/**"),
            format!("crates/c{i}/tests/t{i}.rs"),
            format!("crates/c{i}/Cargo.toml"),
            format!("docs/d{i}/*.md"),
            format!("**/m{i}_*.rs"),
            format!("src/net/n{i}?.rs"),
            format!("tests/it_{i}/**/*.rs"),
            format!("shared/s{}.rs", i % 8),
        ];
        let files: Vec<String> = files.iter().map(|f| format!("{f:?}")).collect();
        text += &format!(
            "[[agent]]\nname = \"a{i}\"\ntask = \"t\"\ncommand = [\"true\"]\nfiles = [{}]\n",
            files.join(", ")
        );
    }
    let plan = parse(&text).expect("the bench's plan");
    let refs: Vec<Option<&maos_core::plan::AgentSpec>> = plan.agents.iter().map(Some).collect();
    let rel = compare(&refs)
        .expect("within the budget")
        .apart(&refs, Serialise::None);
    let nodes = rel
        .into_iter()
        .enumerate()
        .map(|(i, apart)| Node {
            state: if i < 8 {
                AgentState::Running
            } else {
                AgentState::Pending
            },
            paused: false,
            managed: true,
            deps: Vec::new(),
            phase: None,
            stage: None,
            apart,
        })
        .collect();
    (plan.agents, nodes)
}

/// Issue 35's plan rule at a session's creation and on each scheduling round, for a plan of 64
/// agents of 8 patterns: the one comparison and what derives from it, a round that holds 56
/// agents, and the worst a plan can cost before it is refused (the budget spent).
fn plan_files(c: &mut Criterion) {
    use maos_core::plan::{AgentSpec, Serialise, compare};
    use maos_core::schedule::step_and_holds;
    let (agents, nodes) = plan_64x8();
    let refs: Vec<Option<&AgentSpec>> = agents.iter().map(Some).collect();
    let policy = RunPolicy::default();
    let snapshot = Snapshot {
        strategy: Strategy::Parallel,
        policy: &policy,
        session: SessionState::Running,
        phases: &[],
        nodes: &nodes,
    };
    let (actions, holds) = step_and_holds(&snapshot);
    assert!(
        actions.is_empty() && holds.len() == 56,
        "{actions:?} {holds:?}"
    );
    c.bench_function(
        "plan files 64x8: at creation (compare, report, apart)",
        |b| {
            b.iter(|| {
                let pairs = compare(black_box(&refs)).expect("within the budget");
                (pairs.report(&refs), pairs.apart(&refs, Serialise::None))
            })
        },
    );
    c.bench_function("plan files 64x8: a scheduling round, 56 held", |b| {
        b.iter(|| step_and_holds(black_box(&snapshot)))
    });
    let costly: Vec<AgentSpec> = (0..8)
        .map(|i| {
            let mut a = agents[i].clone();
            a.files = (0..64)
                .map(|k| format!("*{}{}{i}x{k:02}", "a*".repeat(7), "a".repeat(196)))
                .collect();
            a
        })
        .collect();
    let refs: Vec<Option<&AgentSpec>> = costly.iter().map(Some).collect();
    assert!(compare(&refs).is_err());
    let mut g = c.benchmark_group("plan files");
    g.sample_size(10);
    g.bench_function("refused at the budget (8 agents x 64 costly globs)", |b| {
        b.iter(|| compare(black_box(&refs)).is_err())
    });
    g.finish();
}

criterion_group!(
    benches,
    plan_files,
    plan_apart_512_files,
    transitions,
    progress_100,
    cycle_dag,
    lock_check_10k,
    lock_deadlock_1000,
    schedule_ready_1000
);
criterion_main!(benches);
