//! Human text shows ids short (`agt_1a2b3c4d`), as README promises (issue 29: full 32-digit
//! ids in errors, the briefing and deny texts); `--json` keeps them whole.

use maos_tests::{Env, Value, started};

/// The first run of 32 hex digits in `text` (a whole id), if any.
fn whole_id(text: &str) -> Option<String> {
    let mut run = String::new();
    for c in text.chars() {
        if c.is_ascii_hexdigit() {
            run.push(c);
            if run.len() == 32 {
                return Some(run);
            }
        } else {
            run.clear();
        }
    }
    None
}

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// A hook's deny reason (an agent paused) names the agent by its short id.
#[test]
fn a_deny_reason_says_short_ids() {
    let env = Env::new();
    let cwd = env.project.to_string_lossy().into_owned();
    env.hook(
        "claude",
        &serde_json::json!({"session_id": "w-1", "cwd": cwd, "hook_event_name": "UserPromptSubmit",
            "prompt": "Split the lexer"}),
    );
    let ps = env.maos_json(&["ps"]);
    let window = ps[0]["agents"][0]["id"]
        .as_str()
        .expect("the window's agent")
        .to_string();
    env.maos_json(&["pause", "--agent", &window, "--reason", "lunch"]);
    let out = env.hook(
        "claude",
        &serde_json::json!({"session_id": "w-1", "cwd": cwd, "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_use_id": "toolu_1",
            "tool_input": {"file_path": format!("{cwd}/src/x.rs"), "content": "x"}}),
    );
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(text.contains("deny"), "{}", maos_tests::describe(&out));
    assert!(
        text.contains(&format!("maos resume --agent {}`", short(&window))),
        "how to resume it, by its short id: {text}"
    );
    assert_eq!(whole_id(&text), None, "{text}");
}

/// `maos brief` (the text agents and people read) says short ids; `brief --json` keeps the
/// whole ones in its fields.
#[test]
fn the_briefing_says_short_ids() {
    let env = Env::new();
    let sid = started::session(&env, "brief");
    let a = started::agent(&env, "dev", "writes the lexer");
    env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a]);
    let b = started::agent(&env, "tester", "tests it");
    env.maos_json(&["agent", "fail", &b, "--reason", "the tests broke"]);
    let out = env.maos(&["brief"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let text = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        text.contains(short(&a)) && text.contains(short(&b)) && text.contains(short(&sid)),
        "the agents and the session, short:\n{text}"
    );
    assert_eq!(whole_id(&text), None, "{text}");
    let json = env.maos_json(&["brief"]);
    assert_eq!(json["session_id"], sid.as_str(), "{json}");
}

/// Errors a person reads (stderr) say short ids; the `--json` error object keeps whole ones.
#[test]
fn errors_say_short_ids() {
    let env = Env::new();
    let sid = started::session(&env, "errors");
    let a = started::agent(&env, "dev", "works");
    env.maos_json(&["agent", "complete", &a]);
    let b = env.agent(None, "dev", "works too");
    let cases: Vec<Vec<String>> = vec![
        vec!["pause".into(), "--agent".into(), a.clone()],
        vec!["agent".into(), "start".into(), a.clone()],
        vec![
            "agent".into(),
            "register".into(),
            "--role".into(),
            "x".into(),
            "--task".into(),
            "y".into(),
            "--parent".into(),
            "agt_".into(),
        ],
        vec![
            "note".into(),
            "decision".into(),
            "z".into(),
            "--agent".into(),
            "agt_".into(),
        ],
    ];
    let mut named = 0;
    for args in &cases {
        let out = env.maos(args);
        assert!(
            !out.status.success(),
            "{args:?}: {}",
            maos_tests::describe(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(whole_id(&err), None, "maos {args:?}: {err}");
        if err.contains(short(&a)) || err.contains(short(&b)) {
            named += 1;
        }
        // --json: the error object as the daemon said it.
        let mut json = vec!["--json".to_string()];
        json.extend(args.iter().cloned());
        let out = env.maos(&json);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
            panic!(
                "maos {json:?}: no JSON error ({e}): {}",
                maos_tests::describe(&out)
            )
        });
        assert!(v["error"]["message"].is_string(), "{v}");
    }
    assert!(named >= 2, "the errors name the agents by their short ids");
    let _ = sid;
}
