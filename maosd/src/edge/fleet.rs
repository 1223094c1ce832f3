//! Who this daemon is in a fleet (DESIGN.md §10): its machine's name and an id that stays the
//! same across its restarts, so that its rows (the agents it runs, its clone's root) stay its.

use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tracing::{debug, warn};

use crate::project::{Listen, Poker};

/// Receive the fleet's notifications for the projects this daemon has open and wake their
/// actors (each then runs a batch, which starts from what PostgreSQL holds: a lock released
/// on another machine is granted to a waiter here at once). A notification from this daemon
/// itself is ignored. When the listening connection was lost (and sqlx reconnected it), every
/// project is woken: notifications may have been missed meanwhile.
pub async fn listen(
    fleet: Arc<maos_store::Fleet>,
    mut opened: mpsc::UnboundedReceiver<Listen>,
    shutdown: CancellationToken,
) {
    let me = fleet.daemon().to_string();
    let mut projects: HashMap<String, Poker> = HashMap::new();
    let mut pause = Duration::from_millis(100);
    'connect: loop {
        let mut listener = match fleet.listener().await {
            Ok(l) => l,
            Err(e) => {
                warn!(error = %e, "cannot listen to the fleet's notifications; retrying");
                tokio::select! {
                    () = tokio::time::sleep(pause) => {}
                    () = shutdown.cancelled() => return,
                }
                pause = (pause * 2).min(Duration::from_secs(10));
                continue 'connect;
            }
        };
        pause = Duration::from_millis(100);
        for channel in projects.keys() {
            if let Err(e) = listener.listen(channel).await {
                warn!(error = %e, channel, "cannot listen to a project's notifications");
            }
        }
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return,
                open = opened.recv() => {
                    let Some((channel, poker)) = open else { return };
                    if let Err(e) = listener.listen(&channel).await {
                        warn!(error = %e, channel, "cannot listen to a project's notifications");
                    }
                    projects.insert(channel, poker);
                }
                n = listener.try_recv() => match n {
                    Ok(Some(n)) if n.payload() != me => {
                        if let Some(p) = projects.get(n.channel()) {
                            p.poke();
                        }
                    }
                    Ok(Some(_)) => {}
                    Ok(None) => {
                        debug!("the fleet's notification connection was lost and made again");
                        for p in projects.values() {
                            p.poke();
                        }
                    }
                    Err(e) => {
                        warn!(error = %e, "the fleet's notifications failed; listening again");
                        for p in projects.values() {
                            p.poke();
                        }
                        continue 'connect;
                    }
                },
            }
        }
    }
}

/// How often a daemon of a fleet writes that it is alive: 30 s, or `MAOS_TEST_HEARTBEAT_MS`
/// (the end-to-end tests' override). `maos daemon status` counts a daemon silent for three of
/// these as not running.
pub fn heartbeat_every() -> Duration {
    crate::base::config::interval("MAOS_TEST_HEARTBEAT_MS", Duration::from_secs(30))
}

/// Write that this daemon is alive (its row of `daemons`) now and every [`heartbeat_every`]
/// until it stops, so that every member of the fleet can tell which daemons run. A write that
/// fails (PostgreSQL unreachable) is tried again at the next interval: meanwhile the others
/// see this daemon's silence, which is what it is.
pub async fn heartbeat(fleet: Arc<maos_store::Fleet>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(heartbeat_every());
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            _ = tick.tick() => {}
            () = shutdown.cancelled() => return,
        }
        if let Err(e) = fleet.heartbeat().await {
            debug!(error = %e, "cannot tell the fleet that this daemon is alive; trying again later");
        }
    }
}

/// This machine's host name, or `unknown-host` when the system will not say.
pub fn machine() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim().to_string()
    } else {
        String::new()
    };
    if name.is_empty() {
        "unknown-host".into()
    } else {
        name
    }
}

/// The daemon's id in the fleet: its machine and its `MAOS_HOME` (one daemon per home), as
/// `<machine>/<16 hex digits>`.
pub fn daemon_id(machine: &str, home: &Path) -> String {
    format!("{machine}/{}", maos_proto::paths::workspace_hash(home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_names_the_machine_and_differs_per_home() {
        let a = daemon_id("build-1", Path::new("/home/a/.maos"));
        let b = daemon_id("build-1", Path::new("/home/b/.maos"));
        assert!(a.starts_with("build-1/"), "{a}");
        assert_ne!(a, b);
        assert_eq!(a, daemon_id("build-1", Path::new("/home/a/.maos")));
        assert!(!machine().is_empty());
    }
}

/// The time a hook's request has in the daemon: what the hook had left when it sent the call,
/// less a margin for the answer's way back (a fifth of it, at most a second).
fn answer_within(budget_ms: u64) -> Duration {
    let budget = Duration::from_millis(budget_ms);
    let margin = (budget / 5).min(Duration::from_secs(1));
    (budget - margin).max(Duration::from_millis(1))
}

/// How long a request may take in a fleet: a hook's (it carries what is left of its
/// `MAOS_HOOK_TIMEOUT_MS`) is answered within it, naming PostgreSQL when that is what did not
/// answer, and at once while PostgreSQL is known not to answer ([`maos_store::Fleet::down`]):
/// the hook then applies its fail policy with that reason, never "did not answer in time".
/// Other requests wait as long as PostgreSQL takes.
#[derive(Clone, Copy)]
pub struct Budget<'a> {
    fleet: Option<&'a maos_store::Fleet>,
    hook: Option<(tokio::time::Instant, Duration)>,
}

impl<'a> Budget<'a> {
    /// The budget of `request`, counted from now.
    pub fn of(
        fleet: Option<&'a Arc<maos_store::Fleet>>,
        request: &crate::project::router::ProjectRequest,
    ) -> Budget<'a> {
        let hook = match request {
            crate::project::router::ProjectRequest::Hook(call) => call.budget_ms.map(answer_within),
            _ => None,
        };
        Budget {
            fleet: fleet.map(|f| &**f),
            hook: hook.map(|d| (tokio::time::Instant::now() + d, d)),
        }
    }

    /// `answer`, within the budget. A request that fails as unavailable in a fleet has the
    /// daemon find out in the background whether PostgreSQL answers.
    pub async fn bound<T, F>(self, answer: F) -> Result<T, maos_proto::ErrorBody>
    where
        F: std::future::Future<Output = Result<T, maos_proto::ErrorBody>>,
    {
        use maos_proto::{ErrorBody, ErrorCode};
        let Some(fleet) = self.fleet else {
            return answer.await;
        };
        let Some((until, within)) = self.hook else {
            let r = answer.await;
            if matches!(&r, Err(e) if e.code == ErrorCode::Unavailable) {
                fleet.check();
            }
            return r;
        };
        if let Some(why) = fleet.down() {
            return Err(ErrorBody::new(ErrorCode::Unavailable, why));
        }
        match tokio::time::timeout_at(until, answer).await {
            Ok(r) => {
                if matches!(&r, Err(e) if e.code == ErrorCode::Unavailable) {
                    fleet.check();
                }
                r
            }
            Err(_) => {
                fleet.check();
                Err(ErrorBody::new(
                    ErrorCode::Unavailable,
                    format!(
                        "the fleet's PostgreSQL at {} did not answer within {} ms (the hook's \
                         budget); nothing was changed, retry once it answers",
                        fleet.url(),
                        within.as_millis()
                    ),
                ))
            }
        }
    }
}
