//! Crash loop: the daemon is killed with `kill -9` at a random moment, again and again, while
//! concurrent clients write sessions, agent changes, notes and locks over the socket. Every
//! write the daemon acknowledged is recorded; after each restart the daemon's state must be
//! exactly what was acknowledged (plus, at most, the one write each client had in flight when
//! the daemon died), every acknowledged write's event must be on the timeline, `PRAGMA
//! integrity_check` must say "ok", no two conflicting locks may be held, and fencing tokens must
//! never go back.
//!
//! `MAOS_CRASH_LOOP_ITERATIONS=N` runs N kills instead of 50; `MAOS_CRASH_SEED=S` replays the
//! random choices of a run (the seed is printed at the start and in every failure; the timing
//! of the kill against the writes still varies from run to run).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use maos_proto::{ClientMsg, ErrorBody, EventFilter, EventRecord, LockView, Reply, ServerMsg};
use maos_tests::{DEADLINE, Env, Raw, Value, alive, json, kill9, wait_until};

/// Concurrent writers, each with its own connection.
const WRITERS: usize = 4;
const DEFAULT_ITERATIONS: usize = 50;
/// The kill comes this long (at most) after the writers were released.
const MAX_KILL_DELAY_MS: u64 = 50;
/// Unfinished agents a writer keeps at most (then it completes some).
const MAX_LIVE_AGENTS: usize = 5;
/// Leases long enough never to run out during a run: every held lock is expected to stay.
const LOCK_TTL_MS: u64 = 24 * 3600 * 1000;
/// Files the writers fight over (read and write locks) and directories (directory locks).
const FILES: &[&str] = &[
    "src/a.rs",
    "src/b.rs",
    "src/c.rs",
    "docs/x.md",
    "docs/y.md",
    "lib/z.rs",
];
const DIRS: &[&str] = &["src", "docs"];

/// xorshift64*: small, seedable, good enough to pick moments and operations.
#[derive(Clone, Debug)]
struct Rng(u64);

impl Rng {
    fn new(seed: u64) -> Rng {
        let mut r = Rng((seed ^ 0x9E37_79B9_7F4A_7C15) | 1);
        r.next();
        r
    }

    fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn pick<'a, T>(&mut self, v: &'a [T]) -> &'a T {
        &v[self.below(v.len())]
    }
}

fn env_number(var: &str) -> Option<u64> {
    let v = std::env::var(var).ok()?;
    Some(
        v.trim()
            .parse()
            .unwrap_or_else(|e| panic!("{var}={v:?} is not a number: {e}")),
    )
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum AState {
    Pending,
    Running,
    Completed,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct SessionM {
    owner: usize,
    objective: String,
    running: bool,
    notes: Vec<String>,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct AgentM {
    owner: usize,
    session: String,
    task: String,
    state: AState,
    paused: bool,
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct LockM {
    mode: String,
    token: u64,
}

/// What the daemon must hold: everything acknowledged so far (and the in-flight writes that
/// turned out to have committed).
#[derive(Clone, Debug, Default)]
struct Model {
    sessions: BTreeMap<String, SessionM>,
    agents: BTreeMap<String, AgentM>,
    /// (holder, path) → mode and fencing token.
    locks: BTreeMap<(String, String), LockM>,
    /// Each writer's current session (where it registers agents and writes notes).
    current: Vec<Option<String>>,
}

/// An acknowledged write: what the daemon answered success to.
#[derive(Clone, Debug)]
enum Write {
    SessionCreated {
        owner: usize,
        sid: String,
        objective: String,
    },
    SessionStarted {
        sid: String,
    },
    AgentRegistered {
        owner: usize,
        aid: String,
        sid: String,
        task: String,
    },
    AgentStarted {
        aid: String,
    },
    AgentPaused {
        aid: String,
    },
    AgentResumed {
        aid: String,
    },
    AgentCompleted {
        aid: String,
    },
    LockGranted {
        aid: String,
        path: String,
        mode: String,
        token: u64,
    },
    LockReleased {
        aid: String,
        path: String,
        token: u64,
    },
    Noted {
        sid: String,
        text: String,
    },
}

/// An event the timeline must hold: (type, agent or else session id, token or note text).
type EventKey = (String, String, String);

fn key(kind: &str, subject: &str, extra: &str) -> EventKey {
    (kind.to_string(), subject.to_string(), extra.to_string())
}

fn event_key(e: &EventRecord) -> EventKey {
    let subject = e
        .agent_id
        .as_ref()
        .map(|a| a.as_str().to_string())
        .or_else(|| e.session_id.as_ref().map(|s| s.as_str().to_string()))
        .unwrap_or_default();
    let extra = if let Some(t) = e.data["token"].as_u64() {
        t.to_string()
    } else if e.kind == "note_recorded" {
        e.data["text"].as_str().unwrap_or_default().to_string()
    } else {
        String::new()
    };
    (e.kind.clone(), subject, extra)
}

impl Model {
    fn new() -> Model {
        Model {
            current: vec![None; WRITERS],
            ..Model::default()
        }
    }

    /// The events an acknowledged write must have left on the timeline (before it is applied).
    fn events_of(&self, w: &Write) -> Vec<EventKey> {
        match w {
            Write::SessionCreated { sid, .. } => vec![key("session_created", sid, "")],
            Write::SessionStarted { sid } => vec![key("session_started", sid, "")],
            Write::AgentRegistered { aid, .. } => vec![key("agent_registered", aid, "")],
            Write::AgentStarted { aid } => vec![key("agent_started", aid, "")],
            Write::AgentPaused { aid } => vec![key("agent_paused", aid, "")],
            Write::AgentResumed { aid } => vec![key("agent_resumed", aid, "")],
            Write::AgentCompleted { aid } => {
                // Its locks go in the same commit, each with its own event.
                let mut v = vec![key("agent_completed", aid, "")];
                for ((holder, _), l) in &self.locks {
                    if holder == aid {
                        v.push(key("lock_released", aid, &l.token.to_string()));
                    }
                }
                v
            }
            Write::LockGranted { aid, token, .. } => {
                vec![key("lock_acquired", aid, &token.to_string())]
            }
            Write::LockReleased { aid, token, .. } => {
                vec![key("lock_released", aid, &token.to_string())]
            }
            Write::Noted { sid, text } => vec![key("note_recorded", sid, text)],
        }
    }

    fn apply(&mut self, w: &Write) {
        match w {
            Write::SessionCreated {
                owner,
                sid,
                objective,
            } => {
                self.sessions.insert(
                    sid.clone(),
                    SessionM {
                        owner: *owner,
                        objective: objective.clone(),
                        running: false,
                        notes: Vec::new(),
                    },
                );
                self.current[*owner] = Some(sid.clone());
            }
            Write::SessionStarted { sid } => self.session(sid).running = true,
            Write::AgentRegistered {
                owner,
                aid,
                sid,
                task,
            } => {
                self.agents.insert(
                    aid.clone(),
                    AgentM {
                        owner: *owner,
                        session: sid.clone(),
                        task: task.clone(),
                        state: AState::Pending,
                        paused: false,
                    },
                );
            }
            Write::AgentStarted { aid } => self.agent(aid).state = AState::Running,
            Write::AgentPaused { aid } => self.agent(aid).paused = true,
            Write::AgentResumed { aid } => self.agent(aid).paused = false,
            Write::AgentCompleted { aid } => {
                let a = self.agent(aid);
                a.state = AState::Completed;
                a.paused = false;
                self.locks.retain(|(holder, _), _| holder != aid);
            }
            Write::LockGranted {
                aid,
                path,
                mode,
                token,
            } => {
                self.locks.insert(
                    (aid.clone(), path.clone()),
                    LockM {
                        mode: mode.clone(),
                        token: *token,
                    },
                );
            }
            Write::LockReleased { aid, path, .. } => {
                self.locks.remove(&(aid.clone(), path.clone()));
            }
            Write::Noted { sid, text } => self.session(sid).notes.push(text.clone()),
        }
    }

    fn session(&mut self, sid: &str) -> &mut SessionM {
        self.sessions
            .get_mut(sid)
            .unwrap_or_else(|| panic!("model: no session {sid}"))
    }

    fn agent(&mut self, aid: &str) -> &mut AgentM {
        self.agents
            .get_mut(aid)
            .unwrap_or_else(|| panic!("model: no agent {aid}"))
    }
}

/// A write request a writer sends.
#[derive(Clone, Debug)]
enum Op {
    CreateSession {
        objective: String,
    },
    StartSession {
        sid: String,
    },
    Register {
        sid: String,
        task: String,
    },
    AgentStart {
        aid: String,
    },
    AgentComplete {
        aid: String,
    },
    Pause {
        sid: String,
        aid: String,
        pause: bool,
    },
    Acquire {
        aid: String,
        path: String,
        mode: String,
    },
    Release {
        aid: String,
        path: String,
    },
    Note {
        sid: String,
        text: String,
    },
}

impl Op {
    fn body(&self, owner: usize) -> Value {
        match self {
            Op::CreateSession { objective } => {
                json!({"request": "session_create", "objective": objective})
            }
            Op::StartSession { sid } => {
                json!({"request": "session_transition", "session": sid, "op": "start"})
            }
            Op::Register { sid, task } => json!({"request": "agent_register", "session": sid,
                                                 "role": format!("writer{owner}"), "task": task}),
            Op::AgentStart { aid } => {
                json!({"request": "agent_transition", "agent": aid, "op": "start"})
            }
            Op::AgentComplete { aid } => {
                json!({"request": "agent_transition", "agent": aid, "op": "complete",
                       "exit_code": 0})
            }
            Op::Pause { sid, aid, pause } => json!({
                "request": if *pause { "pause" } else { "resume" }, "session": sid,
                "target": {"scope": "agent", "name": aid}, "by": format!("writer{owner}")
            }),
            Op::Acquire { aid, path, mode } => json!({
                "request": "lock_acquire", "agent": aid, "path": path, "mode": mode,
                "wait": {"policy": "no_wait"}, "ttl_ms": LOCK_TTL_MS
            }),
            Op::Release { aid, path } => {
                json!({"request": "lock_release", "agent": aid, "path": path})
            }
            Op::Note { sid, text } => {
                json!({"request": "note", "session": sid, "kind": "done", "text": text})
            }
        }
    }

    /// The acknowledged write a success answer means, after checking that the answer says what
    /// was asked. `Ok(None)`: an expected refusal (a lock conflict), nothing written.
    fn outcome(
        &self,
        owner: usize,
        model: &Model,
        result: Result<Reply, ErrorBody>,
    ) -> Result<Option<Write>, String> {
        let reply = match result {
            Ok(r) => r,
            Err(e) if matches!(self, Op::Acquire { .. }) && e.code.as_str() == "lock_conflict" => {
                return Ok(None);
            }
            Err(e) => {
                return Err(format!(
                    "{self:?} was refused with {}: {} (the daemon's state is not what it \
                     acknowledged)",
                    e.code.as_str(),
                    e.message
                ));
            }
        };
        let wrong = |r: &dyn std::fmt::Debug| Err(format!("{self:?}: unexpected answer {r:?}"));
        let w = match (self, reply) {
            (Op::CreateSession { objective }, Reply::Session(s))
                if &s.objective == objective && s.state.as_str() == "created" =>
            {
                Write::SessionCreated {
                    owner,
                    sid: s.id.as_str().to_string(),
                    objective: objective.clone(),
                }
            }
            (Op::StartSession { sid }, Reply::Session(s))
                if s.id.as_str() == sid && s.state.as_str() == "running" =>
            {
                Write::SessionStarted { sid: sid.clone() }
            }
            (Op::Register { sid, task }, Reply::Agent(a))
                if &a.task == task
                    && a.session_id.as_str() == sid
                    && a.state.as_str() == "pending" =>
            {
                Write::AgentRegistered {
                    owner,
                    aid: a.id.as_str().to_string(),
                    sid: sid.clone(),
                    task: task.clone(),
                }
            }
            (Op::AgentStart { aid }, Reply::Agent(a))
                if a.id.as_str() == aid && a.state.as_str() == "running" =>
            {
                Write::AgentStarted { aid: aid.clone() }
            }
            (Op::AgentComplete { aid }, Reply::Agent(a))
                if a.id.as_str() == aid && a.state.as_str() == "completed" =>
            {
                Write::AgentCompleted { aid: aid.clone() }
            }
            (Op::Pause { aid, pause, .. }, Reply::Agent(a))
                if a.id.as_str() == aid && a.paused == *pause =>
            {
                if *pause {
                    Write::AgentPaused { aid: aid.clone() }
                } else {
                    Write::AgentResumed { aid: aid.clone() }
                }
            }
            (Op::Acquire { aid, path, mode }, Reply::Lock(l))
                if l.holder.as_str() == aid && &l.path == path && l.mode.as_str() == mode =>
            {
                Write::LockGranted {
                    aid: aid.clone(),
                    path: path.clone(),
                    mode: mode.clone(),
                    token: l.token,
                }
            }
            (Op::Release { aid, path }, Reply::Released(v)) => {
                let held = &model.locks[&(aid.clone(), path.clone())];
                if v.len() != 1 || v[0].token != held.token || v[0].holder.as_str() != aid {
                    return wrong(&v);
                }
                Write::LockReleased {
                    aid: aid.clone(),
                    path: path.clone(),
                    token: held.token,
                }
            }
            // A note answers with the session it changed, the note last.
            (Op::Note { sid, text }, Reply::Session(s))
                if s.id.as_str() == sid && s.notes.last().is_some_and(|n| &n.text == text) =>
            {
                Write::Noted {
                    sid: sid.clone(),
                    text: text.clone(),
                }
            }
            (_, r) => return wrong(&r),
        };
        Ok(Some(w))
    }

    /// The write this in-flight request made if the daemon committed it before it died, judged
    /// from the restarted daemon's state; `None` when it did not commit.
    fn committed(&self, owner: usize, model: &Model, now: &Actual) -> Option<Write> {
        match self {
            Op::CreateSession { objective } => now
                .sessions
                .iter()
                .find(|(sid, s)| &s.objective == objective && !model.sessions.contains_key(*sid))
                .map(|(sid, _)| Write::SessionCreated {
                    owner,
                    sid: sid.clone(),
                    objective: objective.clone(),
                }),
            Op::StartSession { sid } => now
                .sessions
                .get(sid)
                .filter(|s| s.running && !model.sessions[sid].running)
                .map(|_| Write::SessionStarted { sid: sid.clone() }),
            Op::Register { sid, task } => now
                .agents
                .iter()
                .find(|(aid, a)| &a.task == task && !model.agents.contains_key(*aid))
                .map(|(aid, _)| Write::AgentRegistered {
                    owner,
                    aid: aid.clone(),
                    sid: sid.clone(),
                    task: task.clone(),
                }),
            Op::AgentStart { aid } => now
                .agents
                .get(aid)
                .filter(|a| {
                    a.state == AState::Running && model.agents[aid].state == AState::Pending
                })
                .map(|_| Write::AgentStarted { aid: aid.clone() }),
            Op::AgentComplete { aid } => now
                .agents
                .get(aid)
                .filter(|a| {
                    a.state == AState::Completed && model.agents[aid].state != AState::Completed
                })
                .map(|_| Write::AgentCompleted { aid: aid.clone() }),
            Op::Pause { aid, pause, .. } => now
                .agents
                .get(aid)
                .filter(|a| a.paused == *pause && model.agents[aid].paused != *pause)
                .map(|_| {
                    if *pause {
                        Write::AgentPaused { aid: aid.clone() }
                    } else {
                        Write::AgentResumed { aid: aid.clone() }
                    }
                }),
            Op::Acquire { aid, path, .. } => {
                let k = (aid.clone(), path.clone());
                if model.locks.contains_key(&k) {
                    return None;
                }
                now.locks.get(&k).map(|l| Write::LockGranted {
                    aid: aid.clone(),
                    path: path.clone(),
                    mode: l.mode.clone(),
                    token: l.token,
                })
            }
            Op::Release { aid, path } => {
                let k = (aid.clone(), path.clone());
                match (model.locks.get(&k), now.locks.contains_key(&k)) {
                    (Some(l), false) => Some(Write::LockReleased {
                        aid: aid.clone(),
                        path: path.clone(),
                        token: l.token,
                    }),
                    _ => None,
                }
            }
            Op::Note { sid, text } => {
                let before = model.sessions.get(sid)?.notes.len();
                let after = &now.sessions.get(sid)?.notes;
                (after.len() == before + 1 && after.last() == Some(text)).then(|| Write::Noted {
                    sid: sid.clone(),
                    text: text.clone(),
                })
            }
        }
    }
}

/// Choose writer `me`'s next request from what it knows was acknowledged. `n` makes names
/// unique.
fn choose(model: &Model, me: usize, rng: &mut Rng, n: &str) -> Op {
    let new_session = || Op::CreateSession {
        objective: format!("crash loop {n}"),
    };
    let Some(sid) = model.current[me].clone() else {
        return new_session();
    };
    if !model.sessions[&sid].running {
        return Op::StartSession { sid };
    }
    let mine: Vec<(&String, &AgentM)> = model
        .agents
        .iter()
        .filter(|(_, a)| a.owner == me && a.state != AState::Completed)
        .collect();
    let with = |f: &dyn Fn(&AgentM) -> bool| -> Vec<(&String, &AgentM)> {
        mine.iter().copied().filter(|(_, a)| f(a)).collect()
    };
    for _ in 0..32 {
        let roll = rng.below(100);
        let op = match roll {
            0..4 => Some(new_session()),
            4..9 => Some(Op::Note {
                sid: sid.clone(),
                text: format!("note {n}"),
            }),
            9..22 => (mine.len() < MAX_LIVE_AGENTS).then(|| Op::Register {
                sid: sid.clone(),
                task: format!("task {n}"),
            }),
            22..32 => {
                let c = with(&|a| a.state == AState::Pending);
                (!c.is_empty()).then(|| Op::AgentStart {
                    aid: rng.pick(&c).0.clone(),
                })
            }
            32..40 => {
                let c = with(&|a| a.state == AState::Running && !a.paused);
                (!c.is_empty()).then(|| {
                    let (aid, a) = rng.pick(&c);
                    Op::Pause {
                        sid: a.session.clone(),
                        aid: (*aid).clone(),
                        pause: true,
                    }
                })
            }
            40..47 => {
                let c = with(&|a| a.paused);
                (!c.is_empty()).then(|| {
                    let (aid, a) = rng.pick(&c);
                    Op::Pause {
                        sid: a.session.clone(),
                        aid: (*aid).clone(),
                        pause: false,
                    }
                })
            }
            47..74 if !mine.is_empty() => {
                let aid = rng.pick(&mine).0.clone();
                let (path, mode) = match rng.below(100) {
                    0..3 => (".", "workspace"),
                    3..15 => (*rng.pick(DIRS), "directory"),
                    15..55 => (*rng.pick(FILES), "read"),
                    _ => (*rng.pick(FILES), "write"),
                };
                (!model.locks.contains_key(&(aid.clone(), path.to_string()))).then(|| Op::Acquire {
                    aid,
                    path: path.to_string(),
                    mode: mode.to_string(),
                })
            }
            74..92 => {
                let held: Vec<&(String, String)> = model
                    .locks
                    .keys()
                    .filter(|(h, _)| model.agents[h].owner == me)
                    .collect();
                (!held.is_empty()).then(|| {
                    let (aid, path) = rng.pick(&held);
                    Op::Release {
                        aid: aid.clone(),
                        path: path.clone(),
                    }
                })
            }
            92..100 => {
                let c = with(&|a| a.state == AState::Running);
                (!c.is_empty()).then(|| Op::AgentComplete {
                    aid: rng.pick(&c).0.clone(),
                })
            }
            _ => None,
        };
        if let Some(op) = op {
            return op;
        }
    }
    Op::Note {
        sid,
        text: format!("note {n}"),
    }
}

/// What one writer did until the daemon died under it.
#[derive(Debug, Default)]
struct WriterLog {
    acked: Vec<Write>,
    /// The request sent without an answer: it may or may not have committed.
    in_flight: Option<Op>,
    /// A refusal or answer that contradicts what was acknowledged before.
    problem: Option<String>,
    conflicts: usize,
}

fn writer(
    me: usize,
    mut conn: Raw,
    root: &str,
    mut model: Model,
    mut rng: Rng,
    iteration: usize,
    go: &Barrier,
) -> WriterLog {
    let mut log = WriterLog::default();
    go.wait();
    let mut i = 0;
    loop {
        i += 1;
        let n = format!("i{iteration}-w{me}-{i}");
        let op = choose(&model, me, &mut rng, &n);
        // The write or the read fails once the daemon is dead: that request is in flight.
        let Ok(v) = conn.try_request(Some(root), op.body(me)) else {
            log.in_flight = Some(op);
            return log;
        };
        let result: Result<Reply, ErrorBody> = match serde_json::from_value(v.clone()) {
            Ok(r) => r,
            Err(e) => {
                log.problem = Some(format!("{op:?}: undecodable answer {v} ({e})"));
                return log;
            }
        };
        match op.outcome(me, &model, result) {
            Ok(Some(w)) => {
                model.apply(&w);
                log.acked.push(w);
            }
            Ok(None) => log.conflicts += 1,
            Err(problem) => {
                log.problem = Some(problem);
                return log;
            }
        }
    }
}

/// The restarted daemon's state, in the model's terms.
#[derive(Debug, Default)]
struct Actual {
    sessions: BTreeMap<String, SessionM>,
    agents: BTreeMap<String, AgentM>,
    locks: BTreeMap<(String, String), LockM>,
    views: Vec<LockView>,
}

impl Actual {
    /// Attribute what the model knows to its writer (what it does not know stays unowned and
    /// shows up as never written).
    fn own(&mut self, model: &Model) {
        for (sid, s) in &mut self.sessions {
            if let Some(m) = model.sessions.get(sid) {
                s.owner = m.owner;
            }
        }
        for (aid, a) in &mut self.agents {
            if let Some(m) = model.agents.get(aid) {
                a.owner = m.owner;
            }
        }
    }
}

/// One request on a verification connection, which must be answered with success.
fn call(conn: &mut Raw, root: &str, body: Value, ctx: &str) -> Reply {
    let v = conn
        .try_request(Some(root), body.clone())
        .unwrap_or_else(|e| panic!("{ctx}: no answer to {body} from the restarted daemon: {e}"));
    let r: Result<Reply, ErrorBody> = serde_json::from_value(v.clone())
        .unwrap_or_else(|e| panic!("{ctx}: undecodable answer {v} ({e})"));
    r.unwrap_or_else(|e| panic!("{ctx}: {body} refused: {e:?}"))
}

/// The restarted daemon's state; owners (which writer made what) are the test's own notion,
/// filled in by [`Actual::own`].
fn read_actual(conn: &mut Raw, root: &str, ctx: &str) -> Actual {
    let mut now = Actual::default();
    let Reply::Sessions(sessions) = call(
        conn,
        root,
        json!({"request": "session_list", "all": true}),
        ctx,
    ) else {
        panic!("{ctx}: session_list did not answer with sessions");
    };
    for s in sessions {
        let sid = s.id.as_str().to_string();
        let state = s.state.as_str();
        assert!(
            state == "created" || state == "running",
            "{ctx}: session {sid} is {state}; nothing ever ended it"
        );
        for a in &s.agents {
            let state = match a.state.as_str() {
                "pending" => AState::Pending,
                "running" => AState::Running,
                "completed" => AState::Completed,
                other => panic!(
                    "{ctx}: agent {} is {other}; the writers only start and complete agents",
                    a.id
                ),
            };
            now.agents.insert(
                a.id.as_str().to_string(),
                AgentM {
                    owner: usize::MAX,
                    session: a.session_id.as_str().to_string(),
                    task: a.task.clone(),
                    state,
                    paused: a.paused,
                },
            );
        }
        now.sessions.insert(
            sid.clone(),
            SessionM {
                owner: usize::MAX,
                objective: s.objective.clone(),
                running: state == "running",
                notes: s.notes.iter().map(|n| n.text.clone()).collect(),
            },
        );
    }
    let Reply::Locks(list) = call(conn, root, json!({"request": "lock_list"}), ctx) else {
        panic!("{ctx}: lock_list did not answer with locks");
    };
    assert!(
        list.waiters.is_empty(),
        "{ctx}: nobody ever waits for a lock, yet the restarted daemon has waiters: {:?}",
        list.waiters
    );
    for l in &list.locks {
        let k = (l.holder.as_str().to_string(), l.path.clone());
        let dup = now.locks.insert(
            k,
            LockM {
                mode: l.mode.as_str().to_string(),
                token: l.token,
            },
        );
        assert!(
            dup.is_none(),
            "{ctx}: {} holds {} twice: {:?}",
            l.holder,
            l.path,
            list.locks
        );
    }
    now.views = list.locks;
    now
}

/// Whether the scopes of two held locks intersect ("." is the project root).
fn scopes_overlap(a: &LockView, b: &LockView) -> bool {
    let (am, bm) = (a.mode.as_str(), b.mode.as_str());
    let under = |dir: &str, p: &str| dir == "." || p == dir || p.starts_with(&format!("{dir}/"));
    match (am, bm) {
        ("workspace", _) | (_, "workspace") => true,
        ("directory", "directory") => under(&a.path, &b.path) || under(&b.path, &a.path),
        ("directory", _) => under(&a.path, &b.path),
        (_, "directory") => under(&b.path, &a.path),
        _ => a.path == b.path,
    }
}

/// Every pair of held locks of different holders whose scopes overlap with one exclusive.
fn conflicting_pairs(locks: &[LockView]) -> Vec<String> {
    let mut bad = Vec::new();
    for (i, a) in locks.iter().enumerate() {
        for b in &locks[i + 1..] {
            let exclusive = a.mode.as_str() != "read" || b.mode.as_str() != "read";
            if a.holder != b.holder && exclusive && scopes_overlap(a, b) {
                bad.push(format!(
                    "{} {} ({}, token {}) and {} {} ({}, token {})",
                    a.holder, a.path, a.mode, a.token, b.holder, b.path, b.mode, b.token
                ));
            }
        }
    }
    bad
}

/// The differences between what must be held and what the daemon holds.
fn diff(model: &Model, now: &Actual) -> Vec<String> {
    fn compare<K: Ord + std::fmt::Debug, V: PartialEq + std::fmt::Debug>(
        what: &str,
        want: &BTreeMap<K, V>,
        got: &BTreeMap<K, V>,
        out: &mut Vec<String>,
    ) {
        for (k, w) in want {
            match got.get(k) {
                None => out.push(format!("acknowledged {what} {k:?} is missing: {w:?}")),
                Some(g) if g != w => {
                    out.push(format!("{what} {k:?}: acknowledged {w:?}, found {g:?}"));
                }
                Some(_) => {}
            }
        }
        for (k, g) in got {
            if !want.contains_key(k) {
                out.push(format!("{what} {k:?} was never written: {g:?}"));
            }
        }
    }
    let mut out = Vec::new();
    compare("session", &model.sessions, &now.sessions, &mut out);
    compare("agent", &model.agents, &now.agents, &mut out);
    compare("lock", &model.locks, &now.locks, &mut out);
    out
}

/// Events with a sequence number above `after`, oldest first.
fn events_after(conn: &mut Raw, root: &str, after: u64, ctx: &str) -> Vec<EventRecord> {
    let body = json!({"request": "events", "filter": {"after_seq": after}});
    let Reply::Events(events) = call(conn, root, body, ctx) else {
        panic!("{ctx}: events did not answer with events");
    };
    events
}

/// The whole timeline through a subscription (one frame per event, so its length has no
/// limit), up to and including `last`.
fn whole_timeline(env: &Env, root: &str, last: u64, ctx: &str) -> Vec<EventRecord> {
    if last == 0 {
        return Vec::new();
    }
    let mut conn = env.raw();
    conn.hello();
    conn.send(&ClientMsg::Subscribe {
        id: 1,
        project: root.to_string(),
        filter: EventFilter::default(),
    });
    let mut events = Vec::new();
    let mut subscribed = false;
    while events.last().is_none_or(|e: &EventRecord| e.seq < last) {
        match conn.recv() {
            Ok(ServerMsg::Response { result: Ok(_), .. }) if !subscribed => subscribed = true,
            Ok(ServerMsg::Event { event, .. }) if subscribed => events.push(event),
            other => panic!("{ctx}: subscription: unexpected {other:?}"),
        }
    }
    events
}

/// Counts for the summary.
#[derive(Debug, Default)]
struct Totals {
    acked: usize,
    in_flight_committed: usize,
    in_flight_lost: usize,
    conflicts: usize,
    grants: usize,
    state_checks: usize,
    events: usize,
}

#[test]
fn acknowledged_writes_survive_kill_9_at_random_moments() {
    let iterations = env_number("MAOS_CRASH_LOOP_ITERATIONS").map_or(DEFAULT_ITERATIONS, |n| {
        usize::try_from(n).expect("iteration count")
    });
    let seed = env_number("MAOS_CRASH_SEED").unwrap_or_else(|| {
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .expect("clock")
            .as_nanos() as u64
    });
    eprintln!(
        "crash loop: {iterations} kills, seed {seed} (replay with MAOS_CRASH_SEED={seed}; \
         more kills with MAOS_CRASH_LOOP_ITERATIONS=N)"
    );
    let started = Instant::now();
    let mut rng = Rng::new(seed);
    let env = Env::new();
    let root = Env::project_root(&env.project);
    // The daemon is started the way a client starts it.
    env.maos_json(&["daemon", "start"]);
    let mut pid = env.daemon_pid();

    let mut model = Model::new();
    let mut totals = Totals::default();
    // Every fencing token acknowledged or seen held so far, and the timeline as verified.
    let mut tokens: BTreeSet<u64> = BTreeSet::new();
    let mut timeline: Vec<EventKey> = Vec::new();

    for iteration in 1..=iterations {
        let ctx = format!(
            "iteration {iteration} of {iterations}, seed {seed} (replay with \
             MAOS_CRASH_SEED={seed})"
        );
        let max_token_before = tokens.last().copied().unwrap_or(0);
        // Connected (and greeted) before the clock starts: the kill lands among the writes.
        let go = Arc::new(Barrier::new(WRITERS + 1));
        let writers: Vec<_> = (0..WRITERS)
            .map(|me| {
                let mut conn = env.raw();
                let greeted = conn.hello();
                assert_eq!(greeted, pid, "{ctx}: writer {me} reached another daemon");
                let (root, model, go) = (root.clone(), model.clone(), go.clone());
                let wrng = Rng::new(rng.next());
                std::thread::spawn(move || writer(me, conn, &root, model, wrng, iteration, &go))
            })
            .collect();
        go.wait();
        let delay = Duration::from_millis(rng.next() % (MAX_KILL_DELAY_MS + 1));
        std::thread::sleep(delay); // the random moment, not a synchronization
        kill9(pid);
        wait_until(DEADLINE, "the killed daemon is gone", || !alive(pid));
        let logs: Vec<WriterLog> = writers
            .into_iter()
            .map(|w| {
                w.join()
                    .unwrap_or_else(|_| panic!("{ctx}: a writer thread panicked"))
            })
            .collect();

        // The acknowledged writes, in each writer's order (writers own disjoint objects).
        let mut expected: BTreeMap<EventKey, usize> = BTreeMap::new();
        for (me, log) in logs.iter().enumerate() {
            if let Some(p) = &log.problem {
                panic!("{ctx}: writer {me}: {p}");
            }
            for w in &log.acked {
                if let Write::LockGranted { token, .. } = w {
                    assert!(
                        *token > max_token_before,
                        "{ctx}: a lock was granted with token {token}, not above {max_token_before} \
                         seen before the restart: {w:?}"
                    );
                    assert!(
                        tokens.insert(*token),
                        "{ctx}: fencing token {token} granted twice: {w:?}"
                    );
                    totals.grants += 1;
                }
                for k in model.events_of(w) {
                    *expected.entry(k).or_default() += 1;
                }
                model.apply(w);
            }
            totals.acked += log.acked.len();
            totals.conflicts += log.conflicts;
        }

        // Restart, as a client would.
        env.maos_json(&["daemon", "start"]);
        let old = pid;
        pid = env.daemon_pid();
        assert_ne!(pid, old, "{ctx}: the killed daemon still answers");
        let mut conn = env.raw();
        conn.hello();
        let mut now = read_actual(&mut conn, &root, &ctx);

        // Each writer had at most one request in flight: it committed or it did not.
        for (me, log) in logs.iter().enumerate() {
            let Some(op) = &log.in_flight else { continue };
            match op.committed(me, &model, &now) {
                Some(w) => {
                    if let Write::LockGranted { token, .. } = &w {
                        assert!(
                            *token > max_token_before && tokens.insert(*token),
                            "{ctx}: an in-flight grant holds token {token}, already used or \
                             not above {max_token_before}: {w:?}"
                        );
                    }
                    model.apply(&w);
                    totals.in_flight_committed += 1;
                }
                None => totals.in_flight_lost += 1,
            }
        }
        now.own(&model);
        let problems = diff(&model, &now);
        assert!(
            problems.is_empty(),
            "{ctx}: after kill -9 at {delay:?} and a restart, the daemon's state is not what \
             was acknowledged ({} problems):\n{}\nin flight: {:?}",
            problems.len(),
            problems.join("\n"),
            logs.iter().map(|l| &l.in_flight).collect::<Vec<_>>()
        );
        totals.state_checks += model.sessions.len()
            + model.agents.len()
            + model.locks.len()
            + model
                .sessions
                .values()
                .map(|s| s.notes.len())
                .sum::<usize>();
        let conflicts = conflicting_pairs(&now.views);
        assert!(
            conflicts.is_empty(),
            "{ctx}: conflicting locks are held after the restart:\n{}",
            conflicts.join("\n")
        );

        // The timeline: dense sequence numbers across the crash, and every acknowledged write's
        // event on it.
        let new = events_after(&mut conn, &root, timeline.len() as u64, &ctx);
        for (i, e) in new.iter().enumerate() {
            assert_eq!(
                e.seq,
                (timeline.len() + i + 1) as u64,
                "{ctx}: event sequence numbers have a gap or repeat after {} verified events: {e:?}",
                timeline.len()
            );
        }
        let mut found: BTreeMap<EventKey, usize> = BTreeMap::new();
        for e in &new {
            *found.entry(event_key(e)).or_default() += 1;
        }
        let missing: Vec<String> = expected
            .iter()
            .filter(|(k, n)| found.get(*k).copied().unwrap_or(0) < **n)
            .map(|(k, n)| format!("{k:?} x{n} (found {})", found.get(k).unwrap_or(&0)))
            .collect();
        assert!(
            missing.is_empty(),
            "{ctx}: events of acknowledged writes are missing from the timeline:\n{}",
            missing.join("\n")
        );
        timeline.extend(new.iter().map(event_key));
        for e in &new {
            if let (Some(t), "lock_acquired") = (e.data["token"].as_u64(), e.kind.as_str()) {
                tokens.insert(t);
            }
        }
        tokens.extend(now.views.iter().map(|l| l.token));

        // A kill before any write reached the daemon leaves no database to check yet (the
        // project is opened by its first request): nothing can have been acknowledged then.
        if totals.acked == 0 && !env.db_path().exists() {
            continue;
        }
        let integrity = env.integrity_check();
        assert_eq!(integrity, "ok", "{ctx}: PRAGMA integrity_check");
    }

    // Nothing verified earlier went missing later: the whole timeline once more, event by
    // event.
    let ctx = format!("after the last restart, seed {seed}");
    let all = whole_timeline(&env, &root, timeline.len() as u64, &ctx);
    assert_eq!(all.len(), timeline.len(), "{ctx}: timeline length");
    for (i, (e, want)) in all.iter().zip(&timeline).enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "{ctx}: sequence");
        assert_eq!(&event_key(e), want, "{ctx}: event {} changed", e.seq);
    }
    totals.events = timeline.len();
    // A run that wrote nothing would prove nothing.
    assert!(
        totals.acked >= iterations && totals.grants > 0,
        "seed {seed}: too few acknowledged writes to mean anything: {totals:?}"
    );
    eprintln!(
        "crash loop: {iterations} kills survived, {} acknowledged writes checked ({} lock grants, \
         {} lock conflicts refused; {} in-flight writes found committed, {} not; {} object \
         checks; {} events), seed {seed}, {:.1}s",
        totals.acked,
        totals.grants,
        totals.conflicts,
        totals.in_flight_committed,
        totals.in_flight_lost,
        totals.state_checks,
        totals.events,
        started.elapsed().as_secs_f64()
    );
}

/// The conflict check itself: it must see what the daemon must never allow.
#[test]
fn the_conflict_check_finds_conflicting_locks() {
    let lock = |holder: u8, path: &str, mode: &str, token: u64| -> LockView {
        serde_json::from_value(json!({
            "path": path, "mode": mode, "holder": format!("agt_{:032x}", holder),
            "holder_role": "r", "session_id": format!("sess_{:032x}", 1), "token": token,
            "acquired_at": "2026-01-01T00:00:00Z", "expires_at": "2026-01-02T00:00:00Z",
        }))
        .expect("a LockView")
    };
    // Shared reads, one holder's overlapping locks, and a sibling that only shares a prefix.
    let fine = [
        lock(1, "src/a.rs", "read", 1),
        lock(1, "src", "directory", 2),
        lock(1, "src/b.rs", "write", 3),
        lock(2, "lib/z.rs", "read", 4),
        lock(3, "lib/z.rs", "read", 5),
        lock(2, "docs", "directory", 6),
        lock(2, "docs/x.md", "write", 7),
        lock(3, "srcx/a.rs", "write", 8),
    ];
    assert_eq!(conflicting_pairs(&fine), Vec::<String>::new());
    for bad in [
        [
            lock(1, "src/a.rs", "write", 1),
            lock(2, "src/a.rs", "write", 2),
        ],
        [
            lock(1, "src/a.rs", "write", 1),
            lock(2, "src/a.rs", "read", 2),
        ],
        [
            lock(1, "src", "directory", 1),
            lock(2, "src/a.rs", "read", 2),
        ],
        [
            lock(1, "docs/x.md", "read", 1),
            lock(2, "docs", "directory", 2),
        ],
        [lock(1, ".", "workspace", 1), lock(2, "lib/z.rs", "read", 2)],
    ] {
        assert_eq!(conflicting_pairs(&bad).len(), 1, "{bad:?}");
    }
}
