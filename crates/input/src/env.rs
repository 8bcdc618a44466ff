//! The process environment as a map, and `${VAR}` expansion in config strings.

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

/// Why `text` expands to nothing: each `${NAME}` in it with the variable unset or empty, as
/// `NAME is not set` / `NAME is empty` joined by `, `; `None` when it names no variable.
pub fn why_empty(text: &str, env: &BTreeMap<String, String>) -> Option<String> {
    let mut why = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("${") {
        if rest[..start].ends_with('$') {
            rest = &rest[start + 2..];
            continue;
        }
        let after = &rest[start + 2..];
        let Some(end) = after.find('}') else { break };
        let name = &after[..end];
        match env.get(name) {
            None => why.push(format!("{name} is not set")),
            Some(value) if value.is_empty() => why.push(format!("{name} is empty")),
            Some(_) => {}
        }
        rest = &after[end + 1..];
    }
    (!why.is_empty()).then(|| why.join(", "))
}

/// The process environment as a map (non-UTF-8 variables skipped).
pub fn process_env() -> BTreeMap<String, String> {
    std::env::vars_os().filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?))).collect()
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

    #[test]
    fn names_the_variables_that_made_a_value_empty() {
        let env: BTreeMap<String, String> = [("SET".to_string(), "1".to_string()), ("BLANK".to_string(), String::new())].into();
        assert_eq!(why_empty("${MOCK_KEY}", &env).as_deref(), Some("MOCK_KEY is not set"));
        assert_eq!(why_empty("${BLANK}${GONE}", &env).as_deref(), Some("BLANK is empty, GONE is not set"));
        assert_eq!(why_empty("${SET}", &env), None);
        assert_eq!(why_empty("$${ESCAPED} plain", &env), None);
    }
}
