//! The radar across machines, without the network in between: a report of one clone's
//! worktree (`fleet::report`) becomes, in another clone of the same repository, the very tree
//! that worktree's snapshot was (`fleet::build`), and merges with that clone's work as a local
//! pair would; a base the other clone lacks, a content that is not its blob and a worktree too
//! large are said, not guessed.

use std::collections::HashMap;

use chrono::Utc;
use maos_core::radar::{FLEET_FILE_CAP, check_report};
use maos_radar::{Change, Git, Radar, fleet};

mod common;
use common::git;

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";

#[test]
fn another_clones_report_builds_its_tree_here_and_conflicts_like_a_local_pair() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("origin");
    std::fs::create_dir_all(origin.join("src")).unwrap();
    git(&origin, &["init", "-q", "-b", "main"]);
    std::fs::write(origin.join("src/api.rs"), TEN).unwrap();
    std::fs::write(origin.join("notes.txt"), "notes\n").unwrap();
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "base"]);
    let main = git(&origin, &["rev-parse", "HEAD"]).trim().to_string();
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for c in [&a, &b] {
        git(
            tmp.path(),
            &["clone", "-q", origin.to_str().unwrap(), c.to_str().unwrap()],
        );
    }
    // B: a branch with a commit of its own, and uncommitted work over it.
    git(&b, &["checkout", "-q", "-b", "feature"]);
    std::fs::write(b.join("extra.txt"), "committed on b's branch\n").unwrap();
    git(&b, &["add", "-A"]);
    git(&b, &["commit", "-q", "-m", "b's commit"]);
    let b_head = git(&b, &["rev-parse", "HEAD"]).trim().to_string();
    std::fs::write(b.join("src/api.rs"), TEN.replace("5\n", "five from b\n")).unwrap();
    std::fs::write(b.join("new.txt"), "new\n").unwrap();
    std::fs::remove_file(b.join("notes.txt")).unwrap();
    let now = Utc::now();
    let mut rb = Radar::new(Git::new(), &tmp.path().join("cache-b")).unwrap();
    rb.watch(&b, now).unwrap();
    let b_name = b.display().to_string();
    let snap_b = rb.snapshot(&b_name).unwrap().clone();

    let mut t = fleet::report(&Git::new(), &b, &snap_b, &HashMap::new())
        .unwrap()
        .expect("a report");
    assert_eq!(
        t.base, main,
        "measured from the main line, b's commit included"
    );
    assert_eq!(t.too_large, None);
    let mut paths: Vec<(&str, u32)> = t.files.iter().map(|f| (f.path.as_str(), f.mode)).collect();
    paths.sort();
    assert_eq!(
        paths,
        [
            ("extra.txt", 0o100644),
            ("new.txt", 0o100644),
            ("notes.txt", 0),
            ("src/api.rs", 0o100644)
        ]
    );
    t.machine = "machine-b".into();
    // As read back from PostgreSQL: the sizes stored.
    for f in &mut t.files {
        f.stored = f.content.as_ref().map_or(0, |c| c.len() as u64);
    }
    check_report(&t).expect("a sound report");

    // A: its own uncommitted edit of line 5.
    std::fs::write(a.join("src/api.rs"), TEN.replace("5\n", "five from a\n")).unwrap();
    let mut ra = Radar::new(Git::new(), &tmp.path().join("cache-a")).unwrap();
    ra.watch(&a, now).unwrap();
    let g = Git::new();
    let here = fleet::here(&g, &a, &t).unwrap();
    let missing = &here.missing;
    assert_eq!(
        missing.len(),
        3,
        "b's three blobs are not in a: {missing:?}"
    );
    let contents: HashMap<String, Vec<u8>> = missing
        .iter()
        .map(|&i| &t.files[i])
        .map(|f| (f.path.clone(), f.content.clone().unwrap()))
        .collect();
    let index = tmp.path().join("cache-a/foreign.index");
    let built = fleet::build(&g, &a, &index, &t, &here, contents.clone())
        .unwrap()
        .expect("built");
    assert_eq!(built.tree, snap_b.tree, "the very tree b's snapshot was");
    assert_eq!(built.head.as_deref(), Some(main.as_str()));
    assert!(!index.exists(), "the index file is gone");
    let update = ra.put("machine-b:/b", &a, built, now).unwrap();
    let [Change::Appeared(pair)] = &update.changes[..] else {
        panic!("one conflict appears: {update:?}");
    };
    assert_eq!(pair.files.len(), 1, "{pair:?}");
    assert_eq!(pair.files[0].path, "src/api.rs");
    assert!(
        pair.files[0].diff_b.contains("+five from b")
            || pair.files[0].diff_a.contains("+five from b")
    );
    // B's side undone (a new report without api.rs): the conflict clears.
    let mut calm = t.clone();
    calm.files.retain(|f| f.path != "src/api.rs");
    let calm = fleet::build(
        &g,
        &a,
        &index,
        &calm,
        &fleet::here(&g, &a, &calm).unwrap(),
        HashMap::new(),
    )
    .unwrap()
    .expect("built");
    let update = ra.put("machine-b:/b", &a, calm, now).unwrap();
    assert!(
        matches!(&update.changes[..], [Change::Cleared { .. }]),
        "{update:?}"
    );

    // A base this clone lacks (b's own commit): said, not guessed.
    let mut far = t.clone();
    far.base = b_head.clone();
    let why = fleet::build(
        &g,
        &a,
        &index,
        &far,
        &fleet::here(&g, &a, &far).unwrap(),
        HashMap::new(),
    )
    .unwrap()
    .unwrap_err();
    assert_eq!(why, format!("cannot compare: base {b_head} not here"));
    // A content that is not its blob: refused (a fresh file, so its blob is not here yet).
    let mut forged = t.clone();
    forged.files.retain(|f| f.path == "new.txt");
    forged.files[0].blob = "1".repeat(40);
    let lying = HashMap::from([("new.txt".to_string(), b"new\n".to_vec())]);
    let why = fleet::build(
        &g,
        &a,
        &index,
        &forged,
        &fleet::here(&g, &a, &forged).unwrap(),
        lying,
    )
    .unwrap()
    .unwrap_err();
    assert!(
        why.starts_with("refused: the content of `new.txt`"),
        "{why}"
    );

    // Too large: a file over the cap makes b's report name its files without contents.
    std::fs::write(b.join("big.bin"), vec![b'x'; FLEET_FILE_CAP as usize + 1]).unwrap();
    rb.update(&b_name, now).unwrap();
    let snap_b = rb.snapshot(&b_name).unwrap().clone();
    let big = fleet::report(&g, &b, &snap_b, &HashMap::new())
        .unwrap()
        .unwrap();
    let why = big.too_large.clone().expect("too large");
    assert!(why.contains("`big.bin` is 262145 bytes"), "{why}");
    assert!(big.files.iter().all(|f| f.content.is_none()));
    assert!(
        big.files.iter().any(|f| f.path == "src/api.rs"),
        "named still"
    );
    let why = fleet::build(
        &g,
        &a,
        &index,
        &big,
        &fleet::Here::default(),
        HashMap::new(),
    )
    .unwrap()
    .unwrap_err();
    assert!(why.starts_with("too large to compare: "), "{why}");
    // A second report skips the contents written already.
    let last: HashMap<String, String> = t
        .files
        .iter()
        .map(|f| (f.path.clone(), f.blob.clone()))
        .collect();
    std::fs::remove_file(b.join("big.bin")).unwrap();
    rb.update(&b_name, now).unwrap();
    let snap_b = rb.snapshot(&b_name).unwrap().clone();
    let again = fleet::report(&g, &b, &snap_b, &last).unwrap().unwrap();
    assert!(again.files.iter().all(|f| f.content.is_none()), "{again:?}");
}

/// A repository at `dir` whose `main` holds one commit: `file` with `content`.
fn repository(dir: &std::path::Path, file: &str, content: &str) {
    std::fs::create_dir_all(dir).unwrap();
    git(dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join(file), content).unwrap();
    git(dir, &["add", "-A"]);
    git(dir, &["commit", "-q", "-m", "base"]);
}

/// Types and sizes come from one `cat-file --batch-check` each, answered in order: an object
/// not here (`<name> missing`) or a name git cannot read is `None`, never another's answer.
#[test]
fn types_and_sizes_say_none_for_what_is_not_here() {
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    repository(&repo, "a.txt", "abc\n");
    let blob = git(&repo, &["rev-parse", "HEAD:a.txt"]).trim().to_string();
    let head = format!("{}^{{commit}}", git(&repo, &["rev-parse", "HEAD"]).trim());
    let absent = "0123456789abcdef0123456789abcdef01234567";
    let g = Git::new();
    let names = [head.as_str(), absent, blob.as_str(), "no such thing"];
    assert_eq!(
        g.types(&repo, &names).unwrap(),
        [
            Some("commit".to_string()),
            None,
            Some("blob".to_string()),
            None
        ]
    );
    assert_eq!(
        g.blob_sizes(&repo, &[absent, blob.as_str()]).unwrap(),
        [None, Some(4)]
    );
}

/// One content at many paths is sent once per path, and `check_report` counts it so: a report
/// whose files hold more than the cap that way says it is too large, rather than going out
/// with contents that every other daemon then refuses as hostile.
#[test]
fn one_blob_at_many_paths_counts_once_per_path() {
    use maos_core::radar::FLEET_TREE_CAP;
    let tmp = tempfile::tempdir().unwrap();
    let repo = tmp.path().join("repo");
    repository(&repo, "a.txt", "a\n");
    let content = vec![b'y'; (FLEET_FILE_CAP - 1) as usize];
    let copies = (FLEET_TREE_CAP / (FLEET_FILE_CAP - 1)) + 1;
    for i in 0..copies {
        std::fs::write(repo.join(format!("copy{i}.bin")), &content).unwrap();
    }
    let now = Utc::now();
    let mut r = Radar::new(Git::new(), &tmp.path().join("cache")).unwrap();
    r.watch(&repo, now).unwrap();
    let name = repo.display().to_string();
    let snap = r.snapshot(&name).unwrap().clone();
    let mut t = fleet::report(&Git::new(), &repo, &snap, &HashMap::new())
        .unwrap()
        .expect("a report");
    t.machine = "machine-b".into();
    let why = t.too_large.clone().expect("too large, counted per path");
    assert!(why.contains("the changed files hold"), "{why}");
    check_report(&t).expect("the report passes the receivers' check");
}

/// A `git` that logs each of its runs (one line of arguments) to `log`, then runs git.
fn counting_git(dir: &std::path::Path, log: &std::path::Path) -> Git {
    use std::os::unix::fs::PermissionsExt;
    let script = dir.join("git");
    std::fs::write(
        &script,
        format!(
            "#!/bin/sh\nprintf '%s\\n' \"$*\" >> '{}'\nexec git \"$@\"\n",
            log.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    Git::at(script)
}

/// Taking another machine's report costs a fixed number of git processes, not one per file:
/// its base and blobs are looked up once, its missing blobs written in one process, its tree
/// built through one index.
#[test]
fn a_report_of_fifty_files_is_built_with_a_few_git_processes() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("origin");
    repository(&origin, "README", "base\n");
    let (a, b) = (tmp.path().join("a"), tmp.path().join("b"));
    for c in [&a, &b] {
        git(
            tmp.path(),
            &["clone", "-q", origin.to_str().unwrap(), c.to_str().unwrap()],
        );
    }
    for i in 0..50 {
        std::fs::write(b.join(format!("f{i}.txt")), format!("file {i} from b\n")).unwrap();
    }
    let now = Utc::now();
    let mut rb = Radar::new(Git::new(), &tmp.path().join("cache-b")).unwrap();
    rb.watch(&b, now).unwrap();
    let snap_b = rb.snapshot(&b.display().to_string()).unwrap().clone();
    let t = fleet::report(&Git::new(), &b, &snap_b, &HashMap::new())
        .unwrap()
        .expect("a report");
    assert_eq!(t.files.len(), 50);

    let log = tmp.path().join("git.log");
    let g = counting_git(tmp.path(), &log);
    let here = fleet::here(&g, &a, &t).unwrap();
    assert!(here.base, "the base is in a");
    assert_eq!(here.missing.len(), 50, "none of b's blobs is in a");
    let contents: HashMap<String, Vec<u8>> = t
        .files
        .iter()
        .map(|f| (f.path.clone(), f.content.clone().unwrap()))
        .collect();
    let index = tmp.path().join("foreign.index");
    let built = fleet::build(&g, &a, &index, &t, &here, contents)
        .unwrap()
        .expect("built");
    assert_eq!(built.tree, snap_b.tree, "the very tree b's snapshot was");
    let runs = std::fs::read_to_string(&log).unwrap();
    let runs: Vec<&str> = runs.lines().collect();
    // One lookup, one write of the blobs, and the tree through an index (read-tree,
    // update-index, write-tree); 56 when each blob was a process and the lookup ran twice.
    assert_eq!(runs.len(), 5, "git processes for 50 files: {runs:#?}");
    assert!(
        !index.with_extension("blobs").exists() && !index.exists(),
        "the scratch files are gone"
    );

    // Taken again: the blobs are here now, nothing is fetched or written.
    let again = fleet::here(&g, &a, &t).unwrap();
    assert!(again.base && again.missing.is_empty(), "{again:?}");
    // A blob that is not here and whose content did not come: said, not built.
    let mut lacking = t.clone();
    lacking.files[0].blob = "1".repeat(40);
    let here = fleet::here(&g, &a, &lacking).unwrap();
    assert_eq!(here.missing, [0], "the first file's blob");
    let why = fleet::build(&g, &a, &index, &lacking, &here, HashMap::new())
        .unwrap()
        .unwrap_err();
    assert_eq!(
        why,
        format!(
            "cannot compare: the content of `{}` did not arrive",
            lacking.files[0].path
        )
    );
}

/// A fetch that brings commits in changes the clone's refs stamp (from the clone and from a
/// linked worktree of it); the radar's own work, which writes objects only, and the time
/// passing do not. The fleet radar looks again at reports whose base was not here only when it
/// changes.
#[test]
fn a_fetch_changes_the_refs_stamp_and_the_radars_own_objects_do_not() {
    let tmp = tempfile::tempdir().unwrap();
    let origin = tmp.path().join("origin");
    repository(&origin, "notes.txt", "notes\n");
    let clone = tmp.path().join("clone");
    git(
        tmp.path(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            clone.to_str().unwrap(),
        ],
    );
    let linked = tmp.path().join("linked");
    git(
        &clone,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "side",
            linked.to_str().unwrap(),
        ],
    );
    let before = maos_radar::refs_stamp(&clone);
    assert_ne!(
        before,
        maos_radar::RefsStamp::default(),
        "it reads the refs"
    );
    assert_eq!(maos_radar::refs_stamp(&clone), before, "nothing changed");
    let linked_before = maos_radar::refs_stamp(&linked);

    // The radar snapshots the clone with work in it: objects written, no ref.
    std::fs::write(clone.join("notes.txt"), "notes here\n").unwrap();
    let mut radar = Radar::new(Git::new(), &tmp.path().join("cache")).unwrap();
    radar.watch(&clone, Utc::now()).unwrap();
    git(&clone, &["hash-object", "-w", "notes.txt"]);
    assert_eq!(maos_radar::refs_stamp(&clone), before, "objects only");
    assert_eq!(
        maos_radar::refs_stamp(&linked),
        linked_before,
        "objects only, seen from the linked worktree"
    );

    // The main line moves on; a fetch from the clone, then one from its linked worktree.
    for (n, from) in [(1, &clone), (2, &linked)] {
        std::fs::write(origin.join("later.txt"), format!("later {n}\n")).unwrap();
        git(&origin, &["add", "-A"]);
        git(&origin, &["commit", "-q", "-m", "later"]);
        let (here, there) = (
            maos_radar::refs_stamp(&clone),
            maos_radar::refs_stamp(&linked),
        );
        git(from, &["fetch", "-q"]);
        assert_ne!(
            maos_radar::refs_stamp(&clone),
            here,
            "fetch {n}, seen from the clone"
        );
        assert_ne!(
            maos_radar::refs_stamp(&linked),
            there,
            "fetch {n}, seen from the linked one"
        );
    }
    // A fetch of one commit by its id, no ref written: its FETCH_HEAD says it.
    git(&origin, &["commit", "-q", "--allow-empty", "-m", "by id"]);
    let id = git(&origin, &["rev-parse", "HEAD"]).trim().to_string();
    git(
        &origin,
        &["config", "uploadpack.allowAnySHA1InWant", "true"],
    );
    let here = maos_radar::refs_stamp(&linked);
    git(&linked, &["fetch", "-q", "origin", &id]);
    assert_ne!(
        maos_radar::refs_stamp(&linked),
        here,
        "FETCH_HEAD of the linked worktree"
    );
}
