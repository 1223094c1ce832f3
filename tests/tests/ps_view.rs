//! What `maos ps` shows: the spawn tree, each agent under its own parent whatever order the
//! agents were registered in (issue 15: a child registered after another top-level agent was
//! drawn under that one, while `ps --json` was right), and how many agents are done.

use maos_tests::{Env, started};

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
    started::session(&env, "count");
    let ids: Vec<String> = ["ok", "bad", "gone", "busy"]
        .iter()
        .map(|r| started::agent(&env, r, "work"))
        .collect();
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
    let sid = started::session(&env, "words");
    let a = started::agent(&env, "writer", "writes");
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

/// Every agent of `maos ps --json --all`, whatever its session.
fn all_agents(env: &Env) -> Vec<serde_json::Value> {
    let ps = env.maos_json(&["ps", "--all"]);
    ps.as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["agents"].as_array().cloned().unwrap_or_default())
        .collect()
}

/// Two Claude Code windows write the same file: the second is refused. Its NOW says so, with
/// who holds the file, instead of reading exactly like the holder's (issue 29); `--json` says
/// it in fields, with the holder's full id.
#[test]
fn a_refused_write_shows_as_a_refusal_not_as_the_holders_work() {
    let env = Env::new();
    let cwd = env.project.to_string_lossy().into_owned();
    let write = |window: &str| {
        let out = env.hook(
            "claude",
            &serde_json::json!({"session_id": window, "cwd": cwd, "hook_event_name": "PreToolUse",
                "tool_name": "Write", "tool_use_id": format!("toolu_{window}"),
                "tool_input": {"file_path": format!("{cwd}/src/x.rs"), "content": "x"}}),
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    assert!(!write("w-holder").contains("deny"));
    assert!(write("w-refused").contains("deny"));
    let agents = all_agents(&env);
    assert_eq!(agents.len(), 2, "two window agents: {agents:?}");
    // The refused one is the one whose last call was refused; on today's code neither says so.
    let refused = agents
        .iter()
        .find(|a| a["activity"].get("denied").is_some())
        .unwrap_or_else(|| panic!("no agent's activity says it was denied: {agents:?}"));
    let holder = agents
        .iter()
        .find(|a| a["id"] != refused["id"])
        .expect("the holder");
    let (holder_id, refused_id) = (
        holder["id"].as_str().expect("id").to_string(),
        refused["id"].as_str().expect("id").to_string(),
    );
    assert_eq!(
        refused["activity"]["denied"]["why"], "lock_conflict",
        "{refused}"
    );
    assert_eq!(
        refused["activity"]["denied"]["holder"],
        holder_id.as_str(),
        "the holder's full id in --json: {refused}"
    );
    assert!(holder["activity"].get("denied").is_none(), "{holder}");

    let out = env.maos(&["ps"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    let holder_short = &holder_id[..12];
    let r = line_of(&text, &refused_id);
    assert!(
        r.contains(&format!("denied Write src/x.rs (held by {holder_short})")),
        "the refusal, with the holder:\n{text}"
    );
    let h = line_of(&text, &holder_id);
    assert!(
        h.contains("Write src/x.rs, ") && !h.contains("denied"),
        "the holder's own write:\n{text}"
    );
}

/// A paused session's agents are held: `ps` shows them paused, not running (issue 29).
#[test]
fn the_agents_of_a_paused_session_show_paused() {
    let env = Env::new();
    let sid = started::session(&env, "held");
    let a = started::agent(&env, "dev", "works");
    env.maos_json(&["pause", &sid]);
    let text = String::from_utf8_lossy(&env.maos(&["ps"]).stdout).into_owned();
    let line = line_of(&text, &a);
    assert!(
        line.contains(" paused ") && !line.contains("running"),
        "the agent of a paused session:\n{text}"
    );
    env.maos_json(&["resume", &sid]);
    let text = String::from_utf8_lossy(&env.maos(&["ps"]).stdout).into_owned();
    assert!(line_of(&text, &a).contains(" running "), "{text}");
}
