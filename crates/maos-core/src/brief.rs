//! The briefing (`maos brief`): where a session stands, built from the session record and the
//! locks its agents hold, and its text. Pure: the caller passes the time.
//!
//! The daemon builds it from the project actor's memory only (the session record with its
//! notes, errors, phases and agents, and the lock table): no database read, so it is as quick
//! as `maos status` and SessionStart can hand it to a new AI session on the hook's hot path.
//!
//! What goes where:
//! - **done**: completed agents (with exit code and end time) and `done` notes;
//! - **in progress**: running and interrupted (resumable) agents, with the locks they hold;
//! - **pending**: pending agents, with the dependencies they still wait for (by role), and
//!   `pending` notes;
//! - **failed**: failed and cancelled agents, with the recorded failure;
//! - **decisions**: `decision` notes; **errors**: the session's recorded errors (agent
//!   failures, failed checkpoints) and `error` notes, oldest first;
//! - **blockers**: a paused session, paused phases, paused agents, a current phase whose
//!   checkpoint failed (waiting for a retry), pending agents whose dependency failed or was
//!   cancelled (they can never start);
//! - **locks**: the session's held locks, as `maos lock list --session` shows them.
//!
//! **The next step** is one sentence, from the first of these rules that applies:
//! 1. the session is finished: completed → nothing is left; failed or cancelled → create a
//!    new session to go on (a failed plan session: `maos retry SESSION` first);
//! 2. the session was never started → `maos session start`;
//! 3. the session is paused → `maos resume` (with who paused it and why);
//! 4. the current phase failed its checkpoint → fix it, then retry with `maos phase start`;
//! 5. an agent failed and nothing answered it yet → look at that agent (a plan's agent:
//!    `maos retry NAME`). A failure counts as
//!    answered once a later agent of the same role did not fail (a retry), or once a `done` or
//!    `decision` note about that agent (`--agent`) was recorded after it failed;
//! 6. the current phase is paused → `maos resume --phase NAME`;
//! 7. an agent was interrupted (resumable) → `maos resume --agent ID`;
//! 8. every running agent is paused → `maos resume --agent ID`;
//! 9. pending agents whose dependencies all completed → `maos agent start ID` (not for a
//!    plan's agents: maos starts those itself when the strategy lets it);
//! 10. agents are running → continue the work in progress (and what waits for it);
//! 11. the workflow has phases left: none running → `maos phase start` (the current one);
//!     one running with no agent left → `maos phase complete`;
//! 12. `pending` notes → take up the oldest one;
//! 13. nothing is left → `maos session complete`.
//!
//! The text form starts with "maos: " (hook consumers recognise maos's messages by it) and
//! stays within [`MAX_TEXT`] bytes, because Claude Code cuts `additionalContext` beyond 10,000
//! characters (bytes bound characters and UTF-16 units alike). Long lists keep their newest
//! items and say "… and N more"; the objective and the next step come first, so they survive.

use std::fmt::Write;

use serde::{Deserialize, Serialize};

use crate::record::{
    AgentRecord, AgentTodos, Cli, ContextUsage, LockView, NoteKind, PauseInfo, PsLock,
    SessionRecord,
};
use crate::text::{clip, collapse_and_clip, collapse_whitespace};
use crate::{
    AgentId, AgentState, CheckpointResult, PhaseState, Progress, SessionId, SessionState, Strategy,
    Ts, ids::short,
};

/// Longest briefing text, in bytes.
pub const MAX_TEXT: usize = 10_000;
/// Longest single line of a list in the text (a note can be 4 KiB).
const MAX_ITEM: usize = 300;

/// `maos brief`: where a session stands, what is done, in progress and pending, what was
/// decided, what went wrong, what blocks it and what to do next. The daemon builds it from live
/// state only; `text` is the same briefing as text of at most 10,000 bytes (what SessionStart
/// hands a new AI session as context, and what `maos brief` prints).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Briefing {
    pub session_id: SessionId,
    pub objective: String,
    pub state: SessionState,
    pub strategy: Strategy,
    pub active: bool,
    /// When the briefing was made: running times and the ETA count from here.
    pub at: Ts,
    pub created_at: Ts,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    /// Set while the session is paused: who, why, what was running.
    #[serde(default)]
    pub pause: Option<PauseInfo>,
    #[serde(default)]
    pub resume_count: u32,
    /// Percent done, phase k/n, phase timing and ETA: the figures of `maos status`.
    pub progress: Progress,
    /// Every phase, in order.
    pub phases: Vec<BriefPhase>,
    /// Completed agents (with outcome) and `done` notes.
    pub done: BriefWork,
    /// Running and interrupted (resumable) agents, with the locks they hold.
    pub in_progress: Vec<BriefAgent>,
    /// Pending agents (with the unfinished agents they wait for) and `pending` notes.
    pub pending: BriefWork,
    /// Failed and cancelled agents, with what is known of why.
    pub failed: Vec<BriefAgent>,
    /// `decision` notes, oldest first.
    pub decisions: Vec<BriefFact>,
    /// Errors the daemon recorded (agent failures, failed checkpoints) and `error` notes,
    /// oldest first.
    pub errors: Vec<BriefFact>,
    /// What stops work from going on by itself.
    pub blockers: Vec<Blocker>,
    /// Locks held by the session's agents (as `maos lock list` shows them).
    pub locks: Vec<LockView>,
    #[serde(default)]
    pub context: ContextUsage,
    /// The agents' own task lists, with their roles.
    #[serde(default)]
    pub todos: Vec<AgentTodos>,
    /// One sentence: what to do next.
    pub next_step: String,
    /// The briefing as text (starts with "maos: ", at most 10,000 bytes; long lists end with
    /// "… and N more").
    pub text: String,
}

/// Agents and notes of one part of a briefing.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct BriefWork {
    pub agents: Vec<BriefAgent>,
    pub notes: Vec<BriefFact>,
}

/// A phase in a briefing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BriefPhase {
    /// 1-based, as `maos phase start N` takes it.
    pub number: usize,
    pub name: String,
    pub state: PhaseState,
    pub attempts: u32,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    /// How long the latest attempt ran (so far, for the running phase).
    #[serde(default)]
    pub secs: Option<f64>,
    #[serde(default)]
    pub result: Option<CheckpointResult>,
    /// The current phase (the first not completed or skipped).
    pub current: bool,
    pub paused: bool,
}

/// An agent in a briefing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BriefAgent {
    pub id: AgentId,
    pub role: String,
    pub instance: u32,
    pub task: String,
    pub state: AgentState,
    pub paused: bool,
    #[serde(default)]
    pub started_at: Option<Ts>,
    #[serde(default)]
    pub ended_at: Option<Ts>,
    #[serde(default)]
    pub exit_code: Option<i32>,
    /// How it ended, in words ("completed, exit code 0", the recorded failure); None while it
    /// is not finished.
    #[serde(default)]
    pub outcome: Option<String>,
    /// Locks it holds.
    #[serde(default)]
    pub locks: Vec<PsLock>,
    /// The unfinished agents it depends on.
    #[serde(default)]
    pub waiting_for: Vec<BriefDep>,
    /// Pending and held back by the scheduler (its declared files overlap a running agent's,
    /// or its landing waits for another): why.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub held: Option<String>,
}

/// A dependency an agent waits for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BriefDep {
    pub id: AgentId,
    pub role: String,
    pub state: AgentState,
}

/// Where a fact of a briefing comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FactSource {
    /// `maos note`.
    Note,
    /// Recorded by the daemon (an agent failure, a failed checkpoint).
    Recorded,
}

/// A note or recorded error in a briefing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct BriefFact {
    pub text: String,
    pub at: Ts,
    /// The agent it is about, and that agent's role.
    #[serde(default)]
    pub agent: Option<AgentId>,
    #[serde(default)]
    pub role: Option<String>,
    pub source: FactSource,
}

/// What kind of thing blocks a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BlockerKind {
    SessionPaused,
    PhasePaused,
    AgentPaused,
    /// The current phase failed its checkpoint and waits for a retry.
    PhaseFailed,
    /// A pending agent depends on an agent that failed or was cancelled.
    DependencyFailed,
}

/// Something that stops work from going on by itself.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Blocker {
    pub kind: BlockerKind,
    /// In words, with the command that clears it where there is one.
    pub text: String,
    #[serde(default)]
    pub agent: Option<AgentId>,
    #[serde(default)]
    pub phase: Option<String>,
}

/// The briefing of session `s` at `now`; `locks` are the locks its agents hold (as
/// `maos lock list --session` shows them).
pub fn build(s: &SessionRecord, locks: Vec<LockView>, now: Ts) -> Briefing {
    let current = s.workflow.current().filter(|_| !s.workflow.is_complete());
    let phases = s
        .workflow
        .phases
        .iter()
        .enumerate()
        .map(|(i, p)| BriefPhase {
            number: i + 1,
            name: p.name.clone(),
            state: p.state,
            attempts: p.attempts,
            started_at: p.started_at,
            ended_at: p.ended_at,
            secs: match (p.started_at, p.ended_at) {
                (Some(a), Some(b)) => Some(secs(a, b)),
                (Some(a), None) if p.state == PhaseState::Running => Some(secs(a, now)),
                _ => None,
            },
            result: p.result,
            current: Some(i) == current,
            paused: s.paused_phases.contains(&p.name),
        })
        .collect();

    let agents_in = |states: &[AgentState]| -> Vec<BriefAgent> {
        s.agents
            .iter()
            .filter(|a| states.contains(&a.state))
            .map(|a| brief_agent(s, &locks, a))
            .collect()
    };
    let mut done = agents_in(&[AgentState::Completed, AgentState::Ended]);
    done.sort_by_key(|a| a.ended_at);
    let mut failed = agents_in(&[AgentState::Failed, AgentState::Cancelled]);
    failed.sort_by_key(|a| a.ended_at);
    let notes = |kind: NoteKind| -> Vec<BriefFact> {
        s.notes
            .iter()
            .filter(|n| n.kind == kind)
            .map(|n| fact(s, &n.text, n.at, n.agent.as_ref(), FactSource::Note))
            .collect()
    };
    let mut errors: Vec<BriefFact> = s
        .errors
        .iter()
        .map(|e| {
            fact(
                s,
                &e.message,
                e.at,
                e.agent_id.as_ref(),
                FactSource::Recorded,
            )
        })
        .chain(notes(NoteKind::Error))
        .collect();
    errors.sort_by_key(|e| e.at);

    let mut b = Briefing {
        session_id: s.id.clone(),
        objective: s.objective.clone(),
        state: s.state,
        strategy: s.strategy,
        active: s.active,
        at: now,
        created_at: s.created_at,
        started_at: s.started_at,
        ended_at: s.ended_at,
        pause: s.pause.clone(),
        resume_count: s.resume_count,
        progress: s.progress(now),
        phases,
        done: BriefWork {
            agents: done,
            notes: notes(NoteKind::Done),
        },
        in_progress: agents_in(&[AgentState::Running, AgentState::Resumable]),
        pending: BriefWork {
            agents: agents_in(&[AgentState::Pending]),
            notes: notes(NoteKind::Pending),
        },
        failed,
        decisions: notes(NoteKind::Decision),
        errors,
        blockers: blockers(s),
        locks,
        context: s.context.clone(),
        todos: s
            .todos
            .iter()
            .map(|t| AgentTodos {
                role: agent_of(s, &t.agent).map(|a| a.role.clone()),
                ..t.clone()
            })
            .collect(),
        next_step: next_step(s),
        text: String::new(),
    };
    b.text = text(&b);
    b
}

fn secs(from: Ts, to: Ts) -> f64 {
    (to - from).as_seconds_f64().max(0.0)
}

fn agent_of<'a>(s: &'a SessionRecord, id: &AgentId) -> Option<&'a AgentRecord> {
    s.agents.iter().find(|a| &a.id == id)
}

fn fact(
    s: &SessionRecord,
    text: &str,
    at: Ts,
    agent: Option<&AgentId>,
    source: FactSource,
) -> BriefFact {
    BriefFact {
        text: text.to_string(),
        at,
        agent: agent.cloned(),
        role: agent.and_then(|a| agent_of(s, a)).map(|a| a.role.clone()),
        source,
    }
}

/// How an agent ended, in words; None while it is not finished.
fn outcome(s: &SessionRecord, a: &AgentRecord) -> Option<String> {
    let code = a
        .exit_code
        .map(|c| format!(", exit code {c}"))
        .unwrap_or_default();
    match a.state {
        AgentState::Completed => Some(format!("completed{code}")),
        AgentState::Failed => {
            // The recorded failure, without the "agent ROLE (ID) " it starts with.
            let own = format!("agent {} ({}) ", a.role, a.id);
            Some(
                s.errors
                    .iter()
                    .rev()
                    .find(|e| e.agent_id.as_ref() == Some(&a.id))
                    .map(|e| {
                        e.message
                            .strip_prefix(&own)
                            .unwrap_or(&e.message)
                            .to_string()
                    })
                    .unwrap_or_else(|| format!("failed{code}")),
            )
        }
        AgentState::Cancelled => Some(format!("cancelled{code}")),
        // Only Claude Code resumes a window by its id; the others are just over.
        AgentState::Ended => Some(match (a.cli, &a.external_session_id) {
            (Some(Cli::Claude), Some(id)) if a.parent.is_none() => {
                format!("window ended (its conversation continues with `claude --resume {id}`)")
            }
            (Some(_), _) if a.parent.is_none() => "window ended".to_string(),
            _ => "ended".to_string(),
        }),
        AgentState::Pending | AgentState::Running | AgentState::Resumable => None,
    }
}

fn brief_agent(s: &SessionRecord, locks: &[LockView], a: &AgentRecord) -> BriefAgent {
    let waiting_for = if a.state == AgentState::Pending {
        a.depends_on
            .iter()
            .filter_map(|d| agent_of(s, d))
            .filter(|d| d.state != AgentState::Completed)
            .map(|d| BriefDep {
                id: d.id.clone(),
                role: d.role.clone(),
                state: d.state,
            })
            .collect()
    } else {
        Vec::new()
    };
    BriefAgent {
        id: a.id.clone(),
        role: a.role.clone(),
        instance: a.instance,
        task: a.task.clone(),
        state: a.state,
        paused: a.paused,
        started_at: a.started_at,
        ended_at: a.ended_at,
        exit_code: a.exit_code,
        outcome: outcome(s, a),
        locks: locks
            .iter()
            .filter(|l| l.holder == a.id)
            .map(|l| PsLock {
                path: l.path.clone(),
                mode: l.mode,
                token: l.token,
            })
            .collect(),
        waiting_for,
        held: a
            .held
            .as_ref()
            .filter(|_| a.state == AgentState::Pending)
            .map(|h| h.reason.clone()),
    }
}

/// "coder (agt_1a2b3c4d)", "coder#2 (agt_…)" for a role's second agent.
fn name(a: &AgentRecord) -> String {
    let inst = if a.instance > 1 {
        format!("#{}", a.instance)
    } else {
        String::new()
    };
    format!("{}{inst} ({})", a.role, short(a.id.as_str()))
}

fn blockers(s: &SessionRecord) -> Vec<Blocker> {
    let mut out = Vec::new();
    if s.state.is_terminal() {
        return out;
    }
    let block = |kind, text: String, agent: Option<&AgentId>, phase: Option<&str>| Blocker {
        kind,
        text,
        agent: agent.cloned(),
        phase: phase.map(str::to_string),
    };
    if s.state == SessionState::Paused {
        out.push(block(
            BlockerKind::SessionPaused,
            format!(
                "the session is paused{}; resume it with `maos resume`",
                pause_why(s)
            ),
            None,
            None,
        ));
    }
    let n = s.workflow.phases.len();
    if let Some(i) = s.workflow.current().filter(|_| !s.workflow.is_complete())
        && let Some(p) = s.workflow.phases.get(i)
        && p.state == PhaseState::Failed
    {
        out.push(block(
            BlockerKind::PhaseFailed,
            format!(
                "phase {}/{n} \"{}\" failed its checkpoint (attempt {}); retry it with `maos phase start`",
                i + 1,
                p.name,
                p.attempts
            ),
            None,
            Some(&p.name),
        ));
    }
    for p in &s.paused_phases {
        out.push(block(
            BlockerKind::PhasePaused,
            format!("phase \"{p}\" is paused; resume it with `maos resume --phase {p}`"),
            None,
            Some(p),
        ));
    }
    for a in s
        .agents
        .iter()
        .filter(|a| a.paused && !a.state.is_terminal())
    {
        out.push(block(
            BlockerKind::AgentPaused,
            format!(
                "{} is paused; resume it with `maos resume --agent {}`",
                name(a),
                a.id
            ),
            Some(&a.id),
            None,
        ));
    }
    for a in s.agents.iter().filter(|a| a.state == AgentState::Pending) {
        for d in a.depends_on.iter().filter_map(|d| agent_of(s, d)) {
            if matches!(d.state, AgentState::Failed | AgentState::Cancelled) {
                out.push(block(
                    BlockerKind::DependencyFailed,
                    format!(
                        "{} waits for {}, which {}: it cannot start",
                        name(a),
                        name(d),
                        if d.state == AgentState::Failed {
                            "failed"
                        } else {
                            "was cancelled"
                        }
                    ),
                    Some(&a.id),
                    None,
                ));
            }
        }
    }
    out
}

/// " by alice: lunch" / "" for a paused session.
fn pause_why(s: &SessionRecord) -> String {
    let Some(p) = &s.pause else {
        return String::new();
    };
    let mut out = String::new();
    if let Some(by) = &p.by {
        let _ = write!(out, " by {by}");
    }
    if let Some(r) = &p.reason {
        let _ = write!(out, " ({})", collapse_whitespace(r));
    }
    out
}

/// Failed agents nothing answered yet: no later agent of the same role that did not fail (a
/// retry), and no `done` or `decision` note about the agent since it failed.
fn unresolved_failures(s: &SessionRecord) -> Vec<&AgentRecord> {
    s.agents
        .iter()
        .enumerate()
        .filter(|(_, a)| a.state == AgentState::Failed)
        .filter(|(i, a)| {
            let retried = s.agents[i + 1..].iter().any(|b| {
                b.role == a.role && !matches!(b.state, AgentState::Failed | AgentState::Cancelled)
            });
            let answered = s.notes.iter().any(|n| {
                n.agent.as_ref() == Some(&a.id)
                    && matches!(n.kind, NoteKind::Done | NoteKind::Decision)
                    && a.ended_at.is_none_or(|e| n.at >= e)
            });
            !retried && !answered
        })
        .map(|(_, a)| a)
        .collect()
}

/// "a, b and 3 more".
fn few(names: &[String]) -> String {
    match names {
        [] => String::new(),
        [a] => a.clone(),
        [a, b] => format!("{a} and {b}"),
        [a, b, rest @ ..] => format!("{a}, {b} and {} more", rest.len()),
    }
}

/// One sentence: what to do next (the rules are in the module's documentation).
fn next_step(s: &SessionRecord) -> String {
    match s.state {
        SessionState::Completed => {
            return "Nothing is left to do: the session is completed.".into();
        }
        // A plan's failed agents can run again where they are.
        SessionState::Failed if s.policy.is_some() => {
            return format!(
                "This session failed: fix what failed, then run its failed agents again with `maos retry {}` (or create a new session with `maos session create --objective TEXT`).",
                s.id
            );
        }
        SessionState::Failed | SessionState::Cancelled => {
            return format!(
                "This session is {}: to go on, create a new one with `maos session create --objective TEXT`.",
                s.state
            );
        }
        SessionState::Created => return "Start the session with `maos session start`.".into(),
        SessionState::Paused => {
            return format!(
                "The session is paused{}: resume it with `maos resume` before any work goes on.",
                pause_why(s)
            );
        }
        SessionState::Running => {}
    }
    let wf = &s.workflow;
    let n = wf.phases.len();
    let current = wf
        .current()
        .filter(|_| !wf.is_complete())
        .and_then(|i| Some((i, wf.phases.get(i)?)));
    if let Some((i, p)) = current
        && p.state == PhaseState::Failed
    {
        return format!(
            "Phase {}/{n} \"{}\" failed its checkpoint: fix what failed, then retry it with `maos phase start`.",
            i + 1,
            p.name
        );
    }
    if let Some(a) = unresolved_failures(s).first() {
        let why = outcome(s, a).unwrap_or_default();
        if let Some(spec) = &a.spec {
            return format!(
                "Look at the failed agent {} (task: {}; {}): fix what failed, then run it again with `maos retry {}`, or record what you decided with `maos note decision TEXT --agent {}`.",
                name(a),
                collapse_and_clip(&a.task, 120),
                collapse_and_clip(&why, 160),
                sh_word(&spec.name),
                a.id
            );
        }
        return format!(
            "Look at the failed agent {} (task: {}; {}): retry its task with a new agent (`maos agent register --session {} --role {} --task {}`), or record what you decided with `maos note decision TEXT --agent {}`.",
            name(a),
            collapse_and_clip(&a.task, 120),
            collapse_and_clip(&why, 160),
            s.id,
            sh_word(&a.role),
            sh_word(&collapse_and_clip(&a.task, 120)),
            a.id
        );
    }
    if let Some((_, p)) = current
        && s.paused_phases.contains(&p.name)
    {
        return format!(
            "Phase \"{}\" is paused: resume it with `maos resume --phase {}`.",
            p.name, p.name
        );
    }
    if let Some(a) = s.agents.iter().find(|a| a.state == AgentState::Resumable) {
        return format!(
            "Resume the interrupted agent {} (task: {}) with `maos resume --agent {}`.",
            name(a),
            collapse_and_clip(&a.task, 120),
            a.id
        );
    }
    let running: Vec<&AgentRecord> = s
        .agents
        .iter()
        .filter(|a| a.state == AgentState::Running)
        .collect();
    if !running.is_empty()
        && running.iter().all(|a| a.paused)
        && let Some(a) = running.first()
    {
        return format!(
            "Every running agent is paused: resume {} with `maos resume --agent {}`.",
            name(a),
            a.id
        );
    }
    let ready: Vec<&AgentRecord> = s
        .agents
        .iter()
        .filter(|a| a.state == AgentState::Pending)
        // maos starts a plan's agents itself, when the strategy lets it.
        .filter(|a| a.spec.is_none())
        .filter(|a| {
            a.depends_on
                .iter()
                .all(|d| agent_of(s, d).is_some_and(|d| d.state == AgentState::Completed))
        })
        .collect();
    if let Some(a) = ready.first() {
        let others = if ready.len() > 1 {
            format!(" (and {} more ready to start)", ready.len() - 1)
        } else {
            String::new()
        };
        return format!(
            "Start {} (task: {}) with `maos agent start {}`{others}.",
            name(a),
            collapse_and_clip(&a.task, 120),
            a.id
        );
    }
    if !running.is_empty() {
        let work: Vec<String> = running
            .iter()
            .map(|a| format!("{} on \"{}\"", name(a), collapse_and_clip(&a.task, 80)))
            .collect();
        let waiting: Vec<String> = s
            .agents
            .iter()
            .filter(|a| a.state == AgentState::Pending)
            .map(name)
            .collect();
        let then = if waiting.is_empty() {
            String::new()
        } else {
            format!(
                "; {} {} for it to finish",
                few(&waiting),
                crate::words::agree(waiting.len(), "waits", "wait")
            )
        };
        return format!("Continue the work in progress: {}{then}.", few(&work));
    }
    if let Some((i, p)) = current {
        return if p.state == PhaseState::Running {
            format!(
                "Complete phase {}/{n} \"{}\" with `maos phase complete` (or record a failed checkpoint with `--failed`).",
                i + 1,
                p.name
            )
        } else {
            format!(
                "Start phase {}/{n} \"{}\" with `maos phase start`.",
                i + 1,
                p.name
            )
        };
    }
    if let Some(p) = s.notes.iter().find(|n| n.kind == NoteKind::Pending) {
        return format!(
            "Take up the pending work: {}.",
            collapse_and_clip(&p.text, 200).trim_end_matches('.')
        );
    }
    "Nothing is left: complete the session with `maos session complete`.".into()
}

/// Whitespace runs (newlines included) as one space: every list item is one line.
/// `s` as one word of a shell command line: as it is when it is plain, else single-quoted.
fn sh_word(s: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "_-./:@%+=,".contains(c);
    if !s.is_empty() && s.chars().all(plain) {
        return s.to_string();
    }
    format!("'{}'", s.replace('\'', r"'\''"))
}

/// "42s", "7m", "3h", "2d".
fn dur(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h {}m", s / 3600, s % 3600 / 60),
        _ => format!("{}d {}h", s / 86400, s % 86400 / 3600),
    }
}

fn when(t: Ts) -> String {
    t.format("%Y-%m-%d %H:%M UTC").to_string()
}

/// How many of each list's newest items the text tries to show, most first.
const CAPS: [usize; 7] = [12, 8, 5, 3, 2, 1, 0];

/// The briefing as text: at most [`MAX_TEXT`] bytes, starting with "maos: " and ending with
/// the next step. Lists are cut to fewer and fewer of their newest items until the whole fits.
pub fn text(b: &Briefing) -> String {
    let tail = format!("\nNext step: {}\n", collapse_and_clip(&b.next_step, 600));
    let budget = MAX_TEXT - tail.len();
    let head = header(b);
    let lists = lists(b);
    let mut body = String::new();
    for cap in CAPS {
        body.clear();
        body.push_str(&head);
        phases(&mut body, b, cap);
        for list in &lists {
            // Blockers are few and always worth one line.
            let cap = if list.title == "Blockers" {
                cap.max(1)
            } else {
                cap
            };
            list.write(&mut body, cap);
        }
        if body.len() <= budget {
            break;
        }
    }
    if body.len() > budget {
        // Only a pathological header gets here (each part of it is clipped already).
        let mut end = budget - "…\n".len();
        while !body.is_char_boundary(end) {
            end -= 1;
        }
        body.truncate(end);
        body.push_str("…\n");
    }
    body.push_str(&tail);
    // People and models read it: short ids, as everywhere else (the fields keep whole ones).
    crate::ids::shorten_all(&body).into_owned()
}

/// A titled list of the text: how many items it has, and its newest ones as lines.
struct List {
    title: &'static str,
    total: usize,
    newest: Vec<String>,
}

impl List {
    fn new<T>(title: &'static str, items: &[T], line: impl Fn(&T) -> String) -> List {
        let from = items.len().saturating_sub(CAPS[0]);
        List {
            title,
            total: items.len(),
            newest: items[from..]
                .iter()
                .map(|x| clip(&line(x), MAX_ITEM))
                .collect(),
        }
    }

    /// At most `cap` items (the newest, i.e. the last), after "… and N more".
    fn write(&self, out: &mut String, cap: usize) {
        if self.total == 0 {
            return;
        }
        let _ = writeln!(out, "\n{}:", self.title);
        let shown = cap.min(self.newest.len());
        let skip = self.total - shown;
        if skip > 0 {
            let _ = writeln!(
                out,
                "- … and {skip} more earlier (`maos brief --json` lists them all)"
            );
        }
        for item in &self.newest[self.newest.len() - shown..] {
            let _ = writeln!(out, "- {item}");
        }
    }
}

/// Every list of the text, in order.
fn lists(b: &Briefing) -> Vec<List> {
    let agent = |a: &BriefAgent| agent_line(b, a);
    let lock = |l: &LockView| {
        format!(
            "{} ({}) held by {} ({}), token {}, since {}",
            l.path,
            l.mode,
            l.holder_role,
            short(l.holder.as_str()),
            l.token,
            when(l.acquired_at)
        )
    };
    vec![
        List::new("Done", &b.done.agents, agent),
        List::new("Done (notes)", &b.done.notes, fact_line),
        List::new("In progress", &b.in_progress, agent),
        List::new("Task lists (the agents' own)", &b.todos, todo_line),
        List::new("Pending", &b.pending.agents, agent),
        List::new("Pending (notes)", &b.pending.notes, fact_line),
        List::new("Decisions", &b.decisions, fact_line),
        List::new("Errors", &b.errors, fact_line),
        List::new("Failed or cancelled agents", &b.failed, agent),
        List::new("Blockers", &b.blockers, |x: &Blocker| {
            collapse_whitespace(&x.text)
        }),
        List::new("Locks held", &b.locks, lock),
    ]
}

/// "backend (agt_3f2a1b2c): 3/7 done; now: Write the limiter; next: Add tests".
fn todo_line(t: &AgentTodos) -> String {
    let first = |status: &str| {
        t.items
            .iter()
            .find(|i| i.status == status)
            .map(|i| collapse_whitespace(&i.content))
    };
    let mut line = format!(
        "{} ({}): {}/{} done",
        t.role.as_deref().unwrap_or("agent"),
        short(t.agent.as_str()),
        t.completed(),
        t.items.len()
    );
    if let Some(now) = first("in_progress") {
        let _ = write!(line, "; now: {now}");
    }
    if let Some(next) = first("pending") {
        let _ = write!(line, "; next: {next}");
    }
    line
}

fn agent_line(b: &Briefing, a: &BriefAgent) -> String {
    let inst = if a.instance > 1 {
        format!("#{}", a.instance)
    } else {
        String::new()
    };
    let mut line = format!(
        "{}{inst} ({}): {}",
        a.role,
        short(a.id.as_str()),
        collapse_and_clip(&a.task, 120)
    );
    match a.state {
        AgentState::Running | AgentState::Resumable => {
            let state = if a.state == AgentState::Resumable {
                "interrupted (resumable)"
            } else if a.paused {
                "running, paused"
            } else {
                "running"
            };
            let _ = write!(line, " — {state}");
            if let Some(t) = a.started_at {
                let _ = write!(line, " since {} ({})", when(t), dur(secs(t, b.at)));
            }
            if !a.locks.is_empty() {
                let locks: Vec<String> = a
                    .locks
                    .iter()
                    .map(|l| format!("{} ({})", l.path, l.mode))
                    .collect();
                let _ = write!(line, "; holds {}", locks.join(", "));
            }
        }
        AgentState::Pending => {
            if let Some(why) = &a.held {
                let _ = write!(line, " — waits: {why}");
            } else if a.waiting_for.is_empty() {
                line.push_str(" — ready to start");
            } else {
                let deps: Vec<String> = a
                    .waiting_for
                    .iter()
                    .map(|d| format!("{} ({}, {})", d.role, short(d.id.as_str()), d.state))
                    .collect();
                let _ = write!(line, " — waits for {}", deps.join(", "));
            }
        }
        AgentState::Completed | AgentState::Failed | AgentState::Cancelled | AgentState::Ended => {
            if let Some(o) = &a.outcome {
                let _ = write!(line, " — {}", collapse_whitespace(o));
            }
            if let Some(t) = a.ended_at {
                let _ = write!(line, ", {}", when(t));
            }
        }
    }
    line
}

fn fact_line(f: &BriefFact) -> String {
    let who = match (&f.role, &f.agent) {
        (Some(r), Some(a)) => format!(" [{r} {}]", short(a.as_str())),
        (None, Some(a)) => format!(" [{}]", short(a.as_str())),
        _ => String::new(),
    };
    format!(
        "{} ({}){who}",
        collapse_and_clip(&f.text, MAX_ITEM),
        when(f.at)
    )
}

/// The lines before the lists: session, objective, dates, progress.
fn header(b: &Briefing) -> String {
    let mut out = String::new();
    let active = if b.active { ", the active session" } else { "" };
    let _ = writeln!(
        out,
        "maos: briefing on session {} ({}, {} strategy{active}).",
        crate::ids::short(b.session_id.as_str()),
        b.state,
        b.strategy
    );
    let _ = writeln!(out, "Objective: {}", collapse_and_clip(&b.objective, 1000));
    let mut dates = format!("Created {}", when(b.created_at));
    if let Some(t) = b.started_at {
        let _ = write!(dates, ", started {}", when(t));
    }
    if let Some(t) = b.ended_at {
        let _ = write!(dates, ", ended {}", when(t));
    }
    if b.resume_count > 0 {
        let n = usize::try_from(b.resume_count).unwrap_or(usize::MAX);
        let _ = write!(dates, ", resumed {}", crate::words::count(n, "time"));
    }
    let _ = writeln!(out, "{dates}.");
    let _ = writeln!(out, "{}", progress_line(b));
    if let Some(line) = context_line(&b.context) {
        let _ = writeln!(out, "{line}");
    }
    out
}

/// "Context: compacted 2 times, last at ... (auto); subagents reported 120,000 tokens (3)."
/// None when the hooks reported nothing.
fn context_line(c: &ContextUsage) -> Option<String> {
    let mut parts = Vec::new();
    if c.compactions > 0 {
        let mut p = format!(
            "compacted {} time{}",
            c.compactions,
            if c.compactions == 1 { "" } else { "s" }
        );
        if let Some(at) = c.last_compaction {
            let _ = write!(p, ", last {}", when(at));
        }
        if let Some(t) = &c.last_trigger {
            let _ = write!(p, " ({})", collapse_and_clip(t, 20));
        }
        parts.push(p);
    }
    if c.subagents_reported > 0 {
        parts.push(format!(
            "subagents reported {} tokens ({} subagent{})",
            thousands(c.subagent_tokens),
            c.subagents_reported,
            if c.subagents_reported == 1 { "" } else { "s" }
        ));
    }
    (!parts.is_empty()).then(|| format!("Context: {}.", parts.join("; ")))
}

/// 1234567 → "1,234,567".
fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// "Progress: 50% done; phase 2/3 \"build\" running for 5m; average phase 4m; ETA ...".
fn progress_line(b: &Briefing) -> String {
    let p = &b.progress;
    let mut line = format!("Progress: {:.0}% done", p.percent);
    match (p.phase, &p.current_phase) {
        ((_, 0), _) => line.push_str(" (no phases)"),
        ((k, n), Some(name)) => {
            let _ = write!(line, "; phase {k}/{n} \"{}\"", collapse_and_clip(name, 80));
            match (
                p.current_phase_elapsed_secs,
                b.phases.iter().find(|x| x.current),
            ) {
                (Some(e), _) => {
                    let _ = write!(line, " running for {}", dur(e));
                }
                (None, Some(ph)) => {
                    let _ = write!(line, " {}", ph.state);
                }
                (None, None) => {}
            }
        }
        ((k, n), None) => {
            let _ = write!(line, "; phase {k}/{n}, workflow complete");
        }
    }
    if let Some(avg) = p.avg_phase_secs {
        let _ = write!(line, "; average phase {}", dur(avg));
    }
    if let Some(eta) = p.eta {
        let _ = write!(line, "; ETA {} (in {})", when(eta), dur(secs(b.at, eta)));
    }
    if p.stalled {
        line.push_str("; STALLED (the current phase runs over twice the average)");
    }
    let _ = write!(line, "; agents {}/{} done.", p.agents_done, p.agents_total);
    line
}

/// The phases, a window of them around the current one when there are many.
fn phases(out: &mut String, b: &Briefing, cap: usize) {
    let all = &b.phases;
    if all.is_empty() {
        return;
    }
    let window = (cap * 2).max(3);
    let cur = all.iter().position(|x| x.current).unwrap_or(all.len());
    let (from, to) = if all.len() <= window {
        (0, all.len())
    } else {
        let from = cur.saturating_sub(1).min(all.len() - window);
        (from, from + window)
    };
    let _ = writeln!(out, "\nPhases:");
    if from > 0 {
        let _ = writeln!(out, "- … and {from} more before");
    }
    for ph in &all[from..to] {
        let mut l = format!(
            "{}. {}: {}",
            ph.number,
            collapse_and_clip(&ph.name, 80),
            ph.state
        );
        if ph.attempts > 1 {
            let _ = write!(l, " (attempt {})", ph.attempts);
        }
        if let Some(secs) = ph.secs {
            let _ = write!(l, ", {}", dur(secs));
        }
        if ph.paused {
            l.push_str(", paused");
        }
        if ph.current {
            l.push_str("  <- current");
        }
        let _ = writeln!(out, "- {l}");
    }
    if to < all.len() {
        let _ = writeln!(out, "- … and {} more after", all.len() - to);
    }
}

#[cfg(test)]
mod tests {
    use serde_json::{Value, json};

    use super::*;

    const T0: &str = "2026-11-22T10:00:00Z";
    const SID: &str = "sess_00000000000000000000000000000001";

    fn at(t: &str) -> Ts {
        t.parse().expect("a time")
    }

    fn aid(i: u32) -> String {
        format!("agt_{i:032x}")
    }

    /// Agent `i` of [`SID`] as JSON; `extra` overrides fields.
    fn agent(i: u32, role: &str, state: &str, extra: Value) -> Value {
        let mut a = json!({"id": aid(i), "session_id": SID, "role": role, "instance": 1,
                           "task": format!("the {role} work"), "state": state,
                           "created_at": T0, "updated_at": T0});
        if state != "pending" {
            a["started_at"] = json!("2026-11-22T10:01:00Z");
        }
        if matches!(state, "completed" | "failed" | "cancelled") {
            a["ended_at"] = json!("2026-11-22T10:30:00Z");
        }
        merge(&mut a, extra);
        a
    }

    fn merge(into: &mut Value, extra: Value) {
        if let (Some(o), Value::Object(e)) = (into.as_object_mut(), extra) {
            o.extend(e);
        }
    }

    /// A session in `state` with these agents; `extra` overrides fields.
    fn rec(state: &str, agents: Vec<Value>, extra: Value) -> SessionRecord {
        let mut s = json!({"id": SID, "objective": "Ship the limiter", "state": state,
                           "strategy": "adaptive", "active": true, "created_at": T0,
                           "updated_at": T0, "workflow": {"phases": [], "completed_at": null},
                           "agents": agents});
        if state != "created" {
            s["started_at"] = json!(T0);
        }
        merge(&mut s, extra);
        serde_json::from_value(s).expect("a session record")
    }

    fn lock(path: &str, holder: u32, token: u64) -> LockView {
        LockView {
            path: path.into(),
            mode: crate::LockMode::Write,
            holder: AgentId::parse(&aid(holder)).expect("an agent id"),
            holder_role: "backend".into(),
            session_id: SessionId::parse(SID).expect("a session id"),
            token,
            acquired_at: at("2026-11-22T10:02:00Z"),
            expires_at: at("2026-11-22T10:12:00Z"),
        }
    }

    fn kinds(b: &Briefing) -> Vec<BlockerKind> {
        b.blockers.iter().map(|x| x.kind).collect()
    }

    #[test]
    fn a_paused_session_says_who_paused_it_why_and_what_runs() {
        let s = rec(
            "paused",
            vec![
                agent(1, "backend", "running", json!({})),
                agent(2, "tester", "pending", json!({"depends_on": [aid(1)]})),
            ],
            json!({"pause": {"at": "2026-11-22T10:40:00Z", "by": "alice", "reason": "lunch\nbreak",
                             "in_progress": [aid(1)]}}),
        );
        let b = build(
            &s,
            vec![lock("src/limit.rs", 1, 7)],
            at("2026-11-22T11:00:00Z"),
        );
        assert_eq!(kinds(&b), [BlockerKind::SessionPaused]);
        assert_eq!(
            b.blockers[0].text,
            "the session is paused by alice (lunch break); resume it with `maos resume`"
        );
        assert_eq!(
            b.next_step,
            "The session is paused by alice (lunch break): resume it with `maos resume` before any work goes on."
        );
        assert_eq!(b.in_progress.len(), 1);
        assert_eq!(b.in_progress[0].locks[0].path, "src/limit.rs");
        assert_eq!(b.pending.agents[0].waiting_for[0].role, "backend");
        assert!(b.pause.is_some());
        let want = [
            "maos: briefing on session sess_00000000 (paused, adaptive strategy, the active session).",
            "Objective: Ship the limiter",
            "Created 2026-11-22 10:00 UTC, started 2026-11-22 10:00 UTC.",
            "- backend (agt_00000000): the backend work — running since 2026-11-22 10:01 UTC (59m); holds src/limit.rs (write)",
            "- tester (agt_00000000): the tester work — waits for backend (agt_00000000, running)",
            "- the session is paused by alice (lunch break); resume it with `maos resume`",
            "- src/limit.rs (write) held by backend (agt_00000000), token 7, since 2026-11-22 10:02 UTC",
        ];
        for line in want {
            assert!(
                b.text.lines().any(|l| l == line),
                "{line:?} in:\n{}",
                b.text
            );
        }
        let titles: Vec<&str> = b.text.lines().filter(|l| l.ends_with(':')).collect();
        assert_eq!(
            titles,
            ["In progress:", "Pending:", "Blockers:", "Locks held:"],
            "{}",
            b.text
        );
        assert!(b.text.ends_with(&format!("\nNext step: {}\n", b.next_step)));
    }

    #[test]
    fn a_finished_session_has_no_blockers_and_says_how_each_agent_ended() {
        let s = rec(
            "completed",
            vec![
                agent(1, "backend", "completed", json!({"exit_code": 0})),
                agent(2, "docs", "failed", json!({"exit_code": 3})),
                agent(3, "tester", "pending", json!({"depends_on": [aid(2)]})),
            ],
            json!({"ended_at": "2026-11-22T10:45:00Z", "active": false,
                   "errors": [{"at": "2026-11-22T10:30:00Z", "agent_id": aid(2),
                               "message": format!("agent docs ({}) failed: mdbook is missing", aid(2))}]}),
        );
        let b = build(&s, Vec::new(), at("2026-11-22T11:00:00Z"));
        assert_eq!(kinds(&b), [], "a finished session is blocked by nothing");
        assert_eq!(
            b.next_step,
            "Nothing is left to do: the session is completed."
        );
        assert_eq!(
            b.done.agents[0].outcome.as_deref(),
            Some("completed, exit code 0")
        );
        assert_eq!(
            b.failed[0].outcome.as_deref(),
            Some("failed: mdbook is missing")
        );
        assert!(
            b.text
                .lines()
                .next()
                .is_some_and(|l| l
                    == "maos: briefing on session sess_00000000 (completed, adaptive strategy)."),
            "{}",
            b.text
        );
        assert!(b.text.contains(
            "\nDone:\n- backend (agt_00000000): the backend work — completed, exit code 0, 2026-11-22 10:30 UTC\n"
        ));
        assert!(b.text.contains(
            "\nFailed or cancelled agents:\n- docs (agt_00000000): the docs work — failed: mdbook is missing, 2026-11-22 10:30 UTC\n"
        ));
        assert!(b.text.contains("ended 2026-11-22 10:45 UTC"), "{}", b.text);
        for state in ["failed", "cancelled"] {
            let b = build(&rec(state, Vec::new(), json!({})), Vec::new(), at(T0));
            assert_eq!(
                b.next_step,
                format!(
                    "This session is {state}: to go on, create a new one with `maos session create --objective TEXT`."
                )
            );
        }
    }

    #[test]
    fn blockers_name_what_stops_the_work_and_how_to_clear_it() {
        let s = rec(
            "running",
            vec![
                agent(1, "backend", "running", json!({"paused": true})),
                agent(2, "docs", "failed", json!({})),
                agent(3, "tester", "pending", json!({"depends_on": [aid(2)]})),
            ],
            json!({"workflow": {"phases": [
                       {"name": "design", "state": "completed", "attempts": 1},
                       {"name": "build", "state": "failed", "attempts": 2, "result": "failed"},
                       {"name": "ship", "state": "planned", "attempts": 0}],
                     "completed_at": null},
                   "paused_phases": ["ship"]}),
        );
        let b = build(&s, Vec::new(), at("2026-11-22T11:00:00Z"));
        assert_eq!(
            kinds(&b),
            [
                BlockerKind::PhaseFailed,
                BlockerKind::PhasePaused,
                BlockerKind::AgentPaused,
                BlockerKind::DependencyFailed
            ]
        );
        let texts: Vec<&str> = b.blockers.iter().map(|x| x.text.as_str()).collect();
        assert_eq!(
            texts,
            [
                "phase 2/3 \"build\" failed its checkpoint (attempt 2); retry it with `maos phase start`",
                "phase \"ship\" is paused; resume it with `maos resume --phase ship`",
                &format!(
                    "backend (agt_00000000) is paused; resume it with `maos resume --agent {}`",
                    aid(1)
                ),
                "tester (agt_00000000) waits for docs (agt_00000000), which failed: it cannot start",
            ]
        );
        assert_eq!(
            b.blockers[3].agent.as_ref().map(|a| a.as_str()),
            Some(aid(3).as_str())
        );
        assert_eq!(
            b.next_step,
            "Phase 2/3 \"build\" failed its checkpoint: fix what failed, then retry it with `maos phase start`."
        );
        let current: Vec<usize> = b
            .phases
            .iter()
            .filter(|p| p.current)
            .map(|p| p.number)
            .collect();
        assert_eq!(current, [2]);
        assert!(
            b.text
                .contains("- 2. build: failed (attempt 2)  <- current\n"),
            "{}",
            b.text
        );
    }

    #[test]
    fn the_next_step_follows_the_first_rule_that_applies() {
        let now = at("2026-11-22T11:00:00Z");
        let step = |state: &str, agents: Vec<Value>, extra: Value| {
            build(&rec(state, agents, extra), Vec::new(), now).next_step
        };
        let id = |i| aid(i);
        assert_eq!(
            step("created", Vec::new(), json!({})),
            "Start the session with `maos session start`."
        );
        // An unanswered failure comes before work that could go on.
        let failed = || agent(1, "docs", "failed", json!({}));
        assert!(
            step(
                "running",
                vec![failed(), agent(2, "api", "pending", json!({}))],
                json!({})
            )
            .starts_with(
                "Look at the failed agent docs (agt_00000000) (task: the docs work; failed):"
            ),
        );
        // The retry it suggests is a whole command (`--task` is required), for this session.
        assert!(
            step(
                "running",
                vec![failed(), agent(2, "api", "pending", json!({}))],
                json!({})
            )
            .contains(&format!(
                "(`maos agent register --session {SID} --role docs --task 'the docs work'`)"
            )),
        );
        // Answered by a decision about it, recorded after it failed: the next rule applies.
        let answered = json!({"notes": [{"kind": "decision", "text": "docs later",
                                         "agent": id(1), "at": "2026-11-22T10:31:00Z"}]});
        assert_eq!(
            step(
                "running",
                vec![failed(), agent(2, "api", "pending", json!({}))],
                answered.clone()
            ),
            format!(
                "Start api (agt_00000000) (task: the api work) with `maos agent start {}`.",
                id(2)
            )
        );
        // Answered by a retry of the same role.
        assert_eq!(
            step(
                "running",
                vec![failed(), agent(2, "docs", "running", json!({}))],
                json!({})
            ),
            "Continue the work in progress: docs (agt_00000000) on \"the docs work\"."
        );
        assert_eq!(
            step(
                "running",
                vec![agent(1, "api", "resumable", json!({}))],
                json!({})
            ),
            format!(
                "Resume the interrupted agent api (agt_00000000) (task: the api work) with `maos resume --agent {}`.",
                id(1)
            )
        );
        assert_eq!(
            step(
                "running",
                vec![agent(1, "api", "running", json!({"paused": true}))],
                json!({})
            ),
            format!(
                "Every running agent is paused: resume api (agt_00000000) with `maos resume --agent {}`.",
                id(1)
            )
        );
        // A plan's pending agent is started by maos, not by the reader.
        let spec =
            json!({"spec": {"name": "api", "role": "api", "task": "t", "command": ["true"]}});
        assert_eq!(
            step(
                "running",
                vec![
                    agent(1, "api", "running", json!({})),
                    agent(2, "web", "pending", spec.clone()),
                ],
                json!({})
            ),
            "Continue the work in progress: api (agt_00000000) on \"the api work\"; web (agt_00000000) waits for it to finish."
        );
        // A plan's agent held back because its files overlap a running agent's says why.
        let mut held = spec.clone();
        held["held"] = json!({"by": aid(1), "name": "api", "since": T0,
                              "reason": "its files overlap api's (src/**)"});
        let s = rec(
            "running",
            vec![
                agent(1, "api", "running", json!({})),
                agent(2, "web", "pending", held),
            ],
            json!({}),
        );
        let b = build(&s, Vec::new(), at(T0));
        assert_eq!(
            b.pending.agents[0].held.as_deref(),
            Some("its files overlap api's (src/**)")
        );
        assert!(
            text(&b).contains(
                "web (agt_00000000): the web work — waits: its files overlap api's (src/**)"
            ),
            "{}",
            text(&b)
        );
        let phases = |first: &str| {
            json!({"workflow": {"phases": [
                {"name": "design", "state": first, "attempts": 1},
                {"name": "build", "state": "planned", "attempts": 0}], "completed_at": null}})
        };
        assert_eq!(
            step("running", Vec::new(), phases("planned")),
            "Start phase 1/2 \"design\" with `maos phase start`."
        );
        assert_eq!(
            step("running", Vec::new(), phases("running")),
            "Complete phase 1/2 \"design\" with `maos phase complete` (or record a failed checkpoint with `--failed`)."
        );
        assert_eq!(
            step(
                "running",
                Vec::new(),
                json!({"notes": [{"kind": "pending", "text": "Benchmark it.", "at": T0},
                                 {"kind": "pending", "text": "Later", "at": T0}]})
            ),
            "Take up the pending work: Benchmark it."
        );
        assert_eq!(
            step(
                "running",
                vec![agent(1, "api", "completed", json!({}))],
                json!({})
            ),
            "Nothing is left: complete the session with `maos session complete`."
        );
    }

    #[test]
    fn a_suggested_command_quotes_its_words_for_the_shell() {
        assert_eq!(sh_word("docs"), "docs");
        assert_eq!(sh_word("src/a-b_c.rs"), "src/a-b_c.rs");
        assert_eq!(sh_word(""), "''");
        assert_eq!(sh_word("the docs work"), "'the docs work'");
        assert_eq!(sh_word("it's $HOME `x`"), r"'it'\''s $HOME `x`'");
    }

    #[test]
    fn short_texts_and_durations() {
        assert_eq!(dur(59.9), "59s");
        assert_eq!(dur(3_700.0), "1h 1m");
        assert_eq!(
            few(&["a".into(), "b".into(), "c".into()]),
            "a, b and 1 more"
        );
    }

    /// A session as JSON (so that fields added with defaults need no change here).
    fn session(phases: usize, agents: usize, notes: usize, long: &str) -> SessionRecord {
        let t = "2026-11-22T10:00:00Z";
        let sid = "sess_00000000000000000000000000000001";
        let phases: Vec<_> = (0..phases)
            .map(|i| {
                let state = if i == 0 { "running" } else { "planned" };
                json!({"name": format!("phase {i} {long}"), "state": state, "attempts": 1,
                       "started_at": t, "ended_at": null, "result": null})
            })
            .collect();
        let agents: Vec<_> = (0..agents)
            .map(|i| {
                let state = ["running", "pending", "completed", "failed"][i % 4];
                json!({"id": format!("agt_{i:032x}"), "session_id": sid, "role": long,
                       "instance": i + 1, "task": long, "state": state,
                       "created_at": t, "updated_at": t, "started_at": t,
                       "depends_on": [format!("agt_{:032x}", i / 2)]})
            })
            .collect();
        let notes: Vec<_> = (0..notes)
            .map(|i| {
                let kind = ["decision", "done", "error", "pending"][i % 4];
                json!({"kind": kind, "text": format!("{i} {long}"), "at": t})
            })
            .collect();
        serde_json::from_value(json!({
            "id": sid, "objective": long, "state": "running", "strategy": "adaptive",
            "active": true, "created_at": t, "updated_at": t, "started_at": t,
            "workflow": {"phases": phases, "completed_at": null},
            "paused_phases": ["phase 3"],
            "errors": [{"at": t, "message": long}],
            "notes": notes, "agents": agents,
        }))
        .expect("a session record")
    }

    #[test]
    fn the_context_line_says_only_what_the_hooks_reported() {
        assert_eq!(context_line(&ContextUsage::default()), None);
        assert_eq!(thousands(0), "0");
        assert_eq!(thousands(999), "999");
        assert_eq!(thousands(1_234_567), "1,234,567");
        let at: Ts = "2026-11-22T10:05:00Z".parse().expect("time");
        let c = ContextUsage {
            compactions: 1,
            last_compaction: Some(at),
            last_trigger: Some("manual".into()),
            ..ContextUsage::default()
        };
        assert_eq!(
            context_line(&c).as_deref(),
            Some("Context: compacted 1 time, last 2026-11-22 10:05 UTC (manual).")
        );
        let c = ContextUsage {
            subagent_tokens: 12_345,
            subagents_reported: 1,
            ..ContextUsage::default()
        };
        assert_eq!(
            context_line(&c).as_deref(),
            Some("Context: subagents reported 12,345 tokens (1 subagent).")
        );
    }

    #[test]
    fn the_text_stays_within_the_limit_whatever_the_session_holds() {
        // Multi-byte text, 4 KiB long, everywhere.
        let long = "é—ü ".repeat(1024);
        let now: Ts = "2026-11-22T12:00:00Z".parse().expect("time");
        for (phases, agents, notes) in [(0, 0, 0), (2, 4, 8), (300, 200, 500)] {
            let b = build(&session(phases, agents, notes, &long), Vec::new(), now);
            assert!(b.text.len() <= MAX_TEXT, "{} bytes", b.text.len());
            assert!(b.text.starts_with("maos: "));
            let last = b.text.trim_end().lines().last().unwrap_or_default();
            assert!(last.starts_with("Next step: "), "{last}");
            if notes > 100 {
                assert!(b.text.contains("… and "), "{}", b.text);
                assert!(b.text.contains("more after"), "phases are cut too");
                assert_eq!(b.decisions.len(), 125, "the JSON keeps everything");
            }
        }
    }

    #[test]
    fn lists_keep_the_newest_items() {
        let items: Vec<String> = (1..=5).map(|i| format!("item {i}")).collect();
        let list = List::new("T", &items, String::clone);
        let mut out = String::new();
        list.write(&mut out, 2);
        assert_eq!(
            out,
            "\nT:\n- … and 3 more earlier (`maos brief --json` lists them all)\n- item 4\n- item 5\n"
        );
        out.clear();
        list.write(&mut out, 12);
        assert_eq!(out.lines().count(), 7, "{out}");
    }
}
