//! OAuth a headless client can complete: the client-credentials grant with a pre-registered
//! client. The token endpoint is `token_url`, or found from the server's 401: its protected
//! resource metadata (RFC 9728) names the authorization server, whose metadata (RFC 8414 or
//! OpenID discovery) names the token endpoint. The token is asked for the MCP server as
//! `resource` (RFC 8707), authenticating with `client_secret_basic` (or `client_secret_post`
//! when that is all the server takes).

use base64::Engine;
use reqwest::Url;
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
}

/// A client's proof of identity.
#[derive(Clone)]
pub enum ClientSecret {
    /// `client_secret_basic` / `client_secret_post`.
    Secret(String),
    /// `private_key_jwt`: an EC P-256 key (PKCS#8 PEM) signing an ES256 assertion.
    PrivateKey(String),
}

impl ClientSecret {
    /// Whether it is empty (an unset `${VAR}`).
    pub fn is_empty(&self) -> bool {
        match self {
            ClientSecret::Secret(s) | ClientSecret::PrivateKey(s) => s.trim().is_empty(),
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
            Discovered { token_url: url.clone(), issuer: url.clone(), methods: Vec::new(), resource: server_url.to_string(), scopes: None }
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

/// What discovery found.
struct Discovered {
    token_url: String,
    /// The authorization server's issuer (the audience of a client assertion).
    issuer: String,
    /// `token_endpoint_auth_methods_supported`.
    methods: Vec<String>,
    /// The resource to ask a token for.
    resource: String,
    /// `scopes_supported`, space-separated.
    scopes: Option<String>,
}

/// An ES256 client assertion (RFC 7523) by `client_id` for `audience`, signed with `pem`.
fn client_assertion(client_id: &str, audience: &str, pem: &str) -> Result<String, String> {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).map_err(|_| "`oauth.private_key` is not a PEM key".to_string())?;
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|_| "`oauth.private_key` is not an EC P-256 key in PKCS#8".to_string())?;
    let mut nonce = [0u8; 16];
    ring::rand::SecureRandom::fill(&rng, &mut nonce).map_err(|_| "no randomness".to_string())?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 300,
        "jti": nonce.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    });
    let signed = format!("{}.{}", b64.encode(r#"{"alg":"ES256","typ":"JWT"}"#), b64.encode(claims.to_string()));
    let signature = key.sign(&rng, signed.as_bytes()).map_err(|_| "signing the client assertion failed".to_string())?;
    Ok(format!("{signed}.{}", b64.encode(signature.as_ref())))
}

/// The token endpoint, its auth methods, the resource to ask for and the supported scopes.
async fn discover(client: &reqwest::Client, server_url: &str, challenge: &Challenge) -> Result<Discovered, String> {
    let server = Url::parse(server_url).map_err(|e| format!("{server_url}: {e}"))?;
    let mut prm_urls: Vec<String> = challenge.resource_metadata.iter().cloned().collect();
    prm_urls.extend(well_known(&server, "oauth-protected-resource"));
    let prm = first_json(client, &prm_urls).await.ok_or("the server publishes no protected resource metadata (set `oauth.token_url`)")?;
    let issuer =
        prm.pointer("/authorization_servers/0").and_then(Value::as_str).ok_or("its resource metadata names no authorization server")?;
    let issuer_url = Url::parse(issuer).map_err(|e| format!("{issuer}: {e}"))?;
    let mut as_urls = well_known(&issuer_url, "oauth-authorization-server");
    as_urls.extend(well_known(&issuer_url, "openid-configuration"));
    as_urls.push(format!("{}/.well-known/openid-configuration", issuer.trim_end_matches('/')));
    let meta = first_json(client, &as_urls).await.ok_or_else(|| format!("the authorization server {issuer} publishes no metadata"))?;
    let token_url = meta.get("token_endpoint").and_then(Value::as_str).ok_or("its metadata has no token_endpoint")?;
    let strings = |v: Option<&Value>| -> Vec<String> {
        v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
    };
    let methods = strings(meta.get("token_endpoint_auth_methods_supported"));
    let resource = prm.get("resource").and_then(Value::as_str).unwrap_or(server_url).to_string();
    if !resource_covers(&resource, &server) {
        return Err(format!("its resource metadata is for {resource}, not for {server_url}: refusing to ask for a token"));
    }
    let scopes = strings(prm.get("scopes_supported"));
    let scopes = (!scopes.is_empty()).then(|| scopes.join(" "));
    let issuer = meta.get("issuer").and_then(Value::as_str).unwrap_or(issuer).to_string();
    Ok(Discovered { token_url: token_url.to_string(), issuer, methods, resource, scopes })
}

/// Whether the protected resource `resource` is the server's URL or a parent of it (same
/// origin, a path prefix at a `/` boundary), as RFC 9728 requires before asking for a token.
fn resource_covers(resource: &str, server: &Url) -> bool {
    let Ok(resource) = Url::parse(resource) else { return false };
    let (theirs, ours) = (resource.path().trim_end_matches('/'), server.path().trim_end_matches('/'));
    resource.origin() == server.origin() && (ours == theirs || ours.starts_with(&format!("{theirs}/")))
}

/// `{origin}/.well-known/{name}{path}` and, when the path is not empty, `{origin}/.well-known/{name}`.
fn well_known(url: &Url, name: &str) -> Vec<String> {
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    let mut out = vec![format!("{origin}/.well-known/{name}{path}")];
    if !path.is_empty() {
        out.push(format!("{origin}/.well-known/{name}"));
    }
    out
}

async fn first_json(client: &reqwest::Client, urls: &[String]) -> Option<Value> {
    for url in urls {
        let Ok(response) = client.get(url).header("accept", "application/json").send().await else { continue };
        if response.status().is_success()
            && let Ok(value) = response.json::<Value>().await
        {
            return Some(value);
        }
    }
    None
}

/// `application/x-www-form-urlencoded` of `text` (also what Basic auth of a client wants).
fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, dracode_llm::wire::UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn challenges_and_well_known_urls_are_read() {
        let header =
            r#"Bearer error="insufficient_scope", scope="a b", resource_metadata="http://h/.well-known/oauth-protected-resource/mcp""#;
        assert_eq!(param(header, "scope").as_deref(), Some("a b"));
        assert_eq!(param(header, "error").as_deref(), Some("insufficient_scope"));
        let url = Url::parse("http://h:1/mcp").unwrap();
        assert_eq!(well_known(&url, "x"), ["http://h:1/.well-known/x/mcp", "http://h:1/.well-known/x"]);
        assert_eq!(encode("a b&c"), "a%20b%26c");
        assert!(resource_covers("http://h:1/mcp", &url) && resource_covers("http://h:1/", &url));
        assert!(!resource_covers("http://evil:1/mcp", &url) && !resource_covers("http://h:1/mcp2", &url));
    }
}
