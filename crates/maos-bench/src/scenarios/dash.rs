//! The dashboard's costs, measured in a real headless Chromium (Debian's `chromium`, driven
//! through `chromedriver` by the tests' WebDriver client) against a real `maos-dash` started
//! by `maos dashboard`, over a daemon filled through the wire client:
//!
//! - `dash-paint`: how long a session page takes to be drawn (the page's own
//!   `performance.mark("maos-ready")`: session, spawn tree, Gantt, first timeline page), cold
//!   (a fresh `maos-dash`), warm (reloads) and right after a daemon restart (maosd rebuilds the
//!   session's Gantt from its database), for a session of 10,000 events and one of 200,000;
//!   and how many elements the page holds then.
//! - `dash-live`: from an event's commit (its `ts`) to its row in the page's timeline (the page
//!   notes each in `window.maosSeen` as it adds it), at 1,000 and at 100 events/s.
//! - `dash-hook`: whole-process `maos hook` with no dashboard and with five pages watching a
//!   live session while events flow, interleaved: the ratio of medians and of p99s.
//!
//! The events are a mix an agent team makes: hook calls (a PreToolUse Write taking a file's
//! lock, its PostToolUse, Bash runs), lock releases, notes, writes denied on a file another
//! agent holds, lock waits that time out, pauses and resumes.

use maos_proto::req;
use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use maos_core::LockMode;
use maos_core::record::{Cli, NoteKind};
use maos_proto::{EventFilter, HookCall, LockWait, Reply, Request};
use maos_tests::client::{Client, Res};
use maos_tests::daemon::Daemon;
use maos_tests::webdriver::{self, Browser};
use serde_json::Value;

use crate::harness::{self, spawn_timed};
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, median, print_human};
use crate::workload::{create_session, join_all, running_agent, toggle};

/// Agents per session.
const AGENTS: usize = 20;
/// Files each agent writes in turn.
const OWN_FILES: usize = 50;
/// How long a page may take to be drawn before the run fails.
const READY_WITHIN: Duration = Duration::from_secs(60);

// ------------------------------------------------------------------------- the workload

/// One agent of a filled session, with its own connection, making the mix in turn.
struct Worker {
    c: Client,
    sid: String,
    aid: String,
    k: usize,
    cwd: String,
    /// The file agent 0 holds all along: the others' writes to it are denied, their waits
    /// time out.
    shared: String,
    /// Where its own files are.
    dir: String,
    cycle: usize,
    step: usize,
}

impl Worker {
    fn hook(&self, event: &str, tool: &str, paths: Vec<String>) -> Request {
        Request::Hook(Box::new(HookCall {
            cli: Cli::Claude,
            event: event.to_string(),
            session_id: format!("bench-dash-window-{:02}", self.k),
            tool_name: Some(tool.to_string()),
            tool_use_id: Some(format!("toolu_{:02}_{}", self.k, self.cycle)),
            paths,
            cwd: Some(self.cwd.clone()),
            maos_session: Some(self.sid.clone()),
            maos_agent: Some(self.aid.clone()),
            ..HookCall::default()
        }))
    }

    /// The next request of the mix and the events it makes (None: nothing at this step).
    fn next(&mut self) -> Option<(Request, usize)> {
        let (k, cycle) = (self.k, self.cycle);
        let own = format!("{}/f{:02}.rs", self.dir, cycle % OWN_FILES);
        let step = self.step;
        self.step += 1;
        match step {
            0 => Some((self.hook("PreToolUse", "Write", vec![own]), 1)),
            1 => Some((self.hook("PostToolUse", "Write", vec![own]), 1)),
            2 => Some((
                Request::LockRelease(req::LockRelease {
                    agent: Some(self.aid.clone()),
                    at: req::LockAt {
                        path: own,
                        cwd: Some(self.cwd.clone()),
                    },
                    force: false,
                    by: None,
                }),
                1,
            )),
            3 => Some((self.hook("PostToolUse", "Bash", Vec::new()), 1)),
            4 if cycle % 4 == 0 => Some((
                Request::Note(req::Note {
                    session: Some(self.sid.clone()),
                    agent: Some(self.aid.clone()),
                    kind: if cycle % 8 == 0 {
                        NoteKind::Decision
                    } else {
                        NoteKind::Done
                    },
                    text: format!("agent {k}: step {cycle} done, {} builds", self.dir),
                }),
                1,
            )),
            // A write to the file agent 0 holds: denied.
            5 if k > 0 && cycle % 8 == k % 8 => Some((
                self.hook("PreToolUse", "Write", vec![self.shared.clone()]),
                1,
            )),
            // A wait for it that times out (lock_wait, lock_timeout).
            6 if k > 0 && cycle % 16 == k % 16 => Some((
                Request::LockAcquire(req::LockAcquire {
                    agent: self.aid.clone(),
                    lock: req::Acquire {
                        at: req::LockAt {
                            path: self.shared.clone(),
                            cwd: Some(self.cwd.clone()),
                        },
                        mode: LockMode::Write,
                        wait: LockWait::Wait { ms: 2 },
                        ttl_ms: None,
                    },
                }),
                2,
            )),
            7 if cycle % 25 == 24 => Some((toggle(&self.sid, &self.aid, false), 1)),
            8 if cycle % 25 == 24 => Some((toggle(&self.sid, &self.aid, true), 1)),
            9.. => {
                self.step = 0;
                self.cycle += 1;
                None
            }
            _ => None,
        }
    }

    /// Send the next request of the mix (the timed-out wait is its only refusal):
    /// the events it should have made.
    fn step(&mut self) -> Res<usize> {
        loop {
            if let Some((req, events)) = self.next() {
                let waits = matches!(req, Request::LockAcquire(_));
                match self.c.timed_try(req)?.1 {
                    // The wait for the held file times out: that is the point.
                    Err(e) if !waits => return Err(maos_tests::client::remote(&e)),
                    _ => return Ok(events),
                }
            }
        }
    }
}

/// A started session of `AGENTS` running agents, agent 0 holding the session's shared file; its
/// id and one worker (own connection) per agent.
fn team(d: &Daemon, objective: &str) -> Res<(String, Vec<Worker>)> {
    let mut c = d.client()?;
    let sid = create_session(&mut c, objective, true)?;
    let cwd = d.root.clone();
    let tag: String = sid.trim_start_matches("sess_").chars().take(8).collect();
    let shared = format!("src/{tag}/shared.rs");
    let file = d.env.project.join(&shared);
    std::fs::create_dir_all(d.env.project.join(format!("src/{tag}"))).map_err(|e| e.to_string())?;
    std::fs::write(&file, b"// shared\n").map_err(|e| format!("{}: {e}", file.display()))?;
    let mut workers = Vec::with_capacity(AGENTS);
    for k in 0..AGENTS {
        let role = ["coder", "tester", "reviewer", "docs"][k % 4];
        let aid = running_agent(&mut c, &sid, role)?;
        let dir = format!("src/{tag}/a{k:02}");
        let abs = d.env.project.join(&dir);
        std::fs::create_dir_all(&abs).map_err(|e| format!("{}: {e}", abs.display()))?;
        workers.push(Worker {
            c: d.client()?,
            sid: sid.clone(),
            aid,
            k,
            cwd: cwd.clone(),
            shared: shared.clone(),
            dir,
            cycle: 0,
            step: 0,
        });
    }
    let holder = workers[0].aid.clone();
    workers[0].c.call(Request::LockAcquire(req::LockAcquire {
        agent: holder,
        lock: req::Acquire {
            at: req::LockAt {
                path: shared,
                cwd: Some(cwd),
            },
            mode: LockMode::Write,
            wait: LockWait::NoWait,
            ttl_ms: Some(24 * 3600 * 1000),
        },
    }))?;
    Ok((sid, workers))
}

/// Run every worker in its own thread until about `events` events are made or `stop` is set;
/// at `rate` events/s in all if given (each thread its share), else as fast as they go. The
/// workers back, and the seconds it took.
fn drive(
    workers: Vec<Worker>,
    events: usize,
    rate: Option<f64>,
    stop: Arc<AtomicBool>,
) -> Res<(Vec<Worker>, f64)> {
    let total = Arc::new(AtomicUsize::new(0));
    let share = rate.map(|r| r / workers.len() as f64);
    let t0 = Instant::now();
    let handles: Vec<_> = workers
        .into_iter()
        .map(|mut w| {
            let (total, stop) = (total.clone(), stop.clone());
            std::thread::spawn(move || -> Res<Worker> {
                let mut mine = 0usize;
                while total.load(Ordering::Relaxed) < events && !stop.load(Ordering::Relaxed) {
                    let n = w.step()?;
                    mine += n;
                    total.fetch_add(n, Ordering::Relaxed);
                    if let Some(share) = share {
                        let next = t0 + Duration::from_secs_f64(mine as f64 / share);
                        if let Some(wait) = next.checked_duration_since(Instant::now()) {
                            std::thread::sleep(wait);
                        }
                    }
                }
                Ok(w)
            })
        })
        .collect();
    let workers = join_all(handles)?;
    Ok((workers, t0.elapsed().as_secs_f64()))
}

/// The project's newest event's sequence number.
fn newest(c: &mut Client) -> Res<u64> {
    match c.call(Request::Events(req::Events {
        filter: EventFilter::default(),
        limit: Some(1),
    }))? {
        Reply::Events(e) => Ok(e.last().map_or(0, |e| e.seq)),
        _ => Err("events answered something else".into()),
    }
}

// ------------------------------------------------------------------------- the dashboard

/// A `maos-dash` started by `maos --json dashboard`, stopped by `maos dashboard --stop`.
struct Dashboard<'a> {
    d: &'a Daemon,
    url: String,
    pid: u32,
}

impl<'a> Dashboard<'a> {
    fn start(d: &'a Daemon) -> Res<Dashboard<'a>> {
        let dash = harness::bin_dir()?.join("maos-dash");
        if !dash.is_file() {
            return Err(format!(
                "{} not found: build it (cargo build --release -p maos-dash)",
                dash.display()
            ));
        }
        let out = maos(d, &["--json", "dashboard"])?;
        let v: Value = serde_json::from_str(out.trim())
            .map_err(|e| format!("maos --json dashboard printed {out:?}: {e}"))?;
        let url = v["url"]
            .as_str()
            .ok_or_else(|| format!("maos --json dashboard printed no url: {out}"))?;
        let pid = v["pid"]
            .as_u64()
            .ok_or_else(|| format!("maos --json dashboard printed no pid: {out}"))?;
        Ok(Dashboard {
            d,
            url: url.to_string(),
            pid: pid as u32,
        })
    }

    /// The page of session `sid` of the daemon's project.
    fn session_url(&self, sid: &str) -> String {
        format!(
            "{}#/session/{}/{sid}",
            self.url,
            uri_component(&self.d.root)
        )
    }
}

impl Drop for Dashboard<'_> {
    fn drop(&mut self) {
        let _ = maos(self.d, &["dashboard", "--stop"]);
    }
}

/// `maos ARGS` against the daemon: its standard output, or why it failed.
fn maos(d: &Daemon, args: &[&str]) -> Res<String> {
    let bin = harness::client_bin()?;
    let out = d
        .env
        .command(&bin)
        .args(args)
        .env("MAOS_NO_AUTOSTART", "1")
        .output()
        .map_err(|e| format!("cannot run {}: {e}", bin.display()))?;
    if !out.status.success() {
        return Err(format!(
            "maos {} exited with {}: {}",
            args.join(" "),
            out.status,
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// JavaScript's `encodeURIComponent`.
fn uri_component(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || b"-_.!~*'()".contains(&b) {
            out.push(b as char);
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// Headless Chromium with its driver, its profile in the daemon's temporary directory.
fn browser(d: &Daemon, name: &str) -> Res<Browser> {
    browser_on(d, name, None)
}

/// [`browser`], confined to `cpus` if given.
fn browser_on(d: &Daemon, name: &str, cpus: Option<&str>) -> Res<Browser> {
    if !webdriver::available() {
        return Err(
            "the dashboard scenarios need chromium and chromedriver (Debian: chromium, chromium-driver)"
                .into(),
        );
    }
    Browser::try_start_on(&d.env.root().join(name), cpus)
}

/// Confine every thread of process `pid` (`0`: this thread, and the processes it starts from
/// now on) to CPU `cpu`, or let it run anywhere (`None`).
fn pin(pid: u32, cpu: Option<usize>) -> Res {
    let tids: Vec<i32> = if pid == 0 {
        vec![0]
    } else {
        std::fs::read_dir(format!("/proc/{pid}/task"))
            .map_err(|e| format!("/proc/{pid}/task: {e}"))?
            .flatten()
            .filter_map(|t| t.file_name().to_str()?.parse().ok())
            .collect()
    };
    // SAFETY: a zeroed cpu_set_t is a valid empty set; CPU_SET writes within it.
    let mut set: libc::cpu_set_t = unsafe { std::mem::zeroed() };
    // Not available_parallelism(): it counts the CPUs this thread may use, one once pinned.
    // SAFETY: sysconf only reads a system value.
    let cpus = usize::try_from(unsafe { libc::sysconf(libc::_SC_NPROCESSORS_ONLN) }).unwrap_or(2);
    for c in 0..cpus {
        if cpu.is_none_or(|only| only == c) {
            // SAFETY: c is below the number of CPUs, well within the set's size.
            unsafe { libc::CPU_SET(c, &mut set) };
        }
    }
    for tid in tids {
        // SAFETY: the set is initialised and its size is passed with it.
        let r =
            unsafe { libc::sched_setaffinity(tid, std::mem::size_of::<libc::cpu_set_t>(), &set) };
        if r != 0 {
            return Err(format!(
                "cannot pin thread {tid} of {pid}: {}",
                std::io::Error::last_os_error()
            ));
        }
    }
    Ok(())
}

/// What a drawn page says of itself: null until `maos-ready`, else when it was ready, the
/// number of its elements, its timeline rows, and its API requests (path, ms from start to the
/// answer's end, body bytes) up to then.
const READY_JS: &str = r#"
const st = document.getElementById('status');
if (st && st.className === 'bad') return { error: st.textContent };
const m = performance.getEntriesByName('maos-ready')[0];
if (!m) return null;
const api = performance.getEntriesByType('resource')
  .filter(r => r.name.includes('/api/') && r.startTime <= m.startTime)
  .map(r => [new URL(r.name).pathname, r.responseEnd - r.startTime, r.encodedBodySize]);
const marks = performance.getEntriesByType('mark').map(k => k.name.replace('maos-', '') + ' ' + Math.round(k.startTime));
return { ready: m.startTime, dom: document.getElementsByTagName('*').length,
         rows: document.querySelectorAll('#event-rows tr').length, api, marks };
"#;

/// One drawn page.
struct Load {
    /// The page's own marks, "name ms" from navigation (answered, charted, drawn, ready).
    marks: String,
    ready_ms: f64,
    dom: u64,
    rows: u64,
    /// Per API path: (ms, bytes) of its first request.
    api: Vec<(String, f64, f64)>,
}

impl Load {
    fn api(&self, path: &str) -> (f64, f64) {
        self.api
            .iter()
            .find(|(p, _, _)| p == path)
            .map_or((f64::NAN, f64::NAN), |(_, ms, b)| (*ms, *b))
    }
}

/// Load `url` afresh (from a blank page) and wait until it is drawn.
fn load(b: &Browser, url: &str) -> Res<Load> {
    b.try_open("about:blank")?;
    b.try_open(url)?;
    drawn(b, url)
}

/// Wait until the page is drawn: what it says of itself then.
fn drawn(b: &Browser, url: &str) -> Res<Load> {
    let end = Instant::now() + READY_WITHIN;
    loop {
        let v = b.try_eval(READY_JS)?;
        if let Some(e) = v.get("error") {
            return Err(format!("the page says: {e}"));
        }
        if let Some(ready) = v.get("ready").and_then(Value::as_f64) {
            let api = v["api"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .map(|r| {
                            (
                                r[0].as_str().unwrap_or_default().to_string(),
                                r[1].as_f64().unwrap_or(f64::NAN),
                                r[2].as_f64().unwrap_or(f64::NAN),
                            )
                        })
                        .collect()
                })
                .unwrap_or_default();
            return Ok(Load {
                marks: v["marks"]
                    .as_array()
                    .map(|m| {
                        m.iter()
                            .filter_map(Value::as_str)
                            .collect::<Vec<_>>()
                            .join(", ")
                    })
                    .unwrap_or_default(),
                ready_ms: ready,
                dom: v["dom"].as_u64().unwrap_or(0),
                rows: v["rows"].as_u64().unwrap_or(0),
                api,
            });
        }
        if Instant::now() > end {
            let what = b
                .try_eval(
                    "return document.getElementById('status').textContent + ' | ' + location.href + ' | ' + \
                     performance.getEntriesByType('resource').map(r => r.name + ' ' + Math.round(r.responseEnd)).join(', ')",
                )
                .unwrap_or_else(Value::String);
            return Err(format!(
                "{url} was not drawn within {READY_WITHIN:?}; the page: {what}"
            ));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// Whether the page follows its project's events (its EventSource is open).
const LIVE_JS: &str = "return typeof streams !== 'undefined' && streams.size > 0 && \
                       [...streams.values()].every(s => s.src.readyState === 1)";

fn until_live(b: &Browser) -> Res {
    let end = Instant::now() + READY_WITHIN;
    while b.try_eval(LIVE_JS)? != Value::Bool(true) {
        if Instant::now() > end {
            return Err("the page did not follow the events".into());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Ok(())
}

/// CPU seconds used so far by each process under `roots` (them and their descendants).
fn tree_cpu(roots: &[u32]) -> HashMap<u32, f64> {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return HashMap::new();
    };
    let pids: Vec<u32> = dir
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse().ok())
        .collect();
    let parent: HashMap<u32, u32> = pids
        .iter()
        .filter_map(|&p| Some((p, maos_tests::procfs::stat(p)?.ppid)))
        .collect();
    let under = |mut p: u32| {
        for _ in 0..64 {
            if roots.contains(&p) {
                return true;
            }
            match parent.get(&p) {
                Some(&pp) if pp > 1 => p = pp,
                _ => return false,
            }
        }
        false
    };
    pids.iter()
        .filter(|&&p| under(p))
        .map(|&p| (p, maos_tests::procfs::cpu_secs(&p.to_string())))
        .filter(|(_, c)| c.is_finite())
        .collect()
}

/// CPU seconds the processes used between two readings of [`tree_cpu`]: those that lived
/// through both their difference, those started since all of theirs (those gone meanwhile
/// are lost: the browser's renderers of a page left).
fn cpu_between(before: &HashMap<u32, f64>, after: &HashMap<u32, f64>) -> f64 {
    after
        .iter()
        .map(|(p, c)| c - before.get(p).copied().unwrap_or(0.0))
        .sum()
}

/// The renderer's own counters (CDP `Performance.getMetrics`): seconds spent in tasks, script,
/// style recalculation and layout so far.
fn page_metrics(b: &Browser) -> Res<[f64; 4]> {
    let v = b.cdp("Performance.getMetrics", serde_json::json!({}))?;
    let get = |name: &str| {
        v["metrics"]
            .as_array()
            .and_then(|m| m.iter().find(|x| x["name"] == name))
            .and_then(|x| x["value"].as_f64())
            .unwrap_or(f64::NAN)
    };
    Ok([
        get("TaskDuration"),
        get("ScriptDuration"),
        get("RecalcStyleDuration"),
        get("LayoutDuration"),
    ])
}

fn max(v: &[f64]) -> f64 {
    v.iter().copied().fold(f64::NAN, f64::max)
}

// ------------------------------------------------------------------------- dash-paint

/// `n` loads of a session, each from a fresh `maos-dash` (cold), then `n` reloads (warm).
fn cold_warm(d: &Daemon, b: &Browser, sid: &str, n: usize) -> Res<(Vec<Load>, Vec<Load>)> {
    let (mut cold, mut warm) = (Vec::new(), Vec::new());
    let mut dash = None;
    for _ in 0..n {
        drop(dash.take());
        let fresh = Dashboard::start(d)?;
        cold.push(load(b, &fresh.session_url(sid))?);
        dash = Some(fresh);
    }
    let url = dash.as_ref().ok_or("no load")?.session_url(sid);
    for _ in 0..n {
        warm.push(load(b, &url)?);
    }
    Ok((cold, warm))
}

/// `n` loads of a session, each right after a daemon restart and from a fresh `maos-dash`
/// (the daemon makes the session's chart again from its database).
/// `n` loads, each right after the daemon is stopped and started again (it saves its charts
/// when stopped), or killed (`kill -9`) and started again with no chart saved (the worst
/// case: a chart saved at an earlier stop would be used, and only what came after it read).
fn restarted(d: &mut Daemon, b: &Browser, sid: &str, n: usize, killed: bool) -> Res<Vec<Load>> {
    if !killed {
        // Looked at before the first stop (the other session's restarts come between): a
        // daemon saves the charts it has.
        load(b, &Dashboard::start(d)?.session_url(sid))?;
    }
    let mut loads = Vec::new();
    for _ in 0..n {
        if killed {
            d.kill9()?;
            let projects = d.env.home.join("projects");
            for p in
                std::fs::read_dir(&projects).map_err(|e| format!("{}: {e}", projects.display()))?
            {
                let charts = p.map_err(|e| e.to_string())?.path().join("charts");
                if charts.exists() {
                    std::fs::remove_dir_all(&charts)
                        .map_err(|e| format!("{}: {e}", charts.display()))?;
                }
            }
        } else {
            d.stop()?;
        }
        d.spawn()?;
        d.wait_ready()?;
        let fresh = Dashboard::start(d)?;
        loads.push(load(b, &fresh.session_url(sid))?);
    }
    Ok(loads)
}

/// The figures of one session's loads, each kind with its goal: `loads[1]` (warm) gives the
/// page's sizes.
fn paint_rows(
    events: u64,
    loads: &[(&str, Vec<Load>, Option<Goal>)],
    rows: &mut Vec<Metric>,
) -> Res {
    let name = format!(
        "dash-paint {} events",
        crate::report::group_thousands(events as i64)
    );
    for (kind, loads, goal) in loads {
        for l in loads {
            eprintln!(
                "  {kind} load, the page's marks (ms from navigation): {}",
                l.marks
            );
        }
        let mut ready: Vec<f64> = loads.iter().map(|l| l.ready_ms).collect();
        eprintln!(
            "{name}: {kind} loads, ms to maos-ready in order: {}",
            ready
                .iter()
                .map(|r| format!("{r:.0}"))
                .collect::<Vec<_>>()
                .join(" ")
        );
        let mut gantt: Vec<f64> = loads.iter().map(|l| l.api("/api/gantt").0).collect();
        let mut session: Vec<f64> = loads.iter().map(|l| l.api("/api/session").0).collect();
        let mut timeline: Vec<f64> = loads.iter().map(|l| l.api("/api/timeline").0).collect();
        let mut m = Metric::new(
            &name,
            &format!("{kind}: ready (maos-ready) median"),
            median(&mut ready),
            "ms",
        );
        if let Some(g) = goal {
            m = m.goal(*g);
        }
        rows.push(m);
        let mut worst = Metric::new(&name, &format!("{kind}: ready max"), max(&ready), "ms");
        if let Some(g) = goal {
            worst = worst.goal(*g);
        }
        rows.push(worst);
        rows.push(Metric::new(
            &name,
            &format!("{kind}: /api/gantt median"),
            median(&mut gantt),
            "ms",
        ));
        rows.push(Metric::new(
            &name,
            &format!("{kind}: /api/session median"),
            median(&mut session),
            "ms",
        ));
        rows.push(Metric::new(
            &name,
            &format!("{kind}: /api/timeline median"),
            median(&mut timeline),
            "ms",
        ));
    }
    let last = loads
        .get(1)
        .and_then(|(_, l, _)| l.last())
        .ok_or("no warm load")?;
    rows.push(Metric::new(
        &name,
        "/api/gantt body",
        last.api("/api/gantt").1 / 1024.0,
        "KiB",
    ));
    rows.push(Metric::new(
        &name,
        "/api/timeline body",
        last.api("/api/timeline").1 / 1024.0,
        "KiB",
    ));
    rows.push(Metric::new(
        &name,
        "elements in the page",
        last.dom as f64,
        "",
    ));
    // Never every event: a page of the timeline at most (the server's limit).
    rows.push(
        Metric::new(&name, "event rows in the page", last.rows as f64, "")
            .goal(Goal::AtMost(500.0)),
    );
    Ok(())
}

/// Fill a session to about `events` events (as fast as 20 connections go): its id, the events
/// it has, and the fill's events/s.
fn filled(d: &Daemon, objective: &str, events: usize) -> Res<(String, u64, f64)> {
    let mut c = d.client()?;
    let before = newest(&mut c)?;
    let (sid, workers) = team(d, objective)?;
    let (_, secs) = drive(workers, events, None, Arc::new(AtomicBool::new(false)))?;
    let made = newest(&mut c)? - before;
    Ok((sid, made, made as f64 / secs))
}

pub fn scen_dash_paint(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(10);
    let big = o.events.unwrap_or(200_000);
    let mut d = harness::start(sync)?;
    let (small_sid, small, small_rate) = filled(&d, "bench: dashboard, 10,000 events", 10_000)?;
    let (big_sid, big_made, big_rate) = filled(&d, "bench: dashboard, big", big)?;
    eprintln!(
        "dash-paint: filled {small} events ({small_rate:.0}/s) and {big_made} ({big_rate:.0}/s)"
    );
    let b = browser(&d, "chromium")?;
    let mut rows = Vec::new();
    let sessions = [(&small_sid, small), (&big_sid, big_made)];
    let mut loads = Vec::new();
    for (sid, _) in sessions {
        loads.push(cold_warm(&d, &b, sid, n)?);
    }
    // The restarts last: a restarted daemon has no chart kept, and cold loads must not follow
    // one.
    for ((sid, events), (cold, warm)) in sessions.into_iter().zip(loads) {
        let stopped = restarted(&mut d, &b, sid, n, false)?;
        let killed = restarted(&mut d, &b, sid, n, true)?;
        let goal = Some(Goal::AtMost(500.0));
        paint_rows(
            events,
            &[
                ("cold", cold, goal),
                ("warm", warm, goal),
                ("daemon stopped and started", stopped, goal),
                // A crash saves no chart: the first view reads the session's events again.
                ("daemon killed (-9), no chart saved", killed, None),
            ],
            &mut rows,
        )?;
    }
    for r in &mut rows {
        r.scenario = label(&r.scenario, sync);
    }
    print_human(
        &format!(
            "dash-paint: a session page in headless Chromium ({AGENTS} agents; {n} cold loads, \
             each from a fresh maos-dash, {n} warm reloads, then {n} loads each right after a daemon \
             restart); performance.mark(\"maos-ready\") from navigation start"
        ),
        &rows,
    );
    Ok(rows)
}

// ------------------------------------------------------------------------- dash-live

/// A plain HTTP reader of the dashboard's event stream beside the page: when each event's
/// `id:` line arrived (seq, Unix ms), to tell the server's share of the latency from the
/// browser's.
struct Tap {
    seen: Arc<std::sync::Mutex<Vec<(u64, f64)>>>,
    stop: Arc<AtomicBool>,
}

impl Tap {
    fn open(dash: &Dashboard<'_>) -> Res<Tap> {
        use std::io::{Read, Write};
        let rest = dash
            .url
            .strip_prefix("http://127.0.0.1:")
            .ok_or_else(|| format!("unexpected dashboard url {}", dash.url))?;
        let (port, token) = rest
            .split_once("/?token=")
            .ok_or_else(|| format!("unexpected dashboard url {}", dash.url))?;
        let mut s = std::net::TcpStream::connect(format!("127.0.0.1:{port}"))
            .map_err(|e| format!("connect to the dashboard: {e}"))?;
        let req = format!(
            "GET /api/events?project={} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nX-Maos-Token: {token}\r\nAccept: text/event-stream\r\n\r\n",
            uri_component(&dash.d.root)
        );
        s.write_all(req.as_bytes()).map_err(|e| e.to_string())?;
        s.set_read_timeout(Some(Duration::from_millis(100)))
            .map_err(|e| e.to_string())?;
        let seen = Arc::new(std::sync::Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let mut buf = vec![0u8; 1 << 16];
            let mut text = String::new();
            let mut said = false;
            while !stop2.load(Ordering::Relaxed) {
                let n = match s.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => n,
                    Err(_) => continue,
                };
                let at = harness::unix_us() as f64 / 1000.0;
                text.push_str(&String::from_utf8_lossy(&buf[..n]));
                if !said && text.contains("text/event-stream") {
                    said = true;
                    let _ = tx.send(());
                }
                let mut got = Vec::new();
                while let Some(i) = text.find('\n') {
                    let line: String = text.drain(..=i).collect();
                    if let Some(seq) = line.strip_prefix("id:").and_then(|v| v.trim().parse().ok())
                    {
                        got.push((seq, at));
                    }
                }
                if let Ok(mut v) = seen2.lock() {
                    v.extend(got);
                }
            }
        });
        rx.recv_timeout(READY_WITHIN)
            .map_err(|_| "the event stream did not answer".to_string())?;
        Ok(Tap { seen, stop })
    }

    fn arrivals(&self) -> HashMap<u64, f64> {
        self.seen
            .lock()
            .map(|v| v.iter().copied().collect())
            .unwrap_or_default()
    }
}

impl Drop for Tap {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
    }
}

/// What one live run saw.
struct Live {
    /// Events committed per second.
    rate: f64,
    /// ms from each event's commit to its row, sorted.
    lat: Vec<f64>,
    /// Events committed that never reached the page.
    missed: u64,
    /// ms from each event's commit to its arrival at a plain HTTP reader of the stream, sorted.
    wire: Vec<f64>,
    /// The page's main thread, per second of the run: busy, in script, style, layout.
    busy: [f64; 4],
}

/// Commit events at `rate`/s for `secs` with the page open: the workers back, and what the
/// page saw.
fn live_run(
    c: &mut Client,
    b: &Browser,
    tap: &Tap,
    workers: Vec<Worker>,
    rate: f64,
    secs: f64,
) -> Res<(Vec<Worker>, Live)> {
    b.try_eval("window.maosSeen = []; return true")?;
    let before = newest(c)?;
    let m0 = page_metrics(b)?;
    let (workers, took) = drive(
        workers,
        (rate * secs) as usize,
        Some(rate),
        Arc::new(AtomicBool::new(false)),
    )?;
    let last = newest(c)?;
    let m1 = page_metrics(b)?;
    // The page's main thread, per second of the run: busy, script, style, layout.
    let busy = std::array::from_fn(|i| (m1[i] - m0[i]) / took);
    let end = Instant::now() + Duration::from_secs(30);
    let seen = loop {
        let v = b.try_eval("return window.maosSeen")?;
        let seen: Vec<(u64, f64, String)> = v
            .as_array()
            .map(|a| {
                a.iter()
                    .filter_map(|x| {
                        Some((x[0].as_u64()?, x[1].as_f64()?, x[2].as_str()?.to_string()))
                    })
                    .collect()
            })
            .unwrap_or_default();
        if seen.iter().any(|s| s.0 >= last) || Instant::now() > end {
            break seen;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let arrivals = tap.arrivals();
    let (mut lat, mut wire) = (Vec::new(), Vec::new());
    for (seq, at_ms, ts) in &seen {
        if *seq <= before {
            continue;
        }
        let us = maos_tests::parse_ts(ts).ok_or_else(|| format!("bad event time {ts:?}"))?;
        let committed = us as f64 / 1000.0;
        lat.push(at_ms - committed);
        if let Some(arrived) = arrivals.get(seq) {
            wire.push(arrived - committed);
        }
    }
    lat.sort_by(f64::total_cmp);
    wire.sort_by(f64::total_cmp);
    let missed = (last - before).saturating_sub(lat.len() as u64);
    let rate = (last - before) as f64 / took;
    Ok((
        workers,
        Live {
            rate,
            lat,
            missed,
            wire,
            busy,
        },
    ))
}

/// Nearest-rank percentile of sorted values.
fn pct_f(sorted: &[f64], p: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    let rank = ((p / 100.0) * sorted.len() as f64).ceil() as usize;
    sorted[rank.clamp(1, sorted.len()) - 1]
}

pub fn scen_dash_live(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let secs = o.duration.unwrap_or(10.0);
    let d = harness::start(sync)?;
    let mut c = d.client()?;
    let (sid, workers) = team(&d, "bench: dashboard, live")?;
    let dash = Dashboard::start(&d)?;
    let b = browser(&d, "chromium")?;
    b.cdp("Performance.enable", serde_json::json!({}))?;
    load(&b, &dash.session_url(&sid))?;
    until_live(&b)?;
    // Watched as a person watching events would: the timeline on screen (out of view, the
    // page adds rows once a second).
    b.try_eval("document.getElementById('timeline').scrollIntoView(); return true")?;
    let tap = Tap::open(&dash)?;
    let name = label("dash-live", sync);
    let mut rows = Vec::new();
    let mut workers = workers;
    for (rate, goal) in [(1000.0, Some(Goal::AtMost(100.0))), (100.0, None)] {
        let (
            back,
            Live {
                rate: actual,
                lat,
                missed,
                wire,
                busy,
            },
        ) = live_run(&mut c, &b, &tap, workers, rate, secs)?;
        workers = back;
        let at = format!("{actual:.0} events/s");
        let mut p99 = Metric::new(
            &name,
            &format!("commit to DOM p99 ({at})"),
            pct_f(&lat, 99.0),
            "ms",
        );
        if let Some(g) = goal {
            p99 = p99.goal(g);
        }
        rows.extend([
            Metric::new(
                &name,
                &format!("commit to DOM p50 ({at})"),
                pct_f(&lat, 50.0),
                "ms",
            ),
            p99,
            Metric::new(
                &name,
                &format!("commit to DOM max ({at})"),
                pct_f(&lat, 100.0),
                "ms",
            ),
            Metric::new(
                &name,
                &format!("events not shown ({at})"),
                missed as f64,
                "",
            )
            .goal(Goal::AtMost(0.0)),
            Metric::new(
                &name,
                &format!("commit to the stream's reader p50 ({at})"),
                pct_f(&wire, 50.0),
                "ms",
            ),
            Metric::new(
                &name,
                &format!("commit to the stream's reader p99 ({at})"),
                pct_f(&wire, 99.0),
                "ms",
            ),
        ]);
        for (i, what) in ["busy", "in script", "in style", "in layout"]
            .iter()
            .enumerate()
        {
            rows.push(Metric::new(
                &name,
                &format!("page's main thread {what} ({at})"),
                busy[i] * 100.0,
                "% of the time",
            ));
        }
    }
    drop(workers);
    print_human(
        &format!(
            "dash-live: one session page in headless Chromium following its session ({AGENTS} \
             agents, the mix of hook calls, locks, notes, denials, waits) for {secs} s at each \
             rate; event commit (its ts) to its row in the page's timeline (window.maosSeen)"
        ),
        &rows,
    );
    Ok(rows)
}

// ------------------------------------------------------------------------- dash-hook

/// The input of a `PreToolUse` `Write` of a Claude Code subagent (2 KB of content).
fn hook_input(d: &Daemon) -> Res<PathBuf> {
    let input = d.env.root().join("pre-tool-use-subagent.json");
    let file = d.env.project.join("src/hooked.rs");
    std::fs::write(&file, b"// hooked\n").map_err(|e| format!("{}: {e}", file.display()))?;
    let body = serde_json::json!({
        "session_id": "bench-dash-hook", "cwd": d.env.project, "hook_event_name": "PreToolUse",
        "agent_id": "bench-dash-subagent", "agent_type": "code-writer",
        "tool_name": "Write", "tool_use_id": "toolu_bench_dash",
        "tool_input": {"file_path": file, "content": "x".repeat(2000)},
    });
    std::fs::write(&input, body.to_string()).map_err(|e| format!("{}: {e}", input.display()))?;
    Ok(input)
}

fn hook_once(d: &Daemon, maos: &Path, input: &Path) -> Res<f64> {
    let stdin = std::fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let mut cmd: Command = d.client_command(maos);
    cmd.arg("hook").stdin(stdin);
    spawn_timed(&mut cmd)
}

/// Both ways: everything sharing the machine's CPUs, then (with two CPUs or more) the
/// browsers on CPU 1 and the rest (maosd, maos-dash, the hooks, the event flow) on CPU 0, so
/// that what the dashboards cost the daemon is told apart from what rendering five pages
/// costs the machine.
pub fn scen_dash_hook(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let mut rows = hook_side_by_side(o, sync, false)?;
    if std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2) {
        let pinned = hook_side_by_side(o, sync, true);
        pin(0, None)?;
        rows.extend(pinned?);
    }
    Ok(rows)
}

fn hook_side_by_side(o: &Opts, sync: &str, pinned: bool) -> Res<Vec<Metric>> {
    let pages = o.clients.unwrap_or(5);
    let per_round = 20;
    let rounds = o.requests.unwrap_or(200).div_ceil(per_round).max(1);
    let rate = o.rate.unwrap_or(200.0);
    let d = harness::start(sync)?;
    let maos = harness::client_bin()?;
    let (sid, workers) = team(&d, "bench: dashboard, hook")?;
    let input = hook_input(&d)?;
    for _ in 0..5 {
        hook_once(&d, &maos, &input)?;
    }
    let dash = Dashboard::start(&d)?;
    let url = dash.session_url(&sid);
    let browsers: Vec<Browser> = (0..pages)
        .map(|i| browser_on(&d, &format!("chromium-{i}"), pinned.then_some("1")))
        .collect::<Res<_>>()?;
    if pinned {
        pin(d.pid(), Some(0))?;
        pin(dash.pid, Some(0))?;
        // This thread: the hooks it starts, and the event flow's threads.
        pin(0, Some(0))?;
    }
    let stop = Arc::new(AtomicBool::new(false));
    let flow = {
        let stop = stop.clone();
        std::thread::spawn(move || drive(workers, usize::MAX, Some(rate), stop))
    };
    let drivers: Vec<u32> = browsers.iter().map(Browser::driver_pid).collect();
    // CPU seconds of (maosd, maos-dash, the browsers) and wall seconds, per condition.
    let cpu_now = || {
        (
            d.cpu_secs(),
            maos_tests::procfs::cpu_secs(&dash.pid.to_string()),
            tree_cpu(&drivers),
        )
    };
    let mut cpu = [[0.0f64; 4]; 2];
    let mut run = || -> Res<(Vec<f64>, Vec<f64>)> {
        let (mut alone, mut watched) = (Vec::new(), Vec::new());
        for r in 0..rounds {
            // A B, then B A: neither goes first all the time.
            for watching in if r % 2 == 0 {
                [false, true]
            } else {
                [true, false]
            } {
                for b in &browsers {
                    if watching {
                        load(b, &url)?;
                        until_live(b)?;
                    } else {
                        b.try_open("about:blank")?;
                    }
                }
                let (c0, t0) = (cpu_now(), Instant::now());
                for _ in 0..per_round {
                    let t = hook_once(&d, &maos, &input)?;
                    if watching {
                        watched.push(t);
                    } else {
                        alone.push(t);
                    }
                    std::thread::sleep(Duration::from_millis(10));
                }
                let c1 = cpu_now();
                let slot = &mut cpu[usize::from(watching)];
                slot[0] += c1.0 - c0.0;
                slot[1] += c1.1 - c0.1;
                slot[2] += cpu_between(&c0.2, &c1.2);
                slot[3] += t0.elapsed().as_secs_f64();
            }
        }
        Ok((alone, watched))
    };
    let result = run();
    stop.store(true, Ordering::Relaxed);
    let flowed = flow.join().map_err(|_| "the event flow panicked")?;
    let (mut alone, mut watched) = result?;
    flowed?;
    drop(browsers);
    drop(dash);
    alone.sort_by(f64::total_cmp);
    watched.sort_by(f64::total_cmp);
    let name = label(
        if pinned {
            "dash-hook, browsers on CPU 1, the rest on CPU 0"
        } else {
            "dash-hook"
        },
        sync,
    );
    let (m0, m1) = (median(&mut alone), median(&mut watched));
    let (p0, p1) = (pct_f(&alone, 99.0), pct_f(&watched, 99.0));
    let rows = vec![
        Metric::new(&name, "`maos hook` median, no dashboard", m0 * 1e6, "µs"),
        Metric::new(
            &name,
            &format!("`maos hook` median, {pages} pages watching"),
            m1 * 1e6,
            "µs",
        ),
        Metric::new(&name, "ratio of medians", m1 / m0, "×").goal(Goal::AtMost(1.1)),
        Metric::new(&name, "`maos hook` p99, no dashboard", p0 * 1e6, "µs"),
        Metric::new(
            &name,
            &format!("`maos hook` p99, {pages} pages watching"),
            p1 * 1e6,
            "µs",
        ),
        Metric::new(&name, "ratio of p99s", p1 / p0, "×").goal(Goal::AtMost(1.1)),
    ];
    let mut rows = rows;
    for (who, i) in [("maosd", 0), ("maos-dash", 1), ("the browsers", 2)] {
        for (when, c) in [("no dashboard", &cpu[0]), ("pages watching", &cpu[1])] {
            rows.push(Metric::new(
                &name,
                &format!("CPU of {who}, {when}"),
                c[i] / c[3] * 100.0,
                "% of a core",
            ));
        }
    }
    print_human(
        &format!(
            "{name}: whole-process `maos hook` (a subagent's PreToolUse Write) with no page open \
             and with {pages} headless Chromium pages on a live session ({rate:.0} events/s flowing \
             all along), {rounds} rounds of {per_round} calls each way, interleaved"
        ),
        &rows,
    );
    Ok(rows)
}
