//! The radar across a fleet's machines (issue 35): what this machine reports of a worktree so
//! that another machine's radar can merge it without reading this disk ([`report`]: a base
//! commit and each changed file's content, bounded), and the tree another machine's report
//! stands for, built in this repository ([`build`]: its blobs written here, on top of its
//! base, through an index file of the radar's own). Moving reports through PostgreSQL and
//! checking those read back (`maos_core::radar::check_report`) is the daemon's.

use std::collections::HashMap;
use std::path::Path;

use maos_core::radar::{FLEET_FILE_CAP, FLEET_FILES_MAX, FLEET_TREE_CAP, FleetFile, FleetTree};

use crate::git::{Git, RawChange};
use crate::model::{RadarError, Snapshot};

/// git's mode of a submodule (a commit in a tree): its content is another repository's.
const GITLINK: u32 = 0o160000;

/// This machine's report of the worktree at `dir` as snapshotted in `snap`: the merge base of
/// its `HEAD` with the main line (else its `HEAD`), and every file whose content differs from
/// the base's, with its content, except where `last` (path → blob of the report written
/// before) says it was written already (content `None`: unchanged). Bounded: more than
/// [`FLEET_FILES_MAX`] files, one over [`FLEET_FILE_CAP`], all over [`FLEET_TREE_CAP`] or a
/// submodule changed make a report too large to compare (files named, no contents). `None`
/// before the worktree's first commit. `daemon`, `machine`, `agents` and `version` are left
/// for the caller.
pub fn report(
    git: &Git,
    dir: &Path,
    snap: &Snapshot,
    last: &HashMap<String, String>,
) -> Result<Option<FleetTree>, RadarError> {
    let Some(head) = &snap.head else {
        return Ok(None);
    };
    let base = match git.mainline(dir)? {
        Some(main) if main == *head => head.clone(),
        Some(main) => git
            .merge_base(dir, head, &main)?
            .unwrap_or_else(|| head.clone()),
        None => head.clone(),
    };
    let mut changes = git.raw_changes(dir, &base, &snap.tree)?;
    let mut too_large = None;
    if changes.len() > FLEET_FILES_MAX {
        too_large = Some(format!(
            "{} files changed (at most {FLEET_FILES_MAX})",
            changes.len()
        ));
        changes.truncate(FLEET_FILES_MAX);
    }
    if too_large.is_none()
        && let Some(sub) = changes.iter().find(|c| c.mode == GITLINK)
    {
        too_large = Some(format!("submodule `{}` changed", sub.path));
    }
    let present: Vec<&RawChange> = changes.iter().filter(|c| c.mode != 0).collect();
    let ids: Vec<&str> = present.iter().map(|c| c.blob.as_str()).collect();
    let sizes: HashMap<&str, u64> = ids
        .iter()
        .copied()
        .zip(git.blob_sizes(dir, &ids)?)
        .map(|(id, size)| (id, size.unwrap_or(0)))
        .collect();
    // Per path, as the contents are stored and as `check_report` counts them (one blob at two
    // paths is sent twice).
    let total: u64 = present.iter().map(|c| sizes[c.blob.as_str()]).sum();
    if too_large.is_none() {
        if let Some(big) = present
            .iter()
            .find(|c| sizes[c.blob.as_str()] > FLEET_FILE_CAP)
        {
            too_large = Some(format!(
                "`{}` is {} bytes (at most {FLEET_FILE_CAP})",
                big.path,
                sizes[big.blob.as_str()]
            ));
        } else if total > FLEET_TREE_CAP {
            too_large = Some(format!(
                "the changed files hold {total} bytes (at most {FLEET_TREE_CAP})"
            ));
        }
    }
    // Contents of the files not written before (none for a report too large).
    let fresh: Vec<&str> = match too_large {
        Some(_) => Vec::new(),
        None => present
            .iter()
            .filter(|c| last.get(&c.path) != Some(&c.blob))
            .map(|c| c.blob.as_str())
            .collect(),
    };
    let contents: HashMap<&str, Vec<u8>> =
        fresh.iter().copied().zip(git.blobs(dir, &fresh)?).collect();
    let files = changes
        .iter()
        .map(|c| FleetFile {
            path: c.path.clone(),
            mode: if c.mode == GITLINK { 0o100644 } else { c.mode },
            blob: c.blob.clone(),
            size: sizes.get(c.blob.as_str()).copied().unwrap_or(0),
            stored: 0,
            // The same blob may stand at two paths: each carries it.
            content: contents.get(c.blob.as_str()).cloned(),
        })
        .collect();
    Ok(Some(FleetTree {
        daemon: String::new(),
        machine: String::new(),
        worktree: dir.display().to_string(),
        agents: Vec::new(),
        base,
        too_large,
        files,
        version: 0,
    }))
}

/// What this repository holds of a checked report, looked up in one git process.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Here {
    /// Whether its base commit is here.
    pub base: bool,
    /// The files whose blobs are not, as indices in the report's `files`, in order (their
    /// contents must be fetched before [`build`]).
    pub missing: Vec<usize>,
}

/// Looks up a checked report's base and blobs in the repository at `dir` (one `git cat-file
/// --batch-check` for all of them).
pub fn here(git: &Git, dir: &Path, t: &FleetTree) -> Result<Here, RadarError> {
    let present: Vec<(usize, &FleetFile)> = t
        .files
        .iter()
        .enumerate()
        .filter(|(_, f)| f.mode != 0)
        .collect();
    let base = format!("{}^{{commit}}", t.base);
    let mut names: Vec<&str> = vec![base.as_str()];
    names.extend(present.iter().map(|(_, f)| f.blob.as_str()));
    let types = git.types(dir, &names)?;
    Ok(Here {
        base: types.first().and_then(Option::as_deref) == Some("commit"),
        missing: present
            .iter()
            .zip(types.iter().skip(1))
            .filter(|(_, ty)| ty.as_deref() != Some("blob"))
            .map(|((i, _), _)| *i)
            .collect(),
    })
}

/// The snapshot another machine's checked report stands for, built in the repository at `dir`:
/// its base with its files, those `here` found missing written here as blobs from `contents`
/// (by path; all in one git process), through the index file `index`. `Ok(Err(why))` when it
/// cannot be compared here: too large, its base commit not in this repository, a content that
/// is not its blob, or one that did not arrive.
pub fn build(
    git: &Git,
    dir: &Path,
    index: &Path,
    t: &FleetTree,
    here: &Here,
    contents: HashMap<String, Vec<u8>>,
) -> Result<Result<Snapshot, String>, RadarError> {
    if let Some(why) = &t.too_large {
        return Ok(Err(format!("too large to compare: {why}")));
    }
    if !here.base {
        return Ok(Err(format!("cannot compare: base {} not here", t.base)));
    }
    // Every blob must be here once the missing ones are written.
    let mut contents = contents;
    let mut writing: Vec<(&FleetFile, Vec<u8>)> = Vec::with_capacity(here.missing.len());
    for &i in &here.missing {
        let f = t.files.get(i).filter(|f| f.mode != 0);
        let (Some(f), Some(content)) = (f, f.and_then(|f| contents.remove(&f.path))) else {
            let path = f.map_or("?", |f| f.path.as_str());
            return Ok(Err(format!(
                "cannot compare: the content of `{path}` did not arrive"
            )));
        };
        writing.push((f, content));
    }
    let bodies: Vec<&[u8]> = writing.iter().map(|(_, c)| c.as_slice()).collect();
    let ids = git.write_blobs(dir, &index.with_extension("blobs"), &bodies)?;
    for ((f, _), id) in writing.iter().zip(&ids) {
        if *id != f.blob {
            return Ok(Err(format!(
                "refused: the content of `{}` is not its blob {}",
                f.path, f.blob
            )));
        }
    }
    let changes: Vec<RawChange> = t
        .files
        .iter()
        .map(|f| RawChange {
            path: f.path.clone(),
            mode: f.mode,
            blob: f.blob.clone(),
        })
        .collect();
    let tree = git.build_tree(dir, index, &t.base, &changes)?;
    Ok(Ok(Snapshot {
        head: Some(t.base.clone()),
        tree,
    }))
}
