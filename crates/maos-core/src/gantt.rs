//! A session's timeline as the dashboard draws it: a Gantt chart with one row per agent (when it
//! ran, was paused, waited for a lock), the locks it held as bars, its denials, conflicts,
//! timeouts and deadlocks as marks, the phases as bands and the deadlocks with their cycles.
//!
//! [`GanttBuilder`] folds the events in seq order, incrementally (a live page pays only for new
//! events); [`GanttBuilder::snapshot`] cuts a time window out of it and coalesces the lock bars
//! and marks that fall within one pixel of each other, so a row of 100,000 events never reaches
//! the page as 100,000 elements. Pure: the caller passes `now`. Times are integer milliseconds
//! since the Unix epoch (fields ending `_ms`), so the browser parses no dates; `None` fields are
//! left out of the JSON (an absent `to_ms` is an item still open).

use std::collections::HashMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::ids::short;
use crate::record::EventRecord;
use crate::{AgentId, Ts};

/// What part of the chart to draw, and how wide.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Window {
    /// Start of the window; `None`: the first folded event's time.
    pub from_ms: Option<i64>,
    /// End of the window; `None`: `now`.
    pub to_ms: Option<i64>,
    /// Pixels the window is drawn on: items closer than `(to - from) / width_px` ms merge.
    pub width_px: u32,
}

/// The widest chart drawn, in pixels.
pub const MAX_WIDTH: u32 = 10_000;
/// The latest time a window may name: the end of the year 9999, in ms since 1970.
const LAST_MS: i64 = 253_402_300_799_000;

impl Window {
    /// A window as asked for, checked: times within 1970..9999, `to` after `from`, a width of
    /// 1 to [`MAX_WIDTH`] pixels. The error is one sentence naming the field.
    pub fn checked(
        from_ms: Option<i64>,
        to_ms: Option<i64>,
        width_px: u32,
    ) -> Result<Self, String> {
        for (name, v) in [("from", from_ms), ("to", to_ms)] {
            if let Some(v) = v
                && !(0..=LAST_MS).contains(&v)
            {
                return Err(format!(
                    "{name}: {v} is not a time in milliseconds since 1970 (up to the year 9999)"
                ));
            }
        }
        if let (Some(f), Some(t)) = (from_ms, to_ms)
            && t <= f
        {
            return Err(format!(
                "to ({t}) is not after from ({f}): the window holds nothing"
            ));
        }
        if !(1..=MAX_WIDTH).contains(&width_px) {
            return Err(format!(
                "width: {width_px} is not a number of pixels from 1 to {MAX_WIDTH}"
            ));
        }
        Ok(Window {
            from_ms,
            to_ms,
            width_px,
        })
    }

    /// The whole session (first event .. now) drawn `width_px` wide.
    pub fn all(width_px: u32) -> Self {
        Window {
            from_ms: None,
            to_ms: None,
            width_px,
        }
    }
}

/// The chart: its window, rows in the order agents first appeared, phases and deadlocks.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Gantt {
    pub from_ms: i64,
    pub to_ms: i64,
    pub now_ms: i64,
    pub rows: Vec<Row>,
    pub phases: Vec<Band>,
    pub deadlocks: Vec<Deadlock>,
    /// Events folded so far (all of them, not only the window's).
    pub folded: u64,
}

/// One agent's row.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Row {
    pub agent: AgentId,
    /// Run / paused / waiting, sorted, never overlapping; only the last may be open.
    pub spans: Vec<Span>,
    pub locks: Vec<LockBar>,
    pub marks: Vec<Mark>,
    /// Lock bars folded into others by coalescing (the sum of `count - 1`).
    pub merged_locks: u32,
    /// Marks folded into others by coalescing.
    pub merged_marks: u32,
}

/// What an agent was doing during a span.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SpanKind {
    Run,
    Paused,
    Waiting,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Span {
    pub kind: SpanKind,
    pub from_ms: i64,
    /// `None`: still open.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// The path waited for (waiting spans).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
}

/// A held lock (or, with `count > 1`, several merged: path, mode, token and end are the first's).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct LockBar {
    pub path: String,
    pub mode: String,
    pub token: u64,
    pub from_ms: i64,
    /// `None`: still held.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// "released", "expired", "upgraded" or "ended".
    #[serde(skip_serializing_if = "Option::is_none")]
    pub end: Option<String>,
    pub count: u32,
}

/// What happened at a mark.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MarkKind {
    Denied,
    Conflict,
    Timeout,
    Deadlock,
}

/// A moment on a row (or, with `count > 1`, several of one kind merged: the first's fields).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Mark {
    pub kind: MarkKind,
    pub at_ms: i64,
    pub seq: u64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// One line for people.
    pub text: String,
    pub count: u32,
}

/// A phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Band {
    pub name: String,
    pub from_ms: i64,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub to_ms: Option<i64>,
    /// "completed", "failed" or "skipped"; `None` while the phase runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub outcome: Option<String>,
}

/// A detected deadlock: who lost, and the wait-for cycle.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Deadlock {
    pub seq: u64,
    pub at_ms: i64,
    pub victim: AgentId,
    pub cycle: Vec<Edge>,
}

/// `waiter` waits for `holder` on `path`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Edge {
    pub waiter: AgentId,
    pub holder: AgentId,
    pub path: String,
}

/// A row as folded so far.
#[derive(Clone, Debug, Serialize, Deserialize)]
struct RowState {
    agent: AgentId,
    spans: Vec<Span>,
    locks: Vec<LockBar>,
    marks: Vec<Mark>,
    /// The current paused span was opened by a session pause (a session resume ends it).
    by_session: bool,
    /// Ended (completed, failed, ...): later events open no implicit run span.
    ended: bool,
    /// The latest time a span of this row starts or ends at: spans stay sorted even if the
    /// events' clocks are not.
    cursor: i64,
}

impl RowState {
    fn new(agent: AgentId) -> Self {
        RowState {
            agent,
            spans: Vec::new(),
            locks: Vec::new(),
            marks: Vec::new(),
            by_session: false,
            ended: false,
            cursor: i64::MIN,
        }
    }

    /// The open span, if any.
    fn open(&self) -> Option<&Span> {
        self.spans.last().filter(|s| s.to_ms.is_none())
    }

    fn open_kind(&self) -> Option<SpanKind> {
        self.open().map(|s| s.kind)
    }

    fn waiting_on(&self, path: &str) -> bool {
        self.open()
            .is_some_and(|s| s.kind == SpanKind::Waiting && s.path.as_deref() == Some(path))
    }

    /// Close the open span (if any) at `t`; returns the time used.
    fn close(&mut self, t: i64) -> i64 {
        let t = t.max(self.cursor);
        self.cursor = t;
        if let Some(s) = self.spans.last_mut().filter(|s| s.to_ms.is_none()) {
            s.to_ms = Some(t);
        }
        self.by_session = false;
        t
    }

    /// Close the open span and open one of `kind` at `t`. An open span that began at that very
    /// moment is replaced rather than left as a zero-length span.
    fn switch(&mut self, kind: SpanKind, path: Option<String>, t: i64) {
        let t = t.max(self.cursor);
        if self.open().is_some_and(|s| s.from_ms == t) {
            self.spans.pop();
        }
        let t = self.close(t);
        self.spans.push(Span {
            kind,
            from_ms: t,
            to_ms: None,
            path,
        });
    }

    fn mark(&mut self, kind: MarkKind, e: &EventRecord, path: Option<String>, text: String) {
        self.marks.push(Mark {
            kind,
            at_ms: ms(e.ts),
            seq: e.seq,
            path,
            text,
            count: 1,
        });
    }
}

/// Folds a session's events into the chart's model, incrementally.
///
/// It serialises (serde) so that a daemon can keep a fold across its restarts; a fold read
/// back is to be used only if it was written by the same fold ([`FOLD_CODE`]) and the events
/// it folded are still the same ([`GanttBuilder::last_event`]).
#[derive(Clone, Debug, Default, Serialize, Deserialize)]
pub struct GanttBuilder {
    rows: Vec<RowState>,
    /// Each row's position by agent.
    index: HashMap<AgentId, usize>,
    /// Open lock bars by token: (row, bar).
    open_locks: HashMap<u64, (usize, usize)>,
    phases: Vec<Band>,
    deadlocks: Vec<Deadlock>,
    last_seq: Option<u64>,
    /// The time of the last folded event, in µs (with its seq, what tells the same event).
    last_ts_us: i64,
    first_ms: Option<i64>,
    folded: u64,
}

/// What a fold's code is: a saved fold is used again only by the same code (any change to
/// this file may change what a fold holds or means). FNV-1a of this file's source.
pub const FOLD_CODE: u64 = crate::fnv::fnv1a64(include_bytes!("gantt.rs"));

fn ms(t: Ts) -> i64 {
    t.timestamp_millis()
}

fn text(data: &Value, key: &str) -> Option<String> {
    data.get(key)
        .and_then(Value::as_str)
        .filter(|s| !s.is_empty())
        .map(str::to_owned)
}

fn agent(v: &Value) -> Option<AgentId> {
    v.as_str().and_then(|s| AgentId::parse(s).ok())
}

/// Event types after which the agent has stopped: every open span closes.
const TERMINAL: &[&str] = &[
    "agent_interrupted",
    "agent_completed",
    "agent_failed",
    "agent_cancelled",
    "agent_ended",
];

/// Every event type the fold draws something for. A caller that reads the timeline for the
/// chart can ask for these alone: the others only count in `folded`, or open the run span of
/// an agent that was never started (every agent maos knows of is, with `agent_started`).
pub const TYPES: &[&str] = &[
    "agent_registered",
    "agent_started",
    "agent_resumed",
    "agent_paused",
    "agent_interrupted",
    "agent_completed",
    "agent_failed",
    "agent_cancelled",
    "agent_ended",
    "session_paused",
    "session_resumed",
    "lock_acquired",
    "lock_released",
    "lock_expired",
    "lock_wait",
    "lock_wait_cancelled",
    "lock_timeout",
    "tool_denied",
    "conflict_detected",
    "deadlock_detected",
    "phase_started",
    "phase_completed",
    "phase_failed",
    "phase_skipped",
];

/// Agent events that are no sign of the agent working (they open no implicit run span).
const PASSIVE: &[&str] = &["agent_registered", "lock_expired"];

impl GanttBuilder {
    pub fn new() -> Self {
        Self::default()
    }

    /// The seq of the last folded event (0 before any).
    pub fn last_seq(&self) -> u64 {
        self.last_seq.unwrap_or(0)
    }

    /// How many events were folded.
    pub fn folded(&self) -> u64 {
        self.folded
    }

    /// The last folded event's seq and time (µs since 1970): a fold read back is good only
    /// while the timeline still holds that very event.
    pub fn last_event(&self) -> Option<(u64, i64)> {
        self.last_seq.map(|seq| (seq, self.last_ts_us))
    }

    /// Fold one event. Events at or before the last folded seq are ignored (a replay is
    /// harmless); unknown types only count; bad data is skipped.
    pub fn fold(&mut self, e: &EventRecord) {
        if self.last_seq.is_some_and(|last| e.seq <= last) {
            return;
        }
        self.last_seq = Some(e.seq);
        self.last_ts_us = e.ts.timestamp_micros();
        self.folded += 1;
        let t = ms(e.ts);
        self.first_ms.get_or_insert(t);
        let row = e.agent_id.clone().map(|a| self.row(a));
        let kind = e.kind.as_str();
        let d = &e.data;
        match kind {
            "agent_registered" => {}
            "agent_started" | "agent_resumed" => {
                if let Some(r) = row {
                    let r = &mut self.rows[r];
                    r.ended = false;
                    if r.open_kind() != Some(SpanKind::Run) {
                        r.switch(SpanKind::Run, None, t);
                    }
                }
            }
            "agent_paused" => {
                if let Some(r) = row {
                    let r = &mut self.rows[r];
                    if !r.ended && r.open_kind() != Some(SpanKind::Paused) {
                        r.switch(SpanKind::Paused, None, t);
                    }
                }
            }
            k if TERMINAL.contains(&k) => {
                if let Some(r) = row {
                    let r = &mut self.rows[r];
                    r.close(t);
                    r.ended = true;
                }
            }
            "session_paused" => {
                let listed = d.get("in_progress").and_then(Value::as_array);
                for a in listed.into_iter().flatten().filter_map(agent) {
                    if let Some(&r) = self.index.get(&a) {
                        let r = &mut self.rows[r];
                        if r.open_kind() == Some(SpanKind::Run) {
                            r.switch(SpanKind::Paused, None, t);
                            r.by_session = true;
                        }
                    }
                }
            }
            "session_resumed" => {
                for r in &mut self.rows {
                    if r.by_session && r.open_kind() == Some(SpanKind::Paused) {
                        r.switch(SpanKind::Run, None, t);
                    }
                }
            }
            "lock_acquired" => self.acquired(row, d, t),
            "lock_released" | "lock_expired" => {
                let token = d.get("token").and_then(Value::as_u64);
                if let Some((r, b)) = token.and_then(|tok| self.open_locks.remove(&tok)) {
                    let end = if kind == "lock_expired" {
                        "expired"
                    } else if d.get("reason").and_then(Value::as_str) == Some("upgraded to write") {
                        "upgraded"
                    } else {
                        "released"
                    };
                    let bar = &mut self.rows[r].locks[b];
                    bar.to_ms = Some(t.max(bar.from_ms));
                    bar.end = Some(end.to_owned());
                }
            }
            "lock_wait" => {
                if let (Some(r), Some(path)) = (row, text(d, "path"))
                    && !self.rows[r].ended
                {
                    self.rows[r].switch(SpanKind::Waiting, Some(path), t);
                }
            }
            "lock_wait_cancelled" => {
                if let (Some(r), Some(path)) = (row, text(d, "path")) {
                    let r = &mut self.rows[r];
                    if r.waiting_on(&path) {
                        r.switch(SpanKind::Run, None, t);
                    }
                }
            }
            "lock_timeout" => {
                if let (Some(r), Some(path)) = (row, text(d, "path")) {
                    let r = &mut self.rows[r];
                    if r.waiting_on(&path) {
                        r.switch(SpanKind::Run, None, t);
                    }
                    let line = match text(d, "mode") {
                        Some(mode) => format!("timed out waiting for {mode} on {path}"),
                        None => format!("timed out waiting for {path}"),
                    };
                    r.mark(MarkKind::Timeout, e, Some(path), line);
                }
            }
            "tool_denied" => {
                if let Some(r) = row {
                    let path = d
                        .get("paths")
                        .and_then(Value::as_array)
                        .and_then(|p| p.first())
                        .and_then(Value::as_str)
                        .map(str::to_owned);
                    let line = text(d, "reason")
                        .or_else(|| text(d, "why"))
                        .or_else(|| text(d, "tool").map(|t| format!("{t} denied")))
                        .unwrap_or_else(|| "denied".to_owned());
                    self.rows[r].mark(MarkKind::Denied, e, path, line);
                }
            }
            "conflict_detected" => {
                if let (Some(r), Some(path)) = (row, text(d, "path")) {
                    let holders = d
                        .get("holders")
                        .and_then(Value::as_array)
                        .into_iter()
                        .flatten()
                        .filter_map(Value::as_str)
                        .map(short)
                        .collect::<Vec<_>>()
                        .join(", ");
                    let mode = text(d, "mode").unwrap_or_else(|| "lock".to_owned());
                    let line = if holders.is_empty() {
                        format!("{mode} on {path}: held")
                    } else {
                        format!("{mode} on {path}: held by {holders}")
                    };
                    self.rows[r].mark(MarkKind::Conflict, e, Some(path), line);
                }
            }
            "deadlock_detected" => self.deadlock(e, t),
            "phase_started" => {
                // A phase started again while open (a replayed start) keeps its band.
                if let Some(name) = text(d, "phase")
                    && !self
                        .phases
                        .iter()
                        .any(|b| b.name == name && b.to_ms.is_none())
                {
                    self.phases.push(Band {
                        name,
                        from_ms: t,
                        to_ms: None,
                        outcome: None,
                    });
                }
            }
            "phase_completed" | "phase_failed" | "phase_skipped" => {
                if let Some(name) = text(d, "phase") {
                    let outcome = kind.trim_start_matches("phase_").to_owned();
                    let open = self
                        .phases
                        .iter_mut()
                        .rev()
                        .find(|b| b.name == name && b.to_ms.is_none());
                    match open {
                        Some(b) => {
                            b.to_ms = Some(t.max(b.from_ms));
                            b.outcome = Some(outcome);
                        }
                        // Never started (a skipped phase): a zero-length band.
                        None => self.phases.push(Band {
                            name,
                            from_ms: t,
                            to_ms: Some(t),
                            outcome: Some(outcome),
                        }),
                    }
                }
            }
            _ => {}
        }
        // An agent seen working without an `agent_started` (a hook-driven window) runs.
        if let Some(r) = row {
            let r = &mut self.rows[r];
            if !r.ended && r.open().is_none() && !PASSIVE.contains(&kind) {
                r.switch(SpanKind::Run, None, t);
            }
        }
    }

    /// The row of `agent`, made at its first appearance.
    fn row(&mut self, agent: AgentId) -> usize {
        if let Some(&r) = self.index.get(&agent) {
            return r;
        }
        self.rows.push(RowState::new(agent.clone()));
        self.index.insert(agent, self.rows.len() - 1);
        self.rows.len() - 1
    }

    fn acquired(&mut self, row: Option<usize>, d: &Value, t: i64) {
        let (Some(r), Some(path), Some(mode), Some(token)) = (
            row,
            text(d, "path"),
            text(d, "mode"),
            d.get("token").and_then(Value::as_u64),
        ) else {
            return;
        };
        let rs = &mut self.rows[r];
        if rs.waiting_on(&path) {
            rs.switch(SpanKind::Run, None, t);
        }
        if self.open_locks.contains_key(&token) {
            return; // the same grant again (a renewal): the bar is already open
        }
        rs.locks.push(LockBar {
            path,
            mode,
            token,
            from_ms: t,
            to_ms: None,
            end: None,
            count: 1,
        });
        self.open_locks.insert(token, (r, rs.locks.len() - 1));
    }

    fn deadlock(&mut self, e: &EventRecord, t: i64) {
        let d = &e.data;
        let Some(victim) = d.get("victim").and_then(agent) else {
            return;
        };
        let Some(edges) = d.get("cycle").and_then(Value::as_array) else {
            return;
        };
        let mut cycle = Vec::with_capacity(edges.len());
        for edge in edges {
            let (Some(waiter), Some(holder), Some(path)) = (
                edge.get("waiter").and_then(agent),
                edge.get("holder").and_then(agent),
                text(edge, "path"),
            ) else {
                return;
            };
            cycle.push(Edge {
                waiter,
                holder,
                path,
            });
        }
        let lost_on = cycle
            .iter()
            .find(|edge| edge.waiter == victim)
            .map(|edge| edge.path.clone());
        let line = format!(
            "deadlock: {}; {} loses",
            cycle
                .iter()
                .map(|edge| format!(
                    "{} waits for {} on {}",
                    edge.waiter.short(),
                    edge.holder.short(),
                    edge.path
                ))
                .collect::<Vec<_>>()
                .join(", "),
            victim.short()
        );
        let r = self.row(victim.clone());
        let rs = &mut self.rows[r];
        if rs.open_kind() == Some(SpanKind::Waiting) {
            rs.switch(SpanKind::Run, None, t);
        }
        rs.mark(MarkKind::Deadlock, e, lost_on, line);
        self.deadlocks.push(Deadlock {
            seq: e.seq,
            at_ms: t,
            victim,
            cycle,
        });
    }

    /// The chart of `window` at `now`: the items overlapping it, lock bars and marks (per kind)
    /// within one pixel of each other merged. Does not consume the builder.
    pub fn snapshot(&self, now: Ts, window: Window) -> Gantt {
        let now_ms = ms(now);
        let from = window.from_ms.or(self.first_ms).unwrap_or(now_ms);
        let to = window.to_ms.unwrap_or(now_ms);
        let (from, to) = (from.min(to), from.max(to));
        // A pixel, rounded up: starts a pixel apart fit `width_px + 1` times in the window.
        let (span, width) = (to.saturating_sub(from), i64::from(window.width_px.max(1)));
        let px = (span / width + i64::from(span % width != 0)).max(1);
        let overlaps = |a: i64, b: Option<i64>| a <= to && b.is_none_or(|b| b >= from);
        let rows = self
            .rows
            .iter()
            .map(|r| {
                let spans = r
                    .spans
                    .iter()
                    .filter(|s| overlaps(s.from_ms, s.to_ms))
                    .cloned()
                    .collect();
                let (locks, merged_locks) = coalesce_locks(
                    r.locks.iter().filter(|b| overlaps(b.from_ms, b.to_ms)),
                    from,
                    px,
                );
                let (marks, merged_marks) = coalesce_marks(
                    r.marks.iter().filter(|m| m.at_ms >= from && m.at_ms <= to),
                    px,
                );
                Row {
                    agent: r.agent.clone(),
                    spans,
                    locks,
                    marks,
                    merged_locks,
                    merged_marks,
                }
            })
            .collect();
        Gantt {
            from_ms: from,
            to_ms: to,
            now_ms,
            rows,
            phases: self
                .phases
                .iter()
                .filter(|b| overlaps(b.from_ms, b.to_ms))
                .cloned()
                .collect(),
            deadlocks: self
                .deadlocks
                .iter()
                .filter(|d| d.at_ms >= from && d.at_ms <= to)
                .cloned()
                .collect(),
            folded: self.folded,
        }
    }
}

/// Merge bars that start less than `px` ms after the previous start of their group (bars begun
/// before the window count as starting at its start, `from`): a group spans min(from) ..
/// max(to) (open if any is), with the first's path, mode, token and end. A long-held lock does
/// not swallow the bars begun long after it. Group starts lie at least `px` apart, so a window
/// `width_px` pixels wide holds at most `width_px + 1` groups.
fn coalesce_locks<'a>(
    bars: impl Iterator<Item = &'a LockBar>,
    from: i64,
    px: i64,
) -> (Vec<LockBar>, u32) {
    let mut sorted: Vec<&LockBar> = bars.collect();
    sorted.sort_by_key(|b| b.from_ms);
    let mut out: Vec<LockBar> = Vec::new();
    let mut last_start = i64::MIN;
    let mut merged = 0u32;
    for b in sorted {
        let start = b.from_ms.max(from);
        match out.last_mut() {
            Some(g) if start < last_start.saturating_add(px) => {
                g.to_ms = g.to_ms.zip(b.to_ms).map(|(x, y)| x.max(y));
                g.count = g.count.saturating_add(b.count);
                merged = merged.saturating_add(b.count);
            }
            _ => out.push(b.clone()),
        }
        last_start = start;
    }
    (out, merged)
}

/// Merge marks of one kind that lie less than `px` ms after the previous one of their group
/// (the first's fields are kept), then list every kind's marks by time.
fn coalesce_marks<'a>(marks: impl Iterator<Item = &'a Mark>, px: i64) -> (Vec<Mark>, u32) {
    let mut sorted: Vec<&Mark> = marks.collect();
    sorted.sort_by_key(|m| m.at_ms);
    let mut out: Vec<Mark> = Vec::new();
    // Per kind: (index of its current group in `out`, the group's latest time).
    let mut last: Vec<(MarkKind, usize, i64)> = Vec::new();
    let mut merged = 0u32;
    for m in sorted {
        let group = last.iter_mut().find(|(k, _, _)| *k == m.kind);
        match group {
            Some((_, i, at)) if m.at_ms < at.saturating_add(px) => {
                out[*i].count = out[*i].count.saturating_add(m.count);
                merged = merged.saturating_add(m.count);
                *at = m.at_ms;
            }
            Some(g) => {
                out.push(m.clone());
                *g = (m.kind, out.len() - 1, m.at_ms);
            }
            None => {
                out.push(m.clone());
                last.push((m.kind, out.len() - 1, m.at_ms));
            }
        }
    }
    (out, merged)
}

#[cfg(test)]
mod tests;
