//! Messages and the views they carry. The records (sessions, agents, events) are
//! [`maos_core::record`]'s, re-exported here; like them, every field here is part of the public
//! contract (the `--json` shapes): add fields with `#[serde(default)]`, never rename.

pub use maos_core::brief::{
    Blocker, BlockerKind, BriefAgent, BriefDep, BriefFact, BriefPhase, BriefWork, Briefing,
    FactSource,
};
pub use maos_core::record::{
    AgentRecord, AgentTodos, ContextUsage, ErrorRecord, EventRecord, HistoryEntry, LockView, Note,
    NoteKind, PauseInfo, ProcessInfo, PsLock, SessionRecord, Todo,
};
use maos_core::{
    AgentId, AgentOp, AgentState, LockMode, PhaseOp, Progress, SessionId, SessionOp, SessionState,
    Strategy, Ts,
};
use serde::{Deserialize, Serialize};

use crate::ErrorBody;

/// Client → daemon.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ClientMsg {
    /// Always the first frame: the client's protocol version.
    Hello {
        protocol: u32,
        client_version: String,
    },
    /// One request; `project` is the canonical project root (None for daemon-wide requests).
    Request {
        id: u64,
        #[serde(default)]
        project: Option<String>,
        body: Request,
    },
    /// Turn this connection into a stream of the project's events matching `filter`, starting
    /// after `filter.after_seq` (history first, then live events, no gap, no duplicate).
    Subscribe {
        id: u64,
        project: String,
        filter: EventFilter,
    },
}

/// Daemon → client. Externally tagged (`{"response": {...}}`): the client decodes a frame in
/// one pass, without serde buffering it first as it must for internally tagged enums.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ServerMsg {
    /// The answer to every hello, also when the protocols differ (then an [`ServerMsg::Error`]
    /// follows and the daemon closes): the client learns who runs and whether it may replace it.
    Welcome {
        protocol: u32,
        daemon_version: String,
        pid: u32,
        #[serde(default)]
        started_by: StartedBy,
    },
    Response {
        id: u64,
        result: Result<Reply, ErrorBody>,
    },
    Event {
        id: u64,
        event: EventRecord,
    },
    /// A connection-level error (bad frame, version mismatch); the daemon may close afterwards.
    Error {
        error: ErrorBody,
    },
}

/// What a pause or resume applies to inside a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", content = "name", rename_all = "snake_case")]
pub enum Target {
    Session,
    Agent(String),
    Phase(String),
}

/// Every request the daemon understands. Sessions and agents are named by id or unique prefix;
/// `None` for a session means the project's active session.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    Ping,
    DaemonStatus,
    DaemonStop,
    SessionCreate {
        objective: String,
        #[serde(default)]
        strategy: Strategy,
        #[serde(default)]
        phases: Vec<String>,
    },
    SessionList {
        #[serde(default)]
        all: bool,
    },
    SessionShow {
        #[serde(default)]
        session: Option<String>,
    },
    SessionActivate {
        session: String,
    },
    SessionTransition {
        #[serde(default)]
        session: Option<String>,
        op: SessionOp,
        #[serde(default)]
        reason: Option<String>,
    },
    AgentRegister {
        #[serde(default)]
        session: Option<String>,
        role: String,
        task: String,
        #[serde(default)]
        depends_on: Vec<String>,
        #[serde(default)]
        parent: Option<String>,
    },
    AgentTransition {
        agent: String,
        op: AgentOp,
        #[serde(default)]
        exit_code: Option<i32>,
        #[serde(default)]
        reason: Option<String>,
    },
    AgentList {
        #[serde(default)]
        session: Option<String>,
    },
    /// Grow a running session's plan by one phase, appended after the others.
    PhaseAdd {
        #[serde(default)]
        session: Option<String>,
        name: String,
    },
    PhaseTransition {
        #[serde(default)]
        session: Option<String>,
        /// Name, or number (1-based); None = the current phase.
        #[serde(default)]
        phase: Option<String>,
        op: PhaseOp,
        /// Free JSON recorded on the phase when it completes or fails.
        #[serde(default)]
        artifacts: serde_json::Value,
    },
    Pause {
        #[serde(default)]
        session: Option<String>,
        target: Target,
        #[serde(default)]
        reason: Option<String>,
        #[serde(default)]
        by: Option<String>,
    },
    Resume {
        #[serde(default)]
        session: Option<String>,
        target: Target,
        #[serde(default)]
        by: Option<String>,
    },
    Ps {
        #[serde(default)]
        all: bool,
    },
    Events {
        #[serde(default)]
        filter: EventFilter,
        #[serde(default)]
        limit: Option<u32>,
    },
    Status {
        #[serde(default)]
        session: Option<String>,
    },
    /// Take a lock for an agent. `path` is absolute or relative to `cwd`; the daemon resolves
    /// it to a project-relative key (symlinks and worktrees included).
    LockAcquire {
        agent: String,
        path: String,
        #[serde(default)]
        cwd: Option<String>,
        mode: LockMode,
        #[serde(default)]
        wait: LockWait,
        /// Lease length; the daemon's default when absent.
        #[serde(default)]
        ttl_ms: Option<u64>,
    },
    /// Release one lock. Only its holder may, unless `force` (logged with `by`).
    LockRelease {
        #[serde(default)]
        agent: Option<String>,
        path: String,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default)]
        force: bool,
        #[serde(default)]
        by: Option<String>,
    },
    /// Release every lock of an agent and end its waits.
    LockReleaseAll {
        agent: String,
    },
    LockList {
        #[serde(default)]
        session: Option<String>,
    },
    /// Would this agent be blocked on this path, and by whom?
    LockCheck {
        #[serde(default)]
        agent: Option<String>,
        path: String,
        #[serde(default)]
        cwd: Option<String>,
        #[serde(default = "default_check_mode")]
        mode: LockMode,
    },
    /// The project's database health (`maos doctor`).
    DbCheck,
    /// Finished sessions, newest first, archived ones included (`maos history`).
    History {
        #[serde(default)]
        limit: Option<u32>,
    },
    /// Delete finished sessions that ended more than `older_than_secs` ago, each exported to
    /// the project's `exports/` directory first (`maos gc`); `dry_run` only lists them.
    Gc {
        older_than_secs: u64,
        #[serde(default)]
        dry_run: bool,
    },
    /// Delete one finished session (full id) with everything it recorded. `maos gc` sends it
    /// once the session is exported; there is no command for it on its own.
    Purge {
        session: String,
    },
    /// A consistent copy of the project's database, taken while the daemon serves, written to
    /// `path` (absolute, must not exist) (`maos backup`).
    Backup {
        path: String,
    },
    /// Replace the project's database with a backup (`maos restore`): `path` (absolute) is
    /// checked first; the old database is kept aside. Refused while sessions are live, unless
    /// `force`.
    Restore {
        path: String,
        #[serde(default)]
        force: bool,
    },
    /// One session with its timeline and checkpoints, archived or not (`maos export`).
    Export {
        session: String,
    },
    /// A session file, maos's own or an orchestrator's (`maos import`): its path (for
    /// messages) and text.
    Import {
        path: String,
        text: String,
    },
    /// Take a finished session out of the daemon's memory and `ps`; it stays in the database
    /// (its events too) and in `maos history` (`maos session archive`).
    SessionArchive {
        session: String,
    },
    /// A managed agent's process ended: its supervisor reports (see `AgentExit`).
    AgentExited(Box<AgentExit>),
    /// A session from a plan file (`maos session create --plan`, `maos run`): the file's path
    /// (for error messages) and its text; `start` also starts it.
    SessionFromPlan {
        path: String,
        text: String,
        #[serde(default)]
        start: bool,
    },
    /// Where a managed agent's output goes (`maos logs`).
    AgentLog {
        agent: String,
    },
    /// Reconcile managed sessions with their processes now (`maos recover`).
    Recover {
        #[serde(default)]
        session: Option<String>,
    },
    /// What does not add up (`maos validate`).
    Validate {
        #[serde(default)]
        session: Option<String>,
    },
    /// A sign of life: renews every lease of the agent.
    Heartbeat {
        agent: String,
    },
    /// One hook call of an agent CLI (`maos hook`).
    Hook(Box<HookCall>),
    /// Where a session stands (`maos brief`): built from live state only.
    Brief {
        #[serde(default)]
        session: Option<String>,
    },
    /// Record a fact for the briefing (`maos note`).
    Note {
        #[serde(default)]
        session: Option<String>,
        /// The agent the note is about (an agent of that session).
        #[serde(default)]
        agent: Option<String>,
        kind: NoteKind,
        text: String,
    },
}

/// One hook call of an agent CLI, reduced to what maos needs: ids, the event, the tool and the
/// path it writes. Never file contents.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    /// `hook_event_name`: SessionStart, PreToolUse, SubagentStop, ...
    pub event: String,
    /// The CLI's session id (the same for the main thread and its subagents).
    pub session_id: String,
    /// Present inside a subagent.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub agent_type: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// The files a writing tool targets, as the CLI named them (the daemon resolves them):
    /// one for `Write`/`Edit`/`MultiEdit`/`NotebookEdit`, every file of a Codex `apply_patch`.
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// SessionStart's `source`, SessionEnd's `reason`.
    #[serde(default)]
    pub source: Option<String>,
    /// First line of the prompt, or the subagent tool's description.
    #[serde(default)]
    pub summary: Option<String>,
    /// The subagent tool's prompt, first line.
    #[serde(default)]
    pub prompt_line: Option<String>,
    /// Size and SHA-256 of what a write put in the file (PostToolUse), never the content.
    #[serde(default)]
    pub written: Option<Written>,
    /// PostToolUse of the subagent tool: the child's `agentId` and what it used.
    #[serde(default)]
    pub subagent: Option<SubagentResult>,
    /// `MAOS_SESSION_ID` / `MAOS_AGENT_ID` of an agent started by maos: they win over guessing.
    #[serde(default)]
    pub maos_session: Option<String>,
    #[serde(default)]
    pub maos_agent: Option<String>,
    /// Set by the daemon when `file_path` does not resolve inside the project.
    #[serde(default)]
    pub path_error: Option<String>,
    /// PostToolUse of `TodoWrite`: the agent's whole task list as it now stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Vec<Todo>>,
}

/// How a managed agent's process ended, as its supervisor saw it. Sent to the daemon
/// (`AgentExited`) and also written to the agent's `exit.json`, so an exit that happened while
/// the daemon was down is applied when it starts.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentExit {
    pub agent: String,
    /// The agent's process (its process group leader).
    pub pid: u32,
    /// The process's start time (clock ticks since boot on Linux), telling pid reuse apart.
    #[serde(default)]
    pub start_time: Option<u64>,
    /// Exit code, when it exited.
    #[serde(default)]
    pub code: Option<i32>,
    /// Signal number, when a signal ended it.
    #[serde(default)]
    pub signal: Option<i32>,
    pub ended_at: Ts,
    /// A Claude Code session id the agent printed (`--output-format json` → `session_id`).
    #[serde(default)]
    pub claude_session_id: Option<String>,
}

/// Size and hash of the text a write tool sent (its content, new string or patch).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub bytes: u64,
    pub sha256: String,
}

/// A subagent tool's result (`tool_response` of PostToolUse `Agent`/`Task`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentResult {
    /// The child's `agent_id`.
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tool_use_count: Option<u64>,
}

/// What a hook call answers, in the CLI's terms.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HookDecision {
    /// No opinion: the normal flow goes on.
    None,
    /// The tool call may go ahead.
    Allow,
    /// The tool call is refused, with a reason the model can act on.
    Deny,
}

/// The answer to a hook call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HookAnswer {
    pub decision: HookDecision,
    #[serde(default)]
    pub reason: Option<String>,
    /// Extra context for the model (SessionStart, UserPromptSubmit).
    #[serde(default)]
    pub context: Option<String>,
}

fn default_check_mode() -> LockMode {
    LockMode::Write
}

/// How long a lock request may wait for conflicting holders.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "policy", rename_all = "snake_case")]
pub enum LockWait {
    /// Refuse at once with `lock_conflict`.
    #[default]
    NoWait,
    /// Wait up to `ms` milliseconds, then `lock_timeout`.
    Wait { ms: u64 },
    /// Wait until granted (or a deadlock ends the wait).
    Forever,
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

/// `maos lock list`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockList {
    pub locks: Vec<LockView>,
    pub waiters: Vec<WaiterView>,
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

impl Request {
    /// True when the request changes state (and so is acknowledged only after a commit).
    pub fn is_write(&self) -> bool {
        !matches!(
            self,
            Request::Ping
                | Request::DaemonStatus
                | Request::SessionList { .. }
                | Request::SessionShow { .. }
                | Request::AgentList { .. }
                | Request::Ps { .. }
                | Request::Events { .. }
                | Request::Status { .. }
                | Request::LockList { .. }
                | Request::LockCheck { .. }
                | Request::DbCheck
                | Request::History { .. }
                | Request::Export { .. }
                | Request::Backup { .. }
                | Request::Gc { dry_run: true, .. }
                | Request::AgentLog { .. }
                | Request::Validate { .. }
                | Request::Brief { .. }
        )
    }
}

/// Filter for `events` and subscriptions. Empty = everything in the project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub since: Option<Ts>,
    /// Only events with a larger sequence number.
    #[serde(default)]
    pub after_seq: Option<u64>,
}

/// A successful response body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Reply {
    Pong,
    Done,
    Daemon(DaemonStatus),
    Session(Box<SessionRecord>),
    Sessions(Vec<SessionRecord>),
    Agent(AgentRecord),
    Agents(Vec<AgentRecord>),
    Events(Vec<EventRecord>),
    Status(Box<StatusView>),
    DbCheck(DbCheckView),
    /// `maos history`: finished sessions, newest first.
    History(Vec<HistoryEntry>),
    /// `maos export`.
    Export(Box<crate::export::SessionExport>),
    /// `maos backup`: where the copy is, its size, and its `PRAGMA integrity_check`.
    Backup(DbCheckView),
    /// `maos gc`.
    Gc(GcReport),
    /// `maos restore`.
    Restored(RestoreReport),
    /// `maos logs`: the agent's output file, and whether it still runs.
    Log {
        agent: AgentId,
        path: String,
        state: AgentState,
    },
    Recovery(RecoveryReport),
    Validation(Vec<Problem>),
    /// `maos ps`: what the table shows, and nothing more (it runs often and must be quick).
    Ps(Vec<PsSession>),
    /// A subscription was accepted; events follow.
    Subscribed,
    Lock(LockView),
    /// Locks that were released.
    Released(Vec<LockView>),
    Locks(LockList),
    LockCheck(LockCheck),
    /// Leases renewed.
    Renewed {
        leases: usize,
    },
    Hook(HookAnswer),
    /// `maos brief`.
    Brief(Box<Briefing>),
}

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
}

/// `maos status`: a session with its progress figures.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StatusView {
    pub session: SessionRecord,
    pub progress: Progress,
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

/// What `maos recover` (and the daemon at start) did.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecoveryReport {
    pub sessions: Vec<SessionRecovery>,
}

/// The recovery of one session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecovery {
    pub session: SessionId,
    /// `continue`, `resume_agents`, `resume_session`, `restart_phase` or `mark_failed`.
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

/// An inconsistency found by `maos validate`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Problem {
    pub session: SessionId,
    #[serde(default)]
    pub agent: Option<AgentId>,
    /// `running_without_process`, `process_gone`, `lock_of_finished_agent`, `stale_checkpoint`.
    pub kind: String,
    pub message: String,
}

/// What `maos restore` put in place, and where the database it replaced is.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RestoreReport {
    pub from: String,
    pub previous: String,
    pub sessions: u64,
    pub events: u64,
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn request_wire_shape_is_stable() {
        let msg = ClientMsg::Request {
            id: 7,
            project: Some("/p".into()),
            body: Request::SessionTransition {
                session: None,
                op: SessionOp::Pause,
                reason: Some("lunch".into()),
            },
        };
        let v = serde_json::to_value(&msg).unwrap();
        assert_eq!(v["kind"], "request");
        assert_eq!(v["body"]["request"], "session_transition");
        assert_eq!(v["body"]["op"], "pause");
        let back: ClientMsg = serde_json::from_value(v).unwrap();
        assert!(matches!(back, ClientMsg::Request { id: 7, .. }));
    }

    #[test]
    fn responses_carry_ok_or_err() {
        let ok = ServerMsg::Response {
            id: 1,
            result: Ok(Reply::Pong),
        };
        let v = serde_json::to_value(&ok).unwrap();
        assert_eq!(v["response"]["result"]["Ok"]["type"], "pong");
        let err = ServerMsg::Response {
            id: 1,
            result: Err(ErrorBody::new(
                crate::ErrorCode::NotFound,
                "no such session",
            )),
        };
        let v = serde_json::to_value(&err).unwrap();
        assert_eq!(v["response"]["result"]["Err"]["code"], "not_found");
    }

    #[test]
    fn writes_are_classified() {
        assert!(Request::DaemonStop.is_write());
        assert!(!Request::Ps { all: true }.is_write());
    }

    #[test]
    fn brief_is_a_read_and_note_a_write() {
        assert!(!Request::Brief { session: None }.is_write());
        let note: Request = serde_json::from_value(serde_json::json!(
            {"request": "note", "kind": "decision", "text": "use SQLite"}
        ))
        .unwrap();
        assert!(note.is_write());
        assert!(matches!(
            note,
            Request::Note { session: None, agent: None, kind: NoteKind::Decision, ref text }
                if text == "use SQLite"
        ));
    }
}
