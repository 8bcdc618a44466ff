//! The `dracode` binary: parse the command line, run, map the result to an exit code.
// The binary is where dracode talks to the terminal: printing is its job here, not in the library.
#![allow(clippy::print_stdout, clippy::print_stderr)]
#![forbid(unsafe_code)]

use anyhow::Context;
use clap::Parser;
use dracode::batch::{plan, runner, task::Shared};
use dracode::cli::{AuthTarget, Cli, Command, ConfigFormat, ListFormat, McpAction, NoTasks, RunArgs, SchemaKind};
use dracode::config::Config;
use dracode::disk::Reserve;
use dracode::events::{Emitter, EventBus, Reporter};
use dracode::report::{
    self,
    jsonl::JsonlReporter,
    live::LiveReporter,
    progress::{ProgressReporter, Verbosity},
};
use dracode_results::exit_codes;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::Arc;
use std::sync::atomic::{AtomicI32, Ordering};

fn main() -> ExitCode {
    dracode_sandbox::close_inherited_descriptors();
    if let Some(code) = dracode_sandbox::supervisor::run_if_requested() {
        return ExitCode::from(u8::try_from(code).unwrap_or(u8::MAX));
    }
    dracode_sandbox::mark_non_dumpable();
    let cli = Cli::parse();
    if !matches!(&cli.command, Command::Run(args) if !args.dry_run) {
        quiet_on_closed_stdout();
    }
    init_tracing();
    // The commands that run confined commands adopt the orphans of a supervisor that died, for
    // the sweep to find ([`dracode_sandbox::sweep`]).
    let runs_commands =
        matches!(&cli.command, Command::Run(args) if !args.dry_run) || matches!(&cli.command, Command::Regrade(_) | Command::Combine(_));
    if runs_commands {
        dracode_sandbox::sweep::become_subreaper();
        // A command can point a descriptor's SIGIO at dracode (`F_SETOWN`; Landlock scopes
        // that only from ABI 6), whose default action would end the run. The supervisor
        // restores the default for the commands it confines.
        dracode_sandbox::signals::ignore(libc::SIGIO);
    }
    let code = match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("error: {e:#}");
            exit_codes::USAGE
        }
    };
    if runs_commands {
        dracode_sandbox::sweep::sweep_all();
    }
    ExitCode::from(code as u8)
}

/// Commands that only print (`list`, `tools`, `schema`, `run --dry-run`, …) end quietly when
/// their reader goes away (`dracode tools | head`), as Unix tools do, rather than panic on the
/// broken pipe. `run` keeps ignoring SIGPIPE: a closed `--jsonl -` is an artifact failure it reports (exit 3) after
/// finishing its tasks and cleaning up.
fn quiet_on_closed_stdout() {
    dracode_sandbox::signals::restore_default(libc::SIGPIPE);
}

/// Log lines (`DRACODE_LOG`, dracode's warnings by default) on stderr, coloured only on a terminal and
/// without `NO_COLOR`: a CI log or a file never gets escape codes.
fn init_tracing() {
    // By default only dracode's own warnings: no library's log line reaches the terminal.
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("DRACODE_LOG").unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("dracode=warn"));
    let colour = report::progress::colour_wanted(std::io::stderr().is_terminal(), &dracode_input::process_env());
    let _ = tracing_subscriber::fmt().with_env_filter(filter).with_writer(std::io::stderr).with_ansi(colour).without_time().try_init();
}

fn run(cli: Cli) -> anyhow::Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    let env = dracode_input::process_env();
    match cli.command {
        Command::Run(args) => run_batch(*args, &cwd, env),
        Command::Validate { manifests, config, offline } => match plan::validate(&manifests, config.as_deref(), &cwd, &env) {
            Ok(tasks) => {
                if !offline && !preflight_passes(&tasks) {
                    return Ok(exit_codes::NOT_JUDGED);
                }
                let skipped = if offline { " (providers not checked: --offline)" } else { "" };
                println!("ok: {} manifest(s), {} task(s){skipped}", manifests.len(), tasks.len());
                Ok(exit_codes::OK)
            }
            Err(e) => usage_error(&e),
        },
        Command::List { manifests, filter, shard, format, config } => {
            list(&manifests, &filter, shard.as_deref(), format, config.as_deref(), &cwd, &env)
        }
        Command::Merge { inputs, out } => merge(&inputs, &out, &env),
        Command::Report { out, history, save_history } => write_report(&out, &history, save_history.as_deref()),
        Command::Combine(args) => combine(&args, &cwd, &env),
        Command::Regrade(args) => regrade(&args, &cwd, &env),
        Command::Auth { target: AuthTarget::Copilot } => auth_copilot(&env),
        Command::Mcp { action: McpAction::Login { server, no_browser, config } } => {
            mcp_login(&server, no_browser, config.as_deref(), &cwd, &env)
        }
        Command::Tools { task: Some(id), manifests, config, .. } => task_tools(&id, &manifests, config.as_deref(), &cwd, &env),
        Command::Tools { format, .. } => {
            let specs = dracode::tools::Registry::all().specs();
            let rendered = dracode::tools::render::render(&specs, format);
            println!("{}", serde_json::to_string_pretty(&rendered)?);
            Ok(exit_codes::OK)
        }
        Command::McpProbe { server, name, call, call_each, schemas } => {
            mcp_probe(&server, &name, &call, call_each.as_deref(), schemas, &cwd)
        }
        Command::Providers { config } => providers(config.as_deref(), &cwd, &env),
        Command::Config { manifests, format, config } => show_config(&manifests, format, config.as_deref(), &cwd, &env),
        Command::Sandbox { task, manifests, out, config } => task_sandbox(&task, &manifests, &out, config.as_deref(), &cwd, &env),
        Command::Schema { which } => {
            let schema = match which {
                SchemaKind::Manifest => dracode::manifest::json_schema(),
                SchemaKind::Events => dracode_results::records::events_schema(),
            };
            println!("{}", serde_json::to_string_pretty(&schema)?);
            Ok(exit_codes::OK)
        }
    }
}

/// `dracode combine OUT`: the passed tasks' patches onto one tree ([`dracode::batch::combine`]);
/// interrupted, its temporary working tree is removed before exiting 130/143.
fn combine(args: &dracode::cli::CombineArgs, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use dracode::batch::combine::{self, CombineError, CombineOptions};
    let check_timeout = match dracode_input::duration::parse_positive(&args.check_timeout) {
        Ok(d) => d,
        Err(e) => return usage_error(&format!("--check-timeout {:?}: {e}", args.check_timeout)),
    };
    let opts = CombineOptions {
        out: args.out.clone(),
        repo: cwd.join(&args.repo),
        base: args.base.clone(),
        check: args.check.clone(),
        check_timeout,
        branch: args.branch.clone(),
        force: args.force,
        cwd: cwd.to_path_buf(),
    };
    let redactor = Arc::new(Redactor::from_env(env.clone(), Vec::new()));
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    // Dropping the unfinished combine removes its working tree (and ends its check).
    let outcome = runtime.block_on(async {
        tokio::select! {
            biased;
            code = interrupted() => Err(code),
            report = combine::combine(&opts, env, &redactor) => Ok(report),
        }
    });
    let report = match outcome {
        Err(code) => {
            eprintln!("dracode: interrupted; the temporary working tree was removed");
            return Ok(code);
        }
        Ok(Ok(report)) => report,
        Ok(Err(CombineError::Input(e))) => return usage_error(&e),
        Ok(Err(CombineError::Write(e))) => {
            eprintln!("error: {e}");
            return Ok(exit_codes::ARTIFACTS_FAILED);
        }
    };
    for warning in &report.warnings {
        eprintln!("warning: {warning}");
    }
    let md = combine::markdown(&report);
    eprint!("{md}");
    if let Err(e) = report::page::write(&args.out, &[], None) {
        eprintln!("error: {e}");
        return Ok(exit_codes::ARTIFACTS_FAILED);
    }
    if let Some(path) = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()) {
        let appended = std::fs::OpenOptions::new().append(true).create(true).open(path).and_then(|mut f| f.write_all(md.as_bytes()));
        if let Err(e) = appended {
            eprintln!("error: cannot append to $GITHUB_STEP_SUMMARY {path}: {e}");
            return Ok(exit_codes::ARTIFACTS_FAILED);
        }
    }
    if report.applied.is_empty() && report.conflicts.is_empty() {
        eprintln!("nothing to combine: no passed task of {} changed a file", args.out.display());
        return Ok(exit_codes::NO_TASKS);
    }
    Ok(report.exit_code)
}

/// `dracode regrade OUT`: the recorded patches checked again, no model called
/// ([`dracode::batch::regrade`]); a new results set in `--out` (default `<OUT>-regraded`).
fn regrade(args: &dracode::cli::RegradeArgs, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use dracode::batch::regrade::{self, RegradeOptions};
    let default_out = || {
        let name = args.results.file_name().map_or("dracode-out".into(), |n| n.to_string_lossy().into_owned());
        args.results.with_file_name(format!("{name}-regraded"))
    };
    let out = args.out.clone().unwrap_or_else(default_out);
    let opts = RegradeOptions {
        results: args.results.clone(),
        out: cwd.join(&out),
        check: args.check.clone(),
        filter: args.filter.clone(),
        config: args.config.clone(),
        jobs: if args.jobs == 0 { std::thread::available_parallelism().map_or(1, std::num::NonZero::get) } else { args.jobs },
    };
    let job = match regrade::prepare(&opts, cwd, env) {
        Ok(job) => job,
        Err(e) => return usage_error(&e),
    };
    for id in &job.missing {
        eprintln!("warning: task {id:?} of {} is not in its manifests any more: not regraded", args.results.display());
    }
    if job.is_empty() {
        eprintln!("error: no task selected: none of the run's tasks matches the filter and the manifests");
        return Ok(exit_codes::NO_TASKS);
    }
    let same = |a: &Path, b: &Path| a.canonicalize().ok().is_some_and(|a| b.canonicalize().ok() == Some(a));
    if same(&cwd.join(&args.results), &opts.out) {
        return usage_error(&format!("--out {} is the run being regraded; write the new results to another folder", out.display()));
    }
    if let Err(e) = report::out_dir::check(&opts.out, &[]) {
        return usage_error(&e);
    }
    report::out_dir::prepare(&opts.out, &Default::default()).with_context(|| format!("cannot prepare --out {}", out.display()))?;
    let reserve = Reserve::hold(&opts.out);
    let redactor = Arc::new(Redactor::from_env(env.clone(), Vec::new()));
    let run_id = run_id();
    let step_summary = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()).map(PathBuf::from);
    let mut reporters = report::artifact_reporters(&opts.out, &run_id, None, redactor.clone(), step_summary, &reserve)
        .with_context(|| format!("cannot write to {}", out.display()))?;
    reporters
        .push(Box::new(ProgressReporter::new(Box::new(std::io::stderr()), Verbosity::Normal, job.len()).with_redactor(redactor.clone())));
    let bus = EventBus::new(reporters);
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let emitter = Emitter::run(bus.clone());
    let totals = runtime.block_on(async {
        tokio::select! {
            biased;
            code = interrupted() => Err(code),
            totals = job.run(&opts, env, &redactor, &emitter) => Ok(totals),
        }
    });
    let mut failures = bus.finish();
    end_reserve(&reserve, &opts.out, &mut failures);
    add_report_page(&opts.out, None, &mut failures);
    report_artifact_failures(&failures);
    let code = match totals {
        Ok(totals) => totals.exit_code,
        Err(code) => code,
    };
    eprintln!("regraded results: {}", out.display());
    Ok(exit_codes::after_artifacts(code, failures.len()))
}

/// Resolves with the exit code of the first SIGINT (130) or SIGTERM (143).
async fn interrupted() -> i32 {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return std::future::pending().await;
    };
    tokio::select! {
        _ = int.recv() => exit_codes::INTERRUPTED,
        _ = term.recv() => exit_codes::TERMINATED,
    }
}

/// `dracode tools --task ID MANIFEST`: the tools task `ID` is offered, each with its policy
/// (`allow`: true, false or command rules; `deny`; `allowed_hosts`), as JSON.
fn task_tools(id: &str, manifests: &[PathBuf], config: Option<&Path>, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let task = match find_task(id, manifests, config, cwd, env) {
        Ok(task) => task,
        Err(code) => return code,
    };
    let tools: Vec<serde_json::Value> = task
        .tools
        .iter()
        .map(|name| {
            let mut entry = serde_json::json!({ "name": name });
            if let (Some(entry), serde_json::Value::Object(rule)) = (entry.as_object_mut(), task.policy.describe(name)) {
                entry.extend(rule);
            }
            entry
        })
        .collect();
    let shown = serde_json::json!({ "task": task.id, "network": task.network, "on_denied": task.policy.on_denied, "tools": tools });
    println!("{}", serde_json::to_string_pretty(&shown)?);
    Ok(exit_codes::OK)
}

/// `dracode sandbox --task ID`: what the task's commands may read, write and reach.
fn task_sandbox(
    id: &str,
    manifests: &[PathBuf],
    out: &Path,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let task = match find_task(id, manifests, config, cwd, env) {
        Ok(task) => task,
        Err(code) => return code,
    };
    print!("{}", dracode::batch::sandbox_view::describe(&task, env, &cwd.join(out)));
    Ok(exit_codes::OK)
}

/// Task `id` of `manifests`, resolved as `validate` resolves it; `Err` holds the exit of a
/// usage error already reported (the manifests are invalid, or no task has that id).
fn find_task(
    id: &str,
    manifests: &[PathBuf],
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> Result<dracode::batch::spec::TaskSpec, anyhow::Result<i32>> {
    let tasks = plan::validate(manifests, config, cwd, env).map_err(|e| usage_error(&e))?;
    let ids: Vec<String> = tasks.iter().map(|t| t.id.clone()).collect();
    tasks
        .into_iter()
        .find(|t| t.id == id)
        .ok_or_else(|| usage_error(&format!("no task {id:?} in the manifest(s); tasks: {}", ids.join(", "))))
}

/// `dracode list`: the tasks that would run, one id a line or one JSON object a line.
fn list(
    manifests: &[PathBuf],
    filter: &[String],
    shard: Option<&str>,
    format: ListFormat,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let listing = match plan::list(manifests, filter, shard, cwd, config, env) {
        Ok(t) => t,
        Err(e) => return usage_error(&e),
    };
    let mut out = std::io::stdout().lock();
    for listed in &listing.tasks {
        let task = &listed.task;
        match format {
            ListFormat::Text => writeln!(out, "{}", task.id)?,
            ListFormat::Json => writeln!(
                out,
                "{}",
                serde_json::json!({
                    "id": task.id,
                    "manifest": task.manifest,
                    "tags": task.fields.tags.clone().unwrap_or_default(),
                    "provider": listed.provider,
                    "model": listed.model,
                })
            )?,
        }
    }
    // As `run` without --no-tasks: an empty selection is exit 4, an empty shard a warning.
    let Some(why) = &listing.selected_nothing else { return Ok(exit_codes::OK) };
    match NoTasks::resolve(None, listing.sharded) {
        NoTasks::Fail => {
            eprintln!("error: no task selected: {why}. Exit code 4");
            Ok(exit_codes::NO_TASKS)
        }
        _ => {
            eprintln!("warning: no task selected: {why}; nothing to list");
            Ok(exit_codes::OK)
        }
    }
}

/// `dracode report OUT`: `OUT/report.html` written again (and its record kept in `save`).
fn write_report(out: &Path, history: &[PathBuf], save: Option<&Path>) -> anyhow::Result<i32> {
    if !out.join("results.jsonl").is_file() {
        return usage_error(&format!("{}: not the output folder of a dracode run (no results.jsonl)", out.display()));
    }
    match report::page::write(out, history, save) {
        Ok(path) => {
            eprintln!("wrote {}", path.display());
            Ok(exit_codes::OK)
        }
        Err(e) if e.starts_with("cannot write") => {
            eprintln!("error: {e}");
            Ok(exit_codes::ARTIFACTS_FAILED)
        }
        Err(e) => usage_error(&e),
    }
}

/// Writes `out/report.html` after a command wrote the folder's other artifacts; a failure is one
/// more artifact failure.
fn add_report_page(out: &Path, cache: Option<&Path>, failures: &mut Vec<String>) {
    if let Err(e) = report::page::write(out, &[], cache) {
        failures.push(e);
    }
}

/// `dracode merge`: shard outputs into one.
fn merge(inputs: &[PathBuf], out: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let redactor = Arc::new(Redactor::from_env(env.clone(), Vec::new()));
    match report::merge::merge(inputs, out, redactor) {
        Ok(summary) => {
            for warning in &summary.warnings {
                eprintln!("warning: {warning}");
            }
            if let Err(e) = report::page::write(out, &[], None) {
                eprintln!("error: {e}");
                return Ok(exit_codes::ARTIFACTS_FAILED);
            }
            eprintln!("merged {} task(s) from {} folder(s) into {}", summary.tasks, summary.shards, out.display());
            Ok(summary.exit_code)
        }
        Err(e @ report::merge::MergeError::Write { .. }) => {
            eprintln!("error: cannot write the merged results: {e}");
            Ok(exit_codes::ARTIFACTS_FAILED)
        }
        Err(e @ report::merge::MergeError::Read { .. }) => {
            eprintln!("error: cannot read a shard's results: {e}");
            eprintln!("error: its tasks cannot be judged; nothing was merged (exit code {})", exit_codes::NOT_JUDGED);
            Ok(exit_codes::NOT_JUDGED)
        }
        Err(e) => usage_error(&e),
    }
}

/// `dracode providers`: each provider, its type, model, endpoint and whether it is configured.
fn providers(config: Option<&Path>, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let config = match Config::load(cwd, config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    println!("{:<12} {:<10} {:<24} {:<44} STATUS", "NAME", "TYPE", "MODEL", "ENDPOINT");
    for name in config.provider_names() {
        let Ok(p) = config.resolve_provider(&name, None, env) else { continue };
        let status = match p.not_configured_reason() {
            None => "configured".to_string(),
            Some(why) => format!("not configured: {why}"),
        };
        println!(
            "{:<12} {:<10} {:<24} {:<44} {status}",
            name,
            p.kind.as_str(),
            p.model.as_deref().unwrap_or("-"),
            p.base_url.as_deref().unwrap_or("-"),
        );
    }
    Ok(exit_codes::OK)
}

/// `dracode config`: the config files in use (found as [`Config::load_for`] finds them) and
/// the default provider, its type and model.
fn show_config(
    manifests: &[PathBuf],
    format: ConfigFormat,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let config = match Config::load_for(cwd, manifests, config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let name = config.provider_name(None, None);
    let provider = match config.resolve_provider(name, None, env) {
        Ok(p) => p,
        Err(e) => return usage_error(&e),
    };
    match format {
        ConfigFormat::Json => {
            let shown = serde_json::json!({
                "files": config.files,
                "provider": name,
                "type": provider.kind.as_str(),
                "model": provider.model,
            });
            println!("{shown}");
        }
        ConfigFormat::Text => {
            println!("config:   {}", config_files_line(&config.files));
            println!("provider: {name} ({})", provider.kind.as_str());
            println!("model:    {}", provider.model.as_deref().unwrap_or("-"));
        }
    }
    Ok(exit_codes::OK)
}

/// The config files read, as one line: `none (built-in defaults)` when there is none.
fn config_files_line(files: &[PathBuf]) -> String {
    if files.is_empty() {
        return "none (built-in defaults)".to_string();
    }
    files.iter().map(|f| f.display().to_string()).collect::<Vec<_>>().join(", ")
}

/// `dracode mcp-probe` (hidden): see [`dracode_mcp::probe`].
fn mcp_probe(server: &str, name: &str, calls: &[String], call_each: Option<&str>, schemas: bool, cwd: &Path) -> anyhow::Result<i32> {
    let config: dracode_mcp::McpServerConfig = serde_json::from_str(server).context("--server")?;
    if let Some((_, problem)) = config.problems(name).into_iter().next() {
        anyhow::bail!("{problem}");
    }
    let mut plan = dracode_mcp::probe::ProbePlan::parse(calls, call_each).map_err(anyhow::Error::msg)?;
    plan.schemas = schemas;
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut stdout = std::io::stdout();
    match runtime.block_on(dracode_mcp::probe::run(name, &config, &plan, cwd, http.get().clone(), &mut stdout)) {
        Ok(()) => Ok(exit_codes::OK),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}

/// `dracode mcp login SERVER`: a person's OAuth grant for a `url` server of the config
/// ([`dracode_mcp::oauth::flow::login`]); prints what CI needs.
fn mcp_login(name: &str, no_browser: bool, config: Option<&Path>, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let config = match Config::load_for(cwd, &[], config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let servers = config.defaults.mcp_servers.clone().unwrap_or_default();
    let Some(server) = servers.get(name) else {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        let files = config_files_line(&config.files);
        return usage_error(&format!("no MCP server {name:?} in the config ({files}); its servers: {}", known.join(", ")));
    };
    let Some(url) = server.url.clone() else {
        return usage_error(&format!("`mcp_servers.{name}`: only a `url` server has an OAuth login"));
    };
    let creds = match server.login_credentials(name, env) {
        Ok(c) if !c.for_person() => {
            return usage_error(&format!(
                "`mcp_servers.{name}.oauth` has a client secret or key: it uses the client-credentials grant, no login"
            ));
        }
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let open = move |address: &str| {
        eprintln!("To authorize dracode for MCP server {name}, open:\n  {address}\nWaiting for the browser to come back…");
        let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
        if !no_browser {
            let _ = std::process::Command::new(opener)
                .arg(address)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
    };
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match runtime.block_on(dracode_mcp::oauth::flow::login(http.get(), &url, name, &creds, &open)) {
        Ok(login) => Ok(print_login(name, &url, server.oauth.clone().unwrap_or_default(), &login)),
        Err(e) => {
            eprintln!("error: MCP server {name:?}: OAuth login failed: {e}");
            Ok(exit_codes::TASKS_FAILED)
        }
    }
}

/// What CI needs after a login: the refresh token (and a registered client's secret) to store
/// as secrets, and the `oauth` line using them.
fn print_login(name: &str, url: &str, mut oauth: dracode_mcp::McpOAuth, login: &dracode_mcp::oauth::flow::Login) -> i32 {
    let Some(refresh) = &login.refresh_token else {
        eprintln!(
            "error: MCP server {name:?}: the authorization server gave no refresh token, so CI could not renew access (ask for scope `offline_access` with `oauth.scope`?)"
        );
        return exit_codes::TASKS_FAILED;
    };
    let prefix = format!("MCP_{}", name.to_uppercase().replace('-', "_"));
    let var = oauth.refresh_token_env_var.clone().unwrap_or_else(|| format!("{prefix}_REFRESH_TOKEN"));
    println!("Store this refresh token as the CI secret {var}:\n  {refresh}");
    if let Some(client) = &login.registered {
        oauth.client_id = client.id.clone();
        println!("dracode registered itself as client {} (keep it: the refresh token belongs to it).", client.id);
        if let Some(secret) = &client.secret {
            println!("Store its client secret as the CI secret {prefix}_CLIENT_SECRET:\n  {secret}");
            oauth.client_secret = Some(format!("${{{prefix}_CLIENT_SECRET}}"));
        }
    }
    oauth.refresh_token_env_var = Some(var);
    let table = toml::Value::try_from(&oauth).map(|v| v.to_string()).unwrap_or_default();
    println!("\nand in dracode.toml:\n[mcp_servers.{name}]\nurl = {url:?}\n[mcp_servers.{name}.oauth]\n{table}");
    println!(
        "A refresh token the server rotates is used for the rest of a run, but cannot be written back to the CI secret: if the server rotates them, run this again when CI's is refused."
    );
    exit_codes::OK
}

/// `dracode auth copilot`: GitHub's device flow; the token is stored with mode 0600.
fn auth_copilot(env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use dracode_llm::copilot;
    let endpoints = copilot::Endpoints::from_env(env);
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let token = runtime.block_on(copilot::device_flow(&http, &endpoints, |code| {
        eprintln!("To authorize dracode for GitHub Copilot, open {} and enter the code {}", code.verification_uri, code.user_code);
        if !std::io::stdin().is_terminal() {
            eprintln!("(no terminal here: open the address on any machine; this waits for the approval)");
        }
        eprintln!("Waiting for approval…");
    }));
    match token {
        Ok(token) => {
            let path = dracode_llm::github_token::store_token(env, &token).context("cannot store the token")?;
            eprintln!("Stored the GitHub token in {} (mode 0600). In CI, set GITHUB_COPILOT_TOKEN instead.", path.display());
            Ok(exit_codes::OK)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(exit_codes::TASKS_FAILED)
        }
    }
}

/// The pre-flight of `validate` and `run --dry-run` ([`plan::preflight`]): prints every task
/// whose provider is not configured; true when there is none.
fn preflight_passes(tasks: &[dracode::batch::spec::TaskSpec]) -> bool {
    let problems = plan::preflight(tasks);
    for problem in &problems {
        eprintln!("error: {problem}");
    }
    if !problems.is_empty() {
        eprintln!(
            "error: {} task(s) would end not_configured (exit code {}): fix what is named above, or pass --offline to \
             check only the manifests",
            problems.len(),
            exit_codes::NOT_JUDGED
        );
    }
    problems.is_empty()
}

/// Prints an input error and returns exit code 2.
fn usage_error(e: &dyn std::fmt::Display) -> anyhow::Result<i32> {
    for line in e.to_string().lines() {
        eprintln!("error: {line}");
    }
    Ok(exit_codes::USAGE)
}

fn run_batch(args: RunArgs, cwd: &Path, env: BTreeMap<String, String>) -> anyhow::Result<i32> {
    let plan = match plan::plan(&args, cwd, &env) {
        Ok(plan) => plan,
        Err(e) => return usage_error(&e),
    };
    for warning in &plan.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(rerun) = plan.rerun.as_ref().filter(|r| r.all_passed && plan.tasks.is_empty()) {
        eprintln!("nothing to rerun: every task in {} passed; {} is left as it was", rerun.path.display(), args.out.display());
        return Ok(exit_codes::OK);
    }
    let if_no_tasks = announce_empty_selection(&args, &plan);
    if args.dry_run {
        eprintln!("config: {}", config_files_line(&plan.config_files));
        print_dry_run(&plan);
        if plan.tasks.is_empty() {
            return Ok(if_no_tasks);
        }
        let ready = args.offline || preflight_passes(&plan.tasks);
        return Ok(if ready { exit_codes::OK } else { exit_codes::NOT_JUDGED });
    }
    let jobs = if args.jobs == 0 { std::thread::available_parallelism().map_or(1, std::num::NonZero::get) } else { args.jobs };
    // No more runtime workers than tasks can use: each idle worker is a thread stack and an arena.
    let workers = jobs.min(plan.tasks.len()).clamp(1, 4);
    let redactor = Arc::new(Redactor::from_env(env.clone(), plan.secrets.clone()));
    let run_id = run_id();
    let mut plan = plan;
    let plan_rerun = plan.rerun.take();
    let keep = plan_rerun.as_ref().filter(|r| r.in_place).map(|r| r.carried.clone()).unwrap_or_default();
    report::out_dir::prepare(&args.out, &keep).with_context(|| format!("cannot prepare --out {}", args.out.display()))?;
    let reserve = Reserve::hold(&args.out);
    let shard = plan.shard.map(|s| s.to_string());
    let reporters = reporters(&args, &plan, (&run_id, shard.as_deref()), &redactor, &env, &reserve)?;
    let bus = EventBus::new(reporters);
    let (cancel_tx, cancel_rx) = tokio::sync::watch::channel(false);
    let shared = Arc::new(Shared {
        prices: plan.prices.clone(),
        redactor: redactor.clone(),
        http: Default::default(),
        process_env: Arc::new(env.clone()),
        record: args.record.clone(),
        cancel: cancel_rx,
        run_meter: dracode::agent::RunMeter::new(args.max_tokens, args.max_cost_usd),
        gates: Default::default(),
        run_mcp: Default::default(),
        setups: Default::default(),
        run_id: run_id.clone(),
        paths: dracode::batch::task::SharedPaths::new(Some(&args.out), &env),
    });
    let signal = Arc::new(AtomicI32::new(0));
    let cache_dir = plan.cache.clone();
    let cache = cache_dir.as_deref().map(|dir| Arc::new(dracode::batch::cache::Cache::new(dir, !args.no_cache)));
    let schedule =
        runner::Schedule { jobs, fail_fast: args.fail_fast, shard: shard.clone(), interrupted_by: signal.clone(), if_no_tasks, cache };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(workers)
        .enable_all()
        .build()
        .context("cannot start the async runtime")?;
    let totals = runtime.block_on(async {
        let watcher = tokio::spawn(watch_signals(cancel_tx, signal.clone(), bus.clone()));
        let totals = runner::run(plan, shared, Emitter::run(bus.clone()), schedule).await;
        watcher.abort();
        totals
    });
    let mut failures = bus.finish();
    end_reserve(&reserve, &args.out, &mut failures);
    if let Some(rerun) = plan_rerun.filter(|r| r.in_place) {
        add_up_rerun(&rerun, &args.out, &redactor, &mut failures);
    }
    add_report_page(&args.out, cache_dir.as_deref(), &mut failures);
    report_artifact_failures(&failures);
    let tasks = exit_codes::after_signal(signal.load(Ordering::SeqCst), totals.exit_code);
    Ok(exit_codes::after_artifacts(tasks, failures.len()))
}

/// After `--rerun-failed DIR/results.jsonl --out DIR`: DIR's results, JUnit and summary cover
/// the whole batch, the earlier run's tasks that were not run again carried over.
fn add_up_rerun(rerun: &plan::RerunSource, out: &Path, redactor: &Arc<Redactor>, failures: &mut Vec<String>) {
    match report::merge::add_up_rerun(&rerun.text, out, redactor.clone()) {
        Ok(summary) => {
            eprintln!(
                "{} now describes the whole batch: {} task(s), {} carried over from the earlier run",
                out.display(),
                summary.tasks,
                rerun.carried.len()
            );
        }
        Err(e) => failures.push(format!("cannot add the rerun to the earlier results in {}: {e}", out.display())),
    }
}

/// The most artifact failures printed one by one; the rest are counted.
const SHOWN_FAILURES: usize = 20;

/// Removes the output folder's reserve once the tasks are over — its room goes to the run's last
/// files (the rerun's add-up, `report.html`) — and says when a full disk made the run use it. A
/// reserve that cannot be removed is an artifact failure: the folder would keep it.
fn end_reserve(reserve: &Reserve, out: &Path, failures: &mut Vec<String>) {
    if let Err(e) = reserve.remove() {
        failures.push(format!("cannot remove {}: {e}", out.join(dracode::disk::RESERVE_NAME).display()));
    }
    if reserve.times_given_up() > 0 {
        eprintln!(
            "warning: the disk holding {} filled up during the run: dracode wrote its results into the room it had held back; \
             a check that ended on the full disk graded nothing (its task ended error, could not be judged)",
            out.display()
        );
    }
}

/// Prints each artifact that could not be written (file and OS error), at most
/// [`SHOWN_FAILURES`], then what the exit code means.
fn report_artifact_failures(failures: &[String]) {
    if failures.is_empty() {
        return;
    }
    for failure in failures.iter().take(SHOWN_FAILURES) {
        eprintln!("error: {failure}");
    }
    if failures.len() > SHOWN_FAILURES {
        eprintln!("error: … and {} more artifact write failure(s)", failures.len() - SHOWN_FAILURES);
    }
    eprintln!("error: dracode could not write all of its results (exit code {})", exit_codes::ARTIFACTS_FAILED);
}

/// Says why no task was selected, when none was (an error under `--no-tasks=fail`, a warning
/// under `warn`, silence under `pass`), and returns the exit code such a run ends with.
fn announce_empty_selection(args: &RunArgs, plan: &plan::Plan) -> i32 {
    let policy = NoTasks::resolve(args.no_tasks, plan.shard.is_some());
    if let Some(why) = &plan.selected_nothing {
        match policy {
            NoTasks::Fail => {
                eprintln!("error: no task selected: {why}. Exit code 4: --no-tasks=warn or --no-tasks=pass accepts an empty selection");
            }
            NoTasks::Warn => eprintln!("warning: no task selected: {why}; nothing to run"),
            NoTasks::Pass => {}
        }
    }
    policy.exit_code()
}

/// Waits for SIGINT or SIGTERM (what GitHub Actions sends on cancel) and tells the run.
async fn watch_signals(cancel: tokio::sync::watch::Sender<bool>, which: Arc<AtomicI32>, bus: Arc<EventBus>) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut int), Ok(mut term)) = (signal(SignalKind::interrupt()), signal(SignalKind::terminate())) else {
        return;
    };
    let number = tokio::select! {
        _ = int.recv() => 2,
        _ = term.recv() => 15,
    };
    which.store(number, Ordering::SeqCst);
    eprintln!("dracode: interrupted; cancelling running tasks and writing results (again to quit at once)");
    let _ = cancel.send(true);
    // A second signal means "now": what was emitted so far reaches results.jsonl first (the
    // reporters run on their own thread), bounded so a stuck disk cannot keep dracode alive.
    let code = tokio::select! {
        _ = int.recv() => exit_codes::INTERRUPTED,
        _ = term.recv() => exit_codes::TERMINATED,
    };
    tokio::task::block_in_place(|| bus.flush(std::time::Duration::from_secs(2)));
    std::process::exit(code)
}

/// `--dry-run`: each task, its provider, model, isolation, repository, time limits and
/// effective `require_change` (and `repeat`, `check_repairs` when set), and whether the provider
/// is configured; then (on stderr) how to see a task's sandbox.
fn print_dry_run(plan: &plan::Plan) {
    for p in &plan.tasks {
        let status = p.provider.not_configured_reason().map_or("ready".to_string(), |w| format!("not configured: {w}"));
        let limit = |d: Option<std::time::Duration>| d.map_or("none".to_string(), |d| humantime::format_duration(d).to_string());
        let mut extra = String::new();
        if p.repeat.count > 1 {
            extra.push_str(&format!(" repeat={} min_pass_rate={}", p.repeat.count, p.repeat.min_pass_rate));
        }
        if let Some(check) = p.check.as_ref().filter(|c| c.repairs > 0) {
            extra.push_str(&format!(" check_repairs={}", check.repairs));
        }
        if let Some(setup) = &p.setup {
            extra.push_str(&format!(" setup={:?}", setup.command));
        }
        println!(
            "{}\tprovider={} model={} isolation={} repo={} require_change={} timeout={} idle_timeout={}{extra}\t{status}",
            p.id,
            p.provider.name,
            p.provider.model.as_deref().unwrap_or("-"),
            p.workspace.isolation.as_str(),
            dracode_input::lexical(&p.workspace.repo).display(),
            p.require_change.applies(),
            limit(p.timeout),
            limit(p.idle_timeout),
        );
    }
    if let Some(task) = plan.tasks.iter().find(|t| t.sandbox != dracode_sandbox::SandboxMode::Off) {
        eprintln!("what a task's commands may read, write and reach: dracode sandbox --task {} {}", task.id, task.manifest.display());
    }
}

/// Every reporter of the run: the artifacts in `--out`, the live display on a terminal (plain
/// progress lines in CI), and `--jsonl`.
fn reporters(
    args: &RunArgs,
    plan: &plan::Plan,
    (run_id, shard): (&str, Option<&str>),
    redactor: &Arc<Redactor>,
    env: &BTreeMap<String, String>,
    reserve: &Arc<Reserve>,
) -> anyhow::Result<Vec<Box<dyn Reporter>>> {
    let step_summary = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty()).map(PathBuf::from);
    let mut reporters: Vec<Box<dyn Reporter>> =
        report::artifact_reporters(&args.out, run_id, shard, redactor.clone(), step_summary, reserve)
            .with_context(|| format!("cannot write to {}", args.out.display()))?;
    let findings = findings_reporter(args, plan, run_id, redactor, env);
    reporters.extend(findings.map(|f| Box::new(f.with_reserve(reserve.clone())) as Box<dyn Reporter>));
    let verbosity = if args.quiet {
        Verbosity::Quiet
    } else if args.verbose {
        Verbosity::Verbose
    } else {
        Verbosity::Normal
    };
    let in_ci = env.get("CI").is_some_and(|v| !v.is_empty() && v != "false" && v != "0");
    let colour = report::progress::colour_wanted(std::io::stderr().is_terminal(), env);
    if std::io::stderr().is_terminal() && !in_ci && verbosity != Verbosity::Quiet {
        reporters.push(Box::new(LiveReporter::new(verbosity, plan.tasks.len(), redactor.clone(), colour)));
    } else {
        let lines = ProgressReporter::new(Box::new(std::io::stderr()), verbosity, plan.tasks.len())
            .with_redactor(redactor.clone())
            .with_colour(colour)
            .with_slow_lines(report::slow::SlowPolicy::from_env(env), plan.prices.clone());
        reporters.push(Box::new(lines));
    }
    reporters.extend(github_reporters(args, redactor, env));
    reporters.extend(otel_reporter(args, plan, shard, redactor, env));
    if let Some(path) = &args.jsonl {
        let stream = if path.as_os_str() == "-" {
            JsonlReporter::new(Box::new(std::io::stdout()), run_id, shard, redactor.clone()).named("stdout (--jsonl -)")
        } else {
            JsonlReporter::create(path, run_id, shard, redactor.clone()).with_context(|| format!("--jsonl {}", path.display()))?
        };
        reporters.push(Box::new(stream));
    }
    Ok(reporters)
}

/// `findings.sarif` (and, under GitHub Actions, `::warning` annotations on stderr) when some
/// task has `output = "findings"`.
fn findings_reporter(
    args: &RunArgs,
    plan: &plan::Plan,
    run_id: &str,
    redactor: &Arc<Redactor>,
    env: &BTreeMap<String, String>,
) -> Option<dracode::report::outputs::SarifReporter> {
    use dracode::structured::findings::PathBase;
    let bases: BTreeMap<String, PathBase> = plan
        .tasks
        .iter()
        .filter(|t| t.output.as_ref().is_some_and(|o| o.findings))
        .map(|t| (t.id.clone(), PathBase::new(&t.workspace.repo, &t.workspace.workdir)))
        .collect();
    if bases.is_empty() {
        return None;
    }
    let reporter =
        dracode::report::outputs::SarifReporter::new(&args.out, bases, Box::new(std::io::stderr()), redactor.clone()).with_run_id(run_id);
    Some(reporter.with_annotations(env.get("GITHUB_ACTIONS").is_some_and(|v| v == "true")))
}

/// GitHub Actions: annotations under `GITHUB_ACTIONS=true`, step outputs to `--github-output`
/// (else `$GITHUB_OUTPUT` under Actions).
fn github_reporters(args: &RunArgs, redactor: &Arc<Redactor>, env: &BTreeMap<String, String>) -> Vec<Box<dyn Reporter>> {
    use report::github::{AnnotationReporter, OutputsReporter, in_actions};
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
    let actions = in_actions(env);
    if actions {
        let workspace = env.get("GITHUB_WORKSPACE").map(PathBuf::from);
        reporters.push(Box::new(AnnotationReporter::new(Box::new(std::io::stderr()), redactor.clone(), workspace)));
    }
    let from_env = env.get("GITHUB_OUTPUT").filter(|p| actions && !p.is_empty()).map(PathBuf::from);
    if let Some(path) = args.github_output.clone().or(from_env) {
        let out = std::path::absolute(&args.out).unwrap_or_else(|_| args.out.clone());
        reporters.push(Box::new(OutputsReporter::new(path, out)));
    }
    reporters
}

/// OpenTelemetry export, when an endpoint is given (`--otlp-endpoint` or
/// `OTEL_EXPORTER_OTLP_ENDPOINT`); without one no exporter is built.
#[cfg(feature = "otel")]
fn otel_reporter(
    args: &RunArgs,
    plan: &plan::Plan,
    shard: Option<&str>,
    redactor: &Arc<Redactor>,
    env: &BTreeMap<String, String>,
) -> Option<Box<dyn Reporter>> {
    use report::otel::{OtelConfig, OtelReporter};
    let config = OtelConfig::from_env(env, args.otlp_endpoint.as_deref(), shard, args.otel_log_content)?;
    let providers = plan.tasks.iter().map(|t| (t.provider.name.clone(), t.provider.kind));
    Some(Box::new(OtelReporter::new(config, redactor.clone()).with_providers(providers)))
}

/// Built without the `otel` feature: no export.
#[cfg(not(feature = "otel"))]
fn otel_reporter(
    _: &RunArgs,
    _: &plan::Plan,
    _: Option<&str>,
    _: &Arc<Redactor>,
    _: &BTreeMap<String, String>,
) -> Option<Box<dyn Reporter>> {
    None
}

/// A run id that sorts by time: `20261122T133207Z-1a2b`.
fn run_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = now.chars().filter(char::is_ascii_alphanumeric).collect();
    format!("{compact}-{:04x}", std::process::id() & 0xffff)
}
