//! Each form the analysis knows, one test each.

use crate::{Dir, GitKind, How, analyze};

/// The writes of `cmd` as (path, how), in order.
fn w(cmd: &str) -> Vec<(String, How)> {
    let a = analyze(cmd);
    assert_eq!(a.error, None, "{cmd}");
    a.writes.into_iter().map(|w| (w.path, w.how)).collect()
}

/// The paths `cmd` writes.
fn paths(cmd: &str) -> Vec<String> {
    w(cmd).into_iter().map(|(p, _)| p).collect()
}

fn none(cmd: &str) {
    let a = analyze(cmd);
    assert!(a.writes.is_empty(), "{cmd}: {:?}", a.writes);
}

#[test]
fn redirections() {
    assert_eq!(
        w("echo hi > out.txt"),
        vec![("out.txt".into(), How::Redirect)]
    );
    assert_eq!(
        w("echo hi >> log.txt"),
        vec![("log.txt".into(), How::Append)]
    );
    assert_eq!(
        w("make &> build.log"),
        vec![("build.log".into(), How::Redirect)]
    );
    assert_eq!(
        w("make &>> build.log"),
        vec![("build.log".into(), How::Append)]
    );
    assert_eq!(w("echo hi >| f"), vec![("f".into(), How::Redirect)]);
    assert_eq!(w("cmd 2> err.txt"), vec![("err.txt".into(), How::Redirect)]);
    assert_eq!(
        w("echo x >& both.txt"),
        vec![("both.txt".into(), How::Redirect)]
    );
    assert_eq!(paths("echo \"a b\" > 'my file.txt'"), vec!["my file.txt"]);
}

#[test]
fn redirections_that_are_not_files() {
    none("ls 2>/dev/null");
    none("echo oops >&2");
    none("cargo build 2>&1 | tail");
    none("echo x > /dev/stdout");
    none("echo x > /dev/null 2>&1");
    none("cmd 1>&2 2>/dev/stderr");
    none("exec 3>&-");
    none("grep x < input.txt");
}

#[test]
fn here_documents() {
    assert_eq!(
        paths("cat > src/x.rs <<'EOF'\nfn main() {}\nEOF"),
        vec!["src/x.rs"]
    );
    assert_eq!(
        paths("cat <<EOF > notes.md\nhello $USER\nEOF\necho done"),
        vec!["notes.md"]
    );
    assert_eq!(paths("cat >> a.txt << \"END\"\nx\nEND"), vec!["a.txt"]);
    // An unquoted delimiter: the body's command substitutions run.
    assert_eq!(paths("cat <<EOF\n$(rm -f gone.txt)\nEOF"), vec!["gone.txt"]);
    assert!(
        analyze("cat <<'EOF'\n$(rm -f kept.txt)\nEOF")
            .writes
            .is_empty()
    );
}

#[test]
fn tee() {
    assert_eq!(
        w("echo x | tee a.txt b.txt"),
        vec![("a.txt".into(), How::Tee), ("b.txt".into(), How::Tee)]
    );
    assert_eq!(paths("echo x | tee -a log.txt >/dev/null"), vec!["log.txt"]);
    assert_eq!(paths("echo x | sudo tee /etc/hosts"), vec!["/etc/hosts"]);
    none("echo x | tee");
}

#[test]
fn sed_in_place() {
    assert_eq!(
        w("sed -i 's/a/b/' src/x.rs"),
        vec![("src/x.rs".into(), How::SedInPlace)]
    );
    assert_eq!(
        paths("sed -i.bak 's/a/b/g' a.rs b.rs"),
        vec!["a.rs", "b.rs"]
    );
    assert_eq!(
        paths("sed --in-place -e 's/a/b/' -e 's/c/d/' f.txt"),
        vec!["f.txt"]
    );
    assert_eq!(paths("sed --in-place=.orig 's/a/b/' f.txt"), vec!["f.txt"]);
    assert_eq!(paths("sed -i -f script.sed f.txt"), vec!["f.txt"]);
    assert_eq!(paths("sed -i '' 's/a/b/' mac.txt"), vec!["mac.txt"]);
    assert_eq!(paths("sed -Ei 's/(a)/\\1b/' e.txt"), vec!["e.txt"]);
    assert_eq!(paths("sed -ni '/x/p' n.txt"), vec!["n.txt"]);
    assert_eq!(paths("sed -i -- 's/a/b/' -weird.txt"), vec!["-weird.txt"]);
    none("sed 's/a/b/' f.txt");
    none("sed -n '1,10p' f.txt");
    none("sed -e 's/i/j/' f.txt");
}

#[test]
fn perl_in_place() {
    assert_eq!(
        w("perl -i -pe 's/a/b/' x.pl"),
        vec![("x.pl".into(), How::PerlInPlace)]
    );
    assert_eq!(paths("perl -pi -e 's/a/b/' a b"), vec!["a", "b"]);
    assert_eq!(paths("perl -i.bak -ne 'print unless /x/' f"), vec!["f"]);
    assert_eq!(paths("perl -0777 -i -pe 's/a/b/s' f"), vec!["f"]);
    none("perl -ne 'print if /x/' f");
    none("perl -e 'print 1'");
}

#[test]
fn copy() {
    assert_eq!(w("cp a.txt b.txt"), vec![("b.txt".into(), How::Copy)]);
    assert_eq!(paths("cp -r src/ backup/"), vec!["backup/src"]);
    assert_eq!(paths("cp a b dir"), vec!["dir/a", "dir/b"]);
    assert_eq!(
        paths("cp -t dest a/x.rs b/y.rs"),
        vec!["dest/x.rs", "dest/y.rs"]
    );
    assert_eq!(paths("cp --target-directory=dest x"), vec!["dest/x"]);
    assert_eq!(paths("cp -T a b"), vec!["b"]);
    assert_eq!(paths("cp ../x.rs ."), vec!["./x.rs"]);
}

#[test]
fn move_names_source_and_destination() {
    assert_eq!(
        w("mv old.rs new.rs"),
        vec![
            ("new.rs".into(), How::Move),
            ("old.rs".into(), How::MoveSource)
        ]
    );
    assert_eq!(paths("mv -f a b into/"), vec!["into/a", "into/b", "a", "b"]);
    assert_eq!(paths("mv -t d x"), vec!["d/x", "x"]);
}

#[test]
fn remove_touch_truncate() {
    assert_eq!(
        w("rm -rf target/tmp"),
        vec![("target/tmp".into(), How::Remove)]
    );
    assert_eq!(paths("rm a b -- -c"), vec!["a", "b", "-c"]);
    assert_eq!(paths("unlink x"), vec!["x"]);
    assert_eq!(w("touch new.rs"), vec![("new.rs".into(), How::Touch)]);
    assert_eq!(paths("touch -d '2 days ago' -r ref.txt t1"), vec!["t1"]);
    assert_eq!(
        w("truncate -s 0 big.log"),
        vec![("big.log".into(), How::Truncate)]
    );
    assert_eq!(paths("truncate --size=10 a b"), vec!["a", "b"]);
}

#[test]
fn link_install_dd() {
    assert_eq!(w("ln -s ../target name"), vec![("name".into(), How::Link)]);
    assert_eq!(paths("ln -sf /opt/x/bin/tool"), vec!["tool"]);
    assert_eq!(paths("ln a b dir/"), vec!["dir/a", "dir/b"]);
    assert_eq!(
        w("install -m 755 build/tool bin/tool"),
        vec![("bin/tool".into(), How::Install)]
    );
    assert_eq!(paths("install -D -t out a.so"), vec!["out/a.so"]);
    none("install -d some/dir");
    assert_eq!(
        w("dd if=/dev/zero of=disk.img bs=1M count=1"),
        vec![("disk.img".into(), How::Dd)]
    );
    none("dd if=x of=/dev/null");
}

#[test]
fn patch_command() {
    assert_eq!(
        w("patch src/x.rs < fix.diff"),
        vec![("src/x.rs".into(), How::Patch)]
    );
    assert_eq!(w("patch -p1 -d sub < fix.diff"), vec![]);
    assert_eq!(analyze("patch -p1 < fix.diff").opaque, vec!["patch"]);
    let inline = "patch -p1 <<'EOF'\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-a\n+b\nEOF";
    assert_eq!(w(inline), vec![("src/x.rs".into(), How::Patch)]);
    let piped = "cat <<'EOF' | patch -p0\n--- lib.rs\n+++ lib.rs\n@@ -1 +1 @@\n-a\n+b\nEOF";
    assert_eq!(paths(piped), vec!["lib.rs"]);
    let a = analyze("patch <<'EOF'\n--- a/x\n+++ b/x\nEOF");
    assert!(
        !a.writes[0].exact,
        "without -p the name patch picks is a guess"
    );
    assert_eq!(paths("patch -o out.rs in.rs < d"), vec!["out.rs"]);
    let git_apply = "git apply <<'EOF'\ndiff --git a/m.rs b/m.rs\n--- a/m.rs\n+++ b/m.rs\nEOF";
    assert_eq!(w(git_apply), vec![("m.rs".into(), How::Patch)]);
}

#[test]
fn git_restore_paths_are_writes() {
    assert_eq!(
        w("git checkout -- src/x.rs"),
        vec![("src/x.rs".into(), How::GitRestore)]
    );
    assert_eq!(paths("git restore a.rs b.rs"), vec!["a.rs", "b.rs"]);
    assert_eq!(paths("git checkout HEAD~1 -- a.rs"), vec!["a.rs"]);
    none("git restore --staged a.rs");
    assert_eq!(paths("git rm old.rs"), vec!["old.rs"]);
    none("git rm --cached old.rs");
    assert_eq!(paths("git mv a.rs b.rs"), vec!["b.rs", "a.rs"]);
}

#[test]
fn operators_and_compound_commands() {
    assert_eq!(
        paths("cargo fmt && echo ok > a; false || touch b; ls | tee c & rm d"),
        vec!["a", "b", "c", "d"]
    );
    assert_eq!(paths("(cd sub && touch x) ; { touch y; }"), vec!["x", "y"]);
    assert_eq!(
        paths("if [ -f a ]; then touch b; else rm c; fi"),
        vec!["b", "c"]
    );
    assert_eq!(paths("for i in 1 2; do echo $i >> log; done"), vec!["log"]);
    assert_eq!(
        paths("while read l; do echo \"$l\"; done < in.txt > out.txt"),
        vec!["out.txt"]
    );
    assert_eq!(
        paths("case $x in a) touch a;; *) rm b;; esac"),
        vec!["a", "b"]
    );
    assert_eq!(paths("f() { touch inside; }; f"), vec!["inside"]);
    assert_eq!(paths("until false; do rm u; done"), vec!["u"]);
    assert_eq!(
        paths("( (cd a && touch b) ); ((i++)); (( x > 5 ))"),
        vec!["b"]
    );
    assert_eq!(paths("echo $(touch sub) `rm tick`"), vec!["sub", "tick"]);
    assert_eq!(paths("diff <(sort a) >(tee t.txt)"), vec!["t.txt"]);
    assert_eq!(
        paths("{ echo a; echo b; } > grouped.txt"),
        vec!["grouped.txt"]
    );
}

#[test]
fn for_loops_over_names_are_unrolled() {
    let a = analyze("for f in a.rs b.rs; do sed -i 's/x/y/' \"$f\"; done");
    let got: Vec<(&str, bool)> = a
        .writes
        .iter()
        .map(|w| (w.path.as_str(), w.exact))
        .collect();
    assert_eq!(got, vec![("a.rs", true), ("b.rs", true)]);
    let a = analyze("for f in src/*.rs; do sed -i 's/x/y/' \"$f\"; done");
    assert_eq!(a.writes.len(), 1);
    assert_eq!(
        (a.writes[0].path.as_str(), a.writes[0].exact),
        ("$f", false)
    );
    let a = analyze("F=out.txt; echo x > $F");
    assert_eq!(
        (a.writes[0].path.as_str(), a.writes[0].exact),
        ("out.txt", true)
    );
}

#[test]
fn nested_shells() {
    assert_eq!(paths("bash -c \"echo x > a.txt\""), vec!["a.txt"]);
    assert_eq!(paths("sh -c 'rm -f b.txt'"), vec!["b.txt"]);
    assert_eq!(paths("zsh -c 'touch z'"), vec!["z"]);
    assert_eq!(paths("bash -lc 'cd d && touch e'"), vec!["e"]);
    assert_eq!(paths("bash -euo pipefail -c 'touch p'"), vec!["p"]);
    assert_eq!(paths("bash -c \"bash -c 'touch deep'\""), vec!["deep"]);
    assert_eq!(paths("eval 'touch ev'"), vec!["ev"]);
    assert_eq!(
        w("trap 'rm -f /tmp/lock' EXIT; touch /tmp/lock"),
        vec![
            ("/tmp/lock".into(), How::Remove),
            ("/tmp/lock".into(), How::Touch)
        ]
    );
    assert_eq!(w("trap 'rm -f t.lock' EXIT")[0].1, How::Remove);
    assert_eq!(
        paths("bash <<'EOF'\ntouch from_stdin\nEOF"),
        vec!["from_stdin"]
    );
    assert_eq!(analyze("bash build.sh").opaque, vec!["bash build.sh"]);
}

#[test]
fn cd_changes_the_directory_of_what_follows() {
    let a = analyze("cd crates/x && sed -i 's/a/b/' lib.rs");
    assert_eq!(a.writes[0].dir, Dir::Path("crates/x".into()));
    let a = analyze("cd a; cd b; touch c");
    assert_eq!(a.writes[0].dir, Dir::Path("a/b".into()));
    let a = analyze("(cd sub && touch x); touch y");
    assert_eq!(a.writes[0].dir, Dir::Path("sub".into()));
    assert_eq!(
        a.writes[1].dir,
        Dir::Start,
        "a cd in a subshell does not leak out"
    );
    let a = analyze("cd - && touch x");
    assert_eq!(a.writes[0].dir, Dir::Unknown);
    let a = analyze("cd $DIR && touch x");
    assert_eq!(a.writes[0].dir, Dir::Unknown);
    let a = analyze("cd && touch x");
    assert_eq!(a.writes[0].dir, Dir::Unknown);
    let a = analyze("if x; then cd a; fi; touch y");
    assert_eq!(
        a.writes[0].dir,
        Dir::Unknown,
        "a cd in one branch: unknown afterwards"
    );
    let a = analyze("cd /abs && touch z");
    assert_eq!(a.writes[0].dir, Dir::Path("/abs".into()));
    let a = analyze("cd a | cat; touch n");
    assert_eq!(
        a.writes[0].dir,
        Dir::Start,
        "a cd in a pipeline runs in a subshell"
    );
    let a = analyze("git -C repo checkout -- f");
    assert_eq!(a.writes[0].dir, Dir::Path("repo".into()));
    assert_eq!(a.git[0].dir, Dir::Path("repo".into()));
}

#[test]
fn prefixes_run_the_command_after_them() {
    assert_eq!(paths("env -i FOO=1 BAR=2 touch e"), vec!["e"]);
    assert_eq!(paths("sudo -u root rm /etc/x"), vec!["/etc/x"]);
    assert_eq!(paths("nice -n 10 cp a b"), vec!["b"]);
    assert_eq!(paths("nohup touch n &"), vec!["n"]);
    assert_eq!(paths("time touch t"), vec!["t"]);
    assert_eq!(paths("command rm c"), vec!["c"]);
    assert_eq!(paths("exec > all.log"), vec!["all.log"]);
    assert_eq!(paths("FOO=1 BAR=2 touch v"), vec!["v"]);
    assert_eq!(paths("timeout 10 touch to"), vec!["to"]);
    assert_eq!(paths("stdbuf -oL sed -i s/a/b/ sb"), vec!["sb"]);
    let a = analyze("env -C sub touch x");
    assert_eq!(a.writes[0].dir, Dir::Path("sub".into()));
    none("command -v rg");
}

#[test]
fn xargs_and_find() {
    let a = analyze("find . -name '*.o' -delete");
    assert!(a.writes.is_empty());
    assert_eq!(a.opaque, vec!["find"]);
    let a = analyze("find . -name '*.tmp' -exec rm {} +");
    assert_eq!(a.opaque, vec!["find"]);
    let a = analyze("git ls-files | xargs sed -i 's/a/b/'");
    assert_eq!(a.opaque, vec!["xargs sed"]);
    let a = analyze("find . -name '*.rs' | xargs grep -n foo");
    assert!(a.opaque.is_empty() && a.writes.is_empty(), "{a:?}");
    let a = analyze("find . -name '*.rs' -print0 | xargs -0 -n1 wc -l");
    assert!(a.is_harmless() && a.opaque.is_empty(), "{a:?}");
}

#[test]
fn globs_variables_and_tildes_are_patterns() {
    let a = analyze("rm -f *.log ~/x \"$HOME/y\" log{1..3}.txt");
    let got: Vec<(&str, bool)> = a
        .writes
        .iter()
        .map(|w| (w.path.as_str(), w.exact))
        .collect();
    assert_eq!(
        got,
        vec![
            ("*.log", false),
            ("~/x", false),
            ("$HOME/y", false),
            ("log{1..3}.txt", false)
        ]
    );
    assert!(analyze("rm 'literal*'").writes[0].exact);
}

#[test]
fn brace_expansions_name_each_word() {
    let a = analyze("sed -i 's/a/b/' src/{a,b}.rs && cp config.toml{,.bak}");
    let got: Vec<(&str, bool)> = a
        .writes
        .iter()
        .map(|w| (w.path.as_str(), w.exact))
        .collect();
    assert_eq!(
        got,
        vec![
            ("src/a.rs", true),
            ("src/b.rs", true),
            ("config.toml.bak", true)
        ]
    );
    assert_eq!(paths("rm '{a,b}'"), vec!["{a,b}"]);
    assert_eq!(
        paths("for f in src/{x,y}.rs; do touch \"$f\"; done"),
        vec!["src/x.rs", "src/y.rs"]
    );
}

#[test]
fn opaque_programs() {
    for (cmd, name) in [
        ("make", "make"),
        ("make -j4 all", "make all"),
        ("cargo fmt", "cargo fmt"),
        ("python gen.py", "python gen.py"),
        ("./scripts/gen.sh --all", "./scripts/gen.sh"),
        ("npm run build", "npm run"),
        ("$EDITOR f", "$EDITOR"),
        ("source env.sh", "source env.sh"),
        ("git co main", "git co"),
    ] {
        let a = analyze(cmd);
        assert_eq!(a.opaque, vec![name], "{cmd}");
        assert!(a.writes.is_empty(), "{cmd}");
    }
}

#[test]
fn other_output_options() {
    assert_eq!(
        w("curl -sSL https://x/y -o out.tar.gz"),
        vec![("out.tar.gz".into(), How::Output)]
    );
    assert_eq!(paths("curl --output=o.json https://x"), vec!["o.json"]);
    none("curl -s https://example.com | jq .");
    assert_eq!(paths("wget -O page.html https://x"), vec!["page.html"]);
    assert_eq!(paths("sort -o sorted.txt in.txt"), vec!["sorted.txt"]);
    assert_eq!(paths("uniq in.txt out.txt"), vec!["out.txt"]);
    none("sort -u in.txt | uniq -c");
}

fn patches(cmd: &str) -> Vec<String> {
    let a = analyze(cmd);
    assert_eq!(a.error, None, "{cmd}");
    a.patches
}

const BODY: &str = "*** Begin Patch\n*** Update File: src/x.rs\n@@\n-a\n+b\n*** End Patch\n";

#[test]
fn apply_patch_in_every_form() {
    assert_eq!(
        patches(&format!("apply_patch <<'EOF'\n{BODY}EOF")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("apply_patch <<\"EOF\"\n{BODY}EOF")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("apply_patch <<EOF\n{BODY}EOF")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("cd sub && apply_patch <<'PATCH'\n{BODY}PATCH")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("if true; then apply_patch <<'EOF'\n{BODY}EOF\nfi")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("bash -c \"apply_patch <<'EOF'\n{BODY}EOF\n\"")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("bash -lc 'apply_patch <<\"EOF\"\n{BODY}EOF'")),
        vec![BODY]
    );
    let body_escaped = BODY.replace('\n', "\\n");
    assert_eq!(
        patches(&format!("printf '{body_escaped}' | apply_patch")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("printf '%s' '{BODY}' | apply_patch")),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("echo '{}' | apply_patch", BODY.trim_end())),
        vec![BODY]
    );
    assert_eq!(
        patches(&format!("cat <<'EOF' | apply_patch\n{BODY}EOF")),
        vec![BODY]
    );
    assert_eq!(patches(&format!("apply_patch '{BODY}'")), vec![BODY]);
    let a = analyze(&format!(
        "cd sub && apply_patch <<'EOF'\n{BODY}EOF\napply_patch '{BODY}'"
    ));
    assert_eq!(
        a.patch_dirs,
        vec![Dir::Path("sub".into()), Dir::Path("sub".into())]
    );
    let a = analyze(&format!(
        "(cd sub && apply_patch '{BODY}'); apply_patch '{BODY}'"
    ));
    assert_eq!(a.patch_dirs, vec![Dir::Path("sub".into()), Dir::Start]);
    assert_eq!(
        patches(&format!("apply_patch <<< '{}'", BODY.trim_end())),
        vec![BODY]
    );
}

fn git(cmd: &str) -> GitKind {
    let a = analyze(cmd);
    assert_eq!(a.error, None, "{cmd}");
    assert_eq!(a.git.len(), 1, "{cmd}");
    a.git[0].kind.clone()
}

fn some(p: &[&str]) -> GitKind {
    GitKind::Discards {
        paths: Some(p.iter().map(|s| s.to_string()).collect()),
    }
}

#[test]
fn git_read_only() {
    for cmd in [
        "git log --oneline -20",
        "git diff HEAD~1 -- src",
        "git status --short",
        "git show HEAD:src/x.rs",
        "git blame -L 1,20 src/x.rs",
        "git branch",
        "git branch -a",
        "git branch --show-current",
        "git stash list",
        "git stash show -p stash@{0}",
        "git rev-parse --abbrev-ref HEAD",
        "git ls-files -m",
        "git grep -n foo",
        "git --no-pager log -1",
        "git -c color.ui=never diff",
        "git tag -l 'v*'",
        "git tag",
        "git remote -v",
        "git config --get user.email",
        "git config user.name",
        "git clean -n",
        "git add -n .",
        "git reflog",
        "git describe --tags",
        "git worktree list",
        "git checkout",
    ] {
        assert_eq!(git(cmd), GitKind::ReadOnly, "{cmd}");
    }
}

#[test]
fn git_discards() {
    let all = GitKind::Discards { paths: None };
    for cmd in [
        "git stash",
        "git stash push -m wip",
        "git stash save wip",
        "git stash pop",
        "git stash apply stash@{1}",
        "git checkout main",
        "git checkout -b feature origin/main",
        "git checkout -",
        "git checkout -f",
        "git checkout --force HEAD",
        "git switch main",
        "git switch -c new origin/main",
        "git reset --hard",
        "git reset --hard HEAD~1",
        "git reset --keep HEAD",
        "git clean -fdx",
        "git clean -f",
        "git pull --rebase",
        "git merge feature",
        "git rebase -i HEAD~3",
        "git cherry-pick abc123",
        "git revert HEAD",
        "git am < p.mbox",
        "git bisect start",
        "git restore --source=HEAD --staged --worktree",
    ] {
        assert_eq!(git(cmd), all, "{cmd}");
    }
    assert_eq!(git("git checkout -- a.rs b.rs"), some(&["a.rs", "b.rs"]));
    assert_eq!(git("git checkout src/x.rs"), some(&["src/x.rs"]));
    assert_eq!(git("git checkout ."), some(&["."]));
    assert_eq!(git("git checkout HEAD~2 -- x"), some(&["x"]));
    assert_eq!(git("git checkout main src/x.rs"), some(&["src/x.rs"]));
    assert_eq!(git("git restore a.rs"), some(&["a.rs"]));
    assert_eq!(git("git restore --worktree --staged a.rs"), some(&["a.rs"]));
    assert_eq!(git("git stash push -- a.rs"), some(&["a.rs"]));
    assert_eq!(git("git clean -fd build/"), some(&["build/"]));
}

#[test]
fn git_captures() {
    let cap = |all: bool, p: &[&str]| GitKind::Captures {
        all,
        paths: p.iter().map(|s| s.to_string()).collect(),
    };
    assert_eq!(git("git add -A"), cap(true, &[]));
    assert_eq!(git("git add --all"), cap(true, &[]));
    assert_eq!(git("git add ."), cap(true, &["."]));
    assert_eq!(git("git add -u"), cap(true, &[]));
    assert_eq!(
        git("git add src/a.rs src/b.rs"),
        cap(false, &["src/a.rs", "src/b.rs"])
    );
    assert_eq!(git("git add -A src"), cap(false, &["src"]));
    assert_eq!(git("git commit -a -m 'wip'"), cap(true, &[]));
    assert_eq!(git("git commit -am 'wip'"), cap(true, &[]));
    assert_eq!(git("git commit --all --message=x"), cap(true, &[]));
    assert_eq!(git("git commit -m 'x' src/a.rs"), cap(false, &["src/a.rs"]));
    assert_eq!(git("git commit -m 'x' -- a b"), cap(false, &["a", "b"]));
    assert_eq!(git("git commit -m x ."), cap(true, &["."]));
    assert_eq!(git("git add :/"), cap(true, &[":/"]));
}

#[test]
fn git_index_writes_and_others() {
    for cmd in [
        "git commit -m 'msg'",
        "git commit --amend --no-edit",
        "git reset",
        "git reset HEAD~1",
        "git reset -- a.rs",
        "git rm --cached x",
        "git mv a b",
        "git update-index --assume-unchanged x",
        "git restore --staged a.rs",
    ] {
        assert_eq!(git(cmd), GitKind::IndexWrite, "{cmd}");
    }
    for cmd in [
        "git fetch origin",
        "git push -u origin HEAD",
        "git config user.name 'A B'",
        "git remote add up url",
        "git tag v1.0",
        "git branch -d old",
        "git branch new-branch",
        "git checkout -b fresh",
        "git switch -c fresh",
        "git stash drop",
        "git clone https://x/y.git",
        "git init",
    ] {
        assert_eq!(git(cmd), GitKind::Other, "{cmd}");
    }
}

#[test]
fn every_git_in_a_command_is_listed() {
    let a = analyze("git add -A && git commit -m x && git push");
    let kinds: Vec<_> = a.git.iter().map(|g| g.kind.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            GitKind::Captures {
                all: true,
                paths: vec![]
            },
            GitKind::IndexWrite,
            GitKind::Other
        ]
    );
    assert_eq!(a.git[1].args, vec!["commit", "-m", "x"]);
    let a = analyze("cd sub && git stash");
    assert_eq!(a.git[0].dir, Dir::Path("sub".into()));
    let a = analyze("bash -c 'git reset --hard'");
    assert_eq!(a.git[0].kind, GitKind::Discards { paths: None });
}

#[test]
fn awk_in_place() {
    assert_eq!(
        w("gawk -i inplace '{print $2}' t.txt"),
        vec![("t.txt".into(), How::AwkInPlace)]
    );
    assert_eq!(paths("awk -i inplace -f prog.awk a b"), vec!["a", "b"]);
    none("awk -F: '{print $1}' /etc/passwd");
}

#[test]
fn commit_messages_from_here_documents() {
    // How Claude Code writes commit messages and pull request bodies.
    let cmd = "git add src/a.rs && git commit -m \"$(cat <<'EOF'\nFix the thing\n\nCo-Authored-By: Claude <noreply@anthropic.com>\nEOF\n)\"";
    let a = analyze(cmd);
    assert_eq!(a.error, None);
    assert!(a.writes.is_empty(), "{a:?}");
    let kinds: Vec<_> = a.git.iter().map(|g| g.kind.clone()).collect();
    assert_eq!(
        kinds,
        vec![
            GitKind::Captures {
                all: false,
                paths: vec!["src/a.rs".into()]
            },
            GitKind::IndexWrite
        ]
    );
    let pr = "gh pr create --title 'x' --body \"$(cat <<'EOF'\n## Summary\n- a > b\nEOF\n)\"";
    let a = analyze(pr);
    assert_eq!(a.error, None);
    assert!(a.writes.is_empty(), "{a:?}");
}

#[test]
fn loops_in_loops_are_unrolled_once() {
    let inner = "for b in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do touch \"$a$b\"; done";
    let mut cmd = inner.replace("$a", "x");
    for _ in 0..6 {
        cmd = format!("for a in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16; do {cmd}; done");
    }
    let start = std::time::Instant::now();
    let a = analyze(&cmd);
    assert_eq!(a.error, None);
    assert!(a.writes.len() <= 16, "{}", a.writes.len());
    // Generous: 16^7 walks would take minutes.
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}

#[test]
fn a_here_document_full_of_substitutions_is_read() {
    // A script or a template written through a here-document: its `$(`/`${` are text.
    let body: String = (0..300)
        .map(|i| format!("echo \"${{NAME}}-{i} $(date)\" `id`\n"))
        .collect();
    let cmd = format!("cat > deploy.sh <<'EOF'\n{body}EOF\nchmod +x deploy.sh");
    let a = analyze(&cmd);
    assert_eq!(a.error, None);
    assert_eq!(paths(&cmd), vec!["deploy.sh"]);
    let js: String = (0..200)
        .map(|i| format!("const s{i} = `${{a}}${{b}}`;\n"))
        .collect();
    let cmd =
        format!("apply_patch <<'EOF'\n*** Begin Patch\n*** Add File: t.js\n{js}*** End Patch\nEOF");
    assert_eq!(patches(&cmd).len(), 1);
}

#[test]
fn bounds() {
    let a = analyze(&"x".repeat(crate::MAX_LEN + 1));
    assert!(
        a.error.as_deref().is_some_and(|e| e.contains("too long")),
        "{a:?}"
    );
    let deep = format!("{}touch x{}", "(".repeat(200), ")".repeat(200));
    assert!(analyze(&deep).error.is_some());
    let deep = format!("echo {}x{}", "$(".repeat(200), ")".repeat(200));
    assert!(analyze(&deep).error.is_some());
    let nested = format!("{}touch deep", "eval ".repeat(12));
    assert!(
        analyze(&format!("{}touch ok", "eval ".repeat(7)))
            .error
            .is_none()
    );
    let a = analyze(&nested);
    assert!(
        a.error.as_deref().is_some_and(|e| e.contains("too deeply")),
        "{a:?}"
    );
    let a = analyze("echo 'unterminated");
    assert!(a.error.is_some());
    assert!(!a.error.unwrap_or_default().contains('\n'));
}
