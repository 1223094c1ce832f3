//! Who made an MCP tool call (`maos mcp`). The MCP server process cannot see which agent of
//! its CLI called it; the CLI's `PreToolUse` hook of the same call can. The hook records the
//! call here: its `tool_use_id` (Claude Code also puts it in the call's
//! `_meta["claudecode/toolUseId"]`, the exact link) and a claim keyed by the CLI's process,
//! the tool and a digest of its arguments (for CLIs that send no id). The MCP server then asks
//! whose call it is: by id first, else the oldest matching claim. Entries live a short time
//! and each is used once. Pure: time comes in as an argument.

use std::collections::VecDeque;
use std::fmt::Write as _;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::record::{ProcessRef, Todo};
use crate::{AgentId, Ts};

/// How long a recorded call waits for the MCP server to ask (a CLI calls the server right
/// after the hook allowed the call).
pub const CLAIM_TTL_MS: i64 = 30_000;

/// Calls kept per project; the oldest go first.
pub const MAX_CLAIMS: usize = 1024;

/// Which rule named the caller of an MCP tool call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallerRule {
    /// The call's tool use id, recorded by the CLI's hook (exact).
    ToolUseId,
    /// The oldest hook record of the same CLI process, tool and arguments.
    Claim,
    /// `MAOS_AGENT_ID` in the MCP server's environment (an agent `maos run` started).
    Env,
    /// No record: the main agent of the CLI window that runs the server.
    Window,
}

impl CallerRule {
    /// How an answer says which rule named the agent.
    pub fn words(self) -> &'static str {
        match self {
            CallerRule::ToolUseId => "by the tool use id its hook recorded",
            CallerRule::Claim => "by its hook's record of this tool and arguments",
            CallerRule::Env => "by MAOS_AGENT_ID",
            CallerRule::Window => {
                "as the main agent of its CLI window: no hook recorded this call, so a subagent's call counts as the window's"
            }
        }
    }
}

/// The MCP tool name maos's server knows (`lock_acquire`) for a CLI's name of it: Claude Code
/// and Codex say `mcp__maos__lock_acquire`, Gemini CLI `mcp_maos_lock_acquire`.
pub fn tool_of(cli_tool: &str) -> Option<&str> {
    cli_tool
        .strip_prefix("mcp__maos__")
        .or_else(|| cli_tool.strip_prefix("mcp_maos_"))
        .filter(|t| !t.is_empty())
}

/// Whether `maos mcp` asks the daemon whose call of `tool` (maos's name) it is: every tool
/// but the reads that need no agent (`status`, `who`, `locks`, `events`). A hook records only
/// these calls; a record nobody asks for would only fill the table.
pub fn asks_for_caller(tool: &str) -> bool {
    !matches!(tool, "status" | "who" | "locks" | "events")
}

/// A JSON value written one way only: object keys sorted, no spaces. The hook and the server
/// see the same arguments, perhaps with keys in another order.
pub fn canonical(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Object(m) => {
            let mut keys: Vec<&String> = m.keys().collect();
            keys.sort();
            out.push('{');
            for (i, k) in keys.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                let _ = write!(out, "{}:", Value::String(k.clone()));
                write_canonical(&m[k], out);
            }
            out.push('}');
        }
        Value::Array(a) => {
            out.push('[');
            for (i, x) in a.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(x, out);
            }
            out.push(']');
        }
        // `null`, booleans, numbers and strings have one form in serde_json's output.
        other => {
            let _ = write!(out, "{other}");
        }
    }
}

/// The digest a claim keys arguments by: SHA-256 of their [`canonical`] form, in hex.
pub fn args_digest(args: &Value) -> String {
    use sha2::{Digest, Sha256};
    let digest = Sha256::digest(canonical(args).as_bytes());
    let mut hex = String::with_capacity(64);
    for b in digest {
        let _ = write!(hex, "{b:02x}");
    }
    hex
}

/// Most items a task list may have.
pub const MAX_TODOS: usize = 100;

/// Longest item text accepted (it is kept to its first line, 200 characters).
pub const MAX_TODO_CHARS: usize = 1000;

/// A task list as an agent reports it: each item's text made its first line (200 characters
/// at most), or why it cannot be taken (one sentence).
pub fn check_todos(items: Vec<Todo>) -> Result<Vec<Todo>, String> {
    if items.len() > MAX_TODOS {
        return Err(format!(
            "the task list has {} items, more than the {MAX_TODOS} maos keeps",
            items.len()
        ));
    }
    items
        .into_iter()
        .enumerate()
        .map(|(i, t)| {
            let n = i + 1;
            if !matches!(t.status.as_str(), "pending" | "in_progress" | "completed") {
                return Err(format!(
                    "item {n} has status {:?}: use pending, in_progress or completed",
                    t.status
                ));
            }
            if t.content.chars().count() > MAX_TODO_CHARS {
                return Err(format!(
                    "item {n} is over {MAX_TODO_CHARS} characters: say it in one line"
                ));
            }
            let line = t.content.lines().map(str::trim).find(|l| !l.is_empty());
            let Some(line) = line else {
                return Err(format!("item {n} has no text"));
            };
            Ok(Todo {
                content: line.chars().take(200).collect(),
                status: t.status,
            })
        })
        .collect()
}

/// What a claim is matched on: the CLI process that runs the hook and the server, the tool
/// (maos's name of it) and the digest of its canonical arguments.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ClaimKey {
    pub process: ProcessRef,
    pub tool: String,
    pub args: String,
}

#[derive(Clone, Debug, PartialEq)]
struct Entry {
    tool_use_id: Option<String>,
    key: Option<ClaimKey>,
    agent: AgentId,
    at: Ts,
}

/// The MCP calls hooks recorded and no server has asked about yet, oldest first.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct McpCalls {
    entries: VecDeque<Entry>,
}

impl McpCalls {
    /// A hook allowed an MCP call of `agent`: remember it (by id, by claim key, or both).
    pub fn record(
        &mut self,
        tool_use_id: Option<String>,
        key: Option<ClaimKey>,
        agent: AgentId,
        now: Ts,
    ) {
        if tool_use_id.is_none() && key.is_none() {
            return;
        }
        self.expire(now);
        // A CLI that runs the hook again for the same call replaces its record.
        if let Some(id) = &tool_use_id {
            self.entries
                .retain(|e| e.tool_use_id.as_deref() != Some(id.as_str()));
        }
        if self.entries.len() >= MAX_CLAIMS {
            self.entries.pop_front();
        }
        self.entries.push_back(Entry {
            tool_use_id,
            key,
            agent,
            at: now,
        });
    }

    /// The agent of the call with this tool use id, taken (each record answers once).
    pub fn take_id(&mut self, tool_use_id: &str, now: Ts) -> Option<AgentId> {
        self.expire(now);
        let i = self
            .entries
            .iter()
            .position(|e| e.tool_use_id.as_deref() == Some(tool_use_id))?;
        self.entries.remove(i).map(|e| e.agent)
    }

    /// The agent of the oldest call recorded with this key, taken.
    pub fn take_claim(&mut self, key: &ClaimKey, now: Ts) -> Option<AgentId> {
        self.expire(now);
        let i = self
            .entries
            .iter()
            .position(|e| e.key.as_ref() == Some(key))?;
        self.entries.remove(i).map(|e| e.agent)
    }

    /// Records waiting (for tests and `doctor`).
    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    fn expire(&mut self, now: Ts) {
        let ttl = chrono::Duration::milliseconds(CLAIM_TTL_MS);
        while self.entries.front().is_some_and(|e| now - e.at > ttl) {
            self.entries.pop_front();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use chrono::TimeZone;
    use serde_json::json;

    fn t(ms: i64) -> Ts {
        chrono::Utc
            .timestamp_millis_opt(1_800_000_000_000 + ms)
            .unwrap()
    }

    fn agent(n: u128) -> AgentId {
        AgentId::from_uuid(uuid::Uuid::from_u128(n))
    }

    fn key(tool: &str, args: &str) -> ClaimKey {
        ClaimKey {
            process: ProcessRef {
                pid: 42,
                start_time: Some(7),
            },
            tool: tool.into(),
            args: args.into(),
        }
    }

    #[test]
    fn canonical_sorts_keys_at_every_level() {
        let a = json!({"b": 1, "a": {"z": [1, {"y": 2, "x": "s"}], "c": null}});
        let b: Value =
            serde_json::from_str(r#"{"a":{"c":null,"z":[1,{"x":"s","y":2}]},"b":1}"#).unwrap();
        assert_eq!(canonical(&a), canonical(&b));
        assert_eq!(
            canonical(&a),
            r#"{"a":{"c":null,"z":[1,{"x":"s","y":2}]},"b":1}"#
        );
        assert_ne!(canonical(&json!({"a": 1})), canonical(&json!({"a": "1"})));
    }

    #[test]
    fn only_the_tools_that_ask_are_recorded() {
        for t in [
            "lock_acquire",
            "lock_renew",
            "lock_release",
            "lock_check",
            "progress",
        ] {
            assert!(asks_for_caller(t), "{t}");
        }
        assert!(asks_for_caller("note") && asks_for_caller("brief"));
        for t in ["status", "who", "locks", "events"] {
            assert!(!asks_for_caller(t), "{t}");
        }
    }

    #[test]
    fn tool_names_of_each_cli() {
        assert_eq!(tool_of("mcp__maos__lock_acquire"), Some("lock_acquire"));
        assert_eq!(tool_of("mcp_maos_lock_acquire"), Some("lock_acquire"));
        assert_eq!(tool_of("mcp__other__lock_acquire"), None);
        assert_eq!(tool_of("mcp__maos__"), None);
        assert_eq!(tool_of("Write"), None);
    }

    #[test]
    fn an_id_answers_once_and_takes_its_claim_with_it() {
        let mut c = McpCalls::default();
        c.record(Some("tu1".into()), Some(key("note", "h")), agent(1), t(0));
        assert_eq!(c.take_id("tu1", t(5)), Some(agent(1)));
        assert_eq!(c.take_id("tu1", t(5)), None);
        assert_eq!(c.take_claim(&key("note", "h"), t(5)), None);
    }

    #[test]
    fn claims_are_first_in_first_out_and_exact() {
        let mut c = McpCalls::default();
        c.record(None, Some(key("note", "h")), agent(1), t(0));
        c.record(None, Some(key("note", "h")), agent(2), t(1));
        c.record(None, Some(key("note", "other")), agent(3), t(2));
        assert_eq!(c.take_claim(&key("note", "h"), t(3)), Some(agent(1)));
        assert_eq!(c.take_claim(&key("note", "h"), t(3)), Some(agent(2)));
        assert_eq!(c.take_claim(&key("note", "h"), t(3)), None);
        assert_eq!(c.take_claim(&key("lock_acquire", "other"), t(3)), None);
        assert_eq!(c.take_claim(&key("note", "other"), t(3)), Some(agent(3)));
    }

    /// Two CLI windows (two processes) make the same call, same tool and arguments: each
    /// window's call is its own agent's, whichever window's hook recorded first.
    #[test]
    fn a_claim_answers_only_the_cli_process_that_made_it() {
        let in_window = |pid: u32, start_time: Option<u64>| ClaimKey {
            process: ProcessRef { pid, start_time },
            tool: "lock_acquire".into(),
            args: args_digest(&json!({"path": "src/x.rs", "mode": "write"})),
        };
        let (one, two) = (in_window(100, Some(7)), in_window(200, Some(9)));
        // The same pid started again later is another process.
        let reused = in_window(100, Some(8));
        let mut c = McpCalls::default();
        c.record(None, Some(one.clone()), agent(1), t(0));
        c.record(None, Some(two.clone()), agent(2), t(1));
        assert_eq!(c.take_claim(&reused, t(2)), None, "a reused pid");
        assert_eq!(
            c.take_claim(&two, t(2)),
            Some(agent(2)),
            "window two's call"
        );
        assert_eq!(c.take_claim(&two, t(2)), None, "window two made one call");
        assert_eq!(
            c.take_claim(&one, t(3)),
            Some(agent(1)),
            "window one's call"
        );
        assert!(c.is_empty());
    }

    #[test]
    fn records_expire_after_the_ttl() {
        let mut c = McpCalls::default();
        c.record(Some("tu".into()), Some(key("note", "h")), agent(1), t(0));
        assert_eq!(c.take_id("tu", t(CLAIM_TTL_MS + 1)), None);
        assert!(c.is_empty());
    }

    #[test]
    fn the_same_id_recorded_twice_is_one_record_and_the_table_is_capped() {
        let mut c = McpCalls::default();
        c.record(Some("tu".into()), None, agent(1), t(0));
        c.record(Some("tu".into()), None, agent(2), t(1));
        assert_eq!(c.len(), 1);
        assert_eq!(c.take_id("tu", t(2)), Some(agent(2)));
        for i in 0..(MAX_CLAIMS + 10) {
            c.record(Some(format!("x{i}")), None, agent(1), t(3));
        }
        assert_eq!(c.len(), MAX_CLAIMS);
        assert_eq!(c.take_id("x0", t(3)), None);
        assert!(c.take_id(&format!("x{}", MAX_CLAIMS + 9), t(3)).is_some());
    }

    #[test]
    fn task_lists_are_checked_and_kept_to_one_line() {
        let todo = |c: &str, s: &str| Todo {
            content: c.into(),
            status: s.into(),
        };
        let ok = check_todos(vec![todo("  write the parser\nmore", "in_progress")]).unwrap();
        assert_eq!(ok, vec![todo("write the parser", "in_progress")]);
        assert!(
            check_todos(vec![todo("x", "done")])
                .unwrap_err()
                .contains("item 1")
        );
        assert!(check_todos(vec![todo(" \n ", "pending")]).is_err());
        assert!(check_todos(vec![todo(&"x".repeat(1001), "pending")]).is_err());
        assert!(check_todos(vec![todo("x", "pending"); MAX_TODOS + 1]).is_err());
        assert_eq!(check_todos(Vec::new()).unwrap(), Vec::new());
    }

    #[test]
    fn nothing_to_key_on_records_nothing() {
        let mut c = McpCalls::default();
        c.record(None, None, agent(1), t(0));
        assert!(c.is_empty());
    }
}
