//! What a plan asks of the machine that runs it, checked when the plan loads: every agent's
//! program exists and can be executed (on `PATH`, or at the path it names), and its `workdir`
//! is inside the project. This touches the filesystem, so the connection runs it before the
//! request reaches the actor (like lock paths); the actor's own parse checks the file only.

use std::ffi::OsStr;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use maos_core::plan::{self, AgentSpec, MachineIssue};
use maos_proto::{ErrorBody, ErrorCode};

use crate::base::lockpath::{lexical, resolve_links};

/// Refuse the plan at `path` (as the client named it) whose `text` asks for a program that is
/// not there or a directory outside the project at `root`: one line, the file, the line and
/// column of the key, the agent and what is wrong. A plan that does not parse is left to the
/// actor, which says why.
pub fn check(root: &str, path: &str, text: &str) -> Result<(), ErrorBody> {
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| PathBuf::from(root));
    let daemon_path = std::env::var_os("PATH");
    match plan::parse_with(text, |_, spec| agent(&root, daemon_path.as_deref(), spec)) {
        Err(e) if plan::parse(text).is_ok() => Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!(
                "{path}:{}:{}: {}; nothing was created",
                e.line, e.column, e.message
            ),
        )),
        _ => Ok(()),
    }
}

fn agent(root: &Path, daemon_path: Option<&OsStr>, spec: &AgentSpec) -> Result<(), MachineIssue> {
    let who = format!("agent {:?}", spec.name);
    let cwd = crate::proc::run::workdir(root, spec.workdir.as_deref());
    if let Some(w) = &spec.workdir {
        let real = resolve_links(&lexical(&cwd));
        if !real.starts_with(root) {
            return Err((
                "workdir",
                format!(
                    "{who}: workdir {w:?} is outside the project {} (it is {}); agents run inside \
                     the project: give a directory under it",
                    root.display(),
                    real.display()
                ),
            ));
        }
    }
    // The agent's own PATH when its plan sets one (its supervisor looks the program up there).
    let path_var = spec
        .env
        .get("PATH")
        .map(|p| OsStr::new(p.as_str()))
        .or(daemon_path);
    program(&who, "command", &spec.command, &cwd, path_var)?;
    if let Some(r) = &spec.resume_command {
        program(&who, "resume_command", r, &cwd, path_var)?;
    }
    Ok(())
}

fn executable(p: &Path) -> bool {
    std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
}

/// The program of `argv` can be run: a path (relative to the agent's working directory)
/// names an executable file, or a bare name is one on `PATH`. A program made by a placeholder
/// (`{workdir}/run.sh`) is known only at the start, and is not checked.
fn program(
    who: &str,
    key: &'static str,
    argv: &[String],
    cwd: &Path,
    path_var: Option<&OsStr>,
) -> Result<(), MachineIssue> {
    let Some(prog) = argv.first() else {
        return Ok(());
    };
    if prog.contains('{') {
        return Ok(());
    }
    if prog.contains('/') {
        let at = cwd.join(prog);
        return match std::fs::metadata(&at) {
            Err(_) => Err((
                key,
                format!(
                    "{who}: {key} program {prog:?} does not exist ({})",
                    at.display()
                ),
            )),
            Ok(_) if !executable(&at) => Err((
                key,
                format!(
                    "{who}: {key} program {prog:?} is not an executable file ({}); `chmod +x` it",
                    at.display()
                ),
            )),
            Ok(_) => Ok(()),
        };
    }
    let dirs: Vec<PathBuf> = path_var.map_or_else(Vec::new, |p| std::env::split_paths(p).collect());
    if dirs.iter().any(|d| executable(&d.join(prog))) {
        return Ok(());
    }
    let why = match dirs.iter().map(|d| d.join(prog)).find(|c| c.is_file()) {
        Some(c) => format!("{} is on PATH but not executable", c.display()),
        None => "it is not found on the PATH agents run with (install it, or give its full path)"
            .to_string(),
    };
    Err((
        key,
        format!("{who}: {key} program {prog:?} cannot run: {why}"),
    ))
}
