//! `SLOW` lines for CI logs: a task still running after [`SlowPolicy::first`] (60 s) gets a line
//! with its turns, tokens and cost so far, then another every [`SlowPolicy::every`] (5 min),
//! so a long agent task never looks hung (nextest prints the same):
//!
//! ```text
//!    SLOW  [3/6] docs-mul  running 1m00s  4 turns  12,345 tok  $0.0123 so far
//! ```
//!
//! Events arrive only when something happens, so a thread of its own looks at the clock. It
//! waits on a condition variable, not in a sleep: stopped at the end of a run, it ends at once
//! rather than after its tick (a CI run would pay up to a second at exit).

use super::{human_cost, human_duration, thousands};
use dracode_llm::Usage;
use dracode_llm::prices::PriceTable;
use std::collections::BTreeMap;
use std::io::Write;
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

/// The environment variable that sets [`SlowPolicy::first`] (a duration, `2s`); for tests.
pub const SLOW_AFTER_ENV: &str = "DRACODE_SLOW_AFTER";

/// A writer the progress lines and the `SLOW` lines share.
pub type SharedWriter = Arc<Mutex<Box<dyn Write + Send>>>;

/// When a running task gets a `SLOW` line.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct SlowPolicy {
    /// Running time of the first line.
    pub first: Duration,
    /// Time between the next lines.
    pub every: Duration,
}

impl Default for SlowPolicy {
    fn default() -> Self {
        SlowPolicy { first: Duration::from_secs(60), every: Duration::from_secs(300) }
    }
}

impl SlowPolicy {
    /// The default, or the first line after `DRACODE_SLOW_AFTER` and the next ones every five
    /// times that (as 60 s and 5 min).
    pub fn from_env(env: &BTreeMap<String, String>) -> SlowPolicy {
        match env.get(SLOW_AFTER_ENV).and_then(|v| dracode_input::duration::parse_positive(v).ok()) {
            Some(first) => SlowPolicy { first, every: first * 5 },
            None => SlowPolicy::default(),
        }
    }
}

/// A task being watched.
struct Running {
    label: String,
    model: String,
    since: Instant,
    next: Duration,
    turns: u32,
    usage: Usage,
}

/// What the watch thread and the reporter share.
struct State {
    running: BTreeMap<String, Running>,
    stopped: bool,
}

/// The state and the condition variable that wakes the watch thread when it is stopped.
type Shared = (Mutex<State>, Condvar);

/// Watches the running tasks and writes their `SLOW` lines.
pub struct SlowWatch {
    first: Duration,
    state: Arc<Shared>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl SlowWatch {
    /// Starts watching: lines go to `writer`, costs come from `prices`.
    pub fn start(policy: SlowPolicy, writer: SharedWriter, prices: PriceTable) -> SlowWatch {
        let state: Arc<Shared> = Arc::new((Mutex::new(State { running: BTreeMap::new(), stopped: false }), Condvar::new()));
        let shared = state.clone();
        let tick = (policy.first / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        let thread = std::thread::Builder::new()
            .name("dracode-slow".into())
            .spawn(move || {
                let (lock, wake) = &*shared;
                let mut state = lock.lock().unwrap_or_else(PoisonError::into_inner);
                loop {
                    state = wake.wait_timeout_while(state, tick, |s| !s.stopped).unwrap_or_else(PoisonError::into_inner).0;
                    if state.stopped {
                        return;
                    }
                    for task in state.running.values_mut().filter(|t| t.since.elapsed() >= t.next) {
                        task.next = task.since.elapsed() + policy.every;
                        let line = task.line(&prices);
                        let mut out = writer.lock().unwrap_or_else(PoisonError::into_inner);
                        let _ = writeln!(out, "{line}").and_then(|()| out.flush());
                    }
                }
            })
            .ok();
        SlowWatch { state, thread, first: policy.first }
    }

    fn with<T>(&self, f: impl FnOnce(&mut State) -> T) -> T {
        f(&mut self.state.0.lock().unwrap_or_else(PoisonError::into_inner))
    }

    /// Task `id` (shown as `label`, `[3/6] docs-mul`) started an attempt with `model`.
    pub fn started(&self, id: &str, label: String, model: &str) {
        let running =
            Running { label, model: model.to_string(), since: Instant::now(), next: self.first, turns: 0, usage: Usage::default() };
        self.with(|s| s.running.insert(id.to_string(), running));
    }

    /// Task `id` completed a turn that used `usage`.
    pub fn turn(&self, id: &str, usage: &Usage) {
        self.with(|s| {
            if let Some(task) = s.running.get_mut(id) {
                task.turns += 1;
                task.usage += *usage;
            }
        });
    }

    /// Task `id` finished.
    pub fn finished(&self, id: &str) {
        self.with(|s| s.running.remove(id));
    }
}

impl Running {
    fn line(&self, prices: &PriceTable) -> String {
        let mut text = format!(
            "{:>7}  {}  running {}  {} {}  {} tok",
            "SLOW",
            self.label,
            human_duration(self.since.elapsed()),
            self.turns,
            if self.turns == 1 { "turn" } else { "turns" },
            thousands(self.usage.total_tokens)
        );
        if let Some(cost) = prices.cost(&self.model, &self.usage) {
            text.push_str(&format!("  {}", human_cost(cost)));
        }
        text.push_str(" so far");
        text
    }
}

impl Drop for SlowWatch {
    fn drop(&mut self) {
        self.with(|s| s.stopped = true);
        self.state.1.notify_all();
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}
