//! Version numbers like `1.10.2`: parse them and put them in order.

use std::cmp::Ordering;

/// `major.minor.patch`, each a number: `Some((1, 10, 2))` for `"1.10.2"`, `None` otherwise.
pub fn parse(version: &str) -> Option<(u64, u64, u64)> {
    let mut parts = version.split('.');
    let major = parts.next()?.parse().ok()?;
    let minor = parts.next()?.parse().ok()?;
    let patch = parts.next()?.parse().ok()?;
    if parts.next().is_some() {
        return None;
    }
    Some((major, minor, patch))
}

/// How `a` orders against `b` as versions: `1.9.0` comes before `1.10.0`.
pub fn compare(a: &str, b: &str) -> Ordering {
    a.cmp(b)
}

/// The newest of `versions`, or `None` when there are none.
pub fn newest<'a>(versions: &[&'a str]) -> Option<&'a str> {
    versions.iter().copied().max_by(|a, b| compare(a, b))
}
