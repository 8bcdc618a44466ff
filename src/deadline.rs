//! What the agent knows of its limits: a paragraph of the system prompt states them (turns,
//! time, tokens, cost), and when one is close the agent is told, once per limit, what is left
//! and asked to leave the workspace in a good state and summarise (a `limit.warning` event
//! records it).
//!
//! Thresholds: the last [`TURNS_LEFT_WARNING`] calls (one to finish or undo a half-done edit,
//! one to summarise); the last [`SHARE_LEFT_WARNING`] of the time (at least
//! [`MIN_TIME_LEFT_WARNING`], at most half the timeout: one slow model turn can take a minute);
//! [`SHARE_LEFT_WARNING`] of a token or cost budget left.

use crate::budget::Budget;
pub use dracode_results::Limit;
use std::time::Duration;

/// A warning comes with the request that has this many calls left, itself included.
pub const TURNS_LEFT_WARNING: u32 = 2;
/// A warning comes when this share of the time, tokens or cost is left.
pub const SHARE_LEFT_WARNING: f64 = 0.10;
/// A time warning comes at least this long before the timeout (unless that is over half of it).
pub const MIN_TIME_LEFT_WARNING: Duration = Duration::from_secs(60);

/// The limits of a task's agent.
#[derive(Debug, Clone, Copy)]
pub struct Limits {
    /// LLM calls allowed.
    pub max_iterations: u32,
    /// Wall-clock time allowed.
    pub timeout: Option<Duration>,
    /// Tokens and cost allowed.
    pub budget: Budget,
}

/// What the agent has used so far, the request about to be sent included.
#[derive(Debug, Clone, Copy)]
pub struct Spent {
    /// Calls counted, the one about to be made included.
    pub calls: u32,
    /// Time since the agent started.
    pub elapsed: Duration,
    /// Tokens used.
    pub tokens: u64,
    /// USD spent, when the model has a price.
    pub cost_usd: Option<f64>,
}

/// One limit that is close.
#[derive(Debug, Clone, PartialEq)]
pub struct Warning {
    /// Which.
    pub limit: Limit,
    /// What is left, in the limit's unit (calls, seconds, tokens, USD).
    pub remaining: f64,
    /// The limit, in the same unit.
    pub allowed: f64,
}

impl Warning {
    /// What is left, in words.
    fn describe(&self) -> String {
        match self.limit {
            Limit::MaxIterations => {
                format!("{} model turns left, this one included (max_iterations = {})", self.remaining, self.allowed)
            }
            Limit::Timeout => format!(
                "about {} of time left (timeout = {})",
                humantime::format_duration(Duration::from_secs(self.remaining as u64)),
                humantime::format_duration(Duration::from_secs(self.allowed as u64))
            ),
            Limit::MaxTokens => format!("{} tokens left (max_tokens = {})", self.remaining, self.allowed),
            Limit::MaxCostUsd => format!("${:.4} left (max_cost_usd = {})", self.remaining, self.allowed),
        }
    }
}

/// The limits already warned about.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Warned(std::collections::BTreeSet<Limit>);

/// The paragraph of the system prompt that states `limits`.
pub fn system_paragraph(limits: &Limits) -> String {
    let mut parts = vec![format!("at most {} model turns (each reply of yours is one)", limits.max_iterations)];
    if let Some(timeout) = limits.timeout {
        parts.push(format!("{} of wall-clock time", humantime::format_duration(timeout)));
    }
    if let Some(tokens) = limits.budget.max_tokens {
        parts.push(format!("{tokens} tokens"));
    }
    if let Some(usd) = limits.budget.max_cost_usd {
        parts.push(format!("${usd} of model cost"));
    }
    format!(
        "Limits of this task: {}. When a limit is reached the task ends where it is, and your changes so far are \
         kept and checked. When one is close you will be told what is left: then start nothing new, leave the \
         workspace in a good state and reply with your summary.",
        parts.join(", ")
    )
}

/// The limits close at `spent` that were not warned about yet (now marked in `warned`).
pub fn close_limits(limits: &Limits, spent: &Spent, warned: &mut Warned) -> Vec<Warning> {
    let mut close = Vec::new();
    let calls_left = (limits.max_iterations + 1).saturating_sub(spent.calls);
    // The first request: the system prompt has just said it.
    if spent.calls > 1 && calls_left <= TURNS_LEFT_WARNING {
        close.push(Warning { limit: Limit::MaxIterations, remaining: f64::from(calls_left), allowed: f64::from(limits.max_iterations) });
    }
    if let Some(timeout) = limits.timeout {
        let left = timeout.saturating_sub(spent.elapsed);
        let threshold = timeout.mul_f64(SHARE_LEFT_WARNING).max(MIN_TIME_LEFT_WARNING).min(timeout / 2);
        if left <= threshold && !left.is_zero() {
            close.push(Warning { limit: Limit::Timeout, remaining: left.as_secs() as f64, allowed: timeout.as_secs() as f64 });
        }
    }
    if let Some(max) = limits.budget.max_tokens {
        let left = max.saturating_sub(spent.tokens);
        if (left as f64) <= max as f64 * SHARE_LEFT_WARNING && spent.tokens > 0 {
            close.push(Warning { limit: Limit::MaxTokens, remaining: left as f64, allowed: max as f64 });
        }
    }
    if let (Some(max), Some(cost)) = (limits.budget.max_cost_usd, spent.cost_usd) {
        let left = (max - cost).max(0.0);
        if left <= max * SHARE_LEFT_WARNING && cost > 0.0 {
            close.push(Warning { limit: Limit::MaxCostUsd, remaining: left, allowed: max });
        }
    }
    close.retain(|w| warned.0.insert(w.limit));
    close
}

/// What the agent is told about `warnings` (in the next request it receives).
pub fn message(warnings: &[Warning]) -> String {
    let what: Vec<String> = warnings.iter().map(Warning::describe).collect();
    format!(
        "[dracode] A limit of this task is close: {}. Start nothing new: leave the workspace in a good state \
         (finish or undo any half-done edit), then reply with a short summary of what you changed and what is \
         left, without calling a tool.",
        what.join("; ")
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    fn limits() -> Limits {
        Limits {
            max_iterations: 5,
            timeout: Some(Duration::from_secs(1800)),
            budget: Budget { max_tokens: Some(1000), max_cost_usd: Some(1.0) },
        }
    }

    fn spent(calls: u32) -> Spent {
        Spent { calls, elapsed: Duration::from_secs(10), tokens: 100, cost_usd: Some(0.1) }
    }

    #[test]
    fn the_turn_warning_comes_once_with_the_request_that_has_two_calls_left() {
        let mut warned = Warned::default();
        for calls in 1..=3 {
            assert_eq!(close_limits(&limits(), &spent(calls), &mut warned), [], "call {calls}");
        }
        let close = close_limits(&limits(), &spent(4), &mut warned);
        assert_eq!(close, [Warning { limit: Limit::MaxIterations, remaining: 2.0, allowed: 5.0 }]);
        assert!(message(&close).contains("2 model turns left, this one included (max_iterations = 5)"), "{}", message(&close));
        assert_eq!(close_limits(&limits(), &spent(5), &mut warned), [], "once");
    }

    #[test]
    fn time_tokens_and_cost_warn_at_a_tenth_left() {
        let mut warned = Warned::default();
        let late = Spent { calls: 2, elapsed: Duration::from_secs(1800 - 170), tokens: 950, cost_usd: Some(0.95) };
        let limits: Vec<Limit> = close_limits(&limits(), &late, &mut warned).iter().map(|w| w.limit).collect();
        assert_eq!(limits, [Limit::Timeout, Limit::MaxTokens, Limit::MaxCostUsd]);
        // A short timeout warns a minute before, but never in its first half.
        let short = Limits { timeout: Some(Duration::from_secs(90)), ..self::limits() };
        let at = |secs| Spent { elapsed: Duration::from_secs(secs), ..spent(2) };
        assert_eq!(close_limits(&short, &at(40), &mut Warned::default()), []);
        assert_eq!(close_limits(&short, &at(46), &mut Warned::default())[0].limit, Limit::Timeout);
    }

    #[test]
    fn the_system_prompt_names_every_limit_set() {
        let text = system_paragraph(&limits());
        assert!(text.contains("at most 5 model turns") && text.contains("30m of wall-clock time"), "{text}");
        assert!(text.contains("1000 tokens") && text.contains("$1 of model cost"), "{text}");
        let bare = system_paragraph(&Limits { timeout: None, budget: Budget::default(), ..limits() });
        assert!(!bare.contains("tokens,") && !bare.contains("cost"), "{bare}");
    }
}
