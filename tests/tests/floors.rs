//! The floors hold (issue 33 §2): in every crate and binary, no module imports from a module
//! above it (its parent, or the crate root where an item is defined rather than re-exported),
//! and no module imports one that imports it back (no circle between the children of one
//! module). Read from the source: every `crate::`/`super::` path and `use` tree, with `pub use`
//! re-exports followed to the module that defines the item. Test modules are left out: they
//! exist to import what they test.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

type Module = Vec<String>;

/// Every source file of a crate's `src`, by module path (the root is `[]`).
fn modules(src: &Path) -> BTreeMap<Module, PathBuf> {
    let mut out = BTreeMap::new();
    let mut dirs = vec![src.to_path_buf()];
    while let Some(dir) = dirs.pop() {
        for entry in std::fs::read_dir(&dir).expect("a source directory") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                dirs.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let rel = path
                .strip_prefix(src)
                .expect("under src")
                .with_extension("");
            let mut parts: Vec<String> = rel
                .components()
                .map(|c| c.as_os_str().to_string_lossy().into_owned())
                .collect();
            if parts.first().is_some_and(|p| p == "bin") {
                continue;
            }
            if parts == ["lib"] || parts == ["main"] {
                parts.clear();
            } else if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            out.insert(parts, path);
        }
    }
    out
}

fn is_test(m: &Module) -> bool {
    m.last()
        .is_some_and(|n| n == "tests" || n.ends_with("_tests"))
}

/// The code of a file without comments, string and char literals, and its inline test module.
fn code(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let b = text.as_bytes();
    let mut i = 0;
    while i < b.len() {
        match b[i] {
            b'/' if b.get(i + 1) == Some(&b'/') => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                i += 1;
                while i < b.len() && b[i] != b'"' {
                    i += if b[i] == b'\\' { 2 } else { 1 };
                }
                i += 1;
                out.push_str("\"\"");
            }
            b'\'' if b.get(i + 2) == Some(&b'\'') || (b.get(i + 1) == Some(&b'\\')) => {
                // A char literal ('x' or '\n', '\''): skipped whole.
                let end = text[i + 1..].find('\'').map_or(b.len(), |e| i + 1 + e);
                let end = if b.get(i + 1) == Some(&b'\\') && b.get(i + 2) == Some(&b'\'') {
                    i + 3
                } else {
                    end
                };
                i = end + 1;
            }
            _ => {
                let ch = text[i..].chars().next().expect("a char");
                out.push(ch);
                i += ch.len_utf8();
            }
        }
    }
    // The inline test module (always last in this code base) imports what it tests.
    if let Some(at) = find_test_module(&out) {
        out.truncate(at);
    }
    out
}

fn find_test_module(code: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = code[from..].find("#[cfg(test)]") {
        let at = from + i;
        let rest = code[at + "#[cfg(test)]".len()..].trim_start();
        if let Some(after) = rest.strip_prefix("mod ") {
            let name_end = after.find(|c: char| !c.is_alphanumeric() && c != '_')?;
            if after[name_end..].trim_start().starts_with('{') {
                return Some(at);
            }
        }
        from = at + 1;
    }
    None
}

/// What one crate's files re-export: `(module, name) → module path it names`, and the
/// modules each module glob-re-exports.
#[derive(Default)]
struct Exports {
    named: BTreeMap<(Module, String), Module>,
    globs: BTreeMap<Module, Vec<Module>>,
}

fn words(path: &str) -> Vec<String> {
    path.split("::")
        .map(|w| w.trim().to_string())
        .filter(|w| !w.is_empty())
        .collect()
}

/// Every path of a `use` tree (`a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e`).
fn expand(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let name = tree.split(" as ").next().unwrap_or("").trim();
        return if name.is_empty() {
            vec![]
        } else {
            vec![name.to_string()]
        };
    };
    let prefix = tree[..open].trim().trim_end_matches("::");
    let close = tree.rfind('}').unwrap_or(tree.len());
    let inner = &tree[open + 1..close];
    let (mut parts, mut depth, mut cur) = (Vec::new(), 0, String::new());
    for c in inner.chars() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(std::mem::take(&mut cur));
                continue;
            }
            _ => {}
        }
        cur.push(c);
    }
    parts.push(cur);
    parts
        .iter()
        .flat_map(|p| expand(p))
        .map(|e| match (prefix.is_empty(), e.as_str()) {
            (true, _) => e,
            (false, "self") => prefix.to_string(),
            (false, _) => format!("{prefix}::{e}"),
        })
        .collect()
}

/// Every `use` statement of `code`: (is it `pub`, its tree).
fn uses(code: &str) -> Vec<(bool, String)> {
    let mut out = Vec::new();
    let mut from = 0;
    while let Some(i) = code[from..].find("use ") {
        let at = from + i;
        from = at + 4;
        let before = code[..at].trim_end();
        let starts = before.is_empty()
            || before.ends_with(';')
            || before.ends_with('}')
            || before.ends_with('{')
            || before.ends_with(']')
            || before.ends_with("pub")
            || before.ends_with(')');
        if !starts || code[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let Some(end) = code[at..].find(';') else {
            break;
        };
        let public = before.ends_with("pub") || before.ends_with(')') && before.contains("pub(");
        out.push((public, code[at + 4..at + end].to_string()));
    }
    out
}

/// `path` as written in module `m`, made absolute (`crate::`/`super::`/`self::`); `None` for
/// an external crate's path.
fn absolute(m: &Module, path: &[String]) -> Option<Module> {
    let (head, rest) = path.split_first()?;
    let mut base = match head.as_str() {
        "crate" => Vec::new(),
        "super" => m[..m.len().checked_sub(1)?].to_vec(),
        "self" => m.clone(),
        _ => return None,
    };
    let mut rest = rest;
    while let Some(("super", more)) = rest.split_first().map(|(h, r)| (h.as_str(), r)) {
        base.pop();
        rest = more;
    }
    base.extend(rest.iter().filter(|w| *w != "*" && *w != "self").cloned());
    Some(base)
}

fn exports(mods: &BTreeMap<Module, PathBuf>, texts: &BTreeMap<Module, String>) -> Exports {
    let mut ex = Exports::default();
    for m in mods.keys() {
        for (public, tree) in uses(&texts[m]) {
            if !public {
                continue;
            }
            for path in expand(&tree) {
                let mut w = words(&path);
                if !matches!(
                    w.first().map(String::as_str),
                    Some("crate" | "self" | "super")
                ) {
                    w.insert(0, "self".into());
                }
                let glob = w.last().is_some_and(|l| l == "*");
                let Some(abs) = absolute(m, &w) else { continue };
                if glob {
                    ex.globs.entry(m.clone()).or_default().push(abs);
                } else if let Some((name, module)) = abs.split_last() {
                    ex.named.insert((m.clone(), name.clone()), module.to_vec());
                }
            }
        }
    }
    ex
}

/// Whether `text` defines `name` itself (not through a re-export).
fn defines(text: &str, name: &str) -> bool {
    [
        "struct",
        "enum",
        "fn",
        "type",
        "const",
        "trait",
        "static",
        "mod",
        "union",
        "macro_rules!",
    ]
    .iter()
    .any(|kw| {
        let mut from = 0;
        let needle = format!("{kw} {name}");
        while let Some(i) = text[from..].find(&needle) {
            let end = from + i + needle.len();
            if !text[end..].starts_with(|c: char| c.is_alphanumeric() || c == '_') {
                return true;
            }
            from = end;
        }
        false
    })
}

/// The module a path names: its longest module prefix, followed through re-exports when the
/// item after it is only re-exported there.
fn resolve(
    path: &[String],
    mods: &BTreeMap<Module, PathBuf>,
    texts: &BTreeMap<Module, String>,
    ex: &Exports,
    depth: usize,
) -> Option<Module> {
    for k in (0..=path.len()).rev() {
        let m = path[..k].to_vec();
        if !mods.contains_key(&m) {
            continue;
        }
        let Some(name) = path.get(k) else {
            return Some(m);
        };
        if depth < 8 {
            if let Some(target) = ex.named.get(&(m.clone(), name.clone())) {
                let mut next = target.clone();
                next.extend(path[k..].iter().cloned());
                return resolve(&next, mods, texts, ex, depth + 1).or(Some(m));
            }
            if !defines(&texts[&m], name) {
                for g in ex.globs.get(&m).into_iter().flatten() {
                    if g != &m && mods.contains_key(g) && defines(&texts[g], name) {
                        return Some(g.clone());
                    }
                }
                // Re-exported by a glob from outside the crate, or a glob of a glob.
                if let Some(g) = ex.globs.get(&m).and_then(|g| g.first())
                    && mods.contains_key(g)
                {
                    return Some(g.clone());
                }
            }
        }
        return Some(m);
    }
    None
}

/// The modules `m`'s code names.
fn targets(
    m: &Module,
    mods: &BTreeMap<Module, PathBuf>,
    texts: &BTreeMap<Module, String>,
    ex: &Exports,
) -> BTreeSet<Module> {
    let text = &texts[m];
    let mut paths: Vec<Vec<String>> = Vec::new();
    for (_, tree) in uses(text) {
        for p in expand(&tree) {
            paths.push(words(&p));
        }
    }
    // Paths in expressions and types: `crate::a::b(…)`, `super::X`.
    for head in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = text[from..].find(head) {
            let at = from + i;
            from = at + head.len();
            if text[..at].ends_with(|c: char| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let end = text[at..]
                .find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':'))
                .map_or(text.len(), |e| at + e);
            // `crate::{…}` is a use tree, read above.
            if !text[at..end].ends_with("::") {
                paths.push(words(&text[at..end]));
            }
        }
    }
    paths
        .iter()
        .filter_map(|p| absolute(m, p))
        .filter_map(|abs| resolve(&abs, mods, texts, ex, 0))
        .filter(|t| t != m && !is_test(t))
        .collect()
}

/// The arrows running back up, and the circles, of the crate whose sources are in `src`.
fn floors(src: &Path) -> (Vec<String>, Vec<String>) {
    let mods = modules(src);
    let texts: BTreeMap<Module, String> = mods
        .iter()
        .map(|(m, p)| {
            (
                m.clone(),
                code(&std::fs::read_to_string(p).expect("a source file")),
            )
        })
        .collect();
    let ex = exports(&mods, &texts);
    let name = |m: &Module| {
        if m.is_empty() {
            "crate".to_string()
        } else {
            m.join("::")
        }
    };
    let mut up = Vec::new();
    let mut sib: BTreeMap<Module, BTreeSet<Module>> = BTreeMap::new();
    for m in mods.keys().filter(|m| !is_test(m)) {
        for t in targets(m, &mods, &texts, &ex) {
            if t.len() < m.len() && m.starts_with(&t) {
                up.push(format!("{} -> {}", name(m), name(&t)));
                continue;
            }
            if m.len() < t.len() && t.starts_with(m) {
                continue;
            }
            let k = m.iter().zip(&t).take_while(|(a, b)| a == b).count();
            sib.entry(m[..=k].to_vec())
                .or_default()
                .insert(t[..=k].to_vec());
        }
    }
    // A circle: two children of one module that reach each other.
    let reach = |from: &Module| {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(x) = todo.pop() {
            for y in sib.get(&x).into_iter().flatten() {
                if seen.insert(y.clone()) {
                    todo.push(y.clone());
                }
            }
        }
        seen
    };
    let mut circles = BTreeSet::new();
    for a in sib.keys() {
        let from_a = reach(a);
        if from_a.contains(a) {
            let mut members: Vec<String> = from_a
                .iter()
                .filter(|b| reach(b).contains(a))
                .map(&name)
                .collect();
            members.sort();
            circles.insert(members.join(", "));
        }
    }
    (up, circles.into_iter().collect())
}

/// Every crate and binary of the workspace (issue 33's list).
const CRATES: &[&str] = &[
    "maosd",
    "crates/maos-core",
    "crates/maos-proto",
    "crates/maos-store",
    "crates/maos-shell",
    "crates/maos-radar",
    "crates/maos-bench",
    "maos-client",
    "maos-dash",
    "maos-mcp",
    "maos-top",
    "maos-demo",
];

#[test]
fn no_circles_and_nothing_runs_back_up() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let mut problems = Vec::new();
    for krate in CRATES {
        let (up, circles) = floors(&root.join(krate).join("src"));
        problems.extend(up.iter().map(|u| format!("{krate}: imports back up: {u}")));
        problems.extend(circles.iter().map(|c| format!("{krate}: a circle: {c}")));
    }
    assert!(problems.is_empty(), "{}", problems.join("\n"));
}

/// The reading itself finds what it must: an arrow back up and a circle, in a crate made for
/// it (a test that could not fail would guard nothing).
#[test]
fn the_reading_finds_an_arrow_up_and_a_circle() {
    let dir = tempfile::tempdir().expect("a temporary directory");
    let src = dir.path().join("src");
    std::fs::create_dir_all(src.join("a")).expect("mkdir");
    let write = |p: &str, t: &str| std::fs::write(src.join(p), t).expect("write");
    write(
        "lib.rs",
        "mod a;\nmod b;\nmod c;\npub use c::*;\npub struct Root;\n",
    );
    write("a/mod.rs", "mod x;\nmod y;\npub struct Top;\n");
    // x → its parent's own item: up. x ⇄ y: a circle.
    write(
        "a/x.rs",
        "use super::Top;\nuse super::y::Y;\npub struct X;\n",
    );
    write("a/y.rs", "pub struct Y(super::x::X);\n");
    // b → the root's own item: up; b → c's item through the root's glob: sideways.
    write(
        "b.rs",
        "use crate::{C, Root};\n// crate::a::Top in a comment\n",
    );
    write("c.rs", "pub struct C; const S: &str = \"crate::Root\";\n");
    let (up, circles) = floors(&src);
    assert_eq!(up, ["a::x -> a", "b -> crate"], "{up:?}");
    assert_eq!(circles, ["a::x, a::y"], "{circles:?}");
}
