//! From command line, config and manifests to the list of tasks to run, every setting
//! resolved. Everything that can be wrong with the input is found here, before anything runs
//! (exit code 2).

use super::shard::Shard;
use crate::cli::RunArgs;
use crate::config::{Config, ConfigError};
use crate::llm::preset::ResolvedProvider;
use crate::llm::prices::PriceTable;
use crate::manifest::{self, Isolation, ManifestErrors, Task, TaskFields};
use globset::Glob;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// LLM calls a task may make when nothing says otherwise (DraCode's default).
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// Time limit of a check command when nothing says otherwise.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);

/// One task, ready to run.
#[derive(Debug, Clone)]
pub struct PlannedTask {
    /// The task (fields merged: config, manifest defaults, task, flags).
    pub task: Task,
    /// Its provider.
    pub provider: ResolvedProvider,
    /// How its workspace is made.
    pub isolation: Isolation,
    /// The folder it works on.
    pub repo: PathBuf,
    /// LLM calls allowed.
    pub max_iterations: u32,
    /// Wall-clock limit.
    pub timeout: Option<Duration>,
    /// Check command limit.
    pub check_timeout: Duration,
    /// No event for this long ends the task as `stalled`.
    pub idle_timeout: Option<Duration>,
    /// Enabled tool names.
    pub tools: Vec<String>,
}

/// Everything a run needs.
#[derive(Debug)]
pub struct Plan {
    /// The manifests, as given.
    pub manifests: Vec<PathBuf>,
    /// The selected tasks, in order.
    pub tasks: Vec<PlannedTask>,
    /// Prices for cost.
    pub prices: PriceTable,
    /// Every API key in use, for redaction.
    pub secrets: Vec<String>,
    /// Settings accepted but without effect in this build, to be shown to the user.
    pub warnings: Vec<String>,
    /// The shard this run is, when sharded.
    pub shard: Option<Shard>,
}

/// Input that cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Config files or environment.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Manifests.
    #[error(transparent)]
    Manifest(#[from] ManifestErrors),
    /// Flags.
    #[error("{0}")]
    Usage(String),
}

/// Loads config and manifests and resolves every task of `args`.
pub fn plan(args: &RunArgs, cwd: &Path, env: &BTreeMap<String, String>) -> Result<Plan, PlanError> {
    if args.manifests.is_empty() && args.tasks.is_empty() {
        return Err(PlanError::Usage("nothing to run: give a manifest file or --task TEXT".into()));
    }
    let config = Config::load(cwd, args.config.as_deref(), env)?;
    let mut tasks: Vec<Task> = manifest::load_all(&args.manifests, &config.defaults)?.into_iter().flat_map(|m| m.tasks).collect();
    for (i, text) in args.tasks.iter().enumerate() {
        tasks.push(adhoc_task(i, text, tasks.len(), cwd, &config.defaults)?);
    }
    let filter = Filter::new(&args.filter)?;
    let shard = match &args.shard {
        Some(text) => Some(Shard::parse(text).map_err(|e| PlanError::Usage(format!("--shard: {e}")))?),
        None => Shard::from_env(env).map_err(PlanError::Usage)?,
    };
    let rerun = match &args.rerun_failed {
        Some(path) => Some(not_passed(path).map_err(PlanError::Usage)?),
        None => None,
    };
    let selected = tasks
        .into_iter()
        .filter(|t| filter.selects(t))
        .filter(|t| rerun.as_ref().is_none_or(|ids| ids.contains(&t.id)))
        .enumerate()
        .filter(|(position, t)| shard.is_none_or(|s| s.selects(&t.id, *position)))
        .map(|(_, t)| t);
    let flags = flag_fields(args);
    let mut planned = Vec::new();
    let mut errors = Vec::new();
    for mut task in selected {
        task.fields = task.fields.clone().overlay(flags.clone());
        match resolve(&config, task, args, cwd, env) {
            Ok(p) => planned.push(p),
            Err(e) => errors.push(e),
        }
    }
    if !errors.is_empty() {
        return Err(PlanError::Usage(errors.join("\n")));
    }
    let secrets = planned.iter().filter_map(|p| p.provider.api_key.clone()).collect();
    let warnings = dirty_warnings(&planned);
    Ok(Plan {
        shard,
        warnings,
        manifests: args.manifests.clone(),
        tasks: planned,
        prices: PriceTable::with_overrides(&config.prices),
        secrets,
    })
}

/// The task fields the command line sets.
fn flag_fields(args: &RunArgs) -> TaskFields {
    TaskFields {
        provider: args.provider.clone(),
        model: args.model.clone(),
        max_iterations: args.max_iterations,
        retries: args.retries,
        timeout: args.timeout.clone(),
        isolation: args.isolation,
        ..TaskFields::default()
    }
}

/// A `--task TEXT` task: the text, or the contents of the file it names.
fn adhoc_task(i: usize, text: &str, index: usize, cwd: &Path, base: &TaskFields) -> Result<Task, PlanError> {
    let path = cwd.join(text);
    let prompt = if text.len() < 4096 && path.is_file() {
        std::fs::read_to_string(&path).map_err(|e| PlanError::Usage(format!("--task {text}: {e}")))?
    } else {
        text.to_string()
    };
    if prompt.trim().is_empty() {
        return Err(PlanError::Usage("--task: the prompt is empty".into()));
    }
    let mut fields = base.clone();
    fields.repo = fields.repo.or_else(|| Some(cwd.to_path_buf()));
    Ok(Task { id: format!("task-{}", i + 1), index, manifest: PathBuf::from("--task"), prompt, fields })
}

/// Fills in the defaults of one task and resolves its provider.
fn resolve(config: &Config, task: Task, args: &RunArgs, cwd: &Path, env: &BTreeMap<String, String>) -> Result<PlannedTask, String> {
    let f = &task.fields;
    let label = format!("{}: task {:?}", task.manifest.display(), task.id);
    let name = config.provider_name(args.provider.as_deref(), f.provider.as_deref());
    let mut provider = config.resolve_provider(name, f.model.as_deref(), env).map_err(|e| format!("{label}: field \"provider\": {e}"))?;
    provider.replay_path = f.replay.clone();
    provider.max_tokens = f.max_output_tokens.or(provider.max_tokens);
    let manifest_dir = task.manifest.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf);
    let repo = f.repo.clone().or(manifest_dir).unwrap_or_else(|| cwd.to_path_buf());
    let duration = |field: &str, value: &Option<String>| -> Result<Option<Duration>, String> {
        value.as_deref().map(|v| crate::duration::parse(v).map_err(|e| format!("{label}: field {field:?}: {e}"))).transpose()
    };
    let timeout = duration("timeout", &f.timeout)?;
    let check_timeout = duration("check_timeout", &f.check_timeout)?.unwrap_or(DEFAULT_CHECK_TIMEOUT);
    let idle_timeout = duration("idle_timeout", &f.idle_timeout)?;
    let tools = f.tools.clone().unwrap_or_else(|| crate::tools::DEFAULT_TOOLS.iter().map(|s| s.to_string()).collect());
    let isolation = f.isolation.unwrap_or_else(|| default_isolation(&repo));
    if isolation == Isolation::Worktree && git2::Repository::open(&repo).is_err() {
        return Err(format!(
            "{label}: field \"isolation\": \"worktree\" needs a git repository, and {} is not one (use \"copy\")",
            repo.display()
        ));
    }
    if f.commit == Some(true) && isolation != Isolation::Worktree {
        return Err(format!("{label}: field \"commit\": needs isolation = \"worktree\" (the branch is made in {})", repo.display()));
    }
    if !repo.is_dir() {
        return Err(format!("{label}: field \"repo\": {} is not a folder", repo.display()));
    }
    Ok(PlannedTask {
        isolation,
        max_iterations: f.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
        repo,
        timeout,
        check_timeout,
        idle_timeout,
        tools,
        provider,
        task,
    })
}

/// Without an explicit `isolation`, tasks never touch the user's folder: a worktree when it is
/// the root of a git repository, else a copy.
fn default_isolation(repo: &Path) -> Isolation {
    match git2::Repository::open(repo) {
        Ok(r) if r.workdir().and_then(|w| w.canonicalize().ok()) == repo.canonicalize().ok() => Isolation::Worktree,
        _ => Isolation::Copy,
    }
}

/// Warnings about the repositories worktrees are made from: uncommitted changes are not
/// carried into a worktree, so say so.
fn dirty_warnings(tasks: &[PlannedTask]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut warnings = Vec::new();
    for p in tasks.iter().filter(|p| p.isolation == Isolation::Worktree) {
        if !seen.insert(p.repo.clone()) {
            continue;
        }
        super::worktree::prune_stale(&p.repo);
        let dirty = super::worktree::dirty_paths(&p.repo);
        if !dirty.is_empty() {
            let shown: Vec<&str> = dirty.iter().take(5).map(String::as_str).collect();
            warnings.push(format!(
                "{} has {} uncommitted change(s) ({}{}); worktrees start from `base` and do not include them — commit them, or use isolation = \"copy\"",
                p.repo.display(),
                dirty.len(),
                shown.join(", "),
                if dirty.len() > shown.len() { ", …" } else { "" }
            ));
        }
    }
    warnings
}

/// The ids of the tasks that did not pass in an earlier run's results.jsonl (`--rerun-failed`).
fn not_passed(path: &Path) -> Result<std::collections::BTreeSet<String>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("--rerun-failed {}: {e}", path.display()))?;
    let mut ids = std::collections::BTreeSet::new();
    for (n, line) in text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let event: serde_json::Value =
            serde_json::from_str(line).map_err(|e| format!("--rerun-failed {}:{}: not a JSON line: {e}", path.display(), n + 1))?;
        if let (true, Some(id)) = (event["type"] == "task.finished" && event["status"] != "passed", event["task_id"].as_str()) {
            ids.insert(id.to_string());
        }
    }
    Ok(ids)
}

/// `--filter`: task id globs and `tag:NAME`; no filter selects everything.
struct Filter {
    globs: Vec<globset::GlobMatcher>,
    tags: Vec<String>,
}

impl Filter {
    fn new(exprs: &[String]) -> Result<Filter, PlanError> {
        let mut filter = Filter { globs: Vec::new(), tags: Vec::new() };
        for expr in exprs {
            match expr.strip_prefix("tag:") {
                Some(tag) => filter.tags.push(tag.to_string()),
                None => {
                    filter.globs.push(Glob::new(expr).map_err(|e| PlanError::Usage(format!("--filter {expr:?}: {e}")))?.compile_matcher())
                }
            }
        }
        Ok(filter)
    }

    fn selects(&self, task: &Task) -> bool {
        if self.globs.is_empty() && self.tags.is_empty() {
            return true;
        }
        let tags = task.fields.tags.as_deref().unwrap_or_default();
        self.globs.iter().any(|g| g.is_match(&task.id)) || self.tags.iter().any(|t| tags.contains(t))
    }
}

/// The tasks `dracode list` shows: manifests loaded, filter applied (providers not resolved).
pub fn list(
    manifests: &[PathBuf],
    filters: &[String],
    shard: Option<&str>,
    cwd: &Path,
    config: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<Vec<Task>, PlanError> {
    let config = Config::load(cwd, config, env)?;
    let filter = Filter::new(filters)?;
    let shard = match shard {
        Some(text) => Some(Shard::parse(text).map_err(|e| PlanError::Usage(format!("--shard: {e}")))?),
        None => Shard::from_env(env).map_err(PlanError::Usage)?,
    };
    Ok(manifest::load_all(manifests, &config.defaults)?
        .into_iter()
        .flat_map(|m| m.tasks)
        .filter(|t| filter.selects(t))
        .enumerate()
        .filter(|(position, t)| shard.is_none_or(|s| s.selects(&t.id, *position)))
        .map(|(_, t)| t)
        .collect())
}
