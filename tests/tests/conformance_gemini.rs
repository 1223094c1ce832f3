//! Conformance with the real Gemini CLI: the pinned npm release (installed once into a cache
//! outside the repository by `tests/conformance/install.sh`) runs offline against a scripted
//! fake Gemini API on 127.0.0.1, with maos's hooks installed by `maos install-hooks --gemini`
//! and the real maosd behind them. Each scenario checks three sides: what the model received
//! back (the `functionResponse` in the recorded requests), the files on disk, and maos's own
//! view (`events`, `lock list`).
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set).
//!
//! Observed of Gemini CLI 0.61.0 driven this way (`gemini -p PROMPT --yolo -m
//! gemini-2.5-flash`, `GOOGLE_GEMINI_BASE_URL`, `GEMINI_API_KEY=dummy`, the API-key auth
//! selected in the temporary HOME's `~/.gemini/settings.json`):
//! - It calls only `POST /v1beta/models/gemini-2.5-flash:streamGenerateContent?alt=sse`
//!   (SSE, `data: {candidates: [{content: {role: "model", parts}}]}`), once per model turn,
//!   nothing else on the network. A `functionCall` part is a tool call; the CLI gives it an
//!   id (`write_file_<ms>_0`) and sends the result back in the next request as a
//!   `functionResponse` whose `response` is `{"output": ...}` on success and
//!   `{"error": "Tool execution blocked: <reason>"}` when a BeforeTool hook denies (exit 0,
//!   `{"decision":"deny","reason":...}` on stdout).
//! - Hooks of one `-p` run, in order: SessionStart (`source: startup`) before the first
//!   request, its `hookSpecificOutput.additionalContext` put into the first user turn before
//!   the prompt as `<hook_context>...</hook_context>`; BeforeAgent with the `prompt`;
//!   PreCompress with `trigger: auto` before every model request, although nothing is
//!   compressed (the CLI fires it before checking the threshold: maos installs it for
//!   `manual` only); BeforeTool / AfterTool around each tool; AfterAgent; SessionEnd with
//!   `reason: exit`. The model's relative `file_path` arrives as given, with `cwd` the
//!   project.
//! - A hook's `systemMessage` is printed on stderr as `Hook system message: ...`. Project
//!   hooks get a warning on stderr each run ("project-level hooks have been detected").
//! - In a folder not in `~/.gemini/trustedFolders.json` it prints "Approval mode overridden
//!   to \"default\" because the current folder is not trusted" and exits 55 before any hook
//!   or request.
//! - With `GITHUB_SHA` set, hooks get only a few variables (PATH, HOME, TMPDIR, ...):
//!   `MAOS_*` and `XDG_*` are gone (the hook takes them from the CLI's own environment).
//! - Even `gemini --version` writes into `$HOME/.gemini` (it leaves
//!   `projects.json.<uuid>.tmp` files): every run here has a HOME in the test's directory,
//!   and TMPDIR too. A run takes 6 to 15 s (node starting up).

use std::os::unix::process::CommandExt;
use std::path::PathBuf;
use std::process::Stdio;
use std::sync::{Arc, Condvar, Mutex};
use std::time::Duration;

use maos_tests::conformance::{Answer, FakeApi, agent_of, runnable};
use maos_tests::gemini::{
    CUE, Call, RUN_DEADLINE, fake_model, function_responses, gemini, gemini_command,
    model_requests, run_gemini, run_gemini_with, sse, tool_results, user_text,
};
use maos_tests::{Env, Value, bin_dir, json, wait_until};

/// The client, and an environment whose project has maos's Gemini CLI hooks installed with
/// `--yes`; `None` (after saying why) where the client cannot run here.
fn setup() -> Option<(Env, PathBuf)> {
    let gemini = runnable("Gemini CLI", gemini())?;
    let env = Env::new();
    env.maos_json(&["install-hooks", "--gemini", "--yes"]);
    Some((env, gemini))
}

/// Right after `install-hooks --gemini --yes`, the model's `write_file` with a path relative
/// to the project is allowed and written, and maos recorded it for the window's agent, which
/// took the file's lock before the write and let go of it when its turn ended.
#[test]
fn an_allowed_relative_write_is_recorded_and_locked_for_the_window() {
    let Some((env, gemini)) = setup() else { return };
    let api = fake_model(vec![Call {
        name: "write_file",
        args: json!({"file_path": "notes/hello.txt", "content": "hello from the model\n"}),
    }]);
    let out = run_gemini(
        &env,
        &gemini,
        &api,
        &format!("{CUE}: write notes/hello.txt"),
    );
    assert!(out.status.success(), "gemini failed: {out:?}");
    // The model's side: the tool's success came back.
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    assert!(!result.contains("blocked"), "{result}");
    // The disk.
    assert_eq!(
        std::fs::read_to_string(env.project.join("notes/hello.txt")).expect("written"),
        "hello from the model\n"
    );
    // maos's view.
    let window = agent_of(&env, "file_modified");
    let modified = env.events(&["--type", "file_modified"]);
    let [write] = &modified[..] else {
        panic!("not one file_modified: {modified:?}")
    };
    assert_eq!(write["data"]["path"], "notes/hello.txt", "{write}");
    assert_eq!(write["data"]["tool"], "write_file", "{write}");
    assert_eq!(write["data"]["bytes"], 21, "{write}");
    let acquired = env.events(&["--type", "lock_acquired"]);
    let [lock] = &acquired[..] else {
        panic!("not one lock_acquired: {acquired:?}")
    };
    assert_eq!(lock["agent_id"], window.as_str(), "{lock}");
    assert_eq!(lock["data"]["path"], "notes/hello.txt", "{lock}");
    assert!(
        lock["seq"].as_u64() < write["seq"].as_u64(),
        "{lock} {write}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    // The window's turn: its prompt, and no compaction (Gemini CLI's automatic PreCompress
    // before each model turn compresses nothing).
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["agent_id"] == window.as_str()),
        "{prompts:?}"
    );
    assert_eq!(
        env.events(&["--type", "context_compacted"]),
        Vec::<Value>::new()
    );
    // The window is labelled by its CLI and its first prompt, and ended with the run.
    let ps = env.maos_json(&["ps", "--all"]);
    let agent = ps
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .find(|a| a["id"] == window.as_str())
        .unwrap_or_else(|| panic!("the window's agent is not in ps: {ps:#}"));
    assert_eq!(agent["role"], "gemini", "{agent}");
    assert_eq!(
        agent["task"],
        format!("{CUE}: write notes/hello.txt"),
        "{agent}"
    );
    assert_eq!(agent["state"], "ended", "{agent}");
}

/// Under GitHub Actions (`GITHUB_SHA` set) Gemini CLI strips every variable but a few from a
/// hook's environment, `MAOS_SOCKET` and `MAOS_HOME` among them: the hook takes them from the
/// CLI's own environment, so the write is still locked and recorded by the test's daemon (and
/// no other daemon is started).
#[test]
fn with_geminis_strict_sanitizing_the_hook_still_reaches_the_daemon() {
    let Some((env, gemini)) = setup() else { return };
    let api = fake_model(vec![Call {
        name: "write_file",
        args: json!({"file_path": "ci.txt", "content": "from CI\n"}),
    }]);
    let out = run_gemini_with(
        &env,
        &gemini,
        &api,
        &format!("{CUE}: write ci.txt"),
        &[("GITHUB_SHA", "0123456789abcdef")],
    );
    assert!(out.status.success(), "gemini failed: {out:?}");
    assert!(
        !String::from_utf8_lossy(&out.stderr).contains("not enforced"),
        "{out:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("ci.txt")).expect("written"),
        "from CI\n"
    );
    let acquired = env.events(&["--type", "lock_acquired"]);
    assert!(
        matches!(&acquired[..], [l] if l["data"]["path"] == "ci.txt"),
        "{acquired:?}"
    );
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "ci.txt"),
        "{modified:?}"
    );
    // Without them the hook would have started a daemon of its own: its state under the
    // client's HOME, its socket under TMPDIR (both kept by Gemini CLI).
    let stray = env.root().join("user/.local/state/maos");
    if let Some(pid) = std::fs::read_to_string(stray.join("maosd.pid"))
        .ok()
        .and_then(|p| p.trim().parse().ok())
    {
        maos_tests::kill9(pid);
    }
    assert!(
        !stray.exists(),
        "a second daemon's home: {}",
        stray.display()
    );
}

/// No daemon to ask (and none may be started): the model's write goes ahead, and Gemini CLI
/// shows the user maos's warning from the hook's `systemMessage`.
#[test]
fn with_the_daemon_unreachable_the_write_goes_ahead_and_the_user_is_told() {
    let Some((env, gemini)) = setup() else { return };
    let api = fake_model(vec![Call {
        name: "write_file",
        args: json!({"file_path": "open.txt", "content": "fail open\n"}),
    }]);
    let out = run_gemini_with(
        &env,
        &gemini,
        &api,
        &format!("{CUE}: write open.txt"),
        &[("MAOS_NO_AUTOSTART", "1")],
    );
    assert!(out.status.success(), "gemini failed: {out:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("Hook system message: maos: ")
            && stderr.contains("file locks are not enforced for this call"),
        "{stderr}"
    );
    let results = tool_results(&api);
    assert!(
        matches!(&results[..], [r] if !r.contains("blocked")),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("open.txt")).expect("written"),
        "fail open\n"
    );
    assert!(env.daemons().is_empty(), "a daemon was started");
}

/// A file another agent holds: maos's hook denies the model's `write_file` and its `replace`
/// of it; the model receives each denial as Gemini CLI words it, `Tool execution blocked:`
/// then maos's reason naming the file and the holder; the file is unchanged, the lock still
/// the holder's, and both denials are recorded for the window's agent.
#[test]
fn writes_to_a_file_another_agent_holds_are_denied_to_the_model() {
    let Some((env, gemini)) = setup() else { return };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let file = env.project.join("held.txt");
    std::fs::write(&file, "original\n").expect("write held.txt");
    let api = fake_model(vec![
        Call {
            name: "write_file",
            args: json!({"file_path": "held.txt", "content": "clobbered\n"}),
        },
        Call {
            name: "replace",
            args: json!({"file_path": "held.txt", "instruction": "change it",
                         "old_string": "original", "new_string": "clobbered"}),
        },
    ]);
    let out = run_gemini(&env, &gemini, &api, &format!("{CUE}: change held.txt"));
    assert!(out.status.success(), "gemini failed: {out:?}");

    // The model's side: both calls came back blocked with maos's reason.
    let results = tool_results(&api);
    assert_eq!(results.len(), 2, "{results:?}");
    let named = format!("holder ({})", holder.get(..12).unwrap_or(&holder));
    for result in &results {
        eprintln!("the model received: {result}");
        assert!(
            result.contains("Tool execution blocked: maos: held.txt"),
            "{result}"
        );
        assert!(
            result.contains(&named),
            "the holder {named} is not named: {result}"
        );
    }
    // The disk.
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "original\n");
    // maos's view.
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
        [&json!("write_file"), &json!("replace")],
        "{denied:?}"
    );
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
}

/// A paused session: the model's write is denied with the pause's reason in the text it
/// receives, and nothing is written; after `maos resume` the same write goes through.
#[test]
fn a_pause_reason_reaches_the_model_and_resume_lets_the_write_through() {
    let Some((env, gemini)) = setup() else { return };
    let session = env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let reason = "reviewing the schema, hands off";
    env.maos_json(&["pause", &session, "--reason", reason]);
    let file = env.project.join("paused.txt");
    let call = || {
        vec![Call {
            name: "write_file",
            args: json!({"file_path": "paused.txt", "content": "after the pause\n"}),
        }]
    };
    let api = fake_model(call());
    let out = run_gemini(&env, &gemini, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "gemini failed: {out:?}");
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    eprintln!("the model received: {result}");
    assert!(
        result.contains("Tool execution blocked: maos: "),
        "{result}"
    );
    assert!(
        result.contains(reason),
        "the pause's reason is missing: {result}"
    );
    assert!(!file.exists(), "written during the pause");
    assert_eq!(env.events(&["--type", "tool_denied"]).len(), 1);

    env.maos_json(&["resume", &session]);
    let api = fake_model(call());
    let out = run_gemini(&env, &gemini, &api, &format!("{CUE}: write paused.txt"));
    assert!(out.status.success(), "gemini failed: {out:?}");
    let results = tool_results(&api);
    assert!(
        matches!(&results[..], [r] if !r.contains("blocked")),
        "{results:?}"
    );
    assert_eq!(
        std::fs::read_to_string(&file).expect("written after resume"),
        "after the pause\n"
    );
    let modified = env.events(&["--type", "file_modified"]);
    assert!(
        matches!(&modified[..], [m] if m["data"]["path"] == "paused.txt"),
        "{modified:?}"
    );
}

/// With history in the project (a note), the briefing maos gives at SessionStart reaches the
/// model: Gemini CLI puts it before the prompt of the first request, in `<hook_context>`.
#[test]
fn the_briefing_reaches_the_model_at_session_start() {
    let Some((env, gemini)) = setup() else { return };
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let note = "the parser now reads Gemini CLI's input";
    env.maos_json(&["note", "done", note]);
    let api = fake_model(Vec::new());
    let out = run_gemini(&env, &gemini, &api, "say hello");
    assert!(out.status.success(), "gemini failed: {out:?}");
    let requests = model_requests(&api);
    let first = requests.first().expect("a model request");
    let text = user_text(first);
    let at = text
        .find("<hook_context>")
        .unwrap_or_else(|| panic!("no hook context before the prompt: {text}"));
    let context = &text[at..];
    assert!(
        context.contains(note),
        "the note is not in the briefing: {context}"
    );
    assert!(
        context.find(note) < context.find("say hello"),
        "the briefing comes after the prompt: {context}"
    );
}

/// Without `--yes` and without a terminal, install leaves the folder untrusted: doctor fails
/// naming the fix, and the real client refuses the folder (exit 55) before any hook or model
/// request. After the fix it runs the hooks.
#[test]
fn without_consent_gemini_runs_no_hook_and_doctor_names_the_fix() {
    let Some(gemini) = runnable("Gemini CLI", gemini()) else {
        return;
    };
    let env = Env::new();
    let out = env.maos_json(&["install-hooks", "--gemini"]);
    let fix = "`maos install-hooks --gemini --yes`";
    assert!(
        out["message"].as_str().is_some_and(|m| m.contains(fix)),
        "{out}"
    );
    let mut doctor = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    doctor.env("PATH", bin_dir());
    let report: Value =
        serde_json::from_slice(&doctor.output().expect("doctor").stdout).expect("doctor's report");
    let trust = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .find(|c| c["check"] == "Gemini CLI trust")
        .unwrap_or_else(|| panic!("no trust check: {report}"));
    assert_eq!(trust["level"], "fail", "{trust}");
    assert!(
        trust["detail"].as_str().is_some_and(|d| d.contains(fix)),
        "{trust}"
    );
    assert_eq!(report["ok"], false);

    let api = fake_model(Vec::new());
    let out = run_gemini(&env, &gemini, &api, "say hello");
    assert_eq!(out.status.code(), Some(55), "{out:?}");
    assert!(model_requests(&api).is_empty());
    assert_eq!(
        env.events(&["--type", "prompt_submitted"]),
        Vec::<Value>::new()
    );

    env.maos_json(&["install-hooks", "--gemini", "--yes"]);
    let out = run_gemini(&env, &gemini, &api, "say hello");
    assert!(out.status.success(), "{out:?}");
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["data"]["first_line"] == "say hello"),
        "{prompts:?}"
    );
}

/// A condition one side of the test opens for the other (the fake model reached a point, the
/// test let it go on); waiting gives up after [`RUN_DEADLINE`].
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

/// A fake Gemini API whose cued window writes `path` with `content`, then hangs on its next
/// request: the first gate opens once it hangs (holding the file's lock), and it answers when
/// the test opens the second.
fn write_then_hold(path: &'static str, content: &'static str) -> (FakeApi, Gate, Gate) {
    let (waiting, release) = (Gate::default(), Gate::default());
    let (w, r) = (waiting.clone(), release.clone());
    let api = FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.contains(":streamGenerateContent") {
            return Answer::not_found();
        }
        let cue = user_text(body).contains(CUE);
        match function_responses(body).len() {
            0 if cue => sse(json!([{"functionCall": {"name": "write_file",
                "args": {"file_path": path, "content": content}}}])),
            _ if cue => {
                w.open();
                r.wait();
                sse(json!([{"text": "Done."}]))
            }
            _ => sse(json!([{"text": "ok"}])),
        }
    });
    (api, waiting, release)
}

/// A Gemini CLI window killed (its whole process group, `kill -9`) while it holds a lock sends
/// no SessionEnd: maos notices its process is gone, ends its agent and releases the lock.
#[test]
fn a_gemini_window_killed_without_session_end_is_ended_by_maos() {
    let Some((env, gemini)) = setup() else { return };
    // The window hangs after its write, holding orphan.txt's lock, until the test is over.
    let (api, waiting, release) = write_then_hold("orphan.txt", "left behind\n");
    let mut cmd = gemini_command(
        &env,
        &gemini,
        &api,
        &format!("{CUE}: write orphan.txt"),
        &[],
    );
    cmd.stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .process_group(0);
    let mut child = cmd.spawn().expect("spawn gemini");
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
            let ps = env.maos_json(&["ps", "--all"]);
            let ended = ps
                .as_array()
                .into_iter()
                .flatten()
                .filter_map(|s| s["agents"].as_array())
                .flatten()
                .any(|a| a["id"] == window.as_str() && a["state"] == "ended");
            ended && env.maos_json(&["lock", "list"])["locks"] == json!([])
        },
    );
    assert_eq!(
        std::fs::read_to_string(env.project.join("orphan.txt")).expect("orphan.txt"),
        "left behind\n"
    );
}

/// `maos hook` fed one Claude Code hook input (a stand-in for the other window's client; the
/// hook and the daemon are the real ones): its answer on stdout, `Null` when it has none.
fn claude_hook(env: &Env, input: Value) -> Value {
    let mut cmd = env.command(&maos_tests::maos_bin());
    cmd.arg("hook")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("maos hook");
    let mut stdin = child.stdin.take().expect("stdin");
    std::io::Write::write_all(&mut stdin, input.to_string().as_bytes()).expect("the input");
    drop(stdin);
    let out = child.wait_with_output().expect("maos hook's output");
    assert!(out.status.success(), "{out:?}");
    let text = String::from_utf8_lossy(&out.stdout);
    match text.trim() {
        "" => Value::Null,
        t => serde_json::from_str(t).unwrap_or_else(|e| panic!("{e}: {t}")),
    }
}

/// Two windows of different CLIs on one file: while a Gemini CLI window holds race.txt (its
/// write done, its turn not over), a Claude Code window's Write of it is denied, naming the
/// Gemini CLI window and its task; once the Gemini run is over, the same Write goes through.
#[test]
fn a_claude_code_window_is_told_a_gemini_window_holds_the_file() {
    let Some((env, gemini)) = setup() else { return };
    let (api, waiting, release) = write_then_hold("race.txt", "gemini's\n");
    let prompt = format!("{CUE}: write race.txt for the parser");
    let mut cmd = gemini_command(&env, &gemini, &api, &prompt, &[]);
    cmd.stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0);
    let child = cmd.spawn().expect("spawn gemini");
    wait_until(RUN_DEADLINE, "the Gemini window's write is done", || {
        waiting.is_open()
    });
    let file = env.project.join("race.txt");
    let claude = |event: &str| {
        let mut v = json!({"session_id": "claude-window", "cwd": env.project,
                           "hook_event_name": event});
        match event {
            "UserPromptSubmit" => v["prompt"] = json!("tidy the tests"),
            _ => {
                v["tool_name"] = json!("Write");
                v["tool_input"] = json!({"file_path": file, "content": "claude's\n"});
            }
        }
        claude_hook(&env, v)
    };
    claude("UserPromptSubmit");
    let denied = claude("PreToolUse");
    let reason = denied["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or_else(|| panic!("not denied: {denied}"));
    eprintln!("the Claude Code window was told: {reason}");
    assert!(reason.starts_with("maos: race.txt"), "{reason}");
    assert!(reason.contains("a Gemini CLI window"), "{reason}");
    assert!(
        reason.contains(&prompt),
        "the Gemini window's task: {reason}"
    );
    release.open();
    let out = child.wait_with_output().expect("gemini's output");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("race.txt"),
        "gemini's\n"
    );
    // The Gemini run is over: its lock is released, and the Claude Code window may write.
    assert_eq!(claude("PreToolUse"), Value::Null);
    let claude_window = agent_of(&env, "tool_denied");
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(&locks["locks"].as_array().expect("locks")[..],
            [l] if l["path"] == "race.txt" && l["holder"] == claude_window.as_str()),
        "{locks}"
    );
}

/// maos's MCP server, which `install-hooks --gemini` registers in `.gemini/settings.json`:
/// the model calls its `note` tool (`mcp_maos_note` to Gemini CLI), the `BeforeTool` hook of
/// that call records it, and maos names the window's agent by that claim (Gemini CLI sends no
/// tool use id). Checked from the tool's result the model received and maos's record.
/// Observed with 0.61.0: the tools are offered as `mcp_maos_<tool>`, and the result reaches the
/// model as `{"output": "<untrusted_context>\n…maos's text…\n</untrusted_context>"}`.
#[test]
fn an_mcp_call_is_named_by_the_hooks_claim() {
    let Some((env, gemini)) = setup() else { return };
    let api = fake_model(vec![Call {
        name: "mcp_maos_note",
        args: json!({"kind": "decision", "text": "keep the lexer table-driven"}),
    }]);
    let out = run_gemini(&env, &gemini, &api, &format!("{CUE}: note a decision"));
    assert!(out.status.success(), "gemini failed: {out:?}");
    let offered: Vec<String> = model_requests(&api)
        .first()
        .and_then(|b| b["tools"].as_array().cloned())
        .unwrap_or_default()
        .iter()
        .flat_map(|t| {
            t["functionDeclarations"]
                .as_array()
                .cloned()
                .unwrap_or_default()
        })
        .filter_map(|f| f["name"].as_str().map(str::to_string))
        .collect();
    // Every tool of the server, by Gemini CLI's name for it.
    for tool in [
        "status",
        "who",
        "locks",
        "lock_acquire",
        "lock_renew",
        "lock_release",
        "lock_check",
        "progress",
        "note",
        "brief",
        "events",
    ] {
        let name = format!("mcp_maos_{tool}");
        assert!(offered.contains(&name), "{name} not offered: {offered:?}");
    }
    let results = tool_results(&api);
    let [result] = &results[..] else {
        panic!("not one tool result: {results:?}")
    };
    eprintln!("the model received: {result}");
    let window = agent_of(&env, "prompt_submitted");
    let notes = env.events(&["--type", "note_recorded"]);
    let [note] = &notes[..] else {
        panic!("not one note: {notes:?}")
    };
    assert_eq!(note["data"]["text"], "keep the lexer table-driven");
    assert_eq!(note["agent_id"], window.as_str(), "{note}");
    assert!(result.contains("\\\"rule\\\": \\\"claim\\\""), "{result}");
    assert!(result.contains(&window), "{result}");
}

/// Gemini CLI `-p` puts the SessionStart context in front of the prompt, in BeforeAgent's
/// `prompt` too (`<hook_context>…</hook_context>`, then a blank line, then the prompt). A
/// window after the first is given maos's briefing of the last session there: it is still
/// named by the person's prompt, and so is the session it starts, never by maos's own words;
/// the person's `<`, `>` and `&` are kept as written.
#[test]
fn a_window_after_the_first_is_named_by_its_prompt_not_by_maoss_briefing() {
    let Some((env, gemini)) = setup() else { return };
    let api = fake_model(Vec::new());
    let first = "add the lexer";
    let out = run_gemini(&env, &gemini, &api, first);
    assert!(out.status.success(), "gemini failed: {out:?}");
    let second = "then tidy <parser> & its tests";
    let out = run_gemini(&env, &gemini, &api, second);
    assert!(out.status.success(), "gemini failed: {out:?}");
    // The case is real: maos's context came before the second prompt.
    let requests = model_requests(&api);
    let last = user_text(requests.last().expect("a model request"));
    assert!(
        last.contains("<hook_context>maos: this window starts a new session")
            && last.contains(second),
        "{last}"
    );
    // maos's view: two sessions (the first completed with its window), each named by its
    // window's prompt, and so is each window.
    let ps = env.maos_json(&["ps", "--all"]);
    let mut sessions: Vec<&Value> = ps.as_array().expect("sessions").iter().collect();
    sessions.sort_by_key(|s| s["created_at"].as_str().map(str::to_string));
    let named: Vec<(&Value, Vec<&Value>)> = sessions
        .iter()
        .map(|s| {
            let tasks = s["agents"].as_array().expect("agents");
            (&s["objective"], tasks.iter().map(|a| &a["task"]).collect())
        })
        .collect();
    assert_eq!(
        named,
        [
            (&json!(first), vec![&json!(first)]),
            (&json!(second), vec![&json!(second)])
        ],
        "{ps:#}"
    );
    let prompts: Vec<Value> = env
        .events(&["--type", "prompt_submitted"])
        .iter()
        .map(|p| p["data"]["first_line"].clone())
        .collect();
    assert_eq!(prompts, [json!(first), json!(second)]);
}
