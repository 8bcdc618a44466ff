//! Human durations (`90s`, `10m`, `1h30m`) as they appear in config, manifests and flags.

use std::time::Duration;

/// Why a duration was refused; it prints the text as written and what is wrong with it.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum DurationError {
    /// Not a duration at all.
    #[error("invalid duration {text:?}: {source}")]
    Invalid {
        /// The text, trimmed.
        text: String,
        /// What `humantime` found wrong.
        #[source]
        source: humantime::DurationError,
    },
    /// A bare number where a limit needs its unit.
    #[error("{text:?} has no unit: write \"{text}s\" for seconds or \"{text}m\" for minutes")]
    NoUnit {
        /// The number, trimmed.
        text: String,
    },
    /// Zero, where a limit must be above zero.
    #[error("{text:?} is zero: a limit must be greater than 0")]
    Zero {
        /// The text, trimmed.
        text: String,
    },
}

/// Parses a human duration such as `10m`, `90s` or `1h 30m`; a bare number means seconds.
pub fn parse(text: &str) -> Result<Duration, DurationError> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(text).map_err(|source| DurationError::Invalid { text: text.to_string(), source })
}

/// Parses a limit in a manifest, config `[defaults]` or a flag (`timeout`, `--timeout`, …):
/// a duration with its unit — a bare number is refused with a suggestion, since `"10"` could
/// mean seconds or minutes — and zero is refused (a zero limit would end everything at once).
pub fn parse_positive(text: &str) -> Result<Duration, DurationError> {
    let trimmed = text.trim();
    if trimmed.parse::<f64>().is_ok() {
        return Err(DurationError::NoUnit { text: trimmed.to_string() });
    }
    match parse(text)? {
        d if d.is_zero() => Err(DurationError::Zero { text: trimmed.to_string() }),
        d => Ok(d),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_units_and_bare_seconds() {
        assert_eq!(parse("10m").unwrap(), Duration::from_secs(600));
        assert_eq!(parse("90").unwrap(), Duration::from_secs(90));
        assert_eq!(parse("1h 30m").unwrap(), Duration::from_secs(5400));
        assert_eq!(parse("0.5").unwrap(), Duration::from_millis(500));
        assert!(parse("ten minutes").is_err());
        assert!(parse("-3").is_err());
        assert!(parse_positive("0s").is_err());
        let bare = parse_positive("10").unwrap_err().to_string();
        assert!(bare.contains("no unit") && bare.contains("\"10s\"") && bare.contains("\"10m\""), "{bare}");
        assert_eq!(parse_positive("1s").unwrap(), Duration::from_secs(1));
        assert_eq!(parse_positive(" 0s ").unwrap_err().to_string(), "\"0s\" is zero: a limit must be greater than 0");
        assert_eq!(
            parse("ten minutes").unwrap_err().to_string(),
            format!("invalid duration \"ten minutes\": {}", humantime::parse_duration("ten minutes").unwrap_err())
        );
    }
}
