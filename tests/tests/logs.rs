//! The daemon's log: `$MAOS_HOME/logs/maosd.log` rotated under the size cap of `config.toml`,
//! every file private, and a bad setting refused before anything is touched.

use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::{Background, DEADLINE, Env, describe, maosd_bin, run_with_timeout, wait_until};

const CAP: u64 = 8192;
const KEEP: usize = 2;

/// Time for enough requests to fill the log several times over.
const FILL: Duration = Duration::from_secs(60);

fn write_config(env: &Env, text: &str) {
    std::fs::create_dir_all(&env.home).expect("home");
    std::fs::set_permissions(&env.home, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    std::fs::write(env.home.join("config.toml"), text).expect("config.toml");
}

/// `maosd` started directly (not through the client), with debug logging and a umask that
/// would leave new files open to everyone: the log's modes are the daemon's own doing.
fn start_daemon(env: &Env) -> Background {
    use std::os::unix::process::CommandExt;
    let mut cmd = env.command(&maosd_bin());
    cmd.env("MAOS_LOG", "debug");
    // SAFETY: umask is async-signal-safe and only changes the child's file creation mask.
    unsafe {
        cmd.pre_exec(|| {
            libc::umask(0);
            Ok(())
        });
    }
    let daemon = Background::spawn(cmd);
    wait_until(DEADLINE, "the daemon answers", || {
        std::os::unix::net::UnixStream::connect(&env.socket).is_ok()
    });
    daemon
}

/// The files of the log in `dir`, `maosd.log` first, then `maosd.log.1`, ...; anything else
/// named `maosd.log*` too, so that a stray file fails the test.
fn log_files(dir: &Path) -> Vec<String> {
    let mut names: Vec<String> = std::fs::read_dir(dir)
        .expect("logs dir")
        .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
        .filter(|n| n.starts_with("maosd.log"))
        .collect();
    names.sort_by_key(|n| (n.len(), n.clone()));
    names
}

fn first_line(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap_or_default();
    text.lines().next().unwrap_or_default().to_string()
}

fn mode(path: &Path) -> u32 {
    std::fs::metadata(path)
        .expect("metadata")
        .permissions()
        .mode()
        & 0o777
}

#[test]
fn the_log_rotates_under_its_cap_and_keeps_only_the_newest_files() {
    let env = Env::new();
    write_config(&env, &format!("log_max_bytes = {CAP}\nlog_keep = {KEEP}\n"));
    let daemon = start_daemon(&env);
    let logs = env.home.join("logs");
    let live = logs.join("maosd.log");
    let oldest = logs.join(format!("maosd.log.{KEEP}"));

    // Every request logs its statements at debug level: drive requests until the oldest kept
    // generation exists, then until it has been replaced once (a rotation dropped a file).
    let mut n = 0;
    let mut request = || {
        n += 1;
        env.session(&format!("fill the log {n}"), &[]);
    };
    wait_until(FILL, "maosd.log.2 exists", || {
        request();
        oldest.exists()
    });
    let first = first_line(&oldest);
    wait_until(FILL, "maosd.log.2 is replaced by a newer one", || {
        request();
        first_line(&oldest) != first
    });

    let names = log_files(&logs);
    assert_eq!(
        names,
        ["maosd.log", "maosd.log.1", "maosd.log.2"],
        "keep + 1 files"
    );
    assert_eq!(mode(&logs), 0o700);
    for name in &names {
        let path = logs.join(name);
        let text = std::fs::read_to_string(&path).expect("log");
        let size = text.len() as u64;
        let records = text.lines().count();
        // Over the cap only when one record alone is larger than the cap.
        assert!(
            size <= CAP || records == 1,
            "{name}: {size} bytes in {records} records, cap {CAP}"
        );
        assert_eq!(mode(&path), 0o600, "{name}");
        // Rotation happens between records: each file starts with a record's timestamp and
        // ends with a whole line.
        if name != "maosd.log" || !text.is_empty() {
            assert!(text.ends_with('\n'), "{name} ends mid-record");
            let ts = text.split_whitespace().next().unwrap_or_default();
            maos_tests::ts_micros(ts);
        }
    }

    // The newest file still receives the lines: it grows, or it was rotated and its successor
    // holds lines.
    let before = std::fs::metadata(&live).expect("maosd.log");
    wait_until(FILL, "maosd.log receives new lines", || {
        request();
        std::fs::metadata(&live)
            .is_ok_and(|m| (m.ino(), m.len()) != (before.ino(), before.len()) && m.len() > 0)
    });

    // The daemon never stopped.
    assert_eq!(env.daemon_pid(), daemon.pid());
    assert_eq!(
        env.maos_json(&["session", "list"])
            .as_array()
            .map_or(0, Vec::len),
        n
    );
    env.maos_json(&["daemon", "stop"]);
    let out = daemon.finish(DEADLINE);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        out.stderr.is_empty(),
        "no failure to report: {}",
        describe(&out)
    );
}

#[test]
fn an_oversized_log_from_before_is_rotated_at_start() {
    let env = Env::new();
    write_config(&env, "log_max_bytes = 4096\nlog_keep = 2\n");
    let logs = env.home.join("logs");
    std::fs::create_dir_all(&logs).expect("logs");
    let old: String = (0..400).map(|i| format!("old line {i:04}\n")).collect();
    let live = logs.join("maosd.log");
    std::fs::write(&live, &old).expect("old log");
    std::fs::set_permissions(&live, std::fs::Permissions::from_mode(0o644)).expect("chmod");
    // Left by a larger log_keep: beyond what is kept now.
    let stale = logs.join("maosd.log.5");
    std::fs::write(&stale, "stale\n").expect("stale");

    env.maos_json(&["ps"]);
    let moved = logs.join("maosd.log.1");
    assert_eq!(std::fs::read_to_string(&moved).expect(".1"), old);
    assert!(!stale.exists(), "files beyond log_keep are removed");
    assert_eq!(
        log_files(&logs),
        ["maosd.log", "maosd.log.1"],
        "the client's maosd.stderr aside"
    );
    for path in [&live, &moved] {
        assert_eq!(mode(path), 0o600, "{}", path.display());
    }
    let new = std::fs::read_to_string(&live).expect("new log");
    assert!(new.len() as u64 <= 4096, "{new}");
    assert!(!new.contains("old line"));
}

#[test]
fn a_bad_log_setting_refuses_to_start_and_changes_nothing() {
    let env = Env::new();
    let config: PathBuf = env.home.join("config.toml");
    for (text, key, why) in [
        ("log_max_bytes = 0\n", "log_max_bytes", "at least 4096"),
        ("log_max_bytes = 4095\n", "log_max_bytes", "at least 4096"),
        ("log_max_bytes = -1\n", "log_max_bytes", "-1"),
        ("log_max_bytes = \"10MB\"\n", "log_max_bytes", "string"),
        ("log_keep = 101\n", "log_keep", "at most 100"),
        ("log_keep = -1\n", "log_keep", "-1"),
    ] {
        write_config(&env, text);
        // Not --foreground: a daemon that got as far as its log would create logs/.
        let out = run_with_timeout(env.command(&maosd_bin()), DEADLINE);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{text}: {}", describe(&out));
        let lines: Vec<&str> = stderr.lines().collect();
        assert_eq!(lines.len(), 1, "{text}: one line: {stderr}");
        assert!(
            lines[0].starts_with("maosd: ")
                && lines[0].contains(key)
                && lines[0].contains(why)
                && lines[0].contains(&config.display().to_string()),
            "{text}: names the key, the file and why: {stderr}"
        );
        let mut entries: Vec<String> = std::fs::read_dir(&env.home)
            .expect("home")
            .map(|e| e.expect("entry").file_name().into_string().expect("utf-8"))
            .collect();
        entries.sort();
        assert_eq!(entries, ["config.toml"], "{text}: nothing created");
        assert_eq!(
            std::fs::read_to_string(&config).expect("config"),
            text,
            "unchanged"
        );
        assert!(!env.socket.exists(), "{text}: no socket");
    }
}
