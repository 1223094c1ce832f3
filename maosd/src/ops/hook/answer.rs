//! How a hook call is answered and how an agent is named to a model (a leaf under the hook
//! logic: `super` and `super::git` both answer through it).

use maos_core::record::{Activity, Cli, Denial};
use maos_core::text::collapse_and_clip;
use maos_core::{AgentId, Ts};
use maos_proto::{HookAnswer, HookCall, HookDecision};
use serde_json::json;

use crate::txn::locks::who;
use crate::txn::state::{State, Txn};

/// A window's task until its first prompt names it ("Claude Code main thread": older maos).
pub fn placeholder_task(cli: Cli) -> String {
    format!("{} window", cli.label())
}

pub fn is_placeholder_task(task: &str) -> bool {
    task == "Claude Code main thread" || Cli::ALL.iter().any(|c| task == placeholder_task(*c))
}

pub fn answer(
    decision: HookDecision,
    reason: Option<String>,
    context: Option<String>,
) -> HookAnswer {
    HookAnswer {
        decision,
        reason,
        context,
    }
}

/// [`deny`], naming the agent that holds the file (a lock conflict). The agent's last call is
/// then this refusal (`ps`'s NOW), and the reason names agents by their short ids.
pub fn deny_held(
    tx: &mut Txn<'_>,
    agent: &AgentId,
    call: &HookCall,
    why: &str,
    reason: String,
    holder: Option<AgentId>,
) -> HookAnswer {
    let reason = maos_core::ids::shorten_all(&reason).into_owned();
    tx.lock_event(
        agent,
        "tool_denied",
        json!({ "tool": call.tool_name, "paths": call.paths, "why": why, "reason": reason }),
    );
    if let Some(tool) = &call.tool_name {
        let denied = Activity {
            tool: tool.clone(),
            path: call.paths.first().cloned(),
            at: tx.now,
            denied: Some(Denial {
                why: why.to_string(),
                holder,
            }),
        };
        tx.note_activity(agent, denied);
    }
    answer(HookDecision::Deny, Some(reason), None)
}

/// An agent as a model should know it: who (role and short id), which CLI window, its task,
/// and what it is doing now (its current todo, else its last tool call and how long ago).
pub fn describe(st: &State, id: &AgentId, now: Ts) -> String {
    let Some(a) = st.agent(id) else {
        return who(st, id);
    };
    let mut words = who(st, id);
    if let Some(cli) = a.cli {
        let kind = if a.parent.is_some() {
            "subagent"
        } else {
            "window"
        };
        let label = cli.label();
        // "an OpenCode window", "a Codex window".
        let article = match label.starts_with(['A', 'E', 'I', 'O', 'U']) {
            true => "an",
            false => "a",
        };
        words.push_str(&format!(", {article} {label} {kind}"));
    }
    let mut about = Vec::new();
    if !a.task.is_empty() && !is_placeholder_task(&a.task) {
        about.push(format!("task: \"{}\"", collapse_and_clip(&a.task, 120)));
    }
    let todo = st
        .session(&a.session_id)
        .and_then(|s| s.current_todo(&a.id));
    if let Some(todo) = todo {
        about.push(format!("now: {}", collapse_and_clip(&todo.content, 120)));
    } else if let Some(act) = st.activity(&a.id) {
        about.push(format!("last: {}, {} ago", act.words(), ago(act.at, now)));
    }
    if !about.is_empty() {
        words.push_str(&format!(" ({})", about.join("; ")));
    }
    words
}

/// A short duration for a model: "5s", "3m", "2h".
pub fn ago(then: Ts, now: Ts) -> String {
    let s = (now - then).num_seconds().max(0);
    match s {
        0..120 => format!("{s}s"),
        120..7200 => format!("{}m", s / 60),
        _ => format!("{}h", s / 3600),
    }
}
