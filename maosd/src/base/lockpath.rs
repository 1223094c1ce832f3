//! Turning a path an agent names into a lock key: the path relative to the project root, after
//! lexical normalization, symlink resolution and worktree mapping. This touches the filesystem,
//! so it runs in the connection task, never in the project actor.

use std::path::{Component, Path, PathBuf};

use maos_core::LockPath;
use maos_proto::{ErrorBody, ErrorCode};

fn outside(input: &str, root: &Path, resolved: &Path) -> ErrorBody {
    ErrorBody::new(
        ErrorCode::PathOutsideWorkspace,
        format!(
            "{input}: resolves to {}, which is outside the project {}; only files inside the project can be locked",
            resolved.display(),
            root.display()
        ),
    )
}

/// `..` and `.` removed without touching the filesystem; `..` at the root stays at the root.
pub fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::new();
    for c in path.components() {
        match c {
            Component::ParentDir => {
                out.pop();
            }
            Component::CurDir => {}
            other => out.push(other.as_os_str()),
        }
    }
    out
}

/// Resolve symlinks in the longest existing prefix of `path`; the missing tail is appended as
/// it is (a file about to be created cannot be a symlink yet).
pub fn resolve_links(path: &Path) -> PathBuf {
    landing(path).0
}

/// Most symbolic links followed by hand (the kernel's own limit is 40).
const MAX_LINKS: u32 = 40;

/// Where a write to the absolute `path` lands: symlinks resolved in its longest existing
/// prefix, a dangling link followed to the file it would create, the missing tail appended
/// as it is. With it, why that may be wrong when a prefix could not be read (a loop of links,
/// a directory that cannot be searched): then the path is only maos's best guess.
pub fn landing(path: &Path) -> (PathBuf, Option<String>) {
    let (real, doubt, _) = landed(path);
    (real, doubt)
}

/// [`landing`], and whether every directory above the result is canonical: true when the
/// missing tail appended held no `..` (so the longest existing directory above it is a prefix
/// of a canonical path; a race with a new directory aside).
fn landed(path: &Path) -> (PathBuf, Option<String>, bool) {
    // The common case, a file about to be created in a directory that exists: one lstat and
    // the directory's resolution, instead of resolving the whole path, failing on its last
    // component, and resolving the directory again. A dangling link is there for lstat, so it
    // takes the general way below, which follows it.
    if let (Some(dir), Some(name)) = (path.parent(), path.file_name())
        && std::fs::symlink_metadata(path).is_err_and(|e| e.kind() == std::io::ErrorKind::NotFound)
        && let Ok(real) = std::fs::canonicalize(dir)
    {
        return (real.join(name), None, true);
    }
    landing_walk(path)
}

/// [`landed`] the general way: the longest existing prefix resolved, dangling links followed.
fn landing_walk(path: &Path) -> (PathBuf, Option<String>, bool) {
    let mut path = path.to_path_buf();
    let mut doubt = None;
    for _ in 0..=MAX_LINKS {
        let mut existing = path.clone();
        let mut tail: Vec<std::ffi::OsString> = Vec::new();
        let next = loop {
            match std::fs::canonicalize(&existing) {
                Ok(real) => {
                    let mut out = real;
                    for c in tail.iter().rev() {
                        out.push(c);
                    }
                    // The tail may contain `..` that only now can be applied.
                    let plain = doubt.is_none() && !tail.iter().any(|c| c == "..");
                    return (lexical(&out), doubt, plain);
                }
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                    // A dangling link: writing through it creates its target.
                    if let Ok(target) = std::fs::read_link(&existing) {
                        let mut next = existing.parent().unwrap_or(Path::new("/")).join(target);
                        for c in tail.iter().rev() {
                            next.push(c);
                        }
                        break next;
                    }
                }
                Err(e) => {
                    doubt.get_or_insert_with(|| format!("{}: {e}", existing.display()));
                }
            }
            match existing.components().next_back() {
                Some(Component::Normal(name)) => tail.push(name.to_os_string()),
                Some(Component::ParentDir) => tail.push("..".into()),
                Some(Component::CurDir) => {}
                _ => return (lexical(&path), doubt, false),
            }
            match existing.parent() {
                Some(parent) => existing = parent.to_path_buf(),
                None => return (lexical(&path), doubt, false),
            }
        };
        path = next;
    }
    let why = format!("{}: more than {MAX_LINKS} symbolic links", path.display());
    (lexical(&path), Some(why), false)
}

/// Where a path an agent names lands, for the project rooted at `root`.
#[derive(Debug, PartialEq, Eq)]
pub enum Landing {
    /// In the project (or one of its worktrees): its lock key.
    Project(LockPath),
    /// In another project (a repository nested in this one, a submodule, or one this project
    /// lies in, or any other): that project's root and the file's key there. One file has one
    /// lock, in the project a window started next to it would use.
    Elsewhere { project: PathBuf, key: LockPath },
    /// Outside every project: the absolute path, links resolved.
    Outside(PathBuf),
}

/// The project the file at `real` (absolute, links resolved) belongs to: the one a window
/// started in its directory would use ([`maos_proto::paths::find_project`], from the file's
/// nearest existing directory). None outside every project.
pub fn owner(real: &Path) -> Option<PathBuf> {
    maos_proto::paths::find_project(nearest_dir(real))
}

/// [`owner`] of a path whose directories are canonical (what [`landed`] says): the same
/// answer without resolving that directory again.
fn owner_canonical(real: &Path) -> Option<PathBuf> {
    let home = maos_proto::paths::canonical_home();
    maos_proto::paths::find_project_canonical(nearest_dir(real), home.as_deref())
}

/// `real`'s nearest existing directory above it.
fn nearest_dir(real: &Path) -> &Path {
    real.ancestors()
        .skip(1)
        .find(|d| d.is_dir())
        .unwrap_or(Path::new("/"))
}

/// `real`'s path relative to the project rooted at `root`: under it, or in one of its linked
/// worktrees.
fn relative_to(root: &Path, real: &Path) -> Option<PathBuf> {
    match real.strip_prefix(root) {
        Ok(rel) => Some(rel.to_path_buf()),
        Err(_) => worktree_relative(root, real),
    }
}

fn key_of(input: &str, rel: &Path) -> Result<LockPath, ErrorBody> {
    let rel = rel
        .to_str()
        .ok_or_else(|| ErrorBody::new(ErrorCode::BadRequest, format!("{input}: not UTF-8")))?;
    LockPath::new(rel).map_err(|e| ErrorBody::new(ErrorCode::PathOutsideWorkspace, e.to_string()))
}

/// Where `input` (absolute, or relative to `cwd`) lands for the project rooted at `root`
/// (canonical). A path maos cannot place for sure (a prefix it cannot read) and that is not
/// in the project is refused: it might be, through a link maos could not follow.
pub fn place(root: &Path, cwd: &Path, input: &str) -> Result<Landing, ErrorBody> {
    if input.is_empty() || input.contains('\0') {
        return Err(ErrorBody::new(
            ErrorCode::BadRequest,
            format!("{input:?} is not a usable path"),
        ));
    }
    let joined = if Path::new(input).is_absolute() {
        PathBuf::from(input)
    } else {
        cwd.join(input)
    };
    // Symlinks first, then `..`: `link/../x` is the parent of wherever `link` points, as the
    // kernel sees it, not the `x` next to `link`.
    let (real, doubt, canonical) = landed(&joined);
    let owner = if canonical {
        owner_canonical(&real)
    } else {
        owner(&real)
    };
    match owner {
        Some(other) if other != root => {
            if let Some(rel) = relative_to(&other, &real) {
                let key = key_of(input, &rel)?;
                return Ok(Landing::Elsewhere {
                    project: other,
                    key,
                });
            }
        }
        _ => {}
    }
    let rel = match relative_to(root, &real) {
        Some(rel) => rel,
        None => {
            if let Some(why) = doubt {
                return Err(ErrorBody::new(
                    ErrorCode::PathOutsideWorkspace,
                    format!(
                        "{input}: maos cannot tell where a write to it lands ({why}), so it cannot tell whether it is in the project {}",
                        root.display()
                    ),
                ));
            }
            return Ok(Landing::Outside(real));
        }
    };
    key_of(input, &rel).map(Landing::Project)
}

/// The key for `input` (absolute, or relative to `cwd`) in the project rooted at `root`
/// (canonical). A path inside another worktree of the same repository maps to the same key as
/// in the main worktree.
pub fn resolve(root: &Path, cwd: &Path, input: &str) -> Result<LockPath, ErrorBody> {
    match place(root, cwd, input)? {
        Landing::Project(key) => Ok(key),
        Landing::Elsewhere { project, key } => Err(ErrorBody::new(
            ErrorCode::PathOutsideWorkspace,
            format!(
                "{input}: is in the maos project {} (as {key}), not in {}: its lock lives there; lock it with `maos --project {} lock ...`",
                project.display(),
                root.display(),
                project.display()
            ),
        )),
        Landing::Outside(real) => Err(outside(input, root, &real)),
    }
}

/// Whether a hook's write outside the project is written: `Allow`, unlocked and recorded
/// (maos guards the project, not the rest of the disk), or `Deny` (`outside_project`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum OutsidePolicy {
    #[default]
    Allow,
    Deny,
}

impl std::str::FromStr for OutsidePolicy {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "allow" => Ok(Self::Allow),
            "deny" => Ok(Self::Deny),
            other => Err(format!(
                "outside_project = {other:?}: expected \"allow\" or \"deny\""
            )),
        }
    }
}

/// `outside_project` in the project's own `.maos/config.toml`: `None` when the file or the key
/// is not there; an error (one line) when the file cannot be read or the value is not one.
pub fn project_policy(root: &Path) -> Result<Option<OutsidePolicy>, String> {
    #[derive(serde::Deserialize)]
    struct File {
        outside_project: Option<String>,
    }
    let path = root.join(".maos").join("config.toml");
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(format!("{}: {e}", path.display())),
    };
    let file: File = toml::from_str(&text)
        .map_err(|e| format!("{}: {}", path.display(), toml_error(&text, &e)))?;
    file.outside_project
        .map(|v| v.parse().map_err(|e| format!("{}: {e}", path.display())))
        .transpose()
}

/// A TOML error in one line: the line (its number and text) and the message (toml's own
/// rendering draws the line over several).
pub fn toml_error(text: &str, e: &toml::de::Error) -> String {
    let message = e.message().split_whitespace().collect::<Vec<_>>().join(" ");
    let Some(span) = e.span() else {
        return message;
    };
    let n = text.get(..span.start).unwrap_or(text).matches('\n').count();
    match text.lines().nth(n).map(str::trim).filter(|l| !l.is_empty()) {
        Some(line) => format!("line {} ({line}): {message}", n + 1),
        None => format!("line {}: {message}", n + 1),
    }
}

/// Why a hook may not write `path` (outside the project at `root`, links resolved), or None
/// when it may: a file in another project maos knows (`known`, canonical roots) is that
/// project's to lock, never written unlocked from here; any other is the policy's.
/// `policy`: the daemon's setting, and where it came from (for the reason).
pub fn outside_refusal(
    path: &Path,
    root: &Path,
    known: &[PathBuf],
    policy: (OutsidePolicy, &str),
) -> Option<String> {
    if let Some(other) = known
        .iter()
        .filter(|k| k.as_path() != root)
        .filter(|k| path.starts_with(k))
        .max_by_key(|k| k.as_os_str().len())
    {
        return Some(format!(
            "{} is in another maos project, {}, whose agents lock their files there; edit it from an agent working in that project",
            path.display(),
            other.display()
        ));
    }
    (policy.0 == OutsidePolicy::Deny).then(|| {
        format!(
            "{} is outside the project {}, and outside_project = \"deny\" ({}) refuses writes there; write inside the project",
            path.display(),
            root.display(),
            policy.1
        )
    })
}

/// The key, in the project rooted at `root` (canonical), of the git index that git writes
/// when run in `dir`: the nearest `.git` above it, a directory (`<it>/index`) or a linked
/// worktree's file (`<its git dir>/index`). None when that is not inside the project.
pub fn git_index(root: &Path, dir: &Path) -> Option<String> {
    let dir = lexical(dir);
    let start = dir.ancestors().find(|d| d.is_dir())?;
    let start = std::fs::canonicalize(start).ok()?;
    for d in start.ancestors() {
        let git = d.join(".git");
        let Ok(meta) = std::fs::metadata(&git) else {
            continue;
        };
        let gitdir = if meta.is_dir() {
            git
        } else {
            let text = std::fs::read_to_string(&git).ok()?;
            let named = text.lines().find_map(|l| l.strip_prefix("gitdir:"))?.trim();
            std::fs::canonicalize(d.join(named)).ok()?
        };
        let key = gitdir.join("index");
        let rel = key.strip_prefix(root).ok()?;
        return LockPath::new(rel.to_str()?)
            .ok()
            .map(|k| k.as_str().to_string());
    }
    None
}

/// If `path` lies in a linked worktree whose main worktree is `root`, its path relative to that
/// worktree.
fn worktree_relative(root: &Path, path: &Path) -> Option<PathBuf> {
    for dir in path.ancestors().skip(1) {
        let git = dir.join(".git");
        match std::fs::symlink_metadata(&git) {
            Ok(m) if m.is_file() => {
                let main = maos_proto::paths::main_worktree_of(&git)?;
                let main = std::fs::canonicalize(main).ok()?;
                return (main == root)
                    .then(|| path.strip_prefix(dir).ok().map(Path::to_path_buf))?;
            }
            Ok(_) => return None, // a plain repository that is not ours
            Err(_) => {}
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn setup() -> (tempfile::TempDir, PathBuf) {
        let t = tempfile::tempdir().unwrap();
        let root = std::fs::canonicalize(t.path()).unwrap().join("repo");
        std::fs::create_dir_all(root.join(".git/worktrees/wt")).unwrap();
        std::fs::create_dir_all(root.join("src")).unwrap();
        (t, root)
    }

    /// `wt`, beside the repository at `root`, a linked worktree of it (with a `src/`).
    fn linked_worktree(t: &tempfile::TempDir, root: &Path) -> PathBuf {
        std::fs::write(root.join(".git/worktrees/wt/commondir"), "../..\n").unwrap();
        let wt = std::fs::canonicalize(t.path()).unwrap().join("wt");
        std::fs::create_dir_all(wt.join("src")).unwrap();
        std::fs::write(
            wt.join(".git"),
            format!("gitdir: {}\n", root.join(".git/worktrees/wt").display()),
        )
        .unwrap();
        wt
    }

    #[test]
    fn relative_absolute_and_dotdot() {
        let (_t, root) = setup();
        let ok = |cwd: &Path, p: &str| resolve(&root, cwd, p).unwrap().as_str().to_string();
        assert_eq!(ok(&root, "src/a.rs"), "src/a.rs");
        assert_eq!(ok(&root.join("src"), "a.rs"), "src/a.rs");
        assert_eq!(
            ok(&root, root.join("src/new/dir/b.rs").to_str().unwrap()),
            "src/new/dir/b.rs"
        );
        assert_eq!(ok(&root, "src/../README.md"), "README.md");
        for bad in ["../x", "/etc/passwd", "src/../../x"] {
            let e = resolve(&root, &root, bad).unwrap_err();
            assert_eq!(e.code, ErrorCode::PathOutsideWorkspace, "{bad}");
        }
    }

    #[test]
    fn symlinks_are_followed() {
        let (t, root) = setup();
        let outside_dir = t.path().join("elsewhere");
        std::fs::create_dir_all(&outside_dir).unwrap();
        std::os::unix::fs::symlink(&outside_dir, root.join("src/escape")).unwrap();
        std::os::unix::fs::symlink(root.join("src"), root.join("alias")).unwrap();
        let e = resolve(&root, &root, "src/escape/x.rs").unwrap_err();
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
        // `..` after a symlink climbs from the link's target, which is outside.
        let e = resolve(&root, &root, "src/escape/../x.rs").unwrap_err();
        assert_eq!(e.code, ErrorCode::PathOutsideWorkspace);
        // ... and from an inside link's target, it stays inside.
        assert_eq!(
            resolve(&root, &root, "alias/../README.md")
                .unwrap()
                .as_str(),
            "README.md"
        );
        assert_eq!(
            resolve(&root, &root, "alias/x.rs").unwrap().as_str(),
            "src/x.rs"
        );
    }

    /// The short way (a new file in an existing directory: one lstat, the directory resolved
    /// once; its project found without resolving it again) lands every path where the whole
    /// walk does, links swapped under the path included.
    #[test]
    fn the_short_way_lands_where_the_whole_walk_does() {
        let (t, root) = setup();
        let base = std::fs::canonicalize(t.path()).unwrap();
        std::fs::create_dir_all(base.join("elsewhere/.git")).unwrap();
        std::os::unix::fs::symlink(base.join("elsewhere"), root.join("src/link")).unwrap();
        std::os::unix::fs::symlink(base.join("gone.rs"), root.join("src/dangling")).unwrap();
        std::fs::write(root.join("src/exists.rs"), "x").unwrap();
        for rel in [
            "src/new.rs",
            "src/exists.rs",
            "src/link/new.rs",
            "src/dangling",
            "new/dir/x.rs",
            "src/link",
        ] {
            let p = root.join(rel);
            let (real, doubt, canonical) = landed(&p);
            let found = if canonical {
                owner_canonical(&real)
            } else {
                owner(&real)
            };
            let (w_real, w_doubt, _) = landing_walk(&p);
            let w_owner = owner(&w_real);
            assert_eq!(
                (&real, &doubt, &found),
                (&w_real, &w_doubt, &w_owner),
                "{rel}"
            );
        }
        // Swap the directory for a link after a first placement: the next one follows it.
        assert_eq!(
            place(&root, &root, "src/sub/f.rs").unwrap(),
            Landing::Project(LockPath::new("src/sub/f.rs").unwrap())
        );
        std::os::unix::fs::symlink(base.join("elsewhere"), root.join("src/sub")).unwrap();
        assert_eq!(
            place(&root, &root, "src/sub/f.rs").unwrap(),
            Landing::Elsewhere {
                project: base.join("elsewhere"),
                key: LockPath::new("f.rs").unwrap()
            }
        );
    }

    #[test]
    fn a_write_lands_where_the_kernel_puts_it() {
        let (t, root) = setup();
        let base = std::fs::canonicalize(t.path()).unwrap();
        // Outside, by `..` or absolute: placed outside, links resolved.
        assert_eq!(
            place(&root, &root, "../scratch.txt").unwrap(),
            Landing::Outside(base.join("scratch.txt"))
        );
        // A dangling link outside whose target is a new file in the project: that file.
        std::os::unix::fs::symlink(root.join("src/new.rs"), base.join("dangling")).unwrap();
        assert_eq!(
            place(&root, &root, base.join("dangling").to_str().unwrap()).unwrap(),
            Landing::Project(LockPath::new("src/new.rs").unwrap())
        );
        // A chain of dangling links, relative targets included.
        std::os::unix::fs::symlink("dangling", base.join("chain")).unwrap();
        assert_eq!(
            place(&root, &root, base.join("chain").to_str().unwrap()).unwrap(),
            Landing::Project(LockPath::new("src/new.rs").unwrap())
        );
        // A loop of links: where it lands cannot be told, so it is refused, not placed.
        std::os::unix::fs::symlink(base.join("loop"), base.join("loop")).unwrap();
        let e = place(&root, &root, base.join("loop/x").to_str().unwrap()).unwrap_err();
        assert!(e.message.contains("cannot tell"), "{}", e.message);
        std::os::unix::fs::symlink(base.join("b"), base.join("a")).unwrap();
        std::os::unix::fs::symlink(base.join("a"), base.join("b")).unwrap();
        let e = place(&root, &root, base.join("a").to_str().unwrap()).unwrap_err();
        assert!(e.message.contains("cannot tell"), "{}", e.message);
    }

    #[test]
    fn outside_writes_are_the_policys_unless_another_project_holds_them() {
        let root = PathBuf::from("/w/proj");
        let known = [PathBuf::from("/w/proj"), PathBuf::from("/w/other")];
        let allow = (OutsidePolicy::Allow, "the default");
        let deny = (OutsidePolicy::Deny, "config.toml");
        assert_eq!(
            outside_refusal(Path::new("/tmp/x"), &root, &known, allow),
            None
        );
        let why = outside_refusal(Path::new("/tmp/x"), &root, &known, deny).unwrap();
        assert!(
            why.contains("outside_project = \"deny\" (config.toml)"),
            "{why}"
        );
        for policy in [allow, deny] {
            let why = outside_refusal(Path::new("/w/other/a.rs"), &root, &known, policy).unwrap();
            assert!(why.contains("another maos project, /w/other"), "{why}");
        }
        // A sibling whose name only starts like a known root is not in it.
        assert_eq!(
            outside_refusal(Path::new("/w/other2/a"), &root, &known, allow),
            None
        );
        assert_eq!("deny".parse(), Ok(OutsidePolicy::Deny));
        assert!("Deny".parse::<OutsidePolicy>().is_err());
    }

    #[test]
    fn a_file_of_a_nested_repository_is_that_repositorys() {
        let (t, root) = setup();
        let nested = root.join("vendor/lib");
        std::fs::create_dir_all(nested.join(".git")).unwrap();
        assert_eq!(
            place(&root, &root, "vendor/lib/src/x.rs").unwrap(),
            Landing::Elsewhere {
                project: nested.clone(),
                key: LockPath::new("src/x.rs").unwrap()
            }
        );
        // From inside it, the outer repository's files are the outer one's.
        let outer = place(&nested, &nested, "../../README.md").unwrap();
        assert_eq!(
            outer,
            Landing::Elsewhere {
                project: root.clone(),
                key: LockPath::new("README.md").unwrap()
            }
        );
        // An explicit lock names the project the file is in.
        let e = resolve(&root, &root, "vendor/lib/x.rs").unwrap_err();
        assert!(
            e.message.contains(nested.to_str().unwrap()),
            "{}",
            e.message
        );
        // Next to the nested repository, the outer one's own files stay its own.
        assert_eq!(
            place(&root, &root, "vendor/other.rs").unwrap(),
            Landing::Project(LockPath::new("vendor/other.rs").unwrap())
        );
        drop(t);
    }

    #[test]
    fn the_git_index_of_a_directory() {
        let (t, root) = setup();
        assert_eq!(
            git_index(&root, &root.join("src/deeper")).as_deref(),
            Some(".git/index")
        );
        // A linked worktree writes its own index, under the main repository's git dir.
        let wt = linked_worktree(&t, &root);
        assert_eq!(
            git_index(&root, &wt.join("src")).as_deref(),
            Some(".git/worktrees/wt/index")
        );
        // Outside every repository: none.
        assert_eq!(git_index(&root, Path::new("/")), None);
    }

    #[test]
    fn worktrees_share_keys() {
        let (t, root) = setup();
        let wt = linked_worktree(&t, &root);
        assert_eq!(
            resolve(&root, &wt, "src/a.rs").unwrap().as_str(),
            "src/a.rs"
        );
    }
}
