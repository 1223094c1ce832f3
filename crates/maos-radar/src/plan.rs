//! Which pairs of worktrees to merge again after a snapshot: the incremental scheme, pure.
//!
//! A pair is worth merging only when both sides changed a common file since their merge base
//! (no common file: nothing can conflict). A pair merged before keeps its result when only one
//! side moved and none of the files that side's move changed is among the files the other side
//! changed: every file the other side touched is then the same on both sides as at the last
//! merge, so git's merge of them, and each side's diff of them, are the same too.

use std::collections::BTreeSet;

/// What the radar remembers of a pair's last look: the base and both sides' trees it was
/// made at.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PairMemo {
    pub base: String,
    pub tree_a: String,
    pub tree_b: String,
}

/// What to do with a pair now.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Step {
    /// No file changed on both sides: nothing can conflict, no merge.
    Clear,
    /// The last merge's result still holds.
    Keep,
    /// Merge again.
    Merge,
}

/// The step for a pair whose sides are now as in `now`, given its last look (`memo`), whether
/// the files both sides changed since the base have anything in common (`overlap`), and the
/// files that changed in a side that moved since the memo: `moved` is `(from_tree, files)`,
/// the files that differ between the moving side's `from_tree` and its tree now (`None` when
/// not known). `changed_a` / `changed_b` are the files each side changed since the base now.
pub fn step(
    memo: Option<&PairMemo>,
    now: &PairMemo,
    overlap: bool,
    moved: Option<(&str, &BTreeSet<String>)>,
    changed_a: &BTreeSet<String>,
    changed_b: &BTreeSet<String>,
) -> Step {
    if !overlap {
        return Step::Clear;
    }
    let Some(memo) = memo else {
        return Step::Merge;
    };
    if memo.base != now.base {
        return Step::Merge;
    }
    let a_moved = memo.tree_a != now.tree_a;
    let b_moved = memo.tree_b != now.tree_b;
    let (from, other_changed) = match (a_moved, b_moved) {
        (false, false) => return Step::Keep,
        (true, true) => return Step::Merge,
        (true, false) => (&memo.tree_a, changed_b),
        (false, true) => (&memo.tree_b, changed_a),
    };
    match moved {
        Some((moved_from, files)) if moved_from == from && files.is_disjoint(other_changed) => {
            Step::Keep
        }
        _ => Step::Merge,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;
    use std::collections::BTreeMap;

    fn set(names: &[&str]) -> BTreeSet<String> {
        names.iter().map(|s| s.to_string()).collect()
    }

    fn memo(base: &str, a: &str, b: &str) -> PairMemo {
        PairMemo {
            base: base.into(),
            tree_a: a.into(),
            tree_b: b.into(),
        }
    }

    #[test]
    fn steps() {
        let (ca, cb) = (set(&["f", "g"]), set(&["g"]));
        let m = memo("B", "a1", "b1");
        assert_eq!(
            step(Some(&m), &memo("B", "a2", "b1"), false, None, &ca, &cb),
            Step::Clear
        );
        assert_eq!(step(None, &m, true, None, &ca, &cb), Step::Merge);
        assert_eq!(
            step(Some(&m), &memo("C", "a1", "b1"), true, None, &ca, &cb),
            Step::Merge
        );
        assert_eq!(step(Some(&m), &m, true, None, &ca, &cb), Step::Keep);
        let now = memo("B", "a2", "b1");
        // a moved by f only, which b never changed: kept.
        assert_eq!(
            step(Some(&m), &now, true, Some(("a1", &set(&["f"]))), &ca, &cb),
            Step::Keep
        );
        // a moved by g, which b changed: merged.
        assert_eq!(
            step(Some(&m), &now, true, Some(("a1", &set(&["g"]))), &ca, &cb),
            Step::Merge
        );
        // The move is known from another tree than the memo's: merged.
        assert_eq!(
            step(Some(&m), &now, true, Some(("a0", &set(&["f"]))), &ca, &cb),
            Step::Merge
        );
        assert_eq!(step(Some(&m), &now, true, None, &ca, &cb), Step::Merge);
        // Both moved: merged.
        assert_eq!(
            step(Some(&m), &memo("B", "a2", "b2"), true, None, &ca, &cb),
            Step::Merge
        );
    }

    /// A worktree in the model: each file's content as a number (0: absent).
    type Files = BTreeMap<u8, u8>;

    fn changed(w: &Files, base: &Files) -> BTreeSet<String> {
        let keys: BTreeSet<u8> = w.keys().chain(base.keys()).copied().collect();
        keys.into_iter()
            .filter(|k| w.get(k).copied().unwrap_or(0) != base.get(k).copied().unwrap_or(0))
            .map(|k| k.to_string())
            .collect()
    }

    /// The model's merge: a file conflicts when both sides changed it, differently.
    fn merge(a: &Files, b: &Files, base: &Files) -> BTreeSet<String> {
        let (ca, cb) = (changed(a, base), changed(b, base));
        ca.intersection(&cb)
            .filter(|k| {
                let k: u8 = k.parse().unwrap();
                a.get(&k).copied().unwrap_or(0) != b.get(&k).copied().unwrap_or(0)
            })
            .cloned()
            .collect()
    }

    /// A tree's name in the model: its contents written out.
    fn tree(w: &Files) -> String {
        format!("{w:?}")
    }

    proptest! {
        /// Writes land one at a time in either side (each changing one or more files); the
        /// result the scheme keeps or recomputes always equals a merge made from scratch.
        #[test]
        fn incremental_equals_from_scratch(
            writes in proptest::collection::vec(
                (any::<bool>(), proptest::collection::btree_map(0u8..6, 0u8..3, 1..3)), 1..30)
        ) {
            let base: Files = (0u8..6).map(|k| (k, 1)).collect();
            let (mut a, mut b) = (base.clone(), base.clone());
            let mut memo: Option<PairMemo> = None;
            let mut result = BTreeSet::new();
            for (in_a, write) in writes {
                let side = if in_a { &mut a } else { &mut b };
                let from = tree(side);
                let before = side.clone();
                for (k, v) in write {
                    side.insert(k, v);
                }
                let moved_files = changed(side, &before);
                let now = PairMemo { base: "B".into(), tree_a: tree(&a), tree_b: tree(&b) };
                let (ca, cb) = (changed(&a, &base), changed(&b, &base));
                let overlap = !ca.is_disjoint(&cb);
                match step(memo.as_ref(), &now, overlap, Some((&from, &moved_files)), &ca, &cb) {
                    Step::Clear => result.clear(),
                    Step::Keep => {}
                    Step::Merge => result = merge(&a, &b, &base),
                }
                memo = Some(now);
                prop_assert_eq!(&result, &merge(&a, &b, &base));
            }
        }
    }
}
