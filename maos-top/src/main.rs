//! `maos top` (this binary, `maos-top`): a live full-screen view of a project's sessions and
//! agents, or of every project the daemon has open. It follows the daemon's event stream and
//! asks for the sessions again only when an event came, so an idle view costs the daemon
//! nothing; it redraws each second for the ages. A binary of its own so that the `maos` every
//! hook call starts stays small.
//!
//! Exit codes: 0 quit; 2 bad command line; 3 the daemon could not be reached or started;
//! 1 the terminal could not be used.

mod app;
mod feed;
mod model;
mod view;

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use clap::Parser;
use maos_client::client::Client;
use maos_proto::{Reply, Request};

/// maos top: live sessions, agents, locks, denials and deadlocks, with keys to steer them.
#[derive(Parser, Debug)]
#[command(
    name = "maos top",
    bin_name = "maos top",
    version,
    about = "A live full-screen view of maos's sessions and agents: what each agent does now, the locks it holds and waits for, denials and deadlocks as they happen. Keys: ↑↓ select, p pause, r resume, c cancel (each asks first), / filter, e events, a finished sessions too, ? help, q quit.",
    after_help = "Times are UTC. The view follows the daemon's event stream; when the daemon goes away it says so and reconnects once it is back."
)]
struct Args {
    /// The project to watch (default: the git repository's main worktree around the current
    /// directory, else the nearest directory holding `.maos/`).
    #[arg(long, env = "MAOS_PROJECT", value_name = "DIR")]
    project: Option<PathBuf>,
    /// Every project the daemon has open, not just this one.
    #[arg(long)]
    all_projects: bool,
    /// Finished sessions too (the `a` key toggles it).
    #[arg(long)]
    all: bool,
}

fn fail(code: u8, message: impl std::fmt::Display) -> ExitCode {
    eprintln!("maos top: {message}");
    ExitCode::from(code)
}

fn main() -> ExitCode {
    let args = Args::parse();
    // A view that stays open: its connections are followers', never closed as idle.
    maos_client::client::set_kind(maos_proto::ClientKind::Follow);
    let root = match &args.project {
        Some(p) if !p.is_dir() => {
            return fail(
                2,
                format!("project directory {} does not exist", p.display()),
            );
        }
        Some(p) => maos_proto::paths::project_root(p),
        None => match std::env::current_dir() {
            Ok(d) => maos_proto::paths::project_root(&d),
            Err(e) => return fail(2, format!("cannot read the current directory: {e}")),
        },
    };
    let root = root.to_string_lossy().into_owned();
    if !std::io::IsTerminal::is_terminal(&std::io::stdout()) {
        return fail(
            1,
            "needs a terminal (for a snapshot into a pipe or a file, use `maos ps`)",
        );
    }
    // Like every command, the first connection starts the daemon when none runs; after that
    // the view only ever reconnects.
    let mut first = match Client::connect(true) {
        Ok(c) => c,
        Err(e) => return fail(3, e.body().message),
    };
    let roots = if args.all_projects {
        match first.request(None, Request::DaemonStatus) {
            Ok(Reply::Daemon(d)) => {
                let mut roots: Vec<String> = d.projects.into_iter().map(|p| p.root).collect();
                if !roots.contains(&root) {
                    roots.insert(0, root);
                }
                roots
            }
            Ok(_) => vec![root],
            Err(e) => return fail(3, e.body().message),
        }
    } else {
        vec![root]
    };
    drop(first);
    let client = match Client::connect(false) {
        Ok(c) => c,
        Err(e) => return fail(3, e.body().message),
    };
    let mut app = app::App::new(roots, args.all, client);
    let (tx, rx) = mpsc::channel();
    let resume_at = app.load_recent();
    for (p, after) in resume_at.into_iter().enumerate() {
        feed::events(p, app.projects[p].root.clone(), after, tx.clone());
    }
    let mut terminal = ratatui::init();
    feed::terminal(tx);
    let result = run(&mut terminal, &mut app, &rx);
    ratatui::restore();
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => fail(1, format!("cannot draw on the terminal: {e}")),
    }
}

/// Draw, wait for news (or the next second), take all of it in, ask for what changed, draw.
/// Sessions are asked for at most every [`MIN_REFRESH`]: under a storm of events the view
/// takes them in batches instead of asking the daemon once per event.
fn run(
    terminal: &mut ratatui::DefaultTerminal,
    app: &mut app::App,
    rx: &mpsc::Receiver<feed::Msg>,
) -> std::io::Result<()> {
    let mut next_tick = Instant::now();
    let mut refreshed = Instant::now() - MIN_REFRESH;
    let mut trace = Trace::from_env();
    loop {
        let now = Instant::now();
        let refresh_at = refreshed + MIN_REFRESH;
        if app.needs_refresh() && refresh_at <= now {
            app.refresh();
            refreshed = now;
        }
        terminal.draw(|f| view::draw(f, app))?;
        trace.drew(app);
        if app.quit {
            return Ok(());
        }
        let now = Instant::now();
        if next_tick <= now {
            next_tick = now + Duration::from_secs(1);
        }
        let wake = if app.needs_refresh() {
            next_tick.min(refresh_at.max(now))
        } else {
            next_tick
        };
        match rx.recv_timeout(wake.saturating_duration_since(now)) {
            Ok(msg) => {
                app.handle(msg);
                while let Ok(msg) = rx.try_recv() {
                    app.handle(msg);
                }
            }
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => return Ok(()),
        }
    }
}

/// The least time between two requests for the sessions (a redraw still follows each event).
const MIN_REFRESH: Duration = Duration::from_millis(40);

/// `MAOS_TOP_TRACE=FILE`: after each frame, one line `UNIX_MICROS LAST_SEQ` (the newest event
/// the frame shows): how `maos-bench top` measures the time from an event to the screen.
struct Trace(Option<std::fs::File>);

impl Trace {
    fn from_env() -> Trace {
        Trace(std::env::var_os("MAOS_TOP_TRACE").and_then(|p| std::fs::File::create(p).ok()))
    }

    fn drew(&mut self, app: &app::App) {
        use std::io::Write;
        let Some(f) = &mut self.0 else { return };
        let seq = app
            .projects
            .iter()
            .filter_map(|p| p.recent.back().map(|e| e.seq))
            .max()
            .unwrap_or(0);
        let us = chrono::Utc::now().timestamp_micros();
        let _ = writeln!(f, "{us} {seq}");
    }
}
