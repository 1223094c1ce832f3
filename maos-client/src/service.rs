//! `maos daemon install | uninstall`: maosd as a systemd user service or a launchd agent.

use crate::Res;
use crate::cli::ServiceArgs;

pub fn install(_args: &ServiceArgs, _json: bool) -> Res {
    Err(crate::usage("maos daemon install is not built yet"))
}

pub fn uninstall(_args: &ServiceArgs, _json: bool) -> Res {
    Err(crate::usage("maos daemon uninstall is not built yet"))
}
