//! Errors of the daemon's own plumbing turned into the wire's [`ErrorBody`]: the one place
//! that decides which [`ErrorCode`] a storage, file or closed-actor failure gets and how its
//! line reads. Messages a request handler writes about its own request stay with the handler.

use std::fmt::Display;

use maos_proto::{ErrorBody, ErrorCode};
use maos_store::StoreError;

/// A database failure: a full disk has its own code (the client says to free space).
pub fn storage_error(e: &StoreError) -> ErrorBody {
    match e {
        StoreError::Full(_) => ErrorBody::new(ErrorCode::StorageFull, e.to_string()),
        StoreError::Unreachable(_) => ErrorBody::new(ErrorCode::Unavailable, e.to_string()),
        StoreError::Busy(_) => ErrorBody::new(ErrorCode::Unavailable, e.to_string()),
        StoreError::BadRow { .. } => ErrorBody::new(
            ErrorCode::ProjectUnloadable,
            format!(
                "this project's state cannot be loaded: {e}; `maos doctor` lists such rows and \
                 `maos repair --quarantine` moves their sessions aside"
            ),
        ),
        _ => ErrorBody::new(ErrorCode::Storage, e.to_string()),
    }
}

/// An id or unique prefix that names no record, or several.
pub fn prefix_error(kind: &str, e: maos_core::PrefixError) -> ErrorBody {
    let code = match e {
        maos_core::PrefixError::Ambiguous { .. } => ErrorCode::Ambiguous,
        _ => ErrorCode::NotFound,
    };
    ErrorBody::new(code, format!("{kind}: {e}"))
}

/// A file of the project's own (its directory, the database copy, an export) could not be
/// written or moved: `{what}: {e}{then}`, where `then` says what that left as it was.
pub fn file_error(what: impl Display, e: impl Display, then: &str) -> ErrorBody {
    ErrorBody::new(ErrorCode::Storage, format!("{what}: {e}{then}"))
}

/// The project's actor is gone or going: its queue or its answer channel closed.
pub fn actor_gone() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::ShuttingDown,
        "the project is closing (the daemon is stopping, or a backup is being restored); retry",
    )
}

/// A request handler panicked (the actor logs it and goes on).
pub fn handler_panicked() -> ErrorBody {
    ErrorBody::new(
        ErrorCode::Internal,
        "internal error while handling the request (see the daemon log)",
    )
}

/// A file `maos restore` was given that is not a usable maos database.
pub fn unusable_backup(e: &StoreError) -> ErrorBody {
    ErrorBody::new(ErrorCode::BadRequest, format!("{e}; nothing replaced"))
}

/// A request the connection cannot take as it is (no project root, a second hello, ...).
pub fn bad_request(message: impl Into<String>) -> ErrorBody {
    ErrorBody::new(ErrorCode::BadRequest, message)
}

/// A change the state does not allow (a transition from the wrong state, a finished session).
pub fn invalid(e: impl Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::InvalidTransition, e.to_string())
}

/// A failure of the daemon itself, not of the request (a task that died, a broken invariant).
pub fn internal(e: impl Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::Internal, e.to_string())
}
