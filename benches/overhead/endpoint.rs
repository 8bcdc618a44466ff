//! What dracode's endpoint for an external agent ([`dracode_gateway`]) adds to each model call:
//! an agent's Chat Completions request (a realistic conversation: a system prompt, ten tools,
//! twenty turns) sent straight to the lean chat server, against the same request sent to the
//! endpoint, which decodes it, hands it to a backend that calls the task's provider (dracode's
//! Chat Completions provider, to the same server), and encodes the answer as the agent's SSE.

use super::chat_server::ChatServer;
use dracode_gateway::{Backend, BoxFuture, Call, Gateway, Refusal};
use dracode_llm::{LlmRequest, LlmResponse, Provider};
use serde_json::{Value, json};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Answers every call with the provider, as the attempt's loop does (without its events).
struct Forward(Arc<dyn Provider>);

impl Backend for Forward {
    fn call(&self, call: Call) -> BoxFuture<'_, Result<LlmResponse, Refusal>> {
        Box::pin(async move {
            let request = LlmRequest { system: &call.system, messages: &call.messages, tools: &call.tools, max_tokens: call.max_tokens };
            self.0.complete(request, &|_| {}).await.map_err(|e| Refusal { status: 400, message: e.message })
        })
    }
}

/// An agent's request of twenty turns with ten tools, streamed.
fn agent_request() -> Value {
    let tools: Vec<Value> = (0..10)
        .map(|i| {
            json!({"type": "function", "function": {"name": format!("tool_{i}"), "description": "Does a thing. ".repeat(20),
            "parameters": {"type": "object", "properties": {"path": {"type": "string"}}, "required": ["path"]}}})
        })
        .collect();
    let mut messages = vec![
        json!({"role": "system", "content": "You are a coding agent. ".repeat(200)}),
        json!({"role": "user", "content": "Fix the bug."}),
    ];
    for turn in 0..20 {
        let id = format!("call_{turn}");
        messages.push(json!({"role": "assistant", "content": null, "tool_calls": [{"id": id, "type": "function",
            "function": {"name": "tool_1", "arguments": "{\"path\":\"src/lib.rs\"}"}}]}));
        messages.push(json!({"role": "tool", "tool_call_id": id, "content": "fn main() {}\n".repeat(40)}));
    }
    json!({"model": "bench", "stream": true, "stream_options": {"include_usage": true}, "messages": messages, "tools": tools})
}

/// `calls` requests to `url` with `token`, one after another: each one's time to the whole answer.
async fn timed(client: &reqwest::Client, url: &str, token: &str, body: &Value, calls: usize) -> Vec<Duration> {
    let mut times = Vec::with_capacity(calls);
    for _ in 0..calls {
        let started = Instant::now();
        let response = client.post(url).bearer_auth(token).json(body).send().await.expect("request");
        assert!(response.status().is_success(), "{}", response.status());
        let text = response.text().await.expect("body");
        assert!(text.contains("[DONE]"), "{text}");
        times.push(started.elapsed());
    }
    times
}

/// Prints the endpoint's added time per call (p50 and p90) and the ratio of the two medians.
pub fn endpoint_overhead() {
    // reqwest is built without a TLS provider of its own: dracode installs ring's.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = ChatServer::start(Duration::ZERO);
    let rt = tokio::runtime::Builder::new_multi_thread().worker_threads(2).enable_all().build().expect("runtime");
    rt.block_on(async {
        let resolved = dracode_llm::preset::ResolvedProvider {
            name: "bench".into(),
            kind: dracode_llm::preset::ProviderType::Vllm,
            model: Some("bench".into()),
            base_url: Some(server.base_url.clone()),
            api_key: Some("k".into()),
            timeout: Duration::from_secs(30),
            stream: true,
            max_tokens: None,
            reasoning: None,
            wire_api: None,
            headers: Default::default(),
            api_version: None,
            limits: Default::default(),
            replay_path: None,
            emptied: Default::default(),
        };
        let binding = dracode_llm::preset::TaskBinding { task_id: "bench".into() };
        let http = dracode_llm::http::HttpClient::default();
        let provider = dracode_llm::registry::build(&resolved, &binding, &http, &Default::default()).expect("provider");
        let gateway = Gateway::start("tok".into(), Arc::new(Forward(provider))).await.expect("gateway");
        let client = reqwest::Client::builder().build().expect("client");
        let body = agent_request();
        let direct_url = format!("{}/chat/completions", server.base_url);
        let endpoint_url = format!("{}/v1/chat/completions", gateway.base_url());
        let (mut direct, mut through) = (Vec::new(), Vec::new());
        timed(&client, &endpoint_url, "tok", &body, 20).await;
        for _ in 0..10 {
            direct.extend(timed(&client, &direct_url, "k", &body, 30).await);
            through.extend(timed(&client, &endpoint_url, "tok", &body, 30).await);
        }
        direct.sort();
        through.sort();
        let p = |v: &[Duration], q: f64| v[((v.len() - 1) as f64 * q) as usize];
        println!(
            "agent endpoint per call (20-turn Chat Completions request, streamed): +{:.3} ms at p50 ({:.3} ms through dracode's endpoint vs {:.3} ms direct), +{:.3} ms at p90, {}",
            super::ms(p(&through, 0.5).saturating_sub(p(&direct, 0.5))),
            super::ms(p(&through, 0.5)),
            super::ms(p(&direct, 0.5)),
            super::ms(p(&through, 0.9).saturating_sub(p(&direct, 0.9))),
            super::ratio(p(&through, 0.5), p(&direct, 0.5), "the agent calling the server directly")
        );
    });
    server.stop();
}
