//! `maos-bench`: end-to-end load tool for `maosd`.
//!
//! Starts its own daemon (the `maosd` next to this executable) in a fresh temp dir, drives it
//! over the real wire protocol from plain std threads, and reports latency percentiles,
//! throughput, memory and whole-process `maos ps` cost. Each scenario gets a fresh daemon.
//!
//! Method: latency is one `Instant` around write+read of one request on a connected client;
//! percentiles are nearest-rank over the sorted samples; warm-up requests are excluded.
//! Whole-process timings interleave A B A B and take the median of the per-pair ratios (the
//! method of `tools/ratio.py`).

mod harness;
mod opts;
mod report;
mod scenarios;
mod workload;

use std::process::ExitCode;

use maos_tests::client::Res;

use crate::opts::Opts;
use crate::report::{Metric, machine, markdown};
use crate::scenarios::Scenario;
use crate::scenarios::activation::scen_activation;
use crate::scenarios::agent_start::scen_agent_start;
use crate::scenarios::connections::scen_connections;
use crate::scenarios::dash::{scen_dash_hook, scen_dash_live, scen_dash_paint};
use crate::scenarios::data::{scen_gc, scen_transfer};
#[cfg(feature = "etcd")]
use crate::scenarios::etcd::scen_fleet_etcd;
use crate::scenarios::fleet::{scen_fleet_contention, scen_fleet_join};
use crate::scenarios::hook_concurrent::scen_hook_concurrent;
use crate::scenarios::hook_shell::scen_hook_shell;
use crate::scenarios::locks::{scen_contention, scen_lock};
use crate::scenarios::mcp::scen_mcp;
use crate::scenarios::pg::scen_pg_serialise;
use crate::scenarios::process::{scen_hook, scen_ps, scen_serve};
use crate::scenarios::radar::scen_radar;
use crate::scenarios::radar_corpus::scen_radar_corpus;
use crate::scenarios::requests::{
    scen_create, scen_register, scen_rss, scen_throughput, scen_update,
};
use crate::scenarios::startup::scen_startup;
use crate::scenarios::top::scen_top;

const USAGE: &str = "\
usage: maos-bench <scenario> [options]

scenarios:
  update      state-update round trip (pause/resume of one agent), 1 client
  create      session create round trip, 1 client
  register    agent register round trip, 1 client
  throughput  N clients, each toggling its own agent for D seconds: events/s, p50/p99
  rss         fill 10 sessions x 20 agents x 10,000 events per session, then VmRSS/VmHWM
  ps          whole-process `maos ps` vs the empty binary, interleaved, median of pair ratios
  lock        lock acquire (--no-wait, free file) and release round trips, 1 client
  contention  N agents (own client each) on P paths for D seconds: acquire with a short
              wait, release after each grant; durable grants/s, timeouts, deadlocks
  hook        whole-process `maos hook` (PreToolUse Write) vs the empty binary, interleaved:
              the same file each call (a renewal) and a new file each call (a fresh grant;
              the agent gives them back every 16 calls, untimed)
  hook-shell  whole-process `maos hook` of a Claude Code Bash PreToolUse with a 2 KB command
              (pipes, && chains, a here-document, a sed -i of a free file: read by the daemon)
              interleaved with `hook`'s Write and the empty binary: p50/p99, median ratios;
              then maos_shell::analyze of the same command in process, p50/p99
  hook-concurrent
              N subagents of one Claude session, each its own thread spawning `maos hook`
              (PreToolUse Write on its own files, every 4th call a PostToolUse): paced (one
              call per agent every --pace-ms) and saturated (back-to-back); spawn-to-exit
              p50/p99, calls/s; then checks every agent holds its locks
  agent-start a plan of --agents agents (default 200), each `true`, strategy sequential, run by
              the daemon: start decided -> pid committed (spawn of `maosd supervise`, its
              fork/exec of the agent, the answer recorded) p50/p99/max from the timeline; agents/s
  startup     100 managed sessions x 20 live agents (each waits on a FIFO) and up to 10,000
              events per session on disk (pause/resume; the fill stops after 90 s, see --events);
              maosd killed -9 and a quarter of the agents killed with their supervisors; spawn of
              maosd to the first answer of a project request (recovery committed), 5 restarts
              (killed -9 each); then the agents are released
  transfer    `maos export -o FILE` of a session with 10,000 events and `maos import FILE`
              into a fresh project, whole processes, median of --requests runs (default 5)
  gc          `gc` of 1,000 finished sessions while another client updates a live agent back
              to back: the collection's time, and p50/p99 of the updates meanwhile
  all         every scenario above (latency, throughput, locks for normal and full), one table
  activation  needs systemd-socket-activate (systemd's tool), so not in `all`: whole-process
              `maos ps` as the first command, the daemon started by the socket (20 sessions x 5
              agents to open), then again against the running daemon; --requests rounds
              (default 30), each ending with `maos daemon stop`: first p50/p90, warm p50, ratio
  top         needs tmux and maos-top, so not in `all`: the daemon's CPU over 10 s idle without
              and with --clients maos-top views open (default 5, each in its own tmux 80x24),
              then --requests events (default 1000, a pause/resume every --pace-ms, default 10):
              event commit to the first frame of each view that shows it, p50/p99/max
  dash-paint  needs chromium, chromedriver and maos-dash, so not in `all`: a session of 20 agents
              with 10,000 events of a mix (hook calls, lock releases, notes, denied writes, lock
              waits that time out, pauses) and one with --events (default 200,000); each opened
              in headless Chromium --requests times cold (a fresh `maos dashboard`, whose server
              folds the whole timeline) then as many times warm: ms to the page's
              performance.mark(maos-ready) (median, max), its API requests, its element count
  dash-live   (chromium) a session page open while the mix is committed at 1,000 then 100
              events/s for --duration seconds (default 10): event commit (ts) to its row in
              the page (window.maosSeen), p50/p99/max, and events never shown; beside it a
              plain HTTP reader of the event stream (the server's share), and the page's
              main thread busy time (CDP Performance.getMetrics)
  dash-hook   (chromium) whole-process `maos hook` (a subagent's PreToolUse Write) with no page
              open and with --clients pages (default 5) on a live session, --rate events/s
              (default 200) flowing all along; rounds of 20 calls each way, interleaved, --requests calls each way
              (default 200): ratio of medians and of p99s, and the CPU of maosd, maos-dash
              and the browsers; then again with the browsers on CPU 1, the rest on CPU 0
  mcp         needs maos-mcp: tool calls through one running `maos mcp` (JSON-RPC over its
              stdio, as an MCP client): `who` (one daemon read), `lock_acquire` and
              `lock_release` (whose call it is, then the lock), --requests of each (default
              2000) after a warm-up: p50/p99; then spawn of `maos mcp` to its answer to
              `initialize`, a fresh server each time: p50/p99/max
  pg-serialise
              needs PostgreSQL (its own throwaway server, as the tests start it), so not in
              `all`: fleet mode's lock acquire serialised by a row lock (FOR UPDATE),
              pg_advisory_xact_lock, SERIALIZABLE with retry, advisory with a NOTIFY on every
              release, and advisory batched per daemon (one transaction for what its agents
              asked meanwhile; also with commit-ordered event numbers, and with a NOTIFY after
              each commit, sent with synchronous_commit off, and with every ancestor
              directory's key taken shared); PostgreSQL's default
              durability. First a check that every way keeps one holder per path; then 3
              writers (daemons) x --clients agents (default 20), each acquiring a random one of
              --paths paths (default: 1000, then 20) without waiting and releasing at once,
              the ways in turn for 3 rounds of --duration s (default 3): durable grants/s,
              refusals, acquire p50/p99; one agent alone (the round trip without load); then
              --requests (default 2000) releases that NOTIFY, to the waiter's connection
              receiving it: p50/p99
  fleet-join  run with MAOS_TEST_DATABASE=postgres: a project of --requests sessions (default
              100) x --agents running agents (default 10) in PostgreSQL, then 5 new daemons
              (each a new MAOS_HOME and another clone, one after the other): spawn to the
              project's ps answer with every session. With MAOS_TEST_DATABASE=postgres the
              other scenarios (lock, hook, ...) run their daemon in fleet mode too
  fleet-contention
              run with MAOS_TEST_DATABASE=postgres: 3 daemons on one project, --clients agents
              each (default 20, own client each), a random one of --paths files (default 1000)
              acquired without waiting and released at once for --duration s (default 5):
              durable grants/s in all, acquire p50/p99
  fleet-etcd  built with --features etcd, run with MAOS_TEST_DATABASE=postgres; needs etcd
              (the etcd-server package, or MAOS_BENCH_ETCD), started here on 127.0.0.1 in a
              temporary directory: the same acquire (no wait) / release of a random one of
              --paths files (default 1000) through maos's fleet and through etcd (txn
              compare-and-put with a lease; txn delete at the put's revision), one client
              alone then 3 x --clients (default 20; maos: 3 daemons), --duration s each
              (default 5): round trip p50/p99, grants/s, side by side with the ratio
  connections not in `all` (it opens thousands of sockets): idle connections, then
              subscriptions, in steps up to --clients (default 4096); at each step the
              daemon's RSS, RSS per connection, open files, and --requests (default 50)
              whole-process `maos hook` writes of a file another window holds (denied):
              p50/p99; the figures max_connections' default comes from
  radar       the conflict radar's engine (issue 35), in process: a repository of 10,000 files
              and 10 linked worktrees with uncommitted work (all edit one shared file, two of
              them clash); one write (to the shared file, or to a file of its own) to the
              radar up to date, --requests writes of each kind (default 100): p50/p99/max
  radar-corpus
              the radar's prediction against `git merge` on pairs of commits of real
              repositories (--repo PATH, repeatable; default: this workspace's own): the
              newest --requests merges (default 100) give their parents and consecutive
              merges' branch tips; precision and recall by pair and by file; --out FILE
              writes the pairs and git's outcomes as a corpus description
  serve       start a populated daemon, print its environment, stop on Enter (for ratio.py)

options:
  --clients N           concurrent clients (throughput: 32, rss: 20, contention: 20,
                        startup's fill: 20), dashboard pages (dash-hook: 5)
  --requests N          timed requests (update 5000, create 2000, register 2000), process
                        pairs (ps 200, hook 200), rounds (hook-shell 200), acquire+release
                        pairs (lock 5000), MCP
                        calls of each tool (mcp 2000), hook
                        calls per agent (hook-concurrent: 50 paced; the saturated run makes
                        at most 20), socket activations (activation 30), loads of each
                        kind (dash-paint 10) or hook calls each way (dash-hook 200)
  --duration SECS       throughput and contention run time (default 5), dash-live's time at
                        each rate (default 10), each pg-serialise round (default 3)
  --paths N             files to lock (lock: 1000, contention: 50, pg-serialise: 1000 then 20)
  --wait-ms N           contention: how long an acquire may wait (default 50; 0 = no wait)
  --synchronous MODE    normal|full (default: normal; `all` runs both where relevant)
  --agents-per-session N  agents per session (register: 20, throughput: 32, ps: 5,
                        activation: 5)
  --agents N            hook-concurrent: subagents, one process at a time each (default 20);
                        agent-start: agents in the plan (default 200)
  --pace-ms N           hook-concurrent: one call per agent every N ms in the paced run
                        (default 50, i.e. 400 calls/s for 20 agents); hook: a pause of N ms
                        before each round (an agent between tool calls; default none)
  --events N            startup: pause/resume events per session (rounded up to an even
                        number per agent), filled in full (default: 10,000, but the fill
                        stops after 90 s and the total reached is reported); dash-paint:
                        events of the big session (default 200,000)
  --rate N              dash-hook: events/s committed all along (default 200)
  --repo PATH           radar-corpus: a repository (a worktree or a git directory)
  --out FILE            radar-corpus: write the corpus description there
  --markdown            also print a markdown table (one row per metric, target, PASS/MISS)
";

fn parse_args() -> Res<Opts> {
    let mut args = std::env::args().skip(1);
    let mut o = Opts::default();
    fn num<T: std::str::FromStr>(flag: &str, v: Option<String>) -> Res<T> {
        let v = v.ok_or_else(|| format!("{flag} needs a value"))?;
        v.parse()
            .map_err(|_| format!("{flag}: {v:?} is not a valid number"))
    }
    while let Some(a) = args.next() {
        match a.as_str() {
            "-h" | "--help" => return Err(String::new()),
            "--clients" => o.clients = Some(num(&a, args.next())?),
            "--requests" => o.requests = Some(num(&a, args.next())?),
            "--duration" => o.duration = Some(num(&a, args.next())?),
            "--agents-per-session" => o.per_session = Some(num(&a, args.next())?),
            "--paths" => o.paths = Some(num(&a, args.next())?),
            "--wait-ms" => o.wait_ms = Some(num(&a, args.next())?),
            "--agents" => o.agents = Some(num(&a, args.next())?),
            "--pace-ms" => o.pace_ms = Some(num(&a, args.next())?),
            "--events" => o.events = Some(num(&a, args.next())?),
            "--rate" => o.rate = Some(num(&a, args.next())?),
            "--synchronous" => {
                let v = args.next().ok_or("--synchronous needs normal|full")?;
                if v != "normal" && v != "full" {
                    return Err(format!("--synchronous: {v:?} is not normal or full"));
                }
                o.synchronous = Some(v);
            }
            "--markdown" => o.markdown = true,
            "--repo" => o.repos.push(args.next().ok_or("--repo needs a path")?),
            "--out" => o.out = Some(args.next().ok_or("--out needs a file")?),
            s if s.starts_with('-') => return Err(format!("unknown option {s}")),
            s if o.scenario.is_empty() => o.scenario = s.to_string(),
            s => return Err(format!("unexpected argument {s:?}")),
        }
    }
    if o.scenario.is_empty() {
        return Err("name a scenario".into());
    }
    if o.clients == Some(0)
        || o.requests == Some(0)
        || o.per_session == Some(0)
        || o.paths == Some(0)
        || o.agents == Some(0)
        || o.pace_ms == Some(0)
        || o.events == Some(0)
    {
        return Err(
            "--clients, --requests, --agents-per-session, --paths, --agents, --pace-ms and \
             --events must be at least 1"
                .into(),
        );
    }
    if o.duration.is_some_and(|d| !d.is_finite() || d <= 0.0) {
        return Err("--duration must be positive".into());
    }
    if o.rate.is_some_and(|r| !r.is_finite() || r <= 0.0) {
        return Err("--rate must be a positive number of events per second".into());
    }
    Ok(o)
}

fn run(o: &Opts) -> Res {
    let one =
        |f: Scenario| -> Res<Vec<Metric>> { f(o, o.synchronous.as_deref().unwrap_or("normal")) };
    let metrics = match o.scenario.as_str() {
        "update" => one(scen_update)?,
        "create" => one(scen_create)?,
        "register" => one(scen_register)?,
        "throughput" => one(scen_throughput)?,
        "rss" => one(scen_rss)?,
        "ps" => one(scen_ps)?,
        "hook" => one(scen_hook)?,
        "hook-shell" => one(scen_hook_shell)?,
        "hook-concurrent" => one(scen_hook_concurrent)?,
        "lock" => one(scen_lock)?,
        "contention" => one(scen_contention)?,
        "startup" => one(scen_startup)?,
        "transfer" => one(scen_transfer)?,
        "gc" => one(scen_gc)?,
        "agent-start" => one(scen_agent_start)?,
        "activation" => one(scen_activation)?,
        "top" => one(scen_top)?,
        "connections" => one(scen_connections)?,
        "mcp" => one(scen_mcp)?,
        "pg-serialise" => one(scen_pg_serialise)?,
        "fleet-join" => one(scen_fleet_join)?,
        "fleet-contention" => one(scen_fleet_contention)?,
        #[cfg(feature = "etcd")]
        "fleet-etcd" => one(scen_fleet_etcd)?,
        #[cfg(not(feature = "etcd"))]
        "fleet-etcd" => {
            return Err(
                "this maos-bench was built without etcd's client: build it with \
                        `cargo build --release -p maos-bench --features etcd` (its build needs \
                        protoc, Debian package protobuf-compiler)"
                    .into(),
            );
        }
        "dash-paint" => one(scen_dash_paint)?,
        "dash-live" => one(scen_dash_live)?,
        "dash-hook" => one(scen_dash_hook)?,
        "radar" => one(scen_radar)?,
        "radar-corpus" => one(scen_radar_corpus)?,
        "serve" => one(scen_serve)?,
        "all" => {
            let syncs: Vec<&str> = match o.synchronous.as_deref() {
                Some(s) => vec![s],
                None => vec!["normal", "full"],
            };
            let mut m = Vec::new();
            for s in &syncs {
                m.extend(scen_update(o, s)?);
                m.extend(scen_create(o, s)?);
                m.extend(scen_register(o, s)?);
                m.extend(scen_throughput(o, s)?);
                m.extend(scen_lock(o, s)?);
                m.extend(scen_contention(o, s)?);
            }
            // One durability mode is enough for memory and the client's start-up cost.
            m.extend(scen_rss(o, syncs[0])?);
            m.extend(scen_ps(o, syncs[0])?);
            m.extend(scen_hook(o, syncs[0])?);
            m.extend(scen_hook_concurrent(o, syncs[0])?);
            m.extend(scen_agent_start(o, syncs[0])?);
            m.extend(scen_transfer(o, syncs[0])?);
            m.extend(scen_gc(o, syncs[0])?);
            m.extend(scen_startup(o, syncs[0])?);
            m
        }
        other => return Err(format!("unknown scenario {other:?}")),
    };
    if o.markdown && !metrics.is_empty() {
        println!("\nMachine: {}\n", machine());
        print!("{}", markdown(&metrics));
    }
    Ok(())
}

fn main() -> ExitCode {
    let o = match parse_args() {
        Ok(o) => o,
        Err(e) if e.is_empty() => {
            print!("{USAGE}");
            return ExitCode::SUCCESS;
        }
        Err(e) => {
            eprintln!("maos-bench: {e}\n\n{USAGE}");
            return ExitCode::from(2);
        }
    };
    match run(&o) {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("maos-bench: {e}");
            ExitCode::FAILURE
        }
    }
}
