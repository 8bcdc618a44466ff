//! What is known about a finished task ([`TaskOutcome`]) and a finished run ([`RunTotals`]).

use super::{CacheHit, CheckRecord, DeniedCall, RegradedFrom, RepeatVerdict, Status, TaskError};
use dracode_llm::{Message, Usage};
use dracode_results::exit_codes;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::PathBuf;
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
    /// When it began, after the attempt began.
    pub started: Duration,
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
    /// The manifest's stable name, `<repository>/<path in it>` (the JUnit classname), when known.
    pub manifest_name: Option<String>,
    /// The task's `tags`.
    pub tags: Vec<String>,
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
    /// the check's world got too because `keep_ignored` names them, sorted (a new folder kept whole
    /// as `dir/`; at most 100, then `... and N more`).
    pub kept_ignored: Vec<String>,
    /// The last attempt's connections refused by the egress allowlist or the sandbox: how
    /// many, and the first distinct `host:port`s.
    pub network_denied: dracode_sandbox::egress::Denials,
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
            manifest_name: None,
            tags: Vec::new(),
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
            network_denied: dracode_sandbox::egress::Denials::default(),
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
