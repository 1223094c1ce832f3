//! Where a running dashboard (`maos-dash`) says how to reach it: `$MAOS_HOME/dashboard.json`,
//! mode 0600, written once it listens and removed when it stops. `maos dashboard` reads it to
//! find the running one before starting another.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// The running dashboard.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Running {
    pub pid: u32,
    /// On 127.0.0.1.
    pub port: u16,
    /// The secret every request carries (`?token=` in a page's URL, `X-Maos-Token` for the
    /// API and for every action).
    pub token: String,
}

impl Running {
    /// The URL that opens it.
    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}/?token={}", self.port, self.token)
    }
}

/// The file under `home` (`$MAOS_HOME`).
pub fn file(home: &Path) -> PathBuf {
    home.join("dashboard.json")
}
