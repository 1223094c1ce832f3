//! Part 1 (`maos demo hooks`): a Claude Code session with two subagents, replayed through real
//! `maos hook` processes, one per event, fed exactly the JSON Claude Code sends.

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use crate::demo::{Demo, full, outcome, paint, say, tell, took, who, wrapped};

/// One Claude Code thread: the main thread (the window's agent) or a subagent.
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
/// `maos hook` process per event with the JSON object Claude Code sends (docs/hooks.md).
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
        crate::demo::step();
        let (answer, took) = self.call(&self.input(who, event, fields))?;
        // The story tells what the calls amount to instead (`tell`).
        if !full() {
            return Ok(answer);
        }
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
    /// write it, then PostToolUse with the tool's result. When maos allowed it.
    fn write(&mut self, who: Thread, tool: &str, input: Value) -> Result<Instant, String> {
        let id = self.allowed(who, tool, &input)?;
        let allowed = Instant::now();
        let response = apply(tool, &input)?;
        self.post(who, tool, &input, &id, response)?;
        Ok(allowed)
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
pub fn replay(keep: bool, verbose: bool) -> Result<(), String> {
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
    tell("Each step is a real `maos hook` call, fed the JSON Claude Code sends on that event.");
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
    if full() {
        outln!();
    }

    say("the user starts claude (its first hook call starts the daemon) and asks for a feature;");
    say("maos makes the window its own agent, labelled claude, its task the first prompt");
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
    tell(&who(
        "claude[main]",
        &format!("SessionStart, then the user's prompt \"{first}\""),
    ));

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
    tell(&who(
        "claude[main]",
        "Agent tool, twice: subagents backend-engineer and qa-engineer, in parallel",
    ));

    if full() {
        outln!();
    }
    say("backend writes the limiter: maos gives it the file's write lock, and the file is written");
    let limiter = claude.path("src/auth/limit.rs");
    let granted = claude.write(
        BACKEND,
        "Write",
        json!({ "file_path": limiter, "content": LIMITER }),
    )?;
    tell(&who(
        "backend-engineer",
        &format!(
            "Write src/auth/limit.rs     → {}: it holds the file's write lock",
            paint("32", "allowed")
        ),
    ));
    say("qa wants to change the same file while backend is still writing it: maos denies the edit");
    say("the reason goes to qa's model, so it knows who holds the file and what to do instead");
    let qa_edit = json!({
        "file_path": limiter,
        "old_string": "pub struct Limiter {",
        "new_string": "#[derive(Debug)]\npub struct Limiter {",
        "replace_all": false,
    });
    let reason = claude.denied(QA, "Edit", &qa_edit)?;
    let held = granted.elapsed();
    tell(&who(
        "qa-engineer",
        &format!("Edit src/auth/limit.rs      → {}", paint("1;31", "denied")),
    ));
    outcome(
        false,
        "DENIED",
        &format!(
            "qa-engineer's edit of src/auth/limit.rs: held by backend-engineer (another subagent of the window), writing it for {} so far",
            took(held)
        ),
    );
    if !full() {
        outln!("    qa-engineer's model is told why, and what to do instead:");
        outln!(
            "{}",
            paint("2", &wrapped(&reason, crate::demo::WIDTH - 6, "    │ "))
        );
    }
    say("qa gets on with its own file");
    claude.write(
        QA,
        "Write",
        json!({ "file_path": claude.path("tests/limit_test.rs"), "content": LIMITER_TESTS }),
    )?;
    tell(&who(
        "qa-engineer",
        &format!(
            "Write tests/limit_test.rs   → {}: its own file, meanwhile",
            paint("32", "allowed")
        ),
    ));
    if full() {
        outln!();
    }

    say("`maos ps`: the window's agent with both subagents under it, and the file each one holds");
    tell("`maos ps`: the window's agent, its two subagents under it, and the file each one holds:");
    d.show(&["ps"])?;

    say("backend is done: its SubagentStop completes it and releases its lock");
    claude.subagent_stop(BACKEND)?;
    tell(&who(
        "backend-engineer",
        "SubagentStop                → done: its lock on src/auth/limit.rs is released",
    ));
    say("qa retries the same edit, and now it is allowed");
    claude.write(QA, "Edit", qa_edit)?;
    tell(&who(
        "qa-engineer",
        &format!(
            "Edit src/auth/limit.rs      → {} (the same edit, retried)",
            paint("32", "allowed")
        ),
    ));
    outcome(
        true,
        "ALLOWED",
        "qa-engineer's retried edit of src/auth/limit.rs, now that backend-engineer is done: both changes are in the file, neither overwritten",
    );
    say("the main thread gets backend's result: agentId ties its Agent call to the subagent");
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
    if full() {
        outln!();
    }

    say("both subagents completed and their locks are released; the window is still running");
    d.run(&["ps", "--all"])?;
    say("the timeline: what every hook call did, in order");
    d.run(&["events"])?;

    say(
        "the user quits claude: its window's agent ended; the session had no other window, so it completed",
    );
    say(
        "(`claude --resume` of that conversation later comes back as a new agent with the same task)",
    );
    claude.event(
        MAIN,
        "SessionEnd",
        "prompt_input_exit",
        json!({ "reason": "prompt_input_exit" }),
    )?;
    tell(&who(
        "claude[main]",
        "SessionEnd (the user quits) → the window's agent ended; its session completed",
    ));
    if full() {
        outln!();
    }
    let ps = d.run(&["ps", "--all"])?;
    if !(ps.contains("ended") && ps.contains("completed*")) {
        return Err("after SessionEnd the window should be ended and its session completed".into());
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
