//! The files a plan's agent declares it will change (`files = ["src/api.rs", "src/net/**"]`):
//! project-relative paths and globs, their checks, and whether two of them can name a common
//! file ([`overlap`]).
//!
//! A pattern is a path relative to the project root, its segments separated by `/`. In a
//! segment, `*` stands for any run of characters (none included, `.` included) and `?` for one;
//! a segment that is exactly `**` stands for any number of segments (none included). Anything
//! else is literal. A pattern covers the paths it matches **and everything under them**, as a
//! lock on a directory covers its files: `src/net` and `src/*` both cover `src/net/tcp.rs`.
//!
//! [`overlap`] is exact for that meaning: two patterns overlap when some path is covered by
//! both. It is conservative about what agents will really touch (a directory named by one and
//! a file under it overlap, `*` matches hidden files, and any name may be a directory, so
//! `**/*.rs` overlaps `docs/guide.md`), never about the patterns themselves.

/// The most patterns one agent may declare.
pub const MAX_FILES: usize = 64;
/// The most patterns a whole plan may declare (comparing every pair costs their product).
pub const MAX_PLAN_FILES: usize = 512;
/// The longest pattern, in bytes.
pub const MAX_PATTERN: usize = 1024;

/// One character of a segment's glob.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Tok {
    Lit(char),
    /// `?`: one character.
    One,
    /// `*`: any run of characters.
    Star,
}

/// One segment of a pattern.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Seg {
    /// `**`: any number of segments.
    Any,
    /// A segment's glob (literal characters, `?`, `*`).
    Glob(Vec<Tok>),
}

/// A checked pattern, in its covering form: its segments with `**` appended (a pattern covers
/// what it matches and everything under it, which is what the pattern followed by `/**`
/// matches).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Pattern {
    segs: Vec<Seg>,
}

/// Check a declared pattern and read it. The error is one sentence about the pattern (the
/// caller says whose it is).
pub fn parse(pattern: &str) -> Result<Pattern, String> {
    if pattern.len() > MAX_PATTERN {
        return Err(format!(
            "is {} bytes long; the limit is {MAX_PATTERN}",
            pattern.len()
        ));
    }
    if pattern.trim().is_empty() {
        return Err("is empty; name a file or a glob (`**` is the whole project)".into());
    }
    if let Some(c) = pattern.chars().find(|c| c.is_control()) {
        return Err(format!("contains the control character {c:?}"));
    }
    if pattern.contains('\\') {
        return Err("contains '\\'; separate directories with '/'".into());
    }
    let bytes = pattern.as_bytes();
    let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
    if pattern.starts_with('/') || pattern.starts_with('~') || drive {
        return Err("is absolute; give it relative to the project root".into());
    }
    if let Some(c) = pattern.chars().find(|c| matches!(c, '[' | ']' | '{' | '}')) {
        return Err(format!(
            "uses {c:?}: character classes and braces are not supported; list each path, or \
             use '*', '?' and '**'"
        ));
    }
    let mut segs = Vec::new();
    for part in pattern.split('/') {
        match part {
            "" | "." => {}
            ".." => {
                return Err("contains '..'; name paths inside the project, from its root".into());
            }
            "**" => {
                // `**/**` is `**`.
                if segs.last() != Some(&Seg::Any) {
                    segs.push(Seg::Any);
                }
            }
            _ if part.contains("**") => {
                return Err(format!(
                    "has {part:?}: '**' must be a whole segment (src/**/test.rs); use '*' \
                     inside a name"
                ));
            }
            _ => segs.push(Seg::Glob(
                part.chars()
                    .map(|c| match c {
                        '*' => Tok::Star,
                        '?' => Tok::One,
                        c => Tok::Lit(c),
                    })
                    .collect(),
            )),
        }
    }
    if segs.is_empty() {
        return Err("names the project root; write `**` for the whole project".into());
    }
    if segs.last() != Some(&Seg::Any) {
        segs.push(Seg::Any);
    }
    Ok(Pattern { segs })
}

#[cfg(test)]
impl Pattern {
    /// Whether the pattern covers this project-relative path (`/`-separated, no `.` or
    /// `..`): it matches the path or one of the directories above it. By brute force (tests).
    pub fn covers(&self, path: &str) -> bool {
        let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
        !parts.is_empty() && segs_match(&self.segs, &parts)
    }
}

/// Whether `segs` matches exactly these path segments.
#[cfg(test)]
fn segs_match(segs: &[Seg], parts: &[&str]) -> bool {
    match segs.split_first() {
        None => parts.is_empty(),
        Some((Seg::Any, rest)) => (0..=parts.len()).any(|k| segs_match(rest, &parts[k..])),
        Some((Seg::Glob(g), rest)) => match parts.split_first() {
            Some((p, more)) => {
                glob_match(g, &p.chars().collect::<Vec<_>>()) && segs_match(rest, more)
            }
            None => false,
        },
    }
}

#[cfg(test)]
fn glob_match(g: &[Tok], s: &[char]) -> bool {
    match g.split_first() {
        None => s.is_empty(),
        Some((Tok::Star, rest)) => (0..=s.len()).any(|k| glob_match(rest, &s[k..])),
        Some((Tok::One, rest)) => !s.is_empty() && glob_match(rest, &s[1..]),
        Some((Tok::Lit(c), rest)) => s.first() == Some(c) && glob_match(rest, &s[1..]),
    }
}

/// Whether some path is covered by both patterns (each covers what it matches and everything
/// under it). Exact, symmetric, O(segments² × segment length²).
pub fn overlap(a: &Pattern, b: &Pattern) -> bool {
    // Both are in covering form (`/**` appended): a path under both is matched by both.
    let (a, b) = (&a.segs, &b.segs);
    // The product of the two patterns as automata over segments: state (i, j) = the next
    // segment of each to match; `**` loops on any segment and may also be skipped.
    reach(a.len(), b.len(), |i, j| {
        let (sa, sb) = (a.get(i), b.get(j));
        let mut out = [None; 3];
        if sa == Some(&Seg::Any) {
            out[0] = Some((i + 1, j));
        }
        if sb == Some(&Seg::Any) {
            out[1] = Some((i, j + 1));
        }
        if let (Some(sa), Some(sb)) = (sa, sb) {
            let fits = match (sa, sb) {
                (Seg::Glob(g), Seg::Glob(h)) => globs_meet(g, h),
                _ => true,
            };
            if fits {
                let next = |s: &Seg, k: usize| if *s == Seg::Any { k } else { k + 1 };
                out[2] = Some((next(sa, i), next(sb, j)));
            }
        }
        out
    })
}

/// Whether two segment globs match a common non-empty name.
fn globs_meet(g: &[Tok], h: &[Tok]) -> bool {
    let literal = |x: &[Tok]| x.iter().all(|t| matches!(t, Tok::Lit(_)));
    if literal(g) && literal(h) {
        return g == h;
    }
    // A common name, if any, can be non-empty: two globs that both match "" are all stars, and
    // then both match "x" too.
    reach(g.len(), h.len(), |i, j| {
        let (tg, th) = (g.get(i), h.get(j));
        let mut out = [None; 3];
        if tg == Some(&Tok::Star) {
            out[0] = Some((i + 1, j));
        }
        if th == Some(&Tok::Star) {
            out[1] = Some((i, j + 1));
        }
        if let (Some(&tg), Some(&th)) = (tg, th) {
            let fits = match (tg, th) {
                (Tok::Lit(c), Tok::Lit(d)) => c == d,
                _ => true,
            };
            if fits {
                let next = |t: Tok, k: usize| if t == Tok::Star { k } else { k + 1 };
                out[2] = Some((next(tg, i), next(th, j)));
            }
        }
        out
    })
}

/// The moves out of a state of a product automaton: at most three.
type Moves = [Option<(usize, usize)>; 3];

/// Whether (la, lb) is reachable from (0, 0) by `moves` (states (i, j) with i ≤ la, j ≤ lb).
fn reach(la: usize, lb: usize, moves: impl Fn(usize, usize) -> Moves) -> bool {
    let width = lb + 1;
    let mut seen = vec![false; (la + 1) * width];
    let mut todo = Vec::with_capacity(la + lb + 2);
    todo.push((0, 0));
    while let Some((i, j)) = todo.pop() {
        if (i, j) == (la, lb) {
            return true;
        }
        match seen.get_mut(i * width + j) {
            Some(s) if !*s => *s = true,
            _ => continue,
        }
        for (ni, nj) in moves(i, j).into_iter().flatten() {
            if ni <= la && nj <= lb && !seen[ni * width + nj] {
                todo.push((ni, nj));
            }
        }
    }
    false
}

/// The declared files of a session's agents that did not come through a plan file's checks
/// (an imported session's specs): the same bounds as a plan's (at most [`MAX_FILES`] an agent,
/// [`MAX_PLAN_FILES`] in all, each a pattern [`parse`] accepts), or what is wrong.
pub fn check_declared<'a>(agents: impl IntoIterator<Item = &'a [String]>) -> Result<(), String> {
    let mut total = 0;
    for files in agents {
        if files.len() > MAX_FILES {
            return Err(format!(
                "an agent declares {} files; the limit is {MAX_FILES}",
                files.len()
            ));
        }
        total += files.len();
        if total > MAX_PLAN_FILES {
            return Err(format!(
                "the agents declare more than {MAX_PLAN_FILES} files in all"
            ));
        }
        if let Some((f, e)) = files.iter().find_map(|f| parse(f).err().map(|e| (f, e))) {
            return Err(format!(
                "a declared file {:?} {e}",
                crate::text::clip(f, 80)
            ));
        }
    }
    Ok(())
}

/// The pairs of one list's and another's patterns that overlap (as written), for messages.
/// Patterns that do not parse are left out (plans are checked before).
pub fn overlapping<'a>(a: &'a [String], b: &'a [String]) -> Vec<(&'a str, &'a str)> {
    let pb: Vec<(&str, Pattern)> = b
        .iter()
        .filter_map(|s| parse(s).ok().map(|p| (s.as_str(), p)))
        .collect();
    let mut out = Vec::new();
    for s in a {
        let Ok(p) = parse(s) else { continue };
        for (t, q) in &pb {
            if overlap(&p, q) {
                out.push((s.as_str(), *t));
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declared_files_from_outside_are_held_to_a_plans_bounds() {
        let ok = vec!["src/**".to_string()];
        assert_eq!(check_declared([ok.as_slice()]), Ok(()));
        let many: Vec<String> = (0..=MAX_FILES).map(|i| format!("f{i}")).collect();
        let e = check_declared([many.as_slice()]).unwrap_err();
        assert!(e.contains("the limit is 64"), "{e}");
        let some: Vec<String> = (0..MAX_FILES).map(|i| format!("f{i}")).collect();
        let nine = vec![some.as_slice(); 9];
        let e = check_declared(nine).unwrap_err();
        assert!(e.contains("more than 512"), "{e}");
        let bad = vec!["../etc/passwd".to_string()];
        let e = check_declared([bad.as_slice()]).unwrap_err();
        assert!(e.contains("../etc/passwd"), "{e}");
    }

    fn p(s: &str) -> Pattern {
        match parse(s) {
            Ok(p) => p,
            Err(e) => panic!("{s:?}: {e}"),
        }
    }

    fn ov(a: &str, b: &str) -> bool {
        let r = overlap(&p(a), &p(b));
        assert_eq!(r, overlap(&p(b), &p(a)), "{a} / {b}: not symmetric");
        r
    }

    #[test]
    fn overlaps() {
        assert!(ov("src/api.rs", "src/api.rs"));
        assert!(ov("src/api.rs", "./src//api.rs"));
        assert!(!ov("src/api.rs", "src/net.rs"));
        assert!(ov("src/net/**", "src/net/tcp.rs"));
        assert!(
            ov("src/net", "src/net/tcp.rs"),
            "a directory covers its files"
        );
        assert!(ov("src/*", "src/net/tcp.rs"));
        assert!(!ov("src/*.rs", "src/net/tcp.rs"));
        assert!(ov("src/*.rs", "src/n*"));
        assert!(ov("src/a*.rs", "src/*b.rs"));
        assert!(!ov("src/a*.rs", "src/*.toml"));
        assert!(ov("**/*.rs", "docs/x/y.rs"));
        // `docs/x/y.md` may be a directory: `docs/x/y.md/z.rs` is under both.
        assert!(ov("**/*.rs", "docs/x/y.md"));
        assert!(!ov("src/**/*.rs", "docs/x/y.md"));
        assert!(ov("**/*.rs", "docs"), "docs may hold .rs files");
        assert!(ov("**", "anything"));
        assert!(ov("a/?/c", "a/b"));
        assert!(!ov("a/??/c", "a/b"));
        assert!(!ov("a/**/c.rs", "b/**"));
        assert!(ov("a/**/c.rs", "*/x/**/c.rs"));
        assert!(!ov("tests/**", "src/**"));
    }

    #[test]
    fn covers() {
        assert!(p("src/net").covers("src/net/tcp.rs"));
        assert!(p("src/**/mod.rs").covers("src/mod.rs"));
        assert!(p("src/**/mod.rs").covers("src/a/b/mod.rs"));
        assert!(!p("src/*.rs").covers("src/a/b.rs"));
        assert!(p("*").covers(".hidden"));
    }

    #[test]
    fn refused() {
        for (bad, says) in [
            ("", "empty"),
            ("  ", "empty"),
            ("/etc/passwd", "absolute"),
            ("C:/x", "absolute"),
            ("~/x", "absolute"),
            ("src/../../x", "'..'"),
            ("..", "'..'"),
            ("src\\x.rs", "'\\'"),
            ("src/[ab].rs", "character classes"),
            ("src/{a,b}.rs", "braces"),
            ("src/a**.rs", "whole segment"),
            (".", "project root"),
            ("./", "project root"),
            ("a\u{7}b", "control"),
        ] {
            match parse(bad) {
                Ok(_) => panic!("{bad:?} was accepted"),
                Err(e) => assert!(e.contains(says), "{bad:?}: {e}"),
            }
        }
        let long = "a/".repeat(MAX_PATTERN);
        assert!(parse(&long).is_err_and(|e| e.contains("limit")));
    }

    /// A segment of a generated pattern: up to two of `a`, `b`, `?`, `*`, or `**`.
    fn seg() -> impl proptest::strategy::Strategy<Value = String> {
        use proptest::prelude::*;
        prop_oneof![
            1 => Just("**".to_owned()),
            6 => proptest::collection::vec(prop_oneof![Just('a'), Just('b'), Just('?'), Just('*')], 1..=2)
                .prop_map(|cs| cs.into_iter().collect::<String>()),
        ]
    }

    /// Every path of 1 to 4 segments, each 1 or 2 of `a`, `b`, `c`.
    fn paths() -> Vec<String> {
        let mut names = Vec::new();
        for x in ["a", "b", "c"] {
            names.push(x.to_owned());
            for y in ["a", "b", "c"] {
                names.push(format!("{x}{y}"));
            }
        }
        let mut out: Vec<String> = names.clone();
        let mut last = names.clone();
        for _ in 1..4 {
            let mut next = Vec::new();
            for p in &last {
                for n in &names {
                    next.push(format!("{p}/{n}"));
                }
            }
            out.extend(next.iter().cloned());
            last = next;
        }
        out
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig::with_cases(96))]
        /// `overlap` says what a brute-force search says: a path covered by both. Patterns of
        /// at most two segments of at most two characters have a witness among `paths()`
        /// when they overlap (a segment of two characters, four segments).
        #[test]
        fn overlap_is_exact(
            a in proptest::collection::vec(seg(), 1..=2),
            b in proptest::collection::vec(seg(), 1..=2),
        ) {
            let (a, b) = (a.join("/"), b.join("/"));
            let (pa, pb) = (p(&a), p(&b));
            let brute = paths().iter().any(|z| pa.covers(z) && pb.covers(z));
            proptest::prop_assert_eq!(overlap(&pa, &pb), brute, "{} / {}", a, b);
            proptest::prop_assert_eq!(overlap(&pa, &pb), overlap(&pb, &pa));
            proptest::prop_assert!(overlap(&pa, &pa));
        }
    }

    #[test]
    fn overlapping_pairs() {
        let a = vec!["src/api.rs".to_owned(), "docs/**".to_owned()];
        let b = vec!["src/**".to_owned(), "tests/x.rs".to_owned()];
        assert_eq!(overlapping(&a, &b), vec![("src/api.rs", "src/**")]);
    }
}
