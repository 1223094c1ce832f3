//! Plumbing of the conformance tests that run the real Gemini CLI: the pinned release,
//! installed on first use; a scripted fake Gemini API ([`FakeApi`]) on 127.0.0.1 that plays
//! one tool call per model turn; a `gemini -p` run with a deadline, with a HOME and TMPDIR in
//! the test's directory.

use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::OnceLock;
use std::time::Duration;

use crate::conformance::{Answer, FakeApi, npm_package, run_within};
use crate::{Env, Value, bin_dir, json};

const PACKAGE: &str = "@google/gemini-cli";
pub const VERSION: &str = "0.61.0";
pub const MODEL: &str = "gemini-2.5-flash";
/// How long one `gemini -p` run may take before it is killed and the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(60);
/// The word in the prompt that makes the script play its tool calls.
pub const CUE: &str = "MAOS-CONFORMANCE";

/// The `gemini` executable of the pinned release, installed on first use; `Err` says why not.
pub fn gemini() -> Result<PathBuf, String> {
    static GEMINI: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    GEMINI.get_or_init(install).clone()
}

fn install() -> Result<PathBuf, String> {
    let bin = npm_package(PACKAGE, VERSION)?.join("node_modules/.bin/gemini");
    // A HOME of its own: even `--version` writes there (it leaves
    // `~/.gemini/projects.json.*.tmp` files behind).
    let home = tempfile::tempdir().map_err(|e| format!("a temporary HOME: {e}"))?;
    let answer = Command::new(&bin)
        .arg("--version")
        .env("HOME", home.path())
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

/// One tool call the fake model makes: Gemini's function name and its arguments.
#[derive(Clone)]
pub struct Call {
    pub name: &'static str,
    pub args: Value,
}

/// The `functionResponse` parts of a request's history, in order.
pub fn function_responses(body: &Value) -> Vec<Value> {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p.get("functionResponse").cloned())
        .collect()
}

/// The text of the user's turns of a request (the prompt and what hooks put before it).
pub fn user_text(body: &Value) -> String {
    body["contents"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["role"] == "user")
        .filter_map(|c| c["parts"].as_array())
        .flatten()
        .filter_map(|p| p["text"].as_str())
        .collect::<Vec<_>>()
        .join("\n")
}

/// The streamed answer (`alt=sse`) of one model turn: `parts` and the usual metadata.
pub fn sse(parts: Value) -> Answer {
    let chunk = json!({
        "candidates": [{"content": {"role": "model", "parts": parts},
                        "finishReason": "STOP", "index": 0}],
        "usageMetadata": {"promptTokenCount": 10, "candidatesTokenCount": 5,
                          "totalTokenCount": 15},
        "modelVersion": MODEL,
    });
    Answer::sse(format!("data: {chunk}\r\n\r\n"))
}

/// A fake Gemini API: a request whose prompt has [`CUE`] gets the next of `calls` (one per
/// model turn, after the previous one's result came back), then text; anything else (a
/// helper request of the CLI) gets text. Every request is recorded.
pub fn fake_model(calls: Vec<Call>) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.starts_with("/v1beta/models/") {
            return Answer::not_found();
        }
        if target.contains(":countTokens") {
            return Answer {
                status: 200,
                content_type: "application/json",
                body: json!({"totalTokens": 10}).to_string(),
            };
        }
        let done = function_responses(body).len();
        let reply = match calls.get(done) {
            Some(c) if user_text(body).contains(CUE) => {
                sse(json!([{"functionCall": {"name": c.name, "args": c.args}}]))
            }
            _ => sse(json!([{"text": "Done."}])),
        };
        if target.contains(":streamGenerateContent") {
            reply
        } else {
            // The non-streaming form: the one chunk as a plain JSON body.
            let body = reply.body.trim().trim_start_matches("data: ").to_string();
            Answer {
                status: 200,
                content_type: "application/json",
                body,
            }
        }
    })
}

/// The model requests (`:streamGenerateContent`) recorded.
pub fn model_requests(api: &FakeApi) -> Vec<Value> {
    api.requests()
        .into_iter()
        .filter(|(target, _)| target.contains(":streamGenerateContent"))
        .map(|(_, body)| body)
        .collect()
}

/// What came back to the model for its tool calls, in order (each `functionResponse`'s
/// `response` object as text).
pub fn tool_results(api: &FakeApi) -> Vec<String> {
    model_requests(api)
        .iter()
        .map(function_responses)
        .max_by_key(Vec::len)
        .unwrap_or_default()
        .iter()
        .map(|f| f["response"].to_string())
        .collect()
}

/// The temporary HOME of the client: Gemini CLI's user settings select the API-key auth
/// (else it exits 41 asking for an auth method) and send no usage statistics.
pub fn gemini_home(env: &Env) -> PathBuf {
    let home = env.root().join("user");
    let dir = home.join(".gemini");
    std::fs::create_dir_all(&dir).expect("create ~/.gemini");
    let path = dir.join("settings.json");
    let mut settings: Value = std::fs::read_to_string(&path)
        .ok()
        .and_then(|t| serde_json::from_str(&t).ok())
        .unwrap_or_else(|| json!({}));
    settings["security"]["auth"]["selectedType"] = json!("gemini-api-key");
    settings["privacy"]["usageStatisticsEnabled"] = json!(false);
    std::fs::write(&path, settings.to_string()).expect("write ~/.gemini/settings.json");
    home
}

/// `gemini -p PROMPT --yolo` in the project with the fake model behind it; killed (its whole
/// process group) and the test failed if it outlives [`RUN_DEADLINE`].
pub fn run_gemini(env: &Env, gemini: &Path, api: &FakeApi, prompt: &str) -> Output {
    run_gemini_with(env, gemini, api, prompt, &[])
}

/// [`run_gemini`] with `extra` variables in the client's environment.
pub fn run_gemini_with(
    env: &Env,
    gemini: &Path,
    api: &FakeApi,
    prompt: &str,
    extra: &[(&str, &str)],
) -> Output {
    let cmd = gemini_command(env, gemini, api, prompt, extra);
    run_within(cmd, RUN_DEADLINE, "gemini -p")
}

/// The command of `gemini -p PROMPT --yolo` in the project, offline against `api`, with a
/// HOME and TMPDIR in the test's directory.
pub fn gemini_command(
    env: &Env,
    gemini: &Path,
    api: &FakeApi,
    prompt: &str,
    extra: &[(&str, &str)],
) -> Command {
    let home = gemini_home(env);
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    let mut cmd = Command::new(gemini);
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("USER", "e2e-tester")
        .env("TMPDIR", env.root())
        .env("MAOS_HOME", &env.home)
        .env("MAOS_SOCKET", &env.socket)
        .env(
            "GOOGLE_GEMINI_BASE_URL",
            format!("http://127.0.0.1:{}", api.port()),
        )
        .env("GEMINI_API_KEY", "dummy")
        .envs(extra.iter().copied())
        .current_dir(&env.project)
        .args(["-p", prompt, "--yolo", "-m", MODEL]);
    cmd
}
