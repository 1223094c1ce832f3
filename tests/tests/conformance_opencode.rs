//! Conformance with the real OpenCode: the pinned npm release `opencode-ai` (installed once into
//! a cache outside the repository by `tests/conformance/install.sh`; its optional dependency
//! `opencode-linux-x64` carries the binary) runs offline against a scripted fake
//! OpenAI-compatible API on 127.0.0.1, with maos's plugin installed by `maos install-hooks
//! --opencode` and the real maosd behind it. Each scenario checks three sides: what the model
//! received back (the `tool` messages of the recorded requests), the files on disk, and maos's
//! own view (`events`, `lock list`, `ps`).
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set).
//!
//! Observed of OpenCode 1.18.33 driven this way (`opencode run WORDS...`, a custom provider in
//! `opencode.json` with `npm: "@ai-sdk/openai-compatible"` and `options.baseURL`):
//! - The provider package is bundled in the binary: nothing is fetched for it. It calls only
//!   `POST /v1/chat/completions` (streamed, `data: {choices: [{delta}]}` then `data: [DONE]`):
//!   one request without tools for the session's title, then one per model turn with the tools
//!   `bash {command, timeout?, workdir?}`, `edit {filePath, oldString, newString, replaceAll?}`,
//!   `write {filePath, content}`, `task {description, prompt, subagent_type, task_id?,
//!   command?}`, `read`, `glob`, `grep`, `skill`, `todowrite`, `webfetch`. A tool's result goes
//!   back as a `tool` message; a plugin's `tool.execute.before` that throws makes its message the
//!   result, exactly, and the tool does not run.
//! - It runs `npm install @opencode-ai/plugin@1.18.33` in every config directory it reads
//!   (`~/.config/opencode/`, the project's `.opencode/`) at start, unless `node_modules/` is
//!   there and `package-lock.json` lists the package; with no registry a run takes 80 s more.
//!   The tests seed both, so no run touches the network.
//! - Plugins are every `*.js`/`*.ts` in a config directory's `plugin/` or `plugins/`, each
//!   export called with `{client, project, directory, worktree, $, serverUrl, ...}` in the
//!   `opencode` process itself (`maos hook`'s parent). Events seen by the plugin's `event` hook:
//!   `session.created` (a subagent's child session has `info.parentID` and `info.agent`),
//!   `session.status` (busy/idle), `session.idle` after each turn, `message.*`,
//!   `session.updated`, `session.diff`, `file.edited`; no event when the process exits (its
//!   `process.on("exit")` runs, and `spawnSync` works there). `chat.message` has the prompt's
//!   text parts; `experimental.chat.system.transform` may add system messages.
//! - `opencode run "two words"` sends the model `"two words"` with the quotes (an argument with
//!   a space is quoted before the arguments are joined): the tests pass one word per argument.
//! - A write outside the project is refused by OpenCode itself in `run` (permission
//!   `external_directory`, auto-rejected). A run takes 8 to 20 s.

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use maos_tests::conformance::{Answer, FakeApi, agent_of, ps_agents, runnable};
use maos_tests::opencode::{
    CUE, Call, RUN_DEADLINE, fake_model, model_requests, opencode, opencode_command, run_opencode,
    run_opencode_with, system_text, tool_messages, tool_results, user_text,
};
use maos_tests::{Env, Value, denial_reason, hook_input, json, wait_until};

/// The client, and an environment whose project has maos's plugin installed; `None` (after
/// saying why) where the client cannot run here.
fn setup() -> Option<(Env, PathBuf)> {
    let opencode = runnable("OpenCode", opencode())?;
    let env = Env::new();
    env.maos_json(&["install-hooks", "--opencode"]);
    Some((env, opencode))
}

/// The model's `write` with a path relative to the project is allowed and written; maos took
/// the file's lock for the window's agent before the write and let go of it when the turn
/// ended; the window is named by its prompt, and ended with the run.
#[test]
fn an_allowed_write_is_locked_for_the_window_named_by_its_prompt() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let api = fake_model(vec![Call {
        name: "write",
        args: json!({"filePath": "notes/hello.txt", "content": "hello from the model\n"}),
    }]);
    let prompt = format!("{CUE}: write notes/hello.txt");
    let out = run_opencode(&env, &opencode, &api, &prompt);
    assert!(out.status.success(), "opencode failed: {out:?}");
    let results = tool_results(&api);
    assert!(
        matches!(&results[..], [r] if r.contains("Wrote file successfully")),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes/hello.txt")).expect("written"),
        "hello from the model\n"
    );
    let window = agent_of(&env, "file_modified");
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "notes/hello.txt"
            && m["data"]["tool"] == "Write" && m["data"]["bytes"] == 21),
        "{modified:?}"
    );
    let acquired = env.events(&["--type", "lock_acquired"]);
    assert!(
        matches!(&acquired[..], [l] if l["agent_id"] == window.as_str()
            && l["data"]["path"] == "notes/hello.txt"
            && l["seq"].as_u64() < modified[0]["seq"].as_u64()),
        "{acquired:?}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["agent_id"] == window.as_str()),
        "{prompts:?}"
    );
    let all = ps_agents(&env);
    let agent = all
        .iter()
        .find(|a| a["id"] == window.as_str())
        .unwrap_or_else(|| panic!("the window's agent is not in ps: {all:?}"));
    assert_eq!(agent["role"], "opencode", "{agent}");
    assert_eq!(agent["task"], prompt, "{agent}");
    // The plugin's SessionEnd as the process exits: the window ended with the run, its
    // session completed (not left for the sweep).
    assert_eq!(agent["state"], "ended", "{agent}");
    let ended = env.events(&["--type", "agent_ended"]);
    assert!(
        matches!(&ended[..], [e] if e["agent_id"] == window.as_str()
            && e["data"]["reason"].as_str().is_some_and(|r| r.contains("exit"))),
        "{ended:?}"
    );
}

/// A file another agent holds: maos's plugin denies the model's `write` and its `edit` of it;
/// the model receives maos's reason naming the file and the holder as the tool's error; the
/// file is unchanged, the lock still the holder's, and both denials are recorded for the
/// window's agent.
#[test]
fn writes_to_a_file_another_agent_holds_are_denied_to_the_model() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let file = env.project.join("held.txt");
    std::fs::write(&file, "original\n").expect("write held.txt");
    let api = fake_model(vec![
        Call {
            name: "write",
            args: json!({"filePath": "held.txt", "content": "clobbered\n"}),
        },
        Call {
            name: "edit",
            args: json!({"filePath": file, "oldString": "original", "newString": "clobbered"}),
        },
    ]);
    let out = run_opencode(&env, &opencode, &api, &format!("{CUE}: change held.txt"));
    assert!(out.status.success(), "opencode failed: {out:?}");
    let results = tool_results(&api);
    assert_eq!(results.len(), 2, "{results:?}");
    let named = format!("holder ({})", holder.get(..12).unwrap_or(&holder));
    for result in &results {
        eprintln!("the model received: {result}");
        assert!(result.contains("maos: held.txt"), "{result}");
        assert!(
            result.contains(&named),
            "the holder {named} is not named: {result}"
        );
    }
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "original\n");
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "held.txt" && l["holder"] == holder.as_str()),
        "{locks}"
    );
    let window = agent_of(&env, "tool_denied");
    assert_ne!(window, holder);
    let denied = env.events(&["--type", "tool_denied"]);
    let tools: Vec<&Value> = denied.iter().map(|d| &d["data"]["tool"]).collect();
    assert_eq!(tools, [&json!("Write"), &json!("Edit")], "{denied:?}");
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
}

/// The model's `bash` that writes a held file (`workdir` given, as OpenCode's tool takes it):
/// denied before it runs, the holder named to the model, the file unchanged.
#[test]
fn a_shell_write_to_a_held_file_is_denied_to_the_model() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns src/held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "src/held.txt", "--agent", &holder]);
    std::fs::create_dir_all(env.project.join("src")).expect("src");
    let file = env.project.join("src/held.txt");
    std::fs::write(&file, "original\n").expect("write held.txt");
    let api = fake_model(vec![Call {
        name: "bash",
        args: json!({"command": "echo clobbered > held.txt", "workdir": "src",
                     "description": "overwrite"}),
    }]);
    let out = run_opencode(
        &env,
        &opencode,
        &api,
        &format!("{CUE}: overwrite src/held.txt"),
    );
    assert!(out.status.success(), "opencode failed: {out:?}");
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    eprintln!("the model received: {result}");
    assert!(result.contains("src/held.txt"), "{result}");
    assert!(
        result.contains("holder ("),
        "the holder is not named: {result}"
    );
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "original\n");
    let denied = env.events(&["--type", "tool_denied"]);
    assert!(
        matches!(&denied[..], [d] if d["data"]["tool"] == "Bash"),
        "{denied:?}"
    );
}

/// A paused session: the model's write is denied with the pause's reason in the text it
/// receives, and nothing is written; after `maos resume` the same write goes through.
#[test]
fn a_pause_reason_reaches_the_model_and_resume_lets_the_write_through() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let session = env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let reason = "reviewing the schema, hands off";
    env.maos_json(&["pause", &session, "--reason", reason]);
    let file = env.project.join("paused.txt");
    let call = || {
        vec![Call {
            name: "write",
            args: json!({"filePath": "paused.txt", "content": "after the pause\n"}),
        }]
    };
    let api = fake_model(call());
    let out = run_opencode(&env, &opencode, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "opencode failed: {out:?}");
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    eprintln!("the model received: {result}");
    assert!(result.starts_with("maos: "), "{result}");
    assert!(
        result.contains(reason),
        "the pause's reason is missing: {result}"
    );
    assert!(!file.exists(), "written during the pause");
    assert_eq!(env.events(&["--type", "tool_denied"]).len(), 1);

    env.maos_json(&["resume", &session]);
    let api = fake_model(call());
    let out = run_opencode(&env, &opencode, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "opencode failed: {out:?}");
    let results = tool_results(&api);
    assert!(
        matches!(&results[..], [r] if !r.contains("maos: ")),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("written after resume"),
        "after the pause\n"
    );
}

/// With history in the project (a note), the briefing maos gives at the window's start
/// reaches the model in the system prompt of its first request; the prompt stays the
/// person's alone (the window is named by it, not by maos's words).
#[test]
fn the_briefing_reaches_the_model_at_session_start() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let note = "the parser now reads OpenCode's input";
    env.maos_json(&["note", "done", note]);
    let api = fake_model(Vec::new());
    let out = run_opencode(&env, &opencode, &api, "say hello");
    assert!(out.status.success(), "opencode failed: {out:?}");
    let requests = model_requests(&api);
    let first = requests.first().expect("a model request");
    let system = system_text(first);
    assert!(
        system.contains(note),
        "the note is not in the system prompt: {system}"
    );
    assert_eq!(user_text(first), "say hello");
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["data"]["first_line"] == "say hello"),
        "{prompts:?}"
    );
}

/// No daemon to ask (and none may be started): the model's write goes ahead, and the person
/// is told on stderr that locks were not enforced.
#[test]
fn with_the_daemon_unreachable_the_write_goes_ahead_and_the_user_is_told() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let api = fake_model(vec![Call {
        name: "write",
        args: json!({"filePath": "open.txt", "content": "fail open\n"}),
    }]);
    let out = run_opencode_with(
        &env,
        &opencode,
        &api,
        &format!("{CUE}: write open.txt"),
        &[("MAOS_NO_AUTOSTART", "1")],
    );
    assert!(out.status.success(), "opencode failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("maos: ") && stderr.contains("file locks are not enforced for this call"),
        "{stderr}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("open.txt")).expect("written"),
        "fail open\n"
    );
    assert!(env.daemons().is_empty(), "a daemon was started");
}

/// `maos` missing from PATH with `MAOS_HOOK_FAIL=closed`: the plugin refuses the write and
/// says why to the model; without it, the write goes ahead and the person is told.
#[test]
fn with_maos_missing_the_plugin_fails_open_unless_closed() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let call = || {
        vec![Call {
            name: "write",
            args: json!({"filePath": "gone.txt", "content": "x\n"}),
        }]
    };
    let file = env.project.join("gone.txt");
    for closed in [true, false] {
        let api = fake_model(call());
        let mut vars = vec![("PATH", "/usr/bin:/bin")];
        if closed {
            vars.push(("MAOS_HOOK_FAIL", "closed"));
        }
        let out = run_opencode_with(&env, &opencode, &api, &format!("{CUE}: write"), &vars);
        assert!(out.status.success(), "opencode failed: {out:?}");
        let results = tool_results(&api);
        let [result] = &results[..] else {
            panic!("not one tool result: {results:?}")
        };
        if closed {
            assert!(
                result.contains("`maos` is not on PATH")
                    && result.contains("MAOS_HOOK_FAIL=closed"),
                "{result}"
            );
            assert!(!file.exists());
        } else {
            let stderr = String::from_utf8_lossy(&out.stderr);
            assert!(stderr.contains("`maos` is not on PATH"), "{stderr}");
            assert_eq!(std::fs::read_to_string(&file).expect("written"), "x\n");
        }
    }
}

/// The model's `task`: OpenCode's subagent runs in a child session; maos registers it as a
/// subagent of the window (its type and task), and its shell write is its own.
#[test]
fn a_subagent_is_attributed_to_its_window() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let api = subagent_model();
    let out = run_opencode(&env, &opencode, &api, &format!("{CUE}: delegate"));
    assert!(out.status.success(), "opencode failed: {out:?}");
    assert_eq!(
        std::fs::read_to_string(env.project.join("sub.txt")).expect("written"),
        "sub\n"
    );
    let all = ps_agents(&env);
    let window = all
        .iter()
        .find(|a| a["role"] == "opencode")
        .unwrap_or_else(|| panic!("no window: {all:?}"));
    let sub = all
        .iter()
        .find(|a| a["role"] == "general")
        .unwrap_or_else(|| panic!("no subagent: {all:?}"));
    assert_eq!(sub["parent"], window["id"], "{sub}");
    assert!(
        sub["task"]
            .as_str()
            .is_some_and(|t| t.contains("write the log")),
        "{sub}"
    );
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "sub.txt"
            && m["agent_id"] == sub["id"]),
        "{modified:?}"
    );
}

/// The fake model of [`a_subagent_is_attributed_to_its_window`]: the window's first turn calls
/// `task`; the child session (its prompt `write sub.txt`) runs `bash`, then answers; the window
/// then answers.
fn subagent_model() -> FakeApi {
    FakeApi::start(|method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let tools = body.get("tools").is_some_and(|t| t.is_array());
        let user = user_text(body);
        let done = tool_messages(body).len();
        let call = match (tools, done) {
            (true, 0) if user.contains(CUE) => Some(Call {
                name: "task",
                args: json!({"description": "write the log", "prompt": "write sub.txt",
                             "subagent_type": "general"}),
            }),
            (true, 0) if user.contains("write sub.txt") => Some(Call {
                name: "bash",
                args: json!({"command": "echo sub > sub.txt", "description": "write"}),
            }),
            _ => None,
        };
        maos_tests::opencode::stream_answer(done, call.as_ref())
    })
}

/// A condition one side of the test opens for the other; waiting gives up after
/// [`RUN_DEADLINE`].
#[derive(Clone, Default)]
struct Gate(Arc<(Mutex<bool>, Condvar)>);

impl Gate {
    fn open(&self) {
        *self.0.0.lock().unwrap_or_else(|p| p.into_inner()) = true;
        self.0.1.notify_all();
    }

    fn is_open(&self) -> bool {
        *self.0.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn wait(&self) {
        let open = self.0.0.lock().unwrap_or_else(|p| p.into_inner());
        let _ = self
            .0
            .1
            .wait_timeout_while(open, RUN_DEADLINE, |open| !*open);
    }
}

/// An OpenCode window killed (its whole process group, `kill -9`) while it holds a lock sends
/// no SessionEnd (its exit handler never runs): maos notices its process is gone, ends its
/// agent and releases the lock.
#[test]
fn an_opencode_window_killed_is_ended_by_maos() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let (waiting, release) = (Gate::default(), Gate::default());
    let (w, r) = (waiting.clone(), release.clone());
    let api = FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let cued = body.get("tools").is_some() && user_text(body).contains(CUE);
        let done = tool_messages(body).len();
        match done {
            0 if cued => maos_tests::opencode::stream_answer(
                0,
                Some(&Call {
                    name: "write",
                    args: json!({"filePath": "orphan.txt", "content": "left behind\n"}),
                }),
            ),
            _ if cued => {
                w.open();
                r.wait();
                maos_tests::opencode::stream_answer(done, None)
            }
            _ => maos_tests::opencode::stream_answer(done, None),
        }
    });
    let mut cmd = opencode_command(
        &env,
        &opencode,
        &api,
        &format!("{CUE}: write orphan.txt"),
        &[],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn opencode");
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
    // SAFETY: kill(2) of the process group made for the client, not yet reaped.
    unsafe {
        libc::kill(-(child.id() as libc::pid_t), libc::SIGKILL);
    }
    let _ = child.wait();
    release.open();
    // The daemon's sweep runs every 10 s; allow it a few rounds.
    wait_until(
        Duration::from_secs(40),
        "maos ends the killed window",
        || {
            let ended = ps_agents(&env)
                .iter()
                .any(|a| a["id"] == window.as_str() && a["state"] == "ended");
            ended && env.maos_json(&["lock", "list"])["locks"] == json!([])
        },
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("orphan.txt")).expect("orphan.txt"),
        "left behind\n"
    );
}

/// Two windows of different CLIs on one file: while an OpenCode window holds race.txt (its
/// write done, its turn not over), a Claude Code window's Write of it is denied, naming the
/// OpenCode window (as "an OpenCode window") and its task; once the OpenCode run is over, the
/// same Write goes through.
#[test]
fn a_claude_code_window_is_told_an_opencode_window_holds_the_file() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    let (waiting, release) = (Gate::default(), Gate::default());
    let (w, r) = (waiting.clone(), release.clone());
    let api = FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let cued = body.get("tools").is_some() && user_text(body).contains(CUE);
        match tool_messages(body).len() {
            0 if cued => maos_tests::opencode::stream_answer(
                0,
                Some(&Call {
                    name: "write",
                    args: json!({"filePath": "race.txt", "content": "opencode's\n"}),
                }),
            ),
            done if cued => {
                w.open();
                r.wait();
                maos_tests::opencode::stream_answer(done, None)
            }
            done => maos_tests::opencode::stream_answer(done, None),
        }
    });
    let prompt = format!("{CUE}: write race.txt for the parser");
    let mut cmd = opencode_command(&env, &opencode, &api, &prompt, &[]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("spawn opencode");
    wait_until(RUN_DEADLINE, "the OpenCode window's write is done", || {
        waiting.is_open()
    });
    let file = env.project.join("race.txt");
    let claude = |event: &str| {
        let extra = match event {
            "UserPromptSubmit" => json!({"prompt": "tidy the tests"}),
            _ => json!({"tool_name": "Write",
                        "tool_input": {"file_path": file, "content": "claude's\n"}}),
        };
        env.hook(
            "claude",
            &hook_input(&env.project, "claude-window", event, extra),
        )
    };
    claude("UserPromptSubmit");
    let reason = denial_reason(&claude("PreToolUse"));
    eprintln!("the Claude Code window was told: {reason}");
    assert!(reason.starts_with("maos: race.txt"), "{reason}");
    assert!(reason.contains("an OpenCode window"), "{reason}");
    assert!(
        reason.contains(&prompt),
        "the OpenCode window's task: {reason}"
    );
    release.open();
    let out = child.wait_with_output().expect("opencode's output");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("race.txt"),
        "opencode's\n"
    );
    // The OpenCode run is over: its lock is released, and the Claude Code window may write.
    assert_eq!(denial_reason(&claude("PreToolUse")), "");
    let claude_window = agent_of(&env, "tool_denied");
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "race.txt" && l["holder"] == claude_window.as_str()),
        "{locks}"
    );
}

/// OpenCode gives OpenAI's models `apply_patch {patchText}` instead of `write` and `edit`: a
/// patch that updates a held file is denied, naming the file and the holder (the file
/// unchanged); a patch that adds a new file goes through, recorded for the window.
#[test]
fn apply_patch_of_a_held_file_is_denied_and_of_a_new_one_recorded() {
    let Some((env, opencode)) = setup() else {
        return;
    };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let file = env.project.join("held.txt");
    std::fs::write(&file, "original\n").expect("write held.txt");
    let api = fake_model(vec![
        Call {
            name: "apply_patch",
            args: json!({"patchText": "*** Begin Patch\n*** Update File: held.txt\n@@\n-original\n+clobbered\n*** End Patch"}),
        },
        Call {
            name: "apply_patch",
            args: json!({"patchText": "*** Begin Patch\n*** Add File: fresh.txt\n+new file\n*** End Patch"}),
        },
    ]);
    let out = run_opencode_with(
        &env,
        &opencode,
        &api,
        &format!("{CUE}: patch the files"),
        &[maos_tests::opencode::GPT_MODEL],
    );
    assert!(out.status.success(), "opencode failed: {out:?}");
    let offered: Vec<String> = model_requests(&api)
        .first()
        .and_then(|b| b["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .filter_map(|t| t["function"]["name"].as_str().map(str::to_string))
        .collect();
    assert!(
        offered.iter().any(|t| t == "apply_patch") && !offered.iter().any(|t| t == "write"),
        "{offered:?}"
    );
    let results = tool_results(&api);
    eprintln!("the model received: {results:#?}");
    let [denied, allowed] = &results[..] else {
        panic!("not two tool results: {results:?}")
    };
    let named = format!("holder ({})", holder.get(..12).unwrap_or(&holder));
    assert!(
        denied.contains("maos: held.txt") && denied.contains(&named),
        "{denied}"
    );
    assert!(!allowed.contains("maos: "), "{allowed}");
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "original\n");
    assert_eq!(
        std::fs::read_to_string(env.project.join("fresh.txt")).expect("fresh.txt"),
        "new file\n"
    );
    let denied = env.events(&["--type", "tool_denied"]);
    assert!(
        matches!(&denied[..], [d] if d["data"]["tool"] == "apply_patch"),
        "{denied:?}"
    );
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "fresh.txt"
            && m["data"]["tool"] == "apply_patch"),
        "{modified:?}"
    );
}
