//! `maos export` and `maos import`: a session as a file, and a file as a session.

use maos_proto::req;
use std::io::Write;
use std::path::{Path, PathBuf};

use maos_proto::{MAX_FRAME_LEN, Reply, Request};

use crate::cli::Cli;
use crate::client::Client;
use crate::failure::{Res, usage};

/// Write the session (archived ones too; default: the active one) as maos-session JSON: to
/// `output`, a new file (mode 0600; an existing file is refused, as `backup -o` refuses it),
/// or to stdout.
pub fn export(cli: &Cli, session: Option<&str>, output: Option<&Path>) -> Res {
    let exists = |path: &Path| {
        usage(format!(
            "{} exists; name a new file with -o",
            path.display()
        ))
    };
    if let Some(path) = output
        && std::fs::symlink_metadata(path).is_ok()
    {
        return Err(exists(path));
    }
    let root = cli.project_root()?;
    let mut client = Client::connect(true)?;
    let session = match session {
        Some(s) => s.to_string(),
        // The export is read from the database by id: the actor names the active session.
        None => match client.request(
            Some(&root),
            Request::SessionShow(req::SessionShow { session: None }),
        )? {
            Reply::Session(s) => s.id.to_string(),
            _ => return Err(usage("the daemon gave an unexpected answer")),
        },
    };
    let reply = client.request(Some(&root), Request::Export(req::Export { session }))?;
    let Reply::Export(file) = reply else {
        return Err(usage("the daemon gave an unexpected answer"));
    };
    let Some(path) = output else {
        // Through `outln!`: a reader that stops early (`| head`) ends it quietly.
        let text = serde_json::to_string_pretty(&file).map_err(|e| usage(e.to_string()))?;
        outln!("{text}");
        return Ok(());
    };
    let fail = |e: std::io::Error| usage(format!("cannot write {}: {e}", path.display()));
    let mut tmp = path.as_os_str().to_owned();
    tmp.push(".tmp");
    let tmp = PathBuf::from(tmp);
    {
        let f = maos_proto::paths::private_file(&tmp).map_err(fail)?;
        let mut w = std::io::BufWriter::new(f);
        serde_json::to_writer_pretty(&mut w, &file).map_err(|e| usage(e.to_string()))?;
        w.flush().map_err(fail)?;
    }
    // Linked in place only if the name is still free (never replacing a file made meanwhile).
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    match linked {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => return Err(exists(path)),
        Err(e) => return Err(fail(e)),
    }
    let (events, checkpoints) = (file.events.len(), file.checkpoints.len());
    if cli.json {
        let v = serde_json::json!({
            "path": path, "session": file.session.id, "events": events, "checkpoints": checkpoints,
        });
        outln!("{v}");
    } else {
        outln!(
            "exported session {} ({}, {}) to {}",
            maos_core::ids::short(file.session.id.as_str()),
            maos_core::words::count(events, "event"),
            maos_core::words::count(checkpoints, "checkpoint"),
            path.display()
        );
    }
    Ok(())
}

/// The request for `maos backup [-o FILE]`: an absolute path that does not exist yet (the
/// daemon writes it). Without `-o`, `$MAOS_HOME/backups/<project>-DATE-TIME.db` (UTC): never
/// the working tree, where a database would end up in a commit.
pub fn backup_request(output: Option<&Path>, project: &str) -> Res<Request> {
    let file = match output {
        Some(p) => p.to_path_buf(),
        None => {
            let dir = maos_proto::paths::home_dir()
                .map_err(|e| usage(format!("cannot find maos's home: {e}")))?
                .join("backups");
            maos_proto::paths::private_dir_all(&dir)
                .map_err(|e| usage(format!("cannot create {}: {e}", dir.display())))?;
            let name = Path::new(project)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned())
                .filter(|n| !n.is_empty())
                .unwrap_or_else(|| "project".to_string());
            dir.join(format!(
                "{name}-{}.db",
                chrono::Utc::now().format("%Y%m%d-%H%M%SZ")
            ))
        }
    };
    let name = file
        .file_name()
        .ok_or_else(|| usage(format!("{} is not a file name", file.display())))?;
    let dir = match file.parent() {
        Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let dir = std::fs::canonicalize(&dir)
        .map_err(|e| usage(format!("cannot write into {}: {e}", dir.display())))?;
    let path = dir.join(name);
    if path.exists() {
        return Err(usage(format!(
            "{} exists; name a new file with -o",
            path.display()
        )));
    }
    Ok(Request::Backup(req::Backup {
        path: path.display().to_string(),
    }))
}

/// The request for `maos import FILE`: the daemon reads the file's text (and names what is
/// wrong with it); a file that cannot fit in one protocol frame is refused here.
pub fn import_request(file: &Path) -> Res<Request> {
    let too_big = |len: u64| {
        usage(format!(
            "{} is {:.1} MiB; an import is limited to {} MiB (one protocol frame)",
            file.display(),
            len as f64 / 1_048_576.0,
            MAX_FRAME_LEN / 1_048_576 - 1
        ))
    };
    let cannot = |e: std::io::Error| usage(format!("cannot read {}: {e}", file.display()));
    let len = std::fs::metadata(file).map_err(cannot)?.len();
    // Room for the request around the text (its escaping can grow it too).
    if len > (MAX_FRAME_LEN as u64) - 1_048_576 {
        return Err(too_big(len));
    }
    let text = std::fs::read_to_string(file).map_err(cannot)?;
    Ok(Request::Import(req::Import {
        path: file.display().to_string(),
        text,
    }))
}
