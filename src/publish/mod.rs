//! `dracode publish OUT`: a run's output folder turned into review on GitHub — one pull request
//! per passed task (branch `dracode/<task-id>`), or one pull request with `dracode combine`'s
//! union (`--combined`), or one comment on an existing pull request or issue (`--comment-on N`)
//! — through GitHub's REST API ([`crate::github`]) and `git push`.
//!
//! **Idempotent across nights.** A task's commit is its recorded patch (`diffs/<id>.patch`)
//! applied to the commit its attempt started from (`base_commit`), made by [`git::Git`] in a
//! scratch object store. Its branch is pushed with a lease: created when absent; moved only
//! when its tip is a commit dracode made ([`git::CommitInfo::made_by_dracode`]: committer
//! `dracode <dracode@localhost>` and the trailers `Dracode-Task: <id>`, `Dracode-Run: <run>`);
//! left as it is when the new commit would hold the same tree on the same base; and never
//! touched when someone else pushed to it (the task is reported skipped). The open pull request
//! of the branch, found by its head, has its title and body updated; one is opened only when
//! none is.
//!
//! **Dry run** makes the commits in the scratch store and looks (read-only) at the remote's
//! branches and, with a token, at the open pull requests; it pushes nothing and writes nothing to
//! GitHub, the repository or the output folder.

pub mod body;
mod flow;
pub mod git;

use crate::batch::combine::{self, CombineReport};
use crate::github::{Client, GithubError, Repo};
use dracode_results::exit_codes;
use dracode_results::output_folder::{self, OutputFolder, ReadError};
use dracode_secrets::Redactor;
use git::{Git, GitError};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// What `dracode publish` is asked to do.
#[derive(Debug, Clone)]
pub struct PublishOptions {
    /// The run's output folder.
    pub out: PathBuf,
    /// A folder in the git repository the run worked on (it holds the base commits).
    pub repo_dir: PathBuf,
    /// The remote to push to: a remote's name, a URL or a path.
    pub remote: String,
    /// The GitHub repository, `OWNER/NAME` (`--repository`, `GITHUB_REPOSITORY`).
    pub repository: Option<String>,
    /// The API's base URL.
    pub api_url: String,
    /// The token (the value of the variable `token_env` names).
    pub token: Option<String>,
    /// The name of the variable the token is read from, for messages.
    pub token_env: String,
    /// What to publish.
    pub mode: Mode,
    /// The branch pull requests merge into (default: the remote's default branch).
    pub base_branch: Option<String>,
    /// The run's report page, for links to each task (`URL#<id>`).
    pub report_url: Option<String>,
    /// Show what would be done; push and write nothing.
    pub dry_run: bool,
    /// Keep a comment on the issue each task was made from (a manifest's `[issues]`).
    pub issue_comments: bool,
    /// The environment git runs with (its credentials and config).
    pub env: BTreeMap<String, String>,
}

/// What to publish.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Mode {
    /// One pull request per passed task, on branch `prefix` + the task's id.
    Tasks {
        /// The branches' prefix (`dracode/`).
        prefix: String,
    },
    /// One pull request with `dracode combine`'s union (`OUT/combined.patch`), on `branch`.
    Combined {
        /// The branch.
        branch: String,
    },
    /// One comment reporting the run on issue or pull request `number`.
    Comment {
        /// The issue or pull request.
        number: u64,
    },
}

/// Why nothing could be published: bad input (exit 2), or a remote that cannot be read (exit 3).
#[derive(Debug, thiserror::Error)]
pub enum PublishError {
    /// The output folder cannot be read.
    #[error(transparent)]
    Folder(#[from] ReadError),
    /// No `--repository` and no `GITHUB_REPOSITORY`.
    #[error("no GitHub repository to publish to: pass --repository OWNER/NAME, or set GITHUB_REPOSITORY")]
    NoRepository,
    /// A bad `--repository` or API URL.
    #[error(transparent)]
    Github(GithubError),
    /// No token (and not a dry run).
    #[error(
        "${var} is not set or empty: publishing needs a GitHub token with contents: write and pull-requests: write \
         (issues: write for --comment-on); name another variable with --token-env (docs/src/recipes/pull-requests.md)"
    )]
    NoToken {
        /// The variable.
        var: String,
    },
    /// Not a git repository, or no such remote.
    #[error(transparent)]
    Git(GitError),
    /// A branch name git does not allow.
    #[error("{flag} {name:?}: not a valid branch name")]
    BranchName {
        /// The flag that gave it.
        flag: &'static str,
        /// The branch.
        name: String,
    },
    /// `--combined` without `dracode combine`'s report, or with another run's.
    #[error("{}: {reason}", path.display())]
    Combine {
        /// The file.
        path: PathBuf,
        /// What is wrong.
        reason: String,
    },
    /// The remote could not be asked for its default branch.
    #[error("cannot ask {remote} for its default branch (pass --base-branch to name it): {source}")]
    BaseBranch {
        /// The remote.
        remote: String,
        /// Why.
        source: GitError,
    },
}

impl PublishError {
    /// The exit code: 3 when the remote could not be read, else 2 (bad input).
    pub fn exit_code(&self) -> i32 {
        match self {
            PublishError::BaseBranch { .. } => exit_codes::ARTIFACTS_FAILED,
            _ => exit_codes::USAGE,
        }
    }
}

/// What was published, one [`Item`] per task (or the union, or the comment).
#[derive(Debug, Clone)]
pub struct PublishReport {
    /// The run.
    pub run_id: String,
    /// `OWNER/NAME`.
    pub repository: String,
    /// The branch the pull requests merge into (none for a comment).
    pub base_branch: Option<String>,
    /// Whether nothing was pushed or written (`--dry-run`).
    pub dry_run: bool,
    /// What happened to each.
    pub items: Vec<Item>,
}

impl PublishReport {
    /// 0 when everything that could be published was (or would be); 3 when a publication failed.
    pub fn exit_code(&self) -> i32 {
        if self.items.iter().any(|i| matches!(i.action, Action::Failed { .. })) { exit_codes::ARTIFACTS_FAILED } else { exit_codes::OK }
    }

    /// The report for people: a Markdown table (also for `$GITHUB_STEP_SUMMARY`).
    pub fn markdown(&self) -> String {
        let mode = if self.dry_run { " (dry run: nothing pushed or written)" } else { "" };
        let mut md = format!("## dracode publish{mode}\n\nRun `{}` into `{}`.\n\n", self.run_id, self.repository);
        md.push_str("| Task | Branch | What happened |\n|---|---|---|\n");
        for item in &self.items {
            let branch = item.branch.as_deref().map_or("-".to_string(), |b| format!("`{b}`"));
            let what = item.describe(self.dry_run).replace('|', "\\|");
            md.push_str(&format!("| `{}` | {branch} | {what} |\n", item.subject));
        }
        md
    }
}

/// One task (or the union, or the comment) and what happened to it.
#[derive(Debug, Clone)]
pub struct Item {
    /// The task's id; `combined` for the union; `#N` for a comment.
    pub subject: String,
    /// Its branch.
    pub branch: Option<String>,
    /// The pull request's title.
    pub title: Option<String>,
    /// What happened to the branch.
    pub push: Option<Push>,
    /// What happened on GitHub.
    pub action: Action,
}

impl Item {
    /// One line for people: the branch, then the pull request or comment.
    pub fn describe(&self, dry_run: bool) -> String {
        let would = if dry_run { "would be " } else { "" };
        let branch = match &self.push {
            Some(Push::New { commit }) => format!("branch {would}created at {}; ", short(commit)),
            Some(Push::Moved { from, to }) => format!("branch {would}moved {} → {}; ", short(from), short(to)),
            Some(Push::Unchanged { commit }) => format!("branch up to date at {}; ", short(commit)),
            None => String::new(),
        };
        let title = self.title.as_deref().map_or(String::new(), |t| format!(" \"{t}\""));
        let action = match &self.action {
            Action::Created { number, url } => format!("pull request #{number} opened{title}: {url}"),
            Action::Updated { number, url } => format!("pull request #{number} updated{title}: {url}"),
            Action::Commented { url } => format!("commented: {url}"),
            Action::WouldCreate => format!("would open a pull request{title}"),
            Action::WouldUpdate { number, url } => format!("would update pull request #{number}{title}: {url}"),
            Action::CommentUpdated { url } => format!("comment updated: {url}"),
            Action::WouldComment => "would comment".to_string(),
            Action::WouldUpdateComment { url } => format!("would update the comment {url}"),
            Action::NotLookedUp => format!("would open or update the pull request{title} (not looked up: no token)"),
            Action::NotPublished { reason } => format!("not published: {reason}"),
            Action::Skipped { reason } => format!("skipped: {reason}"),
            Action::Failed { error } => format!("FAILED: {error}"),
        };
        format!("{branch}{action}")
    }
}

/// What happened (or would happen) to a branch.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Push {
    /// Created at `commit`.
    New {
        /// The commit.
        commit: String,
    },
    /// Moved from dracode's earlier commit to a new one.
    Moved {
        /// The earlier tip.
        from: String,
        /// The new one.
        to: String,
    },
    /// Left where it is: its tip holds the same change on the same base.
    Unchanged {
        /// The tip.
        commit: String,
    },
}

/// What happened (or would happen) on GitHub.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Action {
    /// A pull request opened.
    Created {
        /// Its number.
        number: u64,
        /// Its page.
        url: String,
    },
    /// The branch's open pull request updated (title and body).
    Updated {
        /// Its number.
        number: u64,
        /// Its page.
        url: String,
    },
    /// A comment added.
    Commented {
        /// Its place in the conversation.
        url: String,
    },
    /// Dry run: a pull request would be opened.
    WouldCreate,
    /// Dry run: the branch's open pull request would be updated.
    WouldUpdate {
        /// Its number.
        number: u64,
        /// Its page.
        url: String,
    },
    /// The comment dracode left before updated.
    CommentUpdated {
        /// Its place in the conversation.
        url: String,
    },
    /// Dry run: the comment would be added.
    WouldComment,
    /// Dry run: the comment dracode left before would be updated.
    WouldUpdateComment {
        /// Its place in the conversation.
        url: String,
    },
    /// Dry run without a token: the pull requests were not looked up.
    NotLookedUp,
    /// Nothing to publish: the task did not pass, or changed nothing.
    NotPublished {
        /// Why.
        reason: String,
    },
    /// Left alone on purpose: the branch has commits dracode did not make.
    Skipped {
        /// Why.
        reason: String,
    },
    /// The publication failed.
    Failed {
        /// Why.
        error: String,
    },
}

/// Publishes the run in `opts.out` as `opts.mode` says; `redactor` masks the configured secrets
/// in every title, body and comment.
pub async fn publish(opts: &PublishOptions, redactor: &Redactor) -> Result<PublishReport, PublishError> {
    let run = output_folder::read(&opts.out)?;
    let repo = Repo::parse(opts.repository.as_deref().ok_or(PublishError::NoRepository)?).map_err(PublishError::Github)?;
    let token = opts.token.as_deref().filter(|t| !t.trim().is_empty());
    if token.is_none() && !opts.dry_run {
        return Err(PublishError::NoToken { var: opts.token_env.clone() });
    }
    let github = token.map(|t| Client::new(&opts.api_url, t)).transpose().map_err(PublishError::Github)?;
    let combined = match &opts.mode {
        Mode::Tasks { prefix } => {
            valid_branch("--branch-prefix", &format!("{prefix}task"))?;
            None
        }
        Mode::Combined { branch } => {
            valid_branch("--branch", branch)?;
            Some(read_combine(&opts.out, &run)?)
        }
        Mode::Comment { .. } => None,
    };
    let git = match opts.mode {
        Mode::Comment { .. } => None,
        _ => Some(Git::open(&opts.repo_dir, &opts.remote, &opts.env).map_err(PublishError::Git)?),
    };
    // The remote is asked for its default branch only when a pull request may be opened.
    let publishable = match opts.mode {
        Mode::Tasks { .. } => {
            run.tasks.iter().any(|t| t.outcome.status.is_pass() && t.diff.as_deref().is_some_and(|d| !d.trim().is_empty()))
        }
        Mode::Combined { .. } => true,
        Mode::Comment { .. } => false,
    };
    let base_branch = match (&git, &opts.base_branch) {
        (Some(_), Some(given)) => Some(given.clone()),
        // A dry run says what it would do even when the remote cannot say (an empty one).
        (Some(git), None) if publishable && opts.dry_run => default_branch(git, &opts.remote).ok(),
        (Some(git), None) if publishable => Some(default_branch(git, &opts.remote)?),
        _ => None,
    };
    let publisher = flow::Publisher {
        opts,
        run: &run,
        git: git.as_ref(),
        github: github.as_ref(),
        repo: &repo,
        base_branch: base_branch.as_deref(),
        redactor,
    };
    let mut items = match &opts.mode {
        Mode::Tasks { prefix } => publisher.tasks(prefix).await,
        Mode::Combined { branch } => match &combined {
            Some((report, patch)) => vec![publisher.combined(report, patch, branch).await],
            None => Vec::new(),
        },
        Mode::Comment { number } => vec![publisher.comment(*number).await],
    };
    if opts.issue_comments && !matches!(opts.mode, Mode::Comment { .. }) {
        let applied = combined.as_ref().map(|(report, _)| report.applied.as_slice());
        items.extend(publisher.issue_reports(&items, applied).await);
    }
    Ok(PublishReport { run_id: run.run_id.clone(), repository: repo.to_string(), base_branch, dry_run: opts.dry_run, items })
}

/// `name` when git allows it as a branch name.
fn valid_branch(flag: &'static str, name: &str) -> Result<(), PublishError> {
    if git2::Branch::name_is_valid(name).unwrap_or(false) { Ok(()) } else { Err(PublishError::BranchName { flag, name: name.to_string() }) }
}

/// The remote's default branch, which the pull requests merge into.
fn default_branch(git: &Git, remote: &str) -> Result<String, PublishError> {
    match git.default_branch() {
        Ok(Some(branch)) => Ok(branch),
        Ok(None) => Err(PublishError::BaseBranch {
            remote: remote.to_string(),
            source: GitError::Failed { command: "ls-remote".into(), message: "its HEAD names no branch".into() },
        }),
        Err(source) => Err(PublishError::BaseBranch { remote: remote.to_string(), source }),
    }
}

/// `dracode combine`'s report and union of this run: `OUT/combine.json`, `OUT/combined.patch`.
fn read_combine(out: &Path, run: &OutputFolder) -> Result<(CombineReport, String), PublishError> {
    let path = out.join("combine.json");
    let problem = |reason: String| PublishError::Combine { path: path.clone(), reason };
    let text = std::fs::read_to_string(&path).map_err(|e| {
        problem(format!("{e}: --combined publishes `dracode combine`'s union; run `dracode combine {}` first", out.display()))
    })?;
    let report: CombineReport = serde_json::from_str(&text).map_err(|e| problem(format!("not dracode combine's report: {e}")))?;
    if report.run_id != run.run_id {
        return Err(problem(format!(
            "it combines run {}, not this folder's run {}: run `dracode combine` again",
            report.run_id, run.run_id
        )));
    }
    let patch_path = out.join(combine::PATCH_FILE);
    let patch = match report.patch_path {
        Some(_) => std::fs::read_to_string(&patch_path)
            .map_err(|e| PublishError::Combine { path: patch_path.clone(), reason: format!("cannot read the union: {e}") })?,
        None => String::new(),
    };
    Ok((report, patch))
}

/// The first 12 characters of a commit id.
fn short(commit: &str) -> &str {
    &commit[..commit.len().min(12)]
}
