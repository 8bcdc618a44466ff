//! DPoP (RFC 9449): a per-run ES256 key proves possession of a DPoP-bound access token. Each
//! request (to the token endpoint, and every POST, GET and DELETE to the MCP server) carries its
//! own proof: a `dpop+jwt` with the public key, `htm`, `htu` (no query or fragment), `iat`, a
//! fresh `jti`, `ath` (the token's SHA-256) on resource requests, and the server's last
//! `DPoP-Nonce`. The key and the signing are the ones `private_key_jwt` uses too (`es256`).

use super::TokenError;
use super::es256::{self, B64, Es256Error, Es256Key};
use base64::Engine;
use serde_json::{Value, json};
use std::sync::{Mutex, OnceLock};

/// The run's proof key: generated once, never written anywhere.
pub struct DpopKey {
    key: Es256Key,
    jwk: Value,
}

impl DpopKey {
    /// The key of this run (generated on first use).
    pub fn for_run() -> Result<&'static DpopKey, Es256Error> {
        static KEY: OnceLock<Result<DpopKey, Es256Error>> = OnceLock::new();
        KEY.get_or_init(DpopKey::generate).as_ref().map_err(Clone::clone)
    }

    fn generate() -> Result<DpopKey, Es256Error> {
        let key = Es256Key::generate()?;
        let jwk = key.public_jwk();
        Ok(DpopKey { key, jwk })
    }

    /// A proof for `method` on `url`; `token` adds `ath`, `nonce` the server's nonce.
    pub fn proof(&self, method: &str, url: &str, token: Option<&str>, nonce: Option<&str>) -> Result<String, Es256Error> {
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let jti = self.key.nonce()?;
        let mut claims = json!({"htm": method, "htu": htu(url), "iat": es256::now(), "jti": B64.encode(jti)});
        if let Some(token) = token {
            claims["ath"] = json!(B64.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes())));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        self.key.sign_jwt(&header, &claims, "a DPoP proof")
    }
}

/// `url` without its query and fragment (RFC 9449 §4.2).
fn htu(url: &str) -> String {
    match reqwest::Url::parse(url) {
        Ok(mut parsed) => {
            parsed.set_query(None);
            parsed.set_fragment(None);
            parsed.to_string()
        }
        Err(_) => url.split(['?', '#']).next().unwrap_or(url).to_string(),
    }
}

/// Whether an authorization server's metadata offers DPoP with ES256
/// (`dpop_signing_alg_values_supported`).
pub(crate) fn offered(metadata: &Value) -> bool {
    metadata.get("dpop_signing_alg_values_supported").and_then(Value::as_array).is_some_and(|algs| algs.iter().any(|a| a == "ES256"))
}

/// Sends a token request, with a proof when `dpop`; a `use_dpop_nonce` answer is retried once
/// with the server's nonce. Returns the status and the JSON answer.
pub(crate) async fn token_request(
    request: reqwest::RequestBuilder,
    url: &str,
    dpop: bool,
) -> Result<(reqwest::StatusCode, Value), TokenError> {
    let mut nonce: Option<String> = None;
    loop {
        let mut attempt = request.try_clone().ok_or(TokenError::NotRepeatable)?;
        if dpop {
            attempt = attempt.header("dpop", DpopKey::for_run()?.proof("POST", url, None, nonce.as_deref())?);
        }
        let response = attempt.send().await.map_err(|_| TokenError::Unreachable { url: url.to_string() })?;
        let status = response.status();
        let given = response.headers().get("dpop-nonce").and_then(|v| v.to_str().ok()).map(str::to_string);
        let answer: Value = response.json().await.unwrap_or_default();
        let asked = dpop && answer.get("error").and_then(Value::as_str) == Some("use_dpop_nonce");
        match given {
            Some(given) if asked && nonce.is_none() => nonce = Some(given),
            _ => return Ok((status, answer)),
        }
    }
}

/// The DPoP state of one server link: whether its token is DPoP-bound, and the nonce the MCP
/// server last gave.
#[derive(Default)]
pub struct Binding {
    state: Mutex<(Option<String>, Option<String>)>,
}

impl Binding {
    /// Binds proofs to `token` (a DPoP token), or stops proving (`None`: a bearer token).
    pub fn bind(&self, token: Option<String>) {
        if let Ok(mut state) = self.state.lock() {
            state.0 = token;
        }
    }

    /// Whether the token in use is DPoP-bound.
    pub fn is_bound(&self) -> bool {
        self.state.lock().map(|s| s.0.is_some()).unwrap_or(false)
    }

    /// Keeps the `DPoP-Nonce` of a response of the MCP server; `true` when there was one.
    pub fn learn(&self, headers: &reqwest::header::HeaderMap) -> bool {
        let nonce = headers.get("dpop-nonce").and_then(|v| v.to_str().ok());
        match (nonce, self.state.lock()) {
            (Some(nonce), Ok(mut state)) => {
                state.1 = Some(nonce.to_string());
                true
            }
            _ => false,
        }
    }

    /// A fresh proof for `method` on `url` when the token is DPoP-bound.
    pub fn proof(&self, method: &str, url: &str) -> Option<String> {
        let (token, nonce) = self.state.lock().ok()?.clone();
        DpopKey::for_run().ok()?.proof(method, url, Some(token?.as_str()), nonce.as_deref()).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_proof_has_the_claims_and_verifies_with_its_own_key() {
        let key = DpopKey::for_run().unwrap();
        let proof = key.proof("POST", "http://h:1/mcp?x=1#f", Some("tok"), Some("n1")).unwrap();
        let parts: Vec<&str> = proof.split('.').collect();
        let header: Value = serde_json::from_slice(&B64.decode(parts[0]).unwrap()).unwrap();
        let claims: Value = serde_json::from_slice(&B64.decode(parts[1]).unwrap()).unwrap();
        assert_eq!((header["typ"].as_str(), claims["htu"].as_str()), (Some("dpop+jwt"), Some("http://h:1/mcp")));
        assert_eq!(claims["ath"], B64.encode(ring::digest::digest(&ring::digest::SHA256, b"tok")));
        assert_eq!((claims["htm"].as_str(), claims["nonce"].as_str()), (Some("POST"), Some("n1")));
        let point = [
            vec![4u8],
            B64.decode(header["jwk"]["x"].as_str().unwrap()).unwrap(),
            B64.decode(header["jwk"]["y"].as_str().unwrap()).unwrap(),
        ]
        .concat();
        let public = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point);
        public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &B64.decode(parts[2]).unwrap()).unwrap();
        assert_ne!(proof, key.proof("POST", "http://h:1/mcp", Some("tok"), Some("n1")).unwrap(), "a fresh jti each time");
    }
}
