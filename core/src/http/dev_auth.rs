//! The development issuer, hosted by `helix serve` in development mode on loopback only:
//! one authorization server for people (the browser's sign-in, `dev_oidc`) and agents
//! (`dev_register`, `dev_authorize`, `dev_token`), at the base URL. Its tokens are ES256
//! JWTs signed by a key generated once into the data dir and published at [`JWKS_PATH`],
//! so the resource server verifies them through the same JWKS verifier a production
//! issuer uses. This file holds the key, the paths and the metadata; `dev_routes` composes
//! the routes and `dev_token` holds the issuer's state.

use aws_lc_rs::signature::{ECDSA_P256_SHA256_FIXED_SIGNING, EcdsaKeyPair, KeyPair};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

use super::AppState;
use crate::domain::scopes::all_oauth_scopes;
use crate::domain::sha256_hex;

/// Where the key set of the development issuer is published.
pub const JWKS_PATH: &str = "/oauth/jwks";
/// Its endpoints, on the issuer (the local base URL).
pub const AUTHORIZE_PATH: &str = "/authorize";
pub const TOKEN_PATH: &str = "/token";
pub const REGISTER_PATH: &str = "/register";

/// Where clients look for the issuer's metadata: RFC 8414, its OpenID alias, and the
/// path-suffixed forms clients derive from the MCP URL.
pub const METADATA_PATHS: [&str; 5] = [
    "/.well-known/oauth-authorization-server",
    "/.well-known/oauth-authorization-server/mcp",
    "/.well-known/openid-configuration",
    "/.well-known/openid-configuration/mcp",
    "/mcp/.well-known/openid-configuration",
];

/// The development issuer's ES256 (P-256) signing key.
pub struct DevAuthKey {
    encoding: EncodingKey,
    x: String,
    y: String,
    kid: String,
}

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
        Ok(Self {
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

    /// A compact ES256 JWS of the claims.
    pub fn sign(&self, claims: &Value) -> String {
        let mut header = Header::new(Algorithm::ES256);
        header.kid = Some(self.kid.clone());
        jsonwebtoken::encode(&header, claims, &self.encoding).expect("ES256 signing of a JSON object")
    }
}

/// The issuer identifier: the local base URL.
pub fn issuer_url(state: &AppState) -> String {
    state.services.config.public_base_url.clone()
}

/// The RFC 8414 document. `authorization_response_iss_parameter_supported` is left out
/// on purpose: a client that drops `iss` from the callback would otherwise be refused.
pub fn metadata_document(state: &AppState) -> Value {
    let iss = issuer_url(state);
    let mut scopes = all_oauth_scopes();
    scopes.push(OFFLINE_ACCESS);
    json!({
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
        "scopes_supported": scopes,
        "subject_types_supported": ["public"],
        "id_token_signing_alg_values_supported": ["ES256"],
        "service_documentation": format!("{iss}/agent-access"),
    })
}

/// The scope that asks for a refresh token.
pub const OFFLINE_ACCESS: &str = "offline_access";

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
}
