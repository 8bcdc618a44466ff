//! Running one task: workspace, agent, check, diff — and exactly one outcome, whatever happens.

use super::plan::PlannedTask;
use super::workspace::{Workspace, WorkspaceError};
use crate::agent::{Agent, AgentEnd, AgentState, Budget, RunMeter, SYSTEM_PROMPT};
use crate::events::{Activity, AttemptRecord, Emitter, EventKind, RetryScope, Status, TaskError, TaskOutcome, Transcript};
use crate::llm::governor::{Gate, Governed, Limits};
use crate::llm::http::HttpClient;
use crate::llm::preset::{self, TaskBinding};
use crate::llm::prices::PriceTable;
use crate::llm::record::Recorder;
use crate::llm::{ErrorKind, Provider, Usage};
use crate::secrets::Redactor;
use crate::tools::{Registry, ToolContext};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Bytes of command output kept for the model (head and tail).
pub const COMMAND_OUTPUT_LIMIT: usize = 30 * 1024;
/// No single command may run longer than this, whatever the model asks.
pub const MAX_COMMAND_TIMEOUT: Duration = Duration::from_secs(30 * 60);

/// What every task of a run shares.
pub struct Shared {
    /// Prices for cost.
    pub prices: PriceTable,
    /// Masks secrets.
    pub redactor: Arc<Redactor>,
    /// The HTTP client.
    pub http: HttpClient,
    /// The environment for commands (secrets removed).
    pub child_env: Arc<BTreeMap<String, String>>,
    /// `--record DIR`.
    pub record: Option<PathBuf>,
    /// Becomes `true` when the run is interrupted.
    pub cancel: watch::Receiver<bool>,
    /// The run's token and cost budget.
    pub run_meter: RunMeter,
    /// The run's id (in branch names).
    pub run_id: String,
    /// One gate per provider name, shared by all tasks.
    pub gates: std::sync::Mutex<BTreeMap<String, Arc<Gate>>>,
}

impl Shared {
    /// The gate of provider `name`, made on first use.
    fn gate(&self, name: &str, limits: Limits) -> Arc<Gate> {
        let mut gates = self.gates.lock().unwrap_or_else(|p| p.into_inner());
        gates.entry(name.to_string()).or_insert_with(|| Gate::new(limits)).clone()
    }
}

/// How the agent phase ended, seen from outside the loop.
enum Phase {
    Agent(AgentEnd),
    TimedOut(Duration),
    Stalled(Duration),
    Cancelled,
}

/// Runs `planned` to its end, retrying as its `retries` and `retry_on` say, each attempt in a
/// fresh workspace, and reports it with exactly one `task.finished`.
pub async fn run(planned: &PlannedTask, shared: &Shared, emitter: &Emitter) -> TaskOutcome {
    let started = Instant::now();
    let task = &planned.task;
    let max_attempts = 1 + task.fields.retries.unwrap_or(0);
    let retry_on = task.fields.retry_on.clone().unwrap_or_else(|| DEFAULT_RETRY_ON.to_vec());
    let mut prior: Vec<TaskOutcome> = Vec::new();
    let mut attempt = 1;
    loop {
        let attempt_emitter = emitter.task(&task.id, attempt);
        let outcome = run_attempt(planned, shared, &attempt_emitter).await;
        let retryable = retry_on.contains(&outcome.status)
            && !outcome.error.as_ref().is_some_and(|e| NEVER_RETRY.contains(&e.kind))
            && !*shared.cancel.borrow();
        if attempt >= max_attempts || !retryable {
            return finish(combine(outcome, prior, attempt), started, &attempt_emitter);
        }
        let delay = TASK_RETRY.backoff(attempt, crate::llm::http::random_unit());
        attempt_emitter.emit(EventKind::Retry {
            scope: RetryScope::Task,
            reason: outcome.error.as_ref().map_or(outcome.status.as_str(), |e| e.kind.as_str()).to_string(),
            delay,
            next_attempt: attempt + 1,
        });
        prior.push(outcome);
        let mut cancel = shared.cancel.clone();
        tokio::select! {
            _ = tokio::time::sleep(delay) => {}
            _ = cancel.wait_for(|c| *c) => {}
        }
        attempt += 1;
    }
}

/// Statuses retried when a task sets `retries` but not `retry_on`.
pub const DEFAULT_RETRY_ON: [Status; 3] = [Status::Error, Status::Timeout, Status::Stalled];
/// Failures that another attempt cannot fix (and would only burn budget on).
const NEVER_RETRY: [ErrorKind; 3] = [ErrorKind::NotConfigured, ErrorKind::Quota, ErrorKind::Auth];
/// Backoff between task attempts: full jitter under a doubling ceiling from 2 s to 60 s.
const TASK_RETRY: crate::llm::http::RetryPolicy = crate::llm::http::RetryPolicy {
    max_retries: u32::MAX,
    base_delay: Duration::from_secs(2),
    max_delay: Duration::from_secs(60),
    max_total_wait: Duration::MAX,
};

/// The final outcome of a task: the last attempt, with usage and cost summed over every
/// attempt and the earlier attempts kept for JUnit's flaky/rerun records.
fn combine(mut last: TaskOutcome, prior: Vec<TaskOutcome>, attempts: u32) -> TaskOutcome {
    last.attempts = attempts;
    last.flaky = last.status.is_pass() && !prior.is_empty();
    for p in &prior {
        last.usage += p.usage;
        last.cost_usd = match (last.cost_usd, p.cost_usd) {
            (Some(a), Some(b)) => Some(a + b),
            (a, b) if p.usage.requests == 0 => a.or(b),
            _ => None,
        };
    }
    last.prior_attempts = prior.into_iter().map(|p| AttemptRecord { status: p.status, error: p.error, duration: p.duration }).collect();
    last
}

/// One attempt: workspace, agent, check, diff. Emits everything but `task.finished`.
async fn run_attempt(planned: &PlannedTask, shared: &Shared, emitter: &Emitter) -> TaskOutcome {
    let started = Instant::now();
    let task = &planned.task;
    let activity = Activity::new();
    let emitter = &emitter.with_activity(activity.clone());
    let model = planned.provider.model.clone().unwrap_or_default();
    let mut outcome = TaskOutcome::new(&task.id, &task.manifest, task.index, Status::Error, &planned.provider.name, &model);

    // git and file copying block: keep them off the async workers that serve other tasks' I/O.
    let prepared = {
        let (repo, isolation) = (planned.repo.clone(), planned.isolation);
        let base = task.fields.base.clone().unwrap_or_else(|| "HEAD".into());
        let workdir = task.fields.workdir.clone();
        tokio::task::spawn_blocking(move || Workspace::prepare(&repo, isolation, &base, workdir.as_deref())).await
    };
    let workspace = match prepared.unwrap_or_else(|e| Err(WorkspaceError::Panicked(e.to_string()))) {
        Ok(ws) => ws,
        Err(e) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: format!("workspace: {e}"), http_status: None });
            return stamp(outcome, started);
        }
    };
    emitter.emit(EventKind::TaskStarted {
        provider: planned.provider.name.clone(),
        model: model.clone(),
        isolation: planned.isolation.as_str().to_string(),
        workdir: workspace.workdir.clone(),
        base_commit: workspace.base_commit.clone(),
    });

    let provider = match build_provider(planned, shared) {
        Ok(p) => p,
        Err(e) => {
            outcome.status = if e.kind == ErrorKind::NotConfigured { Status::NotConfigured } else { Status::Error };
            outcome.error = Some(e.into());
            return stamp(outcome, started);
        }
    };
    let task_tmp = match TaskTemp::new(task.fields.isolate_home == Some(true)) {
        Ok(t) => t,
        Err(e) => {
            outcome.error =
                Some(TaskError { kind: ErrorKind::Internal, message: format!("cannot make the task's TMPDIR: {e}"), http_status: None });
            return stamp(outcome, started);
        }
    };
    let child_env = Arc::new(task_tmp.env(&shared.child_env));
    let tool_ctx = match tool_context(planned, &workspace, child_env.clone(), task_tmp.tmp(), emitter) {
        Ok(ctx) => ctx,
        Err(message) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message, http_status: None });
            return stamp(outcome, started);
        }
    };
    let registry = match Registry::with_names(&planned.tools) {
        Ok(r) => r,
        Err(name) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: format!("unknown tool {name:?}"), http_status: None });
            return stamp(outcome, started);
        }
    };

    let check_before = match (&task.fields.check, task.fields.check_before) {
        (Some(cmd), Some(true)) => {
            Some(super::check::run(cmd, &workspace.workdir, planned.check_timeout, &child_env, &shared.redactor).await)
        }
        _ => None,
    };

    let mut system = SYSTEM_PROMPT.to_string();
    if let Some(extra) = &task.fields.system_prompt {
        system.push_str("\n\n");
        system.push_str(extra);
    }
    let prices = &shared.prices;
    let cost = |u: &Usage| prices.cost(&model, u);
    let agent = Agent {
        provider: provider.as_ref(),
        registry: &registry,
        tool_ctx: &tool_ctx,
        emitter,
        redactor: &shared.redactor,
        system: system.clone(),
        max_iterations: planned.max_iterations,
        max_output_tokens: planned.provider.max_tokens,
        budget: Budget { max_tokens: task.fields.max_tokens, max_cost_usd: task.fields.max_cost_usd },
        run_meter: Some(&shared.run_meter),
        cost: &cost,
    };
    let mut state = AgentState::default();
    let phase = {
        let mut cancel = shared.cancel.clone();
        let run = agent.run(&task.prompt, &mut state);
        let limit = planned.timeout.unwrap_or(Duration::MAX);
        tokio::select! {
            end = tokio::time::timeout(limit, run) => match end {
                Ok(end) => Phase::Agent(end),
                Err(_) => Phase::TimedOut(limit),
            },
            idle = stalled(&activity, planned.idle_timeout) => Phase::Stalled(idle),
            _ = cancel.wait_for(|c| *c) => Phase::Cancelled,
        }
    };

    outcome.num_turns = state.turns;
    outcome.usage = state.usage;
    outcome.result = state.final_text.clone();
    match phase {
        Phase::Agent(AgentEnd::Finished) => {
            outcome.status = Status::Passed;
            if let Some(cmd) = &task.fields.check {
                let mut record = super::check::run(cmd, &workspace.workdir, planned.check_timeout, &child_env, &shared.redactor).await;
                record.before = check_before.map(|b| b.exit_code);
                if record.exit_code != Some(0) {
                    outcome.status = Status::Failed;
                    outcome.error = Some(TaskError {
                        kind: ErrorKind::Check,
                        message: format!(
                            "check `{cmd}` exited with {}",
                            record.exit_code.map_or("no code (killed)".into(), |c| c.to_string())
                        ),
                        http_status: None,
                    });
                }
                outcome.check = Some(record);
            }
        }
        Phase::Agent(AgentEnd::MaxIterations) => {
            outcome.status = Status::MaxIterations;
            outcome.error = Some(TaskError {
                kind: ErrorKind::Agent,
                message: format!("the agent did not finish within {} iterations", planned.max_iterations),
                http_status: None,
            });
        }
        Phase::Agent(AgentEnd::BudgetExceeded(message)) => {
            outcome.status = Status::BudgetExceeded;
            outcome.error = Some(TaskError { kind: ErrorKind::Agent, message, http_status: None });
        }
        Phase::Agent(AgentEnd::Failed(error)) => {
            outcome.status = match error.kind {
                ErrorKind::NotConfigured => Status::NotConfigured,
                kind if kind.is_infrastructure() => Status::Error,
                _ => Status::Failed,
            };
            outcome.error = Some(error);
        }
        Phase::TimedOut(limit) => {
            outcome.status = Status::Timeout;
            outcome.error = Some(TaskError {
                kind: ErrorKind::Agent,
                message: format!("the task ran longer than its timeout of {}", humantime::format_duration(limit)),
                http_status: None,
            });
        }
        Phase::Stalled(idle) => {
            outcome.status = Status::Stalled;
            outcome.error = Some(TaskError {
                kind: ErrorKind::Agent,
                message: format!("no event for {} (idle_timeout): a stuck stream or a hung command", humantime::format_duration(idle)),
                http_status: None,
            });
        }
        Phase::Cancelled => {
            outcome.status = Status::Cancelled;
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: "the run was interrupted".into(), http_status: None });
        }
    }

    let joined = tokio::task::spawn_blocking(move || {
        let changes = workspace.changes();
        (workspace, changes)
    })
    .await;
    let (workspace, changes) = match joined {
        Ok(pair) => pair,
        Err(e) => {
            outcome.status = Status::Error;
            outcome.error =
                Some(TaskError { kind: ErrorKind::Internal, message: format!("computing the diff panicked: {e}"), http_status: None });
            return stamp(outcome, started);
        }
    };
    match changes {
        Ok(Some(changes)) => {
            outcome.files_changed = changes.files;
            outcome.diff = Some(shared.redactor.redact(&changes.patch).into_owned());
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(task = %task.id, "cannot compute the diff: {e}"),
    }
    if outcome.status == Status::Passed && task.fields.require_change == Some(true) && outcome.files_changed.is_empty() {
        outcome.status = Status::Failed;
        outcome.error = Some(TaskError {
            kind: ErrorKind::Agent,
            message: "the agent changed no file (require_change = true)".into(),
            http_status: None,
        });
    }
    if outcome.status == Status::Passed && task.fields.commit == Some(true) && !outcome.files_changed.is_empty() {
        let branch = format!("dracode/{}/{}", shared.run_id, task.id);
        let title = task.prompt.lines().next().unwrap_or_default().chars().take(72).collect::<String>();
        let message = format!("{title}\n\ndracode task {:?}: {}", task.id, outcome.result.as_deref().unwrap_or_default());
        match workspace.commit(&branch, &message) {
            Ok(_) => outcome.branch = Some(branch),
            Err(e) => {
                outcome.status = Status::Error;
                outcome.error =
                    Some(TaskError { kind: ErrorKind::Internal, message: format!("cannot commit on {branch}: {e}"), http_status: None });
            }
        }
    }
    outcome.cost_usd = shared.prices.cost(&model, &outcome.usage);
    outcome.transcript = Some(Arc::new(Transcript {
        provider: planned.provider.name.clone(),
        model,
        system,
        tools: planned.tools.clone(),
        messages: state.messages,
    }));
    stamp(outcome, started)
}

/// Stamps an attempt's duration.
fn stamp(mut outcome: TaskOutcome, started: Instant) -> TaskOutcome {
    outcome.duration = started.elapsed();
    outcome
}

/// Stamps the whole task's duration and emits `task.finished`.
fn finish(mut outcome: TaskOutcome, started: Instant, emitter: &Emitter) -> TaskOutcome {
    outcome.duration = started.elapsed();
    emitter.emit(EventKind::TaskFinished(Box::new(outcome.clone())));
    outcome
}

/// The task's provider, wrapped in a recorder under `--record`.
fn build_provider(planned: &PlannedTask, shared: &Shared) -> Result<Arc<dyn Provider>, crate::llm::LlmError> {
    let binding = TaskBinding { task_id: planned.task.id.clone() };
    let provider = preset::build(&planned.provider, &binding, &shared.http, &crate::config::process_env())?;
    let gate = shared.gate(&planned.provider.name, planned.provider.limits);
    let provider: Arc<dyn Provider> = Arc::new(Governed::new(provider, gate));
    Ok(match &shared.record {
        Some(dir) => Arc::new(Recorder::new(provider, dir, &planned.task.id, &planned.provider.name)),
        None => provider,
    })
}

/// Resolves when the task has emitted no event for `limit` (never, without a limit).
async fn stalled(activity: &Activity, limit: Option<Duration>) -> Duration {
    let Some(limit) = limit else { return std::future::pending().await };
    loop {
        let idle = activity.idle();
        if idle >= limit {
            return idle;
        }
        tokio::time::sleep((limit - idle).min(Duration::from_secs(1))).await;
    }
}

/// A task's own TMPDIR (and HOME, with `isolate_home`), so parallel tasks never share tool
/// caches or config files by accident. Removed with the task.
struct TaskTemp {
    dir: tempfile::TempDir,
    isolate_home: bool,
}

impl TaskTemp {
    fn new(isolate_home: bool) -> std::io::Result<Self> {
        let dir = tempfile::Builder::new().prefix("dracode-task-").tempdir()?;
        std::fs::create_dir(dir.path().join("tmp"))?;
        if isolate_home {
            std::fs::create_dir(dir.path().join("home"))?;
        }
        Ok(TaskTemp { dir, isolate_home })
    }

    fn tmp(&self) -> PathBuf {
        self.dir.path().join("tmp")
    }

    /// `base` with TMPDIR (and HOME) pointing into this task's folder.
    fn env(&self, base: &BTreeMap<String, String>) -> BTreeMap<String, String> {
        let mut env = base.clone();
        env.insert("TMPDIR".into(), self.tmp().display().to_string());
        if self.isolate_home {
            env.insert("HOME".into(), self.dir.path().join("home").display().to_string());
        }
        env
    }
}

/// The tools' view of the task.
fn tool_context(
    planned: &PlannedTask,
    ws: &Workspace,
    child_env: Arc<BTreeMap<String, String>>,
    tmp_dir: PathBuf,
    emitter: &Emitter,
) -> Result<ToolContext, String> {
    let sandbox = crate::sandbox::Sandbox::new(&ws.workdir).map_err(|e| format!("workspace {}: {e}", ws.workdir.display()))?;
    Ok(ToolContext {
        sandbox,
        child_env,
        tmp_dir: Some(tmp_dir),
        answers: Arc::new(planned.task.fields.answers.clone().unwrap_or_default()),
        max_command_timeout: MAX_COMMAND_TIMEOUT,
        output_limit: COMMAND_OUTPUT_LIMIT,
        emitter: emitter.clone(),
    })
}
