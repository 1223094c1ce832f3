//! Moments: the timestamp type and how people read one.

/// A UTC timestamp.
pub type Ts = chrono::DateTime<chrono::Utc>;

/// A moment as people read it everywhere maos prints one: date, time and its zone, always UTC
/// (`2026-11-22 10:01:02 UTC`), never a bare clock time. An age or a remaining time, when
/// shown too, follows in parentheses (`(4m ago)`, `(in 3m)`).
pub fn utc(t: Ts) -> String {
    t.format("%F %T UTC").to_string()
}

/// [`utc`] to the millisecond, for the timeline (`2026-11-22 10:01:02.345 UTC`).
pub fn utc_ms(t: Ts) -> String {
    t.format("%F %T%.3f UTC").to_string()
}
