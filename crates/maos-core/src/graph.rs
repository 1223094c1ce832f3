//! Graph helpers: dependency cycles and the agent spawn tree.

use std::collections::{HashMap, HashSet};
use std::hash::Hash;

/// A dependency cycle among nodes, if any, as the list of nodes along it (first node repeated at the end is NOT included). Deterministic (iterate nodes in the order given). Nodes named as dependencies but not present as keys are ignored here.
pub fn find_cycle<K: Clone + Eq + Hash>(nodes: &[(K, Vec<K>)]) -> Option<Vec<K>> {
    // Index the keys (first occurrence wins) and build adjacency lists over indexes.
    let mut index: HashMap<&K, usize> = HashMap::with_capacity(nodes.len());
    for (i, (k, _)) in nodes.iter().enumerate() {
        index.entry(k).or_insert(i);
    }
    let mut adj: Vec<Vec<usize>> = vec![Vec::new(); nodes.len()];
    for (k, deps) in nodes {
        if let Some(&i) = index.get(k) {
            adj[i].extend(deps.iter().filter_map(|d| index.get(d).copied()));
        }
    }

    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        New,
        OnPath,
        Done,
    }
    let mut mark = vec![Mark::New; nodes.len()];
    // Iterative DFS: the path of (node, next edge to look at); `pos` = node's place on the path.
    let mut path: Vec<(usize, usize)> = Vec::new();
    let mut pos: Vec<usize> = vec![0; nodes.len()];
    for root in 0..nodes.len() {
        if mark[root] != Mark::New {
            continue;
        }
        mark[root] = Mark::OnPath;
        path.push((root, 0));
        while let Some(top) = path.last_mut() {
            let node = top.0;
            let Some(&next) = adj[node].get(top.1) else {
                mark[node] = Mark::Done;
                path.pop();
                continue;
            };
            top.1 += 1;
            match mark[next] {
                Mark::Done => {}
                Mark::OnPath => {
                    let cycle = path[pos[next]..]
                        .iter()
                        .map(|&(n, _)| nodes[n].0.clone())
                        .collect();
                    return Some(cycle);
                }
                Mark::New => {
                    mark[next] = Mark::OnPath;
                    pos[next] = path.len();
                    path.push((next, 0));
                }
            }
        }
    }
    None
}

/// Spawn tree over (id, parent) pairs.
#[derive(Clone, Debug)]
pub struct SpawnTree<K> {
    /// Node ids in insertion order.
    order: Vec<K>,
    /// Each node's recorded parent.
    parent: HashMap<K, Option<K>>,
    /// Direct children, in insertion order.
    children: HashMap<K, Vec<K>>,
}

impl<K: Clone + Eq + Hash> SpawnTree<K> {
    /// Build from (id, parent) pairs; keeps insertion order for children. A repeated id keeps its first pair.
    pub fn new<I: IntoIterator<Item = (K, Option<K>)>>(pairs: I) -> Self {
        let mut tree = Self {
            order: Vec::new(),
            parent: HashMap::new(),
            children: HashMap::new(),
        };
        for (id, parent) in pairs {
            if tree.parent.contains_key(&id) {
                continue;
            }
            if let Some(p) = &parent {
                tree.children.entry(p.clone()).or_default().push(id.clone());
            }
            tree.parent.insert(id.clone(), parent);
            tree.order.push(id);
        }
        tree
    }

    /// The recorded parent, if any.
    pub fn parent(&self, id: &K) -> Option<&K> {
        self.parent.get(id).and_then(Option::as_ref)
    }

    /// Direct children, in insertion order.
    pub fn children(&self, id: &K) -> Vec<K> {
        self.children.get(id).cloned().unwrap_or_default()
    }

    /// All descendants, depth-first pre-order, cycle-safe (never includes `id` itself).
    pub fn descendants(&self, id: &K) -> Vec<K> {
        let mut seen: HashSet<&K> = HashSet::from([id]);
        let mut out = Vec::new();
        let mut stack: Vec<&K> = self.kids(id).iter().rev().collect();
        while let Some(k) = stack.pop() {
            if !seen.insert(k) {
                continue;
            }
            out.push(k.clone());
            stack.extend(self.kids(k).iter().rev());
        }
        out
    }

    fn kids(&self, id: &K) -> &[K] {
        self.children.get(id).map_or(&[], Vec::as_slice)
    }

    /// Every node once, each parent before its children: the roots in insertion order, each
    /// followed by its descendants depth-first (siblings in insertion order); nodes only a
    /// cycle reaches come last, in insertion order. The order a tree is drawn in.
    pub fn preorder(&self) -> Vec<K> {
        let mut out = Vec::with_capacity(self.order.len());
        let mut placed: HashSet<K> = HashSet::new();
        for root in self.roots() {
            for k in std::iter::once(root.clone()).chain(self.descendants(&root)) {
                if placed.insert(k.clone()) {
                    out.push(k);
                }
            }
        }
        for k in &self.order {
            if placed.insert(k.clone()) {
                out.push(k.clone());
            }
        }
        out
    }

    /// Nodes without parent (or whose parent is unknown), in insertion order.
    pub fn roots(&self) -> Vec<K> {
        self.order
            .iter()
            .filter(|k| self.parent(k).is_none_or(|p| !self.parent.contains_key(p)))
            .cloned()
            .collect()
    }

    /// Number of known ancestors: 0 for roots; cycle-safe (stops at the first repeat).
    pub fn depth(&self, id: &K) -> usize {
        let mut seen: HashSet<&K> = HashSet::from([id]);
        let mut cur = id;
        let mut depth = 0;
        while let Some(p) = self.parent(cur) {
            if !self.parent.contains_key(p) || !seen.insert(p) {
                break;
            }
            depth += 1;
            cur = p;
        }
        depth
    }

    /// True when every descendant is terminal per the predicate (a node can terminate without orphaning live children).
    pub fn can_terminate(&self, id: &K, is_terminal: impl Fn(&K) -> bool) -> bool {
        self.descendants(id).iter().all(is_terminal)
    }

    /// Number of nodes.
    pub fn len(&self) -> usize {
        self.order.len()
    }

    /// True when there are no nodes.
    pub fn is_empty(&self) -> bool {
        self.order.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type Edges = &'static [(&'static str, &'static [&'static str])];

    fn g(edges: &[(&'static str, &[&'static str])]) -> Vec<(&'static str, Vec<&'static str>)> {
        edges.iter().map(|(k, d)| (*k, d.to_vec())).collect()
    }

    #[test]
    fn find_cycle_table() {
        let cases: &[(Edges, Option<&[&str]>)] = &[
            (&[], None),
            (&[("a", &[])], None),
            (&[("a", &["a"])], Some(&["a"])),
            (&[("a", &["b"]), ("b", &["a"])], Some(&["a", "b"])),
            (
                &[("a", &["b"]), ("b", &["c"]), ("c", &["a"])],
                Some(&["a", "b", "c"]),
            ),
            // cycle not reachable from the first node
            (
                &[("x", &[]), ("a", &["b"]), ("b", &["c"]), ("c", &["b"])],
                Some(&["b", "c"]),
            ),
            // DAG (diamond)
            (
                &[("a", &["b", "c"]), ("b", &["d"]), ("c", &["d"]), ("d", &[])],
                None,
            ),
            // unknown deps are ignored
            (&[("a", &["ghost"]), ("b", &["a", "phantom"])], None),
            (&[("a", &["ghost", "b"]), ("b", &["a"])], Some(&["a", "b"])),
        ];
        for (edges, want) in cases {
            let got = find_cycle(&g(edges));
            assert_eq!(got.as_deref(), *want, "{edges:?}");
        }
    }

    #[test]
    fn find_cycle_is_deterministic_and_a_real_cycle() {
        let nodes = g(&[("d", &["a"]), ("a", &["b"]), ("b", &["c"]), ("c", &["a"])]);
        let c = find_cycle(&nodes).unwrap();
        assert_eq!(c, ["a", "b", "c"]);
        for w in 0..c.len() {
            let (from, to) = (c[w], c[(w + 1) % c.len()]);
            let deps = &nodes.iter().find(|(k, _)| *k == from).unwrap().1;
            assert!(deps.contains(&to));
        }
        assert_eq!(find_cycle(&nodes), Some(c));
    }

    #[test]
    fn find_cycle_deep_chain_does_not_overflow() {
        let n = 100_000u32;
        let mut nodes: Vec<(u32, Vec<u32>)> = (0..n).map(|i| (i, vec![i + 1])).collect();
        assert_eq!(find_cycle(&nodes), None);
        nodes[(n - 1) as usize].1 = vec![0];
        assert_eq!(find_cycle(&nodes).map(|c| c.len()), Some(n as usize));
    }

    fn tree() -> SpawnTree<&'static str> {
        // root ── a ── a1
        //      │     └ a2 ── a2x
        //      └ b
        // lone;  orphan (parent "gone" unknown)
        SpawnTree::new([
            ("root", None),
            ("a", Some("root")),
            ("b", Some("root")),
            ("a1", Some("a")),
            ("lone", None),
            ("a2", Some("a")),
            ("a2x", Some("a2")),
            ("orphan", Some("gone")),
        ])
    }

    #[test]
    fn spawn_tree_queries() {
        let t = tree();
        assert_eq!(t.len(), 8);
        assert_eq!(t.parent(&"a2x"), Some(&"a2"));
        assert_eq!(t.parent(&"root"), None);
        assert_eq!(t.parent(&"orphan"), Some(&"gone"));
        assert_eq!(t.parent(&"nobody"), None);
        assert_eq!(t.children(&"root"), ["a", "b"]);
        assert_eq!(t.children(&"a"), ["a1", "a2"]);
        assert!(t.children(&"b").is_empty());
        assert_eq!(t.descendants(&"root"), ["a", "a1", "a2", "a2x", "b"]);
        assert_eq!(t.descendants(&"a2"), ["a2x"]);
        assert!(t.descendants(&"nobody").is_empty());
        assert_eq!(t.roots(), ["root", "lone", "orphan"]);
        let depths: Vec<_> = ["root", "a", "a1", "a2x", "lone", "orphan", "nobody"]
            .iter()
            .map(|k| t.depth(k))
            .collect();
        assert_eq!(depths, [0, 1, 2, 3, 0, 0, 0]);
    }

    #[test]
    fn spawn_tree_can_terminate() {
        let t = tree();
        let done = |set: &'static [&'static str]| move |k: &&str| set.contains(k);
        assert!(t.can_terminate(&"b", done(&[])));
        assert!(t.can_terminate(&"a2", done(&["a2x"])));
        assert!(!t.can_terminate(&"a", done(&["a1"])));
        assert!(t.can_terminate(&"a", done(&["a1", "a2", "a2x"])));
        assert!(!t.can_terminate(&"root", done(&["a", "a1", "a2", "a2x"])));
        // The node itself need not be terminal.
        assert!(t.can_terminate(&"root", done(&["a", "a1", "a2", "a2x", "b"])));
    }

    #[test]
    fn spawn_tree_cycles_do_not_hang() {
        let t = SpawnTree::new([
            ("x", Some("z")),
            ("y", Some("x")),
            ("z", Some("y")),
            ("s", Some("s")),
            ("c", Some("y")),
        ]);
        assert!(t.roots().is_empty());
        assert_eq!(t.depth(&"x"), 2);
        assert_eq!(t.depth(&"c"), 3);
        assert_eq!(t.depth(&"s"), 0);
        assert_eq!(t.descendants(&"x"), ["y", "z", "c"]);
        assert!(t.descendants(&"s").is_empty());
        assert!(!t.can_terminate(&"x", |k| *k != "c"));
    }

    /// Drawing order: each parent before its children, whatever order they were added in
    /// (a child registered after another root is drawn under its own parent).
    #[test]
    fn spawn_tree_preorder_draws_children_under_their_parent() {
        let t = tree();
        assert_eq!(
            t.preorder(),
            ["root", "a", "a1", "a2", "a2x", "b", "lone", "orphan"]
        );
        let t = SpawnTree::new([("lead", None), ("other", None), ("child", Some("lead"))]);
        assert_eq!(t.preorder(), ["lead", "child", "other"]);
        // Cycles: every node once, in insertion order, after the reachable ones.
        let t = SpawnTree::new([("r", None), ("x", Some("y")), ("y", Some("x"))]);
        assert_eq!(t.preorder(), ["r", "x", "y"]);
    }

    #[test]
    fn spawn_tree_duplicate_ids_keep_first() {
        let t = SpawnTree::new([("a", None), ("b", Some("a")), ("b", None)]);
        assert_eq!(t.parent(&"b"), Some(&"a"));
        assert_eq!(t.roots(), ["a"]);
        assert_eq!(t.children(&"a"), ["b"]);
    }
}
