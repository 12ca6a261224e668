//! `/rooms`: the page where people see their rooms and owners manage members, invites and
//! the consent version. Plain forms (no script), same-origin only; every rule is in
//! `service::rooms`. Every form of the page answers through [`answer`]: a refusal is the
//! page again with a readable message, never a bare error document.

use askama::Template;
use axum::extract::{RawQuery, State};
use axum::http::HeaderMap;
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Form, Router};
use serde::Deserialize;

use crate::domain::page::cursor_query;
use crate::error::ApiError;
use crate::http::AppState;
use crate::http::pages::flash::{self, Done};
use crate::http::pages::human::{When, when_text};
use crate::http::pages::sign_in_first::PageSession;
use crate::http::pages::{Page, SameOriginSession, refusal_notice};
use crate::service::embodiment::RoomIdentity;
use crate::service::rooms::{InvitePreview, RoomAdminView};
use crate::service::sessions::Session;

pub fn router() -> Router<AppState> {
    Router::new()
        .route("/rooms", get(rooms_page))
        .route("/rooms/invite", post(invite).get(to_rooms))
        .route("/rooms/join/preview", post(join_preview).get(to_rooms))
        .route("/rooms/join", post(join).get(to_rooms))
        .route("/rooms/consent", post(accept_consent).get(to_rooms))
        .route("/rooms/consent/raise", post(raise_consent).get(to_rooms))
        .route("/rooms/members/remove", post(remove_member).get(to_rooms))
        .route("/rooms/members/authority", post(member_authority).get(to_rooms))
        .route("/rooms/emergency-stop", post(emergency_stop).get(to_rooms))
        .route("/rooms/emergency-stop/clear", post(clear_stop).get(to_rooms))
}

/// A form's action opened by `GET` (a reload or a revisit after the post): the page it
/// came from, never a 405.
pub(super) async fn to_rooms() -> Response {
    back()
}

/// A destructive form's confirmation: its required "I am sure" box (`confirm=yes`); a
/// post without it acts on nothing.
fn confirmed(confirm: Option<&str>) -> Result<(), ApiError> {
    match confirm {
        Some("yes") => Ok(()),
        _ => Err(ApiError::InvalidRequest("tick the confirmation box to confirm this action".into())),
    }
}

#[derive(Template, Default)]
#[template(path = "rooms.html")]
pub(super) struct RoomsPage {
    guest: bool,
    locked: bool,
    rooms: Vec<RoomAdminView>,
    /// The link to the next page of rooms.
    next_cursor: Option<String>,
    /// The page continues one room's members (it links back to the first page).
    one_room: bool,
    invite_code: Option<String>,
    /// The room the invite code is for (its name).
    invite_room: String,
    invite_expires: When,
    preview: Option<InvitePreview>,
    preview_code: String,
    /// A revoke awaiting the owner's confirmation: (room id, account reference).
    confirm_revoke: Option<(String, String)>,
    /// "Your identity in this environment": the listed rooms that have an environment.
    identities: Vec<RoomIdentity>,
    /// A refused form's readable message (its error code and sentence).
    pub(super) notice: Option<String>,
    /// What the form just posted did (once, after its redirect).
    done: Option<&'static str>,
}

impl RoomsPage {
    /// The name a listed member's provider gave (for the confirmation that names them).
    fn member_name(&self, account_ref: &str) -> Option<&str> {
        let mut members = self.rooms.iter().flat_map(|r| &r.members);
        members.find(|m| m.account_ref == account_ref).and_then(|m| m.display_name.as_deref())
    }

    /// The room's Emergency Stop as the page shows it: active in one of its environments,
    /// not active, or None when the room has no environment (the identity section's data).
    fn room_stop(&self, room_id: &str) -> Option<bool> {
        let envs = &self.identities.iter().find(|i| i.room_id == room_id)?.environments;
        (!envs.is_empty()).then(|| envs.iter().any(|e| e.emergency_stop_active))
    }
}

/// The page for a session: the first page of rooms, or the page a `cursor` names.
pub(super) async fn page_for(state: &AppState, s: &Session, cursor: Option<&str>) -> Result<RoomsPage, ApiError> {
    let mut page = RoomsPage { guest: s.policy.guest, locked: s.policy.rooms_locked, ..Default::default() };
    if !page.guest && !page.locked {
        let listed = state.services.rooms.rooms_for_session(s, cursor).await?;
        (page.rooms, page.next_cursor, page.one_room) = (listed.rooms, listed.next_cursor, listed.one_room);
        let ids: Vec<String> = page.rooms.iter().map(|r| r.room.room_id.clone()).collect();
        page.identities = state.services.embodiment.identities_for_person(s, &ids).await?;
    }
    Ok(page)
}

/// `GET /rooms`, or `/rooms?cursor=…` for a later page of rooms or of one room's members.
/// A form's `303` back here carries its confirmation ([`flash`]): shown once, then cleared.
async fn rooms_page(
    State(state): State<AppState>,
    PageSession(session): PageSession,
    RawQuery(q): RawQuery,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let cursor = cursor_query(q.as_deref())?;
    let mut page = page_for(&state, &session, cursor.as_deref()).await?;
    Ok(flash::shown(&state, &headers, ROOMS, |done| {
        page.done = done;
        Page(page).into_response()
    }))
}

const ROOMS: &str = "/rooms";

pub(super) fn back() -> Response {
    crate::http::pages::see_other(ROOMS)
}

/// Back to the page (`303`), which then says what the form did.
pub(super) fn back_saying(state: &AppState, d: Done) -> Response {
    flash::see_other_done(state, ROOMS, d)
}

/// The one answer of the page's forms: what the form did, or, for a refusal the person can
/// act on (a client error: a wrong invite code, a missing confirmation, a stop that is not
/// theirs), the page again with the error's message and status. A server error stays the
/// error response itself.
pub(super) async fn answer(
    state: &AppState,
    s: &Session,
    done: Result<Response, ApiError>,
) -> Result<Response, ApiError> {
    let (status, notice) = match done {
        Ok(answered) => return Ok(answered),
        Err(e) => refusal_notice(e)?,
    };
    let mut page = page_for(state, s, None).await?;
    page.notice = Some(notice);
    Ok((status, Page(page)).into_response())
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RoomForm {
    room_id: String,
}

/// The invite code is shown once, in this response (never in a redirect URL).
async fn invite(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RoomForm>,
) -> Result<Response, ApiError> {
    let done = async {
        let invite = state.services.rooms.create_invite(&s, &f.room_id).await?;
        let mut page = page_for(&state, &s, None).await?;
        page.invite_room = invite.room_name;
        page.invite_code = Some(invite.code);
        page.invite_expires = when_text(&invite.expires_at, state.services.clock.now());
        Ok(Page(page).into_response())
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct CodeForm {
    code: String,
}

async fn join_preview(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<CodeForm>,
) -> Result<Response, ApiError> {
    let done = async {
        let code = f.code.trim().to_owned();
        let preview = state.services.rooms.preview_invite(&s, &code).await?;
        let mut page = page_for(&state, &s, None).await?;
        page.preview = Some(preview);
        page.preview_code = code;
        Ok(Page(page).into_response())
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct JoinForm {
    code: String,
    consent_version: u32,
}

async fn join(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<JoinForm>,
) -> Result<Response, ApiError> {
    let done = async {
        state.services.rooms.accept_invite(&s, f.code.trim(), f.consent_version).await?;
        Ok(back_saying(&state, Done::Joined))
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct ConsentForm {
    room_id: String,
    consent_version: u32,
}

async fn accept_consent(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<ConsentForm>,
) -> Result<Response, ApiError> {
    let done = async {
        state.services.rooms.accept_consent(&s, &f.room_id, f.consent_version).await?;
        Ok(back_saying(&state, Done::ConsentAccepted))
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RaiseForm {
    room_id: String,
    confirm: Option<String>,
}

async fn raise_consent(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RaiseForm>,
) -> Result<Response, ApiError> {
    let done = async {
        confirmed(f.confirm.as_deref())?;
        state.services.rooms.raise_consent(&s, &f.room_id).await?;
        Ok(back_saying(&state, Done::ConsentRaised))
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RemoveForm {
    room_id: String,
    account_ref: String,
    confirm: Option<String>,
}

async fn remove_member(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RemoveForm>,
) -> Result<Response, ApiError> {
    let done = async {
        confirmed(f.confirm.as_deref())?;
        state.services.rooms.remove_member(&s, &f.room_id, &f.account_ref).await?;
        Ok(back_saying(&state, Done::MemberRemoved))
    }
    .await;
    answer(&state, &s, done).await
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct AuthorityForm {
    room_id: String,
    account_ref: String,
    /// `grant` or `revoke`.
    authority: String,
    /// Present (`yes`) once the owner confirmed a revoke on the confirmation step.
    confirm: Option<String>,
}

/// The owner grants or revokes a member's action authority (post/redirect/get). A revoke
/// first answers a page asking to confirm it; the confirmed form applies it.
async fn member_authority(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<AuthorityForm>,
) -> Result<Response, ApiError> {
    let done = async {
        let grant = match f.authority.as_str() {
            "grant" => true,
            "revoke" => false,
            _ => return Err(ApiError::InvalidRequest("authority must be grant or revoke".into())),
        };
        if !grant && f.confirm.as_deref() != Some("yes") {
            let mut page = page_for(&state, &s, None).await?;
            page.confirm_revoke = Some((f.room_id, f.account_ref));
            return Ok(Page(page).into_response());
        }
        state.services.rooms.set_action_authority(&s, &f.room_id, &f.account_ref, grant).await?;
        Ok(back_saying(&state, if grant { Done::AuthorityGranted } else { Done::AuthorityRevoked }))
    }
    .await;
    answer(&state, &s, done).await
}

/// The room page's Emergency Stop (the owner: every player of the room).
async fn emergency_stop(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RoomForm>,
) -> Result<Response, ApiError> {
    let done = async {
        state.services.embodiment.emergency_stop_room(&s, &f.room_id).await?;
        Ok(back_saying(&state, Done::RoomStopped))
    }
    .await;
    answer(&state, &s, done).await
}

/// Only a person clears an Emergency Stop, here (or on the pairing page).
async fn clear_stop(
    State(state): State<AppState>,
    SameOriginSession(s): SameOriginSession,
    Form(f): Form<RoomForm>,
) -> Result<Response, ApiError> {
    let done = async {
        state.services.embodiment.clear_room_stop(&s, &f.room_id).await?;
        Ok(back_saying(&state, Done::RoomStopCleared))
    }
    .await;
    answer(&state, &s, done).await
}
