//! The issues a manifest's `[issues]` queues: the open issues of a repository that carry a label
//! (and match a search, if one is given), oldest first, each taken only when the person who last
//! put that label on it may push to the repository — so a stranger who opens an issue cannot
//! queue work, and neither can someone who may only triage.
//!
//! How it is checked: the issue's events (`issues/list-events`) name who added the label last;
//! that login's permission (`repos/get-collaborator-permission-level`) must be `admin` or `write`
//! (GitHub shows `maintain` as `write`). A label put by an app or a workflow's token names a bot
//! that is no collaborator: such an issue is left out, and says so.

use super::client::{Client, Repo};
use super::error::GithubError;
use super::issues::Issue;
use std::collections::BTreeMap;

/// What to ask GitHub for.
#[derive(Debug, Clone)]
pub struct IssueQuery {
    /// The repository.
    pub repo: Repo,
    /// The label that queues an issue.
    pub label: String,
    /// More qualifiers of GitHub's issue search (`milestone:v2 -label:wontfix`).
    pub query: Option<String>,
    /// At most this many issues are taken, oldest first.
    pub max: usize,
}

/// An issue taken as a task.
#[derive(Debug, Clone)]
pub struct Taken {
    /// The issue.
    pub issue: Issue,
    /// Who put the label on it last (someone with write access).
    pub labelled_by: String,
}

/// The issues a query found: those taken, and those left out with why (one line each).
#[derive(Debug, Clone, Default)]
pub struct Queue {
    /// Taken, oldest first.
    pub taken: Vec<Taken>,
    /// Left out: `#N: why`.
    pub left_out: Vec<String>,
}

/// Reads the queue `query` describes through `client`.
pub async fn read(client: &Client, query: &IssueQuery) -> Result<Queue, GithubError> {
    let issues = client.labelled_issues(&query.repo, &query.label, query.query.as_deref()).await?;
    let mut queue = Queue::default();
    let mut permissions: BTreeMap<String, Option<bool>> = BTreeMap::new();
    for issue in issues {
        if queue.taken.len() >= query.max {
            queue.left_out.push(format!("#{}: more than max = {} issues are labelled `{}`", issue.number, query.max, query.label));
            continue;
        }
        let Some(login) = client.labeller(&query.repo, issue.number, &query.label).await? else {
            queue.left_out.push(format!("#{}: no `labeled` event names who put `{}` on it", issue.number, query.label));
            continue;
        };
        let can_write = match permissions.get(&login) {
            Some(known) => *known,
            None => {
                let found = client.permission(&query.repo, &login).await?.map(|p| p.can_write());
                permissions.insert(login.clone(), found);
                found
            }
        };
        match can_write {
            Some(true) => queue.taken.push(Taken { issue, labelled_by: login }),
            Some(false) => queue.left_out.push(format!(
                "#{}: labelled `{}` by @{login}, who cannot push to {} (write access is needed to queue an issue)",
                issue.number, query.label, query.repo
            )),
            None => queue.left_out.push(format!(
                "#{}: labelled `{}` by @{login}, who is not a collaborator of {} (an app or a workflow's token counts as none)",
                issue.number, query.label, query.repo
            )),
        }
    }
    Ok(queue)
}

/// [`read`] from code that is not async (the run's plan): on a thread of its own with its own
/// runtime, so it works inside and outside one.
pub fn read_blocking(api_url: &str, token: &str, query: &IssueQuery) -> Result<Queue, GithubError> {
    let client = Client::new(api_url, token)?;
    std::thread::scope(|scope| {
        scope
            .spawn(|| {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| GithubError::Internal { reason: format!("cannot start an async runtime: {e}") })?;
                runtime.block_on(read(&client, query))
            })
            .join()
            .unwrap_or_else(|_| Err(GithubError::Internal { reason: "the reader of the issues panicked".into() }))
    })
}
