//! Property tests: any input returns (no panic, no stack overflow), and every write names a
//! path the command itself spells.

use maos_shell::{MAX_DEPTH, MAX_LEN, MAX_NESTING, analyze};
use proptest::prelude::*;

/// Shell words and operators, for soups that look like commands.
const VOCABULARY: &[&str] = &[
    "echo",
    "rm",
    "-rf",
    "-f",
    "cp",
    "mv",
    "-t",
    "sed",
    "-i",
    "-i.bak",
    "'s/a/b/'",
    "-e",
    "perl",
    "-pi",
    "tee",
    "-a",
    "touch",
    "truncate",
    "-s",
    "0",
    "ln",
    "-s",
    "install",
    "dd",
    "of=o.bin",
    "patch",
    "-p1",
    "git",
    "checkout",
    "restore",
    "stash",
    "add",
    "-A",
    "commit",
    "-am",
    "reset",
    "--hard",
    "--",
    "a.txt",
    "b.rs",
    "src/c.rs",
    "dir/",
    ".",
    "..",
    "/tmp/x",
    "/dev/null",
    ">",
    ">>",
    "&>",
    "2>",
    ">|",
    "2>&1",
    ">&2",
    "<",
    "<<<",
    "|",
    "&&",
    "||",
    ";",
    "&",
    "(",
    ")",
    "{",
    "}",
    "if",
    "then",
    "else",
    "fi",
    "for",
    "f",
    "in",
    "do",
    "done",
    "while",
    "case",
    "esac",
    "x)",
    ";;",
    "bash",
    "sh",
    "-c",
    "-lc",
    "\"",
    "'",
    "$(",
    "`",
    "$f",
    "$X",
    "${Y}",
    "*",
    "?",
    "~",
    "env",
    "A=1",
    "sudo",
    "-u",
    "nice",
    "time",
    "xargs",
    "eval",
    "apply_patch",
    "cd",
    "-",
    "\n",
    "<<EOF",
    "EOF",
    "<<'EOF'",
    "cat",
    "printf",
    "'%s'",
    "*** Begin Patch",
    "+++ b/p.rs",
    "--- a/p.rs",
    "find",
    "-delete",
    "make",
    "cargo",
    "fmt",
    "x=1",
    "f()",
    "exec",
    "command",
    "timeout",
    "5",
    "\\",
    "#",
    "!",
    "[[",
    "]]",
    "$((1+2))",
    "<(",
    ">(",
    "{a,b}",
];

fn soup() -> impl Strategy<Value = String> {
    prop::collection::vec(prop::sample::select(VOCABULARY), 0..40).prop_map(|w| w.join(" "))
}

/// Well-formed commands: programs with arguments and redirections, joined by operators.
fn commands() -> impl Strategy<Value = String> {
    const PROGRAMS: &[&str] = &[
        "rm -f",
        "cp",
        "mv",
        "sed -i",
        "sed -i.bak -e 's/a/b/'",
        "perl -pi -e 's/x/y/'",
        "tee -a",
        "touch",
        "truncate -s 0",
        "ln -s",
        "install -m 644",
        "cat",
        "echo",
        "git checkout --",
        "git restore",
        "git rm",
        "git mv",
        "sudo rm",
        "env A=1 touch",
        "cd",
        "bash -c 'touch i.rs'",
        "cp -t out",
        "mv -t out",
        "dd of=d.img",
        "sort -o s.txt",
        "curl -o c.json",
    ];
    const ARGS: &[&str] = &[
        "a.txt",
        "src/b.rs",
        "'c d.md'",
        "\"e f\"",
        "dir/",
        "g\\ h",
        "*.log",
        "$X",
        "~/i",
        "../j",
        "/abs/k",
        "-v",
        "--",
        "l.rs",
        "\"$(pwd)/m\"",
        "{n,o}.rs",
    ];
    const REDIRECTS: &[&str] = &[
        "",
        "> r.out",
        ">> r.log",
        "2> e.log",
        "2>/dev/null",
        "&> all.log",
        ">&2",
    ];
    const OPS: &[&str] = &[" && ", " || ", "; ", " | ", " & "];
    let simple = (
        prop::sample::select(PROGRAMS),
        prop::collection::vec(prop::sample::select(ARGS), 0..4),
        prop::sample::select(REDIRECTS),
    )
        .prop_map(|(p, a, r)| format!("{p} {} {r}", a.join(" ")));
    prop::collection::vec((simple, prop::sample::select(OPS)), 1..6).prop_map(|cmds| {
        let mut s = String::new();
        for (c, op) in cmds {
            s.push_str(&c);
            s.push_str(op);
        }
        s.trim_end_matches([' ', '&', '|', ';']).to_owned()
    })
}

/// The command with quotes and backslashes removed: every path must be spelled in it.
fn spelled(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '\'' | '"' | '\\'))
        .collect()
}

fn check_paths(cmd: &str) -> Result<(), TestCaseError> {
    let a = analyze(cmd);
    let text = spelled(cmd);
    for w in &a.writes {
        for seg in spelled(&w.path).split('/').filter(|s| !s.is_empty()) {
            // A brace expansion (`f{,.bak}`) joins pieces the command spells apart: then each
            // segment is at least spelled in order.
            let ok = text.contains(seg) || (cmd.contains('{') && in_order(seg, &text));
            prop_assert!(
                ok,
                "{cmd:?} writes {:?}: {seg:?} is not in the command",
                w.path
            );
        }
    }
    Ok(())
}

/// Whether the characters of `needle` appear in `hay` in that order.
fn in_order(needle: &str, hay: &str) -> bool {
    let mut h = hay.chars();
    needle.chars().all(|c| h.any(|x| x == c))
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(512))]

    #[test]
    fn random_bytes_never_panic(bytes in prop::collection::vec(any::<u8>(), 0..400)) {
        let cmd = String::from_utf8_lossy(&bytes);
        let _ = analyze(&cmd);
    }

    #[test]
    fn random_text_never_panics(cmd in "\\PC{0,200}") {
        let _ = analyze(&cmd);
    }

    #[test]
    fn word_soups_name_only_what_they_spell(cmd in soup()) {
        check_paths(&cmd)?;
    }

    #[test]
    fn commands_name_only_what_they_spell(cmd in commands()) {
        prop_assert_eq!(analyze(&cmd).error, None, "{}", cmd);
        check_paths(&cmd)?;
    }

    #[test]
    fn nested_soups_name_only_what_they_spell(inner in soup(), wrap in 0usize..4) {
        let mut cmd = inner;
        for _ in 0..wrap {
            cmd = format!("bash -c '{}'", cmd.replace('\'', "'\\''"));
        }
        check_paths(&cmd)?;
    }
}

#[test]
fn deep_nesting_is_refused_not_overflowed() {
    // 4,000: just under MAX_SUBSTITUTIONS, tokenized on the big-stack thread.
    for n in [MAX_NESTING + 1, 1_000, 4_000, 20_000] {
        for cmd in [
            format!("{}touch x{}", "(".repeat(n), ")".repeat(n)),
            format!("{}touch x{}", "{ ".repeat(n), "; }".repeat(n)),
            format!("{}touch x{}", "if true; then ".repeat(n), "; fi".repeat(n)),
            format!("echo {}x{}", "$(".repeat(n), ")".repeat(n)),
            format!("echo {}x{}", "\"$(".repeat(n), ")\"".repeat(n)),
            format!("echo {}x{}", "<(".repeat(n), ")".repeat(n)),
            format!("{}touch x", "eval ".repeat(n)),
        ] {
            let a = analyze(&cmd);
            assert!(a.error.is_some(), "n={n}: {}", &cmd[..40.min(cmd.len())]);
        }
    }
}

#[test]
fn deep_parameter_expansions_return() {
    // `${x:-${x:-…}}` holds no command: read without recursion, or refused when too many.
    for n in [MAX_NESTING + 1, 1_000, 20_000] {
        let a = analyze(&format!(
            "echo {}x{} > out",
            "${x:-".repeat(n),
            "}".repeat(n)
        ));
        assert!(a.error.is_some() || a.writes.len() == 1, "n={n}: {a:?}");
    }
}

#[test]
fn nesting_at_the_limit_is_analysed() {
    let n = MAX_NESTING;
    let a = analyze(&format!(
        "{}touch x{}",
        "if true; then ".repeat(n),
        "; fi".repeat(n)
    ));
    assert_eq!(a.error, None);
    assert_eq!(a.writes.len(), 1);
    let a = analyze(&format!("{}touch x{}", "{ ".repeat(n), "; }".repeat(n)));
    assert_eq!(a.error, None);
    assert_eq!(a.writes.len(), 1);
}

#[test]
fn nested_shells_each_near_the_limit_stay_bounded() {
    // Shells inside shells, each nesting as deep as it may: the bound holds across them.
    let per = MAX_NESTING / 2;
    let mut cmd = "touch deep".to_owned();
    for _ in 0..usize::from(MAX_DEPTH) + 2 {
        cmd = format!(
            "{}bash -c {}{}",
            "if true; then ".repeat(per),
            format_args!("'{}'", cmd.replace('\'', "'\\''")),
            "; fi".repeat(per)
        );
        if cmd.len() > MAX_LEN {
            break;
        }
    }
    let a = analyze(&cmd);
    assert!(a.error.is_some(), "{a:?}");
}

#[test]
fn a_megabyte_returns_with_an_error() {
    let cmd = format!("echo {}", "a".repeat(1 << 20));
    let start = std::time::Instant::now();
    let a = analyze(&cmd);
    assert!(a.error.is_some_and(|e| e.contains("too long")));
    // Generous: this is a check that it does not parse, not a benchmark.
    assert!(start.elapsed() < std::time::Duration::from_secs(5));
}
