//! The MCP tools and resources: each reads its arguments ([`crate::args`]), names its caller
//! when it acts for one ([`Maos::caller`]), sends one daemon request and answers with the
//! reply's JSON. Every failure is a tool error (`isError`) of one sentence, and changes nothing.

use maos_proto::req;
use std::time::Duration;

use maos_core::LockMode;
use maos_core::record::{ProcessRef, Todo};
use maos_proto::{
    ErrorBody, ErrorCode, EventFilter, LockWait, McpAction, McpCall, McpCaller, McpEvidence, Reply,
    Request,
};
use rmcp::handler::server::common::schema_for_input;
use rmcp::handler::server::router::tool::ToolRouter;
use rmcp::model::{
    CallToolResult, ContentBlock as Content, ErrorData, JsonObject, ListResourcesResult,
    PaginatedRequestParams, ReadResourceRequestParams, ReadResourceResponse, ReadResourceResult,
    RequestMetaObject, Resource, ResourceContents, ServerCapabilities, ServerConfig,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler, tool, tool_handler, tool_router};
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use crate::args::{self, *};
use crate::daemon::{Asked, Daemon, Lane, MAX_WAITS};

/// The `_meta` key under which Claude Code sends a call's tool use id.
pub const CLAUDE_TOOL_USE_ID: &str = "claudecode/toolUseId";

const INSTRUCTIONS: &str = "maos coordinates the agents working in this project: it enforces file write locks between them (a write to a file another agent holds is refused by the CLI's hook), tracks what each agent does, and keeps a briefing of decisions and progress. Call `status` or `brief` to see who does what; take a lock with `lock_acquire` before editing files others may touch, and release it when done; report your task list with `progress` and decisions with `note`.";

#[derive(Clone)]
pub struct Maos {
    daemon: Daemon,
    /// The CLI process that runs this server (its window, to maos).
    window: Option<ProcessRef>,
    /// `MAOS_AGENT_ID`: the agent `maos run` started this server's CLI as.
    agent_env: Option<String>,
    /// Cancelled when the client has gone (this server's stdin closed): its lock waits end.
    gone: CancellationToken,
    /// Built once; `#[tool_handler]`'s `call_tool` and `list_tools` use it.
    tool_router: ToolRouter<Self>,
}

/// A tool's failure: one sentence for the model.
fn fail(message: impl Into<String>) -> CallToolResult {
    let message = message.into();
    CallToolResult::error(vec![Content::text(message)])
}

fn from_daemon(e: ErrorBody) -> CallToolResult {
    fail(maos_core::text::escape_controls(&e.message))
}

/// A tool's answer: the JSON of what the daemon said (and whose call it was).
fn ok(value: Value) -> CallToolResult {
    let text = serde_json::to_string_pretty(&value).unwrap_or_else(|_| value.to_string());
    CallToolResult::success(vec![Content::text(text)])
}

/// The daemon's answer to a call that acts for its caller: whose call it was, and the reply.
fn mcp_reply(tool: &str, reply: Reply) -> Result<(Option<Caller>, Reply), ErrorBody> {
    match reply {
        Reply::Mcp { caller, reply } => Ok((caller, *reply)),
        _ => Err(ErrorBody::new(
            ErrorCode::Internal,
            format!("maosd gave an unexpected answer to {tool}"),
        )),
    }
}

/// Who the call was made for, as the answer says it.
fn caller_json(c: &Caller) -> Value {
    json!({ "agent": c.agent, "rule": c.rule, "how": c.rule.words() })
}

type ToolResult = Result<CallToolResult, ErrorData>;

/// Whose call it was: the agent, its session, and the rule that named it.
type Caller = McpCaller;

impl Maos {
    pub fn new(
        daemon: Daemon,
        window: Option<ProcessRef>,
        agent_env: Option<String>,
        gone: CancellationToken,
    ) -> Maos {
        Maos {
            daemon,
            window,
            agent_env,
            gone,
            tool_router: Self::tool_router(),
        }
    }

    async fn ask(&self, body: Request) -> Result<Reply, CallToolResult> {
        self.daemon
            .ask(body, Duration::ZERO)
            .await
            .map_err(from_daemon)
    }

    /// Make one call for its caller, in one daemon request: the daemon names the agent (see
    /// `maos_core::mcp`) from the call's tool use id, its claim key, `MAOS_AGENT_ID` and this
    /// server's CLI process, and applies `action` for it. The answer is whose call it was
    /// (when the action needs no caller and maos cannot tell, none) and the action's reply.
    async fn act(
        &self,
        meta: &RequestMetaObject,
        tool: &str,
        args: &JsonObject,
        action: McpAction,
    ) -> Result<(Option<Caller>, Reply), ErrorBody> {
        let body = self.mcp_request(meta, tool, args, action);
        let reply = self.daemon.ask(body, Duration::ZERO).await?;
        mcp_reply(tool, reply)
    }

    /// The daemon request of a call that acts for its caller (see [`Maos::act`]).
    fn mcp_request(
        &self,
        meta: &RequestMetaObject,
        tool: &str,
        args: &JsonObject,
        action: McpAction,
    ) -> Request {
        let tool_use_id = meta
            .get(CLAUDE_TOOL_USE_ID)
            .and_then(Value::as_str)
            .filter(|s| !s.is_empty() && s.len() <= 200)
            .map(str::to_string);
        let claim = self.window.map(|process| maos_core::mcp::ClaimKey {
            process,
            tool: tool.to_string(),
            args: maos_core::mcp::args_digest(&Value::Object(args.clone())),
        });
        let caller = McpEvidence {
            tool_use_id,
            claim,
            maos_agent: self.agent_env.clone(),
            window: self.window,
        };
        Request::Mcp(Box::new(McpCall { caller, action }))
    }

    /// Read `T` from the arguments, or the tool error saying why not.
    fn read<T: DeserializeOwned>(tool: &str, a: &JsonObject) -> Result<T, CallToolResult> {
        args::read(tool, a).map_err(fail)
    }

    /// The project root (relative paths are read from it).
    fn cwd(&self) -> Option<String> {
        self.daemon.project().map(str::to_string)
    }

    /// Release a lock granted to a call that was cancelled meanwhile (its caller never learns
    /// of it): as maosd does for a waiter whose connection closed.
    async fn give_back(&self, lock: maos_core::record::LockView) {
        let body = Request::LockRelease(req::LockRelease {
            agent: Some(lock.holder.to_string()),
            at: req::LockAt {
                path: lock.path,
                cwd: None,
            },
            force: false,
            by: Some("maos mcp: the call that took it was cancelled".to_string()),
        });
        let _ = self.daemon.ask(body, Duration::ZERO).await;
    }

    /// [`Maos::give_back`] the lock in `reply`, if it is a grant.
    async fn give_back_grant(&self, reply: Option<Reply>) {
        if let Some(lock) = reply.and_then(|r| match mcp_reply("", r) {
            Ok((_, Reply::Lock(lock))) => Some(lock),
            _ => None,
        }) {
            self.give_back(lock).await;
        }
    }

    async fn lock_acquire_(
        &self,
        meta: RequestMetaObject,
        ct: CancellationToken,
        a: JsonObject,
    ) -> CallToolResult {
        let r: AcquireArgs = match Self::read("lock_acquire", &a) {
            Ok(r) => r,
            Err(e) => return e,
        };
        if let Err(e) = args::text("the path", &r.path, MAX_PATH) {
            return fail(e);
        }
        let wait_ms = r.wait_ms.unwrap_or(0);
        if wait_ms > MAX_WAIT_MS || r.ttl_ms.is_some_and(|t| t > 24 * 3600 * 1000) {
            return fail(format!(
                "wait_ms is at most {MAX_WAIT_MS} and ttl_ms at most 86400000 (one day)"
            ));
        }
        let action = McpAction::LockAcquire(req::Acquire {
            at: req::LockAt {
                path: r.path,
                cwd: self.cwd(),
            },
            mode: r.mode.into(),
            wait: match wait_ms {
                0 => LockWait::NoWait,
                ms => LockWait::Wait { ms },
            },
            ttl_ms: r.ttl_ms,
        });
        let body = self.mcp_request(&meta, "lock_acquire", &a, action);
        let wait = Duration::from_millis(wait_ms);
        // A wait holds a slot of its own lane while it waits; past the bound it is refused
        // at once, and the calls that do not wait are answered whatever waits.
        let lane = match wait_ms {
            0 => Lane::Quick,
            _ => match self.daemon.wait_slot() {
                Some(slot) => Lane::Wait(slot),
                None => {
                    return fail(format!(
                        "too many lock waits at once ({MAX_WAITS}): this server already waits for {MAX_WAITS} locks; let one of them end, or call lock_acquire without wait_ms to be told at once who holds the file"
                    ));
                }
            },
        };
        // A call whose client cancelled it or went away never takes a lock: it is not sent
        // then, a wait leaves maosd's queue, and a grant that crossed the cancellation is
        // given back.
        let stops = vec![ct, self.gone.clone()];
        let cancelled = "the call was cancelled before the lock was granted; no lock was taken";
        let answer = match self
            .daemon
            .ask_or_stop(body, wait, lane, stops.clone())
            .await
        {
            Asked::Answer(r) if !stops.iter().any(CancellationToken::is_cancelled) => r,
            Asked::Answer(r) => {
                self.give_back_grant(r.ok()).await;
                return fail(cancelled);
            }
            Asked::Stopped(late) => {
                self.give_back_grant(late).await;
                return fail(cancelled);
            }
        };
        match answer.and_then(|r| mcp_reply("lock_acquire", r)) {
            Ok((caller, Reply::Lock(lock))) => ok(json!({
                "lock": lock,
                "caller": caller.as_ref().map(caller_json),
            })),
            Ok(_) => fail("maosd gave an unexpected answer to lock_acquire"),
            Err(e) if e.code == ErrorCode::Deadlock => fail(format!(
                "deadlock: {}",
                maos_core::text::escape_controls(&e.message)
            )),
            Err(e) => from_daemon(e),
        }
    }
}

#[tool_router]
impl Maos {
    #[tool(
        description = "What is going on in this project now: each live session with its progress, and each agent (CLI windows, their subagents, managed agents) with its state, task, current activity, task-list item, the locks it holds and those it waits for. Set all=true to include finished sessions.",
        input_schema = schema_for_input::<StatusArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn status(&self, a: JsonObject) -> ToolResult {
        let r: StatusArgs = match Self::read("status", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        Ok(match self.ask(Request::Ps(req::Ps { all: r.all })).await {
            Ok(Reply::Ps(sessions)) => ok(json!({ "sessions": sessions })),
            Ok(_) => fail("maosd gave an unexpected answer to status"),
            Err(e) => e,
        })
    }

    #[tool(
        description = "Who holds a path and who waits for it: the locks that would stop a write to it (holder, mode, fencing token, lease expiry) and the queued requests. Use it before working on a file another agent may be editing.",
        input_schema = schema_for_input::<PathArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn who(&self, a: JsonObject) -> ToolResult {
        let r: PathArgs = match Self::read("who", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::text("the path", &r.path, MAX_PATH) {
            return Ok(fail(e));
        }
        let body = Request::LockCheck(req::LockCheck {
            agent: None,
            at: req::LockAt {
                path: r.path,
                cwd: self.cwd(),
            },
            mode: LockMode::Write,
        });
        Ok(match self.ask(body).await {
            Ok(Reply::LockCheck(c)) => ok(json!({
                "path": c.path, "held_by": c.holders, "waiting": c.queued,
            })),
            Ok(_) => fail("maosd gave an unexpected answer to who"),
            Err(e) => e,
        })
    }

    #[tool(
        description = "Every lock in the project (path, mode, holder, fencing token, lease expiry) and every queued lock request. Give a session id or prefix to see only that session's.",
        input_schema = schema_for_input::<SessionArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn locks(&self, a: JsonObject) -> ToolResult {
        let r: SessionArgs = match Self::read("locks", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::session(&r.session) {
            return Ok(fail(e));
        }
        Ok(
            match self
                .ask(Request::LockList(req::LockList { session: r.session }))
                .await
            {
                Ok(Reply::Locks(l)) => ok(json!(l)),
                Ok(_) => fail("maosd gave an unexpected answer to locks"),
                Err(e) => e,
            },
        )
    }

    #[tool(
        description = "Take a lock for yourself: mode read (shared), write (one file), directory (a directory and everything under it) or workspace (the whole project). With wait_ms 0 or absent it fails at once when another agent holds a conflicting lock (naming it); with wait_ms it waits up to that long. A wait that would deadlock fails at once, naming the cycle. Returns the lock with its fencing token (pass it along with writes that must be ordered) and its lease expiry (renew with lock_renew). While you hold a write lock, other agents' writes to the file are refused by maos; release it with lock_release when done.",
        input_schema = schema_for_input::<AcquireArgs>().unwrap_or_default(),
        annotations(destructive_hint = false)
    )]
    async fn lock_acquire(
        &self,
        meta: RequestMetaObject,
        ct: CancellationToken,
        a: JsonObject,
    ) -> ToolResult {
        Ok(self.lock_acquire_(meta, ct, a).await)
    }

    #[tool(
        description = "Renew the leases of every lock you hold (each lasts its ttl from now). Call it during long work so that your locks do not expire.",
        input_schema = schema_for_input::<NoArgs>().unwrap_or_default()
    )]
    async fn lock_renew(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        if let Err(e) = Self::read::<NoArgs>("lock_renew", &a) {
            return Ok(e);
        }
        let action = McpAction::LockRenew;
        Ok(match self.act(&meta, "lock_renew", &a, action).await {
            Ok((caller, Reply::Renewed { leases })) => ok(json!({
                "renewed": leases, "caller": caller.as_ref().map(caller_json),
            })),
            Ok(_) => fail("maosd gave an unexpected answer to lock_renew"),
            Err(e) => from_daemon(e),
        })
    }

    #[tool(
        description = "Release a lock you hold on a path (for a workspace lock, give \".\"). Agents waiting for it get it in turn.",
        input_schema = schema_for_input::<PathArgs>().unwrap_or_default()
    )]
    async fn lock_release(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        let r: PathArgs = match Self::read("lock_release", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::text("the path", &r.path, MAX_PATH) {
            return Ok(fail(e));
        }
        let action = McpAction::LockRelease(req::LockAt {
            path: r.path,
            cwd: self.cwd(),
        });
        Ok(match self.act(&meta, "lock_release", &a, action).await {
            Ok((caller, Reply::Released(locks))) => ok(json!({
                "released": locks, "caller": caller.as_ref().map(caller_json),
            })),
            Ok(_) => fail("maosd gave an unexpected answer to lock_release"),
            Err(e) => from_daemon(e),
        })
    }

    #[tool(
        description = "Would you be blocked taking this lock now, and by whom? Answers blocked true/false with the holders and queued requests in the way (your own locks never block you). Changes nothing.",
        input_schema = schema_for_input::<CheckArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn lock_check(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        let r: CheckArgs = match Self::read("lock_check", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::text("the path", &r.path, MAX_PATH) {
            return Ok(fail(e));
        }
        // Without a caller, checked as nobody: every conflicting lock shows.
        let action = McpAction::LockCheck {
            at: req::LockAt {
                path: r.path,
                cwd: self.cwd(),
            },
            mode: r.mode.map(Into::into).unwrap_or(LockMode::Write),
        };
        Ok(match self.act(&meta, "lock_check", &a, action).await {
            Ok((caller, Reply::LockCheck(c))) => ok(json!({
                "check": c,
                "caller": caller.as_ref().map(caller_json),
            })),
            Ok(_) => fail("maosd gave an unexpected answer to lock_check"),
            Err(e) => from_daemon(e),
        })
    }

    #[tool(
        description = "Report your task list: every item with its status (pending, in_progress or completed), the whole list each time (it replaces the last). maos shows your in_progress item as what you are doing and counts completed items in the session's progress.",
        input_schema = schema_for_input::<ProgressArgs>().unwrap_or_default()
    )]
    async fn progress(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        let r: ProgressArgs = match Self::read("progress", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        let items: Vec<Todo> = r
            .items
            .into_iter()
            .map(|i| Todo {
                content: i.content,
                status: i.status,
            })
            .collect();
        // Checked here too, so that a bad list is refused before its caller's record is used.
        let items = match maos_core::mcp::check_todos(items) {
            Ok(i) => i,
            Err(e) => return Ok(fail(e)),
        };
        let count = items.len();
        let action = McpAction::Progress { items };
        Ok(match self.act(&meta, "progress", &a, action).await {
            Ok((caller, _)) => ok(json!({
                "items": count, "caller": caller.as_ref().map(caller_json),
            })),
            Err(e) => from_daemon(e),
        })
    }

    #[tool(
        description = "Record a fact for the briefing every agent of the session reads: kind decision (what was decided and why), done (work finished and its outcome), error (an error or blocker) or pending (work still to do). Keep it short and specific.",
        input_schema = schema_for_input::<NoteArgs>().unwrap_or_default()
    )]
    async fn note(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        let r: NoteArgs = match Self::read("note", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::text("the note", &r.text, MAX_NOTE) {
            return Ok(fail(e));
        }
        let action = McpAction::Note {
            kind: r.kind.into(),
            text: r.text,
        };
        Ok(match self.act(&meta, "note", &a, action).await {
            Ok((caller, _)) => ok(json!({
                "recorded": true, "caller": caller.as_ref().map(caller_json),
            })),
            Err(e) => from_daemon(e),
        })
    }

    #[tool(
        description = "Your session's briefing (or the session named): its objective, phase and progress, what each agent is doing, who holds which locks and who waits, blockers, and the decisions, results, errors and pending work recorded so far. Read it when you start or resume work.",
        input_schema = schema_for_input::<SessionArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn brief(&self, meta: RequestMetaObject, a: JsonObject) -> ToolResult {
        let r: SessionArgs = match Self::read("brief", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::session(&r.session) {
            return Ok(fail(e));
        }
        // Unnamed: the caller's session when maos knows the caller, else the active one.
        let answer = match r.session {
            Some(s) => self.brief_text(Some(s)).await,
            None => match self.act(&meta, "brief", &a, McpAction::Brief).await {
                Ok((_, Reply::Brief(b))) => Ok(b.text),
                Ok(_) => Err(fail("maosd gave an unexpected answer to brief")),
                Err(e) => Err(from_daemon(e)),
            },
        };
        Ok(match answer {
            Ok(text) => CallToolResult::success(vec![Content::text(text)]),
            Err(e) => e,
        })
    }

    #[tool(
        description = "The project's events (locks taken and released, denied writes, deadlocks, agents starting and ending, notes, ...), oldest first. Pass after = the `next` of your previous call to get only what happened since; absent, the latest ones.",
        input_schema = schema_for_input::<EventsArgs>().unwrap_or_default(),
        annotations(read_only_hint = true)
    )]
    async fn events(&self, a: JsonObject) -> ToolResult {
        let r: EventsArgs = match Self::read("events", &a) {
            Ok(r) => r,
            Err(e) => return Ok(e),
        };
        if let Err(e) = args::session(&r.session) {
            return Ok(fail(e));
        }
        let limit = r.limit.unwrap_or(100);
        if limit == 0 || limit > MAX_EVENTS {
            return Ok(fail(format!("limit is from 1 to {MAX_EVENTS}")));
        }
        let filter = EventFilter {
            session: r.session,
            after_seq: r.after,
            oldest_first: r.after.is_some(),
            ..EventFilter::default()
        };
        let body = Request::Events(req::Events {
            filter,
            limit: Some(limit),
        });
        Ok(match self.ask(body).await {
            Ok(Reply::Events(mut events)) => {
                events.sort_by_key(|e| e.seq);
                let next = events.last().map(|e| e.seq).or(r.after).unwrap_or(0);
                ok(json!({ "events": events, "next": next }))
            }
            Ok(_) => fail("maosd gave an unexpected answer to events"),
            Err(e) => e,
        })
    }
}

impl Maos {
    async fn brief_text(&self, session: Option<String>) -> Result<String, CallToolResult> {
        match self.ask(Request::Brief(req::Brief { session })).await? {
            Reply::Brief(b) => Ok(b.text),
            _ => Err(fail("maosd gave an unexpected answer to brief")),
        }
    }

    async fn locks_json(&self) -> Result<Value, CallToolResult> {
        match self
            .ask(Request::LockList(req::LockList { session: None }))
            .await?
        {
            Reply::Locks(l) => Ok(json!(l)),
            _ => Err(fail("maosd gave an unexpected answer to locks")),
        }
    }
}

/// A tool error as a resource read's error.
fn resource_error(e: CallToolResult) -> ErrorData {
    let text = e
        .content
        .first()
        .and_then(|c| c.as_text())
        .map(|t| t.text.clone())
        .unwrap_or_else(|| "maos could not answer".to_string());
    ErrorData::internal_error(text, None)
}

#[tool_handler(router = self.tool_router)]
impl ServerHandler for Maos {
    fn get_info(&self) -> ServerConfig {
        ServerConfig::new(
            ServerCapabilities::builder()
                .enable_tools()
                .enable_resources()
                .build(),
        )
        .with_server_info(rmcp::model::Implementation::new(
            "maos",
            env!("CARGO_PKG_VERSION"),
        ))
        .with_instructions(INSTRUCTIONS)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        let brief = Resource::new("maos://brief", "brief")
            .with_description("The session's briefing (as the brief tool).")
            .with_mime_type("text/plain");
        let locks = Resource::new("maos://locks", "locks")
            .with_description("The project's lock table and queued requests (as the locks tool).")
            .with_mime_type("application/json");
        Ok(ListResourcesResult::with_all_items(vec![brief, locks]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        let contents = match request.uri.as_str() {
            "maos://brief" => {
                let text = self.brief_text(None).await.map_err(resource_error)?;
                ResourceContents::text(text, request.uri.clone())
            }
            "maos://locks" => {
                let v = self.locks_json().await.map_err(resource_error)?;
                ResourceContents::TextResourceContents {
                    uri: request.uri.clone(),
                    mime_type: Some("application/json".into()),
                    text: v.to_string(),
                    meta: None,
                }
            }
            other => {
                let shown: String = other.chars().take(100).collect();
                return Err(ErrorData::resource_not_found(
                    format!("no resource {shown:?}: maos has maos://brief and maos://locks"),
                    None,
                ));
            }
        };
        Ok(ReadResourceResult::new(vec![contents]).into())
    }
}
