//! The command-line and hook defects a newcomer met (issue 29, section 3), each through the
//! real `maos` and `maosd`: writes outside the project, a write with no input, error texts,
//! durations, plurals, the man page, `export -o`, and `maos pause` after the last window.

use std::path::Path;
use std::process::Output;

use maos_tests::{Env, Value, describe, json};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A Claude Code hook input of `event` from the window `window`, in `env`'s project.
fn input(env: &Env, window: &str, event: &str, extra: Value) -> Value {
    let mut v = json!({
        "hook_event_name": event,
        "session_id": window,
        "cwd": env.project.to_string_lossy(),
    });
    if let (Some(o), Some(more)) = (v.as_object_mut(), extra.as_object()) {
        for (k, x) in more {
            o.insert(k.clone(), x.clone());
        }
    }
    v
}

/// The window `window` writes `path` (PreToolUse Write): the decision ("" when none) and the
/// reason.
fn write(env: &Env, window: &str, path: &Path) -> (String, String) {
    let v = input(
        env,
        window,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_use_id": "t1",
               "tool_input": {"file_path": path.to_string_lossy(), "content": "x"}}),
    );
    let out = env.hook("claude", &v);
    let text = stdout(&out);
    if text.trim().is_empty() {
        return (String::new(), String::new());
    }
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let o = &v["hookSpecificOutput"];
    (
        o["permissionDecision"].as_str().unwrap_or("").to_string(),
        o["permissionDecisionReason"]
            .as_str()
            .unwrap_or("")
            .to_string(),
    )
}

fn locked(env: &Env) -> Vec<String> {
    let mut paths: Vec<String> = env.maos_json(&["lock", "list"])["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .map(|l| l["path"].as_str().unwrap_or_default().to_string())
        .collect();
    paths.sort();
    paths
}

/// One line, no run of 3 spaces: an error a person reads.
fn assert_clean_line(what: &str, msg: &str) {
    let msg = msg.strip_suffix('\n').unwrap_or(msg);
    assert!(!msg.trim().is_empty(), "{what}: empty");
    assert!(!msg.contains('\n'), "{what}: more than one line: {msg:?}");
    assert!(!msg.contains("   "), "{what}: a run of spaces: {msg:?}");
}

/// `maos ARGS` is refused in one clean line: as text on stderr and as the `--json` error's
/// message.
fn assert_refused_in_one_clean_line(env: &Env, args: &[&str]) {
    let out = env.maos(args);
    assert!(!out.status.success(), "{args:?}: {}", describe(&out));
    assert_clean_line(&format!("{args:?}"), &stderr(&out));
    let f = env.maos_fail(args);
    assert_clean_line(&format!("--json {args:?}"), &f.message);
}

/// Writes the project's own `.maos/config.toml`.
fn write_project_config(env: &Env, toml: &str) {
    std::fs::create_dir_all(env.project.join(".maos")).expect("mkdir");
    std::fs::write(env.project.join(".maos/config.toml"), toml).expect("write");
}

// ---- 1. Writes outside the project -------------------------------------------------------

#[test]
fn a_write_outside_every_project_is_allowed_and_recorded() {
    let env = Env::new();
    let scratch = env.root().join("scratch").join("notes.txt");
    let (decision, reason) = write(&env, "w1", &scratch);
    assert_ne!(
        decision, "deny",
        "a scratch file outside the project: {reason}"
    );
    let seen = env.events(&["--type", "write_outside_project"]);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(
        seen[0]["data"]["paths"][0],
        json!(scratch.to_string_lossy()),
        "{seen:?}"
    );
    assert!(locked(&env).is_empty(), "nothing outside is locked");
    // A file in the project is still locked, in the same call's window.
    let (decision, _) = write(&env, "w1", &env.project.join("src/a.rs"));
    assert_ne!(decision, "deny");
    assert_eq!(locked(&env), ["src/a.rs"]);
}

#[test]
fn outside_project_deny_in_the_daemon_config_refuses_them() {
    let env = Env::new();
    env.write_config("outside_project = \"deny\"\n");
    let (decision, reason) = write(&env, "w1", &env.root().join("scratch.txt"));
    assert_eq!(decision, "deny");
    assert!(reason.contains("outside_project"), "{reason}");
    assert_clean_line("deny reason", &reason);
    assert!(
        env.events(&["--type", "write_outside_project"]).is_empty(),
        "a refused write is not recorded as written"
    );
}

#[test]
fn outside_project_deny_in_the_projects_config_refuses_them() {
    let env = Env::new();
    write_project_config(&env, "outside_project = \"deny\"\n");
    let (decision, reason) = write(&env, "w1", &env.root().join("scratch.txt"));
    assert_eq!(decision, "deny");
    assert!(reason.contains(".maos/config.toml"), "{reason}");
}

#[test]
fn outside_project_deny_in_the_environment_refuses_them() {
    let env = Env::new();
    // The daemon this command starts takes the setting from its environment.
    let mut cmd = env.maos_cmd_in(&env.project, &["ps"]);
    cmd.env("MAOS_OUTSIDE_PROJECT", "deny");
    let out = maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", describe(&out));
    let (decision, reason) = write(&env, "w1", &env.root().join("scratch.txt"));
    assert_eq!(decision, "deny");
    assert!(reason.contains("MAOS_OUTSIDE_PROJECT"), "{reason}");
}

#[test]
fn a_project_config_maos_cannot_read_denies_outside_writes() {
    let env = Env::new();
    write_project_config(&env, "outside_project = [\n");
    let (decision, reason) = write(&env, "w1", &env.root().join("scratch.txt"));
    assert_eq!(decision, "deny", "not silently allowed");
    assert!(reason.contains("cannot tell"), "{reason}");
    assert_clean_line("deny reason", &reason);
    // Inside the project, writes are locked as ever.
    assert_ne!(write(&env, "w1", &env.project.join("src/a.rs")).0, "deny");
}

#[test]
fn a_bad_outside_project_value_is_refused_in_one_line() {
    let env = Env::new();
    env.write_config("outside_project = \"sometimes\"\n");
    let out = env.maos(&["ps"]);
    assert!(!out.status.success(), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("outside_project"), "{err}");
}

#[test]
fn a_write_into_another_maos_project_is_locked_there() {
    let env = Env::new();
    let other = env.make_project("other");
    env.create(&["session", "create", "--objective", "mine"]);
    let out = env.maos_in(&other, &["session", "create", "--objective", "theirs"]);
    assert!(out.status.success(), "{}", describe(&out));
    // One file, one lock: the file's own project holds it, whoever writes it.
    let (decision, reason) = write(&env, "w1", &other.join("src/x.rs"));
    assert_ne!(decision, "deny", "{reason}");
    let locks = env.maos_json_in(&other, &["lock", "list"]);
    assert_eq!(locks["locks"][0]["path"], "src/x.rs", "{locks:#}");
    // With outside_project = "deny", this project writes nowhere else, naming the file.
    std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
    std::fs::write(
        env.project.join(".maos/config.toml"),
        "outside_project = \"deny\"\n",
    )
    .expect("config");
    let (decision, reason) = write(&env, "w1", &other.join("src/y.rs"));
    assert_eq!(decision, "deny");
    assert!(reason.contains("outside_project"), "{reason}");
    let other_root = std::fs::canonicalize(&other).expect("other");
    assert!(
        reason.contains(other_root.to_string_lossy().as_ref()),
        "names it: {reason}"
    );
    assert_clean_line("deny reason", &reason);
}

#[test]
fn a_path_into_the_project_is_locked_by_whatever_route() {
    let env = Env::new();
    let root = env.root();
    std::fs::create_dir_all(env.project.join("src")).expect("src");
    // An absolute path through a symlinked prefix outside the project.
    std::os::unix::fs::symlink(&env.project, root.join("alias")).expect("symlink");
    assert_ne!(write(&env, "w1", &root.join("alias/src/a.rs")).0, "deny");
    // `..` out and back in.
    std::fs::create_dir_all(root.join("elsewhere")).expect("mkdir");
    let name = env.project.file_name().expect("name").to_owned();
    let back = root.join("elsewhere/..").join(&name).join("src/b.rs");
    assert_ne!(write(&env, "w1", &back).0, "deny");
    // A dangling symlink outside whose target is a new file in the project: the write creates
    // that file.
    std::os::unix::fs::symlink(env.project.join("src/new.rs"), root.join("dangling"))
        .expect("symlink");
    assert_ne!(write(&env, "w1", &root.join("dangling")).0, "deny");
    assert_eq!(locked(&env), ["src/a.rs", "src/b.rs", "src/new.rs"]);
    assert!(
        env.events(&["--type", "write_outside_project"]).is_empty(),
        "none of them is outside"
    );
}

#[test]
fn a_write_maos_cannot_place_is_denied_saying_so() {
    let env = Env::new();
    let root = env.root();
    // A symbolic link loop: where the write lands cannot be told.
    std::os::unix::fs::symlink(root.join("loop"), root.join("loop")).expect("symlink");
    let (decision, reason) = write(&env, "w1", &root.join("loop/x.txt"));
    assert_eq!(decision, "deny", "{reason}");
    assert!(reason.contains("cannot tell"), "{reason}");
    assert_clean_line("deny reason", &reason);
}

// ---- 2. A write with no input ------------------------------------------------------------

#[test]
fn a_write_without_its_input_is_refused_and_registers_nothing() {
    let env = Env::new();
    for (tool, extra) in [
        ("Write", json!({})),
        (
            "Edit",
            json!({"tool_input": {"old_string": "a", "new_string": "b"}}),
        ),
        (
            "apply_patch",
            json!({"tool_input": {"command": "not a patch"}}),
        ),
    ] {
        let mut v = input(&env, "ghost", "PreToolUse", extra);
        v["tool_name"] = json!(tool);
        let out = env.hook_at(
            &env.project,
            &["hook"],
            v.to_string().into_bytes(),
            &[],
            false,
        );
        assert_eq!(out.status.code(), Some(1), "{tool}: {}", describe(&out));
        assert!(out.stdout.is_empty(), "{tool}: {}", describe(&out));
        let err = stderr(&out);
        assert!(err.starts_with("maos hook: "), "{tool}: {err}");
        assert!(err.contains("nothing was done"), "{tool}: {err}");
        assert_clean_line(tool, &err);
    }
    // No window agent, no session: nothing was registered.
    let ps = env.maos_json(&["ps", "--all"]);
    assert_eq!(ps, json!([]), "a refused call left {ps}");
}

// ---- 3. Error texts ----------------------------------------------------------------------

#[test]
fn retry_errors_are_one_clean_line() {
    let env = Env::new();
    let sid = env.session("not from a plan", &[]);
    let agent = env.agent(None, "worker", "t");
    for args in [
        vec!["retry"],
        vec!["retry", sid.as_str()],
        vec!["retry", agent.as_str()],
    ] {
        assert_refused_in_one_clean_line(&env, &args);
    }
}

/// A sweep of refusals a newcomer meets: each is one line with no run of spaces, as text on
/// stderr and as the `--json` error's message.
#[test]
fn refusals_are_one_clean_line() {
    let env = Env::new();
    let sid = env.session("refusals", &[]);
    let agent = env.agent(None, "worker", "t");
    let file = env.root().join("taken.json");
    std::fs::write(&file, "x").expect("write");
    let file = file.to_str().expect("utf-8");
    let refusals: Vec<Vec<&str>> = vec![
        vec!["retry", &sid],
        vec!["retry", &agent],
        vec!["session", "start", "nope"],
        vec!["pause", "--agent", "nobody"],
        vec!["lock", "release", "src/a.rs", "--agent", &agent],
        vec!["lock", "acquire", "../x", "--agent", &agent],
        vec!["export", "-o", file],
        vec!["backup", "-o", file],
        vec!["events", "--type", "nope"],
        vec!["gc", "--older-than", "soon"],
        vec!["session", "archive", &sid],
    ];
    for args in refusals {
        assert_refused_in_one_clean_line(&env, &args);
    }
}

// ---- 4. Durations ------------------------------------------------------------------------

#[test]
fn every_duration_flag_needs_a_unit() {
    let env = Env::new();
    env.session("durations", &[]);
    for args in [
        vec![
            "lock", "acquire", "src/a.rs", "--agent", "nobody", "--wait", "5",
        ],
        vec![
            "lock", "acquire", "src/a.rs", "--agent", "nobody", "--ttl", "5",
        ],
        vec!["gc", "--older-than", "5"],
        vec!["ps", "--watch", "--interval", "5"],
        vec!["events", "--follow", "--reconnect-for", "5"],
        vec!["events", "--since", "5"],
        vec!["events", "--until", "5"],
    ] {
        let out = env.maos(&args);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let err = stderr(&out);
        assert!(err.contains("needs a unit"), "{args:?}: {err}");
        assert!(err.contains("5s"), "{args:?}: {err}");
        assert_clean_line(&format!("{args:?}"), &err);
    }
    // With a unit they are taken.
    let out = env.maos(&["gc", "--older-than", "5s", "--dry-run"]);
    assert!(out.status.success(), "{}", describe(&out));
}

// ---- 5. Plurals --------------------------------------------------------------------------

/// "1 sessions", "1 time(s)", "(s)": a count that does not agree with its noun.
fn bad_plural(text: &str) -> Option<String> {
    if text.contains("(s)") {
        return Some("(s)".into());
    }
    let words: Vec<&str> = text.split_whitespace().collect();
    words.windows(2).find_map(|w| {
        let n = w[0].trim_start_matches(['(', '[']);
        let noun = w[1].trim_end_matches([',', ';', ')', '.', ':']);
        (n == "1" && noun.len() > 3 && noun.ends_with('s') && !noun.ends_with("ss"))
            .then(|| format!("{} {}", w[0], w[1]))
    })
}

#[test]
fn counts_of_one_read_in_the_singular() {
    let env = Env::new();
    let sid = env.session("one of each", &[]);
    env.maos_json(&["session", "start"]);
    env.agent(None, "solo", "t");
    env.maos_json(&["pause"]);
    env.maos_json(&["resume"]);
    let brief = stdout(&env.maos(&["brief"]));
    assert!(brief.contains("resumed 1 time"), "{brief}");
    assert_eq!(bad_plural(&brief), None, "{brief}");

    let file = env.root().join("one.json");
    let out = env.maos(&["export", &sid, "-o", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(bad_plural(&stdout(&out)), None, "{}", stdout(&out));

    let other = env.make_project("other");
    let out = env.maos_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.contains("1 agent"), "{text}");
    assert_eq!(bad_plural(&text), None, "{text}");
}

// ---- 6. The man page ---------------------------------------------------------------------

#[test]
fn the_man_page_name_says_maos_once() {
    let env = Env::new();
    let out = env.maos(&["man"]);
    assert!(out.status.success(), "{}", describe(&out));
    let roff = stdout(&out);
    let name = roff
        .split(".SH NAME\n")
        .nth(1)
        .and_then(|s| s.lines().next())
        .unwrap_or_else(|| panic!("no NAME section: {roff}"));
    assert!(name.starts_with("maos \\- "), "{name}");
    assert!(!name.contains("maos:"), "{name}");
    assert!(!name.contains("\\- maos"), "{name}");
}

// ---- 7. export -o ------------------------------------------------------------------------

#[test]
fn export_refuses_to_overwrite_a_file_like_backup() {
    let env = Env::new();
    env.session("exported", &[]);
    let file = env.root().join("mine.json");
    std::fs::write(&file, "my own notes\n").expect("write");
    let out = env.maos(&["export", "-o", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = stderr(&out);
    assert!(err.contains("exists"), "{err}");
    assert_clean_line("export", &err);
    assert_eq!(
        std::fs::read_to_string(&file).expect("read"),
        "my own notes\n",
        "the file is untouched"
    );
    // Backup says the same of the same file.
    let out = env.maos(&["backup", "-o", file.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    // A new name is written.
    let fresh = env.root().join("fresh.json");
    env.maos_json(&["export", "-o", fresh.to_str().expect("utf-8")]);
    assert!(fresh.exists());
}

// ---- 8. maos pause after the last window ---------------------------------------------------

#[test]
fn pause_after_the_last_window_holds_the_next_one() {
    let env = Env::new();
    env.hook(
        "claude",
        &input(&env, "w1", "SessionStart", json!({"source": "startup"})),
    );
    assert_ne!(write(&env, "w1", &env.project.join("src/a.rs")).0, "deny");
    env.hook(
        "claude",
        &input(&env, "w1", "SessionEnd", json!({"reason": "exit"})),
    );
    let ps = env.maos_json(&["ps", "--all"]);
    assert_eq!(ps[0]["state"], "completed", "{ps}");

    let out = env.maos(&["pause", "--reason", "lunch break"]);
    assert!(out.status.success(), "{}", describe(&out));
    let said = stdout(&out);
    assert!(said.contains("next"), "says what it holds: {said}");

    // The next window's first write is held, with the reason.
    env.hook(
        "claude",
        &input(&env, "w2", "SessionStart", json!({"source": "startup"})),
    );
    let (decision, reason) = write(&env, "w2", &env.project.join("src/b.rs"));
    assert_eq!(decision, "deny", "{reason}");
    assert!(reason.contains("lunch break"), "{reason}");

    // Resumed, it writes.
    let out = env.maos(&["resume"]);
    assert!(out.status.success(), "{}", describe(&out));
    let (decision, reason) = write(&env, "w2", &env.project.join("src/b.rs"));
    assert_ne!(decision, "deny", "{reason}");
    assert!(locked(&env).contains(&"src/b.rs".to_string()));
}

#[test]
fn pause_of_a_named_ended_session_says_what_to_do() {
    let env = Env::new();
    let sid = env.session("done", &[]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["session", "complete"]);
    let f = env.maos_fail(&["pause", &sid]);
    assert!(f.message.contains("maos pause"), "{f:?}");
    assert_clean_line("pause", &f.message);
}
