//! `install-hooks` and `uninstall-hooks` leave no trace: uninstall takes the project and the
//! user's home back to the byte (contents and modes; no `{}` file, no empty `config.toml`, no
//! `.maos/` that install made), a second install changes no file, not even an mtime, and says
//! so; `doctor` judges only the CLIs a project is set up for; a command whose binary is
//! missing says which and how to install it, with its own exit code.

use std::collections::BTreeMap;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::Output;

use maos_tests::doctor::{doctor, levels};
use maos_tests::{Env, Value, describe};

/// One entry of a tree: kind, permission bits, contents (files), mtime in nanoseconds.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Entry {
    kind: &'static str,
    mode: u32,
    bytes: Vec<u8>,
    mtime_ns: i128,
}

/// Every file and directory under `root` (relative paths), `root` itself as "".
fn tree(root: &Path) -> BTreeMap<PathBuf, Entry> {
    let mut out = BTreeMap::new();
    let mut todo = vec![root.to_path_buf()];
    while let Some(p) = todo.pop() {
        let Ok(m) = std::fs::symlink_metadata(&p) else {
            continue;
        };
        let kind = if m.is_dir() {
            let mut children: Vec<PathBuf> = std::fs::read_dir(&p)
                .expect("read_dir")
                .map(|e| e.expect("entry").path())
                .collect();
            children.sort();
            todo.extend(children);
            "dir"
        } else if m.is_file() {
            "file"
        } else {
            "other"
        };
        let bytes = if kind == "file" {
            std::fs::read(&p).expect("read")
        } else {
            Vec::new()
        };
        out.insert(
            p.strip_prefix(root).expect("under root").to_path_buf(),
            Entry {
                kind,
                mode: m.permissions().mode() & 0o7777,
                bytes,
                mtime_ns: i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec()),
            },
        );
    }
    out
}

/// The tree without mtimes (what a byte-for-byte comparison of contents is about).
fn contents(t: &BTreeMap<PathBuf, Entry>) -> BTreeMap<PathBuf, (&'static str, u32, String)> {
    t.iter()
        .map(|(p, e)| {
            (
                p.clone(),
                (
                    e.kind,
                    e.mode,
                    String::from_utf8_lossy(&e.bytes).into_owned(),
                ),
            )
        })
        .collect()
}

/// What differs between two trees, for a failure message.
fn diff(a: &BTreeMap<PathBuf, Entry>, b: &BTreeMap<PathBuf, Entry>) -> String {
    let mut out = String::new();
    for (p, e) in a {
        match b.get(p) {
            None => out.push_str(&format!("gone: {}\n", p.display())),
            Some(f) if f != e => out.push_str(&format!(
                "changed: {} {:?}/{:o}/{} -> {:?}/{:o}/{}\n{:?}\n->\n{:?}\n",
                p.display(),
                e.kind,
                e.mode,
                e.mtime_ns,
                f.kind,
                f.mode,
                f.mtime_ns,
                String::from_utf8_lossy(&e.bytes),
                String::from_utf8_lossy(&f.bytes)
            )),
            _ => {}
        }
    }
    for (p, f) in b {
        if !a.contains_key(p) {
            out.push_str(&format!(
                "new: {} {:?}\n",
                p.display(),
                String::from_utf8_lossy(&f.bytes)
            ));
        }
    }
    out
}

/// The user's home of the test (`HOME`): Codex's and Gemini CLI's user files live there.
fn user_home(env: &Env) -> PathBuf {
    env.root().join("user")
}

/// `maos --project DIR ARGS` with stdin not a terminal; must succeed; its output.
fn maos(env: &Env, dir: &Path, args: &[&str]) -> String {
    let out = env.maos_in(dir, args);
    assert!(out.status.success(), "maos {args:?}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned() + &String::from_utf8_lossy(&out.stderr)
}

/// The install arguments of each CLI (consent given, as a person answering yes would).
const CLIS: [&[&str]; 3] = [
    &["install-hooks"],
    &["install-hooks", "--codex", "--yes"],
    &["install-hooks", "--gemini", "--yes"],
];

fn uninstall_args(install: &[&str]) -> Vec<&'static str> {
    let mut args = vec!["uninstall-hooks"];
    for flag in ["--codex", "--gemini", "--user"] {
        if install.contains(&flag) {
            args.push(flag);
        }
    }
    args
}

/// Install `sets` one after the other, check that a second round changes nothing (mtimes to
/// the nanosecond) and says it is installed already, then uninstall each: the project and
/// the home are what they were, to the byte.
fn round_trip(env: &Env, project: &Path, sets: &[&[&str]]) {
    let before_project = tree(project);
    let before_home = tree(&user_home(env));
    for args in sets {
        maos(env, project, args);
    }
    let installed_project = tree(project);
    let installed_home = tree(&user_home(env));
    assert!(
        contents(&installed_project) != contents(&before_project)
            || contents(&installed_home) != contents(&before_home),
        "{sets:?} changed nothing in {} or the home",
        project.display()
    );
    for args in sets {
        let said = maos(env, project, args);
        assert!(
            said.contains("already installed"),
            "a second `maos {args:?}` does not say so: {said}"
        );
        assert!(
            !said.contains("hooks installed in") && !said.contains("trusts"),
            "a second `maos {args:?}` claims to have done something: {said}"
        );
    }
    let again_project = tree(project);
    let again_home = tree(&user_home(env));
    assert!(
        again_project == installed_project,
        "a second install changed the project:\n{}",
        diff(&installed_project, &again_project)
    );
    assert!(
        again_home == installed_home,
        "a second install changed the home:\n{}",
        diff(&installed_home, &again_home)
    );
    for args in sets {
        maos(env, project, &uninstall_args(args));
    }
    let after_project = tree(project);
    let after_home = tree(&user_home(env));
    assert!(
        contents(&after_project) == contents(&before_project),
        "uninstall left the project changed:\n{}",
        diff(&before_project, &after_project)
    );
    assert!(
        contents(&after_home) == contents(&before_home),
        "uninstall left the home changed:\n{}",
        diff(&before_home, &after_home)
    );
}

/// A directory that is no project yet (no `.git`): install makes it one with `.maos/`, and
/// uninstall takes that away again with everything else, for each CLI and for all three.
#[test]
fn in_an_empty_directory_uninstall_leaves_nothing_behind() {
    let env = Env::new();
    let mut cases: Vec<Vec<&[&str]>> = CLIS.iter().map(|c| vec![*c]).collect();
    cases.push(CLIS.to_vec());
    // The user's hooks: every file is in the home.
    cases.push(vec![
        &["install-hooks", "--user"],
        &["install-hooks", "--codex", "--user", "--yes"],
        &["install-hooks", "--gemini", "--user", "--yes"],
    ]);
    for (i, sets) in cases.iter().enumerate() {
        let dir = env.root().join(format!("plain-{i}"));
        std::fs::create_dir_all(&dir).expect("mkdir");
        round_trip(&env, &dir, sets);
        let left = tree(&dir);
        assert_eq!(
            left.keys().collect::<Vec<_>>(),
            [Path::new("")],
            "{sets:?} left files in an empty directory: {left:?}"
        );
        // maos's own notes of what it did are gone with it.
        let notes: Vec<PathBuf> = tree(&env.home)
            .into_iter()
            .filter(|(_, e)| e.kind == "file")
            .map(|(p, _)| p)
            .collect();
        assert!(notes.is_empty(), "{sets:?} left in MAOS_HOME: {notes:?}");
    }
}

/// A project with the user's own settings for each CLI, written the user's way (indented by
/// four, keys unsorted, no final newline, owner-only): after install and uninstall, each file
/// is as it was to the byte, and so are the user's Codex config and Gemini CLI trust.
#[test]
fn the_users_own_files_come_back_byte_for_byte() {
    let env = Env::new();
    let p = &env.project;
    let write = |path: &Path, text: &str, mode: u32| {
        std::fs::create_dir_all(path.parent().expect("dir")).expect("mkdir");
        std::fs::write(path, text).expect("write");
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)).expect("chmod");
    };
    write(
        &p.join(".claude/settings.json"),
        "{\n    \"permissions\": {\"allow\": [\"Read\"]},\n    \"model\": \"opus\",\n    \"hooks\": {\n        \"Notification\": [{\"hooks\": [{\"type\": \"command\", \"command\": \"notify-send x\"}]}]\n    }\n}",
        0o600,
    );
    write(
        &p.join(".mcp.json"),
        "{\"mcpServers\": {\"docs\": {\"command\": \"docs-server\"}}}\n",
        0o644,
    );
    write(
        &p.join(".codex/config.toml"),
        "# the team's Codex settings\nmodel = \"o3\"\n\n[mcp_servers.docs]\ncommand = \"docs\"\n",
        0o644,
    );
    write(
        &p.join(".gemini/settings.json"),
        "{ \"theme\": \"GitHub\", \"mcpServers\": { \"docs\": { \"command\": \"docs\" } } }",
        0o644,
    );
    let home = user_home(&env);
    write(
        &home.join(".codex/config.toml"),
        "model = \"o3\" # mine\n\n[projects.\"/elsewhere\"]\ntrust_level = \"trusted\"\n",
        0o600,
    );
    write(
        &home.join(".gemini/trustedFolders.json"),
        "{\n  \"/elsewhere\": \"TRUST_FOLDER\"\n}",
        0o600,
    );
    round_trip(&env, p, &CLIS);
}

/// A Codex-only project whose hooks are not trusted yet: doctor fails on Codex (and names
/// the fix), and does not fail Claude Code, which this project does not use.
#[test]
fn doctor_on_a_codex_only_project_judges_codex_alone() {
    let env = Env::new();
    maos(&env, &env.project, &["install-hooks", "--codex"]);
    let path = format!("{}:/usr/bin:/bin", maos_tests::bin_dir().display());
    let (code, r) = doctor(&env, &env.project, &path);
    assert_eq!(code, Some(1), "{r}");
    assert_eq!(levels(&r, "Codex hooks"), ["fail"], "{r}");
    assert_eq!(
        levels(&r, "Claude Code hooks"),
        ["info"],
        "Claude Code is not set up here: {r}"
    );
    assert_eq!(levels(&r, "Gemini CLI hooks"), ["info"], "{r}");
}

/// A directory holding `maos` alone (and `maosd`), as the old README's install left it.
fn lone_maos(env: &Env) -> PathBuf {
    let bin = env.root().join("lone-bin");
    std::fs::create_dir_all(&bin).expect("mkdir");
    for name in ["maos", "maosd"] {
        std::fs::copy(maos_tests::bin_dir().join(name), bin.join(name)).expect("copy");
    }
    bin
}

fn run_lone(env: &Env, bin: &Path, args: &[&str]) -> Output {
    let mut cmd = env.command(&bin.join("maos"));
    cmd.args(args)
        .env("PATH", format!("{}:/usr/bin:/bin", bin.display()))
        .stdin(std::process::Stdio::null());
    maos_tests::run_with_timeout(cmd, maos_tests::COMMAND_TIMEOUT)
}

/// `maos top`, `maos mcp`, `maos dashboard` and `maos demo` without their binaries: one line
/// naming the binary and the command that installs it, exit 127 (not 3, "no daemon"); and
/// `doctor` names every missing binary with that command.
#[test]
fn a_missing_binary_is_named_with_the_command_that_installs_it() {
    let env = Env::new();
    let bin = lone_maos(&env);
    for (args, missing) in [
        (&["top"][..], "maos-top"),
        (&["mcp"], "maos-mcp"),
        (&["dashboard"], "maos-dash"),
        (&["demo"], "maos-demo"),
    ] {
        let out = run_lone(&env, &bin, args);
        assert_eq!(
            out.status.code(),
            Some(127),
            "maos {args:?}: {}",
            describe(&out)
        );
        let err = String::from_utf8_lossy(&out.stderr);
        assert_eq!(err.trim().lines().count(), 1, "{err}");
        assert!(
            err.contains(missing) && err.contains("install.sh"),
            "maos {args:?}: {err}"
        );
    }
    // Nothing was started for a dashboard that cannot run.
    assert!(env.daemons().is_empty(), "a daemon was started");
    maos(&env, &env.project, &["install-hooks"]);
    let project = env.project.to_str().expect("utf-8");
    let out = run_lone(&env, &bin, &["--json", "--project", project, "doctor"]);
    let r: Value =
        serde_json::from_slice(&out.stdout).unwrap_or_else(|e| panic!("{e}: {}", describe(&out)));
    assert_eq!(out.status.code(), Some(1), "{r}");
    let text = r.to_string();
    for missing in ["maos-mcp", "maos-top", "maos-dash", "maos-demo"] {
        assert!(text.contains(missing), "{missing} not named: {r}");
    }
    assert!(!text.contains("see README"), "{r}");
    let fails: Vec<&Value> = r["checks"]
        .as_array()
        .expect("checks")
        .iter()
        .filter(|c| c["level"] == "fail")
        .collect();
    assert!(
        !fails.is_empty()
            && fails.iter().all(|c| c["detail"]
                .as_str()
                .unwrap_or_default()
                .contains("install.sh")),
        "{fails:?}"
    );
}
