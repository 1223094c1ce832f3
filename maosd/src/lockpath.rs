//! Turning a path an agent names into a lock key: the path relative to the project root, after
//! lexical normalization, symlink resolution and worktree mapping. This touches the filesystem,
//! so it runs in the connection task, never in the project actor.

use std::path::{Component, Path, PathBuf};

use maos_core::LockPath;
use maos_proto::{ErrorBody, ErrorCode};

fn outside(input: &str, root: &Path, resolved: &Path) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::PathOutsideWorkspace,
        format!(
            "{input}: resolves to {}, which is outside the project {}; only files inside the project can be locked",
            resolved.display(),
            root.display()
        ),
    )
}

/// `..` and `.` removed without touching the filesystem; `..` at the root stays at the root.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolve symlinks in the longest existing prefix of `path`; the missing tail is appended as
/// it is (a file about to be created cannot be a symlink yet).
pub fn resolve_links(path: &Path) -> PathBuf {
    let mut existing = path.to_path_buf();
    let mut tail = Vec::new();
    loop {
        if let Ok(real) = std::fs::canonicalize(&existing) {
            let mut out = real;
            for c in tail.iter().rev() {
                out.push(c);
            }
            // The tail may contain `..` that only now can be applied.
            return lexical(&out);
        }
        match (existing.file_name(), existing.parent()) {
            (Some(name), Some(parent)) => {
                tail.push(name.to_os_string());
                existing = parent.to_path_buf();
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// The key for `input` (absolute, or relative to `cwd`) in the project rooted at `root`
/// (canonical). A path inside another worktree of the same repository maps to the same key as
/// in the main worktree.
pub fn resolve(root: &Path, cwd: &Path, input: &str) -> Result<LockPath, ErrorBody> {
    if input.is_empty() || input.contains('\0') {
        return Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!("{input:?} is not a usable path"),
        ));
    }
    let joined = if Path::new(input).is_absolute() {
        PathBuf::from(input)
    } else {
        cwd.join(input)
    };
    // Symlinks first, then `..`: `link/../x` is the parent of wherever `link` points, as the
    // kernel sees it, not the `x` next to `link`.
    let real = resolve_links(&joined);
    let rel = match real.strip_prefix(root) {
        Ok(rel) => rel.to_path_buf(),
        Err(_) => worktree_relative(root, &real).ok_or_else(|| outside(input, root, &real))?,
    };
    let rel = rel
        .to_str()
        .ok_or_else(|| ErrorBody::new(ErrorCode::BadRequest, format!("{input}: not UTF-8")))?;
    LockPath::new(rel).map_err(|e| ErrorBody::new(ErrorCode::PathOutsideWorkspace, e.to_string()))
}

/// If `path` lies in a linked worktree whose main worktree is `root`, its path relative to that
/// worktree.
fn worktree_relative(root: &Path, path: &Path) -> Option<PathBuf> {
    for dir in path.ancestors().skip(1) {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_file() => {
                let main = maos_proto::paths::main_worktree_of(&git)?;
                let main = std::fs::canonicalize(main).ok()?;
                return (main == root)
                    .then(|| path.strip_prefix(dir).ok().map(Path::to_path_buf))?;
            }
            Ok(_) => return None, // a plain repository that is not ours
            Err(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap().join("repo");
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        (t, root)
    }

    #[test]
    fn relative_absolute_and_dotdot() {
        let (_t, root) = setup();
        let ok = |cwd: &Path, p: &str| resolve(&root, cwd, p).unwrap().as_str().to_string();
        assert_eq!(ok(&root, "src/a.rs"), "src/a.rs");
        assert_eq!(ok(&root.join("src"), "a.rs"), "src/a.rs");
        assert_eq!(
            ok(&root, root.join("src/new/dir/b.rs").to_str().unwrap()),
            "src/new/dir/b.rs"
        );
        assert_eq!(ok(&root, "src/../README.md"), "README.md");
        for bad in ["../x", "/etc/passwd", "src/../../x"] {
            let e = resolve(&root, &root, bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::PathOutsideWorkspace, "{bad}");
        }
    }

    #[test]
    fn symlinks_are_followed() {
        let (t, root) = setup();
        let outside_dir = t.path().join("elsewhere");
        std::fs::create_dir_all(&outside_dir).unwrap();
        std::os::unix::fs::symlink(&outside_dir, root.join("src/escape")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("alias")).unwrap();
        let e = resolve(&root, &root, "src/escape/x.rs").unwrap_err();
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
        // `..` after a symlink climbs from the link's target, which is outside.
        let e = resolve(&root, &root, "src/escape/../x.rs").unwrap_err();
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
        // ... and from an inside link's target, it stays inside.
        assert_eq!(
            resolve(&root, &root, "alias/../README.md")
                .unwrap()
                .as_str(),
            "README.md"
        );
        assert_eq!(
            resolve(&root, &root, "alias/x.rs").unwrap().as_str(),
            "src/x.rs"
        );
    }

    #[test]
    fn worktrees_share_keys() {
        let (t, root) = setup();
        std::fs::write(root.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = std::fs::canonicalize(t.path()).unwrap().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", root.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        assert_eq!(
            resolve(&root, &wt, "src/a.rs").unwrap().as_str(),
            "src/a.rs"
        );
    }
}
