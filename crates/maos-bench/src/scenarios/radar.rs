//! `radar`: the conflict radar's engine (issue 35) on 10 worktrees of a repository of 10,000
//! files: one write in one worktree to the radar brought up to date (that worktree snapshotted
//! again through its own index, the pairs that write touches merged again with
//! `git merge-tree`). In process, as the daemon's radar task runs it; git is the one on PATH.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Instant;

use maos_radar::{Git, Radar};
use maos_tests::Env;
use maos_tests::client::Res;

use crate::opts::Opts;
use crate::report::{Goal, Metric, latency_rows, print_human};

const FILES: usize = 10_000;
const WORKTREES: usize = 10;
/// The lines of the file every worktree edits (each its own lines, so they merge cleanly).
const HOT_LINES: usize = 200;
/// The file every worktree edits.
const HOT: &str = "shared/hot.txt";

fn git(dir: &Path, args: &[&str]) -> Res<String> {
    let out = Command::new("git")
        .current_dir(dir)
        .args(["-c", "user.name=bench", "-c", "user.email=bench@invalid"])
        .args(["-c", "commit.gpgsign=false"])
        .args(args)
        .output()
        .map_err(|e| format!("git {args:?}: {e}"))?;
    if !out.status.success() {
        return Err(format!(
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

fn write(path: &Path, text: &str) -> Res {
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// `shared/hot.txt` with line `line` of every worktree in `edits` set to its value.
fn hot(edits: &[(usize, usize)]) -> String {
    let mut text = String::new();
    for l in 0..HOT_LINES {
        match edits.iter().find(|(line, _)| *line == l) {
            Some((_, v)) => {
                let _ = writeln!(text, "line {l} edited {v}");
            }
            None => {
                let _ = writeln!(text, "line {l}");
            }
        }
    }
    text
}

/// The repository (100 directories of 100 files, each 20 lines) and its linked worktrees,
/// each with uncommitted work: its own lines of `shared/hot.txt` and a file of its own;
/// worktrees 0 and 1 also edit the same line of `shared/clash.txt` (one real conflict).
fn setup(root: &Path) -> Res<Vec<PathBuf>> {
    let main = root.join("repo");
    std::fs::create_dir_all(&main).map_err(|e| e.to_string())?;
    git(&main, &["init", "-q", "-b", "main"])?;
    for d in 0..FILES / 100 {
        let dir = main.join(format!("d{d:02}"));
        std::fs::create_dir_all(&dir).map_err(|e| e.to_string())?;
        for f in 0..100 {
            let mut text = String::new();
            for l in 0..20 {
                let _ = writeln!(text, "file {d}/{f} line {l}");
            }
            write(&dir.join(format!("f{f:02}.txt")), &text)?;
        }
    }
    std::fs::create_dir_all(main.join("shared")).map_err(|e| e.to_string())?;
    write(&main.join("shared/hot.txt"), &hot(&[]))?;
    write(&main.join("shared/clash.txt"), "one line\n")?;
    git(&main, &["add", "-A"])?;
    git(&main, &["commit", "-q", "-m", "10,000 files"])?;
    let mut worktrees = Vec::new();
    for w in 0..WORKTREES {
        let path = root.join(format!("wt {w}"));
        let path_text = path.to_str().ok_or("temporary path is not UTF-8")?;
        git(
            &main,
            &[
                "worktree",
                "add",
                "-q",
                "-b",
                &format!("agent-{w}"),
                path_text,
            ],
        )?;
        write(&path.join("shared/hot.txt"), &hot(&[(hot_line(w), 0)]))?;
        write(
            &path.join(format!("d{w:02}/f00.txt")),
            &format!("worktree {w}'s own work\n"),
        )?;
        if w < 2 {
            write(
                &path.join("shared/clash.txt"),
                &format!("worktree {w}'s line\n"),
            )?;
        }
        worktrees.push(path);
    }
    Ok(worktrees)
}

fn hot_line(w: usize) -> usize {
    w * (HOT_LINES / WORKTREES)
}

pub fn scen_radar(o: &Opts, _sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(100);
    let env = Env::try_new(&format!("maos-bench-radar-{}-", std::process::id()))
        .map_err(|e| format!("temporary directory: {e}"))?;
    let t = Instant::now();
    let worktrees = setup(&env.root())?;
    eprintln!(
        "radar: {FILES} files, {WORKTREES} worktrees made in {:.1} s",
        t.elapsed().as_secs_f64()
    );
    let mut radar = Radar::new(Git::new(), &env.root().join("radar")).map_err(|e| e.to_string())?;
    let t = Instant::now();
    for w in &worktrees {
        radar
            .watch(w, chrono::Utc::now())
            .map_err(|e| e.to_string())?;
    }
    let first = t.elapsed();
    let conflicts = radar.conflicts().count();
    if conflicts != 1 {
        return Err(format!(
            "expected the one conflict of worktrees 0 and 1, the radar sees {conflicts}"
        ));
    }
    let names: Vec<String> = worktrees.iter().map(|w| w.display().to_string()).collect();
    let (mut hot_ns, mut own_ns, mut full_ns) = (Vec::new(), Vec::new(), Vec::new());
    let (mut merged, mut kept) = (0, 0);
    let now = chrono::Utc::now;
    for round in 0..n {
        let w = round % WORKTREES;
        // A write to the file every worktree changed: every pair of this worktree merged again.
        let t = Instant::now();
        write(&worktrees[w].join(HOT), &hot(&[(hot_line(w), round + 1)]))?;
        let up = radar
            .update_paths(&names[w], Some(&[HOT.to_string()]), now())
            .map_err(|e| e.to_string())?;
        hot_ns.push(t.elapsed().as_nanos() as u64);
        merged += up.merged;
        // A write to a file only this worktree changed: no pair merged again.
        let own = format!("d{w:02}/f00.txt");
        let t = Instant::now();
        write(
            &worktrees[w].join(&own),
            &format!("worktree {w}, round {round}\n"),
        )?;
        let up = radar
            .update_paths(&names[w], Some(std::slice::from_ref(&own)), now())
            .map_err(|e| e.to_string())?;
        own_ns.push(t.elapsed().as_nanos() as u64);
        kept += up.kept;
        // The same, when the file written is not known (a shell command): the whole worktree
        // looked at.
        let t = Instant::now();
        write(
            &worktrees[w].join(&own),
            &format!("worktree {w}, round {round}, again\n"),
        )?;
        radar.update(&names[w], now()).map_err(|e| e.to_string())?;
        full_ns.push(t.elapsed().as_nanos() as u64);
        if radar.conflicts().count() != 1 {
            return Err("the radar lost or gained a conflict on a clean write".into());
        }
    }
    let mut rows = vec![Metric::new(
        "radar",
        "first look, 10 worktrees",
        first.as_secs_f64() * 1e3,
        "ms",
    )];
    let series = |samples: &mut Vec<u64>, what: &str| {
        let mut rows = latency_rows("radar", samples, None, false);
        for m in &mut rows {
            m.value /= 1000.0;
            m.unit = "ms";
            m.metric = format!("{what}: {}", m.metric);
        }
        rows[0].goal = Some(Goal::AtMost(200.0));
        rows[1].goal = Some(Goal::AtMost(200.0));
        rows
    };
    rows.extend(series(&mut hot_ns, "write to the file all 10 changed"));
    rows.extend(series(&mut own_ns, "write to a file only it changed"));
    rows.extend(series(
        &mut full_ns,
        "the same, file not named (whole worktree)",
    ));
    rows.push(Metric::new(
        "radar",
        "pairs merged per shared-file write",
        merged as f64 / n as f64,
        "",
    ));
    rows.push(Metric::new(
        "radar",
        "pairs kept per own-file write",
        kept as f64 / n as f64,
        "",
    ));
    print_human(
        &format!("radar: {FILES} files, {WORKTREES} worktrees, {n} writes of each kind"),
        &rows,
    );
    Ok(rows)
}
