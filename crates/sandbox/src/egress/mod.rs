//! The egress allowlist: `network = ["registry.example", "*.example.org"]` lets a task's
//! commands reach only those hosts, through a proxy dracode runs for the task.
//!
//! - [`allowlist`]: the patterns (`allow` and `deny`, deny wins) and the decision per host and
//!   per resolved address; [`address`]: which addresses are never "the internet" (loopback,
//!   private, link-local, metadata…) unless listed literally.
//! - [`resolve`]: the host checked, then resolved by dracode, then each address checked — shared
//!   by the proxy and `web_fetch`.
//! - [`proxy`]: the HTTP `CONNECT` / absolute-form proxy on `127.0.0.1:<random>`, one per task
//!   attempt, stopped with it.
//! - [`log`]: every refusal becomes a `network.denied` event and counts in `task.finished`.
//!
//! The sandbox does the other half: with an allowlist a command's policy has no network but the
//! proxy's address ([`crate::Policy::proxy`]), so a direct connection or a datagram
//! socket is refused by the supervisor, which reports it ([`crate::report`]).

pub mod address;
pub mod allowlist;
pub mod log;
pub mod proxy;
pub mod resolve;

pub use allowlist::{Allowlist, Host, HostPattern, Network, NetworkField, PatternError, Refusal};
pub use log::{Denial, Denials, NetworkLog, Phase};
pub use proxy::EgressProxy;

/// The variables that point a command's HTTP clients at the proxy at `url`
/// (`http://127.0.0.1:PORT`): the conventional ones (curl, git, Python, Go, pip, Deno…),
/// `NO_PROXY` emptied so that nothing bypasses it, and the package managers' own (npm, Yarn,
/// Cargo, pip, Node's built-in fetch).
pub fn proxy_env(url: &str) -> Vec<(&'static str, String)> {
    let mut env: Vec<(&'static str, String)> = [
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "ALL_PROXY",
        "http_proxy",
        "https_proxy",
        "all_proxy",
        "npm_config_proxy",
        "npm_config_https_proxy",
        "YARN_HTTP_PROXY",
        "YARN_HTTPS_PROXY",
        "CARGO_HTTP_PROXY",
        "PIP_PROXY",
    ]
    .into_iter()
    .map(|name| (name, url.to_string()))
    .collect();
    env.extend([("NO_PROXY", String::new()), ("no_proxy", String::new()), ("NODE_USE_ENV_PROXY", "1".to_string())]);
    env
}
