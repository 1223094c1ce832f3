//! git's NUL-separated outputs, read: `git merge-tree --write-tree -z` and name lists
//! (`diff-tree -z --name-only`). Pure.

use std::collections::{BTreeMap, BTreeSet};

/// What `git merge-tree --write-tree -z` printed.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct MergeOutput {
    /// The merged tree (conflicting files hold git's conflict markers).
    pub tree: String,
    /// The files left conflicted, each with git's word for the conflict (`contents`,
    /// `modify/delete`, ...), in path order.
    pub conflicts: BTreeMap<String, String>,
}

/// Reads `git merge-tree --write-tree -z` output: the tree, then one `mode oid stage<TAB>path`
/// entry per conflicted stage, an empty field, then the messages (`count`, that many paths,
/// a type such as `CONFLICT (contents)`, the text). `None` when it is not of that form. Paths
/// that are not UTF-8 are read lossily.
pub fn merge_output(raw: &[u8]) -> Option<MergeOutput> {
    let mut fields = raw
        .split(|&b| b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    read_merge(&mut fields, true)
}

/// Reads the output of `git merge-tree --write-tree -z --stdin` for `n` merges: each is a
/// status (`1` clean, `0` conflicted), then one merge's output as [`merge_output`] reads it,
/// ended by an empty field (a clean merge has no messages). `None` when it is not of that form.
pub fn merge_outputs(raw: &[u8], n: usize) -> Option<Vec<MergeOutput>> {
    let mut fields = raw
        .split(|&b| b == 0)
        .map(|f| String::from_utf8_lossy(f).into_owned());
    let mut outs = Vec::with_capacity(n);
    for _ in 0..n {
        let clean = match fields.next()?.as_str() {
            "1" => true,
            "0" => false,
            _ => return None,
        };
        let out = read_merge(&mut fields, !clean)?;
        if clean != out.conflicts.is_empty() {
            return None;
        }
        outs.push(out);
    }
    Some(outs)
}

/// One merge's output from `fields`: its tree, conflicted entries up to an empty field, and
/// (when `messages`) the messages up to an empty field or the end.
fn read_merge(fields: &mut impl Iterator<Item = String>, messages: bool) -> Option<MergeOutput> {
    let tree = fields.next().filter(|t| is_oid(t))?;
    let mut conflicts = BTreeMap::new();
    // The conflicted entries, up to the empty field (absent altogether after a clean merge
    // with nothing to say).
    for field in fields.by_ref() {
        if field.is_empty() {
            break;
        }
        let (_, path) = field.split_once('\t')?;
        conflicts.insert(path.to_string(), String::from("contents"));
    }
    if !messages {
        return Some(MergeOutput { tree, conflicts });
    }
    // The messages: each conflict message names the kind of conflict of its paths.
    while let Some(count) = fields.next() {
        if count.is_empty() {
            break;
        }
        let count: usize = count.parse().ok()?;
        let paths: Vec<String> = fields.by_ref().take(count).collect();
        let kind = fields.next()?;
        let _text = fields.next()?;
        if let Some(kind) = kind
            .strip_prefix("CONFLICT (")
            .and_then(|k| k.strip_suffix(')'))
        {
            for path in paths {
                if let Some(slot) = conflicts.get_mut(&path)
                    && slot == "contents"
                {
                    *slot = kind.to_string();
                }
            }
        }
    }
    Some(MergeOutput { tree, conflicts })
}

/// A full hexadecimal object id (SHA-1 or SHA-256).
fn is_oid(s: &str) -> bool {
    (s.len() == 40 || s.len() == 64) && s.bytes().all(|b| b.is_ascii_hexdigit())
}

/// The names of a NUL-separated list (`-z --name-only`), UTF-8 ones only: a name git cannot
/// give as UTF-8 is no lock key maos could name either.
pub fn names(raw: &[u8]) -> BTreeSet<String> {
    raw.split(|&b| b == 0)
        .filter(|f| !f.is_empty())
        .filter_map(|f| std::str::from_utf8(f).ok().map(str::to_string))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    const T: &str = "c3fce7ccd9fd20390599210930f985eae027841d";

    #[test]
    fn contents_conflict() {
        let raw = format!(
            "{T}\0100644 de98 1\tf\0100644 f4ea 2\tf\0100644 3b6f 3\tf\0\0\
             1\0f\0Auto-merging\0Auto-merging f\n\0\
             1\0f\0CONFLICT (contents)\0CONFLICT (content): Merge conflict in f\n\0"
        );
        let out = merge_output(raw.as_bytes()).unwrap();
        assert_eq!(out.tree, T);
        assert_eq!(
            out.conflicts.into_iter().collect::<Vec<_>>(),
            vec![("f".into(), "contents".into())]
        );
    }

    #[test]
    fn modify_delete_and_odd_paths() {
        let odd = "sp ace\nnl é";
        let raw = format!(
            "{T}\0100644 de98 1\t{odd}\0100644 3b6f 2\t{odd}\0\0\
             1\0{odd}\0CONFLICT (modify/delete)\0CONFLICT (modify/delete): gone\n\0"
        );
        let out = merge_output(raw.as_bytes()).unwrap();
        assert_eq!(
            out.conflicts.get(odd).map(String::as_str),
            Some("modify/delete")
        );
    }

    #[test]
    fn clean_merges() {
        assert_eq!(
            merge_output(format!("{T}\0").as_bytes())
                .unwrap()
                .conflicts
                .len(),
            0
        );
        let raw = format!("{T}\0\01\0f\0Auto-merging\0Auto-merging f\n\0");
        assert!(merge_output(raw.as_bytes()).unwrap().conflicts.is_empty());
        assert_eq!(merge_output(b"not a tree\0"), None);
        assert_eq!(merge_output(b""), None);
    }

    /// `--stdin`'s output, as git 2.47 writes it: a conflicted merge, a clean one, another
    /// conflicted one.
    #[test]
    fn batched_merges() {
        let conflicted = format!(
            "0\0{T}\0100644 de98 1\tf\0100644 f4ea 2\tf\0100644 3b6f 3\tf\0\0\
             1\0f\0Auto-merging\0Auto-merging f\n\0\
             1\0f\0CONFLICT (contents)\0CONFLICT (content): Merge conflict in f\n\0\0"
        );
        let clean = format!("1\0{T}\0\0");
        let gone = format!(
            "0\0{T}\0100644 de98 1\tg\0100644 3b6f 2\tg\0\0\
             1\0g\0CONFLICT (modify/delete)\0CONFLICT (modify/delete): gone\n\0\0"
        );
        let raw = format!("{conflicted}{clean}{gone}");
        let outs = merge_outputs(raw.as_bytes(), 3).unwrap();
        let kinds: Vec<Vec<(String, String)>> = outs
            .into_iter()
            .map(|o| o.conflicts.into_iter().collect())
            .collect();
        assert_eq!(
            kinds,
            vec![
                vec![("f".to_string(), "contents".to_string())],
                vec![],
                vec![("g".to_string(), "modify/delete".to_string())],
            ]
        );
        // Fewer merges than asked, a status that says clean over conflicts: not understood.
        assert_eq!(merge_outputs(clean.as_bytes(), 2), None);
        assert_eq!(
            merge_outputs(conflicted.replacen('0', "1", 1).as_bytes(), 1),
            None
        );
        assert_eq!(merge_outputs(b"", 0), Some(vec![]));
    }

    #[test]
    fn names_skip_empty_and_non_utf8() {
        let got = names(b"a b\0dir/\xc3\xa9\n\0\xff\xfe\0");
        assert_eq!(
            got.into_iter().collect::<Vec<_>>(),
            vec!["a b".to_string(), "dir/é\n".into()]
        );
    }

    proptest! {
        #[test]
        fn merge_output_never_panics(raw in proptest::collection::vec(any::<u8>(), 0..200)) {
            let _ = merge_output(&raw);
            let _ = merge_outputs(&raw, 3);
            let mut with_tree = format!("{T}\0").into_bytes();
            with_tree.extend(&raw);
            let _ = merge_output(&with_tree);
        }

        /// Every conflicted path given comes back, whatever bytes it holds.
        #[test]
        fn conflicted_paths_read_back(paths in proptest::collection::btree_set("[^\0]{1,12}", 0..5)) {
            let mut raw = format!("{T}\0");
            for p in &paths {
                raw.push_str(&format!("100644 {T} 2\t{p}\0"));
            }
            raw.push('\0');
            let out = merge_output(raw.as_bytes()).unwrap();
            prop_assert_eq!(out.conflicts.keys().cloned().collect::<BTreeSet<_>>(), paths);
        }
    }
}
