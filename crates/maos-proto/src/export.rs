//! The session export file (`maos export`, `maos import`): our own versioned JSON, and the
//! orchestrator-session JSON that other tools keep (`schema_version`, `session_id`, `goal`,
//! `status`, `agents`, `completed_work`, `pending_tasks`, `decisions_made`, `errors`), which
//! import turns into the same thing. Pure: no I/O, ids and the time come from the caller.

use maos_core::text::escape_controls;
use maos_core::{AgentId, AgentState, SessionId, SessionState, Strategy, Ts, Workflow};
use serde::Deserialize;
use serde_json::Value;

pub use maos_core::export::{ExportedCheckpoint, FORMAT, SessionExport, VERSION};

use maos_core::record::{AgentRecord, ContextUsage, ErrorRecord, Note, NoteKind, SessionRecord};

/// Why a file cannot be imported (one line each).
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ImportError {
    #[error("not valid JSON: {0}")]
    Json(String),
    #[error(
        "not a session file: expected a maos export (\"format\": \"maos-session\") or an \
         orchestrator session (\"schema_version\", \"session_id\", \"goal\")"
    )]
    Unknown,
    #[error("maos-session version {0} is newer than this maos reads ({VERSION}); upgrade maos")]
    Version(u64),
    #[error("invalid {what}: {message}")]
    Invalid { what: &'static str, message: String },
    #[error("the {what} is {len} bytes; the limit is {max}")]
    TooLong {
        what: &'static str,
        len: usize,
        max: usize,
    },
}

/// Read an import file: our format (any version up to [`VERSION`]) or the orchestrator shape.
/// `now`, `session_id` and `agent_id` give what an orchestrator file lacks.
pub fn parse(
    text: &str,
    now: Ts,
    session_id: SessionId,
    mut agent_id: impl FnMut() -> AgentId,
) -> Result<SessionExport, ImportError> {
    let v: Value = serde_json::from_str(text)
        .map_err(|e| ImportError::Json(escape_controls(&e.to_string())))?;
    let Some(obj) = v.as_object() else {
        return Err(ImportError::Unknown);
    };
    if obj.get("format").and_then(Value::as_str) == Some(FORMAT) {
        let version = obj.get("version").and_then(Value::as_u64).unwrap_or(0);
        if version > u64::from(VERSION) {
            return Err(ImportError::Version(version));
        }
        let e: SessionExport = serde_json::from_value(v).map_err(|e| ImportError::Invalid {
            what: "maos-session file",
            message: escape_controls(&e.to_string()),
        })?;
        check(&e)?;
        check_times(&e, now)?;
        return Ok(e);
    }
    if obj.contains_key("schema_version") && obj.contains_key("session_id") {
        return orchestrator(obj, now, session_id, &mut agent_id);
    }
    Err(ImportError::Unknown)
}

/// The ids a maos-session file brings (the session's and its agents'), read without the rest:
/// a project must not have them yet. None for anything else (an orchestrator file gets new
/// ids; a broken file is refused when it is parsed).
pub fn ids_of(text: &str) -> Option<(SessionId, Vec<AgentId>)> {
    #[derive(Deserialize)]
    struct Ids {
        format: String,
        session: SessionIds,
    }
    #[derive(Deserialize)]
    struct SessionIds {
        id: SessionId,
        #[serde(default)]
        agents: Vec<AgentIds>,
    }
    #[derive(Deserialize)]
    struct AgentIds {
        id: AgentId,
    }
    let ids: Ids = serde_json::from_str(text).ok()?;
    (ids.format == FORMAT).then(|| {
        (
            ids.session.id,
            ids.session.agents.into_iter().map(|a| a.id).collect(),
        )
    })
}

/// The longest text an imported field may hold (bytes): what the commands that make the same
/// thing by hand accept (`--objective`, `--task`, a note, a plan's text).
pub const MAX_TEXT: usize = 4096;
/// The longest phase name (bytes), as `maos phase` takes it.
pub const MAX_PHASE_NAME: usize = 200;
/// The longest event type (bytes).
pub const MAX_EVENT_TYPE: usize = 64;

/// Every text field of the file within the limits the wire applies to the same field.
fn check_lengths(e: &SessionExport) -> Result<(), ImportError> {
    let s = &e.session;
    let mut texts: Vec<(&'static str, &str, usize)> = vec![("objective", &s.objective, MAX_TEXT)];
    for p in &s.workflow.phases {
        texts.push(("phase name", &p.name, MAX_PHASE_NAME));
    }
    for p in &s.paused_phases {
        texts.push(("paused phase", p, MAX_PHASE_NAME));
    }
    for n in &s.notes {
        texts.push(("note", &n.text, MAX_TEXT));
    }
    for er in &s.errors {
        texts.push(("error message", &er.message, MAX_TEXT));
    }
    let pauses = s
        .pause
        .iter()
        .chain(s.agents.iter().filter_map(|a| a.pause.as_deref()));
    for p in pauses {
        texts.push(("pause reason", p.reason.as_deref().unwrap_or(""), MAX_TEXT));
        texts.push(("paused by", p.by.as_deref().unwrap_or(""), MAX_TEXT));
    }
    for a in &s.agents {
        texts.push(("agent role", &a.role, MAX_TEXT));
        texts.push(("agent task", &a.task, MAX_TEXT));
        for t in [
            &a.external_session_id,
            &a.external_agent_id,
            &a.tool_use_id,
            &a.machine,
        ]
        .into_iter()
        .flatten()
        {
            texts.push(("agent field", t, MAX_TEXT));
        }
    }
    for ev in &e.events {
        texts.push(("event type", &ev.kind, MAX_EVENT_TYPE));
    }
    for c in &e.checkpoints {
        texts.push(("checkpoint reason", &c.reason, MAX_TEXT));
    }
    if let Some((what, t, max)) = texts.into_iter().find(|(_, t, max)| t.len() > *max) {
        return Err(ImportError::TooLong {
            what,
            len: t.len(),
            max,
        });
    }
    Ok(())
}

/// How far past `now` an imported time may be: another machine's clock may run ahead, not
/// by years.
const MAX_AHEAD_DAYS: u64 = 366;

/// Every time of the file between 1970 and a year from `now`: one past that is no record of
/// anything, and durations, ETAs and leases computed from it would be nonsense.
fn check_times(e: &SessionExport, now: Ts) -> Result<(), ImportError> {
    let s = &e.session;
    let mut times: Vec<(&'static str, Ts)> = vec![
        ("session created_at", s.created_at),
        ("session updated_at", s.updated_at),
    ];
    let opt = |what, t: Option<Ts>| t.map(|t| (what, t));
    times.extend(opt("session started_at", s.started_at));
    times.extend(opt("session ended_at", s.ended_at));
    times.extend(opt("workflow completed_at", s.workflow.completed_at));
    times.extend(opt("pause at", s.pause.as_ref().map(|p| p.at)));
    for p in &s.workflow.phases {
        times.extend(opt("phase started_at", p.started_at));
        times.extend(opt("phase ended_at", p.ended_at));
    }
    times.extend(s.notes.iter().map(|n| ("note at", n.at)));
    times.extend(s.errors.iter().map(|er| ("error at", er.at)));
    for a in &s.agents {
        times.push(("agent created_at", a.created_at));
        times.push(("agent updated_at", a.updated_at));
        times.extend(opt("agent started_at", a.started_at));
        times.extend(opt("agent ended_at", a.ended_at));
        times.extend(opt("agent pause at", a.pause.as_ref().map(|p| p.at)));
    }
    times.extend(e.events.iter().map(|ev| ("event ts", ev.ts)));
    times.extend(e.checkpoints.iter().map(|c| ("checkpoint ts", c.ts)));
    let latest = now + std::time::Duration::from_secs(MAX_AHEAD_DAYS * 86_400);
    match times
        .into_iter()
        .find(|(_, t)| t.timestamp() < 0 || *t > latest)
    {
        Some((what, t)) => Err(ImportError::Invalid {
            what,
            message: format!(
                "{} is not between 1970 and a year from now",
                maos_core::utc(t)
            ),
        }),
        None => Ok(()),
    }
}

/// What serde cannot see: every agent and event belongs to the session, every text is within
/// the wire's limits. (Every id was read through its parse rule: a path is never one.)
fn check(e: &SessionExport) -> Result<(), ImportError> {
    check_lengths(e)?;
    let sid = &e.session.id;
    if let Some(a) = e.session.agents.iter().find(|a| &a.session_id != sid) {
        return Err(ImportError::Invalid {
            what: "agent",
            message: format!("{} belongs to session {}, not {sid}", a.id, a.session_id),
        });
    }
    if let Some(ev) = e
        .events
        .iter()
        .find(|ev| ev.session_id.as_ref().is_some_and(|s| s != sid))
    {
        return Err(ImportError::Invalid {
            what: "event",
            message: format!("event {} belongs to another session", ev.seq),
        });
    }
    if e.events.windows(2).any(|w| w[0].seq >= w[1].seq) {
        return Err(ImportError::Invalid {
            what: "events",
            message: "not in increasing seq order".into(),
        });
    }
    Ok(())
}

/// A text field of an entry that is either a string or an object with one of `keys`.
fn text_of(v: &Value, keys: &[&str]) -> Option<String> {
    match v {
        Value::String(s) => Some(s.clone()),
        Value::Object(o) => keys
            .iter()
            .find_map(|k| o.get(*k).and_then(Value::as_str))
            .map(str::to_string),
        _ => None,
    }
}

fn list<'a>(
    obj: &'a serde_json::Map<String, Value>,
    key: &'static str,
) -> Result<&'a [Value], ImportError> {
    match obj.get(key) {
        None | Some(Value::Null) => Ok(&[]),
        Some(Value::Array(a)) => Ok(a),
        Some(_) => Err(ImportError::Invalid {
            what: key,
            message: "must be a list".into(),
        }),
    }
}

fn session_state(status: &str) -> SessionState {
    match status.to_ascii_lowercase().as_str() {
        "completed" | "complete" | "done" | "finished" | "succeeded" => SessionState::Completed,
        "failed" | "error" => SessionState::Failed,
        "cancelled" | "canceled" | "aborted" => SessionState::Cancelled,
        "paused" | "suspended" => SessionState::Paused,
        "created" | "pending" | "planned" | "new" => SessionState::Created,
        _ => SessionState::Running,
    }
}

fn agent_state(status: &str) -> AgentState {
    match status.to_ascii_lowercase().as_str() {
        "completed" | "complete" | "done" | "finished" | "succeeded" => AgentState::Completed,
        "failed" | "error" => AgentState::Failed,
        "cancelled" | "canceled" | "aborted" => AgentState::Cancelled,
        "pending" | "queued" | "waiting" | "created" => AgentState::Pending,
        // Its process is not ours: it can be resumed, not adopted.
        _ => AgentState::Resumable,
    }
}

fn orchestrator(
    obj: &serde_json::Map<String, Value>,
    now: Ts,
    id: SessionId,
    agent_id: &mut impl FnMut() -> AgentId,
) -> Result<SessionExport, ImportError> {
    let goal = obj
        .get("goal")
        .and_then(Value::as_str)
        .filter(|g| !g.trim().is_empty())
        .ok_or(ImportError::Invalid {
            what: "goal",
            message: "missing or empty".into(),
        })?;
    let state = session_state(
        obj.get("status")
            .and_then(Value::as_str)
            .unwrap_or("running"),
    );
    let mut agents = Vec::new();
    for (i, a) in list(obj, "agents")?.iter().enumerate() {
        let bad = |message: String| ImportError::Invalid {
            what: "agent",
            message,
        };
        let o = a
            .as_object()
            .ok_or_else(|| bad(format!("entry {} is not an object", i + 1)))?;
        let role = text_of(a, &["role", "type", "name"])
            .ok_or_else(|| bad(format!("entry {} has no role", i + 1)))?;
        let agent_state = agent_state(o.get("status").and_then(Value::as_str).unwrap_or("running"));
        let task = text_of(a, &["task", "description", "current_task"]).unwrap_or_default();
        agents.push(AgentRecord {
            state: agent_state,
            ended_at: agent_state.is_terminal().then_some(now),
            external_session_id: text_of(a, &["session_id", "claude_session_id"]),
            external_agent_id: text_of(a, &["id", "agent_id"]),
            ..AgentRecord::pending(agent_id(), id.clone(), role, task, now)
        });
    }
    let mut notes = Vec::new();
    for (key, kind, fields) in [
        (
            "completed_work",
            NoteKind::Done,
            &["description", "task", "summary", "outcome"][..],
        ),
        (
            "pending_tasks",
            NoteKind::Pending,
            &["description", "task", "summary"][..],
        ),
        (
            "decisions_made",
            NoteKind::Decision,
            &["decision", "description", "summary"][..],
        ),
        (
            "errors",
            NoteKind::Error,
            &["message", "error", "description"][..],
        ),
    ] {
        for (i, entry) in list(obj, key)?.iter().enumerate() {
            let mut text = text_of(entry, fields).ok_or_else(|| ImportError::Invalid {
                what: key,
                message: format!("entry {} has no text", i + 1),
            })?;
            // What an entry adds to its text: the outcome of work, the rationale of a decision.
            for extra in ["outcome", "rationale"] {
                if let Some(x) = entry.get(extra).and_then(Value::as_str)
                    && !text.contains(x)
                {
                    text = format!("{text} ({extra}: {x})");
                }
            }
            notes.push(Note {
                kind,
                text,
                agent: None,
                at: now,
            });
        }
    }
    let errors = notes
        .iter()
        .filter(|n| n.kind == NoteKind::Error)
        .map(|n| ErrorRecord {
            at: now,
            message: n.text.clone(),
            agent_id: None,
        })
        .collect();
    let session = SessionRecord {
        id,
        objective: goal.to_string(),
        state,
        strategy: Strategy::default(),
        active: false,
        created_at: now,
        updated_at: now,
        started_at: (state != SessionState::Created).then_some(now),
        ended_at: state.is_terminal().then_some(now),
        workflow: Workflow::default(),
        paused_phases: Vec::new(),
        pause: None,
        resume_count: 0,
        errors,
        notes,
        policy: None,
        agents,
        context: ContextUsage::default(),
        todos: Vec::new(),
        by_hooks: false,
    };
    Ok(SessionExport {
        format: FORMAT.into(),
        version: VERSION,
        exported_at: now,
        session,
        events: Vec::new(),
        checkpoints: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ids() -> (SessionId, impl FnMut() -> AgentId) {
        let mut n = 100u128;
        (SessionId::from_uuid(uuid::Uuid::from_u128(1)), move || {
            n += 1;
            AgentId::from_uuid(uuid::Uuid::from_u128(n))
        })
    }

    #[test]
    fn the_orchestrator_shape_becomes_a_session_with_notes() {
        let text = r#"{
          "schema_version": "1.0", "session_id": "orch-42", "goal": "Ship the auth service",
          "status": "in_progress",
          "agents": [
            {"id": "a1", "role": "backend", "status": "completed", "task": "API"},
            {"agent_id": "a2", "type": "tester", "status": "active", "session_id": "c1d2"}
          ],
          "completed_work": [{"description": "API endpoints", "outcome": "merged"}, "schema"],
          "pending_tasks": ["write docs"],
          "decisions_made": [{"decision": "use JWT", "rationale": "stateless"}],
          "errors": [{"message": "flaky test", "timestamp": "2025-01-01T00:00:00Z"}]
        }"#;
        let (sid, aid) = ids();
        let e = parse(text, chrono::Utc::now(), sid.clone(), aid).unwrap();
        let s = &e.session;
        assert_eq!(
            (s.id.clone(), s.objective.as_str(), s.state),
            (sid, "Ship the auth service", SessionState::Running)
        );
        let agents: Vec<_> = s
            .agents
            .iter()
            .map(|a| {
                (
                    a.role.as_str(),
                    a.state,
                    a.external_agent_id.as_deref(),
                    a.external_session_id.as_deref(),
                )
            })
            .collect();
        assert_eq!(
            agents,
            vec![
                ("backend", AgentState::Completed, Some("a1"), None),
                ("tester", AgentState::Resumable, Some("a2"), Some("c1d2")),
            ]
        );
        let notes: Vec<_> = s.notes.iter().map(|n| (n.kind, n.text.as_str())).collect();
        assert_eq!(
            notes,
            vec![
                (NoteKind::Done, "API endpoints (outcome: merged)"),
                (NoteKind::Done, "schema"),
                (NoteKind::Pending, "write docs"),
                (NoteKind::Decision, "use JWT (rationale: stateless)"),
                (NoteKind::Error, "flaky test"),
            ]
        );
        assert_eq!(s.errors.len(), 1);
    }

    #[test]
    fn bad_files_are_refused_with_one_line_reasons() {
        let cases = [
            ("", "not valid JSON"),
            ("[1,2]", "not a session file"),
            (r#"{"hello": 1}"#, "not a session file"),
            (
                r#"{"format": "maos-session", "version": 99}"#,
                "version 99 is newer",
            ),
            (
                r#"{"format": "maos-session", "version": 1, "session": 3}"#,
                "invalid maos-session file",
            ),
            (
                r#"{"schema_version": "1", "session_id": "x", "goal": ""}"#,
                "invalid goal",
            ),
            (
                r#"{"schema_version": "1", "session_id": "x", "goal": "g", "agents": {}}"#,
                "invalid agents",
            ),
            (
                r#"{"schema_version": "1", "session_id": "x", "goal": "g", "agents": [{}]}"#,
                "entry 1 has no role",
            ),
            (
                r#"{"schema_version": "1", "session_id": "x", "goal": "g", "errors": [3]}"#,
                "invalid errors",
            ),
        ];
        for (text, want) in cases {
            let (sid, aid) = ids();
            let e = parse(text, chrono::Utc::now(), sid, aid)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{text}: {e}");
            assert!(!e.contains('\n'), "{text}: {e}");
        }
    }

    #[test]
    fn ours_with_ids_that_are_paths_or_text_past_the_limits_is_refused() {
        let (sid, aid) = ids();
        let orch = r#"{"schema_version": "1", "session_id": "x", "goal": "g",
            "agents": [{"role": "backend", "status": "completed", "task": "API"}]}"#;
        let good = parse(orch, chrono::Utc::now(), sid, aid).expect("orchestrator file");
        let good = serde_json::to_value(&good).expect("JSON");
        let (sid, aid) = ids();
        parse(&good.to_string(), chrono::Utc::now(), sid, aid).expect("ours reads back");
        let big = "x".repeat(MAX_TEXT + 1);
        let cases: [(&str, serde_json::Value, &str); 8] = [
            ("/session/id", "../../x".into(), "invalid session id"),
            ("/session/id", "/tmp/abs".into(), "invalid session id"),
            ("/session/agents/0/id", "../a".into(), "invalid agent id"),
            (
                "/session/agents/0/role",
                big.clone().into(),
                "the agent role is 4097 bytes",
            ),
            (
                "/session/objective",
                big.clone().into(),
                "the objective is 4097 bytes",
            ),
            ("/session/agents/0/task", big.into(), "the limit is 4096"),
            (
                "/session/created_at",
                "+200000-01-01T00:00:00Z".into(),
                "invalid session created_at",
            ),
            (
                "/session/agents/0/updated_at",
                "1900-01-01T00:00:00Z".into(),
                "not between 1970 and a year from now",
            ),
        ];
        for (at, value, want) in cases {
            let mut v = good.clone();
            *v.pointer_mut(at).expect(at) = value;
            let (sid, aid) = ids();
            let e = parse(&v.to_string(), chrono::Utc::now(), sid, aid)
                .unwrap_err()
                .to_string();
            assert!(e.contains(want), "{at}: {e}");
            assert!(!e.contains('\n'), "{at}: {e}");
        }
    }
}
