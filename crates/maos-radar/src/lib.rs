//! The conflict radar's engine (issue 35): which worktrees of one repository hold work that
//! would conflict if both landed.
//!
//! Each worktree is snapshotted into a tree (its `HEAD` plus every uncommitted change and
//! untracked, non-ignored file) through a temporary index of the radar's own, so the
//! worktree's index, `HEAD` and refs are never touched (only objects are written). Pairs whose
//! changes since their merge base touch a common file are merged with git's own merge
//! (`git merge-tree --write-tree`), and the conflicting files, hunks and each side's diff are
//! reported. After a write in one worktree only that worktree is snapshotted again and only
//! the pairs whose other side changed a file that the write changed are merged again.
//!
//! Floors: `model` (errors, snapshots), `branch` (a worktree's branch from its `HEAD` file,
//! the repository's refs stamp) and the pure modules `hunks` (conflict markers),
//! `parse` (git's `-z` outputs) and `plan` (which pairs to merge) at the bottom; `git` (every
//! git process) above them; `radar` (the incremental engine) and `fleet` (reports of worktrees
//! for other machines, and the trees theirs stand for) above; `corpus` (the correctness
//! corpus's runner, for the bench and the corpus test) on top.

mod branch;
pub mod corpus;
pub mod fleet;
mod git;
mod hunks;
mod model;
mod parse;
mod plan;
mod radar;

pub use branch::{RefsStamp, branch, head_commit, refs_stamp};
pub use git::{Git, RawChange};
pub use hunks::hunks;
pub use model::{RadarError, Snapshot};
pub use parse::{MergeOutput, merge_output, merge_outputs, names};
pub use plan::{PairMemo, Step, step};
pub use radar::{Change, Radar, Update};
