//! The branch a worktree is on, read from its `HEAD` file (no git process: the daemon fills it
//! in each time it reports a pair, for the dashboard and `maos radar`).

use std::io::Read;
use std::path::{Path, PathBuf};

/// The most of a `.git` or `HEAD` file read (both are one short line).
const CAP: u64 = 4096;

fn read_small(path: &Path) -> Option<String> {
    let mut text = String::new();
    std::fs::File::open(path)
        .ok()?
        .take(CAP)
        .read_to_string(&mut text)
        .ok()?;
    Some(text)
}

/// The worktree's git directory: `.git` itself, or where a linked worktree's `.git` file
/// points (`gitdir: PATH`, relative to the worktree when not absolute).
fn git_dir(worktree: &Path) -> Option<PathBuf> {
    let dot = worktree.join(".git");
    if dot.is_dir() {
        return Some(dot);
    }
    let text = read_small(&dot)?;
    let to = text.lines().next()?.strip_prefix("gitdir:")?.trim();
    (!to.is_empty()).then(|| worktree.join(to))
}

/// The branch `worktree`'s `HEAD` is on (`refs/heads/NAME` → `NAME`); `None` when `HEAD` is
/// detached or cannot be read.
pub fn branch(worktree: &Path) -> Option<String> {
    let head = read_small(&git_dir(worktree)?.join("HEAD"))?;
    let name = head
        .lines()
        .next()?
        .strip_prefix("ref:")?
        .trim()
        .strip_prefix("refs/heads/")?;
    (!name.is_empty()).then(|| name.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git(dir: &Path, args: &[&str]) {
        let ok = Command::new("git")
            .current_dir(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .env_remove("GIT_DIR")
            .env_remove("GIT_INDEX_FILE")
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git {args:?} in {}", dir.display());
    }

    #[test]
    fn the_main_and_a_linked_worktree_say_their_branch_and_a_detached_one_none() {
        let tmp = tempfile::tempdir().unwrap();
        let repo = tmp.path().join("repo");
        std::fs::create_dir_all(&repo).unwrap();
        git(&repo, &["init", "-q", "-b", "trunk"]);
        assert_eq!(branch(&repo).as_deref(), Some("trunk"), "unborn, on trunk");
        git(&repo, &["commit", "-q", "--allow-empty", "-m", "base"]);
        let linked = tmp.path().join("linked");
        git(
            &repo,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                "feature/x",
                linked.to_str().unwrap(),
            ],
        );
        assert_eq!(branch(&linked).as_deref(), Some("feature/x"));
        assert_eq!(branch(&repo).as_deref(), Some("trunk"));
        git(&linked, &["checkout", "-q", "--detach"]);
        assert_eq!(branch(&linked), None, "detached");
        assert_eq!(branch(&tmp.path().join("nowhere")), None);
    }
}
