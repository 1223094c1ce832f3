//! Each tool's arguments: their JSON schema (what `tools/list` shows a model) and their
//! reading, which refuses anything off the schema in one sentence before anything is asked of
//! the daemon.

use schemars::JsonSchema;
use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::{Map, Value};

/// The most bytes a call's arguments may take, all together.
pub const MAX_ARGS_BYTES: usize = 256 * 1024;
/// The longest path accepted: every way into maos takes the same.
pub const MAX_PATH: usize = maos_core::MAX_PATH;
/// The longest note.
pub const MAX_NOTE: usize = 16 * 1024;
/// The longest session id or prefix.
pub const MAX_ID: usize = 100;
/// The longest lock wait and lease a call may ask for (ten minutes).
pub const MAX_WAIT_MS: u64 = 600_000;
/// The most events one call returns.
pub const MAX_EVENTS: u32 = 500;

/// Read `T` from a call's arguments, or say in one sentence what is wrong with them.
pub fn read<T: DeserializeOwned>(tool: &str, args: &Map<String, Value>) -> Result<T, String> {
    let size = serde_json::to_string(args).map(|s| s.len()).unwrap_or(0);
    if size > MAX_ARGS_BYTES {
        return Err(format!(
            "the arguments of {tool} take {size} bytes, over the {MAX_ARGS_BYTES}-byte limit; send less"
        ));
    }
    serde_json::from_value(Value::Object(args.clone())).map_err(|e| {
        let why = e.to_string();
        // serde_json adds " at line 1 column N" to errors of text, not of values; cut any.
        let why = why.split(" at line ").next().unwrap_or(&why);
        format!(
            "bad arguments for {tool}: {}; see the tool's input schema",
            shortened(&maos_core::text::escape_controls(why))
        )
    })
}

/// The most characters of serde's reason a refusal quotes: it may quote what the caller sent.
const MAX_WHY: usize = 300;

/// `why` cut to [`MAX_WHY`] characters in its middle (what serde quotes of the caller's value
/// is there; what was expected comes last).
fn shortened(why: &str) -> String {
    let n = why.chars().count();
    if n <= MAX_WHY {
        return why.to_string();
    }
    let head: String = why.chars().take(MAX_WHY / 3).collect();
    let tail: String = why.chars().skip(n - (MAX_WHY - MAX_WHY / 3)).collect();
    format!("{head}…{tail}")
}

/// Refuse a text longer than `max` bytes, or one with nothing in it.
pub fn text(what: &str, s: &str, max: usize) -> Result<(), String> {
    if s.trim().is_empty() {
        return Err(format!("{what} is empty"));
    }
    if s.len() > max {
        return Err(format!(
            "{what} is {} bytes, over the {max}-byte limit",
            s.len()
        ));
    }
    if s.contains('\0') {
        return Err(format!("{what} contains a NUL character"));
    }
    Ok(())
}

/// An optional session id or prefix.
pub fn session(s: &Option<String>) -> Result<(), String> {
    match s {
        Some(s) => text("the session", s, MAX_ID),
        None => Ok(()),
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct StatusArgs {
    /// Also list finished sessions (default: live ones only).
    #[serde(default)]
    pub all: bool,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct PathArgs {
    /// The file or directory, absolute or relative to the project's root.
    pub path: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SessionArgs {
    /// A session id or unique prefix (default: the caller's session for brief, else the
    /// project's active session).
    #[serde(default)]
    pub session: Option<String>,
}

/// What a lock covers and whether it is shared.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// Shared with other readers; no one writes the path meanwhile.
    Read,
    /// Exclusive on exactly one file.
    Write,
    /// Exclusive on a directory and everything under it.
    Directory,
    /// Exclusive on the whole project (the path is ignored).
    Workspace,
}

impl From<Mode> for maos_core::LockMode {
    fn from(m: Mode) -> Self {
        match m {
            Mode::Read => maos_core::LockMode::Read,
            Mode::Write => maos_core::LockMode::Write,
            Mode::Directory => maos_core::LockMode::Directory,
            Mode::Workspace => maos_core::LockMode::Workspace,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct AcquireArgs {
    /// The file or directory, absolute or relative to the project's root.
    pub path: String,
    /// read, write, directory or workspace.
    pub mode: Mode,
    /// How long to wait for the lock when others hold it, in milliseconds (0 or absent: do
    /// not wait; at most 600000).
    #[serde(default)]
    pub wait_ms: Option<u64>,
    /// Lease length in milliseconds (default: the daemon's, 10 minutes); renew it with
    /// lock_renew before it runs out.
    #[serde(default)]
    pub ttl_ms: Option<u64>,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoArgs {}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct CheckArgs {
    /// The file or directory, absolute or relative to the project's root.
    pub path: String,
    /// read, write, directory or workspace (default: write).
    #[serde(default)]
    pub mode: Option<Mode>,
}

/// One item of a task list.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct Item {
    /// What the item is, in one line.
    pub content: String,
    /// pending, in_progress or completed.
    pub status: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ProgressArgs {
    /// The whole task list as it stands now (it replaces the last one; at most 100 items).
    pub items: Vec<Item>,
}

/// What a note records.
#[derive(Clone, Copy, Debug, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Kind {
    /// A decision and why.
    Decision,
    /// Work finished, and its outcome.
    Done,
    /// An error or a blocker.
    Error,
    /// Work still to do.
    Pending,
}

impl From<Kind> for maos_core::record::NoteKind {
    fn from(k: Kind) -> Self {
        use maos_core::record::NoteKind as N;
        match k {
            Kind::Decision => N::Decision,
            Kind::Done => N::Done,
            Kind::Error => N::Error,
            Kind::Pending => N::Pending,
        }
    }
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct NoteArgs {
    /// decision, done, error or pending.
    pub kind: Kind,
    /// The note, short and specific (at most 16 KiB).
    pub text: String,
}

#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct EventsArgs {
    /// Only events after this sequence number (the `next` of the previous call); absent: the
    /// latest events.
    #[serde(default)]
    pub after: Option<u64>,
    /// At most this many events (default 100, at most 500).
    #[serde(default)]
    pub limit: Option<u32>,
    /// Only events of this session (id or unique prefix).
    #[serde(default)]
    pub session: Option<String>,
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn obj(v: Value) -> Map<String, Value> {
        v.as_object().cloned().unwrap()
    }

    #[test]
    fn a_bad_mode_is_one_sentence_naming_the_choices() {
        let e = read::<AcquireArgs>(
            "lock_acquire",
            &obj(json!({"path": "a", "mode": "exclusive"})),
        )
        .unwrap_err();
        assert!(e.contains("unknown variant `exclusive`"), "{e}");
        assert!(e.contains("`write`"), "{e}");
        assert!(!e.contains('\n'));
    }

    #[test]
    fn unknown_and_missing_fields_and_wrong_types_are_refused() {
        assert!(read::<PathArgs>("who", &obj(json!({"path": "a", "x": 1}))).is_err());
        assert!(read::<PathArgs>("who", &obj(json!({}))).is_err());
        assert!(read::<PathArgs>("who", &obj(json!({"path": 5}))).is_err());
        assert!(
            read::<AcquireArgs>(
                "l",
                &obj(json!({"path": "a", "mode": "read", "wait_ms": -1}))
            )
            .is_err()
        );
    }

    #[test]
    fn huge_arguments_are_refused_by_size() {
        let big = "x".repeat(MAX_ARGS_BYTES + 1);
        let e = read::<NoteArgs>("note", &obj(json!({"kind": "done", "text": big}))).unwrap_err();
        assert!(e.contains("limit"), "{e}");
    }

    #[test]
    fn texts_are_bounded_and_not_empty() {
        assert!(text("the path", "", 10).is_err());
        assert!(text("the path", "  ", 10).is_err());
        assert!(text("the path", "abcdefghijk", 10).is_err());
        assert!(text("the path", "a\0b", 10).is_err());
        assert!(text("the path", "src/a.rs", 10).is_ok());
    }

    /// A bad mode was quoted whole: a newline in it broke the one-line sentence, 100 KB of
    /// it made a 100 KB one.
    #[test]
    fn what_the_caller_sent_never_breaks_the_one_line_sentence() {
        let args = json!({"path": "a", "mode": format!("a\nb{}", "x".repeat(100_000))});
        let e = read::<AcquireArgs>("lock_acquire", args.as_object().unwrap()).unwrap_err();
        assert!(e.contains("expected one of"), "{e}");
        assert!(!e.contains('\n'), "{e:?}");
        assert!(e.len() < 1000, "{} bytes", e.len());
    }
}
