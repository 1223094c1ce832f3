//! The daemon under test: a `maosd` (the one next to this executable) in a fresh temporary
//! directory for each scenario, started, stopped and killed through the end-to-end tests'
//! harness (`maos_tests::daemon`), and what the scenarios need around it: the binaries they
//! run, whole-process timing, the daemon's log.

use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use maos_tests::Env;
use maos_tests::client::Res;
use maos_tests::daemon::Daemon;

/// Where this tool's own binaries are: its directory (`target/release/`, with `maosd`, `maos`
/// and `empty` built beside it).
pub fn bin_dir() -> Res<PathBuf> {
    let exe = std::env::current_exe().map_err(|e| format!("cannot find my executable: {e}"))?;
    exe.parent()
        .map(Path::to_path_buf)
        .ok_or_else(|| "my executable has no parent directory".into())
}

/// Start a daemon for one scenario: `maosd --synchronous SYNC` next to this tool, in a new
/// temporary directory `maos-bench-<pid>-*` (those of killed runs are removed first), once it
/// answers.
pub fn start(sync: &str) -> Res<Daemon> {
    const STEM: &str = "maos-bench-";
    maos_tests::tempdir::sweep_stale_dirs(STEM);
    let bin = bin_dir()?.join("maosd");
    if !bin.is_file() {
        return Err(format!(
            "{} not found: build it (cargo build --release --workspace --bins)",
            bin.display()
        ));
    }
    let env = Env::try_new(&format!("{STEM}{}-", std::process::id()))
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    Daemon::start(env, &bin, &["--synchronous", sync])
}

/// Size of the default project's database and its WAL.
pub fn db_bytes(d: &Daemon) -> u64 {
    ["maos.db", "maos.db-wal"]
        .iter()
        .map(|f| d.project_file_bytes(f))
        .sum()
}

/// Run `cmd` to its end: seconds from spawn to exit; a failure if it did not succeed.
pub fn spawn_timed(cmd: &mut Command) -> Res<f64> {
    let t = Instant::now();
    let status = cmd
        .status()
        .map_err(|e| format!("cannot run {cmd:?}: {e}"))?;
    let secs = t.elapsed().as_secs_f64();
    if !status.success() {
        return Err(format!("{cmd:?} exited with {status}"));
    }
    Ok(secs)
}

/// The `maos` binary whole-process scenarios run: `MAOS_BENCH_CLIENT` if set (e.g. a statically
/// linked build), else the one next to this tool. The baseline `empty` is always the default
/// build next to this tool.
pub fn client_bin() -> Res<PathBuf> {
    match std::env::var_os("MAOS_BENCH_CLIENT").filter(|p| !p.is_empty()) {
        Some(p) => Ok(PathBuf::from(p)),
        None => Ok(bin_dir()?.join("maos")),
    }
}

/// Now, in µs since the Unix epoch (to compare with the daemon's log).
pub fn unix_us() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_micros() as i64)
}

/// Unix time in µs of a log line's leading RFC 3339 UTC timestamp
/// (`2025-01-02T03:04:05.678901Z ...`).
pub fn log_line_us(line: &str) -> Option<i64> {
    maos_tests::parse_ts(line.split_whitespace().next()?)
}

/// The daemon's log (`$MAOS_HOME/logs/maosd.log`), empty if there is none.
pub fn daemon_log(d: &Daemon) -> String {
    fs::read_to_string(d.env.home.join("logs").join("maosd.log")).unwrap_or_default()
}

/// From the daemon's log: ms from `since` (Unix µs) to the first line at or after it that
/// contains each of `marks` (None where there is no such line).
pub fn log_marks(d: &Daemon, since_us: i64, marks: &[&str]) -> Vec<Option<f64>> {
    let text = daemon_log(d);
    marks
        .iter()
        .map(|m| {
            text.lines()
                .filter(|l| l.contains(m))
                .filter_map(log_line_us)
                .find(|&us| us >= since_us)
                .map(|us| (us - since_us) as f64 / 1000.0)
        })
        .collect()
}
