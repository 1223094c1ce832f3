//! `radar-corpus`: the conflict radar's prediction against git's own merge on pairs of commits
//! of real repositories (issue 35's correctness figure). For each repository (`--repo`, any
//! number; this workspace's own repository when none is given), the newest `--requests` merge
//! commits (default 100) give two kinds of pair: the merge's two parents (what was really
//! merged), and the branch tips of two consecutive merges (two branches worked on at the same
//! time). Each pair is predicted by the radar as the daemon runs it (one worktree at the first
//! commit, the other at the merge base with the second commit's changes uncommitted) and merged
//! by `git merge` in a third worktree of a scratch clone. `--out FILE` writes the pairs and
//! git's outcomes as a corpus description (`crates/maos-radar/tests/corpus.txt`'s form).

use std::collections::BTreeSet;
use std::fmt::Write as _;
use std::path::PathBuf;
use std::time::Instant;

use maos_radar::corpus::{Scratch, merge_pairs};
use maos_tests::Env;
use maos_tests::client::Res;

use crate::opts::Opts;
use crate::report::{Metric, print_human};

#[derive(Default)]
struct Tally {
    tp: usize,
    fp: usize,
    fn_: usize,
    tn: usize,
    files_tp: usize,
    files_fp: usize,
    files_fn: usize,
    skipped: usize,
    errors: usize,
}

fn ratio(a: usize, b: usize) -> f64 {
    if b == 0 {
        f64::NAN
    } else {
        a as f64 / b as f64
    }
}

pub fn scen_radar_corpus(o: &Opts, _sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(100);
    let repos: Vec<PathBuf> = if o.repos.is_empty() {
        vec![PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..")]
    } else {
        o.repos.iter().map(PathBuf::from).collect()
    };
    let env = Env::try_new(&format!("maos-bench-radar-corpus-{}-", std::process::id()))
        .map_err(|e| format!("temporary directory: {e}"))?;
    let mut description = String::from(
        "# The radar's correctness corpus: pairs of commits and what `git merge` of them gave.\n\
         # Written by `maos-bench radar-corpus --out FILE`.\n",
    );
    let mut rows = Vec::new();
    let mut all = Tally::default();
    for (i, repo) in repos.iter().enumerate() {
        let name = repo.display().to_string();
        let _ = writeln!(description, "# {name}");
        let mut scratch =
            Scratch::new(repo, &env.root().join(format!("r{i}")), chrono::Utc::now())?;
        let mut t = Tally::default();
        let started = Instant::now();
        let list = merge_pairs(repo, n)?;
        for (a, b, kind) in &list {
            let Some(base) = scratch.base(a, b) else {
                t.skipped += 1;
                continue;
            };
            if &base == a || &base == b {
                // One contains the other: a fast-forward, nothing to predict.
                t.skipped += 1;
                continue;
            }
            let (truth, predicted) = match (
                scratch.truth(a, b),
                scratch.predict(a, b, &base, chrono::Utc::now()),
            ) {
                (Ok(truth), Ok(predicted)) => (truth, predicted),
                (Err(e), _) | (_, Err(e)) => {
                    eprintln!("radar-corpus: {name} {a} {b}: {e}");
                    t.errors += 1;
                    continue;
                }
            };
            let _ = writeln!(
                description,
                "{a} {b} {}  # {kind}",
                if truth.conflict { "conflict" } else { "clean" }
            );
            match (predicted.conflict, truth.conflict) {
                (true, true) => t.tp += 1,
                (true, false) => t.fp += 1,
                (false, true) => t.fn_ += 1,
                (false, false) => t.tn += 1,
            }
            let both: BTreeSet<&String> = predicted.files.intersection(&truth.files).collect();
            t.files_tp += both.len();
            t.files_fp += predicted.files.len() - both.len();
            t.files_fn += truth.files.len() - both.len();
            if predicted.conflict != truth.conflict || predicted.files != truth.files {
                eprintln!(
                    "radar-corpus: {name} {a} {b} ({kind}): radar {:?}, git merge {:?}",
                    predicted.files, truth.files
                );
            }
        }
        let per_pair = started.elapsed().as_secs_f64() * 1e3 / list.len().max(1) as f64;
        let label = format!(
            "radar-corpus {}",
            repo.file_name()
                .map_or(name.clone(), |f| f.to_string_lossy().into_owned())
        );
        let mut mine = figures(&label, &t);
        mine.push(Metric::new(
            &label,
            "time per pair (predict + merge)",
            per_pair,
            "ms",
        ));
        print_human(&format!("{label}: the radar against git merge"), &mine);
        rows.extend(mine);
        all.tp += t.tp;
        all.fp += t.fp;
        all.fn_ += t.fn_;
        all.tn += t.tn;
        all.files_tp += t.files_tp;
        all.files_fp += t.files_fp;
        all.files_fn += t.files_fn;
        all.skipped += t.skipped;
        all.errors += t.errors;
    }
    if repos.len() > 1 {
        let all = figures("radar-corpus, all", &all);
        print_human("radar-corpus, all repositories", &all);
        rows.extend(all);
    }
    if let Some(out) = &o.out {
        std::fs::write(out, description).map_err(|e| format!("{out}: {e}"))?;
    }
    Ok(rows)
}

fn figures(label: &str, t: &Tally) -> Vec<Metric> {
    let m = |what: &str, v: f64, unit: &'static str| Metric::new(label, what, v, unit);
    vec![
        m("pairs evaluated", (t.tp + t.fp + t.fn_ + t.tn) as f64, ""),
        m("conflicting by git merge", (t.tp + t.fn_) as f64, ""),
        m("true positives", t.tp as f64, ""),
        m("false positives", t.fp as f64, ""),
        m("false negatives", t.fn_ as f64, ""),
        m("true negatives", t.tn as f64, ""),
        m("precision (pairs)", ratio(t.tp, t.tp + t.fp), ""),
        m("recall (pairs)", ratio(t.tp, t.tp + t.fn_), ""),
        m(
            "precision (files)",
            ratio(t.files_tp, t.files_tp + t.files_fp),
            "",
        ),
        m(
            "recall (files)",
            ratio(t.files_tp, t.files_tp + t.files_fn),
            "",
        ),
        m("skipped (fast-forward or unrelated)", t.skipped as f64, ""),
        m("errors", t.errors as f64, ""),
    ]
}
