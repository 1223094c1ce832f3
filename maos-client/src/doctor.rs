//! `maos doctor`: is this machine set up so that agents are really coordinated? It checks what
//! a user cannot see from the outside: the hooks are installed (and complete), the `maos` that
//! the hooks run is on PATH, how the daemon is run (a systemd or launchd service, or on demand
//! by the client), the daemon answers, it is the same version as this client, and the
//! project's database is healthy. Each check prints one line; the exit code is 1 when any
//! check failed (warnings do not fail).

use std::path::{Path, PathBuf};

use maos_proto::service::{self as svc, Manager};
use maos_proto::{Cli, Reply, Request, paths};
use serde::Serialize;

use crate::client::Client;
use crate::install::{self, Installed};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "lowercase")]
enum Level {
    Ok,
    Info,
    Warn,
    Fail,
}

#[derive(Debug, Serialize)]
struct Check {
    check: &'static str,
    level: Level,
    detail: String,
}

fn check(check: &'static str, level: Level, detail: impl Into<String>) -> Check {
    Check {
        check,
        level,
        detail: detail.into(),
    }
}

/// The first executable `maos` on PATH.
fn on_path() -> Option<PathBuf> {
    use std::os::unix::fs::PermissionsExt;
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|d| d.join("maos"))
        .find(|p| {
            std::fs::metadata(p).is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        })
}

fn binary() -> Check {
    let me = std::env::current_exe().and_then(std::fs::canonicalize).ok();
    match on_path() {
        None => check(
            "maos on PATH",
            Level::Fail,
            format!(
                "not found: hooks run `maos hook` from PATH; run `{}` and put its directory on PATH",
                crate::sibling::install_command()
            ),
        ),
        Some(p) => {
            let same = std::fs::canonicalize(&p).ok() == me;
            if same {
                check("maos on PATH", Level::Ok, format!("{}", p.display()))
            } else {
                let me = me.map(|m| m.display().to_string()).unwrap_or_default();
                check(
                    "maos on PATH",
                    Level::Warn,
                    format!(
                        "{} (hooks run that one; this is {me}: make sure they are the same version)",
                        p.display()
                    ),
                )
            }
        }
    }
}

/// The binaries `maos` runs (next to it, else on PATH): the daemon, and the commands kept
/// out of the hook client. A missing daemon fails, a missing `maos-mcp` fails where a CLI is
/// set up (it starts `maos mcp`); the others warn. Each missing one is named, with the one
/// command that installs them all.
fn siblings(mcp_needed: bool) -> Check {
    const BINS: [(&str, &str); 5] = [
        ("maosd", "the daemon"),
        ("maos-mcp", "`maos mcp`"),
        ("maos-top", "`maos top`"),
        ("maos-dash", "`maos dashboard`"),
        ("maos-demo", "`maos demo`"),
    ];
    let mut found = Vec::new();
    let mut missing = Vec::new();
    let mut level = Level::Ok;
    for (bin, what) in BINS {
        match crate::sibling::find(bin) {
            Some(p) => found.push(p.display().to_string()),
            None => {
                missing.push(format!("{bin} ({what})"));
                if bin == "maosd" || (bin == "maos-mcp" && mcp_needed) {
                    level = Level::Fail;
                } else if level == Level::Ok {
                    level = Level::Warn;
                }
            }
        }
    }
    if missing.is_empty() {
        return check("binaries", Level::Ok, found.join(", "));
    }
    check(
        "binaries",
        level,
        format!(
            "missing {}: run `{}` to install every maos binary",
            missing.join(", "),
            crate::sibling::install_command()
        ),
    )
}

/// The flag of `install-hooks` for `cli`, with its leading space ("" for Claude Code).
fn install_flag(cli: Cli) -> &'static str {
    match cli {
        Cli::Claude => "",
        Cli::Codex => " --codex",
        Cli::Gemini => " --gemini",
        Cli::Copilot => " --copilot",
        Cli::Cursor => " --cursor",
        Cli::OpenCode => " --opencode",
    }
}

/// What [`hooks`] found of one CLI.
struct Hooks {
    checks: Vec<Check>,
    /// maos's hooks are installed and will run.
    installed: bool,
    /// maos's hooks are in one of its files at all (maybe not trusted, maybe partly): the
    /// project is set up for this CLI.
    present: bool,
}

/// Hook settings of one CLI: project, project-local and user files, and whether its hooks
/// are installed anywhere. A CLI maos is not installed for is only mentioned, unless maos is
/// installed for no CLI at all (`other`: set up for another one, even if that one fails).
fn hooks(root: &Path, cli: Cli, other: bool) -> Hooks {
    let name = match cli {
        Cli::Claude => "Claude Code hooks",
        Cli::Codex => "Codex hooks",
        Cli::Gemini => "Gemini CLI hooks",
        Cli::Copilot => "GitHub Copilot CLI hooks",
        Cli::Cursor => "Cursor hooks",
        Cli::OpenCode => "OpenCode plugin",
    };
    let flag = install_flag(cli);
    let mut files = Vec::new();
    for user in [false, true] {
        if let Ok(p) = crate::clis::settings_path(root, user, cli) {
            if cli == Cli::Claude && !user {
                files.push(p.with_file_name("settings.local.json"));
            }
            files.push(p);
        }
    }
    let mut found = Vec::new();
    let mut out = Vec::new();
    let mut present = false;
    for (i, f) in files.iter().enumerate() {
        let mut installed = crate::clis::installed(f, cli);
        present |= matches!(installed, Ok(Installed::Yes | Installed::Partly(_)));
        if cli == Cli::Codex && matches!(installed, Ok(Installed::Yes | Installed::Partly(_))) {
            // Codex skips untrusted hooks silently: installed is not enough.
            let user = i > 0;
            let project = (!user).then_some(root);
            let fix = format!(
                "run `maos install-hooks --codex{} --yes`",
                if user { " --user" } else { "" }
            );
            match install::codex_problems(f, project) {
                Ok(p) if p.is_empty() => {}
                Ok(p) => {
                    out.push(check(
                        name,
                        Level::Fail,
                        format!(
                            "{}: installed, but {}: Codex skips them silently; {fix}",
                            f.display(),
                            p.join(", ")
                        ),
                    ));
                    installed = Ok(Installed::No);
                }
                Err(e) => {
                    out.push(check(name, Level::Fail, e));
                    installed = Ok(Installed::No);
                }
            }
        }
        match installed {
            Ok(Installed::Yes) => found.push(f.display().to_string()),
            Ok(Installed::No) => {}
            Ok(Installed::Partly(missing)) => out.push(check(
                name,
                Level::Warn,
                format!(
                    "{}: no current maos hook for {}; run `maos install-hooks{flag}` again",
                    f.display(),
                    missing.join(", "),
                ),
            )),
            // The CLI cannot read it either, so no hook in it runs.
            Err(e) => out.push(check(name, Level::Fail, e)),
        }
    }
    let installed = !found.is_empty();
    if installed {
        out.insert(0, check(name, Level::Ok, found.join(", ")));
    } else if out.is_empty() {
        let level = if cli == Cli::Claude && !other {
            Level::Fail
        } else {
            Level::Info
        };
        let how = match (cli, level) {
            (Cli::Claude, Level::Fail) => {
                "run `maos install-hooks` (or `--user` for every project)".to_string()
            }
            _ => format!("`maos install-hooks{flag}` if you use {}", cli.label()),
        };
        out.push(check(name, level, format!("not installed: {how}")));
    }
    Hooks {
        checks: out,
        installed,
        present,
    }
}

/// maos's MCP server in the configuration of a CLI whose hooks are installed, and the
/// `maos-mcp` binary that `maos mcp` runs.
fn mcp_server(root: &Path, cli: Cli) -> Check {
    let name = match cli {
        Cli::Claude => "Claude Code MCP server",
        Cli::Codex => "Codex MCP server",
        Cli::Gemini => "Gemini CLI MCP server",
        Cli::Copilot => "GitHub Copilot CLI MCP server",
        Cli::Cursor => "Cursor MCP server",
        Cli::OpenCode => "OpenCode MCP server",
    };
    let flag = install_flag(cli);
    let found = match crate::mcpreg::registered(root, cli) {
        Ok(found) => found,
        Err(e) => return check(name, Level::Fail, e),
    };
    if found.is_empty() {
        return check(
            name,
            Level::Warn,
            format!(
                "not registered (the hooks work without it; agents get no maos tools): run `maos install-hooks{flag}`"
            ),
        );
    }
    let files: Vec<String> = found.iter().map(|p| p.display().to_string()).collect();
    match crate::sibling::find("maos-mcp") {
        Some(bin) => check(
            name,
            Level::Ok,
            format!("{} (`maos mcp` runs {})", files.join(", "), bin.display()),
        ),
        None => check(
            name,
            Level::Fail,
            format!(
                "registered in {}, but `maos mcp` cannot run: {}",
                files.join(", "),
                crate::sibling::missing_text("maos-mcp")
            ),
        ),
    }
}

/// Whether Gemini CLI trusts the project folder: it runs no hook of its settings elsewhere.
fn gemini_trust(root: &Path) -> Check {
    use crate::gemini::{self, Trust};
    const NAME: &str = "Gemini CLI trust";
    // The fix names the settings maos is installed in (the project's first).
    let user = install::settings_path(root, false, Cli::Gemini)
        .and_then(|p| install::installed(&p, Cli::Gemini))
        .map_or(true, |i| i != Installed::Yes);
    let file = gemini::trust_file()
        .map(|f| f.display().to_string())
        .unwrap_or_default();
    match gemini::trust(root) {
        Ok(Trust::Trusted(rule)) => check(NAME, Level::Ok, format!("{rule} trusted in {file}")),
        Ok(Trust::Off) => check(
            NAME,
            Level::Ok,
            "folder trust is off in the user's settings (security.folderTrust.enabled)",
        ),
        Ok(Trust::Distrusted(rule)) => check(
            NAME,
            Level::Fail,
            format!(
                "{file} distrusts {rule} (DO_NOT_TRUST): Gemini CLI runs no hook here; change that rule to trust {}",
                root.display()
            ),
        ),
        Ok(Trust::Unknown) => check(
            NAME,
            Level::Fail,
            format!(
                "{} is not trusted: Gemini CLI runs no hook here (a headless run exits 55); run `{}`",
                root.display(),
                gemini::fix(user)
            ),
        ),
        Err(e) => check(NAME, Level::Fail, e),
    }
}

/// git's pre-commit hook (`maos install-hooks --git`), in a git repository only: installed
/// (and whether it runs an earlier hook first), or not.
fn git_hook(root: &Path) -> Option<Check> {
    use crate::githook::{self, Status};
    const NAME: &str = "git hook";
    if !root.join(".git").exists() {
        return None;
    }
    match githook::status(root) {
        // Not a repository git can read, or no git: nothing to say about its hooks.
        Err(_) => None,
        Ok(Status::No) => Some(check(
            NAME,
            Level::Info,
            "not installed: `maos install-hooks --git` refuses commits of files other agents hold (for people and tools without hooks)",
        )),
        Ok(Status::Yes {
            path,
            chained,
            gone: Some(maos),
        }) => Some(check(
            NAME,
            Level::Warn,
            format!(
                "{}{}: runs {maos}, which is gone (it falls back to `maos` on PATH): run `maos install-hooks --git` again",
                path.display(),
                if chained { " (chained)" } else { "" }
            ),
        )),
        Ok(Status::Yes { path, chained, .. }) => Some(check(
            NAME,
            Level::Ok,
            format!(
                "{}{}",
                path.display(),
                if chained {
                    format!(
                        " (chained: runs your earlier pre-commit, {}, first)",
                        githook::CHAINED
                    )
                } else {
                    String::new()
                }
            ),
        )),
    }
}

fn mib(bytes: u64) -> String {
    format!("{:.1} MiB", bytes as f64 / (1024.0 * 1024.0))
}

/// `path` with the home directory written `~`, for the human report.
fn tilde(path: &Path) -> String {
    let home = std::env::var_os("HOME").filter(|h| !h.is_empty());
    match home.and_then(|h| path.strip_prefix(h).ok().map(Path::to_path_buf)) {
        Some(rest) if !rest.as_os_str().is_empty() => format!("~/{}", rest.display()),
        _ => path.display().to_string(),
    }
}

fn manager_name(m: Manager) -> &'static str {
    match m {
        Manager::Systemd => "systemd user service",
        Manager::Launchd => "launchd agent",
    }
}

/// How maosd is run for this client's socket: by a service manager, or on demand.
fn service(socket: &Path, mine: Option<&svc::Installed>) -> (Check, serde_json::Value) {
    // A systemd user service can run only where a user manager answers: where none does,
    // `maos daemon install` is never recommended, and units found are named as the fault.
    let systemd = |m: Manager| match m {
        Manager::Systemd => crate::service::systemd_user_manager().err(),
        Manager::Launchd => None,
    };
    let Some(i) = mine else {
        let json = serde_json::json!({ "mode": "on_demand" });
        let others = svc::installed();
        if let Some(o) = others.first() {
            if let Some(why) = systemd(o.manager) {
                let detail = format!(
                    "on demand: the client starts maosd when needed; a {} is installed ({}) that cannot run here ({why}): run `maos daemon uninstall`",
                    manager_name(o.manager),
                    tilde(&o.file),
                );
                return (check("service", Level::Warn, detail), json);
            }
            let detail = format!(
                "on demand: the client starts maosd when needed; a {} is installed ({}) for another socket, {}, not this client's {}: MAOS_SOCKET or XDG_RUNTIME_DIR differ from when it was installed; run `maos daemon install` again",
                manager_name(o.manager),
                tilde(&o.file),
                o.socket.display(),
                socket.display()
            );
            return (check("service", Level::Warn, detail), json);
        }
        let detail = match systemd(Manager::native()) {
            Some(why) => format!(
                "on demand: the client starts maosd when needed, which is how it runs here: no systemd user manager answers ({why}), so a user service (`maos daemon install`) cannot run"
            ),
            None => "on demand: the client starts maosd when needed (`maos daemon install` sets up a service)".to_string(),
        };
        return (check("service", Level::Info, detail), json);
    };
    if let Some(why) = systemd(i.manager) {
        let json = serde_json::json!({
            "mode": i.manager.as_str(),
            "file": i.file,
            "socket": i.socket,
            "enabled": i.enabled(),
            "usable": false,
        });
        let detail = format!(
            "{} installed ({}) but no systemd user manager answers here ({why}): nothing starts maosd on {}, and the client starts none while the units are installed; run `maos daemon uninstall` (maosd then starts on demand)",
            manager_name(i.manager),
            tilde(&i.file),
            i.socket.display()
        );
        return (check("service", Level::Fail, detail), json);
    }
    let enabled = i.enabled();
    let json = serde_json::json!({
        "mode": i.manager.as_str(),
        "file": i.file,
        "socket": i.socket,
        "enabled": enabled,
    });
    let mut detail = format!(
        "{} installed ({}, socket {})",
        manager_name(i.manager),
        tilde(&i.file),
        i.socket.display()
    );
    if enabled == Some(false) {
        detail.push_str(&format!(
            " but {} is not enabled: run `maos daemon install` (or `systemctl --user enable --now {}`)",
            svc::SYSTEMD_SOCKET_UNIT,
            svc::SYSTEMD_SOCKET_UNIT
        ));
        return (check("service", Level::Warn, detail), json);
    }
    (check("service", Level::Ok, detail), json)
}

fn started_by(s: maos_proto::StartedBy) -> &'static str {
    match s {
        maos_proto::StartedBy::Client => "a client",
        maos_proto::StartedBy::Manual => "hand",
        maos_proto::StartedBy::Systemd => "systemd",
        maos_proto::StartedBy::Launchd => "launchd",
    }
}

/// Daemon, versions and database, through one connection.
fn daemon(root: &str, found: bool, service: Option<&svc::Installed>) -> Vec<Check> {
    let mut client = match Client::connect(true) {
        Ok(c) => c,
        Err(e) => return vec![check("daemon", Level::Fail, e.body().message)],
    };
    let mut out = Vec::new();
    match client.request(None, Request::DaemonStatus) {
        Ok(Reply::Daemon(d)) => {
            let mut detail = format!(
                "running, pid {}, socket {}, up {:.0} s, started by {}",
                d.pid,
                d.socket,
                d.uptime_secs,
                started_by(d.started_by)
            );
            if let Some(idle) = d.idle_exit_secs {
                detail.push_str(&format!(", exits after {idle:.0} s idle"));
            }
            out.push(check("daemon", Level::Ok, detail));
            let level = if d.backend.error.is_some() {
                Level::Fail
            } else {
                Level::Ok
            };
            out.push(check("backend", level, d.backend.describe()));
            if let Some(i) = service.filter(|_| !d.started_by.is_service()) {
                out.push(check(
                    "service",
                    Level::Warn,
                    format!(
                        "maosd (pid {}) was started by {}, not by {}, although the {} is installed for this socket: run `maos daemon install` again (it stops this daemon and hands the socket to {})",
                        d.pid,
                        started_by(d.started_by),
                        i.manager.as_str(),
                        manager_name(i.manager),
                        i.manager.as_str()
                    ),
                ));
            }
            let mine = env!("CARGO_PKG_VERSION");
            let level = if d.version == mine && d.protocol == maos_proto::PROTOCOL_VERSION {
                Level::Ok
            } else {
                Level::Warn
            };
            let mut detail = format!(
                "client {mine}, daemon {} (protocol {})",
                d.version, d.protocol
            );
            if level == Level::Warn {
                detail.push_str(": run `maos daemon stop`; the next call starts the new one");
            }
            out.push(check("versions", level, detail));
        }
        Ok(_) => out.push(check("daemon", Level::Fail, "unexpected answer to status")),
        Err(e) => out.push(check("daemon", Level::Fail, e.body().message)),
    }
    if !found {
        out.push(check(
            "database",
            Level::Info,
            format!("none: {root} is not in a maos project"),
        ));
        return out;
    }
    match client.request(Some(root), Request::DbCheck) {
        Ok(Reply::DbCheck(c)) => {
            let level = if c.quick_check == "ok" {
                Level::Ok
            } else {
                Level::Fail
            };
            // A fleet's PostgreSQL (the project's rows in one database of every project) has
            // no file of its own and no WAL of maos's to report.
            let detail = if c.path.starts_with("postgres") {
                format!("{}: the fleet's database holds {}", c.path, mib(c.bytes))
            } else {
                format!(
                    "{} ({}, WAL {}): quick_check {}",
                    c.path,
                    mib(c.bytes),
                    mib(c.wal_bytes),
                    c.quick_check
                )
            };
            out.push(check("database", level, detail));
        }
        Ok(_) => out.push(check(
            "database",
            Level::Fail,
            "unexpected answer to the check",
        )),
        // A project where nothing was recorded yet has no database; the first session makes it.
        Err(e) if e.body().code == maos_proto::ErrorCode::NotFound => {
            out.push(check("database", Level::Info, e.body().message));
        }
        Err(e) => out.push(check("database", Level::Fail, e.body().message)),
    }
    out
}

/// Run every check and print the report; true when nothing failed.
pub fn run(root: &str, found: bool, json: bool) -> bool {
    let mut checks = vec![binary()];
    // Every CLI but Claude Code, in `Cli::ALL`'s order.
    let others: Vec<(Cli, Hooks)> = Cli::ALL
        .iter()
        .filter(|c| **c != Cli::Claude)
        .map(|c| (*c, hooks(Path::new(root), *c, false)))
        .collect();
    // Claude Code fails for want of hooks only where no other CLI is set up (a Codex
    // project whose hooks are not trusted yet fails on Codex, not on Claude Code).
    let claude = hooks(
        Path::new(root),
        Cli::Claude,
        others.iter().any(|(_, h)| h.present),
    );
    let installed: Vec<(Cli, bool)> = std::iter::once((Cli::Claude, claude.installed))
        .chain(others.iter().map(|(c, h)| (*c, h.installed)))
        .collect();
    let for_gemini = installed.contains(&(Cli::Gemini, true));
    checks.push(siblings(installed.iter().any(|(_, i)| *i)));
    checks.extend(claude.checks);
    for (_, h) in others {
        checks.extend(h.checks);
    }
    for (cli, installed) in installed {
        if installed && crate::mcpreg::has_mcp(cli) {
            checks.push(mcp_server(Path::new(root), cli));
        }
    }
    if for_gemini {
        checks.push(gemini_trust(Path::new(root)));
    }
    if let Some((ok, detail)) = crate::copilot::trust_check(Path::new(root)) {
        let level = if ok { Level::Ok } else { Level::Fail };
        checks.push(check("GitHub Copilot CLI trust", level, detail));
    }
    checks.extend(git_hook(Path::new(root)));
    let socket = paths::socket_path();
    let mine = svc::installed_for(&socket);
    let (service_check, service_json) = service(&socket, mine.as_ref());
    checks.push(service_check);
    checks.extend(daemon(root, found, mine.as_ref()));
    let ok = checks.iter().all(|c| c.level != Level::Fail);
    if json {
        let v = serde_json::json!({
            "project": found.then_some(root),
            "ok": ok,
            "socket": socket,
            "service": service_json,
            "checks": checks,
        });
        outln!("{}", serde_json::to_string_pretty(&v).unwrap_or_default());
    } else {
        match found {
            true => outln!("maos doctor: project {root}"),
            false => outln!("maos doctor: no maos project at {root} (`maos init` makes it one)"),
        }
        for c in &checks {
            let tag = match c.level {
                Level::Ok => "ok  ",
                Level::Info => "--  ",
                Level::Warn => "WARN",
                Level::Fail => "FAIL",
            };
            outln!("  {tag}  {}: {}", c.check, c.detail);
        }
    }
    ok
}
