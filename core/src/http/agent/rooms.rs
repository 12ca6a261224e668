//! `/api/v1/rooms/*`: REST framing of the room services (bearer lane). Room and
//! binding identity comes from the verified principal; bodies are strict (any owner,
//! tenant, account, participant, chat or source field is an unknown field), and the two
//! withdrawals take only the opaque reference in the path.

use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{delete, get, post};
use axum::{Json, Router};
use http::StatusCode;

use super::actor::AgentActor;
use crate::domain::page::cursor_query;
use crate::domain::room::{ChatClaimRequest, CreateRoomRequest, RunBindingRequest};
use crate::error::ApiError;
use crate::http::idempotent;
use crate::http::query::{empty_request, no_query};
use crate::http::{AppState, Authed, Group, IdemKey, JsonBody, pipeline};

pub fn router(state: AppState) -> Router {
    let group_pipeline = || axum::middleware::from_fn_with_state((state.clone(), Group::Rooms), pipeline);
    // Only the create takes an `Idempotency-Key`; the other mutations never carry the header.
    let creates = Router::new()
        .route("/api/v1/rooms", get(list).post(create).fallback(method_not_allowed_get_post))
        .layer(group_pipeline());
    let rest = Router::new()
        .route("/api/v1/rooms/run-bindings", post(bind_run).fallback(method_not_allowed_post))
        .route("/api/v1/rooms/run-bindings/{binding_ref}", delete(unbind_run).fallback(method_not_allowed_delete))
        .route("/api/v1/rooms/chat-bindings/claim", post(claim_chat).fallback(method_not_allowed_post))
        .route("/api/v1/rooms/chat-bindings/{binding_ref}", delete(unbind_chat).fallback(method_not_allowed_delete))
        .route("/api/v1/rooms/{room_id}", get(inspect).fallback(method_not_allowed_get))
        .route("/api/v1/rooms/{room_id}/commands", post(command).fallback(method_not_allowed_post))
        .layer(group_pipeline());
    idempotent::replayed_on_every_post(creates).merge(rest).with_state(state)
}

async fn method_not_allowed_get_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET, POST" }
}
async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}
async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}
async fn method_not_allowed_delete() -> ApiError {
    ApiError::MethodNotAllowed { allow: "DELETE" }
}

fn json(status: StatusCode, body: impl serde::Serialize) -> Response {
    (status, Json(body)).into_response()
}

/// One page of rooms: the only query parameter is the `cursor` of the previous page.
async fn list(State(app): State<AppState>, Authed(p): Authed, RawQuery(q): RawQuery) -> Result<Response, ApiError> {
    let cursor = cursor_query(q.as_deref())?;
    Ok(json(StatusCode::OK, app.services.rooms.list_rooms(&p, cursor.as_deref()).await?))
}

async fn create(
    State(app): State<AppState>,
    Authed(p): Authed,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<CreateRoomRequest>,
) -> Result<Response, ApiError> {
    let m = app.services.rooms.create_room(&p, &key, req).await?;
    Ok(idempotent::mutation_response(m, json))
}

async fn inspect(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(room_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    no_query(q.as_deref())?;
    Ok(json(StatusCode::OK, app.services.rooms.inspect_room(&agent, &room_id).await?))
}

async fn bind_run(
    State(app): State<AppState>,
    Authed(p): Authed,
    JsonBody(req): JsonBody<RunBindingRequest>,
) -> Result<Response, ApiError> {
    let (created, body) = app.services.rooms.bind_run(&p, req).await?;
    Ok(json(if created { StatusCode::CREATED } else { StatusCode::OK }, body))
}

async fn unbind_run(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(binding_ref): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), &body)?;
    Ok(json(StatusCode::OK, app.services.rooms.unbind_run(&p, &binding_ref).await?))
}

async fn claim_chat(
    State(app): State<AppState>,
    Authed(p): Authed,
    JsonBody(req): JsonBody<ChatClaimRequest>,
) -> Result<Response, ApiError> {
    Ok(json(StatusCode::CREATED, app.services.rooms.claim_chat(&p, req).await?))
}

async fn unbind_chat(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(binding_ref): Path<String>,
    RawQuery(q): RawQuery,
    body: Bytes,
) -> Result<Response, ApiError> {
    empty_request(q.as_deref(), &body)?;
    Ok(json(StatusCode::OK, app.services.rooms.unbind_chat(&p, &binding_ref).await?))
}

/// Always `command_execution_not_enabled` (after authentication and scope): the body is
/// never read, so nothing in it can reach anything.
async fn command(State(app): State<AppState>, Authed(p): Authed) -> Result<Response, ApiError> {
    Ok(json(StatusCode::OK, app.services.rooms.room_command(&p).await?))
}
