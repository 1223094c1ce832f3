//! `./install.sh` puts every maos binary in one directory, and with only that directory on
//! `PATH` (plus the system's, for `sh` and git) a hooked project is set up completely:
//! `doctor` reports no failure, and `maos top`, `maos mcp` and `maos dashboard` run. The suite
//! copies this build's binaries (`--from-target`), as the real `cargo install` would put the
//! release build's there: a release build of the whole set takes too long for the suite
//! (README says how the real one was checked).

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, Value, describe, json_of};

const BINS: [&str; 6] = [
    "maos",
    "maosd",
    "maos-mcp",
    "maos-top",
    "maos-dash",
    "maos-demo",
];

fn script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("workspace")
        .join("install.sh")
}

/// `install.sh ARGS` with the system's PATH only (no cargo, no maos).
fn install(env: &Env, args: &[&std::ffi::OsStr]) -> Output {
    let mut cmd = Command::new("/bin/sh");
    cmd.arg(script())
        .args(args)
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", env.root().join("user"))
        .stdin(Stdio::null());
    maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT)
}

/// `maos ARGS` from `bin`, with PATH = `bin` and the system's directories.
fn maos_cmd(env: &Env, bin: &Path, args: &[&str]) -> Command {
    let mut cmd = env.command(&bin.join("maos"));
    cmd.args(args)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stdin(Stdio::null());
    cmd
}

fn maos(env: &Env, bin: &Path, args: &[&str]) -> Output {
    maos_tests::run_with_timeout(maos_cmd(env, bin, args), maos_tests::COMMAND_TIMEOUT)
}

/// Stops the dashboard started from the install directory, also when the test failed.
struct Dashboard<'a> {
    env: &'a Env,
    bin: PathBuf,
}

impl Drop for Dashboard<'_> {
    fn drop(&mut self) {
        let _ = maos(self.env, &self.bin, &["dashboard", "--stop"]);
    }
}

#[test]
fn one_command_installs_everything_a_hooked_project_needs() {
    let env = Env::new();
    let root = env.root().join("prefix");
    let out = install(
        &env,
        &[
            "--from-target".as_ref(),
            maos_tests::bin_dir().as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let bin = root.join("bin");
    let said = String::from_utf8_lossy(&out.stdout);
    for name in BINS {
        let path = bin.join(name);
        assert!(path.is_file(), "{} not installed: {said}", path.display());
        assert!(said.contains(&path.display().to_string()), "{said}");
    }
    assert!(said.contains("maos install-hooks"), "the next step: {said}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains(&format!("{} is not on PATH", bin.display())),
        "{err}"
    );

    // A hooked project, with nothing of the build on PATH.
    let out = maos(
        &env,
        &bin,
        &[
            "--project",
            env.project.to_str().expect("utf-8"),
            "install-hooks",
        ],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let out = maos(
        &env,
        &bin,
        &[
            "--json",
            "--project",
            env.project.to_str().expect("utf-8"),
            "doctor",
        ],
    );
    let report: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    let fails: Vec<&Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["level"] == "fail")
        .collect();
    assert!(fails.is_empty(), "doctor: {report}");
    assert_eq!(out.status.code(), Some(0), "{report}");
    let binaries = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["check"] == "binaries")
        .unwrap_or_else(|| panic!("no binaries check: {report}"));
    assert_eq!(binaries["level"], "ok", "{binaries}");
    assert!(
        binaries["detail"]
            .as_str()
            .is_some_and(|d| d.contains(&bin.join("maos-mcp").display().to_string())),
        "{binaries}"
    );

    // maos top.
    let out = maos(&env, &bin, &["top", "--help"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("Usage"),
        "{}",
        describe(&out)
    );

    // maos mcp: the MCP handshake over stdin and stdout.
    let mut cmd = maos_cmd(&env, &bin, &["mcp"]);
    cmd.current_dir(&env.project)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("maos mcp");
    let mut stdin = child.stdin.take().expect("stdin");
    let init = serde_json::json!({
        "jsonrpc": "2.0", "id": 1, "method": "initialize",
        "params": {"protocolVersion": "2025-06-18", "capabilities": {},
                   "clientInfo": {"name": "install-script-test", "version": "0"}}
    });
    writeln!(stdin, "{init}").expect("write initialize");
    let stdout = child.stdout.take().expect("stdout");
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut line = String::new();
        let _ = BufReader::new(stdout).read_line(&mut line);
        let _ = tx.send(line);
    });
    let line = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("maos mcp answered initialize");
    drop(stdin);
    let _ = child.wait();
    let answer: Value = serde_json::from_str(&line).unwrap_or_else(|e| panic!("{e}: {line:?}"));
    assert_eq!(answer["id"], 1, "{answer}");
    assert!(
        answer["result"]["serverInfo"]["name"].is_string(),
        "{answer}"
    );

    // maos dashboard: started from the install directory, and stopped again.
    let dash = Dashboard {
        env: &env,
        bin: bin.clone(),
    };
    let v = json_of(
        "maos dashboard",
        &maos(&env, &bin, &["--json", "dashboard"]),
    );
    assert_eq!(v["started"], true, "{v}");
    let pid = v["pid"].as_u64().expect("pid") as u32;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).expect("the dashboard's binary");
    assert_eq!(exe, bin.join("maos-dash"), "the installed maos-dash runs");
    drop(dash);
    maos_tests::wait_until(maos_tests::DEADLINE, "the dashboard stopped", || {
        !maos_tests::alive(pid)
    });
}

/// A bad command line, or a target directory without the binaries: the script says so in
/// one line, and installs nothing.
#[test]
fn the_script_refuses_what_it_cannot_do_and_installs_nothing() {
    let env = Env::new();
    let root = env.root().join("prefix");
    let out = install(&env, &["--bogus".as_ref()]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--bogus"));
    let empty = env.root().join("empty-target");
    std::fs::create_dir_all(&empty).expect("mkdir");
    let out = install(
        &env,
        &[
            "--from-target".as_ref(),
            empty.as_os_str(),
            "--root".as_ref(),
            root.as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("maos") && err.contains("cargo build"), "{err}");
    assert!(!root.exists(), "something was installed");
    let out = install(
        &env,
        &[
            "--debug".as_ref(),
            "--from-target".as_ref(),
            empty.as_os_str(),
        ],
    );
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}
