//! The OpenID Connect client of the browser lane (authorization code + PKCE + nonce),
//! over the `openidconnect` crate: discovery, the authorization URL, the code exchange
//! and ID-token verification (issuer, audience, nonce, expiry, JWKS signature, admitted
//! algorithms) plus the signed tenant claim. Must not depend on `service` or `http`.

use std::str::FromStr;

use chrono::{DateTime, Utc};
use openidconnect::core::{
    CoreAuthPrompt, CoreAuthenticationFlow, CoreClient, CoreGenderClaim, CoreJsonWebKey,
    CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm, CoreProviderMetadata,
};
use openidconnect::{
    AdditionalClaims, AuthorizationCode, ClaimsVerificationError, ClientId, ClientSecret, CsrfToken, IdToken,
    IdTokenVerifier, IssuerUrl, Nonce, PkceCodeChallenge, PkceCodeVerifier, RedirectUrl, Scope,
    SignatureVerificationError, TokenResponse,
};
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::config::OidcConfig;
use crate::error::ApiError;

/// Claims beyond the standard ones: the signed tenant lives here.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ExtraClaims {
    #[serde(flatten)]
    rest: Map<String, Value>,
}

impl AdditionalClaims for ExtraClaims {}

type HelixIdToken = IdToken<ExtraClaims, CoreGenderClaim, CoreJweContentEncryptionAlgorithm, CoreJwsSigningAlgorithm>;

/// An identity the provider verified. Its `Debug` keeps the subject and tenant out of logs.
#[derive(Clone, PartialEq, Eq)]
pub struct VerifiedIdentity {
    pub issuer: String,
    pub subject: String,
    pub tenant: String,
    /// When the user last authenticated at the provider (epoch seconds), if stated.
    pub auth_time: Option<i64>,
    /// The person's name as the provider gives it (`name`, else `preferred_username`):
    /// shown on the pages, never a key.
    pub display_name: Option<String>,
}

impl std::fmt::Debug for VerifiedIdentity {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("VerifiedIdentity").field("issuer", &self.issuer).finish_non_exhaustive()
    }
}

#[derive(Debug, thiserror::Error)]
#[error("{0}")]
pub struct HttpFailure(String);

/// The HTTP transport the OIDC crate calls (reqwest, no redirects). A named type with a
/// boxed `Send` future, so the handlers that await it stay `Send`.
#[derive(Clone)]
struct Http(std::sync::Arc<crate::outbound::LazyClient>);

type HttpFuture<'c> =
    std::pin::Pin<Box<dyn std::future::Future<Output = Result<openidconnect::HttpResponse, HttpFailure>> + Send + 'c>>;

impl<'c> openidconnect::AsyncHttpClient<'c> for Http {
    type Error = HttpFailure;
    type Future = HttpFuture<'c>;

    fn call(&'c self, request: openidconnect::HttpRequest) -> Self::Future {
        match self.0.get() {
            Ok(client) => Box::pin(send(client.clone(), request)),
            Err(e) => {
                let failure = HttpFailure(format!("HTTP client: {}", e.without_url()));
                Box::pin(async move { Err(failure) })
            }
        }
    }
}

async fn send(
    http: reqwest::Client,
    request: openidconnect::HttpRequest,
) -> Result<openidconnect::HttpResponse, HttpFailure> {
    let (parts, body) = request.into_parts();
    let mut builder = http.request(parts.method, parts.uri.to_string()).body(body);
    for (name, value) in &parts.headers {
        builder = builder.header(name, value);
    }
    let response = builder.send().await.map_err(|e| HttpFailure(format!("request failed: {}", e.without_url())))?;
    let mut out = http::Response::builder().status(response.status());
    for (name, value) in response.headers() {
        out = out.header(name, value);
    }
    let bytes = response.bytes().await.map_err(|e| HttpFailure(format!("body: {}", e.without_url())))?;
    out.body(bytes.to_vec()).map_err(|e| HttpFailure(e.to_string()))
}

/// The OIDC client of one configured provider.
#[derive(Clone)]
pub struct OidcClient {
    config: OidcConfig,
    redirect_uri: String,
    http: Http,
    /// The provider's discovered metadata (with its JWKS) and when it was fetched.
    discovered: std::sync::Arc<tokio::sync::Mutex<Option<(std::time::Instant, CoreProviderMetadata)>>>,
}

/// How long discovered metadata is reused. An ID token signed by a key the cached JWKS
/// does not hold (the provider rotated) fetches it again at once, whatever its age.
pub const METADATA_TTL: std::time::Duration = std::time::Duration::from_secs(300);

fn failed(reason: &'static str) -> ApiError {
    ApiError::SignInFailed { reason }
}

fn unavailable(e: impl std::error::Error + Send + Sync + 'static) -> ApiError {
    ApiError::Unavailable(Box::new(e))
}

impl OidcClient {
    pub fn new(config: OidcConfig, redirect_uri: String) -> Self {
        // No redirects: an OpenID provider answers directly (and following them is an SSRF path).
        // Built by the first sign-in, not at cold start (`outbound`).
        let http = crate::outbound::LazyClient::new(|| {
            reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .timeout(std::time::Duration::from_secs(10))
        });
        Self { config, redirect_uri, http: Http(std::sync::Arc::new(http)), discovered: Default::default() }
    }

    pub fn issuer(&self) -> &str {
        &self.config.issuer
    }

    /// The provider's metadata: the cached copy while younger than [`METADATA_TTL`], else
    /// (or when `refresh`) discovered again. One discovery at a time per instance.
    async fn metadata(&self, refresh: bool) -> Result<CoreProviderMetadata, ApiError> {
        let mut cached = self.discovered.lock().await;
        if !refresh
            && let Some((at, metadata)) = cached.as_ref()
            && at.elapsed() < METADATA_TTL
        {
            return Ok(metadata.clone());
        }
        let issuer = IssuerUrl::new(self.config.issuer.clone()).map_err(unavailable)?;
        let metadata = CoreProviderMetadata::discover_async(issuer, &self.http).await.map_err(unavailable)?;
        *cached = Some((std::time::Instant::now(), metadata.clone()));
        Ok(metadata)
    }

    fn client(
        &self,
        metadata: CoreProviderMetadata,
    ) -> Result<
        CoreClient<
            openidconnect::EndpointSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointNotSet,
            openidconnect::EndpointMaybeSet,
            openidconnect::EndpointMaybeSet,
        >,
        ApiError,
    > {
        let redirect = RedirectUrl::new(self.redirect_uri.clone()).map_err(ApiError::internal)?;
        let secret = self.config.client_secret.as_ref().map(|s| ClientSecret::new(s.expose().to_owned()));
        Ok(CoreClient::from_provider_metadata(metadata, ClientId::new(self.config.client_id.clone()), secret)
            .set_redirect_uri(redirect))
    }

    /// The provider's authorization URL for this intent. A step-up asks the provider to
    /// authenticate the user again (`prompt=login`, `max_age=0`).
    pub async fn authorize_url(
        &self,
        state: &str,
        nonce: &str,
        verifier: &str,
        step_up: bool,
    ) -> Result<String, ApiError> {
        let client = self.client(self.metadata(false).await?)?;
        let challenge = PkceCodeChallenge::from_code_verifier_sha256(&PkceCodeVerifier::new(verifier.to_owned()));
        let (state, nonce) = (state.to_owned(), nonce.to_owned());
        let mut request = client
            .authorize_url(
                CoreAuthenticationFlow::AuthorizationCode,
                move || CsrfToken::new(state),
                move || Nonce::new(nonce),
            )
            .add_scope(Scope::new("openid".into()))
            .set_pkce_challenge(challenge);
        if step_up {
            request = request.add_prompt(CoreAuthPrompt::Login).set_max_age(std::time::Duration::ZERO);
        }
        Ok(request.url().0.to_string())
    }

    /// Exchanges the code (with the PKCE verifier) and verifies the ID token it returns.
    pub async fn complete(
        &self,
        code: &str,
        nonce: &str,
        verifier: &str,
        now: DateTime<Utc>,
    ) -> Result<VerifiedIdentity, ApiError> {
        let metadata = self.metadata(false).await?;
        let jwks = metadata.jwks().clone();
        let client = self.client(metadata)?;
        let response = client
            .exchange_code(AuthorizationCode::new(code.to_owned()))
            .map_err(ApiError::internal)?
            .set_pkce_verifier(PkceCodeVerifier::new(verifier.to_owned()))
            .request_async(&self.http)
            .await
            .map_err(|_| failed("code"))?;
        let raw = response.id_token().ok_or(failed("id_token"))?.to_string();
        self.verify_with_fresh_keys(&raw, nonce, jwks, now).await
    }

    /// Verifies against the cached JWKS; a token signed by a key it does not hold is
    /// verified once more against freshly discovered keys (the provider rotated).
    async fn verify_with_fresh_keys(
        &self,
        raw: &str,
        nonce: &str,
        jwks: openidconnect::JsonWebKeySet<CoreJsonWebKey>,
        now: DateTime<Utc>,
    ) -> Result<VerifiedIdentity, ApiError> {
        match self.verify_id_token(raw, nonce, jwks, now) {
            Err(VerifyError::UnknownKey) => {
                let jwks = self.metadata(true).await?.jwks().clone();
                self.verify_id_token(raw, nonce, jwks, now).map_err(ApiError::from)
            }
            other => other.map_err(ApiError::from),
        }
    }

    fn verify_id_token(
        &self,
        raw: &str,
        nonce: &str,
        jwks: openidconnect::JsonWebKeySet<CoreJsonWebKey>,
        now: DateTime<Utc>,
    ) -> Result<VerifiedIdentity, VerifyError> {
        let token = HelixIdToken::from_str(raw).map_err(|_| failed("id_token"))?;
        let issuer = IssuerUrl::new(self.config.issuer.clone()).map_err(ApiError::internal)?;
        let algs: Vec<CoreJwsSigningAlgorithm> = self
            .config
            .algorithms
            .iter()
            .filter_map(|a| serde_json::from_value(Value::String(a.clone())).ok())
            .collect();
        let verifier = IdTokenVerifier::new_public_client(ClientId::new(self.config.client_id.clone()), issuer, jwks)
            .set_allowed_algs(algs)
            .set_time_fn(move || now);
        let claims = token.claims(&verifier, &Nonce::new(nonce.to_owned())).map_err(|e| match e {
            ClaimsVerificationError::SignatureVerification(SignatureVerificationError::NoMatchingKey) => {
                VerifyError::UnknownKey
            }
            e => VerifyError::Failed(failed(reason(&e))),
        })?;
        let tenant = crate::auth::jwt::signed_tenant(&claims.additional_claims().rest).map_err(|_| failed("tenant"))?;
        Ok(VerifiedIdentity {
            issuer: claims.issuer().to_string(),
            subject: claims.subject().to_string(),
            tenant,
            auth_time: claims.auth_time().map(|t| t.timestamp()),
            display_name: claims
                .name()
                .and_then(|n| n.get(None))
                .map(|n| n.to_string())
                .or_else(|| claims.preferred_username().map(|u| u.to_string())),
        })
    }
}

/// Why an ID token was not verified: a signing key the JWKS at hand does not hold (worth
/// one fresh discovery), or anything else.
enum VerifyError {
    UnknownKey,
    Failed(ApiError),
}

impl From<ApiError> for VerifyError {
    fn from(e: ApiError) -> Self {
        VerifyError::Failed(e)
    }
}

impl From<VerifyError> for ApiError {
    fn from(e: VerifyError) -> Self {
        match e {
            VerifyError::UnknownKey => failed("signature"),
            VerifyError::Failed(e) => e,
        }
    }
}

fn reason(e: &ClaimsVerificationError) -> &'static str {
    match e {
        ClaimsVerificationError::InvalidIssuer(_) => "issuer",
        ClaimsVerificationError::InvalidAudience(_) => "audience",
        ClaimsVerificationError::InvalidNonce(_) => "nonce",
        ClaimsVerificationError::Expired(_) => "expired",
        ClaimsVerificationError::SignatureVerification(SignatureVerificationError::DisallowedAlg(_)) => "algorithm",
        ClaimsVerificationError::SignatureVerification(_) => "signature",
        _ => "id_token",
    }
}

#[cfg(test)]
mod tests {
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::{Arc, Mutex};

    use axum::routing::get;
    use serde_json::json;

    use super::*;
    use crate::http::oauth::dev_oidc::DevSigner;

    /// A provider on loopback whose signing key can be rotated; counts its discoveries.
    struct Provider {
        issuer: String,
        signer: Arc<Mutex<DevSigner>>,
        discoveries: Arc<AtomicUsize>,
    }

    async fn provider() -> Provider {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let issuer = format!("http://{}", listener.local_addr().unwrap());
        let signer = Arc::new(Mutex::new(DevSigner::generate()));
        let discoveries = Arc::new(AtomicUsize::new(0));
        let (iss, count, keys) = (issuer.clone(), discoveries.clone(), signer.clone());
        let app = axum::Router::new()
            .route(
                "/.well-known/openid-configuration",
                get(move || {
                    count.fetch_add(1, Ordering::SeqCst);
                    let iss = iss.clone();
                    async move {
                        axum::Json(json!({
                            "issuer": iss, "authorization_endpoint": format!("{iss}/authorize"),
                            "token_endpoint": format!("{iss}/token"), "jwks_uri": format!("{iss}/jwks"),
                            "response_types_supported": ["code"], "subject_types_supported": ["public"],
                            "id_token_signing_alg_values_supported": ["EdDSA"],
                        }))
                    }
                }),
            )
            .route("/jwks", get(move || std::future::ready(axum::Json(keys.lock().unwrap().jwks()))));
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        Provider { issuer, signer, discoveries }
    }

    fn client(p: &Provider) -> OidcClient {
        let config = OidcConfig {
            issuer: p.issuer.clone(),
            client_id: "helix-test".into(),
            client_secret: None,
            algorithms: vec!["EdDSA".into()],
        };
        OidcClient::new(config, "http://127.0.0.1:9/account/callback".into())
    }

    fn id_token(p: &Provider, signer: &DevSigner, now: DateTime<Utc>) -> String {
        signer.sign(&json!({
            "iss": p.issuer, "aud": "helix-test", "sub": "alice", "tenant_id": "tenant-a", "nonce": "n-1",
            "iat": now.timestamp(), "exp": now.timestamp() + 300,
        }))
    }

    #[tokio::test]
    async fn discovery_is_reused_and_fetched_again_when_the_provider_rotates_its_key() {
        let p = provider().await;
        let c = client(&p);
        c.authorize_url("s1", "n1", &"v".repeat(43), false).await.unwrap();
        c.authorize_url("s2", "n2", &"v".repeat(43), true).await.unwrap();
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 1, "the second sign-in reuses the discovery");

        let cached = c.metadata(false).await.unwrap().jwks().clone();
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 1);
        // The provider rotates: a token under the new key verifies after one fresh discovery.
        *p.signer.lock().unwrap() = DevSigner::generate();
        let now = Utc::now();
        let raw = id_token(&p, &p.signer.lock().unwrap(), now);
        let who = c.verify_with_fresh_keys(&raw, "n-1", cached.clone(), now).await.unwrap();
        assert_eq!((who.subject.as_str(), who.tenant.as_str()), ("alice", "tenant-a"));
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 2);

        // A key the provider never published stays refused, after one more look.
        let raw = id_token(&p, &DevSigner::generate(), now);
        let err = c.verify_with_fresh_keys(&raw, "n-1", cached, now).await.unwrap_err();
        assert!(matches!(err, ApiError::SignInFailed { reason: "signature" }), "{err:?}");
        assert_eq!(p.discoveries.load(Ordering::SeqCst), 3);
    }
}
