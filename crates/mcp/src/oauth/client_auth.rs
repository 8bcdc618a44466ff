//! How a client proves who it is at the token endpoint (`client_secret_basic`,
//! `client_secret_post`, a `private_key_jwt` assertion, or just its id), and the form encoding
//! every token request (and Basic auth of a client) uses.

use super::ClientSecret;
use super::discovery::Discovered;
use super::es256::{self, Es256Error, Es256Key};
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
) -> Result<reqwest::RequestBuilder, Es256Error> {
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
pub(super) fn client_assertion(client_id: &str, audience: &str, pem: &str) -> Result<String, Es256Error> {
    let key = Es256Key::from_pem(pem)?;
    let nonce = key.nonce()?;
    let now = es256::now();
    let claims = serde_json::json!({
        "iss": client_id, "sub": client_id, "aud": audience, "iat": now, "exp": now + 300,
        "jti": nonce.iter().map(|b| format!("{b:02x}")).collect::<String>(),
    });
    key.sign_jwt(&serde_json::json!({"alg": "ES256", "typ": "JWT"}), &claims, "the client assertion")
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
