//! Input that is not an id never becomes one (issue 30, defects 1 and 2): an import with a
//! session id that is a path is refused and writes nothing outside `$MAOS_HOME`; a database
//! that holds a row maos cannot read (written by an older maos, by hand, or by another daemon)
//! fails closed for writes, says why on every command, is named by `maos doctor` and comes
//! back with `maos repair --quarantine`, the rest of its data intact.

use std::path::Path;

use maos_tests::{Env, Value, describe, json, sqlite_only};

/// An export of a fresh session of `env`'s project, with one checkpoint (what writes
/// `sessions/<id>/checkpoint.json`), as JSON to tamper with.
fn exported(env: &Env) -> Value {
    let sid = env.session("to export", &["build"]);
    env.maos(&["note", "decision", "keep it"]);
    let file = env.root().join("export.json");
    env.maos_json(&["export", &sid, "-o", file.to_str().expect("utf-8")]);
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("export")).expect("JSON");
    let last = v["events"]
        .as_array()
        .and_then(|e| e.last())
        .map_or(0, |e| e["seq"].as_u64().unwrap_or(0));
    v["checkpoints"] = json!([{
        "seq": last, "ts": v["exported_at"], "reason": "manual", "state": {"locks": []},
    }]);
    v
}

/// Every file under `dir`, as paths relative to it.
fn files_under(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p);
            } else {
                out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
            }
        }
    }
    out.sort();
    out
}

#[test]
fn an_import_whose_ids_are_paths_is_refused_in_one_line_and_writes_nothing() {
    let env = Env::new();
    let good = exported(&env);
    let sessions_before = env.maos_json(&["session", "list"]);
    let events_before = env.events(&[]).len();
    // Files the user owns where the paths lead: `sessions/<id>/checkpoint.json` and
    // `charts/<id>.json` of the project's directory, four levels below the test's directory.
    let victim_dir = env.root().join("victim");
    let abs = env.root().join("abs");
    for d in [&victim_dir, &abs] {
        std::fs::create_dir_all(d).expect("dir");
        std::fs::write(d.join("checkpoint.json"), "the user's own file").expect("sentinel");
    }
    std::fs::write(env.root().join("victim.json"), "the user's own file").expect("sentinel");
    let outside_before = files_under(&env.root().join("user"));
    let bad_sessions = [
        "../../x".to_string(),
        "../../../../victim".to_string(),
        abs.display().to_string(),
        "/tmp/abs".to_string(),
    ];
    let agent = format!("agt_{}", "1".repeat(32));
    let mut files = Vec::new();
    for sid in &bad_sessions {
        let mut v = good.clone();
        v["session"]["id"] = json!(sid);
        for e in v["events"].as_array_mut().expect("events") {
            e["session_id"] = json!(sid);
        }
        files.push(v);
    }
    // An agent id that is a path, in a session whose own id is fine.
    let mut v = good.clone();
    let sid = format!("sess_{}", "2".repeat(32));
    v["session"]["id"] = json!(sid);
    for e in v["events"].as_array_mut().expect("events") {
        e["session_id"] = json!(sid);
    }
    v["session"]["agents"] = json!([{
        "id": "../../agent", "session_id": v["session"]["id"], "role": "r", "instance": 1,
        "task": "t", "state": "completed", "created_at": v["exported_at"],
        "updated_at": v["exported_at"],
    }]);
    files.push(v);
    let mut v = good.clone();
    v["session"]["id"] = json!(format!("sess_{}", "3".repeat(32)));
    v["session"]["notes"] =
        json!([{"kind": "decision", "text": "x", "agent": agent.replace("agt_", "agt_/")}]);
    files.push(v);
    for (i, v) in files.iter().enumerate() {
        let path = env.root().join(format!("bad-{i}.json"));
        std::fs::write(&path, v.to_string()).expect("write");
        let f = env.maos_fail(&["import", path.to_str().expect("utf-8")]);
        assert_eq!(f.code, "bad_request", "{i}: {}", f.message);
        assert!(
            f.message.contains("invalid session id") || f.message.contains("invalid agent id"),
            "{i}: {}",
            f.message
        );
        assert!(!f.message.contains('\n'), "one line: {:?}", f.message);
        // Without --json: one line on stderr too.
        let out = env.maos(&["import", path.to_str().expect("utf-8")]);
        assert!(!out.status.success(), "{}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    }
    // Nothing changed: the project, and every file outside MAOS_HOME.
    assert_eq!(env.maos_json(&["session", "list"]), sessions_before);
    assert_eq!(env.events(&[]).len(), events_before);
    for f in [
        victim_dir.join("checkpoint.json"),
        abs.join("checkpoint.json"),
        env.root().join("victim.json"),
    ] {
        assert_eq!(
            std::fs::read_to_string(&f).expect("the user's file is still there"),
            "the user's own file",
            "{}",
            f.display()
        );
    }
    assert!(!env.root().join("x").exists() && !Path::new("/tmp/abs/checkpoint.json").exists());
    assert_eq!(files_under(&env.root().join("user")), outside_before);
    // The daemon restarts and loads the project as it was.
    env.maos_json(&["daemon", "stop"]);
    assert_eq!(env.maos_json(&["session", "list"]), sessions_before);
}

/// Run `sql` statements on the project's SQLite database (the daemon stopped).
fn tamper(db: &Path, sql: &[String]) {
    use sqlx::Connection;
    let db = db.to_path_buf();
    let sql = sql.to_vec();
    maos_tests::block_on(async move {
        let mut conn =
            sqlx::sqlite::SqliteConnection::connect(&format!("sqlite://{}", db.display()))
                .await
                .expect("open the database");
        for s in sql {
            sqlx::query(&s)
                .execute(&mut conn)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
        conn.close().await.expect("close");
    });
}

fn hook_decision(env: &Env, input: &Value) -> (String, String) {
    let out = env.hook("claude", input);
    let text = String::from_utf8_lossy(&out.stdout);
    let v: Value = serde_json::from_str(text.trim()).unwrap_or(Value::Null);
    let o = &v["hookSpecificOutput"];
    (
        o["permissionDecision"].as_str().unwrap_or("").to_string(),
        o["permissionDecisionReason"]
            .as_str()
            .or(v["systemMessage"].as_str())
            .unwrap_or("")
            .to_string(),
    )
}

/// A Claude Code hook input: the window `s-1` writes `a.rs` in `project` (PreToolUse Write).
fn write_input(project: &Path) -> Value {
    json!({
        "session_id": "s-1", "cwd": project, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": project.join("a.rs"), "content": "x"},
    })
}

#[test]
fn a_row_maos_cannot_read_fails_closed_is_named_and_quarantined() {
    if sqlite_only("a row written into the project's SQLite file") {
        return;
    }
    let env = Env::new();
    let keep = env.session("keep me", &["build"]);
    let kept_agent = env.agent(Some(&keep), "coder", "the parser");
    env.maos(&["note", "decision", "we keep this"]);
    let broken = env.session("break me", &["build"]);
    env.agent(Some(&broken), "coder", "a victim");
    let keep_events = env.events(&[&keep]).len();
    env.maos_json(&["daemon", "stop"]);
    // What an older maos's import left: a session whose id is a path.
    let bad = "../../x";
    let set = |table: &str, col: &str| {
        format!("UPDATE {table} SET {col} = '{bad}' WHERE {col} = '{broken}'")
    };
    tamper(
        &env.db_path(),
        &[
            "PRAGMA foreign_keys = OFF".to_string(),
            set("sessions", "id"),
            set("phases", "session_id"),
            set("session_agents", "session_id"),
            set("session_events", "session_id"),
            set("checkpoints", "session_id"),
        ],
    );

    // Every command says why, in one line, and what to run.
    for args in [&["session", "list"][..], &["ps"], &["lock", "list"]] {
        let f = env.maos_fail(args);
        assert_eq!(f.code, "project_unloadable", "{args:?}: {}", f.message);
        assert!(!f.message.contains('\n'), "{:?}", f.message);
        assert!(
            f.message.contains("cannot be loaded")
                && f.message.contains("sessions")
                && f.message.contains(bad)
                && f.message.contains("maos repair --quarantine"),
            "{}",
            f.message
        );
        let out = env.maos(args);
        assert!(!out.status.success());
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim_end().lines().count(), 1, "{err:?}");
    }
    // A write through a hook is refused (fail closed), with the reason and the way out.
    let write = write_input(&env.project);
    let (decision, reason) = hook_decision(&env, &write);
    assert_eq!(decision, "deny", "{reason}");
    assert!(
        reason.contains("cannot be loaded") && reason.contains("maos repair --quarantine"),
        "{reason}"
    );
    // A read is not a write: it is let through, and the user is told why maos did not see it.
    let read = json!({
        "session_id": "s-1", "cwd": env.project, "hook_event_name": "PreToolUse",
        "tool_name": "Read", "tool_use_id": "toolu_2",
        "tool_input": {"file_path": env.project.join("a.rs")},
    });
    let (decision, reason) = hook_decision(&env, &read);
    assert_eq!(decision, "", "{reason}");
    assert!(reason.contains("cannot be loaded"), "{reason}");

    // `maos doctor` names the row.
    let out = env.maos(&["doctor"]);
    let text = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.contains("table sessions") && text.contains(bad),
        "doctor: {}",
        describe(&out)
    );
    let found = env.maos_json(&["repair"]);
    assert_eq!(found["bad"][0]["table"], "sessions", "{found}");
    assert_eq!(found["bad"][0]["row"], bad, "{found}");
    assert_eq!(found["moved"], 0, "{found}");
    // Only looking changed nothing.
    assert_eq!(env.maos_fail(&["ps"]).code, "project_unloadable");

    // The quarantine moves the session aside, to a file, and the project loads.
    let done = env.maos_json(&["repair", "--quarantine"]);
    assert_eq!(done["sessions"], json!([bad]), "{done}");
    assert!(done["moved"].as_u64().unwrap_or(0) >= 3, "{done}");
    let file = done["file"].as_str().expect("the quarantine file");
    assert!(
        Path::new(file).starts_with(&env.home),
        "{file} is under MAOS_HOME"
    );
    let saved: Value =
        serde_json::from_str(&std::fs::read_to_string(file).expect("the file")).expect("JSON");
    assert_eq!(saved["rows"]["sessions"][0]["id"], bad, "{saved}");
    assert_eq!(saved["rows"]["sessions"][0]["objective"], "break me");
    assert!(
        !saved["rows"]["session_agents"]
            .as_array()
            .expect("agents")
            .is_empty()
    );

    // The rest is intact: the other session, its agent, its note and its timeline.
    let list = env.maos_json(&["session", "list"]);
    let ids: Vec<&str> = list
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, vec![keep.as_str()], "{list}");
    let shown = env.maos_json(&["session", "show", &keep]);
    assert_eq!(shown["agents"][0]["id"], kept_agent.as_str());
    assert!(shown.to_string().contains("we keep this"), "{shown}");
    assert!(env.events(&[&keep]).len() >= keep_events);
    let (decision, _) = hook_decision(&env, &write);
    assert_eq!(decision, "", "a write is allowed again");
    assert!(
        env.maos_json(&["repair"])["bad"]
            .as_array()
            .is_some_and(Vec::is_empty)
    );
}

/// Run `sql` (with `$1` = the project key) in the fleet's PostgreSQL.
fn pg_exec(pg: &maos_tests::postgres::Postgres, key: &str, sql: &[&str]) {
    use sqlx::Connection;
    let (url, key) = (pg.url(), key.to_string());
    let sql: Vec<String> = sql.iter().map(|s| s.to_string()).collect();
    maos_tests::block_on(async move {
        let mut c = sqlx::PgConnection::connect(&url).await.expect("connect");
        for s in sql {
            sqlx::query(&s)
                .bind(&key)
                .execute(&mut c)
                .await
                .unwrap_or_else(|e| panic!("{s}: {e}"));
        }
    });
}

/// Sets `depends_on` of every agent of the project `key` to `json` in the fleet's PostgreSQL,
/// as a change of another daemon's batch would (the project's next seq).
fn set_depends_on(pg: &maos_tests::postgres::Postgres, key: &str, json: &str) {
    let set = format!(
        "UPDATE session_agents SET depends_on = '{json}', \
         changed_seq = (SELECT last_seq FROM projects WHERE key = $1) WHERE project = $1"
    );
    pg_exec(
        pg,
        key,
        &[
            "UPDATE projects SET last_seq = last_seq + 1 WHERE key = $1",
            &set,
        ],
    );
}

/// In a fleet a row comes from another daemon: one this daemon cannot read (here written into
/// PostgreSQL as an older maos's import would have) reaches it through its next refresh. It
/// is named, never a panic; a write through a hook is refused; the project loads again once
/// the row is put right there.
#[test]
fn a_row_of_another_daemon_maos_cannot_read_fails_closed_in_a_fleet() {
    let Some(pg) = maos_tests::postgres::postgres_or_skip() else {
        return;
    };
    let key = "acme/unloadable";
    let daemon = || {
        let env = Env::new();
        env.write_config(&format!(
            "database_url = \"{}\"\nmachine = \"m\"\n",
            pg.url()
        ));
        std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
        std::fs::write(
            env.project.join(".maos/config.toml"),
            format!("project = \"{key}\"\n"),
        )
        .expect("write");
        env
    };
    let (a, b) = (daemon(), daemon());
    let session = a.session("shared", &[]);
    let agent = a.agent(Some(&session), "coder", "work");
    // b has the project open, and knows it as it is now.
    assert_eq!(b.maos_json(&["session", "list"])[0]["id"], session.as_str());
    let write = write_input(&b.project);
    let (decision, why) = hook_decision(&b, &write);
    assert_eq!(decision, "", "{why}");
    // The agent's dependencies now name something that is not an agent id, as a change of
    // another daemon's batch.
    set_depends_on(&pg, key, r#"["../../x"]"#);
    let f = b.maos_fail(&["ps"]);
    assert_eq!(f.code, "project_unloadable", "{}", f.message);
    assert!(
        f.message.contains("table session_agents")
            && f.message.contains(&agent)
            && f.message.contains("invalid agent id"),
        "{}",
        f.message
    );
    assert!(!f.message.contains('\n'));
    let (decision, why) = hook_decision(&b, &write);
    assert_eq!(decision, "deny", "{why}");
    assert!(why.contains("cannot be loaded"), "{why}");
    // `maos repair` leaves PostgreSQL to its own tools, and says so in one line.
    let f = b.maos_fail(&["repair", "--quarantine"]);
    assert!(f.message.contains("psql"), "{}", f.message);
    // Put right there, the project serves again.
    set_depends_on(&pg, key, "[]");
    assert_eq!(b.maos_json(&["ps"])[0]["id"], session.as_str());
    let (decision, why) = hook_decision(&b, &write);
    assert_eq!(decision, "", "{why}");
}
