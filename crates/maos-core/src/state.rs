//! State machines for sessions, agents and phases, plus the scheduling strategy.
//!
//! Every machine is a const table of `(from, op, to)` rows looked up by [`transition`]; an op
//! with no row from the current state is a [`TransitionError`].

/// An unknown name for one of the domain enums.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {kind} {value:?} (expected {expected})")]
pub struct ParseEnumError {
    /// What was being parsed ("strategy", "session state", ...).
    pub kind: &'static str,
    /// The text as given.
    pub value: String,
    /// The accepted names, `|`-separated.
    pub expected: &'static str,
}

/// Defines a fieldless enum named by snake_case words: serde, `as_str`, `ALL`, `Display`, `FromStr`.
macro_rules! named_enum {
    (
        $(#[$meta:meta])*
        $vis:vis enum $name:ident ($kind:literal) {
            $(#[$vmeta0:meta])* $v0:ident => $s0:literal
            $(, $(#[$vmeta:meta])* $v:ident => $s:literal)* $(,)?
        }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
        #[serde(rename_all = "snake_case")]
        $vis enum $name {
            $(#[$vmeta0])* $v0,
            $($(#[$vmeta])* $v,)*
        }

        impl $name {
            /// Every variant, in declaration order.
            pub const ALL: &'static [Self] = &[Self::$v0 $(, Self::$v)*];

            /// The snake_case name (as serialized).
            pub fn as_str(self) -> &'static str {
                match self {
                    Self::$v0 => $s0,
                    $(Self::$v => $s,)*
                }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::state::ParseEnumError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                let word = s.trim();
                Self::ALL
                    .iter()
                    .copied()
                    .find(|v| v.as_str().eq_ignore_ascii_case(word))
                    .ok_or_else(|| $crate::state::ParseEnumError {
                        kind: $kind,
                        value: s.to_owned(),
                        expected: concat!($s0 $(, "|", $s)*),
                    })
            }
        }
    };
}
pub(crate) use named_enum;

named_enum! {
    /// Lifecycle of a session.
    pub enum SessionState("session state") {
        Created => "created",
        Running => "running",
        Paused => "paused",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
    }
}

named_enum! {
    /// An operation on a session.
    pub enum SessionOp("session operation") {
        Start => "start",
        Pause => "pause",
        Resume => "resume",
        Complete => "complete",
        Fail => "fail",
        Cancel => "cancel",
    }
}

named_enum! {
    /// Lifecycle of an agent. Paused is a flag on top of `Running` (see [`agent_set_paused`]).
    pub enum AgentState("agent state") {
        Pending => "pending",
        Running => "running",
        Resumable => "resumable",
        Completed => "completed",
        Failed => "failed",
        Cancelled => "cancelled",
        /// An agent CLI window (or a subagent of it) that ended: the CLI said so, or its
        /// process is gone. Whether its work was done is not known; it is over all the same.
        Ended => "ended",
    }
}

named_enum! {
    /// An operation on an agent.
    pub enum AgentOp("agent operation") {
        Start => "start",
        Interrupt => "interrupt",
        Resume => "resume",
        Complete => "complete",
        Fail => "fail",
        Cancel => "cancel",
        /// Its CLI window ended.
        End => "end",
    }
}

named_enum! {
    /// Lifecycle of a workflow phase. `Failed` is retryable, so not terminal.
    pub enum PhaseState("phase state") {
        Planned => "planned",
        Running => "running",
        Completed => "completed",
        Failed => "failed",
        Skipped => "skipped",
    }
}

named_enum! {
    /// An operation on a phase.
    pub enum PhaseOp("phase operation") {
        Start => "start",
        Complete => "complete",
        Fail => "fail",
        Skip => "skip",
    }
}

named_enum! {
    /// How a session's pending agents are started.
    #[derive(Default)]
    pub enum Strategy("strategy") {
        /// All pending agents start.
        #[default]
        Parallel => "parallel",
        /// One at a time, in registration order.
        Sequential => "sequential",
        /// An agent starts when all its dependencies completed.
        Adaptive => "adaptive",
        /// Agents grouped in stages; stage k starts when stage k-1 completed.
        Pipeline => "pipeline",
    }
}

/// An operation that is not allowed from the current state.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("cannot {op} {entity} in state {from}")]
pub struct TransitionError {
    /// "session", "agent" or "phase".
    pub entity: &'static str,
    /// The current state's name.
    pub from: &'static str,
    /// The refused operation's verb.
    pub op: &'static str,
}

/// Legal session transitions.
pub const SESSION_TRANSITIONS: &[(SessionState, SessionOp, SessionState)] = {
    use SessionOp as O;
    use SessionState as S;
    &[
        (S::Created, O::Start, S::Running),
        (S::Created, O::Cancel, S::Cancelled),
        (S::Running, O::Pause, S::Paused),
        (S::Running, O::Complete, S::Completed),
        (S::Running, O::Fail, S::Failed),
        (S::Running, O::Cancel, S::Cancelled),
        (S::Paused, O::Resume, S::Running),
        (S::Paused, O::Complete, S::Completed),
        (S::Paused, O::Fail, S::Failed),
        (S::Paused, O::Cancel, S::Cancelled),
    ]
};

/// Legal agent transitions.
pub const AGENT_TRANSITIONS: &[(AgentState, AgentOp, AgentState)] = {
    use AgentOp as O;
    use AgentState as S;
    &[
        (S::Pending, O::Start, S::Running),
        (S::Pending, O::Cancel, S::Cancelled),
        (S::Running, O::Complete, S::Completed),
        (S::Running, O::Fail, S::Failed),
        (S::Running, O::Cancel, S::Cancelled),
        (S::Running, O::Interrupt, S::Resumable),
        (S::Resumable, O::Resume, S::Running),
        (S::Resumable, O::Fail, S::Failed),
        (S::Resumable, O::Cancel, S::Cancelled),
        (S::Pending, O::End, S::Ended),
        (S::Running, O::End, S::Ended),
        (S::Resumable, O::End, S::Ended),
    ]
};

/// Legal phase transitions.
pub const PHASE_TRANSITIONS: &[(PhaseState, PhaseOp, PhaseState)] = {
    use PhaseOp as O;
    use PhaseState as S;
    &[
        (S::Planned, O::Start, S::Running),
        (S::Planned, O::Skip, S::Skipped),
        (S::Failed, O::Start, S::Running),
        (S::Running, O::Complete, S::Completed),
        (S::Running, O::Fail, S::Failed),
        (S::Running, O::Skip, S::Skipped),
    ]
};

/// Terminal session states (no way out).
pub const SESSION_TERMINAL: &[SessionState] = &[
    SessionState::Completed,
    SessionState::Failed,
    SessionState::Cancelled,
];
/// Terminal agent states (no way out).
pub const AGENT_TERMINAL: &[AgentState] = &[
    AgentState::Completed,
    AgentState::Failed,
    AgentState::Cancelled,
    AgentState::Ended,
];
/// Terminal phase states (no way out; `Failed` can be retried).
pub const PHASE_TERMINAL: &[PhaseState] = &[PhaseState::Completed, PhaseState::Skipped];

/// Look up `(from, op)` in a transition table: the target state, or `None` when illegal.
pub fn transition<S: Copy + Eq, O: Copy + Eq>(table: &[(S, O, S)], from: S, op: O) -> Option<S> {
    table
        .iter()
        .find(|(f, o, _)| *f == from && *o == op)
        .map(|&(_, _, to)| to)
}

macro_rules! machine {
    ($state:ident, $op:ident, $entity:literal, $table:ident, $terminal:ident) => {
        impl $state {
            /// Apply an operation: the next state, or an error naming the current state.
            pub fn apply(self, op: $op) -> Result<Self, TransitionError> {
                transition($table, self, op).ok_or(TransitionError {
                    entity: $entity,
                    from: self.as_str(),
                    op: op.as_str(),
                })
            }

            /// True for a final state: every operation from it is refused.
            pub fn is_terminal(self) -> bool {
                $terminal.contains(&self)
            }
        }
    };
}

machine!(
    SessionState,
    SessionOp,
    "session",
    SESSION_TRANSITIONS,
    SESSION_TERMINAL
);
machine!(
    AgentState,
    AgentOp,
    "agent",
    AGENT_TRANSITIONS,
    AGENT_TERMINAL
);
machine!(
    PhaseState,
    PhaseOp,
    "phase",
    PHASE_TRANSITIONS,
    PHASE_TERMINAL
);

impl SessionState {
    /// `maos retry` of a session with failed agents: a failed session runs again (the one way
    /// out of a terminal state, outside the table, whose terminal states have none); a live
    /// one stays as it is. Completed and cancelled sessions are not retried.
    pub fn retry(self) -> Result<Self, TransitionError> {
        match self {
            Self::Failed => Ok(Self::Running),
            Self::Running | Self::Paused => Ok(self),
            _ => Err(TransitionError {
                entity: "session",
                from: self.as_str(),
                op: "retry",
            }),
        }
    }
}

impl AgentState {
    /// Got to its end: completed, or a CLI window that ended. Failed and cancelled agents are
    /// final too, but not done (what `ps`, `status` and the dashboard count as done).
    pub fn is_done(self) -> bool {
        matches!(self, Self::Completed | Self::Ended)
    }

    /// `maos retry` of a failed or cancelled (managed) agent: a new attempt, pending until the
    /// scheduler starts it.
    pub fn retry(self) -> Result<Self, TransitionError> {
        match self {
            Self::Failed | Self::Cancelled => Ok(Self::Pending),
            _ => Err(TransitionError {
                entity: "agent",
                from: self.as_str(),
                op: "retry",
            }),
        }
    }
}

/// Pause flag on top of Running: only a Running, unpaused agent can be paused; only a paused one resumed.
pub fn agent_set_paused(
    state: AgentState,
    paused: bool,
    pause: bool,
) -> Result<(), TransitionError> {
    // For a running agent: (currently paused, pause wanted) -> the `from` to report when refused.
    const FLAG: &[(bool, bool, Option<&str>)] = &[
        (false, true, None),
        (true, false, None),
        (true, true, Some("running (paused)")),
        (false, false, Some("running (not paused)")),
    ];
    let op = if pause { "pause" } else { "resume" };
    let from = match state {
        AgentState::Running => FLAG
            .iter()
            .find(|&&(p, want, _)| p == paused && want == pause)
            .and_then(|&(_, _, from)| from),
        other => Some(other.as_str()),
    };
    match from {
        None => Ok(()),
        Some(from) => Err(TransitionError {
            entity: "agent",
            from,
            op,
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::{TestCaseError, prop, prop_assert, prop_assert_eq, proptest};
    use proptest::strategy::Strategy as Gen;
    use std::str::FromStr;

    /// Check one machine against an expected matrix: one row per state (in `ALL` order), one
    /// column per op (in `ALL` order); `None` = illegal.
    fn check_matrix<S, O, const N: usize>(
        states: &[S],
        ops: &[O],
        expected: &[(S, [Option<S>; N])],
        apply: impl Fn(S, O) -> Result<S, TransitionError>,
        name: impl Fn(S) -> &'static str,
        op_name: impl Fn(O) -> &'static str,
        entity: &str,
    ) where
        S: Copy + Eq + std::fmt::Debug,
        O: Copy + std::fmt::Debug,
    {
        assert_eq!(ops.len(), N, "matrix has one column per op");
        assert_eq!(
            expected.iter().map(|r| r.0).collect::<Vec<_>>(),
            states.to_vec(),
            "matrix has one row per state, in ALL order"
        );
        for (from, row) in expected {
            for (op, want) in ops.iter().zip(row) {
                let got = apply(*from, *op);
                match want {
                    Some(to) => assert_eq!(got, Ok(*to), "{from:?} --{op:?}-->"),
                    None => {
                        let err = got.expect_err(&format!("{from:?} --{op:?}--> must be refused"));
                        assert_eq!(err.entity, entity);
                        assert_eq!(err.from, name(*from));
                        assert_eq!(err.op, op_name(*op));
                        assert_eq!(
                            err.to_string(),
                            format!("cannot {} {entity} in state {}", op_name(*op), name(*from))
                        );
                    }
                }
            }
        }
    }

    #[test]
    fn session_matrix() {
        use SessionState::*;
        const X: Option<SessionState> = None;
        // columns: start, pause, resume, complete, fail, cancel
        let expected = [
            (Created, [Some(Running), X, X, X, X, Some(Cancelled)]),
            (
                Running,
                [
                    X,
                    Some(Paused),
                    X,
                    Some(Completed),
                    Some(Failed),
                    Some(Cancelled),
                ],
            ),
            (
                Paused,
                [
                    X,
                    X,
                    Some(Running),
                    Some(Completed),
                    Some(Failed),
                    Some(Cancelled),
                ],
            ),
            (Completed, [X, X, X, X, X, X]),
            (Failed, [X, X, X, X, X, X]),
            (Cancelled, [X, X, X, X, X, X]),
        ];
        check_matrix(
            SessionState::ALL,
            SessionOp::ALL,
            &expected,
            SessionState::apply,
            SessionState::as_str,
            SessionOp::as_str,
            "session",
        );
    }

    #[test]
    fn agent_matrix() {
        use AgentState::*;
        const X: Option<AgentState> = None;
        // columns: start, interrupt, resume, complete, fail, cancel, end
        let expected = [
            (
                Pending,
                [Some(Running), X, X, X, X, Some(Cancelled), Some(Ended)],
            ),
            (
                Running,
                [
                    X,
                    Some(Resumable),
                    X,
                    Some(Completed),
                    Some(Failed),
                    Some(Cancelled),
                    Some(Ended),
                ],
            ),
            (
                Resumable,
                [
                    X,
                    X,
                    Some(Running),
                    X,
                    Some(Failed),
                    Some(Cancelled),
                    Some(Ended),
                ],
            ),
            (Completed, [X, X, X, X, X, X, X]),
            (Failed, [X, X, X, X, X, X, X]),
            (Cancelled, [X, X, X, X, X, X, X]),
            (Ended, [X, X, X, X, X, X, X]),
        ];
        check_matrix(
            AgentState::ALL,
            AgentOp::ALL,
            &expected,
            AgentState::apply,
            AgentState::as_str,
            AgentOp::as_str,
            "agent",
        );
    }

    #[test]
    fn phase_matrix() {
        use PhaseState::*;
        const X: Option<PhaseState> = None;
        // columns: start, complete, fail, skip
        let expected = [
            (Planned, [Some(Running), X, X, Some(Skipped)]),
            (Running, [X, Some(Completed), Some(Failed), Some(Skipped)]),
            (Completed, [X, X, X, X]),
            (Failed, [Some(Running), X, X, X]),
            (Skipped, [X, X, X, X]),
        ];
        check_matrix(
            PhaseState::ALL,
            PhaseOp::ALL,
            &expected,
            PhaseState::apply,
            PhaseState::as_str,
            PhaseOp::as_str,
            "phase",
        );
    }

    #[test]
    fn terminal_sets() {
        let session: Vec<_> = SessionState::ALL.iter().map(|s| s.is_terminal()).collect();
        assert_eq!(session, [false, false, false, true, true, true]);
        let agent: Vec<_> = AgentState::ALL.iter().map(|s| s.is_terminal()).collect();
        assert_eq!(agent, [false, false, false, true, true, true, true]);
        let phase: Vec<_> = PhaseState::ALL.iter().map(|s| s.is_terminal()).collect();
        assert_eq!(phase, [false, false, true, false, true]);
    }

    /// Terminal exactly when the table has no row out of the state.
    #[test]
    fn terminal_matches_tables() {
        fn check<S: Copy + Eq + std::fmt::Debug, O>(
            all: &[S],
            table: &[(S, O, S)],
            term: impl Fn(S) -> bool,
        ) {
            for &s in all {
                let has_exit = table.iter().any(|(f, _, _)| *f == s);
                assert_eq!(term(s), !has_exit, "{s:?}");
            }
        }
        check(
            SessionState::ALL,
            SESSION_TRANSITIONS,
            SessionState::is_terminal,
        );
        check(AgentState::ALL, AGENT_TRANSITIONS, AgentState::is_terminal);
        check(PhaseState::ALL, PHASE_TRANSITIONS, PhaseState::is_terminal);
    }

    #[test]
    fn transition_error_messages() {
        let e = SessionState::Completed.apply(SessionOp::Start).unwrap_err();
        assert_eq!(e.to_string(), "cannot start session in state completed");
        let e = AgentState::Pending.apply(AgentOp::Interrupt).unwrap_err();
        assert_eq!(e.to_string(), "cannot interrupt agent in state pending");
        let e = PhaseState::Skipped.apply(PhaseOp::Skip).unwrap_err();
        assert_eq!(e.to_string(), "cannot skip phase in state skipped");
    }

    #[test]
    fn agent_pause_flag() {
        use AgentState::*;
        // (state, paused, pause) -> Ok, or Err(from)
        let cases: &[(AgentState, bool, bool, Result<(), &str>)] = &[
            (Running, false, true, Ok(())),
            (Running, true, false, Ok(())),
            (Running, true, true, Err("running (paused)")),
            (Running, false, false, Err("running (not paused)")),
            (Pending, false, true, Err("pending")),
            (Resumable, false, false, Err("resumable")),
            (Completed, true, false, Err("completed")),
            (Failed, false, true, Err("failed")),
            (Cancelled, false, true, Err("cancelled")),
        ];
        for &(state, paused, pause, want) in cases {
            let got = agent_set_paused(state, paused, pause);
            match want {
                Ok(()) => assert_eq!(got, Ok(()), "{state:?} {paused} {pause}"),
                Err(from) => {
                    let e = got.unwrap_err();
                    let op = if pause { "pause" } else { "resume" };
                    assert_eq!(
                        e,
                        TransitionError {
                            entity: "agent",
                            from,
                            op
                        }
                    );
                    assert_eq!(e.to_string(), format!("cannot {op} agent in state {from}"));
                }
            }
        }
    }

    /// `as_str`, `Display`, `FromStr` and serde agree for every variant of every enum.
    #[test]
    fn names_round_trip() {
        fn check<T>(all: &[T], as_str: impl Fn(T) -> &'static str)
        where
            T: Copy
                + PartialEq
                + std::fmt::Debug
                + std::fmt::Display
                + FromStr<Err = ParseEnumError>
                + Serialize
                + for<'de> Deserialize<'de>,
        {
            for &v in all {
                let name = as_str(v);
                assert_eq!(v.to_string(), name);
                assert_eq!(name.parse::<T>().unwrap(), v);
                assert_eq!(name.to_uppercase().parse::<T>().unwrap(), v);
                assert_eq!(serde_json::to_string(&v).unwrap(), format!("\"{name}\""));
                assert_eq!(
                    serde_json::from_str::<T>(&format!("\"{name}\"")).unwrap(),
                    v
                );
            }
        }
        use serde::{Deserialize, Serialize};
        check(SessionState::ALL, SessionState::as_str);
        check(SessionOp::ALL, SessionOp::as_str);
        check(AgentState::ALL, AgentState::as_str);
        check(AgentOp::ALL, AgentOp::as_str);
        check(PhaseState::ALL, PhaseState::as_str);
        check(PhaseOp::ALL, PhaseOp::as_str);
        check(super::Strategy::ALL, super::Strategy::as_str);
    }

    #[test]
    fn parse_errors_list_expected() {
        let e = "x".parse::<super::Strategy>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown strategy \"x\" (expected parallel|sequential|adaptive|pipeline)"
        );
        let e = "paused".parse::<AgentState>().unwrap_err();
        assert_eq!(
            e.to_string(),
            "unknown agent state \"paused\" (expected pending|running|resumable|completed|failed|cancelled|ended)"
        );
        assert_eq!(super::Strategy::default(), super::Strategy::Parallel);
    }

    fn session_ops() -> impl Gen<Value = Vec<SessionOp>> {
        prop::collection::vec(prop::sample::select(SessionOp::ALL), 0..40)
    }
    fn agent_ops() -> impl Gen<Value = Vec<AgentOp>> {
        prop::collection::vec(prop::sample::select(AgentOp::ALL), 0..40)
    }
    fn phase_ops() -> impl Gen<Value = Vec<PhaseOp>> {
        prop::collection::vec(prop::sample::select(PhaseOp::ALL), 0..40)
    }

    /// Walk `ops` from `start`, checking the machine invariants at every step.
    fn walk<S, O>(
        all: &[S],
        start: S,
        ops: &[O],
        apply: impl Fn(S, O) -> Result<S, TransitionError>,
        terminal: impl Fn(S) -> bool,
        name: impl Fn(S) -> &'static str,
    ) -> Result<(), TestCaseError>
    where
        S: Copy + Eq + std::fmt::Debug,
        O: Copy + std::fmt::Debug,
    {
        let mut s = start;
        for &op in ops {
            let was_terminal = terminal(s);
            match apply(s, op) {
                Ok(next) => {
                    prop_assert!(!was_terminal, "{s:?} is terminal but {op:?} succeeded");
                    prop_assert!(all.contains(&next));
                    s = next;
                }
                // An Err leaves the state unchanged (we keep `s`) and names it.
                Err(e) => prop_assert_eq!(e.from, name(s)),
            }
            prop_assert!(all.contains(&s));
        }
        Ok(())
    }

    proptest! {
        #[test]
        fn session_walks(start in prop::sample::select(SessionState::ALL), ops in session_ops()) {
            walk(SessionState::ALL, start, &ops, SessionState::apply, SessionState::is_terminal, SessionState::as_str)?;
        }

        #[test]
        fn agent_walks(start in prop::sample::select(AgentState::ALL), ops in agent_ops()) {
            walk(AgentState::ALL, start, &ops, AgentState::apply, AgentState::is_terminal, AgentState::as_str)?;
        }

        #[test]
        fn phase_walks(start in prop::sample::select(PhaseState::ALL), ops in phase_ops()) {
            walk(PhaseState::ALL, start, &ops, PhaseState::apply, PhaseState::is_terminal, PhaseState::as_str)?;
        }
    }
}
