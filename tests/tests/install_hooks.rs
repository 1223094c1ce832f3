//! `maos install-hooks` merges into an existing settings file, keeps every other setting and
//! hook, is idempotent, and `uninstall-hooks` restores the file; a broken file is refused.

use maos_tests::Env;
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
    assert!(v["hooks"]["PreToolUse"].is_array());
    env.maos_json(&["uninstall-hooks", "--codex"]);
    assert_eq!(read(&env.project.join(".codex/hooks.json")), json!({}));
}
