//! Where the token endpoint is: the server's protected resource metadata (RFC 9728) names the
//! authorization server, whose metadata (RFC 8414 or OpenID discovery) names its endpoints.

use reqwest::Url;
use serde_json::Value;

use super::Challenge;

/// What discovery found.
pub(super) struct Discovered {
    pub(super) token_url: String,
    /// The authorization server's issuer (the audience of a client assertion).
    pub(super) issuer: String,
    /// `token_endpoint_auth_methods_supported`.
    pub(super) methods: Vec<String>,
    /// The resource to ask a token for.
    pub(super) resource: String,
    /// `scopes_supported`, space-separated.
    pub(super) scopes: Option<String>,
    /// Whether the authorization server offers DPoP with ES256.
    pub(super) dpop: bool,
}

/// The token endpoint, its auth methods, the resource to ask for and the supported scopes.
pub(super) async fn discover(client: &reqwest::Client, server_url: &str, challenge: &Challenge) -> Result<Discovered, String> {
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
    let dpop = super::dpop::offered(&meta);
    Ok(Discovered { token_url: token_url.to_string(), issuer, methods, resource, scopes, dpop })
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
}
