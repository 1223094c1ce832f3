//! `maos hook`: the agent CLI calls this on every hook event with one JSON object on stdin.
//! It forwards what maos needs (ids, event, tool, the path written; never file contents) and
//! answers in the CLI's own terms (HOOKS.md): nothing to allow, a `permissionDecision: deny`
//! object to refuse, `additionalContext` to inform. It never blocks the agent by accident:
//! exit 1 is a non-blocking "hook error", and an unreachable daemon fails open (tool runs,
//! the user is told) unless `MAOS_HOOK_FAIL=closed`.

use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

use maos_proto::{Cli, HookDecision, ProcessRef, Reply, Request};
use serde_json::{Value, json};

use crate::client::Client;

mod input;
#[cfg(test)]
mod tests;

use input::{MAX_INPUT, env};

/// Default deadline for the whole call.
const DEFAULT_TIMEOUT_MS: u64 = 5000;

fn print(v: &Value) {
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{v}");
}

fn deny(reason: &str) {
    print(&json!({"hookSpecificOutput": {
        "hookEventName": "PreToolUse",
        "permissionDecision": "deny",
        "permissionDecisionReason": reason,
    }}));
}

/// The daemon could not answer: the tool runs (fail open) and the user hears about it, or,
/// with `MAOS_HOOK_FAIL=closed`, a write is refused.
fn unreachable(event: &str, why: &str) -> ExitCode {
    let closed = env("MAOS_HOOK_FAIL").is_some_and(|v| v.eq_ignore_ascii_case("closed"));
    if closed && event == "PreToolUse" {
        deny(&format!(
            "maos could not check this tool call ({why}) and MAOS_HOOK_FAIL=closed refuses it; retry once `maos daemon status` works"
        ));
    } else {
        print(
            &json!({ "systemMessage": format!("maos: {why}; file locks are not enforced for this call") }),
        );
    }
    ExitCode::SUCCESS
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

/// The agent CLI's own process: the hook's nearest ancestor that is not a shell (CLIs run
/// hooks directly or through `sh -c`). Two or three small `/proc` reads; `None` off Linux.
fn cli_process() -> Option<ProcessRef> {
    const SHELLS: &[&str] = &[
        "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox",
    ];
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..4 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        let mut fields = rest.split(' ');
        let ppid: u32 = fields.nth(1)?.parse().ok()?;
        // `starttime` is field 22 of the line; `rest` starts at field 3, and `nth(1)` took
        // fields 3 and 4 (ppid), so field 22 is the 18th after them.
        let start_time = fields.nth(17).and_then(|t| t.parse().ok());
        if !SHELLS.contains(&comm) || ppid <= 1 {
            return Some(ProcessRef { pid, start_time });
        }
        pid = ppid;
    }
    None
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
    // One object, never waiting for EOF: some CLI versions keep stdin open.
    let parsed = input::read_value(std::io::stdin().lock(), MAX_INPUT)
        .and_then(|v| Ok((input::call_of(&v)?, v)));
    let (mut call, value) = match parsed {
        Ok(c) => c,
        Err(e) => {
            eprintln!("maos hook: {e}; nothing was done");
            return ExitCode::from(1);
        }
    };
    call.cli = cli;
    call.process = cli_process();
    let event = call.event.clone();
    // `apply_patch < FILE` in a shell command: the patch's files are read from FILE.
    for (base, file) in input::shell_patch_files(&value) {
        match read_patch(call.cwd.as_deref(), base.as_deref(), &file) {
            Ok(patch) => input::add_patch_paths(&mut call.paths, base.as_deref(), &patch),
            Err(why) if event == "PreToolUse" => {
                deny(&format!(
                    "maos: cannot read the patch this command gives apply_patch ({why}), so the files it writes cannot be locked. Use the apply_patch tool, or `apply_patch <<'EOF'` with the patch inline."
                ));
                return ExitCode::SUCCESS;
            }
            Err(_) => {}
        }
    }
    // A Codex shell command before it runs (its PreToolUse matcher has `Bash` for shell
    // `apply_patch`): maos has an opinion only when it runs `apply_patch` (then it writes
    // files). Every other one is answered here, without the daemon, so that it costs no
    // more than starting this binary; its PostToolUse still renews the leases.
    if cli == Cli::Codex
        && event == "PreToolUse"
        && call.tool_name.as_deref() == Some("Bash")
        && !call.writes_files()
    {
        return ExitCode::SUCCESS;
    }
    let start = project
        .or_else(|| call.cwd.as_deref().map(PathBuf::from))
        .or_else(|| std::env::current_dir().ok())
        .unwrap_or_else(|| PathBuf::from("."));
    let root = maos_proto::paths::project_root(&start)
        .to_string_lossy()
        .into_owned();
    let timeout = env("MAOS_HOOK_TIMEOUT_MS")
        .and_then(|t| t.parse::<u64>().ok())
        .unwrap_or(DEFAULT_TIMEOUT_MS);
    // One deadline for the whole call: starting the daemon, then each read and write.
    let timeout = Duration::from_millis(timeout.max(1));
    let mut client = match Client::connect_within(true, timeout) {
        Ok(c) => c,
        Err(e) => return unreachable(&event, &e.body().message),
    };
    client.set_timeout(timeout);
    let answer = match client.request(Some(&root), Request::Hook(Box::new(call))) {
        Ok(Reply::Hook(a)) => a,
        Ok(_) => return unreachable(&event, "the daemon gave an unexpected answer"),
        Err(e) => return unreachable(&event, &e.body().message),
    };
    match (answer.decision, event.as_str()) {
        (HookDecision::Deny, _) => {
            let reason = answer.reason.as_deref().unwrap_or("refused by maos");
            // Codex shows "…hook: <reason>. Command: …": without a full stop of our own.
            let reason = match cli {
                Cli::Codex => reason.trim_end_matches('.'),
                _ => reason,
            };
            deny(reason)
        }
        (_, "SessionStart" | "UserPromptSubmit") => {
            if let Some(ctx) = answer.context {
                print(&json!({"hookSpecificOutput": {
                    "hookEventName": event,
                    "additionalContext": ctx,
                }}));
            }
        }
        _ => {}
    }
    ExitCode::SUCCESS
}
