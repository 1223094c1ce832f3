//! The files a unified diff changes, from its `---`/`+++` headers and git's `rename` lines.

/// The files `body` (a unified or git diff) changes, each with `strip` leading path components
/// removed (`patch -pN`, `git apply` strips 1). A file the diff deletes (`+++ /dev/null`) is
/// named by its `---` line.
pub(crate) fn diff_targets(body: &str, strip: usize) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    let mut old: Option<&str> = None;
    for line in body.lines() {
        if let Some(rest) = line.strip_prefix("--- ") {
            old = Some(header_name(rest));
        } else if let Some(rest) = line.strip_prefix("+++ ") {
            let new = header_name(rest);
            // The new name, and the old one when it differs (a rename, a deletion): both change.
            for name in [Some(new), old].into_iter().flatten() {
                if name != "/dev/null" {
                    out.extend(strip_components(name, strip));
                }
            }
            old = None;
        } else if let Some(from) = line.strip_prefix("rename from ") {
            out.push(from.trim().to_owned());
        } else if let Some(to) = line.strip_prefix("rename to ") {
            out.push(to.trim().to_owned());
        }
    }
    let mut seen: Vec<String> = Vec::with_capacity(out.len());
    for o in out {
        if !o.is_empty() && !seen.contains(&o) {
            seen.push(o);
        }
    }
    seen
}

/// The name in a `---`/`+++` header: up to a tab (the timestamp), quotes of git's quoted names
/// removed.
fn header_name(rest: &str) -> &str {
    let name = rest.split('\t').next().unwrap_or(rest).trim_end();
    name.strip_prefix('"')
        .and_then(|n| n.strip_suffix('"'))
        .unwrap_or(name)
}

fn strip_components(name: &str, n: usize) -> Option<String> {
    if n == 0 {
        return Some(name.to_owned());
    }
    let mut parts = name.splitn(n + 1, '/');
    let rest = parts.nth(n)?;
    Some(rest.to_owned())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_come_from_the_headers() {
        let diff = "diff --git a/src/x.rs b/src/x.rs\n--- a/src/x.rs\n+++ b/src/x.rs\n@@ -1 +1 @@\n-a\n+b\n";
        assert_eq!(diff_targets(diff, 1), vec!["src/x.rs"]);
        assert_eq!(diff_targets(diff, 0), vec!["b/src/x.rs", "a/src/x.rs"]);
    }

    #[test]
    fn a_deleted_file_is_named_by_its_old_header() {
        let diff = "--- a/old.txt\t2024-01-01\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        assert_eq!(diff_targets(diff, 1), vec!["old.txt"]);
        let added = "--- /dev/null\n+++ b/new.txt\n@@ -0,0 +1 @@\n+x\n";
        assert_eq!(diff_targets(added, 1), vec!["new.txt"]);
    }

    #[test]
    fn renames_name_both_sides() {
        let diff =
            "diff --git a/a.rs b/b.rs\nsimilarity index 100%\nrename from a.rs\nrename to b.rs\n";
        assert_eq!(diff_targets(diff, 1), vec!["a.rs", "b.rs"]);
    }
}
