//! Where a request goes, decided once: [`Route::of`] turns the wire's [`Request`] into a typed
//! route (as mini-redis's `Command::from_frame`), one line per request, and each floor below
//! takes only its own kind of request: the daemon's own requests, the registry's (restore)
//! and retention's (gc), the read pool's ([`ReadRequest`]), and the project actor's
//! ([`ProjectRequest`]: the request's struct, applied by its handler, `cmd::Handle`). Pure:
//! nothing here touches a file.

use maos_core::{LockMode, LockPath};
use maos_proto::req::{self, LockAt};
use maos_proto::{Elsewhere, ErrorBody, McpAction, Reply, Request};

use crate::base::hookcall::Hook;
use crate::cmd::{Handle, Keyed, Mcp, Outcome};
use crate::txn::state::Txn;

/// Where one request goes.
pub enum Route {
    /// Refused before it goes anywhere: a lock request whose path does not resolve.
    Refused(ErrorBody),
    /// Answered by the daemon itself: no project.
    Daemon(DaemonRequest),
    /// About one project: the request must name its root.
    Project(ProjectRoute),
}

/// The requests about the daemon itself.
pub enum DaemonRequest {
    Ping,
    Status,
    /// Answered, then the daemon shuts down.
    Stop,
}

/// How a project's request is answered.
pub enum ProjectRoute {
    /// `maos restore`: the registry closes the project, replaces its database, opens it again.
    Restore(req::Restore),
    /// `maos repair` (and `maos doctor`): the registry closes the project if it is open, the
    /// rows maos cannot read are found (and with `quarantine` moved aside), it opens again.
    Repair(req::Repair),
    /// `maos restore-file`: the connection finds the kept version and writes the file back
    /// (`keep.rs`), then the actor records it (its report, `cmd/restore.rs`).
    RestoreFile(req::RestoreFile),
    /// `maos gc`: exports read from the read pool, then one purge per session by the actor.
    Gc(req::Gc),
    /// Answered from the read pool; the actor never sees it.
    Read(ReadRequest),
    /// An import: the read pool checks that the database has none of its ids (archived ones
    /// included), then the actor applies it.
    Import(req::Import),
    /// A session's Gantt chart: the actor (or, archived, the database) names the session,
    /// then the project's charts answer (`crate::project::charts`).
    Gantt(req::Gantt),
    /// `maos radar`: the project's radar answers (`crate::radar`), never the actor.
    Radar(req::Radar),
    /// Applied by the project actor. `archived`: where the actor does not have the session
    /// (it is archived), the answer the database gives instead.
    Actor {
        request: ProjectRequest,
        archived: Option<Box<ArchivedRead>>,
    },
}

/// The requests the read pool answers.
pub enum ReadRequest {
    DbCheck,
    Backup(req::Backup),
    History(req::History),
    Export(req::Export),
}

/// The refusal of a hook's write while the project's state cannot be loaded (`why`).
pub fn unloadable_denial(why: &str) -> Reply {
    Reply::Hook(maos_proto::HookAnswer {
        decision: maos_proto::HookDecision::Deny,
        reason: Some(format!(
            "maos refuses this write: {why}. Until then no file lock can be checked"
        )),
        context: None,
    })
}

impl ReadRequest {
    /// What the read answers for a project with nothing recorded, without creating it.
    pub fn empty_answer(&self) -> Option<Reply> {
        match self {
            Self::History(_) => Some(Reply::History(Vec::new())),
            _ => None,
        }
    }
}

/// `session show` and `events` of a session named by id or prefix, answered from the
/// database when the actor does not have it.
pub enum ArchivedRead {
    Session(String),
    /// Its filter names the session.
    Events(req::Events),
}

/// A request the project actor applies: an agent CLI's hook call, which the connection works
/// on first (its paths placed, its files elsewhere and its kept versions), or any other
/// request's struct, applied by its handler ([`Handle`]; the internal ones too: the radar's
/// notes, a restored file's report).
#[derive(Clone)]
pub enum ProjectRequest {
    Hook(Box<Hook>),
    Apply(Box<dyn Handle>),
}

/// How a lock request's path becomes its key: it touches the filesystem (symlinks,
/// worktrees), so the connection supplies it and the actor never runs it.
pub type Resolve<'a> = &'a dyn Fn(&LockAt) -> Result<LockPath, ErrorBody>;

/// The key of a lock request's path. A workspace lock is the whole project, whatever path was
/// named; a path longer than [`maos_core::MAX_PATH`] is refused before it is resolved.
fn key(at: &LockAt, mode: LockMode, resolve: Resolve) -> Result<LockPath, ErrorBody> {
    if mode == LockMode::Workspace {
        return Ok(LockPath::root());
    }
    maos_core::check_path_len(&at.path)
        .map_err(|why| ErrorBody::new(maos_proto::ErrorCode::BadRequest, why))?;
    resolve(at)
}

/// A request for the actor, applied by its handler.
fn actor(request: impl Handle) -> Route {
    Route::Project(ProjectRoute::Actor {
        request: ProjectRequest::new(request),
        archived: None,
    })
}

/// A lock request for the actor with its path's key, or refused when its path does not resolve.
fn keyed<T>(req: T, key: Result<LockPath, ErrorBody>) -> Route
where
    Keyed<T>: Handle,
{
    match key {
        Ok(key) => actor(Keyed { req, key }),
        Err(e) => Route::Refused(e),
    }
}

/// The key of an MCP action's path, if it has one.
fn mcp_key(action: &McpAction, resolve: Resolve) -> Result<Option<LockPath>, ErrorBody> {
    match action {
        McpAction::LockAcquire(a) => key(&a.at, a.mode, resolve).map(Some),
        McpAction::LockCheck { at, mode } => key(at, *mode, resolve).map(Some),
        McpAction::LockRelease(at) => key(at, LockMode::Write, resolve).map(Some),
        _ => Ok(None),
    }
}

impl Route {
    /// Classify a request: the only match on the wire's [`Request`] in the daemon. A lock
    /// request's path is resolved here, once, by `resolve`.
    pub fn of(body: Request, resolve: Resolve) -> Route {
        let project = Route::Project;
        let read = |r| Route::Project(ProjectRoute::Read(r));
        match body {
            Request::Ping => Route::Daemon(DaemonRequest::Ping),
            Request::DaemonStatus => Route::Daemon(DaemonRequest::Status),
            Request::DaemonStop => Route::Daemon(DaemonRequest::Stop),
            Request::Restore(r) => project(ProjectRoute::Restore(r)),
            Request::Repair(r) => project(ProjectRoute::Repair(r)),
            Request::RestoreFile(r) => project(ProjectRoute::RestoreFile(r)),
            Request::Gc(r) => project(ProjectRoute::Gc(r)),
            Request::DbCheck => read(ReadRequest::DbCheck),
            Request::Backup(r) => read(ReadRequest::Backup(r)),
            Request::History(r) => read(ReadRequest::History(r)),
            Request::Export(r) => read(ReadRequest::Export(r)),
            Request::Import(r) => project(ProjectRoute::Import(r)),
            Request::Gantt(r) => project(ProjectRoute::Gantt(r)),
            Request::Radar(r) => project(ProjectRoute::Radar(r)),
            Request::SessionShow(r) => project(ProjectRoute::Actor {
                archived: r
                    .session
                    .clone()
                    .map(|s| Box::new(ArchivedRead::Session(s))),
                request: ProjectRequest::new(r),
            }),
            // An agent's events are the actor's alone: an archived session has no live agent.
            Request::Events(r) => project(ProjectRoute::Actor {
                archived: match (&r.filter.session, &r.filter.agent) {
                    (Some(_), None) => Some(Box::new(ArchivedRead::Events(r.clone()))),
                    _ => None,
                },
                request: ProjectRequest::new(r),
            }),
            Request::Hook(call) => project(ProjectRoute::Actor {
                request: ProjectRequest::from(Hook::from(*call)),
                archived: None,
            }),
            Request::LockAcquire(r) => {
                let key = key(&r.lock.at, r.lock.mode, resolve);
                keyed(r, key)
            }
            Request::LockRelease(r) => {
                let key = key(&r.at, LockMode::Write, resolve);
                keyed(r, key)
            }
            Request::LockCheck(r) => {
                let key = key(&r.at, r.mode, resolve);
                keyed(r, key)
            }
            Request::Mcp(call) => actor(Mcp {
                key: mcp_key(&call.action, resolve),
                call,
            }),
            Request::SessionCreate(r) => actor(r),
            Request::SessionList(r) => actor(r),
            Request::SessionActivate(r) => actor(r),
            Request::SessionTransition(r) => actor(r),
            Request::AgentRegister(r) => actor(r),
            Request::AgentTransition(r) => actor(r),
            Request::AgentList(r) => actor(r),
            Request::PhaseAdd(r) => actor(r),
            Request::PhaseTransition(r) => actor(r),
            Request::Pause(r) => actor(r),
            Request::Resume(r) => actor(r),
            Request::Ps(r) => actor(r),
            Request::Status(r) => actor(r),
            Request::LockReleaseAll(r) => actor(r),
            Request::LockList(r) => actor(r),
            Request::Heartbeat(r) => actor(r),
            Request::Brief(r) => actor(r),
            Request::Note(r) => actor(r),
            Request::AgentExited(exit) => actor(*exit),
            Request::SessionFromPlan(r) => actor(r),
            Request::AgentLog(r) => actor(r),
            Request::Recover(r) => actor(r),
            Request::Retry(r) => actor(r),
            Request::Validate(r) => actor(r),
            Request::SessionArchive(r) => actor(r),
            Request::Purge(r) => actor(r),
            Request::Todos(r) => actor(r),
        }
    }
}

/// A hook call's request: the only way to make one, since a hook is no [`Handle`].
impl From<Hook> for ProjectRequest {
    fn from(call: Hook) -> Self {
        ProjectRequest::Hook(Box::new(call))
    }
}

impl ProjectRequest {
    /// A request for the actor, applied by its handler. A hook call is no [`Handle`] (see
    /// `cmd::apply_hook`), so it cannot come here: it is [`ProjectRequest::Hook`], made by
    /// `From<Hook>`, which the connection finds.
    pub fn new(request: impl Handle) -> Self {
        ProjectRequest::Apply(Box::new(request))
    }

    /// The handler of any request but a hook call: it tells what the connection and the actor
    /// need to know of its request. A hook call's facts are the methods below.
    fn handler(&self) -> Option<&dyn Handle> {
        match self {
            ProjectRequest::Hook(_) => None,
            ProjectRequest::Apply(request) => Some(&**request),
        }
    }

    /// Apply it (the actor, in the request's step of the batch's transaction).
    pub fn apply(self, tx: &mut Txn<'_>) -> Result<Outcome, ErrorBody> {
        match self {
            ProjectRequest::Hook(call) => crate::cmd::apply_hook(tx, *call),
            ProjectRequest::Apply(request) => request.handle(tx),
        }
    }

    /// Whether the request may create its project's state ([`Handle::creates_project`]): a
    /// hook call does (an agent CLI's first call starts maos's work there).
    pub fn creates_project(&self) -> bool {
        self.handler().is_none_or(|h| h.creates_project())
    }

    /// What it answers for a project with nothing recorded ([`Handle::empty_answer`]).
    pub fn empty_answer(&self) -> Option<Reply> {
        self.handler()?.empty_answer()
    }

    /// Whether it may wait for a lock: its connection is long-lived while it waits. Decided
    /// from the lock it asks for ([`Handle::acquire`]) by `ops::lock::may_wait`, the one
    /// place that decides it. A hook call's wait for the git index is bounded and keeps the
    /// hook's connection.
    pub fn waits(&self) -> bool {
        self.handler()
            .and_then(|h| h.acquire())
            .is_some_and(|a| crate::ops::lock::may_wait(a.wait))
    }

    /// The one lock path whose fleet turn it may take ([`Handle::path_turn`]).
    pub fn path_turn(&self) -> Option<&LockPath> {
        self.handler()?.path_turn()
    }

    /// What it asks of this machine, checked by the connection ([`Handle::check_here`]).
    pub fn check_here(&self, root: &str) -> Result<(), ErrorBody> {
        self.handler().map_or(Ok(()), |h| h.check_here(root))
    }

    /// What a hook call that writes files is answered while the project's state cannot be
    /// loaded (`why`): refused, since maos cannot tell who holds those files (fail closed).
    /// None for every other request: it gets the error itself.
    pub fn unloadable_answer(&self, why: &str) -> Option<Reply> {
        let Self::Hook(call) = self else { return None };
        (call.event == "PreToolUse" && call.writes_files()).then(|| unloadable_denial(why))
    }

    /// A hook call that names a file path longer than [`maos_core::MAX_PATH`] (a write's file,
    /// a file of a Codex patch): refused before anything is placed or recorded. A tool call
    /// is denied (the model is told why); any other event is an error (the client says it is
    /// not recorded).
    pub fn over_long_write(&self) -> Option<Result<Reply, ErrorBody>> {
        let ProjectRequest::Hook(call) = self else {
            return None;
        };
        let why = call
            .paths
            .iter()
            .find_map(|p| maos_core::check_path_len(p).err())?;
        Some(match call.event.as_str() {
            "PreToolUse" => Ok(Reply::Hook(maos_proto::HookAnswer {
                decision: maos_proto::HookDecision::Deny,
                reason: Some(format!("maos refuses this write: {why}")),
                context: None,
            })),
            _ => Err(ErrorBody::new(maos_proto::ErrorCode::BadRequest, why)),
        })
    }

    /// A hook's writes, each placed by `place(path, cwd)`: a file in the project becomes its
    /// key, a file outside it goes to `outside` (judged next by the connection, which knows
    /// the other projects and the settings), and one that may not be written sets
    /// `path_error`. None of this is an error of the request: a refusal is the hook
    /// handler's denial.
    ///
    /// A shell tool's command is read first (`shellcmd.rs`): the files it names as writes
    /// join `paths`; one it removes that `is_dir` says is a directory is locked as one.
    pub fn place_writes(&mut self, place: &impl Place) {
        let ProjectRequest::Hook(call) = self else {
            return;
        };
        let mut removed = Vec::new();
        if let Some(command) = call.command.take()
            && matches!(call.event.as_str(), "PreToolUse" | "PostToolUse")
        {
            // The client reads the plain forms of a patch through the shell itself, from the
            // directory it is applied in: then those are its files.
            let found = crate::base::shellcmd::targets(&command, call.paths.is_empty());
            for f in found.files {
                if !call.paths.contains(&f) {
                    call.paths.push(f);
                }
            }
            removed = found.removed;
            // Its git commands: their paths as keys of this project (a path elsewhere is not
            // this project's to guard), and the index they write.
            for mut g in found.git {
                g.paths = std::mem::take(&mut g.paths)
                    .iter()
                    .filter_map(|p| match place.write(p, &call.cwd) {
                        WritePlace::Project(key) => Some(key),
                        _ => None,
                    })
                    .collect();
                call.git.push(g);
            }
            call.git_index = found
                .index_dirs
                .iter()
                .find_map(|d| place.git_index(d, &call.cwd));
        }
        if !call.writes_files() {
            return;
        }
        for p in std::mem::take(&mut call.paths) {
            match place.write(&p, &call.cwd) {
                WritePlace::Project(key) => {
                    if removed.contains(&p) && place.is_dir(&key) {
                        call.directories.push(key.clone());
                    }
                    call.paths.push(key)
                }
                WritePlace::Outside(path) => call.outside.push(path),
                WritePlace::Elsewhere { project, key } => {
                    call.elsewhere.push(Elsewhere { project, path: key })
                }
                WritePlace::Refused(why) => {
                    call.path_error.get_or_insert(why);
                    call.paths.push(p);
                }
            }
        }
    }

    /// The hook call whose writes land outside its project, if this is one.
    pub fn outside_writes(&mut self) -> Option<&mut Hook> {
        match self {
            ProjectRequest::Hook(call)
                if !(call.outside.is_empty() && call.elsewhere.is_empty()) =>
            {
                Some(call)
            }
            _ => None,
        }
    }
}

/// What placing a hook's writes needs from the filesystem (the connection's, never the
/// actor's).
pub trait Place {
    /// Where a file the call writes (relative to `cwd`, or absolute) lands.
    fn write(&self, path: &str, cwd: &Option<String>) -> WritePlace;
    /// Whether the project's `key` is a directory.
    fn is_dir(&self, key: &str) -> bool;
    /// The key of the git index that a git command run in `dir` (relative to `cwd`) writes,
    /// if it is in this project.
    fn git_index(&self, dir: &str, cwd: &Option<String>) -> Option<String>;
}

/// Where one file a hook's call writes lands, as the connection found it.
pub enum WritePlace {
    /// In the project: its lock key.
    Project(String),
    /// Outside it: the absolute path, links resolved.
    Outside(String),
    /// In another project: its root and the file's key there.
    Elsewhere { project: String, key: String },
    /// It may not be written: why, for the model.
    Refused(String),
}

#[cfg(test)]
mod tests {
    use maos_proto::{LockList, RecoveryReport};
    use serde_json::Value;

    use super::*;

    /// What a request of `kind` answers where nothing is recorded.
    fn empty_answer(kind: &str) -> Option<Reply> {
        Some(match kind {
            "ps" => Reply::Ps(Vec::new()),
            "session_list" => Reply::Sessions(Vec::new()),
            "events" => Reply::Events(Vec::new()),
            "lock_list" => Reply::Locks(LockList {
                locks: Vec::new(),
                waiters: Vec::new(),
            }),
            "validate" => Reply::Validation(Vec::new()),
            "recover" => Reply::Recovery(RecoveryReport::default()),
            _ => return None,
        })
    }

    // A hook call is no `Handle`: `ProjectRequest::new(hook)` and `ProjectRequest::Apply` of a
    // hook do not compile, so no hook reaches the actor boxed as another request, unseen by
    // the connection's work on hooks (its paths placed, its budget and fail policy, its fleet
    // routing). `ProjectRequest::from(hook)` is the hook's variant.
    static_assertions::assert_not_impl_any!(Hook: Handle);

    #[test]
    fn a_hook_call_is_a_hook_request() {
        let request = ProjectRequest::from(Hook::default());
        assert!(matches!(request, ProjectRequest::Hook(_)));
        assert!(request.creates_project());
        assert!(!request.waits());
        assert!(request.path_turn().is_none());
    }

    /// Each request kind tells the connection and the actor what it told them when these facts
    /// were matches here, not `Handle`'s methods beside the handlers: every request of the
    /// wire's fixture (every kind, in its forms) that goes to the actor.
    #[test]
    fn each_request_tells_the_edge_what_it_needs() {
        let text = include_str!("../../../crates/maos-proto/tests/fixtures/requests.json");
        let cases: Vec<[Value; 2]> = serde_json::from_str(text).expect("the fixture");
        let resolve = |at: &LockAt| {
            LockPath::new(&at.path)
                .map_err(|e| ErrorBody::new(maos_proto::ErrorCode::BadRequest, e.to_string()))
        };
        let mut seen = std::collections::BTreeSet::new();
        for [input, _] in cases {
            let kind = input["request"].as_str().expect("a kind").to_string();
            let body: Request = serde_json::from_value(input.clone()).expect("a request");
            let Route::Project(ProjectRoute::Actor { request, .. }) = Route::of(body, &resolve)
            else {
                continue;
            };
            seen.insert(kind.clone());
            let acquire = match kind.as_str() {
                "lock_acquire" => Some(&input),
                "mcp" if input["action"]["action"] == "lock_acquire" => Some(&input["action"]),
                _ => None,
            };
            let waits = acquire
                .is_some_and(|a| a["wait"]["policy"].as_str().is_some_and(|p| p != "no_wait"));
            let h = &request;
            assert_eq!(
                h.creates_project(),
                matches!(
                    kind.as_str(),
                    "session_create" | "session_from_plan" | "hook"
                ),
                "{input}: creates its project"
            );
            let json = |r: Option<Reply>| r.map(|r| serde_json::to_value(r).expect("json"));
            assert_eq!(
                json(h.empty_answer()),
                json(empty_answer(&kind)),
                "{input}: its answer where nothing is recorded"
            );
            assert_eq!(h.waits(), waits, "{input}: waits");
            assert_eq!(
                h.path_turn().map(|k| k.as_str().to_string()),
                matches!(kind.as_str(), "lock_acquire" | "lock_release").then(|| {
                    if input["mode"] == "workspace" {
                        String::new()
                    } else {
                        "p".to_string()
                    }
                }),
                "{input}: its path's turn"
            );
        }
        // Every kind with a fact of its own was there to be checked.
        for kind in [
            "session_create",
            "session_from_plan",
            "hook",
            "ps",
            "session_list",
            "events",
            "lock_list",
            "validate",
            "recover",
            "lock_acquire",
            "lock_release",
            "mcp",
        ] {
            assert!(
                seen.contains(kind),
                "{kind} is not in the fixture: {seen:?}"
            );
        }
    }
}
