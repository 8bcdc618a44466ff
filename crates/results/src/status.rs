//! How a task ended: its [`Status`], and a repeated task's [`RepeatVerdict`].

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// How a task ended. Exactly one per task, always.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
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

/// Whether a repeated task (`repeat`) passes every attempt, none, or some.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[cfg_attr(test, derive(proptest_derive::Arbitrary))]
#[serde(rename_all = "snake_case")]
pub enum RepeatVerdict {
    /// Every attempt passed.
    StablePass,
    /// No attempt passed.
    StableFail,
    /// Some passed, some did not.
    Flaky,
}

impl RepeatVerdict {
    /// The verdict of `passed` passes out of `count` attempts.
    pub fn of(passed: u32, count: u32) -> Self {
        match passed {
            0 => RepeatVerdict::StableFail,
            p if p == count => RepeatVerdict::StablePass,
            _ => RepeatVerdict::Flaky,
        }
    }

    /// The snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            RepeatVerdict::StablePass => "stable_pass",
            RepeatVerdict::StableFail => "stable_fail",
            RepeatVerdict::Flaky => "flaky",
        }
    }
}
