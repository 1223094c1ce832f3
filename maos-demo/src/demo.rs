//! The demo's harness: a throw-away project with its own daemon (its own `MAOS_HOME` and
//! socket), `maos` commands run in it and echoed with their output, and the narration.

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use serde_json::Value;

/// The `maos` this tour drives: the one that started it (`maos demo` sets `MAOS_CLIENT`),
/// else the one next to this binary, else `maos` on `PATH`.
fn client() -> PathBuf {
    if let Some(p) = std::env::var_os("MAOS_CLIENT").filter(|p| !p.is_empty()) {
        return PathBuf::from(p);
    }
    std::env::current_exe()
        .ok()
        .and_then(|me| Some(me.parent()?.join("maos")))
        .filter(|p| p.is_file())
        .unwrap_or_else(|| PathBuf::from("maos"))
}

/// How the tour goes from one step to the next (`--step`, `--pace`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Pacing {
    None,
    /// Wait for Enter before each step.
    Step,
    /// Wait this long before each step.
    Pace(std::time::Duration),
}

/// How much the demo shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// The story (the default): each act introduced by one line, its steps and outcomes in a
    /// few plain lines, and only the commands that make the point.
    Story {
        /// Short pauses between the steps and the acts (stdout is a terminal, no `--no-pause`).
        paced: bool,
    },
    /// Everything (`--full`): every command with its output, every hook call.
    Full,
}

static MODE: std::sync::OnceLock<Mode> = std::sync::OnceLock::new();

pub fn set_mode(m: Mode) {
    let _ = MODE.set(m);
}

/// Whether the demo shows everything (`--full`), not the story.
pub fn full() -> bool {
    MODE.get() == Some(&Mode::Full)
}

/// The story's pauses on a terminal: before a step, before an outcome, between two acts.
pub const BEAT: Duration = Duration::from_millis(700);
pub const OUTCOME: Duration = Duration::from_millis(1500);
pub const BETWEEN_ACTS: Duration = Duration::from_secs(3);

/// Pause the story for `d` when it is paced (on a terminal), so a person can read what came
/// before; otherwise (a pipe, `--no-pause`, `--full`) go straight on. An interrupt ends the
/// pause (see [`stop_when_interrupted`]).
pub fn pause(d: Duration) {
    check_interrupt();
    if let Some(Mode::Story { paced: true }) = MODE.get() {
        let until = std::time::Instant::now() + d;
        while let Some(left) = until.checked_duration_since(std::time::Instant::now()) {
            std::thread::sleep(left.min(Duration::from_millis(50)));
            check_interrupt();
        }
    }
}

/// Ctrl-C (SIGINT), SIGTERM or SIGHUP arrived.
static INTERRUPTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// The payload of the unwind an interrupt starts (see [`stop_when_interrupted`]).
#[derive(Debug)]
pub struct Interrupted;

extern "C" fn on_interrupt(_: libc::c_int) {
    // An atomic store is all a signal handler may safely do here.
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// From now on Ctrl-C (or SIGTERM, SIGHUP) does not end the demo on the spot, which would
/// leave its daemon running and its directory behind: the demo stops at its next step or
/// pause by unwinding with an [`Interrupted`] payload, so that the guards of what it started
/// run on the way out.
pub fn stop_when_interrupted() {
    for signal in [libc::SIGINT, libc::SIGTERM, libc::SIGHUP] {
        // SAFETY: a zeroed sigaction with an empty mask and a handler that only stores to an
        // atomic; SA_RESTART keeps the demo's reads and waits going.
        unsafe {
            let mut action: libc::sigaction = std::mem::zeroed();
            action.sa_sigaction = on_interrupt as extern "C" fn(libc::c_int) as usize;
            action.sa_flags = libc::SA_RESTART;
            libc::sigemptyset(&mut action.sa_mask);
            libc::sigaction(signal, &action, std::ptr::null_mut());
        }
    }
}

/// Whether the demo was interrupted.
pub fn interrupted() -> bool {
    INTERRUPTED.load(std::sync::atomic::Ordering::Relaxed)
}

/// Unwind with [`Interrupted`] if an interrupt arrived (not while already unwinding).
fn check_interrupt() {
    if interrupted() && !std::thread::panicking() {
        std::panic::resume_unwind(Box::new(Interrupted));
    }
}

/// An act has been introduced: later ones pause first.
static ACTS: std::sync::atomic::AtomicUsize = std::sync::atomic::AtomicUsize::new(0);

/// The story's line introducing act `n`: what is about to happen and why it matters.
pub fn act(n: usize, of: usize, what: &str) {
    if full() {
        return;
    }
    if ACTS.fetch_add(1, std::sync::atomic::Ordering::Relaxed) > 0 {
        pause(BETWEEN_ACTS);
        outln!();
    }
    outln!("{}", paint("1;36", &format!("Act {n} of {of} · {what}")));
}

/// A step of the story, after a short pause (nothing with `--full`, whose narration is
/// [`say`]).
pub fn tell(text: &str) {
    if full() {
        return;
    }
    pause(BEAT);
    outln!("  {text}");
}

/// What came of an act, stated plainly: `word` (DENIED, ALLOWED, RECOVERED, ...) in colour,
/// then the facts, wrapped to fit a terminal.
pub fn outcome(good: bool, word: &str, text: &str) {
    if full() {
        return;
    }
    pause(OUTCOME);
    let colour = if good { "1;32" } else { "1;31" };
    let mark = format!("▶ {word}:");
    let lines = wrapped(&format!("{mark} {text}"), WIDTH - 4, "    ");
    let lines = lines.trim_start().strip_prefix(&mark).unwrap_or(&lines);
    outln!("  {}{lines}", paint(colour, &mark));
}

/// The width the story's own lines keep within (the commands' output is theirs).
pub const WIDTH: usize = 100;

/// `who` and what it did, in the story's two columns.
pub fn who(who: &str, what: &str) -> String {
    format!("{} {what}", paint("2", &format!("{who:<17}")))
}

/// A duration as a person reads it: milliseconds under a second, else seconds.
pub fn took(d: Duration) -> String {
    if d < Duration::from_secs(1) {
        format!("{} ms", d.as_millis())
    } else {
        format!("{:.1} s", d.as_secs_f64())
    }
}

/// `text` cut into lines of at most `width` characters (at spaces), each after `indent`.
pub fn wrapped(text: &str, width: usize, indent: &str) -> String {
    let mut lines: Vec<String> = Vec::new();
    let mut line = String::new();
    for word in text.split_whitespace() {
        if !line.is_empty() && line.chars().count() + 1 + word.chars().count() > width {
            lines.push(std::mem::take(&mut line));
        }
        if !line.is_empty() {
            line.push(' ');
        }
        line.push_str(word);
    }
    if !line.is_empty() {
        lines.push(line);
    }
    lines
        .iter()
        .map(|l| format!("{indent}{l}"))
        .collect::<Vec<_>>()
        .join("\n")
}

static PACING: std::sync::OnceLock<Pacing> = std::sync::OnceLock::new();
/// `--step` met the end of its input: run on.
static STEPPING_OVER: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

pub fn set_pacing(p: Pacing) {
    let _ = PACING.set(p);
}

/// Before a step: wait for Enter (`--step`) or a while (`--pace`), once its line is shown.
pub fn step() {
    use std::sync::atomic::Ordering;
    check_interrupt();
    match PACING.get().copied().unwrap_or(Pacing::None) {
        Pacing::None => {}
        Pacing::Pace(d) => std::thread::sleep(d),
        Pacing::Step if STEPPING_OVER.load(Ordering::Relaxed) => {}
        Pacing::Step => {
            out!("{}", paint("2", "    [Enter: go on] "));
            let mut line = String::new();
            let read = std::io::stdin().read_line(&mut line);
            let typed = matches!(read, Ok(n) if n > 0);
            if !typed {
                STEPPING_OVER.store(true, Ordering::Relaxed);
            }
            // A terminal echoed the Enter; a pipe did not.
            if !typed || !std::io::IsTerminal::is_terminal(&std::io::stdin()) {
                outln!();
            }
            check_interrupt();
        }
    }
}

/// A throw-away project and its own daemon, and the `maos` commands run in it.
pub struct Demo {
    pub exe: PathBuf,
    pub dir: PathBuf,
    pub home: PathBuf,
    pub socket: PathBuf,
    pub project: PathBuf,
    keep: bool,
}

impl Demo {
    pub fn new(keep: bool) -> Result<Demo, String> {
        let exe = client();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("maos-demo-{}-{nanos}", std::process::id()));
        let project = dir.join("project");
        std::fs::create_dir_all(project.join(".maos"))
            .map_err(|e| format!("cannot create {}: {e}", project.display()))?;
        // Canonical, as the paths an agent CLI sends are (a symlinked TMPDIR would differ).
        let dir = std::fs::canonicalize(&dir)
            .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        let project = dir.join("project");
        let run = dir.join("run");
        maos_proto::paths::ensure_private_dir(&run).map_err(|e| e.to_string())?;
        Ok(Demo {
            exe,
            home: dir.join("home"),
            socket: run.join("maosd.sock"),
            project,
            dir,
            keep,
        })
    }

    /// Run `maos ARGS` in the demo project, echoing the command and its output with
    /// `--full` (the story shows it only when it says so).
    pub fn run(&self, args: &[&str]) -> Result<String, String> {
        self.run_as(args, Echo::full_only())
    }

    /// [`Demo::run`], shown in the story too.
    pub fn show(&self, args: &[&str]) -> Result<String, String> {
        self.run_as(args, Echo::All)
    }

    /// [`Demo::run`], of which the story shows the command line only.
    pub fn show_command(&self, args: &[&str]) -> Result<String, String> {
        if full() {
            return self.run(args);
        }
        self.run_as(args, Echo::Command)
    }

    fn run_as(&self, args: &[&str], echo: Echo) -> Result<String, String> {
        if echo == Echo::Nothing {
            let out = self.command(args)?;
            let stderr = String::from_utf8_lossy(&out.stderr);
            if !out.status.success() {
                return Err(format!(
                    "`maos {}` failed: {}",
                    args.join(" "),
                    stderr.trim()
                ));
            }
            return Ok(String::from_utf8_lossy(&out.stdout).into_owned());
        }
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(' ') || a.contains('{') {
                    format!("'{a}'")
                } else {
                    (*a).to_string()
                }
            })
            .collect();
        if !full() {
            pause(BEAT);
        }
        outln!("{}", paint("1", &format!("$ maos {}", shown.join(" "))));
        step();
        let out = self.command(args)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        let stderr = String::from_utf8_lossy(&out.stderr);
        if echo == Echo::All {
            out!("{stdout}");
            if !stderr.trim().is_empty() {
                out!("{stderr}");
            }
            // The story keeps its lines together; the full tour spaces its commands.
            if full() {
                outln!();
            }
        }
        if !out.status.success() {
            return Err(format!(
                "`maos {}` failed: {}",
                args.join(" "),
                stderr.trim()
            ));
        }
        Ok(stdout)
    }

    /// Like `run`, for a step that is expected to be refused.
    pub fn refused(&self, args: &[&str]) -> Result<(), String> {
        self.refused_as(args, Echo::full_only())
    }

    /// [`Demo::refused`], shown in the story too.
    pub fn show_refused(&self, args: &[&str]) -> Result<(), String> {
        self.refused_as(args, Echo::All)
    }

    fn refused_as(&self, args: &[&str], echo: Echo) -> Result<(), String> {
        match self.run_as(args, echo) {
            Err(_) => Ok(()),
            Ok(_) => Err(format!(
                "`maos {}` should have been refused",
                args.join(" ")
            )),
        }
    }

    pub fn command(&self, args: &[&str]) -> Result<std::process::Output, String> {
        self.base(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Start `maos ARGS` in the background (echoed with a trailing `&` with `--full`).
    pub fn spawn(&self, args: &[&str]) -> Result<std::process::Child, String> {
        if full() {
            outln!("{}", paint("1", &format!("$ maos {} &", args.join(" "))));
            step();
        }
        self.base(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Wait (with a deadline) until `maos lock list` shows a queued request.
    pub fn until_waiting(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let out = self.command(&["--json", "lock", "list"])?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if v["waiters"].as_array().is_some_and(|w| !w.is_empty()) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err("the background lock request never queued".into())
    }

    pub fn base(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(&self.project)
            .env("MAOS_HOME", &self.home)
            .env("MAOS_SOCKET", &self.socket)
            .env("MAOS_PROJECT", &self.project)
            .env_remove("MAOS_NO_AUTOSTART");
        cmd
    }

    /// The id printed by `created session ID` / `registered agent ID (...)`.
    pub fn id_of(out: &str) -> Result<String, String> {
        out.split_whitespace()
            .nth(2)
            .map(str::to_string)
            .ok_or_else(|| format!("no id in {out:?}"))
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.command(&["daemon", "stop"]);
        if self.keep {
            let kept = format!(
                "kept {dir} (database under home/projects/); to explore it:\n  \
                 export MAOS_HOME={home} MAOS_SOCKET={socket}\n  \
                 cd {project} && maos ps --all   (or: maos history, maos events, maos brief ID, maos top --all)\n  \
                 maos daemon stop; rm -r {dir}   when done",
                dir = self.dir.display(),
                home = self.home.display(),
                socket = self.socket.display(),
                project = self.project.display(),
            );
            // Cut short by a reader that went away (`maos demo --keep | head`): say it where
            // it is still read.
            if maos_client::stdout::closed() {
                eprintln!("maos: {kept}");
            } else {
                outln!("{kept}");
            }
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Bold or coloured text on a terminal, plain text in a pipe.
pub fn paint(code: &str, text: &str) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

/// The full tour's narration (`--full`); the story has [`act`], [`tell`] and [`outcome`].
pub fn say(text: &str) {
    if full() {
        outln!("{}", paint("36", &format!("# {text}")));
    }
}

/// What a `maos` command shows of itself.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Echo {
    /// The command line and its output.
    All,
    /// The command line only.
    Command,
    Nothing,
}

impl Echo {
    /// Everything with `--full`, nothing in the story.
    fn full_only() -> Echo {
        if full() { Echo::All } else { Echo::Nothing }
    }
}

impl Demo {
    /// `maos --json ARGS`, not shown: its answer.
    pub fn json(&self, args: &[&str]) -> Result<Value, String> {
        let (stdout, line) = self.quiet(&[&["--json"], args].concat())?;
        serde_json::from_slice(&stdout)
            .map_err(|e| format!("`maos {line}` did not answer JSON: {e}"))
    }

    /// `maos ARGS`, not shown: its stdout, and the command line (for messages); a failure is
    /// its stderr.
    fn quiet(&self, all: &[&str]) -> Result<(Vec<u8>, String), String> {
        let out = self.command(all)?;
        let line = all.join(" ");
        if !out.status.success() {
            return Err(format!(
                "`maos {line}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        Ok((out.stdout, line))
    }

    /// The events of `maos --json events ARGS` (one JSON object a line).
    pub fn events(&self, args: &[&str]) -> Result<Vec<Value>, String> {
        let (stdout, _) = self.quiet(&[&["--json", "events"], args].concat())?;
        String::from_utf8_lossy(&stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| format!("an event that is not JSON: {e}")))
            .collect()
    }
}
