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

    // Archived: gone from memory (`session list`, `ps`, `show`), kept in history and the
    // timeline, and still so after a crash.
    let archived = env.maos_json(&["session", "archive", &done[..13]]);
    assert_eq!(archived["id"], done.as_str());
    let listed = ids(&env.maos_json(&["session", "list", "--all"]));
    assert!(!listed.contains(&done), "{listed:?}");
    assert!(
        listed.contains(&cancelled) && listed.contains(&live),
        "{listed:?}"
    );
    assert!(!env.maos_json(&["ps", "--all"]).to_string().contains(&done));
    assert_eq!(env.maos_fail(&["session", "show", &done]).code, "not_found");
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
        out.status.success() && text.starts_with(&format!("archived session {cancelled}")),
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
