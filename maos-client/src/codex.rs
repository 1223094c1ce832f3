//! Codex's trust of maos's hooks. Codex runs a hook from a `hooks.json` only once it is
//! trusted: `[hooks.state."<key>"] trusted_hash = "<hash>"` in `$CODEX_HOME/config.toml`
//! (default `~/.codex`), where the key is `<absolute hooks.json>:<event>:<group>:<handler>`
//! (the event in snake case, the group's index in that event's list, the handler's in the
//! group) and the hash is `sha256:` + the SHA-256 of the hook's normalized identity as
//! compact JSON with sorted keys: `{"event_name", "hooks": [{"async", "command", "timeout",
//! "type"}], "matcher"}` (checked against `codex app-server`'s `hooks/list`, Codex 0.169.0 and
//! 0.171.0).
//! A project's `.codex/hooks.json` is read at all only in a trusted project:
//! `[projects."<root>"] trust_level = "trusted"`. Codex's own `/hooks` review writes the
//! first with `config/batchWrite`; this module writes exactly that for maos's entries, and
//! the project's trust, marked so that uninstall removes only what it wrote.

use std::path::{Path, PathBuf};

use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use toml_edit::{DocumentMut, Item, Table, value};

/// Marks a project trust entry that `maos install-hooks --codex` wrote (a TOML comment).
const MARK: &str =
    "# trusted by `maos install-hooks --codex`; `maos uninstall-hooks --codex` removes it\n";

/// Codex's home: `$CODEX_HOME`, else `~/.codex`.
pub fn home() -> Result<PathBuf, String> {
    if let Some(h) = std::env::var_os("CODEX_HOME").filter(|h| !h.is_empty()) {
        let h = PathBuf::from(h);
        // Codex resolves its home to an absolute path; its keys are written with it.
        return Ok(std::fs::canonicalize(&h).unwrap_or(h));
    }
    std::env::var_os("HOME")
        .filter(|h| !h.is_empty())
        .map(|h| PathBuf::from(h).join(".codex"))
        .ok_or_else(|| "neither CODEX_HOME nor HOME is set: cannot find Codex's config".into())
}

/// Codex's label of an event in keys and hashes (`PreToolUse` → `pre_tool_use`).
fn label(event: &str) -> String {
    let mut out = String::new();
    for (i, c) in event.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                out.push('_');
            }
            out.push(c.to_ascii_lowercase());
        } else {
            out.push(c);
        }
    }
    out
}

/// The hash Codex computes for one command hook (its `currentHash`).
pub fn hook_hash(event: &str, matcher: Option<&str>, command: &str, timeout: u64) -> String {
    // Codex ignores the matcher of these events.
    let matcher = matcher.filter(|_| !matches!(event, "UserPromptSubmit" | "Stop"));
    // Keys in sorted order, whatever serde_json's map keeps.
    let mut handler = Map::new();
    handler.insert("async".into(), Value::Bool(false));
    handler.insert("command".into(), Value::String(command.into()));
    handler.insert("timeout".into(), Value::from(timeout.max(1)));
    handler.insert("type".into(), Value::String("command".into()));
    let mut identity = Map::new();
    identity.insert("event_name".into(), Value::String(label(event)));
    identity.insert("hooks".into(), Value::Array(vec![Value::Object(handler)]));
    if let Some(m) = matcher {
        identity.insert("matcher".into(), Value::String(m.into()));
    }
    let text = Value::Object(identity).to_string();
    let digest = Sha256::digest(text.as_bytes());
    let hex: String = digest.iter().map(|b| format!("{b:02x}")).collect();
    format!("sha256:{hex}")
}

/// One hook of maos as Codex keys it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    pub key: String,
    pub hash: String,
}

/// maos's hooks in the `hooks.json` at `path` (its settings already read), keyed as Codex
/// keys them: every handler whose command is maos's (`is_maos`), with its hash.
pub fn entries(
    path: &Path,
    settings: &Map<String, Value>,
    is_maos: impl Fn(&str) -> bool,
) -> Vec<Entry> {
    let Some(Value::Object(hooks)) = settings.get("hooks") else {
        return Vec::new();
    };
    let mut out = Vec::new();
    for (event, groups) in hooks {
        let Some(groups) = groups.as_array() else {
            continue;
        };
        for (g, group) in groups.iter().enumerate() {
            let matcher = group.get("matcher").and_then(Value::as_str);
            let Some(handlers) = group.get("hooks").and_then(Value::as_array) else {
                continue;
            };
            for (h, handler) in handlers.iter().enumerate() {
                let Some(command) = handler.get("command").and_then(Value::as_str) else {
                    continue;
                };
                if !is_maos(command) {
                    continue;
                }
                let timeout = handler
                    .get("timeout")
                    .and_then(Value::as_u64)
                    .unwrap_or(600);
                out.push(Entry {
                    key: format!("{}:{}:{g}:{h}", path.display(), label(event)),
                    hash: hook_hash(event, matcher, command, timeout),
                });
            }
        }
    }
    out
}

/// Codex's `config.toml`, read and parsed (a missing file is an empty one).
pub struct Config {
    pub path: PathBuf,
    doc: DocumentMut,
    original: String,
}

/// How Codex sees one of maos's hooks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Status {
    Trusted,
    /// No trust entry: Codex skips it.
    Untrusted,
    /// Trusted for another hook at that place (another command, matcher or timeout, e.g.
    /// written by an older maos): Codex skips it.
    Changed,
}

impl Config {
    pub fn read(home: &Path) -> Result<Config, String> {
        let path = home.join("config.toml");
        let original = match std::fs::read_to_string(&path) {
            Ok(t) => t,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
            Err(e) => return Err(format!("{}: {e}; nothing was changed", path.display())),
        };
        let doc: DocumentMut = original.parse().map_err(|e: toml_edit::TomlError| {
            format!(
                "{}: not valid TOML ({}); nothing was changed",
                path.display(),
                maos_core::text::escape_controls(&e.to_string())
            )
        })?;
        for (what, item) in [
            ("hooks", doc.get("hooks")),
            ("projects", doc.get("projects")),
        ] {
            if item.is_some_and(|i| !i.is_table_like()) {
                return Err(format!(
                    "{}: `{what}` is not a table; nothing was changed",
                    path.display()
                ));
            }
        }
        if doc
            .get("hooks")
            .and_then(|h| h.get("state"))
            .is_some_and(|s| !s.is_table_like())
        {
            return Err(format!(
                "{}: `hooks.state` is not a table; nothing was changed",
                path.display()
            ));
        }
        Ok(Config {
            path,
            doc,
            original,
        })
    }

    fn state(&self, key: &str) -> Option<&Item> {
        self.doc.get("hooks")?.get("state")?.get(key)
    }

    pub fn status(&self, entry: &Entry) -> Status {
        match self
            .state(entry.key.as_str())
            .and_then(|s| s.get("trusted_hash"))
            .and_then(Item::as_str)
        {
            Some(h) if h == entry.hash => Status::Trusted,
            Some(_) => Status::Changed,
            None => Status::Untrusted,
        }
    }

    /// Whether Codex trusts the project at `root` (so that it reads its `.codex/`).
    pub fn project_trusted(&self, root: &Path) -> bool {
        self.doc
            .get("projects")
            .and_then(|p| p.get(root.display().to_string().as_str()))
            .and_then(|p| p.get("trust_level"))
            .and_then(Item::as_str)
            == Some("trusted")
    }

    /// Trust `entries` as Codex's review does (`[hooks.state."<key>"] trusted_hash`).
    pub fn trust(&mut self, entries: &[Entry]) {
        let hooks = table(self.doc.as_table_mut(), "hooks", true);
        let state = table(hooks, "state", false);
        for e in entries {
            let t = table(state, &e.key, false);
            t["trusted_hash"] = value(e.hash.as_str());
        }
    }

    /// Trust the project at `root`, marked as maos's doing.
    pub fn trust_project(&mut self, root: &Path) {
        let projects = table(self.doc.as_table_mut(), "projects", true);
        let t = table(projects, &root.display().to_string(), false);
        t["trust_level"] = value("trusted");
        t.decor_mut().set_prefix(format!("\n{MARK}"));
    }

    /// Remove the trust of `entries` where it is still the trust install wrote (the same
    /// hash), and the project's trust if maos wrote it; tables this leaves empty go too.
    /// True when something was removed.
    pub fn untrust(&mut self, entries: &[Entry], root: Option<&Path>) -> bool {
        let mut changed = false;
        if let Some(state) = self
            .doc
            .get_mut("hooks")
            .and_then(|h| h.get_mut("state"))
            .and_then(Item::as_table_like_mut)
        {
            for e in entries {
                let Some(t) = state.get_mut(&e.key).and_then(Item::as_table_like_mut) else {
                    continue;
                };
                if t.get("trusted_hash").and_then(Item::as_str) == Some(e.hash.as_str()) {
                    t.remove("trusted_hash");
                    changed = true;
                    if t.is_empty() {
                        state.remove(&e.key);
                    }
                }
            }
        }
        if let Some(root) = root {
            let key = root.display().to_string();
            if let Some(projects) = self.doc.get_mut("projects").and_then(Item::as_table_mut) {
                let ours = projects
                    .get(&key)
                    .and_then(Item::as_table)
                    .and_then(|t| t.decor().prefix())
                    .and_then(|p| p.as_str())
                    .is_some_and(|p| p.contains(MARK.trim_end()));
                if ours {
                    projects.remove(&key);
                    changed = true;
                }
            }
        }
        if changed {
            prune(self.doc.as_table_mut(), "hooks", Some("state"));
            prune(self.doc.as_table_mut(), "projects", None);
        }
        changed
    }

    /// The text to write, `None` when nothing changed.
    pub fn text(&self) -> Option<String> {
        let text = self.doc.to_string();
        (text != self.original).then_some(text)
    }
}

/// The table `name` of `parent`, created when missing (`implicit`: written only through its
/// sub-tables, as Codex writes `hooks` and `projects`).
fn table<'a>(parent: &'a mut Table, name: &str, implicit: bool) -> &'a mut Table {
    if !parent.contains_key(name) {
        let mut t = Table::new();
        t.set_implicit(implicit);
        parent.insert(name, Item::Table(t));
    }
    let item = &mut parent[name];
    if let Some(inline) = item.as_inline_table().cloned() {
        // `hooks = { ... }` or `state = {}`: the same table, as a header (entries kept).
        *item = Item::Table(inline.into_table());
    }
    // `Config::read` refused anything else.
    match item.as_table_mut() {
        Some(t) => t,
        None => unreachable!("checked by Config::read"),
    }
}

/// Drop `parent.name.sub` and `parent.name` where they are now empty.
fn prune(parent: &mut Table, name: &str, sub: Option<&str>) {
    let Some(t) = parent.get_mut(name).and_then(Item::as_table_like_mut) else {
        return;
    };
    if let Some(sub) = sub
        && t.get(sub)
            .and_then(Item::as_table_like)
            .is_some_and(|s| s.is_empty())
    {
        t.remove(sub);
    }
    if t.is_empty() {
        parent.remove(name);
    }
}

/// Whether this process can ask its user: stdin and stderr are a terminal.
pub fn can_ask() -> bool {
    // SAFETY: isatty has no preconditions.
    unsafe { libc::isatty(0) == 1 && libc::isatty(2) == 1 }
}

/// Ask on the terminal; true for an answer starting with `y`.
pub fn ask(question: &str) -> bool {
    use std::io::Write;
    let mut err = std::io::stderr().lock();
    let _ = write!(err, "{question} [y/N] ");
    let _ = err.flush();
    let mut line = String::new();
    std::io::stdin().read_line(&mut line).is_ok()
        && line.trim_start().to_ascii_lowercase().starts_with('y')
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hashes `codex app-server` (0.169.0) reported for these hooks.
    #[test]
    fn the_hash_is_codexs() {
        assert_eq!(
            hook_hash(
                "PreToolUse",
                Some("apply_patch"),
                "maos hook --cli codex",
                10
            ),
            "sha256:8ec8caf9904ad4d4bbc4d90bcef0f381e1c1fc7928408497b13d4afd93f3658f"
        );
        assert_eq!(
            hook_hash("SessionStart", None, "maos hook --cli codex", 10),
            "sha256:455eac03ea0484684a6b3eb2d7b5948e39546e49c159290aac9830ca29184828"
        );
        assert_eq!(label("UserPromptSubmit"), "user_prompt_submit");
    }

    fn config(text: &str) -> Result<Config, String> {
        let dir =
            std::env::temp_dir().join(format!("maos-codex-{}-{}", std::process::id(), text.len()));
        std::fs::create_dir_all(&dir).expect("dir");
        std::fs::write(dir.join("config.toml"), text).expect("write");
        let c = Config::read(&dir);
        let _ = std::fs::remove_dir_all(&dir);
        c
    }

    /// Trust is added beside whatever is there, and taken away again to the byte.
    #[test]
    fn trust_and_untrust_leave_the_rest_alone() {
        let original = "# mine\nmodel = \"x\" # keep\n\n[hooks.state.\"/other:stop:0:0\"]\ntrusted_hash = \"sha256:1\"\n\n[projects.\"/p\"]\ntrust_level = \"untrusted\"\n";
        let mut c = config(original).expect("valid");
        let e = Entry {
            key: "/r/.codex/hooks.json:pre_tool_use:0:0".into(),
            hash: "sha256:abc".into(),
        };
        assert_eq!(c.status(&e), Status::Untrusted);
        c.trust(std::slice::from_ref(&e));
        c.trust_project(Path::new("/r"));
        let text = c.text().expect("changed");
        assert!(text.starts_with("# mine\nmodel = \"x\" # keep\n"), "{text}");
        assert!(
            text.contains(&format!(
                "\n{MARK}[projects.\"/r\"]\ntrust_level = \"trusted\"\n"
            )),
            "{text}"
        );
        assert!(
            text.contains("[hooks.state.\"/r/.codex/hooks.json:pre_tool_use:0:0\"]\ntrusted_hash = \"sha256:abc\""),
            "{text}"
        );
        let mut c = config(&text).expect("valid");
        assert_eq!(c.status(&e), Status::Trusted);
        assert!(c.project_trusted(Path::new("/r")));
        assert!(!c.project_trusted(Path::new("/p")));
        let other = Entry {
            hash: "sha256:def".into(),
            ..e.clone()
        };
        assert_eq!(c.status(&other), Status::Changed);
        // Another hash at that key is not ours to remove.
        assert!(!c.untrust(std::slice::from_ref(&other), None));
        assert!(c.untrust(std::slice::from_ref(&e), Some(Path::new("/r"))));
        assert_eq!(c.text().expect("changed"), original);
    }

    /// Into an empty file: the tables Codex's review writes.
    #[test]
    fn trust_in_an_empty_file_is_what_codex_writes() {
        let mut c = config("").expect("valid");
        c.trust(&[Entry {
            key: "/h/hooks.json:stop:0:0".into(),
            hash: "sha256:1".into(),
        }]);
        assert_eq!(
            c.text().expect("changed"),
            "[hooks.state]\n\n[hooks.state.\"/h/hooks.json:stop:0:0\"]\ntrusted_hash = \"sha256:1\"\n"
        );
        let mut c = config(&c.text().expect("text")).expect("valid");
        assert!(c.untrust(
            &[Entry {
                key: "/h/hooks.json:stop:0:0".into(),
                hash: "sha256:1".into()
            }],
            None
        ));
        assert_eq!(c.text().expect("changed"), "");
    }

    /// Files Codex could not read either, or whose tables are something else: refused in one
    /// line.
    #[test]
    fn hostile_config_files_are_refused_in_one_line() {
        for bad in [
            "model = ",
            "[hooks\n",
            "hooks = 3\n",
            "hooks = \"x\"\n",
            "[hooks]\nstate = 1\n",
            "projects = [1]\n",
            "a = 1\na = 2\n",
            "\u{0}",
        ] {
            let e = match config(bad) {
                Err(e) => e,
                Ok(_) => panic!("accepted {bad:?}"),
            };
            assert!(
                e.contains("nothing was changed") && !e.contains('\n'),
                "{e:?}"
            );
        }
        // Inline tables are tables: trust goes in beside what they hold.
        let mut c = config("hooks = { state = { \"k\" = { trusted_hash = \"sha256:0\" } } }\n")
            .expect("valid");
        c.trust(&[Entry {
            key: "/x:stop:0:0".into(),
            hash: "sha256:1".into(),
        }]);
        let c = config(&c.text().expect("changed")).expect("still valid");
        assert_eq!(
            c.status(&Entry {
                key: "k".into(),
                hash: "sha256:0".into()
            }),
            Status::Trusted
        );
        assert_eq!(
            c.status(&Entry {
                key: "/x:stop:0:0".into(),
                hash: "sha256:1".into()
            }),
            Status::Trusted
        );
    }
}
