//! The project key of fleet mode: what names one repository the same on every machine, so that
//! daemons sharing a PostgreSQL agree on which sessions and locks are one project's.
//!
//! The key is `project = "<key>"` in the repository's `.maos/config.toml` when set, else the
//! normalised URL of its `origin` remote: scheme, user, port and a `.git` suffix dropped, the
//! host lower-cased, the path kept as written (hosts such as GitLab tell `Owner` from `owner`),
//! so `git@github.com:Owner/repo.git`, `ssh://git@github.com:22/Owner/repo` and
//! `https://user@GitHub.com/Owner/repo.git/` are all `github.com/Owner/repo`. A remote on this
//! machine's disk (`/srv/repo.git`, `file://…`, `../repo`) names nothing another machine sees:
//! no key. Pure: the caller reads the files.

use std::fmt;

/// Longest key accepted, in bytes.
pub const MAX_KEY_LEN: usize = 256;

/// A project's key in a fleet (non-empty, no whitespace or control characters).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct ProjectKey(String);

impl ProjectKey {
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for ProjectKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// Why a repository has no project key. Each says what to do in one line.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum KeyError {
    #[error(
        "no project key for fleet mode: the repository has no `origin` remote; set \
         project = \"<key>\" in .maos/config.toml"
    )]
    NoOrigin,
    #[error(
        "no project key for fleet mode: origin {0:?} is a path on this machine, which no other \
         machine shares; set project = \"<key>\" in .maos/config.toml"
    )]
    LocalOrigin(String),
    #[error(
        "no project key for fleet mode: origin {url:?} is not a URL maos can read ({why}); set \
         project = \"<key>\" in .maos/config.toml"
    )]
    BadOrigin { url: String, why: &'static str },
    #[error(".maos/config.toml: {0}")]
    BadConfig(String),
}

/// The key of a repository: the `project` of its `.maos/config.toml` (the file's text, if it
/// has one), else its origin's URL normalised (from the text of its git `config`).
pub fn project_key(
    maos_config: Option<&str>,
    git_config: Option<&str>,
) -> Result<ProjectKey, KeyError> {
    if let Some(key) = maos_config.map(configured).transpose()?.flatten() {
        return Ok(key);
    }
    let url = git_config.and_then(origin_url).ok_or(KeyError::NoOrigin)?;
    normalize_origin(&url)
}

/// `project = "…"` of a `.maos/config.toml`, if the file sets it. Other keys are left to their
/// readers; a `project` that is not a usable key is an error, never ignored.
pub fn configured(text: &str) -> Result<Option<ProjectKey>, KeyError> {
    let table: toml::Table = toml::from_str(text).map_err(|e| {
        // toml's message spans several lines (the excerpt of the file); keep its first.
        let msg = e.to_string();
        let first = msg.lines().next().unwrap_or("not valid TOML").trim();
        KeyError::BadConfig(first.trim_end_matches(':').to_string())
    })?;
    let Some(value) = table.get("project") else {
        return Ok(None);
    };
    let Some(s) = value.as_str() else {
        return Err(KeyError::BadConfig(format!(
            "project must be a string (project = \"<key>\"), not {value}"
        )));
    };
    check_key(s).map(Some).map_err(KeyError::BadConfig)
}

fn check_key(s: &str) -> Result<ProjectKey, String> {
    if s.is_empty() {
        return Err("project is empty; name the project (project = \"<key>\")".into());
    }
    if s.len() > MAX_KEY_LEN {
        return Err(format!(
            "project is {} bytes long; at most {MAX_KEY_LEN}",
            s.len()
        ));
    }
    if let Some(c) = s.chars().find(|c| c.is_whitespace() || c.is_control()) {
        return Err(format!(
            "project {s:?} contains {c:?}; a key has no spaces or control characters"
        ));
    }
    Ok(ProjectKey(s.to_string()))
}

/// The first `url` of `[remote "origin"]` in a git `config` file's text.
pub fn origin_url(git_config: &str) -> Option<String> {
    let mut in_origin = false;
    for line in git_config.lines() {
        let line = line.trim();
        if line.starts_with('[') {
            in_origin = is_origin_header(line);
            continue;
        }
        if !in_origin {
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if key.trim().eq_ignore_ascii_case("url") {
            let v = strip_comment(value.trim());
            let v = v
                .strip_prefix('"')
                .and_then(|v| v.strip_suffix('"'))
                .unwrap_or(v);
            return Some(v.to_string());
        }
    }
    None
}

/// `[remote "origin"]` (the section name is case-insensitive, the subsection is not).
fn is_origin_header(line: &str) -> bool {
    let Some(inner) = line.strip_prefix('[').and_then(|l| l.split(']').next()) else {
        return false;
    };
    let mut parts = inner.splitn(2, char::is_whitespace);
    let section = parts.next().unwrap_or("");
    let sub = parts.next().unwrap_or("").trim();
    section.eq_ignore_ascii_case("remote") && sub == "\"origin\""
}

/// A value without its trailing `#` or `;` comment (outside quotes).
fn strip_comment(v: &str) -> &str {
    let mut quoted = false;
    for (i, c) in v.char_indices() {
        match c {
            '"' => quoted = !quoted,
            '#' | ';' if !quoted => return v[..i].trim_end(),
            _ => {}
        }
    }
    v
}

/// A git remote URL as one key: `host/path`.
pub fn normalize_origin(url: &str) -> Result<ProjectKey, KeyError> {
    let bad = |why| KeyError::BadOrigin {
        url: url.to_string(),
        why,
    };
    let u = url.trim();
    if u.is_empty() {
        return Err(bad("it is empty"));
    }
    if u.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err(bad("it contains spaces or control characters"));
    }
    let (authority, path) = if let Some((scheme, rest)) = u.split_once("://") {
        let scheme = scheme.to_ascii_lowercase();
        match scheme.as_str() {
            "file" => return Err(KeyError::LocalOrigin(url.to_string())),
            "ssh" | "git+ssh" | "ssh+git" | "git" | "http" | "https" => {}
            _ => return Err(bad("its scheme is not ssh, git, http or https")),
        }
        rest.split_once('/').unwrap_or((rest, ""))
    } else {
        // scp-like `[user@]host:path`: a colon before any slash (git's own rule). Anything
        // else is a path on this disk.
        match u.split_once(':') {
            Some((host, path)) if !host.contains('/') && !host.is_empty() => (host, path),
            _ => return Err(KeyError::LocalOrigin(url.to_string())),
        }
    };
    let host = host_of(authority).ok_or_else(|| bad("it names no host"))?;
    let path = path.split(['?', '#']).next().unwrap_or("");
    let mut segments: Vec<&str> = path.split('/').filter(|s| !s.is_empty()).collect();
    // `.git` suffixes go (all of them, so that a key read again as a URL gives itself back).
    if let Some(last) = segments.last_mut() {
        while let Some(stem) = last.strip_suffix(".git") {
            *last = stem;
        }
        if last.is_empty() {
            segments.pop();
        }
    }
    if segments.is_empty() {
        return Err(bad("it names no repository"));
    }
    let key = format!("{host}/{}", segments.join("/"));
    check_key(&key).map_err(|_| bad("it is too long for a key"))
}

/// The host of `[user[:password]@]host[:port]` (IPv6 in brackets), lower-cased.
fn host_of(authority: &str) -> Option<String> {
    let hostport = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    let host = if let Some(rest) = hostport.strip_prefix('[') {
        let (inner, _) = rest.split_once(']')?;
        format!("[{inner}]")
    } else {
        hostport.split(':').next().unwrap_or("").to_string()
    };
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    (!host.is_empty() && host != "[]").then_some(host)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    fn key(url: &str) -> String {
        normalize_origin(url)
            .unwrap_or_else(|e| panic!("{url}: {e}"))
            .to_string()
    }

    #[test]
    fn every_spelling_of_one_remote_is_one_key() {
        for url in [
            "git@github.com:Owner/repo.git",
            "git@github.com:Owner/repo",
            "github.com:Owner/repo.git",
            "ssh://git@github.com/Owner/repo.git",
            "ssh://git@github.com:22/Owner/repo",
            "git+ssh://git@github.com/Owner/repo.git",
            "https://github.com/Owner/repo.git",
            "https://github.com/Owner/repo",
            "https://github.com/Owner/repo/",
            "https://github.com/Owner/repo.git/",
            "https://user@GitHub.com/Owner/repo.git",
            "https://user:secret@github.com:443/Owner/repo",
            "HTTPS://GITHUB.COM/Owner/repo",
            "http://github.com//Owner//repo.git",
            "git://github.com/Owner/repo.git",
            "https://github.com./Owner/repo?x=1#frag",
            "  https://github.com/Owner/repo.git\n",
        ] {
            assert_eq!(key(url), "github.com/Owner/repo", "{url}");
        }
    }

    #[test]
    fn what_differs_stays_apart() {
        // The path's case is the host's business (GitLab tells them apart).
        assert_ne!(key("git@host:Owner/repo"), key("git@host:owner/repo"));
        assert_ne!(key("git@host:a/repo"), key("git@other:a/repo"));
        // Groups and subgroups are kept whole.
        assert_eq!(
            key("git@gitlab.com:group/sub/repo.git"),
            "gitlab.com/group/sub/repo"
        );
        assert_eq!(key("ssh://git@[::1]:2222/x/y.git"), "[::1]/x/y");
        assert_eq!(key("https://10.0.0.7:8443/x/y"), "10.0.0.7/x/y");
        // Only the suffix `.git` goes.
        assert_eq!(key("https://h/x/repo.git.git"), "h/x/repo");
        assert_eq!(key("https://h/x/my.github"), "h/x/my.github");
    }

    #[test]
    fn a_remote_on_this_disk_has_no_key() {
        for url in [
            "/srv/git/repo.git",
            "../repo",
            "./repo",
            "repo",
            "file:///srv/git/repo.git",
            "FILE:///srv/repo",
            "/path/with:colon",
        ] {
            assert_eq!(
                normalize_origin(url),
                Err(KeyError::LocalOrigin(url.to_string())),
                "{url}"
            );
        }
        for e in [
            KeyError::NoOrigin,
            KeyError::LocalOrigin("/srv/r.git".into()),
        ] {
            let line = e.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(
                line.contains("project = \"<key>\" in .maos/config.toml"),
                "{line}"
            );
        }
    }

    #[test]
    fn what_cannot_be_read_says_why_in_one_line() {
        for (url, why) in [
            ("", "it is empty"),
            ("https://", "it names no host"),
            ("https://github.com", "it names no repository"),
            ("https://github.com/", "it names no repository"),
            ("https://github.com/.git", "it names no repository"),
            ("git@github.com:", "it names no repository"),
            ("ftp://h/x", "its scheme is not ssh, git, http or https"),
            ("https://h/a b", "it contains spaces or control characters"),
            ("https://user@:22/x", "it names no host"),
        ] {
            let e = normalize_origin(url).expect_err(url);
            assert_eq!(
                e,
                KeyError::BadOrigin {
                    url: url.into(),
                    why
                },
                "{url}"
            );
            let line = e.to_string();
            assert!(!line.contains('\n'), "{line}");
            assert!(line.contains(".maos/config.toml"), "{line}");
        }
    }

    #[test]
    fn the_origin_is_read_from_git_config() {
        let cfg = "[core]\n\tbare = false\n[remote \"upstream\"]\n\turl = git@h:up/repo.git\n\
                   [Remote \"origin\"]\n\tfetch = +refs/heads/*:refs/remotes/origin/*\n\
                   \tURL = \"git@h:me/repo.git\" # mine\n\turl = git@h:second/repo.git\n\
                   [branch \"main\"]\n\tremote = origin\n";
        assert_eq!(origin_url(cfg).as_deref(), Some("git@h:me/repo.git"));
        assert_eq!(origin_url("[remote \"Origin\"]\n\turl = x\n"), None);
        assert_eq!(origin_url("[core]\n\tbare = false\n"), None);
        assert_eq!(
            project_key(None, Some(cfg)).map(|k| k.to_string()),
            Ok("h/me/repo".to_string())
        );
        assert_eq!(project_key(None, Some("[core]\n")), Err(KeyError::NoOrigin));
        assert_eq!(project_key(None, None), Err(KeyError::NoOrigin));
    }

    #[test]
    fn the_config_file_wins_and_is_checked() {
        let git = "[remote \"origin\"]\n\turl = git@h:me/repo.git\n";
        let k = project_key(Some("project = \"acme/web\"\n"), Some(git)).expect("key");
        assert_eq!(k.as_str(), "acme/web");
        // No `project` there: the origin.
        let k = project_key(Some("# nothing yet\nother = 1\n"), Some(git)).expect("key");
        assert_eq!(k.as_str(), "h/me/repo");
        // A configured key is used even without any remote.
        assert!(project_key(Some("project = \"x\""), None).is_ok());
        for (text, want) in [
            (
                "project = 3",
                "project must be a string (project = \"<key>\"), not 3",
            ),
            (
                "project = \"\"",
                "project is empty; name the project (project = \"<key>\")",
            ),
            (
                "project = \"a b\"",
                "project \"a b\" contains ' '; a key has no spaces or control characters",
            ),
        ] {
            assert_eq!(
                project_key(Some(text), Some(git)),
                Err(KeyError::BadConfig(want.to_string())),
                "{text}"
            );
        }
        let long = format!("project = \"{}\"", "k".repeat(MAX_KEY_LEN + 1));
        assert!(matches!(configured(&long), Err(KeyError::BadConfig(_))));
        let e = configured("project = \"unterminated").expect_err("bad toml");
        let line = e.to_string();
        assert!(line.starts_with(".maos/config.toml: "), "{line}");
        assert!(!line.contains('\n'), "{line}");
    }

    fn segment() -> impl Strategy<Value = String> {
        "[A-Za-z0-9_][A-Za-z0-9_.-]{0,11}"
            .prop_filter("not a bare .git", |s| !s.ends_with(".git") && s != ".")
    }

    proptest! {
        /// Every way to write a remote gives the key of the canonical https form.
        #[test]
        fn spellings_agree(
            host in "[a-z][a-z0-9-]{0,10}(\\.[a-z]{2,5}){0,2}",
            path in proptest::collection::vec(segment(), 1..4),
            user in proptest::option::of("[a-z]{1,8}"),
            port in proptest::option::of(1u16..),
            upper_host: bool,
            dot_git: bool,
            slashes in 0usize..3,
        ) {
            let canonical = key(&format!("https://{host}/{}", path.join("/")));
            let h = if upper_host { host.to_ascii_uppercase() } else { host.clone() };
            let p = format!("{}{}{}", path.join("/"), if dot_git { ".git" } else { "" },
                            "/".repeat(slashes));
            let u = user.map(|u| format!("{u}@")).unwrap_or_default();
            let port = port.map(|p| format!(":{p}")).unwrap_or_default();
            prop_assert_eq!(&canonical, &format!("{host}/{}", path.join("/")));
            for url in [
                format!("{u}{h}:{p}"),
                format!("ssh://{u}{h}{port}/{p}"),
                format!("https://{u}{h}{port}/{p}"),
                format!("git://{h}{port}/{p}"),
            ] {
                prop_assert_eq!(&key(&url), &canonical, "{}", url);
            }
        }

        /// Normalising is idempotent: a key read as an https URL gives itself back.
        #[test]
        fn idempotent(url in "(ssh://|https://|git@)?[a-zA-Z0-9.@:-]{1,20}[:/][a-zA-Z0-9./_-]{0,30}") {
            if let Ok(k) = normalize_origin(&url) {
                let again = key(&format!("https://{k}"));
                prop_assert_eq!(again, k.to_string());
            }
        }

        /// Any key written in `.maos/config.toml` (quoted as TOML quotes it) is read back as
        /// it is, and wins over the origin.
        #[test]
        fn a_configured_key_is_read_back(k in "[^\\s\\p{C}]{1,40}") {
            let text = format!("# fleet\nproject = {}\n", toml::Value::String(k.clone()));
            let git = "[remote \"origin\"]\n\turl = git@h:me/repo.git\n";
            let got = project_key(Some(&text), Some(git));
            prop_assert_eq!(got.map(|k| k.to_string()), Ok(k));
        }

        /// Whatever the text, an answer and never a panic; a key is never empty nor spaced.
        #[test]
        fn never_panics(url in "\\PC{0,40}") {
            if let Ok(k) = normalize_origin(&url) {
                prop_assert!(!k.as_str().is_empty());
                prop_assert!(!k.as_str().contains(char::is_whitespace));
            }
        }
    }
}
