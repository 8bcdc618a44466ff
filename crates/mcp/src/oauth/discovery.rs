//! Where the authorization server's endpoints are: the server's protected resource metadata
//! (RFC 9728, from the challenge's `resource_metadata` or the well-known paths) names the
//! authorization server, whose metadata (RFC 8414 or OpenID discovery, path-inserted) names its
//! endpoints; its `issuer` must be the one the resource metadata named. A server without
//! resource metadata is a 2025-03-26 one: its origin is the authorization server, with metadata
//! at its root or, without any, the default `/authorize`, `/token` and `/register`.

use reqwest::Url;
use serde_json::Value;

use super::Challenge;

/// Why a URL could not be parsed (`url::ParseError`, named through `reqwest`'s `Url`).
pub type UrlError = <Url as std::str::FromStr>::Err;

/// Why the authorization server's endpoints could not be found.
#[derive(Debug, thiserror::Error)]
pub enum DiscoveryError {
    /// The server's URL, or the issuer its metadata names, is not a URL.
    #[error("{url}: {reason}")]
    BadUrl {
        /// The text that is not a URL.
        url: String,
        /// Why.
        reason: UrlError,
    },
    /// The resource metadata lists no `authorization_servers`.
    #[error("its resource metadata names no authorization server")]
    NoAuthorizationServer,
    /// The resource metadata is another resource's.
    #[error("its resource metadata is for {resource}, not for {server_url}: refusing to ask for a token")]
    OtherResource {
        /// The resource it names.
        resource: String,
        /// The server's URL.
        server_url: String,
    },
    /// The authorization server has no metadata at any of the well-known places.
    #[error("the authorization server {issuer} publishes no metadata")]
    NoMetadata {
        /// The authorization server.
        issuer: String,
    },
    /// The metadata fetched for `issuer` names another one.
    #[error("the metadata of the authorization server {issuer} names another issuer ({stated}): refusing to use it")]
    OtherIssuer {
        /// The issuer the metadata was fetched for.
        issuer: String,
        /// The issuer it names.
        stated: String,
    },
    /// The metadata has no `token_endpoint`.
    #[error("its metadata has no token_endpoint")]
    NoTokenEndpoint,
}

/// `text` parsed as a URL.
fn parse_url(text: &str) -> Result<Url, DiscoveryError> {
    Url::parse(text).map_err(|reason| DiscoveryError::BadUrl { url: text.to_string(), reason })
}

/// What discovery found.
pub(super) struct Discovered {
    pub(super) token_url: String,
    /// The authorization server's issuer (the audience of a client assertion, what `iss` of an
    /// authorization response is compared with).
    pub(super) issuer: String,
    /// Whether `issuer` comes from metadata (false: the 2025-03-26 default endpoints).
    pub(super) has_metadata: bool,
    /// `token_endpoint_auth_methods_supported`.
    pub(super) methods: Vec<String>,
    /// The resource to ask a token for.
    pub(super) resource: String,
    /// The resource metadata's `scopes_supported`, space-separated.
    pub(super) scopes: Option<String>,
    /// `authorization_endpoint`.
    pub(super) authorization_url: Option<String>,
    /// `registration_endpoint`.
    pub(super) registration_url: Option<String>,
    /// `code_challenge_methods_supported` (absent: `None`).
    pub(super) challenge_methods: Option<Vec<String>>,
    /// `authorization_response_iss_parameter_supported` (RFC 9207).
    pub(super) iss_supported: bool,
    /// `client_id_metadata_document_supported`.
    pub(super) client_metadata_supported: bool,
    /// The authorization server's `scopes_supported`.
    pub(super) as_scopes: Vec<String>,
    /// Whether the authorization server offers DPoP with ES256.
    pub(super) dpop: bool,
}

/// The authorization server's endpoints, the resource to ask for and the supported scopes.
pub(super) async fn discover(client: &reqwest::Client, server_url: &str, challenge: &Challenge) -> Result<Discovered, DiscoveryError> {
    let server = parse_url(server_url)?;
    let mut prm_urls: Vec<String> = challenge.resource_metadata.iter().cloned().collect();
    prm_urls.extend(well_known(&server, "oauth-protected-resource"));
    let Some(prm) = first_json(client, &prm_urls).await else { return legacy(client, &server).await };
    let issuer = prm.pointer("/authorization_servers/0").and_then(Value::as_str).ok_or(DiscoveryError::NoAuthorizationServer)?;
    let resource = prm.get("resource").and_then(Value::as_str).unwrap_or(server_url).to_string();
    if !resource_covers(&resource, &server) {
        return Err(DiscoveryError::OtherResource { resource, server_url: server_url.to_string() });
    }
    let issuer_url = parse_url(issuer)?;
    let meta =
        first_json(client, &metadata_urls(&issuer_url)).await.ok_or_else(|| DiscoveryError::NoMetadata { issuer: issuer.to_string() })?;
    let mut found = from_metadata(&meta, issuer, resource)?;
    let scopes = strings(prm.get("scopes_supported"));
    found.scopes = (!scopes.is_empty()).then(|| scopes.join(" "));
    Ok(found)
}

/// A 2025-03-26 server (no resource metadata): metadata at its origin, else default endpoints.
async fn legacy(client: &reqwest::Client, server: &Url) -> Result<Discovered, DiscoveryError> {
    let origin = server.origin().ascii_serialization();
    if let Some(meta) = first_json(client, &[format!("{origin}/.well-known/oauth-authorization-server")]).await {
        return from_metadata(&meta, &origin, server.as_str().to_string());
    }
    Ok(Discovered::fallback(server.as_str()))
}

impl Discovered {
    /// The 2025-03-26 defaults for a server without metadata: `/authorize`, `/token` and
    /// `/register` at its origin, which is the issuer.
    pub(super) fn fallback(server_url: &str) -> Discovered {
        let origin = Url::parse(server_url).map(|u| u.origin().ascii_serialization()).unwrap_or_default();
        Discovered {
            token_url: format!("{origin}/token"),
            issuer: origin.clone(),
            has_metadata: false,
            methods: Vec::new(),
            resource: server_url.to_string(),
            scopes: None,
            authorization_url: Some(format!("{origin}/authorize")),
            registration_url: Some(format!("{origin}/register")),
            challenge_methods: None,
            iss_supported: false,
            client_metadata_supported: false,
            as_scopes: Vec::new(),
            dpop: false,
        }
    }
}

/// Reads authorization server metadata fetched for `issuer`, refusing another issuer's.
fn from_metadata(meta: &Value, issuer: &str, resource: String) -> Result<Discovered, DiscoveryError> {
    let stated = meta.get("issuer").and_then(Value::as_str).unwrap_or(issuer);
    if stated != issuer {
        return Err(DiscoveryError::OtherIssuer { issuer: issuer.to_string(), stated: stated.to_string() });
    }
    let text = |key: &str| meta.get(key).and_then(Value::as_str).map(str::to_string);
    let token_url = text("token_endpoint").ok_or(DiscoveryError::NoTokenEndpoint)?;
    Ok(Discovered {
        token_url,
        issuer: issuer.to_string(),
        has_metadata: true,
        methods: strings(meta.get("token_endpoint_auth_methods_supported")),
        resource,
        scopes: None,
        authorization_url: text("authorization_endpoint"),
        registration_url: text("registration_endpoint"),
        challenge_methods: meta.get("code_challenge_methods_supported").map(|v| strings(Some(v))),
        iss_supported: meta.get("authorization_response_iss_parameter_supported").and_then(Value::as_bool).unwrap_or(false),
        client_metadata_supported: meta.get("client_id_metadata_document_supported").and_then(Value::as_bool).unwrap_or(false),
        as_scopes: strings(meta.get("scopes_supported")),
        dpop: super::dpop::offered(meta),
    })
}

fn strings(v: Option<&Value>) -> Vec<String> {
    v.and_then(Value::as_array).map(|a| a.iter().filter_map(Value::as_str).map(str::to_string).collect()).unwrap_or_default()
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

/// Where an issuer's metadata may be, in the order the MCP spec gives: RFC 8414 and OpenID
/// with the path inserted after the well-known name, then OpenID with it appended.
fn metadata_urls(issuer: &Url) -> Vec<String> {
    let origin = issuer.origin().ascii_serialization();
    let path = issuer.path().trim_end_matches('/');
    let mut out =
        vec![format!("{origin}/.well-known/oauth-authorization-server{path}"), format!("{origin}/.well-known/openid-configuration{path}")];
    if !path.is_empty() {
        out.push(format!("{origin}{path}/.well-known/openid-configuration"));
    }
    out
}

async fn first_json(client: &reqwest::Client, urls: &[String]) -> Option<Value> {
    for url in urls {
        let Ok(response) = client.get(url).header("accept", "application/json").send().await else { continue };
        if response.status().is_success()
            && let Ok(value) = response.json::<Value>().await
            && value.is_object()
        {
            return Some(value);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn well_known_urls_and_resources_are_read() {
        let url = Url::parse("http://h:1/mcp").unwrap();
        assert_eq!(well_known(&url, "x"), ["http://h:1/.well-known/x/mcp", "http://h:1/.well-known/x"]);
        assert!(resource_covers("http://h:1/mcp", &url) && resource_covers("http://h:1/", &url));
        assert!(!resource_covers("http://evil:1/mcp", &url) && !resource_covers("http://h:1/mcp2", &url));
    }

    #[test]
    fn an_issuer_with_a_path_is_looked_up_with_it_never_at_the_root() {
        let issuer = Url::parse("http://h:1/tenant1").unwrap();
        assert_eq!(
            metadata_urls(&issuer),
            [
                "http://h:1/.well-known/oauth-authorization-server/tenant1",
                "http://h:1/.well-known/openid-configuration/tenant1",
                "http://h:1/tenant1/.well-known/openid-configuration"
            ]
        );
        let meta = serde_json::json!({"issuer": "https://attacker.example.com", "token_endpoint": "http://h:1/token"});
        assert!(from_metadata(&meta, "http://h:1", String::new()).is_err());
    }
}
