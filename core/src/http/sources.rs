//! Room sources over HTTP, three lanes that never mix:
//! - `/api/v1/rooms/{room_id}/sources` (bearer, the room route group): list and create;
//! - the browser credential lane (cookie, same-origin only): the claim page, the one
//!   credential claim, rotation and revocation;
//! - producer ingress under `/api/ingress/room-sources` (source bearer only, its own
//!   route group with its own body and rate limits): manifest, observation batches, and
//!   the environment probe (poll for pending probes, answer one).

use axum::extract::{FromRequestParts, Path, RawQuery, State};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use axum::{Json, Router};
use http::header::CONTENT_TYPE;
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};

use super::account::{BrowserSession, require_same_origin};
use super::{AppState, Authed, Group, IdemKey, JsonBody, pipeline};
use crate::auth::jwt::bearer_from_header;
use crate::domain::source::{
    CreateSourceRequest, CredentialClaimRequest, INGRESS_BASE, Manifest, ObservationBatch, ProbeAnswer, SourceRef,
};
use crate::error::ApiError;
use crate::service::sessions::Session;
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
    Router::new()
        .route("/api/v1/rooms/{room_id}/sources", get(list).post(create).fallback(method_not_allowed_get_post))
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::Rooms), pipeline))
        .with_state(state)
}

async fn list(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(room_id): Path<String>,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    super::rooms::empty_request(q.as_deref(), b"")?;
    Ok(Json(app.services.list_sources(&p, &room_id).await?.projected().map_err(ApiError::internal)?).into_response())
}

async fn create(
    State(app): State<AppState>,
    Authed(p): Authed,
    Path(room_id): Path<String>,
    IdemKey(key): IdemKey,
    JsonBody(req): JsonBody<CreateSourceRequest>,
) -> Result<Response, ApiError> {
    let m = app.services.create_source(&p, &room_id, &key, req).await?;
    let status = StatusCode::from_u16(m.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut res = (status, Json(m.body)).into_response();
    res.headers_mut()
        .insert("idempotency-replayed", HeaderValue::from_static(if m.replayed { "true" } else { "false" }));
    Ok(res)
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
        .layer(axum::middleware::map_response(page_headers))
        .with_state(state)
}

/// The strict page policy, plus the one same-origin script of the claim page (and the
/// `fetch` it makes). No inline script, no frames.
const CLAIM_PAGE_CSP: &str = "default-src 'none'; script-src 'self'; connect-src 'self'; style-src 'self'; \
    img-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'";

async fn page_headers(mut res: Response) -> Response {
    let h = res.headers_mut();
    h.insert("content-security-policy", HeaderValue::from_static(CLAIM_PAGE_CSP));
    h.insert("x-frame-options", HeaderValue::from_static("DENY"));
    h.insert("x-content-type-options", HeaderValue::from_static("nosniff"));
    h.insert("referrer-policy", HeaderValue::from_static("no-referrer"));
    res
}

/// Same-origin and the per-account limit of this lane, for every cookie request.
async fn admit(state: &AppState, headers: &HeaderMap, session: &Session) -> Result<(), ApiError> {
    require_same_origin(state, headers)?;
    let limit = state.services.config.sources.browser_limits.principal_per_minute;
    let key = format!("account:SourceBrowser:{}", session.account_id);
    state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
    Ok(())
}

const CLAIM_PAGE: &str = r#"<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>Claim a room source credential · Helix</title>
<link rel="stylesheet" href="/account/static/account.css">
<script src="/account/static/source-claim.js" defer></script>
</head>
<body>
<main>
<h1>Claim a room source credential</h1>
<p>Paste the claim handle your agent received when it created the source. Only the signed-in
developer who owns the room can claim it, and only once. The source bearer and plugin
configuration are shown on this page one time: copy them into your producer now.</p>
<form id="claim-form">
<label for="claim-handle">Claim handle</label>
<input id="claim-handle" name="claim_handle" autocomplete="off" spellcheck="false" required>
<button id="claim-button" type="submit">Claim credential</button>
</form>
<p id="claim-error" role="alert"></p>
<section id="claim-result" hidden>
<h2>Source bearer (shown once)</h2>
<pre id="source-bearer"></pre>
<h2>Plugin configuration</h2>
<pre id="plugin-config"></pre>
<p>This credential admits read-only observations only, never an action.</p>
</section>
</main>
</body>
</html>
"#;

const CLAIM_SCRIPT: &str = r#""use strict";
(function () {
  var form = document.getElementById("claim-form");
  var input = document.getElementById("claim-handle");
  var error = document.getElementById("claim-error");
  var button = document.getElementById("claim-button");
  form.addEventListener("submit", function (ev) {
    ev.preventDefault();
    error.textContent = "";
    button.disabled = true;
    fetch("/api/account/room-sources/credential-claims", {
      method: "POST",
      credentials: "same-origin",
      headers: { "content-type": "application/json" },
      body: JSON.stringify({ claim_handle: input.value.trim() })
    }).then(function (res) {
      return res.json().then(function (body) { return { ok: res.ok, body: body }; });
    }).then(function (r) {
      if (!r.ok) {
        error.textContent = (r.body && r.body.error && r.body.error.code) || "claim_failed";
        button.disabled = false;
        return;
      }
      input.value = "";
      form.hidden = true;
      document.getElementById("source-bearer").textContent = r.body.source_bearer;
      document.getElementById("plugin-config").textContent = JSON.stringify(r.body.plugin_config, null, 2);
      document.getElementById("claim-result").hidden = false;
    }).catch(function () {
      error.textContent = "network_error";
      button.disabled = false;
    });
  });
})();
"#;

async fn claim_page(BrowserSession(session): BrowserSession) -> Result<Response, ApiError> {
    session.require_member()?;
    let mut res = CLAIM_PAGE.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/html; charset=utf-8"));
    Ok(res)
}

async fn claim_script() -> Response {
    let mut res = CLAIM_SCRIPT.into_response();
    res.headers_mut().insert(CONTENT_TYPE, HeaderValue::from_static("text/javascript; charset=utf-8"));
    res
}

async fn claim(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    JsonBody(req): JsonBody<CredentialClaimRequest>,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    let credential = state.services.claim_source_credential(&session, req).await?;
    Ok((StatusCode::CREATED, Json(credential)).into_response())
}

async fn rotate(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    JsonBody(req): JsonBody<SourceRef>,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    let credential = state.services.rotate_source_credential(&session, req).await?;
    Ok((StatusCode::CREATED, Json(credential)).into_response())
}

async fn revoke(
    State(state): State<AppState>,
    headers: HeaderMap,
    BrowserSession(session): BrowserSession,
    JsonBody(req): JsonBody<SourceRef>,
) -> Result<Response, ApiError> {
    admit(&state, &headers, &session).await?;
    Ok(Json(state.services.revoke_source(&session, req).await?).into_response())
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
        let source = state.services.authenticate_source(bearer).await?;
        let limit = state.services.config.sources.ingress_limits.principal_per_minute;
        let key = format!("source:{}", source.source.source_id);
        state.limits.start(key, limit, state.services.clock.epoch())?.verdict().await?;
        Ok(SourceAuthed(source))
    }
}

async fn manifest(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    JsonBody(m): JsonBody<Manifest>,
) -> Result<Response, ApiError> {
    Ok(Json(state.services.register_manifest(&source, m).await?).into_response())
}

async fn observations(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    JsonBody(batch): JsonBody<ObservationBatch>,
) -> Result<Response, ApiError> {
    Ok((StatusCode::ACCEPTED, Json(state.services.ingest_observations(&source, batch).await?)).into_response())
}

/// `GET …/probes`: the calling source's pending probes (its own only; no query, no body).
async fn probes(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    RawQuery(q): RawQuery,
) -> Result<Response, ApiError> {
    super::rooms::empty_request(q.as_deref(), b"")?;
    Ok(Json(state.services.pending_probes(&source).await?).into_response())
}

/// `POST …/probes/{probe_id}/answer`: the answer of one probe queued for this source.
async fn answer(
    State(state): State<AppState>,
    SourceAuthed(source): SourceAuthed,
    Path(probe_id): Path<String>,
    JsonBody(answer): JsonBody<ProbeAnswer>,
) -> Result<Response, ApiError> {
    let receipt = state.services.answer_probe(&source, &probe_id, answer).await?;
    Ok((StatusCode::ACCEPTED, Json(receipt)).into_response())
}
