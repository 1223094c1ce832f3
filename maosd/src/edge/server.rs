//! The daemon: start-up checks, the accept loop, and graceful shutdown.

use std::io;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use maos_store::StoreOptions;
use tokio::net::UnixListener;
use tokio::sync::Semaphore;
use tokio_util::sync::CancellationToken;
use tokio_util::task::TaskTracker;
use tracing::{debug, error, info, warn};

use crate::base::config::Config;
use crate::edge::activation::Activated;
use crate::edge::daemon::Daemon;
use crate::project::Projects;

/// Sockets taken beyond `max_connections` while their hello is read: a connection the lanes
/// refuse is told so, not left in the listen backlog (see `lanes.rs`).
const HANDSHAKE: usize = 64;
/// Descriptors the daemon keeps for itself besides its connections: databases, their WAL
/// files, logs, agents' pipes.
const OWN_FDS: u64 = 256;
/// How long shutdown waits for in-flight requests.
const DRAIN: Duration = Duration::from_secs(10);

#[derive(Debug, thiserror::Error)]
pub enum StartError {
    #[error("another maosd (pid {pid}) already runs for {home}; stop it with `maos daemon stop`")]
    AlreadyRunning { pid: String, home: PathBuf },
    #[error(
        "socket {0} is served by another process; stop that daemon or set MAOS_SOCKET to another path"
    )]
    SocketInUse(PathBuf),
    #[error(
        "{socket} belongs to the {manager} service ({file}): start maosd through {manager} \
         (`maos doctor` says how), or `maos daemon uninstall` to run it on demand"
    )]
    ServiceOwned {
        manager: &'static str,
        file: PathBuf,
        socket: PathBuf,
    },
    #[error(transparent)]
    Path(#[from] maos_proto::paths::PathError),
    #[error(transparent)]
    Fleet(maos_store::StoreError),
    #[error("{what} {path}: {source}")]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn io_err(what: &'static str, path: &Path) -> impl FnOnce(io::Error) -> StartError {
    let path = path.to_path_buf();
    move |source| StartError::Io { what, path, source }
}

/// Hold the pidfile lock for the daemon's lifetime: a second daemon for the same home refuses.
fn lock_pidfile(home: &Path) -> Result<std::fs::File, StartError> {
    use std::io::{Read, Seek, Write};
    use std::os::unix::fs::OpenOptionsExt;
    let path = home.join("maosd.pid");
    let mut f = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .mode(0o600)
        .open(&path)
        .map_err(io_err("cannot open pidfile", &path))?;
    if f.try_lock().is_err() {
        let mut pid = String::new();
        let _ = f.read_to_string(&mut pid);
        return Err(StartError::AlreadyRunning {
            pid: pid.trim().to_string(),
            home: home.to_path_buf(),
        });
    }
    f.set_len(0)
        .map_err(io_err("cannot write pidfile", &path))?;
    f.rewind().map_err(io_err("cannot write pidfile", &path))?;
    writeln!(f, "{}", std::process::id()).map_err(io_err("cannot write pidfile", &path))?;
    Ok(f)
}

/// Bind the socket, reclaiming a stale one left by a crash. We hold the pidfile lock, so no
/// daemon of ours serves it; a socket that still answers belongs to someone else.
fn bind(socket: &Path) -> Result<UnixListener, StartError> {
    if let Some(dir) = socket.parent() {
        maos_proto::paths::ensure_private_dir(dir)?;
    }
    if std::fs::symlink_metadata(socket).is_ok() {
        if std::os::unix::net::UnixStream::connect(socket).is_ok() {
            return Err(StartError::SocketInUse(socket.to_path_buf()));
        }
        warn!(socket = %socket.display(), "removing a stale socket left by a previous daemon");
        std::fs::remove_file(socket).map_err(io_err("cannot remove stale socket", socket))?;
    }
    let listener = UnixListener::bind(socket).map_err(io_err("cannot listen on", socket))?;
    std::fs::set_permissions(socket, std::fs::Permissions::from_mode(0o600))
        .map_err(io_err("cannot restrict", socket))?;
    Ok(listener)
}

/// Retention on a schedule (`gc_older_than`, `gc_every` in `config.toml`): every open project,
/// one after the other, the first time one interval after the start.
async fn scheduled_gc(daemon: Arc<Daemon>, older_than: Duration) {
    let every = daemon.config.gc_every;
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + every, every);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = daemon.shutdown.cancelled() => return,
        }
        for (root, handle) in daemon.projects.handles().await {
            let sync = daemon.config.synchronous == maos_store::Synchronous::Full;
            match crate::project::gc::run(
                &daemon.config.home,
                &root,
                &handle,
                older_than,
                false,
                sync,
            )
            .await
            {
                Ok(r) if !r.sessions.is_empty() => {
                    info!(project = %root, deleted = r.sessions.len(), "scheduled gc: finished sessions exported and deleted");
                }
                Ok(_) => {}
                Err(e) => warn!(project = %root, error = %e.message, "scheduled gc failed"),
            }
        }
    }
}

pub async fn run(mut config: Config, activated: Option<Activated>) -> Result<(), StartError> {
    // Before anything is created or bound: a URL that cannot be used leaves nothing behind.
    let fleet = match &config.database_url {
        Some(url) => {
            let machine = config
                .machine
                .clone()
                .unwrap_or_else(crate::edge::fleet::machine);
            let id = crate::edge::fleet::daemon_id(&machine, &config.home);
            let fleet = maos_store::Fleet::new(url, id, machine).map_err(StartError::Fleet)?;
            info!(
                url = fleet.url(),
                daemon = fleet.daemon(),
                "fleet mode: state lives in PostgreSQL"
            );
            Some(Arc::new(fleet))
        }
        None => None,
    };
    maos_proto::paths::ensure_private_dir(&config.home)?;
    let pidfile = lock_pidfile(&config.home)?;
    // A socket the service manager handed over is its own: never bound, chmod'ed or removed
    // here, and it keeps listening after this daemon exits.
    let (listener, own_socket) = match activated {
        Some(a) => {
            if a.ignored > 0 {
                warn!(
                    ignored = a.ignored,
                    "the service manager handed over more than one socket; maosd uses the first"
                );
            }
            let listener = UnixListener::from_std(a.listener)
                .map_err(io_err("cannot listen on", &config.socket))?;
            (listener, false)
        }
        None => {
            // The service manager owns this socket even while it does not listen (stopped,
            // failed): a daemon of our own there would fight it.
            if let Some(service) = maos_proto::service::installed_for(&config.socket) {
                return Err(StartError::ServiceOwned {
                    manager: service.manager.as_str(),
                    file: service.file,
                    socket: config.socket.clone(),
                });
            }
            (bind(&config.socket)?, true)
        }
    };
    if own_socket && config.idle_exit.take().is_some() {
        info!(
            "idle_exit is ignored: only a daemon whose socket a service manager holds exits when idle"
        );
    }
    let idle_exit = config.idle_exit;
    let opts = StoreOptions {
        synchronous: config.synchronous,
        max_page_count: config.max_page_count,
        fleet,
    };
    let projects = Projects::new(&config.home, &config.socket, opts);
    let daemon = Arc::new(Daemon::new(config, projects));
    if let Some(fleet) = daemon.projects.fleet() {
        let (tx, rx) = tokio::sync::mpsc::unbounded_channel();
        daemon.projects.set_listener(tx);
        tokio::spawn(crate::edge::fleet::listen(
            fleet.clone(),
            rx,
            daemon.shutdown.clone(),
        ));
        tokio::spawn(crate::edge::fleet::heartbeat(
            fleet.clone(),
            daemon.shutdown.clone(),
        ));
    }
    info!(
        pid = std::process::id(),
        socket = %daemon.config.socket.display(),
        home = %daemon.config.home.display(),
        synchronous = daemon.config.synchronous.as_str(),
        started_by = daemon.config.started_by.as_str(),
        "maosd ready"
    );
    tokio::spawn(signals(daemon.shutdown.clone()));
    if let Some(older_than) = daemon.config.gc_older_than {
        tokio::spawn(scheduled_gc(daemon.clone(), older_than));
    }
    // Sessions that were running when the daemon last stopped are recovered now, not when
    // someone next touches their project: their agents' exits are applied and what became
    // ready starts. Requests are served meanwhile.
    {
        let d = daemon.clone();
        tokio::spawn(async move { d.projects.open_managed().await });
    }
    let tracker = TaskTracker::new();
    let limits = daemon.config.limits;
    raise_fd_limit((limits.max + HANDSHAKE) as u64 + OWN_FDS);
    let lanes = crate::base::lanes::Lanes::new(limits);
    let limit = Arc::new(Semaphore::new(limits.max + HANDSHAKE));
    let me = maos_proto::paths::uid();
    let idle = Idle::new();
    loop {
        // Shutdown first: a stopping daemon takes no new connection it would drop unanswered.
        let permit = tokio::select! {
            biased;
            () = daemon.shutdown.cancelled() => break,
            p = limit.clone().acquire_owned() => match p { Ok(p) => p, Err(_) => break },
        };
        let accepted = tokio::select! {
            biased;
            () = daemon.shutdown.cancelled() => break,
            a = listener.accept() => a,
            () = idle.expired(idle_exit, &tracker, &daemon) => {
                info!(
                    idle_secs = idle_exit.map_or(0.0, |d| d.as_secs_f64()),
                    "idle: exiting; the service manager starts maosd again on the next connection"
                );
                break;
            }
        };
        let stream = match accepted {
            Ok((s, _)) => s,
            Err(e) => {
                // Out of descriptors and the like: back off instead of spinning.
                error!(error = %e, "accept failed");
                tokio::time::sleep(Duration::from_millis(50)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(cred) if cred.uid() == me => {}
            Ok(cred) => {
                warn!(
                    peer_uid = cred.uid(),
                    "refused a connection from another user"
                );
                let message = format!(
                    "this maosd belongs to uid {me} and serves no other user (you are uid {}); \
                     point MAOS_SOCKET at your own daemon's socket",
                    cred.uid()
                );
                tracker.spawn(crate::edge::conn::refuse(stream, message));
                continue;
            }
            Err(e) => {
                warn!(error = %e, "cannot read peer credentials; connection refused");
                continue;
            }
        }
        let d = daemon.clone();
        let done = idle.clone();
        let lanes = lanes.clone();
        tracker.spawn(async move {
            crate::edge::conn::serve(stream, d, lanes).await;
            done.touch();
            drop(permit);
        });
    }
    info!("shutting down: finishing in-flight requests");
    drop(listener);
    tracker.close();
    if tokio::time::timeout(DRAIN, tracker.wait()).await.is_err() {
        warn!("some connections did not finish in time");
    }
    daemon.projects.close_all().await;
    if let Some(fleet) = daemon.projects.fleet() {
        fleet.close().await;
    }
    if own_socket {
        let _ = std::fs::remove_file(&daemon.config.socket);
    }
    let _ = std::fs::remove_file(daemon.config.home.join("maosd.pid"));
    drop(pidfile);
    info!("maosd stopped");
    Ok(())
}

/// Raise the soft limit on open descriptors towards `wanted` (at most the hard limit): the
/// usual soft limit, 1,024, is less than the connections the daemon takes. When it cannot,
/// say how many connections it can serve.
fn raise_fd_limit(wanted: u64) {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return;
    }
    let wanted = wanted as libc::rlim_t;
    let cur = lim.rlim_cur;
    if cur >= wanted {
        return;
    }
    let want = wanted.min(lim.rlim_max);
    let raised = libc::rlimit {
        rlim_cur: want,
        rlim_max: lim.rlim_max,
    };
    // SAFETY: setrlimit reads the struct it is given.
    let got = if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &raised) } == 0 {
        want
    } else {
        cur
    };
    if got < wanted {
        warn!(
            open_files = got,
            wanted,
            "the limit on open files is below max_connections plus the daemon's own files: \
             connections past it are refused by the system; lower max_connections or raise \
             `ulimit -n`"
        );
    }
}

/// When the daemon last had something to do: a connection ended. Idle means no connection
/// open, no managed agent running, for `idle_exit` since.
#[derive(Clone)]
struct Idle(Arc<std::sync::Mutex<Instant>>);

impl Idle {
    fn new() -> Idle {
        Idle(Arc::new(std::sync::Mutex::new(Instant::now())))
    }

    fn touch(&self) {
        if let Ok(mut t) = self.0.lock() {
            *t = Instant::now();
        }
    }

    fn since(&self) -> Instant {
        self.0.lock().map_or_else(|_| Instant::now(), |t| *t)
    }

    /// Resolves once the daemon has been idle for `after`; never when `after` is None. Checked
    /// at most every second (a connection that is open or an agent that runs puts it off).
    async fn expired(&self, after: Option<Duration>, tracker: &TaskTracker, daemon: &Daemon) {
        let Some(after) = after else {
            return std::future::pending().await;
        };
        let period = after.min(Duration::from_secs(1));
        loop {
            let due = self.since() + after;
            if Instant::now() < due {
                tokio::time::sleep_until(due.into()).await;
                continue;
            }
            if tracker.is_empty() {
                let running: usize = daemon
                    .projects
                    .infos()
                    .await
                    .iter()
                    .map(|p| p.running_agents)
                    .sum();
                if running == 0 && tracker.is_empty() {
                    return;
                }
                debug!(running, "idle, but managed agents run: staying");
            }
            tokio::time::sleep(period).await;
        }
    }
}

async fn signals(token: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut term), Ok(mut int)) = (
        signal(SignalKind::terminate()),
        signal(SignalKind::interrupt()),
    ) else {
        error!("cannot install signal handlers; stop the daemon with `maos daemon stop`");
        return;
    };
    tokio::select! {
        _ = term.recv() => info!("SIGTERM received"),
        _ = int.recv() => info!("SIGINT received"),
        () = token.cancelled() => return,
    }
    token.cancel();
}
