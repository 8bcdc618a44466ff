//! GitHub Copilot: a GitHub OAuth token (from `dracode auth copilot`'s device flow, or from the
//! environment in CI) is exchanged for a short-lived Copilot token, which then authenticates
//! Chat Completions calls. The Copilot token is refreshed five minutes before it expires, and
//! once more after a 401.
//!
//! Credentials, in order: `GITHUB_COPILOT_TOKEN`, `GH_COPILOT_TOKEN`, then the token stored by
//! `dracode auth copilot` in `$XDG_CONFIG_HOME/dracode/copilot.json` (or `~/.config/…`, mode
//! 0600). `dracode run` never starts the device flow.

use super::http::HttpClient;
use super::openai::ChatCompletions;
use super::preset::ResolvedProvider;
use super::{BoxFuture, ErrorKind, LlmError, LlmRequest, LlmResponse, Provider, RetryObserver};
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The OAuth app id that editor Copilot integrations use for the device flow; override with
/// `DRACODE_COPILOT_CLIENT_ID`.
pub const CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// Refresh the Copilot token this long before it expires.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Where GitHub lives (overridable for tests and GitHub Enterprise).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Endpoints {
    /// `https://github.com` (`DRACODE_GITHUB_URL`).
    pub github: String,
    /// `https://api.github.com` (`DRACODE_GITHUB_API_URL`).
    pub api: String,
    /// The OAuth client id (`DRACODE_COPILOT_CLIENT_ID`).
    pub client_id: String,
}

impl Endpoints {
    /// The endpoints from `env`, with GitHub's defaults.
    pub fn from_env(env: &BTreeMap<String, String>) -> Self {
        let get = |k: &str, d: &str| env.get(k).filter(|v| !v.is_empty()).cloned().unwrap_or_else(|| d.to_string());
        Endpoints {
            github: get("DRACODE_GITHUB_URL", "https://github.com").trim_end_matches('/').to_string(),
            api: get("DRACODE_GITHUB_API_URL", "https://api.github.com").trim_end_matches('/').to_string(),
            client_id: get("DRACODE_COPILOT_CLIENT_ID", CLIENT_ID),
        }
    }
}

/// The stored credential.
#[derive(Debug, Serialize, Deserialize)]
struct Stored {
    github_token: String,
}

/// `$XDG_CONFIG_HOME/dracode/copilot.json`, or `$HOME/.config/dracode/copilot.json`.
pub fn token_path(env: &BTreeMap<String, String>) -> Option<PathBuf> {
    let base = env
        .get("XDG_CONFIG_HOME")
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .or_else(|| env.get("HOME").map(|h| Path::new(h).join(".config")))?;
    Some(base.join("dracode").join("copilot.json"))
}

/// The GitHub token to use: the environment first, then the stored one.
pub fn github_token(env: &BTreeMap<String, String>) -> Option<String> {
    ["GITHUB_COPILOT_TOKEN", "GH_COPILOT_TOKEN"]
        .iter()
        .find_map(|k| env.get(*k).filter(|v| !v.is_empty()).cloned())
        .or_else(|| {
            let text = std::fs::read_to_string(token_path(env)?).ok()?;
            serde_json::from_str::<Stored>(&text).ok().map(|s| s.github_token)
        })
}

/// Stores `token` with mode 0600 (its folder 0700); returns the path.
pub fn store_token(env: &BTreeMap<String, String>, token: &str) -> std::io::Result<PathBuf> {
    use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt};
    let path = token_path(env).ok_or_else(|| std::io::Error::other("neither XDG_CONFIG_HOME nor HOME is set"))?;
    if let Some(dir) = path.parent() {
        std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let text = serde_json::to_string(&Stored { github_token: token.to_string() }).map_err(std::io::Error::other)?;
    let mut file = std::fs::OpenOptions::new().write(true).create(true).truncate(true).mode(0o600).open(&path)?;
    std::io::Write::write_all(&mut file, text.as_bytes())?;
    Ok(path)
}

/// What the user must do to finish the device flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCode {
    /// Where to go.
    pub verification_uri: String,
    /// What to type there.
    pub user_code: String,
}

/// GitHub's OAuth device flow: asks for a code, shows it through `show`, then polls at the
/// server's interval (longer after `slow_down`) until the user approves. Returns the token.
pub async fn device_flow(http: &HttpClient, endpoints: &Endpoints, show: impl FnOnce(&DeviceCode)) -> Result<String, String> {
    let client = http.get();
    let start: Value = client
        .post(format!("{}/login/device/code", endpoints.github))
        .header("accept", "application/json")
        .json(&json!({"client_id": endpoints.client_id, "scope": "read:user"}))
        .send()
        .await
        .map_err(|e| format!("cannot reach GitHub: {e}"))?
        .json()
        .await
        .map_err(|e| format!("unexpected answer from GitHub: {e}"))?;
    let field = |k: &str| start.get(k).and_then(Value::as_str).map(str::to_string).ok_or_else(|| format!("GitHub's answer lacks `{k}`: {start}"));
    let device_code = field("device_code")?;
    show(&DeviceCode { verification_uri: field("verification_uri")?, user_code: field("user_code")? });
    let mut interval = Duration::from_secs(start.get("interval").and_then(Value::as_u64).unwrap_or(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(start.get("expires_in").and_then(Value::as_u64).unwrap_or(900));
    loop {
        tokio::time::sleep(interval).await;
        if std::time::Instant::now() > deadline {
            return Err("the code expired before it was approved; run `dracode auth copilot` again".into());
        }
        let poll: Value = client
            .post(format!("{}/login/oauth/access_token", endpoints.github))
            .header("accept", "application/json")
            .json(&json!({
                "client_id": endpoints.client_id,
                "device_code": device_code,
                "grant_type": "urn:ietf:params:oauth:grant-type:device_code",
            }))
            .send()
            .await
            .map_err(|e| format!("cannot reach GitHub: {e}"))?
            .json()
            .await
            .map_err(|e| format!("unexpected answer from GitHub: {e}"))?;
        if let Some(token) = poll.get("access_token").and_then(Value::as_str) {
            return Ok(token.to_string());
        }
        match poll.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => {}
            Some("slow_down") => {
                // GitHub says how long to wait now; the RFC says five seconds more.
                interval = poll.get("interval").and_then(Value::as_u64).map(Duration::from_secs).unwrap_or(interval + Duration::from_secs(5));
            }
            Some("expired_token") => return Err("the code expired; run `dracode auth copilot` again".into()),
            Some("access_denied") => return Err("access was denied on GitHub".into()),
            other => return Err(format!("GitHub refused: {}", other.unwrap_or("unknown error"))),
        }
    }
}

/// A Copilot token and the API it is for.
#[derive(Debug, Clone)]
struct CopilotToken {
    token: String,
    expires_at: u64,
    api: Option<String>,
}

/// Exchanges a GitHub token for a Copilot token.
async fn exchange(http: &HttpClient, endpoints: &Endpoints, github_token: &str) -> Result<CopilotToken, LlmError> {
    let response = http
        .get()
        .get(format!("{}/copilot_internal/v2/token", endpoints.api))
        .header("authorization", format!("token {github_token}"))
        .header("accept", "application/json")
        .header("user-agent", concat!("dracode/", env!("CARGO_PKG_VERSION")))
        .send()
        .await
        .map_err(|e| LlmError::new(ErrorKind::Network, format!("Copilot token exchange: {}", e.without_url())))?;
    let status = response.status().as_u16();
    let body: Value = response.json().await.unwrap_or(Value::Null);
    if status == 401 || status == 403 || status == 404 {
        return Err(LlmError {
            http_status: Some(status),
            ..LlmError::new(ErrorKind::Auth, format!("GitHub refused the Copilot token exchange (HTTP {status}): is Copilot enabled for this account? Run `dracode auth copilot` or set GITHUB_COPILOT_TOKEN"))
        });
    }
    let token = body.get("token").and_then(Value::as_str).ok_or_else(|| {
        LlmError { http_status: Some(status), ..LlmError::new(ErrorKind::BadResponse, format!("Copilot token exchange answered HTTP {status} without a token")) }
    })?;
    Ok(CopilotToken {
        token: token.to_string(),
        expires_at: body.get("expires_at").and_then(Value::as_u64).unwrap_or(0),
        api: body.pointer("/endpoints/api").and_then(Value::as_str).map(str::to_string),
    })
}

fn now() -> u64 {
    SystemTime::now().duration_since(UNIX_EPOCH).map_or(0, |d| d.as_secs())
}

/// Copilot chat: Chat Completions with a Copilot token that is kept fresh.
pub struct Copilot {
    resolved: ResolvedProvider,
    github_token: String,
    endpoints: Endpoints,
    http: HttpClient,
    current: tokio::sync::Mutex<Option<(CopilotToken, Arc<ChatCompletions>)>>,
    model: String,
}

impl Copilot {
    /// A provider from resolved settings (`api_key` holds the GitHub token) and `endpoints`.
    pub fn new(resolved: &ResolvedProvider, http: HttpClient, endpoints: Endpoints) -> Result<Self, LlmError> {
        let github_token = resolved.api_key.clone().filter(|k| !k.is_empty()).ok_or_else(|| {
            LlmError::not_configured("copilot has no GitHub token: set GITHUB_COPILOT_TOKEN (CI) or run `dracode auth copilot`")
        })?;
        Ok(Copilot {
            model: resolved.model.clone().unwrap_or_default(),
            resolved: resolved.clone(),
            github_token,
            endpoints,
            http,
            current: tokio::sync::Mutex::new(None),
        })
    }

    /// A chat client with a valid token, refreshing it when `force` or when it is about to expire.
    async fn client(&self, force: bool) -> Result<Arc<ChatCompletions>, LlmError> {
        let mut current = self.current.lock().await;
        if let Some((_, client)) = current.as_ref().filter(|(t, _)| !force && t.expires_at > now() + REFRESH_MARGIN.as_secs()) {
            return Ok(client.clone());
        }
        let token = exchange(&self.http, &self.endpoints, &self.github_token).await?;
        let mut settings = self.resolved.clone();
        settings.api_key = Some(token.token.clone());
        if let Some(api) = &token.api {
            settings.base_url = Some(api.clone());
        }
        let client = Arc::new(ChatCompletions::new(&settings, self.http.clone())?);
        *current = Some((token, client.clone()));
        Ok(client)
    }
}

impl Provider for Copilot {
    fn complete<'a>(&'a self, request: LlmRequest<'a>, on_retry: RetryObserver<'a>) -> BoxFuture<'a, Result<LlmResponse, LlmError>> {
        Box::pin(async move {
            let client = self.client(false).await?;
            match client.complete(request, on_retry).await {
                Err(e) if e.kind == ErrorKind::Auth => self.client(true).await?.complete(request, on_retry).await,
                other => other,
            }
        })
    }

    fn model(&self) -> &str {
        &self.model
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_environment_wins_over_the_stored_token_which_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let mut env = BTreeMap::from([("XDG_CONFIG_HOME".to_string(), dir.path().display().to_string())]);
        assert_eq!(github_token(&env), None);
        let path = store_token(&env, "gho_stored").unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
        assert_eq!(std::fs::metadata(path.parent().unwrap()).unwrap().permissions().mode() & 0o777, 0o700);
        assert_eq!(github_token(&env).as_deref(), Some("gho_stored"));
        env.insert("GITHUB_COPILOT_TOKEN".into(), "gho_env".into());
        assert_eq!(github_token(&env).as_deref(), Some("gho_env"));
    }
}
