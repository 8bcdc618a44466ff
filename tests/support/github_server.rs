//! A fake GitHub on 127.0.0.1 for Copilot: the OAuth device flow (`/login/device/code`,
//! `/login/oauth/access_token` answering from a script of `authorization_pending`,
//! `slow_down`, … then a token) and the Copilot token exchange
//! (`/copilot_internal/v2/token`, which requires `Authorization: token <github token>` and a
//! `User-Agent`, as GitHub's API does, and hands out numbered Copilot tokens pointing at a chat
//! API).

use serde_json::{Value, json};
use std::collections::VecDeque;
use std::sync::{Arc, Mutex};
use std::time::Instant;
use wiremock::matchers::any;
use wiremock::{Mock, MockServer, Request, Respond, ResponseTemplate};

struct State {
    github_token: String,
    polls: Mutex<VecDeque<Value>>,
    poll_times: Mutex<Vec<Instant>>,
    exchanges: Mutex<u32>,
    expires_in: u64,
    chat_api: String,
}

/// A running fake GitHub.
pub struct GithubServer {
    server: MockServer,
    state: Arc<State>,
}

impl GithubServer {
    /// Issues `github_token` after `polls` (error answers such as
    /// `{"error":"slow_down","interval":1}`); Copilot tokens `copilot-1`, `copilot-2`, … live
    /// `expires_in` seconds and point at `chat_api`.
    pub async fn start(github_token: &str, polls: Vec<Value>, expires_in: u64, chat_api: &str) -> Self {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
        let server = MockServer::builder().listener(listener).start().await;
        let state = Arc::new(State {
            github_token: github_token.into(),
            polls: Mutex::new(polls.into()),
            poll_times: Mutex::new(Vec::new()),
            exchanges: Mutex::new(0),
            expires_in,
            chat_api: chat_api.into(),
        });
        Mock::given(any()).respond_with(Responder(state.clone())).mount(&server).await;
        GithubServer { server, state }
    }

    /// For `DRACODE_GITHUB_URL` and `DRACODE_GITHUB_API_URL`.
    pub fn url(&self) -> String {
        self.server.uri()
    }

    /// When each access-token poll arrived.
    pub fn poll_times(&self) -> Vec<Instant> {
        self.state.poll_times.lock().unwrap().clone()
    }

    /// Copilot tokens handed out.
    pub fn exchanges(&self) -> u32 {
        *self.state.exchanges.lock().unwrap()
    }
}

struct Responder(Arc<State>);

impl Respond for Responder {
    fn respond(&self, request: &Request) -> ResponseTemplate {
        let body: Value = serde_json::from_slice(&request.body).unwrap_or(Value::Null);
        match request.url.path() {
            "/login/device/code" => {
                if body["client_id"].as_str().is_none_or(str::is_empty) {
                    return ResponseTemplate::new(400).set_body_json(json!({"error": "unauthorized_client"}));
                }
                ResponseTemplate::new(200).set_body_json(json!({
                    "device_code": "dev-123", "user_code": "ABCD-1234",
                    "verification_uri": "https://github.com/login/device", "expires_in": 900, "interval": 0
                }))
            }
            "/login/oauth/access_token" => {
                self.0.poll_times.lock().unwrap().push(Instant::now());
                if body["device_code"] != "dev-123" || body["grant_type"] != "urn:ietf:params:oauth:grant-type:device_code" {
                    return ResponseTemplate::new(200).set_body_json(json!({"error": "incorrect_device_code"}));
                }
                match self.0.polls.lock().unwrap().pop_front() {
                    Some(answer) => ResponseTemplate::new(200).set_body_json(answer),
                    None => ResponseTemplate::new(200)
                        .set_body_json(json!({"access_token": self.0.github_token, "token_type": "bearer", "scope": "read:user"})),
                }
            }
            "/copilot_internal/v2/token" => {
                let header = |name: &str| request.headers.get(name).and_then(|v| v.to_str().ok()).unwrap_or_default().to_string();
                if header("user-agent").is_empty() {
                    return ResponseTemplate::new(403).set_body_string(
                        "Request forbidden by administrative rules. Please make sure your request has a User-Agent header",
                    );
                }
                let auth = header("authorization");
                if auth != format!("token {}", self.0.github_token) {
                    return ResponseTemplate::new(401).set_body_json(json!({"message": "Bad credentials"}));
                }
                let mut n = self.0.exchanges.lock().unwrap();
                *n += 1;
                let expires_at = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap().as_secs() + self.0.expires_in;
                ResponseTemplate::new(200).set_body_json(json!({
                    "token": format!("copilot-{}", *n), "expires_at": expires_at, "refresh_in": 1500,
                    "endpoints": {"api": self.0.chat_api}
                }))
            }
            other => ResponseTemplate::new(404).set_body_json(json!({"message": format!("Not Found: {other}")})),
        }
    }
}
