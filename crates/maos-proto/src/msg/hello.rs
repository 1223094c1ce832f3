//! The handshake and the envelopes: what a client sends ([`ClientMsg`]: hello, a request, a
//! subscription) and what the daemon sends back ([`ServerMsg`]: welcome, a response, an event,
//! a connection error), and who started the daemon.

use serde::{Deserialize, Serialize};

use super::{EventFilter, Reply, Request, StartedBy};
use crate::ErrorBody;
use maos_core::record::EventRecord;

/// Client → daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Always the first frame: the client's protocol version.
    Hello {
        protocol: u32,
        client_version: String,
        /// What kind of client this is: the daemon keeps slots for hooks and the CLI that
        /// long-lived connections cannot take. Missing (an older client): `other`.
        #[serde(default)]
        client: ClientKind,
    },
    /// One request; `project` is the canonical project root (None for daemon-wide requests).
    Request {
        id: u64,
        #[serde(default)]
        project: Option<String>,
        body: Request,
    },
    /// Turn this connection into a stream of the project's events matching `filter`, starting
    /// after `filter.after_seq` (history first, then live events, no gap, no duplicate).
    Subscribe {
        id: u64,
        project: String,
        filter: EventFilter,
    },
}

/// What a connection is for, as its hello says (the daemon also sees it: a subscription is a
/// `follow`, a lock request that waits a `waiter`, whatever the hello said).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ClientKind {
    /// `maos hook`: an agent CLI waits on it before each tool call.
    Hook,
    /// A `maos` command: one request or a few, then it exits.
    Cli,
    /// A subscription or a view that stays open: `events --follow`, `maos top`, `ps --watch`,
    /// the dashboard's live stream.
    Follow,
    /// `maos mcp`: an MCP server keeping connections for its tool calls.
    Mcp,
    /// A lock request that waits for the holder.
    Waiter,
    /// Anything else, or not said; a kind this daemon does not know is `other` too.
    #[default]
    #[serde(other)]
    Other,
}

impl ClientKind {
    pub const ALL: [ClientKind; 6] = [
        ClientKind::Hook,
        ClientKind::Cli,
        ClientKind::Follow,
        ClientKind::Mcp,
        ClientKind::Waiter,
        ClientKind::Other,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ClientKind::Hook => "hook",
            ClientKind::Cli => "cli",
            ClientKind::Follow => "follow",
            ClientKind::Mcp => "mcp",
            ClientKind::Waiter => "waiter",
            ClientKind::Other => "other",
        }
    }

    /// Connections of this kind stay open on purpose (and so have a cap of their own).
    pub fn long_lived(self) -> bool {
        matches!(
            self,
            ClientKind::Follow | ClientKind::Mcp | ClientKind::Waiter
        )
    }
}

/// Daemon → client. Externally tagged (`{"response": {...}}`): the client decodes a frame in
/// one pass, without serde buffering it first as it must for internally tagged enums.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerMsg {
    /// The answer to every hello, also when the protocols differ (then an [`ServerMsg::Error`]
    /// follows and the daemon closes): the client learns who runs and whether it may replace it.
    Welcome {
        protocol: u32,
        daemon_version: String,
        pid: u32,
        #[serde(default)]
        started_by: StartedBy,
    },
    Response {
        id: u64,
        result: Result<Reply, ErrorBody>,
    },
    Event {
        id: u64,
        event: EventRecord,
    },
    /// A connection-level error (bad frame, version mismatch); the daemon may close afterwards.
    Error {
        error: ErrorBody,
    },
}

#[cfg(test)]
mod tests {
    use maos_core::SessionOp;

    use super::*;

    /// `ALL` lists the kinds in declaration order, so a kind's discriminant is its place
    /// there (the client keeps its kind as that number).
    #[test]
    fn all_lists_each_kind_at_its_discriminant() {
        for (i, k) in ClientKind::ALL.iter().enumerate() {
            assert_eq!(*k as usize, i, "{k:?}");
        }
    }
    use crate::Request;

    #[test]
    fn request_wire_shape_is_stable() {
        let msg = ClientMsg::Request {
            id: 7,
            project: Some("/p".into()),
            body: Request::SessionTransition(crate::req::SessionTransition {
                session: None,
                op: SessionOp::Pause,
                reason: Some("lunch".into()),
            }),
        };
        let v = serde_json::to_value(&msg).unwrap();
        assert_eq!(v["kind"], "request");
        assert_eq!(v["body"]["request"], "session_transition");
        assert_eq!(v["body"]["op"], "pause");
        let back: ClientMsg = serde_json::from_value(v).unwrap();
        assert!(matches!(back, ClientMsg::Request { id: 7, .. }));
    }

    #[test]
    fn a_hello_without_a_kind_or_with_an_unknown_one_is_other() {
        let old = r#"{"kind":"hello","protocol":1,"client_version":"0.1"}"#;
        let newer = r#"{"kind":"hello","protocol":1,"client_version":"9","client":"robot"}"#;
        for text in [old, newer] {
            let msg: ClientMsg = serde_json::from_str(text).unwrap();
            assert!(matches!(
                msg,
                ClientMsg::Hello {
                    client: ClientKind::Other,
                    ..
                }
            ));
        }
        let hook = ClientMsg::Hello {
            protocol: 1,
            client_version: "x".into(),
            client: ClientKind::Hook,
        };
        assert_eq!(serde_json::to_value(&hook).unwrap()["client"], "hook");
    }
}
