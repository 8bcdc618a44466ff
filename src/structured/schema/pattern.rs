//! `pattern` and `patternProperties` regexes. JSON Schema uses ECMA-262 syntax; they are run
//! with the `regex` crate, after a translation: `\d`, `\D`, `\w`, `\W` mean ASCII classes as in
//! ECMA-262 (the crate's are Unicode), `\s`/`\S` add U+FEFF to Unicode's White_Space, `\cX` is
//! the control character. Not supported (refused when the schema is compiled): look-around
//! (`(?=`, `(?!`, `(?<=`, `(?<!`) and backreferences (`\1`, `\k<name>`). Still different: `\b`
//! uses Unicode word characters, and ECMA's legacy (non-`/u`) quirks such as octal escapes are
//! not emulated.

use regex::Regex;

/// Compiles an ECMA-262 `source` as described above; the error says why it is refused.
pub(super) fn compile(source: &str) -> Result<Regex, String> {
    Regex::new(&translate(source)).map_err(|e| one_line(&e.to_string()))
}

/// `source` with its ASCII-only ECMA-262 classes spelled out for the `regex` crate.
fn translate(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('d') => out.push_str("[0-9]"),
            Some('D') => out.push_str("[^0-9]"),
            Some('w') => out.push_str("[0-9A-Za-z_]"),
            Some('W') => out.push_str("[^0-9A-Za-z_]"),
            Some('s') => out.push_str(r"[\s\x{FEFF}]"),
            Some('S') => out.push_str(r"[^\s\x{FEFF}]"),
            Some('c') if chars.clone().next().is_some_and(|l| l.is_ascii_alphabetic()) => {
                let letter = chars.next().map_or(0, |l| l as u32);
                out.push_str(&format!("\\x{{{:02X}}}", letter % 32));
            }
            Some(other) => {
                out.push('\\');
                out.push(other);
            }
            None => out.push('\\'),
        }
    }
    out
}

/// The regex crate's multi-line error as one line (its last line says what is wrong).
fn one_line(error: &str) -> String {
    error
        .lines()
        .rev()
        .find(|l| !l.trim().is_empty())
        .map_or_else(|| error.to_string(), |l| l.trim().trim_start_matches("error: ").to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ecma_classes_are_ascii_and_unsupported_syntax_is_refused() {
        assert!(!compile(r"^\d$").unwrap().is_match("߀"), "\\d is ASCII only");
        assert!(compile(r"^[\d]+$").unwrap().is_match("123"), "inside a class too");
        assert!(compile(r"^[^\d]$").unwrap().is_match("a"));
        assert!(compile(r"^\\d$").unwrap().is_match(r"\d"), "an escaped backslash stays one");
        assert!(compile(r"^\w+$").unwrap().is_match("a_1") && !compile(r"^\w$").unwrap().is_match("é"));
        let e = compile("a(?=b)").unwrap_err();
        assert!(e.contains("look-around"), "{e}");
        assert!(compile(r"(a)\1").is_err());
        assert!(compile(r"^\cC$").unwrap().is_match("\u{3}") && compile(r"^\s$").unwrap().is_match("\u{feff}"));
    }
}
