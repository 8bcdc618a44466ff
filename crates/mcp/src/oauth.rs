//! OAuth of a `url` server. A person's grant ([`flow`]: the authorization code flow with PKCE
//! once, `dracode mcp login`, then its refresh token in CI), or the client-credentials grant
//! with a pre-registered client. The token endpoint is `token_url`, or found from the server's 401: its protected
//! resource metadata (RFC 9728) names the authorization server, whose metadata (RFC 8414 or
//! OpenID discovery) names the token endpoint. The token is asked for the MCP server as
//! `resource` (RFC 8707), authenticating with `client_secret_basic` (or `client_secret_post`
//! when that is all the server takes).

mod client_auth;
pub mod code;
mod discovery;
pub mod flow;

use base64::Engine;
use client_auth::{client_assertion, encode};
use discovery::discover;
use serde_json::Value;

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
    /// A refresh token of a person's grant (`refresh_token_env_var`).
    pub refresh_token: Option<String>,
    /// The client's metadata document (its URL is its client id where the server takes those).
    pub client_metadata_url: Option<String>,
}

impl ClientCredentials {
    /// Whether this is a person's grant (code flow and refresh tokens) rather than the
    /// client-credentials grant.
    pub fn for_person(&self) -> bool {
        self.refresh_token.is_some() || matches!(self.secret, ClientSecret::None)
    }
}

/// A client's proof of identity.
#[derive(Clone)]
pub enum ClientSecret {
    /// `client_secret_basic` / `client_secret_post`.
    Secret(String),
    /// `private_key_jwt`: an EC P-256 key (PKCS#8 PEM) signing an ES256 assertion.
    PrivateKey(String),
    /// None: a public client (a person's grant).
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
}

impl Challenge {
    /// Reads the `WWW-Authenticate` header of `response`.
    pub fn of(response: &reqwest::Response) -> Challenge {
        let header = response.headers().get("www-authenticate").and_then(|v| v.to_str().ok()).unwrap_or("");
        Challenge {
            resource_metadata: param(header, "resource_metadata"),
            scope: param(header, "scope"),
            insufficient_scope: param(header, "error").as_deref() == Some("insufficient_scope"),
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

/// A token for `server_url` from the client-credentials grant.
pub async fn fetch_token(
    client: &reqwest::Client,
    server_url: &str,
    creds: &ClientCredentials,
    challenge: &Challenge,
) -> Result<String, String> {
    let found = match &creds.token_url {
        Some(url) => {
            let mut found = discovery::Discovered::fallback(server_url);
            (found.token_url, found.issuer) = (url.clone(), url.clone());
            found
        }
        None => discover(client, server_url, challenge).await?,
    };
    let token_url = found.token_url.clone();
    let scope = creds.scope.clone().or_else(|| challenge.scope.clone()).or(found.scopes.clone());
    let mut form = vec![("grant_type", "client_credentials".to_string()), ("resource", found.resource.clone())];
    if let Some(scope) = scope {
        form.push(("scope", scope));
    }
    let methods = &found.methods;
    let post_only =
        !methods.is_empty() && !methods.iter().any(|m| m == "client_secret_basic") && methods.iter().any(|m| m == "client_secret_post");
    let mut request =
        client.post(&token_url).header("content-type", "application/x-www-form-urlencoded").header("accept", "application/json");
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
        ClientSecret::None => form.push(("client_id", creds.client_id.clone())),
        ClientSecret::Secret(secret) => {
            let pair = format!("{}:{}", encode(&creds.client_id), encode(secret));
            request = request.header("authorization", format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair)));
        }
    }
    let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let response = request.body(body.join("&")).send().await.map_err(|_| format!("cannot reach the token endpoint {token_url}"))?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    match answer.get("access_token").and_then(Value::as_str) {
        Some(token) if status.is_success() => Ok(token.to_string()),
        _ => {
            let why = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            Err(format!(
                "the token endpoint {token_url} answered HTTP {} ({why}): check `oauth.client_id` and its `client_secret` or `private_key`",
                status.as_u16()
            ))
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
