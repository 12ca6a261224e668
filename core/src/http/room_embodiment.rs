//! "Your identity in this environment" on `/rooms`: the signed-in person selects their
//! subject (player) in a room's environment and stops, or clears the stop of, their own
//! player. Plain forms (no script), same-origin only (the `SameOriginSession` extractor),
//! post/redirect/get; the rules and typed errors are `service::embodiment`'s, the same
//! functions as the MCP tools, and a refusal is shown on the page as a readable message.

use axum::extract::State;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Router};
use serde::Deserialize;

use super::AppState;
use super::pages::{Page, SameOriginSession};
use super::room_admin::{back, page_for, to_rooms};
use crate::error::ApiError;
use crate::service::sessions::Session;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/rooms/subject/select", post(select).get(to_rooms))
        .route("/rooms/subject/emergency-stop", post(stop).get(to_rooms))
        .route("/rooms/subject/emergency-stop/clear", post(clear).get(to_rooms))
}

/// The page's message for a refusal: its code and sentence (never a secret: typed errors
/// carry none).
pub(super) fn notice_of(e: &ApiError) -> String {
    format!("{}: {}", e.code(), e)
}

/// A refusal the person can act on shows the page again with the message (and the
/// error's status); anything else is the error response itself.
async fn answer(state: &AppState, s: &Session, done: Result<(), ApiError>) -> Result<Response, ApiError> {
    let e = match done {
        Ok(()) => return Ok(back()),
        Err(e) if e.status().is_server_error() => return Err(e),
        Err(e) => e,
    };
    let mut page = page_for(state, s, None).await?;
    page.notice = Some(notice_of(&e));
    Ok((e.status(), Page(page)).into_response())
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
        .select_subject_as_person(&s, &f.room_id, &f.environment_binding_id, &f.subject_ref)
        .await;
    answer(&state, &s, done.map(drop)).await
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
    answer(&state, &s, done.map(drop)).await
}

/// **Clear my player's Emergency Stop**: only here, by a person.
async fn clear(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<OwnSubjectForm>,
) -> Result<Response, ApiError> {
    let done = state.services.embodiment.clear_own_subject_stop(&s, &f.room_id, &f.environment_binding_id).await;
    answer(&state, &s, done.map(drop)).await
}
