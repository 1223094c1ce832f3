//! One file, one lock, wherever a window started (see DESIGN, "One file, one lock"). A hook
//! call's writes are placed by the connection (`lockpath::place`): a file whose project is not
//! the window's (a repository nested in it, a submodule, the repository a window started above
//! it writes into) has its lock taken in that project, first; the window's later turn ends,
//! prompts and its end reach every project it wrote in; and a file named through a hard link
//! asks for the lock of the held file it is.
//!
//! What a window wrote where is kept in memory ([`Windows`](crate::edge::windows::Windows)): after a restart of the daemon a
//! window's locks in another project end with the window's process, or their lease.

use std::collections::BTreeMap;
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use maos_proto::{ErrorBody, ErrorCode, HookCall, HookDecision, Reply, req};

use crate::base::hookcall::Hook;
use tracing::debug;

use crate::cmd::Outcome;
use crate::edge::daemon::Daemon;
use crate::edge::fleet::Budget;
use crate::project::ProjectHandle;
use crate::project::router::ProjectRequest;

async fn ask(handle: &ProjectHandle, request: ProjectRequest) -> Result<Reply, ErrorBody> {
    match handle.request(request).await? {
        Outcome::Reply(r) => Ok(*r),
        _ => Err(ErrorBody::new(
            ErrorCode::Internal,
            "a hook call was answered with something other than a reply",
        )),
    }
}

/// Keys among `keys` (of the project at `root`) that name, through a hard link, the file of a
/// lock held under another key: `[named, held]`. Only files with more than one name cost a
/// look at the lock table; the held files are compared by device and inode.
pub async fn hard_links(handle: &ProjectHandle, root: &Path, keys: &[String]) -> Vec<[String; 2]> {
    let linked: Vec<(&String, (u64, u64))> = keys
        .iter()
        .filter_map(|k| {
            let m = std::fs::metadata(root.join(k)).ok()?;
            (m.is_file() && m.nlink() > 1).then_some((k, (m.dev(), m.ino())))
        })
        .collect();
    if linked.is_empty() {
        return Vec::new();
    }
    let list = match ask(handle, ProjectRequest::new(req::LockList { session: None })).await {
        Ok(Reply::Locks(list)) => list,
        _ => return Vec::new(),
    };
    let mut found = Vec::new();
    for lock in list.locks.iter().filter(|l| !keys.contains(&l.path)) {
        let Ok(m) = std::fs::metadata(root.join(&lock.path)) else {
            continue;
        };
        for (named, id) in &linked {
            if *id == (m.dev(), m.ino()) {
                found.push([named.to_string(), lock.path.clone()]);
            }
        }
    }
    found
}

/// Ask for the held files a call's hard links name too (see [`hard_links`]).
pub async fn link_held(handle: &ProjectHandle, root: &Path, call: &mut Hook) {
    let links = hard_links(handle, root, &call.paths).await;
    for [_, held] in &links {
        if !call.paths.contains(held) {
            call.paths.push(held.clone());
        }
    }
    call.hard_links = links;
}

/// The writes of `call` whose locks live in other projects, taken there first, one project
/// after another: the first denial (or error) is the call's answer. None when every one was
/// granted, or there were none. A call that is refused already (`path_error`) takes nothing.
pub async fn take_elsewhere(
    daemon: &Daemon,
    call: &Hook,
    budget: Budget<'_>,
) -> Option<Result<Reply, ErrorBody>> {
    if call.elsewhere.is_empty() || call.path_error.is_some() {
        return None;
    }
    let mut by_project: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    for e in &call.elsewhere {
        by_project
            .entry(e.project.as_str())
            .or_default()
            .push(e.path.clone());
    }
    for (project, keys) in by_project {
        let handle = match budget.bound(daemon.projects.get(project)).await {
            Ok(h) => h,
            Err(e) => return Some(Err(e)),
        };
        if let Some(Some(prompt)) = daemon.windows.visit(call, project) {
            // The project learns the window's task first, as if it had been started there.
            let told = Hook::from(HookCall {
                event: "UserPromptSubmit".into(),
                summary: Some(prompt),
                tool_name: None,
                tool_use_id: None,
                paths: Vec::new(),
                written: None,
                mcp_args: None,
                ..call.call.clone()
            });
            if let Err(e) = budget
                .bound(ask(&handle, ProjectRequest::Hook(Box::new(told))))
                .await
            {
                debug!(project, error = %e.message, "telling a project a window's task failed");
            }
        }
        // Only the files: the call's git commands and directories are its own project's.
        let mut sub = Hook::from(HookCall {
            paths: keys,
            ..call.call.clone()
        });
        link_held(&handle, Path::new(project), &mut sub).await;
        match budget
            .bound(ask(&handle, ProjectRequest::Hook(Box::new(sub))))
            .await
        {
            Ok(Reply::Hook(a)) if a.decision == HookDecision::Deny => {
                return Some(Ok(Reply::Hook(a)));
            }
            Ok(_) => {}
            Err(e) if e.code == ErrorCode::ProjectUnloadable => {
                return Some(Ok(crate::project::router::unloadable_denial(&e.message)));
            }
            Err(e) => return Some(Err(e)),
        }
    }
    None
}

/// The events of a window that concern every project it wrote in: the end of a turn or a
/// subagent (their locks), its prompts (its task) and its end.
pub fn follows(call: &HookCall) -> bool {
    matches!(
        call.event.as_str(),
        "Stop" | "SubagentStop" | "SessionEnd" | "UserPromptSubmit"
    )
}

/// Tell the other projects the window wrote in of this event (their answers are not the
/// call's: the window's own project answers it). A window's end forgets it.
pub async fn fan_out(daemon: &Daemon, call: &HookCall, own: &str) {
    if call.event == "UserPromptSubmit" {
        daemon.windows.heard(call);
    }
    for project in daemon.windows.visited(call) {
        if project == own {
            continue;
        }
        let Ok(handle) = daemon.projects.get(&project).await else {
            continue;
        };
        let sub = Hook::from(HookCall {
            paths: Vec::new(),
            ..call.clone()
        });
        if let Err(e) = ask(&handle, ProjectRequest::Hook(Box::new(sub))).await {
            debug!(project, error = %e.message, event = call.event, "a window's event did not reach a project it wrote in");
        }
    }
    if call.event == "SessionEnd" {
        daemon.windows.forget(call);
    }
}
