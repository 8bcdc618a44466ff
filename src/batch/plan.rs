//! From command line, config and manifests to the list of tasks to run, every setting
//! resolved. Everything that can be wrong with the input is found here, before anything runs
//! (exit code 2).

use super::options::RunOptions;
use super::spec::{CheckSpec, RepeatSpec, RequireChange, RetrySpec, TaskSpec, WorkspaceSpec};
use crate::agent::SYSTEM_PROMPT;
use crate::budget::Budget;
use crate::config::{Config, ConfigError};
use crate::events::Status;
use crate::manifest::{self, Isolation, ManifestError, ManifestErrors, Task, TaskFields};
use crate::report::out_dir::OutDirError;
use crate::shard::{Shard, ShardError};
use dracode_llm::prices::PriceTable;
use globset::Glob;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

/// LLM calls a task may make when nothing says otherwise (DraCode's default).
pub const DEFAULT_MAX_ITERATIONS: u32 = 10;
/// Wall-clock limit of a task attempt when nothing says otherwise (docs/src/reference/manifest.md): nothing
/// hangs for an hour.
pub const DEFAULT_TIMEOUT: Duration = Duration::from_secs(30 * 60);
/// Silence (no event, no byte on the model's stream, no output from a command) that ends a task
/// attempt as `stalled` when nothing says otherwise.
pub const DEFAULT_IDLE_TIMEOUT: Duration = Duration::from_secs(5 * 60);
/// Time limit of a check command when nothing says otherwise.
pub const DEFAULT_CHECK_TIMEOUT: Duration = Duration::from_secs(600);
/// Statuses retried when a task sets `retries` but not `retry_on`.
pub const DEFAULT_RETRY_ON: [Status; 3] = [Status::Error, Status::Timeout, Status::Stalled];

/// Everything a run needs.
#[derive(Debug)]
pub struct Plan {
    /// The manifests, as given.
    pub manifests: Vec<PathBuf>,
    /// The selected tasks, in order.
    pub tasks: Vec<TaskSpec>,
    /// Prices for cost.
    pub prices: PriceTable,
    /// Every API key in use, for redaction: `(where it is configured, value)`.
    pub secrets: Vec<(String, String)>,
    /// What the user should know before trusting the results (uncommitted changes left out of
    /// worktrees, commands run unconfined): printed on stderr and in `run.started`/summary.md.
    pub warnings: Vec<String>,
    /// The shard this run is, when sharded.
    pub shard: Option<Shard>,
    /// Which step selected no task (the manifests, `--filter`, `--rerun-failed` or the shard),
    /// in a sentence; `None` when at least one task was selected.
    pub selected_nothing: Option<String>,
    /// The earlier run `--rerun-failed` reads, when given.
    pub rerun: Option<RerunSource>,
    /// The cache folder: `--cache`, else the config's `[run] cache` (relative to the current
    /// folder); `None` without either.
    pub cache: Option<PathBuf>,
    /// The config files read ([`Config::files`]).
    pub config_files: Vec<PathBuf>,
}

/// The earlier run of `--rerun-failed`, as this run needs it.
#[derive(Debug)]
pub struct RerunSource {
    /// Its results.jsonl.
    pub path: PathBuf,
    /// The text of that file, read before this run replaces anything.
    pub text: String,
    /// This run writes into the folder that file is in (`--out` is that folder): the folder
    /// then describes the whole batch, the tasks not run again carried over.
    pub in_place: bool,
    /// The tasks of the earlier run that this run does not run again.
    pub carried: std::collections::BTreeSet<String>,
    /// The earlier run finished and every task of it passed: there is nothing to run again.
    pub all_passed: bool,
}

/// Input that cannot be run.
#[derive(Debug, thiserror::Error)]
pub enum PlanError {
    /// Config files or environment.
    #[error(transparent)]
    Config(#[from] ConfigError),
    /// Manifests, or task settings however they were given.
    #[error(transparent)]
    Manifest(#[from] ManifestErrors),
    /// Flags.
    #[error("{0}")]
    Usage(String),
    /// `--shard` is not a shard.
    #[error("--shard: {0}")]
    ShardFlag(ShardError),
    /// The CI's sharding variables do not make a shard.
    #[error(transparent)]
    ShardVariables(ShardError),
    /// `--rerun-failed` names a file that is not an earlier run's results.
    #[error(transparent)]
    Rerun(#[from] RerunError),
    /// `--out` lies inside the folder a task with `isolation = "none"` edits.
    #[error(
        "--out {} is inside {}, which a task with isolation = \"none\" edits: the agent could rewrite the results; choose an --out outside it",
        out.display(),
        repo.display()
    )]
    OutInsideTask {
        /// The output folder, made absolute.
        out: PathBuf,
        /// The repository the task edits in place.
        repo: PathBuf,
    },
    /// `--out` holds what dracode did not write.
    #[error(transparent)]
    Out(#[from] OutDirError),
}

/// Why `--rerun-failed` could not be read.
#[derive(Debug, thiserror::Error)]
pub enum RerunError {
    /// The file could not be read.
    #[error("--rerun-failed {}: {source}", path.display())]
    Read {
        /// The file.
        path: PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// A line (not a last one cut short by a kill) is not JSON.
    #[error("--rerun-failed {}:{line}: not a JSON line: {source}", path.display())]
    NotJson {
        /// The file.
        path: PathBuf,
        /// 1-based line number.
        line: usize,
        /// The parser's complaint.
        #[source]
        source: serde_json::Error,
    },
}

/// What is wrong with `args` before anything is read: a `--record` folder that is a file (a
/// bare `--record` that took the manifest), nothing to run.
fn usage_errors(args: &RunOptions, cwd: &Path) -> Result<(), PlanError> {
    if let Some(file) = args.record.as_ref().and_then(super::options::RecordTo::folder).filter(|dir| cwd.join(dir).is_file()) {
        let file = file.display();
        return Err(PlanError::Usage(format!(
            "--record {file}: {file} is a file, and --record takes a folder; to record into <out>/recordings, put a bare --record after the manifests"
        )));
    }
    if args.manifests.is_empty() && args.tasks.is_empty() {
        return Err(PlanError::Usage("nothing to run: give a manifest file or --task TEXT".into()));
    }
    Ok(())
}

/// Loads config and manifests and resolves every task of `args`.
pub fn plan(args: &RunOptions, cwd: &Path, env: &BTreeMap<String, String>) -> Result<Plan, PlanError> {
    usage_errors(args, cwd)?;
    let config = Config::load_for(cwd, &args.manifests, args.config.as_deref(), env)?;
    let manifests = manifest::load_all(&args.manifests, &config.defaults)?;
    let reads_issues = manifests.iter().any(|m| m.issues.is_some());
    let (mut tasks, issues_left_out) = manifest::tasks_with_issues(manifests, env)?;
    for (i, text) in args.tasks.iter().enumerate() {
        tasks.push(adhoc_task(i, text, tasks.len(), cwd, &adhoc_defaults(args, &config.defaults))?);
    }
    if let Some(name) = args.provider.as_deref() {
        // A typo in the flag is the flag's, once, not each task's.
        config.resolve_provider(name, args.model.as_deref(), env).map_err(|e| PlanError::Usage(format!("--provider {name}: {e}")))?;
    }
    if let Some(timeout) = args.timeout.as_deref() {
        dracode_input::duration::parse_positive(timeout).map_err(|e| PlanError::Usage(format!("--timeout {timeout}: {e}")))?;
    }
    let filter = Filter::new(&args.filter)?;
    let shard = parse_shard(args.shard.as_deref(), env)?;
    let rerun = match &args.rerun_failed {
        Some(path) => Some(Rerun::read(path)?),
        None => None,
    };
    let mut narrowing = Narrowing::new(tasks.len());
    // A task's shard is decided over every task of the manifests, before any filter: a rerun of
    // a shard's failed tasks stays in that shard.
    let in_this_shard = shard_members(&tasks, shard);
    if tasks.is_empty() && reads_issues {
        narrowing.emptied_by =
            Some(format!("no issue was taken from [issues] ({} left out), and the manifests hold no other task", issues_left_out.len()));
    }
    let tasks: Vec<Task> = tasks.into_iter().filter(|t| filter.selects(t)).collect();
    narrowing.step(tasks.len(), || filter_sentence(&args.filter));
    let tasks: Vec<Task> = tasks.into_iter().filter(|t| rerun.as_ref().is_none_or(|r| r.selects(&t.id))).collect();
    narrowing.step(tasks.len(), || args.rerun_failed.as_ref().map(|p| (format!("--rerun-failed {}", p.display()), String::new())));
    let selected: Vec<Task> = tasks.into_iter().filter(|t| in_this_shard.as_ref().is_none_or(|ids| ids.contains(&t.id))).collect();
    narrowing.step(selected.len(), || shard.map(|s| (format!("shard {s}"), String::new())));
    let flags = flag_fields(args, cwd);
    let mut specs = resolve_all(&config, selected.into_iter(), &flags, flags.provider.as_deref(), cwd, env)?;
    let min_pass_rate = min_pass_rate(args.min_pass_rate)?;
    let mut names: BTreeMap<PathBuf, Option<String>> = BTreeMap::new();
    for spec in &mut specs {
        spec.repeat.min_pass_rate = min_pass_rate;
        spec.manifest_name = names.entry(spec.manifest.clone()).or_insert_with(|| manifest_name(&cwd.join(&spec.manifest))).clone();
    }
    let prices = PriceTable::with_overrides(&config.prices);
    unpriced_cost_caps(&specs, args.max_cost_usd, &prices)?;
    let record = args.record.as_ref().and_then(super::options::RecordTo::folder);
    let also: Vec<PathBuf> = args.jsonl.iter().chain(record).map(|p| cwd.join(p)).collect();
    check_out(&cwd.join(&args.out), &specs, &also)?;
    let rerun = rerun.map(|r| r.source(&specs, &cwd.join(&args.out)));
    let mut warnings: Vec<String> = rerun.as_ref().and_then(|(_, w)| w.clone()).into_iter().collect();
    warnings.extend(issues_left_out);
    let rerun = rerun.map(|(source, _)| source);
    warnings.extend(dirty_warnings(&specs));
    warnings.extend(sandbox_warnings(&specs));
    warnings.extend(allowlist_warnings(&specs));
    warnings.extend(read_grant_warnings(&specs, env));
    Ok(Plan {
        cache: args.cache.clone().or(config.run.cache.clone()).map(|dir| cwd.join(dir)),
        config_files: config.files.clone(),
        rerun,
        shard,
        selected_nothing: narrowing.emptied_by,
        warnings,
        manifests: args.manifests.clone(),
        secrets: specs
            .iter()
            .filter_map(|p| Some((format!("providers.{}.api_key", p.provider.name), p.provider.api_key.clone()?)))
            .chain(specs.iter().flat_map(|p| {
                p.mcp_servers.iter().flat_map(|(name, m)| m.secret_values(env).into_iter().map(move |v| (format!("mcp_servers.{name}"), v)))
            }))
            .collect(),
        tasks: specs,
        prices,
    })
}

/// What `dracode validate` checks: every check `run` makes before it starts a task, on every
/// task of `manifests` (an `[issues]` table is checked, its issues are not read). Returns the
/// resolved tasks, and how many manifests take more tasks from issues.
pub fn validate(
    manifests: &[PathBuf],
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<(Vec<TaskSpec>, usize), PlanError> {
    let config = Config::load_for(cwd, manifests, config, env)?;
    // One pass: the tasks that type and check are resolved too (an unknown provider, agent, …),
    // so their errors come with the manifests' own.
    let (loaded, mut errors) = manifest::load_all_partial(manifests, &config.defaults);
    let with_issues = loaded.iter().filter(|m| m.issues.is_some()).count();
    let tasks = loaded.into_iter().flat_map(|m| m.tasks);
    let specs = match resolve_all(&config, tasks, &TaskFields::default(), None, cwd, env) {
        Ok(specs) => specs,
        Err(PlanError::Manifest(ManifestErrors(found))) => {
            errors.extend(found);
            Vec::new()
        }
        Err(other) => return Err(other),
    };
    if !errors.is_empty() {
        return Err(ManifestErrors(errors).into());
    }
    unpriced_cost_caps(&specs, None, &PriceTable::with_overrides(&config.prices))?;
    Ok((specs, with_issues))
}

/// A cost cap (the task's `max_cost_usd`, or the run's `--max-cost-usd`) on a model without a
/// price could never be enforced: refused up front, naming each task and its model.
fn unpriced_cost_caps(specs: &[TaskSpec], run_cap: Option<f64>, prices: &PriceTable) -> Result<(), PlanError> {
    let unpriced = |spec: &&TaskSpec| prices.price(spec.provider.model.as_deref().unwrap_or_default()).is_none();
    let model = |spec: &TaskSpec| spec.provider.model.clone().unwrap_or_else(|| format!("(no model; provider {})", spec.provider.name));
    let hint = "add its price under [prices.\"MODEL\"] in the config, or drop the cap";
    let errors: Vec<ManifestError> = specs
        .iter()
        .filter(|s| s.budget.max_cost_usd.is_some())
        .filter(unpriced)
        .map(|s| ManifestError {
            file: s.manifest.clone(),
            position: s.line.map(|line| (line, 1)),
            task: Some(s.id.clone()),
            field: Some("max_cost_usd".into()),
            message: format!("field \"max_cost_usd\": model {} has no price, so the cap cannot be kept ({hint})", model(s)),
        })
        .collect();
    if !errors.is_empty() {
        return Err(ManifestErrors(errors).into());
    }
    let Some(cap) = run_cap else { return Ok(()) };
    let named: Vec<String> = specs.iter().filter(unpriced).map(|s| format!("{} ({})", s.id, model(s))).collect();
    if named.is_empty() {
        return Ok(());
    }
    Err(PlanError::Usage(format!(
        "--max-cost-usd {cap}: task(s) {} use a model without a price, so the cap cannot be kept ({hint})",
        named.join(", ")
    )))
}

/// The pre-flight of `validate` and `run --dry-run`: every task whose provider could not send
/// a request (no key, no endpoint, no model, no readable recording) or whose agent is not installed,
/// by file, line and task — the check
/// `run` makes before a task's first call, so a task listed here would end `not_configured`.
/// Nothing is sent.
pub fn preflight(tasks: &[TaskSpec]) -> Vec<ManifestError> {
    let path = dracode_input::process_env().get("PATH").cloned();
    tasks
        .iter()
        .filter_map(|task| {
            let binding = dracode_llm::preset::TaskBinding { task_id: task.id.clone() };
            let provider = dracode_llm::registry::preflight(&task.provider, &binding).map(|why| ("provider", why));
            let agent = || task.agent.as_ref()?.resolve(path.as_deref()).err().map(|why| ("agent", why.0));
            let (field, why) = provider.or_else(agent)?;
            Some(ManifestError {
                file: task.manifest.clone(),
                position: task.line.map(|line| (line, 1)),
                task: Some(task.id.clone()),
                field: Some(field.into()),
                message: format!("not configured: {why}"),
            })
        })
        .collect()
}

/// Resolves `tasks` with `flags` on top, reporting the problems of every task at once.
fn resolve_all(
    config: &Config,
    tasks: impl Iterator<Item = Task>,
    flags: &TaskFields,
    cli_provider: Option<&str>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<Vec<TaskSpec>, PlanError> {
    let mut specs = Vec::new();
    let mut errors = Vec::new();
    for mut task in tasks {
        task.fields = task.fields.clone().overlay(flags.clone());
        match resolve(config, task, cli_provider, cwd, env) {
            Ok(spec) => specs.push(spec),
            Err(found) => errors.extend(found),
        }
    }
    if errors.is_empty() { Ok(specs) } else { Err(ManifestErrors(errors).into()) }
}

/// `--shard K/N`, else the CI's own sharding variables.
fn parse_shard(flag: Option<&str>, env: &BTreeMap<String, String>) -> Result<Option<Shard>, PlanError> {
    match flag {
        Some(text) => Ok(Some(Shard::parse(text).map_err(PlanError::ShardFlag)?)),
        None => Shard::from_env(env).map_err(PlanError::ShardVariables),
    }
}

/// `--min-pass-rate`: a share from 0 to 1 (default 1: every attempt of a repeated task passes).
fn min_pass_rate(flag: Option<f64>) -> Result<f64, PlanError> {
    match flag {
        None => Ok(RepeatSpec::default().min_pass_rate),
        Some(rate) if (0.0..=1.0).contains(&rate) => Ok(rate),
        Some(rate) => Err(PlanError::Usage(format!("--min-pass-rate {rate}: a share from 0 to 1, e.g. 0.8"))),
    }
}

/// The task fields the command line sets.
fn flag_fields(args: &RunOptions, cwd: &Path) -> TaskFields {
    TaskFields {
        provider: args.provider.clone().or_else(|| args.replay.as_ref().map(|_| "replay".to_string())),
        replay: args.replay.as_ref().map(|path| cwd.join(path)),
        model: args.model.clone(),
        max_iterations: args.max_iterations,
        retries: args.retries,
        repeat: args.repeat,
        timeout: args.timeout.clone(),
        isolation: args.isolation,
        sandbox: args.sandbox,
        ..TaskFields::default()
    }
}

/// The ids of the tasks of `shard` among every task of the manifests (`None` without a shard):
/// the manifests' own balanced across the shards; those made from issues — which each shard
/// job reads at its own moment, so the jobs' lists may differ — by their ids alone.
fn shard_members(tasks: &[Task], shard: Option<Shard>) -> Option<std::collections::HashSet<String>> {
    let shard = shard?;
    let ids: Vec<&str> = tasks.iter().filter(|t| t.issue.is_none()).map(|t| t.id.as_str()).collect();
    let mut picked = shard.selects(&ids).into_iter();
    let members = tasks
        .iter()
        .filter(|t| match t.issue {
            Some(_) => shard.selects_alone(&t.id),
            None => picked.next().unwrap_or(false),
        })
        .map(|t| t.id.clone())
        .collect();
    Some(members)
}

/// What the ad-hoc tasks inherit: the config's defaults, then `--check` (run before the agent
/// too: a task whose check already passes proves nothing) and `--protect`.
fn adhoc_defaults(args: &RunOptions, base: &TaskFields) -> TaskFields {
    let flags = TaskFields {
        check: args.adhoc_check.clone(),
        check_before: args.adhoc_check.as_ref().map(|_| true),
        protect: (!args.adhoc_protect.is_empty()).then(|| args.adhoc_protect.clone()),
        ..TaskFields::default()
    };
    base.clone().overlay(flags)
}

/// A `--task TEXT` task: the text, or the contents of the file it names.
fn adhoc_task(i: usize, text: &str, index: usize, cwd: &Path, base: &TaskFields) -> Result<Task, PlanError> {
    let path = cwd.join(text);
    let prompt = if text.len() < 4096 && path.is_file() {
        dracode_input::read_input(&path).map_err(|e| PlanError::Usage(format!("--task: {e}")))?
    } else {
        text.to_string()
    };
    if prompt.trim().is_empty() {
        return Err(PlanError::Usage("--task: the prompt is empty".into()));
    }
    let mut fields = base.clone();
    fields.repo = fields.repo.or_else(|| Some(cwd.to_path_buf()));
    Ok(Task {
        id: format!("task-{}", i + 1),
        index,
        manifest: PathBuf::from("--task"),
        line: None,
        prompt,
        fields,
        setup: None,
        issue: None,
    })
}

/// The problems found in one task, each located at the task.
struct Problems<'a> {
    task: &'a Task,
    errors: Vec<ManifestError>,
}

impl Problems<'_> {
    fn push(&mut self, field: &str, message: impl std::fmt::Display) {
        self.errors.push(ManifestError {
            file: self.task.manifest.clone(),
            position: self.task.line.map(|line| (line, 1)),
            task: Some(self.task.id.clone()),
            field: Some(field.to_string()),
            message: format!("field {field:?}: {message}"),
        });
    }

    /// The duration in `field`, if set and valid.
    fn duration(&mut self, field: &str, value: Option<&str>) -> Option<Duration> {
        dracode_input::duration::parse_positive(value?).map_err(|e| self.push(field, e)).ok()
    }
}

/// Fills in every default of one task, resolves its provider and checks what only the whole
/// picture can (the repository, isolation, commit).
fn resolve(
    config: &Config,
    task: Task,
    cli_provider: Option<&str>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<TaskSpec, Vec<ManifestError>> {
    let mut problems = Problems { task: &task, errors: Vec::new() };
    let f = &task.fields;
    let name = config.provider_name(cli_provider, f.provider.as_deref());
    let provider = config.resolve_provider(name, f.model.as_deref(), env).map_err(|e| problems.push("provider", e)).ok();
    let timeout = problems.duration("timeout", f.timeout.as_deref()).unwrap_or(DEFAULT_TIMEOUT);
    let idle_timeout = problems.duration("idle_timeout", f.idle_timeout.as_deref()).unwrap_or(DEFAULT_IDLE_TIMEOUT);
    let check_timeout = problems.duration("check_timeout", f.check_timeout.as_deref()).unwrap_or(DEFAULT_CHECK_TIMEOUT);
    let workspace = resolve_workspace(&mut problems, cwd);
    let output =
        crate::structured::OutputContract::from_fields(&f.output_fields()).map_err(|(field, e)| problems.push(field, e)).ok().flatten();
    let network = dracode_sandbox::egress::Network::from_field(f.network.as_ref()).map_err(|errors| {
        for (path, message) in errors {
            problems.push("network", format!("{path}: {message}"));
        }
    });
    let policy = resolve_policy(&mut problems, network.as_ref().is_ok_and(dracode_sandbox::egress::Network::is_on));
    let limits = resolve_limits(&mut problems);
    let agent = resolve_agent(config, &mut problems);
    check_read_paths(&mut problems);
    check_plain_fields(&mut problems);
    let (Some(mut provider), Some(workspace), Ok(network), true) = (provider, workspace, network, problems.errors.is_empty()) else {
        return Err(problems.errors);
    };
    provider.replay_path = f.replay.clone();
    provider.max_tokens = f.max_output_tokens.or(provider.max_tokens);
    provider.reasoning = f.reasoning.or(provider.reasoning);
    let system_prompt = system_prompt(f, timeout, output.is_some());
    let context_window = context_window(config, &provider);
    let cache_fields = f.cache_text();
    let f = task.fields;
    let tools = f.tools.unwrap_or_else(|| crate::tools::default_tools(provider.kind, provider.model.as_deref()));
    let require_change = RequireChange::resolve(f.require_change, f.check.is_some(), output.is_some(), f.sandbox.unwrap_or_default());
    Ok(TaskSpec {
        line: task.line,
        system_prompt,
        agents_md: f.agents_md != Some(false),
        provider,
        agent,
        workspace,
        max_iterations: f.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
        timeout: Some(timeout),
        idle_timeout: Some(idle_timeout),
        check: f.check.map(|command| CheckSpec::new(command, f.check_before, check_timeout, f.check_repairs)),
        retry: RetrySpec { retries: f.retries.unwrap_or(0), retry_on: f.retry_on.unwrap_or_else(|| DEFAULT_RETRY_ON.to_vec()) },
        repeat: RepeatSpec { count: f.repeat.unwrap_or(1), ..RepeatSpec::default() },
        budget: Budget { max_tokens: f.max_tokens, max_cost_usd: f.max_cost_usd },
        context_window,
        max_context_tokens: f.max_context_tokens,
        compact_at: f.compact_at.unwrap_or(crate::context::DEFAULT_COMPACT_AT),
        tools,
        policy: std::sync::Arc::new(policy),
        answers: f.answers.unwrap_or_default(),
        require_change,
        protect: f.protect.unwrap_or_default(),
        keep_ignored: f.keep_ignored.unwrap_or_default(),
        commit: f.commit == Some(true),
        isolate_home: f.isolate_home == Some(true),
        sandbox: f.sandbox.unwrap_or_default(),
        network,
        limits,
        env: f.env.unwrap_or_default(),
        env_passthrough: f.env_passthrough.unwrap_or_default(),
        unix_sockets: f.unix_sockets.unwrap_or_default().into_iter().map(|p| cwd.join(p)).collect(),
        read_paths: f.read_paths.unwrap_or_default().iter().map(|p| absolute(&cwd.join(p))).collect(),
        output,
        mcp_servers: f.mcp_servers.unwrap_or_default(),
        setup: task.setup.as_deref().map(super::spec::SetupSpec::resolve),
        cache_fields,
        id: task.id,
        index: task.index,
        manifest: task.manifest,
        manifest_name: None,
        tags: f.tags.unwrap_or_default(),
        issue: task.issue,
        prompt: task.prompt,
    })
}

/// The task's external agent (`agent`), `None` for dracode's own: a command-line agent
/// dracode knows, or an `[agents.NAME]` table of an ACP agent.
fn resolve_agent(config: &Config, problems: &mut Problems<'_>) -> Option<crate::external::ExternalAgent> {
    use crate::external::{ExternalAgent, How, launch::AgentKind};
    let name = problems.task.fields.agent.as_deref().filter(|name| *name != "dracode")?;
    let table = config.agents.get(name);
    let how = match (AgentKind::parse(name), table) {
        (Some(_), Some(table)) if table.protocol.is_some() => {
            problems.push(
                "agent",
                format!("[agents.{name}] sets `protocol`: {name} is run by its own command line; give the ACP agent another name"),
            );
            return None;
        }
        (Some(kind), table) => How::Cli { kind, command: table.and_then(|t| t.command.clone()) },
        (None, Some(table)) if table.protocol.is_some() => How::Acp(acp_agent(name, table).map_err(|e| problems.push("agent", e)).ok()?),
        (None, _) => {
            let known: Vec<&str> = std::iter::once("dracode").chain(AgentKind::ALL.map(AgentKind::as_str)).collect();
            problems.push(
                "agent",
                format!("unknown agent {name:?}; the agents are {}, or an [agents.NAME] table with protocol = \"acp\"", known.join(", ")),
            );
            return None;
        }
    };
    if let How::Cli { command: Some(words), .. } = &how
        && words.is_empty()
    {
        problems.push("agent", format!("[agents.{name}] command is empty"));
    }
    Some(ExternalAgent { name: name.to_string(), how })
}

/// The ACP agent an `[agents.NAME]` table with `protocol` describes, or what is wrong with it.
fn acp_agent(name: &str, table: &crate::config::AgentSettings) -> Result<crate::external::AcpAgent, String> {
    if table.protocol.as_deref() != Some("acp") {
        return Err(format!("[agents.{name}] protocol {:?}: the one protocol is \"acp\"", table.protocol.as_deref().unwrap_or_default()));
    }
    let command = table.command.clone().filter(|c| !c.is_empty()).ok_or_else(|| format!("[agents.{name}] needs a `command`"))?;
    let formats: Vec<&str> = dracode_gateway::Format::ALL.iter().map(|f| f.as_str()).collect();
    let format = table.endpoint.as_deref().and_then(dracode_gateway::Format::parse).ok_or_else(|| {
        format!(
            "[agents.{name}] endpoint {:?}: say which wire format the agent speaks: {}",
            table.endpoint.as_deref().unwrap_or_default(),
            formats.join(", ")
        )
    })?;
    let files = table.files.iter().map(|(path, text)| (PathBuf::from(path), text.clone())).collect();
    Ok(crate::external::AcpAgent { command, format, env: table.env.clone(), files })
}

/// The provider's configured `context_window`, else the model table's.
fn context_window(config: &Config, provider: &dracode_llm::preset::ResolvedProvider) -> Option<u64> {
    let model_window = provider.model.as_ref().and_then(|m| config.models.get(m)).and_then(|m| m.context_window);
    config.providers.get(&provider.name).and_then(|p| p.context_window).or(model_window)
}

/// The system prompt as planned: dracode's own, the task's limits, how the work is graded
/// (unless `tell_check` and `tell_protect` say not to), the task's own text (`system_prompt`),
/// and the structured answer's instructions when it has a schema.
fn system_prompt(f: &TaskFields, timeout: Duration, structured: bool) -> String {
    let limits = crate::deadline::Limits {
        max_iterations: f.max_iterations.unwrap_or(DEFAULT_MAX_ITERATIONS),
        timeout: Some(timeout),
        budget: Budget { max_tokens: f.max_tokens, max_cost_usd: f.max_cost_usd },
    };
    let mut prompt = format!("{SYSTEM_PROMPT}\n\n{}", crate::deadline::system_paragraph(&limits));
    let protect = f.protect.as_deref().filter(|_| f.tell_protect != Some(false)).unwrap_or_default();
    let grading = crate::instructions::Grading {
        check: f.check.as_deref().filter(|_| f.tell_check != Some(false)),
        repairs: f.check_repairs.unwrap_or(super::spec::DEFAULT_CHECK_REPAIRS),
        protect,
    };
    if let Some(told) = crate::instructions::grading_paragraph(&grading) {
        prompt = format!("{prompt}\n\n{told}");
    }
    if let Some(extra) = &f.system_prompt {
        prompt = format!("{prompt}\n\n{extra}");
    }
    if structured {
        prompt = format!("{prompt}\n\n{}", crate::structured::SYSTEM_PROMPT_ADDITION);
    }
    prompt
}

/// The task's tool policy, compiled; `web_fetch` needs a network (`true` or an allowlist) and
/// allowed hosts.
fn resolve_policy(problems: &mut Problems<'_>, network_on: bool) -> crate::tools::policy::Policy {
    use crate::tools::{policy::Policy, web_fetch};
    let task = problems.task;
    let f = &task.fields;
    let policy = Policy::compile(&f.policy.clone().unwrap_or_default()).unwrap_or_else(|errors| {
        for (key, message) in errors {
            problems.push("policy", format!("{key}: {message}"));
        }
        Policy::default()
    });
    if f.tools.as_ref().is_some_and(|tools| tools.iter().any(|t| t == web_fetch::NAME)) {
        if !network_on {
            problems.push("tools", format!("{} needs network = true or a list of hosts", web_fetch::NAME));
        } else if policy.allowed_hosts(web_fetch::NAME).is_empty() {
            problems.push("tools", format!("{0} needs policy.{0}.allowed_hosts, the hosts it may fetch from", web_fetch::NAME));
        }
    }
    policy
}

/// The task's resource limits over the defaults (see [`dracode_sandbox::Limits::defaults`]).
fn resolve_limits(problems: &mut Problems<'_>) -> dracode_sandbox::Limits {
    let defaults = dracode_sandbox::Limits::defaults();
    let fields = problems.task.fields.limits.clone().unwrap_or_default();
    fields.resolve(&defaults).unwrap_or_else(|errors| {
        for (limit, message) in errors {
            problems.push("limits", format!("{limit}: {message}"));
        }
        defaults
    })
}

/// The fields checked on their own: a `check` command that is not blank, a `repeat` of at
/// least one, `protect` and `keep_ignored` globs that compile.
fn check_plain_fields(problems: &mut Problems<'_>) {
    let f = &problems.task.fields;
    if f.check.as_deref().is_some_and(|c| c.trim().is_empty()) {
        problems.push("check", "the command is empty");
    }
    if f.repeat == Some(0) {
        problems.push("repeat", "must be at least 1 (one attempt)");
    }
    for (field, globs) in [("protect", &f.protect), ("keep_ignored", &f.keep_ignored)] {
        if let Some(globs) = globs
            && let Err(e) = dracode_sandbox::Protect::compile(Path::new("/"), globs)
        {
            problems.push(field, e);
        }
    }
}

/// Each of `read_paths` must exist (a path that does not is a typo, not a grant to rely on).
fn check_read_paths(problems: &mut Problems<'_>) {
    for path in problems.task.fields.read_paths.iter().flatten() {
        if path.as_os_str().is_empty() {
            problems.push("read_paths", "an empty path");
        } else if !path.exists() {
            problems.push("read_paths", format!("{} does not exist", path.display()));
        }
    }
}

/// The task's workspace settings: the repo must exist, worktrees need a git repository, and
/// only worktrees can commit.
fn resolve_workspace(problems: &mut Problems<'_>, cwd: &Path) -> Option<WorkspaceSpec> {
    let task = problems.task;
    let f = &task.fields;
    let manifest_dir = task.manifest.parent().filter(|p| !p.as_os_str().is_empty()).map(Path::to_path_buf);
    let repo = f.repo.clone().or(manifest_dir).unwrap_or_else(|| cwd.to_path_buf());
    let shown = dracode_input::lexical(&repo);
    if !repo.is_dir() {
        problems.push("repo", format!("{} is not a folder", shown.display()));
        return None;
    }
    let isolation = f.isolation.unwrap_or_else(|| default_isolation(&repo));
    if isolation == Isolation::Worktree && git2::Repository::open(&repo).is_err() {
        problems.push("isolation", format!("\"worktree\" needs a git repository, and {} is not one (use \"copy\")", shown.display()));
    }
    if f.commit == Some(true) && isolation != Isolation::Worktree {
        problems.push("commit", format!("needs isolation = \"worktree\" (the branch is made in {})", shown.display()));
    }
    let base = f.base.clone().unwrap_or_else(|| "HEAD".into());
    Some(WorkspaceSpec { repo, isolation, base, workdir: f.workdir.clone().unwrap_or_default() })
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
fn dirty_warnings(tasks: &[TaskSpec]) -> Vec<String> {
    let mut seen = std::collections::BTreeSet::new();
    let mut warnings = Vec::new();
    for ws in tasks.iter().map(|t| &t.workspace).filter(|ws| ws.isolation == Isolation::Worktree) {
        if !seen.insert(ws.repo.clone()) {
            continue;
        }
        super::worktree::prune_stale(&ws.repo);
        let dirty = super::worktree::dirty_paths(&ws.repo);
        if !dirty.is_empty() {
            let shown: Vec<&str> = dirty.iter().take(5).map(String::as_str).collect();
            warnings.push(format!(
                "{} has {} uncommitted change(s) ({}{}); worktrees start from `base` and do not include them — commit them, or use isolation = \"copy\"",
                ws.repo.display(),
                dirty.len(),
                shown.join(", "),
                if dirty.len() > shown.len() { ", …" } else { "" }
            ));
        }
    }
    warnings
}

/// A warning when some tasks' commands run unconfined (`sandbox = "off"`).
fn sandbox_warnings(tasks: &[TaskSpec]) -> Option<String> {
    let off = tasks.iter().filter(|t| t.sandbox == dracode_sandbox::SandboxMode::Off).count();
    (off > 0).then(|| format!("commands of {off} task(s) ran unconfined (sandbox = \"off\")"))
}

/// What the confined tasks' read allowlists make readable through PATH that the user should
/// know ([`dracode_sandbox::ReadSet::warnings`]), each once.
fn read_grant_warnings(tasks: &[TaskSpec], env: &BTreeMap<String, String>) -> Vec<String> {
    let runner_temp = env.get("RUNNER_TEMP").filter(|v| !v.is_empty()).map(PathBuf::from);
    let (mut warnings, mut seen): (Vec<String>, Vec<BTreeMap<String, String>>) = (Vec::new(), Vec::new());
    for spec in tasks.iter().filter(|t| t.sandbox != dracode_sandbox::SandboxMode::Off) {
        let allowed = dracode_secrets::child_env(env.iter().map(|(k, v)| (k.clone(), v.clone())), &spec.env_passthrough, &spec.env);
        if seen.contains(&allowed) {
            continue;
        }
        seen.push(allowed.clone());
        for warning in dracode_sandbox::ReadSet::resolve(&allowed, runner_temp.as_deref()).warnings {
            if !warnings.contains(&warning) {
                warnings.push(warning);
            }
        }
    }
    warnings
}

/// A warning when tasks with an egress allowlist run unconfined: their commands get the proxy
/// variables, but nothing stops a direct connection.
fn allowlist_warnings(tasks: &[TaskSpec]) -> Option<String> {
    let advisory = tasks.iter().filter(|t| t.sandbox == dracode_sandbox::SandboxMode::Off && t.network.allowlist().is_some()).count();
    (advisory > 0).then(|| {
        format!("the network allowlist of {advisory} task(s) is only advisory: with sandbox = \"off\" nothing stops a direct connection")
    })
}

/// `--out` must stay out of what the tasks edit: inside the folder of a task with
/// `isolation = "none"` the agent could rewrite `results.jsonl` (refused outright). Elsewhere,
/// even inside a repository a task works on, it is fine: dracode marks the folder ignored by git
/// itself ([`crate::report::out_dir`]), and refuses a folder holding files it did not write.
///
/// `also` are the paths of `--jsonl` and `--record`: when one lies directly in `--out`, it is
/// the user's and allowed there.
fn check_out(out: &Path, tasks: &[TaskSpec], also: &[PathBuf]) -> Result<(), PlanError> {
    let out = absolute(out);
    let mut seen = std::collections::BTreeSet::new();
    for ws in tasks.iter().map(|t| &t.workspace) {
        if !seen.insert((ws.repo.clone(), ws.isolation == Isolation::None)) {
            continue;
        }
        let repo = absolute(&ws.repo);
        if !out.starts_with(&repo) {
            continue;
        }
        if ws.isolation == Isolation::None {
            return Err(PlanError::OutInsideTask { out, repo });
        }
    }
    let also: Vec<String> = also
        .iter()
        .map(|p| absolute(p))
        .filter(|p| p.parent() == Some(out.as_path()))
        .filter_map(|p| p.file_name().map(|n| n.to_string_lossy().into_owned()))
        .collect();
    Ok(crate::report::out_dir::check(&out, &also)?)
}

/// `path` made absolute and free of symlinks as far as it exists (the rest appended as given).
/// The manifest's stable name: the name of the git repository holding it (its hosted
/// `origin`'s `OWNER/NAME`, else its working tree's folder name) and its path there,
/// `dtolnay/itoa/ci/nightly.toml` — the same from any folder and in any clone; outside a
/// repository, its folder's name and its file name. `None` when `path`
/// is not a file (an ad-hoc `--task`).
fn manifest_name(path: &Path) -> Option<String> {
    let path = path.canonicalize().ok().filter(|p| p.is_file())?;
    let parent = path.parent()?;
    let file = path.file_name()?.to_string_lossy().into_owned();
    if let Ok(repo) = git2::Repository::discover(parent) {
        let root = repo.workdir().and_then(|w| w.canonicalize().ok());
        if let Some((root, inside)) = root.as_ref().and_then(|r| Some((r, path.strip_prefix(r).ok()?))) {
            let origin = repo.find_remote("origin").ok().and_then(|r| r.url().ok().map(str::to_string));
            let name = origin.as_deref().and_then(slug_of).or_else(|| Some(root.file_name()?.to_string_lossy().into_owned()))?;
            let parts: Vec<String> = inside.components().map(|c| c.as_os_str().to_string_lossy().into_owned()).collect();
            return Some(format!("{name}/{}", parts.join("/")));
        }
    }
    Some(format!("{}/{file}", parent.file_name()?.to_string_lossy()))
}

/// The repository's `OWNER/NAME` in a hosted remote's URL (`https://github.com/dtolnay/itoa.git`,
/// `git@github.com:dtolnay/itoa.git` → `dtolnay/itoa`); `None` for a local path (a clone of a
/// folder names that folder, not the project: the working tree's own name says more).
fn slug_of(url: &str) -> Option<String> {
    let url = url.trim().trim_end_matches('/');
    let path = match url.split_once("://") {
        Some(("file", _)) => return None,
        Some((_, rest)) => rest.split_once('/')?.1,
        // scp-like `user@host:path`, never a local path (which has no `@…:` before a slash).
        None => url.split_once(':').filter(|(host, _)| host.contains('@') && !host.contains('/'))?.1,
    };
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let [.., owner, name] = parts.as_slice() else { return None };
    let name = name.strip_suffix(".git").unwrap_or(name);
    (!name.is_empty() && !owner.is_empty()).then(|| format!("{owner}/{name}"))
}

fn absolute(path: &Path) -> PathBuf {
    let mut rest = Vec::new();
    let mut existing = path;
    loop {
        if let Ok(real) = existing.canonicalize() {
            return rest.iter().rev().fold(real, |acc: PathBuf, part| acc.join(part));
        }
        match (existing.parent(), existing.file_name()) {
            (Some(parent), Some(name)) => {
                rest.push(name.to_os_string());
                existing = parent;
            }
            _ => return path.to_path_buf(),
        }
    }
}

/// What `--rerun-failed` selects from an earlier run's results.jsonl.
struct Rerun {
    /// The run ended (`run.finished`): only the tasks whose `task.finished` is not `passed` run
    /// again. A run that never ended (killed, or an empty file): every task but those that passed,
    /// since a task with no `task.finished` did not pass.
    finished: bool,
    /// Tasks by their last `task.finished`: passed or not.
    passed: std::collections::BTreeMap<String, bool>,
    /// Said to the user when the file is unfinished.
    warning: Option<String>,
    /// The file and its text.
    path: PathBuf,
    text: String,
}

impl Rerun {
    /// Reads `path`. A last line cut short by a kill is ignored when the run never finished.
    fn read(path: &Path) -> Result<Rerun, RerunError> {
        let text = std::fs::read_to_string(path).map_err(|source| RerunError::Read { path: path.to_path_buf(), source })?;
        let lines: Vec<(usize, &str)> = text.lines().enumerate().filter(|(_, l)| !l.trim().is_empty()).collect();
        let mut rerun = Rerun { finished: false, passed: Default::default(), warning: None, path: path.to_path_buf(), text: String::new() };
        for (i, (n, line)) in lines.iter().enumerate() {
            let event: serde_json::Value = match serde_json::from_str(line) {
                Ok(event) => event,
                Err(_) if i + 1 == lines.len() && !rerun.finished => break,
                Err(source) => return Err(RerunError::NotJson { path: path.to_path_buf(), line: n + 1, source }),
            };
            rerun.finished |= event["type"] == "run.finished";
            if let (true, Some(id)) = (event["type"] == "task.finished", event["task_id"].as_str()) {
                rerun.passed.insert(id.to_string(), event["status"] == "passed");
            }
        }
        if !rerun.finished {
            rerun.warning = Some(format!(
                "--rerun-failed {}: that run never finished (no run.finished: killed, or an empty file); every task that did not pass there runs again",
                path.display()
            ));
        }
        rerun.text = text;
        Ok(rerun)
    }

    /// What the run keeps of this file, given the tasks it runs and its `--out`; and the
    /// warning to give.
    fn source(self, specs: &[TaskSpec], out: &Path) -> (RerunSource, Option<String>) {
        let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| b.canonicalize().is_ok_and(|b| a == b));
        let folder = self.path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        let carried = self.passed.keys().filter(|id| !specs.iter().any(|s| &s.id == *id)).cloned().collect();
        let source = RerunSource {
            in_place: same(folder, out),
            all_passed: self.finished && self.passed.values().all(|p| *p),
            carried,
            path: self.path,
            text: self.text,
        };
        (source, self.warning)
    }

    /// Whether task `id` runs again.
    fn selects(&self, id: &str) -> bool {
        match self.passed.get(id) {
            Some(passed) => !passed,
            None => !self.finished,
        }
    }
}

/// Follows the selection through its steps, to name the one that left no task.
struct Narrowing {
    before: usize,
    emptied_by: Option<String>,
}

impl Narrowing {
    /// `total` tasks in the manifests; none at all is already an empty selection.
    fn new(total: usize) -> Narrowing {
        let emptied_by = (total == 0).then(|| "the manifests hold no task".to_string());
        Narrowing { before: total, emptied_by }
    }

    /// A step left `after` of the tasks before it; `step` names it (`None`: the step was off)
    /// and may add a hint.
    fn step(&mut self, after: usize, step: impl FnOnce() -> Option<(String, String)>) {
        if self.emptied_by.is_none()
            && after == 0
            && let Some((step, hint)) = step()
        {
            self.emptied_by = Some(format!("{step} selected none of {} task(s){hint}", self.before));
        }
        self.before = after;
    }
}

/// `--filter A --filter B` as the user wrote it, with a hint when a value carries quotes (a
/// sign they reached dracode literally, as from an unquoted `args:` string of a CI step).
fn filter_sentence(exprs: &[String]) -> Option<(String, String)> {
    if exprs.is_empty() {
        return None;
    }
    let shown: Vec<String> = exprs.iter().map(|e| format!("--filter {e}")).collect();
    let quoted = exprs.iter().any(|e| e.contains('"') || e.contains('\''));
    let hint = if quoted { " (a quote character is part of the filter: were the quotes passed literally?)" } else { "" };
    Some((shown.join(" "), hint.to_string()))
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
                    filter.globs.push(Glob::new(expr).map_err(|e| PlanError::Usage(format!("--filter {expr:?}: {e}")))?.compile_matcher());
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

/// A task `dracode list` shows, with the provider and model `run` would give it.
#[derive(Debug)]
pub struct Listed {
    /// The task as its manifest (and the defaults) give it.
    pub task: Task,
    /// The provider's name.
    pub provider: String,
    /// The model: the task's, else its provider's (`None` when neither names one).
    pub model: Option<String>,
}

/// What `dracode list` shows.
#[derive(Debug)]
pub struct Listing {
    /// The selected tasks, in order.
    pub tasks: Vec<Listed>,
    /// Which step selected no task, as [`Plan::selected_nothing`].
    pub selected_nothing: Option<String>,
    /// A shard was asked for (`--shard` or the CI's variables).
    pub sharded: bool,
}

/// The tasks `dracode list` shows: manifests loaded, filter and shard applied, each task's
/// provider and model resolved as `run` resolves them (the rest of its settings are not).
pub fn list(
    manifests: &[PathBuf],
    filters: &[String],
    shard: Option<&str>,
    cwd: &Path,
    config: Option<&Path>,
    env: &BTreeMap<String, String>,
) -> Result<Listing, PlanError> {
    let config = Config::load_for(cwd, manifests, config, env)?;
    let filter = Filter::new(filters)?;
    let shard = parse_shard(shard, env)?;
    let (tasks, _) = manifest::tasks_with_issues(manifest::load_all(manifests, &config.defaults)?, env)?;
    let mut narrowing = Narrowing::new(tasks.len());
    let in_this_shard = shard_members(&tasks, shard);
    let tasks: Vec<Task> = tasks.into_iter().filter(|t| filter.selects(t)).collect();
    narrowing.step(tasks.len(), || filter_sentence(filters));
    let selected: Vec<Task> = tasks.into_iter().filter(|t| in_this_shard.as_ref().is_none_or(|ids| ids.contains(&t.id))).collect();
    narrowing.step(selected.len(), || shard.map(|s| (format!("shard {s}"), String::new())));
    let tasks = selected
        .into_iter()
        .map(|task| {
            let provider = config.provider_name(None, task.fields.provider.as_deref()).to_string();
            let resolved = config.resolve_provider(&provider, task.fields.model.as_deref(), env).ok();
            let model = resolved.and_then(|p| p.model).or_else(|| task.fields.model.clone());
            Listed { task, provider, model }
        })
        .collect();
    Ok(Listing { tasks, selected_nothing: narrowing.emptied_by, sharded: shard.is_some() })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hosted_remote_names_the_repository_by_its_slug_and_a_local_one_not_at_all() {
        for (url, slug) in [
            ("https://github.com/dtolnay/itoa.git", Some("dtolnay/itoa")),
            ("https://github.com/lukeed/kleur/", Some("lukeed/kleur")),
            ("git@github.com:python-humanize/humanize.git", Some("python-humanize/humanize")),
            ("ssh://git@gitlab.example.com:2222/group/sub/tool.git", Some("sub/tool")),
            ("/tmp/work/repo", None),
            ("../repo.git", None),
            ("file:///tmp/work/repo", None),
            ("C:/x/repo", None),
        ] {
            assert_eq!(slug_of(url).as_deref(), slug, "{url}");
        }
    }

    fn specs(manifest: &str, config: Option<&str>) -> Result<Vec<TaskSpec>, PlanError> {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.toml"), manifest).unwrap();
        if let Some(config) = config {
            std::fs::write(dir.path().join("dracode.toml"), config).unwrap();
        }
        validate(&[dir.path().join("m.toml")], None, dir.path(), &BTreeMap::new()).map(|(specs, _)| specs)
    }

    #[test]
    fn a_task_policy_is_merged_per_tool_over_config_and_manifest_defaults() {
        let config = "[defaults.policy]\nwrite_file = { allow = false }\nrun_command = { deny = [\"rm *\"] }\n";
        let manifest = "[defaults.policy]\non_denied = \"fail\"\ndelete_file = { allow = false }\n\
            [[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\n\
            [tasks.policy]\nrun_command = { allow = [\"cargo *\"] }\non_denied = \"answer\"\n";
        let spec = specs(manifest, Some(config)).unwrap().remove(0);
        let policy = &spec.policy;
        assert_eq!(policy.on_denied, crate::tools::policy::OnDenied::Answer, "the task's own value wins");
        assert_eq!(policy.tools.keys().collect::<Vec<_>>(), ["delete_file", "run_command", "write_file"]);
        assert_eq!(policy.describe("run_command"), serde_json::json!({"allow": ["cargo *"]}), "a tool's table replaces the default's");
        assert_eq!(policy.describe("write_file"), serde_json::json!({"allow": false}));
    }

    #[test]
    fn limits_are_merged_per_limit_over_config_and_manifest_defaults_and_the_built_in_ones() {
        let config = "[defaults.limits]\nmemory = \"1GiB\"\ncpu_time = \"10m\"\n";
        let manifest = "[defaults.limits]\nprocesses = 100\nopen_files = \"unlimited\"\n\
            [[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\n[tasks.limits]\nmemory = \"300MiB\"\n\
            [[tasks]]\nid = \"b\"\nprompt = \"p\"\nisolation = \"copy\"\n";
        let specs = specs(manifest, Some(config)).unwrap();
        let builtin = dracode_sandbox::Limits::defaults();
        let a = &specs[0].limits;
        assert_eq!(
            (a.memory, a.processes, a.open_files, a.file_size, a.cpu_time),
            (Some(300 << 20), Some(100), None, builtin.file_size, Some(600))
        );
        assert_eq!(specs[1].limits.memory, Some(1 << 30));
        let bare = self::specs("[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\n", None).unwrap().remove(0);
        assert_eq!(bare.limits, builtin, "a task without limits gets the built-in defaults");
        let errors = self::specs("[defaults.limits]\nmemory = 5\n[[tasks]]\nid = \"a\"\nprompt = \"p\"\n", None).unwrap_err().to_string();
        assert!(errors.contains("limits") && errors.contains("memory: 5 has no unit"), "{errors}");
    }

    #[test]
    fn every_default_is_filled_in() {
        let spec = specs("[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\n", None).unwrap().remove(0);
        assert_eq!((spec.id.as_str(), spec.index, spec.line), ("a", 0, Some(1)));
        assert_eq!(spec.max_iterations, DEFAULT_MAX_ITERATIONS);
        assert_eq!((spec.timeout, spec.idle_timeout, spec.check), (Some(DEFAULT_TIMEOUT), Some(DEFAULT_IDLE_TIMEOUT), None));
        assert_eq!((DEFAULT_TIMEOUT.as_secs(), DEFAULT_IDLE_TIMEOUT.as_secs()), (30 * 60, 5 * 60));
        assert_eq!(spec.retry, RetrySpec { retries: 0, retry_on: DEFAULT_RETRY_ON.to_vec() });
        assert_eq!(spec.workspace.base, "HEAD");
        assert_eq!(spec.workspace.workdir, PathBuf::new());
        assert_eq!(spec.sandbox, crate::manifest::SandboxMode::WorkspaceWrite);
        assert!(spec.network == dracode_sandbox::egress::Network::Off && spec.env.is_empty() && spec.env_passthrough.is_empty());
        assert_eq!(spec.require_change, RequireChange::NoOtherEvidence, "no check, no structured output, a sandbox that can write");
        assert!(!spec.commit && !spec.isolate_home);
        let mut tools = crate::tools::DEFAULT_TOOLS.to_vec();
        tools.insert(4, "apply_patch"); // the default provider serves an OpenAI model
        assert_eq!(spec.tools, tools);
        assert_eq!(
            spec.system_prompt,
            format!(
                "{SYSTEM_PROMPT}\n\nLimits of this task: at most 10 model turns (each reply of yours is one), 30m of wall-clock time. When a limit is reached the task ends where it is, and your changes so far are kept and checked. When one is close you will be told what is left: then start nothing new, leave the workspace in a good state and reply with your summary."
            )
        );
    }

    /// OpenAI's models get `apply_patch` by default, the tool they are trained on; other models
    /// get the plain default set; a task's own list is never changed.
    #[test]
    fn apply_patch_is_offered_by_default_to_openai_models_only() {
        let task = |extra: &str| format!("[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\n{extra}");
        let has_patch = |extra: &str| specs(&task(extra), None).unwrap().remove(0).tools.iter().any(|t| t == "apply_patch");
        assert!(has_patch("provider = \"openai\"\nmodel = \"gpt-5-codex\"\n"));
        assert!(has_patch("provider = \"openai\"\nmodel = \"o4-mini\"\n"));
        assert!(!has_patch("provider = \"anthropic\"\n"));
        assert!(!has_patch("provider = \"openai\"\nmodel = \"qwen2.5-coder\"\n"));
        let spec = specs(&task("tools = [\"read_file\"]\n"), None).unwrap().remove(0);
        assert_eq!(spec.tools, ["read_file"]);
    }

    /// The system prompt names the check and the protected globs unless the task says not to;
    /// `agents_md` is on unless turned off.
    #[test]
    fn the_agent_is_told_its_check_and_protected_paths_unless_the_task_says_not_to() {
        let task = |extra: &str| {
            format!("[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\ncheck = \"make test\"\nprotect = [\"tests/**\"]\n{extra}")
        };
        let spec = |extra: &str| specs(&task(extra), None).unwrap().remove(0);
        let told = spec("");
        assert!(
            told.system_prompt.contains("the check `make test`") && told.system_prompt.contains("`tests/**`"),
            "{}",
            told.system_prompt
        );
        assert!(told.agents_md);
        let hidden = spec("tell_check = false\nagents_md = false\n");
        assert!(!hidden.system_prompt.contains("make test") && hidden.system_prompt.contains("`tests/**`") && !hidden.agents_md);
        let unlisted = spec("tell_protect = false\n");
        assert!(unlisted.system_prompt.contains("make test") && !unlisted.system_prompt.contains("tests/**"));
        assert_eq!(unlisted.protect, ["tests/**"], "still protected");
    }

    #[test]
    fn every_setting_is_typed() {
        let manifest = "[defaults]\nisolation = \"copy\"\ncheck_timeout = \"2m\"\n[[tasks]]\nid = \"a\"\nprompt = \"p\"\ncheck = \"true\"\n\
            check_before = true\ntimeout = \"90s\"\nidle_timeout = \"1m\"\nretries = 2\nretry_on = [\"failed\"]\nmax_tokens = 5\n\
            max_cost_usd = 0.5\nworkdir = \"sub\"\nsystem_prompt = \"Be brief.\"\nsandbox = \"off\"\nnetwork = true\n[tasks.env]\nK = \"v\"\n";
        let spec = specs(manifest, Some("[defaults]\nrequire_change = true\n")).unwrap().remove(0);
        assert_eq!(spec.check, Some(CheckSpec { command: "true".into(), before: true, timeout: Duration::from_secs(120), repairs: 0 }));
        assert_eq!((spec.timeout, spec.idle_timeout), (Some(Duration::from_secs(90)), Some(Duration::from_secs(60))));
        assert_eq!(spec.retry, RetrySpec { retries: 2, retry_on: vec![Status::Failed] });
        assert_eq!((spec.budget.max_tokens, spec.budget.max_cost_usd), (Some(5), Some(0.5)));
        assert_eq!(spec.workspace.workdir, PathBuf::from("sub"));
        assert!(spec.system_prompt.ends_with("\n\nBe brief.") && spec.require_change == RequireChange::Set);
        assert_eq!((spec.sandbox, spec.network.clone()), (crate::manifest::SandboxMode::Off, dracode_sandbox::egress::Network::All));
        assert_eq!(spec.env["K"], "v");
    }

    #[test]
    fn every_task_problem_is_reported_at_once_with_its_line() {
        let manifest = "[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"worktree\"\n\n[[tasks]]\nid = \"b\"\nprompt = \"p\"\nisolation = \"copy\"\ncommit = true\nprovider = \"opnai\"\n";
        let message = specs(manifest, None).unwrap_err().to_string();
        let lines: Vec<&str> = message.lines().collect();
        assert_eq!(lines.len(), 3, "{message}");
        assert!(lines[0].contains("m.toml:1:1: task \"a\": field \"isolation\": \"worktree\" needs a git repository"), "{message}");
        assert!(lines.iter().any(|l| l.contains("m.toml:6:1: task \"b\": field \"provider\": unknown provider \"opnai\"")), "{message}");
        assert!(lines.iter().any(|l| l.contains("task \"b\": field \"commit\": needs isolation = \"worktree\"")), "{message}");
    }

    #[test]
    fn context_settings_come_from_the_provider_then_the_model_table_then_the_task() {
        let task = "[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\nprovider = \"local\"\n";
        let local = "[providers.local]\ntype = \"llamacpp\"\nmodel = \"qwen\"\n";
        let spec = specs(task, Some(local)).unwrap().remove(0);
        assert_eq!((spec.context_window, spec.max_context_tokens, spec.compact_at), (None, None, crate::context::DEFAULT_COMPACT_AT));
        let models = format!("{local}[models.\"qwen\"]\ncontext_window = 32768\n");
        assert_eq!(specs(task, Some(&models)).unwrap()[0].context_window, Some(32768));
        let both = format!("{local}context_window = 8192\n[models.\"qwen\"]\ncontext_window = 32768\n");
        let capped = format!("{task}max_context_tokens = 4000\ncompact_at = 0.5\n");
        let spec = specs(&capped, Some(&both)).unwrap().remove(0);
        assert_eq!((spec.context_window, spec.max_context_tokens, spec.compact_at), (Some(8192), Some(4000), 0.5));
    }

    #[test]
    fn the_sandbox_flag_overrides_the_manifest() {
        use clap::Parser;
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("m.toml"), "[[tasks]]\nid = \"a\"\nprompt = \"p\"\nisolation = \"copy\"\nsandbox = \"off\"\n")
            .unwrap();
        let manifest = dir.path().join("m.toml");
        let cli = crate::cli::Cli::parse_from(["dracode", "run", manifest.to_str().unwrap(), "--sandbox", "read-only"]);
        let crate::cli::Command::Run(args) = cli.command else { panic!("not run") };
        let plan = plan(&args.options(), dir.path(), &BTreeMap::new()).unwrap();
        assert_eq!(plan.tasks[0].sandbox, crate::manifest::SandboxMode::ReadOnly);
    }
}
