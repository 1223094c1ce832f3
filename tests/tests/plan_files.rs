//! Issue 35's plan rule, end to end: agents whose declared `files` overlap do not run at once
//! (unless one says `overlap = "allow"`), the waiting agent says why in `ps` and on the
//! timeline and starts when the other ends; `land` commands run as landing agents after their
//! agent completed, one at a time under `[landing] serialise = "all"`; wrong keys are refused
//! with file, line and column. Agents are small shell scripts that wait for a file the test
//! creates, so what runs at once is decided by the test, never by timing.

use std::path::{Path, PathBuf};
use std::time::Duration;

use maos_tests::{Env, wait_until};
use serde_json::Value;

const SLOW: Duration = Duration::from_secs(30);

fn plan(env: &Env, text: &str) -> PathBuf {
    let path = env.project.join("plan.toml");
    std::fs::write(&path, text).expect("write plan");
    path
}

/// `maos run PLAN`: the session's id.
fn run(env: &Env, plan: &Path) -> String {
    env.create(&["run", plan.to_str().expect("utf-8 path")])
}

fn session(env: &Env, sid: &str) -> Value {
    env.maos_json(&["session", "show", sid])
}

fn agent(s: &Value, name: &str) -> Value {
    s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .find(|a| a["spec"]["name"] == name)
        .cloned()
        .unwrap_or_else(|| panic!("no agent {name} in {s}"))
}

fn state_of(env: &Env, sid: &str, name: &str) -> String {
    agent(&session(env, sid), name)["state"]
        .as_str()
        .unwrap_or_default()
        .to_string()
}

fn wait_agent(env: &Env, sid: &str, name: &str, state: &str) {
    wait_until(SLOW, &format!("agent {name} is {state}"), || {
        state_of(env, sid, name) == state
    });
}

/// A script that waits for `release-NAME` in the project, then appends `end NAME` to `log`.
fn gated(env: &Env, name: &str) -> String {
    let dir = env.project.display();
    format!(
        "echo start {name} >> {dir}/log; while [ ! -e {dir}/release-{name} ]; do sleep 0.05; done; echo end {name} >> {dir}/log"
    )
}

fn release(env: &Env, name: &str) {
    std::fs::write(env.project.join(format!("release-{name}")), "").expect("release");
}

fn entry(name: &str, extra: &str, script: &str) -> String {
    format!(
        "[[agent]]\nname = \"{name}\"\ntask = \"task of {name}\"\ncommand = [\"sh\", \"-c\", {script:?}]\n{extra}\n"
    )
}

fn log(env: &Env) -> Vec<String> {
    std::fs::read_to_string(env.project.join("log"))
        .unwrap_or_default()
        .lines()
        .map(str::to_string)
        .collect()
}

#[test]
fn agents_whose_files_overlap_wait_for_each_other_unless_allowed() {
    let env = Env::new();
    let mut text = "objective = \"files\"\nstrategy = \"parallel\"\n".to_string();
    text += &entry("api", "files = [\"src/api.rs\"]", &gated(&env, "api"));
    text += &entry("net", "files = [\"src/**\"]", &gated(&env, "net"));
    text += &entry("docs", "files = [\"docs/**\"]", &gated(&env, "docs"));
    text += &entry(
        "hotfix",
        "files = [\"src/api.rs\"]\noverlap = \"allow\"",
        &gated(&env, "hotfix"),
    );
    let sid = run(&env, &plan(&env, &text));

    // api, docs and hotfix (which allows overlap) run; net waits for api.
    for n in ["api", "docs", "hotfix"] {
        wait_agent(&env, &sid, n, "running");
    }
    let s = session(&env, &sid);
    let net = agent(&s, "net");
    assert_eq!(net["state"], "pending", "{s}");
    assert_eq!(net["held"]["by"], agent(&s, "api")["id"], "{net}");
    assert_eq!(net["held"]["reason"], "its files overlap api's (src/**)");

    // Visible in ps (table and JSON) and on the timeline.
    let ps = env.maos(&["ps"]);
    let text_ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        text_ps.contains("waits: its files overlap api's (src/**)"),
        "{text_ps}"
    );
    let ps = env.maos_json(&["ps"]);
    let held = ps
        .as_array()
        .and_then(|ss| ss.first())
        .and_then(|s| s["agents"].as_array())
        .and_then(|a| a.iter().find(|a| a["plan"]["name"] == "net"))
        .map(|a| a["plan"]["held"].clone())
        .unwrap_or_default();
    assert_eq!(held["name"], "api", "{ps}");
    let brief = env.maos(&["brief", sid.as_str()]);
    let brief = String::from_utf8_lossy(&brief.stdout);
    assert!(
        brief.contains("task of net — waits: its files overlap api's (src/**)"),
        "{brief}"
    );
    let waiting = env.events(&[sid.as_str(), "--type", "agent_waiting"]);
    assert_eq!(
        waiting.len(),
        1,
        "one event, not one per scheduling: {waiting:?}"
    );
    assert_eq!(waiting[0]["agent_id"], net["id"]);
    assert_eq!(waiting[0]["data"]["name"], "api");
    // The plan's overlaps are on its plan_loaded event.
    let loaded = env.events(&[sid.as_str(), "--type", "plan_loaded"]);
    let overlaps = &loaded[0]["data"]["overlaps"];
    assert_eq!(overlaps.as_array().map(Vec::len), Some(3), "{overlaps}");
    assert_eq!(overlaps[0]["a"], "api");
    assert_eq!(overlaps[0]["b"], "net");
    assert_eq!(overlaps[0]["allowed"], false);

    // Still waiting while the others end; starts once api ended.
    release(&env, "docs");
    release(&env, "hotfix");
    wait_agent(&env, &sid, "hotfix", "completed");
    assert_eq!(state_of(&env, &sid, "net"), "pending");
    release(&env, "api");
    wait_agent(&env, &sid, "net", "running");
    let s = session(&env, &sid);
    assert!(agent(&s, "net").get("held").is_none(), "{s}");
    release(&env, "net");
    wait_until(SLOW, "the session completed", || {
        session(&env, &sid)["state"] == "completed"
    });
    // net never ran while api did: api's end is logged before net's start.
    let log = log(&env);
    let at = |line: &str| log.iter().position(|l| l == line);
    assert!(at("end api") < at("start net"), "{log:?}");
}

#[test]
fn landings_run_after_their_agent_one_at_a_time_in_plan_order() {
    let env = Env::new();
    let dir = env.project.display().to_string();
    let mut text =
        "objective = \"land\"\nstrategy = \"parallel\"\n\n[landing]\nserialise = \"all\"\n\n"
            .to_string();
    for n in ["a", "b"] {
        // The landing sees the agent's name through {name}, in the agent's workdir.
        let land = format!(
            "land = [\"sh\", \"-c\", \"echo start land-$0 $(pwd) >> {dir}/log; while [ ! -e {dir}/release-land-$0 ]; do sleep 0.05; done; echo end land-$0 >> {dir}/log\", \"{{name}}\"]"
        );
        text += &entry(n, &format!("files = [\"{n}/**\"]\n{land}"), &gated(&env, n));
    }
    let sid = run(&env, &plan(&env, &text));
    let s = session(&env, &sid);
    let names: Vec<&str> = s["agents"]
        .as_array()
        .expect("agents")
        .iter()
        .filter_map(|a| a["spec"]["name"].as_str())
        .collect();
    assert_eq!(names, ["a", "a.land", "b", "b.land"]);

    wait_agent(&env, &sid, "a", "running");
    wait_agent(&env, &sid, "b", "running");
    assert_eq!(state_of(&env, &sid, "a.land"), "pending", "waits for a");
    // b completes first: its landing starts at once.
    release(&env, "b");
    wait_agent(&env, &sid, "b.land", "running");
    release(&env, "a");
    wait_agent(&env, &sid, "a", "completed");
    // a.land is ready but b.land lands: held, saying so.
    wait_until(SLOW, "a.land held by b.land", || {
        agent(&session(&env, &sid), "a.land")["held"]["name"] == "b.land"
    });
    let s = session(&env, &sid);
    assert_eq!(
        agent(&s, "a.land")["held"]["reason"],
        "landings run one at a time: b.land lands first"
    );
    assert_eq!(agent(&s, "a.land")["state"], "pending");
    release(&env, "land-b");
    wait_agent(&env, &sid, "a.land", "running");
    release(&env, "land-a");
    wait_until(SLOW, "the session completed", || {
        session(&env, &sid)["state"] == "completed"
    });
    let log = log(&env);
    let at = |prefix: &str| log.iter().position(|l| l.starts_with(prefix));
    assert!(at("end b") < at("start land-b"), "{log:?}");
    assert!(at("end land-b") < at("start land-a"), "{log:?}");
    assert!(at("end a") < at("start land-a"), "{log:?}");
    let project = std::fs::canonicalize(&env.project).expect("project");
    assert!(
        log.contains(&format!("start land-a {}", project.display())),
        "ran in the agent's workdir with {{name}} = a: {log:?}"
    );
}

#[test]
fn wrong_files_overlap_and_landing_keys_are_refused_with_their_position() {
    let env = Env::new();
    let base = "objective = \"o\"\n[[agent]]\nname = \"a\"\ntask = \"t\"\ncommand = [\"true\"]\n";
    for (extra, at, says) in [
        ("files = [\"../x\"]", ":6:10:", "contains '..'"),
        ("files = [\"/etc\"]", ":6:10:", "is absolute"),
        ("files = \"src\"", ":6:9:", "must be an array of strings"),
        ("overlap = \"never\"", ":6:11:", "unknown overlap \"never\""),
        ("land = []", ":6:8:", "land is empty"),
        (
            "[landing]\nserialise = \"some\"",
            ":7:13:",
            "unknown [landing] serialise",
        ),
    ] {
        let path = plan(&env, &format!("{base}{extra}\n"));
        let f = env.maos_fail(&["run", path.to_str().expect("utf-8")]);
        assert!(
            f.message.contains(&format!("plan.toml{at}")) && f.message.contains(says),
            "{extra}: {}",
            f.message
        );
    }
    // Nothing was created.
    let ps = env.maos_json(&["ps", "--all"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(0), "{ps}");
}

#[test]
fn run_check_reports_overlaps_without_running_anything() {
    let env = Env::new();
    let mut text = "objective = \"check\"\nstrategy = \"adaptive\"\n".to_string();
    text += &entry(
        "api",
        "files = [\"src/api.rs\"]\nland = [\"true\"]",
        "exit 0",
    );
    text += &entry("net", "files = [\"src/**\"]", "exit 0");
    text += &entry(
        "docs",
        "files = [\"docs/**\", \"src/api.rs\"]\noverlap = \"allow\"",
        "exit 0",
    );
    text += &entry("tests", "files = [\"tests/**\"]", "exit 0");
    let path = plan(&env, &text);
    let p = path.to_str().expect("utf-8");
    let out = env.maos(&["run", "--check", p]);
    assert!(out.status.success(), "{out:?}");
    let shown = String::from_utf8_lossy(&out.stdout);
    assert!(
        shown.contains("a valid plan (4 agents, and 1 landing agent maos adds)"),
        "{shown}"
    );
    assert!(
        shown.contains("api and net declare overlapping files (src/api.rs / src/**): they will not run at the same time"),
        "{shown}"
    );
    assert!(
        shown.contains("api and docs declare overlapping files (src/api.rs): they may run at the same time (overlap = \"allow\")"),
        "{shown}"
    );
    assert!(!shown.contains("tests and"), "{shown}");
    let v = env.maos_json(&["run", "--check", p]);
    assert_eq!(v["overlaps"].as_array().map(Vec::len), Some(3), "{v}");
    assert_eq!(v["landings"], 1);
    // A wrong plan: file, line, column; exit 1.
    let bad = plan(
        &env,
        &format!("{text}[landing]\nserialise = \"sometimes\"\n"),
    );
    let f = env.maos_fail(&["run", "--check", bad.to_str().expect("utf-8")]);
    assert_eq!(f.exit, 1);
    assert!(
        f.message.contains("plan.toml:")
            && f.message
                .contains("unknown [landing] serialise \"sometimes\""),
        "{}",
        f.message
    );
    // Nothing ran: no session.
    let ps = env.maos_json(&["ps", "--all"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(0), "{ps}");
}

/// Declared files that would cost too much to compare: each pattern within its bounds (a name
/// of 210 bytes, 8 `*`), but ~46,000 product-automaton steps a pair, and 8 agents of 64 make
/// 114,688 pairs. Before the budget, `maos run` of such a plan held the project's actor for
/// the whole comparison (5 billion steps: minutes), and every other request of the project
/// waited; now `maos run` and `maos import` refuse it in one line naming the limit, nothing is
/// made, and the project answers its next request at once.
#[test]
fn files_too_costly_to_compare_are_refused_and_the_project_answers() {
    let env = Env::new();
    let costly = |i: usize| -> Vec<String> {
        (0..64)
            .map(|k| format!("*{}{}{i}x{k:02}", "a*".repeat(7), "a".repeat(196)))
            .collect()
    };
    let mut text = "objective = \"costly\"\n".to_string();
    for i in 0..8 {
        text += &entry(
            &format!("a{i}"),
            &format!("files = {:?}", costly(i)),
            "exit 0",
        );
    }
    let path = plan(&env, &text);
    let p = path.to_str().expect("utf-8");
    let says = |message: &str| {
        assert!(
            message.contains("plan.toml: comparing every two agents' declared files would take more than 8000000 steps (the limit; agent \"a1\"'s files bring it over): declare fewer patterns, or patterns with fewer wildcards")
                && !message.contains('\n'),
            "{message}"
        );
    };
    // (`maos run --check` says the same: maos_core's Plan::overlaps, unit-tested; each refusal
    // costs the budget's 8 million steps, seconds in a debug build.)
    let f = env.maos_fail(&["run", p]);
    assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"));
    says(&f.message);
    // The project answers, and nothing was made.
    let ps = env.maos_json(&["ps", "--all"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(0), "{ps}");

    // The same files in a session's export: `maos import` refuses them the same way.
    let cheap = text.replace("a*a*a*a*a*a*a*", "");
    let cheap = plan(&env, &cheap.replace(&"a".repeat(196), ""));
    let sid = env.create(&[
        "session",
        "create",
        "--plan",
        cheap.to_str().expect("utf-8"),
    ]);
    let file = env.root().join("costly.json");
    let out = env.maos(&["export", &sid, "-o", file.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let mut v: Value =
        serde_json::from_str(&std::fs::read_to_string(&file).expect("read")).expect("json");
    let agents = v["session"]["agents"].as_array_mut().expect("agents");
    assert_eq!(agents.len(), 8);
    for (i, a) in agents.iter_mut().enumerate() {
        a["spec"]["files"] = serde_json::json!(costly(i));
    }
    std::fs::write(&file, v.to_string()).expect("write");
    let other = env.make_project("other");
    let f = env.maos_fail_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert_eq!((f.exit, f.code.as_str()), (1, "bad_request"));
    assert!(
        f.message.contains("costly.json: comparing every two agents' declared files would take more than 8000000 steps")
            && !f.message.contains('\n'),
        "{}",
        f.message
    );
    let ps = env.maos_json_in(&other, &["ps", "--all"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(0), "{ps}");
    // A failed session runs again on `maos retry`: its files are checked as a live one's.
    v["session"]["state"] = serde_json::json!("failed");
    std::fs::write(&file, v.to_string()).expect("write");
    let f = env.maos_fail_in(&other, &["import", file.to_str().expect("utf-8")]);
    assert_eq!(
        (f.exit, f.code.as_str()),
        (1, "bad_request"),
        "{}",
        f.message
    );
    assert!(
        f.message.contains("would take more than 8000000 steps"),
        "{}",
        f.message
    );
    let ps = env.maos_json_in(&other, &["ps", "--all"]);
    assert_eq!(ps.as_array().map(Vec::len), Some(0), "{ps}");
}
