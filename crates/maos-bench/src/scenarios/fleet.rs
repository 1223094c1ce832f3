//! Fleet mode (issue 18), run with `MAOS_TEST_DATABASE=postgres` (a throwaway PostgreSQL the
//! harness starts): a daemon joining a fleet project that already has 100 sessions, from its
//! spawn until it answers the project's `ps` with all of them (the project loaded from
//! PostgreSQL). Each join is a new daemon with a new `MAOS_HOME` and its own clone of the
//! repository (same project key, another root); the one before it is stopped first (until
//! stage 3 of DESIGN.md §10 a project is served by one daemon at a time).

use std::time::Instant;

use maos_proto::{Reply, Request};
use maos_tests::Env;
use maos_tests::client::Res;
use maos_tests::daemon::Daemon;

use crate::Opts;
use crate::harness;
use crate::report::{Goal, Metric, pct, print_human};
use crate::workload::{create_session, running_agent};

const KEY: &str = "bench.invalid/fleet-join";

/// Give `env`'s project the fleet key every clone of this bench shares.
fn name_project(env: &Env) -> Res {
    let dir = env.project.join(".maos");
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    std::fs::write(dir.join("config.toml"), format!("project = \"{KEY}\"\n"))
        .map_err(|e| format!("{}: {e}", dir.display()))
}

pub fn scen_fleet_join(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    if maos_tests::postgres::test_database_url().is_none() {
        return Err(
            "fleet-join measures fleet mode: run it with MAOS_TEST_DATABASE=postgres".into(),
        );
    }
    let sessions = o.requests.unwrap_or(100);
    let agents = o.agents.unwrap_or(10);
    let joins = 5;
    let mut first = harness::start(sync)?;
    name_project(&first.env)?;
    {
        let mut c = first.client()?;
        for i in 0..sessions {
            let sid = create_session(&mut c, &format!("bench: fleet session {i}"), true)?;
            for a in 0..agents {
                running_agent(&mut c, &sid, &format!("worker-{a}"))?;
            }
        }
    }
    first.stop()?;
    let bin = harness::bin_dir()?.join("maosd");
    let mut ns: Vec<u64> = Vec::with_capacity(joins);
    for j in 0..joins {
        let env = Env::try_new(&format!("maos-bench-{}-join{j}-", std::process::id()))
            .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
        name_project(&env)?;
        let t0 = Instant::now();
        let mut d = Daemon::start(env, &bin, &["--synchronous", sync])?;
        let mut c = d.client()?;
        let Reply::Ps(list) = c.call(Request::Ps { all: false })? else {
            return Err("ps answered something else".into());
        };
        let took = t0.elapsed();
        if list.len() != sessions {
            return Err(format!(
                "join {j}: the new daemon's ps shows {} sessions, not {sessions}",
                list.len()
            ));
        }
        ns.push(took.as_nanos() as u64);
        drop(c);
        d.stop()?;
    }
    ns.sort_unstable();
    let name = format!("fleet join, {sessions} sessions x {agents} agents (PostgreSQL)");
    let rows = vec![
        Metric::new(
            &name,
            "spawn to ps with every session, median",
            pct(&ns, 50.0) / 1e3,
            "ms",
        )
        .goal(Goal::AtMost(500.0)),
        Metric::new(&name, "max", pct(&ns, 100.0) / 1e3, "ms"),
    ];
    print_human(
        &format!(
            "fleet join: a new daemon (new MAOS_HOME, another clone) of a project with {sessions} \
             sessions x {agents} running agents in PostgreSQL, spawn to its ps answer, {joins} joins"
        ),
        &rows,
    );
    Ok(rows)
}
