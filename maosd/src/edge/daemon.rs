//! What every connection of the daemon shares: the open projects, the shutdown signal, the
//! configuration, and the facts `maos daemon status` reports. The server builds it; the
//! connections read it.

use std::time::Instant;

use maos_core::Ts;
use maos_proto::DaemonStatus;
use tokio_util::sync::CancellationToken;

use crate::base::config::Config;
use crate::project::Projects;

/// What every connection shares.
pub struct Daemon {
    pub projects: Projects,
    pub shutdown: CancellationToken,
    pub config: Config,
    /// What each window wrote in other projects (scope.rs).
    pub windows: crate::edge::windows::Windows,
    started: Instant,
    started_at: Ts,
}

impl Daemon {
    /// A daemon that starts now.
    pub fn new(config: Config, projects: Projects) -> Daemon {
        Daemon {
            projects,
            shutdown: CancellationToken::new(),
            started: Instant::now(),
            started_at: crate::txn::state::now(),
            config,
            windows: Default::default(),
        }
    }

    pub async fn status(&self) -> DaemonStatus {
        DaemonStatus {
            pid: std::process::id(),
            version: env!("CARGO_PKG_VERSION").to_string(),
            protocol: crate::base::version::protocol(),
            started_at: self.started_at,
            uptime_secs: self.started.elapsed().as_secs_f64(),
            socket: self.config.socket.display().to_string(),
            home: self.config.home.display().to_string(),
            synchronous: self.config.synchronous.as_str().to_string(),
            projects: self.projects.infos().await,
            started_by: self.config.started_by,
            idle_exit_secs: self.config.idle_exit.map(|d| d.as_secs_f64()),
            backend: self.backend().await,
        }
    }

    /// The engine, and for a fleet's PostgreSQL whether it answers now and its daemons.
    async fn backend(&self) -> maos_proto::Backend {
        let Some(fleet) = self.projects.fleet() else {
            return maos_proto::Backend::default();
        };
        let status = fleet.status().await;
        let (server, error) = match status.result {
            Ok(v) => (Some(v), None),
            Err(e) => (None, Some(e)),
        };
        // A daemon silent for three of its intervals is not running (or cannot reach
        // PostgreSQL).
        let quiet = 3.0 * crate::edge::fleet::heartbeat_every().as_secs_f64();
        let members = status
            .members
            .into_iter()
            .map(|m| {
                let ago = m.seen_us_ago.max(0) as f64 / 1e6;
                maos_proto::FleetMember {
                    live: ago <= quiet,
                    seen_secs_ago: ago,
                    id: m.id,
                    machine: m.machine,
                    started_at: m.started_at,
                }
            })
            .collect();
        maos_proto::Backend {
            engine: "postgres".into(),
            url: Some(fleet.url().to_string()),
            daemon: Some(fleet.daemon().to_string()),
            server,
            error,
            members,
        }
    }
}
