//! One file, one lock, wherever a window started (issue 30, defect 6): a file's write lock lives
//! in the project the file belongs to (its repository, or the nested repository or submodule
//! it is in), not in the project of the directory its CLI was started in; a hard link is the
//! file it links to. Real `maos hook` processes from the directories windows start in, the
//! real daemon; run on PostgreSQL too (`.ci/run`).

use std::path::Path;
use std::process::Output;

use maos_tests::{Env, Value, json, make_clone};

fn event(cwd: &Path, window: &str, name: &str, extra: Value) -> Value {
    maos_tests::hook_input(cwd, window, name, extra)
}

/// A Claude Code window started in `cwd` asks to write `file` (absolute, or relative to `cwd`).
fn write(env: &Env, cwd: &Path, window: &str, file: &str) -> Output {
    let input = event(
        cwd,
        window,
        "PreToolUse",
        json!({"tool_name": "Write", "tool_use_id": format!("toolu_{window}"),
               "tool_input": {"file_path": file, "content": "x"}}),
    );
    hook(env, cwd, &input)
}

fn hook(env: &Env, cwd: &Path, input: &Value) -> Output {
    let out = env.hook_at(
        cwd,
        &["hook", "--cli", "claude"],
        input.to_string().into_bytes(),
        &[],
        false,
    );
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    out
}

/// The denial's reason printed by the hook, or "" when it allowed.
fn denial(out: &Output) -> String {
    maos_tests::denial_reason(out)
}

fn start(env: &Env, cwd: &Path, window: &str, prompt: &str) {
    hook(
        env,
        cwd,
        &event(cwd, window, "SessionStart", json!({"source": "startup"})),
    );
    hook(
        env,
        cwd,
        &event(cwd, window, "UserPromptSubmit", json!({"prompt": prompt})),
    );
}

/// The directory above the repository, where a window may start: a project of its own (the
/// hook makes it one; in a fleet it needs a key, as every fleet project does).
fn parent_of(env: &Env) -> std::path::PathBuf {
    let parent = env.project.parent().unwrap().to_path_buf();
    std::fs::create_dir_all(parent.join(".maos")).unwrap();
    let name = parent.file_name().unwrap().to_string_lossy().into_owned();
    std::fs::write(
        parent.join(".maos/config.toml"),
        format!("project = \"e2e.invalid/{name}/parent\"\n"),
    )
    .unwrap();
    parent
}

/// The paths of the locks held in `project`.
fn paths_held(env: &Env, project: &Path) -> Vec<String> {
    let list = env.maos_json_in(project, &["lock", "list"]);
    list["locks"]
        .as_array()
        .into_iter()
        .flatten()
        .map(|l| l["path"].as_str().unwrap_or_default().to_string())
        .collect()
}

#[test]
fn a_window_started_in_the_parent_directory_locks_in_the_files_repository() {
    let env = Env::new();
    let repo = env.project.clone();
    let parent = parent_of(&env);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    let file = repo.join("src/x.rs");
    start(&env, &parent, "win-parent", "Refactor the parser");
    start(&env, &repo, "win-repo", "Fix the lexer");

    let out = write(&env, &parent, "win-parent", file.to_str().unwrap());
    assert_eq!(denial(&out), "", "the first writer may write");
    assert_eq!(
        paths_held(&env, &repo),
        ["src/x.rs"],
        "the lock is in the file's repository, under its key there"
    );

    // The window started in the repository is refused, told who holds it.
    let out = write(&env, &repo, "win-repo", "src/x.rs");
    let why = denial(&out);
    assert!(
        why.contains("src/x.rs") && why.contains("Refactor the parser"),
        "denied, naming the holder: {why:?}"
    );

    // The end of the parent window's turn frees its lock there too.
    hook(
        &env,
        &parent,
        &event(&parent, "win-parent", "Stop", json!({})),
    );
    assert!(paths_held(&env, &repo).is_empty(), "released at Stop");
    let out = write(&env, &repo, "win-repo", "src/x.rs");
    assert_eq!(denial(&out), "", "free again");

    // And now the other way round: the parent window is refused.
    let relative = file.strip_prefix(&parent).unwrap();
    let out = write(&env, &parent, "win-parent", relative.to_str().unwrap());
    let why = denial(&out);
    assert!(
        why.contains("src/x.rs") && why.contains("Fix the lexer"),
        "{why:?}"
    );

    // The parent window's end reaches the repository: its agent there ends too.
    hook(
        &env,
        &parent,
        &event(
            &parent,
            "win-parent",
            "SessionEnd",
            json!({"reason": "other"}),
        ),
    );
    let ps = env.maos_json_in(&repo, &["ps", "--all"]);
    let states: Vec<(String, String)> = ps
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|s| s["agents"].as_array())
        .flatten()
        .map(|a| {
            (
                a["task"].as_str().unwrap_or_default().to_string(),
                a["state"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    let parent_window = states
        .iter()
        .find(|(task, _)| task == "Refactor the parser")
        .unwrap_or_else(|| panic!("the parent window is known in the repository: {ps:#}"));
    assert_ne!(parent_window.1, "running", "ended there too: {ps:#}");
}

#[test]
fn a_paused_window_writes_nowhere() {
    let env = Env::new();
    let repo = env.project.clone();
    let parent = parent_of(&env);
    std::fs::create_dir_all(repo.join("src")).unwrap();
    start(&env, &parent, "win-parent", "Refactor the parser");
    let out = env.maos_in(&parent, &["pause", "--reason", "review first"]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let out = write(
        &env,
        &parent,
        "win-parent",
        repo.join("src/x.rs").to_str().unwrap(),
    );
    let why = denial(&out);
    assert!(why.contains("paused"), "{why:?}");
}

#[test]
fn nested_repositories_and_submodules_are_their_own_projects() {
    let env = Env::new();
    let repo = env.project.clone();
    // A nested clone (vendor/lib) and a submodule (ext/sub: a .git file into the outer
    // repository's modules, with no commondir).
    let vendored = repo.join("vendor/lib");
    make_clone(&vendored).unwrap();
    let sub = repo.join("ext/sub");
    std::fs::create_dir_all(&sub).unwrap();
    std::fs::create_dir_all(repo.join(".git/modules/sub")).unwrap();
    let name = repo
        .parent()
        .unwrap()
        .file_name()
        .unwrap()
        .to_string_lossy();
    std::fs::write(
        repo.join(".git/modules/sub/config"),
        format!("[remote \"origin\"]\n\turl = https://e2e.invalid/{name}/sub.git\n"),
    )
    .unwrap();
    std::fs::write(sub.join(".git"), "gitdir: ../../.git/modules/sub\n").unwrap();

    start(&env, &repo, "outer", "Update the vendored code");
    start(&env, &vendored, "inner", "Patch the library");
    start(&env, &sub, "subm", "Bump the submodule");

    let out = write(&env, &repo, "outer", "vendor/lib/api.rs");
    assert_eq!(denial(&out), "");
    let out = write(&env, &vendored, "inner", "api.rs");
    let why = denial(&out);
    assert!(why.contains("Update the vendored code"), "{why:?}");
    assert_eq!(paths_held(&env, &vendored), ["api.rs"]);
    assert!(
        !paths_held(&env, &repo).contains(&"vendor/lib/api.rs".to_string()),
        "never under the outer repository's key"
    );

    let out = write(&env, &sub, "subm", "mod.rs");
    assert_eq!(denial(&out), "");
    let out = write(&env, &repo, "outer", "ext/sub/mod.rs");
    let why = denial(&out);
    assert!(why.contains("Bump the submodule"), "{why:?}");

    // The outer window's own files stay in its project.
    let out = write(&env, &repo, "outer", "README.md");
    assert_eq!(denial(&out), "");
    assert_eq!(paths_held(&env, &repo), ["README.md"]);
}

#[test]
fn a_hard_link_is_the_file_it_links_to() {
    let env = Env::new();
    let repo = env.project.clone();
    std::fs::create_dir_all(repo.join("src")).unwrap();
    std::fs::write(repo.join("src/a.rs"), "fn a() {}\n").unwrap();
    start(&env, &repo, "one", "Write a");
    start(&env, &repo, "two", "Write b");
    let out = write(&env, &repo, "one", "src/a.rs");
    assert_eq!(denial(&out), "");
    std::fs::hard_link(repo.join("src/a.rs"), repo.join("src/b.rs")).unwrap();
    let out = write(&env, &repo, "two", "src/b.rs");
    let why = denial(&out);
    assert!(
        why.contains("src/a.rs") && why.contains("Write a") && why.contains("hard link"),
        "the link's writer is refused, told it is the held file: {why:?}"
    );
    // The holder itself may write through the link.
    let out = write(&env, &repo, "one", "src/b.rs");
    assert_eq!(denial(&out), "");
}

#[test]
fn explicit_locks_name_the_project_a_file_belongs_to() {
    let env = Env::new();
    let repo = env.project.clone();
    let vendored = repo.join("vendor/lib");
    make_clone(&vendored).unwrap();
    let session = env.session("lock by hand", &[]);
    let agent = env.agent(Some(&session), "worker", "locks by hand");
    let f = env.maos_fail(&["lock", "acquire", "vendor/lib/x.rs", "--agent", &agent]);
    assert_eq!(f.code, "path_outside_workspace", "{f:?}");
    assert!(
        f.message.contains(vendored.to_str().unwrap()),
        "names the project the file is in: {f:?}"
    );
    assert!(paths_held(&env, &repo).is_empty());
}

/// What the daemon sets on a hook call (where its files' locks live, hard links, directories,
/// git's index) is its own to say: a client that sends them is not believed. Otherwise a
/// raw request could open a project at any directory and take locks there, or lock a
/// directory where the command named a file.
#[test]
fn a_hook_call_cannot_say_what_only_the_daemon_finds() {
    let env = Env::new();
    let elsewhere = env.root().join("anywhere");
    std::fs::create_dir_all(&elsewhere).unwrap();
    assert!(env.maos(&["daemon", "start"]).status.success());
    let mut raw = env.raw();
    raw.hello();
    let root = env.project.to_str().unwrap().to_string();
    let answer = raw.request(
        Some(&root),
        json!({"request": "hook", "event": "PreToolUse", "session_id": "w1",
               "tool_name": "Write", "paths": ["a.txt"], "cwd": root,
               "elsewhere": [{"project": elsewhere, "path": "stolen.rs"}],
               "directories": ["a.txt"], "git_index": "src",
               "hard_links": [["a.txt", "src"]],
               "git": [{"captures": true, "all": true, "args": ["add", "-A"]}]}),
    );
    assert!(answer["Ok"].is_object(), "{answer}");
    // Only what the call names is locked, as a file, here.
    let locks = env.maos_json(&["lock", "list"]);
    let held: Vec<(&str, &str)> = locks["locks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|l| (l["path"].as_str().unwrap(), l["mode"].as_str().unwrap()))
        .collect();
    assert_eq!(held, [("a.txt", "write")], "{locks:#}");
    // No project was opened at the claimed directory.
    let other = env.maos_json_in(&elsewhere, &["lock", "list"]);
    assert_eq!(other["locks"], json!([]), "{other}");
    assert!(
        !env.home.join("projects").read_dir().unwrap().any(|e| {
            std::fs::read_to_string(e.unwrap().path().join("project.json"))
                .is_ok_and(|t| t.contains("anywhere"))
        }),
        "a project was made for the claimed directory"
    );
}
