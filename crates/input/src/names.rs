//! Suggestions for a misspelt name (a field, a tool, a provider).

/// ` (did you mean "x"?)` when one of `candidates` is close to `word`, else empty.
pub fn did_you_mean(word: &str, candidates: &[&str]) -> String {
    candidates
        .iter()
        .map(|c| (strsim::jaro_winkler(word, c), *c))
        .filter(|(score, _)| *score > 0.8)
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, c)| format!(" (did you mean {c:?}?)"))
        .unwrap_or_default()
}
