//! `[mcp_servers.NAME]`: how one MCP server is reached, as written in config or a manifest.

pub use super::elicit::McpElicitation;
pub use super::oauth::settings::{McpAssertion, McpGrant, McpOAuth, SettingsError};
use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::time::Duration;

/// How long one tool call may take when the server sets no `timeout`.
pub const DEFAULT_CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// How long starting a server (handshake and tool list) may take when it sets no
/// `startup_timeout`.
pub const DEFAULT_STARTUP_TIMEOUT: Duration = Duration::from_secs(30);

/// Why a `url` server's credentials could not be expanded: what is configured but unset.
#[derive(Debug, Clone, PartialEq, thiserror::Error)]
pub enum CredentialsError {
    /// The variable of `bearer_token_env_var` is not set.
    #[error("`mcp_servers.{name}.bearer_token_env_var`: {var} is not set")]
    BearerUnset {
        /// The server's name.
        name: String,
        /// The variable.
        var: String,
    },
    /// Its `oauth` table does not expand to a client.
    #[error(transparent)]
    OAuth(#[from] SettingsError),
}

/// When a server is started.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum McpScope {
    /// Started for each task attempt, inside the task's sandbox and workspace; stopped after it.
    #[default]
    Task,
    /// Started once for the whole run, before the first task, confined in a folder of its own;
    /// its tools are shared by every task that declares it; stopped after the last task.
    Run,
}

/// One MCP server: a `command` speaking MCP on stdio, or a streamable-HTTP `url`.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct McpServerConfig {
    /// The program of a stdio server (looked up on the task's `PATH`; runs in the workspace).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    /// Its arguments.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// Variables added to the stdio server's environment (on top of the task's allowlisted ones).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The endpoint of a streamable-HTTP server, instead of `command`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// `task` (default: one per task attempt, in its sandbox) or `run`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub scope: Option<McpScope>,
    /// Limit of one tool call, e.g. `60s` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout: Option<String>,
    /// Limit of the start (handshake and tool list), e.g. `30s` (the default).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub startup_timeout: Option<String>,
    /// HTTP headers sent to a `url` server; values may use `${VAR}` (expanded from dracode's
    /// environment when the server is started, and masked in everything dracode writes).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub headers: BTreeMap<String, String>,
    /// The variable holding a bearer token for a `url` server (`Authorization: Bearer …`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bearer_token_env_var: Option<String>,
    /// OAuth for a `url` server: a client's credentials, a person's grant (`dracode mcp login`)
    /// or a workload's identity token (see `grant`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oauth: Option<McpOAuth>,
    /// The protocol version to speak (`2026-07-28`, `2025-11-25`, `2025-06-18`, `2025-03-26`);
    /// without it dracode negotiates, newest first.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// How a request for user input is answered: `decline` (the default) or `accept_defaults`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub elicitation: Option<McpElicitation>,
}

impl McpServerConfig {
    /// The per-call limit.
    pub fn call_timeout(&self) -> Duration {
        self.timeout.as_deref().and_then(|t| dracode_input::duration::parse_positive(t).ok()).unwrap_or(DEFAULT_CALL_TIMEOUT)
    }

    /// The start limit.
    pub fn startup_timeout(&self) -> Duration {
        self.startup_timeout.as_deref().and_then(|t| dracode_input::duration::parse_positive(t).ok()).unwrap_or(DEFAULT_STARTUP_TIMEOUT)
    }

    /// Every problem of server `name`'s settings, as `(field, message)`, the field under
    /// `mcp_servers.NAME`.
    pub fn problems(&self, name: &str) -> Vec<(String, String)> {
        let mut out = Vec::new();
        let mut push = |field: &str, message: String| {
            let path = if field.is_empty() { format!("mcp_servers.{name}") } else { format!("mcp_servers.{name}.{field}") };
            let message = format!("`{path}`: {message}");
            out.push((path, message));
        };
        if !valid_server_name(name) {
            push("", format!("invalid server name {name:?}: use letters, digits, '_' and '-' only (its tools are called {name}__TOOL)"));
        }
        match (&self.command, &self.url) {
            (None, None) => push("command", "set `command` (a stdio server) or `url` (a streamable-HTTP server)".into()),
            (Some(_), Some(_)) => push("url", "set either `command` or `url`, not both".into()),
            (Some(c), None) if c.trim().is_empty() => push("command", "is empty".into()),
            (None, Some(u)) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                push("url", format!("{u:?} is not an http:// or https:// URL"));
            }
            _ => {}
        }
        if self.url.is_some() && !(self.args.is_empty() && self.env.is_empty()) {
            push("args", "`args` and `env` apply to a `command` server only".into());
        }
        let url_only = [
            ("headers", !self.headers.is_empty()),
            ("bearer_token_env_var", self.bearer_token_env_var.is_some()),
            ("oauth", self.oauth.is_some()),
        ];
        if let (Some(_), Some((field, _))) = (&self.command, url_only.iter().find(|(_, set)| *set)) {
            push(field, "`headers`, `bearer_token_env_var` and `oauth` apply to a `url` server only (give a `command` server its credentials in `env`)".into());
        }
        for key in self.headers.keys().filter(|k| reqwest::header::HeaderName::try_from(k.as_str()).is_err()) {
            push("headers", format!("{key:?} is not an HTTP header name"));
        }
        if let Some(var) = self.bearer_token_env_var.as_deref().filter(|v| v.is_empty() || v.contains(['=', '\0', '$'])) {
            push("bearer_token_env_var", format!("{var:?} is not a variable name (write the name, not `${{…}}`)"));
        }
        for (field, message) in self.oauth.iter().flat_map(McpOAuth::problems) {
            push(field, message);
        }
        if let Some(version) = self.protocol_version.as_deref().filter(|v| !super::protocol::SUPPORTED.contains(v)) {
            push("protocol_version", format!("{version:?} is not one of {}", super::protocol::SUPPORTED.join(", ")));
        }
        for (field, value) in [("timeout", &self.timeout), ("startup_timeout", &self.startup_timeout)] {
            if let Some(Err(e)) = value.as_deref().map(dracode_input::duration::parse_positive) {
                push(field, e.to_string());
            }
        }
        for key in self.env.keys().filter(|k| k.is_empty() || k.contains(['=', '\0'])) {
            push("env", format!("{key:?} is not a variable name"));
        }
        out
    }
}

impl McpServerConfig {
    /// A `url` server's credentials with `${VAR}` expanded from `env` (dracode's own
    /// environment); `Err` names what is configured but empty.
    pub fn credentials(&self, name: &str, env: &BTreeMap<String, String>) -> Result<super::http::Credentials, CredentialsError> {
        let expand = |text: &str| dracode_input::expand_vars(text, env);
        let headers = self.headers.iter().map(|(k, v)| (k.clone(), expand(v))).collect();
        let bearer = match &self.bearer_token_env_var {
            Some(var) => match env.get(var).filter(|v| !v.trim().is_empty()) {
                Some(token) => Some(token.trim().to_string()),
                None => return Err(CredentialsError::BearerUnset { name: name.to_string(), var: var.clone() }),
            },
            None => None,
        };
        let oauth = self.oauth.as_ref().map(|o| o.client(name, env)).transpose()?;
        Ok(super::http::Credentials { headers, bearer, oauth })
    }

    /// The client `dracode mcp login NAME` authorizes as: `oauth` (or none) expanded from `env`,
    /// without its refresh token (which is what the login is for).
    pub fn login_credentials(&self, name: &str, env: &BTreeMap<String, String>) -> Result<super::oauth::ClientCredentials, SettingsError> {
        self.oauth.clone().unwrap_or_default().login_client(name, env)
    }

    /// The secret values of its credentials (header values, token, client secret), expanded
    /// from `env`, for masking.
    pub fn secret_values(&self, env: &BTreeMap<String, String>) -> Vec<String> {
        let mut out: Vec<String> = self.headers.values().map(|v| dracode_input::expand_vars(v, env)).collect();
        // `Bearer ${TOKEN}`: the token on its own too.
        let words: Vec<String> = out.iter().flat_map(|v| v.split_whitespace().skip(1).map(str::to_string)).collect();
        out.extend(words);
        out.extend(self.bearer_token_env_var.as_ref().and_then(|var| env.get(var)).cloned());
        out.extend(self.oauth.iter().flat_map(|o| o.secret_values(env)));
        out.retain(|v| v.trim().len() >= dracode_secrets::MIN_SECRET_LEN);
        out
    }
}

/// `[A-Za-z0-9_-]{1,32}`: the server part of a tool name must leave room for the tool's own.
pub fn valid_server_name(name: &str) -> bool {
    !name.is_empty() && name.len() <= 32 && name.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_server_needs_exactly_one_of_command_and_url() {
        let none = McpServerConfig::default();
        assert_eq!(none.problems("fs")[0].0, "mcp_servers.fs.command");
        let both = McpServerConfig { command: Some("x".into()), url: Some("http://127.0.0.1:1/mcp".into()), ..Default::default() };
        assert_eq!(both.problems("fs")[0].0, "mcp_servers.fs.url");
        let stdio = McpServerConfig { command: Some("npx".into()), ..Default::default() };
        assert!(stdio.problems("fs").is_empty());
    }

    #[test]
    fn credentials_belong_to_url_servers_and_versions_are_known_ones() {
        let stdio = McpServerConfig {
            command: Some("x".into()),
            headers: BTreeMap::from([("X-Key".into(), "v".into())]),
            protocol_version: Some("2024-01-01".into()),
            ..Default::default()
        };
        let fields: Vec<String> = stdio.problems("s").into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["mcp_servers.s.headers", "mcp_servers.s.protocol_version"]);
        let web = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: BTreeMap::from([("bad header".into(), "v".into())]),
            bearer_token_env_var: Some("${TOKEN}".into()),
            ..Default::default()
        };
        let fields: Vec<String> = web.problems("w").into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["mcp_servers.w.headers", "mcp_servers.w.bearer_token_env_var"]);
    }

    #[test]
    fn credentials_are_expanded_from_the_environment_and_listed_for_masking() {
        let env = BTreeMap::from([("K".to_string(), "value-of-k".to_string()), ("T".to_string(), "the-token".to_string())]);
        let web = McpServerConfig {
            url: Some("http://127.0.0.1:1/mcp".into()),
            headers: BTreeMap::from([("Authorization".into(), "Bearer ${K}".into())]),
            bearer_token_env_var: Some("T".into()),
            ..Default::default()
        };
        let creds = web.credentials("w", &env).unwrap();
        assert_eq!((creds.headers[0].1.as_str(), creds.bearer.as_deref()), ("Bearer value-of-k", Some("the-token")));
        assert_eq!(web.secret_values(&env), ["Bearer value-of-k", "value-of-k", "the-token"]);
        let missing = web.credentials("w", &BTreeMap::new()).err().unwrap();
        assert_eq!(missing.to_string(), "`mcp_servers.w.bearer_token_env_var`: T is not set");
    }

    #[test]
    fn names_and_timeouts_are_checked_and_the_run_scope_is_accepted() {
        let server =
            McpServerConfig { command: Some("x".into()), timeout: Some("soon".into()), scope: Some(McpScope::Run), ..Default::default() };
        let fields: Vec<String> = server.problems("a.b").into_iter().map(|(f, _)| f).collect();
        assert_eq!(fields, ["mcp_servers.a.b", "mcp_servers.a.b.timeout"]);
    }

    #[test]
    fn a_persons_grant_is_checked_expanded_and_its_refresh_token_masked() {
        let oauth = |o: McpOAuth| McpServerConfig { url: Some("http://127.0.0.1:1/mcp".into()), oauth: Some(o), ..Default::default() };
        let fields = |o: McpOAuth| oauth(o).problems("w").into_iter().map(|(f, _)| f).collect::<Vec<_>>();
        assert!(fields(McpOAuth::default()).is_empty());
        let orphan = McpOAuth { refresh_token_env_var: Some("R".into()), ..Default::default() };
        assert_eq!(fields(orphan), ["mcp_servers.w.oauth.client_id"]);
        let plain = McpOAuth { client_metadata_url: Some("http://x/c.json".into()), client_secret: Some("s".into()), ..Default::default() };
        assert_eq!(fields(plain), ["mcp_servers.w.oauth.client_id", "mcp_servers.w.oauth.client_metadata_url"]);
        let ci = oauth(McpOAuth { client_id: "c".into(), refresh_token_env_var: Some("R".into()), ..Default::default() });
        let unset = ci.credentials("w", &BTreeMap::new()).err().unwrap().to_string();
        assert!(unset.contains("`mcp_servers.w.oauth.refresh_token_env_var`: R is not set (run `dracode mcp login w`"), "{unset}");
        let env = BTreeMap::from([("R".to_string(), "rt-long-enough-value".to_string())]);
        let creds = ci.credentials("w", &env).unwrap().oauth.unwrap();
        assert!(creds.for_person() && creds.refresh_token.as_deref() == Some("rt-long-enough-value"));
        assert_eq!(ci.secret_values(&env), ["rt-long-enough-value"]);
    }
}
