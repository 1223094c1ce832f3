//! Which project a command or a hook works on (issue 15): a git repository's main worktree,
//! else the nearest directory with `.maos/` (`maos init`); never `$HOME` or `/` by themselves,
//! never `~/.claude/`'s directory; reading an unknown project creates nothing. Through the real
//! `maos` and `maosd`, the commands run from a directory as an agent's shell runs them.

use std::path::Path;
use std::process::Output;

use maos_tests::{Env, Value, describe, json};

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// `maos --json ARGS` run from `cwd`, which must fail: (exit code, error code, message).
fn fails_at(env: &Env, cwd: &Path, args: &[&str]) -> (Option<i32>, String, String) {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = env.maos_at(cwd, &all);
    assert!(
        !out.status.success(),
        "maos {args:?} succeeded: {}",
        describe(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("maos {args:?}: not JSON ({e}): {}", describe(&out)));
    (
        out.status.code(),
        v["error"]["code"].as_str().unwrap_or_default().to_string(),
        v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

/// `maos --json ARGS` run from `cwd`, which must succeed.
fn json_at(env: &Env, cwd: &Path, args: &[&str]) -> Value {
    let mut all = vec!["--json"];
    all.extend_from_slice(args);
    let out = env.maos_at(cwd, &all);
    assert!(out.status.success(), "maos {args:?}: {}", describe(&out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("maos {args:?}: not JSON ({e}): {}", describe(&out)))
}

/// The project directories the daemon has under `$MAOS_HOME/projects/`.
fn project_dirs(env: &Env) -> Vec<String> {
    match std::fs::read_dir(env.home.join("projects")) {
        Ok(d) => d
            .filter_map(Result::ok)
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect(),
        Err(_) => Vec::new(),
    }
}

#[test]
fn reading_a_project_where_nothing_was_recorded_creates_nothing() {
    let env = Env::new();
    // Lists are empty...
    assert_eq!(json_at(&env, &env.project, &["ps"]), json!([]));
    assert_eq!(json_at(&env, &env.project, &["session", "list"]), json!([]));
    assert_eq!(json_at(&env, &env.project, &["history"]), json!([]));
    let locks = json_at(&env, &env.project, &["lock", "list"]);
    assert_eq!(locks["locks"], json!([]), "{locks}");
    let out = env.maos_at(&env.project, &["--json", "events"]);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        describe(&out)
    );
    // ...and what needs a session says there is no project yet.
    for args in [
        &["status"][..],
        &["brief"],
        &["session", "show"],
        &["backup"],
    ] {
        let (exit, code, message) = fails_at(&env, &env.project, args);
        assert_eq!(
            (exit, code.as_str()),
            (Some(1), "not_found"),
            "{args:?}: {message}"
        );
        assert!(
            message.starts_with(&format!(
                "no maos project at {}: nothing has been recorded there yet",
                Env::project_root(&env.project)
            )),
            "{args:?}: {message}"
        );
    }
    // `doctor` does not count it a failure.
    let out = env.maos_at(&env.project, &["doctor"]);
    assert!(
        stdout(&out).contains("--    database: no maos project at"),
        "{}",
        describe(&out)
    );
    assert!(
        project_dirs(&env).is_empty(),
        "reads created {:?}",
        project_dirs(&env)
    );
    assert!(!env.db_path_of(&env.project).exists());

    // The first session makes the project; reading it then works.
    env.session("work", &[]);
    assert_eq!(project_dirs(&env).len(), 1);
    let ps = json_at(&env, &env.project, &["ps"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(1), "{ps}");
}

#[test]
fn outside_git_a_directory_is_a_project_only_once_maos_init_marks_it() {
    let env = Env::new();
    let a = env.root().join("loose/a");
    let b = a.join("b");
    std::fs::create_dir_all(&b).expect("dirs");

    // Nothing marks a project: refused with the way out, and nothing is created.
    let (exit, code, message) = fails_at(&env, &b, &["session", "create", "--objective", "x"]);
    assert_eq!((exit, code.as_str()), (Some(1), "not_found"), "{message}");
    assert!(
        message.contains(&format!("no maos project at {}", b.display()))
            && message.contains("maos init"),
        "{message}"
    );
    assert!(project_dirs(&env).is_empty());

    // `maos init` in `a` makes it one; `a/b` then belongs to it (not a second project).
    let out = env.maos_at(&a, &["init"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(a.join(".maos").is_dir());
    assert!(
        stdout(&out).contains(&format!("{} is now a maos project", a.display())),
        "{}",
        describe(&out)
    );
    let made = json_at(&env, &b, &["session", "create", "--objective", "from b"]);
    let ps = json_at(&env, &a, &["ps"]);
    assert_eq!(ps[0]["id"], made["id"], "{ps}");
    assert_eq!(project_dirs(&env).len(), 1);

    // Again: nothing to do. In a git repository: the repository is the project already.
    let again = json_at(&env, &a, &["init"]);
    assert_eq!(again["created"], json!(false), "{again}");
    let inside = env.project.join("src");
    std::fs::create_dir_all(&inside).expect("src");
    let git = json_at(&env, &inside, &["init"]);
    assert_eq!(git["created"], json!(false), "{git}");
    assert!(!inside.join(".maos").exists());
    assert!(
        git["message"]
            .as_str()
            .is_some_and(|m| m.contains("git repository")),
        "{git}"
    );
}

#[test]
fn home_is_never_a_project_by_itself_even_with_claude_settings_or_a_dotfiles_repository() {
    let env = Env::new();
    let home = env.root().join("user");
    // `install-hooks --user` creates ~/.claude/; a dotfiles repository puts .git in $HOME.
    let out = env.maos_at(&home, &["install-hooks", "--user"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(home.join(".claude/settings.json").is_file());
    std::fs::create_dir_all(home.join(".git")).expect("dotfiles .git");
    let work = home.join("notes/today");
    std::fs::create_dir_all(&work).expect("work dir");

    for cwd in [&work, &home] {
        let (exit, code, message) = fails_at(&env, cwd, &["session", "create", "--objective", "x"]);
        assert_eq!((exit, code.as_str()), (Some(1), "not_found"), "{message}");
        assert!(
            message.contains(&format!("no maos project at {}", cwd.display())),
            "{message}"
        );
    }
    assert!(project_dirs(&env).is_empty(), "{:?}", project_dirs(&env));
    // Said on purpose, $HOME is one.
    let out = env.maos_at(&home, &["init"]);
    assert!(out.status.success(), "{}", describe(&out));
    let made = json_at(&env, &work, &["session", "create", "--objective", "home"]);
    let ps = json_at(&env, &home, &["ps"]);
    assert_eq!(ps[0]["id"], made["id"], "{ps}");
}

#[test]
fn a_hook_outside_every_project_makes_the_cli_directory_one_but_never_home() {
    let env = Env::new();
    let dir = env.root().join("scratch");
    std::fs::create_dir_all(dir.join("sub")).expect("scratch");
    let start = json!({"session_id": "s-1", "cwd": dir, "hook_event_name": "SessionStart", "source": "startup"});
    let out = env.hook_at(&dir, &["hook"], start.to_string().into_bytes(), &[], false);
    assert!(out.status.success(), "{}", describe(&out));
    let said: Value = serde_json::from_slice(&out.stdout).expect("hook answer");
    let message = said["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!("made {} a maos project", dir.display())),
        "{said}"
    );
    assert!(dir.join(".maos").is_dir());
    // The window's agent is in that project, seen from below it too.
    let ps = json_at(&env, &dir.join("sub"), &["ps"]);
    assert_eq!(ps[0]["agents"][0]["role"], "claude", "{ps}");
    // The next call says nothing more.
    let prompt = json!({"session_id": "s-1", "cwd": dir, "hook_event_name": "UserPromptSubmit", "prompt": "hello"});
    let out = env.hook_at(&dir, &["hook"], prompt.to_string().into_bytes(), &[], false);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !stdout(&out).contains("systemMessage"),
        "{}",
        describe(&out)
    );

    // From $HOME: the call goes through unrecorded, the user is told why, nothing is created.
    let home = env.root().join("user");
    let start = json!({"session_id": "s-2", "cwd": home, "hook_event_name": "SessionStart"});
    let out = env.hook_at(&home, &["hook"], start.to_string().into_bytes(), &[], false);
    assert!(out.status.success(), "{}", describe(&out));
    let said: Value = serde_json::from_slice(&out.stdout).expect("hook answer");
    assert!(
        said["systemMessage"].as_str().is_some_and(|m| m
            .contains("never makes your home directory")
            && m.contains("not enforced")),
        "{said}"
    );
    assert!(!home.join(".maos").exists());
    let write = json!({"session_id": "s-2", "cwd": home, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_input": {"file_path": home.join("a.txt"), "content": "x"}});
    let out = env.hook_at(&home, &["hook"], write.to_string().into_bytes(), &[], false);
    assert!(
        out.status.success() && out.stdout.is_empty(),
        "{}",
        describe(&out)
    );
    assert_eq!(project_dirs(&env).len(), 1, "{:?}", project_dirs(&env));
}

/// Where the hook cannot write the marker (a read-only directory), the directory is the
/// project all the same: the window is recorded, locks hold, and its start says how to see it.
#[cfg(target_os = "linux")]
#[test]
fn a_hook_in_a_read_only_directory_still_records_the_window() {
    use std::io::Write;
    use std::os::unix::fs::PermissionsExt;
    let env = Env::new();
    env.maos_json(&["daemon", "start"]);
    let dir = env.root().join("readonly");
    std::fs::create_dir_all(&dir).expect("dir");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let start = json!({"session_id": "s-ro", "cwd": dir, "hook_event_name": "SessionStart"});
    let mut cmd = env.maos_cmd_at(&dir, &["hook"]);
    maos_tests::without_dac_override(&mut cmd);
    cmd.stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("maos hook");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(start.to_string().as_bytes())
        .expect("input");
    let out = child.wait_with_output().expect("hook output");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).expect("chmod back");
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!dir.join(".maos").exists());
    let said: Value = serde_json::from_slice(&out.stdout).expect("hook answer");
    let message = said["systemMessage"].as_str().unwrap_or_default();
    assert!(
        message.contains(&format!(
            "recording this window in the project {}",
            dir.display()
        )) && message.contains(&format!("maos --project {} ps", dir.display())),
        "{said}"
    );
    let ps = env.maos_json_in(&dir, &["ps"]);
    assert_eq!(ps[0]["agents"][0]["role"], "claude", "{ps}");
}

/// `install-hooks` for a project outside every project makes the current directory one and
/// says so; in `$HOME` it refuses and writes nothing (`--user` is for every project).
#[test]
fn install_hooks_outside_every_project_marks_the_directory_but_never_home() {
    let env = Env::new();
    let dir = env.root().join("loose");
    std::fs::create_dir_all(&dir).expect("dir");
    let out = env.maos_at(&dir, &["install-hooks"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(dir.join(".maos").is_dir() && dir.join(".claude/settings.json").is_file());
    assert!(
        String::from_utf8_lossy(&out.stderr)
            .contains(&format!("made {} a maos project", dir.display())),
        "{}",
        describe(&out)
    );

    let home = env.root().join("user");
    let (exit, code, message) = fails_at(&env, &home, &["install-hooks"]);
    assert_eq!((exit, code.as_str()), (Some(2), "bad_request"), "{message}");
    assert!(
        message.contains("never makes your home directory") && message.contains("--user"),
        "{message}"
    );
    assert!(!home.join(".maos").exists() && !home.join(".claude").exists());
}
