//! Every request is all or nothing, by mechanism: a failure injected at every point where a
//! request changes something (every change point of [`Txn`], and after its last change) leaves
//! memory, the lock table, the rows the batch will write, and so the database, exactly as the
//! requests before it in the same batch left them. Checked for every request kind.

use std::path::Path;

use maos_proto::{Request, export::SessionExport};
use maos_store::Store;
use serde_json::{Value, json};

use super::*;
use crate::cmd::Outcome;

/// Apply a wire request the way the daemon does: routed, then handled by the actor.
fn handle(tx: &mut Txn<'_>, r: Request) -> Result<Outcome, ErrorBody> {
    use crate::project::router::{ProjectRequest, ProjectRoute, Route};
    // The tests name paths by their keys.
    let key = |at: &maos_proto::req::LockAt| {
        maos_core::LockPath::new(&at.path)
            .map_err(|e| ErrorBody::new(maos_proto::ErrorCode::PathOutsideWorkspace, e.to_string()))
    };
    match Route::of(r, &key) {
        Route::Refused(e) => Err(e),
        Route::Project(ProjectRoute::Actor { request, .. }) => request.apply(tx),
        Route::Project(ProjectRoute::Import(r)) => ProjectRequest::new(r).apply(tx),
        _ => panic!("not a request the actor applies"),
    }
}

pub(crate) fn req(v: Value) -> Request {
    match serde_json::from_value(v.clone()) {
        Ok(r) => r,
        Err(e) => panic!("test request {v}: {e}"),
    }
}

/// Apply requests that must succeed in one transaction, and commit it (when a store is
/// given). Returns their outcomes and the events they recorded.
pub(crate) fn apply_all(
    st: &mut State,
    store: Option<(&tokio::runtime::Runtime, &mut Store)>,
    reqs: Vec<Request>,
) -> (Vec<Outcome>, Vec<EventRecord>) {
    let mut tx = Txn::new(st);
    let mut out = Vec::new();
    for r in reqs {
        match handle(&mut tx, r.clone()) {
            Ok(o) => out.push(o),
            Err(e) => panic!("fixture request {r:?}: {}", e.message),
        }
    }
    let events = tx.events.clone();
    match store {
        Some((rt, store)) => rt.block_on(commit(store, tx, "fixture")),
        None => {
            tx.finish();
        }
    }
    (out, events)
}

pub(crate) fn id_of(o: &Outcome) -> String {
    match o {
        Outcome::Reply(r) => match &**r {
            maos_proto::Reply::Session(s) => s.id.to_string(),
            maos_proto::Reply::Agent(a) => a.id.to_string(),
            _ => panic!("expected a session or an agent"),
        },
        _ => panic!("expected a session or an agent"),
    }
}

struct Fixture {
    st: State,
    running: String,
    planned: String,
    done: String,
    lead: String,
    child: String,
    other: String,
    import: String,
    /// A plan session with a failed agent.
    retry: String,
}

const PLAN: &str = "objective = \"plan\"\nstrategy = \"parallel\"\n\
    [[agent]]\nname = \"a\"\ntask = \"task a\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n\
    [[agent]]\nname = \"b\"\ntask = \"task b\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n";

const RETRY_PLAN: &str = "objective = \"retry me\"\nstrategy = \"parallel\"\n\
    [[agent]]\nname = \"r\"\ntask = \"task r\"\ncommand = [\"sh\", \"-c\", \"exit 3\"]\n";

fn hook(event: &str, session: &str, extra: Value) -> Request {
    let mut call = json!({ "event": event, "session_id": session, "cwd": "/p" });
    if let (Some(c), Some(e)) = (call.as_object_mut(), extra.as_object()) {
        c.extend(e.clone());
    }
    match serde_json::from_value(call.clone()) {
        Ok(c) => Request::Hook(Box::new(c)),
        Err(e) => panic!("hook call {call}: {e}"),
    }
}

/// A project with a running session (phases, an agent tree, held and awaited locks, a CLI
/// session with a subagent request), a finished session, and a managed plan session, committed
/// to the database at `db`.
fn fixture(dir: &Path, db: &Path, rt: &tokio::runtime::Runtime) -> Fixture {
    let mut store = rt.block_on(open(db));
    let mut st = State::new(Vec::new(), 0);
    st.runner = Some(crate::proc::run::Runner {
        exe: dir.join("no-maosd"),
        socket: dir.join("no.sock"),
        root: "/p".into(),
        project_dir: dir.join("project"),
    });
    let mut apply = |st: &mut State, reqs| apply_all(st, Some((rt, &mut store)), reqs).0;
    let o = apply(
        &mut st,
        vec![req(
            json!({ "request": "session_create", "objective": "done",
                         "phases": ["only"] }),
        )],
    );
    let done = id_of(&o[0]);
    apply(
        &mut st,
        vec![
            // With a checkpoint: archived or purged, its checkpoint time leaves memory too.
            req(json!({ "request": "phase_add", "session": done, "name": "later" })),
            req(json!({ "request": "session_transition", "session": done, "op": "start" })),
            req(json!({ "request": "session_transition", "session": done, "op": "complete" })),
        ],
    );
    let o = apply(
        &mut st,
        vec![req(
            json!({ "request": "session_create", "objective": "work",
                         "phases": ["build", "test"] }),
        )],
    );
    let running = id_of(&o[0]);
    let o = apply(
        &mut st,
        vec![
            req(json!({ "request": "session_activate", "session": running })),
            req(json!({ "request": "session_transition", "session": running, "op": "start" })),
            req(
                json!({ "request": "agent_register", "session": running, "role": "lead",
                        "task": "lead the work" }),
            ),
        ],
    );
    let lead = id_of(&o[2]);
    let o = apply(
        &mut st,
        vec![
            req(
                json!({ "request": "agent_register", "session": running, "role": "child",
                        "task": "help", "parent": lead }),
            ),
            req(
                json!({ "request": "agent_register", "session": running, "role": "other",
                        "task": "other work" }),
            ),
        ],
    );
    let (child, other) = (id_of(&o[0]), id_of(&o[1]));
    apply(
        &mut st,
        vec![
            req(json!({ "request": "agent_transition", "agent": lead, "op": "start" })),
            req(json!({ "request": "agent_transition", "agent": child, "op": "start" })),
            req(json!({ "request": "agent_transition", "agent": other, "op": "start" })),
            req(
                json!({ "request": "lock_acquire", "agent": lead, "path": "src/a.rs",
                        "mode": "write" }),
            ),
            req(
                json!({ "request": "lock_acquire", "agent": child, "path": "src/b.rs",
                        "mode": "read" }),
            ),
            req(
                json!({ "request": "lock_acquire", "agent": other, "path": "src/a.rs",
                        "mode": "write", "wait": { "policy": "forever" } }),
            ),
            req(
                json!({ "request": "phase_transition", "session": running, "phase": "build",
                        "op": "start" }),
            ),
            hook("SessionStart", "cli-1", json!({ "source": "startup" })),
            hook(
                "PreToolUse",
                "cli-1",
                json!({ "tool_name": "Write", "paths": ["src/c.rs"] }),
            ),
            hook(
                "PreToolUse",
                "cli-1",
                json!({ "tool_name": "Agent", "tool_use_id": "tu-1",
                                                "summary": "review", "agent_type": "reviewer" }),
            ),
            req(
                json!({ "request": "session_from_plan", "path": "/p/plan.toml", "text": PLAN,
                        "start": true }),
            ),
            req(json!({ "request": "session_activate", "session": running })),
        ],
    );
    // A plan session whose agent failed, for `retry`.
    let o = apply(
        &mut st,
        vec![req(
            json!({ "request": "session_from_plan", "path": "/p/retry.toml",
                    "text": RETRY_PLAN, "start": true }),
        )],
    );
    let failing = match &o[0] {
        Outcome::Reply(r) => match &**r {
            maos_proto::Reply::Session(s) => s.agents[0].id.to_string(),
            _ => panic!("expected a session"),
        },
        _ => panic!("expected a session"),
    };
    apply(
        &mut st,
        vec![req(
            json!({ "request": "agent_exited", "agent": failing, "pid": 1, "code": 3,
                    "ended_at": now() }),
        )],
    );
    rt.block_on(store.close());
    // A session from another project, as `maos export` writes it.
    let mut elsewhere = State::new(Vec::new(), 0);
    let (_, events) = apply_all(
        &mut elsewhere,
        None,
        vec![req(
            json!({ "request": "session_create", "objective": "elsewhere" }),
        )],
    );
    let import = serde_json::to_string(&SessionExport {
        format: maos_proto::export::FORMAT.into(),
        version: maos_proto::export::VERSION,
        exported_at: now(),
        session: elsewhere.sessions()[0].clone(),
        events,
        checkpoints: Vec::new(),
    })
    .unwrap_or_default();
    let retry = st
        .sessions()
        .iter()
        .find(|x| x.objective == "retry me")
        .map(|x| x.id.to_string())
        .unwrap_or_default();
    let planned = st
        .sessions()
        .iter()
        .find(|x| x.policy.is_some() && x.objective == "plan")
        .map(|x| x.id.to_string())
        .unwrap_or_default();
    Fixture {
        st,
        running,
        planned,
        done,
        lead,
        child,
        other,
        import,
        retry,
    }
}

/// One request of every kind the project actor handles, each against the fixture.
fn cases(f: &Fixture) -> Vec<(&'static str, Request)> {
    let (s, d, lead, child, other) = (&f.running, &f.done, &f.lead, &f.child, &f.other);
    let managed =
        f.st.sessions()
            .iter()
            .find(|x| x.policy.is_some() && x.objective == "plan")
            .map(|x| x.agents[0].id.to_string())
            .unwrap_or_default();
    vec![
        (
            "session create",
            req(json!({ "request": "session_create", "objective": "new",
                                         "phases": ["a", "b"] })),
        ),
        (
            "session activate",
            req(json!({ "request": "session_activate", "session": d })),
        ),
        (
            "session pause",
            req(json!({ "request": "session_transition", "session": s,
                                      "op": "pause", "reason": "why" })),
        ),
        (
            "session complete",
            req(json!({ "request": "session_transition", "session": s,
                                         "op": "complete" })),
        ),
        (
            "session cancel",
            req(json!({ "request": "session_transition", "session": s,
                                       "op": "cancel" })),
        ),
        (
            "agent register",
            req(json!({ "request": "agent_register", "session": s,
                                       "role": "new", "task": "t", "parent": lead,
                                       "depends_on": [child] })),
        ),
        (
            "agent complete",
            req(json!({ "request": "agent_transition", "agent": lead,
                                       "op": "complete" })),
        ),
        (
            "agent fail",
            req(json!({ "request": "agent_transition", "agent": managed,
                                   "op": "fail", "reason": "no" })),
        ),
        (
            "phase add",
            req(json!({ "request": "phase_add", "session": s, "name": "deploy" })),
        ),
        (
            "phase complete",
            req(json!({ "request": "phase_transition", "session": s,
                                       "phase": "build", "op": "complete" })),
        ),
        (
            "pause agent",
            req(json!({ "request": "pause", "session": s,
                                    "target": { "scope": "agent", "name": lead } })),
        ),
        (
            "pause phase",
            req(json!({ "request": "pause", "session": s,
                                    "target": { "scope": "phase", "name": "build" } })),
        ),
        (
            "pause session",
            req(json!({ "request": "pause", "session": s,
                                      "target": { "scope": "session" } })),
        ),
        (
            "resume session",
            req(json!({ "request": "resume", "session": s,
                                       "target": { "scope": "session" } })),
        ),
        (
            "lock grant",
            req(json!({ "request": "lock_acquire", "agent": child,
                                   "path": "src/d.rs", "mode": "write" })),
        ),
        (
            "lock upgrade",
            req(json!({ "request": "lock_acquire", "agent": child,
                                     "path": "src/b.rs", "mode": "write" })),
        ),
        (
            "lock wait",
            req(json!({ "request": "lock_acquire", "agent": child,
                                  "path": "src", "mode": "directory",
                                  "wait": { "policy": "forever" } })),
        ),
        (
            "lock refused",
            req(json!({ "request": "lock_acquire", "agent": child,
                        "path": "src/a.rs", "mode": "write" })),
        ),
        (
            "lock release",
            req(json!({ "request": "lock_release", "agent": lead,
                                     "path": "src/a.rs" })),
        ),
        (
            "lock force release",
            req(json!({ "request": "lock_release", "path": "src/a.rs",
                                           "force": true, "by": "me" })),
        ),
        (
            "lock release all",
            req(json!({ "request": "lock_release_all", "agent": lead })),
        ),
        (
            "release a waiter",
            req(json!({ "request": "lock_release_all", "agent": other })),
        ),
        (
            "heartbeat",
            req(json!({ "request": "heartbeat", "agent": lead })),
        ),
        (
            "hook session start",
            hook("SessionStart", "cli-2", json!({ "source": "startup" })),
        ),
        (
            "hook prompt",
            hook("UserPromptSubmit", "cli-1", json!({ "summary": "do it" })),
        ),
        (
            "hook write",
            hook(
                "PreToolUse",
                "cli-1",
                json!({ "tool_name": "Edit", "paths": ["src/e.rs"] }),
            ),
        ),
        (
            "hook write denied",
            hook(
                "PreToolUse",
                "cli-1",
                json!({ "tool_name": "Write", "paths": ["src/a.rs"] }),
            ),
        ),
        (
            "hook subagent",
            hook(
                "PreToolUse",
                "cli-1",
                json!({ "tool_name": "Write", "paths": ["src/f.rs"],
                                       "agent_id": "sub-1", "agent_type": "reviewer" }),
            ),
        ),
        (
            "hook subagent done",
            hook(
                "PostToolUse",
                "cli-1",
                json!({ "tool_name": "Agent", "tool_use_id": "tu-1",
                                            "subagent": { "agent_id": "sub-1",
                                                          "status": "completed" } }),
            ),
        ),
        (
            "hook todos",
            hook(
                "PostToolUse",
                "cli-1",
                json!({ "tool_name": "TodoWrite",
                                    "todos": [{ "content": "x", "status": "pending" }] }),
            ),
        ),
        ("hook stop", hook("Stop", "cli-1", json!({}))),
        (
            "hook compact",
            hook("PreCompact", "cli-1", json!({ "source": "auto" })),
        ),
        (
            "hook session end",
            hook("SessionEnd", "cli-1", json!({ "source": "other" })),
        ),
        (
            "note",
            req(json!({ "request": "note", "session": s, "agent": lead,
                             "kind": "decision", "text": "use sqlite" })),
        ),
        (
            "todos",
            req(json!({ "request": "todos", "agent": lead,
                             "items": [{ "content": "x", "status": "in_progress" }] })),
        ),
        (
            "mcp lock acquire",
            req(json!({ "request": "mcp",
                        "caller": { "tool_use_id": "tu-9", "maos_agent": lead },
                        "action": { "action": "lock_acquire", "path": "src/m.rs",
                                    "mode": "write" } })),
        ),
        (
            "mcp note",
            req(json!({ "request": "mcp", "caller": { "maos_agent": lead },
                        "action": { "action": "note", "kind": "done", "text": "x" } })),
        ),
        (
            "mcp progress",
            req(json!({ "request": "mcp", "caller": { "maos_agent": lead },
                        "action": { "action": "progress",
                                    "items": [{ "content": "x", "status": "pending" }] } })),
        ),
        (
            "agent exited",
            req(json!({ "request": "agent_exited", "agent": managed,
                                     "pid": 1, "code": 0, "ended_at": now() })),
        ),
        (
            "session from plan",
            req(json!({ "request": "session_from_plan",
                                          "path": "/p/plan2.toml", "text": PLAN,
                                          "start": true })),
        ),
        ("recover", req(json!({ "request": "recover" }))),
        (
            "retry",
            req(json!({ "request": "retry", "target": f.retry })),
        ),
        (
            "session archive",
            req(json!({ "request": "session_archive", "session": d })),
        ),
        (
            "import",
            req(json!({ "request": "import", "path": "/x.json", "text": f.import })),
        ),
        ("purge", req(json!({ "request": "purge", "session": d }))),
        // Reads: they change nothing whatever happens.
        ("ps", req(json!({ "request": "ps", "all": true }))),
        ("status", req(json!({ "request": "status" }))),
        ("brief", req(json!({ "request": "brief" }))),
        (
            "lock check",
            req(json!({ "request": "lock_check", "path": "src/a.rs" })),
        ),
        ("validate", req(json!({ "request": "validate" }))),
    ]
}

/// Everything a request could change: memory, the lock table, and what the batch will write.
fn snapshot(tx: &Txn<'_>) -> Value {
    let st = tx.state();
    let sorted = |mut v: Vec<String>| {
        v.sort();
        v
    };
    let held: Vec<String> = st
        .locks
        .held()
        .map(|l| format!("{l:?} ttl={:?}", st.locks.ttl_of(l.token)))
        .collect();
    let batch = tx.batch();
    json!({
        "sessions": serde_json::to_value(st.sessions()).unwrap_or_default(),
        "agent_index": sorted(st.agent_session.iter().map(|(a, s)| format!("{a}:{s}")).collect()),
        "by_id": sorted(st.by_id.iter().map(|(s, i)| format!("{s}:{i}")).collect()),
        "last_seq": st.last_seq(),
        "locks": held,
        "waiters": format!("{:?}", st.locks.waiters()),
        "next_token": st.locks.next_token(),
        "next_deadline": format!("{:?}", st.locks.next_deadline()),
        "intents": format!("{:?}", st.spawn_intents),
        "launching": sorted(st.launching.iter().map(|a| a.to_string()).collect()),
        "checkpointed": sorted(st.checkpointed.iter().map(|(s, t)| format!("{s}:{t}")).collect()),
        "undo": sorted(tx.undo.keys().map(|k| k.to_string()).collect()),
        "dirty_sessions": sorted(batch.sessions.iter().map(|s| s.id.to_string()).collect()),
        "dirty_phases": sorted(batch.phases_of.iter().map(|s| s.id.to_string()).collect()),
        "dirty_agents": batch.agents.iter().map(|a| a.id.to_string()).collect::<Vec<_>>(),
        "events": serde_json::to_value(batch.events).unwrap_or_default(),
        "checkpoints": batch.checkpoints.len(),
        "archived": format!("{:?}", batch.archived),
        "purged": format!("{:?}", batch.purged),
        "holders": sorted(tx.lock_holders.iter().map(|a| a.to_string()).collect()),
        "gone_leases": format!("{:?}", tx.gone_leases),
        "wakeups": tx.wakeups.len(),
        "effects": tx.effects.len(),
    })
}

/// A refused request leaves one trace: the events recording why (they stay on the timeline).
/// Take them out of `got` (checking they are only that).
fn refusals_only(got: &mut Value, before: &Value) -> Vec<String> {
    let n = before["events"].as_array().map_or(0, Vec::len);
    let Some(events) = got["events"].as_array_mut() else {
        return Vec::new();
    };
    let extra = events.split_off(n.min(events.len()));
    for e in &extra {
        assert!(
            ["conflict_detected", "deadlock_detected"].contains(&e["type"].as_str().unwrap_or("")),
            "a failed request left an event that is not a refusal: {e}"
        );
    }
    if let Some(seq) = got["last_seq"].as_u64() {
        got["last_seq"] = json!(seq - extra.len() as u64);
    }
    extra
        .iter()
        .map(|e| e["type"].as_str().unwrap_or_default().to_string())
        .collect()
}

/// Equal, or a failure naming only the parts that differ.
fn assert_same(got: &Value, want: &Value, what: &str) {
    if got == want {
        return;
    }
    let (Some(g), Some(w)) = (got.as_object(), want.as_object()) else {
        panic!("{what}:\n got {got}\nwant {want}");
    };
    let diff: Vec<String> = w
        .iter()
        .filter(|(k, v)| g.get(*k) != Some(*v))
        .map(|(k, v)| {
            format!(
                "{k}:\n   got {}\n  want {v}",
                g.get(k).unwrap_or(&Value::Null)
            )
        })
        .collect();
    panic!("{what}:\n{}", diff.join("\n"));
}

pub(crate) fn rt() -> tokio::runtime::Runtime {
    match tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => panic!("tokio runtime: {e}"),
    }
}

pub(crate) async fn open(path: &Path) -> Store {
    Store::open(path.to_path_buf(), Default::default())
        .await
        .unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// Commit what the transaction holds, as the actor does.
async fn commit(store: &mut Store, mut tx: Txn<'_>, what: &str) {
    tx.prepare();
    if let Err(e) = store.commit(&tx.batch()).await {
        panic!("{what}: commit: {e}");
    }
    tx.finish();
}

/// What the database holds, in the terms of [`observed`].
async fn loaded(path: &Path) -> Value {
    let mut store = open(path).await;
    let l = store
        .load()
        .await
        .unwrap_or_else(|e| panic!("load {}: {e}", path.display()));
    store.close().await;
    let mut st = State::new(l.sessions, l.last_seq);
    st.reset_locks(l.locks, l.next_token);
    observed(&st)
}

/// What memory holds that the database must hold too. The next fencing token is stored as a
/// bound a block ahead of the grants, so a reload continues at or above memory's, never below:
/// compared by [`same_but_tokens`].
fn observed(st: &State) -> Value {
    let held: Vec<String> = st
        .locks
        .held()
        .map(|l| format!("{l:?} ttl={:?}", st.locks.ttl_of(l.token)))
        .collect();
    json!({
        "sessions": serde_json::to_value(st.sessions()).unwrap_or_default(),
        "last_seq": st.last_seq(),
        "locks": held,
        "next_token": st.locks.next_token(),
    })
}

/// `db` (a reload) and `mem` the same, except that the reload's next fencing token may be
/// above memory's (the stored bound), never below it.
fn same_but_tokens(mut db: Value, mut mem: Value, what: &str) {
    let (d, m) = (db["next_token"].take(), mem["next_token"].take());
    assert!(
        d.as_u64().is_some() && d.as_u64() >= m.as_u64(),
        "{what}: the reload's next token {d} is below memory's {m}"
    );
    assert_same(&db, &mem, what);
}

/// How a failure is injected into a request.
#[derive(Clone, Copy, Debug)]
enum Inject {
    /// A panic at this change point of the request (counted from 1).
    At(usize),
    /// The request ran to its end, then failed (an error after its last change).
    AtEnd,
}

/// A transaction with the fixture's state and, as earlier requests of the same batch, a note in
/// the running session and one in each plan session: they stay whatever happens after them,
/// and every session the requests below change was already changed in this batch, so their
/// own undo copies (and those of the steps inside them) are exercised too.
fn batch_so_far<'a>(f: &Fixture, st: &'a mut State) -> Txn<'a> {
    let mut tx = Txn::new(st);
    let notes = [
        (&f.running, "earlier"),
        (&f.planned, "earlier too"),
        (&f.retry, "and here"),
    ];
    for (session, text) in notes {
        let note = req(json!({ "request": "note", "session": session,
                               "kind": "decision", "text": text }));
        if let Err(e) = handle(&mut tx, note) {
            panic!("the earlier request: {}", e.message);
        }
    }
    tx
}

/// How many change points the request passes when nothing fails (the steps it takes inside
/// included, whatever it answers).
fn change_points(f: &Fixture, request: &Request) -> usize {
    let mut st = f.st.clone();
    let mut tx = batch_so_far(f, &mut st);
    let first = tx.changes;
    let _ = tx.atomic(|tx| handle(tx, request.clone()));
    tx.changes - first
}

#[test]
fn a_request_that_fails_anywhere_changes_nothing() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let template = tmp.path().join("template.db");
    let f = fixture(tmp.path(), &template, &rt);
    let mut checked = 0;
    let mut caught = Vec::new();
    let mut refused = Vec::new();
    for (name, request) in cases(&f) {
        // Every change point the request really passes, then after its last change: a
        // failure caught inside the request (by a step of its own) answers Ok, so the answer
        // says nothing about how far the request got.
        let points = change_points(&f, &request);
        let injections = (1..=points).map(Inject::At).chain([Inject::AtEnd]);
        for inject in injections {
            let mut st = f.st.clone();
            let db = tmp.path().join("case.db");
            let _ = std::fs::remove_file(tmp.path().join("case.db-wal"));
            if let Err(e) = std::fs::copy(&template, &db) {
                panic!("copy the database: {e}");
            }
            let mut tx = batch_so_far(&f, &mut st);
            let before = snapshot(&tx);
            let request = request.clone();
            let result = match inject {
                Inject::At(n) => {
                    tx.fail_at = Some(tx.changes + n);
                    tx.probe = Some(snapshot);
                    let r = tx.atomic(|tx| handle(tx, request));
                    tx.fail_at = None;
                    tx.probe = None;
                    assert!(
                        tx.fired,
                        "{name}: change point {n} of {points} was not reached"
                    );
                    r.map(|r| r.map(|_| ()))
                }
                Inject::AtEnd => tx.atomic(|tx| {
                    handle(tx, request)?;
                    Err(ErrorBody::new(ErrorCode::Internal, "injected"))
                }),
            };
            if let Ok(Ok(())) = result {
                // The failure was caught inside the request, by a step of its own (the
                // scheduler's, in recovery): that step, and only it, is undone.
                let failed = std::mem::take(&mut tx.nested_failures);
                assert!(
                    !failed.is_empty(),
                    "{name}: the failure ({inject:?}) was swallowed: the request answered Ok \
                     and no step of it was undone"
                );
                for (step_before, mut step_after) in failed {
                    refused.extend(refusals_only(&mut step_after, &step_before));
                    assert_same(
                        &step_after,
                        &step_before,
                        &format!(
                            "{name}: a failure ({inject:?}) in a step of the request \
                                  changed the transaction"
                        ),
                    );
                }
                caught.push(name);
            } else {
                let mut got = snapshot(&tx);
                refused.extend(refusals_only(&mut got, &before));
                assert_same(
                    &got,
                    &before,
                    &format!("{name}: a failure ({inject:?}) changed the transaction"),
                );
            }
            checked += 1;
            rt.block_on(async {
                let mut store = open(&db).await;
                commit(&mut store, tx, name).await;
                store.close().await;
            });
            same_but_tokens(
                rt.block_on(loaded(&db)),
                observed(&st),
                &format!("{name}: after a failure ({inject:?}) the database and memory differ"),
            );
        }
    }
    assert!(
        checked > 100,
        "only {checked} injected failures were checked"
    );
    // Recovery runs the scheduler of each session it recovers as a step of its own.
    assert!(
        caught.contains(&"recover"),
        "no failure was caught by a step inside a request: {caught:?}"
    );
}

/// Steps nest: every request kind, applied as a step inside a step inside a request, each
/// level changing something before the one inside it or after. Failed at any change point, the
/// step failing undoes exactly its own changes (those of the steps inside it too) and the one
/// around it goes on; failed after everything, the request undoes everything, and keeps the
/// refusals recorded on the way.
#[test]
fn a_step_inside_a_request_is_all_or_nothing_and_so_is_the_request() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let f = fixture(tmp.path(), &tmp.path().join("template.db"), &rt);
    // Before the steps: one agent of the running session changes (an agent's own undo copy);
    // after the inner step, another one; after the middle step, the plan session's row.
    let first = req(json!({ "request": "heartbeat", "agent": f.lead }));
    let middle = req(json!({ "request": "heartbeat", "agent": f.other }));
    let then = req(json!({ "request": "note", "session": f.planned,
                           "kind": "decision", "text": "after the step" }));
    let outer = |tx: &mut Txn<'_>, inner: &Request| -> Result<(), ErrorBody> {
        handle(tx, first.clone())?;
        // Whatever a step answers, the one around it goes on.
        let _ = tx.atomic(|tx| {
            let _ = tx.atomic(|tx| handle(tx, inner.clone()));
            handle(tx, middle.clone())
        });
        handle(tx, then.clone()).map(|_| ())
    };
    let mut checked = 0;
    for (name, inner) in cases(&f) {
        let points = {
            let mut st = f.st.clone();
            let mut tx = batch_so_far(&f, &mut st);
            let start = tx.changes;
            match tx.atomic(|tx| outer(tx, &inner)) {
                Ok(Ok(())) => {}
                Ok(Err(e)) => panic!("{name}: the request around the step: {}", e.message),
                Err(_) => panic!("{name}: the request around the step panicked"),
            }
            tx.changes - start
        };
        for inject in (1..=points).map(Inject::At).chain([Inject::AtEnd]) {
            let mut st = f.st.clone();
            let mut tx = batch_so_far(&f, &mut st);
            let before = snapshot(&tx);
            tx.probe = Some(snapshot);
            // The refusals recorded by the time the request fails after its last change.
            let mut refusals = Vec::new();
            let result = match inject {
                Inject::At(n) => {
                    tx.fail_at = Some(tx.changes + n);
                    let r = tx.atomic(|tx| outer(tx, &inner));
                    tx.fail_at = None;
                    assert!(
                        tx.fired,
                        "{name}: change point {n} of {points} was not reached"
                    );
                    r
                }
                Inject::AtEnd => tx.atomic(|tx| {
                    outer(tx, &inner)?;
                    let n = before["events"].as_array().map_or(0, Vec::len);
                    refusals = tx.events[n..]
                        .iter()
                        .filter(|e| ["conflict_detected", "deadlock_detected"].contains(&&*e.kind))
                        .map(|e| e.kind.clone())
                        .collect();
                    Err(ErrorBody::new(ErrorCode::Internal, "injected"))
                }),
            };
            tx.probe = None;
            // A step that failed (injected, or refused on its own) is undone, exactly.
            for (step_before, mut step_after) in std::mem::take(&mut tx.nested_failures) {
                refusals_only(&mut step_after, &step_before);
                assert_same(
                    &step_after,
                    &step_before,
                    &format!("{name}: a failure ({inject:?}) in the step changed the transaction"),
                );
            }
            if !matches!(result, Ok(Ok(()))) {
                let mut got = snapshot(&tx);
                let kept = refusals_only(&mut got, &before);
                if let Inject::AtEnd = inject {
                    assert_eq!(kept, refusals, "{name}: the refusals stay on the timeline");
                }
                assert_same(
                    &got,
                    &before,
                    &format!(
                        "{name}: a failure ({inject:?}) of the request around the step \
                              changed the transaction"
                    ),
                );
            }
            checked += 1;
        }
    }
    assert!(
        checked > 100,
        "only {checked} injected failures were checked"
    );
}

/// Recovery runs the scheduler of each session it recovers as a step of its own: a scheduler
/// that fails leaves the session as recovery left it, and recovery goes on. Failed anywhere in
/// that step, the plan session whose agent failed (policy `fail_session`) is either failed
/// with all that goes with it (its `session_failed` event and checkpoint) or still running.
#[test]
fn a_scheduler_failing_in_recovery_leaves_the_session_as_recovery_left_it() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let f = fixture(tmp.path(), &tmp.path().join("template.db"), &rt);
    let recover = req(json!({ "request": "recover" }));
    let points = change_points(&f, &recover);
    let mut caught = 0;
    for n in 1..=points {
        let mut st = f.st.clone();
        let mut tx = batch_so_far(&f, &mut st);
        tx.fail_at = Some(tx.changes + n);
        let result = tx.atomic(|tx| handle(tx, recover.clone()));
        assert!(tx.fired, "change point {n} of {points} was not reached");
        if !matches!(result, Ok(Ok(_))) {
            continue;
        }
        caught += 1;
        let Some(s) = tx
            .state()
            .sessions()
            .iter()
            .find(|s| s.id.as_str() == f.retry)
        else {
            panic!("the retry session is gone");
        };
        let events: Vec<&str> = tx
            .events
            .iter()
            .filter(|e| e.session_id.as_ref() == Some(&s.id))
            .map(|e| e.kind.as_str())
            .collect();
        let checkpoints: Vec<&str> = tx
            .checkpoints
            .iter()
            .filter(|c| c.session_id == s.id)
            .map(|c| c.reason.as_str())
            .collect();
        match s.state {
            maos_core::SessionState::Failed => {
                assert!(
                    events.contains(&"session_failed"),
                    "point {n}: failed without its event: {events:?}"
                );
                assert!(
                    checkpoints.contains(&"session failed"),
                    "point {n}: failed without its checkpoint: {checkpoints:?}"
                );
            }
            maos_core::SessionState::Running => {
                assert!(
                    s.ended_at.is_none() && s.errors.len() == 1,
                    "point {n}: running, with the scheduler's changes: {:?}",
                    s.errors
                );
                assert!(
                    !events.contains(&"session_failed") && !checkpoints.contains(&"session failed"),
                    "point {n}: running, with the failure recorded: {events:?} {checkpoints:?}"
                );
            }
            other => panic!("point {n}: the session is {other:?}"),
        }
    }
    assert!(caught > 0, "no failure was caught by the scheduler's step");
}

/// Recovery applies an agent's recorded exit (`exit.json`) and deletes the file only after the
/// commit that records it: when that commit fails, the next recovery still finds the exit.
#[test]
fn recovery_keeps_the_exit_file_until_its_commit() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let f = fixture(tmp.path(), &tmp.path().join("template.db"), &rt);
    let mut st = f.st.clone();
    let (sid, agent) = st
        .sessions()
        .iter()
        .find(|s| s.policy.is_some())
        .map(|s| (s.id.clone(), s.agents[0].id.clone()))
        .unwrap_or_else(|| panic!("the fixture has a plan session"));
    // A process that is gone, as the agent's.
    let pid = match std::process::Command::new("true").spawn() {
        Ok(mut c) => {
            let _ = c.wait();
            c.id()
        }
        Err(e) => panic!("spawn true: {e}"),
    };
    {
        let mut tx = Txn::new(&mut st);
        tx.agent_mut(&agent).process = Some(maos_proto::ProcessInfo {
            pid,
            start_time: Some(1),
            started_at: now(),
            supervisor: None,
        });
        tx.launched(&agent);
        tx.finish();
    }
    let files = crate::proc::procs::agent_files(&tmp.path().join("project"), agent.as_str());
    if let Err(e) = std::fs::create_dir_all(&files.dir) {
        panic!("agent dir: {e}");
    }
    let exit = json!({ "agent": agent, "pid": pid, "start_time": 1, "code": 0,
                       "ended_at": now() });
    if let Err(e) = std::fs::write(&files.exit, exit.to_string()) {
        panic!("write exit.json: {e}");
    }
    fn applied<'a>(
        st: &'a mut State,
        sid: &SessionId,
        exit_file: &Path,
    ) -> (Vec<AgentId>, usize, Txn<'a>) {
        let mut tx = Txn::new(st);
        let report = match handle(
            &mut tx,
            req(json!({ "request": "recover", "session": sid })),
        ) {
            Ok(Outcome::Reply(r)) => match *r {
                maos_proto::Reply::Recovery(r) => r,
                _ => panic!("recover answered something else"),
            },
            Ok(_) => panic!("recover answered something else"),
            Err(e) => panic!("recover: {}", e.message),
        };
        let deletes = tx
            .effects
            .iter()
            .filter(|e| matches!(e, crate::proc::run::Effect::RemoveFile(p) if p == exit_file))
            .count();
        (report.sessions[0].exits_applied.clone(), deletes, tx)
    }
    let (exits, deletes, tx) = applied(&mut st, &sid, &files.exit);
    assert_eq!(exits, vec![agent.clone()], "the recorded exit is applied");
    assert_eq!(deletes, 1, "its file is deleted after the commit");
    assert!(files.exit.exists(), "not before the commit");
    // The commit failed: everything is undone, and recovery runs again.
    tx.rollback();
    let (exits, deletes, tx) = applied(&mut st, &sid, &files.exit);
    assert_eq!(exits, vec![agent.clone()], "the exit is applied again");
    assert_eq!(deletes, 1);
    tx.finish();
    let a = st.agent(&agent).map(|a| a.state);
    assert_eq!(a, Some(maos_core::AgentState::Completed));
}

/// A hook records the MCP calls whose caller `maos mcp` will ask for, and only those: a read
/// that needs no agent (`who`) left a record nobody took, filling the table for 30 s.
#[test]
fn a_hook_records_only_the_mcp_calls_the_server_asks_about() {
    let rt = rt();
    let tmp = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
    let f = fixture(tmp.path(), &tmp.path().join("t.db"), &rt);
    let mut st = f.st.clone();
    let mut tx = Txn::new(&mut st);
    let before = tx.mcp_calls().len();
    for (tool, id) in [("who", "tu-who"), ("events", "tu-ev"), ("note", "tu-note")] {
        let call = hook(
            "PreToolUse",
            "cli-1",
            json!({ "tool_name": format!("mcp__maos__{tool}"), "tool_use_id": id }),
        );
        if let Err(e) = handle(&mut tx, call) {
            panic!("PreToolUse of {tool}: {}", e.message);
        }
    }
    assert_eq!(
        tx.mcp_calls().len(),
        before + 1,
        "only the note is recorded"
    );
    let now = tx.now;
    assert!(tx.mcp_calls().take_id("tu-note", now).is_some());
    assert!(tx.mcp_calls().take_id("tu-who", now).is_none());
}
