//! Git in a shared checkout (issue 31 §3): a shell call's git commands that would discard or
//! capture another agent's uncommitted work in files it holds are denied, naming them (and,
//! for a capture, the command that leaves them out); the git index is one resource, taken for
//! a git command's duration so that two agents' commands take turns instead of failing on
//! `index.lock`.

use maos_core::{AgentId, HeldLock, LockMode, LockPath, WaitPolicy};
use maos_proto::{GitUse, HookAnswer};

use crate::base::hookcall::Hook;

use super::answer::{deny_held, describe};
use crate::ops::lock::{self as ops, Taken};
use crate::txn::state::Txn;

/// What a hook call comes to: an answer now, or a wait for the git index that the actor
/// answers when it ends.
pub enum Hooked {
    Answer(HookAnswer),
    Wait(maos_core::WaitId),
}

impl From<HookAnswer> for Hooked {
    fn from(a: HookAnswer) -> Self {
        Hooked::Answer(a)
    }
}

/// Whether the git pathspec key `spec` ("." for the whole tree) reaches the held lock `l`.
fn reaches(spec: &str, l: &HeldLock) -> bool {
    let key = l.path.as_str();
    let under = |outer: &str, inner: &str| {
        outer == "." || outer == inner || inner.starts_with(&format!("{outer}/"))
    };
    match l.mode {
        LockMode::Workspace => true,
        LockMode::Directory => under(spec, key) || under(key, spec),
        _ => under(spec, key),
    }
}

/// The exclusive locks other agents hold that `g` reaches.
fn reached(tx: &Txn<'_>, agent: &AgentId, g: &GitUse) -> Vec<HeldLock> {
    tx.state()
        .locks
        .held()
        .filter(|l| &l.holder != agent && l.mode.is_exclusive())
        // git's own files (another command's turn at the index) are no one's work: that
        // is a wait, not a refusal.
        .filter(|l| !l.path.as_str().starts_with(".git/"))
        .filter(|l| g.all || g.paths.iter().any(|p| reaches(p, l)))
        .cloned()
        .collect()
}

/// A pathspec that names `key` from the top of the working tree, quoted for a shell.
fn top(key: &str) -> String {
    format!("':(top){key}'")
}

fn exclude(key: &str) -> String {
    format!("':(top,exclude){key}'")
}

/// The arguments after the git subcommand `sub`, as written.
fn after<'a>(args: &'a [String], sub: &str) -> &'a [String] {
    match args.iter().position(|a| a == sub) {
        Some(i) => &args[i + 1..],
        None => &[],
    }
}

/// The command that captures what `g` meant to, less the files in `held` (keys).
fn without(g: &GitUse, held: &[&str]) -> String {
    let excludes: Vec<String> = held.iter().map(|k| exclude(k)).collect();
    let committing = g.args.iter().any(|a| a == "commit");
    if g.all {
        let add = match committing {
            true => "git add -u",
            false => "git add -A",
        };
        let add = format!("{add} -- ':/' {}", excludes.join(" "));
        if !committing {
            return add;
        }
        // `commit -a` (or `-am`): the same commit of what is now staged.
        let rest: Vec<String> = after(&g.args, "commit")
            .iter()
            .filter(|a| *a != "-a" && *a != "--all")
            .map(|a| match a.strip_prefix('-') {
                Some(flags) if !a.starts_with("--") && flags.contains('a') => {
                    format!("-{}", flags.replace('a', ""))
                }
                _ => a.clone(),
            })
            .map(|a| shell_quote(&a))
            .collect();
        return format!("{add} && git commit {}", rest.join(" "))
            .trim_end()
            .to_string();
    }
    let mine: Vec<String> = g
        .paths
        .iter()
        .filter(|p| !held.contains(&p.as_str()))
        .map(|p| top(p))
        .collect();
    if mine.is_empty() {
        return String::new();
    }
    match committing {
        true => format!("git commit -- {}", mine.join(" ")),
        false => format!("git add -- {}", mine.join(" ")),
    }
}

fn shell_quote(word: &str) -> String {
    if !word.is_empty()
        && word
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "-_./=:@%+,".contains(c))
    {
        return word.to_string();
    }
    format!("'{}'", word.replace('\'', r"'\''"))
}

/// A git command of the call that would discard or capture work in files other agents hold:
/// denied, naming each file and its holder.
pub fn guard(tx: &mut Txn<'_>, agent: &AgentId, call: &Hook) -> Option<HookAnswer> {
    for g in &call.git {
        let hit = reached(tx, agent, g);
        if hit.is_empty() {
            continue;
        }
        let now = tx.now;
        let whose: Vec<String> = hit
            .iter()
            .map(|l| {
                format!(
                    "{} ({}, since {})",
                    l.path,
                    describe(tx.state(), &l.holder, now),
                    maos_core::utc(l.acquired_at)
                )
            })
            .collect();
        let command = format!("git {}", g.args.join(" "));
        let reason = if g.captures {
            let keys: Vec<&str> = hit.iter().map(|l| l.path.as_str()).collect();
            let instead = match without(g, &keys) {
                s if s.is_empty() => "none of the files it names is yours to commit".to_string(),
                s => format!("capture only the rest: `{s}`"),
            };
            format!(
                "maos: `{command}` would capture files other agents hold and are still writing: {}. Do not commit their work; {instead}.",
                whose.join("; ")
            )
        } else {
            format!(
                "maos: `{command}` would discard or replace uncommitted work in files other agents hold: {}. Do not run it while they work (their locks end with their turns; `maos lock list` shows them); limit it to files nobody holds.",
                whose.join("; ")
            )
        };
        let why = match g.captures {
            true => "git_captures_held",
            false => "git_discards_held",
        };
        let holder = hit.first().map(|l| l.holder.clone());
        return Some(deny_held(tx, agent, call, why, reason, holder));
    }
    None
}

/// The longest a git command waits for another's turn at the index, within the hook's budget.
const MAX_INDEX_WAIT_MS: u64 = 60_000;

/// Take the git index `key` for the caller's git command, waiting for another agent's command
/// to finish (within the hook's budget): granted now (`answer` stands), or a wait the actor
/// answers when it ends. Its end releases it ([`release_index`]).
pub fn take_index(
    tx: &mut Txn<'_>,
    agent: &AgentId,
    key: &str,
    budget_ms: Option<u64>,
    answer: HookAnswer,
) -> Hooked {
    let Ok(path) = LockPath::new(key) else {
        return answer.into();
    };
    // What is left of the hook's budget, less a margin to answer in.
    let wait_ms = budget_ms
        .map_or(3_000, |b| b.saturating_sub((b / 4).clamp(200, 1_000)))
        .min(MAX_INDEX_WAIT_MS);
    let until = tx.now + chrono::TimeDelta::milliseconds(wait_ms as i64);
    let ttl_us = tx.state().lock_ttl_us;
    match ops::acquire(
        tx,
        agent,
        path,
        LockMode::Write,
        WaitPolicy::Wait { until },
        ttl_us,
    ) {
        Ok(Taken::Granted(_)) => answer.into(),
        Ok(Taken::Queued(wait)) => Hooked::Wait(wait),
        // A deadlock or a refusal: the command goes on, as git would have run it; it may still
        // meet `index.lock`.
        Err(_) => answer.into(),
    }
}

/// The end of the caller's git command: its turn at the index is over.
pub fn release_index(tx: &mut Txn<'_>, agent: &AgentId, key: &str) {
    if let Ok(path) = LockPath::new(key) {
        let _ = ops::release(tx, Some(agent), &path, false, None);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn capture(all: bool, args: &[&str], paths: &[&str]) -> GitUse {
        GitUse {
            captures: true,
            all,
            paths: paths.iter().map(|p| p.to_string()).collect(),
            args: args.iter().map(|a| a.to_string()).collect(),
        }
    }

    #[test]
    fn the_command_that_leaves_held_files_out() {
        assert_eq!(
            without(&capture(true, &["add", "-A"], &[]), &["src/x.rs"]),
            "git add -A -- ':/' ':(top,exclude)src/x.rs'"
        );
        assert_eq!(
            without(
                &capture(true, &["commit", "-am", "fix it"], &[]),
                &["a", "b"]
            ),
            "git add -u -- ':/' ':(top,exclude)a' ':(top,exclude)b' && git commit -m 'fix it'"
        );
        assert_eq!(
            without(
                &capture(
                    false,
                    &["add", "src/x.rs", "src/y.rs"],
                    &["src/x.rs", "src/y.rs"]
                ),
                &["src/x.rs"]
            ),
            "git add -- ':(top)src/y.rs'"
        );
        assert_eq!(
            without(&capture(false, &["commit", "x"], &["x"]), &["x"]),
            ""
        );
    }
}
