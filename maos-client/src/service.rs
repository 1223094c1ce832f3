//! `maos daemon install | uninstall`: maosd as a systemd user service or a launchd agent,
//! socket-activated: the service manager listens on the socket every client computes and starts
//! maosd on the first connection.
//!
//! The files written are the committed templates (`systemd/`, `launchd/`), embedded here, with
//! the absolute path of this installation's maosd, the socket and the environment filled in: the
//! repository and the installed files cannot drift.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

use maos_proto::service::{self as svc, Manager};
use maos_proto::{ErrorBody, ErrorCode, Reply, Request, paths};
use serde_json::json;

use crate::cli::ServiceArgs;
use crate::client::{Client, ClientError};
use crate::failure::{Failure, Res};
use crate::show::print_json;

const SOCKET_UNIT: &str = include_str!("../../systemd/maosd.socket");
const SERVICE_UNIT: &str = include_str!("../../systemd/maosd.service");
const PLIST: &str = include_str!("../../launchd/dev.maos.maosd.plist");

/// The template lines install replaces.
const DEFAULT_LISTEN: &str = "ListenStream=%t/maos/maosd.sock";
const DEFAULT_EXEC: &str = "ExecStart=/usr/local/bin/maosd";
const PLIST_MAOSD: &str = "@MAOSD@";
const PLIST_SOCKET: &str = "@SOCKET@";
const PLIST_STDERR: &str = "@STDERR@";
const PLIST_ENV: &str = "\t<!-- @ENVIRONMENT@ -->\n";

/// An install or uninstall failure: exit 1, one line.
fn fail(msg: impl Into<String>) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, msg),
        exit: 1,
    }
}

fn manager(args: &ServiceArgs) -> Manager {
    match (args.systemd, args.launchd) {
        (true, _) => Manager::Systemd,
        (_, true) => Manager::Launchd,
        _ => Manager::native(),
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// A path that a unit file or plist can hold: absolute, UTF-8, no control characters.
fn writable_path<'a>(what: &str, p: &'a Path) -> Result<&'a str, String> {
    let s = p
        .to_str()
        .ok_or_else(|| format!("{what} {} is not valid UTF-8", p.display()))?;
    if !p.is_absolute() {
        return Err(format!(
            "{what} {s} is not an absolute path; a service needs one (set it to an absolute path)"
        ));
    }
    if s.chars().any(char::is_control) || s.trim() != s {
        return Err(format!(
            "{what} {s:?} holds a control character or surrounding blanks, which a service file cannot carry"
        ));
    }
    Ok(s)
}

/// The maosd a service should run: the one next to this maos (else on PATH), canonical.
fn maosd_path() -> Result<PathBuf, String> {
    let bin = crate::client::daemon_binary();
    let found = if bin.is_absolute() {
        Some(bin)
    } else {
        std::env::var_os("PATH").and_then(|path| {
            std::env::split_paths(&path)
                .map(|d| d.join("maosd"))
                .find(|p| p.is_file())
        })
    };
    let here = std::env::current_exe()
        .ok()
        .and_then(|e| e.parent().map(Path::to_path_buf))
        .map(|d| d.display().to_string())
        .unwrap_or_else(|| "this maos's directory".into());
    found
        .and_then(|p| std::fs::canonicalize(p).ok())
        .filter(|p| p.is_file())
        .ok_or_else(|| {
            format!(
                "no maosd next to this maos ({here}) nor on PATH: install maosd beside maos, then run `maos daemon install` again"
            )
        })
}

/// Environment the service must carry so that the daemon uses the state directory the client
/// would start it with: `MAOS_HOME`, else (systemd) `XDG_STATE_HOME`, which a user manager
/// does not usually have.
fn service_environment(manager: Manager) -> Result<Vec<(&'static str, String)>, String> {
    let mut names = vec!["MAOS_HOME"];
    if manager == Manager::Systemd {
        names.push("XDG_STATE_HOME");
    }
    for name in names {
        if let Some(p) = env_path(name) {
            let s = writable_path(name, &p)?;
            return Ok(vec![(name, s.to_string())]);
        }
    }
    Ok(Vec::new())
}

/// `%` doubled: systemd expands specifiers in most settings.
fn systemd_escape_specifiers(s: &str) -> String {
    s.replace('%', "%%")
}

/// A value for ExecStart= or Environment=: quoted when it is not plain, with systemd's escapes
/// (`\\`, `\"`, `%%`, and `$$` for ExecStart=).
fn systemd_quote(s: &str, exec: bool) -> String {
    let plain = s
        .chars()
        .all(|c| c.is_ascii_alphanumeric() || "/._-+,:=@".contains(c));
    let mut out = String::with_capacity(s.len() + 2);
    for c in s.chars() {
        match c {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '%' => out.push_str("%%"),
            '$' if exec => out.push_str("$$"),
            c => out.push(c),
        }
    }
    if plain { out } else { format!("\"{out}\"") }
}

/// Replace the whole line `old` of `text` by `new` (a template invariant, unit-tested).
fn replace_line(text: &str, old: &str, new: &str) -> Result<String, String> {
    let mut found = false;
    let mut out = String::with_capacity(text.len() + new.len());
    for line in text.split_inclusive('\n') {
        if line.trim_end_matches('\n') == old && !found {
            found = true;
            out.push_str(new);
            out.push('\n');
        } else {
            out.push_str(line);
        }
    }
    if found {
        Ok(out)
    } else {
        Err(format!(
            "this maos's embedded template lacks the line {old:?} (a build bug)"
        ))
    }
}

/// The socket unit: the committed `%t` form when the client's socket is the default one under
/// `runtime_dir`, else the absolute path.
fn render_socket_unit(socket: &str, runtime_dir: Option<&Path>) -> Result<String, String> {
    let default = runtime_dir.map(|r| r.join("maos").join("maosd.sock"));
    if default.as_deref() == Some(Path::new(socket)) {
        return Ok(SOCKET_UNIT.to_string());
    }
    replace_line(
        SOCKET_UNIT,
        DEFAULT_LISTEN,
        &format!("ListenStream={}", systemd_escape_specifiers(socket)),
    )
}

fn render_service_unit(maosd: &str, env: &[(&str, String)]) -> Result<String, String> {
    let mut lines = format!("ExecStart={}", systemd_quote(maosd, true));
    for (name, value) in env {
        lines.push_str(&format!(
            "\nEnvironment={}",
            systemd_quote(&format!("{name}={value}"), false)
        ));
    }
    replace_line(SERVICE_UNIT, DEFAULT_EXEC, &lines)
}

fn render_plist(
    maosd: &str,
    socket: &str,
    stderr: &str,
    env: &[(&str, String)],
) -> Result<String, String> {
    let esc = svc::xml_escape;
    let mut environment = String::new();
    if !env.is_empty() {
        environment.push_str("\t<key>EnvironmentVariables</key>\n\t<dict>\n");
        for (name, value) in env {
            environment.push_str(&format!(
                "\t\t<key>{}</key>\n\t\t<string>{}</string>\n",
                esc(name),
                esc(value)
            ));
        }
        environment.push_str("\t</dict>\n");
    }
    let mut text = PLIST.to_string();
    for (placeholder, value) in [
        (PLIST_MAOSD, maosd),
        (PLIST_SOCKET, socket),
        (PLIST_STDERR, stderr),
    ] {
        let tag = format!("<string>{placeholder}</string>");
        if !text.contains(&tag) {
            return Err(format!(
                "this maos's embedded plist lacks {tag} (a build bug)"
            ));
        }
        text = text.replace(&tag, &format!("<string>{}</string>", esc(value)));
    }
    if !text.contains(PLIST_ENV) {
        return Err(
            "this maos's embedded plist lacks the environment placeholder (a build bug)".into(),
        );
    }
    Ok(text.replace(PLIST_ENV, &environment))
}

/// One file to write: where, what, and whether it differs from what is there.
struct Staged {
    path: PathBuf,
    tmp: PathBuf,
    changed: bool,
    /// What the file held before (None: it did not exist), to put back on a rollback.
    previous: Option<Vec<u8>>,
    /// Directories created for it, deepest first, removed again on a rollback.
    made_dirs: Vec<PathBuf>,
}

/// Write every file to a temporary beside it, then rename them all into place: a failure
/// leaves nothing behind.
fn write_all_atomic(files: &[(PathBuf, String)]) -> Result<Vec<Staged>, String> {
    let mut staged: Vec<Staged> = Vec::new();
    let cleanup = |staged: &[Staged]| {
        for s in staged {
            let _ = std::fs::remove_file(&s.tmp);
        }
    };
    for (path, text) in files {
        let dir = path
            .parent()
            .ok_or_else(|| format!("{} has no directory", path.display()))?;
        let made_dirs: Vec<PathBuf> = dir
            .ancestors()
            .take_while(|d| !d.exists())
            .map(Path::to_path_buf)
            .collect();
        if let Err(e) = std::fs::create_dir_all(dir) {
            cleanup(&staged);
            return Err(format!(
                "cannot create {}: {e}; nothing was installed",
                dir.display()
            ));
        }
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let tmp = dir.join(format!(".{name}.maos-{}.tmp", std::process::id()));
        let written = (|| {
            use std::os::unix::fs::OpenOptionsExt;
            let mut f = std::fs::OpenOptions::new()
                .write(true)
                .create(true)
                .truncate(true)
                .mode(0o644)
                .open(&tmp)?;
            f.write_all(text.as_bytes())?;
            f.sync_all()
        })();
        if let Err(e) = written {
            let _ = std::fs::remove_file(&tmp);
            cleanup(&staged);
            return Err(format!(
                "cannot write {}: {e}; nothing was installed",
                path.display()
            ));
        }
        let previous = std::fs::read(path).ok();
        let changed = previous.as_deref() != Some(text.as_bytes());
        staged.push(Staged {
            path: path.clone(),
            tmp,
            changed,
            previous,
            made_dirs,
        });
    }
    for (i, s) in staged.iter().enumerate() {
        if let Err(e) = std::fs::rename(&s.tmp, &s.path) {
            cleanup(&staged[i..]);
            return Err(format!(
                "cannot replace {}: {e}; run `maos daemon install` again",
                s.path.display()
            ));
        }
    }
    Ok(staged)
}

/// The last non-empty line a tool printed (stderr first), or how it could not run.
fn run_tool(tool: &str, args: &[&str]) -> Result<(), String> {
    let shown = format!("{tool} {}", args.join(" "));
    match Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::null())
        .output()
    {
        Ok(out) if out.status.success() => Ok(()),
        Ok(out) => {
            let text = [&out.stderr, &out.stdout]
                .iter()
                .map(|b| String::from_utf8_lossy(b).into_owned())
                .find_map(|t| {
                    t.lines()
                        .rev()
                        .map(str::trim)
                        .find(|l| !l.is_empty())
                        .map(str::to_string)
                })
                .unwrap_or_else(|| out.status.to_string());
            Err(format!("`{shown}` failed: {text}"))
        }
        Err(e) => Err(format!("cannot run `{shown}`: {e}")),
    }
}

/// Whether a systemd user manager answers here (`systemctl --user show-environment`), else
/// why not: without one a user service cannot run (most containers, WSL without systemd, an
/// ssh session without lingering).
pub fn systemd_user_manager() -> Result<(), String> {
    run_tool("systemctl", &["--user", "show-environment"])
}

fn tool_ok(tool: &str, args: &[&str]) -> bool {
    Command::new(tool)
        .args(args)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// A daemon that a client (or a person) started on `socket` would keep the service manager
/// from taking the socket: stop it, as `maos daemon stop` does. A service's own daemon is left
/// to its manager. The pid of the stopped daemon, if any.
fn stop_unmanaged_daemon(socket: &Path, manager: Manager) -> Res<Option<u32>> {
    let cannot = |why: String| {
        fail(format!(
            "cannot stop the maosd answering on {} so that {} can take its socket: {why}; stop it (`maos daemon stop`, or kill the pid in maosd.pid under the maos home), then run `maos daemon install` again",
            socket.display(),
            manager.as_str()
        ))
    };
    let mut c = match Client::connect(false) {
        Ok(c) => c,
        Err(ClientError::Unavailable(_)) => {
            remove_stale_socket(socket);
            return Ok(None);
        }
        Err(e) => return Err(cannot(e.body().message)),
    };
    let pid = match c.request(None, Request::DaemonStatus) {
        Ok(Reply::Daemon(d)) if d.started_by.is_service() => return Ok(None),
        Ok(Reply::Daemon(d)) => {
            c.request(None, Request::DaemonStop)
                .map_err(|e| cannot(e.body().message))?;
            d.pid
        }
        Ok(_) => return Err(cannot("unexpected answer to a status request".into())),
        // An older daemon (the upgrade this install is part of) cannot take the request: stop
        // it with a signal, as `maos daemon stop` does.
        Err(ClientError::Mismatch(m)) if !m.started_by.is_service() => {
            crate::client::terminate(m.pid).map_err(|e| cannot(e.to_string()))?;
            m.pid
        }
        Err(ClientError::Mismatch(_)) => return Ok(None),
        Err(e) => return Err(cannot(e.body().message)),
    };
    drop(c);
    crate::client::wait_for_exit(pid)?;
    remove_stale_socket(socket);
    Ok(Some(pid))
}

/// Remove a socket file nothing listens on, so that the manager can bind the path.
fn remove_stale_socket(socket: &Path) {
    use std::os::unix::fs::FileTypeExt;
    let is_socket = std::fs::symlink_metadata(socket).is_ok_and(|m| m.file_type().is_socket());
    if is_socket
        && std::os::unix::net::UnixStream::connect(socket)
            .is_err_and(|e| e.kind() == std::io::ErrorKind::ConnectionRefused)
    {
        let _ = std::fs::remove_file(socket);
    }
}

/// What install did, for both outputs.
struct Done {
    manager: Manager,
    files: Vec<Staged>,
    maosd: PathBuf,
    socket: String,
    environment: Vec<(&'static str, String)>,
    enabled: bool,
    stopped: Option<u32>,
    restarted: bool,
}

pub fn install(args: &ServiceArgs, json: bool) -> Res {
    let manager = manager(args);
    let maosd = maosd_path().map_err(fail)?;
    let maosd_s = writable_path("maosd", &maosd).map_err(fail)?.to_string();
    let socket_path = paths::socket_path();
    let socket = writable_path("the socket (MAOS_SOCKET)", &socket_path)
        .map_err(fail)?
        .to_string();
    let environment = service_environment(manager).map_err(fail)?;
    let files = match manager {
        Manager::Systemd => {
            let dir = svc::systemd_unit_dir().ok_or_else(|| {
                fail("cannot find the systemd user unit directory: set HOME (or XDG_CONFIG_HOME)")
            })?;
            let runtime = env_path("XDG_RUNTIME_DIR");
            vec![
                (
                    dir.join(svc::SYSTEMD_SOCKET_UNIT),
                    render_socket_unit(&socket, runtime.as_deref()).map_err(fail)?,
                ),
                (
                    dir.join(svc::SYSTEMD_SERVICE_UNIT),
                    render_service_unit(&maosd_s, &environment).map_err(fail)?,
                ),
            ]
        }
        Manager::Launchd => {
            let plist = svc::launchd_plist_path().ok_or_else(|| {
                fail("cannot find ~/Library/LaunchAgents: HOME is not set to an absolute path")
            })?;
            let home = paths::home_dir().map_err(|e| fail(e.to_string()))?;
            let logs = home.join("logs");
            let stderr = logs.join("maosd.stderr");
            let stderr_s = writable_path("MAOS_HOME", &stderr).map_err(fail)?;
            let text = render_plist(&maosd_s, &socket, stderr_s, &environment).map_err(fail)?;
            // launchd creates neither the socket's directory nor the log's.
            let dir = socket_path
                .parent()
                .ok_or_else(|| fail(format!("bad socket path {socket}")))?;
            paths::ensure_private_dir(dir).map_err(|e| fail(e.to_string()))?;
            paths::private_dir_all(&logs)
                .map_err(|e| fail(format!("cannot create {}: {e}", logs.display())))?;
            vec![(plist, text)]
        }
    };
    let staged = write_all_atomic(&files).map_err(fail)?;
    let mut done = Done {
        manager,
        files: staged,
        maosd,
        socket,
        environment,
        enabled: false,
        stopped: None,
        restarted: false,
    };
    if !args.files_only {
        // The service manager cannot take the files (no user manager runs: a container, WSL,
        // an ssh session without lingering): put back what was there, so that no unit is left
        // that would keep the client from starting maosd on demand, and start again the
        // daemon this install stopped.
        let failed = |e: String, done: &Done| {
            let undone = rollback(manager, &done.files);
            if done.stopped.is_some() {
                let _ = Client::connect(true);
            }
            let why = match manager {
                Manager::Systemd => {
                    " (a user service needs a running systemd user manager, which most containers, WSL without systemd and ssh sessions without `loginctl enable-linger` lack)"
                }
                Manager::Launchd => "",
            };
            fail(match undone {
                Ok(undone) => format!(
                    "{e}; nothing was installed: {undone}, and maosd keeps starting on demand{why}"
                ),
                Err(left) => format!(
                    "{e}; undoing the install failed ({left}): run `maos daemon uninstall`{why}"
                ),
            })
        };
        // The manager answers (and knows the new files) before a running daemon is stopped.
        let before = match manager {
            Manager::Systemd => prepare_systemd(),
            Manager::Launchd => prepare_launchd(),
        }
        .map_err(|e| failed(e, &done))?;
        // The files are written: from now on a client does not start a daemon of its own on
        // this socket, so none can slip in between this stop and the manager's start.
        done.stopped = stop_unmanaged_daemon(&socket_path, manager).inspect_err(|_| {
            let _ = rollback(manager, &done.files);
        })?;
        done.restarted = match manager {
            Manager::Systemd => enable_systemd(&done, before),
            Manager::Launchd => enable_launchd(&done, before),
        }
        .map_err(|e| failed(e, &done))?;
        done.enabled = true;
    }
    report_install(&done, args.files_only, json)
}

/// Undo what install wrote: each file back to what it held, or removed when it was new; then
/// `systemctl enable`'s link if it now dangles, and a daemon-reload (best effort: the manager
/// is what failed). `Err` names what could not be undone.
fn rollback(manager: Manager, files: &[Staged]) -> Result<String, String> {
    let mut left = Vec::new();
    let (mut removed, mut restored) = (Vec::new(), Vec::new());
    for s in files {
        match &s.previous {
            None => removed.push(s.path.display().to_string()),
            Some(_) => restored.push(s.path.display().to_string()),
        }
        let undone = match &s.previous {
            None => std::fs::remove_file(&s.path).or_else(|e| match e.kind() {
                std::io::ErrorKind::NotFound => Ok(()),
                _ => Err(e),
            }),
            Some(_) if !s.changed => Ok(()),
            Some(old) => {
                std::fs::write(&s.tmp, old).and_then(|()| std::fs::rename(&s.tmp, &s.path))
            }
        };
        if let Err(e) = undone {
            left.push(format!("{}: {e}", s.path.display()));
        }
    }
    let made = |s: &Staged| s.made_dirs.clone();
    let mut dirs: Vec<PathBuf> = files.iter().flat_map(made).collect();
    if manager == Manager::Systemd {
        if let Some(dir) = files.first().and_then(|f| f.path.parent()) {
            let link = dir
                .join("sockets.target.wants")
                .join(svc::SYSTEMD_SOCKET_UNIT);
            let dangling = std::fs::symlink_metadata(&link)
                .is_ok_and(|m| m.file_type().is_symlink())
                && std::fs::metadata(&link).is_err();
            if dangling && let Err(e) = std::fs::remove_file(&link) {
                left.push(format!("{}: {e}", link.display()));
            }
        }
        let _ = tool_ok("systemctl", &["--user", "daemon-reload"]);
    }
    // Deepest first; a directory something else put files in meanwhile stays.
    dirs.sort_by_key(|d| std::cmp::Reverse(d.components().count()));
    for d in dirs {
        let _ = std::fs::remove_dir(d);
    }
    if !left.is_empty() {
        return Err(left.join("; "));
    }
    let mut said = Vec::new();
    if !removed.is_empty() {
        said.push(format!("removed {} again", removed.join(" and ")));
    }
    if !restored.is_empty() {
        said.push(format!("{} as it was before", restored.join(" and ")));
    }
    Ok(said.join(", "))
}

fn enable_hint(manager: Manager) -> String {
    match manager {
        Manager::Systemd => format!(
            "once systemd runs for your user, run `systemctl --user daemon-reload && systemctl --user enable --now {}`",
            svc::SYSTEMD_SOCKET_UNIT
        ),
        Manager::Launchd => format!(
            "run `launchctl bootstrap {} {}`",
            launchd_domain(),
            svc::launchd_plist_path()
                .map(|p| p.display().to_string())
                .unwrap_or_default()
        ),
    }
}

/// What was running before install touched the manager.
#[derive(Clone, Copy)]
struct Before {
    /// The service (systemd) or the agent (launchd) was loaded and running.
    service: bool,
    /// The systemd socket was listening.
    socket: bool,
}

/// Note what runs, and daemon-reload: this fails when no user manager runs.
fn prepare_systemd() -> Result<Before, String> {
    let before = Before {
        service: tool_ok(
            "systemctl",
            &["--user", "is-active", "--quiet", svc::SYSTEMD_SERVICE_UNIT],
        ),
        socket: tool_ok(
            "systemctl",
            &["--user", "is-active", "--quiet", svc::SYSTEMD_SOCKET_UNIT],
        ),
    };
    run_tool("systemctl", &["--user", "daemon-reload"])?;
    Ok(before)
}

/// Enable and start the socket; on an upgrade restart what was running so that it runs the new
/// files. True when the service was restarted.
fn enable_systemd(done: &Done, before: Before) -> Result<bool, String> {
    let socket_unit = svc::SYSTEMD_SOCKET_UNIT;
    run_tool("systemctl", &["--user", "enable", "--now", socket_unit])?;
    let socket_changed = done.files.first().is_some_and(|s| s.changed);
    if before.socket && socket_changed {
        // A listening socket keeps its old path until restarted (which restarts the service).
        run_tool("systemctl", &["--user", "restart", socket_unit])?;
    }
    if before.service {
        // Graceful: in-flight requests commit; KillMode=process spares the agents.
        run_tool(
            "systemctl",
            &["--user", "try-restart", svc::SYSTEMD_SERVICE_UNIT],
        )?;
    }
    Ok(before.service)
}

fn launchd_domain() -> String {
    format!("gui/{}", paths::uid())
}

fn launchd_target() -> String {
    format!("{}/{}", launchd_domain(), svc::LAUNCHD_LABEL)
}

/// Unload a loaded agent (its daemon stops; the next connection starts the new one) and
/// clear a `launchctl disable`, which would refuse the load.
fn prepare_launchd() -> Result<Before, String> {
    let target = launchd_target();
    let loaded = tool_ok("launchctl", &["print", &target]);
    if loaded {
        run_tool("launchctl", &["bootout", &target])?;
        // bootout may return before launchd has let go of the job.
        let deadline = Instant::now() + Duration::from_secs(10);
        while tool_ok("launchctl", &["print", &target]) && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(100));
        }
    }
    run_tool("launchctl", &["enable", &target])?;
    Ok(Before {
        service: loaded,
        socket: loaded,
    })
}

/// Load the agent: launchd listens on the socket from now on. True when it was loaded before
/// (and so reloaded).
fn enable_launchd(done: &Done, before: Before) -> Result<bool, String> {
    let plist = done
        .files
        .first()
        .map(|s| s.path.display().to_string())
        .unwrap_or_default();
    run_tool("launchctl", &["bootstrap", &launchd_domain(), &plist])?;
    Ok(before.service)
}

fn report_install(done: &Done, files_only: bool, json: bool) -> Res {
    let manager = done.manager.as_str();
    if json {
        let env: serde_json::Map<String, serde_json::Value> = done
            .environment
            .iter()
            .map(|(k, v)| ((*k).to_string(), json!(v)))
            .collect();
        return print_json(&json!({
            "manager": manager,
            "files": done.files.iter().map(|s| &s.path).collect::<Vec<_>>(),
            "changed": done.files.iter().any(|s| s.changed),
            "maosd": done.maosd,
            "socket": done.socket,
            "environment": env,
            "enabled": done.enabled,
            "stopped_pid": done.stopped,
            "restarted": done.restarted,
        }));
    }
    for s in &done.files {
        let verb = if s.changed { "wrote" } else { "unchanged" };
        outln!("{verb} {}", s.path.display());
    }
    outln!("  maosd  {}", done.maosd.display());
    outln!("  socket {}", done.socket);
    for (k, v) in &done.environment {
        outln!("  env    {k}={v}");
    }
    if let Some(pid) = done.stopped {
        outln!(
            "stopped maosd (pid {pid}), started outside {manager}, so that {manager} takes its socket"
        );
    }
    if files_only {
        outln!("files only, nothing enabled: {}", enable_hint(done.manager));
        return Ok(());
    }
    match done.manager {
        Manager::Systemd => outln!(
            "enabled {}: systemd listens on the socket and starts maosd on the first connection, also after every login",
            svc::SYSTEMD_SOCKET_UNIT
        ),
        Manager::Launchd => outln!(
            "loaded {}: launchd listens on the socket and starts maosd on the first connection, also after every login",
            svc::LAUNCHD_LABEL
        ),
    }
    if done.restarted {
        outln!("restarted the running maosd so that it runs these files (its agents keep running)");
    }
    Ok(())
}

pub fn uninstall(args: &ServiceArgs, json: bool) -> Res {
    let manager = manager(args);
    let files: Vec<PathBuf> = match manager {
        Manager::Systemd => {
            let dir = svc::systemd_unit_dir().ok_or_else(|| {
                fail("cannot find the systemd user unit directory: set HOME (or XDG_CONFIG_HOME)")
            })?;
            vec![
                dir.join(svc::SYSTEMD_SOCKET_UNIT),
                dir.join(svc::SYSTEMD_SERVICE_UNIT),
            ]
        }
        Manager::Launchd => vec![svc::launchd_plist_path().ok_or_else(|| {
            fail("cannot find ~/Library/LaunchAgents: HOME is not set to an absolute path")
        })?],
    };
    let present: Vec<PathBuf> = files
        .iter()
        .filter(|p| std::fs::symlink_metadata(p).is_ok())
        .cloned()
        .collect();
    if present.is_empty() {
        let looked = files
            .iter()
            .map(|p| p.display().to_string())
            .collect::<Vec<_>>()
            .join(", ");
        if json {
            return print_json(&json!({
                "manager": manager.as_str(),
                "installed": false,
                "removed": [],
                "disabled": false,
                "warnings": [],
            }));
        }
        outln!(
            "no {} service for maosd is installed (no {looked}); nothing to do",
            manager.as_str()
        );
        return Ok(());
    }
    let mut warnings = Vec::new();
    let mut disabled = false;
    if !args.files_only {
        let stopped = match manager {
            Manager::Systemd => run_tool(
                "systemctl",
                &[
                    "--user",
                    "disable",
                    "--now",
                    svc::SYSTEMD_SOCKET_UNIT,
                    svc::SYSTEMD_SERVICE_UNIT,
                ],
            ),
            Manager::Launchd => run_tool("launchctl", &["bootout", &launchd_target()]),
        };
        match stopped {
            Ok(()) => disabled = true,
            Err(e) => warnings.push(format!("{e} (was it loaded?); removing the files anyway")),
        }
    }
    let mut removed = Vec::new();
    for p in &present {
        std::fs::remove_file(p).map_err(|e| {
            fail(format!(
                "cannot remove {}: {e}{}",
                p.display(),
                if removed.is_empty() {
                    String::new()
                } else {
                    format!(" (removed {})", display_all(&removed))
                }
            ))
        })?;
        removed.push(p.clone());
    }
    if manager == Manager::Systemd {
        // `systemctl enable`'s link, dangling now (left when systemctl was not run).
        if let Some(dir) = files.first().and_then(|f| f.parent()) {
            let link = dir
                .join("sockets.target.wants")
                .join(svc::SYSTEMD_SOCKET_UNIT);
            if std::fs::symlink_metadata(&link).is_ok_and(|m| m.file_type().is_symlink())
                && std::fs::remove_file(&link).is_ok()
            {
                removed.push(link);
            }
        }
        if !args.files_only
            && let Err(e) = run_tool("systemctl", &["--user", "daemon-reload"])
        {
            warnings.push(e);
        }
    }
    if json {
        return print_json(&json!({
            "manager": manager.as_str(),
            "installed": true,
            "removed": removed,
            "disabled": disabled,
            "warnings": warnings,
        }));
    }
    for w in &warnings {
        eprintln!("maos: warning: {w}");
    }
    if disabled {
        match manager {
            Manager::Systemd => outln!(
                "disabled and stopped {} and {} (agents of managed sessions keep running)",
                svc::SYSTEMD_SOCKET_UNIT,
                svc::SYSTEMD_SERVICE_UNIT
            ),
            Manager::Launchd => outln!(
                "booted out {} (agents of managed sessions keep running)",
                svc::LAUNCHD_LABEL
            ),
        }
    }
    for p in &removed {
        outln!("removed {}", p.display());
    }
    outln!("the client starts maosd on demand again");
    Ok(())
}

fn display_all(paths: &[PathBuf]) -> String {
    paths
        .iter()
        .map(|p| p.display().to_string())
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A unit's lines that are not comments.
    fn settings(unit: &str) -> impl Iterator<Item = &str> {
        unit.lines().filter(|l| !l.starts_with('#'))
    }

    #[test]
    fn templates_hold_the_lines_install_replaces() {
        assert!(SOCKET_UNIT.lines().any(|l| l == DEFAULT_LISTEN));
        assert!(SERVICE_UNIT.lines().any(|l| l == DEFAULT_EXEC));
        for p in [PLIST_MAOSD, PLIST_SOCKET, PLIST_STDERR] {
            assert!(PLIST.contains(&format!("<string>{p}</string>")), "{p}");
        }
        assert!(PLIST.contains(PLIST_ENV));
    }

    #[test]
    fn the_default_socket_keeps_the_runtime_dir_specifier() {
        let run = Path::new("/run/user/7");
        let unit = render_socket_unit("/run/user/7/maos/maosd.sock", Some(run)).unwrap();
        assert_eq!(unit, SOCKET_UNIT);
        let unit = render_socket_unit("/tmp/x%y/maosd.sock", Some(run)).unwrap();
        assert!(
            unit.contains("\nListenStream=/tmp/x%%y/maosd.sock\n"),
            "{unit}"
        );
        assert!(settings(&unit).all(|l| !l.contains("%t")), "{unit}");
        let back = svc::systemd_socket_path(&unit, Some(run), None).unwrap();
        assert_eq!(back, Path::new("/tmp/x%y/maosd.sock"));
        let unit = render_socket_unit("/run/user/7/maos/maosd.sock", None).unwrap();
        assert!(unit.contains("\nListenStream=/run/user/7/maos/maosd.sock\n"));
    }

    #[test]
    fn service_unit_quotes_what_systemd_would_split_or_expand() {
        let unit = render_service_unit("/usr/bin/maosd", &[]).unwrap();
        assert!(unit.contains("\nExecStart=/usr/bin/maosd\n#"), "{unit}");
        assert!(settings(&unit).all(|l| !l.starts_with("Environment=")));
        let unit = render_service_unit(
            "/opt/my tools/50%/$x/maosd",
            &[("MAOS_HOME", "/home/u/a \"b\"\\c%".into())],
        )
        .unwrap();
        assert!(
            unit.contains("\nExecStart=\"/opt/my tools/50%%/$$x/maosd\"\n"),
            "{unit}"
        );
        assert!(
            unit.contains("\nEnvironment=\"MAOS_HOME=/home/u/a \\\"b\\\"\\\\c%%\"\n"),
            "{unit}"
        );
    }

    #[test]
    fn plist_values_are_xml_escaped_and_environment_optional() {
        let p = render_plist(
            "/a&b/maosd",
            "/s<1>/maosd.sock",
            "/h/logs/maosd.stderr",
            &[],
        )
        .unwrap();
        assert!(p.contains("<string>/a&amp;b/maosd</string>"));
        assert!(!p.contains("<key>EnvironmentVariables</key>"));
        assert!(!p.contains("<string>@"), "{p}");
        assert_eq!(
            svc::launchd_socket_path(&p),
            Some(PathBuf::from("/s<1>/maosd.sock"))
        );
        let p = render_plist("/m", "/s", "/e", &[("MAOS_HOME", "/h'1".into())]).unwrap();
        assert!(p.contains(
            "\t<key>EnvironmentVariables</key>\n\t<dict>\n\t\t<key>MAOS_HOME</key>\n\t\t<string>/h&apos;1</string>\n\t</dict>\n"
        ));
    }

    #[test]
    fn paths_a_service_cannot_carry_are_refused() {
        assert!(writable_path("x", Path::new("rel/sock")).is_err());
        assert!(writable_path("x", Path::new("/a\nb")).is_err());
        assert!(writable_path("x", Path::new("/a ")).is_err());
        assert_eq!(writable_path("x", Path::new("/a b")), Ok("/a b"));
    }
}
