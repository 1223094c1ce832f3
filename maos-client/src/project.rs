//! Which project a command or a hook works on, when nothing marks one yet: `maos init` (a
//! person makes a directory a project) and the hook's rule (an agent CLI working in a
//! directory outside every project makes that directory one, except `$HOME` and `/`).

use std::path::{Path, PathBuf};

use maos_proto::paths::{self, MARKER, find_project};

use crate::failure::{Res, usage};

/// Create `dir/.maos/`, the marker that makes `dir` a project outside git.
fn mark(dir: &Path) -> Result<(), String> {
    std::fs::create_dir(dir.join(MARKER))
        .or_else(|e| match e.kind() {
            std::io::ErrorKind::AlreadyExists => Ok(()),
            _ => Err(e),
        })
        .map_err(|e| format!("cannot create {}: {e}", dir.join(MARKER).display()))
}

/// `$HOME` or `/`: never a project unless someone says so.
fn never_implicit(dir: &Path) -> bool {
    paths::never_implicit(dir, paths::canonical_home().as_deref())
}

/// `maos init [DIR]`: make DIR (default: the current directory) a project by creating
/// `DIR/.maos/`. Inside a git repository there is nothing to do (the repository is the
/// project): said, exit 0. Nothing is sent to the daemon: the project's state is created by
/// its first session.
pub fn init(dir: Option<&Path>, json: bool) -> Res {
    let dir = match dir {
        Some(d) => d.to_path_buf(),
        None => std::env::current_dir()
            .map_err(|e| usage(format!("cannot read the current directory: {e}")))?,
    };
    let dir = std::fs::canonicalize(&dir).map_err(|e| usage(format!("{}: {e}", dir.display())))?;
    if !dir.is_dir() {
        return Err(usage(format!("{} is not a directory", dir.display())));
    }
    let before = find_project(&dir);
    let (created, message) = match &before {
        Some(root) if *root == dir => (
            false,
            format!("{} is a maos project already", dir.display()),
        ),
        Some(root) if root.join(".git").exists() => (
            false,
            format!(
                "{} is in the git repository {}, which is its maos project already; nothing to do",
                dir.display(),
                root.display()
            ),
        ),
        _ => {
            mark(&dir).map_err(usage)?;
            let within = match &before {
                Some(outer) => format!(" (a project of its own inside {})", outer.display()),
                None => String::new(),
            };
            (
                true,
                format!(
                    "{} is now a maos project{within}: created {}",
                    dir.display(),
                    dir.join(MARKER).display()
                ),
            )
        }
    };
    if json {
        let root = find_project(&dir).unwrap_or(dir);
        outln!(
            "{}",
            serde_json::json!({ "root": root, "created": created, "message": message })
        );
    } else {
        outln!("{message}");
    }
    Ok(())
}

/// The project of a hook call that starts in `start` (the CLI's working directory): the one
/// around it, else `start` itself, made a project on the spot (`start/.maos/` created, so that
/// `maos ps` there and below finds it; `Some` message to tell the user). Where the marker
/// cannot be written the directory is the project all the same (locks still hold), and the
/// window's start says how to see it. `$HOME` and `/` are never made one: `Err` says why, and
/// the hook lets the call through unrecorded.
pub fn for_hook(start: &Path, event: &str) -> Result<(String, Option<String>), String> {
    if let Some(root) = find_project(start) {
        return Ok((root.to_string_lossy().into_owned(), None));
    }
    let dir = std::fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    if never_implicit(&dir) {
        return Err(format!(
            "{} is not in a maos project, and maos never makes your home directory or / one by itself; run `maos init` there to make it one, or start the CLI in a project",
            dir.display()
        ));
    }
    let told = match mark(&dir) {
        Ok(()) => Some(format!(
            "made {} a maos project (created {}/); `maos ps` there shows its agents",
            dir.display(),
            MARKER
        )),
        Err(why) => (event == "SessionStart").then(|| {
            format!(
                "recording this window in the project {0}, but {why}: `maos --project {0} ps` shows it",
                dir.display()
            )
        }),
    };
    Ok((dir.to_string_lossy().into_owned(), told))
}

/// The project `install-hooks` / `uninstall-hooks` works on. The user's hooks need none (the
/// project around, else the current directory, only names the folder Gemini CLI trusts).
/// Installing a project's hooks outside every project makes the current directory one (its
/// `.maos/`, said on stderr), except `$HOME` and `/`, which are refused.
pub fn for_install(cli: &crate::cli::Cli, user: bool, installing: bool) -> Res<String> {
    let (root, found) = cli.project_or_cwd()?;
    if found || user || !installing {
        return Ok(root);
    }
    let dir = PathBuf::from(&root);
    if never_implicit(&dir) {
        return Err(usage(format!(
            "{root} is not in a maos project, and maos never makes your home directory or / one by itself: run `maos init` first if you mean it, or `maos install-hooks --user` for every project"
        )));
    }
    mark(&dir).map_err(usage)?;
    // Noted, so that uninstall-hooks takes it away again.
    let mut notes = crate::undo::Notes::load();
    notes.note_marker(&dir.join(MARKER));
    notes.save().map_err(usage)?;
    eprintln!(
        "maos: made {root} a maos project (created {}/)",
        dir.join(MARKER).display()
    );
    Ok(root)
}

/// After `uninstall-hooks` in the project `root`: the `.maos/` that install-hooks created
/// goes once no maos hook or MCP server of any CLI is left in the project's files, nothing
/// is in it, and maos holds no data of the project. The line to print when it went.
/// `left(cli)`: whether anything of maos's is left in the project's files of `cli` (an error:
/// a file that cannot be read, which might hold some).
pub fn unmark(
    root: &Path,
    left: impl Fn(maos_proto::Cli) -> Result<bool, String>,
) -> Result<Option<String>, String> {
    use maos_proto::Cli;
    let marker = root.join(MARKER);
    let mut notes = crate::undo::Notes::load();
    if !notes.has_marker(&marker) {
        return Ok(None);
    }
    // Anything of maos's left, or a file that cannot be read: kept.
    if Cli::ALL.iter().any(|cli| left(*cli).unwrap_or(true)) {
        return Ok(None);
    }
    let data = paths::home_dir()
        .map(|h| h.join("projects").join(paths::workspace_hash(root)))
        .is_ok_and(|d| d.exists());
    if data {
        return Ok(None);
    }
    if !marker.is_dir() {
        notes.forget_marker(&marker);
        notes.save()?;
        return Ok(None);
    }
    // A marker with anything in it (the project's config.toml) is the user's now.
    if std::fs::remove_dir(&marker).is_err() {
        return Ok(None);
    }
    notes.forget_marker(&marker);
    notes.save()?;
    Ok(Some(format!(
        "removed {} (install-hooks created it)",
        marker.display()
    )))
}
