//! `maos install-hooks --gemini`: Gemini CLI's hooks in `.gemini/settings.json` (or the
//! user's), the project folder trusted in `~/.gemini/trustedFolders.json` only with consent
//! (`--yes`; without a terminal and without it, one line says how), `doctor` judging both,
//! `uninstall-hooks --gemini` removing exactly what install added, and broken input refused
//! with nothing changed. Also `maos hook --cli gemini` fed Gemini CLI's own input.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;

use maos_tests::doctor::check;
use maos_tests::{Env, Value, json};

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file")).expect("JSON")
}

fn settings(env: &Env) -> PathBuf {
    env.project.join(".gemini/settings.json")
}

/// `~/.gemini/trustedFolders.json` of the test's HOME.
fn trust_file(env: &Env) -> PathBuf {
    env.root().join("user/.gemini/trustedFolders.json")
}

fn root(env: &Env) -> String {
    Env::project_root(&env.project)
}

/// `maos --json doctor` with this build's `maos` on PATH: (exit code, the Gemini CLI checks).
fn doctor(env: &Env) -> (Option<i32>, Vec<Value>) {
    let bin = maos_tests::maos_bin();
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    cmd.env("PATH", bin.parent().expect("bin dir"));
    let out = cmd.output().expect("maos doctor");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let gemini = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"].as_str().is_some_and(|n| n.starts_with("Gemini")))
        .cloned()
        .collect();
    (out.status.code(), gemini)
}

/// With `--yes`: hooks for each of Gemini CLI's events, anchored tool matchers, timeout in
/// milliseconds; the folder trusted next to the user's own rules; doctor content; and
/// uninstall gives back both files as they were.
#[test]
fn install_with_yes_trusts_the_folder_and_uninstall_removes_exactly_that() {
    let env = Env::new();
    let other = json!({"/somewhere/else": "TRUST_PARENT"});
    std::fs::create_dir_all(trust_file(&env).parent().expect("dir")).expect("mkdir");
    std::fs::write(trust_file(&env), other.to_string()).expect("write");
    std::fs::create_dir_all(env.project.join(".gemini")).expect("mkdir");
    let mine = json!({"model": {"name": "gemini-2.5-pro"},
                      "hooks": {"Notification": [{"hooks": [{"type": "command", "command": "notify"}]}]}});
    std::fs::write(settings(&env), mine.to_string()).expect("write");

    let out = env.maos_json(&["install-hooks", "--gemini", "--yes"]);
    let message = out["message"].as_str().expect("message");
    assert!(message.contains("trusted in"), "{message}");
    let v = read(&settings(&env));
    assert_eq!(v["model"], mine["model"]);
    assert_eq!(v["hooks"]["Notification"], mine["hooks"]["Notification"]);
    let mut events: Vec<&String> = v["hooks"].as_object().expect("hooks").keys().collect();
    events.sort();
    assert_eq!(
        events,
        [
            "AfterAgent",
            "AfterTool",
            "BeforeAgent",
            "BeforeTool",
            "Notification",
            "PreCompress",
            "SessionEnd",
            "SessionStart"
        ]
    );
    let before = &v["hooks"]["BeforeTool"][0];
    assert_eq!(
        before["matcher"],
        "^(write_file|replace|run_shell_command|mcp_maos_.*)$"
    );
    assert_eq!(before["hooks"][0]["command"], "maos hook --cli gemini");
    assert_eq!(before["hooks"][0]["timeout"], 10000);
    assert_eq!(v["hooks"]["PreCompress"][0]["matcher"], "manual");
    let trust = read(&trust_file(&env));
    assert_eq!(trust["/somewhere/else"], "TRUST_PARENT");
    assert_eq!(trust[root(&env)], "TRUST_FOLDER", "{trust}");

    let (_, checks) = doctor(&env);
    assert_eq!(
        check(&checks, "Gemini CLI hooks")["level"],
        "ok",
        "{checks:?}"
    );
    assert_eq!(
        check(&checks, "Gemini CLI trust")["level"],
        "ok",
        "{checks:?}"
    );

    // Again: nothing doubled, the trust untouched.
    env.maos_json(&["install-hooks", "--gemini", "--yes"]);
    assert_eq!(read(&settings(&env)), v);
    assert_eq!(read(&trust_file(&env)), trust);

    env.maos_json(&["uninstall-hooks", "--gemini"]);
    assert_eq!(read(&settings(&env)), mine);
    assert_eq!(read(&trust_file(&env)), other);
}

/// No terminal, no `--yes`: the hooks are installed, the folder is not trusted, one line says
/// so with the command that fixes it, and doctor fails naming that command. A trust rule the
/// user wrote is theirs: uninstall leaves it.
#[test]
fn without_consent_the_folder_is_not_trusted_and_doctor_names_the_fix() {
    let env = Env::new();
    let out = env.maos_json(&["install-hooks", "--gemini"]);
    let message = out["message"].as_str().expect("message");
    let line = message
        .lines()
        .find(|l| l.contains("will not run"))
        .unwrap_or_else(|| panic!("no word on trust: {message}"));
    assert!(
        line.contains(&root(&env)) && line.contains("`maos install-hooks --gemini --yes`"),
        "{line}"
    );
    assert!(settings(&env).exists());
    assert!(!trust_file(&env).exists(), "trusted without consent");
    let (code, checks) = doctor(&env);
    assert_eq!(code, Some(1), "{checks:?}");
    let trust = check(&checks, "Gemini CLI trust");
    assert_eq!(trust["level"], "fail", "{trust}");
    let detail = trust["detail"].as_str().expect("detail");
    assert!(
        detail.contains("not trusted") && detail.contains("`maos install-hooks --gemini --yes`"),
        "{detail}"
    );
    // The user trusts the folder themselves: doctor is content, uninstall leaves the rule.
    let rule = json!({ root(&env): "TRUST_FOLDER" });
    std::fs::create_dir_all(trust_file(&env).parent().expect("dir")).expect("mkdir");
    std::fs::write(trust_file(&env), rule.to_string()).expect("write");
    let (code, checks) = doctor(&env);
    assert_eq!(check(&checks, "Gemini CLI trust")["level"], "ok");
    assert_eq!(code, Some(0), "{checks:?}");
    env.maos_json(&["uninstall-hooks", "--gemini"]);
    assert_eq!(read(&trust_file(&env)), rule);
    // Not installed: trust is not judged at all.
    let (_, checks) = doctor(&env);
    assert!(
        checks.iter().all(|c| c["check"] != "Gemini CLI trust"),
        "{checks:?}"
    );
}

/// Broken input to install or uninstall: a one-line error naming the file, and neither file
/// changed.
#[test]
fn broken_settings_or_trust_files_are_refused_and_nothing_changes() {
    let cases: [(&str, &str, &str, &str); 5] = [
        ("{ not json", "{}", "settings.json", "not valid JSON"),
        ("[1]", "{}", "settings.json", "not a JSON object"),
        (
            r#"{"hooks": [1]}"#,
            "{}",
            "settings.json",
            "\"hooks\" is not an object",
        ),
        ("{}", "{ nope", "trustedFolders.json", "not valid JSON"),
        (
            "{}",
            r#"{"/x": "MAYBE"}"#,
            "trustedFolders.json",
            "not TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST",
        ),
    ];
    for (settings_text, trust_text, named, want) in cases {
        let env = Env::new();
        std::fs::create_dir_all(env.project.join(".gemini")).expect("mkdir");
        std::fs::write(settings(&env), settings_text).expect("write");
        std::fs::create_dir_all(trust_file(&env).parent().expect("dir")).expect("mkdir");
        std::fs::write(trust_file(&env), trust_text).expect("write");
        // A `hooks` that is not an object has no maos hook to uninstall: that is no error.
        let uninstall = !settings_text.contains("hooks");
        let runs: &[&[&str]] = if uninstall {
            &[
                &["install-hooks", "--gemini", "--yes"],
                &["uninstall-hooks", "--gemini"],
            ]
        } else {
            &[&["install-hooks", "--gemini", "--yes"]]
        };
        for args in runs {
            let f = env.maos_fail(args);
            assert_eq!(f.exit, 1, "{args:?}");
            assert!(
                f.message.contains(named) && f.message.contains(want),
                "{args:?} {settings_text} {trust_text}: {}",
                f.message
            );
            assert!(!f.message.contains('\n'), "{}", f.message);
            assert_eq!(
                std::fs::read_to_string(settings(&env)).expect("read"),
                settings_text
            );
            assert_eq!(
                std::fs::read_to_string(trust_file(&env)).expect("read"),
                trust_text
            );
        }
    }
}

/// maos's own note of the folders it trusted, broken: install and uninstall refuse it in one
/// line and change nothing.
#[test]
fn a_broken_note_of_maos_trust_is_refused_and_nothing_changes() {
    let env = Env::new();
    let note = env.home.join("gemini-trust.json");
    std::fs::create_dir_all(&env.home).expect("mkdir");
    std::fs::write(&note, "{ broken").expect("write");
    for args in [
        &["install-hooks", "--gemini", "--yes"][..],
        &["uninstall-hooks", "--gemini"][..],
    ] {
        let f = env.maos_fail(args);
        assert!(
            f.message.contains("gemini-trust.json") && f.message.contains("not valid JSON"),
            "{args:?}: {}",
            f.message
        );
        assert!(!settings(&env).exists(), "{args:?}");
        assert!(!trust_file(&env).exists(), "{args:?}");
        assert_eq!(std::fs::read_to_string(&note).expect("read"), "{ broken");
    }
}

/// `maos hook --cli gemini` with `input` on stdin (no trailing newline, as Gemini CLI writes
/// it) from `cwd`: its stdout as JSON (`Null` when empty).
fn hook(env: &Env, cwd: &Path, input: &Value) -> Value {
    hook_with(env, cwd, input, &[])
}

/// [`hook`] with `extra` variables in its environment.
fn hook_with(env: &Env, cwd: &Path, input: &Value, extra: &[(&str, &str)]) -> Value {
    let mut cmd = env.command(&maos_tests::maos_bin());
    cmd.envs(extra.iter().copied())
        .current_dir(cwd)
        .args(["hook", "--cli", "gemini"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("maos hook");
    let text = input.to_string();
    assert!(!text.ends_with('\n'));
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("write the input");
    let out = child.wait_with_output().expect("maos hook's output");
    assert!(out.status.success(), "{out:?}");
    let stdout = String::from_utf8_lossy(&out.stdout);
    if stdout.trim().is_empty() {
        Value::Null
    } else {
        serde_json::from_str(&stdout).unwrap_or_else(|e| panic!("{e}: {stdout}"))
    }
}

/// Gemini CLI's own input reaches the daemon: a `write_file` with a path relative to the
/// call's `cwd` (a subdirectory) locks the file by its project path, the write is recorded
/// after the call, and another window's `replace` of that file is denied in Gemini CLI's
/// terms, naming the file.
#[test]
fn geminis_own_input_locks_relative_paths_and_is_denied_in_its_terms() {
    let env = Env::new();
    let sub = env.project.join("src");
    std::fs::create_dir_all(&sub).expect("mkdir");
    let call = |session: &str, event: &str, tool: &str, input: Value| {
        json!({"session_id": session, "transcript_path": "/t", "cwd": sub,
               "hook_event_name": event, "timestamp": "2026-11-25T22:00:00.000Z",
               "tool_name": tool, "tool_input": input})
    };
    let write = json!({"file_path": "lib.rs", "content": "fn main() {}\n"});
    let first = hook(
        &env,
        &sub,
        &call("g-one", "BeforeTool", "write_file", write.clone()),
    );
    assert_eq!(first, Value::Null, "allowed without a word");
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(locks["locks"][0]["path"], "src/lib.rs", "{locks}");
    let second = hook(
        &env,
        &sub,
        &call(
            "g-two",
            "BeforeTool",
            "replace",
            json!({"file_path": "lib.rs", "instruction": "x", "old_string": "fn",
                   "new_string": "pub fn"}),
        ),
    );
    assert_eq!(second["decision"], "deny", "{second}");
    let reason = second["reason"].as_str().expect("reason");
    assert!(reason.starts_with("maos: src/lib.rs"), "{reason}");
    assert_eq!(second.as_object().map(|o| o.len()), Some(2), "{second}");
    hook(&env, &sub, &call("g-one", "AfterTool", "write_file", write));
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "src/lib.rs"
            && m["data"]["tool"] == "write_file" && m["data"]["bytes"] == 13),
        "{modified:?}"
    );
    let denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(denied.len(), 1, "{denied:?}");
}

/// On a terminal (a pty from util-linux `script`) install asks before trusting the folder:
/// "y" trusts it, anything else leaves it untrusted and says how to trust it later.
#[test]
fn on_a_terminal_install_asks_before_trusting() {
    if !maos_tests::have_tool("script", "util-linux") {
        return;
    }
    for (answer, trusted) in [("y\n", true), ("n\n", false)] {
        let env = Env::new();
        let maos = maos_tests::maos_bin();
        // The answer is piped into the pty; a hang fails the test at the deadline.
        let mut cmd = env.command(Path::new("sh"));
        cmd.args([
            "-c",
            r#"printf '%s' "$ANSWER" | script -qec "$MAOS install-hooks --gemini" /dev/null"#,
        ])
        .env("ANSWER", answer)
        .env("MAOS", &maos);
        let out = maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT);
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(out.status.success(), "{out:?}");
        assert!(
            text.contains("Gemini CLI runs hooks only in folders you trust. Trust"),
            "not asked: {text}"
        );
        assert!(settings(&env).exists(), "{text}");
        if trusted {
            assert_eq!(
                read(&trust_file(&env))[root(&env)],
                "TRUST_FOLDER",
                "{text}"
            );
        } else {
            assert!(!trust_file(&env).exists(), "{text}");
            assert!(text.contains("will not run these hooks until"), "{text}");
        }
    }
}

/// No daemon to ask: the write goes ahead and the user is told, in a form Gemini CLI takes
/// (`systemMessage`, no decision); with `MAOS_HOOK_FAIL=closed` it is denied in Gemini
/// CLI's terms instead. Either way the hook exits 0 with one JSON object.
#[test]
fn an_unreachable_daemon_fails_open_or_closed_in_geminis_terms() {
    let env = Env::new();
    let input = json!({"session_id": "g", "cwd": env.project, "hook_event_name": "BeforeTool",
                       "tool_name": "write_file",
                       "tool_input": {"file_path": "a.txt", "content": "x"}});
    let open = hook_with(&env, &env.project, &input, &[("MAOS_NO_AUTOSTART", "1")]);
    let message = open["systemMessage"]
        .as_str()
        .unwrap_or_else(|| panic!("{open}"));
    assert!(message.contains("not enforced"), "{message}");
    assert!(open.get("decision").is_none(), "{open}");
    let closed = hook_with(
        &env,
        &env.project,
        &input,
        &[("MAOS_NO_AUTOSTART", "1"), ("MAOS_HOOK_FAIL", "closed")],
    );
    assert_eq!(closed["decision"], "deny", "{closed}");
    assert!(
        closed["reason"]
            .as_str()
            .is_some_and(|r| r.contains("MAOS_HOOK_FAIL=closed")),
        "{closed}"
    );
    assert!(env.daemons().is_empty(), "a daemon was started");
}

/// `--user`: the hooks go into `~/.gemini/settings.json`, the project folder is trusted all
/// the same (Gemini CLI runs user hooks only in trusted folders too), and the trust maos added
/// stays while project hooks still need it.
#[test]
fn user_hooks_trust_the_folder_and_keep_it_while_any_maos_hook_is_left() {
    let env = Env::new();
    let user_settings = env.root().join("user/.gemini/settings.json");
    env.maos_json(&["install-hooks", "--gemini", "--user", "--yes"]);
    assert!(
        read(&user_settings)["hooks"]["BeforeTool"].is_array(),
        "{}",
        user_settings.display()
    );
    assert!(!settings(&env).exists());
    assert_eq!(read(&trust_file(&env))[root(&env)], "TRUST_FOLDER");
    let (code, checks) = doctor(&env);
    assert_eq!(
        check(&checks, "Gemini CLI trust")["level"],
        "ok",
        "{checks:?}"
    );
    assert_eq!(code, Some(0), "{checks:?}");
    // Project hooks too; removing the user's keeps the trust the project's still need.
    env.maos_json(&["install-hooks", "--gemini"]);
    env.maos_json(&["uninstall-hooks", "--gemini", "--user"]);
    assert_eq!(read(&trust_file(&env))[root(&env)], "TRUST_FOLDER");
    env.maos_json(&["uninstall-hooks", "--gemini"]);
    assert!(
        !trust_file(&env).exists(),
        "install created it: uninstall removes it"
    );
}
