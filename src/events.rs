//! The one seam between running tasks and reporting them.
//!
//! The agent loop and the scheduler never print or write artifacts: they [`Emitter::emit`] typed
//! [`EventKind`]s. The [`EventBus`] stamps each with a time and hands it, in order, to every
//! [`Reporter`] (JSONL, JUnit, summary, transcripts, diffs, progress). A new output format is a
//! new reporter; it touches no other file.

use crate::llm::{ErrorKind, Message, StopReason, Usage};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

/// How a task ended. Exactly one per task, always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// The agent finished and the check (if any) passed.
    Passed,
    /// The agent finished but the check failed, or the agent itself failed.
    Failed,
    /// Infrastructure failure after all retries.
    Error,
    /// The provider lacks credentials or an endpoint; no request was sent.
    NotConfigured,
    /// The agent used every iteration without finishing.
    MaxIterations,
    /// The task's wall-clock limit was reached.
    Timeout,
    /// No event for `idle_timeout`.
    Stalled,
    /// A token or cost budget was exceeded.
    BudgetExceeded,
    /// Interrupted by SIGINT/SIGTERM.
    Cancelled,
    /// Not run (fail-fast).
    Skipped,
}

impl Status {
    /// Every status, in report order.
    pub const ALL: [Status; 10] = [
        Status::Passed,
        Status::Failed,
        Status::Error,
        Status::NotConfigured,
        Status::MaxIterations,
        Status::Timeout,
        Status::Stalled,
        Status::BudgetExceeded,
        Status::Cancelled,
        Status::Skipped,
    ];

    /// The snake_case name used in every artifact.
    pub fn as_str(self) -> &'static str {
        match self {
            Status::Passed => "passed",
            Status::Failed => "failed",
            Status::Error => "error",
            Status::NotConfigured => "not_configured",
            Status::MaxIterations => "max_iterations",
            Status::Timeout => "timeout",
            Status::Stalled => "stalled",
            Status::BudgetExceeded => "budget_exceeded",
            Status::Cancelled => "cancelled",
            Status::Skipped => "skipped",
        }
    }

    /// True for `passed`.
    pub fn is_pass(self) -> bool {
        self == Status::Passed
    }
}

/// Which task and attempt an event belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The task's id.
    pub task_id: Arc<str>,
    /// 1-based attempt number.
    pub attempt: u32,
}

/// The record of a task's `check` command.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct CheckRecord {
    /// The command line.
    pub command: String,
    /// Its exit code; `None` when it was killed or could not start.
    pub exit_code: Option<i32>,
    /// The last part of its combined output.
    pub output_tail: String,
    /// The exit code of the same check run before the agent, when `check_before` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before: Option<Option<i32>>,
}

/// The class of a task's failure: the LLM call's own kinds, carried through, or one that only a
/// task can have. On the wire it is one snake_case string (`"check"`, `"rate_limit"`, …).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum FailureKind {
    /// An LLM call failed (infrastructure: rate limit, auth, network, …).
    Llm(ErrorKind),
    /// A tool failed in a way that ended the task.
    Tool,
    /// The agent itself failed (refusal, truncated output, malformed tool call, limits).
    Agent,
    /// The task's check command failed.
    Check,
    /// The machine cannot give the promised confinement.
    Sandbox,
    /// A bug or I/O failure inside dracode.
    Internal,
}

impl FailureKind {
    /// The kinds only a task has, with their wire names.
    const TASK_KINDS: [(FailureKind, &'static str); 5] = [
        (FailureKind::Tool, "tool"),
        (FailureKind::Agent, "agent"),
        (FailureKind::Check, "check"),
        (FailureKind::Sandbox, "sandbox"),
        (FailureKind::Internal, "internal"),
    ];

    /// True for infrastructure failures (reported as JUnit `<error>` rather than `<failure>`).
    pub fn is_infrastructure(self) -> bool {
        match self {
            FailureKind::Llm(kind) => kind.is_infrastructure(),
            FailureKind::Sandbox | FailureKind::Internal => true,
            FailureKind::Tool | FailureKind::Agent | FailureKind::Check => false,
        }
    }

    /// The snake_case name used in events and JUnit.
    pub fn as_str(self) -> &'static str {
        match self {
            FailureKind::Llm(kind) => kind.as_str(),
            own => Self::TASK_KINDS.iter().find(|(k, _)| *k == own).map_or("internal", |(_, name)| name),
        }
    }
}

impl From<ErrorKind> for FailureKind {
    /// An LLM kind as a task kind; dracode's own failures inside an LLM call are `Internal` either way.
    fn from(kind: ErrorKind) -> Self {
        if kind == ErrorKind::Internal { FailureKind::Internal } else { FailureKind::Llm(kind) }
    }
}

impl Serialize for FailureKind {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

impl<'de> Deserialize<'de> for FailureKind {
    fn deserialize<D: serde::Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        use serde::de::IntoDeserializer;
        let name = String::deserialize(deserializer)?;
        if let Some((kind, _)) = Self::TASK_KINDS.iter().find(|(_, n)| *n == name) {
            return Ok(*kind);
        }
        let llm: Result<ErrorKind, serde::de::value::Error> = ErrorKind::deserialize(name.as_str().into_deserializer());
        llm.map(FailureKind::from).map_err(|_| serde::de::Error::custom(format!("unknown error kind {name:?}")))
    }
}

impl JsonSchema for FailureKind {
    fn schema_name() -> std::borrow::Cow<'static, str> {
        "FailureKind".into()
    }

    fn json_schema(generator: &mut schemars::SchemaGenerator) -> schemars::Schema {
        let own: Vec<&str> = Self::TASK_KINDS.iter().map(|(_, name)| *name).collect();
        schemars::json_schema!({
            "description": "The class of failure: a task kind or an LLM call's kind.",
            "anyOf": [{"type": "string", "enum": own}, generator.subschema_for::<ErrorKind>()]
        })
    }
}

/// Why a task did not pass.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
pub struct TaskError {
    /// The class of failure.
    pub kind: FailureKind,
    /// A human explanation.
    pub message: String,
    /// The HTTP status, when the failure came from a response.
    #[serde(default)]
    pub http_status: Option<u16>,
}

impl TaskError {
    /// A failure of `kind` without an HTTP status.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Self {
        TaskError { kind, message: message.into(), http_status: None }
    }

    /// A failure inside dracode (I/O, a panic, an interrupted run).
    pub fn internal(message: impl Into<String>) -> Self {
        Self::new(FailureKind::Internal, message)
    }
}

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

/// One attempt of a task that was tried again.
#[derive(Debug, Clone, PartialEq)]
pub struct AttemptRecord {
    /// How the attempt ended.
    pub status: Status,
    /// Why.
    pub error: Option<TaskError>,
    /// Its wall time.
    pub duration: Duration,
}

/// Everything known about a finished task.
#[derive(Debug, Clone)]
pub struct TaskOutcome {
    /// The task's id.
    pub task_id: String,
    /// The manifest it came from (one JUnit testsuite per manifest).
    pub manifest: PathBuf,
    /// Its index in manifest order, for ordered reports.
    pub index: usize,
    /// How it ended.
    pub status: Status,
    /// LLM calls that returned a response.
    pub num_turns: u32,
    /// Wall time of all attempts.
    pub duration: Duration,
    /// Summed token usage of every call.
    pub usage: Usage,
    /// Cost in USD, `None` when the model has no price.
    pub cost_usd: Option<f64>,
    /// The agent's final message.
    pub result: Option<String>,
    /// Workspace-relative paths the task changed.
    pub files_changed: Vec<String>,
    /// The unified diff of the task's changes (`git apply`-able), when it changed anything.
    pub diff: Option<String>,
    /// The check command's record.
    pub check: Option<CheckRecord>,
    /// Why it did not pass.
    pub error: Option<TaskError>,
    /// Attempts made.
    pub attempts: u32,
    /// Passed only after a failed attempt.
    pub flaky: bool,
    /// The attempts before the last, in order (empty when the first attempt was final).
    pub prior_attempts: Vec<AttemptRecord>,
    /// The branch holding the task's changes as a commit (`commit = true`).
    pub branch: Option<String>,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The conversation of the last attempt.
    pub transcript: Option<Arc<Transcript>>,
}

impl TaskOutcome {
    /// An outcome with nothing recorded yet: no turns, no usage, no changes, no error.
    pub fn new(task_id: &str, manifest: &std::path::Path, index: usize, status: Status, provider: &str, model: &str) -> Self {
        TaskOutcome {
            task_id: task_id.to_string(),
            manifest: manifest.to_path_buf(),
            index,
            status,
            num_turns: 0,
            duration: Duration::ZERO,
            usage: Usage::default(),
            cost_usd: None,
            result: None,
            files_changed: Vec::new(),
            diff: None,
            check: None,
            error: None,
            attempts: 1,
            flaky: false,
            prior_attempts: Vec::new(),
            branch: None,
            provider: provider.to_string(),
            model: model.to_string(),
            transcript: None,
        }
    }
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
    /// The process exit code.
    pub exit_code: i32,
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
    /// A task ended (exactly once per task).
    TaskFinished(Box<TaskOutcome>),
    /// The run ended.
    RunFinished(RunTotals),
}

/// What a `retry` event retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum RetryScope {
    /// One HTTP request.
    Http,
    /// A whole task attempt.
    Task,
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
}

/// Hands every event to every reporter, in emission order.
pub struct EventBus {
    reporters: Mutex<Vec<Box<dyn Reporter>>>,
    failures: Mutex<Vec<String>>,
}

impl EventBus {
    /// A bus feeding `reporters`.
    pub fn new(reporters: Vec<Box<dyn Reporter>>) -> Arc<Self> {
        Arc::new(EventBus { reporters: Mutex::new(reporters), failures: Mutex::new(Vec::new()) })
    }

    /// Stamps `kind` and delivers it. A reporter's I/O failure is remembered, not fatal.
    pub fn emit(&self, task: Option<TaskRef>, kind: EventKind) {
        let event = Event { ts: SystemTime::now(), task, kind };
        let mut reporters = self.reporters.lock().unwrap_or_else(|p| p.into_inner());
        for reporter in reporters.iter_mut() {
            if let Err(e) = reporter.on_event(&event) {
                self.failures.lock().unwrap_or_else(|p| p.into_inner()).push(e.to_string());
            }
        }
    }

    /// Lets every reporter write its whole-run files; returns every I/O failure seen.
    pub fn finish(&self) -> Vec<String> {
        let mut reporters = self.reporters.lock().unwrap_or_else(|p| p.into_inner());
        let mut failures = std::mem::take(&mut *self.failures.lock().unwrap_or_else(|p| p.into_inner()));
        for reporter in reporters.iter_mut() {
            if let Err(e) = reporter.finish() {
                failures.push(e.to_string());
            }
        }
        failures
    }
}

/// When a task last emitted an event (for `idle_timeout`).
#[derive(Debug)]
pub struct Activity(Mutex<std::time::Instant>);

impl Activity {
    /// A clock that starts now.
    pub fn new() -> Arc<Self> {
        Arc::new(Activity(Mutex::new(std::time::Instant::now())))
    }

    /// Time since the last event.
    pub fn idle(&self) -> Duration {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).elapsed()
    }

    fn touch(&self) {
        *self.0.lock().unwrap_or_else(|p| p.into_inner()) = std::time::Instant::now();
    }
}

/// A handle that emits events on behalf of one task attempt (or of the run).
#[derive(Clone)]
pub struct Emitter {
    bus: Arc<EventBus>,
    task: Option<TaskRef>,
    activity: Option<Arc<Activity>>,
}

impl Emitter {
    /// An emitter for run-level events.
    pub fn run(bus: Arc<EventBus>) -> Self {
        Emitter { bus, task: None, activity: None }
    }

    /// An emitter for one attempt of one task.
    pub fn task(&self, task_id: &str, attempt: u32) -> Self {
        Emitter { bus: self.bus.clone(), task: Some(TaskRef { task_id: task_id.into(), attempt }), activity: None }
    }

    /// This emitter, also recording the time of each event in `activity`.
    pub fn with_activity(&self, activity: Arc<Activity>) -> Self {
        Emitter { activity: Some(activity), ..self.clone() }
    }

    /// Emits `kind` for this emitter's task.
    pub fn emit(&self, kind: EventKind) {
        if let Some(activity) = &self.activity {
            activity.touch();
        }
        self.bus.emit(self.task.clone(), kind);
    }

    /// An emitter that drops everything (for unit tests of tools).
    pub fn discard() -> Self {
        Emitter::run(EventBus::new(Vec::new()))
    }
}
