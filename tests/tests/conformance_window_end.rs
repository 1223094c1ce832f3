//! Conformance with the real Claude Code: a window's end is final for its subagents (issue 32
//! §4). The window ends (SessionEnd) while a background subagent it started holds a lock and
//! has a hook call on its way to maos; that call arrives after maos recorded the end. It must
//! bring nothing back: no agent left running, no lock held, the session the hooks made
//! completed, and no second session (before, such a late call registered the window again in
//! a new session, with a running subagent holding locks, that nothing ever ended).
//!
//! What Claude Code 2.1.332 does, as observed here: `claude -p` ends its main turn while a
//! background subagent runs, but does not exit then: it waits for the subagent, gives the main
//! thread a turn with its result, and only then ends (SessionEnd). Its window ends earlier
//! when the client is told to stop (SIGTERM, as a closing terminal or a supervisor does):
//! SessionEnd (`reason: other`) comes at once, the running subagent is aborted and its hook
//! processes are killed, whole tree. A hook call that was already sent is not recalled, and
//! that is the call this test makes late on purpose: the project's hook command is wrapped
//! (as a user may wrap it) by a script that hands the subagent's last write's PreToolUse to a
//! process outside the client's tree, which sends it to `maos hook` once the test saw the
//! window's end in `maos events`. A second SessionEnd hook holds the client's exit until that
//! call was answered. Every step waits on a condition (a file, an event), not on time.

use std::path::Path;
use std::time::Duration;

use maos_tests::claude::{FakeModel, Run, agent, claude, say, tool_result_in, write};
use maos_tests::conformance::runnable;
use maos_tests::{Env, Value, holds_within, json};

/// The main thread's prompt (its conversation's marker).
const MAIN: &str = "MAOS-WINDOW-END: start a background writer, then finish";
/// The subagent's prompt (its conversation's marker).
const SUB: &str = "MAOS-LATE-WRITER: write your file";
/// The main thread's `Agent` call, the subagent's first write, its late write.
const SPAWN: &str = "toolu_spawn_late";
const OWN: &str = "toolu_own_late";
const LATE: &str = "toolu_late_write";
/// The file of the subagent's late write (the wrapper holds the hook call that names it).
const LATE_FILE: &str = "late.txt";
/// How long a step of the run (the client's, the wrapper's) may take.
const STEP: Duration = Duration::from_secs(20);
/// How long maos may take to settle once the late call was answered.
const SETTLE: Duration = Duration::from_secs(10);

/// The window's end as maos records it: the window's `agent_ended` from SessionEnd (`the
/// window ended (REASON)`).
fn window_ended(env: &Env) -> bool {
    env.events(&["--type", "agent_ended"]).iter().any(|e| {
        e["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.starts_with("the window ended"))
    })
}

/// A shell loop waiting (at most 20 s) until `file` exists.
fn wait_for(file: &Path) -> String {
    format!(
        "i=0; while [ ! -e '{}' ] && [ $i -lt 400 ]; do sleep 0.05; i=$((i+1)); done",
        file.display()
    )
}

/// The project's hooks, set up in `root`: every `maos hook` call goes through `hold.sh`, which
/// passes it on at once, except the PreToolUse of a write of [`LATE_FILE`]: that one it writes
/// to `late-input` (then `late-started`), and `deliver.sh`, started outside the client's
/// process tree, sends it once `release` exists, keeping the answer in `late-answer` (then
/// `late-done`). A second SessionEnd hook waits for `late-done`.
fn wrap_hooks(env: &Env, root: &Path) {
    let file = |name: &str| root.join(name).display().to_string();
    let hold = format!(
        r#"input=$(cat)
case "$input" in *{LATE_FILE}*)
  printf '%s' "$input" > '{input}'
  : > '{started}'
  (setsid sh '{deliver}' "$@" < /dev/null > /dev/null 2>&1 &)
  {wait_done}
  cat '{answer}'
  exit 0;;
esac
printf '%s' "$input" | exec maos "$@"
"#,
        input = file("late-input"),
        started = file("late-started"),
        deliver = file("deliver.sh"),
        wait_done = wait_for(&root.join("late-done")),
        answer = file("late-answer"),
    );
    let deliver = format!(
        "{wait_release}\nmaos \"$@\" < '{input}' > '{answer}'\n: > '{done}'\n",
        wait_release = wait_for(&root.join("release")),
        input = file("late-input"),
        answer = file("late-answer"),
        done = file("late-done"),
    );
    std::fs::write(root.join("hold.sh"), hold).expect("write hold.sh");
    std::fs::write(root.join("deliver.sh"), deliver).expect("write deliver.sh");
    let path = env.project.join(".claude/settings.json");
    let settings = std::fs::read_to_string(&path).expect("install-hooks wrote settings.json");
    let wrapped = settings.replace("\"maos hook", &format!("\"sh {} hook", file("hold.sh")));
    assert_ne!(wrapped, settings, "no `maos hook` command in {settings}");
    std::fs::write(&path, wrapped).expect("rewrite settings.json");
    let exit_held = json!({"hooks": {"SessionEnd": [{"hooks": [{"type": "command",
        "command": wait_for(&root.join("late-done")), "timeout": 25}]}]}});
    std::fs::write(
        env.project.join(".claude/settings.local.json"),
        exit_held.to_string(),
    )
    .expect("write settings.local.json");
}

/// maos's view: every session (`ps --all`) and the locks held.
fn view(env: &Env) -> Value {
    let sessions = env.maos_json(&["ps", "--all"]);
    let locks = env.maos_json(&["lock", "list"])["locks"].clone();
    json!({"sessions": sessions, "locks": locks})
}

/// One session, completed; no agent running; no lock held.
fn settled(view: &Value) -> bool {
    let all = view["sessions"].as_array().cloned().unwrap_or_default();
    let running = all
        .iter()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .any(|a| a["state"] == "running");
    all.len() == 1 && all[0]["state"] == "completed" && !running && view["locks"] == json!([])
}

/// A background subagent writes a file (holding its lock) and then another; the window ends
/// (SIGTERM) while that second write's hook call is on its way, and the call reaches maos only
/// after maos recorded the window's end.
#[test]
fn a_late_call_of_a_subagent_after_its_window_ended_brings_back_no_ghost() {
    let Some(claude) = runnable("Claude Code", claude()) else {
        return;
    };
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    let root = env.root();
    wrap_hooks(&env, &root);
    let dir = env.project.clone();
    let model = FakeModel::start(move |req| {
        if req.of(SUB) {
            if !req.has(OWN) {
                return vec![write(OWN, &dir.join("first.txt"), "mine\n")];
            }
            if !req.has(LATE) {
                return vec![write(LATE, &dir.join(LATE_FILE), "late\n")];
            }
            return say("done");
        }
        if !req.of(MAIN) {
            return say("ok");
        }
        if !req.has(SPAWN) {
            return vec![agent(SPAWN, "late writer", SUB, true)];
        }
        say("Done.")
    });
    let run = Run::start(&env, &claude, &model, MAIN);
    // The subagent holds first.txt and its write of late.txt is on its way.
    assert!(
        holds_within(STEP, || root.join("late-started").exists()),
        "the subagent's second write never reached its hook: {:#}",
        view(&env)
    );
    let holders = env.maos_json(&["lock", "list"])["locks"].clone();
    assert_eq!(holders.as_array().map(Vec::len), Some(1), "{holders:#}");
    // The window ends: SIGTERM, and SessionEnd as the client's own hook sends it.
    // SAFETY: kill(2) of the client this test started, not yet reaped (its Run waits for it).
    unsafe {
        libc::kill(run.pid() as libc::pid_t, libc::SIGTERM);
    }
    assert!(
        holds_within(STEP, || window_ended(&env)),
        "maos never recorded the window's end: {:#}",
        view(&env)
    );
    std::fs::write(root.join("release"), "").expect("write release");
    assert!(
        holds_within(STEP, || root.join("late-done").exists()),
        "the late call was never answered"
    );
    // maos's view as the late call left it (everything ended with the window at once).
    let at_late = view(&env);
    let answer = std::fs::read_to_string(root.join("late-answer")).unwrap_or_default();
    eprintln!("the late write's answer: {answer}");
    let out = run.finish();
    eprintln!("{out:?}");
    // Observed with 2.1.332: the aborted subagent never saw its late write's result.
    eprintln!(
        "the late write's result as the model saw it: {:?}",
        tool_result_in_any(&model, LATE)
    );

    // One session, completed; no agent running; no lock: right after the late call, and
    // still once the client is gone.
    assert!(
        settled(&at_late),
        "a subagent's call after its window ended left maos with a running agent, a lock or \
         a second session (the late write's answer: {answer:?}): {at_late:#}"
    );
    let settles = holds_within(SETTLE, || settled(&view(&env)));
    assert!(
        settles,
        "after its window ended, a subagent's late call left maos with a running agent, a \
         lock or a second session (late write's answer: {answer}): {:#}",
        view(&env)
    );
    // The late write was refused with the reason, not let through without a lock.
    assert!(
        answer.contains("\"deny\"") && answer.contains("window has ended"),
        "{answer}"
    );
}

/// The result of the tool call `id` in any request the model received.
fn tool_result_in_any(model: &FakeModel, id: &str) -> Option<Value> {
    model
        .messages_requests()
        .iter()
        .find_map(|r| tool_result_in(r, id))
}
