//! OAuth of a `url` server: how dracode gets an access token for it, by one of four grants
//! ([`Grant`]). A pre-registered client's `client_credentials`; a person's grant ([`flow`]:
//! the authorization code flow with PKCE once, `dracode mcp login`, then its refresh token in
//! CI); or a workload's identity token ([`workload`]: JWT bearer, token exchange, ID-JAG). The
//! token endpoint is `token_url`, or found from the server's 401 (`discovery`: its protected
//! resource metadata names the authorization server, whose metadata names the endpoints). Every
//! grant's token request goes through one function, `request_token`: asked for the MCP server as
//! `resource` (RFC 8707), the client authenticated (`client_auth`), DPoP-bound when the
//! server asks for it ([`dpop`]). Both client assertions and DPoP proofs are ES256 JWTs
//! signed in one place (`es256`). What can go wrong is an [`OAuthError`].

mod client_auth;
pub mod code;
mod discovery;
pub mod dpop;
mod es256;
pub mod flow;
pub mod settings;
pub mod workload;

use client_auth::{TokenClient, encode};
pub use code::AuthorizeError;
pub use discovery::DiscoveryError;
use discovery::{Discovered, discover};
pub use es256::Es256Error;
use serde_json::Value;
use std::time::{Duration, Instant};
pub use workload::{Assertion, Grant, GrantError};

/// Why no access token was obtained for a server, by any grant.
#[derive(Debug, thiserror::Error)]
pub enum OAuthError {
    /// The authorization server's endpoints could not be found.
    #[error(transparent)]
    Discovery(#[from] DiscoveryError),
    /// The grant's assertion could not be read or fetched.
    #[error(transparent)]
    Grant(#[from] GrantError),
    /// The authorization code flow failed before its token request.
    #[error(transparent)]
    Authorize(#[from] AuthorizeError),
    /// The token request of a person's grant failed.
    #[error(transparent)]
    Token(#[from] TokenError),
    /// The token request of a client's or a workload's grant failed; `advice` says what to check.
    #[error("{error}: {advice}")]
    Refused {
        /// What the token request got.
        error: TokenError,
        /// What to check, given the grant.
        advice: String,
    },
    /// A run would need a person to approve dracode (after its refresh token was `refused`).
    #[error(
        "{}the authorization server {issuer} wants a person to approve dracode: run `dracode mcp login {name}` on your machine and set `oauth.refresh_token_env_var` to a variable holding the refresh token it prints",
        refused_first(.refused)
    )]
    NeedsPerson {
        /// The server's name.
        name: String,
        /// The authorization server.
        issuer: String,
        /// Why the refresh token was refused, if one was tried.
        refused: Option<TokenError>,
    },
    /// The loopback listener for the redirect could not be opened.
    #[error("cannot listen on 127.0.0.1: {0}")]
    Listen(std::io::Error),
    /// The loopback listener's port could not be read.
    #[error(transparent)]
    ListenerAddress(std::io::Error),
    /// No client is configured and the authorization server registers none.
    #[error(
        "the authorization server {issuer} offers no dynamic client registration: set `oauth.client_id` to a client registered with it"
    )]
    NoRegistration {
        /// The authorization server.
        issuer: String,
    },
    /// `dracode mcp login` could not reach the MCP server.
    #[error("cannot reach {url}")]
    ServerUnreachable {
        /// The server's URL.
        url: String,
    },
}

/// `the refresh token was refused (…) and ` before what a person must do, when it was.
fn refused_first(refused: &Option<TokenError>) -> String {
    refused.as_ref().map(|e| format!("the refresh token was refused ({e}) and ")).unwrap_or_default()
}

/// Why a token request got no access token.
#[derive(Debug, Clone, thiserror::Error)]
pub enum TokenError {
    /// The client assertion or the DPoP proof could not be made.
    #[error(transparent)]
    Signing(#[from] Es256Error),
    /// The request could not be cloned to retry it with the server's DPoP nonce.
    #[error("a token request cannot be repeated")]
    NotRepeatable,
    /// The token endpoint could not be reached.
    #[error("cannot reach the token endpoint {url}")]
    Unreachable {
        /// The token endpoint.
        url: String,
    },
    /// The token endpoint answered without an access token.
    #[error("the token endpoint {url} answered HTTP {status} ({error})")]
    Refused {
        /// The token endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code (`no access_token` when there was none).
        error: String,
    },
}

impl TokenError {
    /// The OAuth `error` code of a refusal (empty for a request that was not answered).
    fn code(&self) -> &str {
        match self {
            TokenError::Refused { error, .. } => error,
            _ => "",
        }
    }
}

/// `oauth` of a `url` server, with `${VAR}` expanded.
#[derive(Clone)]
pub struct ClientCredentials {
    /// The client id (empty: registered dynamically or from `client_metadata_url` for a
    /// person's grant, none sent for a workload's).
    pub client_id: String,
    /// How it proves who it is.
    pub secret: ClientSecret,
    /// The scope to ask for (else the server's challenge or metadata decides).
    pub scope: Option<String>,
    /// The token endpoint, skipping discovery.
    pub token_url: Option<String>,
    /// The grant asked for.
    pub grant: Grant,
    /// A refresh token of a person's grant (`refresh_token_env_var`).
    pub refresh_token: Option<String>,
    /// The client's metadata document (its URL is its client id where the server takes those).
    pub client_metadata_url: Option<String>,
}

impl ClientCredentials {
    /// Whether this is a person's grant (code flow and refresh tokens).
    pub fn for_person(&self) -> bool {
        matches!(self.grant, Grant::AuthorizationCode)
    }

    /// The configured client, as a token request is made.
    fn token_client(&self) -> TokenClient {
        TokenClient { id: self.client_id.clone(), secret: self.secret.clone(), method: None }
    }
}

/// A client's proof of identity.
#[derive(Clone)]
pub enum ClientSecret {
    /// `client_secret_basic` / `client_secret_post`.
    Secret(String),
    /// `private_key_jwt`: an EC P-256 key (PKCS#8 PEM) signing an ES256 assertion.
    PrivateKey(String),
    /// None: a public client, or a workload whose grant's assertion is the proof (its
    /// `client_id` is sent when given).
    None,
}

impl ClientSecret {
    /// Whether it is empty (an unset `${VAR}`).
    pub fn is_empty(&self) -> bool {
        match self {
            ClientSecret::Secret(s) | ClientSecret::PrivateKey(s) => s.trim().is_empty(),
            ClientSecret::None => false,
        }
    }
}

/// What a 401/403 answer's `WWW-Authenticate` says.
#[derive(Debug, Default, Clone)]
pub struct Challenge {
    /// `resource_metadata`.
    pub resource_metadata: Option<String>,
    /// `scope`.
    pub scope: Option<String>,
    /// `error="insufficient_scope"`.
    pub insufficient_scope: bool,
    /// The `DPoP` scheme (RFC 9449).
    pub dpop: bool,
    /// `error="use_dpop_nonce"`.
    pub use_dpop_nonce: bool,
}

impl Challenge {
    /// Reads the `WWW-Authenticate` header of `response`.
    pub fn of(response: &reqwest::Response) -> Challenge {
        let all: Vec<&str> = response.headers().get_all("www-authenticate").iter().filter_map(|v| v.to_str().ok()).collect();
        let header = all.join(", ");
        let header = header.as_str();
        Challenge {
            resource_metadata: param(header, "resource_metadata"),
            scope: param(header, "scope"),
            insufficient_scope: param(header, "error").as_deref() == Some("insufficient_scope"),
            dpop: header.get(..5).is_some_and(|s| s.eq_ignore_ascii_case("dpop ")) || header.contains(", DPoP "),
            use_dpop_nonce: param(header, "error").as_deref() == Some("use_dpop_nonce"),
        }
    }
}

fn param(header: &str, key: &str) -> Option<String> {
    let start = header.find(&format!("{key}="))? + key.len() + 1;
    let rest = &header[start..];
    match rest.strip_prefix('"') {
        Some(quoted) => quoted.split('"').next().map(str::to_string),
        None => rest.split([',', ' ']).next().map(str::to_string),
    }
}

/// An access token, and what came with it.
pub struct Token {
    /// The access token.
    pub access_token: String,
    /// Whether it is DPoP-bound (`token_type: DPoP`): each request proves the run's key.
    pub dpop: bool,
    /// The refresh token given with it (a person's grant; may be a rotated one).
    pub refresh_token: Option<String>,
    /// When the access token expires (30 s early).
    pub expires_at: Option<Instant>,
    /// The scope granted, if the server said.
    pub scope: Option<String>,
    /// Credentials the token request carried (a workload's assertion), to mask.
    pub sent: Vec<String>,
}

impl Token {
    /// Every secret value it holds (the access token, a refresh token, what was sent), for
    /// masking.
    pub fn secrets(&self) -> impl Iterator<Item = &String> {
        std::iter::once(&self.access_token).chain(&self.refresh_token).chain(&self.sent)
    }
}

/// A token for `server_url` from a pre-registered client's or a workload's grant (a person's
/// grant is [`flow::user_token`]).
pub async fn fetch_token(
    client: &reqwest::Client,
    server_url: &str,
    creds: &ClientCredentials,
    challenge: &Challenge,
) -> Result<Token, OAuthError> {
    let found = match &creds.token_url {
        Some(url) => {
            let mut found = Discovered::fallback(server_url);
            (found.token_url, found.issuer) = (url.clone(), url.clone());
            found
        }
        None => discover(client, server_url, challenge).await?,
    };
    let scope = creds.scope.clone().or_else(|| challenge.scope.clone()).or(found.scopes.clone());
    let (mut form, sent) = creds.grant.form(client, &found.issuer, &found.resource).await?;
    form.extend(scope.map(|scope| ("scope", scope)));
    match request_token(client, &found, &creds.token_client(), form, challenge.dpop).await {
        Ok(token) => Ok(Token { sent, ..token }),
        Err(error) => {
            let advice = creds.grant.blame(error.code(), &found.issuer);
            Err(OAuthError::Refused { error, advice })
        }
    }
}

/// The one token request of every grant: `form` (the grant) with `resource`, as `client`, to
/// `found`'s token endpoint, with a DPoP proof when the challenge (`dpop`) or the authorization
/// server's metadata asks for one.
async fn request_token(
    http: &reqwest::Client,
    found: &Discovered,
    client: &TokenClient,
    mut form: Vec<(&'static str, String)>,
    dpop: bool,
) -> Result<Token, TokenError> {
    let url = &found.token_url;
    form.push(("resource", found.resource.clone()));
    let request = http.post(url).header("content-type", "application/x-www-form-urlencoded").header("accept", "application/json");
    let request = client_auth::authenticate(request, &mut form, client, found)?;
    let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let (status, answer) = dpop::token_request(request.body(body.join("&")), url, dpop || found.dpop).await?;
    let text = |key: &str| answer.get(key).and_then(Value::as_str).map(str::to_string);
    match text("access_token") {
        Some(access_token) if status.is_success() => Ok(Token {
            access_token,
            dpop: text("token_type").is_some_and(|t| t.eq_ignore_ascii_case("dpop")),
            refresh_token: text("refresh_token"),
            expires_at: answer
                .get("expires_in")
                .and_then(Value::as_u64)
                .map(|s| Instant::now() + Duration::from_secs(s.saturating_sub(30).max(1))),
            scope: text("scope"),
            sent: Vec::new(),
        }),
        _ => {
            let error = text("error").unwrap_or_else(|| "no access_token".into());
            Err(TokenError::Refused { url: url.clone(), status: status.as_u16(), error })
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_are_read() {
        let header =
            r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(param(header, "scope").as_deref(), Some("a b"));
        assert_eq!(param(header, "error").as_deref(), Some("insufficient_scope"));
    }
}
