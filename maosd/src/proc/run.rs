//! Managed agents' processes, as side effects of committed changes. A handler never touches a
//! process itself: it records the change and pushes an [`Effect`]; the project actor carries
//! the effects out only after the change is committed (a rolled-back change starts or stops
//! nothing). Starting goes through `maosd supervise`, which outlives the daemon and reports
//! how the agent ended.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use maos_core::AgentId;
use tokio::io::AsyncBufReadExt;
use tracing::{debug, warn};

/// How long the supervisor may take to say that the agent started.
const START_TIMEOUT: Duration = Duration::from_secs(10);

/// Start an agent's process (one attempt).
#[derive(Clone, Debug)]
pub struct Launch {
    pub agent: AgentId,
    pub attempt: u32,
    pub argv: Vec<String>,
    /// Added to the daemon's environment (the plan's env, then maos's own variables).
    pub env: Vec<(String, String)>,
    pub cwd: PathBuf,
    /// The agent's directory (its output log and exit record).
    pub dir: PathBuf,
}

/// What the actor does after a commit.
#[derive(Clone, Debug)]
pub enum Effect {
    Launch(Launch),
    /// Send `sig` to a managed agent's process group.
    Signal {
        pgid: u32,
        sig: i32,
    },
    /// Kill the group with SIGKILL after `after` unless the process has ended by then.
    KillAfter {
        pgid: u32,
        start_time: Option<u64>,
        after: Duration,
    },
    /// Delete a file the commit made obsolete (an agent's `exit.json` once its exit is
    /// recorded): only after the commit, so a failed commit leaves it for the next recovery.
    RemoveFile(std::path::PathBuf),
}

/// How an attempt to start an agent went.
#[derive(Clone, Debug)]
pub enum Started {
    Running {
        pid: u32,
        start_time: Option<u64>,
        /// The supervisor's pid: while it lives, the agent's exit is still to be reported.
        supervisor: Option<u32>,
    },
    Failed(String),
}

/// What the daemon needs to start supervisors.
#[derive(Clone, Debug)]
pub struct Runner {
    /// The `maosd` binary (it has the `supervise` mode).
    pub exe: PathBuf,
    pub socket: PathBuf,
    pub root: String,
    /// The project's directory under `MAOS_HOME` (holds `maos.db` and `agents/`).
    pub project_dir: PathBuf,
}

impl Runner {
    pub fn agent_dir(&self, agent: &AgentId) -> PathBuf {
        crate::proc::procs::agent_files(&self.project_dir, agent.as_str()).dir
    }

    /// Start the supervisor for `l` and wait for its first line: the agent's pid, or why it
    /// could not start.
    pub async fn launch(&self, l: &Launch) -> Started {
        let mut cmd = tokio::process::Command::new(&self.exe);
        cmd.arg("supervise")
            .arg("--agent")
            .arg(l.agent.as_str())
            .arg("--socket")
            .arg(&self.socket)
            .arg("--project")
            .arg(&self.root)
            .arg("--dir")
            .arg(&l.dir)
            .arg("--cwd")
            .arg(&l.cwd)
            .arg("--")
            .args(&l.argv)
            .envs(l.env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::null());
        let mut child = match cmd.spawn() {
            Ok(c) => c,
            Err(e) => return Started::Failed(format!("cannot start the supervisor: {e}")),
        };
        let supervisor = child.id();
        let Some(stdout) = child.stdout.take() else {
            return Started::Failed("the supervisor has no output pipe".into());
        };
        // Reap the supervisor whenever it ends (it outlives the agent by its report).
        tokio::spawn(async move {
            let _ = child.wait().await;
        });
        let mut line = String::new();
        let mut reader = tokio::io::BufReader::new(stdout);
        match tokio::time::timeout(START_TIMEOUT, reader.read_line(&mut line)).await {
            Ok(Ok(_)) => match parse_started(&line) {
                Started::Running {
                    pid, start_time, ..
                } => Started::Running {
                    pid,
                    start_time,
                    supervisor,
                },
                failed => failed,
            },
            Ok(Err(e)) => Started::Failed(format!("reading the supervisor: {e}")),
            Err(_) => Started::Failed(format!(
                "the supervisor did not report within {START_TIMEOUT:?}"
            )),
        }
    }
}

/// `started PID START` or `failed MESSAGE`.
fn parse_started(line: &str) -> Started {
    let line = line.trim();
    if let Some(msg) = line.strip_prefix("failed ") {
        return Started::Failed(msg.to_string());
    }
    let mut parts = line.split_whitespace();
    match (parts.next(), parts.next().map(str::parse::<u32>)) {
        (Some("started"), Some(Ok(pid))) => {
            let start_time = parts.next().and_then(|s| s.parse().ok()).filter(|&t| t > 0);
            Started::Running {
                pid,
                start_time,
                supervisor: None,
            }
        }
        _ if line.is_empty() => Started::Failed("the supervisor ended without a word".into()),
        _ => Started::Failed(format!("the supervisor said {line:?}")),
    }
}

/// Carry out a signal now (cheap, non-blocking).
pub fn signal(pgid: u32, sig: i32) {
    match crate::proc::procs::signal_group(pgid, sig) {
        Ok(true) => debug!(pgid, sig, "signalled agent process group"),
        Ok(false) => debug!(pgid, sig, "agent process group already gone"),
        Err(e) => warn!(pgid, sig, error = %e, "cannot signal agent process group"),
    }
}

/// SIGKILL the group after `after` if anything of it is left: its leader, or children that
/// outlived the leader (the group keeps the leader's id while it has members).
pub fn kill_after(pgid: u32, start_time: Option<u64>, after: Duration) {
    if pgid <= 1 {
        return;
    }
    tokio::spawn(async move {
        tokio::time::sleep(after).await;
        let leader = crate::proc::procs::alive(pgid, start_time);
        // SAFETY: signal 0 to a process group only checks that it has members.
        let members = unsafe { libc::kill(-(pgid as libc::pid_t), 0) } == 0;
        if leader || members {
            signal(pgid, libc::SIGKILL);
        }
    });
}

/// The working directory of an agent: its plan's `workdir` (relative to the project root),
/// or the root.
pub fn workdir(root: &Path, workdir: Option<&str>) -> PathBuf {
    match workdir {
        Some(w) if Path::new(w).is_absolute() => PathBuf::from(w),
        Some(w) => root.join(w),
        None => root.to_path_buf(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_supervisor_line_is_read_strictly() {
        assert!(matches!(
            parse_started("started 42 1234\n"),
            Started::Running {
                pid: 42,
                start_time: Some(1234),
                ..
            }
        ));
        assert!(matches!(
            parse_started("started 42 0"),
            Started::Running {
                pid: 42,
                start_time: None,
                ..
            }
        ));
        assert!(
            matches!(parse_started("failed no such program"), Started::Failed(m) if m == "no such program")
        );
        assert!(matches!(parse_started(""), Started::Failed(_)));
        assert!(matches!(parse_started("started x"), Started::Failed(_)));
    }
}
