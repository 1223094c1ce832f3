//! Whose MCP tool call it is (README: MCP, identity). The server cannot see which agent of its
//! CLI called it; the CLI's hook of the same call can. Each rule, in order: the tool use id
//! Claude Code puts in `_meta["claudecode/toolUseId"]` (exact), the hook's claim by (CLI
//! process, tool, arguments) first in first out (Codex, Gemini CLI), `MAOS_AGENT_ID` (in
//! `mcp_sdk.rs`), and the window's main agent, said in the answer. The hooks run as children
//! of the MCP SDK's driver, which also runs the server: one CLI process, as in a real CLI.

use maos_tests::mcp::{Driver, python};
use maos_tests::{Env, Value, json, wait_until};

/// The id of the agent of `ps` whose task mentions `needle`.
fn agent_with(env: &Env, needle: &str) -> String {
    let ps = env.maos_json(&["ps"]);
    let agents: Vec<Value> = ps
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|s| s["agents"].as_array().unwrap().clone())
        .collect();
    let found: Vec<&Value> = agents
        .iter()
        .filter(|a| a["task"].as_str().unwrap_or_default().contains(needle))
        .collect();
    assert_eq!(
        found.len(),
        1,
        "one agent with {needle:?} in its task: {ps}"
    );
    found[0]["id"].as_str().unwrap().to_string()
}

fn claude(env: &Env, event: &str, extra: Value) -> Value {
    claude_in("cli-1", env, event, extra)
}

/// A Claude Code hook's input in the window whose session id is `window`.
fn claude_in(window: &str, env: &Env, event: &str, extra: Value) -> Value {
    let mut v = json!({"session_id": window, "hook_event_name": event,
        "cwd": env.project.to_string_lossy()});
    for (k, x) in extra.as_object().unwrap() {
        v[k] = x.clone();
    }
    v
}

/// The SDK's driver as a Claude Code window that has started (its SessionStart hook run).
fn window_driver(env: &Env, py: &std::path::Path) -> Driver {
    let mut d = Driver::start(env, py, &[]);
    d.hook(
        None,
        claude(env, "SessionStart", json!({"source": "startup"})),
    );
    d
}

/// PreToolUse of `mcp__maos__TOOL` in subagent `sub` with tool use id `id`.
fn mcp_pre(env: &Env, sub: &str, id: Option<&str>, tool: &str, input: Value) -> Value {
    let mut extra = json!({"agent_id": sub, "agent_type": "worker",
        "tool_name": format!("mcp__maos__{tool}"), "tool_input": input});
    if let Some(id) = id {
        extra["tool_use_id"] = json!(id);
    }
    claude(env, "PreToolUse", extra)
}

fn write_pre(env: &Env, sub: &str, file: &str) -> Value {
    claude(
        env,
        "PreToolUse",
        json!({"agent_id": sub, "agent_type": "worker", "tool_name": "Write",
            "tool_use_id": format!("w-{sub}"),
            "tool_input": {"file_path": env.project.join(file).to_string_lossy(),
                           "content": "x"}}),
    )
}

fn denied(stdout: &str) -> bool {
    stdout.contains("\"permissionDecision\":\"deny\"")
}

#[test]
fn claude_codes_tool_use_id_names_the_subagent_and_its_lock_is_the_hooks_lock() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut d = window_driver(&env, &py);
    let args = json!({"path": "src/x.rs", "mode": "write"});
    // Both subagents' hooks pass for the same arguments; A's is older.
    let (code, out) = d.hook(
        None,
        mcp_pre(&env, "sub-A", Some("toolu_A"), "lock_acquire", args.clone()),
    );
    assert_eq!(code, 0, "{out}");
    assert!(!denied(&out), "{out}");
    d.hook(
        None,
        mcp_pre(&env, "sub-B", Some("toolu_B"), "lock_acquire", args.clone()),
    );
    let (a, b) = (agent_with(&env, "sub-A"), agent_with(&env, "sub-B"));
    // B's call is B's, though A's record of the same arguments is older.
    let got = d.call_meta(
        "lock_acquire",
        args.clone(),
        json!({"claudecode/toolUseId": "toolu_B"}),
    );
    assert_eq!(got["is_error"], false, "{got}");
    let got: Value = serde_json::from_str(got["text"].as_str().unwrap()).unwrap();
    assert_eq!(got["caller"]["agent"], b.as_str(), "{got}");
    assert_eq!(got["caller"]["rule"], "tool_use_id");
    let listed = env.maos_json(&["lock", "list"]);
    assert_eq!(listed["locks"][0]["holder"], b.as_str(), "{listed}");
    // The same lock the hook enforces: A's write is denied, naming B; B's goes through.
    let (_, out) = d.hook(None, write_pre(&env, "sub-A", "src/x.rs"));
    assert!(denied(&out), "A's write should be denied: {out}");
    assert!(out.contains(&b[..12]), "{out}");
    let (_, out) = d.hook(None, write_pre(&env, "sub-B", "src/x.rs"));
    assert!(!denied(&out), "B holds the lock: {out}");
    // A tool use id answers once: asked again, the call is not B's by that rule.
    let again = d.call_meta(
        "lock_check",
        json!({"path": "src/x.rs"}),
        json!({"claudecode/toolUseId": "toolu_B"}),
    );
    let again: Value = serde_json::from_str(again["text"].as_str().unwrap()).unwrap();
    assert_eq!(again["caller"]["rule"], "window", "{again}");
    // B releases through its own recorded call; A's record is still there for A's call.
    let release = json!({"path": "src/x.rs"});
    d.hook(
        None,
        mcp_pre(
            &env,
            "sub-B",
            Some("toolu_B2"),
            "lock_release",
            release.clone(),
        ),
    );
    let released = d.call_meta(
        "lock_release",
        release,
        json!({"claudecode/toolUseId": "toolu_B2"}),
    );
    assert_eq!(released["is_error"], false, "{released}");
    let mine = d.call_meta(
        "lock_acquire",
        args,
        json!({"claudecode/toolUseId": "toolu_A"}),
    );
    let mine: Value = serde_json::from_str(mine["text"].as_str().unwrap()).unwrap_or_default();
    assert_eq!(mine["caller"]["agent"], a.as_str(), "{mine}");
    assert_eq!(
        env.maos_json(&["lock", "list"])["locks"][0]["holder"],
        a.as_str()
    );
    d.close();
}

#[test]
fn without_an_id_the_oldest_claim_of_the_same_process_tool_and_arguments_wins() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut d = window_driver(&env, &py);
    // The hook sees the arguments in another key order than the server: the same claim.
    let hooked = json!({"text": "chose serde", "kind": "decision"});
    let called = json!({"kind": "decision", "text": "chose serde"});
    d.hook(None, mcp_pre(&env, "sub-A", None, "note", hooked.clone()));
    d.hook(None, mcp_pre(&env, "sub-B", None, "note", hooked.clone()));
    let (a, b) = (agent_with(&env, "sub-A"), agent_with(&env, "sub-B"));
    let first = d.ok("note", called.clone());
    assert_eq!(first["caller"]["agent"], a.as_str(), "{first}");
    assert_eq!(first["caller"]["rule"], "claim");
    let second = d.ok("note", called.clone());
    assert_eq!(second["caller"]["agent"], b.as_str(), "{second}");
    // Other arguments match no claim: the window's main agent, and the answer says so.
    let window = agent_with(&env, "Claude Code window");
    let third = d.ok(
        "note",
        json!({"kind": "decision", "text": "something else"}),
    );
    assert_eq!(third["caller"]["agent"], window.as_str(), "{third}");
    assert_eq!(third["caller"]["rule"], "window");
    assert!(
        third["caller"]["how"]
            .as_str()
            .unwrap()
            .contains("main agent")
    );
    // maos's own record: each note is its agent's.
    let notes = env.events(&["--type", "note_recorded"]);
    let by: Vec<&str> = notes
        .iter()
        .map(|e| e["agent_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(by, [a.as_str(), b.as_str(), window.as_str()], "{notes:?}");
    d.close();
}

/// Two Claude Code windows (two CLI processes, each running its own `maos mcp`) make the same
/// call, same tool and arguments, with no tool use id: window one's hook records first, yet
/// window two's call is window two's agent's, and window one's is window one's. A claim is
/// matched on the CLI process too, never credited to another window's agent.
#[test]
fn the_same_call_in_two_windows_is_each_windows_own_agents() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut one = Driver::start(&env, &py, &[]);
    let mut two = Driver::start(&env, &py, &[]);
    for (d, window) in [(&mut one, "cli-1"), (&mut two, "cli-2")] {
        let (code, out) = d.hook(
            None,
            claude_in(window, &env, "SessionStart", json!({"source": "startup"})),
        );
        assert_eq!(code, 0, "{out}");
    }
    let args = json!({"kind": "decision", "text": "one parser for both"});
    let pre = |window: &str, sub: &str| {
        claude_in(
            window,
            &env,
            "PreToolUse",
            json!({"agent_id": sub, "agent_type": "worker",
                "tool_name": "mcp__maos__note", "tool_input": args.clone()}),
        )
    };
    let (code, out) = one.hook(None, pre("cli-1", "sub-one"));
    assert_eq!(code, 0, "{out}");
    let (code, out) = two.hook(None, pre("cli-2", "sub-two"));
    assert_eq!(code, 0, "{out}");
    let (a, b) = (agent_with(&env, "sub-one"), agent_with(&env, "sub-two"));
    // Window two calls first, though window one's record is older.
    let got = two.ok("note", args.clone());
    assert_eq!(
        got["caller"]["agent"],
        b.as_str(),
        "window two's call: {got}"
    );
    assert_eq!(got["caller"]["rule"], "claim", "{got}");
    let got = one.ok("note", args.clone());
    assert_eq!(
        got["caller"]["agent"],
        a.as_str(),
        "window one's call: {got}"
    );
    assert_eq!(got["caller"]["rule"], "claim", "{got}");
    let notes = env.events(&["--type", "note_recorded"]);
    let by: Vec<&str> = notes
        .iter()
        .map(|e| e["agent_id"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(by, [b.as_str(), a.as_str()], "{notes:?}");
    one.close();
    two.close();
}

/// An agent's MCP `lock_release` of a lock another agent holds is refused (only the holder
/// releases; MCP has no force), and the holder still holds it, with the same token, until it
/// releases it itself.
#[test]
fn an_agent_cannot_release_another_agents_lock_through_mcp() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut d = window_driver(&env, &py);
    let args = json!({"path": "src/held.rs", "mode": "write"});
    d.hook(
        None,
        mcp_pre(&env, "sub-A", Some("toolu_A"), "lock_acquire", args.clone()),
    );
    let got = d.call_meta(
        "lock_acquire",
        args,
        json!({"claudecode/toolUseId": "toolu_A"}),
    );
    assert_eq!(got["is_error"], false, "{got}");
    let a = agent_with(&env, "sub-A");
    let held = env.maos_json(&["lock", "list"]);
    assert_eq!(held["locks"][0]["holder"], a.as_str(), "{held}");
    // B's release, named B's by its tool use id: refused, naming the holder.
    let release = json!({"path": "src/held.rs"});
    d.hook(
        None,
        mcp_pre(
            &env,
            "sub-B",
            Some("toolu_B"),
            "lock_release",
            release.clone(),
        ),
    );
    let b = agent_with(&env, "sub-B");
    let refused = d.call_meta(
        "lock_release",
        release.clone(),
        json!({"claudecode/toolUseId": "toolu_B"}),
    );
    assert_eq!(refused["is_error"], true, "B released A's lock: {refused}");
    let text = refused["text"].as_str().unwrap_or_default();
    assert!(
        text.contains("only the holder can release it") && text.contains(&a) && text.contains(&b),
        "{refused}"
    );
    // A still holds it, as before.
    let after = env.maos_json(&["lock", "list"]);
    assert_eq!(after["locks"], held["locks"], "{after}");
    assert!(
        env.events(&["--type", "lock_released"]).is_empty(),
        "nothing was released"
    );
    // B's write is still denied; A's own release goes through.
    let (_, out) = d.hook(None, write_pre(&env, "sub-B", "src/held.rs"));
    assert!(denied(&out), "B's write should be denied: {out}");
    assert!(out.contains(&a[..12]), "{out}");
    d.hook(
        None,
        mcp_pre(
            &env,
            "sub-A",
            Some("toolu_A2"),
            "lock_release",
            release.clone(),
        ),
    );
    let released = d.call_meta(
        "lock_release",
        release,
        json!({"claudecode/toolUseId": "toolu_A2"}),
    );
    assert_eq!(released["is_error"], false, "{released}");
    assert_eq!(
        env.maos_json(&["lock", "list"])["locks"],
        json!([]),
        "A released its own lock"
    );
    d.close();
}

/// A window of `cli` (`gemini` or `codex`): its SessionStart, then its pre-tool hook (`event`)
/// of maos's `tool` under the CLI's own name for it (`cli_tool`), then the server's call with
/// the same arguments, which must be named by the claim: the test's world, and the answer.
fn window_claim(cli: &str, event: &str, cli_tool: &str, tool: &str, args: Value) -> (Env, Value) {
    let py = python().expect("checked by the caller");
    let env = Env::new();
    let mut d = Driver::start(&env, &py, &[]);
    let cwd = env.project.to_string_lossy().to_string();
    d.hook(
        Some(cli),
        json!({"session_id": "w-1", "hook_event_name": "SessionStart", "source": "startup",
               "cwd": cwd}),
    );
    let (code, out) = d.hook(
        Some(cli),
        json!({"session_id": "w-1", "hook_event_name": event, "cwd": cwd,
               "tool_name": cli_tool, "tool_use_id": "call_1", "tool_input": args}),
    );
    assert_eq!(code, 0, "{out}");
    let got = d.ok(tool, args);
    assert_eq!(got["caller"]["rule"], "claim", "{got}");
    d.close();
    (env, got)
}

#[test]
fn a_gemini_cli_window_is_named_by_its_claim() {
    if python().is_none() {
        return;
    }
    let args = json!({"path": "docs/a.md", "mode": "write"});
    let (env, got) = window_claim(
        "gemini",
        "BeforeTool",
        "mcp_maos_lock_acquire",
        "lock_acquire",
        args,
    );
    let window = agent_with(&env, "Gemini CLI window");
    assert_eq!(got["caller"]["agent"], window.as_str(), "{got}");
    assert_eq!(
        env.maos_json(&["lock", "list"])["locks"][0]["holder"],
        window.as_str()
    );
}

#[test]
fn a_codex_window_is_named_by_its_claim() {
    if python().is_none() {
        return;
    }
    let items = json!({"items": [{"content": "port the lexer", "status": "in_progress"}]});
    let (env, got) = window_claim(
        "codex",
        "PreToolUse",
        "mcp__maos__progress",
        "progress",
        items,
    );
    let window = agent_with(&env, "Codex window");
    assert_eq!(got["caller"]["agent"], window.as_str(), "{got}");
    let ps = env.maos_json(&["ps"]);
    assert!(ps.to_string().contains("port the lexer"), "{ps}");
}

/// The caller is named and the action applied in one daemon request, and the hook's record of
/// a call answers that call whatever the action does: a refused lock_acquire takes its
/// claim, so the next call with the same arguments is the next agent's, not the refused one's.
#[test]
fn a_refused_call_takes_its_own_record_and_the_next_call_is_the_next_agents() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut d = window_driver(&env, &py);
    let window = agent_with(&env, "Claude Code window");
    // The window holds the file.
    let held = d.ok("lock_acquire", json!({"path": "src/z.rs", "mode": "write"}));
    assert_eq!(held["caller"]["agent"], window.as_str(), "{held}");
    // A's call of the same arguments (no id: the claim rule) is refused, naming the holder.
    let args = json!({"path": "src/z.rs", "mode": "write"});
    d.hook(
        None,
        mcp_pre(&env, "sub-A", None, "lock_acquire", args.clone()),
    );
    let refused = d.err("lock_acquire", args.clone());
    assert!(refused.contains(&window[..12]), "{refused}");
    // A path that leads outside the project (a symlink out of it) is refused too, after its
    // record is taken: once the path is fixed, the same call of another agent is that agent's.
    let out = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::os::unix::fs::symlink(out.path(), env.project.join("src/gen")).unwrap();
    let via = json!({"path": "src/gen/f.rs", "mode": "write"});
    d.hook(
        None,
        mcp_pre(&env, "sub-A", None, "lock_acquire", via.clone()),
    );
    let refused = d.err("lock_acquire", via.clone());
    assert!(refused.contains("outside"), "{refused}");
    std::fs::remove_file(env.project.join("src/gen")).unwrap();
    std::fs::create_dir(env.project.join("src/gen")).unwrap();
    d.hook(
        None,
        mcp_pre(&env, "sub-C", None, "lock_acquire", via.clone()),
    );
    let c = agent_with(&env, "sub-C");
    let got = d.ok("lock_acquire", via);
    assert_eq!(got["caller"]["agent"], c.as_str(), "{got}");
    let released = d.ok("lock_release", json!({"path": "src/z.rs"}));
    assert_eq!(released["released"][0]["path"], "src/z.rs", "{released}");
    // B's call: A's refused call took A's record, so this one is B's.
    d.hook(
        None,
        mcp_pre(&env, "sub-B", None, "lock_acquire", args.clone()),
    );
    let b = agent_with(&env, "sub-B");
    let got = d.ok("lock_acquire", args);
    assert_eq!(got["caller"]["agent"], b.as_str(), "{got}");
    assert_eq!(got["caller"]["rule"], "claim", "{got}");
    let listed = env.maos_json(&["lock", "list"]);
    let holder = |p: &str| {
        listed["locks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|l| l["path"] == p)
            .map(|l| l["holder"].clone())
    };
    assert_eq!(holder("src/z.rs"), Some(json!(b)), "{listed}");
    assert_eq!(holder("src/gen/f.rs"), Some(json!(c)), "{listed}");
    d.close();
}

/// A managed agent: `maos run` starts an agent whose command is an MCP client (the SDK's
/// driver, its stdin and stdout named pipes this test holds). Its `maos mcp` inherits the
/// `MAOS_AGENT_ID` maos started it with, so the lock it takes is that agent's, and the hook
/// denies another agent's write to the file until it releases.
#[test]
fn a_managed_agent_maos_run_started_takes_its_lock_as_itself() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let pipes = tempfile::tempdir().unwrap();
    let (input, output) = (pipes.path().join("in"), pipes.path().join("out"));
    for p in [&input, &output] {
        let made = std::process::Command::new("mkfifo")
            .arg(p)
            .status()
            .unwrap();
        assert!(made.success(), "mkfifo {}", p.display());
    }
    let command = [
        "sh".to_string(),
        "-c".into(),
        "exec \"$0\" \"$1\" \"$2\" mcp <\"$3\" >\"$4\"".into(),
        py.display().to_string(),
        maos_tests::mcp::driver_script().display().to_string(),
        maos_tests::maos_bin().display().to_string(),
        input.display().to_string(),
        output.display().to_string(),
    ];
    let plan = format!(
        "objective = \"a lock through maos mcp\"\nstrategy = \"sequential\"\n\n[[agent]]\nname = \"locker\"\ntask = \"hold src/held.rs\"\ncommand = {}\n",
        serde_json::to_string(&command).unwrap()
    );
    let plan_path = env.project.join("plan.toml");
    std::fs::write(&plan_path, plan).unwrap();
    let sid = env.maos_json(&["run", plan_path.to_str().unwrap()])["id"]
        .as_str()
        .unwrap()
        .to_string();
    let mut d = Driver::attach(&input, &output);
    let session = env.maos_json(&["session", "show", &sid]);
    let locker = session["agents"][0]["id"].as_str().unwrap().to_string();
    assert_eq!(session["agents"][0]["spec"]["name"], "locker", "{session}");

    let got = d.ok(
        "lock_acquire",
        json!({"path": "src/held.rs", "mode": "write"}),
    );
    assert_eq!(got["caller"]["agent"], locker.as_str(), "{got}");
    assert_eq!(got["caller"]["rule"], "env", "{got}");
    let listed = env.maos_json(&["lock", "list"]);
    assert_eq!(listed["locks"][0]["holder"], locker.as_str(), "{listed}");
    assert_eq!(listed["locks"][0]["path"], "src/held.rs", "{listed}");

    // Another agent (a Claude Code window's subagent, through its hook) may not write it.
    env.hook(
        "claude",
        &claude(&env, "SessionStart", json!({"source": "startup"})),
    );
    let out = env.hook("claude", &write_pre(&env, "sub-W", "src/held.rs"));
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(denied(&out), "the window's write should be denied: {out}");
    assert!(
        out.contains(&locker[..12]),
        "the denial names the holder: {out}"
    );
    assert!(!env.project.join("src/held.rs").exists());

    // Released through MCP, the same write passes; the agent then ends as completed.
    let released = d.ok("lock_release", json!({"path": "src/held.rs"}));
    assert_eq!(released["caller"]["agent"], locker.as_str(), "{released}");
    let out = env.hook("claude", &write_pre(&env, "sub-W", "src/held.rs"));
    let out = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(!denied(&out), "the lock is released: {out}");
    d.close();
    wait_until(
        std::time::Duration::from_secs(30),
        "the managed MCP agent completes once its client's input closes",
        || env.maos_json(&["session", "show", &sid])["agents"][0]["state"] == "completed",
    );
}
