//! A batch, built then executed: [`BatchBuilder::build`] plans it (nothing touches the disk),
//! [`Batch::execute`] runs it and says how it ended ([`RunSummary`]).

use super::{RunFolder, signals};
use crate::batch::options::{NoTasks, RecordTo, RunOptions};
use crate::batch::plan::{self, Plan, PlanError, RerunSource};
use crate::batch::{cache::Cache, runner, task::Shared, task::SharedPaths};
use crate::events::{Emitter, Ending, EventBus, Reporter, RunTotals, Stamp};
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

/// What keeps a batch from running at all (after planning).
#[derive(Debug, thiserror::Error)]
pub enum EngineError {
    /// The output folder cannot be prepared or written.
    #[error("cannot prepare --out {}: {source}", path.display())]
    Folder {
        /// The folder.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// No async runtime could be started.
    #[error("cannot start the async runtime: {0}")]
    Runtime(std::io::Error),
}

/// How a batch ended.
#[derive(Debug)]
pub struct RunSummary {
    /// The process's exit code — the one `run.finished.exit_code` holds.
    pub exit_code: i32,
    /// The run's totals as the tasks left them (before the artifacts were weighed).
    pub totals: RunTotals,
    /// Every artifact that could not be written (file and OS error).
    pub failures: Vec<String>,
    /// What a person should read after the run (a full disk, the rerun's add-up).
    pub notes: Vec<String>,
}

/// Plans a batch from its options.
pub struct BatchBuilder {
    options: RunOptions,
    cwd: PathBuf,
    env: BTreeMap<String, String>,
}

impl BatchBuilder {
    /// A batch of `options`, paths relative to `cwd`, in the process environment `env`.
    pub fn new(options: RunOptions, cwd: &Path, env: BTreeMap<String, String>) -> Self {
        BatchBuilder { options, cwd: cwd.to_path_buf(), env }
    }

    /// Reads the manifests and config and plans every task; nothing is written.
    pub fn build(self) -> Result<Batch, PlanError> {
        let plan = plan::plan(&self.options, &self.cwd, &self.env)?;
        let redactor = Arc::new(Redactor::from_env(self.env.clone(), plan.secrets.clone()));
        let shard = plan.shard.map(|s| s.to_string());
        Ok(Batch { plan, options: self.options, env: self.env, redactor, run_id: super::run_id(), shard })
    }
}

/// Threads for the tasks' blocking work (workspaces made and removed, file tools, cache keys):
/// each call is short, so a few threads keep every core busy. Tokio's default, 512, let 256
/// concurrent tasks make 256 threads contending for the same file-system locks, each with its
/// stack and malloc arena (`docs/src/performance.md`).
const BLOCKING_THREADS: usize = 8;

/// A planned batch, ready to run.
pub struct Batch {
    /// The plan: its tasks, warnings, shard, cache and rerun source.
    pub plan: Plan,
    options: RunOptions,
    env: BTreeMap<String, String>,
    redactor: Arc<Redactor>,
    run_id: String,
    shard: Option<String>,
}

impl Batch {
    /// The run's id, as every record of it says.
    pub fn run_id(&self) -> &str {
        &self.run_id
    }

    /// `K/N` when sharded.
    pub fn shard(&self) -> Option<&str> {
        self.shard.as_deref()
    }

    /// What every reporter of this run masks.
    pub fn redactor(&self) -> &Arc<Redactor> {
        &self.redactor
    }

    /// Whether the rerun this batch is has nothing to do: every task of the earlier run passed.
    pub fn nothing_to_rerun(&self) -> Option<&RerunSource> {
        self.plan.rerun.as_ref().filter(|r| r.all_passed && self.plan.tasks.is_empty())
    }

    /// Runs every task, writing the output folder's artifacts and feeding `reporters` (the
    /// caller's displays and streams) too; `notice` is called on the first SIGINT/SIGTERM.
    pub fn execute(mut self, reporters: Vec<Box<dyn Reporter>>, notice: fn()) -> Result<RunSummary, EngineError> {
        let out = self.options.out.clone();
        let rerun = self.plan.rerun.take();
        let keep = rerun.as_ref().filter(|r| r.in_place).map(|r| r.carried.clone()).unwrap_or_default();
        let mut folder = RunFolder::open(&out, &keep, &self.redactor, &self.env, self.plan.cache.as_deref())?;
        folder.reporters.extend(self.findings().map(|f| Box::new(f.with_reserve(folder.reserve.clone())) as Box<dyn Reporter>));
        folder.reporters.extend(reporters);
        let bus = EventBus::new(Stamp::new(&self.run_id, self.shard.as_deref()), std::mem::take(&mut folder.reporters));
        crate::batch::owned_dir::sweep_killed_runs();
        let cache = self.plan.cache.clone();
        let redactor = self.redactor.clone();
        let (totals, signal) = self.run_tasks(&bus, notice)?;
        let mut ending = bus.finish_run();
        let mut notes = Vec::new();
        if folder.reserve.times_given_up() > 0 {
            notes.push(format!(
                "warning: the disk holding {} filled up during the run: dracode wrote its results into the room it had held back; \
                 a check that ended on the full disk graded nothing (its task ended error, could not be judged)",
                out.display()
            ));
        }
        if let Some(rerun) = rerun.filter(|r| r.in_place) {
            add_up_rerun(&rerun, &out, &redactor, cache.as_deref(), &mut ending, &mut notes);
        }
        let tasks = dracode_results::exit_codes::after_signal(signal, totals.exit_code);
        Ok(RunSummary { exit_code: ending.exit_code(tasks), totals, failures: ending.failures, notes })
    }

    /// The tasks run on a runtime of their own, with the signal watcher beside them; returns the
    /// totals and the signal that interrupted the run (0: none).
    fn run_tasks(self, bus: &Arc<EventBus>, notice: fn()) -> Result<(RunTotals, i32), EngineError> {
        let jobs = self.options.jobs();
        // No more runtime workers than tasks can use: each idle worker is a thread stack and an arena.
        let workers = jobs.min(self.plan.tasks.len()).clamp(1, 4);
        let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
        let shared = Arc::new(Shared {
            prices: self.plan.prices.clone(),
            redactor: self.redactor.clone(),
            http: Default::default(),
            process_env: Arc::new(self.env.clone()),
            record: self.options.record.as_ref().map(|_| RecordTo::while_running(&self.options.out)),
            cancel: cancel_rx,
            run_meter: crate::agent::RunMeter::new(self.options.max_tokens, self.options.max_cost_usd),
            gates: Default::default(),
            run_mcp: Default::default(),
            setups: Default::default(),
            run_id: self.run_id.clone(),
            paths: SharedPaths::new(Some(&self.options.out), &self.env),
            stores: Default::default(),
            removals: Default::default(),
        });
        let signal = Arc::new(AtomicI32::new(0));
        let cache = self.plan.cache.as_deref().map(|dir| Arc::new(Cache::new(dir, !self.options.no_cache)));
        let if_no_tasks = NoTasks::resolve(self.options.no_tasks, self.shard.is_some()).exit_code();
        let schedule = runner::Schedule {
            jobs,
            fail_fast: self.options.fail_fast,
            shard: self.shard.clone(),
            interrupted_by: signal.clone(),
            if_no_tasks,
            cache,
            record: self.options.record.clone().map(|record| (record, self.options.out.clone())),
        };
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .max_blocking_threads(BLOCKING_THREADS)
            .enable_all()
            .build()
            .map_err(EngineError::Runtime)?;
        let totals = runtime.block_on(async {
            let watcher = tokio::spawn(signals::watch(cancel_tx, signal.clone(), bus.clone(), notice));
            let totals = runner::run(self.plan, shared, Emitter::run(bus.clone()), schedule).await;
            watcher.abort();
            totals
        });
        Ok((totals, signal.load(Ordering::SeqCst)))
    }

    /// `findings.sarif` (and, under GitHub Actions, `::warning` annotations on stderr) when some
    /// task has `output = "findings"`.
    fn findings(&self) -> Option<crate::report::outputs::SarifReporter> {
        use crate::structured::findings::PathBase;
        let bases: BTreeMap<String, PathBase> = self
            .plan
            .tasks
            .iter()
            .filter(|t| t.output.as_ref().is_some_and(|o| o.findings))
            .map(|t| (t.id.clone(), PathBase::new(&t.workspace.repo, &t.workspace.workdir)))
            .collect();
        if bases.is_empty() {
            return None;
        }
        let reporter =
            crate::report::outputs::SarifReporter::new(&self.options.out, bases, Box::new(std::io::stderr()), self.redactor.clone())
                .with_run_id(&self.run_id);
        Some(reporter.with_annotations(self.env.get("GITHUB_ACTIONS").is_some_and(|v| v == "true")))
    }
}

/// After `--rerun-failed DIR/results.jsonl --out DIR`: DIR's results, JUnit, summary and page
/// cover the whole batch, the earlier run's tasks that were not run again carried over; the
/// added-up record is the run's record, its exit code the process's.
fn add_up_rerun(
    rerun: &RerunSource,
    out: &Path,
    redactor: &Arc<Redactor>,
    cache: Option<&Path>,
    ending: &mut Ending,
    notes: &mut Vec<String>,
) {
    match crate::report::merge::add_up_rerun(&rerun.text, out, redactor.clone(), cache, &mut ending.failures) {
        Ok(summary) => {
            ending.recorded = Some((summary.exit_code, ending.failures.len()));
            notes.push(format!(
                "{} now describes the whole batch: {} task(s), {} carried over from the earlier run",
                out.display(),
                summary.tasks,
                rerun.carried.len()
            ));
        }
        Err(e) => ending.failures.push(format!("cannot add the rerun to the earlier results in {}: {e}", out.display())),
    }
}
