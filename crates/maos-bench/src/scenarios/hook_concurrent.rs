//! Concurrent hooks: subagents of one Claude session, each its own thread spawning `maos hook`
//! processes, paced and back-to-back; then a check that every agent holds its locks.

use maos_proto::req;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};
use std::time::{Duration, Instant};

use maos_core::LockMode;
use maos_proto::{Reply, Request};
use maos_tests::client::Res;
use maos_tests::daemon::Daemon;

use crate::harness;
use crate::opts::Opts;
use crate::report::{Goal, Metric, label, latency_rows, print_human};

/// The Claude Code session every simulated subagent belongs to.
const HOOK_SESSION: &str = "bench-concurrent-session";

/// Files each subagent writes, in turn.
const HOOK_FILES: usize = 5;

/// Subagent types, in turn (the daemon makes them the agents' roles).
const HOOK_TYPES: [&str; 4] = [
    "general-purpose",
    "code-writer",
    "test-writer",
    "refactorer",
];

/// One simulated subagent of the shared Claude session: its ids and its prepared hook inputs.
struct HookAgent {
    /// Claude Code's `agent_id`.
    ext_id: String,
    agent_type: String,
    /// `SubagentStart` input.
    start: PathBuf,
    /// Project-relative paths of its own files.
    files: Vec<String>,
    /// Per file: the `PreToolUse` and the `PostToolUse` `Write` input.
    pre: Vec<PathBuf>,
    post: Vec<PathBuf>,
}

/// `n` subagents, each with existing files `src/agentKK/file{0..5}.rs` and its hook inputs
/// written to files (2 KB of content per Write, as in `hook`).
fn hook_agents(d: &Daemon, n: usize) -> Res<Vec<HookAgent>> {
    let inputs = d.env.root().join("hook-inputs");
    fs::create_dir_all(&inputs).map_err(|e| format!("{}: {e}", inputs.display()))?;
    let save = |name: String, v: serde_json::Value| -> Res<PathBuf> {
        let p = inputs.join(name);
        fs::write(&p, v.to_string()).map_err(|e| format!("{}: {e}", p.display()))?;
        Ok(p)
    };
    let content = "x".repeat(2000);
    (0..n)
        .map(|k| {
            let ext_id = format!("bench-agent-{k:02}");
            let agent_type = HOOK_TYPES[k % HOOK_TYPES.len()].to_string();
            let base = |event: &str| {
                serde_json::json!({
                    "session_id": HOOK_SESSION, "cwd": d.env.project, "hook_event_name": event,
                    "agent_id": ext_id, "agent_type": agent_type,
                })
            };
            let dir = d.env.project.join(format!("src/agent{k:02}"));
            fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
            let mut a = HookAgent {
                start: save(format!("{ext_id}-start.json"), base("SubagentStart"))?,
                ext_id: ext_id.clone(),
                agent_type: agent_type.clone(),
                files: Vec::new(),
                pre: Vec::new(),
                post: Vec::new(),
            };
            for j in 0..HOOK_FILES {
                let rel = format!("src/agent{k:02}/file{j}.rs");
                let abs = d.env.project.join(&rel);
                fs::write(&abs, b"// written by maos-bench\n")
                    .map_err(|e| format!("{}: {e}", abs.display()))?;
                let tool = |event: &str| {
                    let mut v = base(event);
                    v["tool_name"] = "Write".into();
                    v["tool_use_id"] = format!("toolu_{ext_id}_{j}").into();
                    v["tool_input"] = serde_json::json!({"file_path": abs, "content": content});
                    if event == "PostToolUse" {
                        v["tool_response"] = serde_json::json!({"filePath": abs, "success": true});
                    }
                    v
                };
                a.pre
                    .push(save(format!("{ext_id}-pre-{j}.json"), tool("PreToolUse"))?);
                a.post.push(save(
                    format!("{ext_id}-post-{j}.json"),
                    tool("PostToolUse"),
                )?);
                a.files.push(rel);
            }
            Ok(a)
        })
        .collect()
}

/// One `maos hook` process fed `input`: (spawn-to-exit in ns, its output).
fn hook_process(maos: &Path, d: &Daemon, input: &Path) -> Res<(u64, Output)> {
    let stdin = fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
    let mut c = d.client_command(maos);
    c.arg("hook")
        // Nothing of a maos-managed shell the bench may run in: the ids come from the input.
        .env_remove("MAOS_SESSION_ID")
        .env_remove("MAOS_AGENT_ID")
        .env_remove("MAOS_HOOK_FAIL")
        .env_remove("MAOS_HOOK_TIMEOUT_MS")
        .stdin(stdin)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let t = Instant::now();
    let out = c
        .output()
        .map_err(|e| format!("cannot run {}: {e}", maos.display()))?;
    Ok((t.elapsed().as_nanos() as u64, out))
}

/// What is wrong with a hook's answer, if anything. `maos hook` allows a write (and takes
/// note of a PostToolUse) by printing nothing; it prints a `deny` object to refuse, and a
/// `systemMessage` when the daemon did not answer in time (it then fails open).
fn hook_fault(out: &Output) -> Option<String> {
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stdout = stdout.trim();
    if !out.status.success() {
        let stderr = String::from_utf8_lossy(&out.stderr);
        Some(format!("exited with {}: {}", out.status, stderr.trim()))
    } else if stdout.contains("deny") {
        Some(format!("denied: {stdout}"))
    } else if !stdout.is_empty() {
        Some(format!("unexpected answer: {stdout}"))
    } else {
        None
    }
}

/// What one simulated subagent saw in one run.
#[derive(Default)]
struct HookAgentRun {
    samples: Vec<u64>,
    /// Files it took the write lock of (a PreToolUse that was allowed).
    touched: [bool; HOOK_FILES],
    posts: usize,
    faults: usize,
    first_fault: Option<String>,
    end: Option<Instant>,
}

/// One run over all agents.
struct HookRun {
    samples: Vec<u64>,
    agents: Vec<HookAgentRun>,
    secs: f64,
    daemon_cpu: f64,
}

/// Every agent in its own thread, one `maos hook` process at a time (an agent waits for its
/// hook before the tool runs), `calls` each. Call i is a PostToolUse of the file written by
/// call i-1 when i % 4 == 3, else a PreToolUse of file i % 5.
///
/// Paced (`pace`), open loop: agent k's calls are due every `pace` from
/// start + k·pace/agents (starts spread evenly over the first period). A call that ends after
/// its successor was due is followed at once, and the schedule goes on from there: no burst
/// to catch up. Saturated (`None`): back-to-back from a common start.
fn drive_hooks(
    d: &Daemon,
    maos: &Path,
    agents: &[HookAgent],
    calls: usize,
    pace: Option<Duration>,
) -> Res<HookRun> {
    let n = agents.len() as u32;
    // Room to start the threads before the first call is due.
    let start = Instant::now() + Duration::from_millis(20);
    let cpu0 = d.cpu_secs();
    let results: Vec<Res<HookAgentRun>> = std::thread::scope(|s| {
        let handles: Vec<_> = agents
            .iter()
            .enumerate()
            .map(|(k, a)| {
                s.spawn(move || -> Res<HookAgentRun> {
                    let mut r = HookAgentRun {
                        samples: Vec::with_capacity(calls),
                        ..Default::default()
                    };
                    let mut next = start + pace.map_or(Duration::ZERO, |p| p * k as u32 / n);
                    for i in 0..calls {
                        let now = Instant::now();
                        if next > now {
                            std::thread::sleep(next - now);
                        }
                        let post = i % 4 == 3;
                        let (event, file) = if post {
                            ("PostToolUse", (i - 1) % HOOK_FILES)
                        } else {
                            ("PreToolUse", i % HOOK_FILES)
                        };
                        let input = if post { &a.post[file] } else { &a.pre[file] };
                        let (ns, out) = hook_process(maos, d, input)?;
                        r.samples.push(ns);
                        match hook_fault(&out) {
                            Some(f) => {
                                r.faults += 1;
                                r.first_fault.get_or_insert_with(|| {
                                    format!("{} {event} {}: {f}", a.ext_id, a.files[file])
                                });
                            }
                            None if post => r.posts += 1,
                            None => r.touched[file] = true,
                        }
                        if let Some(p) = pace {
                            next = (next + p).max(Instant::now());
                        }
                    }
                    r.end = Some(Instant::now());
                    Ok(r)
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err("an agent thread panicked".into()))
            })
            .collect()
    });
    let daemon_cpu = d.cpu_secs() - cpu0;
    let agents = results.into_iter().collect::<Res<Vec<_>>>()?;
    let faults: usize = agents.iter().map(|r| r.faults).sum();
    if faults > 0 {
        let first = agents
            .iter()
            .find_map(|r| r.first_fault.as_deref())
            .unwrap_or_default();
        return Err(format!(
            "{faults} of {} hook calls got a wrong answer; the first: {first}",
            calls * agents.len()
        ));
    }
    let end = agents.iter().filter_map(|r| r.end).max().unwrap_or(start);
    Ok(HookRun {
        samples: agents
            .iter()
            .flat_map(|r| r.samples.iter().copied())
            .collect(),
        secs: end.saturating_duration_since(start).as_secs_f64(),
        agents,
        daemon_cpu,
    })
}

/// After the runs: every subagent is one running agent of the one session, holds the write
/// lock of every file it was allowed to write, and has exactly its PostToolUse calls on the
/// timeline as `file_modified`, with no `tool_denied`. Nothing is queued.
fn check_hook_state(d: &Daemon, agents: &[HookAgent], runs: &[&HookRun]) -> Res {
    let mut c = d.client()?;
    let listed = c.call(Request::AgentList(req::AgentList { session: None }));
    let Reply::Agents(records) =
        listed.map_err(|e| format!("after the runs, the session's agents: {e}"))?
    else {
        return Err("agent_list answered something else".into());
    };
    let Reply::Locks(locks) = c.call(Request::LockList(req::LockList { session: None }))? else {
        return Err("lock_list answered something else".into());
    };
    if !locks.waiters.is_empty() {
        return Err(format!(
            "after the runs {} lock requests are still queued",
            locks.waiters.len()
        ));
    }
    for (k, a) in agents.iter().enumerate() {
        let mine: Vec<_> = records
            .iter()
            .filter(|r| r.external_agent_id.as_deref() == Some(a.ext_id.as_str()))
            .collect();
        let [rec] = mine.as_slice() else {
            return Err(format!(
                "the active session holds {} agents for subagent {} (expected 1)",
                mine.len(),
                a.ext_id
            ));
        };
        if rec.role != a.agent_type || rec.state != maos_core::AgentState::Running {
            return Err(format!(
                "subagent {} is a {} {} agent (expected a running {})",
                a.ext_id, rec.state, rec.role, a.agent_type
            ));
        }
        for (j, f) in a.files.iter().enumerate() {
            if !runs.iter().any(|r| r.agents[k].touched[j]) {
                continue;
            }
            let held = locks
                .locks
                .iter()
                .any(|l| &l.path == f && l.holder == rec.id && l.mode == LockMode::Write);
            if !held {
                return Err(format!(
                    "{} was allowed to write {f} but does not hold its write lock",
                    a.ext_id
                ));
            }
        }
        let Reply::Events(events) = c.call(Request::Events(req::Events {
            filter: maos_proto::EventFilter {
                agent: Some(rec.id.to_string()),
                types: vec!["file_modified".into(), "tool_denied".into()],
                ..Default::default()
            },
            limit: None,
        }))?
        else {
            return Err("events answered something else".into());
        };
        let modified = events.iter().filter(|e| e.kind == "file_modified").count();
        let posts: usize = runs.iter().map(|r| r.agents[k].posts).sum();
        if modified != posts || events.len() != modified {
            return Err(format!(
                "{}: {posts} PostToolUse calls were answered but the timeline holds {modified} \
                 file_modified and {} tool_denied events",
                a.ext_id,
                events.len() - modified
            ));
        }
    }
    Ok(())
}

/// Rows of one run: latency (p99 against `p99_goal`), calls/s, calls, daemon CPU.
fn hook_run_rows(name: &str, run: &mut HookRun, p99_goal: Option<Goal>) -> Vec<Metric> {
    let calls = run.samples.len();
    let mut rows = latency_rows(name, &mut run.samples, None, false);
    rows[1].goal = p99_goal;
    rows.push(Metric::new(name, "calls/s", calls as f64 / run.secs, ""));
    rows.push(Metric::new(name, "hook calls", calls as f64, ""));
    rows.push(Metric::new(
        name,
        "daemon CPU per call",
        run.daemon_cpu / calls.max(1) as f64 * 1e6,
        "µs",
    ));
    rows.push(Metric::new(
        name,
        "daemon CPU time",
        run.daemon_cpu * 1e3,
        "ms",
    ));
    rows
}

/// `--agents` subagents of one Claude session calling `maos hook` concurrently, each its own
/// process per call (spawn → answer → exit), on their own files so that nothing is denied.
/// Paced is the target (p99 ≤ 5 ms with 20 agents); saturated shows queueing when
/// more processes start at once than there are CPUs.
pub fn scen_hook_concurrent(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.agents.unwrap_or(20);
    let calls = o.requests.unwrap_or(50);
    let saturated_calls = calls.min(20);
    let pace_ms = o.pace_ms.unwrap_or(50);
    let pace = Duration::from_millis(pace_ms);
    let mut d = harness::start(sync)?;
    let maos = harness::client_bin()?;
    if !maos.is_file() {
        return Err(format!(
            "{} not found: build the workspace's binaries",
            maos.display()
        ));
    }
    let agents = hook_agents(&d, n)?;
    // Announced one by one, as the main thread spawns them (not timed).
    for a in &agents {
        let (_, out) = hook_process(&maos, &d, &a.start)?;
        if let Some(f) = hook_fault(&out) {
            return Err(format!("{} SubagentStart: {f}", a.ext_id));
        }
    }
    let mut paced = drive_hooks(&d, &maos, &agents, calls, Some(pace))?;
    let mut saturated = drive_hooks(&d, &maos, &agents, saturated_calls, None)?;
    check_hook_state(&d, &agents, &[&paced, &saturated])?;
    d.stop()?;
    let offered = n as f64 * 1000.0 / pace_ms as f64;
    let cpus = std::thread::available_parallelism().map_or(0, |c| c.get());
    let name = label(
        &format!("`maos hook` × {n} agents, one call each every {pace_ms} ms"),
        sync,
    );
    let mut rows = hook_run_rows(&name, &mut paced, Some(Goal::AtMost(5000.0)));
    print_human(
        &format!(
            "hook-concurrent: {n} subagents of one Claude session, each its own thread spawning \
             `maos hook` ({}) for a PreToolUse Write of its own files (every 4th call a \
             PostToolUse), one call every {pace_ms} ms per agent from staggered starts \
             (offered {offered:.0} calls/s), {calls} calls per agent, spawn to exit, \
             synchronous={sync}",
            maos.display()
        ),
        &rows,
    );
    let name = label(&format!("`maos hook` × {n} agents, back-to-back"), sync);
    let sat = hook_run_rows(&name, &mut saturated, None);
    print_human(
        &format!(
            "hook-concurrent, saturated: the same {n} agents back-to-back from a common start, \
             {saturated_calls} calls per agent, on {cpus} CPUs (queueing; no target), \
             synchronous={sync}"
        ),
        &sat,
    );
    println!(
        "\n  checked: no call denied, every agent holds the write locks of its files, every \
         PostToolUse is on the timeline"
    );
    rows.extend(sat);
    Ok(rows)
}
