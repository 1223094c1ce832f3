//! Conformance with the real Claude Code: the pinned npm release (installed once into a cache
//! outside the repository by `tests/conformance/install.sh`) runs offline against a scripted
//! fake Anthropic Messages API on 127.0.0.1, with maos's hooks installed by `maos install-hooks`
//! and the real maosd behind them. Each scenario checks three sides: what the model received
//! (the recorded requests: tool results, injected context), the files on disk, and maos's own
//! view (`events`, `lock list`, `ps`).
//!
//! The fake model plays a script: for each request it picks the answer by the conversation
//! (the main thread's first user message holds the `-p` prompt, a subagent's holds its `Agent`
//! call's prompt) and by the tool results the request already carries; an answer may hold
//! several tool calls (parallel calls), each with its own id. A script may wait, on a
//! condition and never on the clock: for a [`Gate`] the test opens ("the daemon was killed"),
//! or until another conversation's tool result was seen, which is how two subagents' writes
//! are put in a known order.
//!
//! What Claude Code 2.1.328's model receives for each documented way of denying a
//! `PreToolUse` (tried with the real binary: a hook printing each form for a `Write`, reason
//! `R`; the file was never written in any of them):
//! - `hookSpecificOutput.permissionDecision: "deny"` + `permissionDecisionReason: R` (what
//!   maos prints): a tool_result with `is_error: true` and content
//!   `PreToolUse:Write hook error: R`.
//! - The same, plus a top-level `systemMessage`: the same tool_result; the `systemMessage`
//!   reaches neither the model nor `-p`'s stdout or stderr.
//! - The same, plus `hookSpecificOutput.additionalContext: C`: the same tool_result, then a
//!   separate `role: system` message `PreToolUse:Write hook additional context: C`.
//! - Exit 2 with R on stderr: `PreToolUse:Write hook error: [<the hook's command line>]: R\n`.
//! - The legacy `decision: "block"`, `reason: R`: `PreToolUse:Write hook error: R`.
//! - `permissionDecision: "deny"` printed with exit 2: `PreToolUse:Write hook error: R`.
//! - `permissionDecision: "ask"` + R: in `-p` the content is R alone, but "ask" is no denial:
//!   it asks, and in an interactive window the user may let the write through, so maos never
//!   uses it.
//!
//! So no deny form reaches the model without the "hook error" prefix; maos keeps
//! `permissionDecision: "deny"` (the cleanest text, no command line, and the form Codex and
//! docs/hooks.md share), and [`a_write_to_a_file_another_agent_holds_is_denied_to_the_model`]
//! asserts the exact text: the prefix, then maos's reason as recorded on its `tool_denied`
//! event.
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set). Runs of the client are serialized (one [`Run`] at a time); each is bounded by
//! `maos_tests::claude::RUN_DEADLINE`.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use maos_tests::claude::{
    FakeModel, Run, WRITE_DENIED, agent, claude, content_text, result_text, run_claude, say,
    tool_result, write,
};
use maos_tests::conformance::runnable;
use maos_tests::conformance::{
    Gate, one_event, prompt_event, ps_agent, ps_agents, short, window_agent, window_of,
};
use maos_tests::{Env, Value, json, wait_until};

/// The script of both first scenarios: the first request of the main thread gets a `Write`
/// of `path` (tool call `toolu_write`), the request that carries its result gets text and the
/// turn ends. Any other request (none is expected) gets text too, so that nothing loops.
fn write_once(path: &Path, content: &str) -> FakeModel {
    let (path, content) = (path.to_path_buf(), content.to_string());
    FakeModel::start(move |req| {
        if req.has("toolu_write") {
            say("Done.")
        } else if req.of("MAOS-CONFORMANCE") {
            vec![write("toolu_write", &path, &content)]
        } else {
            say("ok")
        }
    })
}

/// An environment with maos's Claude Code hooks installed in its project, and the client;
/// `None` (after saying why) where the client cannot run here.
fn setup() -> Option<(Env, PathBuf)> {
    let claude = runnable("Claude Code", claude())?;
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    let settings = std::fs::read_to_string(env.project.join(".claude/settings.json"))
        .expect("install-hooks wrote .claude/settings.json");
    assert!(settings.contains("maos hook"), "{settings}");
    Some((env, claude))
}

/// The model's one `Write` is allowed: the file is on disk, the model got the tool's success,
/// and maos recorded the write for the window's agent, which took the file's lock for it.
#[test]
fn an_allowed_write_is_recorded_and_locked_for_the_window() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("hello.txt");
    let model = write_once(&file, "hello from the model\n");
    let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: write hello.txt");
    assert!(out.status.success(), "claude failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Done.");

    // The model's side: two streamed requests to the one endpoint, the second carrying the
    // tool's success.
    let requests = model.messages_requests();
    assert_eq!(
        model.targets(),
        ["/v1/messages?beta=true"; 2],
        "{requests:#?}"
    );
    assert!(
        requests.iter().all(|r| r["stream"] == true),
        "{requests:#?}"
    );
    let result = tool_result(&requests, "toolu_write");
    assert_ne!(result["is_error"], true, "{result}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(&file).expect("the model's file is on disk"),
        "hello from the model\n"
    );
    // maos's view: the window is one agent, the write is its own, it took the lock before
    // writing, and let go of it when its turn stopped.
    let window = window_agent(&env);
    let write = one_event(&env, "file_modified", "hello.txt");
    assert_eq!(write["data"]["tool"], "Write", "{write}");
    assert_eq!(write["agent_id"], window.as_str(), "{write}");
    let acquired = env.events(&["--type", "lock_acquired"]);
    let [lock] = &acquired[..] else {
        panic!("not one lock_acquired: {acquired:?}")
    };
    assert_eq!(lock["agent_id"], window.as_str(), "{lock}");
    assert_eq!(lock["data"]["path"], "hello.txt", "{lock}");
    assert_eq!(lock["data"]["mode"], "write", "{lock}");
    assert!(
        lock["seq"].as_u64() < write["seq"].as_u64(),
        "{lock} {write}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// The file is locked by another agent: maos's hook denies the `Write`, the model receives the
/// denial naming the holder (exactly Claude Code's prefix, then maos's reason), and the file
/// is not written.
#[test]
fn a_write_to_a_file_another_agent_holds_is_denied_to_the_model() {
    let Some((env, claude)) = setup() else { return };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let file = env.project.join("held.txt");
    let model = write_once(&file, "clobbered\n");
    let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: write held.txt");
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: an error result carrying maos's reason, which names the holder.
    let requests = model.messages_requests();
    assert_eq!(
        model.targets(),
        ["/v1/messages?beta=true"; 2],
        "{requests:#?}"
    );
    let result = tool_result(&requests, "toolu_write");
    let text = result_text(&result);
    eprintln!("the model received: {result}");
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        text.starts_with(&format!("{WRITE_DENIED}maos: held.txt")),
        "{text}"
    );
    // The holder by role and short id, as `maos ps` shows it.
    let named = format!("holder ({})", short(&holder));
    assert!(
        text.contains(&named),
        "the holder {named} is not named: {text}"
    );
    // The disk.
    assert!(!file.exists(), "the denied write reached the disk");
    // maos's view: the lock is still the holder's alone, and the window's denial is recorded
    // with exactly the reason the model read.
    let locks = env.maos_json(&["lock", "list"]);
    let locks = locks["locks"].as_array().expect("locks");
    assert!(
        matches!(&locks[..], [l] if l["path"] == "held.txt" && l["holder"] == holder.as_str()),
        "{locks:?}"
    );
    let window = window_agent(&env);
    let denied = one_event(&env, "tool_denied", "held.txt");
    assert_eq!(denied["agent_id"], window.as_str(), "{denied}");
    let reason = denied["data"]["reason"].as_str().expect("reason");
    assert_eq!(text, format!("{WRITE_DENIED}{reason}"));
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
}

/// One of the two racing subagents: its `Agent` call, its prompt (its conversation's marker)
/// and its `Write`.
struct Writer {
    agent_call: &'static str,
    description: &'static str,
    marker: &'static str,
    write_call: &'static str,
    content: &'static str,
}

const WRITER_A: Writer = Writer {
    agent_call: "toolu_agent_a",
    description: "writer A",
    marker: "MAOS-RACE-A",
    write_call: "toolu_write_a",
    content: "from A\n",
};
const WRITER_B: Writer = Writer {
    agent_call: "toolu_agent_b",
    description: "writer B",
    marker: "MAOS-RACE-B",
    write_call: "toolu_write_b",
    content: "from B\n",
};

/// Two subagents, started by one answer of the main thread (two `Agent` calls: parallel), each
/// `Write` the same file. A writes first; B writes once A's write was answered, and A does not
/// finish (keeping its lock) until B's write was answered. Whichever wins, exactly one write
/// goes through: the loser is told who holds the file, and maos records each side's part on
/// its own subagent, both children of the window.
fn race(background: bool) {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("race.txt");
    let target = file.clone();
    let model = FakeModel::start(move |req| {
        if req.of(WRITER_A.marker) {
            if !req.has(WRITER_A.write_call) {
                return vec![write(WRITER_A.write_call, &target, WRITER_A.content)];
            }
            req.after_result(WRITER_B.write_call);
            say("A done.")
        } else if req.of(WRITER_B.marker) {
            if !req.has(WRITER_B.write_call) {
                req.after_result(WRITER_A.write_call);
                return vec![write(WRITER_B.write_call, &target, WRITER_B.content)];
            }
            say("B done.")
        } else if req.of("MAOS-CONFORMANCE") && !req.has(WRITER_A.agent_call) {
            let mut blocks = say("Two writers, in parallel.");
            for w in [&WRITER_A, &WRITER_B] {
                let prompt = format!("{}: write race.txt", w.marker);
                blocks.push(agent(w.agent_call, w.description, &prompt, background));
            }
            blocks
        } else {
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: two writers race on race.txt";
    let out = run_claude(&env, &claude, &model, prompt);
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: each subagent got its own write's result, one a success, the other
    // maos's denial.
    let requests = model.messages_requests();
    let a = tool_result(&requests, WRITER_A.write_call);
    let b = tool_result(&requests, WRITER_B.write_call);
    let (winner, loser, lost) = match (a["is_error"] == true, b["is_error"] == true) {
        (false, true) => (&WRITER_A, &WRITER_B, b),
        (true, false) => (&WRITER_B, &WRITER_A, a),
        _ => panic!("not exactly one write denied:\n{a}\n{b}"),
    };
    for w in [&WRITER_A, &WRITER_B] {
        let launched = result_text(&tool_result(&requests, w.agent_call));
        assert_eq!(
            launched.starts_with("Async agent launched"),
            background,
            "{launched}"
        );
    }
    // The disk: the winner's content.
    assert_eq!(
        std::fs::read_to_string(&file).expect("race.txt"),
        winner.content
    );
    // maos's view: two subagents under the window; the lock and the write are the winner's,
    // the denial (with the text the model read, naming the winner) the loser's.
    let window = window_agent(&env);
    let children: Vec<Value> = ps_agents(&env)
        .into_iter()
        .filter(|a| a["parent"] == window.as_str())
        .collect();
    let modified = one_event(&env, "file_modified", "race.txt");
    let locked = one_event(&env, "lock_acquired", "race.txt");
    let denied = one_event(&env, "tool_denied", "race.txt");
    let won_by = modified["agent_id"].as_str().expect("agent").to_string();
    let lost_by = denied["agent_id"].as_str().expect("agent").to_string();
    assert_ne!(won_by, lost_by);
    assert_eq!(locked["agent_id"], won_by.as_str(), "{locked}");
    assert!(locked["seq"].as_u64() < modified["seq"].as_u64());
    assert_eq!(denied["data"]["why"], "lock_conflict", "{denied}");
    let mut child_ids: Vec<&str> = children.iter().filter_map(|c| c["id"].as_str()).collect();
    child_ids.sort_unstable();
    let mut racers = [won_by.as_str(), lost_by.as_str()];
    racers.sort_unstable();
    assert_eq!(child_ids, racers, "{children:#?}");
    for (id, w) in [(&won_by, winner), (&lost_by, loser)] {
        let task = ps_agent(&env, id)["task"]
            .as_str()
            .unwrap_or("")
            .to_string();
        assert!(
            task.contains(w.description),
            "{id} is not {}: {task}",
            w.marker
        );
    }
    let reason = denied["data"]["reason"].as_str().expect("reason");
    assert_eq!(result_text(&lost), format!("{WRITE_DENIED}{reason}"));
    assert!(
        reason.contains(short(&won_by)),
        "the denial does not name the holder {won_by}: {reason}"
    );
    if !background {
        // A foreground subagent's result comes back in its `Agent` call's PostToolUse.
        for (id, w) in [(&won_by, winner), (&lost_by, loser)] {
            let results = env.events(&["--type", "subagent_result"]);
            assert!(
                results.iter().any(|r| r["agent_id"] == id.as_str()
                    && r["data"]["tool_use_id"] == w.agent_call
                    && r["data"]["status"] == "completed"),
                "no completed result of {id}: {results:#?}"
            );
        }
    }
    // Every subagent finished: no lock is left.
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// Two background subagents (Claude Code's default) race on one file.
#[test]
fn two_background_subagents_racing_on_one_file_one_wins() {
    race(true);
}

/// Two foreground subagents (`run_in_background: false`) race on one file.
#[test]
fn two_foreground_subagents_racing_on_one_file_one_wins() {
    race(false);
}

/// The value of the first `<tag>…</tag>` in `text`.
fn tag<'t>(text: &'t str, tag: &str) -> Option<&'t str> {
    let open = format!("<{tag}>");
    let start = text.find(&open)? + open.len();
    let len = text[start..].find(&format!("</{tag}>"))?;
    Some(&text[start..start + len])
}

/// The `<task-notification>` block the main thread's model received for the subagent started
/// by the tool call `call`.
fn task_notification(requests: &[Value], call: &str) -> String {
    let wanted = format!("<tool-use-id>{call}</tool-use-id>");
    requests
        .iter()
        .filter_map(|r| r["messages"].as_array())
        .flatten()
        .filter_map(|m| m["content"].as_array())
        .flatten()
        .filter_map(|c| c["text"].as_str())
        .find_map(|t| {
            let start = t.find("<task-notification>")?;
            let block = &t[start..];
            let end = block.find("</task-notification>")?;
            let block = &block[..end];
            block.contains(&wanted).then(|| block.to_string())
        })
        .unwrap_or_else(|| panic!("no task notification of {call} reached the model"))
}

/// A background subagent's result comes back to Claude Code's main thread as a
/// `<task-notification>` prompt (UserPromptSubmit) after the main thread's turn ended. maos
/// records it as that subagent's `subagent_result` (its status, tokens, tool uses and
/// duration, as the notification the model read says), not as a prompt of the window.
///
/// Depends on the daemon reading `<task-notification>` prompts (issue 14, the lead's part).
#[test]
fn a_background_subagents_result_is_recorded_as_its_own() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("bg.txt");
    let target = file.clone();
    let model = FakeModel::start(move |req| {
        if req.of("MAOS-BG-ONE") {
            if !req.has("toolu_write_bg") {
                return vec![write("toolu_write_bg", &target, "from the background\n")];
            }
            say("Written.")
        } else if req.of("MAOS-CONFORMANCE") && !req.has("toolu_agent_bg") {
            let prompt = "MAOS-BG-ONE: write bg.txt";
            vec![agent("toolu_agent_bg", "background writer", prompt, true)]
        } else {
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: one background writer";
    let out = run_claude(&env, &claude, &model, prompt);
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: the subagent ran in the background and its notification came back.
    let requests = model.messages_requests();
    let launched = result_text(&tool_result(&requests, "toolu_agent_bg"));
    assert!(launched.starts_with("Async agent launched"), "{launched}");
    let note = task_notification(&requests, "toolu_agent_bg");
    let number = |name: &str| -> u64 {
        tag(&note, name)
            .and_then(|n| n.parse().ok())
            .unwrap_or_else(|| panic!("no <{name}> in {note}"))
    };
    let status = tag(&note, "status").expect("<status>");
    let (tokens, tool_uses, duration) = (
        number("subagent_tokens"),
        number("tool_uses"),
        number("duration_ms"),
    );
    assert_eq!(tool_uses, 1, "{note}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(&file).expect("bg.txt"),
        "from the background\n"
    );
    // maos's view: the subagent (the writer of bg.txt, a child of the window) has its result,
    // with the notification's figures; the notification is no prompt of the window.
    let window = window_of(&env, prompt);
    let sub = one_event(&env, "file_modified", "bg.txt")["agent_id"]
        .as_str()
        .expect("agent")
        .to_string();
    assert_eq!(ps_agent(&env, &sub)["parent"], window.as_str());
    let results = env.events(&["--type", "subagent_result"]);
    let finished: Vec<&Value> = results
        .iter()
        .filter(|r| r["data"]["status"] == status)
        .collect();
    let [result] = finished[..] else {
        panic!("not one subagent_result with status {status}: {results:#?}")
    };
    assert_eq!(result["agent_id"], sub.as_str(), "{result}");
    let data = &result["data"];
    assert_eq!(data["tool_use_id"], "toolu_agent_bg", "{result}");
    assert_eq!(data["total_tokens"], tokens, "{result}");
    assert_eq!(data["total_tool_use_count"], tool_uses, "{result}");
    assert_eq!(data["total_duration_ms"], duration, "{result}");
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        !prompts.iter().any(|p| p["data"]["first_line"]
            .as_str()
            .is_some_and(|l| l.starts_with("<task-notification>"))),
        "a task notification was recorded as a prompt: {prompts:#?}"
    );
}

/// `maos pause SESSION --reason TEXT` while a window works: its next `Write` is denied and the
/// model reads the reason; after `maos resume` its next `Write` goes through. The fake model
/// waits for the test at each step, so the pause and the resume land between two tool calls.
#[test]
fn a_pause_reason_reaches_the_model_and_resume_lets_writes_through() {
    let Some((env, claude)) = setup() else { return };
    const REASON: &str = "MAOS-REASON release freeze until the tag is cut";
    let file = env.project.join("paused.txt");
    let (paused, resumed) = (Gate::default(), Gate::default());
    let (p, r, target) = (paused.clone(), resumed.clone(), file.clone());
    let model = FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            say("ok")
        } else if !req.has("toolu_write_1") {
            p.wait();
            vec![write("toolu_write_1", &target, "during the pause\n")]
        } else if !req.has("toolu_write_2") {
            r.wait();
            vec![write("toolu_write_2", &target, "after the resume\n")]
        } else {
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: write paused.txt";
    let run = Run::start(&env, &claude, &model, prompt);
    model.wait_request("MAOS-CONFORMANCE", "the window's first request");
    let sid = prompt_event(&env, prompt)["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    env.maos_json(&["pause", &sid, "--reason", REASON]);
    paused.open();
    model.wait_result("toolu_write_1", "the write during the pause was answered");
    assert!(!file.exists(), "a write during the pause reached the disk");
    env.maos_json(&["resume", &sid]);
    resumed.open();
    let out = run.finish();
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: the first write denied with the reason, the second one done.
    let requests = model.messages_requests();
    let denied = tool_result(&requests, "toolu_write_1");
    let text = result_text(&denied);
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(text.starts_with(WRITE_DENIED), "{text}");
    assert!(text.contains(REASON), "the pause's reason is not in {text}");
    assert!(text.contains("maos resume"), "{text}");
    let done = tool_result(&requests, "toolu_write_2");
    assert_ne!(done["is_error"], true, "{done}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(&file).expect("paused.txt"),
        "after the resume\n"
    );
    // maos's view: the denial (as the model read it) and then the write, both the window's.
    let window = window_of(&env, prompt);
    let refusal = one_event(&env, "tool_denied", "paused.txt");
    assert_eq!(refusal["agent_id"], window.as_str(), "{refusal}");
    assert_eq!(refusal["data"]["why"], "paused", "{refusal}");
    let reason = refusal["data"]["reason"].as_str().expect("reason");
    assert_eq!(text, format!("{WRITE_DENIED}{reason}"));
    let write = one_event(&env, "file_modified", "paused.txt");
    assert_eq!(write["agent_id"], window.as_str(), "{write}");
    assert!(refusal["seq"].as_u64() < write["seq"].as_u64());
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// A window opened while the project's active session is paused (`maos pause --reason`,
/// before the run) joins it, and its `Write` is denied with the reason; after `maos resume` a
/// new window's `Write` goes through.
#[test]
fn a_window_opened_in_a_paused_session_is_told_why_and_writes_after_resume() {
    let Some((env, claude)) = setup() else { return };
    const REASON: &str = "MAOS-REASON the schema is under review";
    let sid = env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["pause", "--reason", REASON]);
    let file = env.project.join("later.txt");
    let first = "MAOS-CONFORMANCE: write later.txt while paused";
    let model = write_once(&file, "too early\n");
    let out = run_claude(&env, &claude, &model, first);
    assert!(out.status.success(), "claude failed: {out:?}");
    let denied = tool_result(&model.messages_requests(), "toolu_write");
    let text = result_text(&denied);
    assert_eq!(denied["is_error"], true, "{denied}");
    assert!(text.starts_with(WRITE_DENIED), "{text}");
    assert!(text.contains(REASON), "the pause's reason is not in {text}");
    assert!(!file.exists(), "a write during the pause reached the disk");

    env.maos_json(&["resume"]);
    let second = "MAOS-CONFORMANCE: write later.txt after the resume";
    let model = write_once(&file, "in time\n");
    let out = run_claude(&env, &claude, &model, second);
    assert!(out.status.success(), "claude failed: {out:?}");
    let done = tool_result(&model.messages_requests(), "toolu_write");
    assert_ne!(done["is_error"], true, "{done}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("later.txt"),
        "in time\n"
    );
    // maos's view: both windows worked in the paused (then resumed) session; the denial is the
    // first one's, the write the second one's.
    for prompt in [first, second] {
        let event = prompt_event(&env, prompt);
        assert_eq!(event["session_id"], sid.as_str(), "{event}");
    }
    let refusal = one_event(&env, "tool_denied", "later.txt");
    assert_eq!(refusal["agent_id"], window_of(&env, first).as_str());
    assert_eq!(refusal["data"]["why"], "paused", "{refusal}");
    let write = one_event(&env, "file_modified", "later.txt");
    assert_eq!(write["agent_id"], window_of(&env, second).as_str());
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// `kill -9` of maosd while a window works: the next hook call starts the daemon again
/// (autostart), the `Write` is locked and recorded for the same window, and every event
/// recorded before the kill is still there.
#[test]
fn a_daemon_killed_mid_run_is_restarted_by_the_hook_and_loses_nothing() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("after-kill.txt");
    let killed = Gate::default();
    let (k, target) = (killed.clone(), file.clone());
    let model = FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            say("ok")
        } else if !req.has("toolu_write") {
            k.wait();
            vec![write("toolu_write", &target, "written after the kill\n")]
        } else {
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: write after-kill.txt";
    let run = Run::start(&env, &claude, &model, prompt);
    model.wait_request("MAOS-CONFORMANCE", "the window's first request");
    let before = env.events(&[]);
    let window = window_of(&env, prompt);
    let old = env.kill9();
    killed.open();
    let out = run.finish();
    assert!(out.status.success(), "claude failed: {out:?}");

    // The model's side: the write went through.
    let requests = model.messages_requests();
    let result = tool_result(&requests, "toolu_write");
    assert_ne!(result["is_error"], true, "{result}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(&file).expect("after-kill.txt"),
        "written after the kill\n"
    );
    // maos's view: a new daemon; the window's write locked and recorded on the same agent;
    // the events from before the kill unchanged, in their order.
    assert_ne!(env.daemon_pid(), old, "the killed daemon answers?");
    let after = env.events(&[]);
    let key = |e: &Value| (e["seq"].clone(), e["type"].clone(), e["agent_id"].clone());
    let kept: Vec<_> = after.iter().take(before.len()).map(key).collect();
    let had: Vec<_> = before.iter().map(key).collect();
    assert_eq!(kept, had, "events recorded before the kill changed");
    let locked = one_event(&env, "lock_acquired", "after-kill.txt");
    let write = one_event(&env, "file_modified", "after-kill.txt");
    assert_eq!(locked["agent_id"], window.as_str(), "{after:#?}");
    assert_eq!(write["agent_id"], window.as_str(), "{after:#?}");
    assert!(locked["seq"].as_u64() < write["seq"].as_u64());
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// In a project with history (an earlier window's write, a decision noted), a new window's
/// first request to the model carries maos's briefing: SessionStart's `additionalContext`,
/// which Claude Code sends as a separate system message.
#[test]
fn the_briefing_reaches_the_models_first_request() {
    let Some((env, claude)) = setup() else { return };
    const DECISION: &str = "MAOS-DECISION keep the v1 file format";
    let first = "MAOS-CONFORMANCE: write notes.txt";
    let model = write_once(&env.project.join("notes.txt"), "notes\n");
    let out = run_claude(&env, &claude, &model, first);
    assert!(out.status.success(), "claude failed: {out:?}");
    let sid = prompt_event(&env, first)["session_id"]
        .as_str()
        .expect("session id")
        .to_string();
    env.maos_json(&["note", "decision", DECISION, "--session", &sid]);

    let model = FakeModel::start(|_| say("Nothing to do."));
    let out = run_claude(&env, &claude, &model, "MAOS-AGAIN: what is left?");
    assert!(out.status.success(), "claude failed: {out:?}");
    let requests = model.conversation("MAOS-AGAIN");
    let first_request = requests.first().expect("a request of the new window");
    let context: Vec<String> = first_request["messages"]
        .as_array()
        .expect("messages")
        .iter()
        .filter(|m| m["role"] == "system")
        .filter_map(|m| {
            let text = content_text(&m["content"]);
            let context = text.strip_prefix("SessionStart hook additional context: ")?;
            Some(context.to_string())
        })
        .collect();
    let [briefing] = &context[..] else {
        panic!("not one briefing in the first request: {first_request:#}")
    };
    eprintln!("the model received: {briefing}");
    // maos's briefing: its heading (maybe after a line saying which session it is about), the
    // decision as one of its items, the earlier window's prompt.
    assert!(
        briefing
            .lines()
            .any(|l| l.starts_with("maos: briefing on session")),
        "{briefing}"
    );
    assert!(
        briefing
            .lines()
            .any(|l| l.starts_with(&format!("- {DECISION}"))),
        "{briefing}"
    );
    assert!(briefing.contains(first), "{briefing}");
}

/// A window that dies without SessionEnd (its whole process group killed while it holds a
/// lock) is noticed by the daemon's sweep: its agent ends and its lock is released.
///
/// Depends on the daemon watching each window's CLI process (issue 14, the lead's part).
#[test]
fn a_window_killed_without_session_end_is_ended_by_maos() {
    let Some((env, claude)) = setup() else { return };
    let file = env.project.join("orphan.txt");
    let target = file.clone();
    let never = Gate::default();
    let n = never.clone();
    let model = FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            say("ok")
        } else if !req.has("toolu_write") {
            vec![write("toolu_write", &target, "left behind\n")]
        } else {
            // The window hangs here (until the test is over) holding orphan.txt's lock.
            n.wait();
            say("Done.")
        }
    });
    let prompt = "MAOS-CONFORMANCE: write orphan.txt, then hang";
    let run = Run::start(&env, &claude, &model, prompt);
    model.wait_result("toolu_write", "the window's write was answered");
    let window = window_of(&env, prompt);
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "orphan.txt" && l["holder"] == window.as_str()),
        "{locks}"
    );
    run.kill();
    let killed = Instant::now();
    // The sweep runs every 10 s; allow it a few rounds.
    wait_until(
        Duration::from_secs(40),
        "maos ends the killed window",
        || {
            let locks = env.maos_json(&["lock", "list"]);
            ps_agent(&env, &window)["state"] == "ended"
                && !locks["locks"]
                    .as_array()
                    .expect("locks")
                    .iter()
                    .any(|l| l["holder"] == window.as_str())
        },
    );
    eprintln!("the killed window was ended after {:?}", killed.elapsed());
    never.open();
    assert_eq!(
        std::fs::read_to_string(&file).expect("orphan.txt"),
        "left behind\n"
    );
}

/// What Claude Code's model receives for each documented way a `PreToolUse` hook can refuse a
/// `Write` (the module's documentation lists them): a stand-in hook prints each form, and the
/// file is never written. It pins the facts maos's choice of output rests on; if a new release
/// lets one form reach the model without "hook error", this fails and the choice is due again.
#[test]
fn each_deny_form_reaches_the_model_as_documented() {
    let Some((env, claude)) = setup() else { return };
    const R: &str = "maos: f.txt is being written by another agent. Do not edit it now.";
    let deny = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "deny", "permissionDecisionReason": R}});
    let mut with_system = deny.clone();
    with_system["systemMessage"] = json!(format!("SYSTEM {R}"));
    let mut with_context = deny.clone();
    with_context["hookSpecificOutput"]["additionalContext"] = json!(format!("CONTEXT {R}"));
    let block = json!({"decision": "block", "reason": R});
    let ask = json!({"hookSpecificOutput": {"hookEventName": "PreToolUse",
        "permissionDecision": "ask", "permissionDecisionReason": R}});
    let hook = env.root().join("deny-hook");
    let denied = format!("{WRITE_DENIED}{R}");
    // (form, what the hook prints on stdout, its exit code, the tool result's text).
    let forms = [
        (
            "permissionDecision deny",
            deny.to_string(),
            0,
            denied.clone(),
        ),
        (
            "deny + systemMessage",
            with_system.to_string(),
            0,
            denied.clone(),
        ),
        (
            "deny + additionalContext",
            with_context.to_string(),
            0,
            denied.clone(),
        ),
        ("deny, exit 2", deny.to_string(), 2, denied.clone()),
        ("decision block", block.to_string(), 0, denied.clone()),
        ("ask", ask.to_string(), 0, R.to_string()),
        (
            "exit 2, stderr",
            String::new(),
            2,
            format!("{WRITE_DENIED}[{}]: {R}\n", hook.display()),
        ),
    ];
    let settings = json!({"hooks": {"PreToolUse": [{"matcher": "Write",
        "hooks": [{"type": "command", "command": hook}]}]}});
    std::fs::write(
        env.project.join(".claude/settings.json"),
        settings.to_string(),
    )
    .expect("write the stand-in hook's settings");
    let file = env.project.join("f.txt");
    for (form, stdout, exit, expected) in forms {
        let stderr = if stdout.is_empty() { R } else { "" };
        let script = format!(
            "#!/bin/sh\ncat >/dev/null\nprintf '%s' '{stdout}'\nprintf '%s\\n' '{stderr}' >&2\nexit {exit}\n"
        );
        std::fs::write(&hook, script).expect("write the stand-in hook");
        let mode = std::os::unix::fs::PermissionsExt::from_mode(0o755);
        std::fs::set_permissions(&hook, mode).expect("chmod the stand-in hook");
        let model = write_once(&file, "x\n");
        let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: write f.txt");
        assert!(out.status.success(), "{form}: claude failed: {out:?}");
        let requests = model.messages_requests();
        let result = tool_result(&requests, "toolu_write");
        assert_eq!(result["is_error"], true, "{form}: {result}");
        assert_eq!(result_text(&result), expected, "{form}");
        assert!(!file.exists(), "{form}: the write went through");
        let all = serde_json::to_string(&requests).expect("requests as JSON");
        assert!(
            !all.contains("SYSTEM maos"),
            "{form}: a systemMessage reached the model"
        );
        let context = format!("PreToolUse:Write hook additional context: CONTEXT {R}");
        assert_eq!(
            all.contains(&context),
            form == "deny + additionalContext",
            "{form}: {all}"
        );
    }
}
