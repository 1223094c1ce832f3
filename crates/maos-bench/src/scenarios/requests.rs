//! Request round trips through one connected client, and many clients at once: state updates,
//! session creation, agent registration, throughput, and the daemon's memory after a fill.

use maos_proto::req;
use std::time::Duration;

use maos_proto::{Reply, Request};
use maos_tests::client::{Client, Res};
use maos_tests::daemon::Daemon;

use crate::harness;
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, latency_rows, print_human};
use crate::workload::{
    RunResult, Toggler, WARMUP, commit_stats, create_session, register, run_togglers, running_agent,
};

pub fn scen_update(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(5000);
    let mut d = harness::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: update", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;
    let mut t = Toggler {
        client: c,
        agents: vec![(sid, aid, false)],
        next: 0,
    };
    for _ in 0..WARMUP {
        t.step()?;
    }
    let cpu0 = d.cpu_secs();
    let mut samples = Vec::with_capacity(n);
    for _ in 0..n {
        samples.push(t.step()?);
    }
    let cpu = d.cpu_secs() - cpu0;
    drop(t);
    d.stop()?;
    let name = label("update", sync);
    let mut rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(1000.0)), true);
    rows.push(Metric::new(
        &name,
        "daemon CPU per request",
        cpu / n as f64 * 1e6,
        "µs",
    ));
    print_human(
        &format!("update: pause/resume of an agent, 1 client, {n} requests, synchronous={sync}"),
        &rows,
    );
    Ok(rows)
}

/// Untimed requests before the timed ones of `create` and `register`.
const WARM: usize = 50;

/// `warm` untimed, then `n` timed round trips on one client, of the requests `next(i, client)`
/// makes (it may send untimed set-up requests of its own first): the `n` times in ns.
fn timed_requests(
    d: &Daemon,
    warm: usize,
    n: usize,
    mut next: impl FnMut(usize, &mut Client) -> Res<Request>,
) -> Res<Vec<u64>> {
    let mut c = d.client()?;
    let mut samples = Vec::with_capacity(n);
    for i in 0..warm + n {
        let req = next(i, &mut c)?;
        let ns = c.timed(req)?;
        if i >= warm {
            samples.push(ns);
        }
    }
    Ok(samples)
}

pub fn scen_create(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(2000);
    let mut d = harness::start(sync)?;
    let mut samples = timed_requests(&d, WARM, n, |i, _| {
        Ok(Request::SessionCreate(req::SessionCreate {
            objective: format!("bench: session {i}"),
            strategy: Default::default(),
            phases: vec!["plan".into(), "build".into(), "review".into()],
        }))
    })?;
    d.stop()?;
    let name = label("create", sync);
    let rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(5000.0)), true);
    print_human(
        &format!("create: session create (3 phases), 1 client, {n} requests, synchronous={sync}"),
        &rows,
    );
    Ok(rows)
}

pub fn scen_register(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(2000);
    let per = o.per_session.unwrap_or(20);
    let mut d = harness::start(sync)?;
    let mut session = String::new();
    let mut samples = timed_requests(&d, WARM, n, |i, c| {
        if i % per == 0 {
            session = create_session(c, &format!("bench: register {i}"), true)?;
        }
        Ok(register(&session, &format!("role{}", i % 4)))
    })?;
    d.stop()?;
    let name = label("register", sync);
    let rows = latency_rows(&name, &mut samples, Some(Goal::AtMost(2000.0)), true);
    print_human(
        &format!(
            "register: agent register, 1 client, {n} requests, {per} agents per session, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

pub fn scen_throughput(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let clients = o.clients.unwrap_or(32);
    let per = o.per_session.unwrap_or(32);
    let secs = o.duration.unwrap_or(5.0);
    let mut d = harness::start(sync)?;
    let mut setup = d.client()?;
    let mut togglers = Vec::new();
    let mut session = String::new();
    for i in 0..clients {
        if i % per == 0 {
            session = create_session(&mut setup, &format!("bench: throughput {i}"), true)?;
        }
        let aid = running_agent(&mut setup, &session, &format!("worker{i}"))?;
        togglers.push(Toggler {
            client: d.client()?,
            agents: vec![(session.clone(), aid, false)],
            next: 0,
        });
    }
    drop(setup);
    let agents: Vec<String> = togglers.iter().map(|t| t.agents[0].1.clone()).collect();
    let RunResult {
        mut samples,
        acks,
        secs: elapsed,
        daemon_cpu: cpu,
        bench_cpu: me,
    } = run_togglers(&d, togglers, 100, Some(Duration::from_secs_f64(secs)), 0)?;
    let (events, commits) = commit_stats(&d, &agents)?;
    d.stop()?;
    let name = label(&format!("throughput, {clients} clients"), sync);
    let rate = acks as f64 / elapsed;
    let mut rows = vec![Metric::new(&name, "events/s", rate, "").goal(Goal::AtLeast(10_000.0))];
    rows.extend(latency_rows(&name, &mut samples, None, false));
    rows.push(Metric::new(
        &name,
        "daemon CPU per event",
        cpu / acks.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "events per commit (mean)",
        events as f64 / commits.max(1) as f64,
        "",
    ));
    rows.push(Metric::new(
        &name,
        "bench clients' CPU per event",
        me / acks.max(1) as f64 * 1e6,
        "µs",
    ));
    print_human(
        &format!(
            "throughput: {clients} clients × own agent ({per} agents per session), {secs} s, \
             {acks} acknowledged events, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

pub fn scen_rss(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 10;
    const AGENTS: usize = 20;
    const EVENTS_PER_SESSION: usize = 10_000;
    let clients = o.clients.unwrap_or(20).min(SESSIONS * AGENTS);
    let mut d = harness::start(sync)?;
    let (idle_rss, _) = d.memory_kib()?;
    let mut setup = d.client()?;
    let mut pairs = Vec::new();
    for s in 0..SESSIONS {
        let sid = create_session(&mut setup, &format!("bench: rss session {s}"), true)?;
        for a in 0..AGENTS {
            let aid = running_agent(&mut setup, &sid, &format!("agent{a}"))?;
            pairs.push((sid.clone(), aid, false));
        }
    }
    drop(setup);
    // Agent k goes to client k % clients; every agent gets the same number of toggles, so each
    // session gets EVENTS_PER_SESSION toggle events.
    let mut owned: Vec<Vec<_>> = (0..clients).map(|_| Vec::new()).collect();
    for (k, p) in pairs.into_iter().enumerate() {
        owned[k % clients].push(p);
    }
    let agent_ids: Vec<String> = owned.iter().flatten().map(|p| p.1.clone()).collect();
    let per_agent = EVENTS_PER_SESSION / AGENTS;
    let mut togglers = Vec::new();
    for agents in owned {
        let n = agents.len() * per_agent;
        togglers.push((
            Toggler {
                client: d.client()?,
                agents,
                next: 0,
            },
            n,
        ));
    }
    // Clients own 10 agents each (200 / 20), so every client does the same number of steps.
    let per_client = togglers.iter().map(|t| t.1).max().unwrap_or(0);
    if togglers.iter().any(|t| t.1 != per_client) {
        return Err(format!(
            "--clients {clients} does not divide {} agents evenly",
            SESSIONS * AGENTS
        ));
    }
    let togglers: Vec<_> = togglers.into_iter().map(|t| t.0).collect();
    let RunResult {
        acks,
        secs: elapsed,
        ..
    } = run_togglers(&d, togglers, 0, None, per_client)?;
    // Let the allocator settle after the storm, then read.
    std::thread::sleep(Duration::from_millis(200));
    let (rss, hwm) = d.memory_kib()?;
    let db = harness::db_bytes(&d);
    // A read of everything live, to make sure the state is all there and counts nothing extra.
    let mut c = d.client()?;
    let Reply::Ps(list) = c.call(Request::Ps(req::Ps { all: true }))? else {
        return Err("ps answered something else".into());
    };
    let agents: usize = list.iter().map(|s| s.agents.len()).sum();
    let (rss_after_ps, _) = d.memory_kib()?;
    drop(c);
    let (events, commits) = commit_stats(&d, &agent_ids)?;
    d.stop()?;
    if list.len() != SESSIONS || agents != SESSIONS * AGENTS {
        return Err(format!(
            "after the fill the daemon holds {} sessions / {agents} agents",
            list.len()
        ));
    }
    let name = label("rss, 10 sessions × 20 agents × 10k events", sync);
    let mib = |k: u64| k as f64 / 1024.0;
    let rows = vec![
        Metric::new(&name, "VmRSS after fill", mib(rss), "MiB").goal(Goal::AtMost(30.0)),
        Metric::new(&name, "VmHWM (peak RSS)", mib(hwm), "MiB"),
        Metric::new(&name, "VmRSS idle (before fill)", mib(idle_rss), "MiB"),
        Metric::new(&name, "VmRSS after `ps --all`", mib(rss_after_ps), "MiB"),
        Metric::new(&name, "database + WAL", db as f64 / 1048576.0, "MiB"),
        Metric::new(&name, "fill rate", acks as f64 / elapsed, "events/s"),
        Metric::new(
            &name,
            "events per commit (mean)",
            events as f64 / commits.max(1) as f64,
            "",
        ),
    ];
    print_human(
        &format!(
            "rss: {acks} toggle events over {SESSIONS} sessions × {AGENTS} agents by {clients} \
             clients in {elapsed:.1} s, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}
