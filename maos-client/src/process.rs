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
