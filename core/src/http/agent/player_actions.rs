//! The REST twins of the player-embodiment MCP tools, under `/api/v1/rooms/{room_id}/…`
//! (bearer, the room route group). Each route calls the same embodiment service function
//! as its tool, so scopes, membership, authority, lease and bounds are checked in one
//! place; the bodies are the tools' arguments minus what the path and headers carry.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use schemars::JsonSchema;
use serde::Deserialize;
use serde_json::Value;

use super::actor::AgentActor;
use crate::domain::embodiment::Action;
use crate::error::ApiError;
use crate::http::idempotent;
use crate::http::{AppState, Authed, Group, IdemKey, JsonBody, pipeline};
use crate::service::embodiment::Control;

async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}
async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

/// The five routes, behind the room group's pipeline.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/api/v1/rooms/{room_id}/environment-subjects", get(subjects).fallback(method_not_allowed_get))
        .route("/api/v1/rooms/{room_id}/environment-subjects/select", post(select).fallback(method_not_allowed_post))
        .route("/api/v1/rooms/{room_id}/player-actions", post(act).fallback(method_not_allowed_post))
        .route("/api/v1/rooms/{room_id}/player-workflows/{workflow_ref}", get(status).fallback(method_not_allowed_get))
        .route(
            "/api/v1/rooms/{room_id}/player-workflows/{workflow_ref}/control",
            post(control).fallback(method_not_allowed_post),
        )
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Rooms), pipeline))
        .with_state(state)
}

/// `POST …/environment-subjects/select`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct SelectBody {
    pub environment_binding_id: String,
    pub subject_ref: String,
}

/// `POST …/player-actions` (the idempotency key is the `Idempotency-Key` header).
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ActionBody {
    #[serde(default)]
    pub environment: Option<String>,
    /// One typed action, tagged by type (the same admitted schema as the MCP tool's).
    #[schemars(with = "Action")]
    pub action: Value,
}

/// `POST …/player-workflows/{workflow_ref}/control`.
#[derive(Debug, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub struct ControlBody {
    pub control: Control,
}

async fn subjects(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(room_id): Path<String>,
) -> Result<Response, ApiError> {
    Ok(Json(app.services.embodiment.list_subjects(&agent, &room_id).await?).into_response())
}

async fn select(
    State(app): State<AppState>,
    AgentActor(agent): AgentActor,
    Path(room_id): Path<String>,
    JsonBody(b): JsonBody<SelectBody>,
) -> Result<Response, ApiError> {
    let (binding, subject) = (&b.environment_binding_id, &b.subject_ref);
    let s = app.services.embodiment.select_subject(&agent, &room_id, binding, subject).await?;
    Ok(Json(s).into_response())
}

/// An accepted action answers its stored status (`202`) with the workflow at once (never
/// waiting for the work) and `Idempotency-Replayed`.
async fn act(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(room_id): Path<String>,
    IdemKey(key): IdemKey,
    JsonBody(b): JsonBody<ActionBody>,
) -> Result<Response, ApiError> {
    let m = app.services.embodiment.player_action(&p, &room_id, &key, b.environment.as_deref(), &b.action).await?;
    Ok(idempotent::mutation_response(m, |status, body| (status, Json(body)).into_response()))
}

async fn status(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path((room_id, workflow_ref)): Path<(String, String)>,
) -> Result<Response, ApiError> {
    Ok(Json(app.services.embodiment.workflow_status(&p, &room_id, &workflow_ref).await?).into_response())
}

async fn control(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path((room_id, workflow_ref)): Path<(String, String)>,
    JsonBody(b): JsonBody<ControlBody>,
) -> Result<Response, ApiError> {
    Ok(Json(app.services.embodiment.workflow_control(&p, &room_id, &workflow_ref, b.control).await?).into_response())
}
