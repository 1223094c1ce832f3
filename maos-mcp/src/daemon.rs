//! The bridge to `maosd`: the client library's blocking connection (the one every `maos`
//! command uses, which starts the daemon when none runs), run on tokio's blocking pool. Idle
//! connections are kept for the next call; a call that finds none opens one, so a lock wait
//! never holds up another tool call.

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
        let Some(project) = self.project.clone() else {
            return Err(ErrorBody::new(
                ErrorCode::BadRequest,
                "this MCP server runs outside every maos project (in your home directory or /); start the CLI in a project, or run `maos init` there",
            ));
        };
        let idle = self.idle.clone();
        let task = tokio::task::spawn_blocking(move || {
            let reused = idle.lock().ok().and_then(|mut v| v.pop());
            let mut client = match reused {
                Some(c) => c,
                None => Client::connect(true).map_err(|e| e.body())?,
            };
            client.set_timeout(EXCHANGE + wait);
            let reply = client.request(Some(&project), body);
            // A connection that failed or ran out of time is dropped; a refusal leaves it good.
            if matches!(reply, Ok(_) | Err(ClientError::Remote(_)))
                && let Ok(mut v) = idle.lock()
                && v.len() < KEEP
            {
                v.push(client);
            }
            reply.map_err(|e| e.body())
        });
        match task.await {
            Ok(r) => r,
            Err(e) => Err(ErrorBody::new(
                ErrorCode::Internal,
                format!("the call to maosd did not finish ({e})"),
            )),
        }
    }
}
