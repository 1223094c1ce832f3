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
use maos_client::client::{self, Client, Followed};
use maos_proto::EventFilter;
use serde::Deserialize;
use tokio::sync::mpsc;

use crate::api::{ApiError, open_project};

#[derive(Deserialize)]
pub struct EventsQuery {
    project: Option<String>,
    after: Option<String>,
}

pub async fn events(
    Query(q): Query<EventsQuery>,
) -> Result<Sse<impl Stream<Item = Result<Event, Infallible>>>, ApiError> {
    let project = open_project(q.project).await?;
    let after = crate::session::number("after", q.after, u64::MAX)?;
    let (tx, rx) = mpsc::channel::<Followed>(1024);
    // Where "from now" is, fixed before the answer starts: an event committed once the page
    // has its headers is never missed.
    let after = match after {
        Some(a) => Some(a),
        None => {
            let p = project.clone();
            tokio::task::spawn_blocking(move || newest(&p))
                .await
                .ok()
                .flatten()
        }
    };
    std::thread::spawn(move || {
        client::follow(&project, after, |news| tx.blocking_send(news).is_ok())
    });
    let stream = futures_util::stream::unfold(rx, |mut rx| async move {
        let news = rx.recv().await?;
        let event = match news {
            Followed::Event(e) => Event::default()
                .event("event")
                .id(e.seq.to_string())
                .json_data(&*e)
                .unwrap_or_else(|_| Event::default().event("event")),
            Followed::Lost(why) => Event::default().event("lost").data(why),
            Followed::Back(pid) => Event::default().event("back").data(pid.to_string()),
        };
        Some((Ok(event), rx))
    });
    Ok(Sse::new(stream).keep_alive(KeepAlive::new().interval(Duration::from_secs(15))))
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
