//! The HTTP facade: one pipeline for every route group (request id and its tracing
//! span, no-store headers, admission (`admission`), pre-auth rate limit, body limits,
//! strict JSON, bearer and scope checks, one error envelope, panics caught). Handlers
//! only frame service calls. `pages` is the cookie lanes' kit (session extractors with
//! the same-origin proof, template responder, page security headers). `server` is the
//! socket transport of `helix serve`. Route handlers sit in folders by lane (`agent`,
//! `browser`, `connector`, `oauth`); what each folder may name is `layers_test`'s rule.

pub mod admission;
pub mod agent;
pub mod browser;
mod connections;
pub mod connector;
pub mod idempotent;
#[cfg(test)]
mod layers_test;
pub mod oauth;
pub mod openapi;
pub mod pages;
pub mod query;
pub mod ratelimit;
pub mod redact;
pub mod server;

// The development issuer's modules, also at the paths the integration tests name.
pub use oauth::{dev_auth, dev_oidc, dev_register, dev_routes};

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use futures::FutureExt;
use http::header::{CACHE_CONTROL, CONTENT_TYPE, PRAGMA, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;

use crate::auth::jwt::{TenantHeaders, TokenVerifier, VerifiedToken, bearer_from_header};
use crate::config::Limits;
use crate::domain::ids::IdempotencyKey;
use crate::error::ApiError;
use crate::service::runs::{RunMutation, prefetch_keys};
use crate::service::{Caller, Key, Services};
use admission::Transport;
use ratelimit::{RateLimits, Window, WindowKey};
use tracing::Instrument;

pub const REQUEST_ID: &str = "x-request-id";

/// Shared per-process state of every router: a clone (per request, by the route, the
/// pipeline and each extractor) is one reference count.
#[derive(Clone)]
pub struct AppState(Arc<AppParts>);

impl std::ops::Deref for AppState {
    type Target = AppParts;
    fn deref(&self) -> &AppParts {
        &self.0
    }
}

/// What [`AppState`] shares.
pub struct AppParts {
    pub services: Services,
    pub verifier: Arc<TokenVerifier>,
    pub limits: Arc<RateLimits>,
    /// The browser lane's OpenID Connect client (None: sign-in is not configured).
    pub oidc: Option<Arc<crate::auth::oidc::OidcClient>>,
}

impl AppState {
    pub fn new(services: Services) -> Self {
        // Built by the first key-set fetch, not at cold start (`outbound`).
        let http =
            crate::outbound::LazyClient::new(|| reqwest::Client::builder().timeout(std::time::Duration::from_secs(5)));
        let verifier = Arc::new(TokenVerifier::new(&services.config.oauth, http));
        let oidc = services.config.browser.oidc.clone().map(|o| {
            let redirect = format!("{}{}", services.config.public_base_url, pages::CALLBACK_PATH);
            Arc::new(crate::auth::oidc::OidcClient::new(o, redirect))
        });
        let limits = Arc::new(RateLimits::new(services.window_counters()));
        Self(Arc::new(AppParts { services, verifier, limits, oidc }))
    }
}

/// Which route group a request belongs to: its limits and its metadata path.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Group {
    AgentRuns,
    Mcp,
    Discovery,
    /// The cookie lane and pages (`/account`, `/agent-access`, `/api/account/…`).
    Account,
    /// `/api/v1/rooms/*` (bearer).
    Rooms,
    /// `/api/agi/agent-run-observer/*` (cookie).
    Observer,
    /// The room-source credential lane and its page (cookie).
    SourceBrowser,
    /// Producer ingress (source bearer only).
    Ingress,
    /// `POST /mcp/device-check`: the one-tool read-only MCP server.
    DeviceCheck,
    /// The southbound action-connector routes (connector credential only).
    Connector,
}

impl Group {
    pub fn resource_path(self) -> &'static str {
        match self {
            Group::AgentRuns => "/api/v1/agent-runs",
            Group::Rooms => "/api/v1/rooms",
            Group::DeviceCheck => "/mcp/device-check",
            Group::Mcp
            | Group::Discovery
            | Group::Account
            | Group::Observer
            | Group::SourceBrowser
            | Group::Ingress
            | Group::Connector => "/mcp",
        }
    }
    /// True when each handler of the group that has an effect runs `authenticate` first,
    /// which awaits the IP window before anything happens (the rest is read-only), so the
    /// window's count may overlap the request. The cookie lane acts without it.
    fn gates_in_authenticate(self) -> bool {
        matches!(self, Group::AgentRuns | Group::Mcp | Group::Discovery | Group::DeviceCheck)
    }

    fn limits(self, state: &AppState) -> Limits {
        match self {
            Group::Mcp | Group::DeviceCheck => state.services.config.mcp_limits,
            Group::Rooms => state.services.config.room_limits,
            Group::Observer => state.services.config.observer_limits,
            Group::SourceBrowser => state.services.config.sources.browser_limits,
            Group::Ingress => state.services.config.sources.ingress_limits,
            Group::Connector => crate::config::CONNECTOR_LIMITS,
            _ => state.services.config.agent_limits,
        }
    }
}

/// The request's id, set by the pipeline.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The caller's address as the Lambda adapter read it from the request context (a socket's
/// peer arrives as [`Transport::Socket`]).
#[derive(Debug, Clone)]
pub struct ClientIp(pub String);

/// The remaining time of this Lambda invocation, set by the function's adapter.
pub use crate::service::runs::Invocation;

/// An error on its way out: rendered by the pipeline, which knows the request id.
#[derive(Clone)]
struct PendingError(Arc<ApiError>);

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let mut res = Response::new(Body::empty());
        *res.status_mut() = self.status();
        res.extensions_mut().insert(PendingError(Arc::new(self)));
        res
    }
}

/// The metadata URL a challenge points at for a route group.
pub fn resource_metadata_url(base: &str, group: Group) -> String {
    format!("{base}/.well-known/oauth-protected-resource{}", group.resource_path())
}

/// `WWW-Authenticate` for 401 and insufficient-scope 403 answers, else None.
pub fn challenge(err: &ApiError, metadata_url: &str) -> Option<String> {
    let base = format!("Bearer resource_metadata=\"{metadata_url}\"");
    match err {
        ApiError::AuthenticationRequired => Some(base),
        ApiError::InvalidToken { .. } | ApiError::TenantMismatch => Some(format!("{base}, error=\"invalid_token\"")),
        ApiError::InsufficientScope { required } => {
            Some(format!("{base}, error=\"insufficient_scope\", scope=\"{}\"", required.join(" ")))
        }
        _ => None,
    }
}

pub fn render_error(err: &ApiError, request_id: &str, metadata_url: &str) -> Response {
    err.log(request_id);
    let mut res = (err.status(), axum::Json(err.body(request_id))).into_response();
    if let Some(c) = challenge(err, metadata_url) {
        res.headers_mut().insert(WWW_AUTHENTICATE, HeaderValue::from_str(&c).expect("ascii challenge"));
    }
    if let ApiError::MethodNotAllowed { allow } = err {
        res.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static(allow));
    }
    if let Some(secs) = err.retry_after_secs() {
        res.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(secs));
    }
    res
}

/// Admission before any parsing (see `admission`).
fn admit(state: &AppState, group: Group, req: &Request) -> Result<(), ApiError> {
    let limits = group.limits(state);
    let transport = req.extensions().get::<Transport>().copied();
    admission::admit_head(&state.services.config, limits, req.uri(), req.headers(), transport)
}

/// The pre-auth per-IP window. Its shared count (if any) overlaps the request's work:
/// `authenticate` awaits it before anything with an effect, the pipeline after the rest.
fn limit_ip(state: &AppState, group: Group, ip: &str) -> Result<Window, ApiError> {
    let limit = group.limits(state).ip_per_minute;
    let key = WindowKey::Ip { group, ip: ip.to_owned() };
    Ok(state.limits.start(key, limit, state.services.clock.epoch())?)
}

/// The caller's address: the Lambda event's source IP, or the socket peer (or, behind a
/// proxy that `TRUST_PROXY` names, the address that proxy saw).
fn caller_ip(state: &AppState, req: &Request) -> String {
    match (req.extensions().get::<Transport>(), req.extensions().get::<ClientIp>()) {
        (Some(Transport::Socket { peer }), _) => {
            admission::client_ip(&state.services.config.trust_proxy, *peer, req.headers()).to_string()
        }
        (_, Some(ClientIp(ip))) => ip.clone(),
        _ => "unknown".into(),
    }
}

/// The pipeline every route group runs behind (`from_fn_with_state((state, group), pipeline)`).
pub async fn pipeline(State((state, group)): State<(AppState, Group)>, mut req: Request, next: Next) -> Response {
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| redact::safe_request_id(v))
        .map(str::to_owned)
        .unwrap_or_else(crate::domain::request_id);
    req.extensions_mut().insert(RequestId(request_id.clone()));
    req.extensions_mut().insert(group);
    // Every line logged while this request is handled (the per-turn line included)
    // carries its request id: in the span `server::guard` opened, else in a new one.
    let span = match req.extensions().get::<server::RequestSpan>() {
        Some(server::RequestSpan(span)) => {
            span.record("request_id", request_id.as_str()).record("group", tracing::field::debug(group));
            span.clone()
        }
        None => tracing::info_span!("request", request_id = %request_id, group = ?group),
    };
    run_pipeline(state, group, req, next, request_id).instrument(span).await
}

async fn run_pipeline(state: AppState, group: Group, mut req: Request, next: Next, request_id: String) -> Response {
    let ip = caller_ip(&state, &req);
    let (method, started) = (req.method().clone(), std::time::Instant::now());

    let mut res = match admit(&state, group, &req).and_then(|()| limit_ip(&state, group, &ip)) {
        Ok(window) => {
            let first = if group.gates_in_authenticate() { Ok(()) } else { window.verdict().await };
            if let Err(refusal) = first {
                ApiError::from(refusal).into_response()
            } else {
                req.extensions_mut().insert(window.clone());
                // A panic below becomes a 500 for this request only; the payload is not logged
                // (it may quote request data). `server::guard` catches what escapes this.
                let res = match std::panic::AssertUnwindSafe(next.run(req)).catch_unwind().await {
                    Ok(res) => res,
                    Err(_) => {
                        tracing::error!("request handler panicked");
                        ApiError::internal(server::Panicked).into_response()
                    }
                };
                // Handlers that did not authenticate (read-only) learn the verdict here.
                match window.verdict().await {
                    Ok(()) => res,
                    Err(refusal) => ApiError::from(refusal).into_response(),
                }
            }
        }
        Err(e) => e.into_response(),
    };
    let mut code = None;
    if let Some(PendingError(err)) = res.extensions_mut().remove::<PendingError>() {
        code = Some(err.code());
        let metadata_url = resource_metadata_url(&state.services.config.public_base_url, group);
        res = render_error(&err, &request_id, &metadata_url);
    }
    // One access line per request for operators (alert on codes such as outcome_unknown,
    // run_busy, invalid_token): no path, header, query or body, so nothing caller-supplied.
    tracing::info!(
        %method,
        status = res.status().as_u16(),
        code = code.unwrap_or("ok"),
        latency_ms = started.elapsed().as_millis() as u64,
        "request"
    );
    no_store(res.headers_mut(), &request_id);
    res
}

/// The headers every answer carries, errors and caught panics included.
pub fn no_store(h: &mut HeaderMap, request_id: &str) {
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    if let Ok(v) = HeaderValue::from_str(request_id) {
        h.insert(REQUEST_ID, v);
    }
}

/// The verified, linked caller of a request (bearer -> token -> link + binding), with
/// the run route's first data read taken in the same BatchGetItem.
pub struct Authed(pub Caller);

impl FromRequestParts<AppState> for Authed {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &AppState) -> Result<Self, ApiError> {
        let (run_id, mutation) = run_route(parts.uri.path());
        let idem = parts.headers.get("idempotency-key").and_then(|v| v.to_str().ok()).map(str::to_owned);
        let plan = |identity: &str| match run_id {
            Some(id) => prefetch_keys(identity, id, mutation.zip(idem.as_deref())),
            None => vec![],
        };
        Ok(Authed(authenticate(state, parts, plan).await?))
    }
}

/// The run id and mutation of an `/api/v1/agent-runs/{run_id}[/…]` path.
pub(crate) fn run_route(path: &str) -> (Option<&str>, Option<RunMutation>) {
    let Some(rest) = path.strip_prefix("/api/v1/agent-runs/") else { return (None, None) };
    let mut segments = rest.split('/');
    let run_id = segments.next().filter(|s| !s.is_empty());
    let mutation = match (segments.next(), segments.next()) {
        (Some("continue"), None) => Some(RunMutation::Continue),
        (Some("cancel"), None) => Some(RunMutation::Cancel),
        _ => None,
    };
    (run_id, mutation)
}

/// Bearer verification, principal resolution and both per-minute windows, shared by
/// REST and MCP; `prefetch` names data keys (from the token identity) to read in the
/// same BatchGetItem. The IP window's count (started by the pipeline) overlaps the token
/// verification and the read; the principal's (keyed by the verified token identity)
/// overlaps the read, so a shared counter adds no sequential round trip.
pub async fn authenticate(
    state: &AppState,
    parts: &Parts,
    prefetch: impl FnOnce(&str) -> Vec<Key>,
) -> Result<Caller, ApiError> {
    let group = parts.extensions.get::<Group>().copied().unwrap_or(Group::AgentRuns);
    let ip_window = parts.extensions.get::<Window>().cloned();
    let principal = async {
        let token = verify_bearer(state, &parts.headers).await?;
        let identity = state.services.accounts.token_identity(&token);
        let limit = group.limits(state).principal_per_minute;
        let key = WindowKey::Principal { group, identity };
        let window = state.limits.start(key, limit, state.services.clock.epoch())?;
        let (caller, verdict) = tokio::join!(state.services.accounts.resolve_with(token, prefetch), window.verdict());
        let caller = caller?;
        verdict?;
        Ok::<_, ApiError>(caller)
    };
    let ip = async {
        match &ip_window {
            Some(window) => window.verdict().await,
            None => Ok(()),
        }
    };
    let (ip, caller) = tokio::join!(ip, principal);
    ip?;
    caller
}

async fn verify_bearer(state: &AppState, headers: &HeaderMap) -> Result<VerifiedToken, ApiError> {
    let value = headers.get(http::header::AUTHORIZATION).ok_or(ApiError::AuthenticationRequired)?;
    let value = value.to_str().map_err(|_| ApiError::InvalidToken { reason: "malformed" })?;
    // Another scheme is no bearer at all (RFC 6750 3.1: no error code); a Bearer whose
    // token is malformed is an invalid token.
    let bearer = bearer_from_header(value).ok_or_else(|| {
        let scheme = value.trim_start_matches([' ', '\t']).split([' ', '\t']).next().unwrap_or("");
        if scheme.eq_ignore_ascii_case("bearer") {
            ApiError::InvalidToken { reason: "malformed" }
        } else {
            ApiError::AuthenticationRequired
        }
    })?;
    let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
    let tenant_headers = TenantHeaders {
        tenant_id: header("x-tenant-id"),
        customer_id: header("x-customer-id"),
        org_id: header("x-org-id"),
    };
    state.verifier.verify(bearer, tenant_headers).await
}

/// The `Idempotency-Key` header, parsed.
pub struct IdemKey(pub IdempotencyKey);

impl<S: Send + Sync> FromRequestParts<S> for IdemKey {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, _: &S) -> Result<Self, ApiError> {
        parts
            .headers
            .get("idempotency-key")
            .and_then(|v| v.to_str().ok())
            .and_then(IdempotencyKey::parse)
            .map(IdemKey)
            .ok_or(ApiError::InvalidIdempotencyKey)
    }
}

/// Strict JSON body: `application/json`, within the group's limit, no unknown fields, and
/// within the JSON Schema `/openapi.json` publishes for `T` ([`body_schema`]).
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned + schemars::JsonSchema> FromRequest<AppState> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(req: Request, state: &AppState) -> Result<Self, ApiError> {
        let group = req.extensions().get::<Group>().copied().unwrap_or(Group::AgentRuns);
        let limit = group.limits(state).body_bytes;
        let json_type = req
            .headers()
            .get(CONTENT_TYPE)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.split(';').next())
            .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"));
        if !json_type {
            return Err(ApiError::UnsupportedMediaType);
        }
        let bytes = read_body(req.into_body(), limit).await?;
        let value: serde_json::Value = parse_strict(&bytes)?;
        let parsed = parse_strict_value(&value)?;
        // What serde reads but the published schema refuses (an object spelled as an
        // array, a count out of its bounds) is refused too: the document and the server
        // agree on every body. The message names the field and the rule, never the value.
        crate::mcp::validate::check(&body_schema::<T>(), &value)
            .map_err(|v| ApiError::InvalidRequest(v.to_string()))?;
        Ok(JsonBody(parsed))
    }
}

/// The published request schema of `T` (the MCP input form, as in `/openapi.json`),
/// generated once per type.
fn body_schema<T: schemars::JsonSchema>() -> std::sync::Arc<serde_json::Value> {
    use std::collections::HashMap;
    use std::sync::{Arc, LazyLock, Mutex};
    static SCHEMAS: LazyLock<Mutex<HashMap<&'static str, Arc<serde_json::Value>>>> = LazyLock::new(Default::default);
    let mut schemas = SCHEMAS.lock().unwrap_or_else(|e| e.into_inner());
    schemas
        .entry(std::any::type_name::<T>())
        .or_insert_with(|| Arc::new(serde_json::Value::Object(crate::domain::schema::input_schema::<T>())))
        .clone()
}

/// Reads a request body within `limit` bytes: too long is 413, stalled past the
/// server's body-read timeout is 408, a broken transport is 400.
pub async fn read_body(body: Body, limit: usize) -> Result<bytes::Bytes, ApiError> {
    axum::body::to_bytes(body, limit).await.map_err(|e| {
        let mut cause: Option<&(dyn std::error::Error + 'static)> = Some(&e);
        while let Some(c) = cause {
            if c.is::<http_body_util::LengthLimitError>() {
                return ApiError::PayloadTooLarge { limit };
            }
            if c.is::<server::BodyTimedOut>() {
                return ApiError::RequestTimeout;
            }
            cause = c.source();
        }
        ApiError::InvalidRequest("the request body could not be read".into())
    })
}

/// Parses a strict request value; the message never echoes caller values.
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(strict_error)
}

/// [`parse_strict`] of a JSON value already parsed (an MCP tool call's arguments).
pub fn parse_strict_value<T: DeserializeOwned>(value: &serde_json::Value) -> Result<T, ApiError> {
    T::deserialize(value).map_err(strict_error)
}

/// A body that does not parse as `T`: the typed error, naming an unknown field only when
/// its name is a plain identifier, never echoing a value.
fn strict_error(e: serde_json::Error) -> ApiError {
    let msg = e.to_string();
    match redact::unknown_field_name(&msg) {
        Some(name) => ApiError::InvalidRequest(format!("unknown field {name:?}")),
        None if msg.starts_with("unknown field") => ApiError::InvalidRequest("unknown field".into()),
        None => ApiError::InvalidRequest(redact::scrub_message(&msg)),
    }
}

/// A run-shaped JSON response with its weak ETag (from `version`).
pub fn run_response(status: StatusCode, body: serde_json::Value) -> Response {
    let etag = body.get("version").and_then(|v| v.as_u64()).map(weak_etag);
    let mut res = (status, axum::Json(body)).into_response();
    if let Some(tag) = etag {
        res.headers_mut().insert(http::header::ETAG, tag);
    }
    res
}

/// The weak ETag of a run at `version`.
fn weak_etag(version: u64) -> HeaderValue {
    HeaderValue::from_str(&format!("W/\"v{version}\"")).expect("ascii etag")
}

/// A run view serialized once ([`crate::domain::wire::RunJson`]): 200, the same body and
/// ETag as [`run_response`] of its `Value`.
pub fn run_json_response(run: crate::domain::wire::RunJson) -> Response {
    let content_type = HeaderValue::from_static("application/json");
    ([(http::header::CONTENT_TYPE, content_type), (http::header::ETAG, weak_etag(run.version))], run.json)
        .into_response()
}

/// Fallback for unknown paths inside a group.
pub async fn not_found() -> ApiError {
    ApiError::NotFound
}

/// Unknown paths outside every group: the error envelope, behind the same pipeline.
pub fn fallback_router(state: AppState) -> axum::Router {
    axum::Router::new()
        .fallback(not_found)
        .layer(axum::middleware::from_fn_with_state((state.clone(), Group::AgentRuns), pipeline))
        .with_state(state)
}
