//! Shell word splitting, shared by `run_command` (its `command` and `arguments`) and the
//! policy (its command rules, and a `sh -c` line an allow rule is matched against).

/// Why a text cannot be split into words: a quote it opens is never closed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum SplitError {
    /// A `'` without its closing `'`.
    #[error("unclosed single quote")]
    UnclosedSingleQuote,
    /// A `"` without its closing `"`.
    #[error("unclosed double quote")]
    UnclosedDoubleQuote,
}

/// Splits `text` into words the way a POSIX shell does for quoting only (the `shlex` crate):
/// whitespace separates, `'…'` is literal, `"…"` honours `\"`, `\\`, `\$`, `` \` ``, a bare
/// backslash escapes the next character and a `#` starting a word starts a comment. Nothing is
/// expanded. A backslash ending the text is kept as itself, as `sh` keeps it.
pub fn split_words(text: &str) -> Result<Vec<String>, SplitError> {
    if let Some(words) = shlex::split(text) {
        return Ok(words);
    }
    // shlex refuses a lone backslash at the end; doubled, it is the literal backslash `sh` reads.
    if let Some(words) = shlex::split(&format!("{text}\\")) {
        return Ok(words);
    }
    // Which quote is open: only a closing `'` ends a single-quoted part.
    if shlex::split(&format!("{text}'")).is_some() { Err(SplitError::UnclosedSingleQuote) } else { Err(SplitError::UnclosedDoubleQuote) }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn splits_words_like_a_shell() {
        let cases: &[(&str, &[&str])] = &[
            ("", &[]),
            ("  a  b\tc ", &["a", "b", "c"]),
            ("'a b' \"c d\"", &["a b", "c d"]),
            ("it\\'s", &["it's"]),
            ("a\\ b", &["a b"]),
            ("\"say \\\"hi\\\" \\$HOME \\n\"", &["say \"hi\" $HOME \\n"]),
            ("'no \\escape'", &["no \\escape"]),
            ("x'y'\"z\"", &["xyz"]),
            ("'' \"\"", &["", ""]),
            ("--name=\"a b\"", &["--name=a b"]),
            ("$HOME *.rs", &["$HOME", "*.rs"]),
            ("a\\", &["a\\"]),
            ("a \\", &["a", "\\"]),
            ("a\\\nb", &["ab"]),
            ("x #comment\ny", &["x", "y"]),
            ("a#b", &["a#b"]),
        ];
        for (input, want) in cases {
            assert_eq!(split_words(input).unwrap(), *want, "{input}");
        }
        for (bad, why) in [
            ("'open", SplitError::UnclosedSingleQuote),
            ("\"open", SplitError::UnclosedDoubleQuote),
            ("a \"b\\\"", SplitError::UnclosedDoubleQuote),
            ("\"it's", SplitError::UnclosedDoubleQuote),
            ("'a\\", SplitError::UnclosedSingleQuote),
            ("\"a\\", SplitError::UnclosedDoubleQuote),
        ] {
            assert_eq!(split_words(bad), Err(why), "{bad}");
        }
        assert_eq!(SplitError::UnclosedSingleQuote.to_string(), "unclosed single quote");
    }
}
