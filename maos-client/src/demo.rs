//! `maos demo`: the tour is a binary of its own, `maos-demo`, so that the client every hook
//! call starts stays small. It runs in this process's place (exec): its arguments, stdin,
//! stdout, stderr and exit code are the tour's own.

use std::ffi::OsString;
use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Command;

use maos_proto::{ErrorBody, ErrorCode};

use crate::failure::{Failure, Res};

/// The tour's binary, looked for next to this one, then on `PATH`.
const DEMO: &str = "maos-demo";

/// Run `maos-demo ARGS` in place of this process; returns only when it could not be started.
pub fn run(args: &[OsString]) -> Res {
    let me = std::env::current_exe().ok();
    let program = me
        .as_ref()
        .and_then(|me| Some(me.parent()?.join(DEMO)))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from(DEMO));
    let mut cmd = Command::new(&program);
    cmd.args(args);
    // The tour drives this `maos`, wherever `maos-demo` was found.
    if let Some(me) = &me {
        cmd.env("MAOS_DEMO_CLIENT", me);
    }
    let e = cmd.exec();
    let message = if e.kind() == std::io::ErrorKind::NotFound {
        format!(
            "`maos demo` runs `{DEMO}`, which is neither next to this maos nor on PATH: build it with `cargo build --release --workspace --bins` (target/release/{DEMO})"
        )
    } else {
        format!("cannot run {}: {e}", program.display())
    };
    Err(Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, message),
        exit: 1,
    })
}
