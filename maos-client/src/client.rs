//! The blocking connection to `maosd`: connect (starting the daemon when it is not running),
//! handshake, one request at a time, or a subscription stream. No async runtime: this runs on
//! every hook call, so its start-up cost is the product's latency.

use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use maos_proto::{
    ClientMsg, ErrorBody, ErrorCode, EventFilter, EventRecord, FrameError, PROTOCOL_VERSION, Reply,
    Request, ServerMsg, paths, read_frame, write_frame,
};

/// How long a start-up may take before the client gives up.
const START_DEADLINE: Duration = Duration::from_secs(10);

#[derive(Debug)]
pub enum ClientError {
    /// The daemon answered with an error.
    Remote(ErrorBody),
    /// The daemon could not be reached or started.
    Unavailable(String),
}

impl ClientError {
    pub fn body(&self) -> ErrorBody {
        match self {
            ClientError::Remote(b) => b.clone(),
            ClientError::Unavailable(m) => ErrorBody::new(ErrorCode::Unavailable, m.clone()),
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Closed => ClientError::Unavailable(
                "the daemon closed the connection (it may be shutting down); retry".into(),
            ),
            other => ClientError::Unavailable(format!("talking to maosd failed: {other}")),
        }
    }
}

pub struct Client {
    stream: UnixStream,
    next_id: u64,
    daemon_pid: Option<u32>,
}

fn not_running(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

impl Client {
    /// Connect to the daemon, starting it first when it is not running and `autostart` holds
    /// (unless `MAOS_NO_AUTOSTART=1`).
    pub fn connect(autostart: bool) -> Result<Client, ClientError> {
        Client::connect_within(autostart, START_DEADLINE)
    }

    /// [`Client::connect`], giving a daemon it starts at most `deadline` to answer.
    pub fn connect_within(autostart: bool, deadline: Duration) -> Result<Client, ClientError> {
        let socket = paths::socket_path();
        match UnixStream::connect(&socket) {
            Ok(s) => return Client::hello(s),
            Err(e) if not_running(&e) => {}
            Err(e) => {
                return Err(ClientError::Unavailable(format!(
                    "cannot connect to {}: {e}",
                    socket.display()
                )));
            }
        }
        let disabled = std::env::var("MAOS_NO_AUTOSTART").is_ok_and(|v| !v.is_empty() && v != "0");
        if !autostart || disabled {
            let why = if disabled {
                " (MAOS_NO_AUTOSTART is set)"
            } else {
                ""
            };
            return Err(ClientError::Unavailable(format!(
                "maosd is not running at {}{why}; start it with `maos daemon start`",
                socket.display()
            )));
        }
        start_daemon(&socket, deadline)?;
        let s = UnixStream::connect(&socket).map_err(|e| {
            ClientError::Unavailable(format!("maosd started but {}: {e}", socket.display()))
        })?;
        Client::hello(s)
    }

    /// Send the hello without waiting for the answer: it is read together with the first
    /// response, which saves a round trip on every hook call.
    fn hello(mut stream: UnixStream) -> Result<Client, ClientError> {
        write_frame(
            &mut stream,
            &ClientMsg::Hello {
                protocol: PROTOCOL_VERSION,
                client_version: env!("CARGO_PKG_VERSION").to_string(),
            },
        )?;
        Ok(Client {
            stream,
            next_id: 1,
            daemon_pid: None,
        })
    }

    /// Read the daemon's answer to the hello, once.
    fn welcome(&mut self) -> Result<u32, ClientError> {
        if let Some(pid) = self.daemon_pid {
            return Ok(pid);
        }
        match read_frame(&mut self.stream)? {
            ServerMsg::Welcome { pid, .. } => {
                self.daemon_pid = Some(pid);
                Ok(pid)
            }
            ServerMsg::Error { error } => Err(ClientError::Remote(error)),
            other => Err(ClientError::Unavailable(format!(
                "unexpected handshake answer from maosd: {other:?}"
            ))),
        }
    }

    /// Bound every read and write on the connection (the hook's deadline).
    pub fn set_timeout(&self, d: Duration) {
        let _ = self.stream.set_read_timeout(Some(d));
        let _ = self.stream.set_write_timeout(Some(d));
    }

    /// The daemon's pid (from its hello).
    pub fn daemon_pid(&mut self) -> Result<u32, ClientError> {
        self.welcome()
    }

    /// Write a frame after the hello; a refused hello (e.g. a protocol mismatch) is reported
    /// even when the daemon closed the socket before the write.
    fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        let sent = write_frame(&mut self.stream, msg);
        self.welcome()?;
        Ok(sent?)
    }

    /// Send one request and wait for its response.
    pub fn request(&mut self, project: Option<&str>, body: Request) -> Result<Reply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        self.send(&ClientMsg::Request {
            id,
            project: project.map(str::to_string),
            body,
        })?;
        loop {
            match read_frame(&mut self.stream)? {
                ServerMsg::Response { id: rid, result } if rid == id => {
                    return result.map_err(ClientError::Remote);
                }
                ServerMsg::Error { error } => return Err(ClientError::Remote(error)),
                // Anything else is not ours; skip it.
                _ => {}
            }
        }
    }

    /// Turn the connection into a stream of events (history after `filter.after_seq`, then live).
    pub fn subscribe(
        mut self,
        project: &str,
        filter: EventFilter,
    ) -> Result<impl Iterator<Item = Result<EventRecord, ClientError>>, ClientError> {
        let id = self.next_id;
        self.send(&ClientMsg::Subscribe {
            id,
            project: project.to_string(),
            filter,
        })?;
        match read_frame(&mut self.stream)? {
            ServerMsg::Response { result: Ok(_), .. } => {}
            ServerMsg::Response { result: Err(e), .. } | ServerMsg::Error { error: e } => {
                return Err(ClientError::Remote(e));
            }
            other => {
                return Err(ClientError::Unavailable(format!(
                    "unexpected answer to subscribe: {other:?}"
                )));
            }
        }
        let mut stream = self.stream;
        Ok(std::iter::from_fn(move || {
            loop {
                return match read_frame(&mut stream) {
                    Ok(ServerMsg::Event { event, .. }) => Some(Ok(event)),
                    Ok(ServerMsg::Response { result: Err(e), .. })
                    | Ok(ServerMsg::Error { error: e }) => Some(Err(ClientError::Remote(e))),
                    Ok(_) => continue,
                    Err(FrameError::Closed) => None,
                    Err(e) => Some(Err(e.into())),
                };
            }
        }))
    }
}

/// The `maosd` binary: next to this executable, else on PATH.
pub fn daemon_binary() -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join("maosd")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("maosd"))
}

/// Start the daemon detached and wait until its socket answers. A start-up lock makes
/// concurrent clients start exactly one daemon: the others wait on the lock, then find it up.
fn start_daemon(socket: &Path, limit: Duration) -> Result<(), ClientError> {
    let fail = |m: String| ClientError::Unavailable(m);
    let dir = socket
        .parent()
        .ok_or_else(|| fail(format!("bad socket path {}", socket.display())))?;
    paths::ensure_private_dir(dir).map_err(|e| fail(e.to_string()))?;
    let lock_path = dir.join("maosd.start.lock");
    let lock = paths::private_file(&lock_path)
        .map_err(|e| fail(format!("{}: {e}", lock_path.display())))?;
    lock.lock()
        .map_err(|e| fail(format!("{}: {e}", lock_path.display())))?;
    if UnixStream::connect(socket).is_ok() {
        return Ok(()); // another client started it while we waited for the lock
    }
    let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
    paths::ensure_private_dir(&home).map_err(|e| fail(e.to_string()))?;
    let logs = home.join("logs");
    paths::private_dir_all(&logs).map_err(|e| fail(format!("{}: {e}", logs.display())))?;
    let out_path = logs.join("maosd.stderr");
    let out =
        paths::private_file(&out_path).map_err(|e| fail(format!("{}: {e}", out_path.display())))?;
    let err = out
        .try_clone()
        .map_err(|e| fail(format!("{}: {e}", out_path.display())))?;
    let bin = daemon_binary();
    let mut cmd = Command::new(&bin);
    // Never inherit the caller's stdio: agent CLIs wait for the hook's stdout to close.
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    {
        use std::os::unix::process::CommandExt;
        // SAFETY: setsid is async-signal-safe; it detaches the daemon from our session so that
        // it outlives the terminal or agent that started it.
        unsafe {
            cmd.pre_exec(|| {
                if libc::setsid() == -1 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", bin.display())))?;
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    while Instant::now() < deadline {
        if UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let text = std::fs::read_to_string(&out_path).unwrap_or_default();
            let last = text
                .lines()
                .rev()
                .find(|l| !l.trim().is_empty())
                .unwrap_or("");
            // Lost a start race to a daemon that is now up: fine.
            if UnixStream::connect(socket).is_ok() {
                return Ok(());
            }
            return Err(fail(format!("maosd exited at start ({status}): {last}")));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    Err(fail(format!(
        "maosd did not answer on {} within {}s; see {}",
        socket.display(),
        limit.as_secs_f64(),
        logs.join("maosd.log").display()
    )))
}
