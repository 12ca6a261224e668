//! `/api/agi/agent-run-observer/*`: the browser's observer lane (cookie, same-origin
//! only, never a bearer). A signed-in, non-guest browser issues a show-once chat claim
//! handle, reads its observer binding (status and the one terminal message), polls
//! progress receipts, and disconnects (also under the room feature lock).

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::StatusCode;

use crate::domain::room::ObserverRequest;
use crate::error::ApiError;
use crate::http::pages::{Csp, Referrer, SameOriginSession, page_headers};
use crate::http::query::empty_request;
use crate::http::{AppState, Group, JsonBody, pipeline};

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
        .layer(page_headers(&state, Csp::NoScript, Referrer::SameOrigin))
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

async fn create(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<ObserverRequest>,
) -> Result<Response, ApiError> {
    let created = state.services.rooms.create_observer(&session, req).await?;
    Ok((StatusCode::CREATED, Json(created)).into_response())
}

async fn read(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), b"")?;
    Ok(Json(state.services.rooms.observer(&session, &observer_ref).await?).into_response())
}

async fn events(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let (after, limit) = crate::http::query::event_query(q.as_deref())?;
    Ok(Json(state.services.rooms.observer_events(&session, &observer_ref, after, limit).await?).into_response())
}

async fn disconnect(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(observer_ref): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), &body)?;
    Ok(Json(state.services.rooms.disconnect_observer(&session, &observer_ref).await?).into_response())
}
