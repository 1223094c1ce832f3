//! Every git process the radar runs. Nothing here writes a worktree's index, `HEAD` or a ref:
//! snapshots go through an index file of the radar's own (`GIT_INDEX_FILE`), merges through
//! `git merge-tree --write-tree`, which writes objects only.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::model::{RadarError, Snapshot};
use crate::parse::{MergeOutput, merge_output, names};

/// Variables of the daemon's own environment that would point git somewhere else.
const CLEARED: &[&str] = &[
    "GIT_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_PREFIX",
    "GIT_COMMON_DIR",
    "GIT_OBJECT_DIRECTORY",
    "GIT_ALTERNATE_OBJECT_DIRECTORIES",
    "GIT_NAMESPACE",
    "GIT_EXTERNAL_DIFF",
    "GIT_DIFF_OPTS",
];

/// Settings for every command: no hooks (`post-index-change` would run on the radar's own
/// index), no index extensions that live outside the index file, no automatic gc, and
/// conflicts written with the base's lines (`diff3`) so hunks can show all three.
const SETTINGS: &[&str] = &[
    "-c",
    "core.hooksPath=/dev/null",
    "-c",
    "core.fsmonitor=false",
    "-c",
    "core.splitIndex=false",
    "-c",
    "core.untrackedCache=false",
    "-c",
    "gc.auto=0",
    "-c",
    "advice.addEmbeddedRepo=false",
    "-c",
    "merge.conflictStyle=diff3",
];

/// The most of a conflicted file's merged text read for its hunks.
const BLOB_CAP: usize = 1 << 20;

/// The git the radar runs.
#[derive(Clone, Debug)]
pub struct Git {
    program: OsString,
}

impl Default for Git {
    fn default() -> Self {
        Git {
            program: OsString::from("git"),
        }
    }
}

impl Git {
    /// The `git` on `PATH`.
    pub fn new() -> Self {
        Git::default()
    }

    fn command(&self, dir: &Path, index: Option<&Path>) -> Command {
        let mut cmd = Command::new(&self.program);
        cmd.current_dir(dir)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .env("GIT_OPTIONAL_LOCKS", "0")
            .env("GIT_TERMINAL_PROMPT", "0")
            .env("GIT_LITERAL_PATHSPECS", "1")
            .env("LC_ALL", "C")
            .args(SETTINGS);
        for var in CLEARED {
            cmd.env_remove(var);
        }
        if let Some(index) = index {
            cmd.env("GIT_INDEX_FILE", index);
        }
        cmd
    }

    /// Runs `git ARGS` in `dir`; its exit code and standard output. A code other than those in
    /// `ok` is an error carrying the first line git wrote to standard error.
    fn run<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        index: Option<&Path>,
        args: &[S],
        ok: &[i32],
    ) -> Result<(i32, Vec<u8>), RadarError> {
        let out = self
            .command(dir, index)
            .args(args)
            .output()
            .map_err(|error| RadarError::Spawn {
                dir: dir.display().to_string(),
                error,
            })?;
        let code = out.status.code().unwrap_or(-1);
        if ok.contains(&code) {
            return Ok((code, out.stdout));
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = stderr
            .lines()
            .find(|l| !l.trim().is_empty())
            .map_or_else(|| format!("exit code {code}"), |l| l.trim().to_string());
        let args: Vec<String> = args
            .iter()
            .take(3)
            .map(|a| a.as_ref().to_string_lossy().into_owned())
            .collect();
        Err(RadarError::Git {
            dir: dir.display().to_string(),
            args: args.join(" "),
            message,
        })
    }

    fn text<S: AsRef<OsStr>>(&self, dir: &Path, args: &[S]) -> Result<String, RadarError> {
        let (_, out) = self.run(dir, None, args, &[0])?;
        Ok(String::from_utf8_lossy(&out).trim_end().to_string())
    }

    /// git's version as `(major, minor)`.
    pub fn version(&self) -> Result<(u32, u32), RadarError> {
        let text = self.text(Path::new("/"), &["--version"])?;
        let mut numbers = text
            .split_whitespace()
            .nth(2)
            .unwrap_or_default()
            .split('.')
            .map(|n| n.parse::<u32>().unwrap_or(0));
        Ok((numbers.next().unwrap_or(0), numbers.next().unwrap_or(0)))
    }

    /// The worktree's own index file (a linked worktree's is under `.git/worktrees/NAME/`).
    pub fn index_path(&self, worktree: &Path) -> Result<PathBuf, RadarError> {
        let path = self.text(
            worktree,
            &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        )?;
        Ok(PathBuf::from(path))
    }

    /// The root of the worktree `dir` is in.
    pub fn toplevel(&self, dir: &Path) -> Result<PathBuf, RadarError> {
        Ok(PathBuf::from(
            self.text(dir, &["rev-parse", "--show-toplevel"])?,
        ))
    }

    /// The worktree's work as a tree, through the radar's own index file `index` (which keeps
    /// the files' stat data between snapshots, so unchanged files are not read again): `HEAD`,
    /// then `git add -A` and `git write-tree` into `index`.
    ///
    /// With `paths` (relative to the worktree's root), only those are looked at: the index
    /// already holds the rest as the last snapshot saw it. A path git cannot take that way (one
    /// that never existed) makes it look at everything.
    pub fn snapshot(
        &self,
        worktree: &Path,
        index: &Path,
        paths: Option<&[String]>,
    ) -> Result<Snapshot, RadarError> {
        let (code, head) = self.run(
            worktree,
            None,
            &["rev-parse", "-q", "--verify", "HEAD^{commit}"],
            &[0, 1],
        )?;
        let head = (code == 0).then(|| String::from_utf8_lossy(&head).trim().to_string());
        let full: [&OsStr; 3] = ["add".as_ref(), "-A".as_ref(), "--ignore-errors".as_ref()];
        let added = match paths {
            Some(paths) => {
                let mut args: Vec<&OsStr> = full.to_vec();
                args.push("--".as_ref());
                args.extend(paths.iter().map(|p| OsStr::new(p.as_str())));
                self.run(worktree, Some(index), &args, &[0, 1]).is_ok()
            }
            None => false,
        };
        if !added {
            self.run(worktree, Some(index), &full, &[0, 1])?;
        }
        let (_, tree) = self.run(worktree, Some(index), &["write-tree"], &[0])?;
        // git writes its index files with the umask's mode (a copy keeps the worktree's): the
        // radar's are the user's alone (their directory is already 0700).
        {
            use std::os::unix::fs::PermissionsExt;
            std::fs::set_permissions(index, std::fs::Permissions::from_mode(0o600)).map_err(
                |error| RadarError::Cache {
                    path: index.display().to_string(),
                    error,
                },
            )?;
        }
        Ok(Snapshot {
            head,
            tree: String::from_utf8_lossy(&tree).trim().to_string(),
        })
    }

    /// The merge base of two commits, `None` when they share no history.
    pub fn merge_base(&self, dir: &Path, a: &str, b: &str) -> Result<Option<String>, RadarError> {
        let (code, out) = self.run(dir, None, &["merge-base", a, b], &[0, 1])?;
        Ok((code == 0).then(|| String::from_utf8_lossy(&out).trim().to_string()))
    }

    /// The files that differ between two trees (or commits), renames not followed.
    pub fn changed(
        &self,
        dir: &Path,
        from: &str,
        to: &str,
    ) -> Result<BTreeSet<String>, RadarError> {
        let args = [
            "diff-tree",
            "-r",
            "-z",
            "--name-only",
            "--no-renames",
            from,
            to,
        ];
        let (_, out) = self.run(dir, None, &args, &[0])?;
        Ok(names(&out))
    }

    /// git's merge of trees `a` and `b` from the commit `base`, written as objects only.
    pub fn merge(
        &self,
        dir: &Path,
        base: &str,
        a: &str,
        b: &str,
    ) -> Result<MergeOutput, RadarError> {
        let merge_base = format!("--merge-base={base}");
        let args = [
            "merge-tree",
            "--write-tree",
            "-z",
            merge_base.as_str(),
            a,
            b,
        ];
        let (_, out) = self.run(dir, None, &args, &[0, 1])?;
        merge_output(&out).ok_or_else(|| RadarError::Git {
            dir: dir.display().to_string(),
            args: "merge-tree --write-tree -z".into(),
            message: "output not understood".into(),
        })
    }

    /// The text of `path` in `tree` (lossy UTF-8, at most 1 MiB read; `None` when absent).
    pub fn file(&self, dir: &Path, tree: &str, path: &str) -> Result<Option<String>, RadarError> {
        let spec = format!("{tree}:{path}");
        let (code, out) = self.run(dir, None, &["cat-file", "blob", spec.as_str()], &[0, 128])?;
        if code != 0 {
            return Ok(None);
        }
        let out = &out[..out.len().min(BLOB_CAP)];
        Ok(Some(String::from_utf8_lossy(out).into_owned()))
    }

    /// The unified diff of `path` from `from` to `to`, cut to `cap` bytes.
    pub fn diff(
        &self,
        dir: &Path,
        from: &str,
        to: &str,
        path: &str,
        cap: usize,
    ) -> Result<String, RadarError> {
        let args = [
            "diff",
            "--no-color",
            "--no-ext-diff",
            "--no-renames",
            "--no-textconv",
            from,
            to,
            "--",
            path,
        ];
        let (_, out) = self.run(dir, None, &args, &[0])?;
        let mut text = String::from_utf8_lossy(&out).into_owned();
        if text.len() > cap {
            let mut end = cap;
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            text.truncate(end);
            text.push_str("\n[… cut]\n");
        }
        Ok(text)
    }
}
