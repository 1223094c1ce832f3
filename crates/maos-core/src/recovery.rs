//! Recovery decisions: what becomes of a running managed agent whose daemon lost sight of it
//! (after a restart, or when its exit report was lost), and what the session's recovery plan
//! is. Pure: the daemon looks at processes and files and applies the decisions.

/// What was found of an agent's process when recovery looked (process first, then its
/// supervisor, then its exit file: an exit recorded meanwhile is seen).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Seen {
    /// The process runs: its exit is still to come.
    Running,
    /// The process is gone.
    Gone {
        /// Its supervisor still runs (it has the exit to report).
        supervised: bool,
        /// The exit file the supervisor left.
        exit: ExitFile,
    },
}

/// The exit file (`exit.json`) of an agent whose process is gone.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ExitFile {
    /// None.
    Missing,
    /// The exit of the agent's current process.
    Current,
    /// The exit of an earlier attempt (already applied when it happened).
    Earlier,
    /// There, but it cannot be read.
    Unreadable,
}

/// What recovery does with one agent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Fate {
    /// It runs (or its supervisor or launch will report): keep it as it is.
    Readopt,
    /// Apply the recorded exit (and then delete the file).
    ApplyExit,
    /// Lost, and it can be resumed (a resume command and a CLI session id): interrupted.
    Interrupt,
    /// Lost with nothing to resume it from: failed.
    Fail,
}

/// The fate of a running managed agent. `launching`: this daemon started it and its
/// supervisor has not answered yet; `can_resume`: it has a resume command and a CLI session.
pub fn fate(seen: Seen, launching: bool, can_resume: bool) -> Fate {
    match seen {
        Seen::Running => Fate::Readopt,
        Seen::Gone {
            exit: ExitFile::Current,
            ..
        } => Fate::ApplyExit,
        Seen::Gone { supervised, .. } if supervised || launching => Fate::Readopt,
        Seen::Gone { .. } if can_resume => Fate::Interrupt,
        Seen::Gone { .. } => Fate::Fail,
    }
}

/// A recovered session's plan: what a person (or nothing) has to do next. It is decided after
/// recovery applied every fate *and* the scheduler took the steps they lead to (a failure
/// under policy `fail` fails the session at once), so it says what did happen, never a step
/// the session can no longer take.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Plan {
    Continue,
    ResumeAgents,
    ResumeSession,
    RestartPhase,
    /// The session failed (during recovery, or before).
    MarkFailed,
    /// It completed (the exits applied were its last agents').
    Completed,
    /// It was cancelled before.
    Cancelled,
}

/// The session after recovery applied its fates and the scheduler its next steps.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct After {
    /// How the session ended, if it did.
    pub ended: Option<crate::SessionState>,
    pub paused: bool,
    /// Some agents are resumable (made so now, or still waiting from before).
    pub resumable: bool,
    /// A phase failed its checkpoint.
    pub phase_failed: bool,
}

impl Plan {
    pub fn of(after: After) -> Plan {
        use crate::SessionState;
        match after.ended {
            Some(SessionState::Completed) => Plan::Completed,
            Some(SessionState::Cancelled) => Plan::Cancelled,
            Some(_) => Plan::MarkFailed,
            None if after.resumable => Plan::ResumeAgents,
            None if after.paused => Plan::ResumeSession,
            None if after.phase_failed => Plan::RestartPhase,
            None => Plan::Continue,
        }
    }

    /// The name recorded in the report (`session_recovered`).
    pub fn as_str(self) -> &'static str {
        match self {
            Plan::Continue => "continue",
            Plan::ResumeAgents => "resume_agents",
            Plan::ResumeSession => "resume_session",
            Plan::RestartPhase => "restart_phase",
            Plan::MarkFailed => "mark_failed",
            Plan::Completed => "completed",
            Plan::Cancelled => "cancelled",
        }
    }

    /// The next step, in words for a person.
    pub fn next_step(self) -> &'static str {
        match self {
            Plan::ResumeAgents => "run `maos resume` to resume the interrupted agents",
            Plan::ResumeSession => "run `maos resume` to resume the session",
            Plan::RestartPhase => "run `maos phase start` to retry the failed phase",
            Plan::MarkFailed => {
                "the session failed: see `maos brief`; `maos retry` runs its failed agents again"
            }
            Plan::Completed => "nothing: the session completed",
            Plan::Cancelled => "nothing: the session was cancelled",
            Plan::Continue => "nothing: the session goes on by itself",
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gone(supervised: bool, exit: ExitFile) -> Seen {
        Seen::Gone { supervised, exit }
    }

    #[test]
    fn fates() {
        use ExitFile::*;
        // (seen, launching, can_resume) → fate
        let table = [
            (Seen::Running, false, false, Fate::Readopt),
            (Seen::Running, true, true, Fate::Readopt),
            // A recorded exit wins over everything else, also a live supervisor.
            (gone(true, Current), false, false, Fate::ApplyExit),
            (gone(false, Current), true, true, Fate::ApplyExit),
            // The supervisor or this daemon's launch still has the answer.
            (gone(true, Missing), false, false, Fate::Readopt),
            (gone(false, Missing), true, false, Fate::Readopt),
            (gone(true, Earlier), false, true, Fate::Readopt),
            // Lost.
            (gone(false, Missing), false, true, Fate::Interrupt),
            (gone(false, Earlier), false, true, Fate::Interrupt),
            (gone(false, Unreadable), false, true, Fate::Interrupt),
            (gone(false, Missing), false, false, Fate::Fail),
            (gone(false, Unreadable), false, false, Fate::Fail),
        ];
        for (seen, launching, can_resume, want) in table {
            assert_eq!(
                fate(seen, launching, can_resume),
                want,
                "{seen:?} launching={launching} can_resume={can_resume}"
            );
        }
    }

    #[test]
    fn plans_in_order_of_precedence() {
        use crate::SessionState;
        let all = After {
            ended: Some(SessionState::Failed),
            paused: true,
            resumable: true,
            phase_failed: true,
        };
        assert_eq!(Plan::of(all), Plan::MarkFailed);
        // An ended session is never told to resume: the plan says how it ended.
        for (ended, plan) in [
            (SessionState::Completed, Plan::Completed),
            (SessionState::Cancelled, Plan::Cancelled),
            (SessionState::Failed, Plan::MarkFailed),
        ] {
            let p = Plan::of(After {
                ended: Some(ended),
                ..all
            });
            assert_eq!(p, plan);
            assert!(!p.next_step().contains("resume"), "{p:?}");
        }
        assert_eq!(Plan::of(After { ended: None, ..all }), Plan::ResumeAgents);
        assert_eq!(
            Plan::of(After {
                paused: true,
                phase_failed: true,
                ..After::default()
            }),
            Plan::ResumeSession
        );
        assert_eq!(
            Plan::of(After {
                phase_failed: true,
                ..After::default()
            }),
            Plan::RestartPhase
        );
        assert_eq!(Plan::of(After::default()), Plan::Continue);
        for p in [
            Plan::Continue,
            Plan::ResumeAgents,
            Plan::ResumeSession,
            Plan::RestartPhase,
            Plan::MarkFailed,
            Plan::Completed,
            Plan::Cancelled,
        ] {
            assert!(!p.as_str().is_empty() && !p.next_step().is_empty());
        }
        assert_eq!(Plan::ResumeAgents.as_str(), "resume_agents");
    }
}
