//! Part 2 (`maos demo managed`): a plan of small local agents run by maos under the adaptive
//! strategy; the daemon is killed with SIGKILL while two of them run, they finish while it is
//! down, and the restarted daemon recovers the session.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use serde_json::Value;

use crate::demo::{Demo, full, outcome, paint, say, tell, who};

/// The plan of part 2. Backend and tests wait for the file `go`, which the demo creates once it
/// has killed the daemon: they are mid-run at the kill and end while the daemon is down, on
/// cue rather than on a timer. The bound (a minute) keeps an interrupted demo from leaving them
/// waiting forever.
const PLAN: &str = r#"# A managed session: maos starts these agents, watches them, and records how each one ended.
# Here they are small shell scripts; in real use an agent is e.g.
#   command = ["claude", "-p", "{task}", "--session-id", "{claude_session_id}"]
objective = "Add rate limiting to the login endpoint"
strategy = "adaptive"    # each agent starts as soon as the agents it depends on completed

[[agent]]
name = "architect"
task = "Design the token bucket; write the design to docs/limiter.md"
command = ["sh", "-c", "mkdir -p docs && echo 'A token bucket per client IP: 5 attempts per minute, then 429 with Retry-After.' > docs/limiter.md && echo 'design written to docs/limiter.md'"]

# backend and tests wait for the file `go` (at most a minute): the demo creates it after the kill
[[agent]]
name = "backend"
task = "Implement the limiter of docs/limiter.md in src/auth/limit.rs"
depends_on = ["architect"]
command = ["sh", "-c", "echo 'implementing docs/limiter.md'; n=0; until [ -e go ]; do n=$((n+1)); [ $n -lt 600 ] || exit 1; sleep 0.1; done; mkdir -p src/auth && echo 'pub struct Limiter;' > src/auth/limit.rs && echo 'wrote src/auth/limit.rs'"]

[[agent]]
name = "tests"
task = "Write tests for the limiter of docs/limiter.md in tests/limit_test.rs"
depends_on = ["architect"]
command = ["sh", "-c", "echo 'writing tests for docs/limiter.md'; n=0; until [ -e go ]; do n=$((n+1)); [ $n -lt 600 ] || exit 1; sleep 0.1; done; mkdir -p tests && echo 'use auth::limit::Limiter; // the sixth attempt in a minute is refused' > tests/limit_test.rs && echo 'wrote tests/limit_test.rs'"]

[[agent]]
name = "reviewer"
task = "Review the limiter and its tests against docs/limiter.md"
depends_on = ["backend", "tests"]
command = ["sh", "-c", "grep -q Limiter src/auth/limit.rs && grep -q Limiter tests/limit_test.rs && echo 'approved: the limiter and its tests follow docs/limiter.md' | tee docs/review.md"]
"#;

/// The agents of [`PLAN`], in order, and the two that are running when the daemon is killed.
const PLAN_AGENTS: [&str; 4] = ["architect", "backend", "tests", "reviewer"];
const MID_RUN: [&str; 2] = ["backend", "tests"];

/// How long the managed part waits for any one thing (an agent to start, a process to end,
/// the session to complete); the scripts take well under a second.
const PATIENCE: Duration = Duration::from_secs(30);

/// Poll `check` until it has an answer, or fail naming `what` after `PATIENCE`.
fn poll<T>(what: &str, mut check: impl FnMut() -> Result<Option<T>, String>) -> Result<T, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "gave up after {}s waiting for {what}",
                PATIENCE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the process is gone (a zombie nobody reaped yet counts as gone).
fn gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
        return true;
    }
    proc_stat(pid).is_some_and(|(state, _)| state == 'Z')
}

/// State and parent pid of a process, from `/proc/PID/stat` ("pid (comm) STATE PPID ...").
#[cfg(target_os = "linux")]
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((state, rest.next()?.parse().ok()?))
}

/// State and parent pid of a process, from `ps`.
#[cfg(not(target_os = "linux"))]
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let out = Command::new("ps")
        .args(["-o", "stat=,ppid=", "-p", &pid.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let state = words.next()?.chars().next()?;
    Some((state, words.next()?.parse().ok()?))
}

/// Show a step the demo takes itself, outside maos, as the shell command it amounts to.
fn shell(line: &str, why: &str) {
    let why = if why.is_empty() {
        String::new()
    } else {
        paint("2", &format!("    ({why})"))
    };
    if !full() {
        crate::demo::pause(crate::demo::BEAT);
    }
    outln!("{}{why}", paint("1", &format!("$ {line}")));
    crate::demo::step();
}

/// What part 2 leaves running if it stops half-way: agents waiting for `go`, supervisors that
/// keep trying to report to a daemon that is gone (for ten minutes). Dropped while armed, it
/// releases the agents, stops the daemon and kills what is left of the demo: every process
/// started with the demo's `MAOS_HOME` (Linux), else the agents it saw running and their
/// supervisors. Once the part has seen every agent and supervisor end, it is disarmed.
struct Cleanup<'a> {
    demo: &'a Demo,
    go: PathBuf,
    armed: bool,
    /// (agent, its supervisor), of the agents that were running at the kill.
    pids: Vec<(u32, Option<u32>)>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = std::fs::write(&self.go, "");
        let _ = self.demo.command(&["daemon", "stop"]);
        let mut pids: Vec<u32> = self
            .pids
            .iter()
            .flat_map(|&(a, s)| [Some(a), s])
            .flatten()
            .collect();
        pids.extend(started_with_home(&self.demo.home));
        for pid in pids {
            if !gone(pid) {
                // SAFETY: plain kill(2) of a process the demo started.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

/// Live processes whose environment has `MAOS_HOME=home`: the demo's daemon, supervisors and
/// agents.
#[cfg(target_os = "linux")]
fn started_with_home(home: &Path) -> Vec<u32> {
    let mut needle = b"MAOS_HOME=".to_vec();
    needle.extend_from_slice(home.as_os_str().as_encoded_bytes());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id() && !gone(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_slice()))
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn started_with_home(_home: &Path) -> Vec<u32> {
    Vec::new()
}

/// The agent of a `maos --json session show` answer that the plan calls `name`.
fn plan_agent<'a>(session: &'a Value, name: &str) -> Result<&'a Value, String> {
    session["agents"]
        .as_array()
        .and_then(|agents| agents.iter().find(|a| a["spec"]["name"] == name))
        .ok_or_else(|| format!("the session has no agent {name}: {session}"))
}

fn id_field(agent: &Value) -> Result<String, String> {
    agent["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("an agent without an id: {agent}"))
}

/// Each agent's name, state and how it ended, for a failure message.
fn agent_states(session: &Value) -> String {
    session["agents"]
        .as_array()
        .map(|agents| {
            agents
                .iter()
                .map(|a| {
                    let mut s = format!(
                        "{} {}",
                        a["spec"]["name"].as_str().unwrap_or("?"),
                        a["state"].as_str().unwrap_or("?")
                    );
                    if let Some(code) = a["exit_code"].as_i64() {
                        s += &format!(" (exit code {code})");
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Part 2: a plan of small local agents run by the daemon under the adaptive strategy; the
/// daemon is killed mid-run, the agents finish while it is down, and the restarted daemon
/// applies their exits and completes the session.
pub fn run(keep: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    let mut cleanup = Cleanup {
        demo: &d,
        go: d.project.join("go"),
        armed: true,
        pids: Vec::new(),
    };
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say("a plan: the agents of a session, what each runs, and what it waits for");
    std::fs::write(d.project.join("plan.toml"), PLAN)
        .map_err(|e| format!("cannot write plan.toml: {e}"))?;
    if full() {
        shell("cat plan.toml", "");
        outln!("{PLAN}");
    }
    tell(
        "plan.toml: an architect, then backend and tests in parallel, then a reviewer (shell scripts)",
    );

    say("`maos run` creates the session from the plan and starts it: maos runs the agents now,");
    say("each one under its own supervisor process (`maosd supervise`), its output in a log");
    let out = d.show_command(&["run", "plan.toml"])?;
    let sid = out
        .split_whitespace()
        .find(|w| w.starts_with("sess_"))
        .ok_or_else(|| format!("no session id in {out:?}"))?
        .to_string();
    let session = || d.json(&["session", "show", &sid]);

    // The architect completes at once; backend and tests then start and wait for `go`.
    let running = poll("backend and tests to be running", || {
        let s = session()?;
        let mut pids = Vec::new();
        for name in MID_RUN {
            let a = plan_agent(&s, name)?;
            if a["state"]
                .as_str()
                .is_some_and(|st| st != "pending" && st != "running")
            {
                return Err(format!(
                    "{name} ended before the demo could stop the daemon: {}",
                    agent_states(&s)
                ));
            }
            match a["process"]["pid"].as_u64() {
                Some(pid) => pids.push((name, id_field(a)?, pid as u32)),
                None => return Ok(None),
            }
        }
        Ok(Some(pids))
    })?;
    cleanup.pids = running
        .iter()
        .map(|(_, _, pid)| (*pid, proc_stat(*pid).map(|(_, ppid)| ppid)))
        .collect();
    say(
        "the architect completed, so backend and tests started, in parallel; the reviewer waits for both",
    );
    d.run(&["ps"])?;
    let architect = id_field(plan_agent(&session()?, "architect")?)?;
    say("what the architect printed, between the lines maos adds when it starts and ends");
    d.run(&["logs", maos_core::ids::short(&architect)])?;

    let status = d.json(&["daemon", "status"])?;
    let daemon = status["pid"]
        .as_u64()
        .map(|p| p as u32)
        .ok_or_else(|| format!("no pid in the daemon's status: {status}"))?;
    let project = d.project.to_string_lossy();
    let hash = status["projects"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["root"] == *project))
        .and_then(|p| p["hash"].as_str())
        .ok_or_else(|| format!("the daemon's status does not list {project}: {status}"))?
        .to_string();
    tell(&who(
        "architect",
        "completed; backend and tests started in parallel, each under its own supervisor",
    ));
    say("now the daemon dies mid-run, as in a crash: no chance to save anything or say goodbye");
    for ((name, _, pid), (_, supervisor)) in running.iter().zip(&cleanup.pids) {
        let under = supervisor.map_or_else(String::new, |s| format!(", under supervisor {s}"));
        say(&format!("{name} runs as pid {pid}{under}"));
    }
    shell(
        &format!("kill -9 {daemon}"),
        "the daemon; the agents keep running under their supervisors",
    );
    let killed = Instant::now();
    // SAFETY: plain kill(2) of the demo's own daemon.
    if unsafe { libc::kill(daemon as libc::pid_t, libc::SIGKILL) } != 0 {
        return Err(format!(
            "cannot kill the daemon (pid {daemon}): {}",
            std::io::Error::last_os_error()
        ));
    }
    poll("the killed daemon to be gone", || {
        Ok(gone(daemon).then_some(()))
    })?;
    if full() {
        outln!();
    }

    say("backend and tests get on with their work and end while no daemon is running");
    if full() {
        shell("touch go", "the signal the two agents wait for");
    }
    std::fs::write(&cleanup.go, "").map_err(|e| format!("cannot create go: {e}"))?;
    let agents_dir = d.home.join("projects").join(&hash).join("agents");
    for (name, id, pid) in &running {
        let file = agents_dir.join(id).join("exit.json");
        poll(
            &format!("{name} to end and its exit to be recorded"),
            || Ok((gone(*pid) && file.is_file()).then_some(())),
        )?;
    }
    let (first, first_id, _) = &running[0];
    let exit_file = agents_dir.join(first_id).join("exit.json");
    say(
        "each supervisor wrote how its agent ended to exit.json, and keeps trying to reach the daemon",
    );
    let shown = exit_file.strip_prefix(&d.home).map_or_else(
        |_| exit_file.display().to_string(),
        |p| format!("$MAOS_HOME/{}", p.display()),
    );
    let text = std::fs::read_to_string(&exit_file)
        .map_err(|e| format!("cannot read {}: {e}", exit_file.display()))?;
    if full() {
        shell(&format!("cat {shown}"), &format!("{first}'s"));
        outln!("{}\n", text.trim());
    }
    tell(&who(
        "backend, tests",
        "end while no daemon runs; each supervisor records its agent's exit (exit.json)",
    ));

    say("any maos command starts the daemon again; when it starts it recovers every session that");
    say(
        "was running: a live agent is adopted again, an ended one gets the exit its supervisor recorded",
    );
    d.show_command(&["daemon", "start"])?;
    let down = killed.elapsed();
    let done = poll("the session to end", || {
        let s = session()?;
        let state = s["state"].as_str().unwrap_or("");
        Ok(matches!(state, "completed" | "failed" | "cancelled").then_some(s))
    })?;
    if done["state"] != "completed" {
        return Err(format!(
            "the session ended {}, not completed: {}",
            done["state"].as_str().unwrap_or("?"),
            agent_states(&done)
        ));
    }
    for name in PLAN_AGENTS {
        let a = plan_agent(&done, name)?;
        if a["state"] != "completed" || a["exit_code"] != 0 {
            return Err(format!(
                "agent {name} did not complete with exit code 0: {}",
                agent_states(&done)
            ));
        }
    }

    let recovered = d.events(&[&sid, "--type", "session_recovered"])?;
    let report: maos_proto::SessionRecovery = recovered
        .last()
        .ok_or("the restarted daemon recorded no recovery (no session_recovered event)")
        .and_then(|e| {
            serde_json::from_value(e["data"].clone())
                .map_err(|_| "a session_recovered event without its report")
        })?;
    let applied: Vec<&str> = report.exits_applied.iter().map(|a| a.as_str()).collect();
    if running
        .iter()
        .any(|(_, id, _)| !applied.contains(&id.as_str()))
        || !report.failed.is_empty()
        || !report.resumable.is_empty()
    {
        return Err(format!(
            "the recovery should have applied the recorded exits of backend and tests, and nothing else: {report:?}"
        ));
    }
    say(
        "what the daemon found when it started (its session_recovered event; `maos recover` prints the same):",
    );
    let shown: Vec<String> = applied
        .iter()
        .map(|id| maos_core::ids::short(id).to_string())
        .collect();
    outcome(
        true,
        "RECOVERED",
        &format!(
            "the restarted daemon (down {}) found that backend and tests had ended meanwhile and applied the exits their supervisors recorded ({}); no agent failed, nothing was lost",
            crate::demo::took(down),
            shown.join(", ")
        ),
    );
    if full() {
        out!(
            "{}",
            maos_client::output::recovery(&maos_proto::RecoveryReport {
                sessions: vec![report],
            })
        );
        outln!();
    }

    say("with backend and tests completed the reviewer ran, and the session completed");
    tell(&who(
        "reviewer",
        "ran once backend and tests had completed; `maos ps --all`:",
    ));
    d.show(&["ps", "--all"])?;
    say("`maos brief`: the briefing a person, or an agent taking over, reads first");
    d.run(&["brief"])?;
    say(
        "the timeline: the architect's exit before the kill, the exits applied when the daemon came back, the rest after",
    );
    d.run(&[
        "events",
        "--type",
        "agent_process_exited",
        "--type",
        "session_recovered",
        "--type",
        "session_completed",
    ])?;
    for file in [
        "docs/limiter.md",
        "src/auth/limit.rs",
        "tests/limit_test.rs",
        "docs/review.md",
    ] {
        if !d.project.join(file).is_file() {
            return Err(format!("{file} should have been written by an agent"));
        }
    }

    // Every supervisor ends once the daemon acknowledged its report (those of backend and
    // tests retry every half second): nothing but the daemon may be left.
    let daemon = d.json(&["daemon", "status"])?["pid"].as_u64().unwrap_or(0) as u32;
    let supervisors: Vec<u32> = cleanup.pids.iter().filter_map(|&(_, s)| s).collect();
    let left = poll("the supervisors to deliver their reports and exit", || {
        let left: Vec<u32> = started_with_home(&d.home)
            .into_iter()
            .chain(supervisors.iter().copied())
            .filter(|&p| p != daemon && !gone(p))
            .collect();
        Ok(left.is_empty().then_some(()))
    });
    left.map_err(|e| format!("{e}: still running {:?}", started_with_home(&d.home)))?;
    cleanup.armed = false;
    say("docs/limiter.md, src/auth/limit.rs, tests/limit_test.rs and docs/review.md are on disk;");
    say("every agent and supervisor has exited");
    outcome(
        true,
        "COMPLETED",
        "the session, its 4/4 agents each with exit code 0; docs/limiter.md, src/auth/limit.rs, tests/limit_test.rs and docs/review.md are on disk",
    );
    Ok(())
}
