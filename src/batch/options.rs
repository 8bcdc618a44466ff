//! The options of one `dracode run` (its flags): what a batch is planned from. Declared with
//! clap's derive so the command line takes them as they are.

use crate::manifest::Isolation;
use clap::{Args, ValueEnum};
use std::path::PathBuf;

/// `--no-tasks`: what a run that selected no task does.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum NoTasks {
    /// Exit 4.
    Fail,
    /// Exit 0 with a warning on stderr.
    Warn,
    /// Exit 0.
    Pass,
}

impl NoTasks {
    /// The policy in force: the flag's, else `warn` for a sharded run, else `fail`.
    pub fn resolve(flag: Option<NoTasks>, sharded: bool) -> NoTasks {
        match flag {
            Some(policy) => policy,
            None if sharded => NoTasks::Warn,
            None => NoTasks::Fail,
        }
    }

    /// The exit code of an empty selection under this policy.
    pub fn exit_code(self) -> i32 {
        match self {
            NoTasks::Fail => dracode_results::exit_codes::NO_TASKS,
            NoTasks::Warn | NoTasks::Pass => dracode_results::exit_codes::OK,
        }
    }
}

/// `--sandbox` values, described for `run --help` in the user's terms.
fn sandbox_modes() -> impl clap::builder::TypedValueParser<Value = crate::manifest::SandboxMode> {
    use clap::builder::{PossibleValue, PossibleValuesParser, TypedValueParser};
    PossibleValuesParser::new([
        PossibleValue::new("workspace-write").help("Commands write only the workspace and the task's TMPDIR (the default)"),
        PossibleValue::new("read-only").help("Commands write only the task's TMPDIR"),
        PossibleValue::new("off").help("No confinement (a warning on stderr and in summary.md)"),
    ])
    .map(|mode| <crate::manifest::SandboxMode as ValueEnum>::from_str(&mode, false).unwrap_or_default())
}

/// `dracode run` options. Each overrides config and manifest.
#[derive(Debug, Clone, Default, Args)]
pub struct RunArgs {
    /// Manifest files (TOML, YAML or JSON).
    pub manifests: Vec<PathBuf>,
    /// An ad-hoc task prompt (a path to an existing file is read as the prompt); repeatable.
    #[arg(long = "task", value_name = "TEXT")]
    pub tasks: Vec<String>,
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
    #[arg(long, value_enum)]
    pub isolation: Option<Isolation>,
    /// How far task commands are confined: workspace-write (default), read-only or off.
    #[arg(long, value_name = "MODE", value_parser = sandbox_modes())]
    pub sandbox: Option<crate::manifest::SandboxMode>,
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
    /// Save every provider response to DIR/<task-id>.json, replayable with the `replay` provider.
    #[arg(long, value_name = "DIR")]
    pub record: Option<PathBuf>,
    /// What an empty selection (a filter or shard matching no task) does: `fail` exits 4
    /// (the default), `warn` and `pass` exit 0 (`warn` says so on stderr). `--shard` implies
    /// `warn`: an empty shard of a matrix is normal.
    #[arg(long, value_enum, value_name = "POLICY")]
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
