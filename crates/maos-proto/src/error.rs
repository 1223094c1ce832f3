//! Stable, snake_case error codes. Scripts match on the code; the message is for people.

use serde::{Deserialize, Serialize};
use std::fmt;

/// Machine-readable error code carried by every failed response.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorCode {
    /// The request could not be understood (bad JSON, missing field, bad value).
    BadRequest,
    /// The named session, agent, phase or project does not exist.
    NotFound,
    /// An id prefix matched more than one session or agent.
    Ambiguous,
    /// The state machine does not allow this change from the current state.
    InvalidTransition,
    /// A lock is held by another agent.
    LockConflict,
    /// A bounded lock wait ran out.
    LockTimeout,
    /// A lock wait would close a cycle in the wait-for graph.
    Deadlock,
    /// A path resolves outside the project (or the agent's worktree).
    PathOutsideWorkspace,
    /// Only a lock's holder may release it.
    NotLockHolder,
    /// The disk is full: writes are refused, reads keep working.
    StorageFull,
    /// The database failed in another way.
    Storage,
    /// Client and daemon speak different protocol versions.
    ProtocolMismatch,
    /// A frame was longer than the cap.
    FrameTooLarge,
    /// The daemon is shutting down and takes no new work.
    ShuttingDown,
    /// The daemon could not be reached or started.
    Unavailable,
    /// A bug: the daemon caught it and kept running.
    Internal,
    /// The connection comes from another user than the daemon's.
    PermissionDenied,
    /// The project's database holds a row maos cannot read, so the project cannot load: every
    /// request says which and what to run; a hook refuses writes (`maos repair --quarantine`).
    ProjectUnloadable,
    /// A code this client does not know (sent by a newer daemon).
    #[serde(other)]
    Unknown,
}

impl ErrorCode {
    /// The wire name of the code.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::BadRequest => "bad_request",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Ambiguous => "ambiguous",
            ErrorCode::InvalidTransition => "invalid_transition",
            ErrorCode::LockConflict => "lock_conflict",
            ErrorCode::LockTimeout => "lock_timeout",
            ErrorCode::Deadlock => "deadlock",
            ErrorCode::PathOutsideWorkspace => "path_outside_workspace",
            ErrorCode::NotLockHolder => "not_lock_holder",
            ErrorCode::StorageFull => "storage_full",
            ErrorCode::Storage => "storage",
            ErrorCode::ProtocolMismatch => "protocol_mismatch",
            ErrorCode::FrameTooLarge => "frame_too_large",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Internal => "internal",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::ProjectUnloadable => "project_unloadable",
            ErrorCode::Unknown => "unknown",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// The error half of a response: a stable code and one line for a person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize, thiserror::Error)]
#[error("{message}")]
pub struct ErrorBody {
    pub code: ErrorCode,
    pub message: String,
}

impl ErrorBody {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        ErrorBody {
            code,
            message: message.into(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn codes_are_stable_snake_case_and_unknown_codes_parse() {
        for (code, name) in [
            (ErrorCode::NotFound, "not_found"),
            (ErrorCode::InvalidTransition, "invalid_transition"),
            (ErrorCode::PathOutsideWorkspace, "path_outside_workspace"),
            (ErrorCode::StorageFull, "storage_full"),
        ] {
            assert_eq!(serde_json::to_string(&code).unwrap(), format!("\"{name}\""));
            assert_eq!(code.as_str(), name);
        }
        let c: ErrorCode = serde_json::from_str("\"from_the_future\"").unwrap();
        assert_eq!(c, ErrorCode::Unknown);
    }
}
