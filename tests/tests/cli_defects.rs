//! Defects a new user met on the command line (issue 15), each through the real `maos` and
//! `maosd`.

use std::process::Output;

use maos_tests::{COMMAND_TIMEOUT, Env, Value, bin_dir, describe, json, run_with_timeout};

/// `maos ARGS` in the default project with `USER`/`LOGNAME` removed, then `vars` set.
fn maos_as(env: &Env, args: &[&str], vars: &[(&str, &str)]) -> Output {
    let mut cmd = env.maos_cmd_in(&env.project, args);
    cmd.env_remove("USER").env_remove("LOGNAME");
    cmd.envs(vars.iter().copied());
    run_with_timeout(cmd, COMMAND_TIMEOUT)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

#[test]
fn lock_check_of_a_blocked_path_exits_1_and_still_names_who_blocks_it() {
    let env = Env::new();
    env.session("locks", &[]);
    let a = env.agent(None, "holder", "t");
    let b = env.agent(None, "asker", "t");
    env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a]);

    // The person's view: the report, then exit 1.
    let out = env.maos(&["lock", "check", "src/a.rs", "--agent", &b]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.starts_with("blocked: src/a.rs"), "{}", describe(&out));
    assert!(
        text.contains("holder") && text.contains(&a[..12]),
        "names the holder: {}",
        describe(&out)
    );

    // JSON: the report (not an error object), and exit 1.
    let out = env.maos(&["--json", "lock", "check", "src/a.rs", "--agent", &b]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("the JSON report");
    assert_eq!(v["blocked"], true, "{v}");
    assert_eq!(v["holders"][0]["holder"], a.as_str(), "{v}");

    // A path that would be granted exits 0, and so does the holder's own check.
    for (path, who) in [("src/b.rs", &b), ("src/a.rs", &a)] {
        let out = env.maos(&["lock", "check", path, "--agent", who]);
        assert_eq!(out.status.code(), Some(0), "{path}: {}", describe(&out));
        assert!(stdout(&out).starts_with("free: "), "{}", describe(&out));
    }
}

#[test]
fn events_with_an_unknown_type_is_refused_naming_the_known_types() {
    let env = Env::new();
    env.session("typo", &[]);
    let before = env.events(&[]);
    assert!(!before.is_empty());

    let f = env.maos_fail(&["events", "--type", "lock_aquired"]);
    assert_eq!((f.exit, f.code.as_str()), (2, "bad_request"), "{f:?}");
    assert!(
        f.message.contains("\"lock_aquired\"")
            && f.message.contains("lock_acquired")
            && f.message.contains("session_created"),
        "names the type and the known ones: {f:?}"
    );
    assert_eq!(f.stderr.trim_end().lines().count(), 1, "{f:?}");
    // One bad name among good ones is refused all the same, and --follow too (it would
    // otherwise wait forever for an event that never comes).
    for args in [
        vec!["events", "--type", "session_created", "--type", "nope"],
        vec!["events", "--follow", "--type", "nope"],
    ] {
        let f = env.maos_fail(&args);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (2, "bad_request"),
            "{args:?}: {f:?}"
        );
        assert!(f.message.contains("\"nope\""), "{args:?}: {f:?}");
    }
    assert_eq!(env.events(&[]), before, "nothing recorded");

    // A known type with nothing recorded yet is an empty timeline, not an error.
    assert!(env.events(&["--type", "deadlock_detected"]).is_empty());
    assert_eq!(env.events(&["--type", "session_created"]).len(), 1);
}

#[test]
fn a_forced_release_and_a_pause_record_who_did_it_without_user_in_the_environment() {
    let env = Env::new();
    let sid = env.session("who", &[]);
    env.maos_json(&["session", "start", &sid]);
    let a = env.agent(None, "holder", "t");
    // SAFETY: getuid has no preconditions and cannot fail.
    let uid = unsafe { libc::getuid() };

    for (path, vars, who) in [
        ("src/a.rs", vec![], format!("uid {uid}")),
        (
            "src/b.rs",
            vec![("LOGNAME", "logname-user")],
            "logname-user".into(),
        ),
    ] {
        env.maos_json(&["lock", "acquire", path, "--agent", &a]);
        let out = maos_as(&env, &["--json", "lock", "release", path, "--force"], &vars);
        assert!(out.status.success(), "{}", describe(&out));
        let ev = env.events(&["--type", "lock_released"]);
        let ev = ev
            .iter()
            .find(|e| e["data"]["path"] == path)
            .unwrap_or_else(|| panic!("no lock_released for {path}: {ev:?}"));
        assert_eq!(ev["data"]["forced"], true, "{ev}");
        assert_eq!(ev["data"]["by"], who.as_str(), "who forced it: {ev}");
    }

    // `pause` records a person the same way.
    let out = maos_as(&env, &["pause", &sid], &[]);
    assert!(out.status.success(), "{}", describe(&out));
    let ev = env.events(&["--type", "session_paused"]);
    assert_eq!(ev[0]["data"]["by"], format!("uid {uid}"), "{}", ev[0]);
}

#[test]
fn logs_of_an_agent_maos_did_not_start_says_it_is_not_managed() {
    let env = Env::new();
    env.session("hooks", &[]);
    let registered = env.agent(None, "coder", "t");
    // A window's agent, made by a hook call as Claude Code makes it.
    let input = json!({"session_id": "cli-session-1", "cwd": env.project,
                       "hook_event_name": "UserPromptSubmit", "prompt": "fix the bug",
                       "transcript_path": env.root().join("t.jsonl")});
    env.hook("claude", &input);
    let prompt = env.events(&["--type", "prompt_submitted"]);
    let window = prompt[0]["agent_id"]
        .as_str()
        .unwrap_or_else(|| panic!("the hook's agent: {prompt:?}"))
        .to_string();
    let before = env.events(&[]);

    for agent in [&registered, &window] {
        let f = env.maos_fail(&["logs", agent]);
        assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"), "{f:?}");
        assert!(
            f.message.contains("not a managed agent") && f.message.contains(&agent[..12]),
            "{f:?}"
        );
        assert!(!f.message.contains("no output yet"), "{f:?}");
        assert_eq!(f.stderr.trim_end().lines().count(), 1, "{f:?}");
        let out = env.maos(&["logs", agent]);
        assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
        assert!(out.stdout.is_empty(), "{}", describe(&out));
    }
    assert_eq!(env.events(&[]), before, "nothing recorded");
}

#[test]
fn the_briefing_suggests_a_retry_that_works_as_written() {
    let env = Env::new();
    let sid = env.session("retry", &[]);
    env.maos_json(&["session", "start", &sid]);
    let docs = env.agent(Some(&sid), "docs", "write the user's guide");
    env.maos_json(&["agent", "start", &docs]);
    env.maos_json(&["agent", "fail", &docs, "--reason", "disk full"]);

    let brief = env.maos_json(&["brief", &sid]);
    let next = brief["next_step"].as_str().expect("next_step").to_string();
    let start = next
        .find("`maos agent register")
        .unwrap_or_else(|| panic!("suggests a retry: {next}"));
    let command = &next[start + 1..];
    let command = &command[..command.find('`').expect("the closing backtick")];

    // Run it as a person pastes it into a shell.
    let mut sh = env.command(std::path::Path::new("sh"));
    let path = std::env::var("PATH").unwrap_or_default();
    sh.env("PATH", format!("{}:{path}", bin_dir().display()))
        .args(["-c", &format!("{command} --json")]);
    let out = run_with_timeout(sh, COMMAND_TIMEOUT);
    assert!(
        out.status.success(),
        "{command:?} fails: {}",
        describe(&out)
    );
    let new: Value = serde_json::from_slice(&out.stdout).expect("the new agent");
    assert_eq!(new["role"], "docs", "{new}");
    assert_eq!(new["task"], "write the user's guide", "{new}");
    assert_eq!(new["session_id"], sid.as_str(), "{new}");
}
