//! Bearer verification against a real JWKS server on loopback, with test-only
//! keys from `tests/fixtures` (generated with openssl; never used anywhere else).

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use helix_core::auth::jwt::{
    JwksPolicy, TenantHeaders, TokenVerifier, VerifiedToken, bearer_from_header, mint_local_hs256,
};
use helix_core::config::{OAuthConfig, Secret};
use helix_core::error::ApiError;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

const ISSUER: &str = "https://issuer.test.invalid/";
const AUDIENCE: &str = "https://api.test.invalid/mcp";
const TENANT: &str = "tenant-test-1";
const LOCAL_SECRET: &str = "test-only-local-hs256-secret-0123456789";

const RSA_A: &str = include_str!("fixtures/test-only-rsa-a.private.pem");
const RSA_B: &str = include_str!("fixtures/test-only-rsa-b.private.pem");
const EC_P256: &str = include_str!("fixtures/test-only-ec-p256.private.pem");

fn rsa(pem: &str) -> EncodingKey {
    EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap()
}

fn ec(pem: &str) -> EncodingKey {
    EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()
}

/// The public half of a fixture key as a JWK, as an authorization server publishes it.
fn public_jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    jwk
}

#[derive(Clone)]
struct ServerState {
    keys: Arc<std::sync::Mutex<Vec<Jwk>>>,
    hits: Arc<AtomicUsize>,
    fail: Arc<std::sync::atomic::AtomicBool>,
}

struct JwksServer {
    url: String,
    state: ServerState,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    async fn start(keys: Vec<Jwk>) -> Self {
        async fn jwks(State(s): State<ServerState>) -> Response {
            s.hits.fetch_add(1, Ordering::SeqCst);
            if s.fail.load(Ordering::SeqCst) {
                return StatusCode::INTERNAL_SERVER_ERROR.into_response();
            }
            let keys = s.keys.lock().unwrap().clone();
            Json(json!({ "keys": keys })).into_response()
        }
        let state = ServerState {
            keys: Arc::new(std::sync::Mutex::new(keys)),
            hits: Arc::new(AtomicUsize::new(0)),
            fail: Arc::default(),
        };
        let app = axum::Router::new().route("/.well-known/jwks.json", get(jwks)).with_state(state.clone());
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let url = format!("http://{}/.well-known/jwks.json", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Self { url, state, task }
    }

    /// The standard set: RSA key `rsa-a` and EC P-256 key `ec-1`.
    async fn standard() -> Self {
        Self::start(vec![
            public_jwk(&rsa(RSA_A), Algorithm::RS256, "rsa-a"),
            public_jwk(&ec(EC_P256), Algorithm::ES256, "ec-1"),
        ])
        .await
    }

    fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    fn publish(&self, jwk: Jwk) {
        self.state.keys.lock().unwrap().push(jwk);
    }

    fn withdraw(&self, kid: &str) {
        self.state.keys.lock().unwrap().retain(|k| k.common.key_id.as_deref() != Some(kid));
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn oauth(jwks_url: Option<&str>, local_secret: Option<&str>) -> OAuthConfig {
    OAuthConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        jwks_url: jwks_url.map(str::to_owned),
        provider: "test-provider".into(),
        algorithms: vec![Algorithm::RS256, Algorithm::ES256],
        local_hs256_secret: local_secret.map(Secret::new),
        authorization_servers: vec![ISSUER.into()],
        local_identity: None,
    }
}

fn verifier(server: &JwksServer) -> TokenVerifier {
    TokenVerifier::new(&oauth(Some(&server.url), None), reqwest::Client::new())
}

fn verifier_with(server: &JwksServer, policy: JwksPolicy) -> TokenVerifier {
    TokenVerifier::with_policy(&oauth(Some(&server.url), None), reqwest::Client::new(), policy)
}

fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

fn claims() -> Value {
    json!({
        "iss": ISSUER,
        "aud": AUDIENCE,
        "sub": "auth0|user-1",
        "tenantId": TENANT,
        "scope": "helix.rooms.read helix.runs.write",
        "iat": now(),
        "exp": now() + 300,
    })
}

fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

fn sign(alg: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

fn rs256(claims: &Value) -> String {
    sign(Algorithm::RS256, "rsa-a", &rsa(RSA_A), claims)
}

/// A token with an arbitrary protected header and signature, for algorithms
/// `jsonwebtoken` refuses to produce.
fn raw_token(header: Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

const NO_HEADERS: TenantHeaders<'static> = TenantHeaders { tenant_id: None, customer_id: None, org_id: None };

async fn reason(v: &TokenVerifier, token: &str) -> &'static str {
    match v.verify(token, NO_HEADERS).await {
        Err(ApiError::InvalidToken { reason }) => reason,
        other => panic!("expected invalid_token, got {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_rs256_token_is_accepted_with_its_scopes_and_signed_tenant() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let claims = claims();
    let t = v.verify(&rs256(&claims), NO_HEADERS).await.unwrap();
    assert_eq!(
        t,
        VerifiedToken {
            issuer: ISSUER.into(),
            subject: "auth0|user-1".into(),
            tenant: TENANT.into(),
            scopes: vec!["helix.rooms.read".into(), "helix.runs.write".into()],
            expires_at: claims["exp"].as_i64().unwrap(),
        }
    );
}

#[tokio::test]
async fn a_valid_es256_token_is_accepted_with_an_audience_array_and_scp_scopes() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let claims = json!({
        "iss": ISSUER,
        "aud": ["https://other.test.invalid", AUDIENCE],
        "sub": "user-2",
        "org_id": "org-9",
        "scp": ["helix.rooms.read", "helix.rooms.manage"],
        "nbf": now() - 5,
        "exp": now() + 60,
    });
    let t = v.verify(&sign(Algorithm::ES256, "ec-1", &ec(EC_P256), &claims), NO_HEADERS).await.unwrap();
    assert_eq!(t.tenant, "org-9");
    assert_eq!(t.subject, "user-2");
    assert_eq!(t.scopes, vec!["helix.rooms.read", "helix.rooms.manage"]);
}

#[tokio::test]
async fn a_tampered_payload_or_a_foreign_signing_key_fails_as_signature() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let good = rs256(&claims());
    let parts: Vec<&str> = good.split('.').collect();
    let forged_claims = with(claims(), "tenantId", json!("someone-else"));
    let tampered = format!("{}.{}.{}", parts[0], URL_SAFE_NO_PAD.encode(forged_claims.to_string()), parts[2]);
    assert_eq!(reason(&v, &tampered).await, "signature");
    // Signed by a key the server never published, under a published kid.
    let foreign = sign(Algorithm::RS256, "rsa-a", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &foreign).await, "signature");
}

#[tokio::test]
async fn a_token_from_another_issuer_fails_as_issuer() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for iss in [json!("https://evil.test.invalid/"), json!("https://issuer.test.invalid"), json!([ISSUER]), Value::Null]
    {
        assert_eq!(reason(&v, &rs256(&with(claims(), "iss", iss))).await, "issuer");
    }
    assert_eq!(reason(&v, &rs256(&without(claims(), "iss"))).await, "issuer");
}

#[tokio::test]
async fn a_token_for_another_audience_fails_as_audience() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for aud in [
        json!("https://api.test.invalid/other"),
        json!(["https://a.test.invalid", "https://b.test.invalid"]),
        json!([]),
        json!(7),
    ] {
        assert_eq!(reason(&v, &rs256(&with(claims(), "aud", aud))).await, "audience");
    }
    assert_eq!(reason(&v, &rs256(&without(claims(), "aud"))).await, "audience");
}

#[tokio::test]
async fn an_expired_token_fails_as_expired_but_small_clock_skew_is_tolerated() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let expired = with(claims(), "exp", json!(now() - 120));
    assert_eq!(reason(&v, &rs256(&expired)).await, "expired");
    let skewed = with(claims(), "exp", json!(now() - 5));
    assert!(v.verify(&rs256(&skewed), NO_HEADERS).await.is_ok());
    assert_eq!(reason(&v, &rs256(&without(claims(), "exp"))).await, "malformed");
    let text = with(claims(), "exp", json!("tomorrow"));
    assert_eq!(reason(&v, &rs256(&text)).await, "malformed");
}

#[tokio::test]
async fn a_token_whose_nbf_is_in_the_future_fails_as_not_yet_valid() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let early = with(claims(), "nbf", json!(now() + 600));
    assert_eq!(reason(&v, &rs256(&early)).await, "not_yet_valid");
    let skewed = with(claims(), "nbf", json!(now() + 5));
    assert!(v.verify(&rs256(&skewed), NO_HEADERS).await.is_ok());
}

#[tokio::test]
async fn a_token_without_a_usable_subject_fails_as_subject() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    assert_eq!(reason(&v, &rs256(&without(claims(), "sub"))).await, "subject");
    for sub in [json!(""), json!(42), json!("x".repeat(257)), json!("a\nb")] {
        assert_eq!(reason(&v, &rs256(&with(claims(), "sub", sub))).await, "subject");
    }
    let longest = with(claims(), "sub", json!("x".repeat(256)));
    assert!(v.verify(&rs256(&longest), NO_HEADERS).await.is_ok());
}

#[tokio::test]
async fn a_token_without_a_single_signed_tenant_fails_as_tenant_claim() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let none = without(claims(), "tenantId");
    assert_eq!(reason(&v, &rs256(&none)).await, "tenant_claim");
    let conflicting = with(claims(), "customer_id", json!("tenant-other"));
    assert_eq!(reason(&v, &rs256(&conflicting)).await, "tenant_claim");
    let empty = with(none.clone(), "tenant_id", json!(""));
    assert_eq!(reason(&v, &rs256(&empty)).await, "tenant_claim");
    let agreeing = with(claims(), "orgId", json!(TENANT));
    assert_eq!(v.verify(&rs256(&agreeing), NO_HEADERS).await.unwrap().tenant, TENANT);
    for name in ["tenantId", "tenant_id", "customerId", "customer_id", "orgId", "org_id"] {
        let one = with(none.clone(), name, json!("t-from-claim"));
        let t = v.verify(&rs256(&one), NO_HEADERS).await.unwrap();
        assert_eq!(t.tenant, "t-from-claim", "{name}");
    }
}

#[tokio::test]
async fn an_hs256_token_fails_as_algorithm_when_the_local_path_is_not_configured() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let secret = Secret::new(LOCAL_SECRET);
    let token = mint_local_hs256(&secret, ISSUER, AUDIENCE, "user-1", TENANT, &[], 300);
    assert_eq!(reason(&v, &token).await, "algorithm");
    // A JWKS that publishes a symmetric key does not open the door either.
    let oct = json!({"kty": "oct", "k": URL_SAFE_NO_PAD.encode(LOCAL_SECRET), "kid": "rsa-a"});
    server.publish(serde_json::from_value(oct).unwrap());
    let mut header = Header::new(Algorithm::HS256);
    header.kid = Some("rsa-a".into());
    let keyed =
        jsonwebtoken::encode(&header, &claims(), &EncodingKey::from_secret(LOCAL_SECRET.as_bytes()).unwrap()).unwrap();
    assert_eq!(reason(&v, &keyed).await, "algorithm");
    assert_eq!(server.hits(), 0, "rejected before any key lookup");
}

#[tokio::test]
async fn an_unsigned_alg_none_token_fails_as_algorithm() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    for alg in ["none", "None", "HS512", "RSA-OAEP", ""] {
        let token = raw_token(json!({"alg": alg, "kid": "rsa-a"}), &claims(), b"sig");
        assert_eq!(reason(&v, &token).await, "algorithm", "{alg}");
    }
    let unsigned =
        format!("{}.{}.", URL_SAFE_NO_PAD.encode(r#"{"alg":"none"}"#), URL_SAFE_NO_PAD.encode(claims().to_string()));
    assert_eq!(reason(&v, &unsigned).await, "malformed");
}

#[tokio::test]
async fn an_asymmetric_algorithm_outside_the_admitted_list_or_the_key_fails_as_algorithm() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    // PS256 is a fine algorithm for this RSA key, but the config admits RS256 and ES256 only.
    let ps256 = sign(Algorithm::PS256, "rsa-a", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &ps256).await, "algorithm");
    // An admitted algorithm pointed at a key of another type.
    let crossed = sign(Algorithm::RS256, "ec-1", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &crossed).await, "algorithm");
}

#[tokio::test]
async fn an_unknown_kid_refetches_the_key_set_once_then_fails_as_unknown_key() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 1);
    let unknown = sign(Algorithm::RS256, "rsa-unknown", &rsa(RSA_A), &claims());
    assert_eq!(reason(&v, &unknown).await, "unknown_key");
    assert_eq!(server.hits(), 2, "exactly one refetch per unknown kid");
    let no_kid = jsonwebtoken::encode(&Header::new(Algorithm::RS256), &claims(), &rsa(RSA_A)).unwrap();
    assert_eq!(reason(&v, &no_kid).await, "unknown_key");
    assert_eq!(server.hits(), 2, "a token without kid never refetches");
}

#[tokio::test]
async fn unknown_kids_within_the_refresh_interval_do_not_refetch_the_key_set() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    for i in 0..20 {
        let spam = sign(Algorithm::RS256, &format!("spam-{i}"), &rsa(RSA_A), &claims());
        assert_eq!(reason(&v, &spam).await, "unknown_key");
    }
    assert_eq!(server.hits(), 1);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
}

#[tokio::test]
async fn a_key_rotated_into_the_key_set_is_picked_up_by_the_refresh() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    let rotated = sign(Algorithm::RS256, "rsa-b", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &rotated).await, "unknown_key");
    server.publish(public_jwk(&rsa(RSA_B), Algorithm::RS256, "rsa-b"));
    let t = v.verify(&rotated, NO_HEADERS).await.unwrap();
    assert_eq!(t.tenant, TENANT);
    assert_eq!(server.hits(), 3);
    // Both keys now verify from the cache.
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    v.verify(&rotated, NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 3);
}

#[tokio::test]
async fn the_key_set_is_refetched_when_its_ttl_has_passed() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { ttl: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 2);
}

#[tokio::test]
async fn a_token_verified_earlier_is_refused_once_a_refresh_withdrew_its_key() {
    let server = JwksServer::standard().await;
    let policy = JwksPolicy { min_refresh_interval: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    let token = rs256(&claims());
    v.verify(&token, NO_HEADERS).await.unwrap();
    v.verify(&token, NO_HEADERS).await.unwrap();
    assert_eq!(server.hits(), 1, "the second check is answered from the verified-token cache");
    server.withdraw("rsa-a");
    // Any refresh (here: a token naming a kid the set lacks) replaces the set...
    let rotated = sign(Algorithm::RS256, "rsa-b", &rsa(RSA_B), &claims());
    assert_eq!(reason(&v, &rotated).await, "unknown_key");
    // ...and the cached verification no longer stands without its key.
    assert_eq!(reason(&v, &token).await, "unknown_key");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_first_requests_share_one_key_set_fetch() {
    let server = JwksServer::standard().await;
    let v = Arc::new(verifier(&server));
    let token = Arc::new(rs256(&claims()));
    let tasks: Vec<_> = (0..16)
        .map(|_| {
            let (v, token) = (v.clone(), token.clone());
            tokio::spawn(async move { v.verify(&token, NO_HEADERS).await })
        })
        .collect();
    for t in tasks {
        t.await.unwrap().unwrap();
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_matching_tenant_header_is_accepted_and_a_mismatched_one_is_tenant_mismatch() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let token = rs256(&claims());
    let all = TenantHeaders { tenant_id: Some(TENANT), customer_id: Some(TENANT), org_id: Some(TENANT) };
    assert_eq!(v.verify(&token, all).await.unwrap().tenant, TENANT);
    let mismatches = [
        TenantHeaders { tenant_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { customer_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { tenant_id: Some(TENANT), org_id: Some("tenant-other"), ..NO_HEADERS },
        TenantHeaders { org_id: Some(""), ..NO_HEADERS },
    ];
    for headers in mismatches {
        assert!(matches!(v.verify(&token, headers).await, Err(ApiError::TenantMismatch)), "{headers:?}");
    }
    // A header never stands in for a missing signed tenant.
    let untenanted = rs256(&without(claims(), "tenantId"));
    let headers = TenantHeaders { tenant_id: Some(TENANT), ..NO_HEADERS };
    assert!(matches!(v.verify(&untenanted, headers).await, Err(ApiError::InvalidToken { reason: "tenant_claim" })));
}

#[tokio::test]
async fn a_jwks_server_that_is_down_makes_verification_unavailable() {
    // Nothing listens on a port that was just released.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks.json", listener.local_addr().unwrap());
    drop(listener);
    let v = TokenVerifier::new(&oauth(Some(&url), None), reqwest::Client::new());
    let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
    assert!(matches!(err, ApiError::Unavailable(_)), "{err:?}");
    assert!(err.retryable());
    assert!(std::error::Error::source(&err).is_some(), "the fetch failure is kept as the source");

    // A server answering 500 is unavailable too, and recovers once it serves keys again.
    let server = JwksServer::standard().await;
    server.state.fail.store(true, Ordering::SeqCst);
    let policy = JwksPolicy { failure_backoff: Duration::ZERO, ..JwksPolicy::default() };
    let v = verifier_with(&server, policy);
    let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
    assert!(matches!(err, ApiError::Unavailable(_)), "{err:?}");
    let mut chain = String::new();
    let mut cur: Option<&dyn std::error::Error> = std::error::Error::source(&err);
    while let Some(e) = cur {
        chain.push_str(&e.to_string());
        cur = e.source();
    }
    assert!(chain.contains("HTTP 500"), "{chain}");
    server.state.fail.store(false, Ordering::SeqCst);
    v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
}

#[tokio::test]
async fn a_failed_fetch_is_not_retried_by_every_request_during_the_backoff() {
    let server = JwksServer::standard().await;
    server.state.fail.store(true, Ordering::SeqCst);
    let v = verifier(&server);
    for _ in 0..5 {
        let err = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap_err();
        assert!(matches!(err, ApiError::Unavailable(_)));
    }
    assert_eq!(server.hits(), 1);
}

#[tokio::test]
async fn a_locally_minted_hs256_token_round_trips_through_the_verifier() {
    let secret = Secret::new(LOCAL_SECRET);
    let v = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    let scopes = vec!["helix.rooms.read".to_owned(), "helix.rooms.manage".to_owned()];
    let token = mint_local_hs256(&secret, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &scopes, 600);
    let headers = TenantHeaders { tenant_id: Some("dev-tenant"), ..NO_HEADERS };
    let t = v.verify(&token, headers).await.unwrap();
    assert_eq!(t.issuer, ISSUER);
    assert_eq!(t.subject, "dev-user");
    assert_eq!(t.tenant, "dev-tenant");
    assert_eq!(t.scopes, scopes);
    assert!((t.expires_at - now() - 600).abs() <= 5);
    // The local path still enforces every claim rule.
    let expired = mint_local_hs256(&secret, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &scopes, -120);
    assert_eq!(reason(&v, &expired).await, "expired");
    let elsewhere = mint_local_hs256(&secret, "https://other/", AUDIENCE, "dev-user", "t", &[], 60);
    assert_eq!(reason(&v, &elsewhere).await, "issuer");
    // Without a JWKS, an RS256 token has no key to verify against.
    assert_eq!(reason(&v, &rs256(&claims())).await, "unknown_key");
}

#[tokio::test]
async fn an_hs256_token_signed_with_the_wrong_secret_fails_as_signature() {
    let v = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    let wrong = Secret::new("test-only-some-other-secret-9876543210");
    let token = mint_local_hs256(&wrong, ISSUER, AUDIENCE, "dev-user", "dev-tenant", &[], 600);
    assert_eq!(reason(&v, &token).await, "signature");
}

#[tokio::test]
async fn an_oversized_or_malformed_bearer_fails_as_malformed_without_a_fetch() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let padded = with(claims(), "pad", json!("x".repeat(9 * 1024)));
    let oversized = rs256(&padded);
    assert!(oversized.len() > 8 * 1024);
    assert_eq!(reason(&v, &oversized).await, "malformed");
    let good = rs256(&claims());
    for bad in [
        String::new(),
        "not-a-jwt".to_owned(),
        format!("{good}.extra"),
        format!("{good}="),
        format!("{}.{}", URL_SAFE_NO_PAD.encode("[]"), "e30.c2ln"),
        format!("{}.e30.c2ln", URL_SAFE_NO_PAD.encode("not json")),
    ] {
        assert_eq!(reason(&v, &bad).await, "malformed", "{bad}");
    }
    assert_eq!(server.hits(), 0);
}

#[tokio::test]
async fn errors_and_debug_output_never_contain_the_token_or_the_identity() {
    let server = JwksServer::standard().await;
    let v = verifier(&server);
    let token = rs256(&with(claims(), "iss", json!("https://evil.test.invalid/")));
    let err = v.verify(&token, NO_HEADERS).await.unwrap_err();
    let signature = token.rsplit('.').next().unwrap();
    for text in [format!("{err:?}"), err.to_string(), err.body("req-1").to_string()] {
        assert!(!text.contains(signature), "{text}");
        assert!(!text.contains("evil"), "{text}");
    }
    assert_eq!(err.body("req-1")["error"]["details"]["reason"], "issuer");

    let ok = v.verify(&rs256(&claims()), NO_HEADERS).await.unwrap();
    let debug = format!("{ok:?}");
    assert!(!debug.contains("auth0|user-1") && !debug.contains(TENANT), "{debug}");

    let local = TokenVerifier::new(&oauth(None, Some(LOCAL_SECRET)), reqwest::Client::new());
    assert!(!format!("{local:?}").contains(LOCAL_SECRET));
}

#[test]
fn bearer_from_header_takes_a_case_insensitive_scheme_and_a_single_token() {
    let token = rs256(&claims());
    assert_eq!(bearer_from_header(&format!("Bearer {token}")), Some(token.as_str()));
    assert_eq!(bearer_from_header(&format!("bEaReR {token}")), Some(token.as_str()));
    assert_eq!(bearer_from_header(&format!("Bearer {token} {token}")), None);
    assert_eq!(bearer_from_header(&format!("Basic {token}")), None);
    assert_eq!(bearer_from_header("Bearer"), None);
    assert_eq!(bearer_from_header(""), None);
}
