//! Phases, checkpoints, retries and pause/resume at every level, through the CLI.

use maos_tests::{Env, Value};

/// `status --json` → (k, n) of "phase k/n".
fn position(env: &Env) -> (u64, u64) {
    let st = env.maos_json(&["status"]);
    let p = &st["progress"]["phase"];
    (p[0].as_u64().unwrap(), p[1].as_u64().unwrap())
}

fn phase(s: &Value, i: usize) -> &Value {
    &s["workflow"]["phases"][i]
}

/// The newest event of `kind` in the default project.
fn last_event(env: &Env, kind: &str) -> Value {
    env.events(&["--type", kind])
        .pop()
        .unwrap_or_else(|| panic!("no {kind} event"))
}

#[test]
fn walking_every_phase_completes_the_session_and_k_never_exceeds_n() {
    let env = Env::new();
    let names = ["plan", "build", "verify"];
    let sid = env.session("walk", &names);
    env.maos_json(&["session", "start"]);
    assert_eq!(position(&env), (1, 3));

    for (i, name) in names.iter().enumerate() {
        let s = env.maos_json(&["phase", "start"]);
        assert_eq!(phase(&s, i)["name"], *name);
        assert_eq!(phase(&s, i)["state"], "running");
        assert_eq!(position(&env), (i as u64 + 1, 3));
        let artifacts = format!(r#"{{"phase": "{name}", "commands": ["cargo test"]}}"#);
        let s = env.maos_json(&["phase", "complete", "--artifacts", &artifacts]);
        assert_eq!(phase(&s, i)["state"], "completed");
        assert_eq!(phase(&s, i)["result"], "passed");
        assert_eq!(phase(&s, i)["artifacts"]["phase"], *name);
        let (k, n) = position(&env);
        assert!(k <= n, "phase {k}/{n}");
        // Every phase event carries a position inside the workflow.
        for e in env.events(&[]) {
            if let Some(p) = e["data"]["position"].as_array() {
                assert!(p[0].as_u64() <= p[1].as_u64(), "{e}");
            }
        }
    }

    let s = env.maos_json(&["session", "show"]);
    assert_eq!(s["id"], sid.as_str());
    assert_eq!(
        s["state"], "completed",
        "completing the last phase completes the session"
    );
    assert!(s["workflow"]["completed_at"].is_string());
    assert!(s["ended_at"].is_string());
    assert_eq!(position(&env), (3, 3), "never 4/3");
    let kinds: Vec<String> = env
        .events(&[])
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .collect();
    let tail = &kinds[kinds.len() - 3..];
    assert_eq!(
        tail,
        ["phase_completed", "workflow_completed", "session_completed"]
    );

    // Nothing more to start.
    let f = env.maos_fail(&["phase", "start"]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{f:?}"
    );
}

#[test]
fn a_failed_checkpoint_is_retried_and_phases_are_named_by_1_based_number() {
    let env = Env::new();
    env.session("retry", &["build", "test"]);
    env.maos_json(&["session", "start"]);

    // "1" is the first phase (1-based).
    let s = env.maos_json(&["phase", "start", "1"]);
    assert_eq!(phase(&s, 0)["state"], "running");
    assert_eq!(phase(&s, 0)["attempts"], 1);
    let red = r#"{"error": "red"}"#;
    let s = env.maos_json(&["phase", "complete", "1", "--failed", "--artifacts", red]);
    assert_eq!(phase(&s, 0)["state"], "failed");
    assert_eq!(phase(&s, 0)["result"], "failed");
    assert_eq!(
        s["state"], "running",
        "a failed checkpoint does not end the session"
    );
    assert!(
        s["errors"][0]["message"]
            .as_str()
            .unwrap()
            .contains("build"),
        "the failure is recorded: {}",
        s["errors"]
    );
    assert_eq!(last_event(&env, "phase_failed")["data"]["attempt"], 1);
    assert_eq!(
        position(&env),
        (1, 2),
        "a failed phase is still the current one"
    );

    // The second phase cannot start before the first passed.
    let f = env.maos_fail(&["phase", "start", "2"]);
    assert_eq!(f.code, "invalid_transition", "{f:?}");
    // Out of range and unknown names are not found.
    assert_eq!(env.maos_fail(&["phase", "start", "3"]).code, "not_found");
    assert_eq!(
        env.maos_fail(&["phase", "start", "deploy"]).code,
        "not_found"
    );

    // Retry: attempt 2, then pass.
    let s = env.maos_json(&["phase", "start"]);
    assert_eq!(phase(&s, 0)["state"], "running");
    assert_eq!(phase(&s, 0)["attempts"], 2);
    let s = env.maos_json(&["phase", "complete"]);
    assert_eq!(phase(&s, 0)["result"], "passed");
    assert_eq!(last_event(&env, "phase_completed")["data"]["attempt"], 2);

    env.maos_json(&["phase", "start", "test"]);
    let s = env.maos_json(&["phase", "complete", "2"]);
    assert_eq!(phase(&s, 1)["state"], "completed");
    assert_eq!(s["state"], "completed");
    assert_eq!(position(&env), (2, 2));
}

#[test]
fn pause_and_resume_at_session_agent_and_phase_level() {
    let env = Env::new();
    let sid = env.session("pauses", &["build", "ship"]);
    env.maos_json(&["session", "start"]);
    let running = env.agent(None, "dev", "code");
    let waiting = env.agent(None, "qa", "test");
    env.maos_json(&["agent", "start", &running]);

    // Session level.
    let s = env.maos_json(&["pause", "--reason", "lunch break"]);
    assert_eq!(s["state"], "paused");
    assert_eq!(s["pause"]["reason"], "lunch break");
    assert_eq!(s["pause"]["by"], "e2e-tester");
    assert_eq!(s["pause"]["in_progress"], serde_json::json!([running]));
    let e = last_event(&env, "session_paused");
    assert_eq!(e["session_id"], sid.as_str());
    assert_eq!(e["data"]["reason"], "lunch break");

    // While paused, no agent starts and no phase moves; nothing is written.
    let before = env.events(&[]).len();
    let f = env.maos_fail(&["agent", "start", &waiting]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{f:?}"
    );
    assert!(f.message.contains("paused"), "{f:?}");
    assert_eq!(
        env.maos_fail(&["phase", "start"]).code,
        "invalid_transition"
    );
    assert_eq!(
        env.maos_fail(&["pause"]).code,
        "invalid_transition",
        "already paused"
    );
    assert_eq!(env.events(&[]).len(), before);

    let s = env.maos_json(&["resume"]);
    assert_eq!(s["state"], "running");
    assert_eq!(s["resume_count"], 1);
    assert!(s["pause"].is_null());
    assert_eq!(
        last_event(&env, "session_resumed")["data"]["resume_count"],
        1
    );
    env.maos_json(&["agent", "start", &waiting]);

    // Agent level: a flag on a running agent.
    // An agent-level change answers with the agent.
    let a = env.maos_json(&["pause", "--agent", &running, "--reason", "review"]);
    assert_eq!(a["id"], running.as_str());
    assert_eq!(
        (a["state"].as_str(), a["paused"].as_bool()),
        (Some("running"), Some(true))
    );
    let e = last_event(&env, "agent_paused");
    assert_eq!(
        (e["agent_id"].as_str(), e["data"]["reason"].as_str()),
        (Some(running.as_str()), Some("review"))
    );
    assert_eq!(
        env.maos_fail(&["pause", "--agent", &running]).code,
        "invalid_transition"
    );
    let a = env.maos_json(&["resume", "--agent", &running]);
    assert_eq!(
        (a["id"].as_str(), a["paused"].as_bool()),
        (Some(running.as_str()), Some(false))
    );
    let s = env.maos_json(&["session", "show"]);
    assert!(
        s["agents"]
            .as_array()
            .unwrap()
            .iter()
            .all(|a| a["paused"] == false)
    );
    assert_eq!(
        last_event(&env, "agent_resumed")["agent_id"],
        running.as_str()
    );

    // Phase level, by name and by number.
    let s = env.maos_json(&["pause", "--phase", "ship", "--reason", "freeze"]);
    assert_eq!(s["paused_phases"], serde_json::json!(["ship"]));
    let e = last_event(&env, "phase_paused");
    assert_eq!(
        (e["data"]["phase"].as_str(), e["data"]["reason"].as_str()),
        (Some("ship"), Some("freeze"))
    );
    let s = env.maos_json(&["resume", "--phase", "2"]);
    assert_eq!(s["paused_phases"], serde_json::json!([]));
    assert_eq!(last_event(&env, "phase_resumed")["data"]["phase"], "ship");
    assert_eq!(
        env.maos_fail(&["resume", "--phase", "ship"]).code,
        "invalid_transition"
    );

    // The timeline has every pause and resume, in order.
    let kinds: Vec<String> = env
        .events(&[&sid])
        .iter()
        .map(|e| e["type"].as_str().unwrap().to_string())
        .filter(|k| k.ends_with("_paused") || k.ends_with("_resumed"))
        .collect();
    assert_eq!(
        kinds,
        [
            "session_paused",
            "session_resumed",
            "agent_paused",
            "agent_resumed",
            "phase_paused",
            "phase_resumed"
        ]
    );
}

#[test]
fn a_live_sessions_plan_grows_by_an_explicit_checkpointed_phase() {
    let env = Env::new();
    let sid = env.session("grow", &["plan", "build"]);
    env.maos_json(&["session", "start"]);
    env.maos_json(&["phase", "start"]);
    env.maos_json(&["phase", "complete"]);
    assert_eq!(position(&env), (2, 2));

    let s = env.maos_json(&["phase", "add", "  verify "]);
    assert_eq!(phase(&s, 2)["name"], "verify");
    assert_eq!(phase(&s, 2)["state"], "planned");
    assert_eq!(position(&env), (2, 3), "k/n counts the new phase");
    let added = last_event(&env, "phase_added");
    assert_eq!(added["session_id"], sid.as_str());
    assert_eq!(added["data"]["phase"], "verify");
    assert_eq!(added["data"]["position"], maos_tests::json!([2, 3]));
    let reasons: Vec<String> = env.checkpoints(&sid).into_iter().map(|(r, _)| r).collect();
    assert!(
        reasons.iter().any(|r| r == "plan updated (phase added)"),
        "{reasons:?}"
    );

    // Refused in one line, nothing changed: a duplicate, an empty or overlong name.
    let before = (env.maos_json(&["session", "show"]), env.events(&[]).len());
    let long = "x".repeat(201);
    for (name, says) in [
        ("build", "already exists"),
        ("   ", "cannot be empty"),
        (long.as_str(), "the limit is 200"),
    ] {
        let f = env.maos_fail(&["phase", "add", name]);
        assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"), "{f:?}");
        assert!(f.message.contains(says), "{}", f.message);
        assert_eq!(f.stderr.trim().lines().count(), 1, "{}", f.stderr);
    }
    assert_eq!(
        (env.maos_json(&["session", "show"]), env.events(&[]).len()),
        before
    );

    // The new phase runs like the others, and completing it completes the session.
    env.maos_json(&["phase", "start"]);
    env.maos_json(&["phase", "complete"]);
    env.maos_json(&["phase", "start"]);
    let s = env.maos_json(&["phase", "complete", "verify"]);
    assert_eq!(s["state"], "completed");
    let f = env.maos_fail(&["phase", "add", "late", "--session", &sid]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{f:?}"
    );
    assert!(f.message.contains("plan does not change"), "{}", f.message);
}

#[test]
fn a_session_that_runs_a_plan_file_keeps_its_phases() {
    let env = Env::new();
    let plan = env.project.join("fixed.toml");
    std::fs::write(
        &plan,
        "objective = \"fixed\"\nphases = [\"one\"]\n[[agent]]\nname = \"a\"\ntask = \"t\"\n\
         phase = \"one\"\ncommand = [\"true\"]\n",
    )
    .expect("plan");
    let s = env.maos_json(&["session", "create", "--plan", plan.to_str().expect("utf-8")]);
    let sid = s["id"].as_str().expect("id").to_string();
    let f = env.maos_fail(&["phase", "add", "two", "--session", &sid]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "invalid_transition"),
        "{f:?}"
    );
    assert!(f.message.contains("runs a plan"), "{}", f.message);
    let phases = &env.maos_json(&["session", "show", &sid])["workflow"]["phases"];
    assert_eq!(phases.as_array().map(Vec::len), Some(1));
}
