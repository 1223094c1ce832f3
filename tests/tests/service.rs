//! `maos daemon install | uninstall`: the systemd units and the launchd plist it writes are
//! valid, run this build's maosd and listen on exactly the socket the client computes; uninstall
//! removes exactly what install wrote; bad input changes nothing; doctor reports the mode. The
//! service managers themselves are replaced by fake `systemctl` / `launchctl` scripts that
//! record their calls (no user manager runs in a test), and `systemd-analyze verify` checks the
//! units offline.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use maos_tests::{
    COMMAND_TIMEOUT, Env, Failure, Value, alive, describe, failure_of, json_of, maos_bin,
    maosd_bin, run_with_timeout,
};

/// One test's world: the e2e [`Env`] plus its own XDG config and runtime directories, HOME and
/// TMPDIR, all inside the test's temporary directory.
struct Svc {
    env: Env,
    config: PathBuf,
    runtime: PathBuf,
    user: PathBuf,
    tmp: PathBuf,
    /// Directory put first on PATH (fake service-manager tools).
    fake_bin: PathBuf,
}

/// Which socket the client computes.
#[derive(Clone, Copy)]
enum Socket {
    /// `$XDG_RUNTIME_DIR/maos/maosd.sock` (MAOS_SOCKET unset).
    Runtime,
    /// `MAOS_SOCKET` (the e2e Env's).
    Env,
    /// `$TMPDIR/maos-$UID/maosd.sock` (neither MAOS_SOCKET nor XDG_RUNTIME_DIR set).
    Tmp,
}

impl Svc {
    fn new() -> Svc {
        let env = Env::new();
        let root = env.root();
        let svc = Svc {
            config: root.join("config"),
            runtime: root.join("xdg-run"),
            user: root.join("user"),
            tmp: root.join("tmp"),
            fake_bin: root.join("fake-bin"),
            env,
        };
        for dir in [&svc.runtime, &svc.tmp, &svc.fake_bin] {
            std::fs::create_dir_all(dir).expect("mkdir");
        }
        use std::os::unix::fs::PermissionsExt;
        std::fs::set_permissions(&svc.runtime, std::fs::Permissions::from_mode(0o700))
            .expect("chmod runtime dir");
        svc
    }

    fn command(&self, socket: Socket, args: &[&str]) -> Command {
        let mut cmd = self.env.command(&maos_bin());
        let path = std::env::var_os("PATH").unwrap_or_default();
        let mut dirs = vec![self.fake_bin.clone()];
        dirs.extend(std::env::split_paths(&path));
        cmd.env("XDG_CONFIG_HOME", &self.config)
            .env("TMPDIR", &self.tmp)
            .env("PATH", std::env::join_paths(dirs).expect("PATH"))
            .env("FAKE_LOG", self.fake_log());
        match socket {
            Socket::Runtime => {
                cmd.env_remove("MAOS_SOCKET")
                    .env("XDG_RUNTIME_DIR", &self.runtime);
            }
            Socket::Env => {
                cmd.env("XDG_RUNTIME_DIR", &self.runtime);
            }
            Socket::Tmp => {
                cmd.env_remove("MAOS_SOCKET").env_remove("XDG_RUNTIME_DIR");
            }
        }
        cmd.args(args);
        cmd
    }

    /// `maosd` with the environment `maos` gets from [`Svc::command`].
    fn maosd_command(&self, socket: Socket) -> Command {
        let client = self.command(socket, &[]);
        let mut daemon = self.env.command(&maosd_bin());
        for (k, v) in client.get_envs() {
            match v {
                Some(v) => daemon.env(k, v),
                None => daemon.env_remove(k),
            };
        }
        daemon
    }

    fn run(&self, socket: Socket, args: &[&str]) -> Output {
        run_with_timeout(self.command(socket, args), COMMAND_TIMEOUT)
    }

    fn json(&self, socket: Socket, args: &[&str]) -> Value {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        json_of(&format!("maos {all:?}"), &self.run(socket, &all))
    }

    fn fail(&self, socket: Socket, args: &[&str]) -> Failure {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        failure_of(&format!("maos {all:?}"), &self.run(socket, &all))
    }

    /// `maos --json doctor` without starting a daemon: its report (doctor fails without hooks
    /// and a daemon, which is fine here).
    fn doctor(&self, socket: Socket) -> Value {
        let mut cmd = self.command(socket, &["--json", "doctor"]);
        cmd.env("MAOS_NO_AUTOSTART", "1");
        let out = run_with_timeout(cmd, COMMAND_TIMEOUT);
        serde_json::from_slice(&out.stdout)
            .unwrap_or_else(|e| panic!("doctor printed invalid JSON ({e}): {}", describe(&out)))
    }

    /// The socket path the client computes, as the real binary reports it.
    fn client_socket(&self, socket: Socket) -> PathBuf {
        let v = self.doctor(socket);
        PathBuf::from(
            v["socket"]
                .as_str()
                .unwrap_or_else(|| panic!("no socket in {v}")),
        )
    }

    fn unit_dir(&self) -> PathBuf {
        self.config.join("systemd/user")
    }

    fn plist_path(&self) -> PathBuf {
        self.user.join("Library/LaunchAgents/dev.maos.maosd.plist")
    }

    fn fake_log(&self) -> PathBuf {
        self.env.root().join("fake-calls.log")
    }

    /// Put a fake `tool` first on PATH: it appends its arguments to the log, then runs `body`
    /// (a shell snippet; `$*` holds the arguments).
    fn fake_tool(&self, tool: &str, body: &str) {
        use std::os::unix::fs::PermissionsExt;
        let path = self.fake_bin.join(tool);
        let script = format!("#!/bin/sh\necho \"{tool} $*\" >> \"$FAKE_LOG\"\n{body}\n");
        std::fs::write(&path, script).expect("write fake tool");
        std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    }

    /// Calls the fake tools got, one per line, and forget them.
    fn take_calls(&self) -> Vec<String> {
        let text = std::fs::read_to_string(self.fake_log()).unwrap_or_default();
        let _ = std::fs::remove_file(self.fake_log());
        text.lines().map(str::to_string).collect()
    }

    /// Every file (and symlink) under the config dir and the user's home.
    fn files(&self) -> BTreeSet<PathBuf> {
        let mut out = BTreeSet::new();
        for dir in [&self.config, &self.user] {
            walk(dir, &mut out);
        }
        out
    }
}

fn walk(dir: &Path, out: &mut BTreeSet<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for e in entries.flatten() {
        let p = e.path();
        match e.file_type() {
            Ok(t) if t.is_dir() => walk(&p, out),
            Ok(_) => {
                out.insert(p);
            }
            Err(_) => {}
        }
    }
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The single `KEY=` line of a unit (outside comments).
fn setting<'a>(unit: &'a str, key: &str) -> Vec<&'a str> {
    unit.lines()
        .filter(|l| !l.starts_with('#'))
        .filter_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .collect()
}

fn canonical_maosd() -> PathBuf {
    std::fs::canonicalize(maosd_bin()).expect("canonical maosd")
}

/// `systemd-analyze verify` of user units, offline: `--user` resolves %t from XDG_RUNTIME_DIR
/// without a running user manager; `--man=no` skips the check that the Documentation= man page
/// is installed. Warnings (unknown keys, bad values) go to stderr with exit 0, so stderr must
/// be empty too.
fn verify_units(svc: &Svc, units: &[PathBuf]) {
    if !cfg!(target_os = "linux") || !maos_tests::have_tool("systemd-analyze", "systemd") {
        return;
    }
    let mut cmd = Command::new("systemd-analyze");
    cmd.args(["verify", "--user", "--man=no"])
        .args(units)
        .env("XDG_RUNTIME_DIR", &svc.runtime)
        .env("XDG_CONFIG_HOME", &svc.config)
        .env("HOME", &svc.user);
    let out = run_with_timeout(cmd, COMMAND_TIMEOUT);
    assert!(
        out.status.success() && out.stderr.is_empty() && out.stdout.is_empty(),
        "systemd-analyze verify: {}",
        describe(&out)
    );
}

#[test]
fn systemd_files_only_writes_verified_units_for_the_clients_socket() {
    let svc = Svc::new();
    // Where the client really puts its daemon: start one, note its socket, stop it.
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    let daemon_socket = PathBuf::from(started["socket"].as_str().expect("socket"));
    {
        use std::os::unix::fs::FileTypeExt;
        let meta = std::fs::symlink_metadata(&daemon_socket).expect("the daemon's socket");
        assert!(meta.file_type().is_socket());
    }
    svc.json(Socket::Runtime, &["daemon", "stop"]);
    let client_socket = svc.client_socket(Socket::Runtime);
    assert_eq!(client_socket, daemon_socket);
    assert!(client_socket.starts_with(&svc.runtime));

    let v = svc.json(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--files-only"],
    );
    let socket_unit = svc.unit_dir().join("maosd.socket");
    let service_unit = svc.unit_dir().join("maosd.service");
    assert_eq!(v["manager"], "systemd");
    assert_eq!(v["enabled"], false, "--files-only enables nothing");
    assert_eq!(
        v["files"],
        serde_json::json!([socket_unit, service_unit]),
        "{v}"
    );
    assert_eq!(v["socket"], client_socket.to_str().expect("utf-8"));
    assert!(svc.take_calls().is_empty(), "--files-only runs no tool");

    let service = read(&service_unit);
    let maosd = canonical_maosd();
    assert!(maosd.is_absolute());
    assert_eq!(
        setting(&service, "ExecStart"),
        vec![maosd.to_str().expect("utf-8")]
    );
    assert_eq!(setting(&service, "KillMode"), vec!["process"]);
    assert_eq!(setting(&service, "Requires"), vec!["maosd.socket"]);
    assert_eq!(
        setting(&service, "Environment"),
        vec![format!("MAOS_HOME={}", svc.env.home.display())]
    );
    assert!(!service.contains("MAOS_SOCKET"), "{service}");

    let socket = read(&socket_unit);
    assert_eq!(
        setting(&socket, "ListenStream"),
        vec!["%t/maos/maosd.sock"],
        "the default socket keeps the specifier"
    );
    let resolved =
        setting(&socket, "ListenStream")[0].replace("%t", svc.runtime.to_str().expect("utf-8"));
    assert_eq!(Path::new(&resolved), client_socket);
    assert_eq!(setting(&socket, "SocketMode"), vec!["0600"]);
    assert_eq!(setting(&socket, "WantedBy"), vec!["sockets.target"]);
    verify_units(&svc, &[socket_unit.clone(), service_unit.clone()]);

    // Installing again changes nothing.
    let again = svc.json(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--files-only"],
    );
    assert_eq!(again["changed"], false);
    assert_eq!(read(&service_unit), service);
}

#[test]
fn a_socket_outside_the_runtime_dir_is_written_as_an_absolute_path() {
    let svc = Svc::new();
    for (socket, under) in [
        (
            Socket::Env,
            svc.env.socket.parent().expect("dir").to_path_buf(),
        ),
        (Socket::Tmp, svc.tmp.clone()),
    ] {
        let client_socket = svc.client_socket(socket);
        assert!(
            client_socket.starts_with(&under),
            "{}",
            client_socket.display()
        );
        svc.json(socket, &["daemon", "install", "--systemd", "--files-only"]);
        let unit_path = svc.unit_dir().join("maosd.socket");
        let unit = read(&unit_path);
        assert_eq!(
            setting(&unit, "ListenStream"),
            vec![client_socket.to_str().expect("utf-8")]
        );
        verify_units(&svc, &[unit_path, svc.unit_dir().join("maosd.service")]);
    }
}

/// `Sockets.Listeners` of a parsed plist.
fn listeners(p: &plist::Value) -> &plist::Dictionary {
    p.as_dictionary()
        .and_then(|d| d.get("Sockets"))
        .and_then(plist::Value::as_dictionary)
        .and_then(|d| d.get("Listeners"))
        .and_then(plist::Value::as_dictionary)
        .unwrap_or_else(|| panic!("no Sockets.Listeners in {p:?}"))
}

fn key<'a>(p: &'a plist::Value, k: &str) -> &'a plist::Value {
    p.as_dictionary()
        .and_then(|d| d.get(k))
        .unwrap_or_else(|| panic!("no {k} in {p:?}"))
}

#[test]
fn launchd_files_only_writes_a_well_formed_plist() {
    let svc = Svc::new();
    let client_socket = svc.client_socket(Socket::Runtime);
    let v = svc.json(
        Socket::Runtime,
        &["daemon", "install", "--launchd", "--files-only"],
    );
    assert_eq!(v["manager"], "launchd");
    assert_eq!(v["files"], serde_json::json!([svc.plist_path()]));
    assert!(svc.take_calls().is_empty(), "--files-only runs no tool");

    let p = plist::Value::from_file(svc.plist_path()).expect("a well-formed plist");
    assert_eq!(key(&p, "Label").as_string(), Some("dev.maos.maosd"));
    let args = key(&p, "ProgramArguments").as_array().expect("array");
    let maosd = args[0].as_string().expect("string");
    assert!(Path::new(maosd).is_absolute());
    assert_eq!(Path::new(maosd), canonical_maosd());
    let l = listeners(&p);
    let sock = l
        .get("SockPathName")
        .and_then(plist::Value::as_string)
        .expect("SockPathName");
    assert!(Path::new(sock).is_absolute());
    assert_eq!(Path::new(sock), client_socket);
    assert_eq!(
        l.get("SockPathMode")
            .and_then(plist::Value::as_signed_integer),
        Some(384)
    );
    let stderr = key(&p, "StandardErrorPath").as_string().expect("string");
    assert!(
        Path::new(stderr).starts_with(svc.env.home.join("logs")),
        "{stderr}"
    );
    let env = key(&p, "EnvironmentVariables");
    assert_eq!(
        key(env, "MAOS_HOME").as_string(),
        svc.env.home.to_str(),
        "MAOS_HOME is carried"
    );
    assert!(
        env.as_dictionary()
            .is_some_and(|d| !d.contains_key("MAOS_SOCKET")),
        "the socket comes from launchd, not from the environment"
    );
    // launchd creates neither the socket's directory nor the log's: install did, privately.
    {
        use std::os::unix::fs::PermissionsExt;
        let dir = client_socket.parent().expect("dir");
        let mode = std::fs::metadata(dir)
            .expect("socket dir")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o700);
        assert!(svc.env.home.join("logs").is_dir());
    }
}

#[test]
fn the_committed_plist_template_parses_with_the_required_keys() {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../launchd/dev.maos.maosd.plist");
    let p = plist::Value::from_file(&path).expect("the committed template is a plist");
    assert_eq!(key(&p, "Label").as_string(), Some("dev.maos.maosd"));
    assert_eq!(
        key(&p, "ProgramArguments").as_array().map(Vec::len),
        Some(1)
    );
    let l = listeners(&p);
    assert!(
        l.get("SockPathName")
            .and_then(plist::Value::as_string)
            .is_some()
    );
    assert_eq!(
        l.get("SockPathMode")
            .and_then(plist::Value::as_signed_integer),
        Some(384)
    );
    assert_eq!(key(&p, "AbandonProcessGroup").as_boolean(), Some(true));
    assert!(
        p.as_dictionary()
            .is_some_and(|d| !d.contains_key("EnvironmentVariables")),
        "the environment is added at install only"
    );
}

#[test]
fn uninstall_files_only_removes_exactly_what_install_wrote() {
    let svc = Svc::new();
    let before = svc.files();
    for (flag, expected) in [
        (
            "--systemd",
            vec![
                svc.unit_dir().join("maosd.service"),
                svc.unit_dir().join("maosd.socket"),
            ],
        ),
        ("--launchd", vec![svc.plist_path()]),
    ] {
        svc.json(
            Socket::Runtime,
            &["daemon", "install", flag, "--files-only"],
        );
        let added: Vec<PathBuf> = svc.files().difference(&before).cloned().collect();
        assert_eq!(added, expected, "{flag}");

        let v = svc.json(
            Socket::Runtime,
            &["daemon", "uninstall", flag, "--files-only"],
        );
        assert_eq!(v["installed"], true);
        let mut removed: Vec<PathBuf> = v["removed"]
            .as_array()
            .expect("removed")
            .iter()
            .map(|p| PathBuf::from(p.as_str().expect("path")))
            .collect();
        removed.sort();
        assert_eq!(removed, expected, "{flag}");
        assert_eq!(svc.files(), before, "{flag}: back to what was there");

        // Nothing installed: said so, exit 0.
        let out = svc.run(Socket::Runtime, &["daemon", "uninstall", flag]);
        assert!(out.status.success(), "{}", describe(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        assert!(text.contains("is installed"), "{text}");
        assert!(text.contains("nothing to do"), "{text}");
        let v = svc.json(Socket::Runtime, &["daemon", "uninstall", flag]);
        assert_eq!(v["installed"], false);
        assert_eq!(v["removed"], serde_json::json!([]));
    }
    assert!(
        svc.take_calls().is_empty(),
        "nothing was loaded: no tool ran"
    );
}

#[test]
fn bad_input_is_refused_in_one_line_and_writes_nothing() {
    let svc = Svc::new();
    let before = svc.files();
    let f = svc.fail(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--launchd"],
    );
    assert_eq!(f.exit, 2);
    assert!(f.message.contains("cannot be used with"), "{}", f.message);
    assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);

    // The config directory is a file: nothing can be created under it (root included).
    std::fs::write(&svc.config, "not a directory").expect("write");
    let f = svc.fail(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert_eq!(f.exit, 1);
    assert!(
        f.message.contains(svc.config.to_str().expect("utf-8")),
        "{}",
        f.message
    );
    assert!(f.message.contains("nothing was installed"), "{}", f.message);
    assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    assert_eq!(read(&svc.config), "not a directory");
    assert_eq!(svc.files(), before);
    assert!(svc.take_calls().is_empty(), "no tool ran");
    std::fs::remove_file(&svc.config).expect("rm");

    // A read-only unit directory. Root ignores file modes: it runs `maos` without that power.
    if maos_tests::is_root() && !cfg!(target_os = "linux") {
        maos_tests::skip_unless_ci("the read-only directory case: root writes anyway");
    } else {
        use std::os::unix::fs::PermissionsExt;
        let dir = svc.unit_dir();
        std::fs::create_dir_all(&dir).expect("mkdir");
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o500)).expect("chmod");
        let mut cmd = svc.command(
            Socket::Runtime,
            &["--json", "daemon", "install", "--systemd", "--files-only"],
        );
        #[cfg(target_os = "linux")]
        if maos_tests::is_root() {
            maos_tests::without_dac_override(&mut cmd);
        }
        let f = failure_of(
            "install into a read-only directory",
            &run_with_timeout(cmd, COMMAND_TIMEOUT),
        );
        assert_eq!(f.exit, 1, "{f:?}");
        assert!(f.message.contains("nothing was installed"), "{}", f.message);
        assert_eq!(
            std::fs::read_dir(&dir).expect("dir").count(),
            0,
            "no file left"
        );
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).expect("chmod");
    }

    // A relative MAOS_SOCKET cannot be listened on by a service.
    let mut cmd = svc.command(
        Socket::Env,
        &["--json", "daemon", "install", "--systemd", "--files-only"],
    );
    cmd.env("MAOS_SOCKET", "relative/maosd.sock");
    let f = failure_of(
        "install with a relative socket",
        &run_with_timeout(cmd, COMMAND_TIMEOUT),
    );
    assert_eq!(f.exit, 1);
    assert!(f.message.contains("not an absolute path"), "{}", f.message);
    assert_eq!(svc.files(), before);
}

/// The doctor's `service` check.
fn service_check(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "service")
        .map(|c| {
            (
                c["level"].as_str().unwrap_or_default().to_string(),
                c["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

#[test]
fn doctor_reports_on_demand_then_the_installed_service() {
    let svc = Svc::new();
    // A user manager answers.
    svc.fake_tool("systemctl", "exit 0");
    let r = svc.doctor(Socket::Runtime);
    assert_eq!(r["service"]["mode"], "on_demand");
    let c = service_check(&r);
    assert_eq!(c.len(), 1, "{c:?}");
    assert_eq!(c[0].0, "info");
    assert!(
        c[0].1.starts_with("on demand: the client starts maosd"),
        "{}",
        c[0].1
    );

    svc.json(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--files-only"],
    );
    let socket_unit = svc.unit_dir().join("maosd.socket");
    let r = svc.doctor(Socket::Runtime);
    assert_eq!(r["service"]["mode"], "systemd");
    assert_eq!(r["service"]["file"], socket_unit.to_str().expect("utf-8"));
    assert_eq!(r["service"]["socket"], r["socket"]);
    assert_eq!(r["service"]["enabled"], false);
    let c = service_check(&r);
    assert_eq!(c[0].0, "warn", "installed but not enabled: {c:?}");
    assert!(c[0].1.contains("not enabled"), "{}", c[0].1);

    // What `systemctl --user enable` does on disk.
    let wants = svc.unit_dir().join("sockets.target.wants");
    std::fs::create_dir_all(&wants).expect("mkdir");
    std::os::unix::fs::symlink(&socket_unit, wants.join("maosd.socket")).expect("link");
    let r = svc.doctor(Socket::Runtime);
    assert_eq!(r["service"]["enabled"], true);
    let c = service_check(&r);
    assert_eq!(c[0].0, "ok", "{c:?}");
    assert!(
        c[0].1.starts_with("systemd user service installed ("),
        "{}",
        c[0].1
    );

    // Human form: one line.
    let mut cmd = svc.command(Socket::Runtime, &["doctor"]);
    cmd.env("MAOS_NO_AUTOSTART", "1");
    let out = run_with_timeout(cmd, COMMAND_TIMEOUT);
    let text = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        text.lines()
            .filter(|l| l.contains("service: systemd user service installed"))
            .count(),
        1,
        "{text}"
    );

    // A client whose socket differs (MAOS_SOCKET) is told the service is not for it.
    let r = svc.doctor(Socket::Env);
    assert_eq!(r["service"]["mode"], "on_demand");
    let c = service_check(&r);
    assert_eq!(c[0].0, "warn");
    assert!(c[0].1.contains("for another socket"), "{}", c[0].1);

    // Where no user manager answers (a container), the units cannot work: named as the fault,
    // with the way out; and once they are gone, `daemon install` is not recommended.
    svc.fake_tool(
        "systemctl",
        "echo 'Failed to connect to bus: No medium found' >&2\nexit 1",
    );
    let r = svc.doctor(Socket::Runtime);
    let c = service_check(&r);
    assert_eq!(c[0].0, "fail", "{c:?}");
    assert!(
        c[0].1.contains("no systemd user manager answers here")
            && c[0].1.contains("No medium found")
            && c[0].1.contains("run `maos daemon uninstall`"),
        "{}",
        c[0].1
    );
    svc.json(
        Socket::Runtime,
        &["daemon", "uninstall", "--systemd", "--files-only"],
    );
    let r = svc.doctor(Socket::Runtime);
    let c = service_check(&r);
    assert_eq!(c[0].0, "info", "{c:?}");
    assert!(
        c[0].1.contains("cannot run") && !c[0].1.contains("sets up a service"),
        "{}",
        c[0].1
    );
}

#[test]
fn doctor_warns_about_a_daemon_the_service_does_not_own() {
    let svc = Svc::new();
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    let pid = started["pid"].as_u64().expect("pid");
    svc.json(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--files-only"],
    );
    let r = svc.doctor(Socket::Runtime);
    let daemon = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["check"] == "daemon")
        .unwrap_or_else(|| panic!("no daemon check in {r}"));
    assert!(
        daemon["detail"]
            .as_str()
            .unwrap_or_default()
            .contains("started by"),
        "{daemon}"
    );
    let c = service_check(&r);
    assert!(
        c.iter().any(|(level, d)| level == "warn"
            && d.contains(&format!("maosd (pid {pid}) was started by"))),
        "{c:?}"
    );
    svc.json(Socket::Runtime, &["daemon", "stop"]);
}

const ACTIVE_SERVICE: &str = r#"case "$*" in
  *"is-active --quiet maosd.service") [ -n "$FAKE_ACTIVE" ] && exit 0; exit 3;;
  *is-active*) exit 3;;
esac
exit 0"#;

#[test]
fn install_hands_a_client_started_daemons_socket_to_systemd() {
    let svc = Svc::new();
    svc.fake_tool("systemctl", ACTIVE_SERVICE);
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    let pid = started["pid"].as_u64().expect("pid") as u32;
    assert!(svc.take_calls().is_empty());

    let v = svc.json(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert_eq!(v["enabled"], true);
    assert_eq!(v["stopped_pid"], pid, "the client's daemon made way");
    assert_eq!(v["restarted"], false);
    assert!(!alive(pid), "install waited for the daemon to exit");
    assert_eq!(
        svc.take_calls(),
        vec![
            "systemctl --user is-active --quiet maosd.service",
            "systemctl --user is-active --quiet maosd.socket",
            "systemctl --user daemon-reload",
            "systemctl --user enable --now maosd.socket",
        ]
    );
    assert!(svc.unit_dir().join("maosd.service").is_file());

    // Upgrade while the service runs: rewrite, reload, restart it.
    let mut cmd = svc.command(
        Socket::Runtime,
        &["--json", "daemon", "install", "--systemd"],
    );
    cmd.env("FAKE_ACTIVE", "1");
    let v = json_of("reinstall", &run_with_timeout(cmd, COMMAND_TIMEOUT));
    assert_eq!(v["restarted"], true);
    assert_eq!(v["stopped_pid"], Value::Null, "no daemon to stop");
    let calls = svc.take_calls();
    assert_eq!(
        calls.last().map(String::as_str),
        Some("systemctl --user try-restart maosd.service"),
        "{calls:?}"
    );

    let v = svc.json(Socket::Runtime, &["daemon", "uninstall"]);
    assert_eq!(v["disabled"], true);
    assert_eq!(
        svc.take_calls(),
        vec![
            "systemctl --user disable --now maosd.socket maosd.service",
            "systemctl --user daemon-reload",
        ]
    );
    assert!(!svc.unit_dir().join("maosd.socket").exists());
    assert!(!svc.unit_dir().join("maosd.service").exists());
}

#[test]
fn a_failing_systemctl_is_named_and_the_running_daemon_kept() {
    let svc = Svc::new();
    svc.fake_tool(
        "systemctl",
        "echo 'Failed to connect to bus: No medium found' >&2\nexit 1",
    );
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    let pid = started["pid"].as_u64().expect("pid") as u32;

    let f = svc.fail(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert_eq!(f.exit, 1);
    for part in [
        "`systemctl --user daemon-reload` failed: Failed to connect to bus: No medium found",
        "nothing was installed",
        "systemd user manager",
        "maosd keeps starting on demand",
    ] {
        assert!(f.message.contains(part), "{part:?} not in {}", f.message);
    }
    assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    // Rolled back: no unit is left to keep the client from starting maosd on demand.
    assert!(!svc.unit_dir().join("maosd.socket").exists());
    assert!(!svc.unit_dir().join("maosd.service").exists());
    assert!(
        alive(pid),
        "the manager failed before the daemon was stopped"
    );
    let status = svc.json(Socket::Runtime, &["daemon", "status"]);
    assert_eq!(status["pid"], pid);
    svc.json(Socket::Runtime, &["daemon", "stop"]);
    // The next command starts a daemon on demand again.
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    assert_ne!(started["pid"], pid);
    let v = svc.json(Socket::Runtime, &["daemon", "uninstall", "--systemd"]);
    assert_eq!(v["installed"], false, "{v}");

    // Failing after the daemon was stopped (enable): rolled back, and a daemon started again.
    svc.fake_tool(
        "systemctl",
        r#"case "$*" in *enable*) echo 'Failed to enable unit' >&2; exit 1;; *is-active*) exit 3;; esac
exit 0"#,
    );
    let before = svc.json(Socket::Runtime, &["daemon", "status"]);
    let f = svc.fail(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert!(
        f.message.contains("Failed to enable unit") && f.message.contains("removed"),
        "{}",
        f.message
    );
    assert!(!svc.unit_dir().join("maosd.socket").exists());
    assert!(!svc.unit_dir().join("maosd.service").exists());
    let after = svc.json(Socket::Runtime, &["daemon", "status"]);
    assert_ne!(after["pid"], before["pid"], "install stopped the old one");
    assert_eq!(after["started_by"], "client", "{after}");
    svc.json(Socket::Runtime, &["daemon", "stop"]);
}

/// On this machine's own `systemctl` (no fake): where no user manager answers (a container,
/// as CI's), `daemon install` fails in one line, leaves no file, and maosd still starts on
/// demand; `doctor` does not recommend it. Where a user manager answers, skipped: the test
/// does not touch a real one.
#[test]
fn install_where_no_user_systemd_runs_leaves_nothing_behind() {
    let svc = Svc::new();
    let probe = Command::new("systemctl")
        .args(["--user", "show-environment"])
        .output();
    if probe.as_ref().is_ok_and(|o| o.status.success()) {
        eprintln!(
            "skipped: a systemd user manager answers here; this case needs one that does not"
        );
        return;
    }
    let f = svc.fail(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert_eq!(f.exit, 1, "{}", f.message);
    assert!(
        f.message.contains("nothing was installed") && f.message.contains("on demand"),
        "{}",
        f.message
    );
    assert!(svc.files().is_empty(), "left behind: {:?}", svc.files());
    let started = svc.json(Socket::Runtime, &["daemon", "start"]);
    assert_eq!(started["started_by"], "client", "{started}");
    let r = svc.doctor(Socket::Runtime);
    let c = service_check(&r);
    assert!(
        c[0].1.contains("cannot run") && !c[0].1.contains("sets up a service"),
        "{c:?}"
    );
    svc.json(Socket::Runtime, &["daemon", "stop"]);
}

#[test]
fn launchd_install_bootstraps_and_uninstall_boots_out() {
    let svc = Svc::new();
    svc.fake_tool(
        "launchctl",
        r#"case "$1" in print) exit 113;; esac
exit 0"#,
    );
    // SAFETY: getuid has no preconditions.
    let uid = unsafe { libc::getuid() };
    let v = svc.json(Socket::Runtime, &["daemon", "install", "--launchd"]);
    assert_eq!(v["enabled"], true);
    let plist = svc.plist_path();
    assert_eq!(
        svc.take_calls(),
        vec![
            format!("launchctl print gui/{uid}/dev.maos.maosd"),
            format!("launchctl enable gui/{uid}/dev.maos.maosd"),
            format!("launchctl bootstrap gui/{uid} {}", plist.display()),
        ]
    );
    let v = svc.json(Socket::Runtime, &["daemon", "uninstall", "--launchd"]);
    assert_eq!(v["disabled"], true);
    assert_eq!(
        svc.take_calls(),
        vec![format!("launchctl bootout gui/{uid}/dev.maos.maosd")]
    );
    assert!(!plist.exists());
}

#[test]
fn a_daemon_that_cannot_be_stopped_is_named_with_what_to_do() {
    use maos_proto::{ClientMsg, ErrorBody, ErrorCode, ServerMsg, read_frame, write_frame};
    let svc = Svc::new();
    svc.fake_tool("systemctl", ACTIVE_SERVICE);
    // An old daemon on the client's socket that refuses this client's protocol.
    let socket = svc.client_socket(Socket::Runtime);
    std::fs::create_dir_all(socket.parent().expect("dir")).expect("mkdir");
    let listener = std::os::unix::net::UnixListener::bind(&socket).expect("bind");
    let server = std::thread::spawn(move || {
        let (mut s, _) = listener.accept().expect("accept");
        let _: ClientMsg = read_frame(&mut s).expect("hello");
        let error = ErrorBody::new(ErrorCode::ProtocolMismatch, "daemon speaks protocol 0");
        write_frame(&mut s, &ServerMsg::Error { error }).expect("write");
    });

    let f = svc.fail(Socket::Runtime, &["daemon", "install", "--systemd"]);
    server.join().expect("fake daemon");
    assert_eq!(f.exit, 1);
    assert!(
        f.message.contains(&format!(
            "cannot stop the maosd answering on {}",
            socket.display()
        )),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("daemon speaks protocol 0"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("maos daemon install` again"),
        "{}",
        f.message
    );
    assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    let calls = svc.take_calls();
    assert!(
        !calls.iter().any(|c| c.contains("enable")),
        "nothing enabled while the old daemon holds the socket: {calls:?}"
    );
}

#[test]
fn while_a_service_owns_the_socket_neither_client_nor_daemon_starts_one_of_its_own() {
    let svc = Svc::new();
    svc.json(
        Socket::Runtime,
        &["daemon", "install", "--systemd", "--files-only"],
    );
    let socket = svc.client_socket(Socket::Runtime);

    // The socket unit is installed but nothing listens (not enabled, or failed): the client
    // refuses to start a daemon on systemd's socket and says what to run.
    let f = svc.fail(Socket::Runtime, &["ps"]);
    assert_eq!(f.exit, 3, "{f:?}");
    assert_eq!(f.stderr.trim().lines().count(), 1, "{}", f.stderr);
    assert!(f.message.contains("systemd service"), "{}", f.message);
    assert!(
        f.message
            .contains("systemctl --user enable --now maosd.socket"),
        "{}",
        f.message
    );
    assert!(
        !socket.exists(),
        "a daemon of the client's own took the socket"
    );
    assert!(svc.env.daemons().is_empty());

    // maosd started by hand refuses too, in one line, and leaves no socket.
    let mut daemon = svc.maosd_command(Socket::Runtime);
    daemon.arg("--foreground");
    let out = run_with_timeout(daemon, COMMAND_TIMEOUT);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let last = err.trim().lines().last().unwrap_or_default();
    assert!(
        last.starts_with("maosd: ") && last.contains("belongs to the systemd service"),
        "{err}"
    );
    assert!(!socket.exists());

    // Uninstalled, the client starts the daemon on demand again.
    svc.json(
        Socket::Runtime,
        &["daemon", "uninstall", "--systemd", "--files-only"],
    );
    let out = svc.run(Socket::Runtime, &["ps"]);
    assert!(out.status.success(), "{}", describe(&out));
    svc.json(Socket::Runtime, &["daemon", "stop"]);
}

#[test]
fn install_stops_an_older_client_started_daemon_that_cannot_take_a_stop_request() {
    let svc = Svc::new();
    svc.fake_tool("systemctl", ACTIVE_SERVICE);
    let socket = svc.client_socket(Socket::Runtime);
    // An older daemon (another protocol), as the previous release's client started it.
    let mut old = svc
        .maosd_command(Socket::Runtime)
        .env("MAOS_TEST_PROTOCOL", "0")
        .arg("--autostarted")
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("spawn the old maosd");
    maos_tests::wait_until(maos_tests::DEADLINE, "the old daemon listens", || {
        std::os::unix::net::UnixStream::connect(&socket).is_ok()
    });

    let v = svc.json(Socket::Runtime, &["daemon", "install", "--systemd"]);
    assert_eq!(v["stopped_pid"], old.id(), "{v}");
    assert_eq!(v["enabled"], true);
    let status = old.wait().expect("reap the old daemon");
    assert!(status.success(), "stopped gracefully: {status}");
    assert!(!socket.exists(), "its socket was left for systemd to bind");
}
