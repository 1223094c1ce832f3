//! `maos-mcp` (run as `maos mcp`): maos as an MCP server over stdio. Agent CLIs (Claude Code,
//! Codex, Gemini CLI, ...) start it and call its tools: who holds which file, take and release
//! enforced locks with fencing tokens, report progress and decisions, read the briefing. It is
//! a thin bridge to `maosd` over the daemon's socket (starting it like every command); every
//! call is attributed to the agent that made it (`maos_core::mcp`). It ends when its stdin
//! closes. Kept out of the `maos` binary, which every hook call starts.

mod args;
mod daemon;
mod eof;
mod server;

use std::path::PathBuf;
use std::process::ExitCode;

use rmcp::ServiceExt;

const HELP: &str = "maos mcp: maos's locks, progress, notes and briefing as MCP tools (stdio).

Usage: maos mcp [--project DIR]

An agent CLI starts it (`maos install-hooks` registers it); it speaks MCP on stdin/stdout and
ends when stdin closes. Tools: status, who, locks, lock_acquire, lock_renew, lock_release,
lock_check, progress, note, brief, events. Resources: maos://brief, maos://locks.

The project is --project, else MAOS_PROJECT, else the one around the current directory, else
that directory. Calls are made for the agent the CLI's hook recorded, else MAOS_AGENT_ID, else
the CLI window's main agent.";

/// The project: named, else the one around the working directory, else that directory (as a
/// hook call there would make it one); never `$HOME` or `/` by themselves.
fn project(named: Option<PathBuf>) -> Option<String> {
    use maos_proto::paths;
    if let Some(dir) = named.or_else(|| std::env::var_os("MAOS_PROJECT").map(PathBuf::from)) {
        return Some(paths::project_root(&dir).to_string_lossy().into_owned());
    }
    let cwd = std::env::current_dir().ok()?;
    if let Some(root) = paths::find_project(&cwd) {
        return Some(root.to_string_lossy().into_owned());
    }
    let cwd = std::fs::canonicalize(&cwd).unwrap_or(cwd);
    let home = paths::canonical_home();
    (!paths::never_implicit(&cwd, home.as_deref())).then(|| cwd.to_string_lossy().into_owned())
}

fn main() -> ExitCode {
    // Its idle connections are kept for the next tool call: in the long-lived lane.
    maos_client::client::set_kind(maos_proto::ClientKind::Mcp);
    let mut args = std::env::args_os().skip(1);
    let mut named = None;
    while let Some(a) = args.next() {
        match a.to_str() {
            Some("-h" | "--help") => {
                println!("{HELP}");
                return ExitCode::SUCCESS;
            }
            Some("-V" | "--version") => {
                println!("maos-mcp {}", env!("CARGO_PKG_VERSION"));
                return ExitCode::SUCCESS;
            }
            Some("--project") => match args.next() {
                Some(dir) => named = Some(PathBuf::from(dir)),
                None => {
                    eprintln!("maos mcp: --project needs a directory");
                    return ExitCode::from(2);
                }
            },
            _ => {
                eprintln!(
                    "maos mcp: unknown argument {:?}; `maos mcp --help` lists them",
                    a.to_string_lossy()
                );
                return ExitCode::from(2);
            }
        }
    }
    // The CLI that runs this server (its window, to maos); what it did not pass on of maos's
    // variables (Codex passes few) is taken from its own environment, before any thread.
    let window = maos_client::process::cli_process();
    maos_client::process::recover_env(window);
    let agent_env = std::env::var("MAOS_AGENT_ID")
        .ok()
        .filter(|v| !v.is_empty());
    let gone = tokio_util::sync::CancellationToken::new();
    let maos = server::Maos::new(
        daemon::Daemon::new(project(named)),
        window,
        agent_env,
        gone.clone(),
    );
    let runtime = match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("maos mcp: cannot start: {e}");
            return ExitCode::from(1);
        }
    };
    let code = runtime.block_on(async {
        let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
        let stdin = eof::Watched::new(stdin, gone);
        let service = match maos.serve((stdin, stdout)).await {
            Ok(s) => s,
            Err(e) => {
                eprintln!("maos mcp: the MCP handshake failed: {e}");
                return ExitCode::from(1);
            }
        };
        // Until the client closes stdin (or says it is done).
        let _ = service.waiting().await;
        ExitCode::SUCCESS
    });
    // A daemon exchange still on the blocking pool (a lock wait) is not waited for.
    runtime.shutdown_background();
    code
}
