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
use crate::service::runs::DEFAULT_EVENT_LIMIT;
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

/// `after_seq` (default 0) and `limit` (default 50, 1-200); nothing else.
fn page_query(raw: Option<&str>) -> Result<(u64, u32), ApiError> {
    let (mut after, mut limit) = (0u64, DEFAULT_EVENT_LIMIT);
    for pair in raw.unwrap_or("").split('&').filter(|p| !p.is_empty()) {
        let (name, value) = pair.split_once('=').unwrap_or((pair, ""));
        let bad = |n: &str| ApiError::InvalidRequest(format!("{n}: must be a whole number"));
        match name {
            "after_seq" => after = value.parse().map_err(|_| bad("after_seq"))?,
            "limit" => limit = value.parse().map_err(|_| bad("limit"))?,
            _ => return Err(ApiError::InvalidRequest("unknown query parameter".into())),
        }
    }
    Ok((after, limit))
}

async fn events(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    let (after, limit) = page_query(q.as_deref())?;
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

#[cfg(test)]
mod tests {
    use super::page_query;

    #[test]
    fn page_query_defaults_and_refuses_unknown_parameters() {
        assert_eq!(page_query(None).unwrap(), (0, 50));
        assert_eq!(page_query(Some("after_seq=3&limit=10")).unwrap(), (3, 10));
        assert!(page_query(Some("chat_id=x")).is_err());
        assert!(page_query(Some("limit=-1")).is_err());
    }
}
