//! ES256 (ECDSA on P-256 with SHA-256) JWTs: the one signing home of `private_key_jwt` client
//! assertions ([`super::client_auth`], a configured PKCS#8 key) and DPoP proofs
//! ([`super::dpop`], a key generated for the run).

use base64::Engine;
use ring::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use serde_json::{Value, json};

/// The JWT encoding of every part: base64url without padding.
pub(super) const B64: base64::engine::GeneralPurpose = base64::engine::general_purpose::URL_SAFE_NO_PAD;

/// Why an ES256 key could not be read or made, or a JWT not signed.
#[derive(Debug, Clone, thiserror::Error)]
pub enum Es256Error {
    /// `oauth.private_key` is not base64 between PEM lines.
    #[error("`oauth.private_key` is not a PEM key")]
    NotPem,
    /// `oauth.private_key` decodes, but not to an EC P-256 key in PKCS#8.
    #[error("`oauth.private_key` is not an EC P-256 key in PKCS#8")]
    NotP256Pkcs8,
    /// The run's DPoP key could not be generated.
    #[error("cannot make a DPoP key")]
    KeyGeneration,
    /// The system's random source failed.
    #[error("no randomness")]
    NoRandomness,
    /// Signing failed; it names what was signed.
    #[error("signing {0} failed")]
    Signing(&'static str),
}

/// An EC P-256 key pair and the random source it signs with.
pub(super) struct Es256Key {
    pair: EcdsaKeyPair,
    rng: ring::rand::SystemRandom,
}

impl Es256Key {
    /// The key of `pem` (PKCS#8, as `oauth.private_key` holds it).
    pub(super) fn from_pem(pem: &str) -> Result<Es256Key, Es256Error> {
        let body: String = pem.lines().filter(|l| !l.starts_with("-----")).map(str::trim).collect();
        let der = base64::engine::general_purpose::STANDARD.decode(body).map_err(|_| Es256Error::NotPem)?;
        let rng = ring::rand::SystemRandom::new();
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &der, &rng).map_err(|_| Es256Error::NotP256Pkcs8)?;
        Ok(Es256Key { pair, rng })
    }

    /// A fresh key, never written anywhere.
    pub(super) fn generate() -> Result<Es256Key, Es256Error> {
        let rng = ring::rand::SystemRandom::new();
        let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, &rng).map_err(|_| Es256Error::KeyGeneration)?;
        let pair =
            EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8.as_ref(), &rng).map_err(|_| Es256Error::KeyGeneration)?;
        Ok(Es256Key { pair, rng })
    }

    /// The public key as a JWK (RFC 7518 §6.2).
    pub(super) fn public_jwk(&self) -> Value {
        // An uncompressed P-256 point: 0x04, then x and y of 32 bytes each.
        let point = self.pair.public_key().as_ref();
        let (x, y) = (point.get(1..33).unwrap_or_default(), point.get(33..65).unwrap_or_default());
        json!({"kty": "EC", "crv": "P-256", "x": B64.encode(x), "y": B64.encode(y)})
    }

    /// 16 random bytes, for a `jti`.
    pub(super) fn nonce(&self) -> Result<[u8; 16], Es256Error> {
        let mut bytes = [0u8; 16];
        ring::rand::SecureRandom::fill(&self.rng, &mut bytes).map_err(|_| Es256Error::NoRandomness)?;
        Ok(bytes)
    }

    /// The compact JWT of `header` and `claims`, signed; `what` names it in an error.
    pub(super) fn sign_jwt(&self, header: &Value, claims: &Value, what: &'static str) -> Result<String, Es256Error> {
        let signed = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let signature = self.pair.sign(&self.rng, signed.as_bytes()).map_err(|_| Es256Error::Signing(what))?;
        Ok(format!("{signed}.{}", B64.encode(signature.as_ref())))
    }
}

/// Seconds since the Unix epoch (0 before it), for `iat` and `exp`.
pub(super) fn now() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.as_secs()).unwrap_or(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_signed_jwt_verifies_with_the_public_jwk() {
        let key = Es256Key::generate().unwrap();
        let jwt = key.sign_jwt(&json!({"alg": "ES256"}), &json!({"n": 1}), "a test").unwrap();
        let parts: Vec<&str> = jwt.split('.').collect();
        assert_eq!(B64.decode(parts[1]).unwrap(), br#"{"n":1}"#);
        let jwk = key.public_jwk();
        let x = B64.decode(jwk["x"].as_str().unwrap()).unwrap();
        let y = B64.decode(jwk["y"].as_str().unwrap()).unwrap();
        let point = [vec![4u8], x, y].concat();
        let public = ring::signature::UnparsedPublicKey::new(&ring::signature::ECDSA_P256_SHA256_FIXED, point);
        public.verify(format!("{}.{}", parts[0], parts[1]).as_bytes(), &B64.decode(parts[2]).unwrap()).unwrap();
        assert!(matches!(Es256Key::from_pem("-----BEGIN-----\n!!\n-----END-----"), Err(Es256Error::NotPem)));
        assert_eq!(
            Es256Key::from_pem("AAAA").err().map(|e| e.to_string()).as_deref(),
            Some("`oauth.private_key` is not an EC P-256 key in PKCS#8")
        );
    }
}
