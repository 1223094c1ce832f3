//! Fleet mode's order and time come from PostgreSQL, never from a daemon's own clock or
//! counter (DESIGN.md §10). A daemon whose clock is an hour off (libfaketime, Debian package
//! `faketime`, around that daemon only) judges leases by PostgreSQL's clock: an hour fast, it
//! does not take a lock whose lease is still running; an hour slow, it takes a dead daemon's
//! lock as soon as the lease ended. And fencing tokens rise across daemons in every order of
//! grants: each batch numbers its grants from a fresh block of the fleet's sequence.

use std::path::{Path, PathBuf};

use maos_tests::daemon::Daemon;
use maos_tests::postgres::{Postgres, postgres_or_skip};
use maos_tests::{Env, Value, have_tool_with, maosd_bin};

/// A daemon's agents, on its own home and clone of the project `key`, on machine `machine`.
fn member(pg: &Postgres, machine: &str, key: &str) -> Env {
    let env = Env::new();
    env.write_config(&format!(
        "database_url = \"{}\"\nmachine = \"{machine}\"\n",
        pg.url()
    ));
    std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
    std::fs::write(
        env.project.join(".maos/config.toml"),
        format!("project = \"{key}\"\n"),
    )
    .expect("write .maos/config.toml");
    env
}

/// libfaketime's library, when `faketime` runs here (on CI, where `.ci/run` installs it, its
/// absence fails the test).
fn libfaketime() -> Option<PathBuf> {
    if !have_tool_with("faketime", &["-f", "+0", "true"], "faketime") {
        return None;
    }
    // Debian's multiarch directory: /usr/lib/<triplet>/faketime/.
    let lib = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .map(|d| d.path().join("faketime/libfaketime.so.1"))
        .find(|p| p.is_file());
    if lib.is_none() {
        maos_tests::skip_unless_ci("faketime runs, but libfaketime.so.1 is not under /usr/lib");
    }
    lib
}

/// `env`'s daemon, started with libfaketime preloaded and its clock `offset` off (`+1h`,
/// `-1h`). The monotonic clock stays true: only the time of day is off. Started directly (not
/// through `faketime`, which would run it as its child), so the daemon is the process the
/// test knows.
fn skewed(env: Env, lib: &Path, offset: &str) -> Daemon {
    let maosd = maosd_bin().display().to_string();
    let preload = format!("LD_PRELOAD={}", lib.display());
    let faketime = format!("FAKETIME={offset}");
    let args = [
        preload.as_str(),
        faketime.as_str(),
        "FAKETIME_DONT_FAKE_MONOTONIC=1",
        maosd.as_str(),
    ];
    let d = Daemon::start(env, Path::new("/usr/bin/env"), &args).expect("a skewed maosd");
    // The daemon that answers is the one started so.
    assert_eq!(d.env.daemon_pid(), d.pid(), "another daemon answers");
    d
}

fn token(v: &Value) -> u64 {
    v["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token in {v}"))
}

/// A lock's `expires_at` or `acquired_at` in µs.
fn micros(v: &Value, field: &str) -> i64 {
    maos_tests::ts_micros(
        v[field]
            .as_str()
            .unwrap_or_else(|| panic!("no {field} in {v}")),
    )
}

/// A daemon an hour fast sees a lease of 10 minutes as long over by its own clock; by
/// PostgreSQL's it runs, so the lock stays its holder's: refused, listed, and the holder's
/// write goes on being its own.
#[test]
fn a_daemon_an_hour_fast_does_not_take_a_lock_whose_lease_runs() {
    let Some(lib) = libfaketime() else { return };
    let Some(pg) = postgres_or_skip() else { return };
    let a = member(&pg, "machine-1", "acme/fast");
    let session = a.session("clocks", &[]);
    let a1 = a.agent(Some(&session), "writer", "hold the file");
    let held = a.maos_json(&[
        "lock", "acquire", "src/a.rs", "--agent", &a1, "--ttl", "10m",
    ]);
    let fast = skewed(member(&pg, "machine-2", "acme/fast"), &lib, "+1h");
    let b = &fast.env;
    let b1 = b.agent(Some(&session), "reviewer", "wants the file");
    let f = b.maos_fail(&["lock", "acquire", "src/a.rs", "--agent", &b1]);
    assert_eq!(f.code, "lock_conflict", "the lease runs: {f:?}");
    let listed = b.maos_json(&["lock", "list"]);
    assert_eq!(listed["locks"][0]["holder"], a1.as_str(), "{listed}");
    assert_eq!(token(&listed["locks"][0]), token(&held));
    assert!(
        b.events(&["--type", "lock_expired"]).is_empty(),
        "no lease ended"
    );
    // Idle, with that lease in its table: no timer overdue by its clock fires batch after
    // batch (the fleet's clock says the lease has 10 minutes to run).
    let cpu = fast.cpu_secs();
    let idle = std::time::Instant::now();
    while idle.elapsed() < std::time::Duration::from_secs(2) {
        std::thread::park_timeout(std::time::Duration::from_millis(100));
    }
    let busy = fast.cpu_secs() - cpu;
    assert!(busy < 0.2, "the idle daemon used {busy:.2} s of CPU in 2 s");
    // Its own grants are stamped with PostgreSQL's time, not its clock's.
    let got = b.maos_json(&[
        "lock", "acquire", "src/b.rs", "--agent", &b1, "--ttl", "10m",
    ]);
    let skew = micros(&got, "acquired_at") - micros(&held, "acquired_at");
    assert!(
        (0..30 * 60 * 1_000_000).contains(&skew),
        "granted {skew} µs after the first grant: {got}"
    );
    // The same daemon ran it all (none was started in its place).
    assert_eq!(b.daemon_pid(), fast.pid());
}

/// A daemon an hour slow, alone after its peer was killed (kill -9) holding a lock with a
/// 2 s lease: its agent waiting for the file gets it once the lease ended by PostgreSQL's
/// clock, not an hour later, with a larger token, and the lapse on the timeline.
#[test]
fn a_daemon_an_hour_slow_takes_a_dead_daemons_lock_when_the_lease_ends() {
    let Some(lib) = libfaketime() else { return };
    let Some(pg) = postgres_or_skip() else { return };
    let a = member(&pg, "machine-1", "acme/slow");
    let session = a.session("clocks", &[]);
    let a1 = a.agent(Some(&session), "writer", "hold the file");
    let slow = skewed(member(&pg, "machine-2", "acme/slow"), &lib, "-1h");
    let b = &slow.env;
    let b1 = b.agent(Some(&session), "next", "wants the file");
    let held = a.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a1, "--ttl", "2s"]);
    a.kill9();
    let got = b.maos_json(&[
        "lock", "acquire", "src/a.rs", "--agent", &b1, "--wait", "20s",
    ]);
    assert!(token(&got) > token(&held), "{got} after {held}");
    assert!(
        micros(&got, "acquired_at") >= micros(&held, "expires_at"),
        "granted before the lease ended: {got} after {held}"
    );
    let expired = b.events(&["--type", "lock_expired"]);
    assert_eq!(expired.len(), 1, "{expired:?}");
    assert_eq!(expired[0]["agent_id"], a1.as_str());
    assert_eq!(b.daemon_pid(), slow.pid());
}

/// Two daemons take turns on one file (each grant released before the other's): the tokens
/// rise strictly across both, in this fixed order, though each daemon drew a block of tokens
/// when it opened the project (the first daemon's block lies below the second's).
#[test]
fn tokens_rise_across_two_daemons_taking_turns() {
    let Some(pg) = postgres_or_skip() else { return };
    let a = member(&pg, "machine-1", "acme/turns");
    let session = a.session("turns", &[]);
    let a1 = a.agent(Some(&session), "writer", "take turns");
    let b = member(&pg, "machine-2", "acme/turns");
    let b1 = b.agent(Some(&session), "writer", "take turns");
    let mut tokens = Vec::new();
    for turn in 0..6 {
        let (env, agent) = if turn % 2 == 0 { (&a, &a1) } else { (&b, &b1) };
        let got = env.maos_json(&["lock", "acquire", "src/turn.rs", "--agent", agent]);
        tokens.push(token(&got));
        env.maos_json(&["lock", "release", "src/turn.rs", "--agent", agent]);
    }
    assert!(
        tokens.windows(2).all(|w| w[1] > w[0]),
        "tokens of grants alternating between the daemons: {tokens:?}"
    );
}
