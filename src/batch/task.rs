//! Running one task: workspace, agent, check, diff — and exactly one outcome, whatever happens.

use super::plan::PlannedTask;
use super::workspace::Workspace;
use crate::agent::{Agent, AgentEnd, AgentState, Budget, SYSTEM_PROMPT};
use crate::events::{Emitter, EventKind, Status, TaskError, TaskOutcome, Transcript};
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
}

/// How the agent phase ended, seen from outside the loop.
enum Phase {
    Agent(AgentEnd),
    TimedOut(Duration),
    Cancelled,
}

/// Runs `planned` to its end and reports it; never panics on bad input, always one outcome.
pub async fn run(planned: &PlannedTask, shared: &Shared, emitter: &Emitter) -> TaskOutcome {
    let started = Instant::now();
    let task = &planned.task;
    let emitter = emitter.task(&task.id, 1);
    let model = planned.provider.model.clone().unwrap_or_default();
    let mut outcome = TaskOutcome {
        task_id: task.id.clone(),
        manifest: task.manifest.clone(),
        index: task.index,
        status: Status::Error,
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
        provider: planned.provider.name.clone(),
        model: model.clone(),
        transcript: None,
    };

    let workspace = match Workspace::prepare(&planned.repo, planned.isolation, task.fields.base.as_deref().unwrap_or("HEAD"), task.fields.workdir.as_deref()) {
        Ok(ws) => ws,
        Err(e) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: format!("workspace: {e}"), http_status: None });
            return finish(outcome, started, &emitter);
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
            return finish(outcome, started, &emitter);
        }
    };
    let tool_ctx = match tool_context(planned, &workspace, shared, &emitter) {
        Ok(ctx) => ctx,
        Err(message) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message, http_status: None });
            return finish(outcome, started, &emitter);
        }
    };
    let registry = match Registry::with_names(&planned.tools) {
        Ok(r) => r,
        Err(name) => {
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: format!("unknown tool {name:?}"), http_status: None });
            return finish(outcome, started, &emitter);
        }
    };

    let check_before = match (&task.fields.check, task.fields.check_before) {
        (Some(cmd), Some(true)) => Some(super::check::run(cmd, &workspace.workdir, planned.check_timeout, shared).await),
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
        emitter: &emitter,
        redactor: &shared.redactor,
        system: system.clone(),
        max_iterations: planned.max_iterations,
        max_output_tokens: planned.provider.max_tokens,
        budget: Budget { max_tokens: task.fields.max_tokens, max_cost_usd: task.fields.max_cost_usd },
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
                let mut record = super::check::run(cmd, &workspace.workdir, planned.check_timeout, shared).await;
                record.before = check_before.map(|b| b.exit_code);
                if record.exit_code != Some(0) {
                    outcome.status = Status::Failed;
                    outcome.error = Some(TaskError {
                        kind: ErrorKind::Check,
                        message: format!("check `{cmd}` exited with {}", record.exit_code.map_or("no code (killed)".into(), |c| c.to_string())),
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
        Phase::Cancelled => {
            outcome.status = Status::Cancelled;
            outcome.error = Some(TaskError { kind: ErrorKind::Internal, message: "the run was interrupted".into(), http_status: None });
        }
    }

    match workspace.changes() {
        Ok(Some(changes)) => {
            outcome.files_changed = changes.files;
            outcome.diff = Some(shared.redactor.redact(&changes.patch).into_owned());
        }
        Ok(None) => {}
        Err(e) => tracing::warn!(task = %task.id, "cannot compute the diff: {e}"),
    }
    if outcome.status == Status::Passed && task.fields.require_change == Some(true) && outcome.files_changed.is_empty() {
        outcome.status = Status::Failed;
        outcome.error = Some(TaskError { kind: ErrorKind::Agent, message: "the agent changed no file (require_change = true)".into(), http_status: None });
    }
    outcome.cost_usd = shared.prices.cost(&model, &outcome.usage);
    outcome.transcript = Some(Arc::new(Transcript {
        provider: planned.provider.name.clone(),
        model,
        system,
        tools: planned.tools.clone(),
        messages: state.messages,
    }));
    finish(outcome, started, &emitter)
}

/// Stamps the duration and emits `task.finished`.
fn finish(mut outcome: TaskOutcome, started: Instant, emitter: &Emitter) -> TaskOutcome {
    outcome.duration = started.elapsed();
    emitter.emit(EventKind::TaskFinished(Box::new(outcome.clone())));
    outcome
}

/// The task's provider, wrapped in a recorder under `--record`.
fn build_provider(planned: &PlannedTask, shared: &Shared) -> Result<Arc<dyn Provider>, crate::llm::LlmError> {
    let binding = TaskBinding { task_id: planned.task.id.clone() };
    let provider = preset::build(&planned.provider, &binding, &shared.http)?;
    Ok(match &shared.record {
        Some(dir) => Arc::new(Recorder::new(provider, dir, &planned.task.id, &planned.provider.name)),
        None => provider,
    })
}

/// The tools' view of the task.
fn tool_context(planned: &PlannedTask, ws: &Workspace, shared: &Shared, emitter: &Emitter) -> Result<ToolContext, String> {
    let sandbox = crate::sandbox::Sandbox::new(&ws.workdir).map_err(|e| format!("workspace {}: {e}", ws.workdir.display()))?;
    Ok(ToolContext {
        sandbox,
        child_env: shared.child_env.clone(),
        tmp_dir: None,
        answers: Arc::new(planned.task.fields.answers.clone().unwrap_or_default()),
        max_command_timeout: MAX_COMMAND_TIMEOUT,
        output_limit: COMMAND_OUTPUT_LIMIT,
        emitter: emitter.clone(),
    })
}
