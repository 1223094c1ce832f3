//! `maos mcp` against a client no one here wrote: the official MCP Python SDK (`mcp` from
//! PyPI, pinned in `maos_tests::mcp::SDK`). The real `maosd` and `maos` in a temporary home;
//! each tool's answer is checked against maos's own view (`maos lock list`, `maos ps`,
//! `maos events`, `maos brief`); bad arguments of every kind give one-sentence errors and
//! change nothing.

use maos_tests::mcp::{Driver, python};
use maos_tests::{Env, Value, json, wait_until};
use std::io::Write;
use std::path::Path;
use std::process::{Child, ChildStdin};
use std::sync::mpsc::Receiver;
use std::time::Duration;

/// A running session with agents `a` and `b` (registered and started).
fn two_agents(env: &Env) -> (String, String, String) {
    let s = env.session("ship the parser", &[]);
    env.maos(&["session", "start"]);
    let a = env.agent(None, "writer", "write the parser");
    let b = env.agent(None, "tester", "test the parser");
    for id in [&a, &b] {
        let out = env.maos(&["agent", "start", id]);
        assert!(out.status.success(), "{out:?}");
    }
    (s, a, b)
}

/// [`two_agents`], each with its own server (`da`, `db`), a holding x.rs.
fn a_holds_x(env: &Env, py: &Path) -> (String, String, Driver, Driver) {
    let (_, a, b) = two_agents(env);
    let mut da = Driver::start(env, py, &[("MAOS_AGENT_ID", &a)]);
    let db = Driver::start(env, py, &[("MAOS_AGENT_ID", &b)]);
    da.ok("lock_acquire", json!({"path": "x.rs", "mode": "write"}));
    (a, b, da, db)
}

/// Until b's request for x.rs is queued.
fn wait_queued(env: &Env) {
    wait_until(Duration::from_secs(10), "b waits for x.rs", || {
        !lock_list(env)["waiters"].as_array().unwrap().is_empty()
    });
}

fn lock_list(env: &Env) -> Value {
    env.maos_json(&["lock", "list"])
}

#[test]
fn every_tool_is_listed_with_a_schema_and_a_description_a_model_can_act_on() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let mut d = Driver::start(&env, &py, &[]);
    let info = d.ask(&json!({"op": "info"}));
    assert_eq!(info["name"], "maos");
    assert!(
        info["instructions"]
            .as_str()
            .unwrap()
            .contains("lock_acquire")
    );
    let tools = d.ask(&json!({"op": "list_tools"}));
    let mut names: Vec<&str> = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    names.sort();
    assert_eq!(
        names,
        [
            "brief",
            "events",
            "lock_acquire",
            "lock_check",
            "lock_release",
            "lock_renew",
            "locks",
            "note",
            "progress",
            "status",
            "who"
        ]
    );
    for t in tools["tools"].as_array().unwrap() {
        let desc = t["description"].as_str().unwrap();
        assert!(desc.len() > 60, "{} says too little: {desc}", t["name"]);
        assert_eq!(t["inputSchema"]["type"], "object", "{t}");
        assert_eq!(t["inputSchema"]["additionalProperties"], false, "{t}");
    }
    let acquire = tools["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "lock_acquire")
        .unwrap();
    let schema = acquire["inputSchema"].to_string();
    for word in [
        "read",
        "write",
        "directory",
        "workspace",
        "wait_ms",
        "ttl_ms",
    ] {
        assert!(
            schema.contains(word),
            "lock_acquire's schema lacks {word}: {schema}"
        );
    }
    let res = d.ask(&json!({"op": "list_resources"}));
    assert_eq!(res["resources"], json!(["maos://brief", "maos://locks"]));
    d.close();
}

#[test]
fn each_tool_does_what_maos_itself_then_shows() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let (session, a, b) = two_agents(&env);
    let mut da = Driver::start(&env, &py, &[("MAOS_AGENT_ID", &a)]);
    let mut db = Driver::start(&env, &py, &[("MAOS_AGENT_ID", &b)]);

    // lock_acquire: the lock maos lists, with the same token and lease.
    let got = da.ok(
        "lock_acquire",
        json!({"path": "src/parser.rs", "mode": "write"}),
    );
    assert_eq!(got["caller"]["agent"], a.as_str());
    assert_eq!(got["caller"]["rule"], "env");
    let listed = lock_list(&env);
    let locks = listed["locks"].as_array().unwrap();
    assert_eq!(locks.len(), 1, "{listed}");
    assert_eq!(locks[0]["path"], "src/parser.rs");
    assert_eq!(locks[0]["holder"], a.as_str());
    assert_eq!(locks[0]["token"], got["lock"]["token"]);
    assert_eq!(locks[0]["expires_at"], got["lock"]["expires_at"]);

    // who / locks / the locks resource agree with it.
    let who = da.ok("who", json!({"path": "src/parser.rs"}));
    assert_eq!(who["held_by"][0]["holder"], a.as_str());
    assert_eq!(da.ok("locks", json!({}))["locks"], listed["locks"]);
    let res = da.ask(&json!({"op": "read", "uri": "maos://locks"}));
    let res: Value = serde_json::from_str(res["text"].as_str().unwrap()).unwrap();
    assert_eq!(res["locks"], listed["locks"]);

    // The other agent: refused at once, naming the holder; its check says blocked.
    let refused = db.err(
        "lock_acquire",
        json!({"path": "src/parser.rs", "mode": "write"}),
    );
    assert!(refused.contains(&a[..12]), "{refused}");
    let check = db.ok("lock_check", json!({"path": "src/parser.rs"}));
    assert_eq!(check["check"]["blocked"], true, "{check}");
    assert_eq!(check["caller"]["agent"], b.as_str());
    let mine = da.ok("lock_check", json!({"path": "src/parser.rs"}));
    assert_eq!(mine["check"]["blocked"], false, "{mine}");

    // A wait: granted when the holder releases.
    db.send(&json!({"op": "call", "tool": "lock_acquire",
        "args": {"path": "src/parser.rs", "mode": "write", "wait_ms": 20000}}));
    wait_until(Duration::from_secs(10), "b waits for the lock", || {
        !lock_list(&env)["waiters"].as_array().unwrap().is_empty()
    });
    let released = da.ok("lock_release", json!({"path": "src/parser.rs"}));
    assert_eq!(released["released"][0]["path"], "src/parser.rs");
    let granted = db.answer();
    assert_eq!(granted["is_error"], false, "{granted}");
    let listed = lock_list(&env);
    assert_eq!(listed["locks"][0]["holder"], b.as_str(), "{listed}");

    // lock_renew renews b's lease.
    let renewed = db.ok("lock_renew", json!({}));
    assert_eq!(renewed["renewed"], 1, "{renewed}");

    // progress: ps shows the item in progress.
    let p = da.ok(
        "progress",
        json!({"items": [
            {"content": "read the grammar", "status": "completed"},
            {"content": "write the lexer", "status": "in_progress"},
            {"content": "write the parser", "status": "pending"}]}),
    );
    assert_eq!(p["items"], 3);
    let ps = env.maos_json(&["ps"]);
    let agent = ps[0]["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|x| x["id"] == a.as_str())
        .unwrap()
        .clone();
    assert_eq!(agent["todo"], "write the lexer", "{agent}");

    // note: in maos's briefing, and brief / the brief resource say the same.
    da.ok(
        "note",
        json!({"kind": "decision", "text": "use a Pratt parser for expressions"}),
    );
    let brief = env.maos(&["brief"]);
    let brief = String::from_utf8_lossy(&brief.stdout).to_string();
    assert!(brief.contains("use a Pratt parser"), "{brief}");
    let text = da.ok("brief", json!({}));
    assert!(
        text.as_str().unwrap().contains("use a Pratt parser"),
        "{text}"
    );
    assert!(text.as_str().unwrap().contains("ship the parser"));
    let res = da.ask(&json!({"op": "read", "uri": "maos://brief"}));
    assert!(res["text"].as_str().unwrap().contains("use a Pratt parser"));

    // status: the sessions and agents of ps, with what each does.
    let status = da.ok("status", json!({}));
    assert_eq!(status["sessions"][0]["id"], session.as_str());
    assert_eq!(status["sessions"], env.maos_json(&["ps"]));

    // events: what maos events has, and a cursor that pages forward.
    let all = env.events(&[]);
    let first = da.ok("events", json!({"after": 0, "limit": 500}));
    let seqs: Vec<u64> = first["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    let theirs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, theirs);
    let next = first["next"].clone();
    let none = da.ok("events", json!({"after": next}));
    assert_eq!(none["events"], json!([]));
    assert_eq!(none["next"], next);
    db.ok("lock_release", json!({"path": "src/parser.rs"}));
    let later = da.ok("events", json!({"after": next}));
    let types: Vec<&str> = later["events"]
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["type"].as_str().unwrap())
        .collect();
    assert!(types.contains(&"lock_released"), "{types:?}");
    da.close();
    db.close();
}

#[test]
fn a_deadlock_is_reported_as_such_naming_the_cycle() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let (a, b, mut da, mut db) = a_holds_x(&env, &py);
    db.ok("lock_acquire", json!({"path": "y.rs", "mode": "write"}));
    db.send(&json!({"op": "call", "tool": "lock_acquire",
        "args": {"path": "x.rs", "mode": "write", "wait_ms": 20000}}));
    wait_queued(&env);
    // a's request closes the cycle: the younger agent (b) gives way, its wait ends with the
    // deadlock, and a's request queues behind b's lock.
    da.send(&json!({"op": "call", "tool": "lock_acquire",
        "args": {"path": "y.rs", "mode": "write", "wait_ms": 20000}}));
    let victim = db.answer();
    assert_eq!(victim["is_error"], true, "{victim}");
    let e = victim["text"].as_str().unwrap();
    assert!(e.starts_with("deadlock: "), "{e}");
    assert!(e.contains("x.rs") && e.contains("y.rs"), "{e}");
    assert!(e.contains(&a[..12]) && e.contains(&b[..12]), "{e}");
    assert!(!e.contains('\n'));
    let deadlocks = env.events(&["--type", "deadlock_detected"]);
    assert_eq!(deadlocks.len(), 1);
    assert_eq!(deadlocks[0]["data"]["victim"], b.as_str());
    // b still holds y and a waits for it; b releases, a gets it.
    let listed = lock_list(&env);
    assert_eq!(listed["waiters"][0]["agent"], a.as_str(), "{listed}");
    db.ok("lock_release", json!({"path": "y.rs"}));
    let granted = da.answer();
    assert_eq!(granted["is_error"], false, "{granted}");
    assert_eq!(lock_list(&env)["locks"].as_array().unwrap().len(), 2);
}

/// A small deterministic generator (xorshift), so that a failure can be replayed.
struct Gen(u64);

impl Gen {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }

    fn pick<'a, T>(&mut self, xs: &'a [T]) -> &'a T {
        &xs[(self.next() % xs.len() as u64) as usize]
    }

    /// A JSON value of a random shape: wrong types, deep nesting, huge strings.
    fn value(&mut self, depth: u32) -> Value {
        match self.next() % 9 {
            0 => Value::Null,
            1 => json!(self.next().is_multiple_of(2)),
            2 => json!(-(self.next() as i64 % 1000) - 1),
            3 => json!(1e300),
            4 => json!("x".repeat((self.next() % 5000) as usize)),
            5 => json!("\u{0}\u{7f}é\u{202e}"),
            6 if depth < 6 => json!([self.value(depth + 1), self.value(depth + 1)]),
            7 if depth < 6 => json!({"k": self.value(depth + 1)}),
            _ => json!(self.next()),
        }
    }
}

/// Bad arguments for `tool`: wrong types, unknown fields, bad modes and kinds, huge, empty
/// and outside-the-project paths, unknown session ids, out-of-range numbers.
fn bad_args(g: &mut Gen, tool: &str) -> Value {
    let huge = "p".repeat(300 * 1024);
    let outside = ["/etc/passwd", "../../outside.rs", "/", ""];
    let common = vec![
        json!({"surprise": g.value(0)}),
        json!({"path": g.value(0), "mode": g.value(0), "kind": g.value(0), "text": g.value(0),
               "items": g.value(0), "after": g.value(0), "limit": g.value(0), "all": "yes"}),
    ];
    let specific: Vec<Value> = match tool {
        "status" => vec![json!({"all": g.value(0)}), json!({"all": 1})],
        "who" | "lock_release" => vec![
            json!({}),
            json!({"path": *g.pick(&outside)}),
            json!({"path": huge}),
            json!({"path": 42}),
        ],
        "locks" | "brief" => vec![
            json!({"session": "sess_ffffffffffffffffffffffffffffffff"}),
            json!({"session": huge}),
            json!({"session": 7}),
        ],
        "lock_acquire" => vec![
            json!({"path": "a.rs", "mode": *g.pick(&["exclusive", "WRITE", "", "shared"])}),
            json!({"path": *g.pick(&outside), "mode": "write"}),
            json!({"path": "a.rs", "mode": "write", "wait_ms": -5}),
            json!({"path": "a.rs", "mode": "write", "wait_ms": 10_000_000_000u64}),
            json!({"path": "a.rs", "mode": "write", "ttl_ms": 0}),
            json!({"path": "a.rs"}),
            json!({"path": huge, "mode": "write"}),
        ],
        "lock_check" => vec![
            json!({"path": "a.rs", "mode": "exclusive"}),
            json!({"path": *g.pick(&outside)}),
            json!({"mode": "read"}),
        ],
        "lock_renew" => vec![json!({"agent": "someone"})],
        "progress" => vec![
            json!({"items": [{"content": "x", "status": "finished"}]}),
            json!({"items": [{"content": "", "status": "pending"}]}),
            json!({"items": (0..101).map(|i| json!({"content": format!("t{i}"), "status": "pending"})).collect::<Vec<_>>()}),
            json!({"items": "all done"}),
            json!({"items": [{"content": huge, "status": "pending"}]}),
        ],
        "note" => vec![
            json!({"kind": "opinion", "text": "x"}),
            json!({"kind": "done", "text": ""}),
            json!({"kind": "done", "text": huge}),
            json!({"kind": "done"}),
        ],
        "events" => vec![
            json!({"limit": 0}),
            json!({"limit": 100_000}),
            json!({"after": -1}),
            json!({"session": "sess_ffffffffffffffffffffffffffffffff"}),
        ],
        other => panic!("no bad arguments for {other}"),
    };
    if g.next().is_multiple_of(3) {
        g.pick(&common).clone()
    } else {
        g.pick(&specific).clone()
    }
}

#[test]
fn bad_input_to_every_tool_is_one_sentence_and_changes_nothing() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let (_, a, _) = two_agents(&env);
    let mut d = Driver::start(&env, &py, &[("MAOS_AGENT_ID", &a)]);
    d.ok("lock_acquire", json!({"path": "held.rs", "mode": "write"}));
    d.ok("note", json!({"kind": "pending", "text": "the baseline"}));
    let before = (
        lock_list(&env),
        env.events(&[]).len(),
        env.maos_json(&["ps"]),
    );
    let tools = [
        "status",
        "who",
        "locks",
        "lock_acquire",
        "lock_renew",
        "lock_release",
        "lock_check",
        "progress",
        "note",
        "brief",
        "events",
    ];
    let mut g = Gen(0x5eed_cafe_f00d_d00d);
    for round in 0..12 {
        for tool in tools {
            let args = bad_args(&mut g, tool);
            let shown: String = args.to_string().chars().take(200).collect();
            let e = d.err(tool, args);
            assert!(
                !e.is_empty() && !e.contains('\n'),
                "round {round} {tool} {shown}: {e:?}"
            );
            assert!(
                e.len() < 2000,
                "round {round} {tool} {shown}: a long error: {e}"
            );
        }
    }
    // An unknown tool is a JSON-RPC error; the server still answers afterwards.
    let unknown = d.call("rm_rf", json!({}));
    assert!(unknown["rpc_error"].is_string(), "{unknown}");
    let after = (
        lock_list(&env),
        env.events(&[]).len(),
        env.maos_json(&["ps"]),
    );
    assert_eq!(before.0, after.0, "the locks changed");
    assert_eq!(before.1, after.1, "events were recorded");
    assert_eq!(before.2, after.2, "ps changed");
    d.ok("status", json!({}));
    d.close();
}

#[test]
fn a_call_maos_cannot_attribute_is_refused_in_one_sentence() {
    let Some(py) = python() else { return };
    let env = Env::new();
    two_agents(&env);
    // No MAOS_AGENT_ID, no hook record, and the server's parent is no window maos knows.
    let mut d = Driver::start(&env, &py, &[]);
    let e = d.err("lock_acquire", json!({"path": "a.rs", "mode": "write"}));
    assert!(e.contains("cannot tell which agent"), "{e}");
    assert!(e.contains("MAOS_AGENT_ID"), "{e}");
    assert_eq!(lock_list(&env)["locks"], json!([]));
    // Reads need no agent.
    d.ok("status", json!({}));
    let check = d.ok("lock_check", json!({"path": "a.rs"}));
    assert_eq!(check["check"]["blocked"], false);
    d.close();
}

/// `maos mcp` speaking to raw bytes: garbage lines are answered or ignored, never a crash;
/// a closed stdin ends it.
/// A good call (`locks`, with JSON-RPC id `id`) is answered after `what`: the server still
/// serves. The lines before its answer are returned.
fn assert_serving(
    child: &mut Child,
    stdin: &mut ChildStdin,
    rx: &Receiver<String>,
    id: u64,
    what: &str,
) -> Vec<Value> {
    let call = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
        "params": {"name": "locks", "arguments": {}}});
    writeln!(stdin, "{call}").unwrap();
    let mut before = Vec::new();
    while let Ok(line) = rx.recv_timeout(Duration::from_secs(20)) {
        let v: Value = serde_json::from_str(&line).unwrap_or(Value::Null);
        if v["id"] == id {
            return before;
        }
        before.push(v);
    }
    let status = child.try_wait().unwrap();
    panic!("maos mcp stopped answering after {what} (exit {status:?})");
}

#[test]
fn garbage_on_stdin_never_crashes_it_and_a_closed_stdin_ends_it() {
    let env = Env::new();
    let (mut child, mut stdin, rx) = maos_tests::mcp::raw_server(&env, &[]);
    for junk in [
        "not json at all",
        "{\"jsonrpc\": \"2.0\", \"id\": 2, \"method\": \"tools/call\", \"params\": 5}",
        "[1, 2, 3]",
        "{\"jsonrpc\": \"2.0\", \"id\": 3, \"method\": \"tools/call\", \"params\": {\"name\": \"who\", \"arguments\": [\"a\"]}}",
    ] {
        writeln!(stdin, "{junk}").unwrap();
    }
    // Still serving: a good call is answered.
    assert_serving(&mut child, &mut stdin, &rx, 9, "garbage");
    drop(stdin);
    wait_until(
        Duration::from_secs(10),
        "maos mcp ends with its stdin",
        || matches!(child.try_wait(), Ok(Some(_))),
    );
    assert!(child.wait().unwrap().success());
}

/// A note goes to the caller's own session, not the project's active one (it was refused as
/// "not in session ..." when the note was sent for the active session).
#[test]
fn a_note_goes_to_the_callers_session_whichever_is_active() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let first = env.session("the active one", &[]);
    let second = env.session("another one", &[]);
    env.maos(&["session", "start", &second]);
    let agent = env.agent(Some(&second), "writer", "in the second session");
    let mut d = Driver::start(&env, &py, &[("MAOS_AGENT_ID", &agent)]);
    let got = d.ok(
        "note",
        json!({"kind": "done", "text": "the second session's note"}),
    );
    assert_eq!(got["recorded"], true, "{got}");
    let notes = env.events(&["--type", "note_recorded"]);
    let [note] = &notes[..] else {
        panic!("not one note: {notes:?}")
    };
    assert_eq!(note["session_id"], second.as_str(), "{note}");
    assert_ne!(note["session_id"], first.as_str());
    // The briefing is the caller's session's too; the resource (no caller) the active one's.
    let brief = d.ok("brief", json!({}));
    let brief = brief.as_str().unwrap();
    assert!(
        brief.contains("another one") && brief.contains("the second session's note"),
        "{brief}"
    );
    let res = d.ask(&json!({"op": "read", "uri": "maos://brief"}));
    assert!(
        res["text"].as_str().unwrap().contains("the active one"),
        "{res}"
    );
    d.close();
}

/// A lock wait whose call the client cancels (the SDK sends `notifications/cancelled` when
/// the call times out on its side) leaves the queue at once, and the lock is never granted to
/// it later; the server goes on serving.
#[test]
fn a_cancelled_lock_wait_leaves_the_queue_and_is_never_granted() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let (_, b, mut da, mut db) = a_holds_x(&env, &py);
    let gave_up = db.ask(&json!({"op": "call", "tool": "lock_acquire",
        "args": {"path": "x.rs", "mode": "write", "wait_ms": 60000}, "timeout": 1.0}));
    let e = gave_up["rpc_error"].as_str().unwrap_or_default();
    assert!(
        e.contains("timed out"),
        "the SDK gives the call up: {gave_up}"
    );
    wait_until(
        Duration::from_secs(10),
        "b's cancelled wait leaves the queue",
        || lock_list(&env)["waiters"].as_array().unwrap().is_empty(),
    );
    da.ok("lock_release", json!({"path": "x.rs"}));
    let listed = lock_list(&env);
    assert!(listed["locks"].as_array().unwrap().is_empty(), "{listed}");
    // The same server takes it now, for b.
    let got = db.ok("lock_acquire", json!({"path": "x.rs", "mode": "write"}));
    assert_eq!(got["lock"]["holder"], b.as_str(), "{got}");
    da.close();
    db.close();
}

/// The client goes away (killed) while its call waits for a lock: the server's stdin closes
/// and the wait leaves the queue then, not when the server has ended (rmcp lets calls in
/// flight finish for up to 5 s first, and a grant in that time went to a client that is gone
/// and stayed held); the lock a lets go of is then nobody's.
#[test]
fn a_lock_wait_ends_when_the_client_goes_away() {
    let Some(py) = python() else { return };
    let env = Env::new();
    let (_, _, mut da, mut db) = a_holds_x(&env, &py);
    db.send(&json!({"op": "call", "tool": "lock_acquire",
        "args": {"path": "x.rs", "mode": "write", "wait_ms": 60000}}));
    wait_queued(&env);
    // The driver's child is b's `maos mcp`.
    let driver = db.pid();
    let children = std::fs::read_to_string(format!("/proc/{driver}/task/{driver}/children"))
        .unwrap_or_default();
    let server: u32 = children
        .split_whitespace()
        .next()
        .and_then(|p| p.parse().ok())
        .unwrap_or_else(|| panic!("the driver {driver} runs no server: {children:?}"));
    maos_tests::kill9(driver);
    // Well within the 5 s rmcp gives calls in flight once its input has ended.
    wait_until(
        Duration::from_secs(3),
        "b's wait leaves the queue once its server's stdin closed",
        || lock_list(&env)["waiters"].as_array().unwrap().is_empty(),
    );
    da.ok("lock_release", json!({"path": "x.rs"}));
    let listed = lock_list(&env);
    assert!(listed["locks"].as_array().unwrap().is_empty(), "{listed}");
    wait_until(Duration::from_secs(10), "b's server ends", || {
        !maos_tests::alive(server)
    });
    da.close();
}

/// A request line over rmcp's bound (16 MiB) is dropped unread, never buffered whole, and
/// the server goes on: the next call is answered, nothing was changed, and a line just under
/// the bound (its arguments over maos's 256 KiB) is refused in one sentence.
#[test]
fn a_request_line_over_16_mib_is_dropped_and_the_server_goes_on() {
    let env = Env::new();
    let (mut child, mut stdin, rx) = maos_tests::mcp::raw_server(&env, &[]);
    let huge = "x".repeat(17 * 1024 * 1024);
    let call = |id: u64, text: &str| {
        json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "note", "arguments": {"kind": "decision", "text": text}}})
    };
    writeln!(stdin, "{}", call(2, &huge)).unwrap();
    let before = assert_serving(&mut child, &mut stdin, &rx, 3, "a 17 MiB line");
    assert!(
        before.iter().all(|v| v["id"] != 2),
        "the oversized line was read as a call: {before:?}"
    );
    // Just under the bound: read, and refused by maos's own limit.
    writeln!(stdin, "{}", call(4, &huge[..15 * 1024 * 1024])).unwrap();
    let refused = loop {
        let line = rx
            .recv_timeout(Duration::from_secs(20))
            .expect("an answer to the 15 MiB call");
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 4 {
            break v;
        }
    };
    assert_eq!(refused["result"]["isError"], true, "{refused}");
    let text = refused["result"]["content"][0]["text"].as_str().unwrap();
    assert!(!text.contains('\n') && text.len() < 300, "{text}");
    assert!(env.events(&["--type", "note_recorded"]).is_empty());
    drop(stdin);
    wait_until(
        Duration::from_secs(10),
        "maos mcp ends with its stdin",
        || matches!(child.try_wait(), Ok(Some(_))),
    );
    assert!(child.wait().unwrap().success());
}
