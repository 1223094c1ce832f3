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
