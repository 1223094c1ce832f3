//! The conflicting regions of a merged file, read from git's conflict markers (the `diff3`
//! style, which also shows the base; the plain style is read too).

use maos_core::radar::RadarHunk;

/// Which part of a region a line belongs to.
#[derive(Clone, Copy, PartialEq)]
enum Part {
    A,
    Base,
    B,
}

/// The marker a line is, for markers `n` characters long (`<<<<<<< label`, `|||||||`,
/// `=======`, `>>>>>>> label`): git writes `n` marker characters, then a space and a label or
/// nothing (`=======` never has a label).
fn marker(line: &str, c: char, n: usize) -> bool {
    let mut chars = line.chars();
    for _ in 0..n {
        if chars.next() != Some(c) {
            return false;
        }
    }
    match chars.next() {
        None => true,
        Some(' ') => c != '=',
        Some(_) => false,
    }
}

/// The length of the opening marker a line starts with (7 or more `<`), if it is one.
fn opening(line: &str) -> Option<usize> {
    let n = line.chars().take_while(|&c| c == '<').count();
    (n >= 7 && marker(line, '<', n)).then_some(n)
}

/// Every complete conflicting region of `text`, in order. A region left open at the end of the
/// text is not one (git never writes such a thing; a file that merely contains marker-like
/// lines is read as it is).
pub fn hunks(text: &str) -> Vec<RadarHunk> {
    let mut out = Vec::new();
    let mut open: Option<(usize, u32, Part, String, Option<String>, String)> = None;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        let bare = line.strip_suffix('\n').unwrap_or(line);
        let bare = bare.strip_suffix('\r').unwrap_or(bare);
        let number = u32::try_from(i + 1).unwrap_or(u32::MAX);
        match &mut open {
            None => {
                if let Some(n) = opening(bare) {
                    open = Some((n, number, Part::A, String::new(), None, String::new()));
                }
            }
            Some((n, start, part, a, base, b)) => {
                let n = *n;
                if *part == Part::A && marker(bare, '|', n) {
                    *part = Part::Base;
                    *base = Some(String::new());
                } else if *part != Part::B && marker(bare, '=', n) {
                    *part = Part::B;
                } else if *part == Part::B && marker(bare, '>', n) {
                    out.push(RadarHunk {
                        line: *start,
                        a: std::mem::take(a),
                        base: base.take(),
                        b: std::mem::take(b),
                    });
                    open = None;
                } else {
                    match part {
                        Part::A => a.push_str(line),
                        Part::Base => base.get_or_insert_with(String::new).push_str(line),
                        Part::B => b.push_str(line),
                    }
                }
            }
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn diff3_region_with_base() {
        let text = "a\n<<<<<<< ours\nB1\n||||||| base\nb\n=======\nB2\n>>>>>>> theirs\nc\n";
        assert_eq!(
            hunks(text),
            vec![RadarHunk {
                line: 2,
                a: "B1\n".into(),
                base: Some("b\n".into()),
                b: "B2\n".into()
            }]
        );
    }

    #[test]
    fn plain_region_and_two_regions() {
        let text = "<<<<<<< x\n1\n=======\n2\n>>>>>>> y\nmid\n<<<<<<< x\n=======\n3\n>>>>>>> y\n";
        let h = hunks(text);
        assert_eq!(h.len(), 2);
        assert_eq!(
            (h[0].line, h[0].a.as_str(), h[0].b.as_str()),
            (1, "1\n", "2\n")
        );
        assert_eq!(h[0].base, None);
        assert_eq!(
            (h[1].line, h[1].a.as_str(), h[1].b.as_str()),
            (7, "", "3\n")
        );
    }

    #[test]
    fn longer_markers_and_lookalikes() {
        // A conflict-marker-size of 9: the 7-long lines inside are content.
        let text = "<<<<<<<<< a\n<<<<<<< not\n=========\n=======\n>>>>>>>>> b\n";
        let h = hunks(text);
        assert_eq!(h.len(), 1);
        assert_eq!(h[0].a, "<<<<<<< not\n");
        assert_eq!(h[0].b, "=======\n");
        // Not markers: a label on `=======`, an eighth character, an unterminated region.
        assert!(hunks("<<<<<<<x\n=======\n>>>>>>> b\n").is_empty());
        assert!(hunks("<<<<<<< a\n1\n=======\n2\n").is_empty());
        assert!(hunks("======= x\n").is_empty());
    }

    #[test]
    fn crlf_and_no_final_newline() {
        let text = "<<<<<<< a\r\n1\r\n=======\r\n2\r\n>>>>>>> b";
        let h = hunks(text);
        assert_eq!(h.len(), 1);
        assert_eq!((h[0].a.as_str(), h[0].b.as_str()), ("1\r\n", "2\r\n"));
    }

    /// A line that no marker could be mistaken for.
    fn plain_line() -> impl Strategy<Value = String> {
        "[a-z <=>|é\t]{0,12}".prop_filter("not a marker", |l| {
            !(l.starts_with("<<<<<<<")
                || l.starts_with("|||||||")
                || l.starts_with("=======")
                || l.starts_with(">>>>>>>"))
        })
    }

    fn lines() -> impl Strategy<Value = Vec<String>> {
        proptest::collection::vec(plain_line(), 0..4)
    }

    fn joined(lines: &[String]) -> String {
        lines.iter().map(|l| format!("{l}\n")).collect()
    }

    proptest! {
        /// Text made of clean lines and regions reads back as exactly those regions, at their
        /// lines.
        #[test]
        fn regions_read_back(parts in proptest::collection::vec(
            (lines(), lines(), proptest::option::of(lines()), lines()), 0..5)) {
            let mut text = String::new();
            let mut line = 1u32;
            let mut expected = Vec::new();
            for (clean, a, base, b) in &parts {
                text.push_str(&joined(clean));
                line += clean.len() as u32;
                expected.push(RadarHunk {
                    line,
                    a: joined(a),
                    base: base.as_ref().map(|l| joined(l)),
                    b: joined(b),
                });
                text.push_str("<<<<<<< ours\n");
                text.push_str(&joined(a));
                if let Some(base) = base {
                    text.push_str("||||||| base\n");
                    text.push_str(&joined(base));
                }
                text.push_str("=======\n");
                text.push_str(&joined(b));
                text.push_str(">>>>>>> theirs\n");
                line += 3 + a.len() as u32 + b.len() as u32
                    + base.as_ref().map_or(0, |l| 1 + l.len() as u32);
            }
            prop_assert_eq!(hunks(&text), expected);
        }

        /// Any text at all: no panic, and every region starts on a line of the text.
        #[test]
        fn never_panics(text in "(<{7}|={7}|>{7}|\\|{7}| |[a-z]|\n|\r){0,60}") {
            let count = text.split_inclusive('\n').count() as u32;
            for h in hunks(&text) {
                prop_assert!(h.line >= 1 && h.line <= count);
            }
        }
    }
}
