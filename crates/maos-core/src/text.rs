//! Text made to fit on one line, three ways, each for its reader:
//!
//! - [`escape_controls`]: an error message that quotes what it was sent (a request name, a
//!   TOML key, a path) keeps every character, with the control characters written as escapes
//!   (`\n`, `\t`, `\u{1b}`), so the quoted text is still exact and the message one line;
//! - [`collapse_whitespace`]: a person's text (a task, a reason, a note) in a sentence, its
//!   runs of white space one space, and [`clip`] (or both: [`collapse_and_clip`]) to keep it
//!   short;
//! - [`first_line`]: a multi-line text (a todo, a task) shown by its first line.
//!
//! And [`cut_bytes`]: a long text (a diff) cut to a byte budget, saying it was cut.
//!
//! For a terminal, see [`crate::term`]: it escapes more (bidirectional controls) and in a
//! form without `\`.

/// `text` with each control character written as its escape (`\n`, `\r`, `\t`, `\u{1b}`),
/// everything else left as it is.
pub fn escape_controls(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `text` with its leading and trailing white space dropped and every inner run of white
/// space (newlines, tabs, Unicode spaces) made one space.
pub fn collapse_whitespace(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// At most `max` characters: `text` as it is when it fits, else its first `max - 1`
/// characters and "…".
pub fn clip(text: &str, max: usize) -> String {
    if text.chars().count() <= max {
        return text.to_string();
    }
    let mut out: String = text.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// `text` on one line and short: [`collapse_whitespace`], then [`clip`] to `max` characters
/// (a task, a reason or a note quoted in a sentence).
pub fn collapse_and_clip(text: &str, max: usize) -> String {
    clip(&collapse_whitespace(text), max)
}

/// The first line of `text`, trimmed ("" for an empty text).
pub fn first_line(text: &str) -> &str {
    text.lines().next().unwrap_or("").trim()
}

/// `text` cut to at most `max` bytes, at a character's boundary, with `marker` appended when
/// it was cut (a diff or a hunk quoted in an answer of bounded size); true when it was cut.
pub fn cut_bytes(text: &mut String, max: usize, marker: &str) -> bool {
    if text.len() <= max {
        return false;
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    text.truncate(end);
    text.push_str(marker);
    true
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn a_cut_keeps_whole_characters_and_says_so() {
        let mut t = "aé".to_string(); // 3 bytes: 'é' is two
        assert!(cut_bytes(&mut t, 2, "[cut]"));
        assert_eq!(t, "a[cut]");
        let mut short = "abc".to_string();
        assert!(!cut_bytes(&mut short, 3, "[cut]"));
        assert_eq!(short, "abc");
    }

    #[test]
    fn controls_are_escaped_and_the_rest_kept() {
        assert_eq!(escape_controls("a\tb\r\nc é ✓"), r"a\tb\r\nc é ✓");
        assert_eq!(escape_controls("\u{1b}[2J\u{7f}"), r"\u{1b}[2J\u{7f}");
        assert_eq!(escape_controls("plain \\ text"), "plain \\ text");
    }

    #[test]
    fn white_space_runs_become_one_space() {
        assert_eq!(collapse_whitespace(" a\n  b\tc "), "a b c");
        assert_eq!(collapse_whitespace("a\u{a0}\u{2003}b"), "a b");
        assert_eq!(collapse_whitespace(" \n\t "), "");
    }

    #[test]
    fn a_clipped_text_ends_in_an_ellipsis_within_the_limit() {
        assert_eq!(clip("abc", 3), "abc");
        assert_eq!(clip("abcd", 3), "ab…");
        assert_eq!(clip("ééééé", 4), "ééé…");
        assert_eq!(clip("", 0), "");
        assert_eq!(
            collapse_and_clip(" the\n  schema   first ", 10),
            "the schem…"
        );
        assert_eq!(collapse_and_clip(" the\n  schema ", 10), "the schema");
    }

    #[test]
    fn the_first_line_is_trimmed() {
        assert_eq!(
            first_line("  fix the build \nthen the docs"),
            "fix the build"
        );
        assert_eq!(first_line("\nsecond"), "");
        assert_eq!(first_line(""), "");
    }

    proptest! {
        /// The escaped form is one line with no control character, and nothing is lost:
        /// a text without controls comes back as it was.
        #[test]
        fn escaped_text_has_no_control_character(s in "(?s).*") {
            let e = escape_controls(&s);
            prop_assert!(!e.chars().any(char::is_control), "{e:?}");
            prop_assert_eq!(e.chars().count() >= s.chars().count(), true);
            if !s.chars().any(char::is_control) {
                prop_assert_eq!(&e, &s);
            }
        }

        /// Collapsed text has no white space but single inner spaces, and the same words.
        #[test]
        fn collapsed_text_keeps_the_words(s in "(?s).*") {
            let c = collapse_whitespace(&s);
            prop_assert!(!c.contains("  ") && c.trim() == c, "{c:?}");
            prop_assert!(!c.chars().any(|ch| ch.is_whitespace() && ch != ' '), "{c:?}");
            prop_assert_eq!(
                c.split(' ').filter(|w| !w.is_empty()).collect::<Vec<_>>(),
                s.split_whitespace().collect::<Vec<_>>()
            );
        }

        /// A clipped text is at most `max` characters and a prefix of the text (but for the
        /// ellipsis), and untouched when it fits.
        #[test]
        fn clipped_text_fits(s in "(?s).{0,40}", max in 1usize..50) {
            let c = clip(&s, max);
            prop_assert!(c.chars().count() <= max);
            match c.strip_suffix('…') {
                Some(head) if c != s => prop_assert!(s.starts_with(head)),
                _ => prop_assert_eq!(&c, &s),
            }
        }
    }
}
