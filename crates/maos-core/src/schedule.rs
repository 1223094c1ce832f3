//! What a managed session does next: a pure function of a snapshot of the session (its state,
//! strategy, policy, phases and agents) to a list of [`Action`]s.
//!
//! The daemon takes a [`Snapshot`], calls [`step`], applies the actions in order, and calls
//! `step` again until it returns nothing. `step` is idempotent: the same snapshot gives the same
//! actions, so a repeated call (after a restart, say) is harmless.
//!
//! # Semantics
//!
//! - Nothing happens unless the session is Running (Created, Paused or ended: no actions).
//! - A session without managed agents (no plan) is never scheduled: no actions.
//! - **Failure.** A managed agent in Failed state has failed for good (the daemon retries with
//!   [`should_retry`] before it marks an agent Failed). Policy
//!   [`OnFailure::FailSession`]: the only action is [`Action::FailSession`]. Policy
//!   [`OnFailure::Continue`]: every pending managed agent that depends, directly or through
//!   other pending agents, on a Failed or Cancelled agent is cancelled ([`Action::Cancel`]);
//!   the rest goes on. Dependents of a Cancelled agent are cancelled under both policies: they
//!   can never start.
//! - **Phases** (the session has phases): when no phase runs and the current phase (the first
//!   not Completed or Skipped) is Planned, [`Action::StartPhase`] starts it (the first one when
//!   none has started). Only agents of the running phase are started. When every managed agent
//!   of the running phase ended: all Completed → [`Action::CompletePhase`], followed by
//!   [`Action::StartPhase`] of the next phase if there is one (completing the last phase
//!   completes the session in the daemon's workflow code, so no `CompleteSession` then); some
//!   Failed or Cancelled (only possible under policy continue) → [`Action::FailSession`]:
//!   continue works within a phase, a phase with failures fails the session at its boundary. A
//!   running phase without managed agents completes at once. A current phase in Failed state
//!   (its checkpoint failed; it waits for a retry) starts nothing.
//! - **No phases**: when every managed agent ended → [`Action::CompleteSession`] if all
//!   Completed, else [`Action::FailSession`] saying how many did not complete.
//! - **Starting** ([`Action::Start`]): a candidate is a managed, Pending, unpaused agent (of the
//!   running phase, with phases; without a phase, without phases) that is not being cancelled.
//!   Then, per strategy:
//!   - parallel: every candidate whose dependencies Completed starts (plans refuse
//!     `depends_on` under parallel; only the landing agent maos adds after an agent with a
//!     `land` command depends on it);
//!   - adaptive: a candidate starts when all its dependencies Completed;
//!   - sequential: only when no managed agent is Running or Resumable; then the first
//!     candidate in plan order, if all its dependencies Completed: one at a time;
//!   - pipeline: a candidate of stage *s* starts when every managed agent of a lower stage (of
//!     the running phase) ended, and its dependencies Completed; an agent without a stage never
//!     starts.
//!
//!   A candidate does not start while a node of its [`Node::apart`] (agents whose declared
//!   files overlap its own) is Running or Resumable, or starts in the same step (earlier in
//!   plan order): it is *held*, and [`held`] says by whom. When no managed agent runs, the
//!   first candidate the strategy allows always starts, so holding never stops a session.
//!
//!   With `max_parallel`, at most `max_parallel` minus the managed agents Running or Resumable
//!   start, in plan order.
//! - Resumable agents are neither started nor done: recovery resumes them; they hold back
//!   completion.
//! - Bad indices never panic: a dependency or phase index out of range makes the agent no
//!   candidate.
//!
//! Reasons name agents as `#i` (the node's index, 0-based) and phases by number from 1;
//! [`name_agents`] puts names in.
//!
//! [`OnFailure::FailSession`]: crate::plan::OnFailure::FailSession
//! [`OnFailure::Continue`]: crate::plan::OnFailure::Continue

use std::collections::VecDeque;

use crate::plan::{OnFailure, RunPolicy};
use crate::{AgentState, PhaseState, SessionState, Strategy};

/// One agent as the scheduler sees it, in plan order (its index is its identity).
#[derive(Clone, Debug)]
pub struct Node {
    /// The agent's state.
    pub state: AgentState,
    /// Paused: a paused pending agent is not started.
    pub paused: bool,
    /// Started by maos (has a command). Unmanaged agents (registered by hand, or agent-CLI
    /// hooks) are never started and never block completion.
    pub managed: bool,
    /// Indices of the nodes it depends on.
    pub deps: Vec<usize>,
    /// 0-based index of its phase.
    pub phase: Option<u32>,
    /// Pipeline stage, from 1.
    pub stage: Option<u32>,
    /// Indices of the nodes it must not run at the same time as (declared files that
    /// overlap, landings to serialise); the daemon keeps the relation symmetric.
    pub apart: Vec<usize>,
}

/// What the scheduler looks at.
#[derive(Clone, Copy, Debug)]
pub struct Snapshot<'a> {
    /// The session's strategy.
    pub strategy: Strategy,
    /// The session's run policy.
    pub policy: &'a RunPolicy,
    /// The session's state.
    pub session: SessionState,
    /// The session's phases' states, in order (empty: no phases).
    pub phases: &'a [PhaseState],
    /// The agents, in plan order.
    pub nodes: &'a [Node],
}

/// Something the daemon should do.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    /// Start this pending agent's process.
    Start(usize),
    /// This pending agent can never run (a dependency failed or was cancelled): cancel it,
    /// with the reason.
    Cancel(usize, String),
    /// Every managed agent of the running phase `idx` completed: complete the phase (passed).
    CompletePhase(usize),
    /// Start phase `idx` (the first one when none has started; the next one after
    /// CompletePhase — the daemon applies actions in order and then calls `step` again).
    StartPhase(usize),
    /// Every managed agent ended and none failed (sessions without phases only).
    CompleteSession,
    /// The session fails, with a reason naming the agents/phase (the daemon cancels what still
    /// runs).
    FailSession(String),
}

/// After a managed agent's process failed (attempt `attempts`, counted from 1): run it again?
/// True while `attempts <= retries`, so an agent runs at most `retries + 1` times.
pub fn should_retry(attempts: u32, retries: u32) -> bool {
    attempts <= retries
}

/// Just the agents to start now (the Start actions' indices, in order).
pub fn ready(s: &Snapshot<'_>) -> Vec<usize> {
    step(s)
        .into_iter()
        .filter_map(|a| match a {
            Action::Start(i) => Some(i),
            _ => None,
        })
        .collect()
}

/// The next actions (see the module documentation). Idempotent: calling it again on the same
/// snapshot returns the same actions; the daemon applies them, then calls `step` again until it
/// returns nothing. O(nodes + edges).
pub fn step(s: &Snapshot<'_>) -> Vec<Action> {
    step_and_holds(s).0
}

/// The candidates [`step`] would start but holds back, each with the node it waits for (a
/// node of its [`Node::apart`] that runs, or that starts before it in this step), in plan
/// order. Call it on a settled snapshot (after applying `step`'s actions until none are left)
/// to say why pending agents wait.
pub fn held(s: &Snapshot<'_>) -> Vec<(usize, usize)> {
    step_and_holds(s).1
}

/// [`step`] and [`held`] of one snapshot in one pass: what the daemon calls on every
/// scheduling round (when the actions are empty, the holds are those of a settled snapshot).
pub fn step_and_holds(s: &Snapshot<'_>) -> (Vec<Action>, Vec<(usize, usize)>) {
    let nodes = s.nodes;
    let mut holds = Vec::new();
    if s.session != SessionState::Running || !nodes.iter().any(|n| n.managed) {
        return (Vec::new(), holds);
    }

    if s.policy.on_failure == OnFailure::FailSession {
        let failed: Vec<usize> = indices(nodes, |n| n.managed && n.state == AgentState::Failed);
        if !failed.is_empty() {
            let what = if failed.len() == 1 { "agent" } else { "agents" };
            return (
                vec![Action::FailSession(format!(
                    "{what} {} failed",
                    list(&failed)
                ))],
                holds,
            );
        }
    }

    let mut out = Vec::new();
    let doomed = doomed(nodes);
    for (i, n) in nodes.iter().enumerate() {
        if doomed.get(i).copied().unwrap_or(false) {
            out.push(Action::Cancel(i, cancel_reason(n, nodes, &doomed)));
        }
    }

    // Which nodes may start: those of the running phase, or (without phases) those without one.
    let gate: Option<u32> = if s.phases.is_empty() {
        None
    } else {
        let Some(running) = s.phases.iter().position(|p| *p == PhaseState::Running) else {
            let current = s.phases.iter().position(|p| !p.is_terminal());
            if let Some(c) = current
                && s.phases.get(c) == Some(&PhaseState::Planned)
            {
                out.push(Action::StartPhase(c));
            }
            return (out, holds);
        };
        let Ok(gate) = u32::try_from(running) else {
            return (out, holds);
        };
        // Every managed node of the running phase ended: the phase ends.
        let member = |n: &Node| n.managed && n.phase == Some(gate);
        if nodes
            .iter()
            .filter(|n| member(n))
            .all(|n| n.state.is_terminal())
        {
            let unfinished = not_completed(nodes, member);
            if unfinished.is_empty() {
                out.push(Action::CompletePhase(running));
                let next = s
                    .phases
                    .iter()
                    .enumerate()
                    .skip(running + 1)
                    .find(|(_, p)| !p.is_terminal());
                if let Some((q, PhaseState::Planned)) = next {
                    out.push(Action::StartPhase(q));
                }
            } else {
                out.push(Action::FailSession(format!(
                    "phase {} ended with failed agents ({})",
                    running + 1,
                    unfinished.join(", ")
                )));
            }
            return (out, holds);
        }
        Some(gate)
    };

    if gate.is_none()
        && nodes
            .iter()
            .filter(|n| n.managed)
            .all(|n| n.state.is_terminal())
    {
        let managed = nodes.iter().filter(|n| n.managed).count();
        let unfinished = not_completed(nodes, |n| n.managed);
        if unfinished.is_empty() {
            out.push(Action::CompleteSession);
        } else {
            out.push(Action::FailSession(format!(
                "{} of {} did not complete ({})",
                unfinished.len(),
                crate::words::count(managed, "agent"),
                unfinished.join(", ")
            )));
        }
        return (out, holds);
    }

    start(s, gate, &doomed, &mut out, &mut holds);
    (out, holds)
}

/// Push the Start actions: candidates filtered by the strategy, then by the nodes they must
/// run apart from (`holds`), then by `max_parallel`.
fn start(
    s: &Snapshot<'_>,
    gate: Option<u32>,
    doomed: &[bool],
    out: &mut Vec<Action>,
    holds: &mut Vec<(usize, usize)>,
) {
    let nodes = s.nodes;
    let in_gate = |n: &Node| n.phase == gate;
    let candidate = |i: usize, n: &Node| {
        n.managed
            && n.state == AgentState::Pending
            && !n.paused
            && in_gate(n)
            && !doomed.get(i).copied().unwrap_or(false)
    };
    let deps_done = |n: &Node| {
        n.deps.iter().all(|&d| {
            nodes
                .get(d)
                .is_some_and(|x| x.state == AgentState::Completed)
        })
    };
    let runs =
        |n: &Node| n.managed && matches!(n.state, AgentState::Running | AgentState::Resumable);
    let active = nodes.iter().filter(|n| runs(n)).count();
    let mut budget = match s.policy.max_parallel {
        Some(m) => usize::try_from(m)
            .unwrap_or(usize::MAX)
            .saturating_sub(active),
        None => usize::MAX,
    };

    // The candidates the strategy allows now, in plan order.
    let eligible: Vec<usize> = match s.strategy {
        Strategy::Parallel | Strategy::Adaptive => nodes
            .iter()
            .enumerate()
            .filter(|&(i, n)| candidate(i, n) && deps_done(n))
            .map(|(i, _)| i)
            .collect(),
        Strategy::Sequential => {
            if active > 0 {
                return;
            }
            let first = nodes.iter().enumerate().find(|&(i, n)| candidate(i, n));
            match first {
                Some((i, n)) if deps_done(n) => vec![i],
                _ => Vec::new(),
            }
        }
        Strategy::Pipeline => {
            // The lowest stage with an unfinished managed node (of the gate) is the one that
            // may start: every lower stage has ended.
            let Some(current) = nodes
                .iter()
                .filter(|n| n.managed && in_gate(n) && !n.state.is_terminal())
                .filter_map(|n| n.stage)
                .min()
            else {
                return;
            };
            nodes
                .iter()
                .enumerate()
                .filter(|&(i, n)| candidate(i, n) && n.stage == Some(current) && deps_done(n))
                .map(|(i, _)| i)
                .collect()
        }
    };

    let mut started: Vec<usize> = Vec::new();
    for i in eligible {
        let Some(n) = nodes.get(i) else { continue };
        let blocker = n
            .apart
            .iter()
            .copied()
            .find(|&j| j != i && (started.contains(&j) || nodes.get(j).is_some_and(runs)));
        if let Some(j) = blocker {
            holds.push((i, j));
            continue;
        }
        if budget > 0 {
            budget -= 1;
            started.push(i);
            out.push(Action::Start(i));
        }
    }
}

/// Pending managed nodes that can never run: they depend, directly or through other such
/// nodes, on a Failed or Cancelled node. Empty when nothing failed or was cancelled.
fn doomed(nodes: &[Node]) -> Vec<bool> {
    let dead = |n: &Node| matches!(n.state, AgentState::Failed | AgentState::Cancelled);
    if !nodes.iter().any(dead) {
        return Vec::new();
    }
    let mut dependents: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        for &d in &n.deps {
            if let Some(list) = dependents.get_mut(d) {
                list.push(i);
            }
        }
    }
    let mut doomed = vec![false; nodes.len()];
    let mut queue: VecDeque<usize> = indices(nodes, dead).into();
    while let Some(k) = queue.pop_front() {
        for &j in dependents.get(k).map_or(&[][..], Vec::as_slice) {
            let Some(n) = nodes.get(j) else { continue };
            if n.managed && n.state == AgentState::Pending && !doomed[j] {
                doomed[j] = true;
                queue.push_back(j);
            }
        }
    }
    doomed
}

/// Why a doomed node is cancelled: its first dependency that failed, was cancelled, or is
/// being cancelled.
fn cancel_reason(n: &Node, nodes: &[Node], doomed: &[bool]) -> String {
    for &d in &n.deps {
        match nodes.get(d).map(|x| x.state) {
            Some(AgentState::Failed) => return format!("dependency #{d} failed"),
            Some(AgentState::Cancelled) => return format!("dependency #{d} was cancelled"),
            _ if doomed.get(d).copied().unwrap_or(false) => {
                return format!("dependency #{d} can never run");
            }
            _ => {}
        }
    }
    "a dependency failed".to_owned()
}

fn indices(nodes: &[Node], keep: impl Fn(&Node) -> bool) -> Vec<usize> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| keep(n))
        .map(|(i, _)| i)
        .collect()
}

/// "#i state" for each node that `keep`s and did not complete.
fn not_completed(nodes: &[Node], keep: impl Fn(&Node) -> bool) -> Vec<String> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| keep(n) && n.state != AgentState::Completed)
        .map(|(i, n)| format!("#{i} {}", n.state))
        .collect()
}

fn list(idx: &[usize]) -> String {
    idx.iter()
        .map(|i| format!("#{i}"))
        .collect::<Vec<_>>()
        .join(", ")
}

/// Replace each `#<index>` in a reason from [`step`] with `name(index)` (left as is when
/// `None`): `name_agents("dependency #2 failed", |i| names.get(i).map(|n| format!("{n:?}")))`.
pub fn name_agents(reason: &str, name: impl Fn(usize) -> Option<String>) -> String {
    let mut out = String::with_capacity(reason.len());
    let mut rest = reason;
    while let Some(p) = rest.find('#') {
        out.push_str(&rest[..p]);
        let after = &rest[p + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let named = after[..digits].parse::<usize>().ok().and_then(&name);
        match named {
            Some(n) => out.push_str(&n),
            None => out.push_str(&rest[p..=p + digits]),
        }
        rest = &after[digits..];
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};
    use proptest::strategy::Strategy as Gen;

    use AgentState::{Cancelled, Completed, Failed, Pending, Resumable, Running};

    fn node(deps: &[usize]) -> Node {
        Node {
            state: Pending,
            paused: false,
            managed: true,
            deps: deps.to_vec(),
            phase: None,
            stage: None,
            apart: Vec::new(),
        }
    }

    fn in_phase(phase: u32, deps: &[usize]) -> Node {
        Node {
            phase: Some(phase),
            ..node(deps)
        }
    }

    fn in_stage(stage: u32, deps: &[usize]) -> Node {
        Node {
            stage: Some(stage),
            ..node(deps)
        }
    }

    /// A session driven the way the daemon drives it: apply `step`'s actions until it returns
    /// nothing, then let one running agent end; a log of everything that happened.
    struct Sim {
        strategy: Strategy,
        policy: RunPolicy,
        session: SessionState,
        phases: Vec<PhaseState>,
        nodes: Vec<Node>,
        log: Vec<String>,
    }

    impl Sim {
        fn new(strategy: Strategy, nodes: Vec<Node>) -> Self {
            Self {
                strategy,
                policy: RunPolicy::default(),
                session: SessionState::Running,
                phases: Vec::new(),
                nodes,
                log: Vec::new(),
            }
        }

        fn phases(mut self, n: usize) -> Self {
            self.phases = vec![PhaseState::Planned; n];
            self
        }

        fn policy(mut self, f: impl FnOnce(&mut RunPolicy)) -> Self {
            f(&mut self.policy);
            self
        }

        fn snapshot(&self) -> Snapshot<'_> {
            Snapshot {
                strategy: self.strategy,
                policy: &self.policy,
                session: self.session,
                phases: &self.phases,
                nodes: &self.nodes,
            }
        }

        fn step(&self) -> Vec<Action> {
            let s = self.snapshot();
            let actions = step(&s);
            assert_eq!(step(&s), actions, "step is idempotent");
            actions
        }

        /// Apply actions until `step` returns nothing.
        fn settle(&mut self) {
            for _ in 0..1_000 {
                let actions = self.step();
                if actions.is_empty() {
                    return;
                }
                for a in actions {
                    self.apply(a);
                }
            }
            panic!("step never settled: {:?}", self.log);
        }

        fn apply(&mut self, a: Action) {
            match a {
                Action::Start(i) => {
                    assert_eq!(self.nodes[i].state, Pending, "start #{i}");
                    self.nodes[i].state = Running;
                    self.log.push(format!("start {i}"));
                }
                Action::Cancel(i, why) => {
                    assert_eq!(self.nodes[i].state, Pending, "cancel #{i}");
                    self.nodes[i].state = Cancelled;
                    self.log.push(format!("cancel {i}: {why}"));
                }
                Action::StartPhase(p) => {
                    assert!(
                        matches!(self.phases[p], PhaseState::Planned | PhaseState::Failed),
                        "start phase {p}: {:?}",
                        self.phases
                    );
                    assert!(!self.phases.contains(&PhaseState::Running));
                    self.phases[p] = PhaseState::Running;
                    self.log.push(format!("phase {p} start"));
                }
                Action::CompletePhase(p) => {
                    assert_eq!(self.phases[p], PhaseState::Running);
                    self.phases[p] = PhaseState::Completed;
                    self.log.push(format!("phase {p} done"));
                    // The daemon's workflow code: the last phase completes the session.
                    if self.phases.iter().all(|p| p.is_terminal()) {
                        self.session = SessionState::Completed;
                        self.log.push("session completed (last phase)".into());
                    }
                }
                Action::CompleteSession => {
                    assert!(self.phases.is_empty());
                    self.session = SessionState::Completed;
                    self.log.push("session completed".into());
                }
                Action::FailSession(why) => {
                    self.session = SessionState::Failed;
                    self.log.push(format!("session failed: {why}"));
                    // A session that ends takes its unfinished agents with it.
                    for n in &mut self.nodes {
                        if !n.state.is_terminal() {
                            n.state = Cancelled;
                        }
                    }
                }
            }
        }

        fn running(&self) -> Vec<usize> {
            (0..self.nodes.len())
                .filter(|&i| self.nodes[i].state == Running)
                .collect()
        }

        /// Run to the end: running agents end lowest index first; those in `fail` fail.
        fn run(mut self, fail: &[usize]) -> Vec<String> {
            for _ in 0..1_000 {
                self.settle();
                let Some(&i) = self.running().first() else {
                    return self.log;
                };
                self.end(i, fail);
            }
            panic!("never ended: {:?}", self.log);
        }

        fn end(&mut self, i: usize, fail: &[usize]) {
            if fail.contains(&i) {
                self.nodes[i].state = Failed;
                self.log.push(format!("failed {i}"));
            } else {
                self.nodes[i].state = Completed;
                self.log.push(format!("done {i}"));
            }
        }
    }

    fn lines(log: &[String]) -> String {
        log.join("\n")
    }

    #[test]
    fn parallel_starts_everything_at_once() {
        let log = Sim::new(Strategy::Parallel, vec![node(&[]), node(&[]), node(&[])]).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 1\nstart 2\ndone 0\ndone 1\ndone 2\nsession completed"
        );
    }

    #[test]
    fn parallel_waits_for_dependencies() {
        // Plans refuse depends_on under parallel; the landing agent maos adds after an agent
        // with a `land` command depends on it, and must wait for it there too.
        let log = Sim::new(Strategy::Parallel, vec![node(&[1]), node(&[])]).run(&[]);
        assert_eq!(lines(&log[..3]), "start 1\ndone 1\nstart 0");
    }

    fn apart(mut nodes: Vec<Node>, pairs: &[(usize, usize)]) -> Vec<Node> {
        for &(a, b) in pairs {
            nodes[a].apart.push(b);
            nodes[b].apart.push(a);
        }
        nodes
    }

    #[test]
    fn overlapping_agents_run_one_after_the_other() {
        // 0 and 2 overlap; 1 overlaps nobody.
        let nodes = apart(vec![node(&[]), node(&[]), node(&[])], &[(0, 2)]);
        let mut sim = Sim::new(Strategy::Parallel, nodes);
        assert_eq!(sim.step(), [Action::Start(0), Action::Start(1)]);
        // Held in the same step by 0, which starts before it in plan order.
        assert_eq!(held(&sim.snapshot()), [(2, 0)]);
        sim.settle();
        assert_eq!(
            held(&sim.snapshot()),
            [(2, 0)],
            "still held by the running 0"
        );
        sim.end(0, &[]);
        assert_eq!(sim.step(), [Action::Start(2)]);
        sim.settle();
        assert_eq!(held(&sim.snapshot()), []);
    }

    #[test]
    fn a_resumable_agent_holds_its_files() {
        let mut sim = Sim::new(
            Strategy::Adaptive,
            apart(vec![node(&[]), node(&[])], &[(0, 1)]),
        );
        sim.nodes[0].state = Resumable;
        assert_eq!(sim.step(), []);
        assert_eq!(held(&sim.snapshot()), [(1, 0)]);
    }

    #[test]
    fn holding_does_not_use_the_budget() {
        // max_parallel 2; 0 and 1 overlap, 2 is free: 1 waits for 0 and 2 takes the second
        // slot.
        let nodes = apart(vec![node(&[]), node(&[]), node(&[])], &[(0, 1)]);
        let sim = Sim::new(Strategy::Adaptive, nodes).policy(|p| p.max_parallel = Some(2));
        assert_eq!(sim.step(), [Action::Start(0), Action::Start(2)]);
    }

    #[test]
    fn pipeline_and_sequential_hold_too() {
        let nodes = apart(vec![in_stage(1, &[]), in_stage(1, &[])], &[(0, 1)]);
        let log = Sim::new(Strategy::Pipeline, nodes).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\ndone 0\nstart 1\ndone 1\nsession completed"
        );
        let nodes = apart(vec![node(&[]), node(&[])], &[(0, 1)]);
        let log = Sim::new(Strategy::Sequential, nodes).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\ndone 0\nstart 1\ndone 1\nsession completed"
        );
    }

    #[test]
    fn adaptive_follows_dependencies() {
        // 0 ← 1, 0 ← 2, {1, 2} ← 3; 4 depends on 3 but is listed before it would be ready.
        let nodes = vec![
            node(&[]),
            node(&[0]),
            node(&[0]),
            node(&[1, 2]),
            node(&[3]),
            node(&[]),
        ];
        let log = Sim::new(Strategy::Adaptive, nodes).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 5\ndone 0\nstart 1\nstart 2\ndone 1\ndone 2\nstart 3\ndone 3\n\
             start 4\ndone 4\ndone 5\nsession completed"
        );
    }

    #[test]
    fn adaptive_forward_dependencies_work() {
        // Adaptive plans may depend on agents later in the file.
        let log = Sim::new(Strategy::Adaptive, vec![node(&[1]), node(&[])]).run(&[]);
        assert_eq!(
            lines(&log),
            "start 1\ndone 1\nstart 0\ndone 0\nsession completed"
        );
    }

    #[test]
    fn sequential_runs_one_at_a_time_in_order() {
        let nodes = vec![node(&[]), node(&[0]), node(&[]), node(&[])];
        let log = Sim::new(Strategy::Sequential, nodes).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\ndone 0\nstart 1\ndone 1\nstart 2\ndone 2\nstart 3\ndone 3\nsession completed"
        );
    }

    #[test]
    fn sequential_waits_for_resumable_and_skips_paused() {
        let mut sim = Sim::new(Strategy::Sequential, vec![node(&[]), node(&[]), node(&[])]);
        sim.nodes[0].state = Resumable;
        assert_eq!(sim.step(), []);
        sim.nodes[0].state = Completed;
        sim.nodes[1].paused = true;
        assert_eq!(sim.step(), [Action::Start(2)]);
        // The first candidate waits for its dependencies; nothing later jumps ahead.
        sim.nodes[1].paused = false;
        sim.nodes[1].deps = vec![2];
        assert_eq!(sim.step(), []);
    }

    #[test]
    fn pipeline_runs_stage_by_stage() {
        let nodes = vec![
            in_stage(1, &[]),
            in_stage(2, &[0]),
            in_stage(1, &[]),
            in_stage(3, &[]),
            in_stage(2, &[]),
        ];
        let log = Sim::new(Strategy::Pipeline, nodes).run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 2\ndone 0\ndone 2\nstart 1\nstart 4\ndone 1\ndone 4\nstart 3\ndone 3\n\
             session completed"
        );
    }

    #[test]
    fn pipeline_stage_waits_for_every_lower_stage() {
        let mut sim = Sim::new(
            Strategy::Pipeline,
            vec![in_stage(1, &[]), in_stage(1, &[]), in_stage(2, &[])],
        );
        sim.nodes[0].state = Completed;
        sim.nodes[1].state = Resumable;
        assert_eq!(sim.step(), []);
        sim.nodes[1].state = Cancelled;
        // A cancelled stage-1 agent has ended: stage 2 goes on (it does not depend on it).
        sim.policy.on_failure = OnFailure::Continue;
        assert_eq!(sim.step(), [Action::Start(2)]);
        // A node without a stage never starts and does not hold the others back.
        sim.nodes.push(node(&[]));
        assert_eq!(sim.step(), [Action::Start(2)]);
    }

    #[test]
    fn max_parallel_limits_running_agents() {
        let nodes = vec![node(&[]), node(&[]), node(&[]), node(&[])];
        let log = Sim::new(Strategy::Parallel, nodes)
            .policy(|p| p.max_parallel = Some(2))
            .run(&[]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 1\ndone 0\nstart 2\ndone 1\nstart 3\ndone 2\ndone 3\nsession completed"
        );
        // Resumable agents count as running.
        let mut sim = Sim::new(Strategy::Adaptive, vec![node(&[]), node(&[]), node(&[])])
            .policy(|p| p.max_parallel = Some(2));
        sim.nodes[0].state = Resumable;
        assert_eq!(sim.step(), [Action::Start(1)]);
        sim.nodes[1].state = Running;
        assert_eq!(sim.step(), []);
    }

    #[test]
    fn failure_fails_the_session() {
        let nodes = vec![node(&[]), node(&[]), node(&[0])];
        let log = Sim::new(Strategy::Adaptive, nodes).run(&[0]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 1\nfailed 0\nsession failed: agent #0 failed"
        );
        let mut sim = Sim::new(Strategy::Parallel, vec![node(&[]), node(&[]), node(&[])]);
        sim.nodes[0].state = Failed;
        sim.nodes[2].state = Failed;
        assert_eq!(
            sim.step(),
            [Action::FailSession("agents #0, #2 failed".into())]
        );
    }

    #[test]
    fn continue_cancels_dependents_and_goes_on() {
        // 1 depends on 0, 2 on 1 (transitively on 0), 3 on nothing, 4 on 3.
        let nodes = vec![node(&[]), node(&[0]), node(&[1]), node(&[]), node(&[3])];
        let log = Sim::new(Strategy::Adaptive, nodes)
            .policy(|p| p.on_failure = OnFailure::Continue)
            .run(&[0]);
        assert_eq!(
            lines(&log),
            "start 0\nstart 3\nfailed 0\ncancel 1: dependency #0 failed\ncancel 2: dependency #1 \
             can never run\ndone 3\nstart 4\ndone 4\nsession failed: 3 of 5 agents did not \
             complete (#0 failed, #1 cancelled, #2 cancelled)"
        );
    }

    #[test]
    fn cancelled_dependency_cancels_dependents_under_either_policy() {
        for policy in [OnFailure::FailSession, OnFailure::Continue] {
            let mut sim = Sim::new(Strategy::Adaptive, vec![node(&[]), node(&[0]), node(&[])])
                .policy(|p| p.on_failure = policy);
            sim.nodes[0].state = Cancelled;
            assert_eq!(
                sim.step(),
                [
                    Action::Cancel(1, "dependency #0 was cancelled".into()),
                    Action::Start(2)
                ],
                "{policy:?}"
            );
        }
    }

    #[test]
    fn phases_run_in_order() {
        let nodes = vec![in_phase(0, &[]), in_phase(1, &[]), in_phase(0, &[])];
        let log = Sim::new(Strategy::Parallel, nodes).phases(2).run(&[]);
        assert_eq!(
            lines(&log),
            "phase 0 start\nstart 0\nstart 2\ndone 0\ndone 2\nphase 0 done\nphase 1 start\n\
             start 1\ndone 1\nphase 1 done\nsession completed (last phase)"
        );
    }

    #[test]
    fn empty_phases_complete_at_once() {
        let nodes = vec![in_phase(2, &[])];
        let log = Sim::new(Strategy::Adaptive, nodes).phases(4).run(&[]);
        assert_eq!(
            lines(&log),
            "phase 0 start\nphase 0 done\nphase 1 start\nphase 1 done\nphase 2 start\nstart 0\n\
             done 0\nphase 2 done\nphase 3 start\nphase 3 done\nsession completed (last phase)"
        );
    }

    #[test]
    fn last_phase_completes_without_complete_session() {
        let mut sim = Sim::new(Strategy::Parallel, vec![in_phase(1, &[])]).phases(2);
        sim.phases = vec![PhaseState::Completed, PhaseState::Running];
        sim.nodes[0].state = Completed;
        assert_eq!(sim.step(), [Action::CompletePhase(1)]);
        // One phase only: same.
        let mut sim = Sim::new(Strategy::Parallel, vec![in_phase(0, &[])]).phases(1);
        sim.phases = vec![PhaseState::Running];
        sim.nodes[0].state = Completed;
        assert_eq!(sim.step(), [Action::CompletePhase(0)]);
        // Every phase done: nothing more (the workflow completed the session).
        sim.phases = vec![PhaseState::Completed];
        assert_eq!(sim.step(), []);
    }

    #[test]
    fn phase_with_failures_fails_the_session_at_its_boundary() {
        let nodes = vec![
            in_phase(0, &[]),
            in_phase(0, &[0]),
            in_phase(0, &[]),
            in_phase(1, &[]),
        ];
        let log = Sim::new(Strategy::Adaptive, nodes)
            .phases(2)
            .policy(|p| p.on_failure = OnFailure::Continue)
            .run(&[0]);
        assert_eq!(
            lines(&log),
            "phase 0 start\nstart 0\nstart 2\nfailed 0\ncancel 1: dependency #0 failed\ndone 2\n\
             session failed: phase 1 ended with failed agents (#0 failed, #1 cancelled)"
        );
    }

    #[test]
    fn phase_states_drive_the_start() {
        let mut sim = Sim::new(Strategy::Parallel, vec![in_phase(1, &[])]).phases(2);
        // A skipped current phase is passed over.
        sim.phases = vec![PhaseState::Skipped, PhaseState::Planned];
        assert_eq!(sim.step(), [Action::StartPhase(1)]);
        // A failed checkpoint waits for a retry: nothing.
        sim.phases = vec![PhaseState::Completed, PhaseState::Failed];
        assert_eq!(sim.step(), []);
        // Agents of other phases never start.
        sim.phases = vec![PhaseState::Running, PhaseState::Planned];
        sim.nodes.push(in_phase(0, &[]));
        assert_eq!(sim.step(), [Action::Start(1)]);
        // An agent without a phase, or with a phase out of range, never starts.
        sim.nodes = vec![node(&[]), in_phase(7, &[]), in_phase(0, &[])];
        assert_eq!(sim.step(), [Action::Start(2)]);
    }

    /// Plan files number phases from 1 (`phase = 1` is the first); nodes carry the 0-based
    /// index. Built from a parsed plan, the agents run in the right phases.
    #[test]
    fn plan_phase_numbers_reach_the_scheduler() {
        let text = r#"
objective = "o"
strategy = "adaptive"
phases = ["one", "two", "three"]
[[agent]]
name = "late"
task = "t"
command = ["x"]
phase = 3
[[agent]]
name = "first"
task = "t"
command = ["x"]
phase = 1
[[agent]]
name = "middle"
task = "t"
command = ["x"]
phase = "two"
depends_on = ["first"]
"#;
        let plan = crate::plan::parse(text).unwrap();
        let index = |name: &str| plan.agents.iter().position(|a| a.name == name).unwrap();
        let nodes: Vec<Node> = plan
            .agents
            .iter()
            .map(|a| Node {
                state: Pending,
                paused: false,
                managed: true,
                deps: a.depends_on.iter().map(|d| index(d)).collect(),
                phase: a.phase,
                stage: a.stage,
                apart: Vec::new(),
            })
            .collect();
        assert_eq!(
            nodes.iter().map(|n| n.phase).collect::<Vec<_>>(),
            [Some(2), Some(0), Some(1)]
        );
        let log = Sim::new(plan.strategy, nodes).phases(3).run(&[]);
        assert_eq!(
            lines(&log),
            "phase 0 start\nstart 1\ndone 1\nphase 0 done\nphase 1 start\nstart 2\ndone 2\n\
             phase 1 done\nphase 2 start\nstart 0\ndone 0\nphase 2 done\nsession completed \
             (last phase)"
        );
    }

    #[test]
    fn only_running_sessions_with_managed_agents_are_scheduled() {
        for state in SessionState::ALL {
            let mut sim = Sim::new(Strategy::Parallel, vec![node(&[])]);
            sim.session = *state;
            let want = if *state == SessionState::Running {
                vec![Action::Start(0)]
            } else {
                vec![]
            };
            assert_eq!(sim.step(), want, "{state:?}");
        }
        let mut sim = Sim::new(Strategy::Parallel, vec![node(&[])]);
        sim.nodes[0].managed = false;
        assert_eq!(sim.step(), []);
        sim.nodes.clear();
        assert_eq!(sim.step(), []);
    }

    #[test]
    fn unmanaged_agents_never_start_nor_block() {
        let mut sim = Sim::new(Strategy::Parallel, vec![node(&[]), node(&[])]);
        sim.nodes[1].managed = false;
        assert_eq!(sim.step(), [Action::Start(0)]);
        sim.nodes[0].state = Completed;
        assert_eq!(sim.step(), [Action::CompleteSession]);
        // An unmanaged agent's failure does not fail the session.
        sim.nodes[1].state = Failed;
        assert_eq!(sim.step(), [Action::CompleteSession]);
    }

    #[test]
    fn resumable_and_paused_hold_back_completion() {
        let mut sim = Sim::new(Strategy::Parallel, vec![node(&[]), node(&[])]);
        sim.nodes[0].state = Completed;
        sim.nodes[1].state = Resumable;
        assert_eq!(sim.step(), []);
        sim.nodes[1].state = Pending;
        sim.nodes[1].paused = true;
        assert_eq!(sim.step(), []);
        sim.nodes[1].paused = false;
        assert_eq!(sim.step(), [Action::Start(1)]);
    }

    #[test]
    fn bad_dependency_indices_are_never_satisfied() {
        let sim = Sim::new(
            Strategy::Adaptive,
            vec![node(&[usize::MAX]), node(&[5]), node(&[])],
        );
        assert_eq!(sim.step(), [Action::Start(2)]);
        assert_eq!(ready(&sim.snapshot()), [2]);
    }

    #[test]
    fn retries() {
        let cases = [
            (1, 0, false),
            (1, 1, true),
            (2, 1, false),
            (3, 3, true),
            (4, 3, false),
        ];
        for (attempts, retries, want) in cases {
            assert_eq!(
                should_retry(attempts, retries),
                want,
                "{attempts} {retries}"
            );
        }
    }

    #[test]
    fn naming_agents_in_reasons() {
        let names = ["alpha", "beta"];
        let name = |i: usize| names.get(i).map(|n| format!("\"{n}\""));
        assert_eq!(
            name_agents("agents #0, #1 failed", name),
            "agents \"alpha\", \"beta\" failed"
        );
        assert_eq!(name_agents("#7 and # and #x", name), "#7 and # and #x");
        assert_eq!(name_agents("", name), "");
    }

    // ----- properties -----

    /// Up to `max` nodes; node i depends on up to 3 earlier nodes.
    fn dag(max: usize) -> impl Gen<Value = Vec<Vec<usize>>> {
        prop::collection::vec(prop::collection::vec(0usize..1_000, 0..=3), 1..max).prop_map(|raw| {
            raw.into_iter()
                .enumerate()
                .map(|(i, picks)| {
                    let mut deps: Vec<usize> = if i == 0 {
                        vec![]
                    } else {
                        picks.into_iter().map(|p| p % i).collect()
                    };
                    deps.sort_unstable();
                    deps.dedup();
                    deps
                })
                .collect()
        })
    }

    /// Drive a sim to its end, ending running agents in the order `choices` picks; `on_start`
    /// sees the nodes just before each start. Returns the sim.
    fn drive(mut sim: Sim, choices: &[usize], mut on_start: impl FnMut(&[Node], usize)) -> Sim {
        for c in 0..10_000 {
            loop {
                let actions = sim.step();
                if actions.is_empty() {
                    break;
                }
                for a in actions {
                    if let Action::Start(i) = a {
                        on_start(&sim.nodes, i);
                    }
                    sim.apply(a);
                }
            }
            let running = sim.running();
            if running.is_empty() {
                return sim;
            }
            let pick = choices.get(c).copied().unwrap_or(0) % running.len();
            sim.end(running[pick], &[]);
        }
        panic!("never ended");
    }

    proptest! {
        #[test]
        fn adaptive_respects_dependencies_and_completes(
            deps in dag(30),
            choices in prop::collection::vec(0usize..100, 0..100),
            max_parallel in prop::option::of(1u32..4),
        ) {
            let nodes: Vec<Node> = deps.iter().map(|d| node(d)).collect();
            let sim = Sim::new(Strategy::Adaptive, nodes).policy(|p| p.max_parallel = max_parallel);
            let mut violations = Vec::new();
            let sim = drive(sim, &choices, |nodes, i| {
                if !nodes[i].deps.iter().all(|&d| nodes[d].state == Completed) {
                    violations.push(format!("#{i} started before its dependencies"));
                }
                let running = nodes.iter().filter(|n| n.state == Running).count();
                if max_parallel.is_some_and(|m| running + 1 > m as usize) {
                    violations.push(format!("#{i} started past max_parallel"));
                }
            });
            prop_assert!(violations.is_empty(), "{violations:?}");
            prop_assert_eq!(sim.log.last().map(String::as_str), Some("session completed"));
            prop_assert!(sim.nodes.iter().all(|n| n.state == Completed));
        }

        /// With any symmetric relation of agents to keep apart: no two of a pair ever run at
        /// once, every agent completes (holding never stops a session), and an agent is held
        /// only by one of its pair that runs.
        #[test]
        fn apart_agents_never_run_together_and_all_complete(
            deps in dag(16),
            pairs in prop::collection::vec((0usize..16, 0usize..16), 0..24),
            choices in prop::collection::vec(0usize..100, 0..60),
            max_parallel in prop::option::of(1u32..4),
            parallel in prop::bool::ANY,
        ) {
            let n = deps.len();
            let mut nodes: Vec<Node> = deps.iter().map(|d| node(if parallel { &[] } else { d })).collect();
            for (a, b) in pairs {
                let (a, b) = (a % n, b % n);
                if a != b && !nodes[a].apart.contains(&b) {
                    nodes[a].apart.push(b);
                    nodes[b].apart.push(a);
                }
            }
            let strategy = if parallel { Strategy::Parallel } else { Strategy::Adaptive };
            let sim = Sim::new(strategy, nodes).policy(|p| p.max_parallel = max_parallel);
            let mut violations = Vec::new();
            let sim = drive(sim, &choices, |nodes, i| {
                for &j in &nodes[i].apart {
                    if nodes[j].state == Running {
                        violations.push(format!("#{i} started while #{j} runs"));
                    }
                }
                let snapshot_holds = {
                    let policy = RunPolicy::default();
                    held(&Snapshot { strategy, policy: &policy, session: SessionState::Running, phases: &[], nodes })
                };
                for (h, by) in snapshot_holds {
                    if !nodes[h].apart.contains(&by) {
                        violations.push(format!("#{h} held by #{by}, not of its pairs"));
                    }
                }
            });
            prop_assert!(violations.is_empty(), "{violations:?}");
            prop_assert!(sim.nodes.iter().all(|n| n.state == Completed), "{:?}", sim.log);
        }

        #[test]
        fn sequential_never_runs_two(
            deps in dag(20),
            choices in prop::collection::vec(0usize..100, 0..50),
        ) {
            let nodes: Vec<Node> = deps.iter().map(|d| node(d)).collect();
            let n = nodes.len();
            let mut order = Vec::new();
            let sim = drive(Sim::new(Strategy::Sequential, nodes), &choices, |nodes, i| {
                assert!(nodes.iter().all(|n| n.state != Running), "two running");
                order.push(i);
            });
            prop_assert_eq!(order, (0..n).collect::<Vec<_>>());
            prop_assert_eq!(sim.log.last().map(String::as_str), Some("session completed"));
        }

        #[test]
        fn pipeline_never_starts_a_stage_early(
            spec in prop::collection::vec((1u32..5, prop::collection::vec(0usize..1_000, 0..=2)), 1..20),
            choices in prop::collection::vec(0usize..100, 0..50),
        ) {
            // Dependencies only on earlier nodes of lower stages, as plans require.
            let nodes: Vec<Node> = spec
                .iter()
                .enumerate()
                .map(|(i, (stage, picks))| {
                    let mut deps: Vec<usize> = picks
                        .iter()
                        .filter(|_| i > 0)
                        .map(|p| p % i.max(1))
                        .filter(|&d| spec[d].0 < *stage)
                        .collect();
                    deps.dedup();
                    in_stage(*stage, &deps)
                })
                .collect();
            let mut violations = Vec::new();
            let sim = drive(Sim::new(Strategy::Pipeline, nodes), &choices, |nodes, i| {
                let s = nodes[i].stage;
                if nodes.iter().any(|n| n.stage < s && !n.state.is_terminal()) {
                    violations.push(format!("#{i} (stage {s:?}) started early"));
                }
            });
            prop_assert!(violations.is_empty(), "{violations:?}");
            prop_assert_eq!(sim.log.last().map(String::as_str), Some("session completed"));
        }

        /// Arbitrary snapshots (bad indices included): no panic, idempotent, and every action
        /// names a real node or phase in a state it applies to.
        #[test]
        fn step_never_panics(
            raw in prop::collection::vec((
                prop::sample::select(AgentState::ALL),
                prop::bool::ANY,
                prop::bool::ANY,
                prop::collection::vec(prop::option::weighted(0.9, 0usize..12).prop_map(|d| d.unwrap_or(usize::MAX)), 0..4),
                prop::option::of(prop::option::weighted(0.9, 0u32..5).prop_map(|p| p.unwrap_or(u32::MAX))),
                prop::option::of(0u32..4),
                prop::collection::vec(prop::option::weighted(0.9, 0usize..12).prop_map(|d| d.unwrap_or(usize::MAX)), 0..3),
            ), 0..12),
            phases in prop::collection::vec(prop::sample::select(PhaseState::ALL), 0..4),
            session in prop::sample::select(SessionState::ALL),
            strategy in prop::sample::select(Strategy::ALL),
            continue_ in prop::bool::ANY,
            max_parallel in prop::option::of(0u32..3),
        ) {
            let nodes: Vec<Node> = raw
                .into_iter()
                .map(|(state, paused, managed, deps, phase, stage, apart)| Node { state, paused, managed, deps, phase, stage, apart })
                .collect();
            let policy = RunPolicy {
                on_failure: if continue_ { OnFailure::Continue } else { OnFailure::FailSession },
                max_parallel,
                ..RunPolicy::default()
            };
            let s = Snapshot { strategy, policy: &policy, session, phases: &phases, nodes: &nodes };
            let actions = step(&s);
            prop_assert_eq!(&step(&s), &actions);
            prop_assert_eq!(step_and_holds(&s), (actions.clone(), held(&s)));
            for (h, by) in held(&s) {
                prop_assert!(nodes[h].apart.contains(&by) && !actions.contains(&Action::Start(h)));
            }
            for a in &actions {
                match a {
                    Action::Start(i) => {
                        let n = &nodes[*i];
                        prop_assert!(n.managed && n.state == Pending && !n.paused);
                    }
                    Action::Cancel(i, _) => prop_assert!(nodes[*i].managed && nodes[*i].state == Pending),
                    Action::StartPhase(p) => prop_assert!(matches!(phases[*p], PhaseState::Planned)),
                    Action::CompletePhase(p) => prop_assert_eq!(phases[*p], PhaseState::Running),
                    Action::CompleteSession | Action::FailSession(_) => {}
                }
            }
            if session != SessionState::Running {
                prop_assert!(actions.is_empty());
            }
        }
    }
}
