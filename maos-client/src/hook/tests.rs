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
                // A write tool's call that names no file is refused too (issue 29).
                let writer = matches!(
                    v["tool_name"].as_str(),
                    Some("Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "apply_patch"
                        | "write_file" | "replace")
                ) && matches!(v["hook_event_name"].as_str(), Some("PreToolUse" | "PostToolUse"));
                prop_assert!(
                    (writer && e.starts_with("hook input: a"))
                        || !(v["hook_event_name"].is_string() && v["session_id"].is_string()),
                    "refused: {}", e
                );
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

/// One Gemini CLI hook input as the real 0.61.0 sends it (no trailing newline).
fn gemini(event: &str, extra: Value) -> maos_proto::HookCall {
    use maos_proto::Cli;
    let mut v = json!({"session_id": "g1", "transcript_path": "/t.json", "cwd": "/repo/sub",
                       "hook_event_name": event, "timestamp": "2026-11-25T22:00:00.000Z"});
    for (k, x) in extra.as_object().expect("an object") {
        v[k] = x.clone();
    }
    let text = serde_json::to_string(&v).unwrap();
    assert!(!text.ends_with('\n'));
    super::input::parse_for(text.as_bytes(), MAX_INPUT, Cli::Gemini)
        .expect("a call")
        .0
}

/// Gemini CLI's events are read as the ones the daemon knows, with the CLI on the call; the
/// same names from another CLI are left as they are.
#[test]
fn gemini_events_map_onto_the_daemons() {
    use maos_proto::Cli;
    let cases = [
        ("BeforeTool", "PreToolUse"),
        ("AfterTool", "PostToolUse"),
        ("BeforeAgent", "UserPromptSubmit"),
        ("AfterAgent", "Stop"),
        ("SessionStart", "SessionStart"),
        ("SessionEnd", "SessionEnd"),
        ("BeforeModel", "BeforeModel"),
    ];
    for (theirs, ours) in cases {
        let call = gemini(theirs, json!({}));
        assert_eq!(call.event, ours, "{theirs}");
        assert_eq!(call.cli, Cli::Gemini);
        assert_eq!(call.cwd.as_deref(), Some("/repo/sub"));
    }
    let claude = super::input::parse_for(
        &br#"{"session_id": "s", "hook_event_name": "BeforeTool"}"#[..],
        MAX_INPUT,
        Cli::Claude,
    )
    .unwrap()
    .0;
    assert_eq!(
        (claude.event.as_str(), claude.cli),
        ("BeforeTool", Cli::Claude)
    );
    // The prompt of a turn, the trigger of a compression, the source and reason of a session.
    let prompt = gemini(
        "BeforeAgent",
        json!({"prompt": "\n  fix the parser\nthen more"}),
    );
    assert_eq!(prompt.summary.as_deref(), Some("fix the parser"));
    // Only a manual compression is one: Gemini CLI sends an automatic PreCompress before
    // every model turn, compressing or not.
    let compress = gemini("PreCompress", json!({"trigger": "manual"}));
    assert_eq!(compress.event, "PreCompact");
    assert_eq!(compress.source.as_deref(), Some("manual"));
    assert_eq!(
        gemini("PreCompress", json!({"trigger": "auto"})).event,
        "PreCompress"
    );
    assert_eq!(
        gemini("SessionStart", json!({"source": "resume"}))
            .source
            .as_deref(),
        Some("resume")
    );
    assert_eq!(
        gemini("SessionEnd", json!({"reason": "exit"}))
            .source
            .as_deref(),
        Some("exit")
    );
}

/// Gemini CLI `-p` puts the SessionStart context in front of BeforeAgent's `prompt` (seen
/// with 0.61.0: two hooks' contexts joined by a newline, `<` and `>` escaped, then a blank
/// line): the context maos gave is cut off, and the person's text is kept exactly, their `<`,
/// `>` and `&` too; a block that is not maos's, or not Gemini CLI's, is the person's.
#[test]
fn a_gemini_prompt_is_the_persons_without_maoss_session_start_context() {
    use super::input::gemini_prompt;
    let ours = "maos: this window starts a new session of this project. How the last one \
                stood, for context:\nmaos: briefing on session sess_1 (completed).\n\
                Objective: fix &lt;b&gt; & more\n";
    let person = "then tidy <parser> & its tests\n\nand more";
    let seen = format!("<hook_context>{ours}</hook_context>\n\n{person}");
    assert_eq!(gemini_prompt(&seen), person);
    let call = gemini("BeforeAgent", json!({ "prompt": seen }));
    assert_eq!(
        call.summary.as_deref(),
        Some("then tidy <parser> & its tests")
    );
    // Another hook's context beside maos's, before or after it: the whole block is the hooks'.
    for both in [
        format!("other hook &lt;/hook_context&gt; here\n{ours}"),
        format!("{ours}\nother hook &lt;/hook_context&gt; here"),
    ] {
        let seen = format!("<hook_context>{both}</hook_context>\n\n{person}");
        assert_eq!(gemini_prompt(&seen), person, "{seen}");
    }
    // Only the context: no prompt of the person's (no summary, the task stays unnamed).
    let only = format!("<hook_context>{ours}</hook_context>");
    assert_eq!(gemini_prompt(&only), "");
    assert_eq!(
        gemini("BeforeAgent", json!({ "prompt": only })).summary,
        None
    );
    // The person's own text, kept whole.
    let kept = [
        person.to_string(),
        String::new(),
        // Not at the start.
        format!("look: <hook_context>{ours}</hook_context>\n\n{person}"),
        // No line of maos's: another hook's, or the person's.
        format!("<hook_context>other hook's words</hook_context>\n\n{person}"),
        "<hook_context>the maos: way</hook_context>\n\nx".to_string(),
        // Not escaped as Gemini CLI escapes a context.
        format!("<hook_context>maos: a <b> c</hook_context>\n\n{person}"),
        // Not closed, or not followed by the blank line.
        format!("<hook_context>{ours}\n\n{person}"),
        format!("<hook_context>{ours}</hook_context> {person}"),
        format!("<hook_context>{ours}</hook_context>\n{person}"),
    ];
    for prompt in kept {
        assert_eq!(gemini_prompt(&prompt), prompt, "{prompt}");
    }
    // Another CLI's prompt, or another event of Gemini CLI's, is never touched.
    let claude = super::input::parse_for(
        serde_json::to_string(
            &json!({"session_id": "s", "hook_event_name": "UserPromptSubmit",
                                      "prompt": seen}),
        )
        .unwrap()
        .as_bytes(),
        MAX_INPUT,
        maos_proto::Cli::Claude,
    )
    .unwrap()
    .0;
    assert!(
        claude
            .summary
            .as_deref()
            .is_some_and(|s| s.starts_with("<hook_context>maos: ")),
        "{claude:?}"
    );
}

/// `write_file` and `replace` are writes: their path (relative to `cwd` as the model gave it,
/// resolved by the daemon) takes a lock before, and after the call what they sent is hashed,
/// never kept; other tools are not writes.
#[test]
fn gemini_write_tools_lock_their_path_and_hash_what_they_sent() {
    let write = json!({"tool_name": "write_file",
                       "tool_input": {"file_path": "notes/a.md", "content": "hello"}});
    let before = gemini("BeforeTool", write.clone());
    assert!(before.writes_files());
    assert_eq!(before.paths, ["notes/a.md"]);
    assert_eq!(before.written, None);
    let after = gemini("AfterTool", write);
    let w = after.written.expect("the write's size and hash");
    assert_eq!(w.bytes, 5);
    assert_eq!(
        w.sha256,
        "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824"
    );
    let replace = gemini(
        "AfterTool",
        json!({"tool_name": "replace", "tool_input": {"file_path": "/repo/b.rs",
               "instruction": "rename", "old_string": "a", "new_string": "hello",
               "allow_multiple": false}}),
    );
    assert!(replace.writes_files());
    assert_eq!(replace.paths, ["/repo/b.rs"]);
    assert_eq!(replace.written.map(|w| w.bytes), Some(5));
    let shell = gemini(
        "BeforeTool",
        json!({"tool_name": "run_shell_command", "tool_input": {"command": "echo > x"}}),
    );
    assert!(!shell.writes_files());
    assert!(shell.paths.is_empty());
    assert_eq!(
        shell.command.as_deref(),
        Some("echo > x"),
        "read by the daemon"
    );
    // Run in `dir_path`: read as the shell sees it there.
    let shell = gemini(
        "BeforeTool",
        json!({"tool_name": "run_shell_command",
               "tool_input": {"command": "echo > x", "dir_path": "sub dir"}}),
    );
    assert_eq!(shell.command.as_deref(), Some("cd 'sub dir' && echo > x"));
}

/// What a denial looks like to each CLI: Gemini CLI's own top-level decision, Claude Code's
/// and Codex's `permissionDecision`.
#[test]
fn a_denial_is_in_the_clis_own_terms() {
    use maos_proto::Cli;
    assert_eq!(
        super::denial(Cli::Gemini, "maos: a.rs is held"),
        json!({"decision": "deny", "reason": "maos: a.rs is held"})
    );
    for cli in [Cli::Claude, Cli::Codex] {
        let d = super::denial(cli, "why");
        assert_eq!(d["hookSpecificOutput"]["permissionDecision"], "deny");
        assert_eq!(d["hookSpecificOutput"]["permissionDecisionReason"], "why");
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
    let write = call_of(&json!({"session_id": "s", "hook_event_name": "PostToolUse",
                                "tool_name": "Write",
                                "tool_input": {"file_path": "a.txt", "todos": items}}))
    .expect("a call");
    assert!(write.todos.is_none());
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
    assert_eq!(args(&["hook", "--cli", "cursor"]), Some(Ok(Cli::Cursor)));
    let Some(Err(e)) = args(&["hook", "--cli", "windsurf"]) else {
        panic!("an unknown CLI is not refused")
    };
    assert!(
        e.contains("unknown agent CLI \"windsurf\"")
            && e.contains("claude|codex|gemini|copilot|cursor|opencode"),
        "{e}"
    );
    assert_eq!(args(&["hook", "--help"]), None);
    assert_eq!(args(&["ps"]), None);
    assert_eq!(args(&[]), None);
}

/// The lookup of the calling CLI's process, on this very process: the nearest ancestor that
/// does not share this process's standard output and is not a shell (the test binary's parent,
/// cargo or a runner, unless it passes its own pipe on to the test), with its start time.
#[test]
fn the_calling_cli_process_is_found() {
    let p = super::cli_process().expect("an ancestor process");
    // `/proc/<pid>/stat` read as the daemon reads it: fields counted from after the last `)`
    // (field 3), the parent in field 4, the start time in field 22.
    let fields = |pid: u32| -> Vec<String> {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).expect("stat");
        let rest = stat.rsplit_once(')').expect("comm").1;
        rest.split_whitespace().map(str::to_string).collect()
    };
    let out = |pid: u32| std::fs::read_link(format!("/proc/{pid}/fd/1")).ok();
    let own = out(std::process::id());
    let mut pid = std::os::unix::process::parent_id();
    while pid != p.pid {
        let passes_on = own.as_ref().is_some_and(|o| {
            let text = o.to_string_lossy();
            (text.starts_with("pipe:") || text.starts_with("socket:"))
                && out(pid).as_ref() == Some(o)
        });
        let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).expect("comm");
        assert!(
            passes_on || ["sh", "bash", "dash", "zsh"].contains(&comm.trim()),
            "{pid} ({}) was passed over for {p:?}",
            comm.trim()
        );
        pid = fields(pid)[4 - 3].parse().expect("ppid");
    }
    assert!(p.start_time.is_some_and(|t| t > 0), "{p:?}");
    assert_eq!(p.start_time, fields(p.pid)[22 - 3].parse().ok());
}

/// A background subagent's result arrives as a prompt: it is read as that subagent's result
/// (its task id, the tool call that started it, status and usage), never as a prompt.
#[test]
fn a_task_notification_is_the_subagents_result_not_a_prompt() {
    let prompt = "<task-notification>\n<task-id>a1b2c3</task-id>\n<tool-use-id>toolu_9</tool-use-id>\n\
        <status>completed</status>\n<summary>Agent \"x\" completed</summary>\n<result>done</result>\n\
        <usage><subagent_tokens>1234</subagent_tokens><tool_uses>3</tool_uses>\
        <duration_ms>4567</duration_ms></usage>\n</task-notification>";
    let call = call_of(
        &json!({"hook_event_name": "UserPromptSubmit", "session_id": "s",
                              "prompt": prompt}),
    )
    .expect("a call");
    assert_eq!(call.summary, None, "recorded as a prompt: {call:?}");
    assert_eq!(call.tool_use_id.as_deref(), Some("toolu_9"));
    let r = call.subagent.expect("the subagent's result");
    assert_eq!(r.agent_id, "a1b2c3");
    assert_eq!(r.status.as_deref(), Some("completed"));
    assert_eq!(
        (r.total_tokens, r.total_tool_use_count, r.total_duration_ms),
        (Some(1234), Some(3), Some(4567))
    );
    // No id at all: nobody's result, and still not a prompt.
    let call = call_of(&json!({"hook_event_name": "UserPromptSubmit", "session_id": "s",
                              "prompt": "<task-notification><status>failed</status></task-notification>"}))
    .expect("a call");
    assert_eq!((call.summary, call.subagent), (None, None));
    // A person's prompt that mentions the tag is a prompt.
    let call = call_of(
        &json!({"hook_event_name": "UserPromptSubmit", "session_id": "s",
                              "prompt": "explain <task-notification> blocks"}),
    )
    .expect("a call");
    assert_eq!(
        call.summary.as_deref(),
        Some("explain <task-notification> blocks")
    );
    assert_eq!(call.subagent, None);
}

const PATCH: &str = "*** Begin Patch\n*** Update File: src/a.rs\n@@\n-a\n+b\n*** Add File: notes.txt\n+hi\n*** End Patch\n";

/// A Codex `Bash` call with `command`, before it runs.
fn bash(command: Value) -> maos_proto::HookCall {
    call_of(
        &json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                    "tool_input": {"command": command}}),
    )
    .expect("a call")
}

/// `apply_patch` through the shell, in each here-document form Codex's model writes: the
/// patch's files are the call's paths, so it takes the same locks as the `apply_patch` tool.
#[test]
fn a_shell_apply_patch_names_every_file_of_its_patch() {
    let both = ["src/a.rs", "notes.txt"];
    for form in [
        format!("apply_patch <<'EOF'\n{PATCH}EOF\n"),
        format!("apply_patch <<\"EOF\"\n{PATCH}EOF"),
        format!("apply_patch <<EOF\n{PATCH}EOF\n"),
        format!("apply_patch << 'PATCH'\n{PATCH}PATCH\n"),
        format!("applypatch <<'EOF'\n{PATCH}EOF\n"),
        // `<<-`: leading tabs of the body and of the delimiter are stripped.
        format!(
            "apply_patch <<-EOF\n{}\tEOF\n",
            PATCH
                .lines()
                .map(|l| format!("\t{l}\n"))
                .collect::<String>()
        ),
        format!("set -e; apply_patch <<'EOF'\n{PATCH}EOF\necho done"),
    ] {
        let call = bash(json!(form));
        assert_eq!(call.paths, both, "{form:?}");
        assert!(call.writes_files(), "{form:?}");
    }
    // Older Codex versions: an argv, `bash -lc SCRIPT`.
    let argv = bash(json!([
        "bash",
        "-lc",
        format!("apply_patch <<'EOF'\n{PATCH}EOF\n")
    ]));
    assert_eq!(argv.paths, both);
}

/// Relative paths of a patch are relative to where it is applied: a leading `cd DIR &&` and
/// the tool's `workdir`; absolute ones stay as they are.
#[test]
fn a_shell_apply_patch_after_cd_names_the_files_under_that_directory() {
    let call = bash(json!(format!(
        "cd sub/dir && apply_patch <<'EOF'\n{PATCH}EOF\n"
    )));
    assert_eq!(call.paths, ["sub/dir/src/a.rs", "sub/dir/notes.txt"]);
    let call = bash(json!(format!(
        "cd '/abs path' && apply_patch <<'EOF'\n{PATCH}EOF\n"
    )));
    assert_eq!(call.paths, ["/abs path/src/a.rs", "/abs path/notes.txt"]);
    let call = call_of(&json!({"session_id": "s", "hook_event_name": "PreToolUse",
        "tool_name": "Bash", "tool_input": {"workdir": "/w",
        "command": format!("cd x && apply_patch <<'EOF'\n{PATCH}EOF\n")}}))
    .expect("a call");
    assert_eq!(call.paths, ["/w/x/src/a.rs", "/w/x/notes.txt"]);
    let abs = "*** Begin Patch\n*** Add File: /etc/x\n+y\n*** End Patch\n";
    let call = bash(json!(format!("cd sub && apply_patch <<'EOF'\n{abs}EOF\n")));
    assert_eq!(call.paths, ["/etc/x"]);
    // Two patches in one command: both sets of files.
    let two = format!("apply_patch <<'A'\n{PATCH}A\ncd lib && apply_patch <<'B'\n{abs}B\n");
    assert_eq!(bash(json!(two)).paths, ["src/a.rs", "notes.txt", "/etc/x"]);
}

/// After the call, the shell patch is recorded like the tool's: its size and hash.
#[test]
fn a_shell_apply_patch_is_recorded_after_it_ran() {
    let call = call_of(&json!({"session_id": "s", "hook_event_name": "PostToolUse",
        "tool_name": "Bash", "tool_input": {"command": format!("apply_patch <<'EOF'\n{PATCH}EOF\n")}}))
    .expect("a call");
    assert!(call.writes_files());
    let w = call.written.expect("size and hash");
    assert_eq!(w.bytes, PATCH.len() as u64);
}

/// Commands that do not run `apply_patch` (or name it without a patch maos can read) write
/// nothing maos knows of: no paths, not a write.
#[test]
fn other_shell_commands_are_not_writes() {
    for cmd in [
        json!("ls -la"),
        json!("echo apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: x\n*** End Patch\nEOF\n"),
        json!("grep -r apply_patch_tool ."),
        json!("my_apply_patch <<EOF\n*** Begin Patch\n*** Add File: x\n*** End Patch\nEOF\n"),
        json!("apply_patch"),
        json!("apply_patch <<'EOF'\nnot a patch\nEOF\n"),
        json!("apply_patch <<$X\n*** Begin Patch\n*** Add File: x\n*** End Patch\n$X\n"),
        json!(42),
        json!(null),
        json!([]),
    ] {
        let call = bash(cmd.clone());
        assert!(call.paths.is_empty(), "{cmd}: {:?}", call.paths);
        assert!(!call.writes_files(), "{cmd}");
    }
}

proptest! {
    /// Any command text: parsing never panics, and a Bash call is a write exactly when it
    /// named files.
    #[test]
    fn any_shell_command_parses(cmd in prop_oneof![
        ".{0,80}",
        patchy().prop_map(|p| format!("apply_patch <<'EOF'\n{p}\nEOF\n")),
        (".{0,10}", patchy()).prop_map(|(d, p)| format!("cd {d} && apply_patch <<-E\n{p}\nE")),
        patchy().prop_map(|p| format!("apply_patch <<{p}")),
    ]) {
        let call = bash(json!(cmd));
        prop_assert_eq!(call.writes_files(), !call.paths.is_empty());
        let _ = super::input::shell_patches(&cmd);
    }
}

/// `apply_patch < FILE`: the file is named (to be read by the caller), under its `cd`.
#[test]
fn a_shell_apply_patch_from_a_file_names_the_file() {
    let v = |cmd: &str| {
        json!({"session_id": "s", "hook_event_name": "PreToolUse", "tool_name": "Bash",
               "tool_input": {"command": cmd}})
    };
    use super::input::shell_patch_files;
    assert_eq!(
        shell_patch_files(&v("apply_patch < p.patch")),
        [(None, "p.patch".to_string())]
    );
    assert_eq!(
        shell_patch_files(&v("cd 'a b' && apply_patch <'x y.patch'; echo ok")),
        [(Some("a b".to_string()), "x y.patch".to_string())]
    );
    for none in [
        "apply_patch <(cat p)",
        "apply_patch < $F",
        "cat p | apply_patch",
        "ls < p",
    ] {
        assert!(shell_patch_files(&v(none)).is_empty(), "{none}");
    }
    // Not a Bash call: nothing.
    let mut other = v("apply_patch < p.patch");
    other["tool_name"] = json!("apply_patch");
    assert!(shell_patch_files(&other).is_empty());
}

/// A call of maos's own MCP tool carries its arguments' digest (the key of the record that
/// tells `maos mcp` whose call it is), the same whatever the key order; no other tool does.
#[test]
fn mcp_calls_of_maos_carry_their_arguments_digest() {
    let pre = |tool: &str, input: Value| {
        call_of(&json!({"session_id": "s", "hook_event_name": "PreToolUse",
                        "tool_name": tool, "tool_input": input}))
        .unwrap()
    };
    let a = pre("mcp__maos__note", json!({"kind": "done", "text": "x"}));
    let b = pre("mcp_maos_note", json!({"text": "x", "kind": "done"}));
    assert!(a.mcp_args.is_some());
    assert_eq!(a.mcp_args, b.mcp_args);
    assert_ne!(
        a.mcp_args,
        pre("mcp__maos__note", json!({"kind": "done", "text": "y"})).mcp_args
    );
    assert_eq!(pre("mcp__other__note", json!({})).mcp_args, None);
    assert_eq!(pre("Bash", json!({"command": "ls"})).mcp_args, None);
    let post = call_of(&json!({"session_id": "s", "hook_event_name": "PostToolUse",
                               "tool_name": "mcp__maos__note", "tool_input": {}}))
    .unwrap();
    assert_eq!(post.mcp_args, None);
}

/// Codex's subagent tool as its hooks send it (0.171.0): `spawn_agent` (its default tools) or
/// `collaborationspawn_agent` (`multi_agent_v2`) is a spawn; its task is the `message` (or the
/// first text of `items`) after the v2 `task_name`; its kind the v1 `agent_type`; the
/// result's `agent_id` (a JSON text in `tool_response`) ties it, when it is one a subagent's
/// events can carry. A v2 result, or anything else, ties nothing.
#[test]
fn codex_spawn_agent_is_a_subagent_request_and_its_result_ties_it() {
    let call = |event: &str, tool: &str, input: Value, response: Option<Value>| {
        let mut v = json!({"session_id": "c1", "hook_event_name": event, "tool_name": tool,
                           "tool_input": input, "tool_use_id": "call_1", "turn_id": "t1"});
        if let Some(r) = response {
            v["tool_response"] = r;
        }
        call_of(&v).expect("a call")
    };
    let v1 = json!({"message": "write the notes\nand more", "agent_type": "worker"});
    let pre = call("PreToolUse", "spawn_agent", v1.clone(), None);
    assert!(pre.spawns_subagent());
    assert_eq!(pre.prompt_line.as_deref(), Some("write the notes"));
    assert_eq!(pre.agent_type.as_deref(), Some("worker"));
    assert_eq!(pre.summary, None);
    let id = "01a22367-8968-7e01-b6ff-8507f39d5426";
    let done = json!(format!(r#"{{"agent_id":"{id}","nickname":"Bacon"}}"#));
    let post = call("PostToolUse", "spawn_agent", v1.clone(), Some(done));
    assert_eq!(
        post.subagent.as_ref().map(|s| s.agent_id.as_str()),
        Some(id)
    );
    let v2 = json!({"task_name": "notes", "message": "write the notes", "fork_turns": "none"});
    let pre = call("PreToolUse", "collaborationspawn_agent", v2.clone(), None);
    assert!(pre.spawns_subagent());
    assert_eq!(pre.summary.as_deref(), Some("notes"));
    assert_eq!(pre.prompt_line.as_deref(), Some("write the notes"));
    assert_eq!(pre.agent_type, None);
    let items = json!({"items": [{"type": "mention", "path": "app://x"},
                                 {"type": "text", "text": "from items"}]});
    let pre = call("PreToolUse", "spawn_agent", items, None);
    assert_eq!(pre.prompt_line.as_deref(), Some("from items"));
    // Results that tie nothing.
    let long = "a".repeat(257);
    for response in [
        json!(r#"{"task_name":"/root/notes"}"#),
        json!("not json"),
        json!(format!(r#"{{"agent_id":"{long}"}}"#)),
        json!(r#"{"agent_id":"a\nb"}"#),
        json!(r#"{"agent_id":""}"#),
        json!(r#"{"agent_id":7}"#),
        json!(7),
    ] {
        let post = call(
            "PostToolUse",
            "collaborationspawn_agent",
            v2.clone(),
            Some(response),
        );
        assert_eq!(post.subagent, None, "{:?}", post.tool_name);
    }
    // Another tool's `agent_type` or `message` names no subagent.
    let other = call(
        "PreToolUse",
        "Bash",
        json!({"command": "ls", "agent_type": "x"}),
        None,
    );
    assert!(!other.spawns_subagent());
    assert_eq!((other.agent_type, other.prompt_line), (None, None));
}
