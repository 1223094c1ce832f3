//! `maos top`'s costs: what open views cost an idle daemon, and how long an event takes to
//! reach their screens. Each view is a real `maos-top` in its own tmux terminal (80×24) that
//! notes every frame it draws (`MAOS_TOP_TRACE`: time and newest event shown).

use maos_proto::req;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maos_proto::{EventFilter, Reply, Request};
use maos_tests::client::Res;
use maos_tests::tmux::Tmux;

use crate::harness;
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, pct, print_human};
use crate::workload::{Toggler, create_session, running_agent};

/// How long the daemon's CPU time is read while nothing happens.
const IDLE: Duration = Duration::from_secs(10);

/// The frames a view drew: (unix µs, newest event seq shown).
fn frames(trace: &Path) -> Vec<(i64, u64)> {
    std::fs::read_to_string(trace)
        .unwrap_or_default()
        .lines()
        .filter_map(|l| {
            let (us, seq) = l.split_once(' ')?;
            Some((us.parse().ok()?, seq.parse().ok()?))
        })
        .collect()
}

fn until(what: &str, within: Duration, mut cond: impl FnMut() -> bool) -> Res {
    let end = Instant::now() + within;
    while !cond() {
        if Instant::now() > end {
            return Err(format!("timed out waiting until {what}"));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    Ok(())
}

pub fn scen_top(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let views = o.clients.unwrap_or(5);
    let n = o.requests.unwrap_or(1000);
    let pace = Duration::from_millis(o.pace_ms.unwrap_or(10));
    let top = harness::bin_dir()?.join("maos-top");
    if !top.is_file() {
        return Err(format!(
            "{} not found: build it (cargo build --release --workspace --bins)",
            top.display()
        ));
    }
    if !Tmux::available() {
        return Err("the top scenario runs maos-top in tmux: install tmux".into());
    }
    let d = harness::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: top", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;

    let cpu0 = d.cpu_secs();
    std::thread::sleep(IDLE);
    let idle_alone = d.cpu_secs() - cpu0;

    let project = d.env.project.to_string_lossy().into_owned();
    let traces: Vec<PathBuf> = (0..views)
        .map(|i| d.env.root().join(format!("top-{i}.trace")))
        .collect();
    let _terminals: Vec<Tmux> = traces
        .iter()
        .enumerate()
        .map(|(i, t)| {
            let trace = t.to_string_lossy().into_owned();
            Tmux::start_named(
                &d.env,
                &format!("top{i}"),
                80,
                24,
                &[&top.to_string_lossy(), "--project", &project],
                &[("MAOS_TOP_TRACE", &trace)],
            )
        })
        .collect();
    until("every view drew", Duration::from_secs(20), || {
        traces.iter().all(|t| !frames(t).is_empty())
    })?;
    let cpu0 = d.cpu_secs();
    std::thread::sleep(IDLE);
    let idle_watched = d.cpu_secs() - cpu0;

    let Reply::Events(before) = c.call(Request::Events(req::Events {
        filter: EventFilter::default(),
        limit: Some(1),
    }))?
    else {
        return Err("events answered something else".into());
    };
    let after = before.last().map_or(0, |e| e.seq);
    let mut t = Toggler {
        client: c,
        agents: vec![(sid, aid, false)],
        next: 0,
    };
    let start = Instant::now();
    for i in 0..n {
        t.step()?;
        let next = start + pace * (i as u32 + 1);
        if let Some(wait) = next.checked_duration_since(Instant::now()) {
            std::thread::sleep(wait);
        }
    }
    let rate = n as f64 / start.elapsed().as_secs_f64();
    let mut c = t.client;
    let Reply::Events(events) = c.call(Request::Events(req::Events {
        filter: EventFilter {
            after_seq: Some(after),
            ..EventFilter::default()
        },
        limit: None,
    }))?
    else {
        return Err("events answered something else".into());
    };
    let last = events.last().map_or(after, |e| e.seq);
    until(
        "every view showed the last event",
        Duration::from_secs(20),
        || {
            traces
                .iter()
                .all(|t| frames(t).last().is_some_and(|f| f.1 >= last))
        },
    )?;
    let mut lat = Vec::new();
    for trace in &traces {
        let f = frames(trace);
        for e in &events {
            let at = e.ts.timestamp_micros();
            if let Some((us, _)) = f.iter().find(|(_, seq)| *seq >= e.seq) {
                lat.push(((us - at).max(0) as u64) * 1000);
            }
        }
    }
    lat.sort_unstable();
    let name = label("top", sync);
    let rows = vec![
        Metric::new(
            &name,
            "daemon CPU over 10 s idle, no view",
            idle_alone * 1e3,
            "ms",
        ),
        Metric::new(
            &name,
            &format!("daemon CPU over 10 s idle, {views} views open"),
            idle_watched * 1e3,
            "ms",
        ),
        Metric::new(
            &name,
            &format!("event to screen p50 ({rate:.0} events/s, {views} views)"),
            pct(&lat, 50.0) / 1e3,
            "ms",
        ),
        Metric::new(
            &name,
            &format!("event to screen p99 ({rate:.0} events/s, {views} views)"),
            pct(&lat, 99.0) / 1e3,
            "ms",
        )
        .goal(Goal::AtMost(100.0)),
        Metric::new(&name, "event to screen max", pct(&lat, 100.0) / 1e3, "ms"),
    ];
    print_human(
        &format!(
            "top: {views} maos-top views in tmux; daemon CPU while idle; {n} events (pause/resume) every {pace:?}, event commit to a frame showing it"
        ),
        &rows,
    );
    Ok(rows)
}
