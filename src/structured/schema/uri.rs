//! URI references as `$id` and `$ref` use them: resolution against a base (RFC 3986 §5.2) and
//! the percent-decoding of a JSON-pointer fragment.

/// `reference` resolved against the absolute URI `base`; the fragment of `reference` is kept.
pub(super) fn resolve(base: &str, reference: &str) -> String {
    let (reference, fragment) = split_fragment(reference);
    let target = if has_scheme(reference) {
        reference.to_string()
    } else if reference.is_empty() {
        split_fragment(base).0.to_string()
    } else {
        let (scheme, authority, path) = parts(split_fragment(base).0);
        if let Some(rest) = reference.strip_prefix("//") {
            format!("{scheme}://{rest}")
        } else if reference.starts_with('/') {
            format!("{scheme}:{authority}{}", remove_dot_segments(reference))
        } else {
            let directory = path.rfind('/').map_or("", |slash| &path[..=slash]);
            let merged =
                if directory.is_empty() && !authority.is_empty() { format!("/{reference}") } else { format!("{directory}{reference}") };
            format!("{scheme}:{authority}{}", remove_dot_segments(&merged))
        }
    };
    match fragment {
        Some(fragment) => format!("{target}#{fragment}"),
        None => target,
    }
}

/// The URI without its fragment, and the fragment (without `#`) when there is one.
pub(super) fn split_fragment(uri: &str) -> (&str, Option<&str>) {
    match uri.split_once('#') {
        Some((before, fragment)) => (before, Some(fragment)),
        None => (uri, None),
    }
}

/// Whether `uri` starts with a scheme (`http:`, `urn:`, `file:` …).
fn has_scheme(uri: &str) -> bool {
    let Some((scheme, _)) = uri.split_once(':') else { return false };
    let mut chars = scheme.chars();
    chars.next().is_some_and(|c| c.is_ascii_alphabetic()) && chars.all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
}

/// `(scheme, "//authority" or "", path-and-query)` of an absolute URI.
fn parts(uri: &str) -> (&str, &str, &str) {
    let (scheme, rest) = uri.split_once(':').unwrap_or(("", uri));
    match rest.strip_prefix("//") {
        Some(after) => {
            let end = after.find('/').map_or(rest.len(), |slash| slash + 2);
            (scheme, &rest[..end], &rest[end..])
        }
        None => (scheme, "", rest),
    }
}

/// A path with its `.` and `..` segments applied.
fn remove_dot_segments(path: &str) -> String {
    let mut kept: Vec<&str> = Vec::new();
    let segments: Vec<&str> = path.split('/').collect();
    for (i, segment) in segments.iter().enumerate() {
        let last = i + 1 == segments.len();
        match *segment {
            "." if last => kept.push(""),
            "." => {}
            ".." => {
                if kept.len() > 1 {
                    kept.pop();
                }
                if last {
                    kept.push("");
                }
            }
            other => kept.push(other),
        }
    }
    kept.join("/")
}

/// A key escaped for a JSON pointer (`~` → `~0`, `/` → `~1`).
pub(super) fn escape(key: &str) -> String {
    key.replace('~', "~0").replace('/', "~1")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn references_resolve_like_rfc_3986() {
        let base = "http://a/b/c/d;p?q";
        assert_eq!(resolve(base, "g"), "http://a/b/c/g");
        assert_eq!(resolve(base, "./g"), "http://a/b/c/g");
        assert_eq!(resolve(base, "g/"), "http://a/b/c/g/");
        assert_eq!(resolve(base, "/g"), "http://a/g");
        assert_eq!(resolve(base, "//g"), "http://g");
        assert_eq!(resolve(base, "#s"), "http://a/b/c/d;p?q#s");
        assert_eq!(resolve(base, "../g"), "http://a/b/g");
        assert_eq!(resolve(base, "../.."), "http://a/");
        assert_eq!(resolve("http://x.com", "y.json"), "http://x.com/y.json");
        assert_eq!(resolve("urn:uuid:1234", "#/$defs/a"), "urn:uuid:1234#/$defs/a");
        assert_eq!(resolve("file:///folder/file.json", "other.json"), "file:///folder/other.json");
        assert_eq!(percent_encoding::percent_decode_str("/a%25b/%22c%22").decode_utf8_lossy(), "/a%b/\"c\"");
    }
}
