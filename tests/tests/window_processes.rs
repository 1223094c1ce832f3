//! A window's CLI process, as maos watches it (issue 32 §4): a hook run through a wrapper that
//! forks (`timeout 20 maos hook`, a script that does not `exec`) still names the CLI, so the
//! window lives as long as the CLI does and ends when it dies; a window whose pid another
//! process took is ended; a window's end is final for its subagents (a late call of one of
//! them brings back no ghost window or session). Real `maosd` and `maos` processes, real
//! parent processes (python3, standing in for a CLI) killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use maos_proto::{Cli, HookCall, ProcessRef, Request};
use maos_tests::conformance::ps_agents;
use maos_tests::{Env, Value, json, maos_bin, wait_until};

const SWEEP_MS: &str = "100";

fn event(env: &Env, window: &str, name: &str, extra: Value) -> Value {
    maos_tests::hook_input(&env.project, window, name, extra)
}

fn write(env: &Env, window: &str, file: &str) -> Value {
    event(
        env,
        window,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_use_id": "toolu_w",
               "tool_input": {"file_path": env.project.join(file), "content": "x"}}),
    )
}

/// The one window (an agent without parent) whose task is `task`.
fn window(env: &Env, task: &str) -> Value {
    let found: Vec<Value> = ps_agents(env)
        .into_iter()
        .filter(|a| a["parent"].is_null() && a["task"] == task)
        .collect();
    match &found[..] {
        [a] => a.clone(),
        _ => panic!("not one window with the task {task:?}: {found:#?}"),
    }
}

fn state_of(env: &Env, task: &str) -> String {
    window(env, task)["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// A stand-in agent CLI: a real process (python3) that runs the shell command `hook` (as CLIs
/// run a hook: `sh -c COMMAND`, the input on stdin, the answer read from a pipe) for each
/// input, says "ready", then stays (until killed) or exits.
struct FakeCli {
    child: std::process::Child,
}

impl FakeCli {
    fn start(env: &Env, hook: &str, inputs: &[Value], stay: bool) -> FakeCli {
        let mut files = Vec::new();
        for input in inputs {
            let n = std::fs::read_dir(env.root()).map_or(0, Iterator::count);
            let f = env.root().join(format!("input-{n}.json"));
            std::fs::write(&f, input.to_string()).expect("write an input");
            files.push(f);
        }
        let script = "import subprocess, sys, time\n\
            for f in sys.argv[3:]:\n\
            \x20   out = subprocess.run(['sh', '-c', sys.argv[1]], stdin=open(f), stdout=subprocess.PIPE)\n\
            \x20   if out.returncode != 0:\n\
            \x20       print('hook failed', out.returncode, flush=True)\n\
            \x20       sys.exit(1)\n\
            print('ready', flush=True)\n\
            if sys.argv[2] == 'stay':\n\
            \x20   time.sleep(600)\n";
        let mut cmd = env.command(Path::new("python3"));
        cmd.arg("-c")
            .arg(script)
            .arg(hook)
            .arg(if stay { "stay" } else { "go" })
            .args(&files)
            // The daemon a hook starts looks for lost windows every 100 ms.
            .env("MAOS_TEST_SWEEP_MS", SWEEP_MS)
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("the fake CLI says ready");
        assert_eq!(line.trim(), "ready", "the fake CLI's hooks failed");
        if !stay {
            let _ = child.wait();
        }
        FakeCli { child }
    }

    fn kill9(mut self) {
        maos_tests::kill9(self.child.id());
        let _ = self.child.wait();
    }
}

impl Drop for FakeCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The sweep has looked at every window since this call: a window whose CLI (a process that
/// ran one hook and exited) is gone was ended. Named by its task `task`.
fn swept(env: &Env, task: &str) {
    let w = "cc-sentinel";
    FakeCli::start(
        env,
        &format!("{} hook --cli claude", maos_bin().display()),
        &[event(env, w, "UserPromptSubmit", json!({"prompt": task}))],
        false,
    );
    wait_until(
        Duration::from_secs(20),
        "the sweep ends a window whose CLI exited",
        || state_of(env, task) == "ended",
    );
}

/// A window whose hook runs through `wrapper` (a shell command before `maos hook`'s arguments)
/// lives while its CLI does, holding its lock, and ends when the CLI is killed.
fn wrapped_window_lives_with_its_cli(env: &Env, wrapper: &str) {
    let w = "cc-wrapped";
    let cli = FakeCli::start(
        env,
        &format!("{wrapper} --cli claude"),
        &[
            event(env, w, "SessionStart", json!({"source": "startup"})),
            event(
                env,
                w,
                "UserPromptSubmit",
                json!({"prompt": "Wrapped work"}),
            ),
            write(env, w, "src/wrapped.rs"),
        ],
        true,
    );
    let holder = window(env, "Wrapped work")["id"]
        .as_str()
        .expect("id")
        .to_string();
    let locked = |env: &Env| {
        env.maos_json(&["lock", "list"])["locks"]
            .as_array()
            .is_some_and(|l| {
                l.iter()
                    .any(|l| l["path"] == "src/wrapped.rs" && l["holder"] == holder.as_str())
            })
    };
    assert!(locked(env), "the wrapped window took its lock");

    // Every wrapper process is gone; the sweep has looked since; the CLI runs on, and so does
    // its window, with its lock.
    swept(env, "the sentinel");
    assert_eq!(state_of(env, "Wrapped work"), "running");
    assert!(locked(env), "the live window kept its lock");

    // The CLI dies without a word: the window ends, its lock goes.
    cli.kill9();
    wait_until(
        Duration::from_secs(20),
        "the dead CLI's window is ended",
        || state_of(env, "Wrapped work") == "ended",
    );
    assert!(!locked(env), "the ended window's lock was released");
    let ended = env.events(&["--type", "agent_ended"]);
    assert!(
        ended.iter().any(|e| e["agent_id"] == holder.as_str()
            && e["data"]["reason"]
                .as_str()
                .is_some_and(|r| r.contains("CLI process") && r.contains("is gone"))),
        "{ended:#?}"
    );
}

#[test]
fn a_hook_wrapped_by_timeout_names_the_cli_not_the_wrapper() {
    let env = Env::new();
    wrapped_window_lives_with_its_cli(&env, &format!("timeout 20 {} hook", maos_bin().display()));
}

#[test]
fn a_hook_wrapped_by_a_script_that_forks_names_the_cli_not_the_script() {
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    let script = env.root().join("maos-wrapped");
    // No `exec`: the script's shell stays, the parent of `maos hook`, and ends after it.
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\n{} hook \"$@\"\nstatus=$?\nexit $status\n",
            maos_bin().display()
        ),
    )
    .expect("write the wrapper");
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    wrapped_window_lives_with_its_cli(&env, &script.display().to_string());
}

/// A daemon started with a sweep every 100 ms; a raw protocol client of the project.
fn raw_client(env: &Env) -> maos_tests::client::Client {
    let mut start = env.maos_cmd_in(&env.project, &["--json", "ps"]);
    start.env("MAOS_TEST_SWEEP_MS", SWEEP_MS);
    let out = maos_tests::run_with_timeout(start, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let root = env.project.to_str().expect("a UTF-8 project path");
    maos_tests::client::Client::connect(&env.socket, root).expect("connect")
}

fn hook_call(window: &str, event: &str, process: ProcessRef) -> HookCall {
    HookCall {
        cli: Cli::Claude,
        event: event.into(),
        session_id: window.into(),
        process: Some(process),
        ..HookCall::default()
    }
}

/// `/proc/PID/stat`'s start time (field 22).
fn start_time(pid: u32) -> u64 {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
    let rest = stat.rsplit_once(')').expect("comm").1;
    rest.split_whitespace()
        .nth(19)
        .expect("field 22")
        .parse()
        .expect("a number")
}

/// The window's CLI died and another process now has its pid: that is another process (its
/// start time differs), and the window is ended as any window whose CLI is gone.
#[test]
fn a_dead_windows_pid_taken_by_another_process_is_ended() {
    let env = Env::new();
    let mut client = raw_client(&env);
    // The process that has the pid now: alive for the whole test.
    let mut other = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    let pid = other.id();
    let then = ProcessRef {
        pid,
        start_time: Some(start_time(pid) - 1),
    };
    let now = ProcessRef {
        pid,
        start_time: Some(start_time(pid)),
    };
    // Two windows with that pid: one whose CLI started before (the pid reused since), one
    // that is this very process.
    for (w, p, prompt) in [
        ("cc-reused", then, "Reused pid"),
        ("cc-same", now, "Same process"),
    ] {
        client
            .call(Request::Hook(Box::new(hook_call(w, "SessionStart", p))))
            .expect("SessionStart");
        let mut call = hook_call(w, "UserPromptSubmit", p);
        call.summary = Some(prompt.into());
        client
            .call(Request::Hook(Box::new(call)))
            .expect("UserPromptSubmit");
    }
    wait_until(
        Duration::from_secs(20),
        "the window whose pid another process took is ended",
        || state_of(&env, "Reused pid") == "ended",
    );
    assert_eq!(state_of(&env, "Same process"), "running");
    let _ = other.kill();
    let _ = other.wait();
    wait_until(
        Duration::from_secs(20),
        "the window whose process died is ended",
        || state_of(&env, "Same process") == "ended",
    );
}
/// A window ends (SessionEnd) while a background subagent holds a lock: the subagent ends with
/// it (its lock released, its end recorded as its window's), and the session completes. A
/// call of that subagent arriving after the end (its SubagentStop, a last write) brings back
/// no ghost: no new session, no new window; the write is refused, not left unlocked.
#[test]
fn a_windows_end_is_final_for_its_subagents() {
    let env = Env::new();
    let w = "cc-end";
    let hook = |v: Value| env.hook("claude", &v);
    hook(event(&env, w, "SessionStart", json!({"source": "startup"})));
    hook(event(
        &env,
        w,
        "UserPromptSubmit",
        json!({"prompt": "Lead the work"}),
    ));
    let agent_call = json!({"tool_name": "Agent", "tool_use_id": "toolu_a",
        "tool_input": {"description": "helper", "prompt": "help", "subagent_type": "general-purpose"}});
    hook(event(&env, w, "PreToolUse", agent_call.clone()));
    let mut launched = agent_call;
    launched["tool_response"] = json!({"status": "async_launched", "agentId": "sub1"});
    hook(event(&env, w, "PostToolUse", launched));
    let sub = json!({"agent_id": "sub1", "agent_type": "general-purpose"});
    hook(event(&env, w, "SubagentStart", sub.clone()));
    let mut first = write(&env, w, "src/sub.rs");
    first["agent_id"] = json!("sub1");
    first["agent_type"] = json!("general-purpose");
    assert_eq!(maos_tests::denial_reason(&hook(first.clone())), "");
    let holders: Vec<Value> = env.maos_json(&["lock", "list"])["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|l| l["holder"].clone())
        .collect();
    let sub_id = ps_agents(&env)
        .into_iter()
        .find(|a| !a["parent"].is_null())
        .expect("the subagent")["id"]
        .clone();
    assert_eq!(holders, std::slice::from_ref(&sub_id));

    hook(event(
        &env,
        w,
        "SessionEnd",
        json!({"reason": "prompt_input_exit"}),
    ));
    let settled = |env: &Env| {
        let sessions = env.maos_json(&["ps", "--all"]);
        let all = sessions.as_array().expect("sessions");
        assert_eq!(all.len(), 1, "one session, no ghost: {sessions:#}");
        assert_eq!(all[0]["state"], "completed", "{sessions:#}");
        let agents = all[0]["agents"].as_array().expect("agents");
        assert_eq!(
            agents.len(),
            2,
            "the window and its subagent, no more: {sessions:#}"
        );
        assert!(agents.iter().all(|a| a["state"] == "ended"), "{sessions:#}");
        assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    };
    settled(&env);
    let ended = env.events(&["--type", "agent_ended"]);
    assert!(
        ended.iter().any(|e| e["agent_id"] == sub_id
            && e["data"]["reason"]
                .as_str()
                .is_some_and(|r| r.starts_with("its window"))),
        "{ended:#?}"
    );

    // Late calls of the subagent: a write (refused, with the reason), its stop.
    let mut late = first;
    late["tool_input"]["file_path"] = json!(env.project.join("src/late.rs"));
    let refused = maos_tests::denial_reason(&hook(late));
    assert!(
        refused.contains("window") && refused.contains("ended"),
        "{refused:?}"
    );
    hook(event(&env, w, "SubagentStop", sub));
    settled(&env);

    // The window itself coming back (`claude --resume`) is a window again.
    hook(event(&env, w, "SessionStart", json!({"source": "resume"})));
    let sessions = env.maos_json(&["ps"]);
    assert_eq!(
        sessions.as_array().map(Vec::len),
        Some(1),
        "the resumed window works again: {sessions:#}"
    );
}

/// A daemon of a fleet (on PostgreSQL) on machine `machine`, in the project `key`, whose
/// sweep runs every 100 ms; a raw client of it.
fn fleet_daemon(
    pg: &maos_tests::postgres::Postgres,
    machine: &str,
    key: &str,
) -> (Env, maos_tests::client::Client) {
    let env = Env::new();
    env.write_config(&format!(
        "database_url = \"{}\"\nmachine = \"{machine}\"\n",
        pg.url()
    ));
    std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
    std::fs::write(
        env.project.join(".maos/config.toml"),
        format!("project = \"{key}\"\n"),
    )
    .expect("write the project's key");
    let client = raw_client(&env);
    (env, client)
}

/// A window a hook opened through `client` with the CLI process `p`, named by `prompt`.
fn open_window(client: &mut maos_tests::client::Client, w: &str, p: ProcessRef, prompt: &str) {
    client
        .call(Request::Hook(Box::new(hook_call(w, "SessionStart", p))))
        .expect("SessionStart");
    let mut call = hook_call(w, "UserPromptSubmit", p);
    call.summary = Some(prompt.into());
    client
        .call(Request::Hook(Box::new(call)))
        .expect("UserPromptSubmit");
}

/// In a fleet, a window's pid is its own machine's: another machine's daemon, whose `/proc`
/// is not that machine's, leaves the window to the daemon that watches it. Both daemons run
/// on this host: machine-1's is stopped (SIGSTOP) when its window's CLI dies, so that only
/// machine-2's sweeps see the pid gone.
#[test]
fn a_fleet_daemon_sweeps_only_its_own_machines_windows() {
    let Some(pg) = maos_tests::postgres::postgres_or_skip() else {
        return;
    };
    let (one, mut c1) = fleet_daemon(&pg, "machine-1", "acme/windows");
    let (two, mut c2) = fleet_daemon(&pg, "machine-2", "acme/windows");
    let mut cli = std::process::Command::new("sleep")
        .arg("600")
        .spawn()
        .expect("sleep");
    let p = ProcessRef {
        pid: cli.id(),
        start_time: Some(start_time(cli.id())),
    };
    open_window(&mut c1, "cc-m1", p, "Machine one's work");
    /// Machine-1's daemon stopped until this is dropped (also by a failing assertion).
    struct Stopped(u32);
    impl Drop for Stopped {
        fn drop(&mut self) {
            // SAFETY: kill(2) of the test's own daemon.
            unsafe { libc::kill(self.0 as libc::pid_t, libc::SIGCONT) };
        }
    }
    let one_pid = one.daemon_pid();
    // SAFETY: as above.
    unsafe { libc::kill(one_pid as libc::pid_t, libc::SIGSTOP) };
    let stopped = Stopped(one_pid);
    let _ = cli.kill();
    let _ = cli.wait();
    // Machine-2's own window, whose CLI is gone too: once it is ended, machine-2 has swept.
    let mut gone = std::process::Command::new("true").spawn().expect("true");
    let q = ProcessRef {
        pid: gone.id(),
        start_time: Some(start_time(gone.id())),
    };
    let _ = gone.wait();
    open_window(&mut c2, "cc-m2", q, "the sentinel");
    wait_until(
        Duration::from_secs(20),
        "machine-2's sweep ends its own window whose CLI is gone",
        || state_of(&two, "the sentinel") == "ended",
    );
    assert_eq!(state_of(&two, "Machine one's work"), "running");
    // Machine-1's daemon runs again: its sweep ends its window.
    drop(stopped);
    wait_until(
        Duration::from_secs(20),
        "machine-1's sweep ends its window whose CLI is gone",
        || state_of(&one, "Machine one's work") == "ended",
    );
}
