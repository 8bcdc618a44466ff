//! Workload identity: a CI job reaches an MCP server with no stored secret. The job's own
//! identity token (GitHub Actions' OIDC token, a file a platform projects, or a variable) is
//! the assertion of a JWT-bearer grant (RFC 7523) or the subject token of a token exchange
//! (RFC 8693). A fresh assertion is read or fetched for each token request: they are short-lived.

use super::{ClientCredentials, ClientSecret};
use crate::config::{McpAssertion, McpGrant, McpOAuth};
use serde_json::Value;
use std::collections::BTreeMap;

/// `urn:ietf:params:oauth:grant-type:jwt-bearer`.
pub const JWT_BEARER: &str = "urn:ietf:params:oauth:grant-type:jwt-bearer";
/// `urn:ietf:params:oauth:grant-type:token-exchange`.
pub const TOKEN_EXCHANGE: &str = "urn:ietf:params:oauth:grant-type:token-exchange";

/// How the token is asked for.
#[derive(Clone)]
pub enum Grant {
    /// `client_credentials`.
    ClientCredentials,
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
    ) -> Result<(Vec<(&'static str, String)>, Vec<String>), String> {
        let mut sent = Vec::new();
        match self {
            Grant::ClientCredentials => Ok((vec![("grant_type", "client_credentials".into())], sent)),
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
    async fn fetch(&self, client: &reqwest::Client, issuer: &str, resource: &str, sent: &mut Vec<String>) -> Result<String, String> {
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

    async fn read(&self, client: &reqwest::Client, issuer: &str) -> Result<String, String> {
        match self {
            Assertion::Value(value) => Ok(value.clone()),
            Assertion::File(path) => match std::fs::read_to_string(path) {
                Ok(text) if !text.trim().is_empty() => Ok(text.trim().to_string()),
                Ok(_) => Err(format!("`oauth.assertion` file {path} is empty")),
                Err(e) => Err(format!("cannot read `oauth.assertion` file {path}: {e}")),
            },
            Assertion::GithubOidc { url, token, audience } => github_oidc(client, url, token, audience.as_deref().unwrap_or(issuer)).await,
            Assertion::IdJag { .. } => Err("`oauth.assertion`: an `id_jag` cannot be the subject of another".into()),
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
) -> Result<String, String> {
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
    let response = request.body(body.join("&")).send().await.map_err(|_| format!("`oauth.assertion.id_jag`: cannot reach {token_url}"))?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    match answer.get("access_token").and_then(Value::as_str) {
        Some(jag) if status.is_success() => Ok(jag.to_string()),
        _ => {
            let why = answer.get("error").and_then(Value::as_str).unwrap_or("no access_token");
            Err(format!("the identity provider {token_url} answered HTTP {} ({why}): check `oauth.assertion.id_jag`", status.as_u16()))
        }
    }
}

/// A GitHub Actions OIDC token for `audience`: `GET $ACTIONS_ID_TOKEN_REQUEST_URL&audience=…`
/// with `Authorization: bearer $ACTIONS_ID_TOKEN_REQUEST_TOKEN`, answered `{"value": "<jwt>"}`.
async fn github_oidc(client: &reqwest::Client, url: &str, token: &str, audience: &str) -> Result<String, String> {
    let joiner = if url.contains('?') { '&' } else { '?' };
    let request_url = format!("{url}{joiner}audience={}", super::client_auth::encode(audience));
    let response = client
        .get(&request_url)
        .header("authorization", format!("bearer {token}"))
        .header("accept", "application/json")
        .send()
        .await
        .map_err(|_| "`oauth.assertion`: cannot reach GitHub's OIDC endpoint (ACTIONS_ID_TOKEN_REQUEST_URL)".to_string())?;
    let status = response.status();
    let answer: Value = response.json().await.unwrap_or_default();
    match answer.get("value").and_then(Value::as_str) {
        Some(jwt) if status.is_success() && !jwt.is_empty() => Ok(jwt.to_string()),
        _ => Err(format!(
            "`oauth.assertion`: GitHub's OIDC endpoint answered HTTP {} without a token for audience {audience:?} (does the job have `permissions: id-token: write`?)",
            status.as_u16()
        )),
    }
}

/// `jwt`, `id_token`, `access_token` or a full URN, as the URN.
fn token_type(name: &str) -> Option<String> {
    match name {
        "jwt" | "id_token" | "access_token" | "id-jag" => Some(format!("urn:ietf:params:oauth:token-type:{name}")),
        urn if urn.starts_with("urn:") => Some(urn.to_string()),
        _ => None,
    }
}

impl McpOAuth {
    /// Problems of the grant's settings, as `(field under the server, message)`.
    pub fn problems(&self) -> Vec<(&'static str, String)> {
        let mut out = Vec::new();
        let grant = self.grant.unwrap_or_default();
        let exchange_only = [
            ("oauth.subject_token_type", self.subject_token_type.is_some()),
            ("oauth.requested_token_type", self.requested_token_type.is_some()),
            ("oauth.audience", self.audience.is_some()),
        ];
        if grant != McpGrant::TokenExchange
            && let Some((field, _)) = exchange_only.iter().find(|(_, set)| *set)
        {
            out.push((*field, "applies to `grant = \"token_exchange\"` only".to_string()));
        }
        let secrets = usize::from(self.client_secret.is_some()) + usize::from(self.private_key.is_some());
        match grant {
            McpGrant::ClientCredentials => {
                if self.assertion.is_some() {
                    out.push(("oauth.assertion", "applies to `grant = \"jwt_bearer\"` or `\"token_exchange\"`: set `grant`".into()));
                }
                if secrets != 1 {
                    out.push(("oauth", "set exactly one of `client_secret` and `private_key`".into()));
                }
                if self.client_id.trim().is_empty() {
                    out.push(("oauth.client_id", "the client-credentials grant needs the registered `client_id`".into()));
                }
            }
            McpGrant::JwtBearer | McpGrant::TokenExchange => {
                if self.assertion.is_none() {
                    let how = "`assertion = { github_oidc = {} }`, `{ file = \"PATH\" }` or `{ env = \"VAR\" }`";
                    out.push(("oauth.assertion", format!("this grant needs the workload's identity token: {how}")));
                }
                if secrets > 1 {
                    out.push(("oauth", "set at most one of `client_secret` and `private_key`".into()));
                }
                if secrets == 1 && self.client_id.trim().is_empty() {
                    out.push(("oauth.client_id", "a `client_secret` or `private_key` needs its `client_id`".into()));
                }
            }
        }
        out.extend(self.assertion.as_ref().and_then(McpAssertion::problem).map(|m| ("oauth.assertion", m)));
        for (field, kind) in
            [("oauth.subject_token_type", &self.subject_token_type), ("oauth.requested_token_type", &self.requested_token_type)]
        {
            if let Some(kind) = kind.as_deref().filter(|k| token_type(k).is_none()) {
                out.push((field, format!("{kind:?} is not `jwt`, `id_token`, `access_token` or a token-type URN")));
            }
        }
        out
    }

    /// The client of the grant with `${VAR}` expanded from `env`; `Err` names what is missing.
    pub fn client(&self, name: &str, env: &BTreeMap<String, String>) -> Result<ClientCredentials, String> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        let secret = match (&self.private_key, &self.client_secret) {
            (Some(key), _) => ClientSecret::PrivateKey(expand(key)),
            (None, Some(secret)) => ClientSecret::Secret(expand(secret)),
            (None, None) => ClientSecret::None,
        };
        let client_id = expand(&self.client_id);
        let grant = self.grant_of(name, env)?;
        if (matches!(grant, Grant::ClientCredentials) && client_id.is_empty()) || secret.is_empty() {
            return Err(format!("`mcp_servers.{name}.oauth`: `client_id`, `client_secret` or `private_key` is empty (an unset ${{VAR}}?)"));
        }
        Ok(ClientCredentials {
            client_id,
            secret,
            scope: self.scope.as_deref().map(expand),
            token_url: self.token_url.as_deref().map(expand),
            grant,
        })
    }

    fn grant_of(&self, name: &str, env: &BTreeMap<String, String>) -> Result<Grant, String> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        let Some(assertion) = &self.assertion else { return Ok(Grant::ClientCredentials) };
        let assertion = assertion.resolve(&format!("`mcp_servers.{name}.oauth.assertion`"), env)?;
        Ok(match self.grant.unwrap_or_default() {
            McpGrant::TokenExchange => Grant::TokenExchange {
                subject: assertion,
                subject_token_type: self
                    .subject_token_type
                    .as_deref()
                    .and_then(token_type)
                    .unwrap_or_else(|| token_type("jwt").unwrap_or_default()),
                requested_token_type: self.requested_token_type.as_deref().and_then(token_type),
                audience: self.audience.as_deref().map(expand),
            },
            _ => Grant::JwtBearer(assertion),
        })
    }

    /// The values of its assertion known before the run (a variable's, a file's), for masking.
    pub fn assertion_values(&self, env: &BTreeMap<String, String>) -> Vec<String> {
        self.assertion.as_ref().map(|a| a.values(env)).unwrap_or_default()
    }
}

impl McpAssertion {
    fn values(&self, env: &BTreeMap<String, String>) -> Vec<String> {
        match self {
            McpAssertion::Env(var) => env.get(var).map(|v| v.trim().to_string()).into_iter().collect(),
            McpAssertion::File(path) => {
                std::fs::read_to_string(dracode_input::expand_vars(path, env)).map(|t| t.trim().to_string()).into_iter().collect()
            }
            McpAssertion::IdJag { subject, .. } => subject.values(env),
            McpAssertion::GithubOidc { .. } => env.get("ACTIONS_ID_TOKEN_REQUEST_TOKEN").cloned().into_iter().collect(),
        }
    }

    /// The source, with `${VAR}` expanded and variables read from `env`; `field` names it.
    fn resolve(&self, field: &str, env: &BTreeMap<String, String>) -> Result<Assertion, String> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        Ok(match self {
            McpAssertion::File(path) => Assertion::File(expand(path)),
            McpAssertion::Env(var) => match env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                Some(value) => Assertion::Value(value.to_string()),
                None => return Err(format!("{field}: {var} is not set")),
            },
            McpAssertion::GithubOidc { audience } => {
                let var = |v: &str| env.get(v).filter(|s| !s.trim().is_empty()).cloned();
                let (Some(url), Some(token)) = (var("ACTIONS_ID_TOKEN_REQUEST_URL"), var("ACTIONS_ID_TOKEN_REQUEST_TOKEN")) else {
                    return Err(format!(
                        "{field}: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set: GitHub Actions sets them for a job with `permissions: id-token: write`"
                    ));
                };
                Assertion::GithubOidc { url, token, audience: audience.as_deref().map(expand) }
            }
            McpAssertion::IdJag { token_url, client_id, subject } => Assertion::IdJag {
                token_url: expand(token_url),
                client_id: client_id.as_deref().map(expand),
                subject: Box::new(subject.resolve(field, env)?),
            },
        })
    }

    fn problem(&self) -> Option<String> {
        match self {
            McpAssertion::IdJag { subject, .. } if matches!(**subject, McpAssertion::IdJag { .. }) => Some(
                "the `subject` of an `id_jag` is an ID token: `{ env = \"VAR\" }`, `{ file = \"PATH\" }` or `{ github_oidc = {} }`".into(),
            ),
            McpAssertion::IdJag { token_url, .. } if !(token_url.starts_with("http://") || token_url.starts_with("https://")) => {
                Some(format!("`id_jag.token_url` {token_url:?} is not an http:// or https:// URL"))
            }
            McpAssertion::IdJag { subject, .. } => subject.problem(),
            McpAssertion::Env(var) if var.is_empty() || var.contains(['=', '\0', '$']) => {
                Some(format!("`env = {var:?}` is not a variable name (write the name, not `${{…}}`)"))
            }
            McpAssertion::File(path) if path.trim().is_empty() => Some("`file` is empty".into()),
            McpAssertion::GithubOidc { audience: Some(a) } if a.trim().is_empty() => Some("`github_oidc.audience` is empty".into()),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn fields(o: McpOAuth) -> Vec<&'static str> {
        o.problems().into_iter().map(|(f, _)| f).collect()
    }

    #[test]
    fn bad_combinations_name_their_field() {
        let github = Some(McpAssertion::GithubOidc { audience: None });
        let ok = McpOAuth { grant: Some(McpGrant::JwtBearer), assertion: github.clone(), ..Default::default() };
        assert!(fields(ok).is_empty());
        let no_assertion = McpOAuth { grant: Some(McpGrant::TokenExchange), ..Default::default() };
        assert_eq!(fields(no_assertion), ["oauth.assertion"]);
        let no_grant = McpOAuth { client_id: "c".into(), client_secret: Some("s".into()), assertion: github.clone(), ..Default::default() };
        assert_eq!(fields(no_grant), ["oauth.assertion"]);
        let audience = McpOAuth { grant: Some(McpGrant::JwtBearer), assertion: github, audience: Some("a".into()), ..Default::default() };
        assert_eq!(fields(audience), ["oauth.audience"]);
        let bad_env =
            McpOAuth { grant: Some(McpGrant::JwtBearer), assertion: Some(McpAssertion::Env("${X}".into())), ..Default::default() };
        assert_eq!(fields(bad_env), ["oauth.assertion"]);
    }

    #[test]
    fn github_oidc_needs_the_variables_of_a_job_with_id_token_write() {
        let o = McpOAuth {
            grant: Some(McpGrant::JwtBearer),
            assertion: Some(McpAssertion::GithubOidc { audience: None }),
            ..Default::default()
        };
        let err = o.client("web", &BTreeMap::new()).err().unwrap_or_default();
        assert!(err.starts_with("`mcp_servers.web.oauth.assertion`: ACTIONS_ID_TOKEN_REQUEST_URL"), "{err}");
        assert_eq!(token_type("id_token").as_deref(), Some("urn:ietf:params:oauth:token-type:id_token"));
    }
}
