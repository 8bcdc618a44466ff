//! The one seam between running tasks and reporting them.
//!
//! The agent loop and the scheduler never print or write artifacts: they [`Emitter::emit`] typed
//! [`EventKind`]s. The [`EventBus`] stamps each with a time and queues it; a dispatcher thread
//! of its own hands it, in order, to every [`Reporter`] (JSONL, JUnit, summary, transcripts,
//! diffs, progress), so no task waits on a disk or a terminal. A new output format is a new
//! reporter; it touches no other file.

use crate::llm::{Message, StopReason, Usage};
use crate::results::exit_codes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::mpsc::{Receiver, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, SystemTime};
pub use crate::results::{CacheHit, CheckRecord, CompactionMethod, DeniedCall, FailureKind, RegradedFrom, RepeatVerdict, RetryScope, Status, TaskError};

/// Which task and attempt an event belongs to.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TaskRef {
    /// The task's id.
    pub task_id: Arc<str>,
    /// 1-based attempt number.
    pub attempt: u32,
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

/// One run of a task's check in an attempt that may repair (`check_repairs`): the first after
/// the agent finished, then one after each repair.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckRound {
    /// Its exit code; `None` when it was killed or could not start.
    pub exit_code: Option<i32>,
    /// Its wall time.
    pub duration: Duration,
    /// The last part of its output (what the agent was shown).
    pub output_tail: String,
}

/// One independent attempt of a repeated task (`repeat`), with its own workspace and record.
#[derive(Debug, Clone, PartialEq)]
pub struct RepeatRecord {
    /// 1-based, in run order.
    pub repeat: u32,
    /// The attempt number of its final attempt (as in its events' `attempt`).
    pub attempt: u32,
    /// How it ended.
    pub status: Status,
    /// Why.
    pub error: Option<TaskError>,
    /// Its wall time.
    pub duration: Duration,
    /// Its repairs after a failed check.
    pub repairs: u32,
    /// Its check's exit code, when the check ran.
    pub check_exit_code: Option<Option<i32>>,
    /// The files it changed.
    pub files_changed: Vec<String>,
    /// Whether the task's own fields (status, check, result, `diffs/<id>.patch`, transcript)
    /// are this attempt's.
    pub reported: bool,
    /// Its patch (written to its own file).
    pub diff: Option<String>,
    /// Its conversation (written to its own file).
    pub transcript: Option<Arc<Transcript>>,
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
    /// The 1-based line where the task begins in its manifest, when known (annotations, JUnit).
    pub line: Option<usize>,
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
    /// Passed only after a failed attempt; for a repeated task (`repeat`), its verdict is
    /// `flaky` (some attempts passed, some did not).
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
    /// The final answer, valid against the task's output schema (`None` without one, or
    /// without a valid answer).
    pub structured_output: Option<serde_json::Value>,
    /// Times the last attempt's conversation was shrunk or compacted to fit the context window.
    pub compactions: u32,
    /// The last attempt's tool calls the policy denied, in order.
    pub denied_calls: Vec<DeniedCall>,
    /// Protected paths the last attempt changed (put back before the check), sorted.
    pub protected: Vec<String>,
    /// Paths the change record does not hold (gitignored) that the last attempt left and that
    /// stayed for the check because `keep_ignored` names them, sorted (a new folder kept whole
    /// as `dir/`; at most 100, then `... and N more`).
    pub kept_ignored: Vec<String>,
    /// The last attempt's connections refused by the egress allowlist or the sandbox: how
    /// many, and the first distinct `host:port`s.
    pub network_denied: crate::egress::Denials,
    /// The `run_id` of the earlier run this result was carried over from, unchanged (a task
    /// that passed there and was not run again by `--rerun-failed` into the same folder).
    pub carried_from: Option<String>,
    /// Times the agent repaired its work after a failed check (`check_repairs`), last attempt.
    pub repairs: u32,
    /// Every check run of the last attempt when it repaired (`check` is the last of them).
    pub check_rounds: Vec<CheckRound>,
    /// A repeated task's share of attempts that passed (`None` without `repeat`).
    pub pass_rate: Option<f64>,
    /// A repeated task's verdict.
    pub verdict: Option<RepeatVerdict>,
    /// A repeated task's attempts, in order (empty without `repeat`).
    pub repeats: Vec<RepeatRecord>,
    /// Set when the result was reused from the cache (`--cache`): the pass it reuses and that
    /// pass's own figures; this run's usage and cost are then zero.
    pub cached: Option<CacheHit>,
    /// Set by `dracode regrade`: the attempt whose recorded patch this result grades again.
    pub regraded_from: Option<RegradedFrom>,
}

impl TaskOutcome {
    /// How it ended, as [`exit_codes::of_tasks`] weighs it: its status and its error.
    pub fn ending(&self) -> (Status, Option<&TaskError>) {
        (self.status, self.error.as_ref())
    }

    /// An outcome with nothing recorded yet: no turns, no usage, no changes, no error.
    pub fn new(task_id: &str, manifest: &std::path::Path, index: usize, status: Status, provider: &str, model: &str) -> Self {
        TaskOutcome {
            task_id: task_id.to_string(),
            manifest: manifest.to_path_buf(),
            index,
            line: None,
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
            structured_output: None,
            compactions: 0,
            denied_calls: Vec::new(),
            protected: Vec::new(),
            kept_ignored: Vec::new(),
            network_denied: crate::egress::Denials::default(),
            carried_from: None,
            repairs: 0,
            check_rounds: Vec::new(),
            pass_rate: None,
            verdict: None,
            repeats: Vec::new(),
            cached: None,
            regraded_from: None,
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
    /// Artifacts that could not be written before `run.finished` was recorded (0 when all were).
    pub artifact_failures: usize,
}

impl RunTotals {
    /// Counts, sums and the exit code of a set of outcomes (a run's, or a merge's).
    pub fn of(outcomes: &[TaskOutcome], duration: Duration) -> Self {
        let mut counts = Status::ALL.iter().map(|s| (*s, 0)).collect::<BTreeMap<_, _>>();
        for o in outcomes {
            *counts.entry(o.status).or_default() += 1;
        }
        let cost_usd = outcomes.iter().filter(|o| o.usage.requests > 0).try_fold(0.0, |sum, o| o.cost_usd.map(|c| sum + c));
        RunTotals {
            counts,
            usage: outcomes.iter().map(|o| o.usage).sum(),
            cost_usd,
            duration,
            exit_code: exit_codes::of_tasks(outcomes.iter().map(TaskOutcome::ending)),
            artifact_failures: 0,
        }
    }
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
        limit: crate::results::Limit,
        /// What is left, in the limit's unit (calls, seconds, tokens, USD).
        remaining: f64,
        /// The limit, in the same unit.
        allowed: f64,
        /// What the agent was told.
        message: String,
    },
    /// A task ended (exactly once per task).
    TaskFinished(Box<TaskOutcome>),
    /// The run ended.
    RunFinished(RunTotals),
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
    /// Records it (`results.jsonl`, `--jsonl`): gets it last, with the exit code every other
    /// artifact left — the process's own.
    Records,
}

/// Events that may wait for the dispatcher. When the queue is full an emitter waits (it never
/// drops an event: `results.jsonl` promises every one); 1,024 events is seconds of a busy run,
/// so only a reporter that is stuck — a full disk, a stderr nobody reads — ever slows a task.
pub const QUEUE_BOUND: usize = 1024;

/// What travels to the dispatcher thread.
enum Queued {
    /// An event to hand to every reporter.
    Event(Event),
    /// Answer on this channel once every earlier event has been handed over.
    Flush(SyncSender<()>),
}

/// Hands every event to every reporter, in emission order, on a thread of its own.
///
/// [`EventBus::emit`] only stamps the event and queues it (a bounded channel, see
/// [`QUEUE_BOUND`]); a dispatcher thread feeds the reporters, so a slow disk or terminal never
/// holds a task's thread. Stamping and queueing happen under one lock, so the queue's order is
/// the order of the timestamps, and every reporter sees the same order (which is what
/// `results.jsonl`'s `seq` counts). [`EventBus::finish`] closes the queue, waits until the
/// dispatcher has delivered everything, then lets every reporter write its whole-run files.
pub struct EventBus {
    sender: Mutex<Option<SyncSender<Queued>>>,
    dispatcher: Mutex<Option<JoinHandle<Vec<String>>>>,
}

impl EventBus {
    /// A bus feeding `reporters` from a dispatcher thread (none when there are no reporters).
    pub fn new(reporters: Vec<Box<dyn Reporter>>) -> Arc<Self> {
        if reporters.is_empty() {
            return Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) });
        }
        let (sender, receiver) = std::sync::mpsc::sync_channel(QUEUE_BOUND);
        let dispatcher = std::thread::Builder::new().name("dracode-reporters".into()).spawn(move || dispatch(receiver, reporters));
        match dispatcher {
            Ok(handle) => Arc::new(EventBus { sender: Mutex::new(Some(sender)), dispatcher: Mutex::new(Some(handle)) }),
            // No thread to be had: nothing can be reported, which `finish` says.
            Err(e) => {
                tracing::error!("cannot start the reporter thread: {e}");
                Arc::new(EventBus { sender: Mutex::new(None), dispatcher: Mutex::new(None) })
            }
        }
    }

    /// Stamps `kind` and queues it for the reporters; waits only while the queue is full. After
    /// [`EventBus::finish`] events are dropped.
    pub fn emit(&self, task: Option<TaskRef>, kind: EventKind) {
        let sender = lock(&self.sender);
        if let Some(sender) = sender.as_ref() {
            let _ = sender.send(Queued::Event(Event { ts: SystemTime::now(), task, kind }));
        }
    }

    /// Waits (at most `timeout`) until every event emitted so far has reached every reporter.
    /// For a process about to exit without [`EventBus::finish`], and for tests.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = std::sync::mpsc::sync_channel(1);
        let queued = lock(&self.sender).as_ref().is_some_and(|s| s.send(Queued::Flush(ack)).is_ok());
        !queued || done.recv_timeout(timeout).is_ok()
    }

    /// Delivers every queued event, lets every reporter write its whole-run files, and returns
    /// every I/O failure seen. Later calls return nothing.
    pub fn finish(&self) -> Vec<String> {
        drop(lock(&self.sender).take());
        let Some(handle) = lock(&self.dispatcher).take() else { return Vec::new() };
        handle.join().unwrap_or_else(|_| vec!["a reporter panicked; artifacts may be incomplete".to_string()])
    }
}

impl Drop for EventBus {
    fn drop(&mut self) {
        // Artifacts are complete even when the caller never called `finish`.
        self.finish();
    }
}

/// The dispatcher thread: every event to every reporter, in queue order, until the queue
/// closes; then every reporter's `finish`. Returns the I/O failures seen.
fn dispatch(receiver: Receiver<Queued>, mut reporters: Vec<Box<dyn Reporter>>) -> Vec<String> {
    let mut failures = Vec::new();
    let mut finished = vec![false; reporters.len()];
    for message in receiver {
        match message {
            Queued::Event(event) if matches!(event.kind, EventKind::RunFinished(_)) => {
                run_finished(&mut reporters, &mut finished, event, &mut failures);
            }
            Queued::Event(event) => {
                for reporter in &mut reporters {
                    if let Err(e) = reporter.on_event(&event) {
                        failures.push(e.to_string());
                    }
                }
            }
            Queued::Flush(ack) => {
                let _ = ack.send(());
            }
        }
    }
    for (reporter, done) in reporters.iter_mut().zip(finished) {
        if !done && let Err(e) = reporter.finish() {
            failures.push(e.to_string());
        }
    }
    failures
}

/// Hands `run.finished` to the reporters in [`RunEnd`] order. The whole-run files are written
/// (and their reporters finished) first; before each later group the event's exit code becomes
/// [`crate::results::exit_codes::ARTIFACTS_FAILED`] if anything failed so far (an interrupt's code
/// stays), so the record never claims a success its own files do not have.
fn run_finished(reporters: &mut [Box<dyn Reporter>], finished: &mut [bool], mut event: Event, failures: &mut Vec<String>) {
    for group in [RunEnd::WritesFiles, RunEnd::Shows, RunEnd::Records] {
        if let EventKind::RunFinished(totals) = &mut event.kind {
            totals.exit_code = crate::results::exit_codes::after_artifacts(totals.exit_code, failures.len());
            totals.artifact_failures = failures.len();
        }
        for (reporter, done) in reporters.iter_mut().zip(finished.iter_mut()).filter(|(r, _)| r.run_end() == group) {
            let result = reporter.on_event(&event);
            if let Err(e) = result {
                failures.push(e.to_string());
            }
            if group == RunEnd::WritesFiles {
                *done = true;
                if let Err(e) = reporter.finish() {
                    failures.push(e.to_string());
                }
            }
        }
    }
}

/// `mutex`'s contents; a panic elsewhere while it was held does not stop the reporting.
fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    mutex.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
}

/// A task's emitter watches its model calls: each HTTP retry becomes a `retry` event, and
/// each arrival of bytes (a streamed answer, a keep-alive) restarts the idle clock.
impl crate::llm::CallObserver for Emitter {
    fn on_retry(&self, notice: crate::llm::RetryNotice) {
        self.emit(EventKind::Retry { scope: RetryScope::Http, reason: notice.reason, delay: notice.delay, next_attempt: notice.attempt });
    }

    fn on_bytes(&self) {
        self.keep_alive();
    }
}

/// When a task last showed life — an event, or [`Emitter::keep_alive`] (for `idle_timeout`).
#[derive(Debug)]
pub struct Activity(Mutex<std::time::Instant>);

impl Activity {
    /// A clock that starts now.
    pub fn new() -> Arc<Self> {
        Arc::new(Activity(Mutex::new(std::time::Instant::now())))
    }

    /// Time since the last event.
    pub fn idle(&self) -> Duration {
        lock(&self.0).elapsed()
    }

    fn touch(&self) {
        *lock(&self.0) = std::time::Instant::now();
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

    /// Restarts the task's idle clock without an event: the task is alive (bytes arrived on a
    /// model stream, a command printed output). Does nothing without an activity clock.
    pub fn keep_alive(&self) {
        if let Some(activity) = &self.activity {
            activity.touch();
        }
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

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::mpsc::Sender;

    /// Records the message text of every event; sleeps `delay` on each; fails on "fail".
    struct Record {
        seen: Sender<String>,
        delay: Duration,
    }

    impl Reporter for Record {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            std::thread::sleep(self.delay);
            let EventKind::AgentMessage { text } = &event.kind else { return Ok(()) };
            let _ = self.seen.send(text.clone());
            if text == "fail" { Err(std::io::Error::other("disk full")) } else { Ok(()) }
        }
        fn finish(&mut self) -> std::io::Result<()> {
            let _ = self.seen.send("finished".into());
            Ok(())
        }
    }

    fn message(text: &str) -> EventKind {
        EventKind::AgentMessage { text: text.to_string() }
    }

    #[test]
    fn a_slow_reporter_does_not_hold_the_emitter_and_finish_drains_in_order() {
        let (seen, received) = std::sync::mpsc::channel();
        let bus = EventBus::new(vec![Box::new(Record { seen, delay: Duration::from_millis(20) })]);
        let emitter = Emitter::run(bus.clone());
        let started = std::time::Instant::now();
        for i in 0..20 {
            emitter.emit(message(&i.to_string()));
        }
        assert!(started.elapsed() < Duration::from_millis(200), "emitting waited for the reporter: {:?}", started.elapsed());
        assert!(bus.finish().is_empty());
        let got: Vec<String> = received.try_iter().collect();
        let want: Vec<String> = (0..20).map(|i| i.to_string()).chain(["finished".to_string()]).collect();
        assert_eq!(got, want);
        emitter.emit(message("late"));
        assert!(received.try_recv().is_err(), "nothing is delivered after finish");
    }

    #[test]
    fn events_from_many_threads_arrive_with_rising_timestamps() {
        struct Times(Arc<Mutex<Vec<SystemTime>>>);
        impl Reporter for Times {
            fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
                lock(&self.0).push(event.ts);
                Ok(())
            }
        }
        let times = Arc::new(Mutex::new(Vec::new()));
        let bus = EventBus::new(vec![Box::new(Times(times.clone()))]);
        std::thread::scope(|s| {
            for t in 0..4 {
                let emitter = Emitter::run(bus.clone()).task(&format!("t{t}"), 1);
                s.spawn(move || (0..QUEUE_BOUND).for_each(|_| emitter.emit(message("x"))));
            }
        });
        bus.finish();
        let times = lock(&times);
        assert_eq!(times.len(), 4 * QUEUE_BOUND, "a full queue makes emitters wait, it never drops");
        assert!(times.windows(2).all(|w| w[0] <= w[1]), "queue order is timestamp order");
    }

    /// Fails its whole-run file on `finish`, or records the exit code of `run.finished`.
    struct EndReporter {
        role: RunEnd,
        codes: Sender<(RunEnd, i32, usize)>,
    }

    impl Reporter for EndReporter {
        fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
            if let EventKind::RunFinished(totals) = &event.kind {
                let _ = self.codes.send((self.role, totals.exit_code, totals.artifact_failures));
            }
            Ok(())
        }
        fn finish(&mut self) -> std::io::Result<()> {
            let _ = self.codes.send((self.role, -1, 0));
            if self.role == RunEnd::WritesFiles { Err(std::io::Error::other("cannot write junit.xml: disk full")) } else { Ok(()) }
        }
        fn run_end(&self) -> RunEnd {
            self.role
        }
    }

    #[test]
    fn run_finished_reaches_the_record_last_with_the_exit_code_the_files_left() {
        let (codes, received) = std::sync::mpsc::channel();
        // Listed record first: the order of the list must not matter.
        let reporters: Vec<Box<dyn Reporter>> = [RunEnd::Records, RunEnd::Shows, RunEnd::WritesFiles]
            .into_iter()
            .map(|role| Box::new(EndReporter { role, codes: codes.clone() }) as Box<dyn Reporter>)
            .collect();
        let bus = EventBus::new(reporters);
        let totals = RunTotals::of(&[], Duration::ZERO);
        assert_eq!(totals.exit_code, crate::results::exit_codes::OK);
        bus.emit(None, EventKind::RunFinished(totals));
        assert_eq!(bus.finish(), ["cannot write junit.xml: disk full"]);
        let seen: Vec<(RunEnd, i32, usize)> = received.try_iter().collect();
        let failed = crate::results::exit_codes::ARTIFACTS_FAILED;
        assert_eq!(
            seen,
            [
                (RunEnd::WritesFiles, 0, 0),
                (RunEnd::WritesFiles, -1, 0),
                (RunEnd::Shows, failed, 1),
                (RunEnd::Records, failed, 1),
                (RunEnd::Records, -1, 0),
                (RunEnd::Shows, -1, 0),
            ],
            "files written and finished first; then the display and the record see exit code 3"
        );
    }

    #[test]
    fn reporter_failures_come_back_from_finish_and_flush_waits_for_delivery() {
        let (seen, received) = std::sync::mpsc::channel();
        let bus = EventBus::new(vec![Box::new(Record { seen, delay: Duration::from_millis(5) })]);
        bus.emit(None, message("fail"));
        bus.emit(None, message("ok"));
        assert!(bus.flush(Duration::from_secs(5)));
        assert_eq!(received.try_iter().collect::<Vec<_>>(), ["fail", "ok"]);
        assert_eq!(bus.finish(), ["disk full"]);
        assert!(bus.finish().is_empty());
    }
}
