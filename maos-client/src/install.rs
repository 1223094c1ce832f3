//! `maos install-hooks` / `maos uninstall-hooks`: merge maos's hook entries into an agent CLI's
//! settings file, keeping every other setting and hook, idempotently; uninstall removes exactly
//! what install added. A settings file that is not valid JSON is refused and left untouched.

use std::path::{Path, PathBuf};

use maos_proto::Cli;
use serde_json::{Map, Value, json};

/// The command every entry starts with (found on PATH, so the file can be shared by a team).
const COMMAND: &str = "maos hook";
/// Seconds the CLI gives the hook.
const TIMEOUT_S: u64 = 10;

/// (event, matcher) pairs maos listens to in Claude Code; `None` = every occurrence.
const CLAUDE_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    (
        "PreToolUse",
        Some("Write|Edit|MultiEdit|NotebookEdit|Agent|Task"),
    ),
    (
        "PostToolUse",
        Some("Write|Edit|MultiEdit|NotebookEdit|Bash|Agent|Task|TodoWrite"),
    ),
    ("SubagentStart", None),
    ("SubagentStop", None),
    ("Stop", None),
    ("PreCompact", None),
    ("SessionEnd", None),
];

/// Codex's: it writes files with `apply_patch` and has no subagent or session-end events.
const CODEX_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    // Bash too: a shell command that runs `apply_patch` writes files (the client answers any
    // other shell command at once, without the daemon).
    ("PreToolUse", Some("apply_patch|Bash")),
    ("PostToolUse", Some("apply_patch|Bash")),
    ("Stop", None),
];

/// Gemini CLI's: its write tools are `write_file` and `replace`.
const GEMINI_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("BeforeAgent", None),
    ("BeforeTool", Some("write_file|replace")),
    ("AfterTool", Some("write_file|replace|run_shell_command")),
    ("AfterAgent", None),
    ("PreCompress", None),
    ("SessionEnd", None),
];

fn events(cli: Cli) -> &'static [(&'static str, Option<&'static str>)] {
    match cli {
        Cli::Claude => CLAUDE_EVENTS,
        Cli::Codex => CODEX_EVENTS,
        Cli::Gemini => GEMINI_EVENTS,
    }
}

/// The command maos's entries run for `cli` (Claude Code's is the plain one, as maos has
/// always written it).
pub fn command(cli: Cli) -> String {
    match cli {
        Cli::Claude => COMMAND.to_string(),
        other => format!("{COMMAND} --cli {other}"),
    }
}

/// One hook entry of maos for `cli`, in that CLI's shape.
fn entry(cli: Cli) -> Value {
    match cli {
        // Gemini CLI counts its timeout in milliseconds and shows the hook's name.
        Cli::Gemini => json!({ "type": "command", "command": command(cli), "name": "maos",
                               "timeout": TIMEOUT_S * 1000 }),
        _ => json!({ "type": "command", "command": command(cli), "timeout": TIMEOUT_S }),
    }
}

/// How far maos's hooks are installed in a settings file.
#[derive(Debug, PartialEq, Eq)]
pub enum Installed {
    /// No file, or no maos hook in it.
    No,
    /// Some events lack maos's hook (named).
    Partly(Vec<&'static str>),
    Yes,
}

/// Whether `path` has maos's hook on every event it needs (a broken file is an error).
pub fn installed(path: &Path, cli: Cli) -> Result<Installed, String> {
    let settings = read(path)?;
    // An entry of ours with another matcher (written by an older maos) misses tools.
    let current = |group: &Value, matcher: &Option<&str>| {
        is_ours(group) && matcher.is_none_or(|m| group["matcher"].as_str() == Some(m))
    };
    let missing: Vec<&'static str> = events(cli)
        .iter()
        .filter(|(event, matcher)| {
            !settings
                .get("hooks")
                .and_then(|h| h.get(*event))
                .and_then(Value::as_array)
                .is_some_and(|groups| groups.iter().any(|g| current(g, matcher)))
        })
        .map(|(event, _)| *event)
        .collect();
    Ok(match missing.len() {
        0 => Installed::Yes,
        n if n == events(cli).len() => Installed::No,
        _ => Installed::Partly(missing),
    })
}

/// Which settings file of `cli`: the project's (`.claude/settings.json`, `.codex/hooks.json`,
/// `.gemini/settings.json`), or the same under the user's home.
pub fn settings_path(root: &Path, user: bool, cli: Cli) -> Result<PathBuf, String> {
    let base = if user {
        std::env::var_os("HOME")
            .filter(|h| !h.is_empty())
            .map(PathBuf::from)
            .ok_or("HOME is not set: cannot find the user's settings")?
    } else {
        root.to_path_buf()
    };
    Ok(base.join(match cli {
        Cli::Claude => ".claude/settings.json",
        Cli::Codex => ".codex/hooks.json",
        Cli::Gemini => ".gemini/settings.json",
    }))
}

fn is_ours(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hs| {
        hs.iter().any(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.trim_start().starts_with(COMMAND))
        })
    })
}

fn read(path: &Path) -> Result<Map<String, Value>, String> {
    match std::fs::read_to_string(path) {
        Ok(text) if text.trim().is_empty() => Ok(Map::new()),
        Ok(text) => match serde_json::from_str::<Value>(&text) {
            Ok(Value::Object(m)) => Ok(m),
            Ok(_) => Err(format!(
                "{}: not a JSON object; left unchanged",
                path.display()
            )),
            Err(e) => Err(format!(
                "{}: not valid JSON ({e}); left unchanged",
                path.display()
            )),
        },
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(Map::new()),
        Err(e) => Err(format!("{}: {e}", path.display())),
    }
}

fn write(path: &Path, settings: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    let text = serde_json::to_string_pretty(settings).map_err(|e| e.to_string())? + "\n";
    // Write beside it and rename: a crash never leaves a half-written settings file.
    let tmp = path.with_extension("json.maos-tmp");
    std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

/// Remove maos's groups; drop event lists and the `hooks` object that this leaves empty.
fn strip(settings: &mut Map<String, Value>) -> bool {
    let Some(Value::Object(hooks)) = settings.get_mut("hooks") else {
        return false;
    };
    let mut changed = false;
    for list in hooks.values_mut() {
        if let Value::Array(groups) = list {
            let before = groups.len();
            groups.retain(|g| !is_ours(g));
            changed |= groups.len() != before;
        }
    }
    if changed {
        hooks.retain(|_, v| !v.as_array().is_some_and(Vec::is_empty));
        if hooks.is_empty() {
            settings.remove("hooks");
        }
    }
    changed
}

pub fn install(path: &Path, cli: Cli) -> Result<String, String> {
    let mut settings = read(path)?;
    strip(&mut settings);
    let hooks = settings
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        return Err(format!(
            "{}: \"hooks\" is not an object; left unchanged",
            path.display()
        ));
    };
    for (event, matcher) in events(cli) {
        let mut group = json!({ "hooks": [entry(cli)] });
        if let Some(m) = matcher {
            group["matcher"] = json!(m);
        }
        match hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(groups) => groups.push(group),
            _ => {
                return Err(format!(
                    "{}: hooks.{event} is not a list; left unchanged",
                    path.display()
                ));
            }
        }
    }
    write(path, &settings)?;
    Ok(format!("maos hooks installed in {}", path.display()))
}

pub fn uninstall(path: &Path) -> Result<String, String> {
    let mut settings = read(path)?;
    if !strip(&mut settings) {
        return Ok(format!("no maos hooks in {}", path.display()));
    }
    write(path, &settings)?;
    Ok(format!("maos hooks removed from {}", path.display()))
}
