//! The conflict radar (issue 35) with the real Claude Code (the pinned release of
//! `maos_tests::claude::VERSION`, offline against a scripted fake model on 127.0.0.1, maos's
//! hooks registered by `maos install-hooks`): the project is a real git repository, the window
//! works in its main worktree (A) and another agent (B, `maos hook` calls as its window would
//! make them) in a linked worktree (`git worktree add`), where it left an uncommitted edit of
//! line 5 of `src/api.rs`. The real window reads the file and writes line 5 its own way, then
//! writes the file again (the radar learns of A's first write off the hook's path, so the first
//! write's answer cannot know yet; the script holds the second write until `maos radar` shows
//! the pair). Checked from the three sides: the model's request after the second write carries
//! the radar's PostToolUse context with B's diff and B's agent (what the model was told), both
//! writes went through (not denied, on disk), and maos's `radar` / `radar_conflict` events.

use std::path::Path;
use std::time::Duration;

use maos_tests::claude::{
    FakeModel, Run, call, claude, say, texts_with, tool_result, tool_result_in, write,
};
use maos_tests::conformance::{Gate, runnable, short, window_of};
use maos_tests::{Env, Value, git, json, wait_until, window_hook};

const TEN: &str = "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n";
const PROMPT: &str = "MAOS-CONFORMANCE: edit line 5 of src/api.rs";

#[test]
fn claude_codes_write_conflicting_with_another_worktree_is_told_the_other_diff() {
    let Some(claude) = runnable("Claude Code", claude()) else {
        return;
    };
    if maos_tests::sqlite_only("the radar is off in fleet mode") {
        return;
    }
    let env = Env::new();
    // The project is a real repository (Env made a bare `.git` directory): `src/api.rs` and
    // maos's hooks committed, and B's linked worktree.
    std::fs::remove_dir_all(env.project.join(".git")).expect("remove the stand-in .git");
    git(&env.project, &["init", "-q", "-b", "main"]);
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::fs::write(env.project.join("src/api.rs"), TEN).unwrap();
    env.maos_json(&["install-hooks"]);
    git(&env.project, &["add", "-A"]);
    git(&env.project, &["commit", "-q", "-m", "base"]);
    let wb = env.root().join("agent-b");
    git(
        &env.project,
        &[
            "worktree",
            "add",
            "-q",
            "-b",
            "agent-b",
            wb.to_str().unwrap(),
        ],
    );

    // B: a window in its worktree edits line 5 (allowed, written, reported), and its turn ends
    // (its lock is given back; its edit stays uncommitted).
    window_hook(
        &env,
        &wb,
        "window-b",
        "SessionStart",
        json!({"source": "startup"}),
    );
    window_hook(
        &env,
        &wb,
        "window-b",
        "UserPromptSubmit",
        json!({"prompt": "work in b"}),
    );
    let b_file = wb.join("src/api.rs");
    let b_content = TEN.replace("5\n", "five from b\n");
    let input = json!({"tool_name": "Write", "tool_use_id": "toolu_b_write",
                       "tool_input": {"file_path": b_file, "content": b_content}});
    let out = window_hook(&env, &wb, "window-b", "PreToolUse", input.clone());
    assert_eq!(maos_tests::denial_reason(&out), "", "B may write");
    std::fs::write(&b_file, &b_content).unwrap();
    window_hook(&env, &wb, "window-b", "PostToolUse", input);
    window_hook(&env, &wb, "window-b", "Stop", json!({}));

    // A: the real window reads the file, writes line 5, then (once the radar knows) writes the
    // file again.
    let file = env.project.join("src/api.rs");
    let first = TEN.replace("5\n", "five from a\n");
    let second = first.replacen("1\n", "one\n", 1);
    let known = Gate::default();
    let (gate, target) = (known.clone(), file.clone());
    let (a1, a2) = (first.clone(), second.clone());
    let model = FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            say("ok")
        } else if !req.has("toolu_read") {
            vec![call("toolu_read", "Read", json!({"file_path": target}))]
        } else if !req.has("toolu_write_1") {
            vec![write("toolu_write_1", &target, &a1)]
        } else if !req.has("toolu_write_2") {
            // Held until `maos radar` shows A and B's conflict (the test opens the gate).
            gate.wait();
            vec![write("toolu_write_2", &target, &a2)]
        } else {
            say("Done.")
        }
    });
    let run = Run::start(&env, &claude, &model, PROMPT);
    model.wait_result("toolu_write_1", "the window's first write was answered");
    let mut pairs = Vec::new();
    let shown = maos_tests::holds_within(Duration::from_secs(20), || {
        pairs = env
            .maos_json(&["radar"])
            .as_array()
            .cloned()
            .unwrap_or_default();
        !pairs.is_empty()
    });
    known.open();
    assert!(shown, "the radar never showed A and B's conflict");
    let out = run.finish();
    assert!(out.status.success(), "claude failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Done.");

    // The radar's side: one pair, the window's worktree and B's, line 5 of src/api.rs.
    let [pair] = &pairs[..] else {
        panic!("not one pair: {pairs:#?}")
    };
    let window = window_of(&env, PROMPT);
    let sides: Vec<&Value> = vec![&pair["a"], &pair["b"]];
    let (a_side, b_side) = match sides.iter().position(|s| {
        s["agents"]
            .as_array()
            .is_some_and(|a| a.contains(&json!(window)))
    }) {
        Some(0) => (sides[0], sides[1]),
        Some(_) => (sides[1], sides[0]),
        None => panic!("the window {window} is on neither side: {pair:#}"),
    };
    let b_agent = b_side["agents"][0].as_str().expect("B's agent").to_string();
    assert_ne!(b_agent, window);
    assert_eq!(
        Path::new(b_side["worktree"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        wb.canonicalize().unwrap(),
        "{pair:#}"
    );
    assert_eq!(
        Path::new(a_side["worktree"].as_str().unwrap())
            .canonicalize()
            .unwrap(),
        env.project.canonicalize().unwrap(),
        "{pair:#}"
    );
    assert_eq!(pair["files"][0]["path"], "src/api.rs", "{pair:#}");
    assert_eq!(pair["files"][0]["kind"], "contents", "{pair:#}");

    // The model's side: both writes succeeded (a predicted conflict is no denial); the request
    // after the second carries maos's radar context with B's diff and B's agent.
    let requests = model.conversation("MAOS-CONFORMANCE");
    for id in ["toolu_write_1", "toolu_write_2"] {
        let result = tool_result(&requests, id);
        assert_ne!(result["is_error"], true, "{id}: {result}");
    }
    let next = requests
        .iter()
        .find(|r| tool_result_in(r, "toolu_write_2").is_some())
        .expect("the request with the second write's result");
    // What this request brought that the one after the first write did not (the first write's
    // answer may or may not have known of the conflict yet: the radar runs off the hook path).
    let before = requests
        .iter()
        .find(|r| tool_result_in(r, "toolu_write_1").is_some())
        .expect("the request with the first write's result");
    let earlier = texts_with(&before["messages"], "maos radar").len();
    let told = texts_with(&next["messages"], "maos radar");
    eprintln!("the radar's context as the model received it: {told:#?}");
    let [told] = &told[earlier..] else {
        panic!("not one new radar context in the model's request: {told:#?}")
    };
    assert!(
        told.starts_with("PostToolUse:Write hook additional context: maos radar: "),
        "{told}"
    );
    assert!(told.contains("src/api.rs"), "{told}");
    assert!(told.contains("+five from b"), "B's diff: {told}");
    assert!(told.contains("-5"), "B's diff: {told}");
    assert!(told.contains(short(&b_agent)), "B's agent: {told}");
    assert!(!told.contains("five from a"), "A's own change: {told}");

    // The disk: the window's second write; B's edit untouched.
    assert_eq!(std::fs::read_to_string(&file).unwrap(), second);
    assert_eq!(std::fs::read_to_string(&b_file).unwrap(), b_content);
    // maos's view: no denial, and the conflict recorded on both sides' sessions.
    assert_eq!(env.events(&["--type", "tool_denied"]), Vec::<Value>::new());
    wait_until(
        Duration::from_secs(10),
        "a radar_conflict for each side",
        || env.events(&["--type", "radar_conflict"]).len() >= 2,
    );
}
