//! The verifier: picks the key for a token's algorithm (the local HS256 secret or the
//! key set), checks signature then claims, and answers a byte-identical token again from
//! a short cache while the key that verified it is still current.

use std::collections::HashMap;
use std::str::FromStr;
use std::sync::Arc;

use jsonwebtoken::{Algorithm, AlgorithmFamily, DecodingKey, Validation, errors::ErrorKind};
use serde_json::{Map, Value};
use sha2::Digest;

use super::header::{RawHeader, parse_header};
use super::jwks::{JwksCache, JwksPolicy, KeyEntry};
use super::{CLOCK_LEEWAY_SECS, MAX_BEARER_BYTES, TenantHeaders, VerifiedToken, claims, invalid};
use crate::config::OAuthConfig;
use crate::error::ApiError;

/// Verifies bearer tokens. Build once at cold start and share (it owns the JWKS cache).
pub struct TokenVerifier {
    issuer: String,
    audience: String,
    algorithms: Vec<Algorithm>,
    local_hs256: Option<DecodingKey>,
    /// The (iss, aud) of key-set tokens.
    jwks_identity: (String, String),
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
/// every request. Read under a shared lock (every bearer request reads it, from every
/// worker thread); an entry is shared, so a hit copies nothing while the lock is held.
#[derive(Default)]
struct VerifiedTokens(std::sync::RwLock<HashMap<[u8; 32], Arc<Verified>>>);

struct Verified {
    token: VerifiedToken,
    /// The last epoch second at which the entry may answer.
    until: i64,
    /// The key set's key (and its `kid`) that verified the token; None for the local
    /// HS256 secret, which never changes.
    key: Option<(String, Arc<KeyEntry>)>,
}

impl VerifiedTokens {
    fn get(&self, digest: &[u8; 32], now: i64) -> Option<Arc<Verified>> {
        let map = self.0.read().unwrap_or_else(std::sync::PoisonError::into_inner);
        map.get(digest).filter(|v| now <= v.until).cloned()
    }

    fn put(&self, digest: [u8; 32], token: &VerifiedToken, key: Option<(String, Arc<KeyEntry>)>, now: i64) {
        let until = token.expires_at.saturating_add(CLOCK_LEEWAY_SECS).min(now.saturating_add(VERIFIED_TOKEN_TTL_SECS));
        let entry = Arc::new(Verified { token: token.clone(), until, key });
        let mut map = self.0.write().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= VERIFIED_TOKEN_ENTRIES {
            map.clear();
        }
        map.insert(digest, entry);
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

impl TokenVerifier {
    /// `http` fetches the key set: a client, or a [`LazyClient`](crate::outbound::LazyClient)
    /// built by the first fetch.
    pub fn new(oauth: &OAuthConfig, http: impl Into<crate::outbound::LazyClient>) -> Self {
        Self::with_policy(oauth, http, JwksPolicy::default())
    }

    pub fn with_policy(oauth: &OAuthConfig, http: impl Into<crate::outbound::LazyClient>, policy: JwksPolicy) -> Self {
        Self {
            issuer: oauth.issuer.clone(),
            audience: oauth.audience.clone(),
            // Symmetric algorithms never verify against the key set, whatever the list says.
            algorithms: oauth.algorithms.iter().copied().filter(|a| a.family() != AlgorithmFamily::Hmac).collect(),
            local_hs256: oauth
                .local_hs256_secret
                .as_ref()
                .and_then(|s| DecodingKey::from_secret(s.expose().as_bytes()).ok()),
            jwks_identity: oauth
                .jwks_identity
                .clone()
                .unwrap_or_else(|| (oauth.issuer.clone(), oauth.audience.clone())),
            jwks: oauth.jwks_url.as_ref().map(|url| JwksCache::new(url.clone(), http.into(), policy)),
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
            Some(v) => v.token.clone(),
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

        let (issuer, audience) = match key {
            KeyRef::Local(_) => (self.issuer.as_str(), self.audience.as_str()),
            KeyRef::Jwks(_) => (self.jwks_identity.0.as_str(), self.jwks_identity.1.as_str()),
        };
        let mut token = claims::check(issuer, audience, &data.claims, now)?;
        // Whatever name the key-set issuer signs with, the token stands for the configured one.
        token.issuer = self.issuer.clone();
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::auth::jwt::claims::tests::reason;
    use crate::auth::jwt::mint_local_hs256;
    use crate::config::Secret;

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
            jwks_identity: None,
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
            let map = verifier.verified.0.read().unwrap();
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
        assert!(verifier.verified.0.read().unwrap().len() <= VERIFIED_TOKEN_ENTRIES);
    }
}
