//! Who this daemon is in a fleet (DESIGN.md §10): its machine's name and an id that stays the
//! same across its restarts, so that its rows (the agents it runs, its clone's root) stay its.

use std::path::Path;

/// This machine's host name, or `unknown-host` when the system will not say.
pub fn machine() -> String {
    let mut buf = [0u8; 256];
    // SAFETY: gethostname writes at most `buf.len()` bytes into the buffer we own.
    let rc = unsafe { libc::gethostname(buf.as_mut_ptr().cast(), buf.len()) };
    let name = if rc == 0 {
        let end = buf.iter().position(|&b| b == 0).unwrap_or(buf.len());
        String::from_utf8_lossy(&buf[..end]).trim().to_string()
    } else {
        String::new()
    };
    if name.is_empty() {
        "unknown-host".into()
    } else {
        name
    }
}

/// The daemon's id in the fleet: its machine and its `MAOS_HOME` (one daemon per home), as
/// `<machine>/<16 hex digits>`.
pub fn daemon_id(machine: &str, home: &Path) -> String {
    format!("{machine}/{}", maos_proto::paths::workspace_hash(home))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_id_names_the_machine_and_differs_per_home() {
        let a = daemon_id("build-1", Path::new("/home/a/.maos"));
        let b = daemon_id("build-1", Path::new("/home/b/.maos"));
        assert!(a.starts_with("build-1/"), "{a}");
        assert_ne!(a, b);
        assert_eq!(a, daemon_id("build-1", Path::new("/home/a/.maos")));
        assert!(!machine().is_empty());
    }
}
