//! `git`: what each subcommand does to the working tree and the index.

use crate::cmds::{cd_to, getopt};
use crate::patch::diff_targets;
use crate::walk::{Scope, Walker};
use crate::word::Expanded;
use crate::{Git, GitKind, How};

/// Subcommands that only read.
const READ_ONLY: &[&str] = &[
    "status",
    "log",
    "diff",
    "show",
    "blame",
    "annotate",
    "shortlog",
    "describe",
    "rev-parse",
    "rev-list",
    "ls-files",
    "ls-tree",
    "ls-remote",
    "cat-file",
    "grep",
    "whatchanged",
    "range-diff",
    "merge-base",
    "name-rev",
    "for-each-ref",
    "show-ref",
    "show-branch",
    "var",
    "count-objects",
    "check-ignore",
    "check-attr",
    "check-ref-format",
    "check-mailmap",
    "cherry",
    "diff-tree",
    "diff-files",
    "diff-index",
    "verify-commit",
    "verify-tag",
    "verify-pack",
    "help",
    "version",
    "fsck",
    "difftool",
    "get-tar-commit-id",
    "column",
    "hash-object",
    "mktree",
    "--version",
    "--help",
    "-h",
    "--exec-path",
    "--html-path",
    "--man-path",
    "--info-path",
];

/// Subcommands with no working-tree or index effect.
const OTHER: &[&str] = &[
    "fetch",
    "push",
    "init",
    "clone",
    "gc",
    "prune",
    "repack",
    "pack-refs",
    "maintenance",
    "submodule",
    "notes",
    "lfs",
    "send-email",
    "request-pull",
    "bundle",
    "fast-export",
    "fast-import",
    "filter-branch",
    "replace",
    "update-ref",
    "symbolic-ref",
    "credential",
    "commit-tree",
    "write-tree",
    "mktag",
    "remote-ext",
    "sparse-checkout",
    "daemon",
    "upload-pack",
    "receive-pack",
    "bugreport",
    "archive",
    "format-patch",
    "rerere",
];

/// Subcommands that change the working tree as a whole.
const WHOLE_TREE: &[&str] = &["pull", "merge", "rebase", "cherry-pick", "revert", "am"];

/// Whether a lone `git checkout NAME` names a file rather than a branch: `.`, a glob, `./x`, or
/// a last component with a short alphabetic extension (`src/x.rs`, `README.md`).
fn looks_like_path(e: &Expanded) -> bool {
    let t = e.text.as_str();
    if !e.exact
        || t == "."
        || t == ":/"
        || t.starts_with("./")
        || t.starts_with(":(")
        || t.ends_with('/')
    {
        return true;
    }
    let last = t.rsplit('/').next().unwrap_or(t);
    match last.rsplit_once('.') {
        Some((stem, ext)) => {
            !stem.is_empty()
                && (1..=5).contains(&ext.len())
                && ext.chars().all(|c| c.is_ascii_alphabetic())
        }
        None => false,
    }
}

/// A pathspec that names everything (under the directory it runs in, or `:/` the repository).
fn is_everything(p: &str) -> bool {
    matches!(p, "." | "./" | ":/" | "*" | ":/*")
}

impl Walker<'_> {
    /// One `git …` command line.
    pub(crate) fn git(&mut self, args: &[Expanded], scope: &Scope, stdin: Option<&str>) {
        let mut here = scope.clone();
        let mut i = 0;
        // Global options, before the subcommand.
        while let Some(a) = args.get(i) {
            let t = a.text.as_str();
            match t {
                "-C" => {
                    cd_to(&mut here, args.get(i + 1));
                    i += 2;
                }
                "-c" | "--git-dir" | "--work-tree" | "--namespace" | "--config-env"
                | "--super-prefix" => i += 2,
                _ if t.starts_with("--work-tree=") => {
                    let d = Expanded {
                        text: t["--work-tree=".len()..].to_owned(),
                        exact: a.exact,
                    };
                    here.dir = crate::Dir::Start;
                    cd_to(&mut here, Some(&d));
                    i += 1;
                }
                _ if t.starts_with('-')
                    && !matches!(
                        t,
                        "--version"
                            | "--help"
                            | "-h"
                            | "--exec-path"
                            | "--html-path"
                            | "--man-path"
                            | "--info-path"
                    ) =>
                {
                    i += 1
                }
                _ => break,
            }
        }
        let all_args: Vec<String> = args.iter().map(|a| a.text.clone()).collect();
        let Some(sub) = args.get(i) else {
            self.out.git.push(Git {
                dir: here.dir,
                args: all_args,
                kind: GitKind::ReadOnly,
            });
            return;
        };
        let rest = &args[i + 1..];
        let kind = if sub.exact {
            self.git_sub(&sub.text, rest, &here, stdin)
        } else {
            self.opaque(format!("git {}", sub.text));
            GitKind::Other
        };
        self.out.git.push(Git {
            dir: here.dir,
            args: all_args,
            kind,
        });
    }

    /// The kind of `git SUB REST…`, recording the files it writes.
    fn git_sub(
        &mut self,
        sub: &str,
        rest: &[Expanded],
        here: &Scope,
        stdin: Option<&str>,
    ) -> GitKind {
        let texts = |o: &[&Expanded]| o.iter().map(|e| e.text.clone()).collect::<Vec<_>>();
        let has = |names: &[&str]| rest.iter().any(|a| names.contains(&a.text.as_str()));
        match sub {
            "diff" => {
                let o = getopt(rest, "", &[], false);
                if let Some(f) = o.value(&["--output"]) {
                    self.write(here, &f, How::Output);
                }
                GitKind::ReadOnly
            }
            "reflog" => match rest.first().map(|a| a.text.as_str()) {
                Some("expire" | "delete" | "drop") => GitKind::Other,
                _ => GitKind::ReadOnly,
            },
            s if READ_ONLY.contains(&s) => GitKind::ReadOnly,
            "branch" => {
                let o = getopt(
                    rest,
                    "u",
                    &[
                        "--set-upstream-to",
                        "--contains",
                        "--no-contains",
                        "--merged",
                        "--no-merged",
                        "--points-at",
                        "--sort",
                        "--format",
                        "--color",
                        "--abbrev",
                    ],
                    false,
                );
                let listing = o.has(&[
                    "-l",
                    "--list",
                    "-a",
                    "-r",
                    "--all",
                    "--remotes",
                    "--show-current",
                ]);
                let changes = o.has(&[
                    "-d",
                    "-D",
                    "-m",
                    "-M",
                    "-c",
                    "-C",
                    "--delete",
                    "--move",
                    "--copy",
                    "-u",
                    "--set-upstream-to",
                    "--unset-upstream",
                    "--edit-description",
                    "-f",
                    "--force",
                ]);
                if changes || (!listing && !o.operands.is_empty()) {
                    GitKind::Other
                } else {
                    GitKind::ReadOnly
                }
            }
            "tag" => {
                let o = getopt(
                    rest,
                    "mFu",
                    &[
                        "--message",
                        "--file",
                        "--local-user",
                        "--sort",
                        "--format",
                        "--contains",
                        "--points-at",
                        "--merged",
                        "--no-merged",
                    ],
                    false,
                );
                let listing = o.has(&["-l", "--list", "-v", "--verify"]);
                if !listing && (!o.operands.is_empty() || o.has(&["-d", "--delete"])) {
                    GitKind::Other
                } else {
                    GitKind::ReadOnly
                }
            }
            "remote" => match rest
                .iter()
                .find(|a| !a.text.starts_with('-'))
                .map(|a| a.text.as_str())
            {
                None | Some("show" | "get-url") => GitKind::ReadOnly,
                _ => GitKind::Other,
            },
            "config" => {
                let o = getopt(
                    rest,
                    "f",
                    &["--file", "--blob", "--type", "--default"],
                    false,
                );
                let read = o.has(&[
                    "--get",
                    "--get-all",
                    "--get-regexp",
                    "--get-urlmatch",
                    "--list",
                    "-l",
                    "--show-origin",
                    "--show-scope",
                    "--get-color",
                    "--get-colorbool",
                ]) || matches!(
                    o.operands.first().map(|a| a.text.as_str()),
                    Some("get" | "list")
                ) || (o.operands.len() == 1
                    && !o.has(&[
                        "--unset",
                        "--unset-all",
                        "--add",
                        "--replace-all",
                        "--remove-section",
                        "--rename-section",
                        "-e",
                        "--edit",
                    ]));
                if read {
                    GitKind::ReadOnly
                } else {
                    GitKind::Other
                }
            }
            "worktree" => match rest.first().map(|a| a.text.as_str()) {
                Some("list") => GitKind::ReadOnly,
                _ => GitKind::Other,
            },
            "stash" => self.git_stash(rest),
            "checkout" => self.git_checkout(rest, here),
            "switch" => {
                let o = getopt(
                    rest,
                    "cC",
                    &["--create", "--force-create", "--orphan", "--conflict"],
                    false,
                );
                let creates = o.has(&["-c", "-C", "--create", "--force-create", "--orphan"]);
                if creates && o.operands.is_empty() && !o.has(&["--orphan"]) {
                    // A new branch where HEAD is: the working tree stays.
                    GitKind::Other
                } else {
                    GitKind::Discards { paths: None }
                }
            }
            "restore" => {
                let o = getopt(
                    rest,
                    "s",
                    &["--source", "--conflict", "--pathspec-from-file"],
                    false,
                );
                let staged = o.has(&["-S", "--staged"]);
                let worktree = o.has(&["-W", "--worktree"]);
                if staged && !worktree {
                    return GitKind::IndexWrite;
                }
                for p in &o.operands {
                    self.write(here, p, How::GitRestore);
                }
                if o.operands.is_empty() {
                    GitKind::Discards { paths: None }
                } else {
                    GitKind::Discards {
                        paths: Some(texts(&o.operands)),
                    }
                }
            }
            "reset" => {
                if has(&["--hard", "--keep", "--merge"]) {
                    GitKind::Discards { paths: None }
                } else {
                    GitKind::IndexWrite
                }
            }
            "clean" => {
                let o = getopt(rest, "e", &["--exclude"], false);
                if o.has(&["-n", "--dry-run"]) || !o.has(&["-f", "--force", "-i", "--interactive"])
                {
                    GitKind::ReadOnly
                } else if o.operands.is_empty() {
                    GitKind::Discards { paths: None }
                } else {
                    GitKind::Discards {
                        paths: Some(texts(&o.operands)),
                    }
                }
            }
            "bisect" => match rest.first().map(|a| a.text.as_str()) {
                Some("log" | "visualize" | "view" | "help") => GitKind::ReadOnly,
                _ => GitKind::Discards { paths: None },
            },
            s if WHOLE_TREE.contains(&s) => GitKind::Discards { paths: None },
            "add" => {
                let o = getopt(rest, "", &["--chmod", "--pathspec-from-file"], false);
                if o.has(&["-n", "--dry-run"]) {
                    return GitKind::ReadOnly;
                }
                let paths = texts(&o.operands);
                let every = o.has(&["-A", "--all", "-u", "--update", "--pathspec-from-file"])
                    && paths.is_empty();
                let all = every || paths.iter().any(|p| is_everything(p));
                GitKind::Captures { all, paths }
            }
            "commit" => {
                let o = getopt(
                    rest,
                    "mFCctS",
                    &[
                        "--message",
                        "--file",
                        "--reuse-message",
                        "--reedit-message",
                        "--author",
                        "--date",
                        "--template",
                        "--fixup",
                        "--squash",
                        "--cleanup",
                        "--trailer",
                        "--pathspec-from-file",
                    ],
                    false,
                );
                if o.has(&["--dry-run"]) {
                    return GitKind::ReadOnly;
                }
                let paths = texts(&o.operands);
                let all = o.has(&["-a", "--all"]) || paths.iter().any(|p| is_everything(p));
                if all || !paths.is_empty() || o.has(&["--pathspec-from-file"]) {
                    GitKind::Captures { all, paths }
                } else {
                    GitKind::IndexWrite
                }
            }
            "rm" => {
                let o = getopt(rest, "", &["--pathspec-from-file"], false);
                if !o.has(&["--cached", "-n", "--dry-run"]) {
                    for p in &o.operands {
                        self.write(here, p, How::Remove);
                    }
                }
                if o.has(&["-n", "--dry-run"]) {
                    GitKind::ReadOnly
                } else {
                    GitKind::IndexWrite
                }
            }
            "mv" => {
                let o = getopt(rest, "", &[], false);
                if o.has(&["-n", "--dry-run"]) {
                    return GitKind::ReadOnly;
                }
                if let Some((dest, srcs)) = o.operands.split_last() {
                    if srcs.len() > 1 || dest.text.ends_with('/') {
                        for s in srcs {
                            let name = s.text.trim_end_matches('/');
                            let name = name.rsplit('/').next().unwrap_or(name);
                            let to = Expanded {
                                text: crate::cmds::join(&dest.text, name),
                                exact: dest.exact && s.exact,
                            };
                            self.write(here, &to, How::Move);
                        }
                    } else {
                        self.write(here, dest, How::Move);
                    }
                    for s in srcs {
                        self.write(here, s, How::MoveSource);
                    }
                }
                GitKind::IndexWrite
            }
            "update-index" | "read-tree" | "merge-file" | "checkout-index" => GitKind::IndexWrite,
            "apply" => self.git_apply(rest, here, stdin),
            s if OTHER.contains(&s) => GitKind::Other,
            s => {
                // An alias or an extension: could be anything.
                self.opaque(format!("git {s}"));
                GitKind::Other
            }
        }
    }

    fn git_stash(&mut self, rest: &[Expanded]) -> GitKind {
        let sub = rest
            .first()
            .filter(|a| !a.text.starts_with('-'))
            .map(|a| a.text.as_str());
        match sub {
            Some("list" | "show") => GitKind::ReadOnly,
            Some("drop" | "clear" | "create" | "store") => GitKind::Other,
            Some("pop" | "apply" | "branch") => GitKind::Discards { paths: None },
            Some("push" | "save") | None => {
                let opts = if sub.is_some() { &rest[1..] } else { rest };
                let o = getopt(opts, "m", &["--message", "--pathspec-from-file"], false);
                if sub == Some("save") || o.operands.is_empty() {
                    GitKind::Discards { paths: None }
                } else {
                    GitKind::Discards {
                        paths: Some(o.operands.iter().map(|e| e.text.clone()).collect()),
                    }
                }
            }
            Some(_) => GitKind::Discards { paths: None },
        }
    }

    fn git_checkout(&mut self, rest: &[Expanded], here: &Scope) -> GitKind {
        let double_dash = rest.iter().position(|a| a.text == "--");
        let before = &rest[..double_dash.unwrap_or(rest.len())];
        let o = getopt(
            before,
            "bB",
            &["--orphan", "--conflict", "--pathspec-from-file"],
            false,
        );
        let creates = o.has(&["-b", "-B", "--orphan"]);
        let paths: Vec<&Expanded> = match double_dash {
            Some(d) => rest[d + 1..].iter().collect(),
            None if creates => Vec::new(),
            None => match o.operands.as_slice() {
                [] => Vec::new(),
                [one] if looks_like_path(one) => vec![*one],
                [_one] => Vec::new(),
                [first, others @ ..] if looks_like_path(first) => std::iter::once(*first)
                    .chain(others.iter().copied())
                    .collect(),
                [_tree, others @ ..] => others.to_vec(),
            },
        };
        if !paths.is_empty() {
            for p in &paths {
                self.write(here, p, How::GitRestore);
            }
            return GitKind::Discards {
                paths: Some(paths.iter().map(|e| e.text.clone()).collect()),
            };
        }
        if creates && o.operands.is_empty() {
            // `checkout -b NEW`: a new branch where HEAD is; the working tree stays.
            return GitKind::Other;
        }
        if o.operands.is_empty() && double_dash.is_none() && !o.has(&["-f", "--force"]) {
            // `git checkout` alone reports; `-f` throws the working tree's changes away.
            return GitKind::ReadOnly;
        }
        GitKind::Discards { paths: None }
    }

    fn git_apply(&mut self, rest: &[Expanded], here: &Scope, stdin: Option<&str>) -> GitKind {
        let o = getopt(
            rest,
            "pC",
            &[
                "--exclude",
                "--include",
                "--directory",
                "--whitespace",
                "--build-fake-ancestor",
            ],
            false,
        );
        if o.has(&["--check", "--stat", "--numstat", "--summary"]) && !o.has(&["--apply"]) {
            return GitKind::ReadOnly;
        }
        let cached = o.has(&["--cached"]);
        if !cached {
            let strip = o
                .value(&["-p"])
                .and_then(|v| v.text.parse().ok())
                .unwrap_or(1);
            let mut dir = here.clone();
            if let Some(d) = o.value(&["--directory"]) {
                cd_to(&mut dir, Some(&d));
            }
            match (o.operands.is_empty(), stdin) {
                (true, Some(body)) => {
                    for t in diff_targets(body, strip) {
                        self.write(
                            &dir,
                            &Expanded {
                                text: t,
                                exact: true,
                            },
                            How::Patch,
                        );
                    }
                }
                _ => self.opaque("git apply".to_owned()),
            }
        }
        if cached || o.has(&["--index"]) {
            GitKind::IndexWrite
        } else {
            GitKind::Other
        }
    }

    /// `patch [-pN] [-d DIR] [FILE [PATCHFILE]] < diff`.
    pub(crate) fn patch(&mut self, args: &[Expanded], scope: &Scope, stdin: Option<&str>) {
        let o = getopt(
            args,
            "pdioBDFrVYzg",
            &[
                "--strip",
                "--directory",
                "--input",
                "--output",
                "--prefix",
                "--ifdef",
                "--fuzz",
                "--reject-file",
                "--version-control",
                "--basename-prefix",
                "--suffix",
                "--get",
                "--quoting-style",
                "--backup-if-mismatch",
                "--read-only",
            ],
            false,
        );
        if o.has(&["--dry-run", "-C", "--check"]) {
            return;
        }
        if let Some(out) = o.value(&["-o", "--output"]) {
            self.write(scope, &out, How::Output);
            return;
        }
        let mut dir = scope.clone();
        if let Some(d) = o.value(&["-d", "--directory"]) {
            cd_to(&mut dir, Some(&d));
        }
        if let Some(file) = o.operands.first() {
            self.write(&dir, file, How::Patch);
            return;
        }
        let strip = o
            .value(&["-p", "--strip"])
            .and_then(|v| v.text.parse().ok());
        match (o.value(&["-i", "--input"]), stdin) {
            (None, Some(body)) => {
                // Without -p, patch's own choice of name is not knowable here: the names as
                // written, marked inexact.
                for t in diff_targets(body, strip.unwrap_or(0)) {
                    self.write(
                        &dir,
                        &Expanded {
                            text: t,
                            exact: strip.is_some(),
                        },
                        How::Patch,
                    );
                }
            }
            _ => self.opaque("patch".to_owned()),
        }
    }
}
