//! The trailers that mark a commit dracode made (`git interpret-trailers` style `Key: value`
//! lines in the message's last paragraph): `Dracode-Task: <id>` for each task whose work it
//! holds and `Dracode-Run: <run_id>` for the run. Written by `commit = true`, `dracode combine
//! --branch` and `dracode publish`; `dracode publish` reads them back to tell its own branch tip
//! from a commit someone else pushed. [`subject`] makes a commit's first line from a prompt.

/// The trailer naming a task whose work the commit holds (one per task).
pub const TASK: &str = "Dracode-Task";

/// The trailer naming the run the commit was made from.
pub const RUN: &str = "Dracode-Run";

/// The longest subject line [`subject`] makes, as git's conventions ask.
pub const MAX_SUBJECT_CHARS: usize = 72;

/// A commit's subject from `text` (a task's prompt): its first non-blank line, blanks collapsed,
/// at most [`MAX_SUBJECT_CHARS`] characters. A longer line is cut at a word boundary and ends in
/// `…`; a code span the cut left open is closed first, so the subject never runs `…` into code.
pub fn subject(text: &str) -> String {
    let line = text.lines().map(str::trim).find(|l| !l.is_empty()).unwrap_or_default();
    let line = line.split_whitespace().collect::<Vec<_>>().join(" ");
    if line.chars().count() <= MAX_SUBJECT_CHARS {
        return line;
    }
    // Room for a closing backtick and the ellipsis.
    let room: String = line.chars().take(MAX_SUBJECT_CHARS - 2).collect();
    let mut kept = match room.rfind(' ') {
        Some(at) if at >= room.len() / 2 => room[..at].trim_end().to_string(),
        _ => room,
    };
    if kept.matches('`').count() % 2 == 1 {
        kept.push('`');
    }
    kept.push('…');
    kept
}

/// `message` with the trailers `pairs` as its last paragraph (after one blank line). A value is
/// cut at its first line break: a trailer is one line.
pub fn append(message: &str, pairs: &[(&str, &str)]) -> String {
    let mut text = message.trim_end().to_string();
    text.push_str("\n\n");
    for (key, value) in pairs {
        let value = value.lines().next().unwrap_or_default().trim();
        text.push_str(&format!("{key}: {value}\n"));
    }
    text
}

/// The trailers of `message`: the `Key: value` lines of its last paragraph, when every line of
/// that paragraph is one (and the message has another paragraph before it).
pub fn parse(message: &str) -> Vec<(String, String)> {
    let text = message.trim_end();
    let Some((_, last)) = text.rsplit_once("\n\n") else { return Vec::new() };
    let mut pairs = Vec::new();
    for line in last.lines() {
        let Some((key, value)) = line.split_once(": ") else { return Vec::new() };
        if key.is_empty() || !key.chars().all(|c| c.is_ascii_alphanumeric() || c == '-') {
            return Vec::new();
        }
        pairs.push((key.to_string(), value.trim().to_string()));
    }
    pairs
}

/// The values of trailer `key` in `message`, in order.
pub fn values(message: &str, key: &str) -> Vec<String> {
    parse(message).into_iter().filter(|(k, _)| k.eq_ignore_ascii_case(key)).map(|(_, v)| v).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_subject_is_one_line_cut_at_a_word_with_its_code_span_closed() {
        assert_eq!(subject("\n  Fix   the greeting \nmore"), "Fix the greeting");
        let prompt = "Fix `red('a ' + blue('b') + 'c') + green('d') + yellow('e') + magenta('f')` so the outer colour comes back";
        let made = subject(prompt);
        assert!(made.chars().count() <= MAX_SUBJECT_CHARS, "{made}");
        assert_eq!(made.matches('`').count(), 2, "the code span the cut left open is closed: {made}");
        assert!(made.ends_with('…') && prompt.starts_with(made.trim_end_matches('…').trim_end_matches('`')), "{made}");
        assert!(!made.trim_end_matches('…').ends_with(' '), "{made}");
        let word = "x".repeat(100);
        assert_eq!(subject(&word).chars().count(), MAX_SUBJECT_CHARS - 1, "one long word is cut where it must be");
    }

    #[test]
    fn trailers_written_are_read_back_and_prose_is_not_taken_for_them() {
        let message = append("dracode: fix-lint\n\nFixed it.\nNote: see below", &[(TASK, "fix-lint"), (RUN, "r1\nsecond line")]);
        assert!(message.ends_with("\n\nDracode-Task: fix-lint\nDracode-Run: r1\n"), "{message:?}");
        assert_eq!(values(&message, TASK), ["fix-lint"]);
        assert_eq!(values(&message, "dracode-run"), ["r1"]);
        assert!(parse("one paragraph: only").is_empty());
        assert!(parse("title\n\nNote: x\nand prose").is_empty(), "a paragraph with prose is no trailer block");
    }
}
