//! The agent CLI process around this one: what `maos hook` reports so that a window that
//! ends without saying so is noticed, and what `maos mcp` names so that the daemon can tell
//! which window runs it.

use maos_proto::ProcessRef;

/// The agent CLI's own process: the one that reads this process's answer. A CLI runs a hook
/// (or an MCP server) with its standard output on a pipe (a socket pair under Node.js) whose
/// other end it reads; a wrapper between them that forks instead of `exec`ing (`timeout 20
/// maos hook`, a script without `exec`, `sudo`) passes that same pipe on as its own standard
/// output. So the CLI is the nearest ancestor whose standard output is not this one's, shells
/// skipped (by their comm or their executable: `sh -c 'maos hook | tee log'` reads nothing
/// itself, and what it writes to is the pipe looked for above it). When standard output is not
/// a pipe or a socket (a terminal, a file) the CLI is the nearest ancestor that is not a shell.
/// A few small `/proc` reads per ancestor (stat, two links); `None` off Linux.
pub fn cli_process() -> Option<ProcessRef> {
    let own = std::fs::read_link("/proc/self/fd/1")
        .ok()
        .and_then(|l| stream(&l));
    let ancestors = Ancestors {
        next: Some(std::os::unix::process::parent_id()),
        outs: own.is_some(),
    };
    cli_of(own, ancestors, |a| {
        SHELLS.contains(&a.comm.as_str()) || exe_is_shell(a.pid)
    })
}

/// Shells, by their comm or their executable's file name.
const SHELLS: &[&str] = &[
    "sh", "bash", "dash", "zsh", "fish", "ksh", "mksh", "busybox",
];

/// Whether `pid` runs a shell's executable: a script's comm is its file's name, its
/// interpreter is the shell.
fn exe_is_shell(pid: u32) -> bool {
    std::fs::read_link(format!("/proc/{pid}/exe")).is_ok_and(|exe| {
        exe.file_name()
            .and_then(|n| n.to_str())
            .is_some_and(|n| SHELLS.contains(&n))
    })
}

/// What [`cli_of`] needs of one ancestor.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Ancestor {
    pid: u32,
    ppid: u32,
    start_time: Option<u64>,
    comm: String,
    /// Its standard output, when that is a pipe or a socket (`pipe:[INODE]`, `socket:[INODE]`).
    out: Option<String>,
}

/// How far up the CLI is looked for: a CLI, a shell, a wrapper or two, and their shells.
const MAX_DEPTH: usize = 8;

/// The CLI among `ancestors` (nearest first), this process's standard output being `own` (see
/// [`cli_process`]); `shell` tells a shell (asked only of an ancestor that does not pass the
/// hook's output on). An ancestor whose parent is init (or none) is taken as it is: the walk
/// never climbs past it.
fn cli_of(
    own: Option<String>,
    ancestors: impl Iterator<Item = Ancestor>,
    shell: impl Fn(&Ancestor) -> bool,
) -> Option<ProcessRef> {
    let mut carried = own;
    for a in ancestors.take(MAX_DEPTH) {
        let found = ProcessRef {
            pid: a.pid,
            start_time: a.start_time,
        };
        if a.ppid <= 1 {
            return Some(found);
        }
        let passes_on = carried.is_some() && a.out == carried;
        if passes_on {
            // A wrapper, or a shell that did not `exec`.
            continue;
        }
        if !shell(&a) {
            return Some(found);
        }
        // A shell writing elsewhere (into a pipeline): what it writes to is looked for.
        if carried.is_some() {
            carried = a.out;
        }
    }
    None
}

/// A pipe's or a socket's identity (`pipe:[INODE]`, `socket:[INODE]`): the same text in every
/// process that holds the same end. None for anything else (a file, a terminal, /dev/null).
fn stream(link: &std::path::Path) -> Option<String> {
    let text = link.to_str()?;
    (text.starts_with("pipe:[") || text.starts_with("socket:[")).then(|| text.to_string())
}

/// The ancestors of this process, nearest first, read from `/proc` one at a time: each one's
/// stat (one read into a buffer on the stack), and its standard output if `outs`.
struct Ancestors {
    next: Option<u32>,
    outs: bool,
}

impl Iterator for Ancestors {
    type Item = Ancestor;

    fn next(&mut self) -> Option<Ancestor> {
        use std::io::Read;
        let pid = self.next.take()?;
        let mut buf = [0u8; 1024];
        let n = std::fs::File::open(format!("/proc/{pid}/stat"))
            .and_then(|mut f| f.read(&mut buf))
            .ok()?;
        let stat = std::str::from_utf8(&buf[..n]).ok()?;
        let (comm, rest) = stat.split_once(" (")?.1.rsplit_once(") ")?;
        let mut fields = rest.split(' ');
        let ppid: u32 = fields.nth(1)?.parse().ok()?;
        // `starttime` is field 22 of the line; `rest` starts at field 3, and `nth(1)` took
        // fields 3 and 4 (ppid), so field 22 is the 18th after them.
        let start_time = fields.nth(17).and_then(|t| t.parse().ok());
        let out = self
            .outs
            .then(|| std::fs::read_link(format!("/proc/{pid}/fd/1")).ok())
            .flatten()
            .and_then(|l| stream(&l));
        self.next = Some(ppid);
        Some(Ancestor {
            pid,
            ppid,
            start_time,
            comm: comm.to_string(),
            out,
        })
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    const HOOK_PIPE: &str = "pipe:[100]";

    /// An ancestor; a shell's comm is `sh` (or its executable is a shell: the same to
    /// [`cli_of`], which asks `shell`).
    fn a(pid: u32, shell: bool, out: Option<&str>) -> Ancestor {
        Ancestor {
            pid,
            ppid: pid - 1,
            start_time: Some(u64::from(pid) * 10),
            comm: if shell { "sh" } else { "node" }.to_string(),
            out: out.map(str::to_string),
        }
    }

    fn is_shell(a: &Ancestor) -> bool {
        a.comm == "sh"
    }

    fn cli(own: Option<&str>, chain: &[Ancestor]) -> Option<u32> {
        cli_of(own.map(str::to_string), chain.iter().cloned(), is_shell).map(|p| p.pid)
    }

    /// The CLI's own standard output: a terminal (not a stream) or its own pipe.
    const TERMINAL: Option<&str> = None;

    #[test]
    fn the_cli_is_the_reader_of_the_answer_whatever_forks_between() {
        // `sh -c 'maos hook'` whose shell `exec`ed: the CLI is the parent.
        assert_eq!(cli(Some(HOOK_PIPE), &[a(50, false, TERMINAL)]), Some(50));
        // `timeout 20 maos hook`: timeout forks, passing the pipe on.
        let timeout = [a(60, false, Some(HOOK_PIPE)), a(50, false, TERMINAL)];
        assert_eq!(cli(Some(HOOK_PIPE), &timeout), Some(50));
        // A script without `exec` (its comm is its name; its executable is a shell), run by
        // `sh -c`, which did not exec either.
        let script = [
            a(70, true, Some(HOOK_PIPE)),
            a(60, true, Some(HOOK_PIPE)),
            a(50, false, Some("pipe:[7]")),
        ];
        assert_eq!(cli(Some(HOOK_PIPE), &script), Some(50));
        // A wrapper written in Python that lets the hook write to its own output.
        let python = [a(60, false, Some(HOOK_PIPE)), a(50, false, TERMINAL)];
        assert_eq!(cli(Some(HOOK_PIPE), &python), Some(50));
        // Node.js runs hooks on socket pairs: the same end is the same socket.
        let node = [
            a(60, false, Some("socket:[9]")),
            a(50, false, Some("pipe:[3]")),
        ];
        assert_eq!(cli(Some("socket:[9]"), &node), Some(50));
    }

    #[test]
    fn a_pipeline_in_a_shell_is_followed_to_the_reader_of_the_shells_output() {
        // `timeout 20 sh -c 'maos hook | tee log'`: tee reads the hook's pipe; the shell's own
        // output is what the CLI reads, passed on by timeout.
        let chain = [
            a(70, true, Some("pipe:[200]")),
            a(60, false, Some("pipe:[200]")),
            a(50, false, TERMINAL),
        ];
        assert_eq!(cli(Some(HOOK_PIPE), &chain), Some(50));
    }

    #[test]
    fn without_a_pipe_the_nearest_ancestor_not_a_shell_is_the_cli() {
        // Run by hand from a terminal, or with the answer sent to a file.
        let chain = [
            a(70, true, TERMINAL),
            a(60, true, Some("pipe:[5]")),
            a(50, false, TERMINAL),
        ];
        assert_eq!(cli(TERMINAL, &chain), Some(50));
        assert_eq!(cli(TERMINAL, &[a(60, false, Some(HOOK_PIPE))]), Some(60));
    }

    #[test]
    fn the_walk_stops_below_init_and_after_a_few_ancestors() {
        // A shell whose parent is init is all there is.
        let orphan = Ancestor {
            ppid: 1,
            ..a(60, true, Some(HOOK_PIPE))
        };
        let found = cli_of(Some(HOOK_PIPE.into()), [orphan].into_iter(), is_shell);
        assert_eq!(
            found,
            Some(ProcessRef {
                pid: 60,
                start_time: Some(600)
            })
        );
        // Nothing but wrappers, deeper than any CLI runs its hooks.
        let deep: Vec<Ancestor> = (0..20)
            .map(|i| a(100 - i, false, Some(HOOK_PIPE)))
            .collect();
        assert_eq!(cli(Some(HOOK_PIPE), &deep), None);
        assert_eq!(cli(Some(HOOK_PIPE), &[]), None);
    }

    #[test]
    fn only_pipes_and_sockets_are_streams() {
        use std::path::Path;
        assert_eq!(stream(Path::new("pipe:[12]")).as_deref(), Some("pipe:[12]"));
        assert_eq!(
            stream(Path::new("socket:[3]")).as_deref(),
            Some("socket:[3]")
        );
        assert_eq!(stream(Path::new("/dev/null")), None);
        assert_eq!(stream(Path::new("/dev/pts/3")), None);
        assert_eq!(stream(Path::new("/tmp/pipe:[12]")), None);
    }
}
