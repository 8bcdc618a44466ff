//! `dracode publish OUT`: a run's output folder as pull requests on GitHub, or a comment
//! ([`crate::publish`]); prints one line per task and what happened to it.

use super::usage_error;
use crate::github::client::DEFAULT_API_URL;
use crate::publish::{self, Mode, PublishOptions};
use anyhow::Context;
use clap::Args;
use dracode_secrets::Redactor;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::{Path, PathBuf};

/// `dracode publish` options.
#[derive(Debug, Clone, Args)]
pub struct PublishArgs {
    /// The output folder of the run (`dracode run --out`, or `dracode merge --out`).
    pub out: PathBuf,
    /// One pull request with `dracode combine`'s union (OUT/combined.patch) instead of one per task.
    #[arg(long, conflicts_with = "comment_on")]
    pub combined: bool,
    /// Report the run as one comment on this pull request or issue instead (no branch is pushed).
    #[arg(long, value_name = "NUMBER")]
    pub comment_on: Option<u64>,
    /// The GitHub repository, OWNER/NAME.
    #[arg(long, value_name = "OWNER/NAME", env = "GITHUB_REPOSITORY")]
    pub repository: Option<String>,
    /// The environment variable that holds the token.
    #[arg(long, value_name = "VAR", default_value = "GITHUB_TOKEN")]
    pub token_env: String,
    /// GitHub's REST API (a GitHub Enterprise Server's is https://HOST/api/v3).
    #[arg(long, value_name = "URL", env = "GITHUB_API_URL", default_value = DEFAULT_API_URL)]
    pub api_url: String,
    /// The git remote the branches are pushed to: a remote's name, a URL or a path.
    #[arg(long, value_name = "NAME", default_value = "origin")]
    pub remote: String,
    /// A folder in the git repository the run worked on.
    #[arg(long, value_name = "DIR", default_value = ".")]
    pub repo: PathBuf,
    /// The prefix of each task's branch (the task's id follows).
    #[arg(long, value_name = "PREFIX", default_value = "dracode/", conflicts_with_all = ["combined", "comment_on"])]
    pub branch_prefix: String,
    /// With --combined: the branch of the union.
    #[arg(long, value_name = "NAME", default_value = "dracode/combined", requires = "combined")]
    pub branch: String,
    /// The branch the pull requests merge into (default: the remote's default branch).
    #[arg(long, value_name = "NAME")]
    pub base_branch: Option<String>,
    /// The run's report.html as published somewhere; each task links to its view (URL#<task id>).
    #[arg(long, value_name = "URL")]
    pub report_url: Option<String>,
    /// Print what would be pushed, opened, updated or skipped; push and write nothing.
    #[arg(long)]
    pub dry_run: bool,
    /// Leave the issues that tasks were made from (a manifest's [issues]) without dracode's comment.
    #[arg(long)]
    pub no_issue_comments: bool,
}

/// Runs `dracode publish`.
pub(super) fn publish(args: &PublishArgs, cwd: &Path, env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    let mode = match (args.combined, args.comment_on) {
        (true, _) => Mode::Combined { branch: args.branch.clone() },
        (false, Some(number)) => Mode::Comment { number },
        (false, None) => Mode::Tasks { prefix: args.branch_prefix.clone() },
    };
    let opts = PublishOptions {
        out: cwd.join(&args.out),
        repo_dir: cwd.join(&args.repo),
        remote: args.remote.clone(),
        repository: args.repository.clone().filter(|r| !r.trim().is_empty()),
        api_url: args.api_url.clone(),
        token: env.get(&args.token_env).cloned(),
        token_env: args.token_env.clone(),
        mode,
        base_branch: args.base_branch.clone(),
        report_url: args.report_url.clone(),
        dry_run: args.dry_run,
        issue_comments: !args.no_issue_comments,
        env: env.clone(),
    };
    let redactor = Redactor::from_env(env.clone(), Vec::new());
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().context("cannot start the async runtime")?;
    let report = match runtime.block_on(publish::publish(&opts, &redactor)) {
        Ok(report) => report,
        Err(e) if e.exit_code() == dracode_results::exit_codes::USAGE => return usage_error(&e),
        Err(e) => {
            eprintln!("error: {e}");
            return Ok(e.exit_code());
        }
    };
    let base = report.base_branch.as_deref().map_or(String::new(), |b| format!(", pull requests into {b}"));
    let dry = if report.dry_run { " (dry run: nothing is pushed or written)" } else { "" };
    eprintln!("dracode publish: run {} into {}{base}{dry}", report.run_id, report.repository);
    for item in &report.items {
        println!("{}\t{}", item.subject, item.describe(report.dry_run));
    }
    let failed: Vec<_> = report.items.iter().filter(|i| matches!(i.action, publish::Action::Failed { .. })).collect();
    for item in &failed {
        eprintln!("error: {}: {}", item.subject, item.describe(report.dry_run));
    }
    if !report.dry_run
        && let Some(path) = env.get("GITHUB_STEP_SUMMARY").filter(|p| !p.is_empty())
    {
        let appended =
            std::fs::OpenOptions::new().append(true).create(true).open(path).and_then(|mut f| f.write_all(report.markdown().as_bytes()));
        if let Err(e) = appended {
            eprintln!("error: cannot append to $GITHUB_STEP_SUMMARY {path}: {e}");
            return Ok(dracode_results::exit_codes::ARTIFACTS_FAILED);
        }
    }
    if !failed.is_empty() {
        eprintln!("error: {} publication(s) failed (exit code {})", failed.len(), report.exit_code());
    }
    Ok(report.exit_code())
}
