//! No acknowledged change is lost when the daemon is killed with `kill -9` in the middle of
//! traffic, and the database is sound afterwards.

use std::collections::{BTreeMap, BTreeSet};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use maos_tests::{DEADLINE, Env, Value, alive, argv, json, kill9, wait_until};

/// A started session with `objective` and a started agent in it that takes locks: their ids.
fn started_holder(env: &Env, objective: &str) -> (String, String) {
    let sid = env.session(objective, &[]);
    env.maos_json(&["session", "start", &sid]);
    let holder = env.agent(Some(&sid), "holder", "takes locks");
    env.maos_json(&["agent", "start", &holder]);
    (sid, holder)
}

/// The default project's WAL file.
fn wal_path(env: &Env) -> std::path::PathBuf {
    let mut p = env.db_path().into_os_string();
    p.push("-wal");
    std::path::PathBuf::from(p)
}

/// What the clients were told had happened, per agent id.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Acked {
    #[default]
    Registered,
    Started,
    Completed,
}

/// Check every acknowledged change against the restarted daemon's state and timeline.
fn assert_all_present(env: &Env, session: &str, acked: &BTreeMap<String, Acked>) {
    let agents = env.maos_json(&["agent", "list", "--session", session]);
    let state: BTreeMap<String, String> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["id"].as_str().unwrap().to_string(),
                a["state"].as_str().unwrap().to_string(),
            )
        })
        .collect();
    let events = env.events(&[session]);
    let mut kinds: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for e in &events {
        if let Some(a) = e["agent_id"].as_str() {
            kinds
                .entry(a.to_string())
                .or_default()
                .insert(e["type"].as_str().unwrap().to_string());
        }
    }
    for (id, what) in acked {
        let st = state
            .get(id)
            .unwrap_or_else(|| panic!("acknowledged agent {id} was lost"));
        // A change may have committed without its acknowledgement reaching the client (killed
        // in between), so the state may be ahead of what was acked, never behind.
        let ok: &[&str] = match what {
            Acked::Registered => &["pending", "running", "completed"],
            Acked::Started => &["running", "completed"],
            Acked::Completed => &["completed"],
        };
        assert!(
            ok.contains(&st.as_str()),
            "agent {id}: acked {what:?}, state {st}"
        );
        // State and timeline agree.
        let k = &kinds[id];
        assert!(k.contains("agent_registered"), "{id}: {k:?}");
        if *what >= Acked::Started || st != "pending" {
            assert!(k.contains("agent_started"), "{id}: {k:?}");
        }
        if *what == Acked::Completed || st == "completed" {
            assert!(k.contains("agent_completed"), "{id}: {k:?}");
        }
    }
    // Sequence numbers stay dense and increasing across the crash.
    let seqs: Vec<u64> = env
        .events(&[])
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert!(
        seqs.windows(2).all(|w| w[1] == w[0] + 1),
        "event sequence has gaps or repeats: {seqs:?}"
    );
}

#[test]
fn acknowledged_cli_changes_survive_kill_9_mid_traffic() {
    const CLIENTS: usize = 8;
    const KILL_AFTER: usize = 48;
    let env = Arc::new(Env::new());
    let session = env.session("durability", &[]);
    env.maos_json(&["session", "start"]);
    let old = env.daemon_pid();

    let acked: Arc<Mutex<BTreeMap<String, Acked>>> = Arc::default();
    let acks = Arc::new(AtomicUsize::new(0));
    let stop = Arc::new(AtomicBool::new(false));
    let workers: Vec<_> = (0..CLIENTS)
        .map(|w| {
            let (env, acked, acks, stop) = (env.clone(), acked.clone(), acks.clone(), stop.clone());
            let session = session.clone();
            std::thread::spawn(move || {
                let mut i = 0;
                while !stop.load(Ordering::SeqCst) {
                    i += 1;
                    let task = format!("w{w}-{i}");
                    let out = env.maos(&argv(&format!(
                        "--json agent register --session {session} --role worker --task {task}"
                    )));
                    if !out.status.success() {
                        break; // the daemon died under us: not acknowledged
                    }
                    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
                    let id = v["id"].as_str().unwrap().to_string();
                    acked.lock().unwrap().insert(id.clone(), Acked::Registered);
                    acks.fetch_add(1, Ordering::SeqCst);
                    for (op, now) in [("start", Acked::Started), ("complete", Acked::Completed)] {
                        if i % 2 == 0 && op == "complete" {
                            break; // leave half of them running
                        }
                        if !env.maos(&["--json", "agent", op, &id]).status.success() {
                            return;
                        }
                        acked.lock().unwrap().insert(id.clone(), now);
                        acks.fetch_add(1, Ordering::SeqCst);
                    }
                }
            })
        })
        .collect();

    wait_until(DEADLINE * 3, "enough changes are acknowledged", || {
        acks.load(Ordering::SeqCst) >= KILL_AFTER
    });
    // Kill while the clients are still sending; they stop at their next failure or loop.
    let killed = env.kill9();
    stop.store(true, Ordering::SeqCst);
    for w in workers {
        w.join().expect("worker panicked");
    }
    assert_eq!(killed, old);
    assert!(!alive(old));

    // The next command starts a fresh daemon, which reloads everything from disk.
    let sessions = env.maos_json(&["ps"]);
    assert_eq!(sessions[0]["id"], session.as_str());
    assert_eq!(sessions[0]["state"], "running");
    let new = env.daemon_pid();
    assert_ne!(new, old);
    let acked = acked.lock().unwrap().clone();
    assert!(
        acked.len() >= KILL_AFTER / 3,
        "too few changes: {}",
        acked.len()
    );
    assert_all_present(&env, &session, &acked);
    assert_eq!(env.integrity_check(), "ok");
}

#[test]
fn acknowledged_protocol_changes_survive_kill_9_mid_traffic() {
    const CONNECTIONS: usize = 4;
    const KILL_AFTER: usize = 400;
    let env = Arc::new(Env::new());
    let session = env.session("raw durability", &[]);
    let root = Env::project_root(&env.project);

    let acked: Arc<Mutex<BTreeMap<String, Acked>>> = Arc::default();
    let acks = Arc::new(AtomicUsize::new(0));
    let workers: Vec<_> = (0..CONNECTIONS)
        .map(|w| {
            let (env, acked, acks) = (env.clone(), acked.clone(), acks.clone());
            let (session, root) = (session.clone(), root.clone());
            std::thread::spawn(move || {
                let mut conn = env.raw();
                conn.hello();
                for i in 0.. {
                    let body = json!({"request": "agent_register", "session": session,
                                      "role": format!("r{w}"), "task": format!("t{i}")});
                    // Ends when the daemon dies: the write or the read fails.
                    let Ok(result) = conn.try_request(Some(&root), body) else {
                        return;
                    };
                    let id = result["Ok"]["data"]["id"]
                        .as_str()
                        .unwrap_or_else(|| panic!("register refused: {result}"))
                        .to_string();
                    acked.lock().unwrap().insert(id, Acked::Registered);
                    acks.fetch_add(1, Ordering::SeqCst);
                }
            })
        })
        .collect();
    wait_until(DEADLINE * 3, "enough changes are acknowledged", || {
        acks.load(Ordering::SeqCst) >= KILL_AFTER
    });
    let old = env.kill9();
    for w in workers {
        w.join().expect("worker panicked");
    }
    let acked = acked.lock().unwrap().clone();
    assert!(acked.len() >= KILL_AFTER);

    let agents = env.maos_json(&["agent", "list", "--session", &session]);
    assert_ne!(env.daemon_pid(), old);
    let present: BTreeSet<&str> = agents
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a["id"].as_str().unwrap())
        .collect();
    let lost: Vec<_> = acked
        .keys()
        .filter(|id| !present.contains(id.as_str()))
        .collect();
    assert!(
        lost.is_empty(),
        "{} acknowledged agents lost: {lost:?}",
        lost.len()
    );
    assert_all_present(&env, &session, &acked);
    assert_eq!(env.integrity_check(), "ok");
}

/// An idle project's WAL is cut to the one frame the checkpointer's own restart wrote (every
/// commit's frames are in the database by then, and the next commit appends to a log whose
/// header is synced), so a crash after a quiet spell replays one page at most; the data is
/// all there after `kill -9`.
#[test]
fn an_idle_projects_wal_is_emptied_and_nothing_is_lost() {
    let env = Env::new();
    let sid = env.session("quiet after this", &["one", "two"]);
    for i in 0..20 {
        env.agent(Some(&sid), "dev", &format!("task {i}"));
    }
    let wal = wal_path(&env);
    // A WAL file: a 32-byte header, then frames of a 24-byte header and a page (4 KiB).
    const ONE_FRAME: u64 = 32 + 24 + 4096;
    wait_until(
        DEADLINE,
        "the idle project's WAL is cut to one frame",
        || std::fs::metadata(&wal).is_ok_and(|m| m.len() <= ONE_FRAME),
    );
    env.kill9();
    let agents = env.maos_json(&["agent", "list", "--session", &sid]);
    assert_eq!(agents.as_array().map(Vec::len), Some(20), "{agents}");
    assert_eq!(env.integrity_check(), "ok");
}

/// A reply means "committed": the daemon is killed the moment a client reads its success
/// answer, and after the restart the acknowledged write is there. Each kind of write in turn
/// (session create, agent register, lock acquire, a hook's write), 30 kills in all; a reply
/// sent before its commit is lost in one of them.
#[test]
fn a_write_acknowledged_the_moment_before_kill_9_is_there_after_the_restart() {
    const KILLS: usize = 30;
    let env = Env::new();
    let (sid, holder) = started_holder(&env, "acked then killed");
    let root = Env::project_root(&env.project);
    for i in 0..KILLS {
        let kind = ["session", "agent", "lock", "hook"][i % 4];
        let body = match kind {
            "session" => json!({"request": "session_create", "objective": format!("s{i}")}),
            "agent" => json!({"request": "agent_register", "session": sid,
                              "role": "acked", "task": format!("t{i}")}),
            "lock" => json!({"request": "lock_acquire", "agent": holder,
                             "path": format!("lock{i}.rs"), "mode": "write",
                             "wait": {"policy": "no_wait"}}),
            _ => json!({"request": "hook", "event": "PreToolUse", "session_id": "claude-K",
                        "tool_name": "Write", "tool_use_id": format!("toolu_{i}"),
                        "paths": [env.project.join(format!("hook{i}.rs"))],
                        "cwd": env.project, "maos_session": sid, "maos_agent": holder}),
        };
        // A daemon from the client's start (the first, or the one after the last kill).
        let pid = env.daemon_pid();
        let mut raw = env.raw();
        assert_eq!(raw.hello(), pid);
        let result = raw.request(Some(&root), body);
        kill9(pid);
        let ok = &result["Ok"]["data"];
        assert!(ok.is_object(), "{kind} #{i} was refused: {result}");
        wait_until(DEADLINE, "the killed daemon is gone", || !alive(pid));
        match kind {
            "session" => {
                let id = ok["id"].as_str().expect("session id");
                let s = env.maos_json(&["session", "show", id]);
                assert_eq!(s["objective"], format!("s{i}"), "kill #{i}: {s}");
            }
            "agent" => {
                let id = ok["id"].as_str().expect("agent id");
                let agents = env.maos_json(&["agent", "list", "--session", &sid]);
                assert!(
                    maos_tests::ids(&agents).iter().any(|a| a == id),
                    "kill #{i}: acknowledged agent {id} was lost: {agents}"
                );
            }
            _ => {
                if kind == "hook" {
                    assert_eq!(ok["decision"], "allow", "{result}");
                }
                let path = format!("{kind}{i}.rs");
                let locks = env.maos_json(&["lock", "list"]);
                let held = locks["locks"]
                    .as_array()
                    .expect("locks")
                    .iter()
                    .any(|l| l["path"] == path.as_str() && l["holder"] == holder.as_str());
                assert!(
                    held,
                    "kill #{i}: the acknowledged lock on {path} was lost: {locks}"
                );
            }
        }
    }
    assert_eq!(env.integrity_check(), "ok");
}

/// The WAL header's salts (bytes 16..24): a log restart changes them, and a frame belongs to
/// the current log when its own salts (bytes 8..16 of its 24-byte header) are these.
fn wal_salts(wal: &std::path::Path) -> Vec<u8> {
    std::fs::read(wal).map_or_else(|_| Vec::new(), |b| b.get(16..24).unwrap_or(&[]).to_vec())
}

/// Frames of the current log (those after its start whose salts are the header's): what the
/// commits since the last restart wrote, or fewer if the log restarted meanwhile.
fn wal_log_frames(wal: &std::path::Path) -> u64 {
    const FRAME: usize = 24 + 4096;
    let bytes = std::fs::read(wal).unwrap_or_default();
    let Some(salts) = bytes.get(16..24) else {
        return 0;
    };
    (bytes.get(32..).unwrap_or(&[]).chunks_exact(FRAME))
        .take_while(|f| &f[8..16] == salts)
        .count() as u64
}

/// The write connection no longer checkpoints by itself (SQLite's autocheckpoint ran inside
/// a commit on the daemon's runtime thread): the background checkpointer keeps the WAL short.
/// Commits that write more than the old threshold (`WAL_MAX_FRAMES`) in all, in rounds; after
/// each, while nothing commits, the checkpointer copies the WAL back and starts it again (so
/// nothing else could have), and the WAL never grows near the bound. Then a burst of commits
/// with no pause that writes twice the bound: the WAL stays near the bound however far the
/// checkpointer falls behind (past it, the writer's own checkpoint takes over, on the blocking
/// pool). After `kill -9` nothing acknowledged is lost.
#[test]
fn the_background_checkpointer_keeps_the_wal_short_past_the_old_threshold() {
    // Even: a round ends with a release.
    const ROUND: u64 = 250;
    let env = Env::new();
    let (_, holder) = started_holder(&env, "many small commits");
    let root = Env::project_root(&env.project);
    let wal = wal_path(&env);
    let wal_file_frames = || std::fs::metadata(&wal).map_or(0, |m| m.len()) / (24 + 4096);
    let bound = u64::from(maos_store::WAL_MAX_FRAMES);
    let mut raw = env.raw();
    raw.hello();
    // Commit `i`: a grant of `wal.rs` when even, its release when odd (one batch each).
    let mut grants = 0;
    let mut commit = |i: u64| {
        let body = if i.is_multiple_of(2) {
            grants += 1;
            json!({"request": "lock_acquire", "agent": holder, "path": "wal.rs",
                   "mode": "write", "wait": {"policy": "no_wait"}})
        } else {
            json!({"request": "lock_release", "agent": holder, "path": "wal.rs"})
        };
        let result = raw.request(Some(&root), body);
        assert!(result["Ok"].is_object(), "commit #{i}: {result}");
    };
    let (mut written, mut rounds) = (0u64, 0u64);
    while written <= bound {
        assert!(rounds < 40, "{written} frames after {rounds} rounds");
        for i in 0..ROUND {
            commit(i);
        }
        // Counted before the restart: a restart during the round only counts fewer.
        written += wal_log_frames(&wal);
        let salts = wal_salts(&wal);
        wait_until(
            DEADLINE,
            "the background checkpointer starts the quiet project's WAL again",
            || wal_salts(&wal) != salts,
        );
        rounds += 1;
    }
    let quiet = wal_file_frames();
    assert!(
        quiet < bound,
        "the WAL grew to {quiet} frames ({written} written in {rounds} rounds)"
    );
    // At least as many frames a commit as the rounds counted: twice the bound, with no pause.
    // (Even: the last commit is a release.)
    let burst = (2 * bound * rounds * ROUND)
        .div_ceil(written.max(1))
        .next_multiple_of(2);
    for i in 0..burst {
        commit(i);
    }
    let busy = wal_file_frames();
    eprintln!(
        "{} commits in {rounds} rounds wrote at least {written} WAL frames, the WAL file then \
         {quiet} frames; {burst} commits in a burst (about {} frames), the WAL file then {busy} \
         frames (bound {bound})",
        rounds * ROUND,
        2 * bound
    );
    // A reader's snapshot can hold back a checkpoint and so the restart for a few commits.
    assert!(
        busy < bound + bound / 4,
        "the WAL grew to {busy} frames in a burst of {burst} commits"
    );
    // A grant last, then kill the daemon.
    commit(0);
    env.kill9();
    let locks = env.maos_json(&["lock", "list"]);
    let held: Vec<_> = locks["locks"].as_array().expect("locks").iter().collect();
    assert!(
        held.len() == 1 && held[0]["path"] == "wal.rs" && held[0]["holder"] == holder.as_str(),
        "{locks}"
    );
    let acquired = env
        .events(&["--type", "lock_acquired"])
        .iter()
        .filter(|e| e["agent_id"] == holder.as_str())
        .count();
    assert_eq!(acquired, grants, "every acknowledged grant has its event");
    assert_eq!(env.integrity_check(), "ok");
}
