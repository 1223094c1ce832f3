//! Socket activation: the listening socket handed over by a service manager. systemd (and
//! `systemd-socket-activate`) pass it as fd 3 with `LISTEN_FDS`/`LISTEN_PID`; launchd hands it
//! out through `launch_activate_socket` under the name of the plist's `Sockets` entry. The
//! service manager owns such a socket: maosd never binds, chmods or unlinks it, and a daemon
//! that exits leaves it listening, so connections made meanwhile wait in its backlog.

use std::io;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;

use maos_proto::StartedBy;

/// A listening socket received from the service manager.
pub struct Activated {
    pub listener: UnixListener,
    pub by: StartedBy,
    /// Where it listens (the daemon tells its supervisors and `maos daemon status`).
    pub path: PathBuf,
    /// Sockets handed over beyond the first, which maosd does not use.
    pub ignored: usize,
}

#[derive(Debug, thiserror::Error)]
pub enum ActivationError {
    #[error("the socket handed over by {manager} is not usable as maosd's socket: {source}")]
    Unusable {
        manager: &'static str,
        #[source]
        source: io::Error,
    },
    #[error(
        "the socket handed over by {0} has no file path (maosd listens on a unix socket file; \
         set ListenStream= or SockPathName to a path)"
    )]
    NoPath(&'static str),
}

/// Take the socket the service manager handed over, if any. Call it before any thread starts:
/// it removes `LISTEN_FDS` and `LISTEN_PID` from the environment, so that the agents maosd
/// starts do not inherit them.
pub fn take() -> Result<Option<Activated>, ActivationError> {
    #[cfg(target_os = "macos")]
    if let Some(fds) = launchd::sockets().map_err(|source| ActivationError::Unusable {
        manager: "launchd",
        source,
    })? {
        return activated(fds, StartedBy::Launchd);
    }
    let mut fds = listenfd::ListenFd::from_env();
    if fds.len() == 0 {
        return Ok(None);
    }
    let unusable = |source| ActivationError::Unusable {
        manager: "systemd",
        source,
    };
    let listener = fds
        .take_unix_listener(0)
        .map_err(unusable)?
        .ok_or_else(|| unusable(io::Error::other("LISTEN_FDS names no socket")))?;
    let ignored = fds.len().saturating_sub(1);
    finish(listener, StartedBy::Systemd, ignored)
}

fn finish(
    listener: UnixListener,
    by: StartedBy,
    ignored: usize,
) -> Result<Option<Activated>, ActivationError> {
    let manager = by.as_str();
    let path = listener
        .local_addr()
        .map_err(|source| ActivationError::Unusable { manager, source })?
        .as_pathname()
        .map(PathBuf::from)
        .ok_or(ActivationError::NoPath(manager))?;
    listener
        .set_nonblocking(true)
        .map_err(|source| ActivationError::Unusable { manager, source })?;
    Ok(Some(Activated {
        listener,
        by,
        path,
        ignored,
    }))
}

#[cfg(target_os = "macos")]
fn activated(
    fds: Vec<std::os::fd::OwnedFd>,
    by: StartedBy,
) -> Result<Option<Activated>, ActivationError> {
    let mut fds = fds.into_iter();
    let Some(first) = fds.next() else {
        return Ok(None);
    };
    // The others close when dropped.
    let ignored = fds.len();
    finish(UnixListener::from(first), by, ignored)
}

#[cfg(target_os = "macos")]
mod launchd {
    use std::io;
    use std::os::fd::{FromRawFd, OwnedFd};

    unsafe extern "C" {
        /// <launch.h>: the descriptors of the named `Sockets` entry of the calling job.
        fn launch_activate_socket(
            name: *const libc::c_char,
            fds: *mut *mut libc::c_int,
            cnt: *mut libc::size_t,
        ) -> libc::c_int;
    }

    /// The plist's sockets; `None` when launchd did not start this process (ESRCH) or the job
    /// has no such socket (ENOENT).
    pub fn sockets() -> io::Result<Option<Vec<OwnedFd>>> {
        let mut fds: *mut libc::c_int = std::ptr::null_mut();
        let mut cnt: libc::size_t = 0;
        // SAFETY: the name is a NUL-terminated string; launchd fills `fds` with a malloc'ed
        // array of `cnt` descriptors that we own.
        let rc = unsafe {
            launch_activate_socket(
                maos_proto::service::LAUNCHD_SOCKET_NAME.as_ptr(),
                &mut fds,
                &mut cnt,
            )
        };
        match rc {
            0 => {}
            libc::ESRCH | libc::ENOENT => return Ok(None),
            e => return Err(io::Error::from_raw_os_error(e)),
        }
        if fds.is_null() {
            return Ok(Some(Vec::new()));
        }
        // SAFETY: launchd returned `cnt` valid descriptors in `fds`, each ours to close; the
        // array itself is freed once copied.
        let owned = unsafe {
            let list = std::slice::from_raw_parts(fds, cnt)
                .iter()
                .map(|&fd| OwnedFd::from_raw_fd(fd))
                .collect();
            libc::free(fds.cast());
            list
        };
        Ok(Some(owned))
    }
}
