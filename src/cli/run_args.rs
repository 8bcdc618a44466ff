//! `dracode run`'s flags, and the plain [`RunOptions`] they make.

use super::choices::{ISOLATIONS, NO_TASKS, SANDBOX_MODES, choices};
use crate::batch::options::{NoTasks, RecordTo, RunOptions};
use crate::manifest::{Isolation, SandboxMode};
use clap::Args;
use std::path::PathBuf;

/// `dracode run` options. Each overrides config and manifest.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Manifest files (TOML, YAML or JSON).
    pub manifests: Vec<PathBuf>,
    /// An ad-hoc task prompt (a path to an existing file is read as the prompt); repeatable.
    #[arg(long = "task", value_name = "TEXT")]
    pub tasks: Vec<String>,
    /// With --task: the command that grades it (the task passes only if it exits 0), run before
    /// the agent too (`check_before`), in a world built from the task's change.
    #[arg(long, value_name = "COMMAND", requires = "tasks")]
    pub check: Option<String>,
    /// With --task: a glob (relative to the workspace root) of paths the agent may not change;
    /// repeatable.
    #[arg(long, value_name = "GLOB", requires = "tasks")]
    pub protect: Vec<String>,
    /// Provider name for every task.
    #[arg(long)]
    pub provider: Option<String>,
    /// Model for every task.
    #[arg(long)]
    pub model: Option<String>,
    /// Config file instead of the dracode.toml found (see `dracode config --help`).
    #[arg(long, env = "DRACODE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Output folder for artifacts. Not inside a folder a task edits: refused inside the folder
    /// of an isolation = "none" task, and inside a task's repository unless git ignores it.
    #[arg(long, default_value = "dracode-out")]
    pub out: PathBuf,
    /// Tasks run at once; by default (and with 0) the number of CPUs, as cargo nextest does.
    /// Tasks on the same folder with isolation = "none" never overlap.
    #[arg(long, default_value_t = 0, hide_default_value = true)]
    pub jobs: usize,
    /// Task id glob or `tag:NAME`; repeatable (any match selects).
    #[arg(long)]
    pub filter: Vec<String>,
    /// Run only shard K of N (`K/N`, `hash:K/N` or `slice:K/N`); also `DRACODE_SHARD`, or
    /// `JOB_COMPLETION_INDEX` + `DRACODE_SHARD_COUNT`.
    #[arg(long, value_name = "K/N")]
    pub shard: Option<String>,
    /// Run only the tasks that did not pass in an earlier results.jsonl.
    #[arg(long, value_name = "RESULTS_JSONL")]
    pub rerun_failed: Option<PathBuf>,
    /// Attempts after the first for a task that ends `error`/`timeout`/`stalled` (see `retry_on`).
    #[arg(long)]
    pub retries: Option<u32>,
    /// Independent attempts of every task (as `repeat`), each in a fresh workspace; each task
    /// gets a pass rate and a verdict: stable_pass, stable_fail or flaky.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..))]
    pub repeat: Option<u32>,
    /// The share of a repeated task's attempts that must pass for it to pass (0 to 1; default
    /// 1: every attempt).
    #[arg(long, value_name = "RATE")]
    pub min_pass_rate: Option<f64>,
    /// LLM calls allowed per task.
    #[arg(long)]
    pub max_iterations: Option<u32>,
    /// Wall-clock limit per task, e.g. `10m`.
    #[arg(long)]
    pub timeout: Option<String>,
    /// Workspace isolation.
    #[arg(long, value_parser = choices(ISOLATIONS))]
    pub isolation: Option<Isolation>,
    /// How far task commands are confined: workspace-write (default), read-only or off.
    #[arg(long, value_name = "MODE", value_parser = choices(SANDBOX_MODES))]
    pub sandbox: Option<SandboxMode>,
    /// After the first task that does not pass, skip the rest.
    #[arg(long)]
    pub fail_fast: bool,
    /// Token budget of the whole run: calls over it end their task `budget_exceeded`, and no
    /// further task starts.
    #[arg(long)]
    pub max_tokens: Option<u64>,
    /// Cost budget of the whole run, in USD (needs prices for the models used).
    #[arg(long)]
    pub max_cost_usd: Option<f64>,
    /// Also stream events as JSON lines to PATH (`-` = stdout; human output stays on stderr).
    #[arg(long, value_name = "PATH")]
    pub jsonl: Option<PathBuf>,
    /// Resolve and check everything, print the plan, call no LLM; exit 5 when a selected
    /// task's provider is not configured (no key, endpoint or model).
    #[arg(long)]
    pub dry_run: bool,
    /// With --dry-run: skip the provider check (for a machine without the keys).
    #[arg(long, requires = "dry_run")]
    pub offline: bool,
    /// Reuse the recorded pass of a task whose inputs are unchanged (base tree, prompt,
    /// provider and model, tools, policy, check, …) from this folder, and record new passes
    /// there; also `[run] cache` in the config.
    #[arg(long, value_name = "DIR")]
    pub cache: Option<PathBuf>,
    /// Run every task, even with a cache configured (new passes are still recorded).
    #[arg(long)]
    pub no_cache: bool,
    /// Save every provider response as a recording the `replay` provider plays back, one
    /// <task-id>.json per task: in <out>/recordings/, and, with DIR, copied into DIR once every
    /// task has ended (so no task sees a recording). Put a bare --record after the manifests.
    #[arg(long, value_name = "DIR", num_args = 0..=1)]
    pub record: Option<Option<PathBuf>>,
    /// Replay recordings instead of calling a model: a folder of <task-id>.json (as --record
    /// writes them) or one recording file, for every task (as --provider replay with `replay`).
    #[arg(long, value_name = "PATH", conflicts_with = "provider")]
    pub replay: Option<PathBuf>,
    /// What an empty selection (a filter or shard matching no task) does: `fail` exits 4
    /// (the default), `warn` and `pass` exit 0 (`warn` says so on stderr). `--shard` implies
    /// `warn`: an empty shard of a matrix is normal.
    #[arg(long, value_name = "POLICY", value_parser = choices(NO_TASKS))]
    pub no_tasks: Option<NoTasks>,
    /// Also write the GitHub Actions step outputs (exit-code, total, passed, failed, cost-usd,
    /// input-tokens, output-tokens, results, junit, summary, report, out) to FILE; under Actions
    /// (`GITHUB_ACTIONS=true`) `$GITHUB_OUTPUT` is used when this is not given.
    #[arg(long, value_name = "FILE")]
    pub github_output: Option<PathBuf>,
    /// Export OpenTelemetry traces (GenAI conventions) to this OTLP/HTTP endpoint, e.g.
    /// `http://localhost:4318`; also `OTEL_EXPORTER_OTLP_ENDPOINT`.
    #[cfg(feature = "otel")]
    #[arg(long, value_name = "URL")]
    pub otlp_endpoint: Option<String>,
    /// Also export prompts, tool arguments and tool results (masked) in the traces.
    #[cfg(feature = "otel")]
    #[arg(long)]
    pub otel_log_content: bool,
    /// No progress lines at all: only errors and warnings (the exit code and --out tell how it went).
    #[arg(long, short, conflicts_with = "verbose")]
    pub quiet: bool,
    /// Also show every tool call and retry.
    #[arg(long, short)]
    pub verbose: bool,
}

impl RunArgs {
    /// The options of the batch these flags describe (what only the command line uses — the
    /// display, `--dry-run`, GitHub and OpenTelemetry — stays here).
    pub fn options(&self) -> RunOptions {
        RunOptions {
            manifests: self.manifests.clone(),
            tasks: self.tasks.clone(),
            adhoc_check: self.check.clone(),
            adhoc_protect: self.protect.clone(),
            provider: self.provider.clone(),
            model: self.model.clone(),
            config: self.config.clone(),
            out: self.out.clone(),
            jobs: self.jobs,
            filter: self.filter.clone(),
            shard: self.shard.clone(),
            rerun_failed: self.rerun_failed.clone(),
            retries: self.retries,
            repeat: self.repeat,
            min_pass_rate: self.min_pass_rate,
            max_iterations: self.max_iterations,
            timeout: self.timeout.clone(),
            isolation: self.isolation,
            sandbox: self.sandbox,
            fail_fast: self.fail_fast,
            max_tokens: self.max_tokens,
            max_cost_usd: self.max_cost_usd,
            jsonl: self.jsonl.clone(),
            cache: self.cache.clone(),
            no_cache: self.no_cache,
            record: self.record.clone().map(|dir| dir.map_or(RecordTo::OutFolder, RecordTo::Folder)),
            replay: self.replay.clone(),
            no_tasks: self.no_tasks,
        }
    }
}
