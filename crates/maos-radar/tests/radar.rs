//! The engine against real git repositories and worktrees (`git worktree add`).

use std::path::{Path, PathBuf};

use chrono::Utc;
use maos_radar::{Change, Git, Radar};

mod common;
use common::git;

/// A repository with one commit and `n` linked worktrees on their own branches.
struct Repo {
    _dir: tempfile::TempDir,
    main: PathBuf,
    worktrees: Vec<PathBuf>,
    cache: PathBuf,
}

fn repo(n: usize, files: &[(&str, &str)]) -> Repo {
    let dir = tempfile::tempdir().unwrap();
    let main = dir.path().join("main");
    std::fs::create_dir(&main).unwrap();
    git(&main, &["init", "-q", "-b", "main"]);
    for (path, text) in files {
        let p = main.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    std::fs::write(main.join(".gitignore"), "ignored/\n").unwrap();
    git(&main, &["add", "-A"]);
    git(&main, &["commit", "-q", "-m", "base"]);
    let worktrees = (0..n)
        .map(|i| {
            let w = dir.path().join(format!("w {i}"));
            git(
                &main,
                &[
                    "worktree",
                    "add",
                    "-q",
                    "-b",
                    &format!("b{i}"),
                    w.to_str().unwrap(),
                ],
            );
            w
        })
        .collect();
    let cache = dir.path().join("cache");
    Repo {
        _dir: dir,
        main,
        worktrees,
        cache,
    }
}

/// A radar watching the first two worktrees of `r`, and their names on it.
fn watching(r: &Repo) -> (Radar, [String; 2]) {
    let mut radar = Radar::new(Git::new(), &r.cache).unwrap();
    for w in &r.worktrees[..2] {
        radar.watch(w, Utc::now()).unwrap();
    }
    let names = [0, 1].map(|i| r.worktrees[i].display().to_string());
    (radar, names)
}

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

/// Everything git keeps of a worktree that the radar must not change.
fn state(w: &Path) -> (Vec<u8>, String, String, String) {
    let index = PathBuf::from(
        git(
            w,
            &["rev-parse", "--path-format=absolute", "--git-path", "index"],
        )
        .trim(),
    );
    (
        std::fs::read(index).unwrap_or_default(),
        git(w, &["rev-parse", "HEAD"]),
        git(w, &["for-each-ref"]),
        git(
            w,
            &["status", "--porcelain=v1", "-z", "--untracked-files=all"],
        ),
    )
}

#[test]
fn overlapping_uncommitted_edits_conflict_and_clear() {
    let r = repo(2, &[("src/api.rs", TEN), ("other.txt", "x\n")]);
    let (w0, w1) = (&r.worktrees[0], &r.worktrees[1]);
    let mut radar = Radar::new(Git::new(), &r.cache).unwrap();
    radar.watch(w0, Utc::now()).unwrap();
    let up = radar.watch(w1, Utc::now()).unwrap();
    assert!(up.changes.is_empty());

    std::fs::write(w0.join("src/api.rs"), TEN.replace("5\n", "five\n")).unwrap();
    let up = radar.update(&w0.display().to_string(), Utc::now()).unwrap();
    assert!(up.changes.is_empty(), "one side changed: {up:?}");
    assert_eq!(up.merged, 0);

    let before = (state(w0), state(w1));
    std::fs::write(w1.join("src/api.rs"), TEN.replace("5\n", "FIVE\n")).unwrap();
    let after_write = state(w1);
    let up = radar.update(&w1.display().to_string(), Utc::now()).unwrap();
    assert_eq!(up.merged, 1);
    let [Change::Appeared(pair)] = up.changes.as_slice() else {
        panic!("{up:?}")
    };
    assert_eq!(pair.files.len(), 1);
    let file = &pair.files[0];
    assert_eq!(
        (file.path.as_str(), file.kind.as_str()),
        ("src/api.rs", "contents")
    );
    assert_eq!(file.hunks.len(), 1);
    let (a, b) = (&file.hunks[0].a, &file.hunks[0].b);
    // Side a is the worktree whose name sorts first ("w 0").
    assert_eq!((a.as_str(), b.as_str()), ("five\n", "FIVE\n"));
    assert_eq!(file.hunks[0].base.as_deref(), Some("5\n"));
    assert!(
        file.diff_a.contains("+five") && file.diff_b.contains("+FIVE"),
        "{file:?}"
    );
    assert_eq!(pair.base, git(&r.main, &["rev-parse", "HEAD"]).trim());
    assert_eq!(pair.overlap, vec!["src/api.rs".to_string()]);
    assert_eq!(radar.conflicts().count(), 1);

    // The radar wrote nothing any worktree's git keeps: index, HEAD, refs, status.
    assert_eq!(state(w0), before.0);
    assert_eq!(state(w1), after_write);

    // The second side gives up its change: cleared.
    std::fs::write(w1.join("src/api.rs"), TEN).unwrap();
    let up = radar.update(&w1.display().to_string(), Utc::now()).unwrap();
    assert!(
        matches!(up.changes.as_slice(), [Change::Cleared { files, .. }] if files == &["src/api.rs"]),
        "{up:?}"
    );
    assert_eq!(radar.conflicts().count(), 0);
}

#[test]
fn same_file_other_lines_merge_cleanly_and_unrelated_files_are_not_merged() {
    let r = repo(3, &[("a.txt", TEN), ("b.txt", TEN)]);
    let mut radar = Radar::new(Git::new(), &r.cache).unwrap();
    for w in &r.worktrees {
        radar.watch(w, Utc::now()).unwrap();
    }
    let names: Vec<String> = r
        .worktrees
        .iter()
        .map(|w| w.display().to_string())
        .collect();
    std::fs::write(r.worktrees[0].join("a.txt"), TEN.replace("1\n", "one\n")).unwrap();
    radar.update(&names[0], Utc::now()).unwrap();
    std::fs::write(r.worktrees[1].join("a.txt"), TEN.replace("10\n", "ten\n")).unwrap();
    let up = radar.update(&names[1], Utc::now()).unwrap();
    assert_eq!((up.merged, up.changes.len()), (1, 0), "{up:?}");
    // Another file only: no merge at all.
    std::fs::write(r.worktrees[2].join("b.txt"), "new\n").unwrap();
    let up = radar.update(&names[2], Utc::now()).unwrap();
    assert_eq!((up.merged, up.disjoint), (0, 2), "{up:?}");
    // The same snapshot again: nothing looked at.
    assert!(radar.update(&names[2], Utc::now()).unwrap().unchanged);
}

#[test]
fn committed_untracked_and_odd_paths_count_and_ignored_files_do_not() {
    let odd = "dir with space/new\nline é.txt";
    let r = repo(2, &[("x.txt", TEN)]);
    let (w0, w1) = (&r.worktrees[0], &r.worktrees[1]);
    let mut radar = Radar::new(Git::new(), &r.cache).unwrap();
    radar.watch(w0, Utc::now()).unwrap();
    radar.watch(w1, Utc::now()).unwrap();
    // Side 0 commits a new file; side 1 leaves the same path untracked with other text.
    std::fs::create_dir_all(w0.join("dir with space")).unwrap();
    std::fs::write(w0.join(odd), "zero\n").unwrap();
    git(w0, &["add", "-A"]);
    git(w0, &["commit", "-q", "-m", "zero"]);
    std::fs::create_dir_all(w1.join("dir with space")).unwrap();
    std::fs::write(w1.join(odd), "one\n").unwrap();
    // Ignored files on both sides never matter.
    for w in [w0, w1] {
        std::fs::create_dir_all(w.join("ignored")).unwrap();
        std::fs::write(w.join("ignored/x"), w.display().to_string()).unwrap();
    }
    radar.update(&w0.display().to_string(), Utc::now()).unwrap();
    let up = radar.update(&w1.display().to_string(), Utc::now()).unwrap();
    let [Change::Appeared(pair)] = up.changes.as_slice() else {
        panic!("{up:?}")
    };
    let paths: Vec<&str> = pair.files.iter().map(|f| f.path.as_str()).collect();
    assert_eq!(paths, vec![odd]);
    // Both added it: git's merge of two additions is a contents conflict with no base.
    assert_eq!(pair.files[0].kind, "contents");
    let hunk = &pair.files[0].hunks[0];
    assert_eq!((hunk.a.as_str(), hunk.b.as_str()), ("zero\n", "one\n"));
    assert!(pair.a.head.is_some() && pair.a.head != pair.b.head);
    // The untracked file is still untracked: the radar's index is its own.
    assert!(git(w1, &["status", "--porcelain"]).contains("??"));
}

#[test]
fn a_write_elsewhere_keeps_the_pair_and_forgetting_clears_it() {
    let r = repo(2, &[("a.txt", TEN), ("b.txt", TEN)]);
    let (w0, w1) = (&r.worktrees[0], &r.worktrees[1]);
    let (mut radar, names) = watching(&r);
    std::fs::write(w0.join("a.txt"), "0\n").unwrap();
    radar.update(&names[0], Utc::now()).unwrap();
    std::fs::write(w1.join("a.txt"), "1\n").unwrap();
    assert_eq!(
        radar.update(&names[1], Utc::now()).unwrap().changes.len(),
        1
    );
    // Side 0 writes a file side 1 never touched: the pair's result is kept, not merged.
    std::fs::write(w0.join("b.txt"), "b\n").unwrap();
    let up = radar.update(&names[0], Utc::now()).unwrap();
    assert_eq!((up.merged, up.kept, up.changes.len()), (0, 1, 0), "{up:?}");
    let pair = radar.conflicts().next().unwrap();
    assert_eq!(pair.a.tree, radar.snapshot(&names[0]).unwrap().tree);
    // Side 0 changes the conflicting file again: merged again, the hunk follows.
    std::fs::write(w0.join("a.txt"), "00\n").unwrap();
    let up = radar.update(&names[0], Utc::now()).unwrap();
    assert_eq!(up.merged, 1);
    assert!(
        matches!(&up.changes[..], [Change::Changed(p)] if p.files[0].hunks[0].a == "00\n"),
        "{up:?}"
    );
    let changes = radar.forget(&names[1]);
    assert!(matches!(&changes[..], [Change::Cleared { .. }]));
    assert_eq!(radar.conflicts().count(), 0);
}

#[test]
fn git_is_new_enough() {
    let (major, minor) = Git::new().version().unwrap();
    assert!(
        (major, minor) >= (2, 40),
        "git {major}.{minor}: merge-tree of trees needs 2.40"
    );
}

#[test]
fn a_named_write_looks_at_that_file_and_an_unknown_name_at_everything() {
    let r = repo(2, &[("a.txt", TEN)]);
    let (w0, w1) = (&r.worktrees[0], &r.worktrees[1]);
    let (mut radar, names) = watching(&r);
    std::fs::write(w0.join("a.txt"), "0\n").unwrap();
    radar
        .update_paths(&names[0], Some(&["a.txt".to_string()]), Utc::now())
        .unwrap();
    // A new file, named: taken; then a name that never existed: everything is looked at, so
    // the unnamed write to a.txt is seen too.
    std::fs::write(w1.join("new file.txt"), "n\n").unwrap();
    radar
        .update_paths(&names[1], Some(&["new file.txt".to_string()]), Utc::now())
        .unwrap();
    assert_eq!(radar.conflicts().count(), 0);
    std::fs::write(w1.join("a.txt"), "1\n").unwrap();
    let up = radar
        .update_paths(&names[1], Some(&["never existed".to_string()]), Utc::now())
        .unwrap();
    assert!(
        matches!(&up.changes[..], [Change::Appeared(p)] if p.files[0].path == "a.txt"),
        "{up:?}"
    );
    // A deleted file, named: its deletion is seen (modify/delete against side 0).
    std::fs::remove_file(w1.join("a.txt")).unwrap();
    let up = radar
        .update_paths(&names[1], Some(&["a.txt".to_string()]), Utc::now())
        .unwrap();
    assert!(
        matches!(&up.changes[..], [Change::Changed(p)] if p.files[0].kind == "modify/delete"),
        "{up:?}"
    );
}

/// The branch each worktree is on, read from its `HEAD` file (what the daemon reports of each
/// side of a pair): the main worktree's and a linked one's; none when detached or no worktree.
#[test]
fn the_main_and_a_linked_worktree_say_their_branch_and_a_detached_one_none() {
    let r = repo(2, &[("a.txt", "a\n")]);
    assert_eq!(maos_radar::branch(&r.main).as_deref(), Some("main"));
    assert_eq!(maos_radar::branch(&r.worktrees[0]).as_deref(), Some("b0"));
    git(&r.worktrees[1], &["checkout", "-q", "--detach"]);
    assert_eq!(maos_radar::branch(&r.worktrees[1]), None, "detached");
    assert_eq!(maos_radar::branch(&r.cache), None, "no worktree there");
}

/// One `merge-tree --stdin` process for all of an update's merges says what one process per
/// pair says: the same trees, the same conflicting files and kinds (contents, modify/delete,
/// clean), in order.
#[test]
fn merges_in_one_process_equal_merges_one_by_one() {
    let r = repo(
        4,
        &[("src/api.rs", TEN), ("gone.txt", "g\n"), ("x.txt", "x\n")],
    );
    let w = &r.worktrees;
    std::fs::write(w[0].join("src/api.rs"), TEN.replace("5\n", "five a\n")).unwrap();
    std::fs::write(w[0].join("gone.txt"), "kept and changed\n").unwrap();
    std::fs::write(w[1].join("src/api.rs"), TEN.replace("5\n", "five b\n")).unwrap();
    std::fs::remove_file(w[1].join("gone.txt")).unwrap();
    std::fs::write(w[2].join("src/api.rs"), TEN.replace("9\n", "nine\n")).unwrap();
    std::fs::write(w[3].join("x.txt"), "y\n").unwrap();
    let mut radar = Radar::new(Git::new(), &r.cache).unwrap();
    for wt in w {
        radar.watch(wt, Utc::now()).unwrap();
    }
    let g = Git::new();
    let base = git(&r.main, &["rev-parse", "HEAD"]).trim().to_string();
    let trees: Vec<String> = w
        .iter()
        .map(|wt| {
            radar
                .snapshot(&wt.display().to_string())
                .unwrap()
                .tree
                .clone()
        })
        .collect();
    let pairs = [(0, 1), (0, 2), (1, 2), (2, 3), (0, 3)];
    let triples: Vec<(&str, &str, &str)> = pairs
        .iter()
        .map(|&(a, b)| (base.as_str(), trees[a].as_str(), trees[b].as_str()))
        .collect();
    let batched = g.merges(&r.main, &triples).expect("one process");
    let single: Vec<_> = triples
        .iter()
        .map(|(base, a, b)| g.merge(&r.main, base, a, b).unwrap())
        .collect();
    assert_eq!(batched, single);
    let kinds: Vec<Vec<(String, String)>> = batched
        .iter()
        .map(|o| o.conflicts.clone().into_iter().collect())
        .collect();
    assert_eq!(
        kinds[0],
        [
            ("gone.txt".to_string(), "modify/delete".to_string()),
            ("src/api.rs".to_string(), "contents".to_string())
        ]
    );
    assert!(kinds[1..].iter().all(Vec::is_empty), "{kinds:?}");
    assert_eq!(g.merges(&r.main, &[]).unwrap(), vec![]);
}

/// A snapshot reads `HEAD` from the ref files: the same commit git names, in the main worktree
/// and a linked one, from a loose ref and from `packed-refs`, detached; none before the first
/// commit (git is asked then, and says none too).
#[test]
fn head_is_read_from_the_ref_files_as_git_reads_it() {
    let r = repo(1, &[("a.txt", "a\n")]);
    let (main, linked) = (&r.main, &r.worktrees[0]);
    let head = |w: &Path| git(w, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(linked.join("a.txt"), "b\n").unwrap();
    git(linked, &["commit", "-q", "-am", "on b0"]);
    for w in [main, linked] {
        assert_eq!(maos_radar::head_commit(w), Some(head(w)), "{}", w.display());
    }
    assert_ne!(head(main), head(linked));
    git(main, &["pack-refs", "--all"]);
    assert!(!main.join(".git/refs/heads/b0").exists(), "packed");
    for w in [main, linked] {
        assert_eq!(
            maos_radar::head_commit(w),
            Some(head(w)),
            "packed: {}",
            w.display()
        );
    }
    git(linked, &["checkout", "-q", "--detach"]);
    assert_eq!(
        maos_radar::head_commit(linked),
        Some(head(linked)),
        "detached"
    );
    let fresh = r.main.parent().unwrap().join("fresh");
    std::fs::create_dir(&fresh).unwrap();
    git(&fresh, &["init", "-q"]);
    assert_eq!(maos_radar::head_commit(&fresh), None);
    std::fs::create_dir_all(&r.cache).unwrap();
    let snap = Git::new()
        .snapshot(&fresh, &r.cache.join("fresh.index"), None)
        .map(|s| s.head);
    assert!(matches!(snap, Ok(None)), "{snap:?}");
}
