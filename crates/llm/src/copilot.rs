//! GitHub Copilot: a GitHub OAuth token (from `dracode auth copilot`'s device flow, or from the
//! environment in CI) is exchanged for a short-lived Copilot token, which then authenticates
//! Chat Completions calls. The Copilot token is refreshed five minutes before it expires, and
//! once more after a 401; the tasks of a run share one token.
//!
//! Credentials, in order: `GITHUB_COPILOT_TOKEN`, `GH_COPILOT_TOKEN`, then the token stored by
//! `dracode auth copilot` in `$XDG_CONFIG_HOME/dracode/copilot.json` (or `~/.config/…`, mode
//! 0600). `dracode run` never starts the device flow.
//!
//! Copilot as data — its preset and editor headers — is in [`super::preset`], the GitHub token
//! lookup in [`super::github_token`]. Here is the code: the device flow, [`connect`], and
//! [`CopilotTokens`], the [`KeySource`] that plugs the exchange into the generic
//! [`HttpProvider`] speaking Chat Completions.

use super::http::{HttpClient, RetryPolicy, send_json};
use super::http_provider::{HttpProvider, IssuedKey, KeySource};
use super::openai::ChatCompletionsFormat;
use super::preset::{COPILOT_EDITOR_PLUGIN_VERSION, COPILOT_EDITOR_VERSION, Env, ResolvedProvider};
use super::{BoxFuture, ErrorKind, LlmError, Provider, RetryObserver};
use dracode_secrets::Redactor;
use serde_json::{Value, json};
use std::collections::{BTreeMap, HashMap};
use std::sync::{Arc, Mutex, OnceLock, PoisonError};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

/// The OAuth app id that editor Copilot integrations use for the device flow; override with
/// `DRACODE_COPILOT_CLIENT_ID`.
pub const CLIENT_ID: &str = "Iv1.b507a08c87ecfe98";
/// Refresh the Copilot token this long before it expires.
const REFRESH_MARGIN: Duration = Duration::from_secs(300);

/// Builds a task's Copilot provider, with GitHub's endpoints from `env` (what the registry
/// does for a type whose preset names [`super::preset::KeyExchange::Copilot`]).
pub fn connect(resolved: &ResolvedProvider, http: &HttpClient, env: &Env) -> Result<Arc<dyn Provider>, LlmError> {
    Ok(Arc::new(Copilot::new(resolved, http.clone(), Endpoints::from_env(env))?))
}

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

/// What the user must do to finish the device flow.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DeviceCode {
    /// Where to go.
    pub verification_uri: String,
    /// What to type there.
    pub user_code: String,
}

/// Why the device flow ended without a token.
#[derive(Debug, thiserror::Error)]
pub enum DeviceFlowError {
    /// GitHub could not be reached.
    #[error("cannot reach GitHub: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// GitHub's answer was not JSON.
    #[error("unexpected answer from GitHub: {0}")]
    UnexpectedAnswer(#[source] reqwest::Error),
    /// GitHub's first answer lacks a field the flow needs.
    #[error("GitHub's answer lacks `{field}`: {answer}")]
    MissingField {
        /// The field.
        field: &'static str,
        /// The answer as received.
        answer: Value,
    },
    /// The code's lifetime passed while polling.
    #[error("the code expired before it was approved; run `dracode auth copilot` again")]
    TimedOut,
    /// GitHub says the code expired (`expired_token`).
    #[error("the code expired; run `dracode auth copilot` again")]
    Expired,
    /// The user refused (`access_denied`).
    #[error("access was denied on GitHub")]
    Denied,
    /// Any other error GitHub names.
    #[error("GitHub refused: {0}")]
    Refused(String),
}

/// GitHub's OAuth device flow: asks for a code, shows it through `show`, then polls at the
/// server's interval (longer after `slow_down`) until the user approves. Returns the token.
pub async fn device_flow(http: &HttpClient, endpoints: &Endpoints, show: impl FnOnce(&DeviceCode)) -> Result<String, DeviceFlowError> {
    let client = http.get();
    let start: Value = client
        .post(format!("{}/login/device/code", endpoints.github))
        .header("accept", "application/json")
        .json(&json!({"client_id": endpoints.client_id, "scope": "read:user"}))
        .send()
        .await
        .map_err(DeviceFlowError::Unreachable)?
        .json()
        .await
        .map_err(DeviceFlowError::UnexpectedAnswer)?;
    let field = |k: &'static str| {
        start
            .get(k)
            .and_then(Value::as_str)
            .map(str::to_string)
            .ok_or_else(|| DeviceFlowError::MissingField { field: k, answer: start.clone() })
    };
    let device_code = field("device_code")?;
    show(&DeviceCode { verification_uri: field("verification_uri")?, user_code: field("user_code")? });
    let mut interval = Duration::from_secs(start.get("interval").and_then(Value::as_u64).unwrap_or(5));
    let deadline = std::time::Instant::now() + Duration::from_secs(start.get("expires_in").and_then(Value::as_u64).unwrap_or(900));
    loop {
        tokio::time::sleep(interval).await;
        if std::time::Instant::now() > deadline {
            return Err(DeviceFlowError::TimedOut);
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
            .map_err(DeviceFlowError::Unreachable)?
            .json()
            .await
            .map_err(DeviceFlowError::UnexpectedAnswer)?;
        if let Some(token) = poll.get("access_token").and_then(Value::as_str) {
            return Ok(token.to_string());
        }
        match poll.get("error").and_then(Value::as_str) {
            Some("authorization_pending") => {}
            Some("slow_down") => interval = slowed_down(&poll, interval),
            Some("expired_token") => return Err(DeviceFlowError::Expired),
            Some("access_denied") => return Err(DeviceFlowError::Denied),
            other => return Err(DeviceFlowError::Refused(other.unwrap_or("unknown error").to_string())),
        }
    }
}

/// The wait after a `slow_down`: the interval GitHub's answer names, else five seconds more
/// (RFC 8628 §3.5).
fn slowed_down(poll: &Value, interval: Duration) -> Duration {
    poll.get("interval").and_then(Value::as_u64).map_or(interval + Duration::from_secs(5), Duration::from_secs)
}

/// A Copilot token and the API it is for.
#[derive(Debug, Clone)]
struct CopilotToken {
    token: String,
    expires_at: u64,
    api: Option<String>,
}

impl CopilotToken {
    /// Still usable for a while: it expires more than [`REFRESH_MARGIN`] from now.
    fn is_fresh(&self) -> bool {
        self.expires_at > now() + REFRESH_MARGIN.as_secs()
    }
}

/// Exchanges a GitHub token for a Copilot token (`GET {api}/copilot_internal/v2/token`),
/// retrying transient failures like every provider call.
async fn exchange(copilot: &CopilotTokens, retry: &RetryPolicy, on_retry: RetryObserver<'_>) -> Result<CopilotToken, LlmError> {
    let url = format!("{}/copilot_internal/v2/token", copilot.endpoints.api);
    let timeout = copilot.timeout;
    let build = |client: &reqwest::Client| {
        let mut request = client
            .get(&url)
            .header("authorization", format!("token {}", copilot.github_token))
            .header("accept", "application/json")
            .header("user-agent", concat!("dracode/", env!("CARGO_PKG_VERSION")));
        for (name, value) in [COPILOT_EDITOR_VERSION, COPILOT_EDITOR_PLUGIN_VERSION] {
            request = request.header(name, value);
        }
        if timeout.is_zero() { request } else { request.timeout(timeout) }
    };
    let redactor = Redactor::new([copilot.github_token.clone()]);
    let reply = send_json(copilot.http.for_url(&url), build, retry, &redactor, on_retry).await.map_err(|mut e| {
        e.message = match e.http_status {
            // GitHub answers 404 as well when the account has no Copilot access.
            Some(401 | 403 | 404) => {
                e.kind = ErrorKind::Auth;
                format!(
                    "GitHub refused the Copilot token exchange ({}): is Copilot enabled for this account? Run `dracode auth copilot` or set GITHUB_COPILOT_TOKEN",
                    e.message
                )
            }
            _ => format!("Copilot token exchange: {}", e.message),
        };
        e
    })?;
    let body = &reply.body;
    let token = body.get("token").and_then(Value::as_str).filter(|t| !t.is_empty()).ok_or_else(|| LlmError {
        http_status: Some(reply.status),
        ..LlmError::new(ErrorKind::BadResponse, format!("Copilot token exchange answered HTTP {} without a token", reply.status))
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

/// Where a Copilot token is kept between calls.
type Slot = Arc<tokio::sync::Mutex<Option<CopilotToken>>>;

/// The process's slot for tokens of `github_token` at `api`: every task of a batch builds its
/// own provider, and they share one Copilot token rather than each exchanging its own.
fn shared_slot(api: &str, github_token: &str) -> Slot {
    static SLOTS: OnceLock<Mutex<HashMap<(String, String), Slot>>> = OnceLock::new();
    // A panic while holding this lock cannot leave the map half-updated (one insert), so a
    // poisoned lock is still sound to use.
    let mut slots = SLOTS.get_or_init(Default::default).lock().unwrap_or_else(PoisonError::into_inner);
    slots.entry((api.to_string(), github_token.to_string())).or_default().clone()
}

/// Copilot chat: Chat Completions with a Copilot token that is kept fresh.
pub type Copilot = HttpProvider<ChatCompletionsFormat, CopilotTokens>;

/// Copilot tokens for one GitHub token, exchanged when needed and shared by the run's tasks.
pub struct CopilotTokens {
    github_token: String,
    endpoints: Endpoints,
    http: HttpClient,
    timeout: Duration,
    slot: Slot,
}

impl Copilot {
    /// A provider from resolved settings (`api_key` holds the GitHub token) and `endpoints`.
    /// Nothing is sent until the first call.
    pub fn new(resolved: &ResolvedProvider, http: HttpClient, endpoints: Endpoints) -> Result<Self, LlmError> {
        let github_token = resolved.api_key.clone().filter(|k| !k.is_empty()).ok_or_else(|| {
            LlmError::not_configured("copilot has no GitHub token: set GITHUB_COPILOT_TOKEN (CI) or run `dracode auth copilot`")
        })?;
        let tokens = CopilotTokens {
            slot: shared_slot(&endpoints.api, &github_token),
            github_token,
            endpoints,
            http: http.clone(),
            timeout: resolved.timeout,
        };
        // The GitHub token never goes to the chat API: calls carry the issued Copilot token.
        let chat = ResolvedProvider { api_key: None, ..resolved.clone() };
        HttpProvider::with_key_source(&chat, http, tokens)
    }
}

impl KeySource for CopilotTokens {
    /// The shared token while it is fresh and is not `refused` (the one a 401 just refused),
    /// else a new exchange. Tasks that find the same token stale wait here for one exchange and
    /// then share its result. Calls go to the API the exchange named.
    fn issue<'a>(
        &'a self,
        refused: Option<&'a str>,
        retry: &'a RetryPolicy,
        on_retry: RetryObserver<'a>,
    ) -> BoxFuture<'a, Result<Option<IssuedKey>, LlmError>> {
        Box::pin(async move {
            let mut slot = self.slot.lock().await;
            let token = match slot.as_ref().filter(|t| t.is_fresh() && Some(t.token.as_str()) != refused) {
                Some(token) => token.clone(),
                None => {
                    let token = exchange(self, retry, on_retry).await?;
                    *slot = Some(token.clone());
                    token
                }
            };
            Ok(Some(IssuedKey { key: token.token, base_url: token.api }))
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slow_down_takes_githubs_interval_else_five_seconds_more() {
        let five = Duration::from_secs(5);
        assert_eq!(slowed_down(&json!({"error": "slow_down", "interval": 12}), five), Duration::from_secs(12));
        assert_eq!(slowed_down(&json!({"error": "slow_down"}), five), Duration::from_secs(10));
    }

    #[test]
    fn endpoints_default_to_github_and_follow_the_environment() {
        let defaults = Endpoints::from_env(&BTreeMap::new());
        assert_eq!(
            (defaults.github.as_str(), defaults.api.as_str(), defaults.client_id.as_str()),
            ("https://github.com", "https://api.github.com", CLIENT_ID)
        );
        let env = BTreeMap::from([
            ("DRACODE_GITHUB_URL".to_string(), "http://127.0.0.1:1/".to_string()),
            ("DRACODE_GITHUB_API_URL".to_string(), "http://127.0.0.1:2".to_string()),
            ("DRACODE_COPILOT_CLIENT_ID".to_string(), "Iv1.other".to_string()),
        ]);
        let custom = Endpoints::from_env(&env);
        assert_eq!(
            (custom.github.as_str(), custom.api.as_str(), custom.client_id.as_str()),
            ("http://127.0.0.1:1", "http://127.0.0.1:2", "Iv1.other")
        );
    }
}
