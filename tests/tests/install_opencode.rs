//! `maos install-hooks --opencode`: maos's plugin written to `.opencode/plugins/maos.js` (or the
//! user's `$XDG_CONFIG_HOME/opencode/plugins/maos.js`), `doctor` judging it, `uninstall-hooks
//! --opencode` removing only maos's file, a file of that name that is not maos's left alone.
//! Also `maos hook --cli opencode` fed the plugin's input, hostile or broken.

use std::path::{Path, PathBuf};

use maos_tests::{Env, Value, denial_reason, hook_input, json};

/// The plugin this build embeds (the source file).
fn plugin() -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../maos-client/src/opencode_plugin.js");
    std::fs::read_to_string(path).expect("the plugin's source")
}

fn file(env: &Env) -> PathBuf {
    env.project.join(".opencode/plugins/maos.js")
}

/// `maos --json doctor` with this build's `maos` on PATH: (exit code, the OpenCode checks).
fn doctor(env: &Env) -> (Option<i32>, Vec<Value>) {
    let bin = maos_tests::maos_bin();
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    cmd.env("PATH", bin.parent().expect("bin dir"));
    let out = cmd.output().expect("maos doctor");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let checks = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "OpenCode plugin")
        .cloned()
        .collect();
    (out.status.code(), checks)
}

/// Install writes the plugin byte for byte, a second install changes nothing, doctor finds
/// it; an older maos's plugin is reported and replaced; uninstall removes the file and the
/// directories it left empty, and doctor says so.
#[test]
fn install_writes_the_plugin_and_uninstall_removes_it() {
    let env = Env::new();
    let out = env.maos_json(&["install-hooks", "--opencode"]);
    let path = file(&env);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("installed in") && m.contains(".opencode/plugins/maos.js")),
        "{out}"
    );
    assert_eq!(
        std::fs::read_to_string(&path).expect("the plugin"),
        plugin()
    );
    let mtime = std::fs::metadata(&path)
        .and_then(|m| m.modified())
        .expect("mtime");
    let again = env.maos_json(&["install-hooks", "--opencode"]);
    assert!(
        again["message"]
            .as_str()
            .is_some_and(|m| m.contains("nothing changed")),
        "{again}"
    );
    assert_eq!(
        std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .expect("mtime"),
        mtime
    );
    let (_, checks) = doctor(&env);
    assert!(
        matches!(&checks[..], [c] if c["level"] == "ok"
            && c["detail"].as_str().is_some_and(|d| d.contains(".opencode/plugins/maos.js"))),
        "{checks:?}"
    );

    // Another maos's plugin (an older version): doctor says to install again; install does.
    std::fs::write(&path, "// maos-opencode-plugin 0: an older one\n").expect("older");
    let (_, checks) = doctor(&env);
    assert!(
        checks.iter().any(|c| c["level"] == "warn"
            && c["detail"]
                .as_str()
                .is_some_and(|d| d.contains("install-hooks --opencode"))),
        "{checks:?}"
    );
    env.maos_json(&["install-hooks", "--opencode"]);
    assert_eq!(
        std::fs::read_to_string(&path).expect("the plugin"),
        plugin()
    );

    // Another plugin of the user's beside it stays.
    let theirs = path.with_file_name("theirs.js");
    std::fs::write(&theirs, "export const X = async () => ({})\n").expect("theirs");
    let out = env.maos_json(&["uninstall-hooks", "--opencode"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("removed from")),
        "{out}"
    );
    assert!(!path.exists());
    assert!(theirs.exists());
    std::fs::remove_file(&theirs).expect("remove theirs");
    env.maos_json(&["install-hooks", "--opencode"]);
    env.maos_json(&["uninstall-hooks", "--opencode"]);
    // The directories install made, empty now, are gone too.
    assert!(!env.project.join(".opencode").exists());
    let (_, checks) = doctor(&env);
    assert!(
        matches!(&checks[..], [c] if c["level"] == "info"
            && c["detail"].as_str().is_some_and(|d| d.starts_with("not installed"))),
        "{checks:?}"
    );
    let out = env.maos_json(&["uninstall-hooks", "--opencode"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("no maos plugin")),
        "{out}"
    );
}

/// A `maos.js` that is not maos's: install refuses, naming what to do, and neither install nor
/// uninstall touches it.
#[test]
fn a_maos_js_that_is_not_maoss_is_left_alone() {
    let env = Env::new();
    let path = file(&env);
    std::fs::create_dir_all(path.parent().expect("dir")).expect("dir");
    let theirs = "export const Mine = async () => ({})\n";
    std::fs::write(&path, theirs).expect("theirs");
    let out = env.maos(&["install-hooks", "--opencode"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("is not maos's plugin") && err.contains("move it away"),
        "{err}"
    );
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    let out = env.maos_json(&["uninstall-hooks", "--opencode"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("left unchanged")),
        "{out}"
    );
    assert_eq!(std::fs::read_to_string(&path).expect("theirs"), theirs);
}

/// `--user`: the plugin goes to `$XDG_CONFIG_HOME/opencode/plugins/maos.js`.
#[test]
fn install_user_writes_the_users_plugin() {
    let env = Env::new();
    let config = env.root().join("config");
    let mut cmd = env.maos_cmd_in(&env.project, &["install-hooks", "--opencode", "--user"]);
    cmd.env("XDG_CONFIG_HOME", &config);
    let out = cmd.output().expect("install");
    assert!(out.status.success(), "{out:?}");
    let path = config.join("opencode/plugins/maos.js");
    assert_eq!(
        std::fs::read_to_string(&path).expect("the plugin"),
        plugin()
    );
    assert!(!file(&env).exists());
    let mut cmd = env.maos_cmd_in(&env.project, &["uninstall-hooks", "--opencode", "--user"]);
    cmd.env("XDG_CONFIG_HOME", &config);
    assert!(cmd.output().expect("uninstall").status.success());
    assert!(!path.exists());
}

/// What the plugin sends, fed to `maos hook --cli opencode` directly: OpenCode's `write` of a
/// file another agent holds is denied in the plugin's form; broken input is one line on
/// stderr, exit 1 (the plugin then lets the call through and tells the person); a write
/// naming no file, or a path outside the project, locks nothing of another project.
#[test]
fn the_hook_reads_the_plugins_input_and_refuses_broken_input() {
    let env = Env::new();
    env.session("s", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns a.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "a.txt", "--agent", &holder]);
    let input = hook_input(
        &env.project,
        "ses_window",
        "PreToolUse",
        json!({"tool_name": "write", "tool_input": {"filePath": "a.txt", "content": "x"},
               "tool_use_id": "call_0"}),
    );
    let out = env.hook("opencode", &input);
    let answer: Value = serde_json::from_slice(&out.stdout).expect("JSON answer");
    assert_eq!(answer["decision"], "deny", "{answer}");
    let reason = denial_reason(&out);
    assert!(
        reason.starts_with("maos: a.txt") && reason.contains("holder ("),
        "{reason}"
    );
    let denied = env.events(&["--type", "tool_denied"]);
    assert!(
        matches!(&denied[..], [d] if d["data"]["tool"] == "Write"),
        "{denied:?}"
    );

    for bad in [
        b"not json".to_vec(),
        br#"{"hook_event_name":"PreToolUse"}"#.to_vec(),
        br#"{"hook_event_name":"PreToolUse","session_id":"s","tool_name":"edit","tool_input":{"oldString":"a"}}"#.to_vec(),
    ] {
        let out = env.hook_at(&env.project, &["hook", "--cli", "opencode"], bad, &[], false);
        assert_eq!(out.status.code(), Some(1), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains("nothing was done"), "{err}");
        assert!(out.stdout.is_empty(), "{out:?}");
    }
    // The lock is still the holder's, and nothing else was taken.
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "a.txt" && l["holder"] == holder.as_str()),
        "{locks}"
    );
}
