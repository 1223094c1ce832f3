//! Conformance of shell commands with the real agent CLIs (issue 31 §4): the pinned Claude
//! Code, Codex and Gemini CLI (installed once into a cache outside the repository by
//! `tests/conformance/install.sh`) run offline against their scripted fake model APIs on
//! 127.0.0.1, with maos's hooks installed by `maos install-hooks` and the real maosd behind
//! them. While another agent holds `src/x.rs` (a registered agent's `maos lock acquire`), the
//! model asks the CLI's own shell tool to write it (`sed -i`, a `>` redirection; for Codex a
//! patch through the shell that only a parser finds): the CLI runs maos's hook, the command
//! never runs (the file's bytes are unchanged), and the model's next request carries the
//! denial naming the holder. An ordinary command (`ls`, `cat`, `git status`) runs, its output
//! reaching the model.
//!
//! Each test is one run of the CLI (its calls one after another, each after the previous
//! result came back). Where the client cannot be installed or started, the test skips with
//! the reason, and fails on CI (`CI` set).

use std::path::PathBuf;
use std::process::Command;

use maos_tests::claude::{FakeModel, call, claude, result_text, run_claude, say, tool_result};
use maos_tests::codex::{self, Step};
use maos_tests::conformance::{runnable, short, window_agent};
use maos_tests::gemini::{self, CUE, Call};
use maos_tests::{Env, Value, json};

/// The held file, relative to the project, and its bytes, which no denied command may change.
const HELD: &str = "src/x.rs";
const ORIGINAL: &str = "let a = 1;\n";
/// The commands that write the held file.
const SED: &str = "sed -i 's/a/b/' src/x.rs";
const REDIRECT: &str = "echo hi > src/x.rs";
/// An ordinary command: it writes nothing, and its output must reach the model.
const ORDINARY: &str = "ls src && cat src/x.rs && git status --short";

/// The project as a git repository with `src/x.rs` in it, and a registered agent of a
/// started session holding that file's lock: the holder's id.
fn hold(env: &Env) -> String {
    std::fs::create_dir_all(env.project.join("src")).expect("create src");
    std::fs::write(env.project.join(HELD), ORIGINAL).expect("write src/x.rs");
    let init = Command::new("git")
        .args(["init", "-q"])
        .current_dir(&env.project)
        .output()
        .expect("run git init");
    assert!(init.status.success(), "git init: {init:?}");
    env.session("conformance", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns src/x.rs");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", HELD, "--agent", &holder]);
    holder
}

/// The holder by role and short id, as a denial names it (and `maos ps` shows it).
fn named(holder: &str) -> String {
    format!("holder ({})", short(holder))
}

/// What must hold after the run, whatever the CLI: the held file's bytes are the original,
/// the lock is still the holder's alone, the denials (each of the held file alone) are
/// recorded for one agent that is not the holder (the window's), and nothing was recorded as
/// modified.
fn unchanged(env: &Env, holder: &str, denials: usize) -> Vec<Value> {
    assert_eq!(
        std::fs::read(env.project.join(HELD)).expect("read src/x.rs"),
        ORIGINAL.as_bytes(),
        "a denied command changed the held file"
    );
    let locks = env.maos_json(&["lock", "list"]);
    let locks = locks["locks"].as_array().expect("locks");
    assert!(
        matches!(&locks[..], [l] if l["path"] == HELD && l["holder"] == holder),
        "{locks:?}"
    );
    let denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(denied.len(), denials, "{denied:#?}");
    assert!(
        denied.iter().all(|d| d["data"]["paths"] == json!([HELD])),
        "not each a denial of {HELD} alone: {denied:#?}"
    );
    let first = denied.first().map(|d| d["agent_id"].clone());
    assert!(
        denied
            .iter()
            .all(|d| Some(&d["agent_id"]) == first.as_ref() && d["agent_id"] != holder),
        "{denied:#?}"
    );
    assert_eq!(
        env.events(&["--type", "file_modified"]),
        Vec::<Value>::new()
    );
    denied
}

// ---------------------------------------------------------------------------------------
// Claude Code: `Bash`.

/// The prefix Claude Code puts before a `PreToolUse` denial of `Bash` in the tool result.
const BASH_DENIED: &str = "PreToolUse:Bash hook error: ";

/// Claude Code with maos's hooks installed in a fresh environment; `None` (after saying why)
/// where the client cannot run here.
fn claude_setup() -> Option<(Env, PathBuf)> {
    let claude = runnable("Claude Code", claude())?;
    let env = Env::new();
    env.maos_json(&["install-hooks"]);
    Some((env, claude))
}

/// A fake model whose main thread runs `commands` through `Bash`, one per request (tool call
/// `toolu_sh_<i>`), each once the previous one's result came back, then ends its turn.
fn bash_script(commands: &'static [&'static str]) -> FakeModel {
    FakeModel::start(move |req| {
        if !req.of("MAOS-CONFORMANCE") {
            return say("ok");
        }
        let done = (0..commands.len())
            .take_while(|i| req.has(&format!("toolu_sh_{i}")))
            .count();
        match commands.get(done) {
            Some(command) => vec![call(
                &format!("toolu_sh_{done}"),
                "Bash",
                json!({"command": command, "description": "a shell command"}),
            )],
            None => say("Done."),
        }
    })
}

/// Claude Code's `Bash` runs `sed -i` and then `> file` on the file another agent holds: each
/// is denied by maos's hook before it runs (the file's bytes unchanged); the model receives
/// each denial as an error result, Claude Code's prefix then exactly maos's recorded reason,
/// which names the file and the holder. Then an ordinary command runs and its output (the
/// listing, the file's text, git's status) reaches the model.
#[test]
fn claude_code_bash_writes_to_a_held_file_are_denied_and_ordinary_commands_run() {
    let Some((env, claude)) = claude_setup() else {
        return;
    };
    let holder = hold(&env);
    let model = bash_script(&[SED, REDIRECT, ORDINARY]);
    let out = run_claude(&env, &claude, &model, "MAOS-CONFORMANCE: edit src/x.rs");
    assert!(out.status.success(), "claude failed: {out:?}");
    assert_eq!(String::from_utf8_lossy(&out.stdout).trim(), "Done.");

    let requests = model.conversation("MAOS-CONFORMANCE");
    let denials = unchanged(&env, &holder, 2);
    let window = window_agent(&env);
    for (i, denial) in denials.iter().enumerate() {
        let result = tool_result(&requests, &format!("toolu_sh_{i}"));
        let text = result_text(&result);
        eprintln!("the model received: {result}");
        assert_eq!(result["is_error"], true, "{result}");
        assert!(
            text.starts_with(&format!("{BASH_DENIED}maos: {HELD}")),
            "{text}"
        );
        assert!(text.contains(&named(&holder)), "holder not named: {text}");
        assert_eq!(denial["agent_id"], window.as_str(), "{denial}");
        let reason = denial["data"]["reason"].as_str().expect("reason");
        assert_eq!(text, format!("{BASH_DENIED}{reason}"));
    }
    let ordinary = tool_result(&requests, "toolu_sh_2");
    let text = result_text(&ordinary);
    eprintln!("the model received: {ordinary}");
    assert_ne!(ordinary["is_error"], true, "{ordinary}");
    assert!(text.contains("x.rs"), "no listing: {text}");
    assert!(text.contains(ORIGINAL.trim()), "no file text: {text}");
    assert!(text.contains("?? src/"), "no git status: {text}");
}

// ---------------------------------------------------------------------------------------
// Codex: its shell (`exec_command`, the `Bash` hook).

/// The patch through the shell: an `apply_patch` here-document inside `if …; then … fi`,
/// which Codex does not intercept (it runs it as a shell command) and which only a parser
/// finds.
fn nested_patch() -> String {
    format!(
        "if test -f src/x.rs; then apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: \
         src/x.rs\n@@\n-{}\n+let b = 2;\n*** End Patch\nEOF\nfi",
        ORIGINAL.trim()
    )
}

/// Codex's shell runs `sed -i`, `> file` and a nested `apply_patch` on the held file: each is
/// denied by maos's `Bash` hook before it runs (the file's bytes unchanged), and the model
/// receives Codex's "Command blocked by PreToolUse hook:" then maos's reason naming the file
/// and the holder. Then an ordinary command runs and its output reaches the model.
#[test]
fn codex_shell_writes_to_a_held_file_are_denied_and_ordinary_commands_run() {
    let Some(codex_bin) = runnable("Codex", codex::codex()) else {
        return;
    };
    let env = Env::new();
    let api = codex::model(vec![
        Step::Shell(SED.into()),
        Step::Shell(REDIRECT.into()),
        Step::Shell(nested_patch()),
        Step::Shell(ORDINARY.into()),
    ]);
    codex::configure(&env, &api);
    codex::install(&env);
    let holder = hold(&env);
    let out = codex::run_codex(&env, &codex_bin, "MAOS-CONFORMANCE: edit src/x.rs");
    assert!(out.status.success(), "codex failed: {out:?}");

    let got = codex::received(&api);
    eprintln!("the model received: {got:#?}");
    let [(_, sed), (_, redirect), (_, patch), (_, ordinary)] = &got[..] else {
        panic!("not four tool outputs: {got:?}")
    };
    for text in [sed, redirect, patch] {
        assert!(
            text.starts_with(&format!("Command blocked by PreToolUse hook: maos: {HELD}")),
            "{text}"
        );
        assert!(text.contains(&named(&holder)), "holder not named: {text}");
    }
    assert!(ordinary.contains("x.rs"), "no listing: {ordinary}");
    assert!(
        ordinary.contains(ORIGINAL.trim()),
        "no file text: {ordinary}"
    );
    assert!(ordinary.contains("?? src/"), "no git status: {ordinary}");
    unchanged(&env, &holder, 3);
}

// ---------------------------------------------------------------------------------------
// Gemini CLI: `run_shell_command`.

/// `run_shell_command` of `command`.
fn shell(command: &str) -> Call {
    Call {
        name: "run_shell_command",
        args: json!({"command": command, "description": "a shell command"}),
    }
}

/// Gemini CLI's `run_shell_command` runs `sed -i` and then `> file` on the held file (its
/// BeforeTool matcher, as `install-hooks --gemini` writes it, includes the tool): each is
/// denied before it runs (the file's bytes unchanged), the model receiving
/// "Tool execution blocked:" then maos's reason naming the file and the holder. Then an
/// ordinary command runs and its output reaches the model.
#[test]
fn gemini_cli_shell_writes_to_a_held_file_are_denied_and_ordinary_commands_run() {
    let Some(gemini_bin) = runnable("Gemini CLI", gemini::gemini()) else {
        return;
    };
    let env = Env::new();
    env.maos_json(&["install-hooks", "--gemini", "--yes"]);
    let holder = hold(&env);
    let api = gemini::fake_model(vec![shell(SED), shell(REDIRECT), shell(ORDINARY)]);
    let out = gemini::run_gemini(&env, &gemini_bin, &api, &format!("{CUE}: edit src/x.rs"));
    assert!(out.status.success(), "gemini failed: {out:?}");

    let results = gemini::tool_results(&api);
    eprintln!("the model received: {results:#?}");
    let [sed, redirect, ordinary] = &results[..] else {
        panic!("not three tool results: {results:?}")
    };
    for text in [sed, redirect] {
        assert!(
            text.contains(&format!("Tool execution blocked: maos: {HELD}")),
            "{text}"
        );
        assert!(text.contains(&named(&holder)), "holder not named: {text}");
    }
    assert!(!ordinary.contains("blocked"), "{ordinary}");
    assert!(ordinary.contains("x.rs"), "no listing: {ordinary}");
    assert!(
        ordinary.contains(ORIGINAL.trim()),
        "no file text: {ordinary}"
    );
    assert!(ordinary.contains("?? src/"), "no git status: {ordinary}");
    let denials = unchanged(&env, &holder, 2);
    assert!(
        denials
            .iter()
            .all(|d| d["data"]["tool"] == "run_shell_command"),
        "{denials:#?}"
    );
}
