//! The HTTP facade: one pipeline for every route group (request id, no-store headers,
//! host/origin admission, pre-auth rate limit, body limits, strict JSON, bearer and
//! scope checks, one error envelope). Handlers only frame service calls.

pub mod account;
pub mod agent_runs;
pub mod dev_oidc;
pub mod discovery;
pub mod ratelimit;
pub mod redact;

use std::sync::Arc;

use axum::body::Body;
use axum::extract::{FromRequest, FromRequestParts, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use http::header::{CACHE_CONTROL, CONTENT_LENGTH, CONTENT_TYPE, HOST, ORIGIN, PRAGMA, WWW_AUTHENTICATE};
use http::request::Parts;
use http::{HeaderMap, HeaderValue, StatusCode};
use serde::de::DeserializeOwned;

use crate::auth::jwt::{TenantHeaders, TokenVerifier, VerifiedToken, bearer_from_header};
use crate::auth::principal::binding_hash;
use crate::config::{Limits, Mode};
use crate::domain::ids::IdempotencyKey;
use crate::domain::random_hex;
use crate::error::ApiError;
use crate::service::runs::{RunMutation, prefetch_keys};
use crate::service::{Caller, Services};
use crate::store::Key;
use ratelimit::{RateLimits, Window};

pub const REQUEST_ID: &str = "x-request-id";

/// Shared per-process state of every router.
#[derive(Clone)]
pub struct AppState {
    pub services: Services,
    pub verifier: Arc<TokenVerifier>,
    pub limits: Arc<RateLimits>,
    /// The browser lane's OpenID Connect client (None: sign-in is not configured).
    pub oidc: Option<Arc<crate::auth::oidc::OidcClient>>,
}

impl AppState {
    pub fn new(services: Services) -> Self {
        let http = reqwest::Client::builder().timeout(std::time::Duration::from_secs(5)).build().expect("HTTP client");
        let verifier = Arc::new(TokenVerifier::new(&services.config.oauth, http));
        let oidc = services.config.browser.oidc.clone().map(|o| {
            let redirect = format!("{}{}", services.config.public_base_url, account::CALLBACK_PATH);
            Arc::new(crate::auth::oidc::OidcClient::new(o, redirect))
        });
        let limits = Arc::new(RateLimits::new(services.store.clone()));
        Self { services, verifier, limits, oidc }
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
}

impl Group {
    pub fn resource_path(self) -> &'static str {
        match self {
            Group::AgentRuns => "/api/v1/agent-runs",
            Group::Mcp | Group::Discovery | Group::Account => "/mcp",
        }
    }
    /// True when each handler of the group that has an effect runs `authenticate` first,
    /// which awaits the IP window before anything happens (the rest is read-only), so the
    /// window's count may overlap the request. The cookie lane acts without it.
    fn gates_in_authenticate(self) -> bool {
        matches!(self, Group::AgentRuns | Group::Mcp | Group::Discovery)
    }

    fn limits(self, state: &AppState) -> Limits {
        match self {
            Group::Mcp => state.services.config.mcp_limits,
            _ => state.services.config.agent_limits,
        }
    }
}

/// The request's id, set by the pipeline.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

/// The caller's address, set by the transport (Lambda request context or socket).
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
    match err {
        ApiError::MethodNotAllowed { allow } => {
            res.headers_mut().insert(http::header::ALLOW, HeaderValue::from_static(allow));
        }
        ApiError::RateLimited { retry_after_secs } => {
            res.headers_mut().insert(http::header::RETRY_AFTER, HeaderValue::from(*retry_after_secs));
        }
        _ => {}
    }
    res
}

fn host_name(host: &str) -> &str {
    if host.starts_with('[') {
        return host.split(']').next().map(|h| &host[..h.len() + 1]).unwrap_or(host);
    }
    host.rsplit_once(':').map(|(h, _)| h).unwrap_or(host)
}

fn is_loopback(host: &str) -> bool {
    matches!(host, "127.0.0.1" | "localhost" | "[::1]") || host.starts_with("127.")
}

/// Admission before any parsing: host, origin, declared body size.
fn admit(state: &AppState, group: Group, headers: &HeaderMap) -> Result<(), ApiError> {
    let config = &state.services.config;
    let host = headers.get(HOST).and_then(|h| h.to_str().ok()).map(host_name).ok_or(ApiError::HostNotAllowed)?;
    let allowed = config.allowed_hosts.iter().any(|a| a.eq_ignore_ascii_case(host));
    if !allowed || (config.mode == Mode::Production && is_loopback(host)) {
        return Err(ApiError::HostNotAllowed);
    }
    if config.mode == Mode::Production {
        let proto = headers.get("x-forwarded-proto").and_then(|v| v.to_str().ok());
        if proto.is_some_and(|p| p != "https") {
            return Err(ApiError::HostNotAllowed);
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = origin.to_str().map_err(|_| ApiError::OriginNotAllowed)?;
        let loopback_dev = config.mode == Mode::Development
            && ["http://127.0.0.1", "http://localhost"]
                .iter()
                .any(|p| origin == *p || origin.starts_with(&format!("{p}:")));
        if !loopback_dev && !config.allowed_origins.iter().any(|o| o == origin) {
            return Err(ApiError::OriginNotAllowed);
        }
    }
    let limits = group.limits(state);
    let declared = headers.get(CONTENT_LENGTH).and_then(|v| v.to_str().ok()).and_then(|v| v.parse::<usize>().ok());
    if declared.is_some_and(|n| n > limits.body_bytes) {
        return Err(ApiError::PayloadTooLarge { limit: limits.body_bytes });
    }
    Ok(())
}

/// The pre-auth per-IP window. Its shared count (if any) overlaps the request's work:
/// `authenticate` awaits it before anything with an effect, the pipeline after the rest.
fn limit_ip(state: &AppState, group: Group, ip: &str) -> Result<Window, ApiError> {
    let limit = group.limits(state).ip_per_minute;
    Ok(state.limits.start(format!("ip:{group:?}:{ip}"), limit, state.services.clock.epoch())?)
}

/// The pipeline every route group runs behind (`from_fn_with_state((state, group), pipeline)`).
pub async fn pipeline(State((state, group)): State<(AppState, Group)>, mut req: Request, next: Next) -> Response {
    let request_id = req
        .headers()
        .get(REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| redact::safe_request_id(v))
        .map(str::to_owned)
        .unwrap_or_else(|| format!("req_{}", random_hex(12)));
    req.extensions_mut().insert(RequestId(request_id.clone()));
    req.extensions_mut().insert(group);
    let ip = req.extensions().get::<ClientIp>().map(|c| c.0.clone()).unwrap_or_else(|| "unknown".into());
    let metadata_url = resource_metadata_url(&state.services.config.public_base_url, group);
    let (method, started) = (req.method().clone(), std::time::Instant::now());

    let mut res = match admit(&state, group, req.headers()).and_then(|()| limit_ip(&state, group, &ip)) {
        Ok(window) => {
            let first = if group.gates_in_authenticate() { Ok(()) } else { window.verdict().await };
            if let Err(refusal) = first {
                ApiError::from(refusal).into_response()
            } else {
                req.extensions_mut().insert(window.clone());
                let res = next.run(req).await;
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
        res = render_error(&err, &request_id, &metadata_url);
    }
    // One access line per request for operators (alert on codes such as outcome_unknown,
    // run_busy, invalid_token): no path, header, query or body, so nothing caller-supplied.
    tracing::info!(
        request_id,
        group = ?group,
        %method,
        status = res.status().as_u16(),
        code = code.unwrap_or("ok"),
        latency_ms = started.elapsed().as_millis() as u64,
        "request"
    );
    let h = res.headers_mut();
    h.insert(CACHE_CONTROL, HeaderValue::from_static("no-store"));
    h.insert(PRAGMA, HeaderValue::from_static("no-cache"));
    h.insert(REQUEST_ID, HeaderValue::from_str(&request_id).expect("safe request id"));
    res
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
fn run_route(path: &str) -> (Option<&str>, Option<RunMutation>) {
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
        let identity =
            binding_hash(&token.issuer, &token.tenant, &state.services.config.oauth.provider, &token.subject);
        let limit = group.limits(state).principal_per_minute;
        let window =
            state.limits.start(format!("principal:{group:?}:{identity}"), limit, state.services.clock.epoch())?;
        let (caller, verdict) = tokio::join!(state.services.resolve_with(token, prefetch), window.verdict());
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

/// Strict JSON body: `application/json`, within the group's limit, no unknown fields.
pub struct JsonBody<T>(pub T);

impl<T: DeserializeOwned> FromRequest<AppState> for JsonBody<T> {
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
        let bytes =
            axum::body::to_bytes(req.into_body(), limit).await.map_err(|_| ApiError::PayloadTooLarge { limit })?;
        parse_strict(&bytes).map(JsonBody)
    }
}

/// Parses a strict request value; the message never echoes caller values.
pub fn parse_strict<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    serde_json::from_slice(bytes).map_err(|e| {
        let msg = e.to_string();
        match redact::unknown_field_name(&msg) {
            Some(name) => ApiError::InvalidRequest(format!("unknown field {name:?}")),
            None if msg.starts_with("unknown field") => ApiError::InvalidRequest("unknown field".into()),
            None => ApiError::InvalidRequest(redact::scrub_message(&msg)),
        }
    })
}

/// A run-shaped JSON response with its weak ETag (from `version`).
pub fn run_response(status: StatusCode, body: serde_json::Value) -> Response {
    let etag = body.get("version").and_then(|v| v.as_u64()).map(|v| format!("W/\"v{v}\""));
    let mut res = (status, axum::Json(body)).into_response();
    if let Some(tag) = etag {
        res.headers_mut().insert(http::header::ETAG, HeaderValue::from_str(&tag).expect("ascii etag"));
    }
    res
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
