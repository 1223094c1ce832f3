//! The temporary directory of an [`Env`]: made under a chosen prefix, with errors returned
//! rather than panics (a load tool reports them), and those of killed runs swept away.

use std::collections::BTreeSet;
use std::path::Path;
use std::sync::Mutex;

use crate::Env;

impl Env {
    /// A fresh world in a new temporary directory named `<prefix>XXXXXX`: the daemon's home, its
    /// socket, a user home and the default project (with a `.git` directory, so that project
    /// identity is this directory whatever lies above the tempdir).
    pub fn try_new(prefix: &str) -> std::io::Result<Env> {
        // The suite's shared PostgreSQL (`MAOS_TEST_DATABASE=postgres`) starts here, before a
        // test times anything its commands do.
        crate::postgres::test_database_url();
        let tmp = tempfile::Builder::new().prefix(prefix).tempdir()?;
        // Canonical, so that paths compare equal to what the daemon reports.
        let root = std::fs::canonicalize(tmp.path())?;
        let env = Env {
            home: root.join("home"),
            socket: root.join("run").join("maosd.sock"),
            project: root.join("proj"),
            seen: Mutex::new(BTreeSet::new()),
            _tmp: tmp,
        };
        std::fs::create_dir_all(root.join("user"))?;
        crate::make_clone(&env.project)?;
        Ok(env)
    }
}

/// Remove the temporary directories `<stem><pid>-*` of processes that no longer exist (runs
/// that were killed before they could clean up after themselves). Made with
/// `Env::try_new(&format!("{stem}{pid}-"))`.
pub fn sweep_stale_dirs(stem: &str) {
    let Ok(entries) = std::fs::read_dir(std::env::temp_dir()) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix(stem))
            .and_then(|rest| rest.split('-').next())
        else {
            continue;
        };
        if pid.parse::<u32>().is_ok() && !Path::new("/proc").join(pid).exists() {
            let _ = std::fs::remove_dir_all(e.path());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn makes_the_layout_and_sweeps_only_dead_runs() {
        let stem = format!("maos-sweep-test-{}-", std::process::id());
        // A run of this (live) process, and one of a pid that cannot exist.
        let live = Env::try_new(&format!("{stem}{}-", std::process::id())).expect("live env");
        let dead = tempfile::Builder::new()
            .prefix(&format!("{stem}{}-", u32::MAX - 1))
            .tempdir()
            .expect("dead run's dir")
            .keep();
        assert!(live.project.join(".git").is_dir());
        assert!(live.root().join("user").is_dir());
        assert_eq!(live.home, live.root().join("home"));
        assert_eq!(
            live.root(),
            std::fs::canonicalize(live.root()).expect("canonical")
        );
        sweep_stale_dirs(&stem);
        assert!(!dead.exists(), "{} of a dead pid was kept", dead.display());
        assert!(
            live.project.is_dir(),
            "the live run's directory was removed"
        );
    }
}
