//! Every git process the radar runs. Nothing here writes a worktree's index, `HEAD` or a ref:
//! snapshots go through an index file of the radar's own (`GIT_INDEX_FILE`), merges through
//! `git merge-tree --write-tree`, which writes objects only.

use std::collections::BTreeSet;
use std::ffi::{OsStr, OsString};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use crate::model::{RadarError, Snapshot};
use crate::parse::{MergeOutput, merge_output, merge_outputs, names};

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

    /// The git at `program` (a wrapper that counts the processes, in a test).
    pub fn at(program: impl Into<OsString>) -> Self {
        Git {
            program: program.into(),
        }
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

    /// [`Git::run`] with `input` on git's standard input (written from a thread of its own, so
    /// a large answer cannot stall it).
    fn run_input<S: AsRef<OsStr>>(
        &self,
        dir: &Path,
        index: Option<&Path>,
        args: &[S],
        input: Vec<u8>,
    ) -> Result<Vec<u8>, RadarError> {
        use std::io::Write;
        let spawn_error = |error| RadarError::Spawn {
            dir: dir.display().to_string(),
            error,
        };
        let mut child = self
            .command(dir, index)
            .args(args)
            .stdin(Stdio::piped())
            .spawn()
            .map_err(spawn_error)?;
        let writer = child.stdin.take().map(|mut stdin| {
            std::thread::spawn(move || {
                let _ = stdin.write_all(&input);
            })
        });
        let out = child.wait_with_output().map_err(spawn_error)?;
        if let Some(w) = writer {
            let _ = w.join();
        }
        if out.status.success() {
            return Ok(out.stdout);
        }
        let stderr = String::from_utf8_lossy(&out.stderr);
        let message = stderr.lines().find(|l| !l.trim().is_empty()).map_or_else(
            || format!("exit code {}", out.status.code().unwrap_or(-1)),
            |l| l.trim().to_string(),
        );
        Err(RadarError::Git {
            dir: dir.display().to_string(),
            args: args
                .iter()
                .take(3)
                .map(|a| a.as_ref().to_string_lossy().into_owned())
                .collect::<Vec<_>>()
                .join(" "),
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
        // `HEAD` from its files when they are plain; git is asked otherwise.
        let head = match crate::branch::head_commit(worktree) {
            Some(head) => Some(head),
            None => {
                let (code, head) = self.run(
                    worktree,
                    None,
                    &["rev-parse", "-q", "--verify", "HEAD^{commit}"],
                    &[0, 1],
                )?;
                (code == 0).then(|| String::from_utf8_lossy(&head).trim().to_string())
            }
        };
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

    /// git's merges of several pairs of trees (`(base, a, b)`, the base a commit) in one
    /// process (`git merge-tree --write-tree -z --stdin`, lines `base -- a b`): one spawn for
    /// all of an update's merges instead of one each. Written as objects only.
    pub fn merges(
        &self,
        dir: &Path,
        merges: &[(&str, &str, &str)],
    ) -> Result<Vec<MergeOutput>, RadarError> {
        if merges.is_empty() {
            return Ok(Vec::new());
        }
        let input = merges
            .iter()
            .flat_map(|(base, a, b)| format!("{base} -- {a} {b}\n").into_bytes())
            .collect();
        let out = self.run_input(
            dir,
            None,
            &["merge-tree", "--write-tree", "-z", "--stdin"],
            input,
        )?;
        merge_outputs(&out, merges.len()).ok_or_else(|| RadarError::Git {
            dir: dir.display().to_string(),
            args: "merge-tree --write-tree -z --stdin".into(),
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
        maos_core::text::cut_bytes(&mut text, cap, "\n[… cut]\n");
        Ok(text)
    }
}

/// A file that differs between a base and a tree ([`Git::raw_changes`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RawChange {
    pub path: String,
    /// Its mode in the tree (0: deleted there).
    pub mode: u32,
    /// Its blob in the tree ("" when deleted).
    pub blob: String,
}

impl Git {
    /// The repository's main line as this clone knows it: `origin/HEAD`, else `origin/main`,
    /// `origin/master`, `main`, `master` (the first that exists); `None` when none does.
    pub fn mainline(&self, dir: &Path) -> Result<Option<String>, RadarError> {
        const REFS: [&str; 5] = [
            "refs/remotes/origin/HEAD",
            "refs/remotes/origin/main",
            "refs/remotes/origin/master",
            "refs/heads/main",
            "refs/heads/master",
        ];
        let mut args = vec!["for-each-ref", "--format=%(refname) %(objectname)"];
        args.extend(REFS);
        let text = self.text(dir, &args)?;
        let found: std::collections::HashMap<&str, &str> =
            text.lines().filter_map(|l| l.split_once(' ')).collect();
        Ok(REFS
            .iter()
            .find_map(|r| found.get(r).map(|s| s.to_string())))
    }

    /// The files that differ between `base` and `tree`, with their mode and blob in `tree`
    /// (renames not followed).
    pub fn raw_changes(
        &self,
        dir: &Path,
        base: &str,
        tree: &str,
    ) -> Result<Vec<RawChange>, RadarError> {
        let args = ["diff-tree", "-r", "-z", "--raw", "--no-renames", base, tree];
        let (_, out) = self.run(dir, None, &args, &[0])?;
        let mut fields = out.split(|b| *b == 0);
        let mut changes = Vec::new();
        while let (Some(meta), Some(path)) = (fields.next(), fields.next()) {
            // ":100644 100644 <old> <new> M"
            let meta = String::from_utf8_lossy(meta);
            let parts: Vec<&str> = meta.trim_start_matches(':').split(' ').collect();
            let (Some(mode), Some(blob)) = (parts.get(1), parts.get(3)) else {
                continue;
            };
            let mode = u32::from_str_radix(mode, 8).unwrap_or(0);
            let blob = if mode == 0 {
                String::new()
            } else {
                blob.to_string()
            };
            changes.push(RawChange {
                path: String::from_utf8_lossy(path).into_owned(),
                mode,
                blob,
            });
        }
        Ok(changes)
    }

    /// The sizes of `blobs` (`None` for one that is missing).
    pub fn blob_sizes(&self, dir: &Path, blobs: &[&str]) -> Result<Vec<Option<u64>>, RadarError> {
        let sizes = self.batch_check(dir, "%(objectsize)", blobs)?;
        Ok(sizes
            .into_iter()
            .map(|s| s.and_then(|s| s.parse().ok()))
            .collect())
    }

    /// The contents of `blobs`, in order (read them after [`Git::blob_sizes`] said they are
    /// small enough).
    pub fn blobs(&self, dir: &Path, blobs: &[&str]) -> Result<Vec<Vec<u8>>, RadarError> {
        let input = blobs
            .iter()
            .flat_map(|b| format!("{b}\n").into_bytes())
            .collect();
        let out = self.run_input(dir, None, &["cat-file", "--batch=%(objectsize)"], input)?;
        let mut rest = &out[..];
        let mut contents = Vec::with_capacity(blobs.len());
        for _ in blobs {
            let bad = || RadarError::Git {
                dir: dir.display().to_string(),
                args: "cat-file --batch".into(),
                message: "output not understood".into(),
            };
            let nl = rest.iter().position(|b| *b == b'\n').ok_or_else(bad)?;
            let size: usize = String::from_utf8_lossy(&rest[..nl])
                .trim()
                .parse()
                .map_err(|_| bad())?;
            let body = rest.get(nl + 1..nl + 1 + size).ok_or_else(bad)?;
            contents.push(body.to_vec());
            rest = rest.get(nl + 2 + size..).unwrap_or_default();
        }
        Ok(contents)
    }

    /// The type of each object `names` names (`commit`, `blob`, ...; `None` for one that is
    /// not here), looked up in one process. A name may be any revision git reads
    /// (`<id>^{commit}`).
    pub fn types(&self, dir: &Path, names: &[&str]) -> Result<Vec<Option<String>>, RadarError> {
        self.batch_check(dir, "%(objecttype)", names)
    }

    /// `git cat-file --batch-check=<format>` of `names`, in one process: for each name, in
    /// order, what `format` (one `%(...)` atom) says of its object; `None` for one not here
    /// (answered `<name> missing` or `ambiguous`, more than one word).
    fn batch_check(
        &self,
        dir: &Path,
        format: &str,
        names: &[&str],
    ) -> Result<Vec<Option<String>>, RadarError> {
        let input = names
            .iter()
            .flat_map(|n| format!("{n}\n").into_bytes())
            .collect();
        let arg = format!("--batch-check={format}");
        let out = self.run_input(dir, None, &["cat-file", arg.as_str()], input)?;
        let text = String::from_utf8_lossy(&out);
        let mut lines = text.lines();
        Ok(names
            .iter()
            .map(|_| {
                lines
                    .next()
                    .map(str::trim)
                    .filter(|l| !l.is_empty() && !l.contains(' '))
                    .map(String::from)
            })
            .collect())
    }

    /// Writes `contents` as blobs into the repository at `dir`, all in one process (`git
    /// hash-object -w --stdin-paths`, each content through a file in `scratch`, a directory of
    /// the radar's own made afresh and removed after); their ids, in order.
    pub fn write_blobs(
        &self,
        dir: &Path,
        scratch: &Path,
        contents: &[&[u8]],
    ) -> Result<Vec<String>, RadarError> {
        if contents.is_empty() {
            return Ok(Vec::new());
        }
        let cache = |error: std::io::Error| RadarError::Cache {
            path: scratch.display().to_string(),
            error,
        };
        use std::os::unix::ffi::OsStrExt;
        // One path a line, as git reads them.
        let raw = scratch.as_os_str().as_bytes();
        if raw.contains(&b'\n') || raw.starts_with(b"\"") {
            return Err(cache(std::io::Error::other(
                "a path with a newline or a leading quote",
            )));
        }
        let _ = std::fs::remove_dir_all(scratch);
        {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .mode(0o700)
                .create(scratch)
                .map_err(cache)?;
        }
        let written = (|| {
            let mut input = Vec::new();
            for (i, content) in contents.iter().enumerate() {
                let file = scratch.join(i.to_string());
                std::fs::write(&file, content).map_err(cache)?;
                input.extend_from_slice(file.as_os_str().as_bytes());
                input.push(b'\n');
            }
            self.run_input(
                dir,
                None,
                &["hash-object", "-w", "--no-filters", "--stdin-paths"],
                input,
            )
        })();
        let _ = std::fs::remove_dir_all(scratch);
        let text = String::from_utf8_lossy(&written?).into_owned();
        let ids: Vec<String> = text.lines().map(|l| l.trim().to_string()).collect();
        if ids.len() != contents.len() {
            return Err(RadarError::Git {
                dir: dir.display().to_string(),
                args: "hash-object -w --stdin-paths".into(),
                message: format!("{} ids for {} contents", ids.len(), contents.len()),
            });
        }
        Ok(ids)
    }

    /// The tree of `base` with `changes` made (each a path's new mode and blob, mode 0 to
    /// delete it), built through the index file `index` (the radar's own): written as objects
    /// only.
    pub fn build_tree(
        &self,
        dir: &Path,
        index: &Path,
        base: &str,
        changes: &[RawChange],
    ) -> Result<String, RadarError> {
        let _ = std::fs::remove_file(index);
        self.run(dir, Some(index), &["read-tree", base], &[0])?;
        let zero = "0".repeat(base.len());
        let mut input = Vec::new();
        for c in changes {
            let line = if c.mode == 0 {
                format!("0 {zero}\t{}", c.path)
            } else {
                format!("{:o} {}\t{}", c.mode, c.blob, c.path)
            };
            input.extend_from_slice(line.as_bytes());
            input.push(0);
        }
        self.run_input(
            dir,
            Some(index),
            &["update-index", "-z", "--index-info"],
            input,
        )?;
        let (_, tree) = self.run(dir, Some(index), &["write-tree"], &[0])?;
        let _ = std::fs::remove_file(index);
        Ok(String::from_utf8_lossy(&tree).trim().to_string())
    }
}
