//! The authorization server's key set: fetched bounded, parsed to usable signature
//! keys, cached with a TTL, refetch throttling and failure backoff. Knows nothing of
//! claims or of the tokens it verifies.

use std::collections::HashMap;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey};
use serde::Deserialize;
use serde_json::Value;
use tokio::time::Instant;

use super::invalid;
use crate::error::ApiError;

/// Largest JWKS document read from the network.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// How the JWKS cache behaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JwksPolicy {
    /// A fetched key set is used without refetching for this long.
    pub ttl: Duration,
    /// An unknown `kid` refetches the set at most this often (kid-spam resistance).
    pub min_refresh_interval: Duration,
    /// After a failed fetch, requests that need a fetch fail fast for this long.
    pub failure_backoff: Duration,
    /// Timeout of one JWKS request.
    pub fetch_timeout: Duration,
}

impl Default for JwksPolicy {
    fn default() -> Self {
        Self {
            ttl: Duration::from_secs(600),
            min_refresh_interval: Duration::from_secs(30),
            failure_backoff: Duration::from_secs(5),
            fetch_timeout: Duration::from_secs(5),
        }
    }
}

/// Why the key set could not be obtained. Reaches callers as the source of
/// `ApiError::Unavailable`.
#[derive(Debug, thiserror::Error)]
pub enum JwksError {
    #[error("JWKS request failed")]
    Request(#[source] reqwest::Error),
    #[error("JWKS endpoint answered HTTP {0}")]
    Status(u16),
    #[error("JWKS document exceeds {MAX_JWKS_BYTES} bytes")]
    TooLarge,
    #[error("JWKS document is not a JSON key set")]
    Document(#[source] serde_json::Error),
    #[error("JWKS document has no usable signing key")]
    NoUsableKeys,
}

/// The `Unavailable` source for a failed fetch; shared by every request that
/// waited on the same fetch.
#[derive(Debug, thiserror::Error)]
#[error("signing keys unavailable")]
struct KeysUnavailable(#[source] Arc<JwksError>);

fn unavailable(e: &Arc<JwksError>) -> ApiError {
    ApiError::Unavailable(Box::new(KeysUnavailable(e.clone())))
}

/// A public key from the JWKS with the algorithms it may verify.
pub(super) struct KeyEntry {
    pub(super) key: DecodingKey,
    pub(super) algorithms: Vec<Algorithm>,
}

#[derive(Default)]
struct CacheState {
    keys: HashMap<String, Arc<KeyEntry>>,
    /// Last successful fetch.
    fetched_at: Option<Instant>,
    /// Last fetch attempt, successful or not.
    attempted_at: Option<Instant>,
    /// The error of the last attempt, if it failed.
    failure: Option<Arc<JwksError>>,
    /// Incremented by every attempt; lets waiters see that a fetch happened.
    generation: u64,
}

impl CacheState {
    fn fresh(&self, now: Instant, ttl: Duration) -> bool {
        self.fetched_at.is_some_and(|t| now.saturating_duration_since(t) < ttl)
    }

    fn recent_failure(&self, now: Instant, backoff: Duration) -> Option<&Arc<JwksError>> {
        let recent = self.attempted_at.is_some_and(|t| now.saturating_duration_since(t) < backoff);
        self.failure.as_ref().filter(|_| recent)
    }
}

pub(super) struct JwksCache {
    pub(super) url: String,
    http: crate::outbound::LazyClient,
    policy: JwksPolicy,
    state: RwLock<CacheState>,
    /// Held across a fetch: concurrent refreshes wait and reuse its result.
    refresh: tokio::sync::Mutex<()>,
}

impl JwksCache {
    pub(super) fn new(url: String, http: crate::outbound::LazyClient, policy: JwksPolicy) -> Self {
        Self { url, http, policy, state: RwLock::new(CacheState::default()), refresh: tokio::sync::Mutex::new(()) }
    }

    /// The key `kid` names in the current set, without fetching: None once the set is
    /// past its TTL or no longer holds that key.
    pub(super) fn current(&self, kid: &str) -> Option<Arc<KeyEntry>> {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        if s.fresh(Instant::now(), self.policy.ttl) { s.keys.get(kid).cloned() } else { None }
    }

    pub(super) async fn key(&self, kid: &str) -> Result<Arc<KeyEntry>, ApiError> {
        let observed = {
            let now = Instant::now();
            let s = self.state.read().unwrap_or_else(|p| p.into_inner());
            if s.fresh(now, self.policy.ttl) {
                if let Some(k) = s.keys.get(kid) {
                    return Ok(k.clone());
                }
                let throttled =
                    s.attempted_at.is_some_and(|t| now.saturating_duration_since(t) < self.policy.min_refresh_interval);
                if throttled {
                    return Err(invalid("unknown_key"));
                }
            }
            if let Some(e) = s.recent_failure(now, self.policy.failure_backoff) {
                return Err(unavailable(e));
            }
            s.generation
        };

        let _refreshing = self.refresh.lock().await;
        {
            let s = self.state.read().unwrap_or_else(|p| p.into_inner());
            if s.generation != observed {
                // Another request fetched while this one waited: use its outcome.
                return match &s.failure {
                    Some(e) => Err(unavailable(e)),
                    None => s.keys.get(kid).cloned().ok_or(invalid("unknown_key")),
                };
            }
        }

        let result = self.fetch().await;
        let now = Instant::now();
        let mut s = self.state.write().unwrap_or_else(|p| p.into_inner());
        s.generation += 1;
        s.attempted_at = Some(now);
        match result {
            Ok(keys) => {
                tracing::debug!(keys = keys.len(), "JWKS refreshed");
                s.keys = keys;
                s.fetched_at = Some(now);
                s.failure = None;
                s.keys.get(kid).cloned().ok_or(invalid("unknown_key"))
            }
            Err(e) => {
                tracing::warn!(error = %e, "JWKS refresh failed");
                let e = Arc::new(e);
                s.failure = Some(e.clone());
                Err(unavailable(&e))
            }
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, Arc<KeyEntry>>, JwksError> {
        let mut response = self
            .http
            .get()
            .map_err(JwksError::Request)?
            .get(&self.url)
            .header(http::header::ACCEPT, "application/json")
            .timeout(self.policy.fetch_timeout)
            .send()
            .await
            .map_err(JwksError::Request)?;
        if !response.status().is_success() {
            return Err(JwksError::Status(response.status().as_u16()));
        }
        if response.content_length().is_some_and(|n| n > MAX_JWKS_BYTES as u64) {
            return Err(JwksError::TooLarge);
        }
        let mut body = Vec::new();
        while let Some(chunk) = response.chunk().await.map_err(JwksError::Request)? {
            if body.len() + chunk.len() > MAX_JWKS_BYTES {
                return Err(JwksError::TooLarge);
            }
            body.extend_from_slice(&chunk);
        }
        parse_jwks(&body)
    }
}

/// Parses a JWKS document, keeping only usable signature keys with a `kid`.
/// Keys this verifier cannot use (encryption keys, symmetric keys, unknown
/// types or curves) are skipped rather than failing the whole set.
fn parse_jwks(body: &[u8]) -> Result<HashMap<String, Arc<KeyEntry>>, JwksError> {
    #[derive(Deserialize)]
    struct RawSet {
        keys: Vec<Value>,
    }
    let raw: RawSet = serde_json::from_slice(body).map_err(JwksError::Document)?;
    let mut keys = HashMap::new();
    for value in raw.keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value) else {
            continue;
        };
        let Some(kid) = jwk.common.key_id.clone() else {
            continue;
        };
        if let Some(entry) = key_entry(&jwk) {
            keys.entry(kid).or_insert_with(|| Arc::new(entry));
        }
    }
    if keys.is_empty() {
        return Err(JwksError::NoUsableKeys);
    }
    Ok(keys)
}

fn key_entry(jwk: &Jwk) -> Option<KeyEntry> {
    if matches!(jwk.common.public_key_use, Some(PublicKeyUse::Encryption | PublicKeyUse::Other(_))) {
        return None;
    }
    let by_type: Vec<Algorithm> = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => AlgorithmFamily::Rsa.algorithms().to_vec(),
        AlgorithmParameters::EllipticCurve(p) => match p.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(p) if p.curve == EllipticCurve::Ed25519 => {
            vec![Algorithm::EdDSA]
        }
        // Symmetric keys never come from a key set; anything else is unsupported.
        _ => return None,
    };
    let algorithms = match jwk.common.key_algorithm {
        None => by_type,
        Some(declared) => match Algorithm::try_from(declared) {
            Ok(alg) if by_type.contains(&alg) => vec![alg],
            _ => return None,
        },
    };
    let key = DecodingKey::from_jwk(jwk).ok()?;
    Some(KeyEntry { key, algorithms })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn key_set_parsing_skips_unusable_keys_and_honours_declared_algorithms() {
        let keys = parse_jwks(
            br#"{"keys":[
                {"kty":"oct","k":"c2VjcmV0","kid":"sym"},
                {"kty":"RSA","n":"AQAB","e":"AQAB","kid":"enc","use":"enc"},
                {"kty":"RSA","n":"AQAB","e":"AQAB"},
                {"kty":"RSA","n":"AQAB","e":"AQAB","kid":"rs","alg":"RS256"},
                {"kty":"RSA","n":"AQAB","e":"AQAB","kid":"mismatch","alg":"ES256"},
                {"kty":"EC","crv":"P-256","x":"AQAB","y":"AQAB","kid":"ec"},
                {"kty":"weird","kid":"w"}
            ]}"#,
        )
        .unwrap();
        let mut kids: Vec<_> = keys.keys().cloned().collect();
        kids.sort();
        assert_eq!(kids, vec!["ec", "rs"]);
        assert_eq!(keys["rs"].algorithms, vec![Algorithm::RS256]);
        assert_eq!(keys["ec"].algorithms, vec![Algorithm::ES256]);
        assert!(matches!(parse_jwks(br#"{"keys":[]}"#), Err(JwksError::NoUsableKeys)));
        assert!(matches!(parse_jwks(b"[]"), Err(JwksError::Document(_))));
    }
}
