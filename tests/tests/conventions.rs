//! The command line's conventions (issue 15), through the real `maos` and `maosd`: `--json`
//! only where a command prints JSON, one JSON shape convention (a list of records is an array,
//! an action prints the record it changed), the help's grouped command list.

use maos_tests::{Env, describe, json};

#[test]
fn json_is_refused_where_a_command_prints_none() {
    let env = Env::new();
    for (args, what) in [
        (&["--json", "completions", "bash"][..], "shell script"),
        (&["--json", "man"], "roff page"),
        (&["--json", "demo"], "tour for people"),
        (&["--json", "top"], "full-screen view"),
    ] {
        let f = env.maos_fail(&args[1..]);
        assert_eq!(f.exit, 2, "{args:?}: {}", f.message);
        assert_eq!(f.code, "bad_request");
        assert!(
            f.message.starts_with("--json does not apply here") && f.message.contains(what),
            "{args:?}: {}",
            f.message
        );
        assert_eq!(f.stderr.lines().count(), 1, "{}", f.stderr);
    }
    // Where it means something it still works: the pages written, as JSON.
    let dir = env.root().join("pages");
    let v = env.maos_json(&["man", "--dir", dir.to_str().expect("utf-8")]);
    assert!(v["pages"].as_array().is_some_and(|p| !p.is_empty()), "{v}");
    assert!(env.daemons().is_empty(), "none of these needs a daemon");
}

/// A typed `--project` where a command works on no project is refused in one line;
/// `MAOS_PROJECT` in the environment is not (it is set for every command alike).
#[test]
fn project_is_refused_where_a_command_works_on_no_project() {
    let env = Env::new();
    let project = env.project.to_str().expect("utf-8");
    for (args, what) in [
        (
            &["daemon", "status", "--project", project][..],
            "serves every project",
        ),
        (
            &["--project", project, "completions", "bash"],
            "command line",
        ),
        (&["--project", project, "man"], "command line"),
        (&["--project", project, "init"], "maos init DIR"),
    ] {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = env.maos_at(&env.project, &all);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {}", describe(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.starts_with("maos: --project does not apply here") && err.contains(what),
            "{args:?}: {err}"
        );
    }
    assert!(env.daemons().is_empty(), "nothing was started");
    let mut cmd = env.maos_cmd_at(&env.project, &["--json", "daemon", "start"]);
    cmd.env("MAOS_PROJECT", &env.project);
    let out = maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", describe(&out));
    env.maos_json(&["daemon", "stop"]);
}

#[test]
fn lists_are_arrays_and_actions_print_the_record_they_changed() {
    let env = Env::new();
    let sid = env.session("shapes", &[]);
    // A note is an action: the session it changed, its new note last (was `{"ok": true}`).
    let s = env.maos_json(&["note", "decision", "arrays for lists"]);
    assert_eq!(s["id"], json!(sid), "{s}");
    let notes = s["notes"].as_array().expect("notes");
    assert_eq!(notes.last().expect("a note")["text"], "arrays for lists");
    // Lists of one kind of record are arrays (recover's was `{"sessions": [...]}`).
    for args in [
        &["ps"][..],
        &["session", "list"],
        &["agent", "list"],
        &["history"],
        &["validate"],
        &["recover"],
    ] {
        let v = env.maos_json(args);
        assert!(v.is_array(), "{args:?} prints {v}");
    }
}

#[test]
fn the_help_lists_commands_in_groups_watching_first() {
    let env = Env::new();
    let out = env.maos(&["--help"]);
    assert!(out.status.success(), "{}", describe(&out));
    let help = String::from_utf8_lossy(&out.stdout);
    let at = |needle: &str| {
        help.find(needle)
            .unwrap_or_else(|| panic!("{needle:?} not in the help:\n{help}"))
    };
    assert!(at("Watch:\n  ps ") < at("Steer:\n"), "{help}");
    assert!(at("Steer:\n") < at("Keep and repair:\n"), "{help}");
    assert!(at("Keep and repair:\n") < at("Set up:\n"), "{help}");
    assert!(at("Set up:\n") < at("\n  daemon "), "{help}");
    assert!(!help.contains("Commands:"), "{help}");
}

/// Whether `text` at `at` reads `YYYY-MM-DD HH:MM:SS` (optionally `.mmm`) then ` UTC`.
fn utc_at(text: &str, at: usize) -> bool {
    let rest = &text[at..];
    let shape = |s: &str, pattern: &str| {
        s.len() >= pattern.len()
            && s.bytes().zip(pattern.bytes()).all(|(c, p)| match p {
                b'9' => c.is_ascii_digit(),
                p => c == p,
            })
    };
    shape(rest, "9999-99-99 99:99:99 UTC") || shape(rest, "9999-99-99 99:99:99.999 UTC")
}

/// Every time after `marker` in `text` is a dated, labelled UTC time.
fn times_after(text: &str, marker: &str) -> usize {
    let mut n = 0;
    for (i, _) in text.match_indices(marker) {
        assert!(
            utc_at(text, i + marker.len()),
            "not a labelled UTC time after {marker:?}: {text}"
        );
        n += 1;
    }
    n
}

/// Times are UTC, dated and labelled, never a bare clock time (issue 15): the lock conflict
/// said "since 10:01:02", a denial "since 10:01:02 UTC" without its date, `session show` and
/// `events` printed unlabelled times.
#[test]
fn times_are_dated_and_labelled_utc() {
    let env = Env::new();
    env.session("times", &[]);
    let a = env.agent(None, "holder", "t");
    let b = env.agent(None, "asker", "t");
    env.maos_json(&["lock", "acquire", "src/a.rs", "--agent", &a]);

    let f = env.maos_fail(&["lock", "acquire", "src/a.rs", "--agent", &b]);
    assert_eq!(f.code, "lock_conflict");
    assert_eq!(times_after(&f.message, ") since "), 1, "{}", f.message);

    let text = |args: &[&str]| {
        let out = env.maos(args);
        assert!(
            out.status.code().is_some_and(|c| c <= 1),
            "{}",
            describe(&out)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    };
    let check = text(&["lock", "check", "src/a.rs", "--agent", &b]);
    assert_eq!(times_after(&check, ") since "), 1, "{check}");
    let show = text(&["session", "show"]);
    assert_eq!(times_after(&show, "created    "), 1, "{show}");
    let events = text(&["events"]);
    let lines = events.lines().count();
    assert!(lines >= 4, "{events}");
    for line in events.lines() {
        // `   seq  TIME  type ...`
        let at = line.trim_start().find("  ").expect("columns") + line.len()
            - line.trim_start().len()
            + 2;
        assert!(utc_at(line, at), "{line}");
    }
    let lock = env.maos(&["lock", "acquire", "src/b.rs", "--agent", &a]);
    let said = String::from_utf8_lossy(&lock.stdout).into_owned();
    assert_eq!(times_after(&said, "lease until "), 1, "{said}");
}

/// `daemon status` counts in words that read right (it said "1 sessions").
#[test]
fn daemon_status_counts_a_single_session_in_the_singular() {
    let env = Env::new();
    env.session("one", &[]);
    let out = env.maos(&["daemon", "status"]);
    assert!(out.status.success(), "{}", describe(&out));
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(text.contains("(1 session, 1 live)"), "{text}");
}
