//! `fleet-etcd` (issue 34 §2): maos's fleet lock beside a lock service people already run.
//! etcd (the Debian package `etcd-server`: one member, started here on 127.0.0.1 in a temporary
//! directory, its default durability: the WAL fsynced before an answer) does the same
//! acquire/release as `fleet-contention`'s agents: a write lock on a random one of `--paths`
//! files taken without waiting, released at once by its holder. In etcd an acquire is one
//! transaction, "if the key was never created, put it with my lease" (the compare-and-put that
//! etcd's recipes and its lock service use, without the wait), and a release "if the key is still
//! the revision I put, delete it". Both sides run the same number of clients (each its own
//! connection and thread), the same paths and the same duration: first one client alone (the
//! round trip without load), then `3 x --clients`.

use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Barrier};
use std::time::{Duration, Instant};

use etcd_client::{Client, Compare, CompareOp, PutOptions, Txn, TxnOp};
use maos_tests::client::Res;

use crate::opts::Opts;
use crate::report::{Metric, pct};
use crate::scenarios::fleet::{Contention, fleet_contention};
use crate::workload::{Rng, join_all};

/// The fleet's daemons under load, as in `fleet-contention`.
const DAEMONS: usize = 3;

/// A one-member etcd in its own temporary directory, stopped and removed on drop.
struct Etcd {
    child: Child,
    dir: PathBuf,
    url: String,
    version: String,
}

/// Two distinct ports on 127.0.0.1 that nothing listens on now (both held while the second is
/// chosen, so they differ).
fn free_ports() -> Res<(u16, u16)> {
    let bind =
        || TcpListener::bind("127.0.0.1:0").map_err(|e| format!("cannot bind 127.0.0.1: {e}"));
    let port = |l: &TcpListener| {
        l.local_addr()
            .map(|a| a.port())
            .map_err(|e| format!("cannot read a bound port: {e}"))
    };
    let (a, b) = (bind()?, bind()?);
    Ok((port(&a)?, port(&b)?))
}

/// A current-thread tokio runtime (one per client thread, as each maos agent has its own).
fn runtime() -> Res<tokio::runtime::Runtime> {
    tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start a tokio runtime: {e}"))
}

impl Etcd {
    /// `etcd` (`MAOS_BENCH_ETCD`, else the one on PATH) on two free ports, once it answers.
    fn start() -> Res<Etcd> {
        let bin = std::env::var_os("MAOS_BENCH_ETCD")
            .filter(|p| !p.is_empty())
            .map_or_else(|| PathBuf::from("etcd"), PathBuf::from);
        let version = Command::new(&bin).arg("--version").output().map_err(|e| {
            format!(
                "cannot run {}: {e} (install the etcd-server package, or set MAOS_BENCH_ETCD)",
                bin.display()
            )
        })?;
        // "etcd Version: 3.4.23" -> "etcd 3.4.23"
        let version = String::from_utf8_lossy(&version.stdout)
            .lines()
            .next()
            .unwrap_or("etcd")
            .trim()
            .replace(" Version:", "");
        maos_tests::tempdir::sweep_stale_dirs("maos-bench-");
        let dir = std::env::temp_dir().join(format!("maos-bench-{}-etcd", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        let log = std::fs::File::create(dir.join("etcd.log"))
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let log2 = log
            .try_clone()
            .map_err(|e| format!("{}: {e}", dir.display()))?;
        let (client, peer) = free_ports()?;
        let url = format!("http://127.0.0.1:{client}");
        let peer_url = format!("http://127.0.0.1:{peer}");
        let child = Command::new(&bin)
            .arg("--name=maos-bench")
            .arg(format!("--data-dir={}", dir.join("data").display()))
            .arg(format!("--listen-client-urls={url}"))
            .arg(format!("--advertise-client-urls={url}"))
            .arg(format!("--listen-peer-urls={peer_url}"))
            .arg(format!("--initial-advertise-peer-urls={peer_url}"))
            .arg(format!("--initial-cluster=maos-bench={peer_url}"))
            .arg("--initial-cluster-state=new")
            .stdin(Stdio::null())
            .stdout(log)
            .stderr(log2)
            .spawn()
            .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
        let mut etcd = Etcd {
            child,
            dir,
            url,
            version,
        };
        etcd.wait_ready(Duration::from_secs(20))?;
        Ok(etcd)
    }

    /// Until etcd answers a status request (or its deadline passes, or it exits).
    fn wait_ready(&mut self, within: Duration) -> Res {
        let rt = runtime()?;
        let deadline = Instant::now() + within;
        loop {
            let ok = rt.block_on(async {
                match Client::connect([self.url.as_str()], None).await {
                    Ok(mut c) => c.status().await.is_ok(),
                    Err(_) => false,
                }
            });
            if ok {
                return Ok(());
            }
            if let Ok(Some(status)) = self.child.try_wait() {
                return Err(format!(
                    "etcd exited with {status} before it answered; its log: {}",
                    self.dir.join("etcd.log").display()
                ));
            }
            if Instant::now() >= deadline {
                return Err(format!(
                    "etcd did not answer at {} within {within:?}; its log: {}",
                    self.url,
                    self.dir.join("etcd.log").display()
                ));
            }
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// `clients` clients (each its own connection, lease and thread), each acquiring a random
    /// one of `files` keys without waiting and releasing it at once, for `dur`.
    fn contention(&self, clients: usize, files: usize, dur: Duration) -> Res<Contention> {
        let paths: Arc<Vec<String>> = Arc::new(
            (0..files)
                .map(|i| format!("/maos-bench/src/file{i:05}.rs"))
                .collect(),
        );
        let barrier = Arc::new(Barrier::new(clients + 1));
        let mut handles = Vec::new();
        for k in 1..=clients as u64 {
            let (barrier, paths, url) = (barrier.clone(), paths.clone(), self.url.clone());
            handles.push(std::thread::spawn(move || -> Res<Contention> {
                let rt = runtime()?;
                let run = rt.block_on(async move {
                    // Whatever fails before the barrier still lets the others start.
                    let ready = async {
                        let mut c = Client::connect([url.as_str()], None)
                            .await
                            .map_err(|e| format!("etcd connect: {e}"))?;
                        let lease = c
                            .lease_grant(600, None)
                            .await
                            .map_err(|e| format!("etcd lease grant: {e}"))?
                            .id();
                        Ok::<_, String>((c, lease))
                    }
                    .await;
                    barrier.wait();
                    let (mut c, lease) = ready?;
                    let me = format!("client{k}");
                    let mut rng = Rng(k.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1);
                    let mut run = Contention::default();
                    let t0 = Instant::now();
                    while t0.elapsed() < dur {
                        let key = &paths[rng.below(paths.len())];
                        let take = Txn::new()
                            .when([Compare::create_revision(key.as_str(), CompareOp::Equal, 0)])
                            .and_then([TxnOp::put(
                                key.as_str(),
                                me.as_str(),
                                Some(PutOptions::new().with_lease(lease)),
                            )]);
                        let t = Instant::now();
                        let got = c
                            .txn(take)
                            .await
                            .map_err(|e| format!("etcd acquire {key}: {e}"))?;
                        let ns = t.elapsed().as_nanos() as u64;
                        run.acquire.push(ns);
                        if !got.succeeded() {
                            run.refused += 1;
                            continue;
                        }
                        // The put's revision: the fencing token etcd gives.
                        let rev = got
                            .header()
                            .map(|h| h.revision())
                            .ok_or("etcd answered an acquire without a header")?;
                        let give = Txn::new()
                            .when([Compare::mod_revision(key.as_str(), CompareOp::Equal, rev)])
                            .and_then([TxnOp::delete(key.as_str(), None)]);
                        let t = Instant::now();
                        let back = c
                            .txn(give)
                            .await
                            .map_err(|e| format!("etcd release {key}: {e}"))?;
                        if !back.succeeded() {
                            return Err(format!(
                                "etcd: {me} held {key} at revision {rev} but could not release it"
                            ));
                        }
                        run.pair.push(ns + t.elapsed().as_nanos() as u64);
                        run.grants += 1;
                    }
                    run.elapsed = t0.elapsed().as_secs_f64();
                    Ok::<_, String>(run)
                })?;
                Ok(run)
            }));
        }
        barrier.wait();
        Ok(Contention::merge(join_all(handles)?))
    }
}

impl Drop for Etcd {
    fn drop(&mut self) {
        // Our own child, by its pid: SIGTERM, then reaped.
        // SAFETY: kill(2) on the pid of a child this process started and has not reaped.
        unsafe {
            libc::kill(self.child.id() as libc::pid_t, libc::SIGTERM);
        }
        let deadline = Instant::now() + Duration::from_secs(10);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                break;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

pub fn scen_fleet_etcd(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    if maos_tests::postgres::test_database_url().is_none() {
        return Err(
            "fleet-etcd measures fleet mode: run it with MAOS_TEST_DATABASE=postgres".into(),
        );
    }
    let per = o.clients.unwrap_or(20);
    let clients = DAEMONS * per;
    let files = o.paths.unwrap_or(1000);
    let secs = o.duration.unwrap_or(5.0);
    let dur = Duration::from_secs_f64(secs);
    let etcd = Etcd::start()?;
    // One client alone, then all of them; maos first each time.
    let maos_alone = fleet_contention(sync, 1, 1, files, dur)?;
    let etcd_alone = etcd.contention(1, files, dur)?;
    let maos_load = fleet_contention(sync, DAEMONS, per, files, dur)?;
    let etcd_load = etcd.contention(clients, files, dur)?;
    let version = etcd.version.clone();
    drop(etcd);
    let name = format!("fleet lock vs {version}, {files} paths, {secs} s each");
    let mut rows = Vec::new();
    let mut table = Vec::new();
    let mut line = |what: String, unit: &'static str, m: f64, e: f64| {
        rows.push(Metric::new(&name, &format!("{what}: maos fleet"), m, unit));
        rows.push(Metric::new(&name, &format!("{what}: etcd"), e, unit));
        rows.push(Metric::new(
            &name,
            &format!("{what}: maos/etcd"),
            m / e,
            "×",
        ));
        table.push((what, unit, m, e));
    };
    let alone = "1 client alone";
    line(
        format!("{alone}, acquire+release p50"),
        "µs",
        pct(&maos_alone.pair, 50.0),
        pct(&etcd_alone.pair, 50.0),
    );
    line(
        format!("{alone}, acquire+release p99"),
        "µs",
        pct(&maos_alone.pair, 99.0),
        pct(&etcd_alone.pair, 99.0),
    );
    line(
        format!("{alone}, grants/s"),
        "",
        maos_alone.per_sec(),
        etcd_alone.per_sec(),
    );
    let load = format!("{clients} clients");
    line(
        format!("{load}, durable grants/s in all"),
        "",
        maos_load.per_sec(),
        etcd_load.per_sec(),
    );
    line(
        format!("{load}, acquire p50"),
        "µs",
        pct(&maos_load.acquire, 50.0),
        pct(&etcd_load.acquire, 50.0),
    );
    line(
        format!("{load}, acquire p99"),
        "µs",
        pct(&maos_load.acquire, 99.0),
        pct(&etcd_load.acquire, 99.0),
    );
    line(
        format!("{load}, acquire+release p50"),
        "µs",
        pct(&maos_load.pair, 50.0),
        pct(&etcd_load.pair, 50.0),
    );
    line(
        format!("{load}, refused (held by another)"),
        "",
        maos_load.refused as f64,
        etcd_load.refused as f64,
    );
    println!(
        "\nfleet-etcd: a write lock on a random one of {files} files, taken without waiting and \
         released at once, {secs} s per run. maos: {DAEMONS} fleet daemons on one PostgreSQL \
         (1 daemon for the client alone), {per} agents each; etcd: {version}, one member on \
         127.0.0.1, {clients} clients (txn compare-and-put with a lease, txn delete at the \
         put's revision). Each client its own connection and thread; both durable before an \
         answer (PostgreSQL's and etcd's WAL fsynced)."
    );
    let w = table.iter().map(|t| t.0.len()).max().unwrap_or(0);
    println!(
        "  {:w$}  {:>12}  {:>12}  {:>9}",
        "", "maos fleet", "etcd", "maos/etcd"
    );
    for (what, unit, m, e) in &table {
        let unit = if unit.is_empty() { "" } else { " µs" };
        let (mc, ec) = (format!("{m:.0}{unit}"), format!("{e:.0}{unit}"));
        println!("  {what:w$}  {mc:>12}  {ec:>12}  {:>8.2}×", m / e);
    }
    Ok(rows)
}
