//! Hostile hook input: whatever an agent CLI (or anything else) writes on stdin, parsing never
//! panics and every refusal is one line saying what is wrong.

use super::input::{MAX_INPUT, call_of, parse, read_value};
use proptest::prelude::*;
use serde_json::{Value, json};

fn one_line(e: &str) -> Result<(), TestCaseError> {
    prop_assert!(!e.is_empty(), "empty error");
    prop_assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
    Ok(())
}

/// Any JSON value, a few levels deep.
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<f64>().prop_map(Value::from),
        ".{0,20}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// A text that is sometimes a Codex patch envelope.
fn patchy() -> impl Strategy<Value = String> {
    let line = prop_oneof![
        Just("*** Begin Patch".to_string()),
        Just("*** End Patch".to_string()),
        ".{0,12}".prop_map(|p| format!("*** Add File: {p}")),
        ".{0,12}".prop_map(|p| format!("*** Update File: {p}")),
        ".{0,12}".prop_map(|p| format!("*** Delete File: {p}")),
        ".{0,12}".prop_map(|p| format!("*** Move to: {p}")),
        ".{0,12}".prop_map(|t| format!("+{t}")),
        ".{0,12}",
    ];
    (
        prop::collection::vec(line, 0..8),
        prop_oneof![Just("\n"), Just("\r\n")],
    )
        .prop_map(|(lines, nl)| lines.join(nl))
}

/// A value for one of the keys a hook input has: mostly the right type, sometimes not.
fn field_value() -> impl Strategy<Value = Value> {
    prop_oneof![
        3 => ".{0,16}".prop_map(Value::String),
        2 => patchy().prop_map(Value::String),
        1 => json_value(),
    ]
}

/// Something shaped like a hook input: known keys (with plausible or wrong values) and junk.
fn hook_like() -> impl Strategy<Value = Value> {
    let event = prop_oneof![
        Just("SessionStart"),
        Just("UserPromptSubmit"),
        Just("PreToolUse"),
        Just("PostToolUse"),
        Just("SubagentStop"),
        Just("Stop"),
    ];
    let tool = prop_oneof![
        Just("Write"),
        Just("Edit"),
        Just("MultiEdit"),
        Just("NotebookEdit"),
        Just("apply_patch"),
        Just("Agent"),
        Just("Task"),
        Just("Bash"),
    ];
    let input_keys = prop::sample::select(vec![
        "file_path",
        "notebook_path",
        "content",
        "new_string",
        "new_source",
        "edits",
        "command",
        "input",
        "patch",
        "description",
        "prompt",
        "subagent_type",
    ]);
    let top_keys = prop::sample::select(vec![
        "agent_id",
        "agent_type",
        "tool_use_id",
        "cwd",
        "source",
        "reason",
        "trigger",
        "prompt",
        "tool_response",
    ]);
    (
        prop::option::weighted(0.9, event),
        prop::option::weighted(0.9, ".{0,12}"),
        prop::option::weighted(0.8, tool),
        prop::collection::vec((input_keys, field_value()), 0..6),
        prop::collection::vec((top_keys, field_value()), 0..6),
        prop::collection::vec(
            (
                Just("edits"),
                prop::collection::vec(
                    prop_oneof![
                        ".{0,8}".prop_map(|s| json!({"new_string": s})),
                        json_value()
                    ],
                    0..4,
                )
                .prop_map(Value::Array),
            ),
            0..2,
        ),
    )
        .prop_map(|(event, session, tool, input, top, edits)| {
            let mut v = json!({});
            if let Some(e) = event {
                v["hook_event_name"] = json!(e);
            }
            if let Some(s) = session {
                v["session_id"] = json!(s);
            }
            if let Some(t) = tool {
                v["tool_name"] = json!(t);
            }
            let mut ti = json!({});
            for (k, x) in input.into_iter().chain(edits) {
                ti[k] = x;
            }
            v["tool_input"] = ti;
            for (k, x) in top {
                v[k] = x;
            }
            v
        })
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any bytes at all: a value or a one-line refusal, never a panic.
    #[test]
    fn arbitrary_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..256)) {
        if let Err(e) = parse(&bytes[..], MAX_INPUT) {
            one_line(&e)?;
        }
    }

    /// Any text, and text that looks like JSON (the structural characters are frequent).
    #[test]
    fn arbitrary_text_never_panics(
        text in prop_oneof![".{0,64}", "[\\[\\]{}\":,0-9a-z \\\\ntfe.-]{0,64}"]
    ) {
        if let Err(e) = parse(text.as_bytes(), MAX_INPUT) {
            one_line(&e)?;
        }
    }

    /// Any JSON value: an object with the two required strings is a call, anything else is a
    /// one-line refusal.
    #[test]
    fn arbitrary_json_never_panics(v in json_value()) {
        let text = serde_json::to_string(&v).unwrap();
        match parse(text.as_bytes(), MAX_INPUT) {
            Ok(call) => {
                prop_assert_eq!(Some(call.event.as_str()), v["hook_event_name"].as_str());
                prop_assert_eq!(Some(call.session_id.as_str()), v["session_id"].as_str());
            }
            Err(e) => {
                one_line(&e)?;
                prop_assert!(
                    !(v["hook_event_name"].is_string() && v["session_id"].is_string()),
                    "refused a well-formed call: {e}"
                );
            }
        }
    }

    /// Hook-shaped input with wrong types in every place: never a panic; the written size is
    /// that of the text sent, and a call survives the trip to the daemon (serde round trip).
    #[test]
    fn hook_like_input_never_panics(v in hook_like()) {
        match call_of(&v) {
            Ok(call) => {
                if let Some(w) = &call.written {
                    prop_assert_eq!(w.sha256.len(), 64);
                    if call.tool_name.as_deref() == Some("Write") {
                        let content = v["tool_input"]["content"].as_str().unwrap_or("");
                        prop_assert_eq!(w.bytes, content.len() as u64);
                    }
                }
                prop_assert!(call.written.is_none() || call.event == "PostToolUse");
                let wire = serde_json::to_string(&call).unwrap();
                let back: maos_proto::HookCall = serde_json::from_str(&wire).unwrap();
                prop_assert_eq!(serde_json::to_value(&back).unwrap(), serde_json::to_value(&call).unwrap());
            }
            Err(e) => {
                one_line(&e)?;
                prop_assert!(!(v["hook_event_name"].is_string() && v["session_id"].is_string()));
            }
        }
    }

    /// A cap below the input's size refuses it as too large, never as bad JSON.
    #[test]
    fn over_the_cap_says_so(pad in 1usize..512, limit in 8u64..256) {
        let text = format!(
            r#"{{"hook_event_name":"PostToolUse","session_id":"s","tool_input":{{"content":"{}"}}}}"#,
            "x".repeat(pad)
        );
        let r = read_value(text.as_bytes(), limit);
        if (text.len() as u64) <= limit {
            prop_assert!(r.is_ok(), "{r:?}");
        } else {
            let e = r.unwrap_err();
            one_line(&e)?;
            prop_assert!(e.contains("cap"), "{e}");
        }
    }
}

#[test]
fn deep_nesting_is_refused_in_one_line() {
    for (open, close) in [("[", "]"), ("{\"a\":", "}")] {
        let text = format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
        let e = parse(text.as_bytes(), MAX_INPUT).unwrap_err();
        assert!(e.contains("128 levels deep"), "{e}");
        assert!(!e.contains('\n'), "{e}");
    }
    // Deep inside a real call, too.
    let text = format!(
        r#"{{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{}1{}}}"#,
        "[".repeat(200),
        "]".repeat(200)
    );
    let e = parse(text.as_bytes(), MAX_INPUT).unwrap_err();
    assert!(e.contains("levels deep"), "{e}");
    // Up to the limit is fine.
    let text = format!(
        r#"{{"hook_event_name":"PreToolUse","session_id":"s","tool_input":{}1{}}}"#,
        "[".repeat(100),
        "]".repeat(100)
    );
    assert!(parse(text.as_bytes(), MAX_INPUT).is_ok());
}

#[test]
fn refusals_say_what_is_wrong() {
    let cases: [(&[u8], &str); 6] = [
        (b"", "not one JSON object"),
        (b"{\"hook_event_name\": ", "not one JSON object"),
        (b"\xff\xfe", "not one JSON object"),
        (b"[1, 2]", "not an object"),
        (b"{\"session_id\": \"s\"}", "no hook_event_name"),
        (
            b"{\"hook_event_name\": \"Stop\", \"session_id\": 7}",
            "no session_id",
        ),
    ];
    for (input, want) in cases {
        let e = parse(input, MAX_INPUT).unwrap_err();
        assert!(e.contains(want), "{input:?}: {e}");
        assert!(!e.contains('\n'), "{e}");
    }
}

#[test]
fn one_value_is_read_and_what_follows_is_left() {
    // Some CLIs keep stdin open: the first value is the call, whatever comes after is not read.
    let call = parse(
        &b"{\"hook_event_name\":\"Stop\",\"session_id\":\"s\"} trailing junk {"[..],
        MAX_INPUT,
    )
    .unwrap();
    assert_eq!(
        (call.event.as_str(), call.session_id.as_str()),
        ("Stop", "s")
    );
}

#[test]
fn a_todo_list_is_read_from_todowrite_after_the_call_only() {
    let items: Vec<Value> = (0..150)
        .map(|i| json!({"content": format!("item {i}\nmore"), "status": "pending"}))
        .collect();
    let call = |event: &str, tool: &str| {
        call_of(
            &json!({"session_id": "s", "hook_event_name": event, "tool_name": tool,
                        "tool_input": {"todos": items}}),
        )
        .expect("a call")
    };
    let todos = call("PostToolUse", "TodoWrite").todos.expect("the list");
    assert_eq!(todos.len(), 100, "capped");
    assert_eq!(todos[0].content, "item 0");
    assert_eq!(todos[0].status, "pending");
    assert!(call("PreToolUse", "TodoWrite").todos.is_none());
    assert!(call("PostToolUse", "Write").todos.is_none());
    // Not a list: no list, and no error either (the hook never fails the tool).
    let odd = call_of(&json!({"session_id": "s", "hook_event_name": "PostToolUse",
                              "tool_name": "TodoWrite", "tool_input": {"todos": "nope"}}))
    .expect("a call");
    assert!(odd.todos.is_none());
}

/// `maos hook [--cli NAME]` is read before clap: the CLI named, Claude Code by default, a
/// one-line error for an unknown name, and anything else left to clap.
#[test]
fn the_hook_reads_which_cli_calls_it_without_clap() {
    use maos_proto::Cli;
    let args = |a: &[&str]| super::fast_args(a.iter().map(std::ffi::OsString::from));
    assert_eq!(args(&["hook"]), Some(Ok(Cli::Claude)));
    assert_eq!(args(&["hook", "--cli", "codex"]), Some(Ok(Cli::Codex)));
    assert_eq!(args(&["hook", "--cli=gemini"]), Some(Ok(Cli::Gemini)));
    let Some(Err(e)) = args(&["hook", "--cli", "cursor"]) else {
        panic!("an unknown CLI is not refused")
    };
    assert!(
        e.contains("unknown agent CLI \"cursor\"") && e.contains("claude|codex|gemini"),
        "{e}"
    );
    assert_eq!(args(&["hook", "--help"]), None);
    assert_eq!(args(&["ps"]), None);
    assert_eq!(args(&[]), None);
}

/// The lookup of the calling CLI's process: the nearest ancestor that is not a shell, here the
/// test binary's parent (cargo or the test runner), with its start time.
#[test]
fn the_calling_cli_process_is_found() {
    let p = super::cli_process().expect("an ancestor process");
    assert_eq!(p.pid, std::os::unix::process::parent_id());
    assert!(p.start_time.is_some_and(|t| t > 0), "{p:?}");
    // The start time the daemon compares it with: field 22 of `/proc/<pid>/stat`, counted
    // from after the last `)` (field 3).
    let stat = std::fs::read_to_string(format!("/proc/{}/stat", p.pid)).expect("stat");
    let fields: Vec<&str> = stat
        .rsplit_once(')')
        .expect("comm")
        .1
        .split_whitespace()
        .collect();
    assert_eq!(p.start_time, fields[22 - 3].parse().ok(), "{stat}");
}
