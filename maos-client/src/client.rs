//! The blocking connection to `maosd`: connect (starting the daemon when it is not running),
//! handshake, one request at a time, or a subscription stream. No async runtime: this runs on
//! every hook call, so its start-up cost is the product's latency.

use maos_proto::req;
use std::io;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use maos_proto::{
    ClientKind, ClientMsg, ErrorBody, ErrorCode, EventFilter, EventRecord, FrameError,
    PROTOCOL_VERSION, Reply, Request, ServerMsg, StartedBy, paths, read_frame, write_frame,
};

/// How long a start-up may take before the client gives up.
const START_DEADLINE: Duration = Duration::from_secs(10);

/// What this process says it is in every hello ([`set_kind`]), as the kind's discriminant
/// (its place in `ClientKind::ALL`); `other` until it says.
static KIND: std::sync::atomic::AtomicU8 =
    std::sync::atomic::AtomicU8::new(ClientKind::Other as u8);

/// Say what kind of client this process is (`maos hook`, a CLI command, `maos top`, ...): the
/// daemon keeps slots for hooks and commands that long-lived connections cannot take.
pub fn set_kind(kind: ClientKind) {
    KIND.store(kind as u8, std::sync::atomic::Ordering::Relaxed);
}

fn kind() -> ClientKind {
    let i = KIND.load(std::sync::atomic::Ordering::Relaxed) as usize;
    ClientKind::ALL.get(i).copied().unwrap_or_default()
}

#[derive(Debug)]
pub enum ClientError {
    /// The daemon answered with an error.
    Remote(ErrorBody),
    /// The daemon could not be reached or started.
    Unavailable(String),
    /// The daemon speaks another protocol, and this client may not (or could not) replace it.
    Mismatch(Box<Mismatch>),
}

impl ClientError {
    pub fn body(&self) -> ErrorBody {
        match self {
            ClientError::Remote(b) => b.clone(),
            ClientError::Unavailable(m) => ErrorBody::new(ErrorCode::Unavailable, m.clone()),
            ClientError::Mismatch(m) => ErrorBody::new(ErrorCode::ProtocolMismatch, m.to_string()),
        }
    }
}

/// What a daemon that speaks another protocol said of itself in its welcome.
#[derive(Debug, Clone)]
pub struct Mismatch {
    pub protocol: u32,
    pub version: String,
    pub pid: u32,
    pub started_by: StartedBy,
}

impl Mismatch {
    /// An older daemon that a client started: the next client replaces it.
    pub fn replaceable(&self) -> bool {
        self.protocol < PROTOCOL_VERSION && self.started_by == StartedBy::Client
    }
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (pid, theirs, mine) = (self.pid, self.protocol, PROTOCOL_VERSION);
        let client = env!("CARGO_PKG_VERSION");
        let daemon = &self.version;
        if theirs > mine {
            return write!(
                f,
                "this maos {client} speaks protocol {mine}, older than the running maosd {daemon} \
                 (protocol {theirs}, pid {pid}): run the maos installed with that maosd"
            );
        }
        let what = format!(
            "the running maosd {daemon} (pid {pid}) speaks protocol {theirs}, older than this \
             maos {client} (protocol {mine})"
        );
        match self.started_by {
            StartedBy::Systemd => write!(
                f,
                "{what}; systemd manages it: run `systemctl --user restart maosd.service`"
            ),
            StartedBy::Launchd => write!(
                f,
                "{what}; launchd manages it: run `launchctl kickstart -k gui/{}/dev.maos.maosd`",
                paths::uid()
            ),
            StartedBy::Manual => write!(
                f,
                "{what}; it was started by hand: stop it (`kill {pid}`) and start the new maosd"
            ),
            StartedBy::Client => write!(
                f,
                "{what}; the next maos command that may start the daemon replaces it, or run \
                 `maos daemon stop`"
            ),
        }
    }
}

impl From<FrameError> for ClientError {
    fn from(e: FrameError) -> Self {
        match e {
            FrameError::Closed => ClientError::Unavailable(
                "the daemon closed the connection (it may be shutting down); retry".into(),
            ),
            e if is_timeout(&e) => ClientError::Unavailable(
                "maosd accepted the connection but did not answer in time".into(),
            ),
            other => ClientError::Unavailable(format!("talking to maosd failed: {other}")),
        }
    }
}

pub struct Client {
    stream: UnixStream,
    next_id: u64,
    daemon_pid: Option<u32>,
    started_by: StartedBy,
    /// May start the daemon, and so replace an outdated one; how long a start may take.
    autostart: Option<Duration>,
    /// The bound on each read and write ([`Client::set_timeout`]), kept across a reconnect.
    timeout: Option<Duration>,
    /// The end of the whole call (a hook's `MAOS_HOOK_TIMEOUT_MS`), kept across a reconnect.
    deadline: Option<Limit>,
    /// The bound of the exchange under way: every read and write gets only the time left.
    limit: Option<Limit>,
    /// A read or write ran out of that time: the daemon is stalled, not stopping, and a
    /// reconnect would only wait as long again.
    timed_out: bool,
}

/// A read or write that ran out of the socket's timeout.
fn is_timeout(e: &FrameError) -> bool {
    matches!(e, FrameError::Io(io) if matches!(io.kind(), io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut))
}

fn not_running(e: &io::Error) -> bool {
    matches!(
        e.kind(),
        io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
    )
}

/// How long a command waits for the daemon's answer (`MAOS_COMMAND_TIMEOUT_MS`; 30 s): a
/// daemon that accepts and never answers must not hang `maos ps`. A lock wait asked for is
/// added to it; work that grows with the database is bounded only until the daemon's hello.
const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);

fn command_timeout() -> Duration {
    std::env::var("MAOS_COMMAND_TIMEOUT_MS")
        .ok()
        .and_then(|v| v.trim().parse::<u64>().ok())
        .filter(|ms| *ms > 0)
        .map_or(COMMAND_TIMEOUT, Duration::from_millis)
}

/// A bound on talking to the daemon: when it ends, how long it was, and the setting that
/// says so (named in the message when it passes).
#[derive(Clone, Copy, Debug)]
pub struct Limit {
    until: Instant,
    budget: Duration,
    setting: &'static str,
}

impl Limit {
    /// `budget` from `start`, set by `setting` (e.g. `MAOS_HOOK_TIMEOUT_MS`).
    pub fn new(start: Instant, budget: Duration, setting: &'static str) -> Limit {
        Limit {
            until: start + budget,
            budget,
            setting,
        }
    }

    fn command(budget: Duration) -> Limit {
        Limit::new(Instant::now(), budget, "MAOS_COMMAND_TIMEOUT_MS")
    }

    /// The time left (zero once it passed).
    pub fn left(&self) -> Duration {
        self.until.saturating_duration_since(Instant::now())
    }

    fn passed(&self) -> ClientError {
        let b = self.budget;
        let took = if b.subsec_millis() == 0 {
            format!("{}s", b.as_secs())
        } else {
            format!("{} ms", b.as_millis())
        };
        ClientError::Unavailable(format!(
            "maosd did not answer within {took} ({}); see `maos daemon status`",
            self.setting
        ))
    }
}

/// What a command waits for after the daemon's hello, beyond [`command_timeout`]: a lock wait
/// asked for is added; `None` where the work may take as long as it takes (a wait until
/// granted, an MCP call that bounds itself, work that grows with the database).
fn patience(body: &Request, base: Duration) -> Option<Duration> {
    use maos_proto::LockWait;
    match body {
        Request::LockAcquire(req::LockAcquire {
            lock:
                req::Acquire {
                    wait: LockWait::Wait { ms },
                    ..
                },
            ..
        }) => Some(base + Duration::from_millis(*ms)),
        Request::LockAcquire(req::LockAcquire {
            lock:
                req::Acquire {
                    wait: LockWait::Forever,
                    ..
                },
            ..
        })
        | Request::Mcp(_)
        | Request::Backup(_)
        | Request::Restore(_)
        | Request::Export(_)
        | Request::Import(_)
        | Request::Gc(_)
        | Request::Purge(_)
        | Request::Repair(_)
        | Request::DbCheck
        | Request::DaemonStop => None,
        _ => Some(base),
    }
}

/// The connection's reads and writes, each given only the time left of the exchange's limit
/// (and at most the per-operation timeout): a daemon that trickles a byte at a time cannot
/// stretch the call.
struct Timed<'a> {
    stream: &'a UnixStream,
    limit: Option<Limit>,
    each: Option<Duration>,
}

impl Timed<'_> {
    fn arm(&self, read: bool) -> io::Result<()> {
        let left = match self.limit {
            Some(l) => {
                let left = l.left();
                if left.is_zero() {
                    return Err(io::ErrorKind::TimedOut.into());
                }
                Some(self.each.map_or(left, |e| e.min(left)))
            }
            None => self.each,
        };
        if read {
            self.stream.set_read_timeout(left)
        } else {
            self.stream.set_write_timeout(left)
        }
    }
}

impl io::Read for Timed<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.arm(true)?;
        let mut s = self.stream;
        s.read(buf)
    }
}

impl io::Write for Timed<'_> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.arm(false)?;
        let mut s = self.stream;
        s.write(buf)
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

/// Connect to the socket, giving up at `until`: on Linux a connect to a listener whose
/// backlog is full (a daemon that stopped accepting) waits, bounded by the send timeout.
#[cfg(target_os = "linux")]
fn connect_to(path: &Path, until: Instant) -> io::Result<UnixStream> {
    use std::os::fd::FromRawFd;
    use std::os::unix::ffi::OsStrExt;
    let bytes = path.as_os_str().as_bytes();
    // SAFETY: sockaddr_un is plain data; all zeroes is a valid value.
    let mut addr: libc::sockaddr_un = unsafe { std::mem::zeroed() };
    if bytes.len() >= addr.sun_path.len() || bytes.contains(&0) {
        return UnixStream::connect(path); // its own error for such a path
    }
    addr.sun_family = libc::AF_UNIX as libc::sa_family_t;
    for (d, s) in addr.sun_path.iter_mut().zip(bytes) {
        *d = *s as libc::c_char;
    }
    let left = until.saturating_duration_since(Instant::now());
    if left.is_zero() {
        return Err(io::ErrorKind::TimedOut.into());
    }
    // SAFETY: plain socket(2); the descriptor is owned by the stream at once.
    let fd = unsafe { libc::socket(libc::AF_UNIX, libc::SOCK_STREAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a new socket nothing else owns.
    let stream = unsafe { UnixStream::from_raw_fd(fd) };
    stream.set_write_timeout(Some(left))?;
    let len = (std::mem::size_of::<libc::sa_family_t>() + bytes.len() + 1) as libc::socklen_t;
    loop {
        // SAFETY: `addr` is a valid sockaddr_un of `len` bytes.
        let r = unsafe { libc::connect(fd, (&raw const addr).cast::<libc::sockaddr>(), len) };
        if r == 0 {
            stream.set_write_timeout(None)?;
            return Ok(stream);
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EISCONN) => {
                stream.set_write_timeout(None)?;
                return Ok(stream);
            }
            Some(libc::EAGAIN | libc::EINPROGRESS) => {
                return Err(io::Error::new(
                    io::ErrorKind::TimedOut,
                    "maosd accepts no connection (its queue is full)",
                ));
            }
            _ => return Err(e),
        }
    }
}

#[cfg(not(target_os = "linux"))]
fn connect_to(path: &Path, _until: Instant) -> io::Result<UnixStream> {
    UnixStream::connect(path)
}

impl Client {
    /// Connect to the daemon, starting it first when it is not running and `autostart` holds
    /// (unless `MAOS_NO_AUTOSTART=1`).
    pub fn connect(autostart: bool) -> Result<Client, ClientError> {
        Client::connect_within(autostart, START_DEADLINE)
    }

    /// [`Client::connect`], giving a daemon it starts at most `deadline` to answer.
    pub fn connect_within(autostart: bool, deadline: Duration) -> Result<Client, ClientError> {
        Client::connect_limited(autostart, deadline, None)
    }

    /// [`Client::connect`] for a call that must end by `limit`, whatever happens (a hook):
    /// connecting, starting the daemon, the hello, every write and read get only the time
    /// left, and past it the call fails as unavailable, naming the limit's setting.
    pub fn connect_by(autostart: bool, limit: Limit) -> Result<Client, ClientError> {
        Client::connect_limited(
            autostart,
            limit.left().max(Duration::from_millis(1)),
            Some(limit),
        )
    }

    fn connect_limited(
        autostart: bool,
        deadline: Duration,
        whole: Option<Limit>,
    ) -> Result<Client, ClientError> {
        let mut c = Client::open(autostart, deadline, whole)?;
        c.autostart = autostart.then_some(deadline);
        c.deadline = whole;
        Ok(c)
    }

    fn open(
        autostart: bool,
        deadline: Duration,
        whole: Option<Limit>,
    ) -> Result<Client, ClientError> {
        let socket = paths::socket_path();
        // A daemon that stopped accepting must not hold a connect for ever either.
        let reach = whole.unwrap_or_else(|| Limit::command(command_timeout()));
        let start_by = whole.map_or(Instant::now() + deadline, |w| w.until);
        match connect_to(&socket, reach.until) {
            Ok(s) => match Client::hello(s) {
                Ok(c) => return Ok(c),
                Err(e) if !autostart => return Err(e),
                // Accepted into the backlog of a daemon that stopped listening (it is shutting
                // down): start the next one, as when none runs.
                Err(_) => {}
            },
            Err(e) if not_running(&e) => {}
            Err(e) if e.kind() == io::ErrorKind::TimedOut => return Err(reach.passed()),
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
        if let Some(service) = maos_proto::service::installed_for(&socket) {
            return Err(ClientError::Unavailable(service_down(&service)));
        }
        start_daemon(&socket, deadline, start_by)?;
        let s = connect_to(&socket, start_by).map_err(|e| {
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
                client: kind(),
            },
        )?;
        Ok(Client {
            stream,
            next_id: 1,
            daemon_pid: None,
            started_by: StartedBy::default(),
            autostart: None,
            timeout: None,
            timed_out: false,
            deadline: None,
            limit: None,
        })
    }

    /// The connection, each read and write bounded by what is left of the exchange's limit.
    fn timed(&self) -> Timed<'_> {
        Timed {
            stream: &self.stream,
            limit: self.limit,
            each: self.timeout,
        }
    }

    /// A failed read or write, noting a timeout (and saying which limit passed).
    fn failed(&mut self, e: FrameError) -> ClientError {
        if is_timeout(&e) {
            self.timed_out = true;
            if let Some(l) = self.limit {
                return l.passed();
            }
        }
        e.into()
    }

    /// Read one frame, noting a timeout.
    fn read(&mut self) -> Result<ServerMsg, ClientError> {
        let read = read_frame(&mut self.timed());
        read.map_err(|e| self.failed(e))
    }

    /// Connect again (after the daemon went away or was replaced), with the same timeout and
    /// the same end of the whole call.
    fn reconnect(&mut self, deadline: Duration) -> Result<(), ClientError> {
        let (timeout, whole) = (self.timeout, self.deadline);
        if whole.is_some_and(|w| w.left().is_zero()) {
            return Err(whole.map_or_else(|| fail(String::new()), |w| w.passed()));
        }
        *self = Client::connect_limited(true, deadline, whole)?;
        if let Some(t) = timeout {
            self.set_timeout(t);
        }
        Ok(())
    }

    /// Read the daemon's answer to the hello, once.
    fn welcome(&mut self) -> Result<u32, ClientError> {
        if let Some(pid) = self.daemon_pid {
            return Ok(pid);
        }
        match self.read()? {
            ServerMsg::Welcome {
                protocol,
                daemon_version,
                pid,
                started_by,
            } if protocol != PROTOCOL_VERSION => Err(ClientError::Mismatch(Box::new(Mismatch {
                protocol,
                version: daemon_version,
                pid,
                started_by,
            }))),
            ServerMsg::Welcome {
                pid, started_by, ..
            } => {
                self.daemon_pid = Some(pid);
                self.started_by = started_by;
                Ok(pid)
            }
            ServerMsg::Error { error } => Err(ClientError::Remote(error)),
            other => Err(ClientError::Unavailable(format!(
                "unexpected handshake answer from maosd: {other:?}"
            ))),
        }
    }

    /// A second handle on the connection, so that another thread can shut it down while this
    /// one waits for an answer (`maos mcp` gives up a cancelled lock wait so).
    pub fn stream_handle(&self) -> io::Result<UnixStream> {
        self.stream.try_clone()
    }

    /// Bound every read and write on the connection (the hook's deadline).
    pub fn set_timeout(&mut self, d: Duration) {
        self.timeout = Some(d);
        let _ = self.stream.set_read_timeout(Some(d));
        let _ = self.stream.set_write_timeout(Some(d));
    }

    /// The daemon's pid (from its hello).
    pub fn daemon_pid(&mut self) -> Result<u32, ClientError> {
        self.welcome()
    }

    /// Who started the daemon (from its hello).
    pub fn started_by(&mut self) -> Result<StartedBy, ClientError> {
        self.welcome()?;
        Ok(self.started_by)
    }

    /// Write a frame after the hello; a refused hello (e.g. a protocol mismatch) is reported
    /// even when the daemon closed the socket before the write.
    fn send(&mut self, msg: &ClientMsg) -> Result<(), ClientError> {
        let sent = write_frame(&mut self.timed(), msg);
        self.welcome()?;
        sent.map_err(|e| self.failed(e))
    }

    /// An outdated daemon answered the hello: when this client may, replace it with the
    /// matching one and reconnect (the request was not served: a daemon that refuses the hello
    /// reads nothing else).
    fn replace(&mut self, m: Box<Mismatch>) -> Result<(), ClientError> {
        match self.autostart {
            Some(deadline) if m.replaceable() => {
                replace_outdated(&paths::socket_path(), deadline, self.deadline)?;
                self.reconnect(deadline)
            }
            _ => Err(ClientError::Mismatch(m)),
        }
    }

    /// Whether a failed connection may be opened again: it failed before the daemon answered
    /// the hello, so that daemon was stopping (it serves nothing before its welcome: the
    /// request was not served), and this client may start the next daemon if needed. A daemon
    /// that did not answer in time is not stopping: it is not asked again.
    fn may_reopen(&self) -> bool {
        self.autostart.is_some() && self.daemon_pid.is_none() && !self.timed_out
    }

    /// Run `attempt` (a send, or a send and its response) until it gets past the hello. An
    /// outdated daemon is replaced, once. A connection that fails before the welcome is opened
    /// again, after a short pause, until the start deadline: a daemon that is stopping may
    /// still accept a few connections and drop them unanswered, so one retry can land in it
    /// again.
    fn retrying<T>(
        &mut self,
        mut attempt: impl FnMut(&mut Client) -> Result<T, ClientError>,
    ) -> Result<T, ClientError> {
        let mut give_up = Instant::now() + self.autostart.unwrap_or_default();
        if let Some(w) = self.deadline {
            give_up = give_up.min(w.until);
        }
        let mut replaced = false;
        let mut pause = Duration::from_millis(1);
        loop {
            match attempt(self) {
                Err(e @ ClientError::Mismatch(_)) if replaced => return Err(still_outdated(e)),
                Err(ClientError::Mismatch(m)) => {
                    self.replace(m)?;
                    replaced = true;
                }
                Err(e @ ClientError::Unavailable(_)) => {
                    if !self.may_reopen() || Instant::now() >= give_up {
                        return Err(e);
                    }
                    std::thread::sleep(pause);
                    pause = (pause * 2).min(Duration::from_millis(20));
                    self.reconnect(self.autostart.unwrap_or_default())?;
                }
                r => return r,
            }
        }
    }

    /// Send one request and wait for its response.
    pub fn request(&mut self, project: Option<&str>, body: Request) -> Result<Reply, ClientError> {
        let base = command_timeout();
        let patience = patience(&body, base);
        let mut msg = ClientMsg::Request {
            id: 0,
            project: project.map(str::to_string),
            body,
        };
        self.retrying(|c| c.exchange(&mut msg, base, patience))
    }

    /// The bound of a command's exchange until the daemon's hello, then of its answer: the
    /// whole call's when it has one; none when the caller bounds each read itself.
    fn bound(&self, wait: Option<Duration>) -> Option<Limit> {
        match (self.deadline, self.timeout) {
            (Some(whole), _) => Some(whole),
            (None, Some(_)) => None,
            (None, None) => wait.map(Limit::command),
        }
    }

    /// Send a request (numbered on this connection) and read its response: the daemon has
    /// `base` to say hello, then `patience` to answer.
    fn exchange(
        &mut self,
        msg: &mut ClientMsg,
        base: Duration,
        patience: Option<Duration>,
    ) -> Result<Reply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        if let ClientMsg::Request { id: slot, .. } = msg {
            *slot = id;
        }
        self.limit = self.bound(Some(base));
        self.send(msg)?;
        self.limit = self.bound(patience);
        let answer = self.response(id);
        self.limit = None;
        answer
    }

    fn response(&mut self, id: u64) -> Result<Reply, ClientError> {
        loop {
            match self.read()? {
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
    pub fn subscribe(mut self, project: &str, filter: EventFilter) -> Result<Events, ClientError> {
        let id = self.next_id;
        let msg = ClientMsg::Subscribe {
            id,
            project: project.to_string(),
            filter,
        };
        self.limit = self.bound(Some(command_timeout()));
        self.retrying(|c| c.send(&msg))?;
        let answer = self.read();
        // The events come when they come.
        self.limit = None;
        let _ = self.stream.set_read_timeout(None);
        match answer? {
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
        Ok(Events {
            stream: self.stream,
            ended: false,
        })
    }
}

/// A subscription's events, until the connection closes or (a filter with
/// `until_session_ends`) the daemon says the followed session has ended.
pub struct Events {
    stream: UnixStream,
    ended: bool,
}

impl Events {
    /// The stream ended because the followed session ended (not because the daemon went away).
    pub fn ended(&self) -> bool {
        self.ended
    }
}

impl Iterator for Events {
    type Item = Result<EventRecord, ClientError>;

    fn next(&mut self) -> Option<Self::Item> {
        if self.ended {
            return None;
        }
        loop {
            return match read_frame(&mut self.stream) {
                Ok(ServerMsg::Event { event, .. }) => Some(Ok(event)),
                Ok(ServerMsg::Response { result: Err(e), .. })
                | Ok(ServerMsg::Error { error: e }) => Some(Err(ClientError::Remote(e))),
                Ok(ServerMsg::Response {
                    result: Ok(Reply::Done),
                    ..
                }) => {
                    self.ended = true;
                    None
                }
                Ok(_) => continue,
                Err(FrameError::Closed) => None,
                Err(e) => Some(Err(e.into())),
            };
        }
    }
}

/// Who runs this command, for the record of a pause, a resume or a forced release: `$USER`,
/// else `$LOGNAME`, else the user id (a container or a service often sets neither variable,
/// and "by": null would not say who did it).
pub fn whoami() -> Option<String> {
    ["USER", "LOGNAME"]
        .into_iter()
        .find_map(|v| std::env::var(v).ok().filter(|u| !u.is_empty()))
        .or_else(|| Some(format!("uid {}", maos_proto::paths::uid())))
}

/// What [`follow`] reports.
#[derive(Debug)]
pub enum Followed {
    /// The project's next event.
    Event(Box<EventRecord>),
    /// The stream broke (the daemon went away): why.
    Lost(String),
    /// It is back, from the daemon with this pid.
    Back(u32),
}

/// Follow a project's events from after `after` (None: its whole timeline), through the
/// daemon's subscription, telling `tell` each one, and when the daemon goes away, once, that
/// it is lost; then connect again (never starting a daemon: whoever stopped it meant it),
/// say it is back, and go on after the last event told: none twice, none skipped. Returns
/// when `tell` returns false (whoever listened is gone).
pub fn follow(project: &str, after: Option<u64>, tell: impl FnMut(Followed) -> bool) {
    follow_until(project, after, &Unfollow::default(), tell);
}

/// Ends a [`follow_until`] from another thread at once: its connection to the daemon is shut
/// and it connects no more. Whoever listened may be gone long before the project's next event
/// would tell it so (a dashboard's page closed on a quiet project), and until then the
/// follow held a thread and one of the daemon's connections.
#[derive(Clone, Default)]
pub struct Unfollow(std::sync::Arc<(std::sync::Mutex<Unfollowed>, std::sync::Condvar)>);

#[derive(Default)]
struct Unfollowed {
    stopped: bool,
    /// The follow's connection, while it has one.
    stream: Option<UnixStream>,
}

impl Unfollow {
    /// Stop the follow: it returns at once, without telling anything more.
    pub fn stop(&self) {
        let (state, wake) = &*self.0;
        let mut s = state.lock().unwrap_or_else(|e| e.into_inner());
        s.stopped = true;
        if let Some(stream) = s.stream.take() {
            let _ = stream.shutdown(std::net::Shutdown::Both);
        }
        wake.notify_all();
    }

    fn stopped(&self) -> bool {
        self.0.0.lock().unwrap_or_else(|e| e.into_inner()).stopped
    }

    /// Keep a handle on the follow's new connection (to shut it); false when stopped.
    fn watch(&self, c: &Client) -> bool {
        let mut s = self.0.0.lock().unwrap_or_else(|e| e.into_inner());
        if s.stopped {
            return false;
        }
        s.stream = c.stream_handle().ok();
        true
    }

    /// Let go of the handle on a connection that has ended; false when stopped.
    fn unwatch(&self) -> bool {
        let mut s = self.0.0.lock().unwrap_or_else(|e| e.into_inner());
        s.stream = None;
        !s.stopped
    }

    /// Sleep `d` before connecting again, unless stopped meanwhile; false when stopped.
    fn pause(&self, d: Duration) -> bool {
        let (state, wake) = &*self.0;
        let s = state.lock().unwrap_or_else(|e| e.into_inner());
        let (s, _) = wake
            .wait_timeout_while(s, d, |s| !s.stopped)
            .unwrap_or_else(|e| e.into_inner());
        !s.stopped
    }
}

/// [`follow`] that also ends when `until` is stopped, at once (see [`Unfollow`]).
pub fn follow_until(
    project: &str,
    after: Option<u64>,
    until: &Unfollow,
    mut tell: impl FnMut(Followed) -> bool,
) {
    let mut filter = EventFilter {
        after_seq: after,
        ..EventFilter::default()
    };
    let mut lost = false;
    let mut pause = Duration::from_millis(20);
    loop {
        let connected = Client::connect(false).and_then(|mut c| {
            if !until.watch(&c) {
                return Ok(None);
            }
            Ok(Some((c.daemon_pid()?, c)))
        });
        if until.stopped() {
            return;
        }
        let why = match connected {
            Ok(None) => return,
            Ok(Some((pid, c))) => {
                if lost && !tell(Followed::Back(pid)) {
                    return;
                }
                lost = false;
                pause = Duration::from_millis(20);
                match c.subscribe(project, filter.clone()) {
                    Ok(stream) => {
                        let mut why = "the daemon closed the connection".to_string();
                        for e in stream {
                            match e {
                                Ok(event) => {
                                    filter.after_seq = Some(event.seq);
                                    if !tell(Followed::Event(Box::new(event))) {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    why = e.body().message;
                                    break;
                                }
                            }
                        }
                        why
                    }
                    Err(e) => e.body().message,
                }
            }
            Err(e) => e.body().message,
        };
        // Shut by `stop`: nothing was lost, the listener left.
        if !until.unwatch() {
            return;
        }
        if !lost {
            lost = true;
            if !tell(Followed::Lost(why)) {
                return;
            }
        }
        if !until.pause(pause) {
            return;
        }
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// The last line a process that died at start wrote to its log (what it died of), if any.
pub fn last_line(log: &Path) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    text.lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .unwrap_or("")
        .to_string()
}

/// Start `cmd` in a session of its own, so that it outlives the terminal or agent that
/// started it (the daemon, the dashboard).
pub fn detach(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    // SAFETY: setsid is async-signal-safe, the only call made between fork and exec.
    unsafe {
        cmd.pre_exec(|| {
            if libc::setsid() == -1 {
                return Err(io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

/// The `maosd` binary: next to this executable, else on PATH.
pub fn daemon_binary() -> PathBuf {
    sibling_binary("maosd")
}

/// A binary of maos's: next to this executable, else on PATH.
pub fn sibling_binary(name: &str) -> PathBuf {
    std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(|d| d.join(name)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(name))
}

/// A service manager owns the socket, but nothing listens on it: the client must not start a
/// daemon of its own there. Says what to run instead.
pub fn service_down(service: &maos_proto::service::Installed) -> String {
    use maos_proto::service::{LAUNCHD_LABEL, Manager};
    let how = match service.manager {
        Manager::Systemd => "run `systemctl --user enable --now maosd.socket` (its log: \
                             `journalctl --user -u maosd.service`)"
            .to_string(),
        Manager::Launchd => format!(
            "run `launchctl bootstrap gui/{} {}` (or `launchctl kickstart gui/{}/{LAUNCHD_LABEL}`)",
            paths::uid(),
            service.file.display(),
            paths::uid()
        ),
    };
    format!(
        "maosd runs as a {} service ({}) but nothing listens on {}; the client does not start \
         a daemon of its own there: {how}, or `maos daemon uninstall` to go back to starts on \
         demand",
        service.manager.as_str(),
        service.file.display(),
        service.socket.display()
    )
}

/// The daemon started in place of an outdated one speaks another protocol too.
fn still_outdated(e: ClientError) -> ClientError {
    match e {
        ClientError::Mismatch(m) => fail(format!(
            "replaced an outdated maosd, but the new one (maosd {}, pid {}) speaks protocol {} \
             where this maos speaks {PROTOCOL_VERSION}: install maos and maosd from one release \
             (this maos starts {})",
            m.version,
            m.pid,
            m.protocol,
            daemon_binary().display()
        )),
        e => e,
    }
}

fn fail(m: String) -> ClientError {
    ClientError::Unavailable(m)
}

/// The start-up lock beside the socket: one client at a time starts (or replaces) the daemon.
/// Held until the returned file is dropped.
fn start_lock(socket: &Path, until: Instant) -> Result<std::fs::File, ClientError> {
    let dir = socket
        .parent()
        .ok_or_else(|| fail(format!("bad socket path {}", socket.display())))?;
    // The daemon needs both: a person fixing their modes hears of both at once.
    let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
    paths::ensure_private_dirs(&[dir, &home]).map_err(|e| fail(e.to_string()))?;
    let lock_path = dir.join("maosd.start.lock");
    let lock = paths::private_file(&lock_path)
        .map_err(|e| fail(format!("{}: {e}", lock_path.display())))?;
    // Another client may be starting the daemon: wait for it, but not past `until`.
    let mut pause = Duration::from_millis(1);
    loop {
        match lock.try_lock() {
            Ok(()) => return Ok(lock),
            Err(std::fs::TryLockError::WouldBlock) if Instant::now() < until => {}
            Err(std::fs::TryLockError::WouldBlock) => {
                return Err(fail(format!(
                    "another maos is starting maosd and holds {}; retry in a moment",
                    lock_path.display()
                )));
            }
            Err(std::fs::TryLockError::Error(e)) => {
                return Err(fail(format!("{}: {e}", lock_path.display())));
            }
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Ask a daemon to stop with SIGTERM (it finishes in-flight requests, commits, then exits):
/// for a daemon that speaks another protocol and so cannot take a stop request. Its pid comes
/// from its own welcome. A process already gone is fine.
pub fn terminate(pid: u32) -> io::Result<()> {
    // SAFETY: kill only sends a signal.
    if unsafe { libc::kill(pid as libc::pid_t, libc::SIGTERM) } != 0 {
        let e = io::Error::last_os_error();
        if e.raw_os_error() != Some(libc::ESRCH) {
            return Err(e);
        }
    }
    Ok(())
}

/// Wait until the process is gone (the daemon commits and closes its databases first).
pub fn wait_for_exit(pid: u32) -> Result<(), ClientError> {
    let deadline = Instant::now() + Duration::from_secs(30);
    while Instant::now() < deadline {
        if exited(pid) {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    Err(ClientError::Unavailable(format!(
        "maosd (pid {pid}) did not exit within 30s"
    )))
}

/// Whether the process is gone (a zombie counts as gone: its parent may never reap it).
pub fn exited(pid: u32) -> bool {
    // SAFETY: kill with signal 0 only checks that the process exists.
    let alive = unsafe { libc::kill(pid as libc::pid_t, 0) } == 0;
    !alive || zombie(pid)
}

/// True when `pid` has exited but is not reaped yet. The detached daemon's parent is init (or a
/// container's PID 1), which may reap late or never; its exit is what we wait for. The main
/// thread turns zombie before the other threads are gone, so only a lone zombie counts.
#[cfg(target_os = "linux")]
fn zombie(pid: u32) -> bool {
    let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|stat| {
        // "pid (comm) STATE ...": comm may hold spaces and parentheses.
        stat.rsplit_once(')')
            .is_some_and(|(_, rest)| rest.trim_start().starts_with('Z'))
    });
    zombie && std::fs::read_dir(format!("/proc/{pid}/task")).is_ok_and(|tasks| tasks.count() <= 1)
}

#[cfg(not(target_os = "linux"))]
fn zombie(_pid: u32) -> bool {
    false
}

/// Replace an outdated daemon that a client started: under the start-up lock, ask again who
/// answers (another client may have replaced it meanwhile), stop it with SIGTERM (it finishes
/// in-flight requests and commits), wait until it is gone, start the matching one.
fn replace_outdated(
    socket: &Path,
    limit: Duration,
    whole: Option<Limit>,
) -> Result<(), ClientError> {
    let cap = |d: Instant| whole.map_or(d, |w| d.min(w.until));
    let _lock = start_lock(socket, cap(Instant::now() + limit))?;
    let Ok(stream) = connect_to(socket, cap(Instant::now() + limit)) else {
        return spawn_daemon(socket, limit, cap(Instant::now() + limit));
    };
    let mut probe = Client::hello(stream)?;
    probe.set_timeout(whole.map_or(limit, |w| w.left().max(Duration::from_millis(1))));
    let m = match probe.welcome() {
        Ok(_) => return Ok(()),
        Err(ClientError::Mismatch(m)) if m.replaceable() => m,
        Err(e) => return Err(e),
    };
    drop(probe);
    terminate(m.pid).map_err(|e| {
        fail(format!(
            "cannot stop the outdated maosd (pid {}): {e}",
            m.pid
        ))
    })?;
    // Its drain takes at most 10 s; then it closes its databases.
    let deadline = cap(Instant::now() + limit.max(Duration::from_secs(15)));
    let mut pause = Duration::from_millis(1);
    while !exited(m.pid) {
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "the outdated maosd (pid {}) did not exit; stop it with `kill {}`",
                m.pid, m.pid
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
    spawn_daemon(socket, limit, cap(Instant::now() + limit))
}

/// Start the daemon detached and wait until its socket answers. A start-up lock makes
/// concurrent clients start exactly one daemon: the others wait on the lock, then find it up.
fn start_daemon(socket: &Path, limit: Duration, until: Instant) -> Result<(), ClientError> {
    let _lock = start_lock(socket, until)?;
    if connect_to(socket, until).is_ok() {
        return Ok(()); // another client started it while we waited for the lock
    }
    spawn_daemon(socket, limit, until)
}

/// A daemon that is shutting down holds its pidfile lock until its databases are closed, and a
/// new one started meanwhile would refuse to run: wait for it to finish.
fn wait_for_previous(home: &Path, deadline: Instant) -> Result<(), ClientError> {
    let path = home.join("maosd.pid");
    let Ok(pidfile) = std::fs::File::open(&path) else {
        return Ok(()); // none ever ran here
    };
    let mut pause = Duration::from_millis(1);
    loop {
        match pidfile.try_lock_shared() {
            Ok(()) => return Ok(()), // released when `pidfile` closes
            Err(std::fs::TryLockError::WouldBlock) => {}
            // Locks unsupported here: the start itself reports a daemon still running.
            Err(std::fs::TryLockError::Error(_)) => return Ok(()),
        }
        if Instant::now() >= deadline {
            return Err(fail(format!(
                "the previous maosd still holds {} (it is shutting down); retry in a moment",
                path.display()
            )));
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Start the daemon (the start-up lock held).
/// It has `limit` to answer, but only until `until`.
fn spawn_daemon(socket: &Path, limit: Duration, until: Instant) -> Result<(), ClientError> {
    let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
    paths::ensure_private_dir(&home).map_err(|e| fail(e.to_string()))?;
    let until = until.min(Instant::now() + limit);
    wait_for_previous(&home, until)?;
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
    cmd.arg("--autostarted");
    // Never inherit the caller's stdio: agent CLIs wait for the hook's stdout to close.
    cmd.stdin(Stdio::null()).stdout(out).stderr(err);
    detach(&mut cmd);
    let mut child = cmd
        .spawn()
        .map_err(|e| fail(format!("cannot start {}: {e}", bin.display())))?;
    let deadline = until;
    let mut pause = Duration::from_millis(1);
    while Instant::now() < deadline {
        if connect_to(socket, deadline).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let last = last_line(&out_path);
            // Lost a start race to a daemon that is now up: fine.
            if connect_to(socket, deadline).is_ok() {
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
