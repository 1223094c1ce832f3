//! A typed, blocking wire client: one connection, handshaken, whose requests answer with
//! results instead of panics. What `maos` does on the wire, without its auto-start; the load
//! tool (`maos-bench`) times requests through it, and a test can drive a daemon with it where
//! [`crate::Raw`]'s JSON is more than it needs.

use std::io::{BufReader, Write};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::time::Instant;

use maos_proto::{
    ClientMsg, ErrorBody, PROTOCOL_VERSION, Reply, Request, ServerMsg, frame, read_frame,
};
use serde::Deserialize;
use serde::de::IgnoredAny;

/// What the harness's fallible calls fail with: a sentence for the person running it.
pub type Res<T = ()> = Result<T, String>;

/// Just enough of a response to know it was acknowledged, without building the records.
#[derive(Deserialize)]
#[serde(rename_all = "snake_case")]
enum Ack {
    Response { id: u64, result: AckResult },
    Error { error: ErrorBody },
}

#[derive(Deserialize)]
enum AckResult {
    Ok(IgnoredAny),
    Err(ErrorBody),
}

/// A refusal by the daemon, as a sentence.
pub fn remote(e: &ErrorBody) -> String {
    format!("maosd refused: {} ({})", e.message, e.code)
}

/// A connected, handshaken blocking client (the same shape as `maos`'s, without auto-start).
/// Project requests carry `root`.
pub struct Client {
    w: UnixStream,
    r: BufReader<UnixStream>,
    next_id: u64,
    root: String,
}

impl Client {
    pub fn connect(socket: &Path, root: &str) -> Res<Client> {
        let s = UnixStream::connect(socket)
            .map_err(|e| format!("cannot connect to {}: {e}", socket.display()))?;
        let r = BufReader::new(s.try_clone().map_err(|e| e.to_string())?);
        let mut c = Client {
            w: s,
            r,
            next_id: 1,
            root: root.to_string(),
        };
        c.send(&ClientMsg::Hello {
            protocol: PROTOCOL_VERSION,
            client_version: env!("CARGO_PKG_VERSION").to_string(),
            client: maos_proto::ClientKind::Cli,
        })?;
        match read_frame(&mut c.r).map_err(|e| format!("handshake: {e}"))? {
            ServerMsg::Welcome { .. } => Ok(c),
            ServerMsg::Error { error } => Err(remote(&error)),
            other => Err(format!("unexpected handshake answer: {other:?}")),
        }
    }

    fn send(&mut self, msg: &ClientMsg) -> Res {
        let buf = frame::encode(msg).map_err(|e| e.to_string())?;
        self.w
            .write_all(&buf)
            .map_err(|e| format!("write to maosd: {e}"))
    }

    fn send_request(&mut self, project: bool, body: Request) -> Res<u64> {
        let id = self.next_id;
        self.next_id += 1;
        let project = project.then(|| self.root.clone());
        self.send(&ClientMsg::Request { id, project, body })?;
        Ok(id)
    }

    /// A project request, fully decoded.
    pub fn call(&mut self, body: Request) -> Res<Reply> {
        self.call_inner(true, body)
    }

    /// A daemon request (no project), fully decoded.
    pub fn call_daemon(&mut self, body: Request) -> Res<Reply> {
        self.call_inner(false, body)
    }

    /// A project request whose refusal by the daemon is an answer, not a failure: `Err` only
    /// when the connection failed (the request may or may not have been applied).
    pub fn call_try(&mut self, body: Request) -> Res<Result<Reply, ErrorBody>> {
        let id = self.send_request(true, body)?;
        match read_frame(&mut self.r).map_err(|e| format!("read from maosd: {e}"))? {
            ServerMsg::Response { id: rid, result } if rid == id => Ok(result),
            ServerMsg::Error { error } => Ok(Err(error)),
            other => Err(format!("unexpected answer: {other:?}")),
        }
    }

    fn call_inner(&mut self, project: bool, body: Request) -> Res<Reply> {
        let id = self.send_request(project, body)?;
        match read_frame(&mut self.r).map_err(|e| format!("read from maosd: {e}"))? {
            ServerMsg::Response { id: rid, result } if rid == id => result.map_err(|e| remote(&e)),
            ServerMsg::Error { error } => Err(remote(&error)),
            other => Err(format!("unexpected answer: {other:?}")),
        }
    }

    /// A project request whose answer is only checked for success (a load tool's hot path):
    /// returns the round-trip time in ns, measured around write + read.
    pub fn timed(&mut self, body: Request) -> Res<u64> {
        let (ns, result) = self.timed_try(body)?;
        result.map(|()| ns).map_err(|e| remote(&e))
    }

    /// Like [`Client::timed`], but a refusal of this request (a lock conflict, a timeout) is an
    /// answer, not a failure: (round trip in ns, success or the daemon's error).
    pub fn timed_try(&mut self, body: Request) -> Res<(u64, Result<(), ErrorBody>)> {
        let t = Instant::now();
        let id = self.send_request(true, body)?;
        let bytes =
            frame::read_frame_bytes(&mut self.r).map_err(|e| format!("read from maosd: {e}"))?;
        let ns = t.elapsed().as_nanos() as u64;
        let ack: Ack = serde_json::from_slice(&bytes).map_err(|e| format!("bad answer: {e}"))?;
        match ack {
            Ack::Response {
                id: rid,
                result: AckResult::Ok(_),
            } if rid == id => Ok((ns, Ok(()))),
            Ack::Response {
                id: rid,
                result: AckResult::Err(e),
            } if rid == id => Ok((ns, Err(e))),
            Ack::Error { error: e } => Err(remote(&e)),
            Ack::Response { id: rid, .. } => {
                Err(format!("answer to request {rid} while waiting for {id}"))
            }
        }
    }
}
