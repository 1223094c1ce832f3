//! `maos run --check PLAN`: the plan file's own checks, as `maos run` makes them, without
//! running it or asking the daemon, and the agents whose declared `files` overlap (issue 35):
//! they will not run at the same time unless one says `overlap = "allow"`. What only the
//! daemon's machine can say (each program on the agents' `PATH`, the `workdir` inside the
//! project) is checked by `maos run`.

use std::path::Path;

use maos_core::plan::{self, FileOverlap};
use serde::Serialize;

use crate::failure::{Failure, Res};
use crate::show::{print, print_json};

#[derive(Serialize)]
struct Checked {
    path: String,
    /// The plan's agents, and the landing agents maos adds for those with `land`.
    agents: usize,
    landings: usize,
    overlaps: Vec<FileOverlap>,
}

pub fn run(path: &Path, json: bool) -> Res {
    let text = std::fs::read_to_string(path).map_err(|e| {
        crate::failure::usage(format!("cannot read the plan {}: {e}", path.display()))
    })?;
    let shown = path.display().to_string();
    let refused = |message: String| Failure {
        body: maos_proto::ErrorBody::new(maos_proto::ErrorCode::BadRequest, message),
        exit: 1,
    };
    let p = plan::parse(&text)
        .map_err(|e| refused(format!("{shown}:{}:{}: {}", e.line, e.column, e.message)))?;
    // What `maos run` refuses too: files too costly to compare.
    let overlaps = p.overlaps().map_err(|e| refused(format!("{shown}: {e}")))?;
    let checked = Checked {
        path: shown,
        agents: p.agents.len(),
        landings: p.agents.iter().filter(|a| a.land.is_some()).count(),
        overlaps,
    };
    if json {
        return print_json(&checked);
    }
    let mut out = format!(
        "{}: a valid plan ({}",
        checked.path,
        maos_client::output::count(checked.agents, "agent")
    );
    if checked.landings > 0 {
        out.push_str(&format!(
            ", and {} maos adds",
            maos_client::output::count(checked.landings, "landing agent")
        ));
    }
    out.push_str(")\n");
    if checked.overlaps.is_empty() {
        out.push_str("no two agents declare overlapping files\n");
    }
    for o in &checked.overlaps {
        let files: Vec<String> = o
            .files
            .iter()
            .map(|(a, b)| {
                if a == b {
                    a.clone()
                } else {
                    format!("{a} / {b}")
                }
            })
            .collect();
        let what = if o.allowed {
            "they may run at the same time (overlap = \"allow\")"
        } else {
            "they will not run at the same time"
        };
        out.push_str(&format!(
            "{} and {} declare overlapping files ({}): {what}\n",
            o.a,
            o.b,
            files.join(", ")
        ));
    }
    print(&out);
    Ok(())
}
