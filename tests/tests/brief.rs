//! The briefing (`maos brief`) and the notes it is made of (`maos note`), through the real
//! binaries: every part of the briefing, its text form, the blockers and next steps, the
//! SessionStart hook that hands it to a new AI session (within Claude Code's 10,000-character
//! limit), bad notes that change nothing, and notes surviving a daemon restart.

use std::path::Path;
use std::process::Output;

use maos_tests::{DEADLINE, Env, Value, alive, describe, json, wait_until};

/// Claude Code cuts `additionalContext` beyond this many characters.
const CONTEXT_LIMIT: usize = 10_000;

/// `maos note KIND TEXT [extra...]`, which must succeed.
fn note(env: &Env, kind: &str, text: &str, extra: &[&str]) {
    let mut args = vec!["note", kind, text];
    args.extend_from_slice(extra);
    let out = env.maos(&args);
    assert!(out.status.success(), "maos {args:?}: {}", describe(&out));
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "noted");
}

fn texts(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|f| f["text"].as_str().expect("text"))
        .collect()
}

fn roles(list: &Value) -> Vec<&str> {
    list.as_array()
        .unwrap_or_else(|| panic!("not an array: {list}"))
        .iter()
        .map(|a| a["role"].as_str().expect("role"))
        .collect()
}

/// `maos brief` (human), which must succeed: its text.
fn brief_text(env: &Env) -> String {
    let out = env.maos(&["brief"]);
    assert!(out.status.success(), "maos brief: {}", describe(&out));
    String::from_utf8(out.stdout).expect("utf-8")
}

/// Run `maos hook` in `dir` with `input` on stdin.
fn hook(env: &Env, dir: &Path, input: &Value) -> Output {
    env.hook_at(dir, &["hook"], input.to_string().into_bytes(), &[], false)
}

/// SessionStart of CLI session `cli` in project `dir` with `source`: the
/// `additionalContext`, if any.
fn session_start(env: &Env, dir: &Path, cli: &str, source: &str) -> Option<String> {
    let input = json!({"session_id": cli, "cwd": dir, "hook_event_name": "SessionStart",
                       "source": source});
    let out = hook(env, dir, &input);
    assert!(out.status.success(), "maos hook: {}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return None;
    }
    let v: Value = serde_json::from_str(text.trim()).expect("hook output is JSON");
    assert_eq!(v["hookSpecificOutput"]["hookEventName"], "SessionStart");
    v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .map(str::to_string)
}

/// The scenario of the first test: a session in phase 1 of 2 with one agent of each kind.
struct World {
    env: Env,
    sid: String,
    writer: String,
    coder: String,
    tester: String,
    flaky: String,
}

fn world() -> World {
    let env = Env::new();
    std::fs::create_dir_all(env.project.join("src")).expect("src");
    let sid = env.session("Ship the expression parser", &["build", "ship"]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["phase", "start"]);
    let writer = env.agent(None, "writer", "write the grammar");
    env.maos_json(&["agent", "start", &writer]);
    env.maos_json(&["agent", "complete", &writer, "--exit-code", "0"]);
    let coder = env.agent(None, "coder", "implement the lexer");
    env.maos_json(&["agent", "start", &coder]);
    env.maos_json(&["lock", "acquire", "src/lexer.rs", "--agent", &coder]);
    let tester = env.create(&[
        "agent",
        "register",
        "--role",
        "tester",
        "--task",
        "test the lexer",
        "--depends-on",
        &coder,
    ]);
    let flaky = env.agent(None, "flaky", "benchmark the lexer");
    env.maos_json(&["agent", "start", &flaky]);
    env.maos_json(&["agent", "fail", &flaky, "--exit-code", "3"]);
    World {
        env,
        sid,
        writer,
        coder,
        tester,
        flaky,
    }
}

#[test]
fn the_briefing_has_every_part() {
    let w = world();
    let env = &w.env;
    // Notes of every kind, with and without an agent (named by a prefix of its id).
    note(
        env,
        "decision",
        "use a hand-written lexer",
        &["--agent", &w.coder],
    );
    note(env, "done", "grammar reviewed", &[]);
    note(env, "done", "lexer skeleton", &["--agent", &w.coder[..12]]);
    note(env, "error", "CI network is flaky", &[]);
    note(env, "pending", "write the docs", &[]);

    let b = env.maos_json(&["brief"]);
    assert_eq!(b["session_id"], w.sid.as_str());
    assert_eq!(b["objective"], "Ship the expression parser");
    assert_eq!(b["state"], "running");
    assert_eq!(b["strategy"], "parallel");
    assert_eq!(b["active"], true);
    assert!(b["at"].is_string() && b["started_at"].is_string());

    // Progress and phases: the figures of `maos status`.
    assert_eq!(b["progress"]["phase"], json!([1, 2]));
    assert_eq!(b["progress"]["current_phase"], "build");
    assert!(b["progress"]["current_phase_elapsed_secs"].is_number());
    assert_eq!(
        (
            b["progress"]["agents_done"].as_u64(),
            b["progress"]["agents_total"].as_u64()
        ),
        (Some(1), Some(4)),
        "the writer is done; the failed flaky is final, not done (issue 29)"
    );
    let status = env.maos_json(&["status"]);
    assert_eq!(b["progress"]["phase"], status["progress"]["phase"]);
    assert_eq!(b["progress"]["percent"], status["progress"]["percent"]);
    let phases = b["phases"].as_array().expect("phases");
    assert_eq!(phases.len(), 2);
    assert_eq!(phases[0]["number"], 1);
    assert_eq!(phases[0]["name"], "build");
    assert_eq!(phases[0]["state"], "running");
    assert_eq!(phases[0]["current"], true);
    assert!(phases[0]["secs"].is_number());
    assert_eq!(phases[1]["state"], "planned");
    assert_eq!(phases[1]["current"], false);

    // Done: the completed agent with its outcome, and the done notes.
    let done = &b["done"]["agents"];
    assert_eq!(roles(done), ["writer"]);
    assert_eq!(done[0]["id"], w.writer.as_str());
    assert_eq!(done[0]["task"], "write the grammar");
    assert_eq!(done[0]["exit_code"], 0);
    assert_eq!(done[0]["outcome"], "completed, exit code 0");
    assert!(done[0]["ended_at"].is_string());
    assert_eq!(
        texts(&b["done"]["notes"]),
        ["grammar reviewed", "lexer skeleton"]
    );
    let skeleton = &b["done"]["notes"][1];
    assert_eq!(
        skeleton["agent"],
        w.coder.as_str(),
        "the prefix was resolved"
    );
    assert_eq!(skeleton["role"], "coder");
    assert_eq!(skeleton["source"], "note");
    assert!(b["done"]["notes"][0]["agent"].is_null());

    // In progress: the running agent with the lock it holds.
    let running = &b["in_progress"];
    assert_eq!(roles(running), ["coder"]);
    assert_eq!(running[0]["state"], "running");
    assert_eq!(running[0]["paused"], false);
    assert!(running[0]["started_at"].is_string());
    assert_eq!(running[0]["locks"][0]["path"], "src/lexer.rs");
    assert_eq!(running[0]["locks"][0]["mode"], "write");

    // Pending: the agent waiting for the running one (by role), and the pending note.
    let pending = &b["pending"]["agents"];
    assert_eq!(roles(pending), ["tester"]);
    assert_eq!(pending[0]["id"], w.tester.as_str());
    assert_eq!(
        pending[0]["waiting_for"],
        json!([{"id": w.coder, "role": "coder", "state": "running"}])
    );
    assert_eq!(texts(&b["pending"]["notes"]), ["write the docs"]);

    // Failed: the failed agent, with the recorded failure.
    assert_eq!(roles(&b["failed"]), ["flaky"]);
    assert_eq!(b["failed"][0]["exit_code"], 3);
    let outcome = b["failed"][0]["outcome"].as_str().unwrap();
    assert!(outcome.contains("exit code 3"), "{outcome}");

    // Decisions and errors (recorded ones and notes, oldest first).
    assert_eq!(texts(&b["decisions"]), ["use a hand-written lexer"]);
    assert_eq!(b["decisions"][0]["agent"], w.coder.as_str());
    assert_eq!(b["decisions"][0]["role"], "coder");
    let errors = b["errors"].as_array().unwrap();
    assert_eq!(errors.len(), 2, "{errors:?}");
    assert_eq!(errors[0]["source"], "recorded");
    assert_eq!(errors[0]["agent"], w.flaky.as_str());
    assert_eq!(errors[0]["role"], "flaky");
    assert!(errors[0]["text"].as_str().unwrap().contains("exit code 3"));
    assert_eq!(errors[1]["source"], "note");
    assert_eq!(errors[1]["text"], "CI network is flaky");

    // Nothing blocks this session; the lock is listed as `lock list` shows it.
    assert_eq!(b["blockers"], json!([]));
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(b["locks"], locks["locks"]);
    assert_eq!(b["locks"][0]["path"], "src/lexer.rs");
    assert_eq!(b["locks"][0]["holder"], w.coder.as_str());

    // The failure nobody answered yet comes first.
    let next = b["next_step"].as_str().unwrap();
    assert!(next.contains("failed agent flaky"), "{next}");
    let text = b["text"].as_str().unwrap();
    assert!(text.starts_with("maos: "), "{text}");
    assert!(text.len() <= CONTEXT_LIMIT);

    // The human form is the same text, with short ids (issue 29; the fields keep whole ones).
    let human = brief_text(env);
    let next = &*maos_core::ids::shorten_all(next);
    for part in [
        "maos: ",
        "Ship the expression parser",
        "phase 1/2 \"build\"",
        "src/lexer.rs",
        "use a hand-written lexer",
        "write the docs",
        "CI network is flaky",
        "completed, exit code 0",
        "waits for coder",
        next,
    ] {
        assert!(human.contains(part), "{part:?} missing from:\n{human}");
    }
    assert!(
        human.trim_end().ends_with(&format!("Next step: {next}")),
        "{human}"
    );

    // Every note is on the timeline, with its agent.
    let events = env.events(&["--type", "note_recorded"]);
    assert_eq!(events.len(), 5);
    assert_eq!(
        events[0]["data"],
        json!({"kind": "decision", "text": "use a hand-written lexer"})
    );
    assert_eq!(events[0]["agent_id"], w.coder.as_str());
    assert_eq!(events[0]["session_id"], w.sid.as_str());
    assert!(events[1]["agent_id"].is_null());

    // A decision about the failed agent answers it: the next step moves on to the work in
    // progress, and what waits for it.
    note(
        env,
        "decision",
        "drop the benchmark for now",
        &["--agent", &w.flaky],
    );
    let next = env.maos_json(&["brief"])["next_step"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(
        next.starts_with("Continue the work in progress: coder"),
        "{next}"
    );
    assert!(next.contains("tester"), "{next}");

    // The coder completes: the tester is ready to start.
    env.maos_json(&["agent", "complete", &w.coder]);
    let b = env.maos_json(&["brief"]);
    assert_eq!(b["pending"]["agents"][0]["waiting_for"], json!([]));
    let next = b["next_step"].as_str().unwrap();
    assert!(
        next.contains(&format!("maos agent start {}", w.tester)),
        "{next}"
    );
    assert_eq!(b["locks"], json!([]), "a completed agent holds no lock");
}

#[test]
fn blockers_and_next_steps() {
    let env = Env::new();
    env.session("Blocked work", &["build", "ship"]);
    let b = env.maos_json(&["brief"]);
    assert!(
        b["next_step"]
            .as_str()
            .unwrap()
            .contains("maos session start")
    );
    env.maos_json(&["session", "start"]);
    let b = env.maos_json(&["brief"]);
    assert!(
        b["next_step"]
            .as_str()
            .unwrap()
            .contains("Start phase 1/2 \"build\""),
        "{}",
        b["next_step"]
    );

    // A failed checkpoint waits for a retry.
    env.maos_json(&["phase", "start"]);
    env.maos_json(&["phase", "complete", "--failed"]);
    let b = env.maos_json(&["brief"]);
    assert_eq!(b["blockers"][0]["kind"], "phase_failed");
    assert_eq!(b["blockers"][0]["phase"], "build");
    let next = b["next_step"].as_str().unwrap();
    assert!(next.contains("retry it with `maos phase start`"), "{next}");
    assert!(brief_text(&env).contains("phase 1/2 \"build\" failed"));
    env.maos_json(&["phase", "start"]);
    env.maos_json(&["phase", "complete"]);

    // A pending agent whose dependency failed can never start.
    let base = env.agent(None, "base", "lay the base");
    env.maos_json(&["agent", "start", &base]);
    env.maos_json(&["agent", "fail", &base, "--reason", "disk full"]);
    let top = env.create(&[
        "agent",
        "register",
        "--role",
        "top",
        "--task",
        "build on it",
        "--depends-on",
        &base,
    ]);
    let b = env.maos_json(&["brief"]);
    let blocker = &b["blockers"][0];
    assert_eq!(blocker["kind"], "dependency_failed");
    assert_eq!(blocker["agent"], top.as_str());
    assert!(blocker["text"].as_str().unwrap().contains("which failed"));
    let next = b["next_step"].as_str().unwrap();
    assert!(
        next.contains("failed agent base") && next.contains("disk full"),
        "{next}"
    );

    // A paused agent, then a paused session: the next step says how to resume.
    let worker = env.agent(None, "worker", "work");
    env.maos_json(&["agent", "start", &worker]);
    env.maos_json(&["pause", "--agent", &worker]);
    let b = env.maos_json(&["brief"]);
    let kinds: Vec<&str> = b["blockers"]
        .as_array()
        .unwrap()
        .iter()
        .map(|x| x["kind"].as_str().unwrap())
        .collect();
    assert_eq!(kinds, ["agent_paused", "dependency_failed"]);
    assert_eq!(b["in_progress"][0]["paused"], true);

    env.maos_json(&["pause", "--reason", "lunch break"]);
    let b = env.maos_json(&["brief"]);
    assert_eq!(b["state"], "paused");
    assert_eq!(b["pause"]["reason"], "lunch break");
    assert_eq!(b["blockers"][0]["kind"], "session_paused");
    let next = b["next_step"].as_str().unwrap();
    assert!(
        next.contains("paused") && next.contains("lunch break") && next.contains("`maos resume`"),
        "{next}"
    );
    let text = brief_text(&env);
    assert!(text.contains(&format!("Next step: {next}")), "{text}");

    // Resumed, the agent resumed, the failure answered, the rest done: complete the session.
    env.maos_json(&["resume"]);
    env.maos_json(&["resume", "--agent", &worker]);
    env.maos_json(&["agent", "complete", &worker]);
    env.maos_json(&["agent", "cancel", &top]);
    note(&env, "done", "base laid by hand", &["--agent", &base]);
    let next = env.maos_json(&["brief"])["next_step"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(next.contains("Start phase 2/2 \"ship\""), "{next}");
    env.maos_json(&["phase", "start"]);
    let next = env.maos_json(&["brief"])["next_step"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(next.contains("Complete phase 2/2 \"ship\""), "{next}");
    env.maos_json(&["phase", "complete"]);
    let b = env.maos_json(&["brief"]);
    assert_eq!(b["state"], "completed");
    assert_eq!(b["progress"]["phase"], json!([2, 2]));
    assert!(b["next_step"].as_str().unwrap().contains("completed"));
    assert_eq!(b["blockers"], json!([]));
}

#[test]
fn session_start_hands_the_briefing_to_a_new_ai_session_within_the_limit() {
    let env = Env::new();
    // No history: no context.
    assert_eq!(session_start(&env, &env.project, "cli-0", "startup"), None);

    let other = env.make_project("other");
    let root = Env::project_root(&other);
    env.maos_json_in(
        &other,
        &[
            "session",
            "create",
            "--objective",
            "Port the CLI to Windows",
        ],
    );
    env.maos_json_in(&other, &["session", "start"]);
    env.maos_json_in(&other, &["note", "decision", "named pipes, not TCP"]);
    env.maos_json_in(
        &other,
        &["agent", "register", "--role", "porter", "--task", "port"],
    );
    let ctx = session_start(&env, &other, "cli-1", "startup").expect("a briefing");
    assert!(ctx.starts_with("maos: "), "{ctx}");
    assert!(ctx.contains("Port the CLI to Windows"), "{ctx}");
    assert!(ctx.contains("named pipes, not TCP"), "{ctx}");

    // The same as `maos brief`, apart from running times.
    let brief = env.maos_json_in(&other, &["brief"]);
    let text = brief["text"].as_str().unwrap();
    let steady = |t: &str| -> Vec<String> {
        t.lines()
            .filter(|l| !l.contains("since") && !l.contains("running for"))
            .map(str::to_string)
            .collect()
    };
    assert_eq!(steady(&ctx), steady(text));

    // 500 long notes: the context stays within Claude Code's limit, keeps the newest and
    // says how many more there are.
    let mut raw = env.raw();
    raw.hello();
    for i in 0..500 {
        let kind = ["decision", "done", "error", "pending"][i % 4];
        let text = format!("note {i:03}: {}", "lorem ipsum dolor sit amet ".repeat(12));
        let r = raw.request(
            Some(&root),
            json!({"request": "note", "kind": kind, "text": text}),
        );
        assert!(r["Ok"].is_object(), "{r}");
    }
    let ctx = session_start(&env, &other, "cli-1", "resume").expect("a briefing");
    assert!(
        ctx.chars().count() <= CONTEXT_LIMIT,
        "{} chars",
        ctx.chars().count()
    );
    assert!(ctx.encode_utf16().count() <= CONTEXT_LIMIT);
    assert!(ctx.starts_with("maos: "));
    assert!(ctx.contains("Port the CLI to Windows"));
    assert!(ctx.contains("note 499"), "the newest note is kept");
    assert!(ctx.contains("more earlier"), "{ctx}");
    assert!(ctx.contains("Next step: "), "{ctx}");
    // `maos brief --json` still has every note.
    let brief = env.maos_json_in(&other, &["brief"]);
    assert_eq!(brief["decisions"].as_array().unwrap().len(), 126);
    assert_eq!(brief["done"]["notes"].as_array().unwrap().len(), 125);
    assert_eq!(brief["pending"]["notes"].as_array().unwrap().len(), 125);
    assert_eq!(brief["errors"].as_array().unwrap().len(), 125);
}

#[test]
fn bad_notes_are_refused_and_change_nothing() {
    let env = Env::new();
    env.session("Steady", &["one"]);
    env.maos_json(&["session", "start"]);
    let agent = env.agent(None, "dev", "code");
    note(&env, "decision", "keep it simple", &["--agent", &agent]);
    let other = env.session("Another session", &[]);
    let stranger = env.agent(Some(&other), "x", "y");
    let steady = |env: &Env| {
        let mut b = env.maos_json(&["brief"]);
        b.as_object_mut().unwrap().remove("at");
        b
    };
    let before = steady(&env);
    let events = env.events(&[]).len();

    // A kind that does not exist is a bad command line.
    let out = env.maos(&["note", "bogus", "x"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("bogus"), "{err}");
    let out = env.maos(&["note", "decision"]);
    assert_eq!(out.status.code(), Some(2), "no text: {}", describe(&out));

    // Empty, too long, or about an agent that is not in the session: refused.
    let f = env.maos_fail(&["note", "decision", "  "]);
    assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"), "{f:?}");
    assert_eq!(f.stderr.trim().lines().count(), 1, "{f:?}");
    assert!(f.message.contains("empty"), "{f:?}");
    let long = "x".repeat(4097);
    let f = env.maos_fail(&["note", "done", &long]);
    assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"), "{f:?}");
    assert!(f.message.contains("4096"), "{f:?}");
    let f = env.maos_fail(&["note", "error", "x", "--agent", "agt_ffff"]);
    assert_eq!((f.exit, f.code.as_str()), (1, "not_found"), "{f:?}");
    assert!(f.message.contains("--agent agt_ffff"), "{f:?}");
    let f = env.maos_fail(&["note", "error", "x", "--agent", &stranger]);
    assert_eq!(f.code, "not_found", "an agent of another session: {f:?}");
    let f = env.maos_fail(&["note", "error", "x", "--session", "sess_ffff"]);
    assert_eq!(f.code, "not_found", "{f:?}");

    assert_eq!(steady(&env), before, "refused notes changed the briefing");
    assert_eq!(env.events(&[]).len(), events, "refused notes wrote events");

    // A note of exactly 4096 bytes (after trimming) is fine.
    let max = format!("  {}  ", "y".repeat(4096));
    env.maos_json(&["note", "done", &max]);
    assert_eq!(
        env.maos_json(&["brief"])["done"]["notes"][0]["text"],
        "y".repeat(4096)
    );
}

#[test]
fn an_agent_started_by_maos_notes_under_its_own_name() {
    let env = Env::new();
    let sid = env.session("Env names", &[]);
    env.session("Another, not active", &[]);
    let agent = env.agent(Some(&sid), "dev", "code");
    let mut cmd = env.maos_cmd_in(&env.project, &["note", "done", "wrote the code"]);
    cmd.env("MAOS_SESSION_ID", &sid)
        .env("MAOS_AGENT_ID", &agent);
    let out = maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", describe(&out));
    let b = env.maos_json(&["brief", &sid]);
    assert_eq!(b["done"]["notes"][0]["agent"], agent.as_str());
    assert_eq!(b["done"]["notes"][0]["role"], "dev");
}

#[test]
fn notes_survive_a_restart_and_a_kill() {
    let env = Env::new();
    env.session("Durable notes", &[]);
    env.maos_json(&["session", "start"]);
    let agent = env.agent(None, "dev", "code");
    note(&env, "decision", "SQLite, not files", &["--agent", &agent]);
    note(&env, "pending", "write the migration", &[]);
    let strip = |mut b: Value| {
        let o = b.as_object_mut().unwrap();
        o.remove("at");
        o.remove("progress");
        b
    };
    let before = strip(env.maos_json(&["brief"]));

    let pid = env.daemon_pid();
    env.maos_json(&["daemon", "stop"]);
    wait_until(DEADLINE, "the daemon is gone", || !alive(pid));
    let after = strip(env.maos_json(&["brief"]));
    assert_ne!(env.daemon_pid(), pid, "a new daemon answers");
    assert_eq!(after, before);
    assert_eq!(texts(&after["decisions"]), ["SQLite, not files"]);
    assert_eq!(after["decisions"][0]["agent"], agent.as_str());

    // An acknowledged note survives kill -9.
    note(&env, "error", "the build server is down", &[]);
    env.kill9();
    let b = env.maos_json(&["brief"]);
    assert_eq!(texts(&b["errors"]), ["the build server is down"]);
    assert_eq!(texts(&b["pending"]["notes"]), ["write the migration"]);
}
