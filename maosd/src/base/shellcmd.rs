//! A shell tool's command (Claude Code's `Bash`, Codex's shell, Gemini CLI's
//! `run_shell_command`) read before it runs, with `maos_shell`: the files it names as writes
//! become the call's paths, locked like an edit tool's. Pure: the connection places them.

use maos_proto::GitUse;
use maos_shell::{Dir, GitKind, How};

/// The files a shell command will write, as paths the call's `cwd` resolves.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Targets {
    /// Every file named as a write, relative to the command's start directory or absolute;
    /// the files of the `apply_patch` bodies it carries too.
    pub files: Vec<String>,
    /// The ones it removes or moves away (`rm -r d`, `mv d e`): when such a path is a
    /// directory, everything under it is written.
    pub removed: Vec<String>,
    /// Its git commands that discard or capture working-tree changes, their paths relative
    /// to the start directory (as `files`).
    pub git: Vec<GitUse>,
    /// The directories (relative to the start directory, "" for it) its git commands that
    /// write the index run in; the start directory where that cannot be known.
    pub index_dirs: Vec<String>,
}

/// `path` as the start directory sees it: absolute as it is, else under the directory the
/// command changed into. None where that directory cannot be known (`cd $X`).
fn from_start(dir: &Dir, path: &str) -> Option<String> {
    if path.starts_with('/') {
        return Some(path.to_string());
    }
    match dir {
        Dir::Start => Some(path.to_string()),
        Dir::Path(d) => Some(format!("{}/{path}", d.trim_end_matches('/'))),
        Dir::Unknown => None,
    }
}

/// What `command` writes that can be named before it runs. A pattern (`*.rs`, `$OUT`) or a
/// path under an unknowable directory is not a name: left to run (issue 31 §1). `patches`:
/// the files of the `apply_patch` bodies it carries too (relative to the start directory).
pub fn targets(command: &str, patches: bool) -> Targets {
    let analysis = maos_shell::analyze(command);
    let mut out = Targets::default();
    for w in analysis.writes.iter().filter(|w| w.exact) {
        let Some(path) = from_start(&w.dir, &w.path) else {
            continue;
        };
        if matches!(w.how, How::Remove | How::MoveSource) && !out.removed.contains(&path) {
            out.removed.push(path.clone());
        }
        if !out.files.contains(&path) {
            out.files.push(path);
        }
    }
    for g in &analysis.git {
        let within = |paths: &[String]| -> Vec<String> {
            paths.iter().filter_map(|p| from_start(&g.dir, p)).collect()
        };
        let use_of = |captures: bool, all: bool, paths: Vec<String>| GitUse {
            captures,
            all,
            paths,
            args: g.args.clone(),
        };
        let found = match &g.kind {
            GitKind::ReadOnly | GitKind::Other => continue,
            GitKind::IndexWrite => None,
            GitKind::Discards { paths: None } => Some(use_of(false, true, Vec::new())),
            GitKind::Discards { paths: Some(p) } => Some(use_of(false, false, within(p))),
            GitKind::Captures { all, paths } => Some(use_of(true, *all, within(paths))),
        };
        out.git.extend(found);
        let dir = match &g.dir {
            Dir::Path(d) => d.clone(),
            Dir::Start | Dir::Unknown => String::new(),
        };
        if !out.index_dirs.contains(&dir) {
            out.index_dirs.push(dir);
        }
    }
    let dirs = analysis
        .patch_dirs
        .iter()
        .chain(std::iter::repeat(&Dir::Start));
    for (body, dir) in analysis.patches.iter().zip(dirs).filter(|_| patches) {
        for path in maos_core::patch::patch_paths(body) {
            let Some(path) = from_start(dir, &path) else {
                continue;
            };
            if !out.files.contains(&path) {
                out.files.push(path);
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn writes_are_named_from_the_start_directory() {
        let t = targets(
            "cd src && sed -i 's/a/b/' x.rs && echo hi > /tmp/log && cat y.rs",
            true,
        );
        assert_eq!(t.files, ["src/x.rs", "/tmp/log"]);
        let t = targets("rm -rf build && mv old new", true);
        assert_eq!(t.removed, ["build", "old"]);
        assert!(t.files.contains(&"new".to_string()));
        // Patterns and unknowable directories are left to run.
        assert!(targets("rm *.rs; cd $D && touch x", true).files.is_empty());
        assert!(targets("cargo test 2>&1 | tail -5", true).files.is_empty());
    }

    #[test]
    fn git_that_discards_or_captures_is_named_with_its_scope() {
        let t = targets(
            "git status && git stash && cd src && git add a.rs b.rs",
            true,
        );
        assert_eq!(t.git.len(), 2, "{:?}", t.git);
        assert!(!t.git[0].captures && t.git[0].all);
        assert!(t.git[1].captures && !t.git[1].all);
        assert_eq!(t.git[1].paths, ["src/a.rs", "src/b.rs"]);
        assert_eq!(t.index_dirs, ["", "src"]);
        let t = targets("git commit -m 'x'", true);
        assert!(t.git.is_empty(), "commits what is staged: {:?}", t.git);
        assert_eq!(t.index_dirs, [""]);
        assert!(
            targets("git log --oneline | head", true)
                .index_dirs
                .is_empty()
        );
    }

    #[test]
    fn a_patch_through_the_shell_names_its_files() {
        let t = targets(
            "bash -c \"apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: a.rs\n+x\n*** End Patch\nEOF\n\"",
            true,
        );
        assert_eq!(t.files, ["a.rs"]);
        // Applied in the directory the command changed into: its paths are under it.
        let t = targets(
            "cd sub && apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: b.rs\n+x\n*** End Patch\nEOF\n",
            true,
        );
        assert_eq!(t.files, ["sub/b.rs"]);
    }
}
