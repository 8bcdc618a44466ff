//! What can go wrong talking to GitHub's REST API, each failure in words a user can act on: the
//! operation that failed, GitHub's own message, and — for a refusal — the permission or the
//! repository setting that would allow it.

use std::fmt;

/// The REST operations dracode makes, named as GitHub's API reference names them; each knows
/// the token permission it needs (what a refusal names).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Operation {
    /// `GET /repos/{owner}/{repo}/pulls` (`pulls/list`).
    ListPulls,
    /// `POST /repos/{owner}/{repo}/pulls` (`pulls/create`).
    CreatePull,
    /// `PATCH /repos/{owner}/{repo}/pulls/{pull_number}` (`pulls/update`).
    UpdatePull,
    /// `POST /repos/{owner}/{repo}/issues/{issue_number}/comments` (`issues/create-comment`).
    CreateComment,
    /// `GET /repos/{owner}/{repo}/issues/{issue_number}/comments` (`issues/list-comments`).
    ListComments,
    /// `PATCH /repos/{owner}/{repo}/issues/comments/{comment_id}` (`issues/update-comment`).
    UpdateComment,
    /// `GET /repos/{owner}/{repo}/issues` (`issues/list-for-repo`).
    ListIssues,
    /// `GET /search/issues` (`search/issues-and-pull-requests`).
    SearchIssues,
    /// `GET /repos/{owner}/{repo}/issues/{issue_number}/events` (`issues/list-events`).
    ListIssueEvents,
    /// `GET /repos/{owner}/{repo}/collaborators/{username}/permission`
    /// (`repos/get-collaborator-permission-level`).
    GetPermission,
    /// `GET /user` (`users/get-authenticated`).
    GetUser,
}

impl Operation {
    /// What the operation does, for a message: "create a pull request".
    pub fn doing(self) -> &'static str {
        match self {
            Operation::ListPulls => "list the pull requests",
            Operation::CreatePull => "create a pull request",
            Operation::UpdatePull => "update a pull request",
            Operation::CreateComment => "comment on an issue or pull request",
            Operation::ListComments => "list an issue's comments",
            Operation::UpdateComment => "update a comment",
            Operation::ListIssues => "list the repository's issues",
            Operation::SearchIssues => "search the repository's issues",
            Operation::ListIssueEvents => "read who labelled an issue",
            Operation::GetPermission => "read a labeller's permission on the repository",
            Operation::GetUser => "ask whose token it is",
        }
    }

    /// The permission a token needs for it: the workflow's `permissions:` key and level, which
    /// is also the fine-grained token's and the GitHub App's permission of that name.
    pub fn permission(self) -> &'static str {
        match self {
            Operation::ListPulls => "pull-requests: read",
            Operation::CreatePull | Operation::UpdatePull => "pull-requests: write",
            Operation::CreateComment | Operation::UpdateComment => "issues: write (pull-requests: write for a pull request's conversation)",
            Operation::ListComments | Operation::ListIssues | Operation::SearchIssues | Operation::ListIssueEvents => "issues: read",
            Operation::GetPermission | Operation::GetUser => "metadata: read",
        }
    }
}

impl fmt::Display for Operation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.doing())
    }
}

/// GitHub's words for a refused pull request when the repository does not let GitHub Actions'
/// `GITHUB_TOKEN` create one (a 403 of `pulls/create`).
pub const ACTIONS_NOT_PERMITTED: &str = "GitHub Actions is not permitted to create or approve pull requests";

/// The setting that lifts [`ACTIONS_NOT_PERMITTED`], as GitHub's settings page names it.
pub const ACTIONS_SETTING: &str =
    "Settings → Actions → General → Workflow permissions → \"Allow GitHub Actions to create and approve pull requests\"";

/// Why a call to GitHub failed.
#[derive(Debug, thiserror::Error)]
pub enum GithubError {
    /// The API base URL (`--api-url`, `GITHUB_API_URL`) is not an http(s) URL.
    #[error("GitHub API URL {url:?}: {reason}")]
    ApiUrl {
        /// The URL given.
        url: String,
        /// What is wrong with it.
        reason: String,
    },
    /// The client could not run: no async runtime could start, or the reader panicked.
    #[error("cannot talk to GitHub: {reason}")]
    Internal {
        /// What went wrong.
        reason: String,
    },
    /// `OWNER/NAME` is not a repository's name.
    #[error("repository {given:?} is not OWNER/NAME (letters, digits, `-`, `_` and `.`)")]
    Repository {
        /// What was given.
        given: String,
    },
    /// No answer: the connection failed or timed out.
    #[error("cannot {operation}: no answer from {url}: {reason}")]
    Network {
        /// What dracode was doing.
        operation: Operation,
        /// The request's URL.
        url: String,
        /// The client's words.
        reason: String,
    },
    /// 401: the token was refused.
    #[error("cannot {operation}: GitHub refused the token (401 {message}): it is missing, expired, revoked or mistyped")]
    Unauthorized {
        /// What dracode was doing.
        operation: Operation,
        /// GitHub's message.
        message: String,
    },
    /// 403 of `pulls/create` with [`ACTIONS_NOT_PERMITTED`]: the token is GitHub Actions'
    /// `GITHUB_TOKEN` and the repository (or its organization) does not allow it.
    #[error(
        "GitHub refused to create the pull request (403 \"{message}\"): the token is GitHub Actions' GITHUB_TOKEN, and the \
         repository or its organization does not let GitHub Actions create pull requests. Turn on {ACTIONS_SETTING}, or \
         publish with a GitHub App installation token (actions/create-github-app-token) or a fine-grained token with \
         Contents: write and Pull requests: write — which also lets the pull request start your `on: pull_request` \
         workflows, as GITHUB_TOKEN's never do (docs/src/recipes/pull-requests.md)"
    )]
    ActionsNotPermitted {
        /// GitHub's message.
        message: String,
    },
    /// 403 (or 429) with the rate limit spent.
    #[error("cannot {operation}: GitHub's rate limit is spent ({status} {message}); try again after it resets")]
    RateLimited {
        /// What dracode was doing.
        operation: Operation,
        /// 403 or 429.
        status: u16,
        /// GitHub's message.
        message: String,
    },
    /// 403: the token may not do this.
    #[error(
        "cannot {operation}: GitHub refused (403 {message}): the token lacks the permission {}; give the workflow \
         `permissions:` that, or the GitHub App or fine-grained token the permission of that name",
        operation.permission()
    )]
    Forbidden {
        /// What dracode was doing.
        operation: Operation,
        /// GitHub's message.
        message: String,
    },
    /// 404: no such repository (or pull request), or the token cannot see it.
    #[error(
        "cannot {operation}: GitHub answered 404 {message} for {path}: the repository (or the pull request) does not \
         exist, or the token cannot see it (a private repository needs the token's Metadata: read)"
    )]
    NotFound {
        /// What dracode was doing.
        operation: Operation,
        /// The request's path.
        path: String,
        /// GitHub's message.
        message: String,
    },
    /// 422: GitHub refused the request's content.
    #[error("cannot {operation}: GitHub refused the request (422 {message}{})", errors_suffix(errors))]
    Invalid {
        /// What dracode was doing.
        operation: Operation,
        /// GitHub's message.
        message: String,
        /// The `errors` it listed, each as one line.
        errors: Vec<String>,
    },
    /// Any other status.
    #[error("cannot {operation}: GitHub answered {status} {message}")]
    Status {
        /// What dracode was doing.
        operation: Operation,
        /// The status.
        status: u16,
        /// GitHub's message, else the start of the body.
        message: String,
    },
    /// A success whose body is not what the API reference describes.
    #[error("cannot {operation}: GitHub's answer is not what its API describes: {reason}")]
    BadResponse {
        /// What dracode was doing.
        operation: Operation,
        /// What is wrong.
        reason: String,
    },
}

fn errors_suffix(errors: &[String]) -> String {
    if errors.is_empty() { String::new() } else { format!(": {}", errors.join("; ")) }
}
