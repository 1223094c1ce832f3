//! GitHub Copilot CLI: where maos's hooks live, and `install-hooks --copilot` /
//! `uninstall-hooks --copilot`.
//!
//! Copilot (1.0.102) reads every `*.json` under the repository's `.github/hooks/` and under
//! the user's `~/.copilot/hooks/` (`$COPILOT_HOME/hooks/`): `{"version":1,"hooks":{"<event>":
//! [{"type":"command","bash":…,"env":{…},"matcher":…,"timeoutSec":…}]}}` (`matcher` an anchored
//! regular expression on the tool's name). maos's are in a file of its own, `maos.json`; other
//! entries a person adds there are kept. The repository's hooks run only in a folder Copilot
//! trusts: `trustedFolders` of `~/.copilot/config.json` (a folder or one above it), or, for
//! one `-p` run, `--trust-folder`, `COPILOT_ALLOW_ALL=true` or
//! `GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true`. The user's hooks need no trust. maos trusts
//! the project only with the user's consent (a terminal question, or `--yes`), and notes that
//! it did in `$MAOS_HOME/copilot-trust.json`, so that uninstall removes that folder and no
//! other.

use std::path::{Path, PathBuf};

use maos_proto::{Cli, paths};
use serde_json::{Map, Value, json};

use crate::codex;
use crate::hook::input::copilot::{EVENT_VAR, EVENTS, MATCHER};
use crate::install::{self, Consent, Installed};

/// Seconds Copilot gives maos's hook (a timeout lets the tool run).
const TIMEOUT_S: u64 = 10;
/// The file in maos's home listing the folders maos trusted in Copilot.
const RECORD: &str = "copilot-trust.json";
const TRUSTED: &str = "trustedFolders";

/// Copilot's own directory: `$COPILOT_HOME`, else `~/.copilot`.
fn copilot_home() -> Result<PathBuf, String> {
    if let Some(h) = std::env::var_os("COPILOT_HOME").filter(|h| !h.is_empty()) {
        return Ok(PathBuf::from(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".copilot"))
        .ok_or_else(|| "HOME is not set: cannot find GitHub Copilot CLI's settings".to_string())
}

/// The file maos's hooks for GitHub Copilot CLI are in: the project's (`.github/hooks/maos.json`) or the user's
/// (`~/.copilot/hooks/maos.json`, under `$COPILOT_HOME` when set).
pub fn settings_path(root: &Path, user: bool) -> Result<PathBuf, String> {
    Ok(match user {
        true => copilot_home()?.join("hooks/maos.json"),
        false => root.join(".github/hooks/maos.json"),
    })
}

/// The command of maos's entries.
fn command() -> String {
    install::command(Cli::Copilot)
}

/// maos's entry for Copilot's `event`: the event in [`EVENT_VAR`] (Copilot's input does not
/// name it), tool events only for the tools maos reads.
fn entry(event: &str) -> Value {
    let mut e = json!({
        "type": "command",
        "bash": command(),
        "env": { EVENT_VAR: event },
        "timeoutSec": TIMEOUT_S,
    });
    if matches!(event, "preToolUse" | "postToolUse") {
        e["matcher"] = json!(MATCHER);
    }
    e
}

fn is_ours(entry: &Value) -> bool {
    entry["bash"]
        .as_str()
        .is_some_and(|c| c.trim_start().starts_with("maos hook"))
}

/// How far maos's hooks are installed in `path`.
pub fn installed(path: &Path) -> Result<Installed, String> {
    let file = install::read(path)?;
    let current = |event: &str| {
        file.get("hooks")
            .and_then(|h| h.get(event))
            .and_then(Value::as_array)
            .is_some_and(|list| list.iter().any(|e| is_ours(e) && *e == entry(event)))
    };
    let missing: Vec<&'static str> = EVENTS
        .iter()
        .map(|(event, _)| *event)
        .filter(|event| !current(event))
        .collect();
    Ok(match missing.len() {
        0 => Installed::Yes,
        n if n == EVENTS.len() => Installed::No,
        _ => Installed::Partly(missing),
    })
}

/// Remove maos's entries; drop the lists this leaves empty (and `hooks` if it empties).
/// Whether any went; a `hooks` that is not an object is refused, naming the file.
fn strip(file: &mut Map<String, Value>, path: &Path) -> Result<bool, String> {
    if file.get("hooks").is_some_and(|h| !h.is_object()) {
        return Err(format!(
            "{}: \"hooks\" is not an object; left unchanged",
            path.display()
        ));
    }
    Ok(install::strip_entries(file, is_ours))
}

/// The hooks file with maos's current entries (an older maos's replaced).
fn with_hooks(path: &Path) -> Result<Map<String, Value>, String> {
    let mut file = install::read(path)?;
    strip(&mut file, path)?;
    file.entry("version").or_insert(json!(1));
    let hooks = file
        .entry("hooks")
        .or_insert_with(|| Value::Object(Map::new()));
    let Value::Object(hooks) = hooks else {
        return Err(format!(
            "{}: \"hooks\" is not an object; left unchanged",
            path.display()
        ));
    };
    for (event, _) in EVENTS {
        match hooks
            .entry(*event)
            .or_insert_with(|| Value::Array(Vec::new()))
        {
            Value::Array(list) => list.push(entry(event)),
            _ => {
                return Err(format!(
                    "{}: hooks.{event} is not a list; left unchanged",
                    path.display()
                ));
            }
        }
    }
    Ok(file)
}

/// Copilot's `config.json` (it starts with `//` comment lines, which it writes itself).
struct Config {
    path: PathBuf,
    /// The comment lines before the object, kept as they are.
    head: String,
    object: Map<String, Value>,
}

impl Config {
    fn read() -> Result<Config, String> {
        let path = copilot_home()?.join("config.json");
        let text = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("{}: {e}", path.display())),
        };
        let body_at = text
            .split_inclusive('\n')
            .take_while(|l| l.trim_start().starts_with("//") || l.trim().is_empty())
            .map(str::len)
            .sum::<usize>();
        let (head, body) = text.split_at(body_at);
        let object = match serde_json::from_str::<Value>(body) {
            _ if body.trim().is_empty() => Map::new(),
            Ok(Value::Object(m)) => m,
            Ok(_) => {
                return Err(format!(
                    "{}: not a JSON object; left unchanged",
                    path.display()
                ));
            }
            Err(e) => {
                return Err(format!(
                    "{}: not valid JSON ({e}); left unchanged",
                    path.display()
                ));
            }
        };
        if object.get(TRUSTED).is_some_and(|t| !t.is_array()) {
            return Err(format!(
                "{}: {TRUSTED} is not a list; left unchanged",
                path.display()
            ));
        }
        Ok(Config {
            path,
            head: head.to_string(),
            object,
        })
    }

    fn folders(&self) -> Vec<String> {
        self.object
            .get(TRUSTED)
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .filter_map(|f| f.as_str().map(str::to_string))
            .collect()
    }

    /// The trusted folder that covers `root` (it or a folder above it), if any.
    fn covering(&self, root: &Path) -> Option<String> {
        let here = real(root);
        self.folders()
            .into_iter()
            .find(|f| here.starts_with(real(Path::new(f))))
    }

    fn text(&self) -> Result<String, String> {
        Ok(format!(
            "{}{}",
            self.head,
            install::json_text(&self.object)?
        ))
    }
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// maos's note of the folders it trusted: owner-only, written beside itself and renamed.
fn write_record(path: &Path, noted: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        paths::private_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    install::write_owner_only(path, &install::json_text(noted)?)
}

fn record_path() -> Result<PathBuf, String> {
    Ok(paths::home_dir().map_err(|e| e.to_string())?.join(RECORD))
}

/// The one command that makes Copilot run maos's project hooks in its folder.
pub fn fix() -> String {
    "maos install-hooks --copilot --yes".to_string()
}

/// Whether Copilot runs maos's hooks in `root`, for `doctor`: the repository's settings may
/// turn every hook off (the user's hooks too), and the project's hooks need the folder's
/// trust. `None` when there is nothing to say (no hook of maos's, or only the user's and
/// nothing turns them off); else whether they run and the line that says why.
pub fn trust_check(root: &Path) -> Option<(bool, String)> {
    let here = |user| {
        settings_path(root, user)
            .and_then(|p| installed(&p))
            .is_ok_and(|i| i != Installed::No)
    };
    let (project, user) = (here(false), here(true));
    if let Some(file) = (project || user).then(|| disabled_by(root)).flatten() {
        return Some((
            false,
            format!(
                "{}: disableAllHooks is true: GitHub Copilot CLI runs no hook in {} (maos's neither); remove it",
                file.display(),
                root.display()
            ),
        ));
    }
    if !project {
        return None;
    }
    Some(match Config::read() {
        Err(e) => (false, e),
        Ok(config) => match config.covering(root) {
            Some(folder) => (
                true,
                format!("{folder} trusted in {}", config.path.display()),
            ),
            None => (
                false,
                format!(
                    "{} is not trusted in {}: GitHub Copilot CLI runs none of its .github/hooks (a `-p` run only with --trust-folder or COPILOT_ALLOW_ALL=true); run `{}`",
                    root.display(),
                    config.path.display(),
                    fix()
                ),
            ),
        },
    })
}

/// The repository's settings file that turns every hook off (`disableAllHooks: true` in
/// `.github/copilot/settings.json` or `settings.local.json`; Copilot 1.0.102 then runs none).
fn disabled_by(root: &Path) -> Option<PathBuf> {
    ["settings.json", "settings.local.json"]
        .iter()
        .map(|name| root.join(".github/copilot").join(name))
        .find(|p| {
            install::read(p).is_ok_and(|s| s.get("disableAllHooks") == Some(&Value::Bool(true)))
        })
}

/// `install-hooks --copilot`: the line to print. The hooks into `path`, then (for the
/// project's) the folder's trust: asked on a terminal, given with `--yes`, else only said.
/// Broken input (either file) changes nothing.
pub fn install(root: &Path, path: &Path, user: bool, consent: Consent) -> Result<String, String> {
    let file = with_hooks(path)?;
    let mut config = Config::read()?;
    let record = record_path()?;
    let mut noted = install::read(&record)?;
    let mut lines = vec![match install::read(path)? == file {
        true => format!(
            "maos hooks already installed in {} (nothing changed)",
            path.display()
        ),
        false => format!("maos hooks installed in {}", path.display()),
    }];
    let mut files = vec![(path.to_path_buf(), install::json_text(&file)?)];
    if !user && config.covering(root).is_none() {
        let given = match consent {
            Consent::Given => true,
            Consent::Ask => {
                codex::can_ask()
                    && codex::ask(&format!(
                        "GitHub Copilot CLI runs a repository's hooks only in folders you trust. Trust {} (adds it to {TRUSTED} in {})?",
                        root.display(),
                        config.path.display()
                    ))
            }
        };
        if given {
            let key = root.to_string_lossy().into_owned();
            let list = config
                .object
                .entry(TRUSTED)
                .or_insert_with(|| Value::Array(Vec::new()));
            if let Value::Array(list) = list {
                list.push(Value::from(key.clone()));
            }
            files.push((config.path.clone(), config.text()?));
            noted.insert(key, Value::from(config.path.to_string_lossy().into_owned()));
            lines.push(format!(
                "{} trusted in {} (uninstall-hooks --copilot removes it)",
                root.display(),
                config.path.display()
            ));
        } else {
            lines.push(format!(
                "GitHub Copilot CLI will not run these hooks until {} is trusted: run `{}` (or trust the folder when Copilot asks)",
                root.display(),
                fix()
            ));
        }
    }
    let refs: Vec<(&Path, String)> = files
        .iter()
        .map(|(p, t)| (p.as_path(), t.clone()))
        .collect();
    install::write_all(&refs)?;
    if files.len() > 1 {
        write_record(&record, &noted)?;
    }
    Ok(lines.join("\n"))
}

/// `uninstall-hooks --copilot`: maos's entries out of `path` (the file goes when nothing else
/// is in it), and the trust maos added for `root` once no maos hook of Copilot is left for it.
pub fn uninstall(root: &Path, path: &Path) -> Result<String, String> {
    let mut file = install::read(path)?;
    let mut config = Config::read()?;
    let record = record_path()?;
    let mut noted = install::read(&record)?;
    let stripped = strip(&mut file, path)?;
    let mut lines = vec![match stripped {
        true => format!("maos hooks removed from {}", path.display()),
        false => format!("no maos hooks in {}", path.display()),
    }];
    let mut files: Vec<(PathBuf, String)> = Vec::new();
    if stripped {
        let empty = file
            .get("hooks")
            .and_then(Value::as_object)
            .is_none_or(Map::is_empty)
            && file.keys().all(|k| k == "hooks" || k == "version");
        if empty {
            // maos's own file, nothing else in it: it goes (its directories too when install
            // made them and nothing else is in them).
            file = Map::new();
        }
        files.push((path.to_path_buf(), install::json_text(&file)?));
    }
    let key = root.to_string_lossy().into_owned();
    let left = [false, true].iter().any(|user| {
        settings_path(root, *user)
            .is_ok_and(|p| p != path && installed(&p).is_ok_and(|i| i != Installed::No))
    });
    let mut untrusted = false;
    if !left && noted.contains_key(&key) {
        if let Some(Value::Array(list)) = config.object.get_mut(TRUSTED) {
            let before = list.len();
            list.retain(|f| f.as_str() != Some(key.as_str()));
            untrusted = list.len() != before;
            if list.is_empty() {
                config.object.remove(TRUSTED);
            }
        }
        if untrusted {
            files.push((config.path.clone(), config.text()?));
            lines.push(format!(
                "{} no longer trusted in {}",
                root.display(),
                config.path.display()
            ));
        }
        noted.remove(&key);
    }
    let refs: Vec<(&Path, String)> = files
        .iter()
        .map(|(p, t)| (p.as_path(), t.clone()))
        .collect();
    install::write_back(&refs)?;
    // A hooks file left empty that install did not make (so not removed above) goes too.
    if stripped && file.is_empty() && std::fs::read_to_string(path).is_ok_and(|t| t.trim() == "{}")
    {
        std::fs::remove_file(path).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    if noted.is_empty() {
        match std::fs::remove_file(&record) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(format!("{}: {e}", record.display()));
            }
            _ => {}
        }
    } else {
        write_record(&record, &noted)?;
    }
    Ok(lines.join("\n"))
}
