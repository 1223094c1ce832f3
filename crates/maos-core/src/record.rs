//! The domain records: a session with its phases, agents, notes and errors, an agent, an event
//! of the timeline, and the views of held locks. They are the daemon's in-memory model, the rows
//! the store writes (as JSON), the records of `maos export` files and the stable `--json` shapes
//! of the CLI, so every field is part of the public contract: add fields with
//! `#[serde(default)]`, never rename. (The wire crate re-exports them at its root.)

use serde::{Deserialize, Serialize};

use crate::spec::{AgentSpec, RunPolicy};
use crate::{
    AgentId, AgentState, LockMode, Progress, SessionId, SessionState, Strategy, Ts, Workflow,
};

crate::state::named_enum! {
    /// The agent CLI a window runs: whose hook contract a call speaks and whose words its
    /// agent's texts use.
    #[derive(Default)]
    pub enum Cli("agent CLI") {
        #[default]
        Claude => "claude",
        Codex => "codex",
        Gemini => "gemini",
        Copilot => "copilot",
        Cursor => "cursor",
        OpenCode => "opencode",
    }
}

impl Cli {
    /// The CLI's name as people know it.
    pub fn label(self) -> &'static str {
        match self {
            Cli::Claude => "Claude Code",
            Cli::Codex => "Codex",
            Cli::Gemini => "Gemini CLI",
            Cli::Copilot => "GitHub Copilot CLI",
            Cli::Cursor => "Cursor",
            Cli::OpenCode => "OpenCode",
        }
    }
}

/// A process as seen at one moment: its pid and its start time (clock ticks since boot on
/// Linux), which tells a reused pid apart.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessRef {
    pub pid: u32,
    #[serde(default)]
    pub start_time: Option<u64>,
}

/// A session: the unit of work of one objective, with its phases and agents.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: SessionId,
    pub objective: String,
    pub state: SessionState,
    pub strategy: Strategy,
    /// The project's active session (the default target of commands).
    pub active: bool,
    pub created_at: Ts,
    pub updated_at: Ts,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    /// The workflow structure (phases, and when the last one completed), captured at creation;
    /// it grows only by explicit plan updates.
    pub workflow: Workflow,
    #[serde(default)]
    pub paused_phases: Vec<String>,
    #[serde(default)]
    pub pause: Option<PauseInfo>,
    #[serde(default)]
    pub resume_count: u32,
    #[serde(default)]
    pub errors: Vec<ErrorRecord>,
    /// Facts recorded for the briefing (`maos note`), oldest first.
    #[serde(default)]
    pub notes: Vec<Note>,
    /// How maos runs the session's agents, for a session made from a plan; `None` for
    /// sessions whose agents maos does not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub policy: Option<RunPolicy>,
    #[serde(default)]
    pub agents: Vec<AgentRecord>,
    /// How much context its agents used, as their CLIs' hooks reported it.
    #[serde(default)]
    pub context: ContextUsage,
    /// Each agent's own task list (`TodoWrite`), as it last wrote it.
    #[serde(default)]
    pub todos: Vec<AgentTodos>,
    /// Made by an agent CLI's hook for its windows (not by a person or a plan): it completes
    /// when its last window ends.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub by_hooks: bool,
}

/// Who paused a session, why, and what was in progress at the time.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PauseInfo {
    pub at: Ts,
    #[serde(default)]
    pub by: Option<String>,
    #[serde(default)]
    pub reason: Option<String>,
    /// Agents that were running when the session was paused.
    #[serde(default)]
    pub in_progress: Vec<AgentId>,
}

/// An error recorded on a session (agent failures, failed checkpoints).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ErrorRecord {
    pub at: Ts,
    pub message: String,
    #[serde(default)]
    pub agent_id: Option<AgentId>,
}

impl SessionRecord {
    /// The item of `agent`'s own task list it marked in progress, if any.
    pub fn current_todo(&self, agent: &AgentId) -> Option<&Todo> {
        self.todos
            .iter()
            .find(|t| &t.agent == agent)
            .and_then(|t| t.items.iter().find(|i| i.status == "in_progress"))
    }

    /// Percent done, phase k/n, phase timing and ETA at `now` (the figures of `maos status`).
    /// A finished session's figures stop where it ended: no ETA, never stalled, and a phase
    /// left running when it failed or was cancelled does not go on counting time.
    pub fn progress(&self, now: Ts) -> Progress {
        let states: Vec<AgentState> = self.agents.iter().map(|a| a.state).collect();
        if !self.state.is_terminal() {
            return crate::progress(&self.workflow, &states, now);
        }
        let mut p = crate::progress(&self.workflow, &states, self.ended_at.unwrap_or(now));
        p.eta = None;
        p.stalled = false;
        p
    }
}

/// A session's context usage, for the briefing: the compactions its agent CLIs reported
/// (`PreCompact`) and the tokens its subagents reported when they finished (`PostToolUse` on
/// `Agent`). The hooks tell no more (no per-turn token counts).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextUsage {
    /// Times an agent's context was compacted.
    #[serde(default)]
    pub compactions: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_compaction: Option<Ts>,
    /// What started the last one: `manual` (`/compact`) or `auto`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub last_trigger: Option<String>,
    /// Tokens the finished subagents reported, in all.
    #[serde(default)]
    pub subagent_tokens: u64,
    /// Subagents that reported their tokens.
    #[serde(default)]
    pub subagents_reported: u32,
}

impl ContextUsage {
    pub fn is_empty(&self) -> bool {
        *self == ContextUsage::default()
    }
}

/// What kind of fact a note records.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NoteKind {
    /// A decision, with its rationale.
    Decision,
    /// Work completed, with its outcome.
    Done,
    /// An error or blocker.
    Error,
    /// Work still to do.
    Pending,
}

/// A fact recorded for the briefing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Note {
    pub kind: NoteKind,
    pub text: String,
    /// The agent it is about, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentId>,
    pub at: Ts,
}

/// An agent of a session.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AgentRecord {
    pub id: AgentId,
    pub session_id: SessionId,
    pub role: String,
    /// 1 for the first agent of a role in the session, 2 for the second, ...
    pub instance: u32,
    pub task: String,
    pub state: AgentState,
    #[serde(default)]
    pub paused: bool,
    /// Who paused the agent and why, while it is paused on its own (not with its session).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pause: Option<Box<PauseInfo>>,
    #[serde(default)]
    pub parent: Option<AgentId>,
    #[serde(default)]
    pub depends_on: Vec<AgentId>,
    pub created_at: Ts,
    pub updated_at: Ts,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// The agent CLI's own session id (e.g. Claude Code's `session_id`), kept for resume;
    /// stored, never parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_session_id: Option<String>,
    /// The agent CLI's own subagent id (Claude Code's `agent_id`); stored, never parsed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub external_agent_id: Option<String>,
    /// How maos runs this agent (from a plan); `None` for agents maos does not start.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec: Option<Box<AgentSpec>>,
    /// The process of its current attempt, while it runs.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessInfo>,
    /// Processes started for it so far (retries and resumes included).
    #[serde(default)]
    pub attempts: u32,
    /// The agent CLI of a window's agent and of its subagents (hooks); `None` for agents
    /// that no CLI window reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cli: Option<Cli>,
    /// A window's CLI process, watched so that a window that ends without saying so (Codex
    /// never does; a killed CLI cannot) is ended all the same.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub window: Option<ProcessRef>,
    /// A subagent's: the parent's subagent tool call that started it, which a background
    /// subagent's result names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool_use_id: Option<String>,
    /// In fleet mode: the machine of the daemon it was registered through (where its CLI or
    /// process runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub machine: Option<String>,
    /// A pending managed agent the scheduler holds back: why, and for which agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<Box<Held>>,
}

/// Why the scheduler does not start a pending managed agent that could otherwise start: an
/// agent it must not run at the same time as runs (their declared files overlap, or their
/// landings are serialised).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Held {
    /// The agent it waits for.
    pub by: AgentId,
    /// That agent's plan name.
    pub name: String,
    /// Why, in words: "its files overlap build's (src/api.rs)".
    pub reason: String,
    /// Since when.
    pub since: Ts,
}

impl AgentRecord {
    /// A new agent, pending, the first of its role, made at `at`, with nothing else known yet
    /// (set the rest with struct update syntax).
    pub fn pending(id: AgentId, session_id: SessionId, role: String, task: String, at: Ts) -> Self {
        AgentRecord {
            id,
            session_id,
            role,
            instance: 1,
            task,
            state: AgentState::Pending,
            paused: false,
            pause: None,
            parent: None,
            depends_on: Vec::new(),
            created_at: at,
            updated_at: at,
            started_at: None,
            ended_at: None,
            exit_code: None,
            external_session_id: None,
            external_agent_id: None,
            spec: None,
            process: None,
            attempts: 0,
            cli: None,
            window: None,
            tool_use_id: None,
            machine: None,
            held: None,
        }
    }
}

/// An agent's last tool call, as its CLI's hook reported it (kept in the daemon's memory only:
/// what an agent is doing now is not history; the timeline is).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Activity {
    /// The tool as the CLI names it (`Edit`, `apply_patch`, `write_file`, `Bash`, ...).
    pub tool: String,
    /// The file it wrote or was about to write, project-relative, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    pub at: Ts,
    /// Set when maos refused the call: a refused writer is not the file's writer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub denied: Option<Denial>,
}

/// Why maos refused an agent's tool call.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Denial {
    /// As the `tool_denied` event says it: `lock_conflict`, `paused`,
    /// `path_outside_workspace`, ...
    pub why: String,
    /// For a lock conflict: the agent that holds the file.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub holder: Option<AgentId>,
}

impl Activity {
    /// The call in a few words, as `ps`, `top` and the dashboard show it: "Write src/x.rs", or
    /// for a refused one "denied Write src/x.rs (held by agt_1a2b3c4d)".
    pub fn words(&self) -> String {
        let call = match &self.path {
            Some(p) => format!("{} {p}", self.tool),
            None => self.tool.clone(),
        };
        let Some(d) = &self.denied else {
            return call;
        };
        let why = match (d.why.as_str(), &d.holder) {
            (_, Some(h)) => format!("held by {}", h.short()),
            ("path_outside_workspace", None) => "outside the project".to_string(),
            (why, None) => why.replace('_', " "),
        };
        format!("denied {call} ({why})")
    }
}

/// A managed agent's running process.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProcessInfo {
    /// The process, which leads its own process group.
    pub pid: u32,
    /// Its start time (clock ticks since boot on Linux): tells pid reuse apart.
    #[serde(default)]
    pub start_time: Option<u64>,
    pub started_at: Ts,
    /// The supervisor watching it (`maosd supervise`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub supervisor: Option<u32>,
}

/// One item of an agent's own task list (Claude Code's `TodoWrite`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Todo {
    /// The item's text: its first line, at most 200 characters.
    pub content: String,
    /// As the CLI says it: `pending`, `in_progress` or `completed`.
    pub status: String,
}

/// An agent's task list, as it last wrote it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentTodos {
    pub agent: AgentId,
    /// The agent's role, for the briefing (not stored).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub role: Option<String>,
    pub at: Ts,
    pub items: Vec<Todo>,
}

impl AgentTodos {
    /// Items done, of all.
    pub fn completed(&self) -> usize {
        self.items
            .iter()
            .filter(|t| t.status == "completed")
            .count()
    }
}

/// One entry of a project's append-only timeline.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EventRecord {
    /// Monotonic per project.
    pub seq: u64,
    pub ts: Ts,
    pub session_id: Option<SessionId>,
    pub agent_id: Option<AgentId>,
    #[serde(rename = "type")]
    pub kind: String,
    pub data: serde_json::Value,
}

/// A finished session as `maos history` lists it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct HistoryEntry {
    pub id: SessionId,
    pub objective: String,
    pub state: SessionState,
    pub strategy: Strategy,
    pub created_at: Ts,
    pub started_at: Option<Ts>,
    pub ended_at: Option<Ts>,
    pub agents: u32,
    /// Archived: out of the daemon's memory and `ps`, kept in the database.
    pub archived: bool,
}

/// A held lock as shown to users.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockView {
    /// Project-relative path ("." for the whole project).
    pub path: String,
    pub mode: LockMode,
    pub holder: AgentId,
    pub holder_role: String,
    pub session_id: SessionId,
    /// Fencing token: per project, strictly increasing across grants and restarts.
    pub token: u64,
    pub acquired_at: Ts,
    pub expires_at: Ts,
}

/// A held lock in `maos ps`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PsLock {
    pub path: String,
    pub mode: LockMode,
    pub token: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn at(secs: i64) -> Ts {
        chrono::Utc
            .timestamp_opt(1_800_000_000 + secs, 0)
            .single()
            .expect("a time")
    }

    /// Issue 15: a session that failed with its second phase still running said STALLED, with
    /// the phase's time growing, forever (also after export and import).
    #[test]
    fn a_finished_sessions_progress_stops_where_it_ended() {
        let mut w =
            Workflow::new(vec!["build".into(), "test".into(), "ship".into()]).expect("phases");
        w.start(0, at(0)).expect("start");
        w.finish(
            0,
            crate::CheckpointResult::Passed,
            serde_json::Value::Null,
            at(10),
        )
        .expect("finish");
        w.start(1, at(10)).expect("start");
        let mut s: SessionRecord = serde_json::from_value(serde_json::json!({
            "id": "sess_00000000000000000000000000000001", "objective": "o",
            "state": "running", "strategy": "adaptive", "active": true,
            "created_at": at(0), "updated_at": at(0), "started_at": at(0),
            "workflow": w, "agents": []
        }))
        .expect("a session");
        // Live and far over its phases' average: stalled, with an ETA.
        let live = s.progress(at(100));
        assert!(live.stalled && live.eta.is_some(), "{live:?}");
        // Failed at 30 s: its figures stay those of that moment, whenever it is asked.
        s.state = crate::SessionState::Failed;
        s.ended_at = Some(at(30));
        for later in [at(100), at(100_000)] {
            let p = s.progress(later);
            assert!(!p.stalled && p.eta.is_none(), "{p:?}");
            assert_eq!(p.current_phase_elapsed_secs, Some(20.0), "{p:?}");
        }
    }

    /// Issue 29: a refused write read exactly like the holder's. Refusals say so, with who
    /// holds the file; an allowed call reads as before.
    #[test]
    fn a_refused_call_reads_as_a_refusal() {
        let holder = AgentId::parse(&format!("agt_{}", "1a2b3c4d".repeat(4))).expect("an id");
        let call = |path: Option<&str>, denied: Option<Denial>| Activity {
            tool: "Write".into(),
            path: path.map(str::to_string),
            at: at(0),
            denied,
        };
        let denial = |why: &str, holder: Option<AgentId>| Denial {
            why: why.into(),
            holder,
        };
        let cases = [
            (call(Some("src/x.rs"), None), "Write src/x.rs"),
            (call(None, None), "Write"),
            (
                call(
                    Some("src/x.rs"),
                    Some(denial("lock_conflict", Some(holder.clone()))),
                ),
                "denied Write src/x.rs (held by agt_1a2b3c4d)",
            ),
            (
                call(Some("src/x.rs"), Some(denial("paused", None))),
                "denied Write src/x.rs (paused)",
            ),
            (
                call(Some("/tmp/x"), Some(denial("path_outside_workspace", None))),
                "denied Write /tmp/x (outside the project)",
            ),
            (
                call(Some("a"), Some(denial("agent_not_running", None))),
                "denied Write a (agent not running)",
            ),
        ];
        for (act, want) in cases {
            assert_eq!(act.words(), want, "{act:?}");
        }
        // The wire: no `denied` when allowed (older readers see what they saw), whole ids in it.
        let json = serde_json::to_value(call(Some("f"), None)).expect("json");
        assert!(json.get("denied").is_none(), "{json}");
        let json = serde_json::to_value(call(
            Some("f"),
            Some(denial("lock_conflict", Some(holder.clone()))),
        ))
        .expect("json");
        assert_eq!(json["denied"]["holder"], holder.as_str(), "{json}");
    }
}
