//! The agent CLI process around this one: what `maos hook` reports so that a window that
//! ends without saying so is noticed, and what `maos mcp` names so that the daemon can tell
//! which window runs it.

use maos_proto::ProcessRef;

/// The agent CLI's own process: this process's nearest ancestor that is not a shell (CLIs run
/// hooks and MCP servers directly or through `sh -c`). Two or three small `/proc` reads; `None` off Linux.
pub fn cli_process() -> Option<ProcessRef> {
    const SHELLS: &[&str] = &[
        "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox",
    ];
    let mut pid = std::os::unix::process::parent_id();
    for _ in 0..4 {
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        let mut fields = rest.split(' ');
        let ppid: u32 = fields.nth(1)?.parse().ok()?;
        // `starttime` is field 22 of the line; `rest` starts at field 3, and `nth(1)` took
        // fields 3 and 4 (ppid), so field 22 is the 18th after them.
        let start_time = fields.nth(17).and_then(|t| t.parse().ok());
        if !SHELLS.contains(&comm) || ppid <= 1 {
            return Some(ProcessRef { pid, start_time });
        }
        pid = ppid;
    }
    None
}

/// Variables maos reads that a CLI may strip from what it starts (Gemini CLI from a hook's
/// environment under its strict sanitization, `GITHUB_SHA` set; Codex from an MCP server's):
/// `MAOS_*` name the daemon and the agent, the XDG ones are where the socket and the state
/// are by default.
pub const STRIPPED: &[&str] = &[
    "MAOS_SOCKET",
    "MAOS_HOME",
    "MAOS_SESSION_ID",
    "MAOS_AGENT_ID",
    "MAOS_HOOK_FAIL",
    "MAOS_HOOK_TIMEOUT_MS",
    "MAOS_NO_AUTOSTART",
    "XDG_RUNTIME_DIR",
    "XDG_STATE_HOME",
];

/// A CLI may have stripped maos's variables from the environment of what it starts (Gemini
/// CLI a hook's; Codex an MCP server's): take those missing here from the environment the CLI
/// itself was started with (`/proc/PID/environ`, one small read), so that this process reaches
/// the daemon the CLI's hooks reach and names the agent the CLI was started as. Linux only;
/// elsewhere this process's own environment stands. Call it before any thread starts.
pub fn recover_env(cli: Option<ProcessRef>) {
    let missing: Vec<&str> = STRIPPED
        .iter()
        .copied()
        .filter(|k| std::env::var_os(k).is_none())
        .collect();
    let Some(p) = cli.filter(|_| !missing.is_empty()) else {
        return;
    };
    let Ok(environ) = std::fs::read(format!("/proc/{}/environ", p.pid)) else {
        return;
    };
    for entry in environ.split(|b| *b == 0) {
        let Some(eq) = entry.iter().position(|b| *b == b'=') else {
            continue;
        };
        let (key, value) = (&entry[..eq], &entry[eq + 1..]);
        let (Ok(key), Ok(value)) = (std::str::from_utf8(key), std::str::from_utf8(value)) else {
            continue;
        };
        if missing.contains(&key) && !value.is_empty() {
            // SAFETY: callers run this before they start any thread (see above), so no other
            // thread reads the environment while it is set.
            unsafe { std::env::set_var(key, value) };
        }
    }
}
