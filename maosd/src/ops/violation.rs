//! After a tool call: what it did to held files (issue 31 §2). The connection has hashed them
//! (`Hook::seen`, `keep.rs`); here the actor decides. A holder's own write is its version
//! now; another agent's change of a held file is a violation: recorded (`lock_violated`),
//! told to the violating model in its PostToolUse answer and to the holder's model at its next
//! hook, shown in `ps`. Nothing is put back here: `maos restore-file` does that, on request.

use std::collections::HashSet;

use maos_core::text::collapse_and_clip;
use maos_core::{AgentId, LockMode};
use maos_proto::SeenFile;

use crate::base::hookcall::Hook;
use serde_json::json;

use crate::txn::keep::{self, Check, Version};
use crate::txn::state::Txn;

/// Forget the versions of files whose holder let go of them (no longer looked at, their
/// violations no longer shown). Each hook call does it: the lock table is the authority.
pub fn settle(tx: &Txn<'_>) {
    settle_state(tx.state());
}

/// [`settle`] on the project's state (also once it is loaded: after a restart the held
/// files' versions are known again from the next shell command's end).
pub fn settle_state(st: &crate::txn::state::State) {
    let shared = st.kept.clone();
    let holding: HashSet<(&str, &AgentId)> = st
        .locks
        .held()
        .filter(|l| l.mode == LockMode::Write)
        .map(|l| (l.path.as_str(), &l.holder))
        .collect();
    keep::lock(&shared).settle(&holding);
}

/// PostToolUse of `agent`'s call: the files it wrote are its versions (where it holds their
/// write lock), and after a shell command each held file another agent changed is a
/// violation. Returns what the calling model is told, if anything.
pub fn after(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) -> Option<String> {
    settle(tx);
    if call.seen.is_empty() {
        return None;
    }
    let shared = tx.state().kept.clone();
    let holds = |path: &str| {
        tx.state()
            .locks
            .held()
            .any(|l| l.mode == LockMode::Write && &l.holder == agent && l.path.as_str() == path)
    };
    let mine: Vec<bool> = call
        .seen
        .iter()
        .map(|s| call.paths.contains(&s.path) && holds(&s.path))
        .collect();
    let now = tx.now;
    let mut found: Vec<(&SeenFile, Version)> = Vec::new();
    {
        let mut kept = keep::lock(&shared);
        for (seen, mine) in call.seen.iter().zip(mine) {
            if mine {
                kept.set(agent, seen, now);
            } else if let Check::Violated(before) = kept.check(agent, seen, now) {
                found.push((seen, before));
            }
        }
    }
    if found.is_empty() {
        return None;
    }
    let mut told = Vec::new();
    for (seen, before) in found {
        // Changed before this command began: not by it. Recorded on the holder, whose model
        // is told; nobody is named as the one who did it.
        let by = (!seen.before_command).then_some(agent);
        let data = json!({
            "path": seen.path, "holder": before.holder, "violator": by,
            "tool": by.and(call.tool_name.as_ref()),
            "tool_use_id": by.and(call.tool_use_id.as_ref()),
            "before": { "sha256": before.sha256, "bytes": before.size, "kept": before.kept },
            "after": { "sha256": seen.sha256, "bytes": seen.size, "kept": seen.kept,
                       "deleted": seen.deleted() },
        });
        let holder = who(tx, &before.holder);
        let violator = match by {
            Some(a) => format!("{} with a shell command", who(tx, a)),
            None => {
                "a process outside maos's hooks (a person's editor, a background job)".to_string()
            }
        };
        match by {
            Some(a) => {
                tx.lock_event(a, "lock_violated", data);
                told.push(to_violator(seen, &before, &holder));
            }
            None => tx.lock_event(&before.holder, "lock_violated", data),
        }
        keep::lock(&shared).notify(&before.holder, to_holder(seen, &before, &violator));
    }
    (!told.is_empty()).then(|| told.join("\n"))
}

/// What waits for `agent` (a change another agent made to a file it holds), once.
pub fn notices(tx: &Txn<'_>, agent: &AgentId) -> Option<String> {
    keep::lock(&tx.state().kept).take_notices(agent)
}

/// "agent agt_1a2b3c4d (task: fix the parser)".
fn who(tx: &Txn<'_>, id: &AgentId) -> String {
    match tx.state().agent(id) {
        Some(a) => format!(
            "agent {} ({}: {})",
            id.short(),
            a.role,
            collapse_and_clip(&a.task, 120)
        ),
        None => format!("agent {}", id.short()),
    }
}

fn short(sha: &str) -> &str {
    sha.get(..12).unwrap_or(sha)
}

/// How to put the holder's version back, or why it cannot be.
fn put_back(seen: &SeenFile, before: &Version) -> String {
    match before.kept {
        true => format!("`maos restore-file {}` puts it back", seen.path),
        false => format!(
            "maos has only its hash ({}), not a copy (over {} MiB, or not readable when written), so it cannot put it back",
            short(&before.sha256),
            keep::MAX_FILE >> 20
        ),
    }
}

/// What changed, in words.
fn change(seen: &SeenFile, before: &Version) -> String {
    match seen.deleted() {
        true => format!(
            "deleted {} ({} bytes, sha256 {})",
            seen.path,
            before.size,
            short(&before.sha256)
        ),
        false => format!(
            "overwrote {} ({} bytes, sha256 {} → {} bytes, sha256 {})",
            seen.path,
            before.size,
            short(&before.sha256),
            seen.size,
            short(&seen.sha256)
        ),
    }
}

fn to_violator(seen: &SeenFile, before: &Version, holder: &str) -> String {
    let yours = match seen.kept {
        true => format!(
            " Your content is kept too (`maos restore-file {} --version {}`).",
            seen.path,
            short(&seen.sha256)
        ),
        false => String::new(),
    };
    format!(
        "maos: your command {}, a file {holder} holds and is writing: a lock violation, recorded. Do not write it again or undo it yourself; tell the user. The holder's version is kept: {}.{yours}",
        change(seen, before),
        put_back(seen, before),
    )
}

fn to_holder(seen: &SeenFile, before: &Version, violator: &str) -> String {
    format!(
        "maos: {violator} {}, though you hold it. Your version is kept: {}; check the file before you go on with it.",
        change(seen, before).replacen(&seen.path, &format!("your file {}", seen.path), 1),
        put_back(seen, before),
    )
}

/// `maos restore-file` put a file back (the connection wrote it): recorded, on the holder's
/// timeline when maos knows it (else the project's), and the holder's version is that one
/// again.
pub fn restored(tx: &mut Txn<'_>, report: &maos_proto::FileRestoreReport) {
    keep::lock(&tx.state().kept).restored(&report.path, &report.version, report.bytes);
    let data = json!({
        "path": report.path, "holder": report.holder,
        "restored": { "sha256": report.version, "bytes": report.bytes },
        "replaced": { "sha256": report.replaced, "kept": report.replaced_kept },
    });
    match report
        .holder
        .as_ref()
        .filter(|h| tx.state().agent(h).is_some())
    {
        Some(h) => {
            let h = h.clone();
            tx.lock_event(&h, "file_restored", data)
        }
        None => tx.event(None, None, "file_restored", data),
    }
}
