//! Daemon configuration: command line, then environment, then `$MAOS_HOME/config.toml`.

use std::path::PathBuf;

use maos_store::Synchronous;
use serde::Deserialize;

/// The daemon's settings.
#[derive(Clone, Debug)]
pub struct Config {
    pub home: PathBuf,
    pub socket: PathBuf,
    pub synchronous: Synchronous,
    /// Cap on each project database, in SQLite pages (testing full disks).
    pub max_page_count: Option<u64>,
    /// Retention: finished sessions that ended longer ago are exported, then deleted, in
    /// every open project, every `gc_every`. None: no scheduled collection.
    pub gc_older_than: Option<std::time::Duration>,
    pub gc_every: std::time::Duration,
    /// Who started this daemon (set from the listening socket and `--autostarted`).
    pub started_by: maos_proto::StartedBy,
    /// Exit after this long without a connection or a running agent, when a service manager
    /// holds the socket (it starts the daemon again on the next connection). None: never.
    pub idle_exit: Option<std::time::Duration>,
    /// Fleet mode: the PostgreSQL every project's state lives in (`MAOS_DATABASE_URL`, else
    /// `database_url` in `config.toml`). None: SQLite, a file per project.
    pub database_url: Option<String>,
    /// Fleet mode: the name this daemon's machine goes by (`MAOS_MACHINE`, else `machine` in
    /// `config.toml`, else the host name).
    pub machine: Option<String>,
    /// `logs/maosd.log` is rotated before a record would take it past this many bytes
    /// (`log_max_bytes`, at least 4096; default 10 MiB).
    pub log_max_bytes: u64,
    /// Rotated logs kept, `maosd.log.1` (newest) to `maosd.log.<log_keep>` (`log_keep`, at most
    /// 100; default 3). 0: a rotation only empties `maosd.log`.
    pub log_keep: u32,
    /// Whether an agent CLI's write outside every project maos knows is written (allowed,
    /// unlocked, recorded) or refused: `MAOS_OUTSIDE_PROJECT`, else `outside_project` in
    /// `config.toml`; default allow. A project's own `.maos/config.toml` may deny it too.
    pub outside_project: crate::base::lockpath::OutsidePolicy,
    /// Where `outside_project` was set, for the reasons that quote it.
    pub outside_project_from: String,
    /// Connections served at once and their lanes (`max_connections`, default 1024), and how
    /// long an idle one that is not a subscription or a wait stays open (`connection_idle`,
    /// default 60s).
    pub limits: crate::base::lanes::Limits,
}

/// `config.toml`: every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(deny_unknown_fields)]
struct File {
    synchronous: Option<String>,
    max_page_count: Option<u64>,
    gc_older_than: Option<String>,
    gc_every: Option<String>,
    idle_exit: Option<String>,
    log_max_bytes: Option<u64>,
    log_keep: Option<u32>,
    database_url: Option<String>,
    machine: Option<String>,
    outside_project: Option<String>,
    max_connections: Option<usize>,
    connection_idle: Option<String>,
}

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error(transparent)]
    Path(#[from] maos_proto::paths::PathError),
    #[error("{path}: {message}")]
    File { path: PathBuf, message: String },
    #[error("{0}")]
    Value(String),
}

impl Config {
    pub fn load(
        synchronous_flag: Option<String>,
        idle_exit_flag: Option<String>,
    ) -> Result<Config, ConfigError> {
        let home = maos_proto::paths::home_dir()?;
        let socket = maos_proto::paths::socket_path();
        let path = home.join("config.toml");
        let file: File = match std::fs::read_to_string(&path) {
            Ok(text) => toml::from_str(&text).map_err(|e| ConfigError::File {
                path: path.clone(),
                message: crate::base::lockpath::toml_error(&text, &e),
            })?,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => File::default(),
            Err(e) => {
                return Err(ConfigError::File {
                    path,
                    message: e.to_string(),
                });
            }
        };
        let sync = synchronous_flag
            .or_else(|| {
                std::env::var("MAOS_SYNCHRONOUS")
                    .ok()
                    .filter(|s| !s.is_empty())
            })
            .or(file.synchronous);
        let synchronous = match sync {
            Some(s) => s.parse().map_err(ConfigError::Value)?,
            None => Synchronous::Normal,
        };
        let duration = |key: &str, v: &str| {
            maos_core::duration::parse(v).map_err(|e| ConfigError::File {
                path: path.clone(),
                message: format!("{key}: {e}"),
            })
        };
        let gc_older_than = file
            .gc_older_than
            .as_deref()
            .map(|v| duration("gc_older_than", v))
            .transpose()?;
        let gc_every = match file.gc_every.as_deref() {
            Some(v) => duration("gc_every", v)?,
            None => std::time::Duration::from_secs(3600),
        };
        if gc_every.is_zero() {
            return Err(ConfigError::File {
                path,
                message: "gc_every: must be longer than zero".into(),
            });
        }
        let idle_exit = match idle_exit_flag {
            Some(v) => Some(
                maos_core::duration::parse(&v)
                    .map_err(|e| ConfigError::Value(format!("--idle-exit {v:?}: {e}")))?,
            ),
            None => file
                .idle_exit
                .as_deref()
                .map(|v| duration("idle_exit", v))
                .transpose()?,
        }
        .filter(|d| !d.is_zero());
        let log_max_bytes = file.log_max_bytes.unwrap_or(10 * 1024 * 1024);
        if log_max_bytes < crate::base::logfile::MIN_MAX_BYTES {
            return Err(ConfigError::File {
                path,
                message: format!(
                    "log_max_bytes = {log_max_bytes}: must be at least {} (bytes)",
                    crate::base::logfile::MIN_MAX_BYTES
                ),
            });
        }
        let log_keep = file.log_keep.unwrap_or(3);
        if log_keep > crate::base::logfile::MAX_KEEP {
            return Err(ConfigError::File {
                path,
                message: format!(
                    "log_keep = {log_keep}: at most {} old logs are kept; raise log_max_bytes instead",
                    crate::base::logfile::MAX_KEEP
                ),
            });
        }
        use crate::base::lanes::Limits;
        let max_connections = file.max_connections.unwrap_or(Limits::DEFAULT_MAX);
        if max_connections < Limits::MIN_MAX {
            return Err(ConfigError::File {
                path,
                message: format!(
                    "max_connections = {max_connections}: at least {} (an eighth is kept for hooks and maos commands)",
                    Limits::MIN_MAX
                ),
            });
        }
        let connection_idle = match file.connection_idle.as_deref() {
            Some(v) => duration("connection_idle", v)?,
            None => Limits::DEFAULT_IDLE,
        };
        if connection_idle.is_zero() {
            return Err(ConfigError::File {
                path,
                message: "connection_idle: must be longer than zero".into(),
            });
        }
        let limits = Limits::of(max_connections, connection_idle);
        // The environment wins over the file; an empty value means "not set" in both.
        let database_url = std::env::var("MAOS_DATABASE_URL")
            .ok()
            .filter(|u| !u.trim().is_empty())
            .or(file.database_url.filter(|u| !u.trim().is_empty()))
            .map(|u| u.trim().to_string());
        if let Some(url) = &database_url
            && !(url.starts_with("postgres://") || url.starts_with("postgresql://"))
        {
            return Err(ConfigError::Value(format!(
                "database_url {}: fleet mode takes a PostgreSQL URL (postgres://user@host/database)",
                maos_store::redact(url)
            )));
        }
        let machine = std::env::var("MAOS_MACHINE")
            .ok()
            .or(file.machine)
            .map(|m| m.trim().to_string())
            .filter(|m| !m.is_empty());
        if let Some(m) = &machine
            && (m.len() > 64 || m.chars().any(|c| c.is_control() || c == '/'))
        {
            return Err(ConfigError::Value(format!(
                "machine {m:?}: at most 64 characters, without '/' or control characters"
            )));
        }
        let (outside_project, outside_project_from) = match std::env::var("MAOS_OUTSIDE_PROJECT")
            .ok()
            .filter(|v| !v.trim().is_empty())
        {
            Some(v) => (
                v.trim()
                    .parse()
                    .map_err(|e| ConfigError::Value(format!("MAOS_OUTSIDE_PROJECT: {e}")))?,
                "MAOS_OUTSIDE_PROJECT".to_string(),
            ),
            None => match file.outside_project.as_deref() {
                Some(v) => (
                    v.parse().map_err(|message| ConfigError::File {
                        path: path.clone(),
                        message,
                    })?,
                    path.display().to_string(),
                ),
                None => (Default::default(), "the default".to_string()),
            },
        };
        Ok(Config {
            outside_project,
            outside_project_from,
            home,
            socket,
            synchronous,
            database_url,
            machine,
            max_page_count: file.max_page_count,
            gc_older_than,
            gc_every,
            started_by: maos_proto::StartedBy::Manual,
            idle_exit,
            log_max_bytes,
            log_keep,
            limits,
        })
    }
}

/// An interval the end-to-end tests shorten: `var` in milliseconds when set to a positive
/// number, else `default`.
pub fn interval(var: &str, default: std::time::Duration) -> std::time::Duration {
    std::env::var(var)
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .filter(|&ms| ms > 0)
        .map_or(default, std::time::Duration::from_millis)
}
