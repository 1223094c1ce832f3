//! Where `maos top`'s news comes from, each on a thread of its own and all into one channel:
//! the keyboard, and per project the daemon's event stream. A stream that breaks is said to
//! be lost, connected again (never by starting a daemon: whoever stopped it meant it) and
//! resumed after the last event seen, so nothing is missed and nothing is shown twice. While
//! nothing happens, nothing is asked of the daemon.

use std::sync::mpsc::Sender;

use maos_client::client::{self, Followed};
use maos_proto::EventRecord;
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
        client::follow(&root, after, |news| {
            let msg = match news {
                Followed::Event(event) => Msg::Event {
                    project,
                    event: *event,
                },
                Followed::Lost(why) => Msg::Lost { project, why },
                Followed::Back(pid) => Msg::Back { project, pid },
            };
            tx.send(msg).is_ok()
        })
    });
}
