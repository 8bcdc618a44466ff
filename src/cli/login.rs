//! The commands that get credentials or probe a server: `mcp login`, `auth copilot`, `mcp-probe`.

use super::{config_files_line, usage_error};
use crate::config::Config;
use anyhow::Context;
use dracode_results::exit_codes;
use std::collections::BTreeMap;
use std::io::IsTerminal;
use std::path::Path;

/// `dracode mcp-probe` (hidden): see [`dracode_mcp::probe`].
pub(super) fn mcp_probe(
    server: &str,
    name: &str,
    calls: &[String],
    call_each: Option<&str>,
    schemas: bool,
    cwd: &Path,
) -> anyhow::Result<i32> {
    let config: dracode_mcp::McpServerConfig = serde_json::from_str(server).context("--server")?;
    if let Some((_, problem)) = config.problems(name).into_iter().next() {
        anyhow::bail!("{problem}");
    }
    let mut plan = dracode_mcp::probe::ProbePlan::parse(calls, call_each).map_err(anyhow::Error::msg)?;
    plan.schemas = schemas;
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    let mut stdout = std::io::stdout();
    match runtime.block_on(dracode_mcp::probe::run(name, &config, &plan, cwd, http.get().clone(), &mut stdout)) {
        Ok(()) => Ok(exit_codes::OK),
        Err(e) => {
            eprintln!("error: {e}");
            Ok(1)
        }
    }
}

/// `dracode mcp login SERVER`: a person's OAuth grant for a `url` server of the config
/// ([`dracode_mcp::oauth::flow::login`]); prints what CI needs.
pub(super) fn mcp_login(
    name: &str,
    no_browser: bool,
    config: Option<&Path>,
    cwd: &Path,
    env: &BTreeMap<String, String>,
) -> anyhow::Result<i32> {
    let config = match Config::load_for(cwd, &[], config, env) {
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let servers = config.defaults.mcp_servers.clone().unwrap_or_default();
    let Some(server) = servers.get(name) else {
        let known: Vec<&str> = servers.keys().map(String::as_str).collect();
        let files = config_files_line(&config.files);
        return usage_error(&format!("no MCP server {name:?} in the config ({files}); its servers: {}", known.join(", ")));
    };
    let Some(url) = server.url.clone() else {
        return usage_error(&format!("`mcp_servers.{name}`: only a `url` server has an OAuth login"));
    };
    let creds = match server.login_credentials(name, env) {
        Ok(c) if !c.for_person() => {
            return usage_error(&format!(
                "`mcp_servers.{name}.oauth` has a client secret or key: it uses the client-credentials grant, no login"
            ));
        }
        Ok(c) => c,
        Err(e) => return usage_error(&e),
    };
    let open = move |address: &str| {
        eprintln!("To authorize dracode for MCP server {name}, open:\n  {address}\nWaiting for the browser to come back…");
        let opener = if cfg!(target_os = "macos") { "open" } else { "xdg-open" };
        if !no_browser {
            let _ = std::process::Command::new(opener)
                .arg(address)
                .stdout(std::process::Stdio::null())
                .stderr(std::process::Stdio::null())
                .spawn();
        }
    };
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build()?;
    match runtime.block_on(dracode_mcp::oauth::flow::login(http.get(), &url, name, &creds, &open)) {
        Ok(login) => Ok(print_login(name, &url, server.oauth.clone().unwrap_or_default(), &login)),
        Err(e) => {
            eprintln!("error: MCP server {name:?}: OAuth login failed: {e}");
            Ok(exit_codes::TASKS_FAILED)
        }
    }
}

/// What CI needs after a login: the refresh token (and a registered client's secret) to store
/// as secrets, and the `oauth` line using them.
pub(super) fn print_login(name: &str, url: &str, mut oauth: dracode_mcp::McpOAuth, login: &dracode_mcp::oauth::flow::Login) -> i32 {
    let Some(refresh) = &login.refresh_token else {
        eprintln!(
            "error: MCP server {name:?}: the authorization server gave no refresh token, so CI could not renew access (ask for scope `offline_access` with `oauth.scope`?)"
        );
        return exit_codes::TASKS_FAILED;
    };
    let prefix = format!("MCP_{}", name.to_uppercase().replace('-', "_"));
    let var = oauth.refresh_token_env_var.clone().unwrap_or_else(|| format!("{prefix}_REFRESH_TOKEN"));
    println!("Store this refresh token as the CI secret {var}:\n  {refresh}");
    if let Some(client) = &login.registered {
        oauth.client_id = client.id.clone();
        println!("dracode registered itself as client {} (keep it: the refresh token belongs to it).", client.id);
        if let Some(secret) = &client.secret {
            println!("Store its client secret as the CI secret {prefix}_CLIENT_SECRET:\n  {secret}");
            oauth.client_secret = Some(format!("${{{prefix}_CLIENT_SECRET}}"));
        }
    }
    oauth.refresh_token_env_var = Some(var);
    let table = toml::Value::try_from(&oauth).map(|v| v.to_string()).unwrap_or_default();
    println!("\nand in dracode.toml:\n[mcp_servers.{name}]\nurl = {url:?}\n[mcp_servers.{name}.oauth]\n{table}");
    println!(
        "A refresh token the server rotates is used for the rest of a run, but cannot be written back to the CI secret: if the server rotates them, run this again when CI's is refused."
    );
    exit_codes::OK
}

/// `dracode auth copilot`: GitHub's device flow; the token is stored with mode 0600.
pub(super) fn auth_copilot(env: &BTreeMap<String, String>) -> anyhow::Result<i32> {
    use dracode_llm::copilot;
    let endpoints = copilot::Endpoints::from_env(env);
    let http = dracode_llm::http::HttpClient::default();
    let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build()?;
    let token = runtime.block_on(copilot::device_flow(&http, &endpoints, |code| {
        eprintln!("To authorize dracode for GitHub Copilot, open {} and enter the code {}", code.verification_uri, code.user_code);
        if !std::io::stdin().is_terminal() {
            eprintln!("(no terminal here: open the address on any machine; this waits for the approval)");
        }
        eprintln!("Waiting for approval…");
    }));
    match token {
        Ok(token) => {
            let path = dracode_llm::github_token::store_token(env, &token).context("cannot store the token")?;
            eprintln!("Stored the GitHub token in {} (mode 0600). In CI, set GITHUB_COPILOT_TOKEN instead.", path.display());
            Ok(exit_codes::OK)
        }
        Err(e) => {
            eprintln!("error: {e}");
            Ok(exit_codes::TASKS_FAILED)
        }
    }
}
