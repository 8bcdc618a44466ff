//! MCP OAuth with workload identity and DPoP, through the real binary against a fake world on
//! 127.0.0.1 (`support::workload_idp`): GitHub Actions' OIDC endpoint, an authorization server
//! that accepts only the assertions that endpoint issued for it, and an MCP server behind it.
//! A CI job reaches the server with no stored secret: the JWT-bearer grant and token exchange,
//! with the assertion from GitHub's OIDC endpoint, a file or a variable; DPoP-bound tokens
//! with a fresh proof on every request and nonces honoured; one line when the assertion is
//! refused; and no token or assertion in anything dracode writes.

use super::mcp_protocol::assert_nowhere;
use super::mcp_servers::{TASK, configure, project, tool_answer};
use crate::support::cli::{dracode, finished, read_jsonl};
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens, ToolCall};
use crate::support::workload_idp::{Demands, OAuthWorld};
use serde_json::{Value, json};
use std::path::Path;

const REQUEST_TOKEN: &str = "gh-request-token-5f3a9c";

/// `[mcp_servers.web]` at `url` with `oauth`.
fn server(url: &str, oauth: &str) -> String {
    format!("[mcp_servers.web]\nurl = \"{url}\"\ntimeout = \"20s\"\noauth = {oauth}\n\n")
}

/// The variables of a GitHub Actions job with `permissions: id-token: write`.
fn github_env(world: &OAuthWorld) -> Vec<(String, String)> {
    vec![("ACTIONS_ID_TOKEN_REQUEST_URL".into(), world.oidc_url()), ("ACTIONS_ID_TOKEN_REQUEST_TOKEN".into(), REQUEST_TOKEN.into())]
}

/// `dracode run` of a task calling `web__echo`; returns exit code, printed text, events, and
/// what the model got back from the call.
async fn run_calling_echo(dir: &Path, oauth_server: &str, env: Vec<(String, String)>) -> (i32, String, Vec<Value>, Option<String>) {
    let llm = OpenAiServer::start(vec![
        ScriptedReply::tool_calls(vec![ToolCall::new("c1", "web__echo", json!({"text": "hi"}))], Tokens::new(10, 1)),
        ScriptedReply::text("done", Tokens::new(10, 1)),
    ])
    .await;
    configure(dir, &llm, &format!("{oauth_server}{TASK}"));
    let dir = dir.to_path_buf();
    let (code, printed, all) = tokio::task::spawn_blocking(move || {
        let output = dracode(&dir).env("OPENAI_API_KEY", "sk-test").envs(env).args(["run", "tasks.toml", "--out", "out"]).output().unwrap();
        let printed = format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr));
        let results = dir.join("out/results.jsonl");
        (output.status.code().unwrap_or(-1), printed, if results.exists() { read_jsonl(&results) } else { Vec::new() })
    })
    .await
    .unwrap();
    let answer = llm.requests().get(1).map(|r| tool_answer(r, "c1"));
    (code, printed, all, answer)
}

/// `dracode mcp-probe` of `[mcp_servers.web]` (as JSON) calling `echo`; returns exit code and
/// printed text.
async fn probe(dir: &Path, server: Value, env: Vec<(String, String)>) -> (i32, String) {
    let dir = dir.to_path_buf();
    tokio::task::spawn_blocking(move || {
        let call = "echo={\"text\":\"hi\"}";
        let output = dracode(&dir).envs(env).args(["mcp-probe", "--server", &server.to_string(), "--call", call]).output().unwrap();
        (
            output.status.code().unwrap_or(-1),
            format!("{}{}", String::from_utf8_lossy(&output.stdout), String::from_utf8_lossy(&output.stderr)),
        )
    })
    .await
    .unwrap()
}

#[tokio::test(flavor = "multi_thread")]
async fn a_ci_job_reaches_the_server_with_its_github_oidc_token_and_no_token_reaches_an_artifact() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands::default()).await;
    let oauth = "{ grant = \"jwt_bearer\", assertion = { github_oidc = {} } }";
    let (code, printed, all, answer) = run_calling_echo(&dir, &server(&world.mcp_url(), oauth), github_env(&world)).await;
    assert_eq!(code, 0, "{printed}\n{:?}", world.events());
    assert_eq!(finished(&all, "t")["status"], "passed");
    // The default audience is the authorization server's issuer; the assertion GitHub issued
    // is the one the authorization server got.
    let events = world.events();
    assert!(events.contains(&format!("oidc {}", world.issuer())), "{events:?}");
    assert!(events.contains(&"token jwt-bearer ok".to_string()), "{events:?}");
    // The server echoed the token back; the model sees it masked.
    let answer = answer.unwrap();
    assert_eq!(answer, "echo: hi [Authorization: Bearer [REDACTED]]");
    let mut secrets = world.secrets();
    secrets.push(REQUEST_TOKEN.into());
    assert_eq!(secrets.len(), 3, "one assertion, one access token, the request token");
    assert_nowhere(&dir.join("out"), &printed, &secrets);
}

#[tokio::test(flavor = "multi_thread")]
async fn the_assertion_may_come_from_a_file_or_a_variable_and_token_exchange_presents_it_as_subject_token() {
    let tmp = tempfile::tempdir().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands::default()).await;
    let file = tmp.path().join("workload.jwt");
    std::fs::write(&file, format!("{}\n", world.issue(&world.issuer()))).unwrap();
    let url = world.mcp_url();
    let cases = [
        (json!({"grant": "jwt_bearer", "assertion": {"file": file}}), vec![], "token jwt-bearer ok"),
        (
            json!({"grant": "jwt_bearer", "client_id": "ci", "assertion": {"env": "WORKLOAD_JWT"}}),
            vec![("WORKLOAD_JWT".to_string(), world.issue(&world.issuer()))],
            "token jwt-bearer ok",
        ),
        (
            json!({"grant": "token_exchange", "assertion": {"github_oidc": {}}, "audience": "mcp-tools", "requested_token_type": "access_token"}),
            github_env(&world),
            "token token-exchange ok audience=mcp-tools",
        ),
    ];
    for (oauth, env, expected) in cases {
        let before = world.events().len();
        let (code, printed) = probe(tmp.path(), json!({"url": url, "timeout": "20s", "oauth": oauth}), env).await;
        assert_eq!(code, 0, "{oauth}: {printed}\n{:?}", world.events());
        assert!(printed.contains("echo: hi [Authorization: Bearer [REDACTED]]"), "{printed}");
        assert!(world.events()[before..].contains(&expected.to_string()), "{oauth}: {:?}", world.events());
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn an_expired_token_is_replaced_with_a_fresh_oidc_token_and_a_new_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands { token_uses: Some(2), ..Demands::default() }).await;
    let oauth = json!({"grant": "jwt_bearer", "assertion": {"github_oidc": {}}});
    let (code, printed) = probe(tmp.path(), json!({"url": world.mcp_url(), "timeout": "20s", "oauth": oauth}), github_env(&world)).await;
    assert_eq!(code, 0, "{printed}\n{:?}", world.events());
    assert!(printed.contains("echo: hi [Authorization: Bearer [REDACTED]]"), "{printed}");
    let events = world.events();
    let fetched = events.iter().filter(|e| e.starts_with("oidc http")).count();
    let granted = events.iter().filter(|e| *e == "token jwt-bearer ok").count();
    assert!(fetched >= 2 && fetched == granted, "a fresh assertion for each token request: {events:?}");
    assert_eq!(world.secrets().len(), 2 * fetched, "each assertion different, each token too");
}

#[tokio::test(flavor = "multi_thread")]
async fn enterprise_managed_authorization_exchanges_the_id_token_at_the_idp_for_the_grant() {
    let tmp = tempfile::tempdir().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands::default()).await;
    let id_jag = json!({"token_url": format!("{}/idp/token", world.issuer()), "client_id": "idp-client", "subject": {"env": "ID_TOKEN"}});
    let oauth = json!({"grant": "jwt_bearer", "client_id": "xaa", "client_secret": "${XAA_SECRET}", "assertion": {"id_jag": id_jag}});
    let env = vec![("ID_TOKEN".to_string(), world.issue("idp-client")), ("XAA_SECRET".to_string(), "xaa-secret-value".to_string())];
    let (code, printed) = probe(tmp.path(), json!({"url": world.mcp_url(), "timeout": "20s", "oauth": oauth}), env).await;
    assert_eq!(code, 0, "{printed}\n{:?}", world.events());
    let events = world.events();
    let exchanged = events.iter().position(|e| e == "idp exchange ok");
    let granted = events.iter().position(|e| e == "token jwt-bearer ok client=xaa");
    assert!(exchanged.is_some() && exchanged < granted, "{events:?}");
    assert!(printed.contains("echo: hi [Authorization: Bearer [REDACTED]]"), "{printed}");
}

#[tokio::test(flavor = "multi_thread")]
async fn dpop_binds_the_token_and_every_request_proves_the_key_with_the_servers_nonces() {
    let (tmp, _repo) = project();
    let dir = tmp.path().canonicalize().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands { dpop: true, nonces: true, dpop_challenge: true, token_uses: None }).await;
    let oauth = "{ grant = \"jwt_bearer\", assertion = { github_oidc = {} } }";
    let (code, printed, all, answer) = run_calling_echo(&dir, &server(&world.mcp_url(), oauth), github_env(&world)).await;
    let events = world.events();
    assert_eq!(code, 0, "{printed}\n{events:?}");
    assert_eq!(finished(&all, "t")["status"], "passed");
    assert_eq!(answer.unwrap(), "echo: hi [Authorization: DPoP [REDACTED]]");
    // Both servers' nonces were honoured after one `use_dpop_nonce` each; the proofs of every
    // POST, the GET stream and the DELETE verified (signature, htm, htu, ath, key, fresh jti).
    assert!(!events.iter().any(|e| e.contains("refused")), "{events:?}");
    for expected in ["token jwt-bearer asked for a nonce", "token jwt-bearer ok", "mcp POST tools/call", "mcp GET ok", "mcp DELETE ok"] {
        assert!(events.contains(&expected.to_string()), "{expected}: {events:?}");
    }
    assert!(events.iter().filter(|e| e.ends_with("asked for a nonce")).count() == 2, "{events:?}");
    // A replayed proof is refused.
    assert_eq!(world.replay_last().await, 401);
    assert!(world.events().last().unwrap().ends_with("refused: replayed jti"), "{:?}", world.events());
    let mut secrets = world.secrets();
    secrets.push(REQUEST_TOKEN.into());
    assert_nowhere(&dir.join("out"), &printed, &secrets);
}

#[tokio::test(flavor = "multi_thread")]
async fn dpop_is_used_when_the_authorization_servers_metadata_offers_it() {
    let tmp = tempfile::tempdir().unwrap();
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands { dpop: true, ..Demands::default() }).await;
    let oauth = json!({"grant": "token_exchange", "assertion": {"github_oidc": {}}});
    let (code, printed) = probe(tmp.path(), json!({"url": world.mcp_url(), "timeout": "20s", "oauth": oauth}), github_env(&world)).await;
    assert_eq!(code, 0, "{printed}\n{:?}", world.events());
    assert!(printed.contains("echo: hi [Authorization: DPoP [REDACTED]]"), "{printed}");
    assert!(!world.events().iter().any(|e| e.contains("refused")), "{:?}", world.events());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_refused_assertion_or_a_job_without_id_token_is_one_line_naming_the_server_and_the_field() {
    let world = OAuthWorld::start(REQUEST_TOKEN, Demands::default()).await;
    let wrong = "{ grant = \"jwt_bearer\", assertion = { github_oidc = { audience = \"https://wrong.example\" } } }";
    let right = "{ grant = \"jwt_bearer\", assertion = { github_oidc = {} } }";
    let cases = [
        (wrong, github_env(&world), format!(
            "MCP server \"web\" failed to start: OAuth (jwt_bearer) failed: the token endpoint {}/token answered HTTP 400 (invalid_grant): the authorization server refused the GitHub OIDC token for audience \"https://wrong.example\": check `oauth.assertion` (and the trust the server grants it)",
            world.issuer()
        )),
        (right, vec![], "MCP server \"web\" failed to start: `mcp_servers.web.oauth.assertion`: ACTIONS_ID_TOKEN_REQUEST_URL and ACTIONS_ID_TOKEN_REQUEST_TOKEN are not set: GitHub Actions sets them for a job with `permissions: id-token: write`".to_string()),
    ];
    for (oauth, env, expected) in cases {
        let (tmp, _repo) = project();
        let dir = tmp.path().canonicalize().unwrap();
        let (code, printed, all, _) = run_calling_echo(&dir, &server(&world.mcp_url(), oauth), env).await;
        assert_ne!(code, 0);
        let task = finished(&all, "t");
        assert_eq!(task["error"]["kind"], "tool", "{printed}");
        assert_eq!(task["error"]["message"], expected.as_str());
    }
}

#[test]
fn bad_combinations_are_refused_before_anything_runs_naming_the_file_and_field() {
    for (oauth, field) in [
        ("{ grant = \"jwt_bearer\" }", "mcp_servers.web.oauth.assertion"),
        ("{ client_id = \"c\", client_secret = \"s\", assertion = { env = \"T\" } }", "mcp_servers.web.oauth.assertion"),
        ("{ grant = \"jwt_bearer\", assertion = { env = \"T\" }, audience = \"a\" }", "mcp_servers.web.oauth.audience"),
        (
            "{ grant = \"token_exchange\", assertion = { env = \"T\" }, subject_token_type = \"saml\" }",
            "mcp_servers.web.oauth.subject_token_type",
        ),
    ] {
        let tmp = tempfile::tempdir().unwrap();
        let manifest = format!("{}[[tasks]]\nid = \"t\"\nprompt = \"p\"\n", server("http://127.0.0.1:9/mcp", oauth));
        std::fs::write(tmp.path().join("tasks.toml"), manifest).unwrap();
        let output = dracode(tmp.path()).args(["validate", "tasks.toml"]).output().unwrap();
        let stderr = String::from_utf8_lossy(&output.stderr);
        assert_eq!(output.status.code(), Some(2), "{oauth}: {stderr}");
        assert!(stderr.contains("tasks.toml:") && stderr.contains(&format!("`{field}`")), "{oauth}: {stderr}");
    }
}
