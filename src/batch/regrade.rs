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

use super::grade::{self, CheckSetup, DEFAULT_CHECK_TIMEOUT};
use super::judge::{AgentPhase, Evidence, judge};
use super::spec::TaskSpec;
use super::task::{SharedPaths, command_policy};
use super::workspace::Workspace;
use crate::agent::AgentEnd;
use crate::events::{Emitter, EventKind, RegradedFrom, RunTotals, Status, TaskError, TaskOutcome};
use crate::llm::Usage;
use crate::manifest::Isolation;
use crate::report::read_back::{self, RecordedRun, RecordedTask};
use crate::secrets::Redactor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
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

/// Reads the run in `opts.results` and plans its manifests (the error is for the user: exit 2).
pub fn prepare(opts: &RegradeOptions, cwd: &Path, env: &BTreeMap<String, String>) -> Result<Regrade, String> {
    let run = read_back::read(&cwd.join(&opts.results))?;
    let manifests: Vec<PathBuf> = run.manifests.iter().filter(|m| m.as_str() != "--task").map(PathBuf::from).collect();
    if manifests.is_empty() {
        return Err(format!("{}: the run names no manifest to read the tasks' checks and repositories from", opts.results.display()));
    }
    let args = crate::batch::options::RunArgs {
        manifests,
        filter: opts.filter.clone(),
        config: opts.config.clone(),
        out: opts.out.clone(),
        ..Default::default()
    };
    let plan = super::plan::plan(&args, cwd, env).map_err(|e| e.to_string())?;
    let recorded: Vec<&str> = run.tasks.iter().map(|t| t.outcome.task_id.as_str()).collect();
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
    pub async fn run(self, opts: &RegradeOptions, env: &BTreeMap<String, String>, redactor: &Redactor, emitter: &Emitter) -> RunTotals {
        let started = Instant::now();
        let jobs = opts.jobs.max(1);
        emitter.emit(EventKind::RunStarted {
            version: env!("CARGO_PKG_VERSION").to_string(),
            manifests: self.run.manifests.clone(),
            task_count: self.specs.len(),
            shard: None,
            jobs,
            warnings: Vec::new(),
            config_files: Some(self.config_files.iter().map(|f| f.display().to_string()).collect()),
        });
        let each = self.specs.iter().filter_map(|spec| {
            let task = self.run.tasks.iter().find(|t| t.outcome.task_id == spec.id)?;
            let job = Job { spec, task, run_id: &self.run.run_id, env, redactor, out: &opts.out };
            let graded: Pending<'_, TaskOutcome> = Box::pin(regrade_or_carry(job, opts.check.as_deref(), emitter));
            Some(graded)
        });
        let outcomes = at_most(jobs, each.collect()).await;
        let totals = RunTotals::of(&outcomes, started.elapsed());
        emitter.emit(EventKind::RunFinished(totals.clone()));
        totals
    }
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
async fn regrade_or_carry(job: Job<'_>, check: Option<&str>, emitter: &Emitter) -> TaskOutcome {
    let (spec, task) = (job.spec, job.task);
    let outcome = if matches!(task.outcome.status, Status::Passed | Status::Failed) {
        // The base the patch was graded on, for a reader of these results (combine).
        emitter.task(&spec.id, 1).emit(EventKind::TaskStarted {
            provider: task.outcome.provider.clone(),
            model: task.outcome.model.clone(),
            isolation: Isolation::Worktree.as_str().to_string(),
            workdir: spec.workspace.workdir.clone(),
            base_commit: task.base_commit.clone(),
            workspace_ms: None,
        });
        regrade_one(&job, check).await
    } else {
        TaskOutcome { carried_from: Some(job.run_id.to_string()), ..task.outcome.clone() }
    };
    emitter.task(&spec.id, 1).emit(EventKind::TaskFinished(Box::new(outcome.clone())));
    outcome
}

/// One task to regrade, and what it runs with.
struct Job<'a> {
    spec: &'a TaskSpec,
    task: &'a RecordedTask,
    run_id: &'a str,
    env: &'a BTreeMap<String, String>,
    redactor: &'a Redactor,
    out: &'a Path,
}

/// The task's recorded patch checked again: its new verdict, pointing at the recorded attempt.
async fn regrade_one(job: &Job<'_>, check: Option<&str>) -> TaskOutcome {
    let started = Instant::now();
    let recorded = &job.task.outcome;
    let mut outcome = TaskOutcome {
        usage: Usage::default(),
        cost_usd: Some(0.0),
        num_turns: 0,
        attempts: 1,
        prior_attempts: Vec::new(),
        flaky: false,
        carried_from: None,
        cached: None,
        regraded_from: Some(RegradedFrom { run_id: job.run_id.to_string(), attempt: job.task.attempt, status: recorded.status }),
        ..recorded.clone()
    };
    let verdict = match check_again(job, check).await {
        Ok(record) => {
            // Its command not found or not executable (the sandbox's refusals need its policy).
            let unrunnable = super::check::could_not_run(&record, None);
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
            outcome.check = Some(record);
            verdict
        }
        Err(error) => (Status::Error, Some(error)),
    };
    (outcome.status, outcome.error) = verdict;
    outcome.duration = started.elapsed();
    outcome
}

/// Makes the workspace at the recorded base, applies the patch and runs the check; a process
/// of the check that outlived its supervisor ([`crate::sandbox::sweep`]) makes it `error` (kind
/// `sandbox`).
async fn check_again(job: &Job<'_>, check: Option<&str>) -> Result<crate::events::CheckRecord, TaskError> {
    let recorded = &job.task.outcome;
    let command = check
        .map(str::to_string)
        .or_else(|| job.spec.check.as_ref().map(|c| c.command.clone()))
        .or_else(|| recorded.check.as_ref().map(|c| c.command.clone()))
        .ok_or_else(|| TaskError::internal("the task has no check: give one with --check"))?;
    let workspace = checked_out(job)?;
    let sweep = crate::sandbox::sweep::TaskSweep::register(vec![workspace.root.clone()]);
    let record = run_check_in(job, &command, &workspace).await;
    let escaped = |e: String| TaskError::new(crate::events::FailureKind::Sandbox, format!("a process escaped its sandbox: {e}"));
    sweep.sweep().map_err(escaped)?;
    Ok(record)
}

/// The workspace at the recorded base with the recorded patch applied.
fn checked_out(job: &Job<'_>) -> Result<Workspace, TaskError> {
    let (spec, recorded) = (job.spec, &job.task.outcome);
    let base = job
        .task
        .base_commit
        .as_deref()
        .ok_or_else(|| TaskError::internal("no base commit recorded: the task did not run in a git repository"))?;
    let workdir = Some(spec.workspace.workdir.as_path()).filter(|w| !w.as_os_str().is_empty());
    let workspace = Workspace::prepare(&spec.workspace.repo, Isolation::Worktree, base, workdir)
        .map_err(|e| TaskError::internal(format!("workspace at {base}: {e}")))?;
    if let Some(patch) = recorded.diff.as_deref().filter(|d| !d.is_empty()) {
        grade::apply(&workspace, patch).map_err(|e| TaskError::internal(format!("the recorded patch does not apply to {base}: {e}")))?;
    }
    Ok(workspace)
}

/// Runs `command`, confined as the task's check, in `workspace`.
async fn run_check_in(job: &Job<'_>, command: &str, workspace: &Workspace) -> crate::events::CheckRecord {
    let spec = job.spec;
    let shared = SharedPaths::new(Some(job.out), job.env);
    let confine = |layout: &_, env: &_| command_policy(spec, layout, env, &shared);
    let setup = CheckSetup {
        process_env: job.env,
        passthrough: &spec.env_passthrough,
        task_env: &spec.env,
        redactor: job.redactor,
        confine: &confine,
    };
    let timeout = spec.check.as_ref().map_or(DEFAULT_CHECK_TIMEOUT, |c| c.timeout);
    grade::run_check(workspace, &workspace.workdir, command, timeout, &setup).await
}
