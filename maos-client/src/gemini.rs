//! Gemini CLI's folder trust, as `maos install-hooks --gemini`, `uninstall-hooks --gemini` and
//! `doctor` need it. Gemini CLI runs the hooks of its settings only in a trusted folder (a
//! headless run in an untrusted one exits 55 before any hook). Trust lives in
//! `~/.gemini/trustedFolders.json` (`$GEMINI_CLI_TRUSTED_FOLDERS_PATH`, or under
//! `$GEMINI_CLI_HOME` instead of `$HOME`): `{"/abs/dir": "TRUST_FOLDER" | "TRUST_PARENT" |
//! "DO_NOT_TRUST"}`, the longest rule containing the folder deciding. maos adds a
//! `TRUST_FOLDER` rule for the project only with the user's consent (a terminal question, or
//! `--yes`), and notes that it did in `$MAOS_HOME/gemini-trust.json`, so that uninstall
//! removes that rule and no other.

use std::path::{Path, PathBuf};

use maos_proto::{Cli, paths};
use serde_json::{Map, Value};

use crate::codex;
use crate::install::{self, Consent, Installed};

const TRUST_FOLDER: &str = "TRUST_FOLDER";
/// The file in maos's home listing the folders maos trusted in Gemini CLI.
const RECORD: &str = "gemini-trust.json";

/// Gemini CLI's trusted-folders file.
pub fn trust_file() -> Result<PathBuf, String> {
    if let Some(p) = std::env::var_os("GEMINI_CLI_TRUSTED_FOLDERS_PATH").filter(|p| !p.is_empty()) {
        return Ok(PathBuf::from(p));
    }
    let home = ["GEMINI_CLI_HOME", "HOME"]
        .iter()
        .find_map(|k| std::env::var_os(k).filter(|h| !h.is_empty()))
        .ok_or("HOME is not set: cannot find Gemini CLI's trustedFolders.json")?;
    Ok(PathBuf::from(home).join(".gemini/trustedFolders.json"))
}

/// What Gemini CLI makes of a folder.
#[derive(Debug, PartialEq, Eq)]
pub enum Trust {
    /// Trusted by this rule (its path).
    Trusted(String),
    /// Refused by a `DO_NOT_TRUST` rule (its path).
    Distrusted(String),
    /// No rule: a headless run refuses the folder, an interactive one asks.
    Unknown,
    /// The user's settings turn folder trust off: hooks run everywhere.
    Off,
}

/// Write beside it and rename, owner-only (as Gemini CLI writes it).
fn write_object(path: &Path, v: &Map<String, Value>) -> Result<(), String> {
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    install::write_owner_only(path, &install::json_text(v)?)
}

/// The rules of the trust file, each checked as Gemini CLI checks them (a value that is not a
/// trust level makes Gemini CLI refuse to start).
fn rules(file: &Path) -> Result<Map<String, Value>, String> {
    let rules = install::read(file)?;
    for (path, level) in &rules {
        if !matches!(
            level.as_str(),
            Some("TRUST_FOLDER" | "TRUST_PARENT" | "DO_NOT_TRUST")
        ) {
            return Err(format!(
                "{}: {path:?} has trust level {level}, not TRUST_FOLDER, TRUST_PARENT or DO_NOT_TRUST (Gemini CLI refuses the file too); left unchanged",
                file.display()
            ));
        }
    }
    Ok(rules)
}

fn real(p: &Path) -> PathBuf {
    std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf())
}

/// How Gemini CLI trusts `root` (longest matching rule; `TRUST_PARENT` covers the rule's
/// parent directory), or that trust is off in the user's settings.
pub fn trust(root: &Path) -> Result<Trust, String> {
    let settings = install::settings_path(root, true, Cli::Gemini)?;
    let off = install::read(&settings).ok().and_then(|s| {
        s.get("security")?
            .get("folderTrust")?
            .get("enabled")?
            .as_bool()
    }) == Some(false);
    let rules = rules(&trust_file()?)?;
    if off {
        return Ok(Trust::Off);
    }
    let here = real(root);
    let best = rules
        .iter()
        .filter(|(rule, level)| {
            let dir = Path::new(rule.as_str());
            let dir = match level.as_str() {
                Some("TRUST_PARENT") => dir.parent().unwrap_or(dir),
                _ => dir,
            };
            here.starts_with(real(dir))
        })
        .max_by_key(|(rule, _)| rule.len());
    Ok(match best {
        Some((rule, level)) if level == "DO_NOT_TRUST" => Trust::Distrusted(rule.clone()),
        Some((rule, _)) => Trust::Trusted(rule.clone()),
        None => Trust::Unknown,
    })
}

fn record_path() -> Result<PathBuf, String> {
    Ok(paths::home_dir().map_err(|e| e.to_string())?.join(RECORD))
}

/// Add `root` as a trusted folder and note that maos added it.
fn add(root: &Path, file: &Path) -> Result<(), String> {
    let key = root.to_string_lossy().into_owned();
    let mut rules = rules(file)?;
    rules.insert(key.clone(), Value::from(TRUST_FOLDER));
    let record = record_path()?;
    let mut noted = install::read(&record)?;
    install::write_private(&[(file, install::json_text(&rules)?)])?;
    noted.insert(key, Value::from(file.to_string_lossy().into_owned()));
    if let Some(dir) = record.parent() {
        paths::private_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    }
    write_object(&record, &noted)
}

/// The one command that makes Gemini CLI run maos's hooks in `root`.
pub fn fix(user: bool) -> String {
    let user = if user { " --user" } else { "" };
    format!("maos install-hooks --gemini{user} --yes")
}

/// `maos install-hooks --gemini`: the hooks into `settings`, then the folder's trust (asked
/// on a terminal, given with `--yes`, else only said). Broken input (either file) changes
/// nothing.
pub fn install(
    root: &Path,
    settings: &Path,
    user: bool,
    consent: Consent,
) -> Result<String, String> {
    let file = trust_file()?;
    let now = trust(root)?;
    // maos's own note of what it trusted: a broken one stops install before anything changes.
    install::read(&record_path()?)?;
    let mut done = vec![install::install(settings, Cli::Gemini)?];
    match now {
        Trust::Trusted(_) | Trust::Off => {}
        Trust::Distrusted(rule) => done.push(format!(
            "Gemini CLI will not run these hooks: {} distrusts {rule} (DO_NOT_TRUST); maos leaves that to you",
            file.display()
        )),
        Trust::Unknown => {
            let given = match consent {
                Consent::Given => true,
                Consent::Ask => {
                    codex::can_ask()
                        && codex::ask(&format!(
                            "Gemini CLI runs hooks only in folders you trust. Trust {} (adds it to {})?",
                            root.display(),
                            file.display()
                        ))
                }
            };
            if given {
                add(root, &file)?;
                done.push(format!(
                    "{} trusted in {} (uninstall-hooks --gemini removes it)",
                    root.display(),
                    file.display()
                ));
            } else {
                done.push(format!(
                    "Gemini CLI will not run these hooks until {} is trusted: run `{}`",
                    root.display(),
                    fix(user)
                ));
            }
        }
    }
    Ok(done.join("\n"))
}

/// `maos uninstall-hooks --gemini`: the hooks out of `settings`, and the trust maos added for
/// `root` once no maos hook of Gemini CLI is left for it (project or user settings).
pub fn uninstall(root: &Path, settings: &Path) -> Result<String, String> {
    let file = trust_file()?;
    let mut rules = rules(&file)?;
    let record = record_path()?;
    let mut noted = install::read(&record)?;
    let mut done = vec![install::uninstall(settings)?];
    let key = root.to_string_lossy().into_owned();
    let left = [false, true].iter().any(|user| {
        install::settings_path(root, *user, Cli::Gemini)
            .and_then(|p| install::installed(&p, Cli::Gemini))
            .is_ok_and(|i| i != Installed::No)
    });
    if !left && noted.contains_key(&key) {
        // Only the rule maos wrote: a rule the user changed since is theirs.
        if rules.get(&key).and_then(Value::as_str) == Some(TRUST_FOLDER) {
            rules.remove(&key);
            install::write_back_private(&[(&file, install::json_text(&rules)?)])?;
            done.push(format!(
                "{} no longer trusted in {}",
                root.display(),
                file.display()
            ));
        }
        noted.remove(&key);
        if noted.is_empty() {
            // No `{}` left behind: the note goes with the last rule it noted.
            std::fs::remove_file(&record).map_err(|e| format!("{}: {e}", record.display()))?;
        } else {
            write_object(&record, &noted)?;
        }
    }
    Ok(done.join("\n"))
}
