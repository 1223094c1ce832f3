//! Plumbing of the conformance tests that run the real OpenCode: the pinned release (npm
//! `opencode-ai`, whose optional dependency carries the platform's binary), installed on first
//! use; a scripted fake OpenAI-compatible API ([`FakeApi`], chat completions streamed) on
//! 127.0.0.1 that plays one tool call per model turn; an `opencode run` with a deadline, with a
//! HOME (and XDG directories) in the test's directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::conformance::{Answer, FakeApi, npm_package, run_within};
use crate::{Env, Value, bin_dir, json};

const PACKAGE: &str = "opencode-ai";
pub const VERSION: &str = "1.18.33";
/// The model of the custom provider in `opencode.json` (`fake/m`).
pub const MODEL: &str = "m";
/// `OPENCODE_CONFIG_CONTENT` (one more config layer, read by OpenCode) selecting the fake
/// provider's `gpt-5`, to which OpenCode 1.18.33 offers `apply_patch {patchText}` instead of
/// `write` and `edit`.
pub const GPT_MODEL: (&str, &str) = ("OPENCODE_CONFIG_CONTENT", r#"{"model":"fake/gpt-5"}"#);
/// How long one `opencode run` may take before it is killed and the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);
/// The word in the prompt that makes the script play its tool calls.
pub const CUE: &str = "MAOS-CONFORMANCE";

/// The `opencode` executable of the pinned release, installed on first use; `Err` says why not.
pub fn opencode() -> Result<PathBuf, String> {
    static OPENCODE: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    OPENCODE.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let bin = npm_package(PACKAGE, VERSION)?.join("node_modules/.bin/opencode");
    let home = tempfile::tempdir().map_err(|e| format!("a temporary HOME: {e}"))?;
    let answer = Command::new(&bin)
        .arg("--version")
        .env("HOME", home.path())
        .env("XDG_CONFIG_HOME", home.path().join(".config"))
        .env("XDG_DATA_HOME", home.path().join(".local/share"))
        .env("XDG_CACHE_HOME", home.path().join(".cache"))
        .env("XDG_STATE_HOME", home.path().join(".local/state"))
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&answer.stdout);
    if !answer.status.success() || text.trim() != VERSION {
        return Err(format!(
            "{} --version answered {:?} ({})",
            bin.display(),
            text.trim(),
            answer.status
        ));
    }
    Ok(bin)
}

/// One tool call the fake model makes: OpenCode's tool name and its arguments.
#[derive(Clone)]
pub struct Call {
    pub name: &'static str,
    pub args: Value,
}

/// The messages of a chat completions request.
fn messages(body: &Value) -> &[Value] {
    body["messages"].as_array().map_or(&[], Vec::as_slice)
}

/// The text of a message's content (a string, or parts with `text`).
fn content(m: &Value) -> String {
    match &m["content"] {
        Value::String(s) => s.clone(),
        Value::Array(parts) => parts
            .iter()
            .filter_map(|p| p["text"].as_str())
            .collect::<Vec<_>>()
            .join("\n"),
        _ => String::new(),
    }
}

/// The text of the user's turns of a request.
pub fn user_text(body: &Value) -> String {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "user")
        .map(content)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The system prompt of a request (every system message).
pub fn system_text(body: &Value) -> String {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "system")
        .map(content)
        .collect::<Vec<_>>()
        .join("\n")
}

/// The results of the tool calls in a request's history, in order.
pub fn tool_messages(body: &Value) -> Vec<String> {
    messages(body)
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(content)
        .collect()
}

/// The streamed answer of one model turn: a tool call, or text.
pub fn stream_answer(turn: usize, call: Option<&Call>) -> Answer {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-maos", "object": "chat.completion.chunk", "created": 1,
               "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut chunks = match call {
        Some(c) => vec![
            chunk(
                json!({"role": "assistant", "tool_calls": [{"index": 0,
                    "id": format!("call_{turn}"), "type": "function",
                    "function": {"name": c.name, "arguments": c.args.to_string()}}]}),
                Value::Null,
            ),
            chunk(json!({}), json!("tool_calls")),
        ],
        None => vec![
            chunk(
                json!({"role": "assistant", "content": "Done."}),
                Value::Null,
            ),
            chunk(json!({}), json!("stop")),
        ],
    };
    chunks.push(
        json!({"id": "chatcmpl-maos", "object": "chat.completion.chunk",
        "created": 1, "model": MODEL, "choices": [],
        "usage": {"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15}}),
    );
    let mut body: String = chunks.iter().map(|c| format!("data: {c}\n\n")).collect();
    body.push_str("data: [DONE]\n\n");
    Answer::sse(body)
}

/// A fake OpenAI-compatible API: a request with tools whose prompt has [`CUE`] gets the next
/// of `calls` (one per model turn, after the previous one's result came back), then text;
/// anything else (the title OpenCode asks for, an uncued prompt) gets text. Every request is
/// recorded.
pub fn fake_model(calls: Vec<Call>) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let done = tool_messages(body).len();
        let agent = body.get("tools").is_some_and(|t| t.is_array());
        match calls.get(done) {
            Some(c) if agent && user_text(body).contains(CUE) => stream_answer(done, Some(c)),
            _ => stream_answer(done, None),
        }
    })
}

/// The agent's model requests recorded (those offering tools; not the title's).
pub fn model_requests(api: &FakeApi) -> Vec<Value> {
    api.requests()
        .into_iter()
        .filter(|(target, body)| target.ends_with("/chat/completions") && body["tools"].is_array())
        .map(|(_, body)| body)
        .collect()
}

/// What came back to the model for its tool calls, in order.
pub fn tool_results(api: &FakeApi) -> Vec<String> {
    model_requests(api)
        .iter()
        .map(tool_messages)
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The client's HOME in the test's directory, and the project's `opencode.json`: the fake
/// provider (`@ai-sdk/openai-compatible`, which OpenCode 1.18.33 bundles) as the model, no
/// sharing, no update. OpenCode installs `@opencode-ai/plugin` with npm into every config
/// directory (`~/.config/opencode/`, the project's `.opencode/`) at start unless its
/// `package-lock.json` lists it and `node_modules/` exists: both are seeded, so no run waits
/// on a registry.
pub fn prepare(env: &Env, api: &FakeApi) -> PathBuf {
    let home = env.root().join("user");
    let config = json!({
        "$schema": "https://opencode.ai/config.json",
        "provider": {"fake": {
            "npm": "@ai-sdk/openai-compatible",
            "name": "Fake",
            "options": {"baseURL": format!("http://127.0.0.1:{}/v1", api.port()),
                        "apiKey": "dummy"},
            // `gpt-5`: OpenCode offers OpenAI's models `apply_patch` instead of `write` and
            // `edit` (select it with [`GPT_MODEL`]).
            "models": {MODEL: {"name": MODEL, "tool_call": true},
                       "gpt-5": {"name": "gpt-5", "tool_call": true}},
        }},
        "model": format!("fake/{MODEL}"),
        "small_model": format!("fake/{MODEL}"),
        "autoupdate": false,
        "share": "disabled",
    });
    std::fs::write(env.project.join("opencode.json"), config.to_string())
        .expect("write opencode.json");
    let lock = json!({"packages": {"": {"dependencies": {"@opencode-ai/plugin": VERSION}}}});
    for dir in [home.join(".config/opencode"), env.project.join(".opencode")] {
        std::fs::create_dir_all(dir.join("node_modules")).expect("seed node_modules");
        std::fs::write(dir.join("package-lock.json"), lock.to_string())
            .expect("seed package-lock.json");
    }
    home
}

/// `opencode run PROMPT` in the project with the fake model behind it; killed (its whole
/// process group) and the test failed if it outlives [`RUN_DEADLINE`].
pub fn run_opencode(env: &Env, opencode: &Path, api: &FakeApi, prompt: &str) -> Output {
    run_opencode_with(env, opencode, api, prompt, &[])
}

/// [`run_opencode`] with `extra` variables in the client's environment.
pub fn run_opencode_with(
    env: &Env,
    opencode: &Path,
    api: &FakeApi,
    prompt: &str,
    extra: &[(&str, &str)],
) -> Output {
    let cmd = opencode_command(env, opencode, api, prompt, extra);
    run_within(cmd, RUN_DEADLINE, "opencode run")
}

/// The command of `opencode run PROMPT` in the project, offline against `api`, with a HOME,
/// XDG directories and TMPDIR in the test's directory.
pub fn opencode_command(
    env: &Env,
    opencode: &Path,
    api: &FakeApi,
    prompt: &str,
    extra: &[(&str, &str)],
) -> Command {
    let home = prepare(env, api);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let mut cmd = Command::new(opencode);
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("XDG_CONFIG_HOME", home.join(".config"))
        .env("XDG_DATA_HOME", home.join(".local/share"))
        .env("XDG_CACHE_HOME", home.join(".cache"))
        .env("XDG_STATE_HOME", home.join(".local/state"))
        .env("USER", "e2e-tester")
        .env("TMPDIR", env.root())
        .env("MAOS_HOME", &env.home)
        .env("MAOS_SOCKET", &env.socket)
        .env("OPENCODE_DISABLE_AUTOUPDATE", "1")
        .env("OPENCODE_DISABLE_SHARE", "1")
        .env("OPENCODE_DISABLE_MODELS_FETCH", "1")
        .env("OPENCODE_DISABLE_LSP_DOWNLOAD", "1")
        .envs(extra.iter().copied())
        .current_dir(&env.project)
        // One argument per word: `opencode run` wraps an argument with a space in double
        // quotes before it joins them (1.18.33), and the model would get the quotes.
        .arg("run")
        .args(prompt.split(' '));
    cmd
}
