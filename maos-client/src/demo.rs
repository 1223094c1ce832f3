//! `maos demo`: a newcomer's tour. In a throw-away project with its own daemon (its own
//! `MAOS_HOME` and socket, so the user's real state is never touched) it drives a session with
//! phases and agents through its life by running real `maos` commands, and prints each command
//! with its output.

use std::path::{Path, PathBuf};
use std::process::Command;

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    home: PathBuf,
    socket: PathBuf,
    project: PathBuf,
    keep: bool,
}

impl Demo {
    fn new(keep: bool) -> Result<Demo, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("maos-demo-{}-{nanos}", std::process::id()));
        let project = dir.join("project");
        std::fs::create_dir_all(project.join(".maos"))
            .map_err(|e| format!("cannot create {}: {e}", project.display()))?;
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

    /// Run `maos ARGS` in the demo project, echoing the command and its output.
    fn run(&self, args: &[&str]) -> Result<String, String> {
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
        println!("{}", paint("1", &format!("$ maos {}", shown.join(" "))));
        let out = self.command(args)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        print!("{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.trim().is_empty() {
            print!("{stderr}");
        }
        println!();
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
    fn refused(&self, args: &[&str]) -> Result<(), String> {
        match self.run(args) {
            Err(_) => Ok(()),
            Ok(_) => Err(format!(
                "`maos {}` should have been refused",
                args.join(" ")
            )),
        }
    }

    fn command(&self, args: &[&str]) -> Result<std::process::Output, String> {
        self.base(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Start `maos ARGS` in the background (echoed with a trailing `&`).
    fn spawn(&self, args: &[&str]) -> Result<std::process::Child, String> {
        println!("{}", paint("1", &format!("$ maos {} &", args.join(" "))));
        self.base(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Wait (with a deadline) until `maos lock list` shows a queued request.
    fn until_waiting(&self) -> Result<(), String> {
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

    fn base(&self, args: &[&str]) -> Command {
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
    fn id_of(out: &str) -> Result<String, String> {
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
            println!(
                "kept {} (database under home/projects/)",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Bold or coloured text on a terminal, plain text in a pipe.
fn paint(code: &str, text: &str) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn say(text: &str) {
    println!("{}", paint("36", &format!("# {text}")));
}

pub fn run(keep: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say("a session with three phases; it becomes the project's active session");
    let out = d.run(&[
        "session",
        "create",
        "--objective",
        "Add rate limiting to the login endpoint",
        "--strategy",
        "adaptive",
        "--phase",
        "design",
        "--phase",
        "implement",
        "--phase",
        "verify",
    ])?;
    Demo::id_of(&out)?;
    say(
        "agents: an architect, then backend and tests that depend on it, and a reviewer spawned by backend",
    );
    let architect = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "architect",
        "--task",
        "Design the token bucket",
    ])?)?;
    let backend = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "backend",
        "--task",
        "Implement the limiter in src/auth/limit.rs",
        "--depends-on",
        &architect,
    ])?)?;
    let qa = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "qa",
        "--task",
        "Write tests for the limiter",
        "--depends-on",
        &architect,
    ])?)?;
    let reviewer = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "reviewer",
        "--task",
        "Review the limiter",
        "--parent",
        &backend,
    ])?)?;

    say("ids can be shortened to any unique prefix");
    d.run(&["session", "start"])?;
    d.run(&["phase", "start"])?;
    d.run(&["agent", "start", &architect[..12]])?;
    d.run(&["agent", "complete", &architect[..12], "--exit-code", "0"])?;
    d.run(&[
        "phase",
        "complete",
        "--artifacts",
        r#"{"files":["docs/limiter.md"]}"#,
    ])?;
    d.run(&["phase", "start", "implement"])?;
    d.run(&["agent", "start", &backend])?;
    d.run(&["agent", "start", &qa])?;

    say(
        "locks: backend takes the limiter; qa's write to the same file is refused, naming the holder",
    );
    d.run(&["lock", "acquire", "src/auth/limit.rs", "--agent", &backend])?;
    d.refused(&["lock", "acquire", "src/auth/limit.rs", "--agent", &qa])?;
    d.run(&["lock", "acquire", "tests/limit.rs", "--agent", &qa])?;
    say("a deadlock: backend waits for qa's file while qa asks for backend's");
    let waiting = d.spawn(&[
        "lock",
        "acquire",
        "tests/limit.rs",
        "--agent",
        &backend,
        "--wait-forever",
    ])?;
    d.until_waiting()?;
    d.run(&["lock", "list"])?;
    say("qa, the younger agent, loses: its request ends with `deadlock` naming the cycle");
    d.refused(&[
        "lock",
        "acquire",
        "src/auth/limit.rs",
        "--agent",
        &qa,
        "--wait-forever",
    ])?;
    say("qa lets go of its locks, and backend's waiting request is granted");
    d.run(&["lock", "release-all", "--agent", &qa])?;
    let out = waiting
        .wait_with_output()
        .map_err(|e| format!("background request: {e}"))?;
    print!("{}", String::from_utf8_lossy(&out.stdout));
    println!();
    if !out.status.success() {
        return Err(format!(
            "backend's wait failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    d.run(&["ps"])?;

    say("pause the whole session (who, why and what was running are recorded)");
    d.run(&["pause", "--reason", "lunch break"])?;
    say("nothing starts while the session is paused");
    d.refused(&["agent", "start", &reviewer])?;
    d.run(&["ps"])?;
    d.run(&["resume"])?;

    d.run(&["agent", "start", &reviewer])?;
    d.run(&["agent", "complete", &reviewer])?;
    d.run(&["agent", "complete", &backend])?;
    d.run(&["agent", "complete", &qa])?;
    d.run(&["phase", "complete"])?;

    say("a failed checkpoint is recorded, then the phase is retried");
    d.run(&["phase", "start"])?;
    d.run(&[
        "phase",
        "complete",
        "--failed",
        "--artifacts",
        r#"{"failing":["limit::burst"]}"#,
    ])?;
    d.run(&["phase", "start", "3"])?;
    d.run(&["status"])?;
    say("completing the last phase completes the workflow and the session");
    d.run(&["phase", "complete"])?;
    say("an illegal transition is refused with its reason, and changes nothing");
    d.refused(&["session", "start"])?;
    d.run(&["ps", "--all"])?;
    say("the timeline: every change, in order, with its data");
    d.run(&["events"])?;
    d.run(&["daemon", "status"])?;
    say(&format!(
        "done; data lived in {}",
        Path::new(&d.home).display()
    ));
    Ok(())
}
