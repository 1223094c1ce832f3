//! Managed sessions: sessions made from a plan, whose agents maos starts, watches and restarts.
//!
//! The decisions are the pure scheduler's (`maos_core::schedule`); this module turns them into
//! state changes and process effects ([`crate::proc::run::Effect`]), which the actor carries out
//! after the commit. Process exits come back as [`AgentExit`] reports from the supervisors,
//! also after a daemon restart (recovery applies the `exit.json` they leave behind).

use std::path::Path;
use std::sync::Arc;

use maos_core::plan::{self, Plan};
use maos_core::schedule::{self, Action, Node};
use maos_core::{AgentId, AgentOp, AgentState, PhaseOp, SessionId, SessionOp, SessionState};
use maos_proto::{AgentExit, AgentRecord, ErrorBody, ErrorCode, ProcessInfo};
use serde_json::json;

use super::effects::{grace_of, held, in_paused_phase, runs_here, terminate};
use crate::base::error::bad_request as bad;
use crate::proc::run::{Effect, Launch, Runner, Started};
use crate::txn::state::{SessionFiles, Txn};

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
    // Each agent with `land` is followed by its landing agent (`NAME.land`, which depends on
    // it): an agent of its own, so it is scheduled, run, logged and retried like the others.
    let specs: Vec<plan::AgentSpec> = plan
        .agents
        .iter()
        .flat_map(|a| std::iter::once(a.clone()).chain(a.landing()))
        .collect();
    // Every two agents' declared files, compared once (within the budget, or the plan is
    // refused before anything is made): the report, and what the scheduler keeps apart.
    let refs: Vec<Option<&plan::AgentSpec>> = specs.iter().map(Some).collect();
    let pairs = plan::compare(&refs).map_err(|e| bad(format!("{path}: {e}")))?;
    let overlaps = pairs.report(&refs);
    let files = Arc::new(SessionFiles {
        agents: refs.len(),
        apart: pairs.apart(&refs, plan.policy.landing),
        pairs,
    });
    let sid = super::session::create(
        tx,
        plan.objective.clone(),
        plan.strategy,
        plan.phases.clone(),
    )?;
    tx.session_mut(&sid).policy = Some(plan.policy.clone());
    let mut ids: Vec<(String, AgentId)> = Vec::with_capacity(specs.len());
    for spec in &specs {
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
    for (spec, (_, id)) in specs.iter().zip(&ids) {
        let all: Vec<AgentId> = spec
            .depends_on
            .iter()
            .filter_map(|d| ids.iter().find(|(n, _)| n == d).map(|(_, i)| i.clone()))
            .collect();
        if all.len() != tx.state().agent(id).map_or(0, |a| a.depends_on.len()) {
            tx.agent_mut(id).depends_on = all;
        }
    }
    tx.keep_files(&sid, files);
    let mut loaded = json!({ "path": path, "agents": ids.len(), "phases": plan.phases.len(),
                             "strategy": plan.strategy, "policy": plan.policy });
    if !overlaps.is_empty() {
        // The agents whose declared files overlap: they do not run at once (unless allowed).
        loaded["overlaps"] = json!(overlaps);
    }
    tx.event(Some(&sid), None, "plan_loaded", loaded);
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

/// Run the scheduler for every managed session this transaction touched, applying its actions
/// until it has nothing more to do. Most batches (hook calls, locks) touch no managed session
/// and cost only the check.
pub fn schedule_touched(tx: &mut Txn<'_>) {
    let touched = tx.touched_sessions();
    let sids: Vec<SessionId> = touched
        .iter()
        .filter(|sid| managed(tx, sid))
        .cloned()
        .collect();
    schedule_each(tx, sids);
    // A session that ended runs no more agents: its compared files go.
    for sid in touched {
        if tx
            .state()
            .session(&sid)
            .is_none_or(|s| s.state.is_terminal())
        {
            tx.forget_files(&sid);
        }
    }
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

fn nodes(s: &maos_proto::SessionRecord, files: &SessionFiles) -> Vec<Node> {
    // Ended agents run no more: they hold nobody back.
    let live = |i: usize| s.agents.get(i).is_some_and(|a| !a.state.is_terminal());
    s.agents
        .iter()
        .enumerate()
        .map(|(i, a)| Node {
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
            apart: match (live(i), files.apart.get(i)) {
                (true, Some(js)) => js.iter().copied().filter(|&j| live(j)).collect(),
                _ => Vec::new(),
            },
        })
        .collect()
}

/// The session's agents' declared files, compared: as kept since the plan was loaded, or
/// compared now (after a restart, another daemon's plan, an import) and kept until the session
/// ends. The same specs cost the same steps as when the plan or import was accepted. A
/// session whose files cost more than the budget (one older than it) has every two agents
/// with files kept apart: they run one after another.
fn session_files(tx: &mut Txn<'_>, sid: &SessionId) -> Option<Arc<SessionFiles>> {
    let s = tx.state().session(sid)?;
    if let Some(f) = tx.state().files(sid)
        && let Some(added) = s.agents.get(f.agents..)
        && added.iter().all(|a| a.spec.is_none())
    {
        return Some(f.clone());
    }
    let specs: Vec<Option<&plan::AgentSpec>> = s.agents.iter().map(|a| a.spec.as_deref()).collect();
    // Checked as an import is: a pattern that does not parse (bounds tightened since the
    // session was stored) would otherwise be left out of the comparison, its agent kept apart
    // from nobody.
    let pairs = plan::check_declared(&specs).unwrap_or_else(|e| {
        tracing::warn!(session = %sid, error = %e, "declared files taken to overlap");
        plan::FilePairs::assume_overlap(&specs)
    });
    let landing = s.policy.as_ref().map(|p| p.landing).unwrap_or_default();
    let files = Arc::new(SessionFiles {
        agents: specs.len(),
        apart: pairs.apart(&specs, landing),
        pairs,
    });
    tx.keep_files(sid, files.clone());
    Some(files)
}

/// Record why each pending agent the scheduler holds back waits (`held`, and an
/// `agent_waiting` event when that changes), and forget it for the others.
fn note_held(tx: &mut Txn<'_>, sid: &SessionId, files: &SessionFiles, holds: &[(usize, usize)]) {
    let Some(s) = tx.state().session(sid) else {
        return;
    };
    let specs: Vec<Option<&plan::AgentSpec>> = s.agents.iter().map(|a| a.spec.as_deref()).collect();
    let now = tx.now;
    let mut changes: Vec<(AgentId, Option<maos_core::record::Held>)> = Vec::new();
    for (i, a) in s.agents.iter().enumerate() {
        let by = holds
            .iter()
            .find(|(h, _)| *h == i)
            .and_then(|&(_, j)| Some((j, s.agents.get(j)?)));
        match (by, &a.held) {
            (None, None) => {}
            (None, Some(_)) => changes.push((a.id.clone(), None)),
            (Some((_, b)), Some(h)) if h.by == b.id => {}
            (Some((j, b)), _) => {
                let name = |x: &AgentRecord| {
                    x.spec
                        .as_ref()
                        .map_or_else(|| x.role.clone(), |p| p.name.clone())
                };
                let reason = match (a.spec.as_deref(), b.spec.as_deref()) {
                    (Some(x), Some(y)) if x.lands.is_some() && y.lands.is_some() => {
                        let overlapping = files.pairs.files(&specs, i, j);
                        if overlapping.is_empty() {
                            format!("landings run one at a time: {} lands first", name(b))
                        } else {
                            format!(
                                "{} lands first: their agents' files overlap ({})",
                                name(b),
                                files_of(&overlapping)
                            )
                        }
                    }
                    (Some(_), Some(_)) => format!(
                        "its files overlap {}'s ({})",
                        name(b),
                        files_of(&files.pairs.files(&specs, i, j))
                    ),
                    _ => format!("{} runs", name(b)),
                };
                let held = maos_core::record::Held {
                    by: b.id.clone(),
                    name: name(b),
                    reason,
                    since: now,
                };
                changes.push((a.id.clone(), Some(held)));
            }
        }
    }
    for (id, held) in changes {
        if let Some(h) = &held {
            tx.event(
                Some(sid),
                Some(&id),
                "agent_waiting",
                json!({ "for": h.by, "name": h.name, "reason": h.reason }),
            );
        }
        tx.agent_mut(&id).held = held.map(Box::new);
    }
}

/// This agent's patterns of overlapping pairs, each once, in order.
fn files_of(pairs: &[(&str, &str)]) -> String {
    let mut mine: Vec<&str> = Vec::new();
    for (m, _) in pairs {
        if !mine.contains(m) {
            mine.push(m);
        }
    }
    mine.join(", ")
}

pub fn schedule(tx: &mut Txn<'_>, sid: &SessionId, runner: &Runner) {
    for _ in 0..MAX_ROUNDS {
        if tx.state().session(sid).is_none_or(|s| s.policy.is_none()) {
            return;
        }
        let Some(files) = session_files(tx, sid) else {
            return;
        };
        let Some(s) = tx.state().session(sid) else {
            return;
        };
        let Some(policy) = s.policy.clone() else {
            return;
        };
        let ns = nodes(s, &files);
        let phases: Vec<_> = s.workflow.phases.iter().map(|p| p.state).collect();
        let ids: Vec<AgentId> = s.agents.iter().map(|a| a.id.clone()).collect();
        let snapshot = schedule::Snapshot {
            strategy: s.strategy,
            policy: &policy,
            session: s.state,
            phases: &phases,
            nodes: &ns,
        };
        let (actions, holds) = schedule::step_and_holds(&snapshot);
        if actions.is_empty() {
            if !holds.is_empty() || s.agents.iter().any(|a| a.held.is_some()) {
                note_held(tx, sid, &files, &holds);
            }
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
    let cwd = crate::proc::run::workdir(root, spec.workdir.as_deref());
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
        // A landing's `{name}` is the agent it lands (its branch, say).
        "name" => Some(spec.lands.clone().unwrap_or_else(|| spec.name.clone())),
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

pub fn ended(
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
        crate::base::error::invalid(format!(
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
                crate::base::error::invalid(format!(
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
        return Err(crate::base::error::invalid(format!(
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::txn::state::State;

    const PLAN: &str = "objective = \"files\"\nstrategy = \"parallel\"\n\
        [[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\nfiles = [\"src/**\"]\n\
        [[agent]]\nname = \"b\"\ntask = \"t\"\ncommand = [\"true\"]\nfiles = [\"src/api.rs\"]\n\
        land = [\"true\"]\n\
        [[agent]]\nname = \"c\"\ntask = \"t\"\ncommand = [\"true\"]\nfiles = [\"docs/**\"]\n";

    /// A session's declared files are compared once, when its plan is loaded, kept with the
    /// session while it lives (the scheduler takes them as they are), compared again the same
    /// way after a restart, and forgotten when the session ends or a rollback takes it away.
    #[test]
    fn a_sessions_compared_files_live_as_long_as_it_does() {
        let mut st = State::new(Vec::new(), 0);
        let mut tx = Txn::new(&mut st);
        let sid = from_plan(&mut tx, "/p/plan.toml", PLAN, false).expect("the plan");
        let files = tx
            .state()
            .files(&sid)
            .cloned()
            .expect("compared at creation");
        assert_eq!(files.agents, 4, "a, b, b.land, c");
        assert_eq!(files.apart, [vec![1], vec![0], vec![], vec![]]);
        assert_eq!(
            files.pairs.report(
                &tx.state()
                    .session(&sid)
                    .expect("session")
                    .agents
                    .iter()
                    .map(|a| a.spec.as_deref())
                    .collect::<Vec<_>>()
            )[0]
            .files,
            [("src/**".to_string(), "src/api.rs".to_string())]
        );
        let again = session_files(&mut tx, &sid).expect("files");
        assert!(Arc::ptr_eq(&again, &files), "not compared again");
        tx.finish();

        // After a restart (the same records, nothing kept), the same relation.
        let mut fresh = State::new(st.sessions().to_vec(), 100);
        let mut tx = Txn::new(&mut fresh);
        assert!(tx.state().files(&sid).is_none());
        let back = session_files(&mut tx, &sid).expect("files");
        assert_eq!(back.apart, files.apart);
        assert_eq!(back.pairs, files.pairs);
        tx.finish();

        // A batch that made a session and rolled back forgets its files with it.
        let mut tx = Txn::new(&mut st);
        let gone = from_plan(&mut tx, "/p/plan.toml", PLAN, false).expect("the plan");
        assert!(tx.state().files(&gone).is_some());
        tx.rollback();
        assert!(st.files(&gone).is_none() && st.files(&sid).is_some());

        // The session ends: its files go with the batch's scheduling.
        let mut tx = Txn::new(&mut st);
        super::super::session::transition(&mut tx, &sid, SessionOp::Cancel, None, None)
            .expect("cancel");
        schedule_touched(&mut tx);
        tx.finish();
        assert!(st.files(&sid).is_none());
    }
}
