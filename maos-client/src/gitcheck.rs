//! `maos git-check pre-commit`: what git's pre-commit hook (`maos install-hooks --git`) runs.
//! The files the commit takes (`git diff --cached`, so a `git commit PATH` or `-a` is seen
//! through git's own temporary index) against the project's locks, in one round trip
//! (`LockList`; the holders' records only when one is held). A file another agent holds with
//! a write (or wider) lock refuses the commit, exit 1, each file named with its holder, its
//! task and since when, and the command that commits the rest.
//!
//! Who "another agent" is: every holder, except one whose own process is an ancestor of this
//! one: the CLI process recorded for its window (or its parent's, for a subagent, which runs
//! in its window's process) or a managed agent's process, matched by pid and start time. A
//! commit an agent's shell runs is that window's; which agent of the window runs it is for its
//! shell hook to tell. Off Linux (no `/proc`) every holder is another agent.
//!
//! When maos cannot tell: a project maos has recorded nothing of, with no daemon running, is
//! nobody's (allowed, silently); a project with recorded state gets its daemon started, as any
//! command does; a daemon that fails to answer refuses the commit, saying why and how to
//! commit anyway (`--no-verify`, `MAOS_GIT_CHECK=off`).

use maos_proto::req;
use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::process::Command;

use maos_core::record::{AgentRecord, LockView, ProcessRef};
use maos_core::{AgentId, LockMode, LockPath};
use maos_proto::{ErrorBody, ErrorCode, Reply, Request, paths};

use crate::client::Client;
use crate::failure::{Failure, Res};

const BYPASS: &str = "to commit anyway: git commit --no-verify (or MAOS_GIT_CHECK=off git commit)";

fn refuse(msg: String) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::LockConflict, msg),
        exit: 1,
    }
}

/// maos cannot tell whether the commit is safe: said, and refused.
fn cannot_tell(why: impl std::fmt::Display) -> Failure {
    refuse(format!(
        "cannot tell whether this commit takes files other agents hold: {why}; {BYPASS}"
    ))
}

/// The paths the commit takes, relative to the top of the working tree (a rename's both names).
fn staged() -> Result<Vec<String>, String> {
    let out = Command::new("git")
        .args(["diff", "--cached", "--name-only", "--no-renames", "-z"])
        .output()
        .map_err(|e| format!("cannot run git: {e}"))?;
    if !out.status.success() {
        let err = String::from_utf8_lossy(&out.stderr);
        return Err(format!(
            "`git diff --cached` failed: {}",
            err.lines().next().unwrap_or("").trim()
        ));
    }
    Ok(out
        .stdout
        .split(|b| *b == 0)
        .filter(|p| !p.is_empty())
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .collect())
}

/// This process's ancestors (pid and start time), nearest first: `/proc` reads, none off Linux.
fn ancestors() -> Vec<ProcessRef> {
    let mut out = Vec::new();
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..64 {
        if pid <= 1 {
            break;
        }
        let Ok(stat) = std::fs::read_to_string(format!("/proc/{pid}/stat")) else {
            break;
        };
        let Some((_, rest)) = stat.rsplit_once(") ") else {
            break;
        };
        let mut fields = rest.split(' ');
        let Some(ppid) = fields.nth(1).and_then(|p| p.parse::<u32>().ok()) else {
            break;
        };
        // Field 22 (`starttime`): `rest` starts at field 3 and `nth(1)` took fields 3 and 4.
        let start_time = fields.nth(17).and_then(|t| t.parse().ok());
        out.push(ProcessRef { pid, start_time });
        pid = ppid;
    }
    out
}

/// The processes that are `agent`'s own: its window's CLI (its parents', for a subagent) and
/// a managed agent's process.
fn own_processes(agent: &AgentId, agents: &BTreeMap<AgentId, AgentRecord>) -> Vec<ProcessRef> {
    let mut out = Vec::new();
    let mut at = agents.get(agent);
    for _ in 0..32 {
        let Some(a) = at else { break };
        out.extend(a.window);
        if let Some(p) = &a.process {
            out.push(ProcessRef {
                pid: p.pid,
                start_time: p.start_time,
            });
        }
        at = a.parent.as_ref().and_then(|p| agents.get(p));
    }
    out
}

/// Both known and equal: a pid alone may have been reused (or be another machine's).
fn same(a: &ProcessRef, b: &ProcessRef) -> bool {
    a.pid == b.pid && a.start_time.is_some() && a.start_time == b.start_time
}

/// The project the commit is in: `--project` typed, else the one around the working directory
/// (git runs the hook at the top of the working tree).
fn project(cli: &crate::cli::Cli) -> Option<String> {
    if cli.project_typed {
        return cli.project_root().ok();
    }
    let cwd = std::env::current_dir().ok()?;
    paths::find_project(&cwd).map(|p| p.to_string_lossy().into_owned())
}

/// Whether a daemon answers on the socket (none: nothing listens there).
fn daemon_running() -> bool {
    match std::os::unix::net::UnixStream::connect(paths::socket_path()) {
        Ok(_) => true,
        Err(e) => !matches!(
            e.kind(),
            std::io::ErrorKind::NotFound | std::io::ErrorKind::ConnectionRefused
        ),
    }
}

/// maos has recorded something of the project (its state directory exists).
fn has_state(root: &str) -> bool {
    paths::home_dir().is_ok_and(|h| {
        h.join("projects")
            .join(paths::workspace_hash(Path::new(root)))
            .exists()
    })
}

/// `path` as a shell word (for the command to copy).
fn word(path: &str) -> String {
    let w = crate::githook::sh_quote(path);
    // A path starting with `-` is after `--` anyway.
    maos_core::term::safe(&w).into_owned()
}

pub fn run(cli: &crate::cli::Cli) -> Res {
    if std::env::var("MAOS_GIT_CHECK").is_ok_and(|v| v == "off") {
        return Ok(());
    }
    let Some(root) = project(cli) else {
        return Ok(());
    };
    let files = staged().map_err(cannot_tell)?;
    if files.is_empty() {
        return Ok(());
    }
    if !daemon_running() && !has_state(&root) {
        // Nothing recorded, nothing running: nobody holds anything here.
        return Ok(());
    }
    let mut client = Client::connect(true).map_err(|e| cannot_tell(e.body().message))?;
    let locks = match client.request(
        Some(&root),
        Request::LockList(req::LockList { session: None }),
    ) {
        Ok(Reply::Locks(l)) => l.locks,
        Ok(_) => {
            return Err(cannot_tell(
                "maosd answered the lock list with something else",
            ));
        }
        Err(e) => return Err(cannot_tell(e.body().message)),
    };
    // Each staged file another agent's write (or wider) lock covers: (file, the lock).
    let mut held: Vec<(&str, &LockView)> = Vec::new();
    let exclusive: Vec<(LockPath, &LockView)> = locks
        .iter()
        .filter(|l| l.mode.is_exclusive())
        .filter_map(|l| LockPath::new(&l.path).ok().map(|p| (p, l)))
        .collect();
    if exclusive.is_empty() {
        return Ok(());
    }
    for f in &files {
        let Ok(key) = LockPath::new(f) else { continue };
        if let Some((_, l)) = exclusive
            .iter()
            .find(|(p, l)| maos_core::lock::overlaps(l.mode, p, LockMode::Write, &key))
        {
            held.push((f, l));
        }
    }
    if held.is_empty() {
        return Ok(());
    }
    // The holders' records (their tasks, windows and processes), one request per session.
    let mut agents: BTreeMap<AgentId, AgentRecord> = BTreeMap::new();
    let sessions: BTreeSet<String> = held.iter().map(|(_, l)| l.session_id.to_string()).collect();
    for s in sessions {
        match client.request(
            Some(&root),
            Request::AgentList(req::AgentList { session: Some(s) }),
        ) {
            Ok(Reply::Agents(list)) => agents.extend(list.into_iter().map(|a| (a.id.clone(), a))),
            Ok(_) => {
                return Err(cannot_tell(
                    "maosd answered the agent list with something else",
                ));
            }
            Err(e) => return Err(cannot_tell(e.body().message)),
        }
    }
    let mine = ancestors();
    let is_mine = |holder: &AgentId| {
        own_processes(holder, &agents)
            .iter()
            .any(|p| mine.iter().any(|m| same(m, p)))
    };
    held.retain(|(_, l)| !is_mine(&l.holder));
    if held.is_empty() {
        return Ok(());
    }
    // Several lines: printed here, not as the one-line error main prints.
    eprintln!("maos: {}", report(&files, &held, &agents));
    Err(refuse(String::new()))
}

/// The refusal: each held file and its holder, and what to do.
fn report(
    files: &[String],
    held: &[(&str, &LockView)],
    agents: &BTreeMap<AgentId, AgentRecord>,
) -> String {
    let safe = |s: &str| maos_core::term::safe(s).into_owned();
    let n = held.len();
    let mut text = format!(
        "commit refused: it takes {n} file{} another agent is working on (a write lock in maos):",
        if n == 1 { "" } else { "s" }
    );
    for (f, l) in held {
        let task = agents
            .get(&l.holder)
            .map(|a| a.task.trim())
            .filter(|t| !t.is_empty())
            .map(|t| {
                let one: String = t.split_whitespace().collect::<Vec<_>>().join(" ");
                let cut: String = one.chars().take(80).collect();
                let more = if cut.len() < one.len() { "…" } else { "" };
                format!(" (task \"{}{more}\")", safe(&cut))
            })
            .unwrap_or_default();
        let lock = match l.mode {
            LockMode::Write => String::new(),
            m => format!(" ({m} lock on {})", safe(&l.path)),
        };
        text.push_str(&format!(
            "\n  {}: held by {} {}{task}{lock} since {}",
            safe(f),
            safe(&l.holder_role),
            l.holder.short(),
            maos_core::utc(l.acquired_at)
        ));
    }
    let words: Vec<String> = held.iter().map(|(f, _)| word(f)).collect();
    if held.len() < files.len() {
        text.push_str(&format!(
            "\nto commit the other files only: git restore --staged -- {} && git commit",
            words.join(" ")
        ));
    } else {
        text.push_str("\nevery file of this commit is held: commit once the holders are done");
    }
    text.push_str(&format!(
        "\n`maos lock list` shows who holds what; {BYPASS}"
    ));
    text
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_process_is_the_same_only_by_pid_and_a_known_start_time() {
        let p = |pid, start_time| ProcessRef { pid, start_time };
        assert!(same(&p(10, Some(5)), &p(10, Some(5))));
        assert!(!same(&p(10, Some(5)), &p(10, Some(6))), "a reused pid");
        assert!(
            !same(&p(10, None), &p(10, None)),
            "a pid alone proves nothing"
        );
        assert!(!same(&p(10, Some(5)), &p(11, Some(5))));
    }

    #[test]
    fn this_processs_ancestors_are_found_nearest_first() {
        let a = ancestors();
        if cfg!(target_os = "linux") {
            assert_eq!(
                a.first().map(|p| p.pid),
                Some(std::os::unix::process::parent_id())
            );
            assert!(a.iter().all(|p| p.start_time.is_some()));
        }
    }
}
