//! OpenTelemetry export (cargo feature `otel`): the run as OTLP/HTTP protobuf traces that
//! follow the GenAI semantic conventions, built from the event stream.
//!
//! One trace per run: a `dracode run` root span; per task an `invoke_agent dracode` span (task
//! id, status, attempts, provider, model, `gen_ai.usage.*`); under it a `chat {model}` span per
//! LLM call (`gen_ai.operation.name`, `gen_ai.provider.name`, `gen_ai.request.model`,
//! `gen_ai.response.model`, `gen_ai.usage.input_tokens`/`output_tokens`,
//! `gen_ai.response.finish_reasons`) and an `execute_tool {name}` span per tool call
//! (`error.type` when it failed); at the end the `gen_ai.client.token.usage` and
//! `gen_ai.client.operation.duration` histograms ([`metrics`]). Prompts, tool arguments and results are exported only with
//! `--otel-log-content`, and then masked like every artifact. A task's spans are sent when it
//! finishes, the root span at the end; a receiver that is down or slow (5 s) costs a warning,
//! never the run.
//!
//! The OTLP messages are encoded here (a few dozen lines of protobuf) rather than with the
//! `opentelemetry` crates: the spans are made after the fact from events that carry their own
//! times, which the SDK's live-span API does not fit, and the build stays as it is.

mod metrics;
mod proto;

use super::clean_text;
use crate::events::{Event, Reporter, TaskFinished, WireEvent};
use dracode_llm::preset::ProviderType;
use dracode_secrets::Redactor;
use std::collections::{BTreeMap, HashMap};
use std::hash::{BuildHasher, Hasher};
use std::sync::Arc;
use std::time::{Duration, SystemTime};

/// Where and how to export: from `OTEL_*` variables and the command line.
#[derive(Debug, Clone, PartialEq)]
pub struct OtelConfig {
    /// The traces URL (`{OTEL_EXPORTER_OTLP_ENDPOINT}/v1/traces`, or
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` as is).
    pub traces_url: String,
    /// The metrics URL (`…/v1/metrics`, or `OTEL_EXPORTER_OTLP_METRICS_ENDPOINT`).
    pub metrics_url: String,
    /// Extra request headers (`OTEL_EXPORTER_OTLP_HEADERS`, `k=v,k2=v2`, percent-decoded).
    pub headers: Vec<(String, String)>,
    /// Resource attributes: `service.name`, `service.version`, `OTEL_RESOURCE_ATTRIBUTES`,
    /// the GitHub run and the shard.
    pub resource: Vec<(String, String)>,
    /// Export prompts, tool arguments and tool results (`--otel-log-content`).
    pub log_content: bool,
}

impl OtelConfig {
    /// The export settings, or `None` (no exporter at all) without an endpoint.
    pub fn from_env(env: &BTreeMap<String, String>, endpoint_flag: Option<&str>, shard: Option<&str>, log_content: bool) -> Option<Self> {
        let nonempty = |name: &str| env.get(name).map(|v| v.trim().to_string()).filter(|v| !v.is_empty());
        let base = endpoint_flag.map(str::to_string).or_else(|| nonempty("OTEL_EXPORTER_OTLP_ENDPOINT"));
        let url = |signal: &str, specific: &str| match (endpoint_flag, nonempty(specific), &base) {
            (None, Some(full), _) => Some(full),
            (_, _, Some(base)) => Some(format!("{}/v1/{signal}", base.trim_end_matches('/'))),
            (_, _, None) => None,
        };
        let traces_url = url("traces", "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT")?;
        let metrics_url =
            url("metrics", "OTEL_EXPORTER_OTLP_METRICS_ENDPOINT").unwrap_or_else(|| traces_url.replace("/v1/traces", "/v1/metrics"));
        let headers = nonempty("OTEL_EXPORTER_OTLP_HEADERS").map(|h| pairs(&h)).unwrap_or_default();
        let mut resource = vec![
            ("service.name".to_string(), nonempty("OTEL_SERVICE_NAME").unwrap_or_else(|| "dracode".to_string())),
            ("service.version".to_string(), env!("CARGO_PKG_VERSION").to_string()),
        ];
        for (key, value) in nonempty("OTEL_RESOURCE_ATTRIBUTES").map(|a| pairs(&a)).unwrap_or_default() {
            if key == "service.name" && env.contains_key("OTEL_SERVICE_NAME") {
                continue; // OTEL_SERVICE_NAME wins, as the specification says
            }
            resource.retain(|(k, _)| *k != key);
            resource.push((key, value));
        }
        if let Some(run) = nonempty("GITHUB_RUN_ID") {
            resource.push(("cicd.pipeline.run.id".to_string(), run));
        }
        if let Some(shard) = shard {
            resource.push(("dracode.shard".to_string(), shard.to_string()));
        }
        Some(OtelConfig { traces_url, metrics_url, headers, resource, log_content })
    }
}

/// `gen_ai.provider.name` of a provider type: the GenAI conventions' well-known value where
/// there is one (`openai`, `azure.ai.openai`, `anthropic`, `gcp.gemini`), else the type's own
/// name (`ollama`, `vllm`, `copilot`, …), as the conventions ask for a provider they do not list.
pub fn provider_name(kind: ProviderType) -> &'static str {
    match kind {
        ProviderType::Openai => "openai",
        ProviderType::Azure => "azure.ai.openai",
        ProviderType::Anthropic => "anthropic",
        ProviderType::Gemini => "gcp.gemini",
        other => other.as_str(),
    }
}

/// `text` with its `%XX` escapes decoded; a `%` not followed by two hex digits stays as it is,
/// and invalid UTF-8 is replaced.
fn decode(text: &str) -> String {
    percent_encoding::percent_decode_str(text).decode_utf8_lossy().into_owned()
}

/// `k=v,k2=v2` with percent-encoded values, as the OTEL_* variables write lists.
fn pairs(text: &str) -> Vec<(String, String)> {
    text.split(',')
        .filter_map(|pair| pair.split_once('='))
        .map(|(k, v)| (decode(k.trim()), decode(v.trim())))
        .filter(|(k, _)| !k.is_empty())
        .collect()
}

/// An attribute value.
#[derive(Debug, Clone, PartialEq)]
enum Value {
    Str(String),
    Int(i64),
    Strs(Vec<String>),
}

/// A finished span, ready to encode.
#[derive(Debug, Clone)]
struct Span {
    id: [u8; 8],
    parent: Option<[u8; 8]>,
    name: String,
    /// 1 internal, 3 client.
    kind: u64,
    start: SystemTime,
    end: SystemTime,
    attributes: Vec<(String, Value)>,
    /// `Some(message)`: status ERROR.
    error: Option<String>,
}

/// What is known of a running task.
struct TaskState {
    span: [u8; 8],
    start: SystemTime,
    provider: String,
    model: String,
    children: Vec<Span>,
    tool_inputs: HashMap<String, serde_json::Value>,
}

/// Sends the run's spans to an OTLP/HTTP receiver.
pub struct OtelReporter {
    config: OtelConfig,
    redactor: Arc<Redactor>,
    trace: [u8; 16],
    root: [u8; 8],
    run_start: Option<SystemTime>,
    run_attributes: Vec<(String, Value)>,
    tasks: HashMap<String, TaskState>,
    runtime: Option<tokio::runtime::Runtime>,
    warned: bool,
    metrics: metrics::Histograms,
    /// `gen_ai.provider.name` by the provider's config name (its alias).
    providers: HashMap<String, &'static str>,
}

impl OtelReporter {
    /// A reporter exporting per `config`; secrets in exported content are masked by `redactor`.
    pub fn new(config: OtelConfig, redactor: Arc<Redactor>) -> Self {
        let trace = {
            let (a, b) = (random_u64(), random_u64());
            let mut id = [0u8; 16];
            id[..8].copy_from_slice(&a.to_be_bytes());
            id[8..].copy_from_slice(&b.to_be_bytes());
            id
        };
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().ok();
        OtelReporter {
            config,
            redactor,
            trace,
            root: random_u64().to_be_bytes(),
            run_start: None,
            run_attributes: Vec::new(),
            tasks: HashMap::new(),
            runtime,
            warned: false,
            metrics: metrics::Histograms::default(),
            providers: HashMap::new(),
        }
    }

    /// This reporter, naming the provider of each config name (`mock`, type `openai`) as the
    /// GenAI conventions do ([`provider_name`]); a name it does not know is exported as it is.
    pub fn with_providers(mut self, providers: impl IntoIterator<Item = (String, ProviderType)>) -> Self {
        self.providers = providers.into_iter().map(|(alias, kind)| (alias, provider_name(kind))).collect();
        self
    }

    /// `gen_ai.provider.name` of the provider the config calls `alias`.
    fn provider_of(&self, alias: &str) -> String {
        self.providers.get(alias).copied().unwrap_or(alias).to_string()
    }

    fn task(&mut self, task_id: &str, ts: SystemTime) -> &mut TaskState {
        self.tasks.entry(task_id.to_string()).or_insert_with(|| TaskState {
            span: random_u64().to_be_bytes(),
            start: ts,
            provider: String::new(),
            model: String::new(),
            children: Vec::new(),
            tool_inputs: HashMap::new(),
        })
    }

    fn on_task_event(&mut self, task_id: &str, event: &Event) {
        let log_content = self.config.log_content;
        let redactor = self.redactor.clone();
        let provider_name = match &event.record {
            WireEvent::TaskStarted { provider, .. } => self.provider_of(provider),
            _ => String::new(),
        };
        let state = self.task(task_id, event.ts);
        match &event.record {
            WireEvent::TaskStarted { model, .. } => {
                state.provider = provider_name;
                state.model.clone_from(model);
            }
            WireEvent::TurnCompleted { turn, stop_reason, usage, duration_ms, .. } => {
                let duration = Duration::from_millis(*duration_ms);
                let attributes = vec![
                    attr("gen_ai.operation.name", "chat"),
                    attr("gen_ai.provider.name", &state.provider),
                    attr("gen_ai.request.model", &state.model),
                    attr("gen_ai.response.model", &state.model),
                    int("gen_ai.usage.input_tokens", usage.input_tokens),
                    int("gen_ai.usage.output_tokens", usage.output_tokens),
                    ("gen_ai.response.finish_reasons".to_string(), Value::Strs(vec![stop_reason.clone()])),
                    int("dracode.turn", u64::from(*turn)),
                ];
                let span = child(state, format!("chat {}", state.model), 3, event.ts, duration, attributes, None);
                state.children.push(span);
                let (provider, model) = (state.provider.clone(), state.model.clone());
                self.metrics.record_call(&provider, &model, usage.input_tokens, usage.output_tokens, duration);
            }
            // The whole arguments and output (the event's attachments), not the record's cut ones.
            WireEvent::ToolStarted { call_id, .. } if log_content => {
                state.tool_inputs.insert(call_id.clone(), event.tool_input().cloned().unwrap_or_default());
            }
            WireEvent::ToolCompleted { call_id, name, ok, duration_ms, .. } => {
                let mut attributes = vec![
                    attr("gen_ai.operation.name", "execute_tool"),
                    attr("gen_ai.tool.name", name),
                    attr("gen_ai.tool.call.id", call_id),
                ];
                if log_content {
                    if let Some(input) = state.tool_inputs.remove(call_id) {
                        attributes.push(attr("gen_ai.tool.call.arguments", &clean_text(&redactor, &input.to_string())));
                    }
                    attributes.push(attr("gen_ai.tool.call.result", &clean_text(&redactor, event.tool_output().unwrap_or_default())));
                }
                let error = (!ok).then(|| "the tool returned an error".to_string());
                if error.is_some() {
                    attributes.push(attr("error.type", "tool_error"));
                }
                let span =
                    child(state, format!("execute_tool {name}"), 1, event.ts, Duration::from_millis(*duration_ms), attributes, error);
                state.children.push(span);
            }
            _ => {}
        }
    }

    /// The task's spans, its own last, once it finished.
    fn finished_task(&mut self, outcome: TaskFinished<'_>, ts: SystemTime) -> Vec<Span> {
        let Some(state) = self.tasks.remove(outcome.task_id) else { return Vec::new() };
        let start = state.start.min(ts.checked_sub(outcome.duration()).unwrap_or(state.start));
        let mut attributes = vec![
            attr("gen_ai.operation.name", "invoke_agent"),
            attr("gen_ai.agent.name", "dracode"),
            attr("gen_ai.provider.name", &self.provider_of(&outcome.record.provider)),
            attr("gen_ai.request.model", &outcome.record.model),
            attr("dracode.task.id", outcome.task_id),
            attr("dracode.task.status", outcome.record.status.as_str()),
            int("dracode.task.attempt", u64::from(outcome.record.attempts)),
            int("gen_ai.usage.input_tokens", outcome.record.usage.input_tokens),
            int("gen_ai.usage.output_tokens", outcome.record.usage.output_tokens),
        ];
        let error = (!outcome.record.status.is_pass())
            .then(|| outcome.record.error.as_ref().map_or(String::new(), |e| clean_text(&self.redactor, &e.message)));
        if error.is_some() {
            let kind = outcome.record.error.as_ref().map_or(outcome.record.status.as_str(), |e| e.kind.as_str());
            attributes.push(attr("error.type", kind));
        }
        let mut spans = state.children;
        spans.push(Span {
            id: state.span,
            parent: Some(self.root),
            name: "invoke_agent dracode".to_string(),
            kind: 1,
            start,
            end: ts,
            attributes,
            error,
        });
        spans
    }

    /// Sends `spans`.
    fn export(&mut self, spans: &[Span]) {
        if !spans.is_empty() {
            let body = encode_request(&self.config.resource, self.trace, spans);
            self.post(&self.config.traces_url.clone(), body);
        }
    }

    /// POSTs one OTLP message to `url`; a failure is one warning per run, never an error.
    fn post(&mut self, url: &str, body: Vec<u8>) {
        let Some(runtime) = &self.runtime else { return };
        let client = dracode_llm::http::HttpClient::default();
        let mut request = client.get().post(url).header("content-type", "application/x-protobuf").body(body);
        for (name, value) in &self.config.headers {
            request = request.header(name.as_str(), value.as_str());
        }
        let sent = runtime.block_on(async { tokio::time::timeout(Duration::from_secs(5), request.send()).await });
        let problem = match sent {
            Ok(Ok(response)) if response.status().is_success() => None,
            Ok(Ok(response)) => Some(format!("HTTP {}", response.status().as_u16())),
            Ok(Err(e)) => Some(e.to_string()),
            Err(_) => Some("no answer within 5 s".to_string()),
        };
        if let Some(problem) = problem
            && !self.warned
        {
            self.warned = true;
            tracing::warn!("OpenTelemetry export to {url} failed: {problem} (the run goes on)");
        }
    }
}

impl Reporter for OtelReporter {
    fn on_event(&mut self, event: &Event) -> std::io::Result<()> {
        match (&event.record, event.task_id()) {
            (WireEvent::RunStarted { header, jobs, task_count, .. }, _) => {
                self.run_start = Some(event.ts);
                self.run_attributes.push(int("dracode.run.tasks", *task_count as u64));
                self.run_attributes.push(int("dracode.run.jobs", *jobs as u64));
                if let Some(shard) = &header.shard {
                    self.run_attributes.push(attr("dracode.shard", shard));
                }
            }
            (WireEvent::TaskFinished { .. }, _) => {
                let spans = event.as_task_finished().map(|done| self.finished_task(done, event.ts)).unwrap_or_default();
                self.export(&spans);
            }
            (WireEvent::RunFinished { .. }, _) => {
                let Some(totals) = event.as_run_finished() else { return Ok(()) };
                self.run_attributes.push(int("gen_ai.usage.input_tokens", totals.usage.input_tokens));
                self.run_attributes.push(int("gen_ai.usage.output_tokens", totals.usage.output_tokens));
                self.run_attributes.push(int("dracode.run.exit_code", u64::try_from(totals.exit_code).unwrap_or(0)));
                if totals.exit_code != 0 {
                    self.run_attributes.push(attr("error.type", exit_error_type(totals.exit_code)));
                }
                let root = Span {
                    id: self.root,
                    parent: None,
                    name: "dracode run".to_string(),
                    kind: 1,
                    start: self.run_start.unwrap_or(event.ts),
                    end: event.ts,
                    attributes: std::mem::take(&mut self.run_attributes),
                    error: (totals.exit_code != 0).then(|| format!("exit code {}", totals.exit_code)),
                };
                self.export(&[root]);
                if !self.metrics.is_empty() {
                    let body = self.metrics.encode(&self.config.resource, self.run_start.unwrap_or(event.ts), event.ts);
                    self.post(&self.config.metrics_url.clone(), body);
                }
            }
            (_, Some(task_id)) => self.on_task_event(task_id, event),
            _ => {}
        }
        Ok(())
    }
}

/// The root span's `error.type` (OpenTelemetry: set on every span with status ERROR, a
/// low-cardinality reason): the name of the run's exit code (docs/src/reference/exit-codes.md).
fn exit_error_type(code: i32) -> &'static str {
    use dracode_results::exit_codes as codes;
    match code {
        codes::TASKS_FAILED => "tasks_failed",
        codes::USAGE => "usage",
        codes::ARTIFACTS_FAILED => "artifacts_failed",
        codes::NO_TASKS => "no_tasks",
        codes::NOT_JUDGED => "not_judged",
        codes::INTERRUPTED => "interrupted",
        codes::TERMINATED => "terminated",
        _ => "_OTHER",
    }
}

fn attr(key: &str, value: &str) -> (String, Value) {
    (key.to_string(), Value::Str(value.to_string()))
}

fn int(key: &str, value: u64) -> (String, Value) {
    (key.to_string(), Value::Int(i64::try_from(value).unwrap_or(i64::MAX)))
}

/// A span under the task's, ending at `end` after `duration`.
fn child(
    state: &TaskState,
    name: String,
    kind: u64,
    end: SystemTime,
    duration: Duration,
    attributes: Vec<(String, Value)>,
    error: Option<String>,
) -> Span {
    Span {
        id: random_u64().to_be_bytes(),
        parent: Some(state.span),
        name,
        kind,
        start: end.checked_sub(duration).unwrap_or(end),
        end,
        attributes,
        error,
    }
}

/// 64 random bits from the standard library's per-process random hash keys.
fn random_u64() -> u64 {
    let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
    hasher.write_u128(SystemTime::now().duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| d.as_nanos()));
    hasher.finish().max(1)
}

/// An `ExportTraceServiceRequest` (opentelemetry-proto `collector/trace/v1`) of one resource
/// and one scope.
fn encode_request(resource: &[(String, String)], trace: [u8; 16], spans: &[Span]) -> Vec<u8> {
    let mut resource_msg = Vec::new();
    for (k, v) in resource {
        proto::message(&mut resource_msg, 1, &key_value(k, &Value::Str(v.clone())));
    }
    let mut scope = Vec::new();
    proto::string(&mut scope, 1, "dracode");
    proto::string(&mut scope, 2, env!("CARGO_PKG_VERSION"));
    let mut scope_spans = Vec::new();
    proto::message(&mut scope_spans, 1, &scope);
    for span in spans {
        proto::message(&mut scope_spans, 2, &encode_span(trace, span));
    }
    let mut resource_spans = Vec::new();
    proto::message(&mut resource_spans, 1, &resource_msg);
    proto::message(&mut resource_spans, 2, &scope_spans);
    let mut request = Vec::new();
    proto::message(&mut request, 1, &resource_spans);
    request
}

fn encode_span(trace: [u8; 16], span: &Span) -> Vec<u8> {
    let nanos = |t: SystemTime| t.duration_since(SystemTime::UNIX_EPOCH).map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(u64::MAX));
    let mut out = Vec::new();
    proto::bytes(&mut out, 1, &trace);
    proto::bytes(&mut out, 2, &span.id);
    if let Some(parent) = span.parent {
        proto::bytes(&mut out, 4, &parent);
    }
    proto::string(&mut out, 5, &span.name);
    proto::varint_field(&mut out, 6, span.kind);
    proto::fixed64(&mut out, 7, nanos(span.start));
    proto::fixed64(&mut out, 8, nanos(span.end).max(nanos(span.start)));
    for (k, v) in &span.attributes {
        proto::message(&mut out, 9, &key_value(k, v));
    }
    let mut status = Vec::new();
    match &span.error {
        Some(message) => {
            proto::string(&mut status, 2, message);
            proto::varint_field(&mut status, 3, 2);
        }
        None => proto::varint_field(&mut status, 3, 1),
    }
    proto::message(&mut out, 15, &status);
    out
}

fn key_value(key: &str, value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    proto::string(&mut out, 1, key);
    proto::message(&mut out, 2, &any_value(value));
    out
}

fn any_value(value: &Value) -> Vec<u8> {
    let mut out = Vec::new();
    match value {
        Value::Str(s) => proto::string(&mut out, 1, s),
        // int64 as a varint: two's complement, so a negative number takes ten bytes.
        Value::Int(i) => proto::varint_field(&mut out, 3, *i as u64),
        Value::Strs(items) => {
            let mut array = Vec::new();
            for item in items {
                proto::message(&mut array, 1, &any_value(&Value::Str(item.clone())));
            }
            proto::message(&mut out, 5, &array);
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env(pairs: &[(&str, &str)]) -> BTreeMap<String, String> {
        pairs.iter().map(|(k, v)| (k.to_string(), v.to_string())).collect()
    }

    #[test]
    fn no_endpoint_builds_no_exporter_and_the_variables_are_honoured() {
        assert_eq!(OtelConfig::from_env(&env(&[]), None, None, false), None);
        let config = OtelConfig::from_env(
            &env(&[
                ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:4318/"),
                ("OTEL_EXPORTER_OTLP_HEADERS", "authorization=Bearer%20abc, x-team=ci"),
                ("OTEL_SERVICE_NAME", "nightly"),
                ("OTEL_RESOURCE_ATTRIBUTES", "deployment.environment=ci,service.name=ignored-by-OTEL_SERVICE_NAME?"),
                ("GITHUB_RUN_ID", "42"),
            ]),
            None,
            Some("2/3"),
            false,
        )
        .unwrap();
        assert_eq!(config.traces_url, "http://127.0.0.1:4318/v1/traces");
        assert_eq!(config.metrics_url, "http://127.0.0.1:4318/v1/metrics");
        assert_eq!(config.headers, [("authorization".to_string(), "Bearer abc".to_string()), ("x-team".to_string(), "ci".to_string())]);
        let resource: BTreeMap<&str, &str> = config.resource.iter().map(|(k, v)| (k.as_str(), v.as_str())).collect();
        assert_eq!(resource["deployment.environment"], "ci");
        assert_eq!(resource["service.name"], "nightly");
        assert_eq!(resource["cicd.pipeline.run.id"], "42");
        assert_eq!(resource["dracode.shard"], "2/3");
        let flag =
            OtelConfig::from_env(&env(&[("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "http://x/t")]), Some("http://y:1"), None, true).unwrap();
        assert_eq!(flag.traces_url, "http://y:1/v1/traces", "the flag wins");
    }

    #[test]
    fn escapes_decode_and_a_bare_percent_stays() {
        assert_eq!(decode("a%25b%2Fc"), "a%b/c");
        assert_eq!(decode("100%"), "100%");
        assert_eq!(decode("%zz"), "%zz");
    }

    #[test]
    fn varints_and_fields_encode_as_protobuf_does() {
        let mut out = Vec::new();
        proto::varint_field(&mut out, 1, 150);
        assert_eq!(out, [0x08, 0x96, 0x01]);
        let mut out = Vec::new();
        proto::string(&mut out, 2, "testing");
        assert_eq!(out, [0x12, 0x07, b't', b'e', b's', b't', b'i', b'n', b'g']);
    }
}
