//! The maos wire protocol, shared by the daemon and every client.
//!
//! A frame is a 4-byte big-endian length followed by one JSON object ([`frame`]). The first
//! frame a client sends is [`ClientMsg::Hello`]; the daemon answers [`ServerMsg::Welcome`] or an
//! error naming both protocol versions. Then each [`ClientMsg::Request`] gets exactly one
//! [`ServerMsg::Response`] with the same id, and [`ClientMsg::Subscribe`] turns the connection
//! into a stream of [`ServerMsg::Event`]s.
//!
//! Architecture invariant: nothing here depends on tokio; the client is plain blocking std I/O.

pub mod dashboard;
pub mod error;
pub mod export;
pub mod frame;
pub mod msg;
pub mod paths;
pub mod service;

pub use error::{ErrorBody, ErrorCode};
pub use frame::{FrameError, MAX_FRAME_LEN, read_frame, write_frame};
pub use msg::*;

/// Bumped whenever a message changes shape incompatibly.
pub const PROTOCOL_VERSION: u32 = 1;
