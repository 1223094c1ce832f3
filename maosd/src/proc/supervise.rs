//! `maosd supervise`: the small process that runs one managed agent and outlives the daemon.
//!
//! ```text
//! maosd supervise --agent ID --socket PATH --project ROOT --dir AGENT_DIR [--cwd DIR] -- ARGV...
//! ```
//!
//! 1. Detaches from the daemon (`setsid`; stdin from /dev/null), so that killing the daemon or
//!    its process group never reaches it.
//! 2. Creates AGENT_DIR (0700) and appends a header to `AGENT_DIR/output.log` (0600).
//! 3. Starts ARGV leading its own process group (the daemon pauses and cancels the whole group),
//!    stdout and stderr to the log, stdin /dev/null, in `--cwd`, with the supervisor's own
//!    environment.
//! 4. Prints one line, `started <pid> <start time or 0>` (or `failed <why>` when the agent could
//!    not be started), and closes stdout: the daemon reads it and never waits for the agent.
//! 5. Waits for the agent (a stopped agent is paused, not ended), and writes how it ended to
//!    `AGENT_DIR/exit.json` atomically: the durable record, applied by the daemon at start-up
//!    if it was down.
//! 6. Reports the exit to the daemon (`AgentExited`), retrying every 500 ms while the daemon is
//!    unreachable, for up to `MAOS_SUPERVISE_REPORT_SECS` seconds (default 600); once the daemon
//!    acknowledged it, `exit.json` is deleted.
//!
//! Plain std + libc, no tokio: it runs before the daemon's runtime is built, and it sleeps in
//! `waitpid` for the agent's whole life.

use std::ffi::OsString;
use std::fs::{self, File, OpenOptions};
use std::io::{self, Read, Seek, SeekFrom, Write};
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
use std::os::unix::net::UnixStream;
use std::os::unix::process::{CommandExt, ExitStatusExt};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode, Stdio};
use std::time::{Duration, Instant};

use maos_proto::{AgentExit, ClientMsg, ErrorCode, Request, ServerMsg};

use crate::proc::procs::{self, AgentFiles};

const USAGE: &str = "usage: maosd supervise --agent ID --socket PATH --project ROOT --dir AGENT_DIR [--cwd DIR] -- ARGV...";

/// How much of the end of `output.log` is searched for a Claude Code session id.
const SESSION_SCAN_BYTES: u64 = 256 * 1024;
/// Pause between two attempts to reach the daemon.
const RETRY_EVERY: Duration = Duration::from_millis(500);
/// How long one attempt may wait on the socket.
const ATTEMPT_TIMEOUT: Duration = Duration::from_secs(10);
/// Default of `MAOS_SUPERVISE_REPORT_SECS`.
const DEFAULT_REPORT_SECS: u64 = 600;
/// The exit code recorded for an agent that could not be started (the shell's "not found").
const SPAWN_FAILED_CODE: i32 = 127;

/// The command line of `maosd supervise`.
#[derive(Debug, PartialEq)]
struct Opts {
    agent: String,
    socket: PathBuf,
    project: String,
    dir: PathBuf,
    cwd: Option<PathBuf>,
    argv: Vec<OsString>,
}

fn parse(args: Vec<OsString>) -> Result<Opts, String> {
    let mut agent = None;
    let mut socket = None;
    let mut project = None;
    let mut dir = None;
    let mut cwd = None;
    let mut it = args.into_iter();
    let mut argv = None;
    while let Some(arg) = it.next() {
        let name = arg.to_string_lossy().into_owned();
        if name == "--" {
            argv = Some(it.by_ref().collect::<Vec<_>>());
            break;
        }
        let slot = match name.as_str() {
            "--agent" => &mut agent,
            "--socket" => &mut socket,
            "--project" => &mut project,
            "--dir" => &mut dir,
            "--cwd" => &mut cwd,
            _ => return Err(format!("unexpected argument {name:?}")),
        };
        let value = it
            .next()
            .filter(|v| !v.is_empty())
            .ok_or_else(|| format!("{name} needs a value"))?;
        if slot.replace(value).is_some() {
            return Err(format!("{name} given twice"));
        }
    }
    let need = |v: Option<OsString>, name: &str| v.ok_or_else(|| format!("{name} is required"));
    let utf8 = |v: OsString, name: &str| {
        v.into_string()
            .map_err(|v| format!("{name} {v:?} is not valid UTF-8"))
    };
    let argv = argv
        .filter(|a| !a.is_empty())
        .ok_or("the agent's command is missing after `--`")?;
    Ok(Opts {
        agent: utf8(need(agent, "--agent")?, "--agent")?,
        socket: need(socket, "--socket")?.into(),
        project: utf8(need(project, "--project")?, "--project")?,
        dir: need(dir, "--dir")?.into(),
        cwd: cwd.map(PathBuf::from),
        argv,
    })
}

/// `maosd supervise ARGS` (ARGS: everything after `supervise`).
pub fn main(args: Vec<OsString>) -> ExitCode {
    let opts = match parse(args) {
        Ok(o) => o,
        Err(e) => {
            let _ = writeln!(io::stderr(), "maosd supervise: {e}\n{USAGE}");
            report_start(&format!("failed bad arguments: {e}"));
            return ExitCode::from(2);
        }
    };
    let detached = detach();
    let files = AgentFiles::in_dir(&opts.dir);
    let mut log = Log::open(&files);
    if let Err(e) = detached {
        log.note(&format!(
            "setsid failed, continuing in the daemon's session: {e}"
        ));
    }

    let exit = match log.file().and_then(|f| spawn(&opts, f)) {
        Ok(mut child) => {
            let pid = child.id();
            let start_time = procs::start_time(pid);
            report_start(&format!("started {pid} {}", start_time.unwrap_or(0)));
            // No WUNTRACED here (std's wait): a stopped agent is paused, not ended.
            let (code, signal) = match child.wait() {
                Ok(status) => (status.code(), status.signal()),
                Err(e) => {
                    log.note(&format!("cannot wait for the agent: {e}"));
                    (None, None)
                }
            };
            AgentExit {
                agent: opts.agent.clone(),
                pid,
                start_time,
                code,
                signal,
                ended_at: chrono::Utc::now(),
                claude_session_id: find_session_id(&files.log),
            }
        }
        Err(why) => {
            log.note(&format!("cannot start the agent: {why}"));
            report_start(&format!("failed {why}"));
            AgentExit {
                agent: opts.agent.clone(),
                pid: 0,
                start_time: None,
                code: Some(SPAWN_FAILED_CODE),
                signal: None,
                ended_at: chrono::Utc::now(),
                claude_session_id: None,
            }
        }
    };
    log.note(&format!("end {} {}", rfc3339(&exit.ended_at), how(&exit)));

    let recorded = match write_exit(&files, &exit) {
        Ok(()) => true,
        Err(e) => {
            log.note(&format!(
                "cannot write {}: {e}; only the report to maosd records this exit",
                files.exit.display()
            ));
            false
        }
    };
    let kept = if recorded {
        "exit.json is kept for the daemon's next start"
    } else {
        "this exit is not recorded anywhere"
    };
    match report_exit(&opts, &exit) {
        Ok(()) => {
            if let Err(e) = fs::remove_file(&files.exit)
                && e.kind() != io::ErrorKind::NotFound
            {
                log.note(&format!("cannot delete {}: {e}", files.exit.display()));
            }
        }
        Err(Refusal::Refused(e)) => {
            log.note(&format!("maosd refused the exit report: {e}; {kept}"))
        }
        Err(Refusal::Unreachable(e, secs)) => {
            log.note(&format!("maosd unreachable for {secs}s ({e}); {kept}"))
        }
    }
    ExitCode::SUCCESS
}

/// Leave the daemon's session and process group; read nothing from the daemon.
fn detach() -> io::Result<()> {
    if let Ok(null) = File::open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto fd 0 of a descriptor we own; no Rust object owns fd 0.
        unsafe { libc::dup2(null.as_raw_fd(), 0) };
    }
    // SAFETY: setsid has no preconditions; it fails (EPERM) only for a group leader, which is
    // already out of the daemon's process group.
    if unsafe { libc::setsid() } == -1 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Print the one line the daemon waits for, then close stdout (point fd 1 at /dev/null): the
/// daemon reads until end of file. A daemon that went away meanwhile is not an error.
fn report_start(line: &str) {
    let line = line.replace(['\n', '\r'], " ");
    let mut out = io::stdout().lock();
    let _ = writeln!(out, "{line}");
    let _ = out.flush();
    drop(out);
    if let Ok(null) = OpenOptions::new().write(true).open("/dev/null") {
        use std::os::fd::AsRawFd;
        // SAFETY: dup2 onto fd 1, which Rust's Stdout writes through but does not own.
        unsafe { libc::dup2(null.as_raw_fd(), 1) };
    }
}

/// `output.log`, opened for append; the supervisor's own lines are `--- maos: ... ---`.
struct Log {
    file: Result<File, String>,
}

impl Log {
    fn open(files: &AgentFiles) -> Log {
        let file = fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&files.dir)
            .map_err(|e| format!("cannot create {}: {e}", files.dir.display()))
            .and_then(|()| {
                OpenOptions::new()
                    .create(true)
                    .append(true)
                    .mode(0o600)
                    .open(&files.log)
                    .map_err(|e| format!("cannot open {}: {e}", files.log.display()))
            });
        Log { file }
    }

    fn file(&self) -> Result<&File, String> {
        self.file.as_ref().map_err(Clone::clone)
    }

    /// Append `--- maos: MSG ---` (best effort: the log is for people).
    fn note(&mut self, msg: &str) {
        if let Ok(f) = &mut self.file {
            let _ = writeln!(f, "--- maos: {msg} ---");
        }
    }
}

fn rfc3339(ts: &chrono::DateTime<chrono::Utc>) -> String {
    ts.to_rfc3339_opts(chrono::SecondsFormat::Micros, true)
}

fn how(exit: &AgentExit) -> String {
    match (exit.code, exit.signal) {
        (Some(c), _) => format!("exit code {c}"),
        (None, Some(s)) => format!("killed by signal {s}"),
        (None, None) => "without a status".to_string(),
    }
}

/// Start the agent: its own process group, output to the log, stdin /dev/null.
fn spawn(opts: &Opts, log: &File) -> Result<std::process::Child, String> {
    let mut log_w = log;
    let shown: Vec<String> = opts
        .argv
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let _ = writeln!(
        log_w,
        "--- maos: start {} argv: {shown:?} ---",
        rfc3339(&chrono::Utc::now())
    );
    if let Some(cwd) = &opts.cwd {
        match fs::metadata(cwd) {
            Ok(m) if m.is_dir() => {}
            Ok(_) => {
                return Err(format!(
                    "working directory {} is not a directory",
                    cwd.display()
                ));
            }
            Err(e) => return Err(format!("working directory {}: {e}", cwd.display())),
        }
    }
    let out = log
        .try_clone()
        .map_err(|e| format!("cannot share the log: {e}"))?;
    let err = log
        .try_clone()
        .map_err(|e| format!("cannot share the log: {e}"))?;
    let mut cmd = Command::new(&opts.argv[0]);
    cmd.args(&opts.argv[1..])
        .stdin(Stdio::null())
        .stdout(out)
        .stderr(err)
        // setpgid(0, 0) in the child before exec: the agent leads its own group from its first
        // instruction, so a SIGSTOP to the group right after `started` reaches everything.
        .process_group(0);
    if let Some(cwd) = &opts.cwd {
        cmd.current_dir(cwd);
    }
    cmd.spawn()
        .map_err(|e| format!("cannot run {:?}: {e}", shown[0]))
}

/// The last Claude Code session id the agent printed: a line of the log's last 256 KiB that is
/// a JSON object with a string `session_id` (what `--output-format json` and `stream-json`
/// print).
fn find_session_id(log: &Path) -> Option<String> {
    let mut f = File::open(log).ok()?;
    let len = f.metadata().ok()?.len();
    // One byte more than the window, to tell whether the window starts at a line start.
    let start = len.saturating_sub(SESSION_SCAN_BYTES + 1);
    f.seek(SeekFrom::Start(start)).ok()?;
    let mut buf = Vec::new();
    f.take(SESSION_SCAN_BYTES + 1).read_to_end(&mut buf).ok()?;
    let text = String::from_utf8_lossy(&buf);
    let mut lines = text.split('\n');
    if start > 0 {
        lines.next(); // the tail of a line that began before the window
    }
    lines.rev().find_map(session_id_of)
}

fn session_id_of(line: &str) -> Option<String> {
    let line = line.trim();
    if !(line.starts_with('{') && line.ends_with('}')) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_str(line).ok()?;
    let id = v.get("session_id")?.as_str()?;
    let sane = !id.is_empty() && id.len() <= 256 && !id.chars().any(char::is_control);
    sane.then(|| id.to_string())
}

/// Write `exit.json` atomically and durably: a temporary file, fsync, rename, fsync the
/// directory.
fn write_exit(files: &AgentFiles, exit: &AgentExit) -> io::Result<()> {
    let mut body = serde_json::to_vec_pretty(exit).map_err(io::Error::other)?;
    body.push(b'\n');
    let tmp = files.dir.join("exit.json.tmp");
    {
        let mut f = OpenOptions::new()
            .write(true)
            .create(true)
            .truncate(true)
            .mode(0o600)
            .open(&tmp)?;
        f.write_all(&body)?;
        f.sync_all()?;
    }
    fs::rename(&tmp, &files.exit)?;
    File::open(&files.dir)?.sync_all()
}

/// Why the exit could not be reported.
#[derive(Debug)]
enum Refusal {
    /// The daemon answered with an error that retrying will not change.
    Refused(String),
    /// The daemon could not be reached for this many seconds.
    Unreachable(String, u64),
}

/// One attempt's outcome.
enum Attempt {
    Done,
    Retry(String),
    Refused(String),
}

fn report_secs() -> u64 {
    std::env::var("MAOS_SUPERVISE_REPORT_SECS")
        .ok()
        .and_then(|v| v.trim().parse().ok())
        .unwrap_or(DEFAULT_REPORT_SECS)
}

/// Send `AgentExited` until the daemon acknowledges it, refuses it, or the deadline passes.
fn report_exit(opts: &Opts, exit: &AgentExit) -> Result<(), Refusal> {
    let secs = report_secs();
    let deadline = Instant::now() + Duration::from_secs(secs);
    loop {
        match report_once(opts, exit) {
            Attempt::Done => return Ok(()),
            Attempt::Refused(e) => return Err(Refusal::Refused(e)),
            Attempt::Retry(e) => {
                if Instant::now() + RETRY_EVERY > deadline {
                    return Err(Refusal::Unreachable(e, secs));
                }
                std::thread::sleep(RETRY_EVERY);
            }
        }
    }
}

/// Whether an error from the daemon may go away by itself.
fn transient(code: ErrorCode) -> bool {
    matches!(code, ErrorCode::Unavailable | ErrorCode::ShuttingDown)
}

fn report_once(opts: &Opts, exit: &AgentExit) -> Attempt {
    let mut stream = match UnixStream::connect(&opts.socket) {
        Ok(s) => s,
        Err(e) => {
            return Attempt::Retry(format!("cannot connect to {}: {e}", opts.socket.display()));
        }
    };
    let _ = stream.set_read_timeout(Some(ATTEMPT_TIMEOUT));
    let _ = stream.set_write_timeout(Some(ATTEMPT_TIMEOUT));
    let hello = ClientMsg::Hello {
        protocol: crate::base::version::protocol(),
        client_version: env!("CARGO_PKG_VERSION").to_string(),
        // A short request that must get through a full daemon: the lane kept for the CLI.
        client: maos_proto::ClientKind::Cli,
    };
    let request = ClientMsg::Request {
        id: 1,
        project: Some(opts.project.clone()),
        body: Request::AgentExited(Box::new(exit.clone())),
    };
    // Hello and request back to back; the welcome is read with the response.
    let sent = maos_proto::write_frame(&mut stream, &hello)
        .and_then(|()| maos_proto::write_frame(&mut stream, &request));
    if let Err(e) = sent {
        // A refused hello is answered before the daemon closes: read it below.
        let answer = read_answer(&mut stream);
        return match answer {
            Attempt::Retry(_) => Attempt::Retry(format!("talking to maosd failed: {e}")),
            other => other,
        };
    }
    read_answer(&mut stream)
}

fn read_answer(stream: &mut UnixStream) -> Attempt {
    let refused = |e: maos_proto::ErrorBody| {
        if transient(e.code) {
            Attempt::Retry(format!("{}: {}", e.code, e.message))
        } else {
            Attempt::Refused(format!("{}: {}", e.code, e.message))
        }
    };
    loop {
        match maos_proto::read_frame::<_, ServerMsg>(stream) {
            Ok(ServerMsg::Response { id: 1, result }) => {
                return match result {
                    Ok(_) => Attempt::Done,
                    Err(e) => refused(e),
                };
            }
            Ok(ServerMsg::Error { error }) => return refused(error),
            Ok(_) => {} // the welcome, or anything not ours
            Err(e) => return Attempt::Retry(format!("talking to maosd failed: {e}")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn os(v: &[&str]) -> Vec<OsString> {
        v.iter().map(OsString::from).collect()
    }

    #[test]
    fn command_line_is_parsed_and_bad_ones_refused() {
        let o = parse(os(&[
            "--agent",
            "a1",
            "--socket",
            "/s",
            "--project",
            "/p",
            "--dir",
            "/d",
            "--cwd",
            "/c",
            "--",
            "sh",
            "-c",
            "exit 0",
        ]))
        .unwrap();
        assert_eq!(
            o,
            Opts {
                agent: "a1".into(),
                socket: "/s".into(),
                project: "/p".into(),
                dir: "/d".into(),
                cwd: Some("/c".into()),
                argv: os(&["sh", "-c", "exit 0"]),
            }
        );
        // Arguments after `--` are the agent's, flags included.
        let o = parse(os(&[
            "--agent",
            "a",
            "--socket",
            "s",
            "--project",
            "p",
            "--dir",
            "d",
            "--",
            "x",
            "--agent",
        ]))
        .unwrap();
        assert_eq!(o.argv, os(&["x", "--agent"]));
        assert_eq!(o.cwd, None);

        for (args, want) in [
            (
                vec![
                    "--agent",
                    "a",
                    "--socket",
                    "s",
                    "--project",
                    "p",
                    "--dir",
                    "d",
                ],
                "missing",
            ),
            (
                vec![
                    "--agent",
                    "a",
                    "--socket",
                    "s",
                    "--project",
                    "p",
                    "--dir",
                    "d",
                    "--",
                ],
                "missing",
            ),
            (
                vec!["--socket", "s", "--project", "p", "--dir", "d", "--", "x"],
                "--agent is required",
            ),
            (vec!["--agent", "a", "--agent", "b", "--", "x"], "twice"),
            (vec!["--agent"], "needs a value"),
            (vec!["--bogus", "x", "--", "x"], "unexpected"),
        ] {
            let e = parse(os(&args)).unwrap_err();
            assert!(e.contains(want), "{args:?}: {e}");
        }
    }

    #[test]
    fn the_last_json_line_with_a_session_id_wins() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("output.log");
        assert_eq!(find_session_id(&log), None);
        fs::write(
            &log,
            concat!(
                "--- maos: start ---\n",
                "{\"type\":\"system\",\"session_id\":\"first\"}\n",
                "text mentioning {\"session_id\":\"not a line of its own\"} here\n",
                "  {\"type\":\"result\",\"session_id\":\"3f2b-uuid\",\"result\":\"ok\"}  \r\n",
                "{\"session_id\": 42}\n",
                "{\"broken\": \"session_id\"\n",
                "--- maos: end ---\n",
            ),
        )
        .unwrap();
        assert_eq!(find_session_id(&log).as_deref(), Some("3f2b-uuid"));
    }

    #[test]
    fn only_the_log_tail_is_scanned_and_a_cut_line_is_skipped() {
        let t = tempfile::tempdir().unwrap();
        let log = t.path().join("output.log");
        let early = "{\"session_id\":\"early\"}\n";
        let filler = "x".repeat(SESSION_SCAN_BYTES as usize);
        fs::write(&log, format!("{early}{filler}\n")).unwrap();
        assert_eq!(find_session_id(&log), None, "beyond the window");

        // A line cut by the window's start is not taken for a whole object.
        // The window starts at the `{`: what it holds of the line parses, but is not the line.
        let obj = "{\"session_id\":\"inner\"}";
        let tail = "z".repeat(SESSION_SCAN_BYTES as usize - obj.len() - 1);
        fs::write(&log, format!("AAAA{obj}\n{tail}\n")).unwrap();
        assert_eq!(find_session_id(&log), None);

        // A window that starts exactly at a line start keeps that line.
        let line = "{\"session_id\":\"edge\"}\n";
        let rest = format!(
            "{}\n",
            "w".repeat(SESSION_SCAN_BYTES as usize - line.len() - 1)
        );
        fs::write(&log, format!("garbage\n{line}{rest}")).unwrap();
        assert_eq!(find_session_id(&log).as_deref(), Some("edge"));
    }

    #[test]
    fn exit_json_is_written_whole() {
        let t = tempfile::tempdir().unwrap();
        let files = AgentFiles::in_dir(t.path());
        let exit = AgentExit {
            agent: "a".into(),
            pid: 9,
            start_time: None,
            code: None,
            signal: Some(15),
            ended_at: chrono::Utc::now(),
            claude_session_id: None,
        };
        write_exit(&files, &exit).unwrap();
        assert_eq!(procs::read_exit(&files.exit).unwrap(), Some(exit));
        assert!(!t.path().join("exit.json.tmp").exists());
    }
}
