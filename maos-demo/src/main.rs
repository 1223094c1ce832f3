//! `maos-demo`, what `maos demo` runs: a newcomer's tour, in a throw-away project with its own
//! daemon (its own `MAOS_HOME` and socket, so the user's real state is never touched). Part 1
//! (`hooks`) replays a Claude Code session with two subagents through real `maos hook` processes,
//! one per event, fed exactly the JSON Claude Code sends: the conflicting write is denied, `maos
//! ps` shows the spawn tree, `maos events` the timeline. Part 2 (`managed`) runs a plan of small
//! local agents under the adaptive strategy, kills the daemon with SIGKILL while two of them run,
//! lets them finish while it is down, and shows the restarted daemon's recovery and the completed
//! session. Part 3 (`cli`) drives a session with phases and agents through its life by running real
//! `maos` commands, and prints each command with its output.
//!
//! By default the parts are told as a story of three acts: each introduced by one line (what is
//! about to happen and why it matters), its steps in a few lines, its outcome stated plainly, and
//! only the commands that make the point; on a terminal it pauses briefly between steps and acts
//! so a person can read along (never in a pipe, nor with `--no-pause`). `--full` prints
//! everything: every command with its output, every hook call, the narration.
//!
//! It drives the `maos` that started it (`MAOS_CLIENT`, set by `maos demo`), else the
//! `maos` next to this binary, else the one on `PATH`.

#[macro_use]
extern crate maos_client;

mod demo;
mod hooks;
mod managed;
mod tour;

use std::process::ExitCode;

use clap::Parser;

use demo::say;

/// Show maos at work in a throw-away project and daemon: a Claude Code session replayed
/// through `maos hook`, a managed session that survives a kill -9 of its daemon, then a tour
/// of the CLI. A short story by default (paced on a terminal); `--full` shows everything.
#[derive(Parser, Debug)]
#[command(name = "maos-demo", bin_name = "maos demo", version)]
struct Args {
    /// Run one act only: `hooks` (act 1, the Claude Code replay), `managed` (act 2, a plan run
    /// by maos, its daemon killed half-way) or `cli` (act 3, the CLI tour).
    #[arg(value_parser = ["hooks", "managed", "cli"])]
    part: Option<String>,
    /// Show everything: every command with its output and every hook call (the story
    /// shows only what makes each act's point).
    #[arg(long)]
    full: bool,
    /// Do not pause between the story's steps and acts (it pauses only when its output is a
    /// terminal).
    #[arg(long, visible_alias = "fast")]
    no_pause: bool,
    /// Keep the demo's temporary directory (its database and logs) afterwards.
    #[arg(long)]
    keep: bool,
    /// Show the JSON each `maos hook` call gets and answers (implies --full).
    #[arg(long, short)]
    verbose: bool,
    /// Stop before each step (a command, a hook call) until Enter is pressed; at the end of
    /// the input, run on (implies --full).
    #[arg(long, conflicts_with = "pace")]
    step: bool,
    /// Wait this long before each step (500ms, 2s), to watch it go by (implies --full).
    #[arg(long, value_name = "DURATION")]
    pace: Option<String>,
}

/// The acts: the part that runs each, and the line that introduces it in the story (what is
/// about to happen, and why it matters).
const ACTS: [(&str, &str); 3] = [
    (
        "hooks",
        "two Claude Code subagents, one file: maos lets one write at a time, so no work is lost",
    ),
    (
        "managed",
        "maos runs a plan's agents and its daemon is killed mid-run: the work survives the crash",
    ),
    (
        "cli",
        "by hand with the maos CLI: locks, a deadlock broken at once, a pause that holds",
    ),
];

/// The parts: the Claude Code replay, the managed session that survives a kill -9 of its
/// daemon, then the CLI tour (or just one of them).
fn run(part: Option<&str>, keep: bool, verbose: bool) -> Result<(), String> {
    let parts: &[&str] = match part {
        None => &["hooks", "managed", "cli"],
        Some(p @ ("hooks" | "managed" | "cli")) => &[p],
        Some(other) => {
            return Err(format!("no demo part {other:?}: use hooks, managed or cli"));
        }
    };
    if !demo::full() {
        outln!(
            "maos demo: {}, each in a throw-away project with its own daemon (yours is untouched).",
            if parts.len() > 1 {
                "three short acts"
            } else {
                "one act"
            }
        );
        outln!(
            "{}",
            demo::paint(
                "2",
                "Everything below really runs. `maos demo --full` shows every command and hook call."
            )
        );
        outln!();
    }
    for (i, p) in parts.iter().enumerate() {
        if let Some(n) = ACTS.iter().position(|(part, _)| part == p) {
            demo::act(n + 1, ACTS.len(), ACTS[n].1);
        }
        if parts.len() > 1 && demo::full() {
            if i > 0 {
                outln!();
            }
            let what = match *p {
                "hooks" => "a Claude Code session with two subagents, through `maos hook`",
                "managed" => "maos runs a plan's agents itself, and its daemon is killed half-way",
                _ => "the same ideas driven by hand with the maos CLI",
            };
            say(&format!("part {} of {}: {what}", i + 1, parts.len()));
        }
        match *p {
            "hooks" => hooks::replay(keep, verbose)?,
            "managed" => managed::run(keep)?,
            _ => tour::run(keep)?,
        }
    }
    if !demo::full() {
        outln!();
        outln!(
            "Next, in your own repository: `maos install-hooks`, restart Claude Code (or Codex,"
        );
        outln!("Gemini CLI), and watch your agents with `maos top`.");
    }
    Ok(())
}

/// The exit code of a program ended by Ctrl-C (128 + SIGINT).
const INTERRUPTED: u8 = 130;

fn main() -> ExitCode {
    let args = Args::parse();
    let pacing = match (&args.pace, args.step) {
        (_, true) => demo::Pacing::Step,
        (Some(p), false) => match maos_core::duration::parse(p) {
            Ok(d) => demo::Pacing::Pace(d),
            Err(e) => {
                eprintln!("maos: --pace {e}");
                return ExitCode::from(2);
            }
        },
        (None, false) => demo::Pacing::None,
    };
    demo::set_pacing(pacing);
    // Watching each step go by (--step, --pace) or its JSON (--verbose) is the full tour's.
    let full = args.full || args.verbose || args.step || args.pace.is_some();
    demo::set_mode(if full {
        demo::Mode::Full
    } else {
        use std::io::IsTerminal;
        demo::Mode::Story {
            paced: !args.no_pause && std::io::stdout().is_terminal(),
        }
    });
    // A reader that goes away (`maos demo | head`) ends the tour as it ends any `maos`
    // command, quietly with exit code 0, but only once the guards of what it started have run
    // on the way out: its daemon stopped, its agents ended, its directory removed.
    maos_client::stdout::unwind_when_closed();
    // Ctrl-C (more likely during a paced story than during a dump) ends it the same way, with
    // the exit code of an interrupt. The `maos` command it interrupted with it (the terminal
    // signals the whole process group) fails, which is no error to report.
    demo::stop_when_interrupted();
    let ran = std::panic::catch_unwind(|| run(args.part.as_deref(), args.keep, args.verbose));
    match ran {
        Err(payload) if payload.is::<demo::Interrupted>() => ExitCode::from(INTERRUPTED),
        _ if demo::interrupted() => ExitCode::from(INTERRUPTED),
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) => {
            eprintln!("maos: {e}");
            ExitCode::from(2)
        }
        Err(payload) if payload.is::<maos_client::stdout::Closed>() => ExitCode::SUCCESS,
        Err(payload) => std::panic::resume_unwind(payload),
    }
}
