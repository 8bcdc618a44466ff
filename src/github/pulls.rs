//! Pull requests (`pulls/list`, `pulls/create`, `pulls/update`): what `dracode publish` opens
//! and keeps up to date, found again by their head branch.

use super::client::{Call, Client, Repo};
use super::error::{GithubError, Operation};
use reqwest::Method;
use serde::{Deserialize, Serialize};

/// A pull request as GitHub answers it (`pull-request`, `pull-request-simple`): the fields
/// dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct PullRequest {
    /// Its number in the repository.
    pub number: u64,
    /// Its page.
    pub html_url: String,
    /// `open` or `closed`.
    pub state: String,
    /// Its title.
    pub title: String,
    /// Its head branch.
    pub head: Head,
}

/// A pull request's head.
#[derive(Debug, Clone, Deserialize)]
pub struct Head {
    /// The branch.
    #[serde(rename = "ref")]
    pub branch: String,
    /// The commit it points at.
    pub sha: String,
}

/// A pull request to open (the `pulls/create` request body).
#[derive(Debug, Clone, Serialize)]
pub struct NewPull {
    /// Its title.
    pub title: String,
    /// The branch with the changes, in the same repository.
    pub head: String,
    /// The branch to merge them into.
    pub base: String,
    /// Its description (Markdown).
    pub body: String,
    /// Whether people may push to the head branch (of a fork; ignored otherwise).
    pub maintainer_can_modify: bool,
}

/// New title and body for an open pull request (the `pulls/update` request body).
#[derive(Debug, Clone, Serialize)]
pub struct PullUpdate {
    /// Its title.
    pub title: String,
    /// Its description (Markdown).
    pub body: String,
}

impl Client {
    /// The pull requests of `repo`, open and closed, whose head is `branch` of the repository
    /// itself, newest first (at most one is open: GitHub allows one open pull request per head and
    /// base).
    pub async fn pulls_from(&self, repo: &Repo, branch: &str) -> Result<Vec<PullRequest>, GithubError> {
        let query = [("state", "all".to_string()), ("head", format!("{}:{branch}", repo.owner)), ("per_page", "100".to_string())];
        let call = Call {
            operation: Operation::ListPulls,
            method: Method::GET,
            path: format!("{}/pulls", repo.path()),
            query: &query,
            body: None,
        };
        let pulls: Vec<PullRequest> = self.send(call).await?;
        Ok(pulls.into_iter().filter(|p| p.head.branch == branch).collect())
    }

    /// Opens `pull` in `repo`.
    pub async fn create_pull(&self, repo: &Repo, pull: &NewPull) -> Result<PullRequest, GithubError> {
        let body =
            serde_json::to_value(pull).map_err(|e| GithubError::BadResponse { operation: Operation::CreatePull, reason: e.to_string() })?;
        let call = Call {
            operation: Operation::CreatePull,
            method: Method::POST,
            path: format!("{}/pulls", repo.path()),
            query: &[],
            body: Some(body),
        };
        self.send(call).await
    }

    /// Sets the title and body of pull request `number` of `repo`.
    pub async fn update_pull(&self, repo: &Repo, number: u64, update: &PullUpdate) -> Result<PullRequest, GithubError> {
        let body = serde_json::to_value(update)
            .map_err(|e| GithubError::BadResponse { operation: Operation::UpdatePull, reason: e.to_string() })?;
        let path = format!("{}/pulls/{number}", repo.path());
        self.send(Call { operation: Operation::UpdatePull, method: Method::PATCH, path, query: &[], body: Some(body) }).await
    }
}
