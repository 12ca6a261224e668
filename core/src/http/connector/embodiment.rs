//! Player embodiment over HTTP, two lanes that never mix:
//! - the browser lane (cookie, same-origin only): the pairing page, the one pairing
//!   response (credential and configuration shown once), and clearing an Emergency Stop;
//! - the southbound connector routes under `/api/connectors/v1` (connector credential
//!   only, its own route group with its own body and rate limits): register, poll.
//!
//! The agent side is the MCP tools (`mcp/tools/embodiment.rs`).

use axum::extract::{FromRequestParts, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::request::Parts;
use http::{HeaderMap, StatusCode};

use super::connector_credentials::PairingPage;
use crate::auth::jwt::bearer_from_header;
use crate::config::CONNECTOR_LIMITS;
use crate::domain::embodiment::PairingRequest;
use crate::domain::embodiment::protocol::{CONNECTOR_BASE, PollRequest, RegisterRequest};
use crate::error::ApiError;
use crate::http::pages::sign_in_first::PageSession;
use crate::http::pages::{Asset, Csp, PAIRING_PAGE_PATH, Referrer, SameOriginSession, page_headers};
use crate::http::ratelimit::WindowKey;
use crate::http::{AppState, Group, JsonBody, pipeline};
use crate::service::embodiment::AuthedConnector;
use crate::service::embodiment::ClearStopRequest;

pub const PAIRINGS_PATH: &str = "/api/account/room-connectors/pairings";
pub const CLEAR_STOP_PATH: &str = "/api/account/room-connectors/emergency-stop/clear";
pub const PAIRING_SCRIPT_PATH: &str = "/account/static/room-connectors.js";

async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}
async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}

// ---------- the browser lane (cookie) ----------

/// The pairing page, its script, and the cookie routes (pairing, Emergency Stop clear,
/// credential rotation and revocation).
pub fn browser_router(state: AppState) -> Router {
    Router::new()
        .route(PAIRING_PAGE_PATH, get(pairing_page).fallback(method_not_allowed_get))
        .route(PAIRING_SCRIPT_PATH, get(pairing_script).fallback(method_not_allowed_get))
        .route(PAIRINGS_PATH, post(pair).fallback(method_not_allowed_post))
        .route(CLEAR_STOP_PATH, post(clear_stop).fallback(method_not_allowed_post))
        .merge(super::connector_credentials::routes())
        .merge(super::connector_region::routes())
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::SourceBrowser), pipeline))
        // `same-origin`, not `no-referrer`: under `no-referrer` a browser sends `Origin: null`
        // with the page's plain forms (rotate, revoke), which the same-origin rule refuses.
        // No URL of this lane carries a secret (credentials are only in response bodies).
        .layer(page_headers(&state, Csp::SameOriginScript, Referrer::SameOrigin))
        .with_state(state)
}

const PAIRING_SCRIPT: &str = include_str!("../../../templates/room-connectors.js");

/// `GET /account/room-connectors`, or `?room_id=…` (the link of a room's section on
/// `/rooms`) with the forms' room filled in.
async fn pairing_page(
    State(state): State<AppState>,
    PageSession(session): PageSession,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let room_id = super::connector_credentials::room_query(q.as_deref())?;
    Ok(PairingPage::for_session(&state, &session, &headers, room_id))
}

async fn pairing_script() -> Asset {
    Asset::script(PAIRING_SCRIPT)
}

async fn pair(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<PairingRequest>,
) -> Result<Response, ApiError> {
    let created = state.services.embodiment.pair_connector(&session, req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn clear_stop(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<ClearStopRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.clear_emergency_stop(&session, req).await?).into_response())
}

// ---------- the southbound connector routes (connector credential) ----------

/// The connector route group.
pub fn connector_router(state: AppState) -> Router {
    Router::new()
        .route(&format!("{CONNECTOR_BASE}/register"), post(register).fallback(method_not_allowed_post))
        .route(&format!("{CONNECTOR_BASE}/poll"), post(poll).fallback(method_not_allowed_post))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Connector), pipeline))
        .with_state(state)
}

/// A request authenticated by a connector credential (never an OAuth token, a cookie or
/// a source bearer), within the per-connector rate limit.
pub struct ConnectorAuthed(pub AuthedConnector);

impl FromRequestParts<AppState> for ConnectorAuthed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let value = parts.headers.get(http::header::AUTHORIZATION).ok_or(ApiError::ConnectorCredentialInvalid)?;
        let value = value.to_str().map_err(|_| ApiError::ConnectorCredentialInvalid)?;
        let credential = bearer_from_header(value).ok_or(ApiError::ConnectorCredentialInvalid)?;
        let connector = state.services.embodiment.authenticate_connector(credential).await?;
        let key = WindowKey::Connector { binding_id: connector.binding.binding_id.clone() };
        let limit = CONNECTOR_LIMITS.principal_per_minute;
        state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
        Ok(ConnectorAuthed(connector))
    }
}

async fn register(
    State(state): State<AppState>,
    ConnectorAuthed(c): ConnectorAuthed,
    JsonBody(req): JsonBody<RegisterRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.register_connector(&c, req).await?).into_response())
}

async fn poll(
    State(state): State<AppState>,
    ConnectorAuthed(c): ConnectorAuthed,
    JsonBody(req): JsonBody<PollRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.poll_connector(&c, req).await?).into_response())
}
