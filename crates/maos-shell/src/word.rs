//! One shell word as the shell will see it: quotes removed, escapes resolved, the variables the
//! command itself set substituted. A word that still holds an expansion the analysis cannot
//! resolve (a glob, an unknown variable, a command substitution, a tilde, a brace range) is
//! kept as written and marked inexact: it is a pattern, not a name.

/// A word after quote removal.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Expanded {
    /// The text: literal where quoted or plain, as written where an expansion stays.
    pub text: String,
    /// True when `text` is exactly what the shell will pass.
    pub exact: bool,
}

/// Variables the command set itself (`X=a; … $X`, `for f in a b`), each with one value.
#[derive(Clone, Debug, Default)]
pub(crate) struct Vars(Vec<(String, String)>);

impl Vars {
    /// The value of `name`, when the command set it to an exact value.
    pub fn get(&self, name: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// Sets `name` (`None`: the value is not knowable, so the name is forgotten).
    pub fn set(&mut self, name: &str, value: Option<String>) {
        self.0.retain(|(n, _)| n != name);
        if let Some(v) = value {
            // A bound on what a long script can pile up.
            if self.0.len() >= 64 {
                self.0.remove(0);
            }
            self.0.push((name.to_owned(), v));
        }
    }
}

/// Expands `raw` (a word as the parser gave it, quotes included).
pub(crate) fn expand(raw: &str, vars: &Vars) -> Expanded {
    let chars: Vec<char> = raw.chars().collect();
    let mut out = String::with_capacity(raw.len());
    let mut exact = true;
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        match c {
            '\\' => {
                match chars.get(i + 1) {
                    Some('\n') => {}
                    Some(&n) => out.push(n),
                    None => out.push('\\'),
                }
                i += 2;
            }
            '\'' => {
                let end = find_char(&chars, i + 1, '\'');
                out.extend(&chars[i + 1..end.min(chars.len())]);
                i = end + 1;
            }
            '"' => {
                i = double_quoted(&chars, i + 1, vars, &mut out, &mut exact);
            }
            '$' => match chars.get(i + 1) {
                Some('\'') => i = ansi_c(&chars, i + 2, &mut out),
                Some('"') => i = double_quoted(&chars, i + 2, vars, &mut out, &mut exact),
                _ => i = dollar(&chars, i, vars, false, &mut out, &mut exact),
            },
            '`' => {
                let end = find_char(&chars, i + 1, '`');
                out.extend(&chars[i..(end + 1).min(chars.len())]);
                exact = false;
                i = end + 1;
            }
            '*' | '?' | '[' => {
                exact = false;
                out.push(c);
                i += 1;
            }
            '~' if i == 0 => {
                exact = false;
                out.push(c);
                i += 1;
            }
            '{' => {
                if is_brace_expansion(&chars, i) {
                    exact = false;
                }
                out.push(c);
                i += 1;
            }
            '@' | '+' | '!' if chars.get(i + 1) == Some(&'(') => {
                // extglob
                exact = false;
                out.push(c);
                i += 1;
            }
            _ => {
                out.push(c);
                i += 1;
            }
        }
    }
    Expanded { text: out, exact }
}

/// The index of the next `c` from `from`, skipping backslash escapes (`chars.len()` if none).
fn find_char(chars: &[char], from: usize, c: char) -> usize {
    let mut i = from;
    while i < chars.len() {
        if chars[i] == c {
            return i;
        }
        i += 1;
    }
    chars.len()
}

/// Inside `"…"` from `i`; returns the index after the closing quote.
fn double_quoted(
    chars: &[char],
    mut i: usize,
    vars: &Vars,
    out: &mut String,
    exact: &mut bool,
) -> usize {
    while i < chars.len() {
        match chars[i] {
            '"' => return i + 1,
            '\\' => {
                match chars.get(i + 1) {
                    Some(&n @ ('$' | '`' | '"' | '\\')) => out.push(n),
                    Some('\n') => {}
                    Some(&n) => {
                        out.push('\\');
                        out.push(n);
                    }
                    None => out.push('\\'),
                }
                i += 2;
            }
            '$' => i = dollar(chars, i, vars, true, out, exact),
            '`' => {
                let end = find_char(chars, i + 1, '`');
                out.extend(&chars[i..(end + 1).min(chars.len())]);
                *exact = false;
                i = end + 1;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    i
}

/// `$'…'` from `i` (after the quote); returns the index after the closing quote.
fn ansi_c(chars: &[char], mut i: usize, out: &mut String) -> usize {
    while i < chars.len() {
        match chars[i] {
            '\'' => return i + 1,
            '\\' => {
                match chars.get(i + 1) {
                    Some('n') => out.push('\n'),
                    Some('t') => out.push('\t'),
                    Some('r') => out.push('\r'),
                    Some('0') => out.push('\0'),
                    Some(&n) => out.push(n),
                    None => {}
                }
                i += 2;
            }
            c => {
                out.push(c);
                i += 1;
            }
        }
    }
    i
}

/// A `$` expansion at `i` (`quoted`: inside double quotes): a variable the command set is
/// substituted, anything else is kept as written and makes the word inexact. Returns the index
/// after it.
fn dollar(
    chars: &[char],
    i: usize,
    vars: &Vars,
    quoted: bool,
    out: &mut String,
    exact: &mut bool,
) -> usize {
    let next = chars.get(i + 1).copied();
    let (name, end) = match next {
        Some('{') => {
            let end = matching(chars, i + 1, '{', '}');
            let inner: String = chars[i + 2..end.min(chars.len())].iter().collect();
            let simple = !inner.is_empty() && inner.chars().all(is_name_char);
            (simple.then_some(inner), end + 1)
        }
        Some('(') => (None, matching(chars, i + 1, '(', ')') + 1),
        Some(c) if c.is_ascii_alphabetic() || c == '_' => {
            let mut j = i + 1;
            while j < chars.len() && is_name_char(chars[j]) {
                j += 1;
            }
            (Some(chars[i + 1..j].iter().collect()), j)
        }
        Some(c) if c.is_ascii_digit() || "@*#?$!-".contains(c) => (None, i + 2),
        // A lone `$` is literal.
        _ => {
            out.push('$');
            return i + 1;
        }
    };
    let end = end.min(chars.len());
    // Unquoted, a value with blanks or glob characters is split into words and globbed.
    let value = name
        .as_deref()
        .and_then(|n| vars.get(n))
        .filter(|v| quoted || !v.contains([' ', '\t', '\n', '*', '?', '[']));
    match value {
        Some(v) => out.push_str(v),
        None => {
            out.extend(&chars[i..end]);
            *exact = false;
        }
    }
    end
}

fn is_name_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The index of the `close` matching the `open` at `i` (nesting counted, quotes skipped).
fn matching(chars: &[char], i: usize, open: char, close: char) -> usize {
    let mut depth = 0usize;
    let mut j = i;
    while j < chars.len() {
        match chars[j] {
            '\\' => j += 1,
            '\'' => j = find_char(chars, j + 1, '\''),
            c if c == open => depth += 1,
            c if c == close => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return j;
                }
            }
            _ => {}
        }
        j += 1;
    }
    chars.len()
}

/// The most words one brace expansion is read into; beyond, the word stays a pattern.
const MAX_BRACE_WORDS: usize = 32;

/// The words bash makes of a raw word's comma brace expansions (`f{,.bak}` → `f`, `f.bak`;
/// `src/{a,b}.rs` → `src/a.rs`, `src/b.rs`), still raw (quotes in place). `None` when the word
/// has none, or holds a range (`{1..3}`) or would make more than 32 words.
pub(crate) fn braces(raw: &str) -> Option<Vec<String>> {
    if !raw.contains('{') || !raw.contains(',') {
        return None;
    }
    let mut words = vec![raw.to_owned()];
    let mut done = Vec::new();
    let mut expanded = false;
    while let Some(w) = words.pop() {
        match brace_once(&w) {
            Some(Ok(parts)) => {
                expanded = true;
                words.extend(parts.into_iter().rev());
                if words.len() + done.len() > MAX_BRACE_WORDS {
                    return None;
                }
            }
            Some(Err(())) => return None,
            None => done.push(w),
        }
    }
    expanded.then_some(done)
}

/// The first unquoted `{…,…}` of `raw` expanded once: `Some(Ok(words))`; `Some(Err(()))` for a
/// form left alone (a range); `None` when there is none.
fn brace_once(raw: &str) -> Option<Result<Vec<String>, ()>> {
    let chars: Vec<char> = raw.chars().collect();
    let mut i = 0;
    while i < chars.len() {
        match chars[i] {
            '\\' => i += 2,
            '\'' => i = find_char(&chars, i + 1, '\'') + 1,
            '"' => {
                let mut j = i + 1;
                while j < chars.len() && chars[j] != '"' {
                    j += if chars[j] == '\\' { 2 } else { 1 };
                }
                i = j + 1;
            }
            '$' if chars.get(i + 1) == Some(&'{') => i = matching(&chars, i + 1, '{', '}') + 1,
            '{' => {
                // Its matching `}` and the commas at its own level, quotes skipped.
                let mut depth = 0usize;
                let mut commas = Vec::new();
                let mut j = i;
                let mut close = None;
                while j < chars.len() {
                    match chars[j] {
                        '\\' => j += 1,
                        '\'' => j = find_char(&chars, j + 1, '\''),
                        '"' => j = find_char(&chars, j + 1, '"'),
                        '{' => depth += 1,
                        '}' => {
                            depth -= 1;
                            if depth == 0 {
                                close = Some(j);
                                break;
                            }
                        }
                        ',' if depth == 1 => commas.push(j),
                        _ => {}
                    }
                    j += 1;
                }
                let close = close?;
                if commas.is_empty() {
                    let inner: String = chars[i + 1..close].iter().collect();
                    if inner.contains("..") {
                        return Some(Err(()));
                    }
                    // `{}`, `{x}`: literal; look further.
                    i += 1;
                    continue;
                }
                let prefix: String = chars[..i].iter().collect();
                let suffix: String = chars[close + 1..].iter().collect();
                let mut bounds = vec![i];
                bounds.extend(&commas);
                bounds.push(close);
                let words = bounds
                    .windows(2)
                    .map(|b| {
                        let alt: String = chars[b[0] + 1..b[1]].iter().collect();
                        format!("{prefix}{alt}{suffix}")
                    })
                    .collect();
                return Some(Ok(words));
            }
            _ => i += 1,
        }
    }
    None
}

/// Whether the unquoted `{` at `i` starts a brace expansion (`{a,b}`, `{1..3}`).
fn is_brace_expansion(chars: &[char], i: usize) -> bool {
    let mut j = i + 1;
    let mut comma = false;
    while j < chars.len() {
        match chars[j] {
            '}' => {
                let inner: String = chars[i + 1..j].iter().collect();
                return comma || inner.contains("..");
            }
            ',' => comma = true,
            ' ' | '\t' | '\n' | '\'' | '"' => return false,
            _ => {}
        }
        j += 1;
    }
    false
}

/// The command substitutions (`$(…)`, `` `…` ``) in a raw word, as command text.
pub(crate) fn substitutions(raw: &str) -> Vec<String> {
    if !raw.contains("$(") && !raw.contains('`') {
        return Vec::new();
    }
    let Ok(pieces) = brush_parser::word::parse(raw, &brush_parser::ParserOptions::default()) else {
        return Vec::new();
    };
    let mut found = Vec::new();
    collect_substitutions(&pieces, &mut found);
    found
}

fn collect_substitutions(
    pieces: &[brush_parser::word::WordPieceWithSource],
    found: &mut Vec<String>,
) {
    use brush_parser::word::WordPiece;
    for p in pieces {
        match &p.piece {
            WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                found.push(s.clone());
            }
            WordPiece::DoubleQuotedSequence(inner)
            | WordPiece::GettextDoubleQuotedSequence(inner) => {
                collect_substitutions(inner, found);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ex(raw: &str) -> (String, bool) {
        let e = expand(raw, &Vars::default());
        (e.text, e.exact)
    }

    #[test]
    fn quotes_and_escapes_are_removed() {
        assert_eq!(ex("plain.rs"), ("plain.rs".into(), true));
        assert_eq!(ex("'a b.rs'"), ("a b.rs".into(), true));
        assert_eq!(ex("\"a b.rs\""), ("a b.rs".into(), true));
        assert_eq!(ex("a\\ b.rs"), ("a b.rs".into(), true));
        assert_eq!(ex("\"a\"'b'c"), ("abc".into(), true));
        assert_eq!(ex("$'a\\tb'"), ("a\tb".into(), true));
        assert_eq!(ex("'*.rs'"), ("*.rs".into(), true));
    }

    #[test]
    fn expansions_make_a_pattern() {
        assert_eq!(ex("*.rs"), ("*.rs".into(), false));
        assert_eq!(ex("$HOME/x"), ("$HOME/x".into(), false));
        assert_eq!(ex("\"${D}/x\""), ("${D}/x".into(), false));
        assert_eq!(ex("~/x"), ("~/x".into(), false));
        assert_eq!(ex("src/{a,b}.rs"), ("src/{a,b}.rs".into(), false));
        assert_eq!(ex("$(pwd)/x"), ("$(pwd)/x".into(), false));
        assert_eq!(ex("`pwd`/x"), ("`pwd`/x".into(), false));
        assert_eq!(ex("a{b}"), ("a{b}".into(), true));
    }

    #[test]
    fn known_variables_are_substituted() {
        let mut v = Vars::default();
        v.set("F", Some("src/x.rs".into()));
        let e = expand("\"$F\"", &v);
        assert_eq!((e.text.as_str(), e.exact), ("src/x.rs", true));
        let e = expand("${F}.bak", &v);
        assert_eq!((e.text.as_str(), e.exact), ("src/x.rs.bak", true));
        v.set("L", Some("a.rs b.rs".into()));
        assert!(!expand("$L", &v).exact, "unquoted: split into two words");
        assert_eq!(expand("\"$L\"", &v).text, "a.rs b.rs");
        v.set("F", None);
        assert!(!expand("$F", &v).exact);
    }

    #[test]
    fn brace_expansions_make_words() {
        assert_eq!(braces("f{,.bak}"), Some(vec!["f".into(), "f.bak".into()]));
        assert_eq!(
            braces("src/{a,b}.rs"),
            Some(vec!["src/a.rs".into(), "src/b.rs".into()])
        );
        assert_eq!(
            braces("{a,b}{1,2}"),
            Some(vec!["a1".into(), "a2".into(), "b1".into(), "b2".into()])
        );
        assert_eq!(
            braces("{a,{b,c}}"),
            Some(vec!["a".into(), "b".into(), "c".into()])
        );
        assert_eq!(braces("'{a,b}'"), None, "quoted: literal");
        assert_eq!(braces("${x:-a,b}"), None, "a parameter expansion");
        assert_eq!(braces("{1..3},x"), None, "a range stays a pattern");
        assert_eq!(braces("{x}"), None);
        assert_eq!(
            braces("{a,b}{c,d}{e,f}{g,h}{i,j}{k,l}"),
            None,
            "64 words: too many"
        );
    }

    #[test]
    fn substitutions_are_found() {
        assert_eq!(substitutions("x$(rm -f a)y"), vec!["rm -f a".to_owned()]);
        assert_eq!(substitutions("\"`touch b`\""), vec!["touch b".to_owned()]);
        assert!(substitutions("plain").is_empty());
    }
}
