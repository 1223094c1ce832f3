//! Where `maos top`'s news comes from, each on a thread of its own and all into one channel:
//! the keyboard, and per project the daemon's event stream. A stream that breaks is said to
//! be lost, connected again (never by starting a daemon: whoever stopped it meant it) and
//! resumed after the last event seen, so nothing is missed and nothing is shown twice. While
//! nothing happens, nothing is asked of the daemon.

use std::sync::mpsc::Sender;
use std::time::Duration;

use maos_client::client::{Client, ClientError};
use maos_proto::{EventFilter, EventRecord};
use ratatui::crossterm::event::{self, Event};

/// What the view is told.
#[derive(Debug)]
pub enum Msg {
    /// A key, a resize: anything from the terminal.
    Term(Event),
    /// The terminal cannot be read any more.
    TermGone(String),
    /// A project's event.
    Event { project: usize, event: EventRecord },
    /// A project's stream broke.
    Lost { project: usize, why: String },
    /// It is back, from the daemon with this pid.
    Back { project: usize, pid: u32 },
}

/// Read the terminal until the view is gone.
pub fn terminal(tx: Sender<Msg>) {
    std::thread::spawn(move || {
        loop {
            let msg = match event::read() {
                Ok(e) => Msg::Term(e),
                Err(e) => {
                    let _ = tx.send(Msg::TermGone(e.to_string()));
                    return;
                }
            };
            if tx.send(msg).is_err() {
                return;
            }
        }
    });
}

/// Follow project `project` (at `root`) from after event `after`, until the view is gone.
pub fn events(project: usize, root: String, after: Option<u64>, tx: Sender<Msg>) {
    std::thread::spawn(move || {
        let mut filter = EventFilter {
            after_seq: after,
            ..EventFilter::default()
        };
        let mut lost = false;
        let mut pause = Duration::from_millis(20);
        loop {
            let why = match Client::connect(false).and_then(|mut c| Ok((c.daemon_pid()?, c))) {
                Ok((pid, c)) => {
                    if lost && tx.send(Msg::Back { project, pid }).is_err() {
                        return;
                    }
                    lost = false;
                    pause = Duration::from_millis(20);
                    match c.subscribe(&root, filter.clone()) {
                        Ok(stream) => {
                            let mut why = "the daemon closed the connection".to_string();
                            for e in stream {
                                match e {
                                    Ok(event) => {
                                        filter.after_seq = Some(event.seq);
                                        if tx.send(Msg::Event { project, event }).is_err() {
                                            return;
                                        }
                                    }
                                    Err(e) => {
                                        why = describe(e);
                                        break;
                                    }
                                }
                            }
                            why
                        }
                        Err(e) => describe(e),
                    }
                }
                Err(e) => describe(e),
            };
            if !lost {
                lost = true;
                if tx.send(Msg::Lost { project, why }).is_err() {
                    return;
                }
            }
            std::thread::sleep(pause);
            pause = (pause * 2).min(Duration::from_millis(250));
        }
    });
}

fn describe(e: ClientError) -> String {
    e.body().message
}
