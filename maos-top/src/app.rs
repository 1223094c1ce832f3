//! `maos top`'s state and what the keys do: the watched projects, the table's selection, the
//! filter, a pending confirmation, the events view, and the requests an action sends.

use maos_proto::req;
use std::time::{Duration, Instant};

use maos_client::client::{Client, ClientError, whoami};
use maos_core::{AgentOp, SessionOp, Ts};
use maos_proto::{EventFilter, EventRecord, Reply, Request, StatusView, Target};
use ratatui::crossterm::event::{Event, KeyCode, KeyEvent, KeyEventKind, KeyModifiers};
use ratatui::widgets::TableState;

use crate::feed::Msg;
use crate::model::{self, Project, Row, Subject};

/// How long a message on the status line stays.
const STATUS_FOR: Duration = Duration::from_secs(6);
/// How many events the events view loads at first.
const EVENTS_LOADED: u32 = 1000;

/// What a key asks to be done to the selected session or agent, once confirmed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Action {
    Pause(Subject),
    Resume(Subject),
    Cancel(Subject),
}

impl Action {
    /// "pause agent agt_1a2b3c4d (coder)", as the confirmation asks it.
    pub fn describe(&self, app: &App) -> String {
        let (verb, s) = match self {
            Action::Pause(s) => ("Pause", s),
            Action::Resume(s) => ("Resume", s),
            Action::Cancel(s) => ("Cancel", s),
        };
        format!("{verb} {}", app.name_of(s))
    }
}

/// The events of one session or agent, full screen.
#[derive(Debug)]
pub struct EventsView {
    pub subject: Subject,
    pub events: Vec<EventRecord>,
    /// Lines scrolled up from the newest (0: follow new events).
    pub up: usize,
}

pub struct App {
    pub projects: Vec<Project>,
    /// Finished sessions too.
    pub all: bool,
    client: Option<Client>,
    /// The daemon's pid, as last seen.
    pub pid: Option<u32>,
    pub rows: Vec<Row>,
    pub table: TableState,
    selected: Option<Subject>,
    pub filter: String,
    /// The filter being typed (`/`).
    pub typing: Option<String>,
    pub confirm: Option<Action>,
    /// A line for the status bar: until when, the text, whether it is bad news.
    pub said: Option<(Instant, String, bool)>,
    pub events: Option<EventsView>,
    /// `maos status` of the selected session (its ETA, counted from now).
    pub status: Option<StatusView>,
    pub help: bool,
    pub quit: bool,
    /// Projects whose sessions must be asked for again.
    stale: Vec<bool>,
}

impl App {
    pub fn new(roots: Vec<String>, all: bool, client: Client) -> App {
        App::with(roots, all, Some(client))
    }

    /// An app watching `roots`, each to be asked for its sessions; `client: None` (the unit
    /// tests) has no daemon to ask.
    fn with(roots: Vec<String>, all: bool, client: Option<Client>) -> App {
        let n = roots.len();
        App {
            projects: roots.into_iter().map(Project::new).collect(),
            all,
            client,
            pid: None,
            rows: Vec::new(),
            table: TableState::default(),
            selected: None,
            filter: String::new(),
            typing: None,
            confirm: None,
            said: None,
            events: None,
            status: None,
            help: false,
            quit: false,
            stale: vec![true; n],
        }
    }

    /// A request to the daemon about project `p`; the connection is made again when it was
    /// lost (never starting a daemon).
    fn request(&mut self, p: Option<usize>, body: Request) -> Result<Reply, ClientError> {
        let mut client = match self.client.take() {
            Some(c) => c,
            None => Client::connect(false)?,
        };
        let root = p.map(|p| self.projects[p].root.clone());
        // Shown on the terminal: every text in it made safe first.
        let reply = client.request(root.as_deref(), body).and_then(|r| {
            maos_client::output::terminal_safe(&r).map_err(|_| {
                ClientError::Remote(maos_proto::ErrorBody::new(
                    maos_proto::ErrorCode::Internal,
                    "the daemon's answer could not be made safe to show".to_string(),
                ))
            })
        });
        match &reply {
            Err(ClientError::Unavailable(_)) => {}
            _ => {
                self.pid = client.daemon_pid().ok().or(self.pid);
                self.client = Some(client);
            }
        }
        reply
    }

    /// The recent events of each project, and where each stream is to go on from.
    pub fn load_recent(&mut self) -> Vec<Option<u64>> {
        (0..self.projects.len())
            .map(|p| {
                let reply = self.request(
                    Some(p),
                    Request::Events(req::Events {
                        filter: EventFilter::default(),
                        limit: Some(model::RECENT as u32),
                    }),
                );
                match reply {
                    Ok(Reply::Events(events)) => {
                        let last = events.last().map(|e| e.seq);
                        for e in events {
                            self.projects[p].record(e);
                        }
                        // Nothing yet: the stream starts from the beginning, which is now.
                        last.or(Some(0))
                    }
                    _ => None,
                }
            })
            .collect()
    }

    /// Ask again for the sessions of the projects that changed; rebuild the rows.
    pub fn refresh(&mut self) {
        for p in 0..self.projects.len() {
            if !std::mem::take(&mut self.stale[p]) {
                continue;
            }
            match self.request(Some(p), Request::Ps(req::Ps { all: self.all })) {
                Ok(Reply::Ps(sessions)) => self.projects[p].sessions = sessions,
                Ok(_) => {}
                Err(ClientError::Unavailable(_)) => self.stale[p] = true,
                Err(e) => self.say(e.body().message, true),
            }
        }
        self.rebuild();
        self.status_of_selection();
    }

    /// Ask for the selected session's status (ETA and phase timing).
    fn status_of_selection(&mut self) {
        let Some(Subject::Session { project, id }) = self.selected.clone() else {
            self.status = None;
            return;
        };
        self.status = match self.request(
            Some(project),
            Request::Status(req::Status { session: Some(id) }),
        ) {
            Ok(Reply::Status(v)) => Some(*v),
            _ => None,
        };
    }

    pub fn needs_refresh(&self) -> bool {
        self.stale.iter().any(|s| *s)
    }

    fn rebuild(&mut self) {
        self.rows = model::rows(&self.projects, &self.filter);
        let at = self.table.selected().unwrap_or(0);
        let i = model::reselect(&self.projects, &self.rows, self.selected.as_ref(), at);
        self.table.select(i);
        self.selected = i.and_then(|i| model::subject(&self.projects, &self.rows[i]));
    }

    pub fn say(&mut self, text: String, bad: bool) {
        let text = maos_core::term::safe(&text).into_owned();
        self.said = Some((Instant::now() + STATUS_FOR, text, bad));
    }

    /// The status line's text, while it lasts.
    pub fn status_line(&self) -> Option<(&str, bool)> {
        self.said
            .as_ref()
            .filter(|(until, ..)| Instant::now() < *until)
            .map(|(_, t, bad)| (t.as_str(), *bad))
    }

    /// The selected session or agent.
    pub fn selection(&self) -> Option<&Subject> {
        self.selected.as_ref()
    }

    /// "agent agt_1a2b3c4d (coder)", "session sess_1a2b3c4d (Build the parser)".
    pub fn name_of(&self, s: &Subject) -> String {
        use maos_core::ids::short;
        match s {
            Subject::Session { project, id } => {
                let objective = self.projects[*project]
                    .sessions
                    .iter()
                    .find(|x| x.id.as_str() == id)
                    .map(|x| maos_client::output::clip(&x.objective, 30))
                    .unwrap_or_default();
                format!("session {} ({objective})", short(id))
            }
            Subject::Agent { project, id, .. } => {
                let role = self.projects[*project]
                    .sessions
                    .iter()
                    .flat_map(|x| &x.agents)
                    .find(|a| a.id.as_str() == id)
                    .map(|a| a.role.clone())
                    .unwrap_or_default();
                format!("agent {} ({role})", short(id))
            }
        }
    }

    /// Whatever happened.
    pub fn handle(&mut self, msg: Msg) {
        match msg {
            Msg::Term(Event::Key(k)) if k.kind != KeyEventKind::Release => self.key(k),
            Msg::Term(_) => {}
            Msg::TermGone(why) => {
                self.say(format!("cannot read the terminal: {why}"), true);
                self.quit = true;
            }
            Msg::Event { project, event } => {
                // Shown on the terminal: every text in it made safe first.
                let Ok(event) = maos_client::output::terminal_safe(&event) else {
                    return;
                };
                if let Some(v) = &mut self.events
                    && concerns(&v.subject, project, &event)
                {
                    v.events.push(event.clone());
                }
                self.projects[project].record(event);
                self.stale[project] = true;
            }
            Msg::Lost { project, why } => {
                self.projects[project].lost = Some((chrono::Utc::now(), why));
            }
            Msg::Back { project, pid } => {
                self.projects[project].lost = None;
                self.pid = Some(pid);
                self.stale[project] = true;
                self.say(format!("reconnected to maosd (pid {pid})"), false);
            }
        }
    }

    fn key(&mut self, k: KeyEvent) {
        if k.code == KeyCode::Char('c') && k.modifiers.contains(KeyModifiers::CONTROL) {
            self.quit = true;
            return;
        }
        if let Some(text) = &mut self.typing {
            match k.code {
                KeyCode::Enter => {
                    self.filter = self.typing.take().unwrap_or_default().trim().to_string();
                    self.rebuild();
                }
                KeyCode::Esc => self.typing = None,
                KeyCode::Backspace => {
                    text.pop();
                }
                KeyCode::Char(c) => text.push(c),
                _ => {}
            }
            return;
        }
        if let Some(action) = self.confirm.take() {
            if matches!(k.code, KeyCode::Char('y') | KeyCode::Char('Y')) {
                self.act(action);
            } else {
                self.say("nothing done".into(), false);
            }
            return;
        }
        if self.help {
            self.help = false;
            return;
        }
        if let Some(v) = &mut self.events {
            match k.code {
                KeyCode::Esc | KeyCode::Char('q') | KeyCode::Char('e') => self.events = None,
                KeyCode::Up | KeyCode::Char('k') => v.up = (v.up + 1).min(v.events.len()),
                KeyCode::Down | KeyCode::Char('j') => v.up = v.up.saturating_sub(1),
                KeyCode::PageUp => v.up = (v.up + 10).min(v.events.len()),
                KeyCode::PageDown => v.up = v.up.saturating_sub(10),
                KeyCode::End | KeyCode::Char('G') => v.up = 0,
                _ => {}
            }
            return;
        }
        match k.code {
            KeyCode::Char('q') => self.quit = true,
            KeyCode::Up | KeyCode::Char('k') => self.step(-1),
            KeyCode::Down | KeyCode::Char('j') => self.step(1),
            KeyCode::PageUp => self.step(-10),
            KeyCode::PageDown => self.step(10),
            KeyCode::Home => self.step(-(self.rows.len() as isize)),
            KeyCode::End => self.step(self.rows.len() as isize),
            KeyCode::Char('p') => self.ask(Action::Pause),
            KeyCode::Char('r') => self.ask(Action::Resume),
            KeyCode::Char('c') => self.ask(Action::Cancel),
            KeyCode::Char('/') => self.typing = Some(self.filter.clone()),
            KeyCode::Esc if !self.filter.is_empty() => {
                self.filter.clear();
                self.rebuild();
            }
            KeyCode::Char('a') => {
                self.all = !self.all;
                self.stale.iter_mut().for_each(|s| *s = true);
                let what = if self.all {
                    "showing finished sessions too"
                } else {
                    "showing live sessions"
                };
                self.say(what.into(), false);
            }
            KeyCode::Char('e') | KeyCode::Enter => self.open_events(),
            KeyCode::Char('?') | KeyCode::Char('h') => self.help = true,
            _ => {}
        }
    }

    fn step(&mut self, by: isize) {
        if self.rows.is_empty() {
            return;
        }
        let at = self.table.selected().unwrap_or(0) as isize;
        let to = (at + by).clamp(0, self.rows.len() as isize - 1) as usize;
        self.table.select(Some(to));
        let was = self.selected.take();
        self.selected = model::subject(&self.projects, &self.rows[to]);
        if self.selected != was {
            self.status_of_selection();
        }
    }

    fn ask(&mut self, action: fn(Subject) -> Action) {
        match self.selected.clone() {
            Some(s) => self.confirm = Some(action(s)),
            None => self.say("select a session or an agent first".into(), true),
        }
    }

    /// Send what `action` asks, and say how it went.
    fn act(&mut self, action: Action) {
        let what = action.describe(self);
        let reason = Some(format!(
            "from maos top by {}",
            whoami().unwrap_or_else(|| "someone".into())
        ));
        let (project, body) = match action {
            Action::Pause(s) => {
                let (p, session, target) = target_of(s);
                let body = Request::Pause(req::Pause {
                    session: Some(session),
                    target,
                    reason,
                    by: whoami(),
                });
                (p, body)
            }
            Action::Resume(s) => {
                let (p, session, target) = target_of(s);
                let body = Request::Resume(req::Resume {
                    session: Some(session),
                    target,
                    by: whoami(),
                });
                (p, body)
            }
            Action::Cancel(Subject::Session { project, id }) => (
                project,
                Request::SessionTransition(req::SessionTransition {
                    session: Some(id),
                    op: SessionOp::Cancel,
                    reason,
                }),
            ),
            Action::Cancel(Subject::Agent { project, id, .. }) => (
                project,
                Request::AgentTransition(req::AgentTransition {
                    agent: id,
                    op: AgentOp::Cancel,
                    exit_code: None,
                    reason,
                }),
            ),
        };
        match self.request(Some(project), body) {
            Ok(_) => self.say(format!("{what}: done"), false),
            Err(e) => self.say(format!("{what}: {}", e.body().message), true),
        }
        self.stale[project] = true;
    }

    fn open_events(&mut self) {
        let Some(subject) = self.selected.clone() else {
            return;
        };
        let (project, filter) = match &subject {
            Subject::Session { project, id } => (
                *project,
                EventFilter {
                    session: Some(id.clone()),
                    ..EventFilter::default()
                },
            ),
            Subject::Agent { project, id, .. } => (
                *project,
                EventFilter {
                    agent: Some(id.clone()),
                    ..EventFilter::default()
                },
            ),
        };
        let body = Request::Events(req::Events {
            filter,
            limit: Some(EVENTS_LOADED),
        });
        match self.request(Some(project), body) {
            Ok(Reply::Events(events)) => {
                self.events = Some(EventsView {
                    subject,
                    events,
                    up: 0,
                })
            }
            Ok(_) => {}
            Err(e) => self.say(e.body().message, true),
        }
    }

    /// When the oldest lost stream was lost, and why (None: all connected).
    pub fn lost(&self) -> Option<&(Ts, String)> {
        self.projects
            .iter()
            .filter_map(|p| p.lost.as_ref())
            .min_by_key(|(at, _)| *at)
    }
}

/// The project, session and pause/resume target of a subject.
fn target_of(s: Subject) -> (usize, String, Target) {
    match s {
        Subject::Session { project, id } => (project, id, Target::Session),
        Subject::Agent {
            project,
            session,
            id,
        } => (project, session, Target::Agent(id)),
    }
}

/// Whether `e`, of project `p`, is about `subject`.
fn concerns(subject: &Subject, p: usize, e: &EventRecord) -> bool {
    match subject {
        Subject::Session { project, id } => {
            *project == p && e.session_id.as_ref().is_some_and(|s| s.as_str() == id)
        }
        Subject::Agent { project, id, .. } => {
            *project == p && e.agent_id.as_ref().is_some_and(|a| a.as_str() == id)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    const S: &str = "sess_00000000000000000000000000000001";
    const OTHER_S: &str = "sess_00000000000000000000000000000002";
    const A: &str = "agt_00000000000000000000000000000001";
    const B: &str = "agt_00000000000000000000000000000002";

    /// An app with no daemon connection (a live event needs none) watching two projects.
    fn app() -> App {
        let mut app = App::with(vec!["/p".into(), "/q".into()], false, None);
        app.stale = vec![false; 2];
        app
    }

    fn event(seq: u64, session: Option<&str>, agent: Option<&str>) -> EventRecord {
        serde_json::from_value(json!({
            "seq": seq, "ts": "2026-11-26T01:00:00Z", "session_id": session,
            "agent_id": agent, "type": "note_recorded", "data": {"text": format!("e{seq}")},
        }))
        .expect("an event")
    }

    /// An app whose events view is open on `subject`, empty.
    fn viewing(subject: Subject) -> App {
        let mut app = app();
        app.events = Some(EventsView {
            subject,
            events: Vec::new(),
            up: 0,
        });
        app
    }

    /// Hands `app` live events, each `(project, seq, session, agent)`, in order.
    fn live(app: &mut App, events: &[(usize, u64, Option<&str>, Option<&str>)]) {
        for &(project, seq, session, agent) in events {
            app.handle(Msg::Event {
                project,
                event: event(seq, session, agent),
            });
        }
    }

    fn shown(app: &App) -> Vec<u64> {
        let v = app.events.as_ref().expect("the events view is open");
        v.events.iter().map(|e| e.seq).collect()
    }

    /// An agent's events view shows that agent's live events only: not those of another agent
    /// of its session, of the session with no agent, or of the same ids in another project.
    #[test]
    fn an_agents_events_view_takes_only_that_agents_live_events() {
        let mut app = viewing(Subject::Agent {
            project: 0,
            session: S.into(),
            id: A.into(),
        });
        live(
            &mut app,
            &[
                (0, 1, Some(S), Some(A)),
                (0, 2, Some(S), Some(B)),
                (0, 3, Some(S), None),
                (1, 4, Some(S), Some(A)),
                (0, 5, None, Some(A)),
                (0, 6, Some(OTHER_S), Some(B)),
                (0, 7, Some(S), Some(A)),
            ],
        );
        assert_eq!(shown(&app), [1, 5, 7]);
        // Every event still reaches the project's table.
        assert!(app.stale[0] && app.stale[1]);
    }

    /// A session's events view shows the live events of every agent of that session, and only
    /// that session's.
    #[test]
    fn a_sessions_events_view_takes_the_sessions_live_events() {
        let mut app = viewing(Subject::Session {
            project: 0,
            id: S.into(),
        });
        live(
            &mut app,
            &[
                (0, 1, Some(S), Some(A)),
                (0, 2, Some(S), Some(B)),
                (0, 3, Some(S), None),
                (1, 4, Some(S), Some(A)),
                (0, 5, Some(OTHER_S), Some(B)),
                (0, 6, None, Some(A)),
            ],
        );
        assert_eq!(shown(&app), [1, 2, 3]);
    }
}
