//! Issues and their conversations: the open issues that carry a label (`issues/list-for-repo`, or
//! `search/issues-and-pull-requests` with more qualifiers), who put the label on
//! (`issues/list-events`) and what that person may do in the repository
//! (`repos/get-collaborator-permission-level`) — the tasks a manifest's `[issues]` takes — and
//! the comments dracode adds and keeps up to date (`issues/create-comment`,
//! `issues/list-comments`, `issues/update-comment`).

use super::client::{Call, Client, Repo};
use super::error::{GithubError, Operation};
use reqwest::Method;
use serde::Deserialize;
use serde::de::DeserializeOwned;

/// Items per page asked for (GitHub's largest).
const PER_PAGE: usize = 100;

/// Pages read at most from one listing (1,000 items).
const MAX_PAGES: usize = 10;

/// A comment as GitHub answers it (`issue-comment`): the fields dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Comment {
    /// Its id.
    pub id: u64,
    /// Its place in the conversation.
    pub html_url: String,
    /// Its text (Markdown).
    #[serde(default)]
    pub body: Option<String>,
    /// Who wrote it.
    #[serde(default)]
    pub user: Option<User>,
}

/// An account as GitHub answers it (`simple-user`): the fields dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct User {
    /// Its login.
    pub login: String,
    /// `User`, `Bot` (an app, GitHub Actions) or `Organization`.
    #[serde(default, rename = "type")]
    pub kind: String,
}

impl Comment {
    /// True when the comment was written by `me` (the token's user, when GitHub says who that
    /// is), else — an app's or a workflow's token, which is no user — by any `Bot` account.
    pub fn written_by(&self, me: Option<&str>) -> bool {
        let Some(user) = &self.user else { return false };
        match me {
            Some(login) => user.login.eq_ignore_ascii_case(login),
            None => user.kind == "Bot",
        }
    }
}

/// A label of an issue: GitHub answers an object, or (in older answers) a plain name.
#[derive(Debug, Clone, Deserialize)]
#[serde(untagged)]
pub enum Label {
    /// `{"name": …, …}`.
    Object {
        /// The label's name.
        name: Option<String>,
    },
    /// The name alone.
    Name(String),
}

impl Label {
    /// The label's name.
    pub fn name(&self) -> &str {
        match self {
            Label::Object { name } => name.as_deref().unwrap_or_default(),
            Label::Name(name) => name,
        }
    }
}

/// An issue as GitHub answers it (`issue`, `issue-search-result-item`): the fields dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct Issue {
    /// Its number.
    pub number: u64,
    /// Its title.
    pub title: String,
    /// Its text (Markdown); `None` when empty.
    #[serde(default)]
    pub body: Option<String>,
    /// Its page.
    pub html_url: String,
    /// Who opened it.
    #[serde(default)]
    pub user: Option<User>,
    /// Its labels.
    #[serde(default)]
    pub labels: Vec<Label>,
    /// `open` or `closed`.
    pub state: String,
    /// Present when the issue is a pull request.
    #[serde(default)]
    pub pull_request: Option<serde_json::Value>,
}

/// An event of an issue's timeline (`issue-event-for-issue`): the fields dracode reads.
#[derive(Debug, Clone, Deserialize)]
pub struct IssueEvent {
    /// What happened: `labeled`, `unlabeled`, `closed`, …
    pub event: String,
    /// Who did it.
    #[serde(default)]
    pub actor: Option<User>,
    /// The label, for `labeled` and `unlabeled`.
    #[serde(default)]
    pub label: Option<EventLabel>,
}

/// The label of a `labeled` or `unlabeled` event.
#[derive(Debug, Clone, Deserialize)]
pub struct EventLabel {
    /// Its name.
    pub name: String,
}

/// A user's permission on a repository (`repository-collaborator-permission`).
#[derive(Debug, Clone, Deserialize)]
pub struct Permission {
    /// `admin`, `write`, `read` or `none` (`maintain` shows as `write`, `triage` as `read`).
    pub permission: String,
    /// The role: `admin`, `maintain`, `write`, `triage`, `read` or a custom role's name.
    #[serde(default)]
    pub role_name: Option<String>,
}

impl Permission {
    /// True when the user may push to the repository (admin, maintain or write).
    pub fn can_write(&self) -> bool {
        matches!(self.permission.as_str(), "admin" | "write")
    }
}

/// A search's answer (`search/issues-and-pull-requests`).
#[derive(Debug, Deserialize)]
struct SearchAnswer {
    items: Vec<Issue>,
}

impl Client {
    /// Adds `body` (Markdown) to the conversation of issue or pull request `number` of `repo`.
    pub async fn create_comment(&self, repo: &Repo, number: u64, body: &str) -> Result<Comment, GithubError> {
        let path = format!("{}/issues/{number}/comments", repo.path());
        let body = Some(serde_json::json!({ "body": body }));
        self.send(Call { operation: Operation::CreateComment, method: Method::POST, path, query: &[], body }).await
    }

    /// The comments of issue or pull request `number` of `repo`, oldest first.
    pub async fn comments(&self, repo: &Repo, number: u64) -> Result<Vec<Comment>, GithubError> {
        self.pages(Operation::ListComments, format!("{}/issues/{number}/comments", repo.path()), Vec::new(), std::convert::identity).await
    }

    /// Replaces the text of comment `id` of `repo`.
    pub async fn update_comment(&self, repo: &Repo, id: u64, body: &str) -> Result<Comment, GithubError> {
        let path = format!("{}/issues/comments/{id}", repo.path());
        let body = Some(serde_json::json!({ "body": body }));
        self.send(Call { operation: Operation::UpdateComment, method: Method::PATCH, path, query: &[], body }).await
    }

    /// The open issues (not pull requests) of `repo` labelled `label`, oldest first; with
    /// `query`, only those GitHub's issue search also finds with those qualifiers.
    pub async fn labelled_issues(&self, repo: &Repo, label: &str, query: Option<&str>) -> Result<Vec<Issue>, GithubError> {
        let issues = match query {
            None => {
                let query = vec![
                    ("state", "open".to_string()),
                    ("labels", label.to_string()),
                    ("sort", "created".to_string()),
                    ("direction", "asc".to_string()),
                ];
                self.pages(Operation::ListIssues, format!("{}/issues", repo.path()), query, std::convert::identity).await?
            }
            Some(more) => {
                let q = format!("repo:{repo} is:issue is:open label:\"{}\" {more}", label.replace('"', ""));
                let query = vec![("q", q), ("sort", "created".to_string()), ("order", "asc".to_string())];
                self.pages(Operation::SearchIssues, "/search/issues".to_string(), query, |page: SearchAnswer| page.items).await?
            }
        };
        Ok(issues.into_iter().filter(|i| i.pull_request.is_none() && i.state == "open").collect())
    }

    /// The login of who last put `label` on issue `number` of `repo` (`None`: no such event).
    pub async fn labeller(&self, repo: &Repo, number: u64, label: &str) -> Result<Option<String>, GithubError> {
        let path = format!("{}/issues/{number}/events", repo.path());
        let events: Vec<IssueEvent> = self.pages(Operation::ListIssueEvents, path, Vec::new(), std::convert::identity).await?;
        let labelled =
            events.into_iter().rev().find(|e| e.event == "labeled" && e.label.as_ref().is_some_and(|l| l.name.eq_ignore_ascii_case(label)));
        Ok(labelled.and_then(|e| e.actor).map(|a| a.login))
    }

    /// The login of the token's user; `None` when the token is no user's (an app's installation
    /// token, a workflow's `GITHUB_TOKEN`: GitHub answers 403) or GitHub cannot say.
    pub async fn me(&self) -> Option<String> {
        let call = Call { operation: Operation::GetUser, method: Method::GET, path: "/user".into(), query: &[], body: None };
        self.send::<User>(call).await.ok().map(|user| user.login)
    }

    /// What `login` may do in `repo`; `None` when GitHub knows no such collaborator (404).
    pub async fn permission(&self, repo: &Repo, login: &str) -> Result<Option<Permission>, GithubError> {
        let user = percent_encoding::utf8_percent_encode(login, percent_encoding::NON_ALPHANUMERIC);
        let path = format!("{}/collaborators/{user}/permission", repo.path());
        match self.send(Call { operation: Operation::GetPermission, method: Method::GET, path, query: &[], body: None }).await {
            Ok(permission) => Ok(Some(permission)),
            Err(GithubError::NotFound { .. }) => Ok(None),
            Err(e) => Err(e),
        }
    }

    /// Every page of a listing at `path` (at most [`MAX_PAGES`] of [`PER_PAGE`]), each page's
    /// answer read as `P` and its items taken by `items`.
    async fn pages<P: DeserializeOwned, T>(
        &self,
        operation: Operation,
        path: String,
        query: Vec<(&str, String)>,
        items: impl Fn(P) -> Vec<T>,
    ) -> Result<Vec<T>, GithubError> {
        let mut all = Vec::new();
        for page in 1..=MAX_PAGES {
            let mut query = query.clone();
            query.extend([("per_page", PER_PAGE.to_string()), ("page", page.to_string())]);
            let call = Call { operation, method: Method::GET, path: path.clone(), query: &query, body: None };
            let found = items(self.send(call).await?);
            let last = found.len() < PER_PAGE;
            all.extend(found);
            if last {
                break;
            }
        }
        Ok(all)
    }
}
