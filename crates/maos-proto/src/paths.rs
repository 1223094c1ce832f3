//! Where things live: the socket, the state directory, project identity. Shared by the daemon
//! and the client so that both always compute the same paths.

use std::ffi::OsString;
use std::fs;
use std::io;
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
pub enum PathError {
    #[error(
        "cannot find a state directory: set MAOS_HOME (or HOME / XDG_STATE_HOME) to a writable directory"
    )]
    NoHome,
    #[error("{path}: {why}")]
    Unsafe { path: PathBuf, why: String },
    #[error("{path}: {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    /// More than one directory failed: every problem, on one line.
    #[error("{0}")]
    Several(String),
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// The current user's id.
pub fn uid() -> u32 {
    // SAFETY: getuid has no preconditions and cannot fail.
    unsafe { libc::getuid() }
}

/// `$MAOS_SOCKET`, else `$XDG_RUNTIME_DIR/maos/maosd.sock`, else `$TMPDIR/maos-$UID/maosd.sock`.
pub fn socket_path() -> PathBuf {
    if let Some(p) = env_path("MAOS_SOCKET") {
        return p;
    }
    if let Some(p) = env_path("XDG_RUNTIME_DIR") {
        return p.join("maos").join("maosd.sock");
    }
    std::env::temp_dir()
        .join(format!("maos-{}", uid()))
        .join("maosd.sock")
}

/// `$MAOS_HOME`, else the platform state directory.
pub fn home_dir() -> Result<PathBuf, PathError> {
    if let Some(p) = env_path("MAOS_HOME") {
        return Ok(p);
    }
    if cfg!(target_os = "macos") {
        return env_path("HOME")
            .map(|h| h.join("Library/Application Support/maos"))
            .ok_or(PathError::NoHome);
    }
    if let Some(p) = env_path("XDG_STATE_HOME") {
        return Ok(p.join("maos"));
    }
    env_path("HOME")
        .map(|h| h.join(".local/state/maos"))
        .ok_or(PathError::NoHome)
}

/// Create `dir` and any missing parents with mode 0700 (whatever the umask), and close an
/// existing `dir` to group and others. For maos's own directories under `MAOS_HOME`.
pub fn private_dir_all(dir: &Path) -> io::Result<()> {
    use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
    fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)?;
    let mode = fs::metadata(dir)?.permissions().mode();
    if mode & 0o077 != 0 {
        fs::set_permissions(dir, fs::Permissions::from_mode(mode & 0o700))?;
    }
    Ok(())
}

/// Create (or truncate) `path` for writing with mode 0600, whatever the umask. For maos's own
/// files under `MAOS_HOME`.
pub fn private_file(path: &Path) -> io::Result<fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
}

/// Create `dir` (and its parents) if needed, mode 0700, and refuse it when it is a symlink,
/// owned by another user, or open to group or others.
pub fn ensure_private_dir(dir: &Path) -> Result<(), PathError> {
    use std::os::unix::fs::{DirBuilderExt, MetadataExt};
    let io_err = |source| PathError::Io {
        path: dir.to_path_buf(),
        source,
    };
    match fs::symlink_metadata(dir) {
        Err(e) if e.kind() == io::ErrorKind::NotFound => {
            if let Some(parent) = dir.parent() {
                fs::create_dir_all(parent).map_err(io_err)?;
            }
            match fs::DirBuilder::new().mode(0o700).create(dir) {
                Ok(()) => {}
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                Err(e) => return Err(io_err(e)),
            }
        }
        Err(e) => return Err(io_err(e)),
        Ok(_) => {}
    }
    let meta = fs::symlink_metadata(dir).map_err(io_err)?;
    let unsafe_dir = |why: &str| PathError::Unsafe {
        path: dir.to_path_buf(),
        why: why.to_string(),
    };
    if meta.file_type().is_symlink() {
        return Err(unsafe_dir(
            "is a symlink; refusing to use it (remove it or point MAOS_SOCKET elsewhere)",
        ));
    }
    if !meta.is_dir() {
        return Err(unsafe_dir("is not a directory"));
    }
    if meta.uid() != uid() {
        return Err(unsafe_dir(&format!(
            "is owned by uid {}, not by you (uid {}); refusing to use it",
            meta.uid(),
            uid()
        )));
    }
    if meta.mode() & 0o077 != 0 {
        return Err(unsafe_dir(&format!(
            "has mode {:o}, open to group or others; run `chmod 700` on it",
            meta.mode() & 0o777
        )));
    }
    Ok(())
}

/// [`ensure_private_dir`] for each of `dirs` (the same one once), reporting every problem
/// at once: a person fixing permissions should not meet them one run at a time.
pub fn ensure_private_dirs(dirs: &[&Path]) -> Result<(), PathError> {
    let mut seen = Vec::new();
    let mut errors: Vec<PathError> = Vec::new();
    for dir in dirs {
        if seen.contains(dir) {
            continue;
        }
        seen.push(*dir);
        if let Err(e) = ensure_private_dir(dir) {
            errors.push(e);
        }
    }
    match errors.len() {
        0 => Ok(()),
        1 => Err(errors.remove(0)),
        _ => Err(PathError::Several(
            errors
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join("; "),
        )),
    }
}

/// The name of the directory that makes its parent a maos project outside git (`maos init`).
pub const MARKER: &str = ".maos";

/// The project a directory belongs to, if any: the main worktree of the git repository around
/// it (so every worktree of one repository is one project), else the nearest ancestor holding
/// a `.maos/` directory (what `maos init` creates). `$HOME` and `/` are never a project by
/// themselves: a `.git` there (a dotfiles repository) is not looked at, only a `.maos/` someone
/// put there. `.claude/` is no marker (`install-hooks --user` creates `~/.claude/`). None when
/// nothing marks a project: a directory outside git never becomes one silently. Reads files
/// only; never spawns git.
pub fn find_project(start: &Path) -> Option<PathBuf> {
    let start = fs::canonicalize(start).unwrap_or_else(|_| start.to_path_buf());
    find_project_canonical(&start, canonical_home().as_deref())
}

/// [`find_project`] from a directory that is already canonical, with the canonical home
/// directory given: no path is resolved again (the daemon places every file a hook writes
/// this way, from a path it has just resolved).
pub fn find_project_canonical(start: &Path, home: Option<&Path>) -> Option<PathBuf> {
    for dir in start.ancestors().filter(|d| !never_implicit(d, home)) {
        let git = dir.join(".git");
        if let Ok(meta) = fs::metadata(&git) {
            if meta.is_dir() {
                return Some(dir.to_path_buf());
            }
            if let Some(root) = main_worktree_of(&git) {
                return Some(root);
            }
            return Some(dir.to_path_buf());
        }
    }
    start
        .ancestors()
        .find(|dir| dir.join(MARKER).is_dir())
        .map(Path::to_path_buf)
}

/// `$HOME`, canonical, if set.
pub fn canonical_home() -> Option<PathBuf> {
    env_path("HOME").map(|h| fs::canonicalize(&h).unwrap_or(h))
}

/// `/` or the home directory (`home`, canonical): never a project unless someone says so.
pub fn never_implicit(dir: &Path, home: Option<&Path>) -> bool {
    dir.parent().is_none() || home == Some(dir)
}

/// The project of a directory named on purpose (`--project DIR`): the one it belongs to
/// ([`find_project`]), else the directory itself.
pub fn project_root(dir: &Path) -> PathBuf {
    find_project(dir).unwrap_or_else(|| fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf()))
}

/// `.git` file (`gitdir: <path>`) of a linked worktree → the main worktree's root, found through
/// the worktree git dir's `commondir`.
pub fn main_worktree_of(git_file: &Path) -> Option<PathBuf> {
    let text = fs::read_to_string(git_file).ok()?;
    let gitdir = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
    let base = git_file.parent()?;
    let gitdir = base.join(gitdir);
    let common = match fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => gitdir.join(c.trim()),
        // A submodule's .git file points at a plain git dir: that checkout is its own project.
        Err(_) => return Some(base.to_path_buf()),
    };
    let common = fs::canonicalize(common).ok()?;
    // The common dir is `<main worktree>/.git` for ordinary repositories.
    if common.file_name() == Some(OsString::from(".git").as_os_str()) {
        return common.parent().map(Path::to_path_buf);
    }
    Some(common)
}

/// The git directory whose `config` holds a checkout's remotes: `<root>/.git`, or for a `.git`
/// file (a linked worktree, a submodule) the directory it names, and that one's `commondir`.
fn git_config_dir(root: &Path) -> Option<PathBuf> {
    let git = root.join(".git");
    let meta = fs::metadata(&git).ok()?;
    if meta.is_dir() {
        return Some(git);
    }
    let text = fs::read_to_string(&git).ok()?;
    let gitdir = root.join(text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim());
    match fs::read_to_string(gitdir.join("commondir")) {
        Ok(c) => Some(gitdir.join(c.trim())),
        Err(_) => Some(gitdir),
    }
}

/// Fleet mode's key of the repository checked out at `root` (`maos_core::project_key`): the
/// `project` of its `.maos/config.toml`, else its origin remote normalised. Reads files only;
/// never spawns git.
pub fn repository_key(
    root: &Path,
) -> Result<maos_core::project_key::ProjectKey, maos_core::project_key::KeyError> {
    use maos_core::project_key::{KeyError, project_key};
    let config = root.join(MARKER).join("config.toml");
    let maos = match fs::read_to_string(&config) {
        Ok(text) => Some(text),
        Err(e) if e.kind() == io::ErrorKind::NotFound => None,
        Err(e) => return Err(KeyError::BadConfig(format!("cannot read it: {e}"))),
    };
    let git = git_config_dir(root).and_then(|d| fs::read_to_string(d.join("config")).ok());
    project_key(maos.as_deref(), git.as_deref())
}

/// Stable short identity of a project root: 16 hex digits of FNV-1a 64 over the path bytes.
/// Never changes between versions: it names the project's state directory.
pub fn workspace_hash(root: &Path) -> String {
    use std::os::unix::ffi::OsStrExt;
    format!(
        "{:016x}",
        maos_core::fnv::fnv1a64(root.as_os_str().as_bytes())
    )
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn private_dir_is_created_0700_and_unsafe_ones_refused() {
        let t = tempfile::tempdir().unwrap();
        let d = t.path().join("a/b");
        ensure_private_dir(&d).unwrap();
        assert_eq!(
            fs::metadata(&d).unwrap().permissions().mode() & 0o777,
            0o700
        );

        let open = t.path().join("open");
        fs::create_dir(&open).unwrap();
        fs::set_permissions(&open, fs::Permissions::from_mode(0o755)).unwrap();
        let e = ensure_private_dir(&open).unwrap_err().to_string();
        assert!(e.contains("chmod 700"), "{e}");

        let link = t.path().join("link");
        std::os::unix::fs::symlink(&d, &link).unwrap();
        let e = ensure_private_dir(&link).unwrap_err().to_string();
        assert!(e.contains("symlink"), "{e}");

        // Both problems at once, on one line; a directory named twice is checked once.
        let e = ensure_private_dirs(&[&open, &d, &link, &open])
            .unwrap_err()
            .to_string();
        assert_eq!(e.matches("/open:").count(), 1, "{e}");
        assert!(
            e.contains("chmod 700") && e.contains("symlink") && !e.contains('\n'),
            "{e}"
        );
        ensure_private_dirs(&[&d, &d]).unwrap();
    }

    #[test]
    fn project_root_follows_worktrees_to_the_main_checkout() {
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("repo");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = t.path().join("wt");
        fs::create_dir_all(wt.join("src")).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        let main = fs::canonicalize(&main).unwrap();
        assert_eq!(project_root(&wt.join("src")), main);
        assert_eq!(project_root(&main), main);
    }

    #[test]
    fn a_repository_key_comes_from_maos_config_or_origin_also_in_a_worktree() {
        use maos_core::project_key::KeyError;
        let t = tempfile::tempdir().unwrap();
        let main = t.path().join("repo");
        fs::create_dir_all(main.join(".git/worktrees/wt")).unwrap();
        assert_eq!(repository_key(&main), Err(KeyError::NoOrigin));
        fs::write(
            main.join(".git/config"),
            "[core]\n\tbare = false\n[remote \"origin\"]\n\turl = git@GitHub.com:acme/web.git\n",
        )
        .unwrap();
        assert_eq!(
            repository_key(&main).unwrap().as_str(),
            "github.com/acme/web"
        );
        // A linked worktree reads the main repository's config through commondir.
        fs::write(main.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = t.path().join("wt");
        fs::create_dir_all(&wt).unwrap();
        fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", main.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        assert_eq!(repository_key(&wt).unwrap().as_str(), "github.com/acme/web");
        // .maos/config.toml wins; a bad one is an error, never the origin instead.
        fs::create_dir_all(main.join(".maos")).unwrap();
        fs::write(main.join(".maos/config.toml"), "project = \"acme-web\"\n").unwrap();
        assert_eq!(repository_key(&main).unwrap().as_str(), "acme-web");
        fs::write(main.join(".maos/config.toml"), "project = 7\n").unwrap();
        assert!(matches!(repository_key(&main), Err(KeyError::BadConfig(_))));
        // No repository at all: no key, and the line says what to do.
        let bare = t.path().join("plain");
        fs::create_dir_all(&bare).unwrap();
        let e = repository_key(&bare).unwrap_err().to_string();
        assert!(e.contains(".maos/config.toml") && !e.contains('\n'), "{e}");
    }

    #[test]
    fn outside_git_only_a_maos_marker_makes_a_project() {
        let t = tempfile::tempdir().unwrap();
        let p = fs::canonicalize(t.path()).unwrap();
        fs::create_dir_all(p.join("proj/.maos")).unwrap();
        fs::create_dir_all(p.join("proj/deep/er")).unwrap();
        assert_eq!(find_project(&p.join("proj/deep/er")), Some(p.join("proj")));
        // `a/b` and `a` are not two projects made in passing: neither is one.
        fs::create_dir_all(p.join("plain/sub")).unwrap();
        assert_eq!(find_project(&p.join("plain/sub")), None);
        assert_eq!(find_project(&p.join("plain")), None);
        // `.claude/` is not a marker (install-hooks --user creates ~/.claude/).
        fs::create_dir_all(p.join("claude/.claude")).unwrap();
        assert_eq!(find_project(&p.join("claude")), None);
        // Named on purpose, the directory itself is the project.
        assert_eq!(project_root(&p.join("plain/sub")), p.join("plain/sub"));
        assert_eq!(project_root(&p.join("proj/deep")), p.join("proj"));
    }

    #[test]
    fn hash_is_stable() {
        assert_eq!(
            workspace_hash(Path::new("/a")),
            workspace_hash(Path::new("/a"))
        );
        assert_ne!(
            workspace_hash(Path::new("/a")),
            workspace_hash(Path::new("/b"))
        );
        assert_eq!(workspace_hash(Path::new("")), "cbf29ce484222325");
    }
}
