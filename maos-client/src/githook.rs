//! `maos install-hooks --git` / `uninstall-hooks --git`: git's `pre-commit` hook that runs
//! `maos git-check pre-commit` (see `gitcheck.rs`), so that a commit of files another agent
//! holds is refused for the tools that have no hooks of their own (a person at a terminal,
//! Aider, scripts).
//!
//! The hooks directory is git's own: `core.hooksPath` when set, else the repository's common
//! `hooks` (every worktree shares it), asked of `git` itself. An existing `pre-commit` is kept:
//! it is renamed to `pre-commit.maos-chained` (bytes, mode and owner untouched) and maos's hook
//! runs it first, failing when it fails. Uninstall renames it back, so the file is exactly what
//! it was; the notes of `crate::undo` say what install found and the directory it created.
//! Never on the hook path: running `git` here is fine.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::undo::{Before, Notes, missing_dirs};

/// The line that marks a `pre-commit` as maos's.
const MARK: &str = "# maos git hook: installed by `maos install-hooks --git`";
/// Where an existing `pre-commit` goes while maos's runs in its place.
pub const CHAINED: &str = "pre-commit.maos-chained";

/// Where the repository around `dir` keeps its hooks, and whether `core.hooksPath` names it.
pub struct HooksDir {
    pub dir: PathBuf,
    pub configured: bool,
}

impl HooksDir {
    pub fn pre_commit(&self) -> PathBuf {
        self.dir.join("pre-commit")
    }

    pub fn chained(&self) -> PathBuf {
        self.dir.join(CHAINED)
    }
}

/// `git ARGS` run in `dir`: its stdout (trimmed), or `Err` with one line. `Ok(None)` when git
/// ran and exited 1 with nothing to say (`git config` of an unset key).
fn git(dir: &Path, args: &[&str]) -> Result<Option<String>, String> {
    let out = Command::new("git")
        .args(args)
        .current_dir(dir)
        .output()
        .map_err(|e| match e.kind() {
            std::io::ErrorKind::NotFound => {
                "git is not installed (or not on PATH): the git hook needs it".to_string()
            }
            _ => format!("cannot run git: {e}"),
        })?;
    if out.status.success() {
        return Ok(Some(
            String::from_utf8_lossy(&out.stdout).trim_end().to_string(),
        ));
    }
    let err = String::from_utf8_lossy(&out.stderr);
    let line = err.lines().find(|l| !l.trim().is_empty()).unwrap_or("");
    if out.status.code() == Some(1) && line.is_empty() {
        return Ok(None);
    }
    Err(line.trim().to_string())
}

/// The hooks directory of the git repository around `dir` (a missing `core.hooksPath` is an
/// error; a missing `.git/hooks` is created by install).
pub fn hooks_dir(dir: &Path) -> Result<HooksDir, String> {
    let inside = git(dir, &["rev-parse", "--is-inside-work-tree"]);
    match inside {
        Ok(Some(ref t)) if t == "true" => {}
        Ok(_) => {
            return Err(format!(
                "{} is not in a git working tree: `maos install-hooks --git` installs the pre-commit hook of a git repository",
                dir.display()
            ));
        }
        Err(e) if e.starts_with("git is not installed") || e.starts_with("cannot run git") => {
            return Err(e);
        }
        Err(_) => {
            return Err(format!(
                "{} is not in a git repository: `maos install-hooks --git` installs the pre-commit hook of a git repository",
                dir.display()
            ));
        }
    }
    let configured = git(dir, &["config", "--get", "core.hooksPath"])?.is_some();
    let path = git(dir, &["rev-parse", "--git-path", "hooks"])?
        .filter(|p| !p.is_empty())
        .ok_or("git did not say where its hooks are")?;
    // Relative to the directory git ran in.
    let path = dir.join(path);
    let path = std::fs::canonicalize(&path).unwrap_or_else(|_| lexical(&path));
    Ok(HooksDir {
        dir: path,
        configured,
    })
}

fn lexical(p: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in p.components() {
        match c {
            std::path::Component::ParentDir => {
                out.pop();
            }
            std::path::Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// The `maos` the hook runs: this one, by its absolute path (a GUI's or a script's PATH may
/// lack it), else the one on PATH.
fn maos_path() -> String {
    std::env::current_exe()
        .and_then(std::fs::canonicalize)
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_else(|_| "maos".to_string())
}

/// `s` as one word of sh.
pub fn sh_quote(s: &str) -> String {
    let plain = !s.is_empty()
        && s.bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"/._-+,:@=%".contains(&b));
    if plain {
        s.to_string()
    } else {
        format!("'{}'", s.replace('\'', r"'\''"))
    }
}

/// The hook's text, running `maos`.
fn script(maos: &str) -> String {
    format!(
        r#"#!/bin/sh
{MARK}
# Refuses a commit of files another live agent holds (a write lock in maos); see
# `maos git-check --help`. Commit anyway: `git commit --no-verify`, or MAOS_GIT_CHECK=off.
# `maos uninstall-hooks --git` puts back what was here before.
chained="$(dirname -- "$0")/{CHAINED}"
if [ -x "$chained" ]; then
    "$chained" "$@" || exit $?
fi
[ "$MAOS_GIT_CHECK" = off ] && exit 0
maos={maos}
[ -x "$maos" ] || maos=maos
if ! command -v "$maos" >/dev/null 2>&1; then
    echo "maos pre-commit: maos is not installed ({maos} is gone, none on PATH), so it cannot tell whether this commit takes files other agents hold; commit with --no-verify, or remove this hook" >&2
    exit 1
fi
exec "$maos" git-check pre-commit
"#,
        maos = sh_quote(maos)
    )
}

/// Whether the file at `path` is maos's hook (any version's).
pub fn is_ours(path: &Path) -> bool {
    std::fs::read(path).is_ok_and(|t| {
        String::from_utf8_lossy(&t)
            .lines()
            .any(|l| l.trim() == MARK)
    })
}

/// Something is at `path` (a dangling link too).
fn exists(path: &Path) -> bool {
    std::fs::symlink_metadata(path).is_ok()
}

/// How maos's hook stands in the repository around `dir` (for `maos doctor`).
pub enum Status {
    No,
    /// Installed: the `pre-commit` path, whether it runs an earlier hook first, and the maos
    /// binary it runs when that is gone.
    Yes {
        path: PathBuf,
        chained: bool,
        gone: Option<String>,
    },
}

pub fn status(dir: &Path) -> Result<Status, String> {
    let hooks = hooks_dir(dir)?;
    let pre = hooks.pre_commit();
    if !is_ours(&pre) {
        return Ok(Status::No);
    }
    let text = std::fs::read_to_string(&pre).unwrap_or_default();
    let gone = text
        .lines()
        .find_map(|l| l.strip_prefix("maos="))
        .map(|m| m.trim_matches('\'').to_string())
        .filter(|m| m.starts_with('/') && !Path::new(m).exists());
    Ok(Status::Yes {
        path: pre,
        chained: exists(&hooks.chained()),
        gone,
    })
}

/// Write `text` beside `path` (mode 0755), to be renamed into place.
fn stage(path: &Path, text: &str) -> Result<PathBuf, String> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let tmp = path.with_file_name("pre-commit.maos-tmp");
    let _ = std::fs::remove_file(&tmp);
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o755)
        .open(&tmp)
        .map_err(|e| format!("{}: {e}; nothing was changed", path.display()))?;
    if let Err(e) = f.write_all(text.as_bytes()).and_then(|()| f.sync_all()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}; nothing was changed", path.display()));
    }
    // The umask may have taken the execute bits: git runs only an executable hook.
    use std::os::unix::fs::PermissionsExt;
    if let Err(e) = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755)) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}; nothing was changed", path.display()));
    }
    Ok(tmp)
}

/// `maos install-hooks --git` in the repository around `dir`.
pub fn install(dir: &Path) -> Result<(PathBuf, String), String> {
    let hooks = hooks_dir(dir)?;
    let pre = hooks.pre_commit();
    if !hooks.dir.is_dir() && (hooks.configured || exists(&hooks.dir)) {
        return Err(format!(
            "core.hooksPath names {}, which is not a directory: create it or fix core.hooksPath (`git config core.hooksPath`); nothing was changed",
            hooks.dir.display()
        ));
    }
    let text = script(&maos_path());
    let current = std::fs::read(&pre).ok();
    if current.as_deref() == Some(text.as_bytes()) {
        return Ok((
            pre.clone(),
            format!(
                "maos git hook already installed in {} (nothing changed)",
                pre.display()
            ),
        ));
    }
    let mut notes = Notes::load();
    let dirs = missing_dirs(Some(&hooks.dir));
    let ours = is_ours(&pre);
    // Someone's hook to keep: it moves aside and runs first.
    let keep = exists(&pre) && !ours;
    if keep && exists(&hooks.chained()) {
        return Err(format!(
            "{} is in the way of keeping your pre-commit (it would run it first): move it away, then run `maos install-hooks --git` again; nothing was changed",
            hooks.chained().display()
        ));
    }
    if !dirs.is_empty() {
        std::fs::create_dir_all(&hooks.dir)
            .map_err(|e| format!("{}: {e}; nothing was changed", hooks.dir.display()))?;
    }
    let undo_dirs = || {
        for d in &dirs {
            let _ = std::fs::remove_dir(d);
        }
    };
    let tmp = match stage(&pre, &text) {
        Ok(t) => t,
        Err(e) => {
            undo_dirs();
            return Err(e);
        }
    };
    if !ours {
        notes.note(
            &pre,
            Before {
                text: current.map(|c| String::from_utf8_lossy(&c).into_owned()),
            },
            &dirs,
        );
        if keep {
            notes.note(&hooks.chained(), Before { text: None }, &[]);
        }
    }
    // The notes first: a crash after a rename still knows what was there.
    if let Err(e) = notes.save() {
        let _ = std::fs::remove_file(&tmp);
        undo_dirs();
        return Err(format!("{e}; nothing was changed"));
    }
    if keep && let Err(e) = std::fs::rename(&pre, hooks.chained()) {
        let _ = std::fs::remove_file(&tmp);
        return Err(format!("{}: {e}; nothing was changed", pre.display()));
    }
    if let Err(e) = std::fs::rename(&tmp, &pre) {
        let _ = std::fs::remove_file(&tmp);
        if keep {
            let _ = std::fs::rename(hooks.chained(), &pre);
        }
        return Err(format!("{}: {e}; nothing was changed", pre.display()));
    }
    let mut done = format!("maos git hook installed in {}", pre.display());
    if keep {
        done.push_str(&format!(
            " (your pre-commit runs first, kept as {CHAINED}; `maos uninstall-hooks --git` puts it back)"
        ));
    } else if ours {
        done = format!("maos git hook updated in {}", pre.display());
    }
    Ok((pre, done))
}

/// `maos uninstall-hooks --git`: maos's hook goes; the `pre-commit` it kept comes back as it
/// was (the same file, renamed back), or none when there was none.
pub fn uninstall(dir: &Path) -> Result<(PathBuf, String), String> {
    let hooks = hooks_dir(dir)?;
    let pre = hooks.pre_commit();
    if !is_ours(&pre) {
        return Ok((
            pre.clone(),
            format!("no maos git hook in {}", pre.display()),
        ));
    }
    let mut notes = Notes::load();
    let chained = hooks.chained();
    let back = if exists(&chained) {
        std::fs::rename(&chained, &pre).map_err(|e| format!("{}: {e}", pre.display()))?;
        " (your earlier pre-commit is back)"
    } else if let Some(Before { text: Some(old) }) = notes.before(&pre) {
        // Kept only in the notes (someone removed the chained file): its text comes back.
        use std::os::unix::fs::PermissionsExt;
        let tmp = stage(&pre, &old)?;
        let _ = std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o755));
        std::fs::rename(&tmp, &pre).map_err(|e| format!("{}: {e}", pre.display()))?;
        " (your earlier pre-commit is back)"
    } else {
        std::fs::remove_file(&pre).map_err(|e| format!("{}: {e}", pre.display()))?;
        ""
    };
    notes.forget(&pre);
    notes.forget(&chained);
    notes.prune_dirs();
    notes.save()?;
    Ok((
        pre.clone(),
        format!("maos git hook removed from {}{back}", pre.display()),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_are_quoted_for_sh_only_when_needed() {
        assert_eq!(sh_quote("src/x.rs"), "src/x.rs");
        assert_eq!(sh_quote("a b"), "'a b'");
        assert_eq!(sh_quote("it's"), r"'it'\''s'");
        assert_eq!(sh_quote("$(rm)"), "'$(rm)'");
        assert_eq!(sh_quote(""), "''");
    }

    #[test]
    fn the_script_is_marked_ours_and_runs_the_kept_hook_first() {
        let s = script("/opt/my maos/maos");
        assert!(s.starts_with("#!/bin/sh\n"));
        assert!(s.lines().any(|l| l == MARK));
        assert!(s.contains("maos='/opt/my maos/maos'\n"));
        let chained = s.find(CHAINED).expect("runs the kept hook");
        assert!(chained < s.find("git-check pre-commit").expect("runs the check"));
    }
}
