//! The answers: [`Reply`], a successful response body, and a hook call's answer.

use maos_core::{AgentId, AgentState};
use serde::{Deserialize, Serialize};

use super::{
    DaemonStatus, DbCheckView, GcReport, LockCheck, LockList, Problem, PsSession, RecoveryReport,
    RepairReport, RestoreReport, StatusView,
};
use maos_core::brief::Briefing;
use maos_core::record::{AgentRecord, EventRecord, HistoryEntry, LockView, SessionRecord};

/// A successful response body.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "type", content = "data", rename_all = "snake_case")]
pub enum Reply {
    Pong,
    Done,
    Daemon(DaemonStatus),
    Session(Box<SessionRecord>),
    Sessions(Vec<SessionRecord>),
    Agent(Box<AgentRecord>),
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
    /// `maos restore-file`.
    FileRestored(super::FileRestoreReport),
    /// `maos repair` (and `maos doctor`'s check of the database's rows).
    Repaired(RepairReport),
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
    /// An MCP tool call's answer (`Request::Mcp`): whose call it was, when maos could tell,
    /// and the action's own reply.
    Mcp {
        caller: Option<McpCaller>,
        reply: Box<Reply>,
    },
    /// A session's Gantt chart.
    Gantt(Box<maos_core::gantt::Gantt>),
    /// The conflict radar: the pairs that would conflict, each side's agents filled in.
    Radar(Vec<maos_core::radar::RadarPair>),
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorBody, ServerMsg};

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
}

/// Whose MCP tool call it was, and by which rule that was decided.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct McpCaller {
    pub agent: AgentId,
    /// The agent's session (where its notes go).
    pub session: maos_core::SessionId,
    pub rule: maos_core::mcp::CallerRule,
}
