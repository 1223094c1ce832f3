//! What README says holds. Of sessions (issue 15 found it false): commands default to the
//! active session (`export` too), an imported live session becomes active like a created one,
//! and `session list` lists the live sessions and the active one. Through the real binaries.

use maos_tests::{Env, describe, json};

#[test]
fn export_defaults_to_the_active_session() {
    let env = Env::new();
    let sid = env.session("exported by default", &[]);
    let out = env.maos(&["export"]);
    assert!(out.status.success(), "{}", describe(&out));
    let file: serde_json::Value = serde_json::from_slice(&out.stdout).expect("export JSON");
    assert_eq!(file["session"]["id"], json!(sid), "{file}");
    // To a file too, and named explicitly as before.
    let path = env.root().join("out.json");
    let v = env.maos_json(&["export", "-o", path.to_str().expect("utf-8")]);
    assert_eq!(v["session"], json!(sid), "{v}");
    let again = env.root().join("again.json");
    let v = env.maos_json(&["export", &sid[..12], "-o", again.to_str().expect("utf-8")]);
    assert_eq!(v["session"], json!(sid), "{v}");
}

#[test]
fn an_imported_live_session_becomes_active_when_none_is() {
    let env = Env::new();
    let sid = env.session("travels", &[]);
    env.maos_json(&["session", "start"]);
    let file = env.root().join("live.json");
    env.maos_json(&["export", "-o", file.to_str().expect("utf-8")]);

    // A project with nothing live: the imported session is the active one, and the commands
    // that default to it find it.
    let other = env.make_project("other");
    let imported = env.maos_json_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(imported["id"], json!(sid));
    assert_eq!(imported["active"], json!(true), "{imported}");
    assert_eq!(imported["state"], "paused", "{imported}");
    let status = env.maos_json_in(&other, &["status"]);
    assert_eq!(status["session"]["id"], json!(sid), "{status}");
    let types: Vec<String> = env
        .events_in(&other, &[])
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect();
    // The file's own events come first; the activation here follows the import.
    assert_eq!(
        types[types.len() - 2..],
        ["session_imported", "session_activated"],
        "{types:?}"
    );

    // A project whose active session is live keeps it.
    let third = env.make_project("third");
    let mine = env.maos_json_in(&third, &["session", "create", "--objective", "mine"]);
    let imported = env.maos_json_in(&third, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(imported["active"], json!(false), "{imported}");
    let shown = env.maos_json_in(&third, &["session", "show"]);
    assert_eq!(shown["id"], mine["id"], "{shown}");
}

#[test]
fn session_list_shows_the_live_sessions_and_the_active_one() {
    let env = Env::new();
    let first = env.session("first", &[]);
    env.maos_json(&["session", "cancel"]);
    // Finished but still active: listed.
    let ids = |v: serde_json::Value| -> Vec<String> {
        v.as_array()
            .expect("a list")
            .iter()
            .map(|s| s["id"].as_str().unwrap_or_default().to_string())
            .collect()
    };
    assert_eq!(
        ids(env.maos_json(&["session", "list"])),
        vec![first.clone()]
    );
    // A new session takes over: the finished one is listed with --all only.
    let second = env.session("second", &[]);
    assert_eq!(
        ids(env.maos_json(&["session", "list"])),
        vec![second.clone()]
    );
    let all = ids(env.maos_json(&["session", "list", "--all"]));
    assert!(all.contains(&first) && all.contains(&second), "{all:?}");
}

/// `.ci/run` runs exactly README's test command (and docs/testing.md shows the same one):
/// a suite added to one and not the other was once missed in CI or by a reader.
#[test]
fn ci_runs_exactly_the_readme_test_command() {
    let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let read = |p: &str| std::fs::read_to_string(root.join(p)).expect("a repository file");
    let ci = read(".ci/run");
    let ci_line = ci
        .lines()
        .rev()
        .find(|l| l.starts_with("cargo build"))
        .expect(".ci/run runs a cargo build line");
    for doc in ["README.md", "docs/testing.md"] {
        let text = read(doc);
        let line = text
            .lines()
            .map(str::trim)
            .find(|l| l.starts_with("cargo build --workspace --bins"))
            .unwrap_or_else(|| panic!("{doc} shows no test command"));
        assert_eq!(
            line, ci_line,
            "{doc}'s test command is not the one .ci/run runs"
        );
    }
}
