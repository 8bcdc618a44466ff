//! `dracode run`: the flags made into a batch ([`crate::engine`]), its plan shown (`--dry-run`),
//! the displays chosen (a live view on a terminal, progress lines in CI, GitHub, OpenTelemetry,
//! `--jsonl`), and how it ended printed.

use super::{RunArgs, config_files_line, usage_error};
use crate::batch::options::NoTasks;
use crate::batch::plan;
use crate::engine::{Batch, BatchBuilder};
use crate::events::Reporter;
use crate::report::{
    self,
    jsonl::JsonlReporter,
    live::LiveReporter,
    progress::{ProgressReporter, Verbosity},
};
use anyhow::Context;
use dracode_results::exit_codes;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `dracode run`: plans the batch, shows the plan (`--dry-run`) or runs it with the displays
/// the flags ask for, and prints how it ended.
pub(super) fn run_batch(args: RunArgs, cwd: &Path, env: BTreeMap<String, String>) -> anyhow::Result<i32> {
    let batch = match BatchBuilder::new(args.options(), cwd, env.clone()).build() {
        Ok(batch) => batch,
        Err(e) => return usage_error(&e),
    };
    for warning in &batch.plan.warnings {
        eprintln!("warning: {warning}");
    }
    if let Some(rerun) = batch.nothing_to_rerun() {
        eprintln!("nothing to rerun: every task in {} passed; {} is left as it was", rerun.path.display(), args.out.display());
        return Ok(exit_codes::OK);
    }
    let if_no_tasks = announce_empty_selection(&args, &batch.plan);
    if args.dry_run {
        eprintln!("config: {}", config_files_line(&batch.plan.config_files));
        print_dry_run(&batch.plan);
        if batch.plan.tasks.is_empty() {
            return Ok(if_no_tasks);
        }
        let ready = args.offline || super::preflight_passes(&batch.plan.tasks);
        return Ok(if ready { exit_codes::OK } else { exit_codes::NOT_JUDGED });
    }
    let displays = displays(&args, &batch, &env)?;
    let summary = batch.execute(displays, say_interrupted)?;
    for note in &summary.notes {
        eprintln!("{note}");
    }
    report_artifact_failures(&summary.failures);
    Ok(summary.exit_code)
}

/// What the first SIGINT/SIGTERM of a run says.
pub(super) fn say_interrupted() {
    eprintln!("dracode: interrupted; cancelling running tasks and writing results (again to quit at once)");
}

/// The most artifact failures printed one by one; the rest are counted.
pub(super) const SHOWN_FAILURES: usize = 20;

/// Prints each artifact that could not be written (file and OS error), at most
/// [`SHOWN_FAILURES`], then what the exit code means.
pub(super) fn report_artifact_failures(failures: &[String]) {
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
pub(super) fn announce_empty_selection(args: &RunArgs, plan: &plan::Plan) -> i32 {
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

/// `--dry-run`: each task, its agent (when not dracode's own), provider, model, isolation, repository, time limits, its check
/// (with `check_before`, `check_repairs`), `protect`, the effective `require_change`, `repeat`,
/// the setup and its network, and whether the provider is configured; then (on stderr) how to
/// see a task's sandbox.
pub(super) fn print_dry_run(plan: &plan::Plan) {
    for p in &plan.tasks {
        let status = p.provider.not_configured_reason().map_or("ready".to_string(), |w| format!("not configured: {w}"));
        let limit = |d: Option<std::time::Duration>| d.map_or("none".to_string(), |d| humantime::format_duration(d).to_string());
        println!(
            "{}\t{}provider={} model={} isolation={} repo={} {} timeout={} idle_timeout={}{}\t{status}",
            p.id,
            p.agent.as_ref().map_or(String::new(), |a| format!("agent={} ", a.name)),
            p.provider.name,
            p.provider.model.as_deref().unwrap_or("-"),
            p.workspace.isolation.as_str(),
            dracode_input::lexical(&p.workspace.repo).display(),
            grading(p),
            limit(p.timeout),
            limit(p.idle_timeout),
            extras(p),
        );
    }
    if let Some(task) = plan.tasks.iter().find(|t| t.sandbox != dracode_sandbox::SandboxMode::Off) {
        eprintln!("what a task's commands may read, write and reach: dracode sandbox --task {} {}", task.id, task.manifest.display());
    }
}

/// How a task is graded, as `--dry-run` shows it: `check="…" check_before=… check_repairs=N`,
/// `protect=[…]`, and `require_change` — `true`, `false`, or `if_check_passes_before` (a task
/// whose check already passed before the agent must change something: the check graded nothing).
fn grading(p: &crate::batch::spec::TaskSpec) -> String {
    let mut text = String::new();
    if let Some(check) = &p.check {
        text.push_str(&format!("check={:?} check_before={} ", check.command, check.before));
        if check.repairs > 0 {
            text.push_str(&format!("check_repairs={} ", check.repairs));
        }
    }
    if !p.protect.is_empty() {
        text.push_str(&format!("protect={:?} ", p.protect));
    }
    let require = match p.require_change {
        _ if p.require_change.applies() => "true",
        crate::batch::spec::RequireChange::Unset if p.check.as_ref().is_some_and(|c| c.before) => "if_check_passes_before",
        _ => "false",
    };
    text.push_str(&format!("require_change={require}"));
    text
}

/// The rest of a `--dry-run` line: `repeat`, the setup and its network.
fn extras(p: &crate::batch::spec::TaskSpec) -> String {
    let mut extra = String::new();
    if p.repeat.count > 1 {
        extra.push_str(&format!(" repeat={} min_pass_rate={}", p.repeat.count, p.repeat.min_pass_rate));
    }
    if let Some(setup) = &p.setup {
        extra.push_str(&format!(" setup={:?}", setup.command));
        let network = match &setup.network {
            None => "task".to_string(),
            Some(dracode_sandbox::egress::Network::Off) => "off".to_string(),
            Some(dracode_sandbox::egress::Network::All) => "all".to_string(),
            Some(dracode_sandbox::egress::Network::Allow(list)) => format!("{:?}", list.allowed()),
        };
        extra.push_str(&format!(" setup_network={network}"));
    }
    extra
}

/// The run's displays and streams beside its artifacts (which the engine writes): the live
/// display on a terminal (plain progress lines in CI), GitHub, OpenTelemetry and `--jsonl`.
pub(super) fn displays(args: &RunArgs, batch: &Batch, env: &BTreeMap<String, String>) -> anyhow::Result<Vec<Box<dyn Reporter>>> {
    let (plan, redactor) = (&batch.plan, batch.redactor());
    let mut reporters: Vec<Box<dyn Reporter>> = Vec::new();
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
    reporters.extend(otel_reporter(args, plan, batch.shard(), redactor, env));
    if let Some(path) = &args.jsonl {
        // The bus stamps every line with the run's id and shard, as it does `results.jsonl`'s.
        let stream = if path.as_os_str() == "-" {
            JsonlReporter::new(Box::new(std::io::stdout()), redactor.clone()).named("stdout (--jsonl -)")
        } else {
            JsonlReporter::create(path, redactor.clone()).with_context(|| format!("--jsonl {}", path.display()))?
        };
        reporters.push(Box::new(stream));
    }
    Ok(reporters)
}

/// GitHub Actions: annotations under `GITHUB_ACTIONS=true`, step outputs to `--github-output`
/// (else `$GITHUB_OUTPUT` under Actions).
pub(super) fn github_reporters(args: &RunArgs, redactor: &Arc<Redactor>, env: &BTreeMap<String, String>) -> Vec<Box<dyn Reporter>> {
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
pub(super) fn otel_reporter(
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
pub(super) fn otel_reporter(
    _: &RunArgs,
    _: &plan::Plan,
    _: Option<&str>,
    _: &Arc<Redactor>,
    _: &BTreeMap<String, String>,
) -> Option<Box<dyn Reporter>> {
    None
}
