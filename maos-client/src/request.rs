//! The request a command line asks for: ids, paths and flags as the daemon takes them.

use maos_core::{AgentOp, PhaseOp, SessionOp, Ts};
use maos_proto::req;
use maos_proto::{EventFilter, LockWait, Request, Target};

use crate::cli::{self, EventsArgs, LockCmd};
use crate::failure::{Res, usage};

/// A plan file becomes a request with its text: the daemon parses it (and names the line of
/// a mistake), so the client stays small.
pub fn plan_request(path: &std::path::Path, start: bool) -> Res<Request> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the plan {}: {e}", path.display())))?;
    Ok(Request::SessionFromPlan(req::SessionFromPlan {
        path: path.display().to_string(),
        text,
        start,
    }))
}

/// Parse a time option (`--since`, `--until`): RFC 3339, or an age like 30s / 10m / 2h / 1d.
fn parse_time(flag: &'static str) -> impl Fn(&str) -> Res<Ts> {
    move |s| {
        if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
            return Ok(t.with_timezone(&chrono::Utc));
        }
        let bad = || {
            usage(format!(
                "{flag} {s:?}: expected an RFC 3339 time (2026-11-22T10:00:00Z) or an age such as 30s, 10m, 2h, 1d"
            ))
        };
        // An age is a duration as every duration flag takes it (a bare number needs a unit).
        let age = match maos_core::duration::parse(s) {
            Ok(d) => d,
            Err(e @ maos_core::duration::DurationError::NoUnit(_)) => {
                return Err(usage(format!("{flag} {e}")));
            }
            Err(_) => return Err(bad()),
        };
        chrono::Duration::from_std(age)
            .ok()
            .and_then(|d| chrono::Utc::now().checked_sub_signed(d))
            .ok_or_else(bad)
    }
}

/// "500ms", "30s", "5m", "1h", "1d" (a bare number other than 0 is refused: it needs a unit).
pub fn parse_duration(flag: &str, s: &str) -> Res<std::time::Duration> {
    maos_core::duration::parse(s).map_err(|e| usage(format!("{flag} {e}")))
}

fn lock_mode(s: &str) -> Res<maos_core::LockMode> {
    s.parse()
        .map_err(|e: maos_core::ParseEnumError| usage(e.to_string()))
}

fn cwd() -> Option<String> {
    std::env::current_dir()
        .ok()
        .map(|d| d.to_string_lossy().into_owned())
}

pub fn lock_request(cmd: &LockCmd) -> Res<Request> {
    // Refused here, as the daemon would, without a round trip.
    if let LockCmd::Acquire { path, .. }
    | LockCmd::Release { path, .. }
    | LockCmd::Check { path, .. } = cmd
    {
        maos_core::check_path_len(path).map_err(usage)?;
    }
    Ok(match cmd {
        LockCmd::Acquire {
            path,
            agent,
            mode,
            no_wait: _,
            wait,
            wait_forever,
            ttl,
        } => Request::LockAcquire(req::LockAcquire {
            agent: agent.clone(),
            lock: req::Acquire {
                at: req::LockAt {
                    path: path.clone(),
                    cwd: cwd(),
                },
                mode: lock_mode(mode)?,
                wait: match (wait, wait_forever) {
                    (_, true) => LockWait::Forever,
                    (Some(w), false) => LockWait::Wait {
                        ms: parse_duration("--wait", w)?.as_millis() as u64,
                    },
                    (None, false) => LockWait::NoWait,
                },
                ttl_ms: ttl
                    .as_deref()
                    .map(|t| parse_duration("--ttl", t).map(|d| d.as_millis() as u64))
                    .transpose()?,
            },
        }),
        LockCmd::Release { path, agent, force } => Request::LockRelease(req::LockRelease {
            agent: agent.clone(),
            at: req::LockAt {
                path: path.clone(),
                cwd: cwd(),
            },
            force: *force,
            by: whoami(),
        }),
        LockCmd::ReleaseAll { agent } => Request::LockReleaseAll(req::LockReleaseAll {
            agent: agent.clone(),
        }),
        LockCmd::List { session } => Request::LockList(req::LockList {
            session: session.clone(),
        }),
        LockCmd::Check { path, agent, mode } => Request::LockCheck(req::LockCheck {
            agent: agent.clone(),
            at: req::LockAt {
                path: path.clone(),
                cwd: cwd(),
            },
            mode: lock_mode(mode)?,
        }),
    })
}

pub use crate::client::whoami;

pub fn target(agent: &Option<String>, phase: &Option<String>) -> Target {
    match (agent, phase) {
        (Some(a), _) => Target::Agent(a.clone()),
        (None, Some(p)) => Target::Phase(p.clone()),
        (None, None) => Target::Session,
    }
}

pub fn session_op(t: &cli::SessionTarget, op: SessionOp) -> Request {
    Request::SessionTransition(req::SessionTransition {
        session: t.session.clone(),
        op,
        reason: t.reason.clone(),
    })
}

pub fn agent_op(t: &cli::AgentTarget, op: AgentOp) -> Request {
    Request::AgentTransition(req::AgentTransition {
        agent: t.agent.clone(),
        op,
        exit_code: t.exit_code,
        reason: t.reason.clone(),
    })
}

pub fn phase_op(t: &cli::PhaseTarget, op: PhaseOp, artifacts: serde_json::Value) -> Request {
    Request::PhaseTransition(req::PhaseTransition {
        session: t.session.clone(),
        phase: t.phase.clone(),
        op,
        artifacts,
    })
}

pub fn event_filter(a: &EventsArgs) -> Res<EventFilter> {
    for t in &a.types {
        maos_core::events::check_event_type(t).map_err(usage)?;
    }
    Ok(EventFilter {
        session: a.session.clone(),
        types: a.types.clone(),
        agent: a.agent.clone(),
        since: a.since.as_deref().map(parse_time("--since")).transpose()?,
        until: a.until.as_deref().map(parse_time("--until")).transpose()?,
        path: a.path.clone(),
        text: a.grep.clone(),
        ..EventFilter::default()
    })
}
