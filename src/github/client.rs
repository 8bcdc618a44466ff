//! The client: GitHub's API base URL and a token, every request with the headers GitHub asks
//! for (`Authorization: Bearer`, `Accept: application/vnd.github+json`, a `User-Agent`, the API
//! version), and every error status turned into a [`GithubError`] that says what to do.

use super::error::{ACTIONS_NOT_PERMITTED, GithubError, Operation};
use reqwest::{Method, StatusCode, Url};
use serde::de::DeserializeOwned;
use serde_json::Value;
use std::fmt;
use std::time::Duration;

/// GitHub's API, when `GITHUB_API_URL` does not name another (GitHub Enterprise Server's
/// `https://HOST/api/v3`).
pub const DEFAULT_API_URL: &str = "https://api.github.com";

/// The REST API version every request asks for (`X-GitHub-Api-Version`).
pub const API_VERSION: &str = "2022-11-28";

/// The media type GitHub recommends in `Accept`.
pub const MEDIA_TYPE: &str = "application/vnd.github+json";

/// A repository, `OWNER/NAME`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Repo {
    /// The account that owns it.
    pub owner: String,
    /// Its name.
    pub name: String,
}

impl Repo {
    /// `OWNER/NAME` (as `GITHUB_REPOSITORY` holds it), each part letters, digits, `-`, `_`, `.`.
    pub fn parse(given: &str) -> Result<Repo, GithubError> {
        let bad = || GithubError::Repository { given: given.to_string() };
        let (owner, name) = given.trim().split_once('/').ok_or_else(bad)?;
        let valid = |part: &str| {
            !part.is_empty() && part != "." && part != ".." && part.chars().all(|c| c.is_ascii_alphanumeric() || "-_.".contains(c))
        };
        if !valid(owner) || !valid(name) {
            return Err(bad());
        }
        Ok(Repo { owner: owner.to_string(), name: name.to_string() })
    }

    /// The API path of the repository: `/repos/OWNER/NAME`.
    pub fn path(&self) -> String {
        format!("/repos/{}/{}", self.owner, self.name)
    }
}

impl fmt::Display for Repo {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{}", self.owner, self.name)
    }
}

/// A client of GitHub's REST API with one token.
pub struct Client {
    http: reqwest::Client,
    /// The base URL, without a trailing `/`.
    base: String,
    token: String,
}

impl fmt::Debug for Client {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Client").field("base", &self.base).finish_non_exhaustive()
    }
}

/// A request: the operation (for the error), its method, its path under the base and its query.
pub(super) struct Call<'a> {
    pub(super) operation: Operation,
    pub(super) method: Method,
    pub(super) path: String,
    pub(super) query: &'a [(&'a str, String)],
    pub(super) body: Option<Value>,
}

impl Client {
    /// A client of the API at `api_url` (`https://api.github.com`, or a GitHub Enterprise
    /// Server's `https://HOST/api/v3`) that sends `token`.
    pub fn new(api_url: &str, token: &str) -> Result<Client, GithubError> {
        let bad = |reason: &str| GithubError::ApiUrl { url: api_url.to_string(), reason: reason.to_string() };
        let url = Url::parse(api_url.trim()).map_err(|e| bad(&e.to_string()))?;
        if !matches!(url.scheme(), "http" | "https") || url.host_str().is_none() {
            return Err(bad("not an http(s) URL with a host"));
        }
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .timeout(Duration::from_secs(60))
            .user_agent(concat!("dracode/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|e| bad(&format!("cannot make an HTTP client: {e}")))?;
        Ok(Client { http, base: url.as_str().trim_end_matches('/').to_string(), token: token.to_string() })
    }

    /// The API's base URL, without a trailing `/`.
    pub fn base(&self) -> &str {
        &self.base
    }

    /// Sends `call` and reads the answer as `T`; an error status is a [`GithubError`]. A call
    /// that can be repeated without effect (GET, PATCH) is sent again after a transient failure
    /// — no answer, a 5xx, a 429 — up to [`ATTEMPTS`] times, waiting [`RETRY_WAIT`] times the
    /// attempt; a POST is sent once, as a repeat could open a second pull request or comment.
    pub(super) async fn send<T: DeserializeOwned>(&self, call: Call<'_>) -> Result<T, GithubError> {
        let repeatable = matches!(call.method, Method::GET | Method::PATCH);
        let mut attempt = 1;
        loop {
            match self.send_once(&call).await {
                Err(e) if repeatable && attempt < ATTEMPTS && transient(&e) => {
                    tokio::time::sleep(RETRY_WAIT * attempt).await;
                    attempt += 1;
                }
                answer => return answer,
            }
        }
    }

    /// One try of [`Client::send`].
    async fn send_once<T: DeserializeOwned>(&self, call: &Call<'_>) -> Result<T, GithubError> {
        let url = query_url(&format!("{}{}", self.base, call.path), call.query);
        let mut request = self
            .http
            .request(call.method.clone(), &url)
            .bearer_auth(&self.token)
            .header(reqwest::header::ACCEPT, MEDIA_TYPE)
            .header("X-GitHub-Api-Version", API_VERSION);
        if let Some(body) = &call.body {
            request = request.json(body);
        }
        let operation = call.operation;
        let network = |e: reqwest::Error| GithubError::Network { operation, url: url.clone(), reason: e.to_string() };
        let response = request.send().await.map_err(network)?;
        let status = response.status();
        let spent = response.headers().get("x-ratelimit-remaining").is_some_and(|v| v.as_bytes() == b"0");
        let text = response.text().await.map_err(network)?;
        if !status.is_success() {
            return Err(refusal(operation, &call.path, status, spent, &text));
        }
        serde_json::from_str(&text).map_err(|e| GithubError::BadResponse { operation, reason: e.to_string() })
    }
}

/// Tries of a call that can be repeated.
pub const ATTEMPTS: u32 = 3;

/// The wait before a second try (twice that before a third).
const RETRY_WAIT: Duration = Duration::from_millis(500);

/// True when trying again may succeed: no answer, a server error, too many requests.
fn transient(error: &GithubError) -> bool {
    match error {
        GithubError::Network { .. } => true,
        GithubError::Status { status, .. } => *status >= 500,
        GithubError::RateLimited { status, .. } => *status == 429,
        _ => false,
    }
}

/// `url` with `query` appended, each value percent-encoded.
fn query_url(url: &str, query: &[(&str, String)]) -> String {
    if query.is_empty() {
        return url.to_string();
    }
    let encode = |s: &str| percent_encoding::utf8_percent_encode(s, percent_encoding::NON_ALPHANUMERIC).to_string();
    let pairs: Vec<String> = query.iter().map(|(k, v)| format!("{}={}", encode(k), encode(v))).collect();
    format!("{url}?{}", pairs.join("&"))
}

/// The error an error status says, from GitHub's error body (`{"message", "documentation_url",
/// "errors"}`; the `basic-error` and `validation-error` schemas).
fn refusal(operation: Operation, path: &str, status: StatusCode, rate_limit_spent: bool, body: &str) -> GithubError {
    let parsed: Value = serde_json::from_str(body).unwrap_or(Value::Null);
    let message = match parsed["message"].as_str() {
        Some(message) => message.to_string(),
        None => body.chars().take(200).collect::<String>().trim().to_string(),
    };
    let code = status.as_u16();
    match code {
        401 => GithubError::Unauthorized { operation, message },
        403 if message.contains(ACTIONS_NOT_PERMITTED) => GithubError::ActionsNotPermitted { message },
        403 | 429 if rate_limit_spent || code == 429 || message.to_lowercase().contains("rate limit") => {
            GithubError::RateLimited { operation, status: code, message }
        }
        403 => GithubError::Forbidden { operation, message },
        404 => GithubError::NotFound { operation, path: path.to_string(), message },
        422 => {
            let errors = parsed["errors"].as_array().map(|all| all.iter().map(validation_line).collect()).unwrap_or_default();
            GithubError::Invalid { operation, message, errors }
        }
        _ => GithubError::Status { operation, status: code, message },
    }
}

/// One entry of a 422's `errors`: its `message`, else `resource.field: code`; a plain string as
/// it is.
fn validation_line(error: &Value) -> String {
    if let Some(text) = error.as_str() {
        return text.to_string();
    }
    if let Some(message) = error["message"].as_str() {
        return message.to_string();
    }
    let part = |key: &str| error[key].as_str().unwrap_or("?").to_string();
    format!("{}.{}: {}", part("resource"), part("field"), part("code"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_repository_is_owner_slash_name() {
        let repo = Repo::parse("octo-org/hello.world").unwrap();
        assert_eq!((repo.owner.as_str(), repo.name.as_str()), ("octo-org", "hello.world"));
        assert_eq!(repo.path(), "/repos/octo-org/hello.world");
        for bad in ["", "octo", "octo/", "/x", "a/b/c", "a b/c", "../x", "a/.."] {
            assert!(matches!(Repo::parse(bad), Err(GithubError::Repository { .. })), "{bad:?}");
        }
    }

    #[test]
    fn each_refusal_says_what_would_allow_it() {
        let body = r#"{"message":"GitHub Actions is not permitted to create or approve pull requests.","documentation_url":"https://docs.github.com/rest/pulls/pulls#create-a-pull-request","status":"403"}"#;
        let error = refusal(Operation::CreatePull, "/repos/o/r/pulls", StatusCode::FORBIDDEN, false, body);
        let text = error.to_string();
        assert!(matches!(error, GithubError::ActionsNotPermitted { .. }), "{text}");
        assert!(
            text.contains("Allow GitHub Actions to create and approve pull requests") && text.contains("create-github-app-token"),
            "{text}"
        );
        let forbidden = refusal(
            Operation::CreateComment,
            "/p",
            StatusCode::FORBIDDEN,
            false,
            r#"{"message":"Resource not accessible by integration"}"#,
        );
        assert!(forbidden.to_string().contains("issues: write"), "{forbidden}");
        let limited = refusal(Operation::ListPulls, "/p", StatusCode::FORBIDDEN, true, r#"{"message":"API rate limit exceeded"}"#);
        assert!(matches!(limited, GithubError::RateLimited { status: 403, .. }), "{limited}");
        let bad = refusal(Operation::ListPulls, "/p", StatusCode::UNAUTHORIZED, false, r#"{"message":"Bad credentials"}"#);
        assert!(bad.to_string().contains("401 Bad credentials"), "{bad}");
        let invalid = r#"{"message":"Validation Failed","errors":[{"resource":"PullRequest","field":"head","code":"invalid"},{"message":"A pull request already exists for o:b."}]}"#;
        let invalid = refusal(Operation::CreatePull, "/p", StatusCode::UNPROCESSABLE_ENTITY, false, invalid).to_string();
        assert!(invalid.contains("PullRequest.head: invalid; A pull request already exists for o:b."), "{invalid}");
        let other = refusal(Operation::UpdatePull, "/p", StatusCode::BAD_GATEWAY, false, "<html>bad gateway</html>").to_string();
        assert!(other.contains("502 <html>bad gateway</html>"), "{other}");
    }
}
