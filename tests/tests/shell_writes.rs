//! Shell commands are read before they run (issue 31 §1): a command that writes a file another
//! agent holds (`sed -i`, `>`, a here-document, `rm -r` of its directory, a patch through the
//! shell) is denied naming the holder, in Claude Code's `Bash`, Codex's shell and Gemini CLI's
//! `run_shell_command`; a free file it writes is locked for the caller, as an edit tool's; an
//! ordinary command is never denied. Real `maos hook` processes, the real daemon.

use std::process::Output;

use maos_tests::{Env, Value, json};

fn event(env: &Env, window: &str, name: &str, extra: Value) -> Value {
    maos_tests::hook_input(&env.project, window, name, extra)
}

fn hook(env: &Env, cli: &str, input: &Value) -> Output {
    env.hook(cli, input)
}

/// The denial's reason printed by the hook, or "" when it allowed.
fn denial(out: &Output) -> String {
    maos_tests::denial_reason(out)
}

fn start(env: &Env, cli: &str, window: &str, prompt: &str) {
    let (start, prompt_event) = match cli {
        "gemini" => ("SessionStart", "BeforeAgent"),
        _ => ("SessionStart", "UserPromptSubmit"),
    };
    hook(
        env,
        cli,
        &event(env, window, start, json!({"source": "startup"})),
    );
    hook(
        env,
        cli,
        &event(env, window, prompt_event, json!({"prompt": prompt})),
    );
}

fn bash(env: &Env, window: &str, command: &str) -> Output {
    hook(
        env,
        "claude",
        &event(
            env,
            window,
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": format!("toolu_{window}"),
                   "tool_input": {"command": command}}),
        ),
    )
}

fn held(env: &Env) -> Vec<(String, String)> {
    let list = env.maos_json(&["lock", "list"]);
    list["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| {
            (
                l["path"].as_str().unwrap_or_default().to_string(),
                l["mode"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// Window "holder" (Claude Code) holds src/x.rs through its Write tool.
fn holding(env: &Env) {
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::fs::write(env.project.join("src/x.rs"), "fn x() {}\n").unwrap();
    start(env, "claude", "holder", "Rewrite the lexer");
    let out = hook(
        env,
        "claude",
        &event(
            env,
            "holder",
            "PreToolUse",
            json!({"tool_name": "Write", "tool_use_id": "toolu_h",
                   "tool_input": {"file_path": env.project.join("src/x.rs"), "content": "x"}}),
        ),
    );
    assert_eq!(denial(&out), "");
}

#[test]
fn a_claude_code_bash_write_to_a_held_file_is_denied_naming_the_holder() {
    let env = Env::new();
    holding(&env);
    start(&env, "claude", "other", "Tidy up");
    for command in [
        "sed -i 's/x/y/' src/x.rs",
        "echo 'fn y() {}' > src/x.rs",
        "cd src && cat > x.rs <<'EOF'\nfn z() {}\nEOF",
        "true && (cd src; tee -a x.rs < /dev/null)",
        "bash -c \"perl -pi -e 's/x/y/' src/x.rs\"",
        "rm -rf src",
        "mv src/x.rs src/old.rs",
    ] {
        let why = denial(&bash(&env, "other", command));
        assert!(
            why.contains("src/x.rs") || why.contains("src"),
            "{command:?} is denied naming the file: {why:?}"
        );
        assert!(
            why.contains("Rewrite the lexer"),
            "{command:?}: the holder's task: {why:?}"
        );
    }
    // Nothing of the denied commands is held by the other window.
    assert_eq!(held(&env), [("src/x.rs".to_string(), "write".to_string())]);
}

#[test]
fn a_free_file_a_command_writes_is_locked_for_the_caller() {
    let env = Env::new();
    holding(&env);
    start(&env, "claude", "other", "Write the notes");
    let out = bash(&env, "other", "mkdir -p docs && echo hi > docs/notes.md");
    assert_eq!(denial(&out), "");
    let locks = held(&env);
    assert!(
        locks.contains(&("docs/notes.md".to_string(), "write".to_string())),
        "{locks:?}"
    );
    // So the holder is now refused it, through its own edit tool.
    let out = hook(
        &env,
        "claude",
        &event(
            &env,
            "holder",
            "PreToolUse",
            json!({"tool_name": "Edit", "tool_use_id": "toolu_e",
                   "tool_input": {"file_path": env.project.join("docs/notes.md"),
                                  "old_string": "hi", "new_string": "ho"}}),
        ),
    );
    assert!(denial(&out).contains("Write the notes"), "{}", denial(&out));
}

#[test]
fn ordinary_commands_are_never_denied() {
    let env = Env::new();
    holding(&env);
    start(&env, "claude", "other", "Run the tests");
    for command in [
        "cargo test 2>&1 | tail -20",
        "grep -rn 'fn x' src/ | head",
        "cat src/x.rs",
        "git status && git diff src/x.rs && git log --oneline -5",
        "ls -la src > /dev/null 2>&1",
        "cargo build --release 2>/dev/null || echo failed >&2",
        "rg x src/x.rs | wc -l",
    ] {
        assert_eq!(denial(&bash(&env, "other", command)), "", "{command:?}");
    }
    assert_eq!(held(&env).len(), 1, "nothing taken: {:?}", held(&env));
}

#[test]
fn codex_shell_and_gemini_cli_run_shell_command_are_read_too() {
    let env = Env::new();
    holding(&env);
    start(&env, "codex", "cx", "Port the parser");
    let out = hook(
        &env,
        "codex",
        &event(
            &env,
            "cx",
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_1",
                   "tool_input": {"command": "sed -i 's/x/y/' src/x.rs"}}),
        ),
    );
    assert!(denial(&out).contains("Rewrite the lexer"), "{out:?}");
    // A patch through the shell in a form only a parser finds.
    let patch = "if true; then apply_patch <<'EOF'\n*** Begin Patch\n*** Update File: src/x.rs\n@@\n-fn x() {}\n+fn y() {}\n*** End Patch\nEOF\nfi";
    let out = hook(
        &env,
        "codex",
        &event(
            &env,
            "cx",
            "PreToolUse",
            json!({"tool_name": "Bash", "tool_use_id": "call_2",
                   "tool_input": {"command": patch}}),
        ),
    );
    assert!(denial(&out).contains("Rewrite the lexer"), "{out:?}");

    start(&env, "gemini", "gm", "Document it");
    let out = hook(
        &env,
        "gemini",
        &event(
            &env,
            "gm",
            "BeforeTool",
            json!({"tool_name": "run_shell_command",
                   "tool_input": {"command": "echo '// doc' >> src/x.rs"}}),
        ),
    );
    assert!(
        denial(&out).contains("Rewrite the lexer"),
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
}
