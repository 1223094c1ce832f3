//! Malformed traffic on the real socket gets an error answer (or a closed connection), never a
//! crash, and never disturbs other connections.

use maos_proto::{MAX_FRAME_LEN, PROTOCOL_VERSION, ServerMsg};
use maos_tests::{Env, Raw, alive, assert_usable, frame, json};

fn expect_error(msg: Result<ServerMsg, maos_proto::FrameError>, code: &str) -> String {
    match msg {
        Ok(ServerMsg::Error { error }) => {
            assert_eq!(error.code.as_str(), code, "{error:?}");
            error.message
        }
        other => panic!("expected an Error frame with code {code}, got {other:?}"),
    }
}

#[test]
fn malformed_frames_get_errors_and_the_daemon_keeps_serving() {
    let env = Env::new();
    let session = env.create(&["session", "create", "--objective", "frames"]);
    let pid = env.daemon_pid();
    let root = Env::project_root(&env.project);

    // A healthy connection open through all of it.
    let mut bystander = env.raw();
    bystander.hello();

    type Case = (&'static str, fn(&mut Raw));
    let cases: [Case; 8] = [
        (
            "garbage JSON after hello: bad_request, connection still usable",
            |c| {
                c.hello();
                c.send_bytes(&frame(b"{this is not json")).unwrap();
                match c.recv() {
                    Ok(ServerMsg::Response { result: Err(e), .. }) => {
                        assert_eq!(e.code.as_str(), "bad_request", "{e:?}")
                    }
                    other => panic!("expected a bad_request response, got {other:?}"),
                }
            },
        ),
        ("unknown request with an id: answered under that id", |c| {
            c.hello();
            c.send(&json!({"kind": "request", "id": 77, "body": {"request": "teleport"}}));
            match c.recv() {
                Ok(ServerMsg::Response { id, result: Err(e) }) => {
                    assert_eq!((id, e.code.as_str()), (77, "bad_request"), "{e:?}")
                }
                other => panic!("expected response 77, got {other:?}"),
            }
        }),
        ("binary junk after hello", |c| {
            c.hello();
            c.send_bytes(&frame(&[0xff, 0x00, 0xfe, b'{', 0x80]))
                .unwrap();
            assert!(matches!(
                c.recv(),
                Ok(ServerMsg::Response { result: Err(_), .. })
            ));
        }),
        (
            "length over the 16 MiB cap: frame_too_large or close",
            |c| {
                c.hello();
                let len = (MAX_FRAME_LEN as u32 + 1).to_be_bytes();
                c.send_bytes(&len).unwrap();
                match c.recv() {
                    Ok(ServerMsg::Error { error }) => {
                        assert_eq!(error.code.as_str(), "frame_too_large", "{error:?}")
                    }
                    Err(maos_proto::FrameError::Closed) => {}
                    Err(maos_proto::FrameError::Io(e))
                        if e.kind() == std::io::ErrorKind::ConnectionReset => {}
                    other => panic!("expected frame_too_large or a close, got {other:?}"),
                }
            },
        ),
        ("truncated frame, then close", |c| {
            c.hello();
            let mut f = frame(br#"{"kind":"request","id":1,"body":{"request":"ping"}}"#);
            f.truncate(f.len() - 10);
            c.send_bytes(&f).unwrap();
            c.stream.shutdown(std::net::Shutdown::Write).unwrap();
            // The daemon drops the connection without an answer to the half frame.
            assert!(!matches!(c.recv(), Ok(ServerMsg::Response { .. })));
        }),
        (
            "wrong protocol version: a welcome saying who runs, then protocol_mismatch naming both versions",
            |c| {
                match c.hello_with(PROTOCOL_VERSION + 41) {
                    Ok(ServerMsg::Welcome {
                        protocol,
                        started_by,
                        ..
                    }) => {
                        assert_eq!(protocol, PROTOCOL_VERSION);
                        assert_eq!(started_by, maos_proto::StartedBy::Client);
                    }
                    other => panic!("expected the welcome first, got {other:?}"),
                }
                let msg = expect_error(c.recv(), "protocol_mismatch");
                assert!(msg.contains(&(PROTOCOL_VERSION + 41).to_string()), "{msg}");
                assert!(msg.contains("maos --version"), "says what to do: {msg}");
                assert!(c.closed_by_peer());
            },
        ),
        ("request before hello: bad_request, then close", |c| {
            c.send(&json!({"kind": "request", "id": 1, "body": {"request": "ping"}}));
            let msg = expect_error(c.recv(), "bad_request");
            assert!(msg.contains("hello"), "{msg}");
            assert!(c.closed_by_peer());
        }),
        ("garbage instead of hello: bad_request, then close", |c| {
            c.send_bytes(&frame(b"GET / HTTP/1.1")).unwrap();
            expect_error(c.recv(), "bad_request");
            assert!(c.closed_by_peer());
        }),
    ];
    for (name, case) in cases {
        let mut conn = env.raw();
        case(&mut conn);
        if name.contains("still usable") {
            assert_usable(&mut conn, &root);
        }
        drop(conn);
        // After each case: the same daemon, still serving new connections and old ones.
        assert!(alive(pid), "the daemon died after: {name}");
        let ps = env.maos_json(&["ps"]);
        assert_eq!(ps[0]["id"], session.as_str(), "after: {name}");
        assert_eq!(env.daemon_pid(), pid, "after: {name}");
        assert_usable(&mut bystander, &root);
    }
    assert_eq!(env.daemons(), vec![pid]);
}

#[test]
fn many_bad_connections_at_once_leave_the_daemon_healthy() {
    let env = Env::new();
    env.maos_json(&["ps"]);
    let pid = env.daemon_pid();
    let root = Env::project_root(&env.project);
    // Open several connections that each stop half-way through a frame and hold it open.
    let mut stuck: Vec<Raw> = (0..16)
        .map(|_| {
            let mut c = env.raw();
            c.hello();
            c.send_bytes(&[0, 0, 1]).unwrap(); // 3 of the 4 length bytes
            c
        })
        .collect();
    let mut ok = env.raw();
    ok.hello();
    assert_usable(&mut ok, &root);
    assert!(env.maos(&["ps"]).status.success());
    stuck.clear();
    assert!(alive(pid));
    assert_eq!(env.daemon_pid(), pid);
}
