//! What each known program writes, from its arguments: the file utilities, the in-place
//! editors, the wrappers that run another command (`env`, `sudo`, `xargs`, `bash -c`), and the
//! read-only programs that write nothing. Anything else is opaque.

use crate::walk::{Scope, Walker};
use crate::word::Expanded;
use crate::{Dir, How};

/// Programs that write no file (whatever their arguments, or unless an option handled below
/// says otherwise): listing, searching, printing, comparing, inspecting.
const READ_ONLY: &[&str] = &[
    "ls",
    "ll",
    "la",
    "dir",
    "cat",
    "bat",
    "less",
    "more",
    "head",
    "tail",
    "wc",
    "grep",
    "egrep",
    "fgrep",
    "rg",
    "ag",
    "ack",
    "echo",
    "printf",
    "jq",
    "yq",
    "diff",
    "cmp",
    "comm",
    "cut",
    "tr",
    "sed",
    "awk",
    "gawk",
    "mawk",
    "nawk",
    "fd",
    "tree",
    "pwd",
    "which",
    "type",
    "whereis",
    "file",
    "stat",
    "du",
    "df",
    "date",
    "printenv",
    "true",
    "false",
    "test",
    "[",
    "basename",
    "dirname",
    "realpath",
    "readlink",
    "id",
    "whoami",
    "hostname",
    "uname",
    "ps",
    "pgrep",
    "sleep",
    "seq",
    "yes",
    "nl",
    "od",
    "hexdump",
    "xxd",
    "md5sum",
    "sha1sum",
    "sha256sum",
    "sha512sum",
    "shasum",
    "b2sum",
    "cksum",
    "base64",
    "column",
    "fold",
    "fmt",
    "paste",
    "join",
    "tac",
    "rev",
    "man",
    "help",
    "export",
    "set",
    "unset",
    "shift",
    "read",
    "local",
    "declare",
    "typeset",
    "readonly",
    "alias",
    "unalias",
    "exit",
    "return",
    "break",
    "continue",
    "wait",
    "jobs",
    "history",
    "hash",
    "getopts",
    "umask",
    "ulimit",
    "shopt",
    "kill",
    "lsof",
    "env",
    "locale",
    "tput",
    "clear",
    "mkdir",
    "rmdir",
    "chmod",
    "chown",
    "chgrp",
    "lscpu",
    "free",
    "uptime",
    "nproc",
    "top",
    "htop",
    "netstat",
    "ss",
    "ping",
    "dig",
    "nslookup",
    "host",
    "whois",
    "git-lfs",
    "tokei",
    "cloc",
    "strings",
    "nm",
    "objdump",
    "ldd",
    "otool",
    "expr",
    "bc",
    "dc",
    "look",
    "sort",
    "uniq",
    "expand",
    "unexpand",
    "pr",
    "csplit",
    "iconv",
    "numfmt",
    "shuf",
    "sum",
    "tsort",
    "factor",
    "tty",
    "stty",
    "groups",
    "users",
    "who",
    "w",
    "last",
    "logname",
    "arch",
    "zcat",
    "zgrep",
    "zless",
    "bzcat",
    "xzcat",
    "rgrep",
    "ripgrep",
    "exa",
    "eza",
    "lsd",
    "delta",
    "difft",
    "colordiff",
    "wdiff",
    "tldr",
    "cal",
    "command",
    "compgen",
    "complete",
    "dirs",
    "disown",
    "fc",
    "logout",
    "let",
    ":",
    "caller",
    "enable",
    "mapfile",
    "readarray",
    "suspend",
    "times",
    "bind",
    "fg",
    "bg",
];

/// Programs that run the command that follows their options.
const WRAPPERS: &[&str] = &[
    "env",
    "sudo",
    "doas",
    "nice",
    "nohup",
    "time",
    "command",
    "exec",
    "builtin",
    "stdbuf",
    "timeout",
    "ionice",
    "xargs",
    "caffeinate",
    "chronic",
    "unbuffer",
    "setsid",
    "flock",
];

/// Shells whose `-c STRING` is analysed.
const SHELLS: &[&str] = &["bash", "sh", "zsh", "dash", "ksh", "mksh", "ash", "busybox"];

/// The program's name without its directory (`/usr/bin/sed` → `sed`).
pub(crate) fn base(name: &str) -> &str {
    name.rsplit('/').next().unwrap_or(name)
}

/// A command line split into options and operands.
#[derive(Default)]
pub(crate) struct Opts<'a> {
    /// Options as written (`-i`, `--in-place`), each with its value when it takes one.
    opts: Vec<(String, Option<&'a Expanded>, Option<String>)>,
    pub operands: Vec<&'a Expanded>,
}

impl Opts<'_> {
    pub fn has(&self, names: &[&str]) -> bool {
        self.opts
            .iter()
            .any(|(n, _, _)| names.contains(&n.as_str()))
    }

    /// The value of the last of `names`, as an expanded word (`-t DIR`) or inline (`-tDIR`,
    /// `--target-directory=DIR`).
    pub fn value(&self, names: &[&str]) -> Option<Expanded> {
        self.opts
            .iter()
            .rev()
            .find(|(n, _, _)| names.contains(&n.as_str()))
            .and_then(|(_, v, inline)| match (v, inline) {
                (Some(v), _) => Some((*v).clone()),
                (None, Some(s)) => Some(Expanded {
                    text: s.clone(),
                    exact: true,
                }),
                _ => None,
            })
    }
}

/// Splits `args` getopt-style. `short_val`: the short options taking a value; `long_val`: the
/// long options taking one. Options stop at `--`; with `stop_at_operand`, at the first operand.
pub(crate) fn getopt<'a>(
    args: &'a [Expanded],
    short_val: &str,
    long_val: &[&str],
    stop_at_operand: bool,
) -> Opts<'a> {
    let mut o = Opts::default();
    let mut i = 0;
    while i < args.len() {
        let a = &args[i];
        let t = a.text.as_str();
        if t == "--" {
            o.operands.extend(&args[i + 1..]);
            break;
        }
        if let Some(long) = t.strip_prefix("--") {
            let (name, inline) = match long.split_once('=') {
                Some((n, v)) => (n, Some(v.to_owned())),
                None => (long, None),
            };
            let name = format!("--{name}");
            if inline.is_none() && long_val.contains(&name.as_str()) {
                o.opts.push((name, args.get(i + 1), None));
                i += 2;
                continue;
            }
            o.opts.push((name, None, inline));
        } else if t.len() > 1 && t.starts_with('-') && a.exact {
            let flags: Vec<char> = t[1..].chars().collect();
            for (k, c) in flags.iter().enumerate() {
                if short_val.contains(*c) {
                    let rest: String = flags[k + 1..].iter().collect();
                    if rest.is_empty() {
                        o.opts.push((format!("-{c}"), args.get(i + 1), None));
                        i += 1;
                    } else {
                        o.opts.push((format!("-{c}"), None, Some(rest)));
                    }
                    break;
                }
                o.opts.push((format!("-{c}"), None, None));
            }
        } else {
            o.operands.push(a);
            if stop_at_operand {
                o.operands.extend(&args[i + 1..]);
                break;
            }
        }
        i += 1;
    }
    o
}

/// `dir/name`, or `name` when `dir` is the start directory.
pub(crate) fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() || name.starts_with('/') {
        name.to_owned()
    } else if dir.ends_with('/') {
        format!("{dir}{name}")
    } else {
        format!("{dir}/{name}")
    }
}

/// `DIR/basename(SRC)`, the file a copy or move into a directory writes.
fn into_dir(dir: &Expanded, src: &Expanded) -> Expanded {
    let name = src.text.trim_end_matches('/');
    let name = name.rsplit('/').next().unwrap_or(name);
    Expanded {
        text: join(&dir.text, name),
        exact: dir.exact && src.exact,
    }
}

impl Walker<'_> {
    /// A simple command after expansion; returns what it prints when that is plain text.
    pub(crate) fn run(
        &mut self,
        argv: &[Expanded],
        scope: &mut Scope,
        stdin: Option<String>,
    ) -> Option<String> {
        let first = argv.first()?;
        if !first.exact {
            // `$EDITOR f`, `$(which tool) x`: a program nobody can name.
            self.opaque(first.text.clone());
            return None;
        }
        let name = base(&first.text);
        let args = &argv[1..];
        if WRAPPERS.contains(&name) {
            return self.wrapper(name, args, scope, stdin);
        }
        if SHELLS.contains(&name) {
            self.shell(name, args, scope, stdin);
            return None;
        }
        match name {
            "cd" | "pushd" => self.cd(args, scope),
            "popd" => scope.dir = Dir::Unknown,
            "eval" => {
                let text: Vec<&str> = args.iter().map(|a| a.text.as_str()).collect();
                self.nested(&text.join(" "), scope, "eval");
            }
            "trap" => {
                // `trap 'rm -f lock' EXIT`: the handler runs later, in this shell.
                if let Some(handler) = args.first().filter(|a| !a.text.starts_with('-')) {
                    self.nested(&handler.text.clone(), &mut scope.clone(), "trap");
                }
            }
            "source" | "." => self.opaque(format!("{name} {}", words(args, 1))),
            "apply_patch" | "applypatch" => {
                let body = match args.first() {
                    Some(a) => Some(a.text.clone()),
                    None => stdin,
                };
                match body {
                    Some(b) => {
                        self.out.patches.push(b);
                        self.out.patch_dirs.push(scope.dir.clone());
                    }
                    None => self.opaque(name.to_owned()),
                }
            }
            "git" => self.git(args, scope, stdin.as_deref()),
            "echo" => return Some(echo(args)),
            "printf" => return printf(args),
            "cat" => {
                if args.is_empty() {
                    return stdin;
                }
            }
            "tee" | "sponge" => {
                let o = getopt(args, "", &[], false);
                for f in o.operands {
                    self.write(scope, f, How::Tee);
                }
            }
            "sed" => self.sed(args, scope),
            "perl" => self.perl(args, scope),
            "awk" | "gawk" => {
                let o = getopt(args, "ivfFE", &["--include", "--file", "--assign"], true);
                let inplace = o
                    .value(&["-i", "--include"])
                    .is_some_and(|v| v.text == "inplace");
                if inplace {
                    let program = o.value(&["-f", "--file"]).is_none();
                    let files = o.operands.iter().skip(usize::from(program));
                    for f in files {
                        self.write(scope, f, How::AwkInPlace);
                    }
                }
            }
            "cp" | "mv" | "install" | "ln" => self.copy_like(name, args, scope),
            "rm" | "unlink" | "shred" => {
                let o = getopt(args, "n", &["--interactive"], false);
                if name == "shred" && !o.has(&["-u", "--remove"]) {
                    for f in o.operands {
                        self.write(scope, f, How::Truncate);
                    }
                } else {
                    for f in o.operands {
                        self.write(scope, f, How::Remove);
                    }
                }
            }
            "touch" => {
                let o = getopt(args, "drt", &["--date", "--reference", "--time"], false);
                for f in o.operands {
                    self.write(scope, f, How::Touch);
                }
            }
            "truncate" => {
                let o = getopt(args, "sr", &["--size", "--reference"], false);
                for f in o.operands {
                    self.write(scope, f, How::Truncate);
                }
            }
            "dd" => {
                for a in args {
                    if let Some(f) = a.text.strip_prefix("of=") {
                        let e = Expanded {
                            text: f.to_owned(),
                            exact: a.exact,
                        };
                        self.write(scope, &e, How::Dd);
                    }
                }
            }
            "sort" => {
                let o = getopt(
                    args,
                    "kotST",
                    &[
                        "--key",
                        "--output",
                        "--field-separator",
                        "--buffer-size",
                        "--temporary-directory",
                        "--files0-from",
                        "--parallel",
                        "--compress-program",
                        "--batch-size",
                    ],
                    false,
                );
                if let Some(f) = o.value(&["-o", "--output"]) {
                    self.write(scope, &f, How::Output);
                }
            }
            "uniq" => {
                let o = getopt(
                    args,
                    "fsw",
                    &[
                        "--skip-fields",
                        "--skip-chars",
                        "--check-chars",
                        "--all-repeated",
                        "--group",
                    ],
                    false,
                );
                if let Some(out) = o.operands.get(1) {
                    self.write(scope, out, How::Output);
                }
            }
            "curl" => self.curl(args, scope),
            "wget" => {
                let o = getopt(args, "OoaPeUtTwQdDlAIRXY", &["--output-document"], false);
                match o.value(&["-O", "--output-document"]) {
                    Some(f) => self.write(scope, &f, How::Output),
                    None if o.has(&["--spider"]) => {}
                    None => self.opaque("wget".to_owned()),
                }
            }
            "patch" => self.patch(args, scope, stdin.as_deref()),
            "find" => {
                let writes = args.iter().any(|a| {
                    matches!(
                        a.text.as_str(),
                        "-delete"
                            | "-exec"
                            | "-execdir"
                            | "-ok"
                            | "-okdir"
                            | "-fprint"
                            | "-fprint0"
                            | "-fprintf"
                            | "-fls"
                    )
                });
                if writes {
                    self.opaque("find".to_owned());
                }
            }
            "docker" | "podman" | "kubectl" => {
                let sub = args.iter().find(|a| !a.text.starts_with('-'));
                let ro = sub.is_some_and(|s| {
                    matches!(
                        s.text.as_str(),
                        "ps" | "images"
                            | "logs"
                            | "inspect"
                            | "version"
                            | "info"
                            | "get"
                            | "describe"
                            | "top"
                            | "stats"
                            | "events"
                            | "port"
                            | "diff"
                            | "history"
                            | "search"
                            | "config"
                            | "explain"
                            | "api-resources"
                    )
                });
                if !ro {
                    self.opaque(format!("{name} {}", words(args, 1)));
                }
            }
            _ if READ_ONLY.contains(&name) => {}
            _ => self.opaque(
                format!("{} {}", first.text, words(args, 1))
                    .trim_end()
                    .to_owned(),
            ),
        }
        None
    }

    /// `env`, `sudo`, `nice`, `xargs`, ...: the command after their options.
    fn wrapper(
        &mut self,
        name: &str,
        args: &[Expanded],
        scope: &mut Scope,
        stdin: Option<String>,
    ) -> Option<String> {
        let (short_val, long_val): (&str, &[&str]) = match name {
            "env" => ("uCS", &["--unset", "--chdir", "--split-string"]),
            "sudo" | "doas" => (
                "ugCDhprtUc",
                &[
                    "--user",
                    "--group",
                    "--chdir",
                    "--host",
                    "--prompt",
                    "--role",
                    "--type",
                    "--other-user",
                    "--close-from",
                ],
            ),
            "nice" => ("n", &["--adjustment"]),
            "time" => ("fo", &["--format", "--output"]),
            "exec" => ("a", &[]),
            "stdbuf" => ("ioe", &["--input", "--output", "--error"]),
            "timeout" => ("sk", &["--signal", "--kill-after"]),
            "ionice" => ("cnp", &["--class", "--classdata", "--pid"]),
            "xargs" => (
                "IiLlnPdaEs",
                &[
                    "--replace",
                    "--max-lines",
                    "--max-args",
                    "--max-procs",
                    "--delimiter",
                    "--arg-file",
                    "--eof",
                    "--max-chars",
                    "--process-slot-var",
                ],
            ),
            "flock" => (
                "wEc",
                &["--wait", "--timeout", "--conflict-exit-code", "--command"],
            ),
            _ => ("", &[]),
        };
        let o = getopt(args, short_val, long_val, true);
        let operands: Vec<Expanded> = o.operands.iter().map(|e| (*e).clone()).collect();
        let mut rest: &[Expanded] = &operands;
        let owned: Vec<Expanded>;
        match name {
            "env" => {
                // `env X=1 Y=2 cmd`: skip the assignments.
                let skip = rest.iter().take_while(|a| is_assignment(&a.text)).count();
                owned = rest[skip..].to_vec();
                rest = &owned;
                if o.has(&["-S", "--split-string"]) {
                    self.opaque("env -S".to_owned());
                    return None;
                }
            }
            "command" | "type" if o.has(&["-v", "-V"]) => return None,
            "time" => {
                if let Some(f) = o.value(&["-o", "--output"]) {
                    self.write(scope, &f, How::Output);
                }
            }
            "timeout" => {
                // The duration comes first.
                owned = rest.get(1..).unwrap_or_default().to_vec();
                rest = &owned;
            }
            "flock" => {
                // `flock FILE cmd` / `flock -c CMD FILE`.
                if let Some(c) = o.value(&["-c", "--command"]) {
                    self.nested(&c.text, &mut scope.clone(), "flock -c");
                    return None;
                }
                owned = rest.get(1..).unwrap_or_default().to_vec();
                rest = &owned;
            }
            "sudo" | "doas" if rest.is_empty() => {
                if o.has(&["-s", "-i", "--shell", "--login"]) {
                    self.opaque(name.to_owned());
                }
                return None;
            }
            "xargs" => {
                // The command gets its operands from the input: known only when it writes
                // nothing whatever its operands.
                match rest.first() {
                    Some(c)
                        if c.exact
                            && READ_ONLY.contains(&base(&c.text))
                            && !is_in_place(&rest[1..]) => {}
                    Some(c) => self.opaque(format!("xargs {}", c.text)),
                    None => {}
                }
                return None;
            }
            _ => {}
        }
        if rest.is_empty() {
            return None;
        }
        let chdir = match name {
            "env" => o.value(&["-C", "--chdir"]),
            "sudo" | "doas" => o.value(&["-D", "--chdir"]),
            _ => None,
        };
        if let Some(d) = chdir {
            let mut sub = scope.clone();
            cd_to(&mut sub, Some(&d));
            return self.run(rest, &mut sub, stdin);
        }
        if name == "exec" || name == "command" || name == "builtin" {
            // In the same shell: `exec`'d or not, a `cd` here is the shell's own.
            return self.run(rest, scope, stdin);
        }
        self.run(rest, &mut scope.clone(), stdin)
    }

    /// `bash -c STRING`, `bash <<EOF`, `bash script.sh`.
    fn shell(&mut self, name: &str, args: &[Expanded], scope: &mut Scope, stdin: Option<String>) {
        let mut i = 0;
        let mut command = false;
        while i < args.len() {
            let t = args[i].text.as_str();
            if t == "--" || !(t.starts_with('-') || t.starts_with('+')) || t == "-" {
                break;
            }
            if t == "-o"
                || t == "+o"
                || t == "-O"
                || t == "+O"
                || t == "--rcfile"
                || t == "--init-file"
            {
                i += 2;
                continue;
            }
            if !t.starts_with("--") && t[1..].contains('c') {
                command = true;
            }
            // `-euo pipefail`: a bundle ending in `o` takes the next word.
            if !t.starts_with("--") && (t.ends_with('o') || t.ends_with('O')) {
                i += 1;
            }
            i += 1;
        }
        let rest = args.get(i..).unwrap_or_default();
        let rest = match rest.first() {
            Some(a) if a.text == "--" => &rest[1..],
            _ => rest,
        };
        if command {
            match rest.first() {
                Some(text) => self.nested(&text.text, &mut scope.clone(), &format!("{name} -c")),
                None => self.opaque(format!("{name} -c")),
            }
        } else if rest.is_empty() || rest[0].text == "-" || (rest[0].text == "-s") {
            match stdin {
                Some(text) => self.nested(&text, &mut scope.clone(), name),
                None => self.opaque(name.to_owned()),
            }
        } else {
            self.opaque(format!("{name} {}", rest[0].text));
        }
    }

    fn cd(&mut self, args: &[Expanded], scope: &mut Scope) {
        let o = getopt(args, "", &[], false);
        cd_to(scope, o.operands.first().copied());
    }

    /// `sed -i` / `-i.bak` / `--in-place[=SUF]` / BSD `-i ''`: its file operands.
    fn sed(&mut self, args: &[Expanded], scope: &mut Scope) {
        let mut in_place = false;
        let mut script_given = false;
        let mut files: Vec<&Expanded> = Vec::new();
        let mut i = 0;
        let mut operands_only = false;
        while i < args.len() {
            let a = &args[i];
            let t = a.text.as_str();
            if operands_only || !t.starts_with('-') || t == "-" || !a.exact {
                files.push(a);
            } else if t == "--" {
                operands_only = true;
            } else if let Some(long) = t.strip_prefix("--") {
                let name = long.split_once('=').map_or(long, |(n, _)| n);
                match name {
                    "in-place" => in_place = true,
                    "expression" | "file" => {
                        script_given = true;
                        if !long.contains('=') {
                            i += 1;
                        }
                    }
                    "line-length" if !long.contains('=') => i += 1,
                    _ => {}
                }
            } else {
                let flags: Vec<char> = t[1..].chars().collect();
                for (k, c) in flags.iter().enumerate() {
                    match c {
                        'i' => {
                            in_place = true;
                            // `-i.bak` takes the rest as a suffix; BSD `-i ''` takes the next
                            // (empty) word.
                            if k + 1 == flags.len()
                                && args.get(i + 1).is_some_and(|n| n.text.is_empty())
                            {
                                i += 1;
                            }
                            break;
                        }
                        'e' | 'f' => {
                            script_given = true;
                            if k + 1 == flags.len() {
                                i += 1;
                            }
                            break;
                        }
                        'l' => {
                            if k + 1 == flags.len() {
                                i += 1;
                            }
                            break;
                        }
                        _ => {}
                    }
                }
            }
            i += 1;
        }
        if !in_place {
            return;
        }
        let files = if script_given {
            &files[..]
        } else {
            files.get(1..).unwrap_or_default()
        };
        for f in files {
            self.write(scope, f, How::SedInPlace);
        }
    }

    /// `perl -i[SUF] -pe SCRIPT FILE…`.
    fn perl(&mut self, args: &[Expanded], scope: &mut Scope) {
        let mut in_place = false;
        let mut script_given = false;
        let mut i = 0;
        while i < args.len() {
            let t = args[i].text.as_str();
            if t == "--" {
                i += 1;
                break;
            }
            if !t.starts_with('-') || t == "-" || !args[i].exact {
                break;
            }
            let flags: Vec<char> = t[1..].chars().collect();
            for (k, c) in flags.iter().enumerate() {
                match c {
                    'i' => {
                        in_place = true;
                        break;
                    }
                    'e' | 'E' => {
                        script_given = true;
                        if k + 1 == flags.len() {
                            i += 1;
                        }
                        break;
                    }
                    'I' | 'M' | 'm' | 'x' => {
                        if k + 1 == flags.len() && *c != 'x' {
                            i += 1;
                        }
                        break;
                    }
                    'F' | 'l' | '0' | 'C' | 'd' | 'D' => break,
                    _ => {}
                }
            }
            i += 1;
        }
        if !in_place {
            if !script_given {
                self.opaque(
                    format!("perl {}", words(args.get(i..).unwrap_or_default(), 1))
                        .trim_end()
                        .to_owned(),
                );
            }
            return;
        }
        let files = args.get(i..).unwrap_or_default();
        let files = if script_given {
            files
        } else {
            files.get(1..).unwrap_or_default()
        };
        for f in files {
            self.write(scope, f, How::PerlInPlace);
        }
    }

    /// `cp`, `mv`, `install`, `ln`: the destination (and `mv`'s sources).
    fn copy_like(&mut self, name: &str, args: &[Expanded], scope: &mut Scope) {
        let o = match name {
            "cp" => getopt(args, "tS", &["--target-directory", "--suffix"], false),
            "mv" => getopt(args, "tS", &["--target-directory", "--suffix"], false),
            "ln" => getopt(args, "tS", &["--target-directory", "--suffix"], false),
            _ => getopt(
                args,
                "tSmogZ",
                &[
                    "--target-directory",
                    "--suffix",
                    "--mode",
                    "--owner",
                    "--group",
                    "--strip-program",
                ],
                false,
            ),
        };
        let how = match name {
            "cp" => How::Copy,
            "mv" => How::Move,
            "ln" => How::Link,
            _ => How::Install,
        };
        if name == "install" && o.has(&["-d", "--directory"]) {
            return;
        }
        let (sources, dest): (&[&Expanded], Option<Expanded>) =
            match o.value(&["-t", "--target-directory"]) {
                Some(dir) => (&o.operands[..], Some(dir)),
                None if name == "ln" && o.operands.len() == 1 => {
                    // `ln -s TARGET`: a link named after the target, here.
                    let here = Expanded {
                        text: String::new(),
                        exact: true,
                    };
                    (&o.operands[..], Some(here))
                }
                None => match o.operands.split_last() {
                    Some((last, srcs)) if !srcs.is_empty() => (srcs, Some((*last).clone())),
                    _ => (&[], None),
                },
            };
        let Some(dest) = dest else { return };
        let into = o.value(&["-t", "--target-directory"]).is_some()
            || sources.len() > 1
            || dest.text.ends_with('/')
            || dest.text.is_empty()
            || dest.text == "."
            || dest.text == "..";
        let no_target_dir = o.has(&["-T", "--no-target-directory"]);
        if into && !no_target_dir {
            for s in sources {
                self.write(scope, &into_dir(&dest, s), how);
            }
        } else {
            self.write(scope, &dest, how);
        }
        if name == "mv" {
            for s in sources {
                self.write(scope, s, How::MoveSource);
            }
        }
    }

    /// `curl -o FILE` / `--output FILE` / `-O` (a name from the URL: opaque).
    fn curl(&mut self, args: &[Expanded], scope: &mut Scope) {
        let o = getopt(
            args,
            "oXHdufFATeEbcKmrwxyYzCDQtU",
            &[
                "--output",
                "--request",
                "--header",
                "--data",
                "--data-raw",
                "--data-binary",
                "--data-urlencode",
                "--user",
                "--form",
                "--user-agent",
                "--upload-file",
                "--referer",
                "--cert",
                "--cookie",
                "--cookie-jar",
                "--config",
                "--max-time",
                "--range",
                "--write-out",
                "--proxy",
                "--dump-header",
                "--connect-timeout",
                "--retry",
                "--output-dir",
                "--json",
                "--url",
            ],
            false,
        );
        if let Some(f) = o.value(&["-o", "--output"]) {
            self.write(scope, &f, How::Output);
        }
        for f in [
            o.value(&["-D", "--dump-header"]),
            o.value(&["-c", "--cookie-jar"]),
        ]
        .into_iter()
        .flatten()
        {
            self.write(scope, &f, How::Output);
        }
        if o.has(&[
            "-O",
            "--remote-name",
            "--remote-name-all",
            "-J",
            "--remote-header-name",
        ]) {
            self.opaque("curl -O".to_owned());
        }
    }
}

/// `cd DIR` in `scope` (`None`: `cd` alone, home).
pub(crate) fn cd_to(scope: &mut Scope, dir: Option<&Expanded>) {
    scope.dir = match dir {
        Some(d) if d.exact && d.text != "-" && !d.text.is_empty() => match &scope.dir {
            Dir::Start => Dir::Path(d.text.clone()),
            Dir::Path(p) => Dir::Path(join(p, &d.text)),
            Dir::Unknown => Dir::Unknown,
        },
        _ => Dir::Unknown,
    };
}

/// `NAME=value`.
fn is_assignment(w: &str) -> bool {
    match w.split_once('=') {
        Some((n, _)) => {
            !n.is_empty()
                && n.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !n.starts_with(|c: char| c.is_ascii_digit())
        }
        None => false,
    }
}

/// Whether `sed`/`perl` arguments ask for an in-place edit.
fn is_in_place(args: &[Expanded]) -> bool {
    args.iter().any(|a| {
        let t = a.text.as_str();
        t == "--in-place"
            || t.starts_with("--in-place=")
            || (t.starts_with('-') && !t.starts_with("--") && t.contains('i'))
    })
}

/// The first `n` words of `args` that are not options, joined (for opaque names).
fn words(args: &[Expanded], n: usize) -> String {
    args.iter()
        .filter(|a| !a.text.starts_with('-'))
        .take(n)
        .map(|a| a.text.as_str())
        .collect::<Vec<_>>()
        .join(" ")
}

/// What `echo ARGS` prints (`-n`, `-e`, `-E` handled).
fn echo(args: &[Expanded]) -> String {
    let mut newline = true;
    let mut escapes = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        match a.text.as_str() {
            "-n" => newline = false,
            "-e" => escapes = true,
            "-E" => escapes = false,
            "-ne" | "-en" => {
                newline = false;
                escapes = true;
            }
            _ => break,
        }
        i += 1;
    }
    let text: Vec<&str> = args[i..].iter().map(|a| a.text.as_str()).collect();
    let mut s = text.join(" ");
    if escapes {
        s = unescape(&s);
    }
    if newline {
        s.push('\n');
    }
    s
}

/// What `printf FORMAT [ARGS]` prints, for the plain forms (`printf '%s' TEXT`, `printf TEXT`).
fn printf(args: &[Expanded]) -> Option<String> {
    let args = match args.first() {
        Some(a) if a.text == "--" => &args[1..],
        _ => args,
    };
    let format = args.first()?;
    if format.text == "-v" {
        return None;
    }
    let rest = &args[1..];
    let f = format.text.as_str();
    if (f == "%s" || f == "%s\\n" || f == "%s\n") && !rest.is_empty() {
        let mut s = String::new();
        for a in rest {
            s.push_str(&a.text);
            if f != "%s" {
                s.push('\n');
            }
        }
        return Some(s);
    }
    if !f.contains('%') || f.replace("%%", "").find('%').is_none() {
        return Some(unescape(&f.replace("%%", "%")));
    }
    None
}

/// `\n`, `\t`, `\\` as `printf` and `echo -e` read them.
fn unescape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('n') => out.push('\n'),
            Some('t') => out.push('\t'),
            Some('r') => out.push('\r'),
            Some('\\') => out.push('\\'),
            Some('"') => out.push('"'),
            Some('\'') => out.push('\''),
            Some('a') => out.push('\u{7}'),
            Some('0') => out.push('\0'),
            Some(o) => {
                out.push('\\');
                out.push(o);
            }
            None => out.push('\\'),
        }
    }
    out
}
