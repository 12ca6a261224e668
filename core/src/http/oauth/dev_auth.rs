//! The development issuer, hosted by `helix serve` in development mode on loopback only:
//! one authorization server for people (the browser's sign-in, `dev_oidc`) and agents
//! (`dev_register`, `dev_authorize`, `dev_token`), at the base URL. Its tokens are ES256
//! JWTs signed by a key generated once into the data dir and published at [`JWKS_PATH`],
//! so the resource server verifies them through the same JWKS verifier a production
//! issuer uses. This file holds the key, the paths and the metadata; `dev_routes` composes
//! the routes and `dev_token` holds the issuer's state.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use aws_lc_rs::{hkdf, hmac};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use crate::domain::scopes::all_oauth_scopes;
use crate::domain::sha256_hex;
use crate::http::AppState;

/// Where the key set of the development issuer is published.
pub const JWKS_PATH: &str = "/oauth/jwks";
/// Its endpoints, on the issuer (the local base URL).
pub const AUTHORIZE_PATH: &str = "/authorize";
pub const TOKEN_PATH: &str = "/token";
pub const REGISTER_PATH: &str = "/register";

/// Where clients look for the issuer's metadata: RFC 8414 and the path-suffixed form
/// clients derive from the MCP URL.
pub const METADATA_PATHS: [&str; 2] =
    ["/.well-known/oauth-authorization-server", "/.well-known/oauth-authorization-server/mcp"];
/// Its OpenID alias and the forms clients derive from the MCP URL: served only while the
/// issuer is an OpenID provider (the browser's sign-in is on).
pub const OPENID_METADATA_PATHS: [&str; 3] = [
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
];

/// The development issuer's ES256 (P-256) signing key, and the HMAC key derived from it
/// that seals the values its pages carry from one request to the next (so they survive a
/// restart as the key does).
pub struct DevAuthKey {
    encoding: EncodingKey,
    x: String,
    y: String,
    kid: String,
    seal: hmac::Key,
}

/// The longest sealed value [`DevAuthKey::open`] reads.
const MAX_SEALED_CHARS: usize = 8 * 1024;

impl std::fmt::Debug for DevAuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("DevAuthKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl DevAuthKey {
    /// A new private key as an unencrypted PKCS#8 v1 document (to be kept owner-only).
    pub fn generate_pkcs8() -> Vec<u8> {
        EcdsaKeyPair::generate(&ECDSA_P256_SHA256_FIXED_SIGNING)
            .and_then(|k| k.to_pkcs8v1())
            .expect("P-256 key generation")
            .as_ref()
            .to_vec()
    }

    /// The key in a PKCS#8 document, or why it is not a P-256 private key.
    pub fn from_pkcs8(pkcs8: &[u8]) -> Result<Self, String> {
        let pair = EcdsaKeyPair::from_pkcs8(&ECDSA_P256_SHA256_FIXED_SIGNING, pkcs8)
            .map_err(|e| format!("not a P-256 PKCS#8 private key: {e}"))?;
        // An uncompressed SEC1 point: 0x04 || x (32 bytes) || y (32 bytes).
        let point = pair.public_key().as_ref();
        if point.len() != 65 || point[0] != 4 {
            return Err("unexpected public key encoding".into());
        }
        let seal = hkdf::Salt::new(hkdf::HKDF_SHA256, b"helix development issuer")
            .extract(pkcs8)
            .expand(&[b"sealed form values"], hmac::HMAC_SHA256)
            .map(hmac::Key::from)
            .map_err(|_| "key derivation failed".to_owned())?;
        Ok(Self {
            seal,
            encoding: EncodingKey::from_ec_der(pkcs8),
            x: B64.encode(&point[1..33]),
            y: B64.encode(&point[33..]),
            kid: sha256_hex(point)[..16].to_owned(),
        })
    }

    /// The public key set (one key).
    pub fn jwks(&self) -> Value {
        json!({ "keys": [{
            "kty": "EC", "crv": "P-256", "use": "sig", "alg": "ES256", "kid": self.kid,
            "x": self.x, "y": self.y,
        }] })
    }

    /// `payload` with its HMAC-SHA256 tag: `base64url(payload).base64url(tag)`. Readable
    /// by whoever holds it (it carries nothing secret); only this key makes one.
    pub fn seal(&self, payload: &[u8]) -> String {
        let body = B64.encode(payload);
        let tag = hmac::sign(&self.seal, body.as_bytes());
        format!("{body}.{}", B64.encode(tag.as_ref()))
    }

    /// The payload of a value [`Self::seal`] made, or None (altered, another key's, too long).
    pub fn open(&self, sealed: &str) -> Option<Vec<u8>> {
        if sealed.len() > MAX_SEALED_CHARS {
            return None;
        }
        let (body, tag) = sealed.split_once('.')?;
        hmac::verify(&self.seal, body.as_bytes(), &B64.decode(tag).ok()?).ok()?;
        B64.decode(body).ok()
    }

    /// A compact ES256 JWS of the claims.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("ES256 signing of a JSON object")
    }
}

/// The key the development issuer signs ID tokens with: RSA-2048, RS256, the algorithm
/// OpenID Connect makes every provider support (and the default of a client that names
/// none). Made when the process starts: ID tokens are verified within minutes of the
/// sign-in they belong to, whose codes live in memory too.
pub struct IdTokenKey {
    pair: aws_lc_rs::rsa::KeyPair,
    n: String,
    e: String,
    kid: String,
}

impl std::fmt::Debug for IdTokenKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IdTokenKey").field("kid", &self.kid).finish_non_exhaustive()
    }
}

impl IdTokenKey {
    pub fn generate() -> Self {
        use aws_lc_rs::rsa::{KeyPair as RsaKeyPair, KeySize, PublicKeyComponents};
        let pair = RsaKeyPair::generate(KeySize::Rsa2048).expect("RSA-2048 key generation");
        let public: PublicKeyComponents<Vec<u8>> = pair.public_key().into();
        let kid = format!("rs-{}", &sha256_hex(pair.public_key().as_ref())[..16]);
        Self { n: B64.encode(&public.n), e: B64.encode(&public.e), kid, pair }
    }

    /// The public key as a JWK.
    pub fn jwk(&self) -> Value {
        json!({ "kty": "RSA", "use": "sig", "alg": "RS256", "kid": self.kid, "n": self.n, "e": self.e })
    }

    /// A compact RS256 JWS of the claims.
    pub fn sign(&self, claims: &Value) -> String {
        let header = json!({ "alg": "RS256", "typ": "JWT", "kid": self.kid });
        let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let mut sig = vec![0; self.pair.public_modulus_len()];
        let rng = aws_lc_rs::rand::SystemRandom::new();
        self.pair
            .sign(&aws_lc_rs::signature::RSA_PKCS1_SHA256, &rng, input.as_bytes(), &mut sig)
            .expect("RS256 signing");
        format!("{input}.{}", B64.encode(sig))
    }
}

/// The issuer identifier: the local base URL.
pub fn issuer_url(state: &AppState) -> String {
    state.services.config.public_base_url.clone()
}

/// The RFC 8414 document. `authorization_response_iss_parameter_supported` is left out
/// on purpose: a client that drops `iss` from the callback would otherwise be refused.
/// With `openid` (the browser's sign-in is on: the issuer is then an OpenID provider too)
/// it is also an OpenID Connect Discovery 1.0 document: its ID tokens are RS256, which
/// that specification requires every provider to list.
pub fn metadata_document(state: &AppState, openid: bool) -> Value {
    let iss = issuer_url(state);
    let mut scopes = all_oauth_scopes();
    scopes.push(OFFLINE_ACCESS);
    let mut doc = json!({
        "issuer": iss,
        "authorization_endpoint": format!("{iss}{AUTHORIZE_PATH}"),
        "token_endpoint": format!("{iss}{TOKEN_PATH}"),
        "registration_endpoint": format!("{iss}{REGISTER_PATH}"),
        "jwks_uri": format!("{iss}{JWKS_PATH}"),
        "response_types_supported": ["code"],
        "response_modes_supported": ["query"],
        "grant_types_supported": ["authorization_code", "refresh_token"],
        "code_challenge_methods_supported": ["S256"],
        "token_endpoint_auth_methods_supported": ["none"],
        "client_id_metadata_document_supported": state.services.config.browser.dev_client_metadata,
        "scopes_supported": scopes,
        "service_documentation": format!("{iss}/agent-access"),
    });
    if openid {
        doc["subject_types_supported"] = json!(["public"]);
        doc["id_token_signing_alg_values_supported"] = json!(["RS256"]);
    }
    doc
}

/// The scope that asks for a refresh token.
pub const OFFLINE_ACCESS: &str = "offline_access";

/// The RFC 8707 `resource` of a request: absent means this server's only resource; every
/// value given (it may be repeated) must be the canonical resource.
pub(super) fn resource_ok(state: &AppState, pairs: &[(String, String)]) -> bool {
    pairs.iter().filter(|(k, _)| k == "resource").all(|(_, v)| v == &state.services.config.resource)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_generated_key_round_trips_and_its_jwk_verifies_its_signatures() {
        let pkcs8 = DevAuthKey::generate_pkcs8();
        let key = DevAuthKey::from_pkcs8(&pkcs8).unwrap();
        assert_eq!(DevAuthKey::from_pkcs8(&pkcs8).unwrap().kid, key.kid, "the same key after a reload");
        let token = key.sign(&json!({ "sub": "s", "exp": 4_000_000_000i64 }));
        let set: jsonwebtoken::jwk::JwkSet = serde_json::from_value(key.jwks()).unwrap();
        let decoding = jsonwebtoken::DecodingKey::from_jwk(&set.keys[0]).unwrap();
        let mut v = jsonwebtoken::Validation::new(Algorithm::ES256);
        v.validate_aud = false;
        v.required_spec_claims.clear();
        assert!(jsonwebtoken::decode::<Value>(&token, &decoding, &v).is_ok());
        let other = DevAuthKey::from_pkcs8(&DevAuthKey::generate_pkcs8()).unwrap();
        assert!(jsonwebtoken::decode::<Value>(&other.sign(&json!({ "sub": "s" })), &decoding, &v).is_err());
        assert!(DevAuthKey::from_pkcs8(b"not a key").is_err());
        assert!(!format!("{key:?}").contains(&key.x), "Debug shows the kid only");
    }

    #[test]
    fn a_sealed_value_opens_only_unaltered_and_under_its_own_key() {
        let pkcs8 = DevAuthKey::generate_pkcs8();
        let key = DevAuthKey::from_pkcs8(&pkcs8).unwrap();
        let sealed = key.seal(b"{\"a\":1}");
        assert_eq!(key.open(&sealed).as_deref(), Some(&b"{\"a\":1}"[..]));
        assert_eq!(DevAuthKey::from_pkcs8(&pkcs8).unwrap().open(&sealed).as_deref(), Some(&b"{\"a\":1}"[..]));
        let (body, tag) = sealed.split_once('.').unwrap();
        let other = DevAuthKey::from_pkcs8(&DevAuthKey::generate_pkcs8()).unwrap();
        for bad in [
            other.seal(b"{\"a\":1}"),
            format!("{}.{tag}", B64.encode(b"{\"a\":2}")),
            format!("{body}.{}", &tag[1..]),
            body.to_owned(),
            format!("{body}.{tag}{}", "A".repeat(MAX_SEALED_CHARS)),
        ] {
            assert!(key.open(&bad).is_none(), "{bad}");
        }
    }
}
