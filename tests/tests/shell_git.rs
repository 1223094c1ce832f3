//! Git in a shared checkout (issue 31 §3), through the shell tools' hooks: a git command that
//! would discard or capture another agent's uncommitted work in files it holds is denied,
//! naming them (a capture with the command that leaves them out); what touches nobody's files
//! goes through; two agents' git commands that write the index take turns. Real `maos hook`
//! processes, the real daemon.

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, Value, json, wait_until};

fn event(env: &Env, window: &str, name: &str, extra: Value) -> Value {
    maos_tests::hook_input(&env.project, window, name, extra)
}

/// The denial's reason printed by the hook, or "" when it allowed.
fn denial(out: &Output) -> String {
    maos_tests::denial_reason(out)
}

fn start(env: &Env, window: &str, prompt: &str) {
    env.hook(
        "claude",
        &event(env, window, "SessionStart", json!({"source": "startup"})),
    );
    env.hook(
        "claude",
        &event(env, window, "UserPromptSubmit", json!({"prompt": prompt})),
    );
}

fn bash_event(env: &Env, window: &str, name: &str, command: &str) -> Value {
    event(
        env,
        window,
        name,
        json!({"tool_name": "Bash", "tool_use_id": format!("toolu_{window}"),
               "tool_input": {"command": command}}),
    )
}

fn bash(env: &Env, window: &str, command: &str) -> Output {
    env.hook("claude", &bash_event(env, window, "PreToolUse", command))
}

fn done(env: &Env, window: &str, command: &str) {
    env.hook("claude", &bash_event(env, window, "PostToolUse", command));
}

/// Window "holder" holds src/x.rs through its Write tool; "other" is a second window.
fn two_windows() -> Env {
    let env = Env::new();
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    start(&env, "holder", "Rewrite the lexer");
    start(&env, "other", "Ship the release");
    let out = env.hook(
        "claude",
        &event(
            &env,
            "holder",
            "PreToolUse",
            json!({"tool_name": "Write", "tool_use_id": "toolu_h",
                   "tool_input": {"file_path": env.project.join("src/x.rs"), "content": "x"}}),
        ),
    );
    assert_eq!(denial(&out), "");
    env
}

#[test]
fn commands_that_discard_others_work_are_denied_naming_it() {
    let env = two_windows();
    for command in [
        "git stash",
        "git stash push -m wip",
        "git checkout main",
        "git switch -c other && git reset --hard origin/main",
        "git reset --hard",
        "git clean -fd",
        "git restore src/x.rs",
        "git checkout -- src",
        "git pull --rebase",
    ] {
        let why = denial(&bash(&env, "other", command));
        assert!(
            why.contains("would discard") && why.contains("src/x.rs"),
            "{command:?}: {why:?}"
        );
        assert!(why.contains("Rewrite the lexer"), "{command:?}: {why:?}");
        done(&env, "other", command);
    }
    // Limited to files nobody holds, or only reading: through.
    for command in [
        "git checkout -- src/y.rs",
        "git restore docs/",
        "git stash list",
        "git log --oneline -3 && git diff",
    ] {
        assert_eq!(denial(&bash(&env, "other", command)), "", "{command:?}");
        done(&env, "other", command);
    }
    // What "other" restored it holds until its turn ends (a restore writes the files);
    // then the holder itself may stash its own work.
    env.hook("claude", &event(&env, "other", "Stop", json!({})));
    assert_eq!(denial(&bash(&env, "holder", "git stash")), "");
}

#[test]
fn commands_that_capture_others_work_are_denied_with_the_command_that_leaves_it_out() {
    let env = two_windows();
    let why = denial(&bash(&env, "other", "git add -A && git commit -m wip"));
    assert!(
        why.contains("would capture") && why.contains("Rewrite the lexer"),
        "{why:?}"
    );
    assert!(
        why.contains("`git add -A -- ':/' ':(top,exclude)src/x.rs'`"),
        "the exact command: {why:?}"
    );
    done(&env, "other", "git add -A && git commit -m wip");
    let why = denial(&bash(&env, "other", "git commit -am 'fix it'"));
    assert!(
        why.contains("`git add -u -- ':/' ':(top,exclude)src/x.rs' && git commit -m 'fix it'`"),
        "{why:?}"
    );
    done(&env, "other", "git commit -am 'fix it'");
    let why = denial(&bash(&env, "other", "git add src/x.rs src/y.rs"));
    assert!(why.contains("`git add -- ':(top)src/y.rs'`"), "{why:?}");
    done(&env, "other", "git add src/x.rs src/y.rs");
    // Its own files: through.
    assert_eq!(denial(&bash(&env, "other", "git add src/y.rs")), "");
    done(&env, "other", "git add src/y.rs");
    let events = env.events(&["--type", "tool_denied"]);
    assert!(
        events
            .iter()
            .any(|e| e["data"]["why"] == "git_captures_held"),
        "recorded: {events:?}"
    );
}

fn spawn_bash(
    env: &Env,
    window: &str,
    command: &str,
    vars: &[(&str, &str)],
) -> std::process::Child {
    let mut cmd = env.maos_cmd_at(&env.project, &["hook", "--cli", "claude"]);
    cmd.envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("spawn maos hook");
    let input = bash_event(env, window, "PreToolUse", command).to_string();
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(input.as_bytes())
        .expect("write the hook's input");
    child
}

fn index_waiters(env: &Env) -> usize {
    let list = env.maos_json(&["lock", "list"]);
    list["waiters"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|w| w["path"] == ".git/index")
        .count()
}

#[test]
fn two_agents_git_commands_take_turns_at_the_index() {
    let env = two_windows();
    start(&env, "third", "Tag it");
    // "other" runs `git add`: its turn at the index, for the command's duration.
    assert_eq!(denial(&bash(&env, "other", "git add src/y.rs")), "");
    let held = env.maos_json(&["lock", "list"]);
    assert!(
        held["locks"]
            .as_array()
            .unwrap()
            .iter()
            .any(|l| l["path"] == ".git/index"),
        "{held:#}"
    );
    // "third"'s commit waits for it (a whole-tree one too: the index is nobody's work) ...
    // (The holder's turn is over: nobody holds work in the tree.)
    env.hook("claude", &event(&env, "holder", "Stop", json!({})));
    let waiting = spawn_bash(&env, "third", "git add -A && git commit -m 'tag'", &[]);
    wait_until(
        Duration::from_secs(10),
        "the commit waits for the index",
        || index_waiters(&env) == 1,
    );
    // ... and goes on once the add is done.
    done(&env, "other", "git add src/y.rs");
    let out = waiting.wait_with_output().expect("the waiting hook");
    assert!(out.status.success(), "{out:?}");
    assert_eq!(denial(&out), "", "{out:?}");
    // A command that keeps the index past the hook's budget: the waiter is told why.
    let slow = spawn_bash(
        &env,
        "other",
        "git add src/z.rs",
        &[("MAOS_HOOK_TIMEOUT_MS", "1500")],
    );
    let out = slow.wait_with_output().expect("the slow hook");
    let why = denial(&out);
    assert!(
        why.contains("another agent's git command is using this repository's index"),
        "{why:?} {out:?}"
    );
}
