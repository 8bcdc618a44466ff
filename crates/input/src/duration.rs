//! Human durations (`90s`, `10m`, `1h30m`) as they appear in config, manifests and flags.

use std::time::Duration;

/// Parses a human duration such as `10m`, `90s` or `1h 30m`; a bare number means seconds.
pub fn parse(text: &str) -> Result<Duration, String> {
    let text = text.trim();
    if let Ok(secs) = text.parse::<f64>()
        && secs.is_finite()
        && secs >= 0.0
    {
        return Ok(Duration::from_secs_f64(secs));
    }
    humantime::parse_duration(text).map_err(|e| format!("invalid duration {text:?}: {e}"))
}

/// Parses a limit in a manifest, config `[defaults]` or a flag (`timeout`, `--timeout`, …):
/// a duration with its unit — a bare number is refused with a suggestion, since `"10"` could
/// mean seconds or minutes — and zero is refused (a zero limit would end everything at once).
pub fn parse_positive(text: &str) -> Result<Duration, String> {
    let trimmed = text.trim();
    if trimmed.parse::<f64>().is_ok() {
        return Err(format!("{trimmed:?} has no unit: write \"{trimmed}s\" for seconds or \"{trimmed}m\" for minutes"));
    }
    match parse(text)? {
        d if d.is_zero() => Err(format!("{:?} is zero: a limit must be greater than 0", text.trim())),
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
        let bare = parse_positive("10").unwrap_err();
        assert!(bare.contains("no unit") && bare.contains("\"10s\"") && bare.contains("\"10m\""), "{bare}");
        assert_eq!(parse_positive("1s").unwrap(), Duration::from_secs(1));
    }
}
