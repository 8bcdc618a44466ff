//! The trailers that mark a commit dracode made (`git interpret-trailers` style `Key: value`
//! lines in the message's last paragraph): `Dracode-Task: <id>` for each task whose work it
//! holds and `Dracode-Run: <run_id>` for the run. Written by `commit = true`, `dracode combine
//! --branch` and `dracode publish`; `dracode publish` reads them back to tell its own branch tip
//! from a commit someone else pushed.

/// The trailer naming a task whose work the commit holds (one per task).
pub const TASK: &str = "Dracode-Task";

/// The trailer naming the run the commit was made from.
pub const RUN: &str = "Dracode-Run";

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
    fn trailers_written_are_read_back_and_prose_is_not_taken_for_them() {
        let message = append("dracode: fix-lint\n\nFixed it.\nNote: see below", &[(TASK, "fix-lint"), (RUN, "r1\nsecond line")]);
        assert!(message.ends_with("\n\nDracode-Task: fix-lint\nDracode-Run: r1\n"), "{message:?}");
        assert_eq!(values(&message, TASK), ["fix-lint"]);
        assert_eq!(values(&message, "dracode-run"), ["r1"]);
        assert!(parse("one paragraph: only").is_empty());
        assert!(parse("title\n\nNote: x\nand prose").is_empty(), "a paragraph with prose is no trailer block");
    }
}
