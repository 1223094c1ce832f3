//! `maos hook` through real processes: the Claude Code fixture replayed line by line against a
//! real daemon, denials on paused sessions, malformed input, stdin left open, and the daemon
//! being unreachable (fail open, or closed on request).

use std::io::Write;
use std::process::{Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, decision, describe, maos_bin};
use serde_json::{Value, json};

/// Run `maos hook` with `input` on stdin; with `keep_open`, stdin is not closed afterwards.
fn hook_with(env: &Env, input: &Value, vars: &[(&str, &str)], keep_open: bool) -> Output {
    hook_as(env, cli_of(input), input, vars, keep_open)
}

/// The CLI a test input plays (`"_cli"`, a field no CLI sends: Claude Code without it).
fn cli_of(input: &Value) -> &str {
    input["_cli"].as_str().unwrap_or("claude")
}

/// `maos hook --cli CLI` given `input` on stdin (kept open after it with `keep_open`).
fn hook_as(env: &Env, cli: &str, input: &Value, vars: &[(&str, &str)], keep_open: bool) -> Output {
    let input = input.to_string().into_bytes();
    env.hook_at(
        &env.project,
        &["hook", "--cli", cli],
        input,
        vars,
        keep_open,
    )
}

fn hook(env: &Env, input: &Value) -> Output {
    hook_with(env, input, &[], false)
}

fn fixture(name: &str, project: &str) -> Vec<(String, Value)> {
    let path = fixtures_dir().join(name);
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| {
            let v: Value =
                serde_json::from_str(&l.replace("{{PROJECT}}", project)).expect("fixture line");
            (
                v["expect"].as_str().unwrap_or_default().to_string(),
                v["input"].clone(),
            )
        })
        .collect()
}

fn fixtures_dir() -> std::path::PathBuf {
    std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("fixtures")
}

/// Every fixture file, as "cli/name.jsonl".
fn all_fixtures() -> Vec<String> {
    let mut out = Vec::new();
    for cli in ["claude-code", "codex"] {
        let dir = fixtures_dir().join(cli);
        for e in std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display())) {
            let name = e
                .expect("dir entry")
                .file_name()
                .to_string_lossy()
                .into_owned();
            if name.ends_with(".jsonl") {
                out.push(format!("{cli}/{name}"));
            }
        }
    }
    out.sort();
    out
}

/// The output must be valid for the strictest CLI (Codex refuses unknown keys): nothing, or
/// one JSON object with only the keys the hook output schemas define.
fn assert_strict_output(what: &str, event: &str, out: &Output) {
    const TOP: [&str; 7] = [
        "continue",
        "decision",
        "reason",
        "stopReason",
        "suppressOutput",
        "systemMessage",
        "hookSpecificOutput",
    ];
    const SPECIFIC: [&str; 4] = [
        "hookEventName",
        "permissionDecision",
        "permissionDecisionReason",
        "additionalContext",
    ];
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return;
    }
    assert_eq!(text.trim().lines().count(), 1, "{what}: one object: {text}");
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{what}: {e}"));
    let top = v
        .as_object()
        .unwrap_or_else(|| panic!("{what}: not an object: {text}"));
    for k in top.keys() {
        assert!(TOP.contains(&k.as_str()), "{what}: unknown key {k}");
    }
    if let Some(h) = top.get("hookSpecificOutput") {
        assert_eq!(h["hookEventName"], event, "{what}");
        for k in h.as_object().expect("hookSpecificOutput object").keys() {
            assert!(SPECIFIC.contains(&k.as_str()), "{what}: unknown key {k}");
        }
    }
}

/// The files a write tool call touches, relative to the project (`None`: not a write).
fn written_paths(env: &Env, input: &Value) -> Option<Vec<String>> {
    let tool = &input["tool_input"];
    let paths: Vec<String> = match input["tool_name"].as_str()? {
        "Write" | "Edit" | "MultiEdit" => vec![tool["file_path"].as_str()?.to_string()],
        "NotebookEdit" => vec![tool["notebook_path"].as_str()?.to_string()],
        "apply_patch" => tool["command"]
            .as_str()?
            .lines()
            .filter_map(|l| {
                [
                    "*** Add File: ",
                    "*** Update File: ",
                    "*** Delete File: ",
                    "*** Move to: ",
                ]
                .iter()
                .find_map(|p| l.strip_prefix(p))
            })
            .map(str::to_string)
            .collect(),
        _ => return None,
    };
    let root = format!("{}/", env.project.display());
    Some(
        paths
            .into_iter()
            .map(|p| p.strip_prefix(&root).map(str::to_string).unwrap_or(p))
            .collect(),
    )
}

/// Which maos agent each CLI thread (CLI session id, CLI subagent id) is, learnt from the
/// agents registered while that thread's hook calls ran.
#[derive(Default)]
struct Writers {
    seen: usize,
    agents: std::collections::HashMap<(String, Option<String>), String>,
}

impl Writers {
    /// Take in the agents registered by the call `input` just made.
    fn learn(&mut self, env: &Env, input: &Value) {
        let events = env.events(&[]);
        let cli = input["session_id"].as_str().unwrap_or_default().to_string();
        let sub = input["agent_id"].as_str().map(str::to_string);
        for e in events.iter().skip(self.seen) {
            if e["type"] != "agent_registered" {
                continue;
            }
            let id = e["agent_id"].as_str().expect("agent id").to_string();
            // A top-level agent is the thread's main thread; one with a parent is the
            // subagent making the call (a PostToolUse of the main thread may register a
            // subagent that never spoke: that one is not the caller).
            let key = match (e["data"]["parent"].is_null(), &sub) {
                (true, _) => (cli.clone(), None),
                (false, Some(s)) => (cli.clone(), Some(s.clone())),
                (false, None) => continue,
            };
            self.agents.entry(key).or_insert(id);
        }
        self.seen = events.len();
    }

    /// The call `input` was allowed to write: its caller now holds the write lock of every
    /// file it touches.
    fn assert_holds(&self, env: &Env, what: &str, input: &Value, paths: &[String]) {
        let key = (
            input["session_id"].as_str().unwrap_or_default().to_string(),
            input["agent_id"].as_str().map(str::to_string),
        );
        let writer = self
            .agents
            .get(&key)
            .unwrap_or_else(|| panic!("{what}: the writer {key:?} was never registered"));
        let locks = env.maos_json(&["lock", "list"]);
        for path in paths {
            let held = locks["locks"].as_array().expect("locks").iter().any(|l| {
                l["path"] == path.as_str() && l["holder"] == writer.as_str() && l["mode"] == "write"
            });
            assert!(
                held,
                "{what}: {writer} holds no write lock on {path}: {locks}"
            );
        }
    }
}

/// Replay one fixture through real `maos hook` processes, checking each answer. An allowed
/// write must have taken the write lock of every file it touches for its caller.
fn replay(env: &Env, name: &str) {
    // The fixtures expect a write outside the project refused, as every one was before
    // `outside_project` (default "allow") said so: they are replayed with "deny".
    env.write_config("outside_project = \"deny\"\n");
    let project = env.project.to_string_lossy().into_owned();
    let mut writers = Writers::default();
    let mut locks_checked = 0;
    for (i, (expect, mut input)) in fixture(name, &project).into_iter().enumerate() {
        if name.starts_with("codex/") {
            input["_cli"] = json!("codex");
        }
        let out = hook(env, &input);
        writers.learn(env, &input);
        let event = input["hook_event_name"].as_str().unwrap_or_default();
        let what = format!("{name} line {} ({event} {})", i + 1, input["tool_name"]);
        assert!(
            out.status.success(),
            "{what}: exit {:?}, stderr {}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
        assert_strict_output(&what, event, &out);
        let d = decision(&out);
        let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
        match expect.as_str() {
            "deny" => {
                assert_eq!(d, "deny", "{what} must be denied");
                let reason = v["hookSpecificOutput"]["permissionDecisionReason"]
                    .as_str()
                    .unwrap_or("");
                assert!(reason.starts_with("maos: "), "{what}: reason {reason:?}");
            }
            "allow" | "none" | "context-or-none" => {
                assert_ne!(
                    d,
                    "deny",
                    "{what} must not be denied: {}",
                    String::from_utf8_lossy(&out.stdout)
                );
                if let Some(paths) = written_paths(env, &input).filter(|_| event == "PreToolUse") {
                    assert_eq!(expect, "allow", "{what}: a write is expected to be allowed");
                    writers.assert_holds(env, &what, &input, &paths);
                    locks_checked += 1;
                }
            }
            "context" => assert!(
                v["hookSpecificOutput"]["additionalContext"]
                    .as_str()
                    .is_some_and(|c| c.starts_with("maos: ")),
                "{what} must bring context: {}",
                String::from_utf8_lossy(&out.stdout)
            ),
            other => panic!("{what}: unknown expectation {other}"),
        }
    }
    assert!(locks_checked > 0, "{name}: no allowed write was checked");
}

#[test]
fn every_fixture_gets_the_expected_answers_in_the_strict_output_shape() {
    let fixtures = all_fixtures();
    assert!(fixtures.len() >= 3, "fixtures found: {fixtures:?}");
    for name in fixtures {
        replay(&Env::new(), &name);
    }
}

#[test]
fn the_two_subagent_fixture_gets_the_expected_answers() {
    let env = Env::new();
    replay(&env, "claude-code/session-two-subagents.jsonl");
    // What the daemon now knows: one session named by the first prompt, the window's agent
    // ended by SessionEnd, both subagents completed under it, no lock left behind, and the
    // session completed with its only window.
    let ps = env.maos_json(&["ps", "--all"]);
    let s = &ps[0];
    assert_eq!(s["state"], "completed", "{s}");
    assert_eq!(
        s["objective"],
        "Add rate limiting to the login endpoint; backend and tests in parallel"
    );
    let agents = s["agents"].as_array().expect("agents");
    let orch = agents
        .iter()
        .find(|a| a["role"] == "claude")
        .expect("the window's agent");
    assert_eq!(orch["state"], "ended");
    assert_eq!(orch["cli"], "claude");
    assert_eq!(
        orch["task"], s["objective"],
        "the window's task is its first prompt"
    );
    for role in ["backend-engineer", "qa-engineer"] {
        let a = agents
            .iter()
            .find(|a| a["role"] == role)
            .unwrap_or_else(|| panic!("{role}"));
        assert_eq!(a["state"], "completed", "{role}");
        assert_eq!(
            a["parent"], orch["id"],
            "{role} hangs under the window's agent"
        );
    }
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    let denied: Vec<Value> = env.events(&["--type", "tool_denied"]);
    assert_eq!(
        denied.len(),
        2,
        "both denials are on the timeline: {denied:?}"
    );
    assert_eq!(denied[0]["data"]["why"], "lock_conflict");
    assert_eq!(denied[1]["data"]["why"], "path_outside_workspace");
    // No file content reaches the database: not in the file, not in its WAL. The path that
    // is stored must be found in the same bytes, so the search really sees the data.
    let bytes = env.stored_bytes();
    let has = |needle: &[u8]| bytes.windows(needle.len()).any(|w| w == needle);
    assert!(has(b"tests/limit_test.rs"), "the written path is stored");
    assert!(!has(b"pub struct Limiter;"), "the written content is not");
}

/// `input`, a write, was allowed: no decision, and its caller (by role: the subagent's type,
/// else the window's CLI) holds the write lock of every file it touches.
fn assert_write_allowed(env: &Env, input: &Value, out: &Output) {
    assert_eq!(decision(out), "", "{}", describe(out));
    let role = match (&input["agent_id"], input["agent_type"].as_str()) {
        (Value::String(_), Some(kind)) => kind,
        _ => cli_of(input),
    };
    let locks = env.maos_json(&["lock", "list"]);
    for path in written_paths(env, input).expect("a write") {
        let held = locks["locks"].as_array().expect("locks").iter().any(|l| {
            l["path"] == path.as_str() && l["mode"] == "write" && l["holder_role"] == role
        });
        assert!(held, "the {role} holds no write lock on {path}: {locks}");
    }
}

fn write_input(env: &Env, session: &str, agent: Option<&str>, file: &str) -> Value {
    let mut v = json!({
        "session_id": session, "cwd": env.project, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_x",
        "tool_input": {"file_path": env.project.join(file), "content": "x"},
        "an_unknown_field": {"nested": [1, 2]},
    });
    if let Some(a) = agent {
        v["agent_id"] = json!(a);
        v["agent_type"] = json!("coder");
    }
    v
}

#[test]
fn a_paused_session_denies_writes_until_resumed() {
    let env = Env::new();
    let start = json!({"session_id": "s-1", "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    assert!(hook(&env, &start).status.success());
    env.maos_json(&["pause", "--reason", "review the schema\nfirst"]);
    let out = hook(&env, &write_input(&env, "s-1", None, "a.rs"));
    assert_eq!(decision(&out), "deny");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("maos resume"), "{text}");
    // The pause's reason reaches the model, on one line.
    assert!(
        text.contains("paused") && text.contains(": review the schema first"),
        "{text}"
    );
    env.maos_json(&["resume"]);
    let a = write_input(&env, "s-1", None, "a.rs");
    assert_write_allowed(&env, &a, &hook(&env, &a));
    // One paused subagent: only its writes are refused, with the command that resumes it.
    let sub = write_input(&env, "s-1", Some("sub-p"), "b.rs");
    assert_write_allowed(&env, &sub, &hook(&env, &sub));
    let ps = env.maos_json(&["ps"]);
    let id = ps[0]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["role"] == "coder")
        .and_then(|a| a["id"].as_str())
        .expect("the subagent")
        .to_string();
    env.maos_json(&["pause", "--agent", &id, "--reason", "wait for the API"]);
    let out = hook(&env, &sub);
    assert_eq!(decision(&out), "deny");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        text.contains(&format!("maos resume --agent {}`", &id[..12])),
        "{text}"
    );
    assert!(text.contains(": wait for the API"), "{text}");
    // The orchestrator is not paused.
    let c = write_input(&env, "s-1", None, "c.rs");
    assert_write_allowed(&env, &c, &hook(&env, &c));
    env.maos_json(&["resume", "--agent", &id]);
    assert_write_allowed(&env, &sub, &hook(&env, &sub));
}

#[test]
fn two_claude_sessions_in_one_project_conflict_on_one_file() {
    let env = Env::new();
    let x = write_input(&env, "claude-A", None, "src/x.rs");
    assert_write_allowed(&env, &x, &hook(&env, &x));
    let out = hook(&env, &write_input(&env, "claude-B", None, "src/x.rs"));
    assert_eq!(decision(&out), "deny");
    assert!(String::from_utf8_lossy(&out.stdout).contains("src/x.rs"));
    // A stray subagent id never announced by SubagentStart is registered on the spot.
    let y = write_input(&env, "claude-A", Some("stray-1"), "src/y.rs");
    assert_write_allowed(&env, &y, &hook(&env, &y));
    let ps = env.maos_json(&["ps"]);
    assert!(
        ps[0]["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .any(|a| a["role"] == "coder")
    );
}

#[test]
fn bad_input_is_a_non_blocking_error_and_stdin_left_open_still_answers() {
    let env = Env::new();
    for garbage in [
        &b"not json"[..],
        b"",
        b"[1,2]",
        b"{\"hook_event_name\":\"PreToolUse\"}",
    ] {
        let mut cmd = env.command(&maos_bin());
        cmd.arg("hook")
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = cmd.spawn().expect("spawn");
        child
            .stdin
            .take()
            .expect("stdin")
            .write_all(garbage)
            .expect("write");
        let out = child.wait_with_output().expect("wait");
        assert_eq!(
            out.status.code(),
            Some(1),
            "{:?}: exit 1 never blocks",
            String::from_utf8_lossy(garbage)
        );
        assert!(out.stdout.is_empty());
        assert_eq!(String::from_utf8_lossy(&out.stderr).lines().count(), 1);
    }
    // `hook_with` fails the test if the hook does not answer within DEADLINE.
    let input = write_input(&env, "s-open", None, "a.rs");
    let out = hook_with(&env, &input, &[], true);
    assert!(out.status.success());
    assert_write_allowed(&env, &input, &out);
}

#[test]
fn an_unreachable_daemon_fails_open_or_closed_on_request() {
    let env = Env::new();
    let input = write_input(&env, "s-1", None, "a.rs");
    let out = hook_with(&env, &input, &[("MAOS_NO_AUTOSTART", "1")], false);
    assert!(out.status.success());
    assert_eq!(decision(&out), "", "fail open: the tool runs");
    let v: Value = serde_json::from_slice(&out.stdout).expect("systemMessage JSON");
    assert!(
        v["systemMessage"]
            .as_str()
            .unwrap_or("")
            .contains("not enforced")
    );
    // Any other event is only missing from the record, and says so; fail-closed denies only
    // tool calls.
    let start = json!({"session_id": "s-1", "cwd": env.project, "hook_event_name": "SessionStart"});
    for fail in ["open", "closed"] {
        let vars = [("MAOS_NO_AUTOSTART", "1"), ("MAOS_HOOK_FAIL", fail)];
        let out = hook_with(&env, &start, &vars, false);
        assert!(out.status.success(), "{}", describe(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("systemMessage JSON");
        let said = v["systemMessage"].as_str().unwrap_or("");
        assert!(
            said.ends_with("; this SessionStart event is not recorded"),
            "{said}"
        );
    }
    let out = hook_with(
        &env,
        &input,
        &[("MAOS_NO_AUTOSTART", "1"), ("MAOS_HOOK_FAIL", "closed")],
        false,
    );
    assert!(out.status.success());
    assert_eq!(decision(&out), "deny");
    assert!(
        !env.socket.exists(),
        "with MAOS_NO_AUTOSTART=1 nothing starts a daemon"
    );
}

/// A listener on the daemon's socket for a fake daemon (its directory made 0700, as the
/// client wants it), polled by the fake's own thread.
fn fake_listener(socket: &std::path::Path) -> std::os::unix::net::UnixListener {
    use std::os::unix::fs::DirBuilderExt;
    let dir = socket.parent().expect("socket dir");
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .expect("socket dir");
    let listener = std::os::unix::net::UnixListener::bind(socket).expect("bind the fake");
    listener.set_nonblocking(true).expect("nonblocking");
    listener
}

/// A fake daemon on the socket: it accepts every connection and never reads or answers.
struct Stall {
    accepted: std::sync::Arc<std::sync::atomic::AtomicUsize>,
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Stall {
    fn listen(socket: &std::path::Path) -> Stall {
        use std::sync::atomic::Ordering;
        let listener = fake_listener(socket);
        let stall = Stall {
            accepted: Default::default(),
            stop: Default::default(),
        };
        let (accepted, stop) = (stall.accepted.clone(), stall.stop.clone());
        std::thread::spawn(move || {
            let mut held = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                match listener.accept() {
                    Ok((conn, _)) => {
                        held.push(conn);
                        accepted.fetch_add(1, Ordering::SeqCst);
                    }
                    // Nothing to accept: look again soon (this thread only serves the fake).
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        stall
    }

    fn accepted(&self) -> usize {
        self.accepted.load(std::sync::atomic::Ordering::SeqCst)
    }
}

impl Drop for Stall {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// A daemon that accepts the connection and then never answers: the hook gives up within
/// `MAOS_HOOK_TIMEOUT_MS` (the whole call, as README says) and applies the fail policy.
#[test]
fn a_daemon_that_accepts_and_stalls_gets_the_fail_policy_within_the_deadline() {
    const TIMEOUT: Duration = Duration::from_millis(2000);
    // Process start and exit on a loaded machine, not a second wait for the daemon.
    const SLACK: Duration = Duration::from_millis(1500);
    let env = Env::new();
    let stall = Stall::listen(&env.socket);
    let input = write_input(&env, "s-stall", None, "a.rs");
    let ms = TIMEOUT.as_millis().to_string();
    for (policy, want) in [("open", ""), ("closed", "deny")] {
        let before = stall.accepted();
        let t0 = std::time::Instant::now();
        let out = hook_with(
            &env,
            &input,
            &[("MAOS_HOOK_TIMEOUT_MS", &ms), ("MAOS_HOOK_FAIL", policy)],
            false,
        );
        let took = t0.elapsed();
        assert!(out.status.success(), "{policy}: {}", describe(&out));
        assert!(
            stall.accepted() > before,
            "{policy}: the hook reached the fake daemon"
        );
        assert_eq!(decision(&out), want, "{policy}: {}", describe(&out));
        let text = String::from_utf8_lossy(&out.stdout);
        if policy == "open" {
            assert!(text.contains("not enforced"), "{text}");
        } else {
            assert!(text.contains("MAOS_HOOK_FAIL=closed"), "{text}");
        }
        assert!(
            took < TIMEOUT + SLACK,
            "{policy}: the hook took {took:?} with MAOS_HOOK_TIMEOUT_MS={ms}"
        );
    }
    assert!(
        env.daemons().is_empty(),
        "no daemon was started beside the fake"
    );
}

/// A fake daemon on the socket that answers, but a byte at a time: it accepts every
/// connection, optionally sends a real welcome, then trickles one byte of a frame that never
/// ends every 200 ms, for ever. Each byte would restart a per-read timeout.
struct Trickle {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
}

impl Trickle {
    fn listen(socket: &std::path::Path, welcome: bool) -> Trickle {
        use std::sync::atomic::Ordering;
        let listener = fake_listener(socket);
        let stop: std::sync::Arc<std::sync::atomic::AtomicBool> = Default::default();
        let stopped = stop.clone();
        std::thread::spawn(move || {
            while !stopped.load(Ordering::SeqCst) {
                let Ok((mut conn, _)) = listener.accept() else {
                    // Nothing to accept: look again soon (this thread only serves the fake).
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let stopped = stopped.clone();
                std::thread::spawn(move || {
                    let _ = conn.set_nonblocking(false);
                    if welcome {
                        let hello = maos_proto::ServerMsg::Welcome {
                            protocol: maos_proto::PROTOCOL_VERSION,
                            daemon_version: "0.0.0-trickle".into(),
                            pid: std::process::id(),
                            started_by: maos_proto::StartedBy::Manual,
                        };
                        if maos_proto::write_frame(&mut conn, &hello).is_err() {
                            return;
                        }
                    }
                    // A frame of 64 KiB, never finished.
                    let mut bytes = [0u8, 1, 0, 0].into_iter().chain(std::iter::repeat(b' '));
                    while !stopped.load(Ordering::SeqCst) {
                        let byte = bytes.next().unwrap_or(b' ');
                        if conn.write_all(&[byte]).is_err() {
                            return;
                        }
                        std::thread::sleep(Duration::from_millis(200));
                    }
                });
            }
        });
        Trickle { stop }
    }
}

impl Drop for Trickle {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::SeqCst);
    }
}

/// Run `maos ARGS` with `input` on stdin and `vars` set; fails the test when it is still
/// running after `limit` (killed then). Returns its output and how long it took.
fn run_within(
    env: &Env,
    args: &[&str],
    input: &[u8],
    vars: &[(&str, &str)],
    limit: Duration,
) -> (Output, Duration) {
    let t0 = std::time::Instant::now();
    let mut cmd = env.maos_cmd_at(&env.project, args);
    cmd.envs(vars.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    let mut child = cmd.spawn().expect("run maos");
    let mut stdin = child.stdin.take().expect("stdin");
    let _ = stdin.write_all(input);
    drop(stdin);
    let pid = child.id();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(child.wait_with_output());
    });
    match rx.recv_timeout(limit) {
        Ok(out) => (out.expect("maos output"), t0.elapsed()),
        Err(_) => {
            maos_tests::kill9(pid);
            panic!("maos {args:?} still ran after {limit:?} (killed)");
        }
    }
}

/// `MAOS_HOOK_TIMEOUT_MS` bounds the whole hook call, not each read: a daemon that trickles
/// one byte every 200 ms (from the start, or after a real welcome) still gets the fail policy
/// once the budget is spent, far before its frame would end.
#[test]
fn a_daemon_that_trickles_bytes_gets_the_fail_policy_within_the_budget() {
    // The budget, then process start and exit on a loaded machine.
    const LIMIT: Duration = Duration::from_secs(4);
    for welcome in [false, true] {
        let env = Env::new();
        let _fake = Trickle::listen(&env.socket, welcome);
        let input = write_input(&env, "s-trickle", None, "a.rs").to_string();
        for (policy, want) in [("open", ""), ("closed", "deny")] {
            let (out, took) = run_within(
                &env,
                &["hook", "--cli", "claude"],
                input.as_bytes(),
                &[("MAOS_HOOK_TIMEOUT_MS", "1000"), ("MAOS_HOOK_FAIL", policy)],
                LIMIT,
            );
            let what = format!("welcome {welcome}, {policy}, took {took:?}");
            assert!(out.status.success(), "{what}: {}", describe(&out));
            assert_eq!(decision(&out), want, "{what}: {}", describe(&out));
            let text = String::from_utf8_lossy(&out.stdout);
            if policy == "open" {
                assert!(text.contains("not enforced"), "{what}: {text}");
            } else {
                assert!(text.contains("MAOS_HOOK_FAIL=closed"), "{what}: {text}");
            }
        }
    }
}

/// Commands wait for a daemon that accepts and never answers only so long
/// (`MAOS_COMMAND_TIMEOUT_MS`, 30 s by default): `ps` and `lock list` then fail in one line
/// naming maosd, with the exit code of an unreachable daemon (3).
#[test]
fn commands_give_up_on_a_daemon_that_accepts_and_stalls() {
    const LIMIT: Duration = Duration::from_secs(5);
    let env = Env::new();
    let stall = Stall::listen(&env.socket);
    for args in [&["ps"][..], &["lock", "list"], &["--json", "ps"]] {
        let before = stall.accepted();
        let (out, took) = run_within(
            &env,
            args,
            b"",
            &[("MAOS_COMMAND_TIMEOUT_MS", "1000")],
            LIMIT,
        );
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(
            stall.accepted() > before,
            "{args:?} reached the fake daemon"
        );
        assert_eq!(out.status.code(), Some(3), "{args:?} ({took:?}): {err}");
        assert!(
            err.contains("maosd") && err.contains("did not answer"),
            "{args:?}: {err}"
        );
        assert_eq!(err.trim().lines().count(), 1, "{args:?}: one line: {err}");
        if args[0] == "--json" {
            let v: Value = serde_json::from_slice(&out.stdout).expect("a JSON error");
            assert_eq!(v["error"]["code"], "unavailable", "{v}");
        }
    }
}

/// A lock wait the user asked for is not cut by the command timeout: with
/// `MAOS_COMMAND_TIMEOUT_MS=300`, `lock acquire --wait 2s` on a held file waits its 2 s and
/// gets the daemon's `lock_timeout`, not the client's "did not answer".
#[test]
fn a_lock_wait_outlasts_the_command_timeout() {
    let env = Env::new();
    let session = env.session("waits", &[]);
    let holder = env.agent(Some(&session), "holder", "work");
    let waiter = env.agent(Some(&session), "waiter", "work");
    env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &holder]);
    let (out, _) = run_within(
        &env,
        &[
            "--json", "lock", "acquire", "src/a.rs", "--agent", &waiter, "--wait", "2s",
        ],
        b"",
        &[("MAOS_COMMAND_TIMEOUT_MS", "300")],
        Duration::from_secs(20),
    );
    let all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(all.contains("lock_timeout"), "{all}");
}

fn agent_by<'a>(agents: &'a [Value], role: &str) -> &'a Value {
    agents
        .iter()
        .find(|a| a["role"] == role)
        .unwrap_or_else(|| panic!("no {role} in {agents:?}"))
}

#[test]
fn legacy_tools_stray_subagents_and_usage_are_recorded() {
    let env = Env::new();
    replay(&env, "claude-code/session-legacy-tools.jsonl");
    // `/clear` ended the window, and its session with it; `claude --resume` brought the
    // conversation back as a new agent with the same task, in a new session.
    let ps = env.maos_json(&["ps", "--all"]);
    let sessions = ps.as_array().expect("sessions");
    assert_eq!(sessions.len(), 2, "{ps}");
    let first = sessions
        .iter()
        .find(|s| s["state"] == "completed")
        .unwrap_or_else(|| panic!("the first session completed: {ps}"));
    let again = sessions
        .iter()
        .find(|s| s["state"] == "running")
        .unwrap_or_else(|| panic!("the resumed window runs: {ps}"));
    let resumed = again["agents"].as_array().expect("agents");
    assert!(
        matches!(&resumed[..], [w] if w["role"] == "claude"
            && w["task"] == "Refactor the parser into modules" && w["state"] == "running"),
        "{again}"
    );
    let agents = first["agents"].as_array().expect("agents").clone();
    assert_eq!(agent_by(&agents, "claude")["state"], "ended");
    assert_eq!(
        env.events(&["--type", "window_resumed"])[0]["data"]["previous_agent"],
        agent_by(&agents, "claude")["id"]
    );
    // Never announced by SubagentStart, each stray subagent claimed its own `Task` request.
    let parser = agent_by(&agents, "general-purpose");
    assert_eq!(parser["task"], "parser: Split src/parser.rs into modules");
    assert_eq!(parser["state"], "completed");
    let notebook = agent_by(&agents, "data-scientist");
    assert_eq!(
        notebook["task"],
        "notebook: Update analysis.ipynb with the new parser timings"
    );
    assert_eq!(parser["parent"], agent_by(&agents, "claude")["id"]);
    // What each subagent used is on its record.
    let results = env.events(&["--type", "subagent_result"]);
    assert_eq!(results.len(), 2, "{results:?}");
    assert_eq!(results[0]["agent_id"], parser["id"]);
    assert_eq!(results[0]["data"]["total_tokens"], 12345);
    assert_eq!(results[0]["data"]["total_duration_ms"], 30512);
    assert_eq!(results[0]["data"]["total_tool_use_count"], 6);
    // Writes are recorded with the size and hash of what was sent, never the text.
    let modified = env.events(&["--type", "file_modified"]);
    let multi = modified
        .iter()
        .find(|e| e["data"]["tool"] == "MultiEdit")
        .expect("MultiEdit recorded");
    assert_eq!(multi["data"]["path"], "src/parser.rs");
    assert_eq!(
        multi["data"]["bytes"],
        ("pub fn parse(".len() + "pub mod lexer;".len()) as u64
    );
    let sha = multi["data"]["sha256"].as_str().expect("sha256");
    assert!(sha.len() == 64 && sha.bytes().all(|b| b.is_ascii_hexdigit()));
    assert!(
        modified
            .iter()
            .any(|e| e["data"]["path"] == "analysis.ipynb" && e["data"]["tool"] == "NotebookEdit")
    );
    // The subagent's and then the main thread's edit of the parser were refused.
    let denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(denied.len(), 2, "{denied:?}");
    assert!(denied.iter().all(|d| d["data"]["why"] == "lock_conflict"));
    assert_eq!(env.events(&["--type", "context_compacted"]).len(), 1);
    // The compaction and the subagents' tokens are the briefing's context usage.
    let sid = first["id"].as_str().expect("session id");
    let brief = env.maos_json(&["brief", sid]);
    let context = &brief["context"];
    assert_eq!(context["compactions"], 1, "{context}");
    assert_eq!(context["last_trigger"], "auto", "{context}");
    assert!(context["last_compaction"].is_string(), "{context}");
    assert_eq!(context["subagents_reported"], 2, "{context}");
    let tokens: u64 = results
        .iter()
        .map(|r| r["data"]["total_tokens"].as_u64().expect("tokens"))
        .sum();
    assert_eq!(context["subagent_tokens"], tokens, "{context}");
    let text = brief["text"].as_str().expect("text");
    assert!(
        text.contains("Context: compacted 1 time, last ")
            && text.contains("(auto); subagents reported ")
            && text.contains(" tokens (2 subagents)."),
        "{text}"
    );
    // PreCompact and Stop each saved a checkpoint of the session.
    let checkpoints = env.checkpoints(sid);
    let reasons: Vec<&str> = checkpoints.iter().map(|(r, _)| r.as_str()).collect();
    assert_eq!(
        reasons,
        [
            "context compacted (PreCompact)",
            "turn ended (Stop)",
            "every window ended"
        ]
    );
    let (_, at_compact) = &checkpoints[0];
    assert_eq!(at_compact["session"]["id"], sid);
    assert_eq!(
        at_compact["locks"].as_array().map(Vec::len),
        Some(2),
        "both subagents still held their files: {at_compact}"
    );
}

#[test]
fn codex_patches_lock_every_file_they_touch() {
    let env = Env::new();
    replay(&env, "codex/session-apply-patch.jsonl");
    let ps = env.maos_json(&["ps"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(1), "one maos session");
    let windows: Vec<&Value> = ps[0]["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter(|a| a["role"] == "codex")
        .collect();
    assert_eq!(windows.len(), 2, "one per Codex session: {ps}");
    for w in windows {
        assert_eq!(w["cli"], "codex", "{w}");
        assert!(
            !w["task"].as_str().unwrap_or_default().contains("Claude"),
            "a Codex window's task never says Claude Code: {w}"
        );
    }
    let modified: Vec<String> = env
        .events(&["--type", "file_modified"])
        .iter()
        .map(|e| e["data"]["path"].as_str().unwrap_or_default().to_string())
        .collect();
    assert_eq!(modified, ["src/lib.rs", "README.md"]);
    let denied = env.events(&["--type", "tool_denied"]);
    let why: Vec<&str> = denied
        .iter()
        .map(|d| d["data"]["why"].as_str().unwrap_or_default())
        .collect();
    assert_eq!(why, ["lock_conflict", "path_outside_workspace"]);
    // Both sessions stopped their turns: nothing is held any more.
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

fn spawn_request(session: &str, env: &Env, id: &str, desc: &str) -> Value {
    json!({"session_id": session, "cwd": env.project, "hook_event_name": "PreToolUse",
           "tool_name": "Agent", "tool_use_id": id,
           "tool_input": {"description": desc, "prompt": format!("{desc}, please"),
                          "subagent_type": "general-purpose"}})
}

/// A general-purpose subagent's first event.
fn subagent_start(session: &str, env: &Env, id: &str) -> Value {
    json!({"session_id": session, "cwd": env.project, "hook_event_name": "SubagentStart",
           "agent_id": id, "agent_type": "general-purpose"})
}

/// The PostToolUse of a background `Agent` call: launched, naming its subagent.
fn launched(session: &str, env: &Env, tool_use_id: &str, agent: &str) -> Value {
    let mut v = spawn_request(session, env, tool_use_id, "x");
    v["hook_event_name"] = json!("PostToolUse");
    v["tool_response"] = json!({"isAsync": true, "status": "async_launched",
                                "agentId": agent, "description": "x"});
    v
}

/// The general-purpose agents `ps` lists, as (id, task), by id.
fn subagent_tasks(env: &Env) -> Vec<(String, String)> {
    let mut v: Vec<(String, String)> = maos_tests::conformance::ps_agents(env)
        .iter()
        .filter(|a| a["role"] == "general-purpose")
        .map(|a| {
            (
                a["id"].as_str().unwrap_or_default().to_string(),
                a["task"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    v.sort();
    v
}

/// Only the tasks of [`subagent_tasks`], sorted.
fn tasks_only(env: &Env) -> Vec<String> {
    let mut v: Vec<String> = subagent_tasks(env).into_iter().map(|(_, t)| t).collect();
    v.sort();
    v
}

/// Background subagents (Claude Code's default): each `Agent` call's PostToolUse comes at
/// launch, and may come before its subagent's first event. A launch that corrects a wrong
/// guess also corrects the tool call the guess tied to the agent, or the other launch would
/// be taken for this agent's and its subagent would be left with no task at all.
#[test]
fn a_corrected_guess_leaves_each_background_subagent_its_own_task() {
    let env = Env::new();
    let s = "claude-launch";
    hook(&env, &spawn_request(s, &env, "toolu_1", "first"));
    hook(&env, &spawn_request(s, &env, "toolu_2", "second"));
    // sub-2 speaks first and is taken for the first request; then both launches come back,
    // the second one before sub-1 ever spoke.
    for call in [
        subagent_start(s, &env, "sub-2"),
        launched(s, &env, "toolu_2", "sub-2"),
        launched(s, &env, "toolu_1", "sub-1"),
        subagent_start(s, &env, "sub-1"),
    ] {
        assert!(hook(&env, &call).status.success());
    }
    assert_eq!(
        tasks_only(&env),
        ["first: first, please", "second: second, please"]
    );
    // And each result names the agent its launch named.
    let results = env.events(&["--type", "subagent_result"]);
    let registered = env.events(&["--type", "agent_registered"]);
    let sub2 = registered[1]["agent_id"].as_str().expect("agent");
    assert_eq!(results[0]["agent_id"], sub2, "{results:#?}");
    assert_ne!(results[1]["agent_id"], sub2, "{results:#?}");
}

/// A launch names its agent, which had taken no request, while another subagent had taken
/// this one: that other subagent takes the next open request, or is of unknown task again
/// until its own launch names it (never two agents with one task).
#[test]
fn a_launch_takes_its_request_back_from_a_subagent_that_guessed_it() {
    let env = Env::new();
    let s = "claude-back";
    hook(&env, &spawn_request(s, &env, "toolu_1", "first"));
    for call in [
        subagent_start(s, &env, "sub-2"),
        subagent_start(s, &env, "sub-1"),
        launched(s, &env, "toolu_1", "sub-1"),
    ] {
        assert!(hook(&env, &call).status.success());
    }
    assert_eq!(
        tasks_only(&env),
        ["first: first, please", "general-purpose subagent sub-2"]
    );
    hook(&env, &spawn_request(s, &env, "toolu_2", "second"));
    assert!(
        hook(&env, &launched(s, &env, "toolu_2", "sub-2"))
            .status
            .success()
    );
    assert_eq!(
        tasks_only(&env),
        ["first: first, please", "second: second, please"]
    );
}

#[test]
fn the_agent_id_link_corrects_a_wrong_guess() {
    let env = Env::new();
    let s = "claude-link";
    hook(&env, &spawn_request(s, &env, "toolu_1", "first"));
    hook(&env, &spawn_request(s, &env, "toolu_2", "second"));
    // Both are the same kind, and the second request's subagent speaks first: the guess
    // (oldest request first) gets them the wrong way round.
    for id in ["sub-2", "sub-1"] {
        hook(&env, &subagent_start(s, &env, id));
    }
    let before = subagent_tasks(&env);
    assert_eq!(before.len(), 2);
    // sub-2 registered first (after the orchestrator) and took the oldest request.
    let registered = env.events(&["--type", "agent_registered"]);
    let sub2 = registered[1]["agent_id"]
        .as_str()
        .expect("agent")
        .to_string();
    let guessed = before.iter().find(|(a, _)| *a == sub2).expect("sub-2");
    assert_eq!(guessed.1, "first: first, please", "the wrong guess");
    // PostToolUse of the first request names its child: sub-1.
    let post = |tool_use_id: &str, agent: &str| {
        let mut v = spawn_request(s, &env, tool_use_id, "x");
        v["hook_event_name"] = json!("PostToolUse");
        v["tool_response"] = json!({"status": "completed", "agentId": agent,
                                    "totalTokens": 10, "totalDurationMs": 20,
                                    "totalToolUseCount": 1});
        hook(&env, &v)
    };
    assert!(post("toolu_1", "sub-1").status.success());
    let results = env.events(&["--type", "subagent_result"]);
    let sub1 = results[0]["agent_id"].as_str().expect("agent").to_string();
    let after = subagent_tasks(&env);
    let task = |id: &str| {
        after
            .iter()
            .find(|(a, _)| a == id)
            .map(|(_, t)| t.clone())
            .unwrap_or_default()
    };
    assert_eq!(task(&sub1), "first: first, please");
    let other = after
        .iter()
        .find(|(a, _)| *a != sub1)
        .map(|(a, _)| a.clone())
        .expect("the other subagent");
    assert_eq!(task(&other), "second: second, please");
    assert!(post("toolu_2", "sub-2").status.success());
    let ps = env.maos_json(&["ps", "--all"]);
    assert!(
        ps[0]["agents"]
            .as_array()
            .expect("agents")
            .iter()
            .filter(|a| a["role"] == "general-purpose")
            .all(|a| a["state"] == "completed"),
        "a completed result completes the subagent"
    );
}

#[test]
fn parallel_subagents_writing_one_file_take_turns() {
    const N: usize = 6;
    let env = Env::new();
    let s = "claude-race";
    let start = json!({"session_id": s, "cwd": env.project, "hook_event_name": "SessionStart"});
    assert!(hook(&env, &start).status.success());
    let mut left: Vec<usize> = (0..N).collect();
    while !left.is_empty() {
        // Every remaining subagent tries to write the same file at the same moment.
        let barrier = std::sync::Arc::new(std::sync::Barrier::new(left.len()));
        let answers: Vec<(usize, Output)> = std::thread::scope(|scope| {
            let handles: Vec<_> = left
                .iter()
                .map(|&i| {
                    let (env, barrier) = (&env, barrier.clone());
                    scope.spawn(move || {
                        let mut input =
                            write_input(env, s, Some(&format!("sub-{i}")), "src/shared.rs");
                        input["agent_type"] = json!(format!("worker-{i}"));
                        barrier.wait();
                        (i, hook(env, &input))
                    })
                })
                .collect();
            handles
                .into_iter()
                .map(|h| h.join().expect("hook thread"))
                .collect()
        });
        let allowed: Vec<usize> = answers
            .iter()
            .filter(|(_, o)| o.status.success() && decision(o).is_empty())
            .map(|(i, _)| *i)
            .collect();
        assert_eq!(allowed.len(), 1, "exactly one holds the file: {allowed:?}");
        let holder = allowed[0];
        for (i, out) in &answers {
            if *i != holder {
                assert_eq!(decision(out), "deny", "sub-{i}");
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    text.contains(&format!("worker-{holder}")) && text.contains("src/shared.rs"),
                    "the reason names the holder and the file: {text}"
                );
            }
        }
        let locks = env.maos_json(&["lock", "list"]);
        assert_eq!(locks["locks"].as_array().map(Vec::len), Some(1), "{locks}");
        assert_eq!(
            locks["locks"][0]["holder_role"],
            format!("worker-{holder}"),
            "the allowed one holds it: {locks}"
        );
        // The holder finishes; its lock goes with it and the others try again.
        let stop = json!({"session_id": s, "cwd": env.project, "hook_event_name": "SubagentStop",
                          "agent_id": format!("sub-{holder}"), "agent_type": format!("worker-{holder}")});
        assert!(hook(&env, &stop).status.success());
        left.retain(|&i| i != holder);
    }
    assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
}

#[test]
fn an_agent_started_by_maos_is_named_by_its_environment() {
    let env = Env::new();
    let session = env.maos_json(&["session", "create", "--objective", "managed"]);
    let sid = session["id"].as_str().expect("session id").to_string();
    env.maos_json(&["session", "start"]);
    let agent = env.maos_json(&["agent", "register", "--role", "writer", "--task", "docs"]);
    let aid = agent["id"].as_str().expect("agent id").to_string();
    env.maos_json(&["agent", "start", &aid]);
    // The CLI's own ids say "main thread of claude-M"; the environment says which maos agent
    // this process is, and wins.
    let input = write_input(&env, "claude-M", None, "docs/a.md");
    let vars = [
        ("MAOS_SESSION_ID", sid.as_str()),
        ("MAOS_AGENT_ID", aid.as_str()),
    ];
    let out = hook_with(&env, &input, &vars, false);
    assert_eq!(
        decision(&out),
        "",
        "{}",
        String::from_utf8_lossy(&out.stdout)
    );
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(locks["locks"][0]["holder"], aid.as_str(), "{locks}");
    assert_eq!(locks["locks"][0]["path"], "docs/a.md");
    let ps = env.maos_json(&["ps"]);
    assert_eq!(
        ps[0]["agents"].as_array().map(Vec::len),
        Some(1),
        "no orchestrator was invented: {ps}"
    );
}

/// `TodoWrite` (PostToolUse): the agent's own task list, replaced whole at each write, is in
/// the briefing with its role, what is done, what runs now and what is next.
#[test]
fn an_agents_own_task_list_feeds_the_briefing() {
    let env = Env::new();
    let start = json!({"session_id": "s-t", "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    assert!(hook(&env, &start).status.success());
    let todo = |todos: Value| {
        json!({"session_id": "s-t", "cwd": env.project, "hook_event_name": "PostToolUse",
               "tool_name": "TodoWrite", "tool_use_id": "toolu_t",
               "tool_input": {"todos": todos},
               "tool_response": {"oldTodos": [], "newTodos": todos}})
    };
    let out = hook(
        &env,
        &todo(json!([
            {"content": "Read the parser\nand its tests", "status": "completed", "activeForm": "Reading"},
            {"content": "Split the lexer out", "status": "in_progress", "activeForm": "Splitting"},
            {"content": "Run the tests", "status": "pending", "activeForm": "Running"},
            {"status": "pending"},
        ])),
    );
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(decision(&out), "");

    let brief = env.maos_json(&["brief"]);
    let lists = brief["todos"].as_array().expect("todos").clone();
    assert_eq!(lists.len(), 1, "{lists:?}");
    assert_eq!(lists[0]["role"], "claude");
    let items = lists[0]["items"].as_array().expect("items");
    assert_eq!(
        items.len(),
        3,
        "an item without text is left out: {items:?}"
    );
    assert_eq!(items[0]["content"], "Read the parser", "its first line");
    let text = brief["text"].as_str().expect("text");
    assert!(text.contains("Task lists (the agents' own):"), "{text}");
    assert!(
        text.contains("1/3 done; now: Split the lexer out; next: Run the tests"),
        "{text}"
    );
    let updated = env.events(&["--type", "todos_updated"]);
    assert_eq!(updated.len(), 1);
    assert_eq!(updated[0]["data"], json!({"total": 3, "completed": 1}));

    // The next write replaces the list, and it survives a crash.
    let out = hook(
        &env,
        &todo(json!([
            {"content": "Split the lexer out", "status": "completed"},
            {"content": "Run the tests", "status": "completed"},
        ])),
    );
    assert!(out.status.success(), "{}", describe(&out));
    env.kill9();
    let brief = env.maos_json(&["brief"]);
    assert_eq!(brief["todos"].as_array().map(Vec::len), Some(1));
    assert!(
        brief["text"]
            .as_str()
            .unwrap_or_default()
            .contains("2/2 done"),
        "{}",
        brief["text"]
    );
}

/// A lease lasts only while its holder shows signs of life, and every hook call of the holder
/// is one: with a 3 s lease, the agent's tool calls keep its lock well past the first expiry,
/// each call leaving it at least 19/20 of a lease to run (a call within a twentieth of a lease
/// of the last renewal need not move it: `RENEW_SLACK`); once the calls stop, the lock expires.
#[test]
fn hook_calls_renew_the_callers_leases() {
    const TTL_US: i64 = 3_000_000;
    let env = Env::new();
    let sid = env.session("leases", &[]);
    env.maos_json(&["session", "start"]);
    let aid = env.agent(None, "writer", "docs");
    env.maos_json(&["agent", "start", &aid]);
    env.maos_json(&["lock", "acquire", "held.rs", "--agent", &aid, "--ttl", "3s"]);
    let expiry = |env: &Env| -> Option<i64> {
        let locks = env.maos_json(&["lock", "list"]);
        let lock = locks["locks"]
            .as_array()
            .expect("locks")
            .iter()
            .find(|l| l["path"] == "held.rs")?
            .clone();
        assert_eq!(lock["holder"], aid.as_str(), "{locks}");
        Some(maos_tests::ts_micros(
            lock["expires_at"].as_str().expect("expires_at"),
        ))
    };
    let first = expiry(&env).expect("the lock is held");
    let vars = [
        ("MAOS_SESSION_ID", sid.as_str()),
        ("MAOS_AGENT_ID", aid.as_str()),
    ];
    let (mut last, mut calls) = (first, 0);
    // Until the daemon's clock (a renewal's expiry less the lease) is half a lease past the
    // first expiry.
    while last - TTL_US < first + TTL_US / 2 {
        let event = ["PreToolUse", "PostToolUse"][calls % 2];
        let input = json!({"session_id": "claude-L", "cwd": env.project,
            "hook_event_name": event, "tool_name": "Bash", "tool_use_id": format!("t{calls}"),
            "tool_input": {"command": "cargo test"}, "tool_response": {"stdout": ""}});
        let called = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.as_micros() as i64);
        let out = hook_with(&env, &input, &vars, false);
        assert!(out.status.success(), "{}", describe(&out));
        assert_eq!(decision(&out), "");
        let now = expiry(&env).unwrap_or_else(|| {
            panic!(
                "the lock expired although its holder made {} hook calls",
                calls + 1
            )
        });
        assert!(
            now >= last && now >= called + TTL_US - TTL_US / 20,
            "{event} call {calls} at {called} left the lease at {now} (was {last}): less than \
             19/20 of it to run"
        );
        (last, calls) = (now, calls + 1);
        assert!(calls < 10_000, "the daemon's clock does not move");
    }
    // No more signs of life: the lease runs out and the lock is reaped.
    maos_tests::wait_until(Duration::from_secs(15), "the lease runs out", || {
        expiry(&env).is_none()
    });
    let expired = env.events(&["--type", "lock_expired"]);
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0]["agent_id"], aid.as_str());
}

/// Who makes a hook call: (name, CLI subagent id, environment).
type Caller<'a> = (&'a str, Option<&'a str>, &'a [(&'a str, &'a str)]);

/// One write call of `tool` to `file` (relative to the project).
fn tool_call(env: &Env, cli: &str, sub: Option<&str>, tool: &str, file: &str) -> Value {
    let abs = env.project.join(file);
    let input = match tool {
        "NotebookEdit" => json!({"notebook_path": abs, "new_source": "x"}),
        "apply_patch" => {
            json!({"command": format!("*** Begin Patch\n*** Add File: {file}\n+x\n*** End Patch\n")})
        }
        "Bash" => json!({"command": "ls"}),
        _ => json!({"file_path": abs, "content": "x", "old_string": "a", "new_string": "b"}),
    };
    let mut v = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "PreToolUse",
                       "tool_name": tool, "tool_use_id": format!("toolu_{tool}_{file}"),
                       "tool_input": input});
    if let Some(s) = sub {
        v["agent_id"] = json!(s);
        v["agent_type"] = json!("coder");
    }
    v
}

/// Pausing a session stops every write of every agent in it (main thread, subagent, an agent
/// maos started), whatever the writing tool, and takes no lock; the pause survives a restart
/// after `kill -9`; other tools still run. After `maos resume` the same writes are allowed and
/// each takes its lock.
#[test]
fn a_paused_session_refuses_every_write_of_every_agent_and_takes_no_lock() {
    const TOOLS: [&str; 5] = ["Write", "Edit", "MultiEdit", "NotebookEdit", "apply_patch"];
    let env = Env::new();
    let cli = "claude-P";
    let start = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "SessionStart", "source": "startup"});
    assert!(hook(&env, &start).status.success());
    let sub_start = json!({"session_id": cli, "cwd": env.project, "hook_event_name": "SubagentStart",
                           "agent_id": "sub-1", "agent_type": "coder"});
    assert!(hook(&env, &sub_start).status.success());
    let sid = env.maos_json(&["ps"])[0]["id"]
        .as_str()
        .expect("session id")
        .to_string();
    let managed = env.agent(Some(&sid), "managed", "started by maos");
    env.maos_json(&["agent", "start", &managed]);
    let managed_vars = [
        ("MAOS_SESSION_ID", sid.as_str()),
        ("MAOS_AGENT_ID", managed.as_str()),
    ];
    let callers: [Caller; 3] = [
        ("main", None, &[]),
        ("sub", Some("sub-1"), &[]),
        ("managed", None, &managed_vars),
    ];
    let file = |caller: &str, tool: &str| {
        let ext = if tool == "NotebookEdit" {
            "ipynb"
        } else {
            "rs"
        };
        format!("{caller}-{tool}.{ext}")
    };
    env.maos_json(&["pause", "--reason", "review"]);
    let mut refused = 0;
    for restart in [false, true] {
        if restart {
            env.kill9();
        }
        for (caller, sub, vars) in callers {
            for tool in TOOLS {
                let input = tool_call(&env, cli, sub, tool, &file(caller, tool));
                let out = hook_with(&env, &input, vars, false);
                let what = format!("{caller} {tool} (restarted: {restart})");
                assert_eq!(decision(&out), "deny", "{what}: {}", describe(&out));
                let text = String::from_utf8_lossy(&out.stdout);
                assert!(
                    text.contains("paused") && text.contains("maos resume"),
                    "{what}: {text}"
                );
                refused += 1;
            }
            let bash = tool_call(&env, cli, sub, "Bash", "-");
            assert_eq!(
                decision(&hook_with(&env, &bash, vars, false)),
                "",
                "{caller} Bash"
            );
        }
        assert_eq!(env.maos_json(&["lock", "list"])["locks"], json!([]));
    }
    let denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(denied.len(), refused, "{denied:?}");
    assert!(
        denied.iter().all(|d| d["data"]["why"] == "paused"),
        "{denied:?}"
    );

    env.maos_json(&["resume"]);
    for (caller, sub, vars) in callers {
        for tool in TOOLS {
            let path = file(caller, tool);
            let out = hook_with(&env, &tool_call(&env, cli, sub, tool, &path), vars, false);
            assert_eq!(
                decision(&out),
                "",
                "{caller} {tool} after resume: {}",
                describe(&out)
            );
            let locks = env.maos_json(&["lock", "list"]);
            assert!(
                locks["locks"]
                    .as_array()
                    .expect("locks")
                    .iter()
                    .any(|l| l["path"] == path.as_str()),
                "{caller} {tool}: no lock on {path}: {locks}"
            );
        }
    }
}
