//! Bearer verification: a JWT access token becomes a [`VerifiedToken`] (issuer,
//! subject, signed tenant, scopes) or an `invalid_token` with a stable reason.
//!
//! Production tokens are verified against the authorization server's JWKS with one
//! of the admitted asymmetric algorithms. HS256 is accepted only when the
//! configuration carries a local secret, which the config refuses in production.
//! Claims are checked here, not by `jsonwebtoken`'s validation, so every rule
//! (exact issuer, tenant claims, bounds) is explicit and maps to one reason.
//!
//! Never log, echo or keep the token: errors carry static reasons only.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Duration;

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, EncodingKey, Header, Validation, errors::ErrorKind};
use serde::Deserialize;
use serde_json::{Map, Value, json};
use sha2::Digest;
use tokio::time::Instant;

use crate::config::{OAuthConfig, Secret};
use crate::error::ApiError;

/// Longest bearer accepted; longer is `malformed` before any parsing.
pub const MAX_BEARER_BYTES: usize = 8 * 1024;
/// Clock skew tolerated on `exp` and `nbf`.
pub const CLOCK_LEEWAY_SECS: i64 = 30;
/// Longest `sub` and tenant claim, in characters.
pub const MAX_IDENTIFIER_CHARS: usize = 256;
/// Largest JWKS document read from the network.
pub const MAX_JWKS_BYTES: usize = 256 * 1024;

/// Tenant claim names, in precedence order. All present ones must agree.
pub const TENANT_CLAIMS: [&str; 6] = ["tenantId", "tenant_id", "customerId", "customer_id", "orgId", "org_id"];

/// A verified access token. Holds no token material; `Debug` leaves out the
/// subject and tenant so a logged value cannot identify the caller.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifiedToken {
    pub issuer: String,
    pub subject: String,
    pub tenant: String,
    pub scopes: Vec<String>,
    /// `exp`, epoch seconds.
    pub expires_at: i64,
}

impl std::fmt::Debug for VerifiedToken {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedToken")
            .field("issuer", &self.issuer)
            .field("subject", &"<redacted>")
            .field("tenant", &"<redacted>")
            .field("scopes", &self.scopes)
            .field("expires_at", &self.expires_at)
            .finish()
    }
}

/// The optional tenant headers of a request (`X-Tenant-Id`, `X-Customer-Id`,
/// `X-Org-Id`). Each one supplied must equal the signed tenant; none of them can
/// establish or override tenancy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct TenantHeaders<'a> {
    pub tenant_id: Option<&'a str>,
    pub customer_id: Option<&'a str>,
    pub org_id: Option<&'a str>,
}

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

fn invalid(reason: &'static str) -> ApiError {
    ApiError::InvalidToken { reason }
}

/// A public key from the JWKS with the algorithms it may verify.
struct KeyEntry {
    key: DecodingKey,
    algorithms: Vec<Algorithm>,
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

struct JwksCache {
    url: String,
    http: reqwest::Client,
    policy: JwksPolicy,
    state: RwLock<CacheState>,
    /// Held across a fetch: concurrent refreshes wait and reuse its result.
    refresh: tokio::sync::Mutex<()>,
}

impl JwksCache {
    /// The key `kid` names in the current set, without fetching: None once the set is
    /// past its TTL or no longer holds that key.
    fn current(&self, kid: &str) -> Option<Arc<KeyEntry>> {
        let s = self.state.read().unwrap_or_else(|p| p.into_inner());
        if s.fresh(Instant::now(), self.policy.ttl) { s.keys.get(kid).cloned() } else { None }
    }

    async fn key(&self, kid: &str) -> Result<Arc<KeyEntry>, ApiError> {
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

/// Verifies bearer tokens. Build once at cold start and share (it owns the JWKS cache).
pub struct TokenVerifier {
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    local_hs256: Option<DecodingKey>,
    jwks: Option<JwksCache>,
    verified: VerifiedTokens,
}

/// Seconds a verified token is answered from [`VerifiedTokens`] at most (never past its
/// `exp` and leeway, and only while the key set still holds the key that verified it).
pub const VERIFIED_TOKEN_TTL_SECS: i64 = 60;

/// Distinct tokens kept; the map is emptied when full, so many tokens cost a re-check,
/// never memory.
const VERIFIED_TOKEN_ENTRIES: usize = 4096;

/// Tokens whose signature and claims passed, by the SHA-256 of the token (no token
/// material is kept). Only a byte-identical token hits; the tenant headers are checked on
/// every request.
#[derive(Default)]
struct VerifiedTokens(std::sync::Mutex<HashMap<[u8; 32], Verified>>);

#[derive(Clone)]
struct Verified {
    token: VerifiedToken,
    /// The last epoch second at which the entry may answer.
    until: i64,
    /// The key set's key (and its `kid`) that verified the token; None for the local
    /// HS256 secret, which never changes.
    key: Option<(String, Arc<KeyEntry>)>,
}

impl VerifiedTokens {
    fn get(&self, digest: &[u8; 32], now: i64) -> Option<Verified> {
        let map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(digest).filter(|v| now <= v.until).cloned()
    }

    fn put(&self, digest: [u8; 32], token: &VerifiedToken, key: Option<(String, Arc<KeyEntry>)>, now: i64) {
        let until = token.expires_at.saturating_add(CLOCK_LEEWAY_SECS).min(now.saturating_add(VERIFIED_TOKEN_TTL_SECS));
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= VERIFIED_TOKEN_ENTRIES {
            map.clear();
        }
        map.insert(digest, Verified { token: token.clone(), until, key });
    }
}

impl std::fmt::Debug for TokenVerifier {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TokenVerifier")
            .field("issuer", &self.issuer)
            .field("audience", &self.audience)
            .field("algorithms", &self.algorithms)
            .field("local_hs256", &self.local_hs256.is_some())
            .field("jwks_url", &self.jwks.as_ref().map(|j| j.url.as_str()))
            .finish()
    }
}

/// The two protected-header fields needed to pick a key. `jsonwebtoken` parses
/// the full header again when it verifies (and rejects unsupported `crit`).
#[derive(Debug)]
struct RawHeader {
    alg: String,
    kid: Option<String>,
}

impl TokenVerifier {
    pub fn new(oauth: &OAuthConfig, http: reqwest::Client) -> Self {
        Self::with_policy(oauth, http, JwksPolicy::default())
    }

    pub fn with_policy(oauth: &OAuthConfig, http: reqwest::Client, policy: JwksPolicy) -> Self {
        Self {
            issuer: oauth.issuer.clone(),
            audience: oauth.audience.clone(),
            // Symmetric algorithms never verify against the key set, whatever the list says.
            algorithms: oauth.algorithms.iter().copied().filter(|a| a.family() != AlgorithmFamily::Hmac).collect(),
            local_hs256: oauth
                .local_hs256_secret
                .as_ref()
                .and_then(|s| DecodingKey::from_secret(s.expose().as_bytes()).ok()),
            jwks: oauth.jwks_url.as_ref().map(|url| JwksCache {
                url: url.clone(),
                http,
                policy,
                state: RwLock::new(CacheState::default()),
                refresh: tokio::sync::Mutex::new(()),
            }),
            verified: VerifiedTokens::default(),
        }
    }

    /// Verifies `bearer` (the token alone, see [`bearer_from_header`]) and checks
    /// the request's tenant headers against its signed tenant.
    pub async fn verify(&self, bearer: &str, tenant_headers: TenantHeaders<'_>) -> Result<VerifiedToken, ApiError> {
        self.verify_at(bearer, tenant_headers, chrono::Utc::now().timestamp()).await
    }

    /// [`Self::verify`] at `now` (epoch seconds). A token verified in the last
    /// [`VERIFIED_TOKEN_TTL_SECS`] is not verified again (signature checks are a tenth
    /// of a request's CPU) while the key set still holds, unexpired, the very key that
    /// verified it; its expiry is still checked.
    async fn verify_at(
        &self,
        bearer: &str,
        tenant_headers: TenantHeaders<'_>,
        now: i64,
    ) -> Result<VerifiedToken, ApiError> {
        let digest: Option<[u8; 32]> =
            (bearer.len() <= MAX_BEARER_BYTES).then(|| sha2::Sha256::digest(bearer.as_bytes()).into());
        let cached = digest.and_then(|d| self.verified.get(&d, now)).filter(|v| match &v.key {
            None => true,
            Some((kid, key)) => {
                self.jwks.as_ref().and_then(|j| j.current(kid)).is_some_and(|current| Arc::ptr_eq(&current, key))
            }
        });
        let token = match cached {
            Some(v) => v.token,
            None => {
                let (token, key) = self.verify_token(bearer, now).await?;
                if let Some(d) = digest {
                    self.verified.put(d, &token, key, now);
                }
                token
            }
        };
        for supplied in
            [tenant_headers.tenant_id, tenant_headers.customer_id, tenant_headers.org_id].into_iter().flatten()
        {
            if supplied != token.tenant {
                return Err(ApiError::TenantMismatch);
            }
        }
        Ok(token)
    }

    /// Signature, algorithm and claims of `bearer` at `now`, and the key set's key that
    /// verified it (None for the local HS256 secret).
    async fn verify_token(
        &self,
        bearer: &str,
        now: i64,
    ) -> Result<(VerifiedToken, Option<(String, Arc<KeyEntry>)>), ApiError> {
        let header = parse_header(bearer)?;
        let (alg, key) = self.select_key(&header).await?;

        let mut validation = Validation::new(alg);
        // Signature and algorithm only: the claims are checked below, every rule explicit.
        validation.required_spec_claims.clear();
        validation.validate_exp = false;
        validation.validate_nbf = false;
        validation.validate_aud = false;
        let data = jsonwebtoken::decode::<Map<String, Value>>(bearer, key.as_ref(), &validation).map_err(|e| {
            invalid(match e.kind() {
                ErrorKind::InvalidSignature
                | ErrorKind::InvalidEcdsaKey
                | ErrorKind::InvalidEddsaKey
                | ErrorKind::InvalidRsaKey(_)
                | ErrorKind::InvalidKeyFormat => "signature",
                ErrorKind::InvalidAlgorithm
                | ErrorKind::MissingAlgorithm
                | ErrorKind::UnsupportedAlgorithm
                | ErrorKind::InvalidAlgorithmName => "algorithm",
                _ => "malformed",
            })
        })?;

        let token = self.check_claims(&data.claims, now)?;
        let key = match key {
            KeyRef::Local(_) => None,
            KeyRef::Jwks(entry) => Some((header.kid.unwrap_or_default(), entry)),
        };
        Ok((token, key))
    }

    async fn select_key(&self, header: &RawHeader) -> Result<(Algorithm, KeyRef<'_>), ApiError> {
        if header.alg == "HS256" {
            return match &self.local_hs256 {
                Some(key) => Ok((Algorithm::HS256, KeyRef::Local(key))),
                None => Err(invalid("algorithm")),
            };
        }
        // `none`, other HMAC algorithms and anything not admitted stop here.
        let alg = Algorithm::from_str(&header.alg).map_err(|_| invalid("algorithm"))?;
        if alg.family() == AlgorithmFamily::Hmac || !self.algorithms.contains(&alg) {
            return Err(invalid("algorithm"));
        }
        let kid = header.kid.as_deref().ok_or(invalid("unknown_key"))?;
        let jwks = self.jwks.as_ref().ok_or(invalid("unknown_key"))?;
        let entry = jwks.key(kid).await?;
        if !entry.algorithms.contains(&alg) {
            return Err(invalid("algorithm"));
        }
        Ok((alg, KeyRef::Jwks(entry)))
    }

    fn check_claims(&self, claims: &Map<String, Value>, now: i64) -> Result<VerifiedToken, ApiError> {
        match claims.get("iss") {
            Some(Value::String(iss)) if *iss == self.issuer => {}
            _ => return Err(invalid("issuer")),
        }
        let audience_ok = match claims.get("aud") {
            Some(Value::String(aud)) => *aud == self.audience,
            Some(Value::Array(auds)) => auds.iter().any(|a| a.as_str() == Some(self.audience.as_str())),
            _ => false,
        };
        if !audience_ok {
            return Err(invalid("audience"));
        }
        let expires_at = numeric_date(claims.get("exp"))?.ok_or(invalid("malformed"))?;
        if now > expires_at.saturating_add(CLOCK_LEEWAY_SECS) {
            return Err(invalid("expired"));
        }
        if let Some(nbf) = numeric_date(claims.get("nbf"))?
            && nbf > now.saturating_add(CLOCK_LEEWAY_SECS)
        {
            return Err(invalid("not_yet_valid"));
        }
        let subject = match claims.get("sub") {
            Some(Value::String(sub)) if is_identifier(sub) => sub.clone(),
            _ => return Err(invalid("subject")),
        };
        let tenant = signed_tenant(claims)?;
        let scopes = scopes(claims)?;
        Ok(VerifiedToken { issuer: self.issuer.clone(), subject, tenant, scopes, expires_at })
    }
}

enum KeyRef<'a> {
    Local(&'a DecodingKey),
    Jwks(Arc<KeyEntry>),
}

impl AsRef<DecodingKey> for KeyRef<'_> {
    fn as_ref(&self) -> &DecodingKey {
        match self {
            KeyRef::Local(k) => k,
            KeyRef::Jwks(e) => &e.key,
        }
    }
}

/// Structural checks and the protected header, before any key is looked up.
fn parse_header(bearer: &str) -> Result<RawHeader, ApiError> {
    if bearer.is_empty() || bearer.len() > MAX_BEARER_BYTES {
        return Err(invalid("malformed"));
    }
    let segments: Vec<&str> = bearer.split('.').collect();
    let well_formed = segments.len() == 3
        && segments
            .iter()
            .all(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_'));
    if !well_formed {
        return Err(invalid("malformed"));
    }
    let bytes = URL_SAFE_NO_PAD.decode(segments[0]).map_err(|_| invalid("malformed"))?;
    let header: Map<String, Value> = serde_json::from_slice(&bytes).map_err(|_| invalid("malformed"))?;
    let alg = match header.get("alg") {
        Some(Value::String(alg)) => alg.clone(),
        _ => return Err(invalid("malformed")),
    };
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(invalid("malformed")),
    };
    Ok(RawHeader { alg, kid })
}

/// A NumericDate claim: absent is `None`, anything but a finite number is `malformed`.
fn numeric_date(v: Option<&Value>) -> Result<Option<i64>, ApiError> {
    match v {
        None => Ok(None),
        Some(Value::Number(n)) => n
            .as_i64()
            .or_else(|| n.as_f64().filter(|f| f.is_finite()).map(|f| f.floor() as i64))
            .map(Some)
            .ok_or(invalid("malformed")),
        Some(_) => Err(invalid("malformed")),
    }
}

/// Nonempty, at most [`MAX_IDENTIFIER_CHARS`] characters, no control characters.
fn is_identifier(s: &str) -> bool {
    !s.is_empty() && s.chars().count() <= MAX_IDENTIFIER_CHARS && !s.chars().any(char::is_control)
}

/// The signed tenant: the first of [`TENANT_CLAIMS`] present. Every present tenant
/// claim must be a valid identifier and all must agree.
pub(crate) fn signed_tenant(claims: &Map<String, Value>) -> Result<String, ApiError> {
    let mut tenant: Option<&str> = None;
    for name in TENANT_CLAIMS {
        let Some(value) = claims.get(name) else {
            continue;
        };
        let Some(s) = value.as_str().filter(|s| is_identifier(s)) else {
            return Err(invalid("tenant_claim"));
        };
        match tenant {
            None => tenant = Some(s),
            Some(first) if first == s => {}
            Some(_) => return Err(invalid("tenant_claim")),
        }
    }
    tenant.map(str::to_owned).ok_or(invalid("tenant_claim"))
}

/// Scopes from `scope` (space-separated string) or else `scp` (array of strings,
/// or a space-separated string as some providers send). Duplicates are dropped.
fn scopes(claims: &Map<String, Value>) -> Result<Vec<String>, ApiError> {
    let mut out: Vec<String> = Vec::new();
    let mut push = |s: &str| {
        if !out.iter().any(|o| o == s) {
            out.push(s.to_owned());
        }
    };
    match (claims.get("scope"), claims.get("scp")) {
        (Some(Value::String(s)), _) | (None, Some(Value::String(s))) => s.split_ascii_whitespace().for_each(&mut push),
        (None, Some(Value::Array(items))) => {
            for item in items {
                let s = item.as_str().ok_or(invalid("malformed"))?;
                s.split_ascii_whitespace().for_each(&mut push);
            }
        }
        (None, None) => {}
        _ => return Err(invalid("malformed")),
    }
    Ok(out)
}

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

/// The token of an `Authorization` header value: scheme `Bearer` (any case), one
/// or more spaces, then exactly one RFC 6750 b64token.
pub fn bearer_from_header(value: &str) -> Option<&str> {
    let value = value.trim_matches(|c| c == ' ' || c == '\t');
    let (scheme, rest) = value.split_once(' ')?;
    if !scheme.eq_ignore_ascii_case("bearer") {
        return None;
    }
    let token = rest.trim_start_matches(' ');
    let body = token.trim_end_matches('=');
    let valid = !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'+' | b'/'));
    valid.then_some(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn map(v: Value) -> Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn reason(e: ApiError) -> &'static str {
        match e {
            ApiError::InvalidToken { reason } => reason,
            other => panic!("expected invalid_token, got {other:?}"),
        }
    }

    #[test]
    fn bearer_scheme_is_case_insensitive_and_takes_exactly_one_token() {
        assert_eq!(bearer_from_header("Bearer abc.def.ghi"), Some("abc.def.ghi"));
        assert_eq!(bearer_from_header("bearer abc"), Some("abc"));
        assert_eq!(bearer_from_header("BEARER   abc=="), Some("abc=="));
        assert_eq!(bearer_from_header("Bearer"), None);
        assert_eq!(bearer_from_header("Bearer "), None);
        assert_eq!(bearer_from_header("Bearer a b"), None);
        assert_eq!(bearer_from_header("Bearer a,b"), None);
        assert_eq!(bearer_from_header("Basic YWxhZGRpbjpvcGVu"), None);
        assert_eq!(bearer_from_header("Bearerabc"), None);
        assert_eq!(bearer_from_header("Bearer ="), None);
    }

    #[test]
    fn the_first_tenant_claim_wins_and_conflicting_claims_are_rejected() {
        let t = signed_tenant(&map(json!({"org_id": "t1", "tenantId": "t1"}))).unwrap();
        assert_eq!(t, "t1");
        let e = signed_tenant(&map(json!({"tenantId": "t1", "customer_id": "t2"}))).unwrap_err();
        assert_eq!(reason(e), "tenant_claim");
        for bad in [json!({}), json!({"tenant_id": ""}), json!({"orgId": 7}), json!({"tenantId": "x".repeat(257)})] {
            assert_eq!(reason(signed_tenant(&map(bad)).unwrap_err()), "tenant_claim");
        }
    }

    #[test]
    fn scopes_come_from_scope_or_scp_without_duplicates() {
        let s = scopes(&map(json!({"scope": "a b  a", "scp": ["ignored"]}))).unwrap();
        assert_eq!(s, vec!["a", "b"]);
        assert_eq!(scopes(&map(json!({"scp": ["x", "y"]}))).unwrap(), vec!["x", "y"]);
        assert_eq!(scopes(&map(json!({"scp": "x y"}))).unwrap(), vec!["x", "y"]);
        assert!(scopes(&map(json!({}))).unwrap().is_empty());
        assert_eq!(reason(scopes(&map(json!({"scope": ["a"]}))).unwrap_err()), "malformed");
        assert_eq!(reason(scopes(&map(json!({"scp": [1]}))).unwrap_err()), "malformed");
    }

    #[test]
    fn numeric_dates_accept_integers_and_floats_only() {
        assert_eq!(numeric_date(Some(&json!(10))).unwrap(), Some(10));
        assert_eq!(numeric_date(Some(&json!(10.7))).unwrap(), Some(10));
        assert_eq!(numeric_date(None).unwrap(), None);
        assert_eq!(reason(numeric_date(Some(&json!("10"))).unwrap_err()), "malformed");
    }

    #[test]
    fn headers_are_parsed_only_from_three_base64url_segments() {
        assert_eq!(reason(parse_header("").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a.b").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a.b.c.d.e").unwrap_err()), "malformed");
        assert_eq!(reason(parse_header("a+.b.c").unwrap_err()), "malformed");
        let h = URL_SAFE_NO_PAD.encode(br#"{"alg":"RS256","kid":"k1"}"#);
        let parsed = parse_header(&format!("{h}.e30.c2ln")).unwrap();
        assert_eq!((parsed.alg.as_str(), parsed.kid.as_deref()), ("RS256", Some("k1")));
        let long = format!("{h}.{}.c2ln", "A".repeat(MAX_BEARER_BYTES));
        assert_eq!(reason(parse_header(&long).unwrap_err()), "malformed");
    }

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

    fn local_verifier() -> (TokenVerifier, Secret) {
        let secret = Secret::new("s".repeat(32));
        let oauth = OAuthConfig {
            issuer: "https://issuer.test".into(),
            audience: "helix".into(),
            jwks_url: None,
            provider: "test".into(),
            algorithms: vec![],
            local_hs256_secret: Some(secret.clone()),
            authorization_servers: vec![],
        };
        (TokenVerifier::new(&oauth, reqwest::Client::new()), secret)
    }

    const NO_TENANT_HEADERS: TenantHeaders<'static> =
        TenantHeaders { tenant_id: None, customer_id: None, org_id: None };

    #[tokio::test]
    async fn a_cached_verification_admits_only_the_same_token_and_never_past_its_expiry() {
        let (verifier, secret) = local_verifier();
        let token = mint_local_hs256(&secret, "https://issuer.test", "helix", "sub-1", "t1", &["a".into()], 10);
        let now = chrono::Utc::now().timestamp();
        let first = verifier.verify_at(&token, NO_TENANT_HEADERS, now).await.unwrap();
        assert_eq!(verifier.verify_at(&token, NO_TENANT_HEADERS, now + 1).await.unwrap(), first);
        {
            let map = verifier.verified.0.lock().unwrap();
            let kept = map.values().next().expect("the verified token is kept");
            assert!(kept.until <= now + VERIFIED_TOKEN_TTL_SECS && kept.until <= first.expires_at + CLOCK_LEEWAY_SECS);
            assert!(kept.key.is_none(), "the local secret has no key set to follow");
        }
        // Past exp + leeway the cached entry no longer answers and the token is refused.
        let late = first.expires_at + CLOCK_LEEWAY_SECS + 1;
        assert_eq!(reason(verifier.verify_at(&token, NO_TENANT_HEADERS, late).await.unwrap_err()), "expired");
        // Another signature over the same claims is verified on its own, and fails.
        let (head, sig) = token.rsplit_once('.').unwrap();
        let flipped = format!("{head}.{}{}", if sig.starts_with('A') { 'B' } else { 'A' }, &sig[1..]);
        assert_eq!(reason(verifier.verify_at(&flipped, NO_TENANT_HEADERS, now).await.unwrap_err()), "signature");
        // The tenant headers are checked on every request, cached token or not.
        let other = TenantHeaders { tenant_id: Some("t2"), customer_id: None, org_id: None };
        assert!(matches!(verifier.verify_at(&token, other, now).await, Err(ApiError::TenantMismatch)));
    }

    #[tokio::test]
    async fn the_verified_token_cache_is_bounded() {
        let (verifier, secret) = local_verifier();
        let now = chrono::Utc::now().timestamp();
        for i in 0..VERIFIED_TOKEN_ENTRIES + 3 {
            let token = mint_local_hs256(&secret, "https://issuer.test", "helix", &format!("s{i}"), "t1", &[], 600);
            verifier.verify_at(&token, NO_TENANT_HEADERS, now).await.unwrap();
        }
        assert!(verifier.verified.0.lock().unwrap().len() <= VERIFIED_TOKEN_ENTRIES);
    }
}
