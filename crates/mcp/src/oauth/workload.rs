//! Workload identity: a CI job reaches an MCP server with no stored secret. The job's own
//! identity token (GitHub Actions' OIDC token, a file a platform projects, or a variable) is
//! the assertion of a JWT-bearer grant (RFC 7523) or the subject token of a token exchange
//! (RFC 8693). A fresh assertion is read or fetched for each token request: they are short-lived.
//! [`Grant`] names every grant dracode asks for, the others included.

use serde_json::Value;

/// Why a workload's grant could not be asked for: its identity token could not be read or
/// fetched.
#[derive(Debug, thiserror::Error)]
pub enum GrantError {
    /// A person's grant has no form of its own: it goes through the code flow.
    #[error("a person's grant is asked for by the authorization code flow")]
    PersonGrant,
    /// The assertion's file is empty.
    #[error("`oauth.assertion` file {path} is empty")]
    EmptyFile {
        /// The file.
        path: String,
    },
    /// The assertion's file cannot be read.
    #[error("cannot read `oauth.assertion` file {path}: {reason}")]
    UnreadableFile {
        /// The file.
        path: String,
        /// Why.
        reason: std::io::Error,
    },
    /// An `id_jag` whose subject is another `id_jag`.
    #[error("`oauth.assertion`: an `id_jag` cannot be the subject of another")]
    NestedIdJag,
    /// The identity provider of an `id_jag` cannot be reached.
    #[error("`oauth.assertion.id_jag`: cannot reach {token_url}")]
    IdJagUnreachable {
        /// The identity provider's token endpoint.
        token_url: String,
    },
    /// The identity provider gave no ID-JAG.
    #[error("the identity provider {token_url} answered HTTP {status} ({error}): check `oauth.assertion.id_jag`")]
    IdJagRefused {
        /// The identity provider's token endpoint.
        token_url: String,
        /// The HTTP status.
        status: u16,
        /// The OAuth `error` code (`no access_token` when there was none).
        error: String,
    },
    /// GitHub's OIDC endpoint cannot be reached.
    #[error("`oauth.assertion`: cannot reach GitHub's OIDC endpoint (ACTIONS_ID_TOKEN_REQUEST_URL)")]
    GithubUnreachable,
    /// GitHub's OIDC endpoint gave no token.
    #[error(
        "`oauth.assertion`: GitHub's OIDC endpoint answered HTTP {status} without a token for audience {audience:?} (does the job have `permissions: id-token: write`?)"
    )]
    GithubNoToken {
        /// The HTTP status.
        status: u16,
        /// The audience asked for.
        audience: String,
    },
}

/// `urn:ietf:params:oauth:grant-type:jwt-bearer`.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// `urn:ietf:params:oauth:grant-type:token-exchange`.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// How the token is asked for.
#[derive(Clone)]
pub enum Grant {
    /// `client_credentials`.
    ClientCredentials,
    /// A person's grant: `authorization_code` with PKCE, then `refresh_token` ([`super::flow`]).
    AuthorizationCode,
    /// RFC 7523: the assertion is the grant.
    JwtBearer(Assertion),
    /// RFC 8693: the assertion is the subject token.
    TokenExchange {
        /// The subject token.
        subject: Assertion,
        /// `subject_token_type`, a URN.
        subject_token_type: String,
        /// `requested_token_type`, a URN.
        requested_token_type: Option<String>,
        /// `audience`.
        audience: Option<String>,
    },
}

/// Where the workload's identity token comes from.
#[derive(Clone)]
pub enum Assertion {
    /// A file, read again for each token request (platforms rotate them).
    File(String),
    /// The value of a variable, read when the server starts.
    Value(String),
    /// GitHub Actions' OIDC endpoint, asked for a token with `audience` (default: the
    /// authorization server's issuer).
    GithubOidc {
        /// `ACTIONS_ID_TOKEN_REQUEST_URL`.
        url: String,
        /// `ACTIONS_ID_TOKEN_REQUEST_TOKEN`.
        token: String,
        /// The audience asked for.
        audience: Option<String>,
    },
    /// Enterprise-managed authorization: `subject` (an ID token) exchanged at the identity
    /// provider's `token_url` for an identity assertion authorization grant (ID-JAG) for the
    /// authorization server and the MCP server.
    IdJag {
        /// The identity provider's token endpoint.
        token_url: String,
        /// The client id dracode has at the identity provider.
        client_id: Option<String>,
        /// The ID token exchanged.
        subject: Box<Assertion>,
    },
}

impl Grant {
    /// Its name in config and messages.
    pub fn label(&self) -> &'static str {
        match self {
            Grant::ClientCredentials => "client credentials",
            Grant::AuthorizationCode => "authorization code / refresh token",
            Grant::JwtBearer(_) => "jwt_bearer",
            Grant::TokenExchange { .. } => "token_exchange",
        }
    }

    /// The form of its token request (`grant_type` and what the grant needs) and the
    /// credentials fetched for it (to mask); `issuer` is the default audience of an OIDC token,
    /// `resource` the MCP server's.
    pub(super) async fn form(
        &self,
        client: &reqwest::Client,
        issuer: &str,
        resource: &str,
    ) -> Result<(Vec<(&'static str, String)>, Vec<String>), GrantError> {
        let mut sent = Vec::new();
        match self {
            Grant::ClientCredentials => Ok((vec![("grant_type", "client_credentials".into())], sent)),
            Grant::AuthorizationCode => Err(GrantError::PersonGrant),
            Grant::JwtBearer(assertion) => {
                let jwt = assertion.fetch(client, issuer, resource, &mut sent).await?;
                Ok((vec![("grant_type", JWT_BEARER.into()), ("assertion", jwt)], sent))
            }
            Grant::TokenExchange { subject, subject_token_type, requested_token_type, audience } => {
                let jwt = subject.fetch(client, issuer, resource, &mut sent).await?;
                let mut form = vec![
                    ("grant_type", TOKEN_EXCHANGE.to_string()),
                    ("subject_token", jwt.clone()),
                    ("subject_token_type", subject_token_type.clone()),
                ];
                form.extend(requested_token_type.iter().map(|t| ("requested_token_type", t.clone())));
                form.extend(audience.iter().map(|a| ("audience", a.clone())));
                Ok((form, sent))
            }
        }
    }

    /// What to check when the authorization server refused the grant with `error`.
    pub(super) fn blame(&self, error: &str, issuer: &str) -> String {
        if error == "invalid_dpop_proof" {
            return "the authorization server refused dracode's DPoP proof (ES256, `htu` the token endpoint)".into();
        }
        let assertion = match self {
            Grant::JwtBearer(a) | Grant::TokenExchange { subject: a, .. } if error != "invalid_client" => a,
            _ => return "check `oauth.client_id` and its `client_secret` or `private_key`".into(),
        };
        let whence = match assertion {
            Assertion::GithubOidc { audience, .. } => {
                format!("the GitHub OIDC token for audience {:?}", audience.as_deref().unwrap_or(issuer))
            }
            Assertion::File(path) => format!("the token in {path}"),
            Assertion::Value(_) => "the token of its variable".into(),
            Assertion::IdJag { token_url, .. } => format!("the identity assertion grant from {token_url}"),
        };
        format!("the authorization server refused {whence}: check `oauth.assertion` (and the trust the server grants it)")
    }
}

impl Assertion {
    /// The identity token, read or fetched now (kept in `sent`, with what it was made from).
    async fn fetch(&self, client: &reqwest::Client, issuer: &str, resource: &str, sent: &mut Vec<String>) -> Result<String, GrantError> {
        let token = match self {
            Assertion::IdJag { token_url, client_id, subject } => {
                let id_token = Box::pin(subject.fetch(client, issuer, resource, sent)).await?;
                id_jag(client, token_url, client_id.as_deref(), &id_token, issuer, resource).await?
            }
            _ => self.read(client, issuer).await?,
        };
        sent.push(token.clone());
        Ok(token)
    }

    async fn read(&self, client: &reqwest::Client, issuer: &str) -> Result<String, GrantError> {
        match self {
            Assertion::Value(value) => Ok(value.clone()),
            Assertion::File(path) => match std::fs::read_to_string(path) {
                Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
                Ok(_) => Err(GrantError::EmptyFile { path: path.clone() }),
                Err(reason) => Err(GrantError::UnreadableFile { path: path.clone(), reason }),
            },
            Assertion::GithubOidc { url, token, audience } => github_oidc(client, url, token, audience.as_deref().unwrap_or(issuer)).await,
            Assertion::IdJag { .. } => Err(GrantError::NestedIdJag),
        }
    }
}

/// The ID-JAG the identity provider at `token_url` exchanges `id_token` for (RFC 8693,
/// `requested_token_type` id-jag), for the authorization server `issuer` and `resource`.
async fn id_jag(
    client: &reqwest::Client,
    token_url: &str,
    client_id: Option<&str>,
    id_token: &str,
    issuer: &str,
    resource: &str,
) -> Result<String, GrantError> {
    let mut form = vec![
        ("grant_type", TOKEN_EXCHANGE),
        ("requested_token_type", "urn:ietf:params:oauth:token-type:id-jag"),
        ("subject_token", id_token),
        ("subject_token_type", "urn:ietf:params:oauth:token-type:id_token"),
        ("audience", issuer),
        ("resource", resource),
    ];
    form.extend(client_id.map(|id| ("client_id", id)));
    let body: Vec<String> = form.iter().map(|(k, v)| format!("{k}={}", super::client_auth::encode(v))).collect();
    let request = client.post(token_url).header("content-type", "application/x-www-form-urlencoded").header("accept", "application/json");
    let response =
        request.body(body.join("&")).send().await.map_err(|_| GrantError::IdJagUnreachable { token_url: token_url.to_string() })?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    match answer.get("access_token").and_then(Value::as_str) {
        Some(jag) if status.is_success() => Ok(jag.to_string()),
        _ => {
            let error = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token").to_string();
            Err(GrantError::IdJagRefused { token_url: token_url.to_string(), status: status.as_u16(), error })
        }
    }
}

/// A GitHub Actions OIDC token for `audience`: `GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=…`
/// with `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`, answered `{"value": "<jwt>"}`.
async fn github_oidc(client: &reqwest::Client, url: &str, token: &str, audience: &str) -> Result<String, GrantError> {
    let joiner = if url.contains('?') { '&' } else { '?' };
    let request_url = format!("{url}{joiner}audience={}", super::client_auth::encode(audience));
    let response = client
        .get(&request_url)
        .header("authorization", format!("bearer {token}"))
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|_| GrantError::GithubUnreachable)?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    match answer.get("value").and_then(Value::as_str) {
        Some(jwt) if status.is_success() && !jwt.is_empty() => Ok(jwt.to_string()),
        _ => Err(GrantError::GithubNoToken { status: status.as_u16(), audience: audience.to_string() }),
    }
}
