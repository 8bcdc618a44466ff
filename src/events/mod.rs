//! The one seam between running tasks and reporting them.
//!
//! The agent loop and the scheduler never print or write artifacts: they [`Emitter::emit`] typed
//! [`EventKind`]s. The [`EventBus`] stamps each with a time and queues it; a dispatcher thread
//! of its own hands it, in order, to every [`Reporter`] (JSONL, JUnit, summary, transcripts,
//! diffs, progress), so no task waits on a disk or a terminal. A new output format is a new
//! reporter; it touches no other file.
//!
//! Here: what happened ([`EventKind`], [`Event`]) and who listens ([`Reporter`]); a finished
//! task's record in `outcome` ([`TaskOutcome`]: the contract's own `task.finished` record and
//! the patches and conversations beside it); the bus and its emitters in `bus`.

mod bus;
mod outcome;

pub use bus::{Activity, Emitter, Ending, EventBus, QUEUE_BOUND};
pub use dracode_results::{
    CacheHit, CheckRecord, CompactionMethod, DeniedCall, FailureKind, RegradedFrom, RepeatVerdict, RetryScope, Status, TaskError,
};
pub use outcome::{Attachments, RunTotals, TaskOutcome, Transcript, millis};

use dracode_llm::{StopReason, Usage};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Which task and attempt an event belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The task's id.
    pub task_id: Arc<str>,
    /// 1-based attempt number.
    pub attempt: u32,
}

/// What happened.
#[derive(Debug, Clone)]
pub enum EventKind {
    /// The run began.
    RunStarted {
        /// dracode's version.
        version: String,
        /// The manifest paths.
        manifests: Vec<String>,
        /// Tasks selected to run.
        task_count: usize,
        /// `K/N` when sharded.
        shard: Option<String>,
        /// Parallel tasks.
        jobs: usize,
        /// The plan's warnings (shown in summary.md).
        warnings: Vec<String>,
        /// The config files read, lowest layer first (absolute paths); empty when none was,
        /// `None` for a run put together by `dracode merge`.
        config_files: Option<Vec<String>>,
    },
    /// A task attempt began.
    TaskStarted {
        /// Provider name.
        provider: String,
        /// Model name.
        model: String,
        /// `worktree`, `copy` or `none`.
        isolation: String,
        /// Where its tools run.
        workdir: PathBuf,
        /// The commit its workspace started from, in a git repository.
        base_commit: Option<String>,
        /// How long making the workspace took (just before this event).
        workspace_ms: Option<u64>,
    },
    /// An LLM call returned.
    TurnCompleted {
        /// 1-based.
        turn: u32,
        /// Why the model stopped.
        stop_reason: StopReason,
        /// This call's tokens.
        usage: Usage,
        /// Wall time of the call, retries included.
        duration: Duration,
    },
    /// A tool call began.
    ToolStarted {
        /// The provider's call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// Its arguments.
        input: serde_json::Value,
    },
    /// A tool call ended.
    ToolCompleted {
        /// The provider's call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// False when the tool returned an error.
        ok: bool,
        /// The full text sent back to the model (reporters truncate).
        output: String,
        /// Wall time.
        duration: Duration,
    },
    /// Something is about to be tried again.
    Retry {
        /// `http` or `task`.
        scope: RetryScope,
        /// Error kind or HTTP status.
        reason: String,
        /// Wait before the retry.
        delay: Duration,
        /// The attempt about to start.
        next_attempt: u32,
    },
    /// Text the agent showed (`display_text` or its final message).
    AgentMessage {
        /// The text.
        text: String,
    },
    /// The conversation was shrunk to stay within the model's context window.
    ContextCompacted {
        /// Estimated tokens of the next request before.
        tokens_before: u64,
        /// Estimated tokens of the next request after.
        tokens_after: u64,
        /// How.
        method: CompactionMethod,
    },
    /// A connection of the task's commands that the egress allowlist or the sandbox refused.
    NetworkDenied {
        /// The host (name or address) asked for; a socket path or `udp` from the sandbox.
        host: String,
        /// The port (0 when none applies).
        port: u16,
        /// The command that asked (`unknown` when none was running in the foreground).
        command: String,
        /// Why, in words, when known.
        reason: Option<String>,
    },
    /// A limit of the task is close and the agent was told so, in the request about to be sent
    /// (the task's deadline).
    LimitWarning {
        /// Which limit.
        limit: dracode_results::Limit,
        /// What is left, in the limit's unit (calls, seconds, tokens, USD).
        remaining: f64,
        /// The limit, in the same unit.
        allowed: f64,
        /// What the agent was told.
        message: String,
    },
    /// The batch's setup command began (run-level: before any task).
    SetupStarted {
        /// The command.
        command: String,
        /// The repository its workspace was made from.
        repo: PathBuf,
        /// The commit its workspace started from, in a git repository.
        base_commit: Option<String>,
        /// How many tasks it serves.
        tasks: usize,
    },
    /// The batch's setup command ended.
    SetupFinished(Box<SetupReport>),
    /// A task ended (exactly once per task).
    TaskFinished(Box<TaskOutcome>),
    /// The run ended.
    RunFinished(RunTotals),
}

/// How a batch's setup command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SetupReport {
    /// The command.
    pub command: String,
    /// Its exit code; `None` when it was killed, timed out or did not start.
    pub exit_code: Option<i32>,
    /// Wall time, making its workspace included.
    pub duration: Duration,
    /// The last part of its output, secrets masked.
    pub output_tail: String,
    /// What it made, copied into each task's workspace (the batch's `setup` module).
    pub outputs: Vec<String>,
    /// Files of the base it changed: not carried.
    pub not_carried: Vec<String>,
    /// Why the setup failed; `None` when it passed.
    pub error: Option<String>,
}

/// An event with its time and task.
#[derive(Debug, Clone)]
pub struct Event {
    /// When it was emitted.
    pub ts: SystemTime,
    /// The task it belongs to, for task events.
    pub task: Option<TaskRef>,
    /// What happened.
    pub kind: EventKind,
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
