//! Durations as people type them: `500ms`, `30s`, `5m`, `1h`, `30d`. A number always has its
//! unit (`--wait 5` could mean seconds or milliseconds), except 0, which is the same in all.

use std::time::Duration;

/// A duration that could not be read.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum DurationError {
    /// A bare number other than 0.
    #[error("{0:?}: a duration needs a unit, e.g. {0}s (500ms, 30s, 5m, 1h or 30d)")]
    NoUnit(String),
    #[error("{0:?}: expected a duration such as 500ms, 30s, 5m, 1h or 30d")]
    Bad(String),
}

/// Parse `500ms`, `30s`, `5m`, `1h`, `30d` (or `0`).
pub fn parse(s: &str) -> Result<Duration, DurationError> {
    let bad = || DurationError::Bad(s.to_string());
    let split = s.find(|c: char| !c.is_ascii_digit()).unwrap_or(s.len());
    let (n, unit) = s.split_at(split);
    let n: u64 = n.parse().map_err(|_| bad())?;
    let ms = match unit {
        "" if n == 0 => 0,
        "" => return Err(DurationError::NoUnit(s.to_string())),
        "ms" => n,
        "s" => n.saturating_mul(1000),
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
        assert_eq!(parse("30s"), Ok(Duration::from_secs(30)));
        assert_eq!(parse("0"), Ok(Duration::ZERO));
        // A bare number says which units there are, with its own number in seconds.
        let e = parse("30").unwrap_err();
        assert_eq!(e, DurationError::NoUnit("30".into()));
        assert!(e.to_string().contains("needs a unit, e.g. 30s"), "{e}");
        assert_eq!(parse("5m"), Ok(Duration::from_secs(300)));
        assert_eq!(parse("30d"), Ok(Duration::from_secs(30 * 86_400)));
        for bad in ["", "d", "1w", "-1s", "1.5h", "1 h"] {
            assert!(parse(bad).is_err(), "{bad}");
        }
    }
}
