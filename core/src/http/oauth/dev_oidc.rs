//! The browser's sign-in at the development issuer hosted by `helix serve` (development
//! mode only, on loopback only): the first-party client `helix-local-browser` signs a
//! person in through its real OIDC client code with no external service. People and
//! agents sign in at one issuer, as at Auth0 in production: its identifier is the base
//! URL, its metadata the issuer's, `/authorize` sends this client to the sign-in page
//! here and `/token` hands its codes to [`exchange`]; ID tokens are RS256, signed by the
//! issuer's ID-token key (published beside its access-token key). Codes are single-use, short-lived, PKCE (S256) bound and kept in
//! memory. The subject and tenant picked on the page are the same identity as
//! `helix dev-token --subject S --tenant T`.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use askama::Template;
use axum::extract::{FromRef, Query, State};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::{Form, Json, Router};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use http::header::{LOCATION, SET_COOKIE};
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::Deserialize;
use serde_json::json;

use super::dev_auth::IdTokenKey;
use crate::config::{DEV_PROVIDER_CLIENT_ID, DEV_PROVIDER_PATH, Mode};
use crate::domain::random_hex;
use crate::error::ApiError;
use crate::http::pages::{Csp, Page, Referrer, SameOrigin, page_headers};
use crate::http::{AppState, Group, pipeline};

const CODE_TTL_SECS: i64 = 60;
const ID_TOKEN_TTL_SECS: i64 = 300;
const DEFAULT_SUBJECT: &str = "dev-user";
const DEFAULT_TENANT: &str = "dev-tenant";
/// The development provider's own memory of who signed in last in this browser (as a
/// real provider's session remembers its user): `subject|tenant`, no secret. Its sign-in
/// pages are prefilled with it, so a step-up offers the identity already signed in.
pub(super) const IDENTITY_COOKIE: &str = "helix_dev_identity";

/// An EdDSA (Ed25519) signer and its JWKS: a stand-in provider's key in tests of the
/// browser lane's OIDC client against providers other than this one.
pub struct DevSigner {
    key: ed25519_dalek::SigningKey,
    kid: String,
}

impl DevSigner {
    pub fn generate() -> Self {
        let mut seed = [0u8; 32];
        getrandom::fill(&mut seed).expect("operating system randomness");
        let key = ed25519_dalek::SigningKey::from_bytes(&seed);
        let kid = crate::domain::sha256_hex(key.verifying_key().to_bytes())[..16].to_owned();
        Self { key, kid }
    }

    pub fn jwks(&self) -> serde_json::Value {
        json!({ "keys": [{
            "kty": "OKP", "crv": "Ed25519", "use": "sig", "alg": "EdDSA", "kid": self.kid,
            "x": B64.encode(self.key.verifying_key().to_bytes()),
        }] })
    }

    /// A compact JWS of the claims.
    pub fn sign(&self, claims: &serde_json::Value) -> String {
        use ed25519_dalek::Signer;
        let header = json!({ "alg": "EdDSA", "typ": "JWT", "kid": self.kid });
        let input = format!("{}.{}", B64.encode(header.to_string()), B64.encode(claims.to_string()));
        let sig = self.key.sign(input.as_bytes());
        format!("{input}.{}", B64.encode(sig.to_bytes()))
    }
}

struct Grant {
    redirect_uri: String,
    code_challenge: String,
    nonce: String,
    subject: String,
    tenant: String,
    auth_time: i64,
    expires_at: i64,
}

/// The browser sign-in's state: the ID-token key and the codes it issued.
pub struct DevProvider {
    pub(super) id_token_key: IdTokenKey,
    codes: Mutex<HashMap<String, Grant>>,
}

impl DevProvider {
    pub fn new() -> Self {
        Self { id_token_key: IdTokenKey::generate(), codes: Mutex::default() }
    }
}

impl Default for DevProvider {
    fn default() -> Self {
        Self::new()
    }
}

#[derive(Clone)]
struct Dev {
    app: AppState,
    provider: Arc<DevProvider>,
}

impl FromRef<Dev> for AppState {
    fn from_ref(dev: &Dev) -> AppState {
        dev.app.clone()
    }
}

fn redirect_uri(state: &AppState) -> String {
    format!("{}{}", state.services.config.public_base_url, crate::http::pages::CALLBACK_PATH)
}

/// The provider, or None unless this is development with the provider enabled.
pub fn provider(state: &AppState) -> Option<Arc<DevProvider>> {
    let config = &state.services.config;
    (config.mode == Mode::Development && config.browser.dev_provider).then(|| Arc::new(DevProvider::new()))
}

/// The sign-in page's routes (the issuer's `/authorize` sends the browser client here).
pub(in crate::http) fn router(state: AppState, provider: Arc<DevProvider>) -> Router {
    let dev = Dev { app: state.clone(), provider };
    let p = DEV_PROVIDER_PATH;
    Router::new()
        .route(&format!("{p}/authorize"), get(login_page).post(login))
        .route(&format!("{p}/token"), axum::routing::post(token))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(page_headers(&state, Csp::NoScript, Referrer::SameOrigin))
        .with_state(dev)
}

#[derive(Deserialize)]
struct AuthorizeQuery {
    response_type: Option<String>,
    client_id: Option<String>,
    redirect_uri: Option<String>,
    state: Option<String>,
    nonce: Option<String>,
    code_challenge: Option<String>,
    code_challenge_method: Option<String>,
}

#[derive(Template)]
#[template(path = "dev_login.html")]
pub(super) struct LoginPage {
    pub action: String,
    /// Hidden form fields carried to the POST.
    pub hidden: Vec<(&'static str, String)>,
    pub subject: String,
    pub tenant: String,
    pub button_id: &'static str,
}

/// The identity this browser last signed in as at the development provider, if any.
pub(super) fn remembered_identity(headers: &HeaderMap) -> Option<(String, String)> {
    let value = crate::http::pages::cookie(headers, IDENTITY_COOKIE)?;
    let (subject, tenant) = value.split_once('|')?;
    (identifier_ok(subject) && identifier_ok(tenant)).then(|| (subject.to_owned(), tenant.to_owned()))
}

/// The cookie remembering a sign-in at the development provider (identifiers only).
pub(super) fn remember_identity(state: &AppState, subject: &str, tenant: &str) -> HeaderValue {
    let max_age = state.services.config.browser.session_absolute.as_secs() as i64;
    crate::http::pages::set_cookie(state, IDENTITY_COOKIE, &format!("{subject}|{tenant}"), "/", max_age)
}

fn bad(what: &str) -> ApiError {
    ApiError::InvalidRequest(format!("development provider: {what}"))
}

fn check_client(dev: &Dev, client_id: &str, redirect: &str) -> Result<(), ApiError> {
    if client_id != DEV_PROVIDER_CLIENT_ID {
        return Err(bad("unknown client_id"));
    }
    if redirect != redirect_uri(&dev.app) {
        return Err(bad("redirect_uri is not registered"));
    }
    Ok(())
}

async fn login_page(
    State(dev): State<Dev>,
    headers: HeaderMap,
    Query(q): Query<AuthorizeQuery>,
) -> Result<Response, ApiError> {
    if q.response_type.as_deref() != Some("code") {
        return Err(bad("response_type must be code"));
    }
    if q.code_challenge_method.as_deref() != Some("S256") {
        return Err(bad("PKCE with S256 is required"));
    }
    let (client_id, redirect) = (q.client_id.unwrap_or_default(), q.redirect_uri.unwrap_or_default());
    check_client(&dev, &client_id, &redirect)?;
    let (subject, tenant) =
        remembered_identity(&headers).unwrap_or_else(|| (DEFAULT_SUBJECT.to_owned(), DEFAULT_TENANT.to_owned()));
    let page = LoginPage {
        action: format!("{DEV_PROVIDER_PATH}/authorize"),
        hidden: vec![
            ("client_id", client_id),
            ("redirect_uri", redirect),
            ("state", q.state.ok_or_else(|| bad("state is required"))?),
            ("nonce", q.nonce.ok_or_else(|| bad("nonce is required"))?),
            ("code_challenge", q.code_challenge.ok_or_else(|| bad("code_challenge is required"))?),
        ],
        subject,
        tenant,
        button_id: "dev-sign-in",
    };
    Ok(Page(page).into_response())
}

#[derive(Deserialize)]
struct LoginForm {
    client_id: String,
    redirect_uri: String,
    state: String,
    nonce: String,
    code_challenge: String,
    subject: String,
    tenant: String,
}

pub(super) fn identifier_ok(s: &str) -> bool {
    (1..=128).contains(&s.len())
        && s.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'@'))
}

async fn login(State(dev): State<Dev>, _: SameOrigin, Form(f): Form<LoginForm>) -> Result<Response, ApiError> {
    check_client(&dev, &f.client_id, &f.redirect_uri)?;
    if !identifier_ok(&f.subject) || !identifier_ok(&f.tenant) {
        return Err(bad("subject and tenant: 1-128 of A-Z a-z 0-9 - _ . @"));
    }
    let now = dev.app.services.clock.epoch();
    let code = random_hex(32);
    let identity = (f.subject.clone(), f.tenant.clone());
    let mut location = openidconnect::url::Url::parse(&f.redirect_uri).map_err(|_| bad("redirect_uri"))?;
    location.query_pairs_mut().append_pair("code", &code).append_pair("state", &f.state);
    {
        let mut codes = dev.provider.codes.lock().expect("codes lock");
        codes.retain(|_, g| g.expires_at > now);
        codes.insert(
            code,
            Grant {
                redirect_uri: f.redirect_uri,
                code_challenge: f.code_challenge,
                nonce: f.nonce,
                subject: f.subject,
                tenant: f.tenant,
                auth_time: now,
                expires_at: now + CODE_TTL_SECS,
            },
        );
    }
    let mut res = StatusCode::SEE_OTHER.into_response();
    res.headers_mut().insert(LOCATION, HeaderValue::from_str(location.as_str()).map_err(ApiError::internal)?);
    res.headers_mut().append(SET_COOKIE, remember_identity(&dev.app, &identity.0, &identity.1));
    Ok(res)
}

#[derive(Deserialize)]
pub(super) struct TokenForm {
    pub grant_type: String,
    pub code: String,
    pub redirect_uri: String,
    pub code_verifier: String,
    pub client_id: Option<String>,
}

fn token_error(code: &str) -> Response {
    let mut res = (StatusCode::BAD_REQUEST, Json(json!({ "error": code }))).into_response();
    res.headers_mut().insert(http::header::CACHE_CONTROL, HeaderValue::from_static("no-store"));
    res
}

async fn token(State(dev): State<Dev>, Form(f): Form<TokenForm>) -> Response {
    exchange(&dev.app, &dev.provider, f)
}

/// The browser client's code exchange (at `/token` or here): an ID token.
pub(super) fn exchange(app: &AppState, provider: &DevProvider, f: TokenForm) -> Response {
    if f.grant_type != "authorization_code" {
        return token_error("unsupported_grant_type");
    }
    if f.client_id.as_deref().is_some_and(|c| c != DEV_PROVIDER_CLIENT_ID) {
        return token_error("invalid_client");
    }
    let now = app.services.clock.epoch();
    // Single use: the code is removed whatever the outcome.
    let Some(grant) = provider.codes.lock().expect("codes lock").remove(&f.code) else {
        return token_error("invalid_grant");
    };
    let challenge = B64.encode(sha2::Sha256::digest(f.code_verifier.as_bytes()));
    if grant.expires_at <= now || grant.redirect_uri != f.redirect_uri || challenge != grant.code_challenge {
        return token_error("invalid_grant");
    }
    let id_token = provider.id_token_key.sign(&json!({
        "iss": super::dev_auth::issuer_url(app),
        "sub": grant.subject,
        "aud": DEV_PROVIDER_CLIENT_ID,
        "iat": now,
        "exp": now + ID_TOKEN_TTL_SECS,
        "auth_time": grant.auth_time,
        "nonce": grant.nonce,
        "tenant_id": grant.tenant,
    }));
    Json(json!({
        "access_token": format!("dev-oidc-{}", random_hex(16)),
        "token_type": "Bearer",
        "expires_in": ID_TOKEN_TTL_SECS,
        "id_token": id_token,
    }))
    .into_response()
}

use sha2::Digest;
