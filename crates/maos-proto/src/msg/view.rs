//! The views replies carry besides the records: `ps`, `status`, locks and waiters, recovery and
//! validation reports, maintenance reports (`gc`, `restore`, `doctor`), the daemon's status.

use maos_core::{AgentId, AgentState, LockMode, Progress, SessionId, SessionState, Strategy, Ts};
use serde::{Deserialize, Serialize};

use maos_core::record::{Activity, Cli, LockView, PsLock, SessionRecord};

/// A session as `maos ps` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsSession {
    pub id: SessionId,
    pub objective: String,
    pub state: SessionState,
    pub strategy: Strategy,
    pub active: bool,
    pub created_at: Ts,
    /// Phase position `[k, n]` (1-based; `[0, 0]` without phases; never `k > n`).
    pub phase: (usize, usize),
    pub agents: Vec<PsAgent>,
    /// Percent done and whether it is stalled, as `maos status` computes them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub progress: Option<PsProgress>,
}

/// A session's progress as `maos ps` and `maos top` show it. `maos status` has the rest,
/// the ETA among it: counted from the time of the request, it would make two `ps` of the same
/// state differ.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsProgress {
    /// 0..=100.
    pub percent: f64,
    /// The running phase takes over twice the average.
    #[serde(default)]
    pub stalled: bool,
}

impl From<&Progress> for PsProgress {
    fn from(p: &Progress) -> PsProgress {
        PsProgress {
            percent: p.percent,
            stalled: p.stalled,
        }
    }
}

/// An agent as `maos ps` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsAgent {
    pub id: AgentId,
    pub role: String,
    pub instance: u32,
    pub task: String,
    pub state: AgentState,
    pub paused: bool,
    #[serde(default)]
    pub parent: Option<AgentId>,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    /// Locks the agent holds.
    #[serde(default)]
    pub locks: Vec<PsLock>,
    /// The agent CLI of a window's agent or its subagent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<Cli>,
    /// In fleet mode: the machine it was registered on.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// Its last tool call, as its CLI's hook reported it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub activity: Option<Activity>,
    /// The item of its own task list it marked in progress.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todo: Option<String>,
    /// Locks it waits for (queued requests).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub waits: Vec<PsWait>,
    /// A managed agent (one of a plan): its name there, its runs and its stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub plan: Option<PsPlanAgent>,
    /// Held files changed by an agent other than their holder, where this agent is either
    /// (issue 31 §2): shown in red until the file is put back or the lock goes.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub violations: Vec<super::PsViolation>,
    /// Files whose change in its worktree would conflict with another worktree's pending work
    /// (the conflict radar, issue 35).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub radar: Vec<PsRadar>,
}

/// A file an agent's work would conflict on, as `maos ps` shows it (`maos radar` has the rest).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsRadar {
    pub path: String,
    /// The other worktree and its live agents.
    pub other_worktree: String,
    #[serde(default)]
    pub other_agents: Vec<AgentId>,
}

/// A lock an agent waits for, as `maos ps` shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsWait {
    pub path: String,
    pub mode: LockMode,
    pub since: Ts,
}

/// What `ps` shows of a managed agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsPlanAgent {
    /// Its `name` in the plan.
    pub name: String,
    /// Runs so far (retries and `maos retry` included).
    pub attempts: u32,
    /// Runs the plan allows (1 + its `retries`).
    pub max_attempts: u32,
    /// Its pipeline stage.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub stage: Option<u32>,
    /// Pending and held back by the scheduler: for which agent, and why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<maos_core::record::Held>,
}

/// `maos status`: a session with its progress figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusView {
    pub session: SessionRecord,
    pub progress: Progress,
}

/// `maos lock list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockList {
    pub locks: Vec<LockView>,
    pub waiters: Vec<WaiterView>,
}

/// A queued lock request.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WaiterView {
    pub path: String,
    pub mode: LockMode,
    pub agent: AgentId,
    pub role: String,
    pub since: Ts,
    #[serde(default)]
    pub deadline: Option<Ts>,
}

/// `maos lock check`: `blocked` is true when the request would have to wait.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockCheck {
    pub path: String,
    pub mode: LockMode,
    pub blocked: bool,
    pub holders: Vec<LockView>,
    pub queued: Vec<WaiterView>,
}

/// One project the daemon has open.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectInfo {
    pub root: String,
    pub hash: String,
    pub sessions: usize,
    pub live_sessions: usize,
    /// Sequence number of the project's last event.
    #[serde(default)]
    pub last_seq: u64,
    /// Managed agents whose process runs (or is being started) now.
    #[serde(default)]
    pub running_agents: usize,
}

/// `maos daemon status`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DaemonStatus {
    pub pid: u32,
    pub version: String,
    pub protocol: u32,
    pub started_at: Ts,
    pub uptime_secs: f64,
    pub socket: String,
    pub home: String,
    pub synchronous: String,
    pub projects: Vec<ProjectInfo>,
    #[serde(default)]
    pub started_by: StartedBy,
    /// Exit after this many idle seconds (socket-activated daemons only); None: never.
    #[serde(default)]
    pub idle_exit_secs: Option<f64>,
    /// Where the projects' state lives.
    #[serde(default)]
    pub backend: Backend,
}

/// The engine a daemon keeps its projects' state in, and its health.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Backend {
    /// `sqlite` (a file per project, the default) or `postgres` (fleet mode).
    pub engine: String,
    /// PostgreSQL's URL, without its password.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// This daemon's id in the fleet (`<machine>/<hash of MAOS_HOME>`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub daemon: Option<String>,
    /// PostgreSQL's version, when it answered.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server: Option<String>,
    /// Why PostgreSQL did not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// In a fleet: its daemons as PostgreSQL records them, the most recently seen first.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub members: Vec<FleetMember>,
}

impl Default for Backend {
    fn default() -> Self {
        Backend {
            engine: "sqlite".into(),
            url: None,
            daemon: None,
            server: None,
            error: None,
            members: Vec::new(),
        }
    }
}

/// A daemon of a fleet, as its row in PostgreSQL says: each running daemon writes that it is
/// alive every half minute.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct FleetMember {
    /// `<machine>/<hash of its MAOS_HOME>`.
    pub id: String,
    pub machine: String,
    /// When it last started.
    pub started_at: Ts,
    /// How long ago it last said it was alive, by PostgreSQL's clock.
    pub seen_secs_ago: f64,
    /// Whether it said so recently enough to count as running (within three of its
    /// intervals); `false`: stopped, or cut off from PostgreSQL.
    pub live: bool,
}

impl Backend {
    /// One line: the engine, and for PostgreSQL where it is and whether it answers.
    pub fn describe(&self) -> String {
        match &self.url {
            None => format!("{} (a database file per project)", self.engine),
            Some(url) => {
                let mut s = format!("{} {url}", self.engine);
                if let Some(d) = &self.daemon {
                    s.push_str(&format!(", this daemon {d}"));
                }
                match (&self.server, &self.error) {
                    (Some(v), _) => s.push_str(&format!(": PostgreSQL {v}, answering")),
                    (None, Some(e)) => s.push_str(&format!(": NOT ANSWERING: {e}")),
                    (None, None) => {}
                }
                s
            }
        }
    }
}

/// What `maos recover` (and the daemon at start) did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub sessions: Vec<SessionRecovery>,
}

/// The recovery of one session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecovery {
    pub session: SessionId,
    /// `continue`, `resume_agents`, `resume_session`, `restart_phase`, `mark_failed`,
    /// `completed` or `cancelled`: decided after recovery and the steps it led to.
    pub plan: String,
    pub next_step: String,
    /// Agents whose process still runs: watched again.
    #[serde(default)]
    pub readopted: Vec<AgentId>,
    /// Agents that ended while the daemon was down, with the exit their supervisor recorded.
    #[serde(default)]
    pub exits_applied: Vec<AgentId>,
    /// Agents whose process is gone, that can be resumed (`maos resume`).
    #[serde(default)]
    pub resumable: Vec<AgentId>,
    /// Agents whose process is gone, that cannot be resumed.
    #[serde(default)]
    pub failed: Vec<AgentId>,
    #[serde(default)]
    pub notes: Vec<String>,
}

pub use maos_core::validate::Problem;

/// What `maos restore` put in place, and where the database it replaced is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RestoreReport {
    pub from: String,
    pub previous: String,
    pub sessions: u64,
    pub events: u64,
}

/// A row of a project's database that maos cannot read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BadRowView {
    /// Its table (`sessions`, `session_agents`, ...).
    pub table: String,
    /// Its key in that table (an id, a sequence number), as stored.
    pub row: String,
    /// Why it cannot be read.
    pub why: String,
}

/// What `maos repair` found, and with `--quarantine` moved aside.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepairReport {
    /// Every row that cannot be read.
    pub bad: Vec<BadRowView>,
    /// The sessions (as their rows name them) whose rows are, or would be, moved.
    pub sessions: Vec<String>,
    /// Rows moved (0 without `--quarantine`).
    pub moved: u64,
    /// The file that holds the moved rows.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub file: Option<String>,
}

/// What `maos gc` deleted (or, with `dry_run`, would delete).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcReport {
    /// Sessions that ended before this are deleted.
    pub cutoff: Ts,
    pub dry_run: bool,
    pub sessions: Vec<GcEntry>,
}

/// One session `maos gc` deleted: where its export is (None in a dry run).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcEntry {
    pub id: SessionId,
    pub exported_to: Option<String>,
}

/// A project database's health.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DbCheckView {
    pub path: String,
    pub bytes: u64,
    pub wal_bytes: u64,
    /// `PRAGMA quick_check`: "ok", or the problems found.
    pub quick_check: String,
}

/// Who started the daemon. A client replaces an outdated daemon only when a client started it;
/// one that a service manager owns is restarted through the service manager.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StartedBy {
    /// Started on demand by a `maos` client (`maosd --autostarted`).
    Client,
    /// Started by hand (`maosd` in a terminal), or not said (an older daemon).
    #[default]
    Manual,
    /// Socket-activated by systemd (or `systemd-socket-activate`).
    Systemd,
    /// Socket-activated by launchd.
    Launchd,
}

impl StartedBy {
    pub fn as_str(self) -> &'static str {
        match self {
            StartedBy::Client => "client",
            StartedBy::Manual => "manual",
            StartedBy::Systemd => "systemd",
            StartedBy::Launchd => "launchd",
        }
    }

    /// Socket-activated by a service manager.
    pub fn is_service(self) -> bool {
        matches!(self, StartedBy::Systemd | StartedBy::Launchd)
    }
}
