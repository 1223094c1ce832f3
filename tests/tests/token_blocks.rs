//! Fencing tokens across `kill -9` now that the token counter is stored in blocks: maos-store
//! writes its bound (`meta`'s `next_lock_token`) once per 1,000 grants, ahead of them, and a
//! restarted daemon continues at the bound. One agent acquires thousands of locks, one after
//! another, over the socket; the daemon is killed between two grants at chosen moments (long
//! after a restart, so that the bound moved inside one run; right after the first grant of a
//! run, the one that stores a new bound; with nothing granted since the restart; on each side
//! of a block's end), each time with every lock given back (a held lock's row would keep the
//! next token above it anyway), and once with a grant in flight. Every token a client was told must be
//! above every token told before it, before and after each restart, and the timeline's
//! `lock_acquired` events must hold each of them, increasing with the sequence.

use std::time::{Duration, Instant};

use maos_proto::{ErrorBody, Reply};
use maos_tests::{DEADLINE, Env, Raw, alive, json, kill9, wait_until};

/// Grants between two kills, in order: one run crosses a block boundary (1,001 grants after the
/// restart's first), the next is killed right after its first grant (which stores a new
/// bound), then one with no grant at all, then runs ending on each side of a boundary.
const RUNS: [usize; 6] = [1100, 1, 0, 1001, 1002, 30];
/// Locks the agent holds at most (then it releases them all).
const HELD: usize = 100;
/// The whole test's bound (it takes a few seconds).
const BUDGET: Duration = Duration::from_secs(90);

struct Agent {
    env: Env,
    root: String,
    agent: String,
    conn: Raw,
    pid: u32,
    /// Every token the daemon told this client, in the order told.
    told: Vec<u64>,
    held: usize,
    next_path: usize,
}

impl Agent {
    fn connect(&mut self) {
        self.conn = self.env.raw();
        assert_eq!(self.conn.hello(), self.pid, "reached another daemon");
    }

    /// One grant of a path no grant named before; `Err` when the connection broke (a kill).
    fn grant(&mut self) -> Result<u64, String> {
        if self.held == HELD {
            let body = json!({"request": "lock_release_all", "agent": self.agent});
            answer(&mut self.conn, &self.root, body)?;
            self.held = 0;
        }
        self.next_path += 1;
        let path = format!("src/t{:05}.rs", self.next_path);
        let body = json!({
            "request": "lock_acquire", "agent": self.agent, "path": path, "mode": "write",
            "wait": {"policy": "no_wait"}, "ttl_ms": 3_600_000u64
        });
        let Reply::Lock(l) = answer(&mut self.conn, &self.root, body)? else {
            panic!("lock_acquire of {path} did not answer with a lock");
        };
        assert_eq!(l.path, path);
        let before = self.told.last().copied().unwrap_or(0);
        assert!(
            l.token > before,
            "grant {} got token {}, not above {before}, told before it (tokens told so \
             far: {} of them)",
            self.told.len() + 1,
            l.token,
            self.told.len()
        );
        self.told.push(l.token);
        self.held += 1;
        Ok(l.token)
    }

    /// Give every lock back (so that no lock row keeps the next token above it after a
    /// restart: only the stored bound does), kill the daemon and start it again as a client
    /// does.
    fn kill_and_restart(&mut self) {
        let body = json!({"request": "lock_release_all", "agent": self.agent});
        answer(&mut self.conn, &self.root, body).expect("release before the kill");
        self.held = 0;
        kill9(self.pid);
        wait_until(DEADLINE, "the killed daemon is gone", || !alive(self.pid));
        self.env.maos_json(&["daemon", "start"]);
        let old = self.pid;
        self.pid = self.env.daemon_pid();
        assert_ne!(self.pid, old, "the killed daemon still answers");
        self.connect();
    }
}

/// The daemon's answer to `body`: `Err` when the connection broke, a panic when refused.
fn answer(conn: &mut Raw, root: &str, body: serde_json::Value) -> Result<Reply, String> {
    let v = conn
        .try_request(Some(root), body.clone())
        .map_err(|e| e.to_string())?;
    let r: Result<Reply, ErrorBody> =
        serde_json::from_value(v.clone()).unwrap_or_else(|e| panic!("undecodable {v}: {e}"));
    Ok(r.unwrap_or_else(|e| panic!("{body} refused: {e:?}")))
}

#[test]
fn tokens_keep_rising_across_kill_9_on_both_sides_of_a_block_boundary() {
    let started = Instant::now();
    let env = Env::new();
    env.maos_json(&["daemon", "start"]);
    env.session("tokens", &[]);
    let agent = env.agent(None, "writer", "write");
    let root = Env::project_root(&env.project);
    let pid = env.daemon_pid();
    let mut conn = env.raw();
    assert_eq!(conn.hello(), pid);
    let mut a = Agent {
        env,
        root,
        agent,
        conn,
        pid,
        told: Vec::new(),
        held: 0,
        next_path: 0,
    };
    let mut kills = 0;
    for grants in RUNS {
        for _ in 0..grants {
            a.grant()
                .unwrap_or_else(|e| panic!("no answer from a live daemon: {e}"));
        }
        a.kill_and_restart();
        kills += 1;
        assert!(started.elapsed() < BUDGET, "over {BUDGET:?}");
    }
    // A kill with a grant in flight: grants back to back on this thread, the kill from
    // another a moment after the first of them was told (the moment is not a
    // synchronization: any moment is a valid test).
    let told_before = a.told.len();
    let pid = a.pid;
    let (first, told) = std::sync::mpsc::channel::<()>();
    let killer = std::thread::spawn(move || {
        let _ = told.recv_timeout(DEADLINE);
        std::thread::sleep(Duration::from_millis(u64::from(std::process::id() % 20)));
        kill9(pid);
    });
    let mut broke = None;
    for _ in 0..100_000 {
        if let Err(e) = a.grant() {
            broke = Some(e);
            break;
        }
        let _ = first.send(());
    }
    killer.join().expect("the killer thread");
    assert!(broke.is_some(), "the daemon was never killed");
    assert!(
        a.told.len() > told_before,
        "no grant was told before the kill"
    );
    wait_until(DEADLINE, "the killed daemon is gone", || !alive(pid));
    a.env.maos_json(&["daemon", "start"]);
    a.pid = a.env.daemon_pid();
    a.connect();
    kills += 1;
    // After the last restart: the next grant is above everything told, in flight or not.
    let last = a.grant().expect("a grant after the last restart");
    assert!(started.elapsed() < BUDGET, "over {BUDGET:?}");

    // The timeline holds every grant told, increasing with the sequence numbers (a grant in
    // flight at the kill may be there too, committed but never told).
    let events = a.env.events(&["--type", "lock_acquired"]);
    let on_timeline: Vec<u64> = events
        .iter()
        .map(|e| e["data"]["token"].as_u64().expect("a token"))
        .collect();
    assert!(
        on_timeline.windows(2).all(|w| w[1] > w[0]),
        "tokens on the timeline do not increase"
    );
    let missing: Vec<_> = a
        .told
        .iter()
        .filter(|t| on_timeline.binary_search(t).is_err())
        .collect();
    assert!(missing.is_empty(), "told but not recorded: {missing:?}");
    assert!(on_timeline.len() <= a.told.len() + 1);
    assert_eq!(a.env.integrity_check(), "ok");
    eprintln!(
        "token_blocks: {} grants told over {kills} kills (last token {last}), {:.1} s",
        a.told.len(),
        started.elapsed().as_secs_f64()
    );
    // Tokens skip only at a restart, and then by at most a block (1,000, plus the grant in
    // flight at the last kill, which may have moved the bound without being told).
    let gaps: Vec<_> = a.told.windows(2).filter(|w| w[1] - w[0] > 1).collect();
    assert!(
        gaps.len() <= kills,
        "{} gaps in the tokens for {kills} kills",
        gaps.len()
    );
    assert!(
        gaps.iter().all(|w| w[1] - w[0] <= 1002),
        "a gap longer than a block: {gaps:?}"
    );
}
