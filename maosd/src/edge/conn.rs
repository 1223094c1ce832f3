//! One client connection: handshake, then requests in order, or a subscription stream.
//!
//! A malformed frame gets an error reply and the connection goes on (the frame boundary is
//! intact); a frame over the cap or a truncated one ends the connection. Nothing a client sends
//! can affect another connection.

use std::sync::Arc;
use std::time::Duration;

use futures_util::{SinkExt, StreamExt};
use maos_proto::{
    ClientKind, ClientMsg, ErrorBody, ErrorCode, EventFilter, EventRecord, MAX_FRAME_LEN, Reply,
    ServerMsg, req,
};
use maos_store::EventQuery;
use tokio::net::UnixStream;
use tokio::sync::broadcast::error::RecvError;
use tokio_util::bytes::Bytes;
use tokio_util::codec::{Framed, LengthDelimitedCodec};
use tracing::{debug, info, warn};

use crate::base::error::{bad_request, internal, storage_error, unusable_backup};
use crate::base::lanes::{Lanes, Slot};
use crate::base::lockpath::Landing;
use crate::cmd::Outcome;
use crate::edge::daemon::Daemon;
use crate::project::reads;
use crate::project::router::{
    ArchivedRead, DaemonRequest, ProjectRequest, ProjectRoute, Route, WritePlace,
};
use crate::project::{ProjectHandle, Subscription};

type Conn = Framed<UnixStream, LengthDelimitedCodec>;

const HELLO_TIMEOUT: Duration = Duration::from_secs(10);

pub fn codec() -> LengthDelimitedCodec {
    LengthDelimitedCodec::builder()
        .length_field_length(4)
        .big_endian()
        .max_frame_length(MAX_FRAME_LEN)
        .new_codec()
}

async fn send(conn: &mut Conn, msg: &ServerMsg) -> bool {
    // The codec adds the length prefix (and refuses bodies over the cap).
    match serde_json::to_vec(msg) {
        Ok(buf) => conn.send(Bytes::from(buf)).await.is_ok(),
        Err(e) => {
            warn!(error = %e, "cannot encode a reply");
            false
        }
    }
}

async fn send_error(conn: &mut Conn, code: ErrorCode, message: String) {
    let _ = send(
        conn,
        &ServerMsg::Error {
            error: ErrorBody::new(code, message),
        },
    )
    .await;
}

/// What reading the next frame gave. Not boxed: each is matched at once, on the stack, and a
/// box would be one more allocation on every request's path.
#[allow(
    clippy::large_enum_variant,
    reason = "matched at once, never stored: a box would cost an allocation per frame"
)]
enum Next {
    Msg(ClientMsg),
    /// Valid frame, invalid message: answer and keep going.
    Bad {
        id: Option<u64>,
        message: String,
    },
    /// Over the cap, truncated, closed, or shutting down: stop.
    End,
}

async fn next(conn: &mut Conn, daemon: &Daemon) -> Next {
    // A frame already sent is read (and answered) before shutdown ends the connection.
    let frame = tokio::select! {
        biased;
        f = conn.next() => f,
        () = daemon.shutdown.cancelled() => return Next::End,
    };
    match frame {
        None => Next::End,
        Some(Err(e)) => {
            if e.kind() == std::io::ErrorKind::InvalidData {
                send_error(
                    conn,
                    ErrorCode::FrameTooLarge,
                    format!("frame refused: {e} (the cap is {MAX_FRAME_LEN} bytes)"),
                )
                .await;
            } else {
                debug!(error = %e, "connection read failed");
            }
            Next::End
        }
        Some(Ok(bytes)) => match serde_json::from_slice::<ClientMsg>(&bytes) {
            Ok(m) => Next::Msg(m),
            Err(e) => {
                let id = serde_json::from_slice::<serde_json::Value>(&bytes)
                    .ok()
                    .and_then(|v| v.get("id").and_then(serde_json::Value::as_u64));
                Next::Bad {
                    id,
                    message: maos_core::text::escape_controls(&format!("malformed request: {e}")),
                }
            }
        },
    }
}

/// Answer a connection from another user with one error frame, then close it: its client
/// then says why instead of "connection closed". What it sends is read only to be discarded:
/// closing a socket with unread data resets it, and the client would see the reset instead
/// of the reason. One second at most.
pub async fn refuse(stream: UnixStream, message: String) {
    let mut conn = Framed::new(stream, codec());
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        let _ = conn.next().await;
        send_error(&mut conn, ErrorCode::PermissionDenied, message).await;
        while let Some(Ok(_)) = conn.next().await {}
    })
    .await;
}

/// Tell a connection the daemon cannot take it why, in one error frame, then close it. What
/// the client sent meanwhile (a hook sends its request with its hello) is read and dropped
/// first: closing a socket with unread data resets it, and the client would see the reset
/// instead of the reason. One second at most.
async fn turn_away(mut conn: Conn, message: String) {
    debug!(%message, "connection refused");
    let _ = tokio::time::timeout(Duration::from_secs(1), async {
        send_error(&mut conn, ErrorCode::Unavailable, message).await;
        while let Some(Ok(_)) = conn.next().await {}
    })
    .await;
}

/// Whether a request waits for a lock: its connection is long-lived while it waits.
fn waits(route: &Route) -> bool {
    let Route::Project(ProjectRoute::Actor { request, .. }) = route else {
        return false;
    };
    request.waits()
}

/// The next frame; `None` when a connection that closes when idle had none for `idle`.
async fn next_within(conn: &mut Conn, daemon: &Daemon, slot: &Slot, idle: Duration) -> Next {
    if !slot.closes_when_idle() {
        return next(conn, daemon).await;
    }
    match tokio::time::timeout(idle, next(conn, daemon)).await {
        Ok(n) => n,
        Err(_) => {
            debug!(kind = slot.kind().as_str(), "idle connection closed");
            Next::End
        }
    }
}

pub async fn serve(stream: UnixStream, daemon: Arc<Daemon>, lanes: Arc<Lanes>) {
    let mut conn = Framed::new(stream, codec());
    let hello = tokio::time::timeout(HELLO_TIMEOUT, next(&mut conn, &daemon)).await;
    let ours = crate::base::version::protocol();
    let welcome = ServerMsg::Welcome {
        protocol: ours,
        daemon_version: env!("CARGO_PKG_VERSION").to_string(),
        pid: std::process::id(),
        started_by: daemon.config.started_by,
    };
    let kind = match hello {
        Ok(Next::Msg(ClientMsg::Hello {
            protocol, client, ..
        })) if protocol == ours => client,
        Ok(Next::Msg(ClientMsg::Hello {
            protocol,
            client_version,
            ..
        })) => {
            // The welcome first, whatever the versions: it tells the client who runs and who
            // started it, which decides whether that client may replace this daemon.
            info!(
                client_protocol = protocol,
                client_version, "refused a client that speaks another protocol"
            );
            if !send(&mut conn, &welcome).await {
                return;
            }
            let msg = format!(
                "protocol mismatch: this client (maos {client_version}) speaks protocol {protocol}, \
                 the running daemon (maosd {}, pid {}) speaks {ours}; run a maos and maosd of \
                 one release (`maos --version` shows both)",
                env!("CARGO_PKG_VERSION"),
                std::process::id()
            );
            send_error(&mut conn, ErrorCode::ProtocolMismatch, msg).await;
            return;
        }
        Ok(Next::End) | Err(_) => return,
        Ok(_) => {
            send_error(
                &mut conn,
                ErrorCode::BadRequest,
                "the first frame must be a hello with the protocol version".into(),
            )
            .await;
            return;
        }
    };
    // A connection its lane has no room for is told at once, never left waiting.
    let mut slot = match lanes.admit(kind) {
        Ok(slot) => slot,
        Err(message) => return turn_away(conn, message).await,
    };
    let idle = lanes.limits().idle;
    if !send(&mut conn, &welcome).await {
        return;
    }
    // The project this connection last talked to: most clients use one project, so the
    // registry's lock is taken once per connection, not once per request.
    let mut project_cache: Option<(String, ProjectHandle)> = None;
    loop {
        match next_within(&mut conn, &daemon, &slot, idle).await {
            Next::End => return,
            Next::Bad { id, message } => {
                let reply = ServerMsg::Response {
                    id: id.unwrap_or(0),
                    result: Err(bad_request(message)),
                };
                if !send(&mut conn, &reply).await {
                    return;
                }
            }
            Next::Msg(ClientMsg::Hello { .. }) => {
                send_error(&mut conn, ErrorCode::BadRequest, "hello sent twice".into()).await;
            }
            Next::Msg(ClientMsg::Request { id, project, body }) => {
                let route = Route::of(body, &|at| lock_key(project.as_deref(), at));
                let stop = matches!(route, Route::Daemon(DaemonRequest::Stop));
                // A lock wait holds its connection as long as it waits: in the long-lived lane.
                let declared = slot.kind();
                if waits(&route)
                    && let Err(message) = slot.become_kind(ClientKind::Waiter)
                {
                    let result = Err(ErrorBody::new(ErrorCode::Unavailable, message));
                    if !send(&mut conn, &ServerMsg::Response { id, result }).await {
                        return;
                    }
                    continue;
                }
                // A lock request may wait a long time: if the client goes away meanwhile, drop
                // the request (the actor then cancels the wait).
                let result = tokio::select! {
                    r = request(&daemon, &mut project_cache, project, route) => r,
                    _ = conn.next() => return,
                    () = daemon.shutdown.cancelled() => return,
                };
                // Back from a wait: the kind the hello said.
                let _ = slot.become_kind(declared);
                if !send(&mut conn, &ServerMsg::Response { id, result }).await {
                    return;
                }
                if stop {
                    daemon.shutdown.cancel();
                    return;
                }
            }
            Next::Msg(ClientMsg::Subscribe {
                id,
                project,
                filter,
            }) => {
                if let Err(message) = slot.become_kind(ClientKind::Follow) {
                    let result = Err(ErrorBody::new(ErrorCode::Unavailable, message));
                    let _ = send(&mut conn, &ServerMsg::Response { id, result }).await;
                    return;
                }
                subscribe(&mut conn, &daemon, id, project, filter).await;
                return;
            }
        }
    }
}

async fn request(
    daemon: &Daemon,
    cache: &mut Option<(String, ProjectHandle)>,
    project: Option<String>,
    route: Route,
) -> Result<Reply, ErrorBody> {
    let call = match route {
        Route::Daemon(DaemonRequest::Ping) => return Ok(Reply::Pong),
        Route::Daemon(DaemonRequest::Status) => return Ok(Reply::Daemon(daemon.status().await)),
        Route::Daemon(DaemonRequest::Stop) => return Ok(Reply::Done),
        Route::Refused(e) => return Err(e),
        Route::Project(call) => call,
    };
    let root = project.ok_or_else(|| bad_request("this request needs a project root"))?;
    match call {
        ProjectRoute::Restore(req::Restore { path, force }) => {
            let from = std::path::Path::new(&path);
            let check = maos_store::check_backup(from)
                .await
                .map_err(|e| unusable_backup(&e))?;
            let previous = daemon.projects.restore(&root, from, force).await?;
            *cache = None;
            Ok(Reply::Restored(maos_proto::RestoreReport {
                from: path,
                previous: previous.display().to_string(),
                sessions: check.sessions,
                events: check.events,
            }))
        }
        ProjectRoute::RestoreFile(req::RestoreFile { path, cwd, version }) => {
            crate::txn::keep::check_restore_path(&path)?;
            let key = lock_key(Some(&root), &req::LockAt { path, cwd })?.to_string();
            let store = crate::txn::keep::store_dir(&daemon.config.home, &root);
            let real_root = std::fs::canonicalize(&root).unwrap_or_else(|_| root.clone().into());
            let handle = cached(daemon, cache, root, false).await?;
            let (sha, holder) =
                crate::txn::keep::restore_choice(handle.kept(), &store, &key, version.as_deref())?;
            let report = tokio::task::spawn_blocking(move || {
                crate::txn::keep::restore(&store, &real_root, &key, &sha, holder)
            })
            .await
            .map_err(|e| internal(format_args!("maos restore-file: {e}")))??;
            actor(handle, ProjectRequest::new(report), None).await
        }
        ProjectRoute::Repair(req::Repair { quarantine }) => {
            let report = daemon.projects.repair(&root, quarantine).await;
            *cache = None;
            report.map(Reply::Repaired)
        }
        ProjectRoute::Gc(req::Gc {
            older_than_secs,
            dry_run,
        }) => {
            let handle = daemon.projects.existing(&root).await?;
            let sync = daemon.config.synchronous == maos_store::Synchronous::Full;
            crate::project::gc::run(
                &daemon.config.home,
                &root,
                &handle,
                Duration::from_secs(older_than_secs),
                dry_run,
                sync,
            )
            .await
            .map(Reply::Gc)
        }
        ProjectRoute::Read(read) => match cached(daemon, cache, root, false).await {
            Ok(handle) => reads::answer(handle, read).await,
            Err(e) if e.code == ErrorCode::NotFound => read.empty_answer().ok_or(e),
            Err(e) => Err(e),
        },
        ProjectRoute::Import(import) => {
            let handle = cached(daemon, cache, root, true).await?;
            reads::import_check(handle, &import.path, &import.text).await?;
            actor(handle, ProjectRequest::new(import), None).await
        }
        ProjectRoute::Gantt(req::Gantt {
            session,
            from_ms,
            to_ms,
            width_px,
        }) => {
            let window =
                maos_core::gantt::Window::checked(from_ms, to_ms, width_px).map_err(bad_request)?;
            let handle = cached(daemon, cache, root, false).await?;
            let found = actor(
                handle,
                ProjectRequest::new(req::SessionShow {
                    session: Some(session.clone()),
                }),
                Some(&ArchivedRead::Session(session)),
            )
            .await?;
            let Reply::Session(s) = found else {
                return Err(internal(
                    "a session was asked for and something else came back",
                ));
            };
            let ended = s.ended_at.map(|t| t.timestamp_millis());
            handle
                .chart(s.id.as_str(), ended, window)
                .await
                .map(|g| Reply::Gantt(Box::new(g)))
        }
        ProjectRoute::Radar(r) => match cached(daemon, cache, root, false).await {
            Ok(handle) => Ok(Reply::Radar(handle.radar().pairs(r.agent.as_deref()))),
            Err(e) if e.code == ErrorCode::NotFound => Ok(Reply::Radar(Vec::new())),
            Err(e) => Err(e),
        },
        ProjectRoute::Actor {
            mut request,
            archived,
        } => {
            if let Some(refused) = request.over_long_write() {
                return refused;
            }
            let kept_store = crate::txn::keep::store_dir(&daemon.config.home, &root);
            let canonical = std::fs::canonicalize(&root);
            request.place_writes(&Placer {
                root: canonical
                    .as_deref()
                    .map_err(|e| format!("project root {root}: {e}")),
            });
            let real_root = canonical.unwrap_or_else(|_| root.clone().into());
            if let Some(call) = request.outside_writes() {
                judge_outside(daemon, &root, call).await;
            }
            // What a plan asks of this machine (its programs, its directories), likewise.
            request.check_here(&root)?;
            let create = request.creates_project();
            // A write through a hook is refused while the project's state cannot be loaded,
            // also when that shows in a fleet's refresh of an open project.
            let hook_write = request.unloadable_answer("").is_some();
            // A hook in a fleet is answered within its budget (fleet.rs).
            let budget = crate::edge::fleet::Budget::of(daemon.projects.fleet(), &request);
            // Files whose lock lives in another project: taken there first (scope.rs).
            if let ProjectRequest::Hook(call) = &request
                && let Some(answer) = crate::edge::scope::take_elsewhere(daemon, call, budget).await
            {
                return answer;
            }
            // The window's events that other projects it wrote in must hear too.
            let follow = match &request {
                ProjectRequest::Hook(call) if crate::edge::scope::follows(call) => {
                    Some(call.clone())
                }
                _ => None,
            };
            let answer = match budget.bound(cached(daemon, cache, root, create)).await {
                Ok(handle) => {
                    if let ProjectRequest::Hook(call) = &mut request
                        && call.writes_files()
                    {
                        crate::edge::scope::link_held(handle, &real_root, call).await;
                    }
                    // After the call: the files it wrote and, after a shell command, the
                    // held ones, hashed here (never in the actor).
                    if let ProjectRequest::Hook(call) = &mut request {
                        crate::txn::keep::look_after(handle.kept(), kept_store, &real_root, call)
                            .await;
                    }
                    let hook = matches!(request, ProjectRequest::Hook(_));
                    match budget
                        .bound(actor(handle, request, archived.as_deref()))
                        .await
                    {
                        Err(e) if e.code == ErrorCode::ProjectUnloadable && hook_write => {
                            Ok(crate::project::router::unloadable_denial(&e.message))
                        }
                        // A git command's wait for its turn at the index (ops/hook/git.rs).
                        r if hook => git_turn(r),
                        r => r,
                    }
                }
                // Nothing recorded there: a list is empty; anything else is not found.
                Err(e) if e.code == ErrorCode::NotFound && !create => {
                    request.empty_answer().ok_or(e)
                }
                Err(e) if e.code == ErrorCode::ProjectUnloadable => {
                    request.unloadable_answer(&e.message).ok_or(e)
                }
                Err(e) => Err(e),
            };
            if let Some(call) = follow {
                crate::edge::scope::fan_out(daemon, &call, &real_root.to_string_lossy()).await;
            }
            answer
        }
    }
}

/// The handle of the project at `root`: the connection's last one when it is that project's.
/// A project with nothing recorded is created only when `create`.
async fn cached<'a>(
    daemon: &Daemon,
    cache: &'a mut Option<(String, ProjectHandle)>,
    root: String,
    create: bool,
) -> Result<&'a ProjectHandle, ErrorBody> {
    let entry = match cache.take() {
        // A closed handle: its project was restored meanwhile; the next get opens it anew.
        Some((r, h)) if r == root && !h.is_closed() => (r, h),
        old => {
            *cache = old;
            let h = match create {
                true => daemon.projects.get(&root).await?,
                false => daemon.projects.existing(&root).await?,
            };
            (root, h)
        }
    };
    Ok(&cache.insert(entry).1)
}

/// A request the actor applies; one it answers "not found" is answered from the database
/// when `archived` says how (an archived session).
async fn actor(
    handle: &ProjectHandle,
    request: ProjectRequest,
    archived: Option<&ArchivedRead>,
) -> Result<Reply, ErrorBody> {
    let outcome = match handle.request(request).await {
        Err(e) if e.code == ErrorCode::NotFound => {
            return match archived {
                Some(read) => reads::archived(handle, read).await,
                None => Err(e),
            };
        }
        other => other?,
    };
    match outcome {
        Outcome::Reply(r) => Ok(*r),
        Outcome::History(q) => handle
            .reader()
            .events(&q)
            .await
            .map(Reply::Events)
            .map_err(|e| storage_error(&e)),
        // The actor keeps parked replies and answers them itself.
        Outcome::Park { .. } => Err(internal(
            "a parked lock wait was answered without its outcome",
        )),
    }
}

/// The project-relative key of a path an agent named (relative to `cwd`, or to the root).
fn lock_key(root: Option<&str>, at: &req::LockAt) -> Result<maos_core::LockPath, ErrorBody> {
    let root = root.ok_or_else(|| bad_request("this request needs a project root"))?;
    let root = std::fs::canonicalize(root)
        .map_err(|e| ErrorBody::new(ErrorCode::NotFound, format!("project root {root}: {e}")))?;
    let cwd = at
        .cwd
        .as_deref()
        .map_or_else(|| root.clone(), std::path::PathBuf::from);
    crate::base::lockpath::resolve(&root, &cwd, &at.path)
}

/// A hook call that waited for its turn at the git index: granted, it goes on; a wait that
/// ran out (or ended a deadlock) is denied, saying whose command holds the index.
fn git_turn(reply: Result<Reply, ErrorBody>) -> Result<Reply, ErrorBody> {
    use maos_proto::{HookAnswer, HookDecision};
    let answer = |decision, reason| {
        Ok(Reply::Hook(HookAnswer {
            decision,
            reason,
            context: None,
        }))
    };
    match reply {
        Ok(Reply::Lock(_)) => answer(HookDecision::None, None),
        Err(e) if matches!(e.code, ErrorCode::LockTimeout | ErrorCode::Deadlock) => answer(
            HookDecision::Deny,
            Some(format!(
                "maos: another agent's git command is using this repository's index, so this one would fail on index.lock: {}. Retry it in a moment.",
                e.message.trim_end_matches('.')
            )),
        ),
        r => r,
    }
}

/// [`crate::project::router::Place`] for the project at `root`: its canonical path, or why there is
/// none (then every write is refused).
struct Placer<'a> {
    root: Result<&'a std::path::Path, String>,
}

impl crate::project::router::Place for Placer<'_> {
    /// Where a file the call writes lands (relative to `cwd`, or to the root).
    fn write(&self, path: &str, cwd: &Option<String>) -> WritePlace {
        let root = match &self.root {
            Ok(root) => *root,
            Err(why) => return WritePlace::Refused(why.clone()),
        };
        let cwd = cwd
            .as_deref()
            .map_or_else(|| root.to_path_buf(), std::path::PathBuf::from);
        match crate::base::lockpath::place(root, &cwd, path) {
            Ok(Landing::Project(key)) => WritePlace::Project(key.as_str().to_string()),
            Ok(Landing::Outside(real)) => match real.to_str() {
                Some(p) => WritePlace::Outside(p.to_string()),
                None => WritePlace::Refused(format!("{}: not UTF-8", real.display())),
            },
            Ok(Landing::Elsewhere { project, key }) => match project.to_str() {
                Some(p) => WritePlace::Elsewhere {
                    project: p.to_string(),
                    key: key.as_str().to_string(),
                },
                None => WritePlace::Refused(format!("{}: not UTF-8", project.display())),
            },
            Err(e) => WritePlace::Refused(e.message),
        }
    }

    fn is_dir(&self, key: &str) -> bool {
        self.root.as_ref().is_ok_and(|root| root.join(key).is_dir())
    }

    fn git_index(&self, dir: &str, cwd: &Option<String>) -> Option<String> {
        let root = *self.root.as_ref().ok()?;
        let cwd = cwd
            .as_deref()
            .map_or_else(|| root.to_path_buf(), std::path::PathBuf::from);
        crate::base::lockpath::git_index(root, &cwd.join(dir))
    }
}

/// A hook's writes outside its project: refused when they are in another project maos knows,
/// or when `outside_project` denies them (the project's `.maos/config.toml`, else the
/// daemon's setting); else left in `call.outside`, to be written unlocked and recorded. A
/// refused call names every file it writes in `paths`, for its denial's event.
async fn judge_outside(daemon: &Daemon, root: &str, call: &mut crate::base::hookcall::Hook) {
    use crate::base::lockpath::{OutsidePolicy, outside_refusal, project_policy};
    let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.into());
    let known: Vec<std::path::PathBuf> = daemon
        .projects
        .known_roots()
        .await
        .iter()
        .filter_map(|r| std::fs::canonicalize(r).ok())
        .collect();
    let own = root.join(".maos").join("config.toml").display().to_string();
    let policy = match project_policy(&root) {
        Ok(Some(OutsidePolicy::Deny)) => (OutsidePolicy::Deny, own.as_str()),
        Ok(_) => (
            daemon.config.outside_project,
            daemon.config.outside_project_from.as_str(),
        ),
        // Whether the project allows it cannot be told: never silently allowed.
        Err(e) => {
            call.path_error.get_or_insert(format!(
                "{e}; maos cannot tell whether this project allows writes outside it"
            ));
            (OutsidePolicy::Deny, own.as_str())
        }
    };
    for p in &call.outside {
        if let Some(why) = outside_refusal(std::path::Path::new(p), &root, &known, policy) {
            call.path_error.get_or_insert(why);
        }
    }
    // A file of another project is locked there; one outside this project's directory is
    // written only where the policy allows writing outside it.
    for e in &call.elsewhere {
        let file = std::path::Path::new(&e.project).join(&e.path);
        if !file.starts_with(&root) && policy.0 == OutsidePolicy::Deny {
            call.path_error.get_or_insert(format!(
                "{} is outside the project {}, and outside_project = \"deny\" ({}) refuses writes there; write inside the project",
                file.display(),
                root.display(),
                policy.1
            ));
        }
    }
    if call.path_error.is_some() {
        let refused = std::mem::take(&mut call.outside);
        call.paths.extend(refused);
    }
}

fn matches(q: &EventQuery, e: &EventRecord) -> bool {
    q.session_id
        .as_deref()
        .is_none_or(|s| e.session_id.as_ref().is_some_and(|x| x.as_str() == s))
        && q.agent_id
            .as_deref()
            .is_none_or(|a| e.agent_id.as_ref().is_some_and(|x| x.as_str() == a))
        && (q.types.is_empty() || q.types.iter().any(|t| t == &e.kind))
        && q.since_us.is_none_or(|s| maos_store::to_us(&e.ts) >= s)
        && q.until_us.is_none_or(|u| maos_store::to_us(&e.ts) < u)
        && q.before_seq.is_none_or(|b| e.seq < b)
        && q.path
            .as_deref()
            .is_none_or(|p| maos_core::events::path_matches(&e.data, p))
        && (q.paths.is_empty()
            || q.paths
                .iter()
                .any(|p| maos_core::events::path_matches(&e.data, p)))
        && q.text
            .as_deref()
            .is_none_or(|t| maos_core::events::text_matches(&e.kind, &e.data, t))
}

/// The events that end a session.
const SESSION_ENDS: [&str; 3] = ["session_completed", "session_failed", "session_cancelled"];

/// Whether `e` ends the session the subscription follows.
fn ends_session(q: &EventQuery, e: &EventRecord) -> bool {
    SESSION_ENDS.contains(&e.kind.as_str())
        && q.session_id
            .as_deref()
            .is_some_and(|s| e.session_id.as_ref().is_some_and(|x| x.as_str() == s))
}

/// Whether the subscription's session ended after event `after`, whatever its filter shows.
async fn session_ended_after(reader: &maos_store::Reader, q: &EventQuery, after: u64) -> bool {
    let ends = EventQuery {
        session_id: q.session_id.clone(),
        types: SESSION_ENDS.iter().map(|t| t.to_string()).collect(),
        after_seq: Some(after),
        limit: Some(1),
        ..EventQuery::default()
    };
    q.session_id.is_some() && reader.events(&ends).await.is_ok_and(|e| !e.is_empty())
}

/// The end of a subscription that asked to end with its session: `Done`, then the close.
async fn end_of_stream(conn: &mut Conn, id: u64) {
    let done = ServerMsg::Response {
        id,
        result: Ok(Reply::Done),
    };
    let _ = send(conn, &done).await;
}

async fn subscribe(
    conn: &mut Conn,
    daemon: &Daemon,
    id: u64,
    project: String,
    filter: EventFilter,
) {
    // A project with nothing recorded yet is not created by watching it: the subscription is
    // accepted and waits for the project's first session or hook call (not one session's
    // events: that session cannot exist there).
    let mut acked = false;
    let handle = loop {
        let opened = daemon.projects.opened().notified();
        tokio::pin!(opened);
        opened.as_mut().enable();
        match daemon.projects.existing(&project).await {
            Err(e)
                if e.code == ErrorCode::NotFound
                    && filter.session.is_none()
                    && filter.agent.is_none() =>
            {
                if !acked {
                    let ok = ServerMsg::Response {
                        id,
                        result: Ok(Reply::Subscribed),
                    };
                    if !send(conn, &ok).await {
                        return;
                    }
                    acked = true;
                }
                tokio::select! {
                    () = opened => {}
                    _ = conn.next() => return,
                    () = daemon.shutdown.cancelled() => return,
                }
            }
            other => break other,
        }
    };
    let ends = filter.until_session_ends;
    let sub = match handle {
        Ok(h) => h.subscribe(filter).await,
        Err(e) => Err(e),
    };
    let Subscription {
        mut query,
        mut rx,
        reader,
        ended,
    } = match sub {
        Ok(s) => s,
        Err(e) => {
            let _ = send(conn, &ServerMsg::Response { id, result: Err(e) }).await;
            return;
        }
    };
    if !acked
        && !send(
            conn,
            &ServerMsg::Response {
                id,
                result: Ok(Reply::Subscribed),
            },
        )
        .await
    {
        return;
    }
    // History first (everything committed so far), then live events; `last` removes overlap.
    let mut last = query.after_seq.unwrap_or(0);
    let mut backlog = true;
    loop {
        if backlog {
            // Whether its session ended before (or, for a subscriber that fell behind, while
            // it was catching up), looked at BEFORE the events are read: an end committed
            // between the two reads is then among the events sent, never skipped.
            let mut end = ends && (ended || session_ended_after(&reader, &query, last).await);
            query.after_seq = Some(last);
            let events = match reader.events(&query).await {
                Ok(e) => e,
                Err(e) => {
                    let result = Err(storage_error(&e));
                    let _ = send(conn, &ServerMsg::Response { id, result }).await;
                    return;
                }
            };
            for event in events {
                last = last.max(event.seq);
                // An end committed after the look above: the live copy of it, no newer than
                // `last`, would be skipped.
                end |= ends && ends_session(&query, &event);
                if !send(conn, &ServerMsg::Event { id, event }).await {
                    return;
                }
            }
            backlog = false;
            // Nothing more will come.
            if end {
                end_of_stream(conn, id).await;
                return;
            }
        }
        let live = tokio::select! {
            r = rx.recv() => r,
            // The client closing its end (or sending anything) ends the stream.
            _ = conn.next() => return,
            () = daemon.shutdown.cancelled() => return,
        };
        match live {
            Ok(event) if event.seq > last => {
                last = event.seq;
                if matches(&query, &event)
                    && !send(
                        conn,
                        &ServerMsg::Event {
                            id,
                            event: (*event).clone(),
                        },
                    )
                    .await
                {
                    return;
                }
                if ends && ends_session(&query, &event) {
                    end_of_stream(conn, id).await;
                    return;
                }
            }
            Ok(_) => {}
            // Too slow for the live buffer: catch up from the database.
            Err(RecvError::Lagged(_)) => backlog = true,
            Err(RecvError::Closed) => return,
        }
    }
}
