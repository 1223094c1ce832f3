//! The conflict radar across a fleet's machines (issue 35; `crate::radar` drives it from its
//! thread). No machine reads another's disk: each daemon writes to PostgreSQL, for each of its
//! agents' worktrees on the radar, a report (`maos_radar::fleet::report`: a base commit and the
//! changed files' contents, bounded), and reads the other live daemons' reports. One it reads is
//! input from outside: checked (`maos_core::radar::check_report`) before anything of it is
//! used, refused with a log line and a line in `maos radar` otherwise. A sound one is built in
//! this repository into the tree it stands for (its blobs written here on top of its base) and
//! put on the engine as another machine's worktree, `<machine>:<path>`, which pairs it with
//! this machine's worktrees like a local one. One that cannot be built here (its base commit is
//! not in this clone, it was too large to report) is shown as a pair that could not be compared,
//! never guessed at. One whose base was not here is looked at again, without a rebuild, when
//! this clone's refs change (a fetch): one `git cat-file` for their bases, and those now here
//! are taken again.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maos_core::ids::AgentId;
use maos_core::radar::{FleetFile, FleetTree, RadarPair, RadarSide, check_report};
use maos_core::time::Ts;
use maos_radar::{Change, Git, RefsStamp, fleet};
use maos_store::Fleet;
use tracing::{debug, warn};

/// What the radar needs of the fleet: the daemon's membership, the project's key, and the
/// runtime its queries run on (the radar's thread is not one of its threads).
#[derive(Clone)]
pub struct FleetLink {
    fleet: Arc<Fleet>,
    key: String,
    runtime: tokio::runtime::Handle,
}

impl FleetLink {
    /// The link of a project in a fleet (`None` on SQLite). Call within the daemon's runtime.
    pub fn new(fleet: Option<Arc<Fleet>>, key: Option<String>) -> Option<FleetLink> {
        let runtime = tokio::runtime::Handle::try_current().ok()?;
        Some(FleetLink {
            fleet: fleet?,
            key: key?,
            runtime,
        })
    }

    /// This daemon's machine.
    pub fn machine(&self) -> &str {
        self.fleet.machine()
    }
}

/// Another machine's worktree as its daemon's report last said.
struct Foreign {
    daemon: String,
    worktree: String,
    machine: String,
    agents: Vec<AgentId>,
    base: String,
    /// The files its report names.
    names: BTreeSet<String>,
    /// Why it could not be compared here (`None`: it is on the engine).
    note: Option<String>,
    /// Its base commit was not in this clone: it is looked at again when the clone's refs
    /// change.
    waiting: bool,
    /// Waiting, and to be looked at again at the next look.
    due: bool,
    /// When that was found.
    at: Ts,
}

/// The most reports whose base was not here looked up again in one look (the rest on the
/// next looks).
const RECHECK_MAX: usize = 64;
/// How often reports whose base was not here are looked up again though this clone's refs
/// did not change (commits may arrive without a ref written: an alternate object store).
const RECHECK_EVERY: chrono::TimeDelta = chrono::TimeDelta::seconds(60);

/// The most files a debug line names of a report rewritten while it was read.
const MOVED_SHOWN: usize = 8;

/// What taking another daemon's checked report here came to.
enum Built {
    /// The tree it stands for, built here.
    Tree(maos_radar::Snapshot),
    /// Why it cannot be compared here (shown with the pairs).
    Note(String),
    /// Its base commit is not here (shown with the pairs; looked at again after a fetch).
    NoBase(String),
    /// It was rewritten while it was read: the contents of these files (those it named) are
    /// gone. Taken again at the next look, whatever its version.
    Moved(Vec<String>),
    /// PostgreSQL did not give the contents (unreachable, a failed query): taken again at the
    /// next look, as a report that could not be read is.
    Unread(maos_store::StoreError),
}

/// What this machine last wrote of one of its worktrees.
#[derive(Default)]
struct Published {
    tree: String,
    agents: Vec<String>,
    /// Path → blob of the files written (their contents are in PostgreSQL already).
    blobs: HashMap<String, String>,
    /// The files the report named.
    names: BTreeSet<String>,
}

/// The radar thread's side of the fleet.
pub struct FleetSide {
    link: FleetLink,
    /// Where other machines' trees are built (this project's repository) and the index file
    /// that builds them.
    root: PathBuf,
    index: PathBuf,
    git: Git,
    published: HashMap<String, Published>,
    /// Other machines' worktrees by their name on the engine.
    foreign: BTreeMap<String, Foreign>,
    /// The version of each other daemon's report last taken, by (daemon, worktree).
    seen: HashMap<(String, String), i64>,
    /// This clone's refs as the last look found them, before it looked anything up (kept
    /// while a report waits for its base).
    stamp: Option<RefsStamp>,
    /// When the waiting reports were last looked up again (`None`: none waits).
    rechecked: Option<Ts>,
    /// The last failure to reach PostgreSQL, said once.
    failing: Option<String>,
}

impl FleetSide {
    /// The fleet side of the radar of the repository at `root`, its index file in `dir`. What
    /// this daemon reported before a restart is withdrawn: the radar starts empty.
    pub fn new(link: FleetLink, root: PathBuf, dir: &Path) -> FleetSide {
        let mut side = FleetSide {
            link,
            root,
            index: dir.join("fleet.index"),
            git: Git::new(),
            published: HashMap::new(),
            foreign: BTreeMap::new(),
            seen: HashMap::new(),
            stamp: None,
            rechecked: None,
            failing: None,
        };
        let gone = side
            .link
            .runtime
            .block_on(side.link.fleet.radar_withdraw(&side.link.key, None));
        side.reached(gone.map(|_| ()));
        side
    }

    fn reached(&mut self, r: Result<(), maos_store::StoreError>) -> bool {
        match r {
            Ok(()) => {
                self.failing = None;
                true
            }
            Err(e) => {
                let e = e.to_string();
                if self.failing.as_ref() != Some(&e) {
                    warn!(error = %e, "the radar cannot reach the fleet's reports");
                }
                self.failing = Some(e);
                false
            }
        }
    }

    /// Brings the fleet up to date with this machine's worktrees on the engine (`local`, each
    /// with its agents: reports written where they changed, withdrawn where gone) and the engine
    /// with the other machines' reports.
    pub fn sync(
        &mut self,
        engine: &mut maos_radar::Radar,
        local: Vec<(String, Vec<AgentId>)>,
        now: Ts,
    ) -> Vec<Change> {
        let gone: Vec<String> = self
            .published
            .keys()
            .filter(|w| !local.iter().any(|(l, _)| l == *w))
            .cloned()
            .collect();
        for w in gone {
            self.withdraw(&w);
        }
        if local.is_empty() {
            // Nothing here to pair the others' worktrees with.
            return Vec::new();
        }
        for (w, agents) in local {
            self.publish(engine, &w, agents);
        }
        self.poll(engine, now)
    }

    /// Writes this machine's report of `worktree` (on the engine, worked in by `agents`) when
    /// its snapshot or its agents changed since the last one.
    fn publish(&mut self, engine: &maos_radar::Radar, worktree: &str, agents: Vec<AgentId>) {
        let Some(snap) = engine.snapshot(worktree) else {
            return;
        };
        let agents: Vec<String> = agents.iter().map(ToString::to_string).collect();
        let Some(last) = self.published.remove(worktree) else {
            return self.write_report(worktree, snap, agents, Published::default());
        };
        if last.tree == snap.tree && last.agents == agents {
            self.published.insert(worktree.to_string(), last);
            return;
        }
        // Rows of an earlier report are in PostgreSQL: whatever happens now, an entry stays,
        // so that `withdraw` deletes them when the worktree leaves (one with no tree is
        // written again, in full, next time).
        self.published
            .insert(worktree.to_string(), Published::default());
        self.write_report(worktree, snap, agents, last);
    }

    /// Writes the report of `worktree`, sending only the contents `last` did not hold.
    fn write_report(
        &mut self,
        worktree: &str,
        snap: &maos_radar::Snapshot,
        agents: Vec<String>,
        last: Published,
    ) {
        let report = fleet::report(&self.git, Path::new(worktree), snap, &last.blobs);
        let mut t = match report {
            Ok(Some(t)) => t,
            Ok(None) => return,
            Err(e) => {
                warn!(worktree, error = %e, "the radar cannot report a worktree to the fleet");
                return;
            }
        };
        t.worktree = worktree.to_string();
        t.agents = agents.clone();
        let wrote = self
            .link
            .runtime
            .block_on(self.link.fleet.radar_publish(&self.link.key, &t));
        if !self.reached(wrote) {
            // Written again in full next time.
            return;
        }
        debug!(worktree, files = t.files.len(), too_large = ?t.too_large, "radar report written");
        self.published.insert(
            worktree.to_string(),
            Published {
                tree: snap.tree.clone(),
                agents,
                blobs: t
                    .files
                    .iter()
                    .filter(|f| f.mode != 0 && t.too_large.is_none())
                    .map(|f| (f.path.clone(), f.blob.clone()))
                    .collect(),
                names: t.files.iter().map(|f| f.path.clone()).collect(),
            },
        );
    }

    /// Takes this machine's report of `worktree` out of the fleet (it left the radar).
    fn withdraw(&mut self, worktree: &str) {
        if self.published.remove(worktree).is_none() {
            return;
        }
        let gone = self.link.runtime.block_on(
            self.link
                .fleet
                .radar_withdraw(&self.link.key, Some(worktree)),
        );
        self.reached(gone);
    }

    /// Reads the other daemons' reports that changed since the last look and brings the
    /// engine up to date with them: what appeared, changed or went away.
    fn poll(&mut self, engine: &mut maos_radar::Radar, now: Ts) -> Vec<Change> {
        let mut changes = Vec::new();
        let versions = self
            .link
            .runtime
            .block_on(self.link.fleet.radar_versions(&self.link.key));
        let versions = match versions {
            Ok(v) => {
                self.reached(Ok(()));
                v
            }
            Err(e) => {
                self.reached(Err(e));
                return changes;
            }
        };
        let live: BTreeSet<(&str, &str)> = versions
            .iter()
            .map(|v| (v.daemon.as_str(), v.worktree.as_str()))
            .collect();
        let gone: Vec<String> = self
            .foreign
            .iter()
            .filter(|(_, f)| !live.contains(&(f.daemon.as_str(), f.worktree.as_str())))
            .map(|(name, _)| name.clone())
            .collect();
        for name in gone {
            if let Some(f) = self.foreign.remove(&name) {
                self.seen.remove(&(f.daemon, f.worktree));
            }
            changes.extend(engine.forget(&name));
        }
        // This clone's refs, read before anything is looked up (git or the reports), when a
        // report waits for its base (first, for the recheck) or one is to be taken (it may
        // wait after).
        let mut stamp = None;
        if self.foreign.values().any(|f| f.waiting) {
            let new = maos_radar::refs_stamp(&self.root);
            let moved = self.stamp.as_ref() != Some(&new);
            stamp = Some(new);
            // Those whose base is here now are no longer counted as seen.
            self.recheck(moved, now);
        } else {
            self.rechecked = None;
        }
        // What to take: each report whose version is not the one last taken (`seen` looked up
        // once each).
        let due: Vec<((String, String), i64)> = versions
            .into_iter()
            .map(|v| ((v.daemon, v.worktree), v.version))
            .filter(|(key, version)| self.seen.get(key) != Some(version))
            .collect();
        if stamp.is_none() && !due.is_empty() {
            stamp = Some(maos_radar::refs_stamp(&self.root));
        }
        self.stamp = stamp;
        for (key, version) in due {
            // Taken at this version, unless `take` finds it must be read again (it removes it).
            self.seen.insert(key.clone(), version);
            changes.extend(self.take(engine, &key.0, &key.1, now));
        }
        changes
    }

    /// Looks up again the bases of the reports that wait for theirs: all of them when this
    /// clone's refs `moved` or [`RECHECK_EVERY`] has passed, at most [`RECHECK_MAX`] a look, in
    /// one `git cat-file`. A report whose base is here now is taken again by this look (it is
    /// no longer counted as seen); the others wait on.
    fn recheck(&mut self, moved: bool, now: Ts) {
        let every = self.rechecked.is_some_and(|at| now - at >= RECHECK_EVERY);
        if moved || every {
            for f in self.foreign.values_mut().filter(|f| f.waiting) {
                f.due = true;
            }
            self.rechecked = Some(now);
        }
        self.rechecked.get_or_insert(now);
        let due: Vec<String> = self
            .foreign
            .iter()
            .filter(|(_, f)| f.due)
            .map(|(n, _)| n.clone())
            .take(RECHECK_MAX)
            .collect();
        if due.is_empty() {
            return;
        }
        let bases: Vec<String> = due
            .iter()
            .filter_map(|n| self.foreign.get(n))
            .map(|f| format!("{}^{{commit}}", f.base))
            .collect();
        let names: Vec<&str> = bases.iter().map(String::as_str).collect();
        let types = match self.git.types(&self.root, &names) {
            Ok(types) => types,
            Err(e) => {
                warn!(error = %e, "the radar cannot look up the bases it waits for");
                Vec::new()
            }
        };
        for (i, name) in due.iter().enumerate() {
            let Some(f) = self.foreign.get_mut(name) else {
                continue;
            };
            f.due = false;
            if types.get(i).and_then(Option::as_deref) == Some("commit") {
                debug!(worktree = %name, "a report's base is here now: taken again");
                self.seen.remove(&(f.daemon.clone(), f.worktree.clone()));
            }
        }
    }

    /// Takes one other daemon's report: checked, built, put on the engine (or noted).
    fn take(
        &mut self,
        engine: &mut maos_radar::Radar,
        daemon: &str,
        worktree: &str,
        now: Ts,
    ) -> Vec<Change> {
        let fleet = self.link.fleet.clone();
        let key = self.link.key.clone();
        let read = self
            .link
            .runtime
            .block_on(fleet.radar_report(&key, daemon, worktree));
        let report = match read {
            Ok(Some(t)) => t,
            // Withdrawn since its version was read: nothing to take, and nothing kept of it.
            Ok(None) => {
                self.seen
                    .remove(&(daemon.to_string(), worktree.to_string()));
                return Vec::new();
            }
            Err(e) => {
                self.reached(Err(e));
                // Read again at the next look.
                self.seen
                    .remove(&(daemon.to_string(), worktree.to_string()));
                return Vec::new();
            }
        };
        let checked = check_report(&report);
        // A refused report's names are shown safely (escaped, cut), never used as paths.
        let name = format!("{}:{}", shown(&report.machine), shown(&report.worktree));
        // A name another report holds (two daemons of one machine name, one path): the later
        // one is told apart by its daemon's id.
        let name = match self.foreign.get(&name) {
            Some(f) if f.daemon != daemon || f.worktree != worktree => {
                format!("{name} ({})", shown(daemon))
            }
            _ => name,
        };
        // Its last report under another name (its machine's name changed): gone from there.
        let renamed: Vec<String> = self
            .foreign
            .iter()
            .filter(|(n, f)| **n != name && f.daemon == daemon && f.worktree == worktree)
            .map(|(n, _)| n.clone())
            .collect();
        let mut changes = Vec::new();
        for old in renamed {
            self.foreign.remove(&old);
            changes.extend(engine.forget(&old));
        }
        let mut foreign = Foreign {
            daemon: daemon.to_string(),
            worktree: worktree.to_string(),
            machine: report.machine.clone(),
            agents: Vec::new(),
            base: report.base.clone(),
            names: BTreeSet::new(),
            note: None,
            waiting: false,
            due: false,
            at: now,
        };
        let built = match checked {
            Err(why) => {
                warn!(daemon = %shown(daemon), worktree = %shown(worktree), reason = %why,
                      "the radar refused another daemon's report of a worktree");
                foreign.machine = shown(&report.machine);
                foreign.base = String::new();
                Err(format!("refused {}'s report: {why}", shown(daemon)))
            }
            Ok(agents) => {
                foreign.agents = agents;
                foreign.names = report.files.iter().map(|f| f.path.clone()).collect();
                match self.build(&report) {
                    Built::Tree(snap) => Ok(snap),
                    Built::Note(why) => {
                        if why.starts_with("refused") {
                            warn!(worktree = %name, reason = %why,
                                  "the radar refused another daemon's report of a worktree");
                        }
                        Err(why)
                    }
                    Built::NoBase(why) => {
                        foreign.waiting = true;
                        Err(why)
                    }
                    // Not counted as seen: the next look takes it again (its new version, or
                    // this one if the rewrite left the version as it was).
                    Built::Moved(files) => {
                        let shown_files = &files[..files.len().min(MOVED_SHOWN)];
                        debug!(worktree = %name, moved = files.len(), files = ?shown_files,
                               "a report was rewritten while it was read: taken again next look");
                        self.seen
                            .remove(&(daemon.to_string(), worktree.to_string()));
                        return changes;
                    }
                    // Not counted as seen either: a passing failure of PostgreSQL is not the
                    // pair's state until the other machine writes again.
                    Built::Unread(e) => {
                        self.reached(Err(e));
                        self.seen
                            .remove(&(daemon.to_string(), worktree.to_string()));
                        return changes;
                    }
                }
            }
        };
        match built {
            Ok(snap) => match engine.put(&name, &self.root, snap, now) {
                Ok(update) => changes.extend(update.changes),
                Err(e) => {
                    warn!(worktree = %name, error = %e, "the radar cannot merge another machine's worktree");
                    foreign.note = Some(format!("cannot compare: {e}"));
                    changes.extend(engine.forget(&name));
                }
            },
            Err(why) => {
                foreign.note = Some(why);
                changes.extend(engine.forget(&name));
            }
        }
        self.foreign.insert(name, foreign);
        changes
    }

    /// The tree a checked report stands for, built here: its base and blobs looked up once,
    /// only the missing blobs' contents fetched (none when its base is not here: it waits for
    /// it, `Built::NoBase`), all of them written in one git process.
    fn build(&mut self, t: &FleetTree) -> Built {
        let err = |e: maos_radar::RadarError| Built::Note(format!("cannot compare: {e}"));
        if t.too_large.is_some() {
            // Said by `fleet::build`, with nothing looked up.
            let none = fleet::Here::default();
            return match fleet::build(&self.git, &self.root, &self.index, t, &none, HashMap::new())
            {
                Ok(Ok(snap)) => Built::Tree(snap),
                Ok(Err(why)) => Built::Note(why),
                Err(e) => err(e),
            };
        }
        let here = match fleet::here(&self.git, &self.root, t) {
            Ok(here) => here,
            Err(e) => return err(e),
        };
        if !here.base {
            // Said by `fleet::build`, with nothing fetched.
            return match fleet::build(&self.git, &self.root, &self.index, t, &here, HashMap::new())
            {
                Ok(Ok(snap)) => Built::Tree(snap),
                Ok(Err(why)) => Built::NoBase(why),
                Err(e) => err(e),
            };
        }
        let wanted: Vec<&FleetFile> = here
            .missing
            .iter()
            .filter_map(|&i| t.files.get(i))
            .collect();
        let contents = if wanted.is_empty() {
            Vec::new()
        } else {
            let read = self.link.runtime.block_on(self.link.fleet.radar_contents(
                &self.link.key,
                &t.daemon,
                &t.worktree,
                &wanted,
            ));
            match read {
                Ok(contents) => contents,
                // Refused, not failed: as it stands it is never compared (a passing failure
                // is taken again next look).
                Err(maos_store::StoreError::Unsupported(why)) => return Built::Note(why),
                Err(e) => return Built::Unread(e),
            }
        };
        // A content is read only while its row holds the blob the report named: one absent
        // was rewritten since the report was read.
        let contents: HashMap<String, Vec<u8>> = contents.into_iter().collect();
        let moved: Vec<String> = wanted
            .iter()
            .filter(|f| !contents.contains_key(&f.path))
            .map(|f| f.path.clone())
            .collect();
        if !moved.is_empty() {
            return Built::Moved(moved);
        }
        match fleet::build(&self.git, &self.root, &self.index, t, &here, contents) {
            Ok(Ok(snap)) => Built::Tree(snap),
            Ok(Err(why)) => Built::Note(why),
            Err(e) => err(e),
        }
    }

    /// Whether `name` is another machine's worktree; its machine and agents.
    pub fn other(&self, name: &str) -> Option<(&str, &[AgentId])> {
        self.foreign
            .get(name)
            .map(|f| (f.machine.as_str(), f.agents.as_slice()))
    }

    /// The pairs that could not be compared: each other machine's worktree that could not be
    /// built here, with each of this machine's worktrees whose report names a file it names
    /// (all of them, for a report refused). `agents` gives this machine's worktrees' agents.
    pub fn uncompared(
        &self,
        engine: &maos_radar::Radar,
        agents: impl Fn(&str) -> Vec<AgentId>,
    ) -> Vec<RadarPair> {
        let mut out = Vec::new();
        for (name, f) in &self.foreign {
            let Some(note) = &f.note else { continue };
            for (worktree, mine) in &self.published {
                let overlap: Vec<String> = mine.names.intersection(&f.names).cloned().collect();
                if overlap.is_empty() && !f.names.is_empty() {
                    continue;
                }
                let Some(snap) = engine.snapshot(worktree) else {
                    continue;
                };
                out.push(RadarPair {
                    a: RadarSide {
                        worktree: worktree.clone(),
                        head: snap.head.clone(),
                        branch: maos_radar::branch(Path::new(worktree)),
                        tree: snap.tree.clone(),
                        agents: agents(worktree),
                        machine: None,
                    },
                    b: RadarSide {
                        worktree: name.clone(),
                        head: None,
                        branch: None,
                        tree: String::new(),
                        agents: f.agents.clone(),
                        machine: Some(f.machine.clone()),
                    },
                    base: f.base.clone(),
                    merged_at: f.at,
                    overlap,
                    files: Vec::new(),
                    note: Some(note.clone()),
                });
            }
        }
        out
    }
}

/// Text from another daemon's row, safe for a log line or a name: at most 200 characters, its
/// control characters escaped.
fn shown(s: &str) -> String {
    maos_core::text::escape_controls(&maos_core::text::clip(s, 200))
}

#[cfg(test)]
mod tests {
    use super::shown;

    /// Another daemon's text in a name or a log line: its control characters escaped, at most
    /// 200 characters of it, a cut one marked.
    #[test]
    fn another_daemons_text_is_shown_escaped_and_clipped() {
        assert_eq!(shown("machine-2"), "machine-2");
        assert_eq!(shown("a\nb\u{1b}[2J"), "a\\nb\\u{1b}[2J");
        let long = "x".repeat(300);
        assert_eq!(shown(&long), format!("{}…", "x".repeat(199)));
    }
}
