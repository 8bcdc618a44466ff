//! Token and cost budgets: a task's own ([`Budget`]) and the run's, shared by every task
//! ([`RunMeter`]).
//!
//! A cost cap must hold while tasks run concurrently, so a call is not merely checked after it
//! returns: before it is sent, its largest possible cost — the request's estimated input plus
//! its whole output allowance (`max_output_tokens`, else [`RESERVED_OUTPUT_TOKENS`]) at the
//! model's price — is reserved against the cap ([`RunMeter::reserve`]). A call that would pass
//! the cap is not sent; the task ends `budget_exceeded`. When the call returns its reservation is
//! replaced by what it really cost. So the run spends at most the cap plus the error of one
//! call's input estimate. Token caps are checked after each call.

use dracode_llm::Usage;
use std::sync::Mutex;

/// The output tokens a call is assumed to be able to produce when the task sets no
/// `max_output_tokens` (what a cost reservation counts).
pub const RESERVED_OUTPUT_TOKENS: u64 = 8_192;

/// How a task's loop may spend tokens and money.
#[derive(Debug, Clone, Copy, Default)]
pub struct Budget {
    /// Total tokens the task may use.
    pub max_tokens: Option<u64>,
    /// Total USD the task may spend (needs a price for the model).
    pub max_cost_usd: Option<f64>,
}

/// A call refused before it is sent: its largest possible cost would pass a cost cap.
#[derive(Debug, Clone, Copy, PartialEq, thiserror::Error)]
pub enum BudgetExceeded {
    /// The task's own `max_cost_usd`.
    #[error("the next call could cost up to ${worst:.4}, and the task has ${left:.4} of its max_cost_usd of ${limit} left")]
    Task {
        /// The call's largest possible cost, in USD.
        worst: f64,
        /// What the task may still spend, in USD.
        left: f64,
        /// The cap, in USD.
        limit: f64,
    },
    /// The run's `--max-cost-usd`, shared by every task.
    #[error("the next call could cost up to ${worst:.4}, and the run has ${left:.4} of --max-cost-usd {limit} left")]
    Run {
        /// The call's largest possible cost, in USD.
        worst: f64,
        /// What the run may still spend (less what calls in flight hold), in USD.
        left: f64,
        /// The cap, in USD.
        limit: f64,
    },
}

/// What a call's cost reservation depends on: the task's budget and output allowance, the
/// model's price, and the run's meter (if the run has one).
pub struct CallCost<'a> {
    /// The task's limits.
    pub budget: Budget,
    /// The task's `max_output_tokens`.
    pub max_output_tokens: Option<u32>,
    /// The price of a usage on the task's model (`None` when unpriced).
    pub cost: &'a (dyn Fn(&Usage) -> Option<f64> + Send + Sync),
    /// The run's shared spend and limits.
    pub run_meter: Option<&'a RunMeter>,
}

impl<'a> CallCost<'a> {
    /// Holds the next call's largest possible cost (`input_tokens` in, the whole output
    /// allowance out) against the task's and the run's cost caps, the task having `spent` so
    /// far; `Err` with the reason when it could pass one, and then the call is not sent.
    pub fn reserve(&self, spent: &Usage, input_tokens: u64) -> Result<Option<Reservation<'a>>, BudgetExceeded> {
        let output = self.max_output_tokens.map_or(RESERVED_OUTPUT_TOKENS, u64::from);
        let worst = (self.cost)(&Usage::from_counts(input_tokens, output));
        if let (Some(limit), Some(worst)) = (self.budget.max_cost_usd, worst) {
            let so_far = (self.cost)(spent).unwrap_or(0.0);
            if so_far + worst > limit {
                return Err(BudgetExceeded::Task { worst, left: (limit - so_far).max(0.0), limit });
            }
        }
        match self.run_meter {
            Some(meter) => meter.reserve(worst),
            None => Ok(None),
        }
    }
}

/// Spend in millionths of a dollar (exact sums, no float drift).
type Micros = u64;

fn micros(usd: f64) -> Micros {
    (usd * 1e6).round().max(0.0) as Micros
}

/// What the run has spent and what calls in flight may still spend.
#[derive(Debug, Default)]
struct Ledger {
    tokens: u64,
    spent: Micros,
    reserved: Micros,
}

/// The whole run's spend, shared by every task (`--max-tokens`, `--max-cost-usd`).
#[derive(Debug, Default)]
pub struct RunMeter {
    ledger: Mutex<Ledger>,
    /// Token limit of the run.
    pub max_tokens: Option<u64>,
    /// Cost limit of the run in USD.
    pub max_cost_usd: Option<f64>,
}

/// A call's cost held against the run's cap until the call returns (released when dropped).
#[derive(Debug)]
pub struct Reservation<'a> {
    meter: &'a RunMeter,
    amount: Micros,
}

impl Drop for Reservation<'_> {
    fn drop(&mut self) {
        let mut ledger = self.meter.ledger();
        ledger.reserved = ledger.reserved.saturating_sub(self.amount);
    }
}

impl RunMeter {
    /// A meter with these limits.
    pub fn new(max_tokens: Option<u64>, max_cost_usd: Option<f64>) -> Self {
        RunMeter { max_tokens, max_cost_usd, ..RunMeter::default() }
    }

    fn ledger(&self) -> std::sync::MutexGuard<'_, Ledger> {
        self.ledger.lock().unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Holds `worst_cost` (a call's largest possible cost) against the run's cost cap; `Err`
    /// with the reason when what is spent, what calls in flight hold and this call together
    /// would pass it. Without a cap, or without a price (`None`), nothing is held.
    pub fn reserve(&self, worst_cost: Option<f64>) -> Result<Option<Reservation<'_>>, BudgetExceeded> {
        let (Some(cap), Some(worst)) = (self.max_cost_usd, worst_cost) else { return Ok(None) };
        let amount = micros(worst);
        let mut ledger = self.ledger();
        let committed = ledger.spent + ledger.reserved;
        if committed + amount > micros(cap) {
            return Err(BudgetExceeded::Run { worst, left: micros(cap).saturating_sub(committed) as f64 / 1e6, limit: cap });
        }
        ledger.reserved += amount;
        Ok(Some(Reservation { meter: self, amount }))
    }

    /// Adds one call's spend.
    pub fn add(&self, usage: &Usage, cost: Option<f64>) {
        let mut ledger = self.ledger();
        ledger.tokens += usage.total_tokens;
        ledger.spent += cost.map_or(0, micros);
    }

    /// What the run has spent so far, in USD.
    pub fn spent_usd(&self) -> f64 {
        self.ledger().spent as f64 / 1e6
    }

    /// Why the run is over budget, if it is.
    pub fn exceeded(&self) -> Option<String> {
        let ledger = self.ledger();
        if let Some(limit) = self.max_tokens.filter(|l| ledger.tokens > *l) {
            return Some(format!("the run used {} tokens, over --max-tokens {limit}", ledger.tokens));
        }
        let cost = ledger.spent as f64 / 1e6;
        self.max_cost_usd.filter(|l| cost > *l).map(|limit| format!("the run spent ${cost:.4}, over --max-cost-usd {limit}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reservations_keep_concurrent_calls_under_the_cap() {
        let meter = RunMeter::new(None, Some(1.0));
        let first = meter.reserve(Some(0.4)).unwrap().expect("held");
        let second = meter.reserve(Some(0.4)).unwrap().expect("held");
        let refused = meter.reserve(Some(0.4)).unwrap_err().to_string();
        assert!(refused.contains("could cost up to $0.4000") && refused.contains("$0.2000"), "{refused}");
        meter.add(&Usage::from_counts(10, 10), Some(0.1));
        drop(first);
        assert!(meter.reserve(Some(0.4)).is_ok(), "a call that came back cheap frees its reservation");
        drop(second);
        assert!(meter.exceeded().is_none());
        assert!(RunMeter::new(None, None).reserve(Some(9.0)).unwrap().is_none(), "no cap, nothing held");
    }

    #[test]
    fn concurrent_tasks_never_overspend() {
        let meter = std::sync::Arc::new(RunMeter::new(None, Some(1.0)));
        let threads: Vec<_> = (0..8)
            .map(|_| {
                let meter = meter.clone();
                std::thread::spawn(move || {
                    while let Ok(held) = meter.reserve(Some(0.05)) {
                        std::thread::yield_now();
                        meter.add(&Usage::from_counts(1, 1), Some(0.05));
                        drop(held);
                    }
                })
            })
            .collect();
        threads.into_iter().for_each(|t| t.join().unwrap());
        assert!(meter.spent_usd() <= 1.0 + 1e-9, "spent {}", meter.spent_usd());
        assert!(meter.spent_usd() >= 0.95);
    }
}
