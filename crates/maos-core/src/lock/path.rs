//! [`LockPath`]: lexically normalized project-relative paths.

use std::borrow::Borrow;
use std::fmt;

use serde::{Deserialize, Serialize, Serializer};

/// The longest path maos takes, in bytes of UTF-8, as the caller names it (absolute, or
/// relative to its working directory), before any resolution: Linux's `PATH_MAX` (which counts
/// the NUL that ends a C string, so the kernel itself takes one byte less). Every way in
/// refuses a longer one (the CLI, the daemon's lock requests, a hook's writes, the events'
/// path filter, MCP) before anything is recorded.
pub const MAX_PATH: usize = 4096;

/// Refuse a path longer than [`MAX_PATH`] bytes, in one line that does not quote it.
pub fn check_path_len(path: &str) -> Result<(), String> {
    if path.len() > MAX_PATH {
        return Err(format!(
            "the path is {} bytes, over the {MAX_PATH}-byte limit; name a shorter path",
            path.len()
        ));
    }
    Ok(())
}

/// A path that cannot be a lock key.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum LockPathError {
    /// A `..` climbs above the project root.
    #[error(
        "path {input:?} is outside the project: its '..' climbs above the project root; name a path inside the project"
    )]
    Escapes {
        /// The path as given.
        input: String,
    },
    /// The path is absolute.
    #[error("path {input:?} is absolute; give it relative to the project root")]
    Absolute {
        /// The path as given.
        input: String,
    },
    /// The path cannot name a file.
    #[error("path {input:?} is invalid: {reason}")]
    Invalid {
        /// The path as given.
        input: String,
        /// Why.
        reason: &'static str,
    },
}

/// A normalized project-relative path: components joined by '/', no '.', no '..', no leading or
/// trailing '/'; `""` is the project root (displayed as `"."`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Deserialize)]
#[serde(try_from = "String")]
pub struct LockPath(String);

impl LockPath {
    /// Lexically normalize a relative path (already relative to the project root): drop `.`,
    /// empty components and trailing separators, resolve `..` against earlier components. Both
    /// `/` and `\` separate components. A `..` that climbs above the root is
    /// [`LockPathError::Escapes`]; a path starting with `/`, `\` or a drive (`C:`) is
    /// [`LockPathError::Absolute`]; a NUL byte is [`LockPathError::Invalid`].
    pub fn new(rel: &str) -> Result<LockPath, LockPathError> {
        if rel.contains('\0') {
            return Err(LockPathError::Invalid {
                input: rel.to_owned(),
                reason: "it contains a NUL byte",
            });
        }
        let bytes = rel.as_bytes();
        let drive = bytes.len() >= 2 && bytes[0].is_ascii_alphabetic() && bytes[1] == b':';
        if rel.starts_with(['/', '\\']) || drive {
            return Err(LockPathError::Absolute {
                input: rel.to_owned(),
            });
        }
        let mut parts: Vec<&str> = Vec::new();
        for part in rel.split(['/', '\\']) {
            match part {
                "" | "." => {}
                ".." => {
                    if parts.pop().is_none() {
                        return Err(LockPathError::Escapes {
                            input: rel.to_owned(),
                        });
                    }
                }
                _ => parts.push(part),
            }
        }
        Ok(LockPath(parts.join("/")))
    }

    /// The project root.
    pub fn root() -> LockPath {
        LockPath(String::new())
    }

    /// True for the project root.
    pub fn is_root(&self) -> bool {
        self.0.is_empty()
    }

    /// The normalized text (`""` for the root).
    pub fn as_str(&self) -> &str {
        &self.0
    }

    /// Component-wise containment: `"src"` contains `"src/a.rs"` and `"src"` itself but not
    /// `"srcx"`; `"sr"` does not contain `"src"`. The root contains everything.
    pub fn contains(&self, other: &LockPath) -> bool {
        self.is_root()
            || other
                .0
                .strip_prefix(self.0.as_str())
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
    }

    /// The root, then every ancestor, then the path itself (`""`, `"a"`, `"a/b"` for `"a/b"`).
    pub(crate) fn ancestors_and_self(&self) -> impl Iterator<Item = &str> {
        let s = self.0.as_str();
        let inner = s
            .match_indices('/')
            .map(move |(i, _)| &s[..i])
            .chain((!s.is_empty()).then_some(s));
        std::iter::once("").chain(inner)
    }
}

impl fmt::Display for LockPath {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.is_root() {
            f.write_str(".")
        } else {
            f.write_str(&self.0)
        }
    }
}

impl Borrow<str> for LockPath {
    fn borrow(&self) -> &str {
        &self.0
    }
}

impl AsRef<str> for LockPath {
    fn as_ref(&self) -> &str {
        &self.0
    }
}

impl std::str::FromStr for LockPath {
    type Err = LockPathError;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Self::new(s)
    }
}

impl TryFrom<String> for LockPath {
    type Error = LockPathError;
    fn try_from(s: String) -> Result<Self, Self::Error> {
        Self::new(&s)
    }
}

/// Serialized as the plain normalized string; deserializing normalizes and validates it.
impl Serialize for LockPath {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.serialize_str(&self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> LockPath {
        LockPath::new(s).unwrap()
    }

    #[test]
    fn a_path_at_the_cap_is_taken_and_one_byte_more_is_refused_in_one_line() {
        assert_eq!(check_path_len(&"a".repeat(MAX_PATH)), Ok(()));
        // Bytes, not characters: 2,048 two-byte characters are at the cap, one more is over.
        assert_eq!(check_path_len(&"é".repeat(MAX_PATH / 2)), Ok(()));
        let why = check_path_len(&"é".repeat(MAX_PATH / 2 + 1)).unwrap_err();
        assert_eq!(
            why,
            "the path is 4098 bytes, over the 4096-byte limit; name a shorter path"
        );
    }

    #[test]
    fn normalization_table() {
        let ok: &[(&str, &str)] = &[
            ("", ""),
            (".", ""),
            ("./", ""),
            ("./a", "a"),
            ("a", "a"),
            ("a/", "a"),
            ("a//b/", "a/b"),
            ("a/./b", "a/b"),
            ("a/../b", "b"),
            ("a/b/..", "a"),
            ("a/b/../..", ""),
            ("a\\b", "a/b"),
            ("src/main.rs", "src/main.rs"),
            ("a/.../b", "a/.../b"),
            ("..a/b..", "..a/b.."),
            ("dir with space/x", "dir with space/x"),
        ];
        for (input, want) in ok {
            assert_eq!(LockPath::new(input).unwrap().as_str(), *want, "{input:?}");
        }
        type Want = fn(&LockPathError) -> bool;
        let escapes: Want = |e| matches!(e, LockPathError::Escapes { .. });
        let absolute: Want = |e| matches!(e, LockPathError::Absolute { .. });
        let invalid: Want = |e| matches!(e, LockPathError::Invalid { .. });
        let bad: &[(&str, Want)] = &[
            ("..", escapes),
            ("../x", escapes),
            ("a/../../x", escapes),
            ("./..", escapes),
            ("a/b/../../..", escapes),
            ("/abs", absolute),
            ("/", absolute),
            ("\\abs", absolute),
            ("C:\\x", absolute),
            ("c:/x", absolute),
            ("a\0b", invalid),
        ];
        for (input, want) in bad {
            let err = LockPath::new(input).unwrap_err();
            assert!(want(&err), "{input:?}: {err:?}");
            assert!(
                err.to_string().contains(&format!("{input:?}")),
                "message names the input: {err}"
            );
        }
    }

    #[test]
    fn contains_table() {
        let cases: &[(&str, &str, bool)] = &[
            ("src", "src", true),
            ("src", "src/a.rs", true),
            ("src", "src/a/b.rs", true),
            ("sr", "src", false),
            ("src", "srcx/a", false),
            ("src", "sr", false),
            ("src/a.rs", "src", false),
            ("", "", true),
            ("", "anything/deep", true),
            ("a", "", false),
            ("a/b", "a/bc", false),
            ("a/b", "a/b/c", true),
        ];
        for (a, b, want) in cases {
            assert_eq!(p(a).contains(&p(b)), *want, "{a:?} contains {b:?}");
        }
    }

    #[test]
    fn display_and_ancestors() {
        assert_eq!(LockPath::root().to_string(), ".");
        assert_eq!(p("a/b").to_string(), "a/b");
        let abc = p("a/b/c");
        let anc: Vec<&str> = abc.ancestors_and_self().collect();
        assert_eq!(anc, ["", "a", "a/b", "a/b/c"]);
        let root = LockPath::root();
        let anc: Vec<&str> = root.ancestors_and_self().collect();
        assert_eq!(anc, [""]);
    }

    #[test]
    fn serde_is_a_plain_normalized_string() {
        let json = serde_json::to_string(&p("a/b")).unwrap();
        assert_eq!(json, "\"a/b\"");
        assert_eq!(serde_json::from_str::<LockPath>(&json).unwrap(), p("a/b"));
        assert_eq!(
            serde_json::from_str::<LockPath>("\"./a//b/\"").unwrap(),
            p("a/b")
        );
        let err = serde_json::from_str::<LockPath>("\"../x\"").unwrap_err();
        assert!(err.to_string().contains("outside the project"), "{err}");
    }
}
