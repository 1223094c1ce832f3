//! Plumbing of the conformance tests that run the real GitHub Copilot CLI: the pinned npm
//! release, installed on first use; a scripted fake OpenAI-compatible API ([`FakeApi`]) on
//! 127.0.0.1 that plays one tool call per model turn (Copilot's bring-your-own-key provider,
//! `COPILOT_OFFLINE=true`); a `copilot -p` run with a deadline, with a HOME and TMPDIR in the
//! test's directory.
//!
//! Observed of 1.0.102 driven this way: it calls only `POST /v1/chat/completions` (streamed:
//! `stream: true`, server-sent `chat.completion.chunk`s ending with `data: [DONE]`), once per
//! model turn; a tool call is a `tool_calls` delta, its result the next request's `role: tool`
//! message with the call's id. Its first start under a cache directory unpacks ~235 MB there
//! (`$XDG_CACHE_HOME/copilot/pkg`): the tests share one next to the npm install.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::conformance::{Answer, FakeApi, npm_package, run_within};
use crate::{Env, Value, bin_dir, json};

const PACKAGE: &str = "@github/copilot";
pub const VERSION: &str = "1.0.102";
pub const MODEL: &str = "gpt-4.1";
/// How long one `copilot -p` run may take before it is killed and the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(60);
/// The word in the prompt that makes the script play its tool calls.
pub const CUE: &str = "MAOS-CONFORMANCE";
/// The word in a subagent's prompt that makes the script play the subagent's calls.
pub const SUB_CUE: &str = "MAOS-SUBAGENT";

/// The pinned client: its executable and the cache directory its runs share.
#[derive(Clone)]
pub struct Copilot {
    pub bin: PathBuf,
    cache: PathBuf,
}

/// The `copilot` executable of the pinned release, installed (and unpacked) on first use;
/// `Err` says why not.
pub fn copilot() -> Result<Copilot, String> {
    static COPILOT: OnceLock<Result<Copilot, String>> = OnceLock::new();
    COPILOT.get_or_init(install).clone()
}

fn install() -> Result<Copilot, String> {
    let dir = npm_package(PACKAGE, VERSION)?;
    let bin = dir.join("node_modules/.bin/copilot");
    let cache = dir.join("xdg-cache");
    // A HOME of its own; the first `--version` unpacks the release into the shared cache.
    let home = tempfile::tempdir().map_err(|e| format!("a temporary HOME: {e}"))?;
    let answer = Command::new(&bin)
        .arg("--version")
        .env_clear()
        .env(
            "PATH",
            std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into()),
        )
        .env("HOME", home.path())
        .env("XDG_CACHE_HOME", &cache)
        .env("COPILOT_AUTO_UPDATE", "false")
        .stdin(Stdio::null())
        .output()
        .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
    let text = String::from_utf8_lossy(&answer.stdout);
    if !answer.status.success() || !text.contains(&format!("GitHub Copilot CLI {VERSION}.")) {
        return Err(format!(
            "{} --version answered {:?} ({})",
            bin.display(),
            text.trim(),
            answer.status
        ));
    }
    Ok(Copilot { bin, cache })
}

/// One tool call the fake model makes: Copilot's tool name and its arguments.
#[derive(Clone)]
pub struct Call {
    pub name: &'static str,
    pub args: Value,
}

/// The text of a request's user messages (the prompt and what hooks put around it).
pub fn user_text(body: &Value) -> String {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "user")
        .filter_map(|m| m["content"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The `role: tool` messages of a request (tool results), in order.
pub fn tool_messages(body: &Value) -> Vec<String> {
    body["messages"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|m| m["role"] == "tool")
        .map(|m| match &m["content"] {
            Value::String(s) => s.clone(),
            other => other.to_string(),
        })
        .collect()
}

/// The streamed answer of one model turn: a `delta` then the finish.
fn chunks(delta: Value, finish: &str) -> Answer {
    let chunk = |delta: Value, finish: Value| {
        json!({"id": "chatcmpl-maos", "object": "chat.completion.chunk", "created": 1,
               "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]})
    };
    let mut last = chunk(json!({}), json!(finish));
    last["usage"] = json!({"prompt_tokens": 10, "completion_tokens": 5, "total_tokens": 15});
    Answer::sse(format!(
        "data: {}\n\ndata: {last}\n\ndata: [DONE]\n\n",
        chunk(delta, Value::Null)
    ))
}

/// The answer of one model turn: the next call of `calls` after the `done` results that came
/// back, else text.
pub fn turn(calls: &[Call], done: usize) -> Answer {
    match calls.get(done) {
        Some(c) => chunks(
            json!({"role": "assistant", "content": null, "tool_calls": [{
                "index": 0, "id": format!("call_maos_{done}"), "type": "function",
                "function": {"name": c.name, "arguments": c.args.to_string()}}]}),
            "tool_calls",
        ),
        None => chunks(json!({"role": "assistant", "content": "Done."}), "stop"),
    }
}

/// A fake OpenAI-compatible API: a request whose user text has [`SUB_CUE`] (a subagent's)
/// gets the next of `sub`, one with [`CUE`] the next of `calls` (one per model turn, after
/// the previous one's result came back), then text; anything else gets text. Every request
/// is recorded.
pub fn fake_model(calls: Vec<Call>, sub: Vec<Call>) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.ends_with("/chat/completions") {
            return Answer::not_found();
        }
        let text = user_text(body);
        let done = tool_messages(body).len();
        if text.contains(SUB_CUE) {
            turn(&sub, done)
        } else if text.contains(CUE) {
            turn(&calls, done)
        } else {
            turn(&[], 0)
        }
    })
}

/// The model requests recorded.
pub fn model_requests(api: &FakeApi) -> Vec<Value> {
    api.requests()
        .into_iter()
        .filter(|(target, _)| target.ends_with("/chat/completions"))
        .map(|(_, body)| body)
        .collect()
}

/// What came back to the window's model for its tool calls, in order (the longest history
/// among the requests whose prompt has [`CUE`]).
pub fn tool_results(api: &FakeApi) -> Vec<String> {
    model_requests(api)
        .iter()
        .filter(|b| user_text(b).contains(CUE))
        .map(tool_messages)
        .max_by_key(Vec::len)
        .unwrap_or_default()
}

/// The temporary HOME of the client.
pub fn copilot_home(env: &Env) -> PathBuf {
    let home = env.root().join("user");
    std::fs::create_dir_all(&home).expect("create the client's HOME");
    home
}

/// `copilot -p PROMPT --allow-all-tools` in the project with the fake model behind it; killed
/// (its whole process group) and the test failed if it outlives [`RUN_DEADLINE`].
pub fn run_copilot(env: &Env, copilot: &Copilot, api: &FakeApi, prompt: &str) -> Output {
    run_within(
        copilot_command(env, copilot, api, prompt, &[]),
        RUN_DEADLINE,
        "copilot -p",
    )
}

/// The command of `copilot -p PROMPT --allow-all-tools` in the project, offline against
/// `api` (bring-your-own-key), with a HOME and TMPDIR in the test's directory, `extra`
/// variables and arguments added.
pub fn copilot_command(
    env: &Env,
    copilot: &Copilot,
    api: &FakeApi,
    prompt: &str,
    extra: &[(&str, &str)],
) -> Command {
    let home = copilot_home(env);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let mut cmd = Command::new(&copilot.bin);
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("USER", "e2e-tester")
        .env("TMPDIR", env.root())
        .env("XDG_CACHE_HOME", &copilot.cache)
        .env("COPILOT_AUTO_UPDATE", "false")
        .env("MAOS_HOME", &env.home)
        .env("MAOS_SOCKET", &env.socket)
        .env(
            "COPILOT_PROVIDER_BASE_URL",
            format!("http://127.0.0.1:{}/v1", api.port()),
        )
        .env("COPILOT_MODEL", MODEL)
        .env("COPILOT_OFFLINE", "true")
        .envs(extra.iter().copied())
        .current_dir(&env.project)
        .args(["-p", prompt, "--allow-all-tools", "--no-ask-user"]);
    cmd
}

/// The hooks file `install-hooks --copilot` writes in the project.
pub fn hooks_file(env: &Env) -> PathBuf {
    env.project.join(".github/hooks/maos.json")
}

/// Copilot's own settings file under the client's HOME (`trustedFolders`).
pub fn config_file(env: &Env) -> PathBuf {
    copilot_home(env).join(".copilot/config.json")
}

/// The path of `rel` in the project, as the model gives it (Copilot's tools take absolute
/// paths).
pub fn abs(env: &Env, rel: &str) -> String {
    let p: &Path = &env.project;
    p.join(rel).to_string_lossy().into_owned()
}
