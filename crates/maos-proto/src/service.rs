//! maosd as a user service: where `maos daemon install` puts the systemd units or the launchd
//! agent, and which socket an installed service makes its manager listen on. Shared by the
//! daemon and the client (the client must not start a daemon of its own on a socket that a
//! service manager owns; `maos doctor` reports the mode). Reads files only; never runs
//! systemctl or launchctl.

use std::path::{Path, PathBuf};

/// The systemd socket unit (the one that is enabled).
pub const SYSTEMD_SOCKET_UNIT: &str = "maosd.socket";
/// The systemd service unit, started by the socket on the first connection.
pub const SYSTEMD_SERVICE_UNIT: &str = "maosd.service";
/// The launchd job's label (and the plist's file name without `.plist`).
pub const LAUNCHD_LABEL: &str = "dev.maos.maosd";
/// The name of the plist's socket entry, for `launch_activate_socket`.
pub const LAUNCHD_SOCKET_NAME: &std::ffi::CStr = c"Listeners";

/// A service manager maosd can run under.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Manager {
    Systemd,
    Launchd,
}

impl Manager {
    pub fn as_str(self) -> &'static str {
        match self {
            Manager::Systemd => "systemd",
            Manager::Launchd => "launchd",
        }
    }

    /// This platform's: launchd on macOS, systemd elsewhere.
    pub fn native() -> Manager {
        if cfg!(target_os = "macos") {
            Manager::Launchd
        } else {
            Manager::Systemd
        }
    }
}

/// An installed maos service.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Installed {
    pub manager: Manager,
    /// The socket unit (systemd) or the plist (launchd).
    pub file: PathBuf,
    /// The socket the manager listens on for maosd.
    pub socket: PathBuf,
}

impl Installed {
    /// Whether the manager is told to listen at login: for systemd, the socket unit's link in
    /// `sockets.target.wants/` exists. None for launchd (only launchctl knows).
    pub fn enabled(&self) -> Option<bool> {
        match self.manager {
            Manager::Systemd => {
                let link = self
                    .file
                    .parent()?
                    .join("sockets.target.wants")
                    .join(SYSTEMD_SOCKET_UNIT);
                Some(std::fs::symlink_metadata(link).is_ok())
            }
            Manager::Launchd => None,
        }
    }
}

fn env_path(name: &str) -> Option<PathBuf> {
    std::env::var_os(name)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
}

/// Where user units go: `$XDG_CONFIG_HOME/systemd/user`, else `~/.config/systemd/user`.
pub fn systemd_unit_dir() -> Option<PathBuf> {
    systemd_unit_dir_from(env_path("XDG_CONFIG_HOME"), env_path("HOME"))
}

/// [`systemd_unit_dir`] from the values of `XDG_CONFIG_HOME` and `HOME` (a relative one is
/// ignored, as the XDG specification and systemd say).
pub fn systemd_unit_dir_from(
    config_home: Option<PathBuf>,
    home: Option<PathBuf>,
) -> Option<PathBuf> {
    let config = config_home
        .filter(|c| c.is_absolute())
        .or_else(|| home.filter(|h| h.is_absolute()).map(|h| h.join(".config")))?;
    Some(config.join("systemd").join("user"))
}

/// Where the user agent goes: `~/Library/LaunchAgents/dev.maos.maosd.plist`.
pub fn launchd_plist_path() -> Option<PathBuf> {
    let home = env_path("HOME").filter(|h| h.is_absolute())?;
    Some(
        home.join("Library/LaunchAgents")
            .join(format!("{LAUNCHD_LABEL}.plist")),
    )
}

/// Every maos service installed for this platform's manager (systemd, or launchd on macOS)
/// whose file exists and names a socket. A plist written with `--launchd` on Linux (or units on
/// macOS) is not counted: nothing there could listen on it.
pub fn installed() -> Vec<Installed> {
    let mut out = Vec::new();
    match Manager::native() {
        Manager::Systemd => {
            let Some(file) = systemd_unit_dir().map(|d| d.join(SYSTEMD_SOCKET_UNIT)) else {
                return out;
            };
            let Ok(text) = std::fs::read_to_string(&file) else {
                return out;
            };
            // systemd's %t for a user manager: $XDG_RUNTIME_DIR, which pam_systemd sets to
            // /run/user/<uid>.
            let runtime = env_path("XDG_RUNTIME_DIR")
                .unwrap_or_else(|| PathBuf::from(format!("/run/user/{}", crate::paths::uid())));
            let home = env_path("HOME");
            if let Some(socket) = systemd_socket_path(&text, Some(&runtime), home.as_deref()) {
                out.push(Installed {
                    manager: Manager::Systemd,
                    file,
                    socket,
                });
            }
        }
        Manager::Launchd => {
            let Some(file) = launchd_plist_path() else {
                return out;
            };
            let Ok(text) = std::fs::read_to_string(&file) else {
                return out;
            };
            if let Some(socket) = launchd_socket_path(&text) {
                out.push(Installed {
                    manager: Manager::Launchd,
                    file,
                    socket,
                });
            }
        }
    }
    out
}

/// The installed service whose manager listens on `socket`, if any.
pub fn installed_for(socket: &Path) -> Option<Installed> {
    installed().into_iter().find(|i| i.socket == socket)
}

/// The Unix socket path a socket unit listens on: its first `ListenStream=` in `[Socket]`
/// that is a file system path (after the last empty one, which resets the list), with the
/// specifiers `%t` (the runtime directory), `%h` (home) and `%%` resolved. None when there is
/// none, or it uses a specifier whose value is unknown.
pub fn systemd_socket_path(
    unit: &str,
    runtime_dir: Option<&Path>,
    home: Option<&Path>,
) -> Option<PathBuf> {
    let mut section = "";
    let mut values: Vec<&str> = Vec::new();
    for line in unit.lines() {
        let line = line.trim();
        if line.is_empty() || line.starts_with('#') || line.starts_with(';') {
            continue;
        }
        if let Some(name) = line.strip_prefix('[').and_then(|l| l.strip_suffix(']')) {
            section = name;
            continue;
        }
        let Some((key, value)) = line.split_once('=') else {
            continue;
        };
        if section != "Socket" || key.trim() != "ListenStream" {
            continue;
        }
        match value.trim() {
            "" => values.clear(),
            v => values.push(v),
        }
    }
    values
        .into_iter()
        .filter_map(|v| expand_specifiers(v, runtime_dir, home))
        .find(|p| p.starts_with('/'))
        .map(PathBuf::from)
}

/// Resolve `%t`, `%h` and `%%`; None for any other specifier or a missing value.
fn expand_specifiers(
    value: &str,
    runtime_dir: Option<&Path>,
    home: Option<&Path>,
) -> Option<String> {
    let mut out = String::with_capacity(value.len());
    let mut chars = value.chars();
    while let Some(c) = chars.next() {
        if c != '%' {
            out.push(c);
            continue;
        }
        match chars.next()? {
            '%' => out.push('%'),
            't' => out.push_str(runtime_dir?.to_str()?),
            'h' => out.push_str(home?.to_str()?),
            _ => return None,
        }
    }
    Some(out)
}

/// The `SockPathName` of an XML plist (the one maos writes: one socket), XML entities
/// resolved. None when there is none (or the plist is binary).
pub fn launchd_socket_path(plist: &str) -> Option<PathBuf> {
    let after_key = plist.split_once("<key>SockPathName</key>")?.1;
    let rest = skip_space_and_comments(after_key);
    let body = rest.strip_prefix("<string>")?;
    let (raw, _) = body.split_once("</string>")?;
    let path = xml_unescape(raw)?;
    (!path.is_empty()).then(|| PathBuf::from(path))
}

fn skip_space_and_comments(mut s: &str) -> &str {
    loop {
        s = s.trim_start();
        match s.strip_prefix("<!--").and_then(|c| c.split_once("-->")) {
            Some((_, rest)) => s = rest,
            None => return s,
        }
    }
}

/// XML's five named entities and numeric character references; None for anything else.
pub fn xml_unescape(s: &str) -> Option<String> {
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        let (entity, after) = rest[i + 1..].split_once(';')?;
        let c = match entity {
            "amp" => '&',
            "lt" => '<',
            "gt" => '>',
            "quot" => '"',
            "apos" => '\'',
            _ => {
                let code = match entity.strip_prefix("#x").or(entity.strip_prefix("#X")) {
                    Some(hex) => u32::from_str_radix(hex, 16).ok()?,
                    None => entity.strip_prefix('#')?.parse().ok()?,
                };
                char::from_u32(code)?
            }
        };
        out.push(c);
        rest = after;
    }
    out.push_str(rest);
    Some(out)
}

/// `s` with `&`, `<`, `>`, `"` and `'` written as entities, for an XML text or attribute.
pub fn xml_escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&apos;"),
            c => out.push(c),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const UNIT: &str = include_str!("../../../systemd/maosd.socket");
    const PLIST: &str = include_str!("../../../launchd/dev.maos.maosd.plist");

    #[test]
    fn the_committed_socket_unit_listens_under_the_runtime_dir() {
        let p = systemd_socket_path(UNIT, Some(Path::new("/run/user/1000")), None);
        assert_eq!(p, Some(PathBuf::from("/run/user/1000/maos/maosd.sock")));
        // %t without a runtime directory cannot be resolved.
        assert_eq!(systemd_socket_path(UNIT, None, None), None);
    }

    #[test]
    fn listen_stream_specifiers_sections_and_resets() {
        let home = Some(Path::new("/home/u"));
        let unit = "[Socket]\nListenStream=%h/a%%b/s.sock\n";
        assert_eq!(
            systemd_socket_path(unit, None, home),
            Some(PathBuf::from("/home/u/a%b/s.sock"))
        );
        // Only [Socket] counts; comments and ports are skipped; an empty value resets the list.
        let unit = "[Unit]\nListenStream=/wrong\n[Socket]\n# ListenStream=/comment\n\
                    ListenStream=/old.sock\nListenStream=\nListenStream=8080\n\
                    ListenStream = /new path.sock \n[Install]\nListenStream=/late\n";
        assert_eq!(
            systemd_socket_path(unit, None, None),
            Some(PathBuf::from("/new path.sock"))
        );
        // An unknown specifier or no ListenStream at all: no path.
        assert_eq!(
            systemd_socket_path("[Socket]\nListenStream=%U/s\n", None, None),
            None
        );
        assert_eq!(
            systemd_socket_path("[Socket]\nBacklog=5\n", None, None),
            None
        );
        assert_eq!(systemd_socket_path("", None, None), None);
    }

    #[test]
    fn sock_path_name_is_read_and_unescaped() {
        let plist = PLIST.replace("@SOCKET@", &xml_escape("/tmp/a&b <c>/maosd.sock"));
        assert_eq!(
            launchd_socket_path(&plist),
            Some(PathBuf::from("/tmp/a&b <c>/maosd.sock"))
        );
        let commented = "<key>SockPathName</key> <!-- x --> <string>/s&#x41;&#66;</string>";
        assert_eq!(launchd_socket_path(commented), Some(PathBuf::from("/sAB")));
        assert_eq!(
            launchd_socket_path("<key>SockPathName</key><integer>1</integer>"),
            None
        );
        assert_eq!(launchd_socket_path("<string>/x</string>"), None);
        assert_eq!(
            launchd_socket_path("<key>SockPathName</key><string>/a&bogus;</string>"),
            None
        );
    }

    #[test]
    fn xml_escape_round_trips() {
        let s = "/a&b<c>\"d'e/é";
        assert_eq!(xml_unescape(&xml_escape(s)).as_deref(), Some(s));
    }

    #[test]
    fn unit_dir_follows_xdg_config_home_then_home() {
        let p = |s: &str| Some(PathBuf::from(s));
        assert_eq!(
            systemd_unit_dir_from(p("/cfg"), p("/home/u")),
            p("/cfg/systemd/user")
        );
        assert_eq!(
            systemd_unit_dir_from(None, p("/home/u")),
            p("/home/u/.config/systemd/user")
        );
        assert_eq!(
            systemd_unit_dir_from(p("relative"), p("/home/u")),
            p("/home/u/.config/systemd/user")
        );
        assert_eq!(systemd_unit_dir_from(None, None), None);
    }

    #[test]
    fn enabled_means_the_wants_link_exists() {
        let t = tempfile::tempdir().unwrap();
        let file = t.path().join(SYSTEMD_SOCKET_UNIT);
        let i = Installed {
            manager: Manager::Systemd,
            file: file.clone(),
            socket: PathBuf::from("/s"),
        };
        assert_eq!(i.enabled(), Some(false));
        std::fs::create_dir(t.path().join("sockets.target.wants")).unwrap();
        std::os::unix::fs::symlink(
            &file,
            t.path()
                .join("sockets.target.wants")
                .join(SYSTEMD_SOCKET_UNIT),
        )
        .unwrap();
        assert_eq!(i.enabled(), Some(true));
        let l = Installed {
            manager: Manager::Launchd,
            ..i
        };
        assert_eq!(l.enabled(), None);
    }
}
