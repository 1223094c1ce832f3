//! `maos radar --lock [--agent A]`: each file the conflict radar predicts would conflict
//! becomes a Read lock held by the pair's *later writer* (issue 35), taken through the ordinary
//! lock request, so the two must coordinate: while it holds the lock, no other agent may write
//! the file (their writes are refused naming it); it may still write it itself.
//!
//! The later writer of a file in a pair is the side one of whose agents reported the latest
//! write of that file (the `file_modified` events of its hooks); when neither side reported one
//! (a shell command wrote it), the pair's second side. Its agent is the one of that side who
//! wrote the file last, else the side's first live agent.

use maos_core::radar::{RadarPair, RadarSide};
use maos_core::{AgentId, LockMode, Ts, ids::short};
use std::collections::HashMap;

use maos_proto::{
    ErrorBody, ErrorCode, EventFilter, LockWait, MAX_FILTER_PATHS, Reply, Request, req,
};
use serde::Serialize;

use crate::client::Client;
use crate::failure::{Failure, Res};
use crate::show::{print, print_json};

/// What `--lock` did for one conflicting file.
#[derive(Debug, Serialize)]
struct Outcome {
    /// The file (relative to the repository, which is the project: its lock key).
    path: String,
    /// The later writer, who holds (or was to hold) the Read lock.
    agent: AgentId,
    worktree: String,
    /// The other side.
    other_agents: Vec<AgentId>,
    other_worktree: String,
    /// `locked`, `already held` (it held a lock on the file already), or `refused`.
    outcome: &'static str,
    #[serde(skip_serializing_if = "Option::is_none")]
    token: Option<u64>,
    #[serde(skip_serializing_if = "Option::is_none")]
    error: Option<String>,
}

fn refused(message: String) -> Failure {
    Failure {
        body: ErrorBody::new(ErrorCode::BadRequest, message),
        exit: 1,
    }
}

/// Which side of `pair` wrote `path` last (0: `a`, 1: `b`) and which of its agents, given the
/// writes of that path (`writes`: agent and time, any order).
fn later_writer(pair: &RadarPair, writes: &[(AgentId, Ts)]) -> Option<(usize, AgentId)> {
    let last = |side: &RadarSide| {
        writes
            .iter()
            .filter(|(a, _)| side.agents.contains(a))
            .max_by_key(|(_, t)| *t)
            .cloned()
    };
    let pick = match (last(&pair.a), last(&pair.b)) {
        (Some((a, ta)), Some((_, tb))) if ta > tb => (0, Some(a)),
        (_, Some((b, _))) => (1, Some(b)),
        (Some((a, _)), None) => (0, Some(a)),
        (None, None) => (1, None),
    };
    let side = if pick.0 == 0 { &pair.a } else { &pair.b };
    let agent = pick.1.or_else(|| side.agents.first().cloned())?;
    Some((pick.0, agent))
}

/// Each file's writes its agents' hooks reported (its `file_modified` events): agent and time.
type Writes<'a> = HashMap<&'a str, Vec<(AgentId, Ts)>>;

/// The writes of each of `files`, in one request for up to [`MAX_FILTER_PATHS`] files.
fn writes_of<'a>(
    client: &mut Client,
    root: &str,
    files: &[&'a str],
) -> Result<Writes<'a>, Failure> {
    let mut writes = Writes::new();
    let mut unique: Vec<&str> = files.to_vec();
    unique.sort_unstable();
    unique.dedup();
    for some in unique.chunks(MAX_FILTER_PATHS) {
        let reply = client.request(
            Some(root),
            Request::Events(req::Events {
                filter: EventFilter {
                    types: vec!["file_modified".into()],
                    paths: some.iter().map(|p| p.to_string()).collect(),
                    ..EventFilter::default()
                },
                limit: None,
            }),
        )?;
        let Reply::Events(events) = reply else {
            continue;
        };
        for e in events {
            // The filter lets through events whose path contains one of the files': only the
            // file's own count.
            let Some(path) = e.data["path"].as_str() else {
                continue;
            };
            if let (Ok(i), Some(agent)) = (some.binary_search(&path), e.agent_id) {
                writes.entry(some[i]).or_default().push((agent, e.ts));
            }
        }
    }
    Ok(writes)
}

pub fn run(root: &str, agent: Option<&str>, json: bool) -> Res {
    let mut client = Client::connect(true)?;
    let pairs = match client.request(
        Some(root),
        Request::Radar(req::Radar {
            agent: agent.map(str::to_string),
        }),
    )? {
        Reply::Radar(pairs) => pairs,
        other => return Err(refused(format!("unexpected answer to radar: {other:?}"))),
    };
    let conflicting: Vec<&RadarPair> = pairs.iter().filter(|p| p.conflicts()).collect();
    if conflicting.is_empty() {
        let whose = agent.map_or(String::new(), |a| format!(" for agent {a}"));
        return Err(refused(format!(
            "nothing to lock: the radar predicts no conflict{whose} (`maos radar` shows what it \
             compared)"
        )));
    }
    let held = match client.request(
        Some(root),
        Request::LockList(req::LockList { session: None }),
    )? {
        Reply::Locks(l) => l.locks,
        other => {
            return Err(refused(format!(
                "unexpected answer to lock list: {other:?}"
            )));
        }
    };

    let files: Vec<&str> = conflicting
        .iter()
        .flat_map(|p| p.files.iter().map(|f| f.path.as_str()))
        .collect();
    let writes = writes_of(&mut client, root, &files)?;

    let mut done: Vec<Outcome> = Vec::new();
    for pair in conflicting {
        for file in &pair.files {
            let writes = writes
                .get(file.path.as_str())
                .map_or(&[][..], Vec::as_slice);
            let Some((side, holder)) = later_writer(pair, writes) else {
                continue;
            };
            let (mine, other) = if side == 0 {
                (&pair.a, &pair.b)
            } else {
                (&pair.b, &pair.a)
            };
            let mut out = Outcome {
                path: file.path.clone(),
                agent: holder.clone(),
                worktree: mine.worktree.clone(),
                other_agents: other.agents.clone(),
                other_worktree: other.worktree.clone(),
                outcome: "locked",
                token: None,
                error: None,
            };
            if done
                .iter()
                .any(|d| d.path == out.path && d.agent == out.agent)
            {
                continue;
            }
            if let Some(l) = held
                .iter()
                .find(|l| l.holder == holder && l.path == file.path)
            {
                out.outcome = "already held";
                out.token = Some(l.token);
                done.push(out);
                continue;
            }
            let path = std::path::Path::new(&mine.worktree).join(&file.path);
            let asked = client.request(
                Some(root),
                Request::LockAcquire(req::LockAcquire {
                    agent: holder.to_string(),
                    lock: req::Acquire {
                        at: req::LockAt {
                            path: path.display().to_string(),
                            cwd: Some(mine.worktree.clone()),
                        },
                        mode: LockMode::Read,
                        wait: LockWait::NoWait,
                        ttl_ms: None,
                    },
                }),
            );
            match asked {
                Ok(Reply::Lock(l)) => out.token = Some(l.token),
                Ok(other) => {
                    out.outcome = "refused";
                    out.error = Some(format!("unexpected answer: {other:?}"));
                }
                Err(crate::client::ClientError::Remote(e)) => {
                    out.outcome = "refused";
                    out.error = Some(e.message);
                }
                Err(e) => return Err(e.into()),
            }
            done.push(out);
        }
    }

    if json {
        print_json(&done)?;
    } else {
        let mut text = String::new();
        for d in &done {
            let others: Vec<String> = d
                .other_agents
                .iter()
                .map(|a| short(a.as_str()).to_string())
                .collect();
            let who = format!(
                "{} in {} (it wrote the file after {} in {})",
                short(d.agent.as_str()),
                d.worktree,
                if others.is_empty() {
                    "a worktree with no live agent".to_string()
                } else {
                    others.join(", ")
                },
                d.other_worktree
            );
            let line = match (d.outcome, d.token, &d.error) {
                ("refused", _, Some(e)) => format!("not locked: {} for {who}: {e}", d.path),
                (word, Some(t), _) => format!("{word}: {} (read) for {who}, token {t}", d.path),
                (word, _, _) => format!("{word}: {} (read) for {who}", d.path),
            };
            text.push_str(&line);
            text.push('\n');
        }
        print(&text);
    }
    let refused_n = done.iter().filter(|d| d.outcome == "refused").count();
    if refused_n > 0 {
        return Err(refused(format!(
            "{refused_n} of {} read locks could not be taken (see above)",
            done.len()
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;

    fn side(w: &str, agents: &[&AgentId]) -> RadarSide {
        serde_json::from_value(serde_json::json!({
            "worktree": w, "head": "h", "tree": "t",
            "agents": agents.iter().map(|a| a.to_string()).collect::<Vec<_>>(),
        }))
        .expect("a side")
    }

    fn id(n: u128) -> AgentId {
        AgentId::parse(&format!("agt_{n:032x}")).expect("an id")
    }

    fn at(s: i64) -> Ts {
        chrono::Utc.timestamp_opt(s, 0).single().expect("a time")
    }

    #[test]
    fn the_later_writer_holds_the_lock() {
        let (a1, a2, b1) = (id(1), id(2), id(3));
        let pair: RadarPair = serde_json::from_value(serde_json::json!({
            "a": side("/wa", &[&a1, &a2]), "b": side("/wb", &[&b1]),
            "base": "x", "merged_at": at(0), "files": [],
        }))
        .expect("a pair");
        // b wrote last.
        let writes = vec![
            (a1.clone(), at(1)),
            (b1.clone(), at(3)),
            (a2.clone(), at(2)),
        ];
        assert_eq!(later_writer(&pair, &writes), Some((1, b1.clone())));
        // a's second agent wrote last: it holds it.
        let writes = vec![
            (a1.clone(), at(1)),
            (b1.clone(), at(3)),
            (a2.clone(), at(4)),
        ];
        assert_eq!(later_writer(&pair, &writes), Some((0, a2.clone())));
        // Only a reported a write: a is the later writer we know of.
        assert_eq!(
            later_writer(&pair, &[(a1.clone(), at(1))]),
            Some((0, a1.clone()))
        );
        // Nobody reported one: the second side, its first agent.
        assert_eq!(later_writer(&pair, &[]), Some((1, b1.clone())));
        // Writes of agents on neither side do not count.
        assert_eq!(later_writer(&pair, &[(id(9), at(9))]), Some((1, b1)));
    }
}
