//! Placeholders in `command` and `resume_command`: `{name}`, with `{{` and `}}` for literal
//! braces.

use super::model::PLACEHOLDERS;
use crate::words::closest;

/// A piece of an argv element: literal text, or a placeholder's name.
pub(super) enum Piece<'a> {
    Text(&'a str),
    Hole(&'a str),
}

/// Split `s` into pieces, in order; `{{`/`}}` become the text `{`/`}`.
pub(super) fn scan<'a>(
    s: &'a str,
    mut on: impl FnMut(Piece<'a>) -> Result<(), String>,
) -> Result<(), String> {
    let bytes = s.as_bytes();
    let (mut i, mut text_from) = (0, 0);
    // Braces are ASCII, so every index sliced at below is a char boundary.
    while let Some(&b) = bytes.get(i) {
        let doubled = bytes.get(i + 1) == Some(&b);
        match b {
            b'{' | b'}' if doubled => {
                on(Piece::Text(&s[text_from..=i]))?;
                i += 2;
                text_from = i;
            }
            b'{' => {
                on(Piece::Text(&s[text_from..i]))?;
                let rest = &s[i + 1..];
                let Some(end) = rest.find('}') else {
                    return Err(format!(
                        "unclosed placeholder `{{{rest}` in {s:?}; a placeholder is written \
                         {{name}}, a literal brace {{{{"
                    ));
                };
                on(Piece::Hole(&rest[..end]))?;
                i += end + 2;
                text_from = i;
            }
            b'}' => {
                return Err(format!(
                    "unmatched `}}` in {s:?}; write `}}}}` for a literal brace"
                ));
            }
            _ => i += 1,
        }
    }
    on(Piece::Text(&s[text_from..]))
}

pub(super) fn expand_one(
    arg: &str,
    lookup: &impl Fn(&str) -> Option<String>,
) -> Result<String, String> {
    let mut out = String::with_capacity(arg.len());
    scan(arg, |piece| {
        match piece {
            Piece::Text(t) => out.push_str(t),
            Piece::Hole(name) => match lookup(name) {
                Some(v) => out.push_str(&v),
                None if PLACEHOLDERS.contains(&name) => {
                    return Err(format!("placeholder {{{name}}} has no value here"));
                }
                None => return Err(unknown_placeholder(name)),
            },
        }
        Ok(())
    })?;
    Ok(out)
}

pub(super) fn unknown_placeholder(name: &str) -> String {
    let known: Vec<String> = PLACEHOLDERS.iter().map(|p| format!("{{{p}}}")).collect();
    let hint = match closest(name, PLACEHOLDERS.iter().copied()) {
        Some(c) => format!(" (did you mean {{{c}}}?)"),
        None => String::new(),
    };
    format!(
        "unknown placeholder {{{name}}}{hint}; known: {}; write {{{{ and }}}} for literal braces",
        known.join(", ")
    )
}

/// Check an argv element's placeholders against [`PLACEHOLDERS`].
pub(super) fn check_placeholders(arg: &str) -> Result<(), String> {
    expand_one(arg, &|name: &str| {
        PLACEHOLDERS.contains(&name).then(String::new)
    })
    .map(|_| ())
}
