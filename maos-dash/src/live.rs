//! `GET /api/events?project=ROOT[&after=SEQ]`: the project's events as they are committed,
//! as server-sent events, through the daemon's own subscription. A thread follows the
//! subscription with the client's blocking connection and hands each event over; when the
//! daemon goes away the stream says `lost` (with why), reconnects without starting a daemon,
//! says `back`, and goes on after the last event it sent: none twice, none skipped.

use std::convert::Infallible;
use std::time::Duration;

use axum::extract::Query;
use axum::response::sse::{Event, KeepAlive, Sse};
use futures_util::stream::Stream;
use maos_client::client::Client;
use maos_proto::EventFilter;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::api::{ApiError, open_project};

#[derive(Deserialize)]
pub struct EventsQuery {
    project: Option<String>,
    after: Option<u64>,
}

/// What the following thread reports.
enum News {
    Event(Box<maos_proto::EventRecord>),
    Lost(String),
    Back(u32),
}

pub async fn events(
    Query(q): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let project = open_project(q.project).await?;
    let (tx, rx) = mpsc::channel::<News>(1024);
    // Where "from now" is, fixed before the answer starts: an event committed once the page
    // has its headers is never missed.
    let after = match q.after {
        Some(a) => Some(a),
        None => {
            let p = project.clone();
            tokio::task::spawn_blocking(move || newest(&p))
                .await
                .ok()
                .flatten()
        }
    };
    std::thread::spawn(move || follow(project, after, tx));
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let news = rx.recv().await?;
        let event = match news {
            News::Event(e) => Event::default()
                .event("event")
                .id(e.seq.to_string())
                .json_data(&*e)
                .unwrap_or_else(|_| Event::default().event("event")),
            News::Lost(why) => Event::default().event("lost").data(why),
            News::Back(pid) => Event::default().event("back").data(pid.to_string()),
        };
        Some((Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
}

/// Follow `project` from after `after` until the page goes away (None: the whole timeline, as
/// a subscription without a position replays it; only when the newest could not be read).
fn follow(project: String, after: Option<u64>, tx: mpsc::Sender<News>) {
    let mut filter = EventFilter {
        after_seq: after,
        ..EventFilter::default()
    };
    let mut lost = false;
    let mut pause = Duration::from_millis(20);
    loop {
        let why = match Client::connect(false).and_then(|mut c| Ok((c.daemon_pid()?, c))) {
            Ok((pid, c)) => {
                if lost && tx.blocking_send(News::Back(pid)).is_err() {
                    return;
                }
                lost = false;
                pause = Duration::from_millis(20);
                match c.subscribe(&project, filter.clone()) {
                    Ok(stream) => {
                        let mut why = "the daemon closed the connection".to_string();
                        for e in stream {
                            match e {
                                Ok(event) => {
                                    filter.after_seq = Some(event.seq);
                                    if tx.blocking_send(News::Event(Box::new(event))).is_err() {
                                        return;
                                    }
                                }
                                Err(e) => {
                                    why = e.body().message;
                                    break;
                                }
                            }
                        }
                        why
                    }
                    Err(e) => e.body().message,
                }
            }
            Err(e) => e.body().message,
        };
        if !lost {
            lost = true;
            if tx.blocking_send(News::Lost(why)).is_err() {
                return;
            }
        }
        if tx.is_closed() {
            return;
        }
        std::thread::sleep(pause);
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

/// The sequence number of the project's newest event (0 without any): where "from now" starts.
fn newest(project: &str) -> Option<u64> {
    let mut c = Client::connect(false).ok()?;
    match c
        .request(
            Some(project),
            maos_proto::Request::Events {
                filter: EventFilter::default(),
                limit: Some(1),
            },
        )
        .ok()?
    {
        maos_proto::Reply::Events(e) => Some(e.last().map_or(0, |e| e.seq)),
        _ => None,
    }
}
