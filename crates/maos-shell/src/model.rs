//! What [`analyze`](crate::analyze) says of a command: its bounds and its answer's types.

/// Commands longer than this many bytes are not analysed ([`Analysis::error`] says so).
pub const MAX_LEN: usize = 128 * 1024;

/// The most nested constructs a command may hold: `(`, `((`, `{`, `if`, `for`, `while`,
/// `until`, `case`, `select`, `[[`, `function`, `<(`, `>(` as shell syntax (here-documents and
/// quoted strings excluded), summed over the shells inside shells being read; and the most
/// substitutions one word may hold. Counted in total, not as a depth (a safe bound on the
/// parser's recursion whatever the quoting), so a long script with many of them is refused
/// too: the caller lets it run and checks after.
pub const MAX_NESTING: usize = 64;

/// The most substitutions (`$(`, `${`, `<(`, `>(`, `` ` ``) a command's text may hold. Above
/// [`MAX_NESTING`] of them (a here-document of a script or a template, most often) the command
/// is parsed on a thread of its own whose stack holds that many levels.
pub const MAX_SUBSTITUTIONS: usize = 4096;

/// How deep shells inside shells are followed (`bash -c "sh -c '…'"`, `eval`, `$(…)`).
pub const MAX_DEPTH: u8 = 8;

/// What a shell command will do to files and to git, as far as can be known before it runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Analysis {
    /// The files the command will write, create, truncate, delete or move, as named, in the
    /// order found, without duplicates.
    pub writes: Vec<Write>,
    /// The bodies of Codex `apply_patch` invocations (`*** Begin Patch` … `*** End Patch`), as
    /// given: in a here-document, an argument, or piped from `printf`, `echo` or `cat <<EOF`.
    pub patches: Vec<String>,
    /// The directory each of [`Analysis::patches`] is applied in (`cd sub && apply_patch …`),
    /// in the same order: its paths are relative to it.
    pub patch_dirs: Vec<Dir>,
    /// Each `git` invocation, classified by what it does to the working tree and the index.
    pub git: Vec<Git>,
    /// Programs that may write files that cannot be named before they run (a script, `make`,
    /// `cargo fmt`, `python gen.py`, `npm run build`, `find -delete`, `xargs rm`): a short name
    /// each, without duplicates, for "check what changed after".
    pub opaque: Vec<String>,
    /// Why the command could not be analysed (not valid shell, too long, nested too deeply), one
    /// line. The other fields then hold what was found before, which may be incomplete.
    pub error: Option<String>,
}

impl Analysis {
    /// True when the command writes nothing that is known, changes no git state that matters
    /// (only [`GitKind::ReadOnly`] and [`GitKind::Other`]), carries no patch and was understood.
    pub fn is_harmless(&self) -> bool {
        self.writes.is_empty()
            && self.patches.is_empty()
            && self.error.is_none()
            && self
                .git
                .iter()
                .all(|g| matches!(g.kind, GitKind::ReadOnly | GitKind::Other))
    }
}

/// The directory a path is relative to.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum Dir {
    /// The directory the command starts in.
    Start,
    /// A directory the command changed into (`cd DIR &&`, `git -C DIR`, `env -C DIR`), as
    /// written; relative to the start directory unless absolute. Successive `cd`s are joined with
    /// `/` (`cd a && cd ../b` gives `a/../b`).
    Path(String),
    /// The command changed directory to somewhere that cannot be known (`cd -`, `cd $X`, `cd`
    /// alone, a `cd` in one branch of an `if`).
    Unknown,
}

/// One file the command will write.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Write {
    /// The path as the command names it, quotes removed (`"a b"` → `a b`).
    pub path: String,
    /// The directory `path` is relative to (ignored by the caller when `path` is absolute).
    pub dir: Dir,
    /// How it is written.
    pub how: How,
    /// False when `path` still holds an expansion (a glob, a variable, a command substitution,
    /// `~`, a range `{1..3}`, more than 32 brace words): it is a pattern as written, not a name.
    pub exact: bool,
}

/// How a file is written.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum How {
    /// `> f`, `>| f`, `&> f`, `2> f`, `>& f`.
    Redirect,
    /// `>> f`, `&>> f`.
    Append,
    /// `tee [-a] f…`, `sponge f`.
    Tee,
    /// `sed -i` / `--in-place` on its file operands.
    SedInPlace,
    /// `perl -i` on its file operands.
    PerlInPlace,
    /// `gawk -i inplace` on its file operands.
    AwkInPlace,
    /// The destination of `cp`.
    Copy,
    /// The destination of `mv` (and of `git mv`).
    Move,
    /// A source of `mv` (and of `git mv`): it disappears.
    MoveSource,
    /// `rm`, `unlink`, `shred`, `git rm` (without `--cached`).
    Remove,
    /// `touch`.
    Touch,
    /// `truncate`.
    Truncate,
    /// The link `ln` creates.
    Link,
    /// The destination of `install`.
    Install,
    /// `dd of=F`.
    Dd,
    /// A file `patch` or `git apply` changes (named on its command line or in an inline diff).
    Patch,
    /// A path `git checkout -- PATH` or `git restore PATH` puts back.
    GitRestore,
    /// An output file a program was told to write: `sort -o`, `uniq IN OUT`, `curl -o`,
    /// `wget -O`, `patch -o`, `/usr/bin/time -o`.
    Output,
}

/// One `git` invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Git {
    /// The directory it runs in (`cd DIR && git …`, `git -C DIR …`).
    pub dir: Dir,
    /// Its arguments after `git`, quotes removed (global options such as `-C` included).
    pub args: Vec<String>,
    /// What it does to the working tree and the index.
    pub kind: GitKind,
}

/// What a git command does to a shared checkout.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum GitKind {
    /// Reads only: `log`, `diff`, `status`, `show`, `blame`, `branch` (listing), `stash
    /// list`/`show`, `rev-parse`, `ls-files`, `grep`, ...
    ReadOnly,
    /// Discards or replaces working-tree changes: `stash` (push, save, pop, apply, branch),
    /// `checkout`/`switch` to another branch, `checkout -- PATH`, `reset --hard`/`--keep`/
    /// `--merge`, `clean -f`, `restore` (the working tree), `pull`, `merge`, `rebase`,
    /// `cherry-pick`, `revert`, `am`, `bisect`. `paths` is `Some` when limited to the named paths
    /// (`checkout -- a b`, `restore a`, `stash push -- a`, `clean -f d`), `None` for the whole
    /// tree.
    Discards {
        /// The pathspecs it is limited to, as written (relative to [`Git::dir`]; they may be
        /// `.`, globs or directories); `None`: the whole working tree.
        paths: Option<Vec<String>>,
    },
    /// Captures working-tree changes into the index or a commit: `add`, `commit -a`,
    /// `commit PATH…`. `all` is true for `add -A`/`--all`/`-u`/`--update` without paths,
    /// `commit -a`/`--all`, and a pathspec of `.`, `./`, `:/` or `*` (everything under
    /// [`Git::dir`], or the whole repository for `:/`).
    Captures {
        /// Everything (see above) rather than only the named paths.
        all: bool,
        /// The pathspecs named, as written (they may be globs or directories).
        paths: Vec<String>,
    },
    /// Writes `.git/index` (and so takes `.git/index.lock`) without discarding or capturing
    /// working-tree changes: `commit` of what is staged, `commit --amend`, `reset` (mixed or
    /// soft), `rm` (its files are also [`Analysis::writes`]), `rm --cached`, `mv`,
    /// `restore --staged`, `update-index`, `read-tree`, `apply --index`/`--cached`.
    IndexWrite,
    /// No working-tree or index effect: `fetch`, `push`, `config`, `remote`, `tag`, `branch -d`,
    /// `clone`, `init`, `stash drop`/`clear`, an unknown subcommand or alias.
    Other,
}
