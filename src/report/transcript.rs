//! `transcripts/<id>.json`: each task's whole conversation, tool calls and full tool results
//! included, redacted, as pretty JSON.

use super::jsonl::redact_event;
use super::write_atomic;
use crate::disk::Reserve;
use crate::events::{Event, Reporter, Status};
use dracode_llm::Message;
use dracode_results::file_names::file_stem;
use dracode_secrets::Redactor;
use serde::Serialize;
use std::path::PathBuf;
use std::sync::Arc;

/// The document written for one task.
#[derive(Serialize)]
struct TranscriptFile<'a> {
    task_id: &'a str,
    status: Status,
    provider: &'a str,
    model: &'a str,
    system: &'a str,
    tools: &'a [String],
    messages: &'a [Message],
}

/// Writes a transcript file for every finished task that has a conversation.
pub struct TranscriptReporter {
    dir: PathBuf,
    redactor: Arc<Redactor>,
    reserve: Arc<Reserve>,
}

impl TranscriptReporter {
    /// A reporter writing into `<out_dir>/transcripts/` (created on the first transcript).
    pub fn new(out_dir: impl Into<PathBuf>, redactor: Arc<Redactor>) -> Self {
        TranscriptReporter { dir: out_dir.into().join("transcripts"), redactor, reserve: Reserve::none() }
    }

    /// This reporter, writing into `reserve`'s room when the disk is full.
    pub fn with_reserve(self, reserve: Arc<Reserve>) -> Self {
        TranscriptReporter { reserve, ..self }
    }
}

impl Reporter for TranscriptReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        let Some(outcome) = event.as_task_finished() else { return Ok(()) };
        // Each attempt of a repeated task has its own, `transcripts/<id>@<repeat>.json`.
        for (repeat, files) in outcome.record.repeats.iter().zip(&outcome.attachments.repeats) {
            if let Some(transcript) = &files.transcript {
                let name = format!("{}@{}", file_stem(outcome.task_id), repeat.repeat);
                self.write(&name, outcome.task_id, repeat.status, transcript)?;
            }
        }
        let Some(transcript) = &outcome.attachments.transcript else { return Ok(()) };
        self.write(&file_stem(outcome.task_id), outcome.task_id, outcome.record.status, transcript)
    }
}

impl TranscriptReporter {
    /// Writes `transcripts/<name>.json`, redacted.
    fn write(
        &self,
        name: &str,
        task_id: &str,
        status: crate::events::Status,
        transcript: &crate::events::Transcript,
    ) -> std::io::Result<()> {
        let file = TranscriptFile {
            task_id,
            status,
            provider: &transcript.provider,
            model: &transcript.model,
            system: &transcript.system,
            tools: &transcript.tools,
            messages: &transcript.messages,
        };
        let mut value = serde_json::to_value(file)?;
        redact_event(&mut value, &self.redactor);
        let mut text = serde_json::to_string_pretty(&value)?;
        text.push('\n');
        let path = self.dir.join(format!("{name}.json"));
        self.reserve.write(|| write_atomic(&path, text.as_bytes()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::test_support::{finished, outcome, transcript};

    #[test]
    fn writes_a_redacted_pretty_transcript_named_by_the_sanitised_id() {
        let dir = tempfile::tempdir().unwrap();
        let secret = "ghp_0123456789abcdef";
        let mut reporter = TranscriptReporter::new(dir.path(), Arc::new(Redactor::new([secret.to_string()])));
        let mut o = outcome("docs/readme", Status::Failed);
        o.attachments.transcript = Some(transcript(&format!("the token is {secret}")));
        reporter.on_event(&finished(o)).unwrap();

        let path = dir.path().join("transcripts/docs_readme.json");
        let text = std::fs::read_to_string(&path).unwrap();
        assert!(text.contains("\n  \"task_id\""), "pretty-printed: {text}");
        assert!(!text.contains(secret));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["task_id"], "docs/readme");
        assert_eq!(v["status"], "failed");
        assert_eq!(v["provider"], "openai");
        assert_eq!(v["model"], "gpt-4o");
        assert_eq!(v["system"], "You are a coding agent.");
        assert_eq!(v["tools"], serde_json::json!(["read_file"]));
        assert_eq!(v["messages"][0]["content"][0]["text"], "Add a README");
        assert_eq!(v["messages"][1]["content"][0]["text"], "the token is [REDACTED]");
    }

    #[test]
    fn a_task_without_a_conversation_writes_nothing() {
        let dir = tempfile::tempdir().unwrap();
        let mut reporter = TranscriptReporter::new(dir.path(), Arc::new(Redactor::default()));
        reporter.on_event(&finished(outcome("skipped", Status::Skipped))).unwrap();
        assert!(!dir.path().join("transcripts").exists());
    }
}
