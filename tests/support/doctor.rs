//! `maos --json doctor` as the install tests read it: its exit code and report, and the levels
//! one check got.

use std::ffi::OsStr;
use std::path::Path;

use crate::{Env, Value, describe};

/// `maos --json doctor` in `dir` with `path` as `PATH`: the exit code and the report.
pub fn doctor(env: &Env, dir: &Path, path: impl AsRef<OsStr>) -> (Option<i32>, Value) {
    let mut cmd = env.maos_cmd_in(dir, &["--json", "doctor"]);
    cmd.env("PATH", path);
    let out = cmd.output().expect("maos doctor");
    let v =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    (out.status.code(), v)
}

/// The level (`ok`, `info`, `warn`, `fail`) of each check named `check` in a doctor report,
/// in the report's order.
pub fn levels<'a>(report: &'a Value, check: &str) -> Vec<&'a str> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == check)
        .map(|c| c["level"].as_str().unwrap_or_default())
        .collect()
}

/// The check named `name` in a doctor report's `checks`.
pub fn check<'a>(checks: &'a [Value], name: &str) -> &'a Value {
    checks
        .iter()
        .find(|c| c["check"] == name)
        .unwrap_or_else(|| panic!("no {name} check: {checks:?}"))
}
