//! `${VAR}` expansion in config strings.

use std::collections::BTreeMap;

/// Replaces each `${NAME}` in `text` with the variable's value (empty when unset, so a missing
/// key shows up as "not configured" rather than as the literal template). `$${` escapes.
pub fn expand_vars(text: &str, env: &BTreeMap<String, String>) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find('$') {
        out.push_str(&rest[..start]);
        let after = &rest[start..];
        if let Some(escaped) = after.strip_prefix("$${") {
            out.push_str("${");
            rest = escaped;
        } else if let (true, Some(end)) = (after.starts_with("${"), after.find('}')) {
            let name = &after[2..end];
            out.push_str(env.get(name).map(String::as_str).unwrap_or(""));
            rest = &after[end + 1..];
        } else {
            out.push('$');
            rest = &after[1..];
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn expands_known_unknown_and_escaped() {
        let env: BTreeMap<String, String> = [("A".to_string(), "1".to_string())].into();
        assert_eq!(expand_vars("x${A}y", &env), "x1y");
        assert_eq!(expand_vars("${MISSING}", &env), "");
        assert_eq!(expand_vars("$${A} $5 ${A", &env), "${A} $5 ${A");
    }
}
