//! A throwaway PostgreSQL server for the fleet-mode tests and benchmarks: `initdb` into a fresh
//! temporary directory, `postgres` listening on a free 127.0.0.1 port and on a Unix socket in
//! that directory, trust authentication, PostgreSQL's default durability (`fsync` and
//! `synchronous_commit` on). Never a mock.
//!
//! Root may not run PostgreSQL: as root the server runs as the `postgres` OS user (which
//! Debian's `postgresql` package creates), the directory chowned to it. The server leads its
//! own process group; dropping a [`Postgres`] shuts it down immediately and kills whatever is
//! left of the group, also when the test panicked. Should the test process itself be killed,
//! the postmaster gets SIGQUIT (its parent-death signal) and stops its backends. The thread
//! that starts a server must outlive it (the parent-death signal follows the thread): start it
//! on the test's own thread or `main`, not on a pool's.
//!
//! Readiness is the postmaster's own word: the status line of `postmaster.pid` reads `ready`,
//! waited for with a deadline.

use std::fs::File;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

/// How long `postgres` may take to accept connections, or to stop.
const PG_DEADLINE: Duration = Duration::from_secs(30);
/// The superuser `initdb` creates, and the database every server has.
pub const PG_USER: &str = "postgres";

/// How to stop the server.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Shutdown {
    /// SIGQUIT: backends killed, no checkpoint; the next start replays the WAL (a crash).
    Immediate,
    /// SIGINT: transactions in flight are rolled back, a checkpoint is written.
    Fast,
}

/// A running (or stopped, between [`Postgres::stop`] and [`Postgres::start`]) throwaway server.
pub struct Postgres {
    bin: PathBuf,
    owner: Option<(u32, u32)>,
    port: u16,
    child: Option<Child>,
    dir: tempfile::TempDir,
}

impl Postgres {
    /// initdb into a new temporary directory and start the server.
    pub fn start() -> Result<Postgres, String> {
        crate::tempdir::sweep_stale_dirs("maos-pg-");
        let bin = bin_dir()?;
        let owner = if crate::is_root() {
            Some(os_user(PG_USER)?)
        } else {
            None
        };
        let dir = tempfile::Builder::new()
            .prefix(&format!("maos-pg-{}-", std::process::id()))
            .tempdir_in(parent_dir(owner.is_some()))
            .map_err(|e| format!("cannot make PostgreSQL's temporary directory: {e}"))?;
        if let Some((uid, gid)) = owner {
            chown(dir.path(), uid, gid)?;
        }
        let mut pg = Postgres {
            bin,
            owner,
            port: 0,
            child: None,
            dir,
        };
        std::fs::create_dir(pg.socket_dir())
            .map_err(|e| format!("{}: {e}", pg.socket_dir().display()))?;
        if let Some((uid, gid)) = owner {
            chown(&pg.socket_dir(), uid, gid)?;
        }
        let out = pg
            .command("initdb")
            .arg("-D")
            .arg(pg.data_dir())
            .args([
                "-U",
                PG_USER,
                "--auth=trust",
                "--no-sync",
                "--no-instructions",
            ])
            .args(["-E", "UTF8", "--locale=C"])
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run {}/initdb: {e}", pg.bin.display()))?;
        if !out.status.success() {
            return Err(format!(
                "initdb failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        pg.start_server()?;
        Ok(pg)
    }

    /// The URL of its `postgres` database over TCP.
    pub fn url(&self) -> String {
        format!("postgres://{PG_USER}@127.0.0.1:{}/postgres", self.port)
    }

    /// The URL of its `postgres` database over its Unix socket.
    pub fn socket_url(&self) -> String {
        format!(
            "postgres://{PG_USER}@localhost/postgres?host={}&port={}",
            self.socket_dir().display(),
            self.port
        )
    }

    pub fn port(&self) -> u16 {
        self.port
    }

    /// The postmaster's pid (also its process group) while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// The temporary directory (data, socket, log), removed on drop.
    pub fn dir(&self) -> &Path {
        self.dir.path()
    }

    pub fn data_dir(&self) -> PathBuf {
        self.dir.path().join("data")
    }

    fn socket_dir(&self) -> PathBuf {
        self.dir.path().join("run")
    }

    fn log_path(&self) -> PathBuf {
        self.dir.path().join("postgres.log")
    }

    /// The server's log so far (for a failure's message).
    pub fn log(&self) -> String {
        std::fs::read_to_string(self.log_path()).unwrap_or_default()
    }

    /// Stop the server and start it again on the same port and data.
    pub fn restart(&mut self, how: Shutdown) -> Result<(), String> {
        self.stop(how)?;
        self.start_server()
    }

    /// Start a stopped server again (same port and data).
    pub fn resume(&mut self) -> Result<(), String> {
        if self.child.is_some() {
            return Ok(());
        }
        self.start_server()
    }

    /// Stop the server and wait until every process of its group is gone (SIGKILL after the
    /// deadline).
    pub fn stop(&mut self, how: Shutdown) -> Result<(), String> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let pgid = child.id() as libc::pid_t;
        let sig = match how {
            Shutdown::Immediate => libc::SIGQUIT,
            Shutdown::Fast => libc::SIGINT,
        };
        // SAFETY: signals the postmaster we started (still our unreaped child).
        unsafe { libc::kill(pgid, sig) };
        let deadline = Instant::now() + PG_DEADLINE;
        let mut clean = wait_child(&mut child, deadline);
        clean &= wait_group_gone(pgid, deadline);
        if !clean {
            // SAFETY: the group is the postmaster's, led by our own child.
            unsafe { libc::kill(-pgid, libc::SIGKILL) };
            let _ = child.wait();
            wait_group_gone(pgid, Instant::now() + PG_DEADLINE);
            return Err(format!(
                "PostgreSQL did not stop within {PG_DEADLINE:?} after {how:?}; killed it"
            ));
        }
        Ok(())
    }

    fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new(self.bin.join(program));
        if let Some((uid, gid)) = self.owner {
            cmd.uid(uid).gid(gid);
        }
        // PostgreSQL's tools refuse to run in a directory they cannot read.
        cmd.current_dir(self.dir.path());
        cmd
    }

    /// Start `postgres` on a free port (a new one when the port was taken meanwhile) and wait
    /// until it says it is ready.
    fn start_server(&mut self) -> Result<(), String> {
        let keep_port = self.port != 0;
        let mut last = String::new();
        for _ in 0..5 {
            if !keep_port {
                self.port = free_port()?;
            }
            let log = File::options()
                .create(true)
                .append(true)
                .open(self.log_path())
                .map_err(|e| format!("{}: {e}", self.log_path().display()))?;
            let err = log
                .try_clone()
                .map_err(|e| format!("{}: {e}", self.log_path().display()))?;
            let log_len = std::fs::metadata(self.log_path()).map_or(0, |m| m.len());
            let mut cmd = self.command("postgres");
            cmd.arg("-D")
                .arg(self.data_dir())
                .arg("-p")
                .arg(self.port.to_string())
                .arg("-k")
                .arg(self.socket_dir())
                .args(["-c", "listen_addresses=127.0.0.1"])
                // A test's daemons and a bench's pools: more than the default 100.
                .args(["-c", "max_connections=200"])
                .stdin(Stdio::null())
                .stdout(log)
                .stderr(err)
                .process_group(0);
            // SAFETY: prctl is async-signal-safe; it sets only the child's parent-death signal.
            unsafe {
                cmd.pre_exec(|| {
                    if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGQUIT as libc::c_ulong) != 0 {
                        return Err(std::io::Error::last_os_error());
                    }
                    Ok(())
                });
            }
            let child = cmd
                .spawn()
                .map_err(|e| format!("cannot run {}/postgres: {e}", self.bin.display()))?;
            self.child = Some(child);
            match self.wait_ready() {
                Ok(()) => return Ok(()),
                Err(e) => {
                    let _ = self.stop(Shutdown::Immediate);
                    let log = self.log();
                    let tail = log.get(log_len as usize..).unwrap_or(&log).trim();
                    last = format!("{e}; its log: {tail}");
                    if keep_port || !tail.contains("could not bind") {
                        break;
                    }
                }
            }
        }
        Err(format!("PostgreSQL did not start: {last}"))
    }

    /// Until `postmaster.pid` (of this postmaster) says `ready`, or the server exits.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + PG_DEADLINE;
        let pidfile = self.data_dir().join("postmaster.pid");
        let mut pause = Duration::from_millis(1);
        loop {
            let child = self.child.as_mut().ok_or("no server process")?;
            if let Ok(Some(status)) = child.try_wait() {
                return Err(format!("postgres exited ({status})"));
            }
            if let Ok(text) = std::fs::read_to_string(&pidfile) {
                let lines: Vec<&str> = text.lines().collect();
                let ours = lines.first().map(|l| l.trim()) == Some(&child.id().to_string());
                if ours && lines.get(7).map(|l| l.trim()) == Some("ready") {
                    return Ok(());
                }
            }
            if Instant::now() >= deadline {
                return Err(format!("not ready after {PG_DEADLINE:?}"));
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(20));
        }
    }
}

impl Drop for Postgres {
    fn drop(&mut self) {
        if let Err(e) = self.stop(Shutdown::Immediate) {
            eprintln!("{e}");
        }
    }
}

/// A throwaway server, or `None` with the reason printed where one cannot start; on CI (`CI`
/// set, where `.ci/run` installs PostgreSQL) that fails the test instead.
pub fn postgres_or_skip() -> Option<Postgres> {
    match Postgres::start() {
        Ok(pg) => Some(pg),
        Err(e) => {
            crate::skip_unless_ci(&format!("PostgreSQL cannot start here: {e}"));
            None
        }
    }
}

/// Where `initdb` and `postgres` are: `MAOS_PG_BIN`, else the newest
/// `/usr/lib/postgresql/<version>/bin` (Debian's layout), else `pg_config --bindir`.
pub fn bin_dir() -> Result<PathBuf, String> {
    if let Some(dir) = std::env::var_os("MAOS_PG_BIN") {
        return Ok(PathBuf::from(dir));
    }
    let mut found: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let version = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    if let Some((_, bin)) = found.pop() {
        return Ok(bin);
    }
    let out = Command::new("pg_config")
        .arg("--bindir")
        .stderr(Stdio::null())
        .output()
        .ok()
        .filter(|o| o.status.success())
        .ok_or(
            "PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/initdb, no pg_config): \
             install the Debian package postgresql, or set MAOS_PG_BIN",
        )?;
    Ok(PathBuf::from(String::from_utf8_lossy(&out.stdout).trim()))
}

/// Where the temporary directory goes: the system's temporary directory, unless the server's
/// socket path would be too long there (Unix sockets take about 100 bytes), or (as root, the
/// server running as `postgres`) a directory above it is closed to other users; then `/tmp`.
fn parent_dir(other_user: bool) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let tmp = std::env::temp_dir();
    // <tmp>/maos-pg-<pid>-XXXXXX/run/.s.PGSQL.<port>
    let too_long = tmp.as_os_str().len() + 50 > 100;
    let closed = other_user
        && tmp
            .ancestors()
            .any(|d| std::fs::metadata(d).is_ok_and(|m| m.permissions().mode() & 0o001 == 0));
    if too_long || closed {
        PathBuf::from("/tmp")
    } else {
        tmp
    }
}

/// uid and gid of the OS user `name`.
fn os_user(name: &str) -> Result<(u32, u32), String> {
    let c = std::ffi::CString::new(name).map_err(|e| e.to_string())?;
    // SAFETY: getpwnam with a valid C string; the entry is read before any other call.
    let pw = unsafe { libc::getpwnam(c.as_ptr()) };
    if pw.is_null() {
        return Err(format!(
            "running as root, PostgreSQL needs the OS user {name:?}, which does not exist \
             (the Debian package postgresql creates it)"
        ));
    }
    // SAFETY: non-null, just returned by getpwnam.
    Ok(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

fn chown(path: &Path, uid: u32, gid: u32) -> Result<(), String> {
    std::os::unix::fs::chown(path, Some(uid), Some(gid))
        .map_err(|e| format!("cannot give {} to the postgres user: {e}", path.display()))
}

/// A port nothing listens on now on 127.0.0.1 (the server may still lose it to a race; the
/// start then takes another).
fn free_port() -> Result<u16, String> {
    let l = std::net::TcpListener::bind("127.0.0.1:0")
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))?;
    l.local_addr()
        .map(|a| a.port())
        .map_err(|e| format!("no free port on 127.0.0.1: {e}"))
}

/// Until `child` exited (reaped), or the deadline.
fn wait_child(child: &mut Child, deadline: Instant) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        match child.try_wait() {
            Ok(Some(_)) | Err(_) => return true,
            Ok(None) if Instant::now() >= deadline => return false,
            Ok(None) => {}
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Until no process of the group `pgid` is left, or the deadline.
pub fn wait_group_gone(pgid: libc::pid_t, deadline: Instant) -> bool {
    let mut pause = Duration::from_millis(1);
    loop {
        if !group_alive(pgid) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(20));
    }
}

/// Whether any process of the group `pgid` still exists.
pub fn group_alive(pgid: libc::pid_t) -> bool {
    // SAFETY: signal 0 only checks that some member of the group exists.
    unsafe { libc::kill(-pgid, 0) == 0 }
}

/// The engine the end-to-end suites run on: `MAOS_TEST_DATABASE=postgres` in the test's
/// environment runs every daemon an [`Env`](crate::Env) starts in fleet mode, on one throwaway
/// server this test process starts on first use (its `postgres` database; each test's projects
/// have their own keys, so tests never see each other's rows). Unset (or `sqlite`): SQLite.
/// Returns the URL the daemons get as `MAOS_DATABASE_URL`; a server that cannot start fails
/// the test that asked for it.
pub fn test_database_url() -> Option<&'static str> {
    match std::env::var("MAOS_TEST_DATABASE").as_deref() {
        Ok("postgres") => {}
        Ok("") | Ok("sqlite") | Err(_) => return None,
        Ok(other) => panic!("MAOS_TEST_DATABASE={other:?}: expected sqlite or postgres"),
    }
    static URL: OnceLock<Result<String, String>> = OnceLock::new();
    match URL.get_or_init(start_shared) {
        Ok(url) => Some(url.as_str()),
        Err(e) => panic!("MAOS_TEST_DATABASE=postgres, but {e}"),
    }
}

/// The shared server: started on a thread of its own that lives as long as the process (the
/// server's parent-death signal follows the thread that started it), stopped and removed when
/// the process exits (`atexit`), or, should it be killed, by its parent-death signal and the
/// next run's sweep of stale directories.
fn start_shared() -> Result<String, String> {
    // A server of one's own (to watch its statements while a benchmark runs, say): used as
    // it is, never started or stopped here.
    if let Ok(url) = std::env::var("MAOS_TEST_DATABASE_URL")
        && !url.is_empty()
    {
        return Ok(url);
    }
    static SHARED: Mutex<Option<Postgres>> = Mutex::new(None);
    extern "C" fn stop_shared() {
        if let Ok(mut pg) = SHARED.lock() {
            drop(pg.take());
        }
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::Builder::new()
        .name("shared-postgres".into())
        .spawn(move || {
            let started = Postgres::start().map(|pg| {
                let url = pg.url();
                if let Ok(mut slot) = SHARED.lock() {
                    *slot = Some(pg);
                }
                url
            });
            let ok = started.is_ok();
            let _ = tx.send(started);
            if ok {
                loop {
                    std::thread::park();
                }
            }
        })
        .map_err(|e| format!("cannot start the shared PostgreSQL's thread: {e}"))?;
    let url = rx
        .recv()
        .map_err(|_| "the shared PostgreSQL's thread ended".to_string())??;
    // SAFETY: registers a plain function without arguments to run at exit.
    unsafe { libc::atexit(stop_shared) };
    Ok(url)
}
