//! `GET /api/events?project=ROOT[&after=SEQ]`: the project's events as they are committed,
//! as server-sent events, through the daemon's own subscription. A thread follows the
//! subscription with the client's blocking connection and hands each event over; when the
//! daemon goes away the stream says `lost` (with why), reconnects without starting a daemon,
//! says `back`, and goes on after the last event it sent: none twice, none skipped. When the
//! page goes (the browser closes the connection, and the server drops the stream), the
//! subscription's connection is shut and the thread ends at once, not at the project's next
//! event: on a quiet project every page left behind held a thread and one of maosd's
//! connections.
//!
//! Events that follow one another closely are written together: at most one write every
//! [`COALESCE`] while they flow (the first after a pause goes at once). A browser pays for
//! each piece of a stream it receives; five pages each taking 200 writes a second cost the
//! machine's CPUs more than drawing them (maos-bench dash-hook).

use std::convert::Infallible;
use std::fmt::Write as _;
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::extract::Query;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use maos_client::client::{self, Client, Followed, Unfollow};
use maos_proto::EventFilter;
use serde::Deserialize;
use tokio::sync::mpsc;
use tokio::time::Instant;

use crate::api::{ApiError, open_project};

#[derive(Deserialize)]
pub struct EventsQuery {
    project: Option<String>,
    after: Option<String>,
}

/// While events flow, at most one write this often.
const COALESCE: Duration = Duration::from_millis(20);
/// A comment this long after the last write keeps idle connections open.
const KEEP_ALIVE: Duration = Duration::from_secs(15);
/// A write holds at most this much (what is queued beyond waits for the next).
const MAX_WRITE: usize = 256 * 1024;

pub async fn events(Query(q): Query<EventsQuery>) -> Result<Response, ApiError> {
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
    let until = Unfollow::default();
    let follow = until.clone();
    std::thread::spawn(move || {
        client::follow_until(&project, after, &follow, |news| {
            tx.blocking_send(news).is_ok()
        })
    });
    let gone = Gone(until);
    // As if the last write were long ago: the first event goes at once.
    let start = Instant::now()
        .checked_sub(COALESCE)
        .unwrap_or_else(Instant::now);
    let stream =
        futures_util::stream::unfold((rx, start, gone), |(mut rx, last, gone)| async move {
            let mut out = String::new();
            match tokio::time::timeout(KEEP_ALIVE, rx.recv()).await {
                Ok(Some(news)) => sse(&mut out, news),
                // The daemon's subscription thread ended: so does the stream.
                Ok(None) => return None,
                Err(_) => out.push_str(":\n\n"),
            }
            // What follows closely goes in the same write.
            tokio::time::sleep_until(last + COALESCE).await;
            while out.len() < MAX_WRITE {
                match rx.try_recv() {
                    Ok(news) => sse(&mut out, news),
                    Err(_) => break,
                }
            }
            Some((
                Ok::<_, Infallible>(Bytes::from(out)),
                (rx, Instant::now(), gone),
            ))
        });
    Ok((
        [
            (header::CONTENT_TYPE, "text/event-stream"),
            (header::CACHE_CONTROL, "no-cache"),
        ],
        Body::from_stream(stream),
    )
        .into_response())
}

/// Held by the stream: when the server drops it (the page went), the follow ends at once.
struct Gone(Unfollow);

impl Drop for Gone {
    fn drop(&mut self) {
        self.0.stop();
    }
}

/// One server-sent event: `event` (its id the seq), `lost` (why) or `back` (the daemon's pid).
fn sse(out: &mut String, news: Followed) {
    match news {
        Followed::Event(e) => {
            let data = serde_json::to_string(&*e).unwrap_or_else(|_| "null".into());
            let _ = write!(out, "event: event\nid: {}\ndata: {data}\n\n", e.seq);
        }
        Followed::Lost(why) => {
            out.push_str("event: lost\n");
            // At least one data line: an event without one is not dispatched.
            for line in why.lines().chain(why.is_empty().then_some("")) {
                let _ = writeln!(out, "data: {line}");
            }
            out.push('\n');
        }
        Followed::Back(pid) => {
            let _ = write!(out, "event: back\ndata: {pid}\n\n");
        }
    }
}

/// The sequence number of the project's newest event (0 without any): where "from now" starts.
fn newest(project: &str) -> Option<u64> {
    let mut c = Client::connect(false).ok()?;
    match c
        .request(
            Some(project),
            maos_proto::Request::Events(maos_proto::req::Events {
                filter: EventFilter::default(),
                limit: Some(1),
            }),
        )
        .ok()?
    {
        maos_proto::Reply::Events(e) => Some(e.last().map_or(0, |e| e.seq)),
        _ => None,
    }
}
