//! The blocking connection to `maosd`: connect (starting the daemon when it is not running),
//! handshake, one request at a time, or a subscription stream. No async runtime: this runs on
//! every hook call, so its start-up cost is the product's latency.

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

/// What this process says it is in every hello ([`set_kind`]); `other` until it says.
static KIND: std::sync::atomic::AtomicU8 = std::sync::atomic::AtomicU8::new(5);

/// Say what kind of client this process is (`maos hook`, a CLI command, `maos top`, ...): the
/// daemon keeps slots for hooks and commands that long-lived connections cannot take.
pub fn set_kind(kind: ClientKind) {
    let i = ClientKind::ALL.iter().position(|k| *k == kind).unwrap_or(5);
    KIND.store(i as u8, std::sync::atomic::Ordering::Relaxed);
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

impl Client {
    /// Connect to the daemon, starting it first when it is not running and `autostart` holds
    /// (unless `MAOS_NO_AUTOSTART=1`).
    pub fn connect(autostart: bool) -> Result<Client, ClientError> {
        Client::connect_within(autostart, START_DEADLINE)
    }

    /// [`Client::connect`], giving a daemon it starts at most `deadline` to answer.
    pub fn connect_within(autostart: bool, deadline: Duration) -> Result<Client, ClientError> {
        let mut c = Client::open(autostart, deadline)?;
        c.autostart = autostart.then_some(deadline);
        Ok(c)
    }

    fn open(autostart: bool, deadline: Duration) -> Result<Client, ClientError> {
        let socket = paths::socket_path();
        match UnixStream::connect(&socket) {
            Ok(s) => match Client::hello(s) {
                Ok(c) => return Ok(c),
                Err(e) if !autostart => return Err(e),
                // Accepted into the backlog of a daemon that stopped listening (it is shutting
                // down): start the next one, as when none runs.
                Err(_) => {}
            },
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
        if let Some(service) = maos_proto::service::installed_for(&socket) {
            return Err(ClientError::Unavailable(service_down(&service)));
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
        })
    }

    /// Read one frame, noting a timeout.
    fn read(&mut self) -> Result<ServerMsg, ClientError> {
        read_frame(&mut self.stream).map_err(|e| {
            self.timed_out |= is_timeout(&e);
            e.into()
        })
    }

    /// Connect again (after the daemon went away or was replaced), with the same timeout.
    fn reconnect(&mut self, deadline: Duration) -> Result<(), ClientError> {
        let timeout = self.timeout;
        *self = Client::connect_within(true, deadline)?;
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
        let sent = write_frame(&mut self.stream, msg);
        self.welcome()?;
        sent.map_err(|e| {
            self.timed_out |= is_timeout(&e);
            e.into()
        })
    }

    /// An outdated daemon answered the hello: when this client may, replace it with the
    /// matching one and reconnect (the request was not served: a daemon that refuses the hello
    /// reads nothing else).
    fn replace(&mut self, m: Box<Mismatch>) -> Result<(), ClientError> {
        match self.autostart {
            Some(deadline) if m.replaceable() => {
                replace_outdated(&paths::socket_path(), deadline)?;
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
        let give_up = Instant::now() + self.autostart.unwrap_or_default();
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
        let mut msg = ClientMsg::Request {
            id: 0,
            project: project.map(str::to_string),
            body,
        };
        self.retrying(|c| c.exchange(&mut msg))
    }

    /// Send a request (numbered on this connection) and read its response.
    fn exchange(&mut self, msg: &mut ClientMsg) -> Result<Reply, ClientError> {
        let id = self.next_id;
        self.next_id += 1;
        if let ClientMsg::Request { id: slot, .. } = msg {
            *slot = id;
        }
        self.send(msg)?;
        self.response(id)
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
        self.retrying(|c| c.send(&msg))?;
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
fn start_lock(socket: &Path) -> Result<std::fs::File, ClientError> {
    let dir = socket
        .parent()
        .ok_or_else(|| fail(format!("bad socket path {}", socket.display())))?;
    // The daemon needs both: a person fixing their modes hears of both at once.
    let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
    paths::ensure_private_dirs(&[dir, &home]).map_err(|e| fail(e.to_string()))?;
    let lock_path = dir.join("maosd.start.lock");
    let lock = paths::private_file(&lock_path)
        .map_err(|e| fail(format!("{}: {e}", lock_path.display())))?;
    lock.lock()
        .map_err(|e| fail(format!("{}: {e}", lock_path.display())))?;
    Ok(lock)
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
fn replace_outdated(socket: &Path, limit: Duration) -> Result<(), ClientError> {
    let _lock = start_lock(socket)?;
    let Ok(stream) = UnixStream::connect(socket) else {
        return spawn_daemon(socket, limit);
    };
    let mut probe = Client::hello(stream)?;
    probe.set_timeout(limit);
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
    let deadline = Instant::now() + limit.max(Duration::from_secs(15));
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
    spawn_daemon(socket, limit)
}

/// Start the daemon detached and wait until its socket answers. A start-up lock makes
/// concurrent clients start exactly one daemon: the others wait on the lock, then find it up.
fn start_daemon(socket: &Path, limit: Duration) -> Result<(), ClientError> {
    let _lock = start_lock(socket)?;
    if UnixStream::connect(socket).is_ok() {
        return Ok(()); // another client started it while we waited for the lock
    }
    spawn_daemon(socket, limit)
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
fn spawn_daemon(socket: &Path, limit: Duration) -> Result<(), ClientError> {
    let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
    paths::ensure_private_dir(&home).map_err(|e| fail(e.to_string()))?;
    wait_for_previous(&home, Instant::now() + limit)?;
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
    let deadline = Instant::now() + limit;
    let mut pause = Duration::from_millis(1);
    while Instant::now() < deadline {
        if UnixStream::connect(socket).is_ok() {
            return Ok(());
        }
        if let Ok(Some(status)) = child.try_wait() {
            let last = last_line(&out_path);
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
