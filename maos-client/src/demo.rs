//! `maos demo`: a newcomer's tour, in a throw-away project with its own daemon (its own
//! `MAOS_HOME` and socket, so the user's real state is never touched). Part 1 (`hooks`) replays
//! a Claude Code session with two subagents through real `maos hook` processes, one per event,
//! fed exactly the JSON Claude Code sends: the conflicting write is denied, `maos ps` shows the
//! spawn tree, `maos events` the timeline. Part 2 (`managed`) runs a plan of small local
//! agents under the adaptive strategy, kills the daemon with SIGKILL while two of them run, lets
//! them finish while it is down, and shows the restarted daemon's recovery and the completed
//! session. Part 3 (`cli`) drives a session with phases and agents through its life by running
//! real `maos` commands, and prints each command with its output.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

struct Demo {
    exe: PathBuf,
    dir: PathBuf,
    home: PathBuf,
    socket: PathBuf,
    project: PathBuf,
    keep: bool,
}

impl Demo {
    fn new(keep: bool) -> Result<Demo, String> {
        let exe = std::env::current_exe().map_err(|e| format!("cannot find myself: {e}"))?;
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or(0);
        let dir = std::env::temp_dir().join(format!("maos-demo-{}-{nanos}", std::process::id()));
        let project = dir.join("project");
        std::fs::create_dir_all(project.join(".maos"))
            .map_err(|e| format!("cannot create {}: {e}", project.display()))?;
        // Canonical, as the paths an agent CLI sends are (a symlinked TMPDIR would differ).
        let dir = std::fs::canonicalize(&dir)
            .map_err(|e| format!("cannot resolve {}: {e}", dir.display()))?;
        let project = dir.join("project");
        let run = dir.join("run");
        maos_proto::paths::ensure_private_dir(&run).map_err(|e| e.to_string())?;
        Ok(Demo {
            exe,
            home: dir.join("home"),
            socket: run.join("maosd.sock"),
            project,
            dir,
            keep,
        })
    }

    /// Run `maos ARGS` in the demo project, echoing the command and its output.
    fn run(&self, args: &[&str]) -> Result<String, String> {
        let shown: Vec<String> = args
            .iter()
            .map(|a| {
                if a.contains(' ') || a.contains('{') {
                    format!("'{a}'")
                } else {
                    (*a).to_string()
                }
            })
            .collect();
        outln!("{}", paint("1", &format!("$ maos {}", shown.join(" "))));
        let out = self.command(args)?;
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        out!("{stdout}");
        let stderr = String::from_utf8_lossy(&out.stderr);
        if !stderr.trim().is_empty() {
            out!("{stderr}");
        }
        outln!();
        if !out.status.success() {
            return Err(format!(
                "`maos {}` failed: {}",
                args.join(" "),
                stderr.trim()
            ));
        }
        Ok(stdout)
    }

    /// Like `run`, for a step that is expected to be refused.
    fn refused(&self, args: &[&str]) -> Result<(), String> {
        match self.run(args) {
            Err(_) => Ok(()),
            Ok(_) => Err(format!(
                "`maos {}` should have been refused",
                args.join(" ")
            )),
        }
    }

    fn command(&self, args: &[&str]) -> Result<std::process::Output, String> {
        self.base(args)
            .output()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Start `maos ARGS` in the background (echoed with a trailing `&`).
    fn spawn(&self, args: &[&str]) -> Result<std::process::Child, String> {
        outln!("{}", paint("1", &format!("$ maos {} &", args.join(" "))));
        self.base(args)
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {}: {e}", self.exe.display()))
    }

    /// Wait (with a deadline) until `maos lock list` shows a queued request.
    fn until_waiting(&self) -> Result<(), String> {
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while std::time::Instant::now() < deadline {
            let out = self.command(&["--json", "lock", "list"])?;
            let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap_or_default();
            if v["waiters"].as_array().is_some_and(|w| !w.is_empty()) {
                return Ok(());
            }
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        Err("the background lock request never queued".into())
    }

    fn base(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(&self.exe);
        cmd.args(args)
            .current_dir(&self.project)
            .env("MAOS_HOME", &self.home)
            .env("MAOS_SOCKET", &self.socket)
            .env("MAOS_PROJECT", &self.project)
            .env_remove("MAOS_NO_AUTOSTART");
        cmd
    }

    /// The id printed by `created session ID` / `registered agent ID (...)`.
    fn id_of(out: &str) -> Result<String, String> {
        out.split_whitespace()
            .nth(2)
            .map(str::to_string)
            .ok_or_else(|| format!("no id in {out:?}"))
    }
}

impl Drop for Demo {
    fn drop(&mut self) {
        let _ = self.command(&["daemon", "stop"]);
        if self.keep {
            outln!(
                "kept {} (database under home/projects/)",
                self.dir.display()
            );
        } else {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Bold or coloured text on a terminal, plain text in a pipe.
fn paint(code: &str, text: &str) -> String {
    use std::io::IsTerminal;
    if std::io::stdout().is_terminal() {
        format!("\x1b[{code}m{text}\x1b[0m")
    } else {
        text.to_string()
    }
}

fn say(text: &str) {
    outln!("{}", paint("36", &format!("# {text}")));
}

/// One Claude Code thread: the main thread (maos's orchestrator) or a subagent.
#[derive(Clone, Copy)]
struct Thread {
    /// `agent_id`; none on the main thread.
    id: Option<&'static str>,
    /// `agent_type`.
    kind: &'static str,
}

const MAIN: Thread = Thread {
    id: None,
    kind: "main",
};
const BACKEND: Thread = Thread {
    id: Some("a7f3c2e1"),
    kind: "backend-engineer",
};
const QA: Thread = Thread {
    id: Some("b91d04aa"),
    kind: "qa-engineer",
};

impl Thread {
    fn label(self) -> String {
        match self.id {
            Some(id) => format!("claude[{} {id}]", self.kind),
            None => "claude[main]".to_string(),
        }
    }
}

/// What one `maos hook` process answered.
#[derive(Default)]
struct Answer {
    /// `permissionDecisionReason` of a deny: what the model is told.
    denied: Option<String>,
    /// `additionalContext`: what the model is told at the start of a session or prompt.
    context: Option<String>,
}

/// Claude Code as its hooks see it: one session id, a main thread and subagents, and one
/// `maos hook` process per event with the JSON object Claude Code sends (HOOKS.md).
struct Claude<'a> {
    demo: &'a Demo,
    session_id: &'static str,
    transcript: PathBuf,
    verbose: bool,
    calls: u64,
}

impl Claude<'_> {
    /// The absolute path of `rel` in the project (Claude Code sends absolute paths).
    fn path(&self, rel: &str) -> String {
        self.demo.project.join(rel).to_string_lossy().into_owned()
    }

    /// A path as shown: relative to the project.
    fn shown<'p>(&self, path: &'p str) -> &'p str {
        Path::new(path)
            .strip_prefix(&self.demo.project)
            .ok()
            .and_then(Path::to_str)
            .unwrap_or(path)
    }

    /// A fresh `tool_use_id`, shaped like Claude Code's.
    fn tool_use_id(&mut self) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
        self.calls += 1;
        let mut x = 0x9E37_79B9_7F4A_7C15_u64 ^ self.calls.wrapping_mul(0xBF58_476D_1CE4_E5B9);
        let tail: String = (0..24)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                char::from(ALPHABET[(x % ALPHABET.len() as u64) as usize])
            })
            .collect();
        format!("toolu_01{tail}")
    }

    /// The hook input: the fields every event has, the subagent's ids, then the event's own.
    fn input(&self, who: Thread, event: &str, fields: Value) -> Value {
        let mut v = json!({
            "session_id": self.session_id,
            "transcript_path": self.transcript,
            "cwd": self.demo.project,
            "hook_event_name": event,
        });
        if let Some(id) = who.id {
            v["agent_id"] = json!(id);
            v["agent_type"] = json!(who.kind);
        }
        if let (Some(map), Value::Object(extra)) = (v.as_object_mut(), fields) {
            map.extend(extra);
        }
        v
    }

    /// Run `maos hook` once, as Claude Code does: the object on stdin, the answer on stdout.
    fn call(&self, input: &Value) -> Result<(Answer, Duration), String> {
        let event = input["hook_event_name"].as_str().unwrap_or("?");
        if self.verbose {
            outln!("{}", paint("2", &format!("    stdin:  {input}")));
        }
        let started = Instant::now();
        let mut child = self
            .demo
            .base(&["hook"])
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("cannot run {} hook: {e}", self.demo.exe.display()))?;
        // Dropping stdin after the write closes it, as Claude Code does.
        let sent = match child.stdin.take() {
            Some(mut stdin) => stdin.write_all(input.to_string().as_bytes()),
            None => Err(std::io::Error::other("no stdin")),
        };
        let out = child
            .wait_with_output()
            .map_err(|e| format!("waiting for `maos hook` ({event}): {e}"))?;
        let took = started.elapsed();
        let stdout = String::from_utf8_lossy(&out.stdout);
        let stderr = String::from_utf8_lossy(&out.stderr);
        if self.verbose {
            for (name, text) in [("stdout", &stdout), ("stderr", &stderr)] {
                if !text.trim().is_empty() {
                    outln!("{}", paint("2", &format!("    {name}: {}", text.trim())));
                }
            }
        }
        if !out.status.success() {
            return Err(format!(
                "`maos hook` failed on {event} ({}): {}",
                out.status,
                stderr.trim()
            ));
        }
        sent.map_err(|e| format!("cannot give `maos hook` its {event} input: {e}"))?;
        let mut answer = Answer::default();
        if stdout.trim().is_empty() {
            return Ok((answer, took));
        }
        let v: Value = serde_json::from_str(stdout.trim()).map_err(|e| {
            format!("`maos hook` answered {event} with something other than one JSON object ({e}): {stdout}")
        })?;
        if let Some(msg) = v["systemMessage"].as_str() {
            return Err(format!("`maos hook` could not check {event}: {msg}"));
        }
        let specific = &v["hookSpecificOutput"];
        if specific["permissionDecision"] == "deny" {
            let reason = specific["permissionDecisionReason"].as_str().unwrap_or("");
            answer.denied = Some(reason.to_string());
        }
        answer.context = specific["additionalContext"].as_str().map(str::to_string);
        Ok((answer, took))
    }

    /// Send one event and print it on one line (a denial's reason on the next).
    fn send(&self, who: Thread, event: &str, what: &str, fields: Value) -> Result<Answer, String> {
        let (answer, took) = self.call(&self.input(who, event, fields))?;
        let mut line = vec![
            paint("2", &format!("{:<33}", who.label())),
            paint("1", event),
        ];
        if !what.is_empty() {
            line.push(what.to_string());
        }
        match (&answer.denied, event) {
            (Some(_), _) => line.push(paint("1;31", "→ denied")),
            (None, "PreToolUse") => line.push(paint("32", "→ allowed")),
            _ => {}
        }
        line.push(paint("2", &format!("({} ms)", took.as_millis())));
        outln!("{}", line.join(" "));
        if let Some(reason) = &answer.denied {
            outln!("    {} {reason}", paint("2", "the model is told:"));
        }
        if let Some(context) = &answer.context {
            outln!("    {} {context}", paint("2", "the model is told:"));
        }
        Ok(answer)
    }

    /// What a tool call is about, for its line.
    fn about(&self, tool: &str, input: &Value) -> String {
        match tool {
            "Agent" | "Task" => format!(
                "{tool} {} \"{}\"",
                input["subagent_type"].as_str().unwrap_or("?"),
                input["description"].as_str().unwrap_or("")
            ),
            _ => match input["file_path"].as_str() {
                Some(p) => format!("{tool} {}", self.shown(p)),
                None => tool.to_string(),
            },
        }
    }

    /// PreToolUse: the tool call id and, if maos refused it, the reason.
    fn pre(
        &mut self,
        who: Thread,
        tool: &str,
        input: &Value,
    ) -> Result<(String, Option<String>), String> {
        let id = self.tool_use_id();
        let about = self.about(tool, input);
        let answer = self.send(
            who,
            "PreToolUse",
            &about,
            json!({
                "permission_mode": "default",
                "tool_name": tool,
                "tool_input": input,
                "tool_use_id": id,
            }),
        )?;
        Ok((id, answer.denied))
    }

    /// A tool call the story expects maos to allow; its `tool_use_id`.
    fn allowed(&mut self, who: Thread, tool: &str, input: &Value) -> Result<String, String> {
        match self.pre(who, tool, input)? {
            (id, None) => Ok(id),
            (_, Some(reason)) => Err(format!(
                "{} {} should have been allowed, but maos denied it: {reason}",
                who.label(),
                self.about(tool, input)
            )),
        }
    }

    /// A tool call the story expects maos to deny; the reason the model gets.
    fn denied(&mut self, who: Thread, tool: &str, input: &Value) -> Result<String, String> {
        match self.pre(who, tool, input)? {
            (_, Some(reason)) => Ok(reason),
            (_, None) => Err(format!(
                "{} {} should have been denied (another agent is writing that file), but maos allowed it",
                who.label(),
                self.about(tool, input)
            )),
        }
    }

    fn post(
        &self,
        who: Thread,
        tool: &str,
        input: &Value,
        id: &str,
        response: Value,
    ) -> Result<(), String> {
        self.send(
            who,
            "PostToolUse",
            &self.about(tool, input),
            json!({
                "permission_mode": "default",
                "tool_name": tool,
                "tool_input": input,
                "tool_response": response,
                "tool_use_id": id,
            }),
        )?;
        Ok(())
    }

    /// A file write maos allows: PreToolUse, the file written on disk as Claude Code would
    /// write it, then PostToolUse with the tool's result.
    fn write(&mut self, who: Thread, tool: &str, input: Value) -> Result<(), String> {
        let id = self.allowed(who, tool, &input)?;
        let response = apply(tool, &input)?;
        self.post(who, tool, &input, &id, response)
    }

    fn event(&self, who: Thread, event: &str, what: &str, fields: Value) -> Result<(), String> {
        match self.send(who, event, what, fields)?.denied {
            None => Ok(()),
            Some(reason) => Err(format!("maos refused {event}: {reason}")),
        }
    }

    fn subagent_start(&self, who: Thread) -> Result<(), String> {
        self.event(who, "SubagentStart", "", json!({}))
    }

    fn subagent_stop(&self, who: Thread) -> Result<(), String> {
        let transcript = self
            .transcript
            .with_extension("")
            .join("subagents")
            .join(format!("agent-{}.jsonl", who.id.unwrap_or("main")));
        self.event(
            who,
            "SubagentStop",
            "",
            json!({ "agent_transcript_path": transcript, "stop_hook_active": false }),
        )
    }
}

/// Do what Claude Code's Write or Edit tool does to the file; the tool's result.
fn apply(tool: &str, input: &Value) -> Result<Value, String> {
    let text = |k: &str| {
        input[k]
            .as_str()
            .ok_or_else(|| format!("{tool} input has no {k}"))
    };
    let path = text("file_path")?;
    match tool {
        "Write" => {
            let content = text("content")?;
            let existed = Path::new(path).exists();
            if let Some(dir) = Path::new(path).parent() {
                std::fs::create_dir_all(dir)
                    .map_err(|e| format!("cannot create {}: {e}", dir.display()))?;
            }
            std::fs::write(path, content).map_err(|e| format!("cannot write {path}: {e}"))?;
            Ok(json!({
                "type": if existed { "update" } else { "create" },
                "filePath": path,
                "content": content,
                "structuredPatch": [],
                "originalFile": null,
            }))
        }
        "Edit" => {
            let (old, new) = (text("old_string")?, text("new_string")?);
            let original =
                std::fs::read_to_string(path).map_err(|e| format!("cannot read {path}: {e}"))?;
            if !original.contains(old) {
                return Err(format!("Edit of {path}: {old:?} is not in the file"));
            }
            std::fs::write(path, original.replacen(old, new, 1))
                .map_err(|e| format!("cannot write {path}: {e}"))?;
            Ok(json!({
                "filePath": path,
                "oldString": old,
                "newString": new,
                "originalFile": original,
                "structuredPatch": [],
                "userModified": false,
                "replaceAll": false,
            }))
        }
        _ => Err(format!("the demo cannot apply {tool}")),
    }
}

const PROMPT: &str = "Add rate limiting to the login endpoint
At most 5 failed attempts per minute per client IP, then 429 with Retry-After. Use a token bucket in src/auth/limit.rs. Have one subagent implement it and another write tests, in parallel.";

const LIMITER: &str = "//! Login rate limiting: a token bucket per client IP.

use std::collections::HashMap;
use std::net::IpAddr;
use std::time::Instant;

pub struct Limiter {
    capacity: f64,
    per_sec: f64,
    buckets: HashMap<IpAddr, (f64, Instant)>,
}

impl Limiter {
    pub fn new(per_minute: u32) -> Limiter {
        let capacity = f64::from(per_minute);
        Limiter { capacity, per_sec: capacity / 60.0, buckets: HashMap::new() }
    }

    /// True when `ip` may try to log in at `now`.
    pub fn allow(&mut self, ip: IpAddr, now: Instant) -> bool {
        let (tokens, last) = self.buckets.entry(ip).or_insert((self.capacity, now));
        let refill = now.duration_since(*last).as_secs_f64() * self.per_sec;
        *tokens = (*tokens + refill).min(self.capacity);
        *last = now;
        if *tokens < 1.0 {
            return false;
        }
        *tokens -= 1.0;
        true
    }
}
";

const LIMITER_TESTS: &str = "use std::net::{IpAddr, Ipv4Addr};
use std::time::{Duration, Instant};

use auth::limit::Limiter;

const IP: IpAddr = IpAddr::V4(Ipv4Addr::LOCALHOST);

#[test]
fn the_sixth_attempt_in_a_minute_is_refused() {
    let (mut limiter, now) = (Limiter::new(5), Instant::now());
    assert!((0..5).all(|_| limiter.allow(IP, now)));
    assert!(!limiter.allow(IP, now));
    assert!(limiter.allow(IP, now + Duration::from_secs(12)));
}
";

/// Part 1: a Claude Code session with two subagents, replayed through the real `maos hook`.
fn hook_replay(keep: bool, verbose: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    let session_id = "4f1c9a2e-8b7d-4e3a-9c55-0d2e6b1a7f90";
    // Where Claude Code keeps the transcript: ~/.claude/projects/<cwd with / as ->/<id>.jsonl.
    let folder = d.project.to_string_lossy().replace(['/', '.'], "-");
    let transcript = d
        .dir
        .join(".claude/projects")
        .join(folder)
        .join(format!("{session_id}.jsonl"));
    let mut claude = Claude {
        demo: &d,
        session_id,
        transcript,
        verbose,
        calls: 0,
    };
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say(
        "Claude Code runs `maos hook` on every event with one JSON object on stdin (`maos install-hooks` sets that up)",
    );
    say(
        "each line below is one real `maos hook` process given what Claude Code sends, and its answer",
    );
    if !verbose {
        say("(`maos demo hooks --verbose` shows the JSON going in and out)");
    }
    outln!();

    say("the user starts claude (its first hook call starts the daemon) and asks for a feature;");
    say("maos makes the session's main thread its orchestrator agent");
    claude.event(
        MAIN,
        "SessionStart",
        "startup",
        json!({ "source": "startup", "model": "claude-opus-4-5" }),
    )?;
    let first = PROMPT.lines().next().unwrap_or(PROMPT);
    claude.event(
        MAIN,
        "UserPromptSubmit",
        &format!("\"{first}\""),
        json!({ "permission_mode": "default", "prompt": PROMPT }),
    )?;

    say("it hands the work to two subagents with the Agent tool; they run in parallel");
    let backend_task = json!({
        "description": "Implement the limiter",
        "subagent_type": "backend-engineer",
        "prompt": "Implement the login rate limiter in src/auth/limit.rs.\n\nA token bucket per client IP, 5 attempts per minute. API: Limiter::new(per_minute) and Limiter::allow(ip, now) -> bool. Another agent writes the tests.",
    });
    let backend_call = claude.allowed(MAIN, "Agent", &backend_task)?;
    claude.subagent_start(BACKEND)?;
    let qa_task = json!({
        "description": "Write the limiter tests",
        "subagent_type": "qa-engineer",
        "prompt": "Write tests for the login rate limiter in tests/limit_test.rs.\n\nThe limiter is being written in src/auth/limit.rs by another agent: Limiter::new(per_minute) and Limiter::allow(ip, now) -> bool, 5 attempts per minute per IP.",
    });
    let qa_call = claude.allowed(MAIN, "Agent", &qa_task)?;
    claude.subagent_start(QA)?;

    outln!();
    say("backend writes the limiter: maos gives it the file's write lock, and the file is written");
    let limiter = claude.path("src/auth/limit.rs");
    claude.write(
        BACKEND,
        "Write",
        json!({ "file_path": limiter, "content": LIMITER }),
    )?;
    say("qa wants to change the same file while backend is still writing it: maos denies the edit");
    say("the reason goes to qa's model, so it knows who holds the file and what to do instead");
    let qa_edit = json!({
        "file_path": limiter,
        "old_string": "pub struct Limiter {",
        "new_string": "#[derive(Debug)]\npub struct Limiter {",
        "replace_all": false,
    });
    claude.denied(QA, "Edit", &qa_edit)?;
    say("qa gets on with its own file");
    claude.write(
        QA,
        "Write",
        json!({ "file_path": claude.path("tests/limit_test.rs"), "content": LIMITER_TESTS }),
    )?;
    outln!();

    say("`maos ps`: the orchestrator with both subagents under it, and the file each one holds");
    d.run(&["ps"])?;

    say("backend is done: its SubagentStop completes it and releases its lock");
    claude.subagent_stop(BACKEND)?;
    say("qa retries the same edit, and now it is allowed");
    claude.write(QA, "Edit", qa_edit)?;
    say("the orchestrator gets backend's result: agentId ties its Agent call to the subagent");
    claude.post(
        MAIN,
        "Agent",
        &backend_task,
        &backend_call,
        json!({
            "status": "completed",
            "agentId": "a7f3c2e1",
            "content": [{ "type": "text", "text": "Added Limiter (token bucket, 5/min per IP) in src/auth/limit.rs." }],
            "totalDurationMs": 41234,
            "totalTokens": 18250,
            "totalToolUseCount": 7,
        }),
    )?;
    claude.subagent_stop(QA)?;
    claude.post(
        MAIN,
        "Agent",
        &qa_task,
        &qa_call,
        json!({
            "status": "completed",
            "agentId": "b91d04aa",
            "content": [{ "type": "text", "text": "Added tests/limit_test.rs; made Limiter Debug." }],
            "totalDurationMs": 52870,
            "totalTokens": 21460,
            "totalToolUseCount": 9,
        }),
    )?;
    say("the main thread answers the user and ends its turn");
    claude.event(MAIN, "Stop", "", json!({ "stop_hook_active": false }))?;
    outln!();

    say("both subagents completed and their locks are released; the orchestrator is still running");
    d.run(&["ps", "--all"])?;
    say("the timeline: what every hook call did, in order");
    d.run(&["events"])?;

    say("the user quits claude; the orchestrator is kept resumable, for `claude --resume`");
    claude.event(
        MAIN,
        "SessionEnd",
        "prompt_input_exit",
        json!({ "reason": "prompt_input_exit" }),
    )?;
    outln!();
    let ps = d.run(&["ps", "--all"])?;
    if !ps.contains("resumable") {
        return Err("after SessionEnd the orchestrator should be resumable".into());
    }
    for file in ["src/auth/limit.rs", "tests/limit_test.rs"] {
        let text = std::fs::read_to_string(d.project.join(file))
            .map_err(|e| format!("{file} should have been written: {e}"))?;
        if file == "src/auth/limit.rs" && !text.contains("#[derive(Debug)]") {
            return Err(format!("{file} is missing qa's edit"));
        }
    }
    say(
        "src/auth/limit.rs and tests/limit_test.rs are on disk, each written while its writer held the lock",
    );
    Ok(())
}

/// The plan of part 2. Backend and tests wait for the file `go`, which the demo creates once it
/// has killed the daemon: they are mid-run at the kill and end while the daemon is down, on
/// cue rather than on a timer. The bound (a minute) keeps an interrupted demo from leaving them
/// waiting forever.
const PLAN: &str = r#"# A managed session: maos starts these agents, watches them, and records how each one ended.
# Here they are small shell scripts; in real use an agent is e.g.
#   command = ["claude", "-p", "{task}", "--session-id", "{claude_session_id}"]
objective = "Add rate limiting to the login endpoint"
strategy = "adaptive"    # each agent starts as soon as the agents it depends on completed

[[agent]]
name = "architect"
task = "Design the token bucket; write the design to docs/limiter.md"
command = ["sh", "-c", "mkdir -p docs && echo 'A token bucket per client IP: 5 attempts per minute, then 429 with Retry-After.' > docs/limiter.md && echo 'design written to docs/limiter.md'"]

# backend and tests wait for the file `go` (at most a minute): the demo creates it after the kill
[[agent]]
name = "backend"
task = "Implement the limiter of docs/limiter.md in src/auth/limit.rs"
depends_on = ["architect"]
command = ["sh", "-c", "echo 'implementing docs/limiter.md'; n=0; until [ -e go ]; do n=$((n+1)); [ $n -lt 600 ] || exit 1; sleep 0.1; done; mkdir -p src/auth && echo 'pub struct Limiter;' > src/auth/limit.rs && echo 'wrote src/auth/limit.rs'"]

[[agent]]
name = "tests"
task = "Write tests for the limiter of docs/limiter.md in tests/limit_test.rs"
depends_on = ["architect"]
command = ["sh", "-c", "echo 'writing tests for docs/limiter.md'; n=0; until [ -e go ]; do n=$((n+1)); [ $n -lt 600 ] || exit 1; sleep 0.1; done; mkdir -p tests && echo 'use auth::limit::Limiter; // the sixth attempt in a minute is refused' > tests/limit_test.rs && echo 'wrote tests/limit_test.rs'"]

[[agent]]
name = "reviewer"
task = "Review the limiter and its tests against docs/limiter.md"
depends_on = ["backend", "tests"]
command = ["sh", "-c", "grep -q Limiter src/auth/limit.rs && grep -q Limiter tests/limit_test.rs && echo 'approved: the limiter and its tests follow docs/limiter.md' | tee docs/review.md"]
"#;

/// The agents of [`PLAN`], in order, and the two that are running when the daemon is killed.
const PLAN_AGENTS: [&str; 4] = ["architect", "backend", "tests", "reviewer"];
const MID_RUN: [&str; 2] = ["backend", "tests"];

/// How long the managed part waits for any one thing (an agent to start, a process to end,
/// the session to complete); the scripts take well under a second.
const PATIENCE: Duration = Duration::from_secs(30);

/// Poll `check` until it has an answer, or fail naming `what` after `PATIENCE`.
fn poll<T>(what: &str, mut check: impl FnMut() -> Result<Option<T>, String>) -> Result<T, String> {
    let deadline = Instant::now() + PATIENCE;
    loop {
        if let Some(v) = check()? {
            return Ok(v);
        }
        if Instant::now() > deadline {
            return Err(format!(
                "gave up after {}s waiting for {what}",
                PATIENCE.as_secs()
            ));
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// Whether the process is gone (a zombie nobody reaped yet counts as gone).
fn gone(pid: u32) -> bool {
    // SAFETY: signal 0 only checks that the process exists.
    if unsafe { libc::kill(pid as libc::pid_t, 0) } != 0 {
        return true;
    }
    proc_stat(pid).is_some_and(|(state, _)| state == 'Z')
}

/// State and parent pid of a process, from `/proc/PID/stat` ("pid (comm) STATE PPID ...").
#[cfg(target_os = "linux")]
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    let mut rest = stat.rsplit_once(')')?.1.split_whitespace();
    let state = rest.next()?.chars().next()?;
    Some((state, rest.next()?.parse().ok()?))
}

/// State and parent pid of a process, from `ps`.
#[cfg(not(target_os = "linux"))]
fn proc_stat(pid: u32) -> Option<(char, u32)> {
    let out = Command::new("ps")
        .args(["-o", "stat=,ppid=", "-p", &pid.to_string()])
        .output()
        .ok()?;
    let text = String::from_utf8_lossy(&out.stdout);
    let mut words = text.split_whitespace();
    let state = words.next()?.chars().next()?;
    Some((state, words.next()?.parse().ok()?))
}

/// Show a step the demo takes itself, outside maos, as the shell command it amounts to.
fn shell(line: &str, why: &str) {
    let why = if why.is_empty() {
        String::new()
    } else {
        paint("2", &format!("    ({why})"))
    };
    outln!("{}{why}", paint("1", &format!("$ {line}")));
}

/// What part 2 leaves running if it stops half-way: agents waiting for `go`, supervisors that
/// keep trying to report to a daemon that is gone (for ten minutes). Dropped while armed, it
/// releases the agents, stops the daemon and kills what is left of the demo: every process
/// started with the demo's `MAOS_HOME` (Linux), else the agents it saw running and their
/// supervisors. Once the part has seen every agent and supervisor end, it is disarmed.
struct Cleanup<'a> {
    demo: &'a Demo,
    go: PathBuf,
    armed: bool,
    /// (agent, its supervisor), of the agents that were running at the kill.
    pids: Vec<(u32, Option<u32>)>,
}

impl Drop for Cleanup<'_> {
    fn drop(&mut self) {
        if !self.armed {
            return;
        }
        let _ = std::fs::write(&self.go, "");
        let _ = self.demo.command(&["daemon", "stop"]);
        let mut pids: Vec<u32> = self
            .pids
            .iter()
            .flat_map(|&(a, s)| [Some(a), s])
            .flatten()
            .collect();
        pids.extend(started_with_home(&self.demo.home));
        for pid in pids {
            if !gone(pid) {
                // SAFETY: plain kill(2) of a process the demo started.
                unsafe { libc::kill(pid as libc::pid_t, libc::SIGKILL) };
            }
        }
    }
}

/// Live processes whose environment has `MAOS_HOME=home`: the demo's daemon, supervisors and
/// agents.
#[cfg(target_os = "linux")]
fn started_with_home(home: &Path) -> Vec<u32> {
    let mut needle = b"MAOS_HOME=".to_vec();
    needle.extend_from_slice(home.as_os_str().as_encoded_bytes());
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    dir.filter_map(|e| e.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter(|&pid| pid != std::process::id() && !gone(pid))
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/environ"))
                .is_ok_and(|env| env.split(|&b| b == 0).any(|v| v == needle.as_slice()))
        })
        .collect()
}

#[cfg(not(target_os = "linux"))]
fn started_with_home(_home: &Path) -> Vec<u32> {
    Vec::new()
}

impl Demo {
    /// `maos --json ARGS`, not shown: its answer.
    fn json(&self, args: &[&str]) -> Result<Value, String> {
        let mut all = vec!["--json"];
        all.extend_from_slice(args);
        let out = self.command(&all)?;
        if !out.status.success() {
            return Err(format!(
                "`maos {}` failed: {}",
                all.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        serde_json::from_slice(&out.stdout)
            .map_err(|e| format!("`maos {}` did not answer JSON: {e}", all.join(" ")))
    }

    /// The events of `maos --json events ARGS` (one JSON object a line).
    fn events(&self, args: &[&str]) -> Result<Vec<Value>, String> {
        let mut all = vec!["--json", "events"];
        all.extend_from_slice(args);
        let out = self.command(&all)?;
        if !out.status.success() {
            return Err(format!(
                "`maos {}` failed: {}",
                all.join(" "),
                String::from_utf8_lossy(&out.stderr).trim()
            ));
        }
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter(|l| !l.trim().is_empty())
            .map(|l| serde_json::from_str(l).map_err(|e| format!("an event that is not JSON: {e}")))
            .collect()
    }
}

/// The agent of a `maos --json session show` answer that the plan calls `name`.
fn plan_agent<'a>(session: &'a Value, name: &str) -> Result<&'a Value, String> {
    session["agents"]
        .as_array()
        .and_then(|agents| agents.iter().find(|a| a["spec"]["name"] == name))
        .ok_or_else(|| format!("the session has no agent {name}: {session}"))
}

fn id_field(agent: &Value) -> Result<String, String> {
    agent["id"]
        .as_str()
        .map(str::to_string)
        .ok_or_else(|| format!("an agent without an id: {agent}"))
}

/// Each agent's name, state and how it ended, for a failure message.
fn agent_states(session: &Value) -> String {
    session["agents"]
        .as_array()
        .map(|agents| {
            agents
                .iter()
                .map(|a| {
                    let mut s = format!(
                        "{} {}",
                        a["spec"]["name"].as_str().unwrap_or("?"),
                        a["state"].as_str().unwrap_or("?")
                    );
                    if let Some(code) = a["exit_code"].as_i64() {
                        s += &format!(" (exit code {code})");
                    }
                    s
                })
                .collect::<Vec<_>>()
                .join(", ")
        })
        .unwrap_or_default()
}

/// Part 2: a plan of small local agents run by the daemon under the adaptive strategy; the
/// daemon is killed mid-run, the agents finish while it is down, and the restarted daemon
/// applies their exits and completes the session.
fn managed_run(keep: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    let mut cleanup = Cleanup {
        demo: &d,
        go: d.project.join("go"),
        armed: true,
        pids: Vec::new(),
    };
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say("a plan: the agents of a session, what each runs, and what it waits for");
    std::fs::write(d.project.join("plan.toml"), PLAN)
        .map_err(|e| format!("cannot write plan.toml: {e}"))?;
    shell("cat plan.toml", "");
    outln!("{PLAN}");

    say("`maos run` creates the session from the plan and starts it: maos runs the agents now,");
    say("each one under its own supervisor process (`maosd supervise`), its output in a log");
    let out = d.run(&["run", "plan.toml"])?;
    let sid = out
        .split_whitespace()
        .find(|w| w.starts_with("sess_"))
        .ok_or_else(|| format!("no session id in {out:?}"))?
        .to_string();
    let session = || d.json(&["session", "show", &sid]);

    // The architect completes at once; backend and tests then start and wait for `go`.
    let running = poll("backend and tests to be running", || {
        let s = session()?;
        let mut pids = Vec::new();
        for name in MID_RUN {
            let a = plan_agent(&s, name)?;
            if a["state"]
                .as_str()
                .is_some_and(|st| st != "pending" && st != "running")
            {
                return Err(format!(
                    "{name} ended before the demo could stop the daemon: {}",
                    agent_states(&s)
                ));
            }
            match a["process"]["pid"].as_u64() {
                Some(pid) => pids.push((name, id_field(a)?, pid as u32)),
                None => return Ok(None),
            }
        }
        Ok(Some(pids))
    })?;
    cleanup.pids = running
        .iter()
        .map(|(_, _, pid)| (*pid, proc_stat(*pid).map(|(_, ppid)| ppid)))
        .collect();
    say(
        "the architect completed, so backend and tests started, in parallel; the reviewer waits for both",
    );
    d.run(&["ps"])?;
    let architect = id_field(plan_agent(&session()?, "architect")?)?;
    say("what the architect printed, between the lines maos adds when it starts and ends");
    d.run(&["logs", crate::output::short(&architect)])?;

    let status = d.json(&["daemon", "status"])?;
    let daemon = status["pid"]
        .as_u64()
        .map(|p| p as u32)
        .ok_or_else(|| format!("no pid in the daemon's status: {status}"))?;
    let project = d.project.to_string_lossy();
    let hash = status["projects"]
        .as_array()
        .and_then(|ps| ps.iter().find(|p| p["root"] == *project))
        .and_then(|p| p["hash"].as_str())
        .ok_or_else(|| format!("the daemon's status does not list {project}: {status}"))?
        .to_string();
    say("now the daemon dies mid-run, as in a crash: no chance to save anything or say goodbye");
    for ((name, _, pid), (_, supervisor)) in running.iter().zip(&cleanup.pids) {
        let under = supervisor.map_or_else(String::new, |s| format!(", under supervisor {s}"));
        say(&format!("{name} runs as pid {pid}{under}"));
    }
    shell(
        &format!("kill -9 {daemon}"),
        "the daemon; the agents keep running under their supervisors",
    );
    // SAFETY: plain kill(2) of the demo's own daemon.
    if unsafe { libc::kill(daemon as libc::pid_t, libc::SIGKILL) } != 0 {
        return Err(format!(
            "cannot kill the daemon (pid {daemon}): {}",
            std::io::Error::last_os_error()
        ));
    }
    poll("the killed daemon to be gone", || {
        Ok(gone(daemon).then_some(()))
    })?;
    outln!();

    say("backend and tests get on with their work and end while no daemon is running");
    shell("touch go", "the signal the two agents wait for");
    std::fs::write(&cleanup.go, "").map_err(|e| format!("cannot create go: {e}"))?;
    let agents_dir = d.home.join("projects").join(&hash).join("agents");
    for (name, id, pid) in &running {
        let file = agents_dir.join(id).join("exit.json");
        poll(
            &format!("{name} to end and its exit to be recorded"),
            || Ok((gone(*pid) && file.is_file()).then_some(())),
        )?;
    }
    let (first, first_id, _) = &running[0];
    let exit_file = agents_dir.join(first_id).join("exit.json");
    say(
        "each supervisor wrote how its agent ended to exit.json, and keeps trying to reach the daemon",
    );
    let shown = exit_file.strip_prefix(&d.home).map_or_else(
        |_| exit_file.display().to_string(),
        |p| format!("$MAOS_HOME/{}", p.display()),
    );
    shell(&format!("cat {shown}"), &format!("{first}'s"));
    let text = std::fs::read_to_string(&exit_file)
        .map_err(|e| format!("cannot read {}: {e}", exit_file.display()))?;
    outln!("{}\n", text.trim());

    say("any maos command starts the daemon again; when it starts it recovers every session that");
    say(
        "was running: a live agent is adopted again, an ended one gets the exit its supervisor recorded",
    );
    d.run(&["daemon", "start"])?;
    let done = poll("the session to end", || {
        let s = session()?;
        let state = s["state"].as_str().unwrap_or("");
        Ok(matches!(state, "completed" | "failed" | "cancelled").then_some(s))
    })?;
    if done["state"] != "completed" {
        return Err(format!(
            "the session ended {}, not completed: {}",
            done["state"].as_str().unwrap_or("?"),
            agent_states(&done)
        ));
    }
    for name in PLAN_AGENTS {
        let a = plan_agent(&done, name)?;
        if a["state"] != "completed" || a["exit_code"] != 0 {
            return Err(format!(
                "agent {name} did not complete with exit code 0: {}",
                agent_states(&done)
            ));
        }
    }

    let recovered = d.events(&[&sid, "--type", "session_recovered"])?;
    let report: maos_proto::SessionRecovery = recovered
        .last()
        .ok_or("the restarted daemon recorded no recovery (no session_recovered event)")
        .and_then(|e| {
            serde_json::from_value(e["data"].clone())
                .map_err(|_| "a session_recovered event without its report")
        })?;
    let applied: Vec<&str> = report.exits_applied.iter().map(|a| a.as_str()).collect();
    if running
        .iter()
        .any(|(_, id, _)| !applied.contains(&id.as_str()))
        || !report.failed.is_empty()
        || !report.resumable.is_empty()
    {
        return Err(format!(
            "the recovery should have applied the recorded exits of backend and tests, and nothing else: {report:?}"
        ));
    }
    say(
        "what the daemon found when it started (its session_recovered event; `maos recover` prints the same):",
    );
    out!(
        "{}",
        crate::managed::recovery(&maos_proto::RecoveryReport {
            sessions: vec![report],
        })
    );
    outln!();

    say("with backend and tests completed the reviewer ran, and the session completed");
    d.run(&["ps", "--all"])?;
    say("`maos brief`: the briefing a person, or an agent taking over, reads first");
    d.run(&["brief"])?;
    say(
        "the timeline: the architect's exit before the kill, the exits applied when the daemon came back, the rest after",
    );
    d.run(&[
        "events",
        "--type",
        "agent_process_exited",
        "--type",
        "session_recovered",
        "--type",
        "session_completed",
    ])?;
    for file in [
        "docs/limiter.md",
        "src/auth/limit.rs",
        "tests/limit_test.rs",
        "docs/review.md",
    ] {
        if !d.project.join(file).is_file() {
            return Err(format!("{file} should have been written by an agent"));
        }
    }

    // Every supervisor ends once the daemon acknowledged its report (those of backend and
    // tests retry every half second): nothing but the daemon may be left.
    let daemon = d.json(&["daemon", "status"])?["pid"].as_u64().unwrap_or(0) as u32;
    let supervisors: Vec<u32> = cleanup.pids.iter().filter_map(|&(_, s)| s).collect();
    let left = poll("the supervisors to deliver their reports and exit", || {
        let left: Vec<u32> = started_with_home(&d.home)
            .into_iter()
            .chain(supervisors.iter().copied())
            .filter(|&p| p != daemon && !gone(p))
            .collect();
        Ok(left.is_empty().then_some(()))
    });
    left.map_err(|e| format!("{e}: still running {:?}", started_with_home(&d.home)))?;
    cleanup.armed = false;
    say("docs/limiter.md, src/auth/limit.rs, tests/limit_test.rs and docs/review.md are on disk;");
    say("every agent and supervisor has exited");
    Ok(())
}

/// `maos demo [hooks|managed|cli]`: the Claude Code replay, the managed session that survives a
/// kill -9 of its daemon, then the CLI tour (or just one of them).
pub fn run(part: Option<&str>, keep: bool, verbose: bool) -> Result<(), String> {
    let parts: &[&str] = match part {
        None => &["hooks", "managed", "cli"],
        Some(p @ ("hooks" | "managed" | "cli")) => &[p],
        Some(other) => {
            return Err(format!("no demo part {other:?}: use hooks, managed or cli"));
        }
    };
    for (i, p) in parts.iter().enumerate() {
        if parts.len() > 1 {
            if i > 0 {
                outln!();
            }
            let what = match *p {
                "hooks" => "a Claude Code session with two subagents, through `maos hook`",
                "managed" => "maos runs a plan's agents itself, and its daemon is killed half-way",
                _ => "the same ideas driven by hand with the maos CLI",
            };
            say(&format!("part {} of {}: {what}", i + 1, parts.len()));
        }
        match *p {
            "hooks" => hook_replay(keep, verbose)?,
            "managed" => managed_run(keep)?,
            _ => cli_tour(keep)?,
        }
    }
    Ok(())
}

/// The CLI tour: sessions, phases, agents, locks, a deadlock, pause and resume, by hand.
fn cli_tour(keep: bool) -> Result<(), String> {
    let d = Demo::new(keep)?;
    say(&format!(
        "a throw-away project in {} with its own daemon; your real maos state is not touched",
        d.project.display()
    ));
    say("a session with three phases; it becomes the project's active session");
    let out = d.run(&[
        "session",
        "create",
        "--objective",
        "Add rate limiting to the login endpoint",
        "--strategy",
        "adaptive",
        "--phase",
        "design",
        "--phase",
        "implement",
        "--phase",
        "verify",
    ])?;
    Demo::id_of(&out)?;
    say(
        "agents: an architect, then backend and tests that depend on it, and a reviewer spawned by backend",
    );
    let architect = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "architect",
        "--task",
        "Design the token bucket",
    ])?)?;
    let backend = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "backend",
        "--task",
        "Implement the limiter in src/auth/limit.rs",
        "--depends-on",
        &architect,
    ])?)?;
    let qa = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "qa",
        "--task",
        "Write tests for the limiter",
        "--depends-on",
        &architect,
    ])?)?;
    let reviewer = Demo::id_of(&d.run(&[
        "agent",
        "register",
        "--role",
        "reviewer",
        "--task",
        "Review the limiter",
        "--parent",
        &backend,
    ])?)?;

    say("ids can be shortened to any unique prefix");
    d.run(&["session", "start"])?;
    d.run(&["phase", "start"])?;
    d.run(&["agent", "start", &architect[..12]])?;
    d.run(&["agent", "complete", &architect[..12], "--exit-code", "0"])?;
    d.run(&[
        "phase",
        "complete",
        "--artifacts",
        r#"{"files":["docs/limiter.md"]}"#,
    ])?;
    d.run(&["phase", "start", "implement"])?;
    d.run(&["agent", "start", &backend])?;
    d.run(&["agent", "start", &qa])?;

    say(
        "locks: backend takes the limiter; qa's write to the same file is refused, naming the holder",
    );
    d.run(&["lock", "acquire", "src/auth/limit.rs", "--agent", &backend])?;
    d.refused(&["lock", "acquire", "src/auth/limit.rs", "--agent", &qa])?;
    d.run(&["lock", "acquire", "tests/limit.rs", "--agent", &qa])?;
    say("a deadlock: backend waits for qa's file while qa asks for backend's");
    let waiting = d.spawn(&[
        "lock",
        "acquire",
        "tests/limit.rs",
        "--agent",
        &backend,
        "--wait-forever",
    ])?;
    d.until_waiting()?;
    d.run(&["lock", "list"])?;
    say("qa, the younger agent, loses: its request ends with `deadlock` naming the cycle");
    d.refused(&[
        "lock",
        "acquire",
        "src/auth/limit.rs",
        "--agent",
        &qa,
        "--wait-forever",
    ])?;
    say("qa lets go of its locks, and backend's waiting request is granted");
    d.run(&["lock", "release-all", "--agent", &qa])?;
    let out = waiting
        .wait_with_output()
        .map_err(|e| format!("background request: {e}"))?;
    out!("{}", String::from_utf8_lossy(&out.stdout));
    outln!();
    if !out.status.success() {
        return Err(format!(
            "backend's wait failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    d.run(&["ps"])?;

    say("pause the whole session (who, why and what was running are recorded)");
    d.run(&["pause", "--reason", "lunch break"])?;
    say("nothing starts while the session is paused");
    d.refused(&["agent", "start", &reviewer])?;
    d.run(&["ps"])?;
    d.run(&["resume"])?;

    d.run(&["agent", "start", &reviewer])?;
    d.run(&["agent", "complete", &reviewer])?;
    d.run(&["agent", "complete", &backend])?;
    d.run(&["agent", "complete", &qa])?;
    d.run(&["phase", "complete"])?;

    say("a failed checkpoint is recorded, then the phase is retried");
    d.run(&["phase", "start"])?;
    d.run(&[
        "phase",
        "complete",
        "--failed",
        "--artifacts",
        r#"{"failing":["limit::burst"]}"#,
    ])?;
    d.run(&["phase", "start", "3"])?;
    d.run(&["status"])?;
    say("completing the last phase completes the workflow and the session");
    d.run(&["phase", "complete"])?;
    say("an illegal transition is refused with its reason, and changes nothing");
    d.refused(&["session", "start"])?;
    d.run(&["ps", "--all"])?;
    say("the timeline: every change, in order, with its data");
    d.run(&["events"])?;
    d.run(&["daemon", "status"])?;
    say(&format!(
        "done; data lived in {}",
        Path::new(&d.home).display()
    ));
    Ok(())
}
