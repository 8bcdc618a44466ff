//! The JSONL wire format of `results.jsonl` and `--jsonl`: one [`WireEvent`] a line.
//!
//! These types are the user contract (docs/src/reference/output.md) and the events themselves:
//! dracode's engine emits these records (with [`Header::unstamped`] headers its event bus
//! stamps), every reporter reads them, and `merge`, `regrade` and `combine` replay them as read;
//! [`events_schema`] is what `dracode schema events` prints. A change here is a change of the
//! wire, which the schema shows.
//!
//! # Wire format
//!
//! Every line is an object whose first key is `type` (dotted: `run.started`, `setup.started`, `setup.finished`, `task.started`,
//! `turn.completed`, `tool.started`, `tool.completed`, `retry`, `agent.message`,
//! `context.compacted`, `network.denied`, `limit.warning`, `task.finished`, `run.finished`), then `schema_version` (1), `seq` (1, 2, … across the file),
//! `ts` (RFC 3339 UTC with milliseconds) and `run_id`; task events add `task_id` and `attempt`
//! (1-based), and every event adds `shard` (`K/N`) when the run is sharded. The type's own fields
//! follow. Durations are `*_ms` integers; a cost is `null` when the model's price is unknown.

use crate::{
    AgentOrigin, CacheHit, CheckRecord, CompactionMethod, DeniedCall, IssueOrigin, Limit, RegradedFrom, RepeatVerdict, RetryScope, Status,
    TaskError, Usage,
};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// The version of this wire format; bumped only for a change that breaks a reader.
pub const SCHEMA_VERSION: u32 = 1;

/// How much of a tool's output `tool.completed` carries, in bytes.
pub const TOOL_OUTPUT_LIMIT: usize = 2048;

/// The longest prefix of `text` of at most `limit` bytes that ends on a character boundary:
/// how every cut text of the results (a tool's output, a report's patch) is cut.
pub fn cut_at(text: &str, limit: usize) -> &str {
    if text.len() <= limit {
        return text;
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    &text[..end]
}

/// `value` with every string longer than `limit` bytes cut (by [`cut_at`]) and a note of how many
/// bytes were cut: how `tool.started` carries a tool's arguments.
pub fn cap_strings(value: &serde_json::Value, limit: usize) -> serde_json::Value {
    use serde_json::Value;
    match value {
        Value::String(text) if text.len() > limit => {
            let kept = cut_at(text, limit);
            Value::String(format!("{kept}[... {} bytes cut]", text.len() - kept.len()))
        }
        Value::Array(items) => Value::Array(items.iter().map(|v| cap_strings(v, limit)).collect()),
        Value::Object(map) => Value::Object(map.iter().map(|(k, v)| (k.clone(), cap_strings(v, limit))).collect()),
        other => other.clone(),
    }
}

/// The fields every line carries.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct Header {
    /// 1 in this version of the format.
    pub schema_version: u32,
    /// 1 for the first line, increasing by one per line.
    pub seq: u64,
    /// When the event happened, RFC 3339 UTC with milliseconds.
    pub ts: String,
    /// The run this line belongs to.
    pub run_id: String,
    /// The task, for task events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub task_id: Option<String>,
    /// The 1-based attempt, for task events (on `retry`, `attempt` is instead the attempt
    /// about to start).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub attempt: Option<u32>,
    /// `K/N` when the run is sharded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<String>,
}

impl Header {
    /// The header of an event about to be emitted, not yet stamped: this format's version, `seq`
    /// 0 and no `ts` or `run_id` (what the bus that delivers it fills), and the task (its id and
    /// attempt) when it is a task's.
    pub fn unstamped(task: Option<(&str, u32)>) -> Self {
        Header {
            schema_version: SCHEMA_VERSION,
            seq: 0,
            ts: String::new(),
            run_id: String::new(),
            task_id: task.map(|(id, _)| id.to_string()),
            attempt: task.map(|(_, attempt)| attempt),
            shard: None,
        }
    }
}

/// One line of `results.jsonl`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(tag = "type")]
pub enum WireEvent {
    /// The run began.
    #[serde(rename = "run.started")]
    RunStarted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// dracode's version.
        version: String,
        /// The manifest paths, as given.
        manifests: Vec<String>,
        /// Tasks selected to run.
        task_count: usize,
        /// Parallel tasks.
        jobs: usize,
        /// What the user should know before trusting the results: uncommitted changes left out
        /// of worktrees, commands that ran unconfined (`sandbox = "off"`). Absent when none (and in
        /// files of older versions).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        warnings: Vec<String>,
        /// The config files the run read (`dracode.toml` as found or given, then
        /// `dracode.local.toml`), absolute paths, lowest layer first; `[]` when none was (built-in
        /// defaults and `DRACODE_*` variables only). Absent in files of older versions and in a
        /// merged file.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        config_files: Option<Vec<String>>,
        /// Only in a file written by `dracode merge`: the outputs it joins, in the order their
        /// lines follow.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        merged_from: Option<Vec<MergedFrom>>,
    },
    /// The batch's setup command began (`[setup]`), before any task.
    #[serde(rename = "setup.started")]
    SetupStarted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The command.
        command: String,
        /// The repository its workspace was made from.
        repo: String,
        /// The commit its workspace started from, in a git repository.
        base_commit: Option<String>,
        /// How many tasks it serves.
        tasks: usize,
    },
    /// The batch's setup command ended. Unless `error` is null, no agent ran: every task it
    /// served ends `error`, kind `setup`.
    #[serde(rename = "setup.finished")]
    SetupFinished {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The command.
        command: String,
        /// Its exit code; null when it was killed, timed out or did not start.
        exit_code: Option<i32>,
        /// Wall time, making its workspace included.
        duration_ms: u64,
        /// The last part of its output, secrets masked.
        output_tail: String,
        /// What it made, copied into each task's workspace: new folders whole, new files in
        /// folders that were there (at most 100, then `... and N more`).
        outputs: Vec<String>,
        /// Files of the base it changed: not carried (each task starts from the base).
        #[serde(default, skip_serializing_if = "Vec::is_empty")]
        not_carried: Vec<String>,
        /// Why it failed (its exit code and the line of its output that says why, picked as
        /// for a failed check; or what kept it from running); null when it passed.
        error: Option<String>,
    },
    /// A task attempt began.
    #[serde(rename = "task.started")]
    TaskStarted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// Provider name.
        provider: String,
        /// Model name.
        model: String,
        /// `worktree`, `copy` or `none`.
        isolation: String,
        /// Where the task's tools run.
        workdir: String,
        /// The commit the workspace started from, in a git repository.
        base_commit: Option<String>,
        /// How long making the workspace took, just before this line (absent in files of older
        /// versions and where no workspace was made).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        workspace_ms: Option<u64>,
        /// The GitHub issue the task was made from (a manifest's `[issues]`); absent for a task
        /// the manifest wrote.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        issue: Option<IssueOrigin>,
    },
    /// An LLM call returned.
    #[serde(rename = "turn.completed")]
    TurnCompleted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// 1-based.
        turn: u32,
        /// Why the model stopped: `end_turn`, `tool_use`, `max_tokens`, `stop_sequence`,
        /// `refusal`, `content_filter`, `pause_turn`, `malformed_tool_call`, or the provider's
        /// own word.
        stop_reason: String,
        /// This call's tokens.
        usage: Usage,
        /// Wall time of the call, retries included.
        duration_ms: u64,
    },
    /// A tool call began.
    #[serde(rename = "tool.started")]
    ToolStarted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The provider's call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// The arguments, each string value cut to 2,048 bytes (`TOOL_OUTPUT_LIMIT`: a `write_file`
        /// of megabytes is not copied whole into every results file).
        // serde_json::Value has no Arbitrary: small JSON values (`roundtrip_tests::json`).
        #[cfg_attr(test, proptest(strategy = "crate::strategies::json()"))]
        input: serde_json::Value,
        /// Size of the whole arguments as JSON, in bytes.
        #[serde(default)]
        input_bytes: usize,
    },
    /// A tool call ended.
    #[serde(rename = "tool.completed")]
    ToolCompleted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The provider's call id.
        call_id: String,
        /// Tool name.
        name: String,
        /// False when the tool returned an error.
        ok: bool,
        /// What the model was sent, cut to 2 KB on a character boundary.
        output: String,
        /// The length in bytes of the whole output.
        output_bytes: usize,
        /// Wall time.
        duration_ms: u64,
    },
    /// Something is about to be tried again.
    #[serde(rename = "retry")]
    Retry {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// `http` (one request) or `task` (a whole attempt).
        scope: RetryScope,
        /// The error kind or HTTP status that caused it.
        reason: String,
        /// The wait before the retry.
        delay_ms: u64,
        /// The attempt about to start: of the HTTP request for `http`, of the task for `task`.
        /// (It takes the place of the header's `attempt`.)
        attempt: u32,
    },
    /// Text the agent showed.
    #[serde(rename = "agent.message")]
    AgentMessage {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The text.
        text: String,
    },
    /// The conversation was shrunk to stay within the model's context window.
    #[serde(rename = "context.compacted")]
    ContextCompacted {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// Estimated tokens of the next request before (the last reported prompt size plus
        /// about one token per 4 bytes added since).
        tokens_before: u64,
        /// Estimated tokens of the next request after.
        tokens_after: u64,
        /// `trim_tool_outputs` (old tool outputs cut to head and tail) or `summary` (the model
        /// summarised the work so far).
        method: CompactionMethod,
    },
    /// A connection of the task's commands was refused: by the egress allowlist's proxy (a
    /// host not listed, or an address it may not reach), by `web_fetch`, or by the sandbox (a
    /// connection that bypassed the proxy, a datagram socket).
    #[serde(rename = "network.denied")]
    NetworkDenied {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// The host name or address asked for (or a socket path); empty for a name lookup
        /// (`lookup`), whose name the sandbox does not see (files of older versions say `udp`).
        host: String,
        /// The port; 0 when none applies.
        port: u16,
        /// The command that asked, or `unknown`.
        command: String,
        /// Why, in words; absent when the sandbox did not say.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        reason: Option<String>,
        /// Who asked: `agent` (its commands, `web_fetch`, its MCP servers), `check` or `setup`
        /// (absent in files of older versions).
        #[serde(default, skip_serializing_if = "Option::is_none")]
        phase: Option<String>,
        /// A name lookup (DNS) refused, not a connection to a host: nothing to add to an
        /// allowlist, the command wanted the network (absent when false).
        #[serde(default, skip_serializing_if = "std::ops::Not::not")]
        lookup: bool,
    },
    /// A limit of the task is close (the last 2 calls of `max_iterations`, the last 10% of
    /// `timeout` — at least a minute — or of `max_tokens`/`max_cost_usd`), and the agent was told
    /// so in the request about to be sent; once per limit and attempt.
    #[serde(rename = "limit.warning")]
    LimitWarning {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// `max_iterations`, `timeout`, `max_tokens` or `max_cost_usd`.
        limit: Limit,
        /// What is left: calls (this request included), seconds, tokens or USD.
        // Finite: JSON has no NaN or infinity.
        #[cfg_attr(test, proptest(strategy = "crate::strategies::finite()"))]
        #[serde(serialize_with = "whole_or_fraction")]
        remaining: f64,
        /// The limit in the same unit.
        // Finite: JSON has no NaN or infinity.
        #[cfg_attr(test, proptest(strategy = "crate::strategies::finite()"))]
        #[serde(serialize_with = "whole_or_fraction")]
        allowed: f64,
        /// What the agent was told.
        message: String,
    },
    /// A task ended; exactly one per task.
    #[serde(rename = "task.finished")]
    TaskFinished {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// Its fields (boxed: it is much the largest event).
        #[serde(flatten)]
        outcome: Box<WireOutcome>,
    },
    /// The run ended.
    #[serde(rename = "run.finished")]
    RunFinished {
        /// Common fields.
        #[serde(flatten)]
        header: Header,
        /// Tasks per status; every status is present.
        counts: StatusCounts,
        /// Summed token usage.
        usage: Usage,
        /// Summed cost; `null` when any task's price was unknown.
        // Finite: JSON has no NaN or infinity.
        #[cfg_attr(test, proptest(strategy = "crate::strategies::finite_or_none()"))]
        total_cost_usd: Option<f64>,
        /// Wall time of the run.
        duration_ms: u64,
        /// The process exit code.
        exit_code: i32,
    },
}

/// The fields of `task.finished`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct WireOutcome {
    /// How the task ended.
    pub status: Status,
    /// `status != "passed"`.
    pub is_error: bool,
    /// LLM calls that returned a response.
    pub num_turns: u32,
    /// Wall time of all attempts.
    pub duration_ms: u64,
    /// Summed token usage of every call.
    pub usage: Usage,
    /// Cost in USD; `null` when the model's price is unknown. Written as [`exact_cost`] keeps
    /// it (a record in memory may hold the unrounded sum).
    // What `exact_cost` keeps (the line is written so), and finite: JSON has no NaN or infinity.
    #[cfg_attr(test, proptest(strategy = "crate::strategies::cost()"))]
    #[serde(serialize_with = "exact_cost_or_null")]
    pub total_cost_usd: Option<f64>,
    /// The agent's final message.
    pub result: Option<String>,
    /// Workspace-relative paths the task changed.
    pub files_changed: Vec<String>,
    /// `diffs/<id>.patch` relative to the output folder, when the task changed anything.
    pub diff_path: Option<String>,
    /// The check command's record.
    pub check: Option<CheckRecord>,
    /// Why the task did not pass.
    pub error: Option<TaskError>,
    /// Attempts made.
    pub attempts: u32,
    /// Passed only after a failed attempt; for a repeated task (`repeat`), its verdict is
    /// `flaky` (some attempts passed, some did not).
    pub flaky: bool,
    /// The manifest the task came from, as given on the command line (`--task` for ad-hoc
    /// tasks); one JUnit testsuite per manifest.
    pub manifest: String,
    /// The manifest's stable name: the name of the git repository holding it (its `origin`'s,
    /// else its folder's) and its path there, `itoa/ci/nightly.toml` — the same from any folder
    /// and in any clone (the JUnit classname, `itoa.ci.nightly`); absent for ad-hoc tasks.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub manifest_name: Option<String>,
    /// The task's `tags`, as the manifest gives them (absent when it has none).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub tags: Vec<String>,
    /// The 1-based line where the task begins in its manifest; absent when the format gives
    /// none (JSON) or for an ad-hoc `--task`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub line: Option<usize>,
    /// The task's 0-based position in the run (manifest order, then task order), the order of
    /// every report.
    pub index: usize,
    /// Provider name.
    pub provider: String,
    /// Model name.
    pub model: String,
    /// The agent that did the work, when it was not dracode's own (`agent`): its name and
    /// version. Absent for dracode's own agent.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agent: Option<AgentOrigin>,
    /// The attempts before the last, in order; empty when the first attempt was final.
    pub prior_attempts: Vec<WireAttempt>,
    /// The branch holding the task's changes as a commit (with `commit = true`), else `null`.
    #[serde(default)]
    pub branch: Option<String>,
    /// The task's final answer as JSON, valid against its `output_schema`/`output_schema_file`
    /// (or the findings schema of `output = "findings"`); also `outputs/<id>.json`. `null` when
    /// the task has no schema or gave no valid answer (or when its answer was JSON `null`, which
    /// its schema allowed).
    // serde_json::Value has no Arbitrary: small JSON values (`roundtrip_tests::json`).
    #[cfg_attr(test, proptest(strategy = "crate::strategies::json_or_none()"))]
    #[serde(default)]
    pub structured_output: Option<serde_json::Value>,
    /// Times the last attempt's conversation was shrunk or compacted (`context.compacted`
    /// events); 0 in files of older versions.
    #[serde(default)]
    pub compactions: u32,
    /// How many tool calls the task's policy denied (last attempt); 0 in files of older
    /// versions.
    #[serde(default)]
    pub denied_calls: u32,
    /// Those calls, in order: `call_id`, `tool`, and the `message` the model got (what was
    /// refused, and the policy rule that refused it).
    #[serde(default)]
    pub denied: Vec<DeniedCall>,
    /// Protected paths (`protect`) the task changed; they were put back before the check and
    /// are not in its patch. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected: Vec<String>,
    /// Protected paths (`protect`) a tool of the last attempt was refused to change
    /// (`PROTECTED_PATH`), workspace-relative, sorted, each once. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub protected_refused: Vec<String>,
    /// Gitignored paths the task made that the check's world got too because `keep_ignored`
    /// names them (nothing else outside the patch reaches a check), sorted; a new folder
    /// kept whole is `dir/`; at most 100, then `... and N more`. Absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub kept_ignored: Vec<String>,
    /// How many connections of the task's commands were refused (`network.denied` events;
    /// last attempt); 0 in files of older versions.
    #[serde(default)]
    pub network_denied: u64,
    /// The first distinct `host:port`s refused (at most 10); absent when none.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub network_denied_hosts: Vec<String>,
    /// Present on a task carried over unchanged from an earlier run (`--rerun-failed` into the
    /// same `--out` runs only the tasks that did not pass; the others keep their result, their
    /// attempt and their timestamps from that run): that run's `run_id`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub carried_from: Option<String>,
    /// `true` when the result was reused from the cache (`--cache`): nothing ran, so usage and
    /// cost are zero; absent otherwise.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub cached: bool,
    /// With `cached`: the run whose pass is reused, the cache key, and that run's own figures for
    /// the task (`num_turns`, `usage`, `total_cost_usd`, `duration_ms`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_from: Option<CacheHit>,
    /// Only in the results of `dracode regrade`: the attempt whose recorded patch was checked
    /// again (`run_id`, `attempt`, and the `status` that run gave it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub regraded_from: Option<RegradedFrom>,
    /// Times the agent repaired its work after a failed check (`check_repairs`; last attempt);
    /// absent when none.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub repairs: u32,
    /// Every run of the check in the last attempt of a task with `check_repairs`, in order:
    /// the first after the agent finished, then one after each repair (`check` is the last).
    /// Absent for a task without `check_repairs`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub check_rounds: Vec<WireCheckRound>,
    /// A repeated task's (`repeat`) share of attempts that passed, 0 to 1; absent without
    /// `repeat`.
    // Finite: JSON has no NaN or infinity.
    #[cfg_attr(test, proptest(strategy = "crate::strategies::finite_or_none()"))]
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pass_rate: Option<f64>,
    /// A repeated task's verdict: `stable_pass` (every attempt passed), `stable_fail` (none) or
    /// `flaky`; absent without `repeat`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub verdict: Option<RepeatVerdict>,
    /// A repeated task's attempts, in order, each with its own patch and transcript file;
    /// absent without `repeat`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repeats: Vec<WireRepeat>,
}

impl WireOutcome {
    /// An outcome with nothing recorded yet: no turns, no usage, no changes, no error.
    pub fn empty(status: Status, manifest: String, index: usize, provider: &str, model: &str) -> Self {
        WireOutcome {
            status,
            is_error: !status.is_pass(),
            num_turns: 0,
            duration_ms: 0,
            usage: Usage::default(),
            total_cost_usd: None,
            result: None,
            files_changed: Vec::new(),
            diff_path: None,
            check: None,
            error: None,
            attempts: 1,
            flaky: false,
            manifest,
            manifest_name: None,
            tags: Vec::new(),
            line: None,
            index,
            provider: provider.to_string(),
            model: model.to_string(),
            agent: None,
            prior_attempts: Vec::new(),
            branch: None,
            structured_output: None,
            compactions: 0,
            denied_calls: 0,
            denied: Vec::new(),
            protected: Vec::new(),
            protected_refused: Vec::new(),
            kept_ignored: Vec::new(),
            network_denied: 0,
            network_denied_hosts: Vec::new(),
            carried_from: None,
            cached: false,
            cached_from: None,
            regraded_from: None,
            repairs: 0,
            check_rounds: Vec::new(),
            pass_rate: None,
            verdict: None,
            repeats: Vec::new(),
        }
    }
}

/// One run of a task's check (`check_rounds`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct WireCheckRound {
    /// Its exit code; `null` when it was killed or could not start.
    pub exit_code: Option<i32>,
    /// Its wall time.
    pub duration_ms: u64,
    /// The last part of its output: what the agent was shown.
    pub output_tail: String,
    /// When it began, in milliseconds after the attempt's `task.started` (absent in files of
    /// older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
}

/// One independent attempt of a repeated task (`repeats`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct WireRepeat {
    /// 1-based.
    pub repeat: u32,
    /// The `attempt` of its events (its last attempt, when it was retried).
    pub attempt: u32,
    /// How it ended.
    pub status: Status,
    /// Why.
    pub error: Option<TaskError>,
    /// Its wall time.
    pub duration_ms: u64,
    /// Its repairs after a failed check.
    #[serde(default)]
    pub repairs: u32,
    /// Its check's exit code (`null` when the check was killed or could not start); absent when
    /// its check did not run.
    #[serde(default, deserialize_with = "present", skip_serializing_if = "Option::is_none")]
    pub check_exit_code: Option<Option<i32>>,
    /// True for the one attempt the task's own fields describe (status, check, result, its
    /// `diff_path`): the last that passed when the task passed, else the last that did not.
    #[serde(default)]
    pub reported: bool,
    /// The files it changed.
    pub files_changed: Vec<String>,
    /// `diffs/<id>@<repeat>.patch`, when it changed anything.
    pub diff_path: Option<String>,
    /// `transcripts/<id>@<repeat>.json`, when it had a conversation.
    pub transcript_path: Option<String>,
}

/// A field that may be absent or `null`, read so that the two stay apart: present (`null`
/// included) is `Some` (absent is the field's default, `None`).
pub(crate) fn present<'de, D: serde::Deserializer<'de>, T: Deserialize<'de>>(deserializer: D) -> Result<Option<Option<T>>, D::Error> {
    Option::<T>::deserialize(deserializer).map(Some)
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// An earlier attempt of a task that was tried again.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct WireAttempt {
    /// How the attempt ended.
    pub status: Status,
    /// Why.
    pub error: Option<TaskError>,
    /// Its wall time.
    pub duration_ms: u64,
}

/// One output folder a merged file was made from.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct MergedFrom {
    /// The folder, as given to `dracode merge`.
    pub dir: String,
    /// Its own `run_id`.
    pub run_id: String,
    /// Its `shard` (`K/N` or `slice:K/N`), when it was sharded.
    pub shard: Option<String>,
    /// Its `task.finished` lines.
    pub task_count: usize,
}

/// Tasks per status, every status present (0 included) so readers need no defaults.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct StatusCounts {
    /// Tasks `passed`.
    pub passed: usize,
    /// Tasks `failed`.
    pub failed: usize,
    /// Tasks `error`.
    pub error: usize,
    /// Tasks `not_configured`.
    pub not_configured: usize,
    /// Tasks `max_iterations`.
    pub max_iterations: usize,
    /// Tasks `timeout`.
    pub timeout: usize,
    /// Tasks `stalled`.
    pub stalled: usize,
    /// Tasks `budget_exceeded`.
    pub budget_exceeded: usize,
    /// Tasks `cancelled`.
    pub cancelled: usize,
    /// Tasks `skipped`.
    pub skipped: usize,
}

impl StatusCounts {
    /// The counts of a run's tasks per status, statuses it lacks counted as 0.
    pub fn from_counts<'a>(per_status: impl IntoIterator<Item = (&'a Status, &'a usize)>) -> Self {
        let mut counts = StatusCounts::default();
        for (&status, &n) in per_status {
            *counts.slot(status) += n;
        }
        counts
    }

    /// The tasks counted under `status`.
    pub fn get(&self, status: Status) -> usize {
        match status {
            Status::Passed => self.passed,
            Status::Failed => self.failed,
            Status::Error => self.error,
            Status::NotConfigured => self.not_configured,
            Status::MaxIterations => self.max_iterations,
            Status::Timeout => self.timeout,
            Status::Stalled => self.stalled,
            Status::BudgetExceeded => self.budget_exceeded,
            Status::Cancelled => self.cancelled,
            Status::Skipped => self.skipped,
        }
    }

    /// Every status with its count, in [`Status::ALL`]'s order (0 included).
    pub fn iter(&self) -> impl Iterator<Item = (Status, usize)> + '_ {
        Status::ALL.iter().map(|&status| (status, self.get(status)))
    }

    /// The tasks counted, all statuses together.
    pub fn total(&self) -> usize {
        self.iter().map(|(_, n)| n).sum()
    }

    fn slot(&mut self, status: Status) -> &mut usize {
        match status {
            Status::Passed => &mut self.passed,
            Status::Failed => &mut self.failed,
            Status::Error => &mut self.error,
            Status::NotConfigured => &mut self.not_configured,
            Status::MaxIterations => &mut self.max_iterations,
            Status::Timeout => &mut self.timeout,
            Status::Stalled => &mut self.stalled,
            Status::BudgetExceeded => &mut self.budget_exceeded,
            Status::Cancelled => &mut self.cancelled,
            Status::Skipped => &mut self.skipped,
        }
    }
}

/// The header of a [`WireEvent`] (`$event`: the event, or a reference to it), whichever its type.
macro_rules! header_of {
    ($event:expr) => {
        match $event {
            WireEvent::RunStarted { header, .. }
            | WireEvent::SetupStarted { header, .. }
            | WireEvent::SetupFinished { header, .. }
            | WireEvent::TaskStarted { header, .. }
            | WireEvent::TurnCompleted { header, .. }
            | WireEvent::ToolStarted { header, .. }
            | WireEvent::ToolCompleted { header, .. }
            | WireEvent::Retry { header, .. }
            | WireEvent::AgentMessage { header, .. }
            | WireEvent::ContextCompacted { header, .. }
            | WireEvent::NetworkDenied { header, .. }
            | WireEvent::LimitWarning { header, .. }
            | WireEvent::TaskFinished { header, .. }
            | WireEvent::RunFinished { header, .. } => header,
        }
    };
}

impl WireEvent {
    /// The common fields of this line, to fill in (the bus stamps them once per event).
    pub fn header_mut(&mut self) -> &mut Header {
        header_of!(self)
    }

    /// The common fields of this line.
    pub fn header(&self) -> &Header {
        header_of!(self)
    }
}

/// A cost as results.jsonl keeps it: full precision without the noise of summed floats
/// (`0.0007540499999999999` is `0.00075405`): 10 significant digits, far below a cent.
pub fn exact_cost(usd: f64) -> f64 {
    format!("{usd:.9e}").parse().unwrap_or(usd)
}

/// A cost written as [`exact_cost`] keeps it; `null` when unknown.
fn exact_cost_or_null<S: serde::Serializer>(usd: &Option<f64>, serializer: S) -> Result<S::Ok, S::Error> {
    usd.map(exact_cost).serialize(serializer)
}

/// The JSON Schema of one line, for `dracode schema events`.
pub fn events_schema() -> serde_json::Value {
    schemars::schema_for!(WireEvent).to_value()
}

/// A number written as an integer when it is whole (`2`, not `2.0`).
fn whole_or_fraction<S: serde::Serializer>(value: &f64, serializer: S) -> Result<S::Ok, S::Error> {
    if value.fract() == 0.0 && value.abs() < 9.0e15 { serializer.serialize_i64(*value as i64) } else { serializer.serialize_f64(*value) }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{ErrorKind, FailureKind};

    /// A `task.finished` record with every field set (none at its default).
    fn every_field() -> WireOutcome {
        let error = |kind: FailureKind, message: &str| Some(TaskError { kind, message: message.into(), http_status: Some(502) });
        WireOutcome {
            status: Status::Failed,
            is_error: true,
            num_turns: 7,
            duration_ms: 12_345,
            usage: Usage { requests: 3, ..Usage::from_counts(1000, 234) },
            total_cost_usd: Some(0.0123),
            result: Some("done".into()),
            files_changed: vec!["src/lib.rs".into()],
            diff_path: Some("diffs/t.patch".into()),
            check: Some(CheckRecord {
                command: "cargo test".into(),
                exit_code: Some(101),
                output_tail: "FAILED".into(),
                before: Some(Some(101)),
                before_output_tail: Some("FAILED before".into()),
                started_ms: Some(900),
                duration_ms: Some(40),
            }),
            error: error(FailureKind::Check, "check failed"),
            attempts: 3,
            flaky: true,
            manifest: "ci/tasks.toml".into(),
            manifest_name: Some("repo/ci/tasks.toml".into()),
            tags: vec!["nightly".into()],
            line: Some(12),
            index: 4,
            provider: "openai".into(),
            model: "gpt-4o".into(),
            agent: Some(AgentOrigin { name: "codex".into(), version: Some("0.171.0".into()) }),
            prior_attempts: vec![WireAttempt { status: Status::Error, error: error(ErrorKind::Server.into(), "502"), duration_ms: 1500 }],
            branch: Some("dracode/t".into()),
            structured_output: Some(serde_json::json!({"risk": 2})),
            compactions: 1,
            denied_calls: 1,
            denied: vec![DeniedCall { call_id: "c1".into(), tool: "run_command".into(), message: "denied".into() }],
            protected: vec!["tests/t.py".into()],
            protected_refused: vec!["tests/golden.txt".into()],
            kept_ignored: vec!["target/".into()],
            network_denied: 2,
            network_denied_hosts: vec!["[::1]:53".into()],
            carried_from: Some("run-0".into()),
            cached: true,
            cached_from: Some(CacheHit {
                run_id: "run-c".into(),
                key: "abc".into(),
                num_turns: 2,
                usage: Usage::from_counts(10, 5),
                total_cost_usd: Some(0.5),
                duration_ms: 300,
            }),
            regraded_from: Some(RegradedFrom { run_id: "run-r".into(), attempt: 2, status: Status::Passed }),
            repairs: 1,
            check_rounds: vec![WireCheckRound { exit_code: None, duration_ms: 40, output_tail: "MISMATCH".into(), started_ms: Some(900) }],
            pass_rate: Some(0.5),
            verdict: Some(RepeatVerdict::Flaky),
            repeats: vec![WireRepeat {
                repeat: 1,
                attempt: 2,
                status: Status::Passed,
                error: error(FailureKind::Agent, "x"),
                duration_ms: 10,
                repairs: 1,
                check_exit_code: Some(None),
                reported: true,
                files_changed: vec!["a.txt".into()],
                diff_path: Some("diffs/t@1.patch".into()),
                transcript_path: Some("transcripts/t@1.json".into()),
            }],
        }
    }

    /// The same record with every field at its default (what a task that never started has).
    fn defaults() -> WireOutcome {
        serde_json::from_value(serde_json::json!({
            "status": "skipped", "is_error": true, "num_turns": 0, "duration_ms": 0,
            "usage": Usage::default(), "total_cost_usd": null, "result": null, "files_changed": [],
            "diff_path": null, "check": null, "error": null, "attempts": 0, "flaky": false,
            "manifest": "", "index": 0, "provider": "", "model": "", "prior_attempts": []
        }))
        .unwrap()
    }

    /// Every record survives the line it is written as: written, read back, equal (as nextest's
    /// `test_event_summary_roundtrips`).
    #[test]
    fn task_finished_records_round_trip() {
        for outcome in [every_field(), defaults()] {
            let header = Header {
                schema_version: SCHEMA_VERSION,
                seq: 3,
                ts: "2023-11-14T22:13:20.123Z".into(),
                run_id: "run-1".into(),
                task_id: Some("t".into()),
                attempt: Some(2),
                shard: Some("1/2".into()),
            };
            let line = WireEvent::TaskFinished { header, outcome: Box::new(outcome) };
            let text = serde_json::to_string(&line).unwrap();
            let back: WireEvent = serde_json::from_str(&text).unwrap();
            assert_eq!(back, line, "{text}");
        }
    }

    /// A cost in memory may be an unrounded sum; the line keeps [`exact_cost`]'s.
    #[test]
    fn a_cost_is_written_as_exact_cost_keeps_it() {
        let outcome = WireOutcome { total_cost_usd: Some(0.000_754_049_999_999_999_9), ..every_field() };
        let v = serde_json::to_value(&outcome).unwrap();
        assert_eq!(v["total_cost_usd"].to_string(), "0.00075405");
    }
}
