//! The bridge to `maosd`: the client library's blocking connection (the one every `maos`
//! command uses, which starts the daemon when none runs), run on tokio's blocking pool. Idle
//! connections are kept for the next call; a call that finds none opens one, so a lock wait
//! never holds up another tool call. A request can be given up ([`Daemon::ask_or_stop`]):
//! its connection is shut, and maosd drops what it had queued for it.

use std::future::Future;
use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maos_client::client::{Client, ClientError};
use maos_proto::{ErrorBody, ErrorCode, Reply, Request};

/// The bound on one exchange that does not wait for a lock.
const EXCHANGE: Duration = Duration::from_secs(10);

/// Connections kept open between calls.
const KEEP: usize = 4;

#[derive(Clone)]
pub struct Daemon {
    project: Option<Arc<str>>,
    idle: Arc<Mutex<Vec<Client>>>,
}

/// What became of a request that could be given up.
pub enum Asked {
    /// Answered before anything stopped it.
    Answer(Result<Reply, ErrorBody>),
    /// Given up; `Some` when the daemon's answer came all the same (it crossed the shutdown),
    /// so that the caller can undo it.
    Stopped(Option<Reply>),
}

/// Where a request that can be given up stands, shared with the thread that makes it.
#[derive(Default)]
struct Exchange {
    /// The asker gave up: the thread sends nothing more, keeps no connection.
    stopped: bool,
    /// The connection, once the thread has one: the asker shuts it to give up.
    stream: Option<UnixStream>,
}

impl Daemon {
    pub fn new(project: Option<String>) -> Daemon {
        Daemon {
            project: project.map(Arc::from),
            idle: Arc::new(Mutex::new(Vec::new())),
        }
    }

    pub fn project(&self) -> Option<&str> {
        self.project.as_deref()
    }

    /// One request about this server's project; `wait` is how much longer than usual the
    /// answer may take (a lock wait). The error is the daemon's, or why it could not be
    /// reached, in one line.
    pub async fn ask(&self, body: Request, wait: Duration) -> Result<Reply, ErrorBody> {
        match self
            .exchange(body, wait, None, std::future::pending())
            .await
        {
            Asked::Answer(r) => r,
            Asked::Stopped(_) => Err(ErrorBody::new(ErrorCode::Internal, "stopped")),
        }
    }

    /// [`Daemon::ask`], given up when `stop` ends first (the MCP client cancelled the call, or
    /// went away): the connection is shut, so that maosd drops the request and a lock wait
    /// leaves its queue instead of being granted to a caller that is gone.
    pub async fn ask_or_stop(
        &self,
        body: Request,
        wait: Duration,
        stop: impl Future<Output = ()>,
    ) -> Asked {
        let shared = Arc::new(Mutex::new(Exchange::default()));
        self.exchange(body, wait, Some(shared), stop).await
    }

    async fn exchange(
        &self,
        body: Request,
        wait: Duration,
        shared: Option<Arc<Mutex<Exchange>>>,
        stop: impl Future<Output = ()>,
    ) -> Asked {
        let Some(project) = self.project.clone() else {
            return Asked::Answer(Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "this MCP server runs outside every maos project (in your home directory or /); start the CLI in a project, or run `maos init` there",
            )));
        };
        let idle = self.idle.clone();
        let mine = shared.clone();
        let mut task = tokio::task::spawn_blocking(move || {
            let reused = idle.lock().ok().and_then(|mut v| v.pop());
            let mut client = match reused {
                Some(c) => c,
                None => Client::connect(true).map_err(|e| e.body())?,
            };
            if let Some(shared) = &mine {
                let Ok(mut ex) = shared.lock() else {
                    return Err(ErrorBody::new(ErrorCode::Internal, "stopped"));
                };
                if ex.stopped {
                    return Err(ErrorBody::new(ErrorCode::Internal, "stopped"));
                }
                ex.stream = client.stream_handle().ok();
            }
            client.set_timeout(EXCHANGE + wait);
            let reply = client.request(Some(&project), body);
            // A connection that failed, ran out of time or was shut is dropped; a refusal
            // leaves it good.
            let stopped = mine
                .as_ref()
                .is_some_and(|s| s.lock().map_or(true, |ex| ex.stopped));
            if !stopped
                && matches!(reply, Ok(_) | Err(ClientError::Remote(_)))
                && let Ok(mut v) = idle.lock()
                && v.len() < KEEP
            {
                v.push(client);
            }
            reply.map_err(|e| e.body())
        });
        let joined = |r: Result<Result<Reply, ErrorBody>, tokio::task::JoinError>| match r {
            Ok(r) => r,
            Err(e) => Err(ErrorBody::new(
                ErrorCode::Internal,
                format!("the call to maosd did not finish ({e})"),
            )),
        };
        tokio::select! {
            r = &mut task => Asked::Answer(joined(r)),
            () = stop => {
                if let Some(shared) = &shared
                    && let Ok(mut ex) = shared.lock()
                {
                    ex.stopped = true;
                    if let Some(s) = ex.stream.take() {
                        let _ = s.shutdown(std::net::Shutdown::Both);
                    }
                }
                // The thread ends at once now: nothing sent, or its connection shut.
                Asked::Stopped(joined(task.await).ok())
            }
        }
    }
}
