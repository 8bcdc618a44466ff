//! `dracode regrade OUT`: the checks run again on a run's recorded patches, without a model.
//!
//! Each selected task of the run that ended `passed` or `failed` (the verdicts a check gives) is
//! graded again: a fresh `worktree` workspace of its repository at the commit its attempt
//! started from (`task.started.base_commit`), its recorded patch applied, and its check — from
//! the run's manifests as they are now, or `--check` — run there, confined by the task's own
//! sandbox settings ([`super::task::command_policy`]). The verdict is the one a run gives
//! ([`super::judge`]): the check, then protected paths and `require_change`. The other tasks are
//! carried over as recorded (`carried_from`). The new results set (`results.jsonl`, `junit.xml`,
//! `summary.md`, `diffs/`) is written by the reporters of a run; each regraded `task.finished`
//! names the attempt it grades (`regraded_from`) and has no usage or cost: no model was called.

use super::grade::{self, DEFAULT_CHECK_TIMEOUT};
use super::judge::{AgentPhase, Evidence, judge};
use super::spec::{CheckSpec, TaskSpec};
use super::task::{Shared, network_log, run_check_in};
use super::workspace::{Carried, Workspace};
use super::world::World;
use crate::agent::AgentEnd;
use crate::events::{
    CheckRecord, Emitter, Event, FailureKind, Header, RegradedFrom, RunTotals, Status, TaskError, TaskOutcome, WireEvent, millis,
};
use crate::manifest::Isolation;
use crate::report::read_back::{FinishedTask as RecordedTask, OutputFolder as RecordedRun};
use dracode_llm::Usage;
use dracode_results::records::WireOutcome;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

/// What `dracode regrade` is asked to do.
#[derive(Debug, Clone)]
pub struct RegradeOptions {
    /// The output folder of the run to regrade.
    pub results: PathBuf,
    /// Where the new results go.
    pub out: PathBuf,
    /// The command that grades every task instead of its own check.
    pub check: Option<String>,
    /// Task id globs or `tag:NAME`.
    pub filter: Vec<String>,
    /// `--config`.
    pub config: Option<PathBuf>,
    /// Tasks regraded at once (`--jobs`, at least 1).
    pub jobs: usize,
}

/// The recorded run and the tasks of its manifests that were selected, ready to regrade.
pub struct Regrade {
    run: RecordedRun,
    specs: Vec<TaskSpec>,
    /// Tasks of the run that its manifests no longer hold (without `--filter`): not regraded.
    pub missing: Vec<String>,
    /// The config files read.
    config_files: Vec<PathBuf>,
}

/// Why a run cannot be regraded (the user's to fix: exit 2).
#[derive(Debug, thiserror::Error)]
pub enum RegradeError {
    /// The run's folder cannot be read.
    #[error(transparent)]
    Results(#[from] dracode_results::output_folder::ReadError),
    /// The run names no manifest (only `--task`s).
    #[error("{}: the run names no manifest to read the tasks' checks and repositories from", .0.display())]
    NoManifest(PathBuf),
    /// Its manifests cannot be planned.
    #[error(transparent)]
    Plan(#[from] super::plan::PlanError),
}

/// Reads the run in `opts.results` and plans its manifests.
pub fn prepare(opts: &RegradeOptions, cwd: &Path, env: &BTreeMap<String, String>) -> Result<Regrade, RegradeError> {
    let run = dracode_results::output_folder::read(&cwd.join(&opts.results))?;
    let manifests: Vec<PathBuf> = run.manifests.iter().filter(|m| m.as_str() != "--task").map(PathBuf::from).collect();
    if manifests.is_empty() {
        return Err(RegradeError::NoManifest(opts.results.clone()));
    }
    let args = crate::batch::options::RunOptions {
        manifests,
        filter: opts.filter.clone(),
        config: opts.config.clone(),
        out: opts.out.clone(),
        ..Default::default()
    };
    let plan = super::plan::plan(&args, cwd, env)?;
    let recorded: Vec<&str> = run.tasks.iter().map(|t| t.task_id.as_str()).collect();
    let planned: Vec<String> = plan.tasks.iter().map(|s| s.id.clone()).collect();
    let missing = if opts.filter.is_empty() {
        recorded.iter().filter(|id| !planned.iter().any(|p| p == *id)).map(|id| (*id).to_string()).collect()
    } else {
        Vec::new()
    };
    let specs = plan.tasks.into_iter().filter(|s| recorded.contains(&s.id.as_str())).collect();
    Ok(Regrade { run, specs, missing, config_files: plan.config_files })
}

impl Regrade {
    /// How many tasks are selected.
    pub fn len(&self) -> usize {
        self.specs.len()
    }

    /// Whether no task is selected.
    pub fn is_empty(&self) -> bool {
        self.specs.is_empty()
    }

    /// Regrades the selected tasks, `opts.jobs` at a time, emitting the run's events to
    /// `emitter`; returns the totals (also emitted as `run.finished`), the tasks in manifest order.
    pub async fn run(
        self,
        opts: &RegradeOptions,
        env: &BTreeMap<String, String>,
        redactor: &Arc<Redactor>,
        emitter: &Emitter,
    ) -> RunTotals {
        let started = Instant::now();
        let jobs = opts.jobs.max(1);
        emitter.emit(WireEvent::RunStarted {
            header: Header::unstamped(None),
            version: env!("CARGO_PKG_VERSION").to_string(),
            manifests: self.run.manifests.clone(),
            task_count: self.specs.len(),
            jobs,
            warnings: Vec::new(),
            config_files: Some(self.config_files.iter().map(|f| f.display().to_string()).collect()),
            merged_from: None,
        });
        // Kept for the whole regrade: a dropped sender would read as an interrupt.
        let (_interrupt, cancel) = tokio::sync::watch::channel(false);
        let shared = Shared::without_model(env, redactor.clone(), &opts.out, cancel, self.run.run_id.clone());
        let setup = self.setups(&shared, emitter).await;
        let each = self.specs.iter().filter_map(|spec| {
            let task = self.run.tasks.iter().find(|t| t.task_id == spec.id)?;
            let job = Job { spec, task, run_id: &self.run.run_id, shared: &shared, setup: setup.as_ref().err(), emitter };
            let graded: Pending<'_, TaskOutcome> = Box::pin(regrade_or_carry(job, opts.check.as_deref()));
            Some(graded)
        });
        let outcomes = at_most(jobs, each.collect()).await;
        shared.removals.wait().await;
        let totals = RunTotals::of(&outcomes, started.elapsed());
        emitter.emit(Event::run_finished(&totals));
        totals
    }
}

impl Regrade {
    /// Runs the setup of every group of the tasks to regrade (those that ended `passed` or
    /// `failed`), as `dracode run` does, into `shared`; `Err` says why one failed.
    async fn setups(&self, shared: &Shared, emitter: &Emitter) -> Result<(), TaskError> {
        let graded: Vec<&TaskSpec> =
            self.specs.iter().filter(|spec| self.run.tasks.iter().any(|t| t.task_id == spec.id && regraded(t))).collect();
        let setups =
            super::setup::run_all(&graded, shared, emitter).await.map_err(|why| TaskError::new(FailureKind::Setup, why.to_string()))?;
        let _ = shared.setups.set(setups);
        Ok(())
    }
}

/// Whether `task` is graded again: it ended with a verdict a check gives.
fn regraded(task: &RecordedTask) -> bool {
    matches!(task.outcome.status, Status::Passed | Status::Failed)
}

/// A boxed future of the regrade.
type Pending<'a, T> = std::pin::Pin<Box<dyn std::future::Future<Output = T> + 'a>>;

/// Runs `futures`, at most `jobs` at a time, in order of starting; their outputs in that order.
/// (The futures borrow the regrade's data, so they are not spawned.)
async fn at_most<T>(jobs: usize, futures: Vec<Pending<'_, T>>) -> Vec<T> {
    use std::task::Poll;
    let mut done: Vec<Option<T>> = futures.iter().map(|_| None).collect();
    let mut waiting = futures.into_iter().enumerate();
    let mut running: Vec<(usize, Pending<'_, T>)> = Vec::new();
    std::future::poll_fn(|cx| {
        loop {
            running.extend(waiting.by_ref().take(jobs.saturating_sub(running.len())));
            let before = running.len();
            running.retain_mut(|(index, future)| match future.as_mut().poll(cx) {
                Poll::Ready(out) => {
                    done[*index] = Some(out);
                    false
                }
                Poll::Pending => true,
            });
            if running.is_empty() {
                return Poll::Ready(());
            }
            if running.len() == before {
                return Poll::Pending;
            }
        }
    })
    .await;
    done.into_iter().flatten().collect()
}

/// The task regraded when it ended `passed` or `failed`, else carried over as recorded;
/// its `task.started` (when regraded) and `task.finished` emitted.
async fn regrade_or_carry(job: Job<'_>, check: Option<&str>) -> TaskOutcome {
    let (spec, task, emitter) = (job.spec, job.task, job.emitter);
    let mut outcome = if regraded(task) {
        // The base the patch was graded on, for a reader of these results (combine).
        emitter.task(&spec.id, 1).emit(WireEvent::TaskStarted {
            header: Header::unstamped(None),
            provider: task.outcome.provider.clone(),
            model: task.outcome.model.clone(),
            isolation: Isolation::Worktree.as_str().to_string(),
            workdir: spec.workspace.workdir.to_string_lossy().into_owned(),
            base_commit: task.base_commit.clone(),
            workspace_ms: None,
            issue: task.issue.clone(),
        });
        regrade_one(&job, check).await
    } else {
        let mut carried = TaskOutcome::from(task.clone());
        carried.record.carried_from = Some(job.run_id.to_string());
        carried
    };
    emitter.task(&spec.id, 1).emit(Event::task_finished(&mut outcome));
    outcome
}

/// One task to regrade, and what it runs with.
struct Job<'a> {
    spec: &'a TaskSpec,
    task: &'a RecordedTask,
    run_id: &'a str,
    shared: &'a Shared,
    /// Why the setup of the batch failed, if it did: the task is not graded.
    setup: Option<&'a TaskError>,
    emitter: &'a Emitter,
}

/// The task's recorded patch checked again: its new verdict, pointing at the recorded attempt.
async fn regrade_one(job: &Job<'_>, check: Option<&str>) -> TaskOutcome {
    let started = Instant::now();
    let recorded = &job.task.outcome;
    let mut outcome = TaskOutcome::from(job.task.clone());
    outcome.record = WireOutcome {
        usage: Usage::default(),
        total_cost_usd: Some(0.0),
        num_turns: 0,
        attempts: 1,
        prior_attempts: Vec::new(),
        flaky: false,
        carried_from: None,
        cached_from: None,
        regraded_from: Some(RegradedFrom { run_id: job.run_id.to_string(), attempt: job.task.attempt, status: recorded.status }),
        ..outcome.record
    };
    let verdict = match check_again(job, check).await {
        Ok((record, unrunnable)) => {
            let evidence = Evidence {
                phase: &AgentPhase::Ended(AgentEnd::Finished),
                check: Some(&record),
                files_changed: recorded.files_changed.len(),
                require_change: job.spec.require_change,
                max_iterations: job.spec.max_iterations,
                protected: &recorded.protected,
                resource: None,
                unrunnable: unrunnable.as_deref(),
            };
            let verdict = judge(&evidence);
            outcome.record.check = Some(record);
            verdict
        }
        Err(error) => (Status::Error, Some(error)),
    };
    (outcome.record.status, outcome.record.error) = verdict;
    outcome.record.duration_ms = millis(started.elapsed());
    outcome
}

/// Makes the check's world — a fresh workspace at the recorded base with the setup's outputs,
/// the recorded patch applied — and runs the check there as `dracode run` does
/// ([`run_check_in`]); returns its record and why it could not run, if so.
async fn check_again(job: &Job<'_>, check: Option<&str>) -> Result<(CheckRecord, Option<String>), TaskError> {
    if let Some(error) = job.setup {
        return Err(error.clone());
    }
    let recorded = &job.task.outcome;
    let command = check
        .map(str::to_string)
        .or_else(|| job.spec.check.as_ref().map(|c| c.command.clone()))
        .or_else(|| recorded.check.as_ref().map(|c| c.command.clone()))
        .ok_or_else(|| TaskError::internal("the task has no check: give one with --check"))?;
    let timeout = job.spec.check.as_ref().map_or(DEFAULT_CHECK_TIMEOUT, |c| c.timeout);
    let check = CheckSpec { command, before: false, timeout, repairs: 0 };
    let carried = job.shared.setups.get().and_then(|setups| setups.carried_for(job.spec));
    let (spec, base, patch) = (job.spec.clone(), job.task.base_commit.clone(), job.task.diff.clone());
    let stores = job.shared.stores.clone();
    let made =
        tokio::task::spawn_blocking(move || checked_out(&stores, &spec, base.as_deref(), patch.as_deref(), carried.as_deref())).await;
    let world = made.map_err(|e| TaskError::internal(format!("making the check's world panicked: {e}")))??;
    let place = world.place.clone();
    let world = std::sync::Mutex::new(Some(world));
    let log = network_log(job.emitter.task(&job.spec.id, 1));
    let checked = run_check_in(&check, job.spec, &place, job.shared, log, None).await;
    let world = world.into_inner().unwrap_or_else(std::sync::PoisonError::into_inner);
    let _ = tokio::task::spawn_blocking(move || drop(world)).await;
    checked
}

/// The world of a recorded patch: a fresh workspace of `spec`'s repository at `base` (copied
/// from the regrade's checkout of it in `stores`), what the
/// setup made carried in, the patch applied.
fn checked_out(
    stores: &super::run_stores::RunStores,
    spec: &TaskSpec,
    base: Option<&str>,
    patch: Option<&str>,
    carried: Option<&Carried>,
) -> Result<World, TaskError> {
    let base = base.ok_or_else(|| TaskError::internal("no base commit recorded: the task did not run in a git repository"))?;
    let workdir = Some(spec.workspace.workdir.as_path()).filter(|w| !w.as_os_str().is_empty());
    let workspace = Workspace::prepare_carrying(stores, &spec.workspace.repo, Isolation::Worktree, base, workdir, carried)
        .map_err(|e| TaskError::internal(format!("workspace at {base}: {e}")))?;
    if let Some(patch) = patch.filter(|d| !d.is_empty()) {
        grade::apply(&workspace, patch).map_err(|e| TaskError::internal(format!("the recorded patch does not apply to {base}: {e}")))?;
    }
    Ok(World::of_workspace(workspace))
}
