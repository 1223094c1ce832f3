//! Where a request goes, decided once: [`Route::of`] turns the wire's [`Request`] into a typed
//! route (as mini-redis's `Command::from_frame`), and each floor below takes only its own
//! kind of request and matches it whole: the daemon's own requests, the registry's (restore)
//! and retention's (gc), the read pool's ([`ReadRequest`]), and the project actor's
//! ([`ProjectRequest`], applied by `cmd::handle`). Pure: nothing here touches a file.

use std::time::Duration;

use maos_core::record::Todo;
use maos_core::{AgentOp, LockMode, PhaseOp, SessionOp, Strategy};
use maos_proto::{
    AgentExit, Elsewhere, ErrorBody, EventFilter, HookCall, LockList, LockWait, McpAction, McpCall,
    NoteKind, RecoveryReport, Reply, Request, Target,
};

/// Where one request goes.
pub enum Route {
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
    Restore { path: String, force: bool },
    /// `maos repair` (and `maos doctor`): the registry closes the project if it is open, the
    /// rows maos cannot read are found (and with `quarantine` moved aside), it opens again.
    Repair { quarantine: bool },
    /// `maos restore-file`: the connection finds the kept version and writes the file back
    /// (`keep.rs`), then the actor records it ([`ProjectRequest::FileRestored`]).
    RestoreFile {
        path: String,
        cwd: Option<String>,
        version: Option<String>,
    },
    /// `maos gc`: exports read from the read pool, then one purge per session by the actor.
    Gc { older_than: Duration, dry_run: bool },
    /// Answered from the read pool; the actor never sees it.
    Read(ReadRequest),
    /// An import: the read pool checks that the database has none of its ids (archived ones
    /// included), then the actor applies [`ProjectRequest::Import`].
    Import { path: String, text: String },
    /// A session's Gantt chart: the actor (or, archived, the database) names the session,
    /// then the project's charts answer (`crate::charts`).
    Gantt {
        session: String,
        from_ms: Option<i64>,
        to_ms: Option<i64>,
        width_px: u32,
    },
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
    Backup { path: String },
    History { limit: Option<u32> },
    Export { session: String },
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
            Self::History { .. } => Some(Reply::History(Vec::new())),
            _ => None,
        }
    }
}

/// `session show` and `events` of a session named by id or prefix, answered from the
/// database when the actor does not have it.
pub enum ArchivedRead {
    Session(String),
    Events {
        session: String,
        filter: EventFilter,
        limit: Option<u32>,
    },
}

/// The requests the project actor applies: the wire's project requests, field for field.
#[derive(Clone, Debug)]
pub enum ProjectRequest {
    SessionCreate {
        objective: String,
        strategy: Strategy,
        phases: Vec<String>,
    },
    SessionList {
        all: bool,
    },
    SessionShow {
        session: Option<String>,
    },
    SessionActivate {
        session: String,
    },
    SessionTransition {
        session: Option<String>,
        op: SessionOp,
        reason: Option<String>,
    },
    AgentRegister {
        session: Option<String>,
        role: String,
        task: String,
        depends_on: Vec<String>,
        parent: Option<String>,
    },
    AgentTransition {
        agent: String,
        op: AgentOp,
        exit_code: Option<i32>,
        reason: Option<String>,
    },
    AgentList {
        session: Option<String>,
    },
    PhaseAdd {
        session: Option<String>,
        name: String,
    },
    PhaseTransition {
        session: Option<String>,
        phase: Option<String>,
        op: PhaseOp,
        artifacts: serde_json::Value,
    },
    Pause {
        session: Option<String>,
        target: Target,
        reason: Option<String>,
        by: Option<String>,
    },
    Resume {
        session: Option<String>,
        target: Target,
        by: Option<String>,
    },
    Ps {
        all: bool,
    },
    Events {
        filter: EventFilter,
        limit: Option<u32>,
    },
    Status {
        session: Option<String>,
    },
    /// `path`: a project-relative key once [`ProjectRequest::resolve_paths`] ran.
    LockAcquire {
        agent: String,
        path: String,
        cwd: Option<String>,
        mode: LockMode,
        wait: LockWait,
        ttl_ms: Option<u64>,
    },
    LockRelease {
        agent: Option<String>,
        path: String,
        cwd: Option<String>,
        force: bool,
        by: Option<String>,
    },
    LockReleaseAll {
        agent: String,
    },
    LockList {
        session: Option<String>,
    },
    LockCheck {
        agent: Option<String>,
        path: String,
        cwd: Option<String>,
        mode: LockMode,
    },
    Heartbeat {
        agent: String,
    },
    Hook(Box<HookCall>),
    Brief {
        session: Option<String>,
    },
    Note {
        session: Option<String>,
        agent: Option<String>,
        kind: NoteKind,
        text: String,
    },
    AgentExited(Box<AgentExit>),
    SessionFromPlan {
        path: String,
        text: String,
        start: bool,
    },
    AgentLog {
        agent: String,
    },
    Recover {
        session: Option<String>,
    },
    Retry {
        target: Option<String>,
        by: Option<String>,
    },
    Validate {
        session: Option<String>,
    },
    SessionArchive {
        session: String,
    },
    Import {
        path: String,
        text: String,
    },
    Purge {
        session: String,
    },
    /// `refused`: why the action's path does not resolve (the caller is still named, so that
    /// the hook's record of the call answers it; see `cmd::mcp`).
    Mcp {
        call: Box<McpCall>,
        refused: Option<ErrorBody>,
    },
    Todos {
        agent: String,
        items: Vec<Todo>,
    },
    /// Not on the wire: `maos restore-file` put `path` back to `version` (the connection
    /// wrote it), keeping the content it replaced; recorded (`file_restored`).
    FileRestored(Box<maos_proto::FileRestoreReport>),
}

impl Route {
    /// Classify a request: the only match on the wire's [`Request`] in the daemon.
    pub fn of(body: Request) -> Route {
        use ProjectRequest as P;
        let project = Route::Project;
        let read = |r| Route::Project(ProjectRoute::Read(r));
        let actor = |request| {
            Route::Project(ProjectRoute::Actor {
                request,
                archived: None,
            })
        };
        match body {
            Request::Ping => Route::Daemon(DaemonRequest::Ping),
            Request::DaemonStatus => Route::Daemon(DaemonRequest::Status),
            Request::DaemonStop => Route::Daemon(DaemonRequest::Stop),
            Request::Restore { path, force } => project(ProjectRoute::Restore { path, force }),
            Request::Repair { quarantine } => project(ProjectRoute::Repair { quarantine }),
            Request::RestoreFile { path, cwd, version } => {
                project(ProjectRoute::RestoreFile { path, cwd, version })
            }
            Request::Gc {
                older_than_secs,
                dry_run,
            } => project(ProjectRoute::Gc {
                older_than: Duration::from_secs(older_than_secs),
                dry_run,
            }),
            Request::DbCheck => read(ReadRequest::DbCheck),
            Request::Backup { path } => read(ReadRequest::Backup { path }),
            Request::History { limit } => read(ReadRequest::History { limit }),
            Request::Export { session } => read(ReadRequest::Export { session }),
            Request::Import { path, text } => project(ProjectRoute::Import { path, text }),
            Request::SessionShow { session } => project(ProjectRoute::Actor {
                archived: session.clone().map(|s| Box::new(ArchivedRead::Session(s))),
                request: P::SessionShow { session },
            }),
            // An agent's events are the actor's alone: an archived session has no live agent.
            Request::Events { filter, limit } => project(ProjectRoute::Actor {
                archived: match (&filter.session, &filter.agent) {
                    (Some(session), None) => Some(Box::new(ArchivedRead::Events {
                        session: session.clone(),
                        filter: filter.clone(),
                        limit,
                    })),
                    _ => None,
                },
                request: P::Events { filter, limit },
            }),
            Request::SessionCreate {
                objective,
                strategy,
                phases,
            } => actor(P::SessionCreate {
                objective,
                strategy,
                phases,
            }),
            Request::SessionList { all } => actor(P::SessionList { all }),
            Request::SessionActivate { session } => actor(P::SessionActivate { session }),
            Request::SessionTransition {
                session,
                op,
                reason,
            } => actor(P::SessionTransition {
                session,
                op,
                reason,
            }),
            Request::AgentRegister {
                session,
                role,
                task,
                depends_on,
                parent,
            } => actor(P::AgentRegister {
                session,
                role,
                task,
                depends_on,
                parent,
            }),
            Request::AgentTransition {
                agent,
                op,
                exit_code,
                reason,
            } => actor(P::AgentTransition {
                agent,
                op,
                exit_code,
                reason,
            }),
            Request::AgentList { session } => actor(P::AgentList { session }),
            Request::PhaseAdd { session, name } => actor(P::PhaseAdd { session, name }),
            Request::PhaseTransition {
                session,
                phase,
                op,
                artifacts,
            } => actor(P::PhaseTransition {
                session,
                phase,
                op,
                artifacts,
            }),
            Request::Pause {
                session,
                target,
                reason,
                by,
            } => actor(P::Pause {
                session,
                target,
                reason,
                by,
            }),
            Request::Resume {
                session,
                target,
                by,
            } => actor(P::Resume {
                session,
                target,
                by,
            }),
            Request::Ps { all } => actor(P::Ps { all }),
            Request::Status { session } => actor(P::Status { session }),
            Request::LockAcquire {
                agent,
                path,
                cwd,
                mode,
                wait,
                ttl_ms,
            } => actor(P::LockAcquire {
                agent,
                path,
                cwd,
                mode,
                wait,
                ttl_ms,
            }),
            Request::LockRelease {
                agent,
                path,
                cwd,
                force,
                by,
            } => actor(P::LockRelease {
                agent,
                path,
                cwd,
                force,
                by,
            }),
            Request::LockReleaseAll { agent } => actor(P::LockReleaseAll { agent }),
            Request::LockList { session } => actor(P::LockList { session }),
            Request::LockCheck {
                agent,
                path,
                cwd,
                mode,
            } => actor(P::LockCheck {
                agent,
                path,
                cwd,
                mode,
            }),
            Request::Heartbeat { agent } => actor(P::Heartbeat { agent }),
            Request::Hook(call) => actor(P::Hook(call)),
            Request::Brief { session } => actor(P::Brief { session }),
            Request::Gantt {
                session,
                from_ms,
                to_ms,
                width_px,
            } => project(ProjectRoute::Gantt {
                session,
                from_ms,
                to_ms,
                width_px,
            }),
            Request::Note {
                session,
                agent,
                kind,
                text,
            } => actor(P::Note {
                session,
                agent,
                kind,
                text,
            }),
            Request::AgentExited(exit) => actor(P::AgentExited(exit)),
            Request::SessionFromPlan { path, text, start } => {
                actor(P::SessionFromPlan { path, text, start })
            }
            Request::AgentLog { agent } => actor(P::AgentLog { agent }),
            Request::Recover { session } => actor(P::Recover { session }),
            Request::Retry { target, by } => actor(P::Retry { target, by }),
            Request::Validate { session } => actor(P::Validate { session }),
            Request::SessionArchive { session } => actor(P::SessionArchive { session }),
            Request::Purge { session } => actor(P::Purge { session }),
            Request::Mcp(call) => actor(P::Mcp {
                call,
                refused: None,
            }),
            Request::Todos { agent, items } => actor(P::Todos { agent, items }),
        }
    }
}

impl ProjectRequest {
    /// Whether the request may create its project's state when the daemon has none: only
    /// what starts work there (a session, a plan, an agent CLI's hook call). Every other
    /// request on a project with nothing recorded is answered "no maos project" and creates
    /// nothing, so that reading never leaves an empty project behind.
    pub fn creates_project(&self) -> bool {
        matches!(
            self,
            Self::SessionCreate { .. } | Self::SessionFromPlan { .. } | Self::Hook(_)
        )
    }

    /// What a hook call that writes files is answered while the project's state cannot be
    /// loaded (`why`): refused, since maos cannot tell who holds those files (fail closed).
    /// None for every other request: it gets the error itself.
    pub fn unloadable_answer(&self, why: &str) -> Option<Reply> {
        let Self::Hook(call) = self else { return None };
        (call.event == "PreToolUse" && call.writes_files()).then(|| unloadable_denial(why))
    }

    /// What a list answers for a project with nothing recorded (no sessions, events, locks
    /// or problems), without creating it; None for the requests that need something there.
    pub fn empty_answer(&self) -> Option<Reply> {
        Some(match self {
            Self::Ps { .. } => Reply::Ps(Vec::new()),
            Self::SessionList { .. } => Reply::Sessions(Vec::new()),
            Self::Events { .. } => Reply::Events(Vec::new()),
            Self::LockList { .. } => Reply::Locks(LockList {
                locks: Vec::new(),
                waiters: Vec::new(),
            }),
            Self::Validate { .. } => Reply::Validation(Vec::new()),
            Self::Recover { .. } => Reply::Recovery(RecoveryReport::default()),
            _ => return None,
        })
    }

    /// Lock requests and a hook's writes name paths as the agent sees them; the actor works on
    /// project-relative keys. `resolve(path, cwd)` gives a path's key (it touches the
    /// filesystem, so the connection supplies it and the actor never runs it).
    /// A path longer than [`maos_core::MAX_PATH`] is refused here, before it is resolved.
    pub fn resolve_paths(
        &mut self,
        resolve: impl Fn(&str, &Option<String>) -> Result<String, ErrorBody>,
    ) -> Result<(), ErrorBody> {
        let resolve = |path: &str, cwd: &Option<String>| {
            maos_core::check_path_len(path)
                .map_err(|why| ErrorBody::new(maos_proto::ErrorCode::BadRequest, why))?;
            resolve(path, cwd)
        };
        match self {
            ProjectRequest::LockAcquire {
                path, cwd, mode, ..
            }
            | ProjectRequest::LockCheck {
                path, cwd, mode, ..
            } => {
                // A workspace lock is the whole project, whatever path was named.
                *path = match mode {
                    LockMode::Workspace => String::new(),
                    _ => resolve(path, cwd)?,
                };
                *cwd = None;
            }
            ProjectRequest::LockRelease { path, cwd, .. } => {
                *path = resolve(path, cwd)?;
                *cwd = None;
            }
            // An MCP call's path that does not resolve refuses the call once its caller is
            // named.
            ProjectRequest::Mcp { call, refused } => match &mut call.action {
                McpAction::LockAcquire {
                    path, cwd, mode, ..
                }
                | McpAction::LockCheck {
                    path, cwd, mode, ..
                } => {
                    match mode {
                        LockMode::Workspace => path.clear(),
                        _ => match resolve(path, cwd) {
                            Ok(key) => *path = key,
                            Err(e) => *refused = Some(e),
                        },
                    }
                    *cwd = None;
                }
                McpAction::LockRelease { path, cwd } => {
                    match resolve(path, cwd) {
                        Ok(key) => *path = key,
                        Err(e) => *refused = Some(e),
                    }
                    *cwd = None;
                }
                _ => {}
            },
            // A hook's writes: see `place_writes`.
            _ => {}
        }
        Ok(())
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
            let found = crate::shellcmd::targets(&command, call.paths.is_empty());
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
    pub fn outside_writes(&mut self) -> Option<&mut HookCall> {
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
