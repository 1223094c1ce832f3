//! Benchmarks for the hot domain paths: transition lookup, progress, cycle detection.

use std::hint::black_box;

use chrono::{TimeZone, Utc};
use criterion::{Criterion, criterion_group, criterion_main};
use maos_core::{
    AgentOp, AgentState, CheckpointResult, PhaseOp, PhaseState, SessionOp, SessionState, Workflow,
    find_cycle, progress,
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

criterion_group!(benches, transitions, progress_100, cycle_dag);
criterion_main!(benches);
