//! `maos hook`: the agent CLI calls this on every hook event with one JSON object on stdin.
//! It forwards what maos needs (ids, event, tool, the path written; never file contents) and
//! answers in the CLI's own terms (docs/hooks.md): nothing to allow, a `permissionDecision: deny`
//! object to refuse (Gemini CLI: `{"decision":"deny","reason":...}`), `additionalContext` to
//! inform. It never blocks the agent by accident: exit 1 is a non-blocking "hook error", and
//! an unreachable daemon fails open (tool runs, the user is told) unless `MAOS_HOOK_FAIL=closed`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use maos_proto::{Cli, HookDecision, Reply, Request};
use serde_json::{Value, json};

use crate::client::{Client, Limit};
use maos_client::process::cli_process;

// `pub(crate)`: install-hooks writes the events and tools each CLI's contract names.
pub(crate) mod input;
#[cfg(test)]
mod tests;

use input::{MAX_INPUT, env};

/// Default deadline for the whole call.
const DEFAULT_TIMEOUT_MS: u64 = 5000;

fn print(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
}

/// The refusal of a tool call in `cli`'s terms. Gemini CLI reads a top-level decision (exit 0,
/// the JSON on stdout is the answer) and shows the model `Tool execution blocked: <reason>`.
fn denial(cli: Cli, reason: &str) -> Value {
    match cli {
        Cli::Gemini => json!({"decision": "deny", "reason": reason}),
        Cli::Copilot => input::copilot::denial(reason),
        Cli::Cursor => input::cursor::denial(reason),
        Cli::OpenCode => input::opencode::denial(reason),
        _ => json!({"hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": "deny",
            "permissionDecisionReason": reason,
        }}),
    }
}

fn deny(cli: Cli, reason: &str) {
    print(&denial(cli, reason));
}

/// The daemon could not answer: the tool runs (fail open) and the user hears about it, or,
/// with `MAOS_HOOK_FAIL=closed`, a write is refused. `systemMessage` is shown to the user by
/// each CLI (Gemini CLI too, and with no decision it allows).
fn unreachable(cli: Cli, event: &str, why: &str) -> ExitCode {
    let closed = env("MAOS_HOOK_FAIL").is_some_and(|v| v.eq_ignore_ascii_case("closed"));
    if closed && event == "PreToolUse" {
        deny(
            cli,
            &format!(
                "maos could not check this tool call ({why}) and MAOS_HOOK_FAIL=closed refuses it; retry once `maos daemon status` works"
            ),
        );
    } else {
        // Only a tool call is something maos lets through unchecked; any other event is only
        // missing from the record.
        let what = if event == "PreToolUse" {
            "file locks are not enforced for this call".to_string()
        } else {
            format!("this {event} event is not recorded")
        };
        if let Some(out) = notice(cli, &format!("maos: {why}; {what}")) {
            print(&out);
        }
    }
    ExitCode::SUCCESS
}

/// A message for the person in `cli`'s terms (`systemMessage`, which Claude Code, Codex and
/// Gemini CLI show), if the CLI shows one.
fn notice(cli: Cli, message: &str) -> Option<Value> {
    match cli {
        Cli::Copilot => input::copilot::notice(message),
        Cli::Cursor => input::cursor::notice(message),
        Cli::OpenCode => input::opencode::notice(message),
        Cli::Claude | Cli::Codex | Cli::Gemini => Some(json!({ "systemMessage": message })),
    }
}

/// `maos hook` or `maos hook --cli NAME` (also `--cli=NAME`), read without clap: `None` when
/// the arguments are not the hook's (clap then handles them), else the CLI named or why not.
pub fn fast_args(
    mut args: impl Iterator<Item = std::ffi::OsString>,
) -> Option<Result<Cli, String>> {
    if args.next()? != "hook" {
        return None;
    }
    let rest: Vec<std::ffi::OsString> = args.collect();
    let name = match &rest[..] {
        [] => return Some(Ok(Cli::default())),
        [flag, name] if flag == "--cli" => name.to_str()?,
        [flag] => flag.to_str()?.strip_prefix("--cli=")?,
        _ => return None,
    };
    Some(name.parse::<Cli>().map_err(|e| e.to_string()))
}

/// Largest subagent meta file read (Claude Code's are about 300 bytes).
const MAX_META_FILE: u64 = 16 * 1024;

/// The text of the regular file at `path`, if it is at most [`MAX_META_FILE`] bytes (opened
/// without blocking: a FIFO put there never holds the hook up).
fn read_small(path: &std::path::Path) -> Option<String> {
    use std::io::Read;
    use std::os::unix::fs::OpenOptionsExt;
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    let meta = file.metadata().ok()?;
    if !meta.is_file() || meta.len() > MAX_META_FILE {
        return None;
    }
    let mut text = String::new();
    file.take(MAX_META_FILE).read_to_string(&mut text).ok()?;
    Some(text)
}

/// Largest patch file read for `apply_patch < FILE`.
const MAX_PATCH_FILE: u64 = 8 * 1024 * 1024;

/// The patch in `file` (relative to `cwd`, then `base`), if it is one.
fn read_patch(cwd: Option<&str>, base: Option<&str>, file: &str) -> Result<String, String> {
    use std::io::Read;
    let mut path = PathBuf::from(cwd.unwrap_or("."));
    if let Some(b) = base {
        path.push(b);
    }
    path.push(file);
    let mut text = String::new();
    std::fs::File::open(&path)
        .and_then(|f| f.take(MAX_PATCH_FILE).read_to_string(&mut text))
        .map_err(|e| format!("{file}: {e}"))?;
    if !maos_core::patch::is_patch(&text) {
        return Err(format!("{file} is not a patch maos can read"));
    }
    Ok(text)
}

pub fn run(project: Option<PathBuf>, cli: Cli) -> ExitCode {
    // `MAOS_HOOK_TIMEOUT_MS` counts from here.
    let start = Instant::now();
    // Gemini CLI may strip maos's variables: they come from its process, found first.
    let mut process = None;
    if cli == Cli::Gemini {
        process = cli_process();
        maos_client::process::recover_env(process);
    }
    // One object, never waiting for EOF: some CLI versions keep stdin open (Gemini CLI's has
    // no trailing newline and is closed).
    let (mut call, value) = match input::parse_for(std::io::stdin().lock(), MAX_INPUT, cli) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("maos hook: {e}; nothing was done");
            // GitHub Copilot CLI denies a tool call on any non-zero exit: input maos cannot
            // read is let through there as elsewhere.
            return match cli {
                Cli::Copilot => ExitCode::SUCCESS,
                _ => ExitCode::from(1),
            };
        }
    };
    let event = call.event.clone();
    // A Claude Code subagent's call: the `Agent` call that started it, as Claude Code wrote
    // it down, ties the two for certain (one small read; no file, no tie).
    if cli == Cli::Claude
        && let (Some(id), Some(transcript)) =
            (&call.agent_id, input::text(&value, "transcript_path"))
        && let Some(path) = input::meta_path(&transcript, id)
    {
        call.spawned_by = read_small(&path).as_deref().and_then(input::spawned_by_of);
    }
    // `apply_patch < FILE` in a shell command: the patch's files are read from FILE.
    for (base, file) in input::shell_patch_files(&value) {
        match read_patch(call.cwd.as_deref(), base.as_deref(), &file) {
            Ok(patch) => input::add_patch_paths(&mut call.paths, base.as_deref(), &patch),
            Err(why) if event == "PreToolUse" => {
                deny(
                    cli,
                    &format!(
                        "maos: cannot read the patch this command gives apply_patch ({why}), so the files it writes cannot be locked. Use the apply_patch tool, or `apply_patch <<'EOF'` with the patch inline."
                    ),
                );
                return ExitCode::SUCCESS;
            }
            Err(_) => {}
        }
    }
    // A Codex shell command before it runs whose text the hook could not send (over
    // MAX_COMMAND): answered here, without the daemon. Every other one goes to the daemon,
    // which reads the files it writes.
    if cli == Cli::Codex
        && event == "PreToolUse"
        && call.tool_name.as_deref() == Some("Bash")
        && call.command.is_none()
        && !call.writes_files()
    {
        return ExitCode::SUCCESS;
    }
    // The CLI's process, so that the daemon notices when the window is gone; only for calls
    // that reach the daemon.
    call.process = process.or_else(cli_process);
    // The project: `--project`'s, else the one around the CLI's working directory, else that
    // directory made one (never `$HOME` or `/`: the call goes through unrecorded).
    let (root, told) = match project {
        Some(p) => (
            maos_proto::paths::project_root(&p)
                .to_string_lossy()
                .into_owned(),
            None,
        ),
        None => {
            let start = call
                .cwd
                .as_deref()
                .map(PathBuf::from)
                .or_else(|| std::env::current_dir().ok())
                .unwrap_or_else(|| PathBuf::from("."));
            match crate::project::for_hook(&start, &event) {
                Ok(found) => found,
                Err(why) => return outside(cli, &event, &why),
            }
        }
    };
    let timeout = env("MAOS_HOOK_TIMEOUT_MS")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    // One deadline for the whole call: connecting, starting the daemon, the hello, the
    // request and every read of the answer get only what is left of it.
    let limit = Limit::new(
        start,
        Duration::from_millis(timeout.max(1)),
        "MAOS_HOOK_TIMEOUT_MS",
    );
    // In the hello: the daemon keeps slots for hooks that nothing long-lived can take.
    crate::client::set_kind(maos_proto::ClientKind::Hook);
    let mut client = match Client::connect_by(true, limit) {
        Ok(c) => c,
        Err(e) => return unreachable(cli, &event, &e.body().message),
    };
    // The daemon answers within what is left (a fleet's PostgreSQL that does not answer
    // is named, not waited for past it).
    call.budget_ms = Some(limit.left().as_millis() as u64);
    let answer = match client.request(Some(&root), Request::Hook(Box::new(call))) {
        Ok(Reply::Hook(a)) => a,
        Ok(_) => return unreachable(cli, &event, "the daemon gave an unexpected answer"),
        Err(e) => return unreachable(cli, &event, &e.body().message),
    };
    let mut output = match (answer.decision, event.as_str()) {
        (HookDecision::Deny, _) => {
            let reason = answer.reason.as_deref().unwrap_or("refused by maos");
            // Codex shows "…hook: <reason>. Command: …": without a full stop of our own.
            let reason = match cli {
                Cli::Codex => reason.trim_end_matches('.'),
                _ => reason,
            };
            Some(denial(cli, reason))
        }
        // PostToolUse: what the call did to files others hold (issue 31 §2), or such a
        // change to this agent's own.
        (_, "SessionStart" | "UserPromptSubmit" | "PostToolUse")
            if matches!(cli, Cli::Copilot | Cli::Cursor | Cli::OpenCode) =>
        {
            answer.context.and_then(|ctx| match cli {
                Cli::Copilot => input::copilot::context(&event, &ctx),
                Cli::Cursor => input::cursor::context(&event, &ctx),
                _ => input::opencode::context(&event, &ctx),
            })
        }
        (_, "SessionStart" | "UserPromptSubmit" | "PostToolUse") => answer.context.map(|ctx| {
            // Gemini CLI's own names for the events it calls BeforeAgent and AfterTool.
            let name = match (cli, event.as_str()) {
                (Cli::Gemini, "UserPromptSubmit") => "BeforeAgent",
                (Cli::Gemini, "PostToolUse") => "AfterTool",
                (_, e) => e,
            };
            json!({"hookSpecificOutput": {
                "hookEventName": name,
                "additionalContext": ctx,
            }})
        }),
        _ => None,
    };
    // The project this call made: the user hears of it (each CLI shows `systemMessage`).
    if let Some(told) = told.and_then(|t| notice(cli, &format!("maos: {t}"))) {
        let out = output.get_or_insert_with(|| json!({}));
        if let (Some(out), Some(told)) = (out.as_object_mut(), told.as_object()) {
            out.extend(told.clone());
        }
    }
    if let Some(out) = output {
        print(&out);
    }
    ExitCode::SUCCESS
}

/// A call from outside every project that maos does not make one (`$HOME`, `/`): it goes
/// through unrecorded; the window's start tells the user why, once.
fn outside(cli: Cli, event: &str, why: &str) -> ExitCode {
    if event == "SessionStart"
        && let Some(out) = notice(
            cli,
            &format!("maos: {why}; file locks are not enforced in this window"),
        )
    {
        print(&out);
    }
    ExitCode::SUCCESS
}
