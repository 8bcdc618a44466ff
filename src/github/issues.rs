//! Issues and their conversations (`issues/create-comment`): a run's report as a comment on an
//! existing pull request or issue (every pull request is an issue). Listing a repository's
//! issues by label — tasks from issues — belongs here too, beside it.

use super::client::{Call, Client, Repo};
use super::error::{GithubError, Operation};
use reqwest::Method;
use serde::Deserialize;

/// A comment as GitHub answers it (`issue-comment`): the fields dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// Its place in the conversation.
    pub html_url: String,
}

impl Client {
    /// Adds `body` (Markdown) to the conversation of issue or pull request `number` of `repo`.
    pub async fn create_comment(&self, repo: &Repo, number: u64, body: &str) -> Result<Comment, GithubError> {
        let path = format!("{}/issues/{number}/comments", repo.path());
        let body = Some(serde_json::json!({ "body": body }));
        self.send(Call { operation: Operation::CreateComment, method: Method::POST, path, query: &[], body }).await
    }
}
