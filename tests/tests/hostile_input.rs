//! Hostile input on the real socket and through `maos hook`: deeply nested JSON and frames over
//! the cap get a clear one-line error (or, for an oversized frame, a closed connection), the
//! daemon keeps serving everyone else, and a refused request changes nothing.

use std::process::Output;

use maos_proto::{FrameError, MAX_FRAME_LEN, ServerMsg};
use maos_tests::{Env, Value, alive, assert_usable, describe, frame, json, wait_until};

/// `depth` nested arrays around a 1.
fn nested(depth: usize) -> String {
    format!("{}1{}", "[".repeat(depth), "]".repeat(depth))
}

/// What a client can see of the project: the sessions and the whole timeline.
fn snapshot(env: &Env) -> (Value, usize) {
    (env.maos_json(&["ps"]), env.events(&[]).len())
}

fn assert_one_line(msg: &str) {
    assert!(!msg.trim().is_empty(), "empty message");
    assert!(!msg.contains('\n') && !msg.contains('\r'), "{msg:?}");
}

/// The bad_request answer to a request frame, as (id, message).
fn bad_request(msg: Result<ServerMsg, FrameError>) -> (u64, String) {
    match msg {
        Ok(ServerMsg::Response { id, result: Err(e) }) => {
            assert_eq!(e.code.as_str(), "bad_request", "{e:?}");
            (id, e.message)
        }
        other => panic!("expected a bad_request response, got {other:?}"),
    }
}

#[test]
fn deeply_nested_json_is_refused_in_one_line_and_changes_nothing() {
    let env = Env::new();
    let session = env.create(&["session", "create", "--objective", "nesting"]);
    let pid = env.daemon_pid();
    let root = Env::project_root(&env.project);
    let before = snapshot(&env);
    let mut bystander = env.raw();
    bystander.hello();

    let deep = nested(10_000);
    let bodies = [
        // A write whose field nests 10,000 levels.
        format!(
            r#"{{"kind":"request","id":5,"project":{root:?},"body":{{"request":"session_create","objective":"x","phases":{deep}}}}}"#
        ),
        // A hook call (a write for a path) with the nesting in an unknown field.
        format!(
            r#"{{"kind":"request","id":6,"project":{root:?},"body":{{"request":"hook","event":"PreToolUse","session_id":"s","tool_name":"Write","paths":["a.txt"],"junk":{deep}}}}}"#
        ),
        // At the top of the frame, next to a valid request.
        format!(
            r#"{{"kind":"request","id":7,"project":{root:?},"body":{{"request":"session_create","objective":"y"}},"x":{deep}}}"#
        ),
        // Objects instead of arrays.
        format!(
            r#"{{"kind":"request","id":8,"body":{}1{}}}"#,
            "{\"a\":".repeat(10_000),
            "}".repeat(10_000)
        ),
    ];
    let mut conn = env.raw();
    conn.hello();
    for body in &bodies {
        conn.send_bytes(&frame(body.as_bytes())).unwrap();
        let (_, message) = bad_request(conn.recv());
        assert_one_line(&message);
        assert!(message.contains("recursion limit"), "{message}");
        // The same connection goes on.
        assert_usable(&mut conn, &root);
        assert_usable(&mut bystander, &root);
    }

    // Nested just under serde_json's limit is parsed (and refused for its meaning).
    let body = format!(
        r#"{{"kind":"request","id":9,"project":{root:?},"body":{{"request":"session_create","objective":"x","phases":{}}}}}"#,
        nested(100)
    );
    conn.send_bytes(&frame(body.as_bytes())).unwrap();
    let (id, message) = bad_request(conn.recv());
    assert_eq!(id, 9, "{message}");
    assert_one_line(&message);
    assert!(!message.contains("recursion limit"), "{message}");

    // As the first frame: refused, then the connection is closed.
    let mut first = env.raw();
    first
        .send_bytes(&frame(
            format!(r#"{{"kind":"hello","protocol":1,"client_version":{deep}}}"#).as_bytes(),
        ))
        .unwrap();
    match first.recv() {
        Ok(ServerMsg::Error { error }) => {
            assert_eq!(error.code.as_str(), "bad_request", "{error:?}");
            assert_one_line(&error.message);
        }
        other => panic!("expected a bad_request error, got {other:?}"),
    }
    assert!(first.closed_by_peer());

    assert!(alive(pid));
    assert_eq!(env.daemon_pid(), pid);
    assert_eq!(
        snapshot(&env),
        before,
        "a refused request changed something"
    );
    assert_eq!(env.maos_json(&["ps"])[0]["id"], session.as_str());
    assert_eq!(env.daemons(), vec![pid]);
}

#[test]
fn a_frame_over_the_cap_is_refused_and_changes_nothing() {
    let env = Env::new();
    env.create(&["session", "create", "--objective", "frames"]);
    let pid = env.daemon_pid();
    let root = Env::project_root(&env.project);
    let before = snapshot(&env);
    let mut bystander = env.raw();
    bystander.hello();

    // Exactly at the cap: read and answered.
    let request_of = |pad: usize, body: Value| {
        let mut body = body;
        body["pad"] = json!("x".repeat(pad));
        serde_json::to_vec(&json!({"kind": "request", "id": 3, "project": root, "body": body}))
            .unwrap()
    };
    let ping = json!({"request": "ping"});
    let pad = MAX_FRAME_LEN - request_of(0, ping.clone()).len();
    let at_cap = request_of(pad, ping);
    assert_eq!(at_cap.len(), MAX_FRAME_LEN);
    let mut conn = env.raw();
    conn.hello();
    conn.send_bytes(&frame(&at_cap)).unwrap();
    match conn.recv() {
        Ok(ServerMsg::Response {
            id: 3,
            result: Ok(r),
        }) => {
            assert!(matches!(r, maos_proto::Reply::Pong), "{r:?}")
        }
        other => panic!("expected pong, got {other:?}"),
    }
    assert_usable(&mut conn, &root);

    // One byte over, and a write: the whole frame is sent; the daemon refuses it unread.
    let create = json!({"request": "session_create", "objective": "too big"});
    let pad = MAX_FRAME_LEN + 1 - request_of(0, create.clone()).len();
    let over = request_of(pad, create);
    assert_eq!(over.len(), MAX_FRAME_LEN + 1);
    let mut conn = env.raw();
    conn.hello();
    // The daemon may close before it has all of it: a failed write is expected then.
    let _ = conn.send_bytes(&frame(&over));
    match conn.recv() {
        Ok(ServerMsg::Error { error }) => {
            assert_eq!(error.code.as_str(), "frame_too_large", "{error:?}");
            assert_one_line(&error.message);
            assert!(
                error.message.contains(&MAX_FRAME_LEN.to_string()),
                "names the cap: {}",
                error.message
            );
        }
        Err(FrameError::Closed) => {}
        Err(FrameError::Io(e))
            if matches!(
                e.kind(),
                std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
            ) => {}
        other => panic!("expected frame_too_large or a close, got {other:?}"),
    }
    wait_until(
        maos_tests::DEADLINE,
        "the daemon closes the refused connection",
        || conn.closed_by_peer(),
    );

    assert_usable(&mut bystander, &root);
    assert!(alive(pid));
    assert_eq!(env.daemon_pid(), pid);
    assert_eq!(snapshot(&env), before, "a refused frame changed something");
}

#[test]
fn a_request_name_with_control_characters_gets_a_one_line_error() {
    let env = Env::new();
    env.maos_json(&["ps"]);
    let mut conn = env.raw();
    conn.hello();
    conn.send(&json!({"kind": "request", "id": 4, "body": {"request": "tele\nport\u{1b}[2J"}}));
    let (id, message) = bad_request(conn.recv());
    assert_eq!(id, 4);
    assert_one_line(&message);
    assert!(!message.contains('\u{1b}'), "{message:?}");
}

/// `maos hook` (exactly as `install-hooks` writes it, run in the project) with `input` on its
/// stdin (written by a thread: the hook may stop reading early), waited for with a deadline.
fn hook(env: &Env, input: Vec<u8>) -> Output {
    hook_with(env, &["hook"], input)
}

fn hook_with(env: &Env, args: &[&str], input: Vec<u8>) -> Output {
    env.hook_at(&env.project, args, input, &[], false)
}

/// A refused hook input: exit 1 (a non-blocking hook error), nothing on stdout, one line on
/// stderr containing `want`.
fn assert_refused(out: &Output, want: &str) {
    assert_eq!(out.status.code(), Some(1), "{}", describe(out));
    assert!(out.stdout.is_empty(), "{}", describe(out));
    let err = String::from_utf8_lossy(&out.stderr);
    let err = err.strip_suffix('\n').unwrap_or(&err);
    assert_one_line(err);
    assert!(err.starts_with("maos hook: "), "{err}");
    assert!(err.contains(want), "{err}");
    assert!(err.contains("nothing was done"), "{err}");
}

#[test]
fn maos_hook_refuses_nested_and_oversized_input_in_one_line() {
    let env = Env::new();
    env.create(&["session", "create", "--objective", "hooks"]);
    let pid = env.daemon_pid();
    let before = snapshot(&env);

    // A valid call to compare with: it reaches the daemon.
    let ok = hook(
        &env,
        br#"{"hook_event_name":"PreToolUse","session_id":"cc-1","tool_name":"Bash","tool_input":{"command":"ls"}}"#.to_vec(),
    );
    assert!(ok.status.success(), "{}", describe(&ok));
    let before_calls = env.events(&[]).len();
    assert!(before_calls > before.1, "the valid call was not recorded");
    let before = snapshot(&env);

    // 10,000 levels, inside an otherwise valid call.
    let deep = format!(
        r#"{{"hook_event_name":"PreToolUse","session_id":"cc-1","tool_name":"Write","tool_input":{{"file_path":"a.txt","content":{}}}}}"#,
        nested(10_000)
    );
    assert_refused(&hook(&env, deep.into_bytes()), "128 levels deep");

    // Over the hook's 32 MiB input cap: a Write whose content does not fit.
    let mut big = br#"{"hook_event_name":"PostToolUse","session_id":"cc-1","tool_name":"Write","tool_input":{"file_path":"a.txt","content":""#.to_vec();
    big.resize(32 * 1024 * 1024 + 4096, b'x');
    big.extend_from_slice(b"\"}}");
    assert_refused(&hook(&env, big), "cap");

    // Not JSON, and JSON that is not an object.
    assert_refused(&hook(&env, b"\xff\xfe{".to_vec()), "not one JSON object");
    assert_refused(&hook(&env, b"[1, 2, 3]".to_vec()), "not an object");

    assert!(alive(pid));
    assert_eq!(env.daemon_pid(), pid);
    assert_eq!(
        snapshot(&env),
        before,
        "a refused hook input changed something"
    );
}

#[test]
fn maos_hook_through_clap_refuses_in_one_line_too() {
    let env = Env::new();
    let project = env.project.to_string_lossy().into_owned();
    let out = hook_with(
        &env,
        &["--project", &project, "hook"],
        nested(10_000).into_bytes(),
    );
    assert_refused(&out, "128 levels deep");
}
