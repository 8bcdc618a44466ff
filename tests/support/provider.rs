//! Building providers directly (without config files) for provider-level scenarios.

use dracode_llm::http::RetryPolicy;
use dracode_llm::preset::{ProviderType, ResolvedProvider};
use std::time::Duration;

/// A provider of `kind` at `base_url` with `model` and, when given, `key`.
pub fn resolved(kind: ProviderType, base_url: &str, model: &str, key: Option<&str>) -> ResolvedProvider {
    ResolvedProvider {
        name: kind.as_str().into(),
        kind,
        model: Some(model.into()),
        base_url: Some(base_url.into()),
        api_key: key.map(str::to_string),
        timeout: Duration::from_secs(10),
        stream: true,
        max_tokens: None,
        reasoning: None,
        wire_api: None,
        headers: Default::default(),
        api_version: None,
        limits: Default::default(),
        replay_path: None,
        emptied: Default::default(),
    }
}

/// Short waits so retry scenarios run fast; `Retry-After` is still honoured exactly.
pub fn fast_retries() -> RetryPolicy {
    RetryPolicy {
        max_retries: 3,
        base_delay: Duration::from_millis(20),
        max_delay: Duration::from_millis(100),
        max_total_wait: Duration::from_secs(5),
    }
}
