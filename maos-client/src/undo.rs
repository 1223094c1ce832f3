//! What `install-hooks` changed, so that `uninstall-hooks` gives back exactly what was there:
//! for each file install wrote, its text before (or that there was none) and the directories
//! it created for it; and the `.maos/` markers it created. Kept in `$MAOS_HOME/install.json`
//! (removed again when it notes nothing). Uninstall removes maos's entries from a file as
//! before; when what is left means the same as the text before install (the same JSON value;
//! the same TOML text), it writes that text back byte for byte, or removes the file (and the
//! directories install made for it) when there was none. A file changed since in a way that
//! matters keeps its new content, without maos's entries. Never on the hook path.

use std::path::{Path, PathBuf};

use maos_proto::paths;
use serde_json::{Map, Value, json};

const FILE: &str = "install.json";

/// The file's state before install: its text, or none.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Before {
    pub text: Option<String>,
}

/// The notes, as read from `$MAOS_HOME/install.json` (none when maos has no home).
pub struct Notes {
    path: Option<PathBuf>,
    files: Map<String, Value>,
    /// Directories install created for its files (a file's may hold another's).
    dirs: Vec<String>,
    markers: Vec<String>,
    changed: bool,
}

fn key(p: &Path) -> String {
    p.to_string_lossy().into_owned()
}

impl Notes {
    /// The notes; a missing or unreadable file is no notes (uninstall then only strips).
    pub fn load() -> Notes {
        let path = paths::home_dir().ok().map(|h| h.join(FILE));
        let v: Value = path
            .as_ref()
            .and_then(|p| std::fs::read_to_string(p).ok())
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null);
        let files = v["files"].as_object().cloned().unwrap_or_default();
        let list = |k: &str| -> Vec<String> {
            v[k].as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|m| m.as_str().map(String::from))
                        .collect()
                })
                .unwrap_or_default()
        };
        Notes {
            path,
            files,
            dirs: list("dirs"),
            markers: list("markers"),
            changed: false,
        }
    }

    pub fn before(&self, file: &Path) -> Option<Before> {
        let e = self.files.get(&key(file))?;
        Some(Before {
            text: e["before"].as_str().map(String::from),
        })
    }

    /// Note `file`'s state before install's first write (a later install keeps the first),
    /// and the directories `dirs` that writing it creates.
    pub fn note(&mut self, file: &Path, before: Before, dirs: &[PathBuf]) {
        for d in dirs {
            if !self.dirs.contains(&key(d)) {
                self.dirs.push(key(d));
                self.changed = true;
            }
        }
        if self.files.contains_key(&key(file)) {
            return;
        }
        self.files
            .insert(key(file), json!({ "before": before.text }));
        self.changed = true;
    }

    /// Remove the directories install created that are empty now (deepest first), and
    /// forget those that are gone.
    pub fn prune_dirs(&mut self) {
        let mut dirs = self.dirs.clone();
        // Deepest first: a parent empties once its children went.
        dirs.sort_by_key(|d| std::cmp::Reverse(d.len()));
        for d in dirs {
            let p = Path::new(&d);
            if p.is_dir() && std::fs::remove_dir(p).is_err() {
                continue;
            }
            self.dirs.retain(|x| *x != d);
            self.changed = true;
        }
    }

    pub fn forget(&mut self, file: &Path) {
        self.changed |= self.files.remove(&key(file)).is_some();
    }

    /// Install created the `.maos/` marker `dir`.
    pub fn note_marker(&mut self, dir: &Path) {
        if !self.markers.contains(&key(dir)) {
            self.markers.push(key(dir));
            self.changed = true;
        }
    }

    pub fn has_marker(&self, dir: &Path) -> bool {
        self.markers.contains(&key(dir))
    }

    pub fn forget_marker(&mut self, dir: &Path) {
        let before = self.markers.len();
        self.markers.retain(|m| *m != key(dir));
        self.changed |= self.markers.len() != before;
    }

    /// Write the notes back (nothing when unchanged; the file goes when it notes nothing).
    pub fn save(&mut self) -> Result<(), String> {
        let Some(path) = self.path.as_ref().filter(|_| self.changed) else {
            return Ok(());
        };
        if self.files.is_empty() && self.dirs.is_empty() && self.markers.is_empty() {
            return match std::fs::remove_file(path) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(format!("{}: {e}", path.display()))
                }
                _ => Ok(()),
            };
        }
        if let Some(dir) = path.parent() {
            paths::private_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
        }
        let text = serde_json::to_string_pretty(
            &json!({ "files": self.files, "dirs": self.dirs, "markers": self.markers }),
        )
        .map_err(|e| e.to_string())?
            + "\n";
        let tmp = path.with_extension("json.maos-tmp");
        std::fs::write(&tmp, text).map_err(|e| format!("{}: {e}", tmp.display()))?;
        std::fs::rename(&tmp, path).map_err(|e| format!("{}: {e}", path.display()))?;
        self.changed = false;
        Ok(())
    }
}

/// The directories that creating `dir` (and its parents) would make, deepest first.
pub fn missing_dirs(dir: Option<&Path>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut at = dir;
    while let Some(d) = at.filter(|d| !d.as_os_str().is_empty() && !d.exists()) {
        out.push(d.to_path_buf());
        at = d.parent();
    }
    out
}

/// Whether `text`, about to be written to `file`, means what `before` meant: the same JSON
/// value (a missing or blank file is `{}`), or the same TOML text (a missing file is empty).
pub fn same_meaning(file: &Path, text: &str, before: Option<&str>) -> bool {
    let json = file.extension().is_some_and(|e| e == "json");
    if json {
        let parse = |t: &str| -> Option<Value> {
            if t.trim().is_empty() {
                return Some(Value::Object(Map::new()));
            }
            serde_json::from_str(t).ok()
        };
        match (parse(text), parse(before.unwrap_or(""))) {
            (Some(a), Some(b)) => a == b,
            _ => false,
        }
    } else {
        text.trim() == before.unwrap_or("").trim()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn meaning_is_the_value_for_json_and_the_text_for_toml() {
        let j = Path::new("/p/settings.json");
        assert!(same_meaning(j, "{\n  \"a\": 1\n}\n", Some("{\"a\":1}")));
        assert!(same_meaning(j, "{}\n", None));
        assert!(same_meaning(j, "{}\n", Some("")));
        assert!(!same_meaning(j, "{\"a\": 2}", Some("{\"a\":1}")));
        assert!(!same_meaning(j, "{\"a\": 1}", None));
        let t = Path::new("/p/config.toml");
        assert!(same_meaning(t, "", None));
        assert!(same_meaning(t, "\n", None));
        assert!(same_meaning(
            t,
            "model = \"o3\"\n\n",
            Some("model = \"o3\"\n")
        ));
        assert!(!same_meaning(t, "model = \"o3\"\n", None));
        assert!(!same_meaning(t, "model = 'o3'\n", Some("model = \"o3\"\n")));
    }
}
