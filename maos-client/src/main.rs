//! `maos`: the thin client and CLI of maos. Synchronous std I/O only.
//!
//! Exit codes: 0 success; 1 the daemon refused the request (the message and, with `--json`,
//! the error code say why); 2 bad command line; 3 the daemon could not be reached or started.

#[macro_use]
extern crate maos_client;

mod cli;
mod client;
mod demo;
mod doctor;
mod hook;
mod install;
mod managed;
mod service;
mod shell;
mod transfer;

use std::io::Write;
use std::process::ExitCode;

use clap::Parser;
use cli::{AgentCmd, Cli, Cmd, DaemonCmd, EventsArgs, LockCmd, PhaseCmd, SessionCmd};
use client::{Client, ClientError};
use maos_client::output;
use maos_core::{AgentOp, PhaseOp, SessionOp, Strategy, Ts};
use maos_proto::{ErrorBody, ErrorCode, EventFilter, LockWait, Reply, Request, Target};

/// A command's failure: what to print and how to exit.
struct Failure {
    body: ErrorBody,
    exit: u8,
}

impl From<ClientError> for Failure {
    fn from(e: ClientError) -> Self {
        let exit = match e {
            ClientError::Remote(_) => 1,
            ClientError::Unavailable(_) => 3,
            ClientError::Mismatch(_) => 1,
        };
        Failure {
            body: e.body(),
            exit,
        }
    }
}

fn usage(msg: impl Into<String>) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, msg),
        exit: 2,
    }
}

type Res<T = ()> = Result<T, Failure>;

/// The project root this invocation works on, as the daemon names it.
fn project_root(cli: &Cli) -> Res<String> {
    let start = match &cli.project {
        Some(p) => p.clone(),
        None => std::env::current_dir()
            .map_err(|e| usage(format!("cannot read the current directory: {e}")))?,
    };
    if cli.project.is_some() && !start.is_dir() {
        return Err(usage(format!(
            "project directory {} does not exist",
            start.display()
        )));
    }
    Ok(maos_proto::paths::project_root(&start)
        .to_string_lossy()
        .into_owned())
}

fn print_json(v: &impl serde::Serialize) -> Res {
    let text = serde_json::to_string_pretty(v).map_err(|e| usage(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

fn print(text: &str) {
    out!("{text}");
}

/// Print a reply as JSON or as the human view.
fn show(json: bool, reply: Reply) -> Res {
    if json {
        return match reply {
            Reply::Session(s) => print_json(&s),
            Reply::Sessions(s) => print_json(&s),
            Reply::Agent(a) => print_json(&a),
            Reply::Agents(a) => print_json(&a),
            Reply::Status(s) => print_json(&s),
            Reply::Ps(s) => print_json(&s),
            Reply::Daemon(d) => print_json(&d),
            Reply::Events(events) => {
                for e in &events {
                    outln!("{}", serde_json::to_string(e).unwrap_or_default());
                }
                Ok(())
            }
            Reply::Lock(l) => print_json(&l),
            Reply::Released(l) => print_json(&l),
            Reply::Locks(l) => print_json(&l),
            Reply::LockCheck(c) => print_json(&c),
            Reply::Renewed { leases } => print_json(&serde_json::json!({ "leases": leases })),
            Reply::Hook(h) => print_json(&h),
            Reply::DbCheck(c) => print_json(&c),
            Reply::History(h) => print_json(&h),
            Reply::Export(e) => print_json(&e),
            Reply::Backup(b) => print_json(&b),
            Reply::Gc(g) => print_json(&g),
            Reply::Restored(r) => print_json(&r),
            Reply::Log { agent, path, state } => {
                print_json(&serde_json::json!({ "agent": agent, "path": path, "state": state }))
            }
            Reply::Recovery(r) => print_json(&r),
            Reply::Validation(p) => print_json(&p),
            Reply::Brief(b) => print_json(&b),
            Reply::Pong | Reply::Done | Reply::Subscribed => {
                print_json(&serde_json::json!({"ok": true}))
            }
        };
    }
    match reply {
        Reply::Session(s) => print(&output::session(&s)),
        Reply::Sessions(s) => print(&output::session_list(&s)),
        Reply::Agent(a) => print(&output::agents(std::slice::from_ref(&a))),
        Reply::Agents(a) => print(&output::agents(&a)),
        Reply::Status(s) => print(&output::status(&s)),
        Reply::Ps(s) => print(&output::ps(&s)),
        Reply::Daemon(d) => print(&output::daemon(&d)),
        Reply::Events(events) => {
            for e in &events {
                outln!("{}", output::event_line(e));
            }
        }
        Reply::Lock(l) => outln!(
            "locked {} ({}) for {} {}: fencing token {}, lease until {}",
            l.path,
            l.mode,
            l.holder_role,
            l.holder.short(),
            l.token,
            l.expires_at.format("%F %T")
        ),
        Reply::Released(l) if l.is_empty() => outln!("no locks released"),
        Reply::Released(l) => {
            for l in &l {
                outln!("released {} ({}), token {}", l.path, l.mode, l.token);
            }
        }
        Reply::Locks(l) => print(&output::locks(&l)),
        Reply::LockCheck(c) => print(&output::lock_check(&c)),
        Reply::Renewed { leases } => outln!("renewed {leases} lease(s)"),
        Reply::Hook(h) => outln!("{:?}", h.decision),
        Reply::DbCheck(c) => outln!("{}: {}", c.path, c.quick_check),
        Reply::History(h) => print(&output::history(&h)),
        Reply::Export(e) => print_json(&e)?,
        Reply::Gc(g) => print(&output::gc(&g)),
        Reply::Restored(r) => outln!(
            "restored {} ({} sessions, {} events); the replaced database is {}",
            r.from,
            r.sessions,
            r.events,
            r.previous
        ),
        Reply::Backup(b) => outln!(
            "backed up to {} ({:.1} MiB, integrity {})",
            b.path,
            b.bytes as f64 / 1_048_576.0,
            b.quick_check
        ),
        Reply::Log { path, .. } => outln!("{path}"),
        Reply::Recovery(r) => print(&output::recovery(&r)),
        Reply::Validation(p) => print(&output::problems(&p)),
        Reply::Brief(b) => print(&b.text),
        Reply::Pong | Reply::Done | Reply::Subscribed => outln!("ok"),
    }
    Ok(())
}

/// A plan file becomes a request with its text: the daemon parses it (and names the line of
/// a mistake), so the client stays small.
fn plan_request(path: &std::path::Path, start: bool) -> Res<Request> {
    let text = std::fs::read_to_string(path)
        .map_err(|e| usage(format!("cannot read the plan {}: {e}", path.display())))?;
    Ok(Request::SessionFromPlan {
        path: path.display().to_string(),
        text,
        start,
    })
}

/// Parse `--since`: RFC 3339, or an age like 30s / 10m / 2h / 1d.
fn parse_since(s: &str) -> Res<Ts> {
    if let Ok(t) = chrono::DateTime::parse_from_rfc3339(s) {
        return Ok(t.with_timezone(&chrono::Utc));
    }
    let bad = || {
        usage(format!(
            "--since {s:?}: expected an RFC 3339 time (2026-11-22T10:00:00Z) or an age such as 30s, 10m, 2h, 1d"
        ))
    };
    let split = s.find(|c: char| !c.is_ascii_digit()).ok_or_else(bad)?;
    let (n, unit) = s.split_at(split);
    let n: i64 = n.parse().map_err(|_| bad())?;
    let secs = match unit {
        "s" => n,
        "m" => n * 60,
        "h" => n * 3600,
        "d" => n * 86400,
        _ => return Err(bad()),
    };
    Ok(chrono::Utc::now() - chrono::Duration::seconds(secs))
}

fn run(cli: &Cli) -> Res {
    let json = cli.json;
    // `maos --version SUBCOMMAND ...`, as git does: the version, not the subcommand.
    if cli.version {
        return shell::version(json);
    }
    let body = match &cli.cmd {
        Cmd::Daemon { cmd } => return daemon(cmd, json),
        Cmd::Demo { args } => return demo::run(args),
        Cmd::InstallHooks(t) | Cmd::UninstallHooks(t) => {
            let root = project_root(cli)?;
            let path = install::settings_path(std::path::Path::new(&root), t.user, t.codex)
                .map_err(usage)?;
            let done = match &cli.cmd {
                Cmd::InstallHooks(_) => install::install(&path, t.codex),
                _ => install::uninstall(&path),
            }
            .map_err(|m| Failure {
                body: ErrorBody::new(ErrorCode::BadRequest, m),
                exit: 1,
            })?;
            if json {
                return print_json(&serde_json::json!({ "path": path, "message": done }));
            }
            outln!("{done}");
            return Ok(());
        }
        Cmd::Completions { shell } => return shell::completions(shell),
        Cmd::Man { dir } => return shell::man(dir.as_deref(), json),
        Cmd::Doctor => {
            let root = project_root(cli)?;
            return match doctor::run(&root, json) {
                true => Ok(()),
                // The report says what failed.
                false => Err(Failure {
                    body: ErrorBody::new(ErrorCode::BadRequest, ""),
                    exit: 1,
                }),
            };
        }
        Cmd::Hook => {
            return match hook::run(cli.project.clone()) {
                ExitCode::SUCCESS => Ok(()),
                // The hook printed its one-line reason already.
                _ => Err(Failure {
                    body: ErrorBody::new(ErrorCode::BadRequest, ""),
                    exit: 1,
                }),
            };
        }
        Cmd::Events(args) if args.follow => return follow(cli, args),
        Cmd::Session { cmd } => match cmd {
            SessionCmd::Create {
                plan: Some(plan), ..
            } => plan_request(plan, false)?,
            SessionCmd::Create {
                objective,
                strategy,
                phases,
                ..
            } => Request::SessionCreate {
                objective: objective.clone().unwrap_or_default(),
                strategy: strategy
                    .parse::<Strategy>()
                    .map_err(|e| usage(e.to_string()))?,
                phases: phases.clone(),
            },
            SessionCmd::List { all } => Request::SessionList { all: *all },
            SessionCmd::Show { session } => Request::SessionShow {
                session: session.clone(),
            },
            SessionCmd::Activate { session } => Request::SessionActivate {
                session: session.clone(),
            },
            SessionCmd::Archive { session } => Request::SessionArchive {
                session: session.clone(),
            },
            SessionCmd::Start(t) => session_op(t, SessionOp::Start),
            SessionCmd::Complete(t) => session_op(t, SessionOp::Complete),
            SessionCmd::Fail(t) => session_op(t, SessionOp::Fail),
            SessionCmd::Cancel(t) => session_op(t, SessionOp::Cancel),
        },
        Cmd::Agent { cmd } => match cmd {
            AgentCmd::Register {
                role,
                task,
                depends_on,
                parent,
                session,
            } => Request::AgentRegister {
                session: session.clone(),
                role: role.clone(),
                task: task.clone(),
                depends_on: depends_on.clone(),
                parent: parent.clone(),
            },
            AgentCmd::Start(t) => agent_op(t, AgentOp::Start),
            AgentCmd::Complete(t) => agent_op(t, AgentOp::Complete),
            AgentCmd::Fail(t) => agent_op(t, AgentOp::Fail),
            AgentCmd::Cancel(t) => agent_op(t, AgentOp::Cancel),
            AgentCmd::List { session } => Request::AgentList {
                session: session.clone(),
            },
            AgentCmd::Heartbeat { agent } => Request::Heartbeat {
                agent: agent.clone(),
            },
        },
        Cmd::Lock { cmd } => lock_request(cmd)?,
        Cmd::Phase { cmd } => match cmd {
            PhaseCmd::Start(t) => phase_op(t, PhaseOp::Start, serde_json::Value::Null),
            PhaseCmd::Skip(t) => phase_op(t, PhaseOp::Skip, serde_json::Value::Null),
            PhaseCmd::Complete {
                target,
                failed,
                artifacts,
            } => {
                let artifacts = match artifacts {
                    Some(a) => serde_json::from_str(a)
                        .map_err(|e| usage(format!("--artifacts is not valid JSON: {e}")))?,
                    None => serde_json::Value::Null,
                };
                let op = if *failed {
                    PhaseOp::Fail
                } else {
                    PhaseOp::Complete
                };
                phase_op(target, op, artifacts)
            }
            PhaseCmd::Add { name, session } => Request::PhaseAdd {
                session: session.clone(),
                name: name.clone(),
            },
        },
        Cmd::Ps { all } => Request::Ps { all: *all },
        Cmd::History { limit } => Request::History {
            limit: Some(*limit),
        },
        Cmd::Run { plan } => plan_request(plan, true)?,
        Cmd::Export { session, output } => {
            return transfer::export(cli, session, output.as_deref());
        }
        Cmd::Import { file } => transfer::import_request(file)?,
        Cmd::Backup { output } => transfer::backup_request(output.as_deref())?,
        Cmd::Restore { file, force } => Request::Restore {
            path: std::fs::canonicalize(file)
                .map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?
                .display()
                .to_string(),
            force: *force,
        },
        Cmd::Gc {
            older_than,
            dry_run,
        } => Request::Gc {
            older_than_secs: parse_duration("--older-than", older_than)?.as_secs(),
            dry_run: *dry_run,
        },
        Cmd::Logs { agent, follow } => return managed::logs(cli, agent, *follow),
        Cmd::Recover { session } => Request::Recover {
            session: session.clone(),
        },
        Cmd::Validate { session } => Request::Validate {
            session: session.clone(),
        },
        Cmd::Pause(a) => Request::Pause {
            session: a.session.clone(),
            target: target(&a.agent, &a.phase),
            reason: a.reason.clone(),
            by: whoami(),
        },
        Cmd::Resume(a) => Request::Resume {
            session: a.session.clone(),
            target: target(&a.agent, &a.phase),
            by: whoami(),
        },
        Cmd::Events(args) => Request::Events {
            filter: event_filter(args)?,
            limit: args.limit,
        },
        Cmd::Status { session } => Request::Status {
            session: session.clone(),
        },
        Cmd::Brief { session } => Request::Brief {
            session: session.clone(),
        },
        Cmd::Note(n) => Request::Note {
            session: n.session.clone(),
            agent: n.agent.clone(),
            kind: n.kind.into(),
            text: n.text.join(" "),
        },
    };
    let root = project_root(cli)?;
    let mut client = Client::connect(true)?;
    let reply = client.request(Some(&root), body)?;
    // `validate` fails when it found something, in JSON too.
    let problems = matches!(&reply, Reply::Validation(p) if !p.is_empty());
    let shown = if json {
        show(true, reply)
    } else {
        show_human(cli, reply)
    };
    shown?;
    if problems {
        return Err(Failure {
            body: ErrorBody::new(ErrorCode::BadRequest, ""),
            exit: 1,
        });
    }
    Ok(())
}

fn show_human(cli: &Cli, reply: Reply) -> Res {
    match (&cli.cmd, reply) {
        (
            Cmd::Session {
                cmd: SessionCmd::Archive { .. },
            },
            Reply::Session(s),
        ) => {
            outln!(
                "archived session {} ({}); `maos history` lists it",
                s.id,
                s.state
            );
            Ok(())
        }
        (Cmd::Ps { .. }, Reply::Ps(s)) => {
            print(&output::ps(&s));
            Ok(())
        }
        (Cmd::Import { file }, Reply::Session(s)) => {
            outln!(
                "imported session {} ({}, {} agents) from {}",
                s.id,
                s.state,
                s.agents.len(),
                file.display()
            );
            Ok(())
        }
        (
            Cmd::Session {
                cmd: SessionCmd::Create { .. },
            },
            Reply::Session(s),
        ) => {
            let active = if s.active {
                " (now the active session)"
            } else {
                ""
            };
            outln!("created session {}{active}", s.id);
            Ok(())
        }
        (Cmd::Run { plan }, Reply::Session(s)) => {
            outln!(
                "session {} from {}: {} agent(s), {}",
                s.id,
                plan.display(),
                s.agents.len(),
                s.state
            );
            print(&output::session(&s));
            Ok(())
        }
        (
            Cmd::Agent {
                cmd: AgentCmd::Register { .. },
            },
            Reply::Agent(a),
        ) => {
            outln!("registered agent {} ({} #{})", a.id, a.role, a.instance);
            Ok(())
        }
        (Cmd::Note(_), Reply::Done) => {
            outln!("noted");
            Ok(())
        }
        (_, reply) => show(false, reply),
    }
}

/// "500ms", "30s", "5m", "1h", "1d", or plain seconds.
fn parse_duration(flag: &str, s: &str) -> Res<std::time::Duration> {
    maos_core::duration::parse(s).map_err(|e| usage(format!("{flag} {e}")))
}

fn lock_mode(s: &str) -> Res<maos_core::LockMode> {
    s.parse()
        .map_err(|e: maos_core::ParseEnumError| usage(e.to_string()))
}

fn cwd() -> Option<String> {
    std::env::current_dir()
        .ok()
        .map(|d| d.to_string_lossy().into_owned())
}

fn lock_request(cmd: &LockCmd) -> Res<Request> {
    Ok(match cmd {
        LockCmd::Acquire {
            path,
            agent,
            mode,
            no_wait: _,
            wait,
            wait_forever,
            ttl,
        } => Request::LockAcquire {
            agent: agent.clone(),
            path: path.clone(),
            cwd: cwd(),
            mode: lock_mode(mode)?,
            wait: match (wait, wait_forever) {
                (_, true) => LockWait::Forever,
                (Some(w), false) => LockWait::Wait {
                    ms: parse_duration("--wait", w)?.as_millis() as u64,
                },
                (None, false) => LockWait::NoWait,
            },
            ttl_ms: ttl
                .as_deref()
                .map(|t| parse_duration("--ttl", t).map(|d| d.as_millis() as u64))
                .transpose()?,
        },
        LockCmd::Release { path, agent, force } => Request::LockRelease {
            agent: agent.clone(),
            path: path.clone(),
            cwd: cwd(),
            force: *force,
            by: whoami(),
        },
        LockCmd::ReleaseAll { agent } => Request::LockReleaseAll {
            agent: agent.clone(),
        },
        LockCmd::List { session } => Request::LockList {
            session: session.clone(),
        },
        LockCmd::Check { path, agent, mode } => Request::LockCheck {
            agent: agent.clone(),
            path: path.clone(),
            cwd: cwd(),
            mode: lock_mode(mode)?,
        },
    })
}

fn whoami() -> Option<String> {
    std::env::var("USER").ok().filter(|u| !u.is_empty())
}

fn target(agent: &Option<String>, phase: &Option<String>) -> Target {
    match (agent, phase) {
        (Some(a), _) => Target::Agent(a.clone()),
        (None, Some(p)) => Target::Phase(p.clone()),
        (None, None) => Target::Session,
    }
}

fn session_op(t: &cli::SessionTarget, op: SessionOp) -> Request {
    Request::SessionTransition {
        session: t.session.clone(),
        op,
        reason: t.reason.clone(),
    }
}

fn agent_op(t: &cli::AgentTarget, op: AgentOp) -> Request {
    Request::AgentTransition {
        agent: t.agent.clone(),
        op,
        exit_code: t.exit_code,
        reason: t.reason.clone(),
    }
}

fn phase_op(t: &cli::PhaseTarget, op: PhaseOp, artifacts: serde_json::Value) -> Request {
    Request::PhaseTransition {
        session: t.session.clone(),
        phase: t.phase.clone(),
        op,
        artifacts,
    }
}

fn event_filter(a: &EventsArgs) -> Res<EventFilter> {
    Ok(EventFilter {
        session: a.session.clone(),
        types: a.types.clone(),
        agent: a.agent.clone(),
        since: a.since.as_deref().map(parse_since).transpose()?,
        after_seq: None,
    })
}

/// `events --follow`: the history (honouring --limit), then live events without a gap.
fn follow(cli: &Cli, args: &EventsArgs) -> Res {
    let root = project_root(cli)?;
    let mut filter = event_filter(args)?;
    let mut client = Client::connect(true)?;
    if let Some(limit) = args.limit {
        let reply = client.request(
            Some(&root),
            Request::Events {
                filter: filter.clone(),
                limit: Some(limit),
            },
        )?;
        if let Reply::Events(events) = reply {
            filter.after_seq = Some(events.last().map_or(u64::MAX, |e| e.seq));
            // An empty window still means: start from now, not from the beginning.
            if events.is_empty() {
                filter.after_seq = None;
            }
            emit_events(cli.json, &events);
        }
    }
    for event in client.subscribe(&root, filter)? {
        let event = event?;
        emit_events(cli.json, std::slice::from_ref(&event));
    }
    Ok(())
}

fn emit_events(json: bool, events: &[maos_proto::EventRecord]) {
    let mut out = std::io::stdout().lock();
    for e in events {
        let line = if json {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            output::event_line(e)
        };
        // A closed pipe (e.g. `| head`) ends the stream quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(0);
        }
    }
}

fn daemon(cmd: &DaemonCmd, json: bool) -> Res {
    match cmd {
        DaemonCmd::Install(a) => service::install(a, json),
        DaemonCmd::Uninstall(a) => service::uninstall(a, json),
        DaemonCmd::Status => {
            let mut c = Client::connect(false)?;
            show(json, c.request(None, Request::DaemonStatus)?)
        }
        DaemonCmd::Start => {
            let already = Client::connect(false).is_ok();
            let mut c = Client::connect(true)?;
            let reply = c.request(None, Request::DaemonStatus)?;
            if !json {
                outln!(
                    "{}",
                    if already {
                        "maosd was already running"
                    } else {
                        "maosd started"
                    }
                );
            }
            show(json, reply)
        }
        DaemonCmd::Stop => {
            let mut c = match Client::connect(false) {
                Ok(c) => c,
                Err(ClientError::Unavailable(_)) => {
                    if json {
                        return print_json(
                            &serde_json::json!({"stopped": false, "running": false}),
                        );
                    }
                    outln!("maosd is not running");
                    return Ok(());
                }
                Err(e) => return Err(e.into()),
            };
            let (pid, by) = match c.started_by() {
                Ok(by) => {
                    let pid = c.daemon_pid()?;
                    c.request(None, Request::DaemonStop)?;
                    (pid, by)
                }
                // It speaks another protocol: it cannot take the request, but a signal works
                // the same (it finishes in-flight requests, then exits).
                Err(ClientError::Mismatch(m)) if !m.started_by.is_service() => {
                    client::terminate(m.pid).map_err(|e| {
                        ClientError::Unavailable(format!("cannot stop maosd (pid {}): {e}", m.pid))
                    })?;
                    (m.pid, m.started_by)
                }
                Err(e) => return Err(e.into()),
            };
            drop(c);
            wait_for_exit(pid)?;
            if json {
                return print_json(
                    &serde_json::json!({"stopped": true, "pid": pid, "started_by": by}),
                );
            }
            outln!("maosd (pid {pid}) stopped");
            if by.is_service() {
                outln!(
                    "{} starts it again on the next connection; `maos daemon uninstall` removes the service",
                    by.as_str()
                );
            }
            Ok(())
        }
    }
}

/// Wait until the process is gone (the daemon commits and closes its databases first).
fn wait_for_exit(pid: u32) -> Res {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    while std::time::Instant::now() < deadline {
        if client::exited(pid) {
            return Ok(());
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Err(Failure {
        body: ErrorBody::new(
            ErrorCode::Unavailable,
            format!("maosd (pid {pid}) did not exit within 30s"),
        ),
        exit: 3,
    })
}

/// Parse the command line. Help and version print as usual; a bad command line is one line on
/// stderr (and the JSON error object with `--json`), exit code 2, like every other usage error.
fn parse_cli() -> Result<Cli, ExitCode> {
    use clap::error::ErrorKind;
    let e = match Cli::try_parse() {
        Ok(cli) => return Ok(cli),
        Err(e) => e,
    };
    if matches!(
        e.kind(),
        ErrorKind::DisplayHelp
            | ErrorKind::DisplayVersion
            | ErrorKind::DisplayHelpOnMissingArgumentOrSubcommand
    ) {
        let _ = e.print();
        return Err(ExitCode::from(u8::try_from(e.exit_code()).unwrap_or(2)));
    }
    // clap renders several lines (message, tips, usage); fold them into one.
    let text = e.render().to_string();
    let mut parts = Vec::new();
    let mut usage = None;
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if let Some(u) = line.strip_prefix("Usage:") {
            usage = Some(u.trim().to_string());
        } else if !line.starts_with("For more information") {
            parts.push(
                line.strip_prefix("error:")
                    .unwrap_or(line)
                    .trim()
                    .to_string(),
            );
        }
    }
    let mut message = String::new();
    for p in parts {
        if !message.is_empty() {
            message.push_str(if message.ends_with(':') { " " } else { "; " });
        }
        message.push_str(&p);
    }
    if message.is_empty() {
        message = "bad command line".into();
    }
    message = match usage {
        Some(u) => format!("{message} (usage: {u})"),
        None => format!("{message} (see `maos --help`)"),
    };
    if std::env::args_os().any(|a| a == "--json") {
        outln!(
            "{}",
            serde_json::json!({"error": {"code": ErrorCode::BadRequest, "message": message}})
        );
    }
    eprintln!("maos: {message}");
    Err(ExitCode::from(2))
}

/// `maos ps` (with `--all` / `--json`) is what people and scripts run in loops: parse it
/// without clap, so that none of clap's code has to be paged in. Anything else goes to clap.
fn fast_path() -> Option<Cli> {
    let mut args = std::env::args_os().skip(1);
    let (mut ps, mut all, mut json) = (false, false, false);
    for a in args.by_ref() {
        match a.to_str()? {
            "ps" if !ps => ps = true,
            "--all" if ps && !all => all = true,
            "--json" if !json => json = true,
            _ => return None,
        }
    }
    let project = std::env::var_os("MAOS_PROJECT")
        .filter(|p| !p.is_empty())
        .map(std::path::PathBuf::from);
    ps.then_some(Cli {
        version: false,
        json,
        project,
        cmd: Cmd::Ps { all },
    })
}

fn main() -> ExitCode {
    // The hook runs on every tool call of every agent: no clap, straight to work.
    if std::env::args_os().nth(1).is_some_and(|a| a == "hook") && std::env::args_os().count() == 2 {
        let project = std::env::var_os("MAOS_PROJECT")
            .filter(|p| !p.is_empty())
            .map(std::path::PathBuf::from);
        return hook::run(project);
    }
    // `maos --version`: no subcommand for clap to require; it asks the daemon, never starts it.
    if let Some(json) = shell::version_args(std::env::args_os().skip(1)) {
        return match shell::version(json) {
            Ok(()) => ExitCode::SUCCESS,
            Err(f) => {
                eprintln!("maos: {}", f.body.message);
                ExitCode::from(f.exit)
            }
        };
    }
    let cli = match fast_path().map_or_else(parse_cli, Ok) {
        Ok(cli) => cli,
        Err(code) => return code,
    };
    match run(&cli) {
        Ok(()) => ExitCode::SUCCESS,
        // Already reported in full (doctor's report).
        Err(f) if f.body.message.is_empty() => ExitCode::from(f.exit),
        Err(f) => {
            if cli.json {
                let v =
                    serde_json::json!({"error": {"code": f.body.code, "message": f.body.message}});
                // Failing already: a closed stdout must not turn this into a success.
                let _ = writeln!(std::io::stdout().lock(), "{v}");
            }
            eprintln!("maos: {}", f.body.message);
            ExitCode::from(f.exit)
        }
    }
}
