//! `maos-dash`, what `maos dashboard` starts: the browser view of maos, served on 127.0.0.1
//! only, by a process of its own (the hook's client stays small).
//!
//! Security: every start makes a new secret token. Every request must carry it: `?token=` in
//! the URL of a page, or the `X-Maos-Token` header; an action (anything but GET) only in the
//! header, so a link or a form on another site cannot act. The `Host` header must name this
//! server (127.0.0.1:PORT or localhost:PORT), so a DNS-rebound name reaches nothing. No CORS
//! headers are sent, so other origins cannot read answers. The token and port are written to
//! `$MAOS_HOME/dashboard.json` (0600) for `maos dashboard` to find.
//!
//! It asks the daemon through the client's blocking connection on tokio's blocking pool, and
//! never starts a daemon (`maos dashboard` does, like every command).

mod action;
mod api;
mod chart;
mod guard;
mod live;
mod radar;
mod session;

use std::io::Write;
use std::process::ExitCode;
use std::sync::Arc;

use axum::Router;
use axum::routing::get;
use clap::Parser;

/// maos dashboard's server.
#[derive(Parser, Debug)]
#[command(name = "maos-dash", version)]
struct Args {
    /// The port on 127.0.0.1 (default: any free one).
    #[arg(long, default_value_t = 0)]
    port: u16,
}

/// How long answers in flight may take once asked to stop (the event streams never end).
const STOP_GRACE: std::time::Duration = std::time::Duration::from_millis(500);

fn fail(message: impl std::fmt::Display) -> ExitCode {
    eprintln!("maos-dash: {message}");
    ExitCode::from(1)
}

/// 16 bytes from the kernel's generator, as 32 hex digits.
fn new_token() -> std::io::Result<String> {
    use std::io::Read;
    let mut bytes = [0u8; 16];
    std::fs::File::open("/dev/urandom")?.read_exact(&mut bytes)?;
    Ok(bytes.iter().map(|b| format!("{b:02x}")).collect())
}

/// Write `$MAOS_HOME/dashboard.json` whole (a temporary file renamed into place), mode 0600.
fn publish(
    home: &std::path::Path,
    running: &maos_proto::dashboard::Running,
) -> std::io::Result<()> {
    maos_proto::paths::ensure_private_dir(home).map_err(std::io::Error::other)?;
    let path = maos_proto::dashboard::file(home);
    let tmp = path.with_extension("json.tmp");
    let mut f = maos_proto::paths::private_file(&tmp)?;
    f.write_all(serde_json::to_string(running)?.as_bytes())?;
    f.sync_all()?;
    std::fs::rename(&tmp, &path)
}

fn main() -> ExitCode {
    let args = Args::parse();
    let home = match maos_proto::paths::home_dir() {
        Ok(h) => h,
        Err(e) => return fail(e),
    };
    let token = match new_token() {
        Ok(t) => t,
        Err(e) => return fail(format!("cannot read /dev/urandom for a token: {e}")),
    };
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(r) => r,
        Err(e) => return fail(format!("cannot start the runtime: {e}")),
    };
    runtime.block_on(async move {
        let listener = match tokio::net::TcpListener::bind(("127.0.0.1", args.port)).await {
            Ok(l) => l,
            Err(e) => return fail(format!("cannot listen on 127.0.0.1:{}: {e}", args.port)),
        };
        let port = match listener.local_addr() {
            Ok(a) => a.port(),
            Err(e) => return fail(e),
        };
        // The signals are ours before anyone can find this server: a `maos dashboard --stop`
        // right after the start still gets the clean stop (dashboard.json removed).
        let stop = match stop_signals() {
            Ok(s) => s,
            Err(e) => return fail(format!("cannot handle SIGTERM: {e}")),
        };
        let dash = Arc::new(guard::Dash { port, token });
        let running = maos_proto::dashboard::Running {
            pid: std::process::id(),
            port,
            token: dash.token.clone(),
        };
        if let Err(e) = publish(&home, &running) {
            return fail(format!(
                "cannot write {}: {e}",
                maos_proto::dashboard::file(&home).display()
            ));
        }
        let app = Router::new()
            .route("/", get(api::page))
            .route("/api/projects", get(api::projects))
            .route("/api/sessions", get(api::sessions))
            .route("/api/events", get(live::events))
            .route("/api/session", get(session::session))
            .route("/api/timeline", get(session::timeline))
            .route("/api/brief", get(session::brief))
            .route("/api/gantt", get(chart::gantt))
            .route("/api/radar", get(radar::radar))
            .route("/api/action", axum::routing::post(action::act))
            .fallback(api::not_found)
            .layer(axum::middleware::from_fn_with_state(
                dash.clone(),
                guard::guard,
            ))
            .with_state(dash);
        // On SIGTERM it stops taking connections and lets answers in flight finish, but an open
        // page's event stream never finishes: past a short grace the process ends anyway (it
        // used to wait for every page to close, so `maos dashboard --stop` failed and left it
        // running).
        let (said, heard) = tokio::sync::oneshot::channel::<()>();
        let shutdown = async move {
            stopped(stop).await;
            let _ = said.send(());
        };
        let serve = axum::serve(listener, app).with_graceful_shutdown(shutdown);
        let served = tokio::select! {
            served = serve.into_future() => served,
            // The grace runs while the server still serves what is in flight.
            () = async {
                if heard.await.is_ok() {
                    tokio::time::sleep(STOP_GRACE).await;
                } else {
                    std::future::pending::<()>().await;
                }
            } => Ok(()),
        };
        // Gone: say so to the next `maos dashboard`, unless another one took the file over.
        let file = maos_proto::dashboard::file(&home);
        let ours = std::fs::read_to_string(&file)
            .ok()
            .and_then(|t| serde_json::from_str::<maos_proto::dashboard::Running>(&t).ok())
            .is_some_and(|r| r.pid == std::process::id());
        if ours {
            let _ = std::fs::remove_file(&file);
        }
        match served {
            Ok(()) => ExitCode::SUCCESS,
            Err(e) => fail(e),
        }
    })
}

type Signals = (tokio::signal::unix::Signal, tokio::signal::unix::Signal);

/// SIGTERM and SIGINT, taken over from their default (which ends the process at once).
fn stop_signals() -> std::io::Result<Signals> {
    use tokio::signal::unix::{SignalKind, signal};
    Ok((
        signal(SignalKind::terminate())?,
        signal(SignalKind::interrupt())?,
    ))
}

/// SIGTERM or SIGINT.
async fn stopped((mut term, mut int): Signals) {
    tokio::select! {
        _ = term.recv() => {}
        _ = int.recv() => {}
    }
}
