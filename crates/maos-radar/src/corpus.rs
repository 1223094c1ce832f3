//! The radar's correctness corpus: pairs of commits of a real repository, each predicted by the
//! radar the way the daemon runs it (two worktrees, one at the first commit, the other at the
//! merge base with the second commit's changes left uncommitted, each snapshotted) and each
//! merged for real by `git merge` in a third worktree. Used by `maos-bench radar-corpus` (the
//! figures) and by the test that replays `tests/corpus.txt`. Everything happens in a scratch
//! clone that shares the repository's objects (`git clone --shared`): the repository itself is
//! only read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use maos_core::time::Ts;

use crate::git::Git;
use crate::radar::Radar;

/// What a merge of a pair gives: whether it conflicts, and the files.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Outcome {
    pub conflict: bool,
    pub files: BTreeSet<String>,
}

/// One line of a corpus description: two commits and, when known, whether `git merge` of
/// them conflicted.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CorpusPair {
    pub a: String,
    pub b: String,
    pub expected: Option<bool>,
}

/// Reads a corpus description: `A B conflict|clean` per line, `#` comments, blank lines.
pub fn read_corpus(text: &str) -> Result<Vec<CorpusPair>, String> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        let line = line.split('#').next().unwrap_or("").trim();
        if line.is_empty() {
            continue;
        }
        let words: Vec<&str> = line.split_whitespace().collect();
        let expected = match words.get(2) {
            None => None,
            Some(&"conflict") => Some(true),
            Some(&"clean") => Some(false),
            Some(other) => {
                return Err(format!(
                    "line {}: {other:?} is not conflict or clean",
                    i + 1
                ));
            }
        };
        match words[..] {
            [a, b, ..] if words.len() <= 3 => out.push(CorpusPair {
                a: a.to_string(),
                b: b.to_string(),
                expected,
            }),
            _ => return Err(format!("line {}: expected `A B conflict|clean`", i + 1)),
        }
    }
    Ok(out)
}

/// A scratch clone with three worktrees: two the radar watches, one for `git merge`.
pub struct Scratch {
    clone: PathBuf,
    a: PathBuf,
    b: PathBuf,
    merge: PathBuf,
    radar: Radar,
}

fn git(dir: &Path, args: &[&str]) -> Result<(i32, String), String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=corpus", "-c", "user.email=corpus@invalid"])
        .args([
            "-c",
            "commit.gpgsign=false",
            "-c",
            "core.hooksPath=/dev/null",
        ])
        .args(["-c", "merge.renames=true", "-c", "rerere.enabled=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .env_remove("GIT_WORK_TREE")
        .env("LC_ALL", "C")
        .output()
        .map_err(|e| format!("git {args:?}: {e}"))?;
    Ok((
        out.status.code().unwrap_or(-1),
        String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr),
    ))
}

fn ok(dir: &Path, args: &[&str]) -> Result<String, String> {
    match git(dir, args)? {
        (0, out) => Ok(out),
        (code, out) => Err(format!(
            "git {} (exit {code}): {}",
            args.join(" "),
            out.trim()
        )),
    }
}

impl Scratch {
    /// A scratch clone of `repo` (a git directory or a worktree) in `dir`, which must not
    /// exist yet.
    pub fn new(repo: &Path, dir: &Path, now: Ts) -> Result<Scratch, String> {
        std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let clone = dir.join("clone");
        let repo = repo.to_str().ok_or("the repository's path is not UTF-8")?;
        let clone_s = clone.to_str().ok_or("the scratch path is not UTF-8")?;
        ok(
            dir,
            &["clone", "-q", "--shared", "--no-checkout", repo, clone_s],
        )?;
        let mut worktrees = Vec::new();
        for name in ["a", "b", "merge"] {
            let w = dir.join(name);
            let w_s = w.to_str().ok_or("the scratch path is not UTF-8")?;
            ok(&clone, &["worktree", "add", "-q", "--detach", w_s, "HEAD"])?;
            worktrees.push(w);
        }
        let [a, b, merge] = <[PathBuf; 3]>::try_from(worktrees).map_err(|_| "worktrees")?;
        let mut radar = Radar::new(Git::new(), &dir.join("radar")).map_err(|e| e.to_string())?;
        radar.watch(&a, now).map_err(|e| e.to_string())?;
        radar.watch(&b, now).map_err(|e| e.to_string())?;
        Ok(Scratch {
            clone,
            a,
            b,
            merge,
            radar,
        })
    }

    /// The merge base of two commits (`None`: unrelated, or a commit this clone lacks).
    pub fn base(&self, a: &str, b: &str) -> Option<String> {
        ok(&self.clone, &["merge-base", a, b])
            .ok()
            .map(|s| s.trim().to_string())
    }

    fn checkout(dir: &Path, commit: &str) -> Result<(), String> {
        ok(dir, &["checkout", "-q", "--detach", "-f", commit])?;
        ok(dir, &["clean", "-fdqx"])?;
        Ok(())
    }

    /// The radar's prediction: worktree `a` at commit `a`, worktree `b` at the merge base with
    /// commit `b`'s changes uncommitted (new files untracked), both snapshotted.
    pub fn predict(&mut self, a: &str, b: &str, base: &str, now: Ts) -> Result<Outcome, String> {
        Self::checkout(&self.a, a)?;
        Self::checkout(&self.b, base)?;
        ok(
            &self.b,
            &["restore", &format!("--source={b}"), "--worktree", "--", "."],
        )?;
        for w in [&self.a, &self.b] {
            self.radar
                .update(&w.display().to_string(), now)
                .map_err(|e| e.to_string())?;
        }
        let pair = self.radar.conflicts().next();
        Ok(Outcome {
            conflict: pair.is_some(),
            files: pair
                .map(|p| p.files.iter().map(|f| f.path.clone()).collect())
                .unwrap_or_default(),
        })
    }

    /// git's own answer: `git merge --no-commit` of `b` into `a`, and the files left unmerged.
    pub fn truth(&self, a: &str, b: &str) -> Result<Outcome, String> {
        Self::checkout(&self.merge, a)?;
        let (code, out) = git(&self.merge, &["merge", "-q", "--no-commit", "--no-ff", b])?;
        let outcome = match code {
            0 => Outcome::default(),
            1 => {
                let names = ok(
                    &self.merge,
                    &["diff", "--name-only", "-z", "--diff-filter=U"],
                )?;
                let files: BTreeSet<String> = names
                    .split('\0')
                    .filter(|n| !n.is_empty())
                    .map(str::to_string)
                    .collect();
                Outcome {
                    conflict: true,
                    files,
                }
            }
            _ => return Err(format!("git merge {b} (exit {code}): {}", out.trim())),
        };
        let _ = git(&self.merge, &["merge", "--abort"]);
        Ok(outcome)
    }
}

/// The pairs the newest `n` merge commits of `repo` (a worktree or a git directory) give: each
/// merge's two parents (what was merged), and the branch tips of two consecutive merges (two
/// branches worked on at the same time), each with its kind (`parents`, `tips`).
pub fn merge_pairs(repo: &Path, n: usize) -> Result<Vec<(String, String, &'static str)>, String> {
    let out = ok(
        repo,
        &[
            "log",
            "--merges",
            "--format=%P",
            "-n",
            &n.to_string(),
            "HEAD",
        ],
    )?;
    let merges: Vec<Vec<String>> = out
        .lines()
        .map(|l| l.split_whitespace().map(str::to_string).collect())
        .filter(|p: &Vec<String>| p.len() == 2)
        .collect();
    let mut pairs: Vec<(String, String, &'static str)> = merges
        .iter()
        .map(|m| (m[0].clone(), m[1].clone(), "parents"))
        .collect();
    for w in merges.windows(2) {
        if w[0][1] != w[1][1] {
            pairs.push((w[1][1].clone(), w[0][1].clone(), "tips"));
        }
    }
    Ok(pairs)
}
