//! The event types maos records on a project's timeline (`maos events --type T`).

/// Every event type `maosd` records, grouped as README's "Event types" lists them. A new
/// event type is added here too, or `maos events --type` refuses to filter on it.
pub const EVENT_TYPES: &[&str] = &[
    // Sessions.
    "session_created",
    "session_activated",
    "session_started",
    "session_paused",
    "session_resumed",
    "session_completed",
    "session_failed",
    "session_cancelled",
    "session_archived",
    "session_deleted",
    "session_imported",
    "session_recovered",
    // Agents.
    "agent_registered",
    "agent_started",
    "agent_paused",
    "agent_resumed",
    "agent_interrupted",
    "agent_completed",
    "agent_failed",
    "agent_cancelled",
    "agent_ended",
    // Phases.
    "phase_added",
    "phase_started",
    "phase_completed",
    "phase_failed",
    "phase_skipped",
    "phase_paused",
    "phase_resumed",
    "workflow_completed",
    "note_recorded",
    // Managed sessions.
    "plan_loaded",
    "agent_launching",
    "agent_process_started",
    "agent_process_exited",
    "agent_start_failed",
    "agent_retry",
    "agent_retried",
    "session_retried",
    "checkpoint_saved",
    "schedule_error",
    "agent_waiting",
    // Locks.
    "lock_acquired",
    "lock_released",
    "lock_wait",
    "lock_wait_cancelled",
    "lock_timeout",
    "lock_expired",
    "conflict_detected",
    "deadlock_detected",
    // Hooks.
    "prompt_submitted",
    "window_resumed",
    "subagent_requested",
    "subagent_result",
    "file_modified",
    "write_outside_project",
    "write_in_other_project",
    "command_run",
    "tool_denied",
    "lock_violated",
    "file_restored",
    "todos_updated",
    "context_compacted",
    // The conflict radar.
    "radar_conflict",
    "radar_cleared",
];

/// Refuse a name that is no event type: one line naming the known types.
pub fn check_event_type(name: &str) -> Result<(), String> {
    if EVENT_TYPES.contains(&name) {
        return Ok(());
    }
    Err(format!(
        "--type {name:?}: no such event type (known types: {})",
        EVENT_TYPES.join(", ")
    ))
}

/// Whether an event's data is about a path containing `needle`: its `path`, `paths` or
/// deadlock `cycle` (`maos events --path`). The store's query decides it the same way.
pub fn path_matches(data: &serde_json::Value, needle: &str) -> bool {
    ["path", "paths", "cycle"]
        .iter()
        .any(|k| match data.get(k) {
            Some(serde_json::Value::String(s)) => s.contains(needle),
            Some(v @ serde_json::Value::Array(_)) => v.to_string().contains(needle),
            _ => false,
        })
}

/// Whether `needle` occurs in an event's type or data, ASCII letters in any case
/// (`maos events --grep`). The store's query decides it the same way.
pub fn text_matches(kind: &str, data: &serde_json::Value, needle: &str) -> bool {
    format!("{kind} {data}")
        .to_ascii_lowercase()
        .contains(&needle.to_ascii_lowercase())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_snake_case_and_an_unknown_one_is_refused_with_the_list() {
        let mut seen = std::collections::BTreeSet::new();
        for t in EVENT_TYPES {
            assert!(seen.insert(t), "{t} listed twice");
            assert!(t.chars().all(|c| c.is_ascii_lowercase() || c == '_'), "{t}");
            assert_eq!(check_event_type(t), Ok(()));
        }
        let e = check_event_type("lock_aquired").unwrap_err();
        assert!(
            e.contains("\"lock_aquired\"") && e.contains("lock_acquired"),
            "{e}"
        );
        assert_eq!(e.lines().count(), 1, "{e}");
    }
}
