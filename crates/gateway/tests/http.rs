//! The gateway over HTTP: routes, the token check, token counts, refusals and answers.
#![allow(clippy::unwrap_used, clippy::expect_used)] // a test: a panic is the report

use std::sync::{Arc, Mutex};

use dracode_gateway::{Backend, BoxFuture, Call, Format, Gateway, Refusal};
use dracode_llm::{ContentBlock, LlmResponse, StopReason, Usage};
use serde_json::{Value, json};

/// Answers "done", or refuses with `refuse`; records the calls.
#[derive(Default)]
struct Recorder {
    refuse: Option<u16>,
    calls: Mutex<Vec<Call>>,
}

impl Backend for Recorder {
    fn call(&self, call: Call) -> BoxFuture<'_, Result<LlmResponse, Refusal>> {
        self.calls.lock().unwrap().push(call);
        let answer = match self.refuse {
            Some(status) => Err(Refusal { status, message: "budget exhausted".into() }),
            None => Ok(LlmResponse {
                content: vec![ContentBlock::text("done")],
                stop_reason: StopReason::EndTurn,
                usage: Usage::from_counts(10, 2),
                model: None,
            }),
        };
        Box::pin(async move { answer })
    }
}

/// A client (dracode's, which installs the TLS provider reqwest needs even for plain HTTP).
fn client() -> reqwest::Client {
    dracode_llm::http::HttpClient::default().get().clone()
}

async fn start(refuse: Option<u16>) -> (Gateway, Arc<Recorder>) {
    let backend = Arc::new(Recorder { refuse, ..Recorder::default() });
    (Gateway::start("secret".into(), backend.clone()).await.unwrap(), backend)
}

async fn post(gateway: &Gateway, path: &str, headers: &[(&str, &str)], body: &Value) -> (u16, String, Value) {
    let client = client();
    let mut request = client.post(format!("{}{path}", gateway.base_url())).body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status().as_u16();
    let kind = response.headers().get("content-type").map(|v| v.to_str().unwrap().to_string()).unwrap_or_default();
    let text = response.text().await.unwrap();
    (status, kind, serde_json::from_str(&text).unwrap_or(Value::String(text)))
}

fn messages_body(stream: bool) -> Value {
    json!({"model": "claude-x", "max_tokens": 100, "stream": stream, "messages": [{"role": "user", "content": "hi"}]})
}

#[tokio::test]
async fn listens_on_loopback_and_answers_each_format() {
    let (gateway, backend) = start(None).await;
    assert!(gateway.addr().ip().is_loopback());
    assert_eq!(gateway.base_url(), format!("http://127.0.0.1:{}", gateway.addr().port()));
    let (status, _, body) = post(&gateway, "/v1/messages?beta=true", &[("x-api-key", "secret")], &messages_body(false)).await;
    assert_eq!((status, body["content"][0]["text"].as_str()), (200, Some("done")));
    let chat = json!({"model": "oc", "messages": [{"role": "user", "content": "hi"}]});
    let (status, _, body) = post(&gateway, "/chat/completions", &[("authorization", "Bearer secret")], &chat).await;
    assert_eq!((status, body["choices"][0]["message"]["content"].as_str()), (200, Some("done")));
    let responses = json!({"model": "gpt", "input": "hi", "stream": true});
    let (status, kind, body) = post(&gateway, "/v1/responses", &[("authorization", "Bearer secret")], &responses).await;
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
    assert!(body.as_str().unwrap().contains("event: response.completed"));
    let gemini = json!({"contents": [{"role": "user", "parts": [{"text": "hi"}]}]});
    let path = "/v1beta/models/gemini-2.5-pro:streamGenerateContent?alt=sse";
    let (status, kind, body) = post(&gateway, path, &[("x-goog-api-key", "secret")], &gemini).await;
    assert_eq!((status, kind.as_str()), (200, "text/event-stream"));
    assert!(body.as_str().unwrap().starts_with("data: {\"candidates\""));
    let (status, _, body) = post(&gateway, "/v1/models/g:generateContent?key=secret", &[], &gemini).await;
    assert_eq!((status, body["candidates"][0]["content"]["parts"][0]["text"].as_str()), (200, Some("done")));
    let calls = backend.calls.lock().unwrap();
    let formats: Vec<Format> = calls.iter().map(|c| c.format).collect();
    assert_eq!(formats, [Format::AnthropicMessages, Format::ChatCompletions, Format::OpenAiResponses, Format::Gemini, Format::Gemini]);
    assert_eq!((calls[3].model.as_str(), calls[3].stream, calls[4].model.as_str(), calls[4].stream), ("gemini-2.5-pro", true, "g", false));
}

#[tokio::test]
async fn refuses_a_missing_or_wrong_token_in_the_routes_format() {
    let (gateway, backend) = start(None).await;
    let (status, _, body) = post(&gateway, "/v1/messages", &[("x-api-key", "wrong")], &messages_body(false)).await;
    assert_eq!((status, body["type"].as_str(), body["error"]["type"].as_str()), (401, Some("error"), Some("authentication_error")));
    let (status, _, body) = post(&gateway, "/v1/responses", &[("authorization", "Bearer secreT")], &json!({"input": "x"})).await;
    assert_eq!((status, body["error"]["type"].as_str()), (401, Some("authentication_error")));
    let (status, _, body) = post(&gateway, "/v1beta/models/g:generateContent", &[], &json!({"contents": []})).await;
    assert_eq!((status, body["error"]["status"].as_str(), body["error"]["code"].as_u64()), (401, Some("UNAUTHENTICATED"), Some(401)));
    assert!(backend.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn unknown_routes_are_404_in_openais_shape() {
    let (gateway, _) = start(None).await;
    let (status, _, body) = post(&gateway, "/v2/complete", &[("x-api-key", "secret")], &json!({})).await;
    assert_eq!(status, 404);
    assert!(body["error"]["message"].as_str().unwrap().contains("/v2/complete"));
    let (status, _, _) = post(&gateway, "/v1beta/models/g:embedContent", &[("x-api-key", "secret")], &json!({})).await;
    assert_eq!(status, 404);
}

#[tokio::test]
async fn counts_tokens_without_the_backend() {
    let (gateway, backend) = start(None).await;
    let body = messages_body(false);
    let (status, _, count) = post(&gateway, "/v1/messages/count_tokens", &[("x-api-key", "secret")], &body).await;
    assert_eq!((status, count["input_tokens"].as_u64()), (200, Some(body.to_string().len() as u64 / 4)));
    let (status, _, count) = post(&gateway, "/v1beta/models/g:countTokens", &[("x-goog-api-key", "secret")], &body).await;
    assert_eq!((status, count["totalTokens"].as_u64()), (200, Some(body.to_string().len() as u64 / 4)));
    assert!(backend.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn a_refusal_is_told_in_the_format_with_its_status() {
    let (gateway, _) = start(Some(400)).await;
    let (status, _, body) = post(&gateway, "/v1/messages", &[("x-api-key", "secret")], &messages_body(true)).await;
    assert_eq!(
        (status, body["error"]["type"].as_str(), body["error"]["message"].as_str()),
        (400, Some("invalid_request_error"), Some("budget exhausted"))
    );
    let (status, _, body) = post(&gateway, "/v1/chat/completions", &[("authorization", "Bearer secret")], &json!({"messages": []})).await;
    assert_eq!((status, body["error"]["message"].as_str()), (400, Some("budget exhausted")));
    let (gateway, _) = start(Some(429)).await;
    let gemini = json!({"contents": []});
    let (status, _, body) = post(&gateway, "/v1beta/models/g:generateContent", &[("x-goog-api-key", "secret")], &gemini).await;
    assert_eq!((status, body["error"]["status"].as_str()), (429, Some("RESOURCE_EXHAUSTED")));
}

#[tokio::test]
async fn malformed_and_compressed_bodies_are_refused() {
    let (gateway, backend) = start(None).await;
    let client = client();
    let url = format!("{}/v1/messages", gateway.base_url());
    let response = client.post(&url).header("x-api-key", "secret").body("{not json").send().await.unwrap();
    assert_eq!(response.status().as_u16(), 400);
    let body: Value = response.json().await.unwrap();
    assert!(body["error"]["message"].as_str().unwrap().contains("not JSON"));
    let (status, _, body) = post(&gateway, "/v1/messages", &[("x-api-key", "secret")], &json!({"model": "m"})).await;
    assert_eq!(status, 400);
    assert!(body["error"]["message"].as_str().unwrap().contains("messages"));
    let response = client.post(&url).header("x-api-key", "secret").header("content-encoding", "zstd").body("x").send().await.unwrap();
    assert_eq!(response.status().as_u16(), 415);
    assert!(backend.calls.lock().unwrap().is_empty());
}

#[tokio::test]
async fn lists_the_model_seen_and_stops_when_dropped() {
    let (gateway, _) = start(None).await;
    let client = client();
    let models = format!("{}/v1/models", gateway.base_url());
    let list: Value = client.get(&models).bearer_auth("secret").send().await.unwrap().json().await.unwrap();
    assert_eq!(list["data"][0]["id"], "dracode");
    post(&gateway, "/v1/messages", &[("x-api-key", "secret")], &messages_body(false)).await;
    let list: Value = client.get(&models).bearer_auth("secret").send().await.unwrap().json().await.unwrap();
    assert_eq!((list["object"].as_str(), list["data"][0]["id"].as_str()), (Some("list"), Some("claude-x")));
    let addr = gateway.addr();
    drop(gateway);
    tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    assert!(tokio::net::TcpStream::connect(addr).await.is_err());
}
