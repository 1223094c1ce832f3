//! Kept versions of held files (issue 31 §2). When a holder's write is done, the connection
//! reads the file, hashes it and keeps a copy in the project's content-addressed store,
//! `$MAOS_HOME/projects/<hash>/kept/<sha256>` (files 0600, directory 0700); the actor keeps,
//! per file, the holder's last version ([`Kept`], in memory, shared with the connections
//! through the project's handle). After another agent's shell command the held files are
//! hashed again: a difference is a violation. `maos restore-file` puts a kept version back,
//! keeping the content it replaces first. Bounded: a file over [`MAX_FILE`] is hashed, not
//! copied; past [`MAX_TOTAL`] the oldest copies go; `maos gc` sweeps copies no remaining
//! session can name.
//!
//! File I/O here runs in the connection's blocking tasks, never in the actor.

use std::collections::{HashMap, HashSet};
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

use maos_core::{AgentId, Ts};
use maos_proto::{ErrorBody, ErrorCode, FileRestoreReport, PsViolation, SeenFile};
use sha2::{Digest, Sha256};

/// The largest file the store copies; a bigger one is hashed only (and said so).
pub const MAX_FILE: u64 = 8 << 20;
/// The store's bound per project: past it the oldest copies are dropped.
pub const MAX_TOTAL: u64 = 256 << 20;
/// Files whose last version the daemon remembers per project (oldest forgotten first).
const MAX_VERSIONS: usize = 4096;
/// Violations `ps` shows per project (oldest forgotten first).
const MAX_MARKS: usize = 256;
/// Notices waiting per agent.
const MAX_NOTICES: usize = 16;

/// The store of the project at `root` (as the registry names its directory).
pub fn store_dir(home: &Path, root: &str) -> PathBuf {
    home.join("projects")
        .join(maos_proto::paths::workspace_hash(Path::new(root)))
        .join("kept")
}

/// A SHA-256 as the store names files: 64 lowercase hex digits. Nothing else ever becomes a
/// path in the store.
pub fn is_sha(s: &str) -> bool {
    s.len() == 64 && is_hex(s)
}

fn is_hex(s: &str) -> bool {
    s.bytes().all(|b| matches!(b, b'0'..=b'9' | b'a'..=b'f'))
}

fn hex(digest: &[u8]) -> String {
    use std::fmt::Write as _;
    let mut s = String::with_capacity(digest.len() * 2);
    for b in digest {
        let _ = write!(s, "{b:02x}");
    }
    s
}

/// SHA-256 of `bytes`, lowercase hex.
pub fn sha256(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

/// The file at `file` now: hashed, and kept in `store` when `keep(sha)` says so and it is
/// small enough. A file that is not there is "deleted" (empty hash); None for something that
/// is not a regular file (a directory, a socket) or cannot be read.
///
/// `unchanged`: the hash and [`stamp`] of the content the caller knows; when the file's stamp
/// is still that one, its content is that one, and the file is not read.
pub fn look(
    file: &Path,
    store: &Path,
    keep: impl Fn(&str) -> bool,
    unchanged: Option<(&str, &str)>,
) -> Option<SeenFile> {
    let meta = match std::fs::metadata(file) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Some(SeenFile::default()),
        Err(_) => return None,
    };
    if !meta.is_file() {
        return None;
    }
    let stamp = stamp(&meta);
    if let (Some((sha, known)), Some(now)) = (unchanged, &stamp)
        && known == now
    {
        return Some(SeenFile {
            sha256: sha.to_string(),
            size: meta.len(),
            kept: true,
            stamp,
            ..SeenFile::default()
        });
    }
    if meta.len() > MAX_FILE {
        let mut f = std::fs::File::open(file).ok()?;
        let mut h = Sha256::new();
        let mut buf = vec![0u8; 64 * 1024];
        let mut size = 0u64;
        loop {
            let n = f.read(&mut buf).ok()?;
            if n == 0 {
                break;
            }
            size += n as u64;
            h.update(&buf[..n]);
        }
        return Some(SeenFile {
            sha256: hex(&h.finalize()),
            size,
            stamp: stamp.filter(|_| size == meta.len()),
            ..SeenFile::default()
        });
    }
    let bytes = std::fs::read(file).ok()?;
    let sha = sha256(&bytes);
    let kept = keep(&sha) && put(store, &sha, &bytes).is_ok();
    Some(SeenFile {
        stamp: stamp.filter(|_| bytes.len() as u64 == meta.len()),
        sha256: sha,
        size: bytes.len() as u64,
        kept,
        ..SeenFile::default()
    })
}

/// A regular file's identity and last change (device, inode, ctime, size), when that change
/// is older than [`CLOCK_SLACK`]: a write in the same tick of the kernel's coarse clock
/// could leave the same ctime, so a fresher stamp is not trusted (the file is read).
fn stamp(meta: &std::fs::Metadata) -> Option<String> {
    use std::os::unix::fs::MetadataExt;
    let secs = u64::try_from(meta.ctime()).ok()?;
    let nanos = u32::try_from(meta.ctime_nsec()).ok()?;
    let changed = SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))?;
    (changed + CLOCK_SLACK < SystemTime::now()).then(|| {
        format!(
            "{}:{}:{secs}.{nanos:09}:{}",
            meta.dev(),
            meta.ino(),
            meta.len()
        )
    })
}

/// Keep `bytes` (whose hash is `sha`) in `store`: written once (0600, whole or not at all),
/// its time refreshed when it is there already (the store drops the oldest first). A new
/// copy trims the store to [`MAX_TOTAL`].
pub fn put(store: &Path, sha: &str, bytes: &[u8]) -> std::io::Result<()> {
    if !is_sha(sha) || bytes.len() as u64 > MAX_FILE {
        return Err(std::io::Error::other("not kept"));
    }
    let at = store.join(sha);
    if let Ok(f) = std::fs::OpenOptions::new().append(true).open(&at) {
        let _ = f.set_modified(SystemTime::now());
        return Ok(());
    }
    maos_proto::paths::private_dir_all(store)?;
    let tmp = store.join(format!("{sha}.{}.tmp", std::process::id()));
    {
        let mut f = maos_proto::paths::private_file(&tmp)?;
        f.write_all(bytes)?;
    }
    if let Err(e) = std::fs::rename(&tmp, &at) {
        let _ = std::fs::remove_file(&tmp);
        return Err(e);
    }
    trim(store, MAX_TOTAL);
    Ok(())
}

/// The kept content of `sha`, checked against its hash (a damaged copy is refused).
pub fn get(store: &Path, sha: &str) -> Result<Vec<u8>, String> {
    if !is_sha(sha) {
        return Err(format!("{sha:?} is not a SHA-256"));
    }
    let bytes = std::fs::read(store.join(sha)).map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound => format!(
            "version {} is no longer kept (the store drops its oldest copies past {} MiB, and `maos gc` sweeps them)",
            &sha[..12],
            MAX_TOTAL >> 20
        ),
        _ => format!("cannot read kept version {}: {e}", &sha[..12]),
    })?;
    if sha256(&bytes) != sha {
        return Err(format!(
            "kept version {} is damaged (its content no longer has its hash)",
            &sha[..12]
        ));
    }
    Ok(bytes)
}

/// The kept version a person named: a SHA-256 or a prefix of one (at least 6 hex digits),
/// found in `store`.
pub fn find_version(store: &Path, prefix: &str) -> Result<String, String> {
    let prefix = prefix.trim().to_ascii_lowercase();
    if prefix.len() < 6 || prefix.len() > 64 || !is_hex(&prefix) {
        return Err(format!(
            "--version {prefix:?}: give a kept version's SHA-256 (at least its first 6 hex digits; `maos events --type lock_violated` lists them)"
        ));
    }
    let mut found: Vec<String> = std::fs::read_dir(store)
        .into_iter()
        .flatten()
        .filter_map(|e| e.ok()?.file_name().into_string().ok())
        .filter(|n| is_sha(n) && n.starts_with(&prefix))
        .collect();
    found.sort();
    match found.len() {
        1 => Ok(found.remove(0)),
        0 => Err(format!("no kept version starts with {prefix}")),
        n => Err(format!(
            "{n} kept versions start with {prefix}: give more of the hash"
        )),
    }
}

/// Drop the oldest copies until the store holds at most `max` bytes.
pub fn trim(store: &Path, max: u64) {
    let mut files: Vec<(SystemTime, u64, PathBuf)> = std::fs::read_dir(store)
        .into_iter()
        .flatten()
        .filter_map(|e| {
            let e = e.ok()?;
            let m = e.metadata().ok()?;
            let name = e.file_name().into_string().ok()?;
            let at = m.modified().ok()?;
            (m.is_file() && is_sha(&name)).then(|| (at, m.len(), e.path()))
        })
        .collect();
    let mut total: u64 = files.iter().map(|f| f.1).sum();
    if total <= max {
        return;
    }
    files.sort();
    for (_, size, path) in files {
        if total <= max {
            break;
        }
        if std::fs::remove_file(&path).is_ok() {
            total -= size;
        }
    }
}

/// `maos gc`: drop the copies last kept before `before` (when the oldest session that remains
/// began): no remaining session can name them. Returns how many went.
pub fn sweep(store: &Path, before: SystemTime) -> usize {
    let mut gone = 0;
    for e in std::fs::read_dir(store).into_iter().flatten().flatten() {
        let Ok(name) = e.file_name().into_string() else {
            continue;
        };
        let old = e
            .metadata()
            .ok()
            .and_then(|m| m.modified().ok())
            .is_some_and(|t| t < before);
        let stale_tmp = name.ends_with(".tmp");
        if old && (is_sha(&name) || stale_tmp) && std::fs::remove_file(e.path()).is_ok() {
            gone += 1;
        }
    }
    gone
}

/// Put `bytes` in the file at `file`, whole or not at all (a file beside it, then a rename),
/// with the mode the file had.
pub fn write_back(file: &Path, bytes: &[u8]) -> std::io::Result<()> {
    use std::os::unix::fs::{OpenOptionsExt, PermissionsExt};
    let mode = std::fs::metadata(file)
        .map(|m| m.permissions().mode() & 0o7777)
        .unwrap_or(0o644);
    let name = file
        .file_name()
        .ok_or_else(|| std::io::Error::other("no file name"))?;
    let mut tmp_name = std::ffi::OsString::from(".");
    tmp_name.push(name);
    tmp_name.push(format!(".maos-restore.{}", std::process::id()));
    let tmp = file.with_file_name(tmp_name);
    let result = (|| {
        let mut f = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .mode(mode)
            .open(&tmp)?;
        f.write_all(bytes)?;
        f.sync_all()?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(mode))?;
        std::fs::rename(&tmp, file)
    })();
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

/// PostToolUse: look at the files the call wrote (each kept: its writer's version, if it
/// holds the file) and, after a shell command, at every held file (kept when it changed), in
/// a blocking task. Sets `call.seen` for the actor; nothing for any other event.
pub async fn look_after(
    shared: &Shared,
    store: PathBuf,
    real_root: &Path,
    call: &mut crate::base::hookcall::Hook,
) {
    // A shell command begins: when, so that its end can tell the changes it made from
    // earlier ones.
    if call.event == "PreToolUse" && call.is_shell() {
        lock(shared).started(command_key(call), SystemTime::now());
        return;
    }
    if call.event != "PostToolUse" || call.path_error.is_some() {
        return;
    }
    let start = call
        .is_shell()
        .then(|| lock(shared).take_start(&command_key(call)))
        .flatten();
    let mut wanted: Vec<(String, Option<String>, Option<String>)> = Vec::new();
    if call.writes_files() {
        wanted.extend(call.paths.iter().map(|p| (p.clone(), None, None)));
    }
    if call.is_shell() {
        for (path, sha, stamp) in lock(shared).to_look() {
            if !wanted.iter().any(|(p, _, _)| *p == path) {
                wanted.push((path, sha, stamp));
            }
        }
    }
    if wanted.is_empty() {
        return;
    }
    let root = real_root.to_path_buf();
    let looked = tokio::task::spawn_blocking(move || {
        wanted
            .into_iter()
            .filter_map(|(path, baseline, stamp)| {
                let keep = |sha: &str| baseline.as_deref() != Some(sha);
                let file = root.join(&path);
                let unchanged = baseline.as_deref().zip(stamp.as_deref());
                let mut seen = look(&file, &store, keep, unchanged)?;
                seen.before_command = match (&baseline, start) {
                    (Some(b), Some(start)) if *b != seen.sha256 && !seen.deleted() => {
                        changed_at(&file).is_some_and(|t| t + CLOCK_SLACK < start)
                    }
                    _ => false,
                };
                seen.path = path;
                seen.baseline = baseline;
                Some(seen)
            })
            .collect::<Vec<_>>()
    })
    .await;
    if let Ok(seen) = looked {
        call.seen = seen;
    }
}

/// `maos restore-file PATH`: refused when the path climbs (`..`): name the file itself.
pub fn check_restore_path(path: &str) -> Result<(), ErrorBody> {
    if path.trim().is_empty() {
        return Err(refused("name the file to put back"));
    }
    if Path::new(path)
        .components()
        .any(|c| matches!(c, std::path::Component::ParentDir))
    {
        return Err(refused(format!(
            "{path}: name the file without '..' (a path in the project, as `maos ps` shows it)"
        )));
    }
    Ok(())
}

fn refused(why: impl std::fmt::Display) -> ErrorBody {
    ErrorBody::new(ErrorCode::BadRequest, why.to_string())
}

/// Which version of `key` to put back: the one named (`version`, a hash or a prefix of one,
/// found in the store), else the holder's last kept version. With its holder, when known.
pub fn restore_choice(
    shared: &Shared,
    store: &Path,
    key: &str,
    version: Option<&str>,
) -> Result<(String, Option<AgentId>), ErrorBody> {
    let known = lock(shared).version(key).cloned();
    let holder = known.as_ref().map(|v| v.holder.clone());
    if let Some(v) = version {
        let sha = find_version(store, v).map_err(refused)?;
        return Ok((sha, holder));
    }
    match known {
        Some(v) if v.kept && is_sha(&v.sha256) => Ok((v.sha256, holder)),
        Some(v) if v.sha256.is_empty() => Err(refused(format!(
            "{key}: its holder's last version is no file (it removed it); nothing to put back"
        ))),
        Some(v) => Err(refused(format!(
            "{key}: maos has only the hash of its holder's version ({}), not a copy (over {} MiB)",
            &v.sha256[..v.sha256.len().min(12)],
            MAX_FILE >> 20
        ))),
        None => Err(ErrorBody::new(
            ErrorCode::NotFound,
            format!(
                "no kept version of {key}: maos keeps a held file's content when its holder writes it, and `maos gc` sweeps it with the session; `--version HASH` names another"
            ),
        )),
    }
}

/// Put `sha`'s content back in `root/key`, keeping the content it replaces first (so that
/// nothing is lost either way). Blocking: run off the runtime.
pub fn restore(
    store: &Path,
    root: &Path,
    key: &str,
    sha: &str,
    holder: Option<AgentId>,
) -> Result<FileRestoreReport, ErrorBody> {
    let bytes = get(store, sha).map_err(refused)?;
    let file = root.join(key);
    let current = match std::fs::symlink_metadata(&file) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(refused(format!("{key}: {e}"))),
        Ok(m) if !m.is_file() => {
            return Err(refused(format!(
                "{key} is not a regular file; nothing was changed"
            )));
        }
        Ok(_) => Some(look(&file, store, |_| true, None).ok_or_else(|| {
            refused(format!(
                "{key}: cannot read it to keep it; nothing was changed"
            ))
        })?),
    };
    if let Some(c) = &current
        && !c.kept
        && c.sha256 != sha
    {
        return Err(refused(format!(
            "{key}: its present content cannot be kept (over {} MiB, or the store is not writable), so it is not replaced; nothing was changed",
            MAX_FILE >> 20
        )));
    }
    write_back(&file, &bytes).map_err(|e| {
        ErrorBody::new(
            ErrorCode::Storage,
            format!("cannot write {key}: {e}; it is unchanged"),
        )
    })?;
    Ok(FileRestoreReport {
        path: key.to_string(),
        version: sha.to_string(),
        bytes: bytes.len() as u64,
        replaced: current.as_ref().map(|c| c.sha256.clone()),
        replaced_kept: current.is_some_and(|c| c.kept),
        holder,
    })
}

/// When the file's status last changed (its ctime: set by every write, rename and chmod,
/// and by no tool on request, unlike its mtime).
fn changed_at(file: &Path) -> Option<SystemTime> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(file).ok()?;
    let secs = u64::try_from(m.ctime()).ok()?;
    let nanos = u32::try_from(m.ctime_nsec()).ok()?;
    SystemTime::UNIX_EPOCH.checked_add(std::time::Duration::new(secs, nanos))
}

/// The holder's last version of one file, as the daemon knows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Version {
    pub holder: AgentId,
    /// SHA-256 (empty: the holder's write removed it).
    pub sha256: String,
    pub size: u64,
    /// Its copy is in the store.
    pub kept: bool,
    pub at: Ts,
    /// The holder still holds the file's write lock: only then is it looked at.
    pub held: bool,
    /// The changed content already reported as a violation (so that it is reported once).
    pub reported: Option<String>,
    /// The file's [`stamp`] when this version was hashed, if trusted.
    pub stamp: Option<String>,
}

/// What a look at a file after a tool call means.
#[derive(Debug, PartialEq, Eq)]
pub enum Check {
    /// Not a held file, or unchanged.
    Nothing,
    /// The holder's own change: its version now.
    Own,
    /// Another agent changed the holder's file: its version before.
    Violated(Version),
}

/// What the daemon knows of held files' content, per project: each file's holder's last
/// version, the violations `ps` shows, and the notices waiting for holders. In memory only:
/// a restarted daemon knows a file's version again at its holder's next write.
#[derive(Debug, Default)]
pub struct Kept {
    versions: HashMap<String, Version>,
    marks: Vec<PsViolation>,
    notices: HashMap<AgentId, Vec<String>>,
    /// Write locks held now whose holder's version is not known (path, holder), git's own
    /// files aside (its index is a lock git commands take turns at, never a file someone
    /// wrote).
    unversioned: Vec<(String, AgentId)>,
    /// When each shell command still running began (its PreToolUse), by [`command_key`].
    starts: std::collections::VecDeque<(String, SystemTime)>,
}

/// How far a file's timestamps may lag the clock (the kernel stamps files from a coarse
/// clock, a tick behind): a change this close before a command began counts as its own.
const CLOCK_SLACK: std::time::Duration = std::time::Duration::from_millis(50);

/// Shell commands whose start is remembered per project (oldest forgotten first).
const MAX_STARTS: usize = 1024;

/// Which shell command a hook call is about: its window, its agent and its tool call (Gemini
/// CLI gives none: then the agent's latest).
pub fn command_key(call: &maos_proto::HookCall) -> String {
    format!(
        "{}\u{1f}{}\u{1f}{}",
        call.session_id,
        call.agent_id.as_deref().unwrap_or(""),
        call.tool_use_id.as_deref().unwrap_or("")
    )
}

/// [`Kept`] as the actor and the connections share it.
pub type Shared = Arc<Mutex<Kept>>;

/// The shared [`Kept`], whatever a panicking holder left.
pub fn lock(shared: &Shared) -> MutexGuard<'_, Kept> {
    shared.lock().unwrap_or_else(|p| p.into_inner())
}

impl Kept {
    /// The held files and their holders' versions (hash).
    #[cfg(test)]
    pub fn held(&self) -> Vec<(String, String)> {
        self.versions
            .iter()
            .filter(|(_, v)| v.held)
            .map(|(p, v)| (p.clone(), v.sha256.clone()))
            .collect()
    }

    /// What a shell command's end looks at: each held file with its holder's version (hash),
    /// and the held files whose holder's version is not known yet (None): a daemon that
    /// restarted, a lock taken with `maos lock acquire`. Those are known from that look on.
    /// With each version's [`stamp`], when known: an unchanged file is not read again.
    pub fn to_look(&self) -> Vec<(String, Option<String>, Option<String>)> {
        let mut out: Vec<(String, Option<String>, Option<String>)> = self
            .versions
            .iter()
            .filter(|(_, v)| v.held)
            .map(|(p, v)| (p.clone(), Some(v.sha256.clone()), v.stamp.clone()))
            .collect();
        out.extend(
            self.unversioned
                .iter()
                .map(|(p, _)| (p.clone(), None, None)),
        );
        out.sort();
        out
    }

    /// The last version of `path`, held or not.
    pub fn version(&self, path: &str) -> Option<&Version> {
        self.versions.get(path)
    }

    /// `holding`: the (path, holder) pairs of the write locks held now. A version whose lock
    /// went is no longer looked at, and its violation no longer shown.
    pub fn settle(&mut self, holding: &HashSet<(&str, &AgentId)>) {
        for (path, v) in self.versions.iter_mut() {
            v.held = holding.contains(&(path.as_str(), &v.holder));
        }
        let versions = &self.versions;
        self.unversioned = holding
            .iter()
            .filter(|(p, h)| {
                !(*p == ".git" || p.starts_with(".git/"))
                    && versions.get(*p).is_none_or(|v| &v.holder != *h)
            })
            .map(|(p, h)| (p.to_string(), (*h).clone()))
            .collect();
        self.unversioned.sort();
        let versions = &self.versions;
        self.marks.retain(|m| {
            versions
                .get(&m.path)
                .is_some_and(|v| v.held && v.holder == m.holder)
        });
    }

    /// The holder wrote `seen`: its version now.
    pub fn set(&mut self, holder: &AgentId, seen: &SeenFile, at: Ts) {
        if self.versions.len() >= MAX_VERSIONS && !self.versions.contains_key(&seen.path) {
            let oldest = self
                .versions
                .iter()
                .min_by_key(|(_, v)| (v.held, v.at))
                .map(|(p, _)| p.clone());
            if let Some(p) = oldest {
                self.versions.remove(&p);
            }
        }
        self.marks
            .retain(|m| !(m.path == seen.path && &m.holder == holder));
        // Its version is known now: no longer looked at as unknown (which would take the
        // next change as the version, unreported).
        self.unversioned.retain(|(p, _)| *p != seen.path);
        self.versions.insert(
            seen.path.clone(),
            Version {
                holder: holder.clone(),
                sha256: seen.sha256.clone(),
                size: seen.size,
                kept: seen.kept,
                at,
                held: true,
                reported: None,
                stamp: seen.stamp.clone(),
            },
        );
    }

    /// What `caller`'s tool call did to the file `seen` describes.
    pub fn check(&mut self, caller: &AgentId, seen: &SeenFile, at: Ts) -> Check {
        // A held file whose holder's version was not known: this is it from now on.
        if seen.baseline.is_none() {
            if let Some(i) = self.unversioned.iter().position(|(p, _)| *p == seen.path) {
                let (_, holder) = self.unversioned.remove(i);
                self.set(&holder, seen, at);
            }
            return Check::Nothing;
        }
        let Some(v) = self.versions.get_mut(&seen.path).filter(|v| v.held) else {
            return Check::Nothing;
        };
        if v.sha256 == seen.sha256 {
            // Unchanged: its stamp, once trusted, spares the next looks a read.
            if v.stamp.is_none() {
                v.stamp = seen.stamp.clone();
            }
            return Check::Nothing;
        }
        if &v.holder == caller {
            let holder = v.holder.clone();
            self.set(&holder, seen, at);
            return Check::Own;
        }
        // The holder's version moved while this file was hashed: not this call's doing.
        if seen.baseline.as_deref() != Some(v.sha256.as_str())
            || v.reported.as_deref() == Some(seen.sha256.as_str())
        {
            return Check::Nothing;
        }
        v.reported = Some(seen.sha256.clone());
        let before = v.clone();
        // One mark per file, holder and violator: the latest (a person reads it once).
        let violator = (!seen.before_command).then(|| caller.clone());
        self.marks.retain(|m| {
            !(m.path == seen.path && m.holder == before.holder && m.violator == violator)
        });
        if self.marks.len() >= MAX_MARKS {
            self.marks.remove(0);
        }
        self.marks.push(PsViolation {
            path: seen.path.clone(),
            holder: before.holder.clone(),
            violator,
            at,
        });
        Check::Violated(before)
    }

    /// The violations where `agent` is holder or violator.
    pub fn marks_of(&self, agent: &AgentId) -> Vec<PsViolation> {
        self.marks
            .iter()
            .filter(|m| &m.holder == agent || m.violator.as_ref() == Some(agent))
            .cloned()
            .collect()
    }

    /// `path` was put back to `sha256` (`maos restore-file`): the holder's version again, its
    /// violation no longer shown.
    pub fn restored(&mut self, path: &str, sha256: &str, size: u64) {
        if let Some(v) = self.versions.get_mut(path) {
            v.sha256 = sha256.to_string();
            v.size = size;
            v.kept = true;
            v.reported = None;
            v.stamp = None;
        }
        self.marks.retain(|m| m.path != path);
    }

    /// A shell command begins.
    pub fn started(&mut self, key: String, at: SystemTime) {
        self.starts.retain(|(k, _)| *k != key);
        if self.starts.len() >= MAX_STARTS {
            self.starts.pop_front();
        }
        self.starts.push_back((key, at));
    }

    /// When the shell command that ends began, if its PreToolUse was seen.
    pub fn take_start(&mut self, key: &str) -> Option<SystemTime> {
        let i = self.starts.iter().position(|(k, _)| k == key)?;
        self.starts.remove(i).map(|(_, t)| t)
    }

    /// Tell `agent` at its next hook.
    pub fn notify(&mut self, agent: &AgentId, text: String) {
        // Agents that never call again (ended) do not keep notices past the bound.
        if self.notices.len() >= MAX_MARKS && !self.notices.contains_key(agent) {
            let some = self.notices.keys().next().cloned();
            if let Some(k) = some {
                self.notices.remove(&k);
            }
        }
        let q = self.notices.entry(agent.clone()).or_default();
        if q.len() >= MAX_NOTICES {
            q.remove(0);
        }
        q.push(text);
    }

    /// What waits for `agent`, once.
    pub fn take_notices(&mut self, agent: &AgentId) -> Option<String> {
        let q = self.notices.remove(agent)?;
        (!q.is_empty()).then(|| q.join("\n"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn seen(path: &str, sha: &str, baseline: Option<&str>) -> SeenFile {
        SeenFile {
            path: path.into(),
            sha256: sha.into(),
            size: 3,
            kept: true,
            baseline: baseline.map(str::to_string),
            before_command: false,
            stamp: None,
        }
    }

    #[test]
    fn a_change_before_the_command_names_no_violator_and_starts_are_per_command() {
        let (a, b) = (agent(1), agent(2));
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        k.set(&a, &seen("x", "aa", None), now);
        let mut earlier = seen("x", "bb", Some("aa"));
        earlier.before_command = true;
        assert!(matches!(k.check(&b, &earlier, now), Check::Violated(_)));
        assert_eq!(k.marks_of(&a)[0].violator, None);
        assert!(
            k.marks_of(&b).is_empty(),
            "not on the innocent command's row"
        );
        let t = SystemTime::now();
        k.started("w\u{1f}\u{1f}t1".into(), t);
        assert_eq!(k.take_start("w\u{1f}\u{1f}t2"), None);
        assert_eq!(k.take_start("w\u{1f}\u{1f}t1"), Some(t));
        assert_eq!(k.take_start("w\u{1f}\u{1f}t1"), None, "taken once");
    }

    fn agent(n: u8) -> AgentId {
        AgentId::parse(&format!("agt_{n:032x}")).expect("agent id")
    }

    #[test]
    fn a_version_written_after_the_lock_was_settled_is_looked_at_with_its_hash() {
        // The holder's PostToolUse settles first (the file is held, its version unknown),
        // then its write becomes the version: the next look must compare with that version,
        // not take the file as unknown (which would swallow the next change unreported).
        let a = agent(1);
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        let holding: HashSet<(&str, &AgentId)> = [("src/x.rs", &a)].into_iter().collect();
        k.settle(&holding);
        k.set(&a, &seen("src/x.rs", "aa", None), now);
        assert_eq!(
            k.to_look(),
            [("src/x.rs".to_string(), Some("aa".to_string()), None)]
        );
    }

    #[test]
    fn the_same_violator_overwriting_a_file_again_is_one_mark() {
        let (a, b) = (agent(1), agent(2));
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        k.set(&a, &seen("src/x.rs", "aa", None), now);
        for (sha, before) in [("bb", "aa"), ("cc", "aa")] {
            assert!(matches!(
                k.check(&b, &seen("src/x.rs", sha, Some(before)), now),
                Check::Violated(_)
            ));
        }
        assert_eq!(k.marks_of(&a).len(), 1, "{:?}", k.marks_of(&a));
    }

    #[test]
    fn another_agents_change_is_a_violation_once_and_the_holders_own_is_not() {
        let (a, b) = (agent(1), agent(2));
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        k.set(&a, &seen("src/x.rs", "aa", None), now);
        assert_eq!(k.held(), [("src/x.rs".to_string(), "aa".to_string())]);
        // Unchanged: nothing.
        assert_eq!(
            k.check(&b, &seen("src/x.rs", "aa", Some("aa")), now),
            Check::Nothing
        );
        // Changed by b: a violation, reported once, shown on both rows.
        match k.check(&b, &seen("src/x.rs", "bb", Some("aa")), now) {
            Check::Violated(v) => assert_eq!((v.holder, v.sha256.as_str()), (a.clone(), "aa")),
            other => panic!("{other:?}"),
        }
        assert_eq!(
            k.check(&b, &seen("src/x.rs", "bb", Some("aa")), now),
            Check::Nothing
        );
        assert_eq!(k.marks_of(&a).len(), 1);
        assert_eq!(k.marks_of(&b).len(), 1);
        // The holder's own change moves its version and clears the mark.
        assert_eq!(
            k.check(&a, &seen("src/x.rs", "cc", Some("aa")), now),
            Check::Own
        );
        assert_eq!(k.version("src/x.rs").map(|v| v.sha256.as_str()), Some("cc"));
        assert!(k.marks_of(&a).is_empty());
        // A hash taken against an older version is not this call's doing.
        assert_eq!(
            k.check(&b, &seen("src/x.rs", "dd", Some("aa")), now),
            Check::Nothing
        );
    }

    #[test]
    fn a_released_file_is_not_looked_at_and_its_mark_goes() {
        let (a, b) = (agent(1), agent(2));
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        k.set(&a, &seen("x", "aa", None), now);
        assert!(matches!(
            k.check(&b, &seen("x", "bb", Some("aa")), now),
            Check::Violated(_)
        ));
        k.settle(&HashSet::new());
        assert!(k.held().is_empty());
        assert!(k.marks_of(&b).is_empty());
        assert_eq!(
            k.check(&b, &seen("x", "cc", Some("aa")), now),
            Check::Nothing
        );
        // Still known for restore-file.
        assert!(k.version("x").is_some());
    }

    #[test]
    fn a_held_file_without_a_known_version_gets_one_at_the_next_look() {
        let (a, b) = (agent(1), agent(2));
        let now = crate::txn::state::now();
        let mut k = Kept::default();
        let holding: HashSet<(&str, &AgentId)> =
            [("src/y.rs", &a), (".git/index", &b)].into_iter().collect();
        k.settle(&holding);
        // Git's index is never looked at; the held file is, without a version.
        assert_eq!(k.to_look(), [("src/y.rs".to_string(), None, None)]);
        assert_eq!(
            k.check(&b, &seen("src/y.rs", "aa", None), now),
            Check::Nothing
        );
        assert_eq!(k.version("src/y.rs").map(|v| &v.holder), Some(&a));
        assert_eq!(
            k.to_look(),
            [("src/y.rs".to_string(), Some("aa".to_string()), None)]
        );
        // From then on a change by another agent is one.
        assert!(matches!(
            k.check(&b, &seen("src/y.rs", "bb", Some("aa")), now),
            Check::Violated(_)
        ));
    }

    #[test]
    fn notices_are_given_once() {
        let a = agent(1);
        let mut k = Kept::default();
        k.notify(&a, "one".into());
        k.notify(&a, "two".into());
        assert_eq!(k.take_notices(&a).as_deref(), Some("one\ntwo"));
        assert_eq!(k.take_notices(&a), None);
    }

    #[test]
    fn the_store_keeps_names_by_hash_and_stays_bounded() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("kept");
        let file = dir.path().join("f");
        std::fs::write(&file, b"hello").expect("write");
        let s = look(&file, &store, |_| true, None).expect("looked");
        assert_eq!(s.sha256, sha256(b"hello"));
        assert!(s.kept);
        assert_eq!(get(&store, &s.sha256).expect("kept"), b"hello");
        use std::os::unix::fs::PermissionsExt;
        let mode = std::fs::metadata(store.join(&s.sha256))
            .expect("meta")
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o600);
        assert_eq!(find_version(&store, &s.sha256[..8]), Ok(s.sha256.clone()));
        assert!(find_version(&store, "../x").is_err());
        assert!(find_version(&store, "abc").is_err());
        assert!(get(&store, "../../etc/passwd").is_err());
        // Gone: deleted; a directory: nothing.
        assert!(
            look(&dir.path().join("none"), &store, |_| true, None).is_some_and(|s| s.deleted())
        );
        assert!(look(dir.path(), &store, |_| true, None).is_none());
        // Bounded: the oldest go first.
        std::fs::write(&file, b"second").expect("write");
        let t = look(&file, &store, |_| true, None).expect("looked");
        let old = SystemTime::now() - std::time::Duration::from_secs(60);
        std::fs::File::options()
            .append(true)
            .open(store.join(&s.sha256))
            .and_then(|f| f.set_modified(old))
            .expect("age");
        trim(&store, 6);
        assert!(get(&store, &s.sha256).is_err());
        assert!(get(&store, &t.sha256).is_ok());
        // gc sweeps what is older than the oldest session left.
        assert_eq!(
            sweep(
                &store,
                SystemTime::now() + std::time::Duration::from_secs(1)
            ),
            1
        );
        assert!(get(&store, &t.sha256).is_err());
    }

    #[test]
    fn an_unchanged_stamp_spares_the_read_and_any_write_changes_it() {
        let dir = tempfile::tempdir().expect("tempdir");
        let store = dir.path().join("kept");
        let file = dir.path().join("f");
        std::fs::write(&file, b"one").expect("write");
        // A fresh change is not trusted: no stamp until the clock is past the slack.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        let first = loop {
            let s = look(&file, &store, |_| true, None).expect("looked");
            if s.stamp.is_some() || std::time::Instant::now() > deadline {
                break s;
            }
            std::thread::yield_now();
        };
        let stamp = first
            .stamp
            .clone()
            .expect("a stamp once the change is old enough");
        // Same stamp: the content is taken as known (the file is not read: a made-up hash
        // comes back).
        let same = look(&file, &store, |_| true, Some(("made-up", &stamp))).expect("looked");
        assert_eq!(same.sha256, "made-up");
        // A write of the same size changes the stamp (its ctime), so the file is read.
        std::fs::write(&file, b"two").expect("write");
        let after = look(&file, &store, |_| true, Some(("made-up", &stamp))).expect("looked");
        assert_eq!(after.sha256, sha256(b"two"));
        assert_ne!(after.stamp.as_deref(), Some(stamp.as_str()));
    }

    #[test]
    fn write_back_keeps_the_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().expect("tempdir");
        let file = dir.path().join("run.sh");
        std::fs::write(&file, b"old").expect("write");
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        write_back(&file, b"new").expect("written");
        assert_eq!(std::fs::read(&file).expect("read"), b"new");
        let mode = std::fs::metadata(&file).expect("meta").permissions().mode();
        assert_eq!(mode & 0o777, 0o755);
        assert_eq!(std::fs::read_dir(dir.path()).expect("dir").count(), 1);
    }
}
