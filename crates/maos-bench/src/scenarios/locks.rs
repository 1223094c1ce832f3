//! Locks: acquire and release round trips of free files, and many agents contending for a
//! few paths; every acknowledged grant checked to be on the timeline.

use maos_proto::req;
use std::fs;
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use maos_core::LockMode;
use maos_proto::{ErrorCode, LockWait, Request};
use maos_tests::client::Res;
use maos_tests::client::remote;
use maos_tests::daemon::Daemon;
use maos_tests::procfs;

use crate::harness;
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, latency_rows_2, pct, print_human};
use crate::workload::{Rng, WARMUP, create_session, event_stats, join_all, running_agent};

/// `n` existing files under `src/` of the project (agents lock files that exist, so the
/// daemon's path resolution takes its usual route); their project-relative paths.
pub(crate) fn lock_files(d: &Daemon, n: usize) -> Res<Vec<String>> {
    let dir = d.env.project.join("src");
    fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    (0..n)
        .map(|i| {
            let rel = format!("src/file{i:05}.rs");
            let f = d.env.project.join(&rel);
            fs::write(&f, b"// locked by maos-bench\n")
                .map_err(|e| format!("{}: {e}", f.display()))?;
            Ok(rel)
        })
        .collect()
}

/// A write lock on `path` (relative to the project root, sent as the agent's cwd).
pub(crate) fn acquire_req(agent: &str, path: &str, cwd: &str, wait: LockWait) -> Request {
    Request::LockAcquire(req::LockAcquire {
        agent: agent.to_string(),
        lock: req::Acquire {
            at: req::LockAt {
                path: path.to_string(),
                cwd: Some(cwd.to_string()),
            },
            mode: LockMode::Write,
            wait,
            ttl_ms: None,
        },
    })
}

pub(crate) fn release_req(agent: &str, path: &str, cwd: &str) -> Request {
    Request::LockRelease(req::LockRelease {
        agent: Some(agent.to_string()),
        at: req::LockAt {
            path: path.to_string(),
            cwd: Some(cwd.to_string()),
        },
        force: false,
        by: None,
    })
}

/// The acknowledged grants must all be on the timeline: (grants per commit, mean).
fn check_grants(d: &Daemon, agents: &[String], acknowledged: u64) -> Res<f64> {
    let (grants, commits) = event_stats(d, agents, &["lock_acquired"])?;
    if grants as u64 != acknowledged {
        return Err(format!(
            "{acknowledged} grants were acknowledged but the timeline holds {grants} lock_acquired events"
        ));
    }
    Ok(grants as f64 / commits.max(1) as f64)
}

pub fn scen_lock(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(5000);
    let files = o.paths.unwrap_or(1000);
    let mut d = harness::start(sync)?;
    let paths = lock_files(&d, files)?;
    let cwd = d.root.clone();
    let mut c = d.client()?;
    let sid = create_session(&mut c, "bench: lock", true)?;
    let aid = running_agent(&mut c, &sid, "worker")?;
    let mut acquire = Vec::with_capacity(n);
    let mut release = Vec::with_capacity(n);
    let mut cpu0 = d.cpu_secs();
    for i in 0..WARMUP + n {
        if i == WARMUP {
            cpu0 = d.cpu_secs();
        }
        let p = &paths[i % files];
        let a = c
            .timed(acquire_req(&aid, p, &cwd, LockWait::NoWait))
            .map_err(|e| format!("acquire {p}: {e}"))?;
        let r = c
            .timed(release_req(&aid, p, &cwd))
            .map_err(|e| format!("release {p}: {e}"))?;
        if i >= WARMUP {
            acquire.push(a);
            release.push(r);
        }
    }
    let cpu = d.cpu_secs() - cpu0;
    drop(c);
    let per_commit = check_grants(&d, std::slice::from_ref(&aid), (WARMUP + n) as u64)?;
    d.stop()?;
    // The targets are for synchronous=normal; full is reported beside it. In fleet
    // mode (MAOS_TEST_DATABASE=postgres) issue 18's, with PostgreSQL's default durability.
    let fleet = maos_tests::postgres::test_database_url().is_some();
    let (goals, engine) = if fleet {
        (
            Some((Goal::AtMost(2000.0), Goal::AtMost(10000.0))),
            "fleet, PostgreSQL",
        )
    } else {
        (
            (sync == "normal").then_some((Goal::AtMost(300.0), Goal::AtMost(1000.0))),
            sync,
        )
    };
    let acq = label("lock acquire, free file", engine);
    let rel = label("lock release", engine);
    let mut rows = latency_rows_2(&acq, &mut acquire, goals);
    rows.push(Metric::new(
        &acq,
        "daemon CPU per request (acquire or release)",
        cpu / (2 * n) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &acq,
        "grants per commit (mean)",
        per_commit,
        "",
    ));
    print_human(
        &format!(
            "lock acquire: --no-wait of a free file (released after each), 1 client, {n} pairs \
             over {files} files, {engine}"
        ),
        &rows,
    );
    let release = latency_rows_2(&rel, &mut release, goals);
    print_human(
        &format!("lock release: of the lock just granted, {engine}"),
        &release,
    );
    rows.extend(release);
    Ok(rows)
}

/// What one contending agent saw.
#[derive(Default)]
struct Contended {
    acquire: Vec<u64>,
    granted: Vec<u64>,
    release: Vec<u64>,
    grants: u64,
    conflicts: u64,
    timeouts: u64,
    deadlocks: u64,
    warm_grants: u64,
}

pub fn scen_contention(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let clients = o.clients.unwrap_or(20);
    let files = o.paths.unwrap_or(50);
    let secs = o.duration.unwrap_or(5.0);
    let wait_ms = o.wait_ms.unwrap_or(50);
    let wait = if wait_ms == 0 {
        LockWait::NoWait
    } else {
        LockWait::Wait { ms: wait_ms }
    };
    let mut d = harness::start(sync)?;
    let paths = Arc::new(lock_files(&d, files)?);
    let mut setup = d.client()?;
    let sid = create_session(&mut setup, "bench: contention", true)?;
    let mut agents = Vec::new();
    for i in 0..clients {
        agents.push(running_agent(&mut setup, &sid, &format!("agent{i}"))?);
    }
    drop(setup);
    let dur = Duration::from_secs_f64(secs);
    let barrier = Arc::new(Barrier::new(clients + 1));
    let seed = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_nanos() as u64);
    let mut handles = Vec::new();
    for (k, aid) in agents.iter().enumerate() {
        let mut c = d.client()?;
        let (aid, cwd) = (aid.clone(), d.root.clone());
        let (barrier, paths) = (barrier.clone(), paths.clone());
        let mut rng = Rng((seed ^ (k as u64 + 1).wrapping_mul(0x9E37_79B9_7F4A_7C15)) | 1);
        handles.push(std::thread::spawn(move || -> Res<(Contended, f64)> {
            let mut s = Contended::default();
            // One loop: a random path, acquired with a short wait, released at once if granted.
            let mut step = |s: &mut Contended, timed: bool| -> Res {
                let p = &paths[rng.below(paths.len())];
                let (ns, result) = c.timed_try(acquire_req(&aid, p, &cwd, wait))?;
                match result {
                    Ok(()) => {
                        let r = c
                            .timed(release_req(&aid, p, &cwd))
                            .map_err(|e| format!("release {p}: {e}"))?;
                        if timed {
                            s.grants += 1;
                            s.granted.push(ns);
                            s.release.push(r);
                        } else {
                            s.warm_grants += 1;
                        }
                    }
                    Err(e) if !timed => match e.code {
                        ErrorCode::LockConflict | ErrorCode::LockTimeout => {}
                        _ => return Err(format!("acquire {p}: {}", remote(&e))),
                    },
                    Err(e) => match e.code {
                        ErrorCode::LockConflict => s.conflicts += 1,
                        ErrorCode::LockTimeout => s.timeouts += 1,
                        ErrorCode::Deadlock => s.deadlocks += 1,
                        _ => return Err(format!("acquire {p}: {}", remote(&e))),
                    },
                }
                if timed {
                    s.acquire.push(ns);
                }
                Ok(())
            };
            let mut first = Ok(());
            for _ in 0..50 {
                if let Err(e) = step(&mut s, false) {
                    first = Err(e);
                    break;
                }
            }
            barrier.wait();
            first?;
            let t0 = Instant::now();
            while t0.elapsed() < dur {
                step(&mut s, true)?;
            }
            Ok((s, t0.elapsed().as_secs_f64()))
        }));
    }
    barrier.wait();
    let (cpu0, me0) = (d.cpu_secs(), procfs::cpu_secs("self"));
    let mut all = Contended::default();
    let mut elapsed: f64 = 0.0;
    for (s, e) in join_all(handles)? {
        all.acquire.extend(s.acquire);
        all.granted.extend(s.granted);
        all.release.extend(s.release);
        all.grants += s.grants;
        all.conflicts += s.conflicts;
        all.timeouts += s.timeouts;
        all.deadlocks += s.deadlocks;
        all.warm_grants += s.warm_grants;
        elapsed = elapsed.max(e);
    }
    let (cpu, me) = (d.cpu_secs() - cpu0, procfs::cpu_secs("self") - me0);
    let per_commit = check_grants(&d, &agents, all.grants + all.warm_grants)?;
    d.stop()?;
    let name = label(
        &format!("contention, {clients} agents × {files} paths"),
        sync,
    );
    let attempts = all.acquire.len() as u64;
    let mut rows = vec![
        Metric::new(&name, "durable grants/s", all.grants as f64 / elapsed, "")
            .goal(Goal::AtLeast(5000.0)),
        Metric::new(&name, "acquire attempts/s", attempts as f64 / elapsed, ""),
        Metric::new(
            &name,
            "conflicts (no-wait refusals)",
            all.conflicts as f64,
            "",
        ),
        Metric::new(&name, "timeouts", all.timeouts as f64, ""),
        Metric::new(&name, "deadlocks", all.deadlocks as f64, "").goal(Goal::AtMost(0.0)),
    ];
    all.acquire.sort_unstable();
    all.granted.sort_unstable();
    all.release.sort_unstable();
    for (what, v) in [
        ("acquire", &all.acquire),
        ("acquire, granted only", &all.granted),
        ("release", &all.release),
    ] {
        rows.push(Metric::new(
            &name,
            &format!("{what} p50"),
            pct(v, 50.0),
            "µs",
        ));
        rows.push(Metric::new(
            &name,
            &format!("{what} p99"),
            pct(v, 99.0),
            "µs",
        ));
    }
    rows.push(Metric::new(
        &name,
        "daemon CPU per grant (acquire + release)",
        cpu / all.grants.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "bench clients' CPU per grant",
        me / all.grants.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        &name,
        "grants per commit (mean)",
        per_commit,
        "",
    ));
    let how = match wait {
        LockWait::Wait { ms } => format!("wait ≤ {ms} ms"),
        _ => "no wait".to_string(),
    };
    print_human(
        &format!(
            "contention: {clients} agents (own client each) on {files} paths, {secs} s, acquire \
             ({how}) then release, {} grants of {attempts} attempts, synchronous={sync}",
            all.grants
        ),
        &rows,
    );
    Ok(rows)
}
