//! Events: which of a project's events `maos events` and subscriptions want. (The event itself,
//! [`EventRecord`], is a record of the core.)

use maos_core::Ts;
use serde::{Deserialize, Serialize};

/// Filter for `events` and subscriptions. Empty = everything in the project.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct EventFilter {
    #[serde(default)]
    pub session: Option<String>,
    #[serde(default)]
    pub types: Vec<String>,
    #[serde(default)]
    pub agent: Option<String>,
    #[serde(default)]
    pub since: Option<Ts>,
    /// Only events with a larger sequence number.
    #[serde(default)]
    pub after_seq: Option<u64>,
    /// With a `limit`: the oldest matching events instead of the newest, to page forward from
    /// `after_seq`.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oldest_first: bool,
    /// Only events with a smaller sequence number (a page further back).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_seq: Option<u64>,
    /// Only events before this time.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub until: Option<Ts>,
    /// Only events about a path: the text occurs in their `path`, `paths` or `cycle`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub path: Option<String>,
    /// Only events about one of these paths, each as `path` decides it: the events of many
    /// files in one request (`maos radar --lock`). At most [`MAX_FILTER_PATHS`]; with `path`
    /// too, both hold.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub paths: Vec<String>,
    /// Only events whose type or data contain this text (ASCII letters in any case).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub text: Option<String>,
    /// A subscription to one `session`: end once that session has ended (completed, failed or
    /// cancelled), after its history or the live event that ends it, with a `Reply::Done`
    /// answer; then the daemon closes. Whatever the other fields let through.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub until_session_ends: bool,
}

/// The longest `text` a filter takes (its `path` takes [`maos_core::MAX_PATH`]).
pub const MAX_FILTER_TEXT: usize = 1024;

/// The most `paths` a filter takes (each as long as a `path`).
pub const MAX_FILTER_PATHS: usize = 256;

/// How a front end names a filter's fields in its refusals.
#[derive(Clone, Copy, Debug)]
pub struct FilterNames {
    pub path: &'static str,
    pub text: &'static str,
    pub since: &'static str,
    pub until: &'static str,
}

impl FilterNames {
    /// As `maos events` spells them (and the daemon, whoever asks).
    pub const CLI: FilterNames = FilterNames {
        path: "--path",
        text: "--grep",
        since: "--since",
        until: "--until",
    };
}

impl EventFilter {
    /// Refuse a filter that can only be a mistake: an empty or huge text, a time range that
    /// ends before it starts. One line, naming the option as `maos events` spells it.
    pub fn check(&self) -> Result<(), String> {
        self.check_named(&FilterNames::CLI)
    }

    /// [`EventFilter::check`], naming the fields as `names` says.
    pub fn check_named(&self, names: &FilterNames) -> Result<(), String> {
        for (name, v) in [(names.path, &self.path), (names.text, &self.text)] {
            match v.as_deref() {
                Some("") => return Err(format!("{name}: give a non-empty text")),
                // A path takes what every path does.
                Some(t) if name == names.path => {
                    maos_core::check_path_len(t).map_err(|why| format!("{name}: {why}"))?;
                }
                Some(t) if t.len() > MAX_FILTER_TEXT => {
                    return Err(format!(
                        "{name}: {} bytes is too long (at most {MAX_FILTER_TEXT})",
                        t.len()
                    ));
                }
                _ => {}
            }
        }
        if self.paths.len() > MAX_FILTER_PATHS {
            return Err(format!(
                "{}: {} paths are too many in one filter (at most {MAX_FILTER_PATHS})",
                names.path,
                self.paths.len()
            ));
        }
        for p in &self.paths {
            if p.is_empty() {
                return Err(format!("{}: give a non-empty text", names.path));
            }
            maos_core::check_path_len(p).map_err(|why| format!("{}: {why}", names.path))?;
        }
        if let (Some(s), Some(u)) = (&self.since, &self.until)
            && u <= s
        {
            return Err(format!(
                "{} {} is not after {} {}: the range holds nothing",
                names.until,
                maos_core::utc(*u),
                names.since,
                maos_core::utc(*s)
            ));
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_paths(paths: Vec<String>) -> EventFilter {
        EventFilter {
            paths,
            ..EventFilter::default()
        }
    }

    /// `paths` takes what `path` takes, each, and at most [`MAX_FILTER_PATHS`] of them.
    #[test]
    fn paths_are_bounded_as_a_path_is() {
        let many = |n: usize| (0..n).map(|i| format!("src/{i}.rs")).collect();
        assert_eq!(with_paths(many(MAX_FILTER_PATHS)).check(), Ok(()));
        let e = with_paths(many(MAX_FILTER_PATHS + 1)).check().unwrap_err();
        assert!(
            e.contains("257 paths are too many") && e.starts_with("--path"),
            "{e}"
        );
        let e = with_paths(vec!["a".into(), String::new()])
            .check()
            .unwrap_err();
        assert!(e.contains("non-empty"), "{e}");
        let long = "x".repeat(maos_core::MAX_PATH + 1);
        assert!(with_paths(vec![long]).check().is_err());
    }
}
