//! The conflict radar's findings (issue 35): two worktrees of one repository whose work would
//! conflict if both landed. The engine that finds them is `maos-radar` (git's own merge of
//! snapshots of both worktrees); these are the shapes it reports, the daemon keeps and
//! `maos radar --json` prints.

use serde::{Deserialize, Serialize};

use crate::ids::AgentId;
use crate::time::Ts;

/// One side of a pair: a worktree as it was snapshotted (its committed and uncommitted work).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RadarSide {
    /// The worktree's root directory.
    pub worktree: String,
    /// Its `HEAD` commit when snapshotted (`None` before its first commit).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub head: Option<String>,
    /// The branch its `HEAD` is on (`None`: detached, or not known; filled in by the daemon).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The tree of its work: `HEAD` plus every uncommitted change and untracked, non-ignored
    /// file.
    pub tree: String,
    /// The live agents working there (filled in by the daemon).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub agents: Vec<AgentId>,
    /// In a fleet, the machine of a worktree another daemon reported (its `worktree` is then
    /// `<machine>:<path>`, a path on that machine); `None` for this machine's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
}

/// One conflicting region of a file: each side's lines (and the merge base's, when git could
/// tell them).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RadarHunk {
    /// 1-based line of the merged text (with markers) where the region starts.
    pub line: u32,
    /// Side `a`'s lines, newline-terminated.
    pub a: String,
    /// The merge base's lines, when the merge could show them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base: Option<String>,
    /// Side `b`'s lines.
    pub b: String,
}

/// A file that would conflict.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RadarFile {
    /// Repository-relative path (the lock key of the file).
    pub path: String,
    /// git's word for the conflict: `contents`, `modify/delete`, `add/add`, `binary`, ...
    pub kind: String,
    /// The conflicting regions (none for a conflict that is not about lines).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hunks: Vec<RadarHunk>,
    /// Side `a`'s change to the file since the merge base (a unified diff), cut to
    /// [`RADAR_DIFF_CAP`] bytes.
    #[serde(default)]
    pub diff_a: String,
    /// Side `b`'s.
    #[serde(default)]
    pub diff_b: String,
}

/// What one merged pair would give: the files that conflict (none: the pair merges cleanly).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RadarPair {
    pub a: RadarSide,
    pub b: RadarSide,
    /// The merge base of the two `HEAD`s, the commit both sides' changes are measured from.
    pub base: String,
    /// When the merge was made.
    pub merged_at: Ts,
    /// The files both sides changed since the base (what made the pair worth merging).
    #[serde(default)]
    pub overlap: Vec<String>,
    pub files: Vec<RadarFile>,
    /// Why the pair could not be merged, when it could not (fleet mode: `cannot compare:
    /// base <sha> not here`, `too large to compare: ...`); `files` is then empty.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl RadarPair {
    /// Whether landing both sides would conflict.
    pub fn conflicts(&self) -> bool {
        !self.files.is_empty()
    }

    /// The side of `worktree`, and the other one.
    pub fn sides_of(&self, worktree: &str) -> Option<(&RadarSide, &RadarSide)> {
        if self.a.worktree == worktree {
            Some((&self.a, &self.b))
        } else if self.b.worktree == worktree {
            Some((&self.b, &self.a))
        } else {
            None
        }
    }
}

/// The most of one side's diff of one file a report carries.
pub const RADAR_DIFF_CAP: usize = 16 * 1024;

/// Fleet mode: the most of one changed file's content a daemon reports of a worktree.
pub const FLEET_FILE_CAP: u64 = 256 * 1024;
/// Fleet mode: the most of a worktree's changed files' contents a daemon reports, together.
pub const FLEET_TREE_CAP: u64 = 4 * 1024 * 1024;
/// Fleet mode: the most changed files a worktree's report lists.
pub const FLEET_FILES_MAX: usize = 1000;
/// Fleet mode: the most agents a worktree's report names.
pub const FLEET_AGENTS_MAX: usize = 64;
/// The longest machine name, worktree path or repository path a report may hold.
pub const FLEET_TEXT_MAX: usize = 4096;

/// Fleet mode: what a daemon reports (through PostgreSQL) of one of its agents' worktrees, so
/// that the other machines' radars can merge it with theirs without reading its disk: a base
/// commit and every file whose content differs from the base's (committed on its branch or
/// not). Read back from another daemon, it is input from outside: [`check_report`] first.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetTree {
    /// The reporting daemon's id.
    pub daemon: String,
    pub machine: String,
    /// The worktree's root, a path on that machine.
    pub worktree: String,
    /// Its live agents (ids as text, checked by [`check_report`]).
    pub agents: Vec<String>,
    /// The commit the files are measured from: the merge base of its `HEAD` with the
    /// repository's main line (`origin/HEAD`, `origin/main`, ...), else its `HEAD`.
    pub base: String,
    /// Set when its contents were too large to report (the files are then named, without
    /// content): why, in words.
    pub too_large: Option<String>,
    pub files: Vec<FleetFile>,
    /// Grows with every report of the worktree.
    pub version: i64,
}

/// A file of a [`FleetTree`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FleetFile {
    /// Repository-relative.
    pub path: String,
    /// git's mode (`0o100644`, `0o100755`, `0o120000`); 0: deleted since the base.
    pub mode: u32,
    /// Its blob id ("" when deleted).
    pub blob: String,
    /// Its size, as the report says.
    pub size: u64,
    /// The bytes PostgreSQL holds for it (what a read would fetch).
    pub stored: u64,
    /// Its content, once fetched.
    pub content: Option<Vec<u8>>,
}

/// Whether `s` is a git object id: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits.
pub fn is_object_id(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

/// Checks a repository-relative path from outside: not empty, relative, no `.`, `..` or empty
/// component, no `.git`, no control character. The reason it is refused, in words.
pub fn check_rel_path(p: &str) -> Result<(), String> {
    let shown = crate::text::collapse_whitespace(p);
    if p.is_empty() || p.len() > FLEET_TEXT_MAX {
        return Err(format!(
            "a path is empty or longer than {FLEET_TEXT_MAX} bytes"
        ));
    }
    if p.chars().any(char::is_control) {
        return Err(format!(
            "path `{}` holds a control character",
            shown.escape_debug()
        ));
    }
    if p.starts_with('/') {
        return Err(format!("path `{shown}` is absolute"));
    }
    for part in p.split('/') {
        match part {
            "" => return Err(format!("path `{shown}` has an empty component")),
            "." | ".." => return Err(format!("path `{shown}` leaves its directory (`{part}`)")),
            _ if part.eq_ignore_ascii_case(".git") => {
                return Err(format!("path `{shown}` names a .git directory"));
            }
            _ => {}
        }
    }
    Ok(())
}

/// Checks a text another daemon wrote (a machine name, a worktree, a daemon id, a reason): not
/// empty, at most [`FLEET_TEXT_MAX`] bytes, no control character. Why it is refused, in words.
pub fn check_text(what: &str, s: &str) -> Result<(), String> {
    if s.is_empty() || s.len() > FLEET_TEXT_MAX || s.chars().any(char::is_control) {
        return Err(format!(
            "its {what} is empty, too long or holds a control character"
        ));
    }
    Ok(())
}

/// Checks a worktree's report read back from PostgreSQL as wire input is checked: names,
/// commit ids, modes, paths, sizes against the caps. Returns its agents; `Err` says why the
/// report is refused, in one line.
pub fn check_report(t: &FleetTree) -> Result<Vec<AgentId>, String> {
    check_text("machine", &t.machine)?;
    check_text("worktree", &t.worktree)?;
    if !is_object_id(&t.base) {
        return Err(format!(
            "its base `{}` is not a commit id",
            crate::text::collapse_whitespace(&t.base).escape_debug()
        ));
    }
    if t.agents.len() > FLEET_AGENTS_MAX {
        return Err(format!("it names {} agents", t.agents.len()));
    }
    let agents = t
        .agents
        .iter()
        .map(|a| AgentId::parse(a).map_err(|e| format!("agent: {e}")))
        .collect::<Result<Vec<_>, _>>()?;
    if let Some(why) = &t.too_large {
        check_text("reason", why)?;
    }
    if t.files.len() > FLEET_FILES_MAX {
        return Err(format!(
            "it lists {} files (at most {FLEET_FILES_MAX})",
            t.files.len()
        ));
    }
    let mut seen = std::collections::BTreeSet::new();
    let mut total: u64 = 0;
    for f in &t.files {
        check_rel_path(&f.path)?;
        if !seen.insert(f.path.as_str()) {
            return Err(format!("path `{}` is listed twice", f.path));
        }
        match f.mode {
            0 => {
                if !f.blob.is_empty() || f.size != 0 || f.stored != 0 {
                    return Err(format!("deleted file `{}` has content", f.path));
                }
                continue;
            }
            0o100644 | 0o100755 | 0o120000 => {}
            m => return Err(format!("file `{}` has mode {m:o}", f.path)),
        }
        if !is_object_id(&f.blob) || f.blob.len() != t.base.len() {
            return Err(format!("file `{}` has no valid blob id", f.path));
        }
        // A report too large to compare names its files without their contents.
        if t.too_large.is_none() && f.size > FLEET_FILE_CAP {
            return Err(format!(
                "file `{}` is {} bytes (at most {FLEET_FILE_CAP})",
                f.path, f.size
            ));
        }
        let held = if t.too_large.is_some() { 0 } else { f.size };
        if f.stored != held {
            return Err(format!(
                "file `{}` says {} bytes but {} are stored",
                f.path, held, f.stored
            ));
        }
        if let Some(c) = &f.content
            && c.len() as u64 != f.size
        {
            return Err(format!(
                "file `{}` says {} bytes but has {}",
                f.path,
                f.size,
                c.len()
            ));
        }
        total = total.saturating_add(f.size);
    }
    if t.too_large.is_none() && total > FLEET_TREE_CAP {
        return Err(format!(
            "its files hold {total} bytes (at most {FLEET_TREE_CAP})"
        ));
    }
    Ok(agents)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report() -> FleetTree {
        FleetTree {
            daemon: "m2/abc".into(),
            machine: "m2".into(),
            worktree: "/src/repo".into(),
            agents: vec![format!("agt_{}", "0".repeat(32))],
            base: "a".repeat(40),
            too_large: None,
            files: vec![FleetFile {
                path: "src/api.rs".into(),
                mode: 0o100644,
                blob: "b".repeat(40),
                size: 3,
                stored: 3,
                content: Some(b"abc".to_vec()),
            }],
            version: 1,
        }
    }

    fn refused(t: &FleetTree) -> String {
        check_report(t).expect_err("refused")
    }

    #[test]
    fn a_sound_report_passes_and_names_its_agents() {
        assert_eq!(check_report(&report()).map(|a| a.len()), Ok(1));
        let mut t = report();
        t.files.push(FleetFile {
            path: "gone.txt".into(),
            mode: 0,
            blob: String::new(),
            size: 0,
            stored: 0,
            content: None,
        });
        assert!(check_report(&t).is_ok());
    }

    #[test]
    fn hostile_reports_are_refused_with_the_reason() {
        for (path, why) in [
            ("../x", "leaves its directory"),
            ("src/../../x", "leaves its directory"),
            ("/etc/passwd", "is absolute"),
            ("a//b", "empty component"),
            (".git/config", ".git"),
            ("src/.GIT/hooks/x", ".git"),
            ("a\nb", "control character"),
            ("", "empty"),
        ] {
            let mut t = report();
            t.files[0].path = path.to_string();
            let e = refused(&t);
            assert!(e.contains(why), "{path:?}: {e}");
        }
        let mut t = report();
        t.base = "HEAD; rm -rf /".into();
        assert!(refused(&t).contains("not a commit id"));
        let mut t = report();
        t.base = "A".repeat(40);
        assert!(refused(&t).contains("not a commit id"), "upper case");
        let mut t = report();
        t.files[0].blob = "b".repeat(64);
        assert!(
            refused(&t).contains("blob id"),
            "length differs from the base's"
        );
        let mut t = report();
        t.files[0].size = FLEET_FILE_CAP + 1;
        t.files[0].stored = FLEET_FILE_CAP + 1;
        assert!(refused(&t).contains("bytes (at most"));
        let mut t = report();
        t.files[0].stored = 1 << 30;
        assert!(refused(&t).contains("are stored"));
        let mut t = report();
        t.files[0].content = Some(vec![0; 2]);
        assert!(refused(&t).contains("but has 2"));
        let mut t = report();
        t.files[0].mode = 0o160000;
        assert!(refused(&t).contains("mode 160000"));
        let mut t = report();
        t.agents = vec!["agt_/etc".into()];
        assert!(refused(&t).contains("agent"));
        let mut t = report();
        t.files.push(t.files[0].clone());
        assert!(refused(&t).contains("twice"));
        let mut t = report();
        t.files = (0..=FLEET_FILES_MAX)
            .map(|i| FleetFile {
                path: format!("f{i}"),
                ..report().files[0].clone()
            })
            .collect();
        assert!(refused(&t).contains("files (at most"));
        let mut t = report();
        t.files = (0..20)
            .map(|i| FleetFile {
                path: format!("f{i}"),
                size: FLEET_FILE_CAP,
                stored: FLEET_FILE_CAP,
                content: None,
                ..report().files[0].clone()
            })
            .collect();
        assert!(refused(&t).contains("bytes (at most"), "the tree's cap");
    }

    #[test]
    fn a_report_too_large_to_compare_names_files_without_content() {
        let mut t = report();
        t.too_large = Some("5 MB of changes".into());
        t.files[0].size = 5 << 20;
        t.files[0].stored = 0;
        t.files[0].content = None;
        assert!(check_report(&t).is_ok());
        t.files[0].stored = 5;
        assert!(refused(&t).contains("are stored"));
    }
}
