//! The development issuer's routes (`helix serve` on loopback, development only): its
//! metadata and key set, registration, the token endpoint, the authorize pages and the
//! browser's sign-in, composed over the pieces in `dev_auth`, `dev_register`,
//! `dev_authorize`, `dev_token` and `dev_oidc`.

use std::sync::Arc;

use axum::extract::State;
use axum::routing::get;
use axum::{Json, Router};
use http::HeaderValue;
use http::header::CONTENT_SECURITY_POLICY;
use serde_json::Value;
use tower_http::set_header::SetResponseHeaderLayer;

use super::dev_auth::{
    AUTHORIZE_PATH, DevAuthKey, JWKS_PATH, METADATA_PATHS, OPENID_METADATA_PATHS, REGISTER_PATH, TOKEN_PATH,
    metadata_document,
};
use super::dev_token::DevIssuer;
use crate::config::Mode;
use crate::http::pages::{Csp, Referrer, page_headers_but_csp as page_headers};
use crate::http::{AppState, Group, pipeline};

/// The development issuer's routes, or None outside development.
/// (`helix serve` also hosts them on a loopback address only.)
pub fn router(state: AppState, key: Arc<DevAuthKey>) -> Option<Router> {
    if state.services.config.mode != Mode::Development {
        return None;
    }
    let browser = super::dev_oidc::provider(&state);
    let clients = Arc::new(super::dev_client_metadata::ClientMetadata::new());
    let issuer = DevIssuer { app: state.clone(), key, browser: browser.clone(), clients };
    let mut router = Router::new()
        .route(JWKS_PATH, get(jwks))
        .route(REGISTER_PATH, axum::routing::post(super::dev_register::register))
        .route(TOKEN_PATH, axum::routing::post(super::dev_token::token));
    let openid = if browser.is_some() { &OPENID_METADATA_PATHS[..] } else { &[] };
    for path in METADATA_PATHS.iter().chain(openid) {
        router = router.route(path, get(metadata));
    }
    // The pages: the account lane's pipeline and headers, except that the consent page
    // sets its own policy (its form leads back to the client's loopback redirect).
    let policy = HeaderValue::from_str(&Csp::NoScript.policy(&state)).expect("ascii policy");
    let pages = Router::new()
        .route(AUTHORIZE_PATH, get(super::dev_authorize::authorize).post(super::dev_authorize::decide))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Account), pipeline))
        .layer(page_headers(Referrer::SameOrigin))
        .layer(SetResponseHeaderLayer::if_not_present(CONTENT_SECURITY_POLICY, policy))
        .with_state(issuer.clone());
    let mut all = router
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Discovery), pipeline))
        .with_state(issuer)
        .merge(pages);
    if let Some(browser) = browser {
        all = all.merge(super::dev_oidc::router(state, browser));
    }
    Some(all)
}

async fn metadata(State(issuer): State<DevIssuer>) -> Json<Value> {
    Json(metadata_document(&issuer.app, issuer.browser.is_some()))
}

/// The access tokens' ES256 key and, with the browser's sign-in, the ID tokens' RS256 key.
async fn jwks(State(issuer): State<DevIssuer>) -> Json<Value> {
    let mut set = issuer.key.jwks();
    if let (Some(browser), Some(keys)) = (&issuer.browser, set["keys"].as_array_mut()) {
        keys.push(browser.id_token_key.jwk());
    }
    Json(set)
}
