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
//! A name needs at most [`MAX_NAME`] bytes (its literal characters, and one for each `?`) and
//! holds at most [`MAX_STARS`] `*`; a pattern holds at most [`MAX_ANY`] `**`.
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
/// The longest file name, in bytes (`NAME_MAX` on Linux and macOS): a segment whose literal
/// characters and `?` need more can match no file.
pub const MAX_NAME: usize = 255;
/// The most `*` in one segment.
pub const MAX_STARS: usize = 8;
/// The most `**` segments in one pattern.
pub const MAX_ANY: usize = 8;
/// The most steps comparing the declared files of every two agents of one plan (or session)
/// may take ([`Work`]): about 0.1 to 0.3 s of the project actor's time on a 2-core machine, 4
/// times what the largest plans of ordinary patterns take (512 files, ~2 million steps).
pub const MAX_WORK: u64 = 8_000_000;

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
            _ => {
                let stars = part.matches('*').count();
                if stars > MAX_STARS {
                    return Err(format!(
                        "has {stars} '*' in one name ({:?}); the limit is {MAX_STARS}",
                        crate::text::clip(part, 40)
                    ));
                }
                // Bytes a name needs: its literal characters, and one at least for each '?'.
                let needs = part.len() - stars;
                if needs > MAX_NAME {
                    return Err(format!(
                        "has a name that needs {needs} bytes ({:?}); a file name is at most \
                         {MAX_NAME}, so it matches no file",
                        crate::text::clip(part, 40)
                    ));
                }
                segs.push(glob(part));
            }
        }
    }
    let any = segs.iter().filter(|s| **s == Seg::Any).count();
    if any > MAX_ANY {
        return Err(format!("has {any} '**' segments; the limit is {MAX_ANY}"));
    }
    if segs.is_empty() {
        return Err("names the project root; write `**` for the whole project".into());
    }
    if segs.last() != Some(&Seg::Any) {
        segs.push(Seg::Any);
    }
    Ok(Pattern { segs })
}

/// A name's glob, read.
fn glob(part: &str) -> Seg {
    Seg::Glob(
        part.chars()
            .map(|c| match c {
                '*' => Tok::Star,
                '?' => Tok::One,
                c => Tok::Lit(c),
            })
            .collect(),
    )
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

/// A segment of a generated pattern: up to two of `a`, `b`, `?`, `*`, or `**`.
#[cfg(test)]
pub(crate) fn seg() -> impl proptest::strategy::Strategy<Value = String> {
    use proptest::prelude::*;
    prop_oneof![
        1 => Just("**".to_owned()),
        6 => proptest::collection::vec(prop_oneof![Just('a'), Just('b'), Just('?'), Just('*')], 1..=2)
            .prop_map(|cs| cs.into_iter().collect::<String>()),
    ]
}

/// Every path of 1 to 4 segments, each 1 or 2 of `a`, `b`, `c`.
#[cfg(test)]
pub(crate) fn paths() -> Vec<String> {
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
/// under it). Exact and symmetric; without a budget (for one pair: at most the product of the
/// two patterns' lengths, squared). Comparing many pairs goes through a [`Work`].
pub fn overlap(a: &Pattern, b: &Pattern) -> bool {
    !matches!(Work::new(u64::MAX).overlap(a, b), Ok(false))
}

/// Comparing patterns within a budget of steps. A step is one state of a product automaton
/// visited (two patterns' segments, or two segments' characters, paired), one literal
/// character compared, or one comparison begun; the time a comparison takes is proportional to
/// its steps (the visited tables are reused, never cleared, so no step is left uncounted).
/// The same comparisons always take the same steps.
#[derive(Debug)]
pub struct Work {
    steps: Steps,
    segs: Seen,
    toks: Seen,
}

/// A comparison would take more than its budget of steps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct OverBudget;

#[derive(Debug)]
struct Steps {
    used: u64,
    limit: u64,
}

impl Steps {
    fn spend(&mut self, n: u64) -> Result<(), OverBudget> {
        self.used = self.used.saturating_add(n);
        if self.used > self.limit {
            return Err(OverBudget);
        }
        Ok(())
    }
}

impl Work {
    /// A budget of `limit` steps.
    pub fn new(limit: u64) -> Work {
        Work {
            steps: Steps { used: 0, limit },
            segs: Seen::default(),
            toks: Seen::default(),
        }
    }

    /// The steps taken so far.
    pub fn steps(&self) -> u64 {
        self.steps.used
    }

    /// [`overlap`], counting its steps: `Err` once the budget is spent (the answer is then
    /// unknown).
    pub fn overlap(&mut self, a: &Pattern, b: &Pattern) -> Result<bool, OverBudget> {
        // Both are in covering form (`/**` appended): a path under both is matched by both.
        // The product of the two patterns as automata over segments: `**` loops on any
        // segment and may also be skipped.
        let Work { steps, segs, toks } = self;
        meet(
            segs,
            steps,
            &a.segs,
            &b.segs,
            |x| *x == Seg::Any,
            |x, y, steps| match (x, y) {
                (Seg::Glob(g), Seg::Glob(h)) => globs_meet(toks, steps, g, h),
                _ => Ok(true),
            },
        )
    }
}

/// Whether two segment globs match a common non-empty name.
fn globs_meet(
    seen: &mut Seen,
    steps: &mut Steps,
    g: &[Tok],
    h: &[Tok],
) -> Result<bool, OverBudget> {
    let literal = |x: &[Tok]| x.iter().all(|t| matches!(t, Tok::Lit(_)));
    if literal(g) && literal(h) {
        steps.spend(1 + g.len().min(h.len()) as u64)?;
        return Ok(g == h);
    }
    // A common name, if any, can be non-empty: two globs that both match "" are all stars, and
    // then both match "x" too. `*` loops on any character and may also be skipped.
    meet(
        seen,
        steps,
        g,
        h,
        |t| *t == Tok::Star,
        |x, y, _| match (x, y) {
            (Tok::Lit(c), Tok::Lit(d)) => Ok(c == d),
            _ => Ok(true),
        },
    )
}

/// Whether two sequences (of segments, or of a name's characters) match something in common,
/// through the product of their automata: state (i, j) = the next element of each to match;
/// an element that `loops` (`**`, `*`) matches any run, none included; two others move on
/// together when they `fit`.
fn meet<T>(
    seen: &mut Seen,
    steps: &mut Steps,
    a: &[T],
    b: &[T],
    loops: impl Fn(&T) -> bool,
    mut fit: impl FnMut(&T, &T, &mut Steps) -> Result<bool, OverBudget>,
) -> Result<bool, OverBudget> {
    reach(seen, steps, a.len(), b.len(), |i, j, steps| {
        let (x, y) = (a.get(i), b.get(j));
        let mut out = [None; 3];
        if x.is_some_and(&loops) {
            out[0] = Some((i + 1, j));
        }
        if y.is_some_and(&loops) {
            out[1] = Some((i, j + 1));
        }
        if let (Some(x), Some(y)) = (x, y)
            && fit(x, y, steps)?
        {
            let next = |t: &T, k: usize| if loops(t) { k } else { k + 1 };
            out[2] = Some((next(x, i), next(y, j)));
        }
        Ok(out)
    })
}

/// The moves out of a state of a product automaton: at most three.
type Moves = [Option<(usize, usize)>; 3];

/// A product automaton's visited states and stack, kept from one comparison to the next: a
/// state is visited when its stamp is the current comparison's, so nothing is cleared between
/// comparisons.
#[derive(Debug, Default)]
struct Seen {
    stamp: Vec<u32>,
    now: u32,
    todo: Vec<(usize, usize)>,
}

impl Seen {
    /// Begin a comparison over `size` states.
    fn begin(&mut self, size: usize) {
        if self.stamp.len() < size {
            self.stamp.resize(size, 0);
        }
        self.now = self.now.wrapping_add(1);
        if self.now == 0 {
            self.stamp.fill(0);
            self.now = 1;
        }
        self.todo.clear();
    }
}

/// Whether (la, lb) is reachable from (0, 0) by `moves` (states (i, j) with i ≤ la, j ≤ lb),
/// one step per state visited and one to begin.
fn reach(
    seen: &mut Seen,
    steps: &mut Steps,
    la: usize,
    lb: usize,
    mut moves: impl FnMut(usize, usize, &mut Steps) -> Result<Moves, OverBudget>,
) -> Result<bool, OverBudget> {
    let width = lb + 1;
    seen.begin((la + 1) * width);
    steps.spend(1)?;
    seen.todo.push((0, 0));
    while let Some((i, j)) = seen.todo.pop() {
        if (i, j) == (la, lb) {
            return Ok(true);
        }
        match seen.stamp.get_mut(i * width + j) {
            Some(s) if *s != seen.now => *s = seen.now,
            _ => continue,
        }
        steps.spend(1)?;
        for (ni, nj) in moves(i, j, steps)?.into_iter().flatten() {
            if ni <= la && nj <= lb && seen.stamp[ni * width + nj] != seen.now {
                seen.todo.push((ni, nj));
            }
        }
    }
    Ok(false)
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

    /// Bounds that make sense for file names, each at its edge: a name of 255 bytes, 8 `*` in a
    /// name, 8 `**` in a pattern.
    #[test]
    fn bounds_of_a_name() {
        let name = "a".repeat(MAX_NAME - 2) + "?.";
        assert!(parse(&format!("src/{name}")).is_ok());
        let e = parse(&format!("src/{name}x")).unwrap_err();
        assert!(
            e.starts_with("has a name that needs 256 bytes (") && e.ends_with("matches no file"),
            "{e}"
        );
        // A multi-byte character counts its bytes; '*' counts none.
        assert!(parse(&"é".repeat(127)).is_ok());
        assert!(parse(&"é".repeat(128)).is_err_and(|e| e.contains("needs 256 bytes")));
        assert!(parse(&format!("*{}*", "a".repeat(MAX_NAME))).is_ok());
        let stars = "*a".repeat(MAX_STARS);
        assert!(parse(&stars).is_ok());
        assert_eq!(
            parse(&format!("src/{stars}*")),
            Err(format!(
                "has 9 '*' in one name (\"{stars}*\"); the limit is {MAX_STARS}"
            ))
        );
        let any = "**/a/".repeat(MAX_ANY);
        assert!(parse(&any).is_ok());
        // `**/**` is one `**`.
        assert!(parse(&"**/**/a/".repeat(MAX_ANY)).is_ok_and(|p| p.segs.len() == 2 * MAX_ANY + 1));
        assert_eq!(
            parse(&format!("{any}**/b")),
            Err(format!("has 9 '**' segments; the limit is {MAX_ANY}"))
        );
    }

    /// What a comparison costs is counted, and a budget stops it: two patterns within every
    /// bound of one pattern whose product automaton has ~46,000 states (before these bounds, two
    /// of 1,023 bytes had a million, and a plan may compare 114,688 pairs), and the budget cuts
    /// the count where it says.
    #[test]
    fn work_is_counted_and_bounded() {
        let a = format!("*{}{}", "a*".repeat(MAX_STARS - 1), "a".repeat(200));
        let b = format!("*{}{}b", "a*".repeat(MAX_STARS - 1), "a".repeat(199));
        let (pa, pb) = (p(&a), p(&b));
        let mut w = Work::new(u64::MAX);
        assert_eq!(w.overlap(&pa, &pb), Ok(false));
        let cost = w.steps();
        assert!((40_000..60_000).contains(&cost), "{cost} steps");
        // The same comparison costs the same again, and both ways.
        assert_eq!(w.overlap(&pb, &pa), Ok(false));
        assert_eq!(w.steps(), 2 * cost);
        for limit in [0, 1, cost / 2, cost - 1] {
            let mut w = Work::new(limit);
            assert_eq!(w.overlap(&pa, &pb), Err(OverBudget), "{limit}");
            assert_eq!(w.steps(), limit + 1, "stops at the first step over");
        }
        assert_eq!(Work::new(cost).overlap(&pa, &pb), Ok(false));
        // The largest names before this bound: a million states for one pair.
        let old = |c: char| format!("src/{}", format!("*{c}").repeat(509));
        let mut w = Work::new(u64::MAX);
        let (x, y) = (old('a'), old('b'));
        let (px, py) = (parse_unbounded(&x), parse_unbounded(&y));
        assert_eq!(w.overlap(&px, &py), Ok(false));
        assert!(w.steps() > 1_000_000, "{}", w.steps());
        assert!(parse(&x).is_err());
        // Literal names cost their length, not its square.
        let mut w = Work::new(u64::MAX);
        let name = "n".repeat(MAX_NAME);
        assert_eq!(w.overlap(&p(&name), &p(&name)), Ok(true));
        assert!(w.steps() < 3 * MAX_NAME as u64, "{}", w.steps());
    }

    /// A pattern read without the bounds of a name (the largest patterns before them).
    fn parse_unbounded(s: &str) -> Pattern {
        let mut segs: Vec<Seg> = s
            .split('/')
            .map(|part| match part {
                "**" => Seg::Any,
                _ => glob(part),
            })
            .collect();
        segs.push(Seg::Any);
        Pattern { segs }
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
}
