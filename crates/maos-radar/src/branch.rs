//! The branch a worktree is on, read from its `HEAD` file (no git process: the daemon fills it
//! in each time it reports a pair, for the dashboard and `maos radar`), and the commit its
//! `HEAD` names, read from the ref files (a snapshot's first step, one git process fewer).

use std::io::Read;
use std::path::{Path, PathBuf};

use maos_core::radar::is_object_id;

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

/// The commit `worktree`'s `HEAD` names, read from files: `HEAD` (an id when detached), else
/// the branch's loose ref in the repository's common directory, else `packed-refs`. `None`
/// whenever anything is not as expected (an unborn branch, a reftable repository, an odd ref
/// name): git is asked then.
pub fn head_commit(worktree: &Path) -> Option<String> {
    let dir = git_dir(worktree)?;
    let common = match read_small(&dir.join("commondir")) {
        Some(c) => dir.join(c.trim()),
        None => dir.clone(),
    };
    let mut text = read_small(&dir.join("HEAD"))?;
    // A symbolic ref may point at another: a few steps at most.
    for _ in 0..4 {
        let line = text.lines().next()?.trim().to_string();
        let Some(name) = line.strip_prefix("ref:").map(str::trim) else {
            return is_object_id(&line).then_some(line);
        };
        let plain = name.starts_with("refs/heads/")
            && name
                .split('/')
                .all(|p| !p.is_empty() && p != "." && p != "..");
        if !plain {
            return None;
        }
        text = match read_small(&common.join(name)) {
            Some(t) => t,
            None => return packed(&common, name),
        };
    }
    None
}

/// `name`'s id in the repository's `packed-refs`.
fn packed(common: &Path, name: &str) -> Option<String> {
    let text = std::fs::read_to_string(common.join("packed-refs")).ok()?;
    text.lines()
        .filter(|l| !l.starts_with('#') && !l.starts_with('^'))
        .find_map(|l| {
            let (id, r) = l.split_once(' ')?;
            (r.trim() == name && is_object_id(id)).then(|| id.to_string())
        })
}
