//! maos's MCP server (`maos mcp`) in each agent CLI's own configuration: `install-hooks`
//! registers it next to the hooks, `uninstall-hooks` removes exactly that entry, `doctor`
//! checks it. Claude Code: the project's `.mcp.json` (approved for the project in
//! `.claude/settings.json`'s `enabledMcpjsonServers`, which a headless run needs), or
//! `~/.claude.json` for the user. Codex: `[mcp_servers.maos]` in the project's
//! `.codex/config.toml` or in `$CODEX_HOME/config.toml`. Gemini CLI: `mcpServers` in the same
//! `settings.json` as its hooks. Cursor: `mcpServers` in the project's `.cursor/mcp.json` or
//! in `~/.cursor/mcp.json`. Other servers and settings are kept; a file that cannot be
//! read is refused and left untouched.

use std::path::{Path, PathBuf};

use maos_proto::Cli;
use serde_json::{Map, Value, json};
use toml_edit::{DocumentMut, Item, Table, value};

use crate::{codex, install};

/// The server's name in every CLI (its tools are `mcp__maos__…`, Gemini CLI's `mcp_maos_…`).
pub const NAME: &str = "maos";
/// What the CLI runs (found on PATH, like the hooks' `maos hook`).
const COMMAND: &str = "maos";
const ARGS: &[&str] = &["mcp"];
/// What Codex passes on to the server from its own environment: it starts MCP servers with a
/// few variables only, and without these the server would talk to another daemon (the
/// default socket) than the hooks, or not know the agent `maos run` started.
const CODEX_ENV_VARS: &[&str] = &[
    "MAOS_SOCKET",
    "MAOS_HOME",
    "MAOS_PROJECT",
    "MAOS_AGENT_ID",
    "MAOS_SESSION_ID",
    "MAOS_NO_AUTOSTART",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
];

/// Whether maos registers its MCP server for `cli` (`install-hooks` does, next to the hooks).
pub fn has_mcp(cli: Cli) -> bool {
    matches!(cli, Cli::Claude | Cli::Codex | Cli::Gemini | Cli::Cursor)
}

/// The file `cli` reads its MCP servers from (the project's, or the user's).
pub fn config_path(root: &Path, user: bool, cli: Cli) -> Result<PathBuf, String> {
    let home = || {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or_else(|| "HOME is not set: cannot find the user's settings".to_string())
    };
    Ok(match (cli, user) {
        (Cli::Claude, false) => root.join(".mcp.json"),
        (Cli::Claude, true) => home()?.join(".claude.json"),
        (Cli::Codex, false) => root.join(".codex/config.toml"),
        (Cli::Codex, true) => codex::home()?.join("config.toml"),
        // Cursor reads `mcpServers` as Claude Code's `.mcp.json` has it.
        (Cli::Cursor, false) => root.join(".cursor/mcp.json"),
        (Cli::Cursor, true) => home()?.join(".cursor/mcp.json"),
        (Cli::Copilot | Cli::OpenCode, _) => {
            return Err(format!(
                "maos does not register its MCP server for {}",
                cli.label()
            ));
        }
        // The same file as its hooks.
        (Cli::Gemini, _) => install::settings_path(root, user, cli)?,
    })
}

fn entry() -> Value {
    json!({ "command": COMMAND, "args": ARGS })
}

/// An entry `install-hooks` wrote (any maos's: `maos mcp`, wherever `maos` is).
fn is_ours_json(v: &Value) -> bool {
    let command = v["command"].as_str().unwrap_or_default();
    (command == COMMAND || command.ends_with("/maos")) && v["args"] == json!(ARGS)
}

/// `mcpServers.maos` in a JSON file (Claude Code's `.mcp.json` / `~/.claude.json`, Gemini
/// CLI's `settings.json`). True when the file changed.
fn register_json(path: &Path, dry: bool) -> Result<bool, String> {
    let mut m = install::read(path)?;
    let servers = m
        .entry("mcpServers")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(servers) = servers else {
        return Err(format!(
            "{}: \"mcpServers\" is not an object; left unchanged",
            path.display()
        ));
    };
    if servers.get(NAME) == Some(&entry()) {
        return Ok(false);
    }
    if servers.get(NAME).is_some_and(|v| !is_ours_json(v)) {
        return Err(format!(
            "{}: an MCP server named {NAME:?} that is not maos's is there already; left unchanged",
            path.display()
        ));
    }
    if !dry {
        servers.insert(NAME.to_string(), entry());
        install::write(path, &m)?;
    }
    Ok(true)
}

/// Remove maos's entry (and an `mcpServers` it leaves empty). True when the file changed.
fn unregister_json(path: &Path) -> Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    let mut m = install::read(path)?;
    let Some(Value::Object(servers)) = m.get_mut("mcpServers") else {
        return Ok(false);
    };
    if !servers.get(NAME).is_some_and(is_ours_json) {
        return Ok(false);
    }
    servers.remove(NAME);
    if servers.is_empty() {
        m.remove("mcpServers");
    }
    install::write_back_one(path, &m)?;
    Ok(true)
}

fn registered_json(path: &Path) -> Result<bool, String> {
    let m = install::read(path)?;
    Ok(m.get("mcpServers")
        .and_then(|s| s.get(NAME))
        .is_some_and(is_ours_json))
}

/// Claude Code asks before it starts a project's `.mcp.json` server, and a headless run
/// starts none it was not told to: the project's `.claude/settings.json` approves maos's.
fn approve_claude(settings: &Path, approve: bool) -> Result<bool, String> {
    let mut m = install::read(settings)?;
    let list = m
        .entry("enabledMcpjsonServers")
        .or_insert_with(|| Value::Array(Vec::new()));
    let Value::Array(list) = list else {
        return Err(format!(
            "{}: \"enabledMcpjsonServers\" is not a list; left unchanged",
            settings.display()
        ));
    };
    let has = list.iter().any(|v| v == NAME);
    let changed = match (approve, has) {
        (true, false) => {
            list.push(json!(NAME));
            true
        }
        (false, true) => {
            list.retain(|v| v != NAME);
            true
        }
        _ => false,
    };
    if list.is_empty() {
        m.remove("enabledMcpjsonServers");
    }
    match (changed, approve) {
        (true, true) => install::write(settings, &m)?,
        (true, false) => install::write_back_one(settings, &m)?,
        _ => {}
    }
    Ok(changed)
}

fn read_toml(path: &Path) -> Result<DocumentMut, String> {
    let text = match std::fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(format!("{}: {e}; nothing was changed", path.display())),
    };
    let doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| {
        format!(
            "{}: not valid TOML ({}); nothing was changed",
            path.display(),
            maos_core::text::escape_controls(&e.to_string())
        )
    })?;
    if doc.get("mcp_servers").is_some_and(|i| !i.is_table_like()) {
        return Err(format!(
            "{}: `mcp_servers` is not a table; nothing was changed",
            path.display()
        ));
    }
    Ok(doc)
}

fn is_ours_toml(t: &dyn toml_edit::TableLike) -> bool {
    let command = t.get("command").and_then(Item::as_str).unwrap_or_default();
    let args: Vec<&str> = t
        .get("args")
        .and_then(Item::as_array)
        .map(|a| a.iter().filter_map(|v| v.as_str()).collect())
        .unwrap_or_default();
    (command == COMMAND || command.ends_with("/maos")) && args == ARGS
}

fn write_toml(path: &Path, doc: &DocumentMut) -> Result<(), String> {
    install::write_all(&[(path, doc.to_string())])
}

/// `[mcp_servers.maos]` in Codex's `config.toml`. True when the file changed.
fn register_toml(path: &Path, dry: bool) -> Result<bool, String> {
    let mut doc = read_toml(path)?;
    let existing = doc
        .get("mcp_servers")
        .and_then(|s| s.get(NAME))
        .and_then(Item::as_table_like);
    match existing {
        Some(t) if is_ours_toml(t) => return Ok(false),
        Some(_) => {
            return Err(format!(
                "{}: an MCP server named {NAME:?} that is not maos's is there already; left unchanged",
                path.display()
            ));
        }
        None if dry => return Ok(true),
        None => {}
    }
    if !doc.contains_key("mcp_servers") {
        let mut t = Table::new();
        t.set_implicit(true);
        doc.insert("mcp_servers", Item::Table(t));
    }
    let Some(servers) = doc["mcp_servers"].as_table_like_mut() else {
        return Err(format!("{}: `mcp_servers` is not a table", path.display()));
    };
    let mut t = Table::new();
    t["command"] = value(COMMAND);
    let mut args = toml_edit::Array::new();
    for a in ARGS {
        args.push(*a);
    }
    t["args"] = value(args);
    let mut vars = toml_edit::Array::new();
    for v in CODEX_ENV_VARS {
        vars.push(*v);
    }
    t["env_vars"] = value(vars);
    servers.insert(NAME, Item::Table(t));
    write_toml(path, &doc)?;
    Ok(true)
}

fn unregister_toml(path: &Path) -> Result<bool, String> {
    if !path.exists() {
        return Ok(false);
    }
    let mut doc = read_toml(path)?;
    let Some(servers) = doc.get_mut("mcp_servers").and_then(Item::as_table_like_mut) else {
        return Ok(false);
    };
    if !servers
        .get(NAME)
        .and_then(Item::as_table_like)
        .is_some_and(is_ours_toml)
    {
        return Ok(false);
    }
    servers.remove(NAME);
    if servers.is_empty() {
        doc.remove("mcp_servers");
    }
    install::write_back(&[(path, doc.to_string())])?;
    Ok(true)
}

fn registered_toml(path: &Path) -> Result<bool, String> {
    let doc = read_toml(path)?;
    Ok(doc
        .get("mcp_servers")
        .and_then(|s| s.get(NAME))
        .and_then(Item::as_table_like)
        .is_some_and(is_ours_toml))
}

/// What `register` would refuse (a file it cannot read, another server named maos), found
/// before `install-hooks` changes any file.
pub fn preflight(root: &Path, user: bool, cli: Cli) -> Result<(), String> {
    if !has_mcp(cli) {
        return Ok(());
    }
    let path = config_path(root, user, cli)?;
    match cli {
        Cli::Codex => register_toml(&path, true)?,
        _ => register_json(&path, true)?,
    };
    Ok(())
}

/// `install-hooks`: register the server for `cli`; the line to print.
pub fn register(root: &Path, user: bool, cli: Cli) -> Result<Option<String>, String> {
    if !has_mcp(cli) {
        return Ok(None);
    }
    let path = config_path(root, user, cli)?;
    let changed = match cli {
        Cli::Codex => register_toml(&path, false)?,
        _ => register_json(&path, false)?,
    };
    if cli == Cli::Claude && !user {
        approve_claude(&install::settings_path(root, false, cli)?, true)?;
    }
    Ok(Some(match changed {
        true => format!(
            "maos's MCP server (`maos mcp`) registered in {}",
            path.display()
        ),
        false => format!(
            "maos's MCP server (`maos mcp`) is registered in {} already",
            path.display()
        ),
    }))
}

/// `uninstall-hooks`: remove what `register` wrote; the line to print, if anything changed.
pub fn unregister(root: &Path, user: bool, cli: Cli) -> Result<Option<String>, String> {
    if !has_mcp(cli) {
        return Ok(None);
    }
    let path = config_path(root, user, cli)?;
    let changed = match cli {
        Cli::Codex => unregister_toml(&path)?,
        _ => unregister_json(&path)?,
    };
    if cli == Cli::Claude && !user {
        let settings = install::settings_path(root, false, cli)?;
        if settings.exists() {
            approve_claude(&settings, false)?;
        }
    }
    Ok(changed.then(|| format!("maos's MCP server removed from {}", path.display())))
}

/// Where `cli` has maos's server registered (project, then user files), or why a file
/// cannot be read.
pub fn registered(root: &Path, cli: Cli) -> Result<Vec<PathBuf>, String> {
    let mut found = Vec::new();
    if !has_mcp(cli) {
        return Ok(found);
    }
    for user in [false, true] {
        let Ok(path) = config_path(root, user, cli) else {
            continue;
        };
        let yes = match cli {
            Cli::Codex => registered_toml(&path)?,
            _ => registered_json(&path)?,
        };
        if yes {
            found.push(path);
        }
    }
    Ok(found)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn json_registration_merges_and_uninstall_takes_back_only_its_entry() {
        let dir = std::env::temp_dir().join(format!("maos-mcpreg-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join(".mcp.json");
        std::fs::write(
            &f,
            r#"{"mcpServers": {"other": {"command": "x"}}, "keep": 1}"#,
        )
        .unwrap();
        assert!(register_json(&f, false).unwrap());
        assert!(!register_json(&f, false).unwrap(), "twice changes nothing");
        assert!(registered_json(&f).unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(v["mcpServers"]["maos"], entry());
        assert_eq!(v["mcpServers"]["other"]["command"], "x");
        assert!(unregister_json(&f).unwrap());
        let v: Value = serde_json::from_str(&std::fs::read_to_string(&f).unwrap()).unwrap();
        assert_eq!(
            v,
            json!({"mcpServers": {"other": {"command": "x"}}, "keep": 1})
        );
        // Someone else's "maos" is neither replaced nor removed.
        std::fs::write(&f, r#"{"mcpServers": {"maos": {"command": "other-tool"}}}"#).unwrap();
        assert!(register_json(&f, false).is_err());
        assert!(!unregister_json(&f).unwrap());
        std::fs::write(&f, "{ not json").unwrap();
        assert!(
            register_json(&f, true)
                .unwrap_err()
                .contains("left unchanged")
        );
        assert_eq!(std::fs::read_to_string(&f).unwrap(), "{ not json");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn cursor_s_server_is_in_its_mcp_json() {
        let root = Path::new("/r");
        assert!(has_mcp(Cli::Cursor));
        assert_eq!(
            config_path(root, false, Cli::Cursor).unwrap(),
            Path::new("/r/.cursor/mcp.json")
        );
        // Not its hooks file: one unknown key there could cost Cursor's hooks.
        assert_ne!(
            config_path(root, false, Cli::Cursor).unwrap(),
            crate::clis::settings_path(root, false, Cli::Cursor).unwrap()
        );
    }

    #[test]
    fn toml_registration_keeps_the_rest_of_the_file() {
        let dir = std::env::temp_dir().join(format!("maos-mcpreg-t-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("config.toml");
        let before = "# mine\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n";
        std::fs::write(&f, before).unwrap();
        assert!(register_toml(&f, false).unwrap());
        assert!(!register_toml(&f, false).unwrap());
        let text = std::fs::read_to_string(&f).unwrap();
        assert!(text.starts_with(before), "{text}");
        assert!(
            text.contains("[mcp_servers.maos]\ncommand = \"maos\"\nargs = [\"mcp\"]"),
            "{text}"
        );
        assert!(registered_toml(&f).unwrap());
        assert!(unregister_toml(&f).unwrap());
        assert_eq!(std::fs::read_to_string(&f).unwrap(), before);
        std::fs::write(&f, "mcp_servers = 3\n").unwrap();
        assert!(register_toml(&f, true).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
