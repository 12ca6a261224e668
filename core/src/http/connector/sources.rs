//! Room sources over HTTP, three lanes that never mix:
//! - `/api/v1/rooms/{room_id}/sources` (bearer, the room route group): list and create;
//! - the browser credential lane (cookie, same-origin only): the claim page, the one
//!   credential claim, rotation and revocation;
//! - producer ingress under `/api/ingress/room-sources` (source bearer only, its own
//!   route group with its own body and rate limits): manifest, observation batches, and
//!   the environment probe (poll for pending probes, answer one).

use askama::Template;
use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::StatusCode;
use http::request::Parts;

use crate::auth::jwt::bearer_from_header;
use crate::domain::page::cursor_query;
use crate::domain::source::{
    CreateSourceRequest, CredentialClaimRequest, INGRESS_BASE, Manifest, ObservationBatch, ProbeAnswer, SourceRef,
};
use crate::error::ApiError;
use crate::http::idempotent;
use crate::http::pages::sign_in_first::PageSession;
use crate::http::pages::{Asset, Csp, Page, Referrer, SameOriginSession, page_headers};
use crate::http::ratelimit::WindowKey;
use crate::http::{AppState, Authed, Group, IdemKey, JsonBody, pipeline};
use crate::service::sources::{AuthedSource, CLAIM_PAGE_PATH};

pub const CLAIMS_PATH: &str = "/api/account/room-sources/credential-claims";
pub const ROTATIONS_PATH: &str = "/api/account/room-sources/rotations";
pub const REVOCATIONS_PATH: &str = "/api/account/room-sources/revocations";
pub const CLAIM_SCRIPT_PATH: &str = "/account/static/source-claim.js";

async fn method_not_allowed_get_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET, POST" }
}
async fn method_not_allowed_post() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}
async fn method_not_allowed_get() -> ApiError {
    ApiError::MethodNotAllowed { allow: "GET" }
}

// ---------- the agent facade (bearer) ----------

/// `/api/v1/rooms/{room_id}/sources`, behind the room group's pipeline.
pub fn router(state: AppState) -> Router {
    let routes = Router::new()
        .route("/api/v1/rooms/{room_id}/sources", get(list).post(create).fallback(method_not_allowed_get_post))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Rooms), pipeline));
    // The create takes an `Idempotency-Key`.
    idempotent::replayed_on_every_post(routes).with_state(state)
}

async fn list(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(room_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    let cursor = cursor_query(q.as_deref())?;
    let list = app.services.sources.list_sources(&p, &room_id, cursor.as_deref()).await?;
    Ok(Json(list.projected().map_err(ApiError::internal)?).into_response())
}

async fn create(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(room_id): Path<String>,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<CreateSourceRequest>,
) -> Result<Response, ApiError> {
    let m = app.services.sources.create_source(&p, &room_id, &key, req).await?;
    Ok(idempotent::mutation_response(m, |status, body| (status, Json(body)).into_response()))
}

// ---------- the browser credential lane (cookie) ----------

/// The claim page, its script, and the three cookie routes.
pub fn browser_router(state: AppState) -> Router {
    Router::new()
        .route(CLAIM_PAGE_PATH, get(claim_page).fallback(method_not_allowed_get))
        .route(CLAIM_SCRIPT_PATH, get(claim_script).fallback(method_not_allowed_get))
        .route(CLAIMS_PATH, post(claim).fallback(method_not_allowed_post))
        .route(ROTATIONS_PATH, post(rotate).fallback(method_not_allowed_post))
        .route(REVOCATIONS_PATH, post(revoke).fallback(method_not_allowed_post))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::SourceBrowser), pipeline))
        .layer(page_headers(&state, Csp::SameOriginScript, Referrer::None))
        .with_state(state)
}

/// The claim page: no variables, rendered through the one template responder.
#[derive(Template)]
#[template(path = "source_claim.html")]
struct ClaimPage {
    /// A guest account: the page says claiming is not for it, and has no form.
    guest: bool,
}

const CLAIM_SCRIPT: &str = include_str!("../../../templates/source-claim.js");

async fn claim_page(PageSession(session): PageSession) -> Result<Response, ApiError> {
    let guest = session.policy.guest;
    let status = if guest { ApiError::GuestNotAllowed.status() } else { axum::http::StatusCode::OK };
    Ok((status, Page(ClaimPage { guest })).into_response())
}

async fn claim_script() -> Asset {
    Asset::script(CLAIM_SCRIPT)
}

async fn claim(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<CredentialClaimRequest>,
) -> Result<Response, ApiError> {
    let credential = state.services.sources.claim_source_credential(&session, req).await?;
    Ok((StatusCode::CREATED, Json(credential)).into_response())
}

async fn rotate(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<SourceRef>,
) -> Result<Response, ApiError> {
    let credential = state.services.sources.rotate_source_credential(&session, req).await?;
    Ok((StatusCode::CREATED, Json(credential)).into_response())
}

async fn revoke(
    State(state): State<AppState>,
    SameOriginSession(session): SameOriginSession,
    JsonBody(req): JsonBody<SourceRef>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.sources.revoke_source(&session, req).await?).into_response())
}

// ---------- ingress (source bearer) ----------

/// The producer ingress route group.
pub fn ingress_router(state: AppState) -> Router {
    Router::new()
        .route(&format!("{INGRESS_BASE}/manifest"), post(manifest).fallback(method_not_allowed_post))
        .route(&format!("{INGRESS_BASE}/observations"), post(observations).fallback(method_not_allowed_post))
        .route(&format!("{INGRESS_BASE}/probes"), get(probes).fallback(method_not_allowed_get))
        .route(&format!("{INGRESS_BASE}/probes/{{probe_id}}/answer"), post(answer).fallback(method_not_allowed_post))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Ingress), pipeline))
        .with_state(state)
}

/// A request authenticated by a source bearer (never an OAuth token or a cookie), within
/// the per-source rate limit.
pub struct SourceAuthed(pub AuthedSource);

impl FromRequestParts<AppState> for SourceAuthed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let value = parts.headers.get(http::header::AUTHORIZATION).ok_or(ApiError::SourceCredentialInvalid)?;
        let value = value.to_str().map_err(|_| ApiError::SourceCredentialInvalid)?;
        let bearer = bearer_from_header(value).ok_or(ApiError::SourceCredentialInvalid)?;
        let source = state.services.sources.authenticate_source(bearer).await?;
        let limit = state.services.config.sources.ingress_limits.principal_per_minute;
        let key = WindowKey::Source { source_id: source.source.source_id.clone() };
        state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
        Ok(SourceAuthed(source))
    }
}

async fn manifest(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    JsonBody(m): JsonBody<Manifest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.sources.register_manifest(&source, m).await?).into_response())
}

async fn observations(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    JsonBody(batch): JsonBody<ObservationBatch>,
) -> Result<Response, ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.services.sources.ingest_observations(&source, batch).await?)).into_response())
}

/// `GET …/probes`: the calling source's pending probes (its own only; no query, no body).
async fn probes(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    crate::http::query::empty_request(q.as_deref(), b"")?;
    Ok(Json(state.services.sources.pending_probes(&source).await?).into_response())
}

/// `POST …/probes/{probe_id}/answer`: the answer of one probe queued for this source.
async fn answer(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    Path(probe_id): Path<String>,
    JsonBody(answer): JsonBody<ProbeAnswer>,
) -> Result<Response, ApiError> {
    let receipt = state.services.sources.answer_probe(&source, &probe_id, answer).await?;
    Ok((StatusCode::ACCEPTED, Json(receipt)).into_response())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The claim page's bytes are pinned: a change to them is deliberate (the pages kit
    /// added the viewport and the shared navigation). Askama drops a file's last newline,
    /// the template keeps it.
    #[test]
    fn the_claim_page_renders_the_bytes_it_always_served() {
        let page = ClaimPage { guest: false }.render().unwrap();
        assert!(page.starts_with("<!doctype html>\n") && page.ends_with("</html>\n"));
        assert_eq!(page.len(), 1389);
        assert_eq!(
            crate::domain::sha256_hex(page.as_bytes()),
            "0cacf4af8950c9a7d195d18ee78625d71a853608f7dc9a7295b8e60a0eb1a7ea"
        );
    }
}
