//! An index of locks (or requests) by path, so that finding the ones overlapping a path costs a
//! few map look-ups instead of a scan: Read/Write by exact path, Directory by path (looked up
//! component by component for ancestors, by range for descendants), Workspace in a small set.

use std::collections::{BTreeMap, BTreeSet};
use std::ops::Bound;

use super::{LockMode, LockPath};

/// Ids (tokens or wait ids) indexed by the scope of their lock.
#[derive(Clone, Debug, Default)]
pub(super) struct PathIndex {
    /// Read and Write locks, by exact path.
    point: BTreeMap<LockPath, BTreeSet<u64>>,
    /// Directory locks, by their directory.
    dirs: BTreeMap<LockPath, BTreeSet<u64>>,
    /// Workspace locks.
    workspace: BTreeSet<u64>,
}

/// The strict descendants of `path` among the keys of `map`.
fn descendants<'a>(
    map: &'a BTreeMap<LockPath, BTreeSet<u64>>,
    path: &LockPath,
) -> impl Iterator<Item = &'a BTreeSet<u64>> {
    // Keys under "p" are exactly those in ["p/", "p0"): '0' is the byte after '/'.
    let (lo, hi) = if path.is_root() {
        (Bound::Excluded(String::new()), Bound::Unbounded)
    } else {
        let p = path.as_str();
        (
            Bound::Included(format!("{p}/")),
            Bound::Excluded(format!("{p}0")),
        )
    };
    let range = (
        lo.as_ref().map(String::as_str),
        hi.as_ref().map(String::as_str),
    );
    map.range::<str, _>(range).map(|(_, ids)| ids)
}

impl PathIndex {
    fn bucket(&mut self, mode: LockMode) -> Option<&mut BTreeMap<LockPath, BTreeSet<u64>>> {
        match mode {
            LockMode::Read | LockMode::Write => Some(&mut self.point),
            LockMode::Directory => Some(&mut self.dirs),
            LockMode::Workspace => None,
        }
    }

    /// Index `id` under its lock's scope.
    pub(super) fn insert(&mut self, mode: LockMode, path: &LockPath, id: u64) {
        match self.bucket(mode) {
            Some(map) => {
                map.entry(path.clone()).or_default().insert(id);
            }
            None => {
                self.workspace.insert(id);
            }
        }
    }

    /// Forget `id` (indexed with the same mode and path).
    pub(super) fn remove(&mut self, mode: LockMode, path: &LockPath, id: u64) {
        match self.bucket(mode) {
            Some(map) => {
                if let Some(ids) = map.get_mut(path.as_str()) {
                    ids.remove(&id);
                    if ids.is_empty() {
                        map.remove(path.as_str());
                    }
                }
            }
            None => {
                self.workspace.remove(&id);
            }
        }
    }

    /// Ids indexed with exactly this mode class and path (Read/Write share a class).
    pub(super) fn at(&self, mode: LockMode, path: &LockPath) -> impl Iterator<Item = u64> + '_ {
        let set = match mode {
            LockMode::Read | LockMode::Write => self.point.get(path.as_str()),
            LockMode::Directory => self.dirs.get(path.as_str()),
            LockMode::Workspace => Some(&self.workspace),
        };
        set.into_iter().flatten().copied()
    }

    /// Append every id whose scope overlaps `(mode, path)` to `out` (each once, in no particular
    /// order; callers sort when order matters).
    pub(super) fn overlapping(&self, mode: LockMode, path: &LockPath, out: &mut Vec<u64>) {
        out.extend(self.workspace.iter().copied());
        match mode {
            LockMode::Workspace => {
                out.extend(self.point.values().flatten().copied());
                out.extend(self.dirs.values().flatten().copied());
            }
            LockMode::Directory => {
                out.extend(self.point.get(path.as_str()).into_iter().flatten().copied());
                out.extend(descendants(&self.point, path).flatten().copied());
                for anc in path.ancestors_and_self() {
                    out.extend(self.dirs.get(anc).into_iter().flatten().copied());
                }
                out.extend(descendants(&self.dirs, path).flatten().copied());
            }
            LockMode::Read | LockMode::Write => {
                out.extend(self.point.get(path.as_str()).into_iter().flatten().copied());
                for anc in path.ancestors_and_self() {
                    out.extend(self.dirs.get(anc).into_iter().flatten().copied());
                }
            }
        }
    }
}
