//! A task's own view ([`TaskDetail`]): its outcome, its patch and conversation read from the
//! output folder (`diffs/`, `transcripts/`), and what `results.jsonl` says besides.

use crate::data::{
    Check, CheckRound, DIFF_LIMIT, Denied, ErrorText, PriorAttempt, Repeat, Retry, TOOL_RESULT_LIMIT, TaskDetail, Transcript,
};
use crate::events::TaskNotes;
use dracode_results::TaskError;
use dracode_results::file_names::{diff_path, file_stem};
use dracode_results::records::{WireOutcome, cut_at};
use std::path::Path;

/// The view of task `id` of the folder `dir`.
pub fn build(dir: &Path, id: &str, outcome: &WireOutcome, notes: Option<&TaskNotes>) -> TaskDetail {
    let (diff, diff_cut) = match &outcome.diff_path {
        Some(_) => read_cut(&dir.join(diff_path(id)), DIFF_LIMIT),
        None => (None, false),
    };
    let transcript_file = format!("transcripts/{}.json", file_stem(id));
    let transcript = read_transcript(&dir.join(&transcript_file));
    let mut files: Vec<String> = outcome.diff_path.iter().filter(|_| diff.is_some()).cloned().collect();
    if transcript.is_some() {
        files.push(transcript_file);
    }
    let none = TaskNotes::default();
    let notes = notes.unwrap_or(&none);
    TaskDetail {
        id: id.to_string(),
        error: outcome.error.as_ref().map(error_text),
        result: outcome.result.clone(),
        structured_output: outcome.structured_output.clone(),
        check: outcome.check.as_ref().map(|c| Check {
            command: c.command.clone(),
            exit_code: c.exit_code,
            output_tail: c.output_tail.clone(),
            ran_before: c.before.is_some(),
            before_exit_code: c.before.flatten(),
            before_output_tail: c.before_output_tail.clone(),
        }),
        check_rounds: outcome
            .check_rounds
            .iter()
            .map(|r| CheckRound { exit_code: r.exit_code, duration_ms: r.duration_ms, output_tail: r.output_tail.clone() })
            .collect(),
        diff,
        diff_cut,
        files_changed: outcome.files_changed.clone(),
        protected: outcome.protected.clone(),
        protected_refused: outcome.protected_refused.clone(),
        kept_ignored: outcome.kept_ignored.clone(),
        transcript,
        denied: outcome
            .denied
            .iter()
            .map(|d| Denied { call_id: d.call_id.clone(), tool: d.tool.clone(), message: d.message.clone() })
            .collect(),
        network_denied: notes.network.clone(),
        prior_attempts: outcome
            .prior_attempts
            .iter()
            .map(|a| PriorAttempt {
                status: a.status.as_str().to_string(),
                error: a.error.as_ref().map(error_text),
                duration_ms: a.duration_ms,
            })
            .collect(),
        repeats: outcome.repeats.iter().map(|r| repeat(dir, r)).collect(),
        retries: notes
            .retries
            .iter()
            .map(|(scope, reason, delay_ms)| Retry { scope: scope.clone(), reason: reason.clone(), delay_ms: *delay_ms })
            .collect(),
        limit_warnings: notes.limit_warnings.clone(),
        files,
    }
}

/// A failure in words.
pub fn error_text(error: &TaskError) -> ErrorText {
    ErrorText { kind: error.kind.as_str().to_string(), message: error.message.clone() }
}

/// One repeat, with the files of it that exist.
fn repeat(dir: &Path, r: &dracode_results::records::WireRepeat) -> Repeat {
    let files = [r.diff_path.clone(), r.transcript_path.clone()].into_iter().flatten().filter(|f| dir.join(f).is_file()).collect();
    Repeat {
        repeat: r.repeat,
        status: r.status.as_str().to_string(),
        error: r.error.as_ref().map(error_text),
        duration_ms: r.duration_ms,
        repairs: r.repairs,
        reported: r.reported,
        files_changed: r.files_changed.clone(),
        files,
    }
}

/// The text of `path` cut at `limit` bytes (on a character boundary), and whether it was cut;
/// `None` when it cannot be read.
fn read_cut(path: &Path, limit: usize) -> (Option<String>, bool) {
    match std::fs::read(path) {
        Ok(bytes) => {
            let text = String::from_utf8_lossy(&bytes);
            let cut = text.len() > limit;
            (Some(cut_at(&text, limit).to_string()), cut)
        }
        Err(_) => (None, false),
    }
}

/// The conversation of `path`, each tool result cut at [`TOOL_RESULT_LIMIT`].
fn read_transcript(path: &Path) -> Option<Transcript> {
    let text = std::fs::read_to_string(path).ok()?;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    let mut messages = value.get("messages")?.as_array()?.clone();
    for block in messages.iter_mut().filter_map(|m| m.get_mut("content")).filter_map(serde_json::Value::as_array_mut).flatten() {
        if block.get("type").and_then(serde_json::Value::as_str) != Some("tool_result") {
            continue;
        }
        if let Some(serde_json::Value::String(content)) = block.get_mut("content")
            && content.len() > TOOL_RESULT_LIMIT
        {
            let left = content.len() - cut_at(content, TOOL_RESULT_LIMIT).len();
            *content = format!("{}\n[… {left} more bytes in the transcript file]", cut_at(content, TOOL_RESULT_LIMIT));
        }
    }
    let strings = |key: &str| {
        value.get(key).and_then(serde_json::Value::as_array).map(|a| a.iter().filter_map(|s| s.as_str().map(str::to_string)).collect())
    };
    Some(Transcript {
        system: value.get("system").and_then(serde_json::Value::as_str).unwrap_or_default().to_string(),
        tools: strings("tools").unwrap_or_default(),
        messages,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::outcome;
    use serde_json::json;

    /// `outcome` with `fields` set, as `task.finished` gives it.
    fn wire(fields: serde_json::Value) -> WireOutcome {
        let mut o = outcome(0, "failed");
        for (key, value) in fields.as_object().into_iter().flatten() {
            o[key] = value.clone();
        }
        serde_json::from_value(o).unwrap()
    }

    /// Writes `text` at `rel` in `dir`.
    fn put(dir: &Path, rel: &str, text: &str) {
        let path = dir.join(rel);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(path, text).unwrap();
    }

    #[test]
    fn a_patch_over_the_limit_is_cut_on_a_character_boundary() {
        let dir = tempfile::tempdir().unwrap();
        let patch = format!("{}é and more after", "x".repeat(DIFF_LIMIT - 1));
        put(dir.path(), "diffs/big_one.patch", &patch);
        let o = wire(json!({"diff_path": "diffs/big_one.patch"}));
        let detail = build(dir.path(), "big one", &o, None);
        let diff = detail.diff.unwrap();
        assert!(detail.diff_cut);
        assert_eq!(diff.len(), DIFF_LIMIT - 1, "the 2-byte é across the limit is left out whole");
        assert!(diff.chars().all(|c| c == 'x'));
        assert_eq!(detail.files, ["diffs/big_one.patch"]);

        put(dir.path(), "diffs/big_one.patch", "é small");
        let detail = build(dir.path(), "big one", &o, None);
        assert_eq!((detail.diff.as_deref(), detail.diff_cut), (Some("é small"), false));
    }

    #[test]
    fn a_long_tool_result_is_cut_with_a_note_of_what_is_left_out() {
        let dir = tempfile::tempdir().unwrap();
        let long = format!("a{}", "é".repeat(TOOL_RESULT_LIMIT));
        let transcript = json!({"system": "be brief", "tools": ["run_command"], "messages": [
            {"role": "assistant", "content": [{"type": "tool_use", "id": "c1", "name": "run_command", "input": {"command": "cat big"}}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c1", "content": long}]},
            {"role": "user", "content": [{"type": "tool_result", "tool_use_id": "c2", "content": "short"}]}
        ]});
        put(dir.path(), "transcripts/t.json", &transcript.to_string());
        let detail = build(dir.path(), "t", &wire(json!({})), None);
        let t = detail.transcript.unwrap();
        assert_eq!((t.system.as_str(), t.tools.as_slice()), ("be brief", ["run_command".to_string()].as_slice()));
        let cut = t.messages[1]["content"][0]["content"].as_str().unwrap();
        let kept = TOOL_RESULT_LIMIT - 1;
        let left = long.len() - kept;
        let note = format!("\n[… {left} more bytes in the transcript file]");
        assert!(cut.ends_with(&note), "ends {:?}, not {note:?}", &cut[cut.len().saturating_sub(60)..]);
        assert!(cut.strip_suffix(&note).is_some_and(|head| head == &long[..kept]), "the first {kept} bytes kept");
        assert_eq!(t.messages[2]["content"][0]["content"], "short");
        assert_eq!(t.messages[0]["content"][0]["input"]["command"], "cat big");
        assert_eq!(detail.files, ["transcripts/t.json"]);
    }

    #[test]
    fn a_missing_transcript_is_none_and_not_listed() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "diffs/t.patch", "--- a\n+++ b\n");
        let detail = build(dir.path(), "t", &wire(json!({"diff_path": "diffs/t.patch"})), None);
        assert!(detail.transcript.is_none());
        assert_eq!(detail.files, ["diffs/t.patch"]);
        put(dir.path(), "transcripts/t.json", "{not json");
        assert!(build(dir.path(), "t", &wire(json!({})), None).transcript.is_none());
        std::fs::remove_file(dir.path().join("diffs/t.patch")).unwrap();
        let detail = build(dir.path(), "t", &wire(json!({"diff_path": "diffs/t.patch"})), None);
        assert_eq!((detail.diff, detail.files.len()), (None, 0), "no link to a patch that is not there: {:?}", detail.files);
    }

    #[test]
    fn repeats_list_only_their_files_that_exist() {
        let dir = tempfile::tempdir().unwrap();
        put(dir.path(), "diffs/t@1.patch", "p");
        put(dir.path(), "transcripts/t@2.json", "{}");
        let repeat = |n: u32| {
            json!({"repeat": n, "attempt": n, "status": "passed", "error": null, "duration_ms": 10, "files_changed": ["f"],
                "diff_path": format!("diffs/t@{n}.patch"), "transcript_path": format!("transcripts/t@{n}.json")})
        };
        let o = wire(json!({"repeats": [repeat(1), repeat(2)], "pass_rate": 1.0}));
        let detail = build(dir.path(), "t", &o, None);
        let files: Vec<&[String]> = detail.repeats.iter().map(|r| r.files.as_slice()).collect();
        assert_eq!(files, [["diffs/t@1.patch".to_string()], ["transcripts/t@2.json".to_string()]]);
        assert_eq!(detail.repeats[1].repeat, 2);
    }
}
