//! `maos install-hooks --git`: git's pre-commit hook, with the real `git`, `maos` and `maosd`.
//! A person's commit of a file another agent holds is refused naming the holder; the rest
//! commits; the holder's own shell commits its file; an existing hook is kept and still runs;
//! `core.hooksPath` is honoured; uninstall gives back every byte and mode bit; bad set-ups
//! are one line each and change nothing.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Output, Stdio};
use std::time::Duration;

use maos_tests::{Env, describe, maos_bin, run_with_timeout};
use serde_json::{Value, json};

const TIMEOUT: Duration = Duration::from_secs(30);

/// `git ARGS` in `repo` with this test's maos environment and a fixed identity (no system or
/// user configuration).
fn git_cmd(env: &Env, repo: &Path, args: &[&str]) -> Command {
    let mut cmd = with_identity(env.command(Path::new("git")));
    cmd.current_dir(repo).args(args);
    cmd
}

/// `cmd` with a fixed git identity, no system git configuration and no `MAOS_GIT_CHECK`.
fn with_identity(mut cmd: Command) -> Command {
    cmd.env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_AUTHOR_NAME", "A Person")
        .env("GIT_AUTHOR_EMAIL", "person@e2e.invalid")
        .env("GIT_COMMITTER_NAME", "A Person")
        .env("GIT_COMMITTER_EMAIL", "person@e2e.invalid")
        .env_remove("MAOS_GIT_CHECK");
    cmd
}

fn git(env: &Env, repo: &Path, args: &[&str]) -> Output {
    run_with_timeout(git_cmd(env, repo, args), TIMEOUT)
}

fn git_ok(env: &Env, repo: &Path, args: &[&str]) -> String {
    let out = git(env, repo, args);
    assert!(out.status.success(), "git {args:?}: {}", describe(&out));
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// A fresh repository `name` in the test's directory, with one commit.
fn repo(env: &Env, name: &str) -> PathBuf {
    let dir = env.root().join(name);
    std::fs::create_dir_all(&dir).expect("mkdir");
    git_ok(env, &dir, &["init", "-q", "-b", "main"]);
    std::fs::write(dir.join("README"), "hello\n").expect("write");
    git_ok(env, &dir, &["add", "README"]);
    git_ok(env, &dir, &["commit", "-q", "-m", "first"]);
    dir
}

/// Add a line to each of `files` in `repo`.
fn change(repo: &Path, files: &[&str]) {
    for f in files {
        let p = repo.join(f);
        std::fs::create_dir_all(p.parent().expect("dir")).expect("mkdir");
        let mut text = std::fs::read_to_string(&p).unwrap_or_default();
        text.push_str("one more line\n");
        std::fs::write(&p, text).expect("write");
    }
}

/// Change `files` in `repo` and stage them.
fn stage(env: &Env, repo: &Path, files: &[&str]) {
    change(repo, files);
    let mut args = vec!["add", "--"];
    args.extend(files);
    git_ok(env, repo, &args);
}

fn head(env: &Env, repo: &Path) -> String {
    git_ok(env, repo, &["rev-parse", "HEAD"])
}

fn stderr(out: &Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// A file's bytes and mode bits.
fn snapshot(p: &Path) -> (Vec<u8>, u32) {
    let bytes = std::fs::read(p).unwrap_or_else(|e| panic!("{}: {e}", p.display()));
    let mode = std::fs::metadata(p).expect("stat").permissions().mode();
    (bytes, mode)
}

/// A fake agent CLI window: a real process (python3, not a shell, so `maos hook` records it as
/// the window's CLI process) that runs what it is told, one JSON line at a time: a hook call
/// (`{"hook": INPUT}`, through `maos hook`) or a command (`{"run": ARGV}`, as its shell tool
/// would), both in the repository, answering `{"code": N, "stderr": TEXT}`.
struct FakeCli {
    child: Child,
    input: ChildStdin,
    output: BufReader<ChildStdout>,
}

impl FakeCli {
    fn start(env: &Env, repo: &Path) -> FakeCli {
        let script = "import json, subprocess, sys\n\
            maos, repo = sys.argv[1], sys.argv[2]\n\
            for line in sys.stdin:\n\
            \x20   ask = json.loads(line)\n\
            \x20   if 'hook' in ask:\n\
            \x20       p = subprocess.run([maos, 'hook'], input=json.dumps(ask['hook']).encode(), cwd=repo, capture_output=True)\n\
            \x20   else:\n\
            \x20       p = subprocess.run(ask['run'], cwd=repo, capture_output=True)\n\
            \x20   print(json.dumps({'code': p.returncode, 'stdout': p.stdout.decode(), 'stderr': p.stderr.decode()}), flush=True)\n";
        let mut py = with_identity(env.command(Path::new("python3")));
        py.current_dir(repo)
            .arg("-c")
            .arg(script)
            .arg(maos_bin())
            .arg(repo)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped());
        let mut child = py.spawn().expect("python3 runs");
        let input = child.stdin.take().expect("stdin");
        let output = BufReader::new(child.stdout.take().expect("stdout"));
        FakeCli {
            child,
            input,
            output,
        }
    }

    fn ask(&mut self, ask: Value) -> Value {
        writeln!(self.input, "{ask}").expect("tell the fake CLI");
        let mut line = String::new();
        self.output
            .read_line(&mut line)
            .expect("the fake CLI answers");
        serde_json::from_str(&line).unwrap_or_else(|e| panic!("{line:?}: {e}"))
    }

    fn hook(&mut self, input: Value) -> Value {
        let out = self.ask(json!({ "hook": input }));
        assert_eq!(out["code"], 0, "maos hook: {out}");
        out
    }

    fn run(&mut self, argv: &[&str]) -> Value {
        self.ask(json!({ "run": argv }))
    }
}

impl Drop for FakeCli {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A Claude Code window (session `sid`) in `repo` that has started on `prompt` and written
/// `file`: it holds the file's write lock.
fn window_writing(env: &Env, repo: &Path, sid: &str, prompt: &str, file: &str) -> FakeCli {
    let mut cli = FakeCli::start(env, repo);
    cli.hook(json!({"session_id": sid, "cwd": repo, "hook_event_name": "SessionStart", "source": "startup"}));
    cli.hook(json!({"session_id": sid, "cwd": repo, "hook_event_name": "UserPromptSubmit", "prompt": prompt}));
    let out = cli.hook(json!({
        "session_id": sid, "cwd": repo, "hook_event_name": "PreToolUse",
        "tool_name": "Write", "tool_use_id": "toolu_1",
        "tool_input": {"file_path": repo.join(file), "content": "x"},
    }));
    assert!(
        !out["stdout"].as_str().unwrap_or_default().contains("deny"),
        "the write was refused: {out}"
    );
    cli
}

/// The id of the agent holding `path`, from `maos lock list`.
fn holder(env: &Env, repo: &Path, path: &str) -> Option<String> {
    let locks = env.maos_json_in(repo, &["lock", "list"]);
    locks["locks"]
        .as_array()
        .expect("locks")
        .iter()
        .find(|l| l["path"] == path)
        .map(|l| l["holder"].as_str().expect("holder").to_string())
}

#[test]
fn a_persons_commit_of_a_file_another_agent_holds_is_refused_naming_the_holder() {
    let env = Env::new();
    let repo = repo(&env, "repo");
    let out = env.maos_at(&repo, &["install-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    // No daemon, nothing recorded: commits go through, and maos says nothing.
    stage(&env, &repo, &["notes.txt"]);
    let out = git(&env, &repo, &["commit", "-q", "-m", "before maos"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stderr(&out), "", "maos spoke without a project");

    let mut window = window_writing(&env, &repo, "claude-A", "Build the parser", "src/x.rs");
    let id = holder(&env, &repo, "src/x.rs").expect("the window holds src/x.rs");

    // A person commits the held file with another: refused, nothing committed.
    stage(&env, &repo, &["src/x.rs", "src/other file.rs"]);
    let before = head(&env, &repo);
    let out = git(&env, &repo, &["commit", "-q", "-m", "both"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert_eq!(head(&env, &repo), before, "the refused commit went in");
    let text = stderr(&out);
    for part in [
        "commit refused: it takes 1 file another agent is working on",
        "  src/x.rs: held by claude ",
        &id[..12],
        "Build the parser",
        " since 20",
        " UTC",
        "to commit the other files only: git restore --staged -- src/x.rs && git commit",
        "git commit --no-verify",
        "MAOS_GIT_CHECK=off",
    ] {
        assert!(text.contains(part), "{part:?} is not in:\n{text}");
    }
    assert!(
        !text.contains("other file.rs"),
        "a free file was named:\n{text}"
    );

    // The command it gives commits the rest.
    git_ok(&env, &repo, &["restore", "--staged", "--", "src/x.rs"]);
    let out = git(&env, &repo, &["commit", "-q", "-m", "the free file"]);
    assert!(out.status.success(), "{}", describe(&out));
    let files = git_ok(&env, &repo, &["show", "--name-only", "--format=", "HEAD"]);
    assert_eq!(files.trim(), "src/other file.rs");

    // The bypass git offers.
    git_ok(&env, &repo, &["add", "src/x.rs"]);
    git_ok(
        &env,
        &repo,
        &["commit", "-q", "--no-verify", "-m", "bypassed"],
    );
    // `git commit -a` is seen too (git's temporary index), and a rename away from a held
    // file names it.
    change(&repo, &["src/x.rs"]);
    let out = git(&env, &repo, &["commit", "-a", "-q", "-m", "all"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(stderr(&out).contains("src/x.rs"), "{}", describe(&out));
    git_ok(&env, &repo, &["checkout", "--", "src/x.rs"]);
    git_ok(&env, &repo, &["mv", "src/x.rs", "src/y.rs"]);
    let out = git(&env, &repo, &["commit", "-q", "-m", "rename"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("  src/x.rs: held by"),
        "{}",
        describe(&out)
    );
    git_ok(&env, &repo, &["mv", "src/y.rs", "src/x.rs"]);

    // The holder's own shell commits its file: its CLI process is the commit's ancestor.
    stage(&env, &repo, &["src/x.rs"]);
    let before = head(&env, &repo);
    let out = window.run(&["git", "commit", "-q", "-m", "the holder's commit"]);
    assert_eq!(out["code"], 0, "the holder was refused: {out}");
    assert_ne!(head(&env, &repo), before);

    // Another window's shell is another agent: refused.
    let mut other = window_writing(&env, &repo, "claude-B", "Write the docs", "docs/a.md");
    stage(&env, &repo, &["src/x.rs"]);
    let out = other.run(&["git", "commit", "-q", "-m", "not mine"]);
    assert_eq!(out["code"], 1, "{out}");
    assert!(
        out["stderr"]
            .as_str()
            .unwrap_or_default()
            .contains(&id[..12]),
        "{out}"
    );

    // Once the holder lets go (its window ends), the person's commit passes.
    window.hook(json!({"session_id": "claude-A", "cwd": repo, "hook_event_name": "SessionEnd", "reason": "exit"}));
    assert_eq!(
        holder(&env, &repo, "src/x.rs"),
        None,
        "still held after SessionEnd"
    );
    let out = git(&env, &repo, &["commit", "-q", "-m", "after the release"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(stderr(&out), "");
}

#[test]
fn a_daemon_that_cannot_answer_refuses_the_commit_saying_so() {
    let env = Env::new();
    let repo = repo(&env, "repo");
    assert!(
        env.maos_at(&repo, &["install-hooks", "--git"])
            .status
            .success()
    );
    let _window = window_writing(&env, &repo, "claude-A", "Build the parser", "src/x.rs");
    stage(&env, &repo, &["src/x.rs"]);
    // The daemon is down and may not be started: maos cannot tell, and says so.
    assert!(env.maos(&["daemon", "stop"]).status.success());
    let mut cmd = git_cmd(&env, &repo, &["commit", "-q", "-m", "x"]);
    cmd.env("MAOS_NO_AUTOSTART", "1");
    let out = run_with_timeout(cmd, TIMEOUT);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stderr(&out);
    assert!(
        text.contains("cannot tell whether this commit takes files other agents hold")
            && text.contains("--no-verify")
            && text.trim().lines().count() == 1,
        "{text}"
    );
    // Started again (as any maos command starts it), the daemon still knows the holder.
    let out = git(&env, &repo, &["commit", "-q", "-m", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("src/x.rs: held by claude"),
        "{}",
        describe(&out)
    );
    // The escape hatch.
    let mut cmd = git_cmd(&env, &repo, &["commit", "-q", "-m", "x"]);
    cmd.env("MAOS_GIT_CHECK", "off");
    let out = run_with_timeout(cmd, TIMEOUT);
    assert!(out.status.success(), "{}", describe(&out));
}

#[test]
fn an_existing_pre_commit_is_kept_runs_first_and_comes_back_byte_for_byte() {
    let env = Env::new();
    let repo = repo(&env, "repo");
    let hook = repo.join(".git/hooks/pre-commit");
    let ran = env.root().join("old-hook-ran");
    let old = format!(
        "#!/bin/sh\n# someone's hook\necho run >> '{}'\n[ -z \"$FAIL_OLD\" ] || exit 3\n",
        ran.display()
    );
    std::fs::write(&hook, &old).expect("write");
    std::fs::set_permissions(&hook, std::fs::Permissions::from_mode(0o750)).expect("chmod");
    let original = snapshot(&hook);

    let out = env.maos_at(&repo, &["install-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    let said = String::from_utf8_lossy(&out.stdout);
    assert!(said.contains("your pre-commit runs first"), "{said}");
    let installed = snapshot(&hook);
    assert_ne!(installed.0, original.0);
    assert_eq!(installed.1 & 0o111, 0o111, "the hook is not executable");
    // Idempotent: a second install writes nothing, and says so.
    let mtime = std::fs::metadata(&hook)
        .expect("stat")
        .modified()
        .expect("mtime");
    let out = env.maos_at(&repo, &["install-hooks", "--git"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("already installed"),
        "{}",
        describe(&out)
    );
    assert_eq!(snapshot(&hook), installed);
    assert_eq!(
        std::fs::metadata(&hook)
            .expect("stat")
            .modified()
            .expect("mtime"),
        mtime
    );
    // doctor says so.
    let doctor = String::from_utf8_lossy(&env.maos_at(&repo, &["doctor"]).stdout).into_owned();
    assert!(
        doctor.contains("git hook: ") && doctor.contains("(chained"),
        "{doctor}"
    );

    // The old hook still runs, first, and its failure still refuses the commit.
    stage(&env, &repo, &["a.txt"]);
    let out = git(&env, &repo, &["commit", "-q", "-m", "a"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(
        std::fs::read_to_string(&ran).expect("the old hook ran"),
        "run\n"
    );
    stage(&env, &repo, &["a.txt"]);
    let mut cmd = git_cmd(&env, &repo, &["commit", "-q", "-m", "b"]);
    cmd.env("FAIL_OLD", "1");
    let out = run_with_timeout(cmd, TIMEOUT);
    assert!(!out.status.success(), "the old hook's failure was ignored");
    assert_eq!(std::fs::read_to_string(&ran).expect("ran"), "run\nrun\n");

    // Uninstall: the very file that was there, bytes and mode.
    let out = env.maos_at(&repo, &["uninstall-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert_eq!(snapshot(&hook), original);
    let left: Vec<String> = std::fs::read_dir(repo.join(".git/hooks"))
        .expect("hooks")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .filter(|n| n.starts_with("pre-commit") && !n.ends_with(".sample"))
        .collect();
    assert_eq!(left, ["pre-commit"], "left behind: {left:?}");
    assert!(
        !env.home.join("install.json").exists(),
        "install.json still notes something"
    );
    let out = env.maos_at(&repo, &["uninstall-hooks", "--git"]);
    assert!(
        String::from_utf8_lossy(&out.stdout).contains("no maos git hook"),
        "{}",
        describe(&out)
    );
}

#[test]
fn a_plain_repository_and_core_hooks_path() {
    let env = Env::new();
    // No pre-commit (and no hooks directory at all): install creates both, uninstall removes both.
    let plain = repo(&env, "plain");
    std::fs::remove_dir_all(plain.join(".git/hooks")).expect("rm hooks");
    let out = env.maos_at(&plain, &["install-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(plain.join(".git/hooks/pre-commit").is_file());
    let out = env.maos_at(&plain, &["uninstall-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(
        !plain.join(".git/hooks").exists(),
        "the hooks directory install made is left"
    );

    // core.hooksPath (relative to the top of the working tree), from a subdirectory.
    let repo = repo(&env, "repo");
    std::fs::create_dir_all(repo.join(".githooks")).expect("mkdir");
    std::fs::create_dir_all(repo.join("sub")).expect("mkdir");
    git_ok(&env, &repo, &["config", "core.hooksPath", ".githooks"]);
    let out = env.maos_at(&repo.join("sub"), &["install-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    let hook = repo.join(".githooks/pre-commit");
    assert!(
        String::from_utf8_lossy(&out.stdout).contains(&hook.display().to_string()),
        "{}",
        describe(&out)
    );
    assert!(hook.is_file());
    assert!(!repo.join(".git/hooks/pre-commit").exists());
    // git runs it: the check refuses a held file there too.
    let _window = window_writing(&env, &repo, "claude-A", "Build the parser", "src/x.rs");
    stage(&env, &repo, &["src/x.rs"]);
    let out = git(&env, &repo, &["commit", "-q", "-m", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("src/x.rs: held by"),
        "{}",
        describe(&out)
    );
    let out = env.maos_at(&repo, &["uninstall-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(!hook.exists());
    assert!(
        repo.join(".githooks").is_dir(),
        "the user's hooks directory went"
    );

    // A linked worktree: the hook goes where git looks, the repository's common hooks, and a
    // commit there is checked against the project's locks (one project for every worktree).
    let main = self::repo(&env, "main");
    let wt = env.root().join("wt");
    git_ok(
        &env,
        &main,
        &["worktree", "add", "-q", &wt.display().to_string()],
    );
    let out = env.maos_at(&wt, &["install-hooks", "--git"]);
    assert!(out.status.success(), "{}", describe(&out));
    assert!(main.join(".git/hooks/pre-commit").is_file());
    let _window = window_writing(&env, &main, "claude-W", "Build the lexer", "src/lex.rs");
    stage(&env, &wt, &["src/lex.rs", "src/free.rs"]);
    let out = git(&env, &wt, &["commit", "-q", "-m", "x"]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(
        stderr(&out).contains("  src/lex.rs: held by"),
        "{}",
        describe(&out)
    );
}

/// A failed install: exit 1, one line on stderr naming the problem, nothing written.
fn refused(env: &Env, dir: &Path, cmd: Option<Command>, expect: &str) {
    let cmd = cmd.unwrap_or_else(|| {
        let mut c = env.maos_cmd_at(dir, &["install-hooks", "--git"]);
        c.current_dir(dir);
        c
    });
    let out = run_with_timeout(cmd, TIMEOUT);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    let text = stderr(&out);
    assert_eq!(text.trim().lines().count(), 1, "not one line: {text}");
    assert!(text.contains(expect), "{expect:?} is not in {text}");
    assert!(
        !env.home.join("install.json").exists(),
        "install.json was written"
    );
}

#[test]
fn bad_set_ups_are_one_line_and_change_nothing() {
    let env = Env::new();
    // Not a git repository.
    let plain = env.root().join("plain");
    std::fs::create_dir_all(plain.join(".maos")).expect("mkdir");
    refused(&env, &plain, None, "is not in a git");
    assert_eq!(std::fs::read_dir(&plain).expect("dir").count(), 1);

    // core.hooksPath naming a directory that does not exist.
    let repo = repo(&env, "repo");
    git_ok(&env, &repo, &["config", "core.hooksPath", "missing/hooks"]);
    refused(&env, &repo, None, "missing/hooks, which is not a directory");
    assert!(!repo.join("missing").exists());
    assert!(!repo.join(".git/hooks/pre-commit").exists());

    // A hooks directory it may not write.
    let repo = self::repo(&env, "ro");
    let hooks = repo.join(".git/hooks");
    let old = hooks.join("pre-commit");
    std::fs::write(&old, "#!/bin/sh\nexit 0\n").expect("write");
    std::fs::set_permissions(&old, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let before: Vec<_> = {
        let mut v: Vec<_> = std::fs::read_dir(&hooks)
            .expect("hooks")
            .map(|e| e.expect("entry").file_name())
            .collect();
        v.sort();
        v
    };
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o555)).expect("chmod");
    let mut cmd = env.maos_cmd_at(&repo, &["install-hooks", "--git"]);
    maos_tests::without_dac_override(&mut cmd);
    refused(&env, &repo, Some(cmd), "Permission denied");
    std::fs::set_permissions(&hooks, std::fs::Permissions::from_mode(0o755)).expect("chmod");
    let mut after: Vec<_> = std::fs::read_dir(&hooks)
        .expect("hooks")
        .map(|e| e.expect("entry").file_name())
        .collect();
    after.sort();
    assert_eq!(after, before);
    assert_eq!(
        std::fs::read_to_string(&old).expect("read"),
        "#!/bin/sh\nexit 0\n"
    );

    // --git with another CLI's flag is a usage error.
    let out = env.maos_at(&repo, &["install-hooks", "--git", "--codex"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
}
