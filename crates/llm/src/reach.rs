//! Whether a provider's endpoint can be reached, found without sending a request: a TCP
//! connection to its host and port, opened and closed — the first step of every call. A run
//! asks before its setup ([`reach`]), so a dead endpoint ends the tasks at once rather than
//! after minutes of setup and `check_before`.
//!
//! Connections that fail are retried as a call's are ([`RetryPolicy::default`], full-jitter
//! backoff), each bounded by the provider's `timeout`: an endpoint a call would have reached
//! after a retry (a local server still starting) passes. Not probed: `replay` (no endpoint),
//! and any endpoint when a proxy variable is set (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, in
//! either case): calls then connect to the proxy, not to the endpoint.

use super::http::{RetryPolicy, random_unit};
use super::preset::{Env, ResolvedProvider, WireApi};
use super::{ErrorKind, LlmError};

/// Variables that send the HTTP client's calls through a proxy.
const PROXY_VARS: [&str; 6] = ["HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"];

/// `Ok` when the endpoint of `resolved` accepts a TCP connection (or is not probed, see the
/// module doc); else a `network` error naming the provider, the host and port (never the URL,
/// which may hold credentials) and why, after the retries a call would make. `env` is the
/// process environment.
pub async fn reach(resolved: &ResolvedProvider, env: &Env) -> Result<(), LlmError> {
    let Some(address) = address(resolved, env) else { return Ok(()) };
    let policy = RetryPolicy::default();
    let mut tries = 0;
    loop {
        tries += 1;
        let why = match tokio::time::timeout(resolved.timeout, tokio::net::TcpStream::connect(address.as_str())).await {
            Ok(Ok(_)) => return Ok(()),
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!("no answer in {:?}", resolved.timeout),
        };
        if tries > policy.max_retries {
            let message = format!("provider {:?}: cannot connect to {address}: {why} (gave up after {tries} tries)", resolved.name);
            return Err(LlmError::new(ErrorKind::Network, message));
        }
        tokio::time::sleep(policy.backoff(tries, random_unit())).await;
    }
}

/// `host:port` of the endpoint to probe; `None` when it is not probed.
fn address(resolved: &ResolvedProvider, env: &Env) -> Option<String> {
    if resolved.kind.preset().wire == WireApi::Replay || PROXY_VARS.iter().any(|v| env.get(*v).is_some_and(|p| !p.trim().is_empty())) {
        return None;
    }
    let url = reqwest::Url::parse(resolved.base_url.as_deref()?).ok()?;
    // An IPv6 host keeps its brackets: `[::1]:11434` is what `connect` parses.
    Some(format!("{}:{}", url.host_str()?, url.port_or_known_default()?))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::preset::ProviderType;

    fn openai_at(url: &str) -> ResolvedProvider {
        ResolvedProvider {
            name: "own".into(),
            timeout: std::time::Duration::from_secs(2),
            ..ResolvedProvider::for_test(ProviderType::Openai, "m", url)
        }
    }

    #[test]
    fn the_address_is_the_endpoints_host_and_port_unless_a_proxy_is_set() {
        let none = Env::new();
        assert_eq!(address(&openai_at("http://127.0.0.1:9/v1"), &none).as_deref(), Some("127.0.0.1:9"));
        assert_eq!(address(&openai_at("https://u:secret@example.test/v1"), &none).as_deref(), Some("example.test:443"));
        assert_eq!(address(&openai_at("http://[::1]:8000"), &none).as_deref(), Some("[::1]:8000"));
        let proxied = Env::from([("https_proxy".to_string(), "http://proxy:3128".to_string())]);
        assert_eq!(address(&openai_at("http://127.0.0.1:9/v1"), &proxied), None);
        let replay = ResolvedProvider { kind: ProviderType::Replay, ..openai_at("http://127.0.0.1:9/v1") };
        assert_eq!(address(&replay, &none), None, "replay has no endpoint");
    }

    #[test]
    fn a_listening_endpoint_is_reached_without_a_request() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let open = format!("http://{}/v1", listener.local_addr().unwrap());
        let runtime = tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap();
        assert!(runtime.block_on(reach(&openai_at(&open), &Env::new())).is_ok());
        let (mut stream, _) = listener.accept().unwrap();
        let mut sent = Vec::new();
        std::io::Read::read_to_end(&mut stream, &mut sent).unwrap();
        assert!(sent.is_empty(), "connected and closed, nothing sent");
    }
}
