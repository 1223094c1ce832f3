//! `maos hook --cli codex` on Codex's `Bash` calls, through real processes and a real daemon:
//! a command that is not `apply_patch` is answered without the daemon; one that gives
//! `apply_patch` a patch (a here-document, or `< FILE`) takes the patch's locks like the
//! `apply_patch` tool and is denied a file another agent holds; a patch file maos cannot read
//! is refused, since its files cannot be locked.

use std::path::Path;
use std::process::Output;
use std::time::Duration;

use maos_tests::conformance::run_within;
use maos_tests::{Env, Value, json, maos_bin};

/// `maos hook --cli codex` with `input` on stdin (a file: `run_within` closes stdin).
fn hook(env: &Env, input: &Value) -> Output {
    let file = env.root().join("hook-input.json");
    std::fs::write(&file, input.to_string()).expect("write input");
    let mut sh = env.command(Path::new("/bin/sh"));
    sh.arg("-c")
        .arg("exec \"$0\" hook --cli codex < \"$1\"")
        .arg(maos_bin())
        .arg(&file);
    run_within(sh, Duration::from_secs(20), "maos hook")
}

/// A Codex `Bash` PreToolUse of `command` in the project.
fn bash(env: &Env, command: &str) -> Value {
    json!({"session_id": "codex-window-1", "turn_id": "t1", "hook_event_name": "PreToolUse",
           "cwd": env.project, "model": "gpt-5.5", "permission_mode": "bypassPermissions",
           "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "call_1"})
}

fn decision(out: &Output) -> (String, String) {
    let text = String::from_utf8_lossy(&out.stdout);
    if text.trim().is_empty() {
        return (String::new(), String::new());
    }
    let v: Value = serde_json::from_str(text.trim()).unwrap_or_else(|e| panic!("{text:?}: {e}"));
    let o = &v["hookSpecificOutput"];
    (
        o["permissionDecision"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
        o["permissionDecisionReason"]
            .as_str()
            .unwrap_or_default()
            .to_string(),
    )
}

const HELD: &str = "*** Begin Patch\n*** Add File: held.txt\n+x\n*** End Patch\n";

/// Any other shell command is read by the daemon (issue 31: the files it writes are locked)
/// and, writing nothing, goes through untouched.
#[test]
fn a_plain_shell_command_goes_through() {
    let env = Env::new();
    let out = hook(&env, &bash(&env, "ls -la && cargo test"));
    assert!(out.status.success(), "{out:?}");
    assert_eq!(decision(&out), (String::new(), String::new()));
    let locks = env.maos_json(&["lock", "list"]);
    assert_eq!(locks["locks"], json!([]), "{locks}");
}

/// A here-document and a patch file: each takes the held file's lock, so each is denied,
/// naming the holder; a free file's patch is allowed and its lock is the window's.
#[test]
fn shell_patches_are_denied_the_held_file_and_take_the_free_ones() {
    let env = Env::new();
    env.session("codex shell", &[]);
    env.maos_json(&["session", "start"]);
    let holder = env.agent(None, "holder", "owns held.txt");
    env.maos_json(&["agent", "start", &holder]);
    env.maos_json(&["lock", "acquire", "held.txt", "--agent", &holder]);
    std::fs::write(env.project.join("held.patch"), HELD).expect("patch file");
    // Read from the directory the command changed to, its paths relative to it too.
    let up = HELD.replace("Add File: held.txt", "Add File: ../held.txt");
    std::fs::write(env.project.join("up.patch"), up).expect("patch file");
    for command in [
        format!("apply_patch <<'EOF'\n{HELD}EOF\n"),
        "apply_patch < held.patch".to_string(),
        "cd sub && apply_patch < ../up.patch".to_string(),
    ] {
        std::fs::create_dir_all(env.project.join("sub")).expect("sub");
        let (d, reason) = decision(&hook(&env, &bash(&env, &command)));
        assert_eq!(d, "deny", "{command:?}");
        assert!(reason.starts_with("maos: "), "{reason}");
        assert!(
            reason.contains("held.txt") && reason.contains(&holder[..12]),
            "{reason}"
        );
    }
    let free = "*** Begin Patch\n*** Add File: free.txt\n+y\n*** End Patch\n";
    let out = hook(
        &env,
        &bash(&env, &format!("cd sub && apply_patch <<'EOF'\n{free}EOF\n")),
    );
    assert_eq!(decision(&out).0, "", "{out:?}");
    let locks = env.maos_json(&["lock", "list"]);
    let paths: Vec<&str> = locks["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .filter(|l| l["holder"] != holder.as_str())
        .filter_map(|l| l["path"].as_str())
        .collect();
    assert_eq!(paths, ["sub/free.txt"], "{locks}");
    let denied = env.events(&["--type", "tool_denied"]);
    assert_eq!(denied.len(), 3, "{denied:?}");
}

/// A patch file that does not exist (yet) or holds no patch: refused, since maos cannot
/// know which files it writes; the refusal says what to do instead.
#[test]
fn an_unreadable_patch_file_is_refused() {
    let env = Env::new();
    std::fs::write(env.project.join("notes.txt"), "not a patch").expect("write");
    for command in ["apply_patch < missing.patch", "apply_patch < notes.txt"] {
        let (d, reason) = decision(&hook(&env, &bash(&env, command)));
        assert_eq!(d, "deny", "{command}");
        assert!(
            reason.contains("cannot read the patch") && reason.contains("apply_patch <<'EOF'"),
            "{reason}"
        );
    }
}
