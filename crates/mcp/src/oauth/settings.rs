//! The `oauth` table of a `url` server ([`McpOAuth`]): the grant it means, what is wrong with it, and the
//! [`ClientCredentials`] it expands to (with `${VAR}` read from dracode's environment).

use super::{Assertion, ClientCredentials, ClientSecret, Grant};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

/// `oauth = { … }` of a `url` server: how dracode gets an access token for it (`grant`, by
/// default the one its other settings imply). A pre-registered client's `client_credentials`
/// (`client_secret` or `private_key`); a person's `authorization_code` grant (no secret, or
/// `refresh_token_env_var`: `dracode mcp login NAME` once, its refresh token in CI); or a
/// workload's identity token, `assertion`, as a `jwt_bearer` or `token_exchange` grant.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpOAuth {
    /// `client_credentials`, `authorization_code`, `jwt_bearer` (RFC 7523) or `token_exchange`
    /// (RFC 8693); by default `client_credentials` with a `client_secret` or `private_key` (and
    /// no `refresh_token_env_var`), else `authorization_code`. A workload's grant is always
    /// named: an `assertion` without `grant` is refused.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub grant: Option<McpGrant>,
    /// The client id registered with the authorization server (may use `${VAR}`); without it
    /// a person's grant registers dracode (RFC 7591) or uses `client_metadata_url`, and a
    /// workload's grant sends none.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub client_id: String,
    /// Its secret, normally `${VAR}` (or set `private_key`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_secret: Option<String>,
    /// Instead of a secret: the client's EC P-256 private key (PKCS#8 PEM, normally `${VAR}`),
    /// signing an ES256 client assertion (`private_key_jwt`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub private_key: Option<String>,
    /// The scope to ask for; by default the one the server's challenge or metadata names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<String>,
    /// The token endpoint of a client's or a workload's grant; by default discovered (RFC 9728
    /// and RFC 8414).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token_url: Option<String>,
    /// The variable holding a refresh token from `dracode mcp login NAME` (a person's grant,
    /// refreshed as the access token expires).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refresh_token_env_var: Option<String>,
    /// The https URL of dracode's client ID metadata document, used as its client id where the
    /// authorization server supports those (instead of registering).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub client_metadata_url: Option<String>,
    /// The workload's identity token of `jwt_bearer` and `token_exchange`: `{ github_oidc = {
    /// audience = "…" } }`, `{ file = "PATH" }`, `{ env = "VAR" }` or `{ id_jag = { … } }`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub assertion: Option<McpAssertion>,
    /// `token_exchange`: the kind of the assertion, `jwt` (the default), `id_token`,
    /// `access_token` or a token-type URN.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub subject_token_type: Option<String>,
    /// `token_exchange`: the kind of token asked for (same names); by default the server's choice.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub requested_token_type: Option<String>,
    /// `token_exchange`: the `audience` parameter (the resource is always the MCP server).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub audience: Option<String>,
}

/// `oauth.grant`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case")]
pub enum McpGrant {
    /// A pre-registered client's own credentials.
    ClientCredentials,
    /// A person's grant: the authorization code flow with PKCE, then its refresh token.
    AuthorizationCode,
    /// RFC 7523: the assertion is the grant.
    JwtBearer,
    /// RFC 8693: the assertion is exchanged for a token.
    TokenExchange,
}

/// `oauth.assertion`: where the workload's identity token comes from, afresh for each token
/// request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "snake_case", deny_unknown_fields)]
pub enum McpAssertion {
    /// GitHub Actions' OIDC token (the job needs `permissions: id-token: write`), for
    /// `audience` (default: the authorization server's issuer).
    GithubOidc {
        /// The `aud` asked for.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        audience: Option<String>,
    },
    /// A file holding the token (read again for each request; may use `${VAR}`).
    File(String),
    /// The variable holding the token.
    Env(String),
    /// Enterprise-managed authorization: `subject` (an ID token from one of the sources above)
    /// exchanged at the identity provider's `token_url` for an identity assertion grant
    /// (ID-JAG) for the authorization server and the MCP server.
    IdJag {
        /// The identity provider's token endpoint.
        token_url: String,
        /// The client id dracode has there.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        client_id: Option<String>,
        /// The ID token exchanged.
        subject: Box<McpAssertion>,
    },
}

/// Why the `oauth` table of server `name` does not expand to a client: what is configured but
/// empty or unset.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum SettingsError {
    /// `client_id`, `client_secret` or `private_key` expands to nothing.
    #[error("`mcp_servers.{name}.oauth`: `client_id`, `client_secret` or `private_key` is empty (an unset ${{VAR}}?)")]
    EmptyClient {
        /// The server's name.
        name: String,
    },
    /// The variable of `refresh_token_env_var` is not set.
    #[error(
        "`mcp_servers.{name}.oauth.refresh_token_env_var`: {var} is not set (run `dracode mcp login {name}` once and store the refresh token it prints as {var})"
    )]
    RefreshTokenUnset {
        /// The server's name.
        name: String,
        /// The variable.
        var: String,
    },
    /// A workload's grant without `assertion`.
    #[error("`mcp_servers.{name}.oauth.assertion`: this grant needs the workload's identity token")]
    NoAssertion {
        /// The server's name.
        name: String,
    },
    /// The variable of `assertion = { env = "VAR" }` is not set.
    #[error("`mcp_servers.{name}.oauth.assertion`: {var} is not set")]
    AssertionUnset {
        /// The server's name.
        name: String,
        /// The variable.
        var: String,
    },
    /// `github_oidc` outside a GitHub Actions job allowed an ID token.
    #[error(
        "`mcp_servers.{name}.oauth.assertion`: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set: GitHub Actions sets them for a job with `permissions: id-token: write`"
    )]
    GithubOidcUnset {
        /// The server's name.
        name: String,
    },
}

/// `(field under the server, message)` of each problem.
type Problems = Vec<(&'static str, String)>;

impl McpOAuth {
    /// The grant meant: `grant`, else `client_credentials` for a client with a `client_secret`
    /// or `private_key` and no `refresh_token_env_var`, else a person's `authorization_code`.
    pub fn grant_kind(&self) -> McpGrant {
        match self.grant {
            Some(grant) => grant,
            None if self.refresh_token_env_var.is_none() && (self.client_secret.is_some() || self.private_key.is_some()) => {
                McpGrant::ClientCredentials
            }
            None => McpGrant::AuthorizationCode,
        }
    }

    /// Problems of its settings, as `(field under the server, message)`.
    pub fn problems(&self) -> Problems {
        let mut out = Vec::new();
        if self.client_secret.is_some() && self.private_key.is_some() {
            out.push(("oauth.private_key", "set one of `client_secret` and `private_key`, not both".to_string()));
        }
        let secret = self.client_secret.is_some() || self.private_key.is_some();
        if secret && self.client_id.trim().is_empty() {
            out.push(("oauth.client_id", "a `client_secret` or `private_key` belongs to a `client_id`: set it".into()));
        }
        match self.grant_kind() {
            McpGrant::ClientCredentials if !secret => {
                out.push(("oauth", "the client-credentials grant needs `client_secret` or `private_key`".into()));
            }
            McpGrant::AuthorizationCode => out.extend(self.person_problems()),
            McpGrant::JwtBearer | McpGrant::TokenExchange if self.assertion.is_none() => {
                let how = "`assertion = { github_oidc = {} }`, `{ file = \"PATH\" }` or `{ env = \"VAR\" }`";
                out.push(("oauth.assertion", format!("this grant needs the workload's identity token: {how}")));
            }
            _ => {}
        }
        out.extend(self.assertion.as_ref().and_then(McpAssertion::problem).map(|m| ("oauth.assertion", m)));
        for (field, kind) in
            [("oauth.subject_token_type", &self.subject_token_type), ("oauth.requested_token_type", &self.requested_token_type)]
        {
            if let Some(kind) = kind.as_deref().filter(|k| token_type(k).is_none()) {
                out.push((field, format!("{kind:?} is not `jwt`, `id_token`, `access_token` or a token-type URN")));
            }
        }
        out.extend(self.misplaced());
        out
    }

    /// Settings of another grant than the one meant.
    fn misplaced(&self) -> Problems {
        let grant = self.grant_kind();
        let mut out = Vec::new();
        let only = |fields: &[(&'static str, bool)], wanted: bool, why: &str| -> Option<(&'static str, String)> {
            fields.iter().find(|(_, set)| *set && !wanted).map(|(field, _)| (*field, why.to_string()))
        };
        let exchange = [
            ("oauth.subject_token_type", self.subject_token_type.is_some()),
            ("oauth.requested_token_type", self.requested_token_type.is_some()),
            ("oauth.audience", self.audience.is_some()),
        ];
        out.extend(only(&exchange, grant == McpGrant::TokenExchange, "applies to `grant = \"token_exchange\"` only"));
        let workload = matches!(grant, McpGrant::JwtBearer | McpGrant::TokenExchange);
        let why = "applies to `grant = \"jwt_bearer\"` or `\"token_exchange\"`: set `grant`";
        out.extend(only(&[("oauth.assertion", self.assertion.is_some())], workload, why));
        let person = [
            ("oauth.refresh_token_env_var", self.refresh_token_env_var.is_some()),
            ("oauth.client_metadata_url", self.client_metadata_url.is_some()),
        ];
        out.extend(only(
            &person,
            grant == McpGrant::AuthorizationCode,
            "applies to a person's grant (`grant = \"authorization_code\"`) only",
        ));
        out
    }

    /// Problems of a person's grant: its refresh token's variable and client.
    fn person_problems(&self) -> Problems {
        let mut out = Vec::new();
        if let Some(var) = &self.refresh_token_env_var {
            if var.is_empty() || var.contains(['=', '\0', '$']) {
                out.push(("oauth.refresh_token_env_var", format!("{var:?} is not a variable name (write the name, not `${{…}}`)")));
            }
            if self.client_id.trim().is_empty() && self.client_metadata_url.is_none() {
                out.push((
                    "oauth.client_id",
                    "a refresh token belongs to a client: set `client_id` (the one `dracode mcp login` printed)".into(),
                ));
            }
        }
        if let Some(url) = self.client_metadata_url.as_deref().filter(|u| !u.starts_with("https://") || u.len() <= "https://".len()) {
            out.push(("oauth.client_metadata_url", format!("{url:?} is not an https:// URL")));
        }
        out
    }

    /// The client of the grant with `${VAR}` expanded from `env`; `Err` names what is missing.
    pub fn client(&self, name: &str, env: &BTreeMap<String, String>) -> Result<ClientCredentials, SettingsError> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        let secret = match (&self.private_key, &self.client_secret) {
            (Some(key), _) => ClientSecret::PrivateKey(expand(key)),
            (None, Some(secret)) => ClientSecret::Secret(expand(secret)),
            (None, None) => ClientSecret::None,
        };
        let client_id = expand(&self.client_id);
        let grant = self.grant_of(name, env)?;
        let unset_id = !self.client_id.is_empty() && client_id.trim().is_empty();
        if unset_id || (matches!(grant, Grant::ClientCredentials) && client_id.is_empty()) || secret.is_empty() {
            return Err(SettingsError::EmptyClient { name: name.to_string() });
        }
        Ok(ClientCredentials {
            client_id,
            secret,
            scope: self.scope.as_deref().map(expand),
            token_url: self.token_url.as_deref().map(expand),
            grant,
            refresh_token: self.refresh_token(name, env)?,
            client_metadata_url: self.client_metadata_url.as_deref().map(expand),
        })
    }

    /// The refresh token of `refresh_token_env_var`; `Err` when that variable is not set.
    fn refresh_token(&self, name: &str, env: &BTreeMap<String, String>) -> Result<Option<String>, SettingsError> {
        let Some(var) = &self.refresh_token_env_var else { return Ok(None) };
        match env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
            Some(token) => Ok(Some(token.to_string())),
            None => Err(SettingsError::RefreshTokenUnset { name: name.to_string(), var: var.clone() }),
        }
    }

    /// The client `dracode mcp login NAME` authorizes as: this one as a person's grant, without
    /// its refresh token (which is what the login is for).
    pub fn login_client(&self, name: &str, env: &BTreeMap<String, String>) -> Result<ClientCredentials, SettingsError> {
        let person = McpOAuth { grant: Some(McpGrant::AuthorizationCode), refresh_token_env_var: None, ..self.clone() };
        person.client(name, env)
    }

    /// The grant meant, its assertion resolved from `env`.
    fn grant_of(&self, name: &str, env: &BTreeMap<String, String>) -> Result<Grant, SettingsError> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        let kind = self.grant_kind();
        let assertion = match (&self.assertion, kind) {
            (_, McpGrant::ClientCredentials) => return Ok(Grant::ClientCredentials),
            (_, McpGrant::AuthorizationCode) => return Ok(Grant::AuthorizationCode),
            (None, _) => return Err(SettingsError::NoAssertion { name: name.to_string() }),
            (Some(assertion), _) => assertion.resolve(name, env)?,
        };
        Ok(match kind {
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

    /// The secret values of its settings known before the run (client secret, private key,
    /// refresh token, a variable's or file's assertion), expanded from `env`, for masking.
    pub fn secret_values(&self, env: &BTreeMap<String, String>) -> Vec<String> {
        let mut out: Vec<String> = self.client_secret.iter().chain(&self.private_key).map(|v| dracode_input::expand_vars(v, env)).collect();
        out.extend(self.refresh_token_env_var.as_ref().and_then(|var| env.get(var)).cloned());
        out.extend(self.assertion.as_ref().map(|a| a.values(env)).unwrap_or_default());
        out
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

    /// The source, with `${VAR}` expanded and variables read from `env`; `name` is the server's.
    fn resolve(&self, name: &str, env: &BTreeMap<String, String>) -> Result<Assertion, SettingsError> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        Ok(match self {
            McpAssertion::File(path) => Assertion::File(expand(path)),
            McpAssertion::Env(var) => match env.get(var).map(|v| v.trim()).filter(|v| !v.is_empty()) {
                Some(value) => Assertion::Value(value.to_string()),
                None => return Err(SettingsError::AssertionUnset { name: name.to_string(), var: var.clone() }),
            },
            McpAssertion::GithubOidc { audience } => {
                let var = |v: &str| env.get(v).filter(|s| !s.trim().is_empty()).cloned();
                let (Some(url), Some(token)) = (var("ACTIONS_ID_TOKEN_REQUEST_URL"), var("ACTIONS_ID_TOKEN_REQUEST_TOKEN")) else {
                    return Err(SettingsError::GithubOidcUnset { name: name.to_string() });
                };
                Assertion::GithubOidc { url, token, audience: audience.as_deref().map(expand) }
            }
            McpAssertion::IdJag { token_url, client_id, subject } => Assertion::IdJag {
                token_url: expand(token_url),
                client_id: client_id.as_deref().map(expand),
                subject: Box::new(subject.resolve(name, env)?),
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

/// `jwt`, `id_token`, `access_token` or a full URN, as the URN.
fn token_type(name: &str) -> Option<String> {
    match name {
        "jwt" | "id_token" | "access_token" | "id-jag" => Some(format!("urn:ietf:params:oauth:token-type:{name}")),
        urn if urn.starts_with("urn:") => Some(urn.to_string()),
        _ => None,
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
    fn the_grant_is_implied_by_the_other_settings_and_others_settings_are_refused() {
        assert_eq!(McpOAuth::default().grant_kind(), McpGrant::AuthorizationCode);
        let client = McpOAuth { client_id: "c".into(), client_secret: Some("s".into()), ..Default::default() };
        assert_eq!(client.grant_kind(), McpGrant::ClientCredentials);
        let person = McpOAuth { refresh_token_env_var: Some("R".into()), ..client.clone() };
        assert_eq!(person.grant_kind(), McpGrant::AuthorizationCode);
        assert!(fields(person).is_empty());
        let key = McpOAuth {
            grant: Some(McpGrant::AuthorizationCode),
            client_id: "c".into(),
            private_key: Some("k".into()),
            ..Default::default()
        };
        assert!(fields(key).is_empty(), "a person's grant may authenticate its client with a key");
        let env = Some(McpAssertion::Env("T".into()));
        let mixed =
            McpOAuth { grant: Some(McpGrant::JwtBearer), assertion: env, refresh_token_env_var: Some("R".into()), ..Default::default() };
        assert_eq!(fields(mixed), ["oauth.refresh_token_env_var"]);
        let no_secret = McpOAuth { grant: Some(McpGrant::ClientCredentials), client_id: "c".into(), ..Default::default() };
        assert_eq!(fields(no_secret), ["oauth"]);
    }

    #[test]
    fn github_oidc_needs_the_variables_of_a_job_with_id_token_write() {
        let o = McpOAuth {
            grant: Some(McpGrant::JwtBearer),
            assertion: Some(McpAssertion::GithubOidc { audience: None }),
            ..Default::default()
        };
        let err = o.client("web", &BTreeMap::new()).err().map(|e| e.to_string()).unwrap_or_default();
        assert!(err.starts_with("`mcp_servers.web.oauth.assertion`: ACTIONS_ID_TOKEN_REQUEST_URL"), "{err}");
        assert_eq!(token_type("id_token").as_deref(), Some("urn:ietf:params:oauth:token-type:id_token"));
    }
}
