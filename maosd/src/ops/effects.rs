//! The process effects of operations: which signals an agent's process gets when its agent
//! ends, is held or let go, here or (in a fleet) through another daemon. A leaf of the
//! operations floor: it reads the records and queues [`Effect`]s, the actor carries them out
//! after the commit.

use maos_core::plan;
use maos_core::{AgentId, AgentState, SessionId, SessionState};
use maos_proto::{AgentRecord, ProcessInfo};

use crate::proc::run::Effect;
use crate::txn::state::Txn;

/// A live managed session this daemon runs: its plan's agents were registered on this
/// daemon's machine. In a fleet only that daemon schedules, recovers and sweeps them (their
/// processes are its machine's); the others see them and change nothing of their running.
pub fn runs_here(st: &crate::txn::state::State, s: &maos_core::record::SessionRecord) -> bool {
    s.policy.is_some()
        && !s.state.is_terminal()
        && s.agents
            .iter()
            .all(|a| a.spec.is_none() || a.machine == st.machine)
}

/// Whether the agent's plan phase is paused (`maos phase pause`).
pub fn in_paused_phase(s: &maos_proto::SessionRecord, a: &maos_core::record::AgentRecord) -> bool {
    a.spec
        .as_ref()
        .and_then(|x| x.phase)
        .and_then(|i| s.workflow.phases.get(i as usize))
        .is_some_and(|ph| s.paused_phases.contains(&ph.name))
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

pub fn grace_of(tx: &Txn<'_>, sid: &SessionId) -> u64 {
    tx.state()
        .session(sid)
        .map_or(plan::DEFAULT_GRACE_MS, grace)
}

/// How long a session's agents get between SIGTERM and SIGKILL.
pub fn grace(s: &maos_proto::SessionRecord) -> u64 {
    s.policy
        .as_ref()
        .map_or(plan::DEFAULT_GRACE_MS, |p| p.grace_ms)
}

/// SIGTERM to the group, then SIGKILL after the grace period.
pub fn terminate(tx: &mut Txn<'_>, pid: u32, start_time: Option<u64>, grace_ms: u64) {
    for e in termination(pid, start_time, grace_ms) {
        tx.effect(e);
    }
}

pub fn termination(pid: u32, start_time: Option<u64>, grace_ms: u64) -> [Effect; 3] {
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
pub fn held(s: &maos_proto::SessionRecord, a: &AgentRecord) -> bool {
    a.paused || s.state == SessionState::Paused || in_paused_phase(s, a)
}

/// Whether the agent's process should be stopped: it runs, and it is held.
pub fn held_stopped(s: &maos_proto::SessionRecord, a: &AgentRecord) -> bool {
    a.state == AgentState::Running && held(s, a)
}

/// In a fleet, what this daemon does to its own machine's processes once another daemon
/// changed their agents (`changed`: the sessions as PostgreSQL now holds them, `st` as this
/// daemon knew them): a process whose agent ended there is terminated, one that was paused
/// there is stopped, one resumed there is continued. The daemon that recorded the change
/// could not signal them: their pids are this machine's.
pub fn catch_up(
    st: &crate::txn::state::State,
    changed: &[maos_proto::SessionRecord],
) -> Vec<Effect> {
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
    st: &crate::txn::state::State,
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
pub fn own_process(tx: &Txn<'_>, a: &maos_core::record::AgentRecord) -> Option<ProcessInfo> {
    if a.machine != tx.state().machine {
        return None;
    }
    a.process.clone()
}

/// The agent's process runs, or its supervisor does (the exit is then still to be reported:
/// the supervisor reaps the agent before it writes `exit.json`).
pub fn live_process(process: Option<&ProcessInfo>) -> bool {
    process.is_some_and(|p| {
        crate::proc::procs::alive(p.pid, p.start_time)
            || p.supervisor
                .is_some_and(|s| crate::proc::procs::alive(s, None))
    })
}

#[cfg(test)]
mod tests {
    use super::runs_here;
    use crate::txn::state::State;
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
            files: vec![],
            overlap: Default::default(),
            land: None,
            lands: None,
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
        use crate::proc::run::Effect;
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
                crate::proc::run::Effect::Signal { sig, .. } => Some(*sig),
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
