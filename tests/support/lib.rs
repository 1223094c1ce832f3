//! Support for the end-to-end tests: every test gets an [`Env`] — its own temporary directory
//! holding `MAOS_HOME`, `MAOS_SOCKET` and a project — and drives the real `maos` and `maosd`
//! binaries from `target/<profile>/`. Nothing is shared between tests and the real home is never
//! touched. Dropping an `Env` kills (`kill -9`) every daemon started for it, also when the test
//! panicked.
//!
//! Synchronisation is always "wait for a condition, with a deadline" ([`wait_until`]); a test
//! never sleeps for a fixed time and then hopes.

use std::collections::BTreeSet;
use std::ffi::OsStr;
use std::io::{Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::mpsc;
use std::sync::{Mutex, OnceLock};
use std::time::{Duration, Instant};

use maos_proto::{ClientMsg, FrameError, PROTOCOL_VERSION, ServerMsg};
pub use serde_json::{Value, json};

pub mod claude;
pub mod client;
pub mod codex;
pub mod conformance;
pub mod copilot;
pub mod daemon;
pub mod dashboard;
pub mod doctor;
pub mod gemini;
pub mod mcp;
pub mod netcut;
pub mod opencode;
pub mod postgres;
pub mod procfs;
pub mod started;
pub mod tempdir;
pub mod tmux;
pub mod webdriver;

/// How long any one `maos` invocation may take before the test fails (a hang is a bug).
pub const COMMAND_TIMEOUT: Duration = Duration::from_secs(30);
/// Default deadline for conditions the daemon should reach quickly.
pub const DEADLINE: Duration = Duration::from_secs(10);

/// `target/<profile>/`, where cargo put `maos` and `maosd`. Tests run from
/// `target/<profile>/deps/<test>-<hash>`.
pub fn bin_dir() -> PathBuf {
    let exe = std::env::current_exe().expect("cannot locate the test executable");
    let dir = exe
        .parent()
        .and_then(Path::parent)
        .expect("test executable is not under target/<profile>/deps")
        .to_path_buf();
    static CHECKED: OnceLock<Result<(), String>> = OnceLock::new();
    if let Err(e) = CHECKED.get_or_init(|| binaries_are_fresh(&dir)) {
        panic!("{e}");
    }
    dir
}

/// `maos`, `maosd` (and `maos-top`, `maos-demo`, `maos-dash`, `maos-mcp`) exist and are
/// newer than every source file they were built from, so that
/// a bare `cargo test` (which builds no binary of another package) never runs stale ones.
/// The sources are those cargo lists in each binary's dep-info file (`target/<profile>/maos.d`):
/// exactly what a rebuild would be triggered by, so `cargo build --workspace --bins` always
/// clears the refusal. Paths in it are rebased onto this workspace (a target directory may have
/// been copied from another checkout). Checked once per test binary.
fn binaries_are_fresh(dir: &Path) -> Result<(), String> {
    let build = "run `cargo build --workspace --bins` first";
    let workspace = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .ok_or("the tests package has no parent directory")?;
    for bin in [
        "maos",
        "maosd",
        "maos-top",
        "maos-demo",
        "maos-dash",
        "maos-mcp",
    ] {
        let path = dir.join(bin);
        let built = std::fs::metadata(&path)
            .and_then(|m| m.modified())
            .map_err(|e| format!("{}: {e}: {build}", path.display()))?;
        // Without dep-info (binaries put there by hand) there is nothing to compare with.
        let Ok(info) = std::fs::read_to_string(dir.join(format!("{bin}.d"))) else {
            continue;
        };
        for source in dep_info_sources(&info, workspace) {
            let newer = std::fs::metadata(&source)
                .and_then(|m| m.modified())
                .is_ok_and(|t| t > built);
            if newer {
                return Err(format!(
                    "{} is older than {}: {build}",
                    path.display(),
                    source.display()
                ));
            }
        }
    }
    Ok(())
}

/// The source files of a cargo dep-info file (`target: src1 src2 ...`, spaces escaped as
/// `\ `), rebased from the workspace the target was built in onto `workspace`.
fn dep_info_sources(info: &str, workspace: &Path) -> Vec<PathBuf> {
    let Some((target, deps)) = info.lines().next().and_then(|l| l.split_once(": ")) else {
        return Vec::new();
    };
    // `<root>/target/<profile>/<bin>`: the root the sources were listed under.
    let built_in = Path::new(target)
        .ancestors()
        .find(|a| a.file_name() == Some(OsStr::new("target")))
        .and_then(Path::parent)
        .map(Path::to_path_buf);
    let escaped = deps.replace("\\ ", "\0");
    escaped
        .split_whitespace()
        .map(|d| PathBuf::from(d.replace('\0', " ")))
        .map(
            |d| match built_in.as_deref().map(|root| d.strip_prefix(root)) {
                Some(Ok(rel)) => workspace.join(rel),
                _ => d,
            },
        )
        .collect()
}

pub fn maos_bin() -> PathBuf {
    bin_dir().join("maos")
}

pub fn maosd_bin() -> PathBuf {
    bin_dir().join("maosd")
}

/// Whether the system tool `name` (from a Debian package: `systemd-socket-activate`,
/// `systemd-analyze`) runs here. Where it does not, the test says why it skips; on CI (`CI`
/// set, as `.ci/run` installs what the tests need) a missing tool fails the test instead.
pub fn have_tool(name: &str, package: &str) -> bool {
    have_tool_with(name, &["--version"], package)
}

/// [`have_tool`] for a tool that tells its version with other arguments (`tmux -V`).
pub fn have_tool_with(name: &str, version_args: &[&str], package: &str) -> bool {
    let found = Command::new(name)
        .args(version_args)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    if !found {
        assert!(
            std::env::var_os("CI").is_none(),
            "{name} is missing on a CI machine: install the Debian package {package}"
        );
        eprintln!("skipped: {name} is not installed (Debian package {package})");
    }
    found
}

/// A check that cannot run here (`why`: what it needs). On a developer's machine the test says
/// it skips that check; on CI (`CI` set, where the tests run as root with the tools installed)
/// it fails, so that a check never passes there unseen.
pub fn skip_unless_ci(why: &str) {
    assert!(
        std::env::var_os("CI").is_none(),
        "cannot run on this CI machine: {why}"
    );
    eprintln!("skipped: {why}");
}

/// Run `f` to completion on a fresh current-thread tokio runtime (a test's sqlx calls).
pub fn block_on<F: std::future::Future>(f: F) -> F::Output {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("tokio runtime")
        .block_on(f)
}

/// Whether the tests run as root (to act as another user, chown, mount).
pub fn is_root() -> bool {
    // SAFETY: geteuid has no preconditions.
    unsafe { libc::geteuid() == 0 }
}

/// Run `cmd` without root's power to ignore file permissions (`CAP_DAC_OVERRIDE`,
/// `CAP_DAC_READ_SEARCH`, dropped from its bounding set before the exec), so that a read-only
/// directory refuses root's writes too. Where the capabilities cannot be dropped the command
/// fails to start.
#[cfg(target_os = "linux")]
pub fn without_dac_override(cmd: &mut Command) {
    use std::os::unix::process::CommandExt;
    const CAP_DAC_OVERRIDE: libc::c_ulong = 1;
    const CAP_DAC_READ_SEARCH: libc::c_ulong = 2;
    // SAFETY: prctl is async-signal-safe and changes only the child's own capabilities.
    unsafe {
        cmd.pre_exec(|| {
            for cap in [CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH] {
                if libc::prctl(libc::PR_CAPBSET_DROP, cap, 0, 0, 0) != 0 {
                    return Err(std::io::Error::last_os_error());
                }
            }
            Ok(())
        });
    }
}

/// Poll `cond` (every few milliseconds) until it holds; panic naming `what` after `timeout`.
pub fn wait_until(timeout: Duration, what: &str, cond: impl FnMut() -> bool) {
    assert!(
        holds_within(timeout, cond),
        "timed out after {timeout:?} waiting until {what}"
    );
}

/// Whether `cond` holds (polled every few milliseconds) before `timeout`: [`wait_until`] for
/// a test that says more than "timed out" when it does not.
pub fn holds_within(timeout: Duration, mut cond: impl FnMut() -> bool) -> bool {
    let deadline = Instant::now() + timeout;
    let mut pause = Duration::from_millis(1);
    loop {
        if cond() {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(25));
    }
}

/// Linux process state letter from `/proc/<pid>/stat` (`Z` for a zombie).
#[cfg(target_os = "linux")]
fn proc_state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // "pid (comm) S ...": the comm may contain spaces and parentheses; the state follows the
    // last ')'.
    stat.rsplit_once(')')?.1.trim_start().chars().next()
}

/// True while `pid` is a live process. A zombie (exited, not yet reaped by its parent, which
/// for a detached daemon is init) counts as gone once all its threads are gone: the main thread
/// turns zombie first, and the process's descriptors (socket, locks) close with its last thread.
pub fn alive(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists and may be signalled.
    if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
        return false;
    }
    #[cfg(target_os = "linux")]
    {
        let threads = std::fs::read_dir(format!("/proc/{pid}/task")).map_or(0, Iterator::count);
        if proc_state(pid).is_none_or(|s| s == 'Z') && threads <= 1 {
            return false;
        }
    }
    true
}

/// `kill -9 pid`.
pub fn kill9(pid: u32) {
    // SAFETY: plain kill(2) on a pid we own.
    unsafe {
        libc::kill(pid as libc::pid_t, libc::SIGKILL);
    }
}

/// Run a command with a deadline; a command that hangs is killed and the test fails.
pub fn run_with_timeout(mut cmd: Command, timeout: Duration) -> Output {
    cmd.stdout(Stdio::piped());
    run_with_timeout_keeping_stdout(cmd, timeout)
}

/// [`run_with_timeout`] with the stdout the caller set on `cmd` (the returned stdout is empty
/// unless it was piped).
pub fn run_with_timeout_keeping_stdout(mut cmd: Command, timeout: Duration) -> Output {
    cmd.stdin(Stdio::null()).stderr(Stdio::piped());
    let child = cmd
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    let pid = child.id();
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(timeout) {
        Ok(out) => out.unwrap_or_else(|e| panic!("waiting for {cmd:?}: {e}")),
        Err(_) => {
            kill9(pid);
            panic!("{cmd:?} did not finish within {timeout:?}");
        }
    }
}

/// Everything a failed `maos --json` invocation told us.
#[derive(Debug)]
pub struct Failure {
    pub exit: i32,
    /// `error.code` of the JSON error object on stdout.
    pub code: String,
    pub message: String,
    pub stderr: String,
}

/// Whether to skip a test about SQLite's own files (`maos backup`, `restore`) because the
/// suite runs on PostgreSQL (`MAOS_TEST_DATABASE=postgres`); says so when it does. What fleet
/// mode does instead is tested in `fleet.rs`.
pub fn sqlite_only(what: &str) -> bool {
    let pg = postgres::test_database_url().is_some();
    if pg {
        eprintln!("skipped on PostgreSQL: {what}");
    }
    pg
}

/// A project's key in fleet mode (its clone's `origin`, see [`make_clone`]).
pub fn project_key(project: &Path) -> String {
    maos_proto::paths::repository_key(project)
        .unwrap_or_else(|e| panic!("{} has no fleet key: {e}", project.display()))
        .as_str()
        .to_string()
}

/// Rows of two text columns of `sql` (binding the project key as `$1` and `arg` as `$2`) in
/// the PostgreSQL at `url`.
fn pg_rows(url: &str, sql: &str, key: &str, arg: Option<&str>) -> Vec<(String, String)> {
    use sqlx::Connection;
    block_on(async {
        let mut c = sqlx::PgConnection::connect(url)
            .await
            .unwrap_or_else(|e| panic!("cannot connect to {url}: {e}"));
        sqlx::query_as(sql)
            .bind(key)
            .bind(arg)
            .fetch_all(&mut c)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    })
}

/// Make `dir` look like a clone of its own repository: a `.git` directory (so that project
/// identity is this directory whatever lies above it) whose config names an `origin` remote
/// unique to the directory, which is the project's key in fleet mode.
pub fn make_clone(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir.join(".git"))?;
    let unique = workspace_key(dir);
    std::fs::write(
        dir.join(".git").join("config"),
        format!("[remote \"origin\"]\n\turl = https://e2e.invalid/{unique}.git\n"),
    )
}

/// A path's name for an `origin` URL: its last two components (the test's temporary directory
/// and the project's name), which no other test shares.
fn workspace_key(dir: &Path) -> String {
    let parts: Vec<String> = dir
        .components()
        .rev()
        .take(2)
        .map(|c| {
            c.as_os_str().to_string_lossy().replace(
                |ch: char| !ch.is_ascii_alphanumeric() && ch != '-' && ch != '_' && ch != '.',
                "_",
            )
        })
        .collect();
    parts.into_iter().rev().collect::<Vec<_>>().join("/")
}

/// One test's private world: a temporary directory with the daemon's home, its socket and a
/// project. Commands get `MAOS_HOME`/`MAOS_SOCKET` on their own environment, never through the
/// test process's.
pub struct Env {
    _tmp: tempfile::TempDir,
    pub home: PathBuf,
    pub socket: PathBuf,
    /// The default project directory (`--project`).
    pub project: PathBuf,
    /// Daemon pids seen by this test, killed on drop.
    seen: Mutex<BTreeSet<u32>>,
}

impl Default for Env {
    fn default() -> Self {
        Env::new()
    }
}

impl Env {
    pub fn new() -> Env {
        Env::try_new("maos-e2e-").expect("cannot create the test's temporary directory")
    }

    /// The temporary directory everything lives in.
    pub fn root(&self) -> PathBuf {
        self.home.parent().expect("home has a parent").to_path_buf()
    }

    /// Create another project directory inside the tempdir. It gets a `.git` directory so that
    /// project identity is this directory whatever lies above the tempdir.
    pub fn make_project(&self, name: &str) -> PathBuf {
        let dir = self.root().join(name);
        make_clone(&dir).expect("project dir");
        dir
    }

    /// A command for `bin` with this test's environment (and nothing of the caller's maos
    /// settings).
    pub fn command(&self, bin: &Path) -> Command {
        let mut cmd = Command::new(bin);
        match postgres::test_database_url() {
            Some(url) => cmd.env("MAOS_DATABASE_URL", url),
            None => cmd.env_remove("MAOS_DATABASE_URL"),
        };
        for var in [
            "MAOS_LOG",
            "MAOS_PROJECT",
            "MAOS_NO_AUTOSTART",
            "MAOS_SYNCHRONOUS",
            "MAOS_MACHINE",
            "XDG_RUNTIME_DIR",
            "XDG_STATE_HOME",
        ] {
            cmd.env_remove(var);
        }
        cmd.env("MAOS_HOME", &self.home)
            .env("MAOS_SOCKET", &self.socket)
            .env("HOME", self.root().join("user"))
            .env("USER", "e2e-tester")
            .current_dir(&self.project);
        cmd
    }

    /// Write `$MAOS_HOME/config.toml` (creating the home, 0700, first).
    pub fn write_config(&self, toml: &str) {
        use std::os::unix::fs::DirBuilderExt;
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(&self.home)
            .expect("create MAOS_HOME");
        std::fs::write(self.home.join("config.toml"), toml).expect("write config.toml");
    }

    /// `maos --project <project> ARGS`; without `--project` for the commands that work on no
    /// project (`daemon`, `completions`, `man`, `demo`, `init`, `dashboard`), which refuse it.
    pub fn maos_cmd_in<S: AsRef<OsStr>>(&self, project: &Path, args: &[S]) -> Command {
        let mut cmd = self.command(&maos_bin());
        let verb = args
            .iter()
            .map(AsRef::as_ref)
            .find(|a| !a.to_string_lossy().starts_with('-'));
        let projectless = verb.is_some_and(|v| {
            ["daemon", "completions", "man", "demo", "init", "dashboard"]
                .iter()
                .any(|p| v == OsStr::new(p))
        });
        if !projectless {
            cmd.arg("--project").arg(project);
        }
        cmd.args(args);
        cmd
    }

    /// Run `maos` in `project` and return what it did.
    pub fn maos_in<S: AsRef<OsStr>>(&self, project: &Path, args: &[S]) -> Output {
        let out = run_with_timeout(self.maos_cmd_in(project, args), COMMAND_TIMEOUT);
        self.note_daemon();
        out
    }

    /// Run `maos` in the default project.
    pub fn maos<S: AsRef<OsStr>>(&self, args: &[S]) -> Output {
        self.maos_in(&self.project, args)
    }

    /// `maos --json ARGS` in `project`, which must succeed; its stdout parsed as one JSON value.
    pub fn maos_json_in<S: AsRef<OsStr>>(&self, project: &Path, args: &[S]) -> Value {
        let mut all: Vec<&OsStr> = vec![OsStr::new("--json")];
        all.extend(args.iter().map(AsRef::as_ref));
        json_of(&format!("maos {all:?}"), &self.maos_in(project, &all))
    }

    /// `maos --json ARGS` in the default project, which must succeed.
    pub fn maos_json<S: AsRef<OsStr>>(&self, args: &[S]) -> Value {
        self.maos_json_in(&self.project, args)
    }

    /// `maos --json ARGS` in `project`, which must fail with the JSON error object on stdout.
    pub fn maos_fail_in<S: AsRef<OsStr>>(&self, project: &Path, args: &[S]) -> Failure {
        let mut all: Vec<&OsStr> = vec![OsStr::new("--json")];
        all.extend(args.iter().map(AsRef::as_ref));
        failure_of(&format!("maos {all:?}"), &self.maos_in(project, &all))
    }

    /// `maos --json ARGS` in the default project, which must fail.
    pub fn maos_fail<S: AsRef<OsStr>>(&self, args: &[S]) -> Failure {
        self.maos_fail_in(&self.project, args)
    }

    /// `maos ARGS` run from the directory `cwd`, without `--project`: the project is found from
    /// the working directory, as it is for an agent's shell.
    pub fn maos_cmd_at<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Command {
        let mut cmd = self.command(&maos_bin());
        cmd.current_dir(cwd).args(args);
        cmd
    }

    /// Run `maos ARGS` (`hook`, `hook --cli codex`, ...) from `cwd` with `input` on its stdin
    /// and `vars` in its environment, as an agent CLI runs its hook. The input is written by a
    /// thread (the hook may stop reading early, and exit), then stdin is closed, or left open
    /// until the hook has exited with `keep_open` (some CLIs never close it). A hook still
    /// running after [`COMMAND_TIMEOUT`] is killed and fails the test.
    pub fn hook_at(
        &self,
        cwd: &Path,
        args: &[&str],
        input: Vec<u8>,
        vars: &[(&str, &str)],
        keep_open: bool,
    ) -> Output {
        let mut cmd = self.maos_cmd_at(cwd, args);
        cmd.envs(vars.iter().copied())
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("run maos hook");
        let mut stdin = child.stdin.take().expect("stdin");
        let writer = std::thread::spawn(move || {
            // EPIPE once the hook has refused the input and exited.
            let _ = stdin.write_all(&input);
            keep_open.then_some(stdin)
        });
        let pid = child.id();
        let (tx, rx) = mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(child.wait_with_output());
        });
        let out = match rx.recv_timeout(COMMAND_TIMEOUT) {
            Ok(out) => out.expect("maos hook output"),
            Err(_) => {
                kill9(pid);
                panic!("maos {args:?} did not finish within {COMMAND_TIMEOUT:?}");
            }
        };
        drop(writer.join().expect("stdin writer"));
        out
    }

    /// One `maos hook --cli CLI` call from the project with `input` on stdin, which must
    /// succeed (a denial is an answer too): what it answered.
    pub fn hook(&self, cli: &str, input: &Value) -> Output {
        let input = input.to_string().into_bytes();
        let out = self.hook_at(&self.project, &["hook", "--cli", cli], input, &[], false);
        assert!(out.status.success(), "{}", describe(&out));
        out
    }

    /// Run `maos ARGS` from `cwd` (no `--project`) and return what it did.
    pub fn maos_at<S: AsRef<OsStr>>(&self, cwd: &Path, args: &[S]) -> Output {
        let out = run_with_timeout(self.maos_cmd_at(cwd, args), COMMAND_TIMEOUT);
        self.note_daemon();
        out
    }

    /// Start `maos ARGS` in the default project without waiting for it (e.g. a lock request
    /// that waits): see [`Background`].
    pub fn spawn_maos<S: AsRef<OsStr>>(&self, args: &[S]) -> Background {
        Background::spawn(self.maos_cmd_in(&self.project, args))
    }

    /// `maos --json ARGS` that creates something: the new object's `"id"`.
    pub fn create<S: AsRef<OsStr>>(&self, args: &[S]) -> String {
        let v = self.maos_json(args);
        v["id"]
            .as_str()
            .unwrap_or_else(|| panic!("no \"id\" in {v}"))
            .to_string()
    }

    /// `maos session create --objective OBJECTIVE --phase P...`: the new session's id.
    pub fn session(&self, objective: &str, phases: &[&str]) -> String {
        let mut args = vec!["session", "create", "--objective", objective];
        for p in phases {
            args.extend(["--phase", p]);
        }
        self.create(&args)
    }

    /// `maos agent register` in `session` (`None`: the active one): the new agent's id.
    pub fn agent(&self, session: Option<&str>, role: &str, task: &str) -> String {
        let mut args = vec!["agent", "register", "--role", role, "--task", task];
        if let Some(s) = session {
            args.extend(["--session", s]);
        }
        self.create(&args)
    }

    /// The whole timeline of `project` (`maos events --json`, one object per line).
    pub fn events_in(&self, project: &Path, extra: &[&str]) -> Vec<Value> {
        let mut args = vec!["--json", "events"];
        args.extend_from_slice(extra);
        let out = self.maos_in(project, &args);
        assert!(out.status.success(), "maos events: {}", describe(&out));
        parse_lines(&out.stdout)
    }

    /// The default project's timeline, optionally filtered (`extra` are `events` arguments).
    pub fn events(&self, extra: &[&str]) -> Vec<Value> {
        self.events_in(&self.project, extra)
    }

    /// The default project's lock timeline: grants, releases and expiries, in commit (`seq`)
    /// order.
    pub fn lock_timeline(&self) -> Vec<Value> {
        self.events(&[
            "--type",
            "lock_acquired",
            "--type",
            "lock_released",
            "--type",
            "lock_expired",
        ])
    }

    /// The running daemon's pid, as `maos daemon status --json` reports it.
    pub fn daemon_pid(&self) -> u32 {
        let v = self.maos_json(&["daemon", "status"]);
        let pid = v["pid"]
            .as_u64()
            .unwrap_or_else(|| panic!("no pid in daemon status {v}")) as u32;
        self.seen
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(pid);
        pid
    }

    /// The pid written in `$MAOS_HOME/maosd.pid`, if any.
    pub fn pidfile_pid(&self) -> Option<u32> {
        std::fs::read_to_string(self.home.join("maosd.pid"))
            .ok()?
            .trim()
            .parse()
            .ok()
    }

    fn note_daemon(&self) {
        if let Some(pid) = self.pidfile_pid() {
            self.seen
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .insert(pid);
        }
    }

    /// Live `maosd` processes serving this test's home (found through `/proc`, so that a daemon
    /// that lost a start race is counted too).
    #[cfg(target_os = "linux")]
    pub fn daemons(&self) -> Vec<u32> {
        self.processes()
            .into_iter()
            .filter(|&pid| is_maosd(pid))
            .collect()
    }

    /// Every live process started for this test's home: daemons, and the supervisors and
    /// agents of managed sessions (they inherit `MAOS_HOME`).
    #[cfg(target_os = "linux")]
    pub fn processes(&self) -> Vec<u32> {
        let mut needle = b"MAOS_HOME=".to_vec();
        needle.extend_from_slice(self.home.as_os_str().as_encoded_bytes());
        needle.push(0);
        let Ok(dir) = std::fs::read_dir("/proc") else {
            return Vec::new();
        };
        let mut pids: Vec<u32> = dir
            .filter_map(|e| e.ok()?.file_name().to_str()?.parse().ok())
            .filter(|&pid| alive(pid))
            .filter(|pid| {
                std::fs::read(format!("/proc/{pid}/environ"))
                    .is_ok_and(|env| env.split_inclusive(|&b| b == 0).any(|v| v == &needle[..]))
            })
            .collect();
        pids.sort_unstable();
        pids
    }

    #[cfg(not(target_os = "linux"))]
    pub fn processes(&self) -> Vec<u32> {
        self.daemons()
    }

    /// Live `maosd` processes serving this test's home (the pidfile's, where `/proc` is missing).
    #[cfg(not(target_os = "linux"))]
    pub fn daemons(&self) -> Vec<u32> {
        self.pidfile_pid()
            .filter(|&p| alive(p))
            .into_iter()
            .collect()
    }

    /// `kill -9` the running daemon and wait until it is gone. Returns its pid.
    pub fn kill9(&self) -> u32 {
        let pid = self.daemon_pid();
        kill9(pid);
        wait_until(DEADLINE, "the killed daemon is gone", || !alive(pid));
        pid
    }

    /// The canonical project root of `dir`, as the client sends it to the daemon.
    pub fn project_root(dir: &Path) -> String {
        maos_proto::paths::project_root(dir)
            .to_string_lossy()
            .into_owned()
    }

    /// `$MAOS_HOME/projects/<hash>/maos.db` of `dir`'s project.
    pub fn db_path_of(&self, dir: &Path) -> PathBuf {
        let root = maos_proto::paths::project_root(dir);
        self.home
            .join("projects")
            .join(maos_proto::paths::workspace_hash(&root))
            .join("maos.db")
    }

    /// The default project's database file.
    pub fn db_path(&self) -> PathBuf {
        self.db_path_of(&self.project)
    }

    /// Run a read of the default project's database (which must exist) to completion.
    fn read_db<T, F: std::future::Future<Output = Result<T, maos_store::StoreError>>>(
        &self,
        what: &str,
        read: impl FnOnce(PathBuf) -> F,
    ) -> T {
        self.read_db_of(&self.project, what, read)
    }

    /// Run a read of `project`'s database (which must exist) to completion.
    fn read_db_of<T, F: std::future::Future<Output = Result<T, maos_store::StoreError>>>(
        &self,
        project: &Path,
        what: &str,
        read: impl FnOnce(PathBuf) -> F,
    ) -> T {
        let path = self.db_path_of(project);
        assert!(path.is_file(), "{} does not exist", path.display());
        block_on(read(path.clone())).unwrap_or_else(|e| panic!("{what} {}: {e}", path.display()))
    }

    /// `PRAGMA integrity_check` of the default project's database; in fleet mode, "ok" when
    /// PostgreSQL holds the project.
    pub fn integrity_check(&self) -> String {
        if let Some(url) = postgres::test_database_url() {
            let key = project_key(&self.project);
            let found = pg_rows(
                url,
                "SELECT key, key FROM projects WHERE key = $1 AND $2::text IS NULL",
                &key,
                None,
            );
            return if found.is_empty() {
                format!("no project {key} in PostgreSQL")
            } else {
                "ok".into()
            };
        }
        self.read_db("integrity_check", |p| async move {
            maos_store::integrity_check(&p).await
        })
    }

    /// The checkpoints of a session, oldest first: (reason, snapshot).
    pub fn checkpoints(&self, session: &str) -> Vec<(String, Value)> {
        self.checkpoints_in(&self.project, session)
    }

    /// A session's checkpoints in `project`'s database: (reason, snapshot), oldest first.
    pub fn checkpoints_in(&self, project: &Path, session: &str) -> Vec<(String, Value)> {
        let rows: Vec<(String, String)> = match postgres::test_database_url() {
            Some(url) => pg_rows(
                url,
                "SELECT reason, state FROM checkpoints WHERE project = $1 AND session_id = $2 \
                 ORDER BY id",
                &project_key(project),
                Some(session),
            ),
            None => {
                let session = session.to_string();
                let rows = self.read_db_of(project, "checkpoints", |p| async move {
                    maos_store::checkpoints(&p, &session).await
                });
                rows.into_iter().map(|c| (c.reason, c.state)).collect()
            }
        };
        rows.into_iter()
            .map(|(reason, state)| {
                let v = serde_json::from_str(&state).expect("checkpoint JSON");
                (reason, v)
            })
            .collect()
    }

    /// Everything the default project's database stores, to search: the SQLite file and its
    /// WAL, or in fleet mode every row of the project in PostgreSQL, as JSON text.
    pub fn stored_bytes(&self) -> Vec<u8> {
        match postgres::test_database_url() {
            Some(url) => {
                let key = project_key(&self.project);
                let mut out = Vec::new();
                for table in [
                    "sessions",
                    "session_agents",
                    "phases",
                    "session_events",
                    "locks",
                    "checkpoints",
                ] {
                    let sql = format!(
                        "SELECT 'row', row_to_json(t)::text FROM {table} t WHERE project = $1 \
                         AND $2::text IS NULL"
                    );
                    for (_, row) in pg_rows(url, &sql, &key, None) {
                        out.extend_from_slice(row.as_bytes());
                        out.push(b'\n');
                    }
                }
                out
            }
            None => {
                let mut bytes = std::fs::read(self.db_path()).expect("the project's database");
                let wal = self.db_path().with_extension("db-wal");
                bytes.extend(std::fs::read(&wal).unwrap_or_default());
                bytes
            }
        }
    }

    /// A raw protocol connection to the daemon (which must be running).
    pub fn raw(&self) -> Raw {
        Raw::connect(&self.socket)
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let mut pids = self
            .seen
            .lock()
            .map(|s| s.clone())
            .unwrap_or_else(|e| e.into_inner().clone());
        pids.extend(self.pidfile_pid());
        pids.extend(self.daemons());
        for pid in pids {
            // Only ever a maosd: a remembered pid may have been reused since.
            if is_maosd(pid) && alive(pid) {
                kill9(pid);
            }
        }
        // Supervisors and agents of managed sessions outlive the daemon by design.
        for pid in self.processes() {
            kill9(pid);
        }
    }
}

/// True when `pid` runs the `maosd` binary.
fn is_maosd(pid: u32) -> bool {
    #[cfg(target_os = "linux")]
    {
        std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c.trim() == "maosd")
    }
    #[cfg(not(target_os = "linux"))]
    {
        let _ = pid;
        true
    }
}

/// `git ARGS` in `dir` (an author set, no signing, none of the caller's `GIT_DIR` /
/// `GIT_INDEX_FILE`), which must succeed.
pub fn git(dir: &Path, args: &[&str]) {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=t", "-c", "user.email=t@t"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .env_remove("GIT_DIR")
        .env_remove("GIT_INDEX_FILE")
        .output()
        .expect("git");
    assert!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A hook's input as an agent CLI sends it, in Claude Code's shape: the window (`session_id`),
/// the directory it runs in, the event, and the fields of `extra`.
pub fn hook_input(cwd: &Path, window: &str, event: &str, extra: Value) -> Value {
    let mut v = serde_json::json!({"session_id": window, "cwd": cwd, "hook_event_name": event});
    if let (Some(v), Value::Object(extra)) = (v.as_object_mut(), extra) {
        v.extend(extra);
    }
    v
}

/// One `maos hook` call of the window `window` from `cwd` (Claude Code's JSON on stdin: the
/// [`hook_input`] of `event` with `extra`), which must succeed.
pub fn window_hook(env: &Env, cwd: &Path, window: &str, event: &str, extra: Value) -> Output {
    let input = hook_input(cwd, window, event, extra)
        .to_string()
        .into_bytes();
    let out = env.hook_at(cwd, &["hook"], input, &[], false);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

/// A window's start as its CLI makes it, from `cwd`: `SessionStart`, then a prompt asking it
/// to work (so that it is an agent with a task).
pub fn window_start(env: &Env, cwd: &Path, window: &str) {
    let prompt = serde_json::json!({"prompt": format!("work in {window}")});
    window_hook(
        env,
        cwd,
        window,
        "SessionStart",
        serde_json::json!({"source": "startup"}),
    );
    window_hook(env, cwd, window, "UserPromptSubmit", prompt);
}

/// A `Write` of `path` (relative to `cwd`) by `window`, as its CLI makes it: PreToolUse, which
/// must let it through, the file written, then PostToolUse, whose output is returned.
pub fn window_write(env: &Env, cwd: &Path, window: &str, path: &str, content: &str) -> Output {
    let file = cwd.join(path);
    let input = serde_json::json!({"tool_name": "Write",
        "tool_use_id": format!("toolu_{window}_{path}"),
        "tool_input": {"file_path": file, "content": content}});
    let out = window_hook(env, cwd, window, "PreToolUse", input.clone());
    assert_eq!(denial_reason(&out), "", "{window} may write {path}");
    std::fs::write(&file, content).unwrap_or_else(|e| panic!("write {}: {e}", file.display()));
    window_hook(env, cwd, window, "PostToolUse", input)
}

/// The reason of a denial a hook printed: Claude Code's and Codex's `permissionDecisionReason`,
/// or Gemini CLI's top-level `reason` of a `deny`; "" when it let the call through.
pub fn denial_reason(out: &Output) -> String {
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .or(v["reason"].as_str().filter(|_| v["decision"] == "deny"))
        .unwrap_or_default()
        .to_string()
}

/// The decision a Claude Code hook printed on stdout: "deny", or "" for none (the call goes
/// through).
pub fn decision(out: &Output) -> String {
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return String::new();
    }
    let v: serde_json::Value =
        serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("stdout {text:?}: {e}"));
    v["hookSpecificOutput"]["permissionDecision"]
        .as_str()
        .unwrap_or("")
        .to_string()
}

/// Status, stdout and stderr of a finished command, for assertion messages.
pub fn describe(out: &Output) -> String {
    format!(
        "{}\n--- stdout ---\n{}--- stderr ---\n{}",
        out.status,
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    )
}

/// The stdout of a `maos --json` run (`what` names it in messages), which must have succeeded,
/// parsed as one JSON value.
pub fn json_of(what: &str, out: &Output) -> Value {
    assert!(out.status.success(), "{what} failed: {}", describe(out));
    serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{what} printed invalid JSON ({e}): {}", describe(out)))
}

/// The JSON error object of a `maos --json` run (`what` names it in messages), which must have
/// failed.
pub fn failure_of(what: &str, out: &Output) -> Failure {
    assert!(
        !out.status.success(),
        "{what} should have failed: {}",
        describe(out)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "{what} failed without a JSON error object ({e}): {}",
            describe(out)
        )
    });
    Failure {
        exit: out.status.code().unwrap_or(-1),
        code: v["error"]["code"].as_str().unwrap_or_default().to_string(),
        message: v["error"]["message"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// An RFC 3339 UTC timestamp as the daemon prints it (`2026-11-22T10:00:00.123456Z`) in
/// microseconds since the Unix epoch.
pub fn ts_micros(ts: &str) -> i64 {
    parse_ts(ts).unwrap_or_else(|| panic!("not an RFC 3339 UTC timestamp: {ts:?}"))
}

/// [`ts_micros`] of a timestamp that may not be one.
pub fn parse_ts(ts: &str) -> Option<i64> {
    let (date, time) = ts.strip_suffix('Z')?.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    let (hms, frac) = time.split_once('.').unwrap_or((time, "0"));
    let h: Vec<i64> = hms
        .split(':')
        .map(|s| s.parse().ok())
        .collect::<Option<_>>()?;
    if d.len() != 3 || h.len() != 3 || frac.len() > 9 {
        return None;
    }
    // Days from the civil date (Howard Hinnant's algorithm).
    let (y, m, day) = (d[0] - i64::from(d[1] <= 2), d[1], d[2]);
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let micros: i64 = format!("{frac:0<6}")[..6].parse().ok()?;
    Some(((days * 24 + h[0]) * 60 + h[1]) * 60_000_000 + h[2] * 1_000_000 + micros)
}

/// One JSON object per non-empty line.
pub fn parse_lines(bytes: &[u8]) -> Vec<Value> {
    String::from_utf8_lossy(bytes)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap_or_else(|e| panic!("bad JSON line {l:?}: {e}")))
        .collect()
}

/// Split a command line on whitespace (for arguments without spaces):
/// `env.maos_json(&argv(&format!("agent start {id}")))`.
pub fn argv(line: &str) -> Vec<&str> {
    line.split_whitespace().collect()
}

/// The `"id"` strings of a JSON array of objects, sorted.
pub fn ids(v: &Value) -> Vec<String> {
    let mut ids: Vec<String> = v
        .as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| x["id"].as_str().expect("id").to_string())
        .collect();
    ids.sort();
    ids
}

/// Every agent of a `maos --json ps` answer, across its sessions.
pub fn agents_in(ps: &Value) -> Vec<Value> {
    ps.as_array()
        .unwrap_or_else(|| panic!("not a list of sessions: {ps}"))
        .iter()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .cloned()
        .collect()
}

/// `body` as one frame: its length (4 bytes, big-endian), then the body.
pub fn frame(body: &[u8]) -> Vec<u8> {
    let mut f = (body.len() as u32).to_be_bytes().to_vec();
    f.extend_from_slice(body);
    f
}

/// The connection still answers, and the daemon still serves the project at `root`.
pub fn assert_usable(conn: &mut Raw, root: &str) {
    assert_eq!(
        conn.request(None, json!({"request": "ping"}))["Ok"]["type"],
        "pong"
    );
    let ps = conn.request(Some(root), json!({"request": "ps"}));
    assert_eq!(ps["Ok"]["type"], "ps", "{ps}");
}

/// A raw protocol connection (blocking std socket with timeouts, maos_proto framing), for
/// talking to the daemon the way no well-behaved client would.
pub struct Raw {
    pub stream: UnixStream,
    next_id: u64,
}

impl Raw {
    pub fn connect(socket: &Path) -> Raw {
        let stream = UnixStream::connect(socket)
            .unwrap_or_else(|e| panic!("connect {}: {e}", socket.display()));
        stream.set_read_timeout(Some(DEADLINE)).expect("timeout");
        stream.set_write_timeout(Some(DEADLINE)).expect("timeout");
        Raw { stream, next_id: 1 }
    }

    /// Send the Hello frame for `protocol` and return the answer.
    pub fn hello_with(&mut self, protocol: u32) -> Result<ServerMsg, FrameError> {
        self.send(&ClientMsg::Hello {
            protocol,
            client_version: "e2e".into(),
            client: maos_proto::ClientKind::Other,
        });
        self.recv()
    }

    /// A successful handshake with the current protocol; returns the daemon's pid.
    pub fn hello(&mut self) -> u32 {
        match self.hello_with(PROTOCOL_VERSION) {
            Ok(ServerMsg::Welcome { pid, protocol, .. }) => {
                assert_eq!(protocol, PROTOCOL_VERSION);
                pid
            }
            other => panic!("expected Welcome, got {other:?}"),
        }
    }

    /// Write one frame holding `msg` (any JSON, well-formed message or not).
    pub fn send<T: serde::Serialize>(&mut self, msg: &T) {
        maos_proto::write_frame(&mut self.stream, msg).expect("write frame");
    }

    /// Write raw bytes (the test builds the frame itself).
    pub fn send_bytes(&mut self, bytes: &[u8]) -> std::io::Result<()> {
        self.stream.write_all(bytes)?;
        self.stream.flush()
    }

    pub fn recv(&mut self) -> Result<ServerMsg, FrameError> {
        maos_proto::read_frame(&mut self.stream)
    }

    /// Send a request (its `body` as JSON: `{"request": "...", ...}`) and return the response's
    /// `result` as JSON: `{"Ok": {...}}` or `{"Err": {"code", "message"}}`.
    pub fn request(&mut self, project: Option<&str>, body: Value) -> Value {
        self.try_request(project, body)
            .unwrap_or_else(|e| panic!("no response: {e}"))
    }

    /// [`Raw::request`] that reports a broken connection instead of panicking.
    pub fn try_request(&mut self, project: Option<&str>, body: Value) -> Result<Value, FrameError> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"kind": "request", "id": id, "project": project, "body": body});
        maos_proto::write_frame(&mut self.stream, &msg)?;
        let v: Value = maos_proto::read_frame(&mut self.stream)?;
        let r = &v["response"];
        assert!(r.is_object(), "unexpected frame {v}");
        assert_eq!(r["id"], id, "response to another request: {v}");
        Ok(r["result"].clone())
    }

    /// True when the daemon closed this connection (EOF), as opposed to it staying open.
    pub fn closed_by_peer(&mut self) -> bool {
        let mut b = [0u8; 1];
        match self.stream.read(&mut b) {
            Ok(0) => true,
            Err(e) => e.kind() == std::io::ErrorKind::ConnectionReset,
            Ok(_) => false,
        }
    }
}

/// A child process killed when dropped (e.g. `maos events --follow`).
pub struct ChildGuard(pub std::process::Child);

impl Drop for ChildGuard {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// A command running in the background with its stdout and stderr captured; killed when
/// dropped (also when the test panicked).
pub struct Background {
    child: Option<std::process::Child>,
    what: String,
}

impl Background {
    pub fn spawn(mut cmd: Command) -> Background {
        cmd.stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let what = format!("{cmd:?}");
        let child = cmd
            .spawn()
            .unwrap_or_else(|e| panic!("cannot run {what}: {e}"));
        Background {
            child: Some(child),
            what,
        }
    }

    pub fn pid(&self) -> u32 {
        self.child.as_ref().expect("running").id()
    }

    /// True until the process has exited.
    pub fn running(&mut self) -> bool {
        let child = self.child.as_mut().expect("running");
        child
            .try_wait()
            .unwrap_or_else(|e| panic!("waiting for {}: {e}", self.what))
            .is_none()
    }

    /// Wait (up to `timeout`, else the test fails) for the process to exit; what it did.
    pub fn finish(mut self, timeout: Duration) -> Output {
        let what = format!("{} exits", self.what);
        wait_until(timeout, &what, || !self.running());
        self.child
            .take()
            .expect("running")
            .wait_with_output()
            .unwrap_or_else(|e| panic!("output of {}: {e}", self.what))
    }
}

impl Drop for Background {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{dep_info_sources, ts_micros};
    use std::path::{Path, PathBuf};

    #[test]
    fn dep_info_sources_are_rebased_onto_this_workspace() {
        let info = "/a/ws/target/debug/maos: /a/ws/src/main.rs /a/ws/my\\ dir/x.rs /elsewhere/y.rs\n\n\
                    /a/ws/src/main.rs:\n";
        assert_eq!(
            dep_info_sources(info, Path::new("/b/wt")),
            [
                PathBuf::from("/b/wt/src/main.rs"),
                PathBuf::from("/b/wt/my dir/x.rs"),
                PathBuf::from("/elsewhere/y.rs"),
            ]
        );
        assert!(dep_info_sources("", Path::new("/b")).is_empty());
    }

    #[test]
    fn timestamps_parse_to_epoch_micros() {
        assert_eq!(ts_micros("1970-01-01T00:00:00Z"), 0);
        assert_eq!(ts_micros("2000-03-01T00:00:00Z"), 951_868_800_000_000);
        assert_eq!(
            ts_micros("2026-11-22T03:06:55.356224Z"),
            1_795_316_815_356_224
        );
        assert_eq!(ts_micros("2024-02-29T23:59:59.5Z"), 1_709_251_199_500_000);
    }
}
