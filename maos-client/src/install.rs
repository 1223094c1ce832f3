//! `maos install-hooks` / `maos uninstall-hooks`: merge maos's hook entries into an agent CLI's
//! settings file, keeping every other setting and hook, idempotently; uninstall removes exactly
//! what install added. A settings file that is not valid JSON is refused and left untouched.

pub use crate::setup::{Consent, Installed};
use std::path::{Path, PathBuf};

use maos_proto::Cli;
use serde_json::{Map, Value, json};

use crate::codex::{self, Status};

/// The command every entry starts with (found on PATH, so the file can be shared by a team).
const COMMAND: &str = "maos hook";
/// Seconds the CLI gives the hook.
const TIMEOUT_S: u64 = 10;

/// (event, matcher) pairs maos listens to in Claude Code; `None` = every occurrence.
const CLAUDE_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("UserPromptSubmit", None),
    // Bash too: the daemon reads its command for the files it writes before it runs (without
    // it in the matcher Claude Code never asks). maos's own MCP tools too: the hook records
    // whose call each is, for `maos mcp`.
    (
        "PreToolUse",
        Some("Write|Edit|MultiEdit|NotebookEdit|Bash|Agent|Task|mcp__maos__.*"),
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
    // Bash too: the daemon reads what a shell command writes (an `apply_patch` through the
    // shell among it), and checks after it what it changed. `spawn_agent` starts a subagent
    // (0.171.0 names it so with its default tools, `collaborationspawn_agent` with
    // `multi_agent_v2`; Codex anchors a matcher): the request's task, and after it the
    // subagent's id.
    (
        "PreToolUse",
        Some("apply_patch|Bash|mcp__maos__.*|(collaboration|multi_agent_v1)?spawn_agent"),
    ),
    (
        "PostToolUse",
        Some("apply_patch|Bash|(collaboration|multi_agent_v1)?spawn_agent"),
    ),
    ("Stop", None),
    // A subagent's start and end: its own agent, completed when it stops.
    ("SubagentStart", None),
    ("SubagentStop", None),
];

/// Gemini CLI's (0.61.0): its write tools are `write_file` and `replace`. Its tool matchers
/// are unanchored regular expressions (`replace` alone would also match an MCP tool named
/// `..._replace_...`), so they are anchored.
const GEMINI_EVENTS: &[(&str, Option<&str>)] = &[
    ("SessionStart", None),
    ("BeforeAgent", None),
    (
        "BeforeTool",
        Some("^(write_file|replace|run_shell_command|mcp_maos_.*)$"),
    ),
    (
        "AfterTool",
        Some("^(write_file|replace|run_shell_command)$"),
    ),
    ("AfterAgent", None),
    // Its other matchers are exact: only a manual compression (`/compress`); an automatic
    // PreCompress comes before every model turn, whether it compresses or not.
    ("PreCompress", Some("manual")),
    ("SessionEnd", None),
];

fn events(cli: Cli) -> &'static [(&'static str, Option<&'static str>)] {
    match cli {
        Cli::Claude => CLAUDE_EVENTS,
        Cli::Codex => CODEX_EVENTS,
        Cli::Gemini => GEMINI_EVENTS,
        // Their files have their own shapes (crate::{copilot, cursor, opencode}).
        Cli::Copilot | Cli::Cursor | Cli::OpenCode => &[],
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
    if user && cli == Cli::Codex {
        // Codex reads the user's hooks from its home, `$CODEX_HOME` when set.
        return Ok(codex::home()?.join("hooks.json"));
    }
    if !matches!(cli, Cli::Claude | Cli::Codex | Cli::Gemini) {
        return Err(format!(
            "{} keeps its hooks in a file of its own, not in a settings file like Claude Code's",
            cli.label()
        ));
    }
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
        Cli::Copilot | Cli::Cursor | Cli::OpenCode => "",
    }))
}

/// A hook command of maos's (any version's).
fn is_maos_command(command: &str) -> bool {
    command.trim_start().starts_with(COMMAND)
}

fn is_ours(group: &Value) -> bool {
    group["hooks"].as_array().is_some_and(|hs| {
        hs.iter()
            .any(|h| h["command"].as_str().is_some_and(is_maos_command))
    })
}

/// A JSON object file, empty when missing or blank; anything else is a one-line error.
pub fn read(path: &Path) -> Result<Map<String, Value>, String> {
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

pub(crate) fn json_text(settings: &Map<String, Value>) -> Result<String, String> {
    Ok(serde_json::to_string_pretty(settings).map_err(|e| e.to_string())? + "\n")
}

/// Write a settings object in place for install (see [`write_all`]).
pub fn write(path: &Path, settings: &Map<String, Value>) -> Result<(), String> {
    write_all(&[(path, json_text(settings)?)])
}

/// Write a settings object in place for uninstall (see [`write_back`]).
pub fn write_back_one(path: &Path, settings: &Map<String, Value>) -> Result<(), String> {
    write_back(&[(path, json_text(settings)?)])
}

/// How a write treats the notes of what install changed ([`crate::undo`]).
#[derive(Clone, Copy, PartialEq, Eq)]
enum Why {
    /// Install: note each file's state before its first change.
    Install,
    /// Uninstall: a file back to what it meant before install gets its old bytes back.
    Uninstall,
}

/// Install's writes: each file beside itself, then all renamed into place (a crash never
/// leaves a half-written file, and a file that cannot be written leaves every file as it
/// was). A file whose text would not change is not touched (not even its mtime); a file's
/// state before install's first change is noted, for uninstall.
pub fn write_all(files: &[(&Path, String)]) -> Result<(), String> {
    commit(files, Why::Install, None)
}

/// Uninstall's writes, as [`write_all`]; a file that is left meaning what it meant before
/// install gets its old text back to the byte, or is removed (with the directories install
/// made for it) when install created it.
pub fn write_back(files: &[(&Path, String)]) -> Result<(), String> {
    commit(files, Why::Uninstall, None)
}

/// [`write_all`] for a file only its owner may read when it is new (Gemini CLI's trust).
pub fn write_private(files: &[(&Path, String)]) -> Result<(), String> {
    commit(files, Why::Install, Some(0o600))
}

/// [`write_back`] for such a file.
pub fn write_back_private(files: &[(&Path, String)]) -> Result<(), String> {
    commit(files, Why::Uninstall, Some(0o600))
}

fn commit(files: &[(&Path, String)], why: Why, new_mode: Option<u32>) -> Result<(), String> {
    use std::os::unix::fs::PermissionsExt;
    let mut notes = crate::undo::Notes::load();
    let mut staged: Vec<(PathBuf, &Path)> = Vec::new();
    // Files going back to their state before install: (file, its old text, dirs made).
    let mut restore: Vec<(&Path, crate::undo::Before)> = Vec::new();
    let stage = |path: &Path, text: &str| -> Result<PathBuf, String> {
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| format!("{}: {e}; nothing was changed", dir.display()))?;
        }
        let mut name = path.file_name().unwrap_or_default().to_os_string();
        name.push(".maos-tmp");
        let tmp = path.with_file_name(name);
        std::fs::write(&tmp, text)
            .map_err(|e| format!("{}: {e}; nothing was changed", path.display()))?;
        // The file keeps its mode (a new one gets `new_mode`, else the umask's).
        let mode = match std::fs::metadata(path) {
            Ok(m) => Some(m.permissions().mode()),
            Err(_) => new_mode,
        };
        if let Some(mode) = mode {
            std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))
                .map_err(|e| format!("{}: {e}; nothing was changed", tmp.display()))?;
        }
        Ok(tmp)
    };
    let mut result = Ok(());
    for (path, text) in files {
        let current = std::fs::read(path).ok();
        let mut text: &str = text;
        let back = match notes.before(path) {
            Some(before)
                if why == Why::Uninstall
                    && crate::undo::same_meaning(path, text, before.text.as_deref()) =>
            {
                Some(before)
            }
            _ => None,
        };
        if let Some(before) = &back {
            restore.push((path, before.clone()));
            match &before.text {
                // The old bytes, written like any other text.
                Some(old) => text = old,
                None => continue,
            }
        }
        if current.as_deref() == Some(text.as_bytes()) {
            continue;
        }
        if why == Why::Install {
            notes.note(
                path,
                crate::undo::Before {
                    text: current.map(|c| String::from_utf8_lossy(&c).into_owned()),
                },
                &crate::undo::missing_dirs(path.parent()),
            );
        }
        match stage(path, text) {
            Ok(tmp) => staged.push((tmp, path)),
            Err(e) => {
                result = Err(e);
                break;
            }
        }
    }
    if let Err(e) = result {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
        return Err(e);
    }
    // The notes first: a crash after a rename still knows what was there before.
    if let Err(e) = notes.save() {
        for (tmp, _) in &staged {
            let _ = std::fs::remove_file(tmp);
        }
        return Err(format!("{e}; nothing was changed"));
    }
    for (tmp, path) in &staged {
        std::fs::rename(tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    for (path, before) in restore {
        if before.text.is_none() {
            match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(format!("{}: {e}", path.display()));
                }
                _ => {}
            }
        }
        notes.forget(path);
    }
    if why == Why::Uninstall {
        // Only directories left empty go (one holding anything else fails to go).
        notes.prune_dirs();
    }
    notes.save()
}

/// Remove maos's groups; drop event lists and the `hooks` object that this leaves empty.
fn strip(settings: &mut Map<String, Value>) -> bool {
    strip_entries(settings, is_ours)
}

/// Remove the entries `ours` picks from every event list of `file`'s `hooks` object; drop the
/// lists this leaves empty, and `hooks` if it empties. Whether any went (a `hooks` that is not
/// an object has none). Every CLI's hooks file keeps its entries in such lists.
pub fn strip_entries(file: &mut Map<String, Value>, ours: impl Fn(&Value) -> bool) -> bool {
    let Some(Value::Object(hooks)) = file.get_mut("hooks") else {
        return false;
    };
    let mut changed = false;
    for list in hooks.values_mut() {
        if let Value::Array(entries) = list {
            let before = entries.len();
            entries.retain(|e| !ours(e));
            changed |= entries.len() != before;
        }
    }
    if changed {
        hooks.retain(|_, v| !v.as_array().is_some_and(Vec::is_empty));
        if hooks.is_empty() {
            file.remove("hooks");
        }
    }
    changed
}

/// Write `text` to `path` owner-only (0600), beside it first and then renamed: a file of the
/// user's that only they may read (a trust list, maos's notes). Its directory must exist.
pub fn write_owner_only(path: &Path, text: &str) -> Result<(), String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_extension("json.maos-tmp");
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    f.write_all(text.as_bytes())
        .map_err(|e| format!("{}: {e}", tmp.display()))?;
    std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))
}

pub fn install(path: &Path, cli: Cli) -> Result<String, String> {
    let settings = with_hooks(path, cli)?;
    if settings == read(path)? {
        return Ok(already(path));
    }
    write(path, &settings)?;
    Ok(format!("maos hooks installed in {}", path.display()))
}

/// What a second install says: nothing was written.
fn already(path: &Path) -> String {
    format!(
        "maos hooks already installed in {} (nothing changed)",
        path.display()
    )
}

/// The settings of `path` with maos's hooks for `cli` in place of any older ones.
fn with_hooks(path: &Path, cli: Cli) -> Result<Map<String, Value>, String> {
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
    Ok(settings)
}

pub fn uninstall(path: &Path) -> Result<String, String> {
    let mut settings = read(path)?;
    if !strip(&mut settings) {
        return Ok(format!("no maos hooks in {}", path.display()));
    }
    write_back_one(path, &settings)?;
    Ok(format!("maos hooks removed from {}", path.display()))
}

/// `maos install-hooks --codex`: the hooks, then Codex's trust of them (and of the project
/// `project`, whose `.codex/` Codex reads only when trusted; `None` for the user's hooks),
/// with the user's consent. Codex's `config.toml` is read first: if it is broken, nothing
/// is changed at all.
pub fn install_codex(
    path: &Path,
    project: Option<&Path>,
    consent: Consent,
) -> Result<String, String> {
    let settings = with_hooks(path, Cli::Codex)?;
    let mut config = codex::Config::read(&codex::home()?)?;
    let entries: Vec<codex::Entry> = codex::entries(path, &settings, is_maos_command)
        .into_iter()
        .filter(|e| config.status(e) != Status::Trusted)
        .collect();
    let flag = if project.is_none() { " --user" } else { "" };
    let project = project.filter(|r| !config.project_trusted(r));
    let mut lines = vec![match settings == read(path)? {
        true => already(path),
        false => format!("maos hooks installed in {}", path.display()),
    }];
    if !entries.is_empty() || project.is_some() {
        let what = trust_text(entries.len(), path, project);
        let given = match consent {
            Consent::Given => true,
            Consent::Ask => {
                codex::can_ask()
                    && codex::ask(&format!(
                        "Codex runs hooks only once they are trusted. Trust {what}, writing {}?",
                        config.path.display()
                    ))
            }
        };
        if given {
            config.trust(&entries);
            if let Some(root) = project {
                config.trust_project(root);
            }
            lines.push(format!(
                "Codex trusts {what}: written to {}",
                config.path.display()
            ));
        } else {
            lines.push(format!(
                "Codex will not run these hooks until they are trusted: run `maos install-hooks --codex{flag} --yes` (or trust them with /hooks in Codex)"
            ));
        }
    }
    let mut files = vec![(path, json_text(&settings)?)];
    if let Some(text) = config.text() {
        files.push((config.path.as_path(), text));
    }
    write_all(&files)?;
    Ok(lines.join("\n"))
}

/// "maos's N hooks (`maos hook --cli codex` in FILE) and the project ROOT".
fn trust_text(hooks: usize, path: &Path, project: Option<&Path>) -> String {
    let mut what = match hooks {
        0 => String::new(),
        n => format!(
            "maos's {n} hook{} (`{}` in {})",
            if n == 1 { "" } else { "s" },
            command(Cli::Codex),
            path.display()
        ),
    };
    if let Some(root) = project {
        if !what.is_empty() {
            what.push_str(" and ");
        }
        what.push_str(&format!(
            "the project {} (Codex then reads its .codex/ settings)",
            root.display()
        ));
    }
    what
}

/// `maos uninstall-hooks --codex`: the hooks, and the trust install wrote for them (and for
/// the project), nothing else.
pub fn uninstall_codex(path: &Path, project: Option<&Path>) -> Result<String, String> {
    let mut settings = read(path)?;
    let mut config = codex::Config::read(&codex::home()?)?;
    let entries = codex::entries(path, &settings, is_maos_command);
    let untrusted = config.untrust(&entries, project);
    let stripped = strip(&mut settings);
    if !stripped && !untrusted {
        return Ok(format!("no maos hooks in {}", path.display()));
    }
    let mut files = Vec::new();
    if stripped {
        files.push((path, json_text(&settings)?));
    }
    if let Some(text) = config.text() {
        files.push((config.path.as_path(), text));
    }
    write_back(&files)?;
    let mut done = format!("maos hooks removed from {}", path.display());
    if untrusted {
        done.push_str(&format!(
            "\ntheir trust removed from {}",
            config.path.display()
        ));
    }
    Ok(done)
}

/// What keeps Codex from running maos's hooks in `path`: hooks not trusted, trusted for
/// another command, or (for a project's file) the project not trusted. Empty when Codex
/// runs them.
pub fn codex_problems(path: &Path, project: Option<&Path>) -> Result<Vec<String>, String> {
    let settings = read(path)?;
    let config = codex::Config::read(&codex::home()?)?;
    let entries = codex::entries(path, &settings, is_maos_command);
    let count = |s: Status| entries.iter().filter(|e| config.status(e) == s).count();
    let mut out = Vec::new();
    let (untrusted, changed) = (count(Status::Untrusted), count(Status::Changed));
    if untrusted > 0 {
        out.push(format!("{untrusted} of maos's hooks not trusted"));
    }
    if changed > 0 {
        out.push(format!(
            "{changed} of maos's hooks changed since they were trusted"
        ));
    }
    if let Some(root) = project.filter(|r| !config.project_trusted(r)) {
        out.push(format!(
            "the project {} is not trusted, so Codex reads none of its hooks",
            root.display()
        ));
    }
    Ok(out)
}
