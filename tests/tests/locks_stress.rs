//! Twenty agents doing random lock work at once through the CLI: at no moment do two agents
//! hold conflicting locks, neither in what `lock list` shows while it runs nor in the timeline
//! replayed afterwards, and every grant a client was told about is on the timeline.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use maos_tests::{Env, Value};

const AGENTS: usize = 20;
const RUN: Duration = Duration::from_secs(3);

/// A few paths that overlap in every way: two files under a directory, a file deeper under it,
/// the directory itself, and a file elsewhere (and, rarely, the whole workspace).
const PATHS: &[(&str, &[&str])] = &[
    ("s/a.rs", &["write", "read"]),
    ("s/b.rs", &["write", "read"]),
    ("s/sub/c.rs", &["write", "read"]),
    ("s", &["directory", "read", "directory"]),
    ("d/x.md", &["read", "write"]),
];

/// A held lock as the checker sees it.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Lock {
    holder: String,
    path: String,
    mode: String,
    token: u64,
}

impl Lock {
    fn from_view(l: &Value) -> Lock {
        Lock {
            holder: l["holder"].as_str().expect("holder").to_string(),
            path: l["path"].as_str().expect("path").to_string(),
            mode: l["mode"].as_str().expect("mode").to_string(),
            token: l["token"].as_u64().expect("token"),
        }
    }

    fn from_event(e: &Value) -> Lock {
        Lock {
            holder: e["agent_id"].as_str().expect("agent_id").to_string(),
            path: e["data"]["path"].as_str().expect("path").to_string(),
            mode: e["data"]["mode"].as_str().expect("mode").to_string(),
            token: e["data"]["token"].as_u64().expect("token"),
        }
    }
}

/// `dir` (a Directory lock's path; "." is the root) contains `path`.
fn contains(dir: &str, path: &str) -> bool {
    dir == "." || path == dir || path.starts_with(&format!("{dir}/"))
}

/// The conflict rule, written down independently of the daemon: scopes overlap (Read/Write
/// exactly their path, Directory its subtree, Workspace everything), at least one is exclusive,
/// and the holders differ.
fn conflict(a: &Lock, b: &Lock) -> bool {
    let overlap = match (a.mode.as_str(), b.mode.as_str()) {
        ("workspace", _) | (_, "workspace") => true,
        ("directory", "directory") => contains(&a.path, &b.path) || contains(&b.path, &a.path),
        ("directory", _) => contains(&a.path, &b.path),
        (_, "directory") => contains(&b.path, &a.path),
        _ => a.path == b.path,
    };
    a.holder != b.holder && (a.mode != "read" || b.mode != "read") && overlap
}

/// Every pair of conflicting locks among `locks`.
fn conflicting_pairs(locks: &[Lock]) -> Vec<(Lock, Lock)> {
    let mut out = Vec::new();
    for (i, a) in locks.iter().enumerate() {
        for b in &locks[i + 1..] {
            if conflict(a, b) {
                out.push((a.clone(), b.clone()));
            }
        }
    }
    out
}

#[test]
fn the_conflict_rule_of_the_checker() {
    let l = |holder: &str, path: &str, mode: &str| Lock {
        holder: holder.into(),
        path: path.into(),
        mode: mode.into(),
        token: 0,
    };
    let yes = [
        (l("a", "s/a.rs", "write"), l("b", "s/a.rs", "read")),
        (l("a", "s", "directory"), l("b", "s/sub/c.rs", "read")),
        (l("a", "s", "directory"), l("b", "s", "read")),
        (l("a", "s/sub", "directory"), l("b", "s", "directory")),
        (l("a", ".", "workspace"), l("b", "d/x.md", "read")),
        (l("a", ".", "directory"), l("b", "x", "write")),
    ];
    let no = [
        (l("a", "s/a.rs", "read"), l("b", "s/a.rs", "read")),
        (l("a", "s/a.rs", "write"), l("a", "s/a.rs", "write")),
        (l("a", "s", "directory"), l("b", "sx/a.rs", "write")),
        (l("a", "s", "read"), l("b", "s/a.rs", "write")),
        (l("a", "s/a.rs", "directory"), l("b", "s", "write")),
        (l("a", ".", "workspace"), l("a", "s", "directory")),
    ];
    for (a, b) in &yes {
        assert!(conflict(a, b) && conflict(b, a), "{a:?} vs {b:?}");
    }
    for (a, b) in &no {
        assert!(!conflict(a, b) && !conflict(b, a), "{a:?} vs {b:?}");
    }
}

/// A tiny deterministic PRNG (xorshift64*), one per agent.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }
}

#[derive(Default)]
struct Tally {
    /// Locks the clients were told they got (`lock acquire` succeeded).
    acked: Vec<Lock>,
    /// Refusals by error code.
    refusals: BTreeMap<String, usize>,
    releases: usize,
    /// Anything that must not happen (unexpected error codes, bad output).
    unexpected: Vec<String>,
}

/// How far a run got, shared by its agents and its snapshots: it goes on past `RUN` until
/// what the test asserts of its contention happened (a loaded machine does less in `RUN`),
/// and in any case ends after `RUN_AT_MOST`.
struct Progress {
    start: Instant,
    grants: AtomicUsize,
    conflicts: AtomicUsize,
    snapshots: AtomicUsize,
    most_held: AtomicUsize,
}

/// The longest a run may go on to reach the floors below.
const RUN_AT_MOST: Duration = Duration::from_secs(15);

impl Progress {
    fn over(&self) -> bool {
        let n = |a: &AtomicUsize| a.load(Ordering::SeqCst);
        let floors = n(&self.grants) >= AGENTS
            && n(&self.conflicts) > 0
            && n(&self.snapshots) >= 5
            && n(&self.most_held) >= 2;
        let ran = self.start.elapsed();
        ran >= RUN_AT_MOST || (ran >= RUN && floors)
    }
}

/// One agent's random work until the run is over.
fn agent_work(env: &Env, agent: &str, seed: u64, run: &Progress) -> Tally {
    let mut rng = Rng(seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1);
    let mut t = Tally::default();
    let mut mine: BTreeSet<String> = BTreeSet::new();
    while !run.over() {
        let mut roll = rng.below(100);
        if mine.is_empty() && roll >= 60 && rng.below(4) != 0 {
            roll = 0; // mostly release what it holds, now and then someone else's
        }
        let (args, releasing): (Vec<String>, bool) = if roll < 60 {
            let (path, mode) = if rng.below(40) == 0 {
                (".", "workspace")
            } else {
                let (p, modes) = PATHS[rng.below(PATHS.len())];
                (p, modes[rng.below(modes.len())])
            };
            let mut a: Vec<String> = ["lock", "acquire", path, "--agent", agent, "--mode", mode]
                .map(String::from)
                .to_vec();
            if rng.below(2) == 0 {
                a.push("--no-wait".into());
            } else {
                a.extend(["--wait".into(), format!("{}ms", 10 + rng.below(70))]);
            }
            (a, false)
        } else if roll < 95 {
            let path = match mine.iter().nth(rng.below(mine.len() + 1)) {
                Some(p) => p.clone(),
                None => PATHS[rng.below(PATHS.len())].0.to_string(),
            };
            let a = ["lock", "release", &path, "--agent", agent].map(String::from);
            (a.to_vec(), true)
        } else {
            let a = ["lock", "release-all", "--agent", agent].map(String::from);
            (a.to_vec(), true)
        };
        let mut all = vec!["--json".to_string()];
        all.extend(args.iter().cloned());
        let out = env.maos(&all);
        let v: Value = match serde_json::from_slice(&out.stdout) {
            Ok(v) => v,
            Err(e) => {
                t.unexpected
                    .push(format!("{all:?}: not JSON ({e}): {out:?}"));
                continue;
            }
        };
        if out.status.success() {
            if releasing {
                t.releases += 1;
                for l in v.as_array().into_iter().flatten() {
                    mine.remove(l["path"].as_str().unwrap_or_default());
                }
                if args[1] == "release-all" {
                    mine.clear();
                }
            } else {
                let lock = Lock::from_view(&v);
                mine.insert(lock.path.clone());
                t.acked.push(lock);
                run.grants.fetch_add(1, Ordering::SeqCst);
            }
            continue;
        }
        let code = v["error"]["code"].as_str().unwrap_or("?").to_string();
        let allowed: &[&str] = if releasing {
            // Nothing held there, or held by someone else only.
            &["not_found", "not_lock_holder"]
        } else {
            &["lock_conflict", "lock_timeout", "deadlock"]
        };
        if out.status.code() != Some(1) || !allowed.contains(&code.as_str()) {
            t.unexpected.push(format!("{all:?}: {out:?}"));
        }
        if releasing && code == "not_found" {
            mine.remove(&args[2]);
        }
        if code == "lock_conflict" {
            run.conflicts.fetch_add(1, Ordering::SeqCst);
        }
        *t.refusals.entry(code).or_default() += 1;
    }
    t
}

#[test]
fn twenty_agents_never_hold_conflicting_locks() {
    let env = Arc::new(Env::new());
    env.session("stress", &[]);
    let agents: Vec<String> = (0..AGENTS)
        .map(|i| env.agent(None, &format!("agent{i:02}"), "random lock work"))
        .collect();

    let start = Instant::now();
    let run = Arc::new(Progress {
        start,
        grants: AtomicUsize::new(0),
        conflicts: AtomicUsize::new(0),
        snapshots: AtomicUsize::new(0),
        most_held: AtomicUsize::new(0),
    });
    let stop = Arc::new(AtomicBool::new(false));
    // Snapshots of `lock list` while the agents work, each checked as it is taken.
    let snapshots = {
        let (env, stop, run) = (env.clone(), stop.clone(), run.clone());
        std::thread::spawn(move || {
            let mut taken = 0usize;
            let mut max_held = 0usize;
            let mut bad = Vec::new();
            while !stop.load(Ordering::SeqCst) {
                let l = env.maos_json(&["lock", "list"]);
                let locks: Vec<Lock> = l["locks"]
                    .as_array()
                    .expect("locks")
                    .iter()
                    .map(Lock::from_view)
                    .collect();
                let tokens: BTreeSet<u64> = locks.iter().map(|l| l.token).collect();
                if tokens.len() != locks.len() {
                    bad.push(format!("a token listed twice: {locks:?}"));
                }
                let pairs = conflicting_pairs(&locks);
                if !pairs.is_empty() {
                    bad.push(format!("conflicting holders at once: {pairs:?}"));
                }
                taken += 1;
                max_held = max_held.max(locks.len());
                run.snapshots.fetch_add(1, Ordering::SeqCst);
                run.most_held.fetch_max(locks.len(), Ordering::SeqCst);
            }
            (taken, max_held, bad)
        })
    };
    let workers: Vec<_> = agents
        .iter()
        .enumerate()
        .map(|(i, a)| {
            let (env, a, run) = (env.clone(), a.clone(), run.clone());
            std::thread::spawn(move || agent_work(&env, &a, i as u64 + 1, &run))
        })
        .collect();
    let tallies: Vec<Tally> = workers
        .into_iter()
        .map(|w| w.join().expect("agent thread panicked"))
        .collect();
    stop.store(true, Ordering::SeqCst);
    let (snaps, max_held, bad_snaps) = snapshots.join().expect("snapshot thread panicked");
    let ran = start.elapsed();

    let unexpected: Vec<_> = tallies.iter().flat_map(|t| &t.unexpected).collect();
    assert!(unexpected.is_empty(), "unexpected answers: {unexpected:#?}");
    assert!(bad_snaps.is_empty(), "lock list showed: {bad_snaps:#?}");

    // The timeline, replayed in sequence order: at no moment two conflicting holders.
    let events = env.lock_timeline();
    let mut held: BTreeMap<u64, Lock> = BTreeMap::new();
    let mut granted: BTreeMap<u64, Lock> = BTreeMap::new();
    let mut last_seq = 0;
    let mut last_token = 0;
    for e in &events {
        let seq = e["seq"].as_u64().unwrap();
        assert!(seq > last_seq, "events out of order at {e}");
        last_seq = seq;
        let lock = Lock::from_event(e);
        match e["type"].as_str().unwrap() {
            "lock_acquired" => {
                assert!(
                    lock.token > last_token,
                    "token {} after {last_token}: {e}",
                    lock.token
                );
                last_token = lock.token;
                if let Some(other) = held.values().find(|h| conflict(h, &lock)) {
                    panic!("seq {seq}: {lock:?} granted while {other:?} is held");
                }
                held.insert(lock.token, lock.clone());
                granted.insert(lock.token, lock);
            }
            "lock_released" | "lock_expired" => {
                let was = held.remove(&lock.token);
                assert_eq!(
                    was.as_ref(),
                    Some(&lock),
                    "seq {seq}: released what was not held"
                );
            }
            other => panic!("unexpected event type {other}"),
        }
    }
    // The replay ends where the daemon is.
    let mut now: Vec<Lock> = env.maos_json(&["lock", "list"])["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(Lock::from_view)
        .collect();
    now.sort_by_key(|l| l.token);
    assert_eq!(
        now,
        held.values().cloned().collect::<Vec<_>>(),
        "replay vs lock list"
    );

    // Everything the daemon acknowledged was written through: after kill -9 the restarted
    // daemon holds exactly the same locks.
    let old = env.kill9();
    let mut restored: Vec<Lock> = env.maos_json(&["lock", "list"])["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(Lock::from_view)
        .collect();
    assert_ne!(env.daemon_pid(), old);
    restored.sort_by_key(|l| l.token);
    assert_eq!(restored, now, "locks after kill -9 and restart");

    // Every grant a client was told about is on the timeline, as it was told.
    let acked: Vec<&Lock> = tallies.iter().flat_map(|t| &t.acked).collect();
    for a in &acked {
        assert_eq!(
            granted.get(&a.token),
            Some(*a),
            "acknowledged grant not on the timeline"
        );
    }

    // And it really was a contended run.
    let mut refusals: BTreeMap<&str, usize> = BTreeMap::new();
    for t in &tallies {
        for (k, n) in &t.refusals {
            *refusals.entry(k).or_default() += n;
        }
    }
    let releases: usize = tallies.iter().map(|t| t.releases).sum();
    eprintln!(
        "{AGENTS} agents for {ran:?}: {} grants acknowledged ({} on the timeline), {releases} \
         releases, refusals {refusals:?}, {snaps} snapshots (up to {max_held} locks held)",
        acked.len(),
        granted.len(),
    );
    assert!(
        ran < RUN_AT_MOST + Duration::from_secs(10),
        "the run took {ran:?}"
    );
    assert!(
        acked.len() >= AGENTS,
        "too little work: {} grants",
        acked.len()
    );
    assert!(
        refusals.get("lock_conflict").is_some_and(|n| *n > 0),
        "{refusals:?}"
    );
    assert!(snaps >= 5, "only {snaps} snapshots");
    assert!(max_held >= 2, "never more than {max_held} locks at once");
}
