//! Managed agents, part 2: one agent's start, from the daemon's decision to its pid committed,
//! over a plan of many agents run in sequence.

use maos_proto::req;
use std::fmt::Write as _;
use std::fs;
use std::time::{Duration, Instant};

use maos_core::AgentState;
use maos_proto::{Reply, Request};
use maos_tests::client::Res;

use crate::harness::{self, log_line_us};
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, pct, print_human};
use crate::workload::show_session;

/// `--agents` agents (default 200), each `true`, run one after the other by the daemon: from
/// the decision to start one (`agent_started`) to its pid committed (`agent_process_started`),
/// which spans the commit, spawning `maosd supervise`, its fork/exec of the agent and its
/// answer, read from the timeline.
pub fn scen_agent_start(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.agents.unwrap_or(200);
    let mut d = harness::start(sync)?;
    let mut c = d.client()?;
    let mut text = String::from("objective = \"bench: agent start\"\nstrategy = \"sequential\"\n");
    for a in 0..n {
        let _ = writeln!(
            text,
            "\n[[agent]]\nname = \"a{a:04}\"\ntask = \"start and exit at once\"\n\
             command = [\"true\"]"
        );
    }
    let cpu0 = d.cpu_secs();
    let t = Instant::now();
    let reply = c.call(Request::SessionFromPlan(req::SessionFromPlan {
        path: "bench-agent-start.toml".into(),
        text,
        start: true,
    }))?;
    let Reply::Session(rec) = reply else {
        return Err("session_from_plan answered something else than a session".into());
    };
    let sid = rec.id.to_string();
    let within = Duration::from_secs(30) + Duration::from_millis(100) * n as u32;
    // Polled with a small read of the timeline: the session's record (every agent with its
    // plan) is too big to ask for every few milliseconds without loading the daemon.
    let ended = ["session_completed", "session_failed", "session_cancelled"];
    loop {
        let Reply::Events(end) = c.call(Request::Events(req::Events {
            filter: maos_proto::EventFilter {
                session: Some(sid.clone()),
                types: ended.iter().map(|k| k.to_string()).collect(),
                ..Default::default()
            },
            limit: Some(1),
        }))?
        else {
            return Err("events answered something else".into());
        };
        if !end.is_empty() {
            break;
        }
        if t.elapsed() > within {
            let rec = show_session(&mut c, &sid)?;
            let done = rec
                .agents
                .iter()
                .filter(|a| a.state == AgentState::Completed)
                .count();
            return Err(format!(
                "{done} of {n} agents completed in {within:?}; the session is {}",
                rec.state
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    let wall = t.elapsed().as_secs_f64();
    let cpu = d.cpu_secs() - cpu0;
    let rec = show_session(&mut c, &sid)?;
    if rec.state != maos_core::SessionState::Completed {
        let why: Vec<String> = rec.errors.iter().map(|e| format!("{e:?}")).collect();
        return Err(format!(
            "the session ended {}: {}",
            rec.state,
            why.join("; ")
        ));
    }
    let kinds = [
        "agent_started",
        "agent_process_started",
        "agent_process_exited",
    ];
    let Reply::Events(events) = c.call(Request::Events(req::Events {
        filter: maos_proto::EventFilter {
            session: Some(sid.clone()),
            types: kinds.iter().map(|k| k.to_string()).collect(),
            ..Default::default()
        },
        limit: None,
    }))?
    else {
        return Err("events answered something else".into());
    };
    drop(c);
    d.stop()?;
    // Per agent, the first of each kind (µs since the epoch).
    let mut at: std::collections::HashMap<String, [Option<i64>; 3]> =
        std::collections::HashMap::new();
    for e in &events {
        let (Some(a), Some(k)) = (&e.agent_id, kinds.iter().position(|k| *k == e.kind)) else {
            continue;
        };
        at.entry(a.to_string()).or_default()[k].get_or_insert(e.ts.timestamp_micros());
    }
    let ns = |from: Option<i64>, to: Option<i64>| -> Option<u64> {
        Some((to? - from?).max(0) as u64 * 1000)
    };
    // The supervisor's own line in the agent's output log, written just before it spawns the
    // agent, splits the span: daemon commit + supervisor exec | spawn + answer + commit.
    let agents_dir = d.env.db_path().with_file_name("agents");
    let spawning = |agent: &str| -> Option<i64> {
        let log = fs::read_to_string(agents_dir.join(agent).join("output.log")).ok()?;
        log.lines()
            .find_map(|l| l.strip_prefix("--- maos: start "))
            .and_then(log_line_us)
    };
    let mut sup_up = Vec::new();
    let mut sup_answer = Vec::new();
    for (a, v) in &at {
        let s = spawning(a);
        sup_up.extend(ns(v[0], s));
        sup_answer.extend(ns(s, v[1]));
    }
    sup_up.sort_unstable();
    sup_answer.sort_unstable();
    let mut start: Vec<u64> = at.values().filter_map(|v| ns(v[0], v[1])).collect();
    let mut life: Vec<u64> = at.values().filter_map(|v| ns(v[1], v[2])).collect();
    if start.len() != n || life.len() != n {
        return Err(format!(
            "the timeline has start and pid of {} and pid and exit of {} of {n} agents",
            start.len(),
            life.len()
        ));
    }
    start.sort_unstable();
    life.sort_unstable();
    let span = match (rec.started_at, rec.ended_at) {
        (Some(a), Some(b)) => (b.timestamp_micros() - a.timestamp_micros()) as f64 / 1e6,
        _ => wall,
    };
    let name = label(&format!("agent start, {n} agents `true` in sequence"), sync);
    let p = |v: &[u64], q: f64| pct(v, q) / 1000.0;
    let rows = vec![
        Metric::new(
            &name,
            "start decided → pid committed, p50",
            p(&start, 50.0),
            "ms",
        )
        .goal(Goal::AtMost(10.0)),
        Metric::new(
            &name,
            "start decided → pid committed, p99",
            p(&start, 99.0),
            "ms",
        ),
        Metric::new(
            &name,
            "start decided → pid committed, max",
            p(&start, 100.0),
            "ms",
        ),
        Metric::new(
            &name,
            "… decided → supervisor about to fork the agent (its log), p50",
            p(&sup_up, 50.0),
            "ms",
        ),
        Metric::new(
            &name,
            "… supervisor about to fork → pid committed, p50",
            p(&sup_answer, 50.0),
            "ms",
        ),
        Metric::new(
            &name,
            "pid committed → exit applied, p50 (exit.json + report)",
            p(&life, 50.0),
            "ms",
        ),
        Metric::new(&name, "agents/s, whole session", n as f64 / span, ""),
        Metric::new(&name, "daemon CPU per agent", cpu / n as f64 * 1e3, "ms"),
    ];
    print_human(
        &format!(
            "agent-start: a plan of {n} agents (`true`), strategy sequential, run by the daemon \
             through `maosd supervise`; session done in {span:.2} s ({wall:.2} s seen by the \
             bench); spans from the timeline, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}
