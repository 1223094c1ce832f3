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
