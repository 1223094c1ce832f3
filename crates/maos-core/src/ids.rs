//! Session and agent ids (`sess_<uuid simple>`, `agt_<uuid simple>`) and prefix resolution.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Number of hex digits in a simple-formatted uuid.
const HEX_LEN: usize = 32;

/// A malformed id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum IdError {
    /// The text is not `<prefix><32 hex digits>`.
    #[error("invalid {kind} id {value:?}: expected {prefix}<32 hex digits>")]
    Invalid {
        /// What kind of id was expected ("session", "agent").
        kind: &'static str,
        /// The expected prefix ("sess_", "agt_").
        prefix: &'static str,
        /// The text as given.
        value: String,
    },
}

/// Parse `<prefix><32 hex digits>`; hex digits are normalised to lowercase.
fn parse_id(kind: &'static str, prefix: &'static str, s: &str) -> Result<String, IdError> {
    let invalid = || IdError::Invalid {
        kind,
        prefix,
        value: s.to_owned(),
    };
    let hex = s.trim().strip_prefix(prefix).ok_or_else(invalid)?;
    if hex.len() != HEX_LEN || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(invalid());
    }
    Ok(format!("{prefix}{}", hex.to_ascii_lowercase()))
}

macro_rules! id_type {
    ($(#[$meta:meta])* $name:ident, $kind:literal, $prefix:literal) => {
        $(#[$meta])*
        ///
        /// Read from JSON (the wire, an import file, a database row) through [`Self::parse`]:
        /// a value of this type is always a well-formed id, safe in a path (see [`id_path`]).
        #[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(try_from = "String", into = "String")]
        pub struct $name(String);

        impl TryFrom<String> for $name {
            type Error = IdError;
            fn try_from(s: String) -> Result<Self, IdError> {
                Self::parse(&s)
            }
        }

        impl From<$name> for String {
            fn from(id: $name) -> String {
                id.0
            }
        }

        impl $name {
            /// The id prefix, including the underscore.
            pub const PREFIX: &'static str = $prefix;

            /// Build the id from a uuid (the caller supplies the randomness).
            pub fn from_uuid(u: uuid::Uuid) -> Self {
                Self(format!("{}{}", $prefix, u.simple()))
            }

            /// Parse a full id; refuses anything but the prefix followed by 32 hex digits.
            pub fn parse(s: &str) -> Result<Self, IdError> {
                parse_id($kind, $prefix, s).map(Self)
            }

            /// The id as text.
            pub fn as_str(&self) -> &str {
                &self.0
            }

            /// The id as people see it (see [`short`]).
            pub fn short(&self) -> &str {
                short(&self.0)
            }
        }

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(&self.0)
            }
        }

        impl std::str::FromStr for $name {
            type Err = IdError;
            fn from_str(s: &str) -> Result<Self, IdError> {
                Self::parse(s)
            }
        }

        impl AsRef<str> for $name {
            fn as_ref(&self) -> &str {
                &self.0
            }
        }
    };
}

id_type!(
    /// A session id: `sess_<32 hex digits>`.
    SessionId,
    "session",
    "sess_"
);
id_type!(
    /// An agent id: `agt_<32 hex digits>`.
    AgentId,
    "agent",
    "agt_"
);

/// A path under maos's home built from input that is not a session or agent id.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{value:?} is not a session or agent id: no path under maos's home is made from it")]
pub struct UnsafePath {
    /// The text as given.
    pub value: String,
}

/// `base/<id><suffix>`: the one way a path under `$MAOS_HOME` is made from a session or agent
/// id (a session's `checkpoint.json` directory, an agent's files, a chart or an export). The id
/// must be whole and exact (`sess_` or `agt_` and 32 lowercase hex digits, as the types hold
/// them), so the result is one component below `base`, never `..`, absolute or elsewhere.
/// `suffix` is the caller's own text (`""`, `".json"`) and may not hold a separator.
pub fn id_path(
    base: &std::path::Path,
    id: &str,
    suffix: &str,
) -> Result<std::path::PathBuf, UnsafePath> {
    let unsafe_path = || UnsafePath {
        value: format!("{id}{suffix}"),
    };
    let exact = SessionId::parse(id)
        .map(|s| s.0)
        .or_else(|_| AgentId::parse(id).map(|a| a.0))
        .is_ok_and(|canonical| canonical == id);
    if !exact || suffix.contains('/') || suffix.contains('\0') {
        return Err(unsafe_path());
    }
    let path = base.join(format!("{id}{suffix}"));
    // One normal component more than `base`: what the checks above already prove.
    let mut rest = path
        .strip_prefix(base)
        .map_err(|_| unsafe_path())?
        .components();
    match (rest.next(), rest.next()) {
        (Some(std::path::Component::Normal(_)), None) => Ok(path),
        _ => Err(unsafe_path()),
    }
}

/// Hex digits an id is shown with.
const SHOWN_HEX: usize = 8;

/// An id as people see it: its prefix and the first 8 hex digits ("agt_1a2b3c4d"). Every
/// command accepts such a prefix back (see [`resolve_prefix`]). Text shorter than that, or
/// without a prefix (the first 8 characters), is shortened as far as it goes.
pub fn short(id: &str) -> &str {
    let cut = id.find('_').map_or(0, |i| i + 1) + SHOWN_HEX;
    id.get(..cut).unwrap_or(id)
}

/// `text` with every whole session or agent id in it (`sess_` or `agt_` and 32 hex digits, not
/// part of a longer word) cut to its [`short`] form: the ids human text shows (errors, the
/// briefing, a hook's deny reason). `--json` fields keep whole ids.
pub fn shorten_all(text: &str) -> std::borrow::Cow<'_, str> {
    let word = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let bytes = text.as_bytes();
    let mut out = String::new();
    let (mut copied, mut i) = (0, 0);
    while i < bytes.len() {
        let prefix = [SessionId::PREFIX, AgentId::PREFIX]
            .into_iter()
            .find(|p| bytes[i..].starts_with(p.as_bytes()));
        let Some(prefix) = prefix.filter(|_| i == 0 || !word(bytes[i - 1])) else {
            i += 1;
            continue;
        };
        let hex = i + prefix.len();
        let end = hex + HEX_LEN;
        let whole = bytes
            .get(hex..end)
            .is_some_and(|h| h.iter().all(u8::is_ascii_hexdigit))
            && bytes.get(end).is_none_or(|b| !word(*b));
        if whole {
            out.push_str(&text[copied..hex + SHOWN_HEX]);
            copied = end;
            i = end;
        } else {
            i = hex;
        }
    }
    if copied == 0 {
        return std::borrow::Cow::Borrowed(text);
    }
    out.push_str(&text[copied..]);
    std::borrow::Cow::Owned(out)
}

/// Whether `s` is a whole session or agent id (`sess_` or `agt_` and 32 hex digits).
pub fn is_id(s: &str) -> bool {
    SessionId::parse(s).is_ok() || AgentId::parse(s).is_ok()
}

/// How many matches an ambiguity message lists.
const MAX_LISTED: usize = 5;

/// A user-typed id or prefix that does not name exactly one candidate.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PrefixError {
    /// Nothing was typed.
    #[error("no id given: type an id or a unique prefix of one")]
    Empty,
    /// No candidate matches.
    #[error("no id matches {input:?}")]
    NotFound {
        /// The text as given.
        input: String,
    },
    /// Several candidates match.
    #[error("{input:?} is ambiguous: it matches {}; type more characters", list_matches(.matches))]
    Ambiguous {
        /// The text as given.
        input: String,
        /// Every matching candidate, in the order given.
        matches: Vec<String>,
    },
}

fn list_matches(matches: &[String]) -> String {
    let mut out = matches
        .iter()
        .take(MAX_LISTED)
        .map(String::as_str)
        .collect::<Vec<_>>()
        .join(", ");
    if matches.len() > MAX_LISTED {
        out.push_str(&format!(" and {} more", matches.len() - MAX_LISTED));
    }
    out
}

/// The part of an id after its first `_` (the hex part), or the whole id without one.
fn hex_part(id: &str) -> &str {
    id.split_once('_').map_or(id, |(_, hex)| hex)
}

/// Resolve a user-typed id or unique prefix among candidates. Accepts the full id, a prefix of
/// the full id (e.g. "sess_3f2"), or a prefix of the hex part alone (e.g. "3f2"). Exact match wins.
pub fn resolve_prefix<'a, I>(input: &str, candidates: I) -> Result<&'a str, PrefixError>
where
    I: IntoIterator<Item = &'a str>,
{
    let input = input.trim();
    if input.is_empty() {
        return Err(PrefixError::Empty);
    }
    let mut matches: Vec<&'a str> = Vec::new();
    for c in candidates {
        if c == input {
            return Ok(c);
        }
        if (c.starts_with(input) || hex_part(c).starts_with(input)) && !matches.contains(&c) {
            matches.push(c);
        }
    }
    match matches.as_slice() {
        [] => Err(PrefixError::NotFound {
            input: input.to_owned(),
        }),
        [one] => Ok(one),
        many => Err(PrefixError::Ambiguous {
            input: input.to_owned(),
            matches: many.iter().map(|m| (*m).to_owned()).collect(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn uuid(n: u128) -> uuid::Uuid {
        uuid::Uuid::from_u128(n)
    }

    #[test]
    fn short_keeps_the_prefix_and_eight_hex_digits() {
        let a = AgentId::from_uuid(uuid(0x0123_4567_89ab_cdef << 64));
        assert_eq!(a.short(), "agt_01234567");
        assert_eq!(short("sess_0123456789abcdef"), "sess_01234567");
        assert_eq!(short("0123456789"), "01234567");
        assert_eq!(short("agt_12"), "agt_12");
        assert_eq!(short(""), "");
    }

    #[test]
    fn from_uuid_formats() {
        let s = SessionId::from_uuid(uuid(0x3f2a));
        assert_eq!(s.as_str(), "sess_00000000000000000000000000003f2a");
        assert_eq!(s.to_string(), s.as_str());
        let a = AgentId::from_uuid(uuid(u128::MAX));
        assert_eq!(a.as_str(), format!("agt_{}", "f".repeat(32)));
    }

    #[test]
    fn shorten_all_cuts_whole_ids_and_nothing_else() {
        let a = format!("agt_{}", "1a2b3c4d".repeat(4));
        let s = format!("sess_{}", "0f".repeat(16));
        let cases = [
            (
                format!("resume it with `maos resume --agent {a}`."),
                "resume it with `maos resume --agent agt_1a2b3c4d`.".to_string(),
            ),
            (
                format!("{s}: {a}, {a}"),
                "sess_0f0f0f0f: agt_1a2b3c4d, agt_1a2b3c4d".to_string(),
            ),
            // Not whole ids: too short, too long, part of a word, upper-case prefix.
            (
                "agt_1a2b3c4d is short".into(),
                "agt_1a2b3c4d is short".into(),
            ),
            (format!("{a}0"), format!("{a}0")),
            (format!("x{a}"), format!("x{a}")),
            (format!("AGT_{}", &a[4..]), format!("AGT_{}", &a[4..])),
            ("no ids here, ünïcode".into(), "no ids here, ünïcode".into()),
        ];
        for (text, want) in cases {
            assert_eq!(shorten_all(&text), want, "{text}");
        }
        assert!(matches!(
            shorten_all("nothing"),
            std::borrow::Cow::Borrowed("nothing")
        ));
    }

    #[test]
    fn parse_round_trips_and_normalises() {
        let s = SessionId::from_uuid(uuid(0xabcdef));
        assert_eq!(SessionId::parse(s.as_str()).unwrap(), s);
        let upper = format!("sess_{}", "ABCDEF".repeat(5) + "AB");
        assert_eq!(
            SessionId::parse(&upper).unwrap().as_str(),
            format!("sess_{}", "abcdef".repeat(5) + "ab")
        );
        let a: AgentId = format!("agt_{}", "0".repeat(32)).parse().unwrap();
        assert_eq!(a.as_str(), format!("agt_{}", "0".repeat(32)));
    }

    #[test]
    fn parse_rejects() {
        let hex = "0".repeat(32);
        let cases = [
            String::new(),
            hex.clone(),
            format!("agt_{hex}"),
            format!("sess_{}", "0".repeat(31)),
            format!("sess_{}", "0".repeat(33)),
            format!("sess_{}g", "0".repeat(31)),
            format!("SESS_{hex}"),
        ];
        for c in cases {
            let err = SessionId::parse(&c).unwrap_err();
            assert_eq!(
                err.to_string(),
                format!("invalid session id {c:?}: expected sess_<32 hex digits>")
            );
        }
        let err = AgentId::parse("sess_x").unwrap_err();
        assert_eq!(
            err.to_string(),
            "invalid agent id \"sess_x\": expected agt_<32 hex digits>"
        );
    }

    #[test]
    fn deserialize_runs_the_parse_rule() {
        for bad in [
            "\"../../x\"",
            "\"/tmp/abs\"",
            "\"sess_x\"",
            "\"\"",
            "\"sess_../../../../../../../../../../../../../../x\"",
        ] {
            let err = serde_json::from_str::<SessionId>(bad)
                .unwrap_err()
                .to_string();
            assert!(err.contains("invalid session id"), "{bad}: {err}");
        }
        let err = serde_json::from_str::<AgentId>("\"agt_/etc\"")
            .unwrap_err()
            .to_string();
        assert!(err.contains("invalid agent id"), "{err}");
        // Inside a record too: the field's rule runs wherever the type is read.
        let v: Result<Vec<AgentId>, _> =
            serde_json::from_str(&format!("[\"agt_{}\", \"..\"]", "0".repeat(32)));
        assert!(v.is_err());
    }

    #[test]
    fn id_path_takes_only_ids_and_stays_under_its_base() {
        let base = std::path::Path::new("/home/u/.maos/projects/p/sessions");
        let s = SessionId::from_uuid(uuid(7));
        assert_eq!(
            id_path(base, s.as_str(), "").unwrap(),
            base.join(s.as_str())
        );
        assert_eq!(
            id_path(base, s.as_str(), ".json").unwrap(),
            base.join(format!("{s}.json"))
        );
        let a = AgentId::from_uuid(uuid(8));
        assert_eq!(
            id_path(base, a.as_str(), "").unwrap(),
            base.join(a.as_str())
        );
        for bad in [
            "../../x",
            "/tmp/abs",
            "..",
            ".",
            "",
            "sess_x",
            "sess_/../../x",
            &format!("sess_{}/..", "0".repeat(32)),
            &format!(" sess_{}", "0".repeat(32)),
            &format!("SESS_{}", "0".repeat(32)),
        ] {
            let err = id_path(base, bad, ".json").unwrap_err();
            assert!(
                err.to_string().contains("not a session or agent id"),
                "{bad}: {err}"
            );
        }
        // A suffix of our own is never a way out either.
        assert!(id_path(base, s.as_str(), "/../../x").is_err());
    }

    #[test]
    fn serde_is_transparent() {
        let s = SessionId::from_uuid(uuid(1));
        let json = serde_json::to_string(&s).unwrap();
        assert_eq!(json, format!("\"{s}\""));
        assert_eq!(serde_json::from_str::<SessionId>(&json).unwrap(), s);
    }

    const A: &str = "sess_3f2a0000000000000000000000000000";
    const B: &str = "sess_3f2b0000000000000000000000000000";
    const C: &str = "sess_9990000000000000000000000000000a";

    #[test]
    fn resolve_prefix_table() {
        let cands = [A, B, C];
        let ok: &[(&str, &str)] = &[
            (A, A),           // exact
            ("sess_3f2a", A), // prefix of the full id
            ("3f2b", B),      // prefix of the hex part
            ("999", C),       // hex-only, unique
            ("sess_9", C),    // full-id prefix, unique
            ("  3f2a  ", A),  // surrounding whitespace ignored
        ];
        for (input, want) in ok {
            assert_eq!(resolve_prefix(input, cands).unwrap(), *want, "{input}");
        }
    }

    #[test]
    fn resolve_prefix_exact_wins_over_prefix() {
        let short = "sess_3f2a";
        assert_eq!(resolve_prefix(short, [A, short]).unwrap(), short);
        assert_eq!(resolve_prefix(short, [short, A]).unwrap(), short);
    }

    #[test]
    fn resolve_prefix_errors() {
        let cands = [A, B, C];
        assert_eq!(resolve_prefix("", cands), Err(PrefixError::Empty));
        assert_eq!(resolve_prefix("  ", cands), Err(PrefixError::Empty));
        let err = resolve_prefix("abc", cands).unwrap_err();
        assert_eq!(
            err,
            PrefixError::NotFound {
                input: "abc".into()
            }
        );
        assert_eq!(err.to_string(), "no id matches \"abc\"");
        for input in ["3f2", "sess_3f", "sess_"] {
            let err = resolve_prefix(input, cands).unwrap_err();
            let PrefixError::Ambiguous { matches, .. } = &err else {
                panic!("{input}: {err:?}");
            };
            assert!(matches.contains(&A.to_owned()) && matches.contains(&B.to_owned()));
            let msg = err.to_string();
            assert!(
                msg.contains("ambiguous") && msg.contains("type more characters"),
                "{msg}"
            );
        }
        assert!(matches!(
            resolve_prefix("x", std::iter::empty()),
            Err(PrefixError::NotFound { .. })
        ));
    }

    #[test]
    fn ambiguous_message_lists_at_most_five() {
        let ids: Vec<String> = (0..8u128)
            .map(|n| SessionId::from_uuid(uuid(n)).to_string())
            .collect();
        let err = resolve_prefix("0", ids.iter().map(String::as_str)).unwrap_err();
        let msg = err.to_string();
        assert!(msg.contains(&ids[4]) && !msg.contains(&ids[5]), "{msg}");
        assert!(msg.ends_with("and 3 more; type more characters"), "{msg}");
    }

    #[test]
    fn duplicate_candidates_are_not_ambiguous() {
        assert_eq!(resolve_prefix("3f2a", [A, A]).unwrap(), A);
    }
}
