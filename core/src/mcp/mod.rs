//! The MCP facade: `POST /mcp`, stateless Streamable HTTP with JSON responses on the
//! `rmcp` SDK, behind the shared HTTP pipeline. Before the SDK sees a message this
//! module reads the body (limit), preflights the JSON-RPC envelope, authenticates the
//! bearer and applies the principal rate limit; the principal then travels to the tool
//! handlers in the request extensions. Tools frame the same `Services` calls as REST.

pub mod catalog;
pub mod device_check;
pub mod preflight;
pub mod rooms;
pub mod schema;
pub mod server;

use std::sync::Arc;

use axum::Router;
use axum::body::Body;
use axum::extract::{Request, State};
use axum::response::{IntoResponse, Response};
use axum::routing::post;
use http::header::{ACCEPT, CONTENT_TYPE};
use http::{HeaderValue, StatusCode};
use rmcp::transport::streamable_http_server::session::never::NeverSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};
use serde_json::Value;

use crate::error::ApiError;
use crate::http::{AppState, Group, authenticate, pipeline, read_body};
use crate::service::runs::{RunMutation, prefetch_keys};
use preflight::{Envelope, Rejection};
use server::HelixMcp;

pub const PATH: &str = "/mcp";

type McpService = StreamableHttpService<HelixMcp, NeverSessionManager>;

/// `tools/list` results the SDK produced, keyed by everything its verdict on a plain
/// `tools/list` depends on ([`cache_key`]). The catalog is the same for every caller (it
/// is never filtered by scope), so each accepted request shape is answered by the SDK once.
type ToolsCache = Arc<std::sync::Mutex<std::collections::HashMap<Vec<u8>, Arc<str>>>>;

/// Distinct request shapes kept; the cache is emptied when full, so arbitrary headers
/// can cost a client cache misses, never memory.
const TOOLS_CACHE_ENTRIES: usize = 64;

/// Request headers the SDK never reads (per-request values): left out of the cache key.
/// Every other header is part of it, so a header a future SDK starts to check can only
/// cause a cache miss, never a cached answer to a request the SDK would refuse.
const UNREAD_HEADERS: &[&str] = &[
    "authorization",
    "x-request-id",
    "content-length",
    "user-agent",
    "accept-encoding",
    "connection",
    "traceparent",
    "tracestate",
    "x-amzn-trace-id",
    "x-forwarded-for",
    "x-forwarded-proto",
    "x-forwarded-port",
];

#[derive(Clone)]
struct McpState {
    app: AppState,
    service: McpService,
    tools: ToolsCache,
}

pub fn router(state: AppState) -> Router {
    let config = &state.services.config;
    let transport = StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        // The pipeline already admitted Host and Origin; the SDK's own Host check
        // (loopback only by default) gets the same allowlist so it agrees.
        .with_allowed_hosts(config.allowed_hosts.iter().cloned())
        .with_max_request_body_bytes(config.mcp_limits.body_bytes);
    let factory_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(HelixMcp::new(factory_state.clone())),
        Arc::new(NeverSessionManager::default()),
        transport,
    );
    Router::new()
        .route(PATH, post(handle).fallback(method_not_allowed))
        .with_state(McpState { app: state.clone(), service, tools: ToolsCache::default() })
        .layer(axum::middleware::from_fn_with_state((state, Group::Mcp), pipeline))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

fn rejection(r: Rejection) -> Response {
    (StatusCode::BAD_REQUEST, axum::Json(r.body())).into_response()
}

fn is_json(value: Option<&HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// Every answer here is JSON, so a client that accepts JSON (or says nothing) is
/// served even when it does not also list `text/event-stream`, which the SDK insists on.
fn admits_json(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|v| v.to_str().ok()) else { return true };
    accept
        .split(',')
        .map(|m| m.split(';').next().unwrap_or("").trim())
        .any(|m| m.eq_ignore_ascii_case("application/json") || m == "*/*" || m.eq_ignore_ascii_case("application/*"))
}

async fn handle(State(mcp): State<McpState>, req: Request) -> Result<Response, ApiError> {
    let (mut parts, body) = req.into_parts();
    if !is_json(parts.headers.get(CONTENT_TYPE)) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let limit = mcp.app.services.config.mcp_limits.body_bytes;
    let bytes = read_body(body, limit).await?;
    let envelope = match preflight::check(&bytes) {
        Ok(e) => e,
        Err(r) => return Ok(rejection(r)),
    };
    let target = run_target(&bytes);
    let plan = |identity: &str| match &target {
        Some(t) => prefetch_keys(identity, &t.run_id, t.mutation.zip(t.idempotency_key.as_deref())),
        None => vec![],
    };
    let caller = authenticate(&mcp.app, &parts, plan).await?;
    parts.extensions.insert(caller);
    if admits_json(parts.headers.get(ACCEPT)) {
        parts.headers.insert(ACCEPT, HeaderValue::from_static("application/json, text/event-stream"));
    }
    let cached = match envelope {
        Envelope::Request { method: "tools/list" } => plain_tools_list(&bytes, &parts),
        _ => None,
    };
    if let Some((key, id)) = &cached
        && let Some(result) = mcp.tools.lock().expect("tools cache").get(key).cloned()
    {
        // The result is kept serialized: only the id is written per request.
        let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
        return Ok(([(CONTENT_TYPE, "application/json")], message).into_response());
    }
    let res = mcp.service.handle(Request::from_parts(parts, Body::from(bytes))).await.map(Body::new);
    Ok(match envelope {
        Envelope::Request { method: "tools/list" } => {
            let (res, result) = with_security_schemes(res).await;
            if let (Some((key, _)), Some(result)) = (cached, result) {
                let mut tools = mcp.tools.lock().expect("tools cache");
                if tools.len() >= TOOLS_CACHE_ENTRIES {
                    tools.clear();
                }
                tools.insert(key, Arc::from(result.to_string()));
            }
            res
        }
        _ => res,
    })
}

/// A `tools/list` without params (no cursor, no `_meta`) whose id the SDK reads as a
/// JSON-RPC id (an i64 or a string): its cache key and id.
fn plain_tools_list(body: &[u8], parts: &http::request::Parts) -> Option<(Vec<u8>, Value)> {
    let message: Value = serde_json::from_slice(body).ok()?;
    let plain = message.get("params").is_none_or(|p| p.as_object().is_some_and(|o| o.is_empty()));
    let id = message.get("id")?;
    let id_kind = match id {
        Value::Number(n) if n.is_i64() => b'n',
        Value::String(_) => b's',
        // Beyond i64 (or anything else) the SDK decides every time.
        _ => return None,
    };
    plain.then(|| (cache_key(parts, id_kind), id.clone()))
}

/// Everything the SDK's verdict on a plain `tools/list` depends on, besides the id's
/// value: the URI authority (its Host check falls back to it), every request header
/// except [`UNREAD_HEADERS`] as the SDK will see it (names sorted, values in order),
/// and the id's JSON type. A request is answered from the cache only when the SDK
/// already accepted one with exactly this key.
fn cache_key(parts: &http::request::Parts, id_kind: u8) -> Vec<u8> {
    let mut key = vec![id_kind, 0];
    key.extend_from_slice(parts.uri.authority().map(|a| a.as_str()).unwrap_or("").as_bytes());
    let mut names: Vec<&http::HeaderName> =
        parts.headers.keys().filter(|n| !UNREAD_HEADERS.contains(&n.as_str())).collect();
    names.sort_by(|a, b| a.as_str().cmp(b.as_str()));
    for name in names {
        for value in parts.headers.get_all(name) {
            key.push(0);
            key.extend_from_slice(name.as_str().as_bytes());
            key.push(0);
            key.extend_from_slice(value.as_bytes());
        }
    }
    key
}

/// The run a `tools/call` addresses, so its first data read joins the principal's.
struct RunTarget {
    run_id: String,
    mutation: Option<RunMutation>,
    idempotency_key: Option<String>,
}

fn run_target(body: &[u8]) -> Option<RunTarget> {
    #[derive(serde::Deserialize)]
    struct Msg {
        params: Option<Params>,
    }
    #[derive(serde::Deserialize)]
    struct Params {
        name: String,
        arguments: Option<Args>,
    }
    #[derive(serde::Deserialize)]
    struct Args {
        run_id: Option<String>,
        idempotency_key: Option<String>,
    }
    let params = serde_json::from_slice::<Msg>(body).ok()?.params?;
    let args = params.arguments?;
    let mutation = match catalog::find(&params.name)?.op {
        catalog::Op::RunContinue => Some(RunMutation::Continue),
        catalog::Op::RunCancel => Some(RunMutation::Cancel),
        _ => None,
    };
    Some(RunTarget { run_id: args.run_id?, mutation, idempotency_key: args.idempotency_key })
}

/// The SDK's tool model has no `securitySchemes` member, so the standard field is added
/// to each listed tool here, from the catalog (the `_meta` copy is set by the SDK model).
async fn with_security_schemes(res: Response<Body>) -> (Response<Body>, Option<Value>) {
    if res.status() != StatusCode::OK || !is_json(res.headers().get(CONTENT_TYPE)) {
        return (res, None);
    }
    let (parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return (ApiError::internal(std::io::Error::other("unreadable tools/list response")).into_response(), None);
    };
    let Ok(mut message) = serde_json::from_slice::<Value>(&bytes) else {
        return (Response::from_parts(parts, Body::from(bytes)), None);
    };
    if let Some(tools) = message.pointer_mut("/result/tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut() {
            let spec = tool.get("name").and_then(Value::as_str).and_then(catalog::find);
            if let (Some(spec), Some(obj)) = (spec, tool.as_object_mut()) {
                obj.insert("securitySchemes".into(), catalog::security_schemes(spec));
            }
        }
    }
    let result = message.get("result").filter(|r| r.get("tools").is_some()).cloned();
    let mut parts = parts;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    (Response::from_parts(parts, Body::from(message.to_string())), result)
}
