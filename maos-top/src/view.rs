//! How `maos top` looks: a header (project, daemon, counts, or that the daemon is gone), the
//! table of sessions and their agent trees with what each does NOW, the selected one's locks
//! and progress, the recent events with denials and deadlocks in red, and the keys. Laid out
//! for 80×24 and up. Times are UTC, and say so.

use chrono::Utc;
use maos_client::output::{age, agent_state_word, clip, doing_now, event_data, is_held, span};
use maos_core::ids::short;
use maos_core::{AgentState, SessionState};
use maos_proto::{EventRecord, PsAgent, PsSession};
use ratatui::Frame;
use ratatui::layout::{Constraint, Layout, Rect};
use ratatui::style::{Color, Modifier, Style, Stylize};
use ratatui::text::{Line, Span};
use ratatui::widgets::{Block, Cell, Clear, Paragraph, Row as TRow, Table, Wrap};

use crate::app::App;
use crate::model::{self, Row, Subject};

const KEYS: &str = "↑↓ select p pause r resume c cancel / filter e events a all ? help q quit";

pub fn draw(f: &mut Frame, app: &mut App) {
    let [head, table, detail, events, foot] = Layout::vertical([
        Constraint::Length(1),
        Constraint::Min(5),
        Constraint::Length(3),
        Constraint::Length(7),
        Constraint::Length(1),
    ])
    .areas(f.area());
    header(f, head, app);
    if let Some(v) = &app.events {
        events_view(f, table.union(detail).union(events), app, v);
    } else {
        sessions(f, table, app);
        selected(f, detail, app);
        recent(f, events, app);
    }
    footer(f, foot, app);
    if let Some(a) = &app.confirm {
        let text = format!("{}?  y: yes   any other key: no", a.describe(app));
        popup(f, "Confirm", &text, Color::Yellow);
    } else if app.help {
        popup(f, "Keys", HELP, Color::Cyan);
    }
}

const HELP: &str = "↑/↓ j/k PgUp/PgDn Home/End: select a session or agent\n\
p: pause it   r: resume it   c: cancel it (each asks first)\n\
/: filter (words in id, role, CLI, state, task); Esc clears it\n\
e or Enter: its events (Esc to go back)\n\
a: finished sessions too   q or Ctrl-C: quit\n\
NOW: the lock it waits for, else its task list item in progress and last tool call, else its task. Times are UTC.";

fn header(f: &mut Frame, area: Rect, app: &App) {
    let clock = Utc::now().format("%H:%M:%S UTC").to_string();
    let line = match app.lost() {
        Some((since, why)) => Line::from(vec![
            Span::styled(
                format!(
                    " daemon gone since {} ({}); reconnecting ",
                    maos_core::utc(*since),
                    clip(&maos_core::term::safe(why), 40)
                ),
                Style::new().fg(Color::White).bg(Color::Red).bold(),
            ),
            Span::raw(format!(" {clock}")),
        ]),
        None => {
            let where_ = match app.projects.as_slice() {
                [one] => maos_core::term::safe(&one.root).into_owned(),
                many => format!("{} projects", many.len()),
            };
            let sessions: Vec<&PsSession> = app.projects.iter().flat_map(|p| &p.sessions).collect();
            let running = sessions
                .iter()
                .flat_map(|s| &s.agents)
                .filter(|a| a.state == AgentState::Running && !a.paused)
                .count();
            let pid = app.pid.map(|p| format!("  maosd {p}")).unwrap_or_default();
            Line::from(vec![
                Span::styled(" maos top ", Style::new().reversed().bold()),
                Span::raw(format!(
                    " {clock}  {where_}  {}, {running} running{pid}",
                    maos_client::output::count(sessions.len(), "session"),
                )),
            ])
        }
    };
    f.render_widget(Paragraph::new(line), area);
}

/// The CLI and who it is: `claude: Build the parser` for a window, `claude Explore` for a
/// subagent, the role for the others.
fn who(a: &PsAgent) -> String {
    let named = maos_client::output::who(a);
    match a.cli {
        Some(c) if named != a.role => format!("{c}: {named}"),
        Some(c) if c.as_str() != a.role => format!("{c} {named}"),
        _ => named,
    }
}

fn agent_style(a: &PsAgent, session: SessionState) -> Style {
    match a.state {
        _ if !a.violations.is_empty() => Style::new().fg(Color::Red).bold(),
        _ if is_held(a, session) => Style::new().fg(Color::Yellow),
        _ if !a.waits.is_empty() => Style::new().fg(Color::Yellow),
        AgentState::Running => Style::new().fg(Color::Green),
        AgentState::Failed => Style::new().fg(Color::Red),
        AgentState::Pending | AgentState::Resumable => Style::new().fg(Color::Yellow),
        _ => Style::new().fg(Color::DarkGray),
    }
}

fn session_style(s: &PsSession) -> Style {
    let base = Style::new().bold();
    match s.state {
        SessionState::Running => base.fg(Color::Green),
        SessionState::Paused | SessionState::Created => base.fg(Color::Yellow),
        SessionState::Failed => base.fg(Color::Red),
        _ => base.fg(Color::DarkGray),
    }
}

/// "40% phase 2/3 ETA 5m · Build the parser", "STALLED", "done".
fn session_now(s: &PsSession) -> String {
    let mut parts = Vec::new();
    if let Some(p) = &s.progress {
        parts.push(format!("{:.0}%", p.percent));
        if let (k, n) = s.phase
            && n > 0
        {
            parts.push(format!("phase {k}/{n}"));
        }
        if p.stalled {
            parts.push("STALLED".into());
        }
    }
    let done = s
        .agents
        .iter()
        .filter(|a| maos_client::output::is_done(a.state))
        .count();
    parts.push(format!("{done}/{} done", s.agents.len()));
    format!(
        "{} · {}",
        parts.join(" "),
        s.objective.lines().next().unwrap_or("")
    )
}

fn sessions(f: &mut Frame, area: Rect, app: &mut App) {
    let now = Utc::now();
    let title = if app.filter.is_empty() {
        " Sessions ".to_string()
    } else {
        format!(" Sessions matching \"{}\" (Esc clears) ", app.filter)
    };
    let block = Block::bordered().title(title);
    if app.rows.is_empty() {
        let text = if app.filter.is_empty() {
            "no live sessions in this project (a: finished ones too)"
        } else {
            "nothing matches the filter (Esc clears it)"
        };
        f.render_widget(Paragraph::new(text).block(block), area);
        return;
    }
    let rows: Vec<TRow> = app
        .rows
        .iter()
        .map(|r| match *r {
            Row::Project { project } => TRow::new(vec![
                Cell::from(Span::styled("project", Style::new().bold())),
                Cell::from(""),
                Cell::from(""),
                Cell::from(""),
                Cell::from(Span::styled(
                    maos_core::term::safe(&app.projects[project].root).into_owned(),
                    Style::new().bold().underlined(),
                )),
            ]),
            Row::Session { project, session } => {
                let s = &app.projects[project].sessions[session];
                let mut state = s.state.to_string();
                if s.active {
                    state.push('*');
                }
                TRow::new(vec![
                    Cell::from(Span::styled(
                        short(s.id.as_str()).to_string(),
                        Style::new().bold(),
                    )),
                    Cell::from(Span::styled(state, session_style(s))),
                    Cell::from(s.strategy.as_str()),
                    Cell::from(age(&s.created_at)),
                    Cell::from(session_now(s)),
                ])
            }
            Row::Agent {
                project,
                session,
                agent,
                depth,
            } => {
                let s = &app.projects[project].sessions[session];
                let a = &s.agents[agent];
                let tree = format!("{}└ {}", "  ".repeat(depth), short(a.id.as_str()));
                let who = clip(&who(a), 14);
                let mut now_style = Style::new();
                // A lock violation (issue 31 §2), as `maos ps` says it, in red.
                let now_text = match a.violations.as_slice() {
                    [] => doing_now(a, now),
                    [v] => maos_client::output::violation_line(a, v),
                    [v, more @ ..] => format!(
                        "{} (+{} more)",
                        maos_client::output::violation_line(a, v),
                        more.len()
                    ),
                };
                if !a.violations.is_empty() {
                    now_style = now_style.fg(Color::Red).bold();
                } else if !a.waits.is_empty() {
                    now_style = now_style.fg(Color::Yellow);
                } else if a.state.is_terminal() {
                    now_style = now_style.fg(Color::DarkGray);
                }
                TRow::new(vec![
                    Cell::from(tree),
                    Cell::from(Span::styled(
                        agent_state_word(a, s.state),
                        agent_style(a, s.state),
                    )),
                    Cell::from(who),
                    Cell::from(span(a.started_at, a.ended_at)),
                    Cell::from(Span::styled(now_text, now_style)),
                ])
            }
            // Drawn across the row after the table (see `radar_lines`).
            Row::Radar { .. } => TRow::new(vec![""; 5]),
        })
        .collect();
    let widths = [
        Constraint::Length(18),
        Constraint::Length(9),
        Constraint::Length(14),
        Constraint::Length(4),
        Constraint::Fill(1),
    ];
    let table = Table::new(rows, widths)
        .header(
            TRow::new(vec!["ID", "STATE", "WHO", "TIME", "NOW"])
                .style(Style::new().add_modifier(Modifier::BOLD | Modifier::DIM)),
        )
        .block(block)
        .row_highlight_style(Style::new().reversed())
        .highlight_symbol("▶");
    f.render_stateful_widget(table, area, &mut app.table);
    radar_lines(f, Block::bordered().inner(area), app);
}

/// The line under each agent at risk from the conflict radar, as `maos ps` says it, across the
/// table's width (a cell would cut it to the NOW column): the first file, and how many more.
fn radar_lines(f: &mut Frame, inner: Rect, app: &App) {
    // Below the header, right of the selection's symbol.
    let marker = u16::from(app.table.selected().is_some());
    let first = app.table.offset();
    let visible = usize::from(inner.height.saturating_sub(1));
    for (i, r) in app.rows.iter().enumerate().skip(first).take(visible) {
        let Row::Radar {
            project,
            session,
            agent,
        } = *r
        else {
            continue;
        };
        let a = &app.projects[project].sessions[session].agents[agent];
        let Some((r, more)) = a.radar.split_first() else {
            continue;
        };
        let mut text = format!("  {}", maos_client::output::radar_line(r));
        if !more.is_empty() {
            text.push_str(&format!(" (+{} more)", more.len()));
        }
        let y = inner.y + 1 + (i - first) as u16;
        let at = Rect::new(inner.x + marker, y, inner.width.saturating_sub(marker), 1);
        let text = clip(&maos_core::term::safe(&text), usize::from(at.width));
        f.render_widget(
            Paragraph::new(Span::styled(text, Style::new().fg(Color::Yellow))),
            at,
        );
    }
}

/// Two lines on the selected session or agent: its locks, waits and progress.
fn selected(f: &mut Frame, area: Rect, app: &App) {
    let lines: Vec<Line> = match app.selection() {
        None => vec![Line::from("select a session or an agent (↑↓)").dim()],
        Some(Subject::Session { project, id }) => {
            let Some(s) = app.projects[*project]
                .sessions
                .iter()
                .find(|s| s.id.as_str() == id)
            else {
                return;
            };
            let held: usize = s.agents.iter().map(|a| a.locks.len()).sum();
            let waits: usize = s.agents.iter().map(|a| a.waits.len()).sum();
            let eta = match app.status.as_ref().filter(|v| v.session.id == s.id) {
                Some(v) => match (v.progress.eta, &v.progress.current_phase) {
                    (Some(t), _) => format!(
                        "ETA {} (in {})",
                        maos_core::utc(t),
                        maos_client::output::human_secs((t - Utc::now()).as_seconds_f64())
                    ),
                    (None, Some(_)) => "no ETA yet (no phase has completed)".into(),
                    (None, None) => "no ETA".into(),
                },
                None => String::new(),
            };
            vec![
                Line::from(format!(
                    "{} {} ({}): {}",
                    short(s.id.as_str()),
                    s.state,
                    s.strategy,
                    s.objective.lines().next().unwrap_or("")
                )),
                Line::from(format!(
                    "{}, {} held, {} waited for; {eta}",
                    maos_client::output::count(s.agents.len(), "agent"),
                    maos_client::output::count(held, "lock"),
                    maos_client::output::count(waits, "lock"),
                )),
            ]
        }
        Some(Subject::Agent { project, id, .. }) => {
            let Some(a) = app.projects[*project]
                .sessions
                .iter()
                .flat_map(|s| &s.agents)
                .find(|a| a.id.as_str() == id)
            else {
                return;
            };
            let kind = match (a.cli, &a.parent) {
                (Some(c), None) => format!(", a {} window", c.label()),
                (Some(c), Some(_)) => format!(", a {} subagent", c.label()),
                (None, _) => String::new(),
            };
            let holds: Vec<String> = a
                .locks
                .iter()
                .map(|l| format!("{} ({}, token {})", l.path, l.mode, l.token))
                .collect();
            let waits: Vec<String> = a
                .waits
                .iter()
                .map(|w| format!("{} ({}, {})", w.path, w.mode, age(&w.since)))
                .collect();
            let mut locks = if holds.is_empty() {
                "holds no lock".to_string()
            } else {
                format!("holds {}", holds.join(", "))
            };
            if !waits.is_empty() {
                locks.push_str(&format!("; waits for {}", waits.join(", ")));
            }
            // In a fleet: the machine whose daemon it was registered through.
            let on = a
                .machine
                .as_deref()
                .map(|m| format!(" on {m}"))
                .unwrap_or_default();
            vec![
                Line::from(format!(
                    "{} {}{kind}{on}: {}",
                    short(a.id.as_str()),
                    a.role,
                    a.task.lines().next().unwrap_or("")
                )),
                Line::from(locks),
            ]
        }
    };
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().borders(ratatui::widgets::Borders::TOP)),
        area,
    );
}

/// An event as one line: "01:02:03 tool_denied agt_1a2b3c4d path=src/a.rs ...".
fn event_line(e: &EventRecord) -> Line<'static> {
    let style = if model::alarming(&e.kind) {
        Style::new().fg(Color::Red).bold()
    } else {
        Style::new()
    };
    Line::from(vec![
        Span::raw(format!("{} ", e.ts.format("%H:%M:%S"))),
        Span::styled(format!("{:<18} ", e.kind), style),
        Span::raw(format!(
            "{} ",
            e.agent_id.as_ref().map_or("-", |a| short(a.as_str()))
        ))
        .dim(),
        Span::raw(event_data(e)),
    ])
}

fn recent(f: &mut Frame, area: Rect, app: &App) {
    let fit = area.height.saturating_sub(2) as usize;
    let mut all: Vec<&EventRecord> = app.projects.iter().flat_map(|p| &p.recent).collect();
    all.sort_by_key(|e| e.ts);
    let lines: Vec<Line> = all[all.len().saturating_sub(fit)..]
        .iter()
        .map(|e| event_line(e))
        .collect();
    let block = Block::bordered().title(" Events (UTC; denials, deadlocks and failures in red) ");
    f.render_widget(Paragraph::new(lines).block(block), area);
}

fn events_view(f: &mut Frame, area: Rect, app: &App, v: &crate::app::EventsView) {
    let fit = area.height.saturating_sub(2) as usize;
    let end = v.events.len().saturating_sub(v.up);
    let lines: Vec<Line> = v.events[end.saturating_sub(fit)..end]
        .iter()
        .map(event_line)
        .collect();
    let title = format!(
        " Events of {} (UTC; {}; Esc back) ",
        app.name_of(&v.subject),
        if v.up == 0 {
            "following".to_string()
        } else {
            format!("{} newer below", v.up)
        }
    );
    f.render_widget(
        Paragraph::new(lines).block(Block::bordered().title(title)),
        area,
    );
}

fn footer(f: &mut Frame, area: Rect, app: &App) {
    let line = if let Some(t) = &app.typing {
        Line::from(vec![
            Span::styled(" filter: ", Style::new().reversed()),
            Span::raw(format!("{t}▏  Enter apply, Esc cancel")),
        ])
    } else if let Some((text, bad)) = app.status_line() {
        let style = if bad {
            Style::new().fg(Color::White).bg(Color::Red)
        } else {
            Style::new().fg(Color::Black).bg(Color::Green)
        };
        Line::from(Span::styled(format!(" {text} "), style))
    } else {
        Line::from(KEYS).dim()
    };
    f.render_widget(Paragraph::new(line), area);
}

fn popup(f: &mut Frame, title: &str, text: &str, color: Color) {
    let area = f.area();
    let width = area.width.saturating_sub(8).min(72);
    let height = (text.lines().count() as u16 + 4).min(area.height);
    let rect = Rect {
        x: area.x + (area.width - width) / 2,
        y: area.y + area.height.saturating_sub(height) / 2,
        width,
        height,
    };
    f.render_widget(Clear, rect);
    f.render_widget(
        Paragraph::new(text.to_string())
            .wrap(Wrap { trim: false })
            .block(
                Block::bordered()
                    .title(format!(" {title} "))
                    .border_style(Style::new().fg(color)),
            ),
        rect,
    );
}
