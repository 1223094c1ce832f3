//! The real Claude Code with its hook command wrapped by a program that forks (issue 32 §4):
//! `timeout 20 maos hook`, and a script that runs `maos hook` without `exec`. Every hook call
//! has its own wrapper process, gone as soon as the call is answered; the window's CLI is the
//! Claude Code process all the same, so the daemon's sweep (every 100 ms here) leaves the
//! window and its lock alone while Claude Code runs (the fake model holds the run past several
//! sweeps) and ends it once Claude Code is killed.
//!
//! The pinned npm release runs offline against a scripted fake Anthropic Messages API, as in
//! `conformance_claude.rs`; where it cannot run, the test skips with the reason (fails on CI).

use std::path::Path;
use std::process::Stdio;
use std::time::Duration;

use maos_tests::claude::{FakeModel, Run, claude, say, write};
use maos_tests::conformance::{Gate, ps_agent, runnable, window_of};
use maos_tests::{Env, json, maos_bin, wait_until};

/// The project's Claude Code hooks run `wrapper hook ...` instead of `maos hook ...`; the
/// daemon runs with a sweep every 100 ms.
fn setup(wrapper: impl Fn(&Env) -> String) -> Option<(Env, std::path::PathBuf)> {
    let claude = runnable("Claude Code", claude())?;
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    let path = env.project.join(".claude/settings.json");
    let settings = std::fs::read_to_string(&path).expect("install-hooks wrote settings.json");
    let wrapped = settings.replace("\"maos hook", &format!("\"{} hook", wrapper(&env)));
    assert_ne!(wrapped, settings, "no `maos hook` command in {settings}");
    std::fs::write(&path, wrapped).expect("rewrite settings.json");
    let mut start = env.maos_cmd_in(&env.project, &["--json", "ps"]);
    start.env("MAOS_TEST_SWEEP_MS", "100");
    let out = maos_tests::run_with_timeout(start, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    Some((env, claude))
}

/// The sweep has looked at every window since now: a window whose CLI (a process that ran one
/// hook and exited) is gone was ended.
fn swept(env: &Env) {
    let input = maos_tests::hook_input(
        &env.project,
        "cc-sentinel",
        "UserPromptSubmit",
        json!({"prompt": "the sentinel"}),
    );
    let file = env.root().join("sentinel.json");
    std::fs::write(&file, input.to_string()).expect("write the input");
    // python3 runs the hook and exits: the window's CLI is gone.
    let script = "import subprocess, sys\n\
        subprocess.run([sys.argv[1], 'hook'], stdin=open(sys.argv[2]), stdout=subprocess.PIPE, check=True)\n";
    let mut cmd = env.command(Path::new("python3"));
    cmd.arg("-c")
        .arg(script)
        .arg(maos_bin())
        .arg(&file)
        .stdin(Stdio::null());
    let out = maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let sentinel = window_of(env, "the sentinel");
    wait_until(
        Duration::from_secs(20),
        "the sweep ends a window whose CLI exited",
        || ps_agent(env, &sentinel)["state"] == "ended",
    );
}

fn wrapped_claude_window_lives_with_claude(wrapper: impl Fn(&Env) -> String) {
    let Some((env, claude)) = setup(wrapper) else {
        return;
    };
    let file = env.project.join("wrapped.txt");
    let target = file.clone();
    let hold = Gate::default();
    let h = hold.clone();
    let model = FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            say("ok")
        } else if !req.has("toolu_write") {
            vec![write("toolu_write", &target, "through a wrapper\n")]
        } else {
            // Claude Code waits here, holding wrapped.txt's lock, until the test has seen
            // sweeps pass.
            h.wait();
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: write wrapped.txt, then wait";
    let run = Run::start(&env, &claude, &model, prompt);
    model.wait_result("toolu_write", "the window's write was answered");
    let window = window_of(&env, prompt);
    let held = |env: &Env| {
        env.maos_json(&["lock", "list"])["locks"]
            .as_array()
            .expect("locks")
            .iter()
            .any(|l| l["path"] == "wrapped.txt" && l["holder"] == window.as_str())
    };
    assert!(
        held(&env),
        "the window holds wrapped.txt's lock: {:#}",
        ps_agent(&env, &window)
    );

    // Every wrapper of its hooks is gone, sweeps have passed: Claude Code runs, so does its
    // window, with its lock.
    swept(&env);
    assert_eq!(ps_agent(&env, &window)["state"], "running");
    assert!(held(&env), "the live window kept its lock");

    // Claude Code is killed (no SessionEnd): its window ends, its lock goes.
    run.kill();
    hold.open();
    wait_until(
        Duration::from_secs(20),
        "maos ends the killed window",
        || ps_agent(&env, &window)["state"] == "ended" && !held(&env),
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("wrapped.txt"),
        "through a wrapper\n"
    );
}

#[test]
fn a_claude_code_hook_wrapped_by_timeout_keeps_its_window_while_claude_runs() {
    wrapped_claude_window_lives_with_claude(|_| "timeout 20 maos".to_string());
}

#[test]
fn a_claude_code_hook_wrapped_by_a_forking_script_keeps_its_window_while_claude_runs() {
    wrapped_claude_window_lives_with_claude(|env| {
        use std::os::unix::fs::PermissionsExt;
        let script = env.root().join("maos-wrapper");
        // No `exec`: the script's shell is `maos hook`'s parent, and ends after it.
        std::fs::write(&script, "#!/bin/sh\nmaos \"$@\"\nstatus=$?\nexit $status\n")
            .expect("write the wrapper");
        std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        script.display().to_string()
    });
}
