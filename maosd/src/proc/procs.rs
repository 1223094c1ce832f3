//! Process utilities for managed agents: identity that survives pid reuse (pid + start time),
//! liveness, state, signalling a whole process group, and where an agent's files live.
//!
//! The real implementation reads `/proc` (Linux). Elsewhere `start_time` and `state` are
//! unknown (`None`) and `alive` falls back to `kill(pid, 0)`, which cannot tell pid reuse apart.
//!
//! Used by the supervisor (`maosd supervise`) and by the daemon's scheduling and recovery.

use std::io;
use std::path::{Path, PathBuf};

/// The fields of `/proc/<pid>/stat` that maos uses.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Stat {
    /// Field 3: `R`, `S`, `D`, `T` (stopped), `t`, `Z` (zombie), `X`, ...
    state: char,
    /// Field 4.
    ppid: u32,
    /// Field 5.
    pgrp: u32,
    /// Field 22: clock ticks since boot.
    start_time: u64,
}

/// Parse the text of `/proc/<pid>/stat`: `pid (comm) S ppid pgrp ...`. The comm may contain
/// spaces and parentheses, so the fields are counted from after the LAST `)`.
fn parse_stat(text: &str) -> Option<Stat> {
    let rest = text.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    // fields[0] is field 3 (state); field N is fields[N - 3].
    let state = fields.first()?.chars().next()?;
    Some(Stat {
        state,
        ppid: fields.get(4 - 3)?.parse().ok()?,
        pgrp: fields.get(5 - 3)?.parse().ok()?,
        start_time: fields.get(22 - 3)?.parse().ok()?,
    })
}

/// A pid as `pid_t`, refusing 0 and values that would turn negative (kill(2) gives both a
/// meaning other than "this one process").
fn as_pid(pid: u32) -> Option<libc::pid_t> {
    libc::pid_t::try_from(pid).ok().filter(|&p| p > 0)
}

#[cfg(target_os = "linux")]
fn stat(pid: u32) -> Option<Stat> {
    use std::io::Read;
    as_pid(pid)?;
    // One read into a stack buffer: recovery checks thousands of processes, and
    // `read_to_string` would add a `statx` and a heap buffer to each. The line is a few
    // hundred bytes (the comm is at most 16); a longer one is read whole below.
    let mut f = std::fs::File::open(format!("/proc/{pid}/stat")).ok()?;
    let mut buf = [0u8; 1024];
    let n = f.read(&mut buf).ok()?;
    if n < buf.len() {
        return parse_stat(std::str::from_utf8(&buf[..n]).ok()?);
    }
    let mut text = buf.to_vec();
    f.read_to_end(&mut text).ok()?;
    parse_stat(std::str::from_utf8(&text).ok()?)
}

#[cfg(not(target_os = "linux"))]
fn stat(_pid: u32) -> Option<Stat> {
    None
}

/// Whether the process `pid` that started at `start_time` is stopped (SIGSTOP) now. None if
/// it is gone (or another process has its pid) or the platform does not tell.
pub fn stopped(pid: u32, start_time: Option<u64>) -> Option<bool> {
    let s = stat(pid)?;
    if start_time.is_some_and(|t| t != s.start_time) {
        return None;
    }
    Some(s.state == 'T')
}

/// A process's start time: `/proc/<pid>/stat` field 22 (clock ticks since boot) on Linux.
/// None if the process is gone or the platform does not tell.
pub fn start_time(pid: u32) -> Option<u64> {
    stat(pid).map(|s| s.start_time)
}

#[cfg(test)]
/// Process state letter from `/proc/<pid>/stat` field 3 (`R`, `S`, `T` stopped, `Z` zombie,
/// ...). None if the process is gone or the platform does not tell.
pub fn state(pid: u32) -> Option<char> {
    stat(pid).map(|s| s.state)
}

#[cfg(test)]
/// The process group of `pid` (`/proc/<pid>/stat` field 5; `getpgid` elsewhere).
pub fn pgrp(pid: u32) -> Option<u32> {
    #[cfg(target_os = "linux")]
    {
        stat(pid).map(|s| s.pgrp)
    }
    #[cfg(not(target_os = "linux"))]
    {
        let p = as_pid(pid)?;
        // SAFETY: getpgid has no memory-safety preconditions.
        let g = unsafe { libc::getpgid(p) };
        u32::try_from(g).ok()
    }
}

#[cfg(test)]
/// The parent of `pid` (`/proc/<pid>/stat` field 4). None if unknown.
pub fn ppid(pid: u32) -> Option<u32> {
    stat(pid).map(|s| s.ppid)
}

/// The process exists, is not a zombie, and (when `start_time` is Some) started at that time:
/// a pid reused by another process is not alive.
pub fn alive(pid: u32, start_time: Option<u64>) -> bool {
    #[cfg(target_os = "linux")]
    {
        match stat(pid) {
            None => false,
            Some(s) if matches!(s.state, 'Z' | 'X' | 'x') => false,
            Some(s) => start_time.is_none_or(|t| t == s.start_time),
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        // No start time to compare here: a reused pid looks alive.
        let _ = start_time;
        let Some(p) = as_pid(pid) else {
            return false;
        };
        // SAFETY: signal 0 only checks that the process exists.
        if unsafe { libc::kill(p, 0) } == 0 {
            return true;
        }
        io::Error::last_os_error().raw_os_error() == Some(libc::EPERM)
    }
}

/// `f` over every item, on several threads: recovery at start-up looks at thousands of
/// processes and their files, each a few system calls whose time is mostly spent waiting
/// (`/proc`, a cold directory on disk). Results keep the items' order.
pub fn par_map<T: Sync, R: Send>(items: &[T], f: impl Fn(&T) -> R + Sync) -> Vec<R> {
    const PER_THREAD_MIN: usize = 128;
    const THREADS_MAX: usize = 8;
    let threads = items.len().div_ceil(PER_THREAD_MIN).clamp(1, THREADS_MAX);
    if threads == 1 {
        return items.iter().map(&f).collect();
    }
    let chunk = items.len().div_ceil(threads);
    let f = &f;
    std::thread::scope(|scope| {
        let parts: Vec<_> = items
            .chunks(chunk)
            .map(|part| {
                (
                    part,
                    std::thread::Builder::new()
                        .name("maosd-probe".into())
                        .spawn_scoped(scope, move || part.iter().map(f).collect::<Vec<_>>()),
                )
            })
            .collect();
        parts
            .into_iter()
            // A thread that could not be started or failed: its part is done here.
            .flat_map(|(part, h)| {
                h.ok()
                    .and_then(|h| h.join().ok())
                    .unwrap_or_else(|| part.iter().map(f).collect())
            })
            .collect()
    })
}

/// Send `sig` to the process group `pgid` (`kill(-pgid, sig)`). Ok(false) if the group is gone
/// (ESRCH). Groups 0 and 1 are refused: `kill(0)` and `kill(-1)` mean "my own group" and
/// "every process I may signal".
pub fn signal_group(pgid: u32, sig: i32) -> io::Result<bool> {
    let Some(p) = as_pid(pgid).filter(|&p| p > 1) else {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("refusing to signal process group {pgid}"),
        ));
    };
    // SAFETY: plain kill(2) on a negative pid > 1, i.e. exactly one process group.
    if unsafe { libc::kill(-p, sig) } == 0 {
        return Ok(true);
    }
    let e = io::Error::last_os_error();
    if e.raw_os_error() == Some(libc::ESRCH) {
        Ok(false)
    } else {
        Err(e)
    }
}

/// Where a managed agent's files live: `$MAOS_HOME/projects/<hash>/agents/<agent id>/`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentFiles {
    pub dir: PathBuf,
    /// The agent's stdout and stderr, plus the supervisor's `--- maos: ... ---` lines.
    pub log: PathBuf,
    /// The supervisor's durable record of how the agent ended (`maos_proto::AgentExit`);
    /// deleted once the daemon acknowledged it.
    pub exit: PathBuf,
}

impl AgentFiles {
    /// The files inside an agent directory.
    pub fn in_dir(dir: &Path) -> AgentFiles {
        AgentFiles {
            dir: dir.to_path_buf(),
            log: dir.join("output.log"),
            exit: dir.join("exit.json"),
        }
    }
}

#[cfg(test)]
/// The per-project state directory (the one holding `maos.db`) of the project rooted at `root`:
/// `$MAOS_HOME/projects/<workspace_hash>`, as `project::Projects` computes it.
pub fn project_dir(home: &Path, root: &Path) -> PathBuf {
    home.join("projects")
        .join(maos_proto::paths::workspace_hash(root))
}

/// An agent's files; `project_dir` is the per-project directory that holds `maos.db`.
/// Made through [`maos_core::id_path`]: an id that is not one (which an [`maos_core::AgentId`]
/// never is) gets `agents/invalid-id`, still under the project's directory, never a path of
/// its own.
pub fn agent_files(project_dir: &Path, agent_id: &str) -> AgentFiles {
    let agents = project_dir.join("agents");
    let dir = maos_core::id_path(&agents, agent_id, "").unwrap_or_else(|e| {
        tracing::warn!(error = %e, "agent files of an invalid id");
        agents.join("invalid-id")
    });
    AgentFiles::in_dir(&dir)
}

/// Read and parse an `exit.json`: None if it does not exist, Err naming the file if it cannot
/// be read or is not a valid record.
pub fn read_exit(path: &Path) -> Result<Option<maos_proto::AgentExit>, String> {
    let bytes = match std::fs::read(path) {
        Ok(b) => b,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: cannot read: {e}", path.display())),
    };
    serde_json::from_slice(&bytes)
        .map(Some)
        .map_err(|e| format!("{}: not a valid exit record: {e}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::process::CommandExt;
    use std::process::{Child, Command, Stdio};
    use std::time::{Duration, Instant};

    #[test]
    fn par_map_keeps_the_order_across_threads() {
        for n in [0, 1, 127, 128, 129, 1000, 5000] {
            let items: Vec<u64> = (0..n).collect();
            let threads = std::sync::Mutex::new(std::collections::HashSet::new());
            let got = par_map(&items, |x| {
                if let Ok(mut t) = threads.lock() {
                    t.insert(std::thread::current().id());
                }
                x * 3
            });
            assert_eq!(
                got,
                items.iter().map(|x| x * 3).collect::<Vec<_>>(),
                "n = {n}"
            );
            let used = threads.lock().map(|t| t.len()).unwrap_or(0);
            assert_eq!(used > 1, n > 128, "n = {n}: {used} threads");
        }
        // The real use: this process is alive, pid 0 and an unused pid are not.
        let me = (std::process::id(), start_time(std::process::id()));
        let procs = [me, (0, None), (u32::MAX, None)].repeat(200);
        let alive = par_map(&procs, |&(p, t)| alive(p, t));
        assert_eq!(alive, [true, false, false].repeat(200));
    }

    fn wait_until(what: &str, mut cond: impl FnMut() -> bool) {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !cond() {
            assert!(Instant::now() < deadline, "timed out waiting until {what}");
            std::thread::sleep(Duration::from_millis(2));
        }
    }

    /// A `sleep` leading its own process group; killed (group and all) when dropped.
    struct Sleeper(Child);

    impl Sleeper {
        fn start() -> Sleeper {
            let child = Command::new("sleep")
                .arg("30")
                .stdin(Stdio::null())
                .process_group(0)
                .spawn()
                .expect("spawn sleep");
            Sleeper(child)
        }
        fn pid(&self) -> u32 {
            self.0.id()
        }
    }

    impl Drop for Sleeper {
        fn drop(&mut self) {
            let _ = signal_group(self.pid(), libc::SIGKILL);
            let _ = self.0.wait();
        }
    }

    #[test]
    fn stat_is_parsed_after_the_last_paren() {
        let mut line = String::from("1234 (a) b (c) d) S 1 77 77 0 -1 4194560");
        // Fields 10..=21 (12 of them), then 22 = starttime.
        for i in 10..=21 {
            line.push_str(&format!(" {i}"));
        }
        line.push_str(" 987654 23 24\n");
        let s = parse_stat(&line).unwrap();
        assert_eq!(
            s,
            Stat {
                state: 'S',
                ppid: 1,
                pgrp: 77,
                start_time: 987654
            }
        );
        assert_eq!(parse_stat("1234 (x) R 1 2"), None);
        assert_eq!(parse_stat("garbage"), None);
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn stopped_group_is_t_and_continued_group_is_not() {
        let s = Sleeper::start();
        let pid = s.pid();
        assert_eq!(pgrp(pid), Some(pid), "the sleeper leads its own group");
        wait_until("sleep is sleeping", || state(pid) == Some('S'));
        assert!(signal_group(pid, libc::SIGSTOP).unwrap());
        wait_until("the group is stopped", || state(pid) == Some('T'));
        assert!(alive(pid, start_time(pid)), "a stopped process is alive");
        assert!(signal_group(pid, libc::SIGCONT).unwrap());
        wait_until("the group runs again", || {
            state(pid).is_some_and(|c| c != 'T')
        });
    }

    #[cfg(target_os = "linux")]
    #[test]
    fn start_time_and_alive_tell_live_dead_and_reused_pids_apart() {
        let mut s = Sleeper::start();
        let pid = s.pid();
        let st = start_time(pid).expect("a live process has a start time");
        assert_eq!(start_time(pid), Some(st), "stable");
        assert!(alive(pid, None));
        assert!(alive(pid, Some(st)));
        assert!(
            !alive(pid, Some(st + 1)),
            "another start time is another process"
        );
        assert!(ppid(pid) == Some(std::process::id()));

        assert!(signal_group(pid, libc::SIGKILL).unwrap());
        wait_until("the killed sleep is a zombie", || state(pid) == Some('Z'));
        assert!(!alive(pid, None), "a zombie is not alive");
        assert!(!alive(pid, Some(st)));
        s.0.wait().unwrap();
        assert_eq!(start_time(pid), None);
        assert_eq!(state(pid), None);
        assert!(!alive(pid, None));
        assert!(
            !signal_group(pid, libc::SIGTERM).unwrap(),
            "the group is gone"
        );
    }

    #[test]
    fn own_group_and_everyone_are_never_signalled() {
        for g in [0, 1, u32::MAX] {
            assert_eq!(
                signal_group(g, 0).unwrap_err().kind(),
                io::ErrorKind::InvalidInput,
                "{g}"
            );
        }
        assert!(!alive(0, None));
        assert!(!alive(u32::MAX, None));
    }

    #[test]
    fn agent_files_live_under_the_project_dir() {
        let home = Path::new("/h");
        let pd = project_dir(home, Path::new("/a"));
        assert_eq!(
            pd,
            home.join("projects")
                .join(maos_proto::paths::workspace_hash(Path::new("/a")))
        );
        let id = format!("agt_{}", "a".repeat(32));
        let f = agent_files(&pd, &id);
        assert_eq!(f.dir, pd.join("agents").join(&id));
        assert_eq!(f.log, pd.join("agents").join(&id).join("output.log"));
        assert_eq!(f.exit, pd.join("agents").join(&id).join("exit.json"));
        for bad in ["../../x", "/tmp/abs", "ag-1"] {
            assert_eq!(
                agent_files(&pd, bad).dir,
                pd.join("agents/invalid-id"),
                "{bad}"
            );
        }
    }

    #[test]
    fn exit_records_read_absent_valid_and_corrupt() {
        let t = tempfile::tempdir().unwrap();
        let p = t.path().join("exit.json");
        assert_eq!(read_exit(&p).unwrap(), None);
        let exit = maos_proto::AgentExit {
            agent: "a1".into(),
            pid: 42,
            start_time: Some(7),
            code: Some(3),
            signal: None,
            ended_at: chrono::Utc::now(),
            claude_session_id: Some("s".into()),
        };
        std::fs::write(&p, serde_json::to_vec(&exit).unwrap()).unwrap();
        assert_eq!(read_exit(&p).unwrap(), Some(exit));
        std::fs::write(&p, b"{\"agent\": ").unwrap();
        let e = read_exit(&p).unwrap_err();
        assert!(e.contains("exit.json") && e.contains("not a valid"), "{e}");
    }
}
