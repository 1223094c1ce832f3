//! The radar against git's own merge on the committed corpus (`tests/corpus.txt`): pairs of
//! commits of this repository's history (merges' parents, and the tips of branches merged one
//! after the other) with what `git merge` of them gave, written by
//! `maos-bench radar-corpus --out`. Each pair is predicted as the daemon would: one worktree
//! at the first commit, the other at the merge base with the second commit's changes left
//! uncommitted. The repository is only read (a scratch clone shares its objects).

use std::path::Path;
use std::process::Command;

use maos_radar::corpus::{Scratch, read_corpus};

#[test]
fn the_radar_predicts_what_git_merge_gave() {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let shallow = Command::new("git")
        .current_dir(&repo)
        .args(["rev-parse", "--is-shallow-repository"])
        .output()
        .expect("git rev-parse");
    if String::from_utf8_lossy(&shallow.stdout).trim() != "false" {
        // A shallow clone (or no git history at all) lacks the corpus's commits.
        eprintln!("SKIPPED: the corpus needs this repository's full history (not a shallow clone)");
        return;
    }
    let text =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/corpus.txt"))
            .expect("tests/corpus.txt");
    let corpus = read_corpus(&text).expect("corpus description");
    assert!(corpus.len() >= 20, "a corpus of {} pairs", corpus.len());
    let dir = tempfile::tempdir().expect("tempdir");
    let mut scratch =
        Scratch::new(&repo, &dir.path().join("s"), chrono::Utc::now()).expect("scratch clone");
    let (mut conflicts, mut wrong) = (0, Vec::new());
    for pair in &corpus {
        let expected = pair
            .expected
            .expect("every pair of the committed corpus has its outcome");
        let base = scratch
            .base(&pair.a, &pair.b)
            .unwrap_or_else(|| panic!("{} {}: no merge base in this clone", pair.a, pair.b));
        let predicted = scratch
            .predict(&pair.a, &pair.b, &base, chrono::Utc::now())
            .expect("predict");
        conflicts += usize::from(expected);
        if predicted.conflict != expected {
            wrong.push(format!(
                "{} {}: git merge {expected}, radar {:?}",
                pair.a, pair.b, predicted.files
            ));
        }
    }
    eprintln!(
        "radar corpus: {} pairs, {conflicts} conflicting by git merge, {} predicted wrong",
        corpus.len(),
        wrong.len()
    );
    assert!(
        conflicts > 0 && conflicts < corpus.len(),
        "the corpus has both outcomes"
    );
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn corpus_lines_are_read_strictly() {
    let pairs = read_corpus("# c\n\na b conflict  # why\nc d clean\ne f\n").unwrap();
    assert_eq!(pairs.len(), 3);
    assert_eq!(
        (pairs[0].expected, pairs[1].expected, pairs[2].expected),
        (Some(true), Some(false), None)
    );
    assert!(read_corpus("a b maybe\n").is_err());
    assert!(read_corpus("a\n").is_err());
    assert!(read_corpus("a b clean extra\n").is_err());
}
