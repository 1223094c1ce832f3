//! What an agent CLI's hook call carries ([`HookCall`], the wire's `hook` request): ids, the
//! event, the tool and the paths it writes, never file contents.

use maos_core::record::{Cli, ProcessRef, Todo};
use serde::{Deserialize, Serialize};

/// One hook call of an agent CLI, reduced to what maos needs: ids, the event, the tool and the
/// path it writes. Never file contents. Only what the client says: what the daemon finds of a
/// call (where its files' locks live, ...) is the daemon's own (`maosd`'s `Hook`); fields a
/// client of an older release sends for it are ignored.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct HookCall {
    /// The CLI that called (`maos hook --cli NAME`; Claude Code when not said).
    #[serde(default)]
    pub cli: Cli,
    /// `hook_event_name`: SessionStart, PreToolUse, SubagentStop, ...
    pub event: String,
    /// The CLI's session id (the same for the main thread and its subagents).
    pub session_id: String,
    /// Present inside a subagent.
    #[serde(default)]
    pub agent_id: Option<String>,
    #[serde(default)]
    pub agent_type: Option<String>,
    #[serde(default)]
    pub tool_name: Option<String>,
    #[serde(default)]
    pub tool_use_id: Option<String>,
    /// The files a writing tool targets, as the CLI named them (the daemon resolves them):
    /// one for `Write`/`Edit`/`MultiEdit`/`NotebookEdit` (and Gemini CLI's `write_file`/
    /// `replace`, whose path may be relative to `cwd`), every file of a Codex `apply_patch`
    /// (the tool, or a `Bash` command that pipes a patch into it).
    #[serde(default)]
    pub paths: Vec<String>,
    #[serde(default)]
    pub cwd: Option<String>,
    /// SessionStart's `source`, SessionEnd's `reason`.
    #[serde(default)]
    pub source: Option<String>,
    /// First line of the prompt, or the subagent tool's description.
    #[serde(default)]
    pub summary: Option<String>,
    /// The subagent tool's prompt, first line.
    #[serde(default)]
    pub prompt_line: Option<String>,
    /// Size and SHA-256 of what a write put in the file (PostToolUse), never the content.
    #[serde(default)]
    pub written: Option<Written>,
    /// PostToolUse of the subagent tool: the child's `agentId` and what it used.
    #[serde(default)]
    pub subagent: Option<SubagentResult>,
    /// A subagent's call: the subagent tool call that started it, as the CLI recorded it
    /// (Claude Code's `subagents/agent-<agentId>.meta.json`, read by the hook). It ties the
    /// subagent to its request for certain; without it the order of events is a guess.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spawned_by: Option<SpawnedBy>,
    /// `MAOS_SESSION_ID` / `MAOS_AGENT_ID` of an agent started by maos: they win over guessing.
    #[serde(default)]
    pub maos_session: Option<String>,
    #[serde(default)]
    pub maos_agent: Option<String>,
    /// A shell tool's command (`Bash`, Codex's shell, `run_shell_command`), which the daemon
    /// reads for the files it writes (at most [`MAX_COMMAND`] bytes; a longer one is not
    /// sent, and runs unread).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// PostToolUse of `TodoWrite`: the agent's whole task list as it now stands.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub todos: Option<Vec<Todo>>,
    /// The CLI's own process (the hook's nearest ancestor that is not a shell), so that a
    /// window that ends without saying so is noticed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub process: Option<ProcessRef>,
    /// A call of maos's own MCP server (`mcp__maos__TOOL`): the digest of its arguments
    /// (`maos_core::mcp::args_digest`), which keys the record that tells `maos mcp` whose
    /// call it is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub mcp_args: Option<String>,
    /// How long the hook still waits for the answer, in ms, as it sends the call (what is
    /// left of `MAOS_HOOK_TIMEOUT_MS`): the daemon answers within it, also when a fleet's
    /// PostgreSQL does not answer.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_ms: Option<u64>,
}

impl HookCall {
    /// The call is of a tool that writes files (`Write`, `Edit`, `MultiEdit`, `NotebookEdit`,
    /// Codex's `apply_patch`, Gemini CLI's `write_file` and `replace`), or a shell command
    /// that runs `apply_patch` (Codex applies such a patch itself; the client names the
    /// patch's files in `paths`): its `paths` are files it writes, which take a lock.
    pub fn writes_files(&self) -> bool {
        match self.tool_name.as_deref() {
            Some(
                "Write" | "Edit" | "MultiEdit" | "NotebookEdit" | "apply_patch" | "write_file"
                | "replace",
            ) => true,
            Some(t) if is_shell_tool(t) => !self.paths.is_empty(),
            _ => false,
        }
    }

    /// The call is of a shell tool ([`is_shell_tool`]).
    pub fn is_shell(&self) -> bool {
        self.tool_name.as_deref().is_some_and(is_shell_tool)
    }

    /// The call is of a tool that starts a subagent ([`is_spawn_tool`]).
    pub fn spawns_subagent(&self) -> bool {
        self.tool_name.as_deref().is_some_and(is_spawn_tool)
    }
}

/// A shell tool, as the client names it for the daemon: Claude Code's and Codex's `Bash`,
/// Gemini CLI's `run_shell_command` (the other CLIs' shells are given one of these names).
pub fn is_shell_tool(name: &str) -> bool {
    matches!(name, "Bash" | "run_shell_command")
}

/// A tool that starts a subagent: Claude Code's `Agent` (`Task` before 2.1.63), Codex's
/// `spawn_agent` as its hooks name it (0.171.0: `spawn_agent` from its default
/// `multi_agent_v1` tools, `collaborationspawn_agent` with `multi_agent_v2`, the namespace
/// run into the name as Codex does for its other namespaced tools).
pub fn is_spawn_tool(tool: &str) -> bool {
    matches!(
        tool,
        "Agent" | "Task" | "spawn_agent" | "multi_agent_v1spawn_agent" | "collaborationspawn_agent"
    )
}

/// A git command in a shell call that discards or captures working-tree changes
/// (the daemon's `Hook::git`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct GitUse {
    /// It captures changes into the index or a commit (`add`, `commit -a`, `commit PATH`);
    /// else it discards them (`stash`, `checkout`, `reset --hard`, `clean -f`, `restore`, ...).
    pub captures: bool,
    /// The whole working tree (`git add -A`, `git stash`); else only `paths`.
    pub all: bool,
    /// The keys it is limited to (after the daemon placed them).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Its arguments after `git`, as written.
    pub args: Vec<String>,
}

/// The longest shell command a hook sends the daemon to read (`HookCall::command`).
pub const MAX_COMMAND: usize = 128 * 1024;

/// A file a hook's call writes whose lock lives in another project (the daemon's `Hook::elsewhere`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Elsewhere {
    /// That project's root (canonical).
    pub project: String,
    /// The file's key there.
    pub path: String,
}

/// Size and hash of the text a write tool sent (its content, new string or patch).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Written {
    pub bytes: u64,
    pub sha256: String,
}

/// The subagent tool call that started a subagent, as the CLI wrote it down.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SpawnedBy {
    /// The `tool_use_id` of the `Agent`/`Task` call (at most [`MAX_SPAWN_ID`] bytes).
    pub tool_use_id: String,
    /// That call's `description` (at most 200 characters).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
}

/// Longest tool call id a [`SpawnedBy`] carries; a longer one ties nothing.
pub const MAX_SPAWN_ID: usize = 256;

/// A subagent tool's result (`tool_response` of PostToolUse `Agent`/`Task`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SubagentResult {
    /// The child's `agent_id`.
    pub agent_id: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub status: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_duration_ms: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub total_tool_use_count: Option<u64>,
}
