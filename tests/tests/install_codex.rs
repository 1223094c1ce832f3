//! `maos install-hooks --codex`: the hooks, and Codex's trust of them in `$CODEX_HOME/config.toml`
//! (as Codex's own `/hooks` review writes it; conformance_codex.rs checks it against the real
//! Codex), with consent (`--yes` here: tests have no terminal); `uninstall-hooks --codex`
//! takes away exactly that; `doctor` names what keeps Codex from running them; a config.toml
//! that cannot be read or written changes nothing.

use std::path::PathBuf;
use std::process::Output;

use maos_tests::{Env, Value};

/// `$CODEX_HOME` of this test.
fn codex_home(env: &Env) -> PathBuf {
    env.root().join("codex-home")
}

/// `maos ARGS` in the project with this test's `CODEX_HOME` (stdin is not a terminal).
fn maos(env: &Env, args: &[&str]) -> Output {
    let mut cmd = env.maos_cmd_in(&env.project, args);
    cmd.env("CODEX_HOME", codex_home(env));
    cmd.output().expect("run maos")
}

fn text(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

fn config(env: &Env) -> String {
    std::fs::read_to_string(codex_home(env).join("config.toml")).unwrap_or_default()
}

/// `maos --json doctor`: its exit code and the Codex check's (level, detail) lines.
fn doctor(env: &Env) -> (Option<i32>, Vec<(String, String)>) {
    // The hooks' `maos` on PATH, as doctor wants it.
    let mut cmd = env.maos_cmd_in(&env.project, &["--json", "doctor"]);
    let path = format!("{}:/usr/bin:/bin", maos_tests::bin_dir().display());
    let out = cmd
        .env("CODEX_HOME", codex_home(env))
        .env("PATH", path)
        .output()
        .expect("maos doctor");
    let v: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", text(&out)));
    let codex = v["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["check"] == "Codex hooks")
        .map(|c| {
            (
                c["level"].as_str().unwrap_or_default().to_string(),
                c["detail"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect();
    (out.status.code(), codex)
}

fn levels(checks: &[(String, String)]) -> Vec<&str> {
    checks.iter().map(|(l, _)| l.as_str()).collect()
}

/// With `--yes`: one trust entry per hook of maos, keyed by the project's hooks.json, and
/// the project's trust; doctor is content; uninstall puts config.toml back to the byte.
#[test]
fn yes_trusts_exactly_maos_hooks_and_uninstall_takes_it_back() {
    let env = Env::new();
    let original = "# my settings\nmodel = \"o3\" # mine\n\n[projects.\"/elsewhere\"]\ntrust_level = \"trusted\"\n\n[hooks.state.\"/elsewhere/.codex/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:00\"\n";
    std::fs::create_dir_all(codex_home(&env)).expect("mkdir");
    std::fs::write(codex_home(&env).join("config.toml"), original).expect("write");
    let out = maos(&env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert!(
        text(&out).contains("Codex trusts maos's 7 hooks"),
        "{}",
        text(&out)
    );
    let written = config(&env);
    assert!(
        written.starts_with("# my settings\nmodel = \"o3\" # mine\n"),
        "{written}"
    );
    let hooks_json = env.project.join(".codex/hooks.json");
    let root = std::fs::canonicalize(&env.project).expect("canonical");
    for event in [
        "session_start",
        "user_prompt_submit",
        "pre_tool_use",
        "post_tool_use",
        "stop",
        "subagent_start",
        "subagent_stop",
    ] {
        let key = format!(
            "[hooks.state.\"{}:{event}:0:0\"]\ntrusted_hash = \"sha256:",
            hooks_json.display()
        );
        assert!(written.contains(&key), "{key} in {written}");
    }
    assert_eq!(written.matches("trusted_hash").count(), 8, "{written}");
    assert!(
        written.contains(&format!(
            "[projects.\"{}\"]\ntrust_level = \"trusted\"",
            root.display()
        )),
        "{written}"
    );
    let (code, codex) = doctor(&env);
    assert_eq!(levels(&codex), ["ok"], "{codex:?}");
    assert_eq!(code, Some(0), "a Codex-only project passes: {codex:?}");
    // Again: nothing more to trust, nothing changes.
    let out = maos(&env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(config(&env), written);

    let out = maos(&env, &["uninstall-hooks", "--codex"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(
        config(&env),
        original,
        "uninstall leaves config.toml as it was"
    );
    assert!(
        !hooks_json.exists(),
        "install created it: uninstall removes it"
    );
}

/// No terminal and no `--yes`: the hooks are installed, nothing is trusted, the output says
/// so in one line with the command that fixes it, and doctor fails naming it; the command
/// then fixes it.
#[test]
fn without_consent_the_hooks_are_installed_untrusted_and_doctor_names_the_fix() {
    let env = Env::new();
    let out = maos(&env, &["install-hooks", "--codex"]);
    assert!(out.status.success(), "{}", text(&out));
    let said = text(&out);
    let line = said
        .lines()
        .find(|l| l.contains("will not run"))
        .unwrap_or_else(|| panic!("no warning: {said}"));
    assert!(
        line.contains("`maos install-hooks --codex --yes`"),
        "{line}"
    );
    assert_eq!(config(&env), "", "nothing trusted without consent");
    assert!(env.project.join(".codex/hooks.json").exists());
    let (code, codex) = doctor(&env);
    assert_eq!(code, Some(1), "{codex:?}");
    assert_eq!(levels(&codex), ["fail"], "{codex:?}");
    let detail = &codex[0].1;
    assert!(
        detail.contains("7 of maos's hooks not trusted")
            && detail.contains("is not trusted, so Codex reads none of its hooks")
            && detail.contains("`maos install-hooks --codex --yes`"),
        "{detail}"
    );
    let out = maos(&env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(levels(&doctor(&env).1), ["ok"]);
}

/// Trust written for another hook at the same place (another command, as an older maos
/// wrote it) is "changed": Codex skips the hook, doctor says so, install fixes it.
#[test]
fn changed_trust_is_detected_and_fixed() {
    let env = Env::new();
    let out = maos(&env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    let path = env.project.join(".codex/hooks.json");
    let hooks = std::fs::read_to_string(&path).expect("hooks.json");
    // An older maos's PreToolUse matcher: the hook Codex hashes is another one.
    std::fs::write(
        &path,
        hooks
            .replace(
                "\"apply_patch|Bash|mcp__maos__.*|(collaboration|multi_agent_v1)?spawn_agent\"",
                "\"apply_patch\"",
            )
            .replace(
                "\"apply_patch|Bash|(collaboration|multi_agent_v1)?spawn_agent\"",
                "\"apply_patch\"",
            ),
    )
    .expect("write");
    let (code, codex) = doctor(&env);
    assert_eq!(code, Some(1), "{codex:?}");
    assert!(
        codex
            .iter()
            .any(|(l, d)| l == "fail"
                && d.contains("2 of maos's hooks changed since they were trusted")),
        "{codex:?}"
    );
    let out = maos(&env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(levels(&doctor(&env).1), ["ok"]);
}

/// `--user`: the hooks go to `$CODEX_HOME/hooks.json`, the trust is keyed by it, and no
/// project is trusted.
#[test]
fn user_hooks_live_in_codex_home() {
    let env = Env::new();
    let out = maos(&env, &["install-hooks", "--codex", "--user", "--yes"]);
    assert!(out.status.success(), "{}", text(&out));
    let home = std::fs::canonicalize(codex_home(&env)).expect("home");
    assert!(home.join("hooks.json").exists());
    let written = config(&env);
    assert_eq!(
        written
            .matches(&format!("{}:", home.join("hooks.json").display()))
            .count(),
        7,
        "{written}"
    );
    assert!(!written.contains("[projects."), "{written}");
    let out = maos(&env, &["uninstall-hooks", "--codex", "--user"]);
    assert!(out.status.success(), "{}", text(&out));
    assert_eq!(config(&env), "");
}

/// A config.toml Codex could not read either, or that cannot be written: one line, exit 1,
/// and neither file changed.
#[test]
fn a_bad_codex_config_changes_nothing() {
    let env = Env::new();
    let hooks_json = env.project.join(".codex/hooks.json");
    std::fs::create_dir_all(codex_home(&env)).expect("mkdir");
    let cfg = codex_home(&env).join("config.toml");
    for bad in ["model = \n", "[hooks]\nstate = 3\n", "hooks = [1, 2]\n"] {
        std::fs::write(&cfg, bad).expect("write");
        for args in [
            &["install-hooks", "--codex", "--yes"][..],
            &["uninstall-hooks", "--codex"],
        ] {
            let out = maos(&env, args);
            assert_eq!(out.status.code(), Some(1), "{bad:?}: {}", text(&out));
            let err = String::from_utf8_lossy(&out.stderr);
            assert_eq!(err.trim().lines().count(), 1, "{err}");
            assert!(
                err.contains("config.toml") && err.contains("nothing was changed"),
                "{err}"
            );
            assert_eq!(std::fs::read_to_string(&cfg).expect("read"), bad);
            assert!(!hooks_json.exists(), "hooks.json written despite {bad:?}");
        }
    }
    // CODEX_HOME is a file: config.toml can be neither read nor written.
    let file = env.root().join("not-a-dir");
    std::fs::write(&file, "x").expect("write");
    let mut cmd = env.maos_cmd_in(&env.project, &["install-hooks", "--codex", "--yes"]);
    let out = cmd.env("CODEX_HOME", &file).output().expect("maos");
    assert_eq!(out.status.code(), Some(1), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim().lines().count(), 1, "{err}");
    assert!(err.contains("nothing was changed"), "{err}");
    assert!(!hooks_json.exists());
    assert_eq!(std::fs::read_to_string(&file).expect("read"), "x");
}

/// On a terminal (`script` gives maos one), install asks before trusting: `n` leaves Codex's
/// config alone and says what to run; `y` trusts.
#[test]
fn on_a_terminal_install_asks_before_trusting() {
    if !maos_tests::have_tool("script", "util-linux") {
        return;
    }
    for (answer, trusted) in [("n", false), ("y", true)] {
        let env = Env::new();
        let line = format!(
            "'{}' --project '{}' install-hooks --codex",
            maos_tests::maos_bin().display(),
            env.project.display()
        );
        // The answer is typed into the terminal `script` makes for maos.
        let mut sh = env.command(std::path::Path::new("/bin/sh"));
        sh.env("CODEX_HOME", codex_home(&env)).args([
            "-c",
            "printf '%s\\n' \"$0\" | script -qec \"$1\" /dev/null",
            answer,
            &line,
        ]);
        let out = maos_tests::conformance::run_within(
            sh,
            std::time::Duration::from_secs(20),
            "maos install-hooks on a terminal",
        );
        assert!(out.status.success(), "{}", text(&out));
        let said = text(&out);
        assert!(
            said.contains("Codex runs hooks only once they are trusted. Trust maos's 7 hooks"),
            "{said}"
        );
        assert!(said.contains("[y/N]"), "{said}");
        assert_eq!(
            config(&env).contains("trusted_hash"),
            trusted,
            "{answer}: {}",
            config(&env)
        );
        assert_eq!(
            said.contains("will not run these hooks"),
            !trusted,
            "{said}"
        );
    }
}
