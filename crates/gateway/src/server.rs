//! The HTTP side: a hyper HTTP/1.1 server on loopback (keep-alive, one task per connection),
//! routing by path, the token check, body limits and each format's error bodies.
//!
//! Routes (a query string is allowed on each): `POST /v1/messages` and
//! `/v1/messages/count_tokens`; `POST /v1/responses` (or `/responses`); `POST
//! /v1/chat/completions` (or `/chat/completions`); `POST /v1beta/models/{model}:generateContent`,
//! `:streamGenerateContent` and `:countTokens` (or under `/v1/models/`); `GET /v1/models`.
//! Anything else is a 404 in OpenAI's error shape. Token counts without a backend call are
//! estimates: a quarter of the body's bytes.

use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::body::Incoming;
use hyper::header::{CONTENT_ENCODING, CONTENT_TYPE, HeaderMap, HeaderValue};
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use serde_json::{Value, json};
use tokio::task::{JoinHandle, JoinSet};

use crate::{Answer, Backend, Call, Context, Format, anthropic, chat, gemini, responses};

/// The largest request body taken.
const MAX_BODY: usize = 64 << 20;

/// The listener task; aborting it drops its connections' tasks, so dropping stops everything.
pub(crate) struct Server {
    listener: JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.listener.abort();
    }
}

/// What every connection shares.
struct State {
    token: String,
    backend: Arc<dyn Backend>,
    /// The last model an agent asked for (for `GET /v1/models`).
    model: Mutex<Option<String>>,
}

impl Server {
    /// Binds 127.0.0.1 on a random port and serves on it.
    pub(crate) async fn start(token: String, backend: Arc<dyn Backend>) -> std::io::Result<(SocketAddr, Server)> {
        let listener = tokio::net::TcpListener::bind(("127.0.0.1", 0)).await?;
        let addr = listener.local_addr()?;
        let state = Arc::new(State { token, backend, model: Mutex::new(None) });
        let listener = tokio::spawn(async move {
            let mut connections = JoinSet::new();
            loop {
                tokio::select! {
                    accepted = listener.accept() => match accepted {
                        Ok((stream, _)) => {
                            let state = state.clone();
                            connections.spawn(async move {
                                let service = hyper::service::service_fn(move |request| handle(state.clone(), request));
                                let served = hyper::server::conn::http1::Builder::new().serve_connection(TokioIo::new(stream), service).await;
                                if let Err(error) = served {
                                    tracing::debug!(%error, "gateway connection ended with an error");
                                }
                            });
                        }
                        Err(error) => {
                            tracing::warn!(%error, "gateway accept failed");
                            tokio::time::sleep(std::time::Duration::from_millis(50)).await;
                        }
                    },
                    Some(_) = connections.join_next(), if !connections.is_empty() => {}
                }
            }
        });
        Ok((addr, Server { listener }))
    }
}

/// What a request path asks for.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Route {
    /// A model call in a format; Gemini's carries the model and whether it streams.
    Model(Format, Option<(String, bool)>),
    /// A token count in a format.
    Count(Format),
    /// The model list.
    Models,
    /// Nothing here.
    Unknown,
}

/// The route of `method` and `path` (without its query).
fn route(method: &Method, path: &str) -> Route {
    if method == Method::GET {
        return if matches!(path, "/v1/models" | "/models") { Route::Models } else { Route::Unknown };
    }
    if method != Method::POST {
        return Route::Unknown;
    }
    match path {
        "/v1/messages" => return Route::Model(Format::AnthropicMessages, None),
        "/v1/messages/count_tokens" => return Route::Count(Format::AnthropicMessages),
        "/v1/responses" | "/responses" => return Route::Model(Format::OpenAiResponses, None),
        "/v1/chat/completions" | "/chat/completions" => return Route::Model(Format::ChatCompletions, None),
        _ => {}
    }
    let rest = path.strip_prefix("/v1beta/models/").or_else(|| path.strip_prefix("/v1/models/"));
    let Some((model, method)) = rest.and_then(|r| r.rsplit_once(':')) else { return Route::Unknown };
    if model.is_empty() || model.contains('/') {
        return Route::Unknown;
    }
    match method {
        "generateContent" => Route::Model(Format::Gemini, Some((model.to_string(), false))),
        "streamGenerateContent" => Route::Model(Format::Gemini, Some((model.to_string(), true))),
        "countTokens" => Route::Count(Format::Gemini),
        _ => Route::Unknown,
    }
}

/// An error body in `format`'s shape.
fn error(format: Format, status: u16, message: &str) -> Response<Full<Bytes>> {
    let body = match format {
        Format::AnthropicMessages => anthropic::error(status, message),
        Format::OpenAiResponses | Format::ChatCompletions => responses::error(status, message),
        Format::Gemini => gemini::error(status, message),
    };
    json_response(status, &body)
}

/// A JSON response.
fn json_response(status: u16, body: &Value) -> Response<Full<Bytes>> {
    let mut response = Response::new(Full::new(Bytes::from(body.to_string())));
    *response.status_mut() = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    response.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    response
}

/// Whether the request carries the token (`x-api-key`, `Authorization: Bearer`,
/// `x-goog-api-key`, or the query's `key=`), compared in constant time.
fn authorized(headers: &HeaderMap, query: &str, token: &str) -> bool {
    let header = |name: &str| headers.get_all(name).iter().filter_map(|v| v.to_str().ok()).map(str::to_string).collect::<Vec<_>>();
    let mut offered = header("x-api-key");
    offered.extend(header("x-goog-api-key"));
    for value in header("authorization") {
        if let Some((scheme, rest)) = value.split_once(' ')
            && scheme.eq_ignore_ascii_case("bearer")
        {
            offered.push(rest.trim().to_string());
        }
    }
    offered.extend(query.split('&').filter_map(|pair| pair.strip_prefix("key=")).map(str::to_string));
    offered.iter().fold(false, |ok, candidate| ok | same(candidate.as_bytes(), token.as_bytes()))
}

/// Constant-time equality (for equal lengths; the length itself is not secret).
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |diff, (x, y)| diff | (x ^ y)) == 0
}

/// The format a route answers errors in.
fn error_format(route: &Route) -> Format {
    match route {
        Route::Model(format, _) | Route::Count(format) => *format,
        Route::Models | Route::Unknown => Format::ChatCompletions,
    }
}

/// Serves one request.
async fn handle(state: Arc<State>, request: Request<Incoming>) -> Result<Response<Full<Bytes>>, Infallible> {
    let path = request.uri().path().to_string();
    let query = request.uri().query().unwrap_or_default().to_string();
    let route = route(request.method(), &path);
    let format = error_format(&route);
    if route == Route::Unknown {
        return Ok(error(format, 404, &format!("dracode's endpoint has no {} {path}", request.method())));
    }
    if !authorized(request.headers(), &query, &state.token) {
        tracing::warn!(path, "gateway request without the task token");
        return Ok(error(format, 401, "missing or wrong API key for dracode's endpoint"));
    }
    if route == Route::Models {
        let model = state.model.lock().ok().and_then(|m| m.clone()).unwrap_or_else(|| "dracode".to_string());
        let list = json!({"object": "list", "data": [{"id": model, "object": "model", "created": 0, "owned_by": "dracode"}]});
        return Ok(json_response(200, &list));
    }
    let user_agent = request.headers().get(hyper::header::USER_AGENT).and_then(|v| v.to_str().ok()).map(str::to_string);
    let body = match read_body(request).await {
        Ok(body) => body,
        Err((status, message)) => return Ok(error(format, status, &message)),
    };
    if let Route::Count(format) = route {
        let tokens = body.len() / 4;
        let answer = if format == Format::Gemini { json!({"totalTokens": tokens}) } else { json!({"input_tokens": tokens}) };
        return Ok(json_response(200, &answer));
    }
    let Route::Model(format, gemini_route) = route else { return Ok(error(format, 404, "no such route")) };
    Ok(model_call(&state, format, gemini_route, &body, user_agent).await)
}

/// The body, whole and uncompressed, or the status and message refusing it.
async fn read_body(request: Request<Incoming>) -> Result<Bytes, (u16, String)> {
    let encoding = request.headers().get(CONTENT_ENCODING).and_then(|v| v.to_str().ok()).unwrap_or("identity").trim().to_ascii_lowercase();
    if !encoding.is_empty() && encoding != "identity" {
        return Err((415, format!("dracode's endpoint takes uncompressed request bodies, not Content-Encoding {encoding}")));
    }
    let declared = request.headers().get(hyper::header::CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<u64>().ok());
    if declared.is_some_and(|n| n > MAX_BODY as u64) {
        return Err((413, format!("the request body is over {} MiB", MAX_BODY >> 20)));
    }
    match Limited::new(request.into_body(), MAX_BODY).collect().await {
        Ok(collected) => Ok(collected.to_bytes()),
        Err(error) if error.is::<http_body_util::LengthLimitError>() => {
            Err((413, format!("the request body is over {} MiB", MAX_BODY >> 20)))
        }
        Err(error) => Err((400, format!("the request body could not be read: {error}"))),
    }
}

/// Decodes a model call, hands it to the backend, encodes the answer.
async fn model_call(
    state: &State,
    format: Format,
    gemini_route: Option<(String, bool)>,
    body: &[u8],
    user_agent: Option<String>,
) -> Response<Full<Bytes>> {
    let json: Value = match serde_json::from_slice(body) {
        Ok(json @ Value::Object(_)) => json,
        Ok(_) => return error(format, 400, "the request body is not a JSON object"),
        Err(e) => return error(format, 400, &format!("the request body is not JSON: {e}")),
    };
    let decoded: Result<(Call, Context), crate::Malformed> = match (format, gemini_route) {
        (Format::AnthropicMessages, _) => anthropic::decode(&json),
        (Format::OpenAiResponses, _) => responses::decode(&json),
        (Format::ChatCompletions, _) => chat::decode(&json),
        (Format::Gemini, Some((model, stream))) => gemini::decode(&json, &model, stream),
        (Format::Gemini, None) => Err("no model in the path".into()),
    };
    let (call, context) = match decoded {
        Ok((call, context)) => (Call { user_agent, ..call }, context),
        Err(message) => return error(format, 400, &format!("malformed {} request: {message}", format.as_str())),
    };
    if let Ok(mut model) = state.model.lock() {
        *model = Some(call.model.clone());
    }
    tracing::debug!(format = format.as_str(), model = call.model, messages = call.messages.len(), tools = call.tools.len(), "gateway call");
    let answer = match state.backend.call(call).await {
        Ok(response) => match format {
            Format::AnthropicMessages => anthropic::encode(&response, &context),
            Format::OpenAiResponses => responses::encode(&response, &context),
            Format::ChatCompletions => chat::encode(&response, &context),
            Format::Gemini => gemini::encode(&response, &context),
        },
        Err(refusal) => return error(format, refusal.status, &refusal.message),
    };
    match answer {
        Answer::Json(body) => json_response(200, &body),
        Answer::Sse(text) => {
            let mut response = Response::new(Full::new(Bytes::from(text)));
            let headers = response.headers_mut();
            headers.insert(CONTENT_TYPE, HeaderValue::from_static("text/event-stream"));
            headers.insert(hyper::header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
            response
        }
    }
}
