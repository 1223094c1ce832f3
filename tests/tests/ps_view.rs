//! What `maos ps` shows: the spawn tree, each agent under its own parent whatever order the
//! agents were registered in (issue 15: a child registered after another top-level agent was
//! drawn under that one, while `ps --json` was right), and how many agents are done.

use maos_tests::Env;

/// The agent lines of `maos ps`: (indentation, short id).
fn agent_lines(text: &str) -> Vec<(usize, String)> {
    text.lines()
        .filter_map(|l| {
            let at = l.find("└ ")?;
            let id = l[at + "└ ".len()..].split_whitespace().next()?;
            Some((at, id.to_string()))
        })
        .collect()
}

#[test]
fn a_child_is_drawn_under_its_own_parent() {
    let env = Env::new();
    env.session("tree", &[]);
    let lead = env.agent(None, "lead", "leads");
    let other = env.agent(None, "other", "does other things");
    let child = env.create(&[
        "agent",
        "register",
        "--role",
        "child",
        "--task",
        "helps the lead",
        "--parent",
        &lead,
    ]);
    let out = env.maos(&["ps"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let short = |id: &str| id.get(..12).unwrap_or(id).to_string();
    let lines = agent_lines(&text);
    let ids: Vec<&str> = lines.iter().map(|(_, id)| id.as_str()).collect();
    assert_eq!(
        ids,
        [short(&lead), short(&child), short(&other)],
        "the child right under its parent:\n{text}"
    );
    assert!(
        lines[1].0 > lines[0].0 && lines[2].0 == lines[0].0,
        "the child indented under lead, other at lead's level:\n{text}"
    );
}

/// `AGENTS done/all` counts what got to its end: failed and cancelled agents are final, but not
/// done.
#[test]
fn failed_and_cancelled_agents_are_not_counted_as_done() {
    let env = Env::new();
    env.session("count", &[]);
    env.maos_json(&["session", "start"]);
    let ids: Vec<String> = ["ok", "bad", "gone", "busy"]
        .iter()
        .map(|r| env.agent(None, r, "work"))
        .collect();
    for id in &ids {
        env.maos_json(&["agent", "start", id]);
    }
    env.maos_json(&["agent", "complete", &ids[0]]);
    env.maos_json(&["agent", "fail", &ids[1]]);
    env.maos_json(&["agent", "cancel", &ids[2]]);
    let text = String::from_utf8_lossy(&env.maos(&["ps"]).stdout).into_owned();
    let row = text
        .lines()
        .find(|l| l.starts_with("sess_"))
        .unwrap_or_else(|| panic!("no session row:\n{text}"));
    let agents = row.split_whitespace().nth(4).unwrap_or_default();
    assert_eq!(agents, "1/4", "{row}");
}

/// Words a person reads: plurals right, times labelled, reasons that read as English (issue
/// 15: "1 sessions", "session(s)", "reason=is completed").
#[test]
fn counts_and_reasons_read_right() {
    let env = Env::new();
    let sid = env.session("words", &[]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "writer", "writes");
    env.maos_json(&["agent", "start", &a]);
    env.maos_json(&["lock", "acquire", "notes.md", "--agent", &a]);
    env.maos_json(&["agent", "complete", &a]);
    let released = env.events(&["--type", "lock_released"]);
    assert_eq!(
        released[0]["data"]["reason"], "agent completed",
        "{released:?}"
    );
    env.maos_json(&["session", "complete", &sid]);
    let out = env.maos(&["gc", "--older-than", "0s", "--dry-run"]);
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.starts_with("would delete 1 finished session that ended before ")
            && text.lines().next().is_some_and(|l| l.ends_with(" UTC")),
        "{text}"
    );
}

/// The agent line of `maos ps` whose id starts like `id`.
fn line_of<'a>(text: &'a str, id: &str) -> &'a str {
    let short = id.get(..12).unwrap_or(id);
    text.lines()
        .find(|l| l.contains(&format!("└ {short}")))
        .unwrap_or_else(|| panic!("no line for {short}:\n{text}"))
}

/// NOW (issue 15): what each agent does at this moment — the item of its own task list in
/// progress and its last tool call for a CLI window, the lock a waiting agent waits for — with
/// its CLI, under a header naming the project.
#[test]
fn ps_shows_what_each_agent_does_now_and_the_project() {
    let env = Env::new();
    let run = |input: serde_json::Value| {
        env.hook("claude", &input);
    };
    let cwd = env.project.to_string_lossy().into_owned();
    run(
        serde_json::json!({"session_id": "w-1", "cwd": cwd, "hook_event_name": "UserPromptSubmit", "prompt": "Split the lexer"}),
    );
    run(
        serde_json::json!({"session_id": "w-1", "cwd": cwd, "hook_event_name": "PostToolUse",
        "tool_name": "TodoWrite", "tool_use_id": "toolu_t",
        "tool_input": {"todos": [
            {"content": "Read the parser", "status": "completed"},
            {"content": "Move tokens to lexer.rs", "status": "in_progress"}]},
        "tool_response": {}}),
    );
    run(
        serde_json::json!({"session_id": "w-1", "cwd": cwd, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_w",
        "tool_input": {"file_path": format!("{cwd}/src/lexer.rs"), "content": "x"}}),
    );

    let ps = env.maos_json(&["ps"]);
    let window = ps[0]["agents"][0]["id"]
        .as_str()
        .expect("window agent")
        .to_string();
    assert_eq!(
        ps[0]["agents"][0]["todo"], "Move tokens to lexer.rs",
        "{ps}"
    );

    // A second agent waits for the window's lock.
    let waiter = env.agent(None, "tester", "runs the tests");
    let _wait = env.spawn_maos(&[
        "lock",
        "acquire",
        "src/lexer.rs",
        "--agent",
        &waiter,
        "--wait",
        "60s",
    ]);
    maos_tests::wait_until(
        std::time::Duration::from_secs(10),
        "the waiter queued",
        || {
            let ps = env.maos_json(&["ps"]);
            ps[0]["agents"]
                .as_array()
                .is_some_and(|a| a.iter().any(|a| a["waits"][0]["path"] == "src/lexer.rs"))
        },
    );

    let out = env.maos(&["ps"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let root = maos_tests::Env::project_root(&env.project);
    assert_eq!(
        text.lines().next(),
        Some(format!("project {root}").as_str()),
        "{text}"
    );
    assert!(!text.contains('\x1b'), "no colour into a pipe:\n{text}");
    let w = line_of(&text, &window);
    assert!(
        w.contains(" claude ")
            && w.contains("Move tokens to lexer.rs (Write src/lexer.rs, ")
            && w.contains(" ago)"),
        "the window's CLI, todo and last tool:\n{text}"
    );
    let t = line_of(&text, &waiter);
    assert!(
        t.contains("waits for write src/lexer.rs ("),
        "the waiter's NOW:\n{text}"
    );
    for cmd in ["status", "brief"] {
        let out = env.maos(&[cmd]);
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        assert_eq!(
            text.lines().next(),
            Some(format!("project {root}").as_str()),
            "maos {cmd}:\n{text}"
        );
    }
}
