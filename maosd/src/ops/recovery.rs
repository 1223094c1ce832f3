//! Recovery: managed sessions reconciled with their processes, at daemon start, on
//! `maos recover`, on the sweep's finding, and after an import. Above the scheduler
//! (`super::process`), which it calls once a session's agents are settled.

use maos_core::recovery::{self, ExitFile, Fate};
use maos_core::{AgentId, AgentOp, AgentState, SessionId, SessionState};
use maos_proto::{AgentRecord, ErrorBody, ProcessInfo, RecoveryReport, SessionRecovery};

use super::effects::{live_process, runs_here};
use super::process::{ended, runner, schedule};
use crate::proc::run::Runner;
use crate::txn::state::Txn;

/// An imported session that is managed and still live is recovered at once: its agents'
/// processes are looked for as at a daemon start.
pub fn after_import(tx: &mut Txn<'_>, sid: &SessionId) -> Result<(), ErrorBody> {
    if tx
        .state()
        .session(sid)
        .is_some_and(|s| s.policy.is_some() && !s.state.is_terminal())
    {
        recover(tx, Some(sid.as_str()))?;
    }
    Ok(())
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
    let seen = crate::proc::procs::par_map(&found, |f| look(f, &runner.project_dir));
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
    let live = crate::proc::procs::par_map(&running, |(_, p)| live_process(p.as_ref()));
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
    if process.is_some_and(|p| crate::proc::procs::alive(p.pid, p.start_time)) {
        return looked;
    }
    let supervised = process
        .and_then(|p| p.supervisor)
        .is_some_and(|s| crate::proc::procs::alive(s, None));
    let files = crate::proc::procs::agent_files(project_dir, f.id.as_str());
    let exit = match crate::proc::procs::read_exit(&files.exit) {
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
        let files = crate::proc::procs::agent_files(&runner.project_dir, id.as_str());
        if let recovery::Seen::Gone {
            exit: ExitFile::Earlier,
            ..
        } = seen
        {
            // From an earlier attempt: that exit was applied when it happened.
            tx.effect(crate::proc::run::Effect::RemoveFile(files.exit.clone()));
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
                tx.effect(crate::proc::run::Effect::RemoveFile(files.exit));
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
