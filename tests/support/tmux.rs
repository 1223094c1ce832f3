//! A real terminal for the full-screen and coloured views: a private tmux server (its own
//! socket in the test's directory) running one command in a pane of a given size, driven with
//! `send-keys` and read with `capture-pane`. Dropping it kills the server and what runs in it.

use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use crate::{DEADLINE, Env, bin_dir, wait_until};

pub struct Tmux {
    socket: PathBuf,
}

impl Tmux {
    /// Whether tmux runs here (Debian package tmux; `.ci/run` installs it on CI, where a
    /// missing tmux fails the test).
    pub fn available() -> bool {
        crate::have_tool_with("tmux", &["-V"], "tmux")
    }

    /// Run `args` (argv; the first, unless it is a path, is looked for in the built binaries'
    /// directory, then on PATH) in the project directory of `env`, with its `MAOS_HOME` and `MAOS_SOCKET` and
    /// `vars`, in a `cols`×`rows` terminal. The pane stays after the command exits, so its
    /// exit status can be read (but what a command that exits at once printed may be lost
    /// with its terminal: run commands that stay, such as `maos ps --watch`).
    pub fn start(env: &Env, cols: u16, rows: u16, args: &[&str], vars: &[(&str, &str)]) -> Tmux {
        Tmux::start_named(env, "main", cols, rows, args, vars)
    }

    /// [`Tmux::start`] for a second terminal in one test: each `name` is its own tmux server.
    pub fn start_named(
        env: &Env,
        name: &str,
        cols: u16,
        rows: u16,
        args: &[&str],
        vars: &[(&str, &str)],
    ) -> Tmux {
        let socket = env.root().join(format!("tmux-{name}"));
        let t = Tmux { socket };
        let program = if args[0].contains('/') {
            args[0].to_string()
        } else {
            let built = bin_dir().join(args[0]);
            if built.is_file() {
                built.to_string_lossy().into_owned()
            } else {
                args[0].to_string()
            }
        };
        let mut cmd = t.tmux();
        // One tmux command line: the pane is kept once its command exits (its status is then
        // readable), set before the command starts, however quickly it ends.
        cmd.args(["-f", "/dev/null", "start-server", ";"])
            .args(["set-option", "-g", "remain-on-exit", "on", ";"])
            .args(["new-session", "-d"])
            .args(["-x", &cols.to_string(), "-y", &rows.to_string()])
            .arg("-c")
            .arg(&env.project);
        let home = env.root().join("user");
        let mut all = vec![
            (
                "MAOS_HOME".to_string(),
                env.home.to_string_lossy().into_owned(),
            ),
            (
                "MAOS_SOCKET".to_string(),
                env.socket.to_string_lossy().into_owned(),
            ),
            ("HOME".to_string(), home.to_string_lossy().into_owned()),
            ("USER".to_string(), "e2e-tester".to_string()),
            ("TERM".to_string(), "xterm-256color".to_string()),
        ];
        all.extend(vars.iter().map(|(k, v)| (k.to_string(), v.to_string())));
        for (k, v) in &all {
            cmd.arg("-e").arg(format!("{k}={v}"));
        }
        cmd.arg("--").arg(program).args(&args[1..]);
        t.run(cmd, "new-session");
        t
    }

    fn tmux(&self) -> Command {
        let mut cmd = Command::new("tmux");
        cmd.arg("-S").arg(&self.socket);
        cmd.env_remove("TMUX").stdin(Stdio::null());
        cmd
    }

    fn run(&self, mut cmd: Command, what: &str) -> String {
        let out = cmd.output().unwrap_or_else(|e| panic!("tmux {what}: {e}"));
        assert!(
            out.status.success(),
            "tmux {what}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }

    /// What the pane shows, as text.
    pub fn screen(&self) -> String {
        let mut cmd = self.tmux();
        cmd.args(["capture-pane", "-p"]);
        self.run(cmd, "capture-pane")
    }

    /// What the pane shows, with its colours as escape sequences.
    pub fn screen_with_colours(&self) -> String {
        let mut cmd = self.tmux();
        cmd.args(["capture-pane", "-p", "-e"]);
        self.run(cmd, "capture-pane -e")
    }

    /// Type keys (tmux key names: `Down`, `Enter`, `Escape`, or text).
    pub fn keys(&self, keys: &[&str]) {
        let mut cmd = self.tmux();
        cmd.arg("send-keys").args(keys);
        self.run(cmd, "send-keys");
    }

    /// Wait until the screen satisfies `cond` (the test fails after a deadline, showing the
    /// screen); the screen then.
    pub fn wait_for(&self, what: &str, cond: impl Fn(&str) -> bool) -> String {
        self.wait_for_within(DEADLINE, what, cond)
    }

    pub fn wait_for_within(
        &self,
        timeout: Duration,
        what: &str,
        cond: impl Fn(&str) -> bool,
    ) -> String {
        let mut last = String::new();
        let outcome = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            wait_until(timeout, what, || {
                last = self.screen();
                cond(&last)
            })
        }));
        if outcome.is_err() {
            panic!("timed out waiting until {what}; the screen:\n{last}");
        }
        last
    }

    /// The exit status of the pane's command once it has exited.
    pub fn exit_status(&self) -> Option<i32> {
        let mut cmd = self.tmux();
        cmd.args(["display-message", "-p", "#{pane_dead} #{pane_dead_status}"]);
        let out = self.run(cmd, "display-message");
        let mut words = out.split_whitespace();
        match (words.next(), words.next()) {
            (Some("1"), Some(code)) => code.parse().ok(),
            _ => None,
        }
    }
}

impl Drop for Tmux {
    fn drop(&mut self) {
        let _ = self
            .tmux()
            .arg("kill-server")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
}
