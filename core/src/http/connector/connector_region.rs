//! The owner-set region of an action connector's environment binding (cookie,
//! same-origin, the room owner): a JSON route for scripts and the pairing page's plain
//! form (post/redirect/get). Every rule is in `service::embodiment`.

use axum::extract::{Path, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use serde::Deserialize;

use crate::domain::embodiment::action::Pos;
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::pages::flash::{Done, see_other_done};
use crate::http::pages::{PAIRING_PAGE_PATH, SameOriginSession};
use crate::service::embodiment::RegionRequest;

pub const REGION_PATH: &str = "/api/account/room-connectors/{environment_binding_id}/region";
/// The pairing page's region form.
pub const REGION_FORM_PATH: &str = "/account/room-connectors/region";

async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

/// The JSON route and the form (the browser lane's pipeline is the caller's).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(REGION_PATH, post(set_region).fallback(method_not_allowed_post))
        .route(REGION_FORM_PATH, post(region_form).get(crate::http::pages::to_pairing_page))
}

async fn set_region(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(binding_id): Path<String>,
    crate::http::JsonBody(req): crate::http::JsonBody<RegionRequest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.set_region(&session, &binding_id, req).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RegionForm {
    room_id: String,
    environment_binding_id: String,
    /// `set` or `clear`.
    op: String,
    #[serde(default)]
    min_x: String,
    #[serde(default)]
    min_y: String,
    #[serde(default)]
    min_z: String,
    #[serde(default)]
    max_x: String,
    #[serde(default)]
    max_y: String,
    #[serde(default)]
    max_z: String,
}

fn pos(x: &str, y: &str, z: &str) -> Result<Pos, ApiError> {
    let n = |v: &str| v.trim().parse::<i32>().map_err(|_| ApiError::InvalidRequest("region: whole numbers".into()));
    Ok(Pos { x: n(x)?, y: n(y)?, z: n(z)? })
}

/// Set or clear the region, then back to the page (303).
async fn region_form(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RegionForm>,
) -> Result<Response, ApiError> {
    super::connector_credentials::answer(region_change(&state, &s, f).await)
}

async fn region_change(
    state: &AppState,
    s: &crate::service::sessions::Session,
    f: RegionForm,
) -> Result<Response, ApiError> {
    let req = match f.op.as_str() {
        "set" => RegionRequest {
            room_id: f.room_id,
            min: Some(pos(&f.min_x, &f.min_y, &f.min_z)?),
            max: Some(pos(&f.max_x, &f.max_y, &f.max_z)?),
            clear: false,
        },
        "clear" => RegionRequest { room_id: f.room_id, min: None, max: None, clear: true },
        _ => return Err(ApiError::InvalidRequest("op must be set or clear".into())),
    };
    let done = if req.clear { Done::RegionCleared } else { Done::RegionSet };
    state.services.embodiment.set_region(s, &f.environment_binding_id, req).await?;
    Ok(see_other_done(state, PAIRING_PAGE_PATH, done))
}
