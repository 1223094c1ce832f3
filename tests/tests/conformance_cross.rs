//! Conformance across clients, with the real binaries: Claude Code 2.1.332 (and 2.1.328 before
//! it) (`claude -p` against a fake Anthropic Messages API) and Codex 0.171.0 (and 0.169.0 before it) (`codex exec` against a fake
//! Responses API), each with maos's hooks installed the way a user installs them, and the real
//! maosd behind both. Each scenario checks three sides: what the models received, the disk, and
//! maos's own view (`events`, `lock list`, `ps`).
//!
//! - Two windows of different CLIs race on one file: the Claude Code window holds it (its
//!   turn is held open by its fake model), the Codex window's `apply_patch` of it is denied,
//!   and the reason Codex's model reads names the holder as that Claude Code window.
//! - A Codex window, which never sends SessionEnd, is ended by maos once its process is gone,
//!   and not before: while `codex exec` runs (held by its fake model) its agent is running.
//!
//! Where a client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set). The scenarios run one at a time; each client run is bounded.

use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use maos_tests::claude::{self, FakeModel, Run, say, write};
use maos_tests::codex::{
    self, Hold, Step, configure, exec_command, model, model_holding, received, run_codex,
};
use maos_tests::conformance::runnable;
use maos_tests::conformance::{
    Client, FakeApi, Gate, one_event, prompt_event, ps_agent, short, window_of,
};
use maos_tests::{Env, Value, json, wait_until};

/// One scenario at a time: each runs real clients, which push each other towards their
/// deadlines on a small machine.
static ONE: Mutex<()> = Mutex::new(());

/// How Codex shows its model a `PreToolUse` denial (then maos's reason, a full stop, and the
/// command).
const CODEX_DENIED: &str = "Command blocked by PreToolUse hook: ";

/// Both clients, installed on first use; `None` (after saying why) where one cannot run.
fn clients() -> Option<(PathBuf, PathBuf)> {
    let claude = runnable("Claude Code", claude::claude())?;
    Some((claude, runnable("Codex", codex::codex())?))
}

/// A patch replacing `old` by `new` in `path`.
fn patch_replacing(path: &str, old: &str, new: &str) -> String {
    format!("*** Begin Patch\n*** Update File: {path}\n@@\n-{old}\n+{new}\n*** End Patch\n")
}

/// The agents of a `maos ps --json` answer (its sessions' agents).
fn agents_of(session: &Value) -> Vec<Value> {
    session["agents"].as_array().cloned().unwrap_or_default()
}

/// A Claude Code window writes `shared.rs` and keeps its turn open (its model holds the next
/// answer), so it holds the file's lock; a `codex exec` window in the same project is told to
/// patch the file: maos denies it, and Codex's model reads that the holder is the Claude Code
/// window, with its task, what it did last and since when. The disk keeps Claude's content;
/// maos records the denial on the Codex window's agent and the lock and the write on the
/// Claude Code window's, both windows agents of one session, each labelled by its CLI and its
/// prompt. Once Claude's turn ends, the lock is gone.
#[test]
fn two_windows_of_different_clis_race_on_one_file_and_the_denial_names_the_holder() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some((claude_bin, codex_bin)) = clients() else {
        return;
    };
    let started = Instant::now();
    let env = Env::new();
    const CLAUDE_PROMPT: &str = "MAOS-CROSS-CLAUDE: write shared.rs";
    const CODEX_PROMPT: &str = "MAOS-CROSS-CODEX: patch shared.rs";
    const CLAUDE_LINE: &str = "pub fn shared() -> u32 { 1 }";
    let file = env.project.join("shared.rs");

    // Codex's model: patch shared.rs, then done.
    let codex_model = model(vec![Step::Patch(patch_replacing(
        "shared.rs",
        CLAUDE_LINE,
        "pub fn shared() -> u32 { 2 }",
    ))]);
    configure(&env, &codex_model);
    // Hooks for both CLIs, as a user installs them.
    env.maos_json(&["install-hooks"]);
    codex::install(&env);

    // Claude's model: write shared.rs, then hold the turn open until the test lets it end.
    let release = Gate::default();
    let (hold, target) = (release.clone(), file.clone());
    let claude_model = FakeModel::start(move |req| {
        if !req.of("MAOS-CROSS-CLAUDE") {
            say("ok")
        } else if !req.has("toolu_write") {
            vec![write("toolu_write", &target, &format!("{CLAUDE_LINE}\n"))]
        } else {
            hold.wait();
            say("Done.")
        }
    });
    let run = Run::start(&env, &claude_bin, &claude_model, CLAUDE_PROMPT);
    claude_model.wait_result("toolu_write", "Claude's write was answered");
    let claude_window = window_of(&env, CLAUDE_PROMPT);
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "shared.rs" && l["holder"] == claude_window.as_str()),
        "{locks}"
    );

    // The Codex window, meanwhile.
    let out = run_codex(&env, &codex_bin, CODEX_PROMPT);
    assert!(out.status.success(), "codex failed: {out:?}");

    // Codex's model: maos's reason, naming the Claude Code window.
    let got = received(&codex_model);
    eprintln!("the Codex model received: {got:?}");
    let [(_, text)] = &got[..] else {
        panic!("not one tool output: {got:?}")
    };
    let holder = format!(
        "claude ({}), a Claude Code window (task: \"{CLAUDE_PROMPT}\"; last: Write shared.rs, ",
        short(&claude_window)
    );
    assert!(
        text.starts_with(&format!("{CODEX_DENIED}maos: shared.rs")),
        "{text}"
    );
    assert!(text.contains(&holder), "{holder:?} is not in {text:?}");
    assert!(text.contains("), has held it since "), "{text}");
    // The disk: Claude's content.
    assert_eq!(
        std::fs::read_to_string(&file).expect("shared.rs"),
        format!("{CLAUDE_LINE}\n")
    );
    // maos's view: the denial is the Codex window's, with the reason its model read; the lock
    // and the write are the Claude Code window's.
    let codex_window = window_of(&env, CODEX_PROMPT);
    assert_ne!(codex_window, claude_window);
    let denied = one_event(&env, "tool_denied", "shared.rs");
    assert_eq!(denied["agent_id"], codex_window.as_str(), "{denied}");
    assert_eq!(denied["data"]["why"], "lock_conflict", "{denied}");
    let reason = denied["data"]["reason"].as_str().expect("reason");
    // Codex ends the reason with its own full stop.
    let reason = reason.strip_suffix('.').unwrap_or(reason);
    assert!(
        text.starts_with(&format!("{CODEX_DENIED}{reason}. Command: ")),
        "the model did not read the recorded reason {reason:?}: {text}"
    );
    let locked = one_event(&env, "lock_acquired", "shared.rs");
    assert_eq!(locked["agent_id"], claude_window.as_str(), "{locked}");
    wait_until(
        Duration::from_secs(10),
        "Claude's write is recorded",
        || !env.events(&["--type", "file_modified"]).is_empty(),
    );
    let written = one_event(&env, "file_modified", "shared.rs");
    assert_eq!(written["agent_id"], claude_window.as_str(), "{written}");
    assert_eq!(
        env.events(&["--type", "file_modified"]).len(),
        1,
        "Codex's patch was recorded as a write"
    );
    // `maos ps`: one session, the two windows as two agents, each with its CLI and prompt.
    let ps = env.maos_json(&["ps"]);
    let [session] = &ps.as_array().expect("sessions")[..] else {
        panic!("not one session: {ps:#}")
    };
    let mut windows: Vec<(String, String, String, String)> = agents_of(session)
        .iter()
        .filter(|a| a["parent"].is_null())
        .map(|a| {
            let s = |k: &str| a[k].as_str().unwrap_or_default().to_string();
            (s("id"), s("role"), s("cli"), s("task"))
        })
        .collect();
    windows.sort_by(|a, b| a.1.cmp(&b.1));
    let expected = [
        (claude_window.clone(), "claude", "claude", CLAUDE_PROMPT),
        (codex_window.clone(), "codex", "codex", CODEX_PROMPT),
    ]
    .map(|(id, role, cli, task)| (id, role.to_string(), cli.to_string(), task.to_string()));
    assert_eq!(windows, expected, "{ps:#}");
    // Each window's last tool: Claude's write, Codex's refused patch.
    let claude_agent = ps_agent(&env, &claude_window);
    assert_eq!(claude_agent["state"], "running", "{claude_agent}");
    assert_eq!(
        (
            &claude_agent["activity"]["tool"],
            &claude_agent["activity"]["path"]
        ),
        (&json!("Write"), &json!("shared.rs")),
        "{claude_agent}"
    );
    let codex_agent = ps_agent(&env, &codex_window);
    assert_eq!(
        (
            &codex_agent["activity"]["tool"],
            &codex_agent["activity"]["path"]
        ),
        (&json!("apply_patch"), &json!("shared.rs")),
        "{codex_agent}"
    );
    // Refused, and by whom (issue 29: a refused writer read like the holder).
    assert_eq!(
        (
            &codex_agent["activity"]["denied"]["why"],
            &codex_agent["activity"]["denied"]["holder"]
        ),
        (&json!("lock_conflict"), &json!(claude_window)),
        "{codex_agent}"
    );

    // Claude's turn ends: its lock goes.
    release.open();
    let out = run.finish();
    assert!(out.status.success(), "claude failed: {out:?}");
    assert_ne!(
        claude::tool_result(&claude_model.messages_requests(), "toolu_write")["is_error"],
        true
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    eprintln!("the race took {:?}", started.elapsed());
}

/// `codex exec` never sends SessionEnd. While it runs (its model holds an answer after the
/// window patched a file) its agent is running and holds the file's lock, through many
/// rounds of the daemon's sweep; once it exits, maos ends its agent, saying its CLI process
/// is gone, no lock is left, and the session the hooks made for it completes.
#[test]
fn a_codex_window_that_exits_without_session_end_is_ended_by_maos() {
    let _one = ONE.lock().unwrap_or_else(|p| p.into_inner());
    let Some((_, codex_bin)) = clients() else {
        return;
    };
    let started = Instant::now();
    let env = Env::new();
    // The daemon, started first, looks for lost windows every 100 ms.
    let mut first = env.maos_cmd_in(&env.project, &["--json", "lock", "list"]);
    first.env("MAOS_TEST_SWEEP_MS", "100");
    let out = maos_tests::run_with_timeout(first, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));

    let (reached, go) = (Gate::default(), Gate::default());
    let api: FakeApi = model_holding(
        vec![Step::Patch(codex::patch_adding("note.txt", "noted"))],
        Some(Hold {
            after: 1,
            reached: reached.clone(),
            go: go.clone(),
        }),
    );
    configure(&env, &api);
    codex::install(&env);
    const PROMPT: &str = "MAOS-CROSS-CODEX: add note.txt";
    let run = Client::start(
        exec_command(&env, &codex_bin, PROMPT),
        codex::RUN_DEADLINE,
        "codex exec",
    );
    wait_until(
        codex::RUN_DEADLINE,
        "Codex asks its model again after its patch",
        || reached.is_open(),
    );

    // Mid-run: the window is a running agent holding its file, and stays so while the sweep
    // runs many times (every 100 ms) over one second.
    let window = window_of(&env, PROMPT);
    let alive_since = Instant::now();
    while alive_since.elapsed() < Duration::from_secs(1) {
        let agent = ps_agent(&env, &window);
        assert_eq!(
            agent["state"], "running",
            "a live window was ended: {agent}"
        );
        let locks = env.maos_json(&["lock", "list"]);
        assert!(
            matches!(&locks["locks"].as_array().expect("locks")[..],
                [l] if l["path"] == "note.txt" && l["holder"] == window.as_str()),
            "{locks}"
        );
    }
    go.open();
    let out = run.finish();
    assert!(out.status.success(), "codex failed: {out:?}");
    let exited = Instant::now();
    // The model's side and the disk: the patch went through.
    let got = received(&api);
    assert!(
        matches!(&got[..], [(_, text)] if text.contains("Success. Updated the following files:\nA note.txt")),
        "{got:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("note.txt")).expect("note.txt"),
        "noted\n"
    );

    // maos's view: the window ended because its process is gone; nothing is held; the
    // session, whose only window it was, completed.
    wait_until(
        Duration::from_secs(20),
        "maos ends the exited Codex window",
        || ps_agent(&env, &window)["state"] == "ended",
    );
    eprintln!(
        "the exited window was ended {:?} after codex exited",
        exited.elapsed()
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    let ended = env.events(&["--type", "agent_ended"]);
    let mine: Vec<&Value> = ended
        .iter()
        .filter(|e| e["agent_id"] == window.as_str())
        .collect();
    let [end] = &mine[..] else {
        panic!("not one agent_ended of {window}: {ended:#?}")
    };
    let why = end["data"]["reason"].as_str().unwrap_or_default();
    assert!(
        why.contains("CLI process") && why.contains("is gone"),
        "{end}"
    );
    let sid = prompt_event(&env, PROMPT)["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    wait_until(Duration::from_secs(10), "the session completes", || {
        let all = env.maos_json(&["ps", "--all"]);
        all.as_array()
            .into_iter()
            .flatten()
            .any(|s| s["id"] == sid.as_str() && s["state"] == "completed")
    });
    eprintln!("the scenario took {:?}", started.elapsed());
}
