//! `connections`: what the daemon's connections cost (memory, descriptors) and what a hook
//! takes while they are open: the figures `max_connections`' default comes from (issue 30).
//! Idle connections (hello said, nothing asked) and subscriptions (`events --follow`), each
//! kind in steps up to --clients (default 4096), with whole-process `maos hook` calls (a
//! PreToolUse Write of a file another window holds: denied) at each step.

use std::fs;
use std::os::unix::net::UnixStream;
use std::process::Command;
use std::time::{Duration, Instant};

use maos_proto::{ClientKind, ClientMsg, EventFilter, PROTOCOL_VERSION, ServerMsg};
use maos_tests::Env;
use maos_tests::client::Res;
use maos_tests::daemon::Daemon;

use crate::harness;
use crate::opts::Opts;
use crate::report::{Metric, label, pct, print_human};

/// Raise this process's limit on open files to `want` (it holds one end of every connection).
fn raise_fd_limit(want: u64) -> Res<libc::rlim_t> {
    let mut lim = libc::rlimit {
        rlim_cur: 0,
        rlim_max: 0,
    };
    // SAFETY: getrlimit writes the struct it is given.
    if unsafe { libc::getrlimit(libc::RLIMIT_NOFILE, &mut lim) } != 0 {
        return Err("getrlimit failed".into());
    }
    let want = (want as libc::rlim_t).min(lim.rlim_max);
    if lim.rlim_cur < want {
        lim.rlim_cur = want;
        // SAFETY: setrlimit reads the struct it is given.
        if unsafe { libc::setrlimit(libc::RLIMIT_NOFILE, &lim) } != 0 {
            return Err("setrlimit failed".into());
        }
    }
    Ok(lim.rlim_cur)
}

/// A connection that said hello as `kind`, and, for a follower, subscribed to `project`.
fn open(d: &Daemon, kind: ClientKind, project: &str) -> Res<UnixStream> {
    let mut s = UnixStream::connect(&d.env.socket).map_err(|e| format!("connect: {e}"))?;
    let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
    let hello = ClientMsg::Hello {
        protocol: PROTOCOL_VERSION,
        client_version: "bench".into(),
        client: kind,
    };
    maos_proto::write_frame(&mut s, &hello).map_err(|e| format!("hello: {e}"))?;
    match maos_proto::read_frame::<_, ServerMsg>(&mut s) {
        Ok(ServerMsg::Welcome { .. }) => {}
        other => return Err(format!("hello answered {other:?}")),
    }
    if kind == ClientKind::Follow {
        let sub = ClientMsg::Subscribe {
            id: 1,
            project: project.to_string(),
            filter: EventFilter::default(),
        };
        maos_proto::write_frame(&mut s, &sub).map_err(|e| format!("subscribe: {e}"))?;
        loop {
            match maos_proto::read_frame::<_, ServerMsg>(&mut s) {
                Ok(ServerMsg::Response { result: Ok(_), .. }) => break,
                Ok(ServerMsg::Event { .. }) => {}
                other => return Err(format!("subscribe answered {other:?}")),
            }
        }
    }
    Ok(s)
}

fn fds(pid: u32) -> f64 {
    fs::read_dir(format!("/proc/{pid}/fd")).map_or(f64::NAN, |d| d.count() as f64)
}

pub fn scen_connections(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let most = o.clients.unwrap_or(4096);
    let calls = o.requests.unwrap_or(50);
    let limit = raise_fd_limit(2 * most as u64 + 512)?;
    if limit < most as libc::rlim_t + 256 {
        return Err(format!(
            "the open-files limit is {limit}: raise it (ulimit -n) or lower --clients"
        ));
    }
    let env = Env::try_new(&format!("maos-bench-{}-", std::process::id()))
        .map_err(|e| format!("cannot create a temporary directory: {e}"))?;
    // Room for every step of either kind: others take 7/8 of it, followers half.
    env.write_config(&format!("max_connections = {}\n", 2 * most + 64));
    let bin = harness::bin_dir()?.join("maosd");
    let mut d = Daemon::start(env, &bin, &["--synchronous", sync])?;
    let maos = harness::client_bin()?;
    let write = |session: &str| {
        serde_json::json!({
            "session_id": session, "cwd": d.env.project, "hook_event_name": "PreToolUse",
            "tool_name": "Write", "tool_use_id": "toolu_bench",
            "tool_input": {"file_path": d.env.project.join("src/x.rs"), "content": "x"},
        })
        .to_string()
    };
    let held = d.env.root().join("held.json");
    let denied = d.env.root().join("denied.json");
    fs::write(&held, write("bench-A")).map_err(|e| e.to_string())?;
    fs::write(&denied, write("bench-B")).map_err(|e| e.to_string())?;
    let hook = |input: &std::path::Path| -> Res<Duration> {
        let stdin = fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
        let mut c: Command = d.client_command(&maos);
        c.arg("hook")
            .stdin(stdin)
            .stdout(std::process::Stdio::piped());
        let t = Instant::now();
        let out = c.output().map_err(|e| format!("maos hook: {e}"))?;
        let took = t.elapsed();
        let text = String::from_utf8_lossy(&out.stdout);
        if input == denied.as_path() && !text.contains("\"deny\"") {
            return Err(format!("the held file's write was not denied: {text}"));
        }
        Ok(took)
    };
    hook(&held)?;
    let project = Env::project_root(&d.env.project);
    let mut steps: Vec<usize> = [0, 256, 1024, 2048, 4096, 8192]
        .into_iter()
        .filter(|n| *n <= most)
        .collect();
    if steps.last() != Some(&most) {
        steps.push(most);
    }
    let mut rows = Vec::new();
    for kind in [ClientKind::Other, ClientKind::Follow] {
        // What the daemon holds before this kind's connections (the allocator keeps what the
        // previous kind freed).
        let (rss0, _) = d.memory_kib()?;
        let mut conns = Vec::new();
        for &n in &steps {
            let t = Instant::now();
            while conns.len() < n {
                conns.push(open(&d, kind, &project)?);
            }
            let opened = t.elapsed();
            let (rss, _) = d.memory_kib()?;
            let mut took: Vec<u64> = Vec::with_capacity(calls);
            for _ in 0..calls {
                took.push(hook(&denied)?.as_nanos() as u64);
            }
            took.sort_unstable();
            let name = label(&format!("{n} {} connections", kind.as_str()), sync);
            let m = |what: &str| format!("{n} {}: {what}", kind.as_str());
            rows.push(Metric::new(
                &name,
                &m("daemon RSS"),
                rss as f64 / 1024.0,
                "MiB",
            ));
            if n > 0 {
                let per = (rss.saturating_sub(rss0)) as f64 / n as f64;
                rows.push(Metric::new(&name, &m("RSS per connection"), per, "KiB"));
                rows.push(Metric::new(
                    &name,
                    &m("opened in"),
                    opened.as_secs_f64() * 1000.0,
                    "ms",
                ));
            }
            rows.push(Metric::new(
                &name,
                &m("daemon open files"),
                fds(d.pid()),
                "",
            ));
            rows.push(Metric::new(
                &name,
                &m("denied hook p50"),
                pct(&took, 50.0) / 1000.0,
                "ms",
            ));
            rows.push(Metric::new(
                &name,
                &m("denied hook p99"),
                pct(&took, 99.0) / 1000.0,
                "ms",
            ));
        }
        drop(conns);
    }
    d.stop()?;
    print_human("connections", &rows);
    Ok(rows)
}
