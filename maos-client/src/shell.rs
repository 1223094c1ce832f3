//! Shell integration: completion scripts, the man pages, `maos --version`.
//!
//! Completions and man pages are generated from the same clap definition as the parser, so they
//! never drift from the real command line. None of this runs on the hook's path.

use std::ffi::OsString;
use std::io::{self, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maos_proto::{
    ClientMsg, ErrorBody, ErrorCode, FrameError, PROTOCOL_VERSION, Reply, Request, ServerMsg,
    StartedBy, paths,
};

use crate::failure::{Failure, Res, usage};
use crate::show::print_json;

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// How long `maos --version` waits for a running daemon's answer.
const VERSION_TIMEOUT: Duration = Duration::from_secs(2);

/// A failure to write a file or directory the user named: exit 1, one line.
fn io_failure(msg: String) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, msg),
        exit: 1,
    }
}

/// Write `bytes` to stdout; a closed pipe (`| head`) is not an error.
fn emit(bytes: &[u8]) -> Res {
    let mut out = io::stdout().lock();
    match out.write_all(bytes).and_then(|()| out.flush()) {
        Ok(()) => Ok(()),
        Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(()),
        Err(e) => Err(io_failure(format!("cannot write to stdout: {e}"))),
    }
}

/// `maos completions SHELL`: the completion script for the binary named `maos`.
pub fn completions(shell: &str) -> Res {
    use clap_complete::Shell;
    let shell = match shell {
        "bash" => Shell::Bash,
        "zsh" => Shell::Zsh,
        "fish" => Shell::Fish,
        other => {
            return Err(usage(format!(
                "no completions for shell {other:?} (bash, zsh or fish)"
            )));
        }
    };
    // Generated in memory first: clap_complete panics on a failed write.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut crate::cli::command(), "maos", &mut script);
    emit(&script)
}

/// One man page: its file name (`maos-daemon-install.1`) and its roff text.
struct Page {
    file: String,
    roff: Vec<u8>,
}

/// The root command as the man pages see it: no `help` subcommand (it has no page of its own).
fn man_command() -> clap::Command {
    let mut cmd = crate::cli::command().disable_help_subcommand(true);
    // Gives every subcommand its git-style display name (maos-daemon-install).
    cmd.build();
    cmd
}

fn render(cmd: clap::Command) -> Res<Page> {
    let man = clap_mangen::Man::new(cmd).source(format!("maos {VERSION}"));
    let mut roff = Vec::new();
    man.render(&mut roff)
        .map_err(|e| io_failure(format!("cannot render the man page: {e}")))?;
    Ok(Page {
        file: man.get_filename(),
        roff,
    })
}

/// The pages of `cmd` and of every visible subcommand at every depth, `cmd`'s first.
fn pages(cmd: clap::Command, out: &mut Vec<Page>) -> Res {
    let subs: Vec<clap::Command> = cmd
        .get_subcommands()
        .filter(|s| !s.is_hide_set())
        .cloned()
        .collect();
    out.push(render(cmd)?);
    for sub in subs {
        pages(sub, out)?;
    }
    Ok(())
}

/// `maos man`: the root page on stdout; with `--dir`, every page written into DIR.
pub fn man(dir: Option<&Path>, json: bool) -> Res {
    let Some(dir) = dir else {
        return emit(&render(man_command())?.roff);
    };
    // Everything is rendered before anything is written.
    let mut all = Vec::new();
    pages(man_command(), &mut all)?;
    std::fs::create_dir_all(dir)
        .map_err(|e| io_failure(format!("cannot create directory {}: {e}", dir.display())))?;
    let mut written = Vec::with_capacity(all.len());
    for page in &all {
        let path = dir.join(&page.file);
        write_whole(&path, &page.roff)?;
        written.push(path);
    }
    if json {
        return print_json(&serde_json::json!({ "dir": dir, "pages": written }));
    }
    outln!("wrote {} man pages to {}", written.len(), dir.display());
    Ok(())
}

/// Write `bytes` to `path` through a temporary file beside it, renamed over `path` only once
/// complete: a failure never leaves a half-written page.
fn write_whole(path: &Path, bytes: &[u8]) -> Res {
    let fail = |e: io::Error| io_failure(format!("cannot write {}: {e}", path.display()));
    let mut tmp_name = OsString::from(".");
    tmp_name.push(path.file_name().unwrap_or_default());
    tmp_name.push(format!(".tmp{}", std::process::id()));
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let result = std::fs::File::create(&tmp)
        .and_then(|mut f| f.write_all(bytes).and_then(|()| f.sync_all()))
        .and_then(|()| std::fs::rename(&tmp, path));
    if let Err(e) = result {
        let _ = std::fs::remove_file(&tmp);
        return Err(fail(e));
    }
    Ok(())
}

/// `maos --version` / `maos -V`, with `--json` and `--project DIR` allowed around it and
/// nothing else: `Some(json)`. Anything else goes to clap (which knows `-V, --version` too).
pub fn version_args(args: impl IntoIterator<Item = OsString>) -> Option<bool> {
    let (mut version, mut json) = (false, false);
    let mut args = args.into_iter();
    while let Some(a) = args.next() {
        match a.to_str()? {
            "--version" | "-V" => version = true,
            "--json" => json = true,
            "--project" => {
                args.next()?;
            }
            s if s.starts_with("--project=") => {}
            _ => return None,
        }
    }
    version.then_some(json)
}

/// What a running daemon told about itself; `error` when it refused or failed to answer.
#[derive(Debug, Default, PartialEq)]
struct Daemon {
    version: Option<String>,
    protocol: Option<u32>,
    pid: Option<u32>,
    started_by: Option<StartedBy>,
    error: Option<String>,
}

impl Daemon {
    fn failed(&mut self, msg: impl Into<String>) -> Option<Daemon> {
        self.error = Some(maos_core::text::escape_controls(&msg.into()));
        Some(std::mem::take(self))
    }
}

/// Ask the daemon at `socket` who it is, never starting one: None when nothing listens there.
/// Every read and write is bounded, so a hung daemon costs at most a few seconds.
fn probe(socket: &Path) -> Option<Daemon> {
    let mut d = Daemon::default();
    let mut stream = match UnixStream::connect(socket) {
        Ok(s) => s,
        Err(e)
            if matches!(
                e.kind(),
                io::ErrorKind::NotFound | io::ErrorKind::ConnectionRefused
            ) =>
        {
            return None;
        }
        Err(e) => return d.failed(format!("cannot connect to {}: {e}", socket.display())),
    };
    let _ = stream.set_read_timeout(Some(VERSION_TIMEOUT));
    let _ = stream.set_write_timeout(Some(VERSION_TIMEOUT));
    let hello = ClientMsg::Hello {
        protocol: PROTOCOL_VERSION,
        client_version: VERSION.to_string(),
        client: maos_proto::ClientKind::Cli,
    };
    let status = ClientMsg::Request {
        id: 1,
        project: None,
        body: Request::DaemonStatus,
    };
    // A daemon that refuses the hello may close before the request is written: read its answer
    // all the same.
    let _ = maos_proto::write_frame(&mut stream, &hello)
        .and_then(|()| maos_proto::write_frame(&mut stream, &status));
    let deadline = Instant::now() + VERSION_TIMEOUT;
    while Instant::now() < deadline {
        let msg = match maos_proto::read_frame::<_, ServerMsg>(&mut stream) {
            Ok(m) => m,
            Err(FrameError::Closed) => {
                return d.failed(format!(
                    "{} closed the connection without answering",
                    socket.display()
                ));
            }
            Err(FrameError::Io(e))
                if matches!(
                    e.kind(),
                    io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                ) =>
            {
                break;
            }
            Err(e) => return d.failed(e.to_string()),
        };
        match msg {
            ServerMsg::Welcome {
                protocol,
                daemon_version,
                pid,
                started_by,
            } => {
                d.version = Some(daemon_version);
                d.protocol = Some(protocol);
                d.pid = Some(pid);
                d.started_by = Some(started_by);
            }
            ServerMsg::Response { id: 1, result } => {
                return match result {
                    Ok(Reply::Daemon(s)) => Some(Daemon {
                        version: Some(s.version),
                        protocol: Some(s.protocol),
                        pid: Some(s.pid),
                        started_by: Some(s.started_by),
                        error: None,
                    }),
                    Ok(_) => d.failed("unexpected answer to a status request"),
                    Err(e) => d.failed(e.message),
                };
            }
            ServerMsg::Error { error } => return d.failed(error.message),
            ServerMsg::Response { .. } | ServerMsg::Event { .. } => {}
        }
    }
    d.failed(format!(
        "no answer from {} within {}s",
        socket.display(),
        VERSION_TIMEOUT.as_secs()
    ))
}

/// The human lines of `maos --version`.
fn version_lines(socket: &Path, daemon: Option<&Daemon>) -> String {
    let mut out = format!("maos {VERSION} (protocol {PROTOCOL_VERSION})\n");
    let Some(d) = daemon else {
        out.push_str(&format!("maosd: not running at {}\n", socket.display()));
        return out;
    };
    let mut facts = Vec::new();
    if let Some(p) = d.protocol {
        facts.push(format!("protocol {p}"));
    }
    if let Some(p) = d.pid {
        facts.push(format!("pid {p}"));
    }
    if let Some(s) = d.started_by {
        facts.push(format!("started by {}", s.as_str()));
    }
    let mut line = String::from("maosd");
    match &d.version {
        Some(v) => {
            line.push(' ');
            line.push_str(v);
        }
        None if facts.is_empty() => line.push_str(&format!(" at {}", socket.display())),
        None => {}
    }
    if !facts.is_empty() {
        line.push_str(&format!(" ({})", facts.join(", ")));
    }
    if let Some(e) = &d.error {
        line.push_str(": ");
        line.push_str(e);
    }
    out.push_str(&line);
    out.push('\n');
    out
}

fn version_json(daemon: Option<&Daemon>) -> serde_json::Value {
    let daemon = daemon.map(|d| {
        let mut v = serde_json::json!({
            "version": d.version,
            "protocol": d.protocol,
            "pid": d.pid,
            "started_by": d.started_by.map(StartedBy::as_str),
        });
        if let Some(e) = &d.error {
            v["error"] = serde_json::Value::from(e.as_str());
        }
        v
    });
    serde_json::json!({
        "client": { "version": VERSION, "protocol": PROTOCOL_VERSION },
        "daemon": daemon,
    })
}

/// `maos --version`: this client's version and protocol, and the running daemon's. Never
/// starts a daemon; a daemon that is down, refuses or does not answer is reported, not an error.
pub fn version(json: bool) -> Res {
    let socket = paths::socket_path();
    let daemon = probe(&socket);
    if json {
        return print_json(&version_json(daemon.as_ref()));
    }
    emit(version_lines(&socket, daemon.as_ref()).as_bytes())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn args(line: &str) -> Vec<OsString> {
        line.split_whitespace().map(OsString::from).collect()
    }

    #[test]
    fn version_forms_are_recognised_and_nothing_else() {
        assert_eq!(version_args(args("--version")), Some(false));
        assert_eq!(version_args(args("-V")), Some(false));
        assert_eq!(version_args(args("--json --version")), Some(true));
        assert_eq!(version_args(args("-V --json")), Some(true));
        assert_eq!(version_args(args("--project /p -V")), Some(false));
        assert_eq!(
            version_args(args("--project=/p --version --json")),
            Some(true)
        );
        for other in [
            "",
            "--json",
            "ps --version",
            "--version ps",
            "--project",
            "-Vx",
        ] {
            assert_eq!(version_args(args(other)), None, "{other:?}");
        }
    }

    #[test]
    fn version_lines_say_what_is_known() {
        let socket = Path::new("/run/maosd.sock");
        let text = version_lines(socket, None);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 2);
        assert!(lines[0].starts_with(&format!("maos {VERSION} (protocol ")));
        assert_eq!(lines[1], "maosd: not running at /run/maosd.sock");

        let up = Daemon {
            version: Some("9.9.9".into()),
            protocol: Some(7),
            pid: Some(42),
            started_by: Some(StartedBy::Systemd),
            error: None,
        };
        let text = version_lines(socket, Some(&up));
        assert_eq!(
            text.lines().nth(1),
            Some("maosd 9.9.9 (protocol 7, pid 42, started by systemd)")
        );

        let refused = Daemon {
            error: Some("protocol mismatch".into()),
            ..Daemon::default()
        };
        let text = version_lines(socket, Some(&refused));
        assert_eq!(
            text.lines().nth(1),
            Some("maosd at /run/maosd.sock: protocol mismatch")
        );
        let j = version_json(Some(&refused));
        assert_eq!(j["daemon"]["error"], "protocol mismatch");
        assert!(j["daemon"]["pid"].is_null());
        assert!(version_json(None)["daemon"].is_null());
    }

    #[test]
    fn man_pages_are_named_git_style() {
        let mut all = Vec::new();
        assert!(pages(man_command(), &mut all).is_ok());
        let names: Vec<&str> = all.iter().map(|p| p.file.as_str()).collect();
        for want in [
            "maos.1",
            "maos-daemon.1",
            "maos-daemon-install.1",
            "maos-session-create.1",
        ] {
            assert!(names.contains(&want), "{want} missing from {names:?}");
        }
        assert!(!names.iter().any(|n| n.contains("help")), "{names:?}");
    }
}
