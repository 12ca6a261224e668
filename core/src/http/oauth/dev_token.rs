//! `/token` of the development issuer: `authorization_code` (single-use code, PKCE S256
//! verifier, the same client, redirect URI and resource) and `refresh_token` (rotated on
//! every use; a rotated token presented again ends its whole family). Access tokens are
//! ES256 JWTs signed by the data-dir key, for the canonical resource. Every answer is
//! `Cache-Control: no-store`; errors are RFC 6749 §5.2 JSON.

use axum::Json;
use axum::body::Bytes;
use axum::extract::State;
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD as B64;
use http::header::{CACHE_CONTROL, PRAGMA};
use http::{HeaderValue, StatusCode};
use serde_json::{Value, json};
use sha2::Digest;

use super::dev_auth::{DevAuthKey, OFFLINE_ACCESS, issuer_url, resource_ok};
use super::dev_oidc::{TokenForm, exchange};
use crate::config::DEV_PROVIDER_CLIENT_ID;
use crate::domain::{random_hex, sha256_hex};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::pages::{pairs, single};
use crate::service::oauth::{OAuthClient, RefreshFamily};

/// How long an access token is valid.
pub const ACCESS_TOKEN_TTL_SECS: i64 = 3600;
/// How long a refresh family lives from its first token (rotation does not extend it).
pub const REFRESH_FAMILY_TTL_SECS: i64 = 30 * 24 * 3600;

fn no_store(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    res
}

/// An RFC 6749 §5.2 error.
fn oauth_error(error: &'static str, description: &str) -> Response {
    let status = if error == "invalid_client" { StatusCode::UNAUTHORIZED } else { StatusCode::BAD_REQUEST };
    no_store((status, Json(json!({ "error": error, "error_description": description }))).into_response())
}

/// The issuer's state: the app and its signing key.
#[derive(Clone)]
pub(super) struct DevIssuer {
    pub app: AppState,
    pub key: std::sync::Arc<DevAuthKey>,
    /// The browser's sign-in (the first-party client), when enabled.
    pub browser: Option<std::sync::Arc<super::dev_oidc::DevProvider>>,
    /// Clients named by their metadata document's URL.
    pub clients: std::sync::Arc<super::dev_client_metadata::ClientMetadata>,
}

impl DevIssuer {
    /// The client `client_id` names: a metadata document (fetched or cached), else a
    /// registration in the store. `Ok(Err(why))` when there is none to use.
    pub(super) async fn client(&self, client_id: &str) -> Result<Result<OAuthClient, String>, ApiError> {
        if super::dev_client_metadata::is_metadata_url(client_id) {
            if !self.app.services.config.browser.dev_client_metadata {
                return Ok(Err("this server takes no client metadata documents (HELIX_DEV_OAUTH_CLIENT_METADATA=0): register the client".to_owned()));
            }
            let now = self.app.services.clock.epoch();
            return Ok(self.clients.resolve(client_id, now).await.map_err(|e| e.to_string()));
        }
        Ok(self
            .app
            .services
            .oauth
            .client(client_id)
            .await?
            .ok_or_else(|| "this client is not registered (or its registration expired)".to_owned()))
    }
}

impl axum::extract::FromRef<DevIssuer> for AppState {
    fn from_ref(issuer: &DevIssuer) -> AppState {
        issuer.app.clone()
    }
}

fn unavailable(e: impl Into<ApiError>) -> Response {
    no_store(e.into().into_response())
}

pub(super) async fn token(State(issuer): State<DevIssuer>, body: Bytes) -> Response {
    let Ok(text) = std::str::from_utf8(&body) else {
        return oauth_error("invalid_request", "the body must be application/x-www-form-urlencoded");
    };
    let form = pairs(text);
    for name in ["grant_type", "code", "code_verifier", "client_id", "redirect_uri", "refresh_token", "scope"] {
        if single(&form, name).is_err() {
            return oauth_error("invalid_request", "a parameter was given twice");
        }
    }
    let get = |name: &str| field(&form, name);
    if let (Some(DEV_PROVIDER_CLIENT_ID), Some(browser)) = (get("client_id"), &issuer.browser) {
        let f = TokenForm {
            grant_type: get("grant_type").unwrap_or_default().to_owned(),
            code: get("code").unwrap_or_default().to_owned(),
            redirect_uri: get("redirect_uri").unwrap_or_default().to_owned(),
            code_verifier: get("code_verifier").unwrap_or_default().to_owned(),
            client_id: Some(DEV_PROVIDER_CLIENT_ID.to_owned()),
        };
        return no_store(exchange(&issuer.app, browser, f));
    }
    if !resource_ok(&issuer.app, &form) {
        return oauth_error("invalid_target", "resource must be this server's MCP resource");
    }
    match get("grant_type") {
        Some("authorization_code") => authorization_code(&issuer, &form).await,
        Some("refresh_token") => refresh(&issuer, &form).await,
        Some(_) => oauth_error("unsupported_grant_type", "authorization_code and refresh_token only"),
        None => oauth_error("invalid_request", "grant_type is required"),
    }
}

/// A form field (given once; repeats were refused before).
fn field<'a>(form: &'a [(String, String)], name: &str) -> Option<&'a str> {
    single(form, name).ok().flatten()
}

/// The client must be registered (public: it proves nothing but its id).
async fn client(issuer: &DevIssuer, client_id: Option<&str>) -> Result<Vec<String>, Response> {
    let Some(id) = client_id else { return Err(oauth_error("invalid_request", "client_id is required")) };
    match issuer.client(id).await {
        Ok(Ok(c)) => Ok(c.grant_types),
        Ok(Err(why)) => Err(oauth_error("invalid_client", &why)),
        Err(e) => Err(unavailable(e)),
    }
}

async fn authorization_code(issuer: &DevIssuer, form: &[(String, String)]) -> Response {
    let get = |name: &str| field(form, name);
    let (Some(code), Some(verifier)) = (get("code"), get("code_verifier")) else {
        return oauth_error("invalid_request", "code and code_verifier are required");
    };
    let grant_types = match client(issuer, get("client_id")).await {
        Ok(g) => g,
        Err(res) => return res,
    };
    let oauth = &issuer.app.services.oauth;
    // Consumed first: whatever happens next, this code is spent.
    let grant = match oauth.redeem_code(code).await {
        Ok(Some(g)) => g,
        Ok(None) => return oauth_error("invalid_grant", "the code is unknown, expired or already used"),
        Err(e) => return unavailable(e),
    };
    if Some(grant.client_id.as_str()) != get("client_id") {
        return oauth_error("invalid_grant", "the code was issued to another client");
    }
    if get("redirect_uri") != Some(grant.redirect_uri.as_str()) {
        return oauth_error("invalid_grant", "redirect_uri differs from the authorization request's");
    }
    let verifier_ok = (43..=128).contains(&verifier.len())
        && verifier.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~'));
    if !verifier_ok || B64.encode(sha2::Sha256::digest(verifier.as_bytes())) != grant.code_challenge {
        return oauth_error("invalid_grant", "the code_verifier does not match the code_challenge");
    }
    let now = issuer.app.services.clock.epoch();
    let mut answer = access_token(issuer, &grant.client_id, &grant.subject, &grant.tenant, &grant.scopes, now);
    if grant.scopes.iter().any(|s| s == OFFLINE_ACCESS) && grant_types.iter().any(|g| g == "refresh_token") {
        let family = RefreshFamily {
            family_id: random_hex(16),
            client_id: grant.client_id.clone(),
            scopes: grant.scopes.clone(),
            resource: grant.resource.clone(),
            subject: grant.subject.clone(),
            tenant: grant.tenant.clone(),
            current_hash: String::new(),
            expires_at: now + REFRESH_FAMILY_TTL_SECS,
        };
        let refresh = random_hex(32);
        let family = RefreshFamily { current_hash: sha256_hex(&refresh), ..family };
        if let Err(e) = oauth.start_family(&refresh, &family).await {
            return unavailable(e);
        }
        answer["refresh_token"] = json!(refresh);
    }
    no_store(Json(answer).into_response())
}

async fn refresh(issuer: &DevIssuer, form: &[(String, String)]) -> Response {
    let get = |name: &str| field(form, name);
    let Some(token) = get("refresh_token") else {
        return oauth_error("invalid_request", "refresh_token is required");
    };
    if let Err(res) = client(issuer, get("client_id")).await {
        return res;
    }
    let oauth = &issuer.app.services.oauth;
    let family = match oauth.live_family(token).await {
        Ok(Some(f)) => f,
        Ok(None) => return oauth_error("invalid_grant", "the refresh token is unknown, expired or revoked"),
        Err(e) => return unavailable(e),
    };
    if family.current_hash != sha256_hex(token) {
        // A rotated token came back: someone holds a copy. End the whole family.
        if let Err(e) = oauth.end_family(&family.family_id).await {
            return unavailable(e);
        }
        return oauth_error("invalid_grant", "the refresh token was already used; its family is revoked");
    }
    if Some(family.client_id.as_str()) != get("client_id") {
        return oauth_error("invalid_grant", "the refresh token was issued to another client");
    }
    let scopes: Vec<String> = match get("scope") {
        None => family.scopes.clone(),
        Some(s) => {
            let asked: Vec<String> = s.split_ascii_whitespace().map(str::to_owned).collect();
            if asked.iter().any(|a| !family.scopes.contains(a)) {
                return oauth_error("invalid_scope", "a refresh cannot widen the granted scopes");
            }
            asked
        }
    };
    let next = random_hex(32);
    match oauth.rotate(&family, token, &next).await {
        Ok(true) => {}
        Ok(false) => return oauth_error("invalid_grant", "the refresh token was already used"),
        Err(e) => return unavailable(e),
    }
    let now = issuer.app.services.clock.epoch();
    let mut answer = access_token(issuer, &family.client_id, &family.subject, &family.tenant, &scopes, now);
    answer["refresh_token"] = json!(next);
    no_store(Json(answer).into_response())
}

/// The token answer (without a refresh token) for this grant.
fn access_token(
    issuer: &DevIssuer,
    client_id: &str,
    subject: &str,
    tenant: &str,
    scopes: &[String],
    now: i64,
) -> Value {
    let scope = scopes.join(" ");
    let jwt = issuer.key.sign(&json!({
        "iss": issuer_url(&issuer.app),
        "aud": issuer.app.services.config.resource,
        "sub": subject,
        "tenant_id": tenant,
        "scope": scope,
        "client_id": client_id,
        "iat": now,
        "exp": now + ACCESS_TOKEN_TTL_SECS,
        "jti": random_hex(16),
    }));
    json!({ "access_token": jwt, "token_type": "Bearer", "expires_in": ACCESS_TOKEN_TTL_SECS, "scope": scope })
}
