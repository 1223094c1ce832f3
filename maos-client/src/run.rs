//! Running a parsed command line: the commands that are one request and one reply, and
//! those with more to do (`events --follow`, `daemon ...`, the local commands).

use maos_proto::req;
use std::process::ExitCode;
use std::time::{Duration, Instant};

use maos_core::{AgentOp, PhaseOp, SessionOp, Strategy};
use maos_proto::{ErrorBody, ErrorCode, Reply, Request};

use crate::cli::{AgentCmd, Cli, Cmd, DaemonCmd, EventsArgs, PhaseCmd, SessionCmd};
use crate::client::{self, Client, ClientError};
use crate::failure::{Failure, Res, usage};
use crate::request::{
    agent_op, event_filter, lock_request, parse_duration, phase_op, plan_request, session_op,
    target, whoami,
};
use crate::show::{emit_events, print_json, show, show_human};
use crate::{doctor, gemini, hook, install, managed, mcpreg, service, shell, sibling, transfer};

pub fn run(cli: &Cli) -> Res {
    let json = cli.json;
    cli.check_globals()?;
    // `maos --version SUBCOMMAND ...`, as git does: the version, not the subcommand.
    if cli.version {
        return shell::version(json);
    }
    let body = match &cli.cmd {
        Cmd::Daemon { cmd } => return daemon(cmd, json),
        Cmd::Init { dir } => return crate::project::init(dir.as_deref(), json),
        Cmd::Demo { args } => return sibling::exec("maos-demo", args, &[]),
        Cmd::Dashboard { stop } => return crate::dashboard::run(*stop, json),
        Cmd::Top { args } => {
            // The project this `maos` resolved (`--project`, `MAOS_PROJECT`, or the directory).
            let vars = [(
                "MAOS_PROJECT",
                std::ffi::OsString::from(cli.project_root()?),
            )];
            return sibling::exec("maos-top", args, &vars);
        }
        Cmd::Mcp { args } => {
            // The project this `maos` resolved, else the directory (as a hook there makes it
            // one): an agent CLI starts the server wherever its window works.
            let (root, _) = cli.project_or_cwd()?;
            let vars = [("MAOS_PROJECT", std::ffi::OsString::from(root))];
            return sibling::exec("maos-mcp", args, &vars);
        }
        Cmd::GitCheck { .. } => return crate::gitcheck::run(cli),
        Cmd::InstallHooks(t) | Cmd::UninstallHooks(t) if t.git => {
            // The repository around the project (or the current directory): git's hook.
            let (root, _) = cli.project_or_cwd()?;
            let (path, done) = match &cli.cmd {
                Cmd::InstallHooks(_) => crate::githook::install(std::path::Path::new(&root)),
                _ => crate::githook::uninstall(std::path::Path::new(&root)),
            }
            .map_err(refused)?;
            return installed(&path, done, json);
        }
        Cmd::InstallHooks(t) | Cmd::UninstallHooks(t) => {
            let root =
                crate::project::for_install(cli, t.user, matches!(cli.cmd, Cmd::InstallHooks(_)))?;
            let path = crate::clis::settings_path(std::path::Path::new(&root), t.user, t.cli())
                .map_err(usage)?;
            // Codex's project hooks need the project's trust too (not the user's hooks);
            // Gemini CLI runs hooks only in a trusted folder.
            let root = std::path::Path::new(&root);
            let project = (!t.user).then_some(root);
            let consent = match t.yes {
                true => install::Consent::Given,
                false => install::Consent::Ask,
            };
            if matches!(cli.cmd, Cmd::InstallHooks(_)) {
                // A file the MCP registration cannot take stops the install before any file
                // changes.
                mcpreg::preflight(root, t.user, t.cli()).map_err(refused)?;
            }
            let done = match (&cli.cmd, t.cli()) {
                (Cmd::InstallHooks(_), maos_proto::Cli::Codex) => {
                    install::install_codex(&path, project, consent)
                }
                (Cmd::InstallHooks(_), maos_proto::Cli::Gemini) => {
                    gemini::install(root, &path, t.user, consent)
                }
                (Cmd::InstallHooks(_), maos_proto::Cli::Copilot) => {
                    crate::copilot::install(root, &path, t.user, consent)
                }
                (Cmd::InstallHooks(_), maos_proto::Cli::Cursor) => {
                    crate::cursor::install(root, &path, t.user, consent)
                }
                (Cmd::InstallHooks(_), maos_proto::Cli::OpenCode) => {
                    crate::opencode::install(root, &path, t.user, consent)
                }
                (Cmd::InstallHooks(_), which) => install::install(&path, which),
                (_, maos_proto::Cli::Codex) => install::uninstall_codex(&path, project),
                (_, maos_proto::Cli::Gemini) => gemini::uninstall(root, &path),
                (_, maos_proto::Cli::Copilot) => crate::copilot::uninstall(root, &path),
                (_, maos_proto::Cli::Cursor) => crate::cursor::uninstall(root, &path),
                (_, maos_proto::Cli::OpenCode) => crate::opencode::uninstall(root, &path),
                _ => install::uninstall(&path),
            }
            // maos's MCP server in the CLI's own configuration, next to the hooks.
            .and_then(|done| {
                let mcp = match &cli.cmd {
                    Cmd::InstallHooks(_) => mcpreg::register(root, t.user, t.cli())?,
                    _ => mcpreg::unregister(root, t.user, t.cli())?,
                };
                let mut done = match mcp {
                    Some(line) => format!("{done}\n{line}"),
                    None => done,
                };
                if matches!(cli.cmd, Cmd::UninstallHooks(_))
                    && project.is_some()
                    && let Some(line) =
                        crate::project::unmark(root, |cli| crate::clis::left(root, cli))?
                {
                    done = format!("{done}\n{line}");
                }
                Ok(done)
            })
            .map_err(refused)?;
            return installed(&path, done, json);
        }
        Cmd::Completions { shell } => return shell::completions(shell),
        Cmd::Man { dir } => return shell::man(dir.as_deref(), json),
        Cmd::Doctor => {
            let (root, found) = cli.project_or_cwd()?;
            return match doctor::run(&root, found, json) {
                true => Ok(()),
                // The report says what failed.
                false => Err(Failure {
                    body: ErrorBody::new(ErrorCode::BadRequest, ""),
                    exit: 1,
                }),
            };
        }
        Cmd::Hook { cli: which } => {
            let which = which
                .as_deref()
                .unwrap_or("claude")
                .parse()
                .unwrap_or_default();
            return match hook::run(cli.project.clone(), which) {
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
            } => Request::SessionCreate(req::SessionCreate {
                objective: objective.clone().unwrap_or_default(),
                strategy: strategy
                    .parse::<Strategy>()
                    .map_err(|e| usage(e.to_string()))?,
                phases: phases.clone(),
            }),
            SessionCmd::List { all } => Request::SessionList(req::SessionList { all: *all }),
            SessionCmd::Show { session } => Request::SessionShow(req::SessionShow {
                session: session.clone(),
            }),
            SessionCmd::Activate { session } => Request::SessionActivate(req::SessionActivate {
                session: session.clone(),
            }),
            SessionCmd::Archive { session } => Request::SessionArchive(req::SessionArchive {
                session: session.clone(),
            }),
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
            } => Request::AgentRegister(req::AgentRegister {
                session: session.clone(),
                role: role.clone(),
                task: task.clone(),
                depends_on: depends_on.clone(),
                parent: parent.clone(),
            }),
            AgentCmd::Start(t) => agent_op(t, AgentOp::Start),
            AgentCmd::Complete(t) => agent_op(t, AgentOp::Complete),
            AgentCmd::Fail(t) => agent_op(t, AgentOp::Fail),
            AgentCmd::Cancel(t) => agent_op(t, AgentOp::Cancel),
            AgentCmd::List { session } => Request::AgentList(req::AgentList {
                session: session.clone(),
            }),
            AgentCmd::Heartbeat { agent } => Request::Heartbeat(req::Heartbeat {
                agent: agent.clone(),
            }),
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
            PhaseCmd::Add { name, session } => Request::PhaseAdd(req::PhaseAdd {
                session: session.clone(),
                name: name.clone(),
            }),
        },
        Cmd::Ps {
            all,
            watch: true,
            interval,
        } => return watch_ps(cli, *all, interval),
        Cmd::Ps { all, .. } => Request::Ps(req::Ps { all: *all }),
        Cmd::History { limit } => Request::History(req::History {
            limit: Some(*limit),
        }),
        Cmd::Run {
            plan, check: true, ..
        } => return crate::plancheck::run(plan, json),
        Cmd::Run {
            plan, wait: true, ..
        } => return run_and_wait(cli, plan),
        Cmd::Run { plan, .. } => plan_request(plan, true)?,
        Cmd::Export { session, output } => {
            return transfer::export(cli, session.as_deref(), output.as_deref());
        }
        Cmd::Import { file } => transfer::import_request(file)?,
        Cmd::Backup { output } => {
            transfer::backup_request(output.as_deref(), &cli.project_root()?)?
        }
        Cmd::Repair { quarantine } => Request::Repair(req::Repair {
            quarantine: *quarantine,
        }),
        Cmd::RestoreFile { path, version } => Request::RestoreFile(req::RestoreFile {
            path: path.clone(),
            cwd: std::env::current_dir()
                .ok()
                .map(|d| d.to_string_lossy().into_owned()),
            version: version.clone(),
        }),
        Cmd::Restore { file, force } => Request::Restore(req::Restore {
            path: std::fs::canonicalize(file)
                .map_err(|e| usage(format!("cannot read {}: {e}", file.display())))?
                .display()
                .to_string(),
            force: *force,
        }),
        Cmd::Gc {
            older_than,
            dry_run,
        } => Request::Gc(req::Gc {
            older_than_secs: parse_duration("--older-than", older_than)?.as_secs(),
            dry_run: *dry_run,
        }),
        Cmd::Logs { agent, follow } => return managed::logs(cli, agent, *follow),
        Cmd::Retry { target } => Request::Retry(req::Retry {
            target: target.clone(),
            by: whoami(),
        }),
        Cmd::Recover { session } => Request::Recover(req::Recover {
            session: session.clone(),
        }),
        Cmd::Validate { session } => Request::Validate(req::Validate {
            session: session.clone(),
        }),
        Cmd::Pause(a) => Request::Pause(req::Pause {
            session: a.session.clone(),
            target: target(&a.agent, &a.phase),
            reason: a.reason.clone(),
            by: whoami(),
        }),
        Cmd::Resume(a) => Request::Resume(req::Resume {
            session: a.session.clone(),
            target: target(&a.agent, &a.phase),
            by: whoami(),
        }),
        Cmd::Events(args) => Request::Events(req::Events {
            filter: event_filter(args)?,
            limit: args.limit,
        }),
        Cmd::Status { session } => Request::Status(req::Status {
            session: session.clone(),
        }),
        Cmd::Brief { session } => Request::Brief(req::Brief {
            session: session.clone(),
        }),
        Cmd::Radar { agent, lock: true } => {
            return crate::radarlock::run(&cli.project_root()?, agent.as_deref(), json);
        }
        Cmd::Radar { agent, .. } => Request::Radar(req::Radar {
            agent: agent.clone(),
        }),
        Cmd::Note(n) => Request::Note(req::Note {
            session: n.session.clone(),
            agent: n.agent.clone(),
            kind: n.kind.into(),
            text: n.text.join(" "),
        }),
    };
    let root = cli.project_root()?;
    let mut client = Client::connect(true)?;
    let reply = client.request(Some(&root), body)?;
    // `validate` fails when it found something, and `lock check` when the path is blocked
    // (after printing who blocks it), in JSON too.
    let problems = matches!(&reply, Reply::Validation(p) if !p.is_empty())
        || matches!(&reply, Reply::LockCheck(c) if c.blocked);
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

/// Exit codes of `maos run --wait` for a session that did not complete (0: it completed; 1-3
/// are every command's: refused, bad command line, no daemon).
pub const EXIT_FAILED: u8 = 4;
pub const EXIT_CANCELLED: u8 = 5;

/// `maos run PLAN --wait`: run the plan, wait until its session ends, print how (one line; with
/// `--json` only the finished session), and exit with its outcome: 0 completed,
/// [`EXIT_FAILED`], [`EXIT_CANCELLED`]. The wait is a subscription to the session's ending
/// event (history first, so an end that came before it is seen); a daemon that goes away
/// meanwhile is started again and the wait goes on, as the session does.
fn run_and_wait(cli: &Cli, plan: &std::path::Path) -> Res {
    let root = cli.project_root()?;
    let mut client = Client::connect(true)?;
    let reply = client.request(Some(&root), plan_request(plan, true)?)?;
    let sid = match &reply {
        Reply::Session(s) => s.id.to_string(),
        _ => return show(cli.json, reply),
    };
    if !cli.json {
        show_human(cli, reply)?;
    }
    let filter = maos_proto::EventFilter {
        session: Some(sid.clone()),
        types: ["session_completed", "session_failed", "session_cancelled"]
            .map(String::from)
            .to_vec(),
        ..Default::default()
    };
    let reason = loop {
        let lost = match client.subscribe(&root, filter.clone()) {
            Ok(mut events) => match events.next() {
                Some(Ok(e)) => break e.data["reason"].as_str().map(str::to_string),
                Some(Err(ClientError::Unavailable(m))) => m,
                Some(Err(e)) => return Err(e.into()),
                None => "it closed the connection".to_string(),
            },
            Err(ClientError::Unavailable(m)) => m,
            Err(e) => return Err(e.into()),
        };
        eprintln!(
            "maos: lost the daemon ({lost}) while waiting for session {sid}; starting it again"
        );
        client = Client::connect(true)?;
    };
    let mut client = Client::connect(true)?;
    let s = match client.request(
        Some(&root),
        Request::SessionShow(req::SessionShow { session: Some(sid) }),
    )? {
        Reply::Session(s) => s,
        other => return show(cli.json, other),
    };
    if cli.json {
        print_json(&s)?;
    } else {
        let why = reason
            .map(|r| format!(": {}", maos_core::term::safe(&r)))
            .unwrap_or_default();
        outln!(
            "session {} {}{why}",
            maos_core::ids::short(s.id.as_str()),
            s.state
        );
    }
    let exit = match s.state {
        maos_core::SessionState::Completed => return Ok(()),
        maos_core::SessionState::Cancelled => EXIT_CANCELLED,
        _ => EXIT_FAILED,
    };
    // Already said, on stdout.
    Err(Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, ""),
        exit,
    })
}

/// How long `events --follow` waits for a daemon that went away to come back
/// (`--reconnect-for`).
const RECONNECT_FOR: Duration = Duration::from_secs(60);

/// `events --follow`: the history (honouring --limit), then live events without a gap. A
/// daemon that goes away (stopped, crashed, replaced) is said on stderr and waited for; the
/// stream resumes after the last event printed, so nothing is shown twice or skipped. The
/// follower does not start a daemon itself (a `maos daemon stop` stays stopped): any other
/// maos command, hook or service manager does. No daemon back within `--reconnect-for`: one
/// line and exit code 3, never a silent end.
pub fn follow(cli: &Cli, args: &EventsArgs) -> Res {
    let root = cli.project_root()?;
    let mut filter = event_filter(args)?;
    // One session is followed until it ends (at once when it has ended already).
    filter.until_session_ends = filter.session.is_some();
    let patience = match &args.reconnect_for {
        Some(t) => parse_duration("--reconnect-for", t)?,
        None => RECONNECT_FOR,
    };
    let mut client = Client::connect(true)?;
    if let Some(limit) = args.limit {
        let reply = client.request(
            Some(&root),
            Request::Events(req::Events {
                filter: filter.clone(),
                limit: Some(limit),
            }),
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
    loop {
        let lost = match client.subscribe(&root, filter.clone()) {
            Ok(mut events) => {
                let mut lost = "it closed the connection".to_string();
                for event in events.by_ref() {
                    match event {
                        Ok(event) => {
                            emit_events(cli.json, std::slice::from_ref(&event));
                            filter.after_seq = Some(event.seq);
                        }
                        Err(ClientError::Unavailable(m)) => {
                            lost = m;
                            break;
                        }
                        Err(e) => return Err(e.into()),
                    }
                }
                if events.ended() {
                    return followed_session_ended(&root, &filter);
                }
                lost
            }
            Err(ClientError::Unavailable(m)) => m,
            // The actor does not have the session: an archived one has its events still.
            Err(ClientError::Remote(e)) if e.code == ErrorCode::NotFound => {
                return follow_archived(cli, &root, &filter, args.limit.is_some(), e);
            }
            Err(e) => return Err(e.into()),
        };
        let secs = patience.as_secs_f64();
        eprintln!(
            "maos: lost the daemon ({lost}); reconnecting for up to {secs}s (any maos command starts it again)"
        );
        let pid;
        (client, pid) = reconnect(patience).map_err(|e| match e {
            ClientError::Unavailable(m) => ClientError::Unavailable(format!(
                "lost the daemon and could not reconnect within {secs}s: {m}"
            )),
            e => e,
        })?;
        match filter.after_seq {
            Some(seq) => {
                eprintln!("maos: reconnected to maosd (pid {pid}); resuming after event {seq}")
            }
            None => eprintln!("maos: reconnected to maosd (pid {pid})"),
        }
    }
}

/// `events --follow SESSION` once the session has ended: one line on stderr saying so, exit 0.
fn followed_session_ended(root: &str, filter: &maos_proto::EventFilter) -> Res {
    let session = filter.session.clone();
    let shown = Client::connect(false).and_then(|mut c| {
        c.request(
            Some(root),
            Request::SessionShow(req::SessionShow { session }),
        )
    });
    match shown {
        Ok(Reply::Session(s)) => eprintln!(
            "maos: session {} has ended ({}): no more events will come",
            maos_core::ids::short(s.id.as_str()),
            s.state
        ),
        _ => eprintln!("maos: the session has ended: no more events will come"),
    }
    Ok(())
}

/// `events --follow SESSION` of an archived session: it has ended, so nothing will follow.
/// Its events (unless `--limit` printed them already), then one line saying so on stderr,
/// exit 0. `missing`: the answer when the session is not archived either.
fn follow_archived(
    cli: &Cli,
    root: &str,
    filter: &maos_proto::EventFilter,
    shown: bool,
    missing: ErrorBody,
) -> Res {
    let Some(session) = &filter.session else {
        return Err(ClientError::Remote(missing).into());
    };
    let mut client = Client::connect(true)?;
    let record = match client.request(
        Some(root),
        Request::SessionShow(req::SessionShow {
            session: Some(session.clone()),
        }),
    ) {
        Ok(Reply::Session(s)) => s,
        _ => return Err(ClientError::Remote(missing).into()),
    };
    if !shown {
        let events = match client.request(
            Some(root),
            Request::Events(req::Events {
                filter: filter.clone(),
                limit: None,
            }),
        )? {
            Reply::Events(events) => events,
            _ => Vec::new(),
        };
        emit_events(cli.json, &events);
    }
    eprintln!(
        "maos: session {} is archived (it ended {}): no more events will come{}",
        maos_core::ids::short(record.id.as_str()),
        record.state,
        if shown { "" } else { "; its timeline is above" }
    );
    Ok(())
}

/// `maos ps --watch`: `maos ps` again every `every`, on a cleared screen at a terminal (one
/// snapshot after another, or one JSON document per line, into a pipe). A daemon that goes
/// away is waited for, saying so, not started again.
fn watch_ps(cli: &Cli, all: bool, interval: &str) -> Res {
    // Its connection stays open between refreshes: not one an idle limit closes.
    maos_client::client::set_kind(maos_proto::ClientKind::Follow);
    let every = parse_duration("--interval", interval)?;
    use maos_client::paint::Paint;
    use std::io::IsTerminal;
    if every < Duration::from_millis(100) {
        return Err(usage("--interval: at least 100ms"));
    }
    let root = cli.project_root()?;
    let screen = std::io::stdout().is_terminal();
    let paint = Paint::stdout();
    // Started when none runs, like every command; after that only reconnected, so a daemon
    // someone stopped stays stopped.
    drop(Client::connect(true)?);
    let mut client = Some(Client::connect(false)?);
    loop {
        let reply = match client.as_mut() {
            Some(c) => c.request(Some(&root), Request::Ps(req::Ps { all })),
            None => Client::connect(false).and_then(|mut c| {
                let r = c.request(Some(&root), Request::Ps(req::Ps { all }));
                client = Some(c);
                r
            }),
        };
        let stamp = maos_core::utc(chrono::Utc::now());
        let text = match reply {
            Ok(Reply::Ps(sessions)) if cli.json => {
                serde_json::to_string(&sessions).unwrap_or_default() + "\n"
            }
            Ok(Reply::Ps(sessions)) => format!(
                "{}   every {interval} (Ctrl-C to stop), {stamp}\n{}",
                paint.bold(&format!("project {}", maos_core::term::safe(&root))),
                match maos_client::output::terminal_safe(&sessions) {
                    Ok(sessions) => maos_client::output::ps(&sessions, paint),
                    Err(v) => v.to_string() + "\n",
                }
            ),
            Ok(other) => return show(cli.json, other),
            Err(ClientError::Unavailable(m)) => {
                client = None;
                let line = format!("maos: the daemon is gone ({m}); waiting for it ({stamp})");
                if cli.json {
                    eprintln!("{line}");
                    std::thread::sleep(every);
                    continue;
                }
                line + "\n"
            }
            Err(e) => return Err(e.into()),
        };
        if screen {
            out!("\x1b[H\x1b[2J");
        } else if !cli.json {
            outln!();
        }
        out!("{text}");
        std::thread::sleep(every);
    }
}

/// Connect again to a daemon that went away, without starting one, until `patience` runs out;
/// the client and the daemon's pid.
fn reconnect(patience: Duration) -> Result<(Client, u32), ClientError> {
    let give_up = Instant::now() + patience;
    let mut pause = Duration::from_millis(20);
    loop {
        let why = match Client::connect(false).and_then(|mut c| Ok((c.daemon_pid()?, c))) {
            Ok((pid, c)) => return Ok((c, pid)),
            Err(ClientError::Unavailable(m)) => m,
            Err(e) => return Err(e),
        };
        let now = Instant::now();
        if now >= give_up {
            return Err(ClientError::Unavailable(why));
        }
        std::thread::sleep(pause.min(give_up - now));
        pause = (pause * 2).min(Duration::from_millis(250));
    }
}

pub fn daemon(cmd: &DaemonCmd, json: bool) -> Res {
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
            client::wait_for_exit(pid)?;
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

/// An install or uninstall that could not be done: one line, exit 1.
fn refused(message: String) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, message),
        exit: 1,
    }
}

/// What an install or uninstall of hooks did to the file at `path`: `{"path", "message"}`
/// with `--json`, else the message.
fn installed(path: &std::path::Path, done: String, json: bool) -> Res {
    if json {
        return print_json(&serde_json::json!({ "path": path, "message": done }));
    }
    outln!("{done}");
    Ok(())
}
