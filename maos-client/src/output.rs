//! Human output: `docker ps`-style tables and short summaries. `--json` bypasses all of this.

use crate::paint::Paint;
use chrono::Utc;
use maos_core::text::first_line;
use maos_core::{AgentState, Progress, SessionState, Ts, ids::short};
use maos_proto::{
    AgentRecord, DaemonStatus, EventRecord, LockCheck, LockList, Problem, PsAgent, PsSession,
    RecoveryReport, SessionRecord, StatusView,
};
use std::fmt::Write;

/// A copy of `v` for a human view: every string in it (prompts, tasks, objectives, roles,
/// paths, notes, reasons, event data) made safe for a terminal by [`maos_core::term::safe`].
/// Each view renders from this copy, so no field it shows, today's or one added later, is
/// printed raw. When the copy cannot be read back as `T` (never for maos's own replies), the
/// escaped JSON is the error, to be printed instead. `--json` never comes here.
pub fn terminal_safe<T: serde::Serialize + serde::de::DeserializeOwned + Clone>(
    v: &T,
) -> Result<T, serde_json::Value> {
    // Almost every reply has nothing to escape, and `maos ps` runs often: then the copy is a
    // clone, not a round trip through a JSON value.
    if serde_json::to_string(v).is_ok_and(|text| !may_need_escaping(&text)) {
        return Ok(v.clone());
    }
    let mut value = serde_json::to_value(v).unwrap_or(serde_json::Value::Null);
    maos_core::term::safe_json(&mut value);
    serde_json::from_value(value.clone()).map_err(|_| value)
}

/// Whether JSON text may hold a string with a character [`maos_core::term::safe`] escapes:
/// one of them as it is (DEL, C1, bidirectional controls) or a C0 control in JSON's escapes
/// (`\n`, `\u001b`, ...). An escaped backslash before such a letter answers yes too: then the
/// slow path finds nothing to change.
fn may_need_escaping(json: &str) -> bool {
    json.contains(maos_core::term::is_unsafe)
        || json
            .as_bytes()
            .windows(2)
            .any(|w| w[0] == b'\\' && matches!(w[1], b'u' | b'n' | b'r' | b't' | b'b' | b'f'))
}

/// "42s", "7m", "3h", "2d".
pub fn human_secs(secs: f64) -> String {
    let s = secs.max(0.0) as u64;
    match s {
        0..60 => format!("{s}s"),
        60..3600 => format!("{}m", s / 60),
        3600..86400 => format!("{}h", s / 3600),
        _ => format!("{}d", s / 86400),
    }
}

pub fn age(ts: &Ts) -> String {
    human_secs((Utc::now() - *ts).as_seconds_f64())
}

/// The first line of `s` (untrimmed), at most `n` characters.
pub fn clip(s: &str, n: usize) -> String {
    maos_core::text::clip(s.lines().next().unwrap_or(""), n)
}

fn runtime(a: &AgentRecord) -> String {
    span(a.started_at, a.ended_at)
}

/// How long something ran (or has been running).
pub fn span(started: Option<Ts>, ended: Option<Ts>) -> String {
    match (started, ended) {
        (Some(s), Some(e)) => human_secs((e - s).as_seconds_f64()),
        (Some(s), None) => human_secs((Utc::now() - s).as_seconds_f64()),
        _ => "-".into(),
    }
}

fn agent_state(a: &AgentRecord) -> String {
    if a.paused {
        format!("{} (paused)", a.state)
    } else {
        a.state.to_string()
    }
}

fn session_state(s: &SessionRecord) -> String {
    let mut st = s.state.to_string();
    if s.active {
        st.push('*');
    }
    st
}

fn phase_pos(s: &SessionRecord) -> String {
    match s.workflow.position() {
        (_, 0) => "-".into(),
        (k, n) => format!("{k}/{n}"),
    }
}

/// An agent that got to its end: completed, or a CLI window that ended. Failed and cancelled
/// agents are final too, but not done (core's one definition, which progress counts too).
pub fn is_done(state: AgentState) -> bool {
    state.is_done()
}

fn agents_done(s: &SessionRecord) -> String {
    let done = s.agents.iter().filter(|a| is_done(a.state)).count();
    format!("{done}/{}", s.agents.len())
}

/// What a managed agent's `ps` line ends with: its plan name (what commands take), its
/// pipeline stage, and its attempt of those the plan allows once it ran more than once or may:
/// `  [name build, stage 2, attempt 2/3]`.
fn plan_suffix(p: &maos_proto::PsPlanAgent) -> String {
    let mut parts = vec![format!("name {}", p.name)];
    if let Some(s) = p.stage {
        parts.push(format!("stage {s}"));
    }
    match (p.attempts, p.max_attempts) {
        (n, max) if n > max => parts.push(format!("attempt {n}")),
        (n, max) if n > 0 && (n > 1 || max > 1) => parts.push(format!("attempt {n}/{max}")),
        _ => {}
    }
    format!("  [{}]", parts.join(", "))
}

/// What an agent is doing now, in a few words: the lock it waits for, else the item of its
/// task list in progress and its last tool call, else its task (`maos ps`'s NOW, `maos top`).
pub fn doing_now(a: &PsAgent, now: Ts) -> String {
    let ago = |t: &Ts| human_secs((now - *t).as_seconds_f64());
    if let Some(w) = a.waits.first() {
        return format!("waits for {} {} ({})", w.mode, w.path, ago(&w.since));
    }
    // Held back by the scheduler: its declared files overlap a running agent's (issue 35).
    if let Some(h) = a.plan.as_ref().and_then(|p| p.held.as_ref())
        && a.state == AgentState::Pending
    {
        return format!("waits: {} ({})", h.reason, ago(&h.since));
    }
    // A refused call says so ("denied Write src/x.rs (held by agt_1a2b3c4d)"): a refused
    // writer must not read like the file's writer.
    let last = a
        .activity
        .as_ref()
        .map(|act| format!("{}, {} ago", act.words(), ago(&act.at)));
    match (&a.todo, last) {
        _ if a.state.is_terminal() => first_line(&a.task).to_string(),
        (Some(todo), Some(last)) => format!("{} ({last})", first_line(todo)),
        (Some(todo), None) => first_line(todo).to_string(),
        (None, Some(last)) => last,
        (None, None) => first_line(&a.task).to_string(),
    }
}

/// Whether an agent is held: paused itself, or in a paused session, and not finished.
pub fn is_held(a: &PsAgent, session: SessionState) -> bool {
    !a.state.is_terminal() && (a.paused || session == SessionState::Paused)
}

/// An agent of a session in `session` state, as one word: `paused` over the state it was
/// paused in (itself, or with its session).
pub fn agent_state_word(a: &PsAgent, session: SessionState) -> String {
    if is_held(a, session) {
        "paused".into()
    } else {
        a.state.to_string()
    }
}

/// Who an agent is, in a few words: its role, or for a CLI window (whose role is its CLI,
/// shown beside it) its task, the window's first prompt.
pub fn who(a: &PsAgent) -> String {
    match a.cli {
        Some(c) if c.as_str() == a.role && !a.task.trim().is_empty() => {
            first_line(&a.task).to_string()
        }
        _ => a.role.clone(),
    }
}

/// The CLI of a window's agent or subagent (`claude`, `codex`, `gemini`); `-` for the others.
pub fn cli_word(a: &PsAgent) -> &'static str {
    a.cli.map_or("-", |c| c.as_str())
}

/// `maos ps`: sessions with their agents under them (spawn tree indented), what each agent is
/// doing now, and their locks.
pub fn ps(sessions: &[PsSession], paint: Paint) -> String {
    let mut out = String::new();
    if sessions.is_empty() {
        out.push_str("no sessions (create one with `maos session create --objective TEXT`)\n");
        return out;
    }
    let now = Utc::now();
    let _ = writeln!(
        out,
        "{}",
        paint.bold(&format!(
            "{:<14} {:<10} {:<10} {:<6} {:<7} {:<5} OBJECTIVE",
            "SESSION", "STATE", "STRATEGY", "PHASE", "AGENTS", "AGE"
        ))
    );
    let _ = writeln!(
        out,
        "{}",
        paint.dim(&format!(
            "    {:<13} {:<16} {:<6} {:<9} {:<5} NOW",
            "AGENT", "WHO", "CLI", "STATE", "TIME"
        ))
    );
    for s in sessions {
        let mut state = s.state.to_string();
        if s.active {
            state.push('*');
        }
        let done = s.agents.iter().filter(|a| is_done(a.state)).count();
        let phase = match s.phase {
            (_, 0) => "-".to_string(),
            (k, n) => format!("{k}/{n}"),
        };
        let _ = writeln!(
            out,
            "{:<14} {} {:<10} {:<6} {:<7} {:<5} {}",
            short(s.id.as_str()),
            paint.session_state(s.state, &format!("{state:<10}")),
            s.strategy.as_str(),
            phase,
            format!("{done}/{}", s.agents.len()),
            age(&s.created_at),
            clip(&s.objective, 60)
        );
        let tree =
            maos_core::SpawnTree::new(s.agents.iter().map(|a| (a.id.clone(), a.parent.clone())));
        // Each parent before its children: drawn in registration order, a child registered
        // after another top-level agent would appear under that one.
        let by_id: std::collections::HashMap<_, _> = s.agents.iter().map(|a| (&a.id, a)).collect();
        for a in tree.preorder().iter().filter_map(|id| by_id.get(id)) {
            let indent = "  ".repeat(tree.depth(&a.id) + 1);
            let doing = clip(&doing_now(a, now), 60);
            let doing = if !a.waits.is_empty() {
                paint.yellow(&doing)
            } else if a.state.is_terminal() {
                paint.dim(&doing)
            } else {
                doing
            };
            // In a fleet: the machine it runs on.
            let machine = a
                .machine
                .as_deref()
                .map(|m| format!("  on {m}"))
                .unwrap_or_default();
            let _ = writeln!(
                out,
                "{indent}└ {:<13} {:<16} {:<6} {} {:<5} {doing}{}{machine}",
                short(a.id.as_str()),
                clip(&who(a), 16),
                cli_word(a),
                paint.agent_state(
                    a.state,
                    is_held(a, s.state),
                    &format!("{:<9}", agent_state_word(a, s.state))
                ),
                span(a.started_at, a.ended_at),
                a.plan.as_ref().map(plan_suffix).unwrap_or_default()
            );
            for l in &a.locks {
                let _ = writeln!(
                    out,
                    "{indent}    lock {} ({}) token {}",
                    l.path, l.mode, l.token
                );
            }
            // A held file changed by an agent other than its holder (issue 31 §2), in red on
            // both agents' rows.
            for v in &a.violations {
                let line = violation_line(a, v);
                let _ = writeln!(out, "{indent}    {}", paint.red(&line));
            }
            // Work that would conflict with another worktree's (the conflict radar).
            for r in &a.radar {
                let _ = writeln!(out, "{indent}    {}", paint.yellow(&radar_line(r)));
            }
        }
    }
    out.push_str("(* = active session; WHO = the role, or a CLI window's first prompt; NOW = the lock it waits for, its task list item in progress and last tool call, or its task)\n");
    out
}

/// A file an agent's work would conflict on (the conflict radar), as its `ps` and `top` rows
/// say it: "~ src/api.rs would conflict with agt_1234abcd in /repo/wt-b (`maos radar`)".
pub fn radar_line(r: &maos_proto::PsRadar) -> String {
    format!(
        "~ {} would conflict with {} in {} (`maos radar`)",
        r.path,
        radar_agents(&r.other_agents),
        r.other_worktree
    )
}

/// The agents working in one side of a radar pair, short.
fn radar_agents(agents: &[maos_core::AgentId]) -> String {
    if agents.is_empty() {
        "no live agent".to_string()
    } else {
        let short: Vec<&str> = agents.iter().map(|a| a.short()).collect();
        short.join(", ")
    }
}

/// A lock violation as the agent's `ps` row says it: the holder's file overwritten by whom,
/// or the file the violator overwrote and whose it is.
pub fn violation_line(a: &PsAgent, v: &maos_proto::PsViolation) -> String {
    if v.holder == a.id {
        format!(
            "! {} overwritten by {} (lock violated; `maos restore-file {}` puts this agent's version back)",
            v.path,
            v.violator
                .as_ref()
                .map_or("a process outside the hooks", |id| short(id.as_str())),
            v.path
        )
    } else {
        format!(
            "! overwrote {}, held by {} (lock violated)",
            v.path,
            short(v.holder.as_str())
        )
    }
}

pub fn session_list(sessions: &[SessionRecord]) -> String {
    if sessions.is_empty() {
        return "no sessions\n".into();
    }
    let mut out = format!(
        "{:<14} {:<11} {:<10} {:<6} {:<7} {:<5} OBJECTIVE\n",
        "SESSION", "STATE", "STRATEGY", "PHASE", "AGENTS", "AGE"
    );
    for s in sessions {
        let _ = writeln!(
            out,
            "{:<14} {:<11} {:<10} {:<6} {:<7} {:<5} {}",
            short(s.id.as_str()),
            session_state(s),
            s.strategy.as_str(),
            phase_pos(s),
            agents_done(s),
            age(&s.created_at),
            clip(&s.objective, 60)
        );
    }
    out
}

/// `n` and `word`, plural when `n` is not 1: "1 session", "3 sessions".
pub fn count(n: usize, word: &str) -> String {
    maos_core::words::count(n, word)
}

/// `maos gc`: what was deleted, and where each export is.
pub fn gc(g: &maos_proto::GcReport) -> String {
    let cutoff = maos_core::utc(g.cutoff);
    let verb = if g.dry_run { "would delete" } else { "deleted" };
    let mut out = format!(
        "{verb} {} that ended before {cutoff}\n",
        count(g.sessions.len(), "finished session")
    );
    for s in &g.sessions {
        let _ = match &s.exported_to {
            Some(p) => writeln!(out, "  {}  exported to {p}", short(s.id.as_str())),
            None => writeln!(out, "  {}", short(s.id.as_str())),
        };
    }
    out
}

/// `maos history`: finished sessions, newest first.
pub fn history(list: &[maos_proto::HistoryEntry]) -> String {
    if list.is_empty() {
        return "no finished sessions\n".into();
    }
    let mut out = format!(
        "{:<14} {:<10} {:<10} {:<6} {:<8} {:<9} {:<8} OBJECTIVE\n",
        "SESSION", "STATE", "STRATEGY", "AGENTS", "RAN", "ENDED", "ARCHIVED"
    );
    for h in list {
        let _ = writeln!(
            out,
            "{:<14} {:<10} {:<10} {:<6} {:<8} {:<9} {:<8} {}",
            short(h.id.as_str()),
            h.state.as_str(),
            h.strategy.as_str(),
            h.agents,
            span(h.started_at, h.ended_at),
            // When it ended, as an age: the column is a duration like RAN, said so.
            h.ended_at
                .as_ref()
                .map_or_else(|| "-".to_string(), |t| format!("{} ago", age(t))),
            if h.archived { "yes" } else { "no" },
            clip(&h.objective, 60)
        );
    }
    out
}

pub fn agents(list: &[AgentRecord]) -> String {
    if list.is_empty() {
        return "no agents\n".into();
    }
    let mut out = format!(
        "{:<13} {:<16} {:<20} {:<7} {:<13} TASK\n",
        "AGENT", "ROLE", "STATE", "RUNTIME", "PARENT"
    );
    for a in list {
        let _ = writeln!(
            out,
            "{:<13} {:<16} {:<20} {:<7} {:<13} {}",
            short(a.id.as_str()),
            clip(&format!("{}#{}", a.role, a.instance), 16),
            agent_state(a),
            runtime(a),
            a.parent.as_ref().map_or("-", |p| short(p.as_str())),
            clip(&a.task, 50)
        );
    }
    out
}

pub fn session(s: &SessionRecord) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "session    {}{}",
        short(s.id.as_str()),
        if s.active { " (active)" } else { "" }
    );
    let _ = writeln!(out, "objective  {}", s.objective);
    let _ = writeln!(out, "state      {}   strategy {}", s.state, s.strategy);
    let _ = writeln!(
        out,
        "created    {} ({} ago)",
        maos_core::utc(s.created_at),
        age(&s.created_at)
    );
    if let Some(p) = &s.pause {
        let _ = writeln!(
            out,
            "paused     {} ({} ago) by {}: {}",
            maos_core::utc(p.at),
            age(&p.at),
            p.by.as_deref().unwrap_or("-"),
            p.reason.as_deref().unwrap_or("(no reason given)")
        );
    }
    if s.resume_count > 0 {
        let _ = writeln!(out, "resumed    {}", count(s.resume_count as usize, "time"));
    }
    if !s.workflow.phases.is_empty() {
        let _ = writeln!(out, "phases     {}", phase_pos(s));
        let current = s.workflow.current();
        for (i, p) in s.workflow.phases.iter().enumerate() {
            let mark = if Some(i) == current { ">" } else { " " };
            let paused = if s.paused_phases.contains(&p.name) {
                " (paused)"
            } else {
                ""
            };
            let _ = writeln!(
                out,
                "  {mark} {}. {:<20} {}{paused}",
                i + 1,
                p.name,
                p.state
            );
        }
    }
    if !s.errors.is_empty() {
        let _ = writeln!(out, "errors     {}", s.errors.len());
        for e in s.errors.iter().rev().take(3) {
            let _ = writeln!(out, "  {}  {}", maos_core::utc(e.at), e.message);
        }
    }
    let _ = writeln!(out, "agents     {}", agents_done(s));
    if !s.agents.is_empty() {
        out.push_str(&agents(&s.agents));
    }
    out
}

/// An event's data as `key=value` pairs, compact (`maos events`, `maos top`).
pub fn event_data(e: &EventRecord) -> String {
    match &e.data {
        serde_json::Value::Object(m) if m.is_empty() => String::new(),
        serde_json::Value::Null => String::new(),
        serde_json::Value::Object(m) => {
            // Keys with values only, compact.
            let parts: Vec<String> = m
                .iter()
                .filter(|(_, v)| !v.is_null())
                .map(|(k, v)| match short_ids(v) {
                    serde_json::Value::String(s) => format!("{k}={}", clip(&s, 60)),
                    other => format!("{k}={}", clip(&other.to_string(), 60)),
                })
                .collect();
            parts.join(" ")
        }
        other => other.to_string(),
    }
}

/// `v` with every session or agent id in it shortened, as the rest of the line shows ids.
fn short_ids(v: &serde_json::Value) -> serde_json::Value {
    use serde_json::Value;
    match v {
        Value::String(s) if maos_core::ids::is_id(s) => Value::String(short(s).to_string()),
        Value::Array(items) => Value::Array(items.iter().map(short_ids).collect()),
        Value::Object(m) => {
            Value::Object(m.iter().map(|(k, v)| (k.clone(), short_ids(v))).collect())
        }
        other => other.clone(),
    }
}

pub fn event_line(e: &EventRecord) -> String {
    let data = event_data(e);
    format!(
        "{:>6}  {}  {:<20} {:<13} {:<13} {}",
        e.seq,
        maos_core::utc_ms(e.ts),
        e.kind,
        e.session_id.as_ref().map_or("-", |s| short(s.as_str())),
        e.agent_id.as_ref().map_or("-", |a| short(a.as_str())),
        data
    )
}

pub fn status(v: &StatusView) -> String {
    let s = &v.session;
    let p: &Progress = &v.progress;
    let mut out = String::new();
    let _ = writeln!(
        out,
        "session   {}  {}  ({})",
        short(s.id.as_str()),
        s.state,
        s.strategy
    );
    let _ = writeln!(out, "objective {}", s.objective);
    let _ = writeln!(out, "progress  {:.0}%", p.percent);
    match (p.phase, &p.current_phase) {
        ((_, 0), _) => {
            let _ = writeln!(out, "phase     - (no phases)");
        }
        ((k, n), Some(name)) => {
            let running = p
                .current_phase_elapsed_secs
                .map(|e| format!(", running {}", human_secs(e)))
                .unwrap_or_default();
            let _ = writeln!(out, "phase     {k}/{n}: {name}{running}");
        }
        ((k, n), None) => {
            let _ = writeln!(out, "phase     {k}/{n} (workflow complete)");
        }
    }
    // Done is completed (or an ended window): failed and cancelled agents are final, not done.
    let done = s.agents.iter().filter(|a| is_done(a.state)).count();
    let of = |state: AgentState| s.agents.iter().filter(|a| a.state == state).count();
    let not_done: Vec<String> = [
        (of(AgentState::Failed), "failed"),
        (of(AgentState::Cancelled), "cancelled"),
    ]
    .iter()
    .filter(|(n, _)| *n > 0)
    .map(|(n, what)| format!("{n} {what}"))
    .collect();
    let not_done = match not_done.is_empty() {
        true => String::new(),
        false => format!(" ({})", not_done.join(", ")),
    };
    let _ = writeln!(out, "agents    {done}/{} done{not_done}", s.agents.len());
    let _ = writeln!(
        out,
        "avg phase {}",
        p.avg_phase_secs.map_or("-".into(), human_secs)
    );
    let eta = p.eta.map_or("-".into(), |t| {
        format!(
            "{} (in {})",
            maos_core::utc(t),
            human_secs((t - Utc::now()).as_seconds_f64())
        )
    });
    let _ = writeln!(out, "eta       {eta}");
    let _ = writeln!(
        out,
        "stalled   {}",
        if p.stalled {
            "YES: the current phase runs over twice the average"
        } else {
            "no"
        }
    );
    out
}

pub fn daemon(d: &DaemonStatus) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "maosd {} (protocol {}), pid {}, up {}",
        d.version,
        d.protocol,
        d.pid,
        human_secs(d.uptime_secs)
    );
    let _ = writeln!(out, "socket       {}", d.socket);
    let _ = writeln!(out, "home         {}", d.home);
    let _ = writeln!(out, "backend      {}", d.backend.describe());
    if d.backend.url.is_none() {
        let _ = writeln!(out, "synchronous  {}", d.synchronous);
    }
    fleet_members(&mut out, &d.backend);
    let _ = writeln!(out, "started by   {}", d.started_by.as_str());
    if let Some(idle) = d.idle_exit_secs {
        let after = if idle < 60.0 {
            format!("{idle}s")
        } else {
            human_secs(idle)
        };
        let _ = writeln!(out, "idle exit    after {after} idle");
    }
    let _ = writeln!(out, "projects     {}", d.projects.len());
    for p in &d.projects {
        let _ = writeln!(
            out,
            "  {}  ({}, {} live)",
            p.root,
            count(p.sessions, "session"),
            p.live_sessions
        );
    }
    out
}

/// How many daemons that stopped `daemon status` lists by name (the most recently seen); the
/// rest are counted. A fleet of short-lived machines (CI runners) leaves many.
const STOPPED_SHOWN: usize = 10;

/// The fleet's daemons under `daemon status`: each one's id, and whether it runs by its last
/// sign of life in PostgreSQL (they come the most recently seen first).
fn fleet_members(out: &mut String, b: &maos_proto::Backend) {
    if b.members.is_empty() {
        return;
    }
    let live = b.members.iter().filter(|m| m.live).count();
    let _ = writeln!(
        out,
        "fleet        {}, {live} running",
        count(b.members.len(), "daemon")
    );
    let shown: Vec<_> = b
        .members
        .iter()
        .filter(|m| m.live)
        .chain(b.members.iter().filter(|m| !m.live).take(STOPPED_SHOWN))
        .collect();
    let width = shown.iter().map(|m| m.id.len()).max().unwrap_or(0);
    for m in &shown {
        let me = if b.daemon.as_deref() == Some(m.id.as_str()) {
            "this daemon, "
        } else {
            ""
        };
        let state = if m.live {
            format!("running (seen {} ago)", human_secs(m.seen_secs_ago))
        } else {
            format!(
                "not seen for {}: stopped, or cut off from PostgreSQL",
                human_secs(m.seen_secs_ago)
            )
        };
        let _ = writeln!(out, "  {:<width$}  {me}{state}", m.id);
    }
    let more = b.members.len() - shown.len();
    if more > 0 {
        let _ = writeln!(out, "  and {more} more not running");
    }
}

fn until(ts: &Ts) -> String {
    let secs = (*ts - Utc::now()).as_seconds_f64();
    if secs <= 0.0 {
        "expired".into()
    } else {
        format!("in {}", human_secs(secs))
    }
}

/// `maos lock list`.
pub fn locks(l: &LockList) -> String {
    let mut out = String::new();
    if l.locks.is_empty() {
        out.push_str("no locks held\n");
    } else {
        let _ = writeln!(
            out,
            "{:<40} {:<10} {:<13} {:<14} {:<6} {:<6} EXPIRES",
            "PATH", "MODE", "HOLDER", "ROLE", "TOKEN", "HELD"
        );
        for k in &l.locks {
            let _ = writeln!(
                out,
                "{:<40} {:<10} {:<13} {:<14} {:<6} {:<6} {}",
                clip(&k.path, 40),
                k.mode.as_str(),
                short(k.holder.as_str()),
                clip(&k.holder_role, 14),
                k.token,
                age(&k.acquired_at),
                until(&k.expires_at)
            );
        }
    }
    if !l.waiters.is_empty() {
        let _ = writeln!(out, "waiting:");
        for w in &l.waiters {
            let _ = writeln!(
                out,
                "  {:<38} {:<10} {:<13} {:<14} for {}{}",
                clip(&w.path, 38),
                w.mode.as_str(),
                short(w.agent.as_str()),
                clip(&w.role, 14),
                age(&w.since),
                w.deadline
                    .map(|d| format!(", gives up {}", until(&d)))
                    .unwrap_or_default()
            );
        }
    }
    out
}

/// `maos lock check`.
pub fn lock_check(c: &LockCheck) -> String {
    if !c.blocked {
        return format!("free: {} ({}) would be granted now\n", c.path, c.mode);
    }
    let mut out = format!("blocked: {} ({}) would wait for\n", c.path, c.mode);
    for h in &c.holders {
        let _ = writeln!(
            out,
            "  {} {} holding {} ({}) since {} ({} ago), token {}",
            h.holder_role,
            short(h.holder.as_str()),
            h.path,
            h.mode,
            maos_core::utc(h.acquired_at),
            age(&h.acquired_at),
            h.token
        );
    }
    for w in &c.queued {
        let _ = writeln!(
            out,
            "  {} {} queued for {} ({})",
            w.role,
            short(w.agent.as_str()),
            w.path,
            w.mode
        );
    }
    out
}

fn ids(list: &[maos_core::AgentId]) -> String {
    list.iter()
        .map(|a| a.short())
        .collect::<Vec<_>>()
        .join(", ")
}

pub fn recovery(r: &RecoveryReport) -> String {
    if r.sessions.is_empty() {
        return "no managed session to recover\n".to_string();
    }
    let mut out = String::new();
    for s in &r.sessions {
        let _ = writeln!(out, "session {}: {}", s.session.short(), s.plan);
        for (what, list) in [
            ("re-adopted (still running)", &s.readopted),
            ("exit applied (ended while maos was down)", &s.exits_applied),
            ("resumable", &s.resumable),
            ("failed (process gone, no exit recorded)", &s.failed),
        ] {
            if !list.is_empty() {
                let _ = writeln!(out, "  {what}: {}", ids(list));
            }
        }
        for n in &s.notes {
            let _ = writeln!(out, "  note: {n}");
        }
        let _ = writeln!(out, "  next: {}", s.next_step);
    }
    out
}

pub fn problems(p: &[Problem]) -> String {
    if p.is_empty() {
        return "no problems found\n".to_string();
    }
    let mut out = String::new();
    for x in p {
        let _ = writeln!(out, "{} {}: {}", x.session, x.kind, x.message);
    }
    out
}

/// A radar side's branch, as `maos radar` writes it after the worktree: " [NAME]", or "".
fn radar_branch(side: &maos_core::radar::RadarSide) -> String {
    side.branch
        .as_deref()
        .map_or_else(String::new, |b| format!(" [{b}]"))
}

/// A radar side as `maos radar` names it: its worktree, branch and agents.
fn radar_side(side: &maos_core::radar::RadarSide) -> String {
    format!(
        "{}{} ({})",
        side.worktree,
        radar_branch(side),
        radar_agents(&side.agents)
    )
}

/// `maos radar`: each pair of worktrees whose work would conflict, its agents, and the files
/// with their conflicting regions.
pub fn radar(pairs: &[maos_core::radar::RadarPair]) -> String {
    let mut out = String::new();
    if pairs.is_empty() {
        out.push_str("no conflicts predicted\n");
        return out;
    }
    for p in pairs {
        // A pair that could not be merged (fleet mode): why, and the files both changed.
        if let Some(note) = &p.note {
            let _ = writeln!(out, "{} and {}: {note}", radar_side(&p.a), radar_side(&p.b));
            if !p.overlap.is_empty() {
                let _ = writeln!(out, "  both changed: {}", p.overlap.join(", "));
            }
            continue;
        }
        let _ = writeln!(
            out,
            "{} and {}: {} would conflict (base {}, merged {})",
            radar_side(&p.a),
            radar_side(&p.b),
            crate::output::count(p.files.len(), "file"),
            p.base.get(..10).unwrap_or(&p.base),
            maos_core::utc(p.merged_at)
        );
        for f in &p.files {
            let lines: Vec<String> = f.hunks.iter().map(|h| h.line.to_string()).collect();
            let at = if lines.is_empty() {
                String::new()
            } else {
                format!(", at line {}", lines.join(", "))
            };
            let _ = writeln!(out, "  {}  {}{at}", f.path, f.kind);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn member(id: &str, live: bool, ago: f64) -> maos_proto::FleetMember {
        maos_proto::FleetMember {
            id: id.into(),
            machine: id.split('/').next().unwrap_or(id).into(),
            started_at: Utc::now(),
            seen_secs_ago: ago,
            live,
        }
    }

    #[test]
    fn the_fleet_lists_running_daemons_then_the_ten_last_seen_of_those_stopped() {
        let mut b = maos_proto::Backend {
            engine: "postgres".into(),
            daemon: Some("me/1".into()),
            ..Default::default()
        };
        b.members.push(member("me/1", true, 1.0));
        for i in 0..12 {
            b.members.push(member(
                &format!("ci-{i}/2"),
                false,
                3600.0 * f64::from(i + 1),
            ));
        }
        b.members.push(member("other/3", true, 20.0));
        let mut out = String::new();
        fleet_members(&mut out, &b);
        let lines: Vec<&str> = out.lines().collect();
        assert_eq!(lines[0], "fleet        14 daemons, 2 running", "{out}");
        assert_eq!(
            lines[1], "  me/1     this daemon, running (seen 1s ago)",
            "{out}"
        );
        assert_eq!(lines[2], "  other/3  running (seen 20s ago)", "{out}");
        assert!(
            lines[3].starts_with("  ci-0/2   not seen for 1h: stopped"),
            "{out}"
        );
        assert!(
            lines[12].starts_with("  ci-9/2   not seen for 10h"),
            "{out}"
        );
        assert_eq!(lines[13], "  and 2 more not running", "{out}");
        assert_eq!(lines.len(), 14, "{out}");

        let mut none = String::new();
        fleet_members(&mut none, &maos_proto::Backend::default());
        assert_eq!(none, "", "no fleet, no lines");
    }

    /// The fast path of `terminal_safe` is taken only when no string can need escaping: every
    /// character `term::safe` escapes, raw or in JSON's escapes, sends it the slow way.
    #[test]
    fn only_text_with_nothing_to_escape_skips_the_copy() {
        let json = |s: &str| serde_json::to_string(&serde_json::json!({"task": s})).unwrap();
        for plain in ["Build the parser", "src/a b/ü.rs", "a \\ back/slash", ""] {
            assert!(!may_need_escaping(&json(plain)), "{plain:?}");
        }
        for odd in [
            "\x1b[2J",
            "a\nb",
            "\t",
            "\r",
            "\x7f",
            "\u{9b}",
            "\u{202e}gnp.exe",
            "\u{2028}",
        ] {
            assert!(may_need_escaping(&json(odd)), "{odd:?}");
        }
        // The slow path is still right when the fast one is not taken.
        let safe = terminal_safe(&vec!["\x1b]0;t\x07".to_string()]).unwrap();
        assert_eq!(safe, vec!["^[]0;t^G".to_string()]);
    }
}
