//! The data lifecycle: `maos history` and `maos session archive`, through the real binaries.

use maos_tests::{Env, ids};
use serde_json::Value;

fn history(env: &Env, extra: &[&str]) -> Vec<Value> {
    let mut args = vec!["history"];
    args.extend_from_slice(extra);
    env.maos_json(&args)
        .as_array()
        .unwrap_or_else(|| panic!("history is not a list"))
        .clone()
}

fn column(list: &[Value], field: &str) -> Vec<Value> {
    list.iter().map(|h| h[field].clone()).collect()
}

#[test]
fn history_lists_finished_sessions_newest_first_and_archive_takes_one_out_of_memory() {
    let env = Env::new();
    let done = env.session("done first", &[]);
    env.maos(&["session", "start", &done]);
    env.agent(Some(&done), "dev", "work");
    env.maos(&["session", "complete", &done]);
    let cancelled = env.session("cancelled second", &[]);
    env.maos(&["session", "cancel", &cancelled]);
    let live = env.session("still running", &[]);
    env.maos(&["session", "start", &live]);

    // Finished ones only, newest end first; the live one is not history.
    let h = history(&env, &[]);
    assert_eq!(
        column(&h, "id"),
        vec![Value::from(cancelled.clone()), Value::from(done.clone())]
    );
    assert_eq!(column(&h, "state"), vec!["cancelled", "completed"]);
    assert_eq!(column(&h, "agents"), vec![0, 1]);
    assert_eq!(column(&h, "archived"), vec![false, false]);
    assert_eq!(
        column(&history(&env, &["--limit", "1"]), "id"),
        vec![Value::from(cancelled.clone())]
    );

    // A live session cannot be archived, and the refusal changes nothing.
    let before = env.events(&[]).len();
    let f = env.maos_fail(&["session", "archive", &live]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("only a finished session"),
        "{}",
        f.message
    );
    assert_eq!(f.stderr.trim().lines().count(), 1, "{}", f.stderr);
    assert_eq!(env.events(&[]).len(), before);
    let f = env.maos_fail(&["session", "archive", "sess_ffffffff"]);
    assert_eq!((f.exit, f.code.as_str()), (1, "not_found"), "{}", f.message);

    // Archived: gone from memory (`session list`, `ps`), kept in history and the timeline
    // (`session show` and `events SESSION` read it from the database), and still so after a
    // crash.
    let archived = env.maos_json(&["session", "archive", &done[..13]]);
    assert_eq!(archived["id"], done.as_str());
    let listed = ids(&env.maos_json(&["session", "list", "--all"]));
    assert!(!listed.contains(&done), "{listed:?}");
    assert!(
        listed.contains(&cancelled) && listed.contains(&live),
        "{listed:?}"
    );
    assert!(!env.maos_json(&["ps", "--all"]).to_string().contains(&done));
    let shown = env.maos_json(&["session", "show", &done[..13]]);
    assert_eq!(shown["id"], done.as_str(), "{shown}");
    assert_eq!(shown["state"], "completed");
    assert_eq!(shown["agents"].as_array().map(Vec::len), Some(1));
    let own = env.events(&[&done]);
    assert!(
        own.iter().all(|e| e["session_id"] == done.as_str()),
        "{own:?}"
    );
    assert!(
        own.iter().any(|e| e["type"] == "session_completed"),
        "{own:?}"
    );
    let typed = env.events(&[&done, "--type", "agent_registered"]);
    assert_eq!(typed.len(), 1, "{typed:?}");
    assert_eq!(
        env.maos_fail(&["session", "show", "sess_ffffffff"]).code,
        "not_found"
    );
    assert_eq!(
        env.maos_fail(&["events", "sess_ffffffff"]).code,
        "not_found"
    );
    let archived_events = env
        .events(&["--type", "session_archived"])
        .iter()
        .filter(|e| e["session_id"] == done.as_str())
        .count();
    assert_eq!(archived_events, 1, "the archive is on the timeline");
    assert!(
        env.events(&[])
            .iter()
            .any(|e| e["session_id"] == done.as_str() && e["type"] == "session_completed"),
        "its events stay"
    );
    env.kill9();
    let h = history(&env, &[]);
    assert_eq!(
        column(&h, "id"),
        vec![Value::from(cancelled.clone()), Value::from(done.clone())]
    );
    assert_eq!(column(&h, "archived"), vec![false, true]);
    let listed = ids(&env.maos_json(&["session", "list", "--all"]));
    assert!(
        !listed.contains(&done),
        "not loaded after a restart: {listed:?}"
    );
    assert_eq!(env.integrity_check(), "ok");

    let out = env.maos(&["session", "archive", &cancelled]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success() && text.starts_with(&format!("archived session {}", &cancelled[..13])),
        "{text}"
    );
    assert_eq!(column(&history(&env, &[]), "archived"), vec![true, true]);
}

#[test]
fn history_refuses_a_bad_limit_in_one_line() {
    let env = Env::new();
    for bad in ["x", "-1", "99999999999"] {
        let f = env.maos_fail(&["history", "--limit", bad]);
        assert_eq!(f.exit, 2, "{bad}: {}", f.stderr);
        assert_eq!(f.stderr.trim().lines().count(), 1, "{bad}: {}", f.stderr);
    }
}

/// What a session looks like once its ids and times of arrival are set aside.
fn shape(s: &Value) -> Value {
    let agents: Vec<Value> = s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .map(|a| serde_json::json!([a["id"], a["role"], a["task"], a["state"], a["exit_code"]]))
        .collect();
    serde_json::json!({
        "id": s["id"], "objective": s["objective"], "state": s["state"],
        "strategy": s["strategy"], "phases": s["workflow"]["phases"], "notes": s["notes"],
        "errors": s["errors"], "agents": agents,
    })
}

fn timeline(env: &Env, project: &std::path::Path, sid: &str) -> Vec<(Value, Value, Value)> {
    env.events_in(project, &[sid])
        .iter()
        .map(|e| (e["type"].clone(), e["ts"].clone(), e["data"].clone()))
        .collect()
}

#[test]
fn export_then_import_into_another_project_keeps_the_session_and_its_timeline() {
    let env = Env::new();
    // A managed session: its plan, agents and checkpoints come along too.
    let plan = env.project.join("plan.toml");
    std::fs::write(
        &plan,
        "objective = \"round trip\"\nstrategy = \"sequential\"\n\n[[agent]]\nname = \"api\"\n\
         task = \"the API\"\ncommand = [\"sh\", \"-c\", \"exit 0\"]\n\n[[agent]]\n\
         name = \"tests\"\ntask = \"the tests\"\ncommand = [\"true\"]\ndepends_on = [\"api\"]\n",
    )
    .expect("plan");
    let sid = env.maos_json(&["run", plan.to_str().expect("utf-8")])["id"]
        .as_str()
        .expect("id")
        .to_string();
    env.maos(&["note", "decision", "JWT, not sessions — «stateless»"]);
    maos_tests::wait_until(
        std::time::Duration::from_secs(30),
        "the session completes",
        || env.maos_json(&["session", "show", &sid])["state"] == "completed",
    );
    let original = env.maos_json(&["session", "show", &sid]);
    assert_eq!(original["state"], "completed");
    let file = env.root().join("export.json");
    let done = env.maos_json(&["export", &sid[..12], "-o", file.to_str().expect("utf-8")]);
    let events = timeline(&env, &env.project, &sid);
    assert_eq!(
        done["events"],
        events.len(),
        "every event of the session is in the file"
    );
    assert!(done["checkpoints"].as_u64().unwrap_or(0) >= 1, "{done}");
    let mode = std::fs::metadata(&file).expect("file").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );

    // Into another project: the same session, its events in order with their times, then
    // the import itself.
    let other = env.make_project("other");
    let imported = env.maos_json_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(shape(&imported), shape(&original));
    let after = timeline(&env, &other, &sid);
    assert_eq!(
        after[..events.len()],
        events[..],
        "the timeline, event for event"
    );
    assert_eq!(after.len(), events.len() + 1);
    assert_eq!(after[events.len()].0, "session_imported");
    // Its checkpoints came along and point into the new timeline.
    let cps = env.checkpoints_in(&other, &sid);
    assert_eq!(cps.len() as u64, done["checkpoints"].as_u64().unwrap_or(0));

    // Twice, or back into the project it came from: refused, nothing changes.
    for project in [&other, &env.project] {
        let before = env.events_in(project, &[]).len();
        let f = env.maos_fail_in(project, &["import", file.to_str().expect("utf-8")]);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (1, "bad_request"),
            "{}",
            f.message
        );
        assert!(
            f.message.contains("already in this project"),
            "{}",
            f.message
        );
        assert_eq!(env.events_in(project, &[]).len(), before);
    }

    // An archived session exports the same way.
    env.maos(&["session", "archive", &sid]);
    let again = env.root().join("again.json");
    env.maos_json(&["export", &sid, "-o", again.to_str().expect("utf-8")]);
    let v: Value = serde_json::from_slice(&std::fs::read(&again).expect("read")).expect("json");
    assert_eq!(v["format"], "maos-session");
    assert_eq!(shape(&v["session"]), shape(&original));
}

#[test]
fn a_live_session_comes_in_paused_and_an_orchestrator_file_becomes_a_session() {
    let env = Env::new();
    let live = env.session("still going", &[]);
    env.maos(&["session", "start", &live]);
    let file = env.root().join("live.json");
    env.maos(&["export", &live, "-o", file.to_str().expect("utf-8")]);
    let other = env.make_project("other");
    let s = env.maos_json_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(
        s["state"], "paused",
        "nothing runs by itself after an import"
    );
    assert!(
        s["pause"]["reason"]
            .as_str()
            .unwrap_or("")
            .contains("maos resume")
    );

    let orch = env.root().join("orchestrator.json");
    std::fs::write(
        &orch,
        r#"{"schema_version": "1.0", "session_id": "orch-7", "goal": "Ship auth",
            "status": "in_progress",
            "agents": [{"id": "a1", "role": "backend", "status": "completed", "task": "API"}],
            "completed_work": [{"description": "API endpoints", "outcome": "merged"}],
            "pending_tasks": ["docs"], "decisions_made": [{"decision": "JWT"}],
            "errors": ["flaky test"]}"#,
    )
    .expect("write");
    let s = env.maos_json_in(&other, &["import", orch.to_str().expect("utf-8")]);
    assert_eq!(
        (s["objective"].as_str(), s["state"].as_str()),
        (Some("Ship auth"), Some("paused"))
    );
    assert_eq!(s["agents"][0]["role"], "backend");
    assert_eq!(s["agents"][0]["state"], "completed");
    let sid = s["id"].as_str().expect("id").to_string();
    let brief = env.maos_json_in(&other, &["brief", &sid]).to_string();
    for fact in [
        "API endpoints (outcome: merged)",
        "docs",
        "JWT",
        "flaky test",
    ] {
        assert!(brief.contains(fact), "the briefing has {fact:?}: {brief}");
    }
}

#[test]
fn a_corrupt_or_unknown_file_is_refused_with_the_reason_and_imports_nothing() {
    let env = Env::new();
    let sid = env.session("source", &[]);
    env.maos(&["session", "cancel", &sid]);
    let good = env.root().join("good.json");
    env.maos(&["export", &sid, "-o", good.to_str().expect("utf-8")]);
    let text = std::fs::read_to_string(&good).expect("read");
    let other = env.make_project("other");
    let cases: Vec<(&str, String, &str)> = vec![
        ("empty", String::new(), "not valid JSON"),
        (
            "truncated",
            text[..text.len() / 2].to_string(),
            "not valid JSON",
        ),
        (
            "not a session",
            r#"{"hello": "world"}"#.into(),
            "not a session file",
        ),
        ("a list", "[]".into(), "not a session file"),
        (
            "newer",
            text.replacen("\"version\": 1", "\"version\": 7", 1),
            "version 7 is newer",
        ),
        (
            "bad state",
            text.replacen("\"state\": \"cancelled\"", "\"state\": \"exploded\"", 1),
            "invalid maos-session file",
        ),
        (
            "objective too long",
            text.replacen(
                "\"objective\": \"source\"",
                &format!("\"objective\": \"{}\"", "x".repeat(5000)),
                1,
            ),
            "the objective is 5000 bytes",
        ),
    ];
    for (what, body, want) in cases {
        let path = env.root().join(format!("{what}.json"));
        std::fs::write(&path, body).expect("write");
        let before = (
            env.events_in(&other, &[]).len(),
            env.maos_json_in(&other, &["session", "list", "--all"]),
        );
        let f = env.maos_fail_in(&other, &["import", path.to_str().expect("utf-8")]);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (1, "bad_request"),
            "{what}: {}",
            f.message
        );
        assert!(f.message.contains(want), "{what}: {}", f.message);
        assert!(
            f.message.contains(path.to_str().unwrap_or("?")),
            "{what} names the file: {}",
            f.message
        );
        assert_eq!(f.stderr.trim().lines().count(), 1, "{what}: {}", f.stderr);
        let after = (
            env.events_in(&other, &[]).len(),
            env.maos_json_in(&other, &["session", "list", "--all"]),
        );
        assert_eq!(after, before, "{what} changed nothing");
    }
    let f = env.maos_fail_in(&other, &["import", "/nonexistent/file.json"]);
    assert_eq!(f.exit, 2, "{}", f.stderr);
    assert!(
        f.stderr.contains("cannot read /nonexistent/file.json"),
        "{}",
        f.stderr
    );
    let f = env.maos_fail(&["export", "sess_ffffffff"]);
    assert_eq!((f.exit, f.code.as_str()), (1, "not_found"), "{}", f.message);
}

#[test]
fn backup_is_a_consistent_copy_taken_while_writes_go_on() {
    if maos_tests::sqlite_only("a backup is a copy of the SQLite file") {
        return;
    }
    let env = Env::new();
    let sid = env.session("backed up", &[]);
    env.maos(&["session", "start", &sid]);
    // A writer adds numbered notes while the backup runs; each acknowledged one is recorded.
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let acked = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
    let writer = {
        let (stop, acked) = (stop.clone(), acked.clone());
        let cmd_for = {
            let env_home = env.home.clone();
            let env_socket = env.socket.clone();
            let project = env.project.clone();
            move |n: usize| {
                let mut c = std::process::Command::new(maos_tests::maos_bin());
                c.env("MAOS_HOME", &env_home)
                    .env("MAOS_SOCKET", &env_socket)
                    .arg("--project")
                    .arg(&project)
                    .args(["note", "done", &format!("note {n}")]);
                c
            }
        };
        std::thread::spawn(move || {
            let mut n = 0;
            while !stop.load(std::sync::atomic::Ordering::Relaxed) || n < 20 {
                let out = cmd_for(n).output().expect("maos note");
                assert!(
                    out.status.success(),
                    "{}",
                    String::from_utf8_lossy(&out.stderr)
                );
                acked.lock().expect("lock").push(n);
                n += 1;
            }
        })
    };
    maos_tests::wait_until(
        std::time::Duration::from_secs(30),
        "some notes are in",
        || acked.lock().map(|a| a.len() >= 5).unwrap_or(false),
    );
    let before = acked.lock().expect("lock").len();
    let file = env.root().join("backup.db");
    let b = env.maos_json(&["backup", "-o", file.to_str().expect("utf-8")]);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    writer.join().expect("writer");
    assert_eq!(b["quick_check"], "ok", "{b}");
    let mode = std::fs::metadata(&file).expect("backup").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );

    // The copy holds a prefix of the acknowledged notes, with every note acknowledged before
    // the backup started, and no gap: one moment of the database.
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .expect("runtime");
    assert_eq!(
        rt.block_on(maos_store::integrity_check(&file))
            .expect("check"),
        "ok"
    );
    let loaded = rt.block_on(async {
        let mut s = maos_store::Store::open(file.clone(), maos_store::StoreOptions::default())
            .await
            .expect("open the copy");
        s.load().await.expect("load the copy")
    });
    let session = loaded
        .sessions
        .iter()
        .find(|s| s.id.as_str() == sid)
        .expect("the session is in the copy");
    let notes: Vec<String> = session.notes.iter().map(|n| n.text.clone()).collect();
    assert!(
        notes.len() >= before,
        "{} notes, {before} acknowledged before",
        notes.len()
    );
    let want: Vec<String> = (0..notes.len()).map(|n| format!("note {n}")).collect();
    assert_eq!(notes, want, "a prefix of the writes, without gaps");

    // An existing file or a missing directory is refused in one line, and nothing is written.
    for bad in [file.clone(), env.root().join("no/such/dir/b.db")] {
        let f = env.maos_fail(&["backup", "-o", bad.to_str().expect("utf-8")]);
        assert_eq!(f.exit, 2, "{}", f.stderr);
        assert_eq!(f.stderr.trim().lines().count(), 1, "{}", f.stderr);
    }
    assert!(!env.root().join("no").exists());
}

#[test]
fn gc_exports_then_deletes_finished_sessions_and_nothing_else() {
    let env = Env::new();
    let done = env.session("done", &[]);
    env.maos(&["session", "start", &done]);
    let a = env.agent(Some(&done), "dev", "work");
    env.maos(&["agent", "start", &a]);
    env.maos(&["note", "decision", "keep the export"]);
    env.maos(&["session", "complete", &done]);
    let archived = env.session("archived", &[]);
    env.maos(&["session", "cancel", &archived]);
    env.maos(&["session", "archive", &archived]);
    let live = env.session("live", &[]);
    env.maos(&["session", "start", &live]);
    let ids_of = |h: &[Value]| -> Vec<String> {
        let mut v: Vec<String> = h
            .iter()
            .map(|x| x["id"].as_str().unwrap_or("").to_string())
            .collect();
        v.sort();
        v
    };
    let mut finished = vec![done.clone(), archived.clone()];
    finished.sort();

    // Nothing has ended an hour ago; a dry run lists without deleting.
    assert_eq!(
        env.maos_json(&["gc", "--older-than", "1h"])["sessions"],
        serde_json::json!([])
    );
    let dry = env.maos_json(&["gc", "--older-than", "0s", "--dry-run"]);
    assert_eq!(ids_of(dry["sessions"].as_array().expect("list")), finished);
    assert_eq!(
        ids_of(&history(&env, &[])),
        finished,
        "a dry run deletes nothing"
    );

    let report = env.maos_json(&["gc", "--older-than", "0s"]);
    let deleted = report["sessions"].as_array().expect("list");
    assert_eq!(ids_of(deleted), finished);
    assert!(history(&env, &[]).is_empty());
    let listed = ids(&env.maos_json(&["session", "list", "--all"]));
    assert_eq!(listed, vec![live.clone()], "the live session stays");
    for sid in &finished {
        let f = env.maos_fail(&["events", sid]);
        assert_eq!(f.code, "not_found", "{sid} is gone: {}", f.message);
    }
    let all = env.events(&[]);
    assert!(
        all.iter()
            .all(|e| e["session_id"] != done.as_str() && e["session_id"] != archived.as_str())
    );
    assert_eq!(
        all.iter()
            .filter(|e| e["type"] == "session_deleted")
            .count(),
        2,
        "the project's timeline records each deletion"
    );
    assert_eq!(env.integrity_check(), "ok");

    // Each export is private and brings the session back whole.
    let path = deleted
        .iter()
        .find(|d| d["id"] == done.as_str())
        .and_then(|d| d["exported_to"].as_str())
        .expect("exported_to")
        .to_string();
    let mode = std::fs::metadata(&path).expect("export").permissions();
    assert_eq!(
        std::os::unix::fs::PermissionsExt::mode(&mode) & 0o777,
        0o600
    );
    let back = env.maos_json(&["import", &path]);
    assert_eq!(back["id"], done.as_str());
    assert_eq!(back["agents"][0]["id"], a.as_str());
    assert!(back["notes"].to_string().contains("keep the export"));

    let f = env.maos_fail(&["gc", "--older-than", "soon"]);
    assert_eq!(f.exit, 2, "{}", f.stderr);
    assert!(f.stderr.contains("--older-than"), "{}", f.stderr);
}

#[test]
fn the_daemon_collects_on_the_schedule_of_its_configuration() {
    let env = Env::new();
    std::fs::create_dir_all(&env.home).expect("home");
    std::fs::set_permissions(
        &env.home,
        std::os::unix::fs::PermissionsExt::from_mode(0o700),
    )
    .expect("chmod");
    std::fs::write(
        env.home.join("config.toml"),
        "gc_older_than = \"0s\"\ngc_every = \"200ms\"\n",
    )
    .expect("config");
    let sid = env.session("short lived", &[]);
    env.maos(&["session", "cancel", &sid]);
    maos_tests::wait_until(
        std::time::Duration::from_secs(20),
        "the schedule deletes it",
        || history(&env, &[]).is_empty(),
    );
    assert!(
        env.events(&[])
            .iter()
            .any(|e| e["type"] == "session_deleted")
    );

    // A bad value in the configuration: the daemon does not start, and says which key.
    env.maos(&["daemon", "stop"]);
    std::fs::write(env.home.join("config.toml"), "gc_every = \"soon\"\n").expect("config");
    let mut cmd = env.command(&maos_tests::maosd_bin());
    cmd.arg("--foreground");
    let out = maos_tests::run_with_timeout(cmd, std::time::Duration::from_secs(10));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{err}");
    assert!(err.contains("gc_every") && err.contains("soon"), "{err}");
}

#[test]
fn restore_checks_the_backup_then_replaces_the_database_and_keeps_the_old_one() {
    if maos_tests::sqlite_only("a backup is a copy of the SQLite file") {
        return;
    }
    let env = Env::new();
    let kept = env.session("in the backup", &[]);
    env.maos(&["session", "start", &kept]);
    env.maos(&["note", "decision", "before the backup"]);
    let backup = env.root().join("b.db");
    env.maos_json(&["backup", "-o", backup.to_str().expect("utf-8")]);
    let later = env.session("after the backup", &[]);
    let pid = env.daemon_pid();
    let listed = |env: &Env| ids(&env.maos_json(&["session", "list", "--all"]));
    let project_dir = env.db_path().parent().expect("dir").to_path_buf();
    let aside = || -> usize {
        std::fs::read_dir(&project_dir)
            .expect("dir")
            .filter(|e| {
                e.as_ref().is_ok_and(|e| {
                    e.file_name()
                        .to_string_lossy()
                        .starts_with("maos.db.before-restore-")
                })
            })
            .count()
    };

    // Bad files are refused before anything is touched.
    let text = std::fs::read(&backup).expect("backup");
    let bad: Vec<(&str, Vec<u8>)> = vec![
        ("text", b"not a database at all".to_vec()),
        ("empty", Vec::new()),
        ("truncated", text[..text.len() / 2].to_vec()),
    ];
    let before = listed(&env);
    for (what, body) in bad {
        let path = env.root().join(format!("{what}.db"));
        std::fs::write(&path, body).expect("write");
        let f = env.maos_fail(&["restore", path.to_str().expect("utf-8"), "--force"]);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (1, "bad_request"),
            "{what}: {}",
            f.message
        );
        assert!(
            f.message.contains("nothing replaced"),
            "{what}: {}",
            f.message
        );
        // It names the file and what is wrong with it, not a row of maos's own database
        // (issue 15: "database holds a row maos cannot read").
        assert!(
            f.message.starts_with(&format!("{}: ", path.display()))
                && !f.message.contains("cannot read"),
            "{what}: {}",
            f.message
        );
        assert_eq!(f.stderr.trim().lines().count(), 1, "{what}: {}", f.stderr);
        assert_eq!(listed(&env), before, "{what} changed nothing");
    }
    let f = env.maos_fail(&["restore", "/no/such/backup.db"]);
    assert_eq!(f.exit, 2, "{}", f.stderr);

    // Live sessions would be replaced: refused without --force.
    let f = env.maos_fail(&["restore", backup.to_str().expect("utf-8")]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{}",
        f.message
    );
    assert!(f.message.contains("--force"), "{}", f.message);
    assert_eq!(listed(&env), before);
    assert_eq!(aside(), 0, "nothing moved aside by a refusal");

    let r = env.maos_json(&["restore", backup.to_str().expect("utf-8"), "--force"]);
    assert_eq!(r["sessions"], 1, "{r}");
    assert!(std::path::Path::new(r["previous"].as_str().expect("previous")).is_file());
    assert_eq!(aside(), 1);
    assert_eq!(
        env.daemon_pid(),
        pid,
        "the same daemon, the project reopened"
    );
    assert_eq!(
        listed(&env),
        vec![kept.clone()],
        "the backup's state: {later} is gone"
    );
    let s = env.maos_json(&["session", "show", &kept]);
    assert!(s["notes"].to_string().contains("before the backup"));
    // Writes go on, and survive a crash.
    env.maos(&["note", "done", "after the restore"]);
    env.kill9();
    let s = env.maos_json(&["session", "show", &kept]);
    assert!(s["notes"].to_string().contains("after the restore"), "{s}");
    assert_eq!(env.integrity_check(), "ok");
}

/// `maos backup` without `-o` writes under `$MAOS_HOME/backups/`, never into the working tree
/// (issue 15), and says where.
#[test]
fn a_backup_without_a_name_goes_under_maos_home() {
    if maos_tests::sqlite_only("a backup is a copy of the SQLite file") {
        return;
    }
    let env = Env::new();
    env.session("backed up", &[]);
    let b = env.maos_json(&["backup"]);
    let path = std::path::PathBuf::from(b["path"].as_str().unwrap_or_else(|| panic!("{b}")));
    assert!(path.starts_with(env.home.join("backups")), "{b}");
    assert!(path.exists() && b["quick_check"] == "ok", "{b}");
    let name = path
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let project = env
        .project
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    assert!(
        name.starts_with(project) && name.ends_with("Z.db"),
        "{name}"
    );
    let in_tree: Vec<_> = std::fs::read_dir(&env.project)
        .expect("project")
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().ends_with(".db"))
        .collect();
    assert!(
        in_tree.is_empty(),
        "a database in the working tree: {in_tree:?}"
    );
}
