//! OAuth for a person once and for CI after, through the real binary against a local
//! authorization server and the MCP server behind it (`support::oauth_server`): `dracode mcp
//! login` completes the authorization code flow with PKCE headlessly (the server approves at
//! once), refusing a wrong `iss` or `state`, registering itself when no client id is given; a
//! `dracode run` then uses the refresh token, refreshes when the server expires the access
//! token (with the rotated refresh token), steps up on 403 `insufficient_scope`, and no token
//! reaches the output folder or the terminal.

use super::mcp_protocol::{assert_nowhere, run_with};
use super::mcp_servers::{TASK, configure, project, tool_answer};
use crate::support::cli::{dracode, finished};
use crate::support::oauth_server::{Flaw, OAuthServer};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use serde_json::{Value, json};
use std::path::Path;

/// Runs `dracode mcp login web --no-browser` in `dir`: exit code, stdout, stderr.
async fn login(dir: &Path) -> (i32, String, String) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).args(["mcp", "login", "web", "--no-browser"]).output().unwrap();
        let text = |b: &[u8]| String::from_utf8_lossy(b).into_owned();
        (output.status.code().unwrap_or(-1), text(&output.stdout), text(&output.stderr))
    })
    .await
    .unwrap()
}

fn write_config(dir: &Path, server: &OAuthServer, oauth: &str) {
    std::fs::write(dir.join("dracode.toml"), format!("[mcp_servers.web]\nurl = \"{}\"\noauth = {oauth}\n", server.mcp_url())).unwrap();
}

/// Runs the task against server `web` at `url` (2025-11-25) with a pre-registered client and
/// the refresh token `seeded` in `MCP_REFRESH`; it must pass. What was printed, and the events.
async fn run_refreshing(dir: &Path, llm: &OpenAiServer, url: &str, seeded: &str) -> (String, Vec<Value>) {
    let servers = format!(
        "[mcp_servers.web]\nurl = \"{url}\"\nprotocol_version = \"2025-11-25\"\noauth = {{ client_id = \"pre-client\", refresh_token_env_var = \"MCP_REFRESH\" }}\n\n"
    );
    configure(dir, llm, &format!("{servers}{TASK}"));
    let (code, printed, all) = run_with(dir, &[("MCP_REFRESH", seeded)]).await;
    assert_eq!(code, 0, "{printed}");
    assert_eq!(finished(&all, "t")["status"], "passed");
    (printed, all)
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_login_completes_the_code_flow_headlessly_and_prints_the_refresh_token_and_the_config() {
    let server = OAuthServer::start(Flaw::None, 10).await;
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), &server, "{ client_id = \"pre-client\" }");
    let (code, stdout, stderr) = login(tmp.path()).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    let refresh = server.seen(|s| s.refresh_issued.clone());
    assert_eq!(refresh.len(), 1, "{stdout}");
    assert!(stdout.contains(&refresh[0]), "{stdout}");
    assert!(
        stdout.contains("refresh_token_env_var = \"MCP_WEB_REFRESH_TOKEN\"") && stdout.contains("client_id = \"pre-client\""),
        "{stdout}"
    );
    let log = server.seen(|s| s.log.clone());
    assert!(log.contains(&"pkce ok".to_string()) && !log.iter().any(|l| l == "register"), "{log:?}");
    let resource = format!("resource={}", server.mcp_url());
    assert!(log.iter().any(|l| l.starts_with("authorize scope=mcp:read offline_access") && l.ends_with(&resource)), "{log:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_login_refuses_a_redirect_with_a_wrong_iss_or_state_before_asking_for_a_token() {
    for (flaw, why) in
        [(Flaw::WrongIss, "comes from issuer http://evil.example"), (Flaw::WrongState, "`state` is not the one dracode sent")]
    {
        let server = OAuthServer::start(flaw, 10).await;
        let tmp = tempfile::tempdir().unwrap();
        write_config(tmp.path(), &server, "{ client_id = \"pre-client\" }");
        let (code, stdout, stderr) = login(tmp.path()).await;
        assert_eq!(code, 1, "{stdout}{stderr}");
        assert!(stderr.contains("MCP server \"web\": OAuth login failed") && stderr.contains(why), "{stderr}");
        assert!(server.seen(|s| s.issued.is_empty()) && stdout.is_empty(), "{stdout}");
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_login_registers_dracode_when_no_client_id_is_given() {
    let server = OAuthServer::start(Flaw::None, 10).await;
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), &server, "{}");
    let (code, stdout, stderr) = login(tmp.path()).await;
    assert_eq!(code, 0, "{stdout}{stderr}");
    assert!(server.seen(|s| s.log.contains(&"register".to_string())));
    assert!(stdout.contains("registered itself as client dyn-client-") && stdout.contains("client_id = \"dyn-client-"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_refreshes_its_token_as_the_server_expires_it_steps_up_and_no_token_reaches_an_artifact() {
    // An access token is good for 2 requests: the run must refresh (with each rotated refresh
    // token in turn: a used one is refused) and finally re-authorize for `mcp:write`.
    let server = OAuthServer::start(Flaw::None, 2).await;
    let seeded = server.seed_refresh_token("pre-client", "mcp:read offline_access");
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "web__whoami", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c2", "web__whoami", json!({}), Tokens::new(10, 1)),
        ScriptedReply::tool_call("c3", "web__write", json!({}), Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    let (printed, _) = run_refreshing(&dir, &llm, &server.mcp_url(), &seeded).await;
    let answers = llm.requests();
    assert!(tool_answer(&answers[2], "c2").starts_with("whoami done with scope mcp:read"), "{:?}", answers[2]);
    assert_eq!(tool_answer(&answers[3], "c3"), "write done with scope mcp:read offline_access mcp:write");
    let log = server.seen(|s| s.log.clone());
    let refreshes = log.iter().filter(|l| *l == "refresh").count();
    assert!(refreshes >= 2 && !log.iter().any(|l| l == "refresh refused"), "{log:?}");
    assert!(
        log.iter().any(|l| l == "403") && log.iter().any(|l| l.starts_with("authorize scope=mcp:read offline_access mcp:write")),
        "{log:?}"
    );
    let issued = server.seen(|s| s.issued.clone());
    let secrets: Vec<&str> = issued.iter().map(String::as_str).collect();
    assert_nowhere(&dir.join("out"), &printed, &secrets);
}

#[tokio::test(flavor = "multi_thread")]
async fn tokens_fetched_at_run_time_join_the_runs_masking_wherever_they_turn_up() {
    // The server echoes the access token (as is and in base64) into a tool result, and the model
    // then repeats every token the server could have issued: none may reach an artifact or the
    // terminal, though dracode learned them only during the run.
    let server = OAuthServer::start(Flaw::None, 10).await;
    let seeded = server.seed_refresh_token("pre-client", "mcp:read offline_access");
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let guesses: Vec<String> = (1..5).flat_map(|n| [format!("at-{n}-Vb3nQ8sYt5Hc"), format!("rt-{n}-Kq7vW2mZ9xLp")]).collect();
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "web__echo", json!({}), Tokens::new(10, 1)),
        ScriptedReply::text(&format!("the tokens: {}", guesses.join(" ")), Tokens::new(10, 1)),
    ])
    .await;
    let servers = format!(
        "[mcp_servers.web]\nurl = \"{}\"\noauth = {{ client_id = \"pre-client\", refresh_token_env_var = \"MCP_REFRESH\" }}\n\n",
        server.mcp_url()
    );
    configure(&dir, &llm, &format!("{servers}{TASK}"));
    let (code, printed, all) = run_with(&dir, &[("MCP_REFRESH", &seeded)]).await;
    assert_eq!(code, 0, "{printed}");
    let echoed = tool_answer(&llm.requests()[1], "c1");
    assert!(echoed.starts_with("you sent Authorization: Bearer [REDACTED] (") && echoed.ends_with("[REDACTED])"), "{echoed}");
    let issued = server.seen(|s| s.issued.clone());
    assert!(issued.iter().any(|t| t.starts_with("at-")) && issued.iter().any(|t| t.starts_with("rt-")), "{issued:?}");
    assert!(issued.iter().all(|t| guesses.contains(t)), "{issued:?}");
    let transcript = std::fs::read_to_string(dir.join("out/transcripts/t.json")).unwrap();
    let repeated = transcript.lines().find(|l| l.contains("the tokens: ")).unwrap_or_default();
    assert!(repeated.contains("[REDACTED]") && transcript.contains("Bearer [REDACTED]"), "{transcript}");
    assert!(all.iter().any(|e| e.to_string().contains("Bearer [REDACTED]")), "results.jsonl holds the tool call");
    let secrets: Vec<&str> = issued.iter().map(String::as_str).collect();
    assert_nowhere(&dir.join("out"), &printed, &secrets);
}

#[test]
fn a_refresh_token_variable_that_is_not_set_names_the_server_and_the_login_to_run() {
    let (tmp, _repo) = project();
    std::fs::write(
        tmp.path().join("dracode.toml"),
        "provider = \"mock\"\n[providers.mock]\ntype = \"openai\"\nbase_url = \"http://127.0.0.1:9\"\nmodel = \"m\"\n\
         [mcp_servers.web]\nurl = \"http://127.0.0.1:9/mcp\"\noauth = { refresh_token_env_var = \"MCP_REFRESH\" }\n",
    )
    .unwrap();
    std::fs::write(tmp.path().join("tasks.toml"), TASK).unwrap();
    let output = dracode(tmp.path()).args(["validate", "tasks.toml", "--offline"]).output().unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("dracode.toml") && stderr.contains("`mcp_servers.web.oauth.client_id`: a refresh token belongs to a client"),
        "{stderr}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn mcp_login_waits_for_the_persons_browser_on_the_loopback_redirect() {
    use std::io::BufRead;
    let server = OAuthServer::start(Flaw::LoginPage, 10).await;
    let tmp = tempfile::tempdir().unwrap();
    write_config(tmp.path(), &server, "{ client_id = \"pre-client\" }");
    let mut child = std::process::Command::new(assert_cmd::cargo::cargo_bin("dracode"))
        .current_dir(tmp.path())
        .env_clear()
        .env("PATH", std::env::var("PATH").unwrap_or_default())
        .env("HOME", tmp.path())
        .args(["mcp", "login", "web", "--no-browser"])
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let stderr = child.stderr.take().unwrap();
    // The person: reads the URL dracode prints, approves at the authorization server, and their
    // browser follows its redirect to dracode's listener.
    let url = tokio::task::spawn_blocking(move || {
        let lines = std::io::BufReader::new(stderr).lines();
        lines.map_while(Result::ok).find_map(|l| l.trim().strip_prefix("http").map(|rest| format!("http{rest}")))
    })
    .await
    .unwrap()
    .expect("dracode printed the authorization URL");
    let _ = rustls::crypto::ring::default_provider().install_default();
    let browser = reqwest::Client::builder().redirect(reqwest::redirect::Policy::none()).build().unwrap();
    let approved = browser.get(&url).header("x-approve", "yes").send().await.unwrap();
    let back = approved.headers()["location"].to_str().unwrap().to_string();
    assert!(back.starts_with("http://127.0.0.1:") && back.contains("/callback?code="), "{back}");
    let page = browser.get(&back).send().await.unwrap().text().await.unwrap();
    assert!(page.contains("authorization received"), "{page}");
    let output = tokio::task::spawn_blocking(move || child.wait_with_output().unwrap()).await.unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert_eq!(output.status.code(), Some(0), "{stdout}");
    assert!(stdout.contains(&server.seen(|s| s.refresh_issued[0].clone())), "{stdout}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_that_would_need_a_person_fails_the_task_naming_the_login_to_run() {
    let server = OAuthServer::start(Flaw::LoginPage, 10).await;
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let llm = OpenAiServer::start(vec![ScriptedReply::text("done", Tokens::new(10, 1))]).await;
    let servers = format!("[mcp_servers.web]\nurl = \"{}\"\noauth = {{ client_id = \"pre-client\" }}\n\n", server.mcp_url());
    configure(&dir, &llm, &format!("{servers}{TASK}"));
    let (code, printed, all) = run_with(&dir, &[]).await;
    assert_eq!(code, 1, "{printed}");
    let finished = finished(&all, "t");
    assert_eq!(finished["error"]["kind"], "tool", "{finished}");
    let message = finished["error"]["message"].as_str().unwrap();
    assert!(
        message.contains("MCP server \"web\" failed to start")
            && message.contains("wants a person to approve dracode: run `dracode mcp login web`")
            && message.contains("oauth.refresh_token_env_var"),
        "{message}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn an_access_token_past_its_expires_in_is_refreshed_before_it_is_used() {
    // `expires_in = 31`: dracode keeps a 30 s margin, so the token is stale after a second; the
    // model's first answer takes 1.5 s, so the tool call is made with a refreshed token without
    // a 401 (the server would still take the old one: only dracode's clock says it expired).
    let server = OAuthServer::start(Flaw::None, 100).await;
    server.set_expires_in(31);
    let seeded = server.seed_refresh_token("pre-client", "mcp:read");
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_call("c1", "web__whoami", json!({}), Tokens::new(10, 1)).with_delay(std::time::Duration::from_millis(1500)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    run_refreshing(&dir, &llm, &server.mcp_url(), &seeded).await;
    let log = server.seen(|s| s.log.clone());
    let count = |what: &str| log.iter().filter(|l| *l == what).count();
    assert_eq!((count("401"), count("refresh"), count("refresh refused")), (1, 2, 0), "{log:?}");
}
