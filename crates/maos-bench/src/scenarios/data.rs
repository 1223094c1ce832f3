//! The data lifecycle: `maos export` and `maos import` of a large session as whole processes,
//! and `gc` of many finished sessions while another client keeps updating.

use maos_proto::req;
use std::fs;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use maos_core::SessionOp;
use maos_proto::{Reply, Request};
use maos_tests::client::{Client, Res};

use crate::harness::{self, spawn_timed};
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, latency_rows, median, print_human};
use crate::workload::{Toggler, create_session, running_agent};

/// `maos export` of a session with 10,000 events to a file, and `maos import` of that file
/// into a fresh project, each as a whole process (what a person runs), median of --requests
/// runs (default 5). Checks that every import has every event.
pub fn scen_transfer(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const AGENTS: usize = 20;
    const EVENTS: usize = 10_000;
    let runs = o.requests.unwrap_or(5);
    let d = harness::start(sync)?;
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: export and import", true)?;
    let mut agents = Vec::new();
    for a in 0..AGENTS {
        agents.push((
            sid.clone(),
            running_agent(&mut c, &sid, &format!("agent{a}"))?,
            false,
        ));
    }
    let mut t = Toggler {
        client: d.client()?,
        agents,
        next: 0,
    };
    let fill = EVENTS.saturating_sub(1 + 2 * AGENTS);
    for _ in 0..fill.next_multiple_of(2) {
        t.step()?;
    }
    let session_events = |c: &mut Client| -> Res<usize> {
        match c.call(Request::Events(req::Events {
            filter: maos_proto::EventFilter {
                session: Some(sid.clone()),
                ..maos_proto::EventFilter::default()
            },
            limit: None,
        }))? {
            Reply::Events(e) => Ok(e.len()),
            _ => Err("events answered something else".into()),
        }
    };
    let events = session_events(&mut c)?;
    let maos = harness::client_bin()?;
    let cmd = |project: &Path, args: &[&str]| {
        let mut c = d.client_command(&maos);
        c.arg("--project").arg(project).args(args);
        c
    };
    let file = d.env.root().join("export.json");
    let file_s = file.to_string_lossy().to_string();
    let (mut export_ms, mut import_ms) = (Vec::new(), Vec::new());
    for i in 0..runs {
        export_ms
            .push(1e3 * spawn_timed(&mut cmd(&d.env.project, &["export", &sid, "-o", &file_s]))?);
        let target = d.env.root().join(format!("import-{i}"));
        fs::create_dir_all(target.join(".git"))
            .map_err(|e| format!("{}: {e}", target.display()))?;
        import_ms.push(1e3 * spawn_timed(&mut cmd(&target, &["import", &file_s]))?);
        let root = fs::canonicalize(&target)
            .map_err(|e| format!("{}: {e}", target.display()))?
            .to_string_lossy()
            .to_string();
        // Every event, then the import's own.
        let got = session_events(&mut Client::connect(&d.env.socket, &root)?)?;
        if got != events + 1 {
            return Err(format!("import {i}: {got} events, expected {}", events + 1));
        }
    }
    let bytes = fs::metadata(&file).map(|m| m.len()).unwrap_or(0);
    drop(c);
    drop(t);
    let mut d = d;
    d.stop()?;
    let name = label(&format!("transfer, 1 session × {events} events"), sync);
    let rows = vec![
        Metric::new(
            &name,
            "maos export -o FILE, whole process, median",
            median(&mut export_ms),
            "ms",
        )
        .goal(Goal::AtMost(500.0)),
        Metric::new(
            &name,
            "maos import FILE (fresh project), whole process, median",
            median(&mut import_ms),
            "ms",
        )
        .goal(Goal::AtMost(500.0)),
        Metric::new(
            &name,
            "export: max",
            export_ms.iter().copied().fold(0.0, f64::max),
            "ms",
        ),
        Metric::new(
            &name,
            "import: max",
            import_ms.iter().copied().fold(0.0, f64::max),
            "ms",
        ),
        Metric::new(&name, "file size", bytes as f64 / 1048576.0, "MiB"),
    ];
    print_human(
        &format!(
            "transfer: a session with {AGENTS} agents and {events} events, exported to a file and \
             imported into a fresh project, {runs} times each as whole `maos` processes; every \
             import checked to hold every event, synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}

/// `maos gc` of 1,000 finished sessions (each with an agent and a handful of events), while
/// another client pauses and resumes a live agent back to back: how long the collection
/// takes, and the latency of those state updates while it runs.
pub fn scen_gc(_o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    const SESSIONS: usize = 1000;
    let mut d = harness::start(sync)?;
    let mut c = d.client()?;
    for s in 0..SESSIONS {
        let sid = create_session(&mut c, &format!("bench: gc session {s}"), true)?;
        running_agent(&mut c, &sid, "dev")?;
        c.call(Request::SessionTransition(req::SessionTransition {
            session: Some(sid),
            op: SessionOp::Complete,
            reason: None,
        }))?;
    }
    let live = create_session(&mut c, "bench: gc, the live session", true)?;
    let agent = running_agent(&mut c, &live, "dev")?;
    let stop = Arc::new(std::sync::atomic::AtomicBool::new(false));
    let mut t = Toggler {
        client: d.client()?,
        agents: vec![(live.clone(), agent, false)],
        next: 0,
    };
    let updates = {
        let stop = stop.clone();
        std::thread::spawn(move || -> Res<Vec<u64>> {
            let mut lat = Vec::new();
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                lat.push(t.step()?);
            }
            Ok(lat)
        })
    };
    let t0 = Instant::now();
    let reply = c.call(Request::Gc(req::Gc {
        older_than_secs: 0,
        dry_run: false,
    }));
    let gc_secs = t0.elapsed().as_secs_f64();
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let mut lat = updates
        .join()
        .map_err(|_| "the update thread panicked".to_string())??;
    let Reply::Gc(report) = reply? else {
        return Err("gc answered something else".into());
    };
    if report.sessions.len() != SESSIONS {
        return Err(format!(
            "gc deleted {} sessions, expected {SESSIONS}",
            report.sessions.len()
        ));
    }
    let Reply::Sessions(left) = c.call(Request::SessionList(req::SessionList { all: true }))?
    else {
        return Err("session_list answered something else".into());
    };
    if left.len() != 1 {
        return Err(format!(
            "{} sessions left after gc, expected the live one",
            left.len()
        ));
    }
    drop(c);
    d.stop()?;
    lat.sort_unstable();
    let name = label(&format!("gc, {SESSIONS} finished sessions"), sync);
    let mut rows = vec![
        Metric::new(&name, "gc: export + delete, all sessions", gc_secs, "s")
            .goal(Goal::AtMost(2.0)),
        Metric::new(&name, "state updates during the gc", lat.len() as f64, ""),
    ];
    let mut latency = latency_rows(&name, &mut lat, None, false);
    if let Some(p99) = latency.get_mut(1) {
        p99.goal = Some(Goal::AtMost(5000.0));
    }
    rows.extend(latency);
    print_human(
        &format!(
            "gc: {SESSIONS} finished sessions (1 agent, ~6 events each) exported and deleted \
             in one `gc` request, while another client pauses and resumes a live agent back \
             to back; synchronous={sync}"
        ),
        &rows,
    );
    Ok(rows)
}
