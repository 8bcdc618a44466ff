//! Streamable HTTP: each request its own POST, answered with JSON or an SSE stream; the
//! headers of every revision (`MCP-Protocol-Version`, `Mcp-Method`, `Mcp-Name`, a legacy
//! server's `Mcp-Session-Id`), the configured `headers`, and a bearer token — static or from
//! OAuth ([`super::oauth`]: a client's, a person's kept fresh with its refresh token, or a
//! workload's grant) fetched when the server answers 401 (or 403 `insufficient_scope`: step-up),
//! DPoP-bound with a fresh proof on every request when the token is.

use super::jsonrpc::{Asked, Failure, Outgoing, answer_server_request, response_of};
use super::oauth::dpop::Binding;
use super::oauth::{Challenge, ClientCredentials};
use super::protocol::RpcError;
use dracode_llm::stream::{Framer, Framing};
use dracode_secrets::Redactor;
use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use serde_json::{Value, json};
use std::sync::atomic::{AtomicI64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// How a `url` server is authenticated, with every `${VAR}` already expanded. Never logged.
#[derive(Clone, Default)]
pub struct Credentials {
    /// `headers`.
    pub headers: Vec<(String, String)>,
    /// The token of `bearer_token_env_var`.
    pub bearer: Option<String>,
    /// `oauth`.
    pub oauth: Option<ClientCredentials>,
}

/// One streamable-HTTP server.
pub struct HttpLink {
    client: reqwest::Client,
    url: String,
    /// `[mcp_servers.NAME]`, for what to configure when authentication fails.
    name: String,
    credentials: Credentials,
    token: tokio::sync::Mutex<Option<String>>,
    /// A person's OAuth grant: refresh token, registered client, scope, expiry.
    grant: tokio::sync::Mutex<super::oauth::flow::Session>,
    /// DPoP: whether the token is bound to the run's key, and the server's nonce.
    dpop: Arc<Binding>,
    /// The run's masking: it learns the tokens and assertions OAuth fetches, which are then
    /// masked in everything the server answers and everything dracode writes.
    redactor: Redactor,
    session: Mutex<Option<String>>,
    next_id: AtomicI64,
    /// What the server asked of dracode, and how to answer it.
    pub asked: Arc<Asked>,
    /// The protocol version in use, once chosen (sent with answers to the server's requests).
    version: Mutex<Option<String>>,
    /// Reads the server's own stream (GET) of a legacy session, see [`HttpLink::listen`].
    listener: Mutex<Option<tokio::task::JoinHandle<()>>>,
}

enum Answer {
    Done(Result<Value, Failure>),
    /// The SSE stream ended without the response; its last event id and `retry`.
    Ended(Option<String>, Option<u64>),
}

impl HttpLink {
    /// A link to `url` for server `name`; the server's requests are answered as `asked` says;
    /// what OAuth fetches joins `redactor` (the run's).
    pub fn new(client: reqwest::Client, url: &str, name: &str, credentials: Credentials, asked: Asked, redactor: Redactor) -> HttpLink {
        let token = credentials.bearer.clone();
        let grant = credentials.oauth.as_ref().map(super::oauth::flow::Session::new).unwrap_or_default();
        HttpLink {
            grant: tokio::sync::Mutex::new(grant),
            client,
            url: url.to_string(),
            name: name.to_string(),
            credentials,
            token: tokio::sync::Mutex::new(token),
            dpop: Arc::default(),
            redactor,
            session: Mutex::new(None),
            next_id: AtomicI64::new(1),
            asked: Arc::new(asked),
            version: Mutex::default(),
            listener: Mutex::default(),
        }
    }

    /// Sends `out`, waiting at most `limit` (dropping the stream cancels it on the server).
    pub async fn request(&self, out: &Outgoing, limit: Duration) -> Result<Value, Failure> {
        tokio::time::timeout(limit, self.exchange(out)).await.unwrap_or(Err(Failure::TimedOut))
    }

    async fn exchange(&self, out: &Outgoing) -> Result<Value, Failure> {
        let (mut authenticated, mut reissued, mut nonced) = (false, false, false);
        if let (Some(version), Ok(mut kept)) = (&out.version, self.version.lock()) {
            *kept = Some(version.clone());
        }
        loop {
            if self.grant.lock().await.expired() {
                // An expired access token is refreshed before it is refused (DPoP-bound if it was).
                let _ = self.authenticate(&Challenge { dpop: self.dpop.is_bound(), ..Challenge::default() }).await;
            }
            let id = self.next_id.fetch_add(1, Ordering::Relaxed);
            let body = json!({"jsonrpc": "2.0", "id": id, "method": out.method, "params": out.params});
            let response = self.post(&body, out).await?;
            let status = response.status().as_u16();
            let learned = self.dpop.learn(response.headers());
            if status == 401 && learned && !nonced && Challenge::of(&response).use_dpop_nonce {
                nonced = true;
                continue;
            }
            if status == 401 || (status == 403 && Challenge::of(&response).insufficient_scope) {
                if !authenticated && self.authenticate(&Challenge::of(&response)).await? {
                    authenticated = true;
                    continue;
                }
                return Err(Failure::Auth(self.auth_failure(status).await));
            }
            self.keep_session(&response);
            match self.read_answer(response, id).await? {
                Answer::Done(answer) => return answer,
                Answer::Ended(Some(last), retry) if self.session_id().is_some() => return self.resume(id, &last, retry).await,
                Answer::Ended(..) if !reissued => reissued = true,
                Answer::Ended(..) => return Err(Failure::Broken("the server closed the response stream without answering".into())),
            }
        }
    }

    async fn post(&self, body: &Value, out: &Outgoing) -> Result<reqwest::Response, Failure> {
        let mut headers = self.base_headers("POST", out.version.as_deref()).await;
        insert(&mut headers, "mcp-method", &out.method);
        for (name, value) in &out.headers {
            insert(&mut headers, name, value);
        }
        let request = self.client.post(&self.url).headers(headers).body(body.to_string());
        request.send().await.map_err(|e| Failure::Broken(format!("cannot reach {}: {}", self.url, plain_error(&e))))
    }

    /// The headers of every message: content types, version, session, configured headers, token
    /// (and its DPoP proof for `method`).
    async fn base_headers(&self, method: &str, version: Option<&str>) -> HeaderMap {
        let mut headers = HeaderMap::new();
        insert(&mut headers, "content-type", "application/json");
        insert(&mut headers, "accept", "application/json, text/event-stream");
        if let Some(version) = version {
            insert(&mut headers, "mcp-protocol-version", version);
        }
        if let Some(session) = self.session_id() {
            insert(&mut headers, "mcp-session-id", &session);
        }
        for (name, value) in &self.credentials.headers {
            insert(&mut headers, name, value);
        }
        if let Some(token) = self.token.lock().await.as_deref() {
            let scheme = if self.dpop.is_bound() { "DPoP" } else { "Bearer" };
            insert(&mut headers, "authorization", &format!("{scheme} {token}"));
        }
        if let Some(proof) = self.dpop.proof(method, &self.url) {
            insert(&mut headers, "dpop", &proof);
        }
        headers
    }

    /// `text` with every token and assertion OAuth fetched masked (a careless server may echo
    /// the `Authorization` header).
    fn mask(&self, text: &str) -> String {
        self.redactor.redact(text).into_owned()
    }

    fn session_id(&self) -> Option<String> {
        self.session.lock().ok().and_then(|s| s.clone())
    }

    fn keep_session(&self, response: &reqwest::Response) {
        let given = response.headers().get("mcp-session-id").and_then(|v| v.to_str().ok());
        if let (Some(id), Ok(mut session)) = (given, self.session.lock()) {
            *session = Some(id.to_string());
        }
    }

    /// Fetches an OAuth token when `oauth` is configured; `false` when there is nothing to try.
    async fn authenticate(&self, challenge: &Challenge) -> Result<bool, Failure> {
        let Some(oauth) = &self.credentials.oauth else { return Ok(false) };
        let token = if oauth.for_person() {
            let mut grant = self.grant.lock().await;
            let mode = super::oauth::code::Mode::Headless;
            super::oauth::flow::user_token(&self.client, &self.url, &self.name, oauth, &mut grant, challenge, mode).await
        } else {
            super::oauth::fetch_token(&self.client, &self.url, oauth, challenge).await
        };
        let token = token.map_err(|e| Failure::Auth(format!("OAuth ({}) failed: {e}", oauth.grant.label())))?;
        for secret in token.secrets() {
            self.redactor.learn(&format!("a token of mcp_servers.{}.oauth", self.name), secret);
        }
        self.dpop.bind(token.dpop.then(|| token.access_token.clone()));
        *self.token.lock().await = Some(token.access_token);
        Ok(true)
    }

    async fn auth_failure(&self, status: u16) -> String {
        let fields = "`headers`, `bearer_token_env_var` or `oauth`";
        let name = &self.name;
        let had = self.token.lock().await.is_some() || !self.credentials.headers.is_empty();
        if had {
            format!("the server refused dracode's credentials (HTTP {status}): check {fields} under [mcp_servers.{name}]")
        } else {
            format!("authentication required (HTTP {status}): give it credentials with {fields} under [mcp_servers.{name}]")
        }
    }

    async fn read_answer(&self, response: reqwest::Response, id: i64) -> Result<Answer, Failure> {
        let status = response.status();
        let sse = response.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
        if status.is_success() && sse {
            return self.read_stream(response, id).await;
        }
        let text = response.text().await.map_err(|e| Failure::Broken(format!("reading the answer failed: {}", plain_error(&e))))?;
        let text = self.mask(&text);
        let parsed: Option<Value> = serde_json::from_str(&text).ok();
        if let Some(error) = parsed.as_ref().and_then(|v| v.get("error")) {
            return Ok(Answer::Done(Err(Failure::Rpc(RpcError::from_value(error)))));
        }
        if !status.is_success() {
            return Err(Failure::Http(status.as_u16(), snippet(&text)));
        }
        match parsed.as_ref().and_then(response_of) {
            Some((got, answer)) if got == id => Ok(Answer::Done(answer)),
            _ => Err(Failure::Broken(format!("the server's answer is not the JSON-RPC response to request {id}: {}", snippet(&text)))),
        }
    }

    async fn read_stream(&self, mut response: reqwest::Response, id: i64) -> Result<Answer, Failure> {
        let mut framer = Framer::new(Framing::Sse);
        loop {
            let Ok(Some(chunk)) = response.chunk().await else {
                return Ok(Answer::Ended(framer.last_id().map(str::to_string), framer.retry_ms()));
            };
            for event in framer.push(&chunk) {
                let Ok(message) = serde_json::from_str::<Value>(&self.mask(&event.data)) else { continue };
                if let Some(reply) = answer_server_request(&message, &self.asked) {
                    self.send_reply(&reply).await;
                } else if let Some((got, answer)) = response_of(&message)
                    && got == id
                {
                    return Ok(Answer::Done(answer));
                }
            }
        }
    }

    /// A legacy server's stream closed before the answer: reconnect with GET and
    /// `Last-Event-ID` after its `retry`, and read the answer there.
    async fn resume(&self, id: i64, last: &str, retry: Option<u64>) -> Result<Value, Failure> {
        tokio::time::sleep(Duration::from_millis(retry.unwrap_or(1000))).await;
        let mut headers = self.base_headers("GET", None).await;
        insert(&mut headers, "last-event-id", last);
        headers.remove("content-type");
        let response = self.client.get(&self.url).headers(headers).send().await;
        let response = response.map_err(|e| Failure::Broken(format!("cannot reach {}: {}", self.url, plain_error(&e))))?;
        match self.read_answer(response, id).await? {
            Answer::Done(answer) => answer,
            Answer::Ended(..) => Err(Failure::Broken("the server closed the resumed stream without answering".into())),
        }
    }

    async fn send_reply(&self, reply: &Value) {
        let version = self.version.lock().ok().and_then(|v| v.clone());
        let headers = self.base_headers("POST", version.as_deref()).await;
        post_reply(&self.client, &self.url, headers, reply).await;
    }

    /// A legacy session's server sends requests not tied to a call (as an elicitation may be)
    /// on a stream the client opens with GET: open it once the session is ready and answer
    /// what comes on it, until [`HttpLink::close`]. Returns once the server has answered the
    /// GET (its stream is registered before the first call can ask anything on it), or after
    /// `limit`; a server without one (405) is left alone.
    pub async fn listen(&self, version: &str, limit: Duration) {
        let mut headers = self.base_headers("GET", Some(version)).await;
        insert(&mut headers, "accept", "text/event-stream");
        headers.remove("content-type");
        let opened = tokio::time::timeout(limit, self.client.get(&self.url).headers(headers.clone()).send()).await;
        let Ok(Ok(mut response)) = opened else { return };
        let sse = response.headers().get("content-type").and_then(|v| v.to_str().ok()).is_some_and(|c| c.starts_with("text/event-stream"));
        if !(response.status().is_success() && sse) {
            tracing::debug!(status = %response.status(), "MCP server offers no stream of its own");
            return;
        }
        insert(&mut headers, "content-type", "application/json");
        insert(&mut headers, "accept", "application/json, text/event-stream");
        let (client, url, asked, dpop) = (self.client.clone(), self.url.clone(), self.asked.clone(), self.dpop.clone());
        let task = tokio::spawn(async move {
            let mut framer = Framer::new(Framing::Sse);
            while let Ok(Some(chunk)) = response.chunk().await {
                for event in framer.push(&chunk) {
                    let Ok(message) = serde_json::from_str::<Value>(&event.data) else { continue };
                    if let Some(reply) = answer_server_request(&message, &asked) {
                        let mut headers = headers.clone();
                        if let Some(proof) = dpop.proof("POST", &url) {
                            insert(&mut headers, "dpop", &proof);
                        }
                        post_reply(&client, &url, headers, &reply).await;
                    }
                }
            }
        });
        if let Ok(mut listener) = self.listener.lock() {
            *listener = Some(task);
        }
    }

    /// Posts a notification (a legacy server's `notifications/initialized`).
    pub async fn notify(&self, method: &str, params: Value, version: Option<&str>) {
        let mut headers = self.base_headers("POST", version).await;
        insert(&mut headers, "mcp-method", method);
        let body = json!({"jsonrpc": "2.0", "method": method, "params": params});
        let _ = self.client.post(&self.url).headers(headers).body(body.to_string()).send().await;
    }

    /// Ends a legacy server's session (DELETE), if it gave one.
    pub async fn close(&self) {
        if let Some(listener) = self.listener.lock().ok().and_then(|mut l| l.take()) {
            listener.abort();
        }
        if self.session_id().is_some() {
            let headers = self.base_headers("DELETE", None).await;
            let _ = tokio::time::timeout(Duration::from_secs(2), self.client.delete(&self.url).headers(headers).send()).await;
        }
    }
}

impl Drop for HttpLink {
    fn drop(&mut self) {
        if let Some(listener) = self.listener.lock().ok().and_then(|mut l| l.take()) {
            listener.abort();
        }
    }
}

/// Posts dracode's answer to a request of the server.
async fn post_reply(client: &reqwest::Client, url: &str, headers: HeaderMap, reply: &Value) {
    let _ = client.post(url).headers(headers).body(reply.to_string()).send().await;
}

fn insert(headers: &mut HeaderMap, name: &str, value: &str) {
    if let (Ok(name), Ok(value)) = (HeaderName::try_from(name), HeaderValue::try_from(value)) {
        headers.insert(name, value);
    }
}

/// A reqwest error without its type names: what failed, and why underneath.
fn plain_error(error: &reqwest::Error) -> String {
    let mut text = if error.is_timeout() {
        "timed out".to_string()
    } else if error.is_connect() {
        "connection failed".to_string()
    } else {
        "request failed".to_string()
    };
    let mut source = std::error::Error::source(error);
    while let Some(cause) = source {
        text = format!("{text}: {cause}");
        source = cause.source();
    }
    text
}

/// The first 300 characters of a body, on one line.
fn snippet(text: &str) -> String {
    let line: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    line.chars().take(300).collect()
}
