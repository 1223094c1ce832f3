//! What the engine's parts share: its error and a worktree's snapshot.

/// A failure of the radar: a git command that failed or could not run.
#[derive(Debug, thiserror::Error)]
pub enum RadarError {
    /// git could not be started (not installed, or the directory is gone).
    #[error("cannot run git in {dir}: {error}")]
    Spawn { dir: String, error: std::io::Error },
    /// git ran and failed.
    #[error("git {args} failed in {dir}: {message}")]
    Git {
        dir: String,
        args: String,
        message: String,
    },
    /// A file of the radar's own (its temporary indexes) could not be written.
    #[error("radar cache {path}: {error}")]
    Cache { path: String, error: std::io::Error },
    /// A worktree the radar does not know.
    #[error("no worktree {0} on the radar")]
    Unknown(String),
}

/// A worktree's work as one tree: `HEAD` and everything uncommitted over it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Snapshot {
    /// `HEAD`'s commit, `None` before the first commit.
    pub head: Option<String>,
    /// The tree of the whole working tree (untracked, non-ignored files included).
    pub tree: String,
}
