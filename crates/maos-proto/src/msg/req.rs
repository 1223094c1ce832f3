//! Every request the daemon understands, in one place: the wire's [`Request`] (one variant per
//! request) and one struct per request, shared by the wire (their JSON is the request's, field
//! for field), the daemon's router and its handlers, and `maos mcp`. Adding a request is its
//! struct and its variant here. Sessions and agents are named by id or unique prefix; `None`
//! for a session means the project's active session.

use maos_core::mcp::ClaimKey;
use maos_core::record::{NoteKind, ProcessRef, Todo};
use maos_core::{AgentOp, LockMode, PhaseOp, SessionOp, Strategy, Ts};
use serde::{Deserialize, Serialize};

use super::{EventFilter, HookCall};

/// Every request the daemon understands: its name (`"request"`) and, for most, one struct of
/// this module that carries it, whose fields are the request's JSON (the daemon's router, its
/// handlers and `maos mcp` use that same struct). Sessions and agents are named by id or
/// unique prefix; `None` for a session means the project's active session.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "request", rename_all = "snake_case")]
pub enum Request {
    Ping,
    DaemonStatus,
    DaemonStop,
    SessionCreate(SessionCreate),
    SessionList(SessionList),
    SessionShow(SessionShow),
    SessionActivate(SessionActivate),
    SessionTransition(SessionTransition),
    AgentRegister(AgentRegister),
    AgentTransition(AgentTransition),
    AgentList(AgentList),
    PhaseAdd(PhaseAdd),
    PhaseTransition(PhaseTransition),
    Pause(Pause),
    Resume(Resume),
    Ps(Ps),
    Events(Events),
    Status(Status),
    LockAcquire(LockAcquire),
    LockRelease(LockRelease),
    LockReleaseAll(LockReleaseAll),
    LockList(LockList),
    LockCheck(LockCheck),
    /// The project's database health (`maos doctor`).
    DbCheck,
    History(History),
    Gc(Gc),
    Purge(Purge),
    Backup(Backup),
    Restore(Restore),
    RestoreFile(RestoreFile),
    Repair(Repair),
    Export(Export),
    Import(Import),
    SessionArchive(SessionArchive),
    /// A managed agent's process ended: its supervisor reports (see `AgentExit`).
    AgentExited(Box<AgentExit>),
    SessionFromPlan(SessionFromPlan),
    AgentLog(AgentLog),
    Retry(Retry),
    Recover(Recover),
    Validate(Validate),
    Heartbeat(Heartbeat),
    /// One hook call of an agent CLI (`maos hook`).
    Hook(Box<HookCall>),
    Brief(Brief),
    Note(Note),
    /// One tool call of `maos mcp` that acts for an agent, in one round trip: the daemon names
    /// the caller from `caller` (see [`McpEvidence`]) and applies `action` for that agent in the
    /// same transaction. The answer is [`crate::Reply::Mcp`].
    Mcp(Box<McpCall>),
    Todos(Todos),
    Gantt(Gantt),
    /// The conflict radar's pairs (`maos radar`).
    Radar(Radar),
}

/// What a pause or resume applies to inside a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "scope", content = "name", rename_all = "snake_case")]
pub enum Target {
    Session,
    Agent(String),
    Phase(String),
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

fn default_check_mode() -> LockMode {
    LockMode::Write
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionCreate {
    pub objective: String,
    #[serde(default)]
    pub strategy: Strategy,
    #[serde(default)]
    pub phases: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionList {
    #[serde(default)]
    pub all: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionShow {
    #[serde(default)]
    pub session: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionActivate {
    pub session: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionTransition {
    #[serde(default)]
    pub session: Option<String>,
    pub op: SessionOp,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRegister {
    #[serde(default)]
    pub session: Option<String>,
    pub role: String,
    pub task: String,
    #[serde(default)]
    pub depends_on: Vec<String>,
    #[serde(default)]
    pub parent: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentTransition {
    pub agent: String,
    pub op: AgentOp,
    #[serde(default)]
    pub exit_code: Option<i32>,
    #[serde(default)]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentList {
    #[serde(default)]
    pub session: Option<String>,
}

/// Grow a running session's plan by one phase, appended after the others.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseAdd {
    #[serde(default)]
    pub session: Option<String>,
    pub name: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTransition {
    #[serde(default)]
    pub session: Option<String>,
    /// Name, or number (1-based); None = the current phase.
    #[serde(default)]
    pub phase: Option<String>,
    pub op: PhaseOp,
    /// Free JSON recorded on the phase when it completes or fails.
    #[serde(default)]
    pub artifacts: serde_json::Value,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Pause {
    #[serde(default)]
    pub session: Option<String>,
    pub target: Target,
    #[serde(default)]
    pub reason: Option<String>,
    #[serde(default)]
    pub by: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Resume {
    #[serde(default)]
    pub session: Option<String>,
    pub target: Target,
    #[serde(default)]
    pub by: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Ps {
    #[serde(default)]
    pub all: bool,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Events {
    #[serde(default)]
    pub filter: EventFilter,
    #[serde(default)]
    pub limit: Option<u32>,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Status {
    #[serde(default)]
    pub session: Option<String>,
}

/// A file (or directory) a lock request names, as the agent names it: `path` absolute, or
/// relative to `cwd` (else to the project's root). The daemon resolves it once, on arrival, to
/// its project-relative key (symlinks and worktrees included). In a request's JSON its fields
/// sit beside the request's own.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct LockAt {
    pub path: String,
    #[serde(default)]
    pub cwd: Option<String>,
}

/// What an acquire asks, whoever asks it: [`LockAcquire`] for a named agent, and `maos mcp`'s
/// `lock_acquire` for its caller ([`McpAction::LockAcquire`]).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Acquire {
    #[serde(flatten)]
    pub at: LockAt,
    pub mode: LockMode,
    #[serde(default)]
    pub wait: LockWait,
    /// Lease length; the daemon's default when absent.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

/// Take a lock for an agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockAcquire {
    pub agent: String,
    #[serde(flatten)]
    pub lock: Acquire,
}

/// Release one lock. Only its holder may, unless `force` (logged with `by`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockRelease {
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(flatten)]
    pub at: LockAt,
    #[serde(default)]
    pub force: bool,
    #[serde(default)]
    pub by: Option<String>,
}

/// Release every lock of an agent and end its waits.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockReleaseAll {
    pub agent: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockList {
    #[serde(default)]
    pub session: Option<String>,
}

/// Would this agent be blocked on this path, and by whom?
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockCheck {
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(flatten)]
    pub at: LockAt,
    #[serde(default = "default_check_mode")]
    pub mode: LockMode,
}

/// Finished sessions, newest first, archived ones included (`maos history`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct History {
    #[serde(default)]
    pub limit: Option<u32>,
}

/// Delete finished sessions that ended more than `older_than_secs` ago, each exported to
/// the project's `exports/` directory first (`maos gc`); `dry_run` only lists them.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gc {
    pub older_than_secs: u64,
    #[serde(default)]
    pub dry_run: bool,
}

/// Delete one finished session (full id) with everything it recorded. `maos gc` sends it
/// once the session is exported; there is no command for it on its own.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Purge {
    pub session: String,
}

/// A consistent copy of the project's database, taken while the daemon serves, written to
/// `path` (absolute, must not exist) (`maos backup`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Backup {
    pub path: String,
}

/// Replace the project's database with a backup (`maos restore`): `path` (absolute) is
/// checked first; the old database is kept aside. Refused while sessions are live, unless
/// `force`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Restore {
    pub path: String,
    #[serde(default)]
    pub force: bool,
}

/// `maos restore-file`: put back the holder's last kept version of `path` (or the kept
/// `version`, a SHA-256 or a prefix of one), keeping the content it replaces first.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RestoreFile {
    pub path: String,
    #[serde(default)]
    pub cwd: Option<String>,
    #[serde(default)]
    pub version: Option<String>,
}

/// The rows of the project's database that maos cannot read (`maos doctor`), and with
/// `quarantine`, those rows moved aside with every row of their sessions so that the
/// project loads again (`maos repair --quarantine`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Repair {
    #[serde(default)]
    pub quarantine: bool,
}

/// One session with its timeline and checkpoints, archived or not (`maos export`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Export {
    pub session: String,
}

/// A session file, maos's own or an orchestrator's (`maos import`): its path (for
/// messages) and text.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Import {
    pub path: String,
    pub text: String,
}

/// Take a finished session out of the daemon's memory and `ps`; it stays in the database
/// (its events too) and in `maos history` (`maos session archive`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionArchive {
    pub session: String,
}

/// A session from a plan file (`maos session create --plan`, `maos run`): the file's path
/// (for error messages) and its text; `start` also starts it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionFromPlan {
    pub path: String,
    pub text: String,
    #[serde(default)]
    pub start: bool,
}

/// Where a managed agent's output goes (`maos logs`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentLog {
    pub agent: String,
}

/// A new attempt of a managed session's failed agents, or of one failed agent
/// (`maos retry`): `target` names a session or an agent (`None`: the active session).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Retry {
    #[serde(default)]
    pub target: Option<String>,
    #[serde(default)]
    pub by: Option<String>,
}

/// Reconcile managed sessions with their processes now (`maos recover`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Recover {
    #[serde(default)]
    pub session: Option<String>,
}

/// What does not add up (`maos validate`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Validate {
    #[serde(default)]
    pub session: Option<String>,
}

/// A sign of life: renews every lease of the agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Heartbeat {
    pub agent: String,
}

/// Where a session stands (`maos brief`): built from live state only.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Brief {
    #[serde(default)]
    pub session: Option<String>,
}

/// Record a fact for the briefing (`maos note`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    #[serde(default)]
    pub session: Option<String>,
    /// The agent the note is about (an agent of that session).
    #[serde(default)]
    pub agent: Option<String>,
    pub kind: NoteKind,
    pub text: String,
}

/// An agent's task list as it now stands, replacing the last one (`maos mcp`'s progress
/// tool; a CLI's own `TodoWrite` arrives through its hook).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Todos {
    pub agent: String,
    pub items: Vec<Todo>,
}

/// The conflict radar (`maos radar`): the pairs of live agents' worktrees whose work would
/// conflict if both landed. `agent` keeps the pairs one side of which is that agent's.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Radar {
    #[serde(default)]
    pub agent: Option<String>,
}

/// A session's Gantt chart (the dashboard): the daemon keeps it folded as events commit.
/// Times are milliseconds since 1970; `to_ms` defaults to the session's end, or now.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gantt {
    pub session: String,
    #[serde(default)]
    pub from_ms: Option<i64>,
    #[serde(default)]
    pub to_ms: Option<i64>,
    pub width_px: u32,
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

/// What tells the daemon which agent made an MCP tool call (see `maos_core::mcp`), the first
/// that answers winning: the call's tool use id (Claude Code's `_meta`), else the oldest hook
/// record of the same CLI process, tool and arguments (`claim`), else `MAOS_AGENT_ID`, else
/// the main agent of the CLI window `window`. A hook's record answers one call.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpEvidence {
    #[serde(default)]
    pub tool_use_id: Option<String>,
    #[serde(default)]
    pub claim: Option<ClaimKey>,
    #[serde(default)]
    pub maos_agent: Option<String>,
    /// The CLI process that runs the MCP server.
    #[serde(default)]
    pub window: Option<ProcessRef>,
}

/// An MCP tool call: whose it is, and what it does for that agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct McpCall {
    pub caller: McpEvidence,
    pub action: McpAction,
}

/// What an MCP tool call does, for the agent the daemon names as its caller. Paths are as the
/// agent named them (relative to `cwd`, or to the project's root).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum McpAction {
    LockAcquire(Acquire),
    LockRelease(LockAt),
    /// Every lease of the caller.
    LockRenew,
    /// As the caller when maos can tell who it is, else as nobody (every conflict shows).
    LockCheck {
        #[serde(flatten)]
        at: LockAt,
        mode: LockMode,
    },
    /// The caller's whole task list.
    Progress {
        items: Vec<Todo>,
    },
    /// A note of the caller, in its session.
    Note {
        kind: NoteKind,
        text: String,
    },
    /// The caller's session's briefing; the active session's when maos cannot tell who calls.
    Brief,
}

impl McpAction {
    /// Whether the action needs to know its caller; the others go on without one.
    pub fn needs_caller(&self) -> bool {
        !matches!(self, McpAction::LockCheck { .. } | McpAction::Brief)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_note_parses_with_its_defaults() {
        let note: Request = serde_json::from_value(serde_json::json!(
            {"request": "note", "kind": "decision", "text": "use SQLite"}
        ))
        .unwrap();
        assert!(matches!(
            note,
            Request::Note(Note { session: None, agent: None, kind: NoteKind::Decision, ref text })
                if text == "use SQLite"
        ));
    }
}
