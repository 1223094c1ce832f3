//! Managed sessions: sessions made from a plan, whose agents maos starts, watches and restarts.
//!
//! The decisions are the pure scheduler's (`maos_core::schedule`); this module turns them into
//! state changes and process effects ([`crate::run::Effect`]), which the actor carries out
//! after the commit. Process exits come back as [`AgentExit`] reports from the supervisors,
//! also after a daemon restart (recovery applies the `exit.json` they leave behind).

use std::path::Path;

use maos_core::plan::{self, Plan};
use maos_core::recovery::{self, ExitFile, Fate};
use maos_core::schedule::{self, Action, Node};
use maos_core::{AgentId, AgentOp, AgentState, PhaseOp, SessionId, SessionOp, SessionState};
use maos_proto::{
    AgentExit, AgentRecord, ErrorBody, ErrorCode, ProcessInfo, RecoveryReport, SessionRecovery,
};
use serde_json::json;

use crate::error::bad_request as bad;
use crate::run::{Effect, Launch, Runner, Started};
use crate::state::Txn;

/// Most scheduler rounds per session and commit (a plan has at most this many steps to take
/// at once; the guard only stops a bug from spinning the actor).
const MAX_ROUNDS: usize = 10_000;

/// `maos run PLAN` / `maos session create --plan PLAN`: the plan's session with its phases and
/// agents, in one commit. A wrong plan is refused with the file, line and reason, and nothing
/// is created.
pub fn from_plan(
    tx: &mut Txn<'_>,
    path: &str,
    text: &str,
    start: bool,
) -> Result<SessionId, ErrorBody> {
    let plan = plan::parse(text)
        .map_err(|e| bad(format!("{path}:{}:{}: {}", e.line, e.column, e.message)))?;
    create(tx, path, plan, start)
}

fn create(tx: &mut Txn<'_>, path: &str, plan: Plan, start: bool) -> Result<SessionId, ErrorBody> {
    plan.validate().map_err(|e| bad(format!("{path}: {e}")))?;
    let sid = super::session::create(
        tx,
        plan.objective.clone(),
        plan.strategy,
        plan.phases.clone(),
    )?;
    tx.session_mut(&sid).policy = Some(plan.policy.clone());
    let mut ids: Vec<(String, AgentId)> = Vec::with_capacity(plan.agents.len());
    for spec in &plan.agents {
        let mut deps: Vec<AgentId> = spec
            .depends_on
            .iter()
            .filter_map(|d| ids.iter().find(|(n, _)| n == d))
            .map(|(_, id)| id.clone())
            .collect();
        deps.dedup();
        // Dependencies may name agents later in the file (adaptive plans): those edges are
        // added once every agent exists.
        let id =
            super::agent::register(tx, &sid, spec.role.clone(), spec.task.clone(), deps, None)?;
        let uses_claude = plan::uses(&spec.command, "claude_session_id")
            || spec
                .resume_command
                .as_deref()
                .is_some_and(|r| plan::uses(r, "claude_session_id"));
        let a = tx.agent_mut(&id);
        a.spec = Some(Box::new(spec.clone()));
        if uses_claude {
            // Given to the agent (`--session-id {claude_session_id}`) and kept for resume.
            a.external_session_id = Some(uuid::Uuid::new_v4().to_string());
        }
        ids.push((spec.name.clone(), id));
    }
    for (spec, (_, id)) in plan.agents.iter().zip(&ids) {
        let all: Vec<AgentId> = spec
            .depends_on
            .iter()
            .filter_map(|d| ids.iter().find(|(n, _)| n == d).map(|(_, i)| i.clone()))
            .collect();
        if all.len() != tx.state().agent(id).map_or(0, |a| a.depends_on.len()) {
            tx.agent_mut(id).depends_on = all;
        }
    }
    tx.event(
        Some(&sid),
        None,
        "plan_loaded",
        json!({ "path": path, "agents": ids.len(), "phases": plan.phases.len(),
                "strategy": plan.strategy, "policy": plan.policy }),
    );
    tx.checkpoint(&sid, "plan loaded");
    if start {
        super::session::transition(tx, &sid, SessionOp::Start, None, None)?;
        // The first agents start in this commit, so the answer shows them running.
        let runner = runner(tx)?;
        schedule(tx, &sid, &runner);
    }
    Ok(sid)
}

/// How this project starts agents.
pub fn runner(tx: &Txn<'_>) -> Result<Runner, ErrorBody> {
    tx.state().runner.clone().ok_or_else(|| {
        ErrorBody::new(
            ErrorCode::Internal,
            "this daemon cannot start agents (no runner)",
        )
    })
}

/// Whether maos schedules this session (it was made from a plan).
fn managed(tx: &Txn<'_>, sid: &SessionId) -> bool {
    tx.state()
        .session(sid)
        .is_some_and(|s| runs_here(tx.state(), s))
}

/// A live managed session this daemon runs: its plan's agents were registered on this
/// daemon's machine. In a fleet only that daemon schedules, recovers and sweeps them (their
/// processes are its machine's); the others see them and change nothing of their running.
fn runs_here(st: &crate::state::State, s: &maos_core::record::SessionRecord) -> bool {
    s.policy.is_some()
        && !s.state.is_terminal()
        && s.agents
            .iter()
            .all(|a| a.spec.is_none() || a.machine == st.machine)
}

/// Run the scheduler for every managed session this transaction touched, applying its actions
/// until it has nothing more to do. Most batches (hook calls, locks) touch no managed session
/// and cost only the check.
pub fn schedule_touched(tx: &mut Txn<'_>) {
    let sids: Vec<SessionId> = tx
        .touched_sessions()
        .into_iter()
        .filter(|sid| managed(tx, sid))
        .collect();
    schedule_each(tx, sids);
}

/// Run the scheduler for every live managed session (after recovery at start).
pub fn schedule_all(tx: &mut Txn<'_>) {
    let live: Vec<SessionId> = tx
        .state()
        .sessions()
        .iter()
        .filter(|s| runs_here(tx.state(), s))
        .map(|s| s.id.clone())
        .collect();
    schedule_each(tx, live);
}

fn schedule_each(tx: &mut Txn<'_>, sids: Vec<SessionId>) {
    if sids.is_empty() {
        return;
    }
    let Ok(runner) = runner(tx) else {
        return;
    };
    for sid in sids {
        // One session's steps are all or nothing: a panic leaves it as it was, and the other
        // sessions still take theirs.
        if tx
            .atomic(|tx| {
                schedule(tx, &sid, &runner);
                Ok::<(), ()>(())
            })
            .is_err()
        {
            tracing::error!(session = %sid, "the scheduler panicked; the session was left as it was");
        }
    }
}

/// Whether the agent's plan phase is paused (`maos phase pause`).
fn in_paused_phase(s: &maos_proto::SessionRecord, a: &maos_core::record::AgentRecord) -> bool {
    a.spec
        .as_ref()
        .and_then(|x| x.phase)
        .and_then(|i| s.workflow.phases.get(i as usize))
        .is_some_and(|ph| s.paused_phases.contains(&ph.name))
}

fn nodes(s: &maos_proto::SessionRecord) -> Vec<Node> {
    s.agents
        .iter()
        .map(|a| Node {
            state: a.state,
            paused: a.paused || in_paused_phase(s, a),
            managed: a.spec.is_some(),
            deps: a
                .depends_on
                .iter()
                .filter_map(|d| s.agents.iter().position(|x| &x.id == d))
                .collect(),
            phase: a.spec.as_ref().and_then(|p| p.phase),
            stage: a.spec.as_ref().and_then(|p| p.stage),
        })
        .collect()
}

pub fn schedule(tx: &mut Txn<'_>, sid: &SessionId, runner: &Runner) {
    for _ in 0..MAX_ROUNDS {
        let Some(s) = tx.state().session(sid) else {
            return;
        };
        let Some(policy) = s.policy.clone() else {
            return;
        };
        let ns = nodes(s);
        let phases: Vec<_> = s.workflow.phases.iter().map(|p| p.state).collect();
        let ids: Vec<AgentId> = s.agents.iter().map(|a| a.id.clone()).collect();
        let actions = schedule::step(&schedule::Snapshot {
            strategy: s.strategy,
            policy: &policy,
            session: s.state,
            phases: &phases,
            nodes: &ns,
        });
        if actions.is_empty() {
            return;
        }
        for action in actions {
            if let Err(e) = apply(tx, sid, &ids, action, runner) {
                // A refused step would be refused again: record it and stop this session's
                // scheduling for this commit instead of spinning.
                tracing::warn!(session = %sid, error = %e.message, "scheduler step refused");
                tx.event(
                    Some(sid),
                    None,
                    "schedule_error",
                    json!({ "error": e.message }),
                );
                return;
            }
        }
    }
    tracing::error!(session = %sid, "scheduler did not settle; stopped");
}

fn apply(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    ids: &[AgentId],
    action: Action,
    runner: &Runner,
) -> Result<(), ErrorBody> {
    let agent = |i: usize| {
        ids.get(i)
            .cloned()
            .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "scheduler index out of range"))
    };
    // The scheduler names agents by index (`#2`); people read names.
    let named = |tx: &Txn<'_>, reason: &str| {
        schedule::name_agents(reason, |i| {
            let a = tx.state().agent(ids.get(i)?)?;
            Some(
                a.spec
                    .as_ref()
                    .map_or_else(|| a.role.clone(), |s| s.name.clone()),
            )
        })
    };
    match action {
        Action::Start(i) => {
            let id = agent(i)?;
            super::agent::transition(tx, &id, AgentOp::Start, None, None)?;
            launch(tx, &id, runner, false)?;
        }
        Action::Cancel(i, reason) => {
            let id = agent(i)?;
            let reason = named(tx, &reason);
            super::agent::transition(tx, &id, AgentOp::Cancel, None, Some(reason))?;
        }
        Action::StartPhase(idx) => {
            let p = (idx + 1).to_string();
            super::phase::transition(tx, sid, Some(&p), PhaseOp::Start, serde_json::Value::Null)?;
        }
        Action::CompletePhase(idx) => {
            let p = (idx + 1).to_string();
            let done: Vec<String> = tx
                .state()
                .session(sid)
                .map(|s| {
                    s.agents
                        .iter()
                        .filter(|a| a.spec.as_ref().and_then(|x| x.phase) == Some(idx as u32))
                        .map(|a| a.role.clone())
                        .collect()
                })
                .unwrap_or_default();
            super::phase::transition(
                tx,
                sid,
                Some(&p),
                PhaseOp::Complete,
                json!({ "agents": done }),
            )?;
            tx.checkpoint(sid, &format!("phase {} completed", idx + 1));
            // Completing the last phase completes the session.
            if tx
                .state()
                .session(sid)
                .is_some_and(|s| s.state == SessionState::Completed)
            {
                tx.checkpoint(sid, "session completed");
            }
        }
        Action::CompleteSession => {
            super::session::transition(
                tx,
                sid,
                SessionOp::Complete,
                Some("every agent completed".into()),
                None,
            )?;
            tx.checkpoint(sid, "session completed");
        }
        Action::FailSession(reason) => {
            let reason = named(tx, &reason);
            super::session::transition(tx, sid, SessionOp::Fail, Some(reason), None)?;
            tx.checkpoint(sid, "session failed");
        }
    }
    Ok(())
}

/// Start one attempt of a managed agent (its command, or its resume command).
fn launch(tx: &mut Txn<'_>, id: &AgentId, runner: &Runner, resume: bool) -> Result<(), ErrorBody> {
    let a = tx
        .state()
        .agent(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::Internal, "agent vanished"))?;
    let spec = a
        .spec
        .clone()
        .ok_or_else(|| bad(format!("agent {id} has no command: maos does not start it")))?;
    let attempt = a.attempts + 1;
    let template = match (resume, &spec.resume_command) {
        (true, Some(r)) => r.clone(),
        _ => spec.command.clone(),
    };
    let root = Path::new(&runner.root);
    let cwd = crate::run::workdir(root, spec.workdir.as_deref());
    let (sid, task, role, claude) = (
        a.session_id.clone(),
        a.task.clone(),
        a.role.clone(),
        a.external_session_id.clone(),
    );
    let cwd_text = cwd.display().to_string();
    let argv = plan::expand(&template, |k| match k {
        "task" => Some(task.clone()),
        "agent_id" => Some(id.to_string()),
        "session_id" => Some(sid.to_string()),
        "claude_session_id" => claude.clone(),
        "workdir" => Some(cwd_text.clone()),
        "name" => Some(spec.name.clone()),
        "role" => Some(role.clone()),
        "attempt" => Some(attempt.to_string()),
        _ => None,
    })
    .map_err(|e| bad(format!("agent {}: {e}", spec.name)))?;
    let mut env: Vec<(String, String)> = spec.env.clone().into_iter().collect();
    env.push(("MAOS_SESSION_ID".into(), sid.to_string()));
    env.push(("MAOS_AGENT_ID".into(), id.to_string()));
    env.push(("MAOS_SOCKET".into(), runner.socket.display().to_string()));
    env.push(("MAOS_PROJECT".into(), runner.root.clone()));
    let a = tx.agent_mut(id);
    a.attempts = attempt;
    a.process = None;
    tx.launching(id);
    tx.event(
        Some(&sid),
        Some(id),
        "agent_launching",
        json!({ "attempt": attempt, "argv": argv, "resume": resume,
                "cwd": cwd_text }),
    );
    tx.effect(Effect::Launch(Launch {
        agent: id.clone(),
        attempt,
        argv,
        env,
        cwd,
        dir: runner.agent_dir(id),
    }));
    Ok(())
}

/// The supervisor answered (after the commit that asked for the start).
pub fn started(
    tx: &mut Txn<'_>,
    id: &AgentId,
    attempt: u32,
    result: Started,
) -> Result<(), ErrorBody> {
    let runner = &runner(tx)?;
    let Some(a) = tx.state().agent(id) else {
        return Ok(());
    };
    if a.attempts != attempt {
        return Ok(());
    }
    let (state, sid) = (a.state, a.session_id.clone());
    match result {
        Started::Running {
            pid,
            start_time,
            supervisor,
        } => {
            tx.launched(id);
            tx.event(
                Some(&sid),
                Some(id),
                "agent_process_started",
                json!({ "pid": pid, "attempt": attempt }),
            );
            if state.is_terminal() {
                // It ended before this answer came (an exit reported first, or a cancel while
                // it was starting): never record the process; make sure it is gone.
                let grace = grace_of(tx, &sid);
                terminate(tx, pid, start_time, grace);
                return Ok(());
            }
            let now = tx.now;
            tx.agent_mut(id).process = Some(ProcessInfo {
                pid,
                start_time,
                started_at: now,
                supervisor,
            });
            // Paused while it was starting (itself, its session or its phase): the pause
            // found no process to stop then, so it is stopped now.
            let held_now = match (tx.state().session(&sid), tx.state().agent(id)) {
                (Some(s), Some(a)) => held(s, a),
                _ => false,
            };
            if held_now {
                tx.effect(Effect::Signal {
                    pgid: pid,
                    sig: libc::SIGSTOP,
                });
            }
        }
        Started::Failed(message) => {
            tx.launched(id);
            let exit = AgentExit {
                agent: id.to_string(),
                pid: 0,
                start_time: None,
                code: Some(127),
                signal: None,
                ended_at: tx.now,
                claude_session_id: None,
            };
            tx.event(
                Some(&sid),
                Some(id),
                "agent_start_failed",
                json!({ "attempt": attempt, "error": message }),
            );
            ended(tx, id, exit, runner)?;
        }
    }
    Ok(())
}

/// A managed agent's process ended: retry it if its policy allows, else complete or fail it.
/// Reports about an earlier attempt, or an agent that already ended, change nothing.
pub fn exited(tx: &mut Txn<'_>, exit: AgentExit) -> Result<(), ErrorBody> {
    let runner = &runner(tx)?;
    let a = tx.state().resolve_agent(&exit.agent, None)?;
    let id = a.id.clone();
    let current = a.process.as_ref().map(|p| p.pid);
    if a.state.is_terminal() || (exit.pid != 0 && current.is_some_and(|p| p != exit.pid)) {
        return Ok(());
    }
    ended(tx, &id, exit, runner)
}

fn ended(
    tx: &mut Txn<'_>,
    id: &AgentId,
    exit: AgentExit,
    runner: &Runner,
) -> Result<(), ErrorBody> {
    let Some(a) = tx.state().agent(id) else {
        return Ok(());
    };
    let sid = a.session_id.clone();
    let retries = match (
        &a.spec,
        tx.state().session(&sid).and_then(|s| s.policy.as_ref()),
    ) {
        (Some(spec), Some(policy)) => spec.retries(policy),
        _ => 0,
    };
    let attempts = a.attempts;
    let a = tx.agent_mut(id);
    a.process = None;
    if let Some(c) = &exit.claude_session_id {
        a.external_session_id = Some(c.clone());
    }
    tx.event(
        Some(&sid),
        Some(id),
        "agent_process_exited",
        json!({ "pid": exit.pid, "code": exit.code, "signal": exit.signal,
                "attempt": attempts, "claude_session_id": exit.claude_session_id }),
    );
    let failed = exit.code != Some(0);
    // Only maos's own attempts are retried (an agent started by hand has none).
    let retry = tx
        .state()
        .agent(id)
        .is_some_and(|a| a.state == AgentState::Running && a.spec.is_some())
        && attempts >= 1
        && schedule::should_retry(attempts, retries);
    if failed && retry {
        tx.event(
            Some(&sid),
            Some(id),
            "agent_retry",
            json!({ "attempt": attempts + 1, "of": retries + 1 }),
        );
        return launch(tx, id, runner, false);
    }
    let (op, reason) = match (exit.code, exit.signal) {
        (Some(0), _) => (AgentOp::Complete, None),
        (Some(c), _) => (AgentOp::Fail, Some(format!("exited with code {c}"))),
        (None, Some(sig)) => (AgentOp::Fail, Some(format!("killed by signal {sig}"))),
        (None, None) => (AgentOp::Fail, Some("ended without a status".into())),
    };
    super::agent::transition(tx, id, op, exit.code, reason)?;
    let name = tx
        .state()
        .agent(id)
        .and_then(|a| a.spec.as_ref())
        .map_or_else(|| id.to_string(), |s| s.name.clone());
    let outcome = if failed { "failed" } else { "completed" };
    tx.checkpoint(&sid, &format!("agent {name} {outcome}"));
    Ok(())
}

/// An agent whose process still runs ended by decision (cancelled, failed by hand, its session
/// ended): terminate its process group, then kill it after the grace period.
pub fn stop_process(tx: &mut Txn<'_>, id: &AgentId) {
    let Some(a) = tx.state().agent(id) else {
        return;
    };
    let Some(p) = own_process(tx, a) else {
        return;
    };
    let grace = grace_of(tx, &a.session_id.clone());
    terminate(tx, p.pid, p.start_time, grace);
}

fn grace_of(tx: &Txn<'_>, sid: &SessionId) -> u64 {
    tx.state()
        .session(sid)
        .map_or(plan::DEFAULT_GRACE_MS, grace)
}

/// How long a session's agents get between SIGTERM and SIGKILL.
fn grace(s: &maos_proto::SessionRecord) -> u64 {
    s.policy
        .as_ref()
        .map_or(plan::DEFAULT_GRACE_MS, |p| p.grace_ms)
}

/// SIGTERM to the group, then SIGKILL after the grace period.
fn terminate(tx: &mut Txn<'_>, pid: u32, start_time: Option<u64>, grace_ms: u64) {
    for e in termination(pid, start_time, grace_ms) {
        tx.effect(e);
    }
}

fn termination(pid: u32, start_time: Option<u64>, grace_ms: u64) -> [Effect; 3] {
    [
        Effect::Signal {
            pgid: pid,
            sig: libc::SIGTERM,
        },
        // A stopped (paused) process only acts on SIGTERM once continued.
        Effect::Signal {
            pgid: pid,
            sig: libc::SIGCONT,
        },
        Effect::KillAfter {
            pgid: pid,
            start_time,
            after: std::time::Duration::from_millis(grace_ms),
        },
    ]
}

/// Whether the agent is held: it, its session or its phase is paused.
fn held(s: &maos_proto::SessionRecord, a: &AgentRecord) -> bool {
    a.paused || s.state == SessionState::Paused || in_paused_phase(s, a)
}

/// Whether the agent's process should be stopped: it runs, and it is held.
fn held_stopped(s: &maos_proto::SessionRecord, a: &AgentRecord) -> bool {
    a.state == AgentState::Running && held(s, a)
}

/// In a fleet, what this daemon does to its own machine's processes once another daemon
/// changed their agents (`changed`: the sessions as PostgreSQL now holds them, `st` as this
/// daemon knew them): a process whose agent ended there is terminated, one that was paused
/// there is stopped, one resumed there is continued. The daemon that recorded the change
/// could not signal them: their pids are this machine's.
pub fn catch_up(st: &crate::state::State, changed: &[maos_proto::SessionRecord]) -> Vec<Effect> {
    let mut out = Vec::new();
    if st.machine.is_none() {
        return out;
    }
    for s in changed {
        let Some(old) = st.session(&s.id) else {
            continue;
        };
        for a in s.agents.iter().filter(|a| a.machine == st.machine) {
            let Some(was) = old.agents.iter().find(|x| x.id == a.id) else {
                continue;
            };
            let Some(p) = &was.process else {
                continue;
            };
            if !was.state.is_terminal() && a.state.is_terminal() {
                out.extend(termination(p.pid, p.start_time, grace(s)));
                continue;
            }
            let sig = match (held_stopped(old, was), held_stopped(s, a)) {
                (false, true) => libc::SIGSTOP,
                (true, false) => libc::SIGCONT,
                _ => continue,
            };
            out.push(Effect::Signal { pgid: p.pid, sig });
        }
    }
    out
}

/// This daemon's managed processes as their records say they should be: stopped while their
/// agent is held, running otherwise. [`catch_up`] signals a change made through another
/// daemon when it reads it; this is the sweep's check that nothing was missed, whatever the
/// way (a change made while this daemon was down is already in the records it loads, with no
/// change left to see). `stopped(pid, start_time)`: whether that process is stopped now
/// (`None`: gone, or not known on this platform; left alone).
pub fn hold_as_recorded(
    st: &crate::state::State,
    stopped: impl Fn(u32, Option<u64>) -> Option<bool>,
) -> Vec<Effect> {
    let mut out = Vec::new();
    for s in st.sessions().iter().filter(|s| runs_here(st, s)) {
        for a in &s.agents {
            let Some(p) = &a.process else {
                continue;
            };
            if a.spec.is_none() || a.state != AgentState::Running || st.is_launching(&a.id) {
                continue;
            }
            let want = held_stopped(s, a);
            if stopped(p.pid, p.start_time) == Some(!want) {
                let sig = if want { libc::SIGSTOP } else { libc::SIGCONT };
                out.push(Effect::Signal { pgid: p.pid, sig });
            }
        }
    }
    out
}

/// A managed agent whose process would be started here must run on this daemon's machine:
/// in a fleet, another machine's plan is started (and resumed) by its own daemon.
fn starts_here(tx: &Txn<'_>, id: &AgentId) -> Result<(), ErrorBody> {
    match tx.state().agent(id) {
        Some(a) if a.machine != tx.state().machine => Err(ErrorBody::new(
            ErrorCode::InvalidTransition,
            format!(
                "agent {} runs on {}: start or resume it through that machine's daemon",
                a.id,
                a.machine.as_deref().unwrap_or("another machine")
            ),
        )),
        _ => Ok(()),
    }
}

/// Pause or continue the processes of these agents (those that have one).
pub fn signal_agents(tx: &mut Txn<'_>, agents: &[AgentId], pause: bool) {
    let sig = if pause { libc::SIGSTOP } else { libc::SIGCONT };
    for id in agents {
        if let Some(p) = tx.state().agent(id).and_then(|a| own_process(tx, a)) {
            tx.effect(Effect::Signal { pgid: p.pid, sig });
        }
    }
}

/// The agent's process when it runs on this daemon's machine. In a fleet another machine's
/// pid means nothing here (it may be an unrelated process): such an agent's change is
/// recorded, and its process is not signalled from here.
fn own_process(tx: &Txn<'_>, a: &maos_core::record::AgentRecord) -> Option<ProcessInfo> {
    if a.machine != tx.state().machine {
        return None;
    }
    a.process.clone()
}

/// `maos agent start|complete|...` by hand. Starting (or resuming) an agent that maos runs
/// also starts its process; anything else is the plain transition (which stops a running
/// process when the agent ends).
pub fn agent_op(
    tx: &mut Txn<'_>,
    id: &AgentId,
    op: AgentOp,
    exit_code: Option<i32>,
    reason: Option<String>,
) -> Result<(), ErrorBody> {
    let a = tx
        .state()
        .agent(id)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no agent {id}")))?;
    let (id, managed, state) = (a.id.clone(), a.spec.is_some(), a.state);
    if managed && matches!(op, AgentOp::Start | AgentOp::Resume) {
        starts_here(tx, &id)?;
        if state == AgentState::Resumable {
            resume_agent(tx, &id)?;
        } else {
            let runner = runner(tx)?;
            super::agent::transition(tx, &id, op, exit_code, reason)?;
            launch(tx, &id, &runner, false)?;
        }
        return Ok(());
    }
    super::agent::transition(tx, &id, op, exit_code, reason)
}

/// `maos retry SESSION|AGENT`: a new attempt of what failed. For a session: every failed or
/// cancelled agent of its plan. For an agent (failed or cancelled): it, and the agents
/// cancelled because of it (those that depend on it; in a session that ended, every
/// cancelled one, which its end cancelled). They become pending, a failed session runs again,
/// a failed phase is started again, and the scheduler starts them as their dependencies
/// allow. Each attempt counts on (`attempts`): a retry is one more attempt after the plan's
/// own `retries` were used up. Returns the agents retried.
pub fn retry(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    agent: Option<&AgentId>,
    by: Option<String>,
) -> Result<Vec<AgentId>, ErrorBody> {
    let runner = runner(tx)?;
    let s = tx
        .state()
        .session(sid)
        .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no session {sid}")))?;
    let short = s.id.short().to_string();
    if s.policy.is_none() {
        return Err(bad(format!(
            "session {short} was not run from a plan: maos starts none of its agents, so it has nothing to run again"
        )));
    }
    let next = s.state.retry().map_err(|e| {
        crate::error::invalid(format!(
            "session {short}: {e}; only a failed session, or a failed agent of a live one, is retried"
        ))
    })?;
    let ended = s.state.is_terminal();
    let name_of = |a: &AgentRecord| {
        a.spec
            .as_ref()
            .map_or_else(|| a.role.clone(), |x| x.name.clone())
    };
    let mut again: Vec<AgentId> = match agent {
        Some(id) => {
            let a = tx
                .state()
                .agent(id)
                .ok_or_else(|| ErrorBody::new(ErrorCode::NotFound, format!("no agent {id}")))?;
            if a.spec.is_none() {
                return Err(bad(format!(
                    "agent {} ({}) is not a managed agent: maos did not start it, so it cannot run it again",
                    a.id.short(),
                    a.role
                )));
            }
            a.state.retry().map_err(|e| {
                crate::error::invalid(format!(
                    "agent {}: {e}; only a failed or cancelled agent is retried",
                    name_of(a)
                ))
            })?;
            vec![a.id.clone()]
        }
        None => s
            .agents
            .iter()
            .filter(|a| {
                a.spec.is_some() && matches!(a.state, AgentState::Failed | AgentState::Cancelled)
            })
            .map(|a| a.id.clone())
            .collect(),
    };
    if agent.is_some() {
        // The agents cancelled because of it, to a fixed point (dependents of dependents).
        loop {
            let more: Vec<AgentId> = s
                .agents
                .iter()
                .filter(|a| {
                    a.spec.is_some()
                        && a.state == AgentState::Cancelled
                        && !again.contains(&a.id)
                        && (ended || a.depends_on.iter().any(|d| again.contains(d)))
                })
                .map(|a| a.id.clone())
                .collect();
            if more.is_empty() {
                break;
            }
            again.extend(more);
        }
    }
    if again.is_empty() {
        return Err(crate::error::invalid(format!(
            "session {short} has no failed or cancelled agent to retry"
        )));
    }
    let names: Vec<String> = again
        .iter()
        .filter_map(|id| tx.state().agent(id).map(name_of))
        .collect();
    tx.checkpoint(sid, "before retry");
    if ended {
        let now = tx.now;
        let rec = tx.session_mut(sid);
        rec.state = next;
        rec.ended_at = None;
        rec.updated_at = now;
        tx.event(
            Some(sid),
            None,
            "session_retried",
            json!({ "by": by, "agents": names }),
        );
    }
    for id in &again {
        let now = tx.now;
        let a = tx.agent_mut(id);
        a.state = AgentState::Pending;
        a.ended_at = None;
        a.exit_code = None;
        a.process = None;
        a.paused = false;
        a.pause = None;
        a.updated_at = now;
        let attempts = a.attempts;
        tx.event(
            Some(sid),
            Some(id),
            "agent_retried",
            json!({ "by": by, "attempts_before": attempts }),
        );
    }
    // A phase that failed (with the session, or at its boundary) runs again.
    let failed_phase = tx.state().session(sid).is_some_and(|s| {
        s.state == SessionState::Running
            && s.workflow
                .current()
                .and_then(|i| s.workflow.phases.get(i))
                .is_some_and(|p| p.state == maos_core::PhaseState::Failed)
    });
    if failed_phase {
        super::phase::transition(tx, sid, None, PhaseOp::Start, serde_json::Value::Null)?;
    }
    schedule(tx, sid, &runner);
    Ok(again)
}

/// `maos resume` of an interrupted managed agent: run its resume command (or its command).
pub fn resume_agent(tx: &mut Txn<'_>, id: &AgentId) -> Result<(), ErrorBody> {
    starts_here(tx, id)?;
    let runner = runner(tx)?;
    super::agent::transition(tx, id, AgentOp::Resume, None, None)?;
    launch(tx, id, &runner, true)
}

/// The agent's process runs, or its supervisor does (the exit is then still to be reported:
/// the supervisor reaps the agent before it writes `exit.json`).
pub fn live_process(process: Option<&ProcessInfo>) -> bool {
    process.is_some_and(|p| {
        crate::procs::alive(p.pid, p.start_time)
            || p.supervisor.is_some_and(|s| crate::procs::alive(s, None))
    })
}

/// Can it be resumed after its process was lost: a resume command and a Claude session id.
fn resumable(a: &AgentRecord) -> bool {
    a.spec.as_ref().is_some_and(|s| s.resume_command.is_some()) && a.external_session_id.is_some()
}

/// Reconcile managed sessions with their processes: at daemon start for every live session,
/// and on `maos recover [SESSION]`. Agents whose process lives are re-adopted (their
/// supervisor reports to this daemon); ended ones get the exit their supervisor recorded;
/// dead ones without a record become resumable when they can be resumed (a resume command and
/// a Claude session id), else failed.
pub fn recover(tx: &mut Txn<'_>, session: Option<&str>) -> Result<RecoveryReport, ErrorBody> {
    let runner = &runner(tx)?;
    let targets: Vec<SessionId> = match session {
        Some(name) => vec![tx.state().resolve_session(Some(name))?.id.clone()],
        None => tx
            .state()
            .sessions()
            .iter()
            .filter(|s| runs_here(tx.state(), s))
            .map(|s| s.id.clone())
            .collect(),
    };
    // What recovery needs of each running managed agent (not the whole record), all sessions
    // in one list, and how many of them each session has.
    let mut found = Vec::new();
    let mut counts = Vec::with_capacity(targets.len());
    for sid in &targets {
        let before = found.len();
        if let Some(s) = tx.state().session(sid) {
            found.extend(
                s.agents
                    .iter()
                    .filter(|a| a.spec.is_some() && a.state == AgentState::Running)
                    .map(|a| Found {
                        id: a.id.clone(),
                        process: a.process.clone(),
                        can_resume: resumable(a),
                    }),
            );
        }
        counts.push(found.len() - before);
    }
    // Every process and file looked at up front, in parallel: at start-up there can be
    // thousands, and each look is a few system calls spent mostly waiting.
    let t0 = std::time::Instant::now();
    let seen = crate::procs::par_map(&found, |f| look(f, &runner.project_dir));
    tracing::debug!(
        agents = seen.len(),
        ms = t0.elapsed().as_secs_f64() * 1e3,
        "recovery looked at the processes"
    );
    let mut looked = found.into_iter().zip(seen);
    let mut report = RecoveryReport::default();
    for (sid, n) in targets.iter().zip(counts) {
        let agents = looked.by_ref().take(n).collect();
        report
            .sessions
            .push(recover_session(tx, sid, agents, runner)?);
    }
    Ok(report)
}

/// Reconcile, between starts, the sessions that have a running managed agent whose process and
/// supervisor are both gone while no launch of it is under way: its exit was lost on the way
/// (the supervisor was killed, gave up reporting, or speaks an older protocol than a daemon
/// that replaced its own). Recovery then applies the recorded exit, or fails the agent (or
/// makes it resumable). When nothing is lost this changes nothing: one look at `/proc` per
/// running agent.
pub fn sweep(tx: &mut Txn<'_>) -> Result<RecoveryReport, ErrorBody> {
    let Some(runner) = tx.state().runner.clone() else {
        return Ok(RecoveryReport::default());
    };
    // (session, process) of every running managed agent not being launched; looked at in
    // parallel, as at start, so that a project with thousands of agents is not held up.
    let running: Vec<(SessionId, Option<ProcessInfo>)> = tx
        .state()
        .sessions()
        .iter()
        .filter(|s| runs_here(tx.state(), s))
        .flat_map(|s| {
            s.agents
                .iter()
                .filter(|a| {
                    a.spec.is_some()
                        && a.state == AgentState::Running
                        && !tx.state().is_launching(&a.id)
                })
                .map(|a| (s.id.clone(), a.process.clone()))
        })
        .collect();
    let live = crate::procs::par_map(&running, |(_, p)| live_process(p.as_ref()));
    let mut lost: Vec<SessionId> = Vec::new();
    for ((sid, _), live) in running.iter().zip(live) {
        if !live && !lost.contains(sid) {
            lost.push(sid.clone());
        }
    }
    let mut report = RecoveryReport::default();
    for sid in lost {
        tracing::info!(project_dir = %runner.project_dir.display(), session = %sid, "a managed agent's process ended without a report: recovering its session");
        report
            .sessions
            .extend(recover(tx, Some(sid.as_str()))?.sessions);
    }
    Ok(report)
}

/// A running managed agent as recovery found it in the state.
struct Found {
    id: AgentId,
    process: Option<ProcessInfo>,
    can_resume: bool,
}

/// What recovery found of a running managed agent's process.
struct Looked {
    seen: recovery::Seen,
    /// The exit its supervisor recorded for its current process.
    exit: Option<maos_proto::AgentExit>,
    /// Why its exit file could not be read.
    unreadable: Option<String>,
}

/// Look at an agent's process, then its supervisor, then its exit file: in this order, so
/// that an exit the supervisor records meanwhile is seen (it writes the file, then ends).
fn look(f: &Found, project_dir: &std::path::Path) -> Looked {
    let process = f.process.as_ref();
    let mut looked = Looked {
        seen: recovery::Seen::Running,
        exit: None,
        unreadable: None,
    };
    if process.is_some_and(|p| crate::procs::alive(p.pid, p.start_time)) {
        return looked;
    }
    let supervised = process
        .and_then(|p| p.supervisor)
        .is_some_and(|s| crate::procs::alive(s, None));
    let files = crate::procs::agent_files(project_dir, f.id.as_str());
    let exit = match crate::procs::read_exit(&files.exit) {
        Ok(Some(e)) if process.is_none_or(|p| p.pid == e.pid) => {
            looked.exit = Some(e);
            ExitFile::Current
        }
        Ok(Some(_)) => ExitFile::Earlier,
        Ok(None) => ExitFile::Missing,
        Err(e) => {
            looked.unreadable = Some(e);
            ExitFile::Unreadable
        }
    };
    looked.seen = recovery::Seen::Gone { supervised, exit };
    looked
}

fn recover_session(
    tx: &mut Txn<'_>,
    sid: &SessionId,
    agents: Vec<(Found, Looked)>,
    runner: &Runner,
) -> Result<SessionRecovery, ErrorBody> {
    let mut r = SessionRecovery {
        session: sid.clone(),
        plan: String::new(),
        next_step: String::new(),
        readopted: Vec::new(),
        exits_applied: Vec::new(),
        resumable: Vec::new(),
        failed: Vec::new(),
        notes: Vec::new(),
    };
    let mut checkpointed = false;
    for (
        Found { id, can_resume, .. },
        Looked {
            seen,
            exit,
            unreadable,
        },
    ) in agents
    {
        // The state as it was, before recovery changes anything (only when it does).
        let mut before = |tx: &mut Txn<'_>| {
            if !checkpointed {
                tx.checkpoint(sid, "before recovery");
                checkpointed = true;
            }
        };
        if let Some(e) = unreadable {
            r.notes.push(format!("agent {id}: {e}"));
        }
        let files = crate::procs::agent_files(&runner.project_dir, id.as_str());
        if let recovery::Seen::Gone {
            exit: ExitFile::Earlier,
            ..
        } = seen
        {
            // From an earlier attempt: that exit was applied when it happened.
            tx.effect(crate::run::Effect::RemoveFile(files.exit.clone()));
        }
        match (
            recovery::fate(seen, tx.state().is_launching(&id), can_resume),
            exit,
        ) {
            (Fate::ApplyExit, Some(exit)) => {
                before(tx);
                ended(tx, &id, exit, runner)?;
                // Deleted once this is committed: if the commit fails, the next recovery
                // still finds the exit.
                tx.effect(crate::run::Effect::RemoveFile(files.exit));
                r.exits_applied.push(id);
            }
            // A recorded exit is applied; without one (never so) the agent is kept as it is.
            (Fate::Readopt | Fate::ApplyExit, _) => r.readopted.push(id),
            (Fate::Interrupt, _) => {
                before(tx);
                tx.agent_mut(&id).process = None;
                super::agent::transition(
                    tx,
                    &id,
                    AgentOp::Interrupt,
                    None,
                    Some("its process ended while maos was down".into()),
                )?;
                r.resumable.push(id);
            }
            (Fate::Fail, _) => {
                before(tx);
                tx.agent_mut(&id).process = None;
                super::agent::transition(
                    tx,
                    &id,
                    AgentOp::Fail,
                    None,
                    Some("its process ended while maos was down, with no exit recorded".into()),
                )?;
                r.failed.push(id);
            }
        }
    }
    // The steps the fates lead to (a failure under policy `fail` fails the session; an exit
    // applied may complete it) are taken before the plan is decided, so that the report says
    // what recovery did, never a next step the session can no longer take. A scheduler that
    // panics leaves the session as recovery left it (as `schedule_each` does).
    if tx
        .atomic(|tx| {
            schedule(tx, sid, runner);
            Ok::<(), ()>(())
        })
        .is_err()
    {
        tracing::error!(session = %sid, "the scheduler panicked after recovery; the session was left as recovery left it");
    }
    let plan = tx
        .state()
        .session(sid)
        .map_or(recovery::Plan::Continue, |s| {
            recovery::Plan::of(recovery::After {
                ended: s.state.is_terminal().then_some(s.state),
                paused: s.state == SessionState::Paused,
                resumable: s
                    .agents
                    .iter()
                    .any(|a| a.spec.is_some() && a.state == AgentState::Resumable),
                phase_failed: s
                    .workflow
                    .phases
                    .iter()
                    .any(|p| p.state == maos_core::PhaseState::Failed),
            })
        });
    r.plan = plan.as_str().to_string();
    r.next_step = plan.next_step().to_string();
    tx.event(
        Some(sid),
        None,
        "session_recovered",
        serde_json::to_value(&r).unwrap_or_default(),
    );
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::runs_here;
    use crate::state::State;
    use maos_core::plan::{AgentSpec, RunPolicy};
    use maos_core::record::{AgentRecord, SessionRecord};

    fn plan_session(machine: Option<&str>) -> SessionRecord {
        let mut s: SessionRecord = serde_json::from_value(serde_json::json!({
            "id": "sess_00000000000000000000000000000001", "objective": "o",
            "state": "running", "strategy": "parallel", "active": true, "resume_count": 0,
            "paused_phases": [], "errors": [], "created_at": "2026-11-26T00:00:00Z",
            "updated_at": "2026-11-26T00:00:00Z", "workflow": {"phases": []}
        }))
        .expect("a session");
        s.policy = Some(RunPolicy::default());
        let mut a: AgentRecord = serde_json::from_value(serde_json::json!({
            "id": "agt_00000000000000000000000000000002", "session_id": s.id, "role": "r",
            "instance": 1, "task": "t", "state": "running",
            "created_at": "2026-11-26T00:00:00Z", "updated_at": "2026-11-26T00:00:00Z"
        }))
        .expect("an agent");
        a.spec = Some(Box::new(AgentSpec {
            name: "a".into(),
            role: "r".into(),
            task: "t".into(),
            command: vec!["true".into()],
            resume_command: None,
            depends_on: vec![],
            phase: None,
            stage: None,
            env: Default::default(),
            workdir: None,
            retries: None,
        }));
        a.machine = machine.map(str::to_string);
        s.agents.push(a);
        s
    }

    /// In a fleet a daemon schedules, recovers and sweeps only the plans whose agents run on
    /// its machine; on SQLite (no machine) every plan is its own.
    #[test]
    fn only_the_daemon_of_a_plans_machine_runs_it() {
        let mut st = State::new(vec![], 0);
        assert!(runs_here(&st, &plan_session(None)));
        st.machine = Some("laptop".into());
        assert!(runs_here(&st, &plan_session(Some("laptop"))));
        assert!(!runs_here(&st, &plan_session(Some("build-server"))));
    }

    /// The signals a daemon sends its own machine's process when another daemon paused,
    /// resumed or ended its agent; none for another machine's, none when nothing changed.
    #[test]
    fn a_change_made_elsewhere_reaches_only_this_machines_process() {
        use crate::run::Effect;
        let signals = |e: &[Effect]| -> Vec<(u32, i32)> {
            e.iter()
                .filter_map(|e| match e {
                    Effect::Signal { pgid, sig } => Some((*pgid, *sig)),
                    _ => None,
                })
                .collect()
        };
        for (machine, pid) in [("laptop", 4242u32), ("build-server", 4343)] {
            let mut s = plan_session(Some(machine));
            s.agents[0].process = Some(maos_proto::ProcessInfo {
                pid,
                start_time: None,
                started_at: s.created_at,
                supervisor: None,
            });
            let mut st = State::new(vec![s.clone()], 0);
            st.machine = Some("laptop".into());
            let mine = machine == "laptop";
            assert!(super::catch_up(&st, std::slice::from_ref(&s)).is_empty());
            let mut paused = s.clone();
            paused.state = maos_core::SessionState::Paused;
            let want: Vec<(u32, i32)> = if mine {
                vec![(pid, libc::SIGSTOP)]
            } else {
                vec![]
            };
            assert_eq!(signals(&super::catch_up(&st, &[paused.clone()])), want);
            let mut st_paused = State::new(vec![paused], 0);
            st_paused.machine = Some("laptop".into());
            let want: Vec<(u32, i32)> = if mine {
                vec![(pid, libc::SIGCONT)]
            } else {
                vec![]
            };
            assert_eq!(signals(&super::catch_up(&st_paused, &[s.clone()])), want);
            let mut cancelled = s.clone();
            cancelled.agents[0].state = maos_core::AgentState::Cancelled;
            let ended = super::catch_up(&st, &[cancelled]);
            assert_eq!(ended.len(), if mine { 3 } else { 0 });
            if mine {
                assert_eq!(signals(&ended)[0], (pid, libc::SIGTERM));
            }
        }
    }

    /// The sweep's check: a process of this machine found running while its agent is held is
    /// stopped, one found stopped while it is not is continued; one whose state is not known
    /// (gone), or another machine's, is left alone.
    #[test]
    fn the_sweep_stops_or_continues_what_the_records_say() {
        let sig = |st: &State, found: Option<bool>| -> Vec<i32> {
            super::hold_as_recorded(st, |pid, _| {
                assert_eq!(pid, 4242);
                found
            })
            .iter()
            .filter_map(|e| match e {
                crate::run::Effect::Signal { sig, .. } => Some(*sig),
                _ => None,
            })
            .collect()
        };
        let mut s = plan_session(Some("laptop"));
        s.agents[0].process = Some(maos_proto::ProcessInfo {
            pid: 4242,
            start_time: None,
            started_at: s.created_at,
            supervisor: None,
        });
        let on = |s: &SessionRecord, machine: &str| {
            let mut st = State::new(vec![s.clone()], 0);
            st.machine = Some(machine.into());
            st
        };
        let st = on(&s, "laptop");
        assert_eq!(sig(&st, Some(true)), [libc::SIGCONT]);
        assert!(sig(&st, Some(false)).is_empty());
        assert!(sig(&st, None).is_empty());
        s.state = maos_core::SessionState::Paused;
        let st = on(&s, "laptop");
        assert_eq!(sig(&st, Some(false)), [libc::SIGSTOP]);
        assert!(sig(&st, Some(true)).is_empty());
        assert!(sig(&on(&s, "build-server"), Some(false)).is_empty());
    }
}
