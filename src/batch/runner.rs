//! Scheduling a run: tasks start in manifest order, up to `jobs` at a time; tasks that work
//! in place on the same folder never overlap; a panic in one task is reported as that task's
//! `error` and the rest go on; after an interrupt no task starts and running ones end as
//! `cancelled`. Every task gets exactly one `task.finished`.

use super::plan::Plan;
use super::spec::TaskSpec;
use super::task::{self, Shared};
use crate::events::{Emitter, EventKind, FailureKind, RunTotals, Status, TaskError, TaskOutcome};
use crate::manifest::Isolation;
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Instant;
use tokio::sync::{Mutex, Semaphore};

/// How to schedule.
#[derive(Debug, Clone)]
pub struct Schedule {
    /// Tasks at once (≥ 1).
    pub jobs: usize,
    /// Skip the remaining tasks after one does not pass.
    pub fail_fast: bool,
    /// `K/N` when sharded, for `run.started`.
    pub shard: Option<String>,
    /// The signal that interrupted the run (0: none yet), set by the signal watcher before it
    /// cancels: `run.finished.exit_code` is then 130 / 143, as the process's.
    pub interrupted_by: Arc<std::sync::atomic::AtomicI32>,
    /// The exit code of a run with no task (`--no-tasks`): 4, or 0 under `warn`/`pass`.
    pub if_no_tasks: i32,
    /// `--cache DIR` (or `[run] cache`): recorded passes reused, new ones recorded.
    pub cache: Option<Arc<super::cache::Cache>>,
}

/// Runs every task of `plan` and returns the totals (also emitted as `run.finished`).
pub async fn run(plan: Plan, shared: Arc<Shared>, emitter: Emitter, schedule: Schedule) -> RunTotals {
    let started = Instant::now();
    emitter.emit(EventKind::RunStarted {
        version: env!("CARGO_PKG_VERSION").to_string(),
        manifests: plan.manifests.iter().map(|p| p.display().to_string()).collect(),
        task_count: plan.tasks.len(),
        shard: schedule.shard.clone(),
        jobs: schedule.jobs,
        warnings: plan.warnings.clone(),
        config_files: Some(plan.config_files.iter().map(|f| f.display().to_string()).collect()),
    });
    let setup_failed = before_tasks(&plan.tasks, &shared, &emitter).await;
    let slots = Arc::new(Semaphore::new(schedule.jobs.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut folder_locks: HashMap<PathBuf, Arc<Mutex<()>>> = HashMap::new();
    let mut handles = Vec::with_capacity(plan.tasks.len());
    for spec in plan.tasks {
        let spec = Arc::new(spec);
        let folder_lock = (spec.workspace.isolation == Isolation::None).then(|| {
            let key = spec.workspace.repo.canonicalize().unwrap_or_else(|_| spec.workspace.repo.clone());
            folder_locks.entry(key).or_default().clone()
        });
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.ok(),
            _ = wait_cancelled(&shared) => None,
        };
        if let Some((status, kind, why)) = why_not_started(&shared, permit.is_some(), &stop, setup_failed.as_ref()) {
            handles.push(tokio::spawn(std::future::ready(unstarted(&spec, (status, kind), &why, &emitter))));
            continue;
        }
        let (shared, emitter, stop) = (shared.clone(), emitter.clone(), stop.clone());
        let fail_fast = schedule.fail_fast;
        let cache = schedule.cache.clone();
        handles.push(tokio::spawn(async move {
            let _permit = permit;
            let _folder = match &folder_lock {
                Some(lock) => Some(lock.lock().await),
                None => None,
            };
            let outcome = run_or_reuse(spec.clone(), shared, emitter.clone(), cache).await;
            if fail_fast && !outcome.status.is_pass() {
                stop.store(true, Ordering::SeqCst);
            }
            outcome
        }));
    }
    let mut outcomes = Vec::with_capacity(handles.len());
    for handle in handles {
        if let Ok(outcome) = handle.await {
            outcomes.push(outcome);
        }
    }
    if let Some(servers) = shared.run_mcp.get() {
        servers.stop().await;
    }
    let mut totals = RunTotals::of(&outcomes, started.elapsed());
    if outcomes.is_empty() {
        totals.exit_code = schedule.if_no_tasks;
    }
    totals.exit_code =
        crate::results::exit_codes::after_signal(schedule.interrupted_by.load(std::sync::atomic::Ordering::SeqCst), totals.exit_code);
    emitter.emit(EventKind::RunFinished(totals.clone()));
    totals
}

/// Runs the batch's setups, then (when they passed) starts the run's MCP servers; `Some` says
/// why a setup failed: no task starts then.
async fn before_tasks(tasks: &[TaskSpec], shared: &Shared, emitter: &Emitter) -> Option<String> {
    match super::setup::run_all(tasks, shared, emitter).await {
        Ok(setups) => {
            let _ = shared.setups.set(setups);
            start_run_mcp_servers(tasks, shared).await;
            None
        }
        Err(why) => Some(why),
    }
}

/// Why the next task is not started, if so: its status, error kind and message. An interrupt
/// (or no slot, which only an interrupt causes) first, then a failed setup, the run's budget,
/// `--fail-fast`.
fn why_not_started(
    shared: &Shared,
    permitted: bool,
    stop: &AtomicBool,
    setup_failed: Option<&String>,
) -> Option<(Status, FailureKind, String)> {
    if *shared.cancel.borrow() || !permitted {
        Some((Status::Cancelled, FailureKind::Cancelled, "not started: the run was interrupted".to_string()))
    } else if let Some(why) = setup_failed {
        Some((Status::Error, FailureKind::Setup, why.clone()))
    } else if let Some(reason) = shared.run_meter.exceeded() {
        Some((Status::BudgetExceeded, FailureKind::Internal, format!("not started: {reason}")))
    } else if stop.load(Ordering::SeqCst) {
        Some((Status::Skipped, FailureKind::Internal, "not started: an earlier task did not pass (--fail-fast)".to_string()))
    } else {
        None
    }
}

/// Runs the task, unless the cache holds a pass of the same inputs (reported as this run's
/// result, `cached`); a new pass is recorded in the cache.
async fn run_or_reuse(spec: Arc<TaskSpec>, shared: Arc<Shared>, emitter: Emitter, cache: Option<Arc<super::cache::Cache>>) -> TaskOutcome {
    let key = match &cache {
        Some(_) => {
            let keyed = spec.clone();
            tokio::task::spawn_blocking(move || super::cache::Cache::key(&keyed)).await.ok().flatten()
        }
        None => None,
    };
    if let (Some(cache), Some(key)) = (&cache, &key)
        && let Some(hit) = cache.lookup(&spec, key)
        // A recorded patch holding one of this run's secrets is not shown: the task runs afresh.
        && shared.redactor.secrets_in(hit.diff.as_deref().unwrap_or_default()).is_empty()
    {
        let task_emitter = emitter.task(&spec.id, 1);
        // No workspace is made; the base the reused patch applies to is named all the same.
        task_emitter.emit(EventKind::TaskStarted {
            provider: spec.provider.name.clone(),
            model: spec.provider.model.clone().unwrap_or_default(),
            isolation: spec.workspace.isolation.as_str().to_string(),
            workdir: spec.workspace.workdir.clone(),
            base_commit: super::cache::Cache::base_commit(&spec),
            workspace_ms: None,
        });
        task_emitter.emit(EventKind::TaskFinished(Box::new(hit.clone())));
        return hit;
    }
    let inner = spec.clone();
    let (shared2, emitter2) = (shared.clone(), emitter.clone());
    let result = tokio::spawn(async move { task::run(&inner, &shared2, &emitter2).await }).await;
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => return panicked(&spec, e, &emitter),
    };
    if let (Some(cache), Some(key)) = (&cache, &key)
        && let Err(e) = cache.store(key, &outcome, &shared.run_id)
    {
        tracing::warn!("cannot record task {} in the cache: {e}", spec.id);
    }
    outcome
}

/// Starts the `scope = "run"` MCP servers the tasks declare, once each, before the first task.
async fn start_run_mcp_servers(tasks: &[TaskSpec], shared: &Shared) {
    let wanted: Vec<crate::mcp::Wanted> = tasks
        .iter()
        .flat_map(|spec| {
            let run_scope = spec.mcp_servers.iter().filter(|(_, c)| c.scope == Some(crate::mcp::McpScope::Run));
            run_scope.map(|(name, config)| crate::mcp::Wanted {
                name: name.clone(),
                config: config.clone(),
                sandbox: spec.sandbox,
                network: spec.network.is_all(),
                read_paths: spec.read_paths.clone(),
            })
        })
        .collect();
    if wanted.is_empty() {
        return;
    }
    let no_extra: [&str; 0] = [];
    let env = crate::secrets::child_env(shared.process_env.iter().map(|(k, v)| (k.clone(), v.clone())), &no_extra, &Default::default());
    let servers = crate::mcp::RunServers::start(&wanted, &env, shared.http.get().clone(), &shared.redactor).await;
    let _ = shared.run_mcp.set(servers);
}

async fn wait_cancelled(shared: &Shared) {
    let mut cancel = shared.cancel.clone();
    let _ = cancel.wait_for(|c| *c).await;
}

/// The outcome of a task that never started, with its status and error kind.
fn unstarted(spec: &TaskSpec, (status, kind): (Status, FailureKind), why: &str, emitter: &Emitter) -> TaskOutcome {
    let outcome = TaskOutcome { error: Some(TaskError::new(kind, why)), ..blank(spec, status) };
    emitter.task(&spec.id, 1).emit(EventKind::TaskFinished(Box::new(outcome.clone())));
    outcome
}

/// The outcome of a task whose code panicked: reported, never lost.
fn panicked(spec: &TaskSpec, error: tokio::task::JoinError, emitter: &Emitter) -> TaskOutcome {
    let message = match error.try_into_panic() {
        Ok(payload) => payload
            .downcast_ref::<&str>()
            .map(std::string::ToString::to_string)
            .or_else(|| payload.downcast_ref::<String>().cloned())
            .unwrap_or_else(|| "unknown panic".into()),
        Err(e) => e.to_string(),
    };
    let outcome = TaskOutcome {
        error: Some(TaskError::internal(format!("dracode bug: the task panicked: {message}"))),
        ..blank(spec, Status::Error)
    };
    emitter.task(&spec.id, 1).emit(EventKind::TaskFinished(Box::new(outcome.clone())));
    outcome
}

fn blank(spec: &TaskSpec, status: Status) -> TaskOutcome {
    TaskOutcome { attempts: 0, ..spec.outcome(status) }
}
