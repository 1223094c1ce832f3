//! `maos demo`, run as a user runs it: by default a short story in three acts (paced on a
//! terminal, at once in a pipe), and with `--full` everything: the Claude Code session
//! replayed through real `maos hook` processes (`maos demo hooks`), the managed session whose
//! daemon is killed half-way (`maos demo managed`), and the whole demo. The demo makes its own
//! throw-away projects and daemons under `TMPDIR`, which here is inside the test's temporary
//! directory; the checks look for facts (the denial names the file and its holder, the spawn
//! tree, the event types, the session's state), not for the narration's wording. Nothing the
//! demo starts may outlive it.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maos_tests::{
    DEADLINE, Env, describe, maos_bin, run_with_timeout, run_with_timeout_keeping_stdout,
};

/// The whole demo runs dozens of processes; a hang is a bug, a slow machine is not.
const DEMO_TIMEOUT: Duration = Duration::from_secs(180);

/// Live processes started with a `MAOS_HOME` under `tmp`: the demo's daemons, and the
/// supervisors and agents of its managed session.
#[cfg(target_os = "linux")]
fn demo_processes(tmp: &Path) -> Vec<u32> {
    let mut needle = b"MAOS_HOME=".to_vec();
    needle.extend_from_slice(tmp.as_os_str().as_encoded_bytes());
    needle.push(b'/');
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id() && maos_tests::alive(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v.starts_with(&needle[..])))
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn demo_processes(_tmp: &Path) -> Vec<u32> {
    Vec::new()
}

/// What is left of a process, for a failure message.
fn cmdline(pid: u32) -> String {
    std::fs::read(format!("/proc/{pid}/cmdline"))
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .unwrap_or_default()
}

/// Kills any process the demo left behind, also when the test failed half-way.
struct Leftovers(PathBuf);

impl Drop for Leftovers {
    fn drop(&mut self) {
        for pid in demo_processes(&self.0) {
            maos_tests::kill9(pid);
        }
    }
}

/// The demo's throw-away directories (`maos-demo-*`) under `tmp`.
fn demo_dirs(tmp: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(tmp)
        .expect("read TMPDIR")
        .filter_map(|e| e.ok())
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("maos-demo-"))
        })
        .collect()
}

/// Run `maos demo ARGS` with `TMPDIR` in the test's directory; it must succeed and stop its
/// daemon. Its stdout, and the `TMPDIR` used.
fn demo(env: &Env, args: &[&str]) -> (String, PathBuf) {
    let tmp = env.root().join("tmp");
    std::fs::create_dir_all(&tmp).expect("TMPDIR");
    let _leftovers = Leftovers(tmp.clone());
    let mut cmd = env.command(&maos_bin());
    cmd.arg("demo").args(args).env("TMPDIR", &tmp);
    let out = run_with_timeout(cmd, DEMO_TIMEOUT);
    assert!(
        out.status.success(),
        "maos demo {args:?} failed: {}",
        describe(&out)
    );
    // The demo waits for its agents and supervisors and stops its daemons: nothing it started
    // outlives it.
    let deadline = std::time::Instant::now() + DEADLINE;
    let left = loop {
        let left = demo_processes(&tmp);
        if left.is_empty() || std::time::Instant::now() > deadline {
            break left;
        }
        std::thread::sleep(Duration::from_millis(10));
    };
    assert!(
        left.is_empty(),
        "processes the demo started are still running: {:?}",
        left.iter().map(|&p| (p, cmdline(p))).collect::<Vec<_>>()
    );
    let stdout = String::from_utf8(out.stdout).expect("UTF-8 output");
    (stdout, tmp)
}

/// The lines of the first `$ maos CMD` block (up to the blank line that ends it).
fn block<'a>(out: &'a str, cmd: &str) -> Vec<&'a str> {
    let mut lines = out.lines().skip_while(|l| l.trim_end() != cmd);
    assert!(lines.next().is_some(), "no `{cmd}` in the output:\n{out}");
    lines.take_while(|l| !l.trim().is_empty()).collect()
}

/// Column of the tree mark `└` on a `maos ps` agent line.
fn depth(line: &str) -> usize {
    line.find('└')
        .unwrap_or_else(|| panic!("not an agent line: {line}"))
}

/// The replay's checks: the conflicting edit denied naming file and holder, the spawn tree
/// with locks, the timeline's event types, and the window ended (its session completed) at
/// the end.
fn check_replay(out: &str) {
    let lines: Vec<&str> = out.lines().collect();
    let denied = lines
        .iter()
        .position(|l| l.contains("denied") && l.contains("src/auth/limit.rs"))
        .unwrap_or_else(|| panic!("no denied write of src/auth/limit.rs:\n{out}"));
    let reason = lines.get(denied + 1).copied().unwrap_or_default();
    assert!(
        reason.contains("src/auth/limit.rs") && reason.contains("backend"),
        "the denial's reason should name the file and its holder (backend): {reason:?}\n{out}"
    );
    assert!(
        lines[denied + 1..]
            .iter()
            .any(|l| l.contains("src/auth/limit.rs") && l.contains("allowed")),
        "the retried edit should be allowed after backend stops:\n{out}"
    );

    let ps = block(out, "$ maos ps");
    let orch = ps
        .iter()
        .position(|l| l.contains("agt_") && l.contains(" claude "))
        .unwrap_or_else(|| panic!("no claude window in `maos ps`:\n{}", ps.join("\n")));
    for (role, file) in [
        ("backend-engineer", "src/auth/limit.rs"),
        ("qa-engineer", "tests/limit_test.rs"),
    ] {
        let at = ps
            .iter()
            .position(|l| l.contains(role))
            .unwrap_or_else(|| panic!("no {role} in `maos ps`:\n{}", ps.join("\n")));
        assert!(
            at > orch && depth(ps[at]) > depth(ps[orch]),
            "{role} should be under the window's agent:\n{}",
            ps.join("\n")
        );
        assert!(
            ps[at + 1..]
                .iter()
                .take_while(|l| !l.contains('└'))
                .any(|l| l.contains("lock") && l.contains(file)),
            "{role} should hold {file}:\n{}",
            ps.join("\n")
        );
    }

    let events = block(out, "$ maos events").join("\n");
    for kind in [
        "lock_acquired",
        "tool_denied",
        "lock_released",
        "agent_completed",
    ] {
        assert!(
            events.contains(kind),
            "no {kind} in the timeline:\n{events}"
        );
    }

    let end = out
        .rfind("SessionEnd")
        .unwrap_or_else(|| panic!("no SessionEnd:\n{out}"));
    assert!(
        out[end..]
            .lines()
            .any(|l| l.contains(" claude ") && l.contains("ended")),
        "after SessionEnd the window should be ended:\n{}",
        &out[end..]
    );
    assert!(
        out[end..]
            .lines()
            .any(|l| l.starts_with("sess_") && l.contains("completed*")),
        "after its last window ended, the session should be completed:\n{}",
        &out[end..]
    );
}

#[test]
fn the_hook_replay_denies_the_conflicting_write_and_shows_the_spawn_tree() {
    let env = Env::new();
    let (out, tmp) = demo(&env, &["hooks", "--full", "--keep"]);
    check_replay(&out);
    assert!(
        !out.contains("$ maos session create"),
        "`demo hooks` should not run the CLI tour:\n{out}"
    );

    // The allowed writes really happened on disk, qa's edit after backend's write.
    let dirs = demo_dirs(&tmp);
    assert_eq!(dirs.len(), 1, "one kept demo directory: {dirs:?}");
    let project = dirs[0].join("project");
    let limiter = std::fs::read_to_string(project.join("src/auth/limit.rs")).expect("limit.rs");
    assert!(
        limiter.contains("pub struct Limiter") && limiter.contains("#[derive(Debug)]"),
        "limit.rs should hold backend's write and qa's later edit:\n{limiter}"
    );
    assert!(
        project.join("tests/limit_test.rs").is_file(),
        "qa's test file should be on disk"
    );
}

#[test]
fn the_full_demo_replays_hooks_first_then_tours_the_cli_and_cleans_up() {
    let env = Env::new();
    let (out, tmp) = demo(&env, &["--full"]);
    check_replay(&out);
    check_managed(&out);
    let replay = out.find("PreToolUse").expect("the hook replay ran");
    let managed = out
        .find("$ maos run plan.toml")
        .expect("the managed part ran");
    let tour = out
        .find("$ maos session create")
        .unwrap_or_else(|| panic!("the CLI tour should run:\n{out}"));
    assert!(
        replay < managed && managed < tour,
        "the hook replay comes first, then the managed session, then the CLI tour:\n{out}"
    );
    assert_eq!(
        full_ids(&out),
        Vec::<String>::new(),
        "one id system, the short one, outside file paths:\n{out}"
    );
    assert!(
        demo_dirs(&tmp).is_empty(),
        "without --keep the demo removes its directories: {:?}",
        demo_dirs(&tmp)
    );
}

/// The managed part's checks: the daemon killed with SIGKILL while agents ran, the restarted
/// daemon's recovery applying the exits recorded while it was down (and failing nothing), and
/// the session completed afterwards.
fn check_managed(out: &str) {
    // The part: from its `maos run` to the CLI tour, if that follows.
    let start = out
        .find("$ maos run plan.toml")
        .unwrap_or_else(|| panic!("no `maos run plan.toml`:\n{out}"));
    let out = &out[start..];
    let out = &out[..out.find("$ maos session create").unwrap_or(out.len())];
    assert!(
        out.lines().any(|l| {
            l.strip_prefix("$ kill -9 ")
                .and_then(|rest| rest.split_whitespace().next())
                .is_some_and(|pid| pid.parse::<u32>().is_ok())
        }),
        "no `$ kill -9 PID` of the daemon after the plan started:\n{out}"
    );

    let timeline = block(
        out,
        "$ maos events --type agent_process_exited --type session_recovered --type session_completed",
    );
    let at = |kind: &str| {
        timeline
            .iter()
            // `seq date time UTC type ...`
            .position(|l| l.split_whitespace().nth(4) == Some(kind))
            .unwrap_or_else(|| panic!("no {kind} in the timeline:\n{}", timeline.join("\n")))
    };
    let (recovered, completed) = (at("session_recovered"), at("session_completed"));
    let report = timeline[recovered];
    assert!(
        report.contains("exits_applied=[\"agt_")
            && report.contains("failed=[]")
            && report.contains("resumable=[]"),
        "the recovery should apply the recorded exits and fail nothing: {report}"
    );
    assert!(
        recovered < completed,
        "the session completes after the recovery:\n{}",
        timeline.join("\n")
    );
    let exits = timeline
        .iter()
        .filter(|l| l.split_whitespace().nth(4) == Some("agent_process_exited"))
        .count();
    assert_eq!(
        exits,
        4,
        "every agent's exit is recorded once:\n{}",
        timeline.join("\n")
    );

    let ps = block(out, "$ maos ps --all");
    let session = ps
        .iter()
        .find(|l| l.starts_with("sess_"))
        .unwrap_or_else(|| panic!("no session in `maos ps --all`:\n{}", ps.join("\n")));
    assert!(
        session
            .split_whitespace()
            .nth(1)
            .is_some_and(|s| s.starts_with("completed")),
        "the session should have completed: {session}"
    );
    let agents: Vec<&&str> = ps.iter().filter(|l| l.contains('└')).collect();
    assert_eq!(agents.len(), 4, "four agents:\n{}", ps.join("\n"));
    assert!(
        agents.iter().all(|l| l.contains(" completed ")),
        "every agent completed:\n{}",
        ps.join("\n")
    );
}

#[test]
fn the_managed_demo_kills_the_daemon_mid_run_and_the_restarted_daemon_completes_the_session() {
    let env = Env::new();
    let (out, tmp) = demo(&env, &["managed", "--full", "--keep"]);
    check_managed(&out);
    assert!(
        !out.contains("PreToolUse") && !out.contains("$ maos session create"),
        "`demo managed` runs neither the hook replay nor the CLI tour:\n{out}"
    );

    // What the agents wrote is on disk, the reviewer's approval last; the supervisors' exit
    // records were consumed by the recovery.
    let dirs = demo_dirs(&tmp);
    assert_eq!(dirs.len(), 1, "one kept demo directory: {dirs:?}");
    let project = dirs[0].join("project");
    for file in [
        "docs/limiter.md",
        "src/auth/limit.rs",
        "tests/limit_test.rs",
        "docs/review.md",
    ] {
        assert!(project.join(file).is_file(), "{file} should be on disk");
    }
    let leftover: Vec<PathBuf> = std::fs::read_dir(dirs[0].join("home/projects"))
        .expect("projects")
        .filter_map(Result::ok)
        .filter_map(|p| std::fs::read_dir(p.path().join("agents")).ok())
        .flatten()
        .filter_map(Result::ok)
        .map(|a| a.path().join("exit.json"))
        .filter(|f| f.exists())
        .collect();
    assert!(
        leftover.is_empty(),
        "every recorded exit was applied: {leftover:?}"
    );
}

/// `maos demo | head`: the reader goes away once the demo's daemon runs. The demo then ends as every
/// maos command ends when its stdout closes (quietly, exit code 0), but only after stopping its
/// daemon and removing its temporary directory; with `--keep` the directory stays and stderr
/// (still read) says where it is.
fn cut_short(keep: bool) {
    use std::io::BufRead;
    let env = Env::new();
    let tmp = env.root().join("tmp");
    std::fs::create_dir_all(&tmp).expect("TMPDIR");
    let _leftovers = Leftovers(tmp.clone());
    let mut cmd = env.command(&maos_bin());
    cmd.arg("demo").env("TMPDIR", &tmp);
    if keep {
        cmd.arg("--keep");
    }
    cmd.stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = maos_tests::ChildGuard(cmd.spawn().expect("spawn maos demo"));
    let mut stdout = std::io::BufReader::new(child.0.stdout.take().expect("stdout"));
    // Read up to the first hook call, which starts the demo's daemon.
    let mut head = Vec::new();
    while !head
        .last()
        .is_some_and(|l: &String| l.contains("SessionStart"))
    {
        let mut line = String::new();
        let n = stdout.read_line(&mut line).expect("read the demo's output");
        assert!(n > 0, "the demo ended before its first hook call: {head:?}");
        head.push(line);
    }
    assert!(
        !demo_processes(&tmp).is_empty(),
        "the demo's daemon runs once its first hook call is answered"
    );
    // The reader (`head`) exits: the pipe's read end closes.
    drop(stdout);
    maos_tests::wait_until(
        DEADLINE,
        "the demo ends soon after its reader went away",
        || child.0.try_wait().expect("wait for the demo").is_some(),
    );
    let status = child.0.wait().expect("the demo's status");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().expect("stderr"), &mut stderr)
        .expect("read the demo's stderr");
    assert!(
        status.success(),
        "a closed stdout ends the demo as it ends any maos command, with 0: {status:?}\n{stderr}"
    );
    // Quietly: no panic, no broken pipe, no error; only --keep's note of where its directory is.
    let lower = stderr.to_lowercase();
    assert!(
        !["panic", "broken pipe", "error", "failed"]
            .iter()
            .any(|w| lower.contains(w)),
        "a reader going away is no error: {stderr:?}"
    );
    if !keep {
        assert!(stderr.is_empty(), "nothing on stderr: {stderr:?}");
    }
    // Nothing it started outlives it (the daemon is stopped before the demo exits).
    let left = demo_processes(&tmp);
    assert!(
        left.is_empty(),
        "processes the demo started are still running: {:?} (read: {head:?})",
        left.iter().map(|&p| (p, cmdline(p))).collect::<Vec<_>>()
    );
    let dirs = demo_dirs(&tmp);
    if keep {
        assert_eq!(dirs.len(), 1, "--keep keeps the demo's directory: {dirs:?}");
        let shown = dirs[0]
            .file_name()
            .and_then(|n| n.to_str())
            .expect("a demo directory's name")
            .to_string();
        assert!(
            stderr
                .lines()
                .any(|l| l.contains("kept") && l.contains(&shown)),
            "stderr should say where the kept directory is ({shown}): {stderr:?}"
        );
    } else {
        assert!(
            dirs.is_empty(),
            "the demo should remove its directory when its reader goes away: {dirs:?}"
        );
    }
}

#[test]
fn a_demo_whose_reader_goes_away_stops_its_daemon_and_removes_its_directory() {
    cut_short(false);
}

#[test]
fn a_demo_kept_and_cut_short_keeps_its_directory_and_says_where_on_stderr() {
    cut_short(true);
}

#[test]
fn an_unknown_demo_part_is_refused() {
    let env = Env::new();
    let mut cmd = env.command(&maos_bin());
    cmd.args(["demo", "everything"])
        .env("TMPDIR", env.root().join("user"));
    let out = run_with_timeout(cmd, DEMO_TIMEOUT);
    assert!(!out.status.success(), "{}", describe(&out));
}

/// `maos demo` runs `maos-demo`, found next to `maos` or on `PATH`; without it, one line says
/// how to get it (the command that installs every maos binary), exit 127.
#[test]
fn without_maos_demo_one_line_says_how_to_build_it() {
    let env = Env::new();
    let alone = env.root().join("alone");
    std::fs::create_dir_all(&alone).expect("create a directory for a lone maos");
    let maos = alone.join("maos");
    std::fs::copy(maos_bin(), &maos).expect("copy maos");
    let mut cmd = env.command(&maos);
    cmd.args(["demo", "hooks"]).env("PATH", &alone);
    let out = run_with_timeout(cmd, DEADLINE);
    assert_eq!(out.status.code(), Some(127), "{}", describe(&out));
    let stderr = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = stderr.lines().collect();
    assert!(
        lines.len() == 1 && lines[0].contains("maos-demo") && lines[0].contains("install.sh"),
        "expected one line naming maos-demo and how to build it: {}",
        describe(&out)
    );
    assert!(
        out.stdout.is_empty(),
        "nothing on stdout: {}",
        describe(&out)
    );
}

/// A session or agent id in full (`sess_` or `agt_` and 32 hex digits), outside file paths
/// and the JSON files the demo shows (`cat exit.json`).
fn full_ids(out: &str) -> Vec<String> {
    out.lines()
        .filter(|l| !l.trim_start().starts_with('"'))
        .flat_map(|l| l.split(|c: char| !(c.is_ascii_alphanumeric() || c == '_' || c == '/')))
        .filter(|w| !w.contains('/'))
        .filter(|w| maos_core::ids::is_id(w))
        .map(str::to_string)
        .collect()
}

/// Watchable (issue 15): `--step` stops before each step until Enter (and runs on at the end
/// of its input), `--pace` waits before each; one id system, the short one, throughout; and
/// `--keep` says how to explore what it kept, in commands that work.
#[test]
fn the_demo_can_be_stepped_paced_and_explored_and_shows_short_ids() {
    let env = Env::new();
    let _left = Leftovers(env.root());
    let mut cmd = env.command(&maos_bin());
    cmd.args(["demo", "cli", "--step", "--keep"])
        .env("TMPDIR", env.root())
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    let mut child = cmd.spawn().expect("spawn maos demo");
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().expect("stdin");
        stdin.write_all(b"\n\n\n").expect("three Enters");
    }
    let out = child.wait_with_output().expect("demo output");
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.matches("[Enter: go on]").count() == 4,
        "three steps waited for, the fourth met the end of the input and the rest ran on:\n{text}"
    );
    assert!(text.contains("created session sess_"), "{text}");
    assert_eq!(
        full_ids(&text),
        Vec::<String>::new(),
        "short ids only:\n{text}"
    );

    // What --keep printed works as printed.
    let export = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("export "))
        .unwrap_or_else(|| panic!("no export line:\n{text}"));
    let vars: Vec<(&str, &str)> = export
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let project = text
        .lines()
        .find_map(|l| l.trim().strip_prefix("cd ")?.split(" && ").next())
        .unwrap_or_else(|| panic!("no cd line:\n{text}"));
    let mut ps = env.command(&maos_bin());
    ps.args(["ps", "--all"])
        .current_dir(project)
        .envs(vars.iter().copied());
    let listed = run_with_timeout(ps, DEADLINE);
    let listed_text = String::from_utf8_lossy(&listed.stdout);
    assert!(
        listed.status.success() && listed_text.contains("Add rate limiting"),
        "{}",
        describe(&listed)
    );
    let mut stop = env.command(&maos_bin());
    stop.args(["daemon", "stop"]).envs(vars.iter().copied());
    assert!(run_with_timeout(stop, DEADLINE).status.success());

    // --pace: the whole part goes through; bad values are one line and exit 2.
    let (paced, _) = demo(&env, &["cli", "--pace", "1ms"]);
    assert!(paced.contains("created session"), "{paced}");
    for bad in [
        &["cli", "--pace", "soon"][..],
        &["cli", "--pace", "1s", "--step"],
    ] {
        let out = env.maos(&[&["demo"][..], bad].concat());
        assert_eq!(out.status.code(), Some(2), "{bad:?}: {}", describe(&out));
    }
}

/// The most lines the default demo prints: about a screen per act.
const STORY_LINES: usize = 120;

/// Less than what the default story spends pausing on a terminal: a default run in a pipe
/// that ends sooner did not pause.
const STORY_PAUSES: Duration = Duration::from_secs(30);

/// The default demo (issue 29): a story a person can follow, not a 632-line dump. Three acts,
/// each named by a line that says what happens; the outcome of each stated plainly (the
/// denied write naming the file and its holder, the retried write allowed, the killed
/// daemon's recovery, the completed sessions); short; and in a pipe, no pauses.
#[test]
fn the_default_demo_is_a_short_story_in_three_acts_with_its_outcomes_stated_plainly() {
    let env = Env::new();
    let started = Instant::now();
    let (out, tmp) = demo(&env, &[]);
    let took = started.elapsed();
    let lines: Vec<&str> = out.lines().collect();
    assert!(
        lines.len() <= STORY_LINES,
        "the default demo should be short (at most {STORY_LINES} lines), not {} lines:\n{out}",
        lines.len()
    );
    assert!(
        took < STORY_PAUSES,
        "with stdout not a terminal the story does not pause, yet it took {took:?}"
    );

    // Each act is introduced by one line saying what happens and why it matters.
    let acts: Vec<usize> = (1..=3)
        .map(|n| {
            let name = format!("Act {n} of 3");
            lines
                .iter()
                .position(|l| l.starts_with(&name))
                .unwrap_or_else(|| panic!("no line starting {name:?}:\n{out}"))
        })
        .collect();
    assert!(
        acts[0] < acts[1] && acts[1] < acts[2],
        "the acts in order:\n{out}"
    );
    for &at in &acts {
        assert!(
            lines[at].split_whitespace().count() >= 10,
            "an act's line says what happens and why: {:?}",
            lines[at]
        );
    }
    let act = |n: usize| {
        let end = acts.get(n).copied().unwrap_or(lines.len());
        &lines[acts[n - 1]..end]
    };
    let find = |n: usize, what: &str, test: &dyn Fn(&str) -> bool| {
        act(n)
            .iter()
            .position(|l| test(l))
            .unwrap_or_else(|| panic!("act {n} should say {what}:\n{}", act(n).join("\n")))
    };

    // Act 1: the denial, plainly (who, which file, held by whom), then its way out.
    let denied = find(1, "that qa's write was denied, naming the holder", &|l| {
        l.contains("DENIED")
            && l.contains("qa-engineer")
            && l.contains("src/auth/limit.rs")
            && l.contains("held by backend-engineer")
    });
    let allowed = find(1, "that qa's retried write was allowed", &|l| {
        l.contains("ALLOWED") && l.contains("src/auth/limit.rs")
    });
    assert!(
        denied < allowed,
        "denied, then allowed:\n{}",
        act(1).join("\n")
    );

    // Act 2: the daemon killed mid-run, its recovery, the session completed.
    let killed = find(2, "the kill -9 of the daemon", &|l| {
        l.strip_prefix("$ kill -9 ")
            .and_then(|rest| rest.split_whitespace().next())
            .is_some_and(|pid| pid.parse::<u32>().is_ok())
    });
    let recovered = find(2, "what the restarted daemon recovered", &|l| {
        l.contains("RECOVERED") && l.contains("backend") && l.contains("tests")
    });
    let completed = find(2, "that the session completed", &|l| {
        l.contains("COMPLETED") && l.contains("4/4")
    });
    assert!(
        killed < recovered && recovered < completed,
        "killed, recovered, completed:\n{}",
        act(2).join("\n")
    );

    // Act 3: the CLI by hand: the deadlock broken, the pause holding, the session completed.
    find(3, "the deadlock and its victim", &|l| {
        l.contains("DEADLOCK") && l.contains("qa")
    });
    find(3, "that nothing starts while paused", &|l| {
        l.contains("PAUSED")
    });
    find(3, "that the session completed", &|l| {
        l.contains("COMPLETED")
    });

    assert_eq!(
        full_ids(&out),
        Vec::<String>::new(),
        "short ids only:\n{out}"
    );
    assert!(
        demo_dirs(&tmp).is_empty(),
        "without --keep the demo removes its directories: {:?}",
        demo_dirs(&tmp)
    );
}

/// A pseudo-terminal: the side this test reads, and the side a program writes to.
fn terminal() -> (std::fs::File, std::fs::File) {
    use std::os::fd::FromRawFd;
    use std::os::unix::fs::OpenOptionsExt;

    // SAFETY: posix_openpt/grantpt/unlockpt/ptsname on a descriptor this function owns; the
    // name is copied at once (only these tests call ptsname, one at a time per terminal).
    let (master, slave_path) = unsafe {
        let fd = libc::posix_openpt(libc::O_RDWR | libc::O_NOCTTY);
        assert!(fd >= 0, "posix_openpt: {}", std::io::Error::last_os_error());
        let master = std::fs::File::from_raw_fd(fd);
        assert_eq!(libc::grantpt(fd), 0, "grantpt");
        assert_eq!(libc::unlockpt(fd), 0, "unlockpt");
        let name = libc::ptsname(fd);
        assert!(!name.is_null(), "ptsname");
        let path = std::ffi::CStr::from_ptr(name)
            .to_string_lossy()
            .into_owned();
        (master, path)
    };
    let slave = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .custom_flags(libc::O_NOCTTY)
        .open(&slave_path)
        .expect("open the terminal's other side");
    (master, slave)
}

/// What a terminal shows, read as it comes (a full terminal would block its writer), chunk
/// by chunk; the channel ends once every process holding the other side is gone.
fn screen(master: std::fs::File) -> std::sync::mpsc::Receiver<Vec<u8>> {
    use std::io::Read;
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let mut master = master;
        let mut buf = [0u8; 4096];
        // EIO once every process holding the other side is gone.
        while let Ok(n) = master.read(&mut buf) {
            if n == 0 || tx.send(buf[..n].to_vec()).is_err() {
                break;
            }
        }
    });
    rx
}

/// Terminal output as text: carriage returns and colours (ESC [ ... m) removed.
fn plain(bytes: &[u8]) -> String {
    let mut chars = String::from_utf8_lossy(bytes).into_owned();
    chars.retain(|c| c != '\r');
    let mut text = String::new();
    let mut rest = chars.as_str();
    while let Some(at) = rest.find('\x1b') {
        text.push_str(&rest[..at]);
        rest = &rest[at..];
        rest = rest.find('m').map_or("", |m| &rest[m + 1..]);
    }
    text.push_str(rest);
    text
}

/// What `maos demo ARGS` printed on a terminal (a pseudo-terminal this test reads the other
/// side of), and how long it took.
fn demo_on_a_terminal(env: &Env, args: &[&str]) -> (String, Duration) {
    let (master, slave) = terminal();
    let rx = screen(master);
    let tmp = env.root().join("tmp");
    std::fs::create_dir_all(&tmp).expect("TMPDIR");
    let _leftovers = Leftovers(tmp.clone());
    let mut cmd = env.command(&maos_bin());
    cmd.arg("demo")
        .args(args)
        .env("TMPDIR", &tmp)
        .stdout(std::process::Stdio::from(slave));
    let started = Instant::now();
    // The command, and with it this side's copy of the terminal, is dropped once it ended.
    let out = run_with_timeout_keeping_stdout(cmd, DEMO_TIMEOUT);
    let took = started.elapsed();
    assert!(
        out.status.success(),
        "maos demo {args:?} on a terminal: {}",
        describe(&out)
    );
    let mut shown = Vec::new();
    let deadline = Instant::now() + DEADLINE;
    while let Ok(chunk) = rx.recv_timeout(deadline.saturating_duration_since(Instant::now())) {
        shown.extend(chunk);
    }
    (plain(&shown), took)
}

/// Less than what act 1 of the story spends pausing on a terminal.
const ACT_PAUSES: Duration = Duration::from_secs(5);

/// On a terminal the story is paced, so a person can read each step before the next; with
/// `--no-pause` (or `--fast`) it runs at once there too.
#[test]
fn on_a_terminal_the_story_is_paced_unless_told_not_to() {
    let env = Env::new();
    let (paced, took) = demo_on_a_terminal(&env, &["hooks"]);
    assert!(
        paced.contains("Act 1 of 3") && paced.contains("DENIED"),
        "the story's first act on a terminal:\n{paced}"
    );
    assert!(
        took >= ACT_PAUSES,
        "on a terminal the story pauses between its steps, yet act 1 took only {took:?}:\n{paced}"
    );
    for flag in ["--no-pause", "--fast"] {
        let (fast, took) = demo_on_a_terminal(&env, &["hooks", flag]);
        assert!(fast.contains("DENIED"), "{flag}:\n{fast}");
        assert!(
            took < ACT_PAUSES,
            "{flag}: no pauses on a terminal, yet act 1 took {took:?}"
        );
    }
}

/// Ctrl-C while the story pauses (a person is more likely to press it during a paced story
/// than during the old dump): the demo still stops its daemon and removes its directory
/// before it ends, quietly, with the exit code of an interrupt (130).
#[test]
fn an_interrupted_story_stops_its_daemon_and_removes_its_directory() {
    let env = Env::new();
    let tmp = env.root().join("tmp");
    std::fs::create_dir_all(&tmp).expect("TMPDIR");
    let _leftovers = Leftovers(tmp.clone());
    let (master, slave) = terminal();
    let rx = screen(master);
    let mut cmd = env.command(&maos_bin());
    cmd.arg("demo")
        .env("TMPDIR", &tmp)
        .stdin(std::process::Stdio::null())
        .stdout(std::process::Stdio::from(slave))
        .stderr(std::process::Stdio::piped());
    let mut child = maos_tests::ChildGuard(cmd.spawn().expect("spawn maos demo"));
    drop(cmd);
    // Wait until act 1 is under way (its daemon runs), in one of the story's pauses.
    let mut shown = Vec::new();
    let deadline = Instant::now() + DEMO_TIMEOUT;
    while !plain(&shown).contains("SessionStart") {
        let chunk = rx
            .recv_timeout(deadline.saturating_duration_since(Instant::now()))
            .unwrap_or_else(|_| panic!("no SessionStart on the terminal: {}", plain(&shown)));
        shown.extend(chunk);
    }
    assert!(
        !demo_processes(&tmp).is_empty(),
        "the demo's daemon runs once act 1 is under way"
    );
    // Ctrl-C, as the terminal sends it to the demo (`maos demo` became `maos-demo`).
    // SAFETY: plain kill(2) of the child this test started.
    unsafe { libc::kill(child.0.id() as libc::pid_t, libc::SIGINT) };
    maos_tests::wait_until(DEADLINE, "the interrupted demo ends", || {
        child.0.try_wait().expect("wait for the demo").is_some()
    });
    let status = child.0.wait().expect("the demo's status");
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.0.stderr.take().expect("stderr"), &mut stderr)
        .expect("read the demo's stderr");
    assert_eq!(
        status.code(),
        Some(130),
        "an interrupted demo ends with 130, after cleaning up: {status:?}\n{stderr}"
    );
    assert!(
        !stderr.to_lowercase().contains("panic"),
        "no panic: {stderr}"
    );
    let left = demo_processes(&tmp);
    assert!(
        left.is_empty(),
        "processes the demo started are still running: {:?}",
        left.iter().map(|&p| (p, cmdline(p))).collect::<Vec<_>>()
    );
    assert!(
        demo_dirs(&tmp).is_empty(),
        "the interrupted demo should remove its directory: {:?}",
        demo_dirs(&tmp)
    );
}
