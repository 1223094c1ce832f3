//! `maos top` in a real terminal (tmux, 80×24): live from the daemon's event stream, keys that
//! pause, resume and cancel after a confirmation, a filter, the events of one agent, denials as
//! they happen, a daemon restart survived; and `maos ps --watch` with colour at a terminal only
//! (issue 15).

use maos_tests::tmux::Tmux;
use maos_tests::{Env, json};

fn short(id: &str) -> &str {
    id.get(..12).unwrap_or(id)
}

/// The screen's row that shows `id`.
fn row<'a>(screen: &'a str, id: &str) -> &'a str {
    screen
        .lines()
        .find(|l| l.contains(short(id)))
        .unwrap_or_else(|| panic!("no row for {id}:\n{screen}"))
}

fn ps_agent(env: &Env, id: &str) -> serde_json::Value {
    let ps = env.maos_json(&["ps", "--all"]);
    ps.as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["agents"].as_array().cloned().unwrap_or_default())
        .find(|a| a["id"] == id)
        .unwrap_or_else(|| panic!("no agent {id} in {ps}"))
}

#[test]
fn top_shows_the_project_live_and_steers_it_with_confirmation() {
    if !Tmux::available() {
        return;
    }
    let env = Env::new();
    let sid = env.session("Build the parser", &[]);
    env.maos_json(&["session", "start"]);
    let lead = env.agent(None, "lead", "leads the parser work");
    env.maos_json(&["agent", "start", &lead]);
    env.maos_json(&["lock", "acquire", "src/lexer.rs", "--agent", &lead]);
    let coder = env.create(&[
        "agent",
        "register",
        "--role",
        "coder",
        "--task",
        "writes the lexer",
        "--parent",
        &lead,
    ]);
    env.maos_json(&["agent", "start", &coder]);
    let _waits = env.spawn_maos(&[
        "lock",
        "acquire",
        "src/lexer.rs",
        "--agent",
        &coder,
        "--wait",
        "120s",
    ]);

    // In a shell that says how it exited, then stays.
    let maos = maos_tests::maos_bin().to_string_lossy().into_owned();
    let top = Tmux::start(
        &env,
        80,
        24,
        &[
            "sh",
            "-c",
            "\"$0\" top; echo \"[exit $?]\"; exec cat",
            &maos,
        ],
        &[],
    );
    let root = Env::project_root(&env.project);
    // Conditions on a whole frame: a capture may come in the middle of one being drawn.
    let screen = top.wait_for("the tree with what each agent does, and the keys", |s| {
        s.contains(short(&coder))
            && s.contains("waits for write src/lexer.rs")
            && s.lines().last().is_some_and(|l| l.contains("q quit"))
    });
    assert!(
        screen
            .lines()
            .next()
            .is_some_and(|l| l.contains(&root) && l.contains(" UTC")),
        "the header names the project and labels its clock:\n{screen}"
    );
    assert!(row(&screen, &lead).contains("lead"), "{screen}");
    assert!(
        screen.contains("no ETA"),
        "the selected session's ETA (none without phases):\n{screen}"
    );
    let last = screen.lines().last().unwrap_or_default();
    assert!(
        last.contains("q quit"),
        "the keys fit in 80 columns:\n{screen}"
    );
    assert_eq!(screen.lines().count(), 24, "{screen}");
    assert!(
        screen.lines().all(|l| l.chars().count() <= 80),
        "nothing wider than the terminal:\n{screen}"
    );
    let at = |s: &str, a: &str| {
        s.lines()
            .position(|l| l.contains(short(a)))
            .unwrap_or(usize::MAX)
    };
    assert!(
        at(&screen, &lead) < at(&screen, &coder),
        "the coder under its lead:\n{screen}"
    );

    // A new agent appears without a key pressed: the view follows the event stream.
    let tester = env.agent(None, "tester", "runs the tests");
    top.wait_for("the new agent", |s| s.contains(short(&tester)));

    // Select the lead (session, lead, ...) and pause it: asked first, then done.
    top.keys(&["Down", "p"]);
    let screen = top.wait_for("the confirmation", |s| s.contains("Pause agent"));
    assert!(
        screen.contains(short(&lead)),
        "it names the agent:\n{screen}"
    );
    assert!(!ps_agent(&env, &lead)["paused"].as_bool().unwrap_or(true));
    top.keys(&["n"]);
    top.wait_for("nothing done", |s| s.contains("nothing done"));
    assert_eq!(ps_agent(&env, &lead)["paused"], false, "'n' does nothing");
    top.keys(&["p"]);
    top.wait_for("the confirmation", |s| s.contains("Pause agent"));
    top.keys(&["y"]);
    top.wait_for("the lead paused", |s| row(s, &lead).contains("paused"));
    assert_eq!(ps_agent(&env, &lead)["paused"], true);
    let paused = env.events(&["--type", "agent_paused"]);
    assert!(
        paused[0]["data"]["reason"]
            .as_str()
            .is_some_and(|r| r.contains("maos top")),
        "{paused:?}"
    );
    top.keys(&["r"]);
    top.wait_for("the confirmation", |s| s.contains("Resume agent"));
    top.keys(&["y"]);
    top.wait_for("the lead running again", |s| {
        row(s, &lead).contains("running")
    });
    assert_eq!(ps_agent(&env, &lead)["paused"], false);

    // A denial appears in red as it happens: a Claude Code window writes the lead's file.
    let cwd = env.project.to_string_lossy().into_owned();
    let write = json!({"session_id": "w-top", "cwd": cwd, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": format!("{cwd}/src/lexer.rs"), "content": "x"}});
    let out = env.hook("claude", &write);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("deny"),
        "{}",
        maos_tests::describe(&out)
    );
    top.wait_for("the denial", |s| s.contains("tool_denied"));
    let colours = top.screen_with_colours();
    let denial = colours
        .lines()
        .find(|l| l.contains("tool_denied"))
        .unwrap_or_default();
    assert!(
        ["31m", "91m", "38;5;1m", "38;5;9m"]
            .iter()
            .any(|red| denial.contains(&format!("\x1b[{red}"))),
        "in red: {denial:?}"
    );
    // The refused window's NOW says it was refused, not as if it wrote the lead's file.
    let ps = env.maos_json(&["ps"]);
    let window = ps
        .as_array()
        .into_iter()
        .flatten()
        .flat_map(|s| s["agents"].as_array().cloned().unwrap_or_default())
        .find(|a| a["cli"] == "claude")
        .and_then(|a| a["id"].as_str().map(str::to_string))
        .unwrap_or_else(|| panic!("no window agent in {ps}"));
    top.wait_for("the window's NOW says denied", |s| {
        s.lines()
            .any(|l| l.contains(short(&window)) && l.contains("denied Write"))
    });

    // The filter: only what matches (and the tree above it).
    top.keys(&["/", "tester", "Enter"]);
    let screen = top.wait_for("the filter applied", |s| s.contains("matching \"tester\""));
    assert!(screen.contains(short(&tester)), "{screen}");
    assert!(
        !screen.contains(short(&coder)),
        "the coder is filtered out:\n{screen}"
    );
    top.keys(&["Escape"]);
    top.wait_for("the filter cleared", |s| s.contains(short(&coder)));

    // The events of the selected agent (the lead), then back.
    top.keys(&["Home", "Down", "e"]);
    let screen = top.wait_for("the lead's events", |s| s.contains("Events of agent"));
    assert!(
        screen.contains("agent_registered") && screen.contains("lock_acquired"),
        "{screen}"
    );
    assert!(
        !screen.contains("runs the tests"),
        "only the lead's:\n{screen}"
    );
    top.keys(&["Escape"]);
    top.wait_for("the table again", |s| s.contains(" Sessions "));

    // Cancel the session: asked first, then the agents are cancelled with it.
    top.keys(&["Home", "c"]);
    let screen = top.wait_for("the confirmation", |s| s.contains("Cancel session"));
    assert!(screen.contains(short(&sid)), "{screen}");
    top.keys(&["y"]);
    wait_state(&env, &sid, "cancelled");
    top.wait_for("the session cancelled on screen", |s| {
        row(s, &sid).contains("cancelled")
    });

    // q quits with exit code 0, and the terminal is the shell's again.
    top.keys(&["q"]);
    let screen = top.wait_for("maos top exits", |s| s.contains("[exit "));
    assert!(screen.contains("[exit 0]"), "{screen}");
    assert!(!screen.contains("Sessions"), "the view is gone:\n{screen}");
}

fn wait_state(env: &Env, sid: &str, state: &str) {
    maos_tests::wait_until(maos_tests::DEADLINE, &format!("session {state}"), || {
        let ps = env.maos_json(&["ps", "--all"]);
        ps.as_array()
            .into_iter()
            .flatten()
            .any(|s| s["id"] == sid && s["state"] == state)
    });
}

#[test]
fn top_says_when_the_daemon_is_gone_and_reconnects() {
    if !Tmux::available() {
        return;
    }
    let env = Env::new();
    env.session("restart", &[]);
    let top = Tmux::start(&env, 80, 24, &["maos", "top"], &[]);
    top.wait_for("the session", |s| s.contains("restart"));
    let out = env.maos(&["daemon", "stop"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let screen = top.wait_for("the loss said", |s| s.contains("daemon gone since"));
    assert!(
        screen.lines().next().is_some_and(|l| l.contains("UTC")),
        "{screen}"
    );
    // The view does not start a daemon of its own.
    assert!(env.pidfile_pid().is_none_or(|p| !maos_tests::alive(p)));
    let out = env.maos(&["daemon", "start"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    top.wait_for("the reconnection said", |s| {
        s.contains("reconnected to maosd")
    });
    // And it is live again: a new agent shows up.
    let a = env.agent(None, "after", "registered after the restart");
    top.wait_for("the new agent", |s| s.contains(short(&a)));
}

/// Every project the daemon has open, each under its root.
#[test]
fn top_all_projects_shows_each_project() {
    if !Tmux::available() {
        return;
    }
    let env = Env::new();
    env.session("in the first", &[]);
    let other = env.make_project("other");
    env.maos_json_in(
        &other,
        &["session", "create", "--objective", "in the other"],
    );
    let top = Tmux::start(&env, 100, 30, &["maos", "top", "--all-projects"], &[]);
    let screen = top.wait_for("both projects", |s| {
        s.contains("in the first") && s.contains("in the other")
    });
    assert!(screen.contains(&Env::project_root(&other)), "{screen}");
    assert!(screen.contains("2 projects"), "{screen}");
}

/// Not a terminal, a bad option, a missing project: one line and an exit code, nothing drawn.
#[test]
fn top_refuses_what_it_cannot_do_with_one_line() {
    let env = Env::new();
    let out = env.maos(&["top"]);
    assert_eq!(out.status.code(), Some(1), "{}", maos_tests::describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("needs a terminal") && err.contains("maos ps"),
        "{err}"
    );
    assert_eq!(err.lines().count(), 1, "{err}");
    assert!(out.stdout.is_empty());

    let out = env.maos(&["top", "--bogus"]);
    assert_eq!(out.status.code(), Some(2), "{}", maos_tests::describe(&out));

    let missing = env.root().join("nowhere");
    let out = env.maos_at(
        &env.project,
        &["top", "--project", &missing.to_string_lossy()],
    );
    assert_eq!(out.status.code(), Some(2), "{}", maos_tests::describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("does not exist"));
}

/// `maos ps --watch` redraws at a terminal, in colour; `NO_COLOR` turns the colour off.
#[test]
fn ps_watch_redraws_in_colour_unless_no_color() {
    if !Tmux::available() {
        return;
    }
    let env = Env::new();
    env.session("watched", &[]);
    env.maos_json(&["session", "start"]);
    let a = env.agent(None, "worker", "works");
    env.maos_json(&["agent", "start", &a]);
    let watch = Tmux::start(
        &env,
        120,
        30,
        &["maos", "ps", "--watch", "--interval", "200ms"],
        &[],
    );
    watch.wait_for("the agent", |s| s.contains(short(&a)));
    let b = env.agent(None, "later", "comes later");
    watch.wait_for("the redraw with the new agent", |s| s.contains(short(&b)));
    let colours = watch.screen_with_colours();
    assert!(
        colours.contains("\x1b["),
        "colour at a terminal:\n{colours}"
    );
    assert!(watch.screen().contains("every 200ms"), "{}", watch.screen());

    let plain = Tmux::start_named(
        &env,
        "plain",
        120,
        30,
        &["maos", "ps", "--watch", "--interval", "200ms"],
        &[("NO_COLOR", "1")],
    );
    let screen = plain.wait_for("ps printed", |s| s.contains(short(&a)));
    let colours = plain.screen_with_colours();
    assert!(
        !colours.contains("\x1b[3"),
        "NO_COLOR: no colour:\n{colours}\n{screen}"
    );
}
