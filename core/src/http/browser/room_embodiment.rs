//! "Your identity in this environment" on `/rooms`: the signed-in person selects their
//! subject (player) in a room's environment and stops, or clears the stop of, their own
//! player. Plain forms (no script), same-origin only (the `SameOriginSession` extractor),
//! post/redirect/get; the rules and typed errors are `service::embodiment`'s, the same
//! functions as the MCP tools, and a refusal is shown on the page as a readable message.

use axum::extract::State;
use axum::response::Response;
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;

use super::room_admin::{answer, back_saying, to_rooms};
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::pages::SameOriginSession;
use crate::http::pages::flash::Done;
use crate::service::Actor;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/rooms/subject/select", post(select).get(to_rooms))
        .route("/rooms/subject/emergency-stop", post(stop).get(to_rooms))
        .route("/rooms/subject/emergency-stop/clear", post(clear).get(to_rooms))
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct SelectForm {
    room_id: String,
    environment_binding_id: String,
    subject_ref: String,
}

/// **Select**: binds the signed-in person to this subject and takes its control lease.
async fn select(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<SelectForm>,
) -> Result<Response, ApiError> {
    let done = state
        .services
        .embodiment
        .select_subject(&Actor::person(&s), &f.room_id, &f.environment_binding_id, &f.subject_ref)
        .await;
    answer(&state, &s, done.map(|_| back_saying(&state, Done::SubjectSelected))).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct OwnSubjectForm {
    room_id: String,
    environment_binding_id: String,
}

/// **Emergency Stop my player**: the subject the person selected in that environment.
async fn stop(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<OwnSubjectForm>,
) -> Result<Response, ApiError> {
    let done = state.services.embodiment.stop_own_subject_as_person(&s, &f.room_id, &f.environment_binding_id).await;
    answer(&state, &s, done.map(|_| back_saying(&state, Done::SubjectStopped))).await
}

/// **Clear my player's Emergency Stop**: only here, by a person.
async fn clear(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<OwnSubjectForm>,
) -> Result<Response, ApiError> {
    let done = state.services.embodiment.clear_own_subject_stop(&s, &f.room_id, &f.environment_binding_id).await;
    answer(&state, &s, done.map(|_| back_saying(&state, Done::SubjectStopCleared))).await
}
