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
