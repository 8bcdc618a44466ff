//! What the page is given: one [`Report`] (embedded as JSON in `<script type="application/json"
//! id="report-data">`) and, for each task, one [`TaskDetail`] (in `<script type="application/json"
//! id="detail-N">`, N the row's `detail`), parsed only when the task is opened — a page of 1,000
//! tasks parses a few hundred KB before its first paint, not every transcript.
//!
//! Every string here is untrusted (model, tool and check text, task ids, file names): the page
//! shows it as text, never as markup. Times are RFC 3339 UTC strings; `*_ms` are milliseconds;
//! `start_ms` offsets count from [`Run::started_at`]. Secrets are masked already: the report is
//! made from the output folder's artifacts, which are.

pub use dracode_results::Usage;
use dracode_results::exit_codes::not_judged;
use dracode_results::{Status, TaskError};
use serde::Serialize;

/// `passed`, `failed` or `not_judged`: how a task that ended `status` (for `error`) is counted.
/// Not judged: what the exit code counts so (a provider, the machine, the setup), and a task
/// cancelled by an interrupt or skipped after `--fail-fast` — nothing says its work failed.
pub fn group(status: Status, error: Option<&TaskError>) -> &'static str {
    if status.is_pass() {
        "passed"
    } else if not_judged(status, error) || matches!(status, Status::Cancelled | Status::Skipped) {
        "not_judged"
    } else {
        "failed"
    }
}

/// The version of this shape; the page refuses data of another.
pub const FORMAT: u32 = 1;

/// What JavaScript's `encodeURIComponent` leaves as it is: letters, digits and `-_.!~*'()`.
const URI_COMPONENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'-')
    .remove(b'_')
    .remove(b'.')
    .remove(b'!')
    .remove(b'~')
    .remove(b'*')
    .remove(b'\'')
    .remove(b'(')
    .remove(b')');

/// The fragment that opens task `id`'s own view in the page: `#` and the id as the script's
/// `taskHref` writes it (`encodeURIComponent`), so `report.html` + this, in a pull request or
/// a chat message, lands on the task.
pub fn task_fragment(id: &str) -> String {
    format!("#{}", percent_encoding::utf8_percent_encode(id, URI_COMPONENT))
}

/// Everything the overview shows.
#[derive(Debug, Clone, Serialize)]
pub struct Report {
    /// [`FORMAT`].
    pub format: u32,
    /// `dracode 0.1.0`.
    pub generated_by: String,
    /// `run` (one run's folder), `merged` (`dracode merge`) or `combined` (`dracode combine`).
    pub kind: String,
    /// The run.
    pub run: Run,
    /// Counts by status and group.
    pub counts: Counts,
    /// The batch's setup commands, in the order they started.
    pub setups: Vec<Setup>,
    /// One row per task, in manifest order.
    pub tasks: Vec<TaskRow>,
    /// `combine.json` as `dracode combine` wrote it, when the folder holds one.
    pub combine: Option<serde_json::Value>,
    /// Earlier runs given with `--history`, oldest first, this run not included; empty without.
    pub history: Vec<PastRun>,
}

/// The run as a whole.
#[derive(Debug, Clone, Serialize)]
pub struct Run {
    /// Its `run_id`.
    pub run_id: String,
    /// `run.started`'s `ts`.
    pub started_at: String,
    /// `run.finished`'s `ts`; `None` when the run was killed before it (the page says so).
    pub finished_at: Option<String>,
    /// Wall time from `run.started` to `run.finished` (or to the last event).
    pub duration_ms: u64,
    /// Parallel tasks (`--jobs`).
    pub jobs: usize,
    /// dracode's version that ran it.
    pub version: String,
    /// The manifests, as given.
    pub manifests: Vec<String>,
    /// The process's exit code; `None` without `run.finished`.
    pub exit_code: Option<i32>,
    /// `run.started.warnings`.
    pub warnings: Vec<String>,
    /// The shards a merged file joins (`run.started.merged_from`); empty for one run.
    pub shards: Vec<Shard>,
    /// Tokens of every call.
    pub usage: Usage,
    /// Summed cost; `None` when a model's price is unknown.
    pub total_cost_usd: Option<f64>,
}

/// One shard of a merged run.
#[derive(Debug, Clone, Serialize)]
pub struct Shard {
    /// The folder it was read from.
    pub dir: String,
    /// Its `run_id`.
    pub run_id: String,
    /// `K/N`, when it was a shard.
    pub shard: Option<String>,
    /// Its tasks.
    pub task_count: usize,
}

/// The numbers at the top of the page.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Tasks in the report.
    pub total: usize,
    /// Group `passed`: the check passed (or no check and the agent finished).
    pub passed: usize,
    /// Group `failed`: judged and failed (the agent's work).
    pub failed: usize,
    /// Group `not_judged`: the provider, the machine, the setup, a cancel, a skip — not the agent.
    pub not_judged: usize,
    /// Taken from `--cache`.
    pub cached: usize,
    /// Carried from an earlier run (`--rerun-failed` into the same folder).
    pub carried: usize,
    /// Passed after an attempt failed on the agent's work.
    pub flaky: usize,
    /// Each status (`passed`, `failed`, `error`, `timeout`, …) with its count, in a fixed order,
    /// statuses with no task left out.
    pub by_status: Vec<(String, usize)>,
}

/// One run of `[setup]`.
#[derive(Debug, Clone, Serialize)]
pub struct Setup {
    /// The command.
    pub command: String,
    /// The repository its workspace was made from.
    pub repo: String,
    /// Offset of `setup.started` from the run's start.
    pub start_ms: u64,
    /// Its wall time; `None` when it never finished.
    pub duration_ms: Option<u64>,
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// Why it failed; `None` when it passed.
    pub error: Option<String>,
    /// What it made.
    pub outputs: Vec<String>,
    /// The last part of its output.
    pub output_tail: String,
}

/// One row of the task table, and what the overview's pictures draw of it.
#[derive(Debug, Clone, Serialize)]
pub struct TaskRow {
    /// The task id (also the page's anchor: `report.html#<id>`, percent-encoded as a URL does).
    pub id: String,
    /// Manifest order, 0-based.
    pub index: usize,
    /// The status word (`passed`, `failed`, `error`, `timeout`, `not_configured`, …).
    pub status: String,
    /// `passed`, `failed` or `not_judged`: the colour and the count it goes in.
    pub group: String,
    /// The failure's kind (`check`, `agent`, `provider`, `setup`, …), for a task that failed.
    pub kind: Option<String>,
    /// Why, in one line (as `summary.md` gives it); `None` for a pass.
    pub reason: Option<String>,
    /// The task's tags.
    pub tags: Vec<String>,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The manifest the task came from (with `:line` when known).
    pub manifest: String,
    /// Wall time of all its attempts.
    pub duration_ms: u64,
    /// Its cost; `None` when the price is unknown.
    pub cost_usd: Option<f64>,
    /// Its tokens.
    pub usage: Usage,
    /// Model turns, over all attempts.
    pub turns: u32,
    /// Attempts made.
    pub attempts: u32,
    /// Passed after an attempt failed on the agent's work.
    pub flaky: bool,
    /// Taken from `--cache` (no agent ran).
    pub cached: bool,
    /// Carried from this `run_id` (no agent ran in this run).
    pub carried_from: Option<String>,
    /// Repair rounds after a failed check.
    pub repairs: u32,
    /// Files its patch changes.
    pub files_changed: usize,
    /// With `repeat`: the share of attempts that passed, and the verdict (`passed`, `flaky`, `failed`).
    pub pass_rate: Option<f64>,
    /// With `repeat`: the verdict.
    pub verdict: Option<String>,
    /// Protected paths the agent changed (put back before the check).
    pub protected: usize,
    /// Protected paths a tool was refused to write (`protected_refused`).
    pub protected_refused: usize,
    /// Tool calls the policy refused.
    pub denied_calls: u32,
    /// Connections (and name lookups) the sandbox refused the agent's commands.
    pub network_denied: u64,
    /// Those it refused the check's or the setup's commands: what the project's own tests asked,
    /// not the agent.
    pub network_denied_check: u64,
    /// Its attempts on the run's timeline.
    pub timeline: Vec<AttemptBar>,
    /// Its results in the runs given with `--history`, in [`Report::history`]'s order (`None`
    /// where that run did not have it).
    pub history: Vec<Option<PastResult>>,
    /// The number N of the `detail-N` element holding its [`TaskDetail`].
    pub detail: usize,
}

/// One attempt on the timeline.
#[derive(Debug, Clone, Serialize)]
pub struct AttemptBar {
    /// 1-based.
    pub attempt: u32,
    /// Offset of its `task.started` from the run's start.
    pub start_ms: u64,
    /// Its wall time.
    pub duration_ms: u64,
    /// How it ended.
    pub status: String,
    /// `passed`, `failed` or `not_judged`, as [`TaskRow::group`].
    pub group: String,
    /// What it spent the time on, in order, inside `[start_ms, start_ms + duration_ms]`.
    pub phases: Vec<Phase>,
}

/// A stretch of an attempt.
#[derive(Debug, Clone, Serialize)]
pub struct Phase {
    /// `prepare` (workspace, and the check before the agent), `agent`, `check`, or `repair` (the
    /// agent again after a failed check).
    pub kind: String,
    /// Offset from the run's start.
    pub start_ms: u64,
    /// Its wall time.
    pub duration_ms: u64,
}

/// A task's result in an earlier run.
#[derive(Debug, Clone, Serialize)]
pub struct PastResult {
    /// Its status then.
    pub status: String,
    /// Its group then (`passed`, `failed`, `not_judged`).
    pub group: String,
    /// Its cost then.
    pub cost_usd: Option<f64>,
    /// Protected paths a tool was refused to write then (0 in a record that did not count them).
    pub protected_refused: usize,
}

/// An earlier run given with `--history`.
#[derive(Debug, Clone, Serialize)]
pub struct PastRun {
    /// Its `run_id`.
    pub run_id: String,
    /// When it started.
    pub started_at: String,
    /// The folder it was read from, as given.
    pub dir: String,
    /// Tasks that passed, of `total`.
    pub passed: usize,
    /// Tasks it reported.
    pub total: usize,
    /// Its summed cost.
    pub total_cost_usd: Option<f64>,
    /// Protected paths tools were refused to write, over its tasks.
    pub protected_refused: usize,
}

/// What a task's own view shows, parsed when it is opened.
#[derive(Debug, Clone, Serialize)]
pub struct TaskDetail {
    /// The task id.
    pub id: String,
    /// The failure's kind and message, when it failed.
    pub error: Option<ErrorText>,
    /// The agent's final answer.
    pub result: Option<String>,
    /// `output_schema`'s answer.
    pub structured_output: Option<serde_json::Value>,
    /// The check's last run.
    pub check: Option<Check>,
    /// Each check run of an attempt with repairs (first after the agent, then after each repair).
    pub check_rounds: Vec<CheckRound>,
    /// Its patch (`diffs/<id>.patch`), cut at [`DIFF_LIMIT`] bytes.
    pub diff: Option<String>,
    /// Whether `diff` was cut.
    pub diff_cut: bool,
    /// Files its patch changes.
    pub files_changed: Vec<String>,
    /// Protected paths it changed, put back before the check.
    pub protected: Vec<String>,
    /// Protected paths a tool was refused to change.
    pub protected_refused: Vec<String>,
    /// Ignored files it left that the check was allowed to see (`keep_ignored`).
    pub kept_ignored: Vec<String>,
    /// The conversation (`transcripts/<id>.json`), each tool result cut at [`TOOL_RESULT_LIMIT`]
    /// bytes; `None` without one.
    pub transcript: Option<Transcript>,
    /// Tool calls the policy refused (by `call_id`, to mark them in the transcript).
    pub denied: Vec<Denied>,
    /// Connections the sandbox refused.
    pub network_denied: Vec<NetworkDenied>,
    /// Earlier attempts of the task (retries), oldest first.
    pub prior_attempts: Vec<PriorAttempt>,
    /// With `repeat`: every repeat with its result.
    pub repeats: Vec<Repeat>,
    /// Retries (of one HTTP request or of a whole attempt), in order.
    pub retries: Vec<Retry>,
    /// Limit warnings the agent was given.
    pub limit_warnings: Vec<String>,
    /// The artifacts of the task that exist, relative to the report (links work in the downloaded
    /// folder).
    pub files: Vec<String>,
}

/// A failure in words.
#[derive(Debug, Clone, Serialize)]
pub struct ErrorText {
    /// `check`, `agent`, `provider`, …
    pub kind: String,
    /// What happened.
    pub message: String,
}

/// The check's record.
#[derive(Debug, Clone, Serialize)]
pub struct Check {
    /// The command line.
    pub command: String,
    /// Its exit code (`None`: killed or did not start).
    pub exit_code: Option<i32>,
    /// The last part of its output.
    pub output_tail: String,
    /// With `check_before`: whether it ran before the agent, and its exit code then.
    pub ran_before: bool,
    /// The exit code before the agent.
    pub before_exit_code: Option<i32>,
    /// The last part of its output before the agent, when recorded.
    pub before_output_tail: Option<String>,
}

/// One check run of an attempt with repairs.
#[derive(Debug, Clone, Serialize)]
pub struct CheckRound {
    /// Its exit code.
    pub exit_code: Option<i32>,
    /// Its wall time.
    pub duration_ms: u64,
    /// The last part of its output (what the agent was shown).
    pub output_tail: String,
}

/// The conversation.
#[derive(Debug, Clone, Serialize)]
pub struct Transcript {
    /// The system prompt.
    pub system: String,
    /// The tools it was offered.
    pub tools: Vec<String>,
    /// The messages, as `transcripts/<id>.json` holds them: `{role, content: [block]}`, a block
    /// one of `{type: "text", text}`, `{type: "reasoning", text}`, `{type: "tool_use", id, name,
    /// input}`, `{type: "tool_result", tool_use_id, content, is_error?}` (any other type shown as
    /// JSON). A cut `content` ends with a line saying how much was left out.
    pub messages: Vec<serde_json::Value>,
}

/// A refused tool call.
#[derive(Debug, Clone, Serialize)]
pub struct Denied {
    /// The provider's call id.
    pub call_id: String,
    /// The tool.
    pub tool: String,
    /// What the agent was told.
    pub message: String,
}

/// A refused connection (`network.denied`).
#[derive(Debug, Clone, Serialize)]
pub struct NetworkDenied {
    /// The host asked for (empty for a name lookup).
    pub host: String,
    /// Its port.
    pub port: u16,
    /// The command that asked.
    pub command: String,
    /// Why, when more than "network off".
    pub reason: Option<String>,
    /// `agent`, `check` or `setup`.
    pub phase: String,
    /// A refused name lookup, not a connection.
    pub lookup: bool,
}

/// An earlier attempt.
#[derive(Debug, Clone, Serialize)]
pub struct PriorAttempt {
    /// How it ended.
    pub status: String,
    /// Why.
    pub error: Option<ErrorText>,
    /// Its wall time.
    pub duration_ms: u64,
}

/// One repeat of a repeated task.
#[derive(Debug, Clone, Serialize)]
pub struct Repeat {
    /// 1-based.
    pub repeat: u32,
    /// How it ended.
    pub status: String,
    /// Why.
    pub error: Option<ErrorText>,
    /// Its wall time.
    pub duration_ms: u64,
    /// Repair rounds.
    pub repairs: u32,
    /// Whether its work is the one the task reports (its patch is `diffs/<id>.patch`).
    pub reported: bool,
    /// Files its patch changes.
    pub files_changed: Vec<String>,
    /// Its patch file and transcript file, relative to the report.
    pub files: Vec<String>,
}

/// A retry.
#[derive(Debug, Clone, Serialize)]
pub struct Retry {
    /// `http` (one request) or `task` (a whole attempt).
    pub scope: String,
    /// Why.
    pub reason: String,
    /// How long it waited.
    pub delay_ms: u64,
}

/// The largest patch a task's view embeds, in bytes (the whole one is in `diffs/`).
pub const DIFF_LIMIT: usize = 256 * 1024;

/// The largest tool result a transcript embeds, in bytes (the whole one is in `transcripts/`).
pub const TOOL_RESULT_LIMIT: usize = 16 * 1024;

#[cfg(test)]
mod tests {
    use super::task_fragment;

    #[test]
    fn a_task_fragment_is_what_the_script_routes_on() {
        assert_eq!(task_fragment("fix-lint_2.x"), "#fix-lint_2.x");
        assert_eq!(task_fragment("a b/c#d?é"), "#a%20b%2Fc%23d%3F%C3%A9");
        assert_eq!(task_fragment("!~*'()"), "#!~*'()");
        // The script's own encoding, which this mirrors.
        let script = include_str!("../assets/report.js");
        assert!(script.contains("return '#' + encodeURIComponent(id);"), "report.js's taskHref changed: change task_fragment too");
    }
}
