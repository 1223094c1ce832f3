//! Agent CLI windows as people run them: each window (one CLI session) is its own agent,
//! labelled by its CLI and its first prompt; a denial names the holder's window, task and
//! what it is doing; a window ends truthfully (SessionEnd, or its CLI process gone without a
//! word), freeing its locks, and a session the hooks made completes with its last window; a
//! background subagent's result is that subagent's. Real `maos hook` processes, the real
//! daemon, a real process killed with SIGKILL.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, Value, agents_in, json, maos_bin, wait_until};

fn event(env: &Env, window: &str, name: &str, extra: Value) -> Value {
    maos_tests::hook_input(&env.project, window, name, extra)
}

fn write(env: &Env, window: &str, file: &str) -> Value {
    event(
        env,
        window,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_use_id": "toolu_w",
               "tool_input": {"file_path": env.project.join(file), "content": "x"}}),
    )
}

fn patch(env: &Env, window: &str, file: &str) -> Value {
    let text = format!("*** Begin Patch\n*** Add File: {file}\n+x\n*** End Patch\n");
    event(
        env,
        window,
        "PreToolUse",
        json!({"tool_name": "apply_patch", "tool_use_id": "call_p",
               "tool_input": {"command": text}}),
    )
}

/// The denial's reason printed by the hook, or "" when it allowed.
fn denial(out: &Output) -> String {
    maos_tests::denial_reason(out)
}

fn agent_of_cli(env: &Env, cli: &str) -> Value {
    let ps = env.maos_json(&["ps", "--all"]);
    let found: Vec<Value> = agents_in(&ps)
        .into_iter()
        .filter(|a| a["role"] == cli && a["parent"].is_null())
        .collect();
    match &found[..] {
        [a] => a.clone(),
        _ => panic!("not one {cli} window: {ps:#}"),
    }
}

#[test]
fn two_windows_of_different_clis_are_two_agents_and_a_denial_names_the_holder() {
    let env = Env::new();
    env.hook(
        "claude",
        &event(&env, "cc-1", "SessionStart", json!({"source": "startup"})),
    );
    env.hook(
        "claude",
        &event(
            &env,
            "cc-1",
            "UserPromptSubmit",
            json!({"prompt": "Build the parser\nin src/"}),
        ),
    );
    env.hook(
        "codex",
        &event(&env, "cx-1", "SessionStart", json!({"source": "startup"})),
    );
    env.hook(
        "codex",
        &event(
            &env,
            "cx-1",
            "UserPromptSubmit",
            json!({"prompt": "Write the parser tests"}),
        ),
    );
    // One session (the first prompt names it), one agent per window, each with its CLI and
    // its own first prompt as its task.
    let ps = env.maos_json(&["ps"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(1), "{ps:#}");
    assert_eq!(ps[0]["objective"], "Build the parser");
    let claude = agent_of_cli(&env, "claude");
    let codex = agent_of_cli(&env, "codex");
    assert_eq!(
        (&claude["cli"], &claude["task"]),
        (&json!("claude"), &json!("Build the parser"))
    );
    assert_eq!(
        (&codex["cli"], &codex["task"]),
        (&json!("codex"), &json!("Write the parser tests"))
    );

    // Claude Code writes the file; Codex's patch of it is denied, naming who holds it: its
    // window, its task, what it did last, and since when.
    assert_eq!(
        denial(&env.hook("claude", &write(&env, "cc-1", "src/parser.rs"))),
        ""
    );
    let reason = denial(&env.hook("codex", &patch(&env, "cx-1", "src/parser.rs")));
    let short = claude["id"].as_str().and_then(|i| i.get(..12)).expect("id");
    for part in [
        "maos: src/parser.rs is being written by another agent: ".to_string(),
        format!(
            "claude ({short}), a Claude Code window (task: \"Build the parser\"; last: Write src/parser.rs, "
        ),
        "s ago), has held it since ".to_string(),
    ] {
        assert!(reason.contains(&part), "{part:?} is not in {reason:?}");
    }
    // Since when: a dated UTC time, then how long ago (was a bare "10:01:02 UTC").
    let since = reason.split("has held it since ").nth(1).expect("since");
    let stamp: String = since.chars().take(23).collect();
    assert!(
        stamp.len() == 23
            && stamp.ends_with(" UTC")
            && stamp.as_bytes()[4] == b'-'
            && stamp.as_bytes()[13] == b':'
            && since[23..].starts_with(" (")
            && since.contains(" ago)"),
        "{reason}"
    );
    // Codex's own texts never call it Claude Code.
    let mine = agent_of_cli(&env, "codex");
    assert!(!mine["task"].as_str().unwrap_or_default().contains("Claude"));
    assert_eq!(mine["activity"]["tool"], "apply_patch", "{mine}");
    assert_eq!(mine["activity"]["path"], "src/parser.rs", "{mine}");
    // `ps` shows what each window did last: the refused patch as a refusal (issue 29).
    let text = String::from_utf8_lossy(&env.maos(&["ps"]).stdout).into_owned();
    let refused = format!("denied apply_patch src/parser.rs (held by {short}), ");
    for part in [
        "Build the parser",
        "Write the parse…",
        "Write src/parser.rs, ",
        refused.as_str(),
    ] {
        assert!(text.contains(part), "{part:?} is not in `maos ps`:\n{text}");
    }
}

/// A fake agent CLI: a real process (python3) that runs `maos hook --cli CLI` for each input
/// file, says "ready", then waits to be killed, as a CLI window does.
struct FakeCli {
    child: std::process::Child,
}

impl FakeCli {
    fn start(env: &Env, cli: &str, inputs: &[Value]) -> FakeCli {
        let mut files = Vec::new();
        for (i, input) in inputs.iter().enumerate() {
            let f = env.root().join(format!("{cli}-input-{i}.json"));
            std::fs::write(&f, input.to_string()).expect("write an input");
            files.push(f);
        }
        let script = "import subprocess, sys, time\n\
            for f in sys.argv[3:]:\n\
            \x20   subprocess.run([sys.argv[1], 'hook', '--cli', sys.argv[2]], stdin=open(f), stdout=subprocess.DEVNULL, check=True)\n\
            print('ready', flush=True)\n\
            time.sleep(600)\n";
        let mut cmd = env.command(Path::new("python3"));
        cmd.arg("-c")
            .arg(script)
            .arg(maos_bin())
            .arg(cli)
            .args(&files)
            // The daemon this starts looks for lost windows every 100 ms.
            .env("MAOS_TEST_SWEEP_MS", "100")
            .stdin(Stdio::null())
            .stdout(Stdio::piped());
        let mut child = cmd.spawn().expect("python3 runs");
        let mut line = String::new();
        BufReader::new(child.stdout.as_mut().expect("stdout"))
            .read_line(&mut line)
            .expect("the fake CLI says ready");
        assert_eq!(line.trim(), "ready", "the fake CLI's hooks failed");
        FakeCli { child }
    }

    fn kill9(mut self) {
        maos_tests::kill9(self.child.id());
        let _ = self.child.wait();
    }
}

impl Drop for FakeCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn windows_end_truthfully_and_the_session_completes_with_the_last() {
    let env = Env::new();
    // A Codex window (no SessionEnd, ever) takes a lock, from a process of its own.
    let codex = FakeCli::start(
        &env,
        "codex",
        &[
            event(&env, "cx-2", "SessionStart", json!({"source": "startup"})),
            event(
                &env,
                "cx-2",
                "UserPromptSubmit",
                json!({"prompt": "Tidy the docs"}),
            ),
            patch(&env, "cx-2", "docs/a.md"),
        ],
    );
    // A Claude Code window takes another, then ends.
    env.hook(
        "claude",
        &event(&env, "cc-2", "SessionStart", json!({"source": "startup"})),
    );
    env.hook(
        "claude",
        &event(
            &env,
            "cc-2",
            "UserPromptSubmit",
            json!({"prompt": "Fix the bug"}),
        ),
    );
    assert_eq!(
        denial(&env.hook("claude", &write(&env, "cc-2", "src/bug.rs"))),
        ""
    );
    assert_eq!(
        env.maos_json(&["lock", "list"])["locks"]
            .as_array()
            .map(Vec::len),
        Some(2)
    );
    env.hook(
        "claude",
        &event(&env, "cc-2", "SessionEnd", json!({"reason": "other"})),
    );

    // Ended, as what it is; its lock is gone, the other window's is not; the session lives.
    let claude = agent_of_cli(&env, "claude");
    assert_eq!(claude["state"], "ended", "{claude}");
    let locks = env.maos_json(&["lock", "list"]);
    assert!(
        matches!(locks["locks"].as_array().map(Vec::as_slice), Some([l]) if l["path"] == "docs/a.md"),
        "{locks}"
    );
    assert_eq!(env.maos_json(&["ps"])[0]["state"], "running");
    // The briefing's next steps are commands that work: no `maos resume` of a window; the
    // Claude Code conversation can be resumed by its own id.
    let brief = env.maos_json(&["brief"]);
    let text = brief["text"].as_str().expect("text");
    assert!(!text.contains("maos resume --agent"), "{text}");
    assert!(text.contains("claude --resume cc-2"), "{text}");

    // A live window is never taken for a lost one: a restarted daemon's recovery looks at
    // every window before it answers, and this one's process runs (its pid and start time).
    env.maos_json(&["daemon", "stop"]);
    let mut restart = env.maos_cmd_in(&env.project, &["--json", "lock", "list"]);
    restart.env("MAOS_TEST_SWEEP_MS", "100");
    let out = maos_tests::run_with_timeout(restart, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let locks: Value = serde_json::from_slice(&out.stdout).expect("lock list");
    assert_eq!(locks["locks"][0]["path"], "docs/a.md", "{locks}");
    assert_eq!(agent_of_cli(&env, "codex")["state"], "running");

    // The Codex CLI dies without a word: the daemon notices, ends its window, frees its lock,
    // and the session, whose last window that was, completes.
    codex.kill9();
    wait_until(Duration::from_secs(20), "the dead window is ended", || {
        agent_of_cli(&env, "codex")["state"] == "ended"
    });
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    let all = env.maos_json(&["ps", "--all"]);
    assert_eq!(all[0]["state"], "completed", "{all:#}");
    let ended = env.events(&["--type", "agent_ended"]);
    assert!(
        ended.iter().any(|e| e["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("CLI process") && r.contains("is gone"))),
        "{ended:?}"
    );
    let ps = env.maos_json(&["ps"]);
    assert!(
        agents_in(&ps).iter().all(|a| a["state"] == "ended"),
        "no ghosts: {ps:#}"
    );

    // The next window starts a new session and is told how the last one stood.
    let out = env.hook(
        "claude",
        &event(&env, "cc-3", "SessionStart", json!({"source": "startup"})),
    );
    let v: Value = serde_json::from_slice(&out.stdout).expect("a briefing");
    let context = v["hookSpecificOutput"]["additionalContext"]
        .as_str()
        .unwrap_or_default();
    assert!(
        context.starts_with("maos: this window starts a new session of this project.")
            && context.contains("Fix the bug"),
        "{context}"
    );
}

#[test]
fn a_background_subagents_result_is_its_own_not_a_prompt() {
    let env = Env::new();
    let w = "cc-4";
    env.hook(
        "claude",
        &event(&env, w, "SessionStart", json!({"source": "startup"})),
    );
    env.hook(
        "claude",
        &event(&env, w, "UserPromptSubmit", json!({"prompt": "Review it"})),
    );
    let spawn = json!({"tool_name": "Agent", "tool_use_id": "toolu_bg",
        "tool_input": {"description": "review", "prompt": "Review src/", "subagent_type": "reviewer"}});
    env.hook("claude", &event(&env, w, "PreToolUse", spawn.clone()));
    env.hook(
        "claude",
        &event(
            &env,
            w,
            "SubagentStart",
            json!({"agent_id": "sub-9", "agent_type": "reviewer"}),
        ),
    );
    let mut launched = spawn.clone();
    launched["tool_response"] = json!({"status": "async_launched", "agentId": "sub-9"});
    env.hook("claude", &event(&env, w, "PostToolUse", launched));
    // The main thread's turn ends before its background subagent does.
    env.hook(
        "claude",
        &event(&env, w, "Stop", json!({"stop_hook_active": false})),
    );
    let sub = || {
        agents_in(&env.maos_json(&["ps", "--all"]))
            .into_iter()
            .find(|a| a["role"] == "reviewer")
            .expect("the subagent")
    };
    assert_eq!(sub()["state"], "running");
    let notice = "<task-notification>\n<task-id>sub-9</task-id>\n<tool-use-id>toolu_bg</tool-use-id>\n\
        <status>completed</status>\n<summary>Agent \"review\" completed</summary>\n\
        <usage><subagent_tokens>4321</subagent_tokens><tool_uses>5</tool_uses><duration_ms>9000</duration_ms></usage>\n\
        </task-notification>";
    env.hook(
        "claude",
        &event(&env, w, "UserPromptSubmit", json!({"prompt": notice})),
    );

    let sub = sub();
    assert_eq!(sub["state"], "completed", "{sub}");
    let results = env.events(&["--type", "subagent_result"]);
    let last = results.last().expect("a result");
    assert_eq!(last["agent_id"], sub["id"], "{results:?}");
    assert_eq!(last["data"]["total_tokens"], 4321);
    assert_eq!(last["data"]["total_tool_use_count"], 5);
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert_eq!(
        prompts.len(),
        1,
        "the notification is no prompt: {prompts:?}"
    );
    assert_eq!(
        env.maos_json(&["brief"])["context"]["subagent_tokens"],
        4321
    );
}
