//! Lock keys: paths are project-relative whatever directory the agent works from, anything
//! outside the project is refused, symlinks are followed, and the worktrees of one repository
//! share their locks.

mod locks_support;

use std::path::Path;

use locks_support::{acquire, held, refused, setup, short, token};
use maos_tests::{Env, Failure, Value, failure_of, json_of};

/// `maos --json lock acquire PATH --agent AGENT` run from `cwd` with `--project` unset (or set to
/// `project`), as an agent working in that directory would.
fn acquire_from(
    env: &Env,
    cwd: &Path,
    project: Option<&Path>,
    agent: &str,
    path: &str,
) -> std::process::Output {
    let mut args: Vec<&std::ffi::OsStr> = vec!["--json".as_ref()];
    if let Some(p) = project {
        args.extend(["--project".as_ref(), p.as_os_str()]);
    }
    args.extend(["lock", "acquire", path, "--agent", agent].map(std::ffi::OsStr::new));
    env.maos_at(cwd, &args)
}

fn granted_from(env: &Env, cwd: &Path, project: Option<&Path>, agent: &str, path: &str) -> Value {
    json_of(
        &format!("lock acquire {path} from {}", cwd.display()),
        &acquire_from(env, cwd, project, agent, path),
    )
}

fn refused_from(env: &Env, cwd: &Path, project: Option<&Path>, agent: &str, path: &str) -> Failure {
    failure_of(
        &format!("lock acquire {path} from {}", cwd.display()),
        &acquire_from(env, cwd, project, agent, path),
    )
}

#[test]
fn paths_outside_the_project_are_refused() {
    let (env, ag) = setup(&["escaper"]);
    let a = &ag[0];
    let outside = env.root().join("elsewhere");
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::create_dir_all(env.project.join("src")).unwrap();
    std::os::unix::fs::symlink(&outside, env.project.join("src/escape")).unwrap();
    let abs_outside = outside.join("x.rs");
    let abs_outside = abs_outside.to_str().unwrap();

    for path in [
        "../x.rs",
        "..",
        "src/../../x.rs",
        abs_outside,
        "/etc/passwd",
        "src/escape/x.rs",
        "src/escape",
    ] {
        for mode in ["write", "directory"] {
            let f = refused(&env, a, path, &["--mode", mode]);
            assert_eq!(
                (f.exit, f.code.as_str()),
                (1, "path_outside_workspace"),
                "{path}: {f:?}"
            );
            assert!(
                f.message.contains(path),
                "the message names {path:?}: {f:?}"
            );
        }
        let f = env.maos_fail(&["lock", "check", path]);
        assert_eq!(f.code, "path_outside_workspace", "check {path}: {f:?}");
        let f = env.maos_fail(&["lock", "release", path, "--agent", a]);
        assert_eq!(f.code, "path_outside_workspace", "release {path}: {f:?}");
    }
    // Nothing was taken, nothing recorded as a conflict.
    assert!(held(&env).is_empty());
    assert!(env.events(&["--type", "lock_acquired"]).is_empty());
    assert!(env.events(&["--type", "conflict_detected"]).is_empty());

    // `..` that stays inside and the project root itself are fine.
    assert_eq!(
        acquire(&env, a, "src/../README.md", &[])["path"],
        "README.md"
    );
    let root = env.project.to_str().unwrap();
    assert_eq!(
        acquire(&env, a, root, &["--mode", "directory"])["path"],
        "."
    );
}

#[test]
fn the_same_file_named_from_anywhere_in_the_project_is_one_lock() {
    let (env, ag) = setup(&["sub", "abs"]);
    let (a, b) = (&ag[0], &ag[1]);
    let src = env.project.join("src");
    std::fs::create_dir_all(src.join("deep")).unwrap();
    std::os::unix::fs::symlink(&src, env.project.join("alias")).unwrap();

    // From a subdirectory, without --project: relative to the working directory.
    let lock = granted_from(&env, &src.join("deep"), None, a, "../a.rs");
    assert_eq!(lock["path"], "src/a.rs");
    let t = token(&lock);
    // The same key by absolute path, and through a symlink inside the project: the holder
    // gets its own lock back (same token)...
    let abs = src.join("a.rs");
    assert_eq!(token(&acquire(&env, a, abs.to_str().unwrap(), &[])), t);
    assert_eq!(token(&acquire(&env, a, "alias/./a.rs", &[])), t);
    assert_eq!(token(&granted_from(&env, &src, None, a, "a.rs")), t);
    // ...and another agent finds it taken, whichever way it names it.
    for (cwd, path) in [
        (env.project.clone(), abs.to_str().unwrap()),
        (env.project.clone(), "alias/a.rs"),
        (env.project.clone(), "src//deep/../a.rs"),
        (src.clone(), "a.rs"),
        (src.join("deep"), "../a.rs"),
    ] {
        let f = refused_from(&env, &cwd, None, b, path);
        assert_eq!(
            f.code,
            "lock_conflict",
            "{path} from {}: {f:?}",
            cwd.display()
        );
        assert!(
            f.message.contains("src/a.rs") && f.message.contains(short(a)),
            "{f:?}"
        );
    }
    assert_eq!(held(&env).len(), 1);
}

#[test]
fn two_worktrees_of_one_repository_contend_for_one_lock() {
    let env = Env::new();
    // The project is the main worktree; `wt` is a linked worktree of the same repository.
    let main = env.project.clone();
    let gitdir = main.join(".git/worktrees/wt");
    std::fs::create_dir_all(&gitdir).unwrap();
    std::fs::write(gitdir.join("commondir"), "../..\n").unwrap();
    let wt = env.root().join("wt");
    std::fs::create_dir_all(wt.join("src")).unwrap();
    std::fs::create_dir_all(main.join("src")).unwrap();
    std::fs::write(wt.join(".git"), format!("gitdir: {}\n", gitdir.display())).unwrap();
    assert_eq!(
        Env::project_root(&wt),
        Env::project_root(&main),
        "one project"
    );

    // Sessions and agents made from either checkout are the same project's.
    let sid = env.session("worktrees", &[]);
    let in_main = env.agent(None, "main", "work");
    let in_wt = json_of(
        "register from the worktree",
        &env.maos_at(
            &wt.join("src"),
            &["--json", "agent", "register", "--role", "wt", "--task", "w"],
        ),
    );
    assert_eq!(in_wt["session_id"], sid.as_str());
    let in_wt = in_wt["id"].as_str().unwrap().to_string();

    let lock = granted_from(&env, &main, None, &in_main, "src/a.rs");
    assert_eq!(lock["path"], "src/a.rs");
    // The worktree's src/a.rs is the same key, with --project unset or naming the worktree.
    for (cwd, project, path) in [
        (wt.clone(), None, "src/a.rs"),
        (wt.join("src"), None, "a.rs"),
        (wt.clone(), Some(wt.as_path()), "src/a.rs"),
        (wt.clone(), None, wt.join("src/a.rs").to_str().unwrap()),
    ] {
        let f = refused_from(&env, &cwd, project, &in_wt, path);
        assert_eq!(
            f.code,
            "lock_conflict",
            "{path} from {}: {f:?}",
            cwd.display()
        );
        assert!(
            f.message.contains("src/a.rs") && f.message.contains(short(&in_main)),
            "{f:?}"
        );
    }
    // The other way round: a lock taken in the worktree blocks the main checkout.
    let lock = granted_from(&env, &wt, Some(&wt), &in_wt, "src/b.rs");
    assert_eq!(lock["path"], "src/b.rs");
    let f = refused_from(&env, &main.join("src"), None, &in_main, "b.rs");
    assert_eq!(f.code, "lock_conflict", "{f:?}");
    assert!(f.message.contains(short(&in_wt)), "{f:?}");
    let mut keys: Vec<_> = held(&env).into_iter().map(|h| h.1).collect();
    keys.sort();
    assert_eq!(keys, ["src/a.rs", "src/b.rs"]);

    // A worktree of another repository is outside this project.
    let other = env.make_project("other");
    let f = refused(&env, &in_main, other.join("x.rs").to_str().unwrap(), &[]);
    assert_eq!(f.code, "path_outside_workspace", "{f:?}");
}
