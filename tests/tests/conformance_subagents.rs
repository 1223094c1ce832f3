//! Conformance with the real Claude Code: which `Agent` call started each subagent, under
//! races (issue 32 §4). Claude Code starts the subagents of one answer's parallel `Agent`
//! calls at once, and their first hook events come in any order; maos names each subagent by
//! the task of the call that started it, and a denial another agent reads names the holder by
//! that task. Claude Code writes `<transcript without .jsonl>/subagents/agent-<agentId>.meta.json`
//! with the spawning call's `toolUseId` before the subagent's first model request (not before
//! its `SubagentStart` hook: seen with 2.1.328 and 2.1.332), and the hook reads it to tie the
//! two for certain; the order of the events is only a fallback.
//!
//! Each race: the main thread's one answer starts two subagents, A and B. Each writes its own
//! file, waits until the other wrote its own, then tries to write the other's file: that is
//! denied (the other holds it until it stops), and the denial must name the other's task,
//! never its own or another pair's. Each finishes only once the other's second write was
//! answered, so both live (and hold) through both denials. Twenty races run in one
//! `claude -p` for foreground subagents (one pair after the other, as the main thread waits
//! for each pair) and twenty for background ones (two pairs per answer of the main thread,
//! four subagents racing, the next answer once they were all told); at the end every subagent
//! must still carry its own task (a background launch's PostToolUse may come before its
//! subagent's first event). Any wrong name fails, and the failure says how many of the forty
//! were wrong.

use std::path::PathBuf;
use std::time::Duration;

use maos_tests::claude::{
    Block, FakeModel, Req, Run, WRITE_DENIED, agent, claude, first_user_text, result_text, say,
    tool_result_in, write,
};
use maos_tests::conformance::{ps_agents, runnable};
use maos_tests::{Env, Value};

/// Races per run.
const RACES: usize = 20;
/// A run of twenty races, each a few model turns of a few hook calls.
const DEADLINE: Duration = Duration::from_secs(120);

/// The main thread's prompt (its conversation's marker).
const MAIN: &str = "MAOS-SUBAGENTS: race pairs of writers";

fn other(side: char) -> char {
    if side == 'A' { 'B' } else { 'A' }
}

/// A subagent's `Agent` call, its task's description, its own write, its write of the
/// other's file; its file.
fn spawn_id(race: usize, side: char) -> String {
    format!("toolu_spawn_{race:02}{side}")
}
fn description(race: usize, side: char) -> String {
    format!("writer {race:02}{side}")
}
fn own_id(race: usize, side: char) -> String {
    format!("toolu_own_{race:02}{side}")
}
fn cross_id(race: usize, side: char) -> String {
    format!("toolu_cross_{race:02}{side}")
}
fn file_name(race: usize, side: char) -> String {
    format!("race{race:02}{side}.txt")
}

/// The subagent's prompt: `MAOS-SUB 07A:` marks its conversation.
fn sub_marker(race: usize, side: char) -> String {
    format!("MAOS-SUB {race:02}{side}:")
}

/// The race and side of a subagent's conversation, from its first user message.
fn sub_of(body: &Value) -> Option<(usize, char)> {
    let text = first_user_text(body);
    let at = text.find("MAOS-SUB ")? + "MAOS-SUB ".len();
    let tag = text.get(at..at + 4)?;
    let race = tag.get(..2)?.parse().ok()?;
    let side = tag.chars().nth(2)?;
    (tag.ends_with(':') && matches!(side, 'A' | 'B')).then_some((race, side))
}

/// The fake model's script for [`RACES`] races of foreground or background subagents writing
/// in `dir`, `per_answer` races started by each answer of the main thread.
fn script(
    dir: PathBuf,
    background: bool,
    per_answer: usize,
) -> impl Fn(&Req<'_>) -> Vec<Block> + Send + Sync {
    move |req| {
        if let Some((race, side)) = sub_of(req.body) {
            let them = other(side);
            if !req.has(&own_id(race, side)) {
                let path = dir.join(file_name(race, side));
                return vec![write(&own_id(race, side), &path, "mine\n")];
            }
            if !req.has(&cross_id(race, side)) {
                // The other's file, once the other wrote it (and holds it).
                req.after_result(&own_id(race, them));
                let path = dir.join(file_name(race, them));
                return vec![write(&cross_id(race, side), &path, "theirs\n")];
            }
            // Alive (holding) until the other was denied too.
            req.after_result(&cross_id(race, them));
            return say("done");
        }
        if !req.of(MAIN) {
            return say("ok");
        }
        // The next races whose launches did not come back yet.
        let next =
            (0..RACES).find(|r| !req.has(&spawn_id(*r, 'A')) || !req.has(&spawn_id(*r, 'B')));
        if background {
            // Background subagents run on after their launch came back: the next ones start
            // once those before were both told (with a dozen or more running, Claude Code
            // 2.1.328 and 2.1.332 left some launched ones unstarted), and the turn ends (`-p`
            // may exit, ending the rest) only when every one was.
            for race in 0..next.unwrap_or(RACES) {
                for side in ['A', 'B'] {
                    req.after_result(&cross_id(race, side));
                }
            }
        }
        let Some(first) = next else {
            return say("Done.");
        };
        let mut blocks = say("Writers.");
        for race in first..(first + per_answer).min(RACES) {
            for side in ['A', 'B'] {
                let prompt = format!("{} write your file", sub_marker(race, side));
                blocks.push(agent(
                    &spawn_id(race, side),
                    &description(race, side),
                    &prompt,
                    background,
                ));
            }
        }
        blocks
    }
}

/// An environment with maos's Claude Code hooks installed in its project, and the client;
/// `None` (after saying why) where the client cannot run here.
fn setup() -> Option<(Env, PathBuf)> {
    let claude = runnable("Claude Code", claude())?;
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    Some((env, claude))
}

/// The result of the tool call `id` in any recorded request.
fn result_of(requests: &[Value], id: &str) -> Option<Value> {
    requests.iter().find_map(|r| tool_result_in(r, id))
}

/// Run the races and fail on any wrong name.
fn races(background: bool, per_answer: usize) {
    let Some((env, claude)) = setup() else { return };
    let model = FakeModel::start(script(env.project.clone(), background, per_answer));
    let out = Run::start(&env, &claude, &model, MAIN).finish_within(DEADLINE);
    assert!(out.status.success(), "claude failed: {out:?}");
    let requests = model.messages_requests();
    let mut wrong = Vec::new();
    let mut missing = Vec::new();
    for race in 0..RACES {
        for side in ['A', 'B'] {
            let holder = other(side);
            let Some(result) = result_of(&requests, &cross_id(race, side)) else {
                missing.push(format!("{race:02}{side}: no result of its second write"));
                continue;
            };
            let text = result_text(&result);
            if result["is_error"] != true || !text.starts_with(WRITE_DENIED) {
                missing.push(format!(
                    "{race:02}{side}: its second write was not denied: {text}"
                ));
                continue;
            }
            // The holder's task: its description, then its prompt's first line.
            let named = format!("task: \"{}: ", description(race, holder));
            if !text.contains(&named) {
                wrong.push(format!(
                    "{race:02}{side} was told of {race:02}{holder}'s file: {text}"
                ));
            }
        }
    }
    assert!(missing.is_empty(), "{}", missing.join("\n"));
    // maos's view at the end: the writer of each file carries the task of its own call.
    let agents = ps_agents(&env);
    let task_of = |id: &str| {
        agents
            .iter()
            .find(|a| a["id"] == id)
            .and_then(|a| a["task"].as_str())
            .unwrap_or("")
            .to_string()
    };
    let modified = env.events(&["--type", "file_modified"]);
    let mut lost = Vec::new();
    for race in 0..RACES {
        for side in ['A', 'B'] {
            let file = file_name(race, side);
            let by = modified
                .iter()
                .find(|e| e["data"]["path"] == file.as_str())
                .and_then(|e| e["agent_id"].as_str())
                .unwrap_or_else(|| panic!("no file_modified of {file}: {modified:#?}"));
            let task = task_of(by);
            if !task.starts_with(&format!("{}: ", description(race, side))) {
                lost.push(format!("the writer of {file} ({by}) has the task {task:?}"));
            }
        }
    }
    eprintln!(
        "{} of {} denials named the wrong task; {} of {} subagents ended with another task",
        wrong.len(),
        2 * RACES,
        lost.len(),
        2 * RACES
    );
    assert!(
        wrong.is_empty() && lost.is_empty(),
        "{} of {} denials named the wrong task; {} of {} subagents ended with another task:\n{}\n{}",
        wrong.len(),
        2 * RACES,
        lost.len(),
        2 * RACES,
        wrong.join("\n"),
        lost.join("\n")
    );
}

/// Two foreground subagents (`run_in_background: false`) per answer, twenty times.
#[test]
fn racing_foreground_subagents_are_each_named_by_their_own_call() {
    races(false, 1);
}

/// Two background subagents (Claude Code's default) per answer, twenty times.
#[test]
fn racing_background_subagents_are_each_named_by_their_own_call() {
    races(true, 2);
}
