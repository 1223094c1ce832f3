//! Durations as people type them: `500ms`, `30s`, `5m`, `1h`, `30d`, or plain seconds.

use std::time::Duration;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0:?}: expected a duration such as 500ms, 30s, 5m, 1h or 30d")]
pub struct DurationError(pub String);

/// Parse `500ms`, `30s`, `5m`, `1h`, `30d`, or a plain number of seconds.
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError(s.to_string());
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let ms = match unit {
        "ms" => n,
        "" | "s" => n.saturating_mul(1000),
        "m" => n.saturating_mul(60_000),
        "h" => n.saturating_mul(3_600_000),
        "d" => n.saturating_mul(86_400_000),
        _ => return Err(bad()),
    };
    Ok(Duration::from_millis(ms))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn units_and_refusals() {
        assert_eq!(parse("500ms"), Ok(Duration::from_millis(500)));
        assert_eq!(parse("30"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("30d"), Ok(Duration::from_secs(30 * 86_400)));
        for bad in ["", "d", "1w", "-1s", "1.5h", "1 h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
