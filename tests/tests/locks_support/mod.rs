//! What the lock tests (`locks*.rs`) share: setting up agents and driving `maos lock`.
#![allow(dead_code)] // each test binary uses its own subset

use maos_tests::{Background, DEADLINE, Env, Failure, Value, wait_until};

/// A session with one agent per role, registered in this order (so the first is the oldest).
pub fn setup(roles: &[&str]) -> (Env, Vec<String>) {
    let env = Env::new();
    env.session("locks", &[]);
    let agents = roles.iter().map(|r| env.agent(None, r, "work")).collect();
    (env, agents)
}

/// `maos --json lock acquire PATH --agent AGENT EXTRA...`, which must be granted.
pub fn acquire(env: &Env, agent: &str, path: &str, extra: &[&str]) -> Value {
    let mut args = vec!["lock", "acquire", path, "--agent", agent];
    args.extend_from_slice(extra);
    env.maos_json(&args)
}

/// The same, which must be refused.
pub fn refused(env: &Env, agent: &str, path: &str, extra: &[&str]) -> Failure {
    let mut args = vec!["lock", "acquire", path, "--agent", agent];
    args.extend_from_slice(extra);
    env.maos_fail(&args)
}

/// `maos --json lock acquire ...` in the background (for requests that wait).
pub fn acquire_bg(env: &Env, agent: &str, path: &str, extra: &[&str]) -> Background {
    let mut args = vec!["--json", "lock", "acquire", path, "--agent", agent];
    args.extend_from_slice(extra);
    env.spawn_maos(&args)
}

/// `maos --json lock check PATH ARGS...` on a path that is blocked: it exits 1 and prints its
/// report (who blocks it), which is returned.
pub fn check_blocked(env: &Env, path: &str, extra: &[&str]) -> Value {
    let mut args = vec!["--json", "lock", "check", path];
    args.extend_from_slice(extra);
    let out = env.maos(&args);
    assert_eq!(
        out.status.code(),
        Some(1),
        "lock check of a blocked path exits 1: {}",
        maos_tests::describe(&out)
    );
    let v: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "lock check printed no JSON report ({e}): {}",
            maos_tests::describe(&out)
        )
    });
    assert_eq!(v["blocked"], true, "{v}");
    v
}

pub fn list(env: &Env) -> Value {
    env.maos_json(&["lock", "list"])
}

/// (holder, path, mode, token) of every held lock, as `lock list` shows them.
pub fn held(env: &Env) -> Vec<(String, String, String, u64)> {
    list(env)["locks"]
        .as_array()
        .expect("locks array")
        .iter()
        .map(|l| {
            (
                l["holder"].as_str().unwrap().to_string(),
                l["path"].as_str().unwrap().to_string(),
                l["mode"].as_str().unwrap().to_string(),
                l["token"].as_u64().unwrap(),
            )
        })
        .collect()
}

/// (agent, path) of every queued request, in queue order.
pub fn waiters(env: &Env) -> Vec<(String, String)> {
    list(env)["waiters"]
        .as_array()
        .expect("waiters array")
        .iter()
        .map(|w| {
            (
                w["agent"].as_str().unwrap().to_string(),
                w["path"].as_str().unwrap().to_string(),
            )
        })
        .collect()
}

/// Wait until `agent`'s request for `path` is parked in the daemon's queue.
pub fn wait_queued(env: &Env, agent: &str, path: &str) {
    wait_until(DEADLINE, &format!("{agent} is queued for {path}"), || {
        waiters(env).contains(&(agent.to_string(), path.to_string()))
    });
}

/// How messages name an agent: "agt_1a2b3c4d".
pub fn short(id: &str) -> &str {
    maos_core::ids::short(id)
}

pub fn token(v: &Value) -> u64 {
    v["token"]
        .as_u64()
        .unwrap_or_else(|| panic!("no token in {v}"))
}
