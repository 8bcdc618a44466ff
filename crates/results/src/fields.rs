//! The values a result carries besides its status: token usage, the check's record, denied
//! calls and connections, the cache and regrade origins, compactions, retries and limits.

use crate::Status;
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::ops::{Add, AddAssign};

/// The record of a task's `check` command.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CheckRecord {
    /// The command line.
    pub command: String,
    /// Its exit code; `None` when it was killed or could not start.
    pub exit_code: Option<i32>,
    /// The last part of its combined output.
    pub output_tail: String,
    /// The exit code of the same check run before the agent, when `check_before` is set.
    #[serde(default, deserialize_with = "crate::records::present", skip_serializing_if = "Option::is_none")]
    pub before: Option<Option<i32>>,
    /// The last part of the output of the run before the agent, when `check_before` is set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub before_output_tail: Option<String>,
    /// When this run began, in milliseconds after the attempt's `task.started` (absent in files
    /// of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started_ms: Option<u64>,
    /// Its wall time (absent in files of older versions).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub duration_ms: Option<u64>,
}

/// A tool call the task's policy refused.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct DeniedCall {
    /// The call's id (as in `tool.started`).
    pub call_id: String,
    /// The tool called.
    pub tool: String,
    /// What was refused and the rule that refused it, as the model was told.
    pub message: String,
}

/// The recorded pass a cached result reuses, with its figures (what it cost when it ran).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct CacheHit {
    /// The run that recorded the pass.
    pub run_id: String,
    /// The cache key (a hash of every input the task's result depends on).
    pub key: String,
    /// That run's LLM calls for the task.
    pub num_turns: u32,
    /// That run's token usage for the task.
    pub usage: Usage,
    /// That run's cost for the task, in USD (`null` when unknown).
    // Finite: JSON has no NaN or infinity.
    #[cfg_attr(test, proptest(strategy = "crate::strategies::finite_or_none()"))]
    pub total_cost_usd: Option<f64>,
    /// That run's wall time for the task.
    pub duration_ms: u64,
}

/// The attempt a regraded result grades again.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct RegradedFrom {
    /// The run that made the attempt.
    pub run_id: String,
    /// The attempt (1-based).
    pub attempt: u32,
    /// The status that run gave it.
    pub status: Status,
}

/// How a `context.compacted` event shrank the conversation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum CompactionMethod {
    /// Old tool outputs were cut to their head and tail.
    TrimToolOutputs,
    /// The model summarised the work so far; the conversation continues from the summary.
    Summary,
}

/// What a `retry` event retries.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum RetryScope {
    /// One HTTP request.
    Http,
    /// A whole task attempt.
    Task,
}

/// Token counts, normalised: `input_tokens` counts every prompt token, cached ones included
/// (the OpenAI convention); `total_tokens` is input plus output. Sums are exact: `+` adds
/// field by field, so a task's usage is the sum of its calls.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(default)]
pub struct Usage {
    /// Prompt tokens, including cache reads and cache writes.
    pub input_tokens: u64,
    /// Prompt tokens served from the provider's cache.
    pub cached_input_tokens: u64,
    /// Prompt tokens written to the provider's cache.
    pub cache_creation_input_tokens: u64,
    /// Completion tokens, reasoning included.
    pub output_tokens: u64,
    /// Completion tokens spent on hidden reasoning.
    pub reasoning_output_tokens: u64,
    /// `input_tokens + output_tokens`.
    pub total_tokens: u64,
    /// LLM calls that returned a response (HTTP retries of the same call are not counted twice).
    pub requests: u64,
}

impl Usage {
    /// The usage of one call from its input and output token counts.
    pub fn from_counts(input_tokens: u64, output_tokens: u64) -> Self {
        Usage { input_tokens, output_tokens, total_tokens: input_tokens + output_tokens, requests: 1, ..Usage::default() }
    }
}

impl Add for Usage {
    type Output = Usage;
    fn add(self, o: Usage) -> Usage {
        Usage {
            input_tokens: self.input_tokens + o.input_tokens,
            cached_input_tokens: self.cached_input_tokens + o.cached_input_tokens,
            cache_creation_input_tokens: self.cache_creation_input_tokens + o.cache_creation_input_tokens,
            output_tokens: self.output_tokens + o.output_tokens,
            reasoning_output_tokens: self.reasoning_output_tokens + o.reasoning_output_tokens,
            total_tokens: self.total_tokens + o.total_tokens,
            requests: self.requests + o.requests,
        }
    }
}

impl AddAssign for Usage {
    fn add_assign(&mut self, o: Usage) {
        *self = *self + o;
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Usage>>(iter: I) -> Usage {
        iter.fold(Usage::default(), Add::add)
    }
}

/// A limit of a task the agent can be warned about.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum Limit {
    /// LLM calls (`max_iterations`); counted in calls.
    MaxIterations,
    /// Wall-clock time (`timeout`); counted in seconds.
    Timeout,
    /// The task's token budget (`max_tokens`); counted in tokens.
    MaxTokens,
    /// The task's cost budget (`max_cost_usd`); counted in USD.
    MaxCostUsd,
}

impl Limit {
    /// The manifest field that sets it.
    pub fn field(self) -> &'static str {
        match self {
            Limit::MaxIterations => "max_iterations",
            Limit::Timeout => "timeout",
            Limit::MaxTokens => "max_tokens",
            Limit::MaxCostUsd => "max_cost_usd",
        }
    }
}

/// What a task's refusals add up to.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Denials {
    /// Connections refused.
    pub count: u64,
    /// The first distinct `host:port`s refused (at most [`MAX_HOSTS`]).
    pub hosts: Vec<String>,
}

/// The GitHub issue a task was made from (a manifest's `[issues]`): where `dracode publish`
/// reports the task's verdict, and which issue its pull request closes.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct IssueOrigin {
    /// The repository, `OWNER/NAME`.
    pub repository: String,
    /// The issue's number.
    pub number: u64,
    /// The issue's page.
    pub url: String,
    /// The login of who put the manifest's label on it (someone with write access).
    pub labelled_by: String,
}

/// The agent that did a task's work when it was not dracode's own (`agent = "codex"`, …).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
pub struct AgentOrigin {
    /// The `agent` field's name: `claude-code`, `codex`, `gemini-cli`, `opencode`, or an
    /// `[agents.NAME]` table's name.
    pub name: String,
    /// Its version as its requests told it (`User-Agent`), when they did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
}
