//! Scheduling a run: tasks start in manifest order, up to `jobs` at a time; tasks that work
//! in place on the same folder never overlap; a panic in one task is reported as that task's
//! `error` and the rest go on; after an interrupt no task starts and running ones end as
//! `cancelled`. Every task gets exactly one `task.finished`.
//!
//! Before any setup, what is already known is settled: the passes `--cache` holds are reused,
//! and the providers of the tasks a setup serves are pre-flighted ([`super::preflight`]); the
//! setups then run for the tasks left, none for a group with no task to run.

use super::plan::Plan;
use super::setup::SetupError;
use super::spec::TaskSpec;
use super::task::{self, Shared};
use crate::events::{Emitter, Event, FailureKind, Header, RunTotals, Status, TaskError, TaskOutcome, WireEvent};
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
    /// `--record`, with the output folder the recordings are written under.
    pub record: Option<(super::options::RecordTo, std::path::PathBuf)>,
}

/// Runs every task of `plan` and returns the totals (also emitted as `run.finished`).
pub async fn run(plan: Plan, shared: Arc<Shared>, emitter: Emitter, schedule: Schedule) -> RunTotals {
    let started = Instant::now();
    emitter.emit(WireEvent::RunStarted {
        header: Header { shard: schedule.shard.clone(), ..Header::unstamped(None) },
        version: env!("CARGO_PKG_VERSION").to_string(),
        manifests: plan.manifests.iter().map(|p| p.display().to_string()).collect(),
        task_count: plan.tasks.len(),
        jobs: schedule.jobs,
        warnings: plan.warnings.clone(),
        config_files: Some(plan.config_files.iter().map(|f| f.display().to_string()).collect()),
        merged_from: None,
    });
    let tasks: Vec<Arc<TaskSpec>> = plan.tasks.into_iter().map(Arc::new).collect();
    let known = before_setup(&tasks, &shared, schedule.cache.as_ref()).await;
    let setup_failed = before_tasks(&tasks, &known, &shared, &emitter).await;
    let slots = Arc::new(Semaphore::new(schedule.jobs.max(1)));
    let stop = Arc::new(AtomicBool::new(false));
    let mut folder_locks: HashMap<PathBuf, Arc<Mutex<()>>> = HashMap::new();
    let mut handles = Vec::with_capacity(tasks.len());
    for (spec, known) in tasks.into_iter().zip(known) {
        let folder_lock = (spec.workspace.isolation == Isolation::None).then(|| {
            let key = spec.workspace.repo.canonicalize().unwrap_or_else(|_| spec.workspace.repo.clone());
            folder_locks.entry(key).or_default().clone()
        });
        let permit = tokio::select! {
            permit = slots.clone().acquire_owned() => permit.ok(),
            _ = wait_cancelled(&shared) => None,
        };
        let setup_failed = setup_failed.as_ref().filter(|_| matches!(known, Known::Runs(_)));
        if let Some((status, kind, why)) = why_not_started(&shared, permit.is_some(), &stop, setup_failed) {
            handles.push(tokio::spawn(std::future::ready(unstarted(&spec, (status, kind), &why, &emitter))));
            continue;
        }
        let key = match known {
            Known::Runs(key) => key,
            Known::Ended(outcome) => {
                let stop = schedule.fail_fast.then_some(stop.as_ref());
                handles.push(tokio::spawn(std::future::ready(ended(&spec, *outcome, &emitter, stop))));
                continue;
            }
        };
        let (shared, emitter, stop) = (shared.clone(), emitter.clone(), stop.clone());
        let fail_fast = schedule.fail_fast;
        let cache = schedule.cache.clone().zip(key);
        handles.push(tokio::spawn(async move {
            let _permit = permit;
            let _folder = match &folder_lock {
                Some(lock) => Some(lock.lock().await),
                None => None,
            };
            let mut outcome = run_and_record(spec.clone(), shared, emitter.clone(), cache).await;
            if fail_fast && !outcome.record.status.is_pass() {
                stop.store(true, Ordering::SeqCst);
            }
            // Its patch and conversation went out with `task.finished`; the run's totals need only
            // the record, and 1,000 transcripts held to the end were a third of the peak memory.
            outcome.attachments = Default::default();
            outcome
        }));
    }
    let mut outcomes = Vec::with_capacity(handles.len());
    for handle in handles {
        if let Ok(outcome) = handle.await {
            outcomes.push(outcome);
        }
    }
    finish(&outcomes, &shared, &emitter, &schedule, started).await
}

/// Stops the run's MCP servers, copies the recordings out (`--record DIR`) and emits
/// `run.finished` with the totals of `outcomes`.
async fn finish(outcomes: &[TaskOutcome], shared: &Arc<Shared>, emitter: &Emitter, schedule: &Schedule, started: Instant) -> RunTotals {
    if let Some(servers) = shared.run_mcp.get() {
        servers.stop().await;
    }
    remove_run_folders(shared).await;
    let mut totals = RunTotals::of(outcomes, started.elapsed());
    if outcomes.is_empty() {
        totals.exit_code = schedule.if_no_tasks;
    }
    totals.exit_code =
        dracode_results::exit_codes::after_signal(schedule.interrupted_by.load(std::sync::atomic::Ordering::SeqCst), totals.exit_code);
    for failure in schedule.record.iter().flat_map(|(record, out)| record.copy_out(out)) {
        emitter.fail(failure);
    }
    emitter.emit(Event::run_finished(&totals));
    totals
}

/// Waits for the tasks' folders to be removed, then removes the setups' workspaces and the
/// copy bases (a setup's `node_modules` can take seconds): before `run.finished`, so the `TOTAL`
/// line counts the time and the process exits when it is printed.
async fn remove_run_folders(shared: &Arc<Shared>) {
    shared.removals.wait().await;
    let shared = shared.clone();
    let _ = tokio::task::spawn_blocking(move || {
        if let Some(setups) = shared.setups.get() {
            setups.remove_kept();
        }
        shared.stores.clear();
    })
    .await;
}

/// What is known of a task before any setup runs.
enum Known {
    /// It runs; under this key a pass is recorded in the cache (`--cache`).
    Runs(Option<String>),
    /// It has ended without running: a pass the cache holds (`cached`), or the error its
    /// provider's pre-flight found.
    Ended(Box<TaskOutcome>),
}

/// What the cache holds of every task, then the pre-flight of the providers of those still to
/// run that a setup serves ([`super::preflight`]): a setup runs only for tasks that will run.
/// An interrupt ends the pre-flight (every task is then `cancelled`).
async fn before_setup(tasks: &[Arc<TaskSpec>], shared: &Shared, cache: Option<&Arc<super::cache::Cache>>) -> Vec<Known> {
    let mut known = cache_keys(tasks, cache.is_some()).await;
    for (known, spec) in known.iter_mut().zip(tasks) {
        if let (Some(cache), Known::Runs(Some(key))) = (cache, &*known)
            && let Some(hit) = cache.lookup(spec, key)
            // A recorded patch holding one of this run's secrets is not shown: the task runs afresh.
            && shared.redactor.secrets_in(hit.attachments.diff.as_deref().unwrap_or_default()).is_empty()
        {
            *known = Known::Ended(Box::new(hit));
        }
    }
    let served: Vec<usize> = (0..tasks.len()).filter(|&i| tasks[i].setup.is_some() && matches!(known[i], Known::Runs(_))).collect();
    let specs: Vec<&TaskSpec> = served.iter().map(|&i| tasks[i].as_ref()).collect();
    let found = tokio::select! {
        found = super::preflight::check(&specs, &shared.process_env) => found,
        _ = wait_cancelled(shared) => Vec::new(),
    };
    for (i, error) in served.into_iter().zip(found) {
        if let Some(error) = error {
            let status = super::judge::failure_status(&error);
            let mut outcome = blank(&tasks[i], status);
            outcome.record.error = Some(error);
            known[i] = Known::Ended(Box::new(outcome));
        }
    }
    known
}

/// Each task's cache key (`None`: not cached), computed off the async workers; all `None`
/// without a cache.
async fn cache_keys(tasks: &[Arc<TaskSpec>], cached: bool) -> Vec<Known> {
    if !cached {
        return tasks.iter().map(|_| Known::Runs(None)).collect();
    }
    let handles: Vec<_> = tasks
        .iter()
        .map(|spec| {
            let spec = spec.clone();
            tokio::task::spawn_blocking(move || super::cache::Cache::key(&spec))
        })
        .collect();
    let mut keys = Vec::with_capacity(tasks.len());
    for handle in handles {
        keys.push(Known::Runs(handle.await.ok().flatten()));
    }
    keys
}

/// Runs the setups of the tasks that will run (`known`), then (when they passed) starts the
/// run's MCP servers; `Some` says why a setup failed: no task starts then.
async fn before_tasks(tasks: &[Arc<TaskSpec>], known: &[Known], shared: &Shared, emitter: &Emitter) -> Option<SetupError> {
    let running: Vec<&TaskSpec> = tasks.iter().zip(known).filter(|(_, k)| matches!(k, Known::Runs(_))).map(|(t, _)| t.as_ref()).collect();
    match super::setup::run_all(&running, shared, emitter).await {
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
    setup_failed: Option<&SetupError>,
) -> Option<(Status, FailureKind, String)> {
    if *shared.cancel.borrow() || !permitted {
        Some((Status::Cancelled, FailureKind::Cancelled, "not started: the run was interrupted".to_string()))
    } else if let Some(why) = setup_failed {
        Some((Status::Error, FailureKind::Setup, why.to_string()))
    } else if let Some(reason) = shared.run_meter.exceeded() {
        Some((Status::BudgetExceeded, FailureKind::Internal, format!("not started: {reason}")))
    } else if stop.load(Ordering::SeqCst) {
        Some((Status::Skipped, FailureKind::Internal, "not started: an earlier task did not pass (--fail-fast)".to_string()))
    } else {
        None
    }
}

/// Reports a task that ended before it could start: a reused pass with its `task.started`
/// (no workspace is made; the base the reused patch applies to is named all the same), or a
/// provider the pre-flight refused, with no `task.started` (as a task a failed setup stopped).
/// `stop` (`--fail-fast`) is set when it did not pass.
fn ended(spec: &TaskSpec, mut outcome: TaskOutcome, emitter: &Emitter, stop: Option<&AtomicBool>) -> TaskOutcome {
    if let Some(stop) = stop.filter(|_| !outcome.record.status.is_pass()) {
        stop.store(true, Ordering::SeqCst);
    }
    let task_emitter = emitter.task(&spec.id, 1);
    if outcome.record.cached_from.is_some() {
        task_emitter.emit(WireEvent::TaskStarted {
            header: Header::unstamped(None),
            provider: spec.provider.name.clone(),
            model: spec.provider.model.clone().unwrap_or_default(),
            isolation: spec.workspace.isolation.as_str().to_string(),
            workdir: spec.workspace.workdir.to_string_lossy().into_owned(),
            base_commit: super::cache::Cache::base_commit(spec),
            workspace_ms: None,
            issue: spec.issue.clone(),
        });
    }
    task_emitter.emit(Event::task_finished(&mut outcome));
    outcome
}

/// Runs the task; a new pass is recorded in the cache under its key.
async fn run_and_record(
    spec: Arc<TaskSpec>,
    shared: Arc<Shared>,
    emitter: Emitter,
    cache: Option<(Arc<super::cache::Cache>, String)>,
) -> TaskOutcome {
    let inner = spec.clone();
    let (shared2, emitter2) = (shared.clone(), emitter.clone());
    let result = tokio::spawn(async move { task::run(&inner, &shared2, &emitter2).await }).await;
    let outcome = match result {
        Ok(outcome) => outcome,
        Err(e) => return panicked(&spec, e, &emitter),
    };
    if let Some((cache, key)) = &cache
        && let Err(e) = cache.store(key, &outcome, &shared.run_id)
    {
        tracing::warn!("cannot record task {} in the cache: {e}", spec.id);
    }
    outcome
}

/// Starts the `scope = "run"` MCP servers the tasks declare, once each, before the first task.
async fn start_run_mcp_servers(tasks: &[Arc<TaskSpec>], shared: &Shared) {
    let wanted: Vec<dracode_mcp::Wanted> = tasks
        .iter()
        .flat_map(|spec| {
            let run_scope = spec.mcp_servers.iter().filter(|(_, c)| c.scope == Some(dracode_mcp::McpScope::Run));
            run_scope.map(|(name, config)| dracode_mcp::Wanted {
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
    let env = dracode_secrets::child_env(shared.process_env.iter().map(|(k, v)| (k.clone(), v.clone())), &no_extra, &Default::default());
    let servers = dracode_mcp::RunServers::start(&wanted, &env, shared.http.get().clone(), &shared.redactor).await;
    let _ = shared.run_mcp.set(servers);
}

async fn wait_cancelled(shared: &Shared) {
    let mut cancel = shared.cancel.clone();
    let _ = cancel.wait_for(|c| *c).await;
}

/// The outcome of a task that never started, with its status and error kind.
fn unstarted(spec: &TaskSpec, (status, kind): (Status, FailureKind), why: &str, emitter: &Emitter) -> TaskOutcome {
    let mut outcome = blank(spec, status);
    outcome.record.error = Some(TaskError::new(kind, why));
    emitter.task(&spec.id, 1).emit(Event::task_finished(&mut outcome));
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
    let mut outcome = blank(spec, Status::Error);
    outcome.record.error = Some(TaskError::internal(format!("dracode bug: the task panicked: {message}")));
    emitter.task(&spec.id, 1).emit(Event::task_finished(&mut outcome));
    outcome
}

fn blank(spec: &TaskSpec, status: Status) -> TaskOutcome {
    let mut outcome = spec.outcome(status);
    outcome.record.attempts = 0;
    outcome
}
