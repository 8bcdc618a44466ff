//! The shared HTTP client and the one retry policy every provider uses.
//! TODO(helper): implement retries.

use std::sync::{Arc, OnceLock};

/// A lazily built `reqwest::Client`, shared by every provider of a run (built on first use so
/// offline runs pay nothing for TLS set-up).
#[derive(Clone, Default)]
pub struct HttpClient {
    inner: Arc<OnceLock<reqwest::Client>>,
}

impl HttpClient {
    /// The client, built on first call.
    pub fn get(&self) -> &reqwest::Client {
        self.inner.get_or_init(|| {
            let _ = rustls::crypto::ring::default_provider().install_default();
            reqwest::Client::builder().build().unwrap_or_else(|_| reqwest::Client::new())
        })
    }
}
