//! OAuth a headless client can complete: the client-credentials grant with a pre-registered
//! client. The token endpoint is `token_url`, or found from the server's 401: its protected
//! resource metadata (RFC 9728) names the authorization server, whose metadata (RFC 8414 or
//! OpenID discovery) names the token endpoint. The token is asked for the MCP server as
//! `resource` (RFC 8707), authenticating with `client_secret_basic` (or `client_secret_post`
//! when that is all the server takes). A workload's identity token may be the grant instead
//! ([`workload`]: JWT bearer, token exchange, ID-JAG), and the token DPoP-bound ([`dpop`]).

mod client_auth;
mod discovery;
pub mod dpop;
pub mod workload;

use base64::Engine;
use client_auth::{client_assertion, encode};
use discovery::{Discovered, discover};
use serde_json::Value;
pub use workload::{Assertion, Grant};

/// `oauth` of a `url` server, with `${VAR}` expanded.
#[derive(Clone)]
pub struct ClientCredentials {
    /// The pre-registered client id.
    pub client_id: String,
    /// How it proves who it is.
    pub secret: ClientSecret,
    /// The scope to ask for (else the server's challenge or metadata decides).
    pub scope: Option<String>,
    /// The token endpoint, skipping discovery.
    pub token_url: Option<String>,
    /// The grant asked for.
    pub grant: Grant,
}

/// A client's proof of identity.
#[derive(Clone)]
pub enum ClientSecret {
    /// `client_secret_basic` / `client_secret_post`.
    Secret(String),
    /// `private_key_jwt`: an EC P-256 key (PKCS#8 PEM) signing an ES256 assertion.
    PrivateKey(String),
    /// None: the grant's assertion is the proof (`client_id` sent when given).
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

/// An access token, and what else the request sent that must be masked.
pub struct Token {
    /// The access token.
    pub access_token: String,
    /// Whether it is DPoP-bound (`token_type: DPoP`): each request proves the run's key.
    pub dpop: bool,
    /// Credentials the token request carried (a workload's assertion), to mask.
    pub sent: Vec<String>,
}

/// A token for `server_url` from the configured grant, proving the run's DPoP key when the
/// server asks for DPoP (its challenge or its authorization server's metadata).
pub async fn fetch_token(
    client: &reqwest::Client,
    server_url: &str,
    creds: &ClientCredentials,
    challenge: &Challenge,
) -> Result<Token, String> {
    let found = match &creds.token_url {
        Some(url) => Discovered {
            token_url: url.clone(),
            issuer: url.clone(),
            methods: Vec::new(),
            resource: server_url.to_string(),
            scopes: None,
            dpop: false,
        },
        None => discover(client, server_url, challenge).await?,
    };
    let token_url = found.token_url.clone();
    let scope = creds.scope.clone().or_else(|| challenge.scope.clone()).or(found.scopes.clone());
    let (mut form, sent) = creds.grant.form(client, &found.issuer, &found.resource).await?;
    form.push(("resource", found.resource.clone()));
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    let request = client.post(&token_url).header("content-type", "application/x-www-form-urlencoded").header("accept", "application/json");
    let request = authenticate_client(request, &mut form, creds, &found)?;
    let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let (status, answer) = dpop::token_request(request.body(body.join("&")), &token_url, challenge.dpop || found.dpop).await?;
    match answer.get("access_token").and_then(Value::as_str) {
        Some(token) if status.is_success() => {
            let dpop = answer.get("token_type").and_then(Value::as_str).is_some_and(|t| t.eq_ignore_ascii_case("dpop"));
            Ok(Token { access_token: token.to_string(), dpop, sent })
        }
        _ => {
            let why = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            let blame = creds.grant.blame(why, &found.issuer);
            Err(format!("the token endpoint {token_url} answered HTTP {} ({why}): {blame}", status.as_u16()))
        }
    }
}

/// Adds the client's proof of identity to a token request (Basic auth, or to `form`).
fn authenticate_client(
    request: reqwest::RequestBuilder,
    form: &mut Vec<(&'static str, String)>,
    creds: &ClientCredentials,
    found: &Discovered,
) -> Result<reqwest::RequestBuilder, String> {
    let methods = &found.methods;
    let post_only =
        !methods.is_empty() && !methods.iter().any(|m| m == "client_secret_basic") && methods.iter().any(|m| m == "client_secret_post");
    match &creds.secret {
        ClientSecret::PrivateKey(pem) => {
            form.push(("client_id", creds.client_id.clone()));
            form.push(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into()));
            form.push(("client_assertion", client_assertion(&creds.client_id, &found.issuer, pem)?));
        }
        ClientSecret::Secret(secret) if post_only => {
            form.push(("client_id", creds.client_id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        ClientSecret::Secret(secret) => {
            let pair = format!("{}:{}", encode(&creds.client_id), encode(secret));
            let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
            return Ok(request.header("authorization", basic));
        }
        ClientSecret::None if !creds.client_id.is_empty() => form.push(("client_id", creds.client_id.clone())),
        ClientSecret::None => {}
    }
    Ok(request)
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
