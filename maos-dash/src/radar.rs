//! `GET /api/radar?project=ROOT`: the project's conflict radar (`Request::Radar`, which maosd
//! answers from the radar's memory, never the actor): the pairs of worktrees whose work would
//! conflict if both landed, each side's worktree, branch, commit and agents, the files, their
//! conflicting hunks and each side's diff of the file.
//!
//! What the page gets is bounded whatever the radar holds: at most [`MAX_PAIRS`] pairs,
//! [`MAX_FILES`] files a pair, [`MAX_HUNKS`] hunks a file, each text cut ([`MAX_HUNK_TEXT`],
//! [`MAX_DIFF`]), and all texts together at most [`MAX_TEXT`] bytes; what was left out is
//! counted (`more_pairs`, `more_files`, `more_hunks`) and a cut text ends with [`CUT`], so the
//! page can say so (`maos radar --json` has the rest). The page shows every text as text.

use axum::Json;
use axum::extract::Query;
use axum::response::{IntoResponse, Response};
use maos_core::radar::RadarPair;
use maos_proto::req;
use maos_proto::{Reply, Request};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::api::{ApiError, ask, open_project};

/// The most pairs an answer holds.
pub const MAX_PAIRS: usize = 20;
/// The most files of one pair.
pub const MAX_FILES: usize = 12;
/// The most hunks of one file.
pub const MAX_HUNKS: usize = 6;
/// The most of one side's (or the base's) lines of a hunk, in bytes.
pub const MAX_HUNK_TEXT: usize = 2 * 1024;
/// The most of one side's diff of a file, in bytes (the daemon already cuts at 16 KiB).
pub const MAX_DIFF: usize = 8 * 1024;
/// The most of all texts of an answer together, in bytes.
pub const MAX_TEXT: usize = 384 * 1024;
/// How a cut text ends.
pub const CUT: &str = "\n[… cut: maos radar --json has more]\n";

#[derive(Deserialize)]
pub struct RadarQuery {
    project: Option<String>,
}

pub async fn radar(Query(q): Query<RadarQuery>) -> Result<Response, ApiError> {
    let project = open_project(q.project).await?;
    match ask(Some(project), Request::Radar(req::Radar { agent: None })).await? {
        Reply::Radar(pairs) => Ok(Json(bounded(pairs)).into_response()),
        _ => Err(ApiError::unexpected()),
    }
}

/// What is left of the answer's text budget.
struct Budget(usize);

impl Budget {
    /// `text` cut to `cap` bytes and to what is left (at a character's boundary, [`CUT`]
    /// appended when cut); what it keeps is spent.
    fn cut(&mut self, text: &mut String, cap: usize) {
        maos_core::text::cut_bytes(text, cap.min(self.0), CUT);
        self.0 = self.0.saturating_sub(text.len());
    }
}

/// The pairs as the page gets them: bounded, with what was left out counted.
pub fn bounded(mut pairs: Vec<RadarPair>) -> Value {
    let more_pairs = pairs.len().saturating_sub(MAX_PAIRS);
    pairs.truncate(MAX_PAIRS);
    let mut budget = Budget(MAX_TEXT);
    let mut out = Vec::with_capacity(pairs.len());
    for mut p in pairs {
        let more_files = p.files.len().saturating_sub(MAX_FILES);
        p.files.truncate(MAX_FILES);
        let mut more_hunks = Vec::with_capacity(p.files.len());
        for f in &mut p.files {
            more_hunks.push(f.hunks.len().saturating_sub(MAX_HUNKS));
            f.hunks.truncate(MAX_HUNKS);
            for h in &mut f.hunks {
                budget.cut(&mut h.a, MAX_HUNK_TEXT);
                if let Some(base) = h.base.as_mut() {
                    budget.cut(base, MAX_HUNK_TEXT);
                }
                budget.cut(&mut h.b, MAX_HUNK_TEXT);
            }
            budget.cut(&mut f.diff_a, MAX_DIFF);
            budget.cut(&mut f.diff_b, MAX_DIFF);
        }
        let overlap = p.overlap.len();
        p.overlap.truncate(MAX_FILES);
        let mut v = json!(p);
        v["more_files"] = json!(more_files);
        v["more_overlap"] = json!(overlap.saturating_sub(MAX_FILES));
        if let Some(files) = v["files"].as_array_mut() {
            for (f, more) in files.iter_mut().zip(more_hunks) {
                f["more_hunks"] = json!(more);
            }
        }
        out.push(v);
    }
    json!({ "pairs": out, "more_pairs": more_pairs })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A pair of `files` files of `hunks` hunks, its texts `text` bytes long (side a's diff
    /// eight times that; side a's hunk lines two-byte characters, to cut inside).
    fn pair(files: usize, hunks: usize, text: usize) -> RadarPair {
        let hunk = json!({"line": 5, "a": format!("x{}", "é".repeat(text / 2)), "base": "x".repeat(text),
                          "b": "y".repeat(text)});
        let file = json!({"path": "src/a.rs", "kind": "contents", "hunks": vec![hunk; hunks],
                          "diff_a": "+".repeat(text * 8), "diff_b": "-".repeat(text)});
        serde_json::from_value(json!({
            "a": {"worktree": "/r/a", "tree": "t"}, "b": {"worktree": "/r/b", "tree": "t"},
            "base": "b".repeat(40), "merged_at": "2026-11-29T00:00:00Z",
            "overlap": vec!["src/a.rs"; files], "files": vec![file; files],
        }))
        .unwrap()
    }

    fn texts(v: &Value) -> usize {
        match v {
            Value::String(s) => s.len(),
            Value::Array(a) => a.iter().map(texts).sum(),
            Value::Object(o) => o.values().map(texts).sum(),
            _ => 0,
        }
    }

    #[test]
    fn a_small_radar_goes_whole() {
        let p = pair(1, 1, 10);
        let v = bounded(vec![p.clone()]);
        assert_eq!(v["more_pairs"], 0);
        assert_eq!(v["pairs"][0]["more_files"], 0);
        assert_eq!(v["pairs"][0]["files"][0]["more_hunks"], 0);
        assert_eq!(
            v["pairs"][0]["files"][0]["hunks"][0]["a"],
            p.files[0].hunks[0].a
        );
        assert_eq!(v["pairs"][0]["files"][0]["diff_a"], p.files[0].diff_a);
        assert_eq!(v["pairs"][0]["a"]["worktree"], "/r/a");
    }

    #[test]
    fn a_huge_radar_is_cut_and_counted_and_stays_within_its_budget() {
        let pairs = vec![pair(40, 30, 20_000); 50];
        let v = bounded(pairs);
        assert_eq!(v["more_pairs"], 30);
        let first = &v["pairs"][0];
        assert_eq!(first["more_files"], 28);
        assert_eq!(first["more_overlap"], 28);
        assert_eq!(first["files"][0]["more_hunks"], 24);
        let a = first["files"][0]["hunks"][0]["a"].as_str().unwrap();
        assert!(
            a.ends_with(CUT) && a.len() <= MAX_HUNK_TEXT + CUT.len(),
            "{}",
            a.len()
        );
        let diff = first["files"][0]["diff_a"].as_str().unwrap();
        assert!(diff.ends_with(CUT) && diff.len() <= MAX_DIFF + CUT.len());
        // Every text counted: cut ones carry at most their marker past the budget.
        let markers = 20 * 12 * (6 * 3 + 2) * CUT.len();
        assert!(
            texts(&v) <= MAX_TEXT + markers + 20 * 1_000,
            "{}",
            texts(&v)
        );
        assert!(
            serde_json::to_string(&v).unwrap().len() < 1024 * 1024,
            "the answer stays under a MiB"
        );
        // The last pair's texts are spent: cut to nothing but the marker.
        let last = &v["pairs"][19]["files"][11]["diff_b"];
        assert_eq!(last, CUT);
    }
}
