//! Sessions never see each other's agents or events, and projects never see each other's data.

use maos_tests::{Env, Value, argv, ids};

fn strs(events: &[Value], field: &str) -> Vec<String> {
    events
        .iter()
        .filter_map(|e| e[field].as_str().map(str::to_string))
        .collect()
}

#[test]
fn two_sessions_in_one_project_keep_their_agents_and_events_apart() {
    let env = Env::new();
    let a = env.session("session A", &[]);
    let b = env.session("session B", &[]);
    let a1 = env.agent(Some(&a), "dev", "a1");
    let a2 = env.agent(Some(&a), "dev", "a2");
    let b1 = env.agent(Some(&b), "dev", "b1");
    // Same role in both sessions: instances are counted per session.
    let list_a = env.maos_json(&["agent", "list", "--session", &a]);
    let list_b = env.maos_json(&["agent", "list", "--session", &b]);
    let mut want_a = vec![a1.clone(), a2.clone()];
    want_a.sort();
    assert_eq!(ids(&list_a), want_a);
    assert_eq!(ids(&list_b), vec![b1.clone()]);
    assert_eq!(
        list_b[0]["instance"], 1,
        "instance numbering is per session"
    );
    assert!(
        list_b
            .as_array()
            .unwrap()
            .iter()
            .all(|x| x["session_id"] == b.as_str())
    );

    // ps shows every session with only its own agents.
    let ps = env.maos_json(&["ps"]);
    for s in ps.as_array().unwrap() {
        let sid = s["id"].as_str().unwrap();
        let want = if sid == a {
            want_a.clone()
        } else {
            vec![b1.clone()]
        };
        assert_eq!(ids(&s["agents"]), want, "agents of {sid} in ps");
    }

    // Events filtered by session carry only that session's ids.
    for (sid, own, other) in [
        (&a, &want_a, vec![b1.clone()]),
        (&b, &vec![b1.clone()], want_a.clone()),
    ] {
        let events = env.events(&[sid]);
        assert!(!events.is_empty());
        assert!(
            strs(&events, "session_id").iter().all(|s| s == sid),
            "events of {sid} include another session's: {events:?}"
        );
        let agents = strs(&events, "agent_id");
        for x in own {
            assert!(
                agents.contains(x),
                "{x}'s registration is in {sid}'s timeline"
            );
        }
        for x in &other {
            assert!(!agents.contains(x), "{x} leaked into {sid}'s timeline");
        }
    }

    // An agent of B cannot be reached through session A.
    let f = env.maos_fail(&["pause", &a, "--agent", &b1]);
    assert_eq!((f.exit, f.code.as_str()), (1, "not_found"), "{f:?}");
    let f = env.maos_fail(&argv(&format!(
        "agent register --session {a} --role r --task t --depends-on {b1}"
    )));
    assert_eq!(
        f.code, "not_found",
        "a dependency must be in the same session: {f:?}"
    );
    // The refusals changed nothing.
    assert_eq!(
        ids(&env.maos_json(&["agent", "list", "--session", &a])),
        want_a
    );
}

#[test]
fn two_projects_never_see_each_others_sessions() {
    let env = Env::new();
    let p1 = env.project.clone();
    let p2 = env.make_project("other");
    let s1 = env.session("in project 1", &[]);
    let agent = env.agent(None, "dev", "t");
    env.maos_json(&["session", "start"]);

    let s2 = env.maos_json_in(&p2, &["session", "create", "--objective", "in project 2"])["id"]
        .as_str()
        .unwrap()
        .to_string();
    assert_eq!(
        ids(&env.maos_json_in(&p2, &["ps", "--all"])),
        vec![s2.clone()]
    );
    assert_eq!(
        ids(&env.maos_json_in(&p1, &["ps", "--all"])),
        vec![s1.clone()]
    );

    // Project 1's agent holds a lock there.
    env.maos_json_in(&p1, &["lock", "acquire", "src/a.rs", "--agent", &agent]);

    // Naming project 1's session or agent from project 2 finds nothing there: no read, no
    // change, no lock taken or released in its name.
    let in_p2 = |f: &str| p2.join(f).to_string_lossy().to_string();
    let (b2, a2) = (in_p2("src/b.rs"), in_p2("src/a.rs"));
    let cases: [&[&str]; 12] = [
        &["session", "show", &s1],
        &["status", &s1],
        &["events", &s1],
        &["agent", "list", "--session", &s1],
        &["agent", "complete", &agent],
        &["pause", &s1],
        &["lock", "acquire", &b2, "--agent", &agent],
        &["lock", "release", &a2, "--agent", &agent, "--force"],
        &["lock", "list", "--session", &s1],
        &["session", "archive", &s1],
        &["export", &s1],
        &["brief", &s1],
    ];
    for args in cases {
        let f = env.maos_fail_in(&p2, args);
        assert_eq!(
            (f.exit, f.code.as_str()),
            (1, "not_found"),
            "{args:?}: {f:?}"
        );
    }
    // Project 2's timeline holds only its own session; project 1's is untouched.
    let e2 = env.events_in(&p2, &[]);
    assert!(strs(&e2, "session_id").iter().all(|s| *s == s2), "{e2:?}");
    let e1 = env.events_in(&p1, &[]);
    assert!(strs(&e1, "session_id").iter().all(|s| *s == s1), "{e1:?}");
    assert_eq!(
        env.maos_json_in(&p1, &["session", "show", &s1])["state"],
        "running"
    );
    let locks = env.maos_json_in(&p1, &["lock", "list"]).to_string();
    assert!(
        locks.contains("src/a.rs") && !locks.contains("src/b.rs"),
        "{locks}"
    );

    // Two projects, two databases.
    assert_ne!(env.db_path_of(&p1), env.db_path_of(&p2));
    assert!(env.db_path_of(&p1).is_file() && env.db_path_of(&p2).is_file());
    let status = env.maos_json(&["daemon", "status"]);
    let roots: Vec<&str> = status["projects"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p["root"].as_str().unwrap())
        .collect();
    assert_eq!(roots.len(), 2, "{status}");
    assert!(roots.contains(&Env::project_root(&p1).as_str()));
    assert!(roots.contains(&Env::project_root(&p2).as_str()));
}
