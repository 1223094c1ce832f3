//! Which `Agent` call started each Claude Code subagent (issue 32 §4), through real `maos hook`
//! processes and a real daemon. Claude Code 2.1.328 and newer write
//! `<transcript without .jsonl>/subagents/agent-<agentId>.meta.json` (with the spawning call's
//! `toolUseId` and `description`) before the subagent's first model request, so before its
//! first tool call but after its `SubagentStart` hook: the hook reads it and the daemon ties
//! the subagent to its call for certain. Without it, the order of events is a guess, which a
//! certain tie corrects and which never overrides one.

use std::path::PathBuf;
use std::process::Output;

use maos_tests::{Env, decision};
use serde_json::{Value, json};

/// The window's transcript, as Claude Code names it (its meta files go beside it).
fn transcript(env: &Env) -> PathBuf {
    env.root().join("user/.claude/projects/p/window.jsonl")
}

/// Claude Code's meta file for the subagent `agent`, started by the call `tool_use_id`.
fn write_meta(env: &Env, agent: &str, tool_use_id: &str, description: &str) {
    let dir = env.root().join("user/.claude/projects/p/window/subagents");
    std::fs::create_dir_all(&dir).expect("create the subagents directory");
    let meta = json!({"agentType": "general-purpose", "isBuiltIn": true,
        "description": description, "toolUseId": tool_use_id, "spawnDepth": 1,
        "requestShape": "background"});
    std::fs::write(
        dir.join(format!("agent-{agent}.meta.json")),
        meta.to_string(),
    )
    .expect("write the meta file");
}

/// `maos hook` (Claude Code) with `input`, which gets the window's session and transcript.
fn hook(env: &Env, mut input: Value) -> Output {
    input["session_id"] = json!("window");
    input["cwd"] = json!(env.project);
    input["transcript_path"] = json!(transcript(env));
    let out = env.hook_at(
        &env.project,
        &["hook", "--cli", "claude"],
        input.to_string().into_bytes(),
        &[],
        false,
    );
    assert!(out.status.success(), "maos hook: {out:?}");
    out
}

/// The main thread's `Agent` call `id` ("first": task `first: first, please`).
fn request(env: &Env, id: &str, desc: &str) {
    hook(
        env,
        json!({"hook_event_name": "PreToolUse", "tool_name": "Agent", "tool_use_id": id,
               "tool_input": {"description": desc, "prompt": format!("{desc}, please"),
                              "subagent_type": "general-purpose"}}),
    );
}

fn subagent_start(env: &Env, agent: &str) {
    hook(
        env,
        json!({"hook_event_name": "SubagentStart", "agent_id": agent,
               "agent_type": "general-purpose"}),
    );
}

/// A `Write` of `file` in the project, by the subagent `agent` (the main thread if `None`).
fn write(env: &Env, agent: Option<&str>, file: &str) -> Output {
    let mut input = json!({"hook_event_name": "PreToolUse", "tool_name": "Write",
        "tool_use_id": format!("toolu_write_{file}"),
        "tool_input": {"file_path": env.project.join(file), "content": "x"}});
    if let Some(a) = agent {
        input["agent_id"] = json!(a);
        input["agent_type"] = json!("general-purpose");
    }
    hook(env, input)
}

/// The PostToolUse of a background `Agent` call `id`: launched, naming its subagent.
fn launched(env: &Env, id: &str, agent: &str) {
    hook(
        env,
        json!({"hook_event_name": "PostToolUse", "tool_name": "Agent", "tool_use_id": id,
               "tool_input": {"description": "x", "prompt": "x", "subagent_type": "general-purpose"},
               "tool_response": {"isAsync": true, "status": "async_launched",
                                 "agentId": agent}}),
    );
}

/// Every agent of the session, as `session show` has it (with its CLI's ids).
fn agents(env: &Env) -> Vec<Value> {
    let session = env.maos_json(&["session", "show"]);
    session["agents"].as_array().cloned().unwrap_or_default()
}

/// maos's agent for the Claude Code subagent `agent`.
fn agent_of(env: &Env, agent: &str) -> Value {
    let agents = agents(env);
    agents
        .iter()
        .find(|a| a["external_agent_id"] == agent)
        .cloned()
        .unwrap_or_else(|| panic!("{agent} is not in the session: {agents:#?}"))
}

/// The task of the subagent `agent` (by its Claude Code id).
fn task_of(env: &Env, agent: &str) -> String {
    agent_of(env, agent)["task"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// The Claude Code subagent id of maos's agent `id`.
fn sub_id(env: &Env, id: &str) -> Option<String> {
    let agents = agents(env);
    let a = agents.iter().find(|a| a["id"] == id)?;
    a["external_agent_id"].as_str().map(str::to_string)
}

/// What the main thread's write of `file` was told (the denial's reason).
fn denial_of_main_write(env: &Env, file: &str) -> String {
    let out = write(env, None, file);
    assert_eq!(decision(&out), "deny", "{out:?}");
    let v: Value = serde_json::from_slice(&out.stdout).expect("the denial");
    v["hookSpecificOutput"]["permissionDecisionReason"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

/// Two subagents start in the other order than their calls: the first to speak is guessed
/// to be the first call's, wrongly. Its first tool call carries Claude Code's meta file, which
/// corrects the guess at once (not only when its result comes back): a denial another agent
/// reads names its true task.
#[test]
fn the_meta_file_corrects_a_wrong_guess_before_anyone_is_told() {
    let env = Env::new();
    request(&env, "toolu_1", "first");
    request(&env, "toolu_2", "second");
    // sub-2 speaks first, before its meta file is written (as Claude Code does).
    subagent_start(&env, "sub-2");
    assert_eq!(task_of(&env, "sub-2"), "first: first, please", "the guess");
    write_meta(&env, "sub-2", "toolu_2", "second");
    write_meta(&env, "sub-1", "toolu_1", "first");
    assert_eq!(decision(&write(&env, Some("sub-2"), "two.txt")), "");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
    let reason = denial_of_main_write(&env, "two.txt");
    assert!(
        reason.contains("task: \"second: second, please\""),
        "the denial names the wrong task: {reason}"
    );
    // sub-1 then takes the first call, for certain.
    subagent_start(&env, "sub-1");
    assert_eq!(task_of(&env, "sub-1"), "first: first, please");
    assert_eq!(decision(&write(&env, Some("sub-1"), "one.txt")), "");
    let reason = denial_of_main_write(&env, "one.txt");
    assert!(
        reason.contains("task: \"first: first, please\""),
        "the denial names the wrong task: {reason}"
    );
}

/// A background launch's PostToolUse (its `agentId`) comes before its subagent's first event,
/// while another subagent had guessed that launch's call. The launch names a subagent maos
/// has not seen: it is not the guesser (which is another subagent), and the guesser takes the
/// other call. Before, the result went to the guesser and the launched subagent ended with no
/// task at all.
#[test]
fn a_launch_before_its_subagent_speaks_is_not_taken_for_the_guesser() {
    let env = Env::new();
    request(&env, "toolu_1", "first");
    request(&env, "toolu_2", "second");
    subagent_start(&env, "sub-2");
    launched(&env, "toolu_1", "sub-1");
    assert_eq!(task_of(&env, "sub-1"), "first: first, please");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
    subagent_start(&env, "sub-1");
    launched(&env, "toolu_2", "sub-2");
    assert_eq!(task_of(&env, "sub-1"), "first: first, please");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
    // Each launch's result is its own subagent's.
    let results = env.events(&["--type", "subagent_result"]);
    let by_call: Vec<(String, String)> = results
        .iter()
        .map(|r| {
            let agent = r["agent_id"].as_str().unwrap_or_default();
            (
                r["data"]["tool_use_id"].as_str().unwrap_or_default().into(),
                sub_id(&env, agent).unwrap_or_default(),
            )
        })
        .collect();
    assert_eq!(
        by_call,
        [
            ("toolu_1".to_string(), "sub-1".to_string()),
            ("toolu_2".to_string(), "sub-2".to_string())
        ]
    );
}

/// A subagent tied for certain keeps its call whatever comes after: a later subagent's
/// guess takes only an open call, and a meta file that names the call again changes nothing.
/// A subagent whose call maos never heard of takes the meta file's description.
#[test]
fn a_guess_never_takes_a_call_tied_for_certain() {
    let env = Env::new();
    request(&env, "toolu_1", "first");
    request(&env, "toolu_2", "second");
    // sub-2 speaks first, its meta file already written: it names the second call.
    write_meta(&env, "sub-2", "toolu_2", "second");
    subagent_start(&env, "sub-2");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
    // sub-1 has no meta file yet: the only open call is the first.
    subagent_start(&env, "sub-1");
    assert_eq!(task_of(&env, "sub-1"), "first: first, please");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
    // A meta file for a call maos never saw (its PreToolUse did not reach maos).
    write_meta(&env, "sub-3", "toolu_3", "third, unannounced");
    subagent_start(&env, "sub-3");
    assert_eq!(decision(&write(&env, Some("sub-3"), "three.txt")), "");
    assert_eq!(task_of(&env, "sub-3"), "third, unannounced");
    assert_eq!(task_of(&env, "sub-1"), "first: first, please");
    assert_eq!(task_of(&env, "sub-2"), "second: second, please");
}

/// An agent id that could name another file (`..`, `/`) or a meta file that is not Claude
/// Code's ties nothing: the order of events decides, as without a meta file.
#[test]
fn a_hostile_agent_id_or_a_garbled_meta_file_ties_nothing() {
    let env = Env::new();
    request(&env, "toolu_1", "first");
    request(&env, "toolu_2", "second");
    // What `../sub-x` would name if it were not refused: `subagents/agent-../sub-x.meta.json`
    // is `subagents/sub-x.meta.json`, which names the second call. And a garbled one for sub-y.
    let dir = env.root().join("user/.claude/projects/p/window/subagents");
    std::fs::create_dir_all(dir.join("agent-..")).expect("mkdir");
    let meta = json!({"toolUseId": "toolu_2", "description": "second"});
    std::fs::write(dir.join("sub-x.meta.json"), meta.to_string()).expect("write");
    std::fs::write(dir.join("agent-sub-y.meta.json"), "{\"toolUseId\": 7").expect("write");
    for agent in ["../sub-x", "sub-y"] {
        subagent_start(&env, agent);
        assert_eq!(decision(&write(&env, Some(agent), "f.txt")), "", "{agent}");
        hook(
            &env,
            json!({"hook_event_name": "SubagentStop", "agent_id": agent,
                   "agent_type": "general-purpose"}),
        );
    }
    // Each took the oldest open call, as a guess would.
    assert_eq!(task_of(&env, "../sub-x"), "first: first, please");
    assert_eq!(task_of(&env, "sub-y"), "second: second, please");
}
