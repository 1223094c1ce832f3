//! Text from outside (an agent's prompt, a task, an objective, a note, a file's name, an
//! event's data) made safe to print on a terminal. A terminal obeys what it is sent: an ESC
//! sequence clears the screen, moves the cursor or sets the window's title, a carriage return
//! rewrites the line, a newline fakes a row, a bidirectional override shows text reversed. So
//! every human view shows such characters escaped, visibly, and keeps the rest as it is:
//!
//! - C0 controls and DEL in caret notation, as `cat -v` does: ESC is `^[`, CR `^M`, LF `^J`,
//!   TAB `^I`, NUL `^@`, DEL `^?` (the layout's own newlines are the renderer's, never the
//!   data's);
//! - C1 controls (U+0080 to U+009F, CSI among them), the bidirectional controls (U+061C,
//!   U+200E, U+200F, U+202A to U+202E, U+2066 to U+2069) and the line and paragraph
//!   separators (U+2028, U+2029) as `<U+XXXX>`.
//!
//! Neither form has a `/` or `\`, so an escaped path is still a path (a lock key splits on
//! both). `--json` output never goes through this: JSON keeps the text exact.

use std::borrow::Cow;

/// True for a character that must not reach a terminal as it is.
pub fn is_unsafe(c: char) -> bool {
    c < ' '
        || c == '\x7f'
        || ('\u{80}'..='\u{9f}').contains(&c)
        || matches!(
            c,
            '\u{061c}'
                | '\u{200e}'
                | '\u{200f}'
                | '\u{202a}'..='\u{202e}'
                | '\u{2066}'..='\u{2069}'
                | '\u{2028}'
                | '\u{2029}'
        )
}

/// `s` with every character of [`is_unsafe`] escaped (see the module); `s` itself when it has
/// none.
pub fn safe(s: &str) -> Cow<'_, str> {
    let Some(first) = s.find(is_unsafe) else {
        return Cow::Borrowed(s);
    };
    let mut out = String::with_capacity(s.len() + 8);
    out.push_str(&s[..first]);
    for c in s[first..].chars() {
        push_safe(&mut out, c);
    }
    Cow::Owned(out)
}

fn push_safe(out: &mut String, c: char) {
    match c {
        '\x7f' => out.push_str("^?"),
        c if c < ' ' => {
            out.push('^');
            out.push(char::from(c as u8 + 0x40));
        }
        c if is_unsafe(c) => {
            out.push_str(&format!("<U+{:04X}>", c as u32));
        }
        c => out.push(c),
    }
}

/// Every string of `v`, object keys included, made [`safe`].
pub fn safe_json(v: &mut serde_json::Value) {
    use serde_json::Value;
    match v {
        Value::String(s) => {
            if let Cow::Owned(t) = safe(s) {
                *s = t;
            }
        }
        Value::Array(items) => items.iter_mut().for_each(safe_json),
        Value::Object(map) => {
            if map.keys().any(|k| k.contains(is_unsafe)) {
                let old = std::mem::take(map);
                for (k, mut item) in old {
                    safe_json(&mut item);
                    map.insert(safe(&k).into_owned(), item);
                }
            } else {
                map.values_mut().for_each(safe_json);
            }
        }
        Value::Null | Value::Bool(_) | Value::Number(_) => {}
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn each_kind_of_control_has_its_visible_form() {
        for (input, shown) in [
            ("\x1b[2J", "^[[2J"),
            ("a\rb", "a^Mb"),
            ("a\nb", "a^Jb"),
            ("a\tb", "a^Ib"),
            ("\0", "^@"),
            ("\x07", "^G"),
            ("\x1f", "^_"),
            ("\x7f", "^?"),
            ("\u{9b}31m", "<U+009B>31m"),
            ("\u{85}", "<U+0085>"),
            ("\u{202e}gnp.exe", "<U+202E>gnp.exe"),
            ("\u{2066}\u{2069}", "<U+2066><U+2069>"),
            ("\u{200f}\u{061c}", "<U+200F><U+061C>"),
            ("\u{2028}", "<U+2028>"),
            ("src/ä/✓ 日本.rs", "src/ä/✓ 日本.rs"),
            ("", ""),
        ] {
            assert_eq!(safe(input), shown, "{input:?}");
        }
    }

    #[test]
    fn safe_text_is_not_copied() {
        assert!(matches!(safe("plain/path.rs ^[ é"), Cow::Borrowed(_)));
    }

    #[test]
    fn json_strings_and_keys_are_escaped_numbers_left() {
        let mut v = serde_json::json!({"k\x1b": ["a\x1bb", 1, {"p": "\u{202e}x"}], "n": 2.5});
        safe_json(&mut v);
        assert_eq!(
            v,
            serde_json::json!({"k^[": ["a^[b", 1, {"p": "<U+202E>x"}], "n": 2.5})
        );
    }

    proptest! {
        #[test]
        fn nothing_unsafe_is_left_and_every_safe_character_stays_in_order(s in any::<String>()) {
            let out = safe(&s);
            prop_assert!(!out.contains(is_unsafe), "{:?} -> {:?}", s, out);
            // The escapes add only ASCII: the characters that were safe are all there, in order.
            let kept: String = s.chars().filter(|c| !is_unsafe(*c)).collect();
            let mut rest = out.chars();
            for c in kept.chars() {
                prop_assert!(rest.any(|o| o == c), "{:?} lost {:?}", s, c);
            }
            // No path separator is made up.
            let seps = |t: &str| t.matches(['/', '\\']).count();
            prop_assert_eq!(seps(&out), seps(&s));
            if !s.contains(is_unsafe) {
                prop_assert_eq!(out.as_ref(), s.as_str());
            }
        }

        #[test]
        fn controls_only_text_is_all_escapes(s in "[\\x00-\\x1f\\x7f\\u{80}-\\u{9f}\\u{202a}-\\u{202e}]{0,40}") {
            let out = safe(&s);
            prop_assert!(out.chars().all(|c| c.is_ascii_graphic()), "{:?}", out);
        }
    }
}
