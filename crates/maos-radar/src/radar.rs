//! The incremental engine: the worktrees on the radar, their last snapshots, and every pair's
//! last result.

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maos_core::fnv::fnv1a64;
use maos_core::radar::{RADAR_DIFF_CAP, RadarFile, RadarPair, RadarSide};
use maos_core::time::Ts;

use crate::git::Git;
use crate::hunks::hunks;
use crate::model::{RadarError, Snapshot};
use crate::parse::MergeOutput;
use crate::plan::{PairMemo, Step, step};

/// A change in what the radar sees.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    /// A pair that merged cleanly (or was never merged) now conflicts.
    Appeared(RadarPair),
    /// A conflicting pair conflicts differently (other files or other hunks).
    Changed(RadarPair),
    /// A conflicting pair no longer conflicts (or one side left the radar). `files` are the
    /// files it conflicted on.
    Cleared {
        a: String,
        b: String,
        files: Vec<String>,
    },
}

/// What one update did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Update {
    pub changes: Vec<Change>,
    /// Whether the worktree's snapshot is the one it had (nothing else was looked at).
    pub unchanged: bool,
    /// Pairs merged by git.
    pub merged: usize,
    /// Pairs whose last merge still holds.
    pub kept: usize,
    /// Pairs with no file changed on both sides (no merge needed).
    pub disjoint: usize,
}

struct Worktree {
    /// Its root; for another machine's worktree, the repository its trees were built in.
    path: PathBuf,
    /// The radar's own index file for this worktree.
    index: PathBuf,
    snap: Option<Snapshot>,
    /// Another machine's worktree (fleet mode), whose snapshots are given ([`Radar::put`]):
    /// paired with this machine's worktrees only.
    foreign: bool,
}

/// A pair looked at, before its merge.
struct Look {
    key: (String, String),
    sa: Snapshot,
    sb: Snapshot,
    /// Where its git commands run (side a's worktree).
    dir: PathBuf,
    memo: PairMemo,
    overlap: Vec<String>,
    step: Step,
}

struct Pair {
    memo: PairMemo,
    /// The conflicting files, when there are any.
    report: Option<RadarPair>,
}

/// The radar of one repository's worktrees.
pub struct Radar {
    git: Git,
    cache: PathBuf,
    worktrees: BTreeMap<String, Worktree>,
    pairs: BTreeMap<(String, String), Pair>,
    /// Merge bases by the two `HEAD`s (in order).
    bases: HashMap<(String, String), Option<String>>,
    /// The files a tree changed since a base, by (tree, base).
    changed: HashMap<(String, String), Arc<BTreeSet<String>>>,
}

impl Radar {
    /// A radar keeping its index files in `cache` (created if missing).
    pub fn new(git: Git, cache: &Path) -> Result<Radar, RadarError> {
        // The index files list the worktrees' files: the user's alone, as all of MAOS_HOME.
        use std::os::unix::fs::{DirBuilderExt, PermissionsExt};
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(cache)
            .and_then(|()| std::fs::set_permissions(cache, std::fs::Permissions::from_mode(0o700)))
            .map_err(|error| RadarError::Cache {
                path: cache.display().to_string(),
                error,
            })?;
        Ok(Radar {
            git,
            cache: cache.to_path_buf(),
            worktrees: BTreeMap::new(),
            pairs: BTreeMap::new(),
            bases: HashMap::new(),
            changed: HashMap::new(),
        })
    }

    /// The worktrees on the radar, by the name they were added under.
    pub fn worktrees(&self) -> impl Iterator<Item = &str> {
        self.worktrees.keys().map(String::as_str)
    }

    /// A worktree's last snapshot.
    pub fn snapshot(&self, worktree: &str) -> Option<&Snapshot> {
        self.worktrees.get(worktree).and_then(|w| w.snap.as_ref())
    }

    /// Every pair that would conflict now.
    pub fn conflicts(&self) -> impl Iterator<Item = &RadarPair> {
        self.pairs.values().filter_map(|p| p.report.as_ref())
    }

    /// Puts the worktree at `path` (its root) on the radar under the name `path` as given, and
    /// looks at it. Its index file starts as a copy of the worktree's own index, so that the
    /// first snapshot reads only the files changed since git last looked.
    pub fn watch(&mut self, path: &Path, now: Ts) -> Result<Update, RadarError> {
        let name = path.display().to_string();
        if !self.worktrees.contains_key(&name) {
            let index = self
                .cache
                .join(format!("{:016x}.index", fnv1a64(name.as_bytes())));
            // A worktree with no index yet starts from an empty one.
            if !index.exists()
                && let Ok(own) = self.git.index_path(path)
            {
                let _ = std::fs::copy(own, &index);
            }
            let worktree = Worktree {
                path: path.to_path_buf(),
                index,
                snap: None,
                foreign: false,
            };
            self.worktrees.insert(name.clone(), worktree);
        }
        self.update(&name, now)
    }

    /// Takes a worktree off the radar: its conflicts are cleared.
    pub fn forget(&mut self, worktree: &str) -> Vec<Change> {
        let Some(w) = self.worktrees.remove(worktree) else {
            return Vec::new();
        };
        if !w.foreign {
            let _ = std::fs::remove_file(&w.index);
        }
        let gone: Vec<(String, String)> = self
            .pairs
            .keys()
            .filter(|(a, b)| a == worktree || b == worktree)
            .cloned()
            .collect();
        let mut changes = Vec::new();
        for key in gone {
            if let Some(Pair {
                report: Some(report),
                ..
            }) = self.pairs.remove(&key)
            {
                changes.push(cleared(&report));
            }
        }
        self.evict();
        changes
    }

    /// Snapshots `worktree` again and brings every pair it is in up to date: merged again
    /// only where the files its snapshot changed meet the other side's changes.
    pub fn update(&mut self, worktree: &str, now: Ts) -> Result<Update, RadarError> {
        self.update_paths(worktree, None, now)
    }

    /// [`Radar::update`] after writes to `paths` only (relative to the worktree's root): the
    /// snapshot looks at those files alone (the rest of the worktree as the last snapshot saw
    /// it), which is what makes one write cheap in a large worktree. `None`, or a worktree
    /// never snapshotted, looks at everything.
    pub fn update_paths(
        &mut self,
        worktree: &str,
        paths: Option<&[String]>,
        now: Ts,
    ) -> Result<Update, RadarError> {
        let w = self
            .worktrees
            .get(worktree)
            .ok_or_else(|| RadarError::Unknown(worktree.to_string()))?;
        if w.foreign {
            // Another machine's: only its daemon's report moves it.
            return Ok(Update {
                unchanged: true,
                ..Update::default()
            });
        }
        let paths = if w.snap.is_some() { paths } else { None };
        let snap = self.git.snapshot(&w.path, &w.index, paths)?;
        self.apply(worktree, snap, now)
    }

    /// Puts another machine's worktree (fleet mode) on the radar under `name`, or moves it, at
    /// the snapshot `snap` its daemon's report was built into (a tree in the repository at
    /// `dir`, which the merges run in). It is paired with this machine's worktrees only: each
    /// machine's radar merges its own worktrees with the others'.
    pub fn put(
        &mut self,
        name: &str,
        dir: &Path,
        snap: Snapshot,
        now: Ts,
    ) -> Result<Update, RadarError> {
        match self.worktrees.get(name) {
            Some(w) if !w.foreign => return Err(RadarError::Unknown(name.to_string())),
            Some(_) => {}
            None => {
                let worktree = Worktree {
                    path: dir.to_path_buf(),
                    index: PathBuf::new(),
                    snap: None,
                    foreign: true,
                };
                self.worktrees.insert(name.to_string(), worktree);
            }
        }
        self.apply(name, snap, now)
    }

    /// Whether `name` is another machine's worktree ([`Radar::put`]).
    pub fn is_foreign(&self, name: &str) -> bool {
        self.worktrees.get(name).is_some_and(|w| w.foreign)
    }

    /// Takes `worktree`'s new snapshot and brings every pair it is in up to date.
    fn apply(&mut self, worktree: &str, snap: Snapshot, now: Ts) -> Result<Update, RadarError> {
        let w = self
            .worktrees
            .get(worktree)
            .ok_or_else(|| RadarError::Unknown(worktree.to_string()))?;
        let foreign = w.foreign;
        let old = w.snap.clone();
        if old.as_ref() == Some(&snap) {
            return Ok(Update {
                unchanged: true,
                ..Update::default()
            });
        }
        let moved = match &old {
            Some(old) if old.tree != snap.tree => Some((
                old.tree.clone(),
                self.git.changed(&w.path, &old.tree, &snap.tree)?,
            )),
            Some(old) => Some((old.tree.clone(), BTreeSet::new())),
            None => None,
        };
        if let Some(w) = self.worktrees.get_mut(worktree) {
            w.snap = Some(snap);
        }
        let others: Vec<String> = self
            .worktrees
            .iter()
            .filter(|(name, w)| {
                name.as_str() != worktree && w.snap.is_some() && !(foreign && w.foreign)
            })
            .map(|(name, _)| name.clone())
            .collect();
        let mut update = Update::default();
        let mut looks = Vec::with_capacity(others.len());
        for other in others {
            let moved = moved.as_ref().map(|(from, files)| (from.as_str(), files));
            if let Some(look) = self.look(worktree, &other, moved, &mut update)? {
                looks.push(look);
            }
        }
        // The merges, which are most of the time: all of them in one git process (one spawn,
        // not one per pair); then the files of those that conflict (hunks, each side's diff)
        // on every core. A git that cannot merge in a batch merges pair by pair.
        let merging: Vec<&Look> = looks.iter().filter(|l| l.step == Step::Merge).collect();
        let batched: Option<Vec<MergeOutput>> = match merging.first() {
            None => Some(Vec::new()),
            Some(first) => {
                let triples: Vec<(&str, &str, &str)> = merging
                    .iter()
                    .map(|l| {
                        let m = &l.memo;
                        (m.base.as_str(), m.tree_a.as_str(), m.tree_b.as_str())
                    })
                    .collect();
                self.git.merges(&first.dir, &triples).ok()
            }
        };
        let mut merged: Vec<Option<Result<Vec<RadarFile>, RadarError>>> =
            (0..merging.len()).map(|_| None).collect();
        let threads = std::thread::available_parallelism().map_or(1, |n| n.get());
        let chunk = merging.len().div_ceil(threads).max(1);
        let this = &*self;
        let outs: Vec<Option<MergeOutput>> = match batched {
            Some(outs) => outs.into_iter().map(Some).collect(),
            None => (0..merging.len()).map(|_| None).collect(),
        };
        std::thread::scope(|scope| {
            for ((looks, outs), slots) in merging
                .chunks(chunk)
                .zip(outs.chunks(chunk))
                .zip(merged.chunks_mut(chunk))
            {
                scope.spawn(move || {
                    for ((look, out), slot) in looks.iter().zip(outs).zip(slots.iter_mut()) {
                        let m = &look.memo;
                        *slot = Some(match out {
                            Some(out) => this.files(&look.dir, &m.base, &m.tree_a, &m.tree_b, out),
                            None => this.merge(&look.dir, &m.base, &m.tree_a, &m.tree_b),
                        });
                    }
                });
            }
        });
        let mut merged = merged.into_iter();
        for look in looks {
            let files = match look.step {
                Step::Merge => Some(merged.next().flatten().unwrap_or_else(|| {
                    Err(RadarError::Unknown("a merge that did not run".into()))
                })?),
                _ => None,
            };
            self.settle(look, files, now, &mut update);
        }
        self.evict();
        Ok(update)
    }

    /// Decides what the pair of `moving` (which was just snapshotted again) and `other` needs;
    /// `None` when the pair is done with (no common history).
    fn look(
        &mut self,
        moving: &str,
        other: &str,
        moved: Option<(&str, &BTreeSet<String>)>,
        update: &mut Update,
    ) -> Result<Option<Look>, RadarError> {
        let (a, b) = if moving < other {
            (moving, other)
        } else {
            (other, moving)
        };
        let key = (a.to_string(), b.to_string());
        let (Some(wa), Some(wb)) = (self.worktrees.get(a), self.worktrees.get(b)) else {
            return Ok(None);
        };
        let (Some(sa), Some(sb)) = (wa.snap.clone(), wb.snap.clone()) else {
            return Ok(None);
        };
        let dir = wa.path.clone();
        let base = match (&sa.head, &sb.head) {
            (Some(ha), Some(hb)) => self.base(&dir, ha, hb)?,
            _ => None,
        };
        let Some(base) = base else {
            // No common history: nothing to merge against.
            if let Some(Pair {
                report: Some(report),
                ..
            }) = self.pairs.remove(&key)
            {
                update.changes.push(cleared(&report));
            }
            return Ok(None);
        };
        let ca = self.changed_since(&dir, &sa.tree, &base)?;
        let cb = self.changed_since(&dir, &sb.tree, &base)?;
        let overlap: Vec<String> = ca.intersection(&cb).cloned().collect();
        let memo = PairMemo {
            base,
            tree_a: sa.tree.clone(),
            tree_b: sb.tree.clone(),
        };
        let step = step(
            self.pairs.get(&key).map(|p| &p.memo),
            &memo,
            !overlap.is_empty(),
            moved,
            &ca,
            &cb,
        );
        Ok(Some(Look {
            key,
            sa,
            sb,
            dir,
            memo,
            overlap,
            step,
        }))
    }

    /// Records a pair's new result (`files`: what its merge found, when it was merged).
    fn settle(&mut self, look: Look, files: Option<Vec<RadarFile>>, now: Ts, update: &mut Update) {
        let Look {
            key,
            sa,
            sb,
            memo,
            overlap,
            step,
            ..
        } = look;
        let old_report = self.pairs.get(&key).and_then(|p| p.report.clone());
        let report = match step {
            Step::Clear => {
                update.disjoint += 1;
                None
            }
            Step::Keep => {
                update.kept += 1;
                old_report.clone().map(|mut r| {
                    r.a = side(&key.0, &sa);
                    r.b = side(&key.1, &sb);
                    r
                })
            }
            Step::Merge => {
                update.merged += 1;
                let files = files.unwrap_or_default();
                (!files.is_empty()).then(|| RadarPair {
                    a: side(&key.0, &sa),
                    b: side(&key.1, &sb),
                    base: memo.base.clone(),
                    merged_at: now,
                    overlap,
                    files,
                    note: None,
                })
            }
        };
        match (&old_report, &report) {
            (None, Some(new)) => update.changes.push(Change::Appeared(new.clone())),
            (Some(old), None) => update.changes.push(cleared(old)),
            (Some(old), Some(new)) if old.files != new.files => {
                update.changes.push(Change::Changed(new.clone()))
            }
            _ => {}
        }
        self.pairs.insert(key, Pair { memo, report });
    }

    /// git's merge of two trees: the conflicting files with their hunks and each side's diff.
    fn merge(
        &self,
        dir: &Path,
        base: &str,
        tree_a: &str,
        tree_b: &str,
    ) -> Result<Vec<RadarFile>, RadarError> {
        let out = self.git.merge(dir, base, tree_a, tree_b)?;
        self.files(dir, base, tree_a, tree_b, &out)
    }

    /// The conflicting files of a merge's output, with their hunks and each side's diff.
    fn files(
        &self,
        dir: &Path,
        base: &str,
        tree_a: &str,
        tree_b: &str,
        out: &MergeOutput,
    ) -> Result<Vec<RadarFile>, RadarError> {
        let mut files = Vec::with_capacity(out.conflicts.len());
        for (path, kind) in out.conflicts.clone() {
            let hunks = self
                .git
                .file(dir, &out.tree, &path)?
                .map(|t| hunks(&t))
                .unwrap_or_default();
            let diff_a = self.git.diff(dir, base, tree_a, &path, RADAR_DIFF_CAP)?;
            let diff_b = self.git.diff(dir, base, tree_b, &path, RADAR_DIFF_CAP)?;
            files.push(RadarFile {
                path,
                kind,
                hunks,
                diff_a,
                diff_b,
            });
        }
        Ok(files)
    }

    fn base(&mut self, dir: &Path, ha: &str, hb: &str) -> Result<Option<String>, RadarError> {
        let key = if ha <= hb {
            (ha.to_string(), hb.to_string())
        } else {
            (hb.to_string(), ha.to_string())
        };
        if let Some(base) = self.bases.get(&key) {
            return Ok(base.clone());
        }
        let base = if ha == hb {
            Some(ha.to_string())
        } else {
            self.git.merge_base(dir, ha, hb)?
        };
        self.bases.insert(key, base.clone());
        Ok(base)
    }

    fn changed_since(
        &mut self,
        dir: &Path,
        tree: &str,
        base: &str,
    ) -> Result<Arc<BTreeSet<String>>, RadarError> {
        let key = (tree.to_string(), base.to_string());
        if let Some(set) = self.changed.get(&key) {
            return Ok(set.clone());
        }
        let set = Arc::new(self.git.changed(dir, base, tree)?);
        self.changed.insert(key, set.clone());
        Ok(set)
    }

    /// Drops the cached bases and change sets no worktree's snapshot uses any more.
    fn evict(&mut self) {
        let trees: BTreeSet<&str> = self
            .worktrees
            .values()
            .filter_map(|w| w.snap.as_ref())
            .map(|s| s.tree.as_str())
            .collect();
        let heads: BTreeSet<&str> = self
            .worktrees
            .values()
            .filter_map(|w| w.snap.as_ref().and_then(|s| s.head.as_deref()))
            .collect();
        self.changed
            .retain(|(tree, _), _| trees.contains(tree.as_str()));
        self.bases
            .retain(|(a, b), _| heads.contains(a.as_str()) && heads.contains(b.as_str()));
    }
}

fn side(worktree: &str, snap: &Snapshot) -> RadarSide {
    RadarSide {
        worktree: worktree.to_string(),
        head: snap.head.clone(),
        branch: None,
        tree: snap.tree.clone(),
        agents: Vec::new(),
        machine: None,
    }
}

fn cleared(report: &RadarPair) -> Change {
    Change::Cleared {
        a: report.a.worktree.clone(),
        b: report.b.worktree.clone(),
        files: report.files.iter().map(|f| f.path.clone()).collect(),
    }
}
