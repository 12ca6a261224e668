//! Rotation and revocation of an action connector's credential (cookie, same-origin, the
//! room owner): two JSON routes for scripts and the pairing page's plain form (a
//! confirmation step first; a rotation shows the new credential once, in that response;
//! a revocation redirects back to the page). Every rule is in `service::embodiment`.

use askama::Template;
use axum::extract::{Path, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use axum::{Form, Json, Router};
use serde::Deserialize;

use crate::domain::embodiment::PairingCreated;
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::connector::connector_choices::{Choices, choices};
use crate::http::pages::flash::{self, Done};
use crate::http::pages::{PAIRING_PAGE_PATH, Page, SameOriginSession, refusal_notice, to_pairing_page};
use crate::service::embodiment::PairingRoom;
use crate::service::sessions::Session;

pub const ROTATE_PATH: &str = "/api/account/room-connectors/{environment_binding_id}/rotate";
pub const REVOKE_PATH: &str = "/api/account/room-connectors/{environment_binding_id}/revoke";
/// The pairing page's rotate/revoke form.
pub const CREDENTIAL_FORM_PATH: &str = "/account/room-connectors/credential";

/// The pairing page: the pairing form, the rotate/revoke form with its confirmation step,
/// a rotated credential (shown once), and the Emergency Stop clear.
#[derive(Template, Default)]
#[template(path = "room_connectors.html")]
pub struct PairingPage {
    /// A guest account: the page says pairing is not for it, and has no forms.
    pub guest: bool,
    /// A refused form's readable message (its error code and sentence).
    pub notice: Option<String>,
    /// What the form just posted did (once, after its redirect).
    pub done: Option<&'static str>,
    /// The room the page's forms start filled in with (`?room_id=`, from the room's
    /// section on `/rooms`); empty when none.
    pub room_id: String,
    /// A rotation or revocation awaiting the owner's confirmation.
    pub confirm: Option<PendingChange>,
    /// The credential a confirmed rotation just issued (this response only).
    pub rotated: Option<Rotated>,
    /// The rooms and environments the forms' pickers offer.
    pub choices: Choices,
}

pub struct PendingChange {
    /// `rotate` or `revoke`.
    pub op: &'static str,
    pub room_id: String,
    pub environment_binding_id: String,
}

pub struct Rotated {
    pub environment_binding_id: String,
    pub credential: String,
    pub config: String,
}

impl Rotated {
    fn of(p: PairingCreated) -> Rotated {
        Rotated {
            environment_binding_id: p.environment_binding_id,
            credential: p.connector_credential,
            config: serde_json::to_string_pretty(&p.connector_config).unwrap_or_default(),
        }
    }
}

impl PairingPage {
    /// The page for a signed-in session: a guest's page is a refusal (403) with no forms.
    /// A form's `303` back here carries its confirmation ([`flash`]): shown once, cleared.
    /// `room_id` is the query's room (checked by [`room_query`]).
    pub async fn for_session(
        state: &AppState,
        s: &crate::service::sessions::Session,
        headers: &HeaderMap,
        room_id: String,
    ) -> Result<Response, ApiError> {
        if s.policy.guest {
            let page = PairingPage { guest: true, ..Default::default() };
            return Ok((ApiError::GuestNotAllowed.status(), Page(page)).into_response());
        }
        let choices = choices(state, s).await?;
        Ok(flash::shown(state, headers, PAIRING_PAGE_PATH, |done| {
            Page(PairingPage { done, room_id, choices, ..Default::default() }).into_response()
        }))
    }

    /// Whether a room id is the one the forms start with (the query's, or the only one).
    fn picked_room(&self, room_id: &str) -> bool {
        room_id == self.room_id || (self.room_id.is_empty() && self.choices.rooms.len() == 1)
    }

    /// Whether an environment is the one the forms start with (the only one of the page's room).
    fn picked_environment(&self, environment_binding_id: &str) -> bool {
        let mut of_room = self.choices.environments.iter().filter(|e| self.picked_room(&e.room_id));
        match (of_room.next(), of_room.next()) {
            (Some(only), None) => only.environment_binding_id == environment_binding_id,
            _ => self.choices.environments.len() == 1,
        }
    }

    /// The query's room when the person does not own it (or it is past the first page of
    /// rooms): offered as it is, so the link of a room's section still fills the forms in.
    fn unlisted_room(&self) -> Option<&str> {
        let listed = self.choices.rooms.iter().any(|r| r.room_id == self.room_id);
        (!self.room_id.is_empty() && !listed).then_some(self.room_id.as_str())
    }
}

/// The pairing page's query: nothing, or one `room_id` of a room id's shape (anything else
/// is `invalid_request`, as on the other pages' queries). Whether the room is the caller's
/// is the forms' question: the page only fills the field in.
pub fn room_query(raw: Option<&str>) -> Result<String, ApiError> {
    match raw.unwrap_or("") {
        "" => Ok(String::new()),
        q => q
            .strip_prefix("room_id=")
            .filter(|id| crate::domain::room::RoomId::parse(id).is_some())
            .map(str::to_owned)
            .ok_or_else(|| ApiError::InvalidRequest("the only query parameter is room_id, a room id".into())),
    }
}

/// The one answer of the pairing page's plain forms: what the form did, or, for a refusal
/// the person can act on (a client error), the page again with the error's message and
/// status. A server error stays the error response itself.
pub(super) async fn answer(
    state: &AppState,
    s: &Session,
    done: Result<Response, ApiError>,
) -> Result<Response, ApiError> {
    let e = match done {
        Ok(answered) => return Ok(answered),
        Err(e) => e,
    };
    let guest = matches!(e, ApiError::GuestNotAllowed);
    let (status, notice) = refusal_notice(e)?;
    let choices = if guest { Choices::default() } else { choices(state, s).await? };
    Ok((status, Page(PairingPage { guest, notice: Some(notice), choices, ..Default::default() })).into_response())
}

async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

/// The JSON routes and the form (the browser lane's pipeline is the caller's).
pub fn routes() -> Router<AppState> {
    Router::new()
        .route(ROTATE_PATH, post(rotate).fallback(method_not_allowed_post))
        .route(REVOKE_PATH, post(revoke).fallback(method_not_allowed_post))
        .route(CREDENTIAL_FORM_PATH, post(credential_form).get(to_pairing_page))
}

async fn rotate(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(binding_id): Path<String>,
    crate::http::JsonBody(req): crate::http::JsonBody<PairingRoom>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.rotate_connector(&session, &binding_id, req).await?).into_response())
}

async fn revoke(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    Path(binding_id): Path<String>,
    crate::http::JsonBody(req): crate::http::JsonBody<PairingRoom>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.embodiment.revoke_connector(&session, &binding_id, req).await?).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CredentialForm {
    room_id: String,
    environment_binding_id: String,
    /// `rotate` or `revoke`.
    op: String,
    /// Present (`yes`) once the owner confirmed on the confirmation step.
    confirm: Option<String>,
}

/// Rotate or revoke: first a page asking to confirm; the confirmed rotation answers the
/// new credential once (never in a redirect), the confirmed revocation redirects back.
async fn credential_form(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<CredentialForm>,
) -> Result<Response, ApiError> {
    let done = async {
        let op = match f.op.as_str() {
            "rotate" => "rotate",
            "revoke" => "revoke",
            _ => return Err(ApiError::InvalidRequest("op must be rotate or revoke".into())),
        };
        s.require_member()?;
        if f.confirm.as_deref() != Some("yes") {
            let confirm =
                Some(PendingChange { op, room_id: f.room_id, environment_binding_id: f.environment_binding_id });
            let choices = choices(&state, &s).await?;
            return Ok(Page(PairingPage { confirm, choices, ..Default::default() }).into_response());
        }
        let room = PairingRoom { room_id: f.room_id };
        let service = &state.services.embodiment;
        if op == "rotate" {
            let created = service.rotate_connector(&s, &f.environment_binding_id, room).await?;
            let (rotated, choices) = (Some(Rotated::of(created)), choices(&state, &s).await?);
            return Ok(Page(PairingPage { rotated, choices, ..Default::default() }).into_response());
        }
        service.revoke_connector(&s, &f.environment_binding_id, room).await?;
        Ok(flash::see_other_done(&state, PAIRING_PAGE_PATH, Done::PairingRevoked))
    }
    .await;
    answer(&state, &s, done).await
}

#[cfg(test)]
mod tests {
    use super::room_query;
    use crate::domain::room::RoomId;

    #[test]
    fn the_page_query_is_nothing_or_one_room_id() {
        let id = RoomId::generate();
        assert_eq!(room_query(None).unwrap(), "");
        assert_eq!(room_query(Some("")).unwrap(), "");
        assert_eq!(room_query(Some(&format!("room_id={}", id.as_str()))).unwrap(), id.as_str());
        for bad in ["room_id=", "room_id=<b>", "room_id=room_ABC", "x=1", "cursor=hpc1_x", "room_id=a&room_id=b"] {
            assert!(room_query(Some(bad)).is_err(), "{bad}");
        }
    }
}
