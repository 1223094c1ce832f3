//! `maosd`: the maos daemon. One per user; the `maos` client starts it on demand.

// The floors, bottom up: each imports only the floors listed before it.
/// Leaves: errors, version, the log, lock paths, lanes, configuration, hook calls.
mod base;

/// Processes: their facts, their effects, plan checks, the supervisor.
mod proc;

/// The conflict radar, on its own thread per project.
mod radar;

/// The transaction: live state, the lock table's changes, kept versions.
mod txn;

/// Operations: every change to sessions, agents, phases, locks and processes.
mod ops;

/// Request handlers.
mod cmd;

/// The project: a request's route, the actor, the registry, its files, charts, reads, retention.
mod project;

/// The edge: the daemon's shared state across projects, connections, the server.
mod edge;

use base::{config, logfile};
use edge::{activation, server};
use proc::supervise;

use std::process::ExitCode;

use clap::Parser;
use tracing_subscriber::EnvFilter;

/// The maos daemon: keeps every project's sessions, agents, phases, locks and timeline.
#[derive(Parser, Debug)]
#[command(name = "maosd", version, about)]
struct Args {
    /// Log to stderr instead of `$MAOS_HOME/logs/maosd.log`.
    #[arg(long)]
    foreground: bool,
    /// Commit durability: `normal` survives any crash of the daemon, `full` also power loss.
    #[arg(long, value_name = "normal|full")]
    synchronous: Option<String>,
    /// Exit after this long idle (no connection, no running agent), e.g. `30m`; only when a
    /// service manager holds the socket and starts maosd again on the next connection.
    /// Also `idle_exit` in config.toml.
    #[arg(long, value_name = "DURATION")]
    idle_exit: Option<String>,
    /// Set by the `maos` client that starts the daemon on demand: such a daemon may be replaced
    /// by a newer client when its protocol is older.
    #[arg(long, hide = true)]
    autostarted: bool,
}

fn init_logging(foreground: bool, config: &config::Config) -> Result<(), String> {
    let mut filter = EnvFilter::try_from_env("MAOS_LOG")
        .or_else(|_| EnvFilter::try_new("info"))
        .map_err(|e| format!("bad MAOS_LOG filter: {e}"))?;
    // The shell parser logs every token at debug: quiet unless MAOS_LOG names it.
    if !std::env::var("MAOS_LOG").is_ok_and(|v| v.contains("brush")) {
        let quiet = "brush_parser=warn"
            .parse()
            .map_err(|e| format!("the shell parser's log filter: {e}"))?;
        filter = filter.add_directive(quiet);
    }
    let builder = tracing_subscriber::fmt().with_env_filter(filter);
    if foreground {
        builder.with_writer(std::io::stderr).init();
        return Ok(());
    }
    let dir = config.home.join("logs");
    maos_proto::paths::private_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let path = dir.join("maosd.log");
    let log = logfile::LogFile::open(&path, config.log_max_bytes, config.log_keep)
        .map_err(|e| format!("{}: {e}", path.display()))?;
    builder.with_ansi(false).with_writer(log).init();
    Ok(())
}

/// glibc's allocator, set for a daemon whose allocations come in bursts (a recovery at start,
/// a large commit) from a few threads: SQLite allocates on sqlx's worker threads (loads,
/// reads) and on tokio's blocking pool (large commits; small ones run on the runtime thread,
/// `maos_store`'s `sqlite_write.rs`), and each thread's own arena grows page by page, with an
/// `mprotect` each time, and gives memory back as soon as it is free. With one arena, grown
/// 8 MiB ahead and trimmed only past 32 MiB free (compared through `GLIBC_TUNABLES` on
/// `maos-bench startup`), recovery's commit took 37 ms instead of 51–62 and a restart without
/// recovery 66 ms instead of 87. The threads hardly contend: the runtime is single-threaded
/// and SQLite runs one statement at a time per connection.
fn tune_malloc() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        const MIB: libc::c_int = 1024 * 1024;
        // SAFETY: mallopt only sets allocator parameters; it runs before any other thread.
        // A parameter it refuses (returns 0) leaves glibc's default, which is only slower.
        unsafe {
            libc::mallopt(libc::M_ARENA_MAX, 1);
            libc::mallopt(libc::M_TOP_PAD, 8 * MIB);
            libc::mallopt(libc::M_TRIM_THRESHOLD, 32 * MIB);
        }
    }
}

fn main() -> ExitCode {
    // `maosd supervise ...` runs one managed agent: plain std, no runtime, no daemon set-up.
    if std::env::args_os().nth(1).as_deref() == Some(std::ffi::OsStr::new("supervise")) {
        return supervise::main(std::env::args_os().skip(2).collect());
    }
    let args = Args::parse();
    tune_malloc();
    let mut config = match config::Config::load(args.synchronous, args.idle_exit) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("maosd: {e}");
            return ExitCode::from(2);
        }
    };
    if args.autostarted {
        config.started_by = maos_proto::StartedBy::Client;
    }
    // Before any thread starts: it edits the environment.
    let activated = match activation::take() {
        Ok(a) => a,
        Err(e) => {
            eprintln!("maosd: {e}");
            return ExitCode::FAILURE;
        }
    };
    if let Some(a) = &activated {
        config.started_by = a.by;
        config.socket = a.path.clone();
    }
    // Its home and, unless a service manager owns it, its socket's directory: both problems
    // at once.
    let socket_dir = config
        .socket
        .parent()
        .filter(|_| activated.is_none())
        .map(std::path::Path::to_path_buf);
    let dirs: Vec<&std::path::Path> = std::iter::once(config.home.as_path())
        .chain(socket_dir.as_deref())
        .collect();
    if let Err(e) = maos_proto::paths::ensure_private_dirs(&dirs) {
        eprintln!("maosd: {e}");
        return ExitCode::FAILURE;
    }
    if let Err(e) = init_logging(args.foreground, &config) {
        eprintln!("maosd: {e}");
        return ExitCode::FAILURE;
    }
    // One thread: the project actors are single-threaded by design, and a request that hops
    // between threads (connection task → actor → back) pays a cross-CPU wake-up each way,
    // which costs more than the work itself. A small SQLite commit runs on this thread too, a
    // large one on tokio's blocking pool, loads and reads on sqlx's worker threads. In a
    // fleet the PostgreSQL round trips run on the runtime itself, inside the project's turn:
    // two threads there, so that an actor whose answer came is not queued behind every
    // connection's reply.
    let rt = match config.database_url {
        None => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Some(_) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build(),
    };
    let rt = match rt {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("maosd: cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    match rt.block_on(server::run(config, activated)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!(error = %e, "maosd cannot start");
            eprintln!("maosd: {e}");
            ExitCode::FAILURE
        }
    }
}
