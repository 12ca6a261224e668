//! Bearer verification's side of the core integration tests: test-only keys from
//! `tests/fixtures` (generated with openssl; never used anywhere else), a real JWKS server
//! on loopback, verifiers on it, and claims and tokens to verify.
#![allow(dead_code)]

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use axum::Json;
use axum::extract::State;
use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use helix_core::auth::jwt::{JwksPolicy, TenantHeaders, TokenVerifier};
use helix_core::config::{OAuthConfig, Secret};
use helix_core::error::ApiError;
use jsonwebtoken::jwk::{Jwk, PublicKeyUse};
use jsonwebtoken::{Algorithm, EncodingKey, Header};
use serde_json::{Value, json};

pub const ISSUER: &str = "https://issuer.test.invalid/";
pub const AUDIENCE: &str = "https://api.test.invalid/mcp";
pub const TENANT: &str = "tenant-test-1";
pub const LOCAL_SECRET: &str = "test-only-local-hs256-secret-0123456789";

pub const RSA_A: &str = include_str!("../fixtures/test-only-rsa-a.private.pem");
pub const RSA_B: &str = include_str!("../fixtures/test-only-rsa-b.private.pem");
pub const EC_P256: &str = include_str!("../fixtures/test-only-ec-p256.private.pem");

pub fn rsa(pem: &str) -> EncodingKey {
    EncodingKey::from_rsa_pem(pem.as_bytes()).unwrap()
}

pub fn ec(pem: &str) -> EncodingKey {
    EncodingKey::from_ec_pem(pem.as_bytes()).unwrap()
}

/// The public half of a fixture key as a JWK, as an authorization server publishes it.
pub fn public_jwk(key: &EncodingKey, alg: Algorithm, kid: &str) -> Jwk {
    let mut jwk = Jwk::from_encoding_key(key, alg).unwrap();
    jwk.common.key_id = Some(kid.to_owned());
    jwk.common.public_key_use = Some(PublicKeyUse::Signature);
    jwk
}

#[derive(Clone)]
pub struct ServerState {
    pub keys: Arc<std::sync::Mutex<Vec<Jwk>>>,
    pub hits: Arc<AtomicUsize>,
    pub fail: Arc<std::sync::atomic::AtomicBool>,
}

pub struct JwksServer {
    pub url: String,
    pub state: ServerState,
    task: tokio::task::JoinHandle<()>,
}

impl JwksServer {
    pub async fn start(keys: Vec<Jwk>) -> Self {
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
    pub async fn standard() -> Self {
        Self::start(vec![
            public_jwk(&rsa(RSA_A), Algorithm::RS256, "rsa-a"),
            public_jwk(&ec(EC_P256), Algorithm::ES256, "ec-1"),
        ])
        .await
    }

    pub fn hits(&self) -> usize {
        self.state.hits.load(Ordering::SeqCst)
    }

    pub fn publish(&self, jwk: Jwk) {
        self.state.keys.lock().unwrap().push(jwk);
    }

    pub fn withdraw(&self, kid: &str) {
        self.state.keys.lock().unwrap().retain(|k| k.common.key_id.as_deref() != Some(kid));
    }
}

impl Drop for JwksServer {
    fn drop(&mut self) {
        self.task.abort();
    }
}

pub fn oauth(jwks_url: Option<&str>, local_secret: Option<&str>) -> OAuthConfig {
    OAuthConfig {
        issuer: ISSUER.into(),
        audience: AUDIENCE.into(),
        jwks_url: jwks_url.map(str::to_owned),
        provider: "test-provider".into(),
        algorithms: vec![Algorithm::RS256, Algorithm::ES256],
        local_hs256_secret: local_secret.map(Secret::new),
        authorization_servers: vec![ISSUER.into()],
        jwks_identity: None,
    }
}

pub fn verifier(server: &JwksServer) -> TokenVerifier {
    TokenVerifier::new(&oauth(Some(&server.url), None), reqwest::Client::new())
}

pub fn verifier_with(server: &JwksServer, policy: JwksPolicy) -> TokenVerifier {
    TokenVerifier::with_policy(&oauth(Some(&server.url), None), reqwest::Client::new(), policy)
}

pub fn now() -> i64 {
    chrono::Utc::now().timestamp()
}

pub fn claims() -> Value {
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

pub fn with(mut claims: Value, key: &str, value: Value) -> Value {
    claims[key] = value;
    claims
}

pub fn without(mut claims: Value, key: &str) -> Value {
    claims.as_object_mut().unwrap().remove(key);
    claims
}

pub fn sign(alg: Algorithm, kid: &str, key: &EncodingKey, claims: &Value) -> String {
    let mut header = Header::new(alg);
    header.kid = Some(kid.to_owned());
    jsonwebtoken::encode(&header, claims, key).unwrap()
}

pub fn rs256(claims: &Value) -> String {
    sign(Algorithm::RS256, "rsa-a", &rsa(RSA_A), claims)
}

/// A token with an arbitrary protected header and signature, for algorithms
/// `jsonwebtoken` refuses to produce.
pub fn raw_token(header: Value, claims: &Value, signature: &[u8]) -> String {
    format!(
        "{}.{}.{}",
        URL_SAFE_NO_PAD.encode(header.to_string()),
        URL_SAFE_NO_PAD.encode(claims.to_string()),
        URL_SAFE_NO_PAD.encode(signature)
    )
}

pub const NO_HEADERS: TenantHeaders<'static> = TenantHeaders { tenant_id: None, customer_id: None, org_id: None };

pub async fn reason(v: &TokenVerifier, token: &str) -> &'static str {
    match v.verify(token, NO_HEADERS).await {
        Err(ApiError::InvalidToken { reason }) => reason,
        other => panic!("expected invalid_token, got {other:?}"),
    }
}
