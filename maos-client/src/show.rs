//! Printing a reply: as JSON with `--json`, else the human view (the tables of
//! `maos_client::output`, or a line saying what a command did).

use std::io::Write;

use maos_client::output;
use maos_client::paint::Paint;
use maos_core::ids::short;
use maos_proto::Reply;

use crate::cli::{AgentCmd, Cli, Cmd, SessionCmd};
use crate::failure::{Res, usage};

pub fn print_json(v: &impl serde::Serialize) -> Res {
    let text = serde_json::to_string_pretty(v).map_err(|e| usage(e.to_string()))?;
    outln!("{text}");
    Ok(())
}

pub fn print(text: &str) {
    out!("{text}");
}

/// Print a reply as JSON or as the human view.
pub fn show(json: bool, reply: Reply) -> Res {
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
            Reply::Mcp { caller, reply } => {
                print_json(&serde_json::json!({ "caller": caller, "reply": reply }))
            }
            Reply::Hook(h) => print_json(&h),
            Reply::DbCheck(c) => print_json(&c),
            Reply::History(h) => print_json(&h),
            Reply::Export(e) => print_json(&e),
            Reply::Backup(b) => print_json(&b),
            Reply::Gc(g) => print_json(&g),
            Reply::Restored(r) => print_json(&r),
            Reply::FileRestored(r) => print_json(&r),
            Reply::Repaired(r) => print_json(&r),
            Reply::Log { agent, path, state } => {
                print_json(&serde_json::json!({ "agent": agent, "path": path, "state": state }))
            }
            // A list of one kind of record is an array (docs/commands.md: JSON output and exit codes).
            Reply::Recovery(r) => print_json(&r.sessions),
            Reply::Validation(p) => print_json(&p),
            Reply::Brief(b) => print_json(&b),
            // Only the dashboard asks for a chart; as JSON either way.
            Reply::Gantt(g) => print_json(&g),
            Reply::Radar(r) => print_json(&r),
            Reply::Pong | Reply::Done | Reply::Subscribed => {
                print_json(&serde_json::json!({"ok": true}))
            }
        };
    }
    // Rendered from a copy whose every string is safe for a terminal.
    let reply = match output::terminal_safe(&reply) {
        Ok(r) => r,
        Err(v) => return print_json(&v),
    };
    match reply {
        Reply::Session(s) => print(&output::session(&s)),
        Reply::Sessions(s) => print(&output::session_list(&s)),
        Reply::Agent(a) => print(&output::agents(std::slice::from_ref(&a))),
        Reply::Agents(a) => print(&output::agents(&a)),
        Reply::Status(s) => print(&output::status(&s)),
        Reply::Ps(s) => print(&output::ps(&s, maos_client::paint::Paint::off())),
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
            maos_core::utc(l.expires_at)
        ),
        Reply::Released(l) if l.is_empty() => outln!("no locks released"),
        Reply::Released(l) => {
            for l in &l {
                outln!("released {} ({}), token {}", l.path, l.mode, l.token);
            }
        }
        Reply::Locks(l) => print(&output::locks(&l)),
        Reply::LockCheck(c) => print(&output::lock_check(&c)),
        Reply::Renewed { leases } => outln!("renewed {}", output::count(leases, "lease")),
        // Only `maos mcp` asks for these; its own reply, then whose call it was.
        Reply::Mcp { caller, reply } => {
            show(false, *reply)?;
            if let Some(c) = caller {
                outln!("for {} ({})", c.agent, c.rule.words());
            }
        }
        Reply::Hook(h) => outln!("{:?}", h.decision),
        Reply::DbCheck(c) => outln!("{}: {}", c.path, c.quick_check),
        Reply::History(h) => print(&output::history(&h)),
        Reply::Export(e) => print_json(&e)?,
        Reply::Gc(g) => print(&output::gc(&g)),
        Reply::Restored(r) => outln!(
            "restored {} ({}, {}); the replaced database is {}",
            r.from,
            maos_core::words::count(r.sessions as usize, "session"),
            maos_core::words::count(r.events as usize, "event"),
            r.previous
        ),
        Reply::FileRestored(r) => outln!(
            "put back {} as {} wrote it ({} bytes, sha256 {}); {}",
            r.path,
            r.holder.as_ref().map_or("its holder", |h| h.short()),
            r.bytes,
            &r.version[..r.version.len().min(12)],
            match (&r.replaced, r.replaced_kept) {
                (Some(sha), true) if *sha != r.version => format!(
                    "the content it replaced is kept: `maos restore-file {} --version {}`",
                    r.path,
                    &sha[..sha.len().min(12)]
                ),
                (Some(_), _) => "the file already held that content".to_string(),
                (None, _) => "the file was gone".to_string(),
            }
        ),
        Reply::Repaired(r) => print(&repaired(&r)),
        Reply::Backup(b) => outln!(
            "backed up to {} ({:.1} MiB, integrity {})",
            b.path,
            b.bytes as f64 / 1_048_576.0,
            b.quick_check
        ),
        Reply::Log { path, .. } => outln!("{path}"),
        Reply::Recovery(r) => print(&output::recovery(&r)),
        Reply::Validation(p) => print(&output::problems(&p)),
        // The text again, from the safe copy (the daemon's is the model's).
        Reply::Brief(b) => print(&maos_core::brief::text(&b)),
        Reply::Gantt(g) => print_json(&g)?,
        Reply::Radar(r) => print(&output::radar(&r)),
        Reply::Pong | Reply::Done | Reply::Subscribed => outln!("ok"),
    }
    Ok(())
}

pub fn show_human(cli: &Cli, reply: Reply) -> Res {
    // Rendered from a copy whose every string is safe for a terminal.
    let reply = match output::terminal_safe(&reply) {
        Ok(r) => r,
        Err(v) => return print_json(&v),
    };
    match (&cli.cmd, reply) {
        (
            Cmd::Session {
                cmd: SessionCmd::Archive { .. },
            },
            Reply::Session(s),
        ) => {
            outln!(
                "archived session {} ({}); `maos history` lists it",
                short(s.id.as_str()),
                s.state
            );
            Ok(())
        }
        (Cmd::Ps { .. }, Reply::Ps(s)) => {
            let paint = Paint::stdout();
            outln!("{}", project_line(cli, paint)?);
            print(&output::ps(&s, paint));
            Ok(())
        }
        (Cmd::Status { .. }, Reply::Status(s)) => {
            outln!("{}", project_line(cli, Paint::stdout())?);
            print(&output::status(&s));
            Ok(())
        }
        (Cmd::Brief { .. }, Reply::Brief(b)) => {
            outln!("{}", project_line(cli, Paint::stdout())?);
            print(&maos_core::brief::text(&b));
            Ok(())
        }
        (Cmd::Import { file }, Reply::Session(s)) => {
            outln!(
                "imported session {} ({}, {}) from {}",
                short(s.id.as_str()),
                s.state,
                maos_core::words::count(s.agents.len(), "agent"),
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
            outln!("created session {}{active}", short(s.id.as_str()));
            Ok(())
        }
        (Cmd::Run { plan, .. }, Reply::Session(s)) => {
            outln!(
                "session {} from {}: {}, {}",
                short(s.id.as_str()),
                plan.display(),
                output::count(s.agents.len(), "agent"),
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
            outln!(
                "registered agent {} ({} #{})",
                short(a.id.as_str()),
                a.role,
                a.instance
            );
            Ok(())
        }
        (Cmd::Note(_), Reply::Session(_)) => {
            outln!("noted");
            Ok(())
        }
        (_, reply) => show(false, reply),
    }
}

/// The header of `ps`, `status` and `brief`: which project the view is of.
pub fn project_line(cli: &Cli, paint: Paint) -> Result<String, crate::failure::Failure> {
    let root = cli.project_root()?;
    Ok(paint.bold(&format!("project {}", maos_core::term::safe(&root))))
}

pub fn emit_events(json: bool, events: &[maos_proto::EventRecord]) {
    let mut out = std::io::stdout().lock();
    for e in events {
        let line = if json {
            serde_json::to_string(e).unwrap_or_default()
        } else {
            match output::terminal_safe(e) {
                Ok(e) => output::event_line(&e),
                Err(v) => v.to_string(),
            }
        };
        // A closed pipe (e.g. `| head`) ends the stream quietly.
        if writeln!(out, "{line}").and_then(|()| out.flush()).is_err() {
            std::process::exit(0);
        }
    }
}

/// `maos repair`: the rows maos cannot read, and what was moved aside.
fn repaired(r: &maos_proto::RepairReport) -> String {
    if r.bad.is_empty() {
        return "every row of the project's database reads back: nothing to repair\n".into();
    }
    let mut out = String::new();
    for b in &r.bad {
        out.push_str(&format!(
            "cannot read table {}, row {:?}: {}\n",
            b.table,
            b.row,
            b.why.escape_debug()
        ));
    }
    match &r.file {
        Some(file) => out.push_str(&format!(
            "moved {} row(s) of {} session(s) aside to {file}; the project loads again\n",
            r.moved,
            r.sessions.len(),
        )),
        None => out.push_str(&format!(
            "`maos repair --quarantine` moves the rows of {} session(s) aside (to a file) so that the project loads\n",
            r.sessions.len(),
        )),
    }
    out
}
