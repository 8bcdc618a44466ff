//! A person's grant, kept fresh for a link's lifetime: the refresh token (configured, or from a
//! code flow) used first; else the authorization code flow; step-up re-authorizes with the
//! union of the scopes asked so far and the challenged ones. Everything is bound to the issuer
//! it came from: when the server names another authorization server, dracode registers anew.

use super::client_auth::TokenClient;
use super::code::{self, Mode, Registered};
use super::discovery::{Discovered, discover};
use super::{Challenge, ClientCredentials, ClientSecret, OAuthError, Token, request_token};
use std::time::Instant;

/// What a link knows of its person's grant. Never logged.
#[derive(Default)]
pub struct Session {
    /// The issuer the refresh token and registered client belong to (`None`: not known yet).
    issuer: Option<String>,
    /// The refresh token in use (the configured one, then any rotated one).
    pub refresh: Option<String>,
    /// The client registered dynamically, if any.
    pub registered: Option<Registered>,
    /// The scope last asked for.
    pub scope: Option<String>,
    /// When the access token expires.
    pub expires_at: Option<Instant>,
}

impl Session {
    /// A session starting from `creds`' refresh token.
    pub fn new(creds: &ClientCredentials) -> Session {
        Session { refresh: creds.refresh_token.clone(), ..Session::default() }
    }

    /// Whether the access token has expired and can be refreshed.
    pub fn expired(&self) -> bool {
        self.refresh.is_some() && self.expires_at.is_some_and(|at| Instant::now() >= at)
    }

    /// Keeps what `token` says of the grant (a rotated refresh token, expiry, scope).
    fn keep(&mut self, token: Token) -> Token {
        if token.refresh_token.is_some() {
            self.refresh.clone_from(&token.refresh_token);
        }
        self.expires_at = token.expires_at;
        if token.scope.is_some() {
            self.scope.clone_from(&token.scope);
        }
        token
    }
}

/// An access token for `server_url` from a person's grant (see the module doc). `name` is the
/// server's name, for what to do when a person is needed.
pub async fn user_token(
    http: &reqwest::Client,
    server_url: &str,
    name: &str,
    creds: &ClientCredentials,
    session: &mut Session,
    challenge: &Challenge,
    mode: Mode<'_>,
) -> Result<Token, OAuthError> {
    let found = discover(http, server_url, challenge).await?;
    if session.issuer.as_deref().is_some_and(|i| i != found.issuer) {
        // Another authorization server: nothing of the old one is shown to it.
        *session = Session { scope: session.scope.take(), ..Session::default() };
    }
    session.issuer = Some(found.issuer.clone());
    let mut refused = None;
    if let (false, Some(refresh), Mode::Headless) = (challenge.insufficient_scope, session.refresh.clone(), &mode)
        && let Some(client) = known_client(creds, session, &found)
    {
        let form = vec![("grant_type", "refresh_token".into()), ("refresh_token", refresh)];
        match request_token(http, &found, &client, form, challenge.dpop).await {
            Ok(token) => return Ok(session.keep(token)),
            Err(e) => refused = Some(e),
        }
    }
    let scope = choose_scope(creds, challenge, &found, session.scope.as_deref());
    session.scope = scope.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.map_err(OAuthError::Listen)?;
    let port = listener.local_addr().map_err(OAuthError::ListenerAddress)?.port();
    let redirect_uri = format!("http://127.0.0.1:{port}/callback");
    let client = client_for(http, creds, session, &found, &redirect_uri).await?;
    let request = code::request(&found, &client, scope.as_deref(), &redirect_uri)?;
    let callback = match (code::headless(&request).await?, &mode) {
        (Some(callback), _) => callback,
        (None, Mode::Person(open)) => {
            open(&request.url);
            code::wait_for_redirect(&listener, code::LOGIN_WAIT).await?
        }
        (None, Mode::Headless) => {
            return Err(OAuthError::NeedsPerson { name: name.to_string(), issuer: found.issuer.clone(), refused });
        }
    };
    let code = code::code_of(&callback, &request, &found)?;
    let form = vec![
        ("grant_type", "authorization_code".into()),
        ("code", code),
        ("redirect_uri", request.redirect_uri.clone()),
        ("code_verifier", request.verifier.clone()),
    ];
    let token = request_token(http, &found, &client, form, challenge.dpop).await?;
    Ok(session.keep(token))
}

/// The scope to ask for: the configured one, else the challenge's, else the resource's
/// `scopes_supported`, else none; on step-up, with the ones asked before. `offline_access` is
/// added (for a refresh token) when the authorization server lists it.
fn choose_scope(creds: &ClientCredentials, challenge: &Challenge, found: &Discovered, before: Option<&str>) -> Option<String> {
    let base = creds.scope.clone().or_else(|| challenge.scope.clone()).or_else(|| found.scopes.clone());
    let mut words: Vec<String> = Vec::new();
    let earlier = if challenge.insufficient_scope { before } else { None };
    for word in earlier.into_iter().chain(base.as_deref()).flat_map(str::split_whitespace) {
        if !words.iter().any(|w| w == word) {
            words.push(word.to_string());
        }
    }
    if !words.is_empty() && found.as_scopes.iter().any(|s| s == "offline_access") && !words.iter().any(|w| w == "offline_access") {
        words.push("offline_access".into());
    }
    (!words.is_empty()).then(|| words.join(" "))
}

/// The client dracode already is for this authorization server: the configured one, the
/// metadata document's URL (when the server takes those), or the one registered before.
fn known_client(creds: &ClientCredentials, session: &Session, found: &Discovered) -> Option<TokenClient> {
    if !creds.client_id.is_empty() {
        return Some(creds.token_client());
    }
    if let (Some(url), true) = (&creds.client_metadata_url, found.client_metadata_supported) {
        return Some(TokenClient { id: url.clone(), secret: ClientSecret::None, method: Some("none".into()) });
    }
    session.registered.as_ref().filter(|r| r.issuer == found.issuer).map(token_client)
}

fn token_client(r: &Registered) -> TokenClient {
    let secret = match &r.secret {
        Some(secret) if r.method != "none" => ClientSecret::Secret(secret.clone()),
        _ => ClientSecret::None,
    };
    TokenClient { id: r.id.clone(), secret, method: Some(r.method.clone()) }
}

/// The client to authorize as: a [`known_client`], or one registered now.
async fn client_for(
    http: &reqwest::Client,
    creds: &ClientCredentials,
    session: &mut Session,
    found: &Discovered,
    redirect_uri: &str,
) -> Result<TokenClient, OAuthError> {
    if let Some(client) = known_client(creds, session, found) {
        return Ok(client);
    }
    let Some(url) = &found.registration_url else {
        return Err(OAuthError::NoRegistration { issuer: found.issuer.clone() });
    };
    let registered = code::register(http, found, url, redirect_uri).await?;
    session.registered = Some(registered.clone());
    Ok(token_client(&registered))
}

/// What `dracode mcp login` obtained.
pub struct Login {
    /// The refresh token to store as a CI secret.
    pub refresh_token: Option<String>,
    /// The client registered dynamically (its id, and secret if any, must be configured too).
    pub registered: Option<Registered>,
    /// The scope asked for.
    pub scope: Option<String>,
}

/// `dracode mcp login`: the authorization code flow for server `name` at `server_url`, a person
/// approving in the browser `open` shows the URL in (or headless, where the authorization
/// server approves at once). The server's own challenge (its answer to an unauthenticated
/// `initialize`) guides discovery and scope.
pub async fn login(
    http: &reqwest::Client,
    server_url: &str,
    name: &str,
    creds: &ClientCredentials,
    open: &(dyn Fn(&str) + Send + Sync),
) -> Result<Login, OAuthError> {
    let hello = serde_json::json!({"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "dracode", "version": env!("CARGO_PKG_VERSION")}}});
    let answer = http
        .post(server_url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(hello.to_string())
        .send()
        .await
        .map_err(|_| OAuthError::ServerUnreachable { url: server_url.to_string() })?;
    let challenge = Challenge::of(&answer);
    let mut session = Session::default();
    user_token(http, server_url, name, creds, &mut session, &challenge, Mode::Person(open)).await?;
    Ok(Login { refresh_token: session.refresh, registered: session.registered, scope: session.scope })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn creds(scope: Option<&str>) -> ClientCredentials {
        ClientCredentials {
            client_id: String::new(),
            secret: ClientSecret::None,
            scope: scope.map(str::to_string),
            token_url: None,
            grant: super::super::Grant::AuthorizationCode,
            refresh_token: None,
            client_metadata_url: None,
        }
    }

    #[test]
    fn scopes_come_from_config_then_challenge_then_metadata_and_step_up_keeps_the_earlier_ones() {
        let mut found = Discovered::fallback("http://rs/mcp");
        found.scopes = Some("mcp:profile".into());
        let challenge = |scope: Option<&str>, insufficient_scope| Challenge {
            resource_metadata: None,
            scope: scope.map(str::to_string),
            insufficient_scope,
            ..Challenge::default()
        };
        assert_eq!(choose_scope(&creds(None), &challenge(None, false), &found, None).as_deref(), Some("mcp:profile"));
        assert_eq!(choose_scope(&creds(None), &challenge(Some("mcp:basic"), false), &found, None).as_deref(), Some("mcp:basic"));
        assert_eq!(choose_scope(&creds(Some("a")), &challenge(Some("mcp:basic"), false), &found, None).as_deref(), Some("a"));
        let step_up = choose_scope(&creds(None), &challenge(Some("mcp:write"), true), &found, Some("mcp:basic"));
        assert_eq!(step_up.as_deref(), Some("mcp:basic mcp:write"));
        found.as_scopes = vec!["offline_access".into()];
        assert_eq!(choose_scope(&creds(None), &challenge(None, false), &found, None).as_deref(), Some("mcp:profile offline_access"));
        found.scopes = None;
        assert_eq!(choose_scope(&creds(None), &challenge(None, false), &found, None), None);
    }
}
