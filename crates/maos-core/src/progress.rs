//! Progress of a session: percent done, phase position, elapsed time, ETA and stall detection.

use chrono::TimeDelta;
use serde::{Deserialize, Serialize};

use crate::Ts;
use crate::state::{AgentState, PhaseState};
use crate::workflow::Workflow;

/// A phase running longer than this many times the average is stalled.
const STALL_FACTOR: f64 = 2.0;

/// A progress snapshot, computed from the workflow and agent states at `now`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Progress {
    /// 0..=100: phases done / phases; without phases, agents finished (in a final state) /
    /// agents (0 when none); 100 when complete.
    pub percent: f64,
    /// "phase k/n" as given by [`Workflow::position`].
    pub phase: (usize, usize),
    /// Name of the current phase (None when complete or without phases).
    pub current_phase: Option<String>,
    /// Seconds the running phase has been running.
    pub current_phase_elapsed_secs: Option<f64>,
    /// Mean duration of completed phases with both timestamps.
    pub avg_phase_secs: Option<f64>,
    /// Estimated completion time; None without an average or when complete.
    pub eta: Option<Ts>,
    /// The running phase exceeds twice the average duration.
    pub stalled: bool,
    /// Agents done: completed, or windows that ended ([`AgentState::is_done`]). Failed and
    /// cancelled agents are final, not done.
    pub agents_done: usize,
    /// All agents.
    pub agents_total: usize,
}

/// Seconds from `from` to `to`, floored at 0 (clock skew never yields negative durations).
fn secs_between(from: Ts, to: Ts) -> f64 {
    let d = to - from;
    let secs = d
        .num_microseconds()
        .map_or(d.num_seconds() as f64, |us| us as f64 / 1e6);
    secs.max(0.0)
}

/// `part / whole` as a percentage, 0 when `whole` is 0.
fn percent(part: usize, whole: usize) -> f64 {
    match whole {
        0 => 0.0,
        _ => part as f64 * 100.0 / whole as f64,
    }
}

/// Compute progress at `now`.
pub fn progress(workflow: &Workflow, agents: &[AgentState], now: Ts) -> Progress {
    let phases = &workflow.phases;
    let complete = workflow.is_complete();
    let phases_done = phases.iter().filter(|p| p.is_done()).count();
    let agents_done = agents.iter().filter(|a| a.is_done()).count();
    // How far the work got: a failed or cancelled agent has nothing left to do either.
    let agents_finished = agents.iter().filter(|a| a.is_terminal()).count();

    let percent = match (complete, phases.len()) {
        (true, _) => 100.0,
        (false, 0) => percent(agents_finished, agents.len()),
        (false, n) => percent(phases_done, n),
    };

    let current_phase = workflow
        .current()
        .filter(|_| !complete)
        .and_then(|i| phases.get(i))
        .map(|p| p.name.clone());

    let elapsed = workflow
        .running()
        .and_then(|i| phases.get(i))
        .and_then(|p| p.started_at)
        .map(|start| secs_between(start, now));

    let durations: Vec<f64> = phases
        .iter()
        .filter(|p| p.state == PhaseState::Completed)
        .filter_map(|p| Some(secs_between(p.started_at?, p.ended_at?)))
        .collect();
    let avg = match durations.len() {
        0 => None,
        n => Some(durations.iter().sum::<f64>() / n as f64),
    };

    let eta = avg.filter(|_| !complete).and_then(|avg| {
        let remaining = (phases.len() - phases_done) as f64;
        let secs = (remaining * avg - elapsed.unwrap_or(0.0)).max(0.0);
        // Float-to-int `as` saturates, and checked_add refuses out-of-range times.
        now.checked_add_signed(TimeDelta::microseconds((secs * 1e6).round() as i64))
    });

    let stalled = matches!((elapsed, avg), (Some(e), Some(a)) if e > STALL_FACTOR * a);

    Progress {
        percent,
        phase: workflow.position(),
        current_phase,
        current_phase_elapsed_secs: elapsed,
        avg_phase_secs: avg,
        eta,
        stalled,
        agents_done,
        agents_total: agents.len(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::workflow::CheckpointResult;
    use chrono::{TimeZone, Utc};
    use serde_json::Value;

    fn t(secs: i64) -> Ts {
        Utc.timestamp_opt(1_700_000_000 + secs, 0).single().unwrap()
    }

    fn wf(n: usize) -> Workflow {
        Workflow::new((1..=n).map(|i| format!("p{i}")).collect()).unwrap()
    }

    fn pass(w: &mut Workflow, i: usize, from: i64, to: i64) {
        w.start(i, t(from)).unwrap();
        w.finish(i, CheckpointResult::Passed, Value::Null, t(to))
            .unwrap();
    }

    #[test]
    fn eta_and_stall_with_fixed_times() {
        let mut w = wf(5);
        pass(&mut w, 0, 0, 100); // 100 s
        pass(&mut w, 1, 100, 300); // 200 s  => avg 150 s
        w.start(2, t(300)).unwrap();

        // 60 s into phase 3: 3 phases remain (incl. running) => 450 - 60 = 390 s left.
        let p = progress(&w, &[AgentState::Running, AgentState::Completed], t(360));
        assert_eq!(p.percent, 40.0);
        assert_eq!(p.phase, (3, 5));
        assert_eq!(p.current_phase.as_deref(), Some("p3"));
        assert_eq!(p.current_phase_elapsed_secs, Some(60.0));
        assert_eq!(p.avg_phase_secs, Some(150.0));
        assert_eq!(p.eta, Some(t(360 + 390)));
        assert!(!p.stalled);
        assert_eq!((p.agents_done, p.agents_total), (1, 2));

        // Exactly 2x avg is not stalled yet; beyond it is.
        assert!(!progress(&w, &[], t(600)).stalled);
        let late = progress(&w, &[], t(601));
        assert!(late.stalled);
        // 301 s running: 450 - 301 = 149 s left.
        assert_eq!(late.eta, Some(t(601 + 149)));
        // Far beyond the estimate: ETA floors at now.
        assert_eq!(progress(&w, &[], t(5_000)).eta, Some(t(5_000)));
    }

    #[test]
    fn no_average_without_completed_phases() {
        let mut w = wf(3);
        w.start(0, t(0)).unwrap();
        let p = progress(&w, &[], t(1_000));
        assert_eq!(p.avg_phase_secs, None);
        assert_eq!(p.eta, None);
        assert!(!p.stalled);
        assert_eq!(p.current_phase_elapsed_secs, Some(1_000.0));
        // Skipped phases count as done but have no duration.
        w.skip(0, t(5)).unwrap();
        let p = progress(&w, &[], t(10));
        assert_eq!(p.avg_phase_secs, None);
        assert!((p.percent - 100.0 / 3.0).abs() < 1e-9);
        assert_eq!(p.current_phase_elapsed_secs, None);
    }

    #[test]
    fn no_phases_uses_agents() {
        let w = wf(0);
        let cases: &[(&[AgentState], f64)] = &[
            (&[], 0.0),
            (&[AgentState::Pending, AgentState::Running], 0.0),
            (&[AgentState::Completed, AgentState::Resumable], 50.0),
            (
                &[
                    AgentState::Failed,
                    AgentState::Cancelled,
                    AgentState::Completed,
                    AgentState::Running,
                ],
                75.0,
            ),
            (&[AgentState::Completed], 100.0),
        ];
        for (agents, want) in cases {
            let p = progress(&w, agents, t(0));
            assert_eq!(p.percent, *want, "{agents:?}");
            assert_eq!(p.phase, (0, 0));
            assert_eq!(p.current_phase, None);
            assert_eq!((p.avg_phase_secs, p.eta, p.stalled), (None, None, false));
            assert_eq!(p.agents_total, agents.len());
        }
        // Done is completed or ended: failed and cancelled agents are final, not done (issue
        // 29: the dashboard said "agents 3/3 done" where `ps` said 1/3).
        let p = progress(
            &w,
            &[
                AgentState::Completed,
                AgentState::Failed,
                AgentState::Cancelled,
                AgentState::Ended,
            ],
            t(0),
        );
        assert_eq!((p.agents_done, p.agents_total), (2, 4));
    }

    #[test]
    fn complete_workflow() {
        let mut w = wf(2);
        pass(&mut w, 0, 0, 10);
        pass(&mut w, 1, 10, 30);
        let p = progress(&w, &[AgentState::Running], t(100));
        assert_eq!(p.percent, 100.0);
        assert_eq!(p.phase, (2, 2));
        assert_eq!(p.current_phase, None);
        assert_eq!(p.current_phase_elapsed_secs, None);
        assert_eq!(p.avg_phase_secs, Some(15.0));
        assert_eq!(p.eta, None);
        assert!(!p.stalled);
    }

    #[test]
    fn retried_phase_elapsed_counts_from_retry() {
        let mut w = wf(2);
        pass(&mut w, 0, 0, 10);
        w.start(1, t(10)).unwrap();
        w.finish(1, CheckpointResult::Failed, Value::Null, t(20))
            .unwrap();
        let p = progress(&w, &[], t(25));
        assert_eq!(p.current_phase.as_deref(), Some("p2"));
        assert_eq!(p.current_phase_elapsed_secs, None);
        assert_eq!(p.eta, Some(t(35))); // one phase left at avg 10 s
        w.start(1, t(30)).unwrap();
        let p = progress(&w, &[], t(34));
        assert_eq!(p.current_phase_elapsed_secs, Some(4.0));
        assert_eq!(p.eta, Some(t(40)));
    }

    #[test]
    fn serde_shape() {
        let p = progress(&wf(1), &[], t(0));
        let v = serde_json::to_value(&p).unwrap();
        assert_eq!(v["phase"], serde_json::json!([1, 1]));
        assert_eq!(serde_json::from_value::<Progress>(v).unwrap(), p);
    }
}
