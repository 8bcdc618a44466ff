//! How a client proves who it is at the token endpoint (`client_secret_basic`,
//! `client_secret_post`, a `private_key_jwt` assertion, or just its id), and the form encoding
//! every token request (and Basic auth of a client) uses.

use super::ClientSecret;
use super::discovery::Discovered;
use base64::Engine;

/// The client a token request is made as: the configured one, or one registered dynamically.
#[derive(Clone)]
pub(super) struct TokenClient {
    /// Its id (empty: none is sent).
    pub(super) id: String,
    /// How it proves who it is.
    pub(super) secret: ClientSecret,
    /// Its registered `token_endpoint_auth_method`; `None`: the server's metadata decides.
    pub(super) method: Option<String>,
}

/// Adds `client`'s proof of identity to a token request: Basic auth, or fields of `form`
/// (`client_secret_post` when registered so, or when that is all the server takes).
pub(super) fn authenticate(
    request: reqwest::RequestBuilder,
    form: &mut Vec<(&'static str, String)>,
    client: &TokenClient,
    found: &Discovered,
) -> Result<reqwest::RequestBuilder, String> {
    let methods = &found.methods;
    let post = match client.method.as_deref() {
        Some(method) => method == "client_secret_post",
        None => {
            !methods.is_empty() && !methods.iter().any(|m| m == "client_secret_basic") && methods.iter().any(|m| m == "client_secret_post")
        }
    };
    match &client.secret {
        ClientSecret::PrivateKey(pem) => {
            form.push(("client_id", client.id.clone()));
            form.push(("client_assertion_type", "urn:ietf:params:oauth:client-assertion-type:jwt-bearer".into()));
            form.push(("client_assertion", client_assertion(&client.id, &found.issuer, pem)?));
        }
        ClientSecret::Secret(secret) if post => {
            form.push(("client_id", client.id.clone()));
            form.push(("client_secret", secret.clone()));
        }
        ClientSecret::Secret(secret) => {
            let pair = format!("{}:{}", encode(&client.id), encode(secret));
            let basic = format!("Basic {}", base64::engine::general_purpose::STANDARD.encode(pair));
            return Ok(request.header("authorization", basic));
        }
        ClientSecret::None if !client.id.is_empty() => form.push(("client_id", client.id.clone())),
        ClientSecret::None => {}
    }
    Ok(request)
}

/// An ES256 client assertion (RFC 7523) by `client_id` for `audience`, signed with `pem`.
pub(super) fn client_assertion(client_id: &str, audience: &str, pem: &str) -> Result<String, String> {
    use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair};
    let b64 = base64::engine::general_purpose::URL_SAFE_NO_PAD;
    let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
    let der = base64::engine::general_purpose::STANDARD.decode(body).map_err(|_| "`oauth.private_key` is not a PEM key".to_string())?;
    let rng = ring::rand::SystemRandom::new();
    let key = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng)
        .map_err(|_| "`oauth.private_key` is not an EC P-256 key in PKCS#8".to_string())?;
    let mut nonce = [0u8; 16];
    ring::rand::SecureRandom::fill(&rng, &mut nonce).map_err(|_| "no randomness".to_string())?;
    let now = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0);
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 300,
        "jti": nonce.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    });
    let signed = format!("{}.{}", b64.encode(r#"{"alg":"ES256","typ":"JWT"}"#), b64.encode(claims.to_string()));
    let signature = key.sign(&rng, signed.as_bytes()).map_err(|_| "signing the client assertion failed".to_string())?;
    Ok(format!("{signed}.{}", b64.encode(signature.as_ref())))
}

/// `application/x-www-form-urlencoded` of `text` (also what Basic auth of a client wants).
pub(super) fn encode(text: &str) -> String {
    percent_encoding::utf8_percent_encode(text, dracode_llm::wire::UNRESERVED).to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn form_values_are_percent_encoded() {
        assert_eq!(encode("a b&c"), "a%20b%26c");
    }
}
