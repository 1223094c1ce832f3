//! `maos install-hooks` merges into an existing settings file, keeps every other setting and
//! hook, is idempotent, and `uninstall-hooks` restores the file; a broken file is refused.

use maos_tests::Env;
use maos_tests::doctor::levels;
use serde_json::{Value, json};

fn read(path: &std::path::Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("settings file")).expect("JSON")
}

#[test]
fn install_is_merged_idempotent_and_uninstall_restores() {
    let env = Env::new();
    let path = env.project.join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    let original = json!({
        "model": "opus",
        "permissions": {"allow": ["Read"]},
        "hooks": {
            "PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "echo hi"}]}],
            "Notification": [{"hooks": [{"type": "command", "command": "notify-send x"}]}]
        }
    });
    std::fs::write(&path, original.to_string()).expect("write");

    env.maos_json(&["install-hooks"]);
    let once = std::fs::read_to_string(&path).expect("read");
    let v = read(&path);
    assert_eq!(v["model"], "opus");
    assert_eq!(v["permissions"], original["permissions"]);
    assert_eq!(
        v["hooks"]["Notification"],
        original["hooks"]["Notification"]
    );
    let pre = v["hooks"]["PreToolUse"].as_array().expect("PreToolUse");
    assert_eq!(
        pre[0], original["hooks"]["PreToolUse"][0],
        "the user's own hook stays first"
    );
    let ours = pre
        .iter()
        .find(|g| g["hooks"][0]["command"] == "maos hook")
        .expect("maos PreToolUse entry");
    assert!(ours["matcher"].as_str().expect("matcher").contains("Write"));
    assert!(
        !ours["matcher"].as_str().expect("matcher").contains("Read"),
        "narrow matcher"
    );
    assert_eq!(ours["hooks"][0]["timeout"], 10);
    for event in [
        "SessionStart",
        "SubagentStart",
        "SubagentStop",
        "SessionEnd",
    ] {
        assert!(v["hooks"][event].is_array(), "{event}");
    }

    env.maos_json(&["install-hooks"]);
    assert_eq!(
        std::fs::read_to_string(&path).expect("read"),
        once,
        "installing twice changes nothing"
    );

    env.maos_json(&["uninstall-hooks"]);
    assert_eq!(read(&path), original, "uninstall restores the file");
}

#[test]
fn a_broken_settings_file_is_refused_and_left_alone() {
    let env = Env::new();
    let path = env.project.join(".claude/settings.json");
    std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
    std::fs::write(&path, "{ not json").expect("write");
    let f = env.maos_fail(&["install-hooks"]);
    assert_eq!(f.exit, 1);
    assert!(f.message.contains("not valid JSON"), "{}", f.message);
    assert_eq!(std::fs::read_to_string(&path).expect("read"), "{ not json");
}

#[test]
fn codex_and_fresh_projects_get_their_own_file() {
    let env = Env::new();
    env.maos_json(&["install-hooks", "--codex"]);
    let v = read(&env.project.join(".codex/hooks.json"));
    // Codex writes files with apply_patch, and starts subagents with spawn_agent.
    assert_eq!(
        v["hooks"]["PreToolUse"][0]["matcher"],
        "apply_patch|Bash|mcp__maos__.*|(collaboration|multi_agent_v1)?spawn_agent"
    );
    let mut events: Vec<&String> = v["hooks"].as_object().expect("hooks").keys().collect();
    events.sort();
    assert_eq!(
        events,
        [
            "PostToolUse",
            "PreToolUse",
            "SessionStart",
            "Stop",
            "SubagentStart",
            "SubagentStop",
            "UserPromptSubmit"
        ]
    );
    env.maos_json(&["uninstall-hooks", "--codex"]);
    // Install created it: no `{}` file and no empty `.codex/` left behind.
    assert!(!env.project.join(".codex").exists());
}

/// `maos --json doctor` in the project with `path_dirs` as PATH: (exit code, report).
fn doctor(env: &Env, path_dirs: &[&std::path::Path]) -> (Option<i32>, Value) {
    let path = std::env::join_paths(path_dirs).expect("PATH");
    maos_tests::doctor::doctor(env, &env.project, path)
}

#[test]
fn doctor_reports_each_part_of_the_set_up() {
    let env = Env::new();
    let bin_dir = maos_tests::maos_bin()
        .parent()
        .expect("bin dir")
        .to_path_buf();
    let empty = env.root().join("empty-bin");
    std::fs::create_dir_all(&empty).expect("mkdir");
    // Nothing set up: no hooks, no `maos` on PATH. The daemon starts; nothing has been
    // recorded, so there is no database (and doctor creates none).
    let (code, r) = doctor(&env, &[&empty]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(r["ok"], false);
    assert_eq!(levels(&r, "maos on PATH"), ["fail"]);
    assert_eq!(levels(&r, "Claude Code hooks"), ["fail"]);
    assert_eq!(levels(&r, "Codex hooks"), ["info"]);
    assert_eq!(levels(&r, "daemon"), ["ok"]);
    assert_eq!(levels(&r, "versions"), ["ok"]);
    assert_eq!(levels(&r, "database"), ["info"]);
    assert!(!env.db_path().exists());
    // Installed (and trusted) for Codex only: Claude Code's hooks are only mentioned, and
    // doctor passes.
    env.maos_json(&["install-hooks", "--codex", "--yes"]);
    let (code, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(levels(&r, "Codex hooks"), ["ok"]);
    assert_eq!(levels(&r, "Claude Code hooks"), ["info"]);
    env.maos_json(&["uninstall-hooks", "--codex"]);
    let (code, _) = doctor(&env, &[&bin_dir]);
    assert_eq!(code, Some(1), "no CLI set up fails again");
    // Set up: every check passes.
    env.maos_json(&["install-hooks"]);
    env.session("doctor", &[]);
    let (code, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(code, Some(0), "{r}");
    assert_eq!(levels(&r, "database"), ["ok"]);
    assert_eq!(levels(&r, "maos on PATH"), ["ok"]);
    assert_eq!(levels(&r, "Claude Code hooks"), ["ok"]);
    // A hook removed by hand is named; a settings file Claude Code cannot read fails.
    let path = env.project.join(".claude/settings.json");
    let mut v = read(&path);
    v["hooks"]
        .as_object_mut()
        .expect("hooks")
        .remove("SubagentStop");
    std::fs::write(&path, v.to_string()).expect("write");
    let (code, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(code, Some(0), "a warning does not fail: {r}");
    assert_eq!(levels(&r, "Claude Code hooks"), ["warn"]);
    assert!(r.to_string().contains("SubagentStop"));
    // An entry an older maos wrote (a matcher without TodoWrite) is named too, and
    // install-hooks brings it up to date.
    env.maos_json(&["install-hooks"]);
    let mut v = read(&path);
    v["hooks"]["PostToolUse"][0]["matcher"] =
        "Write|Edit|MultiEdit|NotebookEdit|Bash|Agent|Task".into();
    std::fs::write(&path, v.to_string()).expect("write");
    let (_, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(levels(&r, "Claude Code hooks"), ["warn"], "{r}");
    assert!(
        r.to_string()
            .contains("no current maos hook for PostToolUse"),
        "{r}"
    );
    env.maos_json(&["install-hooks"]);
    assert!(
        read(&path)["hooks"]["PostToolUse"][0]["matcher"]
            .as_str()
            .is_some_and(|m| m.ends_with("|TodoWrite"))
    );
    let (_, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(levels(&r, "Claude Code hooks"), ["ok"], "{r}");
    std::fs::write(&path, "{ not json").expect("write");
    let (code, r) = doctor(&env, &[&bin_dir]);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(levels(&r, "Claude Code hooks"), ["fail"]);
}
