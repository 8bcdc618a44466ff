//! The options of one batch: what a run is planned from. Plain data — the command line
//! (`src/cli/`) fills them from its flags; a test or another program fills them directly.

use crate::manifest::{Isolation, SandboxMode};
use std::path::PathBuf;

/// What a run that selected no task does (`--no-tasks`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
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

/// Where `--record` keeps a run's recordings. Either way each task's recording is written to
/// `<out>/recordings/<task-id>.json` as the run goes (a crash keeps what was recorded), never
/// inside a task's repository while tasks run: no workspace, patch or check sees one.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum RecordTo {
    /// `<out>/recordings/` only (a bare `--record`).
    OutFolder,
    /// That folder too (`--record DIR`): the recordings are copied into it once every task has
    /// ended.
    Folder(PathBuf),
}

impl RecordTo {
    /// The folder the recordings are written to while the run goes, under the output folder.
    pub fn while_running(out: &std::path::Path) -> PathBuf {
        out.join(dracode_results::file_names::RECORDINGS_DIR)
    }

    /// The folder named by `--record DIR`, if any.
    pub fn folder(&self) -> Option<&PathBuf> {
        match self {
            RecordTo::OutFolder => None,
            RecordTo::Folder(dir) => Some(dir),
        }
    }

    /// `--record DIR`: the recordings the tasks wrote under `out`, copied into DIR once every
    /// task has ended (before `run.finished`, which counts what failed); each file that could not
    /// be copied, named with the OS error.
    pub fn copy_out(&self, out: &std::path::Path) -> Vec<String> {
        let Some(dir) = self.folder() else { return Vec::new() };
        let Ok(entries) = std::fs::read_dir(Self::while_running(out)) else { return Vec::new() };
        if let Err(e) = std::fs::create_dir_all(dir) {
            return vec![format!("cannot write the recordings into {}: {e}", dir.display())];
        }
        entries
            .flatten()
            .filter_map(|entry| {
                let to = dir.join(entry.file_name());
                std::fs::copy(entry.path(), &to).err().map(|e| format!("cannot write the recording {}: {e}", to.display()))
            })
            .collect()
    }
}

/// The options of one batch. Each overrides config and manifest (docs/src/reference/cli.md
/// describes each as the `dracode run` flag of the same name).
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Manifest files (TOML, YAML or JSON).
    pub manifests: Vec<PathBuf>,
    /// Ad-hoc task prompts (a path to an existing file is read as the prompt).
    pub tasks: Vec<String>,
    /// The check of the ad-hoc tasks (`--check`), also run before the agent.
    pub adhoc_check: Option<String>,
    /// Globs the ad-hoc tasks may not change (`--protect`).
    pub adhoc_protect: Vec<String>,
    /// Provider name for every task.
    pub provider: Option<String>,
    /// Model for every task.
    pub model: Option<String>,
    /// Config file instead of the dracode.toml found.
    pub config: Option<PathBuf>,
    /// Output folder for artifacts.
    pub out: PathBuf,
    /// Tasks run at once; 0 means the number of CPUs.
    pub jobs: usize,
    /// Task id globs or `tag:NAME`s (any match selects).
    pub filter: Vec<String>,
    /// Only shard K of N (`K/N`, `hash:K/N` or `slice:K/N`).
    pub shard: Option<String>,
    /// Only the tasks that did not pass in this earlier results.jsonl.
    pub rerun_failed: Option<PathBuf>,
    /// Attempts after the first for a task that ends `error`/`timeout`/`stalled`.
    pub retries: Option<u32>,
    /// Independent attempts of every task (as `repeat`).
    pub repeat: Option<u32>,
    /// The share of a repeated task's attempts that must pass for it to pass.
    pub min_pass_rate: Option<f64>,
    /// LLM calls allowed per task.
    pub max_iterations: Option<u32>,
    /// Wall-clock limit per task, as written (`10m`).
    pub timeout: Option<String>,
    /// Workspace isolation.
    pub isolation: Option<Isolation>,
    /// How far task commands are confined.
    pub sandbox: Option<SandboxMode>,
    /// After the first task that does not pass, skip the rest.
    pub fail_fast: bool,
    /// Token budget of the whole run.
    pub max_tokens: Option<u64>,
    /// Cost budget of the whole run, in USD.
    pub max_cost_usd: Option<f64>,
    /// A second JSON-lines stream the caller writes (`--jsonl`): the plan keeps it out of `out`.
    pub jsonl: Option<PathBuf>,
    /// The cache folder of passes to reuse and record.
    pub cache: Option<PathBuf>,
    /// Run every task, even with a cache configured.
    pub no_cache: bool,
    /// Save every provider response as a recording (`--record`): see [`RecordTo`].
    pub record: Option<RecordTo>,
    /// Replay these recordings (a folder of `<task-id>.json`, or one file) for every task.
    pub replay: Option<PathBuf>,
    /// What an empty selection does (`None`: [`NoTasks::resolve`]'s default).
    pub no_tasks: Option<NoTasks>,
}

impl RunOptions {
    /// Tasks at once: `jobs`, or the number of CPUs when it is 0 (as cargo nextest does).
    pub fn jobs(&self) -> usize {
        if self.jobs == 0 { std::thread::available_parallelism().map_or(1, std::num::NonZero::get) } else { self.jobs }
    }
}
