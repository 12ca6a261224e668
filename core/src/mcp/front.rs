//! The one MCP front, instantiated per served catalog (`/mcp`, `/mcp/device-check`):
//! stateless Streamable HTTP with JSON responses on the `rmcp` SDK, behind the shared HTTP
//! pipeline. Before the SDK sees a message the front reads the body (limit, timeout),
//! preflights the JSON-RPC envelope against its catalog, authenticates the bearer (with
//! the row's prefetch) and applies the principal rate limit; the principal then travels to
//! the tool handlers in the request extensions. It adds `securitySchemes` to listed tools,
//! caches the SDK's verdicts per request shape and serves known shapes directly. Knows the
//! catalog only through its rows; never a tool by name.

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

use super::apps;
use super::catalog::{Catalog, Front, Prefetch};
use super::preflight::{self, Checked, Envelope, Rejection};
use super::server::{self, HelixMcp};
use crate::error::ApiError;
use crate::http::{AppState, authenticate, pipeline, read_body};
use crate::service::runs::{RunMutation, prefetch_keys};

type McpService = StreamableHttpService<HelixMcp, NeverSessionManager>;

/// `tools/list` results the SDK produced, keyed by everything its verdict on a plain
/// `tools/list` depends on ([`cache_key`]). The catalog is the same for every caller (it
/// is never filtered by scope), so each accepted request shape is answered by the SDK once.
type ToolsCache = Arc<std::sync::Mutex<std::collections::HashMap<Vec<u8>, Arc<str>>>>;

/// Keys ([`cache_key`]) of `tools/call` shapes the SDK accepted: later calls of the same
/// shape are dispatched directly ([`direct_call`]).
type CallShapes = Arc<std::sync::Mutex<std::collections::HashSet<Vec<u8>>>>;

/// Distinct request shapes kept (per cache); a cache is emptied when full, so arbitrary
/// headers can cost a client cache misses (the SDK's path), never memory.
const SHAPE_CACHE_ENTRIES: usize = 64;

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

struct McpState {
    app: AppState,
    front: &'static Front,
    service: McpService,
    handler: Arc<HelixMcp>,
    tools: ToolsCache,
    calls: CallShapes,
}

/// The rmcp transport of every front: stateless, JSON responses, no SSE.
fn transport_config(config: &crate::config::Config) -> StreamableHttpServerConfig {
    StreamableHttpServerConfig::default()
        .with_legacy_session_mode(false)
        .with_json_response(true)
        .with_sse_keep_alive(None)
        .with_sse_retry(None)
        // The pipeline already admitted Host and Origin; the SDK's own Host check
        // (loopback only by default) gets the same allowlist so it agrees.
        .with_allowed_hosts(config.allowed_hosts.iter().cloned())
        .with_max_request_body_bytes(config.mcp_limits.body_bytes)
}

/// The front's route, behind the pipeline of its group.
pub fn router(front: &'static Front, state: AppState) -> Router {
    let transport = transport_config(&state.services.config);
    let factory_state = state.clone();
    let service = StreamableHttpService::new(
        move || Ok(HelixMcp::new(factory_state.clone(), front)),
        Arc::new(NeverSessionManager::default()),
        transport,
    );
    Router::new()
        .route(front.path, post(handle).fallback(method_not_allowed))
        // Shared, not cloned per request (the SDK service holds its whole config).
        .with_state(Arc::new(McpState {
            app: state.clone(),
            front,
            service,
            handler: Arc::new(HelixMcp::new(state.clone(), front)),
            tools: ToolsCache::default(),
            calls: CallShapes::default(),
        }))
        .layer(axum::middleware::from_fn_with_state((state, front.group), pipeline))
}

async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed { allow: "POST" }
}

fn rejection(r: Rejection) -> Response {
    (r.status(), axum::Json(r.body())).into_response()
}

fn is_json(value: Option<&HeaderValue>) -> bool {
    value
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.split(';').next())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("application/json"))
}

/// The `Accept` the SDK requires of a POST (it answers every one here with JSON).
const SDK_ACCEPT: &str = "application/json, text/event-stream";

/// Every answer here is JSON, so a client that accepts JSON (or says nothing) is
/// served even when it does not also list `text/event-stream`, which the SDK insists on.
fn admits_json(accept: Option<&HeaderValue>) -> bool {
    let Some(accept) = accept.and_then(|v| v.to_str().ok()) else { return true };
    accept
        .split(',')
        .map(|m| m.split(';').next().unwrap_or("").trim())
        .any(|m| m.eq_ignore_ascii_case("application/json") || m == "*/*" || m.eq_ignore_ascii_case("application/*"))
}

async fn handle(State(mcp): State<Arc<McpState>>, req: Request) -> Result<Response, ApiError> {
    let (mut parts, body) = req.into_parts();
    if !is_json(parts.headers.get(CONTENT_TYPE)) {
        return Err(ApiError::UnsupportedMediaType);
    }
    let limit = mcp.app.services.config.mcp_limits.body_bytes;
    let bytes = read_body(body, limit).await?;
    let catalog = mcp.front.catalog;
    let Checked { envelope, mut message } = match preflight::check_message(&bytes, catalog) {
        Ok(c) => c,
        Err(r) => return Ok(rejection(r)),
    };
    let target = run_target(catalog, &message);
    let plan = |identity: &str| match &target {
        Some(t) => prefetch_keys(identity, t.run_id, t.mutation.zip(t.idempotency_key)),
        None => vec![],
    };
    let caller = authenticate(&mcp.app, &parts, plan).await?;
    parts.extensions.insert(caller);
    // Rewritten only when it is not already the SDK's: an insert into hyper's full header
    // map regrows it, which is a measurable share of a direct call.
    let mut accept = parts.headers.get_all(ACCEPT).iter();
    let as_sdk = accept.next().is_some_and(|v| v.as_bytes() == SDK_ACCEPT.as_bytes()) && accept.next().is_none();
    if !as_sdk && admits_json(parts.headers.get(ACCEPT)) {
        parts.headers.insert(ACCEPT, HeaderValue::from_static(SDK_ACCEPT));
    }
    let shape = match envelope {
        Envelope::Request { method: method @ ("tools/list" | "tools/call") } => sdk_shape(method, &message, &parts),
        _ => None,
    };
    if let Some((key, id)) = &shape {
        if envelope == (Envelope::Request { method: "tools/list" })
            && let Some(result) = mcp.tools.lock().expect("tools cache").get(key).cloned()
        {
            // The result is kept serialized: only the id is written per request.
            let message = format!(r#"{{"jsonrpc":"2.0","id":{id},"result":{result}}}"#);
            return Ok(([(CONTENT_TYPE, "application/json")], message).into_response());
        }
        let known_call = envelope == (Envelope::Request { method: "tools/call" })
            && mcp.calls.lock().expect("call shapes").contains(key);
        if known_call && let Some(res) = direct_call(&mcp, &mut parts, &mut message, id).await {
            return Ok(res);
        }
    }
    let res = mcp.service.handle(Request::from_parts(parts, Body::from(bytes))).await.map(Body::new);
    Ok(match envelope {
        Envelope::Request { method: "tools/list" } => {
            let (res, result) = with_security_schemes(catalog, res).await;
            if let (Some((key, _)), Some(result)) = (shape, result) {
                let mut tools = mcp.tools.lock().expect("tools cache");
                if tools.len() >= SHAPE_CACHE_ENTRIES {
                    tools.clear();
                }
                tools.insert(key, Arc::from(result.to_string()));
            }
            res
        }
        Envelope::Request { method: "tools/call" } => match shape {
            Some((key, _)) => learn_call_shape(&mcp, key, res).await,
            None => res,
        },
        Envelope::Request { method: "initialize" } if catalog.has_views() => apps_session(&message, res),
        _ => res,
    })
}

/// A handshake that declared the MCP Apps extension is given a session id that says so
/// ([`apps::SESSION_PREFIX`]): the transport is stateless, and the client echoes the id
/// on every later request, so `tools/list` and the resource reads can tell. It holds no
/// server state; any other handshake gets no session id, as before.
fn apps_session(message: &serde_json::Map<String, Value>, mut res: Response<Body>) -> Response<Body> {
    let caps = message.get("params").and_then(|p| p.get("capabilities"));
    let declared = caps
        .and_then(|c| serde_json::from_value::<rmcp::model::ClientCapabilities>(c.clone()).ok())
        .is_some_and(|c| apps::declared(&c));
    if declared && res.status() == StatusCode::OK {
        let id = HeaderValue::from_str(&apps::session_id()).expect("an ASCII session id");
        res.headers_mut().insert("mcp-session-id", id);
    }
    res
}

/// A `tools/call` answered without the SDK's per-request machinery: the preflight already
/// parsed and checked the message, and the SDK already accepted a call of exactly this
/// request shape ([`sdk_shape`]), so what is left of its work is dispatching to the
/// handler and framing the result, done here with the SDK's own types and serializer
/// (the bytes are the ones it would write). None when the message is not a catalog call.
async fn direct_call(
    mcp: &McpState,
    parts: &mut http::request::Parts,
    message: &mut serde_json::Map<String, Value>,
    id: &Value,
) -> Option<Response> {
    let params = message.get_mut("params")?.as_object_mut()?;
    let spec = params.get("name").and_then(Value::as_str).and_then(|n| mcp.front.catalog.find(n))?;
    let id: rmcp::model::RequestId = serde_json::from_value(id.clone()).ok()?;
    let arguments = match params.remove("arguments") {
        Some(a @ Value::Object(_)) => a,
        None => Value::Object(Default::default()),
        Some(_) => return None,
    };
    let output = mcp.handler.call(spec, &arguments, server::CallContext::take(&mut parts.extensions)).await;
    // What the SDK's handler does to a result for a peer before 2026-07-28 (the only
    // revisions a shape admits) is the legacy wire shape, which `legacy_response` writes.
    Some(match output.legacy_response(&id) {
        Ok(body) => ([(CONTENT_TYPE, "application/json")], body).into_response(),
        Err(e) => ApiError::internal(e).into_response(),
    })
}

/// Records the shape of a `tools/call` the SDK answered with a JSON-RPC result (the SDK
/// accepted its headers; whatever the tool said), so later calls of that shape go direct.
async fn learn_call_shape(mcp: &McpState, key: Vec<u8>, res: Response<Body>) -> Response<Body> {
    if res.status() != StatusCode::OK || !is_json(res.headers().get(CONTENT_TYPE)) {
        return res;
    }
    let (parts, body) = res.into_parts();
    let Ok(bytes) = axum::body::to_bytes(body, usize::MAX).await else {
        return ApiError::internal(std::io::Error::other("unreadable tools/call response")).into_response();
    };
    #[derive(serde::Deserialize)]
    struct Answer {
        result: Option<serde::de::IgnoredAny>,
    }
    if serde_json::from_slice::<Answer>(&bytes).is_ok_and(|a| a.result.is_some()) {
        let mut calls = mcp.calls.lock().expect("call shapes");
        if calls.len() >= SHAPE_CACHE_ENTRIES {
            calls.clear();
        }
        calls.insert(key);
    }
    Response::from_parts(parts, Body::from(bytes))
}

/// Protocol revisions whose `tools/call` verdict in the SDK depends only on the request
/// headers (from 2026-07-28 on, `Mcp-*` standard headers are checked against the body).
const HEADER_ONLY_VERSIONS: &[&str] = &["2025-03-26", "2025-06-18", "2025-11-25"];

/// The shape of a plain `tools/list` (no params) or a `tools/call` without `_meta`, whose
/// id the SDK reads as a JSON-RPC id (an i64 or a string), sent with a protocol revision
/// of [`HEADER_ONLY_VERSIONS`] (or none) and no other `Mcp-*` header: its cache key and
/// id. For such a message the SDK's verdict depends on the key alone.
fn sdk_shape(
    method: &str,
    message: &serde_json::Map<String, Value>,
    parts: &http::request::Parts,
) -> Option<(Vec<u8>, Value)> {
    let params = message.get("params");
    let plain = match method {
        "tools/list" => params.is_none_or(|p| p.as_object().is_some_and(|o| o.is_empty())),
        _ => params.and_then(Value::as_object).is_some_and(|p| !p.contains_key("_meta")),
    };
    let version = parts.headers.get(MCP_PROTOCOL_VERSION);
    let headers_plain = version.is_none_or(|v| HEADER_ONLY_VERSIONS.iter().any(|h| v.as_bytes() == h.as_bytes()))
        && parts.headers.keys().all(|n| !n.as_str().starts_with("mcp-") || n == MCP_PROTOCOL_VERSION);
    let id = message.get("id")?;
    let id_kind = match id {
        Value::Number(n) if n.is_i64() => b'n',
        Value::String(_) => b's',
        // Beyond i64 (or anything else) the SDK decides every time.
        _ => return None,
    };
    (plain && headers_plain).then(|| (cache_key(method, parts, id_kind), id.clone()))
}

const MCP_PROTOCOL_VERSION: &str = "mcp-protocol-version";

/// Everything the SDK's verdict on a message of [`sdk_shape`] depends on, besides the
/// id's value: the method, the URI authority (its Host check falls back to it), every
/// request header except [`UNREAD_HEADERS`] as the SDK will see it (names sorted, values
/// in order), and the id's JSON type. A request is answered from the cache (or directly)
/// only when the SDK already accepted one with exactly this key.
fn cache_key(method: &str, parts: &http::request::Parts, id_kind: u8) -> Vec<u8> {
    let mut key = method.as_bytes().to_vec();
    key.extend_from_slice(&[0, id_kind, 0]);
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
struct RunTarget<'a> {
    run_id: &'a str,
    mutation: Option<RunMutation>,
    idempotency_key: Option<&'a str>,
}

fn run_target<'a>(catalog: &'static Catalog, message: &'a serde_json::Map<String, Value>) -> Option<RunTarget<'a>> {
    let params = message.get("params")?;
    let args = params.get("arguments")?;
    let mutation = match catalog.find(params.get("name")?.as_str()?)?.prefetch {
        Prefetch::Nothing => return None,
        Prefetch::Run => None,
        Prefetch::RunMutation(m) => Some(m),
    };
    let idempotency_key = match args.get("idempotency_key") {
        None | Some(Value::Null) => None,
        Some(k) => Some(k.as_str()?),
    };
    Some(RunTarget { run_id: args.get("run_id")?.as_str()?, mutation, idempotency_key })
}

/// The SDK's tool model has no `securitySchemes` member, so the standard field is added
/// to each listed tool here, from the catalog (the `_meta` copy is set by the SDK model).
async fn with_security_schemes(catalog: &'static Catalog, res: Response<Body>) -> (Response<Body>, Option<Value>) {
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
            let spec = tool.get("name").and_then(Value::as_str).and_then(|n| catalog.find(n));
            if let (Some(spec), Some(obj)) = (spec, tool.as_object_mut()) {
                obj.insert("securitySchemes".into(), super::catalog::security_schemes(spec));
            }
        }
    }
    let result = message.get("result").filter(|r| r.get("tools").is_some()).cloned();
    let mut parts = parts;
    parts.headers.remove(http::header::CONTENT_LENGTH);
    (Response::from_parts(parts, Body::from(message.to_string())), result)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::mcp::catalog::MCP;
    use serde_json::json;

    fn parts(headers: &[(&str, &str)]) -> http::request::Parts {
        let mut req = http::Request::builder().method("POST").uri("http://127.0.0.1:9000/mcp");
        for (name, value) in headers {
            req = req.header(*name, *value);
        }
        req.body(()).unwrap().into_parts().0
    }

    fn message(v: Value) -> serde_json::Map<String, Value> {
        v.as_object().unwrap().clone()
    }

    fn call(id: Value, params: Value) -> serde_json::Map<String, Value> {
        message(json!({"jsonrpc": "2.0", "id": id, "method": "tools/call", "params": params}))
    }

    #[test]
    fn only_calls_whose_sdk_verdict_depends_on_the_headers_alone_have_a_shape() {
        let v = ("mcp-protocol-version", "2025-11-25");
        let plain = json!({"name": "helix_run_inspect", "arguments": {"run_id": "run_1"}});
        let shape = |m: &serde_json::Map<String, Value>, h: &[(&str, &str)]| sdk_shape("tools/call", m, &parts(h));
        let (key, id) = shape(&call(json!(7), plain.clone()), &[v]).expect("a plain call has a shape");
        assert_eq!(id, json!(7));
        assert_eq!(shape(&call(json!(8), plain.clone()), &[v]).unwrap().0, key, "the id's value is not in the key");
        assert_ne!(shape(&call(json!("s"), plain.clone()), &[v]).unwrap().0, key, "the id's type is");
        assert_eq!(
            shape(&call(json!(7), plain.clone()), &[v, ("authorization", "Bearer x"), ("x-request-id", "r")])
                .unwrap()
                .0,
            key,
            "per-request headers the SDK never reads are not in the key"
        );
        assert_ne!(shape(&call(json!(7), plain.clone()), &[v, ("x-other", "1")]).unwrap().0, key);
        assert!(shape(&call(json!(7), plain.clone()), &[]).is_some(), "no version header: the SDK's default");
        assert_ne!(
            sdk_shape("tools/list", &message(json!({"jsonrpc": "2.0", "id": 7, "method": "tools/list"})), &parts(&[v]))
                .unwrap()
                .0,
            key,
            "the method is in the key"
        );
        let with_meta =
            json!({"name": "helix_run_inspect", "arguments": {"run_id": "r"}, "_meta": {"progressToken": 1}});
        for (m, h) in [
            (call(json!(7), with_meta), vec![v]),
            (call(json!(u64::MAX), plain.clone()), vec![v]),
            (call(json!(7), plain.clone()), vec![("mcp-protocol-version", "2026-07-28")]),
            (call(json!(7), plain.clone()), vec![("mcp-protocol-version", "1999-01-01")]),
            (call(json!(7), plain.clone()), vec![v, ("mcp-method", "tools/call")]),
            (call(json!(7), plain.clone()), vec![v, ("mcp-param-run-id", "r")]),
        ] {
            assert!(shape(&m, &h).is_none(), "{m:?} {h:?}");
        }
    }

    #[test]
    fn the_run_target_comes_from_the_parsed_message() {
        let m = call(
            json!(1),
            json!({"name": "helix_run_continue", "arguments": {"run_id": "run_1", "idempotency_key": "k-12345678", "request": {}}}),
        );
        let t = run_target(&MCP, &m).unwrap();
        assert_eq!(
            (t.run_id, t.mutation, t.idempotency_key),
            ("run_1", Some(RunMutation::Continue), Some("k-12345678"))
        );
        let m = call(json!(1), json!({"name": "helix_run_inspect", "arguments": {"run_id": "run_2"}}));
        let t = run_target(&MCP, &m).unwrap();
        assert_eq!((t.run_id, t.mutation, t.idempotency_key), ("run_2", None, None));
        assert!(run_target(&MCP, &call(json!(1), json!({"name": "helix_room_list", "arguments": {}}))).is_none());
        assert!(run_target(&MCP, &message(json!({"jsonrpc": "2.0", "id": 1, "method": "ping"}))).is_none());
    }
}
