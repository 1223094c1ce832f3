//! A full disk: when the daemon's database has no room left, a write fails with `storage_full`
//! and a clear one-line message, changes nothing (neither on disk nor in the daemon's memory),
//! reads keep working and show exactly the acknowledged state, the file stays sound, and writes
//! work again once space is freed.
//!
//! Two ways to run out of space:
//! - a real small filesystem: a tmpfs mounted on `MAOS_HOME`, filled by a file the test owns,
//!   and freed by deleting that file while the daemon runs (needs root and a container that
//!   lets us mount; otherwise the test says it is skipped, and on CI it fails);
//! - the fallback that runs everywhere: SQLite's `max_page_count` (`config.toml`), where
//!   "freeing space" means restarting the daemon with a larger cap.

use std::collections::BTreeSet;
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use maos_tests::{Env, Failure, Value, alive, describe, failure_of, json_of, kill9, ts_micros};

/// Most writes the fill phase may take before the test decides the disk never fills.
const MAX_FILL_WRITES: usize = 2_000;
/// Most writes of one kind tried once the disk is full before one is refused.
const MAX_WRITES_WHILE_FULL: usize = 300;

/// What every read of the project shows. Two of these are equal only if nothing changed.
#[derive(Debug, PartialEq)]
struct Reads {
    /// `maos session show S`
    show: Value,
    /// `maos ps --all`
    ps: Value,
    /// `maos lock list`
    locks: Value,
    /// `maos events` (the whole project's timeline, read from the database)
    events: Vec<Value>,
    /// The daemon's in-memory sequence number of the last event (`maos daemon status`).
    last_seq: u64,
}

/// The acknowledged state: what the clients were told has happened.
#[derive(Debug, Clone, Default)]
struct Model {
    session: String,
    /// The agent that pauses, resumes and takes locks.
    worker: String,
    sessions: BTreeSet<String>,
    agents: BTreeSet<String>,
    /// Texts of the decision notes of `session`, in order.
    notes: Vec<String>,
    /// Paths the worker holds.
    locks: BTreeSet<String>,
    paused: bool,
    /// Acknowledged writes by event type, to check the timeline.
    acquired: usize,
    released: usize,
    pauses: usize,
    resumes: usize,
}

/// One write through the CLI.
#[derive(Debug, Clone)]
enum Write {
    Note(String),
    Register(String),
    Create(String),
    Lock(String),
    Release(String),
    Pause,
    Resume,
}

impl Write {
    fn kind(&self) -> &'static str {
        match self {
            Write::Note(_) => "note",
            Write::Register(_) => "agent register",
            Write::Create(_) => "session create",
            Write::Lock(_) => "lock acquire",
            Write::Release(_) => "lock release",
            Write::Pause => "pause",
            Write::Resume => "resume",
        }
    }

    fn args(&self, m: &Model) -> Vec<String> {
        let s = m.session.clone();
        let w = m.worker.clone();
        let v: Vec<&str> = match self {
            Write::Note(text) => vec!["note", "decision", text, "--session", &s],
            Write::Register(task) => vec![
                "agent",
                "register",
                "--session",
                &s,
                "--role",
                "filler",
                "--task",
                task,
            ],
            Write::Create(objective) => vec!["session", "create", "--objective", objective],
            Write::Lock(path) => vec!["lock", "acquire", path, "--agent", &w, "--no-wait"],
            Write::Release(path) => vec!["lock", "release", path, "--agent", &w],
            Write::Pause => vec!["pause", &s, "--agent", &w, "--reason", "disk test"],
            Write::Resume => vec!["resume", &s, "--agent", &w],
        };
        v.into_iter().map(str::to_string).collect()
    }

    /// Record an acknowledged write (`out` is what the command printed).
    fn apply(&self, m: &mut Model, out: &Value) {
        let id = || {
            out["id"]
                .as_str()
                .unwrap_or_else(|| panic!("no id in {out}"))
                .to_string()
        };
        match self {
            Write::Note(text) => m.notes.push(text.clone()),
            Write::Register(_) => assert!(m.agents.insert(id())),
            Write::Create(_) => assert!(m.sessions.insert(id())),
            Write::Lock(path) => {
                assert_eq!(out["path"], path.as_str(), "{out}");
                assert!(m.locks.insert(path.clone()));
                m.acquired += 1;
            }
            Write::Release(path) => {
                assert!(m.locks.remove(path));
                m.released += 1;
            }
            Write::Pause => {
                m.paused = true;
                m.pauses += 1;
            }
            Write::Resume => {
                m.paused = false;
                m.resumes += 1;
            }
        }
    }
}

/// Run one write: `Ok` with its output if acknowledged, the failure if refused. Any refusal
/// other than `storage_full` fails the test.
fn attempt(env: &Env, m: &Model, w: &Write) -> Result<Value, Failure> {
    let mut args = vec!["--json".to_string()];
    args.extend(w.args(m));
    let what = format!(
        "maos {} ({} bytes of arguments)",
        w.kind(),
        args.iter().map(String::len).sum::<usize>()
    );
    let out = env.maos(&args);
    if out.status.success() {
        return Ok(json_of(&what, &out));
    }
    let f = failure_of(&what, &out);
    assert_eq!(
        f.code, "storage_full",
        "{what} failed, but not for lack of space: {f:?}"
    );
    Err(f)
}

/// The refusal is the documented one: exit 1, `storage_full`, one line that says what happened
/// and what to do.
fn assert_clear_refusal(f: &Failure) {
    assert_eq!(f.exit, 1, "{f:?}");
    assert_eq!(f.code, "storage_full", "{f:?}");
    assert!(!f.message.contains('\n'), "not one line: {f:?}");
    let msg = f.message.to_lowercase();
    assert!(
        msg.contains("full") && msg.contains("free"),
        "the message should say the disk is full and to free space: {f:?}"
    );
}

/// Without `--json` the refusal is one line on stderr, prefixed `maos:`.
fn assert_clear_refusal_plain(env: &Env, m: &Model, w: &Write) {
    let out = env.maos(&w.args(m));
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    let lines: Vec<&str> = err.lines().filter(|l| !l.trim().is_empty()).collect();
    assert_eq!(lines.len(), 1, "stderr should be one line: {err:?}");
    assert!(
        lines[0].starts_with("maos: ") && lines[0].contains("full"),
        "unclear message: {err:?}"
    );
}

fn reads(env: &Env, m: &Model) -> Reads {
    // First a command that starts the daemon if none runs (`daemon status` does not).
    let show = env.maos_json(&["session", "show", &m.session]);
    let root = Env::project_root(&env.project);
    let status = env.maos_json(&["daemon", "status"]);
    let last_seq = status["projects"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["root"] == root.as_str()))
        .and_then(|p| p["last_seq"].as_u64())
        .unwrap_or_else(|| panic!("project {root} is not open: {status}"));
    Reads {
        show,
        ps: env.maos_json(&["ps", "--all"]),
        locks: env.maos_json(&["lock", "list"]),
        events: env.events(&[]),
        last_seq,
    }
}

fn strings(v: &Value, field: &str) -> Vec<String> {
    v.as_array()
        .unwrap_or_else(|| panic!("not an array: {v}"))
        .iter()
        .map(|x| {
            x[field]
                .as_str()
                .unwrap_or_else(|| panic!("no {field} in {x}"))
                .to_string()
        })
        .collect()
}

/// Every read agrees with the acknowledged state, and the timeline has exactly one event per
/// acknowledged change, with no gap in its sequence numbers.
fn assert_model(r: &Reads, m: &Model) {
    let sessions: BTreeSet<String> = strings(&r.ps, "id").into_iter().collect();
    assert_eq!(sessions, m.sessions, "sessions");
    let notes: Vec<String> = strings(&r.show["notes"], "text");
    assert_eq!(notes.len(), m.notes.len(), "notes");
    assert!(
        notes == m.notes,
        "the notes differ from the acknowledged ones"
    );
    let agents: BTreeSet<String> = strings(&r.show["agents"], "id").into_iter().collect();
    assert_eq!(agents, m.agents, "agents");
    let worker = r.show["agents"]
        .as_array()
        .unwrap()
        .iter()
        .find(|a| a["id"] == m.worker.as_str())
        .expect("the worker");
    assert_eq!(worker["paused"], m.paused, "worker paused: {worker}");
    let held = &r.locks["locks"];
    assert!(
        held.as_array()
            .unwrap()
            .iter()
            .all(|l| l["holder"] == m.worker.as_str()),
        "{held}"
    );
    let paths: BTreeSet<String> = strings(held, "path").into_iter().collect();
    assert_eq!(paths, m.locks, "held locks");

    let seqs: Vec<u64> = r
        .events
        .iter()
        .map(|e| e["seq"].as_u64().expect("seq"))
        .collect();
    assert!(
        seqs.iter().copied().eq(1..=r.last_seq),
        "the timeline ({} events, last {:?}) should be 1..={} without gaps",
        seqs.len(),
        seqs.last(),
        r.last_seq
    );
    let count = |t: &str| r.events.iter().filter(|e| e["type"] == t).count();
    assert_eq!(
        count("session_created"),
        m.sessions.len(),
        "session_created"
    );
    assert_eq!(
        count("agent_registered"),
        m.agents.len(),
        "agent_registered"
    );
    assert_eq!(count("note_recorded"), m.notes.len(), "note_recorded");
    assert_eq!(count("lock_acquired"), m.acquired, "lock_acquired");
    assert_eq!(count("lock_released"), m.released, "lock_released");
    assert_eq!(count("agent_paused"), m.pauses, "agent_paused");
    assert_eq!(count("agent_resumed"), m.resumes, "agent_resumed");
}

/// Nothing changed since `before`: every read is identical, field for field.
fn assert_unchanged(before: &Reads, now: &Reads, after: &str) {
    assert_unchanged_but_leases(before, now, after, 0);
}

/// [`assert_unchanged`], where a lease may come back up to `slack` µs earlier (a restart: a
/// renewal is written only once it moved the lease by half its length).
fn assert_unchanged_but_leases(before: &Reads, now: &Reads, after: &str, slack: i64) {
    let pretty = |v: &dyn std::fmt::Debug| format!("{v:#?}");
    let (locks_before, leases_before) = without_leases(&before.locks);
    let (locks_now, leases_now) = without_leases(&now.locks);
    let same = [
        ("session show", pretty(&before.show), pretty(&now.show)),
        ("ps", pretty(&before.ps), pretty(&now.ps)),
        ("lock list", pretty(&locks_before), pretty(&locks_now)),
        ("events", pretty(&before.events), pretty(&now.events)),
        ("last_seq", pretty(&before.last_seq), pretty(&now.last_seq)),
    ];
    for (what, before, now) in same {
        assert!(
            before == now,
            "`maos {what}` changed after {after}:\nbefore: {before}\nnow: {now}"
        );
    }
    // Lease expiries. A renewal (any request naming the agent: here pause and resume) is
    // written to the database only once it moved the lease by half its length, and a failed
    // commit that touched locks rebuilds the lock table from the database, keeping the renewals
    // made in memory (DESIGN.md, "A failed commit touching locks reloads the lock table"). So a
    // refused write never takes a lease back (the refused request may itself have renewed it);
    // a restart may, by up to half a lease.
    for ((token, was), (token_now, is)) in leases_before.iter().zip(&leases_now) {
        assert_eq!(token, token_now);
        assert!(
            *is >= was - slack,
            "the lease of lock {token} moved back from {was} to {is} after {after}"
        );
    }
}

/// Half the default lease (10 minutes), in microseconds.
const HALF_LEASE_US: i64 = 300 * 1_000_000;

/// A `lock list` without the lease expiries, and those expiries by fencing token.
fn without_leases(list: &Value) -> (Value, Vec<(u64, i64)>) {
    let mut list = list.clone();
    let mut leases = Vec::new();
    for l in list["locks"].as_array_mut().expect("locks").iter_mut() {
        let at = l
            .as_object_mut()
            .expect("a lock")
            .remove("expires_at")
            .expect("expires_at");
        leases.push((
            l["token"].as_u64().expect("token"),
            ts_micros(at.as_str().expect("expires_at")),
        ));
    }
    (list, leases)
}

/// `maos brief` works and tells the acknowledged facts: every acknowledged decision and held
/// lock (in `--json`, which keeps every item; the text keeps the newest that fit its size
/// cap), and nothing of the refused write.
fn assert_brief(env: &Env, m: &Model, refused: Option<&Write>) {
    let out = env.maos(&["brief", &m.session]);
    assert!(out.status.success(), "maos brief: {}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    let full = env.maos_json(&["brief", &m.session]);
    let decisions: Vec<&str> = full["decisions"]
        .as_array()
        .expect("decisions")
        .iter()
        .filter_map(|d| d["text"].as_str())
        .collect();
    let expected: Vec<&str> = m.notes.iter().map(String::as_str).collect();
    assert_eq!(decisions, expected, "the briefing's decisions");
    let locks = full["locks"].to_string();
    for p in &m.locks {
        assert!(locks.contains(p.as_str()), "brief lacks the lock {p}");
    }
    match refused {
        Some(Write::Note(n)) => {
            let tag = n.split_whitespace().next().unwrap();
            assert!(!text.contains(tag), "brief shows the refused note {tag}");
        }
        Some(Write::Lock(p)) => assert!(!text.contains(p.as_str()), "brief shows {p}"),
        _ => {}
    }
}

/// A session with a running worker, two agents, a note and a lock.
fn set_up(env: &Env) -> Model {
    let session = env.session("survive a full disk", &[]);
    env.maos_json(&["session", "start", &session]);
    let worker = env.agent(Some(&session), "worker", "write while the disk fills");
    env.maos_json(&["agent", "start", &worker]);
    let other = env.agent(Some(&session), "reviewer", "read what is there");
    let mut m = Model {
        session: session.clone(),
        worker: worker.clone(),
        sessions: [session].into(),
        agents: [worker, other].into(),
        ..Model::default()
    };
    for w in [
        Write::Note("setup-decision keep it small".into()),
        Write::Lock("src/setup.rs".into()),
    ] {
        let out = attempt(env, &m, &w).expect("the disk is not full yet");
        w.apply(&mut m, &out);
    }
    assert_model(&reads(env, &m), &m);
    m
}

/// The `i`th write of the fill phase: every kind in turn, most of them large.
fn fill_write(i: usize, m: &Model) -> Write {
    let pad = |tag: String, len: usize| format!("{tag} {}", "x".repeat(len));
    match i % 5 {
        0 => Write::Register(pad(format!("fill-task-{i}"), 3000)),
        1 => Write::Note(pad(format!("fill-note-{i}"), 2000)),
        2 => Write::Lock(format!("fill/{i}.rs")),
        3 if m.paused => Write::Resume,
        3 => Write::Pause,
        _ => Write::Create(pad(format!("fill-session-{i}"), 1000)),
    }
}

/// `w` was refused (`f`): clearly, and with nothing changed since `last`, in the reads, the
/// model and the briefing.
fn assert_refused_cleanly(env: &Env, m: &Model, last: &Reads, w: &Write, f: &Failure) {
    assert_clear_refusal(f);
    let now = reads(env, m);
    assert_unchanged(last, &now, &format!("the refused {}", w.kind()));
    assert_model(&now, m);
    assert_brief(env, m, Some(w));
}

/// Write until the daemon refuses; returns the refused write and how many were acknowledged.
/// The refused write changed nothing: every read right after it (same daemon, no restart)
/// equals the reads after the last acknowledged write.
fn fill_until_refused(env: &Env, m: &mut Model) -> (Write, usize) {
    let mut last = reads(env, m);
    for i in 0..MAX_FILL_WRITES {
        let w = fill_write(i, m);
        match attempt(env, m, &w) {
            Ok(out) => {
                w.apply(m, &out);
                last = reads(env, m);
            }
            Err(f) => {
                assert_refused_cleanly(env, m, &last, &w, &f);
                return (w, i);
            }
        }
    }
    panic!("{MAX_FILL_WRITES} writes were all acknowledged: the disk never filled up");
}

/// With the disk full: each kind of write, small this time, until it is refused too (a small
/// one may still fit in a page's free space). After every refusal nothing has changed. Returns
/// how many were acknowledged on the way.
fn every_kind_refused(env: &Env, m: &mut Model) -> usize {
    let mut acked = 0;
    let mut last = reads(env, m);
    let kinds: [fn(usize, &Model) -> Option<Write>; 6] = [
        |i, _| Some(Write::Note(format!("full-note-{i} n"))),
        |i, _| Some(Write::Register(format!("full-task-{i}"))),
        |i, _| Some(Write::Create(format!("full-session-{i}"))),
        |i, _| Some(Write::Lock(format!("full/{i}.rs"))),
        |_, m| {
            Some(if m.paused {
                Write::Resume
            } else {
                Write::Pause
            })
        },
        // Releasing frees a row but records an event; the lock must stay held if refused.
        |_, m| m.locks.iter().next().cloned().map(Write::Release),
    ];
    for make in kinds {
        let mut refused = false;
        for i in 0..MAX_WRITES_WHILE_FULL {
            let Some(w) = make(i, m) else { break };
            match attempt(env, m, &w) {
                Ok(out) => {
                    w.apply(m, &out);
                    acked += 1;
                    last = reads(env, m);
                }
                Err(f) => {
                    assert_refused_cleanly(env, m, &last, &w, &f);
                    refused = true;
                    break;
                }
            }
        }
        let kind = make(0, m).map_or("lock release", |w| w.kind());
        assert!(refused, "`maos {kind}` was never refused on a full disk");
    }
    // A refusal without --json is one clear line too.
    let w = Write::Note("plain-refused n".into());
    assert_clear_refusal_plain(env, m, &w);
    assert_unchanged(&last, &reads(env, m), "the refused plain note");
    acked
}

/// After space was freed: one write of every kind is acknowledged at once.
fn every_kind_works(env: &Env, m: &mut Model, tag: &str) {
    let mut kinds = vec![
        Write::Note(format!("{tag}-note freed")),
        Write::Register(format!("{tag}-task")),
        Write::Create(format!("{tag}-session")),
        Write::Lock(format!("{tag}/a.rs")),
        if m.paused {
            Write::Resume
        } else {
            Write::Pause
        },
    ];
    if let Some(p) = m.locks.iter().next() {
        kinds.push(Write::Release(p.clone()));
    }
    for w in kinds {
        let out = attempt(env, m, &w).unwrap_or_else(|f| {
            panic!(
                "`maos {}` still refused after space was freed: {f:?}",
                w.kind()
            )
        });
        w.apply(m, &out);
    }
    assert_model(&reads(env, m), m);
}

/// `kill -9` the daemon; the next command starts a new one from what is on disk, which must
/// read exactly as before.
fn crash_and_compare(env: &Env, m: &Model) {
    let before = reads(env, m);
    let old = env.kill9();
    let after = reads(env, m);
    assert_ne!(env.daemon_pid(), old, "a new daemon serves");
    assert_unchanged_but_leases(&before, &after, "kill -9 and a restart", HALF_LEASE_US);
    assert_model(&after, m);
    assert_eq!(env.integrity_check(), "ok");
}

fn private_dir(dir: &Path) {
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
}

fn write_config(env: &Env, max_page_count: u64) {
    private_dir(&env.home);
    std::fs::write(
        env.home.join("config.toml"),
        format!("max_page_count = {max_page_count}\n"),
    )
    .expect("config.toml");
}

/// The fallback that runs everywhere: the database is capped with SQLite's `max_page_count`,
/// and space is "freed" by restarting the daemon with a larger cap.
#[test]
fn a_database_at_max_page_count_refuses_writes_cleanly_and_recovers() {
    let t0 = Instant::now();
    let env = Env::new();
    let mut m = set_up(&env);
    // The cap: what the database holds now (measured after a clean stop, which copies the WAL
    // back) plus room for a few dozen writes.
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", describe(&out));
    let pages = std::fs::metadata(env.db_path()).expect("database").len() / 4096;
    assert!(pages > 0);
    write_config(&env, pages + 48);
    assert_model(&reads(&env, &m), &m);

    let (refused, before_full) = fill_until_refused(&env, &mut m);
    let while_full = every_kind_refused(&env, &mut m);
    assert_eq!(env.integrity_check(), "ok");
    let filled = t0.elapsed();

    // Killed while full, the daemon comes back with exactly what was acknowledged, and (still
    // capped) refuses as before.
    crash_and_compare(&env, &m);
    let refused_again = attempt(&env, &m, &Write::Note("after-crash-note x".into()));
    let f = refused_again.expect_err("the cap still holds after a restart");
    assert_clear_refusal(&f);

    // "Free space": a larger cap, applied by a restart.
    write_config(&env, (pages + 48) * 4);
    crash_and_compare(&env, &m);
    every_kind_works(&env, &mut m, "freed");
    crash_and_compare(&env, &m);
    println!(
        "max_page_count {}: {before_full} writes acknowledged before the first refusal (a {}), \
         {while_full} more small ones while full; full after {:.1} s, test {:.1} s",
        pages + 48,
        refused.kind(),
        filled.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}

/// A tmpfs mounted on a directory; unmounted when dropped (lazily if something still uses it).
struct Tmpfs {
    dir: PathBuf,
}

impl Tmpfs {
    /// Mount a tmpfs of `kib` KiB on `dir`, or say why it cannot be done here.
    fn mount(dir: &Path, kib: u64) -> Result<Tmpfs, String> {
        if !maos_tests::is_root() {
            return Err("mounting needs root".into());
        }
        private_dir(dir);
        let out = Command::new("mount")
            .args(["-t", "tmpfs", "-o"])
            .arg(format!("size={kib}k,mode=0700"))
            .arg("tmpfs")
            .arg(dir)
            .stdin(Stdio::null())
            .output()
            .map_err(|e| format!("cannot run mount: {e}"))?;
        if !out.status.success() {
            return Err(String::from_utf8_lossy(&out.stderr).trim().to_string());
        }
        Ok(Tmpfs {
            dir: dir.to_path_buf(),
        })
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let umount = |lazy: bool| {
            let mut cmd = Command::new("umount");
            if lazy {
                cmd.arg("-l");
            }
            cmd.arg(&self.dir)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        if !umount(false) && !umount(true) {
            eprintln!("warning: cannot unmount {}", self.dir.display());
        }
    }
}

/// An [`Env`] whose `MAOS_HOME` is a tmpfs. Dropping it kills the test's daemons first, so that
/// nothing holds the filesystem, then unmounts it, then removes the temporary directory.
struct OnTmpfs {
    env: Env,
    tmpfs: Option<Tmpfs>,
}

impl Drop for OnTmpfs {
    fn drop(&mut self) {
        // No `wait_until` here: a panic inside a drop would abort the whole test binary.
        for pid in self.env.daemons() {
            kill9(pid);
            let deadline = Instant::now() + Duration::from_secs(5);
            while alive(pid) && Instant::now() < deadline {
                std::thread::yield_now();
            }
        }
        drop(self.tmpfs.take());
    }
}

/// Bytes free for an unprivileged file on the filesystem holding `dir`.
fn free_bytes(dir: &Path) -> u64 {
    let c = std::ffi::CString::new(dir.as_os_str().as_encoded_bytes()).expect("path");
    // SAFETY: statvfs fills the struct we pass; the path is a valid C string.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    assert_eq!(unsafe { libc::statvfs(c.as_ptr(), &mut st) }, 0, "statvfs");
    st.f_bavail as u64 * st.f_frsize as u64
}

/// Fill `path` with `bytes` real bytes (a sparse file would take no room on a tmpfs).
fn write_filler(path: &Path, bytes: u64) {
    use std::io::Write as _;
    let mut f = std::fs::File::create(path).expect("filler");
    let chunk = vec![0xa5u8; 64 * 1024];
    let mut left = bytes;
    while left > 0 {
        let n = left.min(chunk.len() as u64) as usize;
        f.write_all(&chunk[..n]).expect("write the filler");
        left -= n as u64;
    }
    f.sync_all().expect("sync the filler");
}

/// A real full disk: `MAOS_HOME` on a small tmpfs, filled by a file of the test's; freeing it
/// lets the same daemon, without a restart, write again.
#[test]
fn a_full_filesystem_refuses_writes_cleanly_and_recovers_when_space_is_freed() {
    const TMPFS_KIB: u64 = 4096;
    /// Room left beside the filler for the database to grow into.
    const HEADROOM: u64 = 1024 * 1024;
    let t0 = Instant::now();
    let env = Env::new();
    let home = env.home.clone();
    let tmpfs = match Tmpfs::mount(&home, TMPFS_KIB) {
        Ok(t) => t,
        Err(why) => {
            maos_tests::skip_unless_ci(&format!("cannot mount a tmpfs here ({why})"));
            return;
        }
    };
    let world = OnTmpfs {
        env,
        tmpfs: Some(tmpfs),
    };
    let env = &world.env;
    let mut m = set_up(env);
    assert!(
        env.db_path().starts_with(&home),
        "the database is on the tmpfs"
    );

    // The filler takes everything but the headroom (it lives outside `projects/`).
    let filler = home.join("filler");
    let free = free_bytes(&home);
    assert!(free > HEADROOM, "only {free} bytes free on the tmpfs");
    write_filler(&filler, free - HEADROOM);
    let left = free_bytes(&home);
    assert!(left <= HEADROOM, "{left} bytes left after the filler");

    let (refused, before_full) = fill_until_refused(env, &mut m);
    let while_full = every_kind_refused(env, &mut m);
    assert_eq!(env.integrity_check(), "ok");
    let filled = t0.elapsed();
    let free_when_full = free_bytes(&home);

    // Free the space; the same daemon writes again at once.
    let daemon = env.daemon_pid();
    std::fs::remove_file(&filler).expect("remove the filler");
    every_kind_works(env, &mut m, "freed");
    assert_eq!(env.daemon_pid(), daemon, "no restart was needed");
    assert_eq!(env.integrity_check(), "ok");
    // ... and what it wrote is durable.
    crash_and_compare(env, &m);
    every_kind_works(env, &mut m, "after-crash");
    crash_and_compare(env, &m);
    println!(
        "tmpfs {TMPFS_KIB} KiB, {HEADROOM} bytes of headroom: {before_full} writes acknowledged \
         before the first refusal (a {}), {while_full} more small ones while full \
         ({free_when_full} bytes free then); full after {:.1} s, test {:.1} s",
        refused.kind(),
        filled.as_secs_f64(),
        t0.elapsed().as_secs_f64()
    );
}
