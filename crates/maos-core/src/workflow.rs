//! The workflow: the phase list captured when a session is created (never recomputed), with
//! explicit phase checkpoints and an explicit completion fact.

use serde::{Deserialize, Serialize};

use crate::Ts;
use crate::state::{PhaseOp, PhaseState, TransitionError, named_enum};

named_enum! {
    /// Outcome of a phase checkpoint.
    pub enum CheckpointResult("checkpoint result") {
        /// The phase is done.
        Passed => "passed",
        /// The phase failed its checkpoint and can be retried.
        Failed => "failed",
    }
}

impl CheckpointResult {
    /// The phase operation this result applies.
    fn op(self) -> PhaseOp {
        match self {
            Self::Passed => PhaseOp::Complete,
            Self::Failed => PhaseOp::Fail,
        }
    }
}

/// One phase of a workflow.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Phase {
    /// Unique name within the workflow.
    pub name: String,
    /// Lifecycle state.
    pub state: PhaseState,
    /// How many times the phase was started (retries included).
    #[serde(default)]
    pub attempts: u32,
    /// When the latest attempt started.
    pub started_at: Option<Ts>,
    /// When the latest attempt ended (checkpoint or skip).
    pub ended_at: Option<Ts>,
    /// Result of the latest checkpoint.
    pub result: Option<CheckpointResult>,
    /// Free JSON recorded at the checkpoint (outputs, evidence, files, commands); `Null` when none.
    #[serde(default)]
    pub artifacts: serde_json::Value,
    /// Data handed to the next phase; `Null` when none.
    #[serde(default)]
    pub handoff: serde_json::Value,
}

impl Phase {
    /// A planned phase that never ran.
    pub fn planned(name: String) -> Self {
        Self {
            name,
            state: PhaseState::Planned,
            attempts: 0,
            started_at: None,
            ended_at: None,
            result: None,
            artifacts: serde_json::Value::Null,
            handoff: serde_json::Value::Null,
        }
    }

    /// Completed or skipped: the workflow has moved past it.
    pub fn is_done(&self) -> bool {
        self.state.is_terminal()
    }
}

/// The workflow of a session.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Workflow {
    /// The phases, in order.
    pub phases: Vec<Phase>,
    /// Set when the last remaining phase finished or was skipped.
    pub completed_at: Option<Ts>,
}

/// How a phase number counts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Base {
    /// The first phase is 0.
    Zero,
    /// The first phase is 1 (what users type).
    One,
}

impl Base {
    /// The number of the first phase.
    fn first(self) -> usize {
        match self {
            Self::Zero => 0,
            Self::One => 1,
        }
    }
}

/// A reference to a phase: by name, or by number.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PhaseRef {
    /// The phase's exact name.
    Name(String),
    /// The phase's number, counted from `base`.
    Index {
        /// The number as given.
        index: usize,
        /// How it counts.
        base: Base,
    },
}

impl PhaseRef {
    /// CLI form: an exact phase name wins; else a number read 1-based ("2" = second phase).
    ///
    /// Without the phase list this cannot see names, so a number always becomes a 1-based
    /// index; use [`Workflow::resolve_cli`] to let a phase literally named "2" win.
    pub fn parse_cli(s: &str) -> PhaseRef {
        let s = s.trim();
        match s.parse::<usize>() {
            Ok(index) if s.bytes().all(|b| b.is_ascii_digit()) => PhaseRef::Index {
                index,
                base: Base::One,
            },
            _ => PhaseRef::Name(s.to_owned()),
        }
    }
}

/// A refused workflow operation.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum WorkflowError {
    /// A phase name is empty or blank.
    #[error("a phase name cannot be empty")]
    EmptyName,
    /// Two phases would share a name.
    #[error("a phase named {0} already exists; phase names must be unique")]
    DuplicateName(String),
    /// No phase has this name (the name, then every phase name).
    #[error("no phase named {0} (phases: {names})", names = list_names(.1))]
    UnknownPhase(String, Vec<String>),
    /// A phase number outside the workflow.
    #[error("phase {index} does not exist ({})", range_hint(*.base, *.len))]
    OutOfRange {
        /// The number as given.
        index: usize,
        /// How it counts.
        base: Base,
        /// How many phases there are.
        len: usize,
    },
    /// The operation needs the current phase.
    #[error("phase {phase} is not the current phase ({})", current_hint(.current.as_deref()))]
    NotCurrent {
        /// The phase named in the operation.
        phase: String,
        /// The current phase, `None` when every phase is done.
        current: Option<String>,
    },
    /// The workflow has no phases.
    #[error("the workflow has no phases")]
    NoPhases,
    /// The workflow already completed.
    #[error("the workflow is already complete")]
    Complete,
    /// Finishing needs a running phase.
    #[error("no phase is running")]
    NothingRunning,
    /// The phase's state refuses the operation.
    #[error(transparent)]
    Transition(#[from] TransitionError),
}

fn list_names(names: &[String]) -> String {
    if names.is_empty() {
        "none".to_owned()
    } else {
        names.join(", ")
    }
}

fn range_hint(base: Base, len: usize) -> String {
    match len {
        0 => "the workflow has no phases".to_owned(),
        _ => format!(
            "phases are numbered {}..={}",
            base.first(),
            base.first() + len - 1
        ),
    }
}

fn current_hint(current: Option<&str>) -> String {
    match current {
        Some(c) => format!("current: {c}"),
        None => "the workflow is complete".to_owned(),
    }
}

impl Workflow {
    /// A workflow of planned phases. Names are trimmed; empty and duplicate names are refused.
    pub fn new(names: Vec<String>) -> Result<Self, WorkflowError> {
        let mut wf = Self::default();
        for name in names {
            wf.push_phase(name)?;
        }
        Ok(wf)
    }

    /// Validate and append a planned phase; returns its index.
    fn push_phase(&mut self, name: String) -> Result<usize, WorkflowError> {
        let name = name.trim();
        if name.is_empty() {
            return Err(WorkflowError::EmptyName);
        }
        if self.phases.iter().any(|p| p.name == name) {
            return Err(WorkflowError::DuplicateName(name.to_owned()));
        }
        self.phases.push(Phase::planned(name.to_owned()));
        Ok(self.phases.len() - 1)
    }

    /// The phase names, in order.
    pub fn names(&self) -> Vec<String> {
        self.phases.iter().map(|p| p.name.clone()).collect()
    }

    /// The 0-based index a reference names.
    pub fn resolve(&self, r: &PhaseRef) -> Result<usize, WorkflowError> {
        if self.phases.is_empty() {
            return Err(WorkflowError::NoPhases);
        }
        match r {
            PhaseRef::Name(name) => {
                let name = name.trim();
                self.phases
                    .iter()
                    .position(|p| p.name == name)
                    .ok_or_else(|| WorkflowError::UnknownPhase(name.to_owned(), self.names()))
            }
            &PhaseRef::Index { index, base } => index
                .checked_sub(base.first())
                .filter(|&i| i < self.phases.len())
                .ok_or(WorkflowError::OutOfRange {
                    index,
                    base,
                    len: self.phases.len(),
                }),
        }
    }

    /// CLI form in full: an exact phase name wins; else a number read 1-based.
    pub fn resolve_cli(&self, s: &str) -> Result<usize, WorkflowError> {
        self.resolve(&PhaseRef::Name(s.to_owned()))
            .or_else(|_| self.resolve(&PhaseRef::parse_cli(s)))
    }

    /// Index of the current phase: the first phase not Completed/Skipped. None when there are no phases or all are done.
    pub fn current(&self) -> Option<usize> {
        self.phases.iter().position(|p| !p.is_done())
    }

    /// The running phase, if any (at most one phase runs at a time).
    pub fn running(&self) -> Option<usize> {
        self.phases
            .iter()
            .position(|p| p.state == PhaseState::Running)
    }

    /// True once completion was recorded.
    pub fn is_complete(&self) -> bool {
        self.completed_at.is_some()
    }

    /// (k, n) for display "phase k/n", 1-based; k never exceeds n: complete => (n, n); no phases => (0, 0); otherwise current+1.
    pub fn position(&self) -> (usize, usize) {
        let n = self.phases.len();
        match self.current() {
            Some(c) if !self.is_complete() => (c + 1, n),
            _ => (n, n),
        }
    }

    /// Checks shared by the operations on one phase: not complete, idx exists, idx is current.
    fn check_current(&self, idx: usize) -> Result<(), WorkflowError> {
        if self.is_complete() {
            return Err(WorkflowError::Complete);
        }
        let phase = self.phase(idx)?;
        let current = self.current();
        if current != Some(idx) {
            return Err(WorkflowError::NotCurrent {
                phase: phase.name.clone(),
                current: current
                    .and_then(|c| self.phases.get(c))
                    .map(|p| p.name.clone()),
            });
        }
        Ok(())
    }

    /// The phase at a 0-based index, or why not.
    pub fn phase(&self, idx: usize) -> Result<&Phase, WorkflowError> {
        if self.phases.is_empty() {
            return Err(WorkflowError::NoPhases);
        }
        self.phases.get(idx).ok_or(WorkflowError::OutOfRange {
            index: idx,
            base: Base::Zero,
            len: self.phases.len(),
        })
    }

    fn phase_mut(&mut self, idx: usize) -> Result<&mut Phase, WorkflowError> {
        self.phase(idx)?;
        self.phases.get_mut(idx).ok_or(WorkflowError::NoPhases)
    }

    /// Record completion when no phase remains; true when this call completed the workflow.
    fn complete_if_done(&mut self, now: Ts) -> bool {
        let done = !self.is_complete()
            && !self.phases.is_empty()
            && self.phases.iter().all(Phase::is_done);
        if done {
            self.completed_at = Some(now);
        }
        done
    }

    /// Start (or retry after a failed checkpoint) the phase at idx. It must be the current phase; Planned|Failed -> Running; attempts += 1; started_at = now; ended_at = None; result = None.
    pub fn start(&mut self, idx: usize, now: Ts) -> Result<(), WorkflowError> {
        self.check_current(idx)?;
        let phase = self.phase_mut(idx)?;
        phase.state = phase.state.apply(PhaseOp::Start)?;
        phase.attempts = phase.attempts.saturating_add(1);
        phase.started_at = Some(now);
        phase.ended_at = None;
        phase.result = None;
        Ok(())
    }

    /// Finish the running phase at idx with its checkpoint result and artifacts. Passed -> Completed, Failed -> Failed (retryable). Sets ended_at.
    /// Returns true when this completed the workflow (last remaining phase done): then completed_at = now is recorded (explicit fact).
    pub fn finish(
        &mut self,
        idx: usize,
        result: CheckpointResult,
        artifacts: serde_json::Value,
        now: Ts,
    ) -> Result<bool, WorkflowError> {
        self.check_current(idx)?;
        if self.running() != Some(idx) {
            return Err(WorkflowError::NothingRunning);
        }
        let phase = self.phase_mut(idx)?;
        phase.state = phase.state.apply(result.op())?;
        phase.ended_at = Some(now);
        phase.result = Some(result);
        phase.artifacts = artifacts;
        Ok(self.complete_if_done(now))
    }

    /// Skip phase idx (must be current; Planned or Running). Returns true when this completed the workflow.
    pub fn skip(&mut self, idx: usize, now: Ts) -> Result<bool, WorkflowError> {
        self.check_current(idx)?;
        let phase = self.phase_mut(idx)?;
        phase.state = phase.state.apply(PhaseOp::Skip)?;
        phase.ended_at = Some(now);
        Ok(self.complete_if_done(now))
    }

    /// The session ended while a phase ran: that phase ends with it, `failed` when the session
    /// failed, else `skipped` (cancelled, or completed by hand), so that a finished session
    /// never shows a phase still running. The workflow is not completed by this (its phases
    /// did not all pass). Returns the phase's index and new state; None when none ran.
    pub fn end_with_session(&mut self, failed: bool, now: Ts) -> Option<(usize, PhaseState)> {
        let idx = self.running()?;
        let phase = self.phases.get_mut(idx)?;
        let op = if failed { PhaseOp::Fail } else { PhaseOp::Skip };
        phase.state = phase.state.apply(op).ok()?;
        phase.ended_at = Some(now);
        if failed {
            phase.result = Some(CheckpointResult::Failed);
        }
        Some((idx, phase.state))
    }

    /// Record the handoff data on phase idx (the data handed to the next phase).
    pub fn set_handoff(
        &mut self,
        idx: usize,
        data: serde_json::Value,
    ) -> Result<(), WorkflowError> {
        self.phase_mut(idx)?.handoff = data;
        Ok(())
    }

    /// Explicit plan growth: append a phase (refused when complete or name duplicate). Returns its index.
    pub fn add_phase(&mut self, name: String) -> Result<usize, WorkflowError> {
        if self.is_complete() {
            return Err(WorkflowError::Complete);
        }
        self.push_phase(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::{TimeZone, Utc};
    use proptest::prelude::{prop, prop_assert, prop_assert_eq, proptest};
    use serde_json::json;

    fn t(secs: i64) -> Ts {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap()
    }

    fn wf(names: &[&str]) -> Workflow {
        Workflow::new(names.iter().map(|s| s.to_string()).collect()).unwrap()
    }

    const SIX: [&str; 6] = ["plan", "design", "build", "test", "review", "ship"];

    #[test]
    fn a_phase_ends_with_its_session_without_completing_the_workflow() {
        let mut w = wf(&["build", "ship"]);
        assert_eq!(w.end_with_session(true, t(5)), None, "nothing runs");
        w.start(0, t(0)).unwrap();
        assert_eq!(
            w.end_with_session(true, t(5)),
            Some((0, PhaseState::Failed))
        );
        assert_eq!(w.phases[0].ended_at, Some(t(5)));
        assert_eq!(w.phases[0].result, Some(CheckpointResult::Failed));
        assert_eq!(w.running(), None);
        let mut w = wf(&["only"]);
        w.start(0, t(0)).unwrap();
        assert_eq!(
            w.end_with_session(false, t(5)),
            Some((0, PhaseState::Skipped))
        );
        assert!(
            !w.is_complete(),
            "a cancelled session's workflow did not complete"
        );
    }

    #[test]
    fn zero_phases() {
        let mut w = wf(&[]);
        assert_eq!(w.position(), (0, 0));
        assert_eq!(w.current(), None);
        assert_eq!(w.running(), None);
        assert!(!w.is_complete());
        assert_eq!(w.start(0, t(0)), Err(WorkflowError::NoPhases));
        assert_eq!(w.skip(0, t(0)), Err(WorkflowError::NoPhases));
        assert_eq!(
            w.finish(0, CheckpointResult::Passed, json!(null), t(0)),
            Err(WorkflowError::NoPhases)
        );
        assert_eq!(
            w.resolve(&PhaseRef::parse_cli("1")),
            Err(WorkflowError::NoPhases)
        );
        assert_eq!(
            w.resolve(&PhaseRef::Name("a".into())),
            Err(WorkflowError::NoPhases)
        );
        assert_eq!(w.set_handoff(0, json!(1)), Err(WorkflowError::NoPhases));
        assert_eq!(
            WorkflowError::NoPhases.to_string(),
            "the workflow has no phases"
        );
        // Plan growth on an empty workflow works.
        assert_eq!(w.add_phase("late".into()), Ok(0));
        assert_eq!(w.position(), (1, 1));
    }

    #[test]
    fn one_phase() {
        let mut w = wf(&["only"]);
        assert_eq!(w.position(), (1, 1));
        w.start(0, t(0)).unwrap();
        assert_eq!(w.running(), Some(0));
        assert_eq!(w.position(), (1, 1));
        let done = w
            .finish(
                0,
                CheckpointResult::Passed,
                json!({"files": ["a.rs"]}),
                t(10),
            )
            .unwrap();
        assert!(done);
        assert!(w.is_complete());
        assert_eq!(w.completed_at, Some(t(10)));
        assert_eq!(w.position(), (1, 1));
        assert_eq!(w.current(), None);
        let p = &w.phases[0];
        assert_eq!(p.state, PhaseState::Completed);
        assert_eq!((p.started_at, p.ended_at), (Some(t(0)), Some(t(10))));
        assert_eq!(p.result, Some(CheckpointResult::Passed));
        assert_eq!(p.artifacts, json!({"files": ["a.rs"]}));
        assert_eq!(w.start(0, t(11)), Err(WorkflowError::Complete));
        assert_eq!(w.skip(0, t(11)), Err(WorkflowError::Complete));
        assert_eq!(
            WorkflowError::Complete.to_string(),
            "the workflow is already complete"
        );
    }

    /// The seed bug was "phase 6/6" turning into "7 > 6" (or "6 > 6" zero-based) at the end.
    #[test]
    fn six_phases_position_never_exceeds_total() {
        let mut w = wf(&SIX);
        assert_eq!(w.position(), (1, 6));
        for (i, name) in SIX.iter().enumerate() {
            assert_eq!(w.position(), (i + 1, 6));
            w.start(i, t(i as i64 * 100)).unwrap();
            assert_eq!(w.position(), (i + 1, 6));
            w.set_handoff(i, json!({ "from": name })).unwrap();
            let done = w
                .finish(
                    i,
                    CheckpointResult::Passed,
                    json!(null),
                    t(i as i64 * 100 + 50),
                )
                .unwrap();
            assert_eq!(done, i == 5);
            let (k, n) = w.position();
            assert!(k <= n, "{k} > {n}");
        }
        assert_eq!(w.position(), (6, 6));
        assert!(w.is_complete());
        assert_eq!(w.phases[2].handoff, json!({"from": "build"}));
    }

    #[test]
    fn phase_ref_resolution() {
        let w = wf(&SIX);
        let ok: &[(PhaseRef, usize)] = &[
            (
                PhaseRef::Index {
                    index: 0,
                    base: Base::Zero,
                },
                0,
            ),
            (
                PhaseRef::Index {
                    index: 5,
                    base: Base::Zero,
                },
                5,
            ),
            (
                PhaseRef::Index {
                    index: 1,
                    base: Base::One,
                },
                0,
            ),
            (
                PhaseRef::Index {
                    index: 6,
                    base: Base::One,
                },
                5,
            ),
            (PhaseRef::Name("build".into()), 2),
            (PhaseRef::parse_cli("2"), 1),
            (PhaseRef::parse_cli(" 6 "), 5),
            (PhaseRef::parse_cli("test"), 3),
        ];
        for (r, want) in ok {
            assert_eq!(w.resolve(r), Ok(*want), "{r:?}");
        }
        let bad: &[(PhaseRef, &str)] = &[
            (
                PhaseRef::Index {
                    index: 7,
                    base: Base::One,
                },
                "phase 7 does not exist (phases are numbered 1..=6)",
            ),
            (
                PhaseRef::Index {
                    index: 0,
                    base: Base::One,
                },
                "phase 0 does not exist (phases are numbered 1..=6)",
            ),
            (
                PhaseRef::Index {
                    index: 6,
                    base: Base::Zero,
                },
                "phase 6 does not exist (phases are numbered 0..=5)",
            ),
            (
                PhaseRef::parse_cli("7"),
                "phase 7 does not exist (phases are numbered 1..=6)",
            ),
            (
                PhaseRef::Name("deploy".into()),
                "no phase named deploy (phases: plan, design, build, test, review, ship)",
            ),
        ];
        for (r, msg) in bad {
            assert_eq!(w.resolve(r).unwrap_err().to_string(), *msg, "{r:?}");
        }
        assert_eq!(
            PhaseRef::parse_cli("2"),
            PhaseRef::Index {
                index: 2,
                base: Base::One
            }
        );
        assert_eq!(PhaseRef::parse_cli("+2"), PhaseRef::Name("+2".into()));
        assert_eq!(PhaseRef::parse_cli("v2"), PhaseRef::Name("v2".into()));
    }

    #[test]
    fn resolve_cli_prefers_exact_name() {
        let w = wf(&["a", "1", "b"]);
        assert_eq!(w.resolve_cli("1"), Ok(1)); // the phase named "1", not the first phase
        assert_eq!(w.resolve_cli("3"), Ok(2)); // no such name: third phase
        assert_eq!(w.resolve_cli("b"), Ok(2));
        assert!(matches!(
            w.resolve_cli("4"),
            Err(WorkflowError::OutOfRange { .. })
        ));
        assert!(matches!(
            w.resolve_cli("zz"),
            Err(WorkflowError::UnknownPhase(..))
        ));
    }

    #[test]
    fn out_of_range_on_empty_message() {
        let e = WorkflowError::OutOfRange {
            index: 1,
            base: Base::One,
            len: 0,
        };
        assert_eq!(
            e.to_string(),
            "phase 1 does not exist (the workflow has no phases)"
        );
    }

    #[test]
    fn failed_checkpoint_then_retry_then_pass() {
        let mut w = wf(&["build", "test"]);
        w.start(0, t(0)).unwrap();
        let done = w
            .finish(
                0,
                CheckpointResult::Failed,
                json!({"error": "tests red"}),
                t(5),
            )
            .unwrap();
        assert!(!done);
        assert_eq!(w.phases[0].state, PhaseState::Failed);
        assert_eq!(w.phases[0].result, Some(CheckpointResult::Failed));
        assert_eq!(w.current(), Some(0));
        assert_eq!(w.running(), None);
        assert_eq!(w.position(), (1, 2));
        // A failed phase cannot be skipped past without a retry, nor finished again.
        assert_eq!(
            w.finish(0, CheckpointResult::Passed, json!(null), t(6)),
            Err(WorkflowError::NothingRunning)
        );
        w.start(0, t(10)).unwrap();
        let p = &w.phases[0];
        assert_eq!(p.attempts, 2);
        assert_eq!(
            (p.started_at, p.ended_at, p.result),
            (Some(t(10)), None, None)
        );
        assert!(
            !w.finish(0, CheckpointResult::Passed, json!(["ok"]), t(20))
                .unwrap()
        );
        assert_eq!(w.phases[0].state, PhaseState::Completed);
        assert_eq!(w.phases[0].artifacts, json!(["ok"]));
        assert_eq!(w.position(), (2, 2));
    }

    #[test]
    fn skip_last_phase_completes() {
        let mut w = wf(&["a", "b"]);
        assert!(!w.skip(0, t(1)).unwrap());
        w.start(1, t(2)).unwrap();
        assert!(w.skip(1, t(3)).unwrap()); // a running phase can be skipped
        assert!(w.is_complete());
        assert_eq!(w.completed_at, Some(t(3)));
        assert_eq!(w.position(), (2, 2));
        assert_eq!(w.phases[1].state, PhaseState::Skipped);
        assert_eq!(w.phases[1].ended_at, Some(t(3)));
    }

    #[test]
    fn non_current_phase_refused() {
        let mut w = wf(&["a", "b", "c"]);
        let e = w.start(1, t(0)).unwrap_err();
        assert_eq!(
            e,
            WorkflowError::NotCurrent {
                phase: "b".into(),
                current: Some("a".into())
            }
        );
        assert_eq!(
            e.to_string(),
            "phase b is not the current phase (current: a)"
        );
        assert!(matches!(
            w.skip(2, t(0)),
            Err(WorkflowError::NotCurrent { .. })
        ));
        w.start(0, t(0)).unwrap();
        // Starting the running phase again is a transition error.
        assert_eq!(
            w.start(0, t(1)).unwrap_err().to_string(),
            "cannot start phase in state running"
        );
        assert!(matches!(
            w.finish(1, CheckpointResult::Passed, json!(null), t(1)),
            Err(WorkflowError::NotCurrent { .. })
        ));
        // Out-of-range raw indexes are 0-based.
        assert_eq!(
            w.start(3, t(1)).unwrap_err().to_string(),
            "phase 3 does not exist (phases are numbered 0..=2)"
        );
        let e = WorkflowError::NotCurrent {
            phase: "b".into(),
            current: None,
        };
        assert_eq!(
            e.to_string(),
            "phase b is not the current phase (the workflow is complete)"
        );
        assert_eq!(
            WorkflowError::NothingRunning.to_string(),
            "no phase is running"
        );
    }

    #[test]
    fn finish_requires_running() {
        let mut w = wf(&["a"]);
        assert_eq!(
            w.finish(0, CheckpointResult::Passed, json!(null), t(0)),
            Err(WorkflowError::NothingRunning)
        );
    }

    #[test]
    fn add_phase_rules() {
        let mut w = wf(&["a"]);
        assert_eq!(w.add_phase("  b ".into()), Ok(1));
        assert_eq!(w.phases[1].name, "b");
        assert_eq!(
            w.add_phase("a".into()),
            Err(WorkflowError::DuplicateName("a".into()))
        );
        assert_eq!(w.add_phase(" ".into()), Err(WorkflowError::EmptyName));
        w.start(0, t(0)).unwrap();
        assert!(
            !w.finish(0, CheckpointResult::Passed, json!(null), t(1))
                .unwrap()
        );
        assert!(w.skip(1, t(2)).unwrap());
        assert_eq!(w.add_phase("c".into()), Err(WorkflowError::Complete));
    }

    #[test]
    fn new_refuses_bad_names() {
        let names = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        let e = Workflow::new(names(&["a", "b", " a "])).unwrap_err();
        assert_eq!(e, WorkflowError::DuplicateName("a".into()));
        assert_eq!(
            e.to_string(),
            "a phase named a already exists; phase names must be unique"
        );
        assert_eq!(
            Workflow::new(names(&["a", ""])),
            Err(WorkflowError::EmptyName)
        );
        let w = Workflow::new(names(&[" x "])).unwrap();
        assert_eq!(w.phases[0], Phase::planned("x".into()));
    }

    #[test]
    fn serde_shape() {
        let mut w = wf(&["a"]);
        w.start(0, t(0)).unwrap();
        let v = serde_json::to_value(&w).unwrap();
        assert_eq!(v["phases"][0]["state"], "running");
        assert_eq!(v["phases"][0]["artifacts"], json!(null));
        assert_eq!(v["completed_at"], json!(null));
        let back: Workflow = serde_json::from_value(v).unwrap();
        assert_eq!(back, w);
        // Missing free-JSON fields read as Null.
        let p: Phase = serde_json::from_value(json!({
            "name": "x", "state": "planned", "started_at": null, "ended_at": null, "result": null
        }))
        .unwrap();
        assert_eq!(p, Phase::planned("x".into()));
        assert_eq!(
            serde_json::to_value(CheckpointResult::Failed).unwrap(),
            "failed"
        );
    }

    #[derive(Clone, Copy, Debug)]
    enum Op {
        Start(usize),
        Finish(usize, bool),
        Skip(usize),
        Add,
    }

    /// Stands for "the current phase" so that walks make progress often.
    const CUR: usize = usize::MAX;

    fn op() -> impl proptest::strategy::Strategy<Value = Op> {
        use proptest::strategy::Strategy as _;
        prop::sample::select(&[0usize, 1, 2, 3, 4, 5, 6, 7, CUR, CUR, CUR, CUR][..]).prop_flat_map(
            |i| {
                prop::sample::select(vec![
                    Op::Start(i),
                    Op::Finish(i, true),
                    Op::Finish(i, false),
                    Op::Skip(i),
                    Op::Add,
                ])
            },
        )
    }

    proptest! {
        #[test]
        fn random_walks_keep_invariants(n in 0usize..7, ops in prop::collection::vec(op(), 0..60)) {
            let mut w = Workflow::new((0..n).map(|i| format!("p{i}")).collect()).unwrap();
            let mut added = 0;
            for (step, op) in ops.into_iter().enumerate() {
                let now = t(step as i64);
                let before = w.clone();
                let pick = |i: usize| if i == CUR { w.current().unwrap_or(0) } else { i };
                let op = match op {
                    Op::Start(i) => Op::Start(pick(i)),
                    Op::Finish(i, pass) => Op::Finish(pick(i), pass),
                    Op::Skip(i) => Op::Skip(pick(i)),
                    Op::Add => Op::Add,
                };
                let res = match op {
                    Op::Start(i) => w.start(i, now).map(|()| false),
                    Op::Finish(i, pass) => {
                        let r = if pass { CheckpointResult::Passed } else { CheckpointResult::Failed };
                        w.finish(i, r, serde_json::Value::Null, now)
                    }
                    Op::Skip(i) => w.skip(i, now),
                    Op::Add => {
                        added += 1;
                        w.add_phase(format!("added{added}")).map(|_| false)
                    }
                };
                match res {
                    Ok(completed) => {
                        prop_assert_eq!(completed, !before.is_complete() && w.is_complete());
                    }
                    Err(_) => prop_assert_eq!(&w, &before, "an error changes nothing"),
                }
                let running = w.phases.iter().filter(|p| p.state == PhaseState::Running).count();
                prop_assert!(running <= 1);
                let (k, total) = w.position();
                prop_assert!(k <= total, "{} > {}", k, total);
                prop_assert_eq!(total, w.phases.len());
                if let Some(r) = w.running() {
                    prop_assert_eq!(w.current(), Some(r));
                }
                prop_assert_eq!(w.is_complete(), !w.phases.is_empty() && w.current().is_none());
            }
        }
    }
}
