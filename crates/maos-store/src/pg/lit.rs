//! SQL literals for a batch's start (DESIGN.md §10, issue 34): `BEGIN`, its setting and
//! `maos_begin_paths` go to PostgreSQL as one simple query, which carries no parameters. The
//! values go in as literals instead, each with its type spelled out, so that the statement
//! means what the bound one meant. Text is an escape string (`E'…'`: quotes and backslashes
//! doubled, read the same whatever `standard_conforming_strings` says); numbers and arrays are
//! quoted and cast.

use std::fmt::Write as _;

use crate::StoreError;

/// One value for a `$n` of a statement written for bound parameters.
pub(super) enum Lit<'a> {
    Text(&'a str),
    Int(i64),
    Ints(&'a [i64]),
    Bools(&'a [bool]),
    /// A NULL of the type named.
    Null(&'static str),
}

impl Lit<'_> {
    fn render(&self, out: &mut String) -> Result<(), StoreError> {
        match self {
            Lit::Text(s) => {
                text(out, s)?;
                out.push_str("::text");
            }
            // Quoted: `-9223372036854775808::bigint` would be the negation of a number that
            // does not fit.
            Lit::Int(i) => {
                let _ = write!(out, "'{i}'::bigint");
            }
            Lit::Ints(v) => {
                out.push_str("'{");
                list(out, v, |out, n| {
                    let _ = write!(out, "{n}");
                    Ok(())
                })?;
                out.push_str("}'::bigint[]");
            }
            Lit::Bools(v) => {
                out.push_str("'{");
                list(out, v, |out, b| {
                    out.push(if *b { 't' } else { 'f' });
                    Ok(())
                })?;
                out.push_str("}'::boolean[]");
            }
            Lit::Null(ty) => {
                let _ = write!(out, "NULL::{ty}");
            }
        }
        Ok(())
    }
}

/// `items` written by `each`, separated by commas.
fn list<T>(
    out: &mut String,
    items: &[T],
    mut each: impl FnMut(&mut String, &T) -> Result<(), StoreError>,
) -> Result<(), StoreError> {
    for (i, item) in items.iter().enumerate() {
        if i > 0 {
            out.push(',');
        }
        each(out, item)?;
    }
    Ok(())
}

/// `s` as an escape string literal. A NUL cannot be in a PostgreSQL text (nor in a simple
/// query, whose text it would cut short): refused.
fn text(out: &mut String, s: &str) -> Result<(), StoreError> {
    if s.contains('\0') {
        return Err(StoreError::Corrupt(
            "a text for PostgreSQL contains a NUL character".into(),
        ));
    }
    out.reserve(s.len() + 3);
    out.push_str("E'");
    for c in s.chars() {
        match c {
            '\'' => out.push_str("''"),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('\'');
    Ok(())
}

/// `template` (a statement written with `$1`, `$2`, …) with each `$n` replaced by the literal
/// of `params[n - 1]`, in one pass over the template (a value that itself contains `$2` is
/// never read as a placeholder). The templates here use `$` for nothing else.
pub(super) fn bind(template: &str, params: &[Lit<'_>]) -> Result<String, StoreError> {
    let mut out = String::with_capacity(template.len() + 256);
    let mut rest = template;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let n: usize = after[..digits]
            .parse()
            .map_err(|_| StoreError::Corrupt(format!("a statement has a lone `$` at byte {at}")))?;
        let lit = n
            .checked_sub(1)
            .and_then(|i| params.get(i))
            .ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "a statement names ${n}, but {} values were given",
                    params.len()
                ))
            })?;
        lit.render(&mut out)?;
        rest = &after[digits..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_quoted_and_placeholders_replaced_in_one_pass() {
        let sql = bind(
            "SELECT $1, $2, $9, $3, $4, $5, $6, $7, $8",
            &[
                Lit::Text("it's a \\ $2"),
                Lit::Int(i64::MIN),
                Lit::Ints(&[1, -2]),
                Lit::Bools(&[true, false]),
                Lit::Null("bigint[]"),
                Lit::Ints(&[]),
                Lit::Bools(&[]),
                Lit::Int(7),
                Lit::Text(""),
            ],
        )
        .unwrap();
        assert_eq!(
            sql,
            "SELECT E'it''s a \\\\ $2'::text, '-9223372036854775808'::bigint, E''::text, \
             '{1,-2}'::bigint[], '{t,f}'::boolean[], NULL::bigint[], '{}'::bigint[], \
             '{}'::boolean[], '7'::bigint"
        );
    }

    #[test]
    fn a_nul_or_a_missing_value_is_refused() {
        assert!(bind("SELECT $1", &[Lit::Text("a\0b")]).is_err());
        assert!(bind("SELECT $2", &[Lit::Int(1)]).is_err());
        assert!(bind("SELECT $0", &[Lit::Int(1)]).is_err());
        assert!(bind("SELECT $x", &[Lit::Int(1)]).is_err());
    }
}
