//! DPoP (RFC 9449): a per-run ES256 key proves possession of a DPoP-bound access token. Each
//! request (to the token endpoint, and every POST, GET and DELETE to the MCP server) carries its
//! own proof: a `dpop+jwt` with the public key, `htm`, `htu` (no query or fragment), `iat`, a
//! fresh `jti`, `ath` (the token's SHA-256) on resource requests, and the server's last
//! `DPoP-Nonce`.

use base64::Engine;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};
use std::sync::{Mutex, OnceLock};

const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// The run's proof key: generated once, never written anywhere.
pub struct DpopKey {
    pair: EcdsaKeyPair,
    jwk: Value,
    rng: ring::rand::SystemRandom,
}

impl DpopKey {
    /// The key of this run (generated on first use).
    pub fn for_run() -> Result<&'static DpopKey, String> {
        static KEY: OnceLock<Result<DpopKey, String>> = OnceLock::new();
        KEY.get_or_init(DpopKey::generate).as_ref().map_err(Clone::clone)
    }

    fn generate() -> Result<DpopKey, String> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).map_err(|_| "cannot make a DPoP key")?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).map_err(|_| "cannot make a DPoP key")?;
        // An uncompressed P-256 point: 0x04, then x and y of 32 bytes each.
        let point = pair.public_key().as_ref();
        let (x, y) = (point.get(1..33).unwrap_or_default(), point.get(33..65).unwrap_or_default());
        let jwk = json!({"kty": "EC", "crv": "P-256", "x": B64.encode(x), "y": B64.encode(y)});
        Ok(DpopKey { pair, jwk, rng })
    }

    /// A proof for `method` on `url`; `token` adds `ath`, `nonce` the server's nonce.
    pub fn proof(&self, method: &str, url: &str, token: Option<&str>, nonce: Option<&str>) -> Result<String, String> {
        let header = json!({"typ": "dpop+jwt", "alg": "ES256", "jwk": self.jwk});
        let mut jti = [0u8; 16];
        ring::rand::SecureRandom::fill(&self.rng, &mut jti).map_err(|_| "no randomness")?;
        let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
        let mut claims = json!({"htm": method, "htu": htu(url), "iat": now, "jti": B64.encode(jti)});
        if let Some(token) = token {
            claims["ath"] = json!(B64.encode(ring::digest::digest(&ring::digest::SHA256, token.as_bytes())));
        }
        if let Some(nonce) = nonce {
            claims["nonce"] = json!(nonce);
        }
        let signed = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let signature = self.pair.sign(&self.rng, signed.as_bytes()).map_err(|_| "signing a DPoP proof failed")?;
        Ok(format!("{signed}.{}", B64.encode(signature.as_ref())))
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
pub(crate) async fn token_request(request: reqwest::RequestBuilder, url: &str, dpop: bool) -> Result<(reqwest::StatusCode, Value), String> {
    let mut nonce: Option<String> = None;
    loop {
        let mut attempt = request.try_clone().ok_or("a token request cannot be repeated")?;
        if dpop {
            attempt = attempt.header("dpop", DpopKey::for_run()?.proof("POST", url, None, nonce.as_deref())?);
        }
        let response = attempt.send().await.map_err(|_| format!("cannot reach the token endpoint {url}"))?;
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
