//! The one seam between running tasks and reporting them.
//!
//! The agent loop and the scheduler never print or write artifacts: they [`Emitter::emit`] the
//! results contract's own records ([`WireEvent`], `dracode_results::records`), with what only
//! lives in memory beside them ([`Attachment`]). The [`EventBus`] stamps each (`seq`, `ts`,
//! `run_id`, `shard`: once, for every reporter) and queues it; a dispatcher thread of its own
//! hands it, in order, to every [`Reporter`] (JSONL, JUnit, summary, transcripts, diffs,
//! progress), so no task waits on a disk or a terminal. A new output format is a new reporter;
//! it touches no other file. `merge`, `regrade` and `combine` replay recorded lines through the
//! same reporters as they were read: there is no second event model to map to or from.
//!
//! Here: an event ([`Event`]: a record, its time and its [`Attachment`]) and who listens
//! ([`Reporter`]); the records made from typed values where they are emitted (durations to
//! `*_ms`, stop reasons to words, a finished task, a run's totals) and read back by the reporters
//! in `records`; a finished task's record in `outcome` ([`TaskOutcome`]: the contract's own
//! `task.finished` record and the patches and conversations beside it); the bus, its stamp and
//! its emitters in `bus`.

mod bus;
mod outcome;
mod records;
#[cfg(test)]
pub(crate) mod test_support;

pub use bus::{Activity, Emitter, Ending, EventBus, QUEUE_BOUND, Stamp};
pub use dracode_results::records::{Header, WireEvent};
pub use dracode_results::{
    CacheHit, CheckRecord, CompactionMethod, DeniedCall, FailureKind, RegradedFrom, RepeatVerdict, RetryScope, Status, TaskError,
};
pub use outcome::{Attachments, RunTotals, TaskOutcome, Transcript, millis};
pub use records::{RunFinished, TaskFinished};

use std::time::SystemTime;

/// What only lives in memory beside an event's record: the whole of what the record carries cut,
/// and the files a finished task leaves.
#[derive(Debug, Clone, PartialEq)]
pub enum Attachment {
    /// `tool.started`: the tool's whole arguments (the record's `input` has its strings cut).
    ToolInput(serde_json::Value),
    /// `tool.completed`: the tool's whole output (the record's `output` is cut to
    /// [`dracode_results::records::TOOL_OUTPUT_LIMIT`] bytes).
    ToolOutput(String),
    /// `task.finished`: the task's patches and conversations.
    Task(Attachments),
    /// `run.finished`: the artifacts that could not be written before this reporter got it
    /// (the bus sets it for each group of reporters, see [`RunEnd`]).
    ArtifactFailures(usize),
}

/// An event: the record it is on the wire, when it happened, and what lives beside it.
///
/// An emitted record's header is unstamped ([`Header::unstamped`]); the bus stamps it before any
/// reporter sees it. A replayed record (`merge`) keeps the header it was read with.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// When it happened (what the record's `ts` says, to the millisecond).
    pub ts: SystemTime,
    /// The record, as `results.jsonl` writes it.
    pub record: WireEvent,
    /// What only lives in memory beside it.
    pub attachment: Option<Box<Attachment>>,
}

impl From<WireEvent> for Event {
    fn from(record: WireEvent) -> Self {
        Event::new(record)
    }
}

impl Event {
    /// `record`, now, with nothing beside it.
    pub fn new(record: WireEvent) -> Self {
        Event { ts: SystemTime::now(), record, attachment: None }
    }

    /// This event with `attachment` beside its record.
    pub fn with(self, attachment: Attachment) -> Self {
        Event { attachment: Some(Box::new(attachment)), ..self }
    }

    /// This event as one of the attempt `attempt` of the task `task_id`: its header names them
    /// where it names none — but a `retry`'s attempt, which the record's own `attempt` gives.
    pub fn of_task(mut self, task_id: &str, attempt: u32) -> Self {
        let retry = matches!(self.record, WireEvent::Retry { .. });
        let header = self.record.header_mut();
        header.task_id.get_or_insert_with(|| task_id.to_string());
        if !retry {
            header.attempt.get_or_insert(attempt);
        }
        self
    }

    /// The task it belongs to, for task events.
    pub fn task_id(&self) -> Option<&str> {
        self.record.header().task_id.as_deref()
    }

    /// The attempt it belongs to, for task events (none on `retry`: its own `attempt` is the
    /// next one).
    pub fn attempt(&self) -> Option<u32> {
        self.record.header().attempt
    }

    /// A tool's whole arguments (`tool.started`): the attachment's, else the record's.
    pub fn tool_input(&self) -> Option<&serde_json::Value> {
        match (&self.record, self.attachment.as_deref()) {
            (WireEvent::ToolStarted { .. }, Some(Attachment::ToolInput(input))) => Some(input),
            (WireEvent::ToolStarted { input, .. }, _) => Some(input),
            _ => None,
        }
    }

    /// A tool's whole output (`tool.completed`): the attachment's, else the record's.
    pub fn tool_output(&self) -> Option<&str> {
        match (&self.record, self.attachment.as_deref()) {
            (WireEvent::ToolCompleted { .. }, Some(Attachment::ToolOutput(output))) => Some(output),
            (WireEvent::ToolCompleted { output, .. }, _) => Some(output),
            _ => None,
        }
    }
}

/// A consumer of the event stream. Reporters never decide outcomes.
pub trait Reporter: Send {
    /// Called for every event, in order.
    fn on_event(&mut self, event: &Event) -> std::io::Result<()>;
    /// Called once after `run.finished` (or on interruption) to write whole-run files.
    fn finish(&mut self) -> std::io::Result<()> {
        Ok(())
    }
    /// When this reporter gets `run.finished`, relative to the others (see [`RunEnd`]).
    fn run_end(&self) -> RunEnd {
        RunEnd::Shows
    }
}

/// The order in which reporters get `run.finished`, so that its `exit_code` can tell whether
/// every artifact was written: files first, then displays, then the event record.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum RunEnd {
    /// Writes whole-run files from it (`junit.xml`, `summary.md`): gets it first and
    /// finishes at once.
    WritesFiles,
    /// Shows it or writes per-task files (progress, transcripts, diffs): gets it next, with the
    /// exit code the files left.
    Shows,
    /// Reads the folder the others wrote (`report.html`): gets it after them, before the record.
    ReadsFolder,
    /// Records it (`results.jsonl`, `--jsonl`): gets it last, with the exit code every other
    /// artifact left — the process's own.
    Records,
}
