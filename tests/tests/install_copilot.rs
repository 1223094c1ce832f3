//! `maos install-hooks --copilot`: GitHub Copilot CLI's hooks in `.github/hooks/maos.json` (or
//! the user's `~/.copilot/hooks/maos.json`), the project folder trusted in
//! `~/.copilot/config.json` only with consent (`--yes`), `doctor` judging both,
//! `uninstall-hooks --copilot` removing exactly what install added, and broken input refused
//! with nothing changed. Also `maos hook --cli copilot` fed Copilot's own input (shapes copied
//! from the real 1.0.102), including input it cannot read: Copilot denies a tool call on any
//! non-zero exit, so maos must exit 0 there.

use std::path::{Path, PathBuf};

use maos_tests::doctor::check;
use maos_tests::{Env, Value, json};

fn read(path: &Path) -> Value {
    serde_json::from_str(&std::fs::read_to_string(path).expect("file")).expect("JSON")
}

fn hooks_file(env: &Env) -> PathBuf {
    env.project.join(".github/hooks/maos.json")
}

/// Copilot's own settings in the test's HOME.
fn config(env: &Env) -> PathBuf {
    env.root().join("user/.copilot/config.json")
}

fn root(env: &Env) -> String {
    Env::project_root(&env.project)
}

/// `maos --json doctor`: (exit code, the GitHub Copilot CLI checks).
fn doctor(env: &Env) -> (Option<i32>, Vec<Value>) {
    let bin = maos_tests::maos_bin();
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    cmd.env("PATH", bin.parent().expect("bin dir"));
    let out = cmd.output().expect("maos doctor");
    let v: Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("{e}: {}", String::from_utf8_lossy(&out.stdout)));
    let checks = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| {
            c["check"]
                .as_str()
                .is_some_and(|n| n.starts_with("GitHub Copilot CLI"))
        })
        .cloned()
        .collect();
    (out.status.code(), checks)
}

/// Copilot's config.json as Copilot writes it: two comment lines, then the object.
const COPILOT_CONFIG: &str = "// User settings belong in settings.json.\n// This file is managed automatically.\n{\n  \"firstLaunchAt\": \"2026-11-28T18:20:24.639Z\",\n  \"trustedFolders\": [\"/somewhere/else\"]\n}\n";

/// With `--yes`: one entry per event Copilot 1.0.102 fires, each naming its event and the tool
/// events matched to the tools maos reads; a person's own entry in the same file kept; the
/// folder trusted next to the user's own folders, Copilot's comment lines kept; doctor content;
/// uninstall gives back both files as they were (the hooks file gone with maos's entries only
/// when nothing else is in it).
#[test]
fn install_with_yes_trusts_the_folder_and_uninstall_removes_exactly_that() {
    let env = Env::new();
    std::fs::create_dir_all(config(&env).parent().expect("dir")).expect("mkdir");
    std::fs::write(config(&env), COPILOT_CONFIG).expect("write");
    std::fs::create_dir_all(hooks_file(&env).parent().expect("dir")).expect("mkdir");
    let mine = json!({"version": 1, "hooks": {"errorOccurred": [
        {"type": "command", "bash": "notify-send oops", "timeoutSec": 5}]}});
    std::fs::write(hooks_file(&env), mine.to_string()).expect("write");

    let out = env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    let message = out["message"].as_str().expect("message");
    assert!(message.contains("trusted in"), "{message}");
    let v = read(&hooks_file(&env));
    assert_eq!(v["version"], 1);
    assert_eq!(v["hooks"]["errorOccurred"], mine["hooks"]["errorOccurred"]);
    let mut events: Vec<&String> = v["hooks"].as_object().expect("hooks").keys().collect();
    events.sort();
    assert_eq!(
        events,
        [
            "agentStop",
            "errorOccurred",
            "postToolUse",
            "preCompact",
            "preToolUse",
            "sessionEnd",
            "sessionStart",
            "subagentStart",
            "subagentStop",
            "userPromptSubmitted",
        ]
    );
    for (event, list) in v["hooks"].as_object().expect("hooks") {
        if event == "errorOccurred" {
            continue;
        }
        let [entry] = &list.as_array().expect("list")[..] else {
            panic!("not one entry for {event}: {list}")
        };
        assert_eq!(entry["bash"], "maos hook --cli copilot", "{entry}");
        assert_eq!(
            entry["env"]["MAOS_COPILOT_EVENT"],
            event.as_str(),
            "{entry}"
        );
        assert_eq!(entry["timeoutSec"], 10, "{entry}");
        let tools = matches!(event.as_str(), "preToolUse" | "postToolUse");
        assert_eq!(
            entry.get("matcher"),
            tools.then(|| json!("create|edit|bash|task")).as_ref(),
            "{entry}"
        );
    }
    let text = std::fs::read_to_string(config(&env)).expect("config.json");
    assert!(
        text.starts_with("// User settings belong in settings.json.\n"),
        "{text}"
    );
    let body: Value = serde_json::from_str(
        &text
            .lines()
            .filter(|l| !l.starts_with("//"))
            .collect::<Vec<_>>()
            .join("\n"),
    )
    .expect("config.json's object");
    assert_eq!(
        body["trustedFolders"],
        json!(["/somewhere/else", root(&env)])
    );
    assert_eq!(body["firstLaunchAt"], "2026-11-28T18:20:24.639Z");

    // Again: nothing changes.
    let again = env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    assert!(
        again["message"]
            .as_str()
            .is_some_and(|m| m.contains("already installed")),
        "{again}"
    );
    assert_eq!(std::fs::read_to_string(config(&env)).expect("config"), text);

    let (code, checks) = doctor(&env);
    let hooks = check(&checks, "GitHub Copilot CLI hooks");
    assert_eq!(hooks["level"], "ok", "{hooks}");
    let trust = check(&checks, "GitHub Copilot CLI trust");
    assert_eq!(trust["level"], "ok", "{trust}");
    assert!(code.is_some(), "{checks:?}");

    env.maos_json(&["uninstall-hooks", "--copilot"]);
    assert_eq!(read(&hooks_file(&env)), mine);
    assert_eq!(
        std::fs::read_to_string(config(&env)).expect("config"),
        COPILOT_CONFIG.replace(
            "  \"trustedFolders\": [\"/somewhere/else\"]\n",
            "  \"trustedFolders\": [\n    \"/somewhere/else\"\n  ]\n"
        )
    );
    let (_, checks) = doctor(&env);
    assert_eq!(check(&checks, "GitHub Copilot CLI hooks")["level"], "info");
    assert!(
        checks
            .iter()
            .all(|c| c["check"] != "GitHub Copilot CLI trust"),
        "{checks:?}"
    );
}

/// Install in a project with nothing of Copilot's: the hooks file and config.json are made;
/// uninstall leaves the project and HOME as they were (no `.github/`, no `.copilot/`).
#[test]
fn uninstall_leaves_no_trace_of_what_install_made() {
    let env = Env::new();
    env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    assert!(hooks_file(&env).exists());
    assert!(config(&env).exists());
    let out = env.maos_json(&["uninstall-hooks", "--copilot"]);
    let message = out["message"].as_str().expect("message");
    assert!(message.contains("no longer trusted"), "{message}");
    assert!(!env.project.join(".github").exists());
    assert!(!config(&env).exists());
    // Nothing left to remove: said, nothing changed.
    let out = env.maos_json(&["uninstall-hooks", "--copilot"]);
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains("no maos hooks")),
        "{out}"
    );
}

/// Without `--yes` and without a terminal: the hooks are written, the folder is not trusted,
/// one line says so and how to fix it; doctor fails naming the fix. `--user` installs into
/// `~/.copilot/hooks/` (which Copilot runs with no folder's trust) and asks for no trust.
#[test]
fn without_consent_the_folder_is_not_trusted_and_user_hooks_need_no_trust() {
    let env = Env::new();
    let out = env.maos(&["install-hooks", "--copilot"]);
    assert!(out.status.success(), "{out:?}");
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(
        said.contains("will not run these hooks")
            && said.contains("maos install-hooks --copilot --yes"),
        "{said}"
    );
    assert!(!config(&env).exists());
    let (code, checks) = doctor(&env);
    assert_eq!(code, Some(1), "{checks:?}");
    let trust = check(&checks, "GitHub Copilot CLI trust");
    assert_eq!(trust["level"], "fail", "{trust}");
    assert!(
        trust["detail"]
            .as_str()
            .is_some_and(|d| d.contains("maos install-hooks --copilot --yes")),
        "{trust}"
    );
    env.maos_json(&["uninstall-hooks", "--copilot"]);

    let out = env.maos_json(&["install-hooks", "--copilot", "--user"]);
    let user = env.root().join("user/.copilot/hooks/maos.json");
    assert!(
        out["message"]
            .as_str()
            .is_some_and(|m| m.contains(&*user.to_string_lossy()) && !m.contains("trust")),
        "{out}"
    );
    assert!(read(&user)["hooks"]["preToolUse"].is_array());
    assert!(!config(&env).exists());
    let (_, checks) = doctor(&env);
    assert_eq!(check(&checks, "GitHub Copilot CLI hooks")["level"], "ok");
    assert!(
        checks
            .iter()
            .all(|c| c["check"] != "GitHub Copilot CLI trust"),
        "{checks:?}"
    );
    env.maos_json(&["uninstall-hooks", "--copilot", "--user"]);
    assert!(!user.exists());
}

/// Broken input is refused with nothing changed: a hooks file that is not JSON, a
/// config.json whose `trustedFolders` is not a list.
#[test]
fn broken_files_are_refused_and_left_unchanged() {
    let env = Env::new();
    std::fs::create_dir_all(hooks_file(&env).parent().expect("dir")).expect("mkdir");
    std::fs::write(hooks_file(&env), "{not json").expect("write");
    let out = env.maos(&["install-hooks", "--copilot", "--yes"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("maos.json") && err.contains("not valid JSON"),
        "{err}"
    );
    assert_eq!(
        std::fs::read_to_string(hooks_file(&env)).expect("read"),
        "{not json"
    );
    assert!(!config(&env).exists());

    std::fs::remove_file(hooks_file(&env)).expect("rm");
    std::fs::create_dir_all(config(&env).parent().expect("dir")).expect("mkdir");
    std::fs::write(config(&env), "{\"trustedFolders\": \"/\"}").expect("write");
    let out = env.maos(&["install-hooks", "--copilot", "--yes"]);
    assert!(!out.status.success(), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("trustedFolders is not a list"), "{err}");
    assert!(!hooks_file(&env).exists());
    assert_eq!(
        std::fs::read_to_string(config(&env)).expect("read"),
        "{\"trustedFolders\": \"/\"}"
    );
}

/// `maos hook --cli copilot` with Copilot's own input: a create of a held file is denied in
/// Copilot's flat form (`permissionDecision`), exit 0; the window's prompt names it.
#[test]
fn the_hook_answers_copilots_input_in_copilots_terms() {
    let env = Env::new();
    env.session("hooks", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    let cwd = env.project.to_string_lossy().into_owned();
    let sid = "aaeebc7a-4c35-40e9-854c-8bf4800e3fe5";
    let prompt = json!({"sessionId": sid, "timestamp": 1, "cwd": cwd, "prompt": "tidy the notes"});
    let out = env.hook_at(
        &env.project,
        &["hook", "--cli", "copilot"],
        prompt.to_string().into_bytes(),
        &[("MAOS_COPILOT_EVENT", "userPromptSubmitted")],
        false,
    );
    assert!(out.status.success(), "{out:?}");
    let create = json!({"sessionId": sid, "timestamp": 2, "cwd": cwd, "toolName": "create",
                        "toolArgs": {"path": format!("{cwd}/held.txt"), "file_text": "x\n"}});
    let out = env.hook_at(
        &env.project,
        &["hook", "--cli", "copilot"],
        create.to_string().into_bytes(),
        &[("MAOS_COPILOT_EVENT", "preToolUse")],
        false,
    );
    assert!(out.status.success(), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an answer");
    assert_eq!(answer["permissionDecision"], "deny", "{answer}");
    let reason = answer["permissionDecisionReason"].as_str().expect("reason");
    assert!(
        reason.starts_with("maos: held.txt") && reason.contains(holder.get(..12).expect("id")),
        "{reason}"
    );
    assert!(answer.get("hookSpecificOutput").is_none(), "{answer}");
    let prompts = env.events(&["--type", "prompt_submitted"]);
    assert!(
        matches!(&prompts[..], [p] if p["data"]["first_line"] == "tidy the notes"),
        "{prompts:?}"
    );
}

/// Input maos cannot read (not JSON; a create that names no file) exits 0 with the reason on
/// stderr: Copilot denies a tool call on any non-zero exit (`hook errored`), and maos never
/// blocks a tool by accident. Claude Code's hook keeps its non-blocking exit 1.
#[test]
fn unreadable_input_exits_zero_for_copilot() {
    let env = Env::new();
    for input in [
        b"{not json".to_vec(),
        json!({"sessionId": "s", "toolName": "create", "toolArgs": {"file_text": "x"}})
            .to_string()
            .into_bytes(),
    ] {
        let out = env.hook_at(
            &env.project,
            &["hook", "--cli", "copilot"],
            input.clone(),
            &[("MAOS_COPILOT_EVENT", "preToolUse")],
            false,
        );
        assert_eq!(out.status.code(), Some(0), "{out:?}");
        assert!(out.stdout.is_empty(), "{out:?}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.starts_with("maos hook: "), "{err}");
        let claude = env.hook_at(&env.project, &["hook"], input, &[], false);
        assert_eq!(claude.status.code(), Some(1), "{claude:?}");
    }
}

/// No daemon to ask (and none may be started): the tool goes ahead (no output, exit 0);
/// with `MAOS_HOOK_FAIL=closed` it is denied in Copilot's form.
#[test]
fn with_the_daemon_unreachable_copilot_fails_open_unless_told_closed() {
    let env = Env::new();
    let cwd = env.project.to_string_lossy().into_owned();
    let create = json!({"sessionId": "s1", "cwd": cwd, "toolName": "create",
                        "toolArgs": {"path": format!("{cwd}/a.txt"), "file_text": "x\n"}});
    let vars = [
        ("MAOS_COPILOT_EVENT", "preToolUse"),
        ("MAOS_NO_AUTOSTART", "1"),
    ];
    let out = env.hook_at(
        &env.project,
        &["hook", "--cli", "copilot"],
        create.to_string().into_bytes(),
        &vars,
        false,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    assert!(out.stdout.is_empty(), "{out:?}");
    let closed = [
        ("MAOS_COPILOT_EVENT", "preToolUse"),
        ("MAOS_NO_AUTOSTART", "1"),
        ("MAOS_HOOK_FAIL", "closed"),
    ];
    let out = env.hook_at(
        &env.project,
        &["hook", "--cli", "copilot"],
        create.to_string().into_bytes(),
        &closed,
        false,
    );
    assert_eq!(out.status.code(), Some(0), "{out:?}");
    let answer: Value = serde_json::from_slice(&out.stdout).expect("an answer");
    assert_eq!(answer["permissionDecision"], "deny", "{answer}");
}

/// A subagent's subagent (Copilot's subagents have `task` too): its events name its parent
/// subagent as their session (`parentAgentId`; its `subagentStart` has a `sessionId` seen
/// nowhere else). Fed in the order Copilot 1.0.102 sent them, it is the window's, with the
/// task its parent subagent gave it, and no second window appears.
#[test]
fn a_subagents_subagent_is_the_windows_not_a_window_of_its_own() {
    let env = Env::new();
    let cwd = env.project.to_string_lossy().into_owned();
    let (root, child, nested) = (
        "9ac7b8fe-f321-4867-882b-3be41f1ebb2d",
        "c2b3b6ca-c186-4ddc-a644-d53645e83fe7",
        "e690f300-be01-41ac-beb6-30cd100f0661",
    );
    let hook = |event: &str, v: Value| {
        let mut v = v;
        v["cwd"] = json!(cwd);
        v["timestamp"] = json!(1);
        let out = env.hook_at(
            &env.project,
            &["hook", "--cli", "copilot"],
            v.to_string().into_bytes(),
            &[("MAOS_COPILOT_EVENT", event)],
            false,
        );
        assert!(out.status.success(), "{event}: {out:?}");
        out
    };
    let task = |prompt: &str, kind: &str| json!({"description": "delegate", "prompt": prompt, "agent_type": kind, "name": "n"});
    hook(
        "sessionStart",
        json!({"sessionId": root, "source": "new", "initialPrompt": "go"}),
    );
    hook(
        "userPromptSubmitted",
        json!({"sessionId": root, "prompt": "go"}),
    );
    hook(
        "preToolUse",
        json!({"sessionId": root, "toolName": "task",
        "toolArgs": task("look around", "general-purpose")}),
    );
    hook(
        "subagentStart",
        json!({"sessionId": root, "agentName": "general-purpose",
        "agentId": child, "agentType": "general-purpose", "parentAgentId": root}),
    );
    hook(
        "userPromptSubmitted",
        json!({"sessionId": child, "prompt": "look around",
        "agentId": child, "agentType": "general-purpose", "parentAgentId": root}),
    );
    hook(
        "preToolUse",
        json!({"sessionId": child, "toolName": "task",
        "toolArgs": task("write n.txt", "explore"), "agentId": child,
        "agentType": "general-purpose", "parentAgentId": root}),
    );
    hook(
        "subagentStart",
        json!({"sessionId": "77b1f414-b338-4a8f-9f55-284359e102ed",
        "agentName": "explore", "agentId": nested, "agentType": "explore",
        "parentAgentId": child}),
    );
    hook(
        "preToolUse",
        json!({"sessionId": nested, "toolName": "create",
        "toolArgs": {"path": format!("{cwd}/n.txt"), "file_text": "n\n"},
        "agentId": nested, "agentType": "explore", "parentAgentId": child}),
    );
    let ps = env.maos_json(&["ps", "--all"]);
    let agents: Vec<&Value> = ps
        .as_array()
        .expect("sessions")
        .iter()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .collect();
    let windows: Vec<&&Value> = agents.iter().filter(|a| a["parent"].is_null()).collect();
    let [window] = windows[..] else {
        panic!("not one window: {agents:#?}")
    };
    assert_eq!(window["task"], "go", "{window}");
    let locks = env.maos_json(&["lock", "list"]);
    let [lock] = &locks["locks"].as_array().expect("locks")[..] else {
        panic!("not one lock: {locks}")
    };
    assert_eq!(lock["path"], "n.txt", "{lock}");
    let holder = agents
        .iter()
        .find(|a| a["id"] == lock["holder"])
        .unwrap_or_else(|| panic!("no holder: {agents:#?}"));
    assert_eq!(holder["role"], "explore", "{holder}");
    assert_eq!(holder["task"], "delegate: write n.txt", "{holder}");
    assert_ne!(holder["parent"], Value::Null, "{holder}");
}

/// `disableAllHooks: true` in the repository's `.github/copilot/settings.json` or
/// `settings.local.json` makes Copilot 1.0.102 run no hook at all (measured): doctor fails
/// naming the file, for the user's hooks too.
#[test]
fn doctor_fails_where_the_repository_disables_all_hooks() {
    let env = Env::new();
    env.maos_json(&["install-hooks", "--copilot", "--yes"]);
    let (_, checks) = doctor(&env);
    assert_eq!(check(&checks, "GitHub Copilot CLI trust")["level"], "ok");
    let local = env.project.join(".github/copilot/settings.local.json");
    std::fs::create_dir_all(local.parent().expect("dir")).expect("mkdir");
    std::fs::write(&local, r#"{"disableAllHooks": true}"#).expect("write");
    for user in [false, true] {
        if user {
            env.maos_json(&["uninstall-hooks", "--copilot"]);
            env.maos_json(&["install-hooks", "--copilot", "--user"]);
        }
        let (code, checks) = doctor(&env);
        assert_eq!(code, Some(1), "{checks:?}");
        let trust = check(&checks, "GitHub Copilot CLI trust");
        assert_eq!(trust["level"], "fail", "{trust}");
        let detail = trust["detail"].as_str().expect("detail");
        assert!(
            detail.contains("settings.local.json") && detail.contains("disableAllHooks"),
            "{detail}"
        );
    }
}
