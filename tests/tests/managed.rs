//! Managed sessions end to end: plans run by the real daemon, whose agents are small shell
//! scripts started through real supervisors. Start order is read from the event sequence;
//! pause, resume and cancel are checked on the processes themselves; the daemon is killed
//! while agents run and when "the machine reboots".

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::{Env, alive, kill9, wait_until};
use serde_json::Value;

/// Long enough for a slow CI machine to run a few shell scripts in turn.
const SLOW: Duration = Duration::from_secs(30);

fn plan(env: &Env, name: &str, text: &str) -> PathBuf {
    let path = env.project.join(name);
    std::fs::write(&path, text).expect("write plan");
    path
}

/// `maos run PLAN`: the session id.
fn run(env: &Env, plan: &Path) -> String {
    let v = env.maos_json(&["run", plan.to_str().expect("utf-8 path")]);
    v["id"].as_str().expect("session id").to_string()
}

fn session(env: &Env, sid: &str) -> Value {
    env.maos_json(&["session", "show", sid])
}

fn wait_state(env: &Env, sid: &str, state: &str) -> Value {
    wait_until(SLOW, &format!("session {sid} is {state}"), || {
        session(env, sid)["state"] == state
    });
    session(env, sid)
}

fn agent<'a>(s: &'a Value, name: &str) -> &'a Value {
    s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["spec"]["name"] == name)
        .unwrap_or_else(|| panic!("no agent {name} in {s}"))
}

/// Agent names in the order of their events of type `kind`.
fn order(env: &Env, sid: &str, kind: &str) -> Vec<String> {
    let s = session(env, sid);
    env.events(&[sid, "--type", kind])
        .iter()
        .map(|e| {
            s["agents"]
                .as_array()
                .expect("agents")
                .iter()
                .find(|a| a["id"] == e["agent_id"])
                .map(|a| a["spec"]["name"].as_str().unwrap_or_default().to_string())
                .unwrap_or_default()
        })
        .collect()
}

/// Sequence number of the first event of `kind` for agent `name`.
fn seq(env: &Env, sid: &str, kind: &str, name: &str) -> u64 {
    let s = session(env, sid);
    let id = agent(&s, name)["id"].clone();
    env.events(&[sid, "--type", kind])
        .iter()
        .find(|e| e["agent_id"] == id)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} for {name}"))
}

fn agent_entry(name: &str, extra: &str, script: &str) -> String {
    format!(
        "[[agent]]\nname = \"{name}\"\ntask = \"task of {name}\"\ncommand = [\"sh\", \"-c\", {script:?}]\n{extra}\n"
    )
}

#[test]
fn sequential_runs_one_agent_at_a_time_in_plan_order() {
    let env = Env::new();
    let mut text = "objective = \"seq\"\nstrategy = \"sequential\"\n".to_string();
    for n in ["a", "b", "c"] {
        text += &agent_entry(n, "", "exit 0");
    }
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    wait_state(&env, &sid, "completed");
    assert_eq!(order(&env, &sid, "agent_started"), ["a", "b", "c"]);
    // Each starts only after the one before it completed.
    assert!(seq(&env, &sid, "agent_completed", "a") < seq(&env, &sid, "agent_started", "b"));
    assert!(seq(&env, &sid, "agent_completed", "b") < seq(&env, &sid, "agent_started", "c"));
}

#[test]
fn adaptive_starts_an_agent_once_its_dependencies_completed() {
    let env = Env::new();
    let mut text = "objective = \"dag\"\nstrategy = \"adaptive\"\n".to_string();
    text += &agent_entry("a", "", "exit 0");
    text += &agent_entry("b", "depends_on = [\"a\"]", "exit 0");
    text += &agent_entry("c", "depends_on = [\"a\"]", "exit 0");
    text += &agent_entry("d", "depends_on = [\"b\", \"c\"]", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    wait_state(&env, &sid, "completed");
    let started = order(&env, &sid, "agent_started");
    assert_eq!(started.first().map(String::as_str), Some("a"));
    assert_eq!(started.last().map(String::as_str), Some("d"));
    for dep in ["b", "c"] {
        assert!(seq(&env, &sid, "agent_completed", "a") < seq(&env, &sid, "agent_started", dep));
        assert!(seq(&env, &sid, "agent_completed", dep) < seq(&env, &sid, "agent_started", "d"));
    }
}

#[test]
fn parallel_starts_every_agent_at_once_and_pipeline_goes_stage_by_stage() {
    let env = Env::new();
    let mut text = "objective = \"par\"\nstrategy = \"parallel\"\n".to_string();
    for n in ["a", "b", "c"] {
        text += &agent_entry(n, "", "exit 0");
    }
    let sid = run(&env, &plan(&env, "par.toml", &text));
    wait_state(&env, &sid, "completed");
    let last_start = ["a", "b", "c"]
        .iter()
        .map(|n| seq(&env, &sid, "agent_started", n))
        .max();
    let first_end = ["a", "b", "c"]
        .iter()
        .map(|n| seq(&env, &sid, "agent_completed", n))
        .min();
    assert!(last_start < first_end, "all started before any ended");

    let mut text = "objective = \"pipe\"\nstrategy = \"pipeline\"\n".to_string();
    text += &agent_entry("a", "stage = 1", "exit 0");
    text += &agent_entry("b", "stage = 1", "exit 0");
    text += &agent_entry("c", "stage = 2", "exit 0");
    let sid = run(&env, &plan(&env, "pipe.toml", &text));
    wait_state(&env, &sid, "completed");
    for first in ["a", "b"] {
        assert!(seq(&env, &sid, "agent_completed", first) < seq(&env, &sid, "agent_started", "c"));
    }
}

#[test]
fn phases_run_in_order_and_the_last_one_completes_the_session() {
    let env = Env::new();
    let mut text =
        "objective = \"phased\"\nstrategy = \"adaptive\"\nphases = [\"design\", \"build\"]\n"
            .to_string();
    // Phases named by number (1 is the first) and by name.
    text += &agent_entry("architect", "phase = 1", "exit 0");
    text += &agent_entry("coder", "phase = \"build\"", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let s = wait_state(&env, &sid, "completed");
    assert!(s["workflow"]["completed_at"].is_string(), "{s}");
    let phase_done: Vec<u64> = env
        .events(&[&sid, "--type", "phase_completed"])
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .collect();
    assert_eq!(phase_done.len(), 2);
    assert!(seq(&env, &sid, "agent_completed", "architect") < phase_done[0]);
    assert!(phase_done[0] < seq(&env, &sid, "agent_started", "coder"));
    // A readable checkpoint of the finished session.
    let cp = env
        .home
        .join("projects")
        .read_dir()
        .expect("projects")
        .filter_map(Result::ok)
        .map(|e| e.path().join("sessions").join(&sid).join("checkpoint.json"))
        .find(|p| p.is_file())
        .expect("checkpoint.json");
    let v: Value = serde_json::from_str(&std::fs::read_to_string(cp).expect("read")).expect("json");
    assert_eq!(v["session_id"], sid.as_str());
    assert_eq!(v["reason"], "session completed");
}

#[test]
fn failure_policies_fail_the_session_continue_or_retry() {
    let env = Env::new();
    // fail (the default): the failure ends the session and cancels what still waits.
    let mut text = "objective = \"fail\"\nstrategy = \"adaptive\"\n".to_string();
    text += &agent_entry("bad", "", "exit 3");
    text += &agent_entry("after", "depends_on = [\"bad\"]", "exit 0");
    let sid = run(&env, &plan(&env, "fail.toml", &text));
    let s = wait_state(&env, &sid, "failed");
    assert_eq!(agent(&s, "bad")["state"], "failed");
    assert_eq!(agent(&s, "bad")["exit_code"], 3);
    assert_eq!(agent(&s, "after")["state"], "cancelled");

    // continue: the failed agent's dependents are cancelled, the rest runs; the session
    // fails at the end.
    let mut text =
        "objective = \"cont\"\nstrategy = \"adaptive\"\n[failure]\npolicy = \"continue\"\n"
            .to_string();
    text += &agent_entry("bad", "", "exit 1");
    text += &agent_entry("dependent", "depends_on = [\"bad\"]", "exit 0");
    text += &agent_entry("other", "", "exit 0");
    let sid = run(&env, &plan(&env, "cont.toml", &text));
    let s = wait_state(&env, &sid, "failed");
    assert_eq!(agent(&s, "dependent")["state"], "cancelled");
    assert_eq!(agent(&s, "other")["state"], "completed");
    // Reasons name agents, not indices.
    let cancelled = env.events(&[&sid, "--type", "agent_cancelled"]);
    let why = cancelled[0]["data"]["reason"].as_str().unwrap_or_default();
    assert!(why.contains("bad") && !why.contains('#'), "{why}");

    // retry: the first attempt fails, the second succeeds.
    let mut text =
        "objective = \"retry\"\nstrategy = \"adaptive\"\n[failure]\nretries = 2\n".to_string();
    text += &agent_entry("flaky", "", "test {attempt} -ge 2");
    let sid = run(&env, &plan(&env, "retry.toml", &text));
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(agent(&s, "flaky")["attempts"], 2);
    assert_eq!(env.events(&[&sid, "--type", "agent_retry"]).len(), 1);
}

/// The pid of a managed agent's running process, once it has one.
fn pid_of(env: &Env, sid: &str, name: &str) -> u32 {
    let mut pid = 0;
    wait_until(SLOW, &format!("{name} has a process"), || {
        pid = agent(&session(env, sid), name)["process"]["pid"]
            .as_u64()
            .unwrap_or(0) as u32;
        pid != 0
    });
    pid
}

fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?.1.chars().next()
}

#[cfg(target_os = "linux")]
#[test]
fn pause_stops_the_process_resume_continues_it_cancel_ends_it() {
    let env = Env::new();
    let text = "objective = \"pause\"\n[failure]\ngrace_ms = 2000\n".to_string()
        + &agent_entry("worker", "", "while true; do sleep 0.05; done");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "worker");
    wait_until(SLOW, "the agent runs", || {
        proc_state(pid).is_some_and(|s| s != 'T')
    });
    env.maos_json(&["pause", &sid, "--reason", "lunch"]);
    wait_stopped(&env, &sid, pid);
    env.maos_json(&["resume", &sid]);
    wait_until(SLOW, "the resumed agent's process runs again", || {
        proc_state(pid).is_some_and(|s| s != 'T')
    });
    // One agent on its own, too.
    let id = agent(&session(&env, &sid), "worker")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.maos_json(&["pause", "--agent", &id]);
    wait_stopped(&env, &sid, pid);
    env.maos_json(&["agent", "cancel", &id]);
    wait_until(SLOW, "the cancelled agent's process ends", || !alive(pid));
    let s = session(&env, &sid);
    assert_eq!(agent(&s, "worker")["state"], "cancelled");
}

/// Wait until the process is stopped; on failure show what the daemon logged (a pause that
/// did not reach the process is a race worth seeing in full).
fn wait_stopped(env: &Env, sid: &str, pid: u32) {
    let deadline = std::time::Instant::now() + SLOW;
    while proc_state(pid) != Some('T') {
        if std::time::Instant::now() > deadline {
            let log = std::fs::read_to_string(env.home.join("logs/maosd.log")).unwrap_or_default();
            panic!(
                "the paused agent's process {pid} is {:?}, not stopped\nsession: {}\nlog:\n{log}",
                proc_state(pid),
                session(env, sid)
            );
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The supervisor of an agent: its parent process.
fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(") ")?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

#[cfg(target_os = "linux")]
#[test]
fn agents_that_end_while_the_daemon_is_down_are_recorded_after_a_kill_9() {
    let env = Env::new();
    let wait = "while [ ! -e go ]; do sleep 0.02; done; exit $CODE";
    let mut text =
        "objective = \"crash\"\nstrategy = \"adaptive\"\n[failure]\npolicy = \"continue\"\n"
            .to_string();
    text += &agent_entry("ok", "env = { CODE = \"0\" }", wait);
    text += &agent_entry("bad", "env = { CODE = \"4\" }", wait);
    text += &agent_entry("after", "depends_on = [\"ok\"]", "touch after.done");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let (ok, bad) = (pid_of(&env, &sid, "ok"), pid_of(&env, &sid, "bad"));
    env.kill9();
    std::fs::write(env.project.join("go"), "").expect("go");
    wait_until(SLOW, "both agents ended", || !alive(ok) && !alive(bad));
    // The daemon recovers the session when it starts, before anyone asks about the project:
    // the exits are applied and the agent that became ready runs.
    assert!(env.maos(&["daemon", "start"]).status.success());
    wait_until(SLOW, "the next agent ran after the restart", || {
        env.project.join("after.done").is_file()
    });
    let s = wait_state(&env, &sid, "failed");
    assert_eq!(agent(&s, "ok")["state"], "completed");
    assert_eq!(agent(&s, "bad")["state"], "failed");
    assert_eq!(agent(&s, "bad")["exit_code"], 4);
    assert_eq!(agent(&s, "after")["state"], "completed", "{s}");
    assert_eq!(env.integrity_check(), "ok");
}

/// Start-up recovery on its own: the daemon that starts after a `kill -9` recovers every
/// session that was running before any request names its project (it is started from another
/// project, and the agent's supervisor is gone, so nothing reports the exit): the exit its
/// supervisor recorded in `exit.json` is applied and the agent that became ready runs.
#[cfg(target_os = "linux")]
#[test]
fn a_restarted_daemon_recovers_running_sessions_before_any_request_names_them() {
    let env = Env::new();
    let mut text = "objective = \"start-up recovery\"\nstrategy = \"sequential\"\n".to_string();
    text += &agent_entry("first", "", "while [ ! -e go ]; do sleep 0.02; done");
    text += &agent_entry("second", "", "touch second.done");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "first");
    let first = agent(&session(&env, &sid), "first")["id"]
        .as_str()
        .expect("agent id")
        .to_string();
    let supervisor = parent_of(pid).expect("supervisor");
    let exit_json = env
        .db_path()
        .parent()
        .expect("project dir")
        .join("agents")
        .join(&first)
        .join("exit.json");
    env.kill9();
    std::fs::write(env.project.join("go"), "").expect("go");
    wait_until(SLOW, "the agent ended and its exit is recorded", || {
        !alive(pid) && exit_json.is_file()
    });
    // Nobody is left to report the exit: only the daemon's start-up can find it.
    kill9(supervisor);
    wait_until(SLOW, "the supervisor is gone", || !alive(supervisor));

    let elsewhere = env.make_project("elsewhere");
    let out = env.maos_in(&elsewhere, &["daemon", "start"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    wait_until(SLOW, "the next agent ran after the restart", || {
        env.project.join("second.done").is_file()
    });
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(agent(&s, "first")["state"], "completed", "{s}");
    assert_eq!(agent(&s, "first")["exit_code"], 0, "{s}");
    assert_eq!(agent(&s, "second")["state"], "completed", "{s}");
    let recovered = env.events(&[&sid, "--type", "session_recovered"]);
    assert_eq!(recovered.len(), 1, "{recovered:?}");
    assert!(!exit_json.exists(), "the applied exit record is deleted");
}

#[cfg(target_os = "linux")]
#[test]
fn after_a_reboot_agents_are_resumable_and_resume_runs_the_resume_command() {
    let env = Env::new();
    let fake_claude = env.project.join("claude");
    std::fs::write(
        &fake_claude,
        // Written aside, then renamed: the test waits for the file to appear, and must not
        // read it half written.
        "#!/bin/sh\nprintf '%s\\n' \"$@\" > \"$MAOS_ARGV_FILE.tmp\" && mv \"$MAOS_ARGV_FILE.tmp\" \"$MAOS_ARGV_FILE\"\n",
    )
    .expect("fake claude");
    let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
    std::fs::set_permissions(&fake_claude, mode).expect("chmod");
    let text = format!(
        "objective = \"reboot\"\n[[agent]]\nname = \"writer\"\ntask = \"write\"\n\
         command = [\"sh\", \"-c\", \"while true; do sleep 0.05; done\", \"--\", \"{{claude_session_id}}\"]\n\
         resume_command = [{claude:?}, \"-p\", \"continue\", \"--resume\", \"{{claude_session_id}}\"]\n\
         env = {{ MAOS_ARGV_FILE = {argv:?} }}\n",
        claude = fake_claude.display().to_string(),
        argv = env.project.join("argv.txt").display().to_string(),
    );
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "writer");
    let claude_id = agent(&session(&env, &sid), "writer")["external_session_id"]
        .as_str()
        .expect("a Claude session id was given to the agent")
        .to_string();
    // The machine goes down: daemon, supervisor and agent are all gone.
    let supervisor = parent_of(pid).expect("supervisor");
    env.kill9();
    kill9(supervisor);
    kill9(pid);
    wait_until(SLOW, "everything is gone", || {
        !alive(pid) && !alive(supervisor)
    });
    let report = env.maos_json(&["recover", &sid]);
    let s = session(&env, &sid);
    assert_eq!(agent(&s, "writer")["state"], "resumable", "{report}");
    // `maos resume` runs the resume command with the recorded Claude session id.
    env.maos_json(&["resume", &sid]);
    let argv = env.project.join("argv.txt");
    wait_until(SLOW, "the resume command ran", || argv.is_file());
    let args = std::fs::read_to_string(&argv).expect("argv");
    assert_eq!(
        args.lines().collect::<Vec<_>>(),
        ["-p", "continue", "--resume", claude_id.as_str()]
    );
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(agent(&s, "writer")["attempts"], 2);
    let recovered = env.events(&[&sid, "--type", "session_recovered"]);
    assert!(!recovered.is_empty());
}

#[cfg(target_os = "linux")]
#[test]
fn validate_finds_a_lost_process_and_recover_settles_it() {
    let env = Env::new();
    let text = "objective = \"lost\"\n".to_string()
        + &agent_entry("worker", "", "while true; do sleep 0.05; done");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "worker");
    let supervisor = parent_of(pid).expect("supervisor");
    assert_eq!(env.maos(&["validate"]).status.code(), Some(0));
    // Supervisor and agent vanish without a word (the daemon keeps running).
    kill9(supervisor);
    kill9(pid);
    wait_until(SLOW, "both are gone", || !alive(pid) && !alive(supervisor));
    let out = env.maos(&["--json", "validate"]);
    assert_eq!(out.status.code(), Some(1));
    let problems: Value = serde_json::from_slice(&out.stdout).expect("json");
    assert_eq!(problems[0]["kind"], "process_gone", "{problems}");
    let report = env.maos_json(&["recover"]);
    assert_eq!(report[0]["failed"].as_array().map(Vec::len), Some(1));
    assert_eq!(env.maos(&["validate"]).status.code(), Some(0));
    wait_state(&env, &sid, "failed");
}

#[test]
fn logs_show_what_an_agent_printed() {
    let env = Env::new();
    let text = "objective = \"logs\"\n".to_string()
        + &agent_entry("talker", "", "echo first line; echo second line >&2");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    wait_state(&env, &sid, "completed");
    let id = agent(&session(&env, &sid), "talker")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let out = env.maos(&["logs", &id, "--follow"]);
    assert!(out.status.success());
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("first line") && text.contains("second line"),
        "{text}"
    );
}

#[test]
fn a_wrong_plan_is_refused_with_file_line_and_reason_and_creates_nothing() {
    let env = Env::new();
    let cases = [
        (
            "syntax.toml",
            "objective = \"x\"\n[[agent]\n",
            "syntax.toml:2",
        ),
        (
            "unknown-dep.toml",
            "objective = \"x\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\ndepends_on = [\"ghost\"]\n",
            "ghost",
        ),
        (
            "cycle.toml",
            "objective = \"x\"\nstrategy = \"adaptive\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\ndepends_on = [\"b\"]\n[[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"true\"]\ndepends_on = [\"a\"]\n",
            "cycle",
        ),
        (
            "typo.toml",
            "objective = \"x\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncomand = [\"true\"]\n",
            "comand",
        ),
        ("empty.toml", "", "objective"),
    ];
    for (name, text, needle) in cases {
        let f = env.maos_fail(&["run", plan(&env, name, text).to_str().expect("path")]);
        assert_eq!(f.exit, 1, "{name}: {f:?}");
        assert!(
            f.message.contains(name) && f.message.contains(needle),
            "{name}: {}",
            f.message
        );
        assert_eq!(f.message.lines().count(), 1, "{name}: one line");
    }
    let missing = env.maos_fail(&["run", "no-such-plan.toml"]);
    assert_eq!(missing.exit, 2);
    assert_eq!(
        env.maos_json(&["session", "list", "--all"]),
        serde_json::json!([])
    );
}

#[test]
fn a_claude_session_id_the_agent_prints_is_kept_for_resume() {
    let env = Env::new();
    let text = "objective = \"claude\"\n".to_string()
        + &agent_entry(
            "claude",
            "",
            // Braces are doubled in a plan: `{` starts a placeholder.
            r#"echo '{{"type":"result","subtype":"success","session_id":"0b7e2c4d-91aa-4f3e-8d2b-5c6f7a8b9c0d"}}'"#,
        );
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(
        agent(&s, "claude")["external_session_id"],
        "0b7e2c4d-91aa-4f3e-8d2b-5c6f7a8b9c0d"
    );
}

#[cfg(target_os = "linux")]
#[test]
fn pausing_a_phase_stops_its_agents_and_holds_back_the_next_ones() {
    let env = Env::new();
    let mut text =
        "objective = \"phase pause\"\nstrategy = \"adaptive\"\nphases = [\"build\"]\n".to_string();
    text += &agent_entry(
        "worker",
        "phase = 1",
        "while [ ! -e go ]; do sleep 0.02; done",
    );
    text += &agent_entry("next", "phase = 1\ndepends_on = [\"worker\"]", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "worker");
    env.maos_json(&["pause", &sid, "--phase", "build"]);
    wait_stopped(&env, &sid, pid);
    // The worker ends (it is continued first so it can see the file); `next` must wait for
    // the phase to be resumed.
    std::fs::write(env.project.join("go"), "").expect("go");
    env.maos_json(&["resume", &sid, "--phase", "build"]);
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(agent(&s, "next")["state"], "completed");
}

#[test]
fn starting_a_managed_agent_by_hand_starts_its_process() {
    let env = Env::new();
    let mut text = "objective = \"by hand\"\nstrategy = \"sequential\"\n".to_string();
    text += &agent_entry("first", "", "while [ ! -e go ]; do sleep 0.02; done");
    text += &agent_entry("second", "", "touch second.done");
    let path = plan(&env, "plan.toml", &text);
    let created = env.maos_json(&["session", "create", "--plan", path.to_str().expect("path")]);
    let sid = created["id"].as_str().expect("id").to_string();
    assert_eq!(
        created["state"], "created",
        "nothing runs before the session starts"
    );
    env.maos_json(&["session", "start", &sid]);
    pid_of(&env, &sid, "first");
    // Sequential would hold `second` back; starting it by hand runs its command now.
    let second = agent(&session(&env, &sid), "second")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.maos_json(&["agent", "start", &second]);
    wait_until(SLOW, "the second agent ran", || {
        env.project.join("second.done").is_file()
    });
    std::fs::write(env.project.join("go"), "").expect("go");
    wait_state(&env, &sid, "completed");
}

#[cfg(target_os = "linux")]
#[test]
fn an_agent_that_ignores_sigterm_is_killed_after_the_grace_period() {
    let env = Env::new();
    let text = "objective = \"stubborn\"\n[failure]\ngrace_ms = 300\n".to_string()
        + &agent_entry(
            "stubborn",
            "",
            "trap '' TERM; while true; do sleep 0.05; done",
        );
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pid = pid_of(&env, &sid, "stubborn");
    let id = agent(&session(&env, &sid), "stubborn")["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.maos_json(&["agent", "cancel", &id]);
    wait_until(SLOW, "the stubborn agent is killed", || !alive(pid));
    assert_eq!(
        agent(&session(&env, &sid), "stubborn")["state"],
        "cancelled"
    );
}

#[test]
fn recover_while_agents_are_starting_leaves_them_alone() {
    let env = Env::new();
    let mut text = "objective = \"busy\"\nstrategy = \"sequential\"\n".to_string();
    for i in 0..25 {
        text += &agent_entry(&format!("a{i}"), "", "exit 0");
    }
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    // Recovery by hand, again and again, while agents start one after another: an agent
    // whose launch is under way is starting, not lost.
    let mut rounds = 0;
    while session(&env, &sid)["state"] == "running" && rounds < 500 {
        env.maos_json(&["recover", &sid]);
        rounds += 1;
    }
    let s = wait_state(&env, &sid, "completed");
    assert!(
        s["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .all(|a| a["state"] == "completed"),
        "{s}"
    );
}

#[test]
fn a_failed_phase_checkpoint_waits_for_its_retry_then_the_plan_goes_on() {
    let env = Env::new();
    let mut text =
        "objective = \"retry phase\"\nstrategy = \"adaptive\"\nphases = [\"build\", \"ship\"]\n"
            .to_string();
    text += &agent_entry(
        "builder",
        "phase = 1",
        "while [ ! -e go ]; do sleep 0.02; done",
    );
    text += &agent_entry("shipper", "phase = 2", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    pid_of(&env, &sid, "builder");
    // A person fails the running phase's checkpoint: nothing moves on until it is retried.
    env.maos_json(&["phase", "complete", "--failed", "--session", &sid]);
    std::fs::write(env.project.join("go"), "").expect("go");
    wait_until(SLOW, "the builder ended", || {
        agent(&session(&env, &sid), "builder")["state"] == "completed"
    });
    let s = session(&env, &sid);
    assert_eq!(s["workflow"]["phases"][0]["state"], "failed");
    assert_eq!(agent(&s, "shipper")["state"], "pending");
    // The retry: the phase runs again, its agents are done, so it completes and the next
    // phase (the last one) completes the session.
    env.maos_json(&["phase", "start", "1", "--session", &sid]);
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(s["workflow"]["phases"][0]["attempts"], 2);
    assert_eq!(agent(&s, "shipper")["state"], "completed");
}

/// An agent whose supervisor is gone (killed here; after an upgrade, an older supervisor whose
/// report the new daemon refuses) cannot report its exit. The daemon notices between starts
/// and reconciles the session: the agent fails instead of running forever.
#[test]
fn an_exit_lost_with_its_supervisor_is_found_between_starts() {
    let env = Env::new();
    let p = plan(
        &env,
        "lost.toml",
        &format!(
            "objective = \"lose a report\"\n{}",
            agent_entry("lonely", "", "sleep 600")
        ),
    );
    // The daemon this command starts looks for lost exits every 100 ms.
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "run", p.to_str().expect("utf-8")]);
    cmd.env("MAOS_TEST_SWEEP_MS", "100");
    let out = maos_tests::run_with_timeout(cmd, SLOW);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let sid = serde_json::from_slice::<Value>(&out.stdout).expect("json")["id"]
        .as_str()
        .expect("session id")
        .to_string();
    let mut procs = (0, 0);
    wait_until(SLOW, "the agent runs under its supervisor", || {
        let s = session(&env, &sid);
        let p = &agent(&s, "lonely")["process"];
        procs = (
            p["pid"].as_u64().unwrap_or(0) as u32,
            p["supervisor"].as_u64().unwrap_or(0) as u32,
        );
        procs.0 != 0 && procs.1 != 0
    });
    let (pid, supervisor) = procs;
    kill9(supervisor);
    wait_until(SLOW, "the supervisor is gone", || !alive(supervisor));
    // Alive, the agent keeps its state: nothing is lost yet.
    assert_eq!(agent(&session(&env, &sid), "lonely")["state"], "running");
    kill9(pid);
    wait_until(SLOW, "the lost exit is found", || {
        agent(&session(&env, &sid), "lonely")["state"] == "failed"
    });
    let recovered = env.events(&[&sid, "--type", "session_recovered"]);
    assert_eq!(recovered.len(), 1, "{recovered:?}");
}

/// A phased session that fails ends its running phase too: `failed`, with the session's end as
/// its end. Neither `status` nor `brief` call it running or stalled, also once the session is
/// exported and imported again (even from a file an older maos wrote with the phase running).
#[test]
fn a_failed_session_ends_its_running_phase_also_after_export_and_import() {
    let env = Env::new();
    let mut text = "objective = \"phased failure\"\nstrategy = \"adaptive\"\n\
                    phases = [\"build\", \"ship\"]\n[failure]\npolicy = \"continue\"\n"
        .to_string();
    text += &agent_entry("ok", "phase = 1", "exit 0");
    text += &agent_entry("bad", "phase = 1", "exit 2");
    text += &agent_entry("shipper", "phase = 2", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let s = wait_state(&env, &sid, "failed");
    let build = &s["workflow"]["phases"][0];
    assert_eq!(build["state"], "failed", "{s}");
    assert_eq!(build["ended_at"], s["ended_at"], "{s}");
    assert_eq!(s["workflow"]["phases"][1]["state"], "planned", "{s}");
    assert!(s["workflow"]["completed_at"].is_null(), "{s}");
    assert_eq!(env.events(&[&sid, "--type", "phase_failed"]).len(), 1);
    let settled = |env: &Env, project: &Path, sid: &str| {
        let status = env.maos_json_in(project, &["status", sid]);
        let p = &status["progress"];
        assert!(
            p["current_phase_elapsed_secs"].is_null() && p["eta"].is_null(),
            "{status}"
        );
        assert_eq!(p["stalled"], false, "{status}");
        let out = env.maos_in(project, &["status", sid]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            !text.contains("running") && text.contains("stalled   no"),
            "{text}"
        );
        let out = env.maos_in(project, &["brief", sid]);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(
            out.status.success() && !text.contains("STALLED") && !text.contains("running for"),
            "{text}"
        );
    };
    settled(&env, &env.project, &sid);

    // The export of an older maos had the phase still running: the import ends it where the
    // session ended.
    let file = env.root().join("old.json");
    let out = env.maos(&["export", &sid, "-o", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    let phase = &mut v["session"]["workflow"]["phases"][0];
    phase["state"] = "running".into();
    phase["ended_at"] = Value::Null;
    phase["result"] = Value::Null;
    std::fs::write(&file, v.to_string()).expect("write");
    let other = env.make_project("other");
    let out = env.maos_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let imported = env.maos_json_in(&other, &["session", "show", &sid]);
    assert_eq!(
        imported["workflow"]["phases"][0]["state"], "failed",
        "{imported}"
    );
    assert_eq!(
        imported["workflow"]["phases"][0]["ended_at"], imported["ended_at"],
        "{imported}"
    );
    settled(&env, &other, &sid);
}

/// The machine goes down under a session with policy `fail`: one agent can be resumed (a
/// resume command and a Claude session id), the other cannot and fails, which fails the
/// session. The recovery report says so (`mark_failed`), never "resume the agents" for a
/// session that recovery itself then failed.
#[cfg(target_os = "linux")]
#[test]
fn a_recovery_report_says_what_recovery_did() {
    let env = Env::new();
    let spin = "while true; do sleep 0.05; done";
    let mut text = "objective = \"report\"\nstrategy = \"parallel\"\n".to_string();
    text += &format!(
        "[[agent]]\nname = \"resumable\"\ntask = \"t\"\n\
         command = [\"sh\", \"-c\", {spin:?}, \"--\", \"{{claude_session_id}}\"]\n\
         resume_command = [\"sh\", \"-c\", \"exit 0\", \"--\", \"{{claude_session_id}}\"]\n"
    );
    text += &agent_entry("lost", "", spin);
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    let pids = [pid_of(&env, &sid, "resumable"), pid_of(&env, &sid, "lost")];
    let supervisors: Vec<u32> = pids.iter().filter_map(|&p| parent_of(p)).collect();
    assert_eq!(supervisors.len(), 2);
    env.kill9();
    for &p in supervisors.iter().chain(&pids) {
        kill9(p);
    }
    wait_until(SLOW, "everything is gone", || {
        pids.iter().chain(&supervisors).all(|&p| !alive(p))
    });
    // The daemon started by this command recovers the session before it answers.
    let report = env.maos_json(&["recover", &sid]);
    let s = session(&env, &sid);
    assert_eq!(s["state"], "failed", "{s}");
    let recovered = env.events(&[&sid, "--type", "session_recovered"]);
    let first = &recovered[0]["data"];
    assert_eq!(first["plan"], "mark_failed", "{recovered:?}");
    assert!(
        !first["next_step"]
            .as_str()
            .unwrap_or_default()
            .contains("resume"),
        "{first}"
    );
    assert_eq!(report[0]["plan"], "mark_failed", "{report}");
    // The text form says the same.
    let out = env.maos(&["recover", &sid]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains("mark_failed") && !text.contains("maos resume"),
        "{text}"
    );
}

/// `maos run --wait`: waits for the session's end, prints it, and exits with its outcome: 0
/// completed, 4 failed, 5 cancelled (also when the daemon is killed during the wait).
#[test]
fn run_wait_exits_with_the_sessions_outcome() {
    let env = Env::new();
    let wait = |name: &str, text: &str| {
        let path = plan(&env, name, text);
        env.maos(&["run", "--wait", path.to_str().expect("utf-8")])
    };
    let ok = "objective = \"ok\"\n".to_string() + &agent_entry("a", "", "sleep 0.2");
    let out = wait("ok.toml", &ok);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{}", maos_tests::describe(&out));
    assert!(
        text.lines().last().is_some_and(|l| l.contains("completed")),
        "{text}"
    );

    let bad = "objective = \"bad\"\n".to_string() + &agent_entry("b", "", "sleep 0.2; exit 3");
    let out = wait("bad.toml", &bad);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(4), "{}", maos_tests::describe(&out));
    let last = text.lines().last().unwrap_or_default();
    assert!(
        last.contains("failed") && last.contains("agent b failed"),
        "{text}"
    );

    // --json: the finished session, one object.
    let path = plan(&env, "bad2.toml", &bad);
    let out = env.maos(&["--json", "run", "--wait", path.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(4), "{}", maos_tests::describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("one JSON object");
    assert_eq!(v["state"], "failed", "{v}");

    // Cancelled while it waits, after the daemon was killed and came back meanwhile.
    let spin = "objective = \"spin\"\n".to_string()
        + &agent_entry("s", "", "while true; do sleep 0.05; done");
    let path = plan(&env, "spin.toml", &spin);
    let waiter = env.spawn_maos(&["run", "--wait", path.to_str().expect("utf-8")]);
    let mut sid = String::new();
    wait_until(SLOW, "the session runs", || {
        let list = env.maos_json(&["session", "list"]);
        let found = list.as_array().and_then(|l| {
            l.iter()
                .find(|s| s["objective"] == "spin" && s["state"] == "running")
        });
        if let Some(s) = found {
            sid = s["id"].as_str().unwrap_or_default().to_string();
        }
        !sid.is_empty()
    });
    pid_of(&env, &sid, "s");
    env.kill9();
    env.maos_json(&["session", "cancel", &sid]);
    let out = waiter.finish(SLOW);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(5), "{}", maos_tests::describe(&out));
    assert!(
        text.lines().last().is_some_and(|l| l.contains("cancelled")),
        "{text}"
    );
}

/// Agents are addressed by their plan name wherever an id is taken: `logs`, `pause`, `resume`
/// (positional or `--agent`), `agent cancel`. A name two live sessions share (neither the
/// active one) is refused, naming every candidate.
#[cfg(target_os = "linux")]
#[test]
fn agents_are_addressed_by_their_plan_name() {
    let env = Env::new();
    let mut text = "objective = \"names\"\nstrategy = \"parallel\"\n".to_string();
    text += &agent_entry("build", "", "while true; do sleep 0.05; done");
    text += &agent_entry("talker", "", "echo said by talker");
    let path = plan(&env, "plan.toml", &text);
    let sid = run(&env, &path);
    let pid = pid_of(&env, &sid, "build");
    wait_until(SLOW, "talker completed", || {
        agent(&session(&env, &sid), "talker")["state"] == "completed"
    });
    let out = env.maos(&["logs", "talker"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("said by talker"),
        "{}",
        maos_tests::describe(&out)
    );
    let paused = env.maos_json(&["pause", "build"]);
    assert_eq!(paused["id"], agent(&session(&env, &sid), "build")["id"]);
    wait_stopped(&env, &sid, pid);
    env.maos_json(&["resume", "build"]);
    wait_until(SLOW, "build runs again", || {
        proc_state(pid).is_some_and(|s| s != 'T')
    });
    env.maos_json(&["pause", "--agent", "build"]);
    wait_stopped(&env, &sid, pid);
    env.maos_json(&["resume", "--agent", "build"]);

    // A second run of the plan and a third, active session: two live `build`s, neither in
    // the active session.
    let second = run(&env, &path);
    pid_of(&env, &second, "build");
    let third = env.session("hand made", &[]);
    env.maos_json(&["session", "activate", &third]);
    let f = env.maos_fail(&["logs", "build"]);
    assert_eq!(f.code, "ambiguous", "{f:?}");
    assert_eq!(f.message.lines().count(), 1, "{f:?}");
    for s in [&sid, &second] {
        let id = agent(&session(&env, s), "build")["id"]
            .as_str()
            .expect("id")
            .to_string();
        assert!(f.message.contains(&id), "{f:?}");
    }
    // Within a session the name is unique again.
    env.maos_json(&["session", "activate", &sid]);
    env.maos_json(&["agent", "cancel", "build"]);
    wait_until(SLOW, "the cancelled build ends", || !alive(pid));
    assert_eq!(agent(&session(&env, &sid), "build")["state"], "cancelled");
    assert_eq!(agent(&session(&env, &second), "build")["state"], "running");
    let f = env.maos_fail(&["logs", "nobody"]);
    assert_eq!(f.code, "not_found", "{f:?}");
    assert!(f.message.contains("plan name"), "{f:?}");
    env.maos_json(&["session", "cancel", &second]);
}

/// A plan whose agent cannot run here is refused when it loads, by `run` and by
/// `session create --plan`: a program not on PATH, a path that does not exist or is not
/// executable, a `workdir` outside the project (by `..`, absolute, or through a symlink). One
/// line naming the file, the position, the agent and the key; nothing is created.
#[test]
fn a_plan_whose_agent_cannot_run_here_is_refused_and_creates_nothing() {
    let env = Env::new();
    std::fs::write(env.project.join("notexec.sh"), "#!/bin/sh\n").expect("script");
    let outside = env.root().join("outside");
    std::fs::create_dir_all(&outside).expect("outside dir");
    std::os::unix::fs::symlink(&outside, env.project.join("link")).expect("symlink");
    std::fs::create_dir_all(env.project.join("sub")).expect("sub");
    let one = |name: &str, extra: &str, command: &str| {
        format!(
            "objective = \"x\"\n[[agent]]\nname = \"ok\"\ntask = \"t\"\ncommand = [\"true\"]\n\
             [[agent]]\nname = \"{name}\"\ntask = \"t\"\ncommand = [{command:?}]\n{extra}"
        )
    };
    let cases = [
        (
            "missing.toml",
            one("builder", "", "no-such-program-for-maos"),
            "builder",
            "command",
            "PATH",
        ),
        (
            "nofile.toml",
            one("runner", "", "./missing.sh"),
            "runner",
            "command",
            "does not exist",
        ),
        (
            "noexec.toml",
            one("runner", "", "./notexec.sh"),
            "runner",
            "command",
            "not an executable",
        ),
        (
            "resume.toml",
            one(
                "resumer",
                "resume_command = [\"no-such-resumer-for-maos\"]\n",
                "true",
            ),
            "resumer",
            "resume_command",
            "PATH",
        ),
        (
            "up.toml",
            one("escaper", "workdir = \"../..\"\n", "true"),
            "escaper",
            "workdir",
            "outside the project",
        ),
        (
            "abs.toml",
            one(
                "escaper",
                &format!("workdir = {:?}\n", outside.display().to_string()),
                "true",
            ),
            "escaper",
            "workdir",
            "outside the project",
        ),
        (
            "link.toml",
            one("escaper", "workdir = \"link\"\n", "true"),
            "escaper",
            "workdir",
            "outside the project",
        ),
    ];
    for (file, text, agent_name, key, why) in &cases {
        let path = plan(&env, file, text);
        for args in [
            vec!["run", path.to_str().expect("utf-8")],
            vec!["session", "create", "--plan", path.to_str().expect("utf-8")],
        ] {
            let f = env.maos_fail(&args);
            assert_eq!(f.exit, 1, "{file}: {f:?}");
            let m = &f.message;
            assert_eq!(m.lines().count(), 1, "{file}: {m}");
            assert!(
                m.contains(file)
                    && m.contains(&format!("agent \"{agent_name}\""))
                    && m.contains(key)
                    && m.contains(why),
                "{file}: {m}"
            );
            // The position is the key's: `command` on line 9 of these files, the rest on 10.
            let line = if *key == "command" { 9 } else { 10 };
            assert!(m.contains(&format!("{file}:{line}:")), "{file}: {m}");
        }
    }
    assert_eq!(
        env.maos_json(&["session", "list", "--all"]),
        serde_json::json!([])
    );
    // Inside the project, by a relative or an absolute path, a plan runs.
    let inside = one("fine", "workdir = \"sub\"\n", "true");
    let sid = run(&env, &plan(&env, "fine.toml", &inside));
    wait_state(&env, &sid, "completed");
    let abs = one(
        "fine",
        &format!(
            "workdir = {:?}\n",
            env.project.join("sub").display().to_string()
        ),
        "/bin/sh",
    );
    let sid = run(&env, &plan(&env, "abs-fine.toml", &abs));
    wait_state(&env, &sid, "completed");
}

/// `maos retry`: a failed agent (by its plan name) runs again with the agents its failure
/// cancelled, and the failed session runs on to completion; a whole failed session (with
/// phases) runs its failed and cancelled agents again, its failed phase started again. What
/// cannot be retried is refused in one line and changes nothing.
#[test]
fn a_failed_agent_or_session_is_retried() {
    let env = Env::new();
    let mut text = "objective = \"retry agent\"\nstrategy = \"adaptive\"\n".to_string();
    text += &agent_entry("flaky", "", "test -e fixed");
    text += &agent_entry("after", "depends_on = [\"flaky\"]", "exit 0");
    let sid = run(&env, &plan(&env, "agent.toml", &text));
    let s = wait_state(&env, &sid, "failed");
    assert_eq!(agent(&s, "after")["state"], "cancelled");
    // The briefing says how to go on.
    let next = env.maos_json(&["brief", &sid])["next_step"].clone();
    assert!(
        next.as_str()
            .unwrap_or_default()
            .contains(&format!("maos retry {sid}")),
        "{next}"
    );
    std::fs::write(env.project.join("fixed"), "").expect("fixed");
    let retried = env.maos_json(&["retry", "flaky"]);
    assert_eq!(retried["id"], sid.as_str());
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(agent(&s, "flaky")["attempts"], 2, "{s}");
    assert_eq!(agent(&s, "after")["state"], "completed", "{s}");
    assert!(s["ended_at"].is_string(), "{s}");
    assert_eq!(env.events(&[&sid, "--type", "session_retried"]).len(), 1);
    assert_eq!(env.events(&[&sid, "--type", "agent_retried"]).len(), 2);

    let mut text = "objective = \"retry session\"\nstrategy = \"adaptive\"\n\
                    phases = [\"build\", \"ship\"]\n[failure]\npolicy = \"continue\"\n"
        .to_string();
    text += &agent_entry("a", "phase = 1", "test -e go");
    text += &agent_entry("b", "phase = 1", "exit 0");
    text += &agent_entry("c", "phase = 2", "exit 0");
    let sid = run(&env, &plan(&env, "session.toml", &text));
    let s = wait_state(&env, &sid, "failed");
    assert_eq!(s["workflow"]["phases"][0]["state"], "failed", "{s}");
    std::fs::write(env.project.join("go"), "").expect("go");
    env.maos_json(&["retry", &sid]);
    let s = wait_state(&env, &sid, "completed");
    assert_eq!(s["workflow"]["phases"][0]["attempts"], 2, "{s}");
    assert_eq!(agent(&s, "a")["attempts"], 2, "{s}");
    assert_eq!(agent(&s, "b")["attempts"], 1, "{s}");
    assert_eq!(agent(&s, "c")["state"], "completed", "{s}");

    // Refused: a completed session, an agent that did not fail, a session not run from a plan.
    let hand = env.session("by hand", &[]);
    for (target, needle) in [
        (sid.as_str(), "completed"),
        ("c", "completed"),
        (hand.as_str(), "not run from a plan"),
    ] {
        let before = env.events(&[]).len();
        let f = env.maos_fail(&["retry", target]);
        assert_eq!(f.exit, 1, "{target}: {f:?}");
        assert_eq!(f.message.lines().count(), 1, "{target}: {f:?}");
        assert!(f.message.contains(needle), "{target}: {f:?}");
        assert_eq!(env.events(&[]).len(), before, "{target}: nothing changed");
    }
}

/// `maos ps` shows a managed agent's plan name, stage and attempt (of those the plan allows);
/// `ps --json` has them as `plan`.
#[test]
fn ps_shows_a_managed_agents_name_stage_and_attempts() {
    let env = Env::new();
    let mut text =
        "objective = \"ps\"\nstrategy = \"pipeline\"\n[failure]\nretries = 2\n".to_string();
    text += &agent_entry("flaky", "stage = 1", "test {attempt} -ge 2");
    text += &agent_entry("last", "stage = 2\nretries = 0", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    wait_state(&env, &sid, "completed");
    let out = env.maos(&["ps"]);
    let text = String::from_utf8_lossy(&out.stdout);
    let line = |name: &str| {
        text.lines()
            .find(|l| l.contains(&format!("task of {name}")))
            .unwrap_or_else(|| panic!("no line of {name} in\n{text}"))
            .to_string()
    };
    assert!(
        line("flaky").ends_with("[name flaky, stage 1, attempt 2/3]"),
        "{text}"
    );
    assert!(line("last").ends_with("[name last, stage 2]"), "{text}");
    let ps = env.maos_json(&["ps"]);
    let agents = ps[0]["agents"].as_array().expect("agents");
    let flaky = agents
        .iter()
        .find(|a| a["plan"]["name"] == "flaky")
        .expect("flaky");
    assert_eq!(
        flaky["plan"],
        serde_json::json!({"name": "flaky", "attempts": 2, "max_attempts": 3, "stage": 1})
    );
}

/// `AGENTS done/all` of a managed session that failed counts only the completed agent: not
/// the failed one, nor the one cancelled because of it (`ps`, `session list`, `session show`,
/// `status`).
#[test]
fn failed_and_cancelled_managed_agents_are_not_counted_as_done() {
    let env = Env::new();
    let mut text =
        "objective = \"count\"\nstrategy = \"adaptive\"\n[failure]\npolicy = \"continue\"\n"
            .to_string();
    text += &agent_entry("ok", "", "exit 0");
    text += &agent_entry("bad", "", "exit 1");
    text += &agent_entry("after", "depends_on = [\"bad\"]", "exit 0");
    let sid = run(&env, &plan(&env, "plan.toml", &text));
    wait_state(&env, &sid, "failed");
    let short = &sid[..13];
    for args in [&["ps"][..], &["session", "list"]] {
        let out = env.maos(args);
        let text = String::from_utf8_lossy(&out.stdout);
        let row = text
            .lines()
            .find(|l| l.starts_with(short))
            .unwrap_or_else(|| panic!("{args:?}: no row of {short}:\n{text}"));
        assert_eq!(
            row.split_whitespace().nth(4),
            Some("1/3"),
            "{args:?}: {row}"
        );
    }
    let show = String::from_utf8_lossy(&env.maos(&["session", "show", &sid]).stdout).into_owned();
    assert!(show.lines().any(|l| l == "agents     1/3"), "{show}");
    let status = String::from_utf8_lossy(&env.maos(&["status", &sid]).stdout).into_owned();
    assert!(
        status
            .lines()
            .any(|l| l == "agents    1/3 done (1 failed, 1 cancelled)"),
        "{status}"
    );
}
