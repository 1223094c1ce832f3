//! The dashboard's Gantt charts (`maos_core::gantt`), kept by the daemon: one fold per session,
//! fed with each event as it is committed, so a page asking for a session of 200,000 events
//! gets the chart without its events being read again, sent over the socket and folded.
//!
//! A fold is made the first time a session is asked for, or the first time one of its events
//! is committed after the project opened (a session at work is ready before anyone looks). It
//! is made by reading the session's chart events from the database; from then on the follower
//! task folds each committed event into it. Every request also reads what may have been
//! committed since the fold's last event (nothing, normally): a fold is never behind what the
//! database holds, whatever the follower missed. When the follower falls behind the broadcast
//! (events dropped), it catches every fold up from the database before folding more; a fold
//! that cannot be caught up is dropped and made again when next needed.
//!
//! A daemon that stops saves its folds (`charts/<session>.json` in the project's directory;
//! also every 10 minutes while events flow, for a daemon that is killed)
//! and a fold made later starts from its saved copy when that copy is still good: written by
//! the same fold code, and its last event still the timeline's (same seq, same time). Only
//! what was committed since is then read: the first view of a session of 200,000 events after
//! a restart no longer reads and folds its 100,000 chart events again (2.2 s; maos-bench
//! dash-paint). A daemon killed reads what came after its last save again.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use maos_core::gantt::{FOLD_CODE, Gantt, GanttBuilder, TYPES, Window};
use maos_core::record::EventRecord;
use maos_proto::ErrorBody;
use maos_store::{EventQuery, Reader};
use tokio::sync::broadcast::{self, error::RecvError};
use tracing::{debug, info, warn};

use crate::base::error::storage_error;

/// Events read from the database per query while catching up.
const PAGE: u32 = 5_000;
/// Folds kept per project; past this the one used longest ago is dropped. Also the most
/// saved folds kept on disk.
const KEPT: usize = 32;

/// One session's fold, shared by the follower and the requests (one at a time).
type Fold = Arc<tokio::sync::Mutex<GanttBuilder>>;

/// A project's folds, by full session id.
pub struct Charts {
    folds: std::sync::Mutex<Folds>,
    /// Where folds are saved when the daemon stops (`<project dir>/charts`).
    dir: PathBuf,
    /// One save at a time (the periodic one and the last one may meet).
    saving: tokio::sync::Mutex<()>,
}

/// A fold as saved: good only for the same fold code ([`FOLD_CODE`]).
#[derive(serde::Serialize, serde::Deserialize)]
struct SavedFold {
    code: u64,
    session: String,
    fold: GanttBuilder,
}

#[derive(Default)]
struct Folds {
    by_session: HashMap<String, (Fold, u64)>,
    /// Bumped at each use: the smallest is the one used longest ago.
    clock: u64,
}

impl Charts {
    pub fn new(project_dir: &Path) -> Charts {
        Charts {
            folds: Default::default(),
            dir: project_dir.join("charts"),
            saving: Default::default(),
        }
    }

    fn folds(&self) -> std::sync::MutexGuard<'_, Folds> {
        match self.folds.lock() {
            Ok(f) => f,
            Err(poisoned) => poisoned.into_inner(),
        }
    }

    /// The session's fold, and whether it was just made (empty: it must catch up first).
    fn fold_of(&self, session: &str) -> (Fold, bool) {
        let mut folds = self.folds();
        folds.clock += 1;
        let now = folds.clock;
        if let Some((fold, used)) = folds.by_session.get_mut(session) {
            *used = now;
            return (fold.clone(), false);
        }
        if folds.by_session.len() >= KEPT
            && let Some(oldest) = folds
                .by_session
                .iter()
                .min_by_key(|(_, (_, used))| *used)
                .map(|(id, _)| id.clone())
        {
            folds.by_session.remove(&oldest);
        }
        let fold = Fold::default();
        folds
            .by_session
            .insert(session.to_string(), (fold.clone(), now));
        (fold, true)
    }

    /// Catch a fold up from the database. One that cannot be is dropped, to be made again
    /// whole when next needed: the follower folding on past the events it missed would leave
    /// it wrong for good. False when dropped.
    async fn catch_up_or_drop(&self, reader: &Reader, session: &str, b: &mut GanttBuilder) -> bool {
        match self.catch_up(reader, session, b).await {
            Ok(()) => true,
            Err(e) => {
                warn!(session, error = %e, "cannot catch a Gantt chart up from the database");
                self.folds().by_session.remove(session);
                false
            }
        }
    }

    fn all(&self) -> Vec<(String, Fold)> {
        self.folds()
            .by_session
            .iter()
            .map(|(id, (f, _))| (id.clone(), f.clone()))
            .collect()
    }

    /// The chart of a session (its full id), caught up with the database. `ended`: when the
    /// session ended (its chart stops there, not now).
    pub async fn chart(
        &self,
        reader: &Reader,
        session: &str,
        ended: Option<i64>,
        window: Window,
    ) -> Result<Gantt, ErrorBody> {
        let (fold, _) = self.fold_of(session);
        let t0 = std::time::Instant::now();
        let mut b = fold.lock().await;
        let waited = t0.elapsed();
        let before = b.folded();
        self.catch_up(reader, session, &mut b)
            .await
            .map_err(|e| storage_error(&e))?;
        debug!(
            session,
            waited_ms = waited.as_secs_f64() * 1e3,
            caught_up = b.folded() - before,
            ms = t0.elapsed().as_secs_f64() * 1e3,
            "Gantt chart asked for"
        );
        let window = Window {
            to_ms: window.to_ms.or(ended.map(|t| t + 1)),
            ..window
        };
        Ok(b.snapshot(chrono::Utc::now(), window))
    }

    /// Fold what the database has of the session after the fold's last event; an empty fold
    /// first starts from its saved copy, if that is still good.
    async fn catch_up(
        &self,
        reader: &Reader,
        session: &str,
        b: &mut GanttBuilder,
    ) -> Result<(), maos_store::StoreError> {
        if b.folded() == 0
            && let Some(saved) = self.saved(reader, session).await
        {
            *b = saved;
        }
        loop {
            let q = EventQuery {
                session_id: Some(session.to_string()),
                types: TYPES.iter().map(|t| t.to_string()).collect(),
                after_seq: Some(b.last_seq()),
                limit: Some(PAGE),
                oldest_first: true,
                ..EventQuery::default()
            };
            let events = reader.events(&q).await?;
            for e in &events {
                b.fold(e);
            }
            if events.len() < PAGE as usize {
                return Ok(());
            }
        }
    }

    /// `charts/<session>.json`; None for a session id that is not one (no path is made
    /// from it: see [`maos_core::id_path`]).
    fn file(&self, session: &str) -> Option<PathBuf> {
        maos_core::id_path(&self.dir, session, ".json").ok()
    }

    /// The session's saved fold, if there is one and it is still good. One that is not is
    /// removed.
    async fn saved(&self, reader: &Reader, session: &str) -> Option<GanttBuilder> {
        let path = self.file(session)?;
        let read = tokio::task::spawn_blocking(move || -> Result<Option<SavedFold>, String> {
            let body = match std::fs::read(&path) {
                Ok(body) => body,
                // Nothing saved: the usual case.
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
                Err(e) => return Err(e.to_string()),
            };
            serde_json::from_slice(&body)
                .map(Some)
                .map_err(|e| e.to_string())
        })
        .await;
        let why_not = match read {
            Ok(Ok(None)) => return None,
            Ok(Ok(Some(saved))) => match self.still_good(reader, session, &saved).await {
                Ok(()) => {
                    debug!(
                        session,
                        folded = saved.fold.folded(),
                        "Gantt chart read back from its saved fold"
                    );
                    return Some(saved.fold);
                }
                Err(why) => why,
            },
            Ok(Err(e)) => e,
            Err(e) => e.to_string(),
        };
        info!(
            session,
            why_not, "a saved Gantt chart is not used; reading its events again"
        );
        if let Some(path) = self.file(session) {
            let _ = std::fs::remove_file(path);
        }
        None
    }

    async fn still_good(
        &self,
        reader: &Reader,
        session: &str,
        saved: &SavedFold,
    ) -> Result<(), String> {
        if saved.code != FOLD_CODE {
            return Err("saved by another version of maosd".into());
        }
        if saved.session != session {
            return Err(format!("saved for session {}", saved.session));
        }
        let Some((seq, ts_us)) = saved.fold.last_event() else {
            return Err("saved empty".into());
        };
        let q = EventQuery {
            session_id: Some(session.to_string()),
            after_seq: Some(seq.saturating_sub(1)),
            before_seq: Some(seq + 1),
            limit: Some(1),
            oldest_first: true,
            ..EventQuery::default()
        };
        let found = reader.events(&q).await.map_err(|e| e.to_string())?;
        match found.first() {
            Some(e) if e.ts.timestamp_micros() == ts_us => Ok(()),
            _ => Err(format!(
                "its last event (#{seq}) is no longer in the timeline"
            )),
        }
    }

    /// Save the folds (the daemon stops, or every [`save_every`] while events flow), keeping
    /// the newest [`KEPT`] saved files. One fold in memory twice at a time.
    pub async fn save(&self) {
        let _one = self.saving.lock().await;
        let dir = self.dir.clone();
        let made = tokio::task::spawn_blocking(move || {
            use std::os::unix::fs::DirBuilderExt;
            std::fs::DirBuilder::new()
                .recursive(true)
                .mode(0o700)
                .create(&dir)
        })
        .await;
        if !matches!(made, Ok(Ok(()))) {
            warn!(dir = %self.dir.display(), "cannot make the directory of the saved Gantt charts");
            return;
        }
        for (session, fold) in self.all() {
            let b = fold.lock().await;
            if b.folded() == 0 {
                continue;
            }
            let doc = SavedFold {
                code: FOLD_CODE,
                session: session.clone(),
                fold: b.clone(),
            };
            drop(b);
            let Some(path) = self.file(&session) else {
                continue;
            };
            let written = tokio::task::spawn_blocking(move || {
                let body = serde_json::to_vec(&doc).map_err(std::io::Error::other)?;
                crate::project::files::write_whole(&path, &body)
            })
            .await;
            match written {
                Ok(Ok(())) => {}
                Ok(Err(e)) => warn!(session, error = %e, "cannot save a Gantt chart"),
                Err(e) => warn!(session, error = %e, "saving a Gantt chart failed"),
            }
        }
        let dir = self.dir.clone();
        let _ = tokio::task::spawn_blocking(move || prune(&dir)).await;
    }
}

/// How often the follower saves the folds while events flow: 10 minutes, or
/// `MAOS_TEST_CHART_SAVE_MS` (the end-to-end tests' override). A daemon killed then loses at
/// most this much of its charts: its successor reads only the events after the saved ones.
fn save_every() -> std::time::Duration {
    crate::base::config::interval(
        "MAOS_TEST_CHART_SAVE_MS",
        std::time::Duration::from_secs(600),
    )
}

/// Remove all but the newest [`KEPT`] saved folds.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut files: Vec<(std::time::SystemTime, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|e| Some((e.metadata().ok()?.modified().ok()?, e.path())))
        .collect();
    files.sort_by_key(|f| std::cmp::Reverse(f.0));
    for (_, path) in files.into_iter().skip(KEPT) {
        let _ = std::fs::remove_file(path);
    }
}

/// Fold each committed event into its session's fold, making the fold (from the database) for
/// a session at work that has none. Ends when the project's actor does.
pub async fn follow(
    charts: Arc<Charts>,
    reader: Reader,
    mut events: broadcast::Receiver<Arc<EventRecord>>,
) {
    let every = save_every();
    let mut saved = tokio::time::Instant::now();
    loop {
        if saved.elapsed() >= every {
            saved = tokio::time::Instant::now();
            let c = charts.clone();
            tokio::spawn(async move { c.save().await });
        }
        match events.recv().await {
            Ok(e) => fold_one(&charts, &reader, &e).await,
            Err(RecvError::Lagged(missed)) => {
                info!(
                    missed,
                    "chart follower fell behind; catching up from the database"
                );
                for (session, fold) in charts.all() {
                    charts
                        .catch_up_or_drop(&reader, &session, &mut *fold.lock().await)
                        .await;
                }
            }
            Err(RecvError::Closed) => return,
        }
    }
}

async fn fold_one(charts: &Charts, reader: &Reader, e: &EventRecord) {
    let Some(session) = e.session_id.as_ref().map(|s| s.as_str()) else {
        return;
    };
    if !TYPES.contains(&e.kind.as_str()) {
        return;
    }
    // A session at work counts as used: it is the last one dropped.
    let (fold, made) = charts.fold_of(session);
    let mut b = fold.lock().await;
    if made && !charts.catch_up_or_drop(reader, session, &mut b).await {
        return;
    }
    // Folded already (by a catch-up that read it) is ignored by the fold itself.
    b.fold(e);
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::txn::state::State;
    use crate::txn::state::atomic_tests::{apply_all, id_of, open, req, rt};

    /// The follower gets the events of 20 commits through a channel of 4: it falls behind,
    /// catches its fold up from the database, and folds on. Its fold then holds every chart
    /// event once, as a fold made from the database does. Without the catch-up, the events it
    /// received after the ones it missed would move the fold past them for good (a request's
    /// own catch-up reads only what comes after the fold's last event).
    #[test]
    fn a_follower_that_fell_behind_catches_its_fold_up_and_folds_nothing_twice() {
        let dir = tempfile::tempdir().unwrap_or_else(|e| panic!("tempdir: {e}"));
        let rt = rt();
        let mut store = rt.block_on(open(&dir.path().join("maos.db")));
        let mut st = State::new(Vec::new(), 0);
        let (o, _) = apply_all(
            &mut st,
            Some((&rt, &mut store)),
            vec![req(
                json!({ "request": "session_create", "objective": "chart" }),
            )],
        );
        let session = id_of(&o[0]);
        let (o, _) = apply_all(
            &mut st,
            Some((&rt, &mut store)),
            vec![req(
                json!({ "request": "agent_register", "session": session,
                              "role": "writer", "task": "write" }),
            )],
        );
        let agent = id_of(&o[0]);
        let reader = store.reader();
        let charts = Arc::new(Charts::new(dir.path()));
        // A page asked for the chart: the session has a fold before the burst.
        rt.block_on(charts.chart(&reader, &session, None, Window::all(1000)))
            .unwrap_or_else(|e| panic!("chart: {}", e.message));
        let (tx, rx) = broadcast::channel(4);
        let mut sent = 0;
        for i in 0..20 {
            let path = format!("src/{i}.rs");
            let (_, events) = apply_all(
                &mut st,
                Some((&rt, &mut store)),
                vec![
                    req(
                        json!({ "request": "lock_acquire", "agent": agent, "path": path,
                                "mode": "write" }),
                    ),
                    req(json!({ "request": "lock_release", "agent": agent, "path": path })),
                ],
            );
            for e in events {
                sent += 1;
                let _ = tx.send(Arc::new(e));
            }
        }
        assert!(
            sent >= 40,
            "each commit recorded its acquire and release ({sent})"
        );
        drop(tx);
        // Returns once the channel is closed and drained.
        rt.block_on(follow(charts.clone(), reader.clone(), rx));

        let mut fresh = GanttBuilder::default();
        rt.block_on(Charts::new(&dir.path().join("other")).catch_up(&reader, &session, &mut fresh))
            .unwrap_or_else(|e| panic!("fold from the database: {e}"));
        let (fold, made) = charts.fold_of(&session);
        assert!(!made, "the follower kept the session's fold");
        let followed = rt.block_on(fold.lock()).clone();
        assert_eq!(
            followed.last_seq(),
            st.last_seq(),
            "the fold reached the last event"
        );
        assert_eq!(
            followed.folded(),
            fresh.folded(),
            "every chart event folded once, as from the database"
        );
        let (now, window) = (chrono::Utc::now(), Window::all(1000));
        assert_eq!(followed.snapshot(now, window), fresh.snapshot(now, window));
    }
}
