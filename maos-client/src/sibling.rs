//! Commands that are binaries of their own, so that the client every hook call starts stays
//! small: `maos demo` runs `maos-demo`, `maos top` runs `maos-top`. Each runs in this process's
//! place (exec): its arguments, stdin, stdout, stderr and exit code are its own.

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

/// Run `BIN ARGS` (looked for next to this binary, then on `PATH`) in place of this process,
/// with `vars` set; returns only when it could not be started.
pub fn exec(bin: &str, args: &[OsString], vars: &[(&str, OsString)]) -> Res {
    let me = std::env::current_exe().ok();
    let program = beside_me(bin).unwrap_or_else(|| PathBuf::from(bin));
    let mut cmd = Command::new(&program);
    cmd.args(args);
    // It drives this `maos`, wherever it was found.
    if let Some(me) = &me {
        cmd.env("MAOS_CLIENT", me);
    }
    cmd.envs(vars.iter().map(|(k, v)| (k, v)));
    let e = cmd.exec();
    let message = if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "this command runs `{bin}`, which is neither next to this maos nor on PATH: build it with `cargo build --release --workspace --bins` (target/release/{bin})"
        )
    } else {
        format!("cannot run {}: {e}", program.display())
    };
    Err(Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, message),
        exit: 1,
    })
}
