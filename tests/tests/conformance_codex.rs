//! Conformance with the real Codex: the pinned npm release (`@openai/codex` 0.171.0, its
//! native binary inside the package; installed once into a cache outside the repository by
//! `tests/conformance/install.sh`) runs `codex exec` offline against a scripted fake OpenAI
//! Responses API on 127.0.0.1 (a custom model provider in `$CODEX_HOME/config.toml`,
//! `wire_api = "responses"`), with maos's hooks installed by `maos install-hooks --codex` and
//! the real maosd behind them. Each scenario checks three sides: what the model received back
//! (the recorded requests), the files on disk, and maos's own view (`events`, `lock list`).
//!
//! Where the client cannot be installed or started, the test skips with the reason, and fails
//! on CI (`CI` set).
//!
//! # What Codex 0.171.0 (and 0.169.0 before it) does (observed here)
//!
//! - It calls only `POST /v1/responses` (streaming: `response.created`,
//!   `response.output_item.added`/`done`, `response.completed`). Which tools it offers depends
//!   on the model's bundled metadata: with `gpt-5.5`, `apply_patch` is a freeform *custom*
//!   tool (the model sends a `custom_tool_call` with the patch as `input`; the result comes
//!   back as a `custom_tool_call_output`) and the shell is `exec_command` (`{"cmd": ...}`;
//!   result in a `function_call_output`). With an unknown model such as `gpt-5-codex` there is
//!   no `apply_patch` tool at all.
//! - Hook input of the tool: `{"tool_name": "apply_patch", "tool_input": {"command":
//!   "<patch>"}, "tool_use_id": "<call_id>", "turn_id", "model", "permission_mode", "cwd",
//!   "session_id", "hook_event_name"}`; PostToolUse adds `"tool_response": "Exit code: 0\nWall
//!   time: 0 seconds\nOutput:\nSuccess. Updated the following files:\nA hello.txt\n"`. The shell
//!   is `"tool_name": "Bash", "tool_input": {"command": "<the cmd string>"}` (no `workdir`, even
//!   when the model gave one).
//! - Untrusted hooks are skipped without a word; `install-hooks --codex --yes` makes
//!   `codex app-server`'s `hooks/list` report every maos hook `"trustStatus": "trusted"`.
//! - A denial reaches the model as the tool's output: `"Command blocked by PreToolUse hook:
//!   <maos's reason>. Command: <the patch or shell command>"` (Codex adds the full stop, so
//!   the client leaves out its own).
//! - `apply_patch <<'EOF' … EOF` (also after `cd DIR &&`) through `exec_command` is applied by
//!   Codex itself (output "Success. Updated the following files: …") and fires a `Bash`
//!   PreToolUse but **no PostToolUse** at all, so maos can lock and deny it but not record
//!   the write afterwards. A command that runs `apply_patch` any other way (`mkdir x &&
//!   apply_patch <<EOF`, `apply_patch < file`) is not intercepted, and no `apply_patch` is on
//!   the shell's PATH ("command not found").
//! - SessionStart's `additionalContext` reaches the model as a `developer` message of its own.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use maos_tests::codex::{
    RUN_DEADLINE, Step, cli_env, codex, configure, exec_command, install, maos, model, outputs,
    patch_adding, received, run_codex, stream,
};
use maos_tests::conformance::runnable;
use maos_tests::conformance::{
    Answer, Client, FakeApi, Gate, hold, one_event, ps_agent, ps_agents, short, window_of,
};
use maos_tests::{Env, Value, json};

/// The test environment with the fake model playing `steps`; `None` (after saying why) where
/// Codex cannot run here.
fn setup(steps: Vec<Step>) -> Option<(Env, PathBuf, FakeApi)> {
    let codex = runnable("Codex", codex())?;
    let env = Env::new();
    let api = model(steps);
    configure(&env, &api);
    Some((env, codex, api))
}

/// The holder by role and short id (`agt_` and eight digits), as a denial names it.
fn named(holder: &str) -> String {
    format!("holder ({})", holder.get(..12).unwrap_or(holder))
}

/// Right after `maos install-hooks --codex --yes`, with nothing else done, Codex runs maos's
/// hooks: `hooks/list` of Codex's own app server reports each one trusted, and a fresh
/// `codex exec`'s `apply_patch` is recorded, its file locked before it was written.
#[test]
fn after_install_with_yes_a_fresh_codex_runs_maos_hooks() {
    let Some((env, codex, api)) = setup(vec![Step::Patch(patch_adding("hello.txt", "hi"))]) else {
        return;
    };
    install(&env);
    // Codex's own view of the hooks.
    let listed = hooks_list(&env, &codex);
    let maos_hooks: Vec<&Value> = listed
        .iter()
        .filter(|h| {
            h["command"]
                .as_str()
                .is_some_and(|c| c.starts_with("maos hook"))
        })
        .collect();
    // SessionStart, UserPromptSubmit, PreToolUse, PostToolUse, Stop, SubagentStart and
    // SubagentStop.
    assert_eq!(maos_hooks.len(), 7, "{listed:#?}");
    for h in &maos_hooks {
        assert_eq!(h["trustStatus"], "trusted", "{h}");
        assert_eq!(h["source"], "project", "{h}");
    }

    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: add hello.txt");
    assert!(out.status.success(), "codex failed: {out:?}");
    // The model's side: the tool's success.
    let got = received(&api);
    assert!(
        matches!(&got[..], [(id, text)] if id == "call_maos_0"
            && text.contains("Success. Updated the following files:\nA hello.txt")),
        "{got:?}"
    );
    // The disk.
    assert_eq!(
        std::fs::read_to_string(env.project.join("hello.txt")).expect("hello.txt"),
        "hi\n"
    );
    // maos's view: the window's agent took the lock, then wrote; the lock went at Stop.
    let modified = env.events(&["--type", "file_modified"]);
    let [write] = &modified[..] else {
        panic!("not one file_modified: {modified:?}")
    };
    assert_eq!(write["data"]["path"], "hello.txt", "{write}");
    assert_eq!(write["data"]["tool"], "apply_patch", "{write}");
    let acquired = env.events(&["--type", "lock_acquired"]);
    let [lock] = &acquired[..] else {
        panic!("not one lock_acquired: {acquired:?}")
    };
    assert_eq!(lock["data"]["path"], "hello.txt", "{lock}");
    assert_eq!(lock["agent_id"], write["agent_id"], "{lock} {write}");
    assert!(
        lock["seq"].as_u64() < write["seq"].as_u64(),
        "{lock} {write}"
    );
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

/// `codex app-server`'s `hooks/list` for the project: every hook Codex sees there.
fn hooks_list(env: &Env, codex: &Path) -> Vec<Value> {
    use std::io::{BufRead, BufReader, Write};
    let mut cmd = Command::new(codex);
    cli_env(env, &mut cmd);
    let mut child = cmd
        .arg("app-server")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::null())
        .spawn()
        .expect("codex app-server");
    let mut stdin = child.stdin.take().expect("stdin");
    let stdout = child.stdout.take().expect("stdout");
    let project = std::fs::canonicalize(&env.project).expect("project");
    for msg in [
        json!({"id": 0, "method": "initialize", "params": {"clientInfo": {"name": "maos-tests", "version": "0"}}}),
        json!({"method": "initialized"}),
        json!({"id": 1, "method": "hooks/list", "params": {"cwds": [project]}}),
    ] {
        writeln!(stdin, "{msg}").expect("write to app-server");
    }
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines().map_while(Result::ok) {
            if let Ok(v) = serde_json::from_str::<Value>(&line)
                && v["id"] == 1
            {
                let _ = tx.send(v);
                return;
            }
        }
    });
    let answer = rx.recv_timeout(Duration::from_secs(60));
    let _ = child.kill();
    let _ = child.wait();
    let answer = answer.expect("hooks/list answered");
    answer["result"]["data"][0]["hooks"]
        .as_array()
        .unwrap_or_else(|| panic!("no hooks in {answer}"))
        .clone()
}

/// The `apply_patch` tool on a file another agent holds: denied; the model receives maos's
/// reason naming the holder; the file is not written; `tool_denied` is recorded.
#[test]
fn an_apply_patch_to_a_held_file_is_denied_to_the_model() {
    let Some((env, codex, api)) = setup(vec![Step::Patch(patch_adding("held.txt", "clobbered"))])
    else {
        return;
    };
    install(&env);
    let holder = hold(&env, "held.txt");
    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: write held.txt");
    assert!(out.status.success(), "codex failed: {out:?}");
    let got = received(&api);
    eprintln!("the model received: {got:?}");
    let [(_, text)] = &got[..] else {
        panic!("not one tool output: {got:?}")
    };
    assert!(
        text.starts_with("Command blocked by PreToolUse hook: maos: held.txt"),
        "{text}"
    );
    assert!(
        text.contains(&named(&holder)),
        "the holder is not named: {text}"
    );
    assert!(
        !env.project.join("held.txt").exists(),
        "the denied patch reached the disk"
    );
    let locks = env.maos_json(&["lock", "list"]);
    let locks = locks["locks"].as_array().expect("locks");
    assert!(
        matches!(&locks[..], [l] if l["path"] == "held.txt" && l["holder"] == holder.as_str()),
        "{locks:?}"
    );
    let denied = env.events(&["--type", "tool_denied"]);
    assert!(
        matches!(&denied[..], [d] if d["agent_id"] != holder.as_str()),
        "{denied:?}"
    );
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
}

/// `apply_patch <<'EOF'` through the shell: on a held file it is denied as the tool is (the
/// model gets maos's reason, the file stays unwritten); on a free file, after `cd sub &&`, it
/// runs and takes that file's lock (`sub/free.txt`) for the window's agent first.
#[test]
fn a_shell_apply_patch_takes_and_is_denied_the_same_locks() {
    let held = format!(
        "apply_patch <<'EOF'\n{}EOF\n",
        patch_adding("held.txt", "clobbered")
    );
    let free = format!(
        "cd sub && apply_patch <<'EOF'\n{}EOF\n",
        patch_adding("free.txt", "mine")
    );
    let Some((env, codex, api)) = setup(vec![Step::Shell(held), Step::Shell(free)]) else {
        return;
    };
    std::fs::create_dir_all(env.project.join("sub")).expect("sub");
    install(&env);
    let holder = hold(&env, "held.txt");
    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: patch through the shell");
    assert!(out.status.success(), "codex failed: {out:?}");
    let got = received(&api);
    eprintln!("the model received: {got:?}");
    let [(_, denied), (_, allowed)] = &got[..] else {
        panic!("not two tool outputs: {got:?}")
    };
    assert!(
        denied.starts_with("Command blocked by PreToolUse hook: maos: held.txt"),
        "{denied}"
    );
    assert!(denied.contains(&named(&holder)), "{denied}");
    assert!(
        allowed.contains("Success. Updated the following files:\nA free.txt"),
        "{allowed}"
    );
    assert!(!env.project.join("held.txt").exists());
    assert_eq!(
        std::fs::read_to_string(env.project.join("sub/free.txt")).expect("free"),
        "mine\n"
    );
    // maos's view: one denial, and the free file's lock taken by the window's agent.
    let denials = env.events(&["--type", "tool_denied"]);
    let [denial] = &denials[..] else {
        panic!("not one tool_denied: {denials:?}")
    };
    let acquired = env.events(&["--type", "lock_acquired"]);
    let window: Vec<&Value> = acquired
        .iter()
        .filter(|l| l["agent_id"] == denial["agent_id"])
        .collect();
    assert!(
        matches!(&window[..], [l] if l["data"]["path"] == "sub/free.txt"),
        "{acquired:?}"
    );
}

/// Installed without consent (no terminal, no `--yes`): install says in one line that the
/// hooks will not run and what fixes it; Codex indeed runs none (its patch is neither locked
/// nor recorded); `maos doctor` fails naming the fix; the fix makes doctor pass.
#[test]
fn untrusted_hooks_do_not_run_and_doctor_names_the_fix() {
    let Some((env, codex, api)) = setup(vec![Step::Patch(patch_adding("loose.txt", "x"))]) else {
        return;
    };
    let out = maos(&env, &["install-hooks", "--codex"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.lines().any(|l| l.contains("will not run") && l.contains("`maos install-hooks --codex --yes`")),
        "{said}"
    );
    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: add loose.txt");
    assert!(out.status.success(), "codex failed: {out:?}");
    assert_eq!(received(&api).len(), 1);
    assert!(env.project.join("loose.txt").exists());
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );

    let doctor = maos(&env, &["--json", "doctor"]);
    assert_eq!(doctor.status.code(), Some(1), "{doctor:?}");
    let report: Value = serde_json::from_slice(&doctor.stdout).expect("doctor's report");
    let codex_checks: Vec<&Value> = report["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "Codex hooks")
        .collect();
    assert!(
        matches!(&codex_checks[..], [c] if c["level"] == "fail"
            && c["detail"].as_str().is_some_and(|d| d.contains("not trusted")
                && d.contains("`maos install-hooks --codex --yes`"))),
        "{codex_checks:?}"
    );
    install(&env);
    let doctor = maos(&env, &["--json", "doctor"]);
    assert_eq!(doctor.status.code(), Some(0), "{doctor:?}");
}

/// The briefing reaches Codex's model: with history in the project (a note), SessionStart's
/// `additionalContext` is a `developer` message of the first request.
#[test]
fn the_briefing_reaches_the_model_as_a_developer_message() {
    let Some((env, codex, api)) = setup(Vec::new()) else {
        return;
    };
    install(&env);
    env.session("conformance briefing", &[]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["note", "decision", "MAOS-BRIEFING-MARK use the blue widget"]);
    let out = run_codex(&env, &codex, "MAOS-CONFORMANCE: hello");
    assert!(out.status.success(), "codex failed: {out:?}");
    let requests = api.requests();
    let (_, first) = requests.first().expect("a request");
    let developer: Vec<String> = first["input"]
        .as_array()
        .expect("input")
        .iter()
        .filter(|i| i["role"] == "developer")
        .map(|i| i["content"].to_string())
        .collect();
    assert!(
        developer
            .iter()
            .any(|d| d.contains("MAOS-BRIEFING-MARK use the blue widget")),
        "no developer message with the briefing: {developer:#?}"
    );
}

/// The subagent's task in the tests of Codex's subagents.
const SUBTASK: &str = "SUBTASK: write sub.txt for the parser";

/// A fake Responses API whose window (its prompt has `MAOS-SPAWN`) spawns one subagent with
/// Codex's `spawn_agent` of the tool namespace `ns` (`multi_agent_v1`, Codex's default, or
/// `collaboration`, `multi_agent_v2`'s), then waits for it with `wait_agent`; the subagent
/// (its prompt is [`SUBTASK`]) writes `sub.txt` with `apply_patch`, then holds its last answer:
/// `reached` opens once it holds (its write done, its turn not over), and it answers once the
/// test opens `go`.
fn spawning_model(ns: &'static str, reached: Gate, go: Gate) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.starts_with("/v1/responses") {
            return Answer::not_found();
        }
        let text = body.to_string();
        let done = outputs(body);
        let call = |id: &str, name: &str, args: Value| {
            json!({"type": "function_call", "id": format!("fc_{id}"), "call_id": id,
                   "namespace": ns, "name": name, "arguments": args.to_string(),
                   "status": "completed"})
        };
        let item = if text.contains("MAOS-SPAWN") {
            match &done[..] {
                [] if ns == "collaboration" => call(
                    "call_maos_root_0",
                    "spawn_agent",
                    json!({"task_name": "notes_writer", "message": SUBTASK,
                           "fork_turns": "none"}),
                ),
                [] => call(
                    "call_maos_root_0",
                    "spawn_agent",
                    json!({"message": SUBTASK, "agent_type": "worker"}),
                ),
                // v2 waits for any agent; v1 for the agent ids that spawn_agent returned.
                [_] if ns == "collaboration" => call(
                    "call_maos_root_1",
                    "wait_agent",
                    json!({"timeout_ms": 60000}),
                ),
                [(_, spawned)] => {
                    let id = serde_json::from_str::<Value>(spawned).unwrap_or_default()["agent_id"]
                        .clone();
                    let targets = if id.is_null() { json!([]) } else { json!([id]) };
                    call(
                        "call_maos_root_1",
                        "wait_agent",
                        json!({"targets": targets, "timeout_ms": 60000}),
                    )
                }
                _ => json!({"type": "message", "role": "assistant", "id": "msg_root_done",
                            "content": [{"type": "output_text", "text": "Done."}]}),
            }
        } else if text.contains(SUBTASK) && done.is_empty() {
            json!({"type": "custom_tool_call", "id": "ctc_sub_0",
                   "call_id": "call_maos_sub_0", "name": "apply_patch",
                   "input": patch_adding("sub.txt", "from the subagent"),
                   "status": "completed"})
        } else {
            if text.contains(SUBTASK) {
                reached.open();
                go.wait();
            }
            json!({"type": "message", "role": "assistant", "id": "msg_done",
                   "content": [{"type": "output_text", "text": "Done."}]})
        };
        Answer::sse(stream(done.len(), item))
    })
}

/// A Codex window spawns a subagent with `spawn_agent` (the tool Codex 0.171.0 offers the model
/// in its `multi_agent_v1` namespace, by default): the subagent is an agent of its own under
/// the window, with its role and its task (the message it was spawned with), tied to the
/// spawning call for certain (its `agent_id` comes back in `spawn_agent`'s result); its write
/// takes the lock for it, and while it holds the file another window's write is denied naming
/// that subagent and its task; its SubagentStop completes it.
#[test]
fn a_codex_subagent_is_its_own_agent_with_its_task() {
    let Some(codex) = runnable("Codex", codex()) else {
        return;
    };
    let (reached, go) = (Gate::default(), Gate::default());
    let env = Env::new();
    let api = spawning_model("multi_agent_v1", reached.clone(), go.clone());
    configure(&env, &api);
    install(&env);
    let prompt = "MAOS-SPAWN: delegate the notes";
    let client = Client::start(
        exec_command(&env, &codex, prompt),
        RUN_DEADLINE,
        "codex exec",
    );
    maos_tests::wait_until(RUN_DEADLINE, "the subagent's write is done", || {
        reached.is_open()
    });
    // Another window (a Claude Code one, as its hook sends it) wants the file.
    let file = env.project.join("sub.txt");
    let other = |event: &str, extra: Value| {
        let out = env.hook(
            "claude",
            &maos_tests::hook_input(&env.project, "other-window", event, extra),
        );
        maos_tests::denial_reason(&out)
    };
    other("UserPromptSubmit", json!({"prompt": "tidy the notes"}));
    let reason = other(
        "PreToolUse",
        json!({"tool_name": "Write", "tool_input": {"file_path": file, "content": "mine\n"}}),
    );
    go.open();
    let out = client.finish();
    assert!(out.status.success(), "codex failed: {out:?}");
    eprintln!("the other window was told: {reason}");

    let window = window_of(&env, prompt);
    let agents = ps_agents(&env);
    let subs: Vec<&Value> = agents
        .iter()
        .filter(|a| a["parent"] == window.as_str())
        .collect();
    let [sub] = subs[..] else {
        panic!("not one subagent under the window: {agents:#?}")
    };
    let sub_id = sub["id"].as_str().expect("id");
    assert_eq!(sub["role"], "worker", "{sub}");
    assert_eq!(sub["task"], SUBTASK, "{sub}");
    assert_eq!(sub["state"], "completed", "{sub}");
    assert_eq!(ps_agent(&env, &window)["task"], prompt);
    assert!(
        reason.starts_with("maos: sub.txt") && reason.contains(short(sub_id)),
        "{reason}"
    );
    assert!(
        reason.contains("a Codex subagent") && reason.contains(SUBTASK),
        "the subagent and its task: {reason}"
    );
    let written = one_event(&env, "file_modified", "sub.txt");
    assert_eq!(written["agent_id"], sub_id, "{written}");
    let locked = one_event(&env, "lock_acquired", "sub.txt");
    assert_eq!(locked["agent_id"], sub_id, "{locked}");
    assert_eq!(
        std::fs::read_to_string(&file).expect("sub.txt"),
        "from the subagent\n"
    );
}

/// With Codex's `multi_agent_v2` (its `collaboration` namespace: `spawn_agent` with a
/// `task_name`, whose result names no agent id) the subagent is still its own agent under the
/// window, named by its task name and message, and its write is its own.
#[test]
fn a_codex_v2_subagent_is_named_by_its_task_name_and_message() {
    let Some(codex) = runnable("Codex", codex()) else {
        return;
    };
    let env = Env::new();
    let go = Gate::default();
    go.open();
    let api = spawning_model("collaboration", Gate::default(), go);
    configure(&env, &api);
    install(&env);
    let prompt = "MAOS-SPAWN: delegate the notes";
    let mut cmd = exec_command(&env, &codex, prompt);
    cmd.args(["--enable", "multi_agent_v2"]);
    let out = maos_tests::conformance::run_within(cmd, RUN_DEADLINE, "codex exec");
    assert!(out.status.success(), "codex failed: {out:?}");
    let window = window_of(&env, prompt);
    let agents = ps_agents(&env);
    let subs: Vec<&Value> = agents
        .iter()
        .filter(|a| a["parent"] == window.as_str())
        .collect();
    let [sub] = subs[..] else {
        panic!("not one subagent under the window: {agents:#?}")
    };
    assert_eq!(sub["task"], format!("notes_writer: {SUBTASK}"), "{sub}");
    assert_eq!(sub["state"], "completed", "{sub}");
    let written = one_event(&env, "file_modified", "sub.txt");
    assert_eq!(written["agent_id"], sub["id"], "{written}");
}
