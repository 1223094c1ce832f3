//! `hook-shell`: what reading a shell command before it runs (issue 31) costs a hook. A Claude
//! Code `Bash` `PreToolUse` with a realistic 2 KB command (pipes, `&&` chains, a loop, a
//! here-document, a `sed -i` of a free file) through the whole `maos hook` process against a
//! warm daemon, interleaved with the plain `hook` scenario's `Write` and the empty binary;
//! then the parse alone (`maos_shell::analyze` of the same command, in process).

use std::fs;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Instant;

use maos_tests::client::Res;

use crate::harness::{self, spawn_timed};
use crate::opts::Opts;
use crate::report::{Metric, label, median, pct, print_human};

/// A command as an agent sends one: build and test with their output trimmed, a loop over the
/// sources, a rename with `sed -i` in one file (free, so its lock is taken), a here-document
/// fed to an interpreter, git's view at the end. About 2 KB.
pub fn command() -> String {
    let mut c = String::from(
        "set -euo pipefail\n\
         cargo build --workspace --bins 2>&1 | grep -E '^(warning|error)' | sort | uniq -c | head -n 20 \
         && cargo test -p maos-core --lib -- --test-threads=2 2>&1 | grep -E '^test result|FAILED|panicked' | tail -n 5 \
         || { echo 'build or tests failed' >&2; exit 1; }\n\
         for f in src/*.rs tests/*.rs; do printf '%6d %s\\n' \"$(wc -l < \"$f\")\" \"$f\"; done | sort -rn | head -n 5\n\
         grep -rn --include='*.rs' 'old_name' src tests | cut -d: -f1 | sort -u | xargs -r wc -l | tail -n 1\n\
         sed -i -e 's/old_name/new_name/g' -e 's/OLD_NAME/NEW_NAME/g' src/b.rs && grep -c new_name src/b.rs || true\n\
         python3 - <<'EOF'\n",
    );
    // The here-document: a script that reads a report, as an agent writes one inline.
    let script = "import json, pathlib, sys\n\
                  # Summarise the test report the previous step left, if any.\n\
                  report = pathlib.Path('target/report.json')\n\
                  if not report.exists():\n    print('no report')\n    sys.exit(0)\n\
                  data = json.loads(report.read_text())\n\
                  failed = [t for t in data.get('tests', []) if t.get('outcome') != 'passed']\n\
                  for t in failed[:10]:\n    print(t.get('name'), t.get('outcome'), sep='\\t')\n\
                  print(f'{len(failed)} failed of {len(data.get(\"tests\", []))}')\n";
    c.push_str(script);
    // Comments pad it to a realistic size without changing what it does.
    while c.len() < 1850 {
        c.push_str("# keep the failures' names for the summary below; nothing is written here\n");
    }
    c.push_str(
        "EOF\n\
         git status --short && git diff --stat | tail -n 1 && git log --oneline -3 \
         | cat > /dev/null 2>&1 || echo 'no git' >&2\n\
         ls -la src | awk '{ s += $5 } END { print s \" bytes in src\" }'\n",
    );
    c
}

/// `hook-shell`: interleaved rounds of three processes against one warm daemon: `maos hook`
/// with the `Bash` command, `maos hook` with the `hook` scenario's `Write` (2 KB of content),
/// the empty binary; p50/p99 of each hook and the median ratio to the empty binary of the
/// same round. Then `maos_shell::analyze` of the command alone, in process.
pub fn scen_hook_shell(o: &Opts, sync: &str) -> Res<Vec<Metric>> {
    let n = o.requests.unwrap_or(200);
    let d = harness::start(sync)?;
    let maos = harness::client_bin()?;
    let empty = harness::bin_dir()?.join("empty");
    let command = command();
    let base = serde_json::json!({
        "session_id": "bench-session", "cwd": d.env.project, "hook_event_name": "PreToolUse",
    });
    let with = |extra: serde_json::Value| {
        let mut v = base.clone();
        if let (Some(v), serde_json::Value::Object(extra)) = (v.as_object_mut(), extra) {
            v.extend(extra);
        }
        v
    };
    let bash_input = d.env.root().join("pre-tool-use-bash.json");
    let write_input = d.env.root().join("pre-tool-use-write.json");
    let inputs = [
        (
            &bash_input,
            with(
                serde_json::json!({"tool_name": "Bash", "tool_use_id": "toolu_bench_bash",
                "tool_input": {"command": command, "description": "build, test, rename"}}),
            ),
        ),
        (
            &write_input,
            with(
                serde_json::json!({"tool_name": "Write", "tool_use_id": "toolu_bench",
                "tool_input": {"file_path": d.env.project.join("src/a.rs"),
                               "content": "x".repeat(2000)}}),
            ),
        ),
    ];
    for (path, body) in &inputs {
        fs::write(path, body.to_string()).map_err(|e| format!("{}: {e}", path.display()))?;
    }
    let cmd = |bin: &Path, args: &[&str], input: &Path| -> Res<Command> {
        let mut c = d.client_command(bin);
        let stdin = fs::File::open(input).map_err(|e| format!("{}: {e}", input.display()))?;
        c.args(args).stdin(stdin);
        Ok(c)
    };
    // The command is read, not waved through: the hook allows it (it says nothing), and the
    // daemon took the lock of the file its `sed -i` writes for the window's agent.
    let first = cmd(&maos, &["hook"], &bash_input)?
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("cannot run {}: {e}", maos.display()))?;
    if !first.status.success() || !first.stdout.is_empty() {
        return Err(format!(
            "the Bash hook did not allow the command: {first:?}"
        ));
    }
    let locks = d
        .client_command(&maos)
        .args(["--json", "lock", "list"])
        .env("MAOS_PROJECT", &d.env.project)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .output()
        .map_err(|e| format!("maos lock list: {e}"))?;
    if !String::from_utf8_lossy(&locks.stdout).contains("\"src/b.rs\"") {
        return Err(format!(
            "the command's sed -i did not take src/b.rs's lock: {locks:?}"
        ));
    }
    for _ in 0..3 {
        spawn_timed(&mut cmd(&maos, &["hook"], &bash_input)?)?;
        spawn_timed(&mut cmd(&maos, &["hook"], &write_input)?)?;
        spawn_timed(&mut cmd(&empty, &[], &write_input)?)?;
    }
    let (mut bash, mut write, mut nothing) = (Vec::new(), Vec::new(), Vec::new());
    let (mut bash_r, mut write_r) = (Vec::new(), Vec::new());
    for _ in 0..n {
        let b = spawn_timed(&mut cmd(&maos, &["hook"], &bash_input)?)?;
        let w = spawn_timed(&mut cmd(&maos, &["hook"], &write_input)?)?;
        let e = spawn_timed(&mut cmd(&empty, &[], &write_input)?)?;
        bash.push(b);
        write.push(w);
        nothing.push(e);
        bash_r.push(b / e);
        write_r.push(w / e);
    }
    let mut d = d;
    d.stop()?;

    // The parse alone: what the daemon adds for reading the command.
    let rounds = (n * 10).max(1000);
    let mut parse = Vec::with_capacity(rounds);
    let mut writes = 0;
    for _ in 0..rounds {
        let t = Instant::now();
        let a = maos_shell::analyze(&command);
        parse.push(t.elapsed().as_nanos() as u64);
        writes = a.writes.len();
    }
    parse.sort_unstable();
    if writes == 0 {
        return Err("maos_shell::analyze found no write in the command (its sed -i)".into());
    }

    let ns = |v: &[f64]| -> Vec<u64> {
        let mut v: Vec<u64> = v.iter().map(|s| (s * 1e9) as u64).collect();
        v.sort_unstable();
        v
    };
    let (bash_ns, write_ns, empty_ns) = (ns(&bash), ns(&write), ns(&nothing));
    let shell = label(
        &format!("`maos hook` PreToolUse Bash ({} B command)", command.len()),
        sync,
    );
    let plain = label("`maos hook` PreToolUse Write (as `hook`)", sync);
    let parse_name = format!("maos_shell::analyze ({} B command)", command.len());
    let rows = vec![
        Metric::new(
            &shell,
            "Bash: median ratio to empty",
            median(&mut bash_r),
            "×",
        ),
        Metric::new(&shell, "Bash: p50", pct(&bash_ns, 50.0), "µs"),
        Metric::new(&shell, "Bash: p99", pct(&bash_ns, 99.0), "µs"),
        Metric::new(
            &plain,
            "Write: median ratio to empty",
            median(&mut write_r),
            "×",
        ),
        Metric::new(&plain, "Write: p50", pct(&write_ns, 50.0), "µs"),
        Metric::new(&plain, "Write: p99", pct(&write_ns, 99.0), "µs"),
        Metric::new(&plain, "empty binary: p50", pct(&empty_ns, 50.0), "µs"),
        Metric::new(&parse_name, "parse alone: p50", pct(&parse, 50.0), "µs"),
        Metric::new(&parse_name, "parse alone: p99", pct(&parse, 99.0), "µs"),
    ];
    print_human(
        &format!(
            "hook-shell: whole-process `maos hook` ({}) Bash vs Write vs `empty`, {n} \
             interleaved rounds, synchronous={sync}; then {rounds} in-process parses",
            maos.display()
        ),
        &rows,
    );
    Ok(rows)
}
