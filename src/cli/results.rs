//! The commands on an output folder: `merge`, `report`, `regrade`, `combine`.

use super::usage_error;
use crate::report::{
    self,
    progress::{ProgressReporter, Verbosity},
};
use anyhow::Context;
use dracode_results::exit_codes;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// `dracode combine OUT`: the passed tasks' patches onto one tree ([`crate::batch::combine`]);
/// interrupted, its temporary working tree is removed before exiting 130/143.
pub(super) fn combine(args: &crate::cli::CombineArgs, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use crate::batch::combine::{self, CombineError, CombineOptions};
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
            code = crate::engine::signals::interrupted() => Err(code),
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
/// ([`crate::batch::regrade`]); a new results set in `--out` (default `<OUT>-regraded`).
pub(super) fn regrade(args: &crate::cli::RegradeArgs, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use crate::batch::regrade::{self, RegradeOptions};
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
    let redactor = Arc::new(Redactor::from_env(env.clone(), Vec::new()));
    let progress = ProgressReporter::new(Box::new(std::io::stderr()), Verbosity::Normal, job.len()).with_redactor(redactor);
    let summary = crate::engine::regrade::execute(job, &opts, env, vec![Box::new(progress)])?;
    super::run::report_artifact_failures(&summary.failures);
    eprintln!("regraded results: {}", out.display());
    Ok(summary.exit_code)
}

/// `dracode report OUT`: `OUT/report.html` written again (and its record kept in `save`).
pub(super) fn write_report(out: &Path, history: &[PathBuf], save: Option<&Path>) -> anyhow::Result<i32> {
    if !out.join("results.jsonl").is_file() {
        return usage_error(&format!("{}: not the output folder of a dracode run (no results.jsonl)", out.display()));
    }
    match report::page::write(out, history, save) {
        Ok(path) => {
            eprintln!("wrote {}", path.display());
            Ok(exit_codes::OK)
        }
        Err(e @ dracode_report_page::PageError::Write { .. }) => {
            eprintln!("error: {e}");
            Ok(exit_codes::ARTIFACTS_FAILED)
        }
        Err(e) => usage_error(&e),
    }
}

/// `dracode merge`: shard outputs into one.
pub(super) fn merge(inputs: &[PathBuf], out: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
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
