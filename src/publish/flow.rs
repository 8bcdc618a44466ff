//! One publication at a time: a task's (or the union's) branch brought up to date with a lease,
//! then its open pull request updated or one opened; or the run's comment.

use super::body;
use super::git::{Git, GitError};
use super::{Action, Item, PublishOptions, Push};
use crate::batch::combine::CombineReport;
use crate::github::pulls::{NewPull, PullRequest, PullUpdate};
use crate::github::{Client, GithubError, Repo};
use crate::report::short_reason;
use dracode_results::IssueOrigin;
use dracode_results::output_folder::{FinishedTask, OutputFolder};
use dracode_secrets::Redactor;

/// What one publication needs.
pub(super) struct Publisher<'a> {
    pub(super) opts: &'a PublishOptions,
    pub(super) run: &'a OutputFolder,
    pub(super) git: Option<&'a Git>,
    /// `None` in a dry run without a token.
    pub(super) github: Option<&'a Client>,
    pub(super) repo: &'a Repo,
    pub(super) base_branch: Option<&'a str>,
    pub(super) redactor: &'a Redactor,
}

/// A branch to bring up to date and the pull request to go with it.
struct Change<'a> {
    branch: &'a str,
    base: &'a str,
    patch: &'a str,
    message: String,
    /// The task whose branch it is (`None`: the union's).
    task: Option<&'a str>,
    title: String,
    body: String,
}

/// Where a branch stands.
enum BranchState {
    /// Its tip is someone else's commit.
    Foreign { tip: String, committer: String },
    /// Pushed (or would be), or up to date.
    Ready(Push),
}

impl Publisher<'_> {
    /// Every task of the run, in manifest order.
    pub(super) async fn tasks(&self, prefix: &str) -> Vec<Item> {
        let mut items = Vec::with_capacity(self.run.tasks.len());
        for task in &self.run.tasks {
            items.push(self.task(task, prefix).await);
        }
        items
    }

    /// A task: not published unless it passed with a change; else its branch and pull request.
    async fn task(&self, task: &FinishedTask, prefix: &str) -> Item {
        let o = &task.outcome;
        let mut item = Item { subject: task.task_id.clone(), branch: None, title: None, push: None, action: Action::WouldCreate };
        if !o.status.is_pass() {
            let why = short_reason(o);
            let reason = if why.is_empty() { o.status.as_str().to_string() } else { format!("{}: {why}", o.status.as_str()) };
            item.action = Action::NotPublished { reason: self.clean(&reason) };
            return item;
        }
        let Some(patch) = task.diff.as_deref().filter(|d| !d.trim().is_empty()) else {
            item.action = Action::NotPublished { reason: "passed without changing a file".to_string() };
            return item;
        };
        let branch = format!("{prefix}{}", task.task_id);
        let title = self.clean(&body::task_title(&task.task_id));
        (item.branch, item.title) = (Some(branch.clone()), Some(title.clone()));
        if super::valid_branch("--branch-prefix", &branch).is_err() {
            item.action =
                Action::Failed { error: format!("its branch {branch:?} is not a name git allows (pass another --branch-prefix)") };
            return item;
        }
        let Some(base) = task.base_commit.as_deref() else {
            item.action = Action::Failed { error: "its attempt recorded no base commit (it did not run in a git repository)".into() };
            return item;
        };
        let change = Change {
            branch: &branch,
            base,
            patch,
            message: self.clean(&body::task_commit_message(task, &self.run.run_id)),
            task: Some(&task.task_id),
            title,
            body: self.clean(&body::task_body(task, &self.run.run_id, &branch, self.opts.report_url.as_deref())),
        };
        (item.push, item.action) = self.publish_change(&change).await;
        item
    }

    /// The union `dracode combine` made: published when its check (if any) passed.
    pub(super) async fn combined(&self, report: &CombineReport, patch: &str, branch: &str) -> Item {
        let title = self.clean(&body::combined_title(report));
        let mut item = Item {
            subject: "combined".into(),
            branch: Some(branch.to_string()),
            title: Some(title.clone()),
            push: None,
            action: Action::WouldCreate,
        };
        if let Some(check) = report.check.as_ref().filter(|c| c.exit_code != Some(0)) {
            let reason = format!("the check on the union, `{}`, failed (see combine.md)", check.command);
            item.action = Action::NotPublished { reason: self.clean(&reason) };
            return item;
        }
        if patch.trim().is_empty() {
            item.action = Action::NotPublished { reason: "the union changes nothing".into() };
            return item;
        }
        let change = Change {
            branch,
            base: &report.base_commit,
            patch,
            message: self.clean(&body::combined_commit_message(report)),
            task: None,
            title,
            body: self.clean(&body::combined_body(report, self.run, branch, self.opts.report_url.as_deref())),
        };
        (item.push, item.action) = self.publish_change(&change).await;
        item
    }

    /// The run's report as a comment on issue or pull request `number`.
    pub(super) async fn comment(&self, number: u64) -> Item {
        let text = self.clean(&body::run_comment(self.run, self.opts.report_url.as_deref()));
        let mut item = Item { subject: format!("#{number}"), branch: None, title: None, push: None, action: Action::WouldComment };
        if self.opts.dry_run {
            return item;
        }
        item.action = match self.github {
            Some(github) => match github.create_comment(self.repo, number, &text).await {
                Ok(comment) => Action::Commented { url: comment.html_url },
                Err(e) => Action::Failed { error: e.to_string() },
            },
            None => Action::NotLookedUp,
        };
        item
    }

    /// For each task made from an issue, the comment on that issue kept up to date, saying what
    /// became of the task's pull request (its item among `items`; with `applied`, the union's for
    /// the tasks it holds).
    pub(super) async fn issue_reports(&self, items: &[Item], applied: Option<&[String]>) -> Vec<Item> {
        let mut reports = Vec::new();
        if !self.run.tasks.iter().any(|t| t.issue.is_some()) {
            return reports;
        }
        let me = match self.github {
            Some(github) => github.me().await,
            None => None,
        };
        for task in &self.run.tasks {
            let Some(issue) = &task.issue else { continue };
            let own = match applied {
                Some(applied) if applied.contains(&task.task_id) => items.first(),
                Some(_) => None,
                None => items.iter().find(|i| i.subject == task.task_id),
            };
            let pull = match own {
                Some(item) => body::pull_line(&item.action),
                None if !task.outcome.status.is_pass() => "No pull request: the task did not pass.".to_string(),
                None => "No pull request: its patch was left out of the union (it conflicts; see combine.md).".to_string(),
            };
            reports.push(self.issue_report(task, issue, &pull, me.as_deref()).await);
        }
        reports
    }

    /// The comment on `issue`: the one dracode left before edited, else one added. dracode's is
    /// the last comment that holds the task's marker and was written by `me` (the token's user;
    /// without one, by a bot account): a copy of the marker in someone else's comment is never
    /// edited (a token with issues: write could).
    async fn issue_report(&self, task: &FinishedTask, issue: &IssueOrigin, pull: &str, me: Option<&str>) -> Item {
        let mut item = Item { subject: format!("#{}", issue.number), branch: None, title: None, push: None, action: Action::WouldComment };
        let repo = Repo::parse(&issue.repository).unwrap_or_else(|_| self.repo.clone());
        let text = self.clean(&body::issue_comment(task, &self.run.run_id, pull, self.opts.report_url.as_deref()));
        let Some(github) = self.github else {
            item.action = Action::NotLookedUp;
            return item;
        };
        let marker = body::issue_marker(&task.task_id);
        let earlier = match github.comments(&repo, issue.number).await {
            Ok(comments) => comments.into_iter().rev().find(|c| c.written_by(me) && c.body.as_deref().is_some_and(|b| b.contains(&marker))),
            Err(e) => {
                item.action = Action::Failed { error: e.to_string() };
                return item;
            }
        };
        item.action = match (earlier, self.opts.dry_run) {
            (Some(comment), true) => Action::WouldUpdateComment { url: comment.html_url },
            (None, true) => Action::WouldComment,
            (Some(comment), false) => match github.update_comment(&repo, comment.id, &text).await {
                Ok(comment) => Action::CommentUpdated { url: comment.html_url },
                // Deleted in between: a new one.
                Err(GithubError::NotFound { .. }) => self.add_comment(github, &repo, issue.number, &text).await,
                Err(e) => Action::Failed { error: e.to_string() },
            },
            (None, false) => self.add_comment(github, &repo, issue.number, &text).await,
        };
        item
    }

    /// `text` added to the conversation of `number`.
    async fn add_comment(&self, github: &Client, repo: &Repo, number: u64, text: &str) -> Action {
        match github.create_comment(repo, number, text).await {
            Ok(comment) => Action::Commented { url: comment.html_url },
            Err(e) => Action::Failed { error: e.to_string() },
        }
    }

    /// The branch's pull requests looked up first (so that nothing is pushed when GitHub cannot
    /// be asked), then the branch (GitHub needs the head to exist), then the pull request; a
    /// branch that is someone else's is left alone, and so is its pull request.
    async fn publish_change(&self, change: &Change<'_>) -> (Option<Push>, Action) {
        let Some(git) = self.git else {
            return (None, Action::Failed { error: "no git repository to make the branch in".into() });
        };
        let found = match self.github {
            Some(github) => match github.pulls_from(self.repo, change.branch).await {
                Ok(found) => Some(found),
                Err(e) => return (None, Action::Failed { error: format!("nothing pushed: {e}") }),
            },
            None => None,
        };
        match self.branch(git, change) {
            Ok(BranchState::Ready(push)) => {
                let action = self.pull(change, &push, found).await;
                (Some(push), action)
            }
            Ok(BranchState::Foreign { tip, committer }) => {
                let reason = format!(
                    "branch has commits not made by dracode (its tip {} is {committer}'s); it and its pull request are left as they are",
                    &tip[..tip.len().min(12)]
                );
                (None, Action::Skipped { reason })
            }
            Err(e) => (None, Action::Failed { error: self.clean(&e.to_string()) }),
        }
    }

    /// The branch: created, moved from dracode's own tip, or left as it is (same tree, same
    /// base); in a dry run, what would be.
    fn branch(&self, git: &Git, change: &Change<'_>) -> Result<BranchState, GitError> {
        let tip = git.remote_tip(change.branch)?;
        let current = match &tip {
            Some(id) => Some(git.remote_commit(change.branch, id)?),
            None => None,
        };
        if let Some(info) = &current
            && !info.made_by_dracode(change.task)
        {
            return Ok(BranchState::Foreign { tip: info.id.clone(), committer: info.committer.clone() });
        }
        let made = git.make_commit(change.base, change.patch, &change.message)?;
        if let Some(info) = &current
            && info.tree == made.tree
            && info.parents == [change.base]
        {
            return Ok(BranchState::Ready(Push::Unchanged { commit: info.id.clone() }));
        }
        if !self.opts.dry_run {
            git.push(&made.commit, change.branch, tip.as_deref())?;
        }
        Ok(BranchState::Ready(match tip {
            Some(from) => Push::Moved { from, to: made.commit },
            None => Push::New { commit: made.commit },
        }))
    }

    /// The branch's open pull request (among those `found`) updated, or one opened — unless a
    /// reviewer closed one that holds the same change (`push` left the branch as it was); in a dry
    /// run, which.
    async fn pull(&self, change: &Change<'_>, push: &Push, found: Option<Vec<PullRequest>>) -> Action {
        let (Some(github), Some(found)) = (self.github, found) else { return Action::NotLookedUp };
        let dry_run = self.opts.dry_run;
        let open = found.iter().find(|p| p.state == "open");
        if open.is_none()
            && matches!(push, Push::Unchanged { .. })
            && let Some(closed) = found.first()
        {
            let reason = format!(
                "pull request #{} was closed, and the change is the one it held: none is opened again until the change \
                 differs (push a commit of yours to the branch to stop it for good)",
                closed.number
            );
            return Action::Skipped { reason };
        }
        match open {
            Some(pull) if dry_run => Action::WouldUpdate { number: pull.number, url: pull.html_url.clone() },
            Some(pull) => {
                let update = PullUpdate { title: change.title.clone(), body: change.body.clone() };
                match github.update_pull(self.repo, pull.number, &update).await {
                    Ok(pull) => Action::Updated { number: pull.number, url: pull.html_url },
                    Err(e) => Action::Failed { error: e.to_string() },
                }
            }
            None if dry_run => Action::WouldCreate,
            None => {
                let pull = NewPull {
                    title: change.title.clone(),
                    head: change.branch.to_string(),
                    base: self.base_branch.unwrap_or("main").to_string(),
                    body: change.body.clone(),
                    maintainer_can_modify: true,
                };
                match github.create_pull(self.repo, &pull).await {
                    Ok(pull) => Action::Created { number: pull.number, url: pull.html_url },
                    Err(e) => Action::Failed { error: e.to_string() },
                }
            }
        }
    }

    /// `text` with the configured secrets masked.
    fn clean(&self, text: &str) -> String {
        self.redactor.redact(text).into_owned()
    }
}
