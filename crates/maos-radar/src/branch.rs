//! The branch a worktree is on, read from its `HEAD` file (no git process: the daemon fills it
//! in each time it reports a pair, for the dashboard and `maos radar`), the commit its
//! `HEAD` names, read from the ref files (a snapshot's first step, one git process fewer), and
//! a stamp of the repository's refs on disk, to tell whether a fetch may have brought commits
//! in since the last look (the fleet radar's reports whose base was not here).

use std::io::Read;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

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
    let common = common_dir(&dir);
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

/// The repository's common directory: where a linked worktree's git directory's `commondir`
/// points, else the git directory itself.
fn common_dir(dir: &Path) -> PathBuf {
    match read_small(&dir.join("commondir")) {
        Some(c) => dir.join(c.trim()),
        None => dir.to_path_buf(),
    }
}

/// The most directories a [`RefsStamp`] looks at under `refs/` (and linked worktrees it looks
/// at for their `FETCH_HEAD`), and the most entries of them it reads: past them, it sees no
/// change there.
const STAMP_DIRS: usize = 1024;
const STAMP_ENTRIES: usize = 65_536;

/// What a repository's refs look like on disk, read without a git process: the modification
/// time, size and inode of `FETCH_HEAD` (the main worktree's and each linked one's),
/// `packed-refs`, `reftable/` and every directory under `refs/` (a ref is written by a rename
/// into its directory, which changes that directory's time). A fetch that brings commits in
/// writes a ref or `FETCH_HEAD`, so it changes the stamp; the radar's own work writes objects
/// only, so it never does. Two stamps are compared, never read for meaning.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RefsStamp(Vec<(u64, u64, Option<SystemTime>)>);

impl RefsStamp {
    fn add(&mut self, path: &Path) {
        self.0.push(match std::fs::symlink_metadata(path) {
            Ok(m) => (m.ino(), m.len(), m.modified().ok()),
            Err(_) => (0, 0, None),
        });
    }
}

/// The [`RefsStamp`] of the repository `worktree` belongs to (empty when it has no git
/// directory).
pub fn refs_stamp(worktree: &Path) -> RefsStamp {
    let mut stamp = RefsStamp::default();
    let Some(dir) = git_dir(worktree) else {
        return stamp;
    };
    let common = common_dir(&dir);
    for name in ["FETCH_HEAD", "packed-refs", "reftable"] {
        stamp.add(&common.join(name));
    }
    if dir != common {
        stamp.add(&dir.join("FETCH_HEAD"));
    }
    let mut budget = STAMP_ENTRIES;
    let linked = common.join("worktrees");
    stamp.add(&linked);
    for entry in subdirs(&linked, &mut budget).into_iter().take(STAMP_DIRS) {
        stamp.add(&entry.join("FETCH_HEAD"));
    }
    // Breadth first, each directory's subdirectories in name order.
    let mut dirs = std::collections::VecDeque::from([common.join("refs")]);
    let mut looked = 0;
    while let Some(d) = dirs.pop_front() {
        if looked >= STAMP_DIRS {
            break;
        }
        looked += 1;
        stamp.add(&d);
        dirs.extend(subdirs(&d, &mut budget));
    }
    stamp
}

/// The subdirectories of `dir` (none when it cannot be read), by name; each entry read takes
/// one of `budget`.
fn subdirs(dir: &Path, budget: &mut usize) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for e in entries {
        if *budget == 0 {
            break;
        }
        *budget -= 1;
        if let Ok(e) = e
            && e.file_type().is_ok_and(|t| t.is_dir())
        {
            out.push(e.path());
        }
    }
    out.sort();
    out
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
