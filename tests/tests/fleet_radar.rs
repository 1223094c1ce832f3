//! The conflict radar across a fleet's machines (issue 35): two daemons (two homes, two clones
//! of one repository, one project key) on a throwaway real PostgreSQL, each told of its own
//! window's writes by `maos hook`. No daemon reads the other's clone: each reports its agents'
//! worktrees through PostgreSQL, and each pairs its own with the other's. Overlapping
//! uncommitted edits show on both daemons' `maos radar`, `ps` and timeline, with the other
//! machine's name; edits that merge cleanly show nothing; undoing clears it. Hostile rows put in
//! PostgreSQL by hand (a path `../x`, a huge size, a base that is no commit id) are refused with
//! a log line and a line in `maos radar`, and a report whose base this clone lacks is shown as
//! not comparable, never guessed at, until a `git fetch` brings the base in; the daemon keeps
//! serving. A report rewritten while the daemon reads it is taken again at the next look.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::postgres::{Postgres, postgres_or_skip};
use maos_tests::window_hook as hook;
use maos_tests::window_start as start;
use maos_tests::{Env, Value, git, json, wait_until};
use sqlx::{Connection, PgConnection};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
const KEY: &str = "e2e.invalid/fleet-radar";

/// A daemon of the fleet on `machine`, its own home.
fn daemon_on(pg: &Postgres, machine: &str) -> Env {
    let env = Env::new();
    env.write_config(&format!(
        "database_url = \"{}\"\nmachine = \"{machine}\"\n",
        pg.url()
    ));
    env
}

/// The shared repository (in `env`'s directory): `src/api.rs`, `notes.txt` and the project
/// key in `.maos/config.toml`, committed on `main`.
fn origin(env: &Env) -> PathBuf {
    let origin = env.root().join("origin");
    std::fs::create_dir_all(origin.join("src")).unwrap();
    std::fs::create_dir_all(origin.join(".maos")).unwrap();
    git(&origin, &["init", "-q", "-b", "main"]);
    std::fs::write(origin.join("src/api.rs"), TEN).unwrap();
    std::fs::write(origin.join("notes.txt"), "notes\n").unwrap();
    std::fs::write(
        origin.join(".maos/config.toml"),
        format!("project = \"{KEY}\"\n"),
    )
    .unwrap();
    git(&origin, &["add", "-A"]);
    git(&origin, &["commit", "-q", "-m", "base"]);
    origin
}

/// The commit `origin`'s `main` is on.
fn main_of(origin: &Path) -> String {
    let out = std::process::Command::new("git")
        .args(["rev-parse", "main"])
        .current_dir(origin)
        .output()
        .expect("rev-parse");
    assert!(out.status.success(), "git rev-parse main in {origin:?}");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A clone of `origin` in `env`'s directory, on a branch of its own.
fn clone(env: &Env, origin: &Path, branch: &str) -> PathBuf {
    let dir = env.root().join("clone");
    git(
        &env.root(),
        &[
            "clone",
            "-q",
            origin.to_str().unwrap(),
            dir.to_str().unwrap(),
        ],
    );
    git(&dir, &["checkout", "-q", "-b", branch]);
    dir
}

/// A `Write` of `path` in the clone `cwd` by `window`, allowed, written, reported; then the
/// window's turn ends (its locks are given back). What the PostToolUse answer told the model.
fn write(env: &Env, cwd: &Path, window: &str, path: &str, content: &str) -> String {
    let out = maos_tests::window_write(env, cwd, window, path, content);
    hook(env, cwd, window, "Stop", json!({}));
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or(Value::Null);
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn radar(env: &Env, clone: &Path) -> Vec<Value> {
    env.maos_json_in(clone, &["radar"])
        .as_array()
        .cloned()
        .unwrap_or_default()
}

/// The paths of a pair's conflicting files.
fn files(pair: &Value) -> Vec<String> {
    pair["files"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|f| f["path"].as_str().map(String::from))
        .collect()
}

/// The side of `pair` on another machine, and this machine's.
fn sides(pair: &Value) -> (&Value, &Value) {
    if pair["a"]["machine"].is_string() {
        (&pair["a"], &pair["b"])
    } else {
        (&pair["b"], &pair["a"])
    }
}

/// Waits until `env`'s radar in `clone` shows a pair conflicting in notes.txt, saying `what`
/// if it never does; the pairs then.
fn notes_conflict_shows(env: &Env, clone: &Path, what: &str) -> Vec<Value> {
    let mut pairs = Vec::new();
    wait_until(Duration::from_secs(20), what, || {
        pairs = radar(env, clone);
        pairs.iter().any(|p| files(p) == ["notes.txt"])
    });
    pairs
}

/// The versions of the reports of `machine` in PostgreSQL at `url`.
fn versions_of(url: &str, machine: &str) -> Vec<i64> {
    maos_tests::block_on(async {
        let mut c = PgConnection::connect(url).await.expect("connect");
        sqlx::query_scalar::<_, i64>(
            "SELECT version FROM radar_worktrees WHERE project = $1 AND machine = $2",
        )
        .bind(KEY)
        .bind(machine)
        .fetch_all(&mut c)
        .await
        .expect("versions")
    })
}

#[test]
fn overlapping_edits_on_two_machines_show_on_both_and_clean_merges_show_nothing() {
    let Some(pg) = postgres_or_skip() else { return };
    let (e1, e2) = (daemon_on(&pg, "machine-1"), daemon_on(&pg, "machine-2"));
    let origin = origin(&e1);
    let (c1, c2) = (clone(&e1, &origin, "one"), clone(&e2, &origin, "two"));
    start(&e1, &c1, "w1");
    start(&e2, &c2, "w2");

    // Edits that merge cleanly: other lines of one file, and a file only one side changed.
    write(
        &e1,
        &c1,
        "w1",
        "src/api.rs",
        &TEN.replace("2\n", "two from 1\n"),
    );
    write(
        &e2,
        &c2,
        "w2",
        "src/api.rs",
        &TEN.replace("9\n", "nine from 2\n"),
    );
    // Then one that does not: both change notes.txt's one line.
    write(&e2, &c2, "w2", "notes.txt", "notes from 2\n");
    write(&e1, &c1, "w1", "notes.txt", "notes from 1\n");

    let c2_path = c2.display().to_string();
    let c1_path = c1.display().to_string();
    for (env, clone, here, there, other_path) in [
        (&e1, &c1, &c1_path, "machine-2", &c2_path),
        (&e2, &c2, &c2_path, "machine-1", &c1_path),
    ] {
        let mut pairs = Vec::new();
        wait_until(
            Duration::from_secs(20),
            &format!("{there}'s conflict shows on the other daemon"),
            || {
                pairs = radar(env, clone);
                pairs.iter().any(|p| !files(p).is_empty())
            },
        );
        assert_eq!(pairs.len(), 1, "{pairs:#?}");
        let pair = &pairs[0];
        // Only notes.txt: api.rs, changed on both machines on other lines, merges cleanly.
        assert_eq!(files(pair), ["notes.txt"], "{pair:#}");
        let overlap: Vec<&str> = pair["overlap"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert_eq!(overlap, ["notes.txt", "src/api.rs"], "both were compared");
        let (other, mine) = sides(pair);
        assert_eq!(other["machine"], there, "{pair:#}");
        assert_eq!(
            other["worktree"].as_str(),
            Some(format!("{there}:{other_path}").as_str())
        );
        assert_eq!(mine["worktree"].as_str(), Some(here.as_str()));
        assert_eq!(
            other["agents"].as_array().map(Vec::len),
            Some(1),
            "{pair:#}"
        );
        assert_eq!(mine["agents"].as_array().map(Vec::len), Some(1), "{pair:#}");
        let file = &pair["files"][0];
        assert_eq!(file["kind"], "contents");
        let hunk = &file["hunks"][0];
        let mut lines = [hunk["a"].as_str().unwrap(), hunk["b"].as_str().unwrap()];
        lines.sort();
        assert_eq!(lines, ["notes from 1\n", "notes from 2\n"], "{file:#}");
        assert_eq!(hunk["base"], "notes\n");
        // ps says it on this machine's agent's row, naming the other machine.
        let ps = String::from_utf8_lossy(&env.maos_in(clone, &["ps"]).stdout).into_owned();
        assert!(
            ps.contains("~ notes.txt would conflict with") && ps.contains(there),
            "{ps}"
        );
    }
    // Each daemon told its own agent, on the shared timeline, naming the other machine.
    let told: Vec<String> = e1
        .events_in(&c1, &["--type", "radar_conflict"])
        .iter()
        .filter_map(|e| e["data"]["other_machine"].as_str().map(String::from))
        .collect();
    assert!(
        told.contains(&"machine-1".to_string()) && told.contains(&"machine-2".to_string()),
        "{told:?}"
    );

    // Machine 1's next write to the file tells its model machine 2's change, and whose.
    let told = write(&e1, &c1, "w1", "notes.txt", "notes from 1, again\n");
    assert!(
        told.contains("maos radar")
            && told.contains("+notes from 2")
            && told.contains(&format!("machine-2:{c2_path}")),
        "{told}"
    );

    // Machine 2 undoes its notes: the conflict goes away on both.
    write(&e2, &c2, "w2", "notes.txt", "notes\n");
    for (env, clone) in [(&e1, &c1), (&e2, &c2)] {
        wait_until(Duration::from_secs(20), "the conflict clears", || {
            radar(env, clone).is_empty()
        });
    }
    let cleared = e2.events_in(&c2, &["--type", "radar_cleared"]);
    assert!(cleared.len() >= 2, "both daemons said so: {cleared:#?}");
}

/// The daemon `evil/1` on machine `evil`, a live member of the fleet (its reports count).
async fn evil_member(c: &mut PgConnection) {
    sqlx::query("INSERT INTO daemons VALUES ('evil/1', 'evil', maos_now_us(), maos_now_us())")
        .execute(c)
        .await
        .expect("daemon row");
}

/// Rows of a worktree report of `evil/1`, written straight into PostgreSQL as a hostile or
/// confused daemon might: one file (path, blob, size, content).
async fn put_report(
    c: &mut PgConnection,
    worktree: &str,
    base: &str,
    file: (&str, &str, i64, Option<&[u8]>),
) {
    sqlx::query(
        "INSERT INTO radar_worktrees (project, daemon, worktree, machine, agents, base, version,
             updated_at) VALUES ($1, 'evil/1', $2, 'evil', '[]', $3, nextval('maos_radar_version'),
             maos_now_us())",
    )
    .bind(KEY)
    .bind(worktree)
    .bind(base)
    .execute(&mut *c)
    .await
    .expect("report row");
    sqlx::query(
        "INSERT INTO radar_files (project, daemon, worktree, path, mode, blob, size, content)
         VALUES ($1, 'evil/1', $2, $3, 33188, $4, $5, $6)",
    )
    .bind(KEY)
    .bind(worktree)
    .bind(file.0)
    .bind(file.1)
    .bind(file.2)
    .bind(file.3)
    .execute(&mut *c)
    .await
    .expect("file row");
}

#[test]
fn hostile_rows_are_refused_and_a_base_not_here_is_said_not_guessed() {
    let Some(pg) = postgres_or_skip() else { return };
    let e1 = daemon_on(&pg, "machine-1");
    let origin = origin(&e1);
    let c1 = clone(&e1, &origin, "one");
    start(&e1, &c1, "w1");
    write(&e1, &c1, "w1", "src/api.rs", &TEN.replace("5\n", "five\n"));
    // Its report is in PostgreSQL: the radar has a worktree of this machine to pair.
    let url = pg.url();
    wait_until(Duration::from_secs(20), "machine-1's report", || {
        maos_tests::block_on(async {
            let mut c = PgConnection::connect(&url).await.expect("connect");
            sqlx::query_scalar::<_, i64>("SELECT count(*) FROM radar_files WHERE project = $1")
                .bind(KEY)
                .fetch_one(&mut c)
                .await
                .expect("count")
                == 1
        })
    });

    let unknown = "0123456789abcdef0123456789abcdef01234567";
    maos_tests::block_on(async {
        let mut c = PgConnection::connect(&url).await.expect("connect");
        evil_member(&mut c).await;
        let base = "a".repeat(40);
        let b = &"b".repeat(40);
        put_report(&mut c, "/w/dots", &base, ("../x", b, 2, Some(b"x\n"))).await;
        put_report(&mut c, "/w/huge", &base, ("src/api.rs", b, 1 << 40, None)).await;
        put_report(
            &mut c,
            "/w/sha",
            "HEAD~1; rm -rf /",
            ("src/api.rs", b, 2, Some(b"x\n")),
        )
        .await;
        // Sound, but its base is a commit this clone never had.
        put_report(
            &mut c,
            "/w/far",
            unknown,
            ("src/api.rs", b, 2, Some(b"x\n")),
        )
        .await;
    });

    let mut pairs = Vec::new();
    wait_until(
        Duration::from_secs(20),
        "the four reports are judged",
        || {
            pairs = radar(&e1, &c1);
            pairs.len() == 4
        },
    );
    let note = |worktree: &str| -> String {
        pairs
            .iter()
            .find(|p| sides(p).0["worktree"] == format!("evil:{worktree}"))
            .and_then(|p| p["note"].as_str())
            .unwrap_or_else(|| panic!("no pair with {worktree}: {pairs:#?}"))
            .to_string()
    };
    assert_eq!(
        note("/w/dots"),
        "refused evil/1's report: path `../x` leaves its directory (`..`)"
    );
    assert_eq!(
        note("/w/huge"),
        "refused evil/1's report: file `src/api.rs` is 1099511627776 bytes (at most 262144)"
    );
    assert!(
        note("/w/sha").starts_with("refused evil/1's report: its base `HEAD~1; rm -rf /`"),
        "{pairs:#?}"
    );
    assert_eq!(
        note("/w/far"),
        format!("cannot compare: base {unknown} not here")
    );
    for p in &pairs {
        assert!(files(p).is_empty(), "nothing merged: {p:#}");
    }
    // The table says it too, and the daemon serves on.
    let table = String::from_utf8_lossy(&e1.maos_in(&c1, &["radar"]).stdout).into_owned();
    assert!(
        table.contains(&format!("cannot compare: base {unknown} not here")),
        "{table}"
    );
    assert!(table.contains("both changed: src/api.rs"), "{table}");
    let log = e1.home.join("logs/maosd.log");
    let mut text = String::new();
    wait_until(Duration::from_secs(10), "the refusals are logged", || {
        text = std::fs::read_to_string(&log).unwrap_or_default();
        text.matches("the radar refused another daemon's report")
            .count()
            >= 3
    });
    assert!(text.contains("leaves its directory"), "{text}");
    let ps = e1.maos_json_in(&c1, &["ps"]);
    assert_eq!(
        ps.as_array().map(Vec::len),
        Some(1),
        "the daemon serves: {ps}"
    );
    // Nothing of them reached the repository: no ref, and no file outside it.
    assert!(!e1.root().join("x").exists());
    assert!(!c1.parent().unwrap().join("x").exists());
}

/// The blob id git gives `content`.
fn blob_id(content: &[u8]) -> String {
    use std::io::Write;
    let mut child = std::process::Command::new("git")
        .args(["hash-object", "--stdin"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git hash-object");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(content)
        .expect("write");
    let out = child.wait_with_output().expect("git hash-object");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

/// A directory `dir/name` holding a `git` that runs the shell lines `prelude`, then the real
/// git (found on this process's `PATH`).
fn wrapped_git(dir: &Path, name: &str, prelude: &str) -> PathBuf {
    use std::os::unix::fs::PermissionsExt;
    let real = std::env::split_paths(&std::env::var_os("PATH").unwrap_or_default())
        .map(|d| d.join("git"))
        .find(|g| g.is_file())
        .expect("git on PATH");
    let bin = dir.join(name);
    std::fs::create_dir_all(&bin).unwrap();
    let script = bin.join("git");
    std::fs::write(
        &script,
        format!("#!/bin/sh\n{prelude}\nexec '{}' \"$@\"\n", real.display()),
    )
    .unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
    bin
}

/// A directory holding a `git` that appends each of its runs' arguments to `log`, then runs
/// the real git.
fn logging_git(dir: &Path, log: &Path) -> PathBuf {
    let prelude = format!("printf '%s\\n' \"$*\" >> '{}'", log.display());
    wrapped_git(dir, "logging-git", &prelude)
}

/// `maos daemon start` in `clone`, the daemon's `PATH` starting with `bin`.
fn start_with_path(env: &Env, clone: &Path, bin: PathBuf) {
    let path = std::env::join_paths(std::iter::once(bin).chain(std::env::split_paths(
        &std::env::var_os("PATH").unwrap_or_default(),
    )))
    .unwrap();
    let started = env
        .maos_cmd_in(clone, &["daemon", "start"])
        .env("PATH", &path)
        .output()
        .expect("maos daemon start");
    assert!(started.status.success(), "{started:?}");
}

/// While no report changes, the radar merges nothing again: its looks every second read the
/// versions and skip what they took already. Other reports arriving meanwhile (looked at on
/// later looks) merge nothing of the pair already merged, and each costs one git process (its
/// base and blobs looked up once). git's runs are counted through a `git` on the daemon's
/// `PATH` that logs them.
#[test]
fn looks_at_unchanged_reports_merge_nothing_again() {
    let Some(pg) = postgres_or_skip() else { return };
    let e1 = daemon_on(&pg, "machine-1");
    let origin = origin(&e1);
    let c1 = clone(&e1, &origin, "one");
    let log = e1.root().join("git.log");
    start_with_path(&e1, &c1, logging_git(&e1.root(), &log));
    start(&e1, &c1, "w1");
    write(&e1, &c1, "w1", "notes.txt", "notes from 1\n");

    // Another machine's report, as its daemon writes it: notes.txt changed on the same line.
    let url = pg.url();
    let main = main_of(&origin);
    let theirs = b"notes from 2\n";
    let report = |worktree: &str, base: &str, content: &[u8]| {
        maos_tests::block_on(async {
            let mut c = PgConnection::connect(&url).await.expect("connect");
            let blob = blob_id(content);
            put_report(
                &mut c,
                worktree,
                base,
                ("notes.txt", &blob, content.len() as i64, Some(content)),
            )
            .await;
        })
    };
    maos_tests::block_on(async {
        evil_member(&mut PgConnection::connect(&url).await.expect("connect")).await
    });
    report("/srv/two", &main, theirs);
    let mut pairs = notes_conflict_shows(&e1, &c1, "the other machine's conflict shows");
    // git's runs since the `from`th.
    let runs = |from: usize| -> Vec<String> {
        std::fs::read_to_string(&log)
            .unwrap_or_default()
            .lines()
            .skip(from)
            .map(String::from)
            .collect()
    };
    let before = runs(0);
    assert!(
        before.iter().any(|r| r.contains("merge-tree")),
        "the pair was merged: the log counts {before:#?}"
    );

    // Two more reports, each on a look of its own (the second written once the first shows),
    // neither comparable here (their base is no commit of this clone): the looks that take them
    // and those in between find the pair's report unchanged.
    let far = "0123456789abcdef0123456789abcdef01234567";
    for (n, worktree) in [(2, "/srv/three"), (3, "/srv/four")] {
        report(worktree, far, b"x\n");
        wait_until(Duration::from_secs(20), "the report is looked at", || {
            pairs = radar(&e1, &c1);
            pairs.len() == n
        });
    }
    // No merge again, and no other git than one lookup of each new report's base and blobs
    // (its base is not here: nothing fetched, nothing built).
    let later = runs(before.len());
    assert!(
        !later.iter().any(|r| r.contains("merge-tree")),
        "looks merged again what did not change: {later:#?}"
    );
    assert_eq!(later.len(), 2, "{later:#?}");
    assert!(
        later
            .iter()
            .all(|r| r.ends_with("cat-file --batch-check=%(objecttype)")),
        "{later:#?}"
    );
    assert!(
        pairs.iter().any(|p| files(p) == ["notes.txt"]),
        "the conflict stays: {pairs:#?}"
    );
}

/// A report whose base this clone lacks is shown as not comparable; once the user fetches
/// (`git fetch`, as `maos radar`'s note says), the pair is compared, and its conflict shown,
/// though the other machine writes nothing new: the radar looks again at the reports it could
/// not compare when this clone's refs change.
#[test]
fn a_base_not_here_compares_once_fetched() {
    let Some(pg) = postgres_or_skip() else { return };
    let (e1, e2) = (daemon_on(&pg, "machine-1"), daemon_on(&pg, "machine-2"));
    let origin = origin(&e1);
    // Machine 1 cloned before the main line moved on; machine 2 after.
    let c1 = clone(&e1, &origin, "one");
    std::fs::write(origin.join("later.txt"), "later\n").unwrap();
    git(&origin, &["add", "later.txt"]);
    git(&origin, &["commit", "-q", "-m", "later"]);
    let later = main_of(&origin);
    let c2 = clone(&e2, &origin, "two");
    start(&e1, &c1, "w1");
    start(&e2, &c2, "w2");
    write(&e1, &c1, "w1", "notes.txt", "notes from 1\n");
    write(&e2, &c2, "w2", "notes.txt", "notes from 2\n");

    // Machine 2's report is on its main line's commit, which machine 1's clone has not fetched.
    let note = format!("cannot compare: base {later} not here");
    let mut pairs = Vec::new();
    wait_until(
        Duration::from_secs(20),
        "the pair cannot be compared",
        || {
            pairs = radar(&e1, &c1);
            pairs
                .iter()
                .any(|p| p["note"].as_str() == Some(note.as_str()))
        },
    );
    assert_eq!(pairs.len(), 1, "{pairs:#?}");
    assert!(files(&pairs[0]).is_empty(), "nothing guessed: {pairs:#?}");
    // The version of machine 2's report: it must not change from here on.
    let url = pg.url();
    let version = || versions_of(&url, "machine-2");
    let before = version();
    assert_eq!(
        before.len(),
        1,
        "machine 2 reports one worktree: {before:?}"
    );

    git(&c1, &["fetch", "-q"]);
    let pairs = notes_conflict_shows(&e1, &c1, "the fetched pair is compared");
    assert_eq!(pairs.len(), 1, "{pairs:#?}");
    let pair = &pairs[0];
    assert!(pair["note"].is_null(), "{pair:#}");
    let (other, _) = sides(pair);
    assert_eq!(other["machine"], "machine-2", "{pair:#}");
    let table = String::from_utf8_lossy(&e1.maos_in(&c1, &["radar"]).stdout).into_owned();
    assert!(
        table.contains("1 file would conflict") && !table.contains("cannot compare"),
        "{table}"
    );
    assert_eq!(version(), before, "machine 2 wrote nothing new");
}

/// A report rewritten while this daemon reads it (after the report, before its contents) is
/// not dropped: it is taken again at the next look, even when the rewrite left its version as
/// it was (rows written by hand), and its conflict shows. The rewrite is made to land exactly
/// there: the daemon's `git` holds the report's lookup (its first `cat-file` of object types)
/// until the rows are rewritten.
#[test]
fn a_report_rewritten_while_read_is_taken_again() {
    let Some(pg) = postgres_or_skip() else { return };
    let e1 = daemon_on(&pg, "machine-1");
    let origin = origin(&e1);
    let c1 = clone(&e1, &origin, "one");
    let (held, go) = (e1.root().join("held"), e1.root().join("go"));
    let prelude = format!(
        "case \"$*\" in *'cat-file --batch-check=%(objecttype)'*)\n\
         if mkdir '{}' 2>/dev/null; then\n\
         i=0; while [ ! -e '{}' ] && [ $i -lt 300 ]; do sleep 0.1; i=$((i+1)); done\n\
         fi;;\nesac",
        held.display(),
        go.display()
    );
    start_with_path(&e1, &c1, wrapped_git(&e1.root(), "holding-git", &prelude));
    start(&e1, &c1, "w1");
    write(&e1, &c1, "w1", "notes.txt", "notes from 1\n");

    // Another machine's report: notes.txt changed on the same line.
    let url = pg.url();
    let main = main_of(&origin);
    let (first, then) = (b"notes from 2\n", b"notes, then, from 2\n");
    maos_tests::block_on(async {
        let mut c = PgConnection::connect(&url).await.expect("connect");
        evil_member(&mut c).await;
        let blob = blob_id(first);
        put_report(
            &mut c,
            "/srv/two",
            &main,
            ("notes.txt", &blob, first.len() as i64, Some(first)),
        )
        .await;
    });
    let before = versions_of(&url, "evil");
    assert_eq!(before.len(), 1, "one report: {before:?}");
    wait_until(
        Duration::from_secs(20),
        "the daemon reads the report",
        || held.exists(),
    );
    // Rewritten as it is read: another content, the version left as it was.
    maos_tests::block_on(async {
        let mut c = PgConnection::connect(&url).await.expect("connect");
        sqlx::query(
            "UPDATE radar_files SET blob = $2, size = $3, content = $4
             WHERE project = $1 AND daemon = 'evil/1'",
        )
        .bind(KEY)
        .bind(blob_id(then))
        .bind(then.len() as i64)
        .bind(&then[..])
        .execute(&mut c)
        .await
        .expect("rewrite");
    });
    std::fs::write(&go, "").unwrap();
    let pairs = notes_conflict_shows(&e1, &c1, "the rewritten report's conflict shows");
    assert_eq!(pairs.len(), 1, "{pairs:#?}");
    assert!(pairs[0]["note"].is_null(), "{pairs:#?}");
    assert_eq!(versions_of(&url, "evil"), before, "the version never moved");
}
