//! The files a Codex `apply_patch` call writes, read from its patch envelope:
//!
//! ```text
//! *** Begin Patch
//! *** Update File: src/lib.rs
//! *** Move to: src/core.rs
//! @@ ...
//! *** Add File: src/new.rs
//! *** Delete File: src/old.rs
//! *** End Patch
//! ```

const HEADERS: [&str; 4] = [
    "*** Add File: ",
    "*** Update File: ",
    "*** Delete File: ",
    "*** Move to: ",
];

/// Every file the patch adds, updates, deletes or moves to, in order, each once. Paths are
/// as written (relative ones are relative to the caller's working directory).
pub fn patch_paths(patch: &str) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for line in patch.lines() {
        let line = line.trim_end_matches('\r');
        let Some(path) = HEADERS.iter().find_map(|h| line.strip_prefix(h)) else {
            continue;
        };
        let path = path.trim();
        if !path.is_empty() && !out.iter().any(|p| p == path) {
            out.push(path.to_string());
        }
    }
    out
}

/// Whether a text is an `apply_patch` envelope.
pub fn is_patch(text: &str) -> bool {
    text.trim_start().starts_with("*** Begin Patch")
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_kind_of_header_once_in_order() {
        let p = "*** Begin Patch\n*** Update File: src/lib.rs\n*** Move to: src/core.rs\n@@ fn a\n-a\n+b\n*** Add File: src/new.rs\n+x\n*** Delete File: src/old.rs\n*** Update File: src/lib.rs\n*** End Patch\n";
        assert!(is_patch(p));
        assert_eq!(
            patch_paths(p),
            ["src/lib.rs", "src/core.rs", "src/new.rs", "src/old.rs"]
        );
    }

    #[test]
    fn content_lines_are_not_headers() {
        // A line added by the patch that merely mentions a header is prefixed with `+`.
        let p = "*** Begin Patch\r\n*** Add File: a.txt\r\n+*** Add File: b.txt\r\n*** End Patch";
        assert_eq!(patch_paths(p), ["a.txt"]);
        assert!(patch_paths("not a patch").is_empty());
        assert!(!is_patch("echo *** Begin Patch"));
    }

    proptest! {
        #[test]
        fn never_panics_and_returns_only_named_paths(text in "(\\*\\*\\* (Add|Update|Delete) File: [a-z/. ]{0,12}\n|[^\n]{0,20}\n){0,12}") {
            for p in patch_paths(&text) {
                prop_assert!(!p.is_empty());
                prop_assert!(text.contains(&p));
            }
        }
    }
}
