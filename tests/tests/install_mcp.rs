//! `maos install-hooks` (and `--codex`, `--gemini`, `--user`) also registers maos's MCP server
//! (`maos mcp`) in each CLI's own configuration, merging like the hooks (other servers and
//! settings kept, twice is once); `uninstall-hooks` removes exactly that entry; `doctor` checks
//! it; a file that cannot take it stops the install before any file changes.

use std::path::{Path, PathBuf};
use std::process::Output;

use maos_tests::{Env, Value, json};

fn codex_home(env: &Env) -> PathBuf {
    env.root().join("codex-home")
}

fn home(env: &Env) -> PathBuf {
    env.root().join("user")
}

/// `maos ARGS` in the project, with this test's `CODEX_HOME` and `maos` on PATH.
fn maos(env: &Env, args: &[&str]) -> Output {
    let mut cmd = env.maos_cmd_in(&env.project, args);
    let path = format!("{}:/usr/bin:/bin", maos_tests::bin_dir().display());
    cmd.env("CODEX_HOME", codex_home(env)).env("PATH", path);
    cmd.output().expect("run maos")
}

fn ok(env: &Env, args: &[&str]) -> String {
    let out = maos(env, args);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "maos {args:?}: {text}{}",
        String::from_utf8_lossy(&out.stderr)
    );
    text
}

fn json_of(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("read")).expect("json")
}

/// The doctor's check named `name`: (level, detail).
fn doctor_check(env: &Env, name: &str) -> Option<(String, String)> {
    let out = maos(env, &["--json", "doctor"]);
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor's json");
    v["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["check"] == name)
        .map(|c| {
            (
                c["level"].as_str().unwrap().to_string(),
                c["detail"].as_str().unwrap().to_string(),
            )
        })
}

#[test]
fn claude_code_gets_the_server_in_mcp_json_approved_for_the_project() {
    let env = Env::new();
    let mcp = env.project.join(".mcp.json");
    std::fs::write(
        &mcp,
        r#"{"mcpServers": {"docs": {"command": "docs-server"}}}"#,
    )
    .unwrap();
    let said = ok(&env, &["install-hooks"]);
    assert!(said.contains(".mcp.json"), "{said}");
    let v = json_of(&mcp);
    assert_eq!(
        v["mcpServers"]["maos"],
        json!({"command": "maos", "args": ["mcp"]})
    );
    assert_eq!(v["mcpServers"]["docs"]["command"], "docs-server");
    let settings = json_of(&env.project.join(".claude/settings.json"));
    assert_eq!(settings["enabledMcpjsonServers"], json!(["maos"]));
    let matcher = settings["hooks"]["PreToolUse"][0]["matcher"]
        .as_str()
        .unwrap();
    assert!(matcher.contains("mcp__maos__"), "{matcher}");
    // Twice is once.
    let before = std::fs::read_to_string(&mcp).unwrap();
    ok(&env, &["install-hooks"]);
    assert_eq!(std::fs::read_to_string(&mcp).unwrap(), before);
    let (level, detail) = doctor_check(&env, "Claude Code MCP server").expect("checked");
    assert_eq!(level, "ok", "{detail}");
    assert!(detail.contains("maos-mcp"), "{detail}");
    // Uninstall takes back exactly what install added.
    ok(&env, &["uninstall-hooks"]);
    assert_eq!(
        json_of(&mcp),
        json!({"mcpServers": {"docs": {"command": "docs-server"}}})
    );
    // The settings install created go with it (its approval of the server too).
    assert!(!env.project.join(".claude").exists());
}

#[test]
fn doctor_warns_when_the_hooks_are_there_but_the_server_is_not() {
    let env = Env::new();
    ok(&env, &["install-hooks"]);
    std::fs::write(env.project.join(".mcp.json"), "{}").unwrap();
    let (level, detail) = doctor_check(&env, "Claude Code MCP server").expect("checked");
    assert_eq!(level, "warn", "{detail}");
    assert!(detail.contains("maos install-hooks"), "{detail}");
}

#[test]
fn user_install_registers_in_the_users_claude_json() {
    let env = Env::new();
    let file = home(&env).join(".claude.json");
    std::fs::create_dir_all(home(&env)).unwrap();
    std::fs::write(&file, r#"{"numStartups": 3}"#).unwrap();
    ok(&env, &["install-hooks", "--user"]);
    let v = json_of(&file);
    assert_eq!(v["numStartups"], 3);
    assert_eq!(v["mcpServers"]["maos"]["args"], json!(["mcp"]));
    ok(&env, &["uninstall-hooks", "--user"]);
    assert_eq!(json_of(&file), json!({"numStartups": 3}));
}

#[test]
fn codex_gets_an_mcp_servers_table_in_its_project_config() {
    let env = Env::new();
    let file = env.project.join(".codex/config.toml");
    std::fs::create_dir_all(file.parent().unwrap()).unwrap();
    let mine = "# my settings\nmodel = \"o3\"\n";
    std::fs::write(&file, mine).unwrap();
    ok(&env, &["install-hooks", "--codex", "--yes"]);
    let text = std::fs::read_to_string(&file).unwrap();
    assert!(text.starts_with(mine), "{text}");
    let parsed: toml::Table = text.parse().expect("valid TOML");
    let maos = &parsed["mcp_servers"]["maos"];
    assert_eq!(maos["command"].as_str(), Some("maos"));
    assert_eq!(maos["args"][0].as_str(), Some("mcp"));
    let (level, detail) = doctor_check(&env, "Codex MCP server").expect("checked");
    assert_eq!(level, "ok", "{detail}");
    ok(&env, &["uninstall-hooks", "--codex"]);
    assert_eq!(std::fs::read_to_string(&file).unwrap(), mine);
}

#[test]
fn gemini_cli_gets_the_server_in_its_settings_next_to_the_hooks() {
    let env = Env::new();
    let trust = env.root().join("trusted.json");
    let run = |args: &[&str]| {
        let mut cmd = env.maos_cmd_in(&env.project, args);
        cmd.env("GEMINI_CLI_TRUSTED_FOLDERS_PATH", &trust);
        let out = cmd.output().expect("run maos");
        assert!(out.status.success(), "{out:?}");
    };
    run(&["install-hooks", "--gemini", "--yes"]);
    let file = env.project.join(".gemini/settings.json");
    let v = json_of(&file);
    assert_eq!(
        v["mcpServers"]["maos"],
        json!({"command": "maos", "args": ["mcp"]})
    );
    let before = v["hooks"]["BeforeTool"][0]["matcher"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(before.contains("mcp_maos_"), "{before}");
    run(&["uninstall-hooks", "--gemini"]);
    // Install created the file: uninstall removes it, with no `{}` left behind.
    assert!(!file.exists() && !env.project.join(".gemini").exists());
}

#[test]
fn a_file_that_cannot_take_the_server_stops_the_install_before_anything_changes() {
    let env = Env::new();
    let mcp = env.project.join(".mcp.json");
    for bad in [
        "{ not json",
        r#"{"mcpServers": {"maos": {"command": "someone-else"}}}"#,
    ] {
        std::fs::write(&mcp, bad).unwrap();
        let out = maos(&env, &["install-hooks"]);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(err.contains(".mcp.json"), "{err}");
        assert_eq!(std::fs::read_to_string(&mcp).unwrap(), bad);
        assert!(
            !env.project.join(".claude/settings.json").exists(),
            "the hooks were installed though the server could not be"
        );
    }
}
