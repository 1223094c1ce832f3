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
