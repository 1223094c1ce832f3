//! The bridge to `maosd`: the client library's blocking connection (the one every `maos`
//! command uses, which starts the daemon when none runs), run on tokio's blocking pool. Idle
//! connections are kept for the next call; a call that finds none opens one, so a lock wait
//! never holds up another tool call. A request can be given up ([`Daemon::ask_or_stop`]):
//! nothing is sent once it is, and a lock wait's connection is shut, so that maosd drops what
//! it had queued for it.
//!
//! Two lanes, each bounded, so that a call that does not wait is always answered: at most
//! [`MAX_WAITS`] lock waits at once (a wait past that is refused by the caller, see
//! [`Daemon::wait_slot`]), and at most [`MAX_QUICK`] other exchanges at once (more queue for
//! their turn). Both together stay far below tokio's blocking pool (512 threads), which
//! also reads stdin: once every thread of it waited for a lock, no other call was answered
//! and the end of stdin was not seen.

use std::os::unix::net::UnixStream;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use maos_client::client::{Client, ClientError};
use maos_proto::{ErrorBody, ErrorCode, Reply, Request};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

/// The bound on one exchange that does not wait for a lock.
const EXCHANGE: Duration = Duration::from_secs(10);

/// Connections kept open between calls.
const KEEP: usize = 4;

/// Lock waits at once, per server (one agent CLI and its subagents).
pub const MAX_WAITS: usize = 64;

/// Other daemon exchanges at once, per server; more wait for their turn.
pub const MAX_QUICK: usize = 32;

#[derive(Clone)]
pub struct Daemon {
    project: Option<Arc<str>>,
    idle: Arc<Mutex<Vec<Client>>>,
    waits: Arc<Semaphore>,
    quick: Arc<Semaphore>,
}

/// Which lane an exchange goes in.
pub enum Lane {
    /// A lock wait, with its slot ([`Daemon::wait_slot`]): given up, its connection is shut.
    Wait(OwnedSemaphorePermit),
    /// Anything answered at once: given up, it is not sent, or its answer is awaited.
    Quick,
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
            waits: Arc::new(Semaphore::new(MAX_WAITS)),
            quick: Arc::new(Semaphore::new(MAX_QUICK)),
        }
    }

    /// A slot for one more lock wait, or `None` when [`MAX_WAITS`] wait already.
    pub fn wait_slot(&self) -> Option<OwnedSemaphorePermit> {
        self.waits.clone().try_acquire_owned().ok()
    }

    pub fn project(&self) -> Option<&str> {
        self.project.as_deref()
    }

    /// One request about this server's project; `wait` is how much longer than usual the
    /// answer may take (a lock wait). The error is the daemon's, or why it could not be
    /// reached, in one line.
    pub async fn ask(&self, body: Request, wait: Duration) -> Result<Reply, ErrorBody> {
        match self
            .exchange(body, wait, Lane::Quick, None, Vec::new())
            .await
        {
            Asked::Answer(r) => r,
            Asked::Stopped(_) => Err(ErrorBody::new(ErrorCode::Internal, "stopped")),
        }
    }

    /// [`Daemon::ask`], given up when one of `stops` is cancelled (the MCP client cancelled
    /// the call, or went away): a request not yet sent is never sent; a lock wait's connection
    /// is shut (for writing: maosd drops the request and the wait leaves its queue, and an
    /// answer already on its way is still read, so that the caller can give a grant back).
    pub async fn ask_or_stop(
        &self,
        body: Request,
        wait: Duration,
        lane: Lane,
        stops: Vec<CancellationToken>,
    ) -> Asked {
        if stops.iter().any(CancellationToken::is_cancelled) {
            return Asked::Stopped(None);
        }
        let shared = Arc::new(Mutex::new(Exchange::default()));
        self.exchange(body, wait, lane, Some(shared), stops).await
    }

    async fn exchange(
        &self,
        body: Request,
        wait: Duration,
        lane: Lane,
        shared: Option<Arc<Mutex<Exchange>>>,
        stops: Vec<CancellationToken>,
    ) -> Asked {
        let Some(project) = self.project.clone() else {
            return Asked::Answer(Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "this MCP server runs outside every maos project (in your home directory or /); start the CLI in a project, or run `maos init` there",
            )));
        };
        let shut = matches!(lane, Lane::Wait(_));
        // The lane's slot, held by the thread until its exchange is over (also when the call
        // has been given up meanwhile).
        let slot = match lane {
            Lane::Wait(p) => p,
            Lane::Quick => {
                let turn = async { self.quick.clone().acquire_owned().await };
                let stop = stopped(&stops);
                tokio::select! {
                    p = turn => match p {
                        Ok(p) => p,
                        Err(_) => return Asked::Answer(Err(ErrorBody::new(ErrorCode::Internal, "stopped"))),
                    },
                    () = stop => return Asked::Stopped(None),
                }
            }
        };
        let idle = self.idle.clone();
        let mine = shared.clone();
        let told = stops.clone();
        let mut task = tokio::task::spawn_blocking(move || {
            let _slot = slot;
            let reused = idle.lock().ok().and_then(|mut v| v.pop());
            let mut client = match reused {
                Some(c) => c,
                None => Client::connect(true).map_err(|e| e.body())?,
            };
            if let Some(shared) = &mine {
                let Ok(mut ex) = shared.lock() else {
                    return Err(ErrorBody::new(ErrorCode::Internal, "stopped"));
                };
                // Given up before it was sent: it never is.
                if ex.stopped || told.iter().any(CancellationToken::is_cancelled) {
                    ex.stopped = true;
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
        let stop = stopped(&stops);
        tokio::select! {
            r = &mut task => Asked::Answer(joined(r)),
            () = stop => {
                if let Some(shared) = &shared
                    && let Ok(mut ex) = shared.lock()
                {
                    ex.stopped = true;
                    // A wait is given up by maosd when its connection ends; what maosd had
                    // already answered is still read.
                    if shut && let Some(s) = ex.stream.take() {
                        let _ = s.shutdown(std::net::Shutdown::Write);
                    }
                }
                // The thread ends soon now: nothing sent, its wait dropped, or its answer read.
                Asked::Stopped(joined(task.await).ok())
            }
        }
    }
}

/// Until one of `stops` is cancelled (never, without any).
async fn stopped(stops: &[CancellationToken]) {
    match stops {
        [] => std::future::pending().await,
        [one] => one.cancelled().await,
        [one, rest @ ..] => {
            tokio::select! {
                () = one.cancelled() => {}
                () = Box::pin(stopped(rest)) => {}
            }
        }
    }
}
