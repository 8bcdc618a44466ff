//! What is known about a finished task ([`TaskOutcome`]) and a finished run ([`RunTotals`]).

use super::{Status, TaskError};
use dracode_llm::{Message, Usage};
use dracode_results::exit_codes;
use dracode_results::file_names::{diff_path, repeat_diff_path, repeat_transcript_path};
use dracode_results::records::WireOutcome;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

/// The whole conversation of a task, for `transcripts/<id>.json`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Transcript {
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The system prompt sent.
    pub system: String,
    /// The tool names offered.
    pub tools: Vec<String>,
    /// Every message, tool calls and full tool results included.
    pub messages: Vec<Message>,
}

/// What only lives in memory beside a finished task's record: its patch and conversation
/// (written to their own files, named on the line by `diff_path` and `transcript_path`).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Attachments {
    /// The unified diff of the task's changes (`git apply`-able), when it changed anything.
    pub diff: Option<String>,
    /// The conversation of the last attempt.
    pub transcript: Option<Arc<Transcript>>,
    /// A repeated task's attempts' own patch and conversation, one per `record.repeats` entry,
    /// in the same order (each with no `repeats` of its own).
    pub repeats: Vec<Attachments>,
}

/// Everything known about a finished task: the contract's record of it (what `task.finished`
/// carries, [`WireOutcome`]) and what stays in memory beside it.
#[derive(Debug, Clone, PartialEq)]
pub struct TaskOutcome {
    /// The task's id.
    pub task_id: String,
    /// The task's `task.finished` fields. Those derived from the rest (`is_error`, `diff_path`,
    /// `denied_calls`, `cached`, the repeats' paths) are set by [`TaskOutcome::finish`].
    pub record: WireOutcome,
    /// Its patches and conversations.
    pub attachments: Attachments,
}

impl TaskOutcome {
    /// How it ended, as [`exit_codes::of_tasks`] weighs it: its status and its error.
    pub fn ending(&self) -> (Status, Option<&TaskError>) {
        (self.record.status, self.record.error.as_ref())
    }

    /// An outcome with nothing recorded yet: no turns, no usage, no changes, no error.
    pub fn new(task_id: &str, manifest: &std::path::Path, index: usize, status: Status, provider: &str, model: &str) -> Self {
        let record = WireOutcome::empty(status, manifest.to_string_lossy().into_owned(), index, provider, model);
        TaskOutcome { task_id: task_id.to_string(), record, attachments: Attachments::default() }
    }

    /// The outcome of a recorded `task.finished` line: its task id (from the line's header), its
    /// record and its patch (read back from `diffs/`); transcripts stay files.
    pub fn recorded(task_id: String, record: WireOutcome, diff: Option<String>) -> Self {
        let repeats = vec![Attachments::default(); record.repeats.len()];
        TaskOutcome { task_id, record, attachments: Attachments { diff, transcript: None, repeats } }
    }

    /// Sets the fields of the record derived from the rest, the one place they are set:
    /// `is_error` from the status, `diff_path` from the patch, `denied_calls` from `denied`,
    /// `cached` from `cached_from`, and each repeat's `diff_path` and `transcript_path` from its
    /// attachments. The producers call it once the outcome is final, before `task.finished`.
    pub fn finish(&mut self) {
        let record = &mut self.record;
        record.is_error = !record.status.is_pass();
        record.diff_path = has_patch(&self.attachments.diff).then(|| diff_path(&self.task_id));
        record.denied_calls = u32::try_from(record.denied.len()).unwrap_or(u32::MAX);
        record.cached = record.cached_from.is_some();
        for (repeat, files) in record.repeats.iter_mut().zip(&self.attachments.repeats) {
            repeat.diff_path = has_patch(&files.diff).then(|| repeat_diff_path(&self.task_id, repeat.repeat));
            repeat.transcript_path = files.transcript.is_some().then(|| repeat_transcript_path(&self.task_id, repeat.repeat));
        }
    }

    /// Its wall time, all attempts.
    pub fn duration(&self) -> Duration {
        Duration::from_millis(self.record.duration_ms)
    }
}

/// Whether a patch changes anything (an empty one is no patch).
fn has_patch(diff: &Option<String>) -> bool {
    diff.as_deref().is_some_and(|d| !d.is_empty())
}

/// A duration in whole milliseconds, as the records keep it.
pub fn millis(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

/// Totals of a run.
#[derive(Debug, Clone, PartialEq)]
pub struct RunTotals {
    /// Tasks per status.
    pub counts: BTreeMap<Status, usize>,
    /// Summed token usage.
    pub usage: Usage,
    /// Summed cost; `None` when any task's model had no price.
    pub cost_usd: Option<f64>,
    /// Wall time of the run.
    pub duration: Duration,
    /// The process exit code, as the tasks (and an interrupt) left it; the bus makes it
    /// [`exit_codes::ARTIFACTS_FAILED`] in `run.finished` when an artifact could not be written.
    pub exit_code: i32,
}

impl RunTotals {
    /// Counts, sums and the exit code of a set of outcomes (a run's, or a merge's).
    pub fn of(outcomes: &[TaskOutcome], duration: Duration) -> Self {
        let mut counts = Status::ALL.iter().map(|s| (*s, 0)).collect::<BTreeMap<_, _>>();
        for o in outcomes {
            *counts.entry(o.record.status).or_default() += 1;
        }
        let cost_usd =
            outcomes.iter().filter(|o| o.record.usage.requests > 0).try_fold(0.0, |sum, o| o.record.total_cost_usd.map(|c| sum + c));
        RunTotals {
            counts,
            usage: outcomes.iter().map(|o| o.record.usage).sum(),
            cost_usd,
            duration,
            exit_code: exit_codes::of_tasks(outcomes.iter().map(TaskOutcome::ending)),
        }
    }
}
