//! Agent CLI hooks (Claude Code's shape, which the client maps Codex's and Gemini CLI's onto;
//! see docs/hooks.md): who is calling, and what each event means for sessions, agents and locks.
//! Each CLI window (one CLI session id) is its own agent, labelled by its CLI and its first
//! prompt; its subagents are its children. A write is allowed only inside the project,
//! outside a pause, and with the file's write lock, which the calling agent then holds until
//! its turn stops. A window ends when its CLI says so (SessionEnd) or its process is gone
//! ([`end_lost_windows`]); a session the hooks made completes when its last window ends.

use maos_core::mcp::{CallerRule, ClaimKey};
use maos_core::record::{Activity, Cli, ProcessRef, Todo};
use maos_core::text::collapse_and_clip;
use maos_core::{
    AgentId, AgentOp, AgentState, HeldLock, LockError, LockMode, LockPath, LockRequest, SessionId,
    SessionOp, SessionState, Strategy, Ts, WaitPolicy, WaiterInfo,
};
use maos_proto::{ErrorBody, HookAnswer, HookDecision, SpawnedBy};
use serde_json::json;

use self::answer::{ago, answer, deny_held, describe, is_placeholder_task, placeholder_task};
use crate::base::hookcall::Hook;
use crate::txn::locks::who;
use crate::txn::state::{SpawnIntent, State, Txn};

mod answer;
mod git;
pub use git::Hooked;

/// What a window that starts a new session is told before the last session's briefing.
const LAST_SESSION: &str =
    "maos: this window starts a new session of this project. How the last one stood, for context:";

/// Requests kept per project; ones the CLI never followed up are dropped oldest first.
const MAX_INTENTS: usize = 256;

/// The objective of a session the hook made, until a window's first prompt names it.
fn placeholder_objective(cli: Cli, window: &str) -> String {
    let short = window.get(..8).unwrap_or(window);
    format!("{} session {short}", cli.label())
}

fn is_placeholder_objective(objective: &str) -> bool {
    objective == HELD
        || Cli::ALL
            .iter()
            .any(|c| objective.starts_with(&format!("{} session", c.label())))
}

/// The objective of the session `maos pause` makes for the next window (its first prompt
/// names it, as any window's session).
const HELD: &str = "held by `maos pause` for the next agent CLI window";

/// `maos pause` when no live session is active (every window has ended): the session the next
/// window would start, made now, running and then paused with `reason`, so that the window's
/// writes are held until `maos resume`. It completes with its last window like any other.
pub fn hold_next_window(
    tx: &mut Txn<'_>,
    reason: Option<String>,
    by: Option<String>,
) -> Result<SessionId, ErrorBody> {
    let id = super::session::create(tx, HELD.to_string(), Strategy::Parallel, Vec::new())?;
    tx.session_mut(&id).by_hooks = true;
    super::session::apply_session(tx, &id, SessionOp::Start, SessionState::Running, None, None);
    super::session::apply_session(tx, &id, SessionOp::Pause, SessionState::Paused, reason, by);
    Ok(id)
}

/// The live agent of the window `cli` (its main thread) in a live session, wherever it is.
fn live_window(st: &State, cli: &str) -> Option<(SessionId, AgentId)> {
    st.sessions()
        .iter()
        .filter(|s| !s.state.is_terminal())
        .flat_map(|s| s.agents.iter())
        .find(|a| {
            a.external_session_id.as_deref() == Some(cli)
                && a.external_agent_id.is_none()
                && a.spec.is_none()
                && !a.state.is_terminal()
        })
        .map(|a| (a.session_id.clone(), a.id.clone()))
}

/// A subagent's call after its window ended (SessionEnd, or its CLI process gone): the agent
/// it names, ended with the window (or the ended window when the subagent was never heard
/// of). The window's end is final for its subagents: such a call registers nothing (no new
/// window, no new session that nothing would ever end), and a write is refused rather than
/// left without its lock. The window itself coming back (`claude --resume`, a prompt) is
/// a main-thread call, not this.
fn of_ended_window(st: &State, call: &Hook) -> Option<AgentId> {
    let sub = call.agent_id.as_deref()?;
    if call.maos_agent.is_some() || live_window(st, &call.session_id).is_some() {
        return None;
    }
    let cli = Some(call.session_id.as_str());
    let newest = |agent: Option<&str>| {
        st.sessions()
            .iter()
            .flat_map(|s| s.agents.iter())
            .filter(|a| {
                a.external_session_id.as_deref() == cli
                    && a.external_agent_id.as_deref() == agent
                    && a.spec.is_none()
            })
            .max_by_key(|a| a.created_at)
    };
    let window = newest(None).filter(|w| w.state.is_terminal())?;
    let sub =
        newest(Some(sub)).filter(|a| a.state.is_terminal() && a.created_at >= window.created_at);
    Some(sub.unwrap_or(window).id.clone())
}

/// The answer to a call of a subagent whose window ended ([`of_ended_window`]).
fn after_window_end(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) -> HookAnswer {
    if call.event != "PreToolUse" || !call.writes_files() {
        return answer(HookDecision::None, None, None);
    }
    let reason = "maos: this subagent's window has ended (its CLI said so, or its process is gone), and its locks with it; maos takes no lock for it any more. Do not write files now: finish, and say what is left to do.".to_string();
    deny(tx, agent, call, "window_ended", reason)
}

/// The session this call belongs to: the one named by `MAOS_SESSION_ID`, else the one its
/// window already works in, else the active live session, else a new running one made for
/// the windows (it completes when the last of them ends).
fn session(tx: &mut Txn<'_>, call: &Hook) -> Result<SessionId, ErrorBody> {
    if let Some(s) = &call.maos_session {
        return Ok(tx.state().resolve_session(Some(s))?.id.clone());
    }
    if let Some((sid, _)) = live_window(tx.state(), &call.session_id) {
        return Ok(sid);
    }
    if let Some(a) = tx.state().active().filter(|s| !s.state.is_terminal()) {
        return Ok(a.id.clone());
    }
    let id = super::session::create(
        tx,
        placeholder_objective(call.cli, &call.session_id),
        Strategy::Parallel,
        Vec::new(),
    )?;
    tx.session_mut(&id).by_hooks = true;
    super::session::apply_session(tx, &id, SessionOp::Start, SessionState::Running, None, None);
    Ok(id)
}

/// Register an agent for the CLI's ids, started.
fn register(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    role: &str,
    task: &str,
    parent: Option<&AgentId>,
    external: (&str, Option<&str>),
) -> Result<AgentId, ErrorBody> {
    let id = super::agent::register(
        tx,
        sid,
        role.to_string(),
        task.to_string(),
        Vec::new(),
        parent.cloned(),
    )?;
    let a = tx.agent_mut(&id);
    a.external_session_id = Some(external.0.to_string());
    a.external_agent_id = external.1.map(str::to_string);
    if tx
        .state()
        .session(sid)
        .is_some_and(|s| s.state == SessionState::Running)
    {
        super::agent::transition(tx, &id, AgentOp::Start, None, None)?;
    }
    Ok(id)
}

/// The newest agent for (CLI session id, CLI agent id), whatever its state.
fn find_any(tx: &Txn<'_>, sid: &SessionId, cli: &str, sub: Option<&str>) -> Option<AgentId> {
    let a = tx.state().session(sid)?.agents.iter().rev().find(|a| {
        a.external_session_id.as_deref() == Some(cli) && a.external_agent_id.as_deref() == sub
    })?;
    Some(a.id.clone())
}

/// Find the live agent for (CLI session id, CLI agent id), bringing a resumable one back to
/// running.
fn find(tx: &mut Txn<'_>, sid: &SessionId, cli: &str, sub: Option<&str>) -> Option<AgentId> {
    let id = find_any(tx, sid, cli, sub)?;
    if tx.state().agent(&id)?.state == AgentState::Resumable {
        let _ = super::agent::transition(tx, &id, AgentOp::Resume, None, None);
    }
    (!tx.state().agent(&id)?.state.is_terminal()).then_some(id)
}

/// The window's agent in `sid`: the live one, else a new one labelled by its CLI. A window
/// that comes back after it ended (`claude --resume`) gets a new agent with its old task.
fn window(tx: &mut Txn<'_>, sid: &SessionId, call: &Hook) -> Result<AgentId, ErrorBody> {
    if let Some(id) = find(tx, sid, &call.session_id, None) {
        return Ok(id);
    }
    let before = tx
        .state()
        .sessions()
        .iter()
        .flat_map(|s| s.agents.iter())
        .filter(|a| {
            a.external_session_id.as_deref() == Some(call.session_id.as_str())
                && a.external_agent_id.is_none()
        })
        .max_by_key(|a| a.created_at)
        .map(|a| (a.id.clone(), a.task.clone()));
    let task = before
        .as_ref()
        .map(|(_, t)| t.clone())
        .filter(|t| !is_placeholder_task(t))
        .unwrap_or_else(|| placeholder_task(call.cli));
    let id = register(
        tx,
        sid,
        call.cli.as_str(),
        &task,
        None,
        (&call.session_id, None),
    )?;
    tx.agent_mut(&id).cli = Some(call.cli);
    if let Some((old, _)) = before {
        tx.lock_event(
            &id,
            "window_resumed",
            json!({ "previous_agent": old, "source": call.source }),
        );
    }
    Ok(id)
}

/// The calling agent: `MAOS_AGENT_ID`, else the subagent (registered on the spot if it was
/// never announced: stray ids happen), else the orchestrator.
fn caller(tx: &mut Txn<'_>, sid: &SessionId, call: &Hook) -> Result<AgentId, ErrorBody> {
    if let Some(a) = &call.maos_agent {
        return Ok(tx.state().resolve_agent(a, Some(sid))?.id.clone());
    }
    let orch = window(tx, sid, call)?;
    watch(tx, &orch, call);
    let Some(sub) = call.agent_id.as_deref() else {
        return Ok(orch);
    };
    if let Some(id) = find(tx, sid, &call.session_id, Some(sub)) {
        tie(tx, &id, call);
        return Ok(id);
    }
    let role = call.agent_type.as_deref().unwrap_or("subagent");
    // The request its call names for certain, else a guess: the oldest open one.
    let spawned = spawned_by(call);
    let tied = spawned.and_then(|s| request_of(tx, &call.session_id, &s.tool_use_id));
    let tied = tied.filter(|&i| !tx.spawn_intents_mut()[i].certain);
    let claimed = tied.or_else(|| claim(tx, &call.session_id, call.agent_type.as_deref()));
    let task = match (claimed, spawned) {
        (Some(i), _) => tx.spawn_intents_mut()[i].task.clone(),
        (
            None,
            Some(SpawnedBy {
                description: Some(d),
                ..
            }),
        ) => d.clone(),
        (None, _) => unknown_task(role, sub),
    };
    let id = register(
        tx,
        sid,
        role,
        &task,
        Some(&orch),
        (&call.session_id, Some(sub)),
    )?;
    tx.agent_mut(&id).cli = Some(call.cli);
    match claimed {
        Some(i) => take(tx, &call.session_id, &id, i, tied.is_some()),
        None => tx.agent_mut(&id).tool_use_id = spawned.map(|s| s.tool_use_id.clone()),
    }
    Ok(id)
}

/// The subagent tool call that started the calling subagent, as the CLI wrote it down (the
/// hook read it), if it is one maos can use.
fn spawned_by(call: &Hook) -> Option<&SpawnedBy> {
    call.agent_id.as_ref()?;
    call.spawned_by
        .as_ref()
        .filter(|s| (1..=maos_proto::MAX_SPAWN_ID).contains(&s.tool_use_id.len()))
}

/// The request of the CLI session `cli` made by the tool call `tool_use_id`.
fn request_of(tx: &mut Txn<'_>, cli: &str, tool_use_id: &str) -> Option<usize> {
    tx.spawn_intents_mut()
        .iter()
        .position(|i| i.cli_session == cli && i.tool_use_id.as_deref() == Some(tool_use_id))
}

/// The calling subagent `agent` was started by the call its `spawned_by` names, for certain:
/// it takes that request (a guess is corrected: [`take`]). A request another agent took for
/// certain stays with it, and an agent tied for certain keeps its tie.
fn tie(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) {
    let Some(spawned) = spawned_by(call) else {
        return;
    };
    let cli = call.session_id.as_str();
    let intents = tx.spawn_intents_mut();
    let mine = intents
        .iter()
        .position(|i| i.claimed_by.as_ref() == Some(agent));
    if mine.is_some_and(|m| intents[m].certain) {
        return;
    }
    match request_of(tx, cli, &spawned.tool_use_id) {
        Some(i) if tx.spawn_intents_mut()[i].claimed_by.as_ref() == Some(agent) => {
            tx.spawn_intents_mut()[i].certain = true;
        }
        Some(i) if !tx.spawn_intents_mut()[i].certain => take(tx, cli, agent, i, true),
        Some(_) => {}
        None => {
            // Its request is settled or was never heard of. An agent still holding a
            // guessed request gives it back; an agent that took none takes the call's id and
            // description. One whose request was settled by its result keeps it.
            let Some(m) = mine else {
                let a = tx.agent_mut(agent);
                if a.tool_use_id.is_none() {
                    a.tool_use_id = Some(spawned.tool_use_id.clone());
                    if let Some(d) = &spawned.description {
                        a.task = d.clone();
                    }
                }
                return;
            };
            tx.spawn_intents_mut()[m].claimed_by = None;
            let (role, sub) = tx
                .state()
                .agent(agent)
                .map(|a| (a.role.clone(), a.external_agent_id.clone()))
                .unwrap_or_default();
            let a = tx.agent_mut(agent);
            a.tool_use_id = Some(spawned.tool_use_id.clone());
            a.task = spawned
                .description
                .clone()
                .unwrap_or_else(|| unknown_task(&role, sub.as_deref().unwrap_or_default()));
        }
    }
}

/// `agent` takes the request `i`: its task and tool call, `certain`ly or as a guess. The agent
/// that had guessed it gives it back and takes the request `agent` had guessed in its place,
/// else the oldest open one, else none (its task unknown again): never two agents with one
/// task, and never a request taken for certain.
fn take(tx: &mut Txn<'_>, cli: &str, agent: &AgentId, i: usize, certain: bool) {
    let intents = tx.spawn_intents_mut();
    let other = intents[i].claimed_by.clone().filter(|o| o != agent);
    let mine = intents
        .iter()
        .position(|x| x.claimed_by.as_ref() == Some(agent) && !x.certain)
        .filter(|&m| m != i);
    if let Some(m) = mine {
        intents[m].claimed_by = None;
    }
    intents[i].claimed_by = Some(agent.clone());
    intents[i].certain |= certain;
    let (task, tool_use_id) = (intents[i].task.clone(), intents[i].tool_use_id.clone());
    let a = tx.agent_mut(agent);
    a.task = task;
    a.tool_use_id = tool_use_id;
    let Some(other) = other else { return };
    let (role, sub) = tx
        .state()
        .agent(&other)
        .map(|a| (Some(a.role.clone()), a.external_agent_id.clone()))
        .unwrap_or_default();
    let (task, tool_use_id) = match mine.or_else(|| claim(tx, cli, role.as_deref())) {
        Some(j) => {
            let theirs = &mut tx.spawn_intents_mut()[j];
            theirs.claimed_by = Some(other.clone());
            (theirs.task.clone(), theirs.tool_use_id.clone())
        }
        None => {
            let role = role.as_deref().unwrap_or_default();
            (unknown_task(role, sub.as_deref().unwrap_or_default()), None)
        }
    };
    let a = tx.agent_mut(&other);
    a.task = task;
    a.tool_use_id = tool_use_id;
}

/// Remember the window's CLI process (the first seen, or a new one after `claude --resume`),
/// so that the sweep ends the window when it is gone. Agents maos runs itself are watched by
/// their supervisor instead.
fn watch(tx: &mut Txn<'_>, window: &AgentId, call: &Hook) {
    let Some(p) = call.process else { return };
    if call.maos_agent.is_some() {
        return;
    }
    if tx
        .state()
        .agent(window)
        .is_some_and(|a| a.window != Some(p))
    {
        tx.agent_mut(window).window = Some(p);
    }
}

/// The agent's last tool call, for `ps` and for the words of a denial naming it.
fn touch(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) {
    let Some(tool) = &call.tool_name else { return };
    let activity = Activity {
        tool: tool.clone(),
        path: call.paths.first().cloned(),
        at: tx.now,
        denied: None,
    };
    tx.note_activity(agent, activity);
}

/// The task of a subagent no request is tied to.
fn unknown_task(role: &str, sub: &str) -> String {
    format!("{role} subagent {sub}")
}

/// The oldest unclaimed request of this CLI session for this kind of subagent (or any kind).
fn claim(tx: &mut Txn<'_>, cli: &str, kind: Option<&str>) -> Option<usize> {
    let intents = tx.spawn_intents_mut();
    let open = |i: &SpawnIntent| i.cli_session == cli && i.claimed_by.is_none();
    intents
        .iter()
        .position(|i| open(i) && kind.is_some() && i.subagent_type.as_deref() == kind)
        .or_else(|| intents.iter().position(open))
}

/// PreToolUse of the subagent tool: remember the request until a subagent claims it.
fn request_subagent(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) {
    let task = match (call.summary.as_deref(), call.prompt_line.as_deref()) {
        (Some(d), Some(p)) => format!("{d}: {p}"),
        (Some(t), None) | (None, Some(t)) => t.to_string(),
        (None, None) => "subagent".to_string(),
    };
    let task: String = task.chars().take(200).collect();
    tx.lock_event(
        agent,
        "subagent_requested",
        json!({ "description": call.summary, "subagent_type": call.agent_type,
                "tool_use_id": call.tool_use_id, "task": task }),
    );
    let intents = tx.spawn_intents_mut();
    let same = |i: &SpawnIntent| {
        i.cli_session == call.session_id
            && call.tool_use_id.is_some()
            && i.tool_use_id == call.tool_use_id
    };
    if intents.iter().any(same) {
        return;
    }
    if intents.len() >= MAX_INTENTS {
        intents.remove(0);
    }
    intents.push(SpawnIntent {
        cli_session: call.session_id.clone(),
        tool_use_id: call.tool_use_id.clone(),
        subagent_type: call.agent_type.clone(),
        task,
        claimed_by: None,
        certain: false,
    });
}

/// PostToolUse of the subagent tool: `agentId` ties the request to its agent for sure (a
/// wrong guess is corrected, swapping tasks with the agent that took this request), and the
/// subagent's usage goes on the record. A subagent that reports completion is completed.
fn subagent_done(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    orch: &AgentId,
    call: &Hook,
    res: &maos_proto::SubagentResult,
) -> Result<(), ErrorBody> {
    let cli = call.session_id.as_str();
    let linked = call
        .tool_use_id
        .as_deref()
        .and_then(|t| request_of(tx, cli, t));
    let intent = linked.map(|l| tx.spawn_intents_mut()[l].clone());
    // A background subagent's result names its tool call; its id may be another one. Not
    // the agent that only guessed this call: it may well be another subagent.
    let guessed = intent.as_ref().is_some_and(|i| !i.certain);
    let by_call = || {
        let t = call.tool_use_id.as_deref()?;
        let a = tx.state().session(sid)?.agents.iter().rev().find(|a| {
            a.external_session_id.as_deref() == Some(cli) && a.tool_use_id.as_deref() == Some(t)
        })?;
        Some(a.id.clone())
    };
    let certain = find_any(tx, sid, cli, Some(&res.agent_id));
    let found = certain
        .clone()
        .or_else(|| (!guessed).then(by_call).flatten());
    let agent = match found {
        Some(a) => a,
        None => {
            // Never seen: it ran without a single hook event. It still belongs in the tree.
            let role = intent
                .as_ref()
                .and_then(|i| i.subagent_type.clone())
                .or_else(|| call.agent_type.clone())
                .unwrap_or_else(|| "subagent".to_string());
            let task = intent.as_ref().map(|i| i.task.clone()).unwrap_or_default();
            let id = register(
                tx,
                sid,
                &role,
                &task,
                Some(orch),
                (cli, Some(&res.agent_id)),
            )?;
            tx.agent_mut(&id).cli = Some(call.cli);
            id
        }
    };
    // The agent named by `agentId` made this call for sure: its tool call id replaces the one
    // a guess gave it, or a later result would find it by that guessed id.
    if call.tool_use_id.is_some()
        && tx.state().agent(&agent).is_some_and(|a| {
            a.tool_use_id.is_none() || (certain.is_some() && a.tool_use_id != call.tool_use_id)
        })
    {
        tx.agent_mut(&agent).tool_use_id = call.tool_use_id.clone();
    }
    if let Some(l) = linked {
        // A wrong guess: the agent gets this request, and the agent that took this request
        // gets the one the agent had guessed, else the next open one, else none. The request
        // is settled then: no later event takes it.
        if intent.as_ref().and_then(|i| i.claimed_by.as_ref()) != Some(&agent) {
            take(tx, cli, &agent, l, true);
        }
        tx.spawn_intents_mut().remove(l);
    }
    if let Some(tokens) = res.total_tokens {
        let sid = tx.state().agent(&agent).map(|a| a.session_id.clone());
        if let Some(sid) = sid {
            let context = &mut tx.session_mut(&sid).context;
            context.subagent_tokens = context.subagent_tokens.saturating_add(tokens);
            context.subagents_reported = context.subagents_reported.saturating_add(1);
        }
    }
    tx.lock_event(
        &agent,
        "subagent_result",
        json!({ "tool_use_id": call.tool_use_id, "status": res.status,
                "total_tokens": res.total_tokens, "total_duration_ms": res.total_duration_ms,
                "total_tool_use_count": res.total_tool_use_count }),
    );
    let live = tx
        .state()
        .agent(&agent)
        .is_some_and(|a| !a.state.is_terminal());
    // A background launch (`async_launched`) says nothing of the end: its result comes later.
    let end = match res.status.as_deref() {
        Some("completed" | "success") => Some(AgentOp::Complete),
        Some("failed" | "error") => Some(AgentOp::Fail),
        Some("killed" | "cancelled" | "canceled" | "stopped" | "aborted") => Some(AgentOp::Cancel),
        _ => None,
    };
    if let (true, Some(op)) = (live, end) {
        let reason = (op != AgentOp::Complete)
            .then(|| format!("the subagent {}", res.status.as_deref().unwrap_or_default()));
        super::agent::transition(tx, &agent, op, None, reason)?;
    }
    Ok(())
}

/// In a fleet, the machine a write or command happened on, in its event: its `cwd` is a path
/// on that machine, so only that machine's radar looks at it.
fn with_machine(tx: &Txn<'_>, data: &mut serde_json::Value) {
    if let Some(machine) = &tx.state().machine {
        data["machine"] = json!(machine);
    }
}

/// A write (its PostToolUse) to a file whose change would conflict with another agent's
/// pending work (the conflict radar, issue 35): the model is told that change and whose it is,
/// so it can adapt. A conflict is not a lock: nothing is refused. The radar runs after the
/// commit, so what it says is as of the writes before this one.
fn radar_told(
    tx: &Txn<'_>,
    agent: &AgentId,
    paths: &[String],
    mut answer: HookAnswer,
) -> HookAnswer {
    let Some(told) = tx
        .state()
        .radar
        .as_ref()
        .and_then(|r| r.context_for(agent, paths))
    else {
        return answer;
    };
    answer.context = Some(match answer.context.take() {
        Some(before) => format!("{before}\n{told}"),
        None => told,
    });
    answer
}

fn deny(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook, why: &str, reason: String) -> HookAnswer {
    deny_held(tx, agent, call, why, reason, None)
}

/// Who holds or waits for the file ahead of the writer, in words for the model.
fn blockers(st: &State, holders: &[HeldLock], queued: &[WaiterInfo], now: Ts) -> String {
    holders
        .iter()
        .map(|h| {
            format!(
                "{}, has held it since {} ({} ago)",
                describe(st, &h.holder, now),
                maos_core::utc(h.acquired_at),
                ago(h.acquired_at, now)
            )
        })
        .chain(
            queued
                .iter()
                .map(|w| format!("{} is waiting for it", who(st, &w.holder))),
        )
        .collect::<Vec<_>>()
        .join("; ")
}

/// A write: inside the project, not paused, and the write lock of every file it touches for
/// the caller (all of them or none).
fn pre_write(tx: &mut Txn<'_>, sid: &SessionId, agent: &AgentId, call: &Hook) -> HookAnswer {
    if let Some(e) = &call.path_error {
        let reason = format!("maos: {}.", e.trim_end_matches('.'));
        return deny(tx, agent, call, "path_outside_workspace", reason);
    }
    let st = tx.state();
    let paused_session = st
        .session(sid)
        .is_some_and(|s| s.state == SessionState::Paused);
    let paused_agent = st.agent(agent).is_some_and(|a| a.paused);
    if paused_session || paused_agent {
        // Who paused it and why reach the model: it may be told what to do meanwhile.
        let (what, how) = if paused_session {
            let why = st.session(sid).and_then(|s| s.pause.as_ref());
            (
                format!("this session is paused{}", pause_why(why)),
                "`maos resume`".to_string(),
            )
        } else {
            let why = st.agent(agent).and_then(|a| a.pause.as_deref());
            (
                format!("this agent is paused{}", pause_why(why)),
                format!("`maos resume --agent {agent}`"),
            )
        };
        let reason = format!(
            "maos: {what}. No files may be written now. Stop and wait; a person resumes it with {how}."
        );
        return deny(tx, agent, call, "paused", reason);
    }
    let born = match super::lock::live_agent(tx.state(), agent.as_str()) {
        Ok(a) => a.created_at,
        Err(e) => {
            let reason = format!("maos: {}", e.message);
            return deny(tx, agent, call, e.code.as_str(), reason);
        }
    };
    let ttl_us = tx.state().lock_ttl_us;
    let mut reqs = Vec::with_capacity(call.paths.len());
    for path in &call.paths {
        match LockPath::new(path) {
            Ok(lock_path) => reqs.push(LockRequest {
                holder: agent.clone(),
                born,
                // A directory a shell command removes: everything under it.
                mode: match call.directories.contains(path) {
                    true => LockMode::Directory,
                    false => LockMode::Write,
                },
                path: lock_path,
                wait: WaitPolicy::NoWait,
                ttl_us,
            }),
            Err(e) => return deny(tx, agent, call, "bad_path", format!("maos: {e}")),
        }
    }
    // Every file of the call or none (a patch never keeps some of its locks). Its leases were
    // renewed already.
    match tx.take_all(reqs) {
        Ok(_) => {}
        Err(LockError::Conflict {
            path,
            holders,
            queued,
            ..
        }) => {
            // A file named through a hard link is the held file: said, or the model would
            // not know why another file's name came back.
            let link = call
                .hard_links
                .iter()
                .find(|[_, held]| held == path.as_str())
                .map(|[named, _]| format!("{named} is a hard link to {path} (the same file); "))
                .unwrap_or_default();
            let reason = format!(
                "maos: {link}{path} is being written by another agent: {}. Do not edit it now: work on other files, or finish and let that agent complete first, then retry.",
                blockers(tx.state(), &holders, &queued, tx.now)
            );
            let holder = holders.first().map(|h| h.holder.clone());
            return deny_held(tx, agent, call, "lock_conflict", reason, holder);
        }
        Err(e) => {
            let e = super::lock::lock_error(tx.state(), &e);
            let reason = format!("maos: {}", e.message);
            return deny(tx, agent, call, e.code.as_str(), reason);
        }
    }
    // Files outside every project maos knows: not maos's to lock (`outside_project = "allow"`),
    // written, and on the record.
    if !call.outside.is_empty() {
        tx.lock_event(
            agent,
            "write_outside_project",
            json!({ "tool": call.tool_name, "paths": call.outside }),
        );
    }
    // Files of other projects: locked there (the connection took their locks first).
    if !call.elsewhere.is_empty() {
        tx.lock_event(
            agent,
            "write_in_other_project",
            json!({ "tool": call.tool_name, "files": call.elsewhere }),
        );
    }
    answer(HookDecision::Allow, None, None)
}

/// A GitHub Copilot CLI subagent's subagent names its parent subagent (Copilot's id of it) as
/// its session, never the window: the call is put in the window's CLI session, where its
/// parent subagent is, so that it is that window's and claims the task its parent gave it.
fn copilot_nested(st: &State, mut call: Hook) -> Hook {
    if call.cli != Cli::Copilot
        || call.agent_id.is_none()
        || live_window(st, &call.session_id).is_some()
    {
        return call;
    }
    let parent = st
        .sessions()
        .iter()
        .filter(|s| !s.state.is_terminal())
        .flat_map(|s| s.agents.iter())
        .find(|a| {
            a.cli == Some(Cli::Copilot)
                && a.external_agent_id.as_deref() == Some(call.session_id.as_str())
        })
        .and_then(|a| a.external_session_id.clone());
    if let Some(window) = parent {
        call.session_id = window;
    }
    call
}

/// What an agent CLI's hook event means for sessions, agents and locks, and the answer for
/// the CLI.
pub fn hook(tx: &mut Txn<'_>, call: Hook) -> Result<Hooked, ErrorBody> {
    let call = copilot_nested(tx.state(), call);
    if let Some(agent) = of_ended_window(tx.state(), &call) {
        return Ok(after_window_end(tx, &agent, &call).into());
    }
    // A shell call's git commands (issue 31 §3): before anything is locked for it, what
    // they would discard or capture of others' work; after its files are locked, its turn
    // at the git index; at its end, the index is free again.
    if !call.git.is_empty() || call.git_index.is_some() {
        let sid = session(tx, &call)?;
        let agent = caller(tx, &sid, &call)?;
        match call.event.as_str() {
            "PreToolUse" => {
                if let Some(denied) = git::guard(tx, &agent, &call) {
                    return Ok(denied.into());
                }
                let (index, budget_ms) = (call.git_index.clone(), call.budget_ms);
                let answer = answer_of(tx, call)?;
                return Ok(match index {
                    Some(key) if answer.decision != HookDecision::Deny => {
                        git::take_index(tx, &agent, &key, budget_ms, answer)
                    }
                    _ => answer.into(),
                });
            }
            "PostToolUse" => {
                if let Some(key) = &call.git_index {
                    git::release_index(tx, &agent, key);
                }
            }
            _ => {}
        }
    }
    answer_of(tx, call).map(Hooked::Answer)
}

/// [`hook`]'s answer to every call but a shell call's git turns.
fn answer_of(tx: &mut Txn<'_>, call: Hook) -> Result<HookAnswer, ErrorBody> {
    if call.session_id.trim().is_empty() {
        return Err(crate::base::error::bad_request(
            "hook input has no session_id",
        ));
    }
    // A write that names no file cannot be locked; refused before anything is registered.
    if call.writes_files()
        && call.paths.is_empty()
        && call.outside.is_empty()
        && call.elsewhere.is_empty()
        && matches!(call.event.as_str(), "PreToolUse" | "PostToolUse")
    {
        return Err(crate::base::error::bad_request(format!(
            "hook input: a {} call names no file it writes; nothing was done",
            call.tool_name.as_deref().unwrap_or("write")
        )));
    }
    let sid = session(tx, &call)?;
    match call.event.as_str() {
        "SessionStart" => {
            // History: agents or notes recorded before this call. A resumed, compacted or
            // cleared CLI session has lost its context: it gets the briefing in any case. A
            // window that starts a new session is told how the last one ended.
            let history = |s: &maos_proto::SessionRecord| {
                s.agents
                    .iter()
                    .any(|a| a.external_session_id.as_deref() != Some(call.session_id.as_str()))
                    || !s.notes.is_empty()
            };
            let here = tx.state().session(&sid).is_some_and(history);
            let again = matches!(call.source.as_deref(), Some("resume" | "compact" | "clear"));
            let w = window(tx, &sid, &call)?;
            watch(tx, &w, &call);
            let last = (!here)
                .then(|| {
                    tx.state()
                        .sessions()
                        .iter()
                        .filter(|s| s.id != sid && history(s))
                        .max_by_key(|s| s.created_at)
                        .map(|s| s.id.clone())
                })
                .flatten();
            let context = match (here, last) {
                (true, _) => super::brief::briefing(tx.state(), &sid, tx.now)
                    .ok()
                    .map(|b| b.text),
                (false, Some(last)) => super::brief::briefing(tx.state(), &last, tx.now)
                    .ok()
                    .map(|b| format!("{LAST_SESSION}\n{}", b.text)),
                (false, None) if again => super::brief::briefing(tx.state(), &sid, tx.now)
                    .ok()
                    .map(|b| b.text),
                (false, None) => None,
            };
            Ok(answer(HookDecision::None, None, context))
        }
        "UserPromptSubmit" => {
            let agent = caller(tx, &sid, &call)?;
            if let Some(res) = &call.subagent {
                // Claude Code's word that a background subagent finished: its result, not a
                // prompt of the person's.
                subagent_done(tx, &sid, &agent, &call, res)?;
                return Ok(answer(HookDecision::None, None, None));
            }
            if let Some(line) = call.summary.as_deref().filter(|l| !l.trim().is_empty()) {
                let line: String = line.trim().chars().take(200).collect();
                let s = tx.session_mut(&sid);
                if is_placeholder_objective(&s.objective) {
                    s.objective = line.clone();
                }
                let a = tx.agent_mut(&agent);
                if a.parent.is_none() && is_placeholder_task(&a.task) {
                    a.task = line.clone();
                }
                tx.lock_event(&agent, "prompt_submitted", json!({ "first_line": line }));
            }
            // A change another agent made to a file this one holds, told once.
            super::violation::settle(tx);
            let waiting = super::violation::notices(tx, &agent);
            Ok(answer(HookDecision::None, None, waiting))
        }
        "PreToolUse" => {
            let agent = caller(tx, &sid, &call)?;
            tx.renew(&agent);
            touch(tx, &agent, &call);
            record_mcp_call(tx, &agent, &call);
            match call.tool_name.as_deref() {
                _ if call.writes_files() => Ok(pre_write(tx, &sid, &agent, &call)),
                _ if call.spawns_subagent() => {
                    request_subagent(tx, &agent, &call);
                    Ok(answer(HookDecision::Allow, None, None))
                }
                _ => Ok(answer(HookDecision::None, None, None)),
            }
        }
        "PostToolUse" => {
            let agent = caller(tx, &sid, &call)?;
            tx.renew(&agent);
            if !call.writes_files() && call.subagent.is_none() {
                // Tools maos hears of only after they ran (their PreToolUse is not matched).
                touch(tx, &agent, &call);
            }
            if call.writes_files() {
                // Size and hash of what the tool sent, never the text itself.
                let (bytes, sha256) = match &call.written {
                    Some(w) => (Some(w.bytes), Some(w.sha256.as_str())),
                    None => (None, None),
                };
                for path in &call.paths {
                    let mut data = json!({ "path": path, "tool": call.tool_name, "bytes": bytes,
                                           "sha256": sha256, "cwd": call.cwd });
                    with_machine(tx, &mut data);
                    tx.lock_event(&agent, "file_modified", data);
                }
            } else if let Some(res) = &call.subagent {
                subagent_done(tx, &sid, &agent, &call, res)?;
            } else if let Some(items) = &call.todos {
                set_todos(tx, &sid, &agent, items.clone());
            } else if call.is_shell() {
                let mut data = json!({ "tool_use_id": call.tool_use_id, "cwd": call.cwd });
                with_machine(tx, &mut data);
                tx.lock_event(&agent, "command_run", data);
            }
            // The files it wrote are its versions; after a shell command, held files another
            // agent changed are violations, told to this model here and to the holder's next.
            let told = super::violation::after(tx, &agent, &call);
            let waiting = super::violation::notices(tx, &agent);
            let context = match (told, waiting) {
                (Some(a), Some(b)) => Some(format!("{a}\n{b}")),
                (a, b) => a.or(b),
            };
            let answer = answer(HookDecision::None, None, context);
            Ok(match call.writes_files() {
                true => radar_told(tx, &agent, &call.paths, answer),
                false => answer,
            })
        }
        "SubagentStart" => {
            caller(tx, &sid, &call)?;
            Ok(answer(HookDecision::None, None, None))
        }
        "SubagentStop" => {
            if call.agent_id.is_some() {
                let agent = caller(tx, &sid, &call)?;
                super::agent::transition(tx, &agent, AgentOp::Complete, None, None)?;
            }
            Ok(answer(HookDecision::None, None, None))
        }
        "Stop" | "PreCompact" => {
            let agent = caller(tx, &sid, &call)?;
            if call.event == "Stop" {
                // The main thread's turn is over: what it was writing is written.
                tx.release_agent(&agent, "stopped its turn");
                tx.checkpoint(&sid, "turn ended (Stop)");
            } else {
                tx.lock_event(
                    &agent,
                    "context_compacted",
                    json!({ "trigger": call.source }),
                );
                let now = tx.now;
                let context = &mut tx.session_mut(&sid).context;
                context.compactions = context.compactions.saturating_add(1);
                context.last_compaction = Some(now);
                context.last_trigger = call.source.clone();
                tx.checkpoint(&sid, "context compacted (PreCompact)");
            }
            Ok(answer(HookDecision::None, None, None))
        }
        "SessionEnd" => {
            let live = find_any(tx, &sid, &call.session_id, None)
                .filter(|w| tx.state().agent(w).is_some_and(|a| !a.state.is_terminal()));
            if let Some(w) = live {
                let why = call.source.as_deref().unwrap_or("other");
                end_window(tx, &w, &format!("the window ended ({why})"))?;
            }
            Ok(answer(HookDecision::None, None, None))
        }
        _ => Ok(answer(HookDecision::None, None, None)),
    }
}

/// An agent's own task list, replaced whole as the CLI (or the MCP progress tool) writes it
/// whole.
pub fn set_todos(tx: &mut Txn<'_>, sid: &SessionId, agent: &AgentId, items: Vec<Todo>) {
    let list = maos_proto::AgentTodos {
        agent: agent.clone(),
        role: None,
        at: tx.now,
        items,
    };
    let counts = json!({ "total": list.items.len(), "completed": list.completed() });
    let todos = &mut tx.session_mut(sid).todos;
    todos.retain(|t| &t.agent != agent);
    todos.push(list);
    tx.lock_event(agent, "todos_updated", counts);
}

/// A call of maos's own MCP server (`mcp__maos__TOOL`) passed this hook: remember whose it
/// is, by its tool use id and by (CLI process, tool, arguments), for `maos mcp` to ask.
fn record_mcp_call(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) {
    let Some(tool) = call
        .tool_name
        .as_deref()
        .and_then(maos_core::mcp::tool_of)
        .filter(|t| maos_core::mcp::asks_for_caller(t))
    else {
        return;
    };
    let key = match (call.process, &call.mcp_args) {
        (Some(process), Some(args)) => Some(ClaimKey {
            process,
            tool: tool.to_string(),
            args: args.clone(),
        }),
        _ => None,
    };
    let now = tx.now;
    tx.mcp_calls()
        .record(call.tool_use_id.clone(), key, agent.clone(), now);
}

/// Whose MCP tool call it is (see [`maos_core::mcp`]): the hook's record by tool use id, else
/// by claim, else `MAOS_AGENT_ID`, else the main agent of the live CLI window whose process
/// runs the server. The agent must be live.
pub fn mcp_caller(
    tx: &mut Txn<'_>,
    tool_use_id: Option<&str>,
    claim: Option<&ClaimKey>,
    maos_agent: Option<&str>,
    window: Option<ProcessRef>,
) -> Result<(AgentId, CallerRule), ErrorBody> {
    let now = tx.now;
    let by_id = tool_use_id.and_then(|id| tx.mcp_calls().take_id(id, now));
    let found = match by_id {
        Some(a) => Some((a, CallerRule::ToolUseId)),
        None => claim
            .and_then(|k| tx.mcp_calls().take_claim(k, now))
            .map(|a| (a, CallerRule::Claim)),
    };
    let found = match (found, maos_agent) {
        (Some(f), _) => Some(f),
        (None, Some(name)) => Some((
            tx.state().resolve_agent(name, None)?.id.clone(),
            CallerRule::Env,
        )),
        (None, None) => window
            .and_then(|p| window_of(tx.state(), p))
            .map(|a| (a, CallerRule::Window)),
    };
    let Some((agent, rule)) = found else {
        return Err(ErrorBody::new(
            maos_proto::ErrorCode::NotFound,
            "maos cannot tell which agent made this call: no hook recorded it, MAOS_AGENT_ID is not set, and no CLI window maos knows runs this MCP server; install maos's hooks in the CLI (`maos install-hooks`) or start the server with MAOS_AGENT_ID",
        ));
    };
    super::lock::live_agent(tx.state(), agent.as_str())?;
    Ok((agent, rule))
}

/// The live main agent of the CLI window whose process is `p`.
fn window_of(st: &State, p: ProcessRef) -> Option<AgentId> {
    st.sessions()
        .iter()
        .filter(|s| !s.state.is_terminal())
        .flat_map(|s| s.agents.iter())
        .filter(|a| a.spec.is_none() && a.parent.is_none() && !a.state.is_terminal())
        .filter(|a| {
            a.window.is_some_and(|w| {
                w.pid == p.pid
                    && (w.start_time.is_none()
                        || p.start_time.is_none()
                        || w.start_time == p.start_time)
            })
        })
        .max_by_key(|a| a.created_at)
        .map(|a| a.id.clone())
}

/// End a window's agent and every live agent under it: their locks go, and a session the
/// hooks made completes once none of its agents lives.
pub fn end_window(tx: &mut Txn<'_>, window: &AgentId, why: &str) -> Result<(), ErrorBody> {
    let Some(sid) = tx.state().agent(window).map(|a| a.session_id.clone()) else {
        return Ok(());
    };
    let mut under = vec![window.clone()];
    let mut i = 0;
    while i < under.len() {
        let parent = under[i].clone();
        if let Some(s) = tx.state().session(&sid) {
            under.extend(
                s.agents
                    .iter()
                    .filter(|a| a.parent.as_ref() == Some(&parent))
                    .map(|a| a.id.clone()),
            );
        }
        i += 1;
    }
    // Children first, so that each ends while its window is still there to name.
    for id in under.iter().rev() {
        if tx.state().agent(id).is_some_and(|a| !a.state.is_terminal()) {
            let reason = if id == window {
                why.to_string()
            } else {
                format!("its window {} ended", window.short())
            };
            super::agent::transition(tx, id, AgentOp::End, None, Some(reason))?;
        }
    }
    settle(tx, &sid);
    Ok(())
}

/// A session the hooks made completes when its last agent ended; one a person or a plan made
/// is theirs to end.
fn settle(tx: &mut Txn<'_>, sid: &SessionId) {
    let done = tx.state().session(sid).is_some_and(|s| {
        s.by_hooks && !s.state.is_terminal() && s.agents.iter().all(|a| a.state.is_terminal())
    });
    if done {
        super::session::apply_session(
            tx,
            sid,
            SessionOp::Complete,
            SessionState::Completed,
            Some("every window ended".to_string()),
            None,
        );
        tx.checkpoint(sid, "every window ended");
    }
}

/// End the windows whose CLI process is gone without a SessionEnd (Codex never sends one; a
/// killed CLI cannot): at start and at every sweep. One look at `/proc` per live window, of
/// this machine's windows only: in a fleet another machine's pid means nothing here, and its
/// own daemon watches it.
pub fn end_lost_windows(tx: &mut Txn<'_>) -> Result<usize, ErrorBody> {
    let here = tx.state().machine.clone();
    let watched: Vec<(AgentId, maos_core::record::ProcessRef)> = tx
        .state()
        .sessions()
        .iter()
        .filter(|s| !s.state.is_terminal())
        .flat_map(|s| s.agents.iter())
        .filter(|a| a.spec.is_none() && !a.state.is_terminal() && a.machine == here)
        .filter_map(|a| Some((a.id.clone(), a.window?)))
        .collect();
    let mut ended = 0;
    for (id, p) in watched {
        if !crate::proc::procs::alive(p.pid, p.start_time) {
            let why = format!("its CLI process {} is gone", p.pid);
            end_window(tx, &id, &why)?;
            ended += 1;
        }
    }
    Ok(ended)
}

/// " by ana: review the schema first", from a pause's record (empty without one).
fn pause_why(p: Option<&maos_proto::PauseInfo>) -> String {
    match p.map(|p| (p.by.as_deref(), p.reason.as_deref())) {
        Some((Some(by), Some(r))) => format!(" by {by}: {}", collapse_and_clip(r, 300)),
        Some((None, Some(r))) => format!(": {}", collapse_and_clip(r, 300)),
        Some((Some(by), None)) => format!(" by {by}"),
        _ => String::new(),
    }
}
