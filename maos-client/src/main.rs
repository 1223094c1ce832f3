//! `maos`: the thin client and CLI of maos. Synchronous std I/O only.
//!
//! Exit codes: 0 success; 1 the daemon refused the request (the message and, with `--json`,
//! the error code say why); 2 bad command line; 3 the daemon could not be reached or started.

#[macro_use]
extern crate maos_client;

mod cli;
mod clis;
mod codex;
mod copilot;
mod cursor;
mod dashboard;
mod doctor;
mod failure;
mod gemini;
mod gitcheck;
mod githook;
mod hook;
mod install;
mod managed;
mod mcpreg;
mod opencode;
mod plancheck;
mod project;
mod radarlock;
mod request;
mod run;
mod service;
mod setup;
mod shell;
mod show;
mod sibling;
mod transfer;
mod undo;

use maos_client::client;
use std::io::Write;
use std::process::ExitCode;

use cli::{Cli, Cmd};
use maos_proto::ErrorCode;

/// Parse the command line. Help and version print as usual; a bad command line is one line on
/// stderr (and the JSON error object with `--json`), exit code 2, like every other usage error.
fn parse_cli() -> Result<Cli, ExitCode> {
    use clap::FromArgMatches;
    use clap::error::ErrorKind;
    let e = match cli::command().try_get_matches().and_then(|m| {
        let mut cli = Cli::from_arg_matches(&m)?;
        cli.project_typed =
            m.value_source("project") == Some(clap::parser::ValueSource::CommandLine);
        Ok(cli)
    }) {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)));
    }
    // clap renders several lines (message, tips, usage); fold them into one.
    let text = e.render().to_string();
    let mut parts = Vec::new();
    let mut usage = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = line.strip_prefix("Usage:") {
            usage = Some(u.trim().to_string());
        } else if !line.starts_with("For more information") {
            parts.push(
                line.strip_prefix("error:")
                    .unwrap_or(line)
                    .trim()
                    .to_string(),
            );
        }
    }
    let mut message = String::new();
    for p in parts {
        if !message.is_empty() {
            message.push_str(if message.ends_with(':') { " " } else { "; " });
        }
        message.push_str(&p);
    }
    if message.is_empty() {
        message = "bad command line".into();
    }
    message = match usage {
        Some(u) => format!("{message} (usage: {u})"),
        None => format!("{message} (see `maos --help`)"),
    };
    if std::env::args_os().any(|a| a == "--json") {
        outln!(
            "{}",
            serde_json::json!({"error": {"code": ErrorCode::BadRequest, "message": message}})
        );
    }
    eprintln!("maos: {message}");
    Err(ExitCode::from(2))
}

/// `maos ps` (with `--all` / `--json`) is what people and scripts run in loops: parse it
/// without clap, so that none of clap's code has to be paged in. Anything else goes to clap.
fn fast_path() -> Option<Cli> {
    let mut args = std::env::args_os().skip(1);
    let (mut ps, mut all, mut json) = (false, false, false);
    for a in args.by_ref() {
        match a.to_str()? {
            "ps" if !ps => ps = true,
            "--all" if ps && !all => all = true,
            "--json" if !json => json = true,
            _ => return None,
        }
    }
    let project = std::env::var_os("MAOS_PROJECT")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from);
    ps.then_some(Cli {
        version: false,
        json,
        project,
        project_typed: false,
        resolved: Default::default(),
        cmd: Cmd::Ps {
            all,
            watch: false,
            interval: String::new(),
        },
    })
}

fn main() -> ExitCode {
    // Said in every hello (the hook says `hook`, `ps --watch` says `follow`).
    client::set_kind(maos_proto::ClientKind::Cli);
    // The hook runs on every tool call of every agent: no clap, straight to work.
    if let Some(cli) = hook::fast_args(std::env::args_os().skip(1)) {
        let project = std::env::var_os("MAOS_PROJECT")
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from);
        return match cli {
            Ok(cli) => hook::run(project, cli),
            Err(e) => {
                eprintln!("maos hook: {e}; nothing was done");
                ExitCode::from(1)
            }
        };
    }
    // `maos --version`: no subcommand for clap to require; it asks the daemon, never starts it.
    if let Some(json) = shell::version_args(std::env::args_os().skip(1)) {
        return match shell::version(json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(f) => {
                eprintln!("maos: {}", f.body.message);
                ExitCode::from(f.exit)
            }
        };
    }
    let cli = match fast_path().map_or_else(parse_cli, Ok) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match run::run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        // Already reported in full (doctor's report).
        Err(f) if f.body.message.is_empty() => ExitCode::from(f.exit),
        Err(f) => {
            if cli.json {
                let v =
                    serde_json::json!({"error": {"code": f.body.code, "message": f.body.message}});
                // Failing already: a closed stdout must not turn this into a success.
                let _ = writeln!(std::io::stdout().lock(), "{v}");
            }
            // A person reads this line: short ids (the JSON error above keeps whole ones), and
            // what it quotes of a path or a text from outside made safe for a terminal.
            let line = maos_core::ids::shorten_all(&f.body.message);
            eprintln!("maos: {}", maos_core::term::safe(&line));
            ExitCode::from(f.exit)
        }
    }
}
