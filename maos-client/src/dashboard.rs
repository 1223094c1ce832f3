//! `maos dashboard`: find the running dashboard (`$MAOS_HOME/dashboard.json` names a live
//! process listening on its port) or start `maos-dash` detached, then print its URL (and open
//! it in `$BROWSER` when that is set); `--stop` stops it. The daemon is started too, like by
//! every command: the dashboard itself never starts one.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use maos_proto::dashboard::{self, Running};
use maos_proto::paths;
use maos_proto::{ErrorBody, ErrorCode};

use crate::client::{self, Client};
use crate::failure::{Failure, Res};

/// How long a new dashboard may take to listen.
const START_WITHIN: Duration = Duration::from_secs(10);

fn failure(message: String) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::Unavailable, message),
        exit: 3,
    }
}

/// The dashboard the file names, if its process lives and listens.
fn running(home: &Path) -> Option<Running> {
    let text = std::fs::read_to_string(dashboard::file(home)).ok()?;
    let r: Running = serde_json::from_str(&text).ok()?;
    let listens = std::net::TcpStream::connect_timeout(
        &std::net::SocketAddr::from(([127, 0, 0, 1], r.port)),
        Duration::from_millis(500),
    )
    .is_ok();
    (!client::exited(r.pid) && listens).then_some(r)
}

pub fn run(stop: bool, json: bool) -> Res {
    let home = paths::home_dir().map_err(|e| failure(e.to_string()))?;
    if stop {
        return stop_it(&home, json);
    }
    let now = running(&home);
    // A dashboard that cannot start starts no daemon either.
    let bin = match now {
        Some(_) => None,
        None => Some(
            crate::sibling::find("maos-dash")
                .ok_or_else(|| crate::sibling::missing("maos-dash"))?,
        ),
    };
    // The page shows what the daemon knows: make sure one runs.
    drop(Client::connect(true)?);
    let (r, started) = match (now, bin) {
        (Some(r), _) => (r, false),
        (None, Some(bin)) => (start(&home, &bin)?, true),
        (None, None) => return Err(crate::sibling::missing("maos-dash")),
    };
    let url = r.url();
    if json {
        outln!(
            "{}",
            serde_json::json!({ "url": url, "pid": r.pid, "port": r.port, "started": started })
        );
    } else {
        let how = if started { "started" } else { "running" };
        outln!("{url}");
        eprintln!(
            "maos: dashboard {how} (pid {}, 127.0.0.1 only); `maos dashboard --stop` stops it",
            r.pid
        );
    }
    if let Some(browser) = std::env::var_os("BROWSER").filter(|b| !b.is_empty()) {
        let mut cmd = Command::new(&browser);
        cmd.arg(&url)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        client::detach(&mut cmd);
        if let Err(e) = cmd.spawn() {
            eprintln!(
                "maos: cannot open $BROWSER ({}): {e}",
                browser.to_string_lossy()
            );
        }
    }
    Ok(())
}

/// Start `maos-dash` detached, its output to `$MAOS_HOME/logs/dashboard.log`, and wait until
/// it has published where it listens.
fn start(home: &Path, bin: &Path) -> Res<Running> {
    let logs = home.join("logs");
    paths::private_dir_all(&logs).map_err(|e| failure(format!("{}: {e}", logs.display())))?;
    let log_path = logs.join("dashboard.log");
    let log = paths::private_file(&log_path)
        .map_err(|e| failure(format!("{}: {e}", log_path.display())))?;
    let err = log
        .try_clone()
        .map_err(|e| failure(format!("{}: {e}", log_path.display())))?;
    let mut cmd = Command::new(bin);
    cmd.stdin(Stdio::null()).stdout(log).stderr(err);
    client::detach(&mut cmd);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => crate::sibling::missing("maos-dash"),
        _ => failure(format!("cannot start {}: {e}", bin.display())),
    })?;
    let deadline = Instant::now() + START_WITHIN;
    while Instant::now() < deadline {
        if let Some(r) = running(home).filter(|r| r.pid == child.id()) {
            return Ok(r);
        }
        if let Ok(Some(status)) = child.try_wait() {
            let last = client::last_line(&log_path);
            return Err(failure(format!(
                "maos-dash exited at start ({status}): {last}"
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    Err(failure(format!(
        "maos-dash did not start listening within {}s; see {}",
        START_WITHIN.as_secs(),
        log_path.display()
    )))
}

fn stop_it(home: &Path, json: bool) -> Res {
    let Some(r) = running(home) else {
        let _ = std::fs::remove_file(dashboard::file(home));
        if json {
            outln!("{}", serde_json::json!({ "stopped": null }));
        } else {
            outln!("no dashboard is running");
        }
        return Ok(());
    };
    client::terminate(r.pid).map_err(|e| failure(format!("cannot stop pid {}: {e}", r.pid)))?;
    let deadline = Instant::now() + START_WITHIN;
    while !client::exited(r.pid) {
        if Instant::now() > deadline {
            return Err(failure(format!(
                "the dashboard (pid {}) did not stop",
                r.pid
            )));
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    if json {
        outln!("{}", serde_json::json!({ "stopped": r.pid }));
    } else {
        outln!("dashboard (pid {}) stopped", r.pid);
    }
    Ok(())
}
