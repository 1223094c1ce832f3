//! Commands that are binaries of their own, so that the client every hook call starts stays
//! small: `maos demo` runs `maos-demo`, `maos top` runs `maos-top`, `maos mcp` runs `maos-mcp`
//! (and `maos dashboard` starts `maos-dash`). Each runs in this process's place (exec): its
//! arguments, stdin, stdout, stderr and exit code are its own. A missing one is named in one
//! line with the command that installs it, exit 127.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use maos_proto::{ErrorBody, ErrorCode};

use crate::failure::{Failure, Res};

/// `bin` next to this binary, if it is there.
fn beside_me(bin: &str) -> Option<PathBuf> {
    let me = std::env::current_exe().ok()?;
    Some(me.parent()?.join(bin)).filter(|p| p.is_file())
}

/// Where `exec` finds `bin`: next to this binary, else the first on `PATH` (for `doctor`).
pub fn find(bin: &str) -> Option<PathBuf> {
    beside_me(bin).or_else(|| {
        let path = std::env::var_os("PATH")?;
        std::env::split_paths(&path)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
    })
}

/// The exit code of a command whose binary is missing (as a shell's "command not found").
pub const EXIT_MISSING: u8 = 127;

/// The one command that installs every maos binary beside this `maos`: the source's
/// `install.sh` (named by its path when this build's source is still there), with `--root`
/// when this `maos` is in another `bin` directory than cargo's; in a cargo target directory,
/// the build.
pub fn install_command() -> String {
    let me = std::env::current_exe().ok();
    let dir = me.as_deref().and_then(|m| m.parent()).map(PathBuf::from);
    // `<workspace>/target/<profile>/maos`: a build, not an install.
    if let Some(d) = &dir
        && d.parent()
            .and_then(|t| t.file_name())
            .is_some_and(|t| t == "target")
    {
        let release = d.file_name().is_some_and(|p| p == "release");
        return format!(
            "cargo build{} --workspace --bins",
            if release { " --release" } else { "" }
        );
    }
    let script = std::fs::canonicalize(concat!(env!("CARGO_MANIFEST_DIR"), "/../install.sh"))
        .map(|p| p.display().to_string())
        .unwrap_or_else(|_| "./install.sh".to_string());
    let default_root = std::env::var_os("CARGO_INSTALL_ROOT")
        .or_else(|| std::env::var_os("CARGO_HOME"))
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cargo")));
    let root = dir
        .as_deref()
        .filter(|d| d.file_name().is_some_and(|n| n == "bin"))
        .and_then(|d| d.parent())
        .filter(|r| Some(*r) != default_root.as_deref());
    match root {
        Some(r) => format!("{script} --root {}", r.display()),
        None => script,
    }
}

/// The one line that says `bin` is missing and how to install it.
pub fn missing_text(bin: &str) -> String {
    let here = std::env::current_exe()
        .ok()
        .and_then(|m| m.parent().map(|d| format!(" ({})", d.display())))
        .unwrap_or_default();
    format!(
        "{bin} is missing: it is neither next to this maos{here} nor on PATH; run `{}` to install every maos binary",
        install_command()
    )
}

/// The failure of a command whose binary `bin` is missing.
pub fn missing(bin: &str) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::NotFound, missing_text(bin)),
        exit: EXIT_MISSING,
    }
}

/// Run `BIN ARGS` (looked for next to this binary, then on `PATH`) in place of this process,
/// with `vars` set; returns only when it could not be started.
pub fn exec(bin: &str, args: &[OsString], vars: &[(&str, OsString)]) -> Res {
    let me = std::env::current_exe().ok();
    let Some(program) = find(bin) else {
        return Err(missing(bin));
    };
    let mut cmd = Command::new(&program);
    cmd.args(args);
    // It drives this `maos`, wherever it was found.
    if let Some(me) = &me {
        cmd.env("MAOS_CLIENT", me);
    }
    cmd.envs(vars.iter().map(|(k, v)| (k, v)));
    let e = cmd.exec();
    if e.kind() == std::io::ErrorKind::NotFound {
        return Err(missing(bin));
    }
    Err(Failure {
        body: ErrorBody::new(
            ErrorCode::BadRequest,
            format!("cannot run {}: {e}", program.display()),
        ),
        exit: 126,
    })
}
