//! Conformance with the real GitHub Copilot CLI: the pinned npm release (installed once into a
//! cache outside the repository by `tests/conformance/install.sh`) runs offline against a
//! scripted fake OpenAI-compatible API on 127.0.0.1 (its bring-your-own-key provider,
//! `COPILOT_OFFLINE=true`), with maos's hooks installed by `maos install-hooks --copilot` and
//! the real maosd behind them. Each scenario checks three sides: what the model received back
//! (the `role: tool` messages of the recorded requests), the files on disk, and maos's own
//! view (`events`, `lock list`, `ps`).
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set).
//!
//! Observed of Copilot 1.0.102 driven this way (`copilot -p PROMPT --allow-all-tools`,
//! `COPILOT_PROVIDER_BASE_URL`, `COPILOT_MODEL=gpt-4.1`):
//! - Hooks of one run, in order: sessionStart (`source: new`, `initialPrompt`),
//!   userPromptSubmitted, preToolUse / postToolUse around each tool (a `permissionRequest`
//!   between them), agentStop, sessionEnd (`reason: complete`). A `task` call adds
//!   subagentStart, the subagent's own userPromptSubmitted, tool hooks and agentStop (its
//!   `sessionId` the subagent's id, `parentAgentId` the window's), then subagentStop.
//! - A repository's `.github/hooks/*.json` run only in a folder trusted in
//!   `~/.copilot/config.json` (`trustedFolders`), or for one run with `--trust-folder`,
//!   `COPILOT_ALLOW_ALL=true` or `GITHUB_COPILOT_PROMPT_MODE_REPO_HOOKS=true`; elsewhere the
//!   run goes on without them, silently.
//! - A deny reaches the model as `Denied by preToolUse hook: <reason>`, with
//!   `--allow-all-tools` too. Any non-zero exit of a preToolUse hook denies (`hook errored`);
//!   a timeout lets the tool run.
//! - sessionStart's `additionalContext` is a user message before the prompt.
//! - A run takes 1 to 3 s.

use std::time::Duration;

use maos_tests::conformance::{
    Answer, Client, FakeApi, Gate, agent_of, hold, ps_agent, ps_agents, run_within, runnable,
};
use maos_tests::copilot::{
    CUE, Call, Copilot, RUN_DEADLINE, SUB_CUE, abs, config_file, copilot, copilot_command,
    fake_model, hooks_file, model_requests, run_copilot, tool_messages, tool_results, turn,
    user_text,
};
use maos_tests::{Env, Value, json, wait_until};

/// The pinned client; `None` (after saying why) where it cannot run here.
fn client() -> Option<Copilot> {
    runnable("GitHub Copilot CLI", copilot().map(|c| c.bin))?;
    copilot().ok()
}

/// The client, and an environment whose project has maos's Copilot hooks installed with
/// `--yes`; `None` (after saying why) where the client cannot run here.
fn setup() -> Option<(Env, Copilot)> {
    let copilot = client()?;
    let env = Env::new();
    env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    Some((env, copilot))
}

/// A file another agent holds: the model's `edit` of it, and two shell commands that write it
/// (`sed -i`, a `>` redirection), are each denied; the model receives maos's reason naming the
/// file and the holder; the file keeps its bytes and the lock stays the holder's. A free file
/// the model creates next is written, locked for the window first and recorded. The window is
/// its own agent, labelled by its prompt, ended truthfully when the run is over.
#[test]
fn writes_and_shell_writes_to_a_held_file_are_denied_naming_the_holder() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    let holder = hold(&env, "held.txt");
    let file = env.project.join("held.txt");
    std::fs::write(&file, "original\n").expect("write held.txt");
    let api = fake_model(
        vec![
            Call {
                name: "edit",
                args: json!({"path": abs(&env, "held.txt"), "old_str": "original",
                             "new_str": "clobbered"}),
            },
            Call {
                name: "bash",
                args: json!({"command": "sed -i s/original/clobbered/ held.txt",
                             "description": "edit held.txt"}),
            },
            Call {
                name: "bash",
                args: json!({"command": "echo clobbered > held.txt",
                             "description": "overwrite held.txt"}),
            },
            Call {
                name: "create",
                args: json!({"path": abs(&env, "free.txt"), "file_text": "from copilot\n"}),
            },
        ],
        Vec::new(),
    );
    let prompt = format!("{CUE}: change held.txt");
    let out = run_copilot(&env, &copilot, &api, &prompt);
    assert!(out.status.success(), "copilot failed: {out:?}");

    // The model's side: three denials with maos's reason naming the holder, then a success.
    let results = tool_results(&api);
    let [edit, sed, redirect, create] = &results[..] else {
        panic!("not four tool results: {results:?}")
    };
    let named = format!("holder ({})", holder.get(..12).unwrap_or(&holder));
    for result in [edit, sed, redirect] {
        eprintln!("the model received: {result}");
        assert!(
            result.starts_with("Denied by preToolUse hook: maos: held.txt"),
            "{result}"
        );
        assert!(result.contains(&named), "the holder is not named: {result}");
    }
    assert!(!create.contains("Denied"), "{create}");
    // The disk.
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "original\n");
    assert_eq!(
        std::fs::read_to_string(env.project.join("free.txt")).expect("created"),
        "from copilot\n"
    );
    // maos's view: the holder keeps its lock; the window's denials and its write.
    let locks = env.maos_json(&["lock", "list"]);
    let locks = locks["locks"].as_array().expect("locks");
    assert!(
        matches!(&locks[..], [l] if l["path"] == "held.txt" && l["holder"] == holder.as_str()),
        "{locks:?}"
    );
    let window = agent_of(&env, "tool_denied");
    assert_ne!(window, holder);
    let denied = env.events(&["--type", "tool_denied"]);
    let tools: Vec<&Value> = denied.iter().map(|d| &d["data"]["tool"]).collect();
    assert_eq!(
        tools,
        [&json!("Edit"), &json!("Bash"), &json!("Bash")],
        "{denied:?}"
    );
    let acquired = env.events(&["--type", "lock_acquired"]);
    let free = acquired
        .iter()
        .find(|l| l["data"]["path"] == "free.txt")
        .unwrap_or_else(|| panic!("free.txt was not locked: {acquired:?}"));
    assert_eq!(free["agent_id"], window.as_str(), "{free}");
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "free.txt"
            && m["agent_id"] == window.as_str() && m["data"]["bytes"] == 13),
        "{modified:?}"
    );
    assert!(
        free["seq"].as_u64() < modified[0]["seq"].as_u64(),
        "{free} {modified:?}"
    );
    // The window: its own agent, Copilot's, named by its prompt, ended with the run.
    let agent = ps_agent(&env, &window);
    assert_eq!(agent["role"], "copilot", "{agent}");
    assert_eq!(agent["task"], prompt.as_str(), "{agent}");
    assert_eq!(agent["parent"], Value::Null, "{agent}");
    assert_eq!(agent["state"], "ended", "{agent}");
    let ended = env.events(&["--type", "agent_ended"]);
    assert!(
        ended.iter().any(|e| e["agent_id"] == window.as_str()
            && e["data"]["reason"] == "the window ended (complete)"),
        "{ended:?}"
    );
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["agent_id"] == window.as_str()),
        "{prompts:?}"
    );
}

/// A paused session: the model's write is denied with the pause's reason in the text it
/// receives, and nothing is written; after `maos resume` the same write goes through.
#[test]
fn a_pause_reason_reaches_the_model_and_resume_lets_the_write_through() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    let session = env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let reason = "reviewing the schema, hands off";
    env.maos_json(&["pause", &session, "--reason", reason]);
    let file = env.project.join("paused.txt");
    let call = || {
        vec![Call {
            name: "create",
            args: json!({"path": abs(&env, "paused.txt"), "file_text": "after the pause\n"}),
        }]
    };
    let api = fake_model(call(), Vec::new());
    let out = run_copilot(&env, &copilot, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "copilot failed: {out:?}");
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    eprintln!("the model received: {result}");
    assert!(
        result.starts_with("Denied by preToolUse hook: maos: "),
        "{result}"
    );
    assert!(
        result.contains(reason),
        "the pause's reason is missing: {result}"
    );
    assert!(!file.exists(), "written during the pause");
    assert_eq!(env.events(&["--type", "tool_denied"]).len(), 1);

    env.maos_json(&["resume", &session]);
    let api = fake_model(call(), Vec::new());
    let out = run_copilot(&env, &copilot, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "copilot failed: {out:?}");
    let results = tool_results(&api);
    assert!(
        matches!(&results[..], [r] if !r.contains("Denied")),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("written after resume"),
        "after the pause\n"
    );
}

/// With history in the project (a note), the briefing maos gives at sessionStart reaches the
/// model: Copilot sends it as a user message before the prompt's.
#[test]
fn the_briefing_reaches_the_model_at_session_start() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let note = "the parser now reads Copilot's input";
    env.maos_json(&["note", "done", note]);
    let api = fake_model(Vec::new(), Vec::new());
    let out = run_copilot(&env, &copilot, &api, "say hello");
    assert!(out.status.success(), "copilot failed: {out:?}");
    let requests = model_requests(&api);
    let first = requests.first().expect("a model request");
    let text = user_text(first);
    let at = text
        .find(note)
        .unwrap_or_else(|| panic!("the note is not in what the model got: {text}"));
    assert!(
        text.find("say hello").is_some_and(|p| at < p),
        "the briefing does not come before the prompt: {text}"
    );
}

/// The window's `task` call starts a subagent whose write is its own: an agent of maos's under
/// the window, with the task the window gave it, holding the file's lock while it writes and
/// completed when it stops; the window keeps its own prompt as its one prompt.
#[test]
fn a_subagents_write_is_its_own_under_the_window() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    let sub_prompt = format!("{SUB_CUE}: write sub.txt");
    let api = fake_model(
        vec![Call {
            name: "task",
            args: json!({"description": "write sub.txt", "prompt": sub_prompt,
                         "agent_type": "general-purpose", "name": "writer"}),
        }],
        vec![Call {
            name: "create",
            args: json!({"path": abs(&env, "sub.txt"), "file_text": "from the subagent\n"}),
        }],
    );
    let prompt = format!("{CUE}: delegate sub.txt");
    let out = run_copilot(&env, &copilot, &api, &prompt);
    assert!(out.status.success(), "copilot failed: {out:?}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("sub.txt")).expect("written"),
        "from the subagent\n"
    );
    let writer = agent_of(&env, "file_modified");
    let sub = ps_agent(&env, &writer);
    let window = sub["parent"]
        .as_str()
        .unwrap_or_else(|| panic!("the writer is not a subagent: {sub}"))
        .to_string();
    // As a Claude Code subagent's: the call's description, then its prompt's first line.
    assert_eq!(sub["task"], format!("write sub.txt: {sub_prompt}"), "{sub}");
    assert_eq!(sub["role"], "general-purpose", "{sub}");
    assert_eq!(sub["state"], "completed", "{sub}");
    let lock = env.events(&["--type", "lock_acquired"]);
    assert!(
        matches!(&lock[..], [l] if l["agent_id"] == writer.as_str()
            && l["data"]["path"] == "sub.txt"),
        "{lock:?}"
    );
    let parent = ps_agent(&env, &window);
    assert_eq!(parent["task"], prompt.as_str(), "{parent}");
    assert_eq!(parent["parent"], Value::Null, "{parent}");
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["agent_id"] == window.as_str()),
        "{prompts:?}"
    );
}

/// Without `--yes` and without a terminal, install leaves the folder untrusted: it says so,
/// doctor fails naming the fix, and the real client runs none of the hooks (its write is not
/// recorded). After the fix doctor passes and the hooks run.
#[test]
fn without_consent_copilot_runs_no_hook_and_doctor_names_the_fix() {
    let Some(copilot) = client() else {
        return;
    };
    let env = Env::new();
    let out = env.maos(&["install-hooks", "--copilot"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("will not run these hooks") && said.contains("--copilot --yes"),
        "{said}"
    );
    assert!(hooks_file(&env).exists());
    let doctor = env.maos(&["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(!doctor.status.success(), "{report}");
    assert!(
        report.contains("FAIL  GitHub Copilot CLI trust")
            && report.contains("maos install-hooks --copilot --yes"),
        "{report}"
    );
    let write = |name: &'static str| {
        vec![Call {
            name: "create",
            args: json!({"path": abs(&env, name), "file_text": "x\n"}),
        }]
    };
    let api = fake_model(write("untrusted.txt"), Vec::new());
    let out = run_copilot(&env, &copilot, &api, &format!("{CUE}: write"));
    assert!(out.status.success(), "copilot failed: {out:?}");
    assert!(env.project.join("untrusted.txt").exists());
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );

    env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    let config = std::fs::read_to_string(config_file(&env)).expect("config.json");
    assert!(config.contains(&*env.project.to_string_lossy()), "{config}");
    let doctor = env.maos(&["doctor"]);
    let report = String::from_utf8_lossy(&doctor.stdout);
    assert!(
        report.contains("ok    GitHub Copilot CLI trust"),
        "{report}"
    );
    let api = fake_model(write("trusted.txt"), Vec::new());
    let out = run_copilot(&env, &copilot, &api, &format!("{CUE}: write"));
    assert!(out.status.success(), "copilot failed: {out:?}");
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "trusted.txt"),
        "{modified:?}"
    );
    // Uninstall takes back the hooks and the trust it gave, nothing else.
    env.maos_json(&["uninstall-hooks", "--copilot"]);
    assert!(!hooks_file(&env).exists());
    let config = std::fs::read_to_string(config_file(&env)).unwrap_or_default();
    assert!(
        !config.contains(&*env.project.to_string_lossy()),
        "{config}"
    );
    let api = fake_model(write("after.txt"), Vec::new());
    let mut cmd = copilot_command(
        &env,
        &copilot,
        &api,
        &format!("{CUE}: write"),
        &[("COPILOT_ALLOW_ALL", "true")],
    );
    cmd.arg("--trust-folder");
    let out = run_within(cmd, maos_tests::copilot::RUN_DEADLINE, "copilot -p");
    assert!(out.status.success(), "copilot failed: {out:?}");
    assert!(env.project.join("after.txt").exists());
    assert_eq!(env.events(&["--type", "file_modified"]).len(), 1);
}

/// A Copilot window killed (its whole process group, `kill -9`) while it holds a lock sends
/// no sessionEnd: maos notices its process is gone (the copilot process that runs the hook),
/// ends its agent and releases the lock.
#[test]
fn a_copilot_window_killed_without_session_end_is_ended_by_maos() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    // The window hangs after its write, holding orphan.txt's lock, until the test is over.
    let (waiting, release) = (Gate::default(), Gate::default());
    let (w, r) = (waiting.clone(), release.clone());
    let write = vec![Call {
        name: "create",
        args: json!({"path": abs(&env, "orphan.txt"), "file_text": "left behind\n"}),
    }];
    let api = FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let done = tool_messages(body).len();
        if user_text(body).contains(CUE) && done > 0 {
            w.open();
            r.wait();
        }
        match user_text(body).contains(CUE) {
            true => turn(&write, done),
            false => turn(&[], 0),
        }
    });
    let cmd = copilot_command(
        &env,
        &copilot,
        &api,
        &format!("{CUE}: write orphan.txt"),
        &[],
    );
    let client = Client::start(cmd, RUN_DEADLINE, "copilot -p");
    wait_until(RUN_DEADLINE, "the window's write is done", || {
        waiting.is_open()
    });
    let window = agent_of(&env, "file_modified");
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "orphan.txt" && l["holder"] == window.as_str()),
        "{locks}"
    );
    // Dropping the unfinished client kills its whole process group.
    drop(client);
    release.open();
    // The daemon's sweep runs every 10 s; allow it a few rounds.
    wait_until(
        Duration::from_secs(40),
        "maos ends the killed window",
        || {
            ps_agent(&env, &window)["state"] == "ended"
                && env.maos_json(&["lock", "list"])["locks"] == json!([])
        },
    );
    assert_eq!(
        env.events(&["--type", "agent_ended"])
            .iter()
            .filter(|e| e["data"]["reason"] == "the window ended (complete)")
            .count(),
        0
    );
}

/// A subagent's subagent (Copilot's subagents have `task` too): its write is its own, an agent
/// under the window with the task its parent subagent gave it; no second window appears, and
/// every agent is over when the run is.
#[test]
fn a_subagents_subagent_is_the_windows_not_a_window_of_its_own() {
    let Some((env, copilot)) = setup() else {
        return;
    };
    const NESTED_CUE: &str = "MAOS-NESTED";
    let nested_prompt = format!("{NESTED_CUE}: write n.txt");
    let window_calls = vec![Call {
        name: "task",
        args: json!({"description": "delegate", "prompt": format!("{SUB_CUE}: delegate"),
                     "agent_type": "general-purpose", "name": "middle"}),
    }];
    let sub_calls = vec![Call {
        name: "task",
        // `explore` has no write tools.
        args: json!({"description": "write n.txt", "prompt": nested_prompt,
                     "agent_type": "task", "name": "writer"}),
    }];
    let nested_calls = vec![Call {
        name: "create",
        args: json!({"path": abs(&env, "n.txt"), "file_text": "nested\n"}),
    }];
    let api = FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let (text, done) = (user_text(body), tool_messages(body).len());
        if text.contains(NESTED_CUE) {
            turn(&nested_calls, done)
        } else if text.contains(SUB_CUE) {
            turn(&sub_calls, done)
        } else if text.contains(CUE) {
            turn(&window_calls, done)
        } else {
            turn(&[], 0)
        }
    });
    let prompt = format!("{CUE}: delegate twice");
    let out = run_copilot(&env, &copilot, &api, &prompt);
    assert!(out.status.success(), "copilot failed: {out:?}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("n.txt")).expect("written"),
        "nested\n"
    );
    let writer = agent_of(&env, "file_modified");
    let nested = ps_agent(&env, &writer);
    assert_eq!(nested["role"], "task", "{nested}");
    assert_eq!(
        nested["task"],
        format!("write n.txt: {nested_prompt}"),
        "{nested}"
    );
    assert_ne!(nested["parent"], Value::Null, "{nested}");
    let agents = ps_agents(&env);
    let windows: Vec<&Value> = agents.iter().filter(|a| a["parent"].is_null()).collect();
    assert!(
        matches!(&windows[..], [w] if w["task"] == prompt.as_str() && w["state"] == "ended"),
        "not one window, named by its prompt and ended: {agents:#?}"
    );
    assert!(
        agents
            .iter()
            .all(|a| a["state"] == "ended" || a["state"] == "completed"),
        "{agents:#?}"
    );
}
