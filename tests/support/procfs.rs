//! Readings of a process from Linux's `/proc`: its state, parent and start time, its CPU time
//! and its memory. Where `/proc` cannot be read the answers say so (`None`, NaN, an error).

use std::fs;

use crate::client::Res;

/// What `/proc/<pid>/stat` says of a process the harness keeps track of.
#[derive(Clone, Copy, Debug)]
pub struct Stat {
    /// `R`, `S`, `Z` (zombie), ...
    pub state: char,
    pub ppid: u32,
    /// Start time in clock ticks since boot: tells a reused pid apart.
    pub start: u64,
    /// User + system CPU time so far, in clock ticks (USER_HZ = 100 on Linux).
    cpu_ticks: u64,
}

/// `/proc/<pid>/stat` of `pid` (a number, or `self`).
fn stat_of(pid: &str) -> Option<Stat> {
    let text = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Fields after the command name (which may hold spaces) start at field 3.
    let rest = text.get(text.rfind(')')? + 2..)?;
    let f: Vec<&str> = rest.split_whitespace().collect();
    let num = |i: usize| f.get(i).and_then(|v| v.parse::<u64>().ok());
    Some(Stat {
        state: f.first()?.chars().next()?,
        ppid: f.get(1)?.parse().ok()?,
        start: num(19)?,
        cpu_ticks: num(11)? + num(12)?,
    })
}

/// `/proc/<pid>/stat` of a process.
pub fn stat(pid: u32) -> Option<Stat> {
    stat_of(&pid.to_string())
}

/// User + system CPU time of a process (`self` or a pid) so far, in seconds; NaN where it
/// cannot be read.
pub fn cpu_secs(pid: &str) -> f64 {
    stat_of(pid).map_or(f64::NAN, |s| s.cpu_ticks as f64 / 100.0)
}

/// (VmRSS, VmHWM) of a process in KiB.
pub fn memory_kib(pid: u32) -> Res<(u64, u64)> {
    let path = format!("/proc/{pid}/status");
    let text = fs::read_to_string(&path).map_err(|e| format!("{path}: {e}"))?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().trim_end_matches("kB").trim().parse::<u64>().ok())
            .ok_or_else(|| format!("{path}: no {name}"))
    };
    Ok((field("VmRSS:")?, field("VmHWM:")?))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_this_process() {
        let me = stat(std::process::id()).expect("/proc/<pid>/stat of this process");
        // The main thread's state: the test harness's waits while this test runs.
        assert!(matches!(me.state, 'R' | 'S'), "state {}", me.state);
        assert_eq!(me.ppid, std::os::unix::process::parent_id());
        let again = stat(std::process::id()).expect("stat again");
        assert_eq!(
            me.start, again.start,
            "the start time of one process does not change"
        );
        let cpu = cpu_secs("self");
        assert!(cpu.is_finite() && cpu >= 0.0, "CPU time {cpu}");
        let (rss, hwm) = memory_kib(std::process::id()).expect("VmRSS and VmHWM");
        assert!(rss > 0 && hwm >= rss, "VmRSS {rss} KiB, VmHWM {hwm} KiB");
    }

    #[test]
    fn a_missing_process_reads_as_none() {
        // Above the kernel's pid_max limit (2^22), so never a live pid.
        assert!(stat(u32::MAX - 1).is_none());
        assert!(cpu_secs(&(u32::MAX - 1).to_string()).is_nan());
        assert!(memory_kib(u32::MAX - 1).is_err());
    }
}
