//! The conflict radar of a project (issue 35), beside its actor and off the hook's path: a task
//! follows the actor's broadcast of committed events, and each write an agent's hook reported
//! (`file_modified`, with the directory the agent works in) or a shell command it ran
//! (`command_run`) becomes a job for one thread that owns the engine (`maos_radar::Radar`) and
//! runs its git processes. That thread snapshots the agent's worktree again, merges the pairs
//! the write touches, keeps what `maos radar` answers, and hands the conflicts that appeared or
//! went away back to the actor as notes, which it records as `radar_conflict` /
//! `radar_cleared` events. A worktree leaves the radar when its last agent ends. In a fleet
//! it also pairs this machine's worktrees with what the other daemons report of theirs through
//! PostgreSQL (`crate::radar::fleet`), and reports this machine's.

pub mod fleet;

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use maos_core::ids::{AgentId, SessionId};
use maos_core::radar::RadarPair;
use maos_core::record::EventRecord;
use maos_radar::{Change, Git};
use serde_json::json;
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::{debug, warn};

/// An event for the actor to record: a conflict that appeared or went away, told to one of
/// its agents' sessions.
#[derive(Clone, Debug)]
pub struct Note {
    pub kind: &'static str,
    pub session: SessionId,
    pub agent: AgentId,
    pub data: serde_json::Value,
}

/// The most of the other side's diff a hook's answer carries, per file.
const CONTEXT_DIFF: usize = 4096;

enum Job {
    /// An agent wrote `paths` (project-relative; `None`: unknown, a shell command) working in
    /// `cwd`.
    Touch {
        agent: AgentId,
        session: SessionId,
        cwd: String,
        paths: Option<Vec<String>>,
    },
    /// An agent ended.
    Gone(AgentId),
    /// Writes may have been missed: every worktree is looked at again.
    Rescan,
}

/// A project's radar: what `maos radar` reads, and the way to its thread.
pub struct Radar {
    pairs: Mutex<Vec<RadarPair>>,
    jobs: Mutex<Option<mpsc::Sender<Job>>>,
    /// In a fleet, this daemon's machine: other machines' writes (their events reach this
    /// daemon too) are theirs to look at.
    machine: Option<String>,
}

/// The most hooks' working directories whose worktree the radar remembers (they come from
/// outside, any number of them); past it, it forgets them all.
const CWDS: usize = 1024;
/// How long a working directory found in no worktree of the project is taken as such before
/// git is asked again (a directory may become a worktree: `git worktree add`, `git init`).
const MISS_FOR: Duration = Duration::from_secs(10);

/// In a fleet, how often the radar looks for other daemons' new reports while this machine has
/// worktrees on it.
const FLEET_LOOK: Duration = Duration::from_secs(1);

impl std::fmt::Debug for Radar {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let pairs = self.pairs.lock().map(|p| p.len()).unwrap_or(0);
        f.debug_struct("Radar")
            .field("conflicting_pairs", &pairs)
            .finish()
    }
}

impl Radar {
    /// A radar that takes no jobs (fleet mode, or its thread could not start).
    pub fn off() -> Arc<Radar> {
        Arc::new(Radar {
            pairs: Mutex::new(Vec::new()),
            jobs: Mutex::new(None),
            machine: None,
        })
    }

    /// Starts the radar's thread, its index files in `dir`; `notes` carries what it finds to
    /// the actor (called on the radar's thread).
    /// Only worktrees of the repository whose project is `root` are looked at. In a fleet
    /// (`fleet`), the other machines' worktrees too, as their daemons report them.
    pub fn start(
        dir: &Path,
        root: PathBuf,
        fleet: Option<fleet::FleetLink>,
        notes: impl Fn(Vec<Note>) + Send + 'static,
    ) -> Arc<Radar> {
        let engine = match maos_radar::Radar::new(Git::new(), dir) {
            Ok(engine) => engine,
            Err(e) => {
                warn!(error = %e, "the conflict radar cannot start");
                return Radar::off();
            }
        };
        let (tx, rx) = mpsc::channel();
        let radar = Arc::new(Radar {
            pairs: Mutex::new(Vec::new()),
            jobs: Mutex::new(Some(tx)),
            machine: fleet.as_ref().map(|f| f.machine().to_string()),
        });
        let shared = Arc::downgrade(&radar);
        let dir = dir.to_path_buf();
        let started = std::thread::Builder::new()
            .name("maosd-radar".into())
            .spawn(move || {
                let in_fleet = fleet.is_some();
                let fleet = fleet.map(|link| fleet::FleetSide::new(link, root.clone(), &dir));
                let mut worker = Worker::new(engine, root);
                worker.fleet = fleet;
                loop {
                    // In a fleet, the other daemons' reports are looked at every second too.
                    let first = match in_fleet {
                        true => match rx.recv_timeout(FLEET_LOOK) {
                            Ok(job) => Some(job),
                            Err(mpsc::RecvTimeoutError::Timeout) => None,
                            Err(mpsc::RecvTimeoutError::Disconnected) => break,
                        },
                        false => match rx.recv() {
                            Ok(job) => Some(job),
                            Err(_) => break,
                        },
                    };
                    let mut jobs: Vec<Job> = first.into_iter().collect();
                    jobs.extend(rx.try_iter());
                    let found = worker.run(jobs);
                    let Some(radar) = shared.upgrade() else { break };
                    radar.set(worker.pairs());
                    if !found.is_empty() {
                        notes(found);
                    }
                }
            });
        if let Err(e) = started {
            warn!(error = %e, "the conflict radar's thread cannot start");
            return Radar::off();
        }
        radar
    }

    fn set(&self, pairs: Vec<RadarPair>) {
        if let Ok(mut p) = self.pairs.lock() {
            *p = pairs;
        }
    }

    fn send(&self, job: Job) {
        if let Ok(jobs) = self.jobs.lock()
            && let Some(tx) = jobs.as_ref()
        {
            let _ = tx.send(job);
        }
    }

    /// The pairs that would conflict; with `agent` (an id or its prefix), those one side of
    /// which it works in.
    pub fn pairs(&self, agent: Option<&str>) -> Vec<RadarPair> {
        let pairs = self.pairs.lock().map(|p| p.clone()).unwrap_or_default();
        match agent {
            None => pairs,
            Some(a) => pairs
                .into_iter()
                .filter(|p| {
                    p.a.agents
                        .iter()
                        .chain(&p.b.agents)
                        .any(|x| x.to_string().starts_with(a))
                })
                .collect(),
        }
    }

    /// What to tell `agent` before it writes `paths`: for each file among them that its work
    /// and another worktree's would conflict on, the other side's change and its agents.
    pub fn context_for(&self, agent: &AgentId, paths: &[String]) -> Option<String> {
        let pairs = self.pairs.lock().ok()?;
        let mut told = Vec::new();
        for p in pairs.iter() {
            let (mine, other, theirs) = if p.a.agents.contains(agent) {
                (&p.a, &p.b, false)
            } else if p.b.agents.contains(agent) {
                (&p.b, &p.a, true)
            } else {
                continue;
            };
            for f in p.files.iter().filter(|f| paths.contains(&f.path)) {
                let owners: Vec<String> = other.agents.iter().map(|a| a.to_string()).collect();
                let owners = if owners.is_empty() {
                    "no live agent".into()
                } else {
                    owners.join(", ")
                };
                let diff = if theirs { &f.diff_a } else { &f.diff_b };
                let mut diff = diff.clone();
                maos_core::text::cut_bytes(&mut diff, CONTEXT_DIFF, "\n[… cut]\n");
                told.push(format!(
                    "maos radar: your work on {} in {} would conflict ({}) with the change of {owners} \
                     in {}, not landed yet (maos radar shows both sides). Their change:\n{diff}",
                    f.path, mine.worktree, f.kind, other.worktree
                ));
            }
        }
        (!told.is_empty()).then(|| told.join("\n"))
    }

    /// The files `agent`'s work would conflict on, for its `maos ps` row.
    pub fn at_risk(&self, agent: &AgentId) -> Vec<maos_proto::PsRadar> {
        let Ok(pairs) = self.pairs.lock() else {
            return Vec::new();
        };
        let mut out = Vec::new();
        for p in pairs.iter() {
            let other = if p.a.agents.contains(agent) {
                &p.b
            } else if p.b.agents.contains(agent) {
                &p.a
            } else {
                continue;
            };
            out.extend(p.files.iter().map(|f| maos_proto::PsRadar {
                path: f.path.clone(),
                other_worktree: other.worktree.clone(),
                other_agents: other.agents.clone(),
            }));
        }
        out
    }

    /// What a committed event means for the radar.
    fn take(&self, e: &EventRecord) {
        match e.kind.as_str() {
            // In a fleet, another machine's write is its daemon's to look at (its path may
            // name a directory here too).
            "file_modified" | "command_run"
                if self.machine.is_some()
                    && e.data.get("machine").and_then(|m| m.as_str())
                        != self.machine.as_deref() => {}
            "file_modified" | "command_run" => {
                let (Some(agent), Some(session)) = (e.agent_id.clone(), e.session_id.clone())
                else {
                    return;
                };
                let Some(cwd) = e.data.get("cwd").and_then(|c| c.as_str()) else {
                    return;
                };
                let paths = e
                    .data
                    .get("path")
                    .and_then(|p| p.as_str())
                    .map(|p| vec![p.to_string()]);
                self.send(Job::Touch {
                    agent,
                    session,
                    cwd: cwd.to_string(),
                    paths,
                });
            }
            "agent_ended" | "agent_completed" | "agent_failed" | "agent_cancelled" => {
                if let Some(agent) = e.agent_id.clone() {
                    self.send(Job::Gone(agent));
                }
            }
            _ => {}
        }
    }
}

/// Follows the actor's committed events into the radar until the actor stops (then the
/// radar's thread stops too).
pub async fn follow(radar: Arc<Radar>, mut events: broadcast::Receiver<Arc<EventRecord>>) {
    loop {
        match events.recv().await {
            Ok(e) => radar.take(&e),
            Err(RecvError::Lagged(_)) => radar.send(Job::Rescan),
            Err(RecvError::Closed) => break,
        }
    }
    if let Ok(mut jobs) = radar.jobs.lock() {
        jobs.take();
    }
}

/// The radar's thread: the engine and who works where.
struct Worker {
    engine: maos_radar::Radar,
    /// Each live agent's worktree and session.
    agents: BTreeMap<AgentId, (String, SessionId)>,
    /// A working directory's worktree root as git last said (`None`: in no worktree of the
    /// project), and when: at most [`CWDS`] of them, a miss for [`MISS_FOR`].
    worktrees: HashMap<String, (Option<String>, Instant)>,
    /// The project's root: a worktree is looked at only if its project is this one.
    root: PathBuf,
    /// In a fleet: the other machines' worktrees, and the reports of this machine's.
    fleet: Option<fleet::FleetSide>,
}

impl Worker {
    fn new(engine: maos_radar::Radar, root: PathBuf) -> Worker {
        Worker {
            engine,
            agents: BTreeMap::new(),
            worktrees: HashMap::new(),
            root,
            fleet: None,
        }
    }

    /// The worktree `cwd` is in, if it is one of the project's. A hook's `cwd` comes from
    /// outside: another repository (or none) is never looked at, since a snapshot writes git
    /// objects into the repository it looks at.
    fn toplevel(&mut self, cwd: &str) -> Option<String> {
        self.toplevel_at(cwd, Instant::now())
    }

    /// [`Worker::toplevel`] at `now`: what git said of `cwd` is kept (a directory found in no
    /// worktree of the project only for [`MISS_FOR`]: it may become one); past [`CWDS`]
    /// directories all are forgotten, and asked again as they come.
    fn toplevel_at(&mut self, cwd: &str, now: Instant) -> Option<String> {
        match self.worktrees.get(cwd) {
            Some((Some(top), _)) => return Some(top.clone()),
            Some((None, at)) if now.saturating_duration_since(*at) < MISS_FOR => return None,
            _ => {}
        }
        let top = Git::new()
            .toplevel(Path::new(cwd))
            .ok()
            .filter(|top| maos_proto::paths::find_project(top).as_deref() == Some(&*self.root))
            .map(|p| p.display().to_string());
        if self.worktrees.len() >= CWDS && !self.worktrees.contains_key(cwd) {
            self.worktrees.clear();
        }
        self.worktrees.insert(cwd.to_string(), (top.clone(), now));
        top
    }

    /// Applies a batch of jobs: each worktree touched is snapshotted once (the files named,
    /// or all of it when any job could not name them).
    fn run(&mut self, jobs: Vec<Job>) -> Vec<Note> {
        let now = chrono::Utc::now();
        let mut touched: BTreeMap<String, Option<BTreeSet<String>>> = BTreeMap::new();
        let mut changes = Vec::new();
        for job in jobs {
            match job {
                Job::Touch {
                    agent,
                    session,
                    cwd,
                    paths,
                } => {
                    let Some(top) = self.toplevel(&cwd) else {
                        continue;
                    };
                    self.agents.insert(agent, (top.clone(), session));
                    let entry = touched.entry(top).or_insert_with(|| Some(BTreeSet::new()));
                    match (entry.as_mut(), paths) {
                        (Some(set), Some(paths)) => set.extend(paths),
                        _ => *entry = None,
                    }
                }
                Job::Gone(agent) => {
                    if let Some((top, _)) = self.agents.remove(&agent)
                        && !self.agents.values().any(|(t, _)| *t == top)
                    {
                        touched.remove(&top);
                        changes.extend(self.engine.forget(&top));
                    }
                }
                Job::Rescan => {
                    for (top, _) in self.agents.values() {
                        touched.insert(top.clone(), None);
                    }
                }
            }
        }
        for (top, paths) in touched {
            let known = self.engine.worktrees().any(|w| w == top);
            let done = if known {
                let paths: Option<Vec<String>> = paths.map(|p| p.into_iter().collect());
                self.engine.update_paths(&top, paths.as_deref(), now)
            } else {
                self.engine.watch(&PathBuf::from(&top), now)
            };
            match done {
                Ok(update) => {
                    debug!(worktree = %top, merged = update.merged, kept = update.kept, "radar updated");
                    changes.extend(update.changes);
                }
                Err(e) => {
                    warn!(worktree = %top, error = %e, "the radar cannot look at a worktree");
                    changes.extend(self.engine.forget(&top));
                }
            }
        }
        if let Some(fleet) = self.fleet.as_mut() {
            let local: Vec<(String, Vec<AgentId>)> = self
                .engine
                .worktrees()
                .filter(|w| !self.engine.is_foreign(w))
                .map(|w| {
                    let agents = self
                        .agents
                        .iter()
                        .filter(|(_, (t, _))| t == w)
                        .map(|(a, _)| a.clone())
                        .collect();
                    (w.to_string(), agents)
                })
                .collect();
            changes.extend(fleet.sync(&mut self.engine, local, now));
        }
        changes.iter().flat_map(|c| self.notes(c)).collect()
    }

    /// The agents working in `worktree`: this machine's, or another machine's as its daemon
    /// reported them.
    fn agent_ids(&self, worktree: &str) -> Vec<AgentId> {
        if let Some((_, agents)) = self.fleet.as_ref().and_then(|f| f.other(worktree)) {
            return agents.to_vec();
        }
        self.agents_in(worktree)
            .into_iter()
            .map(|(a, _)| a)
            .collect()
    }

    /// A side of a pair with its agents, branch and machine filled in.
    fn fill(&self, side: &mut maos_core::radar::RadarSide) {
        match self.fleet.as_ref().and_then(|f| f.other(&side.worktree)) {
            Some((machine, agents)) => {
                side.machine = Some(machine.to_string());
                side.agents = agents.to_vec();
            }
            None => {
                side.branch = maos_radar::branch(Path::new(&side.worktree));
                side.agents = self.agent_ids(&side.worktree);
            }
        }
    }

    fn agents_in(&self, worktree: &str) -> Vec<(AgentId, SessionId)> {
        self.agents
            .iter()
            .filter(|(_, (t, _))| t == worktree)
            .map(|(a, (_, s))| (a.clone(), s.clone()))
            .collect()
    }

    /// The conflicting pairs, each side's agents and branch filled in.
    fn pairs(&self) -> Vec<RadarPair> {
        let mut pairs: Vec<RadarPair> = self
            .engine
            .conflicts()
            .map(|p| {
                let mut p = p.clone();
                self.fill(&mut p.a);
                self.fill(&mut p.b);
                p
            })
            .collect();
        if let Some(fleet) = &self.fleet {
            pairs.extend(fleet.uncompared(&self.engine, |w| self.agent_ids(w)));
        }
        pairs
    }

    /// The events a change is told as: one per agent of each side, on its own session.
    fn notes(&self, change: &Change) -> Vec<Note> {
        let (kind, a, b, files, base) = match change {
            Change::Appeared(p) | Change::Changed(p) => (
                "radar_conflict",
                p.a.worktree.clone(),
                p.b.worktree.clone(),
                p.files.iter().map(|f| f.path.clone()).collect::<Vec<_>>(),
                Some(p.base.clone()),
            ),
            Change::Cleared { a, b, files } => {
                ("radar_cleared", a.clone(), b.clone(), files.clone(), None)
            }
        };
        let mut out = Vec::new();
        for (mine, other) in [(&a, &b), (&b, &a)] {
            let others: Vec<String> = self
                .agent_ids(other)
                .into_iter()
                .map(|a| a.to_string())
                .collect();
            let machine = self
                .fleet
                .as_ref()
                .and_then(|f| f.other(other))
                .map(|(m, _)| m);
            for (agent, session) in self.agents_in(mine) {
                let mut data = json!({
                    "files": files,
                    "worktree": mine,
                    "other_worktree": other,
                    "other_agents": others,
                });
                if let Some(base) = &base {
                    data["base"] = json!(base);
                }
                if let Some(machine) = machine {
                    data["other_machine"] = json!(machine);
                }
                out.push(Note {
                    kind,
                    session,
                    agent,
                    data,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::process::Command;

    fn git_init(dir: &Path) {
        let ok = Command::new("git")
            .args(["init", "-q"])
            .current_dir(dir)
            .status()
            .is_ok_and(|s| s.success());
        assert!(ok, "git init in {}", dir.display());
    }

    /// A hook's `cwd` comes from outside: the radar looks only at worktrees of its own
    /// project's repository, never at another repository the `cwd` names (it would write its
    /// snapshots' objects there).
    #[test]
    fn only_the_projects_own_worktrees_are_looked_at() {
        let tmp = tempfile::tempdir().unwrap();
        let (mine, other) = (tmp.path().join("mine"), tmp.path().join("other"));
        for dir in [&mine, &other] {
            std::fs::create_dir_all(dir.join("src")).unwrap();
            git_init(dir);
        }
        let root = std::fs::canonicalize(&mine).unwrap();
        let engine = maos_radar::Radar::new(Git::new(), &tmp.path().join("radar")).unwrap();
        let mut worker = Worker::new(engine, root.clone());
        let inside = mine.join("src").display().to_string();
        assert_eq!(worker.toplevel(&inside), Some(root.display().to_string()));
        assert_eq!(worker.toplevel(&other.display().to_string()), None);
        assert_eq!(worker.toplevel(&tmp.path().display().to_string()), None);
    }

    /// Hooks' working directories come from outside, any number of them: the radar remembers
    /// at most `CWDS` of them.
    #[test]
    fn the_working_directories_remembered_are_bounded() {
        let tmp = tempfile::tempdir().unwrap();
        let engine = maos_radar::Radar::new(Git::new(), &tmp.path().join("radar")).unwrap();
        let mut worker = Worker::new(engine, tmp.path().to_path_buf());
        // Directories that do not exist: git is not even started for them.
        for i in 0..1100 {
            let cwd = tmp.path().join(format!("gone/{i}")).display().to_string();
            assert_eq!(worker.toplevel(&cwd), None);
        }
        assert!(worker.worktrees.len() <= CWDS, "{}", worker.worktrees.len());
    }

    /// A directory in no worktree is asked of git again after a while: it may have become one.
    #[test]
    fn a_directory_that_becomes_a_worktree_is_found() {
        let tmp = tempfile::tempdir().unwrap();
        let later = tmp.path().join("later");
        std::fs::create_dir_all(later.join("src")).unwrap();
        let root = std::fs::canonicalize(&later).unwrap();
        let engine = maos_radar::Radar::new(Git::new(), &tmp.path().join("radar")).unwrap();
        let mut worker = Worker::new(engine, root.clone());
        let cwd = later.join("src").display().to_string();
        let t0 = Instant::now();
        assert_eq!(worker.toplevel_at(&cwd, t0), None, "not a worktree yet");
        git_init(&later);
        assert_eq!(
            worker.toplevel_at(&cwd, t0 + Duration::from_secs(1)),
            None,
            "a miss is kept a while"
        );
        assert_eq!(
            worker.toplevel_at(&cwd, t0 + MISS_FOR),
            Some(root.display().to_string()),
            "then asked again"
        );
        // A worktree found is kept.
        std::fs::remove_dir_all(later.join(".git")).unwrap();
        assert_eq!(
            worker.toplevel_at(&cwd, t0 + MISS_FOR * 3),
            Some(root.display().to_string())
        );
    }
}
