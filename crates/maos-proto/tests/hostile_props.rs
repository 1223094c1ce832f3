//! Hostile input at the protocol layer: frames and requests as a confused or malicious client
//! could send them. Decoding never panics, a frame over the cap is refused before its body is
//! read, every error is one line, and valid frames round-trip.

use std::io::{self, Read};

use maos_proto::frame::{encode, read_frame_bytes};
use maos_proto::{ClientMsg, FrameError, MAX_FRAME_LEN, Request, read_frame};
use proptest::prelude::*;
use serde_json::{Value, json};

fn one_line(e: &str) -> Result<(), TestCaseError> {
    prop_assert!(!e.is_empty(), "empty error");
    prop_assert!(!e.contains('\n') && !e.contains('\r'), "{e:?}");
    Ok(())
}

/// JSON without floats (whose last digit serde_json may not round-trip).
fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::Bool),
        any::<i64>().prop_map(Value::from),
        any::<u64>().prop_map(Value::from),
        ".{0,16}".prop_map(Value::String),
    ];
    leaf.prop_recursive(4, 48, 6, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..6).prop_map(Value::Array),
            prop::collection::btree_map(".{0,8}", inner, 0..6)
                .prop_map(|m| Value::Object(m.into_iter().collect())),
        ]
    })
}

/// Any JSON, floats included.
fn any_json() -> impl Strategy<Value = Value> {
    prop_oneof![
        4 => json_value(),
        1 => any::<f64>().prop_map(Value::from),
    ]
}

/// The wire names of every request, read from serde's own "expected one of" list so that the
/// test follows `msg.rs`.
fn request_names() -> Vec<String> {
    let e = serde_json::from_value::<Request>(json!({"request": "\u{1}"}))
        .expect_err("a control character is no request name")
        .to_string();
    let names: Vec<String> = e
        .split('`')
        .skip(3) // before, the unknown name, ", expected one of "
        .step_by(2)
        .map(str::to_string)
        .collect();
    assert!(names.len() > 10, "cannot read the request names from {e:?}");
    assert!(names.iter().any(|n| n == "ping"), "{names:?}");
    names
}

/// Field names requests use, plus junk.
const FIELDS: &[&str] = &[
    "session",
    "agent",
    "objective",
    "strategy",
    "phases",
    "all",
    "op",
    "reason",
    "role",
    "task",
    "depends_on",
    "parent",
    "exit_code",
    "phase",
    "path",
    "paths",
    "mode",
    "cwd",
    "timeout_ms",
    "ttl_ms",
    "wait",
    "lease_ms",
    "text",
    "start",
    "filter",
    "after_seq",
    "types",
    "since",
    "target",
    "scope",
    "name",
    "limit",
    "kind",
    "id",
    "body",
    "project",
    "event",
    "session_id",
    "hook_event_name",
    "tool_name",
    "written",
    "plan",
    "\u{0}",
    "",
];

/// An object shaped like a request: a known (or unknown) name, known fields, any values.
fn request_like() -> impl Strategy<Value = Value> {
    let names = request_names();
    (
        prop_oneof![
            8 => prop::sample::select(names).prop_map(Value::String),
            1 => ".{0,12}".prop_map(Value::String),
            1 => any_json(),
        ],
        prop::collection::vec(
            (
                prop::sample::select(FIELDS),
                prop_oneof![
                    3 => ".{0,12}".prop_map(Value::String),
                    1 => any::<u32>().prop_map(Value::from),
                    1 => any::<bool>().prop_map(Value::Bool),
                    2 => any_json(),
                ],
            ),
            0..6,
        ),
    )
        .prop_map(|(name, fields)| {
            let mut v = json!({ "request": name });
            for (k, x) in fields {
                v[k] = x;
            }
            v
        })
}

/// A reader that hands out its bytes in pieces of the given sizes; a size of 0 is an
/// `Interrupted` error (a signal) instead of a read.
struct Trickle {
    data: Vec<u8>,
    at: usize,
    sizes: Vec<usize>,
    turn: usize,
}

impl Read for Trickle {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        self.turn += 1;
        let size = self.sizes[self.turn % self.sizes.len()];
        if size == 0 {
            return Err(io::ErrorKind::Interrupted.into());
        }
        let n = size.min(buf.len()).min(self.data.len() - self.at);
        buf[..n].copy_from_slice(&self.data[self.at..self.at + n]);
        self.at += n;
        Ok(n)
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// Any length prefix followed by any bytes: the body when it is all there, `TooLarge` (one
    /// line, naming the cap) above the cap, a truncation error when the bytes run out.
    #[test]
    fn any_length_prefix(
        len in prop_oneof![
            4 => 0u32..300,
            1 => any::<u32>(),
            1 => Just(MAX_FRAME_LEN as u32),
            1 => Just(MAX_FRAME_LEN as u32 + 1),
            1 => Just(u32::MAX),
        ],
        body in prop::collection::vec(any::<u8>(), 0..300),
    ) {
        let mut bytes = len.to_be_bytes().to_vec();
        bytes.extend_from_slice(&body);
        let len = len as usize;
        let mut r = io::Cursor::new(&bytes[..]);
        match read_frame_bytes(&mut r) {
            Ok(got) => {
                prop_assert!(len <= body.len());
                prop_assert_eq!(&got[..], &body[..len]);
                prop_assert_eq!(r.position() as usize, 4 + len, "read past the frame");
            }
            Err(FrameError::TooLarge { len: l, max }) => {
                prop_assert!(len > MAX_FRAME_LEN);
                prop_assert_eq!((l, max), (len, MAX_FRAME_LEN));
                prop_assert_eq!(r.position(), 4, "read the body of a refused frame");
                let e = FrameError::TooLarge { len: l, max }.to_string();
                one_line(&e)?;
                prop_assert!(e.contains(&MAX_FRAME_LEN.to_string()) && e.contains("cap"), "{e}");
            }
            Err(FrameError::Io(e)) => {
                prop_assert!(len > body.len() && len <= MAX_FRAME_LEN, "{e}");
                prop_assert_eq!(e.kind(), io::ErrorKind::UnexpectedEof);
            }
            Err(other) => prop_assert!(false, "unexpected {other:?}"),
        }
    }

    /// Any bytes as a stream of frames decoded as client messages: never a panic, every error
    /// one line.
    #[test]
    fn arbitrary_streams_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..512)) {
        let mut r = &bytes[..];
        for _ in 0..bytes.len() + 1 {
            match read_frame::<_, ClientMsg>(&mut r) {
                Ok(_) => {}
                Err(FrameError::Closed) => break,
                Err(e) => {
                    one_line(&e.to_string())?;
                    break;
                }
            }
        }
    }

    /// Valid frames round-trip, several in a row, however the reads are cut (short reads and
    /// `EINTR`), and then the stream is `Closed`.
    #[test]
    fn frames_round_trip(
        values in prop::collection::vec(json_value(), 1..4),
        sizes in prop::collection::vec(0usize..9, 1..8),
    ) {
        prop_assume!(sizes.iter().any(|&s| s > 0));
        let mut data = Vec::new();
        for v in &values {
            let f = encode(v).unwrap();
            prop_assert_eq!(u32::from_be_bytes([f[0], f[1], f[2], f[3]]) as usize, f.len() - 4);
            data.extend_from_slice(&f);
        }
        let mut r = Trickle { data, at: 0, sizes, turn: 0 };
        for v in &values {
            let back: Value = read_frame(&mut r).unwrap();
            prop_assert_eq!(&back, v);
        }
        prop_assert!(matches!(read_frame::<_, Value>(&mut r), Err(FrameError::Closed)));
    }

    /// Any JSON value as a request, or as the body of a request frame: never a panic; a
    /// refused frame says so in one line.
    #[test]
    fn arbitrary_json_as_request(v in any_json()) {
        let _ = serde_json::from_value::<Request>(v.clone());
        let f = encode(&json!({"kind": "request", "id": 1, "body": v})).unwrap();
        if let Err(e) = read_frame::<_, ClientMsg>(&mut &f[..]) {
            one_line(&e.to_string())?;
        }
    }

    /// Request-shaped objects with wrong, missing and extra fields: parsed or refused in one
    /// line; a parsed request serializes and parses back to itself.
    #[test]
    fn request_like_objects(v in request_like()) {
        let f = encode(&json!({"kind": "request", "id": 1, "body": v})).unwrap();
        match read_frame::<_, ClientMsg>(&mut &f[..]) {
            Ok(ClientMsg::Request { body: req, .. }) => {
                let again = serde_json::to_string(&req).unwrap();
                let back: Request = serde_json::from_str(&again)
                    .map_err(|e| TestCaseError::fail(format!("{again}: {e}")))?;
                prop_assert_eq!(
                    serde_json::to_value(&back).unwrap(),
                    serde_json::to_value(&req).unwrap()
                );
            }
            Ok(other) => prop_assert!(false, "not a request: {other:?}"),
            Err(e) => one_line(&e.to_string())?,
        }
    }

    /// Any string as a frame body (the text a client sends): never a panic, one-line errors.
    #[test]
    fn arbitrary_text_as_request(
        text in prop_oneof!["(?s).{0,64}", "[\\[\\]{}\":,0-9a-z_ \\\\ntfe.-]{0,64}"]
    ) {
        let mut f = (text.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(text.as_bytes());
        if let Err(e) = read_frame::<_, ClientMsg>(&mut &f[..]) {
            one_line(&e.to_string())?;
        }
        let _ = serde_json::from_str::<Request>(&text);
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    /// serde_json's own message, as the daemon sends it back (`malformed request: {e}` through
    /// `maos_core::text::escape_controls`), is one line.
    #[test]
    fn daemon_bad_request_messages_are_one_line(v in request_like()) {
        let body = serde_json::to_vec(&json!({"kind": "request", "id": 1, "body": v})).unwrap();
        if let Err(e) = serde_json::from_slice::<ClientMsg>(&body) {
            one_line(&maos_core::text::escape_controls(&format!("malformed request: {e}")))?;
        }
    }
}

/// A frame whose JSON nests 10,000 levels is refused with serde_json's recursion limit, in one
/// line, without overflowing the stack, wherever the nesting is.
#[test]
fn deep_nesting_is_refused() {
    let deep =
        |open: &str, close: &str| format!("{}1{}", open.repeat(10_000), close.repeat(10_000));
    let bodies = [
        deep("[", "]"),
        deep("{\"a\":", "}"),
        format!(
            r#"{{"kind":"request","id":1,"body":{{"request":"session_create","objective":"x","phases":{}}}}}"#,
            deep("[", "]")
        ),
        format!(
            r#"{{"kind":"request","id":1,"body":{{"request":"ping","extra":{}}}}}"#,
            deep("{\"a\":", "}")
        ),
    ];
    for body in bodies {
        let mut f = (body.len() as u32).to_be_bytes().to_vec();
        f.extend_from_slice(body.as_bytes());
        match read_frame::<_, ClientMsg>(&mut &f[..]) {
            // A bare array is refused at its first byte (no message is an array); anything
            // read further reaches the limit.
            Err(e @ FrameError::Json(_)) => {
                let e = e.to_string();
                assert!(
                    e.contains("recursion limit exceeded") || e.contains("sequence"),
                    "{e}"
                );
                assert!(!e.contains('\n'), "{e}");
            }
            other => panic!("expected a JSON error, got {other:?}"),
        }
        // Read as any JSON (the daemon's fallback that looks for the id of a bad frame): the
        // recursion limit.
        let e = serde_json::from_slice::<Value>(&f[4..]).unwrap_err();
        assert!(e.to_string().contains("recursion limit exceeded"), "{e}");
    }
}

/// A frame exactly at the cap is read; one byte more is refused, and a refused frame's body is
/// never read.
#[test]
fn the_cap_is_exact() {
    let frame_of = |pad: usize| json!({"kind": "request", "id": 1, "body": {"request": "ping", "pad": "x".repeat(pad)}});
    let pad = MAX_FRAME_LEN - serde_json::to_vec(&frame_of(0)).unwrap().len();
    let f = encode(&frame_of(pad)).unwrap();
    assert_eq!(f.len() - 4, MAX_FRAME_LEN);
    let got: ClientMsg = read_frame(&mut &f[..]).unwrap();
    assert!(
        matches!(
            got,
            ClientMsg::Request {
                id: 1,
                body: Request::Ping,
                ..
            }
        ),
        "{got:?}"
    );

    match encode(&frame_of(pad + 1)) {
        Err(FrameError::TooLarge { len, max }) => {
            assert_eq!((len, max), (MAX_FRAME_LEN + 1, MAX_FRAME_LEN))
        }
        other => panic!("expected TooLarge, got {:?}", other.map(|f| f.len())),
    }
    let mut over = (MAX_FRAME_LEN as u32 + 1).to_be_bytes().to_vec();
    over.extend_from_slice(&f[4..]);
    over.push(b' ');
    let mut r = io::Cursor::new(&over[..]);
    match read_frame::<_, ClientMsg>(&mut r) {
        Err(e @ FrameError::TooLarge { .. }) => {
            assert_eq!(
                e.to_string(),
                format!(
                    "frame of {} bytes is over the {MAX_FRAME_LEN}-byte cap",
                    MAX_FRAME_LEN + 1
                )
            )
        }
        other => panic!("expected TooLarge, got {other:?}"),
    }
    assert_eq!(r.position(), 4, "the refused frame's body was read");
}

// ---------------------------------------------------------------------------------------------
// Import files (`maos import`): maos-session exports and orchestrator-session JSON.

fn import(text: &str) -> Result<(), TestCaseError> {
    let mut n = 0u128;
    let sid = maos_core::SessionId::from_uuid(uuid::Uuid::from_u128(1));
    let parsed = maos_proto::export::parse(text, chrono::Utc::now(), sid, || {
        n += 1;
        maos_core::AgentId::from_uuid(uuid::Uuid::from_u128(1000 + n))
    });
    match parsed {
        Ok(e) => {
            prop_assert!(
                e.session
                    .agents
                    .iter()
                    .all(|a| a.session_id == e.session.id)
            );
            prop_assert!(serde_json::to_string(&e).is_ok());
        }
        Err(err) => one_line(&err.to_string())?,
    }
    let _ = maos_proto::export::ids_of(text);
    Ok(())
}

/// A valid maos-session file with an agent, notes and an error, as `maos export` writes it.
fn valid_export() -> String {
    let orch = json!({
        "schema_version": "1.0", "session_id": "s", "goal": "ship it", "status": "completed",
        "agents": [{"id": "a1", "role": "dev", "status": "done", "task": "code"}],
        "completed_work": ["api"], "pending_tasks": ["docs"], "decisions_made": ["jwt"],
        "errors": ["flaky"],
    });
    let mut n = 0u128;
    let e = maos_proto::export::parse(
        &orch.to_string(),
        chrono::Utc::now(),
        maos_core::SessionId::from_uuid(uuid::Uuid::from_u128(7)),
        || {
            n += 1;
            maos_core::AgentId::from_uuid(uuid::Uuid::from_u128(70 + n))
        },
    )
    .expect("a valid orchestrator file");
    serde_json::to_string_pretty(&e).expect("serializes")
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 256, ..ProptestConfig::default() })]

    #[test]
    fn arbitrary_text_as_an_import(text in ".{0,200}") {
        import(&text)?;
    }

    #[test]
    fn arbitrary_json_as_an_import(v in json_value()) {
        import(&v.to_string())?;
    }

    #[test]
    fn orchestrator_like_objects(
        goal in json_value(),
        status in json_value(),
        agents in json_value(),
        work in json_value(),
        errors in json_value(),
    ) {
        let v = json!({
            "schema_version": "1.0", "session_id": "x", "goal": goal, "status": status,
            "agents": agents, "completed_work": work, "errors": errors,
        });
        import(&v.to_string())?;
    }

    #[test]
    fn mutated_exports(edits in prop::collection::vec((any::<prop::sample::Index>(), any::<u8>()), 1..6), cut in any::<prop::sample::Index>()) {
        let mut bytes = valid_export().into_bytes();
        for (at, b) in edits {
            let i = at.index(bytes.len());
            bytes[i] = b;
        }
        let keep = cut.index(bytes.len() + 1);
        if let Ok(text) = std::str::from_utf8(&bytes[..keep.max(1)]) {
            import(text)?;
        }
    }
}

#[test]
fn a_valid_export_parses_back_to_itself() {
    let text = valid_export();
    let mut n = 0u128;
    let e = maos_proto::export::parse(
        &text,
        chrono::Utc::now(),
        maos_core::SessionId::from_uuid(uuid::Uuid::from_u128(99)),
        || {
            n += 1;
            maos_core::AgentId::from_uuid(uuid::Uuid::from_u128(990 + n))
        },
    )
    .expect("parses");
    assert_eq!(serde_json::to_string_pretty(&e).expect("serializes"), text);
}
