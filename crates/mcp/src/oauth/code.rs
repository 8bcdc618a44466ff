//! OAuth for a person's grant: the authorization code flow with PKCE (S256), the client found
//! as configured, from a client ID metadata document, or registered dynamically (RFC 7591);
//! the code's redirect checked (`state`, RFC 9207 `iss`) and exchanged; refresh tokens used and
//! kept when rotated. Where the authorization server approves without a person (its
//! authorization endpoint redirects straight back with a code) this completes headlessly;
//! otherwise only [`Mode::Person`] (`dracode mcp login`) can complete it.

use super::client_auth::{TokenClient, encode};
use super::discovery::{Discovered, UrlError};
use base64::Engine;
use serde_json::{Value, json};
use std::time::Duration;

/// How long `dracode mcp login` waits for the browser to come back.
pub const LOGIN_WAIT: Duration = Duration::from_secs(300);

/// Who can approve an authorization request that needs a person.
pub enum Mode<'a> {
    /// Nobody: only an authorization server approving at once completes.
    Headless,
    /// A person at this machine: `open` shows them the URL; the redirect comes back to the
    /// loopback listener.
    Person(&'a (dyn Fn(&str) + Send + Sync)),
}

/// A client registered dynamically (or named by its metadata document) for one issuer.
#[derive(Clone)]
pub struct Registered {
    /// The issuer it is registered with (never used with another one).
    pub issuer: String,
    /// Its client id.
    pub id: String,
    /// Its secret, if the server gave one.
    pub secret: Option<String>,
    /// `token_endpoint_auth_method`: `none`, `client_secret_basic` or `client_secret_post`.
    pub method: String,
}

/// Why the authorization code flow got no code, or no client to ask for one as.
#[derive(Debug, thiserror::Error)]
pub enum AuthorizeError {
    /// The system's random source failed.
    #[error("no randomness")]
    NoRandomness,
    /// The authorization server lists PKCE methods, but not S256.
    #[error("the authorization server {issuer} does not support PKCE with S256: refusing to authorize")]
    NoS256 {
        /// The authorization server.
        issuer: String,
    },
    /// The authorization server's metadata lists no PKCE methods.
    #[error("the authorization server {issuer} does not list PKCE support (code_challenge_methods_supported): refusing to authorize")]
    NoPkce {
        /// The authorization server.
        issuer: String,
    },
    /// The authorization server has no authorization endpoint.
    #[error("the authorization server {issuer} has no authorization_endpoint")]
    NoAuthorizationEndpoint {
        /// The authorization server.
        issuer: String,
    },
    /// The redirect's `state` is not the request's.
    #[error("the authorization response's `state` is not the one dracode sent: refusing it")]
    OtherState,
    /// The redirect's `iss` is another issuer (RFC 9207).
    #[error("the authorization response comes from issuer {iss}, not {issuer}: refusing it")]
    OtherIssuer {
        /// The issuer the redirect names.
        iss: String,
        /// The authorization server asked.
        issuer: String,
    },
    /// The redirect has no `iss` though the server promises one.
    #[error("the authorization server {issuer} promises `iss` in its responses but sent none: refusing it")]
    NoIssuer {
        /// The authorization server.
        issuer: String,
    },
    /// The redirect carries an `error`.
    #[error("the authorization server refused: {error}{}", .description.as_ref().map(|d| format!(": {d}")).unwrap_or_default())]
    Refused {
        /// The OAuth `error` code.
        error: String,
        /// Its `error_description`, if any.
        description: Option<String>,
    },
    /// The redirect has no `code`.
    #[error("the authorization response has no code")]
    NoCode,
    /// The HTTP client following the authorization URL could not be built.
    #[error(transparent)]
    HttpClient(reqwest::Error),
    /// The authorization endpoint could not be reached.
    #[error("cannot reach the authorization endpoint {endpoint}")]
    AuthorizationUnreachable {
        /// The endpoint, without its query.
        endpoint: String,
    },
    /// A redirect's `location` is not a URL.
    #[error(transparent)]
    BadRedirect(UrlError),
    /// No redirect came back in time.
    #[error("no authorization came back within {}s", .0.as_secs())]
    NoRedirect(Duration),
    /// The registration endpoint could not be reached.
    #[error("cannot reach the registration endpoint {url}")]
    RegistrationUnreachable {
        /// The registration endpoint.
        url: String,
    },
    /// Dynamic registration gave no client id.
    #[error("registering with {url} failed (HTTP {status}, {error}): set `oauth.client_id` to a client registered with it")]
    RegistrationRefused {
        /// The registration endpoint.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code (`no client_id` when there was none).
        error: String,
    },
}

/// One authorization request: its URL, and what the redirect must carry.
pub(super) struct Request {
    pub(super) url: String,
    pub(super) state: String,
    pub(super) verifier: String,
    pub(super) redirect_uri: String,
}

fn random_text(bytes: usize) -> Result<String, AuthorizeError> {
    let mut buffer = vec![0u8; bytes];
    ring::rand::SecureRandom::fill(&ring::rand::SystemRandom::new(), &mut buffer).map_err(|_| AuthorizeError::NoRandomness)?;
    Ok(base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(buffer))
}

/// The S256 challenge of a PKCE verifier (RFC 7636).
pub(super) fn s256(verifier: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes());
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(digest.as_ref())
}

/// The authorization request of `client` for `scope`, coming back to `redirect_uri`.
pub(super) fn request(
    found: &Discovered,
    client: &TokenClient,
    scope: Option<&str>,
    redirect_uri: &str,
) -> Result<Request, AuthorizeError> {
    let issuer = || found.issuer.clone();
    if let Some(methods) = &found.challenge_methods
        && !methods.iter().any(|m| m == "S256")
    {
        return Err(AuthorizeError::NoS256 { issuer: issuer() });
    }
    if found.has_metadata && found.challenge_methods.is_none() {
        return Err(AuthorizeError::NoPkce { issuer: issuer() });
    }
    let endpoint = found.authorization_url.as_deref().ok_or_else(|| AuthorizeError::NoAuthorizationEndpoint { issuer: issuer() })?;
    let (state, verifier) = (random_text(24)?, random_text(32)?);
    let mut query = vec![
        ("response_type", "code".to_string()),
        ("client_id", client.id.clone()),
        ("redirect_uri", redirect_uri.to_string()),
        ("code_challenge", s256(&verifier)),
        ("code_challenge_method", "S256".into()),
        ("state", state.clone()),
        ("resource", found.resource.clone()),
    ];
    query.extend(scope.map(|s| ("scope", s.to_string())));
    let joined: Vec<String> = query.iter().map(|(k, v)| format!("{k}={}", encode(v))).collect();
    let separator = if endpoint.contains('?') { '&' } else { '?' };
    Ok(Request { url: format!("{endpoint}{separator}{}", joined.join("&")), state, verifier, redirect_uri: redirect_uri.to_string() })
}

/// The code of the redirect `callback` (a URL or a request target), checked against `request`
/// and the issuer (RFC 9207: a present `iss` must equal it exactly; an advertised one must be
/// present).
pub(super) fn code_of(callback: &str, request: &Request, found: &Discovered) -> Result<String, AuthorizeError> {
    let query = callback.split_once('?').map(|(_, q)| q).unwrap_or("");
    let query = query.split('#').next().unwrap_or("");
    let get = |key: &str| -> Option<String> {
        query
            .split('&')
            .filter_map(|pair| pair.split_once('='))
            .find(|(k, _)| *k == key)
            .map(|(_, v)| percent_encoding::percent_decode_str(&v.replace('+', " ")).decode_utf8_lossy().into_owned())
    };
    if get("state").as_deref() != Some(request.state.as_str()) {
        return Err(AuthorizeError::OtherState);
    }
    match get("iss") {
        Some(iss) if iss != found.issuer => return Err(AuthorizeError::OtherIssuer { iss, issuer: found.issuer.clone() }),
        None if found.iss_supported => return Err(AuthorizeError::NoIssuer { issuer: found.issuer.clone() }),
        _ => {}
    }
    if let Some(error) = get("error") {
        return Err(AuthorizeError::Refused { error, description: get("error_description") });
    }
    get("code").filter(|c| !c.is_empty()).ok_or(AuthorizeError::NoCode)
}

/// Follows the authorization URL without a browser: the redirect back to us, if the server
/// gives it at once (`None` when it wants a person).
pub(super) async fn headless(request: &Request) -> Result<Option<String>, AuthorizeError> {
    // A client of its own (it must not follow redirects), with the TLS provider every client needs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::builder()
        .redirect(reqwest::redirect::Policy::none())
        .timeout(Duration::from_secs(30))
        .build()
        .map_err(AuthorizeError::HttpClient)?;
    let mut url = request.url.clone();
    for _ in 0..5 {
        let unreachable = || AuthorizeError::AuthorizationUnreachable { endpoint: before_query(&url).to_string() };
        let response = client.get(&url).send().await.map_err(|_| unreachable())?;
        let Some(location) = response.headers().get("location").and_then(|v| v.to_str().ok()) else { return Ok(None) };
        if !response.status().is_redirection() {
            return Ok(None);
        }
        let next = reqwest::Url::parse(&url).and_then(|base| base.join(location)).map_err(AuthorizeError::BadRedirect)?;
        if next.as_str().starts_with(&request.redirect_uri) {
            return Ok(Some(next.to_string()));
        }
        url = next.to_string();
    }
    Ok(None)
}

fn before_query(url: &str) -> &str {
    url.split('?').next().unwrap_or(url)
}

/// Waits (at most `limit`) on `listener` for the browser's redirect; answers it with a page
/// saying to go back to the terminal; returns its request target.
pub(super) async fn wait_for_redirect(listener: &tokio::net::TcpListener, limit: Duration) -> Result<String, AuthorizeError> {
    use tokio::io::{AsyncReadExt, AsyncWriteExt};
    let wait = async {
        loop {
            let Ok((mut stream, _)) = listener.accept().await else { continue };
            let mut buffer = vec![0u8; 8192];
            let read = stream.read(&mut buffer).await.unwrap_or(0);
            let head = String::from_utf8_lossy(&buffer[..read]).to_string();
            let target = head.split_whitespace().nth(1).unwrap_or("").to_string();
            if !target.starts_with("/callback") {
                let _ = stream.write_all(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\nconnection: close\r\n\r\n").await;
                continue;
            }
            let page = "dracode: authorization received. You can close this page and go back to the terminal.";
            let answer =
                format!("HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{page}", page.len());
            let _ = stream.write_all(answer.as_bytes()).await;
            return target;
        }
    };
    tokio::time::timeout(limit, wait).await.map_err(|_| AuthorizeError::NoRedirect(limit))
}

/// Registers dracode with the authorization server (RFC 7591) as a native client redirecting
/// to `redirect_uri`, public when the server allows it.
pub(super) async fn register(
    http: &reqwest::Client,
    found: &Discovered,
    url: &str,
    redirect_uri: &str,
) -> Result<Registered, AuthorizeError> {
    let methods = &found.methods;
    let wanted = if methods.is_empty() || methods.iter().any(|m| m == "none") {
        "none"
    } else if methods.iter().any(|m| m == "client_secret_basic") {
        "client_secret_basic"
    } else {
        "client_secret_post"
    };
    let body = json!({
        "client_name": "dracode",
        "redirect_uris": [redirect_uri],
        "grant_types": ["authorization_code", "refresh_token"],
        "response_types": ["code"],
        "token_endpoint_auth_method": wanted,
        "application_type": "native",
    });
    let response = http.post(url).json(&body).send().await.map_err(|_| AuthorizeError::RegistrationUnreachable { url: url.to_string() })?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    let Some(id) = answer.get("client_id").and_then(Value::as_str).filter(|_| status.is_success()) else {
        let error = answer.get("error").and_then(Value::as_str).unwrap_or("no client_id").to_string();
        return Err(AuthorizeError::RegistrationRefused { url: url.to_string(), status: status.as_u16(), error });
    };
    let secret = answer.get("client_secret").and_then(Value::as_str).map(str::to_string);
    let given = answer.get("token_endpoint_auth_method").and_then(Value::as_str);
    let method = match (given, &secret) {
        (Some(m), _) => m.to_string(),
        (None, None) => "none".into(),
        (None, Some(_)) if wanted == "none" => "client_secret_basic".into(),
        (None, Some(_)) => wanted.into(),
    };
    Ok(Registered { issuer: found.issuer.clone(), id: id.to_string(), secret, method })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn found(iss_supported: bool) -> Discovered {
        Discovered {
            token_url: "http://as/token".into(),
            issuer: "http://as".into(),
            has_metadata: true,
            methods: vec![],
            resource: "http://rs/mcp".into(),
            scopes: None,
            authorization_url: Some("http://as/authorize".into()),
            registration_url: None,
            challenge_methods: Some(vec!["S256".into()]),
            iss_supported,
            client_metadata_supported: false,
            as_scopes: vec![],
            dpop: false,
        }
    }

    #[test]
    fn the_pkce_challenge_is_rfc_7636s_example() {
        assert_eq!(s256("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"), "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM");
    }

    #[test]
    fn the_redirect_must_carry_our_state_and_the_exact_issuer() {
        let client = TokenClient { id: "c".into(), secret: super::super::ClientSecret::None, method: None };
        let req = request(&found(true), &client, Some("a b"), "http://127.0.0.1:9/callback").unwrap();
        assert!(
            req.url.contains("code_challenge_method=S256")
                && req.url.contains("scope=a%20b")
                && req.url.contains("resource=http%3A%2F%2Frs%2Fmcp")
        );
        let ok = format!("/callback?code=xyz&state={}&iss=http%3A%2F%2Fas", req.state);
        assert_eq!(code_of(&ok, &req, &found(true)).unwrap(), "xyz");
        assert!(code_of("/callback?code=xyz&state=other&iss=http%3A%2F%2Fas", &req, &found(true)).is_err());
        let slash = format!("/callback?code=xyz&state={}&iss=http%3A%2F%2Fas%2F", req.state);
        assert!(code_of(&slash, &req, &found(false)).is_err());
        let none = format!("/callback?code=xyz&state={}", req.state);
        assert!(code_of(&none, &req, &found(true)).is_err() && code_of(&none, &req, &found(false)).is_ok());
        let mut plain = found(true);
        plain.challenge_methods = Some(vec!["plain".into()]);
        assert!(request(&plain, &client, None, "http://127.0.0.1:9/callback").is_err());
    }
}
