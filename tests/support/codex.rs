//! Plumbing of the conformance tests that run the real Codex: the pinned release (its native
//! binary inside the npm package), installed on first use; its config pointing at a fake
//! Responses API ([`FakeApi`]) on 127.0.0.1; `codex exec` runs with a deadline, in the
//! foreground or the background.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::OnceLock;
use std::time::Duration;

use crate::conformance::{Answer, FakeApi, Gate, npm_package, run_within, sse};
use crate::{Env, Value, bin_dir, json};

const PACKAGE: &str = "@openai/codex";
pub const VERSION: &str = "0.171.0";
/// A model whose bundled metadata gives Codex its `apply_patch` tool.
pub const MODEL: &str = "gpt-5.5";
/// How long one `codex exec` may take before it is killed and the test fails.
pub const RUN_DEADLINE: Duration = Duration::from_secs(90);

/// The `codex` launcher of the pinned release, installed on first use; `Err` says why not.
pub fn codex() -> Result<PathBuf, String> {
    static CODEX: OnceLock<Result<PathBuf, String>> = OnceLock::new();
    CODEX
        .get_or_init(|| {
            let dir = npm_package(PACKAGE, VERSION)?;
            let bin = dir.join("node_modules/.bin/codex");
            let out = Command::new(&bin)
                .arg("--version")
                .output()
                .map_err(|e| format!("cannot start {}: {e}", bin.display()))?;
            let text = String::from_utf8_lossy(&out.stdout);
            if !out.status.success() || text.trim() != format!("codex-cli {VERSION}") {
                return Err(format!(
                    "{} --version answered {:?} ({})",
                    bin.display(),
                    text.trim(),
                    out.status
                ));
            }
            Ok(bin)
        })
        .clone()
}

/// What the fake model does next.
#[derive(Clone)]
pub enum Step {
    /// `apply_patch` (the freeform tool) with this patch.
    Patch(String),
    /// `exec_command` with this shell command.
    Shell(String),
}

/// The call id of step `i`.
pub fn call_id(i: usize) -> String {
    format!("call_maos_{i}")
}

/// The outputs of our calls that a request carries, in order: (call id, output text).
pub fn outputs(body: &Value) -> Vec<(String, String)> {
    body["input"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|i| {
            matches!(
                i["type"].as_str(),
                Some("function_call_output" | "custom_tool_call_output")
            )
        })
        .filter_map(|i| {
            let id = i["call_id"].as_str()?;
            let text = match &i["output"] {
                Value::String(s) => s.clone(),
                other => other.to_string(),
            };
            id.starts_with("call_maos_").then(|| (id.to_string(), text))
        })
        .collect()
}

/// The Responses API stream of one output item.
pub fn stream(n: usize, item: Value) -> String {
    let id = format!("resp_maos_{n}");
    sse(&[
        json!({"type": "response.created", "response": {"id": id}}),
        json!({"type": "response.output_item.added", "output_index": 0, "item": item}),
        json!({"type": "response.output_item.done", "output_index": 0, "item": item}),
        json!({"type": "response.completed", "response": {"id": id, "usage": {
            "input_tokens": 10, "input_tokens_details": null, "output_tokens": 5,
            "output_tokens_details": null, "total_tokens": 15}}}),
    ])
}

/// A fake Responses API playing `steps` one per request (the next one once the previous
/// call's output came back), then "Done.".
pub fn model(steps: Vec<Step>) -> FakeApi {
    model_holding(steps, None)
}

/// Where a fake model holds its answer: to the request that carries `after` outputs of its
/// calls, it answers only once `go` is open; `reached` is opened when that request arrived.
pub struct Hold {
    pub after: usize,
    pub reached: Gate,
    pub go: Gate,
}

/// [`model`], holding one answer until the test lets it go.
pub fn model_holding(steps: Vec<Step>, hold: Option<Hold>) -> FakeApi {
    FakeApi::start(move |method, target, body| {
        if method != "POST" || !target.starts_with("/v1/responses") {
            return Answer::not_found();
        }
        let done = outputs(body).len();
        if let Some(h) = hold.as_ref().filter(|h| h.after == done) {
            h.reached.open();
            h.go.wait();
        }
        let item = match steps.get(done) {
            Some(Step::Patch(patch)) => {
                json!({"type": "custom_tool_call", "id": format!("ctc_{done}"),
                "call_id": call_id(done), "name": "apply_patch", "input": patch,
                "status": "completed"})
            }
            Some(Step::Shell(cmd)) => json!({"type": "function_call", "id": format!("fc_{done}"),
                "call_id": call_id(done), "name": "exec_command",
                "arguments": json!({"cmd": cmd}).to_string(), "status": "completed"}),
            None => json!({"type": "message", "role": "assistant", "id": "msg_maos_done",
                "content": [{"type": "output_text", "text": "Done."}]}),
        };
        Answer::sse(stream(done, item))
    })
}

/// `$CODEX_HOME` of this test.
pub fn codex_home(env: &Env) -> PathBuf {
    env.root().join("codex-home")
}

/// Codex's config: the fake API as its model provider, nothing else.
pub fn configure(env: &Env, api: &FakeApi) {
    std::fs::create_dir_all(codex_home(env)).expect("CODEX_HOME");
    std::fs::write(
        codex_home(env).join("config.toml"),
        format!(
            "model = \"{MODEL}\"\nmodel_provider = \"fake\"\n\n[model_providers.fake]\n\
             name = \"fake\"\nbase_url = \"http://127.0.0.1:{}/v1\"\nwire_api = \"responses\"\n\
             env_key = \"MAOS_FAKE_KEY\"\n",
            api.port()
        ),
    )
    .expect("config.toml");
}

/// The environment a CLI runs in here: `maos` on PATH, the test's homes.
pub fn cli_env(env: &Env, cmd: &mut Command) {
    let path = format!(
        "{}:{}",
        bin_dir().display(),
        std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into())
    );
    cmd.env_clear()
        .env("PATH", path)
        .env("HOME", env.root().join("user"))
        .env("USER", "e2e-tester")
        .env("CODEX_HOME", codex_home(env))
        .env("MAOS_FAKE_KEY", "dummy")
        .env("MAOS_HOME", &env.home)
        .env("MAOS_SOCKET", &env.socket)
        .current_dir(&env.project);
}

/// `maos ARGS` as the user runs it (no terminal), with the test's `CODEX_HOME`.
pub fn maos(env: &Env, args: &[&str]) -> Output {
    let mut cmd = Command::new(crate::maos_bin());
    cli_env(env, &mut cmd);
    cmd.args(args);
    run_within(cmd, Duration::from_secs(30), &format!("maos {args:?}"))
}

/// The command of `codex exec PROMPT` in the project (no sandbox: the container has no
/// bubblewrap).
pub fn exec_command(env: &Env, codex: &Path, prompt: &str) -> Command {
    let mut cmd = Command::new(codex);
    cli_env(env, &mut cmd);
    cmd.args([
        "exec",
        "--skip-git-repo-check",
        "-s",
        "danger-full-access",
        prompt,
    ]);
    cmd
}

/// `codex exec PROMPT` in the project, run to its end.
pub fn run_codex(env: &Env, codex: &Path, prompt: &str) -> Output {
    run_within(exec_command(env, codex, prompt), RUN_DEADLINE, "codex exec")
}

/// `maos install-hooks --codex --yes`, which must succeed.
pub fn install(env: &Env) {
    let out = maos(env, &["install-hooks", "--codex", "--yes"]);
    assert!(out.status.success(), "{out:?}");
}

/// The outputs of our calls that reached the model (from the last request, which carries
/// the whole conversation).
pub fn received(api: &FakeApi) -> Vec<(String, String)> {
    let requests = api.requests();
    assert!(
        requests.iter().all(|(t, _)| t == "/v1/responses"),
        "{:?}",
        requests.iter().map(|(t, _)| t).collect::<Vec<_>>()
    );
    requests.last().map(|(_, b)| outputs(b)).unwrap_or_default()
}

pub fn patch_adding(path: &str, line: &str) -> String {
    format!("*** Begin Patch\n*** Add File: {path}\n+{line}\n*** End Patch\n")
}
