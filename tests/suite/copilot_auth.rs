//! Copilot: device flow, token storage, token exchange and refresh, against a fake GitHub.

use crate::support::cli::{dracode, finished, read_jsonl};
use crate::support::github_server::GithubServer;
use crate::support::openai_server::{OpenAiServer, ScriptedReply, Tokens};
use dracode_llm::copilot::{Copilot, Endpoints, device_flow};
use dracode_llm::http::HttpClient;
use dracode_llm::preset::ProviderType;
use dracode_llm::{LlmRequest, Provider};
use serde_json::json;
use std::time::Duration;

fn endpoints(github: &GithubServer) -> Endpoints {
    Endpoints { github: github.url(), api: github.url(), client_id: "Iv1.test".into() }
}

#[tokio::test]
async fn the_device_flow_waits_through_pending_and_slows_down_when_told() {
    let github = GithubServer::start(
        "gho_device",
        vec![
            json!({"error": "authorization_pending"}),
            json!({"error": "slow_down", "interval": 1}),
            json!({"error": "authorization_pending"}),
        ],
        1800,
        "http://127.0.0.1:9",
    )
    .await;
    let mut shown = None;
    let token = device_flow(&HttpClient::default(), &endpoints(&github), |code| shown = Some(code.clone())).await.unwrap();
    assert_eq!(token, "gho_device");
    assert_eq!(shown.unwrap().user_code, "ABCD-1234");
    let times = github.poll_times();
    assert_eq!(times.len(), 4);
    assert!(times[1] - times[0] < Duration::from_millis(500), "interval 0 at first");
    assert!(times[3] - times[2] >= Duration::from_millis(950), "slow_down raised the interval to 1 s");
}

#[tokio::test]
async fn tokens_are_exchanged_refreshed_before_expiry_and_once_after_a_401() {
    // The chat API only accepts the second Copilot token: the first call gets a 401, the
    // provider exchanges again and retries once.
    let chat = OpenAiServer::start_with_key(
        "copilot-2",
        vec![ScriptedReply::text("one", Tokens::new(5, 1)), ScriptedReply::text("two", Tokens::new(5, 1))],
    )
    .await;
    let github = GithubServer::start("gho_ci", vec![], 120, &chat.base_url()).await;
    let resolved = crate::support::provider::resolved(ProviderType::Copilot, "https://api.githubcopilot.com", "gpt-4o", Some("gho_ci"));
    let copilot = Copilot::new(&resolved, HttpClient::default(), endpoints(&github)).unwrap();
    let req = LlmRequest { system: "s", messages: &[], tools: &[], max_tokens: None };
    assert_eq!(copilot.complete(req, &|_| {}).await.unwrap().content[0], dracode_llm::ContentBlock::text("one"));
    assert_eq!(github.exchanges(), 2, "a 401 triggers exactly one refresh");
    // The token expires in 120 s, inside the 5-minute margin: the next call refreshes first
    // (copilot-3, which the chat API refuses), then once more after the 401 (copilot-4), then
    // gives up with the auth error.
    let err = copilot.complete(req, &|_| {}).await.unwrap_err();
    assert_eq!(err.kind, dracode_llm::ErrorKind::Auth);
    assert_eq!(github.exchanges(), 4);
    let received = chat.received();
    assert!(received.iter().all(|r| r.headers.get("copilot-integration-id").map(String::as_str) == Some("vscode-chat")));
}

#[tokio::test(flavor = "multi_thread")]
async fn in_ci_an_environment_token_is_used_and_without_one_nothing_is_sent() {
    let chat = OpenAiServer::start_with_key("copilot-1", vec![ScriptedReply::text("done", Tokens::new(9, 2))]).await;
    let github = GithubServer::start("gho_env_token", vec![], 3600, &chat.base_url()).await;
    let tmp = tempfile::tempdir().unwrap();
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"c\"\nprompt = \"p\"\n",
    )
    .unwrap();
    let (dir, url) = (tmp.path().to_path_buf(), github.url());
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("GITHUB_COPILOT_TOKEN", "gho_env_token")
            .env("DRACODE_GITHUB_API_URL", &url)
            .args(["run", "tasks.toml", "--provider", "copilot", "--out", "out"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    let all = read_jsonl(&tmp.path().join("out/results.jsonl"));
    assert_eq!(finished(&all, "c")["usage"]["input_tokens"], 9);
    assert!(std::fs::read_to_string(tmp.path().join("out/results.jsonl")).unwrap().find("gho_env_token").is_none());

    // Pointed at the fake GitHub, so an exchange would be counted; HOME is the scratch folder,
    // which holds no stored token.
    let (dir, url) = (tmp.path().to_path_buf(), github.url());
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("DRACODE_GITHUB_API_URL", &url)
            .args(["run", "tasks.toml", "--provider", "copilot", "--out", "none"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(5), "could not be judged");
    let all = read_jsonl(&tmp.path().join("none/results.jsonl"));
    let task = finished(&all, "c");
    assert_eq!(task["status"], "not_configured");
    assert!(task["error"]["message"].as_str().unwrap().contains("dracode auth copilot"));
    assert_eq!(github.exchanges(), 1, "no exchange without a token");
    assert_eq!(chat.received().len(), 1, "no chat request without a token");
}

#[tokio::test]
async fn the_tasks_of_a_run_share_one_copilot_token() {
    let chat = OpenAiServer::start_with_key(
        "copilot-1",
        vec![ScriptedReply::text("a", Tokens::new(5, 1)), ScriptedReply::text("b", Tokens::new(5, 1))],
    )
    .await;
    let github = GithubServer::start("gho_shared", vec![], 3600, &chat.base_url()).await;
    let resolved = crate::support::provider::resolved(ProviderType::Copilot, "https://api.githubcopilot.com", "gpt-4o", Some("gho_shared"));
    let req = LlmRequest { system: "s", messages: &[], tools: &[], max_tokens: None };
    for _ in 0..2 {
        // A provider per task, as `dracode run` builds them.
        let task = Copilot::new(&resolved, HttpClient::default(), endpoints(&github)).unwrap();
        task.complete(req, &|_| {}).await.unwrap();
    }
    assert_eq!(github.exchanges(), 1);
}

#[tokio::test(flavor = "multi_thread")]
async fn dracode_auth_copilot_prints_the_code_and_stores_the_token_privately() {
    let chat = OpenAiServer::start_with_key("copilot-1", vec![ScriptedReply::text("done", Tokens::new(9, 2))]).await;
    let github = GithubServer::start("gho_from_cli", vec![json!({"error": "authorization_pending"})], 3600, &chat.base_url()).await;
    let tmp = tempfile::tempdir().unwrap();
    let (dir, url) = (tmp.path().to_path_buf(), github.url());
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir).env("XDG_CONFIG_HOME", dir.join("cfg")).env("DRACODE_GITHUB_URL", &url).args(["auth", "copilot"]).output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert_eq!(output.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("ABCD-1234") && stderr.contains("https://github.com/login/device"), "{stderr}");
    let path = tmp.path().join("cfg/dracode/copilot.json");
    use std::os::unix::fs::PermissionsExt;
    assert_eq!(std::fs::metadata(&path).unwrap().permissions().mode() & 0o777, 0o600);
    assert!(std::fs::read_to_string(&path).unwrap().contains("gho_from_cli"));
    assert!(!stderr.contains("gho_from_cli"), "the token is never printed");

    // `dracode run` then finds the stored token: the provider counts as configured.
    std::fs::create_dir(tmp.path().join("ws")).unwrap();
    std::fs::write(
        tmp.path().join("tasks.toml"),
        "[defaults]\nrepo = \"ws\"\nisolation = \"copy\"\nrequire_change = false\n[[tasks]]\nid = \"c\"\nprompt = \"p\"\n",
    )
    .unwrap();
    let (dir, url) = (tmp.path().to_path_buf(), github.url());
    let output = tokio::task::spawn_blocking(move || {
        dracode(&dir)
            .env("XDG_CONFIG_HOME", dir.join("cfg"))
            .env("DRACODE_GITHUB_API_URL", &url)
            .args(["run", "tasks.toml", "--provider", "copilot", "--out", "out"])
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert_eq!(output.status.code(), Some(0), "{}", String::from_utf8_lossy(&output.stderr));
    assert_eq!(github.exchanges(), 1);
    assert_eq!(chat.received().len(), 1);
}
