//! A `maosd` the harness starts itself, directly (not through a client's auto-start), on an
//! [`Env`]'s home and socket: started and waited for until it answers, stopped with
//! `daemon_stop`, killed -9 and started again, read from `/proc`. Every call returns its
//! failure as a sentence, so that a load tool can report it; dropping the daemon kills it, and
//! the `Env` it owns then kills whatever else still runs for its home.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, ExitStatus, Stdio};
use std::time::{Duration, Instant};

use maos_proto::Request;

use crate::client::{Client, Res};
use crate::procfs;
use crate::{ChildGuard, Env};

/// How long a started daemon may take to answer.
const READY_WITHIN: Duration = Duration::from_secs(10);
/// How long a daemon asked to stop may take to exit.
const STOP_WITHIN: Duration = Duration::from_secs(20);

pub struct Daemon {
    /// The world it serves; its temporary directory goes when the daemon is dropped.
    pub env: Env,
    /// The project root of `env.project` as the client computes it (what requests carry).
    pub root: String,
    bin: PathBuf,
    args: Vec<String>,
    /// Killed and reaped when dropped.
    child: Option<ChildGuard>,
    pid: u32,
}

impl Daemon {
    /// Start `bin` (a `maosd`) with `args` on `env`'s home and socket, and wait until it
    /// answers a handshake.
    pub fn start(env: Env, bin: &Path, args: &[&str]) -> Res<Daemon> {
        if env.socket.as_os_str().len() > 100 {
            return Err(format!(
                "socket path {} is too long for a Unix socket; set TMPDIR to a shorter directory",
                env.socket.display()
            ));
        }
        let mut d = Daemon {
            root: Env::project_root(&env.project),
            env,
            bin: bin.to_path_buf(),
            args: args.iter().map(|a| a.to_string()).collect(),
            child: None,
            pid: 0,
        };
        d.spawn()?;
        d.wait_ready()?;
        Ok(d)
    }

    /// Where the daemon's stderr goes (appended, across restarts).
    pub fn stderr_path(&self) -> PathBuf {
        self.env.root().join("maosd.stderr")
    }

    /// Start the daemon (again, after [`Daemon::kill9`]) without waiting for it to answer.
    pub fn spawn(&mut self) -> Res {
        let log = self.stderr_path();
        let stderr = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log)
            .map_err(|e| format!("{}: {e}", log.display()))?;
        let mut cmd = self.env.command(&self.bin);
        {
            use std::os::unix::process::CommandExt;
            // SAFETY: prctl is async-signal-safe. The daemon gets SIGTERM when the process that
            // started it dies (Ctrl-C included), so an interrupted run leaves no daemon behind.
            unsafe {
                cmd.pre_exec(|| {
                    libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM);
                    Ok(())
                });
            }
        }
        let child = cmd
            .args(&self.args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", self.bin.display()))?;
        self.pid = child.id();
        self.child = Some(ChildGuard(child));
        Ok(())
    }

    /// The daemon's exit status if it has exited (it is then reaped and forgotten).
    pub fn exited(&mut self) -> Option<ExitStatus> {
        let status = self.child.as_mut()?.0.try_wait().ok()??;
        self.child = None;
        Some(status)
    }

    /// Wait (up to 10 s) until the daemon answers a handshake; an error if it exits first.
    pub fn wait_ready(&mut self) -> Res {
        let deadline = Instant::now() + READY_WITHIN;
        loop {
            if self.client().is_ok() {
                return Ok(());
            }
            if let Some(status) = self.exited() {
                let err = fs::read_to_string(self.stderr_path()).unwrap_or_default();
                return Err(format!("maosd exited at start ({status}): {}", err.trim()));
            }
            if Instant::now() > deadline {
                return Err(format!(
                    "maosd did not answer on {} within {READY_WITHIN:?}",
                    self.env.socket.display()
                ));
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    pub fn pid(&self) -> u32 {
        self.pid
    }

    /// A new connection to the daemon, for requests in the default project.
    pub fn client(&self) -> Res<Client> {
        Client::connect(&self.env.socket, &self.root)
    }

    /// `bin` (a client, or any program) pointed at this daemon, never starting one of its own,
    /// with no output.
    pub fn client_command(&self, bin: &Path) -> Command {
        let mut c = self.env.command(bin);
        c.env("MAOS_NO_AUTOSTART", "1")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        c
    }

    /// `Request::DaemonStop`, then wait for the process to exit (killed if it does not).
    pub fn stop(&mut self) -> Res {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        let asked = self
            .client()
            .and_then(|mut c| c.call_daemon(Request::DaemonStop).map(drop));
        match reap_within(&mut child.0, STOP_WITHIN) {
            Some(status) if status.success() => Ok(()),
            Some(status) => Err(format!("maosd exited with {status}")),
            None => Err(format!(
                "maosd did not stop within {STOP_WITHIN:?} after daemon_stop ({asked:?}); killed it"
            )),
        }
    }

    /// SIGKILL the daemon (a crash: nothing is flushed or closed) and reap it.
    pub fn kill9(&mut self) -> Res {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        child
            .0
            .kill()
            .map_err(|e| format!("cannot kill maosd {}: {e}", self.pid))?;
        child
            .0
            .wait()
            .map_err(|e| format!("cannot reap maosd {}: {e}", self.pid))?;
        Ok(())
    }

    /// (VmRSS, VmHWM) of the daemon in KiB.
    pub fn memory_kib(&self) -> Res<(u64, u64)> {
        procfs::memory_kib(self.pid)
    }

    /// User + system CPU time of the daemon so far, in seconds.
    pub fn cpu_secs(&self) -> f64 {
        procfs::cpu_secs(&self.pid.to_string())
    }

    /// Size of a file in the default project's directory under the daemon's home (0 if absent).
    pub fn project_file_bytes(&self, name: &str) -> u64 {
        fs::metadata(self.env.db_path().with_file_name(name)).map_or(0, |m| m.len())
    }
}

/// Wait up to `within` for `child` to exit: its exit status, or `None` when it still ran and was
/// killed (and reaped).
pub fn reap_within(child: &mut Child, within: Duration) -> Option<ExitStatus> {
    let deadline = Instant::now() + within;
    loop {
        match child.try_wait() {
            Ok(Some(status)) => return Some(status),
            Ok(None) if Instant::now() < deadline => std::thread::sleep(Duration::from_millis(1)),
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                return None;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use maos_proto::Reply;

    #[test]
    fn starts_answers_survives_a_crash_and_stops() {
        let env = Env::try_new("maos-daemon-test-").expect("env");
        let mut d = Daemon::start(env, &crate::maosd_bin(), &["--synchronous", "normal"])
            .expect("maosd starts");
        let first = d.pid();
        assert!(crate::alive(first));
        let reply = d
            .client()
            .and_then(|mut c| c.call(Request::Ps(maos_proto::req::Ps { all: true })));
        assert!(
            matches!(reply, Ok(Reply::Ps(ref l)) if l.is_empty()),
            "{reply:?}"
        );

        d.kill9().expect("kill -9");
        assert!(!crate::alive(first), "the killed daemon still runs");
        assert!(d.client().is_err(), "a killed daemon answered");
        d.spawn().expect("spawn again");
        d.wait_ready().expect("the new daemon answers");
        assert_ne!(d.pid(), first);

        let second = d.pid();
        d.stop().expect("daemon_stop ends it with success");
        assert!(!crate::alive(second));
        assert!(d.exited().is_none(), "a stopped daemon is forgotten");
    }
}
