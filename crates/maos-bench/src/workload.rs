//! Workload helpers: sessions and running agents made through the wire client, clients that
//! pause and resume their agents, and runs of many such clients at once.

use maos_proto::req;
use std::sync::{Arc, Barrier};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use maos_core::{AgentOp, SessionOp};
use maos_proto::{Reply, Request, Target};
use maos_tests::client::{Client, Res};
use maos_tests::daemon::Daemon;
use maos_tests::procfs;

/// Requests sent before the timed ones (not counted).
pub const WARMUP: usize = 200;

/// xorshift64*: a fast, good-enough generator for picking paths (no dependency); the seed must
/// not be 0.
pub struct Rng(pub u64);

impl Rng {
    /// A number in `0..n`.
    pub fn below(&mut self, n: usize) -> usize {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        (self.0.wrapping_mul(0x2545_F491_4F6C_DD1D) >> 32) as usize % n
    }
}

/// A session with three phases (started if `start`): its id.
pub fn create_session(c: &mut Client, objective: &str, start: bool) -> Res<String> {
    let reply = c.call(Request::SessionCreate(req::SessionCreate {
        objective: objective.to_string(),
        strategy: Default::default(),
        phases: vec!["plan".into(), "build".into(), "review".into()],
    }))?;
    let Reply::Session(s) = reply else {
        return Err(format!("session_create answered {reply:?}"));
    };
    let id = s.id.to_string();
    if start {
        c.call(Request::SessionTransition(req::SessionTransition {
            session: Some(id.clone()),
            op: SessionOp::Start,
            reason: None,
        }))?;
    }
    Ok(id)
}

/// The request registering an agent of `role` in `session`.
pub fn register(session: &str, role: &str) -> Request {
    Request::AgentRegister(req::AgentRegister {
        session: Some(session.to_string()),
        role: role.to_string(),
        task: format!("benchmark task for {role}"),
        depends_on: Vec::new(),
        parent: None,
    })
}

/// Register an agent in `session` and start it (Running).
pub fn running_agent(c: &mut Client, session: &str, role: &str) -> Res<String> {
    let req = register(session, role);
    let Reply::Agent(a) = c.call(req)? else {
        return Err("agent_register answered something else than an agent".into());
    };
    let id = a.id.to_string();
    c.call(Request::AgentTransition(req::AgentTransition {
        agent: id.clone(),
        op: AgentOp::Start,
        exit_code: None,
        reason: None,
    }))?;
    Ok(id)
}

/// The pause or resume request that flips `agent`'s paused flag (`paused` = its current flag).
pub fn toggle(session: &str, agent: &str, paused: bool) -> Request {
    let target = Target::Agent(agent.to_string());
    let session = Some(session.to_string());
    if paused {
        Request::Resume(req::Resume {
            session,
            target,
            by: None,
        })
    } else {
        Request::Pause(req::Pause {
            session,
            target,
            reason: None,
            by: None,
        })
    }
}

/// A client that owns some agents and toggles them round-robin.
pub struct Toggler {
    pub client: Client,
    pub agents: Vec<(String, String, bool)>,
    pub next: usize,
}

impl Toggler {
    pub fn step(&mut self) -> Res<u64> {
        let i = self.next;
        self.next = (i + 1) % self.agents.len();
        let (s, a, paused) = &mut self.agents[i];
        let ns = self.client.timed(toggle(s, a, *paused))?;
        *paused = !*paused;
        Ok(ns)
    }
}

/// (toggle events, commits that wrote them) for these agents, read back from the timeline.
/// Every event of one group commit carries the commit's timestamp, so distinct timestamps
/// count commits.
pub fn commit_stats(d: &Daemon, agents: &[String]) -> Res<(usize, usize)> {
    event_stats(d, agents, &["agent_paused", "agent_resumed"])
}

/// (events of these types by these agents, distinct commit timestamps among them), read back
/// from the database.
pub fn event_stats(d: &Daemon, agents: &[String], types: &[&str]) -> Res<(usize, usize)> {
    let mut c = d.client()?;
    let mut stamps = std::collections::HashSet::new();
    let mut events = 0;
    for a in agents {
        let reply = c.call(Request::Events(req::Events {
            filter: maos_proto::EventFilter {
                agent: Some(a.clone()),
                types: types.iter().map(|t| t.to_string()).collect(),
                ..Default::default()
            },
            limit: None,
        }))?;
        let Reply::Events(list) = reply else {
            return Err("events answered something else".into());
        };
        events += list.len();
        stamps.extend(list.into_iter().map(|e| e.ts));
    }
    Ok((events, stamps.len()))
}

/// What a parallel run measured (CPU times cover the timed part only, warm-up excluded).
pub struct RunResult {
    pub samples: Vec<u64>,
    pub acks: u64,
    pub secs: f64,
    pub daemon_cpu: f64,
    pub bench_cpu: f64,
}

/// Run `clients` togglers in parallel: `warm` untimed steps each, then a common start, then
/// either `per_client` steps each or until `dur` has passed.
pub fn run_togglers(
    d: &Daemon,
    togglers: Vec<Toggler>,
    warm: usize,
    dur: Option<Duration>,
    per_client: usize,
) -> Res<RunResult> {
    // The clients and this thread: the CPU clocks are read once every client is warm.
    let barrier = Arc::new(Barrier::new(togglers.len() + 1));
    let handles: Vec<_> = togglers
        .into_iter()
        .map(|mut t| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Res<(Vec<u64>, f64)> {
                let mut first = Ok(0);
                for _ in 0..warm {
                    if let Err(e) = t.step() {
                        first = Err(e);
                        break;
                    }
                }
                barrier.wait();
                first?;
                let t0 = Instant::now();
                let mut samples = Vec::with_capacity(per_client.min(1 << 20));
                match dur {
                    Some(dur) => {
                        while t0.elapsed() < dur {
                            samples.push(t.step()?);
                        }
                    }
                    None => {
                        for _ in 0..per_client {
                            samples.push(t.step()?);
                        }
                    }
                }
                Ok((samples, t0.elapsed().as_secs_f64()))
            })
        })
        .collect();
    barrier.wait();
    let (cpu0, me0) = (d.cpu_secs(), procfs::cpu_secs("self"));
    let mut all = Vec::new();
    let mut secs: f64 = 0.0;
    for (s, e) in join_all(handles)? {
        all.extend(s);
        secs = secs.max(e);
    }
    let (daemon_cpu, bench_cpu) = (d.cpu_secs() - cpu0, procfs::cpu_secs("self") - me0);
    Ok(RunResult {
        acks: all.len() as u64,
        samples: all,
        secs,
        daemon_cpu,
        bench_cpu,
    })
}

/// Toggle every agent of every toggler twice per round, `rounds` rounds, all togglers at once;
/// with a `budget`, a toggler starts no new round once it is spent, so every agent is still
/// toggled an even number of times. (toggle events acknowledged, seconds.)
pub fn fill_even(
    togglers: Vec<Toggler>,
    rounds: usize,
    budget: Option<Duration>,
) -> Res<(u64, f64)> {
    let barrier = Arc::new(Barrier::new(togglers.len() + 1));
    let handles: Vec<_> = togglers
        .into_iter()
        .map(|mut t| {
            let barrier = barrier.clone();
            std::thread::spawn(move || -> Res<u64> {
                barrier.wait();
                let t0 = Instant::now();
                let per_round = 2 * t.agents.len();
                let mut n = 0;
                for _ in 0..rounds {
                    if budget.is_some_and(|b| t0.elapsed() >= b) {
                        break;
                    }
                    for _ in 0..per_round {
                        t.step()?;
                    }
                    n += per_round as u64;
                }
                Ok(n)
            })
        })
        .collect();
    barrier.wait();
    let t0 = Instant::now();
    let total = join_all(handles)?.into_iter().sum();
    Ok((total, t0.elapsed().as_secs_f64()))
}

/// Wait for every client thread: their results, or the first error (a thread that panicked is
/// one).
pub fn join_all<T>(handles: Vec<JoinHandle<Res<T>>>) -> Res<Vec<T>> {
    let mut all = Vec::with_capacity(handles.len());
    let mut err = None;
    for h in handles {
        match h.join() {
            Ok(Ok(v)) => all.push(v),
            Ok(Err(e)) => err = err.or(Some(e)),
            Err(_) => err = err.or(Some("a client thread panicked".into())),
        }
    }
    err.map_or(Ok(all), Err)
}

/// `sessions` sessions with `per` running agents each: the warm daemon `ps` and `serve` talk
/// to, and the project `activation`'s daemons open.
pub fn populate(d: &Daemon, sessions: usize, per: usize) -> Res {
    let mut c = d.client()?;
    for s in 0..sessions {
        let sid = create_session(&mut c, &format!("bench: ps session {s}"), true)?;
        for a in 0..per {
            running_agent(&mut c, &sid, &format!("agent{a}"))?;
        }
    }
    Ok(())
}

pub fn show_session(c: &mut Client, session: &str) -> Res<maos_proto::SessionRecord> {
    match c.call(Request::SessionShow(req::SessionShow {
        session: Some(session.to_string()),
    }))? {
        Reply::Session(s) => Ok(*s),
        _ => Err("session_show answered something else than a session".into()),
    }
}
