//! Text from outside (an agent's prompt, a task, an objective, a note, a file's name) reaches a
//! person's terminal only made safe (issue 30, defect 7): the human output of every command
//! that shows it holds no control character (C0 but the layout's newlines, DEL, C1) and no
//! bidirectional override, and the text is still there, its controls shown escaped
//! (`^[` for ESC, `<U+202E>` for a bidi override). `--json` keeps the text exact.

use maos_tests::{Env, describe};
use serde_json::json;

/// Everything a terminal obeys: ESC sequences that clear the screen and set the title, a bell,
/// a carriage return that rewrites the line, a newline that fakes a row, DEL, the C1 CSI, a
/// right-to-left override, a tab.
const EVIL: &str = "\u{202e}gnp.exe x\x1b[2J\x1b]0;pwned\x07 y\rfake\nrow\x7f z\u{9b}31m\ttab end";

/// Why `text` cannot go to a terminal as it is, if it cannot.
fn unsafe_char(text: &str) -> Option<char> {
    text.chars().find(|&c| {
        (c < ' ' && c != '\n')
            || c == '\x7f'
            || ('\u{80}'..='\u{9f}').contains(&c)
            || matches!(c, '\u{200e}' | '\u{200f}' | '\u{061c}' | '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}')
    })
}

/// `maos ARGS` succeeds and its output is safe for a terminal and shows the hostile text
/// escaped: what it printed.
fn shown(env: &Env, args: &[&str]) -> String {
    let out = env.maos(args);
    assert!(out.status.success(), "maos {args:?}: {}", describe(&out));
    let text = String::from_utf8(out.stdout.clone())
        .unwrap_or_else(|e| panic!("maos {args:?} printed no UTF-8: {e}"));
    if let Some(c) = unsafe_char(&text) {
        panic!("maos {args:?} printed the control {c:?} raw:\n{text:?}");
    }
    text
}

fn escaped(what: &str, text: &str) {
    assert!(
        text.contains("^[]0;pwned^G"),
        "{what} does not show the title sequence escaped:\n{text}"
    );
    assert!(
        text.contains("<U+202E>gnp.exe"),
        "{what} does not show the bidi override escaped:\n{text}"
    );
}

#[test]
fn hostile_text_reaches_the_terminal_escaped_in_every_human_view() {
    let env = Env::new();
    // A Claude Code window whose first prompt is hostile: its agent is labelled by it.
    let cli = "claude-esc";
    let start = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    env.hook("claude", &start);
    let prompt = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "UserPromptSubmit",
                        "prompt": format!("please {EVIL}")});
    env.hook("claude", &prompt);
    // It writes a file whose name is hostile: the lock and its events name it.
    let file = env.project.join(format!("src/a\x1b[31m{EVIL}.rs"));
    let write = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "PreToolUse",
                       "tool_name": "Write", "tool_use_id": "toolu_esc",
                       "tool_input": {"file_path": file, "content": "x"}});
    let out = env.hook("claude", &write);
    assert!(
        !String::from_utf8_lossy(&out.stdout).contains("deny"),
        "the write was refused: {}",
        describe(&out)
    );
    // A note, and a lock taken by hand on a hostile path.
    let sid = env.maos_json(&["ps"])[0]["id"]
        .as_str()
        .expect("the window's session")
        .to_string();
    let agent = env.agent(Some(&sid), "coder", &format!("task {EVIL}"));
    assert!(env.maos(&["note", "decision", EVIL]).status.success());
    let locked = env.maos(&["lock", "acquire", "--agent", &agent, &format!("b{EVIL}.rs")]);
    assert!(locked.status.success(), "{}", describe(&locked));
    // JSON keeps the text exact.
    let locks = env.maos_json(&["lock", "list"]);
    assert!(locks.to_string().contains("\\u001b]0;pwned"), "{locks}");

    for args in [
        &["ps"][..],
        &["ps", "--all"],
        &["events"],
        &["lock", "list"],
        &["brief"],
        &["status"],
        &["session", "show"],
        &["session", "list"],
        &["agent", "list"],
    ] {
        let text = shown(&env, args);
        escaped(&format!("maos {args:?}"), &text);
    }
    // The lock as `lock acquire` reports it.
    let text = String::from_utf8_lossy(&locked.stdout).into_owned();
    assert_eq!(unsafe_char(&text), None, "lock acquire printed {text:?}");
    escaped("lock acquire", &text);

    // A refusal that quotes the path, on stderr.
    let rival = env.agent(Some(&sid), "rival", "wants it");
    let refused = env.maos(&["lock", "acquire", "--agent", &rival, &format!("b{EVIL}.rs")]);
    assert!(!refused.status.success(), "{}", describe(&refused));
    let text = String::from_utf8_lossy(&refused.stderr).into_owned();
    assert_eq!(
        unsafe_char(&text),
        None,
        "lock acquire's refusal printed {text:?}"
    );
    escaped("the refusal", &text);

    // A finished, archived session in `history`.
    let other = env.session(EVIL, &[]);
    assert!(env.maos(&["session", "cancel", &other]).status.success());
    let archived = env.maos(&["session", "archive", &other]);
    assert!(archived.status.success(), "{}", describe(&archived));
    let text = shown(&env, &["history"]);
    escaped("maos history", &text);
}

/// `maos top` on a real terminal (tmux): the objective, the agent's role and task and the
/// recent events show their controls escaped; the screen is not cleared, nor the title set.
#[test]
fn maos_top_shows_hostile_text_escaped() {
    if !maos_tests::tmux::Tmux::available() {
        return;
    }
    let env = Env::new();
    let sid = env.session(EVIL, &[]);
    env.agent(Some(&sid), &format!("r{}", &EVIL[..20]), EVIL);
    let top = maos_tests::tmux::Tmux::start(&env, 160, 40, &["maos", "top"], &[]);
    let screen = top.wait_for("the objective, escaped", |s| {
        s.contains("<U+202E>gnp.exe x^[[2J^[]0;pwned^G")
    });
    assert_eq!(unsafe_char(&screen), None, "{screen}");
}
