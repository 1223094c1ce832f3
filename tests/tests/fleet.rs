//! Fleet mode with one daemon (stage 2 of DESIGN.md §10): `database_url` in `config.toml` makes
//! maosd keep its projects in a real, throwaway PostgreSQL, with SQLite's semantics. What it
//! acknowledges is in PostgreSQL (read back there, and after `kill -9`), nothing goes to a
//! SQLite file, `daemon status` and `doctor` name the engine and its health, and every kind of
//! bad configuration gets one line and changes nothing.

use std::path::Path;

use maos_tests::postgres::{Postgres, postgres_or_skip};
use maos_tests::{Env, Value, block_on, maosd_bin, project_key, run_with_timeout};
use sqlx::{Connection, PgConnection};

fn fleet_env(pg: &Postgres) -> Env {
    let env = Env::new();
    env.write_config(&format!("database_url = \"{}\"\n", pg.url()));
    env
}

/// One value of a query in the fleet's database.
fn scalar(pg: &Postgres, sql: &str, key: &str) -> i64 {
    block_on(async {
        let mut c = PgConnection::connect(&pg.url()).await.expect("connect");
        sqlx::query_scalar(sql)
            .bind(key)
            .fetch_one(&mut c)
            .await
            .unwrap_or_else(|e| panic!("{sql}: {e}"))
    })
}

/// The project's directory under `$MAOS_HOME/projects/` holds no database file.
fn assert_no_sqlite(env: &Env) {
    let dir = env.db_path().parent().expect("project dir").to_path_buf();
    assert!(dir.join("project.json").is_file(), "the project was opened");
    assert!(
        !env.db_path().exists(),
        "{} was made",
        env.db_path().display()
    );
}

/// `maos --json doctor`'s report (it exits non-zero when a check fails).
fn doctor(env: &Env) -> Value {
    let out = env.maos(&["--json", "doctor"]);
    serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor printed no JSON ({e}): {}",
            maos_tests::describe(&out)
        )
    })
}

fn token(v: &Value) -> u64 {
    v["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token in {v}"))
}

#[test]
fn one_daemon_keeps_its_project_in_postgres_and_loses_nothing_to_kill_9() {
    let Some(pg) = postgres_or_skip() else { return };
    let env = fleet_env(&pg);
    let key = project_key(&env.project);

    env.maos_json(&["daemon", "start"]);
    let status = env.maos_json(&["daemon", "status"]);
    assert_eq!(status["backend"]["engine"], "postgres", "{status}");
    assert_eq!(status["backend"]["url"], pg.url().as_str(), "{status}");
    assert!(
        status["backend"]["server"]
            .as_str()
            .is_some_and(|v| v.starts_with("15")),
        "{status}"
    );
    let text = String::from_utf8_lossy(&env.maos(&["daemon", "status"]).stdout).to_string();
    assert!(text.contains("backend      postgres postgres://"), "{text}");
    assert!(text.contains("answering"), "{text}");

    let session = env.session("fleet", &["build"]);
    let a = env.agent(None, "writer", "edit");
    let b = env.agent(None, "reader", "read");
    let t1 = token(&env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a]));
    let t2 = token(&env.maos_json(&[
        "lock",
        "acquire",
        "docs",
        "--agent",
        &b,
        "--mode",
        "directory",
    ]));
    assert!(t2 > t1, "tokens grow: {t1} then {t2}");
    // Refused while held, as on SQLite, and the refusal is on the timeline.
    let refused = env.maos_fail(&["lock", "acquire", "src/a.rs", "--agent", &b]);
    assert_eq!(refused.code, "lock_conflict", "{refused:?}");

    // Everything acknowledged is in PostgreSQL, under the project's key.
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM sessions WHERE project = $1",
            &key
        ),
        1
    );
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM session_agents WHERE project = $1",
            &key
        ),
        2
    );
    assert_eq!(
        scalar(&pg, "SELECT count(*) FROM phases WHERE project = $1", &key),
        1
    );
    assert_eq!(
        scalar(&pg, "SELECT count(*) FROM locks WHERE project = $1", &key),
        2
    );
    let events = env.events(&[]);
    let last = events.last().expect("events")["seq"].as_i64().expect("seq");
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM session_events WHERE project = $1",
            &key
        ),
        last
    );
    assert_eq!(
        scalar(&pg, "SELECT last_seq FROM projects WHERE key = $1", &key),
        last
    );
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM project_roots WHERE project = $1",
            &key
        ),
        1,
        "this clone's root is recorded"
    );
    assert_no_sqlite(&env);

    // kill -9: the next daemon (started by the next command) finds it all in PostgreSQL.
    let before = env.maos_json(&["lock", "list"]);
    env.kill9();
    let after = env.maos_json(&["lock", "list"]);
    assert_eq!(
        before["locks"], after["locks"],
        "the same locks, holders and tokens"
    );
    let shown = env.maos_json(&["session", "show", &session]);
    assert_eq!(shown["agents"].as_array().map(Vec::len), Some(2), "{shown}");
    assert_eq!(env.events(&[]).len(), events.len(), "the same timeline");
    // Tokens never go back: the next grant's is larger than any before the kill.
    let t3 = token(&env.maos_json(&["lock", "acquire", "src/b.rs", "--agent", &a]));
    assert!(t3 > t2, "token {t3} after {t2}");
    env.maos_json(&["lock", "release", "src/a.rs", "--agent", &a]);
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM locks WHERE project = $1 AND path = 'src/a.rs'",
            &key
        ),
        0,
        "a release is committed"
    );

    // History reads come from PostgreSQL too: a finished session, its export.
    env.maos_json(&["session", "cancel", &session]);
    let history = env.maos_json(&["history"]);
    assert_eq!(history[0]["id"], session.as_str(), "{history}");
    let out = env.root().join("export.json");
    env.maos_json(&["export", &session, "-o", out.to_str().expect("utf-8")]);
    let exported: Value =
        serde_json::from_str(&std::fs::read_to_string(&out).expect("export")).expect("JSON");
    assert_eq!(exported["session"]["id"], session.as_str());
    assert!(
        exported["events"].as_array().is_some_and(|e| e.len() > 5),
        "{exported}"
    );

    // doctor: the backend answers, and the project's rows are where it says.
    let doctor = doctor(&env);
    let checks = doctor["checks"].as_array().expect("checks");
    let check = |name: &str| {
        checks
            .iter()
            .find(|c| c["check"] == name)
            .unwrap_or_else(|| panic!("no {name} check in {doctor}"))
            .clone()
    };
    assert_eq!(check("backend")["level"], "ok", "{doctor}");
    let db = check("database");
    assert!(
        db["detail"].as_str().is_some_and(|d| d.contains(&key)),
        "{db}"
    );
    // A backup is a SQLite file copy: refused in one line, nothing written.
    let to = env.root().join("backup.db");
    let f = env.maos_fail(&["backup", "-o", to.to_str().expect("utf-8")]);
    assert!(f.message.contains("pg_dump"), "{f:?}");
    assert!(!to.exists());
}

#[test]
fn a_project_without_a_key_is_refused_in_one_line_until_it_names_one() {
    let Some(pg) = postgres_or_skip() else { return };
    let env = fleet_env(&pg);
    // A clone with no origin remote and no `.maos/config.toml`.
    let loose = env.root().join("loose");
    std::fs::create_dir_all(loose.join(".git")).expect("dir");
    let f = env.maos_fail_in(&loose, &["session", "create", "--objective", "x"]);
    assert!(
        f.message.contains("fleet mode") && f.message.contains(".maos/config.toml"),
        "{f:?}"
    );
    assert!(!f.message.contains('\n'), "one line: {f:?}");
    let dir = env.db_path_of(&loose).parent().expect("dir").to_path_buf();
    assert!(!dir.exists(), "nothing written for it: {}", dir.display());

    // Naming it in `.maos/config.toml` is enough; the key is the one given.
    std::fs::create_dir_all(loose.join(".maos")).expect(".maos");
    std::fs::write(
        loose.join(".maos/config.toml"),
        "project = \"acme/widgets\"\n",
    )
    .expect("write");
    let id = env.maos_json_in(&loose, &["session", "create", "--objective", "named"])["id"]
        .as_str()
        .expect("id")
        .to_string();
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM sessions WHERE project = $1",
            "acme/widgets"
        ),
        1,
        "session {id} is under the named key"
    );
    // The refused attempt recorded nothing anywhere.
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM sessions WHERE project <> $1",
            "acme/widgets"
        ),
        0
    );
    assert_eq!(
        scalar(
            &pg,
            "SELECT count(*) FROM projects WHERE key <> $1",
            "acme/widgets"
        ),
        0
    );
}

#[test]
fn bad_database_urls_are_refused_at_start_and_an_unreachable_server_changes_nothing() {
    let env = Env::new();
    // Not PostgreSQL, and an unparsable one with a password: the daemon refuses to start in
    // one line that never shows the password, and creates nothing.
    for (url, says) in [
        ("mysql://root@db/maos", "PostgreSQL URL"),
        (
            "postgres://maos:hunter2@db:notaport/maos",
            "database_url postgres://maos:***@",
        ),
    ] {
        env.write_config(&format!("database_url = \"{url}\"\n"));
        let out = run_with_timeout(env.command(&maosd_bin()), maos_tests::COMMAND_TIMEOUT);
        let err = String::from_utf8_lossy(&out.stderr).to_string();
        assert!(!out.status.success(), "{url}: {err}");
        assert!(err.contains(says), "{url}: {err}");
        assert!(!err.contains("hunter2"), "the password shows: {err}");
        assert!(!env.socket.exists(), "nothing listens");
        assert!(!env.home.join("projects").exists(), "nothing created");
    }

    // A server nobody runs: the daemon starts and says so; a change fails as unavailable,
    // naming the server, and nothing is recorded.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .expect("a free port")
        .port();
    env.write_config(&format!(
        "database_url = \"postgres://maos@127.0.0.1:{port}/maos\"\n"
    ));
    env.maos_json(&["daemon", "start"]);
    let status = env.maos_json(&["daemon", "status"]);
    assert_eq!(status["backend"]["engine"], "postgres", "{status}");
    assert!(status["backend"]["error"].as_str().is_some(), "{status}");
    let doctor = env.maos(&["doctor"]);
    let text = String::from_utf8_lossy(&doctor.stdout).to_string();
    assert!(text.contains("NOT ANSWERING"), "{text}");
    let f = env.maos_fail(&["session", "create", "--objective", "x"]);
    assert_eq!(f.code, "unavailable", "{f:?}");
    assert!(f.message.contains(&format!("127.0.0.1:{port}")), "{f:?}");
    assert!(!f.message.contains('\n'), "{f:?}");
    assert!(!Path::new(&env.db_path()).exists());
}

/// Until daemons share a project (stage 3), a second daemon is refused the project in one line
/// naming the one that has it, and takes it over once that one's connection is gone; the first
/// can then commit nothing on top of what it no longer knows.
#[test]
fn a_second_daemon_is_refused_a_project_another_has_until_that_one_dies() {
    let Some(pg) = postgres_or_skip() else { return };
    let first = fleet_env(&pg);
    let second = fleet_env(&pg);
    for env in [&first, &second] {
        std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
        std::fs::write(
            env.project.join(".maos/config.toml"),
            "project = \"acme/shared\"\n",
        )
        .expect("write");
    }
    let session = first.session("shared", &[]);
    let f = second.maos_fail(&["session", "create", "--objective", "second"]);
    assert_eq!(f.code, "unavailable", "{f:?}");
    assert!(
        f.message.contains("acme/shared")
            && f.message.contains(first.project.to_str().expect("utf-8")),
        "names the project and where it is open: {f:?}"
    );
    first.kill9();
    // The killed daemon's connection, and with it the project, goes at once.
    let shown = second.maos_json(&["session", "show", &session]);
    assert_eq!(
        shown["id"],
        session.as_str(),
        "the second daemon has the first's session"
    );
}

/// A daemon on another machine (another `MAOS_HOME`, another clone) that never recorded
/// anything for the project reads it from PostgreSQL: `maos ps` there shows the sessions; in a
/// directory with no key `ps` has nothing to show and says no error.
#[test]
fn a_new_clone_on_another_daemon_sees_the_sessions_the_fleet_has() {
    let Some(pg) = postgres_or_skip() else { return };
    let first = fleet_env(&pg);
    let second = fleet_env(&pg);
    for env in [&first, &second] {
        std::fs::create_dir_all(env.project.join(".maos")).expect(".maos");
        std::fs::write(
            env.project.join(".maos/config.toml"),
            "project = \"acme/seen\"\n",
        )
        .expect("write");
    }
    let session = first.session("seen elsewhere", &[]);
    first.maos_json(&["daemon", "stop"]);
    let ps = second.maos_json(&["ps"]);
    assert_eq!(ps[0]["id"], session.as_str(), "{ps}");
    let loose = second.root().join("loose");
    std::fs::create_dir_all(loose.join(".git")).expect("dir");
    assert_eq!(second.maos_json_in(&loose, &["ps"]), serde_json::json!([]));
}
