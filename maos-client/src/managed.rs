//! The client side of managed sessions: `maos logs` (how recovery and validation reports read
//! is in `output`).

use maos_proto::req;
use std::io::{Read, Seek, SeekFrom, Write};
use std::time::Duration;

use maos_proto::{Reply, Request};

use crate::cli::Cli;
use crate::client::Client;
use crate::failure::{Failure, Res, usage};

/// How often `maos logs --follow` looks for new output.
const POLL: Duration = Duration::from_millis(200);

/// `maos logs AGENT [--follow]`: print the agent's output file; with `--follow`, keep
/// printing what it writes until the agent has ended and nothing more comes.
pub fn logs(cli: &Cli, agent: &str, follow: bool) -> Res {
    let root = cli.project_root()?;
    let mut client = Client::connect(true)?;
    let ask = |client: &mut Client| -> Res<(String, maos_core::AgentState)> {
        match client.request(
            Some(&root),
            Request::AgentLog(req::AgentLog {
                agent: agent.to_string(),
            }),
        )? {
            Reply::Log { path, state, .. } => Ok((path, state)),
            _ => Err(usage("the daemon gave an unexpected answer")),
        }
    };
    let (path, mut state) = ask(&mut client)?;
    if cli.json && !follow {
        let text = std::fs::read_to_string(&path).unwrap_or_default();
        let v = serde_json::json!({ "path": path, "state": state, "output": text });
        outln!("{v}");
        return Ok(());
    }
    let mut pos = 0u64;
    let mut out = std::io::stdout().lock();
    loop {
        let grew = match std::fs::File::open(&path) {
            Ok(mut f) => {
                let len = f.metadata().map(|m| m.len()).unwrap_or(0);
                if len < pos {
                    pos = 0; // replaced: start over
                }
                let mut buf = Vec::new();
                f.seek(SeekFrom::Start(pos))
                    .and_then(|_| f.read_to_end(&mut buf))
                    .map_err(|e| io_failure(&path, &e))?;
                pos += buf.len() as u64;
                out.write_all(&buf).map_err(|e| io_failure("stdout", &e))?;
                out.flush().map_err(|e| io_failure("stdout", &e))?;
                !buf.is_empty()
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                if !follow {
                    eprintln!("maos: no output yet ({path})");
                    return Ok(());
                }
                false
            }
            Err(e) => return Err(io_failure(&path, &e)),
        };
        if !follow || (state.is_terminal() && !grew) {
            return Ok(());
        }
        if !grew {
            std::thread::sleep(POLL);
            state = ask(&mut client)?.1;
        }
    }
}

fn io_failure(what: &str, e: &std::io::Error) -> Failure {
    Failure {
        body: maos_proto::ErrorBody::new(maos_proto::ErrorCode::Storage, format!("{what}: {e}")),
        exit: 1,
    }
}
