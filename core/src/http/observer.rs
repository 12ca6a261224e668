//! `/api/agi/agent-run-observer/*`: the browser's observer lane (cookie, same-origin
//! only, never a bearer). A signed-in, non-guest browser issues a show-once chat claim
//! handle, reads its observer binding (status and the one terminal message), polls
//! progress receipts, and disconnects (also under the room feature lock).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::{HeaderMap, StatusCode};

use super::account::{BrowserSession, require_same_origin};
use super::rooms::empty_request;
use super::{AppState, Group, JsonBody, pipeline};
use crate::domain::room::ObserverRequest;
use crate::error::ApiError;
use crate::service::sessions::Session;

pub const BASE: &str = "/api/agi/agent-run-observer/bindings";

pub fn router(state: AppState) -> Router {
    Router::new()
        .route(BASE, post(create).fallback(method_not_allowed_post))
        .route(
            &format!("{BASE}/{{observer_ref}}"),
            get(read).delete(disconnect).fallback(method_not_allowed_get_delete),
        )
        .route(&format!("{BASE}/{{observer_ref}}/events"), get(events).fallback(method_not_allowed_get))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Observer), pipeline))
        .layer(axum::middleware::map_response_with_state(state.clone(), super::account::page_headers_for))
        .with_state(state)
}

async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}
async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}
async fn method_not_allowed_get_delete() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET, DELETE" }
}

/// Same-origin and the per-account limit of this lane, for every observer request (the
/// window's verdict is awaited before the handler acts, so a 429 means nothing happened).
async fn admit(state: &AppState, headers: &HeaderMap, session: &Session) -> Result<(), ApiError> {
    require_same_origin(state, headers)?;
    let limit = state.services.config.observer_limits.principal_per_minute;
    let key = format!("account:Observer:{}", session.account_id);
    state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
    Ok(())
}

async fn create(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    JsonBody(req): JsonBody<ObserverRequest>,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    let created = state.services.create_observer(&session, req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn read(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    empty_request(q.as_deref(), b"")?;
    Ok(Json(state.services.observer(&session, &observer_ref).await?).into_response())
}

async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    let (after, limit) = super::agent_runs::event_query(q.as_deref())?;
    Ok(Json(state.services.observer_events(&session, &observer_ref, after, limit).await?).into_response())
}

async fn disconnect(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    empty_request(q.as_deref(), &body)?;
    Ok(Json(state.services.disconnect_observer(&session, &observer_ref).await?).into_response())
}
