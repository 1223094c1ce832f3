//! Shell integration through the real binary: completion scripts, man pages and `maos
//! --version`. The list of subcommands is discovered from `maos --help` itself, so that a new
//! command is checked without touching this file.

use std::io::Read;
use std::os::unix::net::UnixListener;
use std::path::Path;
use std::process::{Command, Output};
use std::time::{Duration, Instant};

use maos_proto::{ErrorBody, ErrorCode, PROTOCOL_VERSION, ServerMsg, StartedBy};
use maos_tests::{COMMAND_TIMEOUT, Env, Value, describe, maos_bin, run_with_timeout};

const VERSION: &str = env!("CARGO_PKG_VERSION");

/// `maos ARGS` with the test's environment but without the harness's `--project`.
fn maos_bare(env: &Env, args: &[&str]) -> Output {
    let mut cmd = env.command(&maos_bin());
    cmd.args(args);
    run_with_timeout(cmd, COMMAND_TIMEOUT)
}

fn stdout(out: &Output) -> String {
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The command names a clap help text lists (without `help`): those under `Commands:`, or, in
/// the root's help, under each group's heading (`Watch:`, ...; every heading but `Options:`).
fn commands_in_help(help: &str) -> Vec<String> {
    let mut names = Vec::new();
    let mut listing = false;
    for l in help.lines() {
        if !l.starts_with(' ') && l.ends_with(':') {
            listing = l != "Options:" && l != "Arguments:";
            continue;
        }
        if l.trim().is_empty() {
            listing = false;
            continue;
        }
        // Entries are indented by two spaces; anything deeper would be a wrapped description.
        if listing && l.starts_with("  ") && !l.starts_with("   ") {
            names.extend(
                l.split_whitespace()
                    .next()
                    .filter(|name| *name != "help")
                    .map(str::to_string),
            );
        }
    }
    names
}

/// Every subcommand path at every depth (`["daemon"]`, `["daemon", "install"]`, ...), found by
/// walking `maos --help` and `maos PATH --help`.
fn subcommand_paths(env: &Env) -> Vec<Vec<String>> {
    let mut found = Vec::new();
    let mut todo: Vec<Vec<String>> = vec![Vec::new()];
    while let Some(path) = todo.pop() {
        let mut args: Vec<&str> = path.iter().map(String::as_str).collect();
        args.push("--help");
        let out = maos_bare(env, &args);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        for name in commands_in_help(&stdout(&out)) {
            let mut sub = path.clone();
            sub.push(name);
            todo.push(sub.clone());
            found.push(sub);
        }
    }
    found.sort();
    found
}

fn has_path(paths: &[Vec<String>], want: &[&str]) -> bool {
    paths
        .iter()
        .any(|p| p.iter().map(String::as_str).eq(want.iter().copied()))
}

#[test]
fn subcommands_are_discovered_at_every_depth() {
    let env = Env::new();
    let paths = subcommand_paths(&env);
    for want in [
        &["daemon"][..],
        &["daemon", "install"],
        &["daemon", "uninstall"],
        &["session", "create"],
        &["lock", "release-all"],
        &["completions"],
        &["man"],
    ] {
        assert!(has_path(&paths, want), "{want:?} not found in {paths:?}");
    }
    assert!(!paths.iter().flatten().any(|n| n == "help"), "{paths:?}");
}

#[test]
fn completions_cover_every_subcommand_and_bash_loads_them() {
    let env = Env::new();
    let paths = subcommand_paths(&env);
    let mut names: Vec<&str> = paths.iter().flatten().map(String::as_str).collect();
    names.sort_unstable();
    names.dedup();
    for shell in ["bash", "zsh", "fish"] {
        let out = maos_bare(&env, &["completions", shell]);
        assert!(out.status.success(), "{shell}: {}", describe(&out));
        let script = stdout(&out);
        for name in &names {
            assert!(
                script.contains(name),
                "the {shell} completions do not mention {name:?}"
            );
        }
    }

    // bash loads the script, registers it for `maos`, and it completes subcommands at both
    // depths.
    let probe = r#"source <("$1" completions bash) || exit 1
complete -p maos || exit 1
COMP_WORDS=(maos dae); COMP_CWORD=1; _maos maos dae maos; echo "top: ${COMPREPLY[*]}"
COMP_WORDS=(maos daemon ins); COMP_CWORD=2; _maos maos ins daemon; echo "sub: ${COMPREPLY[*]}""#;
    let mut bash = Command::new("bash");
    bash.args(["-c", probe, "bash"]).arg(maos_bin());
    let out = run_with_timeout(bash, COMMAND_TIMEOUT);
    assert!(out.status.success(), "{}", describe(&out));
    let text = stdout(&out);
    assert!(text.contains("_maos maos"), "{text}");
    assert!(text.lines().any(|l| l == "top: daemon"), "{text}");
    assert!(text.lines().any(|l| l == "sub: install"), "{text}");

    // zsh and fish are not on every machine: where they are, they parse their scripts.
    for shell in ["zsh", "fish"] {
        if Command::new(shell).arg("--version").output().is_err() {
            continue;
        }
        let file = env.root().join(format!("maos.{shell}"));
        std::fs::write(&file, stdout(&maos_bare(&env, &["completions", shell]))).expect("script");
        let mut check = Command::new(shell);
        check.arg("-n").arg(&file);
        let out = run_with_timeout(check, COMMAND_TIMEOUT);
        assert!(out.status.success(), "{shell} -n: {}", describe(&out));
    }
}

#[test]
fn an_unknown_shell_is_refused_in_one_line() {
    let env = Env::new();
    let out = maos_bare(&env, &["completions", "powershell"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    for word in ["powershell", "bash", "zsh", "fish"] {
        assert!(err.contains(word), "the error should name {word:?}: {err}");
    }
}

#[test]
fn the_man_page_lists_every_top_level_command() {
    let env = Env::new();
    let out = maos_bare(&env, &["man"]);
    assert!(out.status.success(), "{}", describe(&out));
    let roff = stdout(&out);
    assert!(roff.contains(".TH maos 1"), "not a man page: {roff}");
    assert!(roff.contains(&format!("maos {VERSION}")), "{roff}");
    // roff escapes a hyphen as `\-`.
    let unescaped = roff.replace("\\-", "-");
    for path in subcommand_paths(&env).iter().filter(|p| p.len() == 1) {
        assert!(
            unescaped.contains(&path[0]),
            "the man page does not mention {:?}",
            path[0]
        );
    }
    assert!(!env.socket.exists(), "`maos man` started a daemon");
}

#[test]
fn man_dir_writes_a_page_per_subcommand() {
    let env = Env::new();
    let dir = env.root().join("share").join("man").join("man1");
    let out = maos_bare(&env, &["man", "--dir", dir.to_str().expect("utf-8 path")]);
    assert!(out.status.success(), "{}", describe(&out));
    let paths = subcommand_paths(&env);
    let mut expected: Vec<String> = paths
        .iter()
        .map(|p| format!("maos-{}.1", p.join("-")))
        .collect();
    expected.push("maos.1".into());
    expected.sort();
    let mut written: Vec<String> = std::fs::read_dir(&dir)
        .expect("the man directory")
        .map(|e| e.expect("entry").file_name().to_string_lossy().into_owned())
        .collect();
    written.sort();
    // Exactly the pages: no temporary file left behind, no page for `help`.
    assert_eq!(written, expected);
    let page = std::fs::read_to_string(dir.join("maos-daemon-install.1")).expect("page");
    assert!(page.contains(".TH maos-daemon-install 1"), "{page}");
    assert!(page.replace("\\-", "-").contains("--files-only"), "{page}");

    // Again over the same directory: the pages are replaced, not refused.
    let out = maos_bare(
        &env,
        &["--json", "man", "--dir", dir.to_str().expect("utf-8")],
    );
    assert!(out.status.success(), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["pages"].as_array().map(Vec::len),
        Some(expected.len()),
        "{v}"
    );
}

#[test]
fn an_unwritable_man_dir_fails_in_one_line_naming_it() {
    let env = Env::new();
    // A path under a regular file: not creatable even by root.
    let file = env.root().join("not-a-dir");
    std::fs::write(&file, "x").expect("file");
    let dir = file.join("man1");
    let out = maos_bare(&env, &["man", "--dir", dir.to_str().expect("utf-8")]);
    assert_eq!(out.status.code(), Some(1), "{}", describe(&out));
    assert!(out.stdout.is_empty(), "{}", describe(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(err.trim_end().lines().count(), 1, "{err}");
    assert!(err.contains(&dir.display().to_string()), "{err}");
    assert_eq!(std::fs::read_to_string(&file).expect("file"), "x");
}

/// The two lines of `maos --version`.
fn version_lines(out: &Output) -> (String, String) {
    assert!(out.status.success(), "{}", describe(out));
    let text = stdout(out);
    let lines: Vec<&str> = text.lines().collect();
    assert_eq!(lines.len(), 2, "{text}");
    assert!(out.stderr.is_empty(), "{}", describe(out));
    (lines[0].to_string(), lines[1].to_string())
}

fn client_line() -> String {
    format!("maos {VERSION} (protocol {PROTOCOL_VERSION})")
}

#[test]
fn version_without_a_daemon_says_so_and_starts_none() {
    let env = Env::new();
    for flag in ["--version", "-V"] {
        let (client, daemon) = version_lines(&maos_bare(&env, &[flag]));
        assert_eq!(client, client_line());
        assert_eq!(
            daemon,
            format!("maosd: not running at {}", env.socket.display())
        );
    }
    // With the harness's --project in front, and as JSON in both orders.
    let (client, _) = version_lines(&env.maos(&["-V"]));
    assert_eq!(client, client_line());
    for args in [["--json", "--version"], ["--version", "--json"]] {
        let out = maos_bare(&env, &args);
        assert!(out.status.success(), "{}", describe(&out));
        let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
        assert_eq!(v["client"]["version"], VERSION, "{v}");
        assert_eq!(v["client"]["protocol"], PROTOCOL_VERSION, "{v}");
        assert!(v["daemon"].is_null(), "{v}");
    }
    assert!(!env.socket.exists(), "--version created the socket");
    assert!(
        !env.home.exists(),
        "--version created {}",
        env.home.display()
    );
    assert!(env.daemons().is_empty(), "--version started a daemon");
}

#[test]
fn version_with_a_daemon_shows_both_and_its_pid() {
    let env = Env::new();
    env.maos_json(&["daemon", "start"]);
    let pid = env.daemon_pid();
    let status = env.maos_json(&["daemon", "status"]);
    let started_by = status["started_by"].as_str().expect("started_by");

    let (client, daemon) = version_lines(&maos_bare(&env, &["--version"]));
    assert_eq!(client, client_line());
    assert_eq!(
        daemon,
        format!(
            "maosd {} (protocol {PROTOCOL_VERSION}, pid {pid}, started by {started_by})",
            status["version"].as_str().expect("version")
        )
    );

    let out = maos_bare(&env, &["--json", "-V"]);
    assert!(out.status.success(), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    let d = &v["daemon"];
    assert_eq!(d["pid"], pid, "{v}");
    assert_eq!(d["version"], status["version"], "{v}");
    assert_eq!(d["protocol"], PROTOCOL_VERSION, "{v}");
    assert_eq!(d["started_by"], started_by, "{v}");
    assert!(d.get("error").is_none(), "{v}");
    assert_eq!(
        v["client"],
        serde_json::json!({"version": VERSION, "protocol": PROTOCOL_VERSION})
    );
    assert_eq!(env.daemon_pid(), pid, "--version replaced the daemon");
}

#[test]
fn subcommands_have_no_version_flag_but_the_root_flag_still_wins() {
    let env = Env::new();
    let out = maos_bare(&env, &["daemon", "status", "--version"]);
    assert_eq!(out.status.code(), Some(2), "{}", describe(&out));
    assert!(String::from_utf8_lossy(&out.stderr).contains("--version"));
    // `maos --version ps` prints the version (as git does), and does not start a daemon.
    let (client, _) = version_lines(&maos_bare(&env, &["--version", "ps"]));
    assert_eq!(client, client_line());
    assert!(!env.socket.exists(), "--version ps started a daemon");
    // `maos --help` lists the flag.
    let help = stdout(&maos_bare(&env, &["--help"]));
    assert!(help.contains("-V, --version"), "{help}");
}

/// Something listening on the test's socket instead of a daemon.
fn fake_daemon(env: &Env) -> UnixListener {
    let dir = env.socket.parent().expect("socket dir");
    std::fs::create_dir_all(dir).expect("socket dir");
    UnixListener::bind(&env.socket).expect("bind the fake daemon")
}

/// Serve one connection in the background: read the hello, answer with `answers`, close.
fn answer_once(listener: UnixListener, answers: Vec<ServerMsg>) -> std::thread::JoinHandle<()> {
    std::thread::spawn(move || {
        let (mut stream, _) = listener.accept().expect("accept");
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .expect("timeout");
        let hello: Value = maos_proto::read_frame(&mut stream).expect("hello");
        assert_eq!(hello["kind"], "hello", "{hello}");
        assert_eq!(hello["protocol"], PROTOCOL_VERSION, "{hello}");
        for a in &answers {
            let _ = maos_proto::write_frame(&mut stream, a);
        }
    })
}

fn mismatch() -> ServerMsg {
    ServerMsg::Error {
        error: ErrorBody::new(
            ErrorCode::ProtocolMismatch,
            "protocol mismatch: the running daemon (maosd 9.0.0) speaks 99",
        ),
    }
}

#[test]
fn version_reports_a_refusing_daemon_without_failing() {
    let env = Env::new();
    // Refused at once, as a daemon of another protocol does.
    let server = answer_once(fake_daemon(&env), vec![mismatch()]);
    let (client, daemon) = version_lines(&maos_bare(&env, &["--version"]));
    server.join().expect("fake daemon");
    assert_eq!(client, client_line());
    assert_eq!(
        daemon,
        format!(
            "maosd at {}: protocol mismatch: the running daemon (maosd 9.0.0) speaks 99",
            env.socket.display()
        )
    );

    // A welcome first, then the refusal: what the welcome said is shown, in JSON too.
    std::fs::remove_file(&env.socket).expect("old socket");
    let welcome = ServerMsg::Welcome {
        protocol: 99,
        daemon_version: "9.0.0".into(),
        pid: 4242,
        started_by: StartedBy::Systemd,
    };
    let server = answer_once(fake_daemon(&env), vec![welcome, mismatch()]);
    let out = maos_bare(&env, &["--json", "--version"]);
    server.join().expect("fake daemon");
    assert!(out.status.success(), "{}", describe(&out));
    let v: Value = serde_json::from_slice(&out.stdout).expect("JSON");
    assert_eq!(
        v["daemon"],
        serde_json::json!({
            "version": "9.0.0", "protocol": 99, "pid": 4242, "started_by": "systemd",
            "error": "protocol mismatch: the running daemon (maosd 9.0.0) speaks 99",
        })
    );
}

#[test]
fn version_does_not_hang_on_a_daemon_that_never_answers() {
    let env = Env::new();
    // Connections queue in the listener's backlog and nobody ever reads them.
    let listener = fake_daemon(&env);
    let t = Instant::now();
    let (client, daemon) = version_lines(&maos_bare(&env, &["--version"]));
    let took = t.elapsed();
    assert_eq!(client, client_line());
    assert!(daemon.contains("no answer"), "{daemon}");
    assert!(
        daemon.contains(&env.socket.display().to_string()),
        "{daemon}"
    );
    assert!(took < Duration::from_secs(10), "took {took:?}");
    // The client did connect and say hello: only the answer never came.
    let (mut conn, _) = listener.accept().expect("the queued connection");
    conn.set_read_timeout(Some(Duration::from_secs(5)))
        .expect("timeout");
    let mut hello = Vec::new();
    let _ = conn.read_to_end(&mut hello);
    assert!(!hello.is_empty(), "the client sent no hello");
}

#[test]
fn completion_and_man_need_no_project_or_daemon() {
    let env = Env::new();
    // From a directory that is no project at all.
    let nowhere = env.root().join("user");
    for args in [&["completions", "bash"][..], &["man"]] {
        let mut cmd = env.command(&maos_bin());
        cmd.args(args).current_dir(&nowhere);
        let out = run_with_timeout(cmd, COMMAND_TIMEOUT);
        assert!(out.status.success(), "{args:?}: {}", describe(&out));
        assert!(!out.stdout.is_empty(), "{args:?}");
    }
    assert!(!Path::new(&env.socket).exists());
    assert!(!env.home.exists());
}

/// Every "see README: SECTION" or "see docs/FILE.md: SECTION" in maos's help (all man pages,
/// one per subcommand) names a section that file really has (issue 15: `run --help` pointed at
/// one that does not exist; issue 29 moved the reference into docs/).
#[test]
fn the_help_points_only_at_doc_sections_that_exist() {
    let env = maos_tests::Env::new();
    let dir = env.root().join("man");
    let out = env.maos(&["man", "--dir", dir.to_str().expect("utf-8")]);
    assert!(out.status.success(), "{}", maos_tests::describe(&out));
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/..");
    let headings = |file: &str| -> Vec<String> {
        let text = std::fs::read_to_string(format!("{root}/{file}"))
            .unwrap_or_else(|e| panic!("the help names {file}, which cannot be read: {e}"));
        text.lines()
            .filter_map(|l| {
                ["# ", "## ", "### "]
                    .iter()
                    .find_map(|p| l.strip_prefix(p))
                    .map(str::to_string)
            })
            .collect()
    };
    let mut seen = 0;
    for page in std::fs::read_dir(&dir).expect("pages").flatten() {
        let text = std::fs::read_to_string(page.path()).expect("a page");
        // roff escapes hyphens and dots; the references are plain words.
        let text = text.replace("\\-", "-").replace("\\&", "");
        for (at, _) in text.match_indices("see ") {
            let after = &text[at + 4..];
            let Some((file, name)) = after.split_once(": ") else {
                continue;
            };
            if !(file == "README" || (file.starts_with("docs/") && file.ends_with(".md"))) {
                continue;
            }
            let file = if file == "README" { "README.md" } else { file };
            seen += 1;
            // "Managed sessions (plans))" names a heading whole; "Hooks)" its start.
            let word = name.split([')', '.', '\n']).next().unwrap_or_default();
            assert!(
                headings(file)
                    .iter()
                    .any(|h| name.starts_with(h.as_str())
                        || (!word.is_empty() && h.starts_with(word))),
                "{}: no section in {file} for {:?}",
                page.path().display(),
                name.lines().next().unwrap_or_default()
            );
        }
    }
    assert!(seen >= 2, "the references were not found in the pages");
}
