//! What several operations require before they change anything (a leaf of the operations floor).

use maos_proto::{ErrorBody, SessionRecord};

/// Work (starting agents, moving phases) happens only in a running session; the error says how
/// to get there.
pub fn require_running(s: &SessionRecord, what: &str) -> Result<(), ErrorBody> {
    let hint = match s.state {
        maos_core::SessionState::Running => return Ok(()),
        maos_core::SessionState::Created => "; start it with `maos session start`",
        maos_core::SessionState::Paused => "; resume it with `maos resume`",
        _ => "",
    };
    Err(crate::base::error::invalid(format!(
        "cannot {what}: session {} is {}{hint}",
        s.id.short(),
        s.state
    )))
}
