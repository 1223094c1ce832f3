//! What maos knows of the content of held files (issue 31 §2): the daemon's look at a file
//! after a tool call ([`SeenFile`]), a violation as `ps` shows it ([`PsViolation`]), and
//! `maos restore-file`'s answer ([`FileRestoreReport`]).

use maos_core::{AgentId, Ts};
use serde::{Deserialize, Serialize};

/// A file as the daemon found it after a tool call: set by the daemon on a hook call (what a
/// client sends there is dropped), read by the actor. Never the content, only its hash.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SeenFile {
    /// Project-relative key.
    pub path: String,
    /// SHA-256 of the content, lowercase hex; empty when the file is gone (deleted).
    pub sha256: String,
    pub size: u64,
    /// Whether a copy of this content is in the project's store (`kept/`); a file over the
    /// store's per-file cap, or one that could not be copied, is hashed only.
    #[serde(default)]
    pub kept: bool,
    /// The holder's version the daemon compared it with (its hash), when it had one: a
    /// violation is reported only if the holder's version is still that one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<String>,
    /// After a shell command: the file changed before the command began (its status-change
    /// time is earlier than the command's PreToolUse), so not by it: by a process outside
    /// the hooks (a person's editor, a background job).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub before_command: bool,
    /// The file's identity and last change (device, inode, ctime, size) when it was hashed,
    /// if that change was old enough to trust: the same stamp at a later look means the same
    /// content, and the file is not read again.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stamp: Option<String>,
}

impl SeenFile {
    /// The file was not there.
    pub fn deleted(&self) -> bool {
        self.sha256.is_empty()
    }
}

/// A held file another agent changed, as `maos ps` shows it on both agents' rows.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PsViolation {
    pub path: String,
    /// The agent that holds the file.
    pub holder: AgentId,
    /// The agent whose shell command changed it; None when the file changed before that
    /// command began (by a process outside the hooks: a person's editor, a background job).
    #[serde(default)]
    pub violator: Option<AgentId>,
    pub at: Ts,
}

/// `maos restore-file`: what was put back and where the overwritten content went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileRestoreReport {
    /// Project-relative key.
    pub path: String,
    /// The version put back (SHA-256) and its size.
    pub version: String,
    pub bytes: u64,
    /// The content it replaced, now kept too (SHA-256; None when the file was gone), and
    /// whether it could be kept (over the per-file cap it is not).
    #[serde(default)]
    pub replaced: Option<String>,
    #[serde(default)]
    pub replaced_kept: bool,
    /// The agent whose version it is, when maos knows.
    #[serde(default)]
    pub holder: Option<AgentId>,
}
