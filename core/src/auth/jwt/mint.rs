//! Local HS256 tokens for development and tests; the config refuses the secret in
//! production, so nothing here runs there.

use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::json;

use crate::config::Secret;

/// Mints a token for the local HS256 path (development and tests only: the
/// config refuses the local secret in production). The verifier built from the
/// same config accepts it.
///
/// # Panics
///
/// If `secret` is empty, which the config never allows.
pub fn mint_local_hs256(
    secret: &Secret,
    issuer: &str,
    audience: &str,
    subject: &str,
    tenant: &str,
    scopes: &[String],
    ttl_secs: i64,
) -> String {
    let now = chrono::Utc::now().timestamp();
    let claims = json!({
        "iss": issuer,
        "aud": audience,
        "sub": subject,
        "tenant_id": tenant,
        "scope": scopes.join(" "),
        "iat": now,
        "nbf": now,
        "exp": now.saturating_add(ttl_secs),
    });
    let key = EncodingKey::from_secret(secret.expose().as_bytes())
        .expect("the local HS256 secret is never empty (the config requires 32 characters)");
    jsonwebtoken::encode(&Header::new(Algorithm::HS256), &claims, &key)
        .expect("HMAC signing of a JSON object cannot fail")
}
